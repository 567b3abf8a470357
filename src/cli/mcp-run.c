/* SPDX-License-Identifier: MIT */
/* exec, run_wait, run_cancel and run_output: a command's run returned early with a handle when
 * it outlasts waitMs (so no client timeout kills a build), its output as head and tail, progress
 * while the call waits, and a cancelled exec killing the run's whole tree. */

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcp.h"

#define RUN_OUTPUT_DEFAULT 65536
#define RUN_OUTPUT_MAX (1024 * 1024)

/* ---- Results ----------------------------------------------------------------------------- */

static json_t *run_base(const json_t *run, const char *ws)
{
	return json_pack("{s:s,s:O,s:O,s:O,s:O,s:O,s:O,s:O,s:O}", "workspaceId", ws, "runId",
			 json_object_get(run, "id"), "status", json_object_get(run, "status"),
			 "exitCode", json_object_get(run, "exitCode") ?: json_null(), "signal",
			 json_object_get(run, "signal") ?: json_null(), "oomKilled",
			 json_object_get(run, "oomKilled") ?: json_false(), "reason",
			 json_object_get(run, "reason") ?: json_null(), "durationMs",
			 json_object_get(run, "durationMs") ?: json_null(), "command",
			 json_object_get(run, "command") ?: json_null());
}

/* A terminal run (with its output fields) as a result. */
static int finished_result(struct mcp_call *call, const json_t *run, const char *ws)
{
	static const char *const names[] = { "stdout", "stderr" };
	_cleanup_free_ char *more = NULL;
	const char *id = json_string_value(json_object_get(run, "id"));
	json_t *res = run_base(run, ws);

	if (!res || !id)
		return mcp_fail(call, "the controller sent a run without an id");
	call->result = res;
	for (int i = 0; i < 2; i++) {
		_cleanup_free_ char *head = NULL, *tail = NULL, *m = NULL, *key = NULL;
		struct mcp_stream_view v = { .name = names[i] };
		json_t *o;

		if (station_run_output(run, (enum station_stream)i, false, &head, &v.head_len) <
			    0 ||
		    station_run_output(run, (enum station_stream)i, true, &tail, &v.tail_len) < 0)
			return mcp_fail(call, "the controller sent malformed output");
		if (asprintf(&key, "%sBytes", names[i]) < 0)
			return mcp_fail(call, "out of memory");
		v.total = (uint64_t)json_integer_value(json_object_get(run, key));
		v.head = head;
		v.tail = tail;
		if (v.total < v.head_len + v.tail_len)
			v.total = v.head_len + v.tail_len;
		o = mcp_stream_json(&v, call->s->limits.result_bytes, ws, id, &m);
		if (!o)
			return mcp_fail(call, "out of memory");
		json_object_set_new(res, names[i], o);
		if (m && !more)
			more = TAKE_PTR(m);
	}
	json_object_set_new(res, "more", more ? json_string(more) : json_null());
	return 0;
}

static int running_result(struct mcp_call *call, struct mcp_collect *col, const json_t *run,
			  const char *ws, uint64_t waited)
{
	const char *id = json_string_value(json_object_get(run, "id"));
	_cleanup_free_ char *more = NULL;

	call->result = run_base(run, ws);
	if (!call->result || !id)
		return mcp_fail(call, "out of memory");
	json_object_set_new(call->result, "status", json_string("running"));
	if (mcp_collect_result(col, call->result, ws, id, call->s->limits.result_bytes) < 0 ||
	    asprintf(&more,
		     "still running after %" PRIu64 " ms; the output so far is shown. Call "
		     "run_wait {\"workspaceId\":\"%s\",\"runId\":\"%s\"} to wait for it, or "
		     "run_cancel to stop it",
		     waited, ws, id) < 0)
		return mcp_fail(call, "out of memory");
	json_object_set_new(call->result, "more", json_string(more));
	return 0;
}

/* ---- Waiting ----------------------------------------------------------------------------- */

static int follow_output(enum station_stream stream, uint64_t offset, const void *data, size_t len,
			 void *userdata)
{
	return mcp_collect_add(userdata, stream, offset, data, len);
}

static int follow_gap(enum station_stream stream, uint64_t offset, uint64_t bytes, void *userdata)
{
	return mcp_collect_add(userdata, stream, offset + bytes, NULL, 0);
}

/* Cancels run with the interrupt check quiet (it would stop the cancel itself). */
static void run_kill(struct mcp_server *s, const char *ws, const char *run)
{
	int r;

	s->deadline = 0;
	s->deadline_hit = false;
	s->quiet = true;
	r = station_run_cancel(s->client, ws, run, NULL);
	s->quiet = false;
	if (r < 0 && r != -EBUSY)
		fprintf(stderr, "station-sandbox mcp: cancelling run '%s': %s\n", run,
			station_client_last_error(s->client));
}

/* A follow of run id that failed (the controller went away, most often): the run goes on in
 * the workspace, so the error names it and how to find it. Returns -1. */
static int run_lost(struct mcp_call *call, const char *ws, const char *id, const char *what)
{
	const char *m = station_client_last_error(call->s->client);

	return mcp_fail(call,
			"%s of run '%s' failed: %s. The run was started and goes on without this "
			"call: call run_wait {\"workspaceId\":\"%s\",\"runId\":\"%s\"} (once the "
			"controller answers again) for its outcome, or run_cancel to stop it",
			what, id, m && *m ? m : "no answer from the controller", ws, id);
}

/* Follows run until it ends or wait_ms passes; owned: the request started it, so a cancelled
 * request cancels the run. The result is the finished run, or the running one with its output
 * so far. */
static int run_follow(struct mcp_call *call, const char *ws, const json_t *run, uint64_t wait_ms,
		      bool owned)
{
	static const struct station_follow_callbacks cb = { .on_output = follow_output,
							    .on_gap = follow_gap };
	struct mcp_server *s = call->s;
	const char *id = json_string_value(json_object_get(run, "id"));
	_cleanup_(mcp_collect_done) struct mcp_collect col = { .s = s };
	_cleanup_json_ json_t *full = NULL;
	uint64_t start = mcp_now_ms();
	int r = -EINTR;

	if (!id)
		return mcp_fail(call, "the controller sent a run without an id");
	if (mcp_collect_init(&col, s->limits.result_bytes) < 0)
		return mcp_fail(call, "out of memory");
	if (wait_ms > 0) {
		s->deadline = start + wait_ms;
		s->deadline_hit = false;
		r = station_run_follow(s->client, ws, id, &cb, &col, NULL);
		s->deadline = 0;
	}
	if (s->cancelled) {
		if (owned)
			run_kill(s, ws, id);
		return -1; /* not answered */
	}
	if (r == -EINTR) {
		s->deadline_hit = false;
		return running_result(call, &col, run, ws, mcp_now_ms() - start);
	}
	if (r < 0)
		return run_lost(call, ws, id, "following the output");
	if (station_run_get(s->client, ws, id, 0, &full) < 0)
		return run_lost(call, ws, id, "reading the outcome");
	return finished_result(call, full, ws);
}

/* ---- Tools ------------------------------------------------------------------------------- */

static int exec_args(struct mcp_call *call, struct station_exec_options *o, char ***env,
		     uint64_t *wait_ms)
{
	static const char *const known[] = { "workspaceId", "command",	      "cwd",
					     "env",	    "stdin",	      "timeoutMs",
					     "waitMs",	    "maxOutputBytes", NULL };
	const struct mcp_limits *l = &call->s->limits;
	const char *in = NULL;

	*wait_ms = l->default_wait_ms;
	if (mcp_args_check(call, known) < 0 ||
	    mcp_arg_string(call, "command", true, &o->command) < 0 ||
	    mcp_arg_string(call, "cwd", false, &o->cwd) < 0 ||
	    mcp_arg_string(call, "stdin", false, &in) < 0 ||
	    mcp_arg_u64(call, "timeoutMs", 1, l->max_timeout_ms ? l->max_timeout_ms : 86400000,
			&o->timeout_ms) < 0 ||
	    mcp_arg_u64(call, "maxOutputBytes", 2, l->max_output_bytes, &o->max_output_bytes) < 0 ||
	    mcp_arg_u64(call, "waitMs", 0, l->max_wait_ms, wait_ms) < 0)
		return -1;
	if (!*o->command)
		return mcp_fail(call, "argument 'command' must not be empty");
	if (o->max_output_bytes & 1)
		o->max_output_bytes++;
	if (!o->timeout_ms && l->max_timeout_ms && l->max_timeout_ms < 60000)
		o->timeout_ms = l->max_timeout_ms;
	if (in) {
		o->stdin_data = in;
		o->stdin_size = strlen(in);
	}
	if (mcp_arg_env(call, "env", env) < 0)
		return -1;
	o->env = *env;
	return 0;
}

int mcp_tool_exec(struct mcp_call *call)
{
	struct station_exec_options o = {};
	_cleanup_json_ json_t *run = NULL, *created = NULL;
	const char *ws = NULL, *id;
	uint64_t wait_ms;
	char **env = NULL;
	int r;

	r = exec_args(call, &o, &env, &wait_ms);
	if (r == 0 && json_object_get(call->args, "workspaceId"))
		r = mcp_arg_workspace(call, &ws);
	else if (r == 0 && mcp_workspace_new(call, &created) == 0)
		ws = json_string_value(json_object_get(created, "id"));
	if (r == 0 && !ws)
		r = -1; /* the create failed: call->error says why */
	/* The start is not interrupted: a cancel (or SIGTERM: the client of POST /mcp went away)
	 * that came while the controller was starting the run would leave the run going with no
	 * one to stop it. It is seen right after, by run_follow, which cancels the run. */
	if (r == 0) {
		call->s->quiet = true;
		if (station_exec_start(call->s->client, ws, &o, &run) < 0)
			r = mcp_fail_client(call, "exec");
		call->s->quiet = false;
	}
	mcp_env_free(env);
	if (r < 0)
		return r;
	id = json_string_value(json_object_get(run, "id"));
	if (id)
		json_object_set_new(call->s->runs, id, json_string(ws));
	if (station_run_is_terminal(run))
		return finished_result(call, run, ws);
	return run_follow(call, ws, run, wait_ms, true);
}

/* Finds the workspace of run id: the argument, the runs this server started, else every
 * workspace offered. */
static int run_arg(struct mcp_call *call, const char **ret_ws, const char **ret_run, json_t **ret)
{
	struct mcp_server *s = call->s;
	_cleanup_json_ json_t *list = NULL;
	const char *run = NULL, *ws = NULL;
	json_t *w;
	size_t i;
	int r;

	if (mcp_arg_string(call, "runId", true, &run) < 0)
		return -1;
	if (strlen(run) > 128 ||
	    strspn(run, "abcdefghijklmnopqrstuvwxyz0123456789_-") != strlen(run) || !*run)
		return mcp_fail(call, "run '%.140s' not found", run);
	if (json_object_get(call->args, "workspaceId")) {
		if (mcp_arg_workspace(call, &ws) < 0)
			return -1;
	} else {
		ws = json_string_value(json_object_get(s->runs, run));
	}
	if (ws) {
		r = station_run_get(s->client, ws, run, 0, ret);
		if (r == -ENOENT)
			return mcp_fail(call, "run '%s' not found in workspace '%s'", run, ws);
		if (r < 0)
			return mcp_fail_client(call, "reading the run");
		*ret_ws = ws;
		*ret_run = run;
		return 0;
	}
	if (station_workspace_list(s->client, &list) < 0)
		return mcp_fail_client(call, "workspace_list");
	json_array_foreach(list, i, w) {
		const char *id = json_string_value(json_object_get(w, "id"));
		const char *adapter = json_string_value(json_object_get(w, "adapter"));

		if (!id || !adapter || (strcmp(adapter, "host") == 0 && !s->limits.allow_host) ||
		    (strcmp(adapter, "container") == 0 && !s->limits.allow_container))
			continue;
		if (station_run_get(s->client, id, run, 0, ret) == 0) {
			json_object_set_new(s->runs, run, json_string(id));
			*ret_ws = json_string_value(json_object_get(s->runs, run));
			*ret_run = run;
			return 0;
		}
	}
	return mcp_fail(call, "run '%s' not found (give workspaceId too)", run);
}

int mcp_tool_run_wait(struct mcp_call *call)
{
	static const char *const known[] = { "workspaceId", "runId", "waitMs", NULL };
	_cleanup_json_ json_t *run = NULL;
	uint64_t wait_ms = call->s->limits.default_wait_ms;
	const char *ws, *id;

	if (mcp_args_check(call, known) < 0 ||
	    mcp_arg_u64(call, "waitMs", 0, call->s->limits.max_wait_ms, &wait_ms) < 0 ||
	    run_arg(call, &ws, &id, &run) < 0)
		return -1;
	if (station_run_is_terminal(run))
		return finished_result(call, run, ws);
	return run_follow(call, ws, run, wait_ms, false);
}

int mcp_tool_run_cancel(struct mcp_call *call)
{
	static const char *const known[] = { "workspaceId", "runId", NULL };
	_cleanup_json_ json_t *run = NULL, *full = NULL;
	const char *ws, *id;
	int r;

	if (mcp_args_check(call, known) < 0 || run_arg(call, &ws, &id, &run) < 0)
		return -1;
	if (!station_run_is_terminal(run)) {
		r = station_run_cancel(call->s->client, ws, id, NULL);
		if (r < 0 && r != -EBUSY)
			return mcp_fail_client(call, "run_cancel");
	}
	if (station_run_get(call->s->client, ws, id, 0, &full) < 0)
		return mcp_fail_client(call, "reading the cancelled run");
	return finished_result(call, full, ws);
}

/* The n bytes at p as text when they are UTF-8 (a character cut at the end is left for the
 * next read), else base64 from mcp_stream_json's encoder. */
static int chunk_result(struct mcp_call *call, const char *stream, uint64_t offset, const char *p,
			size_t n, uint64_t total, uint64_t next_kept)
{
	struct mcp_stream_view v = { .name = stream, .head = p, .head_len = n, .total = n };
	_cleanup_free_ char *more = NULL;
	json_t *o;
	size_t k = n;

	while (k > 0 && n - k < 3 && !mcp_utf8_valid(p, k))
		k--;
	if (k > 0 && mcp_utf8_valid(p, k))
		v.head_len = v.total = n = k;
	o = mcp_stream_json(&v, n ? n : 2, "", "", &more);
	if (!o)
		return mcp_fail(call, "out of memory");
	call->result = json_pack(
		"{s:s,s:I,s:I,s:I,s:O,s:O,s:o}", "stream", stream, "offset", (json_int_t)offset,
		"bytes", (json_int_t)n, "totalBytes", (json_int_t)total, "encoding",
		json_object_get(o, "encoding"), "data", json_object_get(o, "head"), "next",
		offset + n < total ?
			json_integer(
				(json_int_t)(offset + n < next_kept ? offset + n : next_kept)) :
			json_null());
	json_decref(o);
	return call->result ? 0 : mcp_fail(call, "out of memory");
}

int mcp_tool_run_output(struct mcp_call *call)
{
	static const char *const known[] = { "workspaceId", "runId",	"stream",
					     "offset",	    "maxBytes", NULL };
	_cleanup_json_ json_t *run = NULL;
	_cleanup_free_ char *head = NULL, *tail = NULL, *key = NULL;
	const char *ws, *id, *stream = "stdout";
	uint64_t offset = 0, max = RUN_OUTPUT_DEFAULT, total, tail_from;
	size_t hl = 0, tl = 0;
	enum station_stream st;

	if (mcp_args_check(call, known) < 0 || mcp_arg_string(call, "stream", false, &stream) < 0 ||
	    mcp_arg_u64(call, "offset", 0, INT64_MAX, &offset) < 0 ||
	    mcp_arg_u64(call, "maxBytes", 1, RUN_OUTPUT_MAX, &max) < 0)
		return -1;
	if (strcmp(stream, "stdout") != 0 && strcmp(stream, "stderr") != 0)
		return mcp_fail(call, "argument 'stream' must be \"stdout\" or \"stderr\"");
	st = strcmp(stream, "stdout") == 0 ? STATION_STREAM_STDOUT : STATION_STREAM_STDERR;
	if (run_arg(call, &ws, &id, &run) < 0)
		return -1;
	if (!station_run_is_terminal(run))
		return mcp_fail(call, "run '%s' is still running: run_wait shows its output so far",
				id);
	if (station_run_output(run, st, false, &head, &hl) < 0 ||
	    station_run_output(run, st, true, &tail, &tl) < 0 ||
	    asprintf(&key, "%sBytes", stream) < 0)
		return mcp_fail(call, "the controller sent malformed output");
	total = (uint64_t)json_integer_value(json_object_get(run, key));
	if (total < hl + tl)
		total = hl + tl;
	tail_from = total - tl;
	if (offset < hl)
		return chunk_result(call, stream, offset, head + offset,
				    (size_t)MIN(max, hl - offset), total, tl ? tail_from : total);
	if (offset >= total)
		return chunk_result(call, stream, offset, "", 0, total, total);
	if (tl && offset >= tail_from)
		return chunk_result(call, stream, offset, tail + (offset - tail_from),
				    (size_t)MIN(max, total - offset), total, total);
	return mcp_fail(
		call,
		"bytes %zu to %" PRIu64 " of %s were not kept (the run kept its first %zu and "
		"last %zu bytes; exec's maxOutputBytes keeps more): read from offset %" PRIu64
		" on",
		hl, tail_from, stream, hl, tl, tail_from);
}
