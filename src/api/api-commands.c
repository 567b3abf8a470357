/* SPDX-License-Identifier: MIT */
/* /v1/workspaces/{id}/commands: start, list, get (long-poll), cancel, output (sse.c). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "basic/cleanup.h"
#include "api/http.h"
#include "api/idempotency.h"
#include "daemon/manager.h"
#include "api/router.h"
#include "api/sse.h"
#include "api/validate.h"
#include "event/event.h"

/* Cancel answers once the run is terminal, or after this long with the run as it is. */
#define CANCEL_WAIT_MS 10000u

/* A request waiting for a run to become terminal. */
struct run_poll {
	struct http_request *req;
	unsigned status;
	char *run_id;
	json_t *started;  /* POST: the run as started, the answer should it vanish meanwhile */
	json_t *finished; /* the run as it ended, when the manager had it at hand */
	struct run_waiter *waiter;
	struct event_source *timer;
};

static void run_poll_free(void *userdata)
{
	struct run_poll *p = userdata;

	if (p->waiter)
		manager_run_waiter_cancel(p->waiter);
	event_source_free(p->timer);
	json_decref(p->started);
	json_decref(p->finished);
	free(p->run_id);
	free(p);
}

/* Replies with the run as it is now; fallback (borrowed) when it is gone. */
static int reply_run(struct http_request *req, unsigned status, const char *run_id,
		     json_t *fallback)
{
	const struct route_match *m = http_request_route(req);
	struct station_error e = {};
	json_t *run = NULL;
	int r;

	r = manager_run_get(http_request_manager(req), m->ws_id, run_id, &run, &e);
	if (r < 0 && fallback)
		return http_reply_json(req, status, json_incref(fallback));
	return api_reply_result(req, r, status, run, &e);
}

static int run_poll_resumed(struct http_request *req)
{
	struct run_poll *p = http_request_state(req);
	_cleanup_free_ char *run_id = NULL;
	json_t *fallback, *finished;
	unsigned status;
	int r;

	if (!p)
		return http_reply_status(req, 500, NULL, "the wait was lost");
	finished = TAKE_PTR(p->finished);
	if (finished) { /* what a read of the store would give, without the read */
		status = p->status;
		http_request_set_state(req, NULL, NULL);
		return http_reply_json(req, status, finished);
	}
	run_id = TAKE_PTR(p->run_id);
	fallback = TAKE_PTR(p->started);
	status = p->status;
	http_request_set_state(req, NULL, NULL); /* frees p: no waiter, no timer left */
	r = reply_run(req, status, run_id, fallback);
	json_decref(fallback);
	return r;
}

static void on_run_terminal(void *userdata, json_t *run)
{
	struct run_poll *p = userdata;

	p->waiter = NULL; /* gone once called */
	p->finished = json_incref(run);
	http_request_resume(p->req);
}

static int on_poll_timeout(struct event_source *s, uint64_t now, void *userdata)
{
	struct run_poll *p = userdata;

	if (p->waiter) {
		manager_run_waiter_cancel(p->waiter);
		p->waiter = NULL;
	}
	http_request_resume(p->req);
	return 0;
}

static struct run_poll *run_poll_new(struct http_request *req, unsigned status, const char *run_id,
				     json_t *started)
{
	struct run_poll *p = calloc(1, sizeof *p);

	if (!p)
		return NULL;
	p->req = req;
	p->status = status;
	p->run_id = strdup(run_id);
	if (!p->run_id) {
		free(p);
		return NULL;
	}
	p->started = json_incref(started);
	return p;
}

/* Takes p: on failure it is freed. */
static int run_poll_arm(struct run_poll *p, uint64_t wait_ms)
{
	struct http_request *req = p->req;
	int r;

	r = event_add_timer(http_request_loop(req), &p->timer, now_usec() + wait_ms * 1000,
			    on_poll_timeout, p);
	if (r < 0) {
		run_poll_free(p);
		return r;
	}
	http_request_set_state(req, p, run_poll_free);
	r = http_request_suspend(req, run_poll_resumed);
	if (r < 0)
		http_request_set_state(req, NULL, NULL);
	return r;
}

/* Answers with the run once it is terminal or wait_ms has passed, whichever is first. */
static int run_poll_begin(struct http_request *req, unsigned status, const char *run_id,
			  uint64_t wait_ms, bool long_lived, json_t *started)
{
	const struct route_match *m = http_request_route(req);
	struct station_error e = {};
	struct run_poll *p;
	int r;

	p = run_poll_new(req, status, run_id, started);
	if (!p)
		return http_reply_status(req, 500, NULL, "out of memory");
	r = manager_run_wait(http_request_manager(req), m->ws_id, run_id, on_run_terminal, p,
			     &p->waiter, &e);
	if (r != 0) {
		run_poll_free(p);
		if (r < 0 && !started)
			return http_reply_error(req, &e);
		return reply_run(req, status, run_id, started);
	}
	/* A client's waitMs is long-lived (a cancel's own bounded wait is not). Past the
	 * long-lived share: a new run is answered as it is now (it exists already), a wait on an
	 * existing one is refused, to be retried. */
	if (long_lived && http_request_hold(req) < 0) {
		run_poll_free(p);
		return started ? reply_run(req, status, run_id, started) : http_reply_busy(req);
	}
	r = run_poll_arm(p, wait_ms);
	if (r < 0)
		return reply_run(req, status, run_id, started);
	return 0;
}

/* ?waitMs=N, capped at the server maximum; 0 when absent, and for a HEAD. */
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
	if (r < 0)
		return r;
	*ret = http_request_wait_ms(req, w);
	return 0;
}

static int parse_limit(struct http_request *req, uint64_t *ret, struct station_error *e)
{
	bool present;
	const char *v = http_request_query(req, "limit", &present);

	*ret = API_DEFAULT_LIST_LIMIT;
	if (!present)
		return 0;
	return validate_query_u64("limit", v, 1, API_MAX_LIST_LIMIT, ret, e);
}

static int start_run(struct http_request *req, const struct api_idempotency *idem, json_t **ret,
		     struct station_error *e)
{
	const struct route_match *m = http_request_route(req);
	_cleanup_free_ uint8_t *stdin_buf = NULL;
	struct run_spec spec = {};
	json_t *body = NULL;
	int r;

	r = api_request_json(req, false, &body, e);
	if (r < 0)
		return r;
	r = validate_run_spec(body, &spec, &stdin_buf, e);
	if (idem->claimed) { /* stored with the run, in its transaction */
		spec.idempotency_scope = idem->scope;
		spec.idempotency_key = idem->key;
		spec.idempotency_status = 201;
	}
	if (r >= 0)
		r = manager_run_start(http_request_manager(req), m->ws_id, &spec, ret, e);
	json_decref(body);
	return r;
}

/* A retry with the Idempotency-Key of an earlier start: that run, waited for as asked. */
static int replay_run(struct http_request *req, const struct api_idempotency *idem,
		      const struct idempotency_hit *hit, uint64_t wait_ms)
{
	const struct route_match *m = http_request_route(req);
	struct station_error e = {};
	json_t *run = NULL;
	const char *status;
	int r;

	r = manager_run_get(http_request_manager(req), m->ws_id, hit->object_id, &run, &e);
	if (r == -ENOENT)
		return api_idempotency_reply_gone(req, idem, "run", hit->object_id);
	if (r < 0)
		return http_reply_error(req, &e);
	status = json_string_value(json_object_get(run, "status"));
	if (wait_ms == 0 || (status && run_status_from_string(status) != RUN_RUNNING))
		return http_reply_json(req, hit->status, run);
	r = run_poll_begin(req, hit->status, hit->object_id, wait_ms, true, run);
	json_decref(run);
	return r;
}

int api_command_start(struct http_request *req)
{
	struct station_error e = {};
	struct api_idempotency idem;
	struct idempotency_hit hit;
	json_t *run = NULL;
	const char *id, *status;
	uint64_t wait_ms;
	int r;

	r = parse_wait(req, &wait_ms, &e);
	if (r < 0)
		return http_reply_error(req, &e);
	r = api_idempotency_begin(req, &idem, &hit);
	if (r < 0 || r == IDEMPOTENCY_REPLIED)
		return r;
	if (r == IDEMPOTENCY_REPLAY)
		return replay_run(req, &idem, &hit, wait_ms);
	r = start_run(req, &idem, &run, &e);
	id = r < 0 ? NULL : json_string_value(json_object_get(run, "id"));
	/* a started run's key was stored with it: only the claim ends here */
	api_idempotency_end(req, &idem, NULL, 201);
	if (r < 0)
		return http_reply_error(req, &e);
	status = json_string_value(json_object_get(run, "status"));
	if (wait_ms == 0 || !id || (status && run_status_from_string(status) != RUN_RUNNING))
		return api_reply_result(req, 0, 201, run, &e);
	r = run_poll_begin(req, 201, id, wait_ms, true, run);
	json_decref(run);
	return r;
}

int api_command_list(struct http_request *req)
{
	const struct route_match *m = http_request_route(req);
	struct station_error e = {};
	json_t *list = NULL, *runs;
	uint64_t limit;
	int r;

	r = parse_limit(req, &limit, &e);
	if (r >= 0)
		r = manager_run_list(http_request_manager(req), m->ws_id, &list, &e);
	if (r < 0)
		return http_reply_error(req, &e);
	list = api_wrap_list(list, "commands");
	runs = json_object_get(list, "commands");
	while (json_array_size(runs) > limit)
		json_array_remove(runs, json_array_size(runs) - 1);
	return api_reply_result(req, 0, 200, list, &e);
}

int api_command_get(struct http_request *req)
{
	const struct route_match *m = http_request_route(req);
	struct station_error e = {};
	uint64_t wait_ms;
	int r;

	r = parse_wait(req, &wait_ms, &e);
	if (r < 0)
		return http_reply_error(req, &e);
	if (wait_ms == 0)
		return reply_run(req, 200, m->run_id, NULL);
	return run_poll_begin(req, 200, m->run_id, wait_ms, true, NULL);
}

int api_command_cancel(struct http_request *req)
{
	const struct route_match *m = http_request_route(req);
	struct station_error e = {};
	int r;

	r = manager_run_cancel(http_request_manager(req), m->ws_id, m->run_id, &e);
	if (r < 0)
		return http_reply_error(req, &e);
	return run_poll_begin(req, 200, m->run_id, CANCEL_WAIT_MS, false, NULL);
}

int api_command_output(struct http_request *req)
{
	const struct route_match *m = http_request_route(req);

	return sse_start(req, m->ws_id, m->run_id);
}
