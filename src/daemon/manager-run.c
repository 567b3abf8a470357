/* SPDX-License-Identifier: MIT */
/* Runs: starting them through the agent, recording their one terminal result, long-poll
 * waiters and live output watches. */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "agentlink.h"
#include "basic/cleanup.h"
#include "basic/json-util.h"
#include "basic/list.h"
#include "basic/log.h"
#include "basic/util.h"
#include "event/event.h"
#include "manager-internal.h"

struct run_state *run_state_find(struct workspace *ws, const char *id)
{
	for (struct run_state *r = ws->runs; r; r = r->next)
		if (strcmp(r->id, id) == 0)
			return r;
	return NULL;
}

int run_state_add(struct workspace *ws, const char *id, struct run_state **ret)
{
	size_t len = strlen(id);
	if (len > PROTO_MAX_ID)
		return -EINVAL;
	struct run_state *r = calloc(1, sizeof *r);
	if (!r)
		return -ENOMEM;
	r->ws = ws;
	memcpy(r->id, id, len + 1);
	LIST_PREPEND(&ws->runs, r);
	ws->n_running++;
	if (ret)
		*ret = r;
	return 0;
}

static void run_state_free(struct run_state *r)
{
	if (r->start) {
		run_row_free(r->start);
		free(r->start);
	}
	if (r->pending) {
		run_row_free(r->pending);
		free(r->pending);
		r->ws->m->n_pending--;
	}
	free(r);
}

static int dup_str(char **dst, const char *src)
{
	*dst = src ? strdup(src) : NULL;
	return src && !*dst ? -ENOMEM : 0;
}

/* A deep copy of row (output included); NULL when out of memory. */
static struct run_row *run_row_dup(const struct run_row *row)
{
	struct run_row *c = calloc(1, sizeof *c);
	int r = 0;

	if (!c)
		return NULL;
	*c = *row;
	c->id = c->workspace_id = c->command = c->cwd = c->env_json = c->reason = NULL;
	c->network_json = NULL;
	for (int i = 0; i < 2; i++)
		c->out[i].head = c->out[i].tail = NULL;
	r |= dup_str(&c->id, row->id);
	r |= dup_str(&c->workspace_id, row->workspace_id);
	r |= dup_str(&c->command, row->command);
	r |= dup_str(&c->cwd, row->cwd);
	r |= dup_str(&c->env_json, row->env_json);
	r |= dup_str(&c->reason, row->reason);
	r |= dup_str(&c->network_json, row->network_json);
	for (int i = 0; i < 2; i++) {
		r |= memdup_bytes(&c->out[i].head, row->out[i].head, row->out[i].head_len);
		r |= memdup_bytes(&c->out[i].tail, row->out[i].tail, row->out[i].tail_len);
	}
	if (r) {
		run_row_free(c);
		free(c);
		return NULL;
	}
	return c;
}

static void waiter_free(struct run_waiter *w)
{
	json_decref(w->result);
	free(w);
}

/* Waiters fire from a zero-delay timer, never from inside the call that ended the run. */
static int on_fire(struct event_source *s, uint64_t now, void *userdata)
{
	struct manager *m = userdata;
	while (m->fire_queue) {
		struct run_waiter *w = m->fire_queue;
		LIST_REMOVE(&m->fire_queue, w);
		w->fn(w->userdata, w->result);
		waiter_free(w);
	}
	return 0;
}

/* result: the finished run (borrowed), or NULL when only the store knows it. */
static void waiters_fire(struct manager *m, struct run_waiter **list, json_t *result)
{
	while (*list) {
		struct run_waiter *w = *list;
		LIST_REMOVE(list, w);
		w->head = &m->fire_queue;
		w->result = json_incref(result);
		LIST_PREPEND(&m->fire_queue, w);
	}
	if (m->fire_queue)
		event_source_set_time(m->fire_timer, 0);
}

void manager_run_waiter_cancel(struct run_waiter *w)
{
	if (!w)
		return;
	LIST_REMOVE(w->head, w);
	waiter_free(w);
}

void output_follower_deliver(struct output_follower *f, int stream, uint64_t offset,
			     const uint8_t *data, size_t n)
{
	uint64_t *next = &f->next_offset[stream - 1];

	if (!output_skip_seen(*next, &offset, &data, &n))
		return;
	f->ops->output(f->userdata, stream, offset, data, n);
	*next = offset + n;
}

void output_follower_deliver_live(struct output_follower *f, int stream, uint64_t offset,
				  const uint8_t *data, size_t n)
{
	int i = stream - 1;

	if (f->awaiting_replay[i]) {
		if (offset != 0 && offset >= f->dropped_end[i]) {
			f->dropped_end[i] = offset + n;
			return;
		}
		f->awaiting_replay[i] = false;
	}
	output_follower_deliver(f, stream, offset, data, n);
}

void output_follower_finish(struct output_follower *f, const struct run_output *out)
{
	for (int s = 0; out && s < 2; s++) {
		const struct run_output *o = &out[s];
		output_follower_deliver(f, s + 1, 0, o->head, o->head_len);
		output_follower_deliver(f, s + 1, o->total - o->tail_len, o->tail, o->tail_len);
		/* no bytes: only tells a follower that resumed before the tail what it missed */
		output_follower_deliver(f, s + 1, o->total, NULL, 0);
	}
	f->ops->done(f->userdata);
}

static void watch_free(struct run_watch *w)
{
	event_source_free(w->timer);
	if (w->replay) {
		run_row_free(w->replay);
		free(w->replay);
	}
	free(w);
}

void run_on_output(struct workspace *ws, const char *run_id, int stream, uint64_t offset,
		   const uint8_t *data, size_t n)
{
	struct run_state *r = run_state_find(ws, run_id);
	if (!r) {
		agent_report_ignored(ws, "run output", run_id);
		return;
	}
	for (struct run_watch *w = r->watches; w; w = w->next)
		output_follower_deliver_live(&w->follower, stream, offset, data, n);
}

/* The row as the store holds it after store_run_finish() recorded result: the inserted columns
 * with the result's over them (started_at kept when the result has none, as the UPDATE does).
 * Points into both; nothing to free. */
static struct run_row finished_row(const struct workspace *ws, const struct run_state *r,
				   const struct run_row *result)
{
	struct run_row row = *result;

	row.id = (char *)r->id;
	row.workspace_id = ws->row.id;
	row.command = r->start->command;
	row.cwd = r->start->cwd;
	row.env_json = r->start->env_json;
	row.timeout_ms = r->start->timeout_ms;
	row.max_output_bytes = r->start->max_output_bytes;
	row.created_at = r->start->created_at;
	if (!row.started_at)
		row.started_at = r->start->started_at;
	return row;
}

/* Waiters and watches hear the run's end. recorded: result is what the store now holds for the
 * run (it was running until now), or its pending result. */
static void run_state_settle(struct workspace *ws, struct run_state *r, const struct run_row *res,
			     bool recorded)
{
	struct manager *m = ws->m;
	json_t *answer = NULL;

	if (recorded && r->start && r->waiters) {
		struct run_row row = finished_row(ws, r, res);
		answer = run_to_json(&row, true); /* NULL (out of memory): they read the store */
	}
	waiters_fire(m, &r->waiters, answer);
	json_decref(answer);
	while (r->watches) {
		struct run_watch *w = r->watches;
		LIST_REMOVE(&r->watches, w);
		output_follower_finish(&w->follower, res->out);
		watch_free(w);
	}
}

static void run_state_end(struct workspace *ws, struct run_state *r, const struct run_row *res,
			  bool recorded)
{
	run_state_settle(ws, r, res, recorded);
	LIST_REMOVE(&ws->runs, r);
	ws->n_running--;
	run_state_free(r);
}

/* --- results the store could not record --- */

#define PENDING_RETRY_USEC (1000 * 1000ull)

void manager_pending_retry_at(struct manager *m, uint64_t when)
{
	if (m->pending_timer)
		event_source_set_time(m->pending_timer, when);
}

/* Writes rs's pending result: 1 or 0 (written, or already terminal: rs is gone, the agent
 * acknowledged), -EINPROGRESS while the store still fails. */
static int run_pending_write(struct workspace *ws, struct run_state *rs)
{
	struct run_row row = *rs->pending;
	row.id = rs->id;
	row.workspace_id = ws->row.id;
	int r = store_run_finish(ws->m->store, &row);
	if (r < 0 && r != -ENOENT)
		return -EINPROGRESS;
	log_info("run result recorded after a store failure", "workspace", ws->row.id, "run",
		 rs->id, "status", run_status_to_string(rs->pending->status), NULL);
	if (rs->pending_ack && ws->link && rs->pending_gen == ws->link_gen)
		agentlink_send_ack(ws->link, rs->pending_seq);
	LIST_REMOVE(&ws->runs, rs);
	run_state_free(rs);
	return r == -ENOENT ? 0 : r;
}

/* The store failed (err) to record result: keep it in memory, answer readers from it. */
static int run_keep_pending(struct workspace *ws, struct run_state *rs,
			    const struct run_row *result, int err)
{
	struct run_row row = *result;

	log_error("cannot record run result: kept in memory, retried every second", "workspace",
		  ws->row.id, "run", result->id, "error", strerror(-err), NULL);
	if (!rs)
		return err;
	if (rs->start)
		row = finished_row(ws, rs, result);
	row.id = rs->id;
	row.workspace_id = ws->row.id;
	if (!row.started_at)
		row.started_at = rs->started_at;
	rs->pending = run_row_dup(&row);
	if (!rs->pending)
		return err; /* out of memory too: the agent re-sends it after its next HELLO */
	ws->m->n_pending++;
	ws->n_running--;
	run_state_settle(ws, rs, rs->pending, true);
	manager_pending_retry_at(ws->m, now_usec() + PENDING_RETRY_USEC);
	return -EINPROGRESS;
}

static int on_pending_timer(struct event_source *s, uint64_t now, void *userdata)
{
	struct manager *m = userdata;

	for (struct workspace *ws = m->workspaces; ws && m->n_pending; ws = ws->next) {
		if (services_pending_write(ws) == -EINPROGRESS)
			goto again;
		for (struct run_state *rs = ws->runs, *next; rs; rs = next) {
			next = rs->next;
			if (rs->pending && run_pending_write(ws, rs) == -EINPROGRESS)
				goto again; /* still failing: the rest waits for the next turn */
		}
	}
again:
	if (m->n_pending)
		manager_pending_retry_at(m, now_usec() + PENDING_RETRY_USEC);
	return 0;
}

bool runs_pending(const struct manager *m)
{
	return m->n_pending > 0;
}

void run_pending_ack_later(struct workspace *ws, const char *run_id, uint64_t seq)
{
	struct run_state *rs = run_state_find(ws, run_id);

	if (!rs || !rs->pending)
		return;
	rs->pending_seq = seq;
	rs->pending_gen = ws->link_gen;
	rs->pending_ack = true;
}

/* The run's network as its row stores it; NULL when untracked (or out of memory). */
static char *run_network_text(struct workspace *ws, const struct run_network *rn)
{
	_cleanup_json_ json_t *o = run_network_json(ws, rn);

	return o ? json_dumps(o, JSON_COMPACT) : NULL;
}

int run_finish(struct workspace *ws, const struct run_row *result)
{
	workspace_touch(ws);
	struct run_state *rs = run_state_find(ws, result->id);
	/* a result re-sent (or a later report) of a run with a pending one: the first stands */
	if (rs && rs->pending)
		return run_pending_write(ws, rs);
	struct run_row scoped = *result;
	scoped.workspace_id = ws->row.id; /* only this workspace's run, whatever the report says */
	_cleanup_free_ char *network = rs ? run_network_text(ws, &rs->net) : NULL;
	if (network)
		scoped.network_json = network;
	int r = store_run_finish(ws->m->store, &scoped);
	if (r < 0 && r != -ENOENT)
		return run_keep_pending(ws, rs, &scoped, r);
	if (r > 0) {
		log_info("run finished", "workspace", ws->row.id, "run", result->id, "status",
			 run_status_to_string(result->status), NULL);
		metrics_run_ended(ws->m, &scoped);
		workspace_event(ws, MANAGER_EVENT_RUN, "ended", result->id,
				run_status_to_string(result->status), result->reason);
	}
	if (r > 0 && ws->m->n_pending)
		manager_pending_retry_at(ws->m,
					 0); /* the store writes again: so may the pending ones */
	/* result may point into the run state (a lost run): nothing reads it after this */
	if (rs)
		run_state_end(ws, rs, &scoped, r > 0);
	return r;
}

void runs_lose_all(struct workspace *ws, const char *reason)
{
	for (struct run_state *rs = ws->runs, *next; rs; rs = next) {
		next = rs->next;
		if (rs->pending) /* its result is known: the retry writes it */
			continue;
		struct run_row lost = {
			.id = rs->id,
			.status = RUN_LOST,
			.exit_code = -1,
			.reason = (char *)reason,
			.started_at = rs->started_at,
			.ended_at = realtime_usec(),
		};
		int r = run_finish(ws, &lost);
		if (r < 0 && r != -ENOENT && r != -EINPROGRESS) /* not kept (out of memory) */
			run_state_end(ws, rs, &lost, false);
	}
}

void runs_free_all(struct workspace *ws)
{
	while (ws->runs) {
		struct run_state *r = ws->runs;
		while (r->waiters) {
			struct run_waiter *w = r->waiters;
			LIST_REMOVE(&r->waiters, w);
			waiter_free(w);
		}
		while (r->watches) {
			struct run_watch *w = r->watches;
			LIST_REMOVE(&r->watches, w);
			watch_free(w);
		}
		LIST_REMOVE(&ws->runs, r);
		run_state_free(r);
	}
	ws->n_running = 0;
}

/* --- starting runs --- */

static int run_check_limits(struct manager *m, const struct run_spec *spec, uint64_t *timeout,
			    uint64_t *output, struct station_error *e)
{
	*timeout = spec->timeout_ms ? spec->timeout_ms : m->cfg.default_timeout_ms;
	if (*timeout > m->cfg.max_timeout_ms)
		return station_error_set(e, -EINVAL, "timeoutMs",
					 "timeoutMs %llu is over this worker's maximum of %llu",
					 (unsigned long long)*timeout,
					 (unsigned long long)m->cfg.max_timeout_ms);
	*output = spec->max_output_bytes ? spec->max_output_bytes : m->cfg.default_output_bytes;
	if (*output > m->cfg.max_output_bytes || *output < 2 || *output % 2)
		return station_error_set(e, -EINVAL, "maxOutputBytes",
					 "maxOutputBytes must be an even number from 2 to %llu",
					 (unsigned long long)m->cfg.max_output_bytes);
	return 0;
}

static int run_check_workspace(struct workspace *ws, struct station_error *e)
{
	int r = workspace_wake_for(ws, "a command", e);

	if (r < 0)
		return r;
	/* a new connection's HELLO goes first: requests queue behind it */
	if (!ws->link)
		return station_error_set(e, -ENOTCONN, NULL,
					 "the agent of workspace \"%s\" is not connected",
					 ws->row.id);
	if (ws->n_running >= ws->m->cfg.max_running_per_workspace)
		return station_error_set(e, -EAGAIN, NULL,
					 "workspace \"%s\" already runs %zu commands (the limit)",
					 ws->row.id, ws->n_running);
	return 0;
}

/* The inserted columns of row that the finished run is answered with (finished_row()). */
static struct run_row *run_start_copy(const struct run_row *row)
{
	struct run_row *c = calloc(1, sizeof *c);

	if (!c)
		return NULL;
	*c = (struct run_row){
		.command = row->command ? strdup(row->command) : NULL,
		.cwd = row->cwd ? strdup(row->cwd) : NULL,
		.env_json = row->env_json ? strdup(row->env_json) : NULL,
		.timeout_ms = row->timeout_ms,
		.max_output_bytes = row->max_output_bytes,
		.created_at = row->created_at,
		.started_at = row->started_at,
	};
	if ((row->command && !c->command) || (row->cwd && !c->cwd) ||
	    (row->env_json && !c->env_json)) {
		run_row_free(c);
		free(c);
		return NULL;
	}
	return c;
}

/* The run's row and, when the request gave one, its Idempotency-Key: one transaction (one
 * WAL commit instead of two per exec), written before the agent is told, so that a run the
 * agent starts is always on record, and a retry with the key always finds it. A key that
 * cannot be stored does not fail the run (as when it was stored after the start). */
static int run_insert(struct manager *m, const struct run_row *row, const struct run_spec *spec)
{
	int r;

	if (!spec->idempotency_key)
		return store_run_insert(m->store, row);
	r = store_begin(m->store);
	if (r < 0)
		return r;
	r = store_run_insert(m->store, row);
	if (r >= 0) {
		(void)manager_idempotency_record(m, spec->idempotency_scope, spec->idempotency_key,
						 row->id, spec->idempotency_status);
		r = store_commit(m->store);
	}
	if (r < 0)
		(void)store_rollback(m->store);
	return r;
}

int manager_run_start(struct manager *m, const char *ws_id, const struct run_spec *spec,
		      json_t **ret, struct station_error *e)
{
	struct workspace *ws = NULL;
	uint64_t timeout = 0, output = 0;
	int r = workspace_lookup(m, ws_id, &ws, e);
	if (r < 0)
		return r;
	r = run_check_workspace(ws, e);
	if (r < 0)
		return r;
	r = run_check_limits(m, spec, &timeout, &output, e);
	if (r < 0)
		return r;

	char id[PROTO_MAX_ID + 1];
	random_id("r-", 26, id, sizeof id);
	_cleanup_free_ char *cwd = workspace_cwd(ws, spec->cwd);
	_cleanup_free_ char *env_json = spec->env ? json_dumps(spec->env, JSON_COMPACT) : NULL;
	char **env = NULL;
	if (!cwd || (spec->env && !env_json) || env_object_to_strv(spec->env, &env) < 0)
		return station_error_set(e, -ENOMEM, NULL, "out of memory");

	struct run_row row = {
		.id = id,
		.workspace_id = ws->row.id,
		.command = (char *)spec->command,
		.cwd = (char *)spec->cwd,
		.env_json = env_json,
		.timeout_ms = timeout,
		.max_output_bytes = output,
		.status = RUN_RUNNING,
		.exit_code = -1,
		.created_at = realtime_usec(),
	};
	r = run_insert(m, &row, spec);
	if (r < 0) {
		strv_free(env);
		return station_error_set(e, r, NULL, "cannot record the run: %s", strerror(-r));
	}
	workspace_event(ws, MANAGER_EVENT_RUN, "created", id, run_status_to_string(RUN_RUNNING),
			NULL);
	metrics_run_started(m);
	struct agentlink_run ar = {
		.id = id,
		.command = spec->command,
		.cwd = cwd,
		.env = env,
		.stdin_data = spec->stdin_data,
		.stdin_len = spec->stdin_len,
		.timeout_ms = timeout,
		.head_bytes = output / 2,
		.tail_bytes = output / 2,
	};
	struct run_network net;
	run_network_begin(ws, &net); /* before the agent hears of it */
	r = agentlink_send_run_start(ws->link, &ar);
	strv_free(env);
	struct run_state *rs = NULL;
	if (r >= 0)
		r = run_state_add(ws, id, &rs);
	if (r >= 0) {
		rs->net = net;
		rs->link_gen = ws->link_gen;
		rs->start =
			run_start_copy(&row); /* NULL (out of memory): answered from the store */
	}
	if (r < 0) {
		row.status = RUN_LOST;
		row.reason = (char *)"the agent could not be reached";
		row.ended_at = realtime_usec();
		store_run_finish(m->store, &row);
		/* the request fails: its key is free again, as when nothing was recorded */
		if (spec->idempotency_key)
			(void)store_idempotency_delete(m->store, spec->idempotency_scope,
						       spec->idempotency_key);
		return station_error_set(e, -ENOTCONN, NULL,
					 "the agent of workspace \"%s\" "
					 "could not be reached: %s",
					 ws->row.id, strerror(-r));
	}
	*ret = run_to_json(&row, true);
	return *ret ? 0 : station_error_set(e, -ENOMEM, NULL, "out of memory");
}

/* stored as the store has it; a running run with a pending result (rs) is answered with it. */
static json_t *run_to_json_pending(const struct run_row *stored, struct run_state *rs,
				   bool with_output)
{
	if (!rs || !rs->pending) {
		json_t *o = run_to_json(stored, with_output);
		json_t *network = rs && o ? run_network_json(rs->ws, &rs->net) : NULL;
		if (network) /* running: the denials so far */
			json_object_set_new(o, "network", network);
		return o;
	}
	struct run_row view = *rs->pending;
	view.id = stored->id;
	view.workspace_id = stored->workspace_id;
	view.command = stored->command;
	view.cwd = stored->cwd;
	view.env_json = stored->env_json;
	view.timeout_ms = stored->timeout_ms;
	view.max_output_bytes = stored->max_output_bytes;
	view.created_at = stored->created_at;
	if (!view.started_at)
		view.started_at = stored->started_at;
	return run_to_json(&view, with_output);
}

static int run_lookup(struct manager *m, const char *ws_id, const char *run_id,
		      struct workspace **ret_ws, struct run_row *ret_row, struct station_error *e)
{
	int r = workspace_lookup(m, ws_id, ret_ws, e);
	if (r < 0)
		return r;
	r = store_run_get(m->store, ws_id, run_id, ret_row);
	if (r == -ENOENT)
		return station_error_set(e, -ENOENT, NULL,
					 "run \"%s\" not found in workspace \"%s\"", run_id, ws_id);
	if (r < 0)
		return station_error_set(e, r, NULL, "cannot read run \"%s\": %s", run_id,
					 strerror(-r));
	return 0;
}

int manager_run_get(struct manager *m, const char *ws_id, const char *run_id, json_t **ret,
		    struct station_error *e)
{
	struct workspace *ws = NULL;
	struct run_row row = { 0 };
	int r = run_lookup(m, ws_id, run_id, &ws, &row, e);
	if (r < 0)
		return r;
	struct run_state *rs = row.status == RUN_RUNNING ? run_state_find(ws, run_id) : NULL;
	if (rs && !row.started_at)
		row.started_at = rs->started_at;
	*ret = run_to_json_pending(&row, rs, true);
	run_row_free(&row);
	return *ret ? 0 : station_error_set(e, -ENOMEM, NULL, "out of memory");
}

int manager_run_list(struct manager *m, const char *ws_id, json_t **ret, struct station_error *e)
{
	struct workspace *ws = NULL;
	struct run_row *rows = NULL;
	size_t n = 0;
	int r = workspace_lookup(m, ws_id, &ws, e);
	if (r < 0)
		return r;
	r = store_run_list(m->store, ws_id, 1000, &rows, &n);
	if (r < 0)
		return station_error_set(e, r, NULL, "cannot list runs: %s", strerror(-r));
	json_t *a = json_array();
	for (size_t i = 0; i < n; i++) {
		struct run_state *rs =
			rows[i].status == RUN_RUNNING ? run_state_find(ws, rows[i].id) : NULL;
		json_array_append_new(a, run_to_json_pending(&rows[i], rs, false));
		run_row_free(&rows[i]);
	}
	free(rows);
	*ret = json_pack("{s:o}", "commands", a);
	return 0;
}

int manager_run_cancel(struct manager *m, const char *ws_id, const char *run_id,
		       struct station_error *e)
{
	struct workspace *ws = NULL;
	struct run_row row = { 0 };
	int r = run_lookup(m, ws_id, run_id, &ws, &row, e);
	if (r < 0)
		return r;
	int status = row.status;
	run_row_free(&row);
	struct run_state *rs = status == RUN_RUNNING ? run_state_find(ws, run_id) : NULL;
	if (rs && rs->pending)
		status = rs->pending->status;
	if (status != RUN_RUNNING)
		return station_error_set(e, -EBUSY, NULL, "run \"%s\" already finished (%s)",
					 run_id, run_status_to_string(status));
	if (!ws->link || agentlink_send_cancel(ws->link, run_id) < 0)
		return station_error_set(e, -ENOTCONN, NULL,
					 "the agent of workspace \"%s\" is not connected", ws_id);
	return 0;
}

int manager_run_wait(struct manager *m, const char *ws_id, const char *run_id, run_result_fn fn,
		     void *userdata, struct run_waiter **ret, struct station_error *e)
{
	struct workspace *ws = NULL;
	int r = workspace_lookup(m, ws_id, &ws, e);
	if (r < 0)
		return r;
	struct run_state *rs = run_state_find(ws, run_id);
	if (!rs || rs->pending) {
		struct run_row row = { 0 };
		r = run_lookup(m, ws_id, run_id, &ws, &row, e);
		run_row_free(&row);
		return r < 0 ? r : 1;
	}
	struct run_waiter *w = calloc(1, sizeof *w);
	if (!w)
		return station_error_set(e, -ENOMEM, NULL, "out of memory");
	*w = (struct run_waiter){ .m = m, .fn = fn, .userdata = userdata, .head = &rs->waiters };
	LIST_PREPEND(&rs->waiters, w);
	*ret = w;
	return 0;
}

/* --- watches --- */

static int on_replay(struct event_source *s, uint64_t now, void *userdata)
{
	struct run_watch *w = userdata;
	output_follower_finish(&w->follower, w->replay->out);
	watch_free(w);
	return 0;
}

static int watch_finished(struct manager *m, struct run_watch *w, struct run_row *row)
{
	w->replay = malloc(sizeof *w->replay);
	if (!w->replay)
		return -ENOMEM;
	*w->replay = *row;
	*row = (struct run_row){ 0 };
	return event_add_timer(m->loop, &w->timer, 0, on_replay, w);
}

int output_follower_start(struct output_follower *f, const uint64_t *from,
			  const struct run_output *out, struct station_error *e)
{
	static const char *const names[2] = { "stdoutOffset", "stderrOffset" };

	for (int s = 0; from && s < 2; s++) {
		uint64_t total = out ? out[s].total : 0;

		if (out && from[s] > total)
			return station_error_set(e, -EINVAL, names[s],
						 "%s %llu is beyond the %llu bytes the stream "
						 "produced",
						 names[s], (unsigned long long)from[s],
						 (unsigned long long)total);
		f->next_offset[s] = from[s];
	}
	for (int s = 0; !out && s < 2; s++)
		f->awaiting_replay[s] = true;
	return 0;
}

int manager_run_watch(struct manager *m, const char *ws_id, const char *run_id,
		      const uint64_t *from, const struct run_watch_ops *ops, void *userdata,
		      struct run_watch **ret, struct station_error *e)
{
	struct workspace *ws = NULL;
	struct run_row row = { 0 };
	int r = run_lookup(m, ws_id, run_id, &ws, &row, e);
	if (r < 0)
		return r;
	struct run_watch *w = calloc(1, sizeof *w);
	if (!w) {
		run_row_free(&row);
		return station_error_set(e, -ENOMEM, NULL, "out of memory");
	}
	*w = (struct run_watch){ .m = m, .follower = { .ops = ops, .userdata = userdata } };
	struct run_state *rs = row.status == RUN_RUNNING ? run_state_find(ws, run_id) : NULL;
	if (rs && rs->pending) { /* replayed from the pending result */
		struct run_row *copy = run_row_dup(rs->pending);
		run_row_free(&row);
		row = copy ? *copy : (struct run_row){ 0 };
		free(copy);
		rs = NULL;
	}
	r = output_follower_start(&w->follower, from, rs ? NULL : row.out, e);
	if (r < 0) {
		run_row_free(&row);
		watch_free(w);
		return r;
	}
	if (rs) {
		run_row_free(&row);
		w->head = &rs->watches;
		LIST_PREPEND(&rs->watches, w);
		if (ws->link)
			agentlink_send_watch(ws->link, run_id, true);
	} else {
		r = watch_finished(m, w, &row);
		run_row_free(&row);
		if (r < 0) {
			watch_free(w);
			return station_error_set(e, r, NULL, "cannot watch: %s", strerror(-r));
		}
	}
	*ret = w;
	return 0;
}

void manager_run_unwatch(struct run_watch *w)
{
	if (!w)
		return;
	if (w->head) {
		struct run_state *rs =
			(struct run_state *)((char *)w->head - offsetof(struct run_state, watches));
		LIST_REMOVE(w->head, w);
		if (!rs->watches && rs->ws->link)
			agentlink_send_watch(rs->ws->link, rs->id, false);
	}
	watch_free(w);
}

int manager_runs_init(struct manager *m)
{
	int r = event_add_timer(m->loop, &m->fire_timer, UINT64_MAX, on_fire, m);
	if (r >= 0)
		r = event_add_timer(m->loop, &m->pending_timer, UINT64_MAX, on_pending_timer, m);
	return r;
}
