/* SPDX-License-Identifier: MIT */
/* GET /v1/ready, GET /v1/worker, GET /v1/openapi.json. */
#include <errno.h>
#include <microhttpd.h>
#include <stdlib.h>
#include <string.h>

#include "api/auth.h"
#include "api/http.h"
#include "api/openapi.h"
#include "daemon/manager.h"

static int ready_reply(struct http_request *req, json_t *ready)
{
	unsigned status;

	if (!ready)
		return http_reply_status(req, 500, NULL, "readiness checks failed to run");
	status = json_is_true(json_object_get(ready, "ready")) ? 200 : 503;
	return http_reply_json(req, status, ready);
}

/* A request waiting for a check under way (the first one, or ?refresh=1). */
struct ready_wait {
	struct http_request *req;
	struct ready_waiter *waiter; /* NULL once called */
	json_t *result;
	bool ended;
};

static void ready_wait_free(void *userdata)
{
	struct ready_wait *w = userdata;

	manager_ready_forget(w->waiter);
	json_decref(w->result);
	free(w);
}

static int ready_resumed(struct http_request *req)
{
	struct ready_wait *w = http_request_state(req);
	json_t *result = w ? w->result : NULL;
	int r;

	if (w)
		w->result = NULL;
	r = ready_reply(req, result);
	http_request_set_state(req, NULL, NULL);
	return r;
}

static void on_ready(void *userdata, json_t *result)
{
	struct ready_wait *w = userdata;

	w->waiter = NULL;
	w->ended = true;
	w->result = result;
	http_request_resume(w->req);
}

/* Answered from the last check (no process is spawned here); ?refresh=1 waits, suspended, for
 * a check that begins after the request. */
int api_ready(struct http_request *req)
{
	bool present = false;
	const char *refresh = http_request_query(req, "refresh", &present);
	bool fresh = present && (!refresh || !refresh[0] || strcmp(refresh, "1") == 0 ||
				 strcmp(refresh, "true") == 0);
	struct ready_wait *w;
	json_t *ready;

	if (present && !fresh && strcmp(refresh, "0") != 0 && strcmp(refresh, "false") != 0)
		return http_reply_status(req, 400, "refresh",
					 "refresh is 1, true, 0 or false, not \"%.64s\"", refresh);
	w = calloc(1, sizeof *w);
	if (!w)
		return http_reply_status(req, 500, NULL, "out of memory");
	w->req = req;
	ready = manager_ready(http_request_manager(req), fresh, on_ready, w, &w->waiter);
	if (ready || !w->waiter) {
		free(w);
		return ready_reply(req, ready);
	}
	http_request_set_state(req, w, ready_wait_free);
	if (http_request_suspend(req, ready_resumed) < 0) {
		http_request_set_state(req, NULL, NULL);
		return http_reply_status(req, 500, NULL, "cannot wait for the check");
	}
	return 0;
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

/* Who the caller is here, so that a client placing a create knows which private worker is its
 * own (docs/operations.md, "Placement"). */
static void worker_add_caller(struct http_request *req, json_t *worker)
{
	const struct auth_principal *p = http_request_principal(req);

	json_object_set_new(worker, "caller",
			    json_pack("{s:s,s:s?}", "scope", auth_scope_to_string(p->scope),
				      "tenant", p->tenant[0] ? p->tenant : NULL));
}

/* A tenant sees its own activity only (docs/security.md, "The tenant boundary"): the
 * connection counts and the warm pools' ready, starting and claimed counts move with every
 * tenant's requests and creates, so a tenant's view keeps their limits and sizes only. */
static void worker_hide_others(struct http_request *req, json_t *worker)
{
	static const char *const counts[] = { "open", "longLived", "refused", "refusedLongLived" };
	const struct auth_principal *p = http_request_principal(req);
	json_t *connections = json_object_get(worker, "connections"), *pool;
	size_t i;

	if (!p->tenant[0])
		return;
	for (i = 0; i < sizeof counts / sizeof *counts; i++)
		json_object_del(connections, counts[i]);
	json_array_foreach(json_object_get(worker, "pools"), i, pool) {
		json_object_del(pool, "ready");
		json_object_del(pool, "starting");
		json_object_del(pool, "claimed");
	}
}

int api_worker(struct http_request *req)
{
	json_t *worker = manager_worker(http_request_manager(req));

	if (!worker)
		return http_reply_status(req, 500, NULL, "worker description failed");
	worker_add_http_limits(req, worker);
	worker_add_connections(req, worker);
	worker_add_caller(req, worker);
	worker_hide_others(req, worker);
	return http_reply_json(req, 200, worker);
}

/* The description of this API (docs/openapi.yaml), as built in: the same for every request. */
int api_openapi(struct http_request *req)
{
	struct MHD_Response *r;
	int ret;

	r = MHD_create_response_from_buffer(openapi_json_size, (void *)openapi_json,
					    MHD_RESPMEM_PERSISTENT);
	if (!r)
		return -ENOMEM;
	if (MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json") !=
		    MHD_YES ||
	    MHD_add_response_header(r, MHD_HTTP_HEADER_ETAG, openapi_json_etag) != MHD_YES ||
	    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache") != MHD_YES) {
		MHD_destroy_response(r);
		return -ENOMEM;
	}
	ret = http_reply_response(req, 200, r);
	MHD_destroy_response(r);
	return ret;
}
