/* SPDX-License-Identifier: MIT */
#include "frame.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "agent-proto.h"

static void put_le(uint8_t *p, uint64_t v, int n)
{
	for (int i = 0; i < n; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_le(const uint8_t *p, int n)
{
	uint64_t v = 0;
	for (int i = 0; i < n; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

void buf_free(struct buf *b)
{
	free(b->data);
	*b = (struct buf){ 0 };
}

int buf_reserve(struct buf *b, size_t extra)
{
	if (b->cap - b->len >= extra)
		return 0;
	if (extra > SIZE_MAX / 2 - b->len)
		return -ENOMEM;
	size_t cap = b->cap ? b->cap : 256;
	while (cap - b->len < extra)
		cap *= 2;
	uint8_t *d = realloc(b->data, cap);
	if (!d)
		return -ENOMEM;
	b->data = d;
	b->cap = cap;
	return 0;
}

int buf_append(struct buf *b, const void *data, size_t n)
{
	int r = buf_reserve(b, n);
	if (r < 0)
		return r;
	if (n)
		memcpy(b->data + b->len, data, n);
	b->len += n;
	return 0;
}

void buf_consume(struct buf *b, size_t n)
{
	if (n >= b->len) {
		b->len = 0;
		return;
	}
	memmove(b->data, b->data + n, b->len - n);
	b->len -= n;
}

int frame_begin(struct buf *b, size_t *ret_start, uint16_t type, uint64_t seq)
{
	uint8_t h[FRAME_HEADER_SIZE];
	put_le(h, 0, 4);
	put_le(h + 4, type, 2);
	put_le(h + 6, PROTO_VERSION, 2);
	put_le(h + 8, seq, 8);
	*ret_start = b->len;
	return buf_append(b, h, sizeof h);
}

int frame_put_bytes(struct buf *b, uint16_t tag, const void *data, size_t n)
{
	uint8_t h[6];
	if (n > UINT32_MAX)
		return -E2BIG;
	put_le(h, tag, 2);
	put_le(h + 2, n, 4);
	int r = buf_append(b, h, sizeof h);
	if (r < 0)
		return r;
	return buf_append(b, data, n);
}

int frame_put_u64(struct buf *b, uint16_t tag, uint64_t v)
{
	uint8_t p[8];
	put_le(p, v, 8);
	return frame_put_bytes(b, tag, p, sizeof p);
}

int frame_put_str(struct buf *b, uint16_t tag, const char *s)
{
	return frame_put_bytes(b, tag, s, strlen(s));
}

int frame_end(struct buf *b, size_t start)
{
	size_t payload = b->len - start - FRAME_HEADER_SIZE;
	if (payload > UINT32_MAX)
		return -E2BIG;
	put_le(b->data + start, payload, 4);
	return 0;
}

int frame_end_with_bytes(struct buf *b, size_t start, uint16_t tag, size_t n)
{
	uint8_t h[6];
	size_t payload;
	int r;

	if (n > UINT32_MAX)
		return -E2BIG;
	put_le(h, tag, 2);
	put_le(h + 2, n, 4);
	r = buf_append(b, h, sizeof h);
	if (r < 0)
		return r;
	payload = b->len - start - FRAME_HEADER_SIZE;
	if (payload > UINT32_MAX - n)
		return -E2BIG;
	put_le(b->data + start, payload + n, 4);
	return 0;
}

long frame_parse(const uint8_t *data, size_t avail, size_t max_payload, struct frame *ret)
{
	if (avail < FRAME_HEADER_SIZE)
		return 0;
	uint64_t len = get_le(data, 4);
	if (len > max_payload)
		return -EMSGSIZE;
	uint16_t version = (uint16_t)get_le(data + 6, 2);
	if (version != PROTO_VERSION)
		return -EPROTO;
	if (avail < FRAME_HEADER_SIZE + len)
		return 0;
	*ret = (struct frame){
		.type = (uint16_t)get_le(data + 4, 2),
		.version = version,
		.seq = get_le(data + 8, 8),
		.payload = data + FRAME_HEADER_SIZE,
		.payload_len = len,
	};
	return (long)(FRAME_HEADER_SIZE + len);
}

void frame_iter_init(struct frame_iter *it, const struct frame *f)
{
	it->p = f->payload;
	it->left = f->payload_len;
}

int frame_iter_next(struct frame_iter *it, uint16_t *ret_tag, const uint8_t **ret_val,
		    size_t *ret_len)
{
	if (it->left == 0)
		return 0;
	if (it->left < 6)
		return -EBADMSG;
	uint64_t len = get_le(it->p + 2, 4);
	if (len > it->left - 6)
		return -EBADMSG;
	*ret_tag = (uint16_t)get_le(it->p, 2);
	*ret_val = it->p + 6;
	*ret_len = len;
	it->p += 6 + len;
	it->left -= 6 + len;
	return 1;
}

int frame_val_u64(const uint8_t *val, size_t len, uint64_t *ret)
{
	if (len != 8)
		return -EBADMSG;
	*ret = get_le(val, 8);
	return 0;
}

int frame_val_strdup(const uint8_t *val, size_t len, size_t max_len, char **ret)
{
	if (len > max_len)
		return -E2BIG;
	if (memchr(val, 0, len))
		return -EBADMSG;
	char *s = malloc(len + 1);
	if (!s)
		return -ENOMEM;
	memcpy(s, val, len);
	s[len] = 0;
	*ret = s;
	return 0;
}

int frame_for_each_field(const struct frame *f,
			 int (*fn)(void *userdata, uint16_t tag, const uint8_t *val, size_t len),
			 void *userdata)
{
	struct frame_iter it;
	const uint8_t *val;
	uint16_t tag;
	size_t len;
	int r;

	frame_iter_init(&it, f);
	while ((r = frame_iter_next(&it, &tag, &val, &len)) > 0) {
		r = fn(userdata, tag, val, len);
		if (r < 0)
			return r;
	}
	return r;
}
