/* SPDX-License-Identifier: MIT */
#pragma once

/* A text/event-stream parser (the HTML standard's, without retry): bytes in as they arrive,
 * one callback per complete event. Not installed. */

#include <stdbool.h>
#include <stddef.h>

/* The largest event and line the parser keeps. */
#define SSE_EVENT_MAX (64u * 1024 * 1024)

struct sse_parser {
	/* One event: its type ("message" when none was named) and its data lines joined with
	 * '\n' (NUL-terminated). Returns 0 to go on, < 0 to stop: sse_feed() returns it. */
	int (*on_event)(const char *event, const char *data, size_t len, void *userdata);
	void *userdata;
	char *line; /* the line being received */
	size_t line_len, line_cap;
	char *data; /* the event's data lines, joined with '\n' */
	size_t data_len, data_cap;
	bool has_data;
	char event[16];
};

/* Feeds len bytes. Returns 0, what on_event returned (< 0), or -E2BIG for a line or an event
 * past SSE_EVENT_MAX, -ENOMEM. */
int sse_feed(struct sse_parser *p, const void *data, size_t len);

/* Forgets a partial line or event (before the stream is opened again). */
void sse_reset(struct sse_parser *p);

/* Frees the buffers. */
void sse_done(struct sse_parser *p);
