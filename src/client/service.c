/* SPDX-License-Identifier: MIT */
/* Services: start, list, get, stop, restart, delete, and their logs (server-sent events). */

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "basic/cleanup.h"
#include "client-internal.h"

static bool name_is_valid(const char *s)
{
	size_t n = s ? strlen(s) : 0;

	return n > 0 && n <= 63 && strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789._-") == n &&
	       s[0] != '.' && s[0] != '_' && s[0] != '-';
}

/* "/v1/workspaces/{ws}/services[/{name}][suffix]" */
static int service_path(struct station_client *c, const char *ws, const char *name,
			const char *suffix, char **ret)
{
	char tail[160];

	if (name && !name_is_valid(name))
		return client_error(c, -EINVAL,
				    "invalid service name '%s' (want [a-z0-9][a-z0-9._-]{0,62})",
				    name);
	snprintf(tail, sizeof(tail), "/services%s%s%s", name ? "/" : "", name ? name : "",
		 suffix ? suffix : "");
	return client_path(c, ws, NULL, tail, ret);
}

static int put_restart(struct station_client *c, json_t *body,
		       const struct station_service_options *o)
{
	_cleanup_json_ json_t *restart = json_object();
	int r;

	if (!restart)
		return client_error(c, -ENOMEM, "out of memory");
	r = client_put_string(c, restart, "policy", o->restart_policy);
	if (r < 0)
		return r;
	if (o->max_restarts >= 0)
		json_object_set_new(restart, "maxRestarts", json_integer(o->max_restarts));
	if (o->delay_ms >= 0)
		json_object_set_new(restart, "delayMs", json_integer(o->delay_ms));
	if (o->reset_after_ms != 0)
		json_object_set_new(restart, "resetAfterMs",
				    json_integer(o->reset_after_ms > 0 ? o->reset_after_ms : 0));
	if (o->backoff_multiplier > 0) {
		json_t *b = json_pack("{s:f}", "multiplier", o->backoff_multiplier);

		if (b && o->max_delay_ms >= 0)
			json_object_set_new(b, "maxDelayMs", json_integer(o->max_delay_ms));
		json_object_set_new(restart, "backoff", b);
	}
	if (json_object_size(restart) > 0)
		json_object_set_new(body, "restart", TAKE_PTR(restart));
	return 0;
}

static int service_body(struct station_client *c, const struct station_service_options *o,
			json_t **ret)
{
	_cleanup_json_ json_t *body = json_object();
	int r;

	if (!body)
		return client_error(c, -ENOMEM, "out of memory");
	r = client_put_string(c, body, "name", o->name);
	if (r >= 0)
		r = client_put_string(c, body, "command", o->command);
	if (r >= 0)
		r = client_put_string(c, body, "cwd", o->cwd);
	if (r >= 0)
		r = client_put_string(c, body, "stopSignal", o->stop_signal);
	if (r >= 0)
		r = client_put_env(c, body, o->env);
	if (r >= 0)
		r = put_restart(c, body, o);
	if (r < 0)
		return r;
	if (o->stop_timeout_ms >= 0)
		json_object_set_new(body, "stopTimeoutMs", json_integer(o->stop_timeout_ms));
	if (o->autostart)
		json_object_set_new(body, "autostart", json_true());
	*ret = TAKE_PTR(body);
	return 0;
}

int station_service_start(struct station_client *c, const char *ws,
			  const struct station_service_options *opts, json_t **ret)
{
	CLIENT_ROUTE(c, ws);
	_cleanup_json_ json_t *body = NULL;
	_cleanup_free_ char *path = NULL;
	int r;

	if (!opts || !opts->name || !opts->command)
		return client_error(c, -EINVAL, "a service needs a name and a command");
	r = service_path(c, ws, NULL, NULL, &path);
	if (r >= 0)
		r = service_body(c, opts, &body);
	if (r < 0)
		return r;
	return client_create(c, path, body, opts->idempotency_key, ret);
}

int station_service_list(struct station_client *c, const char *ws, json_t **ret)
{
	CLIENT_ROUTE(c, ws);
	_cleanup_json_ json_t *doc = NULL;
	_cleanup_free_ char *path = NULL;
	json_t *list;
	int r;

	r = service_path(c, ws, NULL, NULL, &path);
	if (r >= 0)
		r = station_request_json(c, "GET", path, NULL, &doc);
	if (r < 0)
		return r;
	list = json_object_get(doc, "services");
	if (!json_is_array(list))
		return client_error(c, -EPROTO, "%s answered without \"services\"",
				    station_client_endpoint(c));
	*ret = json_incref(list);
	return 0;
}

static int service_call(struct station_client *c, const char *method, const char *ws,
			const char *name, const char *suffix, json_t **ret)
{
	_cleanup_free_ char *path = NULL;
	int r;

	if (!name)
		return client_error(c, -EINVAL, "no service name given");
	r = service_path(c, ws, name, suffix, &path);
	if (r < 0)
		return r;
	return station_request_json(c, method, path, NULL, ret);
}

int station_service_get(struct station_client *c, const char *ws, const char *name, json_t **ret)
{
	CLIENT_ROUTE(c, ws);
	return service_call(c, "GET", ws, name, NULL, ret);
}

int station_service_stop(struct station_client *c, const char *ws, const char *name, json_t **ret)
{
	CLIENT_ROUTE(c, ws);
	return service_call(c, "POST", ws, name, "/stop", ret);
}

int station_service_restart(struct station_client *c, const char *ws, const char *name,
			    json_t **ret)
{
	CLIENT_ROUTE(c, ws);
	return service_call(c, "POST", ws, name, "/restart", ret);
}

int station_service_delete(struct station_client *c, const char *ws, const char *name, json_t **ret)
{
	CLIENT_ROUTE(c, ws);
	return service_call(c, "DELETE", ws, name, NULL, ret);
}

int station_service_logs(struct station_client *c, const char *ws, const char *name, bool follow,
			 const struct station_follow_callbacks *cb, void *userdata, json_t **ret)
{
	CLIENT_ROUTE(c, ws);
	_cleanup_free_ char *path = NULL;
	char what[96];
	int r;

	if (!name)
		return client_error(c, -EINVAL, "no service name given");
	r = service_path(c, ws, name, follow ? "/logs?follow=1" : "/logs", &path);
	if (r < 0)
		return r;
	snprintf(what, sizeof(what), "service %s", name);
	return client_follow(c, path, what, true, cb, userdata, ret);
}
