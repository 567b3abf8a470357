/* SPDX-License-Identifier: MIT */
/* The client handle and its transport: one libcurl easy handle per client, reused so the
 * connection stays open between calls; JSON requests and errors; worker and workspace calls. */

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "basic/cleanup.h"
#include "client-internal.h"

/* The largest response body kept in memory: a run with 8 MiB of head and tail per stream is
 * about 22 MiB of base64; this leaves room and still bounds a misbehaving server. */
#define RESPONSE_MAX (256u * 1024 * 1024)
#define CONNECT_TIMEOUT_MS 10000L

struct response {
	struct station_client *c;
	int (*on_data)(const void *data, size_t len, void *userdata); /* NULL: keep the body */
	void *userdata;
	int stop;	/* < 0: why the write callback stopped the transfer */
	int body_error; /* < 0: keeping the body failed: -E2BIG past RESPONSE_MAX, -ENOMEM */
	long status;	/* 0 until known */
	char *body;	/* NUL-terminated when non-NULL */
	size_t len;
	size_t cap;
	char *etag; /* where the ETag header goes (CLIENT_ETAG_MAX bytes), or NULL */
	const struct client_io *io;
	int upload_error; /* < 0: reading the upload's fd failed */
};

static void curl_slist_free_allp(struct curl_slist **l)
{
	curl_slist_free_all(*l);
}

int client_error(struct station_client *c, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(c->error, sizeof(c->error), fmt, ap);
	va_end(ap);
	c->error_code[0] = '\0';
	c->last_status = 0;
	return err;
}

static int response_append(struct response *r, const void *data, size_t n)
{
	if (n > RESPONSE_MAX - r->len)
		return -E2BIG;
	if (r->len + n + 1 > r->cap) {
		size_t cap = MAX(r->cap * 2, r->len + n + 1);
		char *p = realloc(r->body, MIN(cap, (size_t)RESPONSE_MAX + 1));

		if (!p)
			return -ENOMEM;
		r->body = p;
		r->cap = MIN(cap, (size_t)RESPONSE_MAX + 1);
	}
	memcpy(r->body + r->len, data, n);
	r->len += n;
	r->body[r->len] = '\0';
	return 0;
}

static size_t response_write(char *ptr, size_t size, size_t nmemb, void *userdata)
{
	struct response *r = userdata;
	size_t n = size * nmemb;

	if (r->status == 0)
		curl_easy_getinfo(r->c->curl, CURLINFO_RESPONSE_CODE, &r->status);
	if (r->on_data && r->status / 100 == 2)
		r->stop = r->on_data(ptr, n, r->userdata);
	else
		r->stop = r->body_error = response_append(r, ptr, n);
	return r->stop < 0 ? 0 : n;
}

static int transfer_progress(void *userdata, curl_off_t dltotal, curl_off_t dlnow,
			     curl_off_t ultotal, curl_off_t ulnow)
{
	struct station_client *c = userdata;

	return c->interrupt && c->interrupt(c->interrupt_userdata) ? 1 : 0;
}

static int curl_connect_error(struct station_client *c)
{
	long os_errno = 0;

	curl_easy_getinfo(c->curl, CURLINFO_OS_ERRNO, &os_errno);
	if (os_errno == EACCES || os_errno == EPERM)
		return client_error(c, -EACCES, "cannot connect to %s: %s", c->endpoint,
				    strerror((int)os_errno));
	return client_error(c, -ECONNREFUSED, "no controller at %s: %s", c->endpoint,
			    os_errno > 0 ? strerror((int)os_errno) : c->curl_error);
}

static int curl_result_to_error(struct station_client *c, CURLcode cc)
{
	const char *why = c->curl_error[0] ? c->curl_error : curl_easy_strerror(cc);

	switch (cc) {
	case CURLE_COULDNT_CONNECT:
	case CURLE_COULDNT_RESOLVE_HOST:
	case CURLE_COULDNT_RESOLVE_PROXY:
	case CURLE_OPERATION_TIMEDOUT: /* only the connect phase has a timeout */
		return curl_connect_error(c);
	case CURLE_ABORTED_BY_CALLBACK:
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

static int http_status_to_errno(long status)
{
	switch (status) {
	case 400:
	case 405:
	case 415:
		return -EINVAL;
	case 401:
		return -EACCES;
	case 404:
		return -ENOENT;
	case 409:
		return -EBUSY;
	case 403:
		return -EPERM;
	case 412:
		return -ESTALE;
	case 413:
		return -E2BIG;
	case 416:
		return -ERANGE;
	case 429:
		return -EAGAIN;
	case 501:
		return -EOPNOTSUPP;
	case 503:
		return -ENOTCONN;
	case 507:
		return -ENOSPC;
	default:
		return -EIO;
	}
}

/* Turns a non-2xx response into an error carrying the server's code and message. */
static int client_api_error(struct station_client *c, long status, const char *body)
{
	_cleanup_json_ json_t *doc = body ? json_loads(body, 0, NULL) : NULL;
	json_t *e = json_object_get(doc, "error");
	const char *code = json_string_value(json_object_get(e, "code"));
	const char *message = json_string_value(json_object_get(e, "message"));
	int r = http_status_to_errno(status);

	if (message)
		client_error(c, r, "%s", message);
	else
		client_error(c, r, "%s answered HTTP %ld%s%.200s", c->endpoint, status,
			     body && *body ? ": " : "", body ? body : "");
	snprintf(c->error_code, sizeof(c->error_code), "%s", code ? code : "");
	c->last_status = status;
	return r;
}

static int slist_add(struct curl_slist **l, const char *h)
{
	struct curl_slist *n;

	if (!h)
		return 0;
	n = curl_slist_append(*l, h);
	if (!n)
		return -ENOMEM;
	*l = n;
	return 0;
}

static int client_headers(struct station_client *c, const struct client_io *io,
			  struct curl_slist **ret)
{
	_cleanup_(curl_slist_free_allp) struct curl_slist *l = NULL;
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
	struct response *r = userdata;

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
	struct response *r = userdata;
	size_t n = size * nitems;

	if (!r->etag)
		return n;
	if (n >= 5 && strncmp(buf, "HTTP/", 5) == 0)
		r->etag[0] = '\0'; /* a new response (after a 100 Continue) */
	else if (n > 5 && strncasecmp(buf, "etag:", 5) == 0) {
		const char *v = buf + 5;
		size_t len = n - 5;

		while (len > 0 && (*v == ' ' || *v == '\t'))
			v++, len--;
		while (len > 0 && (v[len - 1] == '\r' || v[len - 1] == '\n' || v[len - 1] == ' '))
			len--;
		if (len < CLIENT_ETAG_MAX) {
			memcpy(r->etag, v, len);
			r->etag[len] = '\0';
		}
	}
	return n;
}

static void client_setup_body(struct station_client *c, const struct client_io *io,
			      struct response *r)
{
	if (io->upload_fd >= 0) {
		curl_easy_setopt(c->curl, CURLOPT_UPLOAD, 1L);
		curl_easy_setopt(c->curl, CURLOPT_READFUNCTION, upload_read);
		curl_easy_setopt(c->curl, CURLOPT_READDATA, r);
		curl_easy_setopt(c->curl, CURLOPT_INFILESIZE_LARGE, (curl_off_t)io->upload_size);
	} else if (io->data || strcmp(io->method, "POST") == 0) {
		curl_easy_setopt(c->curl, CURLOPT_POSTFIELDS,
				 io->data ? (const char *)io->data : "");
		curl_easy_setopt(c->curl, CURLOPT_POSTFIELDSIZE_LARGE,
				 (curl_off_t)(io->data ? io->size : 0));
	} else {
		curl_easy_setopt(c->curl, CURLOPT_HTTPGET, 1L);
	}
	if (strcmp(io->method, "GET") != 0 && strcmp(io->method, "POST") != 0)
		curl_easy_setopt(c->curl, CURLOPT_CUSTOMREQUEST, io->method);
}

/* One transfer. Returns 0 once a response arrived (r->status set, body kept or streamed), or
 * -errno with the error recorded. */
static int client_perform(struct station_client *c, const struct client_io *io, struct response *r)
{
	_cleanup_(curl_slist_free_allp) struct curl_slist *headers = NULL;
	_cleanup_free_ char *url = NULL;
	CURLcode cc;

	if (asprintf(&url, "%s%s", c->base_url, io->path) < 0)
		return client_error(c, -ENOMEM, "out of memory");
	if (client_headers(c, io, &headers) < 0)
		return client_error(c, -ENOMEM, "out of memory");

	/* Resets options only: the open connection stays for the next call. */
	curl_easy_reset(c->curl);
	curl_easy_setopt(c->curl, CURLOPT_URL, url);
	if (c->socket_path)
		curl_easy_setopt(c->curl, CURLOPT_UNIX_SOCKET_PATH, c->socket_path);
	curl_easy_setopt(c->curl, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(c->curl, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
	curl_easy_setopt(c->curl, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c->curl, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(c->curl, CURLOPT_CONNECTTIMEOUT_MS, CONNECT_TIMEOUT_MS);
	curl_easy_setopt(c->curl, CURLOPT_ERRORBUFFER, c->curl_error);
	curl_easy_setopt(c->curl, CURLOPT_HTTPHEADER, headers);
	curl_easy_setopt(c->curl, CURLOPT_WRITEFUNCTION, response_write);
	curl_easy_setopt(c->curl, CURLOPT_WRITEDATA, r);
	curl_easy_setopt(c->curl, CURLOPT_HEADERFUNCTION, response_header);
	curl_easy_setopt(c->curl, CURLOPT_HEADERDATA, r);
	curl_easy_setopt(c->curl, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(c->curl, CURLOPT_XFERINFOFUNCTION, transfer_progress);
	curl_easy_setopt(c->curl, CURLOPT_XFERINFODATA, c);
	client_setup_body(c, io, r);

	c->curl_error[0] = '\0';
	cc = curl_easy_perform(c->curl);
	if (r->body_error == -E2BIG)
		return client_error(c, -ENOMEM, "response from %s too large", c->endpoint);
	if (r->body_error < 0)
		return client_error(c, -ENOMEM, "out of memory");
	if (r->stop < 0)
		return r->stop; /* the stream callback stopped and recorded its reason */
	if (r->upload_error == -EINTR)
		return client_error(c, -EINTR, "interrupted");
	if (r->upload_error < 0)
		return client_error(c, r->upload_error, "cannot read what is to be uploaded: %s",
				    strerror(-r->upload_error));
	/* A server may refuse an upload while its body is still being sent, then close: its
	 * answer is what counts. */
	if (cc == CURLE_SEND_ERROR && r->status >= 400)
		cc = CURLE_OK;
	if (cc != CURLE_OK)
		return curl_result_to_error(c, cc);
	curl_easy_getinfo(c->curl, CURLINFO_RESPONSE_CODE, &r->status);
	return 0;
}

int client_io(struct station_client *c, struct client_io *io)
{
	struct response resp = {
		.c = c,
		.on_data = io->on_data,
		.userdata = io->userdata,
		.etag = io->etag,
		.io = io,
	};
	_cleanup_free_ char *body = NULL;
	int r;

	if (io->etag)
		io->etag[0] = '\0';
	r = client_perform(c, io, &resp);
	body = resp.body;
	if (r < 0)
		return r;
	io->status = resp.status;
	if (resp.status / 100 != 2)
		return client_api_error(c, resp.status, body);
	io->body = TAKE_PTR(body);
	io->body_len = resp.len;
	return 0;
}

static void station_client_freep(struct station_client **c)
{
	station_client_free(*c);
}

static int client_set_endpoint(struct station_client *c, const char *endpoint)
{
	const char *socket_path = NULL;
	size_t n = strlen(endpoint);

	if (strncmp(endpoint, "unix:", 5) == 0)
		socket_path = endpoint + 5;
	else if (endpoint[0] == '/')
		socket_path = endpoint;
	else if (strncmp(endpoint, "http://", 7) != 0 && strncmp(endpoint, "https://", 8) != 0)
		return -EINVAL;
	if (socket_path && socket_path[0] != '/')
		return -EINVAL;

	if (socket_path) {
		char *display;

		if (asprintf(&display, "unix:%s", socket_path) < 0)
			return -ENOMEM;
		c->endpoint = display;
		c->socket_path = strdup(socket_path);
		c->base_url = strdup("http://localhost");
		if (!c->socket_path)
			return -ENOMEM;
	} else {
		while (n > 0 && endpoint[n - 1] == '/')
			n--;
		c->base_url = strndup(endpoint, n);
		c->endpoint = strndup(endpoint, n);
	}
	return c->base_url && c->endpoint ? 0 : -ENOMEM;
}

int station_client_new(const char *endpoint, const char *token, struct station_client **ret)
{
	_cleanup_(station_client_freep) struct station_client *c = NULL;
	int r;

	if (!endpoint || !ret || (token && strpbrk(token, "\r\n")))
		return -EINVAL;

	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	r = client_set_endpoint(c, endpoint);
	if (r < 0)
		return r;
	if (token) {
		char *header;

		if (asprintf(&header, "Authorization: Bearer %s", token) < 0)
			return -ENOMEM;
		c->auth_header = header;
	}
	c->curl = curl_easy_init();
	if (!c->curl)
		return -ENOMEM;
	*ret = TAKE_PTR(c);
	return 0;
}

struct station_client *station_client_free(struct station_client *c)
{
	if (!c)
		return NULL;
	if (c->curl)
		curl_easy_cleanup(c->curl);
	free(c->endpoint);
	free(c->base_url);
	free(c->socket_path);
	if (c->auth_header)
		explicit_bzero(c->auth_header, strlen(c->auth_header));
	free(c->auth_header);
	free(c);
	return NULL;
}

const char *station_client_endpoint(const struct station_client *c)
{
	return c->endpoint;
}

const char *station_client_last_error(const struct station_client *c)
{
	return c->error;
}

const char *station_client_last_error_code(const struct station_client *c)
{
	return c->error_code;
}

long station_client_last_status(const struct station_client *c)
{
	return c->last_status;
}

void station_client_set_interrupt(struct station_client *c, int (*check)(void *userdata),
				  void *userdata)
{
	c->interrupt = check;
	c->interrupt_userdata = userdata;
}

int station_request(struct station_client *c, const char *method, const char *path,
		    const char *body_json, long *ret_status, char **ret_body)
{
	struct client_io io = {
		.method = method,
		.path = path,
		.data = body_json,
		.size = body_json ? strlen(body_json) : 0,
		.content_type = body_json ? "Content-Type: application/json" : NULL,
		.upload_fd = -1,
	};
	struct response resp = { .c = c, .io = &io };
	int r;

	r = client_perform(c, &io, &resp);
	if (r < 0) {
		free(resp.body);
		return r;
	}
	if (ret_body && !resp.body) {
		resp.body = strdup(""); /* an empty body */
		if (!resp.body)
			return client_error(c, -ENOMEM, "out of memory");
	}
	if (ret_status)
		*ret_status = resp.status;
	if (ret_body)
		*ret_body = TAKE_PTR(resp.body);
	free(resp.body);
	return 0;
}

int client_parse_reply(struct station_client *c, long status, const char *body, json_t **ret)
{
	json_error_t err;
	json_t *doc;

	if (status / 100 != 2)
		return client_api_error(c, status, body);
	if (!ret)
		return 0;
	doc = json_loads(body ? body : "", JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &err);
	if (!doc)
		return client_error(c, -EPROTO, "%s answered HTTP %ld with bad JSON: %s",
				    c->endpoint, status, err.text);
	*ret = doc;
	return 0;
}

int station_request_json(struct station_client *c, const char *method, const char *path,
			 json_t *body, json_t **ret)
{
	_cleanup_free_ char *text = NULL;
	_cleanup_free_ char *reply = NULL;
	long status;
	int r;

	if (body) {
		text = json_dumps(body, JSON_COMPACT);
		if (!text)
			return client_error(c, -ENOMEM, "out of memory");
	}
	r = station_request(c, method, path, text, &status, &reply);
	if (r < 0)
		return r;
	return client_parse_reply(c, status, reply, ret);
}

int station_request_stream(struct station_client *c, const char *path,
			   int (*on_data)(const void *data, size_t len, void *userdata),
			   void *userdata)
{
	struct client_io io = {
		.method = "GET",
		.path = path,
		.accept = "Accept: text/event-stream",
		.upload_fd = -1,
	};
	struct response resp = { .c = c, .on_data = on_data, .userdata = userdata, .io = &io };
	_cleanup_free_ char *body = NULL;
	int r;

	r = client_perform(c, &io, &resp);
	body = resp.body;
	if (r < 0)
		return r;
	return resp.status / 100 == 2 ? 0 : client_api_error(c, resp.status, body);
}

int station_ready(struct station_client *c, json_t **ret)
{
	_cleanup_free_ char *reply = NULL;
	_cleanup_json_ json_t *doc = NULL;
	long status;
	int r;

	r = station_request(c, "GET", "/v1/ready", NULL, &status, &reply);
	if (r < 0)
		return r;
	/* 503 is an answer here, not a failure: the body says which check failed. */
	r = client_parse_reply(c, status == 503 ? 200 : status, reply, &doc);
	if (r < 0)
		return r;
	if (!json_is_object(doc) || !json_is_boolean(json_object_get(doc, "ready")))
		return client_error(c, -EPROTO, "%s answered /v1/ready without \"ready\"",
				    c->endpoint);
	r = json_is_true(json_object_get(doc, "ready")) ? 1 : 0;
	if (ret)
		*ret = TAKE_PTR(doc);
	return r;
}

int station_worker(struct station_client *c, json_t **ret)
{
	return station_request_json(c, "GET", "/v1/worker", NULL, ret);
}

static bool id_is_valid(const char *id)
{
	size_t n = id ? strlen(id) : 0;

	return n > 0 && n <= 128 &&
	       strspn(id, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") == n;
}

int client_path(struct station_client *c, const char *ws, const char *run, const char *suffix,
		char **ret)
{
	int r;

	if (!id_is_valid(ws))
		return client_error(c, -EINVAL, "invalid workspace id '%s'", ws ? ws : "");
	if (run && !id_is_valid(run))
		return client_error(c, -EINVAL, "invalid run id '%s'", run);
	if (run)
		r = asprintf(ret, "/v1/workspaces/%s/commands/%s%s", ws, run, suffix ? suffix : "");
	else
		r = asprintf(ret, "/v1/workspaces/%s%s", ws, suffix ? suffix : "");
	return r < 0 ? client_error(c, -ENOMEM, "out of memory") : 0;
}

int client_put_env(struct station_client *c, json_t *o, char *const *env)
{
	_cleanup_json_ json_t *e = NULL;

	if (!env)
		return 0;
	e = json_object();
	if (!e)
		return client_error(c, -ENOMEM, "out of memory");
	for (char *const *i = env; *i; i++) {
		const char *eq = strchr(*i, '=');
		_cleanup_free_ char *key = NULL;

		if (!eq || eq == *i)
			return client_error(c, -EINVAL,
					    "invalid environment entry '%s' (want KEY=VALUE)", *i);
		key = strndup(*i, eq - *i);
		if (!key || json_object_set_new(e, key, json_string(eq + 1)) < 0)
			return client_error(c, -EINVAL, "invalid environment entry '%s'", *i);
	}
	return json_object_set_new(o, "env", TAKE_PTR(e)) < 0 ? -ENOMEM : 0;
}

int client_put_string(struct station_client *c, json_t *o, const char *key, const char *value)
{
	json_t *v;

	if (!value)
		return 0;
	v = json_string(value);
	if (!v)
		return client_error(c, -EINVAL, "%s '%s' is not valid UTF-8", key, value);
	if (json_object_set_new(o, key, v) < 0)
		return client_error(c, -ENOMEM, "out of memory");
	return 0;
}

static int workspace_put_strings(struct station_client *c, json_t *spec,
				 const struct station_workspace_options *o)
{
	int r;

	r = client_put_string(c, spec, "adapter", o->adapter);
	if (r >= 0)
		r = client_put_string(c, spec, "image", o->image);
	if (r >= 0)
		r = client_put_string(c, spec, "seccompProfile", o->seccomp_profile);
	if (r >= 0)
		r = client_put_string(c, spec, "network", o->network);
	return r;
}

/* Parses JSON text that must be an object (an egress policy), for a request body. */
static int parse_egress(struct station_client *c, const char *text, json_t **ret)
{
	json_error_t je;
	json_t *v;

	if (!text)
		return client_error(c, -EINVAL, "no egress policy given");
	v = json_loads(text, JSON_REJECT_DUPLICATES, &je);
	if (!v)
		return client_error(c, -EINVAL, "egress policy is not valid JSON: %s (line %d)",
				    je.text, je.line);
	if (!json_is_object(v)) {
		json_decref(v);
		return client_error(c, -EINVAL,
				    "egress policy must be a JSON object like {\"allow\": [...]}");
	}
	*ret = v;
	return 0;
}

static int workspace_spec(struct station_client *c, const struct station_workspace_options *o,
			  json_t **ret)
{
	static const struct station_workspace_options defaults = {};
	_cleanup_json_ json_t *spec = json_object();
	int r;

	if (!spec)
		return client_error(c, -ENOMEM, "out of memory");
	if (!o)
		o = &defaults;
	r = workspace_put_strings(c, spec, o);
	if (r < 0)
		return r;
	if (o->cpus > 0)
		json_object_set_new(spec, "cpus", json_real(o->cpus));
	if (o->memory_mb > 0)
		json_object_set_new(spec, "memoryMb", json_integer((json_int_t)o->memory_mb));
	if (o->pids_limit > 0)
		json_object_set_new(spec, "pidsLimit", json_integer((json_int_t)o->pids_limit));
	r = client_put_env(c, spec, o->env);
	if (r < 0)
		return r;
	if (o->egress) {
		json_t *egress = NULL;

		r = parse_egress(c, o->egress, &egress);
		if (r < 0)
			return r;
		if (json_object_set_new(spec, "egress", egress) < 0)
			return client_error(c, -ENOMEM, "out of memory");
	}
	*ret = TAKE_PTR(spec);
	return 0;
}

int station_workspace_create(struct station_client *c, const struct station_workspace_options *opts,
			     json_t **ret)
{
	_cleanup_json_ json_t *spec = NULL;
	int r;

	r = workspace_spec(c, opts, &spec);
	if (r < 0)
		return r;
	return station_request_json(c, "POST", "/v1/workspaces", spec, ret);
}

int station_workspace_list(struct station_client *c, json_t **ret)
{
	_cleanup_json_ json_t *doc = NULL;
	json_t *list;
	int r;

	r = station_request_json(c, "GET", "/v1/workspaces", NULL, &doc);
	if (r < 0)
		return r;
	list = json_object_get(doc, "workspaces");
	if (!json_is_array(list))
		return client_error(c, -EPROTO, "%s answered without \"workspaces\"", c->endpoint);
	*ret = json_incref(list);
	return 0;
}

static int workspace_call(struct station_client *c, const char *method, const char *id,
			  const char *suffix, json_t **ret)
{
	_cleanup_free_ char *path = NULL;
	int r;

	r = client_path(c, id, NULL, suffix, &path);
	if (r < 0)
		return r;
	return station_request_json(c, method, path, NULL, ret);
}

int station_workspace_get(struct station_client *c, const char *id, json_t **ret)
{
	return workspace_call(c, "GET", id, NULL, ret);
}

int station_workspace_delete(struct station_client *c, const char *id, json_t **ret)
{
	return workspace_call(c, "DELETE", id, NULL, ret);
}

int station_workspace_restart(struct station_client *c, const char *id, json_t **ret)
{
	return workspace_call(c, "POST", id, "/restart", ret);
}

int station_workspace_network_get(struct station_client *c, const char *id, json_t **ret)
{
	return workspace_call(c, "GET", id, "/network", ret);
}

int station_workspace_network_set(struct station_client *c, const char *id, const char *egress_json,
				  json_t **ret)
{
	_cleanup_json_ json_t *body = NULL;
	_cleanup_free_ char *path = NULL;
	json_t *egress = NULL;
	int r;

	r = parse_egress(c, egress_json, &egress);
	if (r < 0)
		return r;
	body = json_pack("{s:o}", "egress", egress);
	if (!body)
		return client_error(c, -ENOMEM, "out of memory");
	r = client_path(c, id, NULL, "/network", &path);
	if (r < 0)
		return r;
	return station_request_json(c, "PUT", path, body, ret);
}
