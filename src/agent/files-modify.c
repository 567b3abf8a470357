/* SPDX-License-Identifier: MIT */
/* MKDIR, RENAME and DELETE of a file session. The last component is never followed: a
 * symlink is renamed or removed itself. DELETE RECURSIVE walks with fds, never follows a
 * symlink and never leaves the filesystem it started on. */

#include <dirent.h>
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

#define DELETE_MAX_DEPTH 256

/* IF_MATCH against the entry name in dirfd: -ESTALE when it is gone or differs. */
static int check_if_match(const struct files_request *q, int dirfd, const char *name)
{
	char etag[FILE_MAX_ETAG + 1];
	struct stat st;

	if (!q->has_if_match)
		return 0;
	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
		return -ESTALE;
	files_etag(&st, etag);
	return strcmp(etag, q->if_match) == 0 ? 0 : -ESTALE;
}

int files_op_mkdir(struct files_session *s, const struct files_request *q)
{
	_cleanup_(files_path_done) struct files_path p = { 0 };
	_cleanup_close_ int dirfd = -1;
	char name[FILE_MAX_NAME + 1];
	mode_t mode = q->has_mode ? (mode_t)q->mode : 0755;
	bool parents = q->flags & FILE_F_PARENTS;
	struct stat st;
	int r;

	r = files_request_path(s, q->path, q->path_len, &p);
	if (r <= 0)
		return r;
	if (parents && strchr(p.rel, '/')) {
		_cleanup_free_ char *dir = strdup(p.rel);

		if (!dir)
			return files_fail(s, -ENOMEM, NULL);
		*strrchr(dir, '/') = 0;
		r = files_mkdir_parents(&s->root, dir);
		if (r < 0)
			return files_fail(s, r, NULL);
	}
	r = files_lookup(&s->root, p.rel, &dirfd, name);
	if (r >= 0 && strcmp(name, ".") == 0)
		r = parents ? 0 : -EEXIST;
	else if (r >= 0 && mkdirat(dirfd, name, mode) < 0)
		r = errno == EEXIST && parents ? 0 : -errno;
	if (r >= 0 && fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		r = -errno;
	if (r >= 0 && !S_ISDIR(st.st_mode))
		r = -EEXIST;
	if (r < 0)
		return files_fail(s, r, NULL);
	r = files_send_info(s, NULL, p.abs, &st, -1, NULL);
	return r < 0 ? r : files_send_end(s, false);
}

int files_op_rename(struct files_session *s, const struct files_request *q)
{
	_cleanup_(files_path_done) struct files_path from = { 0 }, to = { 0 };
	_cleanup_close_ int fromfd = -1, tofd = -1;
	char fname[FILE_MAX_NAME + 1], tname[FILE_MAX_NAME + 1];
	struct stat st;
	int r;

	r = files_request_path(s, q->path, q->path_len, &from);
	if (r <= 0)
		return r;
	r = files_request_path(s, q->path2, q->path2_len, &to);
	if (r <= 0)
		return r;
	r = files_lookup(&s->root, from.rel, &fromfd, fname);
	if (r < 0)
		return files_fail(s, r, from.abs);
	r = files_lookup(&s->root, to.rel, &tofd, tname);
	if (r < 0)
		return files_fail(s, r, to.abs);
	if (strcmp(fname, ".") == 0 || strcmp(tname, ".") == 0)
		return files_send_error(s, EBUSY, strcmp(fname, ".") == 0 ? from.abs : to.abs,
					"cannot rename the root, . or ..");
	r = check_if_match(q, fromfd, fname);
	if (r >= 0 && renameat2(fromfd, fname, tofd, tname,
				(q->flags & FILE_F_EXCLUSIVE) ? RENAME_NOREPLACE : 0) < 0)
		r = -errno;
	if (r >= 0 && fstatat(tofd, tname, &st, AT_SYMLINK_NOFOLLOW) < 0)
		r = -errno;
	if (r < 0)
		return files_fail(s, r, r == -EEXIST ? to.abs : NULL);
	r = files_send_info(s, NULL, to.abs, &st, tofd, tname);
	return r < 0 ? r : files_send_end(s, false);
}

static int delete_entry(int dirfd, const char *name, dev_t dev, int depth);

/* Empties the directory fd (taken). Keeps going after an error; returns the first. */
static int delete_children(int fd, dev_t dev, int depth)
{
	struct dirent *de;
	DIR *d = fdopendir(fd);
	int r = 0;

	if (!d) {
		r = -errno;
		close(fd);
		return r;
	}
	while ((errno = 0, de = readdir(d))) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		int k = delete_entry(dirfd(d), de->d_name, dev, depth + 1);
		if (k < 0 && r >= 0)
			r = k;
	}
	if (errno != 0 && r >= 0)
		r = -errno;
	closedir(d);
	return r;
}

static int delete_entry(int dirfd, const char *name, dev_t dev, int depth)
{
	struct stat st;
	int fd, r;

	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (!S_ISDIR(st.st_mode))
		return unlinkat(dirfd, name, 0) < 0 && errno != ENOENT ? -errno : 0;
	if (st.st_dev != dev)
		return -EXDEV; /* another filesystem mounted here: left alone */
	if (depth >= DELETE_MAX_DEPTH)
		return -ELOOP;
	fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	r = delete_children(fd, dev, depth);
	if (r >= 0 && unlinkat(dirfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
		r = -errno;
	return r;
}

int files_op_delete(struct files_session *s, const struct files_request *q)
{
	_cleanup_(files_path_done) struct files_path p = { 0 };
	_cleanup_close_ int dirfd = -1;
	char name[FILE_MAX_NAME + 1];
	struct stat st;
	int r;

	r = files_request_path(s, q->path, q->path_len, &p);
	if (r <= 0)
		return r;
	r = files_lookup(&s->root, p.rel, &dirfd, name);
	if (r < 0)
		return files_fail(s, r, NULL);
	if (strcmp(name, ".") == 0)
		return files_send_error(s, EBUSY, NULL, "cannot delete the root, . or ..");
	r = check_if_match(q, dirfd, name);
	if (r >= 0 && fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		r = -errno;
	if (r >= 0 && !S_ISDIR(st.st_mode))
		r = unlinkat(dirfd, name, 0) < 0 ? -errno : 0;
	else if (r >= 0 && !(q->flags & FILE_F_RECURSIVE))
		r = unlinkat(dirfd, name, AT_REMOVEDIR) < 0 ? -errno : 0;
	else if (r >= 0)
		r = delete_entry(dirfd, name, st.st_dev, 0);
	if (r == -EEXIST)
		r = -ENOTEMPTY;
	if (r < 0)
		return files_fail(s, r, NULL);
	return files_send_end(s, false);
}
