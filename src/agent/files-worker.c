/* SPDX-License-Identifier: MIT */
/* The file worker's session: frames to and from the controller on a blocking socket, and the
 * errors it is told. */

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agent/files-internal.h"
#include "basic/util.h"
#include "proto/agent-proto.h"

#define SEND_BATCH (64u * 1024)
/* DATA from the controller: one chunk and its header. */
#define RECV_MAX_PAYLOAD (FILE_MAX_CHUNK + 64)

int files_send_flush(struct files_session *s)
{
	int r;

	if (s->out.len == 0)
		return 0;
	r = write_all(s->fd, s->out.data, s->out.len);
	s->out.len = 0;
	return r;
}

int files_send_maybe(struct files_session *s)
{
	return s->out.len >= SEND_BATCH ? files_send_flush(s) : 0;
}

int files_send_error(struct files_session *s, int err, const char *path, const char *reason)
{
	size_t start;
	int r = frame_begin(&s->out, &start, MSG_FILE_ERROR, 0);

	if (r >= 0)
		r = frame_put_u64(&s->out, TAG_ERRNO, (uint64_t)(err < 0 ? -err : err));
	if (r >= 0 && path)
		r = frame_put_str(&s->out, TAG_PATH, path);
	if (r >= 0 && reason)
		r = frame_put_bytes(&s->out, TAG_REASON, reason, strnlen(reason, FILE_MAX_REASON));
	if (r >= 0)
		r = frame_end(&s->out, start);
	return r < 0 ? r : files_send_flush(s);
}

int files_send_end(struct files_session *s, bool truncated)
{
	size_t start;
	int r = frame_begin(&s->out, &start, MSG_FILE_END, 0);

	if (r >= 0 && truncated)
		r = frame_put_u64(&s->out, TAG_TRUNCATED, 1);
	if (r >= 0)
		r = frame_end(&s->out, start);
	return r < 0 ? r : files_send_flush(s);
}

int files_send_info(struct files_session *s, const char *name, const char *path,
		    const struct stat *st, int dirfd, const char *entry)
{
	char target[PROTO_MAX_PATH + 1];
	const char *link = NULL;
	size_t start;
	int r;

	if (S_ISLNK(st->st_mode)) {
		ssize_t n = readlinkat(dirfd, entry, target, sizeof target);

		if (n >= 0 && (size_t)n < sizeof target) {
			target[n] = 0;
			link = target;
		}
	}
	r = frame_begin(&s->out, &start, MSG_FILE_INFO, 0);
	if (r >= 0)
		r = files_put_info(&s->out, name, path, st, link);
	if (r >= 0)
		r = frame_end(&s->out, start);
	return r < 0 ? r : files_send_maybe(s);
}

int files_recv(struct files_session *s, struct frame *ret, int timeout_ms)
{
	for (;;) {
		long n = frame_parse(s->in.data + s->in_pos, s->in.len - s->in_pos,
				     RECV_MAX_PAYLOAD, ret);
		struct pollfd p = { .fd = s->fd, .events = POLLIN };
		ssize_t got;
		int k;

		if (n < 0)
			return n == -EMSGSIZE ? -EMSGSIZE : -EBADMSG;
		if (n > 0) {
			s->in_pos += (size_t)n;
			return 1;
		}
		buf_consume(&s->in, s->in_pos);
		s->in_pos = 0;
		do
			k = poll(&p, 1, timeout_ms);
		while (k < 0 && errno == EINTR);
		if (k < 0)
			return -errno;
		if (k == 0)
			return -ETIMEDOUT;
		if (buf_reserve(&s->in, RECV_MAX_PAYLOAD + FRAME_HEADER_SIZE) < 0)
			return -ENOMEM;
		do
			got = read(s->fd, s->in.data + s->in.len, s->in.cap - s->in.len);
		while (got < 0 && errno == EINTR);
		if (got <= 0)
			return 0;
		s->in.len += (size_t)got;
	}
}

static const char *reason_of(int err)
{
	switch (err) {
	case EXDEV:
		return "escapes the root";
	case ENXIO:
		return "not a regular file";
	case EINVAL:
		return "invalid path";
	case ESTALE:
		return "changed since (etag differs)";
	default:
		return strerror(err);
	}
}

int files_fail(struct files_session *s, int err, const char *path)
{
	if (err < 0)
		err = -err;
	return files_send_error(s, err, path, reason_of(err));
}

int files_request_path(struct files_session *s, const uint8_t *path, size_t len,
		       struct files_path *ret)
{
	int r = files_path_check(s->root.prefix, s->root.workdir, path, len, ret);

	if (r >= 0)
		return 1;
	if (r == -EINVAL) {
		const char *why = len == 0	       ? "empty path" :
				  len > PROTO_MAX_PATH ? "path longer than 4096 bytes" :
							 "path holds a NUL byte";
		r = files_send_error(s, EINVAL, NULL, why);
	} else if (r == -EXDEV)
		r = files_send_error(s, EXDEV, NULL, "escapes the root");
	else
		r = files_fail(s, r, NULL);
	return r < 0 ? r : 0;
}
