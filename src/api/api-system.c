/* SPDX-License-Identifier: MIT */
/* GET /v1/ready, GET /v1/worker. */
#include <errno.h>

#include "api/http.h"
#include "daemon/manager.h"

int api_ready(struct http_request *req)
{
	json_t *ready = manager_ready(http_request_manager(req));
	unsigned status;

	if (!ready)
		return http_reply_status(req, 500, NULL, "readiness checks failed to run");
	status = json_is_true(json_object_get(ready, "ready")) ? 200 : 503;
	return http_reply_json(req, status, ready);
}

/* The manager knows its own limits; the HTTP ones are ours. */
static void worker_add_http_limits(struct http_request *req, json_t *worker)
{
	json_t *limits = json_object_get(worker, "limits");

	if (!json_is_object(limits)) {
		limits = json_object();
		if (!limits || json_object_set_new(worker, "limits", limits) < 0)
			return;
	}
	json_object_set_new(limits, "maxWaitMs",
			    json_integer((json_int_t)http_request_max_wait_ms(req)));
	json_object_set_new(limits, "maxBodyBytes",
			    json_integer((json_int_t)http_request_max_body_bytes(req)));
}

/* The connection table, as the accept path sees it (all listeners together). */
static void worker_add_connections(struct http_request *req, json_t *worker)
{
	const struct http_connections *c = http_request_connections(req);
	json_t *limits = json_object_get(worker, "limits");

	json_object_set_new(limits, "maxConnections", json_integer(c->limit));
	json_object_set_new(limits, "reservedConnections", json_integer(c->reserve));
	json_object_set_new(
		worker, "connections",
		json_pack("{s:I,s:I,s:I,s:I,s:I,s:I}", "open", (json_int_t)c->open, "longLived",
			  (json_int_t)c->long_lived, "limit", (json_int_t)c->limit,
			  "longLivedLimit", (json_int_t)(c->limit - c->reserve), "refused",
			  (json_int_t)c->refused, "refusedLongLived", (json_int_t)c->refused_long));
}

int api_worker(struct http_request *req)
{
	json_t *worker = manager_worker(http_request_manager(req));

	if (!worker)
		return http_reply_status(req, 500, NULL, "worker description failed");
	worker_add_http_limits(req, worker);
	worker_add_connections(req, worker);
	return http_reply_json(req, 200, worker);
}
