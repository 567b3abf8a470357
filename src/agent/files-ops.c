/* SPDX-License-Identifier: MIT */
/* STAT, LIST, READ and WRITE of a file session (file-proto.h). Every lookup goes through
 * files-path.c; every file is opened O_NOFOLLOW | O_NONBLOCK in the directory that holds it
 * and checked with fstat() before any I/O. */

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

#define LIST_MAX_NAMES (1024u * 1024) /* names read to sort them, before truncating */

int files_op_stat(struct files_session *s, const struct files_request *q)
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
	if (r >= 0 && fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		r = -errno;
	if (r < 0)
		return files_fail(s, r, NULL);
	r = files_send_info(s, NULL, p.abs, &st, dirfd, name);
	return r < 0 ? r : files_send_end(s, false);
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every name in d but . and .. (at most LIST_MAX_NAMES), sorted. */
static int read_names(DIR *d, char ***ret, size_t *ret_n, bool *ret_more)
{
	char **names = NULL;
	size_t n = 0, cap = 0;
	struct dirent *de;

	*ret_more = false;
	while ((errno = 0, de = readdir(d))) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (n == LIST_MAX_NAMES) {
			*ret_more = true;
			break;
		}
		if (n == cap) {
			char **nn = reallocarray(names, cap ? cap * 2 : 256, sizeof *names);

			if (!nn)
				goto fail;
			names = nn;
			cap = cap ? cap * 2 : 256;
		}
		names[n] = strdup(de->d_name);
		if (!names[n])
			goto fail;
		n++;
	}
	if (errno != 0)
		goto fail;
	qsort(names, n, sizeof *names, cmp_names);
	*ret = names;
	*ret_n = n;
	return 0;
fail:;
	int r = negative_errno();
	while (n > 0)
		free(names[--n]);
	free(names);
	return r;
}

static int list_entries(struct files_session *s, DIR *d)
{
	char **names = NULL;
	size_t n = 0, sent = 0, i;
	bool more;
	int r;

	r = read_names(d, &names, &n, &more);
	if (r < 0)
		return files_fail(s, r, NULL);
	for (i = 0; i < n && r >= 0; i++) {
		struct stat st;

		if (sent == FILE_MAX_ENTRIES) {
			more = true;
			break;
		}
		if (fstatat(dirfd(d), names[i], &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue; /* gone since */
		r = files_send_info(s, names[i], NULL, &st, dirfd(d), names[i]);
		sent++;
	}
	for (i = 0; i < n; i++)
		free(names[i]);
	free(names);
	return r < 0 ? r : files_send_end(s, more);
}

int files_op_list(struct files_session *s, const struct files_request *q)
{
	_cleanup_(files_path_done) struct files_path p = { 0 };
	_cleanup_close_ int dirfd = -1;
	char name[FILE_MAX_NAME + 1];
	struct stat st;
	DIR *d;
	int fd, r;

	r = files_request_path(s, q->path, q->path_len, &p);
	if (r <= 0)
		return r;
	r = files_lookup(&s->root, p.rel, &dirfd, name);
	if (r < 0)
		return files_fail(s, r, NULL);
	fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return files_fail(s, errno == ELOOP ? -ENOTDIR : -errno, NULL);
	if (fstat(fd, &st) < 0 || !(d = fdopendir(fd))) {
		r = -errno;
		close(fd);
		return files_fail(s, r, NULL);
	}
	r = files_send_info(s, NULL, p.abs, &st, -1, NULL);
	if (r >= 0)
		r = list_entries(s, d);
	closedir(d);
	return r;
}

/* The regular file rel leads to (a final symlink followed within the root), opened with
 * flags | O_NOFOLLOW | O_NONBLOCK: -ENXIO for a FIFO, device or socket (never opened), -EISDIR
 * for a directory. */
static int open_regular(const struct files_root *root, const char *rel, int flags,
			struct stat *ret_st)
{
	_cleanup_close_ int dirfd = -1, fd = -1;
	char name[FILE_MAX_NAME + 1];
	struct stat st;
	int r;

	r = files_lookup_follow(root, rel, &dirfd, name);
	if (r < 0)
		return r;
	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return -errno;
	if (S_ISDIR(st.st_mode))
		return -EISDIR;
	if (!S_ISREG(st.st_mode))
		return S_ISLNK(st.st_mode) ? -ELOOP : -ENXIO;
	fd = openat(dirfd, name, flags | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, ret_st) < 0)
		return -errno;
	if (!S_ISREG(ret_st->st_mode))
		return S_ISDIR(ret_st->st_mode) ? -EISDIR : -ENXIO;
	return TAKE_FD(fd);
}

/* What READ sends of a file of size bytes: from *ret_start, *ret_len bytes. */
static int read_range(const struct files_request *q, uint64_t size, uint64_t *ret_start,
		      uint64_t *ret_len)
{
	uint64_t start = 0, len;

	if (q->has_suffix)
		start = size > q->suffix ? size - q->suffix : 0;
	else if (q->has_offset)
		start = q->offset;
	len = start < size ? size - start : 0;
	if (q->has_length && q->length < len)
		len = q->length;
	if (q->has_max_bytes && len > q->max_bytes)
		return -EFBIG;
	*ret_start = start;
	*ret_len = len;
	return 0;
}

static int send_data(struct files_session *s, const uint8_t *p, size_t n)
{
	size_t start;
	int r = frame_begin(&s->out, &start, MSG_FILE_DATA, 0);

	if (r >= 0)
		r = frame_put_bytes(&s->out, TAG_DATA, p, n);
	if (r >= 0)
		r = frame_end(&s->out, start);
	return r < 0 ? r : files_send_flush(s);
}

static int read_send(struct files_session *s, int fd, uint64_t off, uint64_t len)
{
	_cleanup_free_ uint8_t *chunk = malloc(FILE_MAX_CHUNK);

	if (!chunk)
		return -ENOMEM;
	while (len > 0) {
		size_t want = len < FILE_MAX_CHUNK ? (size_t)len : FILE_MAX_CHUNK;
		ssize_t n = pread(fd, chunk, want, (off_t)off);
		int r;

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return files_fail(s, -errno, NULL) < 0 ? -EIO : 1;
		if (n == 0)
			break; /* shorter than it was */
		r = send_data(s, chunk, (size_t)n);
		if (r < 0)
			return r;
		off += (uint64_t)n;
		len -= (uint64_t)n;
	}
	return 0;
}

int files_op_read(struct files_session *s, const struct files_request *q)
{
	_cleanup_(files_path_done) struct files_path p = { 0 };
	_cleanup_close_ int fd = -1;
	uint64_t start, len;
	struct stat st;
	int r;

	r = files_request_path(s, q->path, q->path_len, &p);
	if (r <= 0)
		return r;
	fd = open_regular(&s->root, p.rel, O_RDONLY, &st);
	if (fd < 0)
		return files_fail(s, fd, NULL);
	r = read_range(q, (uint64_t)st.st_size, &start, &len);
	if (r < 0) {
		char why[FILE_MAX_REASON];

		snprintf(why, sizeof why, "%llu bytes, more than MAX_BYTES %llu",
			 (unsigned long long)st.st_size, (unsigned long long)q->max_bytes);
		return files_send_error(s, EFBIG, NULL, why);
	}
	r = files_send_info(s, NULL, p.abs, &st, -1, NULL);
	if (r >= 0)
		r = files_send_flush(s);
	if (r >= 0)
		r = read_send(s, fd, start, len);
	if (r != 0)
		return r < 0 ? r : 0;
	return files_send_end(s, false);
}
