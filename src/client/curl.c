/* SPDX-License-Identifier: MIT */
/* The transport over TCP and TLS (http://, https:// endpoints): libcurl, loaded with dlopen()
 * at the first such request, so a program that only talks to the unix socket never maps it.
 * One easy handle per client, reused so the connection stays open between calls. */

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#define CURL_DISABLE_TYPECHECK
#include <curl/curl.h>

#include "basic/cleanup.h"
#include "client-internal.h"

#define LIBCURL_SONAME "libcurl.so.4"

/* The calls used, resolved once per process. */
static struct {
	CURL *(*easy_init)(void);
	void (*easy_cleanup)(CURL *h);
	void (*easy_reset)(CURL *h);
	CURLcode (*easy_setopt)(CURL *h, CURLoption o, ...);
	CURLcode (*easy_perform)(CURL *h);
	CURLcode (*easy_getinfo)(CURL *h, CURLINFO i, ...);
	const char *(*easy_strerror)(CURLcode cc);
	struct curl_slist *(*slist_append)(struct curl_slist *l, const char *s);
	void (*slist_free_all)(struct curl_slist *l);
} api;
static char load_error[512];
static pthread_once_t load_once = PTHREAD_ONCE_INIT;

struct client_curl {
	CURL *h;
	char error[CURL_ERROR_SIZE];
	/* The deadlines of the transfer under way (client-internal.h): its answer's head must
	 * come within head_ms of the request's last byte sent; then no silence may last the
	 * answer deadline (plus the server's heartbeat interval in an event stream). */
	uint64_t head_ms;
	uint64_t head_deadline; /* CLOCK_MONOTONIC ms */
	uint64_t last_byte;	/* when a byte last came or went */
	curl_off_t moved;	/* bytes that came and went so far */
	long head_status;	/* the status of the head being received */
	bool head_done;		/* a final (not 1xx) head arrived */
	bool stream;
	uint64_t missed_ms; /* > 0: that deadline passed and stopped the transfer */
};

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void libcurl_load(void)
{
	static const struct {
		const char *name;
		size_t offset;
	} symbols[] = {
		{ "curl_easy_init", offsetof(typeof(api), easy_init) },
		{ "curl_easy_cleanup", offsetof(typeof(api), easy_cleanup) },
		{ "curl_easy_reset", offsetof(typeof(api), easy_reset) },
		{ "curl_easy_setopt", offsetof(typeof(api), easy_setopt) },
		{ "curl_easy_perform", offsetof(typeof(api), easy_perform) },
		{ "curl_easy_getinfo", offsetof(typeof(api), easy_getinfo) },
		{ "curl_easy_strerror", offsetof(typeof(api), easy_strerror) },
		{ "curl_slist_append", offsetof(typeof(api), slist_append) },
		{ "curl_slist_free_all", offsetof(typeof(api), slist_free_all) },
	};
	void *lib = dlopen(LIBCURL_SONAME, RTLD_NOW | RTLD_LOCAL);

	if (!lib) {
		const char *e = dlerror();

		snprintf(load_error, sizeof load_error, "%s", e ? e : "not found");
		return;
	}
	for (size_t i = 0; i < ELEMENTSOF(symbols); i++) {
		void *f = dlsym(lib, symbols[i].name);

		if (!f) {
			snprintf(load_error, sizeof load_error, "%s has no %s", LIBCURL_SONAME,
				 symbols[i].name);
			return; /* api.easy_init stays NULL: never half used */
		}
		memcpy((char *)&api + symbols[i].offset, &f, sizeof f);
	}
}

/* The loaded library and this client's handle, or the error recorded. */
static int curl_open(struct station_client *c)
{
	struct client_curl *t;

	if (c->curl)
		return 0;
	pthread_once(&load_once, libcurl_load);
	if (load_error[0])
		return client_error(
			c, -EOPNOTSUPP,
			"%s needs libcurl (%s) for an http:// or https:// endpoint, and "
			"it cannot be loaded: %s",
			c->endpoint, LIBCURL_SONAME, load_error);
	t = calloc(1, sizeof(*t));
	if (!t)
		return client_error(c, -ENOMEM, "out of memory");
	t->h = api.easy_init();
	if (!t->h) {
		free(t);
		return client_error(c, -ENOMEM, "out of memory");
	}
	c->curl = t;
	return 0;
}

void client_curl_free(struct client_curl *t)
{
	if (!t)
		return;
	api.easy_cleanup(t->h);
	free(t);
}

static void slist_freep(struct curl_slist **l)
{
	if (*l)
		api.slist_free_all(*l);
}

static size_t response_write(char *ptr, size_t size, size_t nmemb, void *userdata)
{
	struct client_response *r = userdata;
	size_t n = size * nmemb;

	if (r->status == 0) {
		api.easy_getinfo(r->c->curl->h, CURLINFO_RESPONSE_CODE, &r->status);
		r->c->transfer_status = r->status;
	}
	return client_response_data(r, ptr, n) < 0 ? 0 : n;
}

static int transfer_progress(void *userdata, curl_off_t dltotal, curl_off_t dlnow,
			     curl_off_t ultotal, curl_off_t ulnow)
{
	struct station_client *c = userdata;
	struct client_curl *t = c->curl;
	uint64_t now = now_ms(),
		 idle_ms = c->timeout_ms + (t->stream ? CLIENT_SSE_HEARTBEAT_MS : 0);

	if (dlnow + ulnow != t->moved) {
		t->moved = dlnow + ulnow;
		t->last_byte = now;
		if (!t->head_done)
			t->head_deadline = now + t->head_ms; /* an upload under way */
	}
	if (!t->head_done && now >= t->head_deadline)
		t->missed_ms = t->head_ms;
	else if (t->head_done && now - t->last_byte >= idle_ms)
		t->missed_ms = idle_ms;
	if (t->missed_ms > 0)
		return 1;
	return c->interrupt && c->interrupt(c->interrupt_userdata) ? 1 : 0;
}

static int curl_connect_error(struct station_client *c)
{
	long os_errno = 0;

	api.easy_getinfo(c->curl->h, CURLINFO_OS_ERRNO, &os_errno);
	if (os_errno == EACCES || os_errno == EPERM)
		return client_error(c, -EACCES, "cannot connect to %s: %s", c->endpoint,
				    strerror((int)os_errno));
	return client_unreachable(c, -ECONNREFUSED,
				  os_errno > 0 ? strerror((int)os_errno) : c->curl->error);
}

static int curl_result_to_error(struct station_client *c, CURLcode cc)
{
	const char *why = c->curl->error[0] ? c->curl->error : api.easy_strerror(cc);

	switch (cc) {
	case CURLE_COULDNT_CONNECT:
	case CURLE_COULDNT_RESOLVE_HOST:
	case CURLE_COULDNT_RESOLVE_PROXY:
	case CURLE_OPERATION_TIMEDOUT: /* only the connect phase has a timeout */
		return curl_connect_error(c);
	case CURLE_ABORTED_BY_CALLBACK:
		if (c->curl->missed_ms > 0)
			return client_timed_out(c, c->curl->missed_ms);
		return client_error(c, -EINTR, "interrupted");
	case CURLE_OUT_OF_MEMORY:
		return client_error(c, -ENOMEM, "out of memory");
	case CURLE_GOT_NOTHING:
	case CURLE_RECV_ERROR:
	case CURLE_SEND_ERROR:
	case CURLE_PARTIAL_FILE:
		return client_error(c, -ECONNRESET, "connection to %s lost: %s", c->endpoint, why);
	case CURLE_UNSUPPORTED_PROTOCOL:
	case CURLE_URL_MALFORMAT:
		return client_error(c, -EINVAL, "bad request URL for %s: %s", c->endpoint, why);
	default:
		return client_error(c, -EIO, "request to %s failed: %s", c->endpoint, why);
	}
}

static int slist_add(struct curl_slist **l, const char *h)
{
	struct curl_slist *n;

	if (!h)
		return 0;
	n = api.slist_append(*l, h);
	if (!n)
		return -ENOMEM;
	*l = n;
	return 0;
}

static int curl_headers(struct station_client *c, const struct client_io *io,
			struct curl_slist **ret)
{
	_cleanup_(slist_freep) struct curl_slist *l = NULL;
	bool upload = io->upload_fd >= 0;
	const char *h[4] = {
		/* No 100-continue round trip for bodies in memory; an upload from an fd waits for
		 * it, so a refusal (404, 409) comes before the body is sent. */
		upload ? "Expect: 100-continue" : "Expect:",
		io->accept ? io->accept : "Accept: application/json",
		io->content_type ? io->content_type : "Content-Type:",
		c->auth_header,
	};

	for (size_t i = 0; i < ELEMENTSOF(h); i++)
		if (slist_add(&l, h[i]) < 0)
			return -ENOMEM;
	for (const char *const *x = io->headers; x && *x; x++)
		if (slist_add(&l, *x) < 0)
			return -ENOMEM;
	*ret = TAKE_PTR(l);
	return 0;
}

static size_t upload_read(char *buf, size_t size, size_t nitems, void *userdata)
{
	struct client_response *r = userdata;

	for (;;) {
		ssize_t k = read(r->io->upload_fd, buf, size * nitems);

		if (k >= 0)
			return (size_t)k;
		if (errno == EINTR && r->c->interrupt &&
		    r->c->interrupt(r->c->interrupt_userdata)) {
			r->upload_error = -EINTR; /* a signal, and the caller wants to stop */
			return CURL_READFUNC_ABORT;
		}
		if (errno == EINTR)
			continue;
		r->upload_error = -errno;
		return CURL_READFUNC_ABORT;
	}
}

static size_t response_header(char *buf, size_t size, size_t nitems, void *userdata)
{
	struct client_response *r = userdata;
	struct client_curl *t = r->c->curl;
	size_t n = size * nitems;

	t->last_byte = now_ms();
	if (n >= 5 && strncmp(buf, "HTTP/", 5) == 0) {
		const char *sp = memchr(buf, ' ', n);

		t->head_status = sp ? strtol(sp + 1, NULL, 10) : 0;
	} else if ((n == 2 && buf[0] == '\r') || (n == 1 && buf[0] == '\n'))
		t->head_done = t->head_status >= 200;
	if (!r->etag)
		return n;
	if (n >= 5 && strncmp(buf, "HTTP/", 5) == 0)
		r->etag[0] = '\0'; /* a new response (after a 100 Continue) */
	else if (n > 5 && strncasecmp(buf, "etag:", 5) == 0)
		client_response_etag(r, buf + 5, n - 5);
	return n;
}

static void curl_setup_body(CURL *h, const struct client_io *io, struct client_response *r)
{
	if (io->upload_fd >= 0) {
		api.easy_setopt(h, CURLOPT_UPLOAD, 1L);
		api.easy_setopt(h, CURLOPT_READFUNCTION, upload_read);
		api.easy_setopt(h, CURLOPT_READDATA, r);
		api.easy_setopt(h, CURLOPT_INFILESIZE_LARGE, (curl_off_t)io->upload_size);
	} else if (io->data || strcmp(io->method, "POST") == 0) {
		api.easy_setopt(h, CURLOPT_POSTFIELDS, io->data ? (const char *)io->data : "");
		api.easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE,
				(curl_off_t)(io->data ? io->size : 0));
	} else {
		api.easy_setopt(h, CURLOPT_HTTPGET, 1L);
	}
	if (strcmp(io->method, "GET") != 0 && strcmp(io->method, "POST") != 0)
		api.easy_setopt(h, CURLOPT_CUSTOMREQUEST, io->method);
}

int client_curl_perform(struct station_client *c, const struct client_io *io,
			struct client_response *r)
{
	_cleanup_(slist_freep) struct curl_slist *headers = NULL;
	_cleanup_free_ char *url = NULL;
	CURLcode cc;
	CURL *h;
	int k;

	k = curl_open(c);
	if (k < 0)
		return k;
	h = c->curl->h;
	if (asprintf(&url, "%s%s", c->base_url, io->path) < 0)
		return client_error(c, -ENOMEM, "out of memory");
	if (curl_headers(c, io, &headers) < 0)
		return client_error(c, -ENOMEM, "out of memory");

	/* Resets options only: the open connection stays for the next call. */
	api.easy_reset(h);
	api.easy_setopt(h, CURLOPT_URL, url);
	api.easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
	api.easy_setopt(h, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
	api.easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	api.easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
	api.easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS,
			(long)MIN((uint64_t)CLIENT_CONNECT_TIMEOUT_MS, c->timeout_ms));
	api.easy_setopt(h, CURLOPT_ERRORBUFFER, c->curl->error);
	api.easy_setopt(h, CURLOPT_HTTPHEADER, headers);
	api.easy_setopt(h, CURLOPT_WRITEFUNCTION, response_write);
	api.easy_setopt(h, CURLOPT_WRITEDATA, r);
	api.easy_setopt(h, CURLOPT_HEADERFUNCTION, response_header);
	api.easy_setopt(h, CURLOPT_HEADERDATA, r);
	api.easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
	api.easy_setopt(h, CURLOPT_XFERINFOFUNCTION, transfer_progress);
	api.easy_setopt(h, CURLOPT_XFERINFODATA, c);
	curl_setup_body(h, io, r);

	c->curl->error[0] = '\0';
	c->curl->head_ms = client_answer_ms(c, io->path);
	c->curl->head_deadline = now_ms() + c->curl->head_ms;
	c->curl->last_byte = now_ms();
	c->curl->moved = 0;
	c->curl->head_status = 0;
	c->curl->head_done = false;
	c->curl->stream = io->accept && strcasestr(io->accept, "text/event-stream");
	c->curl->missed_ms = 0;
	cc = api.easy_perform(h);
	if (r->body_error < 0 || r->stop < 0 || r->upload_error < 0)
		return -EIO; /* client_perform() says why */
	/* A server may refuse an upload while its body is still being sent, then close: its
	 * answer is what counts. */
	if (cc == CURLE_SEND_ERROR && r->status >= 400)
		cc = CURLE_OK;
	if (cc != CURLE_OK)
		return curl_result_to_error(c, cc);
	api.easy_getinfo(h, CURLINFO_RESPONSE_CODE, &r->status);
	c->transfer_status = r->status;
	return 0;
}
