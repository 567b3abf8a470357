/* SPDX-License-Identifier: MIT */
/* Live output (GET …/commands/{run}/output) read by minimal readers of our own over the unix
 * socket, beside the client library's station_run_follow: the WebSocket variant (binary
 * messages of 1 byte stream, 8 bytes offset, data; text gap, end, error; a close), and the
 * server-sent events curl users read (HTTP/1.0, so the body is not chunked: lines, base64 data
 * decoded, gap and end events). */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "bench-ws.h"

void bench_go(struct ws_count *c)
{
	struct timespec ts;
	FILE *f;

	if (!c->go_path || c->go_ms > 0)
		return;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	c->go_ms = (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
	f = fopen(c->go_path, "we");
	if (f)
		fclose(f);
}

#define BUF_SIZE (4u << 20)

struct ws_reader {
	int fd;
	unsigned char *buf;
	size_t len, pos; /* bytes in buf, bytes consumed */
};

static int ws_connect(const char *endpoint)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	const char *path = strncmp(endpoint, "unix:", 5) == 0 ? endpoint + 5 : endpoint;
	if (path[0] != '/' ||
	    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path) >= (int)sizeof sa.sun_path)
		return -EINVAL;
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
		int r = -errno;
		close(fd);
		return r;
	}
	return fd;
}

/* Makes at least need bytes available from pos. */
static int ws_fill(struct ws_reader *w, size_t need)
{
	if (w->len - w->pos >= need)
		return 0;
	if (need > BUF_SIZE)
		return -E2BIG;
	memmove(w->buf, w->buf + w->pos, w->len - w->pos);
	w->len -= w->pos;
	w->pos = 0;
	while (w->len < need) {
		ssize_t n = read(w->fd, w->buf + w->len, BUF_SIZE - w->len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -ECONNRESET;
		w->len += (size_t)n;
	}
	return 0;
}

static int ws_handshake(struct ws_reader *w, const char *ws, const char *run)
{
	char req[1024];
	int n = snprintf(
		req, sizeof req,
		"GET /v1/workspaces/%s/commands/%s/output HTTP/1.1\r\nHost: station\r\n"
		"Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n",
		ws, run);
	if (write(w->fd, req, (size_t)n) != n)
		return -EIO;
	for (;;) { /* headers end with an empty line */
		unsigned char *end = memmem(w->buf, w->len, "\r\n\r\n", 4);
		if (end) {
			if (w->len < 12 || memcmp(w->buf + 9, "101", 3) != 0)
				return -EPROTO;
			w->pos = (size_t)(end + 4 - w->buf);
			return 0;
		}
		int r = ws_fill(w, w->len - w->pos + 1);
		if (r < 0)
			return r;
	}
}

/* One frame: opcode and payload (pointing into buf, valid until the next call). */
static int ws_frame(struct ws_reader *w, int *ret_op, const unsigned char **ret_data,
		    size_t *ret_len)
{
	int r = ws_fill(w, 2);
	if (r < 0)
		return r;
	const unsigned char *h = w->buf + w->pos;
	size_t hlen = 2;
	uint64_t len = h[1] & 0x7f;
	if (len == 126)
		hlen = 4;
	else if (len == 127)
		hlen = 10;
	if ((r = ws_fill(w, hlen)) < 0)
		return r;
	h = w->buf + w->pos;
	if (hlen == 4)
		len = (uint64_t)h[2] << 8 | h[3];
	else if (hlen == 10)
		for (int i = 0; i < 8; i++)
			len = len << 8 | h[2 + i];
	if (len > BUF_SIZE - hlen || (r = ws_fill(w, hlen + len)) < 0)
		return r < 0 ? r : -E2BIG;
	*ret_op = w->buf[w->pos] & 0x0f;
	*ret_data = w->buf + w->pos + hlen;
	*ret_len = (size_t)len;
	w->pos += hlen + len;
	return 0;
}

/* A text message: gap (counted) or end (returns 1) or error. */
static int ws_text(const unsigned char *data, size_t len, struct ws_count *ret)
{
	json_t *j = json_loadb((const char *)data, len, 0, NULL);
	const char *type = json_string_value(json_object_get(j, "type"));
	int r = 0;
	if (type && strcmp(type, "gap") == 0) {
		ret->gaps += (uint64_t)json_integer_value(json_object_get(j, "bytes"));
	} else if (type && strcmp(type, "end") == 0) {
		json_t *run = json_object_get(j, "run");
		ret->stdout_bytes =
			(uint64_t)json_integer_value(json_object_get(run, "stdoutBytes"));
		ret->duration_ms = (double)json_integer_value(json_object_get(run, "durationMs"));
		r = 1;
	} else {
		r = -EPROTO;
	}
	json_decref(j);
	return r;
}

int bench_ws_follow(const char *endpoint, const char *ws, const char *run, struct ws_count *ret)
{
	struct ws_reader w = { .fd = ws_connect(endpoint), .buf = malloc(BUF_SIZE) };
	int r = w.fd < 0 ? w.fd : w.buf ? ws_handshake(&w, ws, run) : -ENOMEM;
	*ret = (struct ws_count){ .go_path = ret->go_path };
	while (r == 0) {
		int op;
		const unsigned char *data;
		size_t len;
		r = ws_frame(&w, &op, &data, &len);
		if (r < 0)
			break;
		if (op == 0x2 && len >= 9) {
			ret->delivered += len - 9;
			bench_go(ret);
		} else if (op == 0x1)
			r = ws_text(data, len, ret);
		else if (op == 0x8)
			r = -ECONNRESET; /* closed before the end message */
	}
	if (w.fd >= 0)
		close(w.fd);
	free(w.buf);
	return r == 1 ? 0 : r;
}

/* ---- server-sent events ---------------------------------------------------------------------- */

static int b64_value(unsigned char ch)
{
	static signed char table[256];
	static int ready;
	if (!ready) {
		const char *a = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
		memset(table, -1, sizeof table);
		for (int i = 0; i < 64; i++)
			table[(unsigned char)a[i]] = (signed char)i;
		ready = 1;
	}
	return table[ch];
}

/* Decodes padded base64 into out (n / 4 * 3 bytes at least); the decoded length, or -1. */
static long b64_decode(const char *s, size_t n, unsigned char *out)
{
	size_t len = 0;
	if (n % 4 != 0)
		return -1;
	for (size_t i = 0; i < n; i += 4) {
		int a = b64_value((unsigned char)s[i]), b = b64_value((unsigned char)s[i + 1]);
		int c = s[i + 2] == '=' ? 0 : b64_value((unsigned char)s[i + 2]);
		int d = s[i + 3] == '=' ? 0 : b64_value((unsigned char)s[i + 3]);
		if (a < 0 || b < 0 || c < 0 || d < 0)
			return -1;
		uint32_t v = (uint32_t)a << 18 | (uint32_t)b << 12 | (uint32_t)c << 6 | (uint32_t)d;
		out[len++] = (unsigned char)(v >> 16);
		if (s[i + 2] != '=')
			out[len++] = (unsigned char)(v >> 8);
		if (s[i + 3] != '=')
			out[len++] = (unsigned char)v;
	}
	return (long)len;
}

/* One event's data line: output (decoded and counted), gap (counted), end (returns 1). */
static int sse_event(const char *event, const char *data, size_t len, unsigned char *scratch,
		     struct ws_count *ret)
{
	if (strcmp(event, "output") == 0) {
		const char *d = memmem(data, len, "\"data\":\"", 8);
		const char *end = d ? memchr(d + 8, '"', len - (size_t)(d + 8 - data)) : NULL;
		long n = end ? b64_decode(d + 8, (size_t)(end - d - 8), scratch) : -1;
		if (n < 0)
			return -EPROTO;
		ret->delivered += (uint64_t)n;
		bench_go(ret);
		return 0;
	}
	if (strcmp(event, "gap") != 0 && strcmp(event, "end") != 0)
		return 0;
	json_t *j = json_loadb(data, len, 0, NULL);
	if (!j)
		return -EPROTO;
	int r = 0;
	if (strcmp(event, "gap") == 0) {
		ret->gaps += (uint64_t)json_integer_value(json_object_get(j, "bytes"));
	} else {
		ret->stdout_bytes = (uint64_t)json_integer_value(json_object_get(j, "stdoutBytes"));
		ret->duration_ms = (double)json_integer_value(json_object_get(j, "durationMs"));
		r = 1;
	}
	json_decref(j);
	return r;
}

int bench_sse_follow(const char *endpoint, const char *ws, const char *run, struct ws_count *ret)
{
	struct ws_reader w = { .fd = ws_connect(endpoint), .buf = malloc(BUF_SIZE) };
	unsigned char *scratch = malloc(BUF_SIZE);
	char event[16] = "";
	int r = w.fd < 0 ? w.fd : w.buf && scratch ? 0 : -ENOMEM;
	*ret = (struct ws_count){ .go_path = ret->go_path };
	if (r == 0) {
		char req[512];
		int n = snprintf(req, sizeof req,
				 "GET /v1/workspaces/%s/commands/%s/output HTTP/1.0\r\n"
				 "Host: station\r\nAccept: text/event-stream\r\n\r\n",
				 ws, run);
		r = write(w.fd, req, (size_t)n) == n ? 0 : -EIO;
	}
	int head = 1;
	while (r == 0) {
		unsigned char *nl = memchr(w.buf + w.pos, '\n', w.len - w.pos);
		if (!nl) {
			r = ws_fill(&w, w.len - w.pos + 1);
			continue;
		}
		char *line = (char *)w.buf + w.pos;
		size_t len = (size_t)(nl - (w.buf + w.pos));
		w.pos += len + 1;
		if (len > 0 && line[len - 1] == '\r')
			len--;
		if (head) { /* the status line, headers, an empty line */
			if (head == 1 && (len < 12 || memcmp(line + 9, "200", 3) != 0))
				r = -EPROTO;
			head = len == 0 ? 0 : 2;
		} else if (len > 7 && memcmp(line, "event: ", 7) == 0) {
			snprintf(event, sizeof event, "%.*s", (int)(len - 7), line + 7);
		} else if (len > 6 && memcmp(line, "data: ", 6) == 0) {
			r = sse_event(event, line + 6, len - 6, scratch, ret);
		}
	}
	if (w.fd >= 0)
		close(w.fd);
	free(w.buf);
	free(scratch);
	return r == 1 ? 0 : r;
}
