/* SPDX-License-Identifier: MIT */
/* Terminals: the requests (through libcurl like every other call) and attaching, a WebSocket
 * client of its own over the client's endpoint (unix socket or TCP): the opening handshake
 * with the bearer token, masked frames out, and the RFC 6455 codec of src/proto/ws-codec.c (client
 * role) for what comes in. */

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "basic/util.h"
#include "client-internal.h"
#include "proto/ws-codec.h"

#define HANDSHAKE_MAX (16u * 1024)
#define ERROR_BODY_MAX (64u * 1024)
#define TERM_MAX_MESSAGE (4u * 1024 * 1024)
#define HANDSHAKE_TIMEOUT_MS 10000

struct station_term {
	int fd;
	struct ws_parser *parser;
	uint8_t *extra; /* bytes read past the handshake, fed to the parser first */
	size_t extra_len;
	const struct station_term_callbacks *cb;
	void *userdata;
	bool closed;
	bool close_sent;
	int error;
};

/* ---- requests ------------------------------------------------------------------------------ */

static bool term_id_valid(const char *s)
{
	if (!s || !*s || strlen(s) > 64)
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		      (*s >= '0' && *s <= '9') || *s == '-' || *s == '_'))
			return false;
	return true;
}

/* "/v1/workspaces/{ws}/terminals[/{term}][suffix]" */
static int term_path(struct station_client *c, const char *ws, const char *term, const char *suffix,
		     char **ret)
{
	_cleanup_free_ char *tail = NULL;

	if (term && !term_id_valid(term))
		return client_error(c, -EINVAL, "invalid terminal id '%s'", term);
	if (asprintf(&tail, "/terminals%s%s%s", term ? "/" : "", term ? term : "",
		     suffix ? suffix : "") < 0)
		return client_error(c, -ENOMEM, "out of memory");
	return client_path(c, ws, NULL, tail, ret);
}

int station_terminal_open(struct station_client *c, const char *ws,
			  const struct station_terminal_options *opts, json_t **ret)
{
	const struct station_terminal_options none = {};
	_cleanup_json_ json_t *body = NULL;
	_cleanup_free_ char *path = NULL;
	int r;

	if (!opts)
		opts = &none;
	r = term_path(c, ws, NULL, NULL, &path);
	if (r < 0)
		return r;
	body = json_pack("{s:I,s:I}", "cols", (json_int_t)(opts->cols ? opts->cols : 80), "rows",
			 (json_int_t)(opts->rows ? opts->rows : 24));
	if (!body)
		return client_error(c, -ENOMEM, "out of memory");
	r = client_put_string(c, body, "command", opts->command);
	if (r >= 0)
		r = client_put_string(c, body, "cwd", opts->cwd);
	if (r >= 0)
		r = client_put_env(c, body, opts->env);
	if (r < 0)
		return r;
	return station_request_json(c, "POST", path, body, ret);
}

int station_terminal_list(struct station_client *c, const char *ws, json_t **ret)
{
	_cleanup_free_ char *path = NULL;
	_cleanup_json_ json_t *doc = NULL;
	int r = term_path(c, ws, NULL, NULL, &path);

	if (r >= 0)
		r = station_request_json(c, "GET", path, NULL, &doc);
	if (r < 0)
		return r;
	if (!json_is_array(json_object_get(doc, "terminals")))
		return client_error(c, -EPROTO, "the terminal list has no \"terminals\" array");
	if (ret)
		*ret = json_incref(json_object_get(doc, "terminals"));
	return 0;
}

int station_terminal_get(struct station_client *c, const char *ws, const char *term, json_t **ret)
{
	_cleanup_free_ char *path = NULL;
	int r = term_path(c, ws, term, NULL, &path);

	return r < 0 ? r : station_request_json(c, "GET", path, NULL, ret);
}

int station_terminal_resize(struct station_client *c, const char *ws, const char *term,
			    unsigned cols, unsigned rows, json_t **ret)
{
	_cleanup_free_ char *path = NULL;
	_cleanup_json_ json_t *body =
		json_pack("{s:I,s:I}", "cols", (json_int_t)cols, "rows", (json_int_t)rows);
	int r = term_path(c, ws, term, "/resize", &path);

	if (r < 0)
		return r;
	if (!body)
		return client_error(c, -ENOMEM, "out of memory");
	return station_request_json(c, "POST", path, body, ret);
}

int station_terminal_close(struct station_client *c, const char *ws, const char *term, json_t **ret)
{
	_cleanup_free_ char *path = NULL;
	int r = term_path(c, ws, term, NULL, &path);

	return r < 0 ? r : station_request_json(c, "DELETE", path, NULL, ret);
}

/* One frame, masked as a client must. */
static int send_frame(struct station_term *t, enum ws_opcode op, const void *data, size_t n)
{
	uint8_t header[WS_HEADER_MAX], key[4];
	_cleanup_free_ uint8_t *buf = NULL;
	size_t h;

	if (getrandom(key, sizeof key, 0) != sizeof key)
		return -EIO;
	h = ws_frame_header(header, op, true, n, key);
	buf = malloc(h + n);
	if (!buf)
		return -ENOMEM;
	memcpy(buf, header, h);
	memcpy(buf + h, data, n);
	ws_mask(buf + h, n, key, 0);
	return client_send_all(t->fd, buf, h + n);
}

/* ---- the handshake ------------------------------------------------------------------------- */

static long status_errno(long status)
{
	switch (status) {
	case 400:
		return -EINVAL;
	case 401:
		return -EACCES;
	case 404:
		return -ENOENT;
	case 409:
		return -EBUSY;
	case 429:
		return -EAGAIN;
	case 503:
		return -ENOTCONN;
	default:
		return -EIO;
	}
}

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

/* Reads until the end of the response head; the bytes after it stay in *extra. */
static int read_head(int fd, char *buf, size_t size, size_t *ret_len, size_t *ret_head)
{
	size_t len = 0;

	while (len + 1 < size) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		char *end;
		ssize_t k;

		if (poll(&p, 1, HANDSHAKE_TIMEOUT_MS) == 0)
			return -ETIMEDOUT;
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

/* A refused upgrade: the API's error message from the body. */
static int handshake_refused(struct station_client *c, int fd, char *buf, size_t len, size_t head,
			     long status)
{
	_cleanup_free_ char *cl = head_header(buf, "Content-Length");
	size_t want = cl ? (size_t)strtoul(cl, NULL, 10) : 0, have = len - head;
	_cleanup_free_ char *body = malloc(MIN(want, (size_t)ERROR_BODY_MAX) + 1);
	_cleanup_json_ json_t *doc = NULL;
	const char *msg, *code;

	if (!body)
		return client_error(c, -ENOMEM, "out of memory");
	want = MIN(want, (size_t)ERROR_BODY_MAX);
	memcpy(body, buf + head, MIN(have, want));
	while (have < want) {
		ssize_t k = recv(fd, body + have, want - have, 0);

		if (k <= 0)
			break;
		have += (size_t)k;
	}
	body[MIN(have, want)] = '\0';
	doc = json_loads(body, 0, NULL);
	msg = json_string_value(json_object_get(json_object_get(doc, "error"), "message"));
	code = json_string_value(json_object_get(json_object_get(doc, "error"), "code"));
	client_error(c, (int)status_errno(status), "%s", msg ? msg : "the attach was refused");
	snprintf(c->error_code, sizeof c->error_code, "%s", code ? code : "");
	c->last_status = status;
	return (int)status_errno(status);
}

static int handshake(struct station_client *c, struct station_term *t, const char *path)
{
	uint8_t raw[16];
	char key[32], accept_want[WS_ACCEPT_SIZE], buf[HANDSHAKE_MAX];
	_cleanup_free_ char *req = NULL, *b64 = NULL, *accept = NULL;
	size_t len = 0, head = 0;
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
	r = client_send_all(t->fd, req, strlen(req));
	if (r >= 0)
		r = read_head(t->fd, buf, sizeof buf, &len, &head);
	if (r < 0)
		return client_error(c, r == -ETIMEDOUT ? -ETIMEDOUT : -ECONNRESET,
				    "attach to %s failed: %s", c->endpoint, strerror(-r));
	if (sscanf(buf, "HTTP/1.1 %ld", &status) != 1)
		return client_error(c, -EPROTO, "%s answered the attach with no HTTP status",
				    c->endpoint);
	if (status != 101)
		return handshake_refused(c, t->fd, buf, len, head, status);
	accept = head_header(buf, "Sec-WebSocket-Accept");
	if (ws_accept_key(key, accept_want) < 0 || !accept || strcmp(accept, accept_want) != 0)
		return client_error(c, -EPROTO, "%s answered with a bad Sec-WebSocket-Accept",
				    c->endpoint);
	if (len > head) {
		t->extra = malloc(len - head);
		if (!t->extra)
			return client_error(c, -ENOMEM, "out of memory");
		memcpy(t->extra, buf + head, len - head);
		t->extra_len = len - head;
	}
	return 0;
}

/* ---- messages in --------------------------------------------------------------------------- */

static void on_text(struct station_term *t, const char *data, size_t n)
{
	_cleanup_json_ json_t *m = json_loadb(data, n, 0, NULL);
	const char *type = json_string_value(json_object_get(m, "type"));
	json_t *code, *sig;

	if (!type || !t->cb)
		return;
	if (strcmp(type, "gap") == 0 && t->cb->gap)
		t->cb->gap((uint64_t)json_integer_value(json_object_get(m, "bytes")), t->userdata);
	if (strcmp(type, "exit") == 0 && t->cb->exit) {
		code = json_object_get(m, "exitCode");
		sig = json_object_get(m, "signal");
		t->cb->exit(json_is_integer(code) ? (int)json_integer_value(code) : -1,
			    json_is_integer(sig) ? (int)json_integer_value(sig) : -1, t->userdata);
	}
}

static int on_message(void *userdata, enum ws_opcode op, const void *data, size_t n)
{
	struct station_term *t = userdata;

	if (op == WS_OP_BINARY && t->cb && t->cb->output)
		t->cb->output(data, n, t->userdata);
	else if (op == WS_OP_TEXT)
		on_text(t, data, n);
	return 0;
}

static int on_control(void *userdata, enum ws_opcode op, const void *data, size_t n)
{
	struct station_term *t = userdata;

	return op == WS_OP_PING ? send_frame(t, WS_OP_PONG, data, n) : 0;
}

static int on_close(void *userdata, uint16_t code, const char *reason)
{
	struct station_term *t = userdata;
	uint8_t payload[WS_CONTROL_MAX];
	size_t n;

	t->closed = true;
	if (t->close_sent)
		return 0;
	t->close_sent = true;
	n = ws_close_payload(payload, code == WS_CLOSE_NO_STATUS ? 0 : code, NULL);
	(void)send_frame(t, WS_OP_CLOSE, payload, n);
	return 0;
}

static const struct ws_parser_ops parser_ops = {
	.message = on_message,
	.control = on_control,
	.close = on_close,
};

/* ---- the API ------------------------------------------------------------------------------- */

int station_term_attach(struct station_client *c, const char *ws, const char *term, bool read_only,
			struct station_term **ret)
{
	_cleanup_free_ char *path = NULL;
	struct station_term *t;
	int r = term_path(c, ws, term, read_only ? "/attach?readOnly=1" : "/attach", &path);

	if (r < 0)
		return r;
	t = calloc(1, sizeof *t);
	if (!t)
		return client_error(c, -ENOMEM, "out of memory");
	t->fd = -1;
	r = client_connect(c, &t->fd);
	if (r >= 0)
		r = handshake(c, t, path);
	if (r >= 0 && ws_parser_new(WS_ROLE_CLIENT, TERM_MAX_MESSAGE, TERM_MAX_MESSAGE, &parser_ops,
				    t, &t->parser) < 0)
		r = client_error(c, -ENOMEM, "out of memory");
	if (r < 0) {
		station_term_free(t);
		return r;
	}
	*ret = t;
	return 0;
}

void station_term_free(struct station_term *t)
{
	uint8_t payload[WS_CONTROL_MAX];

	if (!t)
		return;
	if (t->fd >= 0 && t->parser && !t->close_sent) {
		size_t n = ws_close_payload(payload, WS_CLOSE_NORMAL, "detached");

		(void)send_frame(t, WS_OP_CLOSE, payload, n);
	}
	if (t->fd >= 0)
		close(t->fd);
	ws_parser_free(t->parser);
	free(t->extra);
	free(t);
}

int station_term_fd(const struct station_term *t)
{
	return t->fd;
}

int station_term_send(struct station_term *t, const void *data, size_t n)
{
	if (t->close_sent)
		return -EPIPE;
	return n ? send_frame(t, WS_OP_BINARY, data, n) : 0;
}

int station_term_resize(struct station_term *t, unsigned cols, unsigned rows)
{
	char text[80];
	int n = snprintf(text, sizeof text, "{\"type\":\"resize\",\"cols\":%u,\"rows\":%u}", cols,
			 rows);

	if (t->close_sent)
		return -EPIPE;
	return send_frame(t, WS_OP_TEXT, text, (size_t)n);
}

static int feed(struct station_term *t, const void *data, size_t n)
{
	int r = ws_parser_feed(t->parser, data, n);

	return r == -EBADMSG ? -EPROTO : r;
}

int station_term_pump(struct station_term *t, const struct station_term_callbacks *cb,
		      void *userdata)
{
	uint8_t buf[64 * 1024];
	ssize_t k;
	int r = 0;

	t->cb = cb;
	t->userdata = userdata;
	if (t->extra) {
		r = feed(t, t->extra, t->extra_len);
		free(t->extra);
		t->extra = NULL;
		if (r < 0 || t->closed)
			return r < 0 ? r : 1;
	}
	do
		k = recv(t->fd, buf, sizeof buf, MSG_DONTWAIT);
	while (k < 0 && errno == EINTR);
	if (k < 0)
		return errno == EAGAIN ? 0 : -errno;
	if (k == 0)
		return 1;
	r = feed(t, buf, (size_t)k);
	if (r < 0)
		return r;
	return t->closed ? 1 : 0;
}
