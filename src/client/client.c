/* SPDX-License-Identifier: MIT */
/* The client handle and what its transports share: one connection per client, kept open
 * between calls (http1.c on the unix socket, libcurl in curl.c over TCP); JSON requests and
 * errors; worker and workspace calls. */

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <strings.h>
#include <unistd.h>

#include "basic/cleanup.h"
#include "basic/workers.h"
#include "client-internal.h"

int client_error(struct station_client *c, int err, const char *fmt, ...)
{
	char message[sizeof c->error];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(message, sizeof message, fmt, ap);
	va_end(ap);
	/* A worker's handle names its worker, once. */
	if (c->worker_name && strncmp(message, "worker ", 7) != 0)
		snprintf(c->error, sizeof c->error, "worker %.32s: %.980s", c->worker_name,
			 message);
	else
		memcpy(c->error, message, sizeof c->error);
	c->current = NULL;
	c->error_code[0] = '\0';
	c->last_status = 0;
	return err;
}

int client_timed_out(struct station_client *c, uint64_t ms)
{
	char when[32];

	if (ms % 1000 == 0)
		snprintf(when, sizeof when, "%llu s", (unsigned long long)(ms / 1000));
	else
		snprintf(when, sizeof when, "%g s", (double)ms / 1000);
	if (c->worker_name)
		return client_error(c, -ETIMEDOUT, "worker %s (%s) did not answer within %s",
				    c->worker_name, c->endpoint, when);
	return client_error(c, -ETIMEDOUT, "%s did not answer within %s", c->endpoint, when);
}

uint64_t client_answer_ms(const struct station_client *c, const char *path)
{
	const char *q = path ? strchr(path, '?') : NULL, *w;
	uint64_t hold = 0;

	/* The query's waitMs=N: the only parameter by which a call asks the server to hold. */
	for (w = q; w && (w = strstr(w + 1, "waitMs=")); w++)
		if (w[-1] == '?' || w[-1] == '&') {
			hold = strtoull(w + 7, NULL, 10);
			break;
		}
	return (c->timeout_ms ? c->timeout_ms : CLIENT_TIMEOUT_MS) +
	       MIN(hold, (uint64_t)STATION_MAX_WAIT_MS);
}

void station_client_set_timeout(struct station_client *c, uint64_t timeout_ms)
{
	c->timeout_ms = timeout_ms ? timeout_ms : CLIENT_TIMEOUT_MS;
	for (size_t i = 0; i < c->n_workers; i++)
		station_client_set_timeout(c->workers[i], timeout_ms);
}

/* STATION_TIMEOUT_MS, when it is a positive integer. */
static uint64_t timeout_from_env(void)
{
	const char *v = getenv("STATION_TIMEOUT_MS");
	unsigned long long ms;
	char *end;

	if (!v || *v < '0' || *v > '9')
		return CLIENT_TIMEOUT_MS;
	errno = 0;
	ms = strtoull(v, &end, 10);
	return errno == 0 && *end == '\0' && ms > 0 ? (uint64_t)ms : CLIENT_TIMEOUT_MS;
}

static int response_append(struct client_response *r, const void *data, size_t n)
{
	if (n > CLIENT_RESPONSE_MAX - r->len)
		return -E2BIG;
	if (r->len + n + 1 > r->cap) {
		size_t cap = MAX(r->cap * 2, r->len + n + 1);
		char *p = realloc(r->body, MIN(cap, (size_t)CLIENT_RESPONSE_MAX + 1));

		if (!p)
			return -ENOMEM;
		r->body = p;
		r->cap = MIN(cap, (size_t)CLIENT_RESPONSE_MAX + 1);
	}
	memcpy(r->body + r->len, data, n);
	r->len += n;
	r->body[r->len] = '\0';
	return 0;
}

int client_response_data(struct client_response *r, const void *data, size_t n)
{
	if (r->on_data && r->status / 100 == 2)
		r->stop = r->on_data(data, n, r->userdata);
	else
		r->stop = r->body_error = response_append(r, data, n);
	return r->stop;
}

void client_response_etag(struct client_response *r, const char *v, size_t len)
{
	if (!r->etag)
		return;
	while (len > 0 && (*v == ' ' || *v == '\t'))
		v++, len--;
	while (len > 0 && (v[len - 1] == '\r' || v[len - 1] == '\n' || v[len - 1] == ' '))
		len--;
	if (len < CLIENT_ETAG_MAX) {
		memcpy(r->etag, v, len);
		r->etag[len] = '\0';
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

int client_api_error(struct station_client *c, long status, const char *body)
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

/* One transfer. Returns 0 once a response arrived (r->status set, body kept or streamed), or
 * -errno with the error recorded. */
static int client_perform(struct station_client *c, const struct client_io *io,
			  struct client_response *r)
{
	int k;

	if (c->workers)
		return client_error(c, -EDESTADDRREQ,
				    "%s %.200s: with several workers, a request about no workspace "
				    "goes to one worker's handle (station_client_worker())",
				    io->method, io->path);
	c->transfer_status = 0;
	k = c->socket_path ? client_http1_perform(c, io, r) : client_curl_perform(c, io, r);
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
	return k;
}

int client_io(struct station_client *c, struct client_io *io)
{
	struct client_response resp = {
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
	c->fd = -1;
	c->timeout_ms = timeout_from_env();
	r = client_set_endpoint(c, endpoint);
	if (r < 0)
		return r;
	if (token) {
		char *header;

		if (asprintf(&header, "Authorization: Bearer %s", token) < 0)
			return -ENOMEM;
		c->auth_header = header;
	}
	*ret = TAKE_PTR(c);
	return 0;
}

struct station_client *station_client_free(struct station_client *c)
{
	if (!c)
		return NULL;
	for (size_t i = 0; i < c->n_workers; i++)
		station_client_free(c->workers[i]);
	free(c->workers);
	free(c->worker_name);
	client_http1_close(c);
	client_curl_free(c->curl);
	free(c->buf);
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

/* On a client over several workers, what the last call's worker said. */
static const struct station_client *last(const struct station_client *c)
{
	return c->current ? c->current : c;
}

const char *station_client_last_error(const struct station_client *c)
{
	return last(c)->error;
}

const char *station_client_last_error_code(const struct station_client *c)
{
	return last(c)->error_code;
}

long station_client_last_status(const struct station_client *c)
{
	return last(c)->last_status;
}

void station_client_set_interrupt(struct station_client *c, int (*check)(void *userdata),
				  void *userdata)
{
	c->interrupt = check;
	c->interrupt_userdata = userdata;
	for (size_t i = 0; i < c->n_workers; i++)
		station_client_set_interrupt(c->workers[i], check, userdata);
}

/* A raw request on a client over several workers goes where its path's workspace id says. */
static int route_path(struct station_client **c, const char *path)
{
	char id[129];
	size_t n;

	if (!(*c)->workers || !path || strncmp(path, "/v1/workspaces/", 15) != 0)
		return 0;
	n = strcspn(path + 15, "/?");
	if (n == 0 || n >= sizeof id)
		return 0;
	memcpy(id, path + 15, n);
	id[n] = '\0';
	return client_route(c, id);
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
	struct client_response resp = { .c = c, .io = &io };
	int r;

	r = route_path(&c, path);
	if (r < 0)
		return r;
	resp.c = c;
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

	r = route_path(&c, path);
	if (r < 0)
		return r;
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

/* 1 to 255 bytes of printable ASCII, as the server takes them. */
static bool idempotency_key_valid(const char *key)
{
	size_t n = strlen(key);

	if (n == 0 || n > STATION_IDEMPOTENCY_KEY_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)key[i] < 0x20 || (unsigned char)key[i] > 0x7e)
			return false;
	return true;
}

int client_create(struct station_client *c, const char *path, json_t *body, const char *key,
		  json_t **ret)
{
	_cleanup_free_ char *text = NULL;
	char header[sizeof "Idempotency-Key: " + STATION_IDEMPOTENCY_KEY_MAX];
	const char *const headers[] = { header, NULL };
	char made[33];
	struct client_io io = {
		.method = "POST",
		.path = path,
		.content_type = "Content-Type: application/json",
		.headers = headers,
		.upload_fd = -1,
	};
	struct client_response resp = { .c = c, .io = &io };
	uint8_t raw[16];
	int r;

	if (key && !idempotency_key_valid(key))
		return client_error(c, -EINVAL,
				    "idempotency key must be 1 to 255 printable ASCII characters");
	if (!key) { /* our own: the same on the transport's retry of this request */
		if (getrandom(raw, sizeof raw, 0) != sizeof raw)
			return client_error(c, -EIO, "no random bytes for an idempotency key");
		for (size_t i = 0; i < sizeof raw; i++)
			snprintf(made + 2 * i, 3, "%02x", raw[i]);
		key = made;
	}
	snprintf(header, sizeof header, "Idempotency-Key: %s", key);
	text = json_dumps(body, JSON_COMPACT);
	if (!text)
		return client_error(c, -ENOMEM, "out of memory");
	io.data = text;
	io.size = strlen(text);
	r = client_perform(c, &io, &resp);
	if (r >= 0)
		r = client_parse_reply(c, resp.status, resp.body ? resp.body : "", ret);
	free(resp.body);
	return r;
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
	struct client_response resp = { .c = c,
					.on_data = on_data,
					.userdata = userdata,
					.io = &io };
	_cleanup_free_ char *body = NULL;
	int r;

	r = route_path(&c, path);
	if (r < 0)
		return r;
	resp.c = c;
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

	/* '.' for a workspace's name (never first: no "." or ".." segment) */
	return n > 0 && n <= 128 && id[0] != '.' &&
	       strspn(id, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") == n;
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
	if (r >= 0)
		r = client_put_string(c, spec, "snapshot", o->snapshot);
	if (r >= 0)
		r = client_put_string(c, spec, "idleAction", o->idle_action);
	if (r >= 0 && o->auto_resume && json_object_set_new(spec, "autoResume", json_true()) < 0)
		r = client_error(c, -ENOMEM, "out of memory");
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
	if (o->idle_timeout_ms > 0)
		json_object_set_new(spec, "idleTimeoutMs",
				    json_integer((json_int_t)o->idle_timeout_ms));
	r = client_put_env(c, spec, o->env);
	if (r >= 0)
		r = client_put_labels(c, spec, o->name, o->labels);
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

/* A worker of the list must answer under the name it is listed as: the ids it makes start with
 * its own name, and an id naming another worker would be routed there (or nowhere). */
static int worker_check_name(struct station_client *w)
{
	_cleanup_json_ json_t *info = NULL;
	const char *name;
	int r;

	if (!w->worker_name)
		return 0;
	r = station_worker(w, &info);
	if (r < 0)
		return r;
	name = json_string_value(json_object_get(info, "name"));
	if (!name || strcmp(name, w->worker_name) != 0)
		return client_error(w, -EPROTO,
				    "worker %s (%s) answers as worker '%.64s': the ids it makes "
				    "would not route to it; list it as %.64s (or start it with "
				    "--worker %s)",
				    w->worker_name, w->endpoint, name ? name : "",
				    name ? name : "its name", w->worker_name);
	return 0;
}

/* A create from a snapshot goes to the worker that keeps it, which its id names (or the one
 * named, for an id that names none); else to the worker named, or to the one with most room. */
static int create_route(struct station_client **cp, const struct station_workspace_options *opts)
{
	struct station_client *c = *cp;
	char name[WORKER_NAME_MAX + 1];
	int r;

	if (!c->workers || !opts || !opts->snapshot)
		return client_route_create(cp, opts ? opts->worker : NULL);
	r = snapshot_id_worker(opts->snapshot, name);
	if (r == 0 && opts->worker)
		return client_route_create(cp, opts->worker);
	if (r > 0 && opts->worker && strcmp(opts->worker, name) != 0)
		return client_error(c, -EINVAL,
				    "snapshot %s is kept by worker %s: a workspace made from it "
				    "starts there, not on %.64s",
				    opts->snapshot, name, opts->worker);
	return client_route_snapshot(cp, opts->snapshot);
}

int station_workspace_create(struct station_client *c, const struct station_workspace_options *opts,
			     json_t **ret)
{
	_cleanup_json_ json_t *spec = NULL;
	int r;

	r = create_route(&c, opts);
	if (r < 0)
		return r;
	r = worker_check_name(c);
	if (r < 0)
		return r;
	r = workspace_spec(c, opts, &spec);
	if (r < 0)
		return r;
	return client_create(c, "/v1/workspaces", spec, opts ? opts->idempotency_key : NULL, ret);
}

/* Every worker's workspaces; an error only when no worker answered (the first one's). */
static int workspace_list_workers(struct station_client *c, json_t **ret)
{
	_cleanup_json_ json_t *all = NULL;
	json_t *unreachable;
	int r = station_workspace_list_all(c, &all);

	if (r < 0)
		return r;
	unreachable = json_object_get(all, "unreachable");
	if (json_array_size(unreachable) == c->n_workers)
		return client_error(c, -ECONNREFUSED, "%s",
				    json_string_value(json_object_get(
					    json_array_get(unreachable, 0), "error")));
	*ret = json_incref(json_object_get(all, "workspaces"));
	return 0;
}

int station_workspace_list(struct station_client *c, json_t **ret)
{
	_cleanup_json_ json_t *doc = NULL;
	json_t *list;
	int r;

	if (c->workers)
		return workspace_list_workers(c, ret);
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

	CLIENT_ROUTE(c, id);
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

	CLIENT_ROUTE(c, id);
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
