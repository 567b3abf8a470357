/* SPDX-License-Identifier: MIT */
/* Pause and resume (docs/api.md, "Pause and resume").
 *
 * Paused, every process of a workspace but its agent is frozen by the cgroup freezer, and the
 * agent (told PAUSE) holds its clocks: run deadlines and service restart delays. The agent
 * keeps answering: status, file reads, usage. Where the agent lives decides what is frozen:
 * a container's agent is PID 1 in W/c, the group delegated to container root, and makes its
 * command groups below it; a host agent is in W/agent and its command groups are W's other
 * children. Neither freezer can keep a parent frozen and spare a child, so the root is frozen
 * whole for a moment (the agent too), anything in W/c beside the agent (container root owns
 * W/c's cgroup.procs: a sandbox process can move itself there) is moved into a frozen group
 * the controller owns, each command group is frozen on its own account, and the root is
 * thawed: only the agent goes on (cgroup_freeze_below()).
 *
 * Order matters. PAUSE goes to the agent first, and the freeze waits for its PAUSED: the agent
 * acts on requests in order, so every command asked for before the pause has been forked into
 * its group by then and is frozen with the rest; none starts after (workspace_wake_for()
 * refuses them from the moment the pause is asked). Resume thaws first, then tells the agent.
 *
 * The state "paused" and pausedAt are recorded: the freezer holds without the controller, so
 * after a controller restart the workspace is adopted paused (neither thawed nor counted
 * ready) and its agent, still paused, is reconnected. */

#include <errno.h>
#include <string.h>

#include "adapter/adapter.h"
#include "agentlink.h"
#include "basic/log.h"
#include "cgroup/cgroup.h"
#include "event/event.h"
#include "manager-internal.h"
#include "proto/agent-proto.h"

/* The controller's group beside the agent's command groups that strays are moved into. */
#define PAUSE_HOLD_GROUP "station-hold"
#define PAUSE_FREEZE_TIMEOUT_MS 2000
/* How long PAUSED may take; past it the freeze goes ahead (the agent is stuck or gone). */
#define PAUSE_AGENT_TIMEOUT_USEC 2000000ull

bool workspace_is_paused(const struct workspace *ws)
{
	return ws->row.state == WORKSPACE_PAUSED;
}

/* The group the agent's commands run below (*ret; *ret_owned when made for the call), and
 * what in it must keep running. */
static int command_root(struct workspace *ws, const struct cgroup **ret, struct cgroup **ret_owned,
			struct cgroup_freeze_spec *spec, struct station_error *e)
{
	const char *runtime = adapter_runtime_name(&ws->m->actx);
	bool container = ws->adapter == &adapter_container;

	if (!ws->cgroup)
		return station_error_set(e, -EOPNOTSUPP, NULL,
					 "workspace \"%s\" has no cgroup (the controller runs "
					 "without cgroups): it cannot be paused",
					 ws->row.id);
	if (container && runtime && strcmp(runtime, "runsc") == 0)
		return station_error_set(e, -EOPNOTSUPP, NULL,
					 "workspace \"%s\" runs under runsc, whose sandbox the "
					 "freezer cannot pause without its agent",
					 ws->row.id);
	*spec = (struct cgroup_freeze_spec){
		.keep = container ? NULL : "agent",
		.keep_pid = container ? ws->agent_pid : 0,
		.hold = PAUSE_HOLD_GROUP,
		.timeout_ms = PAUSE_FREEZE_TIMEOUT_MS,
	};
	*ret_owned = NULL;
	*ret = ws->cgroup;
	if (!container)
		return 0;
	int r = cgroup_child(ws->cgroup, "c", ret_owned);
	if (r < 0)
		return station_error_set(e, r, NULL, "workspace \"%s\": %s", ws->row.id,
					 strerror(-r));
	*ret = *ret_owned;
	return 0;
}

int workspace_freeze(struct workspace *ws, struct station_error *e)
{
	struct cgroup_freeze_spec spec;
	struct cgroup_freeze_stats st = {};
	const struct cgroup *root;
	struct cgroup *owned = NULL;
	int r = command_root(ws, &root, &owned, &spec, e);

	if (r < 0)
		return r;
	if (spec.keep_pid == 0 && !spec.keep) {
		cgroup_free(owned);
		return station_error_set(e, -ENOTCONN, NULL,
					 "the agent of workspace \"%s\" is not running",
					 ws->row.id);
	}
	r = cgroup_freeze_below(root, &spec, &st);
	if (r < 0) {
		(void)cgroup_thaw_below(root, &spec);
		cgroup_free(owned);
		return station_error_set(e, r, NULL,
					 "cannot freeze the processes of workspace \"%s\": %s%s",
					 ws->row.id, strerror(-r),
					 r == -ETIMEDOUT ? " (a process did not stop in time; "
							   "everything was thawed again)" :
							   "");
	}
	cgroup_free(owned);
	if (st.moved > 0)
		log_warn("processes beside the agent were frozen apart", "workspace", ws->row.id,
			 NULL);
	return 0;
}

int workspace_thaw(struct workspace *ws, struct station_error *e)
{
	struct cgroup_freeze_spec spec;
	const struct cgroup *root;
	struct cgroup *owned = NULL;
	int r = command_root(ws, &root, &owned, &spec, e);

	if (r < 0)
		return r;
	r = cgroup_thaw_below(root, &spec);
	cgroup_free(owned);
	if (r < 0 && r != -ENOENT)
		return station_error_set(e, r, NULL, "cannot thaw workspace \"%s\": %s", ws->row.id,
					 strerror(-r));
	return 0;
}

static bool agent_pausable(const struct workspace *ws)
{
	return ws->link && ws->link_ready && agentlink_has_feature(ws->link, AGENT_FEATURE_PAUSE);
}

/* ---- the agent's hold: PAUSE, then PAUSED awaited --------------------------------------- */

static void held(struct workspace *ws)
{
	workspace_held_fn fn = ws->held_fn;

	event_source_free(ws->pause_timer);
	ws->pause_timer = NULL;
	ws->held_fn = NULL;
	if (fn)
		fn(ws, ws->held_data);
}

void workspace_on_paused(struct workspace *ws, uint64_t request)
{
	if (ws->held_fn && request == ws->pause_request)
		held(ws);
}

static int on_pause_timeout(struct event_source *s, uint64_t now, void *userdata)
{
	struct workspace *ws = userdata;

	log_warn("the agent did not answer PAUSE in time; freezing anyway", "workspace", ws->row.id,
		 NULL);
	held(ws);
	return 0;
}

int workspace_hold_agent(struct workspace *ws, workspace_held_fn fn, void *userdata,
			 struct station_error *e)
{
	int r;

	if (!agent_pausable(ws)) /* an agent that predates PAUSE: its clocks run on */
		return 0;
	if (ws->held_fn)
		return station_error_set(e, -EBUSY, NULL,
					 "workspace \"%s\" is already being held for a freeze",
					 ws->row.id);
	r = agentlink_send_pause(ws->link, ++ws->pause_request);
	if (r >= 0)
		r = event_add_timer(ws->m->loop, &ws->pause_timer,
				    now_usec() + PAUSE_AGENT_TIMEOUT_USEC, on_pause_timeout, ws);
	if (r < 0)
		return station_error_set(e, r, NULL,
					 "cannot ask the agent of workspace \"%s\" to "
					 "pause: %s",
					 ws->row.id, strerror(-r));
	ws->held_fn = fn;
	ws->held_data = userdata;
	return 1;
}

void workspace_release_agent(struct workspace *ws)
{
	if (agent_pausable(ws))
		(void)agentlink_send_resume(ws->link);
}

/* ---- pause ------------------------------------------------------------------------------- */

static void pause_finish(struct workspace *ws)
{
	struct station_error e = {};
	int r;

	ws->pausing = false;
	r = workspace_freeze(ws, &e);
	if (r < 0) {
		workspace_release_agent(ws);
		log_warn("cannot pause workspace", "workspace", ws->row.id, "error", e.message,
			 NULL);
		workspace_op_done(ws, r, NULL, &e);
		return;
	}
	ws->row.paused_at = realtime_usec();
	workspace_set_state(ws, WORKSPACE_PAUSED, ws->pause_reason[0] ? ws->pause_reason : NULL);
	workspace_op_done(ws, 0, workspace_to_json(ws), NULL);
}

static void pause_held(struct workspace *ws, void *userdata)
{
	pause_finish(ws);
}

int workspace_pause_begin(struct workspace *ws, const char *reason, struct station_error *e)
{
	int r;

	if (workspace_is_paused(ws)) {
		workspace_op_done(ws, 0, workspace_to_json(ws), NULL);
		return 0;
	}
	r = workspace_check_ready(ws, e);
	if (r < 0)
		return r;
	snprintf(ws->pause_reason, sizeof ws->pause_reason, "%s", reason ? reason : "");
	ws->pausing = true;
	r = workspace_hold_agent(ws, pause_held, NULL, e);
	if (r < 0)
		ws->pausing = false;
	else if (r == 0)
		pause_finish(ws);
	return r < 0 ? r : 0;
}

/* ---- resume ------------------------------------------------------------------------------ */

static int resume_now(struct workspace *ws, struct station_error *e)
{
	int r = workspace_thaw(ws, e);

	if (r < 0)
		return r;
	workspace_release_agent(ws);
	ws->row.paused_at = 0;
	workspace_touch(ws); /* the idle clock starts over */
	workspace_set_state(ws, WORKSPACE_READY, NULL);
	log_info("workspace resumed", "workspace", ws->row.id, NULL);
	return 0;
}

int workspace_resume_begin(struct workspace *ws, struct station_error *e)
{
	int r;

	if (ws->row.state == WORKSPACE_READY) {
		workspace_op_done(ws, 0, workspace_to_json(ws), NULL);
		return 0;
	}
	if (!workspace_is_paused(ws))
		return workspace_check_ready(ws, e);
	r = resume_now(ws, e);
	if (r < 0)
		return r;
	workspace_op_done(ws, 0, workspace_to_json(ws), NULL);
	return 0;
}

void workspace_unpause_for_teardown(struct workspace *ws)
{
	struct station_error e = {};

	if (ws->pausing) {
		ws->pausing = false;
		event_source_free(ws->pause_timer);
		ws->pause_timer = NULL;
		ws->held_fn = NULL;
	}
	if (!workspace_is_paused(ws))
		return;
	/* a v1 group frozen alone stays frozen under a thawed parent: a kill would wait forever */
	if (workspace_thaw(ws, &e) < 0)
		log_warn("cannot thaw workspace", "workspace", ws->row.id, "error", e.message,
			 NULL);
	ws->row.paused_at = 0;
}

bool workspace_auto_resume(const struct workspace *ws)
{
	return json_is_true(json_object_get(ws->spec, "autoResume"));
}

int workspace_wake_for(struct workspace *ws, const char *what, struct station_error *e)
{
	if (ws->snapshot_reading) /* started now, it would run unfrozen beside the read */
		return station_error_set(e, -EBUSY, NULL,
					 "workspace \"%s\" is frozen while a snapshot reads its "
					 "files: %s would run beside the read, and what it writes "
					 "might or might not be in the snapshot; try again once "
					 "\"snapshotting\" is false (it is answered then)",
					 ws->row.id, what);
	if (ws->pausing)
		return station_error_set(e, STATION_EPAUSED, NULL,
					 "workspace \"%s\" is being paused: %s waits for its "
					 "resume",
					 ws->row.id, what);
	if (!workspace_is_paused(ws))
		return workspace_check_ready(ws, e);
	if (!workspace_auto_resume(ws))
		return station_error_set(e, STATION_EPAUSED, NULL,
					 "workspace \"%s\" is paused: resume it before %s (POST "
					 "/v1/workspaces/%s/resume), or create it with "
					 "\"autoResume\": true",
					 ws->row.id, what, ws->row.id);
	if (workspace_op_pending(ws))
		return station_error_set(e, -EBUSY, NULL,
					 "workspace \"%s\" is paused and busy with another "
					 "operation; try again",
					 ws->row.id);
	if (ws->snapshots_running) /* its trees are being read: thawed, they would change */
		return station_error_set(e, -EBUSY, NULL,
					 "workspace \"%s\" is paused and being snapshotted: %s "
					 "waits until the snapshot is made; try again then",
					 ws->row.id, what);
	log_info("workspace resumed for a request", "workspace", ws->row.id, "what", what, NULL);
	return resume_now(ws, e);
}
