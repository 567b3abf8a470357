/* SPDX-License-Identifier: MIT */
/* WRITE of a file session: a temporary file beside the target (O_EXCL, 0600), the data as it
 * comes, fsync, fchmod, then a rename over the target, so readers see the old file or the new
 * one. A controller that goes away (or sends nothing for FILES_WRITE_TIMEOUT_MS) before END
 * leaves the target untouched and the temporary file removed. */

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/files-internal.h"
#include "basic/cleanup.h"
#include "basic/util.h"
#include "proto/agent-proto.h"

struct write_target {
	int dirfd; /* the directory the target is (or will be) in */
	char name[FILE_MAX_NAME + 1];
	char tmp[32];
	int fd; /* the temporary file */
	bool exists;
	mode_t old_mode;
};

static void write_target_done(struct write_target *t)
{
	if (t->fd >= 0) {
		close(t->fd);
		(void)unlinkat(t->dirfd, t->tmp, 0);
	}
	if (t->dirfd >= 0)
		close(t->dirfd);
}

/* Where the target is, following a final symlink within the root, and what it is now. */
static int write_locate(struct files_session *s, const struct files_request *q, const char *rel,
			struct write_target *t)
{
	struct stat st;
	int r;

	r = files_lookup_follow(&s->root, rel, &t->dirfd, t->name);
	if (r == -ENOENT && (q->flags & FILE_F_PARENTS)) {
		_cleanup_free_ char *dir = strdup(rel);
		char *slash = dir ? strrchr(dir, '/') : NULL;

		if (!dir)
			return -ENOMEM;
		if (slash) {
			*slash = 0;
			r = files_mkdir_parents(&s->root, dir);
			if (r < 0)
				return r;
		}
		r = files_lookup_follow(&s->root, rel, &t->dirfd, t->name);
	}
	if (r < 0)
		return r;
	if (strcmp(t->name, ".") == 0)
		return -EISDIR;
	if (fstatat(t->dirfd, t->name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		if (errno != ENOENT)
			return -errno;
		return 0;
	}
	if (S_ISDIR(st.st_mode))
		return -EISDIR;
	if (!S_ISREG(st.st_mode))
		return -ENXIO;
	if (q->flags & FILE_F_EXCLUSIVE)
		return -EEXIST;
	t->exists = true;
	t->old_mode = st.st_mode & 07777;
	return 0;
}

static int write_tmp_open(struct write_target *t)
{
	for (int i = 0; i < 16; i++) {
		uint8_t rnd[8];
		char hex[17];
		int r = random_bytes(rnd, sizeof rnd);

		if (r < 0)
			return r;
		hex_encode(rnd, sizeof rnd, hex);
		snprintf(t->tmp, sizeof t->tmp, ".station-%s", hex);
		t->fd = openat(t->dirfd, t->tmp,
			       O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC,
			       0600);
		if (t->fd >= 0)
			return 0;
		if (errno != EEXIST)
			return -errno;
	}
	return -EEXIST;
}

/* DATA* then END from the controller, into the temporary file. 1 at END; 0 when the
 * controller went away or failed (nothing more is sent); -errno for a file error. */
static int write_receive(struct files_session *s, struct write_target *t)
{
	for (;;) {
		struct frame f;
		struct frame_iter it;
		const uint8_t *val;
		uint16_t tag;
		size_t len;
		int r = files_recv(s, &f, FILES_WRITE_TIMEOUT_MS);

		if (r <= 0)
			return 0;
		if (f.type == MSG_FILE_END)
			return 1;
		if (f.type != MSG_FILE_DATA)
			return 0;
		frame_iter_init(&it, &f);
		while ((r = frame_iter_next(&it, &tag, &val, &len)) > 0) {
			if (tag != TAG_DATA || len > FILE_MAX_CHUNK)
				return 0;
			r = write_all(t->fd, val, len);
			if (r < 0)
				return r;
		}
		if (r < 0)
			return 0;
	}
}

/* The target may have changed while the data came: IF_MATCH is checked now. */
static int write_commit(const struct files_request *q, struct write_target *t)
{
	mode_t mode = q->has_mode ? (mode_t)q->mode : t->exists ? t->old_mode : 0644;
	struct stat st;

	if (fsync(t->fd) < 0 || fchmod(t->fd, mode) < 0)
		return -errno;
	if (q->has_if_match) {
		char etag[FILE_MAX_ETAG + 1];

		if (fstatat(t->dirfd, t->name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
		    !S_ISREG(st.st_mode))
			return -ESTALE;
		files_etag(&st, etag);
		if (strcmp(etag, q->if_match) != 0)
			return -ESTALE;
	}
	if (q->flags & FILE_F_EXCLUSIVE) {
		if (renameat2(t->dirfd, t->tmp, t->dirfd, t->name, RENAME_NOREPLACE) < 0)
			return -errno;
	} else if (renameat(t->dirfd, t->tmp, t->dirfd, t->name) < 0)
		return -errno;
	return 0;
}

int files_op_write(struct files_session *s, const struct files_request *q)
{
	_cleanup_(files_path_done) struct files_path p = { 0 };
	_cleanup_(write_target_done) struct write_target t = { .dirfd = -1, .fd = -1 };
	struct stat st;
	int r;

	r = files_request_path(s, q->path, q->path_len, &p);
	if (r <= 0)
		return r;
	r = write_locate(s, q, p.rel, &t);
	if (r >= 0)
		r = write_tmp_open(&t);
	if (r < 0)
		return files_fail(s, r, NULL);
	r = write_receive(s, &t);
	if (r == 0)
		return 0;
	if (r > 0)
		r = write_commit(q, &t);
	if (r < 0)
		return files_fail(s, r, NULL);
	if (fstat(t.fd, &st) < 0)
		return files_fail(s, -errno, NULL);
	close(t.fd);
	t.fd = -1; /* renamed: nothing to remove */
	r = files_send_info(s, NULL, p.abs, &st, -1, NULL);
	return r < 0 ? r : files_send_end(s, false);
}
