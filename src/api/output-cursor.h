/* SPDX-License-Identifier: MIT */
#pragma once

/* Where a client of a run's or a service's output stands in each of its two streams, alike for
 * the SSE and the WebSocket variant: what it has been sent, and the bytes it missed (the agent
 * dropped them, or the client fell behind) that are still to be announced as a gap. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "daemon/manager.h"
#include "proto/agent-proto.h"

struct output_cursor {
	uint64_t next;	     /* offset after the last byte sent or counted missing */
	uint64_t gap_offset; /* missed bytes not yet announced: [gap_offset, next) */
	uint64_t gap_bytes;
};

/* The cursor of a stream among two: 0 for stdout, 1 for stderr, -1 for anything else. */
static inline int output_cursor_index(int stream)
{
	switch (stream) {
	case RUN_STREAM_STDOUT:
		return 0;
	case RUN_STREAM_STDERR:
		return 1;
	default:
		return -1;
	}
}

/* "stdout" or "stderr" for a cursor's index. */
static inline const char *output_cursor_stream_name(int idx)
{
	return run_stream_to_string(idx == 0 ? RUN_STREAM_STDOUT : RUN_STREAM_STDERR);
}

static inline void output_cursor_miss(struct output_cursor *c, uint64_t offset, uint64_t n)
{
	if (c->gap_bytes == 0)
		c->gap_offset = offset;
	c->gap_bytes += n;
}

/* For a chunk the manager delivered at *offset (*data, *n bytes): drops what was already sent
 * or counted, and counts as missed what lies between that and the chunk. Returns false when
 * nothing of the chunk is left to send. */
static inline bool output_cursor_take(struct output_cursor *c, uint64_t *offset,
				      const uint8_t **data, size_t *n)
{
	if (!output_skip_seen(c->next, offset, data, n))
		return false;
	if (*offset > c->next) {
		output_cursor_miss(c, c->next, *offset - c->next);
		c->next = *offset;
	}
	return true;
}
