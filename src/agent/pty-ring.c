/* SPDX-License-Identifier: MIT */
/* A terminal's scrollback ring (pty.h): the last cap bytes of its output and their offsets. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "agent/pty.h"
#include "basic/cleanup.h"

int pty_ring_init(struct pty_ring *r, size_t cap)
{
	if (cap == 0)
		return -EINVAL;
	*r = (struct pty_ring){ .cap = cap };
	r->mem = malloc(cap);
	return r->mem ? 0 : -ENOMEM;
}

void pty_ring_done(struct pty_ring *r)
{
	free(r->mem);
	*r = (struct pty_ring){ 0 };
}

void pty_ring_append(struct pty_ring *r, const void *data, size_t n)
{
	const uint8_t *p = data;

	r->total += n;
	if (!r->mem)
		return;
	if (n >= r->cap) { /* only the last cap bytes stay */
		memcpy(r->mem, p + n - r->cap, r->cap);
		r->len = r->cap;
		r->next = 0;
		return;
	}
	while (n > 0) {
		size_t piece = MIN(n, r->cap - r->next);

		memcpy(r->mem + r->next, p, piece);
		r->next = (r->next + piece) % r->cap;
		r->len = MIN(r->len + piece, r->cap);
		p += piece;
		n -= piece;
	}
}

uint64_t pty_ring_start(const struct pty_ring *r)
{
	return r->total - r->len;
}

size_t pty_ring_read(const struct pty_ring *r, uint64_t from, void *out, size_t max,
		     uint64_t *ret_offset)
{
	uint64_t start = pty_ring_start(r);
	size_t skip, n, oldest, first;
	uint8_t *o = out;

	if (from < start)
		from = start;
	if (from > r->total)
		from = r->total;
	skip = (size_t)(from - start);
	n = MIN(r->len - skip, max);
	*ret_offset = from;
	if (n == 0)
		return 0;
	oldest = r->len == r->cap ? r->next : 0;
	oldest = (oldest + skip) % r->cap;
	first = MIN(n, r->cap - oldest);
	memcpy(o, r->mem + oldest, first);
	memcpy(o + first, r->mem, n - first);
	return n;
}
