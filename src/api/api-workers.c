/* SPDX-License-Identifier: MIT */
/* GET /v1/workers and /v1/workers/NAME/v1/... (docs/api.md, "Workers").
 *
 * The security contract: a request names a worker, never a URL; only the workers of --workers
 * are reached, each at the URL the operator gave. The request goes on with the user's own
 * Authorization header as received (never a token of this controller), so the remote worker
 * decides what the user may do there. A forwarded path starts with /v1/, holds only path
 * characters and no dot segments, and never names /v1/workers again (no forwarding of
 * forwarding). Requests and answers are bounded: the body by max_body_bytes as for any
 * request, the answer by FORWARD_MAX_ANSWER, every call by a timeout, and streams (SSE,
 * WebSockets) are refused rather than held. Remote calls run on the fleet's own pool (fleet.h),
 * never on the loop. */
#include <errno.h>
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define CURL_DISABLE_TYPECHECK
#include <curl/curl.h>

#include "basic/cleanup.h"
#include "basic/placement.h"
#include "api/auth.h"
#include "api/fleet.h"
#include "api/http.h"
#include "api/router.h"
#include "api/worker-relay.h"
#include "daemon/manager.h"
#include "event/work.h"

/* GET /v1/worker of each worker for the list. */
#define PROBE_CONNECT_MS 3000L
#define PROBE_TIMEOUT_MS 5000L
#define PROBE_MAX_ANSWER (1u << 20)
/* A forwarded call: its waitMs long-poll fits in the time left after max_wait_ms. */
#define FORWARD_CONNECT_MS 5000L
#define FORWARD_EXTRA_MS 30000L
#define FORWARD_MAX_ANSWER (64u << 20)

/* The request headers passed on (Authorization as received: the user's own token) and the
 * answer's headers passed back. Everything else, the hop-by-hop ones included, stays. */
static const char *const request_headers[] = {
	"Authorization", "Content-Type", "Accept",	    "Range",
	"If-None-Match", "If-Match",	 "Idempotency-Key", NULL,
};
static const char *const answer_headers[] = {
	"Content-Type", "Content-Range", "Accept-Ranges", "ETag", "Last-Modified",
	"Retry-After",	"Cache-Control", "Allow",	  NULL,
};

struct remote_call {
	struct remote_wait *wait;
	size_t index;
	const struct fleet *fleet;
	char name[FLEET_NAME_MAX + 1];
	char base[FLEET_URL_MAX + 1];
	char *target; /* path and query */
	char *method;
	struct curl_slist *headers;
	void *body;
	size_t body_len;
	long connect_ms, timeout_ms;
	size_t max_answer;

	long status; /* 0: no answer */
	char *answer;
	size_t answer_len;
	bool answer_too_large;
	struct curl_slist *answer_headers;
	char error[1024];
};

/* A suspended request waiting for its calls; outlives the request when it goes away first. */
struct remote_wait {
	struct http_request *req; /* NULL once the request is gone */
	unsigned pending;
	size_t n;
	struct remote_call *calls[FLEET_MAX];
	json_t *self;		      /* /v1/workers: this controller's entry */
	struct fleet_worker *workers; /* /v1/workers: fleet_list()'s */
	json_t *create;		      /* a placed create: its fields, without "placement" */
};

static void remote_call_free(struct remote_call *c)
{
	if (!c)
		return;
	free(c->target);
	free(c->method);
	curl_slist_free_all(c->headers);
	if (c->body)
		explicit_bzero(c->body, c->body_len);
	free(c->body);
	free(c->answer);
	curl_slist_free_all(c->answer_headers);
	free(c);
}

static void remote_wait_free(struct remote_wait *w)
{
	for (size_t i = 0; i < w->n; i++)
		remote_call_free(w->calls[i]);
	json_decref(w->self);
	json_decref(w->create);
	free(w->workers);
	free(w);
}

/* The request's state: the request goes; the wait stays until its last call is back. */
static void remote_wait_release(void *userdata)
{
	struct remote_wait *w = userdata;

	w->req = NULL;
	if (w->pending == 0)
		remote_wait_free(w);
}

/* ---- on a pool thread --------------------------------------------------------------------- */

static size_t on_answer(char *data, size_t size, size_t nmemb, void *userdata)
{
	struct remote_call *c = userdata;
	size_t n = size * nmemb;
	char *p;

	if (n > c->max_answer - c->answer_len) {
		c->answer_too_large = true;
		return 0;
	}
	p = realloc(c->answer, c->answer_len + n + 1);
	if (!p)
		return 0;
	c->answer = p;
	memcpy(c->answer + c->answer_len, data, n);
	c->answer_len += n;
	c->answer[c->answer_len] = '\0';
	return n;
}

static size_t on_header(char *data, size_t size, size_t nmemb, void *userdata)
{
	struct remote_call *c = userdata;
	size_t n = size * nmemb;
	char line[1024];

	if (n >= sizeof line)
		return n;
	memcpy(line, data, n);
	line[n] = '\0';
	line[strcspn(line, "\r\n")] = '\0';
	if (strncmp(line, "HTTP/", 5) == 0) { /* a new answer (after a 100): start again */
		curl_slist_free_all(c->answer_headers);
		c->answer_headers = NULL;
		return n;
	}
	for (const char *const *h = answer_headers; *h; h++) {
		size_t k = strlen(*h);
		struct curl_slist *l;

		if (strncasecmp(line, *h, k) != 0 || line[k] != ':')
			continue;
		l = curl_slist_append(c->answer_headers, line);
		if (l)
			c->answer_headers = l;
	}
	return n;
}

static int on_progress(void *userdata, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
		       curl_off_t ulnow)
{
	const struct remote_call *c = userdata;

	return __atomic_load_n(&c->fleet->stopping, __ATOMIC_RELAXED) ? 1 : 0;
}

/* "connection refused", "no answer within 5000 ms", or libcurl's own words. */
static void call_error(struct remote_call *c, CURL *h, CURLcode cc, const char *detail)
{
	long os = 0;
	const char *why;
	char buf[128];

	curl_easy_getinfo(h, CURLINFO_OS_ERRNO, &os);
	if (cc == CURLE_OPERATION_TIMEDOUT) {
		snprintf(buf, sizeof buf, "no answer within %ld ms", c->timeout_ms);
		why = buf;
	} else if (os > 0 && (cc == CURLE_COULDNT_CONNECT || cc == CURLE_RECV_ERROR ||
			      cc == CURLE_SEND_ERROR)) {
		snprintf(buf, sizeof buf, "%s", strerror((int)os));
		if (buf[0] >= 'A' && buf[0] <= 'Z')
			buf[0] = (char)(buf[0] - 'A' + 'a');
		why = buf;
	} else if (c->answer_too_large) {
		snprintf(buf, sizeof buf, "its answer is over %zu bytes", c->max_answer);
		why = buf;
	} else {
		why = detail[0] ? detail : curl_easy_strerror(cc);
	}
	snprintf(c->error, sizeof c->error, "worker %s (%.256s) did not answer: %.200s", c->name,
		 c->base, why);
}

static void remote_call_run(void *userdata)
{
	struct remote_call *c = userdata;
	char url[FLEET_URL_MAX + 64], detail[CURL_ERROR_SIZE] = "";
	_cleanup_free_ char *full = NULL;
	bool unix_socket = strncmp(c->base, "unix:", 5) == 0;
	CURL *h = curl_easy_init();
	CURLcode cc;

	if (!h) {
		snprintf(c->error, sizeof c->error, "worker %s: out of memory", c->name);
		return;
	}
	snprintf(url, sizeof url, "%s", unix_socket ? "http://station" : c->base);
	if (asprintf(&full, "%s%s", url, c->target) < 0) {
		curl_easy_cleanup(h);
		snprintf(c->error, sizeof c->error, "worker %s: out of memory", c->name);
		return;
	}
	curl_easy_setopt(h, CURLOPT_URL, full);
	if (unix_socket)
		curl_easy_setopt(h, CURLOPT_UNIX_SOCKET_PATH, c->base + 5);
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_PROXY, "");
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, c->connect_ms);
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, c->timeout_ms);
	curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, c->method);
	/* A HEAD's answer has no body: libcurl must not wait for one. */
	if (strcmp(c->method, "HEAD") == 0)
		curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
	if (c->body_len > 0 || strcmp(c->method, "POST") == 0 || strcmp(c->method, "PUT") == 0 ||
	    strcmp(c->method, "PATCH") == 0) {
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, c->body ?: "");
		curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)c->body_len);
	}
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, c->headers);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_answer);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, c);
	curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(h, CURLOPT_HEADERDATA, c);
	curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
	curl_easy_setopt(h, CURLOPT_XFERINFODATA, c);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, detail);
	cc = curl_easy_perform(h);
	if (cc == CURLE_OK)
		curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &c->status);
	else
		call_error(c, h, cc, detail);
	curl_easy_cleanup(h);
}

/* ---- back on the loop --------------------------------------------------------------------- */

static void remote_call_done(void *userdata, bool cancelled)
{
	struct remote_call *c = userdata;
	struct remote_wait *w = c->wait;

	if (cancelled && !c->error[0])
		snprintf(c->error, sizeof c->error, "worker %s: the controller is stopping",
			 c->name);
	w->pending--;
	if (w->pending > 0)
		return;
	if (!w->req)
		remote_wait_free(w);
	else
		http_request_resume(w->req);
}

static struct remote_call *remote_call_new(struct remote_wait *w, const struct fleet *fleet,
					   const struct fleet_worker *worker, const char *method,
					   const char *target)
{
	struct remote_call *c = calloc(1, sizeof *c);

	if (!c)
		return NULL;
	c->wait = w;
	c->fleet = fleet;
	snprintf(c->name, sizeof c->name, "%s", worker->name);
	snprintf(c->base, sizeof c->base, "%s", worker->url);
	c->method = strdup(method);
	c->target = strdup(target);
	if (!c->method || !c->target) {
		remote_call_free(c);
		return NULL;
	}
	return c;
}

static int add_header(struct remote_call *c, const char *name, const char *value)
{
	_cleanup_free_ char *line = NULL;
	struct curl_slist *l;

	if (asprintf(&line, "%s: %s", name, value) < 0)
		return -ENOMEM;
	l = curl_slist_append(c->headers, line);
	explicit_bzero(line, strlen(line));
	if (!l)
		return -ENOMEM;
	c->headers = l;
	return 0;
}

/* Takes the request's headers worth passing on; "Expect:" keeps libcurl from waiting on a
 * 100 Continue the remote never sends. */
static int copy_headers(struct remote_call *c, struct http_request *req)
{
	for (const char *const *h = request_headers; *h; h++) {
		const char *v = http_request_header(req, *h);

		if (v && add_header(c, *h, v) < 0)
			return -ENOMEM;
	}
	return add_header(c, "Expect", "") < 0 ? -ENOMEM : 0;
}

static int queue_calls(struct http_request *req, struct remote_wait *w, http_handler_fn resumed)
{
	struct fleet *fleet = http_request_fleet(req);

	http_request_set_state(req, w, remote_wait_release);
	for (size_t i = 0; i < w->n; i++) {
		if (!w->calls[i])
			continue;
		if (event_work_queue(fleet->pool, remote_call_run, remote_call_done, w->calls[i]) <
		    0) {
			snprintf(w->calls[i]->error, sizeof w->calls[i]->error,
				 "worker %s: the controller is stopping", w->calls[i]->name);
			continue;
		}
		w->pending++;
	}
	if (w->pending == 0)
		return resumed(req);
	if (http_request_suspend(req, resumed) < 0) {
		/* The calls finish on their own; the state frees the wait after the last. */
		http_request_set_state(req, NULL, NULL);
		return http_reply_status(req, 500, NULL, "cannot wait for the workers");
	}
	return 0;
}

/* ---- GET /v1/workers ---------------------------------------------------------------------- */

static json_t *self_entry(struct http_request *req, const struct fleet_worker *wk)
{
	json_t *worker = manager_worker(http_request_manager(req));
	json_t *o;

	if (!worker)
		return NULL;
	o = json_pack("{s:s,s:b,s:s,s:O*,s:O*,s:O*}", "name", wk->name, "self", 1, "state", "up",
		      "version", json_object_get(worker, "version"), "capacity",
		      json_object_get(worker, "capacity"), "workspaces",
		      json_object_get(worker, "workspaces"));
	if (o && wk->url[0])
		json_object_set_new(o, "url", json_string(wk->url));
	json_decref(worker);
	return o;
}

static json_t *remote_entry(const struct remote_call *c)
{
	json_error_t je;
	json_t *worker, *o;
	char error[sizeof c->error + 128];

	o = json_pack("{s:s,s:s,s:b}", "name", c->name, "url", c->base, "self", 0);
	if (!o)
		return NULL;
	if (c->status == 0) {
		json_object_set_new(o, "state", json_string("down"));
		json_object_set_new(o, "error", json_string(c->error));
		return o;
	}
	worker = json_loadb(c->answer ?: "", c->answer_len, 0, &je);
	if (c->status < 200 || c->status > 299 || !json_is_object(worker)) {
		json_t *msg = json_object_get(json_object_get(worker, "error"), "message");

		snprintf(error, sizeof error, "worker %s (%.256s) answered %ld%s%.200s", c->name,
			 c->base, c->status, json_is_string(msg) ? ": " : "",
			 json_is_string(msg) ? json_string_value(msg) : "");
		json_object_set_new(o, "state", json_string("down"));
		json_object_set_new(o, "status", json_integer(c->status));
		json_object_set_new(o, "error", json_string(error));
		json_decref(worker);
		return o;
	}
	json_object_set_new(o, "state", json_string("up"));
	json_object_set(o, "version", json_object_get(worker, "version") ?: json_null());
	json_object_set(o, "capacity", json_object_get(worker, "capacity") ?: json_null());
	json_object_set(o, "workspaces", json_object_get(worker, "workspaces") ?: json_null());
	if (!json_equal(json_object_get(worker, "name"), json_object_get(o, "name"))) {
		snprintf(error, sizeof error, "worker %s (%.256s) calls itself %.64s", c->name,
			 c->base,
			 json_string_value(json_object_get(worker, "name")) ?: "(no name)");
		json_object_set_new(o, "warning", json_string(error));
	}
	json_decref(worker);
	return o;
}

static int workers_resumed(struct http_request *req)
{
	struct remote_wait *w = http_request_state(req);
	json_t *list = json_array();

	if (!w || !list) {
		json_decref(list);
		return http_reply_status(req, 500, NULL, "out of memory");
	}
	for (size_t i = 0; i < w->n; i++) {
		json_t *e = w->workers[i].self ? json_incref(w->self) : remote_entry(w->calls[i]);

		if (!e || json_array_append_new(list, e) < 0) {
			json_decref(list);
			return http_reply_status(req, 500, NULL, "out of memory");
		}
	}
	http_request_set_state(req, NULL, NULL);
	return http_reply_json(req, 200, json_pack("{s:o}", "workers", list));
}

/* Without --workers: this controller alone, so a dashboard shows one worker as before. */
static int workers_alone(struct http_request *req)
{
	json_t *worker = manager_worker(http_request_manager(req));
	json_t *o;

	if (!worker)
		return http_reply_status(req, 500, NULL, "worker description failed");
	o = json_pack("{s:[{s:O,s:b,s:s,s:O*,s:O*,s:O*}]}", "workers", "name",
		      json_object_get(worker, "name"), "self", 1, "state", "up", "version",
		      json_object_get(worker, "version"), "capacity",
		      json_object_get(worker, "capacity"), "workspaces",
		      json_object_get(worker, "workspaces"));
	json_decref(worker);
	return http_reply_json(req, 200, o);
}

int api_workers(struct http_request *req)
{
	struct fleet *fleet = http_request_fleet(req);
	struct remote_wait *w;

	if (!fleet)
		return workers_alone(req);
	w = calloc(1, sizeof *w);
	if (!w)
		return http_reply_status(req, 500, NULL, "out of memory");
	w->req = req;
	/* --workers, then the workers registered in the fleet's store */
	if (fleet_list(fleet, manager_fleet_workers(http_request_manager(req)), &w->workers,
		       &w->n) < 0)
		goto oom;
	for (size_t i = 0; i < w->n; i++) {
		const struct fleet_worker *wk = &w->workers[i];
		struct remote_call *c;

		if (wk->self) {
			w->self = self_entry(req, wk);
			if (!w->self)
				goto oom;
			continue;
		}
		c = remote_call_new(w, fleet, wk, "GET", "/v1/worker");
		if (!c || copy_headers(c, req) < 0) {
			remote_call_free(c);
			goto oom;
		}
		c->index = i;
		c->connect_ms = PROBE_CONNECT_MS;
		c->timeout_ms = PROBE_TIMEOUT_MS;
		c->max_answer = PROBE_MAX_ANSWER;
		w->calls[i] = c;
	}
	return queue_calls(req, w, workers_resumed);
oom:
	remote_wait_free(w);
	return http_reply_status(req, 500, NULL, "out of memory");
}

/* ---- /v1/workers/NAME/v1/... -------------------------------------------------------------- */

/* What may follow /v1/workers/NAME: "/v1/", path characters, no dot segment, not /v1/workers
 * again. Returns NULL when it may, else why not. */
static const char *forward_path_refused(const char *path)
{
	static const char allowed[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
				      "0123456789-._~:@/";

	if (strncmp(path, "/v1/", 4) != 0)
		return "the forwarded path must start with /v1/";
	if (strcmp(path, "/v1/workers") == 0 || strncmp(path, "/v1/workers/", 12) == 0)
		return "a forwarded request cannot be forwarded again";
	if (path[strspn(path, allowed)] != '\0')
		return "the forwarded path holds a character outside [A-Za-z0-9._~:@/-]";
	if (strstr(path, "//") || strstr(path, "/./") || strstr(path, "/../"))
		return "the forwarded path holds an empty or dot segment";
	{
		size_t n = strlen(path);
		if ((n >= 2 && strcmp(path + n - 2, "/.") == 0) ||
		    (n >= 3 && strcmp(path + n - 3, "/..") == 0))
			return "the forwarded path holds a dot segment";
	}
	return NULL;
}

/* A control character in a header value passed on (a bare CR, a NUL) could end its line or
 * cut it short on the way to the worker; the WebSocket relay's handshake (worker-relay.c) is
 * written by hand. Such a request is refused whole, nothing reaching the worker: why into
 * ret, false when none. */
static bool forward_headers_refused(struct http_request *req, char *ret, size_t size)
{
	static const char *const relayed[] = { "Sec-WebSocket-Protocol", "Sec-WebSocket-Key",
					       NULL };
	const char *const *lists[] = { request_headers, relayed };

	for (size_t l = 0; l < sizeof lists / sizeof lists[0]; l++)
		for (const char *const *h = lists[l]; *h; h++) {
			size_t len = 0;
			const char *v = http_request_header_n(req, *h, &len);

			for (size_t i = 0; v && i < len; i++) {
				unsigned char c = (unsigned char)v[i];

				if ((c < 0x20 && c != '\t') || c == 0x7f) {
					snprintf(ret, size,
						 "header %s holds a control character (0x%02X)", *h,
						 c);
					return true;
				}
			}
		}
	return false;
}

/* Never called: MHD sends no body for a HEAD. */
static ssize_t head_no_body(void *cls, uint64_t pos, char *buf, size_t max)
{
	return MHD_CONTENT_READER_END_OF_STREAM;
}

static int forward_reply(struct http_request *req, const struct remote_call *c)
{
	struct MHD_Response *r;
	int ret;

	if (c->status == 0)
		return http_reply_status(req, strstr(c->error, "no answer within") ? 504 : 502,
					 NULL, "%s", c->error);
	/* A HEAD's answer came without its body, so its size is unknown here: none is said. */
	if (strcmp(c->method, "HEAD") == 0)
		r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 1, head_no_body, NULL,
						      NULL);
	else
		r = MHD_create_response_from_buffer(c->answer_len, c->answer ?: (void *)"",
						    MHD_RESPMEM_MUST_COPY);
	if (!r)
		return -ENOMEM;
	if (strcmp(c->method, "HEAD") == 0)
		(void)MHD_set_response_options(r, MHD_RF_HTTP_1_0_COMPATIBLE_STRICT, MHD_RO_END);
	for (const struct curl_slist *l = c->answer_headers; l; l = l->next) {
		const char *colon = strchr(l->data, ':');
		char name[64];

		if (!colon || (size_t)(colon - l->data) >= sizeof name)
			continue;
		memcpy(name, l->data, (size_t)(colon - l->data));
		name[colon - l->data] = '\0';
		colon++;
		colon += strspn(colon, " \t");
		if (MHD_add_response_header(r, name, colon) != MHD_YES) {
			MHD_destroy_response(r);
			return -ENOMEM;
		}
	}
	/* Whatever the worker says its answer is, this origin never renders it as a page. */
	if (MHD_add_response_header(r, "X-Content-Type-Options", "nosniff") != MHD_YES ||
	    MHD_add_response_header(r, "Content-Security-Policy", "sandbox; default-src 'none'") !=
		    MHD_YES) {
		MHD_destroy_response(r);
		return -ENOMEM;
	}
	ret = http_reply_response(req, (unsigned)c->status, r);
	MHD_destroy_response(r);
	return ret;
}

static int forward_resumed(struct http_request *req)
{
	struct remote_wait *w = http_request_state(req);
	int r;

	if (!w || !w->calls[0])
		return http_reply_status(req, 500, NULL, "out of memory");
	r = forward_reply(req, w->calls[0]);
	http_request_set_state(req, NULL, NULL);
	return r;
}

static bool wants_stream(struct http_request *req)
{
	const char *accept = http_request_header(req, "Accept");
	bool present = false;
	const char *follow;

	if (accept && strstr(accept, "text/event-stream"))
		return true;
	follow = http_request_query(req, "follow", &present);
	return present && (!follow || strcmp(follow, "0") != 0) &&
	       (!follow || strcmp(follow, "false") != 0);
}

static struct remote_call *forward_call(struct http_request *req, struct remote_wait *w,
					const struct fleet_worker *wk, const char *path)
{
	_cleanup_free_ char *query = http_request_query_string(req);
	_cleanup_free_ char *target = NULL;
	struct remote_call *c;
	const void *body;
	size_t len = 0;

	if (!query || asprintf(&target, "%s%s%s", path, query[0] ? "?" : "", query) < 0)
		return NULL;
	c = remote_call_new(w, http_request_fleet(req), wk, http_request_method(req), target);
	if (!c || copy_headers(c, req) < 0) {
		remote_call_free(c);
		return NULL;
	}
	body = http_request_body(req, &len);
	if (len > 0) {
		c->body = malloc(len);
		if (!c->body) {
			remote_call_free(c);
			return NULL;
		}
		memcpy(c->body, body, len);
		c->body_len = len;
	}
	c->connect_ms = FORWARD_CONNECT_MS;
	c->timeout_ms = (long)http_request_max_wait_ms(req) + FORWARD_EXTRA_MS;
	c->max_answer = FORWARD_MAX_ANSWER;
	return c;
}

/* The worker and the path of /v1/workers/NAME/v1/...: NULL after replying when they are
 * refused. */
static const struct fleet_worker *forward_target(struct http_request *req, const char **ret_path)
{
	struct fleet *fleet = http_request_fleet(req);
	const char *name = http_request_route(req)->ws_id;
	const struct fleet_worker *wk =
		fleet_resolve(fleet, manager_fleet_workers(http_request_manager(req)), name);
	const char *path = http_request_url(req) + strlen("/v1/workers/") + strlen(name);
	char header_why[96];
	const char *why;

	if (!wk) {
		http_reply_status(req, 404, NULL,
				  "worker %s is not configured on this controller%s", name,
				  fleet ? " (GET /v1/workers lists them)" :
					  " (it forwards to none: see --workers)");
		return NULL;
	}
	if (wk->self) {
		http_reply_status(req, 400, NULL, "worker %s is this controller: call %s directly",
				  name, path);
		return NULL;
	}
	why = forward_path_refused(path);
	if (why) {
		http_reply_status(req, 400, NULL, "%s", why);
		return NULL;
	}
	if (forward_headers_refused(req, header_why, sizeof header_why)) {
		http_reply_status(req, 400, NULL, "%s: nothing is forwarded to worker %s",
				  header_why, name);
		return NULL;
	}
	*ret_path = path;
	return wk;
}

int api_worker_forward(struct http_request *req)
{
	const char *path = NULL;
	const struct fleet_worker *wk = forward_target(req, &path);
	struct remote_wait *w;

	if (!wk)
		return 0;
	if (wants_stream(req))
		return http_reply_status(
			req, 501, NULL,
			"event streams are not forwarded to worker %s: use the "
			"WebSocket variant of the endpoint, or poll (no follow, no "
			"text/event-stream)",
			wk->name);
	w = calloc(1, sizeof *w);
	if (!w)
		return http_reply_status(req, 500, NULL, "out of memory");
	w->req = req;
	w->n = 1;
	w->calls[0] = forward_call(req, w, wk, path);
	if (!w->calls[0]) {
		remote_wait_free(w);
		return http_reply_status(req, 500, NULL, "out of memory");
	}
	return queue_calls(req, w, forward_resumed);
}

/* The WebSocket variant: relayed to the worker as it is (worker-relay.h). */
int api_worker_forward_ws(struct http_request *req)
{
	const char *path = NULL;
	const struct fleet_worker *wk = forward_target(req, &path);
	_cleanup_free_ char *query = NULL, *target = NULL;

	if (!wk)
		return 0;
	query = http_request_query_string(req);
	if (!query || asprintf(&target, "%s%s%s", path, query[0] ? "?" : "", query) < 0)
		return http_reply_status(req, 500, NULL, "out of memory");
	return worker_relay_start(req, wk, target);
}

/* ---- POST /v1/workspaces {"placement":"any"} ------------------------------------------------ */

/* A worker's GET /v1/worker answer, or NULL with why in c->error (no answer, an error status,
 * not a worker's description, another name than the one listed). */
static json_t *placement_answer(struct remote_call *c)
{
	json_t *doc, *name;

	if (c->status == 0)
		return NULL;
	doc = json_loadb(c->answer ?: "", c->answer_len, 0, NULL);
	name = json_object_get(doc, "name");
	if (c->status < 200 || c->status > 299 || !json_is_object(doc))
		snprintf(c->error, sizeof c->error, "worker %s (%.256s) answered %ld", c->name,
			 c->base, c->status);
	else if (!json_is_string(name) || strcmp(json_string_value(name), c->name) != 0)
		snprintf(c->error, sizeof c->error, "worker %s (%.256s) calls itself %.64s",
			 c->name, c->base,
			 json_is_string(name) ? json_string_value(name) : "(none)");
	else
		return doc;
	json_decref(doc);
	return NULL;
}

static int64_t capacity_number(const json_t *worker, const char *what, const char *key)
{
	json_t *v =
		json_object_get(json_object_get(json_object_get(worker, "capacity"), what), key);

	return json_is_integer(v) ? (int64_t)json_integer_value(v) : -1;
}

/* An entry of the rule from a worker's description; the caller as that worker sees it (its
 * "caller"), or as this one does for this controller's own. */
static struct placement_worker placement_of(const char *name, const json_t *doc, const char *error,
					    const struct auth_principal *here)
{
	const json_t *caller = json_object_get(doc, "caller");
	const char *scope = json_string_value(json_object_get(caller, "scope"));

	return (struct placement_worker){
		.name = name,
		.error = doc ? NULL : error,
		.tenant = json_string_value(json_object_get(doc, "tenant")),
		.caller_admin = here ? here->scope == AUTH_SCOPE_ADMIN :
				       scope && strcmp(scope, "admin") == 0,
		.caller_tenant = here ? here->tenant :
					json_string_value(json_object_get(caller, "tenant")),
		.free = capacity_number(doc, "workspaces", "free"),
		.memory_available = capacity_number(doc, "memoryBytes", "available"),
	};
}

/* The create forwarded to the chosen worker with the caller's headers; its answer is the
 * caller's as a forward's is. Takes body. */
static int placement_forward(struct http_request *req, const struct fleet_worker *wk, json_t *body)
{
	struct remote_wait *w = calloc(1, sizeof *w);
	char *text = json_dumps(body, JSON_COMPACT);
	struct remote_call *c = NULL;

	json_decref(body);
	if (w && text)
		c = remote_call_new(w, http_request_fleet(req), wk, "POST", "/v1/workspaces");
	if (!c || copy_headers(c, req) < 0) {
		remote_call_free(c);
		free(w);
		free(text);
		return http_reply_status(req, 500, NULL, "out of memory");
	}
	c->body = text;
	c->body_len = strlen(text);
	c->connect_ms = FORWARD_CONNECT_MS;
	c->timeout_ms = (long)http_request_max_wait_ms(req) + FORWARD_EXTRA_MS;
	c->max_answer = FORWARD_MAX_ANSWER;
	w->req = req;
	w->n = 1;
	w->calls[0] = c;
	return queue_calls(req, w, forward_resumed);
}

static int placement_resumed(struct http_request *req)
{
	struct remote_wait *w = http_request_state(req);
	struct placement_worker v[FLEET_MAX];
	json_t *docs[FLEET_MAX] = {};
	struct fleet_worker chosen;
	char why[2048];
	json_t *body;
	int k;

	if (!w)
		return http_reply_status(req, 500, NULL, "out of memory");
	for (size_t i = 0; i < w->n; i++) {
		if (w->workers[i].self) {
			v[i] = placement_of(w->workers[i].name, w->self, NULL,
					    http_request_principal(req));
			continue;
		}
		docs[i] = placement_answer(w->calls[i]);
		v[i] = placement_of(w->workers[i].name, docs[i], w->calls[i]->error, NULL);
	}
	k = placement_choose(v, w->n, why, sizeof why);
	for (size_t i = 0; i < w->n; i++)
		json_decref(docs[i]);
	if (k >= 0)
		chosen = w->workers[k];
	body = TAKE_PTR(w->create);
	http_request_set_state(req, NULL, NULL); /* frees w */
	if (k < 0) {
		json_decref(body);
		return http_reply_status(req, 503, NULL, "no worker can take this workspace: %s",
					 why);
	}
	if (chosen.self)
		return api_workspace_create_here(req, body);
	return placement_forward(req, &chosen, body);
}

int api_workspace_place(struct http_request *req, json_t *body)
{
	struct fleet *fleet = http_request_fleet(req);
	struct remote_wait *w = calloc(1, sizeof *w);

	if (!w) {
		json_decref(body);
		return http_reply_status(req, 500, NULL, "out of memory");
	}
	w->req = req;
	w->create = body;
	if (fleet_list(fleet, manager_fleet_workers(http_request_manager(req)), &w->workers,
		       &w->n) < 0)
		goto oom;
	for (size_t i = 0; i < w->n; i++) {
		const struct fleet_worker *wk = &w->workers[i];
		struct remote_call *c;

		if (wk->self) {
			w->self = manager_worker(http_request_manager(req));
			if (!w->self)
				goto oom;
			continue;
		}
		c = remote_call_new(w, fleet, wk, "GET", "/v1/worker");
		if (!c || copy_headers(c, req) < 0) {
			remote_call_free(c);
			goto oom;
		}
		c->index = i;
		c->connect_ms = PROBE_CONNECT_MS;
		c->timeout_ms = PROBE_TIMEOUT_MS;
		c->max_answer = PROBE_MAX_ANSWER;
		w->calls[i] = c;
	}
	return queue_calls(req, w, placement_resumed);
oom:
	remote_wait_free(w);
	return http_reply_status(req, 500, NULL, "out of memory");
}
