/* SPDX-License-Identifier: MIT */
/* The client's HTTP/1.1 response parser (src/client/http1-parse.c) against a hostile server:
 * status lines, headers, Content-Length, chunked bodies, 1xx heads, bodies until close.
 *
 * Input: one byte of settings (bit 0: the request was HEAD), then the server's bytes. They are
 * parsed twice, in one buffer and cut into pieces whose sizes come from the bytes themselves,
 * the way http1.c feeds them (after a 1xx head, the rest of the buffer goes on; after the
 * response, nothing); both must give the same headers, status, body and end. Every byte a
 * callback is given is read, and the parser's bounds are checked: no header line longer than
 * HTTP1_LINE_MAX, no more than HTTP1_HEADERS_MAX headers per head.
 *
 * fuzz-max-len: 131072 */

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "client/http1-parse.h"
#include "fuzz.h"

struct trace {
	uint64_t hash;
	unsigned headers; /* of the current head */
	uint64_t body_bytes;
};

static void trace_mix(struct trace *t, const void *data, size_t n)
{
	const uint8_t *p = data;
	for (size_t i = 0; i < n; i++)
		t->hash = (t->hash ^ p[i]) * 1099511628211ull;
}

static int on_header(const char *name, size_t name_len, const char *value, size_t value_len,
		     void *userdata)
{
	struct trace *t = userdata;
	if (name_len == 0 || name_len + value_len > HTTP1_LINE_MAX)
		abort();
	if (++t->headers > HTTP1_HEADERS_MAX)
		abort();
	uint64_t head[3] = { 1, name_len, value_len };
	trace_mix(t, head, sizeof(head));
	trace_mix(t, name, name_len);
	trace_mix(t, value, value_len);
	return 0;
}

static int on_head(long status, void *userdata)
{
	struct trace *t = userdata;
	if (status < 200 || status > 599)
		abort(); /* final heads only */
	uint64_t head[2] = { 2, (uint64_t)status };
	trace_mix(t, head, sizeof(head));
	return 0;
}

static int on_body(const void *data, size_t len, void *userdata)
{
	struct trace *t = userdata;
	t->body_bytes += len;
	/* The body is hashed as one stream: how it was split into calls does not matter. */
	trace_mix(t, data, len);
	return 0;
}

/* Feeds like http1.c's receive_some(): 1xx heads restart the parser on the same buffer. */
static int feed(struct http1_parser *p, struct trace *t, const uint8_t *data, size_t n,
		size_t *ret_used)
{
	size_t off = 0, used = 0;
	int k;
	for (;; off += used) {
		used = 0;
		k = http1_parser_feed(p, data + off, n - off, &used);
		if (used > n - off)
			abort();
		if (k != HTTP1_INFO)
			break;
		t->headers = 0;
		trace_mix(t, "info", 4);
		if (off + used == n) {
			k = HTTP1_MORE;
			used = 0;
			break;
		}
	}
	*ret_used = off + used;
	return k;
}

static int parse(bool head, const uint8_t *data, size_t n, bool cut, struct trace *t,
		 long *ret_status)
{
	struct http1_parser *p = calloc(1, sizeof(*p));
	if (!p)
		abort();
	*t = (struct trace){ .hash = 14695981039346656037ull };
	p->no_body = head;
	p->on_header = on_header;
	p->on_head = on_head;
	p->on_body = on_body;
	p->userdata = t;
	http1_parser_reset(p);

	int k = HTTP1_MORE;
	size_t off = 0;
	while (off < n && k == HTTP1_MORE) {
		size_t piece = n - off;
		if (cut) {
			piece = (size_t)(data[off] % 97) + 1;
			if (piece > n - off)
				piece = n - off;
		}
		uint8_t *copy = malloc(piece);
		if (!copy)
			abort();
		memcpy(copy, data + off, piece);
		size_t used;
		k = feed(p, t, copy, piece, &used);
		free(copy);
		off += piece;
	}
	if (k == HTTP1_MORE)
		k = http1_parser_eof(p);
	if (k == -EPROTO && !p->error)
		abort(); /* a refusal always says why */
	if (k != HTTP1_DONE && k != -EPROTO && k != -ECONNRESET)
		abort();
	*ret_status = p->status;
	free(p);
	return k;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	bool head = data[0] & 1;
	data++;
	size--;

	struct trace whole, pieces;
	long s_whole, s_pieces;
	int k_whole = parse(head, data, size, false, &whole, &s_whole);
	int k_pieces = parse(head, data, size, true, &pieces, &s_pieces);
	if (k_whole != k_pieces || whole.hash != pieces.hash || s_whole != s_pieces ||
	    whole.body_bytes != pieces.body_bytes)
		abort();
	return 0;
}
