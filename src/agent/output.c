/* SPDX-License-Identifier: MIT */
#include "agent/output.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int output_buffer_init(struct output_buffer *o, size_t head_max, size_t tail_max)
{
	if (head_max > SIZE_MAX - tail_max)
		return -ENOMEM;
	*o = (struct output_buffer){ .head_max = head_max, .tail_max = tail_max };
	return 0;
}

/* At the first byte: most commands print nothing, and an allocation the size of the limits per
 * command costs more than the command (the heap grows and shrinks around it). */
static bool buffer_alloc(struct output_buffer *o)
{
	if (!o->mem && o->head_max + o->tail_max > 0 && !o->lost)
		o->mem = malloc(o->head_max + o->tail_max);
	o->lost = !o->mem;
	return o->mem;
}

void output_buffer_done(struct output_buffer *o)
{
	free(o->mem);
	*o = (struct output_buffer){ 0 };
}

static uint8_t *ring(const struct output_buffer *o)
{
	return o->mem + o->head_max;
}

static void ring_append(struct output_buffer *o, const uint8_t *data, size_t n)
{
	uint8_t *r = ring(o);
	size_t first;

	if (n >= o->tail_max) {
		/* Only the last tail_max bytes survive; they fill the ring in order. */
		memcpy(r, data + (n - o->tail_max), o->tail_max);
		o->ring_next = 0;
		o->tail_len = o->tail_max;
		return;
	}
	first = o->tail_max - o->ring_next;
	if (first > n)
		first = n;
	memcpy(r + o->ring_next, data, first);
	memcpy(r, data + first, n - first);
	o->ring_next = (o->ring_next + n) % o->tail_max;
	o->tail_len = o->tail_len + n > o->tail_max ? o->tail_max : o->tail_len + n;
}

void output_buffer_append(struct output_buffer *o, const void *data, size_t n)
{
	const uint8_t *p = data;

	o->total += n;
	if (n == 0 || !buffer_alloc(o))
		return; /* out of memory: counted, not kept, so reported as truncated */
	if (o->head_len < o->head_max) {
		size_t take = o->head_max - o->head_len;

		if (take > n)
			take = n;
		memcpy(o->mem + o->head_len, p, take);
		o->head_len += take;
		p += take;
		n -= take;
	}
	if (n > 0 && o->tail_max > 0)
		ring_append(o, p, n);
}

void output_buffer_head(const struct output_buffer *o, const uint8_t **ret, size_t *ret_len)
{
	*ret = o->mem;
	*ret_len = o->head_len;
}

static void reverse(uint8_t *p, size_t n)
{
	for (size_t i = 0, j = n; i + 1 < j; i++, j--) {
		uint8_t t = p[i];

		p[i] = p[j - 1];
		p[j - 1] = t;
	}
}

void output_buffer_tail(struct output_buffer *o, const uint8_t **ret, size_t *ret_len,
			uint64_t *ret_offset)
{
	uint8_t *r;

	if (!o->mem) {
		*ret = NULL;
		*ret_len = 0;
		*ret_offset = o->total;
		return;
	}
	r = ring(o);
	/* The ring only wraps once full, so it is out of order exactly when full with
	 * ring_next != 0: rotate the oldest byte (at ring_next) to the front. */
	if (o->tail_len == o->tail_max && o->ring_next != 0) {
		reverse(r, o->ring_next);
		reverse(r + o->ring_next, o->tail_max - o->ring_next);
		reverse(r, o->tail_max);
		o->ring_next = 0;
	}
	*ret = o->tail_max > 0 ? r : NULL;
	*ret_len = o->tail_len;
	*ret_offset = o->total - o->tail_len;
}

void output_buffer_piece(const struct output_buffer *o, uint64_t from, const uint8_t **ret,
			 size_t *ret_len, uint64_t *ret_offset)
{
	uint64_t tail_start = o->total - o->tail_len;
	uint64_t at = from > tail_start ? from : tail_start;
	size_t oldest, i;

	if (o->mem && from < o->head_len) {
		*ret = o->mem + from;
		*ret_len = o->head_len - (size_t)from;
		*ret_offset = from;
		return;
	}
	if (!o->mem || at >= o->total) {
		*ret = NULL;
		*ret_len = 0;
		*ret_offset = o->total;
		return;
	}
	/* The ring wraps only once full; then its oldest byte is at ring_next. */
	oldest = o->tail_len == o->tail_max ? o->ring_next : 0;
	i = (oldest + (size_t)(at - tail_start)) % o->tail_max;
	*ret = ring(o) + i;
	*ret_len = o->total - at < o->tail_max - i ? (size_t)(o->total - at) : o->tail_max - i;
	*ret_offset = at;
}

/* /proc/sys/fs/pipe-max-size, read once (0: unknown, so the pipe is left alone). */
static unsigned long pipe_max_size(void)
{
	static unsigned long max;
	static bool read_once;
	FILE *f;

	if (read_once)
		return max;
	read_once = true;
	f = fopen("/proc/sys/fs/pipe-max-size", "re");
	if (!f)
		return 0;
	if (fscanf(f, "%lu", &max) != 1)
		max = 0;
	fclose(f);
	return max;
}

void output_pipe_grow(int fd)
{
	unsigned long want = pipe_max_size();

	if (want > OUTPUT_PIPE_BYTES)
		want = OUTPUT_PIPE_BYTES;
	if (want > 64 * 1024)
		(void)fcntl(fd, F_SETPIPE_SZ, (int)want);
}
