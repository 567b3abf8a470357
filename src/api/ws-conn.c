/* SPDX-License-Identifier: MIT */
/* A WebSocket connection on a socket handed over after the HTTP upgrade (ws-conn.h):
 * non-blocking reads and writes on our loop, a bounded queue of whole frames, the closing
 * handshake, pongs, our own pings and the idle timeout. User callbacks run from our io and
 * timer sources, closed() always from the timer (or ws_conn_shutdown()), so no ws_*() call ever
 * re-enters its caller. */
#include "ws-conn.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "basic/cleanup.h"
#include "basic/log.h"
#include "basic/util.h"
#include "event/event.h"

#define WS_DEFAULT_MAX_FRAME (1024u * 1024)
#define WS_DEFAULT_MAX_MESSAGE (1024u * 1024)
#define WS_DEFAULT_MAX_QUEUE (1024u * 1024)
#define WS_DEFAULT_PING_MS 30000u
#define WS_DEFAULT_IDLE_MS 75000u
#define WS_DEFAULT_CLOSE_MS 5000u
/* One read's size, and how many a wakeup does before the other sources get their turn. */
#define WS_READ_BYTES (64u * 1024)
#define WS_READS_PER_WAKEUP 4
#define WS_IOV_MAX 64

struct ws_frame {
	struct ws_frame *next;
	size_t len, sent;
	enum ws_opcode op;
	uint8_t data[];
};

enum conn_state {
	CONN_OPEN,    /* messages both ways (queued only, until attached) */
	CONN_CLOSING, /* our close frame is queued or sent */
	CONN_DONE,    /* closed() is due from the timer */
};

struct ws_conn {
	struct event_loop *loop;
	struct ws_limits limits;
	const struct ws_conn_ops *ops;
	void *userdata;
	struct ws_parser *parser;
	enum conn_state state;

	int fd; /* -1 until attached */
	ws_release_fn release;
	void *release_data;
	struct event_source *io, *timer;
	uint32_t io_events;
	uint8_t *extra; /* read by the HTTP layer past the request, parsed from the timer */
	size_t extra_len;

	struct ws_frame *head, *tail;
	struct ws_frame *pong, *ping; /* queued and not yet started, at most one each */
	size_t queued;		      /* bytes of frames not yet written */
	bool want_drain;

	bool close_sent;  /* our close frame is written (and the write side shut down) */
	bool peer_closed; /* the client's close frame arrived */
	bool input_off;	  /* after a protocol error: input is read and dropped */
	bool have_code;
	uint16_t code;
	char reason[WS_CONTROL_MAX];

	uint64_t last_input, last_output, last_ping, closing_since; /* CLOCK_MONOTONIC usec */
};

static const char *const reason_abnormal = "connection ended without a close frame";

void ws_limits_defaults(struct ws_limits *l)
{
	if (l->max_frame_bytes == 0)
		l->max_frame_bytes = WS_DEFAULT_MAX_FRAME;
	if (l->max_message_bytes == 0)
		l->max_message_bytes = WS_DEFAULT_MAX_MESSAGE;
	if (l->max_queue_bytes == 0)
		l->max_queue_bytes = WS_DEFAULT_MAX_QUEUE;
	if (l->ping_interval_ms == 0)
		l->ping_interval_ms = WS_DEFAULT_PING_MS;
	if (l->idle_timeout_ms == 0)
		l->idle_timeout_ms = WS_DEFAULT_IDLE_MS;
	if (l->close_timeout_ms == 0)
		l->close_timeout_ms = WS_DEFAULT_CLOSE_MS;
}

/* The first code decided wins: the client's close, ours, or an error's. */
static void conn_set_code(struct ws_conn *c, uint16_t code, const char *reason)
{
	if (c->have_code)
		return;
	c->have_code = true;
	c->code = code;
	snprintf(c->reason, sizeof c->reason, "%s", reason ? reason : "");
}

/* ---- the queue ------------------------------------------------------------------------------ */

static struct ws_frame *frame_new(enum ws_opcode op, const struct iovec *iov, size_t n_iov,
				  size_t payload)
{
	uint8_t hdr[WS_HEADER_MAX];
	size_t h = ws_frame_header(hdr, op, true, payload, NULL);
	/* Control frames get room for any payload: a queued pong is rewritten in place. */
	size_t room = op & 0x8 ? WS_HEADER_MAX + WS_CONTROL_MAX : h + payload;
	struct ws_frame *f = malloc(sizeof *f + room);
	size_t at = h;

	if (!f)
		return NULL;
	f->next = NULL;
	f->op = op;
	f->sent = 0;
	memcpy(f->data, hdr, h);
	for (size_t i = 0; i < n_iov; i++) {
		if (iov[i].iov_len > 0)
			memcpy(f->data + at, iov[i].iov_base, iov[i].iov_len);
		at += iov[i].iov_len;
	}
	f->len = at;
	return f;
}

static void queue_append(struct ws_conn *c, struct ws_frame *f)
{
	if (c->tail)
		c->tail->next = f;
	else
		c->head = f;
	c->tail = f;
	c->queued += f->len;
}

/* Control frames go ahead of queued data, but never into a frame that is half written. */
static void queue_push_control(struct ws_conn *c, struct ws_frame *f)
{
	struct ws_frame *after = c->head && c->head->sent > 0 ? c->head : NULL;

	if (!after) {
		f->next = c->head;
		c->head = f;
	} else {
		f->next = after->next;
		after->next = f;
	}
	if (!f->next)
		c->tail = f;
	c->queued += f->len;
}

static void queue_forget(struct ws_conn *c, struct ws_frame *f)
{
	if (c->pong == f)
		c->pong = NULL;
	if (c->ping == f)
		c->ping = NULL;
	free(f);
}

/* Drops every frame not yet started: the client will not read them anyway. */
static void queue_drop_unsent(struct ws_conn *c)
{
	struct ws_frame *keep = c->head && c->head->sent > 0 ? c->head : NULL;
	struct ws_frame *f = keep ? keep->next : c->head;

	while (f) {
		struct ws_frame *next = f->next;

		c->queued -= f->len;
		queue_forget(c, f);
		f = next;
	}
	if (keep)
		keep->next = NULL;
	c->head = c->tail = keep;
}

/* Takes n written bytes off the front. */
static void queue_consume(struct ws_conn *c, size_t n)
{
	while (n > 0 && c->head) {
		struct ws_frame *f = c->head;
		size_t k = MIN(n, f->len - f->sent);

		f->sent += k;
		c->queued -= k;
		n -= k;
		if (f->sent < f->len)
			break;
		c->head = f->next;
		if (!c->head)
			c->tail = NULL;
		if (f->op == WS_OP_CLOSE) {
			c->close_sent = true;
			/* The client reads our close, then sees EOF: no lingering on its side. */
			(void)shutdown(c->fd, SHUT_WR);
		}
		queue_forget(c, f);
	}
}

static int queue_close_frame(struct ws_conn *c, uint16_t code, const char *reason)
{
	uint8_t payload[WS_CONTROL_MAX];
	struct iovec iov = { payload, ws_close_payload(payload, code, reason) };
	struct ws_frame *f = frame_new(WS_OP_CLOSE, &iov, 1, iov.iov_len);

	if (!f)
		return -ENOMEM;
	queue_append(c, f);
	return 0;
}

/* ---- the socket ----------------------------------------------------------------------------- */

static void conn_end(struct ws_conn *c, uint16_t code, const char *reason)
{
	if (c->state == CONN_DONE)
		return;
	conn_set_code(c, code, reason);
	c->state = CONN_DONE;
	event_source_free(c->io);
	c->io = NULL;
	(void)event_source_set_time(c->timer, now_usec());
}

static int conn_flush(struct ws_conn *c)
{
	while (c->head) {
		struct iovec iov[WS_IOV_MAX];
		struct msghdr mh = { .msg_iov = iov };
		ssize_t k;

		for (struct ws_frame *f = c->head; f && mh.msg_iovlen < WS_IOV_MAX; f = f->next)
			iov[mh.msg_iovlen++] =
				(struct iovec){ f->data + f->sent, f->len - f->sent };
		k = sendmsg(c->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return errno == EAGAIN ? 0 : negative_errno();
		c->last_output = now_usec();
		queue_consume(c, (size_t)k);
	}
	return 0;
}

static uint64_t closing_deadline(const struct ws_conn *c)
{
	/* A client that still takes our data gets its time; a stuck one close_timeout_ms. */
	return MAX(c->closing_since, c->last_output) + c->limits.close_timeout_ms * 1000;
}

static uint64_t ping_due(const struct ws_conn *c)
{
	return MAX(c->last_input, c->last_ping) + c->limits.ping_interval_ms * 1000;
}

static uint64_t idle_due(const struct ws_conn *c)
{
	return c->last_input + c->limits.idle_timeout_ms * 1000;
}

static void conn_arm(struct ws_conn *c)
{
	uint64_t when = UINT64_MAX;

	if (c->state == CONN_DONE || c->extra)
		when = now_usec();
	else if (c->fd < 0)
		when = UINT64_MAX;
	else if (c->state == CONN_CLOSING)
		when = closing_deadline(c);
	else
		when = MIN(ping_due(c), idle_due(c));
	(void)event_source_set_time(c->timer, when);
}

/* Writes what the socket takes, ends the connection when the closing handshake is complete,
 * and watches for writability while anything is left. */
static void conn_progress(struct ws_conn *c)
{
	uint32_t events = EPOLLIN | EPOLLRDHUP;
	int r;

	if (c->state != CONN_DONE && c->fd >= 0) {
		r = conn_flush(c);
		if (r < 0)
			conn_end(c, WS_CLOSE_ABNORMAL, reason_abnormal);
		else if (c->close_sent && c->peer_closed)
			conn_end(c, c->code, c->reason);
	}
	if (c->state != CONN_DONE && c->io) {
		if (c->head)
			events |= EPOLLOUT;
		if (events != c->io_events && event_source_set_io_events(c->io, events) >= 0)
			c->io_events = events;
	}
	conn_arm(c);
}

/* The protocol is broken (or we are out of memory): tell the client why and stop listening. */
static void conn_fail(struct ws_conn *c, uint16_t code, const char *reason)
{
	char num[8];

	snprintf(num, sizeof num, "%u", code);
	log_debug("websocket protocol error", "code", num, "reason", reason, NULL);
	c->input_off = true;
	if (c->state != CONN_OPEN)
		return;
	conn_set_code(c, code, reason);
	queue_drop_unsent(c);
	c->state = CONN_CLOSING;
	c->closing_since = now_usec();
	if (queue_close_frame(c, code, reason) < 0)
		conn_end(c, code, reason);
}

/* ---- input ---------------------------------------------------------------------------------- */

static int on_parsed_message(void *userdata, enum ws_opcode op, const void *data, size_t n)
{
	struct ws_conn *c = userdata;

	if (c->state == CONN_OPEN && c->ops->message)
		c->ops->message(c->userdata, c, op, data, n);
	return 0;
}

static void conn_queue_pong(struct ws_conn *c, const void *data, size_t n)
{
	struct iovec iov = { (void *)data, n };
	struct ws_frame *f;

	if (c->pong) { /* only the latest ping needs an answer (RFC 6455 5.5.3) */
		c->queued -= c->pong->len;
		c->pong->len = ws_frame_header(c->pong->data, WS_OP_PONG, true, n, NULL);
		memcpy(c->pong->data + c->pong->len, data, n);
		c->pong->len += n;
		c->queued += c->pong->len;
		return;
	}
	f = frame_new(WS_OP_PONG, &iov, 1, n);
	if (!f)
		return; /* a missed pong: the client's ping timeout will tell */
	queue_push_control(c, f);
	c->pong = f;
}

static int on_parsed_control(void *userdata, enum ws_opcode op, const void *data, size_t n)
{
	struct ws_conn *c = userdata;

	if (op == WS_OP_PING && c->state == CONN_OPEN)
		conn_queue_pong(c, data, n);
	return 0;
}

static int on_parsed_close(void *userdata, uint16_t code, const char *reason)
{
	struct ws_conn *c = userdata;

	c->peer_closed = true;
	if (c->state != CONN_OPEN)
		return 0; /* the answer to ours */
	conn_set_code(c, code, reason);
	queue_drop_unsent(c);
	c->state = CONN_CLOSING;
	c->closing_since = now_usec();
	if (queue_close_frame(c, code == WS_CLOSE_NO_STATUS ? 0 : code, NULL) < 0)
		conn_end(c, code, reason);
	return 0;
}

static const struct ws_parser_ops conn_parser_ops = {
	.message = on_parsed_message,
	.control = on_parsed_control,
	.close = on_parsed_close,
};

static void conn_input(struct ws_conn *c, const void *data, size_t n)
{
	const char *reason;
	uint16_t code;
	int r;

	c->last_input = now_usec();
	if (c->input_off)
		return;
	r = ws_parser_feed(c->parser, data, n);
	if (r == -EBADMSG) {
		code = ws_parser_error(c->parser, &reason);
		conn_fail(c, code, reason);
	} else if (r < 0) {
		conn_fail(c, WS_CLOSE_INTERNAL, "out of memory");
	}
}

static void conn_read(struct ws_conn *c)
{
	static uint8_t buf[WS_READ_BYTES]; /* one loop thread: parsed before the next read */

	for (int i = 0; i < WS_READS_PER_WAKEUP && c->state != CONN_DONE; i++) {
		ssize_t k = recv(c->fd, buf, sizeof buf, MSG_DONTWAIT);

		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0 && errno == EAGAIN)
			return;
		if (k <= 0) {
			conn_end(c, WS_CLOSE_ABNORMAL, reason_abnormal);
			return;
		}
		conn_input(c, buf, (size_t)k);
		if ((size_t)k < sizeof buf)
			return;
	}
}

static void conn_maybe_drain(struct ws_conn *c)
{
	if (!c->want_drain || c->state != CONN_OPEN || c->queued > c->limits.max_queue_bytes / 2)
		return;
	c->want_drain = false;
	if (c->ops->drain)
		c->ops->drain(c->userdata, c);
}

static int on_io(struct event_source *s, int fd, uint32_t revents, void *userdata)
{
	struct ws_conn *c = userdata;

	if (revents & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))
		conn_read(c);
	conn_progress(c);
	conn_maybe_drain(c);
	return 0;
}

/* ---- time ----------------------------------------------------------------------------------- */

static void conn_free(struct ws_conn *c)
{
	while (c->head) {
		struct ws_frame *f = c->head;

		c->head = f->next;
		free(f);
	}
	event_source_free(c->io);
	event_source_free(c->timer);
	if (c->fd >= 0 && c->release)
		c->release(c->release_data, c->fd);
	ws_parser_free(c->parser);
	free(c->extra);
	free(c);
}

static void conn_finish(struct ws_conn *c)
{
	uint16_t code = c->have_code ? c->code : WS_CLOSE_ABNORMAL;

	/* The socket goes first: the HTTP layer is done with it before the caller hears. */
	event_source_free(c->io);
	c->io = NULL;
	if (c->fd >= 0 && c->release)
		c->release(c->release_data, c->fd);
	c->fd = -1;
	if (c->ops->closed)
		c->ops->closed(c->userdata, c, code, c->reason);
	conn_free(c);
}

static void conn_ping(struct ws_conn *c, uint64_t now)
{
	struct ws_frame *f;

	c->last_ping = now;
	if (c->ping)
		return; /* the last one is not even out */
	f = frame_new(WS_OP_PING, NULL, 0, 0);
	if (!f)
		return;
	queue_push_control(c, f);
	c->ping = f;
}

static void conn_take_extra(struct ws_conn *c)
{
	_cleanup_free_ uint8_t *extra = TAKE_PTR(c->extra);

	conn_input(c, extra, c->extra_len);
}

static int on_timer(struct event_source *s, uint64_t now, void *userdata)
{
	struct ws_conn *c = userdata;

	if (c->state == CONN_DONE) {
		conn_finish(c);
		return 0;
	}
	if (c->extra)
		conn_take_extra(c);
	else if (c->fd < 0)
		return 0;
	else if (c->state == CONN_CLOSING && now >= closing_deadline(c))
		conn_end(c, WS_CLOSE_ABNORMAL, "closing handshake timed out");
	else if (c->state == CONN_OPEN && now >= idle_due(c))
		(void)ws_close(c, WS_CLOSE_GOING_AWAY, "idle timeout");
	else if (c->state == CONN_OPEN && now >= ping_due(c))
		conn_ping(c, now);
	conn_progress(c);
	conn_maybe_drain(c);
	return 0;
}

/* ---- the API -------------------------------------------------------------------------------- */

int ws_conn_new(struct event_loop *loop, const struct ws_limits *limits,
		const struct ws_conn_ops *ops, void *userdata, struct ws_conn **ret)
{
	struct ws_conn *c = calloc(1, sizeof *c);
	int r;

	if (!c)
		return -ENOMEM;
	c->loop = loop;
	c->fd = -1;
	if (limits)
		c->limits = *limits;
	ws_limits_defaults(&c->limits);
	c->ops = ops;
	c->userdata = userdata;
	r = ws_parser_new(WS_ROLE_SERVER, c->limits.max_frame_bytes, c->limits.max_message_bytes,
			  &conn_parser_ops, c, &c->parser);
	if (r >= 0)
		r = event_add_timer(loop, &c->timer, UINT64_MAX, on_timer, c);
	if (r < 0) {
		conn_free(c);
		return r;
	}
	*ret = c;
	return 0;
}

void ws_conn_free(struct ws_conn *c)
{
	if (c)
		conn_free(c);
}

int ws_conn_attach(struct ws_conn *c, int fd, const void *extra, size_t n, ws_release_fn release,
		   void *release_data)
{
	_cleanup_free_ uint8_t *copy = NULL;
	int r;

	if (c->fd >= 0 || c->state == CONN_DONE)
		return -EALREADY;
	if (n > 0) {
		copy = malloc(n);
		if (!copy)
			return -ENOMEM;
		memcpy(copy, extra, n);
	}
	r = fd_set_nonblock(fd, true);
	if (r >= 0)
		r = event_add_io(c->loop, &c->io, fd, EPOLLIN | EPOLLRDHUP, on_io, c);
	if (r < 0)
		return r;
	c->io_events = EPOLLIN | EPOLLRDHUP;
	c->fd = fd;
	c->release = release;
	c->release_data = release_data;
	c->extra = TAKE_PTR(copy);
	c->extra_len = n;
	c->last_input = c->last_output = c->closing_since = now_usec();
	conn_progress(c);
	return 0;
}

void ws_conn_abort(struct ws_conn *c, uint16_t code, const char *reason)
{
	conn_end(c, code, reason);
}

void ws_conn_shutdown(struct ws_conn *c)
{
	uint8_t frame[WS_HEADER_MAX + WS_CONTROL_MAX], payload[WS_CONTROL_MAX];
	const char *reason = "server shutting down";
	size_t n, h;

	/* Only between frames: a close inside a half-written frame would be garbage. */
	if (c->state != CONN_DONE && c->fd >= 0 && !c->close_sent &&
	    !(c->head && c->head->sent > 0)) {
		n = ws_close_payload(payload, WS_CLOSE_GOING_AWAY, reason);
		h = ws_frame_header(frame, WS_OP_CLOSE, true, n, NULL);
		memcpy(frame + h, payload, n);
		(void)send(c->fd, frame, h + n, MSG_NOSIGNAL | MSG_DONTWAIT);
	}
	conn_set_code(c, WS_CLOSE_GOING_AWAY, reason);
	conn_finish(c);
}

static int send_direct(struct ws_conn *c, enum ws_opcode op, const struct iovec *iov, size_t n_iov,
		       size_t n)
{
	uint8_t hdr[WS_HEADER_MAX];
	struct iovec v[WS_IOV_MAX];
	struct msghdr mh = { .msg_iov = v, .msg_iovlen = 1 };
	struct ws_frame *f;
	ssize_t k;

	v[0] = (struct iovec){ hdr, ws_frame_header(hdr, op, true, n, NULL) };
	for (size_t i = 0; i < n_iov; i++)
		v[mh.msg_iovlen++] = iov[i];
	do
		k = sendmsg(c->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
	while (k < 0 && errno == EINTR);
	if (k < 0 && errno != EAGAIN) {
		conn_end(c, WS_CLOSE_ABNORMAL, reason_abnormal);
		return 0; /* as if queued: closed() follows from the timer */
	}
	if (k > 0)
		c->last_output = now_usec();
	if (k == (ssize_t)(v[0].iov_len + n))
		return 0;
	f = frame_new(op, iov, n_iov, n);
	if (!f) {
		if (k <= 0)
			return -ENOMEM;
		/* half a frame is out: the stream cannot go on */
		conn_end(c, WS_CLOSE_ABNORMAL, reason_abnormal);
		return 0;
	}
	queue_append(c, f);
	if (k > 0)
		queue_consume(c, (size_t)k);
	conn_progress(c);
	return 0;
}

static int conn_send(struct ws_conn *c, enum ws_opcode op, const struct iovec *iov, size_t n_iov)
{
	size_t n = 0, cap = c->limits.max_queue_bytes;
	struct ws_frame *f;

	for (size_t i = 0; i < n_iov; i++)
		n += iov[i].iov_len;
	if (c->state != CONN_OPEN)
		return -EPIPE;
	if (n + WS_HEADER_MAX > cap)
		return -EMSGSIZE;
	if (c->queued + n + WS_HEADER_MAX > cap) {
		c->want_drain = true;
		return -EAGAIN;
	}
	/* Nothing ahead of it: written from where the data is, and only what the socket did not
	 * take is copied into the queue. */
	if (!c->head && c->fd >= 0 && n_iov < WS_IOV_MAX)
		return send_direct(c, op, iov, n_iov, n);
	f = frame_new(op, iov, n_iov, n);
	if (!f)
		return -ENOMEM;
	queue_append(c, f);
	/* Written at once when nothing is ahead of it; else EPOLLOUT is already watched. */
	if (c->head == f && c->fd >= 0)
		conn_progress(c);
	return 0;
}

void ws_conn_set_max_queue(struct ws_conn *c, size_t bytes)
{
	if (bytes > 0)
		c->limits.max_queue_bytes = bytes;
}

int ws_send_binaryv(struct ws_conn *c, const struct iovec *iov, size_t n_iov)
{
	return conn_send(c, WS_OP_BINARY, iov, n_iov);
}

int ws_send_binary(struct ws_conn *c, const void *data, size_t n)
{
	struct iovec iov = { (void *)data, n };

	return conn_send(c, WS_OP_BINARY, &iov, 1);
}

int ws_send_text(struct ws_conn *c, const char *data, size_t n)
{
	struct iovec iov = { (void *)data, n };
	struct ws_utf8 u = {};

	if (!ws_utf8_feed(&u, data, n) || !ws_utf8_complete(&u))
		return -EINVAL;
	return conn_send(c, WS_OP_TEXT, &iov, 1);
}

size_t ws_send_room(const struct ws_conn *c)
{
	size_t used = c->queued + WS_HEADER_MAX;

	if (c->state != CONN_OPEN || used >= c->limits.max_queue_bytes)
		return 0;
	return c->limits.max_queue_bytes - used;
}

size_t ws_queued_bytes(const struct ws_conn *c)
{
	return c->queued;
}

int ws_close(struct ws_conn *c, uint16_t code, const char *reason)
{
	int r;

	if (c->state != CONN_OPEN)
		return -EALREADY;
	if (code != 0 && !ws_close_code_valid(code))
		return -EINVAL;
	r = queue_close_frame(c, code, reason);
	if (r < 0)
		return r;
	conn_set_code(c, code ? code : WS_CLOSE_NO_STATUS, reason);
	c->state = CONN_CLOSING;
	c->closing_since = now_usec();
	if (c->fd >= 0 && c->head == c->tail)
		conn_progress(c);
	else
		conn_arm(c);
	return 0;
}
