/* SPDX-License-Identifier: MIT */
/* Resource use of a workspace (docs/api.md, "Resource use"): the workspace cgroup, read here,
 * and each running run and service attempt from its own cgroup, which only the agent knows,
 * asked with USAGE_REQUEST. A request waits for the matching USAGE_REPLY without blocking the
 * loop, bounded by USAGE_AGENT_TIMEOUT_MS. The reply is the agent's word: only runs and
 * attempts this workspace has running are taken from it, each once. */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agentlink.h"
#include "basic/list.h"
#include "cgroup/cgroup.h"
#include "event/event.h"
#include "manager-internal.h"

struct usage_waiter {
	struct usage_waiter *prev, *next; /* in manager->usage_waiters */
	struct manager *m;
	char ws_id[PROTO_MAX_ID + 1];
	uint64_t request;
	usage_fn fn;
	void *userdata;
	struct event_source *timer;
};

static void waiter_free(struct usage_waiter *w)
{
	LIST_REMOVE(&w->m->usage_waiters, w);
	event_source_free(w->timer);
	free(w);
}

void manager_usage_cancel(struct usage_waiter *w)
{
	if (w)
		waiter_free(w);
}

void usage_waiters_free(struct manager *m)
{
	while (m->usage_waiters)
		waiter_free(m->usage_waiters);
}

/* Calls the waiter's fn once and frees it. */
static void waiter_fire(struct usage_waiter *w, json_t *usage, const struct station_error *e)
{
	usage_fn fn = w->fn;
	void *userdata = w->userdata;

	waiter_free(w);
	fn(userdata, usage, e);
}

static int on_timeout(struct event_source *s, uint64_t now, void *userdata)
{
	struct usage_waiter *w = userdata;
	struct station_error e = {};
	struct workspace *ws;

	/* gone or restarted meanwhile: say so rather than blame the agent */
	if (workspace_lookup(w->m, w->ws_id, &ws, &e) >= 0 && workspace_check_ready(ws, &e) >= 0)
		station_error_set(
			&e, -ENOTCONN, NULL,
			"the agent of workspace \"%s\" did not report its resource use within "
			"%u ms",
			w->ws_id, USAGE_AGENT_TIMEOUT_MS);
	waiter_fire(w, NULL, &e);
	return 0;
}

static json_t *u64_json(uint64_t v)
{
	return json_integer(v > (uint64_t)INT64_MAX ? INT64_MAX : (json_int_t)v);
}

/* The workspace's own numbers: its cgroup now and its limits. */
static json_t *workspace_usage_json(const struct workspace *ws)
{
	struct cgroup_usage u = { 0 };
	double cpus = json_number_value(json_object_get(ws->spec, "cpus"));
	json_int_t mb = json_integer_value(json_object_get(ws->spec, "memoryMb"));
	json_t *o = json_object();

	if (!o)
		return NULL;
	if (ws->cgroup)
		(void)cgroup_get_usage(ws->cgroup, &u); /* a group already gone reads as 0 */
	json_object_set_new(o, "cpuMs", u64_json(u.cpu_usec / 1000));
	json_object_set_new(o, "memoryBytes", u64_json(u.memory_bytes));
	json_object_set_new(o, "memoryLimitBytes",
			    mb > 0 ? u64_json((uint64_t)mb * 1024 * 1024) : json_null());
	json_object_set_new(o, "cpus", cpus > 0 ? json_real(cpus) : json_null());
	return o;
}

/* An entry already taken from this reply (a hostile agent may repeat one). */
static bool entry_seen(const struct agentlink_usage *v, size_t i)
{
	for (size_t j = 0; j < i; j++) {
		if (v[i].run_id && v[j].run_id && strcmp(v[i].run_id, v[j].run_id) == 0)
			return true;
		if (v[i].service && v[j].service && strcmp(v[i].service, v[j].service) == 0)
			return true;
	}
	return false;
}

static json_t *entry_json(const struct agentlink_usage *u)
{
	json_t *o = json_object();

	if (!o)
		return NULL;
	if (u->run_id) {
		json_object_set_new(o, "id", json_string(u->run_id));
	} else {
		json_object_set_new(o, "name", json_string(u->service));
		json_object_set_new(o, "attempt", u64_json(u->attempt));
	}
	json_object_set_new(o, "cpuMs", u64_json(u->cpu_usec / 1000));
	json_object_set_new(o, "memoryBytes", u64_json(u->memory_bytes));
	return o;
}

static json_t *usage_json(struct workspace *ws, const struct agentlink_usage *v, size_t n)
{
	json_t *o = workspace_usage_json(ws);
	json_t *commands = json_array(), *services = json_array();

	for (size_t i = 0; o && commands && services && i < n; i++) {
		if (entry_seen(v, i))
			continue;
		if (v[i].run_id && run_state_find(ws, v[i].run_id))
			json_array_append_new(commands, entry_json(&v[i]));
		else if (v[i].service && service_attempt_is_current(ws, v[i].service, v[i].attempt))
			json_array_append_new(services, entry_json(&v[i]));
	}
	if (!o || !commands || !services) {
		json_decref(o);
		json_decref(commands);
		json_decref(services);
		return NULL;
	}
	json_object_set_new(o, "commands", commands);
	json_object_set_new(o, "services", services);
	json_set_time(o, "sampledAt", realtime_usec());
	return o;
}

void usage_on_reply(void *userdata, uint64_t request, const struct agentlink_usage *v, size_t n)
{
	struct workspace *ws = userdata;
	struct usage_waiter *w;
	struct station_error e = {};
	json_t *usage;

	for (w = ws->m->usage_waiters; w; w = w->next)
		if (w->request == request && strcmp(w->ws_id, ws->row.id) == 0)
			break;
	if (!w) {
		agent_report_ignored(ws, "resource use", NULL);
		return;
	}
	usage = usage_json(ws, v, n);
	if (!usage)
		station_error_set(&e, -ENOMEM, NULL, "out of memory");
	waiter_fire(w, usage, usage ? NULL : &e);
}

int manager_usage_get(struct manager *m, const char *ws_id, usage_fn fn, void *userdata,
		      struct usage_waiter **ret, struct station_error *e)
{
	struct workspace *ws;
	struct usage_waiter *w;
	int r;

	r = workspace_lookup(m, ws_id, &ws, e);
	if (r >= 0)
		r = workspace_check_ready(ws, e);
	if (r < 0)
		return r;
	if (!ws->link || !ws->link_ready)
		return station_error_set(e, -ENOTCONN, NULL,
					 "the agent of workspace \"%s\" is not connected", ws_id);
	if (!agentlink_has_feature(ws->link, AGENT_FEATURE_USAGE))
		return station_error_set(e, -ENOTCONN, NULL,
					 "the agent of workspace \"%s\" predates resource reports; "
					 "restart the workspace to use them",
					 ws_id);
	w = calloc(1, sizeof *w);
	if (!w)
		return station_error_set(e, -ENOMEM, NULL, "out of memory");
	*w = (struct usage_waiter){ .m = m,
				    .request = ++m->usage_requests,
				    .fn = fn,
				    .userdata = userdata };
	snprintf(w->ws_id, sizeof w->ws_id, "%s", ws->row.id);
	r = event_add_timer(m->loop, &w->timer, now_usec() + USAGE_AGENT_TIMEOUT_MS * 1000ull,
			    on_timeout, w);
	if (r >= 0)
		r = agentlink_send_usage_request(ws->link, w->request);
	if (r < 0) {
		event_source_free(w->timer);
		free(w);
		return station_error_set(e, r == -ENOMEM ? r : -ENOTCONN, NULL,
					 "cannot ask the agent of workspace \"%s\": %s", ws_id,
					 strerror(-r));
	}
	LIST_PREPEND(&m->usage_waiters, w);
	*ret = w;
	return 0;
}
