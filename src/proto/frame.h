/* SPDX-License-Identifier: MIT */
#pragma once

/* Controller <-> agent frames (docs/agent-protocol.md).
 *
 * A frame is a 16-byte header followed by a payload of TLV fields, all integers little-endian:
 *   u32 payload_length, u16 type, u16 version (PROTO_VERSION), u64 seq
 *   field: u16 tag, u32 length, length bytes
 * Integers in fields are u64 (8 bytes). Strings carry no NUL. A tag may repeat (lists).
 * Both sides treat every frame from the other as hostile: frame_parse_header() refuses a payload
 * larger than the caller's cap, and the getters check every length. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FRAME_HEADER_SIZE 16

struct buf {
	uint8_t *data;
	size_t len;
	size_t cap;
};

void buf_free(struct buf *b);
int buf_reserve(struct buf *b, size_t extra);
int buf_append(struct buf *b, const void *data, size_t n);
/* Drops the first n bytes. */
void buf_consume(struct buf *b, size_t n);

/* Writing: frame_begin(), any number of frame_put_*(), frame_end(). Returns -ENOMEM on
 * allocation failure; the buffer may then hold a partial frame and must be discarded. */
int frame_begin(struct buf *b, size_t *ret_start, uint16_t type, uint64_t seq);
int frame_put_u64(struct buf *b, uint16_t tag, uint64_t v);
int frame_put_bytes(struct buf *b, uint16_t tag, const void *data, size_t n);
int frame_put_str(struct buf *b, uint16_t tag, const char *s);
int frame_end(struct buf *b, size_t start);
/* For a last bytes field whose n bytes the caller sends from where they are, right after the
 * buffer (no copy): appends the field's header and ends the frame counting those n bytes. */
int frame_end_with_bytes(struct buf *b, size_t start, uint16_t tag, size_t n);

struct frame {
	uint16_t type;
	uint16_t version;
	uint64_t seq;
	const uint8_t *payload;
	size_t payload_len;
};

/* Parses a header at data[0..avail). Returns 0 when more bytes are needed, the whole frame's
 * size (header + payload) when complete (ret filled), -EMSGSIZE when the payload exceeds
 * max_payload, -EPROTO on a bad version. */
long frame_parse(const uint8_t *data, size_t avail, size_t max_payload, struct frame *ret);

/* Field iteration. Returns 1 with a field, 0 at the end, -EBADMSG when malformed. */
struct frame_iter {
	const uint8_t *p;
	size_t left;
};
void frame_iter_init(struct frame_iter *it, const struct frame *f);
int frame_iter_next(struct frame_iter *it, uint16_t *ret_tag, const uint8_t **ret_val,
		    size_t *ret_len);
/* Calls fn for each field in order, up to the first that returns < 0: returns that, -EBADMSG
 * for a malformed frame, else 0. */
int frame_for_each_field(const struct frame *f,
			 int (*fn)(void *userdata, uint16_t tag, const uint8_t *val, size_t len),
			 void *userdata);

/* Value decoding. A u64 field must be exactly 8 bytes (-EBADMSG otherwise). A string must be
 * free of NUL and at most max_len bytes (-EBADMSG / -E2BIG); the copy is NUL-terminated. */
int frame_val_u64(const uint8_t *val, size_t len, uint64_t *ret);
int frame_val_strdup(const uint8_t *val, size_t len, size_t max_len, char **ret);
