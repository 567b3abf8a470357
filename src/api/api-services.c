/* SPDX-License-Identifier: MIT */
/* /v1/workspaces/{id}/services: create, list, get, stop, restart, delete, logs (SSE). */
#include <errno.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "api/http.h"
#include "api/idempotency.h"
#include "daemon/manager.h"
#include "api/router.h"
#include "api/sse.h"
#include "api/validate.h"
#include "event/event.h"

/* Stop answers once the service is at rest, at most its stopTimeoutMs plus this after the
 * request (the SIGKILL, the drain of its pipes, the agent's report). */
#define STOP_WAIT_MARGIN_MS 5000u

/* A code context's kernel is a service of the workspace's agent that no client names: its
 * name answers as a missing service (and a create with it is refused). */
static int refuse_hidden(struct http_request *req, const char *name)
{
	if (strncmp(name, CONTEXT_SERVICE_PREFIX, strlen(CONTEXT_SERVICE_PREFIX)) != 0)
		return 0;
	return http_reply_status(req, 404, NULL, "service \"%s\" not found in workspace \"%s\"",
				 name, http_request_route(req)->ws_id) ?: 1;
}

struct stop_wait {
	struct http_request *req;
	struct service_waiter *waiter;
	struct event_source *timer;
};

int api_service_create(struct http_request *req)
{
	const struct route_match *m = http_request_route(req);
	struct station_error e = {};
	struct service_spec spec = {};
	struct api_idempotency idem;
	struct idempotency_hit hit;
	json_t *body = NULL, *svc = NULL;
	int r;

	r = api_idempotency_begin(req, &idem, &hit);
	if (r < 0 || r == IDEMPOTENCY_REPLIED)
		return r;
	if (r == IDEMPOTENCY_REPLAY) {
		r = manager_service_get(http_request_manager(req), m->ws_id, hit.object_id, &svc,
					&e);
		if (r == -ENOENT)
			return api_idempotency_reply_gone(req, &idem, "service", hit.object_id);
		return api_reply_result(req, r, hit.status, svc, &e);
	}
	r = api_request_json(req, false, &body, &e);
	if (r >= 0)
		r = validate_service_spec(body, &spec, &e);
	if (r >= 0 &&
	    strncmp(spec.name, CONTEXT_SERVICE_PREFIX, strlen(CONTEXT_SERVICE_PREFIX)) == 0)
		r = station_error_set(&e, -EINVAL, "name",
				      "service names starting with \"" CONTEXT_SERVICE_PREFIX
				      "\" are kept for code contexts' kernels");
	if (r >= 0)
		r = manager_service_start(http_request_manager(req), m->ws_id, &spec, &svc, &e);
	json_decref(body);
	api_idempotency_end(req, &idem,
			    r < 0 ? NULL : json_string_value(json_object_get(svc, "name")), 201);
	return api_reply_result(req, r, 201, svc, &e);
}

int api_service_list(struct http_request *req)
{
	const struct route_match *m = http_request_route(req);
	struct station_error e = {};
	json_t *list = NULL;
	int r;

	r = manager_service_list(http_request_manager(req), m->ws_id, &list, &e);
	if (r >= 0)
		list = api_wrap_list(list, "services");
	return api_reply_result(req, r, 200, list, &e);
}

typedef int (*service_call_fn)(struct manager *m, const char *ws_id, const char *name, json_t **ret,
			       struct station_error *e);

static int service_call(struct http_request *req, service_call_fn fn)
{
	const struct route_match *m = http_request_route(req);
	struct station_error e = {};
	json_t *svc = NULL;
	int r = refuse_hidden(req, m->run_id);

	if (r != 0)
		return r < 0 ? r : 0;
	r = fn(http_request_manager(req), m->ws_id, m->run_id, &svc, &e);
	return api_reply_result(req, r, 200, svc, &e);
}

int api_service_get(struct http_request *req)
{
	return service_call(req, manager_service_get);
}

static void stop_wait_free(void *userdata)
{
	struct stop_wait *p = userdata;

	manager_service_waiter_cancel(p->waiter);
	event_source_free(p->timer);
	free(p);
}

static void on_service_rest(void *userdata, bool at_rest)
{
	struct stop_wait *p = userdata;

	(void)at_rest;	  /* gone: the GET below says so */
	p->waiter = NULL; /* freed once called */
	http_request_resume(p->req);
}

static int on_stop_timeout(struct event_source *s, uint64_t now, void *userdata)
{
	struct stop_wait *p = userdata;

	manager_service_waiter_cancel(p->waiter);
	p->waiter = NULL;
	http_request_resume(p->req);
	return 0;
}

static int stop_resumed(struct http_request *req)
{
	http_request_set_state(req, NULL, NULL);
	return service_call(req, manager_service_get);
}

/* Stops the service and answers once it is at rest (stopped), or with it as it is when the
 * bound passed. */
int api_service_stop(struct http_request *req)
{
	const struct route_match *m = http_request_route(req);
	struct manager *mgr = http_request_manager(req);
	struct station_error e = {};
	struct stop_wait *p;
	json_t *svc = NULL;
	uint64_t wait_ms;
	int r = refuse_hidden(req, m->run_id);

	if (r != 0)
		return r < 0 ? r : 0;
	r = manager_service_stop(mgr, m->ws_id, m->run_id, &svc, &e);
	if (r < 0)
		return http_reply_error(req, &e);
	wait_ms = manager_service_stop_timeout_ms(mgr, m->ws_id, m->run_id) + STOP_WAIT_MARGIN_MS;
	p = calloc(1, sizeof *p);
	if (!p)
		return api_reply_result(req, 0, 200, svc, &e);
	p->req = req;
	r = manager_service_wait_rest(mgr, m->ws_id, m->run_id, on_service_rest, p, &p->waiter, &e);
	if (r == 0)
		r = event_add_timer(http_request_loop(req), &p->timer, now_usec() + wait_ms * 1000,
				    on_stop_timeout, p);
	if (r != 0) {
		stop_wait_free(p);
		return api_reply_result(req, 0, 200, svc, &e); /* at rest already */
	}
	json_decref(svc);
	http_request_set_state(req, p, stop_wait_free);
	r = http_request_suspend(req, stop_resumed);
	if (r < 0) {
		http_request_set_state(req, NULL, NULL);
		return service_call(req, manager_service_get);
	}
	return 0;
}

int api_service_restart(struct http_request *req)
{
	return service_call(req, manager_service_restart);
}

int api_service_delete(struct http_request *req)
{
	const struct route_match *m = http_request_route(req);
	struct station_error e = {};
	int r = refuse_hidden(req, m->run_id);

	if (r != 0)
		return r < 0 ? r : 0;
	r = manager_service_delete(http_request_manager(req), m->ws_id, m->run_id, &e);
	if (r < 0)
		return http_reply_error(req, &e);
	return http_reply_json(req, 200, json_pack("{s:s,s:b}", "name", m->run_id, "deleted", 1));
}

/* ---- logs ---------------------------------------------------------------------------------- */

/* attempt: 0 for the one follow chooses, else that attempt (a follower watching again). */
static int logs_watch(struct http_request *req, bool follow, uint64_t attempt, const uint64_t *from,
		      const struct run_watch_ops *ops, void *userdata, void **ret,
		      struct station_error *e)
{
	const struct route_match *m = http_request_route(req);
	struct manager *mgr = http_request_manager(req);
	struct service_watch *w = NULL;
	int r = attempt ? manager_service_watch_attempt(mgr, m->ws_id, m->run_id, attempt, from,
							ops, userdata, &w, e) :
			  manager_service_watch(mgr, m->ws_id, m->run_id, follow, from, ops,
						userdata, &w, e);

	if (r >= 0)
		*ret = w;
	return r;
}

static int logs_watch_follow(struct http_request *req, uint64_t attempt, const uint64_t *from,
			     const struct run_watch_ops *ops, void *userdata, void **ret,
			     struct station_error *e)
{
	return logs_watch(req, true, attempt, from, ops, userdata, ret, e);
}

static int logs_watch_once(struct http_request *req, uint64_t attempt, const uint64_t *from,
			   const struct run_watch_ops *ops, void *userdata, void **ret,
			   struct station_error *e)
{
	return logs_watch(req, false, attempt, from, ops, userdata, ret, e);
}

static void logs_unwatch(void *watch)
{
	manager_service_unwatch(watch);
}

static uint64_t logs_shown(void *watch)
{
	return manager_service_watch_number(watch);
}

static int logs_end(struct http_request *req, json_t **ret, struct station_error *e)
{
	const struct route_match *m = http_request_route(req);

	return manager_service_get(http_request_manager(req), m->ws_id, m->run_id, ret, e);
}

static const struct sse_source follow_source = {
	.watch = logs_watch_follow,
	.unwatch = logs_unwatch,
	.shown = logs_shown,
	.end = logs_end,
};

static const struct sse_source once_source = {
	.watch = logs_watch_once,
	.unwatch = logs_unwatch,
	.shown = logs_shown,
	.end = logs_end,
};

/* ?follow=1: the current attempt, live; absent or 0: the newest finished attempt. */
int api_service_logs(struct http_request *req)
{
	const struct route_match *m = http_request_route(req);
	struct station_error e = {};
	uint64_t follow = 0;
	bool present;
	const char *v = http_request_query(req, "follow", &present);
	char label[128];
	int r = refuse_hidden(req, m->run_id);

	if (r != 0)
		return r < 0 ? r : 0;
	if (present && validate_query_u64("follow", v, 0, 1, &follow, &e) < 0)
		return http_reply_error(req, &e);
	snprintf(label, sizeof label, "service %s", m->run_id);
	return sse_start_source(req, follow ? &follow_source : &once_source, label);
}
