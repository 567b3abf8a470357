/* SPDX-License-Identifier: MIT */
/* /v1/workspaces: list, create, get, delete, restart, fork, network. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "api/auth.h"
#include "api/http.h"
#include "api/idempotency.h"
#include "basic/cleanup.h"
#include "daemon/manager.h"
#include "domain/labels.h"
#include "api/router.h"
#include "api/validate.h"

/* Wraps what the manager lists (an array, or already {"key":[…]}) as {"key":[…]}. */
json_t *api_wrap_list(json_t *list, const char *key)
{
	json_t *o;

	if (!json_is_array(list))
		return list;
	o = json_object();
	if (!o || json_object_set_new(o, key, list) < 0) {
		json_decref(o);
		return NULL;
	}
	return o;
}

int api_request_json(struct http_request *req, bool allow_empty, json_t **ret,
		     struct station_error *e)
{
	size_t n;
	const void *data = http_request_body(req, &n);

	return validate_body(data, n, allow_empty, ret, e);
}

int api_reply_result(struct http_request *req, int r, unsigned status, json_t *result,
		     const struct station_error *e)
{
	if (r < 0)
		return http_reply_error(req, e);
	if (!result)
		return http_reply_status(req, 500, NULL, "out of memory");
	return http_reply_json(req, status, result);
}

/* ?label=KEY[=VALUE] (repeated: all hold), ?name=, ?state= (docs/api.md, "Names and labels"). */
static int list_filter(struct http_request *req, struct workspace_filter *f,
		       const char *labels[LABELS_MAX + 1], struct station_error *e)
{
	size_t n = http_request_query_all(req, "label", labels, LABELS_MAX);
	int r = 0;

	if (n > LABELS_MAX)
		return station_error_set(e, -EINVAL, "label", "%zu label selectors: at most %d", n,
					 LABELS_MAX);
	labels[n] = NULL;
	for (size_t i = 0; i < n && r >= 0; i++)
		r = validate_label_selector(labels[i], e);
	f->labels = labels;
	f->name = http_request_query(req, "name", NULL);
	if (r >= 0 && f->name && workspace_name_check(f->name, e) < 0)
		r = -EINVAL;
	f->state = http_request_query(req, "state", NULL);
	if (r >= 0 && f->state && workspace_state_from_string(f->state) < 0)
		r = station_error_set(e, -EINVAL, "state",
				      "query \"state\" is \"%.64s\", not a workspace state",
				      f->state);
	return r;
}

int api_workspace_list(struct http_request *req)
{
	struct station_error e = {};
	const char *labels[LABELS_MAX + 1];
	struct workspace_filter f = {};
	json_t *list = NULL;
	int r;

	r = list_filter(req, &f, labels, &e);
	if (r >= 0)
		r = manager_workspace_list(http_request_manager(req), &f, &list, &e);
	if (r >= 0)
		list = api_wrap_list(list, "workspaces");
	return api_reply_result(req, r, 200, list, &e);
}

/* Create, delete and restart answer once the manager's operation ends (its slow steps run off
 * the loop): the request waits suspended meanwhile. */
struct op_wait {
	struct http_request *req;
	struct workspace_op *op; /* NULL once it ended */
	unsigned status;
	char *ws_id; /* delete: the answer's id */
	/* a create whose workspace is not made yet (a warm pool's claim resolving its spec): its
	 * Idempotency-Key is recorded when it ends, naming the workspace it made */
	struct api_idempotency idem;
	struct manager *m;
	bool ended;
	int r;
	json_t *result;
	struct station_error e;
};

static void op_wait_free(void *userdata)
{
	struct op_wait *w = userdata;

	manager_workspace_op_forget(w->op);
	if (w->idem.claimed) /* the client went away first: the key is free again */
		manager_idempotency_finish(w->m, w->idem.scope, w->idem.key, NULL, 0);
	json_decref(w->result);
	free(w->ws_id);
	free(w);
}

static int op_resumed(struct http_request *req)
{
	struct op_wait *w = http_request_state(req);
	json_t *result;
	int r;

	if (!w || !w->ended)
		return http_reply_status(req, 500, NULL, "the wait was lost");
	if (w->r < 0)
		r = http_reply_error(req, &w->e);
	else if (w->ws_id) {
		result = json_pack("{s:s, s:s}", "id", w->ws_id, "state", "deleted");
		r = api_reply_result(req, 0, w->status, result, &w->e);
	} else
		r = api_reply_result(req, 0, w->status, TAKE_PTR(w->result), &w->e);
	http_request_set_state(req, NULL, NULL);
	return r;
}

static void on_op_end(void *userdata, int r, json_t *result, const struct station_error *e)
{
	struct op_wait *w = userdata;

	w->op = NULL; /* gone once called */
	w->ended = true;
	w->r = r;
	w->result = json_incref(result);
	if (r < 0 && e)
		w->e = *e;
	if (w->idem.claimed) {
		w->idem.claimed = false;
		manager_idempotency_finish(
			w->m, w->idem.scope, w->idem.key,
			r >= 0 ? json_string_value(json_object_get(result, "id")) : NULL,
			w->status);
	}
	http_request_resume(w->req);
}

static struct op_wait *op_wait_new(struct http_request *req, unsigned status)
{
	struct op_wait *w = calloc(1, sizeof *w);

	if (!w)
		return NULL;
	w->req = req;
	w->status = status;
	http_request_set_state(req, w, op_wait_free);
	return w;
}

/* r from the manager: < 0 refused at once, 0 answered at once (result), 1 under way. */
static int op_wait_begin(struct http_request *req, struct op_wait *w, int r, json_t *result,
			 const struct station_error *e)
{
	if (r <= 0) {
		unsigned status = w->status;

		http_request_set_state(req, NULL, NULL); /* frees w */
		return api_reply_result(req, r, status, result, e);
	}
	if (w->ended) /* it ended before the manager returned */
		return op_resumed(req);
	r = http_request_suspend(req, op_resumed);
	if (r < 0) {
		http_request_set_state(req, NULL, NULL);
		return http_reply_status(req, 500, NULL, "cannot wait for the workspace");
	}
	return 0;
}

/* "placement": absent (false), "any" (true, and taken out of the body), anything else 400. */
static int take_placement(json_t *body, bool *ret_any, struct station_error *e)
{
	json_t *v = json_object_get(body, "placement");

	*ret_any = false;
	if (!v)
		return 0;
	if (!json_is_string(v) || strcmp(json_string_value(v), "any") != 0)
		return station_error_set(e, -EINVAL, "placement",
					 "placement must be \"any\" (any worker this controller "
					 "knows, by the placement rule) or absent (this worker)");
	json_object_del(body, "placement");
	*ret_any = true;
	return 0;
}

int api_workspace_create(struct http_request *req)
{
	struct station_error e = {};
	json_t *body = NULL;
	bool any;
	int r;

	r = api_request_json(req, true, &body, &e);
	if (r >= 0)
		r = take_placement(body, &any, &e);
	if (r < 0) {
		json_decref(body);
		return api_reply_result(req, r, 201, NULL, &e);
	}
	if (any && http_request_fleet(req))
		return api_workspace_place(req, body);
	return api_workspace_create_here(req, body);
}

int api_workspace_create_here(struct http_request *req, json_t *body)
{
	struct station_error e = {};
	struct workspace_spec spec = {};
	struct api_idempotency idem;
	struct idempotency_hit hit;
	json_t *ws = NULL;
	struct op_wait *w;
	int r;

	r = api_idempotency_begin(req, &idem, &hit);
	if (r < 0 || r == IDEMPOTENCY_REPLIED) {
		json_decref(body);
		return r;
	}
	if (r == IDEMPOTENCY_REPLAY) {
		json_decref(body);
		r = manager_workspace_get(http_request_manager(req), hit.object_id, &ws, &e);
		if (r == -ENOENT)
			return api_idempotency_reply_gone(req, &idem, "workspace", hit.object_id);
		return api_reply_result(req, r, hit.status, ws, &e);
	}
	r = validate_workspace_spec(body, &spec, &e);
	if (r >= 0)
		r = manager_tenant_admit(http_request_manager(req), http_request_principal(req),
					 &spec, &e);
	if (r < 0) {
		json_decref(body);
		return api_reply_result(req, r, 201, NULL, &e);
	}
	w = op_wait_new(req, 201);
	if (!w) {
		json_decref(body);
		return http_reply_status(req, 500, NULL, "out of memory");
	}
	r = manager_workspace_create(http_request_manager(req), &spec, on_op_end, w, &w->op, &ws,
				     &e);
	json_decref(body);
	/* The key names the workspace as soon as it exists: listed `creating` while under way, so
	 * a retry finds it whether or not the first request is still waiting. */
	const char *made = NULL;
	if (r == 0)
		made = json_string_value(json_object_get(ws, "id"));
	else if (r > 0 && w->op)
		made = manager_workspace_op_id(w->op);
	else if (r > 0 && w->ended && w->r >= 0) /* it ended before the manager returned */
		made = json_string_value(json_object_get(w->result, "id"));
	if (r > 0 && !made && !w->ended && w->op && idem.claimed) {
		w->idem = idem; /* no workspace yet: recorded when it ends */
		w->m = http_request_manager(req);
	} else {
		api_idempotency_end(req, &idem, made, 201);
	}
	return op_wait_begin(req, w, r, ws, &e);
}

int api_workspace_get(struct http_request *req)
{
	const struct route_match *m = http_request_route(req);
	struct station_error e = {};
	json_t *ws = NULL;
	int r;

	r = manager_workspace_get(http_request_manager(req), m->ws_id, &ws, &e);
	return api_reply_result(req, r, 200, ws, &e);
}

int api_workspace_update(struct http_request *req)
{
	const struct route_match *m = http_request_route(req);
	struct station_error e = {};
	struct workspace_update u;
	json_t *body = NULL, *ws = NULL;
	int r;

	r = api_request_json(req, false, &body, &e);
	if (r >= 0)
		r = validate_workspace_update(body, &u, &e);
	if (r >= 0)
		r = manager_workspace_update(http_request_manager(req), m->ws_id, u.name_set,
					     u.name, u.labels_clear, u.labels, &ws, &e);
	json_decref(body);
	return api_reply_result(req, r, 200, ws, &e);
}

int api_workspace_delete(struct http_request *req)
{
	const struct route_match *m = http_request_route(req);
	struct station_error e = {};
	struct op_wait *w;
	int r;

	w = op_wait_new(req, 200);
	if (!w || !(w->ws_id = strdup(m->ws_id)))
		return http_reply_status(req, 500, NULL, "out of memory");
	r = manager_workspace_delete(http_request_manager(req), m->ws_id, on_op_end, w, &w->op, &e);
	return op_wait_begin(req, w, r, NULL, &e);
}

int api_workspace_restart(struct http_request *req)
{
	const struct route_match *m = http_request_route(req);
	struct station_error e = {};
	struct op_wait *w;
	int r;

	w = op_wait_new(req, 200);
	if (!w)
		return http_reply_status(req, 500, NULL, "out of memory");
	r = manager_workspace_restart(http_request_manager(req), m->ws_id, on_op_end, w, &w->op,
				      &e);
	return op_wait_begin(req, w, r, NULL, &e);
}

/* POST …/pause and …/resume: 200 with the workspace once it is paused (resumed); at once when
 * there is nothing to do. */
static int pause_or_resume(struct http_request *req, bool pause)
{
	const struct route_match *m = http_request_route(req);
	struct station_error e = {};
	json_t *result = NULL;
	struct op_wait *w;
	int r;

	w = op_wait_new(req, 200);
	if (!w)
		return http_reply_status(req, 500, NULL, "out of memory");
	r = (pause ? manager_workspace_pause : manager_workspace_resume)(
		http_request_manager(req), m->ws_id, on_op_end, w, &w->op, &result, &e);
	return op_wait_begin(req, w, r, result, &e);
}

int api_workspace_pause(struct http_request *req)
{
	return pause_or_resume(req, true);
}

int api_workspace_resume(struct http_request *req)
{
	return pause_or_resume(req, false);
}

/* POST …/fork {"count": N}: 201 {"workspaces":[…],"snapshot","pausedMs"} once every fork is
 * ready. */
int api_workspace_fork(struct http_request *req)
{
	const struct route_match *m = http_request_route(req);
	struct station_error e = {};
	json_t *body = NULL;
	struct op_wait *w;
	unsigned count = 1;
	int r;

	r = api_request_json(req, true, &body, &e);
	if (r >= 0)
		r = validate_fork(body, &count, &e);
	json_decref(body);
	if (r < 0)
		return api_reply_result(req, r, 201, NULL, &e);
	w = op_wait_new(req, 201);
	if (!w)
		return http_reply_status(req, 500, NULL, "out of memory");
	r = manager_workspace_fork(http_request_manager(req), m->ws_id, count, on_op_end, w, &w->op,
				   &e);
	return op_wait_begin(req, w, r, NULL, &e);
}

int api_workspace_network_get(struct http_request *req)
{
	const struct route_match *m = http_request_route(req);
	struct station_error e = {};
	json_t *network = NULL;
	int r;

	r = manager_workspace_network_get(http_request_manager(req), m->ws_id, &network, &e);
	return api_reply_result(req, r, 200, network, &e);
}

int api_workspace_network_set(struct http_request *req)
{
	const struct route_match *m = http_request_route(req);
	struct station_error e = {};
	json_t *body = NULL, *egress = NULL, *network = NULL;
	int r;

	r = api_request_json(req, false, &body, &e);
	if (r >= 0)
		r = validate_network_update(body, &egress, &e);
	if (r >= 0)
		r = manager_workspace_network_set(http_request_manager(req), m->ws_id, egress,
						  &network, &e);
	json_decref(body);
	return api_reply_result(req, r, 200, network, &e);
}

/* GET …/usage: waits (suspended) for the agent's report, which the manager bounds in time. */
struct usage_poll {
	struct http_request *req;
	struct usage_waiter *waiter;
	json_t *usage;
	struct station_error e;
	bool failed;
};

static void usage_poll_free(void *userdata)
{
	struct usage_poll *p = userdata;

	manager_usage_cancel(p->waiter);
	json_decref(p->usage);
	free(p);
}

static int usage_resumed(struct http_request *req)
{
	struct usage_poll *p = http_request_state(req);
	int r;

	if (!p || (!p->usage && !p->failed))
		return http_reply_status(req, 500, NULL, "the wait was lost");
	if (p->usage)
		r = http_reply_json(req, 200, TAKE_PTR(p->usage));
	else
		r = http_reply_error(req, &p->e);
	http_request_set_state(req, NULL, NULL);
	return r;
}

static void on_usage(void *userdata, json_t *usage, const struct station_error *e)
{
	struct usage_poll *p = userdata;

	p->waiter = NULL; /* gone once called */
	p->usage = usage;
	if (usage)
		manager_usage_contexts_split(usage);
	if (!usage) {
		p->failed = true;
		p->e = *e;
	}
	http_request_resume(p->req);
}

int api_workspace_usage(struct http_request *req)
{
	if (api_usage_history_asked(req))
		return api_workspace_usage_history(req);
	const struct route_match *m = http_request_route(req);
	struct station_error e = {};
	struct usage_poll *p;
	int r;

	p = calloc(1, sizeof *p);
	if (!p)
		return http_reply_status(req, 500, NULL, "out of memory");
	p->req = req;
	r = manager_usage_get(http_request_manager(req), m->ws_id, on_usage, p, &p->waiter, &e);
	if (r < 0) {
		free(p);
		return api_reply_result(req, r, 200, NULL, &e);
	}
	http_request_set_state(req, p, usage_poll_free);
	r = http_request_suspend(req, usage_resumed);
	if (r < 0) {
		http_request_set_state(req, NULL, NULL);
		return http_reply_status(req, 500, NULL, "cannot wait for the agent");
	}
	return 0;
}
