/* SPDX-License-Identifier: MIT */
/* What a file session says about an entry (INFO, ETAG) and reads from FILE_OPEN. */

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "agent/files-internal.h"
#include "proto/agent-proto.h"

void files_etag(const struct stat *st, char ret[FILE_MAX_ETAG + 1])
{
	uint64_t mtime =
		(uint64_t)st->st_mtim.tv_sec * 1000000000ull + (uint64_t)st->st_mtim.tv_nsec;

	snprintf(ret, FILE_MAX_ETAG + 1, "%" PRIx64 "-%" PRIx64 "-%" PRIx64, mtime,
		 (uint64_t)st->st_size, (uint64_t)st->st_ino);
}

uint64_t files_type(mode_t mode)
{
	switch (mode & S_IFMT) {
	case S_IFDIR:
		return FILE_TYPE_DIR;
	case S_IFLNK:
		return FILE_TYPE_SYMLINK;
	case S_IFIFO:
		return FILE_TYPE_FIFO;
	case S_IFSOCK:
		return FILE_TYPE_SOCKET;
	case S_IFCHR:
		return FILE_TYPE_CHAR;
	case S_IFBLK:
		return FILE_TYPE_BLOCK;
	default:
		return FILE_TYPE_FILE;
	}
}

int files_put_info(struct buf *b, const char *name, const char *path, const struct stat *st,
		   const char *link_target)
{
	uint64_t mtime =
		(uint64_t)st->st_mtim.tv_sec * 1000000000ull + (uint64_t)st->st_mtim.tv_nsec;
	int r = 0;

	if (name)
		r = frame_put_str(b, TAG_NAME, name);
	if (r >= 0 && path)
		r = frame_put_str(b, TAG_PATH, path);
	if (r >= 0)
		r = frame_put_u64(b, TAG_FILE_TYPE, files_type(st->st_mode));
	if (r >= 0)
		r = frame_put_u64(b, TAG_SIZE, (uint64_t)st->st_size);
	if (r >= 0)
		r = frame_put_u64(b, TAG_MODE, st->st_mode & 07777);
	if (r >= 0)
		r = frame_put_u64(b, TAG_MTIME_NS, mtime);
	if (r >= 0)
		r = frame_put_u64(b, TAG_UID, st->st_uid);
	if (r >= 0)
		r = frame_put_u64(b, TAG_GID, st->st_gid);
	if (r >= 0 && link_target && S_ISLNK(st->st_mode))
		r = frame_put_str(b, TAG_LINK_TARGET, link_target);
	if (r >= 0 && S_ISREG(st->st_mode)) {
		char etag[FILE_MAX_ETAG + 1];

		files_etag(st, etag);
		r = frame_put_str(b, TAG_ETAG, etag);
	}
	return r;
}

static int put_u64(const uint8_t *val, size_t len, bool *have, uint64_t *ret)
{
	if (*have || frame_val_u64(val, len, ret) < 0)
		return -EINVAL;
	*have = true;
	return 0;
}

static int put_bytes(const uint8_t *val, size_t len, bool *have, const uint8_t **ret,
		     size_t *ret_len)
{
	if (*have)
		return -EINVAL;
	*have = true;
	*ret = val;
	*ret_len = len;
	return 0;
}

static int request_field(struct files_request *q, uint16_t tag, const uint8_t *val, size_t len)
{
	switch (tag) {
	case TAG_SECRET:
	case TAG_VERSION: /* the channel checked them */
		return 0;
	case TAG_FILE_OP:
		return put_u64(val, len, &q->has_op, &q->op);
	case TAG_FILE_FLAGS:
		return put_u64(val, len, &q->has_flags, &q->flags);
	case TAG_PATH:
		return put_bytes(val, len, &q->has_path, &q->path, &q->path_len);
	case TAG_PATH2:
		return put_bytes(val, len, &q->has_path2, &q->path2, &q->path2_len);
	case TAG_MODE:
		return put_u64(val, len, &q->has_mode, &q->mode);
	case TAG_OFFSET:
		return put_u64(val, len, &q->has_offset, &q->offset);
	case TAG_LENGTH:
		return put_u64(val, len, &q->has_length, &q->length);
	case TAG_SUFFIX:
		return put_u64(val, len, &q->has_suffix, &q->suffix);
	case TAG_MAX_BYTES:
		return put_u64(val, len, &q->has_max_bytes, &q->max_bytes);
	case TAG_IF_MATCH:
		if (q->has_if_match || len == 0 || len > FILE_MAX_ETAG || memchr(val, 0, len))
			return -EINVAL;
		memcpy(q->if_match, val, len);
		q->if_match[len] = 0;
		q->has_if_match = true;
		return 0;
	default:
		return -EINVAL;
	}
}

int files_request_parse(const struct frame *f, struct files_request *ret, const char **ret_reason)
{
	struct files_request q = { 0 };
	struct frame_iter it;
	const uint8_t *val;
	uint16_t tag;
	size_t len;
	int r;

	frame_iter_init(&it, f);
	while ((r = frame_iter_next(&it, &tag, &val, &len)) > 0)
		if (request_field(&q, tag, val, len) < 0) {
			*ret_reason = "unknown, repeated or malformed field";
			return -EINVAL;
		}
	if (r < 0) {
		*ret_reason = "malformed frame";
		return -EINVAL;
	}
	if (!q.has_op || q.op < FILE_OP_STAT || q.op > FILE_OP_WATCH) {
		*ret_reason = "missing or unknown FILE_OP";
		return -EINVAL;
	}
	if (!q.has_path || (q.op == FILE_OP_RENAME) != q.has_path2) {
		*ret_reason = "PATH (and PATH2 for RENAME only) required";
		return -EINVAL;
	}
	if ((q.flags & ~(uint64_t)(FILE_F_PARENTS | FILE_F_RECURSIVE | FILE_F_EXCLUSIVE)) ||
	    (q.has_mode && q.mode > 07777)) {
		*ret_reason = "bad FILE_FLAGS or MODE";
		return -EINVAL;
	}
	if (q.has_suffix && (q.has_offset || q.has_length)) {
		*ret_reason = "SUFFIX with OFFSET or LENGTH";
		return -EINVAL;
	}
	*ret = q;
	return 0;
}
