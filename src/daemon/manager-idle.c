/* SPDX-License-Identifier: MIT */
/* Activity and the idle timeout (docs/api.md, "Activity and idle").
 *
 * A workspace is busy while a command runs, a service is active (starting, running or waiting
 * to restart; a code context's kernel is none, its cells are runs) or a terminal has an
 * attacher. Its last activity is the last moment it was busy
 * or the last API call on it (looking at the workspace itself, GET and the list, is none: a
 * dashboard or a monitor keeps nothing awake). A workspace with idleTimeoutMs that has been
 * neither busy nor called for that long is stopped, the way a dead agent stops it: every
 * process killed through the workspace cgroup, the container released (host: the agent
 * killed), state "stopped" with a reason starting "idle:"; HOME stays and restart starts it
 * again. A terminal nobody is attached to does not keep it awake (its shell ends lost). The
 * last activity lives in memory: a controller restart counts from its own start. */

#include <stdio.h>
#include <string.h>

#include "basic/log.h"
#include "event/event.h"
#include "manager-internal.h"

#define IDLE_TICK_USEC 500000ull
#define IDLE_REASON "idle"

void workspace_touch(struct workspace *ws)
{
	ws->last_activity = realtime_usec();
}

bool workspace_busy(const struct workspace *ws)
{
	return ws->n_running > 0 || services_active_count(ws) > 0 ||
	       terminals_attached_count(ws) > 0;
}

static uint64_t idle_timeout_ms(const struct workspace *ws)
{
	json_int_t v = json_integer_value(json_object_get(ws->spec, "idleTimeoutMs"));
	return v > 0 ? (uint64_t)v : 0;
}

/* "idleAction": "pause" (manager-pause.c) instead of a stop. */
static bool idle_pauses(const struct workspace *ws)
{
	const char *action = json_string_value(json_object_get(ws->spec, "idleAction"));
	return action && strcmp(action, "pause") == 0;
}

static const char *reason_is_idle(const struct workspace *ws)
{
	return ws->row.reason && strncmp(ws->row.reason, IDLE_REASON ":",
					 strlen(IDLE_REASON ":")) == 0 ?
		       IDLE_REASON :
		       NULL;
}

static void idle_check(struct workspace *ws, uint64_t now)
{
	uint64_t timeout = idle_timeout_ms(ws);
	if (ws->pool || ws->row.state != WORKSPACE_READY)
		return;
	if (workspace_busy(ws)) {
		ws->last_activity = now;
		return;
	}
	if (!timeout || now < ws->last_activity || now - ws->last_activity < timeout * 1000)
		return;
	if (workspace_op_pending(ws) || ws->snapshots_running)
		return; /* a pause, restart or snapshot under way */
	char reason[192], ms[24];
	snprintf(ms, sizeof ms, "%llu", (unsigned long long)timeout);
	snprintf(reason, sizeof reason,
		 IDLE_REASON ": no command, service or attached terminal and no API call for %s "
			     "ms (idleTimeoutMs)",
		 ms);
	if (idle_pauses(ws)) {
		log_info("workspace idle, pausing it", "workspace", ws->row.id, "idle_timeout_ms",
			 ms, NULL);
		workspace_pause_queue(ws, reason);
		return;
	}
	log_info("workspace idle, stopping it", "workspace", ws->row.id, "idle_timeout_ms", ms,
		 NULL);
	workspace_stop(ws, reason);
}

static int on_idle_tick(struct event_source *s, uint64_t now, void *userdata)
{
	struct manager *m = userdata;
	uint64_t wall = realtime_usec();
	for (struct workspace *ws = m->workspaces, *next; ws; ws = next) {
		next = ws->next;
		idle_check(ws, wall);
	}
	event_source_set_time(s, now + IDLE_TICK_USEC);
	return 0;
}

int manager_idle_init(struct manager *m)
{
	return event_add_timer(m->loop, &m->idle_timer, now_usec() + IDLE_TICK_USEC, on_idle_tick,
			       m);
}

void workspace_activity_json(const struct workspace *ws, json_t *o)
{
	bool busy = ws->row.state == WORKSPACE_READY && workspace_busy(ws);
	json_set_time(o, "lastActivityAt", busy ? realtime_usec() : ws->last_activity);
	json_object_set_new(o, "busy", json_boolean(busy));
	json_object_set_new(o, "idleTimeoutMs", json_integer((json_int_t)idle_timeout_ms(ws)));
	const char *stop = NULL;
	if (ws->row.state == WORKSPACE_STOPPED)
		stop = ws->row.reason && strncmp(ws->row.reason, IDLE_REASON ":",
						 strlen(IDLE_REASON ":")) == 0 ?
			       IDLE_REASON :
			       "lost";
	json_object_set_new(o, "stopReason", stop ? json_string(stop) : json_null());
	const char *pause = NULL;
	if (ws->row.state == WORKSPACE_PAUSED)
		pause = reason_is_idle(ws) ? reason_is_idle(ws) : "requested";
	json_object_set_new(o, "pauseReason", pause ? json_string(pause) : json_null());
	json_object_set_new(o, "idleAction", json_string(idle_pauses(ws) ? "pause" : "stop"));
}
