/* SPDX-License-Identifier: MIT */
/* Services: definitions in the store, their state as the agent reports it, attempts recorded
 * once each, resync after a controller or workspace restart, and live logs. The agent
 * supervises; this file keeps the books (docs/agent-protocol.md, "Services"). */

#include <errno.h>
#include <signal.h>
#include <stdio.h>
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
#include "proto/agent-proto.h"

/* Finished attempts the store keeps per service. */
#define SERVICE_KEEP_ATTEMPTS 100
/* The most a running attempt's byte count shows (2^53 - 1: exact in every JSON reader). An
 * agent reports it; a sandbox can lie, so the number is display only and clamped. */
#define SERVICE_MAX_LIVE_BYTES ((1ull << 53) - 1)

struct service {
	struct service *prev, *next; /* in workspace->services */
	struct workspace *ws;
	struct service_row row;
	struct service_watch *watches;
	int event_state;		/* the state the last event announced; -1: none yet */
	struct service_waiter *waiters; /* for the service to come to rest */
	uint64_t live_attempt;		/* the attempt live_bytes count (SERVICE_PROGRESS) */
	uint64_t live_bytes[2];		/* its stdout and stderr totals so far, clamped */
};

struct service_waiter {
	struct service_waiter *prev, *next;
	struct service *svc;
	service_rest_fn fn;
	void *userdata;
};

struct service_watch {
	struct service_watch *prev, *next;
	struct service *svc; /* NULL while replaying a stored attempt */
	struct manager *m;
	struct output_follower follower;
	uint64_t attempt; /* the attempt followed; 0: the one the service is starting */
	struct service_attempt_row *replay;
	struct event_source *timer;
};

static struct service *service_find(struct workspace *ws, const char *name)
{
	for (struct service *s = ws->services; s; s = s->next)
		if (strcmp(s->row.name, name) == 0)
			return s;
	return NULL;
}

bool service_is_active(struct workspace *ws, const char *name)
{
	const struct service *svc = service_find(ws, name);

	return svc && service_state_is_active(svc->row.state);
}

/* Services a client sees (a code context's kernel is not one), counted against the limit. */
static size_t services_visible_count(const struct workspace *ws)
{
	size_t n = 0;

	for (const struct service *s = ws->services; s; s = s->next)
		n += !service_name_hidden(s->row.name);
	return n;
}

uint64_t service_current_attempt(struct workspace *ws, const char *name)
{
	const struct service *svc = service_find(ws, name);

	return svc ? svc->row.current_attempt : 0;
}

bool service_attempt_is_current(struct workspace *ws, const char *name, uint64_t attempt)
{
	const struct service *svc = service_find(ws, name);

	return svc && attempt > 0 && svc->row.current_attempt == attempt;
}

/* Calls (and frees) every waiter: at_rest, or the service is going away. */
static void waiters_fire(struct service *svc, bool at_rest)
{
	while (svc->waiters) {
		struct service_waiter *w = svc->waiters;

		LIST_REMOVE(&svc->waiters, w);
		w->fn(w->userdata, at_rest);
		free(w);
	}
}

static void service_save(struct service *svc)
{
	int r;

	svc->row.updated_at = realtime_usec();
	if (svc->event_state != (int)svc->row.state && !service_name_hidden(svc->row.name)) {
		svc->event_state = (int)svc->row.state;
		workspace_event(svc->ws, MANAGER_EVENT_SERVICE, "state", svc->row.name,
				service_state_to_string(svc->row.state), svc->row.reason);
	}
	r = store_service_update(svc->ws->m->store, &svc->row);
	if (r < 0)
		log_error("cannot record service state", "workspace", svc->ws->row.id, "service",
			  svc->row.name, "error", strerror(-r), NULL);
}

/* A state the controller decides (no agent involved). */
static void service_set_state(struct service *svc, enum service_state state, const char *reason)
{
	svc->row.state = state;
	(void)free_and_strdup(&svc->row.reason, reason);
	svc->row.main_pid = 0;
	svc->row.current_attempt = 0;
	svc->row.next_restart_at = 0;
	svc->row.stopping = false;
	service_save(svc);
	log_info("service state", "workspace", svc->ws->row.id, "service", svc->row.name, "state",
		 service_state_to_string(state), "reason", reason ? reason : "", NULL);
	if (!service_state_is_active(state))
		waiters_fire(svc, true);
}

/* ---- watches ------------------------------------------------------------------------------- */

static void watch_free(struct service_watch *w)
{
	event_source_free(w->timer);
	if (w->replay) {
		service_attempt_row_free(w->replay);
		free(w->replay);
	}
	free(w);
}

static void agent_watch(struct service *svc, bool on)
{
	struct workspace *ws = svc->ws;

	if (ws->link)
		(void)agentlink_send_service(ws->link, MSG_SERVICE_WATCH, svc->row.name, on);
}

/* Ends the watches of svc that follow `attempt` (every one when attempt is 0). */
static void watches_end(struct service *svc, uint64_t attempt,
			const struct service_attempt_row *result)
{
	for (struct service_watch *w = svc->watches, *next; w; w = next) {
		next = w->next;
		if (attempt && w->attempt != attempt)
			continue;
		LIST_REMOVE(&svc->watches, w);
		output_follower_finish(&w->follower, result ? result->out : NULL);
		watch_free(w);
	}
	if (!svc->watches && attempt)
		agent_watch(svc, false);
}

static int watch_replay(struct service *svc, struct service_watch *w, const uint64_t *from,
			struct station_error *e);

/* The watches that wait for the attempt a start is making (attempt 0), once the agent reported
 * the service: they follow its current attempt, or, when none runs (it ended or never started),
 * replay the newest finished attempt. */
static void watches_settle_starting(struct service *svc)
{
	bool live = svc->row.current_attempt > 0;
	bool watch = false;

	if (svc->row.state == SERVICE_STARTING && !live)
		return;
	for (struct service_watch *w = svc->watches, *next; w; w = next) {
		next = w->next;
		if (w->attempt)
			continue;
		if (live) {
			w->attempt = svc->row.current_attempt;
			watch = true;
			continue;
		}
		LIST_REMOVE(&svc->watches, w);
		w->svc = NULL;
		if (watch_replay(svc, w, w->follower.next_offset, NULL) < 0) {
			output_follower_finish(&w->follower, NULL);
			watch_free(w);
		}
	}
	if (watch)
		agent_watch(svc, true);
}

/* ---- definitions ---------------------------------------------------------------------------- */

static void service_free(struct service *svc)
{
	waiters_fire(svc, false);
	while (svc->watches) {
		struct service_watch *w = svc->watches;

		LIST_REMOVE(&svc->watches, w);
		watch_free(w);
	}
	service_row_free(&svc->row);
	free(svc);
}

static void service_unlink(struct service *svc)
{
	LIST_REMOVE(&svc->ws->services, svc);
	svc->ws->n_services--;
}

static void service_link(struct workspace *ws, struct service *svc)
{
	svc->ws = ws;
	LIST_APPEND(&ws->services, svc);
	ws->n_services++;
}

void services_load(struct workspace *ws)
{
	struct service_row *rows = NULL;
	size_t n = 0;
	int r = store_service_list(ws->m->store, ws->row.id, &rows, &n);

	if (r < 0) {
		log_error("cannot load services", "workspace", ws->row.id, "error", strerror(-r),
			  NULL);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		struct service *svc = calloc(1, sizeof *svc);

		if (!svc) {
			service_row_free(&rows[i]);
			continue;
		}
		svc->row = rows[i];
		svc->event_state = (int)svc->row.state;
		service_link(ws, svc);
	}
	free(rows);
}

/* ---- attempt ends the store could not record -------------------------------------------- */

struct pending_attempt {
	struct pending_attempt *prev, *next;
	char name[64]; /* for the log only */
	struct service_attempt_row row;
	uint64_t seq; /* the SERVICE_ATTEMPT_DONE to acknowledge, on gen */
	unsigned gen;
};

static void pending_attempt_free(struct workspace *ws, struct pending_attempt *p)
{
	LIST_REMOVE(&ws->pending_attempts, p);
	service_attempt_row_free(&p->row);
	free(p);
	ws->m->n_pending--;
}

static struct pending_attempt *pending_attempt_find(struct workspace *ws, const char *service_id,
						    uint64_t number)
{
	for (struct pending_attempt *p = ws->pending_attempts; p; p = p->next)
		if (p->row.number == number && strcmp(p->row.service_id, service_id) == 0)
			return p;
	return NULL;
}

/* A deep copy of a into ret; -ENOMEM (ret freed) when out of memory. */
static int attempt_row_copy(const struct service_attempt_row *a, struct service_attempt_row *ret)
{
	int r = 0;

	*ret = *a;
	ret->service_id = strdup(a->service_id);
	ret->reason = a->reason ? strdup(a->reason) : NULL;
	for (int i = 0; i < 2; i++) {
		ret->out[i].head = ret->out[i].tail = NULL;
		r |= memdup_bytes(&ret->out[i].head, a->out[i].head, a->out[i].head_len);
		r |= memdup_bytes(&ret->out[i].tail, a->out[i].tail, a->out[i].tail_len);
	}
	if (r || !ret->service_id || (a->reason && !ret->reason)) {
		service_attempt_row_free(ret);
		return -ENOMEM;
	}
	return 0;
}

/* The newest attempt of the service kept in memory (not yet written); NULL: none. */
static const struct service_attempt_row *pending_attempt_newest(struct workspace *ws,
								const char *service_id)
{
	const struct service_attempt_row *best = NULL;
	for (struct pending_attempt *p = ws->pending_attempts; p; p = p->next)
		if (strcmp(p->row.service_id, service_id) == 0 &&
		    (!best || p->row.number > best->number))
			best = &p->row;
	return best;
}

/* Keeps a (deep copy) to be written by the retry; false when out of memory. */
static bool pending_attempt_keep(struct workspace *ws, const char *name, uint64_t seq,
				 const struct service_attempt_row *a)
{
	struct pending_attempt *p = calloc(1, sizeof *p);

	if (!p)
		return false;
	snprintf(p->name, sizeof p->name, "%s", name);
	if (attempt_row_copy(a, &p->row) < 0) {
		free(p);
		return false;
	}
	p->seq = seq;
	p->gen = ws->link_gen;
	LIST_PREPEND(&ws->pending_attempts, p);
	ws->m->n_pending++;
	manager_pending_retry_at(ws->m, now_usec() + 1000000);
	return true;
}

int services_pending_write(struct workspace *ws)
{
	while (ws->pending_attempts) {
		struct pending_attempt *p = ws->pending_attempts;
		int r = store_attempt_insert(ws->m->store, &p->row, SERVICE_KEEP_ATTEMPTS);
		if (r < 0)
			return -EINPROGRESS;
		log_info("service attempt recorded after a store failure", "workspace", ws->row.id,
			 "service", p->name, NULL);
		if (ws->link && p->gen == ws->link_gen)
			agentlink_send_ack(ws->link, p->seq);
		pending_attempt_free(ws, p);
	}
	return 0;
}

void services_free_all(struct workspace *ws)
{
	while (ws->pending_attempts)
		pending_attempt_free(ws, ws->pending_attempts);
	while (ws->services) {
		struct service *svc = ws->services;

		service_unlink(svc);
		service_free(svc);
	}
}

/* The attempt that was running when the agent went away ends `lost`. */
static void record_lost_attempt(struct service *svc, const char *reason)
{
	struct service_attempt_row a = {
		.service_id = svc->row.id,
		.number = svc->row.current_attempt,
		.started_at = svc->row.attempt_started_at,
		.ended_at = realtime_usec(),
		.exit_code = -1,
		.end_reason = ATTEMPT_LOST,
		.reason = (char *)reason,
	};
	int r = store_attempt_insert(svc->ws->m->store, &a, SERVICE_KEEP_ATTEMPTS);

	if (r < 0)
		log_error("cannot record a lost service attempt", "service", svc->row.name, "error",
			  strerror(-r), NULL);
	if (svc->row.next_attempt <= a.number)
		svc->row.next_attempt = a.number + 1;
	watches_end(svc, 0, &a);
}

void services_lose_all(struct workspace *ws, const char *reason)
{
	for (struct service *svc = ws->services; svc; svc = svc->next) {
		if (svc->row.current_attempt > 0)
			record_lost_attempt(svc, reason);
		watches_end(svc, 0, NULL);
		if (service_state_is_active(svc->row.state))
			service_set_state(svc, SERVICE_STOPPED, reason);
	}
}

/* ---- talking to the agent ------------------------------------------------------------------ */

static int env_strv(const char *env_json, char ***ret)
{
	_cleanup_json_ json_t *env = env_json ? json_loads(env_json, 0, NULL) : NULL;

	return env_object_to_strv(env, ret);
}

/* SERVICE_START with the whole definition: a fresh run of the service. */
static int service_send_start(struct service *svc)
{
	struct workspace *ws = svc->ws;
	const struct service_row *r = &svc->row;
	_cleanup_free_ char *cwd = workspace_cwd(ws, r->cwd);
	char **env = NULL;
	int k;

	if (!ws->link)
		return -ENOTCONN;
	if (!cwd || env_strv(r->env_json, &env) < 0)
		return -ENOMEM;
	struct agentlink_service as = {
		.name = r->name,
		.id = r->id,
		.command = r->command,
		.cwd = cwd,
		.env = env,
		.policy = r->restart_policy,
		.max_restarts = r->max_restarts,
		.delay_ms = r->delay_ms,
		.backoff_permille = r->backoff_permille,
		.max_delay_ms = r->max_delay_ms,
		.reset_after_ms = r->reset_after_ms,
		.stop_signal = (int)r->stop_signal,
		.stop_timeout_ms = r->stop_timeout_ms,
		.head_bytes = r->max_output_bytes / 2,
		.tail_bytes = r->max_output_bytes / 2,
		.first_attempt = r->next_attempt ? r->next_attempt : 1,
	};
	k = agentlink_send_service_start(ws->link, &as);
	strv_free(env);
	if (k < 0)
		return k;
	/* the agent knows it by its row's id from now on */
	free(svc->row.agent_id);
	svc->row.agent_id = NULL;
	svc->row.restart_count = 0;
	service_set_state(svc, SERVICE_STARTING, NULL);
	return 0;
}

static void resync_one(struct service *svc, bool known, bool fresh)
{
	if (fresh) {
		if (svc->row.autostart) {
			if (service_send_start(svc) < 0)
				service_set_state(svc, SERVICE_FAILED,
						  "the agent could not be reached");
		} else
			service_set_state(svc, SERVICE_STOPPED, "workspace restarted");
		return;
	}
	if (!known && service_state_is_active(svc->row.state)) {
		if (svc->row.current_attempt > 0)
			record_lost_attempt(svc, "the agent has no record of the service");
		service_set_state(svc, SERVICE_FAILED, "the agent has no record of the service");
		return;
	}
	if (known && svc->watches)
		agent_watch(svc, true);
}

void services_on_hello(void *userdata, char **names, size_t n_names)
{
	struct workspace *ws = userdata;
	bool fresh = ws->agent_fresh;

	ws->agent_fresh = false;
	for (struct service *svc = ws->services; svc; svc = svc->next) {
		bool known = false;

		for (size_t i = 0; i < n_names && !known; i++)
			known = strcmp(names[i], svc->row.name) == 0;
		resync_one(svc, known, fresh);
	}
}

/* The id the agent knows the service by: its row's, or its source's for one carried into a
 * workspace restored from a memory snapshot (until the service is started anew). */
static const char *service_agent_id(const struct service *svc)
{
	return svc->row.agent_id ? svc->row.agent_id : svc->row.id;
}

/* The service a report is about: this workspace's, with the same name and the same definition;
 * NULL (the report is ignored) for anything else. */
static struct service *service_of_report(struct workspace *ws, const char *name, const char *id)
{
	struct service *svc = service_find(ws, name);

	if (svc && strcmp(service_agent_id(svc), id) == 0)
		return svc;
	agent_report_ignored(ws, "service", id);
	return NULL;
}

void services_on_state(void *userdata, uint64_t seq, const struct agentlink_service_state *st)
{
	struct workspace *ws = userdata;
	workspace_touch(ws);
	struct service *svc = service_of_report(ws, st->name, st->id);
	bool live = st->state == SERVICE_STARTING || st->state == SERVICE_RUNNING;

	if (svc) {
		svc->row.state = st->state;
		(void)free_and_strdup(&svc->row.reason, st->reason);
		svc->row.restart_count = st->restart_count;
		svc->row.next_restart_at = st->state == SERVICE_BACKOFF ? st->next_restart_at : 0;
		svc->row.main_pid = live ? (int64_t)st->pid : 0;
		svc->row.current_attempt = live ? st->attempt : 0;
		svc->row.attempt_started_at = live ? st->started_at : 0;
		svc->row.stopping = live && st->stopping;
		if (svc->row.next_attempt <= st->attempt)
			svc->row.next_attempt = st->attempt + 1;
		service_save(svc);
		watches_settle_starting(svc);
	}
	if (ws->link)
		agentlink_send_ack(ws->link, seq);
	if (svc && !service_state_is_active(svc->row.state))
		waiters_fire(svc, true);
}

void services_on_attempt(void *userdata, uint64_t seq, const char *name,
			 const struct service_attempt_row *reported)
{
	struct workspace *ws = userdata;
	struct service *svc = service_of_report(ws, name, reported->service_id);
	/* recorded under the row's id (the agent may know the service by its source's) */
	struct service_attempt_row row = *reported;
	const struct service_attempt_row *a = &row;
	int r = 0;

	if (svc)
		row.service_id = svc->row.id;

	if (svc && service_name_hidden(name))
		contexts_on_kernel_end(ws, name, a);
	if (svc) {
		struct pending_attempt *p = pending_attempt_find(ws, a->service_id, a->number);
		if (p) { /* re-sent after a reconnect: acknowledge this copy once written */
			p->seq = seq;
			p->gen = ws->link_gen;
			(void)services_pending_write(ws);
			return;
		}
		r = store_attempt_insert(ws->m->store, a, SERVICE_KEEP_ATTEMPTS);
		if (r < 0) {
			log_error("cannot record service attempt: kept in memory, retried every "
				  "second",
				  "workspace", ws->row.id, "service", name, "error", strerror(-r),
				  NULL);
			/* not acknowledged until written: the agent sends it again after a restart */
			if (pending_attempt_keep(ws, name, seq, a))
				watches_end(svc, a->number, a);
			return;
		}
		if (r > 0)
			log_info("service attempt recorded", "workspace", ws->row.id, "service",
				 name, "end", attempt_end_to_string(a->end_reason), NULL);
		if (svc->row.next_attempt <= a->number) {
			svc->row.next_attempt = a->number + 1;
			service_save(svc);
		}
		watches_end(svc, a->number, a);
	}
	if (ws->link)
		agentlink_send_ack(ws->link, seq);
}

void services_on_output(void *userdata, const char *name, uint64_t attempt, int stream,
			uint64_t offset, const uint8_t *data, size_t n)
{
	struct service *svc = service_find(userdata, name);

	if (!svc) {
		agent_report_ignored(userdata, "service output", name);
		return;
	}
	for (struct service_watch *w = svc->watches; w; w = w->next)
		if (w->attempt == attempt)
			output_follower_deliver_live(&w->follower, stream, offset, data, n);
}

void services_on_link_ready(struct workspace *ws)
{
	/* an older agent does not count live: its running attempts show no byte counts */
	if (ws->link)
		(void)agentlink_send_progress_watch(ws->link, true);
}

void services_on_progress(void *userdata, const char *name, uint64_t attempt, uint64_t stdout_bytes,
			  uint64_t stderr_bytes)
{
	struct workspace *ws = userdata;
	struct service *svc = service_find(ws, name);
	uint64_t bytes[2] = { stdout_bytes, stderr_bytes };

	if (!svc) {
		agent_report_ignored(ws, "service progress", name);
		return;
	}
	/* an attempt that ended (or is not known yet) is not the running one: its totals come with
	 * its ATTEMPT_DONE */
	if (attempt != svc->row.current_attempt)
		return;
	if (svc->live_attempt != attempt) {
		svc->live_attempt = attempt;
		svc->live_bytes[0] = svc->live_bytes[1] = 0;
	}
	for (int i = 0; i < 2; i++) {
		if (bytes[i] > SERVICE_MAX_LIVE_BYTES)
			bytes[i] = SERVICE_MAX_LIVE_BYTES;
		/* totals only grow: a report that goes back changes nothing */
		if (bytes[i] > svc->live_bytes[i])
			svc->live_bytes[i] = bytes[i];
	}
}

void services_on_error(void *userdata, const char *name, const char *reason)
{
	struct workspace *ws = userdata;

	log_warn("agent refused a service request", "workspace", ws->row.id, "service", name,
		 "reason", reason, NULL);
}

/* ---- JSON ---------------------------------------------------------------------------------- */

static json_t *nullable_str(const char *s)
{
	return s ? json_string(s) : json_null();
}

static json_t *signal_json(int64_t sig)
{
	const char *abbrev = sig > 0 && sig < NSIG ? sigabbrev_np((int)sig) : NULL;
	char buf[32];

	if (!abbrev)
		return json_integer(sig);
	snprintf(buf, sizeof buf, "SIG%s", abbrev);
	return json_string(buf);
}

static json_t *attempt_to_json(const struct service_attempt_row *a, bool with_output)
{
	json_t *o = json_object();
	bool timed = a->started_at && a->ended_at >= a->started_at;

	if (!o)
		return NULL;
	json_object_set_new(o, "number", json_integer((json_int_t)a->number));
	json_object_set_new(o, "state", json_string("ended"));
	json_set_time(o, "startedAt", a->started_at);
	json_set_time(o, "endedAt", a->ended_at);
	json_object_set_new(
		o, "durationMs",
		timed ? json_integer((json_int_t)((a->ended_at - a->started_at) / 1000)) :
			json_null());
	json_object_set_new(o, "exitCode",
			    a->exit_code >= 0 ? json_integer(a->exit_code) : json_null());
	json_object_set_new(o, "signal", a->signal > 0 ? json_integer(a->signal) : json_null());
	json_object_set_new(o, "endReason", json_string(attempt_end_to_string(a->end_reason)));
	json_object_set_new(o, "reason", nullable_str(a->reason));
	json_object_set_new(o, "daemonized", json_boolean(a->daemonized));
	json_object_set_new(o, "outputDropped", json_boolean(a->output_dropped));
	if (with_output) {
		output_to_json(o, a->out);
	} else {
		json_object_set_new(o, "stdoutBytes", json_integer((json_int_t)a->out[0].total));
		json_object_set_new(o, "stderrBytes", json_integer((json_int_t)a->out[1].total));
	}
	return o;
}

/* The running attempt: no end yet, its byte counts as the agent last reported them (null from
 * an agent that does not report them). */
static json_t *running_attempt_to_json(const struct service *svc)
{
	const struct workspace *ws = svc->ws;
	bool mine = svc->live_attempt == svc->row.current_attempt;
	bool known = mine ||
		     (ws->link && agentlink_has_feature(ws->link, AGENT_FEATURE_SERVICE_PROGRESS));
	json_t *o = json_object();

	if (!o)
		return NULL;
	json_object_set_new(o, "number", json_integer((json_int_t)svc->row.current_attempt));
	json_object_set_new(o, "state", json_string("running"));
	json_set_time(o, "startedAt", svc->row.attempt_started_at);
	json_object_set_new(o, "pid",
			    svc->row.main_pid > 0 ? json_integer(svc->row.main_pid) : json_null());
	json_object_set_new(o, "stdoutBytes",
			    known ? json_integer((json_int_t)(mine ? svc->live_bytes[0] : 0)) :
				    json_null());
	json_object_set_new(o, "stderrBytes",
			    known ? json_integer((json_int_t)(mine ? svc->live_bytes[1] : 0)) :
				    json_null());
	return o;
}

static json_t *restart_json(const struct service_row *r)
{
	json_t *o = json_pack("{s:s,s:I,s:I,s:I}", "policy",
			      service_policy_to_string(r->restart_policy), "maxRestarts",
			      (json_int_t)r->max_restarts, "delayMs", (json_int_t)r->delay_ms,
			      "resetAfterMs", (json_int_t)r->reset_after_ms);

	if (o && r->backoff_permille)
		json_object_set_new(o, "backoff",
				    json_pack("{s:f,s:I}", "multiplier",
					      (double)r->backoff_permille / 1000.0, "maxDelayMs",
					      (json_int_t)r->max_delay_ms));
	return o;
}

static void definition_json(json_t *o, const struct service_row *r)
{
	json_object_set_new(o, "id", json_string(r->id));
	json_object_set_new(o, "workspaceId", json_string(r->workspace_id));
	json_object_set_new(o, "name", json_string(r->name));
	json_object_set_new(o, "command", json_string(r->command ? r->command : ""));
	json_object_set_new(o, "cwd", nullable_str(r->cwd));
	json_object_set_new(o, "env", env_json_redacted(r->env_json));
	json_object_set_new(o, "restart", restart_json(r));
	json_object_set_new(o, "stopSignal", signal_json(r->stop_signal));
	json_object_set_new(o, "stopTimeoutMs", json_integer((json_int_t)r->stop_timeout_ms));
	json_object_set_new(o, "autostart", json_boolean(r->autostart));
	json_object_set_new(o, "maxOutputBytes", json_integer((json_int_t)r->max_output_bytes));
}

static void state_json(json_t *o, const struct service_row *r)
{
	json_object_set_new(o, "state", json_string(service_state_to_string(r->state)));
	json_object_set_new(o, "reason", nullable_str(r->reason));
	json_object_set_new(o, "stopping", json_boolean(r->stopping));
	json_object_set_new(o, "restartCount", json_integer((json_int_t)r->restart_count));
	json_set_time(o, "nextRestartAt", r->next_restart_at);
	json_object_set_new(o, "mainPid",
			    r->main_pid > 0 ? json_integer(r->main_pid) : json_null());
	json_object_set_new(o, "currentAttempt",
			    r->current_attempt ? json_integer((json_int_t)r->current_attempt) :
						 json_null());
	json_set_time(o, "currentAttemptStartedAt", r->attempt_started_at);
	json_set_time(o, "createdAt", r->created_at);
	json_set_time(o, "updatedAt", r->updated_at);
}

static int attempt_cmp(const void *a, const void *b)
{
	const struct service_attempt_row *x = *(const struct service_attempt_row *const *)a,
					 *y = *(const struct service_attempt_row *const *)b;
	return x->number < y->number ? -1 : x->number > y->number;
}

/* The recorded attempts and those whose end waits in memory for room in the store (a full
 * disk), oldest first, the newest SERVICE_KEEP_ATTEMPTS: a reader sees an attempt's end at
 * once, written or not. */
static json_t *attempts_json(struct service *svc, struct service_attempt_row *rows, size_t n,
			     bool with_output)
{
	struct workspace *ws = svc->ws;
	size_t n_pending = 0, n_all = 0;
	for (struct pending_attempt *p = ws->pending_attempts; p; p = p->next)
		n_pending += strcmp(p->row.service_id, svc->row.id) == 0;
	_cleanup_free_ const struct service_attempt_row **all =
		calloc(n + n_pending + 1, sizeof *all);
	json_t *a = json_array();
	if (!all || !a) {
		json_decref(a);
		return NULL;
	}
	for (struct pending_attempt *p = ws->pending_attempts; p; p = p->next)
		if (strcmp(p->row.service_id, svc->row.id) == 0)
			all[n_all++] = &p->row;
	for (size_t i = 0; i < n; i++) {
		bool kept = false; /* the same attempt in both: the one in memory */
		for (size_t k = 0; k < n_pending && !kept; k++)
			kept = all[k]->number == rows[i].number;
		if (!kept)
			all[n_all++] = &rows[i];
	}
	qsort(all, n_all, sizeof *all, attempt_cmp);
	size_t first = n_all > SERVICE_KEEP_ATTEMPTS ? n_all - SERVICE_KEEP_ATTEMPTS : 0;
	for (size_t i = first; i < n_all; i++)
		json_array_append_new(a, attempt_to_json(all[i], with_output));
	return a;
}

static json_t *service_to_json(struct service *svc, bool with_output)
{
	struct service_attempt_row *rows = NULL;
	json_t *o = json_object(), *attempts = NULL;
	size_t n = 0;
	int r;

	if (!o)
		return NULL;
	definition_json(o, &svc->row);
	state_json(o, &svc->row);
	r = store_attempt_list(svc->ws->m->store, svc->row.id, with_output, &rows, &n);
	if (r < 0)
		log_error("cannot read service attempts", "service", svc->row.name, "error",
			  strerror(-r), NULL);
	attempts = attempts_json(svc, rows, n, with_output);
	for (size_t i = 0; i < n; i++)
		service_attempt_row_free(&rows[i]);
	free(rows);
	if (!attempts) {
		json_decref(o);
		return NULL;
	}
	/* The running attempt last, until its result is recorded: then the ended one takes its
	 * place (a result recorded before the state that moves past it is not listed twice). */
	size_t k = json_array_size(attempts);
	json_t *newest = k ? json_object_get(json_array_get(attempts, k - 1), "number") : NULL;
	if (svc->row.current_attempt > (newest ? (uint64_t)json_integer_value(newest) : 0))
		json_array_append_new(attempts, running_attempt_to_json(svc));
	json_object_set_new(o, "attempts", attempts);
	return o;
}

/* ---- the API ------------------------------------------------------------------------------- */

static int service_lookup(struct manager *m, const char *ws_id, const char *name,
			  struct service **ret, struct station_error *e)
{
	struct workspace *ws = NULL;
	struct service *svc;
	int r = workspace_lookup(m, ws_id, &ws, e);

	if (r < 0)
		return r;
	svc = service_find(ws, name);
	/* a path names a service by its name or by its id (the SDK's stopService(ws, svc.id)) */
	for (struct service *s = ws->services; !svc && s; s = s->next)
		if (strcmp(s->row.id, name) == 0)
			svc = s;
	if (!svc)
		return station_error_set(e, -ENOENT, NULL,
					 "service \"%s\" not found in workspace \"%s\"", name,
					 ws_id);
	*ret = svc;
	return 0;
}

static int check_agent(struct workspace *ws, struct station_error *e)
{
	int r = workspace_check_ready(ws, e);

	if (r < 0)
		return r;
	if (!ws->link || !ws->link_ready)
		return station_error_set(e, -ENOTCONN, NULL,
					 "the agent of workspace \"%s\" is not connected",
					 ws->row.id);
	return 0;
}

static int reply_service(struct service *svc, json_t **ret, struct station_error *e)
{
	*ret = service_to_json(svc, true);
	return *ret ? 0 : station_error_set(e, -ENOMEM, NULL, "out of memory");
}

static int service_row_new(struct workspace *ws, const struct service_spec *spec,
			   struct service_row *row)
{
	char id[PROTO_MAX_ID + 1];

	random_id("svc-", 22, id, sizeof id);
	*row = (struct service_row){
		.id = strdup(id),
		.workspace_id = strdup(ws->row.id),
		.name = strdup(spec->name),
		.command = strdup(spec->command),
		.cwd = spec->cwd ? strdup(spec->cwd) : NULL,
		.env_json = spec->env ? json_dumps(spec->env, JSON_COMPACT) : NULL,
		.restart_policy = spec->policy,
		.max_restarts = spec->max_restarts,
		.delay_ms = spec->delay_ms,
		.backoff_permille = spec->backoff_permille,
		.max_delay_ms = spec->max_delay_ms,
		.reset_after_ms = spec->reset_after_ms,
		.stop_signal = spec->stop_signal,
		.stop_timeout_ms = spec->stop_timeout_ms,
		.autostart = spec->autostart,
		.max_output_bytes = ws->m->cfg.default_output_bytes,
		.state = SERVICE_STARTING,
		.next_attempt = 1,
		.created_at = realtime_usec(),
	};
	row->updated_at = row->created_at;
	if (!row->id || !row->workspace_id || !row->name || !row->command ||
	    (spec->cwd && !row->cwd) || (spec->env && !row->env_json)) {
		service_row_free(row);
		return -ENOMEM;
	}
	return 0;
}

static int service_create(struct workspace *ws, const struct service_spec *spec,
			  struct service **ret, struct station_error *e)
{
	struct service *svc = calloc(1, sizeof *svc);
	int r;

	if (!svc || service_row_new(ws, spec, &svc->row) < 0) {
		free(svc);
		return station_error_set(e, -ENOMEM, NULL, "out of memory");
	}
	r = store_service_insert(ws->m->store, &svc->row);
	if (r < 0) {
		service_free(svc);
		if (r == -EEXIST)
			return station_error_set(e, -EBUSY, "name",
						 "a service named \"%s\" already exists in "
						 "workspace \"%s\"",
						 spec->name, ws->row.id);
		return station_error_set(e, r, NULL, "cannot record the service: %s", strerror(-r));
	}
	service_link(ws, svc);
	svc->event_state = (int)svc->row.state;
	if (!service_name_hidden(svc->row.name))
		workspace_event(ws, MANAGER_EVENT_SERVICE, "created", svc->row.name,
				service_state_to_string(svc->row.state), NULL);
	*ret = svc;
	return 0;
}

int manager_service_start(struct manager *m, const char *ws_id, const struct service_spec *spec,
			  json_t **ret, struct station_error *e)
{
	struct workspace *ws = NULL;
	struct service *svc = NULL;
	int r = workspace_lookup(m, ws_id, &ws, e);

	if (r >= 0)
		r = workspace_wake_for(ws, "a service start", e);
	if (r >= 0)
		r = check_agent(ws, e);
	if (r < 0)
		return r;
	if (service_find(ws, spec->name))
		return station_error_set(
			e, -EBUSY, "name",
			"a service named \"%s\" already exists in workspace \"%s\"", spec->name,
			ws_id);
	if (!service_name_hidden(spec->name) && services_visible_count(ws) >= MANAGER_MAX_SERVICES)
		return station_error_set(e, -EAGAIN, NULL,
					 "workspace \"%s\" already has %d services (the limit)",
					 ws_id, MANAGER_MAX_SERVICES);
	r = service_create(ws, spec, &svc, e);
	if (r < 0)
		return r;
	r = service_send_start(svc);
	if (r < 0) {
		service_set_state(svc, SERVICE_FAILED, "the agent could not be reached");
		return station_error_set(e, -ENOTCONN, NULL,
					 "the agent of workspace \"%s\" could not be reached: %s",
					 ws_id, strerror(-r));
	}
	log_info("service created", "workspace", ws_id, "service", spec->name, NULL);
	return reply_service(svc, ret, e);
}

int manager_service_list(struct manager *m, const char *ws_id, json_t **ret,
			 struct station_error *e)
{
	struct workspace *ws = NULL;
	json_t *a;
	int r = workspace_lookup(m, ws_id, &ws, e);

	if (r < 0)
		return r;
	a = json_array();
	if (!a)
		return station_error_set(e, -ENOMEM, NULL, "out of memory");
	for (struct service *svc = ws->services; svc; svc = svc->next)
		if (!service_name_hidden(svc->row.name))
			json_array_append_new(a, service_to_json(svc, false));
	*ret = json_pack("{s:o}", "services", a);
	return *ret ? 0 : station_error_set(e, -ENOMEM, NULL, "out of memory");
}

int manager_service_get(struct manager *m, const char *ws_id, const char *name, json_t **ret,
			struct station_error *e)
{
	struct service *svc = NULL;
	int r = service_lookup(m, ws_id, name, &svc, e);

	return r < 0 ? r : reply_service(svc, ret, e);
}

static int send_named(struct service *svc, uint16_t type, struct station_error *e)
{
	int r = check_agent(svc->ws, e);

	if (r < 0)
		return r;
	r = agentlink_send_service(svc->ws->link, type, svc->row.name, -1);
	if (r < 0)
		return station_error_set(e, -ENOTCONN, NULL,
					 "the agent of workspace \"%s\" could not be reached: %s",
					 svc->ws->row.id, strerror(-r));
	return 0;
}

int manager_service_stop(struct manager *m, const char *ws_id, const char *name, json_t **ret,
			 struct station_error *e)
{
	struct service *svc = NULL;
	int r = service_lookup(m, ws_id, name, &svc, e);

	if (r < 0)
		return r;
	if (service_state_is_active(svc->row.state)) {
		r = send_named(svc, MSG_SERVICE_STOP, e);
		if (r < 0)
			return r;
		svc->row.stopping = svc->row.state != SERVICE_BACKOFF;
		log_info("service stop requested", "workspace", ws_id, "service", name, NULL);
	}
	return reply_service(svc, ret, e);
}

int manager_service_wait_rest(struct manager *m, const char *ws_id, const char *name,
			      service_rest_fn fn, void *userdata, struct service_waiter **ret,
			      struct station_error *e)
{
	struct service *svc = NULL;
	struct service_waiter *w;
	int r = service_lookup(m, ws_id, name, &svc, e);

	if (r < 0)
		return r;
	if (!service_state_is_active(svc->row.state))
		return 1;
	w = calloc(1, sizeof *w);
	if (!w)
		return station_error_set(e, -ENOMEM, NULL, "out of memory");
	w->svc = svc;
	w->fn = fn;
	w->userdata = userdata;
	LIST_PREPEND(&svc->waiters, w);
	*ret = w;
	return 0;
}

void manager_service_waiter_cancel(struct service_waiter *w)
{
	if (!w)
		return;
	LIST_REMOVE(&w->svc->waiters, w);
	free(w);
}

uint64_t manager_service_stop_timeout_ms(struct manager *m, const char *ws_id, const char *name)
{
	struct service *svc = NULL;

	if (service_lookup(m, ws_id, name, &svc, NULL) < 0)
		return 0;
	return svc->row.stop_timeout_ms;
}

int manager_service_restart(struct manager *m, const char *ws_id, const char *name, json_t **ret,
			    struct station_error *e)
{
	struct service *svc = NULL;
	int r = service_lookup(m, ws_id, name, &svc, e);

	if (r >= 0)
		r = workspace_wake_for(svc->ws, "a service restart", e);
	if (r < 0)
		return r;
	if (service_state_is_active(svc->row.state)) {
		r = send_named(svc, MSG_SERVICE_RESTART, e);
		if (r < 0)
			return r;
		svc->row.stopping = svc->row.current_attempt > 0;
	} else {
		/* The agent may not know it (a new agent): the whole definition goes again. */
		r = check_agent(svc->ws, e);
		if (r >= 0 && (r = service_send_start(svc)) < 0)
			return station_error_set(e, -ENOTCONN, NULL,
						 "the agent of workspace \"%s\" could not be "
						 "reached: %s",
						 ws_id, strerror(-r));
		if (r < 0)
			return r;
	}
	log_info("service restart requested", "workspace", ws_id, "service", name, NULL);
	return reply_service(svc, ret, e);
}

int manager_service_delete(struct manager *m, const char *ws_id, const char *name,
			   struct station_error *e)
{
	struct service *svc = NULL;
	struct workspace *ws;
	int r = service_lookup(m, ws_id, name, &svc, e);

	if (r < 0)
		return r;
	ws = svc->ws;
	if (ws->link && ws->link_ready)
		r = agentlink_send_service(ws->link, MSG_SERVICE_REMOVE, name, -1);
	else if (service_state_is_active(svc->row.state) && ws->row.state == WORKSPACE_READY)
		r = -ENOTCONN;
	if (r < 0)
		return station_error_set(e, -ENOTCONN, NULL,
					 "the agent of workspace \"%s\" is not connected", ws_id);
	r = store_service_delete(m->store, svc->row.id);
	if (r < 0)
		return station_error_set(e, r, NULL, "cannot forget service \"%s\": %s", name,
					 strerror(-r));
	log_info("service deleted", "workspace", ws_id, "service", name, NULL);
	if (!service_name_hidden(name))
		workspace_event(ws, MANAGER_EVENT_SERVICE, "deleted", name, NULL, NULL);
	watches_end(svc, 0, NULL);
	service_unlink(svc);
	service_free(svc);
	return 0;
}

/* ---- watches ------------------------------------------------------------------------------- */

static int on_replay(struct event_source *s, uint64_t now, void *userdata)
{
	struct service_watch *w = userdata;

	output_follower_finish(&w->follower, w->replay ? w->replay->out : NULL);
	watch_free(w);
	return 0;
}

/* The stored output of attempt `number` (0: the newest finished one; none: nothing), then
 * done(), from a timer. */
static int watch_replay_attempt(struct service *svc, struct service_watch *w, uint64_t number,
				const uint64_t *from, struct station_error *e)
{
	static const struct run_output none[2] = {};
	struct service_attempt_row a = {};
	const struct service_attempt_row *kept = pending_attempt_newest(svc->ws, svc->row.id);
	int r = store_attempt_get(svc->ws->m->store, svc->row.id, number, &a);
	bool found = r >= 0;

	if (kept && number && kept->number != number)
		kept = NULL;
	if (r < 0 && r != -ENOENT && !kept)
		return station_error_set(e, r, NULL, "cannot read the service's output: %s",
					 strerror(-r));
	if (number && !found && !kept)
		return station_error_set(e, -ENOENT, NULL,
					 "attempt %llu of service \"%s\" not found",
					 (unsigned long long)number, svc->row.name);
	if (kept && (!found || kept->number > a.number)) { /* its end waits for room */
		service_attempt_row_free(&a);
		a = (struct service_attempt_row){};
		if (attempt_row_copy(kept, &a) < 0)
			return station_error_set(e, -ENOMEM, NULL, "out of memory");
		found = true;
	}
	r = output_follower_start(&w->follower, from, found ? a.out : none, e);
	if (r < 0) {
		service_attempt_row_free(&a);
		return r;
	}
	if (found) {
		w->replay = malloc(sizeof *w->replay);
		if (!w->replay) {
			service_attempt_row_free(&a);
			return station_error_set(e, -ENOMEM, NULL, "out of memory");
		}
		*w->replay = a;
		w->attempt = a.number;
	}
	r = event_add_timer(w->m->loop, &w->timer, 0, on_replay, w);
	return r < 0 ? station_error_set(e, r, NULL, "cannot read the service's output: %s",
					 strerror(-r)) :
		       0;
}

static int watch_replay(struct service *svc, struct service_watch *w, const uint64_t *from,
			struct station_error *e)
{
	return watch_replay_attempt(svc, w, 0, from, e);
}

/* A live follower of the current attempt (0: of the one the service is starting). */
static void watch_live(struct service *svc, struct service_watch *w, const uint64_t *from)
{
	(void)output_follower_start(&w->follower, from, NULL, NULL);
	w->svc = svc;
	w->attempt = svc->row.current_attempt;
	LIST_APPEND(&svc->watches, w);
	/* every new follower: the agent sends what it keeps again, which the others skip */
	if (w->attempt)
		agent_watch(svc, true);
}

/* The service named and a new watch for it, not yet following anything. */
static int watch_new(struct manager *m, const char *ws_id, const char *name,
		     const struct run_watch_ops *ops, void *userdata, struct service **ret_svc,
		     struct service_watch **ret, struct station_error *e)
{
	struct service_watch *w;
	int r = service_lookup(m, ws_id, name, ret_svc, e);

	if (r < 0)
		return r;
	w = calloc(1, sizeof *w);
	if (!w)
		return station_error_set(e, -ENOMEM, NULL, "out of memory");
	*w = (struct service_watch){ .m = m, .follower = { .ops = ops, .userdata = userdata } };
	*ret = w;
	return 0;
}

/* w follows the current attempt live when asked to and the agent is there, else replays the
 * stored output of attempt `number` (0: the newest finished one). */
static int watch_begin(struct service *svc, struct service_watch *w, bool live, uint64_t number,
		       const uint64_t *from, struct service_watch **ret, struct station_error *e)
{
	if (live && svc->ws->link && svc->ws->link_ready) {
		watch_live(svc, w, from);
	} else {
		int r = watch_replay_attempt(svc, w, number, from, e);

		if (r < 0) {
			watch_free(w);
			return r;
		}
	}
	*ret = w;
	return 0;
}

int manager_service_watch(struct manager *m, const char *ws_id, const char *name, bool follow,
			  const uint64_t *from, const struct run_watch_ops *ops, void *userdata,
			  struct service_watch **ret, struct station_error *e)
{
	struct service *svc = NULL;
	struct service_watch *w = NULL;
	int r = watch_new(m, ws_id, name, ops, userdata, &svc, &w, e);

	if (r < 0)
		return r;
	/* starting: created or restarted, the agent has not reported the attempt yet */
	bool starting = svc->row.state == SERVICE_STARTING && svc->row.current_attempt == 0;

	return watch_begin(svc, w, follow && (svc->row.current_attempt > 0 || starting), 0, from,
			   ret, e);
}

int manager_service_watch_attempt(struct manager *m, const char *ws_id, const char *name,
				  uint64_t attempt, const uint64_t *from,
				  const struct run_watch_ops *ops, void *userdata,
				  struct service_watch **ret, struct station_error *e)
{
	struct service *svc = NULL;
	struct service_watch *w = NULL;
	int r = watch_new(m, ws_id, name, ops, userdata, &svc, &w, e);

	if (r < 0)
		return r;
	return watch_begin(svc, w, attempt == svc->row.current_attempt, attempt, from, ret, e);
}

uint64_t manager_service_watch_number(const struct service_watch *w)
{
	return w ? w->attempt : 0;
}

void manager_service_unwatch(struct service_watch *w)
{
	struct service *svc;

	if (!w)
		return;
	svc = w->svc;
	if (svc) {
		LIST_REMOVE(&svc->watches, w);
		if (!svc->watches)
			agent_watch(svc, false);
	}
	watch_free(w);
}

/* A context's kernel (a hidden service) is not counted: it would keep its workspace awake
 * for ever; its cells are runs, which do. */
size_t services_active_count(const struct workspace *ws)
{
	size_t n = 0;
	for (const struct service *s = ws->services; s; s = s->next)
		n += !service_name_hidden(s->row.name) && service_state_is_active(s->row.state);
	return n;
}

/* ---- carried into a workspace restored from a memory snapshot ----------------------------- */

json_t *services_checkpoint_json(struct workspace *ws)
{
	json_t *a = json_array();

	for (const struct service *svc = ws->services; a && svc; svc = svc->next) {
		const struct service_row *r = &svc->row;
		json_t *env = r->env_json ? json_loads(r->env_json, 0, NULL) : json_null();

		if (service_name_hidden(r->name)) {
			json_decref(env);
			continue; /* a code context's kernel: its context is not carried */
		}
		json_t *o = json_pack(
			"{s:s,s:s,s:s,s:o*,s:o,s:s,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:b,s:I,s:s,s:o,s:I,"
			"s:I,s:I,s:I,s:I,s:I,s:b,s:I}",
			"agentId", service_agent_id(svc), "name", r->name, "command",
			r->command ? r->command : "", "cwd",
			r->cwd ? json_string(r->cwd) : json_null(), "env", env ? env : json_null(),
			"policy", service_policy_to_string(r->restart_policy), "maxRestarts",
			(json_int_t)r->max_restarts, "delayMs", (json_int_t)r->delay_ms,
			"backoffPermille", (json_int_t)r->backoff_permille, "maxDelayMs",
			(json_int_t)r->max_delay_ms, "resetAfterMs", (json_int_t)r->reset_after_ms,
			"stopSignal", (json_int_t)r->stop_signal, "stopTimeoutMs",
			(json_int_t)r->stop_timeout_ms, "autostart", r->autostart, "maxOutputBytes",
			(json_int_t)r->max_output_bytes, "state", service_state_to_string(r->state),
			"reason", r->reason ? json_string(r->reason) : json_null(), "restartCount",
			(json_int_t)r->restart_count, "nextRestartAt",
			(json_int_t)r->next_restart_at, "mainPid", (json_int_t)r->main_pid,
			"currentAttempt", (json_int_t)r->current_attempt, "attemptStartedAt",
			(json_int_t)r->attempt_started_at, "nextAttempt",
			(json_int_t)r->next_attempt, "stopping", r->stopping, "createdAt",
			(json_int_t)r->created_at);
		if (!o || json_array_append_new(a, o) < 0) {
			json_decref(a);
			return NULL;
		}
	}
	return a;
}

/* A string field of at most max bytes, no NUL inside; NULL when absent, not a string or
 * longer (nullable: JSON null is fine and reads as NULL with ok set). */
static const char *carried_str(const json_t *o, const char *key, size_t max, bool nullable,
			       bool *ok)
{
	const json_t *v = json_object_get(o, key);

	if (nullable && json_is_null(v))
		return NULL;
	if (!json_is_string(v) || json_string_length(v) > max ||
	    strlen(json_string_value(v)) != json_string_length(v)) {
		*ok = false;
		return NULL;
	}
	return json_string_value(v);
}

static uint64_t carried_uint(const json_t *o, const char *key, uint64_t max, bool *ok)
{
	const json_t *v = json_object_get(o, key);

	if (!json_is_integer(v) || json_integer_value(v) < 0 ||
	    (uint64_t)json_integer_value(v) > max) {
		*ok = false;
		return 0;
	}
	return (uint64_t)json_integer_value(v);
}

static bool carried_name_valid(const char *s)
{
	size_t n = s ? strlen(s) : 0;

	if (n == 0 || n > 63 || !((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= '0' && s[0] <= '9')))
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '.' ||
		      s[i] == '_' || s[i] == '-'))
			return false;
	return !service_name_hidden(s);
}

static bool carried_env_valid(const json_t *env)
{
	const char *key;
	json_t *val;

	if (json_is_null(env))
		return true;
	if (!json_is_object(env) || json_object_size(env) > 4096)
		return false;
	json_object_foreach((json_t *)env, key, val) {
		static const char word[] =
			"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_0123456789";

		/* [A-Za-z_][A-Za-z0-9_]* */
		if (!json_is_string(val) ||
		    strlen(json_string_value(val)) != json_string_length(val) || !key[0] ||
		    (key[0] >= '0' && key[0] <= '9') || key[strspn(key, word)])
			return false;
	}
	return true;
}

#define CARRIED_MAX_TIME (1ull << 62)

/* One recorded service as a row of ws (a new id; the agent's kept as agent_id); -EBADMSG when
 * anything in it is not what the controller writes. */
static int carried_row(struct workspace *ws, const json_t *o, struct service_row *ret)
{
	bool ok = json_is_object(o);
	const char *agent_id = carried_str(o, "agentId", PROTO_MAX_ID, false, &ok);
	const char *name = carried_str(o, "name", 63, false, &ok);
	const char *command = carried_str(o, "command", 1 << 20, false, &ok);
	const char *cwd = carried_str(o, "cwd", 4096, true, &ok);
	const char *policy = carried_str(o, "policy", 32, false, &ok);
	const char *state = carried_str(o, "state", 32, false, &ok);
	const char *reason = carried_str(o, "reason", 1024, true, &ok);
	const json_t *env = json_object_get(o, "env");
	const json_t *autostart = json_object_get(o, "autostart");
	const json_t *stopping = json_object_get(o, "stopping");
	char id[PROTO_MAX_ID + 1];
	struct service_row r = {};

	if (!ok || !proto_id_valid(agent_id) || !carried_name_valid(name) ||
	    (cwd && cwd[0] != '/') || !carried_env_valid(env) ||
	    service_policy_from_string(policy) < 0 || service_state_from_string(state) < 0 ||
	    !json_is_boolean(autostart) || !json_is_boolean(stopping))
		return -EBADMSG;
	r.restart_policy = (enum service_policy)service_policy_from_string(policy);
	r.state = (enum service_state)service_state_from_string(state);
	r.max_restarts = carried_uint(o, "maxRestarts", UINT32_MAX, &ok);
	r.delay_ms = carried_uint(o, "delayMs", CARRIED_MAX_TIME, &ok);
	r.backoff_permille = carried_uint(o, "backoffPermille", UINT32_MAX, &ok);
	r.max_delay_ms = carried_uint(o, "maxDelayMs", CARRIED_MAX_TIME, &ok);
	r.reset_after_ms = carried_uint(o, "resetAfterMs", CARRIED_MAX_TIME, &ok);
	r.stop_signal = (int64_t)carried_uint(o, "stopSignal", 64, &ok);
	r.stop_timeout_ms = carried_uint(o, "stopTimeoutMs", CARRIED_MAX_TIME, &ok);
	r.max_output_bytes = carried_uint(o, "maxOutputBytes", 1ull << 40, &ok);
	r.restart_count = carried_uint(o, "restartCount", UINT32_MAX, &ok);
	r.next_restart_at = carried_uint(o, "nextRestartAt", CARRIED_MAX_TIME, &ok);
	r.main_pid = (int64_t)carried_uint(o, "mainPid", INT32_MAX, &ok);
	r.current_attempt = carried_uint(o, "currentAttempt", CARRIED_MAX_TIME, &ok);
	r.attempt_started_at = carried_uint(o, "attemptStartedAt", CARRIED_MAX_TIME, &ok);
	r.next_attempt = carried_uint(o, "nextAttempt", CARRIED_MAX_TIME, &ok);
	r.created_at = carried_uint(o, "createdAt", CARRIED_MAX_TIME, &ok);
	if (!ok || r.stop_signal < 1)
		return -EBADMSG;
	r.autostart = json_is_true(autostart);
	r.stopping = json_is_true(stopping);
	random_id("svc-", 22, id, sizeof id);
	r.id = strdup(id);
	r.agent_id = strdup(agent_id);
	r.workspace_id = strdup(ws->row.id);
	r.name = strdup(name);
	r.command = strdup(command);
	r.cwd = cwd ? strdup(cwd) : NULL;
	r.env_json = json_is_object(env) ? json_dumps(env, JSON_COMPACT) : NULL;
	r.reason = reason ? strdup(reason) : NULL;
	r.updated_at = realtime_usec();
	if (!r.id || !r.agent_id || !r.workspace_id || !r.name || !r.command || (cwd && !r.cwd) ||
	    (json_is_object(env) && !r.env_json) || (reason && !r.reason)) {
		service_row_free(&r);
		return -ENOMEM;
	}
	*ret = r;
	return 0;
}

int services_restore(struct workspace *ws, const json_t *rows, struct station_error *e)
{
	size_t i;
	const json_t *o;

	if (!json_is_array(rows) || json_array_size(rows) > MANAGER_MAX_SERVICES)
		return station_error_set(e, -EUCLEAN, "snapshot",
					 "the checkpoint's record of services is not a list of at "
					 "most %d",
					 MANAGER_MAX_SERVICES);
	json_array_foreach(rows, i, o) {
		struct service *svc = calloc(1, sizeof *svc);
		int r = svc ? carried_row(ws, o, &svc->row) : -ENOMEM;

		if (r >= 0) {
			r = store_service_insert(ws->m->store, &svc->row);
			if (r < 0)
				service_row_free(&svc->row);
		}
		if (r < 0) {
			free(svc);
			/* a checkpoint's file that is not what we write: as one that is broken */
			return station_error_set(e, r == -ENOMEM ? r : -EUCLEAN, "snapshot",
						 "the checkpoint's service %zu cannot be carried "
						 "over: %s",
						 i + 1,
						 r == -EBADMSG ? "its record is malformed" :
						 r == -EEXIST  ? "its name is taken twice" :
								 strerror(-r));
		}
		svc->event_state = (int)svc->row.state;
		service_link(ws, svc);
	}
	return 0;
}
