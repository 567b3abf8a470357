/* SPDX-License-Identifier: MIT */
/* A small HTTP/1.1 app for the preview tests, run inside container workspaces (static, a
 * busybox image has no libc) and on the host. One process per connection (fork), keep-alive.
 *
 *   preview-app PORT [ADDRESS]    listens on ADDRESS:PORT (default 127.0.0.1; "::1" and other
 *                                 IPv6 literals too), prints "listening=PORT" once it does
 *
 *   HEAD of a GET answers its head without the body.
 *
 *   GET /             an HTML page whose script opens a WebSocket to /ws (ws: or wss: as the
 *                     page's own scheme), sends "hello" and, on the echo, sets document.title
 *                     and the element #ws to "ws-ok"
 *   GET /headers      the request head (request line and header lines) as the app received it,
 *                     as text/plain
 *   GET /log          one line per request head the app read since it started (every
 *                     connection), "<n> <request line>": what a proxy let through
 *   GET /sse[?n=N]    text/event-stream, chunked: N events (default 5, at most 10000) 100 ms
 *                     apart, each "data: <i>\n\n" (i from 1) in a chunk of its own, then the
 *                     last chunk; the connection stays open for the next request
 *   GET /ws           a WebSocket (RFC 6455) echoing text and binary frames as they come
 *                     (fragments too), unmasked; ping answered with pong; a close answered with
 *                     a close of the same code, then the connection ends
 *   GET /bytes?n=N[&chunked=1]
 *                     N bytes of the pattern below, with Content-Length (or chunked, 64 KiB
 *                     chunks), written as generated
 *   POST /sink        reads the body (Content-Length or chunked) as it comes and answers
 *                     "bytes=<n> crc32=<8 hex digits>\n" (the CRC-32 of zlib and Python's
 *                     zlib.crc32)
 *
 * The pattern: byte i is (i % 251) ^ ((i >> 16) & 0xff). A malformed request is answered 400
 * and its connection closed. Every wait on a peer is bounded (60 s without a byte). */

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define HEAD_MAX 65536
#define IO_TIMEOUT_MS 60000
#define LOG_SIZE (1u << 20)
#define BLOCK 65536

/* What every connection's process appends to: the request lines seen (GET /log). */
struct shared_log {
	uint64_t requests;
	size_t used;
	char text[LOG_SIZE];
};
static struct shared_log *shared;

struct conn {
	int fd;
	char buf[BLOCK];
	size_t off, len;
};

struct request {
	char head[HEAD_MAX];
	size_t head_len;
	char method[16];
	char target[2048];
	bool http10;
	bool has_length;
	uint64_t length;
	bool chunked;
	bool close;
	bool upgrade_ws;
	char ws_key[64];
};

/* ---- I/O ------------------------------------------------------------------------------- */

static int wait_fd(int fd, short events)
{
	struct pollfd p = { .fd = fd, .events = events };
	int r;

	do
		r = poll(&p, 1, IO_TIMEOUT_MS);
	while (r < 0 && errno == EINTR);
	return r > 0 ? 0 : -1;
}

static int write_all(int fd, const void *data, size_t n)
{
	const char *p = data;

	while (n > 0) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && errno == EAGAIN && wait_fd(fd, POLLOUT) == 0)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

static int write_fmt(int fd, const char *fmt, ...)
{
	char s[4096];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(s, sizeof(s), fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(s))
		return -1;
	return write_all(fd, s, (size_t)n);
}

/* Fills the buffer when it is empty: 1 with bytes, 0 at the peer's end, -1 on error. */
static int conn_fill(struct conn *c)
{
	if (c->off < c->len)
		return 1;
	for (;;) {
		if (wait_fd(c->fd, POLLIN) < 0)
			return -1;
		ssize_t r = read(c->fd, c->buf, sizeof(c->buf));
		if (r < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (r < 0)
			return -1;
		c->off = 0;
		c->len = (size_t)r;
		return r > 0;
	}
}

/* Up to max bytes now: >0, 0 at the peer's end, -1 on error. */
static ssize_t conn_read(struct conn *c, void *dst, size_t max)
{
	int r = conn_fill(c);
	if (r <= 0)
		return r;
	size_t n = c->len - c->off < max ? c->len - c->off : max;
	memcpy(dst, c->buf + c->off, n);
	c->off += n;
	return (ssize_t)n;
}

static int conn_read_exact(struct conn *c, void *dst, size_t n)
{
	char *p = dst;

	while (n > 0) {
		ssize_t r = conn_read(c, p, n);
		if (r <= 0)
			return -1;
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

/* One line ending in LF (CR LF or LF) into line (NUL-terminated, without the ending): its
 * length, or -1 at the end of input, on error or when longer than max - 1. */
static ssize_t conn_line(struct conn *c, char *line, size_t max)
{
	size_t n = 0;

	for (;;) {
		if (conn_fill(c) <= 0)
			return -1;
		char ch = c->buf[c->off++];
		if (ch == '\n')
			break;
		if (n + 1 >= max)
			return -1;
		line[n++] = ch;
	}
	if (n > 0 && line[n - 1] == '\r')
		n--;
	line[n] = '\0';
	return (ssize_t)n;
}

/* ---- Checksums and encodings ------------------------------------------------------------ */

static uint32_t crc_table[256];

static void crc32_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;
		for (int k = 0; k < 8; k++)
			c = c & 1 ? 0xedb88320u ^ (c >> 1) : c >> 1;
		crc_table[i] = c;
	}
}

/* crc is the running value (0 to start), as zlib's crc32(). */
static uint32_t crc32_update(uint32_t crc, const unsigned char *p, size_t n)
{
	crc = ~crc;
	while (n--)
		crc = crc_table[(crc ^ *p++) & 0xff] ^ (crc >> 8);
	return ~crc;
}

static uint32_t rol(uint32_t v, int k)
{
	return (v << k) | (v >> (32 - k));
}

static void sha1_block(uint32_t h[5], const unsigned char *b)
{
	uint32_t w[80], a = h[0], bb = h[1], c = h[2], d = h[3], e = h[4];

	for (int i = 0; i < 16; i++)
		w[i] = (uint32_t)b[4 * i] << 24 | (uint32_t)b[4 * i + 1] << 16 |
		       (uint32_t)b[4 * i + 2] << 8 | b[4 * i + 3];
	for (int i = 16; i < 80; i++)
		w[i] = rol(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);
	for (int i = 0; i < 80; i++) {
		uint32_t f, k;
		if (i < 20) {
			f = (bb & c) | (~bb & d);
			k = 0x5a827999;
		} else if (i < 40) {
			f = bb ^ c ^ d;
			k = 0x6ed9eba1;
		} else if (i < 60) {
			f = (bb & c) | (bb & d) | (c & d);
			k = 0x8f1bbcdc;
		} else {
			f = bb ^ c ^ d;
			k = 0xca62c1d6;
		}
		uint32_t t = rol(a, 5) + f + e + k + w[i];
		e = d;
		d = c;
		c = rol(bb, 30);
		bb = a;
		a = t;
	}
	h[0] += a;
	h[1] += bb;
	h[2] += c;
	h[3] += d;
	h[4] += e;
}

static void sha1(const void *data, size_t n, unsigned char out[20])
{
	uint32_t h[5] = { 0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476, 0xc3d2e1f0 };
	const unsigned char *p = data;
	unsigned char last[128] = { 0 };
	size_t full = n / 64, rest = n % 64, tail;
	uint64_t bits = (uint64_t)n * 8;

	for (size_t i = 0; i < full; i++)
		sha1_block(h, p + 64 * i);
	memcpy(last, p + 64 * full, rest);
	last[rest] = 0x80;
	tail = rest + 9 <= 64 ? 64 : 128;
	for (int i = 0; i < 8; i++)
		last[tail - 1 - i] = (unsigned char)(bits >> (8 * i));
	for (size_t i = 0; i < tail; i += 64)
		sha1_block(h, last + i);
	for (int i = 0; i < 20; i++)
		out[i] = (unsigned char)(h[i / 4] >> (24 - 8 * (i % 4)));
}

static void base64(const unsigned char *in, size_t n, char *out)
{
	static const char abc[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	size_t o = 0;

	for (size_t i = 0; i < n; i += 3) {
		uint32_t v = (uint32_t)in[i] << 16;
		if (i + 1 < n)
			v |= (uint32_t)in[i + 1] << 8;
		if (i + 2 < n)
			v |= in[i + 2];
		out[o++] = abc[(v >> 18) & 63];
		out[o++] = abc[(v >> 12) & 63];
		out[o++] = i + 1 < n ? abc[(v >> 6) & 63] : '=';
		out[o++] = i + 2 < n ? abc[v & 63] : '=';
	}
	out[o] = '\0';
}

static void pattern_fill(unsigned char *dst, uint64_t offset, size_t n)
{
	unsigned m = (unsigned)(offset % 251), x = (unsigned)(offset >> 16) & 0xff;

	for (size_t i = 0; i < n; i++) {
		dst[i] = (unsigned char)(m ^ x);
		if (++m == 251)
			m = 0;
		if (((offset + i + 1) & 0xffff) == 0)
			x = (unsigned)((offset + i + 1) >> 16) & 0xff;
	}
}

/* ---- Requests ---------------------------------------------------------------------------- */

static void log_request(const struct request *rq)
{
	char line[2100];
	uint64_t n = __atomic_add_fetch(&shared->requests, 1, __ATOMIC_SEQ_CST);
	int len = snprintf(line, sizeof(line), "%" PRIu64 " %s %s\n", n, rq->method, rq->target);
	if (len <= 0 || (size_t)len >= sizeof(line))
		return;
	size_t at = __atomic_fetch_add(&shared->used, (size_t)len, __ATOMIC_SEQ_CST);
	if (at + (size_t)len <= LOG_SIZE)
		memcpy(shared->text + at, line, (size_t)len);
}

static bool header_is(const char *line, const char *name, const char **ret_value)
{
	size_t n = strlen(name);

	if (strncasecmp(line, name, n) != 0 || line[n] != ':')
		return false;
	const char *v = line + n + 1;
	while (*v == ' ' || *v == '\t')
		v++;
	*ret_value = v;
	return true;
}

static bool token_in(const char *list, const char *token)
{
	size_t n = strlen(token);

	for (const char *p = list; *p;) {
		while (*p == ' ' || *p == ',' || *p == '\t')
			p++;
		if (strncasecmp(p, token, n) == 0 && (p[n] == '\0' || p[n] == ',' || p[n] == ' '))
			return true;
		while (*p && *p != ',')
			p++;
	}
	return false;
}

/* 0 with the headers read, 1 at a clean end of the connection (no byte of a new request),
 * -1 on a malformed request. */
static int request_read(struct conn *c, struct request *rq)
{
	char line[8192], version[16];
	ssize_t n;
	int lines = 0;

	memset(rq, 0, sizeof(*rq));
	do {
		if (conn_fill(c) <= 0)
			return 1;
		n = conn_line(c, line, sizeof(line));
		if (n < 0)
			return -1;
	} while (n == 0 && lines++ < 4);
	if (sscanf(line, "%15s %2047s %15s", rq->method, rq->target, version) != 3)
		return -1;
	if (strcmp(version, "HTTP/1.1") != 0 && strcmp(version, "HTTP/1.0") != 0)
		return -1;
	rq->http10 = strcmp(version, "HTTP/1.0") == 0;
	rq->close = rq->http10;
	for (;;) {
		size_t at = rq->head_len, len = (size_t)n;
		if (at + len + 2 >= sizeof(rq->head))
			return -1;
		memcpy(rq->head + at, line, len);
		memcpy(rq->head + at + len, "\r\n", 2);
		rq->head_len += len + 2;
		n = conn_line(c, line, sizeof(line));
		if (n < 0)
			return -1;
		if (n == 0)
			break;
		const char *v;
		if (header_is(line, "Content-Length", &v)) {
			char *end;
			if (rq->has_length || *v < '0' || *v > '9')
				return -1;
			rq->length = strtoull(v, &end, 10);
			rq->has_length = true;
		} else if (header_is(line, "Transfer-Encoding", &v)) {
			if (strcasecmp(v, "chunked") != 0)
				return -1;
			rq->chunked = true;
		} else if (header_is(line, "Connection", &v)) {
			if (token_in(v, "close"))
				rq->close = true;
			else if (token_in(v, "keep-alive"))
				rq->close = false;
		} else if (header_is(line, "Upgrade", &v)) {
			rq->upgrade_ws = strcasecmp(v, "websocket") == 0;
		} else if (header_is(line, "Sec-WebSocket-Key", &v)) {
			snprintf(rq->ws_key, sizeof(rq->ws_key), "%s", v);
		}
	}
	if (rq->has_length && rq->chunked)
		return -1;
	log_request(rq);
	return 0;
}

/* Reads the request body as it comes, each piece to fn (NULL: dropped): 0, or -1. */
static int body_read(struct conn *c, const struct request *rq,
		     void (*fn)(void *u, const unsigned char *p, size_t n), void *u)
{
	unsigned char buf[BLOCK];
	char line[256];

	if (!rq->chunked) {
		uint64_t left = rq->has_length ? rq->length : 0;
		while (left > 0) {
			ssize_t r =
				conn_read(c, buf, left < sizeof(buf) ? (size_t)left : sizeof(buf));
			if (r <= 0)
				return -1;
			if (fn)
				fn(u, buf, (size_t)r);
			left -= (uint64_t)r;
		}
		return 0;
	}
	for (;;) {
		char *end;
		if (conn_line(c, line, sizeof(line)) <= 0)
			return -1;
		uint64_t left = strtoull(line, &end, 16);
		if (end == line || (*end != '\0' && *end != ';'))
			return -1;
		if (left == 0)
			break;
		while (left > 0) {
			ssize_t r =
				conn_read(c, buf, left < sizeof(buf) ? (size_t)left : sizeof(buf));
			if (r <= 0)
				return -1;
			if (fn)
				fn(u, buf, (size_t)r);
			left -= (uint64_t)r;
		}
		if (conn_line(c, line, sizeof(line)) != 0)
			return -1;
	}
	for (;;) { /* trailers */
		ssize_t r = conn_line(c, line, sizeof(line));
		if (r < 0)
			return -1;
		if (r == 0)
			return 0;
	}
}

/* The query parameter name's value as a number, or def. */
static uint64_t query_number(const char *target, const char *name, uint64_t def)
{
	const char *q = strchr(target, '?');
	size_t n = strlen(name);

	for (const char *p = q; p; p = strchr(p + 1, '&')) {
		if (strncmp(p + 1, name, n) == 0 && p[1 + n] == '=')
			return strtoull(p + 2 + n, NULL, 10);
	}
	return def;
}

static bool path_is(const char *target, const char *path)
{
	size_t n = strlen(path);
	return strncmp(target, path, n) == 0 && (target[n] == '\0' || target[n] == '?');
}

/* ---- Endpoints ---------------------------------------------------------------------------- */

static int answer(int fd, const struct request *rq, int status, const char *reason,
		  const char *type, const void *body, size_t n)
{
	if (write_fmt(fd, "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n%s\r\n",
		      status, reason, type, n, rq->close ? "Connection: close\r\n" : "") < 0)
		return -1;
	if (strcmp(rq->method, "HEAD") == 0)
		return 0;
	return write_all(fd, body, n);
}

static const char page[] =
	"<!doctype html>\n<html><head><meta charset=\"utf-8\"><link rel=\"icon\" href=\"data:,\"><title>preview-app</title></head>\n"
	"<body><h1>preview-app</h1><p id=\"ws\">ws-pending</p>\n<script>\n"
	"const s = new WebSocket((location.protocol === 'https:' ? 'wss:' : 'ws:') + '//' +\n"
	"  location.host + '/ws');\n"
	"s.onopen = () => s.send('hello');\n"
	"s.onmessage = (e) => { if (e.data === 'hello') {\n"
	"  document.title = 'ws-ok'; document.getElementById('ws').textContent = 'ws-ok'; } };\n"
	"</script></body></html>\n";

static int serve_sse(int fd, const struct request *rq)
{
	uint64_t n = query_number(rq->target, "n", 5);
	struct timespec gap = { .tv_nsec = 100 * 1000 * 1000 };

	if (n > 10000)
		n = 10000;
	if (write_fmt(fd, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
			  "Cache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n\r\n") < 0)
		return -1;
	for (uint64_t i = 1; i <= n; i++) {
		char ev[64];
		int len = snprintf(ev, sizeof(ev), "data: %" PRIu64 "\n\n", i);
		if (i > 1)
			nanosleep(&gap, NULL);
		if (write_fmt(fd, "%x\r\n%s\r\n", len, ev) < 0)
			return -1;
	}
	return write_all(fd, "0\r\n\r\n", 5);
}

static int serve_bytes(int fd, const struct request *rq)
{
	uint64_t n = query_number(rq->target, "n", 0), at = 0;
	bool chunked = query_number(rq->target, "chunked", 0) != 0;
	unsigned char buf[BLOCK];

	if (chunked ? write_fmt(fd,
				"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
				"Transfer-Encoding: chunked\r\n%s\r\n",
				rq->close ? "Connection: close\r\n" : "") :
		      write_fmt(fd,
				"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
				"Content-Length: %" PRIu64 "\r\n%s\r\n",
				n, rq->close ? "Connection: close\r\n" : "") < 0)
		return -1;
	if (strcmp(rq->method, "HEAD") == 0)
		return 0;
	while (at < n) {
		size_t k = n - at < sizeof(buf) ? (size_t)(n - at) : sizeof(buf);
		pattern_fill(buf, at, k);
		if (chunked && write_fmt(fd, "%zx\r\n", k) < 0)
			return -1;
		if (write_all(fd, buf, k) < 0 || (chunked && write_all(fd, "\r\n", 2) < 0))
			return -1;
		at += k;
	}
	return chunked ? write_all(fd, "0\r\n\r\n", 5) : 0;
}

struct sink {
	uint64_t bytes;
	uint32_t crc;
};

static void sink_take(void *u, const unsigned char *p, size_t n)
{
	struct sink *s = u;
	s->bytes += n;
	s->crc = crc32_update(s->crc, p, n);
}

static int serve_sink(struct conn *c, const struct request *rq)
{
	struct sink s = { 0 };
	char body[96];

	if (body_read(c, rq, sink_take, &s) < 0)
		return -1;
	int n = snprintf(body, sizeof(body), "bytes=%" PRIu64 " crc32=%08x\n", s.bytes, s.crc);
	return answer(c->fd, rq, 200, "OK", "text/plain", body, (size_t)n);
}

/* Echoes frames until a close (answered) or the peer's end: always -1 (the connection ends). */
static int ws_echo(struct conn *c)
{
	unsigned char h[14], buf[BLOCK];

	for (;;) {
		if (conn_read_exact(c, h, 2) < 0)
			return -1;
		unsigned op = h[0] & 0x0f;
		uint64_t len = h[1] & 0x7f;
		unsigned char mask[4];
		size_t hl = 2;
		if (!(h[1] & 0x80))
			return -1; /* a client's frame must be masked */
		if (len == 126 || len == 127) {
			size_t k = len == 126 ? 2 : 8;
			unsigned char e[8];
			if (conn_read_exact(c, e, k) < 0)
				return -1;
			len = 0;
			for (size_t i = 0; i < k; i++)
				len = len << 8 | e[i];
		}
		if (conn_read_exact(c, mask, 4) < 0)
			return -1;
		h[0] = (unsigned char)((h[0] & 0x80) | (op == 9 ? 10 : op));
		if (len < 126) {
			h[1] = (unsigned char)len;
		} else if (len < 65536) {
			h[1] = 126;
			h[2] = (unsigned char)(len >> 8);
			h[3] = (unsigned char)len;
			hl = 4;
		} else {
			h[1] = 127;
			for (int i = 0; i < 8; i++)
				h[2 + i] = (unsigned char)(len >> (56 - 8 * i));
			hl = 10;
		}
		if (write_all(c->fd, h, hl) < 0)
			return -1;
		for (uint64_t at = 0; at < len;) {
			size_t k = len - at < sizeof(buf) ? (size_t)(len - at) : sizeof(buf);
			if (conn_read_exact(c, buf, k) < 0)
				return -1;
			for (size_t i = 0; i < k; i++)
				buf[i] ^= mask[(at + i) % 4];
			if (write_all(c->fd, buf, k) < 0)
				return -1;
			at += k;
		}
		if (op == 8)
			return -1;
	}
}

static int serve_ws(struct conn *c, const struct request *rq)
{
	static const char guid[] = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
	char key[128], accept[40];
	unsigned char digest[20];

	if (!rq->upgrade_ws || rq->ws_key[0] == '\0') {
		static const char why[] = "a WebSocket upgrade is wanted\n";
		return answer(c->fd, rq, 400, "Bad Request", "text/plain", why, sizeof(why) - 1);
	}
	snprintf(key, sizeof(key), "%s%s", rq->ws_key, guid);
	sha1(key, strlen(key), digest);
	base64(digest, sizeof(digest), accept);
	if (write_fmt(c->fd,
		      "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
		      "Connection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n\r\n",
		      accept) < 0)
		return -1;
	return ws_echo(c);
}

static int serve_one(struct conn *c, struct request *rq)
{
	const char *t = rq->target;
	bool get = strcmp(rq->method, "GET") == 0 || strcmp(rq->method, "HEAD") == 0;

	if (strcmp(rq->method, "POST") == 0 && path_is(t, "/sink"))
		return serve_sink(c, rq);
	if (body_read(c, rq, NULL, NULL) < 0)
		return -1;
	if (get && path_is(t, "/"))
		return answer(c->fd, rq, 200, "OK", "text/html; charset=utf-8", page,
			      sizeof(page) - 1);
	if (get && path_is(t, "/headers"))
		return answer(c->fd, rq, 200, "OK", "text/plain", rq->head, rq->head_len);
	if (get && path_is(t, "/log")) {
		size_t used = __atomic_load_n(&shared->used, __ATOMIC_SEQ_CST);
		return answer(c->fd, rq, 200, "OK", "text/plain", shared->text,
			      used < LOG_SIZE ? used : LOG_SIZE);
	}
	if (get && path_is(t, "/sse"))
		return serve_sse(c->fd, rq);
	if (get && path_is(t, "/bytes"))
		return serve_bytes(c->fd, rq);
	if (get && path_is(t, "/ws"))
		return serve_ws(c, rq);
	static const char none[] = "not found\n";
	return answer(c->fd, rq, 404, "Not Found", "text/plain", none, sizeof(none) - 1);
}

static void serve_connection(int fd)
{
	static struct conn c;
	static struct request rq;
	int r;

	c.fd = fd;
	while ((r = request_read(&c, &rq)) == 0) {
		if (serve_one(&c, &rq) < 0 || rq.close)
			return;
	}
	if (r < 0) {
		static const char bad[] = "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\n"
					  "Content-Length: 12\r\nConnection: close\r\n\r\n"
					  "bad request\n";
		write_all(fd, bad, sizeof(bad) - 1);
	}
}

/* ---- Main ----------------------------------------------------------------------------------- */

static int listen_on(const char *address, unsigned port)
{
	struct sockaddr_storage ss = { 0 };
	struct sockaddr_in *in4 = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
	socklen_t len;
	int one = 1, fd;

	if (inet_pton(AF_INET, address, &in4->sin_addr) == 1) {
		in4->sin_family = AF_INET;
		in4->sin_port = htons((uint16_t)port);
		len = sizeof(*in4);
	} else if (inet_pton(AF_INET6, address, &in6->sin6_addr) == 1) {
		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons((uint16_t)port);
		len = sizeof(*in6);
	} else {
		fprintf(stderr, "preview-app: '%s' is not an address\n", address);
		return -1;
	}
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(fd, (struct sockaddr *)&ss, len) < 0 || listen(fd, 4096) < 0) {
		fprintf(stderr, "preview-app: listen on %s port %u: %s\n", address, port,
			strerror(errno));
		return -1;
	}
	return fd;
}

int main(int argc, char **argv)
{
	struct sigaction sa = { .sa_handler = SIG_IGN, .sa_flags = SA_NOCLDWAIT };
	char *end;
	int lfd, one = 1;

	if (argc < 2 || argc > 3) {
		fprintf(stderr, "usage: preview-app PORT [ADDRESS]\n");
		return 2;
	}
	unsigned long port = strtoul(argv[1], &end, 10);
	if (*end != '\0' || port == 0 || port > 65535) {
		fprintf(stderr, "preview-app: bad port '%s'\n", argv[1]);
		return 2;
	}
	crc32_init();
	shared = mmap(NULL, sizeof(*shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1,
		      0);
	if (shared == MAP_FAILED)
		return 1;
	sigaction(SIGCHLD, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	lfd = listen_on(argc == 3 ? argv[2] : "127.0.0.1", (unsigned)port);
	if (lfd < 0)
		return 1;
	printf("listening=%lu\n", port);
	fflush(stdout);
	for (;;) {
		int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED || errno == EMFILE ||
			    errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
				continue;
			perror("preview-app: accept");
			return 1;
		}
		/* A head and its body go out in two writes: without this the body waits for the
		 * peer's delayed ACK of the head (40 ms), as no web server of note lets it. */
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		pid_t pid = fork();
		if (pid == 0) {
			close(lfd);
			serve_connection(fd);
			shutdown(fd, SHUT_WR);
			_exit(0);
		}
		close(fd);
	}
}
