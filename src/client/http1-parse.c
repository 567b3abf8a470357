/* SPDX-License-Identifier: MIT */
/* The HTTP/1.1 response parser of the client's own transport: the answer of a server that may
 * be hostile, read a line at a time into a bounded buffer, bodies framed by Content-Length,
 * chunked, or the end of the connection. */

#include <errno.h>
#include <string.h>
#include <strings.h>

#include "http1-parse.h"

enum {
	S_STATUS,
	S_HEADER,
	S_BODY,
	S_CHUNK_SIZE,
	S_CHUNK_DATA,
	S_CHUNK_END,
	S_TRAILER,
	S_UNTIL_CLOSE,
	S_DONE,
};

static void response_start(struct http1_parser *p)
{
	p->state = S_STATUS;
	p->status = 0;
	p->keep_alive = true;
	p->chunked = false;
	p->until_close = false;
	p->have_length = false;
	p->remaining = 0;
	p->head_bytes = 0;
	p->headers = 0;
	p->line_len = 0;
}

void http1_parser_reset(struct http1_parser *p)
{
	response_start(p);
	p->got_bytes = false;
	p->error = NULL;
}

static int fail(struct http1_parser *p, const char *why)
{
	p->error = why;
	return -EPROTO;
}

static bool is_digit(char ch)
{
	return ch >= '0' && ch <= '9';
}

static int parse_status(struct http1_parser *p, const char *s, size_t n)
{
	/* "HTTP/1.x SSS[ reason]" */
	if (n < 12 || memcmp(s, "HTTP/1.", 7) != 0 || !is_digit(s[7]) || s[8] != ' ' ||
	    !is_digit(s[9]) || !is_digit(s[10]) || !is_digit(s[11]) || (n > 12 && s[12] != ' '))
		return fail(p, "bad status line");
	p->status = (s[9] - '0') * 100 + (s[10] - '0') * 10 + (s[11] - '0');
	if (p->status < 100 || p->status > 599)
		return fail(p, "bad status code");
	p->keep_alive = s[7] != '0';
	return 0;
}

/* Whether the comma-separated list s (n bytes) holds token (case-insensitive). */
static bool list_has(const char *s, size_t n, const char *token)
{
	size_t t = strlen(token);

	while (n > 0) {
		const char *comma = memchr(s, ',', n);
		size_t len = comma ? (size_t)(comma - s) : n;
		const char *a = s, *b = s + len;

		while (a < b && (*a == ' ' || *a == '\t'))
			a++;
		while (b > a && (b[-1] == ' ' || b[-1] == '\t'))
			b--;
		if ((size_t)(b - a) == t && strncasecmp(a, token, t) == 0)
			return true;
		if (!comma)
			break;
		n -= len + 1;
		s = comma + 1;
	}
	return false;
}

static int parse_length(struct http1_parser *p, const char *v, size_t n)
{
	uint64_t x = 0;

	if (n == 0)
		return fail(p, "empty Content-Length");
	for (size_t i = 0; i < n; i++) {
		if (!is_digit(v[i]))
			return fail(p, "bad Content-Length");
		if (x > (UINT64_MAX - 9) / 10)
			return fail(p, "Content-Length too large");
		x = x * 10 + (uint64_t)(v[i] - '0');
	}
	if (p->have_length && p->remaining != x)
		return fail(p, "conflicting Content-Length headers");
	p->have_length = true;
	p->remaining = x;
	return 0;
}

static bool is_token_char(char ch)
{
	return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || is_digit(ch) ||
	       (ch && strchr("!#$%&'*+-.^_`|~", ch));
}

static int parse_header(struct http1_parser *p, const char *s, size_t n)
{
	const char *colon = memchr(s, ':', n), *v;
	size_t name_len, vn;

	if (++p->headers > HTTP1_HEADERS_MAX)
		return fail(p, "too many headers");
	if (!colon || colon == s)
		return fail(p, "bad header line");
	name_len = (size_t)(colon - s);
	for (size_t i = 0; i < name_len; i++)
		if (!is_token_char(s[i]))
			return fail(p, "bad header name");
	v = colon + 1;
	vn = n - name_len - 1;
	while (vn > 0 && (*v == ' ' || *v == '\t'))
		v++, vn--;
	while (vn > 0 && (v[vn - 1] == ' ' || v[vn - 1] == '\t'))
		vn--;

	if (name_len == 14 && strncasecmp(s, "content-length", 14) == 0) {
		int r = parse_length(p, v, vn);

		if (r < 0)
			return r;
	} else if (name_len == 17 && strncasecmp(s, "transfer-encoding", 17) == 0) {
		if (vn != 7 || strncasecmp(v, "chunked", 7) != 0)
			return fail(p, "unsupported Transfer-Encoding");
		p->chunked = true;
	} else if (name_len == 10 && strncasecmp(s, "connection", 10) == 0) {
		if (list_has(v, vn, "close"))
			p->keep_alive = false;
		else if (list_has(v, vn, "keep-alive"))
			p->keep_alive = true;
	}
	return p->on_header ? p->on_header(s, name_len, v, vn, p->userdata) : 0;
}

/* The empty line after the headers. */
static int head_end(struct http1_parser *p)
{
	int r;

	if (p->status < 200) {
		if (p->status == 101)
			return fail(p, "unexpected protocol switch");
		if (p->have_length || p->chunked)
			return fail(p, "a 1xx answer with a body");
		return HTTP1_INFO;
	}
	if (p->on_head) {
		r = p->on_head(p->status, p->userdata);
		if (r < 0)
			return r;
	}
	if (p->no_body || p->status == 204 || p->status == 304)
		p->state = S_DONE;
	else if (p->chunked)
		p->state = S_CHUNK_SIZE;
	else if (p->have_length)
		p->state = p->remaining > 0 ? S_BODY : S_DONE;
	else {
		p->state = S_UNTIL_CLOSE;
		p->keep_alive = false;
	}
	/* A chunked answer's length is its chunks' (a Content-Length beside it is ignored). */
	if (p->chunked)
		p->have_length = false;
	return p->state == S_DONE ? HTTP1_DONE : HTTP1_MORE;
}

static int parse_chunk_size(struct http1_parser *p, const char *s, size_t n)
{
	uint64_t x = 0;
	size_t i = 0;

	for (; i < n; i++) {
		char ch = s[i];
		unsigned d;

		if (is_digit(ch))
			d = (unsigned)(ch - '0');
		else if (ch >= 'a' && ch <= 'f')
			d = (unsigned)(ch - 'a' + 10);
		else if (ch >= 'A' && ch <= 'F')
			d = (unsigned)(ch - 'A' + 10);
		else
			break;
		if (x > (UINT64_MAX >> 4))
			return fail(p, "chunk size too large");
		x = (x << 4) | d;
	}
	if (i == 0 || (i < n && s[i] != ';' && s[i] != ' ' && s[i] != '\t'))
		return fail(p, "bad chunk size");
	p->remaining = x;
	p->state = x > 0 ? S_CHUNK_DATA : S_TRAILER;
	return HTTP1_MORE;
}

/* One complete line (without its CRLF) in the current state. */
static int parse_line(struct http1_parser *p, const char *s, size_t n)
{
	int r;

	switch (p->state) {
	case S_STATUS:
		r = parse_status(p, s, n);
		if (r < 0)
			return r;
		p->state = S_HEADER;
		return HTTP1_MORE;
	case S_HEADER:
		if (n == 0)
			return head_end(p);
		return parse_header(p, s, n);
	case S_CHUNK_SIZE:
		return parse_chunk_size(p, s, n);
	case S_CHUNK_END:
		if (n != 0)
			return fail(p, "chunk longer than its size");
		p->state = S_CHUNK_SIZE;
		return HTTP1_MORE;
	case S_TRAILER:
		if (n == 0) {
			p->state = S_DONE;
			return HTTP1_DONE;
		}
		if (++p->headers > HTTP1_HEADERS_MAX)
			return fail(p, "too many trailers");
		return HTTP1_MORE;
	default:
		return fail(p, "internal parser state");
	}
}

static bool state_is_line(int state)
{
	return state == S_STATUS || state == S_HEADER || state == S_CHUNK_SIZE ||
	       state == S_CHUNK_END || state == S_TRAILER;
}

/* Takes bytes of a line; r > 0 when the line was complete and handled. */
static int take_line(struct http1_parser *p, const char *s, size_t n, size_t *used)
{
	const char *nl = memchr(s, '\n', n);
	size_t take = nl ? (size_t)(nl - s) + 1 : n;
	bool head = p->state == S_STATUS || p->state == S_HEADER || p->state == S_TRAILER;
	size_t len;

	if (take > HTTP1_LINE_MAX - p->line_len)
		return fail(p, p->state == S_STATUS ? "status line too long" : "line too long");
	if (head && take > HTTP1_HEAD_MAX - p->head_bytes)
		return fail(p, "response head too large");
	memcpy(p->line + p->line_len, s, take);
	p->line_len += take;
	if (head)
		p->head_bytes += take;
	*used = take;
	if (!nl)
		return 0;

	len = p->line_len;
	p->line_len = 0;
	if (len < 2 || p->line[len - 2] != '\r')
		return fail(p, "line without CRLF");
	len -= 2;
	if (memchr(p->line, '\r', len) || memchr(p->line, '\0', len))
		return fail(p, "control character in a line");
	return parse_line(p, p->line, len);
}

int http1_parser_feed(struct http1_parser *p, const void *data, size_t len, size_t *ret_used)
{
	const char *s = data;
	size_t off = 0;
	int r;

	if (len > 0)
		p->got_bytes = true;
	while (off < len) {
		size_t used = 0;

		if (p->state == S_DONE)
			break;
		if (state_is_line(p->state)) {
			r = take_line(p, s + off, len - off, &used);
			off += used;
			if (r < 0)
				return r;
			if (r == HTTP1_INFO) {
				long status = p->status; /* for the caller, until the next head */

				response_start(p);
				p->status = status;
				*ret_used = off;
				return HTTP1_INFO;
			}
			if (r == HTTP1_DONE) {
				*ret_used = off;
				return HTTP1_DONE;
			}
			continue;
		}
		used = len - off;
		if (p->state != S_UNTIL_CLOSE && used > p->remaining)
			used = (size_t)p->remaining;
		if (p->on_body) {
			r = p->on_body(s + off, used, p->userdata);
			if (r < 0) {
				*ret_used = off;
				return r;
			}
		}
		off += used;
		if (p->state == S_UNTIL_CLOSE)
			continue;
		p->remaining -= used;
		if (p->remaining > 0)
			continue;
		if (p->state == S_CHUNK_DATA)
			p->state = S_CHUNK_END;
		else {
			p->state = S_DONE;
			*ret_used = off;
			return HTTP1_DONE;
		}
	}
	*ret_used = off;
	return p->state == S_DONE ? HTTP1_DONE : HTTP1_MORE;
}

int http1_parser_eof(struct http1_parser *p)
{
	if (p->state == S_UNTIL_CLOSE || p->state == S_DONE) {
		p->state = S_DONE;
		return HTTP1_DONE;
	}
	return -ECONNRESET;
}
