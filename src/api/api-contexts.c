/* SPDX-License-Identifier: MIT */
/* /v1/workspaces/{id}/contexts: code contexts and their executions (docs/api.md, "Code
 * contexts"). Create, restart and execute answer once the manager has (a kernel that answered,
 * a cell whose run started), an execution with ?waitMs once it ended or the wait passed. */
#include <errno.h>
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/http.h"
#include "api/router.h"
#include "api/sse.h"
#include "api/validate.h"
#include "basic/cleanup.h"
#include "basic/json-util.h"
#include "daemon/manager.h"
#include "event/event.h"

/* An interrupt answers once the cell ended: the kernel's 2 s grace, the kill, the result read. */
#define INTERRUPT_WAIT_MS 15000u

/* A request waiting for the manager: an operation's answer, then perhaps an execution's end. */
struct ctx_call {
	struct http_request *req;
	unsigned status;
	int r;
	struct station_error e;
	json_t *result;
	struct context_op *op;
	struct execution_waiter *waiter;
	struct event_source *timer;
	uint64_t wait_ms;
	char cid[ROUTE_ID_MAX + 1];
	char eid[ROUTE_ID_MAX + 1];
};

static void call_free(void *userdata)
{
	struct ctx_call *c = userdata;

	manager_context_op_forget(c->op);
	manager_execution_waiter_cancel(c->waiter);
	event_source_free(c->timer);
	json_decref(c->result);
	free(c);
}

/* The codes error.h has no name for: 422 kernel_missing, 504, 409 busy. */
static int reply_ctx_error(struct http_request *req, const struct station_error *e)
{
	const char *code = NULL;
	unsigned status = 0;

	if (e->err == CONTEXT_EMISSING)
		status = 422, code = "kernel_missing";
	else if (e->err == CONTEXT_ETIMEOUT)
		status = 504, code = "kernel_timeout";
	else if (e->err == CONTEXT_EBUSY)
		status = 409, code = "busy";
	if (!status)
		return http_reply_error(req, e);
	json_t *body = json_pack("{s:{s:s, s:s}}", "error", "code", code, "message", e->message);
	if (body && e->field[0])
		json_object_set_new(json_object_get(body, "error"), "field", json_string(e->field));
	return http_reply_json(req, status, body);
}

static int reply_execution(struct http_request *req, unsigned status, const char *cid,
			   const char *eid)
{
	const struct route_match *m = http_request_route(req);
	struct station_error e = {};
	json_t *x = NULL;
	int r = manager_execution_get(http_request_manager(req), m->ws_id, cid, eid, &x, &e);

	return api_reply_result(req, r, status, x, &e);
}

static int call_resumed(struct http_request *req)
{
	struct ctx_call *c = http_request_state(req);
	unsigned status;
	json_t *result;
	char cid[ROUTE_ID_MAX + 1], eid[ROUTE_ID_MAX + 1];

	if (!c)
		return http_reply_status(req, 500, NULL, "the wait was lost");
	if (c->r < 0) {
		struct station_error e = c->e;
		http_request_set_state(req, NULL, NULL);
		return reply_ctx_error(req, &e);
	}
	status = c->status;
	snprintf(cid, sizeof cid, "%s", c->cid);
	snprintf(eid, sizeof eid, "%s", c->eid);
	result = TAKE_PTR(c->result);
	http_request_set_state(req, NULL, NULL);
	if (eid[0]) { /* an execution: as it is now */
		json_decref(result);
		return reply_execution(req, status, cid, eid);
	}
	return http_reply_json(req, status, result);
}

static void on_ended(void *userdata)
{
	struct ctx_call *c = userdata;

	c->waiter = NULL;
	http_request_resume(c->req);
}

static int on_timeout(struct event_source *s, uint64_t now, void *userdata)
{
	struct ctx_call *c = userdata;

	manager_execution_waiter_cancel(TAKE_PTR(c->waiter));
	http_request_resume(c->req);
	return 0;
}

/* Waits for execution c->eid to end, at most c->wait_ms; resumes at once when it has. */
static void call_wait(struct ctx_call *c)
{
	const struct route_match *m = http_request_route(c->req);
	int r = manager_execution_wait(http_request_manager(c->req), m->ws_id, c->cid, c->eid,
				       on_ended, c, &c->waiter, NULL);

	/* ended already: answered from the loop (the request may not be suspended yet) */
	uint64_t at = now_usec() + (r == 0 ? c->wait_ms * 1000 : 0);

	if (event_add_timer(http_request_loop(c->req), &c->timer, at, on_timeout, c) < 0)
		http_request_resume(c->req);
}

static void on_done(void *userdata, int r, json_t *result, const struct station_error *e)
{
	struct ctx_call *c = userdata;
	const char *eid = json_string_value(json_object_get(result, "id"));

	c->op = NULL;
	c->r = r;
	if (e)
		c->e = *e;
	c->result = result;
	if (r >= 0 && c->wait_ms && eid && strncmp(eid, "e-", 2) == 0) {
		snprintf(c->eid, sizeof c->eid, "%s", eid);
		call_wait(c);
		return;
	}
	http_request_resume(c->req);
}

static struct ctx_call *call_new(struct http_request *req, unsigned status, const char *cid,
				 uint64_t wait_ms)
{
	struct ctx_call *c = calloc(1, sizeof *c);

	if (!c)
		return NULL;
	c->req = req;
	c->status = status;
	c->wait_ms = wait_ms;
	snprintf(c->cid, sizeof c->cid, "%s", cid ? cid : "");
	return c;
}

/* Suspends req on c (taken) until the manager answered. */
static int call_suspend(struct ctx_call *c)
{
	struct http_request *req = c->req;
	int r;

	http_request_set_state(req, c, call_free);
	r = http_request_suspend(req, call_resumed);
	if (r < 0) {
		http_request_set_state(req, NULL, NULL);
		return http_reply_status(req, 500, NULL, "cannot wait: %s", strerror(-r));
	}
	return 0;
}

static int parse_wait(struct http_request *req, uint64_t *ret, struct station_error *e)
{
	bool present;
	const char *v = http_request_query(req, "waitMs", &present);
	uint64_t w;
	int r;

	*ret = 0;
	if (!present)
		return 0;
	r = validate_query_u64("waitMs", v, 0, UINT64_MAX, &w, e);
	if (r >= 0)
		*ret = http_request_wait_ms(req, w);
	return r;
}

static int check_fields(json_t *body, const char *const *known, struct station_error *e)
{
	const char *key;
	json_t *v;

	json_object_foreach(body, key, v) {
		bool ok = false;
		for (size_t i = 0; known[i] && !ok; i++)
			ok = strcmp(key, known[i]) == 0;
		if (!ok)
			return station_error_set(e, -EINVAL, key, "unknown field \"%s\"", key);
	}
	return 0;
}

static int parse_spec(json_t *body, struct context_spec *ret, struct station_error *e)
{
	static const char *const known[] = { "language", "cwd", "env", NULL };
	json_t *lang = json_object_get(body, "language"), *cwd = json_object_get(body, "cwd");
	json_t *env = json_object_get(body, "env");
	int r = check_fields(body, known, e);

	if (r < 0)
		return r;
	if (!json_is_string(lang))
		return station_error_set(e, -EINVAL, "language",
					 "language must be \"python\" or \"javascript\"");
	if (cwd && !json_is_null(cwd) &&
	    (!json_is_string(cwd) || json_string_length(cwd) == 0 ||
	     json_string_length(cwd) > 4096 ||
	     strlen(json_string_value(cwd)) != json_string_length(cwd)))
		return station_error_set(e, -EINVAL, "cwd", "cwd must be a path (1-4096 bytes)");
	if (env && !json_is_null(env) && (r = validate_env(env, "env", e)) < 0)
		return r;
	*ret = (struct context_spec){
		.language = json_string_value(lang),
		.cwd = json_string_value(cwd),
		.env = json_is_object(env) ? env : NULL,
	};
	return 0;
}

int api_context_create(struct http_request *req)
{
	const struct route_match *m = http_request_route(req);
	struct station_error e = {};
	struct context_spec spec = {};
	_cleanup_json_ json_t *body = NULL;
	struct ctx_call *c;
	int r = api_request_json(req, false, &body, &e);

	if (r >= 0)
		r = parse_spec(body, &spec, &e);
	if (r < 0)
		return reply_ctx_error(req, &e);
	c = call_new(req, 201, NULL, 0);
	if (!c)
		return http_reply_status(req, 500, NULL, "out of memory");
	r = manager_context_create(http_request_manager(req), m->ws_id, &spec, on_done, c, &c->op,
				   &e);
	if (r < 0) {
		free(c);
		return reply_ctx_error(req, &e);
	}
	return call_suspend(c);
}

int api_context_restart(struct http_request *req)
{
	const struct route_match *m = http_request_route(req);
	struct station_error e = {};
	struct ctx_call *c = call_new(req, 200, m->run_id, 0);
	int r;

	if (!c)
		return http_reply_status(req, 500, NULL, "out of memory");
	r = manager_context_restart(http_request_manager(req), m->ws_id, m->run_id, on_done, c,
				    &c->op, &e);
	if (r < 0) {
		free(c);
		return reply_ctx_error(req, &e);
	}
	return call_suspend(c);
}

/* GET of a context or the list: the kernels' cpuMs and memoryBytes come from the agent's report
 * of the workspace's use (bounded by USAGE_AGENT_TIMEOUT_MS); a workspace whose agent cannot be
 * asked (not ready, an agent without resource reports) or did not answer gives them null. */
struct ctx_get {
	struct http_request *req;
	struct usage_waiter *waiter;
	json_t *usage;
	bool done;
};

static void ctx_get_free(void *userdata)
{
	struct ctx_get *g = userdata;

	manager_usage_cancel(g->waiter);
	json_decref(g->usage);
	free(g);
}

static int ctx_get_reply(struct http_request *req, const json_t *usage)
{
	const struct route_match *m = http_request_route(req);
	struct station_error e = {};
	json_t *out = NULL;
	int r = m->run_id[0] ?
			manager_context_get(http_request_manager(req), m->ws_id, m->run_id, usage,
					    &out, &e) :
			manager_context_list(http_request_manager(req), m->ws_id, usage, &out, &e);

	return api_reply_result(req, r, 200, out, &e);
}

static int ctx_get_resumed(struct http_request *req)
{
	struct ctx_get *g = http_request_state(req);
	int r;

	if (!g || !g->done)
		return http_reply_status(req, 500, NULL, "the wait was lost");
	r = ctx_get_reply(req, g->usage);
	http_request_set_state(req, NULL, NULL);
	return r;
}

static void on_ctx_usage(void *userdata, json_t *usage, const struct station_error *e)
{
	struct ctx_get *g = userdata;

	g->waiter = NULL; /* gone once called */
	g->usage = usage;
	g->done = true;
	http_request_resume(g->req);
}

static int ctx_get(struct http_request *req)
{
	const struct route_match *m = http_request_route(req);
	struct station_error e = {};
	json_t *out = NULL;
	struct ctx_get *g;
	int r = m->run_id[0] ?
			manager_context_get(http_request_manager(req), m->ws_id, m->run_id, NULL,
					    &out, &e) :
			manager_context_list(http_request_manager(req), m->ws_id, NULL, &out, &e);

	if (r < 0)
		return api_reply_result(req, r, 200, NULL, &e);
	g = calloc(1, sizeof *g);
	if (g)
		g->req = req;
	if (!g || manager_usage_get(http_request_manager(req), m->ws_id, on_ctx_usage, g,
				    &g->waiter, &e) < 0) {
		free(g);
		return api_reply_result(req, 0, 200, out, &e);
	}
	json_decref(out);
	http_request_set_state(req, g, ctx_get_free);
	r = http_request_suspend(req, ctx_get_resumed);
	if (r < 0) {
		http_request_set_state(req, NULL, NULL);
		return http_reply_status(req, 500, NULL, "cannot wait for the agent");
	}
	return 0;
}

int api_context_list(struct http_request *req)
{
	return ctx_get(req);
}

int api_context_get(struct http_request *req)
{
	return ctx_get(req);
}

int api_context_delete(struct http_request *req)
{
	const struct route_match *m = http_request_route(req);
	struct station_error e = {};
	int r = manager_context_delete(http_request_manager(req), m->ws_id, m->run_id, &e);

	if (r < 0)
		return http_reply_error(req, &e);
	struct MHD_Response *resp =
		MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
	if (!resp)
		return http_reply_status(req, 500, NULL, "out of memory");
	r = http_reply_response(req, 204, resp);
	MHD_destroy_response(resp);
	return r;
}

static int parse_execute(json_t *body, const char **ret_code, size_t *ret_len,
			 uint64_t *ret_timeout, struct station_error *e)
{
	static const char *const known[] = { "code", "timeoutMs", NULL };
	json_t *code = json_object_get(body, "code"), *t = json_object_get(body, "timeoutMs");
	int r = check_fields(body, known, e);

	if (r < 0)
		return r;
	if (!json_is_string(code))
		return station_error_set(e, -EINVAL, "code", "code must be a string");
	if (json_string_length(code) > CONTEXT_MAX_CODE_BYTES)
		return station_error_set(e, -E2BIG, "code", "code is larger than %u bytes",
					 CONTEXT_MAX_CODE_BYTES);
	if (t && !json_is_null(t) &&
	    (!json_is_integer(t) || json_integer_value(t) < 1 ||
	     json_integer_value(t) > 24 * 3600 * 1000))
		return station_error_set(e, -EINVAL, "timeoutMs",
					 "timeoutMs must be an integer from 1 to 86400000");
	*ret_code = json_string_value(code);
	*ret_len = json_string_length(code);
	*ret_timeout = json_is_integer(t) ? (uint64_t)json_integer_value(t) : 0;
	return 0;
}

int api_context_execute(struct http_request *req)
{
	const struct route_match *m = http_request_route(req);
	struct station_error e = {};
	_cleanup_json_ json_t *body = NULL;
	const char *code = NULL;
	size_t len = 0;
	uint64_t timeout = 0, wait_ms = 0;
	struct ctx_call *c;
	int r = parse_wait(req, &wait_ms, &e);

	if (r >= 0)
		r = api_request_json(req, false, &body, &e);
	if (r >= 0)
		r = parse_execute(body, &code, &len, &timeout, &e);
	if (r < 0)
		return reply_ctx_error(req, &e);
	c = call_new(req, 201, m->run_id, wait_ms);
	if (!c)
		return http_reply_status(req, 500, NULL, "out of memory");
	r = manager_context_execute(http_request_manager(req), m->ws_id, m->run_id, code, len,
				    timeout, on_done, c, &c->op, &e);
	if (r < 0) {
		free(c);
		return reply_ctx_error(req, &e);
	}
	return call_suspend(c);
}

/* Answers with the execution once it ended (status interrupted), or 409 when no cell runs. */
int api_context_interrupt(struct http_request *req)
{
	const struct route_match *m = http_request_route(req);
	struct station_error e = {};
	struct ctx_call *c;
	char eid[64];
	int r = manager_context_interrupt(http_request_manager(req), m->ws_id, m->run_id, eid, &e);

	if (r < 0)
		return reply_ctx_error(req, &e);
	c = call_new(req, 200, m->run_id, INTERRUPT_WAIT_MS);
	if (!c)
		return reply_execution(req, 200, m->run_id, eid);
	snprintf(c->eid, sizeof c->eid, "%s", eid);
	r = call_suspend(c);
	if (r == 0)
		call_wait(c);
	return r;
}

int api_execution_list(struct http_request *req)
{
	const struct route_match *m = http_request_route(req);
	struct station_error e = {};
	json_t *list = NULL;
	int r = manager_execution_list(http_request_manager(req), m->ws_id, m->run_id, &list, &e);

	return api_reply_result(req, r, 200, list, &e);
}

int api_execution_get(struct http_request *req)
{
	const struct route_match *m = http_request_route(req);
	struct station_error e = {};
	uint64_t wait_ms = 0;
	struct ctx_call *c;
	int r = parse_wait(req, &wait_ms, &e);

	if (r < 0)
		return http_reply_error(req, &e);
	if (wait_ms == 0)
		return reply_execution(req, 200, m->run_id, m->sub_id);
	/* the execution must exist before the wait is held */
	json_t *x = NULL;
	r = manager_execution_get(http_request_manager(req), m->ws_id, m->run_id, m->sub_id, &x,
				  &e);
	json_decref(x);
	if (r < 0)
		return http_reply_error(req, &e);
	c = call_new(req, 200, m->run_id, wait_ms);
	if (!c)
		return reply_execution(req, 200, m->run_id, m->sub_id);
	snprintf(c->eid, sizeof c->eid, "%s", m->sub_id);
	r = call_suspend(c);
	if (r == 0)
		call_wait(c);
	return r;
}

/* The execution's output is its run's: the route is pointed at the run and served as
 * GET …/commands/{runId}/output is (SSE here, WebSocket below). */
static int route_to_run(struct http_request *req)
{
	struct route_match *m = (struct route_match *)http_request_route(req);
	struct station_error e = {};
	char run_id[64];
	int r = manager_execution_run_id(http_request_manager(req), m->ws_id, m->run_id, m->sub_id,
					 run_id, &e);

	if (r < 0)
		return http_reply_error(req, &e) < 0 ? -EIO : 1;
	if (strlen(run_id) >= sizeof m->run_id)
		return http_reply_status(req, 500, NULL, "bad run id") < 0 ? -EIO : 1;
	memcpy(m->run_id, run_id, strlen(run_id) + 1);
	return 0;
}

int api_execution_output(struct http_request *req)
{
	int r = route_to_run(req);

	if (r != 0)
		return r < 0 ? r : 0;
	return api_command_output(req);
}

int api_execution_output_ws(struct http_request *req)
{
	int r = route_to_run(req);

	if (r != 0)
		return r < 0 ? r : 0;
	return api_command_output_ws(req);
}
