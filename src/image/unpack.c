/* SPDX-License-Identifier: MIT */
/* Layer tars unpacked into overlayfs lower dirs. The security contract, for a layer crafted by
 * an attacker:
 *
 * Paths. Every entry is written through directory fds opened one component at a time beneath
 * the layer root (openat2 RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS, O_NOFOLLOW without it), so no
 * entry can reach outside the layer: absolute paths, ".." components, paths through symlinks,
 * device nodes and hard links to targets outside the layer are refused, and a refused entry
 * aborts the whole layer (nothing of it is left). OCI whiteouts become overlay whiteouts:
 * ".wh.NAME" a 0/0 char device, ".wh..wh..opq" the trusted.overlay.opaque=y xattr of its
 * directory.
 *
 * Owners. Layers keep the image's own ids, to be mapped into each workspace's range when
 * mounted; every uid and gid must therefore lie in the 65536-id container range: an id of
 * 65536 or more becomes 65534 (the overflow "nobody"), so no file is ever left owned by a host
 * id (a setuid file owned 0:70000 comes out 0:65534, not owned by a host group).
 *
 * Modes. Permission bits are kept as the image has them, setuid and setgid included: they are
 * applied after the owner (chown clears them) and mean nothing on the host, since images/ is
 * 0700 and the container's rootfs overlay is mounted nosuid.
 *
 * Extended attributes. Only user.* xattrs are restored. security.* (security.capability, file
 * capabilities, above all; SELinux and IMA labels too) and every other namespace (system.*,
 * POSIX ACLs) are dropped; trusted.overlay.* and user.overlay.*, which would steer the overlay
 * mount, refuse the layer; other trusted.* are dropped.
 *
 * Nothing else. Entries are written by this file, not by archive_write_disk(), so libarchive
 * restores no ACLs, file flags (chattr), xattrs or owners of its own: no ARCHIVE_EXTRACT_*
 * flag applies. What is written is the type, owner (as above), mode, mtime, file data and
 * user.* xattrs.
 *
 * Bounds. The decompressed size of a layer (the whole tar stream) and the number of entries are
 * bounded by the caller's limits, checked while the stream is read (layer_diff_id(), which runs
 * before anything is unpacked) and while entries are applied; going past one aborts the layer
 * with a message naming the layer and the limit.
 *
 * Durability. Before a layer dir is moved into place, every file and directory written into it
 * is fsync()ed (each file's writeback started as soon as its data is written, so that the
 * fsyncs at the end mostly find it done): the cost is the layer's own bytes, never what other
 * writers on the filesystem have pending (a syncfs() waited for all of it). */

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <openssl/evp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "basic/cleanup.h"
#include "image/image-internal.h"

#define WHITEOUT_PREFIX ".wh."
#define WHITEOUT_OPAQUE ".wh..wh..opq"
#define READ_BLOCK (64u << 10)
#define TAR_BLOCK (1u << 20)

DEFINE_TRIVIAL_CLEANUP_FUNC(struct archive *, archive_read_free);
#define _cleanup_archive_ _cleanup_(archive_read_freep)

struct unpack {
	int root_fd;	   /* the layer's temporary directory */
	const char *root;  /* its path */
	const char *layer; /* names the layer in messages */
	const char *entry; /* the entry being applied, as the tar names it */
	const struct layer_limits *lim;
	uint64_t entries, file_bytes;
	struct station_error *e;
};

static int refuse(struct unpack *u, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* An id of the image, kept only when it lies in the container range (see above). */
static uint32_t id_contain(la_int64_t id)
{
	return id >= 0 && id < LAYER_ID_RANGE ? (uint32_t)id : LAYER_ID_OVERFLOW;
}

static uid_t entry_uid(struct archive_entry *ent)
{
	return id_contain(archive_entry_uid(ent));
}

static gid_t entry_gid(struct archive_entry *ent)
{
	return id_contain(archive_entry_gid(ent));
}

static int refuse(struct unpack *u, int err, const char *fmt, ...)
{
	char cause[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(cause, sizeof cause, fmt, ap);
	va_end(ap);
	return station_error_set(u->e, err, NULL, "layer %s entry \"%s\": %s", u->layer, u->entry,
				 cause);
}

/* Opens one path component below dfd, never following a symlink. */
static int openat_beneath(int dfd, const char *name, int flags)
{
	static bool no_openat2;
	struct open_how how = {
		.flags = flags | O_NOFOLLOW | O_CLOEXEC,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS |
			   RESOLVE_NO_XDEV,
	};
	int fd;

	if (!no_openat2) {
		fd = syscall(SYS_openat2, dfd, name, &how, sizeof how);
		if (fd >= 0)
			return fd;
		if (errno != ENOSYS && errno != EPERM)
			return negative_errno();
		no_openat2 = true;
	}
	fd = openat(dfd, name, flags | O_NOFOLLOW | O_CLOEXEC);
	return fd < 0 ? negative_errno() : fd;
}

/* The archive path as components joined by single slashes, without "./", trailing slashes or
 * empty components; "" for the layer root. Refuses absolute paths and "..". */
static int path_normalize(struct unpack *u, const char *in, const char *what, char *out,
			  size_t size)
{
	size_t n = 0;

	if (!in || strlen(in) >= size)
		return refuse(u, -EPERM, "%s is missing or too long", what);
	if (in[0] == '/')
		return refuse(u, -EPERM, "%s is absolute", what);
	for (const char *p = in; *p;) {
		size_t len = strcspn(p, "/");

		if (len == 2 && p[0] == '.' && p[1] == '.')
			return refuse(u, -EPERM, "%s escapes the layer", what);
		if (len > 0 && !(len == 1 && p[0] == '.')) {
			if (n > 0)
				out[n++] = '/';
			memcpy(out + n, p, len);
			n += len;
		}
		p += len;
		p += strspn(p, "/");
	}
	out[n] = '\0';
	return 0;
}

/* Opens the directory holding path (normalized, not ""), creating missing directories when
 * create is set; *ret_name is path's last component. Symlinks and non-directories on the way
 * are refused. */
static int parent_open(struct unpack *u, char *path, bool create, int *ret_fd,
		       const char **ret_name)
{
	_cleanup_close_ int dfd = dup(u->root_fd);
	char *p = path, *slash;

	if (dfd < 0)
		return negative_errno();
	while ((slash = strchr(p, '/'))) {
		int fd;

		*slash = '\0';
		fd = openat_beneath(dfd, p, O_PATH | O_DIRECTORY);
		if (fd == -ENOENT && create && mkdirat(dfd, p, 0755) >= 0)
			fd = openat_beneath(dfd, p, O_PATH | O_DIRECTORY);
		*slash = '/';
		if (fd == -ELOOP || fd == -ENOTDIR || fd == -EXDEV) {
			*slash = '\0';
			int r = refuse(u, -EPERM,
				       "path goes through \"%s\", which is a symlink "
				       "or not a directory",
				       path);
			*slash = '/';
			return r;
		}
		if (fd < 0)
			return refuse(u, fd, "cannot open its directory: %s", strerror(-fd));
		close(dfd);
		dfd = fd;
		p = slash + 1;
	}
	*ret_fd = TAKE_FD(dfd);
	*ret_name = p;
	return 0;
}

/* Makes room for a new entry called name: an existing non-directory goes, an existing
 * directory goes unless the new entry is a directory too (1: kept). */
static int entry_clear(struct unpack *u, int dfd, const char *name, const char *path,
		       bool new_is_dir)
{
	_cleanup_free_ char *full = NULL;
	struct stat st;

	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : negative_errno();
	if (S_ISDIR(st.st_mode)) {
		if (new_is_dir)
			return 1;
		if (asprintf(&full, "%s/%s", u->root, path) < 0)
			return -ENOMEM;
		return rm_rf(full);
	}
	return unlinkat(dfd, name, 0) < 0 ? negative_errno() : 0;
}

static int xattrs_apply(struct unpack *u, int fd, struct archive_entry *ent)
{
	const char *name;
	const void *value;
	size_t size;

	archive_entry_xattr_reset(ent);
	while (archive_entry_xattr_next(ent, &name, &value, &size) == ARCHIVE_OK) {
		/* trusted.overlay.* and user.overlay.* would steer the overlay mount */
		if (strncmp(name, "trusted.overlay.", 16) == 0 ||
		    strncmp(name, "user.overlay.", 13) == 0)
			return refuse(u, -EPERM,
				      "sets xattr \"%s\", which is not allowed in a "
				      "layer",
				      name);
		/* security.capability (file capabilities), other security.*, trusted.*, system.*:
		 * dropped (see the top of this file) */
		if (strncmp(name, "user.", 5) != 0)
			continue;
		if (fsetxattr(fd, name, value, size, 0) < 0)
			return refuse(u, negative_errno(), "cannot set xattr: %s", strerror(errno));
	}
	return 0;
}

/* Owner, mode (after chown, which clears setuid), xattrs (after chown, which clears file
 * capabilities) and, for files, mtime. */
static int metadata_apply(struct unpack *u, int fd, struct archive_entry *ent, bool times)
{
	struct timespec ts[2] = {
		{ archive_entry_atime(ent), archive_entry_atime_nsec(ent) },
		{ archive_entry_mtime(ent), archive_entry_mtime_nsec(ent) },
	};

	if (fchown(fd, entry_uid(ent), entry_gid(ent)) < 0 ||
	    fchmod(fd, archive_entry_perm(ent) & 07777) < 0)
		return refuse(u, negative_errno(), "cannot set owner or mode: %s", strerror(errno));
	if (times && futimens(fd, ts) < 0)
		return refuse(u, negative_errno(), "cannot set times: %s", strerror(errno));
	return xattrs_apply(u, fd, ent);
}

static int file_data_copy(struct unpack *u, struct archive *a, int fd, struct archive_entry *ent)
{
	const void *buf;
	size_t size;
	la_int64_t offset;
	int r;

	while ((r = archive_read_data_block(a, &buf, &size, &offset)) == ARCHIVE_OK) {
		for (size_t done = 0; done < size;) {
			ssize_t k =
				pwrite(fd, (const char *)buf + done, size - done, offset + done);
			if (k < 0 && errno == EINTR)
				continue;
			if (k <= 0)
				return refuse(u, k < 0 ? negative_errno() : -EIO,
					      "cannot write: %s", strerror(errno));
			done += k;
		}
	}
	if (r != ARCHIVE_EOF)
		return refuse(u, -EBADMSG, "truncated or corrupt data: %s",
			      archive_error_string(a) ? archive_error_string(a) : "?");
	if (ftruncate(fd, archive_entry_size(ent)) < 0)
		return negative_errno();
	return 0;
}

static int file_create(struct unpack *u, struct archive *a, struct archive_entry *ent, int dfd,
		       const char *name)
{
	_cleanup_close_ int fd = -1;
	la_int64_t size = archive_entry_size(ent);
	int r;

	/* Sparse entries make files larger than the stream: their sizes count too. */
	u->file_bytes += size > 0 ? (uint64_t)size : 0;
	if (u->lim && u->lim->max_bytes && u->file_bytes > u->lim->max_bytes)
		return station_error_set(u->e, -EFBIG, NULL,
					 "layer %s: its files add up to more than %llu bytes, %s",
					 u->layer, (unsigned long long)u->lim->max_bytes,
					 u->lim->bytes_what);
	fd = openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return refuse(u, negative_errno(), "cannot create: %s", strerror(errno));
	r = file_data_copy(u, a, fd, ent);
	if (r >= 0)
		r = metadata_apply(u, fd, ent, true);
	if (r >= 0) /* writeback under way now: tree_fsync() then mostly waits for nothing */
		(void)sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WRITE);
	return r;
}

static int dir_create(struct unpack *u, struct archive_entry *ent, int dfd, const char *name)
{
	_cleanup_close_ int fd = -1;

	if (mkdirat(dfd, name, 0700) < 0 && errno != EEXIST)
		return refuse(u, negative_errno(), "cannot create directory: %s", strerror(errno));
	fd = openat_beneath(dfd, name, O_RDONLY | O_DIRECTORY);
	if (fd < 0)
		return refuse(u, fd, "cannot open directory: %s", strerror(-fd));
	return metadata_apply(u, fd, ent, false);
}

static int symlink_create(struct unpack *u, struct archive_entry *ent, int dfd, const char *name)
{
	const char *target = archive_entry_symlink(ent);
	struct timespec ts[2] = {
		{ archive_entry_atime(ent), archive_entry_atime_nsec(ent) },
		{ archive_entry_mtime(ent), archive_entry_mtime_nsec(ent) },
	};

	/* The target is only text here: it is resolved later, inside the container's root. */
	if (!target || !*target)
		return refuse(u, -EPERM, "%s", "symlink without a target");
	if (symlinkat(target, dfd, name) < 0 ||
	    fchownat(dfd, name, entry_uid(ent), entry_gid(ent), AT_SYMLINK_NOFOLLOW) < 0 ||
	    utimensat(dfd, name, ts, AT_SYMLINK_NOFOLLOW) < 0)
		return refuse(u, negative_errno(), "cannot create symlink: %s", strerror(errno));
	return 0;
}

static int fifo_create(struct unpack *u, struct archive_entry *ent, int dfd, const char *name)
{
	_cleanup_close_ int fd = -1;

	if (mknodat(dfd, name, S_IFIFO | 0600, 0) < 0)
		return refuse(u, negative_errno(), "cannot create fifo: %s", strerror(errno));
	fd = openat_beneath(dfd, name, O_PATH);
	if (fd < 0)
		return fd;
	if (fchownat(fd, "", entry_uid(ent), entry_gid(ent), AT_EMPTY_PATH) < 0 ||
	    fchmodat(dfd, name, archive_entry_perm(ent) & 0777, 0) < 0)
		return refuse(u, negative_errno(), "cannot set owner or mode: %s", strerror(errno));
	return 0;
}

static int hardlink_create(struct unpack *u, struct archive_entry *ent, int dfd, const char *name)
{
	char target[PATH_MAX];
	_cleanup_close_ int tfd = -1;
	const char *tname;
	struct stat st;
	int r;

	r = path_normalize(u, archive_entry_hardlink(ent), "hard link target", target,
			   sizeof target);
	if (r < 0)
		return r;
	if (!*target)
		return refuse(u, -EPERM, "%s", "hard link to the layer root");
	r = parent_open(u, target, false, &tfd, &tname);
	if (r == -ENOENT || (r >= 0 && fstatat(tfd, tname, &st, AT_SYMLINK_NOFOLLOW) < 0))
		return refuse(u, -EPERM, "hard link target \"%s\" is not in the layer",
			      archive_entry_hardlink(ent));
	if (r < 0)
		return r;
	if (S_ISDIR(st.st_mode))
		return refuse(u, -EPERM, "hard link target \"%s\" is a directory",
			      archive_entry_hardlink(ent));
	if (linkat(tfd, tname, dfd, name, 0) < 0)
		return refuse(u, negative_errno(), "cannot create hard link: %s", strerror(errno));
	return 0;
}

/* ".wh..wh..opq": the directory holding it hides what lower layers have there. */
static int opaque_mark(struct unpack *u, int dfd)
{
	_cleanup_close_ int fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0 || fsetxattr(fd, "trusted.overlay.opaque", "y", 1, 0) < 0)
		return refuse(u, negative_errno(), "cannot mark the directory opaque: %s",
			      strerror(errno));
	return 0;
}

/* ".wh.NAME": NAME of lower layers is deleted; an overlay whiteout is a 0/0 char device. */
static int whiteout_apply(struct unpack *u, int dfd, const char *base)
{
	const char *name = base + strlen(WHITEOUT_PREFIX);
	struct stat st;

	if (strcmp(base, WHITEOUT_OPAQUE) == 0)
		return opaque_mark(u, dfd);
	if (strncmp(name, WHITEOUT_PREFIX, strlen(WHITEOUT_PREFIX)) == 0)
		return refuse(u, -EPERM, "%s",
			      "unsupported whiteout (only .wh.NAME and "
			      ".wh..wh..opq are known)");
	if (!*name || !strcmp(name, ".") || !strcmp(name, ".."))
		return refuse(u, -EPERM, "%s", "whiteout of an invalid name");
	/* A whiteout hides lower layers only; what this layer has of that name stays. */
	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0)
		return 0;
	if (mknodat(dfd, name, S_IFCHR | 0, makedev(0, 0)) < 0)
		return refuse(u, negative_errno(), "cannot create overlay whiteout: %s",
			      strerror(errno));
	return 0;
}

static int entry_create(struct unpack *u, struct archive *a, struct archive_entry *ent, int dfd,
			const char *name, const char *path)
{
	mode_t type = archive_entry_filetype(ent);
	bool hardlink = archive_entry_hardlink(ent) != NULL;
	int r;

	if (!hardlink && (type == AE_IFCHR || type == AE_IFBLK))
		return refuse(u, -EPERM, "%s", "device nodes are not allowed in a layer");
	if (!hardlink && type != AE_IFREG && type != AE_IFDIR && type != AE_IFLNK &&
	    type != AE_IFIFO)
		return refuse(u, -EPERM, "%s", "unsupported entry type");
	r = entry_clear(u, dfd, name, path, !hardlink && type == AE_IFDIR);
	if (r < 0)
		return refuse(u, r, "cannot replace the existing entry: %s", strerror(-r));
	if (hardlink)
		return hardlink_create(u, ent, dfd, name);
	switch (type) {
	case AE_IFDIR:
		return dir_create(u, ent, dfd, name);
	case AE_IFLNK:
		return symlink_create(u, ent, dfd, name);
	case AE_IFIFO:
		return fifo_create(u, ent, dfd, name);
	default:
		return file_create(u, a, ent, dfd, name);
	}
}

static int root_entry_apply(struct unpack *u, struct archive_entry *ent)
{
	if (archive_entry_filetype(ent) != AE_IFDIR)
		return refuse(u, -EPERM, "%s", "the layer root must be a directory");
	return metadata_apply(u, u->root_fd, ent, false);
}

static int entry_apply(struct unpack *u, struct archive *a, struct archive_entry *ent)
{
	char path[PATH_MAX];
	_cleanup_close_ int dfd = -1;
	const char *name;
	int r;

	u->entry = archive_entry_pathname(ent) ? archive_entry_pathname(ent) : "";
	r = path_normalize(u, archive_entry_pathname(ent), "path", path, sizeof path);
	if (r < 0)
		return r;
	if (!*path)
		return root_entry_apply(u, ent);
	r = parent_open(u, path, true, &dfd, &name);
	if (r < 0)
		return r;
	if (strncmp(name, WHITEOUT_PREFIX, strlen(WHITEOUT_PREFIX)) == 0)
		return whiteout_apply(u, dfd, name);
	return entry_create(u, a, ent, dfd, name, path);
}

static int archive_open_layer(const char *blob, bool raw, const char *layer, struct archive **ret,
			      struct station_error *e)
{
	struct archive *a = archive_read_new();

	if (!a)
		return -ENOMEM;
	archive_read_support_filter_gzip(a);
	archive_read_support_filter_zstd(a);
	if (raw)
		archive_read_support_format_raw(a);
	else
		archive_read_support_format_tar(a);
	if (archive_read_open_filename(a, blob, READ_BLOCK) != ARCHIVE_OK) {
		int err = archive_errno(a);
		int r = err == ENOENT || err == EACCES || err == EIO || err == ENOMEM ?
				station_error_set(e, -err, NULL, "layer %s: cannot read: %s", layer,
						  strerror(err)) :
				station_error_set(e, -EBADMSG, NULL, "layer %s: corrupt tar: %s",
						  layer, archive_error_string(a));
		archive_read_free(a);
		return r;
	}
	*ret = a;
	return 0;
}

static int entries_apply(struct unpack *u, struct archive *a)
{
	struct archive_entry *ent;
	int r;

	for (;;) {
		r = archive_read_next_header(a, &ent);
		if (r == ARCHIVE_EOF)
			return 0;
		if (r < ARCHIVE_WARN)
			return station_error_set(u->e, -EBADMSG, NULL, "layer %s: corrupt tar: %s",
						 u->layer, archive_error_string(a));
		if (u->lim && u->lim->max_entries && ++u->entries > u->lim->max_entries)
			return station_error_set(u->e, -EFBIG, NULL,
						 "layer %s: more than %llu entries, %s", u->layer,
						 (unsigned long long)u->lim->max_entries,
						 u->lim->entries_what);
		r = entry_apply(u, a, ent);
		if (r < 0)
			return r;
	}
}

DEFINE_TRIVIAL_CLEANUP_FUNC(DIR *, closedir);

/* fsync()s every directory and regular file of the tree below dfd (a layer dir this file just
 * wrote: nothing else writes there), dfd itself last. Symlinks are not opened. */
static int tree_fsync(int dfd, unsigned depth)
{
	int fd = depth > PATH_MAX / 2 ? -ELOOP : fcntl(dfd, F_DUPFD_CLOEXEC, 3);
	_cleanup_(closedirp) DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *de;
	int r = 0;

	if (fd < 0)
		return fd == -ELOOP ? fd : negative_errno();
	if (!d) {
		r = negative_errno();
		close(fd);
		return r;
	}
	while (r >= 0 && (errno = 0, de = readdir(d))) {
		_cleanup_close_ int cfd = -1;
		unsigned char type = de->d_type;
		struct stat st;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (type == DT_UNKNOWN && fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0)
			type = S_ISDIR(st.st_mode) ? DT_DIR :
			       S_ISREG(st.st_mode) ? DT_REG :
						     DT_UNKNOWN;
		if (type == DT_DIR) {
			cfd = openat(dfd, de->d_name,
				     O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			r = cfd < 0 ? negative_errno() : tree_fsync(cfd, depth + 1);
		} else if (type == DT_REG) {
			cfd = openat(dfd, de->d_name,
				     O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
			r = cfd < 0 || fsync(cfd) < 0 ? negative_errno() : 0;
		}
	}
	if (r >= 0 && errno != 0)
		r = negative_errno();
	return r < 0 || fsync(dfd) >= 0 ? r : negative_errno();
}

int layer_unpack_archive(struct archive *a, const char *dir, const char *layer,
			 const struct layer_limits *lim, uint64_t *ret_entries,
			 struct station_error *e)
{
	_cleanup_close_ int root_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct unpack u = { .root = dir, .layer = layer, .lim = lim, .e = e };
	int r;

	if (root_fd < 0 || fchmod(root_fd, 0755) < 0)
		return negative_errno();
	u.root_fd = root_fd;
	r = entries_apply(&u, a);
	if (r >= 0)
		r = tree_fsync(root_fd, 0);
	if (r >= 0 && ret_entries)
		*ret_entries = u.entries;
	return r;
}

/* the uncompressed tar of an fd, hashed as it is read */

struct tar_reader {
	int fd;
	uint64_t offset, max; /* max 0: no bound */
	bool over;
	EVP_MD_CTX *sha;
	char *buf;
};

DEFINE_TRIVIAL_CLEANUP_FUNC(EVP_MD_CTX *, EVP_MD_CTX_free);

static ssize_t tar_reader_next(struct tar_reader *t)
{
	ssize_t n;

	do
		n = pread(t->fd, t->buf, TAR_BLOCK, t->offset);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return negative_errno();
	t->offset += n;
	if (t->max && t->offset > t->max) {
		t->over = true;
		return -EFBIG;
	}
	if (EVP_DigestUpdate(t->sha, t->buf, n) != 1)
		return -ENOMEM;
	return n;
}

static la_ssize_t tar_read(struct archive *a, void *userdata, const void **ret)
{
	struct tar_reader *t = userdata;
	ssize_t n = tar_reader_next(t);

	if (n < 0) {
		archive_set_error(a, (int)-n, "%s", strerror((int)-n));
		return -1;
	}
	*ret = t->buf;
	return n;
}

/* What the archive left unread (the end-of-archive blocks' padding) is part of the tar. */
static int tar_reader_drain(struct tar_reader *t, char ret[IMAGE_DIGEST_MAX])
{
	uint8_t sum[EVP_MAX_MD_SIZE];
	unsigned len = 0;
	char hex[65];
	ssize_t n;

	while ((n = tar_reader_next(t)) > 0)
		;
	if (n < 0)
		return (int)n;
	if (EVP_DigestFinal_ex(t->sha, sum, &len) != 1 || len != 32)
		return -EIO;
	hex_encode(sum, 32, hex);
	snprintf(ret, IMAGE_DIGEST_MAX, "sha256:%s", hex);
	return 0;
}

int layer_unpack_tar_fd(int fd, const char *dir, const char *layer, const struct layer_limits *lim,
			char ret_diff_id[IMAGE_DIGEST_MAX], uint64_t *ret_size,
			uint64_t *ret_entries, struct station_error *e)
{
	struct station_error local = {};
	_cleanup_(EVP_MD_CTX_freep) EVP_MD_CTX *sha = EVP_MD_CTX_new();
	_cleanup_archive_ struct archive *a = archive_read_new();
	_cleanup_free_ char *buf = malloc(TAR_BLOCK);
	struct tar_reader t = { .fd = fd, .max = lim ? lim->max_bytes : 0, .sha = sha, .buf = buf };
	int r;

	if (!e)
		e = &local;
	e->message[0] = '\0';
	if (!sha || !a || !buf || EVP_DigestInit_ex(sha, EVP_sha256(), NULL) != 1)
		return -ENOMEM;
	archive_read_support_format_tar(a);
	if (archive_read_open(a, &t, NULL, tar_read, NULL) != ARCHIVE_OK)
		r = t.over ? -EFBIG :
			     station_error_set(e, -EBADMSG, NULL, "layer %s: not a tar: %s", layer,
					       archive_error_string(a));
	else
		r = layer_unpack_archive(a, dir, layer, lim, ret_entries, e);
	if (r >= 0)
		r = tar_reader_drain(&t, ret_diff_id);
	if (r >= 0 && ret_size)
		*ret_size = t.offset;
	if (t.over)
		return station_error_set(e, -EFBIG, NULL, "layer %s: more than %llu bytes, %s",
					 layer, (unsigned long long)lim->max_bytes,
					 lim->bytes_what);
	if (r < 0 && !e->message[0])
		return station_error_set(e, r, NULL, "layer %s: cannot read: %s", layer,
					 strerror(-r));
	return r;
}

static int unpack_into(const char *blob, const char *tmp, const char *layer,
		       const struct layer_limits *lim, uint64_t *ret_entries,
		       struct station_error *e)
{
	_cleanup_archive_ struct archive *a = NULL;
	int r = archive_open_layer(blob, false, layer, &a, e);

	if (r < 0)
		return r;
	return layer_unpack_archive(a, tmp, layer, lim, ret_entries, e);
}

int layer_unpack_file(const char *blob, const char *dest, const char *layer,
		      const struct layer_limits *lim, uint64_t *ret_entries,
		      struct station_error *e)
{
	char tmp[PATH_MAX];
	int r;

	if (snprintf(tmp, sizeof tmp, "%s.tmp-XXXXXX", dest) >= (int)sizeof tmp)
		return -ENAMETOOLONG;
	if (!mkdtemp(tmp))
		return station_error_set(e, negative_errno(), NULL,
					 "layer %s: cannot create \"%s\": %m", layer, tmp);
	r = unpack_into(blob, tmp, layer, lim, ret_entries, e);
	if (r >= 0 && rename(tmp, dest) < 0)
		r = station_error_set(e, negative_errno(), NULL,
				      "layer %s: cannot move into place at \"%s\": %m", layer,
				      dest);
	if (r < 0) {
		(void)rm_rf(tmp);
		return r;
	}
	return 0;
}

int layer_diff_id(const char *blob, const char *layer, uint64_t max_bytes,
		  char ret[IMAGE_DIGEST_MAX], uint64_t *ret_size, struct station_error *e)
{
	_cleanup_archive_ struct archive *a = NULL;
	struct archive_entry *ent;
	struct sha256_ctx sha;
	char buf[READ_BLOCK];
	uint8_t sum[32];
	char hex[65];
	la_ssize_t n = 0;
	uint64_t total = 0;
	int r = archive_open_layer(blob, true, layer, &a, e);

	if (r < 0)
		return r;
	sha256_init(&sha);
	r = archive_read_next_header(a, &ent);
	while (r == ARCHIVE_OK && (n = archive_read_data(a, buf, sizeof buf)) > 0) {
		total += n;
		if (max_bytes && total > max_bytes)
			return -EFBIG;
		sha256_update(&sha, buf, n);
	}
	if (r != ARCHIVE_OK || n < 0)
		return station_error_set(
			e, -EBADMSG, NULL, "layer %s: cannot decompress: %s", layer,
			archive_error_string(a) ? archive_error_string(a) : "empty");
	sha256_final(&sha, sum);
	hex_encode(sum, sizeof sum, hex);
	snprintf(ret, IMAGE_DIGEST_MAX, "sha256:%s", hex);
	if (ret_size)
		*ret_size = total;
	return 0;
}

static int diff_id_mismatch(const char *layer, const char *actual, const char *diff_id,
			    struct station_error *e)
{
	return station_error_set(e, -EBADMSG, NULL,
				 "layer %s: diff id mismatch: the uncompressed tar has %.19s, the "
				 "image config says %.19s",
				 layer, actual, diff_id);
}

/* An uncompressed layer blob read once: unpacked beside dest while hashed, moved into place
 * only when its digest is diff_id. */
static int layer_unpack_plain(const char *blob, const char *dest, const char *layer,
			      const struct layer_limits *lim, const char *diff_id,
			      uint64_t *ret_size, uint64_t *ret_entries, struct station_error *e)
{
	_cleanup_close_ int fd = open(blob, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	char tmp[PATH_MAX], actual[IMAGE_DIGEST_MAX];
	int r;

	if (fd < 0)
		return station_error_set(e, negative_errno(), NULL, "layer %s: cannot read: %m",
					 layer);
	if (snprintf(tmp, sizeof tmp, "%s.tmp-XXXXXX", dest) >= (int)sizeof tmp)
		return -ENAMETOOLONG;
	if (!mkdtemp(tmp))
		return station_error_set(e, negative_errno(), NULL,
					 "layer %s: cannot create \"%s\": %m", layer, tmp);
	r = layer_unpack_tar_fd(fd, tmp, layer, lim, actual, ret_size, ret_entries, e);
	if (r >= 0 && strcmp(actual, diff_id) != 0)
		r = diff_id_mismatch(layer, actual, diff_id, e);
	if (r >= 0 && rename(tmp, dest) < 0)
		r = station_error_set(e, negative_errno(), NULL,
				      "layer %s: cannot move into place at \"%s\": %m", layer,
				      dest);
	if (r < 0)
		(void)rm_rf(tmp);
	return r;
}

/* A compressed layer blob: its diff id checked first (one pass), then unpacked (another). */
static int layer_unpack_checked(const char *blob, const char *dest, const char *layer,
				const struct layer_limits *lim, bool image_bound,
				uint64_t max_image_bytes, const char *diff_id, uint64_t *ret_size,
				uint64_t *ret_entries, struct station_error *e)
{
	char actual[IMAGE_DIGEST_MAX];
	int r = layer_diff_id(blob, layer, lim->max_bytes, actual, ret_size, e);

	if (r == -EFBIG && image_bound)
		return station_error_set(
			e, -EFBIG, NULL,
			"layer %s: the image's layers decompress to more than %llu bytes, %s",
			layer, (unsigned long long)max_image_bytes, lim->bytes_what);
	if (r == -EFBIG)
		return station_error_set(e, -EFBIG, NULL,
					 "layer %s: decompresses to more than %llu bytes, %s",
					 layer, (unsigned long long)lim->max_bytes,
					 lim->bytes_what);
	if (r < 0)
		return r;
	if (strcmp(actual, diff_id) != 0)
		return diff_id_mismatch(layer, actual, diff_id, e);
	return layer_unpack_file(blob, dest, layer, lim, ret_entries, e);
}

static uint64_t budget_left(uint64_t max, uint64_t used)
{
	return used >= max ? 1 : max - used; /* 1: the next byte or entry is over */
}

int layer_unpack(struct image_store *s, struct image_txn *t, const struct oci_descriptor *d,
		 const char *diff_id, struct image_budget *b, struct station_error *e)
{
	char blob[PATH_MAX], dest[PATH_MAX], layer[DIGEST_SHORT_LEN];
	const struct image_limits *l = &s->limits;
	uint64_t image_left = budget_left(l->max_image_bytes, b->bytes), size = 0, entries = 0;
	bool image_bound = image_left < l->max_layer_bytes;
	struct layer_limits lim = {
		.max_bytes = image_bound ? image_left : l->max_layer_bytes,
		.max_entries = budget_left(l->max_image_entries, b->entries),
		.bytes_what = image_bound ? "the limit for the image's layers (--max-image-bytes)" :
					    "the limit for a layer (--max-layer-bytes)",
		.entries_what = "the limit for the image's layers (--max-image-entries)",
	};
	struct stat st;
	int r;

	digest_short(d->digest, layer);
	snprintf(dest, sizeof dest, "%s/%s", s->layers, diff_id + strlen("sha256:"));
	if (stat(dest, &st) == 0 && S_ISDIR(st.st_mode))
		return 0;
	r = blob_path(s, d->digest, blob);
	if (r >= 0 && strcmp(d->digest, diff_id) == 0) /* uncompressed: hashed as it unpacks */
		r = layer_unpack_plain(blob, dest, layer, &lim, diff_id, &size, &entries, e);
	else if (r >= 0)
		r = layer_unpack_checked(blob, dest, layer, &lim, image_bound, l->max_image_bytes,
					 diff_id, &size, &entries, e);
	if (r < 0)
		return r;
	b->bytes += size;
	b->entries += entries;
	return image_txn_add(t, dest);
}
