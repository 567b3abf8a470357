/* SPDX-License-Identifier: MIT */
/* Code contexts: create, list, get, delete, restart, interrupt; executions: execute, get, list,
 * follow; and reading a result's MIME bundle. */

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "basic/cleanup.h"
#include "basic/util.h"
#include "client-internal.h"

#define LANGUAGE_DEFAULT "python"
/* How long one wait for a recorded execution holds the server. */
#define EXECUTION_WAIT_MS 30000

static bool id_ok(const char *s)
{
	size_t n = s ? strlen(s) : 0;

	return n > 0 && n <= 128 &&
	       strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") == n;
}

/* "/v1/workspaces/{ws}/contexts[/{cid}[/executions[/{eid}]]]" + suffix. */
static int context_path(struct station_client *c, const char *ws, const char *cid, const char *eid,
			const char *suffix, char **ret)
{
	_cleanup_free_ char *tail = NULL;

	if (cid && !id_ok(cid))
		return client_error(c, -EINVAL, "invalid context id '%s'", cid);
	if (eid && !id_ok(eid))
		return client_error(c, -EINVAL, "invalid execution id '%s'", eid);
	if (asprintf(&tail, "/contexts%s%s%s%s%s", cid ? "/" : "", cid ? cid : "",
		     eid ? "/executions/" : "", eid ? eid : "", suffix ? suffix : "") < 0)
		return client_error(c, -ENOMEM, "out of memory");
	return client_path(c, ws, NULL, tail, ret);
}

static int context_call(struct station_client *c, const char *method, const char *ws,
			const char *cid, const char *suffix, json_t *body, json_t **ret)
{
	_cleanup_free_ char *path = NULL;
	int r;

	if (!cid)
		return client_error(c, -EINVAL, "no context id given");
	r = context_path(c, ws, cid, NULL, suffix, &path);
	if (r < 0)
		return r;
	return station_request_json(c, method, path, body, ret);
}

/* GET path's object and its array member key. */
static int get_list(struct station_client *c, const char *path, const char *key, json_t **ret)
{
	_cleanup_json_ json_t *doc = NULL;
	json_t *list;
	int r;

	r = station_request_json(c, "GET", path, NULL, &doc);
	if (r < 0)
		return r;
	list = json_object_get(doc, key);
	if (!json_is_array(list))
		return client_error(c, -EPROTO, "%s answered without \"%s\"",
				    station_client_endpoint(c), key);
	*ret = json_incref(list);
	return 0;
}

int station_context_create(struct station_client *c, const char *ws,
			   const struct station_context_options *opts, json_t **ret)
{
	CLIENT_ROUTE(c, ws);
	static const struct station_context_options none = {};
	_cleanup_json_ json_t *body = json_object();
	_cleanup_free_ char *path = NULL;
	int r;

	if (!opts)
		opts = &none;
	if (!body)
		return client_error(c, -ENOMEM, "out of memory");
	r = client_put_string(c, body, "language",
			      opts->language ? opts->language : LANGUAGE_DEFAULT);
	if (r >= 0)
		r = client_put_string(c, body, "cwd", opts->cwd);
	if (r >= 0)
		r = client_put_env(c, body, opts->env);
	if (r >= 0)
		r = context_path(c, ws, NULL, NULL, NULL, &path);
	if (r < 0)
		return r;
	return station_request_json(c, "POST", path, body, ret);
}

int station_context_list(struct station_client *c, const char *ws, json_t **ret)
{
	CLIENT_ROUTE(c, ws);
	_cleanup_free_ char *path = NULL;
	int r;

	r = context_path(c, ws, NULL, NULL, NULL, &path);
	if (r < 0)
		return r;
	return get_list(c, path, "contexts", ret);
}

int station_context_get(struct station_client *c, const char *ws, const char *cid, json_t **ret)
{
	CLIENT_ROUTE(c, ws);
	return context_call(c, "GET", ws, cid, NULL, NULL, ret);
}

int station_context_delete(struct station_client *c, const char *ws, const char *cid)
{
	CLIENT_ROUTE(c, ws);
	return context_call(c, "DELETE", ws, cid, NULL, NULL, NULL);
}

int station_context_restart(struct station_client *c, const char *ws, const char *cid, json_t **ret)
{
	CLIENT_ROUTE(c, ws);
	return context_call(c, "POST", ws, cid, "/restart", NULL, ret);
}

int station_context_interrupt(struct station_client *c, const char *ws, const char *cid,
			      json_t **ret)
{
	CLIENT_ROUTE(c, ws);
	return context_call(c, "POST", ws, cid, "/interrupt", NULL, ret);
}

int station_context_execute(struct station_client *c, const char *ws, const char *cid,
			    const struct station_execute_options *opts, json_t **ret)
{
	CLIENT_ROUTE(c, ws);
	_cleanup_json_ json_t *body = json_object();
	char suffix[48] = "/execute";
	int r;

	if (!opts || !opts->code)
		return client_error(c, -EINVAL, "no code given");
	if (!body)
		return client_error(c, -ENOMEM, "out of memory");
	r = client_put_string(c, body, "code", opts->code);
	if (r < 0)
		return r;
	if (opts->timeout_ms > 0)
		json_object_set_new(body, "timeoutMs", json_integer((json_int_t)opts->timeout_ms));
	if (opts->wait_ms > 0)
		snprintf(suffix, sizeof(suffix), "/execute?waitMs=%" PRIu64,
			 MIN(opts->wait_ms, (uint64_t)STATION_MAX_WAIT_MS));
	return context_call(c, "POST", ws, cid, suffix, body, ret);
}

int station_execution_get(struct station_client *c, const char *ws, const char *cid,
			  const char *eid, uint64_t wait_ms, json_t **ret)
{
	CLIENT_ROUTE(c, ws);
	_cleanup_free_ char *path = NULL;
	char suffix[40] = "";
	int r;

	if (!cid || !eid)
		return client_error(c, -EINVAL, "no context or execution id given");
	if (wait_ms > 0)
		snprintf(suffix, sizeof(suffix), "?waitMs=%" PRIu64,
			 MIN(wait_ms, (uint64_t)STATION_MAX_WAIT_MS));
	r = context_path(c, ws, cid, eid, suffix, &path);
	if (r < 0)
		return r;
	return station_request_json(c, "GET", path, NULL, ret);
}

int station_execution_list(struct station_client *c, const char *ws, const char *cid, json_t **ret)
{
	CLIENT_ROUTE(c, ws);
	_cleanup_free_ char *path = NULL;
	int r;

	if (!cid)
		return client_error(c, -EINVAL, "no context id given");
	r = context_path(c, ws, cid, NULL, "/executions", &path);
	if (r < 0)
		return r;
	return get_list(c, path, "executions", ret);
}

bool station_execution_is_done(const json_t *execution)
{
	const char *s = json_string_value(json_object_get(execution, "status"));

	return s && strcmp(s, "running") != 0;
}

/* The cell's run ends a moment before its result is recorded: waits for that. */
static int execution_wait(struct station_client *c, const char *ws, const char *cid,
			  const char *eid, json_t **ret)
{
	for (;;) {
		_cleanup_json_ json_t *doc = NULL;
		int r;

		r = station_execution_get(c, ws, cid, eid, EXECUTION_WAIT_MS, &doc);
		if (r < 0)
			return r;
		if (station_execution_is_done(doc)) {
			if (ret)
				*ret = TAKE_PTR(doc);
			return 0;
		}
		if (c->interrupt && c->interrupt(c->interrupt_userdata))
			return client_error(c, -EINTR, "interrupted");
	}
}

int station_execution_follow(struct station_client *c, const char *ws, const char *cid,
			     const char *eid, const struct station_follow_callbacks *cb,
			     void *userdata, json_t **ret)
{
	CLIENT_ROUTE(c, ws);
	_cleanup_free_ char *path = NULL;
	char what[160];
	int r;

	if (!cid || !eid)
		return client_error(c, -EINVAL, "no context or execution id given");
	r = context_path(c, ws, cid, eid, "/output", &path);
	if (r < 0)
		return r;
	snprintf(what, sizeof(what), "execution %s", eid);
	r = client_follow(c, path, what, true, cb, userdata, NULL);
	if (r < 0)
		return r;
	return execution_wait(c, ws, cid, eid, ret);
}

static bool mime_is_text(const char *mime)
{
	return strncmp(mime, "text/", 5) == 0 || strcmp(mime, "application/json") == 0 ||
	       strstr(mime, "+json") || strstr(mime, "+xml") ||
	       strcmp(mime, "application/javascript") == 0;
}

int station_result_data(const json_t *result, const char *mime, char **ret, size_t *ret_len)
{
	json_t *v = json_object_get(json_object_get(result, "data"), mime);
	_cleanup_free_ uint8_t *bytes = NULL;
	_cleanup_free_ char *packed = NULL;
	size_t n, k = 0;
	char *out;

	if (!v)
		return 0;
	if (mime_is_text(mime) && !json_is_string(v)) {
		/* application/json: a JSON value, given as its text. */
		out = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
		if (!out)
			return -ENOMEM;
		*ret_len = strlen(out);
		*ret = out;
		return 1;
	}
	if (!json_is_string(v))
		return -EPROTO;
	if (mime_is_text(mime)) {
		n = json_string_length(v);
		out = malloc(n + 1);
		if (!out)
			return -ENOMEM;
		memcpy(out, json_string_value(v), n);
		out[n] = '\0';
		*ret = out;
		*ret_len = n;
		return 1;
	}
	/* Kernels wrap base64 in lines (IPython ends it with one newline); base64_decode() leaves
	 * a NUL after the bytes. */
	packed = strdup(json_string_value(v));
	if (!packed)
		return -ENOMEM;
	for (const char *p = json_string_value(v); *p; p++)
		if (!strchr(" \t\r\n", *p))
			packed[k++] = *p;
	if (base64_decode(packed, k, &bytes, &n) < 0)
		return -EPROTO;
	*ret = (char *)TAKE_PTR(bytes);
	*ret_len = n;
	return 1;
}
