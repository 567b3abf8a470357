/* SPDX-License-Identifier: MIT */
/* A snapshot layer written from a workspace's trees (image.h states the contract: directory fds
 * only, symlinks stored never followed, FIFOs, sockets and devices left out, whiteouts and
 * opaque directories of an overlay upper converted, hard links stored as separate files,
 * setuid, setgid and capabilities dropped, owners shifted out of the workspace's range).
 *
 * What else this file decides:
 *  - The same tree gives the same bytes, so the same layer digest (and one copy in the store):
 *    a directory's entries are sorted by name (strcmp), a directory comes before its contents,
 *    mtimes are stored in whole seconds, and nothing else of time, no user or group names and
 *    no xattrs are stored (so no security.capability). Restricted pax: ustar headers, with a
 *    pax extended header only where ustar cannot say it (a long name, a large size).
 *  - A sparse file is stored dense, and its apparent size (st_size) counts against max_bytes
 *    before a byte of it is read: a 1 TB sparse file fails with -EFBIG at once.
 *  - A name starting ".wh." would read as a whiteout in a layer: such entries are left out
 *    (counted in skipped), as are whiteouts outside an overlay upper (they are devices there).
 *  - An entry that changes type while it is read (a directory swapped for a symlink between
 *    the listing and the open) fails the snapshot with -EAGAIN; the open never follows it.
 *  - One fd is open per directory level: nesting deeper than LAYER_DEPTH_MAX fails.
 *  - Overlay metacopy and redirect_dir (off by default) keep file data or directory contents
 *    in lower layers; an upper written with them is stored as the upper has it. */

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "basic/cleanup.h"
#include "basic/safe-fs.h"
#include "image/image-internal.h"

#define LAYER_DEPTH_MAX 256
#define LAYER_BLOCK (64u << 10) /* a file's read size: cache-sized (1 MiB was 2x slower) */
/* No writeback is started as the layer is written (sync_file_range() every 8 MiB was, while
 * a snapshot was answered only once its layer was fsync()ed): the write happens while the
 * workspace is frozen, and the fsync() now comes after the answer, off the workspace's time.
 * A 1 GiB snapshot, medians of 4 in turns with and without it on an idle machine: answered in
 * 0.80 s instead of 0.90 (tar of the same trees 0.85), on disk after 1.55 s instead of 1.41. */
#define WHITEOUT_PREFIX ".wh."
#define WHITEOUT_OPAQUE ".wh..wh..opq"

DEFINE_TRIVIAL_CLEANUP_FUNC(struct archive *, archive_write_free);
DEFINE_TRIVIAL_CLEANUP_FUNC(EVP_MD_CTX *, EVP_MD_CTX_free);
DEFINE_TRIVIAL_CLEANUP_FUNC(DIR *, closedir);

/* The layer's bytes pass through HASH_SLOTS slots of HASH_SLOT_BYTES: a slot is filled (a file's
 * data read into it in place, libarchive's headers and padding copied in), written to out_fd
 * a LAYER_BLOCK at a time as it fills (while those bytes are in the cache: writing a whole 1
 * MiB slot at once was slower than the copies it saved), then, once full, hashed by a thread
 * of its own (SHA-256 is about 0.65 s of CPU a GiB here, as much as the rest of the read and
 * write together) while the next ones fill. So file data is copied by the kernel twice (read,
 * write) and by nobody else: libarchive writes unblocked (bytes_per_block 0), straight into
 * out_write(). A 1 GiB snapshot, 3 x 4 runs in turns with the version that copied into
 * libarchive's 64 KiB blocks and again into the slot: medians 694-730 ms against 750-828 (tar
 * 879-1178); with a busy loop on one of the 2 cores, 1114-1134 against 1163-1210 (tar
 * 885-904): the hash's CPU is what a loaded machine makes us wait for. */
#define HASH_SLOTS 4
#define HASH_SLOT_BYTES (1u << 20) /* a 64 KiB block a slot: the hand-overs' wake-ups cost more */

struct layer_hasher {
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t changed;
	EVP_MD_CTX *sha;
	char *slot[HASH_SLOTS];
	size_t len[HASH_SLOTS];
	unsigned head, tail; /* slots filled (head) and hashed (tail), counted, never wrapped */
	size_t fill;	     /* bytes in the slot at head, the writer's until it is full */
	size_t written;	     /* of them, written to out_fd */
	bool done;	     /* nothing more comes */
	bool failed;	     /* EVP_DigestUpdate failed */
	bool started;
};

static void *hasher_main(void *userdata)
{
	struct layer_hasher *h = userdata;

	pthread_mutex_lock(&h->lock);
	for (;;) {
		while (h->tail == h->head && !h->done)
			pthread_cond_wait(&h->changed, &h->lock);
		if (h->tail == h->head)
			break;
		unsigned i = h->tail % HASH_SLOTS;
		pthread_mutex_unlock(&h->lock);
		bool ok = EVP_DigestUpdate(h->sha, h->slot[i], h->len[i]) == 1;
		pthread_mutex_lock(&h->lock);
		h->failed |= !ok;
		h->tail++;
		pthread_cond_broadcast(&h->changed);
	}
	pthread_mutex_unlock(&h->lock);
	return NULL;
}

static int hasher_start(struct layer_hasher *h, EVP_MD_CTX *sha)
{
	*h = (struct layer_hasher){ .sha = sha };
	for (size_t i = 0; i < HASH_SLOTS; i++)
		if (!(h->slot[i] = malloc(HASH_SLOT_BYTES)))
			return -ENOMEM;
	if (pthread_mutex_init(&h->lock, NULL) != 0)
		return -ENOMEM;
	if (pthread_cond_init(&h->changed, NULL) != 0) {
		pthread_mutex_destroy(&h->lock);
		return -ENOMEM;
	}
	int r = pthread_create(&h->thread, NULL, hasher_main, h);
	if (r != 0) {
		pthread_cond_destroy(&h->changed);
		pthread_mutex_destroy(&h->lock);
		return -r;
	}
	h->started = true;
	return 0;
}

/* The slot at head to the thread, full or (at the end) not. */
static void hasher_publish(struct layer_hasher *h)
{
	h->len[h->head % HASH_SLOTS] = h->fill;
	h->fill = 0;
	h->written = 0;
	pthread_mutex_lock(&h->lock);
	h->head++;
	pthread_cond_broadcast(&h->changed);
	pthread_mutex_unlock(&h->lock);
}

/* Makes the slot at head the writer's, waiting while the thread still hashes it (when the
 * writer starts it: fill 0). -ENOMEM when hashing failed. */
static int hasher_claim(struct layer_hasher *h)
{
	bool failed;

	if (!h->started)
		return -EIO;
	if (h->fill > 0)
		return 0;
	pthread_mutex_lock(&h->lock);
	while (h->head - h->tail == HASH_SLOTS)
		pthread_cond_wait(&h->changed, &h->lock);
	failed = h->failed;
	pthread_mutex_unlock(&h->lock);
	return failed ? -ENOMEM : 0;
}

/* Where the writer's next bytes go in the slot at head (hasher_claim() first), and how many
 * fit. */
static char *hasher_room(struct layer_hasher *h, size_t *ret_n)
{
	*ret_n = HASH_SLOT_BYTES - h->fill;
	return h->slot[h->head % HASH_SLOTS] + h->fill;
}

/* Waits for every slot published to be hashed (a slot not published is dropped); 0, or
 * -ENOMEM when one failed. Idempotent. */
static int hasher_stop(struct layer_hasher *h)
{
	if (h->started) {
		pthread_mutex_lock(&h->lock);
		h->done = true;
		pthread_cond_broadcast(&h->changed);
		pthread_mutex_unlock(&h->lock);
		pthread_join(h->thread, NULL);
		pthread_cond_destroy(&h->changed);
		pthread_mutex_destroy(&h->lock);
		h->started = false;
	}
	for (size_t i = 0; i < HASH_SLOTS; i++) {
		free(h->slot[i]);
		h->slot[i] = NULL;
	}
	return h->failed ? -ENOMEM : 0;
}

struct layer_walk {
	struct archive *a;
	struct archive_entry *ent;
	const struct image_layer_options *o;
	const struct image_layer_source *src;
	struct image_layer_stats stats;
	char path[PATH_MAX]; /* the entry's name in the layer */
	size_t path_len;
	unsigned depth;
	int out_fd;
	struct layer_hasher hash; /* every byte written to out_fd: the layer's diff id */
	int write_err;		  /* errno of the last failed write to out_fd */
	struct station_error *e;
};

static uint32_t id_shift(const struct image_layer_options *o, uint32_t id)
{
	if (o->owners_zero)
		return 0;
	return id >= o->id_base && id - o->id_base < LAYER_ID_RANGE ? id - o->id_base :
								      LAYER_ID_OVERFLOW;
}

static int walk_fail(struct layer_walk *w, int err, const char *cause)
{
	return station_error_set(w->e, err, NULL, "snapshot: \"%s\": %s", w->path, cause);
}

static int walk_changed(struct layer_walk *w)
{
	return walk_fail(w, -EAGAIN, "changed while the snapshot read it");
}

/* Appends "/name" (or "name" at the layer root) to w->path; *ret_len gets the length to go
 * back to. */
static int path_push(struct layer_walk *w, const char *name, size_t *ret_len)
{
	size_t n = strlen(name), sep = w->path_len > 0;

	if (w->path_len + sep + n >= sizeof w->path)
		return station_error_set(w->e, -ENAMETOOLONG, NULL,
					 "snapshot: \"%s/%s\": path longer than %d bytes", w->path,
					 name, PATH_MAX - 1);
	*ret_len = w->path_len;
	if (sep)
		w->path[w->path_len++] = '/';
	memcpy(w->path + w->path_len, name, n + 1);
	w->path_len += n;
	return 0;
}

static void path_pop(struct layer_walk *w, size_t len)
{
	w->path_len = len;
	w->path[len] = '\0';
}

/* A new entry for w->path with st's owner (shifted) and mtime; perm without setuid/setgid. */
static void entry_begin(struct layer_walk *w, const struct stat *st, mode_t type, mode_t perm)
{
	archive_entry_clear(w->ent);
	archive_entry_copy_pathname(w->ent, w->path);
	archive_entry_set_filetype(w->ent, type);
	archive_entry_set_perm(w->ent, perm & 01777);
	archive_entry_set_uid(w->ent, id_shift(w->o, st->st_uid));
	archive_entry_set_gid(w->ent, id_shift(w->o, st->st_gid));
	archive_entry_set_mtime(w->ent, st->st_mtim.tv_sec, 0);
}

static int archive_fail(struct layer_walk *w)
{
	int err = w->write_err ? w->write_err : archive_errno(w->a);
	const char *msg = archive_error_string(w->a);

	return station_error_set(w->e, err > 0 ? -err : -EIO, NULL,
				 "snapshot: cannot write the layer at \"%s\": %s", w->path,
				 w->write_err ? strerror(w->write_err) :
				 msg	      ? msg :
						"?");
}

static int header_write(struct layer_walk *w)
{
	if (archive_write_header(w->a, w->ent) < ARCHIVE_WARN)
		return archive_fail(w);
	w->stats.entries++;
	return 0;
}

/* An empty regular file entry: a whiteout ".wh.NAME" or the opaque marker. */
static int marker_write(struct layer_walk *w, const char *name, const struct stat *st)
{
	size_t len;
	int r = path_push(w, name, &len);

	if (r < 0)
		return r;
	entry_begin(w, st, AE_IFREG, 0644);
	archive_entry_set_size(w->ent, 0);
	r = header_write(w);
	path_pop(w, len);
	return r;
}

/* Read into the slot in place: out_write() finds it there and copies nothing. */
static int file_data_write(struct layer_walk *w, int fd, uint64_t size)
{
	for (uint64_t done = 0; done < size;) {
		int r = hasher_claim(&w->hash);
		size_t room = 0;
		char *at = r < 0 ? NULL : hasher_room(&w->hash, &room);

		if (r < 0)
			return walk_fail(w, r, "cannot hash the layer");
		size_t want = MIN(size - done, MIN(room, (size_t)LAYER_BLOCK));
		ssize_t n = read(fd, at, want);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return walk_fail(w, negative_errno(), strerror(errno));
		if (n == 0)
			return walk_fail(w, -EAGAIN, "shrank while the snapshot read it");
		if (archive_write_data(w->a, at, n) != n)
			return archive_fail(w);
		done += n;
	}
	return 0;
}

static int file_add(struct layer_walk *w, int dfd, const char *name)
{
	_cleanup_close_ int fd = safe_openat(
		dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY, 0, SAFE_BENEATH);
	const uint64_t max = w->o->max_bytes;
	struct stat st;
	int r;

	if (fd == -ELOOP || fd == -ENOENT || fd == -EXDEV)
		return walk_changed(w);
	if (fd < 0)
		return walk_fail(w, fd, strerror(-fd));
	if (fstat(fd, &st) < 0)
		return walk_fail(w, negative_errno(), strerror(errno));
	if (!S_ISREG(st.st_mode))
		return walk_changed(w);
	if (max && (uint64_t)st.st_size > max - MIN(max, w->stats.bytes)) {
		char cause[160];

		snprintf(cause, sizeof cause,
			 "%llu bytes, which takes the snapshot past its limit of %llu bytes",
			 (unsigned long long)st.st_size, (unsigned long long)max);
		return walk_fail(w, -EFBIG, cause);
	}
	(void)posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
	entry_begin(w, &st, AE_IFREG, st.st_mode);
	archive_entry_set_size(w->ent, st.st_size);
	r = header_write(w);
	if (r < 0)
		return r;
	w->stats.bytes += st.st_size;
	return file_data_write(w, fd, st.st_size);
}

static int symlink_add(struct layer_walk *w, int dfd, const char *name, const struct stat *st)
{
	char target[PATH_MAX];
	ssize_t n = readlinkat(dfd, name, target, sizeof target);

	if (n < 0 && (errno == EINVAL || errno == ENOENT))
		return walk_changed(w);
	if (n < 0)
		return walk_fail(w, negative_errno(), strerror(errno));
	if ((size_t)n >= sizeof target)
		return walk_fail(w, -ENAMETOOLONG, "symlink target too long");
	target[n] = '\0';
	entry_begin(w, st, AE_IFLNK, 0777);
	archive_entry_copy_symlink(w->ent, target);
	return header_write(w);
}

static bool dir_is_opaque(int fd)
{
	char v[2];

	return (fgetxattr(fd, "trusted.overlay.opaque", v, sizeof v) == 1 && v[0] == 'y') ||
	       (fgetxattr(fd, "user.overlay.opaque", v, sizeof v) == 1 && v[0] == 'y');
}

static int names_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The names in the directory fd, sorted, NULL-terminated. */
static int dir_names(int fd, char ***ret)
{
	int dfd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
	_cleanup_(closedirp) DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
	char **names = calloc(1, sizeof(char *));
	struct dirent *de;
	int r = 0;

	if (!d || !names) {
		r = d ? -ENOMEM : negative_errno();
		if (dfd >= 0 && !d)
			close(dfd);
		free(names);
		return r;
	}
	while (r >= 0 && (errno = 0, de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			r = strv_push(&names, de->d_name);
	if (r >= 0 && errno)
		r = negative_errno();
	if (r < 0) {
		strv_free(names);
		return r;
	}
	qsort(names, strv_length(names), sizeof *names, names_cmp);
	*ret = names;
	return 0;
}

static int entry_add(struct layer_walk *w, int dfd, const char *name);

/* The entries of the directory fd (w->path), sorted; the opaque marker first. */
static int dir_contents_add(struct layer_walk *w, int fd, const struct stat *st)
{
	char **names = NULL;
	int r = 0;

	if (w->depth >= LAYER_DEPTH_MAX)
		return walk_fail(w, -ELOOP, "directories nested too deep");
	if (w->src->overlay_upper && dir_is_opaque(fd))
		r = marker_write(w, WHITEOUT_OPAQUE, st);
	if (r < 0)
		return r;
	r = dir_names(fd, &names);
	if (r < 0)
		return walk_fail(w, r, strerror(-r));
	w->depth++;
	for (size_t i = 0; r >= 0 && names[i]; i++) {
		size_t len;

		r = path_push(w, names[i], &len);
		if (r >= 0)
			r = entry_add(w, fd, names[i]);
		if (r >= 0)
			path_pop(w, len);
	}
	w->depth--;
	strv_free(names);
	return r;
}

static int dir_add(struct layer_walk *w, int dfd, const char *name)
{
	_cleanup_close_ int fd =
		safe_openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0, SAFE_BENEATH);
	struct stat st;
	int r;

	if (fd == -ELOOP || fd == -ENOTDIR || fd == -ENOENT || fd == -EXDEV)
		return walk_changed(w);
	if (fd < 0)
		return walk_fail(w, fd, strerror(-fd));
	if (fstat(fd, &st) < 0)
		return walk_fail(w, negative_errno(), strerror(errno));
	entry_begin(w, &st, AE_IFDIR, st.st_mode);
	r = header_write(w);
	return r < 0 ? r : dir_contents_add(w, fd, &st);
}

/* An overlay whiteout (a 0/0 char device in an upper): ".wh.NAME" beside it. */
static int whiteout_add(struct layer_walk *w, const char *name, const struct stat *st)
{
	char wh[NAME_MAX + 8];
	size_t parent = w->path_len - strlen(name);

	snprintf(wh, sizeof wh, WHITEOUT_PREFIX "%s", name);
	path_pop(w, parent > 0 ? parent - 1 : 0);
	return marker_write(w, wh, st);
}

/* w->path is the entry's layer path already; name is its last component. */
static int entry_add(struct layer_walk *w, int dfd, const char *name)
{
	struct stat st;

	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? walk_changed(w) :
					 walk_fail(w, negative_errno(), strerror(errno));
	if (strncmp(name, WHITEOUT_PREFIX, strlen(WHITEOUT_PREFIX)) == 0) {
		w->stats.skipped++; /* it would read as a whiteout */
		return 0;
	}
	switch (st.st_mode & S_IFMT) {
	case S_IFREG:
		return file_add(w, dfd, name);
	case S_IFDIR:
		return dir_add(w, dfd, name);
	case S_IFLNK:
		return symlink_add(w, dfd, name, &st);
	case S_IFCHR:
		if (w->src->overlay_upper && st.st_rdev == 0)
			return whiteout_add(w, name, &st);
		w->stats.skipped++;
		return 0;
	default: /* FIFOs, sockets, block devices */
		w->stats.skipped++;
		return 0;
	}
}

/* A prefix as the layer names it: relative, no "." or ".." or empty components. */
static int prefix_check(const char *p, struct station_error *e)
{
	const char *c = p;

	if (!p)
		return 0;
	if (p[0] == '/' || strlen(p) >= PATH_MAX / 2)
		goto bad;
	while (*c) {
		size_t n = strcspn(c, "/");

		if (n == 0 || (n == 1 && c[0] == '.') || (n == 2 && c[0] == '.' && c[1] == '.'))
			goto bad;
		c += n;
		if (*c == '/' && !*++c)
			goto bad;
	}
	return 0;
bad:
	return station_error_set(e, -EINVAL, NULL, "snapshot: invalid layer prefix \"%s\"", p);
}

static int source_add(struct layer_walk *w, const struct image_layer_source *src)
{
	struct stat st;
	int r = prefix_check(src->prefix, w->e);

	if (r < 0)
		return r;
	w->src = src;
	snprintf(w->path, sizeof w->path, "%s", src->prefix ? src->prefix : "");
	w->path_len = strlen(w->path);
	if (fstat(src->dir_fd, &st) < 0)
		return walk_fail(w, negative_errno(), strerror(errno));
	if (!S_ISDIR(st.st_mode))
		return walk_fail(w, -ENOTDIR, "not a directory");
	if (w->path_len > 0) {
		entry_begin(w, &st, AE_IFDIR, st.st_mode);
		r = header_write(w);
		if (r >= 0 && src->opaque)
			r = marker_write(w, WHITEOUT_OPAQUE, &st);
		if (r < 0)
			return r;
	} else if (src->opaque)
		return station_error_set(w->e, -EINVAL, NULL,
					 "snapshot: an opaque tree needs a layer prefix");
	return dir_contents_add(w, src->dir_fd, &st);
}

/* What the slot at head holds beyond what was written, to out_fd (while it is in the cache: a
 * LAYER_BLOCK at a time, not the whole slot); the slot to the hasher when full or last. */
static int slot_write(struct layer_walk *w, bool last)
{
	struct layer_hasher *h = &w->hash;
	size_t pending = h->fill - h->written;
	bool full = h->fill == HASH_SLOT_BYTES;

	if (pending > 0 && (last || full || pending >= LAYER_BLOCK)) {
		int r = write_all(w->out_fd, h->slot[h->head % HASH_SLOTS] + h->written, pending);
		if (r < 0)
			return r;
		h->written = h->fill;
	}
	if (h->fill > 0 && (last || full))
		hasher_publish(h);
	return 0;
}

/* What libarchive writes (unblocked): into the slot at head, unless file_data_write() read it
 * there already. */
static la_ssize_t out_write(struct archive *a, void *userdata, const void *buf, size_t n)
{
	struct layer_walk *w = userdata;
	const char *p = buf;
	size_t left = n;
	int r = 0;

	while (r >= 0 && left > 0 && (r = hasher_claim(&w->hash)) >= 0) {
		size_t room;
		char *at = hasher_room(&w->hash, &room);
		size_t k = MIN(left, room);

		if (p != at)
			memcpy(at, p, k);
		w->hash.fill += k;
		p += k;
		left -= k;
		r = slot_write(w, false);
	}
	if (r >= 0)
		w->stats.tar_bytes += n;
	if (r < 0) {
		w->write_err = -r;
		archive_set_error(a, -r, "%s", strerror(-r));
		return -1;
	}
	return n;
}

static int diff_id_final(struct layer_walk *w)
{
	uint8_t sum[EVP_MAX_MD_SIZE];
	unsigned len = 0;
	char hex[65];

	if (hasher_stop(&w->hash) < 0)
		return -ENOMEM;
	if (EVP_DigestFinal_ex(w->hash.sha, sum, &len) != 1 || len != 32)
		return -EIO;
	hex_encode(sum, 32, hex);
	snprintf(w->stats.diff_id, sizeof w->stats.diff_id, "sha256:%s", hex);
	return 0;
}

static int archive_out_open(struct layer_walk *w)
{
	w->a = archive_write_new();
	w->ent = archive_entry_new();
	if (!w->a || !w->ent)
		return -ENOMEM;
	if (archive_write_set_format_pax_restricted(w->a) != ARCHIVE_OK ||
	    archive_write_set_bytes_per_block(w->a, 0) != ARCHIVE_OK || /* out_write() blocks */
	    archive_write_set_bytes_in_last_block(w->a, 1) != ARCHIVE_OK ||
	    archive_write_open(w->a, w, NULL, out_write, NULL) != ARCHIVE_OK)
		return archive_fail(w);
	return 0;
}

int image_layer_write(const struct image_layer_source *src, size_t n_src,
		      const struct image_layer_options *o, int out_fd,
		      struct image_layer_stats *ret_stats, struct station_error *e)
{
	struct station_error local = {};
	_cleanup_(EVP_MD_CTX_freep) EVP_MD_CTX *sha = EVP_MD_CTX_new();
	struct layer_walk w = { .o = o, .out_fd = out_fd, .e = e ? e : &local };
	int r;

	if (!sha || EVP_DigestInit_ex(sha, EVP_sha256(), NULL) != 1)
		return -ENOMEM;
	r = hasher_start(&w.hash, sha);
	if (r >= 0)
		r = archive_out_open(&w);
	for (size_t i = 0; r >= 0 && i < n_src; i++)
		r = source_add(&w, &src[i]);
	if (r >= 0 && archive_write_close(w.a) != ARCHIVE_OK)
		r = archive_fail(&w);
	if (r >= 0 && (r = slot_write(&w, true)) < 0)
		r = station_error_set(w.e, r, NULL, "snapshot: cannot write the layer: %s",
				      strerror(-r));
	if (r >= 0)
		r = diff_id_final(&w);
	archive_entry_free(w.ent);
	archive_write_free(w.a);    /* may write what it held, on a failure */
	(void)hasher_stop(&w.hash); /* on every path: its thread joined */
	if (r >= 0 && ret_stats)
		*ret_stats = w.stats;
	return r;
}
