/* SPDX-License-Identifier: MIT */
/* The library's WebSocket client connection (ws-client.h): handshake, frames out, frames in. */

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "basic/util.h"
#include "ws-client.h"

#define HANDSHAKE_MAX (16u * 1024)
#define ERROR_BODY_MAX (64u * 1024)
/* Frames up to this size are masked on the stack. */
#define SEND_STACK_BYTES 4096u

/* ---- frames out ---------------------------------------------------------------------------- */

int client_ws_send(struct client_ws *w, enum ws_opcode op, const void *data, size_t n)
{
	uint8_t stack[WS_HEADER_MAX + SEND_STACK_BYTES], key[4];
	_cleanup_free_ uint8_t *heap = NULL;
	uint8_t *buf = stack;
	size_t h;

	if (w->close_sent)
		return -EPIPE;
	if (getrandom(key, sizeof key, 0) != sizeof key)
		return -EIO;
	if (n > SEND_STACK_BYTES) {
		buf = heap = malloc(WS_HEADER_MAX + n);
		if (!buf)
			return -ENOMEM;
	}
	h = ws_frame_header(buf, op, true, n, key);
	if (n > 0)
		memcpy(buf + h, data, n);
	ws_mask(buf + h, n, key, 0);
	if (op == WS_OP_CLOSE)
		w->close_sent = true;
	return client_send_all(w->fd, buf, h + n);
}

/* ---- the handshake ------------------------------------------------------------------------- */

/* The value of header name in the response head (NUL-terminated), copied; NULL when absent. */
static char *head_header(const char *head, const char *name)
{
	size_t n = strlen(name);

	for (const char *l = strstr(head, "\r\n"); l; l = strstr(l + 2, "\r\n")) {
		const char *v = l + 2;

		if (strncasecmp(v, name, n) == 0 && v[n] == ':') {
			v += n + 1;
			v += strspn(v, " \t");
			return strndup(v, strcspn(v, "\r\n"));
		}
	}
	return NULL;
}

uint64_t client_ws_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Reads until the end of the response head, for at most timeout_ms; the bytes after it stay in
 * buf past *ret_head. */
static int read_head(struct station_client *c, int fd, char *buf, size_t size, uint64_t timeout_ms,
		     size_t *ret_len, size_t *ret_head)
{
	uint64_t deadline = client_ws_now_ms() + timeout_ms;
	size_t len = 0;

	while (len + 1 < size) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		uint64_t now = client_ws_now_ms();
		char *end;
		ssize_t k;
		int n = now >= deadline ? 0 : poll(&p, 1, (int)MIN(deadline - now, (uint64_t)1000));

		if (n < 0 && errno == EINTR && c->interrupt && c->interrupt(c->interrupt_userdata))
			return -EINTR;
		if (n < 0 && errno == EINTR)
			continue;
		if (n == 0 && client_ws_now_ms() >= deadline)
			return -ETIMEDOUT;
		if (n == 0)
			continue;
		k = recv(fd, buf + len, size - 1 - len, 0);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return k < 0 ? -errno : -ECONNRESET;
		len += (size_t)k;
		buf[len] = '\0';
		end = strstr(buf, "\r\n\r\n");
		if (end) {
			*ret_len = len;
			*ret_head = (size_t)(end - buf) + 4;
			return 0;
		}
	}
	return -E2BIG;
}

/* A refused upgrade: the API's error message from the body (at most ERROR_BODY_MAX of it). */
static int handshake_refused(struct station_client *c, int fd, char *buf, size_t len, size_t head,
			     long status)
{
	_cleanup_free_ char *cl = head_header(buf, "Content-Length");
	size_t want = cl ? (size_t)strtoul(cl, NULL, 10) : 0, have = len - head;
	_cleanup_free_ char *body = NULL;

	want = MIN(want, (size_t)ERROR_BODY_MAX);
	body = malloc(want + 1);
	if (!body)
		return client_error(c, -ENOMEM, "out of memory");
	memcpy(body, buf + head, MIN(have, want));
	while (have < want) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		ssize_t k;

		if (poll(&p, 1, (int)MIN(c->timeout_ms, (uint64_t)INT_MAX)) <= 0)
			break;
		k = recv(fd, body + have, want - have, 0);
		if (k <= 0)
			break;
		have += (size_t)k;
	}
	body[MIN(have, want)] = '\0';
	return client_api_error(c, status, body);
}

static int handshake(struct client_ws *w, const char *path)
{
	struct station_client *c = w->c;
	uint8_t raw[16];
	char key[32], accept_want[WS_ACCEPT_SIZE], buf[HANDSHAKE_MAX];
	_cleanup_free_ char *req = NULL, *b64 = NULL, *accept = NULL;
	size_t len = 0, head = 0;
	uint64_t head_ms = client_answer_ms(c, path);
	long status;
	int r;

	if (getrandom(raw, sizeof raw, 0) != sizeof raw || !(b64 = base64_encode(raw, sizeof raw)))
		return client_error(c, -EIO, "no randomness for the WebSocket key");
	snprintf(key, sizeof key, "%s", b64);
	if (asprintf(&req,
		     "GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
		     "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n%s%s\r\n",
		     path, c->socket_path ? "localhost" : c->base_url + 7, key,
		     c->auth_header ? c->auth_header : "", c->auth_header ? "\r\n" : "") < 0)
		return client_error(c, -ENOMEM, "out of memory");
	r = client_send_all(w->fd, req, strlen(req));
	if (r >= 0)
		r = read_head(c, w->fd, buf, sizeof buf, head_ms, &len, &head);
	if (r == -E2BIG)
		return client_error(c, -EPROTO,
				    "%s answered the WebSocket upgrade with a head over %u bytes",
				    c->endpoint, HANDSHAKE_MAX);
	if (r == -ETIMEDOUT)
		return client_timed_out(c, head_ms);
	if (r == -EINTR)
		return client_error(c, -EINTR, "interrupted");
	if (r < 0)
		return client_error(c, -ECONNRESET, "WebSocket upgrade at %s failed: %s",
				    c->endpoint, strerror(-r));
	if (sscanf(buf, "HTTP/1.1 %ld", &status) != 1)
		return client_error(c, -EPROTO,
				    "%s answered the WebSocket upgrade with no HTTP status",
				    c->endpoint);
	if (status != 101)
		return handshake_refused(c, w->fd, buf, len, head, status);
	accept = head_header(buf, "Sec-WebSocket-Accept");
	if (ws_accept_key(key, accept_want) < 0 || !accept || strcmp(accept, accept_want) != 0)
		return client_error(c, -EPROTO, "%s answered with a bad Sec-WebSocket-Accept",
				    c->endpoint);
	if (len > head) {
		w->extra = malloc(len - head);
		if (!w->extra)
			return client_error(c, -ENOMEM, "out of memory");
		memcpy(w->extra, buf + head, len - head);
		w->extra_len = len - head;
	}
	return 0;
}

/* ---- frames in ----------------------------------------------------------------------------- */

static int on_message(void *userdata, enum ws_opcode op, const void *data, size_t n)
{
	struct client_ws *w = userdata;

	return w->on_message ? w->on_message(w->userdata, op, data, n) : 0;
}

static int on_control(void *userdata, enum ws_opcode op, const void *data, size_t n)
{
	struct client_ws *w = userdata;

	/* A pong that cannot be sent shows as the next send's or read's error. */
	if (op == WS_OP_PING && !w->close_sent)
		(void)client_ws_send(w, WS_OP_PONG, data, n);
	return 0;
}

static int on_close(void *userdata, uint16_t code, const char *reason)
{
	struct client_ws *w = userdata;
	uint8_t payload[WS_CONTROL_MAX];
	size_t n;

	w->closed = true;
	w->close_code = code;
	snprintf(w->close_reason, sizeof w->close_reason, "%s", reason);
	if (w->close_sent)
		return 0;
	n = ws_close_payload(payload, code == WS_CLOSE_NO_STATUS ? 0 : code, NULL);
	(void)client_ws_send(w, WS_OP_CLOSE, payload, n);
	return 0;
}

static const struct ws_parser_ops parser_ops = {
	.message = on_message,
	.control = on_control,
	.close = on_close,
};

int client_ws_open(struct station_client *c, const char *path, uint64_t max_message,
		   struct client_ws **ret)
{
	struct client_ws *w = calloc(1, sizeof *w);
	int r;

	if (!w)
		return client_error(c, -ENOMEM, "out of memory");
	w->c = c;
	w->fd = -1;
	r = client_connect(c, &w->fd);
	w->last_input = client_ws_now_ms();
	if (r >= 0)
		r = handshake(w, path);
	if (r >= 0 &&
	    ws_parser_new(WS_ROLE_CLIENT, max_message, max_message, &parser_ops, w, &w->parser) < 0)
		r = client_error(c, -ENOMEM, "out of memory");
	if (r < 0) {
		w->close_sent = true; /* no close frame on a connection that never upgraded */
		client_ws_free(w, 0, NULL);
		return r;
	}
	*ret = w;
	return 0;
}

void client_ws_free(struct client_ws *w, uint16_t code, const char *reason)
{
	uint8_t payload[WS_CONTROL_MAX];

	if (!w)
		return;
	if (w->fd >= 0 && w->parser && !w->close_sent) {
		size_t n = ws_close_payload(payload, code, reason);

		(void)client_ws_send(w, WS_OP_CLOSE, payload, n);
	}
	if (w->fd >= 0)
		close(w->fd);
	ws_parser_free(w->parser);
	free(w->extra);
	free(w);
}

static int feed(struct client_ws *w, const void *data, size_t n)
{
	int r = ws_parser_feed(w->parser, data, n);
	uint8_t payload[WS_CONTROL_MAX];
	const char *reason;
	uint16_t code;

	if (r != -EBADMSG)
		return r;
	code = ws_parser_error(w->parser, &reason);
	if (!w->close_sent)
		(void)client_ws_send(w, WS_OP_CLOSE, payload,
				     ws_close_payload(payload, code, reason));
	return -EPROTO;
}

const char *client_ws_protocol_error(const struct client_ws *w)
{
	const char *reason = "";

	if (w->parser)
		(void)ws_parser_error(w->parser, &reason);
	return reason;
}

int client_ws_pump(struct client_ws *w, void *buf, size_t size, int timeout_ms)
{
	ssize_t k;
	int r;

	if (w->extra) {
		_cleanup_free_ uint8_t *extra = w->extra;

		w->extra = NULL;
		r = feed(w, extra, w->extra_len);
		if (r < 0 || w->closed)
			return r < 0 ? r : 1;
	}
	if (w->closed)
		return 1;
	if (timeout_ms != 0) {
		struct pollfd p = { .fd = w->fd, .events = POLLIN };
		int n = poll(&p, 1, timeout_ms);

		if (n < 0)
			return errno == EINTR ? -EINTR : -errno;
		if (n == 0)
			return 0;
	}
	do
		k = recv(w->fd, buf, size, MSG_DONTWAIT);
	while (k < 0 && errno == EINTR && timeout_ms == 0);
	if (k < 0)
		return errno == EAGAIN || errno == EWOULDBLOCK ? 0 :
		       errno == EINTR			       ? -EINTR :
								 -errno;
	if (k == 0)
		return 1;
	w->last_input = client_ws_now_ms();
	r = feed(w, buf, (size_t)k);
	if (r < 0)
		return r;
	return w->closed ? 1 : 0;
}
