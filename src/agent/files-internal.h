/* SPDX-License-Identifier: MIT */
#pragma once

/* The file worker's parts: path checks and resolution (files-path.c), INFO and ETAG encoding
 * (files-info.c), the operations (files-ops.c, files-watch.c) and the session's frames
 * (files-worker.c). Everything here runs in the worker, never in the agent's loop. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "proto/file-proto.h"
#include "proto/frame.h"

#define FILES_MAX_SYMLINKS 40
#define FILES_WRITE_TIMEOUT_MS 60000

enum files_resolve {
	FILES_IN_ROOT, /* a container: the root is "/", symlinks resolve inside it */
	FILES_BENEATH, /* a host workspace: nothing may lead out of the root */
};

struct files_root {
	int fd; /* O_PATH | O_DIRECTORY */
	enum files_resolve how;
	const char *prefix; /* the root's absolute path in the sandbox's view, "" for "/" */
	const char *workdir;
};

/* A PATH checked lexically: rel is relative to the root ("." for the root itself), with no
 * empty or "." component; abs is the absolute path in the sandbox's view, `..` collapsed. */
struct files_path {
	char *rel;
	char *abs;
};
void files_path_done(struct files_path *p);

/* -EINVAL: empty, a NUL, longer than PROTO_MAX_PATH. -EXDEV: outside the root (an absolute
 * path that does not name the root or lie beneath it, or `..` climbing above it). -ENOMEM. */
int files_path_check(const char *prefix, const char *workdir, const uint8_t *path, size_t len,
		     struct files_path *ret);

/* openat2() beneath the root: RESOLVE_IN_ROOT or RESOLVE_BENEATH, always
 * RESOLVE_NO_MAGICLINKS, O_CLOEXEC added. */
int files_openat(const struct files_root *root, const char *rel, int flags, mode_t mode);

/* The entry rel names, its last component not followed: the directory holding it (an O_PATH
 * fd) and its name. For the root, "." or a path ending in "..", the directory itself and ".".
 * ret_name holds FILE_MAX_NAME + 1 bytes. */
int files_lookup(const struct files_root *root, const char *rel, int *ret_dirfd, char *ret_name);
/* The same, with a final symlink followed within the root (at most FILES_MAX_SYMLINKS): the
 * entry that is not a symlink, or does not exist (then ret_dirfd and ret_name say where it
 * would be made). */
int files_lookup_follow(const struct files_root *root, const char *rel, int *ret_dirfd,
			char *ret_name);
/* Makes every missing directory of rel (0755), each resolved as above. */
int files_mkdir_parents(const struct files_root *root, const char *rel);

/* "<mtime ns hex>-<size hex>-<ino hex>". */
void files_etag(const struct stat *st, char ret[FILE_MAX_ETAG + 1]);
uint64_t files_type(mode_t mode);
/* INFO fields of st: NAME (may be NULL), PATH (may be NULL), FILE_TYPE, SIZE, MODE, MTIME_NS,
 * UID, GID, LINK_TARGET (may be NULL), ETAG for a regular file. */
int files_put_info(struct buf *b, const char *name, const char *path, const struct stat *st,
		   const char *link_target);

/* A file operation as FILE_OPEN asked for it. */
struct files_request {
	uint64_t op;
	bool has_op, has_flags;
	const uint8_t *path, *path2;
	size_t path_len, path2_len;
	bool has_path, has_path2;
	uint64_t flags;
	bool has_mode, has_offset, has_length, has_suffix, has_max_bytes;
	uint64_t mode, offset, length, suffix, max_bytes;
	char if_match[FILE_MAX_ETAG + 1];
	bool has_if_match;
};
/* -EINVAL with *ret_reason for a field that is unknown, repeated or malformed. */
int files_request_parse(const struct frame *f, struct files_request *ret, const char **ret_reason);

/* The worker's end of the session: blocking I/O on fd. */
struct files_session {
	int fd;
	struct files_root root;
	struct buf in; /* bytes received and not parsed yet */
	size_t in_pos;
	struct buf out; /* frames not sent yet */
};

int files_send_flush(struct files_session *s);
/* Sends what is queued when it is over 64 KiB. */
int files_send_maybe(struct files_session *s);
int files_send_error(struct files_session *s, int err, const char *path, const char *reason);
int files_send_end(struct files_session *s, bool truncated);
int files_send_info(struct files_session *s, const char *name, const char *path,
		    const struct stat *st, int dirfd, const char *entry);
/* The next frame from the controller within timeout_ms (-1: none): 1 with *ret, 0 when it
 * closed the connection, -ETIMEDOUT, -EBADMSG, -EMSGSIZE. */
int files_recv(struct files_session *s, struct frame *ret, int timeout_ms);

/* The operations: each sends its answer (FILE_ERROR included) and returns < 0 only when the
 * connection failed. */
int files_op_stat(struct files_session *s, const struct files_request *q);
int files_op_list(struct files_session *s, const struct files_request *q);
int files_op_read(struct files_session *s, const struct files_request *q);
int files_op_write(struct files_session *s, const struct files_request *q);
int files_op_mkdir(struct files_session *s, const struct files_request *q);
int files_op_rename(struct files_session *s, const struct files_request *q);
int files_op_delete(struct files_session *s, const struct files_request *q);
int files_op_watch(struct files_session *s, const struct files_request *q);

/* A PATH of the request, checked: 1 with *ret; 0 when it was refused (FILE_ERROR sent); < 0
 * when sending failed. */
int files_request_path(struct files_session *s, const uint8_t *path, size_t len,
		       struct files_path *ret);
/* FILE_ERROR for err (negative) about path (may be NULL), with a reason that fits it: 0 once
 * sent. */
int files_fail(struct files_session *s, int err, const char *path);
