/* SPDX-License-Identifier: MIT */
/* Workspaces: their state machine, their agents (start, connect, watch, reconcile after a
 * controller restart) and their cgroups. Runs are in manager-run.c. */

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/resource.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "adapter/adapter.h"
#include "agentlink.h"
#include "basic/cleanup.h"
#include "basic/list.h"
#include "basic/log.h"
#include "basic/util.h"
#include "cgroup/cgroup.h"
#include "event/event.h"
#include "event/work.h"
#include "image/image.h"
#include "manager-internal.h"

#define WORKSPACE_CGROUP_DESTROY_MS 5000
#define RECONNECT_DELAY_USEC 200000
#define MAX_RECONNECTS 5
#define AGENT_HELLO_TIMEOUT_MS 10000
#define PRUNE_INTERVAL_USEC (60ull * 1000000)
#define IGNORED_LOG_INTERVAL_USEC (60ull * 1000000)
#define READY_INTERVAL_USEC (10ull * 1000000)
#define WORK_THREADS 8 /* stops, deletes, readiness checks */

int manager_runs_init(struct manager *m);

static const struct agentlink_ops link_ops;
static void op_agent_hello(struct workspace *ws);
static bool op_agent_lost(struct workspace *ws, const char *reason);
static void ops_fail_all(struct workspace *ws);
static void stop_begin(struct workspace *ws, const char *reason);

struct workspace *workspace_find(struct manager *m, const char *id)
{
	for (struct workspace *ws = m->workspaces; ws; ws = ws->next)
		if (strcmp(ws->row.id, id) == 0)
			return ws;
	return NULL;
}

/* Paused counts: its agent answers (what would start a process asks workspace_wake_for()). */
int workspace_check_ready(const struct workspace *ws, struct station_error *e)
{
	if (ws->row.state == WORKSPACE_READY || ws->row.state == WORKSPACE_PAUSED)
		return 0;
	return station_error_set(e, -EBUSY, NULL, "workspace \"%s\" is %s, not ready%s%s",
				 ws->row.id, workspace_state_to_string(ws->row.state),
				 ws->row.reason ? ": " : "", ws->row.reason ? ws->row.reason : "");
}

/* "." and "./" components add nothing but noise to PWD. */
static void path_drop_dots(char *p)
{
	char *w = p;
	for (char *r = p; *r;) {
		if (r[0] == '/' && r[1] == '.' && (r[2] == '/' || r[2] == 0)) {
			r += 2;
			continue;
		}
		*w++ = *r++;
	}
	*w = 0;
	if (!p[0]) { /* it held "/." at least */
		p[0] = '/';
		p[1] = 0;
	}
}

char *workspace_cwd(const struct workspace *ws, const char *cwd)
{
	char *s = NULL;

	if (!cwd)
		return strdup(ws->workdir);
	if (cwd[0] == '/')
		s = strdup(cwd);
	else if (asprintf(&s, "%s/%s", ws->workdir, cwd) < 0)
		s = NULL;
	if (s)
		path_drop_dots(s);
	return s;
}

int env_object_to_strv(json_t *env, char ***ret)
{
	size_t n = env ? json_object_size(env) : 0, i = 0;
	char **v = calloc(n + 1, sizeof *v);
	if (!v)
		return -ENOMEM;
	const char *key;
	json_t *val;
	json_object_foreach(env, key, val) {
		if (asprintf(&v[i], "%s=%s", key, json_string_value(val)) < 0)
			break;
		i++;
	}
	if (i < n) {
		strv_free(v);
		return -ENOMEM;
	}
	*ret = v;
	return 0;
}

void agent_report_ignored(struct workspace *ws, const char *what, const char *id)
{
	uint64_t now = now_usec();
	if (ws->ignored_logged_at && now - ws->ignored_logged_at < IGNORED_LOG_INTERVAL_USEC) {
		ws->ignored_unlogged++;
		return;
	}
	char more[16];
	snprintf(more, sizeof more, "%u", ws->ignored_unlogged);
	log_warn("ignored an agent report about something the workspace does not have", "workspace",
		 ws->row.id, "about", what, "id", id ? id : "", "unlogged_before", more, NULL);
	ws->ignored_logged_at = now;
	ws->ignored_unlogged = 0;
}

static int workspace_lookup_quiet(struct manager *m, const char *id, struct workspace **ret,
				  struct station_error *e)
{
	struct workspace *ws = workspace_find(m, id);
	/* an unclaimed pool member is no client's; another tenant's answers as a missing one */
	if (!ws || ws->pool || !workspace_visible(m, ws))
		return station_error_set(e, -ENOENT, NULL, "workspace \"%s\" not found", id);
	*ret = ws;
	return 0;
}

int workspace_lookup(struct manager *m, const char *id, struct workspace **ret,
		     struct station_error *e)
{
	int r = workspace_lookup_quiet(m, id, ret, e);
	if (r >= 0)
		workspace_touch(*ret);
	return r;
}

int workspace_set_state(struct workspace *ws, enum workspace_state state, const char *reason)
{
	const char *name = workspace_state_to_string(state);
	if (free_and_strdup(&ws->row.reason, reason) < 0)
		return -ENOMEM;
	ws->row.state = state;
	ws->row.updated_at = realtime_usec();
	workspace_event(ws, MANAGER_EVENT_WORKSPACE, "state", ws->row.id, name, reason);
	int r = store_workspace_update(ws->m->store, &ws->row);
	if (r < 0)
		log_error("cannot record workspace state", "workspace", ws->row.id, "state", name,
			  "error", strerror(-r), NULL);
	else
		log_info("workspace state", "workspace", ws->row.id, "state", name, "reason",
			 reason ? reason : "", NULL);
	return r;
}

static void workspace_free(struct workspace *ws)
{
	if (!ws)
		return;
	runs_free_all(ws);
	services_free_all(ws);
	contexts_free_all(ws);
	terminals_free_all(ws);
	files_free_all(ws);
	agentlink_free(ws->link);
	event_source_free(ws->link_timer);
	event_source_free(ws->hello_timer);
	event_source_free(ws->pause_timer);
	ops_fail_all(ws);
	event_source_free(ws->agent_watch);
	if (ws->agent_pidfd >= 0)
		close(ws->agent_pidfd);
	usage_track_free(ws);
	cgroup_free(ws->cgroup);
	workspace_network_free(ws);
	secrets_free_all(ws);
	json_decref(ws->spec);
	for (size_t i = 0; ws->env && ws->env[i]; i++)
		free(ws->env[i]);
	free(ws->env);
	free(ws->dir);
	free(ws->home);
	free(ws->workdir);
	free(ws->socket_path);
	workspace_row_free(&ws->row);
	free(ws);
}

/* The proxy's variables for a workspace whose network reaches the proxy (adapter/proxy.h):
 * the host's own network, a bridge, a restricted one when the operator opened the proxy to
 * those; "none" reaches nothing. */
static char *const *workspace_proxy_env(const struct workspace *ws)
{
	const struct manager_config *c = &ws->m->cfg;
	if (!c->workspace_proxy)
		return NULL;
	bool reaches = ws->adapter == &adapter_host || ws->net_mode == NET_BRIDGE ||
		       (ws->net_mode == NET_RESTRICTED && c->workspace_proxy_restricted);
	return reaches ? c->workspace_proxy->env : NULL;
}

static void adapter_ws(const struct workspace *ws, struct adapter_workspace *ret)
{
	*ret = (struct adapter_workspace){
		.ctx = &ws->m->actx,
		.id = ws->row.id,
		.dir = ws->dir,
		.cgroup = ws->cgroup,
		.env = ws->env,
		.worker_env = workspace_proxy_env(ws),
		.spec = ws->spec,
		.net_attach = ws->net_mode != NET_NONE ? workspace_network_attach : NULL,
		.net_userdata = (void *)ws,
		.nameserver = ws->m->net ? net_nameserver(ws->m->net) : "",
	};
}

static int workspace_paths(struct workspace *ws, const char *root)
{
	struct adapter_workspace aw;
	if (asprintf(&ws->dir, "%s/workspaces/%s", root, ws->row.id) < 0 ||
	    asprintf(&ws->socket_path, "%s/run/agent.sock", ws->dir) < 0)
		return -ENOMEM;
	adapter_ws(ws, &aw);
	return ws->adapter->paths(&aw, &ws->home, &ws->workdir);
}

static int workspace_load_spec(struct workspace *ws)
{
	json_error_t jerr;
	ws->spec = json_loads(ws->row.spec_json ? ws->row.spec_json : "{}", 0, &jerr);
	if (!ws->spec || !json_is_object(ws->spec))
		return -EINVAL;
	json_t *env = json_object_get(ws->spec, "env");
	size_t n = json_is_object(env) ? json_object_size(env) : 0, i = 0;
	ws->env = calloc(n + 1, sizeof *ws->env);
	if (!ws->env)
		return -ENOMEM;
	const char *key;
	json_t *v;
	json_object_foreach(env, key, v) {
		if (!json_is_string(v) ||
		    asprintf(&ws->env[i], "%s=%s", key, json_string_value(v)) < 0)
			return -EINVAL;
		i++;
	}
	return 0;
}

/* A workspace object around a row; takes the row's strings. */
static int workspace_new(struct manager *m, struct workspace_row *row, struct workspace **ret)
{
	struct workspace *ws = calloc(1, sizeof *ws);
	if (!ws)
		return -ENOMEM;
	ws->m = m;
	ws->agent_pidfd = -1;
	ws->last_activity = realtime_usec(); /* not kept across controller restarts */
	ws->row = *row;
	*row = (struct workspace_row){ 0 };
	ws->adapter = adapter_find(ws->row.adapter);
	int r = ws->adapter ? 0 : -EINVAL;
	if (r >= 0)
		r = workspace_load_spec(ws);
	if (r >= 0)
		r = workspace_paths(ws, m->cfg.root);
	if (r >= 0 && ws->row.cgroup)
		r = cgroup_from_string(ws->row.cgroup, &ws->cgroup);
	if (r < 0) {
		workspace_free(ws);
		return r;
	}
	*ret = ws;
	return 0;
}

void workspace_link(struct manager *m, struct workspace *ws)
{
	LIST_PREPEND(&m->workspaces, ws);
	m->n_workspaces++;
}

void workspace_unlink(struct manager *m, struct workspace *ws)
{
	LIST_REMOVE(&m->workspaces, ws);
	m->n_workspaces--;
}

/* --- the agent --- */

static void agent_forget(struct workspace *ws)
{
	agentlink_free(ws->link);
	ws->link = NULL;
	ws->link_ready = false;
	event_source_free(ws->agent_watch);
	ws->agent_watch = NULL;
	if (ws->agent_pidfd >= 0)
		close(ws->agent_pidfd);
	ws->agent_pidfd = -1;
	ws->agent_pid = 0;
}

static void agent_exit_reason(struct workspace *ws, char *buf, size_t n)
{
	siginfo_t si = { 0 };
	if (waitid((idtype_t)P_PIDFD, (id_t)ws->agent_pidfd, &si, WEXITED | WNOHANG) < 0 ||
	    si.si_pid == 0)
		snprintf(buf, n, "the workspace agent exited");
	else if (si.si_code == CLD_EXITED)
		snprintf(buf, n, "the workspace agent exited with status %d", si.si_status);
	else
		snprintf(buf, n, "the workspace agent was killed by signal %d", si.si_status);
}

static void agent_lost(struct workspace *ws, const char *reason)
{
	log_warn("workspace agent gone", "workspace", ws->row.id, "reason", reason, NULL);
	runs_lose_all(ws, reason);
	services_lose_all(ws, reason);
	terminals_lose_all(ws, reason);
	files_lose_all(ws, reason);
	workspace_unpause_for_teardown(ws);
	agent_forget(ws);
	/* Lost runs must not leave processes behind: nothing supervises them any more. The
	 * container (runtime state, mounts) goes too, off the loop; restart makes it anew with
	 * HOME kept. */
	if (ws->cgroup)
		cgroup_kill(ws->cgroup);
	if (op_agent_lost(ws, reason))
		return; /* a create or restart waiting for this agent fails and tears down */
	workspace_set_state(ws, WORKSPACE_STOPPED, reason);
	stop_begin(ws, reason);
	if (ws->pool)
		pool_member_lost(ws);
}

static int on_agent_exit(struct event_source *s, int fd, uint32_t revents, void *userdata)
{
	struct workspace *ws = userdata;
	char reason[128];
	agent_exit_reason(ws, reason, sizeof reason);
	agent_lost(ws, reason);
	return 0;
}

static int agent_watch(struct workspace *ws)
{
	int fd = (int)syscall(SYS_pidfd_open, ws->agent_pid, 0);
	if (fd < 0)
		return negative_errno();
	ws->agent_pidfd = fd;
	return event_add_io(ws->m->loop, &ws->agent_watch, fd, EPOLLIN, on_agent_exit, ws);
}

/* The listener of the agent's socket was made by the controller (uid 0: the adapter listens
 * and hands it over), or by the agent itself (its pid: after a checkpoint, or restored from
 * one); runsc's agent binds its own, whose safety rests on run/. Anything else at run/agent.sock
 * was put there by the sandbox and gets no secret. */
int workspace_agent_peer_check(const struct workspace *ws, int fd)
{
	struct ucred cr = {};
	socklen_t len = sizeof cr;

	if (adapter_agent_binds_socket(&ws->m->actx, ws->adapter))
		return 0;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) < 0)
		return -ENOTCONN;
	if (cr.uid == 0 || (ws->agent_pid > 0 && cr.pid == ws->agent_pid))
		return 0;
	log_warn("agent socket not made by the controller or the agent: refused", "workspace",
		 ws->row.id, NULL);
	return -EPROTO;
}

static int agent_peer_check(int fd, void *userdata)
{
	return workspace_agent_peer_check(userdata, fd);
}

static int agent_connect(struct workspace *ws)
{
	ws->link_ready = false;
	ws->link_gen++;
	return agentlink_connect_checked(ws->m->loop, ws->socket_path, agent_peer_check, ws->secret,
					 SECRET_BYTES, &link_ops, ws, &ws->link);
}

/* As when the agent is lost (agent_lost()), on purpose: every process is killed through the
 * cgroup at once, the container's teardown runs off the loop (stop_begin()). */
int workspace_stop(struct workspace *ws, const char *reason)
{
	runs_lose_all(ws, reason);
	services_lose_all(ws, reason);
	terminals_lose_all(ws, reason);
	files_lose_all(ws, reason);
	workspace_unpause_for_teardown(ws);
	agent_forget(ws);
	int r = ws->cgroup ? cgroup_kill(ws->cgroup) : 0;
	workspace_set_state(ws, WORKSPACE_STOPPED, reason);
	stop_begin(ws, reason);
	return r;
}

/* --- agent link callbacks --- */

static void on_hello(void *userdata, uint64_t agent_pid, char **ids, size_t n_ids)
{
	struct workspace *ws = userdata;
	ws->link_ready = true;
	ws->reconnects = 0;
	for (struct run_state *r = ws->runs, *next; r; r = next) {
		next = r->next;
		/* sent behind this HELLO: the agent had not seen it when it answered */
		if (r->link_gen == ws->link_gen || r->pending)
			continue;
		bool known = false;
		for (size_t i = 0; i < n_ids && !known; i++)
			known = strcmp(ids[i], r->id) == 0;
		if (known)
			continue;
		struct run_row lost = { .id = r->id,
					.status = RUN_LOST,
					.exit_code = -1,
					.reason = (char *)"the agent has no record of the run",
					.ended_at = realtime_usec() };
		run_finish(ws, &lost);
	}
	log_info("agent connected", "workspace", ws->row.id, NULL);
	services_on_link_ready(ws);
	op_agent_hello(ws);
}

static void on_run_started(void *userdata, const char *run_id, uint64_t started_at)
{
	struct run_state *r = run_state_find(userdata, run_id);
	if (r)
		r->started_at = started_at;
	else
		agent_report_ignored(userdata, "run start", run_id);
}

static void on_run_output(void *userdata, const char *run_id, int stream, uint64_t offset,
			  const uint8_t *data, size_t n)
{
	run_on_output(userdata, run_id, stream, offset, data, n);
}

static void on_run_done(void *userdata, uint64_t seq, const struct run_row *result)
{
	struct workspace *ws = userdata;
	int r = run_finish(ws, result); /* keyed by ws: another workspace's run is -ENOENT */
	if (r == -ENOENT)
		agent_report_ignored(ws, "run completion", result->id);
	if (r >= 0 || r == -ENOENT)
		agentlink_send_ack(ws->link, seq);
	else if (r == -EINPROGRESS) /* not written yet: acknowledged once it is */
		run_pending_ack_later(ws, result->id, seq);
}

static void on_run_error(void *userdata, const char *run_id, const char *reason)
{
	struct workspace *ws = userdata;
	if (!run_id || !run_state_find(ws, run_id)) {
		agent_report_ignored(ws, "run error", run_id);
		return;
	}
	log_warn("agent refused a request", "workspace", ws->row.id, "run", run_id, "reason",
		 reason, NULL);
	struct run_row failed = { .id = (char *)run_id,
				  .status = RUN_FAILED_TO_START,
				  .exit_code = -1,
				  .reason = (char *)reason,
				  .ended_at = realtime_usec() };
	run_finish(ws, &failed);
}

static int on_link_timer(struct event_source *s, uint64_t now, void *userdata)
{
	struct workspace *ws = userdata;
	if (ws->link || ws->agent_pidfd < 0)
		return 0;
	int r = agent_connect(ws);
	if (r < 0 && ++ws->reconnects < MAX_RECONNECTS) {
		event_source_set_time(ws->link_timer, now_usec() + RECONNECT_DELAY_USEC);
	} else if (r < 0) {
		kill(ws->agent_pid, SIGKILL); /* unreachable agent: on_agent_exit takes over */
		log_error("agent unreachable, killed", "workspace", ws->row.id, "error",
			  strerror(-r), NULL);
	}
	return 0;
}

static void on_link_closed(void *userdata, int err)
{
	struct workspace *ws = userdata;
	agentlink_free(ws->link);
	ws->link = NULL;
	ws->link_ready = false;
	if (ws->agent_pidfd < 0)
		return;
	if (workspace_checkpoint_link_closed(ws))
		return; /* closed by the agent for a checkpoint: reconnected once it is taken */
	log_warn("agent connection closed", "workspace", ws->row.id, "error",
		 err < 0 ? strerror(-err) : "eof", NULL);
	if (!ws->link_timer &&
	    event_add_timer(ws->m->loop, &ws->link_timer, UINT64_MAX, on_link_timer, ws) < 0)
		return;
	ws->reconnects++;
	metrics_agent_reconnect(ws->m);
	event_source_set_time(ws->link_timer, now_usec() + RECONNECT_DELAY_USEC);
}

static void on_paused(void *userdata, uint64_t request)
{
	workspace_on_paused(userdata, request);
}

static void on_checkpoint_ready(void *userdata, uint64_t request, const char *reason)
{
	workspace_on_checkpoint_ready(userdata, request, reason);
}

void workspace_agent_reconnect(struct workspace *ws)
{
	if (ws->link || ws->agent_pidfd < 0)
		return;
	if (!ws->link_timer &&
	    event_add_timer(ws->m->loop, &ws->link_timer, UINT64_MAX, on_link_timer, ws) < 0)
		return;
	event_source_set_time(ws->link_timer, now_usec());
}

static const struct agentlink_ops link_ops = {
	.hello = on_hello,
	.run_started = on_run_started,
	.run_output = on_run_output,
	.run_done = on_run_done,
	.run_error = on_run_error,
	.closed = on_link_closed,
	.service_hello = services_on_hello,
	.service_state = services_on_state,
	.service_attempt = services_on_attempt,
	.service_output = services_on_output,
	.service_error = services_on_error,
	.service_progress = services_on_progress,
	.terminal_hello = terminals_on_hello,
	.terminal_opened = terminals_on_opened,
	.terminal_output = terminals_on_output,
	.terminal_replay = terminals_on_replay,
	.terminal_exit = terminals_on_exit,
	.cred_request = creds_on_request,
	.usage = usage_on_reply,
	.paused = on_paused,
	.checkpoint_ready = on_checkpoint_ready,
};

/* --- the API --- */

static json_t *spec_to_json(const struct workspace_spec *spec)
{
	json_t *o = json_object();
	json_object_set_new(o, "env", spec->env ? json_deep_copy(spec->env) : json_object());
	json_object_set_new(o, "cpus", json_real(spec->cpus));
	json_object_set_new(o, "memoryMb", json_integer((json_int_t)spec->memory_mb));
	json_object_set_new(o, "pidsLimit", json_integer((json_int_t)spec->pids_limit));
	if (spec->idle_timeout_ms)
		json_object_set_new(o, "idleTimeoutMs",
				    json_integer((json_int_t)spec->idle_timeout_ms));
	if (spec->image)
		json_object_set_new(o, "image", json_string(spec->image));
	if (spec->seccomp_profile)
		json_object_set_new(o, "seccompProfile", json_string(spec->seccomp_profile));
	if (spec->network)
		json_object_set_new(o, "network", json_string(spec->network));
	if (spec->auto_resume) /* manager-pause.c */
		json_object_set_new(o, "autoResume", json_true());
	if (spec->idle_action == IDLE_ACTION_PAUSE) /* manager-idle.c */
		json_object_set_new(o, "idleAction", json_string("pause"));
	if (spec->snapshot) /* the adapter seeds HOME from it (manager-snapshot.c) */
		json_object_set_new(o, "snapshot", json_string(spec->snapshot));
	return o;
}

static bool adapter_allowed(const struct manager *m, const struct adapter_ops *ops)
{
	return ops == &adapter_host ? m->cfg.allow_host : m->cfg.allow_container;
}

static json_t *adapters_json(const struct manager *m)
{
	json_t *a = json_array();
	if (m->cfg.allow_host)
		json_array_append_new(a, json_string("host"));
	if (m->cfg.allow_container)
		json_array_append_new(a, json_string("container"));
	return a;
}

/* The spec as created: limits the request left at 0 get the worker's defaults, so that a
 * workspace never runs without the limits the operator chose, and its JSON shows them. */
struct workspace_spec workspace_spec_effective(const struct manager *m,
					       const struct workspace_spec *spec)
{
	struct workspace_spec eff = *spec;
	if (eff.pids_limit == 0)
		eff.pids_limit = m->cfg.default_pids_limit;
	if (eff.memory_mb == 0)
		eff.memory_mb = m->cfg.default_memory_mb;
	return eff;
}

static const struct adapter_ops *spec_adapter(struct manager *m, const struct workspace_spec *spec,
					      struct station_error *e)
{
	const char *name = spec->adapter ? spec->adapter : m->cfg.default_adapter;
	const struct adapter_ops *ops = adapter_find(name);
	if (!ops) {
		station_error_set(e, -EINVAL, "adapter",
				  "unknown adapter \"%s\" (host or container)", name);
		return NULL;
	}
	if (!adapter_allowed(m, ops)) {
		station_error_set(e, -EINVAL, "adapter",
				  ops == &adapter_host ?
					  "the host adapter is not enabled on this worker: it runs "
					  "commands on the host without isolation (an operator "
					  "enables it with 'station-sandboxd --adapters "
					  "host,container')" :
					  "the container adapter is not enabled on this worker (an "
					  "operator enables it with 'station-sandboxd --adapters "
					  "host,container')");
		return NULL;
	}
	/* a host workspace's image is its snapshot's, set by snapshot_spec_apply(), never asked */
	if (ops == &adapter_host &&
	    ((spec->image && !spec->snapshot) || spec->seccomp_profile || spec->network)) {
		station_error_set(
			e, -EINVAL,
			spec->image	      ? "image" :
			spec->seccomp_profile ? "seccompProfile" :
						"network",
			"image, seccompProfile and network belong to the container adapter");
		return NULL;
	}
	return ops;
}

static int workspace_row_new(struct manager *m, const struct adapter_ops *ops, json_t *spec,
			     const struct workspace_spec *req, struct workspace **ret,
			     struct station_error *e)
{
	const char *tenant = req->tenant;
	/* a pool's claim of the name may have ended since the create was let in */
	int r = workspace_name_free_check(m, tenant, req->name, NULL, e);
	if (r < 0)
		return r;
	char id[128];
	random_id("", 26, id + snprintf(id, sizeof id, "%s-", m->cfg.worker), 64);
	struct workspace_row row = {
		.id = strdup(id),
		.worker = strdup(m->cfg.worker),
		.adapter = strdup(ops->name),
		.state = WORKSPACE_CREATING,
		.spec_json = json_dumps(spec, JSON_COMPACT),
		.created_at = realtime_usec(),
		.tenant = strdup(tenant ? tenant : ""),
	};
	row.updated_at = row.created_at;
	r = row.tenant ? workspace_row_set_labels(&row, req->name, req->labels) : -ENOMEM;
	if (r >= 0)
		r = workspace_new(m, &row, ret);
	workspace_row_free(&row);
	if (r < 0)
		return station_error_set(e, r, NULL, "cannot create a workspace: %s", strerror(-r));
	r = store_workspace_insert(m->store, &(*ret)->row);
	if (r < 0) {
		workspace_free(*ret);
		return station_error_set(e, r, NULL, "cannot record the workspace: %s",
					 strerror(-r));
	}
	workspace_event(*ret, MANAGER_EVENT_WORKSPACE, "created", (*ret)->row.id,
			workspace_state_to_string((*ret)->row.state), NULL);
	return 0;
}

/* A container workspace's host uids and gids: a range of 65536 of its own, so that nothing
 * one workspace's ids own is another's. base = the worker's --userns-base + slot * 65536, the
 * lowest slot no workspace holds; recorded in the spec ("idBase") so it outlives the
 * controller. A workspace from before ranges were per workspace has no idBase: it holds slot 0
 * (the worker's base), which all such workspaces share. */
static int alloc_id_base(struct manager *m, json_t *spec_json, struct station_error *e)
{
	const uint64_t range = 65536, pool = m->cfg.id_base;
	uint64_t max_slots = (UINT32_MAX - range - pool) / range + 1;
	for (uint64_t slot = 0; slot < max_slots; slot++) {
		uint64_t base = pool + slot * range;
		bool used = false;
		for (struct workspace *ws = m->workspaces; ws && !used; ws = ws->next) {
			if (ws->adapter != &adapter_container)
				continue;
			json_int_t b = json_integer_value(json_object_get(ws->spec, "idBase"));
			used = (uint64_t)(b > 0 ? (uint64_t)b : pool) == base;
		}
		if (!used) /* a memory snapshot's processes keep their source's range */
			used = checkpoint_base_reserved(m, base);
		if (!used)
			return json_object_set_new(spec_json, "idBase",
						   json_integer((json_int_t)base));
	}
	return station_error_set(e, -EAGAIN, NULL, "no host uid range left for a new workspace");
}

/* A create that failed for want of open files (the controller's, or the runtime's it passed
 * on) says which limit and that it is one: 429, like the workspace count. */
static int name_nofile_limit(const struct manager *m, int r, struct station_error *e)
{
	if (e->err != -EMFILE && e->err != -ENFILE && !strstr(e->message, strerror(EMFILE)) &&
	    !strstr(e->message, strerror(ENFILE)))
		return r;
	struct rlimit rl = { 0 };
	char cause[sizeof e->message];
	getrlimit(RLIMIT_NOFILE, &rl);
	snprintf(cause, sizeof cause, "%s", e->message);
	return station_error_set(
		e, -EAGAIN, NULL,
		"out of open files with %zu workspaces (the controller's limit, "
		"RLIMIT_NOFILE, is %llu; the system's, fs.file-max, may be the one): %s",
		m->n_workspaces, (unsigned long long)rl.rlim_cur, cause);
}

json_t *workspace_spec_request(struct manager *m, const struct adapter_ops *ops,
			       const struct workspace_spec *spec)
{
	json_t *spec_json = spec_to_json(spec);
	if (spec_json && ops == &adapter_container && m->cfg.home_size_mb > 0)
		json_object_set_new(spec_json, "homeSizeMb",
				    json_integer((json_int_t)m->cfg.home_size_mb));
	return spec_json;
}

int workspace_spec_resolve(struct manager *m, const struct adapter_ops *ops,
			   const struct workspace_spec *spec, json_t **ret, struct station_error *e)
{
	json_t *spec_json = workspace_spec_request(m, ops, spec);
	if (!spec_json)
		return station_error_set(e, -ENOMEM, NULL, "out of memory");
	int r = ops->check(&m->actx, spec_json, e);
	if (r < 0) {
		json_decref(spec_json);
		return r;
	}
	*ret = spec_json;
	return 0;
}

/* --- operations: create, restart, stop and delete, their slow steps on worker threads ---
 *
 * The loop does what is quick and touches loop state (the store, the lists, the network's
 * tables); a job on a worker thread does what may block (the cgroup's teardown, the runtime,
 * the adapter's directories, starting the agent) with plain inputs and plain results. One
 * operation per workspace runs at a time; the others wait on ws->ops in order. */

enum op_kind { OP_CREATE, OP_RESTART, OP_STOP, OP_DELETE, OP_PAUSE, OP_RESUME };

struct workspace_op {
	struct workspace_op *next;
	struct workspace *ws;
	enum op_kind kind;
	bool started;
	bool awaiting_hello;
	workspace_op_fn fn; /* NULL: nobody waits (forgotten, or internal) */
	void *userdata;
	char reason[512]; /* a failed create or restart: why, once torn down */
	char field[64];	  /* and the request field it is about, if any */
	int err;
};

struct ws_job {
	struct manager *m;
	struct workspace *ws; /* loop-only: the job reads only what aw points to */
	struct event_work_pool *pool;
	const struct adapter_ops *ops;
	struct adapter_workspace aw;
	json_t *spec; /* the job's own copy of ws->spec */
	struct cgroup_limits limits;
	bool kill, make_cgroup, stop, remove, start;
	bool check; /* a create: the adapter's checks of the spec first (image, profile) */
	/* a create from a memory snapshot: its processes restored from this checkpoint, with the
	 * secret its agent holds (manager-checkpoint.c) */
	char restore_dir[PATH_MAX];
	uint8_t secret[SECRET_BYTES];
	pid_t pid;
	int r;
	struct station_error e;
	/* the network's links and firewall, made (net_attach, in the middle of the start) and
	 * removed (net_down, after the runtime's delete) on the worker thread */
	struct workspace_network_job net;
	bool net_down;
	int known_r; /* workspace_network_known(), on the loop once made */
	void (*done)(struct ws_job *j);
};

static void op_start_next(struct workspace *ws);

bool workspace_op_pending(const struct workspace *ws)
{
	return ws->ops != NULL;
}

void manager_workspace_op_forget(struct workspace_op *op)
{
	if (op)
		op->fn = NULL;
}

const char *manager_workspace_op_id(const struct workspace_op *op)
{
	return op && op->ws ? op->ws->row.id : NULL;
}

static struct workspace_op *op_new(struct workspace *ws, enum op_kind kind, workspace_op_fn fn,
				   void *userdata)
{
	struct workspace_op *op = calloc(1, sizeof *op);
	if (!op)
		return NULL;
	*op = (struct workspace_op){ .ws = ws, .kind = kind, .fn = fn, .userdata = userdata };
	struct workspace_op **tail = &ws->ops;
	while (*tail)
		tail = &(*tail)->next;
	*tail = op;
	return op;
}

/* The head operation ended: tells its waiter, then starts the next. ws may be freed by the
 * caller afterwards only through ops_fail_all(). */
static void op_end(struct workspace *ws, int r, json_t *result, const struct station_error *e)
{
	struct workspace_op *op = ws->ops;
	if (!op)
		return;
	ws->ops = op->next;
	if (op->fn)
		op->fn(op->userdata, r, result, e);
	json_decref(result);
	free(op);
}

/* The workspace is going away: every operation still queued ends with -ENOENT. */
static void ops_fail_all(struct workspace *ws)
{
	while (ws->ops) {
		struct station_error e = {};
		station_error_set(&e, -ENOENT, NULL, "workspace \"%s\" was deleted", ws->row.id);
		op_end(ws, -ENOENT, NULL, &e);
	}
}

static void job_net_known_on_loop(void *userdata)
{
	struct ws_job *j = userdata;
	j->known_r = workspace_network_known(j->ws);
}

/* On the worker thread, between the runtime's create and start: the kernel's objects here
 * (netlink, nftables), then the loop's short part (the resolver learns the workspace). */
static int job_net_attach(void *userdata, pid_t pid, struct station_error *e)
{
	struct ws_job *j = userdata;
	int r = workspace_network_make(&j->net, j->aw.id, pid, e);
	if (r < 0)
		return r;
	event_work_call_on_loop(j->pool, job_net_known_on_loop, j);
	if (j->known_r < 0) {
		workspace_network_unmake(&j->net, j->aw.id);
		return station_error_set(e, j->known_r, NULL, "out of memory");
	}
	return 0;
}

static void job_run(void *userdata)
{
	struct ws_job *j = userdata;
	int r = 0;
	/* the image's lookup and the profile's load read the disk (which may hang): here, not on
	 * the loop; they resolve the job's copy of the spec, which start_job_done() keeps */
	if (j->check) {
		r = j->ops->check(j->aw.ctx, j->spec, &j->e);
		if (r < 0) {
			j->r = r;
			return;
		}
	}
	if (j->kill && j->aw.cgroup) {
		r = cgroup_destroy(j->aw.cgroup, WORKSPACE_CGROUP_DESTROY_MS);
		if (r < 0 && r != -ENOENT)
			station_error_set(&j->e, r, NULL,
					  "cannot stop the processes of workspace \"%s\" (its "
					  "cgroup): %s",
					  j->aw.id, strerror(-r));
		else
			r = 0;
	}
	if (r >= 0 && j->stop)
		j->ops->stop(&j->aw);
	if (r >= 0 && j->remove)
		r = j->ops->remove(&j->aw, &j->e);
	if (r >= 0 && j->net_down) /* the container is gone: its links and firewall go */
		workspace_network_unmake(&j->net, j->aw.id);
	if (r >= 0 && j->make_cgroup && j->aw.cgroup) {
		r = cgroup_create(j->aw.cgroup);
		if (r >= 0)
			r = cgroup_set_limits(j->aw.cgroup, &j->limits);
		if (r < 0)
			station_error_set(&j->e, r, NULL, "cannot set up the workspace cgroup: %s",
					  strerror(-r));
	}
	if (r >= 0 && j->start)
		r = j->ops->prepare(&j->aw, &j->e);
	if (r >= 0 && j->start && j->restore_dir[0]) {
		j->aw.restore_dir = j->restore_dir;
		j->aw.criu = j->m->cfg.criu;
		r = adapter_checkpoint_secret(j->restore_dir, j->secret, SECRET_BYTES, &j->e);
	}
	if (r >= 0 && j->start)
		r = j->ops->start_agent(&j->aw, j->secret, SECRET_BYTES, &j->pid, &j->e);
	j->r = r;
}

static void job_done(void *userdata, bool cancelled)
{
	struct ws_job *j = userdata;
	if (!cancelled)
		j->done(j);
	json_decref(j->spec);
	workspace_network_job_free(&j->net);
	free(j);
}

static int job_queue(struct workspace *ws, struct event_work_pool *pool, struct ws_job *tmpl,
		     struct station_error *e)
{
	struct ws_job *j = calloc(1, sizeof *j);
	if (!j)
		return station_error_set(e, -ENOMEM, NULL, "out of memory");
	*j = *tmpl;
	j->m = ws->m;
	j->ws = ws;
	j->pool = pool;
	j->ops = ws->adapter;
	adapter_ws(ws, &j->aw);
	j->spec = json_deep_copy(ws->spec);
	j->aw.spec = j->spec;
	if (j->aw.net_attach) {
		j->aw.net_attach = job_net_attach;
		j->aw.net_userdata = j;
	}
	int r = workspace_network_job(ws, &j->net);
	if (r >= 0)
		r = !pool ? -ECANCELED : /* the controller is stopping */
			    j->spec ? event_work_queue(pool, job_run, job_done, j) :
				      -ENOMEM;
	if (r < 0) {
		json_decref(j->spec);
		workspace_network_job_free(&j->net);
		free(j);
		return station_error_set(e, r, NULL, "cannot queue work: %s", strerror(-r));
	}
	return 0;
}

/* --- starting the agent (create, restart) --- */

static void start_failed(struct workspace *ws, int r, const char *reason);

/* The agent before a restart or delete: its exit is ours to collect, not a loss to report. */
static void agent_unwatch(struct workspace *ws)
{
	event_source_free(ws->agent_watch);
	ws->agent_watch = NULL;
}

static void agent_reap_old(struct workspace *ws)
{
	if (ws->agent_pidfd >= 0)
		waitid((idtype_t)P_PIDFD, (id_t)ws->agent_pidfd, &(siginfo_t){ 0 },
		       WEXITED | WNOHANG);
	agent_forget(ws);
}

static int on_hello_timeout(struct event_source *s, uint64_t now, void *userdata)
{
	struct workspace *ws = userdata;
	event_source_free(ws->hello_timer);
	ws->hello_timer = NULL;
	start_failed(ws, -ETIMEDOUT, "cannot reach the new agent: no HELLO in time");
	return 0;
}

static void start_job_done(struct ws_job *j)
{
	struct workspace *ws = j->ws;
	if (j->r < 0) {
		start_failed(ws, j->r, j->e.message[0] ? j->e.message : strerror(-j->r));
		snprintf(ws->ops->field, sizeof ws->ops->field, "%s", j->e.field);
		return;
	}
	char hex[2 * SECRET_BYTES + 1];
	agent_reap_old(ws);
	if (j->check) { /* the spec as the adapter resolved it off the loop */
		json_t *resolved = json_deep_copy(j->spec);
		struct adapter_workspace aw;
		char *home = NULL, *workdir = NULL;
		if (resolved) {
			json_decref(ws->spec);
			ws->spec = resolved;
		}
		adapter_ws(ws, &aw);
		if (!resolved || ws->adapter->paths(&aw, &home, &workdir) < 0) {
			start_failed(ws, -ENOMEM, "out of memory");
			return;
		}
		free(ws->home);
		free(ws->workdir);
		ws->home = home;
		ws->workdir = workdir;
	}
	/* what the adapter recorded in the job's copy of the spec while it started the container */
	static const char *const view_keys[] = { "procView", "lxcfsSerial", "cpuset" };
	for (size_t i = 0; i < ELEMENTSOF(view_keys); i++) {
		json_t *v = json_object_get(j->spec, view_keys[i]);
		if (v)
			json_object_set(ws->spec, view_keys[i], v);
		else
			json_object_del(ws->spec, view_keys[i]);
	}
	workspace_view_persist(ws);
	memcpy(ws->secret, j->secret, SECRET_BYTES);
	ws->agent_pid = j->pid;
	hex_encode(ws->secret, SECRET_BYTES, hex);
	free(ws->row.agent_secret);
	ws->row.agent_secret = strdup(hex);
	ws->row.agent_pid = j->pid;
	int r = agent_watch(ws);
	if (r >= 0)
		r = agent_connect(ws);
	if (r >= 0)
		r = event_add_timer(ws->m->loop, &ws->hello_timer,
				    now_usec() + AGENT_HELLO_TIMEOUT_MS * 1000ull, on_hello_timeout,
				    ws);
	if (r < 0) {
		char why[128];
		snprintf(why, sizeof why, "cannot reach the new agent: %s", strerror(-r));
		start_failed(ws, r, why);
		return;
	}
	ws->ops->awaiting_hello = true;
}

static int start_begin(struct workspace *ws, bool fresh, struct station_error *e)
{
	/* a create's spec is checked and resolved by its job; so is a restart's whose create was
	 * cut short before that (a controller stop) */
	bool resolved = ws->adapter != &adapter_container ||
			json_object_get(ws->spec, "seccompDigest") != NULL;
	struct ws_job j = { .check = fresh || !resolved,
			    .kill = !fresh,
			    .stop = !fresh,
			    .make_cgroup = true,
			    .start = true,
			    .done = start_job_done };
	j.limits = (struct cgroup_limits){
		.cpus = json_number_value(json_object_get(ws->spec, "cpus")),
		.memory_bytes = (uint64_t)json_integer_value(json_object_get(ws->spec, "memoryMb"))
				<< 20,
		.pids = (uint64_t)json_integer_value(json_object_get(ws->spec, "pidsLimit")),
	};
	int r = random_bytes(j.secret, SECRET_BYTES);
	if (r < 0)
		return station_error_set(e, r, NULL, "no randomness: %s", strerror(-r));
	/* a create from a memory snapshot restores its processes; a restart starts afresh */
	const char *checkpoint = json_string_value(json_object_get(ws->spec, "checkpoint"));
	if (fresh && checkpoint) {
		checkpoint_dir_path(ws->m, checkpoint, j.restore_dir, sizeof j.restore_dir);
		/* the services the restored agent supervises: listed before it says HELLO */
		r = checkpoint_services_restore(ws, checkpoint, e);
		if (r < 0)
			return r;
	}
	/* the HELLO that answers this start comes from an agent that runs no service yet, but a
	 * restored one (it runs its source's); read at that HELLO, before the op ends */
	ws->agent_fresh = !j.restore_dir[0];
	r = workspace_view_prepare(
		ws); /* the CPUs placed into ws->spec, before the job copies it */
	if (r < 0)
		return station_error_set(e, r, NULL, "cannot place the workspace's CPUs: %s",
					 strerror(-r));
	return job_queue(ws, ws->m->create_work, &j, e);
}

/* The agent answered: the create or restart waiting for it is done. */
static void op_agent_hello(struct workspace *ws)
{
	struct workspace_op *op = ws->ops;
	if (!op || !op->awaiting_hello)
		return;
	op->awaiting_hello = false;
	event_source_free(ws->hello_timer);
	ws->hello_timer = NULL;
	workspace_set_state(ws, WORKSPACE_READY, NULL);
	if (op->kind == OP_CREATE) {
		log_info("workspace created", "workspace", ws->row.id, NULL);
		metrics_create_ended(ws->m, ws, true);
	}
	op_end(ws, 0, workspace_to_json(ws), NULL);
	op_start_next(ws);
}

static bool op_agent_lost(struct workspace *ws, const char *reason)
{
	struct workspace_op *op = ws->ops;
	if (!op || !op->awaiting_hello)
		return false;
	start_failed(ws, -ECONNRESET, reason);
	return true;
}

static void teardown_job_done(struct ws_job *j);

/* A create or restart failed: everything it made goes (off the loop), then it ends. */
static void start_failed(struct workspace *ws, int r, const char *reason)
{
	struct workspace_op *op = ws->ops;
	op->awaiting_hello = false;
	op->err = r;
	snprintf(op->reason, sizeof op->reason, "%s", reason);
	event_source_free(ws->hello_timer);
	ws->hello_timer = NULL;
	log_error(op->kind == OP_CREATE ? "workspace setup failed" : "workspace restart failed",
		  "workspace", ws->row.id, "error", reason, NULL);
	agentlink_free(ws->link);
	ws->link = NULL;
	ws->link_ready = false;
	agent_unwatch(ws);
	workspace_set_state(ws, WORKSPACE_FAILED, reason);
	if (op->kind == OP_CREATE)
		metrics_create_ended(ws->m, ws, false);
	struct station_error e = {};
	struct ws_job j = { .kill = true,
			    .stop = true,
			    .remove = op->kind == OP_CREATE,
			    .net_down = op->kind == OP_CREATE,
			    .done = teardown_job_done };
	if (job_queue(ws, ws->m->work, &j, &e) < 0)
		teardown_job_done(&(struct ws_job){ .ws = ws, .r = e.err, .e = e });
}

/* A create that failed is forgotten once torn down (its error goes to the client); a restart
 * that failed stays failed with the reason. */
static void teardown_job_done(struct ws_job *j)
{
	struct workspace *ws = j->ws;
	struct manager *m = ws->m;
	struct workspace_op *op = ws->ops;
	struct station_error e = {};
	int err = op->err < 0 ? op->err : -EIO;
	if (op->err == -ETIMEDOUT || strstr(op->reason, "timed out"))
		err = -ETIMEDOUT;
	station_error_set(&e, err == -ETIMEDOUT ? -EHOSTDOWN : err, op->field[0] ? op->field : NULL,
			  "%s", op->reason);
	if (j->r < 0)
		log_error("cannot tear down a failed workspace", "workspace", ws->row.id, "error",
			  j->e.message, NULL);
	agent_reap_old(ws);
	if (op->kind != OP_CREATE || j->r < 0) {
		op_end(ws, e.err, NULL, &e);
		op_start_next(ws);
		return;
	}
	workspace_network_remove(ws);
	store_workspace_delete(m->store, ws->row.id);
	ports_workspace_deleted(m, ws->row.id);
	if (ws->pool)
		m->n_pool_members--;
	workspace_unlink(m, ws);
	e.err = name_nofile_limit(m, e.err, &e); /* counts the others */
	op_end(ws, e.err, NULL, &e);
	workspace_free(ws); /* fails what was queued behind the create */
}

/* --- stop (the agent is gone) and delete --- */

static void stop_job_done(struct ws_job *j)
{
	op_end(j->ws, 0, NULL, NULL);
	op_start_next(j->ws);
}

static void stop_begin(struct workspace *ws, const char *reason)
{
	struct workspace_op *op = op_new(ws, OP_STOP, NULL, NULL);
	if (!op)
		return;
	snprintf(op->reason, sizeof op->reason, "%s", reason);
	if (ws->ops == op)
		op_start_next(ws);
}

static void delete_job_done(struct ws_job *j)
{
	struct workspace *ws = j->ws;
	struct manager *m = ws->m;
	agent_reap_old(ws);
	int r = j->r;
	struct station_error e = j->e;
	if (r >= 0) {
		r = store_workspace_delete(m->store, ws->row.id);
		if (r < 0)
			station_error_set(&e, r, NULL, "cannot forget workspace \"%s\": %s",
					  ws->row.id, strerror(-r));
	}
	if (r < 0) {
		char reason[sizeof e.message + 64];
		snprintf(reason, sizeof reason, "delete failed (DELETE again to retry): %s",
			 e.message);
		workspace_set_state(ws, WORKSPACE_DELETING, reason);
		op_end(ws, r, NULL, &e);
		op_start_next(ws);
		return;
	}
	workspace_network_remove(ws);
	ports_workspace_deleted(m, ws->row.id);
	log_info("workspace deleted", "workspace", ws->row.id, NULL);
	workspace_event(ws, MANAGER_EVENT_WORKSPACE, "deleted", ws->row.id, NULL, NULL);
	if (ws->pool)
		m->n_pool_members--;
	workspace_unlink(m, ws);
	op_end(ws, 0, NULL, NULL);
	workspace_free(ws);
}

static void op_start(struct workspace *ws, struct workspace_op *op)
{
	struct station_error e = {};
	struct ws_job j = { 0 };
	int r = 0;
	op->started = true;
	switch (op->kind) {
	case OP_CREATE:
		r = start_begin(ws, true, &e);
		break;
	case OP_RESTART:
		if (ws->row.state == WORKSPACE_DELETING) {
			r = station_error_set(&e, -EBUSY, NULL, "workspace \"%s\" is deleting",
					      ws->row.id);
			break;
		}
		workspace_unpause_for_teardown(ws);
		runs_lose_all(ws, "workspace restarted");
		services_lose_all(ws, "workspace restarted");
		terminals_lose_all(ws, "workspace restarted");
		files_lose_all(ws, "workspace restarted");
		agentlink_free(ws->link);
		ws->link = NULL;
		ws->link_ready = false;
		agent_unwatch(ws);
		r = start_begin(ws, false, &e);
		break;
	case OP_STOP:
		j = (struct ws_job){ .stop = true, .done = stop_job_done };
		r = job_queue(ws, ws->m->work, &j, &e);
		break;
	case OP_PAUSE:
		r = workspace_pause_begin(ws, op->reason[0] ? op->reason : NULL, &e);
		break;
	case OP_RESUME:
		r = workspace_resume_begin(ws, &e);
		break;
	case OP_DELETE:
		workspace_unpause_for_teardown(ws);
		workspace_set_state(ws, WORKSPACE_DELETING, NULL);
		runs_lose_all(ws, "workspace deleted");
		services_lose_all(ws, "workspace deleted");
		terminals_lose_all(ws, "workspace deleted");
		files_lose_all(ws, "workspace deleted");
		agentlink_free(ws->link);
		ws->link = NULL;
		ws->link_ready = false;
		agent_unwatch(ws);
		/* remove() stops the container itself: one runtime delete per removal */
		j = (struct ws_job){ .kill = true,
				     .remove = true,
				     .net_down = true,
				     .done = delete_job_done };
		r = job_queue(ws, ws->m->work, &j, &e);
		break;
	}
	if (r >= 0)
		return;
	if (op->kind == OP_CREATE || op->kind == OP_RESTART) {
		start_failed(ws, r, e.message);
		return;
	}
	op_end(ws, r, NULL, &e);
	op_start_next(ws);
}

static void op_start_next(struct workspace *ws)
{
	if (ws->ops && !ws->ops->started)
		op_start(ws, ws->ops);
}

void workspace_op_done(struct workspace *ws, int r, json_t *result, const struct station_error *e)
{
	op_end(ws, r, result, e);
	op_start_next(ws);
}

void workspace_pause_queue(struct workspace *ws, const char *reason)
{
	struct workspace_op *op = op_new(ws, OP_PAUSE, NULL, NULL);
	if (!op)
		return;
	snprintf(op->reason, sizeof op->reason, "%s", reason);
	if (ws->ops == op)
		op_start_next(ws);
}

int workspace_make(struct manager *m, const struct workspace_spec *spec, const char *pool_key,
		   struct pool *pool, workspace_op_fn fn, void *userdata,
		   struct workspace_op **ret_op, struct station_error *e)
{
	const struct adapter_ops *ops = spec_adapter(m, spec, e);
	if (!ops)
		return e->err;
	if (!m->base_cgroup)
		return station_error_set(e, m->cgroup_error, NULL, "cgroups are unavailable: %s",
					 strerror(-m->cgroup_error));
	/* an image being removed is not used: its files are going while the create would run */
	const char *removing = ops == &adapter_container ? manager_image_removing(m, spec->image) :
							   NULL;
	if (removing)
		return station_error_set(e, -EBUSY, "image",
					 "image %s is being removed from the store: no workspace "
					 "is created from it (import or pull it again once the "
					 "removal has finished)",
					 removing);
	json_t *spec_json = NULL;
	enum net_mode net_mode = NET_NONE;
	struct net_policy *net_policy = NULL;
	int r = workspace_network_check(m, spec, &net_mode, &net_policy, e);
	/* as asked: the adapter's checks, which read the disk, resolve it in the create's job */
	if (r >= 0 && !(spec_json = workspace_spec_request(m, ops, spec)))
		r = station_error_set(e, -ENOMEM, NULL, "out of memory");
	if (r >= 0 && ops == &adapter_container && spec->snapshot)
		r = checkpoint_spec_apply(m, spec->snapshot, spec_json, e);
	if (r == 0 && ops == &adapter_container)
		r = alloc_id_base(m, spec_json, e);
	struct workspace *ws = NULL;
	if (r >= 0)
		r = workspace_row_new(m, ops, spec_json, spec, &ws, e);
	json_decref(spec_json);
	if (r >= 0 && pool_key) {
		r = store_pool_member_insert(m->store, ws->row.id, pool_key);
		if (r < 0) {
			store_workspace_delete(m->store, ws->row.id);
			workspace_free(ws);
			station_error_set(e, r, NULL, "cannot record the pool member: %s",
					  strerror(-r));
		}
	}
	if (r < 0) {
		net_policy_free(net_policy);
		return r;
	}
	char *cg_str = NULL;
	r = workspace_network_create(ws, net_mode, net_policy, e);
	if (r >= 0 && ((r = cgroup_child(m->base_cgroup, ws->row.id, &ws->cgroup)) < 0 ||
		       (r = cgroup_to_string(ws->cgroup, &cg_str)) < 0))
		station_error_set(e, r, NULL, "cannot set up the workspace cgroup: %s",
				  strerror(-r));
	ws->row.cgroup = cg_str;
	if (r < 0) {
		log_error("workspace setup failed", "workspace", ws->row.id, "error", e->message,
			  NULL);
		workspace_network_remove(ws);
		store_workspace_delete(m->store, ws->row.id);
		workspace_free(ws);
		return name_nofile_limit(m, r, e);
	}
	/* listed (creating) from now on: ids, uid ranges and addresses stay unique while
	 * creates run side by side */
	ws->pool = pool;
	if (pool)
		m->n_pool_members++;
	workspace_link(m, ws);
	struct workspace_op *op = op_new(ws, OP_CREATE, fn, userdata);
	if (ret_op)
		*ret_op = op;
	op_start_next(ws); /* may end op at once (its fn called): the caller is ready for it */
	return 0;
}

static int workspace_count_check(struct manager *m, struct station_error *e)
{
	if (m->n_workspaces - m->n_pool_members >= m->cfg.max_workspaces)
		return station_error_set(e, -EAGAIN, NULL,
					 "this worker already has %zu workspaces "
					 "(the limit)",
					 m->n_workspaces - m->n_pool_members);
	return 0;
}

/* --- a create a warm pool may serve: its spec resolved off the loop, the claim on it ---
 *
 * The caller's handle is an operation of no workspace (op->ws NULL, in no list): forgetting it
 * works as for any create. The claim itself is one step on the loop, so a member is claimed by
 * exactly one create; a create no member serves then goes cold, its op forwarding to the
 * handle. */

struct claim_job {
	struct manager *m;
	struct workspace_op *op;
	struct workspace_spec spec; /* its strings and objects owned below */
	char *adapter, *image, *seccomp, *network, *tenant, *name;
	json_t *env, *egress, *labels;
	json_t *spec_json; /* as asked; resolved by the job */
	int r;
	struct station_error e;
};

static void claim_job_free(struct claim_job *j)
{
	free(j->adapter);
	free(j->image);
	free(j->seccomp);
	free(j->network);
	free(j->tenant);
	free(j->name);
	json_decref(j->env);
	json_decref(j->egress);
	json_decref(j->labels);
	json_decref(j->spec_json);
	free(j);
}

static void claim_job_run(void *userdata)
{
	struct claim_job *j = userdata;
	j->r = adapter_container.check(&j->m->actx, j->spec_json, &j->e);
}

/* The handle ends: its caller hears (unless it forgot), then it is freed. */
static void claim_op_end(struct workspace_op *op, int r, json_t *result,
			 const struct station_error *e)
{
	if (op->fn)
		op->fn(op->userdata, r, result, e);
	free(op);
}

static void claim_forward(void *userdata, int r, json_t *result, const struct station_error *e)
{
	claim_op_end(userdata, r, result, e);
}

struct workspace_op *workspace_op_detached(workspace_op_fn fn, void *userdata)
{
	struct workspace_op *op = calloc(1, sizeof *op);
	if (op)
		*op = (struct workspace_op){ .kind = OP_CREATE, .fn = fn, .userdata = userdata };
	return op;
}

void workspace_op_detached_end(struct workspace_op *op, int r, json_t *result,
			       const struct station_error *e)
{
	claim_op_end(op, r, result, e);
}

static void claim_job_done(void *userdata, bool cancelled)
{
	struct claim_job *j = userdata;
	struct manager *m = j->m;
	struct station_error e = { 0 };
	json_t *ws_json = NULL;
	int r;

	if (cancelled) {
		station_error_set(&e, -ECANCELED, NULL, "the controller is stopping");
		claim_op_end(j->op, -ECANCELED, NULL, &e);
	} else if (j->r >= 0 && pool_claim_resolved(m, &j->spec, j->spec_json, &ws_json) > 0) {
		claim_op_end(j->op, 0, ws_json, &e);
		json_decref(ws_json);
	} else { /* no member for it (or its check failed: the cold create's says why) */
		r = workspace_count_check(m, &e);
		if (r >= 0)
			r = workspace_make(m, &j->spec, NULL, NULL, claim_forward, j->op, NULL, &e);
		if (r < 0)
			claim_op_end(j->op, r, NULL, &e);
	}
	claim_job_free(j);
}

static int dup_or_null(const char *s, char **ret)
{
	*ret = s ? strdup(s) : NULL;
	return s && !*ret ? -ENOMEM : 0;
}

static int claim_begin(struct manager *m, const struct workspace_spec *spec, workspace_op_fn fn,
		       void *userdata, struct workspace_op **ret_op, struct station_error *e)
{
	struct claim_job *j = calloc(1, sizeof *j);
	struct workspace_op *op = calloc(1, sizeof *op);
	int r = j && op ? 0 : -ENOMEM;
	if (r >= 0) {
		*op = (struct workspace_op){ .kind = OP_CREATE, .fn = fn, .userdata = userdata };
		*j = (struct claim_job){ .m = m,
					 .op = op,
					 .spec = *spec,
					 .labels = json_incref(spec->labels) };
		if (dup_or_null(spec->adapter, &j->adapter) < 0 ||
		    dup_or_null(spec->image, &j->image) < 0 ||
		    dup_or_null(spec->seccomp_profile, &j->seccomp) < 0 ||
		    dup_or_null(spec->network, &j->network) < 0 ||
		    dup_or_null(spec->tenant, &j->tenant) < 0 ||
		    dup_or_null(spec->name, &j->name) < 0 ||
		    !(j->spec_json = workspace_spec_request(m, &adapter_container, spec)))
			r = -ENOMEM;
		j->spec = (struct workspace_spec){ .adapter = j->adapter,
						   .env = j->env = json_incref(spec->env),
						   .image = j->image,
						   .seccomp_profile = j->seccomp,
						   .network = j->network,
						   .egress = j->egress = json_incref(spec->egress),
						   .cpus = spec->cpus,
						   .memory_mb = spec->memory_mb,
						   .pids_limit = spec->pids_limit,
						   .idle_timeout_ms = spec->idle_timeout_ms,
						   .tenant = j->tenant,
						   .name = j->name,
						   .labels = j->labels };
	}
	if (r >= 0)
		r = m->create_work ?
			    event_work_queue(m->create_work, claim_job_run, claim_job_done, j) :
			    -ECANCELED;
	if (r < 0) {
		if (j)
			claim_job_free(j);
		free(op);
		return station_error_set(e, r, NULL, "cannot queue the create: %s", strerror(-r));
	}
	if (ret_op)
		*ret_op = op;
	return 1;
}

int manager_workspace_create(struct manager *m, const struct workspace_spec *req,
			     workspace_op_fn fn, void *userdata, struct workspace_op **ret_op,
			     json_t **ret, struct station_error *e)
{
	struct workspace_spec from_snapshot;
	char snapshot_image[SNAPSHOT_IMAGE_REF_MAX];
	if (req->snapshot) { /* its image in place of spec.image */
		int r = snapshot_spec_apply(m, req, &from_snapshot, snapshot_image, e);
		if (r < 0)
			return r;
		req = &from_snapshot;
	}
	if (!spec_adapter(m, req, e))
		return e->err;
	if (!m->base_cgroup)
		return station_error_set(e, m->cgroup_error, NULL, "cgroups are unavailable: %s",
					 strerror(-m->cgroup_error));
	const struct workspace_spec spec = workspace_spec_effective(m, req);
	int r = workspace_count_check(m, e);
	if (r >= 0)
		r = workspace_name_free_check(m, spec.tenant, spec.name, NULL, e);
	if (r < 0)
		return r;
	if (!spec.snapshot && pool_claim_wanted(m, &spec))
		return claim_begin(m, &spec, fn, userdata, ret_op, e);
	r = workspace_make(m, &spec, NULL, NULL, fn, userdata, ret_op, e);
	return r < 0 ? r : 1;
}

int manager_workspace_get(struct manager *m, const char *id, json_t **ret, struct station_error *e)
{
	struct workspace *ws = NULL;
	/* looking at a workspace is no activity: a dashboard or a monitor keeps none awake */
	int r = workspace_lookup_quiet(m, id, &ws, e);
	if (r < 0)
		return r;
	*ret = workspace_to_json(ws);
	return 0;
}

/* Below this much free space on the root's filesystem the store counts as full: SQLite needs
 * room for its journal beside any page it changes. */
#define STORE_MIN_FREE_BYTES (256 * 1024ull)

/* The metadata root's filesystem has room for the store to write; else why, in msg. */
static bool store_has_room(struct manager *m, unsigned long long *ret_avail, char *msg, size_t size)
{
	struct statvfs sv;

	if (statvfs(m->cfg.root, &sv) < 0) {
		snprintf(msg, size, "cannot check the metadata root \"%s\": %s", m->cfg.root,
			 strerror(errno));
		return false;
	}
	*ret_avail = (unsigned long long)sv.f_bavail * sv.f_frsize;
	if (*ret_avail >= STORE_MIN_FREE_BYTES)
		return true;
	snprintf(msg, size, "the metadata root's filesystem is full (%llu bytes free under \"%s\")",
		 *ret_avail, m->cfg.root);
	return false;
}

static int op_request(struct manager *m, const char *id, enum op_kind kind, workspace_op_fn fn,
		      void *userdata, struct workspace_op **ret_op, struct station_error *e)
{
	struct workspace *ws = NULL;
	int r = workspace_lookup(m, id, &ws, e);
	if (r < 0)
		return r;
	if (kind == OP_RESTART && ws->row.state == WORKSPACE_DELETING)
		return station_error_set(e, -EBUSY, NULL, "workspace \"%s\" is %s", id,
					 workspace_state_to_string(ws->row.state));
	if (ws->snapshots_running) /* its trees are being read off the loop */
		return station_error_set(
			e, -EBUSY, NULL,
			"workspace \"%s\" is being snapshotted; try again once the "
			"snapshot is made",
			id);
	struct workspace_op *op = op_new(ws, kind, fn, userdata);
	if (!op)
		return station_error_set(e, -ENOMEM, NULL, "out of memory");
	*ret_op = op;
	op_start_next(ws); /* may end op at once (its fn called): the caller is ready for it */
	return 1;
}

bool manager_store_check(struct manager *m, char *msg, size_t size)
{
	unsigned long long avail = 0;
	size_t pending = m->n_pending;

	if (!store_has_room(m, &avail, msg, size)) {
		size_t n = strlen(msg);
		if (pending)
			snprintf(msg + n, size - n,
				 ": results kept in memory until they are written");
		return false;
	}
	if (pending) {
		snprintf(msg, size, "%zu result%s not yet written to the metadata store", pending,
			 pending == 1 ? "" : "s");
		return false;
	}
	snprintf(msg, size, "metadata store open, %llu bytes free", avail);
	return true;
}

void workspace_delete_begin(struct workspace *ws)
{
	if (op_new(ws, OP_DELETE, NULL, NULL))
		op_start_next(ws);
}

int manager_workspace_delete(struct manager *m, const char *id, workspace_op_fn fn, void *userdata,
			     struct workspace_op **ret_op, struct station_error *e)
{
	/* A delete the store cannot record would leave a half state (the tree and cgroup gone,
	 * the record still there): on a full disk nothing is touched. */
	char msg[PATH_MAX + 128];
	unsigned long long avail = 0;
	struct workspace *ws = workspace_find(m, id);
	if (ws && workspace_visible(m, ws) && !store_has_room(m, &avail, msg, sizeof msg))
		return station_error_set(e, -ENOSPC, NULL,
					 "workspace \"%s\" was not deleted and is unchanged: %s; "
					 "free space and delete it again",
					 id, msg);
	return op_request(m, id, OP_DELETE, fn, userdata, ret_op, e);
}

int manager_workspace_restart(struct manager *m, const char *id, workspace_op_fn fn, void *userdata,
			      struct workspace_op **ret_op, struct station_error *e)
{
	return op_request(m, id, OP_RESTART, fn, userdata, ret_op, e);
}

/* Pause and resume (manager-pause.c): nothing to do is answered at once, as is a state that
 * neither pauses nor resumes; the rest queues like restart. */
static int pause_request(struct manager *m, const char *id, enum op_kind kind, workspace_op_fn fn,
			 void *userdata, struct workspace_op **ret_op, json_t **ret,
			 struct station_error *e)
{
	struct workspace *ws = NULL;
	int r = workspace_lookup(m, id, &ws, e);
	if (r < 0)
		return r;
	if (!workspace_op_pending(ws)) {
		enum workspace_state done = kind == OP_PAUSE ? WORKSPACE_PAUSED : WORKSPACE_READY;
		if (ws->row.state == done) {
			*ret = workspace_to_json(ws);
			return *ret ? 0 : station_error_set(e, -ENOMEM, NULL, "out of memory");
		}
		if (ws->row.state != WORKSPACE_READY && ws->row.state != WORKSPACE_PAUSED)
			return station_error_set(e, -EBUSY, NULL,
						 "workspace \"%s\" is %s: only a ready workspace "
						 "pauses and only a paused one resumes",
						 id, workspace_state_to_string(ws->row.state));
	}
	return op_request(m, id, kind, fn, userdata, ret_op, e);
}

int manager_workspace_pause(struct manager *m, const char *id, workspace_op_fn fn, void *userdata,
			    struct workspace_op **ret_op, json_t **ret, struct station_error *e)
{
	return pause_request(m, id, OP_PAUSE, fn, userdata, ret_op, ret, e);
}

int manager_workspace_resume(struct manager *m, const char *id, workspace_op_fn fn, void *userdata,
			     struct workspace_op **ret_op, json_t **ret, struct station_error *e)
{
	return pause_request(m, id, OP_RESUME, fn, userdata, ret_op, ret, e);
}

/* --- readiness: checked off the loop, answered from the last check --- */

struct ready_waiter {
	struct ready_waiter *prev, *next;
	struct manager *m;
	void (*fn)(void *userdata, json_t *result);
	void *userdata;
};

struct ready_job {
	struct manager *m;
	char *agent_path;
	bool home_limit;
	json_t *checks; /* agent, the container adapter's, homeSize */
	bool agent_ok, container_ok;
};

static void ready_job_run(void *userdata)
{
	struct ready_job *j = userdata;
	char msg[PATH_MAX + 64];
	j->agent_ok = access(j->agent_path, X_OK) == 0;
	snprintf(msg, sizeof msg, "%s \"%s\"",
		 j->agent_ok ? "agent binary" : "agent binary missing:", j->agent_path);
	json_array_append_new(j->checks, json_pack("{s:s,s:b,s:s}", "name", "agent", "ok",
						   j->agent_ok, "message", msg));
	j->container_ok = adapter_container.ready(&j->m->actx, j->checks);
	if (j->home_limit) {
		bool ok = adapter_home_limit_probe(msg, sizeof msg);
		json_array_append_new(j->checks, json_pack("{s:s,s:b,s:s}", "name", "homeSize",
							   "ok", ok, "message", msg));
		j->container_ok &= ok;
	}
}

static void ready_start(struct manager *m);

static void ready_job_done(void *userdata, bool cancelled)
{
	struct ready_job *j = userdata;
	struct manager *m = j->m;
	if (cancelled) {
		json_decref(j->checks);
		free(j->agent_path);
		free(j);
		return;
	}
	json_t *checks = json_array();
	char msg[PATH_MAX + 128];
	bool store_ok = manager_store_check(m, msg, sizeof msg);
	json_array_append_new(checks, json_pack("{s:s,s:b,s:s}", "name", "store", "ok", store_ok,
						"message", msg));
	snprintf(msg, sizeof msg, "%s",
		 m->base_cgroup ? "workspace cgroups available" : strerror(-m->cgroup_error));
	json_array_append_new(checks, json_pack("{s:s,s:b,s:s}", "name", "cgroup", "ok",
						m->base_cgroup != NULL, "message", msg));
	json_array_extend(checks, j->checks);
	bool ready = j->agent_ok && m->base_cgroup;
	if (strcmp(m->cfg.default_adapter, "container") == 0)
		ready &= j->container_ok;
	m->ready_but_store = ready; /* manager_ready() checks the store again at each answer */
	ready &= store_ok;
	/* named, not required: a worker whose network is broken still serves "none", and a
	 * create asking for more fails closed with the same words */
	manager_network_ready(m, checks);
	manager_view_ready(m, checks);
	manager_checkpoint_ready(m, checks);
	json_decref(m->ready);
	m->ready = json_pack("{s:b,s:s,s:o,s:o,s:I}", "ready", ready, "defaultAdapter",
			     m->cfg.default_adapter, "adapters", adapters_json(m), "checks", checks,
			     "checkedAt", (json_int_t)(realtime_usec() / 1000));
	m->ready_running = false;
	json_decref(j->checks);
	free(j->agent_path);
	free(j);
	if (m->ready_again) { /* asked for a check that begins after the request */
		m->ready_again = false;
		ready_start(m);
		return;
	}
	while (m->ready_waiters) {
		struct ready_waiter *w = m->ready_waiters;
		LIST_REMOVE(&m->ready_waiters, w);
		w->fn(w->userdata, m->ready ? json_incref(m->ready) : NULL);
		free(w);
	}
}

static void ready_start(struct manager *m)
{
	if (m->ready_running) {
		m->ready_again = true;
		return;
	}
	struct ready_job *j = calloc(1, sizeof *j);
	if (!j)
		return;
	*j = (struct ready_job){ .m = m,
				 .agent_path = strdup(m->cfg.agent_path),
				 .home_limit = m->cfg.home_size_mb > 0,
				 .checks = json_array() };
	if (!j->agent_path || !j->checks || !m->work ||
	    event_work_queue(m->work, ready_job_run, ready_job_done, j) < 0) {
		json_decref(j->checks);
		free(j->agent_path);
		free(j);
		return;
	}
	m->ready_running = true;
}

void manager_ready_kick(struct manager *m)
{
	ready_start(m);
}

static int on_ready_timer(struct event_source *s, uint64_t now, void *userdata)
{
	struct manager *m = userdata;
	ready_start(m);
	event_source_set_time(s, now + READY_INTERVAL_USEC);
	return 0;
}

/* The last check's answer with the store checked now (a statvfs: a disk that fills or frees
 * between two checks shows at once) and lxcfs's state as it is now. */
static json_t *ready_with_store(struct manager *m)
{
	json_t *o = json_deep_copy(m->ready), *check;
	char msg[PATH_MAX + 128];
	size_t i;
	if (!o)
		return NULL;
	bool store_ok = manager_store_check(m, msg, sizeof msg);
	json_t *view = json_array(); /* lxcfs's state, kept in memory: as cheap */
	manager_view_ready(m, view);
	json_t *lx = json_array_get(view, 0);
	json_array_foreach(json_object_get(o, "checks"), i, check) {
		const char *name = json_string_value(json_object_get(check, "name")) ?: "";
		if (strcmp(name, "store") == 0) {
			json_object_set_new(check, "ok", json_boolean(store_ok));
			json_object_set_new(check, "message", json_string(msg));
		} else if (lx && strcmp(name, "lxcfs") == 0)
			json_array_set(json_object_get(o, "checks"), i, lx);
	}
	json_decref(view);
	json_object_set_new(o, "ready", json_boolean(m->ready_but_store && store_ok));
	return o;
}

json_t *manager_ready(struct manager *m, bool refresh, void (*fn)(void *userdata, json_t *result),
		      void *userdata, struct ready_waiter **ret_waiter)
{
	if (m->ready && !refresh)
		return ready_with_store(m);
	struct ready_waiter *w = calloc(1, sizeof *w);
	if (!w)
		return NULL;
	*w = (struct ready_waiter){ .m = m, .fn = fn, .userdata = userdata };
	if (refresh && m->ready_running)
		m->ready_again = true; /* the check under way may have begun before the request */
	else
		ready_start(m);
	if (!m->ready_running) { /* could not start one */
		free(w);
		return m->ready ? json_incref(m->ready) : NULL;
	}
	LIST_PREPEND(&m->ready_waiters, w);
	*ret_waiter = w;
	return NULL;
}

void manager_ready_forget(struct ready_waiter *w)
{
	if (!w)
		return;
	LIST_REMOVE(&w->m->ready_waiters, w);
	free(w);
}

json_t *manager_worker(struct manager *m)
{
	enum cgroup_version v = m->base_cgroup ? m->base_cgroup->version : 0;
	json_t *o = json_pack("{s:s,s:s,s:o,s:s,s:s?,s:s,s:I}", "name", m->cfg.worker, "version",
			      STATION_VERSION, "adapters", adapters_json(m), "defaultAdapter",
			      m->cfg.default_adapter, "runtime", adapter_runtime_name(&m->actx),
			      "cgroup",
			      v == CGROUP_V2 ? "v2" :
			      v == CGROUP_V1 ? "v1" :
					       "unavailable",
			      "workspaces", (json_int_t)(m->n_workspaces - m->n_pool_members));
	json_t *limits = json_pack("{s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I}", "maxWorkspaces",
				   (json_int_t)m->cfg.max_workspaces, "maxRunningPerWorkspace",
				   (json_int_t)m->cfg.max_running_per_workspace, "defaultTimeoutMs",
				   (json_int_t)m->cfg.default_timeout_ms, "maxTimeoutMs",
				   (json_int_t)m->cfg.max_timeout_ms, "defaultOutputBytes",
				   (json_int_t)m->cfg.default_output_bytes, "maxOutputBytes",
				   (json_int_t)m->cfg.max_output_bytes, "defaultPidsLimit",
				   (json_int_t)m->cfg.default_pids_limit, "defaultMemoryMb",
				   (json_int_t)m->cfg.default_memory_mb, "homeSizeMb",
				   (json_int_t)m->cfg.home_size_mb);
	json_object_set_new(o, "limits", limits);
	json_object_set_new(o, "capacity", manager_capacity_json(m));
	/* null: a container create that names no image is refused (the dashboard says so). */
	json_object_set_new(o, "defaultImage",
			    m->cfg.default_image ? json_string(m->cfg.default_image) : json_null());
	json_object_set_new(o, "networks", manager_network_worker_json(m));
	json_object_set_new(o, "pools", manager_pools_json(m));
	manager_tenant_worker_json(m, o);
	if (m->cfg.allow_host)
		json_object_set_new(o, "hostUser",
				    m->cfg.host_user_set ?
					    json_pack("{s:I,s:I}", "uid",
						      (json_int_t)m->cfg.host_uid, "gid",
						      (json_int_t)m->cfg.host_gid) :
					    json_pack("{s:i,s:i}", "uid", 0, "gid", 0));
	return o;
}

/* --- start and stop --- */

static int on_prune(struct event_source *s, uint64_t now, void *userdata)
{
	struct manager *m = userdata;
	uint64_t cutoff = realtime_usec() - MIN(realtime_usec(), m->cfg.retention_usec);
	int r = store_run_prune(m->store, cutoff, m->cfg.retention_runs);
	if (r > 0) {
		char count[24];
		snprintf(count, sizeof count, "%d", r);
		log_info("pruned finished runs", "count", count, NULL);
	}
	manager_idempotency_purge(m);
	event_source_set_time(s, now + PRUNE_INTERVAL_USEC);
	return 0;
}

int manager_new(struct event_loop *loop, struct store *store, const struct manager_config *cfg,
		struct manager **ret)
{
	struct manager *m = calloc(1, sizeof *m);
	if (!m)
		return -ENOMEM;
	m->loop = loop;
	m->store = store;
	m->cfg = *cfg;
	if (cfg->secret_key) {
		memcpy(m->secret_key, cfg->secret_key, sizeof m->secret_key);
		m->secret_key_set = true;
	}
	m->cfg.secret_key = NULL;
	m->cgroup_error = cgroup_open_base("station-sandbox", &m->base_cgroup);
	if (m->cgroup_error < 0)
		log_error("cgroups unavailable", "error", strerror(-m->cgroup_error), NULL);
	manager_adapters_init(m);
	manager_view_init(m);
	manager_network_init(m);
	long cores = sysconf(_SC_NPROCESSORS_ONLN);
	unsigned creates = cfg->create_concurrency ? cfg->create_concurrency :
						     (unsigned)(cores > 0 ? cores * 2 : 2);
	int r = manager_events_init(m);
	if (r >= 0)
		r = manager_metrics_init(m);
	if (r >= 0)
		r = manager_tokens_init(m);
	if (r >= 0)
		r = manager_audit_init(m);
	if (r >= 0)
		r = manager_ports_init(m);
	if (r >= 0)
		r = manager_runs_init(m);
	if (r >= 0)
		r = manager_idle_init(m);
	if (r >= 0)
		r = manager_usage_history_init(m);
	if (r >= 0)
		r = event_add_timer(loop, &m->prune_timer, now_usec(), on_prune, m);
	if (r >= 0)
		r = event_work_pool_new(loop, creates, &m->create_work);
	if (r >= 0)
		r = event_work_pool_new(loop, WORK_THREADS, &m->work);
	if (r >= 0)
		manager_checkpoint_init(m);
	if (r >= 0)
		r = event_add_timer(loop, &m->ready_timer, now_usec(), on_ready_timer, m);
	if (r < 0) {
		manager_free(m);
		return r;
	}
	*ret = m;
	return 0;
}

/* A stored workspace after a controller restart: adopt its agent when it still runs. */
void workspace_adopt(struct workspace *ws)
{
	char **ids = NULL;
	size_t n = 0;
	if (store_run_list_running(ws->m->store, ws->row.id, &ids, &n) >= 0) {
		for (size_t i = 0; i < n; i++) {
			run_state_add(ws, ids[i], NULL);
			free(ids[i]);
		}
		free(ids);
	}
	if (ws->row.state == WORKSPACE_CREATING) {
		/* its create was cut short: nothing of it is trusted; a DELETE removes the rest */
		workspace_set_state(ws, WORKSPACE_FAILED,
				    "the controller stopped while the workspace was being created");
		if (ws->cgroup)
			cgroup_kill(ws->cgroup);
	}
	/* paused: the freezer held without us; it stays paused, its agent reconnected */
	if (ws->row.state != WORKSPACE_READY && ws->row.state != WORKSPACE_PAUSED) {
		runs_lose_all(ws, "the workspace was not ready when the controller started");
		terminals_lose_all(ws, "the workspace was not ready when the controller started");
		return;
	}
	ws->agent_pid = (pid_t)ws->row.agent_pid;
	int r = ws->row.agent_secret && ws->agent_pid > 0 ?
			hex_decode(ws->row.agent_secret, ws->secret, SECRET_BYTES) :
			-ENOENT;
	if (r >= 0)
		r = agent_watch(ws);
	if (r >= 0)
		r = agent_connect(ws);
	if (r < 0) {
		agent_forget(ws);
		agent_lost(ws, "the workspace agent was not running when the controller started");
	}
}

int manager_start(struct manager *m)
{
	struct workspace_row *rows = NULL;
	struct pool_member_row *members = NULL;
	size_t n = 0, n_members = 0;
	int r = store_pool_member_list(m->store, &members, &n_members);
	if (r >= 0)
		r = store_workspace_list(m->store, &rows, &n);
	if (r < 0) {
		for (size_t i = 0; i < n_members; i++)
			pool_member_row_free(&members[i]);
		free(members);
		return r;
	}
	for (size_t i = 0; i < n; i++) {
		struct workspace *ws;
		r = workspace_new(m, &rows[i], &ws);
		workspace_row_free(&rows[i]);
		if (r < 0) {
			log_error("cannot load a workspace", "error", strerror(-r), NULL);
			continue;
		}
		workspace_link(m, ws);
		pool_adopt(m, ws, members, n_members);
		services_load(ws);
		terminals_load(ws);
		workspace_adopt(ws);
	}
	free(rows);
	for (size_t i = 0; i < n_members; i++)
		pool_member_row_free(&members[i]);
	free(members);
	secrets_load(m);
	contexts_load(m);
	manager_network_start(m);
	manager_image_store_clean(m);
	manager_snapshots_recover(m);
	return 0;
}

void manager_free(struct manager *m)
{
	if (!m)
		return;
	manager_fleet_stop(m); /* its threads apply what they learn to the tokens */
	/* running jobs end (a create's agent keeps running, adopted at the next start) */
	struct event_work_pool *creates = TAKE_PTR(m->create_work), *work = TAKE_PTR(m->work);
	event_work_pool_free(creates);
	event_work_pool_free(work);
	event_work_pool_free(TAKE_PTR(m->export_work)); /* the HTTP server closed its pipes */
	event_source_free(m->ready_timer);
	while (m->ready_waiters)
		manager_ready_forget(m->ready_waiters);
	json_decref(m->ready);
	manager_view_free(m);
	while (m->workspaces) {
		struct workspace *ws = m->workspaces;
		workspace_unlink(m, ws);
		workspace_free(ws);
	}
	while (m->fire_queue)
		manager_run_waiter_cancel(m->fire_queue);
	usage_waiters_free(m);
	manager_usage_history_free(m);
	event_source_free(m->fire_timer);
	event_source_free(m->pending_timer);
	event_source_free(m->prune_timer);
	manager_idempotency_free(m);
	event_source_free(m->idle_timer);
	manager_pools_free(m);
	manager_image_jobs_free(m);
	manager_checkpoint_free(m);
	manager_network_free(m);
	manager_events_free(m);
	manager_metrics_free(m);
	manager_audit_free(m);
	manager_ports_free(m);
	manager_tokens_free(m);
	cgroup_free(m->base_cgroup);
	adapter_runtime_close(&m->actx);
	image_store_close(m->actx.images);
	free((char *)m->actx.host_ca_bundle); /* manager-image.c made it */
	explicit_bzero(m->secret_key, sizeof m->secret_key);
	free(m);
}
