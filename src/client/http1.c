/* SPDX-License-Identifier: MIT */
/* The transport on the controller's unix socket: a small HTTP/1.1 client of our own, so a
 * program that only talks to the local controller loads no HTTP library. One connection per
 * client handle, kept between calls; a kept connection that the server closed before any byte
 * of the answer is replaced and the request sent once more, never after. */

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "basic/cleanup.h"
#include "client-internal.h"
#include "http1-parse.h"

/* How often a wait looks at the interrupt callback. */
#define WAIT_SLICE_MS 200
/* How long an upload waits for "100 Continue" before it sends its body anyway (as curl). */
#define CONTINUE_WAIT_MS 1000
/* A body in memory up to this size leaves in the same send() as the head. */
#define INLINE_BODY_MAX (64u * 1024)

enum {
	EX_OK = 0,
	EX_RETRY = 1, /* the kept connection was closed before an answer: once more on a new one */
};

struct exchange {
	struct station_client *c;
	const struct client_io *io;
	struct client_response *r;
	struct http1_parser p;
	bool reused;		/* the connection carried an earlier request */
	bool body_begun;	/* bytes of the upload were read from its fd */
	bool body_unsent;	/* the request's body did not (all) go: the connection ends */
	bool answer_done;	/* the whole final answer arrived */
	bool got_interim;	/* a 1xx answer arrived (100 Continue) */
	bool stream;		/* an event stream: silent for the heartbeat interval more */
	int send_error;		/* < 0: the request could not be sent whole */
	uint64_t head_ms;	/* how long the answer may take to begin (client_answer_ms()) */
	uint64_t head_deadline; /* CLOCK_MONOTONIC ms by which its head must have come */
	uint64_t missed_ms;	/* the deadline that passed, for the message */
};

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* How long the next wait for the answer may last: until the head's deadline, then the answer
 * deadline as the longest silence, plus the server's heartbeat interval in an event stream. */
static int answer_wait_ms(struct exchange *ex)
{
	uint64_t now = now_ms();

	if (ex->r->status == 0) {
		ex->missed_ms = ex->head_ms;
		return ex->head_deadline > now ?
			       (int)MIN(ex->head_deadline - now, (uint64_t)INT_MAX) :
			       0;
	}
	ex->missed_ms = ex->c->timeout_ms + (ex->stream ? CLIENT_SSE_HEARTBEAT_MS : 0);
	return (int)MIN(ex->missed_ms, (uint64_t)INT_MAX);
}

void client_http1_close(struct station_client *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
}

struct head {
	char *data;
	size_t len;
	size_t cap;
};

static int head_add(struct head *h, const void *s, size_t n)
{
	if (h->len + n + 1 > h->cap) {
		size_t cap = MAX(h->cap * 2, h->len + n + 1);
		char *p = realloc(h->data, MAX(cap, (size_t)1024));

		if (!p)
			return -ENOMEM;
		h->data = p;
		h->cap = MAX(cap, (size_t)1024);
	}
	memcpy(h->data + h->len, s, n);
	h->len += n;
	h->data[h->len] = '\0';
	return 0;
}

/* A whole header line given as "Name: value"; "Name:" alone means "do not send it" (as curl). */
static int head_add_header(struct head *h, const char *line)
{
	const char *colon;
	size_t n;

	if (!line)
		return 0;
	n = strlen(line);
	colon = strchr(line, ':');
	if (!colon || colon == line || strpbrk(line, "\r\n"))
		return -EINVAL;
	if (colon[strspn(colon + 1, " \t") + 1] == '\0')
		return 0;
	if (head_add(h, line, n) < 0 || head_add(h, "\r\n", 2) < 0)
		return -ENOMEM;
	return 0;
}

static bool request_target_is_valid(const char *s)
{
	if (*s != '/')
		return false;
	for (; *s; s++)
		if ((unsigned char)*s <= ' ' || *s == 0x7f)
			return false;
	return true;
}

static bool method_is_valid(const char *s)
{
	size_t n = strlen(s);

	return n > 0 && n <= 16 && strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZ") == n;
}

/* Whether the request carries a body, and how it is framed. */
static bool request_has_body(const struct client_io *io)
{
	return io->upload_fd >= 0 || io->data || strcmp(io->method, "POST") == 0;
}

static int build_head(struct station_client *c, const struct client_io *io, struct head *h)
{
	char line[128];
	int r;

	if (!method_is_valid(io->method))
		return client_error(c, -EINVAL, "bad request method '%.32s'", io->method);
	if (!request_target_is_valid(io->path))
		return client_error(c, -EINVAL, "bad request path '%.200s'", io->path);
	if (head_add(h, io->method, strlen(io->method)) < 0 || head_add(h, " ", 1) < 0 ||
	    head_add(h, io->path, strlen(io->path)) < 0 ||
	    head_add(h, " HTTP/1.1\r\nHost: localhost\r\n", 28) < 0)
		return client_error(c, -ENOMEM, "out of memory");
	r = head_add_header(h, io->accept ? io->accept : "Accept: application/json");
	if (r >= 0)
		r = head_add_header(h, io->content_type);
	if (r >= 0)
		r = head_add_header(h, c->auth_header);
	for (const char *const *x = io->headers; r >= 0 && x && *x; x++)
		r = head_add_header(h, *x);
	if (r == -EINVAL)
		return client_error(c, -EINVAL, "bad request header");
	if (r < 0)
		return client_error(c, -ENOMEM, "out of memory");

	if (io->upload_fd >= 0 && io->upload_size < 0)
		snprintf(line, sizeof line,
			 "Transfer-Encoding: chunked\r\nExpect: 100-continue\r\n");
	else if (io->upload_fd >= 0)
		snprintf(line, sizeof line,
			 "Content-Length: %" PRId64 "\r\nExpect: 100-continue\r\n",
			 io->upload_size);
	else if (request_has_body(io))
		snprintf(line, sizeof line, "Content-Length: %zu\r\n", io->data ? io->size : 0);
	else
		line[0] = '\0';
	if (head_add(h, line, strlen(line)) < 0 || head_add(h, "\r\n", 2) < 0)
		return client_error(c, -ENOMEM, "out of memory");
	return 0;
}

static bool interrupted(struct station_client *c)
{
	return c->interrupt && c->interrupt(c->interrupt_userdata);
}

/* Waits up to timeout_ms (-1: for ever) for events on the connection, looking at the interrupt
 * callback every WAIT_SLICE_MS. Returns the revents, 0 on timeout, -EINTR when interrupted. */
static int wait_fd(struct station_client *c, short events, int timeout_ms)
{
	int waited = 0;

	for (;;) {
		struct pollfd pfd = { .fd = c->fd, .events = events };
		int slice = timeout_ms < 0 ? WAIT_SLICE_MS :
					     MIN(WAIT_SLICE_MS, timeout_ms - waited);
		int k;

		if (interrupted(c))
			return -EINTR;
		if (timeout_ms >= 0 && slice <= 0)
			return 0;
		k = poll(&pfd, 1, slice);
		if (k > 0)
			return pfd.revents;
		if (k < 0 && errno != EINTR)
			return -errno;
		if (k == 0)
			waited += slice;
	}
}

static int parser_on_header(const char *name, size_t name_len, const char *value, size_t value_len,
			    void *userdata)
{
	struct exchange *ex = userdata;

	if (name_len == 4 && strncasecmp(name, "etag", 4) == 0)
		client_response_etag(ex->r, value, value_len);
	return 0;
}

static int parser_on_head(long status, void *userdata)
{
	struct exchange *ex = userdata;

	ex->r->status = status;
	ex->c->transfer_status = status;
	return 0;
}

static int parser_on_body(const void *data, size_t len, void *userdata)
{
	struct exchange *ex = userdata;
	int r = client_response_data(ex->r, data, len);

	return r < 0 ? r : 0;
}

/* Reads what the connection has (waiting up to timeout_ms, -1 for ever) and feeds it. Returns
 * an enum http1_feed, -ETIMEDOUT when nothing came in time; -ECONNRESET when the connection ended before the
 * answer did; -EPROTO for a bad answer; -EINTR; what a callback returned. */
static int receive_some(struct exchange *ex, int timeout_ms)
{
	struct station_client *c = ex->c;
	ssize_t n;
	size_t used;
	int k;

	k = wait_fd(c, POLLIN, timeout_ms);
	if (k == 0)
		return -ETIMEDOUT;
	if (k < 0)
		return k;
	n = recv(c->fd, c->buf, CLIENT_BUF_SIZE, MSG_DONTWAIT);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return HTTP1_MORE;
	if (n < 0 && errno != ECONNRESET)
		return -errno;
	if (n <= 0)
		return http1_parser_eof(&ex->p);
	for (size_t off = 0;; off += used) {
		k = http1_parser_feed(&ex->p, c->buf + off, (size_t)n - off, &used);
		if (k != HTTP1_INFO)
			break;
		ex->got_interim = true;
		if (ex->r->etag)
			ex->r->etag[0] = '\0'; /* the final answer's ETag is the one */
		if (off + used == (size_t)n)
			return HTTP1_MORE;
	}
	if (k == HTTP1_DONE && used < (size_t)n)
		ex->p.keep_alive = false; /* bytes after the answer: never trust the connection */
	return k;
}

/* Sends n bytes; stops early (returns 1) when the server starts answering before the request
 * is whole. 0 when all went, < 0 an error (-EPIPE, -ECONNRESET when the server closed). */
static int send_bytes(struct exchange *ex, const char *p, size_t n, bool stop_on_answer)
{
	struct station_client *c = ex->c;

	while (n > 0) {
		ssize_t k = send(c->fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
		int ev;

		if (k > 0) {
			p += k;
			n -= (size_t)k;
			continue;
		}
		if (k < 0 && errno != EAGAIN && errno != EINTR)
			return -errno;
		/* A server that takes nothing for the answer deadline has stopped. */
		ev = wait_fd(c, stop_on_answer ? POLLOUT | POLLIN : POLLOUT,
			     (int)MIN(c->timeout_ms, (uint64_t)INT_MAX));
		if (ev == 0)
			ex->missed_ms = c->timeout_ms;
		if (ev == 0)
			return -ETIMEDOUT;
		if (ev < 0)
			return ev;
		if (stop_on_answer && (ev & POLLIN))
			return 1;
	}
	return 0;
}

/* The upload's body from its fd: upload_size bytes, or chunked to its end. 0 when it all
 * went, 1 when the server answered first, < 0 an error (recorded in r->upload_error when it
 * was reading the fd). */
static int send_upload(struct exchange *ex)
{
	const struct client_io *io = ex->io;
	bool chunked = io->upload_size < 0;
	uint64_t left = chunked ? UINT64_MAX : (uint64_t)io->upload_size;
	char frame[32];
	_cleanup_free_ char *buf = malloc(CLIENT_BUF_SIZE);
	int k;

	if (!buf)
		return -ENOMEM;
	while (left > 0) {
		ssize_t n = read(io->upload_fd, buf, (size_t)MIN(left, (uint64_t)CLIENT_BUF_SIZE));

		if (n < 0 && errno == EINTR && interrupted(ex->c))
			return ex->r->upload_error = -EINTR;
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return ex->r->upload_error = -errno;
		ex->body_begun = true;
		if (n == 0 && !chunked)
			return ex->r->upload_error = -EPIPE; /* shorter than announced */
		if (n == 0)
			break;
		if (chunked) {
			int len = snprintf(frame, sizeof frame, "%zx\r\n", (size_t)n);

			k = send_bytes(ex, frame, (size_t)len, true);
			if (k == 0)
				k = send_bytes(ex, buf, (size_t)n, true);
			if (k == 0)
				k = send_bytes(ex, "\r\n", 2, true);
		} else {
			k = send_bytes(ex, buf, (size_t)n, true);
			left -= (uint64_t)n;
		}
		if (k != 0)
			return k;
	}
	return chunked ? send_bytes(ex, "0\r\n\r\n", 5, true) : 0;
}

/* Sends the body (after the head) and notes when it did not all go. */
static int send_body(struct exchange *ex)
{
	const struct client_io *io = ex->io;
	int k;

	if (io->upload_fd >= 0)
		k = send_upload(ex);
	else
		k = send_bytes(ex, io->data, io->size, true);
	if (k != 0)
		ex->body_unsent = true;
	if (k < 0 && k != -EINTR && ex->r->upload_error == 0)
		ex->send_error = k;
	return k == 1 ? 0 : k;
}

/* For an upload: the interim "100 Continue" (then the body goes), or the final answer at once
 * (a refusal: the body never goes), or nothing within CONTINUE_WAIT_MS (the body goes). */
static int await_continue(struct exchange *ex)
{
	int k = receive_some(ex, CONTINUE_WAIT_MS);

	if (k == -ETIMEDOUT)
		k = HTTP1_MORE; /* silence: the body goes */
	/* Part of an answer: wait for the rest of its head. */
	while (k == HTTP1_MORE && ex->p.got_bytes && !ex->got_interim && ex->r->status == 0)
		k = receive_some(ex, answer_wait_ms(ex));
	if (k < 0)
		return k;
	if (ex->r->status == 0)
		return send_body(ex); /* a 100 Continue, or silence */
	ex->body_unsent = true;	      /* answered before the body */
	if (k == HTTP1_DONE)
		ex->answer_done = true;
	return 0;
}

static int exchange_fail(struct exchange *ex, int k)
{
	struct station_client *c = ex->c;

	if (k == -EINTR)
		return client_error(c, -EINTR, "interrupted");
	if (k == -ETIMEDOUT)
		return client_timed_out(c, ex->missed_ms);
	if (k == -EPROTO)
		return client_error(c, -EIO, "request to %s failed: %s", c->endpoint,
				    ex->p.error ? ex->p.error : "bad answer");
	if (k == -ENOMEM)
		return client_error(c, -ENOMEM, "out of memory");
	if (!ex->p.got_bytes && ex->send_error < 0)
		return client_error(c, -ECONNRESET, "connection to %s lost: %s", c->endpoint,
				    strerror(-ex->send_error));
	if (k == -ECONNRESET)
		return client_error(c, -ECONNRESET, "connection to %s lost: %s", c->endpoint,
				    ex->p.got_bytes ? "the answer was cut short" :
						      "empty reply from server");
	return client_error(c, -ECONNRESET, "connection to %s lost: %s", c->endpoint, strerror(-k));
}

/* One request and its answer on c->fd. */
static int exchange_run(struct exchange *ex, const struct head *h)
{
	const struct client_io *io = ex->io;
	bool inline_body = io->upload_fd < 0 && io->data && io->size <= INLINE_BODY_MAX;
	int k;

	/* A small body leaves with the head. */
	if (inline_body && io->size > 0) {
		_cleanup_free_ char *msg = malloc(h->len + io->size);

		if (!msg)
			return client_error(ex->c, -ENOMEM, "out of memory");
		memcpy(msg, h->data, h->len);
		memcpy(msg + h->len, io->data, io->size);
		k = send_bytes(ex, msg, h->len + io->size, false);
	} else
		k = send_bytes(ex, h->data, h->len, false);
	if (k < 0 && k != -EINTR) {
		ex->send_error = k;
		ex->body_unsent = true;
	} else if (k == 0 && io->upload_fd >= 0)
		k = await_continue(ex);
	else if (k == 0 && io->data && !inline_body)
		k = send_body(ex);
	if (k == -EINTR || k == -ETIMEDOUT || (k < 0 && ex->r->upload_error < 0))
		return k == -EINTR || k == -ETIMEDOUT ? exchange_fail(ex, k) : k;
	if (k < 0 && k != -EPIPE && k != -ECONNRESET && ex->send_error == 0)
		return exchange_fail(ex, k);

	/* The answer (also after a failed send: a server that refused the body may have said
	 * why before it closed). */
	while (!ex->answer_done) {
		k = receive_some(ex, answer_wait_ms(ex));
		if (k == HTTP1_DONE)
			ex->answer_done = true;
		else if (k < 0)
			break;
	}
	if (k == -ETIMEDOUT) /* never sent again: the server may be acting on it */
		return exchange_fail(ex, k);
	if (ex->answer_done)
		return ex->send_error == 0 || ex->r->status >= 400 ?
			       EX_OK :
			       exchange_fail(ex, ex->send_error);
	if (ex->reused && !ex->p.got_bytes && !ex->body_begun && ex->r->stop == 0)
		return EX_RETRY;
	if (ex->r->stop < 0 || ex->r->body_error < 0)
		return -EIO; /* client_perform() says why */
	if (ex->p.got_bytes && ex->r->status >= 400 && ex->send_error < 0 && k == -ECONNRESET)
		return EX_OK; /* refused, then closed while the body was sent: the refusal counts */
	return exchange_fail(ex, k);
}

int client_http1_perform(struct station_client *c, const struct client_io *io,
			 struct client_response *r)
{
	_cleanup_free_ char *head_data = NULL;
	struct head h = {};
	int k;

	k = build_head(c, io, &h);
	head_data = h.data;
	if (k < 0)
		return k;
	if (!c->buf) {
		c->buf = malloc(CLIENT_BUF_SIZE);
		if (!c->buf)
			return client_error(c, -ENOMEM, "out of memory");
	}
	for (int attempt = 0;; attempt++) {
		struct exchange ex = {
			.c = c,
			.io = io,
			.r = r,
			.reused = c->fd >= 0 && attempt == 0,
			.stream = io->accept && strcasestr(io->accept, "text/event-stream"),
			.head_ms = client_answer_ms(c, io->path),
			.p = {
				.no_body = strcmp(io->method, "HEAD") == 0,
				.on_header = parser_on_header,
				.on_head = parser_on_head,
				.on_body = parser_on_body,
			},
		};

		ex.p.userdata = &ex;
		http1_parser_reset(&ex.p);
		if (c->fd < 0) {
			k = client_connect(c, &c->fd);
			if (k < 0)
				return k;
		}
		if (r->etag)
			r->etag[0] = '\0';
		ex.head_deadline = now_ms() + ex.head_ms;
		k = exchange_run(&ex, &h);
		if (k != EX_OK || !ex.p.keep_alive || ex.body_unsent || !ex.answer_done)
			client_http1_close(c);
		if (k == EX_RETRY)
			continue;
		return k;
	}
}
