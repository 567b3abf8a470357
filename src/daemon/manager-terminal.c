/* SPDX-License-Identifier: MIT */
/* Terminals: opening them through the agent, their attachers (scrollback replay, then live
 * output), input and resize, force-close, and the one recorded end of each. The agent owns the
 * PTY and its scrollback; this file keeps a record per live terminal, the store keeps all. */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "agentlink.h"
#include "basic/cleanup.h"
#include "basic/list.h"
#include "basic/log.h"
#include "basic/util.h"
#include "event/event.h"
#include "manager-internal.h"

/* Ended terminals kept in the store per workspace, beyond the live ones. */
#define TERMINALS_KEEP_ENDED 100

struct terminal {
	struct terminal *prev, *next; /* in workspace->terminals */
	struct workspace *ws;
	struct terminal_row row;
	struct terminal_attach *attaches;
	struct terminal_waiter *waiters;
	uint64_t next_request;
	int event_state; /* the state the last event announced */
};

struct terminal_attach {
	struct terminal_attach *prev, *next;
	struct terminal *t; /* NULL once ended (ended() pending on the timer) */
	const struct terminal_attach_ops *ops;
	void *userdata;
	uint64_t request;     /* the TERM_REPLAY it waits for; 0: live */
	uint64_t next_offset; /* stream offset after the last byte delivered */
	bool fresh;	      /* nothing delivered yet: the replay sets where it starts */
	struct event_source *timer;
	json_t *final;
};

struct terminal_waiter {
	struct terminal_waiter *prev, *next;
	struct terminal *t; /* NULL once due (fn pending on the timer) */
	enum terminal_wait what;
	run_waiter_fn fn;
	void *userdata;
	struct event_source *timer;
};

/* ---- JSON ---------------------------------------------------------------------------------- */

static json_t *terminal_to_json(const struct terminal_row *r)
{
	json_t *o = json_object();

	if (!o)
		return NULL;
	json_object_set_new(o, "id", json_string(r->id));
	json_object_set_new(o, "command", r->command ? json_string(r->command) : json_null());
	if (r->cwd)
		json_object_set_new(o, "cwd", json_string(r->cwd));
	json_object_set_new(o, "env", env_json_redacted(r->env_json));
	json_object_set_new(o, "cols", json_integer((json_int_t)r->cols));
	json_object_set_new(o, "rows", json_integer((json_int_t)r->rows));
	json_object_set_new(o, "state", json_string(terminal_state_to_string(r->state)));
	if (r->reason)
		json_object_set_new(o, "reason", json_string(r->reason));
	json_object_set_new(o, "pid", r->pid > 0 ? json_integer(r->pid) : json_null());
	json_object_set_new(o, "exitCode",
			    r->exit_code >= 0 ? json_integer(r->exit_code) : json_null());
	json_object_set_new(o, "signal", r->signal > 0 ? json_integer(r->signal) : json_null());
	json_object_set_new(o, "outputBytes", json_integer((json_int_t)r->output_bytes));
	json_set_time(o, "createdAt", r->created_at);
	json_set_time(o, "startedAt", r->started_at);
	json_set_time(o, "endedAt", r->ended_at);
	return o;
}

/* ---- records ------------------------------------------------------------------------------- */

static struct terminal *terminal_find(struct workspace *ws, const char *id)
{
	for (struct terminal *t = ws->terminals; t; t = t->next)
		if (strcmp(t->row.id, id) == 0)
			return t;
	return NULL;
}

/* The terminal an agent's report is about; NULL (ignored, logged) unless this workspace's. */
static struct terminal *terminal_of_report(struct workspace *ws, const char *id, const char *what)
{
	struct terminal *t = terminal_find(ws, id);

	if (!t)
		agent_report_ignored(ws, what, id);
	return t;
}

/* Takes the row's strings. */
static int terminal_add(struct workspace *ws, struct terminal_row *row, struct terminal **ret)
{
	struct terminal *t = calloc(1, sizeof *t);

	if (!t)
		return -ENOMEM;
	t->ws = ws;
	t->row = *row;
	t->event_state = (int)row->state;
	*row = (struct terminal_row){ 0 };
	LIST_PREPEND(&ws->terminals, t);
	ws->n_terminals++;
	if (ret)
		*ret = t;
	return 0;
}

static void terminal_store(struct terminal *t)
{
	int r = store_terminal_update(t->ws->m->store, &t->row);

	if (t->event_state != (int)t->row.state) {
		t->event_state = (int)t->row.state;
		workspace_event(t->ws, MANAGER_EVENT_TERMINAL,
				terminal_state_is_live(t->row.state) ? "state" : "ended", t->row.id,
				terminal_state_to_string(t->row.state), t->row.reason);
	}

	if (r < 0)
		log_error("cannot record terminal", "workspace", t->ws->row.id, "terminal",
			  t->row.id, "error", strerror(-r), NULL);
}

/* ---- waiters ------------------------------------------------------------------------------- */

static void waiter_free(struct terminal_waiter *w)
{
	if (w->t)
		LIST_REMOVE(&w->t->waiters, w);
	event_source_free(w->timer);
	free(w);
}

static int on_waiter_due(struct event_source *s, uint64_t now, void *userdata)
{
	struct terminal_waiter *w = userdata;
	run_waiter_fn fn = w->fn;
	void *data = w->userdata;

	waiter_free(w);
	fn(data);
	return 0;
}

/* Every waiter for what (TERMINAL_WAIT_ENDED: all of them) fires from a zero-delay timer. */
static void waiters_fire(struct terminal *t, bool ended)
{
	struct manager *m = t->ws->m;

	for (struct terminal_waiter *w = t->waiters, *next; w; w = next) {
		next = w->next;
		if (!ended && w->what != TERMINAL_WAIT_STARTED)
			continue;
		LIST_REMOVE(&t->waiters, w);
		w->t = NULL;
		if (event_add_timer(m->loop, &w->timer, 0, on_waiter_due, w) < 0)
			on_waiter_due(NULL, 0, w);
	}
}

void manager_terminal_waiter_cancel(struct terminal_waiter *w)
{
	if (w)
		waiter_free(w);
}

/* ---- attachers ----------------------------------------------------------------------------- */

static void attach_free(struct terminal_attach *a)
{
	if (a->t) {
		LIST_REMOVE(&a->t->attaches, a);
		workspace_touch(a->t->ws); /* a detach: idle counts from here */
	}
	event_source_free(a->timer);
	json_decref(a->final);
	free(a);
}

static void attach_deliver(struct terminal_attach *a, uint64_t offset, const uint8_t *data,
			   size_t n)
{
	if (n == 0 || !output_skip_seen(a->next_offset, &offset, &data, &n))
		return;
	a->next_offset = offset + n;
	a->ops->output(a->userdata, offset, data, n);
}

static int on_attach_ended(struct event_source *s, uint64_t now, void *userdata)
{
	struct terminal_attach *a = userdata;
	const struct terminal_attach_ops *ops = a->ops;
	json_t *final = json_incref(a->final);
	void *data = a->userdata;

	attach_free(a);
	ops->ended(data, final);
	json_decref(final);
	return 0;
}

/* The terminal has ended: every attacher hears it from a zero-delay timer. */
static void attaches_end(struct terminal *t)
{
	struct manager *m = t->ws->m;

	while (t->attaches) {
		struct terminal_attach *a = t->attaches;

		LIST_REMOVE(&t->attaches, a);
		a->t = NULL;
		a->final = terminal_to_json(&t->row);
		if (event_add_timer(m->loop, &a->timer, 0, on_attach_ended, a) < 0)
			on_attach_ended(NULL, 0, a);
	}
}

static bool link_up(const struct workspace *ws)
{
	return ws->link && ws->link_ready;
}

/* Asks the agent for the scrollback and live output for every attacher still waiting. */
static void terminal_request_replay(struct terminal *t)
{
	uint64_t request = ++t->next_request;

	for (struct terminal_attach *a = t->attaches; a; a = a->next)
		a->request = request;
	if (link_up(t->ws))
		(void)agentlink_send_terminal_attach(t->ws->link, t->row.id, true, request);
}

/* ---- ending -------------------------------------------------------------------------------- */

static void terminal_free(struct terminal *t)
{
	LIST_REMOVE(&t->ws->terminals, t);
	t->ws->n_terminals--;
	while (t->attaches)
		attach_free(t->attaches);
	while (t->waiters)
		waiter_free(t->waiters);
	terminal_row_free(&t->row);
	free(t);
}

static void terminal_end(struct terminal *t)
{
	log_info("terminal ended", "workspace", t->ws->row.id, "terminal", t->row.id, "state",
		 terminal_state_to_string(t->row.state), NULL);
	waiters_fire(t, true);
	attaches_end(t);
	terminal_free(t);
}

static void terminal_lose(struct terminal *t, const char *reason)
{
	t->row.state = TERMINAL_LOST;
	(void)free_and_strdup(&t->row.reason, reason);
	t->row.ended_at = realtime_usec();
	terminal_store(t);
	terminal_end(t);
}

void terminals_lose_all(struct workspace *ws, const char *reason)
{
	while (ws->terminals)
		terminal_lose(ws->terminals, reason);
}

void terminals_free_all(struct workspace *ws)
{
	while (ws->terminals)
		terminal_free(ws->terminals);
}

void terminals_load(struct workspace *ws)
{
	struct terminal_row *rows = NULL;
	size_t n = 0;
	int r = store_terminal_list(ws->m->store, ws->row.id, &rows, &n);

	if (r < 0) {
		log_error("cannot load terminals", "workspace", ws->row.id, "error", strerror(-r),
			  NULL);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		if (terminal_state_is_live(rows[i].state) && terminal_add(ws, &rows[i], NULL) < 0)
			log_error("cannot load a terminal", "workspace", ws->row.id, NULL);
		terminal_row_free(&rows[i]);
	}
	free(rows);
}

/* ---- from the agent ------------------------------------------------------------------------ */

void terminals_on_hello(void *userdata, char **ids, size_t n_ids)
{
	struct workspace *ws = userdata;

	for (struct terminal *t = ws->terminals, *next; t; t = next) {
		bool known = false;

		next = t->next;
		for (size_t i = 0; i < n_ids && !known; i++)
			known = strcmp(ids[i], t->row.id) == 0;
		if (!known)
			terminal_lose(t, "the agent has no record of the terminal");
		else if (t->attaches)
			terminal_request_replay(t); /* the agent forgot its watchers */
	}
}

void terminals_on_opened(void *userdata, const char *id, uint64_t pid, uint64_t started_at,
			 const char *command)
{
	struct terminal *t = terminal_of_report(userdata, id, "terminal start");

	if (!t)
		return;
	t->row.state = TERMINAL_RUNNING;
	(void)free_and_strdup(&t->row.command, command);
	t->row.pid = (int64_t)pid;
	t->row.started_at = started_at;
	terminal_store(t);
	waiters_fire(t, false);
}

void terminals_on_output(void *userdata, const char *id, uint64_t offset, const uint8_t *data,
			 size_t n)
{
	struct terminal *t = terminal_of_report(userdata, id, "terminal output");

	if (!t)
		return;
	t->row.output_bytes = MAX(t->row.output_bytes, offset + n);
	/* Attachers still waiting for their replay get these bytes from it. */
	for (struct terminal_attach *a = t->attaches, *next; a; a = next) {
		next = a->next;
		if (a->request == 0)
			attach_deliver(a, offset, data, n);
	}
}

void terminals_on_replay(void *userdata, const char *id, uint64_t request, uint64_t offset,
			 const uint8_t *data, size_t n)
{
	struct terminal *t = terminal_of_report(userdata, id, "terminal replay");

	if (!t)
		return;
	for (struct terminal_attach *a = t->attaches, *next; a; a = next) {
		next = a->next;
		if (a->request == 0 || a->request > request)
			continue;
		a->request = 0;
		if (a->fresh) {
			a->fresh = false;
			a->next_offset = offset;
		}
		attach_deliver(a, offset, data, n);
	}
}

static enum terminal_state exit_state(const struct agentlink_terminal_exit *x)
{
	if (x->status == RUN_FAILED_TO_START)
		return TERMINAL_FAILED;
	return x->forced ? TERMINAL_CLOSED : TERMINAL_EXITED;
}

static void row_set_exit(struct terminal_row *row, const struct agentlink_terminal_exit *x)
{
	row->state = exit_state(x);
	(void)free_and_strdup(&row->reason, x->reason);
	row->exit_code = x->exit_code;
	row->signal = x->signal;
	row->ended_at = x->ended_at ? x->ended_at : realtime_usec();
	row->output_bytes = MAX(row->output_bytes, x->output_bytes);
	if (!row->started_at)
		row->started_at = x->started_at;
}

void terminals_on_exit(void *userdata, uint64_t seq, const struct agentlink_terminal_exit *x)
{
	struct workspace *ws = userdata;
	struct terminal *t = terminal_find(ws, x->id);
	struct terminal_row row = { 0 };
	int r;

	if (t) {
		row_set_exit(&t->row, x);
		r = store_terminal_update(ws->m->store, &t->row);
		if (r >= 0 && t->event_state != (int)t->row.state) {
			t->event_state = (int)t->row.state;
			workspace_event(ws, MANAGER_EVENT_TERMINAL, "ended", t->row.id,
					terminal_state_to_string(t->row.state), t->row.reason);
		}
	} else {
		/* Already given up on (lost): the agent's word is better. Only this workspace's
		 * terminal: another's is -ENOENT here. */
		r = store_terminal_get(ws->m->store, ws->row.id, x->id, &row);
		if (r == -ENOENT)
			agent_report_ignored(ws, "terminal exit", x->id);
		if (r >= 0 && (terminal_state_is_live(row.state) || row.state == TERMINAL_LOST)) {
			row_set_exit(&row, x);
			r = store_terminal_update(ws->m->store, &row);
		}
		terminal_row_free(&row);
	}
	if (r < 0 && r != -ENOENT) {
		log_error("cannot record terminal end", "workspace", ws->row.id, "terminal", x->id,
			  "error", strerror(-r), NULL);
		return; /* no ACK: the agent sends it again after the next HELLO */
	}
	if (ws->link)
		agentlink_send_ack(ws->link, seq);
	if (t)
		terminal_end(t);
}

/* ---- the API ------------------------------------------------------------------------------- */

static int terminal_lookup(struct manager *m, const char *ws_id, const char *term_id,
			   struct workspace **ret_ws, struct terminal_row *ret_row,
			   struct station_error *e)
{
	int r = workspace_lookup(m, ws_id, ret_ws, e);

	if (r < 0)
		return r;
	r = store_terminal_get(m->store, ws_id, term_id, ret_row);
	if (r == -ENOENT)
		return station_error_set(e, -ENOENT, NULL,
					 "terminal \"%s\" not found in workspace \"%s\"", term_id,
					 ws_id);
	if (r < 0)
		return station_error_set(e, r, NULL, "cannot read terminal \"%s\": %s", term_id,
					 strerror(-r));
	return 0;
}

static int check_workspace(struct workspace *ws, struct station_error *e)
{
	int r = workspace_check_ready(ws, e);

	if (r < 0)
		return r;
	if (!link_up(ws))
		return station_error_set(e, -ENOTCONN, NULL,
					 "the agent of workspace \"%s\" is not connected",
					 ws->row.id);
	if (ws->n_terminals >= MANAGER_MAX_TERMINALS)
		return station_error_set(e, -EAGAIN, NULL,
					 "workspace \"%s\" already has %d terminals (the limit)",
					 ws->row.id, MANAGER_MAX_TERMINALS);
	return 0;
}

static int terminal_send_open(struct workspace *ws, const struct terminal_row *row,
			      const struct terminal_spec *spec)
{
	_cleanup_free_ char *cwd = workspace_cwd(ws, spec->cwd);
	char **env = NULL;
	int r = cwd ? env_object_to_strv(spec->env, &env) : -ENOMEM;

	if (r >= 0) {
		struct agentlink_terminal at = {
			.id = row->id,
			.command = spec->command,
			.cwd = cwd,
			.env = env,
			.cols = spec->cols,
			.rows = spec->rows,
			.scrollback_bytes = MANAGER_TERMINAL_SCROLLBACK,
		};
		r = agentlink_send_terminal_open(ws->link, &at);
	}
	strv_free(env);
	return r;
}

int manager_terminal_open(struct manager *m, const char *ws_id, const struct terminal_spec *spec,
			  json_t **ret, struct station_error *e)
{
	struct workspace *ws = NULL;
	_cleanup_free_ char *env_json = NULL;
	char id[PROTO_MAX_ID + 1];
	struct terminal_row row;
	struct terminal *t;
	int r = workspace_lookup(m, ws_id, &ws, e);

	if (r >= 0)
		r = workspace_wake_for(ws, "a terminal", e);
	if (r >= 0)
		r = check_workspace(ws, e);
	if (r < 0)
		return r;
	random_id("t-", 26, id, sizeof id);
	env_json = spec->env ? json_dumps(spec->env, JSON_COMPACT) : NULL;
	row = (struct terminal_row){
		.id = strdup(id),
		.workspace_id = strdup(ws->row.id),
		.command = spec->command ? strdup(spec->command) : NULL,
		.cwd = spec->cwd ? strdup(spec->cwd) : NULL,
		.env_json = TAKE_PTR(env_json),
		.cols = spec->cols,
		.rows = spec->rows,
		.state = TERMINAL_STARTING,
		.exit_code = -1,
		.created_at = realtime_usec(),
	};
	if (!row.id || !row.workspace_id || (spec->command && !row.command)) {
		terminal_row_free(&row);
		return station_error_set(e, -ENOMEM, NULL, "out of memory");
	}
	r = store_terminal_insert(m->store, &row, TERMINALS_KEEP_ENDED);
	if (r < 0) {
		terminal_row_free(&row);
		return station_error_set(e, r, NULL, "cannot record the terminal: %s",
					 strerror(-r));
	}
	workspace_event(ws, MANAGER_EVENT_TERMINAL, "created", row.id,
			terminal_state_to_string(row.state), NULL);
	r = terminal_add(ws, &row, &t);
	if (r < 0) {
		terminal_row_free(&row);
		return station_error_set(e, r, NULL, "out of memory");
	}
	r = terminal_send_open(ws, &t->row, spec);
	*ret = terminal_to_json(&t->row);
	if (r < 0) {
		terminal_lose(t, "the agent could not be reached");
		json_decref(*ret);
		return station_error_set(e, -ENOTCONN, NULL,
					 "the agent of workspace \"%s\" could not be reached: %s",
					 ws_id, strerror(-r));
	}
	log_info("terminal opening", "workspace", ws_id, "terminal", id, NULL);
	return *ret ? 0 : station_error_set(e, -ENOMEM, NULL, "out of memory");
}

int manager_terminal_list(struct manager *m, const char *ws_id, json_t **ret,
			  struct station_error *e)
{
	struct workspace *ws = NULL;
	struct terminal_row *rows = NULL;
	size_t n = 0;
	json_t *a;
	int r = workspace_lookup(m, ws_id, &ws, e);

	if (r < 0)
		return r;
	r = store_terminal_list(m->store, ws_id, &rows, &n);
	if (r < 0)
		return station_error_set(e, r, NULL, "cannot list terminals: %s", strerror(-r));
	a = json_array();
	for (size_t i = 0; i < n; i++) {
		json_array_append_new(a, terminal_to_json(&rows[i]));
		terminal_row_free(&rows[i]);
	}
	free(rows);
	*ret = json_pack("{s:o}", "terminals", a);
	return *ret ? 0 : station_error_set(e, -ENOMEM, NULL, "out of memory");
}

int manager_terminal_get(struct manager *m, const char *ws_id, const char *term_id, json_t **ret,
			 struct station_error *e)
{
	struct workspace *ws = NULL;
	struct terminal_row row = { 0 };
	int r = terminal_lookup(m, ws_id, term_id, &ws, &row, e);

	if (r < 0)
		return r;
	*ret = terminal_to_json(&row);
	terminal_row_free(&row);
	return *ret ? 0 : station_error_set(e, -ENOMEM, NULL, "out of memory");
}

/* The live terminal, or an error naming why there is none. */
static int live_lookup(struct manager *m, const char *ws_id, const char *term_id,
		       struct terminal **ret, struct station_error *e)
{
	struct workspace *ws = NULL;
	struct terminal_row row = { 0 };
	int r = terminal_lookup(m, ws_id, term_id, &ws, &row, e);

	if (r < 0)
		return r;
	*ret = terminal_find(ws, term_id);
	if (!*ret)
		r = station_error_set(e, -EBUSY, NULL, "terminal \"%s\" has ended (%s)", term_id,
				      terminal_state_to_string(row.state));
	terminal_row_free(&row);
	return r;
}

static int terminal_resize(struct terminal *t, unsigned cols, unsigned rows)
{
	t->row.cols = cols;
	t->row.rows = rows;
	terminal_store(t);
	if (!link_up(t->ws))
		return -ENOTCONN;
	return agentlink_send_terminal_resize(t->ws->link, t->row.id, cols, rows);
}

int manager_terminal_resize(struct manager *m, const char *ws_id, const char *term_id,
			    unsigned cols, unsigned rows, json_t **ret, struct station_error *e)
{
	struct terminal *t = NULL;
	int r = live_lookup(m, ws_id, term_id, &t, e);

	if (r < 0)
		return r;
	r = terminal_resize(t, cols, rows);
	if (r < 0)
		return station_error_set(e, -ENOTCONN, NULL,
					 "the agent of workspace \"%s\" is not connected", ws_id);
	if (ret)
		*ret = terminal_to_json(&t->row);
	return 0;
}

int manager_terminal_close(struct manager *m, const char *ws_id, const char *term_id,
			   struct station_error *e)
{
	struct terminal *t = NULL;
	int r = live_lookup(m, ws_id, term_id, &t, e);

	if (r == -EBUSY)
		return 1;
	if (r < 0)
		return r;
	if (!link_up(t->ws) || agentlink_send_terminal_close(t->ws->link, term_id) < 0)
		return station_error_set(e, -ENOTCONN, NULL,
					 "the agent of workspace \"%s\" is not connected", ws_id);
	log_info("terminal force-close", "workspace", ws_id, "terminal", term_id, NULL);
	return 0;
}

int manager_terminal_wait(struct manager *m, const char *ws_id, const char *term_id,
			  enum terminal_wait what, run_waiter_fn fn, void *userdata,
			  struct terminal_waiter **ret, struct station_error *e)
{
	struct workspace *ws = NULL;
	struct terminal_row row = { 0 };
	struct terminal_waiter *w;
	struct terminal *t;
	int r = terminal_lookup(m, ws_id, term_id, &ws, &row, e);

	terminal_row_free(&row);
	if (r < 0)
		return r;
	t = terminal_find(ws, term_id);
	if (!t || (what == TERMINAL_WAIT_STARTED && t->row.state != TERMINAL_STARTING))
		return 1;
	w = calloc(1, sizeof *w);
	if (!w)
		return station_error_set(e, -ENOMEM, NULL, "out of memory");
	*w = (struct terminal_waiter){ .t = t, .what = what, .fn = fn, .userdata = userdata };
	LIST_PREPEND(&t->waiters, w);
	*ret = w;
	return 0;
}

int manager_terminal_attach(struct manager *m, const char *ws_id, const char *term_id,
			    const struct terminal_attach_ops *ops, void *userdata,
			    struct terminal_attach **ret, struct station_error *e)
{
	struct workspace *ws = NULL;
	struct terminal_row row = { 0 };
	struct terminal_attach *a;
	struct terminal *t;
	int r = terminal_lookup(m, ws_id, term_id, &ws, &row, e);

	if (r >= 0 && (workspace_is_paused(ws) || ws->pausing) &&
	    (r = workspace_wake_for(ws, "a terminal attach", e)) < 0)
		terminal_row_free(&row);
	if (r < 0)
		return r;
	a = calloc(1, sizeof *a);
	if (!a) {
		terminal_row_free(&row);
		return station_error_set(e, -ENOMEM, NULL, "out of memory");
	}
	*a = (struct terminal_attach){ .ops = ops, .userdata = userdata, .fresh = true };
	t = terminal_find(ws, term_id);
	if (t) {
		a->t = t;
		LIST_PREPEND(&t->attaches, a);
		a->request = ++t->next_request;
		if (link_up(ws))
			(void)agentlink_send_terminal_attach(ws->link, term_id, true, a->request);
	} else {
		a->final = terminal_to_json(&row);
		if (!a->final || event_add_timer(m->loop, &a->timer, 0, on_attach_ended, a) < 0) {
			attach_free(a);
			terminal_row_free(&row);
			return station_error_set(e, -ENOMEM, NULL, "out of memory");
		}
	}
	terminal_row_free(&row);
	*ret = a;
	return 0;
}

void manager_terminal_detach(struct terminal_attach *a)
{
	struct terminal *t;

	if (!a)
		return;
	t = a->t;
	attach_free(a);
	if (t && !t->attaches && link_up(t->ws))
		(void)agentlink_send_terminal_attach(t->ws->link, t->row.id, false, 0);
}

int manager_terminal_input(struct terminal_attach *a, const void *data, size_t n)
{
	struct terminal *t = a->t;

	if (!t || !link_up(t->ws))
		return -ENOTCONN;
	return agentlink_send_terminal_input(t->ws->link, t->row.id, data, n);
}

int manager_terminal_attach_resize(struct terminal_attach *a, unsigned cols, unsigned rows)
{
	return a->t ? terminal_resize(a->t, cols, rows) : -ENOTCONN;
}

int manager_terminal_resync(struct terminal_attach *a, uint64_t from)
{
	struct terminal *t = a->t;

	if (!t)
		return -ENOTCONN;
	a->fresh = false;
	a->next_offset = from;
	a->request = ++t->next_request;
	if (!link_up(t->ws))
		return 0; /* the next HELLO asks for every attacher's replay */
	return agentlink_send_terminal_attach(t->ws->link, t->row.id, true, a->request);
}

size_t terminals_attached_count(const struct workspace *ws)
{
	size_t n = 0;
	for (const struct terminal *t = ws->terminals; t; t = t->next)
		for (const struct terminal_attach *a = t->attaches; a; a = a->next)
			n += a->t != NULL;
	return n;
}
