/* SPDX-License-Identifier: MIT */
/* The preview listener (preview.h): a client connection at a time, each with at most one
 * connection into its workspace.
 *
 * A connection moves bytes in two directions, "up" (client to workspace) and "down" (back),
 * each through a buffer of its own. Bytes read into a buffer are written on only once the
 * framing of their message has been checked up to them ("approved"): the length of a
 * Content-Length body, each chunk's size line, data and CRLF, the trailer. A head is the
 * exception: it is parsed whole, checked, and written on as a new head of ours (the station's
 * parameter, cookie and Authorization taken out, hop-by-hop headers replaced, X-Forwarded-*
 * set), so what the workspace receives is always what was checked. Bytes past the end of a
 * request wait in the buffer until its answer has gone back (pipelining, one at a time).
 *
 * Answers of the listener's own (400, 401, 404, 431, 502, 503, the redirect that sets the
 * cookie) close the connection after them: the rest of the client's bytes are read and
 * dropped for a moment first, so that closing with unread input does not reset the
 * connection under the answer. */

#include "api/preview.h"
#include "api/preview-http.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <fcntl.h>
#include <unistd.h>

#include "basic/cleanup.h"
#include "basic/error.h"
#include "basic/list.h"
#include "basic/log.h"
#include "basic/metrics.h"
#include "daemon/manager.h"
#include "event/event.h"

#define DEFAULT_MAX_CONNECTIONS 1024u
#define DEFAULT_MAX_PER_WORKSPACE 512u
#define DEFAULT_MAX_PER_EXPOSURE 256u
#define DEFAULT_IDLE_MS (5u * 60 * 1000)
#define DEFAULT_HEAD_MS 10000u
#define DEFAULT_MAX_HEAD (16u << 10)
#define UP_BUFFER (64u << 10)	  /* at least the head limit and a chunk-size line */
#define DOWN_BUFFER (64u << 10)	  /* also the bound of a response head */
#define DRAIN_USEC (2u * 1000000) /* reading a refused client's rest before closing */
#define TICK_USEC (500u * 1000)
#define KEEPALIVE_USEC (75ull * 1000000) /* a kept connection's wait for its next request */
#define ACCEPT_BURST 64
#define SPLICE_MIN (256u << 10)
#define PIPE_SIZE (1u << 20)

/* One direction. Bytes [start, approved) are checked and go out after head (a head of ours,
 * written first); [approved, len) wait for their framing to be known. */
struct flow {
	char *buf;
	size_t cap, start, approved, len;
	char *head;
	size_t head_len, head_off;
	struct framing f;
	bool eof;  /* the reading side closed */
	bool shut; /* our write side of the other end was shut after eof */
	/* A long run of body bytes (SPLICE_MIN and more, or a body until close) goes through a
	 * pipe instead, with splice(2): never copied through the buffer. Only while the buffer
	 * and head are empty, and nothing is read into the buffer while the pipe holds bytes,
	 * so the order stays. pipe[0] < 0: none made yet. */
	int pipe[2];
	size_t in_pipe, pipe_cap;
};

enum conn_state {
	CONN_HEAD,    /* reading a request head (between requests too) */
	CONN_CONNECT, /* the head is ours; the workspace connection is being made */
	CONN_FORWARD, /* a request and its answer are on the way */
	CONN_TUNNEL,  /* after a 101 */
	CONN_ANSWER,  /* an answer of ours is being written; the connection closes after it */
	CONN_DRAIN,   /* written and shut; reading what the client still sends, then close */
};

struct preview_server;

/* What became of a request (GET /metrics, station_preview_requests_total). */
enum preview_result {
	PREVIEW_PROXIED,      /* answered by the workspace's server */
	PREVIEW_REDIRECTED,   /* the token in the address became a cookie (302) */
	PREVIEW_UNAUTHORIZED, /* no token, or not this exposure's (401) */
	PREVIEW_NOT_FOUND,    /* no exposure has the Host's label (404) */
	PREVIEW_OVER_LIMIT,   /* past the connections of an exposure or a workspace (503) */
	PREVIEW_BAD_REQUEST,  /* malformed or refused framing (400, 405, 431, 501) */
	PREVIEW_TIMEOUT,      /* the head did not arrive in time (408) */
	PREVIEW_UNAVAILABLE,  /* the workspace could not be reached, or the worker short (502,
				 503, 504) */
	_PREVIEW_RESULT_MAX,
};

static const char *const preview_result_names[_PREVIEW_RESULT_MAX] = {
	[PREVIEW_PROXIED] = "proxied",		 [PREVIEW_REDIRECTED] = "redirected",
	[PREVIEW_UNAUTHORIZED] = "unauthorized", [PREVIEW_NOT_FOUND] = "not_found",
	[PREVIEW_OVER_LIMIT] = "over_limit",	 [PREVIEW_BAD_REQUEST] = "bad_request",
	[PREVIEW_TIMEOUT] = "timeout",		 [PREVIEW_UNAVAILABLE] = "unavailable",
};

struct conn {
	struct conn *prev, *next;
	struct preview_server *server;
	int cfd, bfd;
	struct event_source *cev, *bev;
	enum conn_state state;
	struct flow up, down;
	char peer[INET6_ADDRSTRLEN];
	/* the exposure this connection serves, from its first request on */
	bool bound;
	struct preview_target target;
	/* the request on the way */
	bool head_request, upgrade, client_close, backend_reusable, response_head_done;
	bool tried_ipv6;
	bool reused;	   /* the request went on a workspace connection kept from the one before */
	uint64_t deadline; /* CLOCK_MONOTONIC usec */
	uint64_t head_begin; /* the first byte of the head being read; 0: none yet */
	size_t head_scanned; /* bytes of that head already searched for its end (from up.start) */
};

struct preview_server {
	struct event_loop *loop;
	struct manager *manager;
	struct preview_config cfg;
	size_t domain_len;
	bool localhost; /* the domain is localhost or under it */
	int fds[8];
	struct event_source *listeners[8];
	size_t n_listeners;
	bool accepting;
	struct conn *conns;
	unsigned n_conns;
	struct event_source *tick;
	uint64_t results[_PREVIEW_RESULT_MAX];
};

static int on_client(struct event_source *s, int fd, uint32_t revents, void *userdata);
static int on_backend(struct event_source *s, int fd, uint32_t revents, void *userdata);
static void conn_step(struct conn *c);

/* Moves fl->approved forward over what the framing allows. */
static int flow_scan(struct flow *fl)
{
	return preview_framing_scan(&fl->f, fl->buf, fl->len, &fl->approved);
}

/* ---- flows ----------------------------------------------------------------------------- */

static bool flow_pending(const struct flow *fl)
{
	return fl->head_off < fl->head_len || fl->start < fl->approved || fl->in_pipe > 0;
}

static void flow_set_head(struct flow *fl, struct text *t)
{
	free(fl->head);
	fl->head = TAKE_PTR(t->p);
	fl->head_len = t->len;
	fl->head_off = 0;
}

/* Bytes the buffer can still take; makes room by moving what is left to the front. */
static size_t flow_room(struct flow *fl)
{
	if (fl->start == fl->len) {
		fl->start = fl->approved = fl->len = 0;
	} else if (fl->len == fl->cap && fl->start > 0) {
		memmove(fl->buf, fl->buf + fl->start, fl->len - fl->start);
		fl->approved -= fl->start;
		fl->len -= fl->start;
		fl->start = 0;
	}
	return fl->cap - fl->len;
}

/* How many of the next bytes are body the framing lets through unread (0: none now). */
static uint64_t flow_span(const struct flow *fl)
{
	const struct framing *f = &fl->f;

	if (f->done || fl->start != fl->len || fl->head_off < fl->head_len)
		return 0;
	switch (f->kind) {
	case BODY_LENGTH:
		return f->remaining;
	case BODY_CHUNKED:
		return f->phase == CHUNK_DATA ? f->remaining : 0;
	case BODY_CLOSE:
		return UINT64_MAX;
	default:
		return 0; /* a tunnel's messages are small: the buffer serves them */
	}
}

/* Whether the next read goes through the pipe (made here when first needed). */
static bool flow_splicing(struct flow *fl)
{
	if (fl->in_pipe > 0)
		return true;
	if (flow_span(fl) < SPLICE_MIN)
		return false;
	if (fl->pipe[0] < 0) {
		if (pipe2(fl->pipe, O_NONBLOCK | O_CLOEXEC) < 0) {
			fl->pipe[0] = fl->pipe[1] = -1;
			return false;
		}
		int size = fcntl(fl->pipe[1], F_SETPIPE_SZ, PIPE_SIZE);
		if (size < 0)
			size = fcntl(fl->pipe[1], F_GETPIPE_SZ);
		fl->pipe_cap = size > 0 ? (size_t)size : 65536;
	}
	return true;
}

/* Reads what fd has into the flow: > 0 bytes read, 0 at EOF (fl->eof set), -EAGAIN, or
 * -errno. */
static ssize_t flow_read(struct flow *fl, int fd)
{
	ssize_t n;

	if (flow_splicing(fl)) {
		uint64_t span = flow_span(fl);
		size_t want = (size_t)MIN(span ? span : 0, (uint64_t)(fl->pipe_cap - fl->in_pipe));
		if (want == 0)
			return -EAGAIN; /* the pipe is full, or bytes of another kind come next */
		n = splice(fd, NULL, fl->pipe[1], NULL, want, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
		if (n < 0)
			return errno == EAGAIN || errno == EINTR ? -EAGAIN : -errno;
		if (n == 0)
			fl->eof = true;
		fl->in_pipe += (size_t)n;
		if (fl->f.kind == BODY_LENGTH || fl->f.kind == BODY_CHUNKED) {
			fl->f.remaining -= (uint64_t)n;
			if (fl->f.remaining == 0) {
				if (fl->f.kind == BODY_LENGTH)
					fl->f.done = true;
				else
					fl->f.phase = CHUNK_DATA_END;
			}
		}
		return n;
	}
	size_t room = flow_room(fl);
	if (room == 0)
		return -EAGAIN;
	n = read(fd, fl->buf + fl->len, room);
	if (n < 0)
		return errno == EINTR ? -EAGAIN : -errno;
	if (n == 0)
		fl->eof = true;
	fl->len += (size_t)n;
	return n;
}

/* Writes what is pending to fd: 0 when all of it went, -EAGAIN when some is left, -errno. */
static int flow_write(struct flow *fl, int fd)
{
	while (fl->head_off < fl->head_len) {
		ssize_t n = send(fd, fl->head + fl->head_off, fl->head_len - fl->head_off,
				 MSG_NOSIGNAL);
		if (n < 0)
			return errno == EAGAIN || errno == EINTR ? -EAGAIN : -errno;
		fl->head_off += (size_t)n;
	}
	while (fl->start < fl->approved) {
		ssize_t n = send(fd, fl->buf + fl->start, fl->approved - fl->start, MSG_NOSIGNAL);
		if (n < 0)
			return errno == EAGAIN || errno == EINTR ? -EAGAIN : -errno;
		fl->start += (size_t)n;
	}
	if (fl->start == fl->len)
		fl->start = fl->approved = fl->len = 0;
	while (fl->in_pipe > 0) {
		ssize_t n = splice(fl->pipe[0], NULL, fd, NULL, fl->in_pipe,
				   SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
		if (n < 0)
			return errno == EAGAIN || errno == EINTR ? -EAGAIN : -errno;
		if (n == 0)
			return -EPIPE;
		fl->in_pipe -= (size_t)n;
	}
	return 0;
}

/* Whether a read can find room (flow_room() makes it, or the pipe has it). */
static bool flow_can_read(const struct flow *fl)
{
	if (fl->in_pipe > 0)
		return fl->in_pipe < fl->pipe_cap && flow_span(fl) > 0;
	return fl->len < fl->cap || fl->start > 0;
}

static void flow_clear_head(struct flow *fl)
{
	free(fl->head);
	fl->head = NULL;
	fl->head_len = fl->head_off = 0;
}

/* ---- connections ----------------------------------------------------------------------- */

static uint64_t idle_usec(const struct preview_server *s)
{
	return s->cfg.idle_timeout_ms * 1000;
}

static void backend_close(struct conn *c)
{
	event_source_free(c->bev);
	c->bev = NULL;
	if (c->bfd >= 0)
		close(c->bfd);
	c->bfd = -1;
}

static void conn_free(struct conn *c)
{
	struct preview_server *s = c->server;

	backend_close(c);
	event_source_free(c->cev);
	if (c->cfd >= 0)
		close(c->cfd);
	free(c->up.buf);
	free(c->up.head);
	free(c->down.buf);
	free(c->down.head);
	for (int i = 0; i < 2; i++) {
		if (c->up.pipe[i] >= 0)
			close(c->up.pipe[i]);
		if (c->down.pipe[i] >= 0)
			close(c->down.pipe[i]);
	}
	LIST_REMOVE(&s->conns, c);
	free(c);
	s->n_conns--;
	if (!s->accepting && s->n_conns < s->cfg.max_connections) {
		for (size_t i = 0; i < s->n_listeners; i++)
			(void)event_source_set_io_events(s->listeners[i], EPOLLIN);
		s->accepting = true;
	}
}

static const char *reason_of(unsigned status)
{
	switch (status) {
	case 302:
		return "Found";
	case 400:
		return "Bad Request";
	case 401:
		return "Unauthorized";
	case 404:
		return "Not Found";
	case 408:
		return "Request Timeout";
	case 405:
		return "Method Not Allowed";
	case 431:
		return "Request Header Fields Too Large";
	case 501:
		return "Not Implemented";
	case 502:
		return "Bad Gateway";
	case 503:
		return "Service Unavailable";
	case 504:
		return "Gateway Timeout";
	default:
		return "Error";
	}
}

static enum preview_result result_of(unsigned status)
{
	switch (status) {
	case 302:
		return PREVIEW_REDIRECTED;
	case 401:
		return PREVIEW_UNAUTHORIZED;
	case 404:
		return PREVIEW_NOT_FOUND;
	case 408:
		return PREVIEW_TIMEOUT;
	case 502:
	case 503:
	case 504:
		return PREVIEW_UNAVAILABLE;
	default:
		return PREVIEW_BAD_REQUEST;
	}
}

/* An answer of ours, then the connection closes, counted as result. extra: more header lines
 * (each ending in CRLF) or NULL; page: the body's one paragraph (text we wrote; never the
 * client's). */
static void conn_answer_as(struct conn *c, enum preview_result result, unsigned status,
			   const char *extra, const char *title, const char *page)
{
	char body[2048], head[1536];
	int nb = 0;

	c->server->results[result]++;

	if (page)
		nb = snprintf(body, sizeof body,
			      "<!doctype html><meta charset=\"utf-8\"><title>%s</title>"
			      "<style>body{font:15px system-ui,sans-serif;margin:3em auto;"
			      "max-width:36em;color:#222}</style><h1>%s</h1>%s\n",
			      title, title, page);
	if (nb < 0 || (size_t)nb >= sizeof body)
		nb = 0;
	int nh = snprintf(head, sizeof head,
			  "HTTP/1.1 %u %s\r\nContent-Type: text/html; charset=utf-8\r\n"
			  "Content-Length: %d\r\nCache-Control: no-store\r\n"
			  "Content-Security-Policy: default-src 'none'; style-src 'unsafe-inline'; "
			  "form-action 'self'\r\nX-Content-Type-Options: nosniff\r\n"
			  "Referrer-Policy: no-referrer\r\n%sConnection: close\r\n\r\n",
			  status, reason_of(status), nb, extra ? extra : "");
	struct text t = {};
	if (nh > 0 && (size_t)nh < sizeof head)
		preview_text_add(&t, head, (size_t)nh);
	if (!c->head_request)
		preview_text_add(&t, body, (size_t)nb);
	if (t.failed) {
		free(t.p);
		t = (struct text){};
	}
	backend_close(c);
	/* whatever of a response was pending is dropped: an answer comes before any of it */
	c->down.start = c->down.approved = c->down.len = 0;
	flow_set_head(&c->down, &t);
	c->state = CONN_ANSWER;
	c->deadline = now_usec() + DRAIN_USEC;
}

static void conn_answer(struct conn *c, unsigned status, const char *extra, const char *title,
			const char *page)
{
	conn_answer_as(c, result_of(status), status, extra, title, page);
}

static void conn_page(struct conn *c, unsigned status, const char *title, const char *page)
{
	conn_answer(c, status, NULL, title, page);
}

/* How many connections are bound to the exposure label, and to its workspace. */
static void count_bound(const struct preview_server *s, const struct preview_target *t,
			unsigned *exposure, unsigned *workspace)
{
	*exposure = *workspace = 0;
	for (const struct conn *c = s->conns; c; c = c->next) {
		if (!c->bound)
			continue;
		if (strcmp(c->target.label, t->label) == 0)
			(*exposure)++;
		if (strcmp(c->target.ws_id, t->ws_id) == 0)
			(*workspace)++;
	}
}

static int backend_open(struct conn *c)
{
	struct preview_server *s = c->server;
	struct station_error e = {};
	int fd, r;

	r = manager_preview_connect(s->manager, &c->target, c->tried_ipv6, &fd, &e);
	if (r == -ECONNREFUSED && !c->tried_ipv6) {
		/* loopback refuses at once: a server on ::1 alone is tried too */
		c->tried_ipv6 = true;
		e = (struct station_error){};
		r = manager_preview_connect(s->manager, &c->target, true, &fd, &e);
		if (r == -ECONNREFUSED || r == -EADDRNOTAVAIL || r == -ENETUNREACH ||
		    r == -EAFNOSUPPORT)
			snprintf(
				e.message, sizeof e.message,
				"Nothing listens on port %u in the workspace (on 127.0.0.1 or ::1)",
				(unsigned)c->target.port);
	}
	if (r < 0) {
		/* the manager's words, escaped all the same */
		const char *m = e.message[0] ? e.message : "The workspace cannot be reached";
		char page[1200] = "<p>";
		size_t k = 3;
		for (; *m && k < sizeof page - 16; m++) {
			const char *x = *m == '<' ? "&lt;" :
					*m == '>' ? "&gt;" :
					*m == '&' ? "&amp;" :
						    NULL;
			if (x) {
				memcpy(page + k, x, strlen(x));
				k += strlen(x);
			} else {
				page[k++] = *m;
			}
		}
		memcpy(page + k, ".</p>", 6);
		conn_page(c, 502, "Preview unavailable", page);
		return r;
	}
	int one = 1;
	(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	c->bfd = fd;
	r = event_add_io(s->loop, &c->bev, fd, EPOLLOUT, on_backend, c);
	if (r < 0) {
		close(fd);
		c->bfd = -1;
		conn_page(c, 503, "Preview unavailable", "<p>The worker is out of resources.</p>");
		return r;
	}
	c->state = CONN_CONNECT;
	return 0;
}

static const char page_need_token[] =
	"<p>This preview needs its access token. Open the link with the token, send it as "
	"<code>Authorization: Bearer &lt;token&gt;</code>, or paste it here:</p>"
	"<form method=\"get\"><input name=\"" TOKEN_PARAM "\" type=\"password\" "
	"autocomplete=\"off\" size=\"48\"> <button>Open</button></form>";

static const char page_bad_token[] =
	"<p>The token is not this preview's, or it has expired.</p>"
	"<form method=\"get\"><input name=\"" TOKEN_PARAM "\" type=\"password\" "
	"autocomplete=\"off\" size=\"48\"> <button>Open</button></form>";

static const char page_none[] =
	"<p>No preview is here: the address is wrong, or the preview was removed or has "
	"expired.</p>";

/* A request head (up.buf[start, end)) is whole: checks it, finds its exposure, checks its
 * access, and makes the head the workspace gets; or answers. */
static void request_head(struct conn *c, size_t end)
{
	struct preview_server *s = c->server;
	struct head h;
	const char *buf = c->up.buf + c->up.start;
	size_t len = end - c->up.start;
	int r;

	c->head_request = c->upgrade = c->client_close = false;
	c->response_head_done = false;
	c->head_begin = 0;
	r = preview_head_parse(buf, len, &h);
	if (r == -E2BIG) {
		conn_page(c, 431, "Too many header fields",
			  "<p>The request has too many header fields.</p>");
		return;
	}
	if (r < 0) {
		conn_page(c, 400, "Bad request", "<p>The request's head is malformed.</p>");
		return;
	}

	/* the request line: METHOD SP origin-form SP HTTP/1.x */
	const char *sp1 = memchr(h.line, ' ', h.line_len);
	const char *sp2 = sp1 ? memchr(sp1 + 1, ' ', h.line_len - (size_t)(sp1 + 1 - h.line)) :
				NULL;
	if (!sp1 || !sp2 || sp1 == h.line || sp2 == sp1 + 1) {
		conn_page(c, 400, "Bad request", "<p>The request line is malformed.</p>");
		return;
	}
	const char *method = h.line, *target = sp1 + 1, *version = sp2 + 1;
	size_t mlen = (size_t)(sp1 - h.line), tlen = (size_t)(sp2 - target);
	size_t vlen = h.line_len - (size_t)(version - h.line);
	bool http10 = vlen == 8 && memcmp(version, "HTTP/1.0", 8) == 0;
	if (!http10 && !(vlen == 8 && memcmp(version, "HTTP/1.1", 8) == 0)) {
		conn_page(c, 400, "Bad request", "<p>Only HTTP/1.0 and HTTP/1.1 are served.</p>");
		return;
	}
	for (size_t i = 0; i < mlen; i++)
		if (!preview_tchar((unsigned char)method[i]))
			mlen = 0;
	/* before the target's form: CONNECT's is an authority (host:port) */
	if (mlen > 0 && preview_token_eq(method, mlen, "CONNECT")) {
		conn_page(c, 405, "Method not allowed", "<p>CONNECT is not served here.</p>");
		return;
	}
	bool target_ok = tlen > 0 && target[0] == '/';
	for (size_t i = 0; target_ok && i < tlen; i++)
		if ((unsigned char)target[i] <= 0x20 || (unsigned char)target[i] == 0x7f)
			target_ok = false;
	if (mlen == 0 || !target_ok) {
		conn_page(
			c, 400, "Bad request",
			"<p>The request line is malformed (a path starting with / is needed).</p>");
		return;
	}
	c->head_request = preview_token_eq(method, mlen, "HEAD");

	/* the framing and the host, strictly */
	const struct header *host = NULL, *length = NULL, *te = NULL, *upgrade = NULL;
	bool conn_upgrade = false, conn_close = http10, conn_keep = false;
	for (size_t i = 0; i < h.n; i++) {
		const struct header *f = &h.h[i];
		if (preview_header_is(f, "Host")) {
			if (host) {
				conn_page(c, 400, "Bad request",
					  "<p>More than one Host field.</p>");
				return;
			}
			host = f;
		} else if (preview_header_is(f, "Content-Length")) {
			if (length) {
				conn_page(c, 400, "Bad request",
					  "<p>More than one Content-Length field.</p>");
				return;
			}
			length = f;
		} else if (preview_header_is(f, "Transfer-Encoding")) {
			if (te) {
				conn_page(c, 400, "Bad request",
					  "<p>More than one Transfer-Encoding field.</p>");
				return;
			}
			te = f;
		} else if (preview_header_is(f, "Upgrade")) {
			upgrade = f;
		} else if (preview_header_is(f, "Connection")) {
			conn_upgrade |= preview_list_has(f->value, f->value_len, "upgrade");
			conn_close |= preview_list_has(f->value, f->value_len, "close");
			conn_keep |= preview_list_has(f->value, f->value_len, "keep-alive");
		}
	}
	if (http10 && conn_keep)
		conn_close = false;
	uint64_t body = 0;
	enum body_kind kind = BODY_NONE;
	if (te && length) {
		conn_page(
			c, 400, "Bad request",
			"<p>A request cannot have both Content-Length and Transfer-Encoding.</p>");
		return;
	}
	if (te) {
		if (http10 || !preview_token_eq(te->value, te->value_len, "chunked")) {
			conn_page(c, 501, "Not implemented",
				  "<p>Transfer-Encoding other than chunked is not served.</p>");
			return;
		}
		kind = BODY_CHUNKED;
	} else if (length) {
		if (preview_parse_length(length->value, length->value_len, &body) < 0) {
			conn_page(c, 400, "Bad request",
				  "<p>The Content-Length is not a number.</p>");
			return;
		}
		kind = BODY_LENGTH;
	}
	char label[PREVIEW_LABEL_MAX + 1];
	if (!host || !preview_host_label(s->cfg.domain, s->domain_len, host->value, host->value_len,
					 label)) {
		conn_page(c, host ? 404 : 400, host ? "Not found" : "Bad request",
			  host ? page_none : "<p>The request has no Host field.</p>");
		return;
	}
	/* A reverse proxy in front reuses a connection for any preview: one for another moves
	 * the connection over, its bounds counted again, its connection into the workspace closed
	 * (that one reaches the other's port). */
	if (c->bound && strcmp(label, c->target.label) != 0) {
		backend_close(c);
		c->bound = false;
	}
	struct preview_target t;
	if (manager_preview_find(s->manager, label, strlen(label), &t) < 0) {
		conn_page(c, 404, "Not found", page_none);
		return;
	}

	/* the new head: the target without the parameter; the station's cookie and bearer out */
	struct text out = {}, fields = {};
	char qtok[160], ctok[160] = "", btok[160] = "";
	bool framed = false;
	preview_text_add(&out, method, mlen);
	preview_text_add(&out, " ", 1);
	preview_target_strip(target, tlen, &out, qtok, sizeof qtok);
	preview_text_add(&out, " ", 1);
	preview_text_add(&out, version, vlen);
	preview_text_add(&out, "\r\n", 2);
	const char *xff = NULL;
	size_t xff_len = 0;
	for (size_t i = 0; i < h.n; i++) {
		const struct header *f = &h.h[i];
		if (preview_header_is(f, "Cookie")) {
			preview_cookie_strip(f, &fields, ctok, sizeof ctok);
			continue;
		}
		if (preview_header_is(f, "Authorization") && !t.public && f->value_len > 7 &&
		    strncasecmp(f->value, "Bearer ", 7) == 0 && f->value_len - 7 < sizeof btok) {
			memcpy(btok, f->value + 7, f->value_len - 7);
			btok[f->value_len - 7] = 0;
			continue;
		}
		if (preview_header_is(f, "Sec-Fetch-Dest") &&
		    preview_token_eq(f->value, f->value_len, "iframe"))
			framed = true;
		if (preview_header_is(f, "X-Forwarded-For")) {
			xff = f->value;
			xff_len = f->value_len;
			continue;
		}
		if (preview_header_is(f, "Connection") || preview_header_is(f, "Keep-Alive") ||
		    preview_header_is(f, "Proxy-Connection") || preview_header_is(f, "TE") ||
		    preview_header_is(f, "Upgrade") || preview_header_is(f, "X-Forwarded-Proto") ||
		    preview_header_is(f, "X-Forwarded-Host") ||
		    preview_header_is(f, "X-Forwarded-Port") || preview_header_is(f, "Forwarded") ||
		    preview_header_is(f, "X-Real-IP"))
			continue;
		preview_header_add(&fields, f);
	}

	/* access */
	if (!t.public) {
		const char *tok = qtok[0] ? qtok : btok[0] ? btok : ctok;
		bool ok = tok[0] && manager_preview_token_ok(s->manager, label, tok, strlen(tok));
		if (!ok) {
			free(out.p);
			free(fields.p);
			conn_answer(c, 401,
				    "WWW-Authenticate: Bearer realm=\"station-preview\"\r\n",
				    "This preview needs a token",
				    tok[0] ? page_bad_token : page_need_token);
			return;
		}
		if (qtok[0] && (c->head_request || preview_token_eq(method, mlen, "GET"))) {
			/* the token becomes a host-only cookie; the address loses it */
			char extra[1024];
			uint64_t now = realtime_usec();
			uint64_t age = t.expires_at > now ? (t.expires_at - now) / 1000000 : 0;
			size_t path_len = (size_t)(strchr(out.p, ' ') - out.p) + 1;
			const char *path = out.p + path_len;
			const char *path_end = strchr(path, ' ');
			/* "//host/…" would send the browser to another site: one slash */
			while (path_end - path > 1 && (path[1] == '/' || path[1] == '\\'))
				path++;
			/* Opened in a frame of another site (the dashboard's Open here), a Lax
			 * cookie is never sent back: a partitioned one is, and only in frames
			 * under that same top-level site. It must be Secure: https, or a
			 * *.localhost name, which browsers hold secure over http. */
			const char *attrs = t.https ? "SameSite=Lax; Secure" : "SameSite=Lax";
			if (framed && (t.https || s->localhost))
				attrs = "SameSite=None; Secure; Partitioned";
			int n = snprintf(extra, sizeof extra,
					 "Location: %.*s\r\nSet-Cookie: " TOKEN_COOKIE
					 "=%s; Path=/; Max-Age=%llu; HttpOnly; %s\r\n",
					 (int)(path_end - path), path, qtok,
					 (unsigned long long)age, attrs);
			free(out.p);
			free(fields.p);
			if (n < 0 || (size_t)n >= sizeof extra) {
				conn_page(c, 400, "Bad request", "<p>The address is too long.</p>");
				return;
			}
			conn_answer(c, 302, extra, "Opening the preview", NULL);
			return;
		}
	}

	/* bounds */
	if (!c->bound) {
		unsigned ne, nw;
		count_bound(s, &t, &ne, &nw);
		if (ne >= s->cfg.max_per_exposure || nw >= s->cfg.max_per_workspace) {
			free(out.p);
			free(fields.p);
			conn_answer_as(
				c, PREVIEW_OVER_LIMIT, 503, "Retry-After: 1\r\n",
				"Too many connections",
				"<p>This preview has too many open connections; try again.</p>");
			return;
		}
		c->bound = true;
	}
	c->target = t;

	c->upgrade = upgrade && conn_upgrade;
	if (c->upgrade) {
		preview_text_str(&fields, "Connection: Upgrade\r\n");
		preview_text_field(&fields, "Upgrade", upgrade->value, upgrade->value_len);
	} else if (http10 && !conn_close) {
		preview_text_str(&fields, "Connection: keep-alive\r\n");
	}
	preview_text_str(&fields, "X-Forwarded-For: ");
	if (xff) {
		preview_text_add(&fields, xff, xff_len);
		preview_text_add(&fields, ", ", 2);
	}
	preview_text_str(&fields, c->peer);
	preview_text_str(&fields, "\r\nX-Forwarded-Proto: ");
	preview_text_str(&fields, s->cfg.https ? "https" : "http");
	preview_text_str(&fields, "\r\n");
	preview_text_field(&fields, "X-Forwarded-Host", host->value, host->value_len);
	preview_text_add(&fields, "\r\n", 2);
	if (fields.p)
		preview_text_add(&out, fields.p, fields.len);
	bool failed = out.failed || fields.failed;
	free(fields.p);
	if (failed) {
		free(out.p);
		conn_page(c, 503, "Preview unavailable", "<p>The worker is out of memory.</p>");
		return;
	}
	c->client_close = conn_close;
	c->deadline = now_usec() + idle_usec(s);
	c->up.start = end; /* the head is consumed: ours goes instead */
	c->up.approved = end;
	flow_set_head(&c->up, &out);
	preview_framing_start(&c->up.f, kind, body);
	c->reused = c->bfd >= 0;
	if (c->bfd < 0) {
		c->tried_ipv6 = false;
		if (backend_open(c) < 0)
			return;
	} else {
		c->state = CONN_FORWARD;
	}
	preview_framing_start(&c->down.f, BODY_NONE, 0);
	c->down.f.done = false;
}

/* A response head (down.buf[start, end)) is whole. */
static int response_head(struct conn *c, size_t end)
{
	struct head h;
	const char *buf = c->down.buf + c->down.start;
	size_t len = end - c->down.start;

	if (preview_head_parse(buf, len, &h) < 0 || h.line_len < 12 ||
	    memcmp(h.line, "HTTP/1.", 7) != 0 || (h.line[7] != '0' && h.line[7] != '1') ||
	    h.line[8] != ' ' || !isdigit((unsigned char)h.line[9]) ||
	    !isdigit((unsigned char)h.line[10]) || !isdigit((unsigned char)h.line[11]) ||
	    (h.line_len > 12 && h.line[12] != ' '))
		return -EBADMSG;
	unsigned status =
		(unsigned)((h.line[9] - '0') * 100 + (h.line[10] - '0') * 10 + (h.line[11] - '0'));
	bool http10 = h.line[7] == '0';
	const struct header *length = NULL, *te = NULL;
	bool conn_close = http10, conn_keep = false;
	for (size_t i = 0; i < h.n; i++) {
		const struct header *f = &h.h[i];
		if (preview_header_is(f, "Content-Length")) {
			if (length && (length->value_len != f->value_len ||
				       memcmp(length->value, f->value, f->value_len) != 0))
				return -EBADMSG;
			length = f;
		} else if (preview_header_is(f, "Transfer-Encoding")) {
			te = f;
		} else if (preview_header_is(f, "Connection")) {
			conn_close |= preview_list_has(f->value, f->value_len, "close");
			conn_keep |= preview_list_has(f->value, f->value_len, "keep-alive");
		}
	}
	if (http10 && conn_keep)
		conn_close = false;

	enum body_kind kind = BODY_CLOSE;
	uint64_t body = 0;
	bool informational = status >= 100 && status < 200;
	if (status == 101) {
		if (!c->upgrade)
			return -EBADMSG;
		kind = BODY_TUNNEL;
	} else if (informational || status == 204 || status == 304 || c->head_request) {
		kind = BODY_NONE;
	} else if (te) {
		/* chunked last: that framing; anything else: until close. A Content-Length beside
		 * it is dropped below, and the connection is not used again. */
		const char *v = te->value;
		size_t n = te->value_len, k = n;
		while (k > 0 && v[k - 1] != ',')
			k--;
		while (k < n && (v[k] == ' ' || v[k] == '\t'))
			k++;
		kind = preview_token_eq(v + k, n - k, "chunked") ? BODY_CHUNKED : BODY_CLOSE;
		if (length)
			conn_close = true;
	} else if (length) {
		if (preview_parse_length(length->value, length->value_len, &body) < 0)
			return -EBADMSG;
		kind = BODY_LENGTH;
	}
	if (kind == BODY_CLOSE)
		c->client_close = true;
	if (!informational)
		c->backend_reusable = !conn_close && kind != BODY_CLOSE;

	struct text out = {};
	preview_text_add(&out, h.line, h.line_len);
	preview_text_add(&out, "\r\n", 2);
	for (size_t i = 0; i < h.n; i++) {
		const struct header *f = &h.h[i];
		bool hop = preview_header_is(f, "Connection") ||
			   preview_header_is(f, "Keep-Alive") ||
			   preview_header_is(f, "Proxy-Connection");
		if ((hop && kind != BODY_TUNNEL) || (te && preview_header_is(f, "Content-Length")))
			continue;
		if (preview_header_is(f, "Set-Cookie")) {
			preview_set_cookie_add(&out, f);
			continue;
		}
		preview_header_add(&out, f);
	}
	if (!informational && kind != BODY_TUNNEL && c->client_close)
		preview_text_str(&out, "Connection: close\r\n");
	preview_text_add(&out, "\r\n", 2);
	if (out.failed) {
		free(out.p);
		return -ENOMEM;
	}
	c->down.start = c->down.approved = end;
	flow_set_head(&c->down, &out);
	if (informational && status != 101) {
		preview_framing_start(&c->down.f, BODY_NONE, 0);
		c->down.f.done = false; /* another head follows */
		return 0;
	}
	c->response_head_done = true;
	c->server->results[PREVIEW_PROXIED]++;
	preview_framing_start(&c->down.f, kind, body);
	if (kind == BODY_TUNNEL) {
		c->state = CONN_TUNNEL;
		preview_framing_start(&c->up.f, BODY_TUNNEL, 0);
	}
	return 0;
}

/* Interest in each socket from what is pending. */
static void conn_arm(struct conn *c)
{
	uint32_t ce = 0, be = 0;

	switch (c->state) {
	case CONN_HEAD:
		ce = EPOLLIN;
		be = EPOLLIN; /* a kept connection into the workspace that closes is let go */
		break;
	case CONN_CONNECT:
		be = EPOLLOUT;
		break;
	case CONN_FORWARD:
	case CONN_TUNNEL:
		if (!c->up.f.done && !c->up.eof && flow_can_read(&c->up))
			ce |= EPOLLIN;
		if (flow_pending(&c->up))
			be |= EPOLLOUT;
		if (!c->down.eof && !c->down.f.done && flow_can_read(&c->down))
			be |= EPOLLIN;
		if (flow_pending(&c->down))
			ce |= EPOLLOUT;
		/* a client that goes away while its request waits for the answer is seen */
		if (c->up.f.done && !c->up.eof && c->state == CONN_FORWARD)
			ce |= EPOLLRDHUP;
		break;
	case CONN_ANSWER:
		ce = EPOLLOUT;
		break;
	case CONN_DRAIN:
		ce = EPOLLIN;
		break;
	}
	(void)event_source_set_io_events(c->cev, ce);
	if (c->bev)
		(void)event_source_set_io_events(c->bev, be);
}

static void conn_close_now(struct conn *c)
{
	conn_free(c);
}

/* The request and its answer are through: the next request, or the end. */
static void exchange_done(struct conn *c)
{
	if (!c->backend_reusable)
		backend_close(c);
	flow_clear_head(&c->down);
	if (c->client_close || !c->up.f.done || flow_pending(&c->up) || c->up.eof) {
		(void)shutdown(c->cfd, SHUT_WR);
		c->state = CONN_DRAIN;
		c->deadline = now_usec() + DRAIN_USEC;
		return;
	}
	c->state = CONN_HEAD;
	c->deadline = now_usec() + MIN(idle_usec(c->server), (uint64_t)KEEPALIVE_USEC);
	/* what is left in the buffer is the next request's beginning */
	c->up.approved = c->up.start;
}

/* A kept workspace connection failed before any byte of the answer: the server closed it
 * while it was idle. A request without a body is sent again once, on a new connection. */
static bool retry_fresh(struct conn *c)
{
	if (!c->reused || c->up.f.kind != BODY_NONE || c->response_head_done || c->down.len ||
	    c->down.head_len)
		return false;
	backend_close(c);
	c->reused = false;
	c->tried_ipv6 = false;
	c->up.head_off = 0;
	c->down.eof = false;
	(void)backend_open(c); /* a failure has answered 502: the state says which */
	return true;
}

static void conn_step(struct conn *c)
{
	struct preview_server *s = c->server;
	int r;

	/* every round that goes on has consumed bytes or changed the state */
	for (int round = 0; round < 1024; round++) {
		switch (c->state) {
		case CONN_HEAD: {
			/* leading empty lines before a request line are skipped (RFC 9112 §2.2) */
			while (c->up.len - c->up.start >= 2 && c->up.buf[c->up.start] == '\r' &&
			       c->up.buf[c->up.start + 1] == '\n') {
				c->up.start += 2;
				c->head_scanned = 0;
			}
			c->up.approved = c->up.start;
			size_t have = c->up.len - c->up.start;
			if (have == 0) {
				if (c->up.eof)
					goto close;
				goto arm;
			}
			if (!c->head_begin) {
				c->head_begin = now_usec();
				c->deadline = c->head_begin + s->cfg.head_timeout_ms * 1000;
			}
			/* only what arrived since the last look is searched: a head sent a byte
			 * at a time costs its length, not its square */
			const char *h = c->up.buf + c->up.start;
			size_t lim = MIN(have, s->cfg.max_head_bytes);
			size_t from = c->head_scanned > 3 ? c->head_scanned - 3 : 0;
			size_t end = lim > from ? preview_head_end(h + from, lim - from) : 0;
			if (end)
				end += from;
			if (!end) {
				if (have >= s->cfg.max_head_bytes) {
					conn_page(c, 431, "Request head too large",
						  "<p>The request's head is over the limit.</p>");
					continue;
				}
				if (preview_has_bare_lf(h, from, lim)) {
					conn_page(c, 400, "Bad request",
						  "<p>The request's head is malformed.</p>");
					continue;
				}
				c->head_scanned = lim;
				if (c->up.eof)
					goto close;
				if (flow_room(&c->up) == 0) /* cannot happen: cap > max head */
					goto close;
				goto arm;
			}
			c->head_scanned = 0;
			request_head(c, c->up.start + end);
			continue;
		}
		case CONN_CONNECT:
			goto arm;
		case CONN_FORWARD:
		case CONN_TUNNEL:
			break;
		case CONN_ANSWER:
			r = flow_write(&c->down, c->cfd);
			if (r == -EAGAIN)
				goto arm;
			if (r < 0)
				goto close;
			(void)shutdown(c->cfd, SHUT_WR);
			c->state = CONN_DRAIN;
			goto arm;
		case CONN_DRAIN:
			if (c->up.eof)
				goto close;
			c->up.start = c->up.approved = c->up.len = 0; /* dropped */
			goto arm;
		}

		/* forwarding, both ways */
		if (flow_scan(&c->up) < 0) {
			if (c->response_head_done || flow_pending(&c->down))
				goto close;
			conn_page(c, 400, "Bad request",
				  "<p>The request's chunked body is malformed.</p>");
			continue;
		}
		r = flow_write(&c->up, c->bfd);
		if (r < 0 && r != -EAGAIN) {
			if (retry_fresh(c))
				continue;
			if (!c->response_head_done && c->down.len == 0) {
				conn_page(c, 502, "Preview unavailable",
					  "<p>The workspace's server closed the connection.</p>");
				continue;
			}
			goto close;
		}
		if (!c->response_head_done && c->state == CONN_FORWARD &&
		    c->down.head_off == c->down.head_len) {
			size_t have = c->down.len - c->down.start;
			size_t end = preview_head_end(c->down.buf + c->down.start, have);
			if (end) {
				if (response_head(c, c->down.start + end) < 0) {
					if (c->down.head_off > 0)
						goto close;
					conn_page(
						c, 502, "Bad gateway",
						"<p>The workspace's server sent a malformed answer.</p>");
					continue;
				}
				continue; /* the head may have changed the framing: scan again */
			}
			if (have == c->down.cap) {
				conn_page(
					c, 502, "Bad gateway",
					"<p>The workspace's server sent an answer head over the limit.</p>");
				continue;
			}
			if (c->down.eof) {
				if (retry_fresh(c))
					continue;
				if (c->down.head_len > 0)
					goto close; /* after a 1xx went out */
				conn_page(
					c, 502, "Preview unavailable",
					"<p>The workspace's server closed the connection without an answer.</p>");
				continue;
			}
		}
		if (c->response_head_done && flow_scan(&c->down) < 0)
			goto close;
		r = flow_write(&c->down, c->cfd);
		if (r < 0 && r != -EAGAIN)
			goto close;

		if (c->state == CONN_TUNNEL) {
			/* half-closes pass on; both ends closed and flushed: done */
			if (c->up.eof && !flow_pending(&c->up) && !c->up.shut) {
				(void)shutdown(c->bfd, SHUT_WR);
				c->up.shut = true;
			}
			if (c->down.eof && !flow_pending(&c->down) && !c->down.shut) {
				(void)shutdown(c->cfd, SHUT_WR);
				c->down.shut = true;
			}
			if (c->up.shut && c->down.shut)
				goto close;
			goto arm;
		}
		if (c->down.eof && c->response_head_done && !c->down.f.done) {
			if (c->down.f.kind == BODY_CLOSE && !flow_pending(&c->down))
				c->down.f.done = true; /* the end of a close-delimited body */
			else if (!flow_pending(&c->down))
				goto close; /* cut short: the client sees the close */
		}
		if (c->up.eof && !c->up.f.done)
			goto close; /* the client went away inside its request */
		if (c->response_head_done && c->down.f.done && !flow_pending(&c->down)) {
			if (c->down.len > c->down.approved)
				c->backend_reusable = false; /* bytes nobody asked for */
			c->down.start = c->down.approved = c->down.len = 0;
			exchange_done(c);
			continue;
		}
		goto arm;
	}
arm:
	conn_arm(c);
	return;
close:
	conn_close_now(c);
}

/* Bytes moved for a request on the way: its idle time starts again. Between requests the
 * deadline is the head's (from the first byte, or from accept and the last answer). */
static void conn_touch(struct conn *c)
{
	if (c->state == CONN_CONNECT || c->state == CONN_FORWARD || c->state == CONN_TUNNEL)
		c->deadline = now_usec() + idle_usec(c->server);
}

static int on_client(struct event_source *s, int fd, uint32_t revents, void *userdata)
{
	struct conn *c = userdata;
	(void)s;

	if (revents & (EPOLLERR | EPOLLHUP)) {
		conn_close_now(c);
		return 0;
	}
	if (revents & EPOLLIN) {
		ssize_t n = flow_read(&c->up, fd);
		if (n < 0 && n != -EAGAIN) {
			conn_close_now(c);
			return 0;
		}
		if (n > 0)
			conn_touch(c);
	} else if (revents & EPOLLRDHUP) {
		c->up.eof = true; /* the client shut its side while it waits for its answer */
	}
	if (revents & EPOLLOUT)
		conn_touch(c);
	conn_step(c);
	return 0;
}

static int on_backend(struct event_source *s, int fd, uint32_t revents, void *userdata)
{
	struct conn *c = userdata;
	(void)s;

	if (c->state != CONN_CONNECT && c->state != CONN_FORWARD && c->state != CONN_TUNNEL) {
		backend_close(c); /* between requests: it closed, or sent what nobody asked */
		conn_arm(c);
		return 0;
	}
	if (c->state == CONN_CONNECT) {
		int err = 0;
		socklen_t el = sizeof err;
		if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) < 0)
			err = errno;
		if (err == ECONNREFUSED && !c->tried_ipv6) {
			backend_close(c);
			c->tried_ipv6 = true;
			if (backend_open(c) >= 0)
				conn_arm(c);
			else
				conn_step(c);
			return 0;
		}
		if (err) {
			char page[256];
			snprintf(page, sizeof page,
				 "<p>Nothing answers on port %u in the workspace (%s).</p>",
				 (unsigned)c->target.port, strerror(err));
			conn_page(c, 502, "Preview unavailable", page);
			conn_step(c);
			return 0;
		}
		c->state = CONN_FORWARD;
		c->backend_reusable = false;
		conn_step(c);
		return 0;
	}
	if (revents & EPOLLOUT)
		conn_touch(c);
	if (revents & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
		ssize_t n = flow_read(&c->down, fd);
		if (n < 0 && n != -EAGAIN) {
			if (c->down.len == 0 && !c->response_head_done)
				c->down.eof = true; /* answered 502 below */
			else {
				conn_close_now(c);
				return 0;
			}
		}
		if (n > 0)
			conn_touch(c);
	}
	conn_step(c);
	return 0;
}

static int on_accept(struct event_source *src, int fd, uint32_t revents, void *userdata)
{
	struct preview_server *s = userdata;
	(void)src;
	(void)revents;

	for (int i = 0; i < ACCEPT_BURST; i++) {
		if (s->n_conns >= s->cfg.max_connections) {
			for (size_t k = 0; k < s->n_listeners; k++)
				(void)event_source_set_io_events(s->listeners[k], 0);
			s->accepting = false;
			return 0;
		}
		struct sockaddr_storage sa;
		socklen_t sl = sizeof sa;
		int cfd = accept4(fd, (struct sockaddr *)&sa, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (cfd < 0)
			return 0; /* EAGAIN, or a connection that went (ECONNABORTED), or EMFILE */
		struct conn *c = calloc(1, sizeof *c);
		if (c) {
			c->up.buf = malloc(UP_BUFFER);
			c->down.buf = malloc(DOWN_BUFFER);
		}
		if (!c || !c->up.buf || !c->down.buf) {
			if (c) {
				free(c->up.buf);
				free(c->down.buf);
			}
			free(c);
			close(cfd);
			continue;
		}
		c->server = s;
		c->cfd = cfd;
		c->bfd = -1;
		c->up.cap = UP_BUFFER;
		c->down.cap = DOWN_BUFFER;
		c->up.pipe[0] = c->up.pipe[1] = c->down.pipe[0] = c->down.pipe[1] = -1;
		if (sa.ss_family == AF_INET)
			inet_ntop(AF_INET, &((struct sockaddr_in *)&sa)->sin_addr, c->peer,
				  sizeof c->peer);
		else if (sa.ss_family == AF_INET6)
			inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&sa)->sin6_addr, c->peer,
				  sizeof c->peer);
		else
			snprintf(c->peer, sizeof c->peer, "unknown");
		int one = 1;
		(void)setsockopt(cfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
		if (event_add_io(s->loop, &c->cev, cfd, EPOLLIN, on_client, c) < 0) {
			free(c->up.buf);
			free(c->down.buf);
			free(c);
			close(cfd);
			continue;
		}
		c->state = CONN_HEAD;
		c->deadline = now_usec() + s->cfg.head_timeout_ms * 1000; /* a silent one goes */
		LIST_PREPEND(&s->conns, c);
		s->n_conns++;
	}
	return 0;
}

static int on_tick(struct event_source *src, uint64_t now, void *userdata)
{
	struct preview_server *s = userdata;

	for (struct conn *c = s->conns, *next; c; c = next) {
		next = c->next;
		if (now < c->deadline)
			continue;
		if (c->state == CONN_HEAD && c->head_begin) {
			conn_page(c, 408, "Request timeout",
				  "<p>The request's head did not arrive in time.</p>");
			conn_step(c);
		} else {
			conn_close_now(c);
		}
	}
	(void)event_source_set_time(src, now + TICK_USEC);
	return 0;
}

/* The listener's part of GET /metrics (manager_metrics_on_write()). */
static void preview_metrics_write(void *userdata, FILE *f)
{
	const struct preview_server *s = userdata;
	uint64_t tunnels = 0;

	metrics_family(f, "station_preview_requests_total", "counter",
		       "Requests to the preview listener, by result (proxied: answered by the "
		       "workspace's server).");
	for (int r = 0; r < _PREVIEW_RESULT_MAX; r++) {
		const char *labels[] = { "result", preview_result_names[r], NULL };
		metrics_sample_u64(f, "station_preview_requests_total", labels, s->results[r]);
	}
	for (const struct conn *c = s->conns; c; c = c->next)
		tunnels += c->state == CONN_TUNNEL;
	metrics_family(
		f, "station_preview_connections_open", "gauge",
		"Client connections to the preview listener open now (WebSockets included).");
	metrics_sample_u64(f, "station_preview_connections_open", NULL, s->n_conns);
	metrics_family(
		f, "station_preview_websockets_open", "gauge",
		"Preview connections turned into a tunnel by a 101 answer (WebSockets) now.");
	metrics_sample_u64(f, "station_preview_websockets_open", NULL, tunnels);
}

int preview_server_new(struct event_loop *loop, struct manager *m, const struct preview_config *cfg,
		       const int *fds, size_t n_fds, struct preview_server **ret)
{
	struct preview_server *s;
	int r;

	if (n_fds == 0 || n_fds > ELEMENTSOF(s->fds) || !cfg->domain)
		return -EINVAL;
	s = calloc(1, sizeof *s);
	if (!s)
		return -ENOMEM;
	s->loop = loop;
	s->manager = m;
	s->cfg = *cfg;
	if (!s->cfg.max_connections)
		s->cfg.max_connections = DEFAULT_MAX_CONNECTIONS;
	if (!s->cfg.max_per_workspace)
		s->cfg.max_per_workspace = DEFAULT_MAX_PER_WORKSPACE;
	if (!s->cfg.max_per_exposure)
		s->cfg.max_per_exposure = DEFAULT_MAX_PER_EXPOSURE;
	if (!s->cfg.idle_timeout_ms)
		s->cfg.idle_timeout_ms = DEFAULT_IDLE_MS;
	if (!s->cfg.head_timeout_ms)
		s->cfg.head_timeout_ms = DEFAULT_HEAD_MS;
	if (!s->cfg.max_head_bytes || s->cfg.max_head_bytes > UP_BUFFER / 2)
		s->cfg.max_head_bytes = s->cfg.max_head_bytes ? UP_BUFFER / 2 : DEFAULT_MAX_HEAD;
	s->domain_len = strlen(cfg->domain);
	s->localhost =
		strcmp(cfg->domain, "localhost") == 0 ||
		(s->domain_len > 10 && strcmp(cfg->domain + s->domain_len - 10, ".localhost") == 0);
	for (size_t i = 0; i < n_fds; i++)
		s->fds[i] = fds[i];
	for (size_t i = 0; i < n_fds; i++) {
		r = event_add_io(loop, &s->listeners[i], fds[i], EPOLLIN, on_accept, s);
		if (r < 0) {
			for (size_t k = i; k < n_fds; k++)
				close(fds[k]);
			s->n_listeners = i;
			preview_server_free(s);
			return r;
		}
		s->n_listeners++;
	}
	s->accepting = true;
	r = event_add_timer(loop, &s->tick, now_usec() + TICK_USEC, on_tick, s);
	if (r < 0) {
		preview_server_free(s);
		return r;
	}
	manager_metrics_on_write(m, preview_metrics_write, s);
	*ret = s;
	return 0;
}

void preview_server_free(struct preview_server *s)
{
	if (!s)
		return;
	if (s->manager)
		manager_metrics_on_write(s->manager, NULL, NULL);
	while (s->conns)
		conn_free(s->conns);
	for (size_t i = 0; i < s->n_listeners; i++) {
		event_source_free(s->listeners[i]);
		close(s->fds[i]);
	}
	event_source_free(s->tick);
	free(s);
}

void preview_server_revoke(struct preview_server *s, const char *label)
{
	if (!s)
		return;
	for (struct conn *c = s->conns, *next; c; c = next) {
		next = c->next;
		if (c->bound && strcmp(c->target.label, label) == 0)
			conn_close_now(c);
	}
}
