/* SPDX-License-Identifier: MIT */
/* A WebSocket relayed to another worker (worker-relay.h). */
#include "worker-relay.h"

#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include <microhttpd.h>

#define CURL_DISABLE_TYPECHECK
#include <curl/curl.h>

#include "basic/cleanup.h"
#include "api/fleet.h"
#include "api/http.h"
#include "event/event.h"
#include "event/work.h"
#include "proto/ws-codec.h"

#define RELAY_CONNECT_MS 5000L
/* The worker's answer to the opening handshake, from the connect on. */
#define RELAY_HANDSHAKE_MS 15000
/* The answer's head, and the body of an answer other than 101. */
#define RELAY_HEAD_MAX (16u * 1024)
#define RELAY_BODY_MAX (1u << 20)
/* Bytes moved in one go before other sources get their turn. */
#define RELAY_ROUNDS 32

static const char *const answer_headers[] = { "Content-Type", "Retry-After", "Allow", NULL };

struct relay_buf {
	char *d;
	size_t off, len;
};

struct relay {
	struct http_request *req; /* until the 101 (or the answer) is queued */
	const struct fleet *fleet;
	char name[FLEET_NAME_MAX + 1];
	char base[FLEET_URL_MAX + 1];
	char *request; /* the opening handshake for the worker */
	char accept[WS_ACCEPT_SIZE + 1];
	bool pending; /* the handshake is on the pool */
	bool upgraded;

	/* From the pool: the worker's answer. */
	CURL *h;
	long status; /* 0: none */
	char error[1024];
	char *head; /* the answer's head, then what followed it */
	size_t head_len, head_end;
	char *body;
	size_t body_len;
	char content_type[256], retry_after[64], allow[128];

	/* The relay, on the loop. */
	struct event_loop *loop;
	struct http_websocket *up;
	int cfd, wfd;
	struct event_source *csrc, *wsrc, *defer;
	struct relay_buf c2w, w2c;
	bool c_eof, w_eof;
};

/* Relays under way (their handshake or their bytes), on the loop thread only. */
static unsigned relays_open;

static void relay_free(struct relay *r)
{
	event_source_free(r->csrc);
	event_source_free(r->wsrc);
	event_source_free(r->defer);
	if (r->h)
		curl_easy_cleanup(r->h);
	if (r->request)
		explicit_bzero(r->request, strlen(r->request));
	free(r->request);
	free(r->head);
	free(r->body);
	free(r->c2w.d);
	free(r->w2c.d);
	free(r);
	relays_open--;
}

/* Ends the relay: the client's socket back to libmicrohttpd (which closes it), the worker's
 * connection closed. */
static void relay_close(void *userdata)
{
	struct relay *r = userdata;
	struct http_websocket *up = r->up;

	r->up = NULL;
	http_upgrade_close(up);
	relay_free(r);
}

/* ---- the handshake, on a pool thread ------------------------------------------------------ */

static bool relay_stopping(const struct relay *r)
{
	return __atomic_load_n(&r->fleet->stopping, __ATOMIC_RELAXED) != 0;
}

/* Waits until the worker's socket is ready for events or the deadline passes. */
static int relay_wait(struct relay *r, int fd, short events, uint64_t deadline)
{
	struct pollfd p = { .fd = fd, .events = events };
	uint64_t now = now_usec();
	int ms;

	if (relay_stopping(r)) {
		snprintf(r->error, sizeof r->error, "worker %s: the controller is stopping",
			 r->name);
		return -ECANCELED;
	}
	if (now >= deadline) {
		snprintf(r->error, sizeof r->error,
			 "worker %s (%.256s) did not answer: no answer within %d ms", r->name,
			 r->base, RELAY_HANDSHAKE_MS);
		return -ETIMEDOUT;
	}
	ms = (int)MIN((deadline - now) / 1000 + 1, 250u); /* the stop flag is seen soon */
	(void)poll(&p, 1, ms);
	return 0;
}

static void relay_io_error(struct relay *r, const char *what, CURLcode cc)
{
	snprintf(r->error, sizeof r->error, "worker %s (%.256s) did not answer: %s: %s", r->name,
		 r->base, what, curl_easy_strerror(cc));
}

static int relay_send_all(struct relay *r, int fd, const char *p, size_t n, uint64_t deadline)
{
	while (n > 0) {
		size_t sent = 0;
		CURLcode cc = curl_easy_send(r->h, p, n, &sent);

		if (cc == CURLE_AGAIN) {
			if (relay_wait(r, fd, POLLOUT, deadline) < 0)
				return -EIO;
			continue;
		}
		if (cc != CURLE_OK) {
			relay_io_error(r, "sending the handshake", cc);
			return -EIO;
		}
		p += sent;
		n -= sent;
	}
	return 0;
}

/* Reads into buf (cap bytes, len so far) until done(buf, len) or the end; the end is an error
 * unless eof_ok. Returns the bytes read in all. */
static int relay_recv(struct relay *r, int fd, char *buf, size_t cap, size_t *len,
		      bool (*done)(const char *buf, size_t len, void *arg), void *arg,
		      uint64_t deadline, bool eof_ok)
{
	while (!done(buf, *len, arg)) {
		size_t got = 0;
		CURLcode cc;

		if (*len == cap)
			return -E2BIG;
		cc = curl_easy_recv(r->h, buf + *len, cap - *len, &got);
		if (cc == CURLE_AGAIN) {
			if (relay_wait(r, fd, POLLIN, deadline) < 0)
				return -EIO;
			continue;
		}
		if (cc != CURLE_OK) {
			relay_io_error(r, "reading its answer", cc);
			return -EIO;
		}
		if (got == 0) {
			if (eof_ok)
				return 0;
			snprintf(r->error, sizeof r->error,
				 "worker %s (%.256s) closed the connection before its answer",
				 r->name, r->base);
			return -EIO;
		}
		*len += got;
	}
	return 0;
}

static bool head_done(const char *buf, size_t len, void *arg)
{
	return memmem(buf, len, "\r\n\r\n", 4) != NULL;
}

static bool body_done(const char *buf, size_t len, void *arg)
{
	return len >= *(const size_t *)arg;
}

/* The value of header name in the head (lines after the status line), copied into ret. */
static bool head_header(const char *head, const char *name, char *ret, size_t size)
{
	size_t k = strlen(name);

	for (const char *l = strstr(head, "\r\n"); l && l[2] != '\r' && l[2];
	     l = strstr(l + 2, "\r\n")) {
		const char *v = l + 2, *end;

		if (strncasecmp(v, name, k) != 0 || v[k] != ':')
			continue;
		v += k + 1;
		v += strspn(v, " \t");
		end = strstr(v, "\r\n");
		while (end > v && (end[-1] == ' ' || end[-1] == '\t'))
			end--;
		if ((size_t)(end - v) >= size)
			return false;
		memcpy(ret, v, (size_t)(end - v));
		ret[end - v] = '\0';
		return true;
	}
	return false;
}

/* Checks the worker's 101 against the handshake sent; fills r->error when it is not one. */
static bool relay_check_101(struct relay *r)
{
	char v[256];

	if (!head_header(r->head, "Upgrade", v, sizeof v) || strcasecmp(v, "websocket") != 0) {
		snprintf(r->error, sizeof r->error,
			 "worker %s (%.256s) answered 101 without \"Upgrade: websocket\"", r->name,
			 r->base);
		return false;
	}
	if (!head_header(r->head, "Sec-WebSocket-Accept", v, sizeof v) ||
	    strcmp(v, r->accept) != 0) {
		snprintf(r->error, sizeof r->error,
			 "worker %s (%.256s) answered 101 with a wrong Sec-WebSocket-Accept",
			 r->name, r->base);
		return false;
	}
	if (head_header(r->head, "Sec-WebSocket-Extensions", v, sizeof v)) {
		snprintf(r->error, sizeof r->error,
			 "worker %s (%.256s) answered 101 with an extension none asked for",
			 r->name, r->base);
		return false;
	}
	return true;
}

/* An answer other than 101: its body, when it says how long it is. */
static void relay_read_body(struct relay *r, int fd, uint64_t deadline)
{
	char v[32], *end;
	unsigned long long n;
	size_t want, have;

	for (const char *const *h = answer_headers; *h; h++) {
		char *dst = *h == answer_headers[0] ? r->content_type :
			    *h == answer_headers[1] ? r->retry_after :
						      r->allow;
		size_t size = *h == answer_headers[0] ? sizeof r->content_type :
			      *h == answer_headers[1] ? sizeof r->retry_after :
							sizeof r->allow;

		if (!head_header(r->head, *h, dst, size))
			dst[0] = '\0';
	}
	if (!head_header(r->head, "Content-Length", v, sizeof v))
		return; /* chunked or none: the status alone */
	errno = 0;
	n = strtoull(v, &end, 10);
	if (errno || *end || end == v || n > RELAY_BODY_MAX)
		return;
	want = (size_t)n;
	r->body = malloc(want + 1);
	if (!r->body)
		return;
	have = r->head_len - r->head_end;
	if (have > want)
		have = want;
	memcpy(r->body, r->head + r->head_end, have);
	if (relay_recv(r, fd, r->body, want, &have, body_done, &want, deadline, true) < 0) {
		r->error[0] = '\0';
		free(r->body);
		r->body = NULL;
		return;
	}
	r->body_len = have;
	r->body[have] = '\0';
}

static int on_progress(void *userdata, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
		       curl_off_t ulnow)
{
	return relay_stopping(userdata) ? 1 : 0;
}

static void relay_handshake(void *userdata)
{
	struct relay *r = userdata;
	char detail[CURL_ERROR_SIZE] = "";
	bool unix_socket = strncmp(r->base, "unix:", 5) == 0;
	curl_socket_t sock = CURL_SOCKET_BAD;
	uint64_t deadline;
	CURLcode cc;
	char *eoh;
	int code;

	r->h = curl_easy_init();
	if (!r->h) {
		snprintf(r->error, sizeof r->error, "worker %s: out of memory", r->name);
		return;
	}
	curl_easy_setopt(r->h, CURLOPT_URL, unix_socket ? "http://station/" : r->base);
	if (unix_socket)
		curl_easy_setopt(r->h, CURLOPT_UNIX_SOCKET_PATH, r->base + 5);
	curl_easy_setopt(r->h, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(r->h, CURLOPT_CONNECT_ONLY, 1L);
	curl_easy_setopt(r->h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(r->h, CURLOPT_PROXY, "");
	curl_easy_setopt(r->h, CURLOPT_CONNECTTIMEOUT_MS, RELAY_CONNECT_MS);
	curl_easy_setopt(r->h, CURLOPT_ERRORBUFFER, detail);
	curl_easy_setopt(r->h, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(r->h, CURLOPT_XFERINFOFUNCTION, on_progress);
	curl_easy_setopt(r->h, CURLOPT_XFERINFODATA, r);
	cc = curl_easy_perform(r->h);
	if (cc == CURLE_OK)
		cc = curl_easy_getinfo(r->h, CURLINFO_ACTIVESOCKET, &sock);
	curl_easy_setopt(r->h, CURLOPT_ERRORBUFFER, NULL);
	if (cc != CURLE_OK || sock == CURL_SOCKET_BAD) {
		snprintf(r->error, sizeof r->error, "worker %s (%.256s) did not answer: %.200s",
			 r->name, r->base, detail[0] ? detail : curl_easy_strerror(cc));
		return;
	}
	deadline = now_usec() + (uint64_t)RELAY_HANDSHAKE_MS * 1000;
	if (relay_send_all(r, sock, r->request, strlen(r->request), deadline) < 0)
		return;
	r->head = malloc(RELAY_HEAD_MAX + 1);
	if (!r->head) {
		snprintf(r->error, sizeof r->error, "worker %s: out of memory", r->name);
		return;
	}
	code = relay_recv(r, sock, r->head, RELAY_HEAD_MAX, &r->head_len, head_done, NULL, deadline,
			  false);
	if (code == -E2BIG)
		snprintf(r->error, sizeof r->error,
			 "worker %s (%.256s) answered with a head over %u bytes", r->name, r->base,
			 RELAY_HEAD_MAX);
	if (code < 0)
		return;
	r->head[r->head_len] = '\0';
	eoh = memmem(r->head, r->head_len, "\r\n\r\n", 4);
	r->head_end = (size_t)(eoh - r->head) + 4;
	eoh[2] = '\0'; /* the head, with the last header's \r\n */
	if (strncmp(r->head, "HTTP/1.1 ", 9) != 0 || r->head[9] < '1' || r->head[9] > '5' ||
	    r->head[10] < '0' || r->head[10] > '9' || r->head[11] < '0' || r->head[11] > '9' ||
	    (r->head[12] != ' ' && r->head[12] != '\r')) {
		snprintf(r->error, sizeof r->error,
			 "worker %s (%.256s) answered something other than HTTP/1.1", r->name,
			 r->base);
		return;
	}
	r->status = strtol(r->head + 9, NULL, 10);
	if (r->status == 101) {
		if (!relay_check_101(r))
			r->status = 0;
		return;
	}
	if (r->status < 200) {
		snprintf(r->error, sizeof r->error, "worker %s (%.256s) answered %ld", r->name,
			 r->base, r->status);
		r->status = 0;
		return;
	}
	relay_read_body(r, sock, deadline);
}

/* ---- the relay, on the loop --------------------------------------------------------------- */

static void relay_pump(struct relay *r);

static void buf_compact(struct relay_buf *b)
{
	if (b->off > 0 && b->len > 0)
		memmove(b->d, b->d + b->off, b->len);
	b->off = 0;
}

/* A hung-up or failed socket is reported whatever the events asked: the client's ends the
 * relay (nobody is left to deliver to); the worker's is watched no more, and what it sent
 * before is read while there is room for it (to its end: no more waiting on it). */
static int on_client(struct event_source *s, int fd, uint32_t revents, void *userdata)
{
	if (revents & (EPOLLHUP | EPOLLERR))
		relay_close(userdata);
	else
		relay_pump(userdata);
	return 0;
}

static int on_worker(struct event_source *s, int fd, uint32_t revents, void *userdata)
{
	struct relay *r = userdata;

	if (revents & (EPOLLHUP | EPOLLERR)) {
		event_source_free(r->wsrc);
		r->wsrc = NULL;
	}
	relay_pump(r);
	return 0;
}

static int on_defer(struct event_source *s, uint64_t now, void *userdata)
{
	relay_pump(userdata);
	return 0;
}

/* One round each way. <0: an error; 1: something moved; 0: nothing could. */
static int relay_round(struct relay *r)
{
	bool moved = false;
	size_t n;
	ssize_t k;
	CURLcode cc;

	if (!r->c_eof && r->c2w.off + r->c2w.len < WORKER_RELAY_BUFFER) {
		k = recv(r->cfd, r->c2w.d + r->c2w.off + r->c2w.len,
			 WORKER_RELAY_BUFFER - r->c2w.off - r->c2w.len, MSG_DONTWAIT);
		if (k > 0)
			r->c2w.len += (size_t)k;
		else if (k == 0)
			r->c_eof = true;
		else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
			return -errno;
		moved |= k >= 0;
	}
	if (r->c2w.len > 0) {
		n = 0;
		cc = curl_easy_send(r->h, r->c2w.d + r->c2w.off, r->c2w.len, &n);
		if (cc != CURLE_OK && cc != CURLE_AGAIN)
			return -EIO;
		r->c2w.off += n;
		r->c2w.len -= n;
		if (r->c2w.len == 0)
			r->c2w.off = 0;
		moved |= n > 0;
	}
	if (!r->w_eof && r->w2c.off + r->w2c.len < WORKER_RELAY_BUFFER) {
		n = 0;
		cc = curl_easy_recv(r->h, r->w2c.d + r->w2c.off + r->w2c.len,
				    WORKER_RELAY_BUFFER - r->w2c.off - r->w2c.len, &n);
		if (cc == CURLE_OK && n == 0)
			r->w_eof = true;
		else if (cc != CURLE_OK && cc != CURLE_AGAIN)
			return -EIO;
		r->w2c.len += n;
		moved |= cc == CURLE_OK;
	}
	if (r->w2c.len > 0) {
		k = send(r->cfd, r->w2c.d + r->w2c.off, r->w2c.len, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
			return -errno;
		if (k > 0) {
			r->w2c.off += (size_t)k;
			r->w2c.len -= (size_t)k;
			if (r->w2c.len == 0)
				r->w2c.off = 0;
			moved = true;
		}
	}
	/* Room at the end for the next read (a full buffer with room at its start). */
	if (r->c2w.off > 0 && r->c2w.off + r->c2w.len == WORKER_RELAY_BUFFER)
		buf_compact(&r->c2w);
	if (r->w2c.off > 0 && r->w2c.off + r->w2c.len == WORKER_RELAY_BUFFER)
		buf_compact(&r->w2c);
	return moved ? 1 : 0;
}

static void relay_pump(struct relay *r)
{
	uint32_t cev, wev;
	int i, k = 0;

	for (i = 0; i < RELAY_ROUNDS; i++) {
		k = relay_round(r);
		if (k < 0 || (r->w_eof && r->w2c.len == 0) || (r->c_eof && r->c2w.len == 0)) {
			relay_close(r);
			return;
		}
		if (k == 0)
			break;
	}
	/* A side at its end is watched no more (a hung-up socket would wake the loop forever);
	 * the other side's buffer drains, then both close. */
	cev = (!r->c_eof && r->c2w.off + r->c2w.len < WORKER_RELAY_BUFFER ? EPOLLIN : 0) |
	      (r->w2c.len > 0 ? EPOLLOUT : 0);
	wev = (!r->w_eof && r->w2c.off + r->w2c.len < WORKER_RELAY_BUFFER ? EPOLLIN : 0) |
	      (r->c2w.len > 0 ? EPOLLOUT : 0);
	if (r->c_eof && r->csrc) {
		event_source_free(r->csrc);
		r->csrc = NULL;
	}
	if (r->w_eof && r->wsrc) {
		event_source_free(r->wsrc);
		r->wsrc = NULL;
	}
	if ((r->csrc && event_source_set_io_events(r->csrc, cev) < 0) ||
	    (r->wsrc && event_source_set_io_events(r->wsrc, wev) < 0)) {
		relay_close(r);
		return;
	}
	/* Still moving after its rounds: again soon (libcurl may hold decrypted bytes that no
	 * readable socket announces). */
	(void)event_source_set_time(r->defer, k > 0 ? now_usec() : UINT64_MAX);
}

/* MHD sent the 101 and hands over the client's socket. */
static void relay_attach(void *userdata, struct http_websocket *u, int fd, const char *extra,
			 size_t extra_len)
{
	struct relay *r = userdata;

	r->cfd = fd;
	if (extra_len > WORKER_RELAY_BUFFER ||
	    event_add_io(r->loop, &r->csrc, fd, EPOLLIN, on_client, r) < 0 ||
	    event_add_io(r->loop, &r->wsrc, r->wfd, EPOLLIN, on_worker, r) < 0 ||
	    event_add_timer(r->loop, &r->defer, UINT64_MAX, on_defer, r) < 0) {
		relay_close(r);
		return;
	}
	memcpy(r->c2w.d, extra, extra_len);
	r->c2w.len = extra_len;
	relay_pump(r);
}

static const struct http_upgrade_ops relay_ops = {
	.attach = relay_attach,
	.close = relay_close,
};

/* ---- the request -------------------------------------------------------------------------- */

/* The request's state until its answer: freed here unless the handshake is still out (then
 * its done frees it) or the relay took it over. */
static void relay_release(void *userdata)
{
	struct relay *r = userdata;

	r->req = NULL;
	if (!r->pending && !r->upgraded)
		relay_free(r);
}

static int relay_reply_answer(struct http_request *req, struct relay *r)
{
	struct MHD_Response *resp;
	int ret;

	if (!r->body)
		return http_reply_status(req, (unsigned)r->status, NULL,
					 "worker %s answered %ld to the WebSocket", r->name,
					 r->status);
	resp = MHD_create_response_from_buffer(r->body_len, r->body, MHD_RESPMEM_MUST_COPY);
	if (!resp)
		return -ENOMEM;
	if ((r->content_type[0] &&
	     MHD_add_response_header(resp, "Content-Type", r->content_type) != MHD_YES) ||
	    (r->retry_after[0] &&
	     MHD_add_response_header(resp, "Retry-After", r->retry_after) != MHD_YES) ||
	    (r->allow[0] && MHD_add_response_header(resp, "Allow", r->allow) != MHD_YES) ||
	    MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff") != MHD_YES ||
	    MHD_add_response_header(resp, "Content-Security-Policy",
				    "sandbox; default-src 'none'") != MHD_YES) {
		MHD_destroy_response(resp);
		return -ENOMEM;
	}
	ret = http_reply_response(req, (unsigned)r->status, resp);
	MHD_destroy_response(resp);
	return ret;
}

static int relay_resumed(struct http_request *req)
{
	struct relay *r = http_request_state(req);
	curl_socket_t sock = CURL_SOCKET_BAD;
	int ret;

	if (!r)
		return http_reply_status(req, 500, NULL, "the relay went away");
	if (r->status == 0) {
		ret = http_reply_status(req, strstr(r->error, "no answer within") ? 504 : 502, NULL,
					"%s", r->error);
		http_request_set_state(req, NULL, NULL);
		return ret;
	}
	if (r->status != 101) {
		ret = relay_reply_answer(req, r);
		http_request_set_state(req, NULL, NULL);
		return ret;
	}
	r->c2w.d = malloc(WORKER_RELAY_BUFFER);
	r->w2c.d = malloc(WORKER_RELAY_BUFFER);
	if (!r->c2w.d || !r->w2c.d ||
	    curl_easy_getinfo(r->h, CURLINFO_ACTIVESOCKET, &sock) != CURLE_OK ||
	    sock == CURL_SOCKET_BAD) {
		http_request_set_state(req, NULL, NULL);
		return http_reply_status(req, 500, NULL, "out of memory");
	}
	r->wfd = sock;
	/* What the worker sent right after its 101 goes first. */
	r->w2c.len = r->head_len - r->head_end;
	memcpy(r->w2c.d, r->head + r->head_end, r->w2c.len);
	ret = http_reply_upgrade(req, &relay_ops, r, &r->up);
	if (ret < 0) {
		http_request_set_state(req, NULL, NULL);
		return http_reply_status(req, 500, NULL, "out of memory");
	}
	r->upgraded = true; /* relay_close() frees it from here on */
	http_request_set_state(req, NULL, NULL);
	return 0;
}

static void relay_handshake_done(void *userdata, bool cancelled)
{
	struct relay *r = userdata;

	r->pending = false;
	if (cancelled && !r->error[0]) {
		snprintf(r->error, sizeof r->error, "worker %s: the controller is stopping",
			 r->name);
		r->status = 0;
	}
	if (!r->req)
		relay_free(r);
	else
		http_request_resume(r->req);
}

/* The user's token: Authorization as received, else the "bearer." subprotocol offer. The
 * offers passed on are the others. */
static int relay_request(struct relay *r, struct http_request *req, const char *target,
			 const char *host, const char *prefix)
{
	const char *auth = http_request_header(req, "Authorization");
	const char *v = http_request_header(req, "Sec-WebSocket-Protocol");
	const char *key = http_request_header(req, "Sec-WebSocket-Key");
	_cleanup_free_ char *offers = strdup(""), *bearer = NULL, *authline = NULL;
	int n;

	if (!offers || !key)
		return -ENOMEM;
	while (v && *v) {
		size_t k;
		char *o;

		v += strspn(v, " \t,");
		k = strcspn(v, " \t,");
		if (k == 0)
			break;
		if (k > 7 && strncmp(v, "bearer.", 7) == 0) {
			if (!bearer && !(bearer = strndup(v + 7, k - 7)))
				return -ENOMEM;
		} else {
			if (asprintf(&o, "%s%s%.*s", offers, offers[0] ? ", " : "", (int)k, v) < 0)
				return -ENOMEM;
			free(offers);
			offers = o;
		}
		v += k;
	}
	if (auth && asprintf(&authline, "Authorization: %s\r\n", auth) < 0)
		authline = NULL, auth = NULL;
	else if (!auth && bearer && asprintf(&authline, "Authorization: Bearer %s\r\n", bearer) < 0)
		authline = NULL;
	if (bearer)
		explicit_bzero(bearer, strlen(bearer));
	if ((auth || bearer) && !authline)
		return -ENOMEM;
	n = asprintf(&r->request,
		     "GET %s%s HTTP/1.1\r\n"
		     "Host: %s\r\n"
		     "Upgrade: websocket\r\n"
		     "Connection: Upgrade\r\n"
		     "Sec-WebSocket-Key: %s\r\n"
		     "Sec-WebSocket-Version: 13\r\n"
		     "%s%s%s%s"
		     "\r\n",
		     prefix, target, host, key, offers[0] ? "Sec-WebSocket-Protocol: " : "", offers,
		     offers[0] ? "\r\n" : "", authline ?: "");
	if (authline)
		explicit_bzero(authline, strlen(authline));
	return n < 0 ? -ENOMEM : 0;
}

int worker_relay_start(struct http_request *req, const struct fleet_worker *wk, const char *target)
{
	struct fleet *fleet = http_request_fleet(req);
	const char *key = http_request_header(req, "Sec-WebSocket-Key");
	char host[FLEET_URL_MAX + 1] = "station";
	const char *prefix = "";
	struct relay *r;

	if (relays_open >= WORKER_RELAY_MAX)
		return http_reply_status(req, 503, NULL,
					 "too many WebSockets relayed to workers at once (%u)",
					 WORKER_RELAY_MAX);
	if (strncmp(wk->url, "unix:", 5) != 0) {
		/* "http://host:port/prefix": Host is host:port, the path goes after prefix. */
		const char *a = strstr(wk->url, "://");

		a = a ? a + 3 : wk->url;
		snprintf(host, sizeof host, "%.*s", (int)strcspn(a, "/"), a);
		prefix = a + strcspn(a, "/");
	}
	r = calloc(1, sizeof *r);
	if (!r)
		return http_reply_status(req, 500, NULL, "out of memory");
	relays_open++;
	r->req = req;
	r->fleet = fleet;
	r->cfd = r->wfd = -1;
	r->loop = http_request_loop(req);
	snprintf(r->name, sizeof r->name, "%s", wk->name);
	snprintf(r->base, sizeof r->base, "%s", wk->url);
	if (!key || ws_accept_key(key, r->accept) < 0 ||
	    relay_request(r, req, target, host, prefix) < 0) {
		relay_free(r);
		return http_reply_status(req, 500, NULL, "out of memory");
	}
	r->accept[WS_ACCEPT_SIZE] = '\0';
	http_request_set_state(req, r, relay_release);
	if (event_work_queue(fleet->pool, relay_handshake, relay_handshake_done, r) < 0) {
		http_request_set_state(req, NULL, NULL);
		return http_reply_status(req, 503, NULL, "worker %s: the controller is stopping",
					 wk->name);
	}
	r->pending = true;
	if (http_request_suspend(req, relay_resumed) < 0) {
		/* The handshake finishes on its own; its done frees the relay. */
		http_request_set_state(req, NULL, NULL);
		return http_reply_status(req, 500, NULL, "cannot wait for worker %s", wk->name);
	}
	return 0;
}
