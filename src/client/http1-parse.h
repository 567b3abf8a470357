/* SPDX-License-Identifier: MIT */
#pragma once

/* An HTTP/1.1 response parser for the client (pure: bytes in, callbacks out, no I/O). Every
 * size a server chooses is bounded: the status line and each header line, the whole head, the
 * number of headers, a chunk-size line; Content-Length and chunk sizes are checked for
 * overflow. Not installed. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HTTP1_LINE_MAX 8192u	    /* the status line, one header line, one chunk-size line */
#define HTTP1_HEAD_MAX (64u * 1024) /* all header lines of one response */
#define HTTP1_HEADERS_MAX 100u

enum http1_feed {
	HTTP1_MORE = 0, /* all bytes taken, the response goes on */
	HTTP1_INFO = 1, /* a 1xx head ended (status says which); the next response follows */
	HTTP1_DONE = 2, /* the response is complete */
};

struct http1_parser {
	/* Set before the first byte */
	bool no_body; /* the request was HEAD: no body whatever the headers say */
	int (*on_header)(const char *name, size_t name_len, const char *value, size_t value_len,
			 void *userdata);
	/* Once the head is complete (final status only), before the first byte of body. */
	int (*on_head)(long status, void *userdata);
	int (*on_body)(const void *data, size_t len, void *userdata);
	void *userdata;

	/* Results */
	long status;	   /* of the head being read or last read */
	bool keep_alive;   /* the connection may carry another request after DONE */
	bool got_bytes;	   /* any byte of an answer arrived */
	const char *error; /* why a feed failed with -EPROTO (static text) */

	/* State */
	int state;
	bool chunked;
	bool until_close;
	bool have_length;
	uint64_t remaining;
	size_t head_bytes;
	unsigned headers;
	size_t line_len;
	char line[HTTP1_LINE_MAX];
};

/* Prepares p for a new response (keeps the settings above the results). */
void http1_parser_reset(struct http1_parser *p);

/* Feeds len bytes; *ret_used says how many were taken (fewer than len after INFO or DONE).
 * Returns an enum http1_feed, -EPROTO for a malformed or oversized answer (p->error says why),
 * or what a callback returned when < 0. */
int http1_parser_feed(struct http1_parser *p, const void *data, size_t len, size_t *ret_used);

/* The connection ended (EOF). Returns HTTP1_DONE when that ends the response (a body read until
 * close), -ECONNRESET when the response was cut short (or never started). */
int http1_parser_eof(struct http1_parser *p);
