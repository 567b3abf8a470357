/* SPDX-License-Identifier: MIT */
/* The tools of station-sandbox mcp: their table (names, schemas, annotations), the argument
 * readers, and the workspace, service, file and port tools. Runs are in mcp-run.c. */

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "mcp.h"

#define FILE_READ_DEFAULT 65536
#define FILE_READ_MAX (1024 * 1024)
#define FILE_WRITE_MAX (2 * 1024 * 1024)

/* ---- Arguments --------------------------------------------------------------------------- */

int mcp_fail(struct mcp_call *call, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(call->error, sizeof(call->error), fmt, ap);
	va_end(ap);
	return -1;
}

int mcp_fail_client(struct mcp_call *call, const char *what)
{
	const char *m = station_client_last_error(call->s->client);

	return mcp_fail(call, "%s failed: %s", what, m && *m ? m : "no answer from the controller");
}

int mcp_args_check(struct mcp_call *call, const char *const *known)
{
	const char *key;
	json_t *v;

	json_object_foreach(call->args, key, v) {
		bool found = false;

		for (size_t i = 0; known[i] && !found; i++)
			found = strcmp(known[i], key) == 0;
		if (!found)
			return mcp_fail(call, "unknown argument '%.64s'", key);
	}
	return 0;
}

int mcp_arg_string(struct mcp_call *call, const char *key, bool required, const char **ret)
{
	json_t *v = json_object_get(call->args, key);

	if (!v || json_is_null(v)) {
		if (required)
			return mcp_fail(call, "argument '%s' is required", key);
		return 0;
	}
	if (!json_is_string(v))
		return mcp_fail(call, "argument '%s' must be a string", key);
	if (strlen(json_string_value(v)) != json_string_length(v))
		return mcp_fail(call, "argument '%s' must not contain NUL", key);
	*ret = json_string_value(v);
	return 0;
}

int mcp_arg_u64(struct mcp_call *call, const char *key, uint64_t min, uint64_t max, uint64_t *ret)
{
	json_t *v = json_object_get(call->args, key);
	json_int_t n;

	if (!v || json_is_null(v))
		return 0;
	if (json_is_real(v) && json_real_value(v) == floor(json_real_value(v)) &&
	    json_real_value(v) >= 0 && json_real_value(v) <= 9007199254740992.0)
		n = (json_int_t)json_real_value(v);
	else if (json_is_integer(v))
		n = json_integer_value(v);
	else
		return mcp_fail(call, "argument '%s' must be an integer", key);
	if (n < 0 || (uint64_t)n < min || (uint64_t)n > max)
		return mcp_fail(call,
				"argument '%s' must be from %" PRIu64 " to %" PRIu64 ", not %lld",
				key, min, max, (long long)n);
	*ret = (uint64_t)n;
	return 0;
}

int mcp_arg_double(struct mcp_call *call, const char *key, double min, double max, double *ret)
{
	json_t *v = json_object_get(call->args, key);

	if (!v || json_is_null(v))
		return 0;
	if (!json_is_number(v))
		return mcp_fail(call, "argument '%s' must be a number", key);
	if (!(json_number_value(v) >= min && json_number_value(v) <= max))
		return mcp_fail(call, "argument '%s' must be from %g to %g", key, min, max);
	*ret = json_number_value(v);
	return 0;
}

int mcp_arg_bool(struct mcp_call *call, const char *key, bool *ret)
{
	json_t *v = json_object_get(call->args, key);

	if (!v || json_is_null(v))
		return 0;
	if (!json_is_boolean(v))
		return mcp_fail(call, "argument '%s' must be true or false", key);
	*ret = json_is_true(v);
	return 0;
}

void mcp_env_free(char **env)
{
	for (size_t i = 0; env && env[i]; i++)
		free(env[i]);
	free(env);
}

int mcp_arg_env(struct mcp_call *call, const char *key, char ***ret)
{
	json_t *v = json_object_get(call->args, key), *val;
	const char *name;
	char **env;
	size_t n = 0;

	if (!v || json_is_null(v))
		return 0;
	if (!json_is_object(v))
		return mcp_fail(call, "argument '%s' must be an object of strings", key);
	if (json_object_size(v) > 256)
		return mcp_fail(call, "argument '%s' has more than 256 entries", key);
	env = calloc(json_object_size(v) + 1, sizeof(char *));
	if (!env)
		return mcp_fail(call, "out of memory");
	json_object_foreach(v, name, val) {
		if (!json_is_string(val) || !*name || strchr(name, '=') ||
		    strlen(json_string_value(val)) != json_string_length(val)) {
			mcp_env_free(env);
			return mcp_fail(call, "argument '%s': '%.64s' must be a string without NUL",
					key, name);
		}
		if (asprintf(&env[n], "%s=%s", name, json_string_value(val)) < 0) {
			env[n] = NULL;
			mcp_env_free(env);
			return mcp_fail(call, "out of memory");
		}
		n++;
	}
	*ret = env;
	return 0;
}

static bool id_valid(const char *id)
{
	size_t n = strlen(id);

	if (n == 0 || n > 128 || id[0] == '.')
		return false;
	/* '.': a workspace's name may have one (docs/api.md, "Names and labels") */
	return strspn(id, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-") == n;
}

static bool adapter_allowed(const struct mcp_limits *l, const char *adapter)
{
	if (adapter && strcmp(adapter, "host") == 0)
		return l->allow_host;
	if (adapter && strcmp(adapter, "container") == 0)
		return l->allow_container;
	return false;
}

int mcp_arg_workspace(struct mcp_call *call, const char **ret_id)
{
	_cleanup_json_ json_t *ws = NULL;
	const char *id = NULL, *adapter;
	int r;

	if (mcp_arg_string(call, "workspaceId", true, &id) < 0)
		return -1;
	if (!id_valid(id))
		return mcp_fail(call,
				"workspace '%.140s' not found (ids and names are [A-Za-z0-9_.-])",
				id);
	r = station_workspace_get(call->s->client, id, &ws);
	if (r == -ENOENT)
		return mcp_fail(call, "workspace '%s' not found", id);
	if (r < 0)
		return mcp_fail_client(call, "workspace_get");
	adapter = json_string_value(json_object_get(ws, "adapter"));
	if (!adapter_allowed(&call->s->limits, adapter))
		return mcp_fail(call,
				"workspace '%s' uses the %s adapter, which this server does not "
				"offer",
				id, adapter ? adapter : "unknown");
	*ret_id = id;
	return 0;
}

/* A name as the API allows it for services. */
static int arg_name(struct mcp_call *call, const char **ret)
{
	const char *name = NULL;

	if (mcp_arg_string(call, "name", true, &name) < 0)
		return -1;
	if (strlen(name) > 63 || !id_valid(name))
		return mcp_fail(call, "argument 'name' must match [a-z0-9][a-z0-9._-]{0,62}");
	*ret = name;
	return 0;
}

/* ---- Workspaces -------------------------------------------------------------------------- */

static bool network_allowed(const struct mcp_limits *l, const char *network)
{
	for (size_t i = 0; l->networks && l->networks[i]; i++)
		if (strcmp(l->networks[i], network) == 0)
			return true;
	return false;
}

static int create_args(struct mcp_call *call, struct station_workspace_options *o, char ***env)
{
	static const char *const known[] = { "adapter",	 "image",     "env",	 "cpus",
					     "memoryMb", "pidsLimit", "network", "worker",
					     "snapshot", NULL };
	const struct mcp_limits *l = &call->s->limits;

	o->adapter = l->allow_container ? "container" : "host";
	o->image = l->image;
	o->cpus = l->cpus;
	o->memory_mb = l->memory_mb;
	o->pids_limit = l->pids_limit;
	if (mcp_args_check(call, known) < 0 ||
	    mcp_arg_string(call, "adapter", false, &o->adapter) ||
	    mcp_arg_string(call, "image", false, &o->image) < 0 ||
	    mcp_arg_string(call, "network", false, &o->network) < 0 ||
	    mcp_arg_string(call, "worker", false, &o->worker) < 0 ||
	    mcp_arg_string(call, "snapshot", false, &o->snapshot) < 0 ||
	    mcp_arg_double(call, "cpus", 0.01, l->max_cpus ? l->max_cpus : 1024, &o->cpus) < 0 ||
	    mcp_arg_u64(call, "memoryMb", 1, l->max_memory_mb ? l->max_memory_mb : 1048576,
			&o->memory_mb) < 0 ||
	    mcp_arg_u64(call, "pidsLimit", 1, l->max_pids_limit ? l->max_pids_limit : 4194304,
			&o->pids_limit) < 0 ||
	    mcp_arg_env(call, "env", env) < 0)
		return -1;
	/* A snapshot is of one adapter (a host one holds HOME only): unless named, it decides. */
	if (o->snapshot && !json_object_get(call->args, "adapter")) {
		struct station_client *c = call->s->client;
		json_t *snap = NULL;
		if (o->worker && station_client_n_workers(c) > 0)
			c = station_client_worker(c, o->worker);
		if (!c)
			return mcp_fail(call, "no worker '%.64s'", o->worker);
		if (station_snapshot_get(c, o->snapshot, &snap) < 0) {
			const char *m = station_client_last_error(c);
			return mcp_fail(call, "workspace_create failed: %s",
					m && *m ? m : "no answer from the controller");
		}
		const char *a = json_string_value(json_object_get(snap, "adapter"));
		if (a && strcmp(a, "host") == 0)
			o->adapter = "host";
		else if (a && strcmp(a, "container") == 0)
			o->adapter = "container";
		json_decref(snap);
	}
	if (!adapter_allowed(l, o->adapter))
		return mcp_fail(call, "adapter '%.32s' is not offered by this server", o->adapter);
	/* A snapshot brings its image: the operator's default image gives way. */
	if (o->snapshot && o->image == l->image)
		o->image = NULL;
	if (strcmp(o->adapter, "host") == 0 && (o->image || o->network))
		return mcp_fail(call, "image and network belong to the container adapter");
	if (o->network && !network_allowed(l, o->network))
		return mcp_fail(call, "network '%.32s' is not allowed by the operator", o->network);
	if (o->worker && station_client_n_workers(call->s->client) == 0)
		return mcp_fail(call, "this server has one worker: 'worker' is not taken");
	o->env = *env;
	return 0;
}

static int tool_workspace_create(struct mcp_call *call)
{
	struct station_workspace_options o = {};
	char **env = NULL;
	int r;

	r = create_args(call, &o, &env);
	if (r == 0 && station_workspace_create(call->s->client, &o, &call->result) < 0)
		r = mcp_fail_client(call, "workspace_create");
	mcp_env_free(env);
	return r;
}

int mcp_workspace_new(struct mcp_call *call, json_t **ret)
{
	const struct mcp_limits *l = &call->s->limits;
	struct station_workspace_options o = {
		.adapter = l->allow_container ? "container" : "host",
		.image = l->allow_container ? l->image : NULL,
		.cpus = l->cpus,
		.memory_mb = l->memory_mb,
		.pids_limit = l->pids_limit,
		.idle_timeout_ms = l->exec_idle_timeout_ms,
	};

	if (station_workspace_create(call->s->client, &o, ret) < 0)
		return mcp_fail_client(call, "creating a workspace");
	return 0;
}

static int tool_workspace_list(struct mcp_call *call)
{
	static const char *const known[] = { NULL };
	_cleanup_json_ json_t *all = NULL;
	json_t *list, *ws, *unreachable;
	size_t i;

	if (mcp_args_check(call, known) < 0)
		return -1;
	/* Over several workers: every worker's, and the workers that did not answer. */
	if (station_workspace_list_all(call->s->client, &all) < 0)
		return mcp_fail_client(call, "workspace_list");
	unreachable = json_object_get(all, "unreachable");
	if (station_client_n_workers(call->s->client) > 0 &&
	    json_array_size(unreachable) == station_client_n_workers(call->s->client))
		return mcp_fail(call, "no worker answered: %s",
				json_string_value(
					json_object_get(json_array_get(unreachable, 0), "error")));
	list = json_array();
	json_array_foreach(json_object_get(all, "workspaces"), i, ws)
		if (adapter_allowed(&call->s->limits,
				    json_string_value(json_object_get(ws, "adapter"))))
			json_array_append(list, ws);
	call->result = json_pack("{s:o}", "workspaces", list);
	if (call->result && station_client_n_workers(call->s->client) > 0)
		json_object_set(call->result, "unreachable", unreachable);
	return call->result ? 0 : mcp_fail(call, "out of memory");
}

typedef int (*ws_call_fn)(struct station_client *c, const char *id, json_t **ret);

static int workspace_simple(struct mcp_call *call, ws_call_fn fn, const char *what)
{
	static const char *const known[] = { "workspaceId", NULL };
	const char *id;

	if (mcp_args_check(call, known) < 0 || mcp_arg_workspace(call, &id) < 0)
		return -1;
	if (fn(call->s->client, id, &call->result) < 0)
		return mcp_fail_client(call, what);
	return 0;
}

static int tool_workspace_get(struct mcp_call *call)
{
	return workspace_simple(call, station_workspace_get, "workspace_get");
}

static int tool_workspace_delete(struct mcp_call *call)
{
	return workspace_simple(call, station_workspace_delete, "workspace_delete");
}

static int tool_workspace_restart(struct mcp_call *call)
{
	return workspace_simple(call, station_workspace_restart, "workspace_restart");
}

static int tool_workspace_pause(struct mcp_call *call)
{
	return workspace_simple(call, station_workspace_pause, "workspace_pause");
}

static int tool_workspace_resume(struct mcp_call *call)
{
	return workspace_simple(call, station_workspace_resume, "workspace_resume");
}

static int tool_workspace_fork(struct mcp_call *call)
{
	static const char *const known[] = { "workspaceId", "count", NULL };
	uint64_t count = 1;
	const char *id;

	if (mcp_args_check(call, known) < 0 || mcp_arg_workspace(call, &id) < 0 ||
	    mcp_arg_u64(call, "count", 1, STATION_FORK_MAX, &count) < 0)
		return -1;
	if (station_workspace_fork(call->s->client, id, (unsigned)count, &call->result) < 0)
		return mcp_fail_client(call, "workspace_fork");
	return 0;
}

/* The usage history (docs/api.md, "Usage history"): since and step as the API takes them,
 * checked here first so that a bad one names itself without a request. */
static int tool_workspace_usage(struct mcp_call *call)
{
	static const char *const known[] = { "workspaceId", "since", "step", NULL };
	struct station_usage_options o = {};
	char why[256];
	const char *id;

	if (mcp_args_check(call, known) < 0 || mcp_arg_workspace(call, &id) < 0 ||
	    mcp_arg_string(call, "since", false, &o.since) < 0 ||
	    mcp_arg_string(call, "step", false, &o.step) < 0)
		return -1;
	if (station_usage_options_check(&o, why, sizeof why) < 0)
		return mcp_fail(call, "%s", why);
	if (station_workspace_usage_history(call->s->client, id, &o, &call->result) < 0)
		return mcp_fail_client(call, "workspace_usage");
	return 0;
}

static int tool_snapshot_create(struct mcp_call *call)
{
	static const char *const known[] = { "workspaceId", "name", "memory", NULL };
	struct station_snapshot_options o = {};
	const char *id;

	if (mcp_args_check(call, known) < 0 || mcp_arg_workspace(call, &id) < 0 ||
	    mcp_arg_string(call, "name", false, &o.name) < 0 ||
	    mcp_arg_bool(call, "memory", &o.memory) < 0)
		return -1;
	if (station_snapshot_create(call->s->client, id, &o, &call->result) < 0)
		return mcp_fail_client(call, "snapshot_create");
	return 0;
}

/* ---- Services ---------------------------------------------------------------------------- */

static int service_args(struct mcp_call *call, struct station_service_options *o, char ***env)
{
	static const char *const known[] = { "workspaceId", "name",	   "command", "cwd", "env",
					     "restart",	    "maxRestarts", "delayMs", NULL };
	uint64_t max_restarts = UINT64_MAX, delay = UINT64_MAX;

	if (mcp_args_check(call, known) < 0 || arg_name(call, &o->name) < 0 ||
	    mcp_arg_string(call, "command", true, &o->command) < 0 ||
	    mcp_arg_string(call, "cwd", false, &o->cwd) < 0 ||
	    mcp_arg_string(call, "restart", false, &o->restart_policy) < 0 ||
	    mcp_arg_u64(call, "maxRestarts", 0, 1000000, &max_restarts) < 0 ||
	    mcp_arg_u64(call, "delayMs", 0, 3600000, &delay) < 0)
		return -1;
	o->max_restarts = max_restarts == UINT64_MAX ? -1 : (int64_t)max_restarts;
	o->delay_ms = delay == UINT64_MAX ? -1 : (int64_t)delay;
	o->stop_timeout_ms = -1;
	o->max_delay_ms = -1;
	if (!*o->command)
		return mcp_fail(call, "argument 'command' must not be empty");
	if (mcp_arg_env(call, "env", env) < 0)
		return -1;
	o->env = *env;
	return 0;
}

static int tool_service_start(struct mcp_call *call)
{
	struct station_service_options o = {};
	const char *ws;
	char **env = NULL;
	int r = -1;

	if (mcp_arg_workspace(call, &ws) == 0 && service_args(call, &o, &env) == 0) {
		r = 0;
		if (station_service_start(call->s->client, ws, &o, &call->result) < 0)
			r = mcp_fail_client(call, "service_start");
	}
	mcp_env_free(env);
	return r;
}

static int tool_service_list(struct mcp_call *call)
{
	static const char *const known[] = { "workspaceId", NULL };
	_cleanup_json_ json_t *list = NULL;
	const char *ws;

	if (mcp_args_check(call, known) < 0 || mcp_arg_workspace(call, &ws) < 0)
		return -1;
	if (station_service_list(call->s->client, ws, &list) < 0)
		return mcp_fail_client(call, "service_list");
	call->result = json_pack("{s:O}", "services", list);
	return call->result ? 0 : mcp_fail(call, "out of memory");
}

static int tool_service_stop(struct mcp_call *call)
{
	static const char *const known[] = { "workspaceId", "name", NULL };
	const char *ws, *name;

	if (mcp_args_check(call, known) < 0 || mcp_arg_workspace(call, &ws) < 0 ||
	    arg_name(call, &name) < 0)
		return -1;
	if (station_service_stop(call->s->client, ws, name, &call->result) < 0)
		return mcp_fail_client(call, "service_stop");
	return 0;
}

static int logs_output(enum station_stream stream, uint64_t offset, const void *data, size_t len,
		       void *userdata)
{
	return mcp_collect_add(userdata, stream, offset, data, len);
}

static int logs_gap(enum station_stream stream, uint64_t offset, uint64_t bytes, void *userdata)
{
	return mcp_collect_add(userdata, stream, offset + bytes, NULL, 0);
}

/* service_logs: the current attempt's output (followed for waitMs at most) or the newest
 * finished attempt's. */
static int tool_service_logs(struct mcp_call *call)
{
	static const char *const known[] = { "workspaceId", "name", "waitMs", "maxBytes", NULL };
	static const struct station_follow_callbacks cb = { .on_output = logs_output,
							    .on_gap = logs_gap };
	struct mcp_server *s = call->s;
	_cleanup_json_ json_t *svc = NULL, *end = NULL;
	_cleanup_(mcp_collect_done) struct mcp_collect col = {};
	uint64_t wait_ms = 1000, max_bytes = s->limits.result_bytes;
	const char *ws, *name, *state;
	bool running;
	int r;

	if (mcp_args_check(call, known) < 0 || mcp_arg_workspace(call, &ws) < 0 ||
	    arg_name(call, &name) < 0 ||
	    mcp_arg_u64(call, "waitMs", 0, s->limits.max_wait_ms, &wait_ms) < 0 ||
	    mcp_arg_u64(call, "maxBytes", 2, s->limits.result_bytes, &max_bytes) < 0)
		return -1;
	if (station_service_get(s->client, ws, name, &svc) < 0)
		return mcp_fail_client(call, "service_logs");
	state = json_string_value(json_object_get(svc, "state"));
	running = state && (strcmp(state, "running") == 0 || strcmp(state, "starting") == 0);
	if (mcp_collect_init(&col, max_bytes) < 0)
		return mcp_fail(call, "out of memory");
	s->deadline = mcp_now_ms() + (wait_ms ? wait_ms : 1);
	r = station_service_logs(s->client, ws, name, running, &cb, &col, &end);
	s->deadline = 0;
	if (r < 0 && r != -EINTR)
		return mcp_fail_client(call, "service_logs");
	if (s->cancelled)
		return -1;
	s->deadline_hit = false;
	call->result = json_pack("{s:s,s:O,s:b}", "name", name, "state",
				 json_object_get(end ? end : svc, "state"), "attemptRunning",
				 r == -EINTR);
	if (!call->result || mcp_collect_result(&col, call->result, ws, "", max_bytes) < 0)
		return mcp_fail(call, "out of memory");
	return 0;
}

/* ---- Files ------------------------------------------------------------------------------- */

static int file_path_arg(struct mcp_call *call, const char **ws, const char **path,
			 const char *const *known)
{
	if (mcp_args_check(call, known) < 0 || mcp_arg_workspace(call, ws) < 0 ||
	    mcp_arg_string(call, "path", true, path) < 0)
		return -1;
	if (!**path || strlen(*path) > 4096)
		return mcp_fail(call, "argument 'path' must be 1 to 4096 bytes");
	return 0;
}

static int tool_file_list(struct mcp_call *call)
{
	static const char *const known[] = { "workspaceId", "path", NULL };
	struct station_file_list *l = NULL;
	const char *ws, *path;
	json_t *entries;

	if (file_path_arg(call, &ws, &path, known) < 0)
		return -1;
	if (station_file_list(call->s->client, ws, path, &l) < 0)
		return mcp_fail_client(call, "file_list");
	entries = json_array();
	for (size_t i = 0; entries && i < l->n_entries; i++)
		json_array_append_new(entries, station_file_entry_to_json(&l->entries[i]));
	call->result = json_pack("{s:s,s:o,s:b}", "path", l->path, "entries", entries, "truncated",
				 l->truncated);
	station_file_list_free(l);
	return call->result ? 0 : mcp_fail(call, "out of memory");
}

static int tool_file_read(struct mcp_call *call)
{
	static const char *const known[] = { "workspaceId", "path", "offset", "maxBytes", NULL };
	struct station_file_entry *e = NULL;
	uint64_t offset = 0, max = FILE_READ_DEFAULT, got = 0, size;
	struct station_download_options o = {};
	_cleanup_close_ int fd = -1;
	_cleanup_free_ char *buf = NULL;
	const char *ws, *path;
	struct mcp_stream_view v = { .name = "content" };
	_cleanup_free_ char *more = NULL;
	json_t *content;

	if (file_path_arg(call, &ws, &path, known) < 0 ||
	    mcp_arg_u64(call, "offset", 0, INT64_MAX, &offset) < 0 ||
	    mcp_arg_u64(call, "maxBytes", 1, FILE_READ_MAX, &max) < 0)
		return -1;
	if (station_file_stat(call->s->client, ws, path, &e) < 0)
		return mcp_fail_client(call, "file_read");
	size = e->size;
	if (e->type != STATION_FILE_REGULAR) {
		mcp_fail(call, "'%s' is a %s, not a regular file (file_list lists a directory)",
			 path, station_file_type_to_string(e->type));
		station_file_entry_free(e);
		return -1;
	}
	station_file_entry_free(e);
	fd = memfd_create("mcp-file-read", MFD_CLOEXEC);
	if (fd < 0)
		return mcp_fail(call, "memfd_create: %s", strerror(errno));
	o.offset = offset;
	o.length = max;
	if (offset < size && station_file_download(call->s->client, ws, path, fd, &o, &got) < 0)
		return mcp_fail_client(call, "file_read");
	buf = malloc(got + 1);
	if (!buf || pread(fd, buf, got, 0) != (ssize_t)got)
		return mcp_fail(call, "reading the downloaded bytes failed");
	v.total = got;
	v.head = buf;
	v.head_len = got;
	content = mcp_stream_json(&v, got ? got : 2, ws, "", &more);
	if (!content)
		return mcp_fail(call, "out of memory");
	call->result = json_pack("{s:s,s:I,s:I,s:I,s:s,s:O,s:b}", "path", path, "size",
				 (json_int_t)size, "offset", (json_int_t)offset, "bytes",
				 (json_int_t)got, "encoding",
				 json_string_value(json_object_get(content, "encoding")), "content",
				 json_object_get(content, "head"), "eof", offset + got >= size);
	json_decref(content);
	return call->result ? 0 : mcp_fail(call, "out of memory");
}

static int decode_base64(const char *in, char **ret, size_t *ret_len)
{
	size_t n = strlen(in), o = 0;
	unsigned bits = 0, acc = 0;
	char *out = malloc(n / 4 * 3 + 3);

	if (!out)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		const char *p = strchr(
			"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/", in[i]);

		if (in[i] == '=' && i >= n - 2 && n % 4 == 0)
			break;
		if (!p || !in[i] || n % 4 != 0) {
			free(out);
			return -EINVAL;
		}
		acc = (acc << 6) |
		      (unsigned)(p -
				 "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/");
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			out[o++] = (char)((acc >> bits) & 0xff);
		}
	}
	*ret = out;
	*ret_len = o;
	return 0;
}

static int tool_file_write(struct mcp_call *call)
{
	static const char *const known[] = { "workspaceId", "path", "content", "encoding",
					     "parents",	    "mode", NULL };
	struct station_write_options o = {};
	struct station_file_entry *e = NULL;
	const char *ws, *path, *content = NULL, *encoding = "utf-8";
	_cleanup_free_ char *data = NULL;
	uint64_t mode = 0;
	size_t len;

	if (file_path_arg(call, &ws, &path, known) < 0 ||
	    mcp_arg_string(call, "content", true, &content) < 0 ||
	    mcp_arg_string(call, "encoding", false, &encoding) < 0 ||
	    mcp_arg_bool(call, "parents", &o.parents) < 0 ||
	    mcp_arg_u64(call, "mode", 0, 07777, &mode) < 0)
		return -1;
	o.mode = (unsigned)mode;
	if (strcmp(encoding, "base64") == 0) {
		if (decode_base64(content, &data, &len) < 0)
			return mcp_fail(call, "argument 'content' is not valid base64");
	} else if (strcmp(encoding, "utf-8") == 0) {
		len = strlen(content);
		data = strdup(content);
		if (!data)
			return mcp_fail(call, "out of memory");
	} else {
		return mcp_fail(call, "argument 'encoding' must be \"utf-8\" or \"base64\"");
	}
	if (len > FILE_WRITE_MAX)
		return mcp_fail(call, "content is %zu bytes; file_write takes at most 2 MiB", len);
	if (station_file_write(call->s->client, ws, path, data, len, &o, &e) < 0)
		return mcp_fail_client(call, "file_write");
	call->result = station_file_entry_to_json(e);
	station_file_entry_free(e);
	return call->result ? 0 : mcp_fail(call, "out of memory");
}

/* ---- Previews (docs/api.md, "Previews") -------------------------------------------------- */

/* The longest expiresInMs the API takes: 30 days. */
#define PORT_EXPIRES_MAX 2592000000ull

static int arg_port(struct mcp_call *call, uint16_t *ret)
{
	uint64_t port = 0;

	if (mcp_arg_u64(call, "port", 1, 65535, &port) < 0)
		return -1;
	if (port == 0)
		return mcp_fail(call, "argument 'port' is required");
	*ret = (uint16_t)port;
	return 0;
}

/* url?station_preview_token=TOKEN: the link that opens a token exposure in a browser once (it
 * sets the preview's cookie and redirects to url). The token percent-encoded. */
static int set_open_url(json_t *exposure)
{
	static const char hex[] = "0123456789ABCDEF";
	const char *url = json_string_value(json_object_get(exposure, "url"));
	const char *token = json_string_value(json_object_get(exposure, "token"));
	_cleanup_free_ char *s = NULL;
	size_t n, size;

	if (!url || !token || json_object_get(exposure, "openUrl"))
		return 0;
	size = strlen(url) + sizeof "?station_preview_token=" + 3 * strlen(token);
	s = malloc(size);
	if (!s)
		return -ENOMEM;
	n = (size_t)snprintf(s, size, "%s?station_preview_token=", url);
	for (const unsigned char *p = (const unsigned char *)token; *p; p++) {
		if (strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~",
			   *p)) {
			s[n++] = (char)*p;
			continue;
		}
		s[n++] = '%';
		s[n++] = hex[*p >> 4];
		s[n++] = hex[*p & 15];
	}
	s[n] = '\0';
	return json_object_set_new(exposure, "openUrl", json_string(s)) < 0 ? -ENOMEM : 0;
}

static int tool_port_expose(struct mcp_call *call)
{
	static const char *const known[] = { "workspaceId", "port", "public", "expiresInMs", NULL };
	struct station_port_options o = {};
	const char *ws;
	uint16_t port = 0;

	if (mcp_args_check(call, known) < 0 || mcp_arg_workspace(call, &ws) < 0 ||
	    arg_port(call, &port) < 0 || mcp_arg_bool(call, "public", &o.public) < 0 ||
	    mcp_arg_u64(call, "expiresInMs", 1, PORT_EXPIRES_MAX, &o.expires_in_ms) < 0)
		return -1;
	if (station_port_expose(call->s->client, ws, port, &o, &call->result) < 0)
		return mcp_fail_client(call, "port_expose");
	return set_open_url(call->result) < 0 ? mcp_fail(call, "out of memory") : 0;
}

static int tool_port_list(struct mcp_call *call)
{
	static const char *const known[] = { "workspaceId", NULL };
	const char *ws;

	if (mcp_args_check(call, known) < 0 || mcp_arg_workspace(call, &ws) < 0)
		return -1;
	if (station_port_list(call->s->client, ws, &call->result) < 0)
		return mcp_fail_client(call, "port_list");
	return 0;
}

static int tool_port_revoke(struct mcp_call *call)
{
	static const char *const known[] = { "workspaceId", "port", NULL };
	const char *ws;
	uint16_t port = 0;

	if (mcp_args_check(call, known) < 0 || mcp_arg_workspace(call, &ws) < 0 ||
	    arg_port(call, &port) < 0)
		return -1;
	if (station_port_revoke(call->s->client, ws, port) < 0)
		return mcp_fail_client(call, "port_revoke");
	call->result = json_pack("{s:i,s:b}", "port", (int)port, "revoked", true);
	return call->result ? 0 : mcp_fail(call, "out of memory");
}

/* ---- The table --------------------------------------------------------------------------- */

#define READ_ONLY 1
#define DESTRUCTIVE 2
#define IDEMPOTENT 4

struct tool {
	const char *name;
	const char *title;
	const char *description;
	const char *input;  /* JSON Schema, ' for " */
	const char *output; /* JSON Schema, ' for " */
	unsigned flags;
	int (*run)(struct mcp_call *call);
};

#define WS_ARG "'workspaceId':{'type':'string','description':'the workspace id, or its name'}"
#define OBJ_OUT(props, req) "{'type':'object','properties':{" props "},'required':[" req "]}"
#define WS_OUT                                                                                     \
	OBJ_OUT("'id':{'type':'string'},'state':{'type':'string'},'adapter':{'type':'string'}",    \
		"'id','state'")
#define ENV_ARG                                                                                    \
	"'env':{'type':'object','additionalProperties':{'type':'string'},'description':'environment variables'}"
#define STREAM_OUT                                                                                 \
	"{'type':'object','properties':{'bytes':{'type':'integer'},'encoding':{'type':'string',"   \
	"'enum':['utf-8','base64']},'head':{'type':'string'},'tail':{'type':'string'},"            \
	"'truncated':{'type':'boolean'},'omittedBytes':{'type':'integer'}},'required':['bytes',"   \
	"'encoding','head','tail','truncated']}"
#define RUN_OUT                                                                                     \
	OBJ_OUT("'workspaceId':{'type':'string'},'runId':{'type':'string'},'status':{'type':"       \
		"'string'},'exitCode':{'type':['integer','null']},'signal':{},'stdout':" STREAM_OUT \
		",'stderr':" STREAM_OUT ",'more':{'type':['string','null']}",                       \
		"'workspaceId','runId','status','stdout','stderr'")
#define RUN_ARGS WS_ARG ",'runId':{'type':'string','description':'the runId exec returned'}"
#define SERVICE_OUT OBJ_OUT("'name':{'type':'string'},'state':{'type':'string'}", "'name','state'")
#define ENTRY_OUT                                                                                  \
	OBJ_OUT("'path':{'type':'string'},'type':{'type':'string'},'size':{'type':'integer'}",     \
		"'path','type'")

static const struct tool tools[] = {
	{ "workspace_create", "Create a workspace",
	  "Creates a sandbox workspace (a container) with a persistent home directory and returns "
	  "it; pass its id to the other tools. Delete it when done.",
	  "{'type':'object','properties':{'image':{'type':'string','description':'image reference "
	  "pinned by digest (name@sha256:...); default: the server default'}," ENV_ARG
	  ",'cpus':{'type':'number','minimum':0.01},'memoryMb':{'type':'integer','minimum':1},"
	  "'pidsLimit':{'type':'integer','minimum':1},'network':{'type':'string','enum':['none',"
	  "'bridge','restricted']},'adapter':{'type':'string','enum':['container','host']},"
	  "'worker':{'type':'string','description':'the worker to create on; default: where "
	  "the placement rule puts it'},'snapshot':{'type':'string','description':'start from "
	  "this snapshot (s-..., from snapshot_create or workspace_fork): its files and image'}}}",
	  WS_OUT, 0, tool_workspace_create },
	{ "workspace_list", "List workspaces",
	  "Lists the workspaces (of every worker; 'unreachable' names workers that did not "
	  "answer).",
	  "{'type':'object','properties':{}}",
	  OBJ_OUT("'workspaces':{'type':'array','items':{'type':'object'}},'unreachable':{'type':"
		  "'array','items':{'type':'object'}}",
		  "'workspaces'"),
	  READ_ONLY, tool_workspace_list },
	{ "workspace_get", "Get a workspace", "Shows one workspace: state, limits, image.",
	  "{'type':'object','properties':{" WS_ARG "},'required':['workspaceId']}", WS_OUT,
	  READ_ONLY, tool_workspace_get },
	{ "workspace_delete", "Delete a workspace",
	  "Deletes a workspace: kills its processes and removes its files.",
	  "{'type':'object','properties':{" WS_ARG "},'required':['workspaceId']}",
	  OBJ_OUT("'id':{'type':'string'},'state':{'type':'string'}", "'id','state'"), DESTRUCTIVE,
	  tool_workspace_delete },
	{ "workspace_restart", "Restart a workspace",
	  "Restarts a workspace: running commands end, files under the home directory stay.",
	  "{'type':'object','properties':{" WS_ARG "},'required':['workspaceId']}", WS_OUT,
	  DESTRUCTIVE, tool_workspace_restart },
	{ "workspace_pause", "Pause a workspace",
	  "Freezes every process of a workspace; its timeouts and idle time stop. Files can "
	  "still be read; commands, terminals, file writes and service starts are refused until "
	  "workspace_resume. Pausing a paused workspace changes nothing.",
	  "{'type':'object','properties':{" WS_ARG "},'required':['workspaceId']}", WS_OUT,
	  IDEMPOTENT, tool_workspace_pause },
	{ "workspace_resume", "Resume a workspace",
	  "Thaws a paused workspace: its processes and timeouts go on where they stopped.",
	  "{'type':'object','properties':{" WS_ARG "},'required':['workspaceId']}", WS_OUT,
	  IDEMPOTENT, tool_workspace_resume },
	{ "workspace_fork", "Fork a workspace",
	  "Snapshots a workspace (its home directory and file changes) and starts count new "
	  "workspaces from it, each independent from then on: try several approaches from the "
	  "same state. Returns the new workspaces; delete them when done.",
	  "{'type':'object','properties':{" WS_ARG ",'count':{'type':'integer','minimum':1,"
	  "'maximum':100,'description':'how many workspaces (default 1)'}},'required':["
	  "'workspaceId']}",
	  OBJ_OUT("'workspaces':{'type':'array','items':{'type':'object'}},'snapshot':{'type':"
		  "'string'},'pausedMs':{'type':'integer'}",
		  "'workspaces','snapshot'"),
	  0, tool_workspace_fork },
	{ "workspace_usage", "A workspace's usage over time",
	  "Shows a workspace's CPU (cores), memory, processes and network bytes over time, one "
	  "point per step, oldest first, with its limits: to see whether a command is starved "
	  "of CPU or near its memory limit, or what an idle workspace costs.",
	  "{'type':'object','properties':{" WS_ARG ",'since':{'type':'string','description':"
	  "'from when: an RFC 3339 time, milliseconds since the epoch, or a duration back from "
	  "now (90s, 30m, 1h); default an hour ago'},'step':{'type':'string','description':'the "
	  "width of each point: 200ms, 5s, 1m, 1h or milliseconds, from 100 ms to 24 h; default "
	  "the sampling interval within the last hour, else 1m'}},'required':['workspaceId']}",
	  OBJ_OUT("'workspaceId':{'type':'string'},'stepMs':{'type':'integer'},'intervalMs':{"
		  "'type':'integer'},'limits':{'type':'object'},'samples':{'type':'array','items':{"
		  "'type':'object','properties':{'t':{'type':'string'},'cpu':{'type':'number'},"
		  "'memoryBytes':{'type':'integer'},'memoryMaxBytes':{'type':'integer'},'pids':{"
		  "'type':'integer'},'rxBytes':{'type':'integer'},'txBytes':{'type':'integer'},"
		  "'spanMs':{'type':'integer'}}}}",
		  "'workspaceId','stepMs','samples'"),
	  READ_ONLY, tool_workspace_usage },
	{ "snapshot_create", "Snapshot a workspace",
	  "Keeps a workspace's home directory and file changes as a snapshot (a checkpoint before "
	  "a risky step); workspace_create with snapshot starts a workspace from it.",
	  "{'type':'object','properties':{" WS_ARG ",'name':{'type':'string','minLength':1,"
	  "'maxLength':128},'memory':{'type':'boolean','description':'the running processes too "
	  "(refused, naming what is missing, where the worker cannot)'}},'required':["
	  "'workspaceId']}",
	  OBJ_OUT("'id':{'type':'string'},'workspaceId':{'type':'string'},'name':{'type':["
		  "'string','null']},'sizeBytes':{'type':'integer'},'createdAt':{'type':'string'}",
		  "'id','workspaceId'"),
	  0, tool_snapshot_create },
	{ "exec", "Run a shell command",
	  "Runs a command with /bin/sh -c in a workspace and returns its status, exit code and "
	  "output (head and tail when long). A non-zero exit code is a normal result. When the "
	  "command is still running after waitMs, the result has status running and a runId: "
	  "call run_wait to wait for it, run_cancel to stop it. Without workspaceId every call "
	  "creates a new workspace (stopped once idle for 30 minutes, unless the operator chose "
	  "otherwise): to keep working in "
	  "the same one (its files, installed tools, services), pass the workspaceId of the result "
	  "to later calls, and delete it when done.",
	  "{'type':'object','properties':{" WS_ARG ",'command':{'type':'string'},'cwd':{'type':"
	  "'string'}," ENV_ARG ",'stdin':{'type':'string'},'timeoutMs':{'type':'integer',"
	  "'minimum':1,'description':'the command is killed after this'},'maxOutputBytes':{'type':"
	  "'integer','minimum':2,'description':'output kept per stream (head and tail)'},"
	  "'waitMs':{'type':'integer','minimum':0,'description':'how long this call waits before "
	  "returning a runId (default 25000)'}},'required':['command']}",
	  RUN_OUT, 0, mcp_tool_exec },
	{ "run_wait", "Wait for a command",
	  "Waits up to waitMs for a command that exec left running and returns it as exec does.",
	  "{'type':'object','properties':{" RUN_ARGS ",'waitMs':{'type':'integer','minimum':0}},"
	  "'required':['runId']}",
	  RUN_OUT, READ_ONLY, mcp_tool_run_wait },
	{ "run_cancel", "Cancel a command", "Kills a running command and every process it started.",
	  "{'type':'object','properties':{" RUN_ARGS "},'required':['runId']}", RUN_OUT,
	  DESTRUCTIVE, mcp_tool_run_cancel },
	{ "run_output", "Read a command's output",
	  "Reads part of a finished command's kept output from offset (bytes).",
	  "{'type':'object','properties':{" RUN_ARGS ",'stream':{'type':'string','enum':['stdout',"
	  "'stderr']},'offset':{'type':'integer','minimum':0},'maxBytes':{'type':'integer',"
	  "'minimum':1}},'required':['runId']}",
	  OBJ_OUT("'stream':{'type':'string'},'offset':{'type':'integer'},'bytes':{'type':'integer'},"
		  "'totalBytes':{'type':'integer'},'encoding':{'type':'string'},'data':{'type':"
		  "'string'},'next':{'type':['integer','null']}",
		  "'stream','offset','bytes','encoding','data'"),
	  READ_ONLY, mcp_tool_run_output },
	{ "code_execute", "Run a cell of code",
	  "Runs a cell of Python (or JavaScript) in a stateful interpreter of the workspace: "
	  "variables, imports and functions stay for the next call. Returns the cell's output, "
	  "its results (the value of the last expression as text, plots and other images as "
	  "image content) and its error with the traceback (isError). One interpreter per "
	  "workspace and language is kept unless contextId names another.",
	  "{'type':'object','properties':{" WS_ARG ",'code':{'type':'string'},'language':{'type':"
	  "'string','enum':['python','javascript'],'description':'default python'},'contextId':{"
	  "'type':'string','description':'run in this context (c-...) instead of the "
	  "default one of the workspace'},'timeoutMs':{'type':'integer','minimum':1,'description':'the cell is "
	  "interrupted after this (default 60000); its variables stay'}},'required':["
	  "'workspaceId','code']}",
	  OBJ_OUT("'workspaceId':{'type':'string'},'contextId':{'type':'string'},'executionId':{"
		  "'type':'string'},'runId':{'type':'string'},'status':{'type':'string','enum':["
		  "'ok','error','timed_out','interrupted','dead']},'executionCount':{'type':["
		  "'integer','null']},'stdout':" STREAM_OUT ",'stderr':" STREAM_OUT
		  ",'results':{'type':'array','items':{'type':'object'}},'error':{'type':["
		  "'object','null']},'more':{'type':['string','null']}",
		  "'workspaceId','contextId','status','stdout','stderr','results'"),
	  0, mcp_tool_code_execute },
	{ "service_start", "Start a service",
	  "Starts a long-running process (a server) in the foreground under a restart policy.",
	  "{'type':'object','properties':{" WS_ARG ",'name':{'type':'string','pattern':"
	  "'^[a-z0-9][a-z0-9._-]{0,62}$'},'command':{'type':'string'},'cwd':{'type':'string'}," ENV_ARG
	  ",'restart':{'type':'string','enum':['no','on-failure','always']},'maxRestarts':"
	  "{'type':'integer','minimum':0},'delayMs':{'type':'integer','minimum':0}},'required':["
	  "'workspaceId','name','command']}",
	  SERVICE_OUT, 0, tool_service_start },
	{ "service_list", "List services", "Lists a workspace's services and their states.",
	  "{'type':'object','properties':{" WS_ARG "},'required':['workspaceId']}",
	  OBJ_OUT("'services':{'type':'array','items':{'type':'object'}}", "'services'"), READ_ONLY,
	  tool_service_list },
	{ "service_logs", "Read a service's output",
	  "Shows the output of a service's current attempt (or its last one), head and tail.",
	  "{'type':'object','properties':{" WS_ARG ",'name':{'type':'string'},'waitMs':{'type':"
	  "'integer','minimum':0},'maxBytes':{'type':'integer','minimum':2}},'required':["
	  "'workspaceId','name']}",
	  OBJ_OUT("'name':{'type':'string'},'state':{'type':'string'},'stdout':" STREAM_OUT
		  ",'stderr':" STREAM_OUT,
		  "'name','stdout','stderr'"),
	  READ_ONLY, tool_service_logs },
	{ "service_stop", "Stop a service", "Stops a service; it is not restarted.",
	  "{'type':'object','properties':{" WS_ARG ",'name':{'type':'string'}},'required':["
	  "'workspaceId','name']}",
	  SERVICE_OUT, DESTRUCTIVE, tool_service_stop },
	{ "file_read", "Read a file",
	  "Reads a file of the workspace (text, or base64 when binary), maxBytes from offset.",
	  "{'type':'object','properties':{" WS_ARG ",'path':{'type':'string','description':"
	  "'absolute, or relative to the workspace directory'},'offset':{'type':'integer',"
	  "'minimum':0},'maxBytes':{'type':'integer','minimum':1,'maximum':1048576}},'required':["
	  "'workspaceId','path']}",
	  OBJ_OUT("'path':{'type':'string'},'size':{'type':'integer'},'bytes':{'type':'integer'},"
		  "'encoding':{'type':'string'},'content':{'type':'string'},'eof':{'type':'boolean'}",
		  "'path','size','bytes','encoding','content','eof'"),
	  READ_ONLY, tool_file_read },
	{ "file_write", "Write a file",
	  "Writes a whole file of the workspace atomically (content as text, or base64).",
	  "{'type':'object','properties':{" WS_ARG ",'path':{'type':'string'},'content':{'type':"
	  "'string'},'encoding':{'type':'string','enum':['utf-8','base64']},'parents':{'type':"
	  "'boolean','description':'make missing parent directories'},'mode':{'type':'integer'}},"
	  "'required':['workspaceId','path','content']}",
	  ENTRY_OUT, IDEMPOTENT, tool_file_write },
	{ "file_list", "List a directory", "Lists a directory of the workspace.",
	  "{'type':'object','properties':{" WS_ARG ",'path':{'type':'string'}},'required':["
	  "'workspaceId','path']}",
	  OBJ_OUT("'path':{'type':'string'},'entries':{'type':'array','items':{'type':'object'}},"
		  "'truncated':{'type':'boolean'}",
		  "'path','entries','truncated'"),
	  READ_ONLY, tool_file_list },
	{ "port_expose", "Expose a port",
	  "Gives a web server listening on a port inside the workspace (on any address, 127.0.0.1 "
	  "included) a preview URL of its own that people and programs can open. With token "
	  "access (the default) the URL needs the token: send 'Authorization: Bearer TOKEN', or "
	  "open openUrl in a browser once (it sets a cookie). The token is shown only now. With "
	  "public true, anyone with the URL opens it. Fails when previews are off or the "
	  "workspace has no network of its own.",
	  "{'type':'object','properties':{" WS_ARG ",'port':{'type':'integer','minimum':1,"
	  "'maximum':65535},'public':{'type':'boolean','description':'no token needed (default "
	  "false)'},'expiresInMs':{'type':'integer','minimum':1,'maximum':2592000000,"
	  "'description':'the URL stops working after this (default 24 hours)'}},'required':["
	  "'workspaceId','port']}",
	  OBJ_OUT("'port':{'type':'integer'},'host':{'type':'string'},'url':{'type':'string'},"
		  "'access':{'type':'string','enum':['token','public']},'token':{'type':'string'},"
		  "'openUrl':{'type':'string'},'expiresAt':{'type':'string'},'createdAt':{'type':"
		  "'string'}",
		  "'port','url','access','expiresAt'"),
	  0, tool_port_expose },
	{ "port_list", "List ports",
	  "Lists the workspace's exposed ports with their URLs (never their tokens) and the TCP "
	  "ports listening inside it.",
	  "{'type':'object','properties':{" WS_ARG "},'required':['workspaceId']}",
	  OBJ_OUT("'exposed':{'type':'array','items':{'type':'object'}},'listening':{'type':"
		  "'array','items':{'type':'object'}}",
		  "'exposed','listening'"),
	  READ_ONLY, tool_port_list },
	{ "port_revoke", "Revoke a port's URL",
	  "Ends an exposure: its URL and token stop working at once.",
	  "{'type':'object','properties':{" WS_ARG ",'port':{'type':'integer','minimum':1,"
	  "'maximum':65535}},'required':['workspaceId','port']}",
	  OBJ_OUT("'port':{'type':'integer'},'revoked':{'type':'boolean'}", "'port','revoked'"),
	  DESTRUCTIVE, tool_port_revoke },
};

static bool tool_offered(const struct mcp_server *s, const struct tool *t)
{
	return s->limits.allow_delete || strcmp(t->name, "workspace_delete") != 0;
}

static json_t *tool_json(const struct mcp_server *s, const struct tool *t)
{
	json_t *input = mcp_json_q(t->input);

	/* adapter is a choice only where the operator offers both. */
	if (!(s->limits.allow_host && s->limits.allow_container) &&
	    strcmp(t->name, "workspace_create") == 0)
		json_object_del(json_object_get(input, "properties"), "adapter");
	/* worker is a choice only over several workers. */
	if (station_client_n_workers(s->client) == 0 && strcmp(t->name, "workspace_create") == 0)
		json_object_del(json_object_get(input, "properties"), "worker");
	/* Every tool refuses an argument it does not know (mcp_args_check): say so. */
	json_object_set_new(input, "additionalProperties", json_false());
	return json_pack("{s:s,s:s,s:s,s:o,s:o,s:{s:s,s:b,s:b,s:b,s:b}}", "name", t->name, "title",
			 t->title, "description", t->description, "inputSchema", input,
			 "outputSchema", mcp_json_q(t->output), "annotations", "title", t->title,
			 "readOnlyHint", (t->flags & READ_ONLY) != 0, "destructiveHint",
			 (t->flags & DESTRUCTIVE) != 0, "idempotentHint",
			 (t->flags & (READ_ONLY | IDEMPOTENT)) != 0, "openWorldHint", false);
}

json_t *mcp_tools_list(struct mcp_server *s)
{
	json_t *a = json_array();

	for (size_t i = 0; a && i < ELEMENTSOF(tools); i++)
		if (tool_offered(s, &tools[i]))
			json_array_append_new(a, tool_json(s, &tools[i]));
	return a;
}

int mcp_tool_run(struct mcp_call *call, const char *name)
{
	for (size_t i = 0; i < ELEMENTSOF(tools); i++)
		if (strcmp(tools[i].name, name) == 0 && tool_offered(call->s, &tools[i]))
			return tools[i].run(call) < 0 ? -1 : 0;
	return -ENOENT;
}
