/* SPDX-License-Identifier: MIT */
/* A subtree of an image's top layer (a snapshot's HOME) copied into a new workspace's
 * directory. The layer is the store's and its entries passed unpack.c; the destination is new
 * and empty, but is walked by directory fds all the same (*at() calls, O_NOFOLLOW, nothing
 * followed). Regular files, directories and symlinks are copied; whiteouts, FIFOs and anything
 * else are not. Owners are the layer's plus id_base (or one uid:gid for all, a host workspace's
 * HOME); setuid and setgid are not kept. File data
 * is cloned where the filesystem can (FICLONE), else copied in the kernel (copy_file_range). */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "basic/cleanup.h"
#include "basic/safe-fs.h"
#include "image/image-internal.h"

#define COPY_DEPTH_MAX 256
#define COPY_BLOCK (1u << 20)

DEFINE_TRIVIAL_CLEANUP_FUNC(DIR *, closedir);

struct layer_copy {
	uint32_t id_base;
	bool owned; /* every entry uid:gid, not id_base plus its owner */
	uid_t uid;
	gid_t gid;
	const char *what; /* the subtree, for messages */
	struct station_error *e;
};

static int copy_fail(struct layer_copy *c, const char *name, int err)
{
	return station_error_set(c->e, err, NULL, "copy of \"%s\": \"%s\": %s", c->what, name,
				 strerror(-err));
}

static uid_t owner_uid(const struct layer_copy *c, const struct stat *st)
{
	return c->owned ? c->uid : c->id_base + st->st_uid;
}

static gid_t owner_gid(const struct layer_copy *c, const struct stat *st)
{
	return c->owned ? c->gid : c->id_base + st->st_gid;
}

/* Owner (shifted), mode (after chown, which clears setuid) and mtime of fd as st says. */
static int meta_apply(struct layer_copy *c, int fd, const struct stat *st)
{
	struct timespec ts[2] = { st->st_atim, st->st_mtim };

	if (fchown(fd, owner_uid(c, st), owner_gid(c, st)) < 0 ||
	    fchmod(fd, st->st_mode & 01777) < 0 || futimens(fd, ts) < 0)
		return negative_errno();
	return 0;
}

static int data_copy(int from, int to, uint64_t size)
{
	_cleanup_free_ char *buf = NULL;
	loff_t in = 0;

	if (size == 0 || ioctl(to, FICLONE, from) == 0)
		return 0;
	while ((uint64_t)in < size) {
		ssize_t n = copy_file_range(from, &in, to, NULL, size - in, 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && in == 0 && (errno == EXDEV || errno == ENOSYS || errno == EINVAL))
			break;
		if (n <= 0)
			return n < 0 ? negative_errno() : -EIO;
	}
	if ((uint64_t)in == size)
		return 0;
	buf = malloc(COPY_BLOCK);
	if (!buf)
		return -ENOMEM;
	for (ssize_t n; (n = read(from, buf, COPY_BLOCK)) != 0;) {
		int r = n > 0 ? write_all(to, buf, n) : errno == EINTR ? 0 : negative_errno();

		if (r < 0)
			return r;
	}
	return 0;
}

static int file_copy(struct layer_copy *c, int sfd, int dfd, const char *name)
{
	_cleanup_close_ int from = openat(sfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	_cleanup_close_ int to = -1;
	struct stat st;
	int r;

	if (from < 0 || fstat(from, &st) < 0)
		return negative_errno();
	if (!S_ISREG(st.st_mode))
		return -EINVAL;
	to = openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (to < 0)
		return negative_errno();
	r = data_copy(from, to, st.st_size);
	return r < 0 ? r : meta_apply(c, to, &st);
}

static int symlink_copy(struct layer_copy *c, int sfd, int dfd, const char *name,
			const struct stat *st)
{
	char target[PATH_MAX];
	struct timespec ts[2] = { st->st_atim, st->st_mtim };
	ssize_t n = readlinkat(sfd, name, target, sizeof target - 1);

	if (n < 0)
		return negative_errno();
	target[n] = '\0';
	if (symlinkat(target, dfd, name) < 0 ||
	    fchownat(dfd, name, owner_uid(c, st), owner_gid(c, st), AT_SYMLINK_NOFOLLOW) < 0 ||
	    utimensat(dfd, name, ts, AT_SYMLINK_NOFOLLOW) < 0)
		return negative_errno();
	return 0;
}

static int tree_copy(struct layer_copy *c, int sfd, int dfd, unsigned depth);

static int dir_copy(struct layer_copy *c, int sfd, int dfd, const char *name, unsigned depth)
{
	_cleanup_close_ int from = -1, to = -1;
	struct stat st;
	int r;

	from = safe_open_dir(sfd, name, SAFE_BENEATH);
	if (from < 0)
		return from;
	if (mkdirat(dfd, name, 0700) < 0)
		return negative_errno();
	to = safe_open_dir(dfd, name, SAFE_BENEATH);
	if (to < 0)
		return to;
	r = tree_copy(c, from, to, depth + 1);
	if (r >= 0 && fstat(from, &st) < 0)
		r = negative_errno();
	return r < 0 ? r : meta_apply(c, to, &st); /* last: the mtime stays */
}

static int entry_copy(struct layer_copy *c, int sfd, int dfd, const char *name, unsigned depth)
{
	struct stat st;

	if (fstatat(sfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return negative_errno();
	switch (st.st_mode & S_IFMT) {
	case S_IFREG:
		return file_copy(c, sfd, dfd, name);
	case S_IFDIR:
		return dir_copy(c, sfd, dfd, name, depth);
	case S_IFLNK:
		return symlink_copy(c, sfd, dfd, name, &st);
	default: /* whiteouts, FIFOs */
		return 0;
	}
}

static int tree_copy(struct layer_copy *c, int sfd, int dfd, unsigned depth)
{
	int fd = fcntl(sfd, F_DUPFD_CLOEXEC, 3);
	_cleanup_(closedirp) DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *de;

	if (depth > COPY_DEPTH_MAX)
		return station_error_set(c->e, -ELOOP, NULL, "copy of \"%s\": nested too deep",
					 c->what);
	if (!d) {
		int r = negative_errno();

		if (fd >= 0)
			close(fd);
		return r;
	}
	while ((errno = 0, de = readdir(d))) {
		int r;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		r = entry_copy(c, sfd, dfd, de->d_name, depth);
		if (r < 0)
			return c->e->message[0] ? r : copy_fail(c, de->d_name, r);
	}
	return errno ? negative_errno() : 0;
}

static int subtree_copy(struct layer_copy *c, const struct image *img, const char *prefix,
			int dest_fd)
{
	_cleanup_close_ int top = -1, from = -1;
	struct stat st;
	int r;

	c->e->message[0] = '\0';
	if (img->n_layers == 0)
		return station_error_set(c->e, -ENOENT, NULL, "image %s has no layers",
					 img->digest);
	if (img->layers_pending)
		return station_error_set(c->e, -EAGAIN, NULL,
					 "image %s: its layers are not unpacked yet", img->digest);
	top = open(img->layers[img->n_layers - 1], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (top < 0)
		return station_error_set(c->e, negative_errno(), NULL,
					 "image %s: cannot open its top layer: %m", img->digest);
	from = safe_open_dir(top, prefix, SAFE_BENEATH);
	if (from == -ENOENT || from == -ENOTDIR || from == -ELOOP)
		return station_error_set(c->e, -ENOENT, NULL,
					 "image %s: its top layer has no directory \"%s\"",
					 img->digest, prefix);
	if (from < 0)
		return station_error_set(c->e, from, NULL, "image %s: cannot open \"%s\": %s",
					 img->digest, prefix, strerror(-from));
	r = tree_copy(c, from, dest_fd, 0);
	if (r < 0)
		return r;
	r = fstat(from, &st) < 0 ? negative_errno() : meta_apply(c, dest_fd, &st);
	return r < 0 ? copy_fail(c, ".", r) : 0;
}

int image_layer_copy_subtree(const struct image *img, const char *prefix, int dest_fd,
			     uint32_t id_base, struct station_error *e)
{
	struct station_error local = {};
	struct layer_copy c = { .id_base = id_base, .what = prefix, .e = e ? e : &local };

	return subtree_copy(&c, img, prefix, dest_fd);
}

int image_layer_copy_subtree_owned(const struct image *img, const char *prefix, int dest_fd,
				   uid_t uid, gid_t gid, struct station_error *e)
{
	struct station_error local = {};
	struct layer_copy c = { .owned = true,
				.uid = uid,
				.gid = gid,
				.what = prefix,
				.e = e ? e : &local };

	return subtree_copy(&c, img, prefix, dest_fd);
}
