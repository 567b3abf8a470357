/* SPDX-License-Identifier: MIT */
#pragma once

/* The bounded buffer of one output stream of a run: the first head_max bytes, a ring of the last
 * tail_max bytes that did not go into the head, and the count of every byte. The memory is
 * allocated once, at the first byte, for both limits; appending never allocates more, so a
 * command's output cannot grow the agent. Without memory for it the bytes are counted and not
 * kept (truncated).
 *
 * When total <= head_max + tail_max, head followed by tail is exactly the stream. Otherwise the
 * head is the first head_max bytes, the tail the last tail_max bytes, and the bytes between
 * them are gone (output_buffer_truncated()). */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct output_buffer {
	uint8_t *mem; /* one allocation: head_max bytes of head, then tail_max of ring; NULL until
		       * the first byte */
	bool lost;    /* that allocation failed: nothing is kept */
	size_t head_max;
	size_t head_len;
	size_t tail_max;
	size_t tail_len; /* bytes kept in the ring */
	size_t ring_next; /* ring index the next byte goes to; the oldest byte when the ring is full */
	uint64_t total;
};

/* -ENOMEM (limits that overflow), or 0. A zero-initialized buffer (no init) behaves as head_max = tail_max = 0. */
int output_buffer_init(struct output_buffer *o, size_t head_max, size_t tail_max);
void output_buffer_done(struct output_buffer *o);

void output_buffer_append(struct output_buffer *o, const void *data, size_t n);

/* The kept head: stream offset 0, min(total, head_max) bytes. */
void output_buffer_head(const struct output_buffer *o, const uint8_t **ret, size_t *ret_len);

/* The kept bytes after the head, contiguous, with the stream offset of the first one. Puts the
 * ring in order in place (no allocation); the pointer is valid until the next append. */
void output_buffer_tail(struct output_buffer *o, const uint8_t **ret, size_t *ret_len,
			uint64_t *ret_offset);

/* One contiguous piece of the kept bytes at stream offset from, or, when the bytes there are no
 * longer kept, at the first kept byte after it: the head from `from` to its end, else the tail
 * from max(from, its first offset) to the end of the ring or of the stream. Its offset in
 * *ret_offset; *ret_len 0 (and *ret_offset the total) when nothing is kept at or after from.
 * Does not reorder the ring; the pointer is valid until the next append. */
void output_buffer_piece(const struct output_buffer *o, uint64_t from, const uint8_t **ret,
			 size_t *ret_len, uint64_t *ret_offset);

static inline uint64_t output_buffer_total(const struct output_buffer *o)
{
	return o->total;
}

/* The pipe a command writes its stdout or stderr to, made larger than Linux's 64 KiB once the
 * command has written OUTPUT_PIPE_GROW_AFTER bytes to it: with a fast writer the agent then
 * reads up to OUTPUT_READ_BYTES per wakeup (one frame to the controller) instead of one
 * writer's write() at a time, and the writer runs on while the agent waits for the CPU. At most
 * OUTPUT_PIPE_BYTES and never above /proc/sys/fs/pipe-max-size (which only root outside any
 * sandbox can change), so the agent takes no more than an unprivileged process may. Best
 * effort: on any error the pipe keeps its size. */
#define OUTPUT_PIPE_GROW_AFTER (64u * 1024)
#define OUTPUT_PIPE_BYTES (1024u * 1024)
#define OUTPUT_READ_BYTES (1024u * 1024)
void output_pipe_grow(int fd);

static inline bool output_buffer_truncated(const struct output_buffer *o)
{
	return o->total > (uint64_t)o->head_len + o->tail_len;
}
