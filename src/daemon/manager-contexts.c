/* SPDX-License-Identifier: MIT */
/* Code contexts: a kernel supervised by the workspace's agent as a hidden service, and cells run
 * as runs of the language's kernel program (manager-contexts.h). The controller's only new
 * parsing of sandbox output is one bounded JSON result per cell, read through the agent's file
 * read (as the sandbox's user, beneath its root, regular files only) and validated here. */

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "basic/cleanup.h"
#include "basic/json-util.h"
#include "basic/list.h"
#include "basic/log.h"
#include "basic/util.h"
#include "cgroup/cgroup.h"
#include "event/event.h"
#include "event/work.h"
#include "manager-contexts.h"
#include "manager-internal.h"
#include "proto/file-proto.h"

#define CONTEXT_KEEP_CELLS 1000
#define CONTEXT_OOM_REASON "the kernel was killed: out of memory (restart the context)"
/* A result that could not be read yet (the agent away): tried again this often, this long. */
#define CONTEXT_RETRY_MS 500
#define CONTEXT_RETRY_MAX 240
#define CONTEXT_MAX_RESULTS 1000
#define CONTEXT_MAX_MIMES 32
#define CONTEXT_MAX_TRACEBACK 1000
#define CONTEXT_MAX_TEXT (64u << 10) /* error name, value and each traceback line */
/* A cell whose kernel died waits this long for the agent's report of the kernel's end (whether
 * it was OOM-killed): the kernel's service ends just after the cell's exec saw it go. */
#define CONTEXT_KERNEL_END_WAIT_MS 5000

struct kernel_lang {
	const char *name;
	const char *program;
	const char *package; /* what kernel_missing names */
};

static const struct kernel_lang langs[] = {
	{ "python", "station-kernel-python", "python3-ipykernel" },
	{ "javascript", "station-kernel-js", "nodejs" },
};

struct context_op {
	struct context *ctx;
	context_done_fn fn;
	void *userdata;
};

struct execution_waiter {
	struct execution_waiter *prev, *next;
	struct cell *cell;
	void (*fn)(void *userdata);
	void *userdata;
};

/* A cell's result parsed off the loop (up to CONTEXT_RESULT_MAX_BYTES of JSON the sandbox
 * wrote: 0.4 s of a core at 14 MiB). The job owns its bytes and its outputs; c is NULL once
 * the cell went meanwhile. */
struct result_job {
	struct cell *c;
	char *buf;
	size_t len;
	char *status, *results_json, *error_json;
	int64_t execution_count; /* -1: none */
	bool dead;		 /* the kernel went away */
};

/* The one cell a context runs at a time: the readiness probe (number 0, not stored) or one the
 * API asked for. */
struct cell {
	struct context *ctx;
	struct cell_row row;
	struct context_op *op; /* the execute or the create/restart waiting */
	struct file_session *file;
	struct run_waiter *run_waiter;
	struct execution_waiter *waiters;
	char *code;
	size_t code_len;
	bool code_sent;
	bool interrupt_pending; /* interrupted while its code was being written: once its run starts */
	uint64_t timeout_ms;
	uint64_t oom_before;
	bool oom_known;
	uint64_t kernel_attempt; /* the kernel's service attempt as the cell began; 0: unknown */
	struct event_source *kernel_wait; /* dead: waiting for the kernel's end report */
	struct usage_waiter *usage;	  /* the agent's usage report asked (start or end) */
	int64_t kernel_cpu_start_ms;	  /* the kernel's CPU time as the cell began; -1: unknown */
	int64_t run_exit;		  /* the run's exit code, -1: none */
	char *buf;			  /* the result's bytes */
	size_t len;
	struct result_job *parse; /* the result being parsed off the loop */
	struct event_source *retry;
	unsigned retries;
};

struct context {
	struct context *prev, *next; /* in ws->contexts */
	struct workspace *ws;
	struct context_row row;
	const struct kernel_lang *lang;
	char *dir; /* in the sandbox's view */
	struct cell *cell;
	struct service_attempt_row kernel_end; /* the newest end of its kernel the agent reported
						  (number 0: none); no strings kept */
};

static const struct kernel_lang *lang_find(const char *name)
{
	for (size_t i = 0; i < ELEMENTSOF(langs); i++)
		if (name && strcmp(langs[i].name, name) == 0)
			return &langs[i];
	return NULL;
}

static char *program_path(struct workspace *ws, const struct kernel_lang *l)
{
	char *s = NULL;

	if (strcmp(ws->row.adapter, "container") == 0)
		return asprintf(&s, "/usr/local/bin/%s", l->program) < 0 ? NULL : s;
	return asprintf(&s, "%s/%s", ws->m->cfg.kernel_dir ? ws->m->cfg.kernel_dir : "",
			l->program) < 0 ?
		       NULL :
		       s;
}

static bool program_installed(struct manager *m, const struct kernel_lang *l)
{
	char path[4096];

	if (!m->cfg.kernel_dir)
		return false;
	snprintf(path, sizeof path, "%s/%s", m->cfg.kernel_dir, l->program);
	return access(path, R_OK) == 0;
}

/* ---- the context's books ------------------------------------------------------------------ */

static void context_save(struct context *ctx)
{
	int r = store_context_update(ctx->ws->m->store, &ctx->row);

	if (r < 0)
		log_error("cannot record context", "workspace", ctx->ws->row.id, "context",
			  ctx->row.id, "error", strerror(-r), NULL);
}

static void context_set_state(struct context *ctx, const char *state, const char *reason)
{
	(void)free_and_strdup(&ctx->row.state, state);
	(void)free_and_strdup(&ctx->row.reason, reason);
	context_save(ctx);
}

static void op_finish(struct context_op *op, int r, json_t *result, const struct station_error *e)
{
	if (op && op->fn)
		op->fn(op->userdata, r, result, e);
	else
		json_decref(result);
	free(op);
}

void manager_context_op_forget(struct context_op *op)
{
	if (op)
		op->fn = NULL;
}

static void waiters_fire(struct cell *c)
{
	while (c->waiters) {
		struct execution_waiter *w = c->waiters;

		LIST_REMOVE(&c->waiters, w);
		w->fn(w->userdata);
		free(w);
	}
}

static void cell_free(struct cell *c)
{
	if (!c)
		return;
	manager_file_close(c->file);
	if (c->run_waiter)
		manager_run_waiter_cancel(c->run_waiter);
	event_source_free(c->retry);
	event_source_free(c->kernel_wait);
	manager_usage_cancel(c->usage);
	if (c->parse)
		c->parse->c = NULL; /* its job finishes on its own and frees itself */
	waiters_fire(c);
	cell_row_free(&c->row);
	free(c->code);
	free(c->buf);
	free(c);
}

/* The cell is over for the context (recorded, or given up): the next may come. */
static void cell_end(struct cell *c)
{
	struct context *ctx = c->ctx;

	if (ctx->cell == c)
		ctx->cell = NULL;
	cell_free(c);
}

static void context_free(struct context *ctx)
{
	if (!ctx)
		return;
	if (ctx->cell) {
		struct station_error e;
		station_error_set(&e, -ECANCELED, NULL, "the context went away");
		op_finish(TAKE_PTR(ctx->cell->op), -ECANCELED, NULL, &e);
		cell_free(TAKE_PTR(ctx->cell));
	}
	context_row_free(&ctx->row);
	free(ctx->dir);
	free(ctx);
}

void contexts_free_all(struct workspace *ws)
{
	while (ws->contexts) {
		struct context *ctx = ws->contexts;

		LIST_REMOVE(&ws->contexts, ctx);
		context_free(ctx);
	}
}

static size_t contexts_count(const struct workspace *ws)
{
	size_t n = 0;

	for (const struct context *c = ws->contexts; c; c = c->next)
		n++;
	return n;
}

static int context_dir_set(struct context *ctx)
{
	if (asprintf(&ctx->dir, "%s/.station/contexts/%s", ctx->ws->home, ctx->row.id) < 0) {
		ctx->dir = NULL;
		return -ENOMEM;
	}
	return 0;
}

/* The state a client sees: a kernel whose service no longer runs is dead. */
static const char *context_state(const struct context *ctx, const char **ret_reason)
{
	*ret_reason = ctx->row.reason;
	if (strcmp(ctx->row.state, "dead") != 0 && !ctx->cell &&
	    !service_is_active(ctx->ws, ctx->row.service_name)) {
		*ret_reason = "the kernel is not running";
		return "dead";
	}
	return ctx->row.state;
}

static json_t *u64_json(uint64_t v)
{
	return json_integer(v > (uint64_t)INT64_MAX ? INT64_MAX : (json_int_t)v);
}

/* cpuMs and memoryBytes: a live kernel's from the agent's usage report (its service attempt's
 * cgroup: CPU time so far, memory charged now), a dead one's CPU time from the report of its end
 * (and no memory); null when neither says. */
static void context_usage_json(const struct context *ctx, const char *state, const json_t *usage,
			       json_t *o)
{
	json_t *cpu = json_null(), *mem = json_null(), *e;
	size_t i;

	json_array_foreach(json_object_get(usage, "services"), i, e) {
		const char *name = json_string_value(json_object_get(e, "name"));
		if (strcmp(state, "dead") == 0 || !name || strcmp(name, ctx->row.service_name) != 0)
			continue;
		cpu = json_incref(json_object_get(e, "cpuMs"));
		mem = json_incref(json_object_get(e, "memoryBytes"));
		break;
	}
	if (strcmp(state, "dead") == 0 && ctx->kernel_end.number && ctx->kernel_end.has_stats) {
		cpu = u64_json(ctx->kernel_end.cpu_usec / 1000);
		mem = json_integer(0);
	}
	json_object_set_new(o, "cpuMs", cpu ? cpu : json_null());
	json_object_set_new(o, "memoryBytes", mem ? mem : json_null());
}

static json_t *context_to_json(const struct context *ctx, const json_t *usage)
{
	const char *reason;
	const char *state = context_state(ctx, &reason);
	json_t *o = json_object();

	if (!o)
		return NULL;
	json_object_set_new(o, "id", json_string(ctx->row.id));
	json_object_set_new(o, "workspaceId", json_string(ctx->ws->row.id));
	json_object_set_new(o, "language", json_string(ctx->row.language));
	json_object_set_new(o, "state", json_string(state));
	json_object_set_new(o, "reason", reason ? json_string(reason) : json_null());
	json_object_set_new(o, "cwd", ctx->row.cwd ? json_string(ctx->row.cwd) : json_null());
	json_object_set_new(o, "executionCount",
			    json_integer((json_int_t)ctx->row.execution_count));
	json_set_time(o, "createdAt", ctx->row.created_at);
	context_usage_json(ctx, state, usage, o);
	return o;
}

static int context_lookup(struct manager *m, const char *ws_id, const char *cid,
			  struct context **ret, struct station_error *e)
{
	struct workspace *ws = NULL;
	int r = workspace_lookup(m, ws_id, &ws, e);

	if (r < 0)
		return r;
	for (struct context *c = ws->contexts; c; c = c->next)
		if (strcmp(c->row.id, cid) == 0) {
			*ret = c;
			return 0;
		}
	return station_error_set(e, -ENOENT, NULL, "context \"%s\" not found in workspace \"%s\"",
				 cid, ws_id);
}

/* ---- executions as JSON ------------------------------------------------------------------- */

static json_t *opt_i64_json(int64_t v)
{
	return v < 0 ? json_null() : json_integer(v);
}

static const char *const run_fields[] = { "stdout",	"stdoutTail",	  "stderr",
					  "stderrTail", "stdoutBytes",	  "stderrBytes",
					  "truncated",	"encoding",	  "durationMs",
					  "cpuMs",	"peakMemoryBytes" };

static json_t *cell_to_json(struct context *ctx, const struct cell_row *r)
{
	struct station_error e = {};
	json_t *o = json_object(), *run = NULL;

	if (!o)
		return NULL;
	(void)manager_run_get(ctx->ws->m, ctx->ws->row.id, r->run_id, &run, &e);
	json_object_set_new(o, "id", json_string(r->id));
	json_object_set_new(o, "contextId", json_string(ctx->row.id));
	json_object_set_new(o, "runId", json_string(r->run_id));
	json_object_set_new(o, "status", json_string(r->status));
	json_object_set_new(o, "executionCount",
			    r->execution_count >= 0 ? json_integer(r->execution_count) :
						      json_null());
	for (size_t i = 0; i < ELEMENTSOF(run_fields); i++) {
		json_t *v = json_object_get(run, run_fields[i]);
		if (v)
			json_object_set(o, run_fields[i], v);
	}
	json_t *results = r->results_json ? json_loads(r->results_json, 0, NULL) : NULL;
	json_object_set_new(o, "results", results ? results : json_array());
	json_t *error = r->error_json ? json_loads(r->error_json, 0, NULL) : NULL;
	json_object_set_new(o, "error", error ? error : json_null());
	json_set_time(o, "createdAt", r->created_at);
	json_set_time(o, "endedAt", r->ended_at);
	json_object_set_new(o, "kernelCpuMs", opt_i64_json(r->kernel_cpu_ms));
	json_object_set_new(o, "kernelMemoryBytes", opt_i64_json(r->kernel_memory_bytes));
	if (strcmp(r->status, "running") == 0)
		json_object_set_new(o, "durationMs", json_null());
	else if (!json_object_get(o, "durationMs") ||
		 json_is_null(json_object_get(o, "durationMs")))
		json_object_set_new(
			o, "durationMs",
			json_integer((json_int_t)((r->ended_at - r->created_at) / 1000)));
	json_decref(run);
	return o;
}

/* ---- the result: hostile input ------------------------------------------------------------ */

static json_t *text_bounded(json_t *v, size_t max)
{
	const char *s = json_string_value(v);
	size_t n = s ? json_string_length(v) : 0;

	if (!s)
		return json_string("");
	if (n > max) { /* a UTF-8 sequence is not cut */
		n = max;
		while (n > 0 && ((unsigned char)s[n] & 0xc0) == 0x80)
			n--;
	}
	return json_stringn_nocheck(s, n);
}

/* Whether a MIME type's value may be JSON other than a string: application/json, ...+json. */
static bool mime_is_json(const char *mime)
{
	size_t n = strlen(mime);
	return strcmp(mime, "application/json") == 0 ||
	       (n > 5 && strcmp(mime + n - 5, "+json") == 0);
}

/* One result's MIME bundle: string values (a text one cut at the bound, any other over it
 * dropped), a JSON type's other values kept when their text is within the bound (any other
 * type's are dropped: a client decodes image/png as base64 text); the rest counted. */
static json_t *mime_bundle(json_t *data, bool *truncated, uint64_t *omitted)
{
	json_t *out = json_object();
	const char *mime;
	json_t *v;
	size_t n = 0;

	json_object_foreach(data, mime, v) {
		if (n++ >= CONTEXT_MAX_MIMES || strlen(mime) > 127 || !strchr(mime, '/')) {
			*truncated = true;
			continue;
		}
		if (json_is_string(v)) {
			size_t len = json_string_length(v);
			if (len <= CONTEXT_MIME_MAX_BYTES) {
				json_object_set(out, mime, v);
				continue;
			}
			*truncated = true;
			*omitted += len;
			if (strncmp(mime, "text/", 5) == 0) {
				json_object_set_new(out, mime,
						    text_bounded(v, CONTEXT_MIME_MAX_BYTES));
				*omitted -= CONTEXT_MIME_MAX_BYTES;
			}
			continue;
		}
		_cleanup_free_ char *text = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
		if (text && strlen(text) <= CONTEXT_MIME_MAX_BYTES && mime_is_json(mime)) {
			json_object_set(out, mime, v);
			continue;
		}
		*truncated = true;
		*omitted += text ? strlen(text) : 0;
	}
	return out;
}

static json_t *results_validate(json_t *in)
{
	json_t *out = json_array(), *item;
	size_t i;

	json_array_foreach(in, i, item) {
		const char *type = json_string_value(json_object_get(item, "type"));
		json_t *data = json_object_get(item, "data");
		bool truncated = false;
		uint64_t omitted = 0;

		if (i >= CONTEXT_MAX_RESULTS)
			break;
		if (!type ||
		    (strcmp(type, "execute_result") != 0 && strcmp(type, "display_data") != 0) ||
		    !json_is_object(data))
			continue;
		json_t *r = json_pack("{s:s, s:o}", "type", type, "data",
				      mime_bundle(data, &truncated, &omitted));
		json_object_set_new(r, "truncated", json_boolean(truncated));
		if (omitted)
			json_object_set_new(r, "omittedBytes", json_integer((json_int_t)omitted));
		json_array_append_new(out, r);
	}
	return out;
}

static json_t *error_validate(json_t *in)
{
	json_t *tb = json_array(), *line;
	size_t i;

	json_array_foreach(json_object_get(in, "traceback"), i, line) {
		if (i >= CONTEXT_MAX_TRACEBACK)
			break;
		json_array_append_new(tb, text_bounded(line, CONTEXT_MAX_TEXT));
	}
	return json_pack("{s:o, s:o, s:o}", "name",
			 text_bounded(json_object_get(in, "name"), CONTEXT_MAX_TEXT), "value",
			 text_bounded(json_object_get(in, "value"), CONTEXT_MAX_TEXT), "traceback",
			 tb);
}

static json_t *error_new(const char *name, const char *value)
{
	return json_pack("{s:s, s:s, s:[]}", "name", name, "value", value, "traceback");
}

static const char *const result_statuses[] = { "ok", "error", "timed_out", "interrupted", "dead" };

/* The result's bytes into j's outputs (status, count, results, error). Anything malformed is
 * an error result naming why, never trusted further. Touches nothing but j. */
static void result_parse(struct result_job *j)
{
	json_error_t jerr = { .text = "no result (out of memory)" };
	_cleanup_json_ json_t *doc =
		j->buf ? json_loadb(j->buf, j->len, JSON_REJECT_DUPLICATES, &jerr) : NULL;
	const char *status = json_string_value(json_object_get(doc, "status"));
	json_t *count = json_object_get(doc, "executionCount");
	json_t *results = json_object_get(doc, "results");
	json_t *error = json_object_get(doc, "error");
	_cleanup_json_ json_t *err = NULL, *res = NULL;
	bool known = false;

	for (size_t i = 0; status && i < ELEMENTSOF(result_statuses); i++)
		known = known || strcmp(status, result_statuses[i]) == 0;
	j->dead = false;
	j->execution_count = -1;
	if (!json_is_object(doc) || !known || (results && !json_is_array(results)) ||
	    (error && !json_is_null(error) && !json_is_object(error)) ||
	    (count && !json_is_null(count) &&
	     (!json_is_integer(count) || json_integer_value(count) < 0))) {
		char why[256];
		snprintf(why, sizeof why, "the kernel's result is not valid: %s",
			 !doc ? jerr.text : "fields of the wrong shape");
		err = error_new("ResultInvalid", why);
		j->status = strdup("error");
	} else {
		j->dead = strcmp(status, "dead") == 0;
		j->status = strdup(j->dead ? "error" : status);
		if (json_is_integer(count))
			j->execution_count = json_integer_value(count);
		res = results_validate(results);
		if (json_is_object(error))
			err = error_validate(error);
	}
	j->results_json = res ? json_dumps(res, JSON_COMPACT) : strdup("[]");
	j->error_json = err ? json_dumps(err, JSON_COMPACT) : NULL;
}

static uint64_t workspace_oom_kills(struct workspace *ws, bool *known)
{
	struct cgroup_stats st = {};

	*known = ws->cgroup && cgroup_get_stats(ws->cgroup, &st) >= 0;
	return st.oom_kills;
}

/* The agent reported the end of the kernel c ran in. */
static bool cell_kernel_end_known(const struct cell *c)
{
	const struct service_attempt_row *k = &c->ctx->kernel_end;

	return k->number && (!c->kernel_attempt || k->number >= c->kernel_attempt);
}

/* Whether the kernel that died during c was killed for memory: the agent's report of its end
 * read the OOM kill in the kernel's own group (on cgroup v1 a kill is counted there only); from
 * an agent that does not say, the workspace's group counted an OOM kill since the cell began
 * (cgroup v2 counts a child's up the tree; on v1 such a kernel's death is KernelDied). */
static bool cell_oom(struct cell *c)
{
	bool known = false;
	uint64_t ooms;

	if (cell_kernel_end_known(c) && c->ctx->kernel_end.has_stats)
		return c->ctx->kernel_end.oom_killed;
	ooms = workspace_oom_kills(c->ctx->ws, &known);
	return known && c->oom_known && ooms > c->oom_before;
}

/* ---- a cell's steps: code written, run, result read --------------------------------------- */

static void cell_recorded(struct cell *c);
static void result_read(struct cell *c);

static void probe_done(struct cell *c, bool dead)
{
	struct context *ctx = c->ctx;
	struct station_error e = {};
	struct context_op *op = TAKE_PTR(c->op);
	bool ok = !dead && strcmp(c->row.status, "ok") == 0;

	if (ok) {
		context_set_state(ctx, "idle", NULL);
		cell_end(c);
		op_finish(op, 0, context_to_json(ctx, NULL), NULL);
		return;
	}
	if (c->run_exit == 3 || c->run_exit == 127) {
		station_error_set(&e, CONTEXT_EMISSING, "language",
				  "the workspace's image has no %s kernel (install the Debian "
				  "package %s)",
				  ctx->lang->name, ctx->lang->package);
	} else {
		_cleanup_json_ json_t *err =
			c->row.error_json ? json_loads(c->row.error_json, 0, NULL) : NULL;
		_cleanup_json_ json_t *svc = NULL;
		const char *tail = "";
		(void)manager_service_get(ctx->ws->m, ctx->ws->row.id, ctx->row.service_name, &svc,
					  NULL);
		json_t *atts = json_object_get(svc, "attempts");
		json_t *last = json_array_get(atts, json_array_size(atts) - 1);
		const char *s = json_string_value(json_object_get(last, "stderrTail"));
		if (!s)
			s = json_string_value(json_object_get(last, "stderr"));
		if (s)
			tail = strlen(s) > 400 ? s + strlen(s) - 400 : s;
		station_error_set(&e, CONTEXT_ETIMEOUT, NULL,
				  "the %s kernel did not answer within %d s (%s); its stderr: %s",
				  ctx->lang->name, CONTEXT_START_TIMEOUT_MS / 1000,
				  json_string_value(json_object_get(err, "value")) ?: "no result",
				  tail);
	}
	context_set_state(ctx, "dead", e.message);
	cell_end(c);
	op_finish(op, e.err, NULL, &e);
}

static void cell_record(struct cell *c, bool dead);

static int on_kernel_wait(struct event_source *s, uint64_t now, void *userdata)
{
	struct cell *c = userdata;

	event_source_free(TAKE_PTR(c->kernel_wait));
	log_warn("no report of the kernel's end: OOM judged without it", "workspace",
		 c->ctx->ws->row.id, "context", c->ctx->row.id, NULL);
	cell_record(c, true);
	return 0;
}

void contexts_on_kernel_end(struct workspace *ws, const char *name,
			    const struct service_attempt_row *a)
{
	struct context *ctx = ws->contexts;

	while (ctx && strcmp(ctx->row.service_name, name) != 0)
		ctx = ctx->next;
	if (!ctx || a->number < ctx->kernel_end.number)
		return;
	ctx->kernel_end = (struct service_attempt_row){
		.number = a->number,
		.has_stats = a->has_stats,
		.oom_killed = a->oom_killed,
		.cpu_usec = a->cpu_usec,
		.peak_memory = a->peak_memory,
	};
	if (ctx->cell && ctx->cell->kernel_wait && cell_kernel_end_known(ctx->cell)) {
		event_source_free(TAKE_PTR(ctx->cell->kernel_wait));
		cell_record(ctx->cell, true);
	}
}

static void result_job_free(struct result_job *j)
{
	free(j->buf);
	free(j->status);
	free(j->results_json);
	free(j->error_json);
	free(j);
}

static void result_job_run(void *userdata)
{
	result_parse(userdata);
}

static void cell_parsed(struct cell *c, bool dead);

static void result_job_done(void *userdata, bool cancelled)
{
	struct result_job *j = userdata;
	struct cell *c = j->c;

	if (c)
		c->parse = NULL;
	if (!c || cancelled) {
		/* gone, or the controller is stopping: a cell left running is read again at the
		 * next start */
		result_job_free(j);
		return;
	}
	if (j->status) {
		free(c->row.status);
		c->row.status = TAKE_PTR(j->status);
	}
	if (j->execution_count >= 0)
		c->row.execution_count = j->execution_count;
	free(c->row.results_json);
	c->row.results_json = TAKE_PTR(j->results_json);
	free(c->row.error_json);
	c->row.error_json = TAKE_PTR(j->error_json);
	bool dead = j->dead;
	result_job_free(j);
	cell_parsed(c, dead);
}

/* The result read: parsed by a worker, then cell_parsed() on the loop. */
static void cell_finish(struct cell *c)
{
	struct result_job *j = calloc(1, sizeof(*j));

	if (!j) {
		log_error("cannot record cell", "workspace", c->ctx->ws->row.id, "error",
			  strerror(ENOMEM), NULL);
		return;
	}
	j->c = c;
	j->buf = TAKE_PTR(c->buf);
	j->len = j->buf ? c->len : 0;
	c->len = 0;
	c->parse = j;
	if (event_work_queue(c->ctx->ws->m->work, result_job_run, result_job_done, j) < 0) {
		result_job_run(j); /* the pool is going: at once */
		result_job_done(j, false);
	}
}

static void cell_parsed(struct cell *c, bool dead)
{
	if (c->row.number == 0)
		return probe_done(c, dead);
	/* a dead kernel: its end's report says whether it was OOM, bounded wait for it */
	if (dead && !cell_kernel_end_known(c) &&
	    event_add_timer(c->ctx->ws->m->loop, &c->kernel_wait,
			    now_usec() + CONTEXT_KERNEL_END_WAIT_MS * 1000ull, on_kernel_wait,
			    c) >= 0)
		return;
	cell_record(c, dead);
}

static void cell_record(struct cell *c, bool dead)
{
	struct context *ctx = c->ctx;
	struct workspace *ws = ctx->ws;

	if (dead) {
		bool oom = cell_oom(c);
		_cleanup_json_ json_t *err =
			oom ? error_new("OOMKilled",
					"the kernel was killed for using more memory than the "
					"workspace's limit") :
			      error_new("KernelDied", "the kernel exited during the cell");
		free(c->row.error_json);
		c->row.error_json = json_dumps(err, JSON_COMPACT);
		context_set_state(ctx, "dead", oom ? CONTEXT_OOM_REASON : "the kernel exited");
		const struct service_attempt_row *k = &ctx->kernel_end;
		if (c->row.kernel_cpu_ms < 0 && c->kernel_cpu_start_ms >= 0 &&
		    cell_kernel_end_known(c) && k->has_stats && k->number == c->kernel_attempt &&
		    (int64_t)(k->cpu_usec / 1000) >= c->kernel_cpu_start_ms)
			c->row.kernel_cpu_ms =
				(int64_t)(k->cpu_usec / 1000) - c->kernel_cpu_start_ms;
	}
	c->row.ended_at = realtime_usec();
	int r = store_cell_finish(ws->m->store, &c->row);
	if (r < 0)
		log_error("cannot record cell", "workspace", ws->row.id, "context", ctx->row.id,
			  "error", strerror(-r), NULL);
	if (c->row.execution_count >= 0 &&
	    (uint64_t)c->row.execution_count > ctx->row.execution_count)
		ctx->row.execution_count = (uint64_t)c->row.execution_count;
	if (!dead)
		(void)free_and_strdup(&ctx->row.state, "idle");
	context_save(ctx);
	log_info("cell recorded", "workspace", ws->row.id, "context", ctx->row.id, "status",
		 c->row.status, NULL);
	cell_recorded(c);
}

static void cell_recorded(struct cell *c)
{
	cell_end(c);
}

static void on_result_data(void *userdata, const uint8_t *data, size_t n)
{
	struct cell *c = userdata;

	if (c->len + n > CONTEXT_RESULT_MAX_BYTES || !c->buf) {
		free(TAKE_PTR(c->buf));
		c->len = SIZE_MAX / 2;
		return;
	}
	memcpy(c->buf + c->len, data, n);
	c->len += n;
}

static int on_retry(struct event_source *s, uint64_t now, void *userdata)
{
	struct cell *c = userdata;

	event_source_free(TAKE_PTR(c->retry));
	result_read(c);
	return 0;
}

/* The agent could not be asked (not connected yet, busy): again later, a bounded number of
 * times. */
static bool result_retry(struct cell *c, int r)
{
	if ((r != -ENOTCONN && r != -EBUSY && r != -EAGAIN) || c->retries++ >= CONTEXT_RETRY_MAX)
		return false;
	return event_add_timer(c->ctx->ws->m->loop, &c->retry,
			       now_usec() + CONTEXT_RETRY_MS * 1000ull, on_retry, c) >= 0;
}

static void on_result_end(void *userdata, int r, bool flag, const struct station_error *e)
{
	struct cell *c = userdata;

	c->file = NULL;
	if (r < 0 && result_retry(c, r))
		return;
	if (r < 0 || !c->buf) {
		char why[600];
		_cleanup_json_ json_t *doc = NULL;
		snprintf(why, sizeof why, "the kernel's result could not be read: %s",
			 !c->buf && r >= 0 ? "larger than 16 MiB" :
			 e		   ? e->message :
					     strerror(-r));
		free(TAKE_PTR(c->buf));
		c->len = 0;
		doc = json_pack("{s:s, s:o}", "status", "error", "error",
				error_new("ResultUnreadable", why));
		c->buf = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
		c->len = c->buf ? strlen(c->buf) : 0;
	}
	cell_finish(c);
}

static const struct file_session_ops result_ops = {
	.data = on_result_data,
	.end = on_result_end,
};

static void result_read(struct cell *c)
{
	struct context *ctx = c->ctx;
	struct station_error e = {};
	char path[4096];
	int r;

	snprintf(path, sizeof path, "%s/cells/%" PRIu64 "/result.json", ctx->dir, c->row.number);
	free(c->buf);
	c->buf = malloc(CONTEXT_RESULT_MAX_BYTES);
	c->len = 0;
	struct file_request req = {
		.op = FILE_OP_READ,
		.path = path,
		.has_max_bytes = true,
		.max_bytes = CONTEXT_RESULT_MAX_BYTES,
		.field = "path",
	};
	r = c->buf ? manager_file_open(ctx->ws->m, ctx->ws->row.id, &req, &result_ops, c, &c->file,
				       &e) :
		     -ENOMEM;
	if (r < 0)
		on_result_end(c, r, false, &e);
}

/* The kernel's cpuMs and memoryBytes in the agent's usage report (its service attempt's
 * cgroup); false when the report does not give them (a kernel gone, an older agent). */
static bool kernel_usage(const struct context *ctx, const json_t *usage, int64_t *ret_cpu_ms,
			 int64_t *ret_memory)
{
	json_t *e;
	size_t i;

	json_array_foreach(json_object_get(usage, "services"), i, e) {
		const char *name = json_string_value(json_object_get(e, "name"));
		json_t *cpu = json_object_get(e, "cpuMs"), *mem = json_object_get(e, "memoryBytes");
		if (!name || strcmp(name, ctx->row.service_name) != 0)
			continue;
		if (!json_is_integer(cpu) || !json_is_integer(mem))
			return false;
		*ret_cpu_ms = json_integer_value(cpu);
		*ret_memory = json_integer_value(mem);
		return true;
	}
	return false;
}

static void on_start_usage(void *userdata, json_t *usage, const struct station_error *e)
{
	struct cell *c = userdata;
	int64_t cpu, mem;

	c->usage = NULL; /* gone once called */
	if (kernel_usage(c->ctx, usage, &cpu, &mem))
		c->kernel_cpu_start_ms = cpu;
	json_decref(usage);
}

/* The cell's kernelCpuMs (the difference from the start's reading) and kernelMemoryBytes. */
static void on_end_usage(void *userdata, json_t *usage, const struct station_error *e)
{
	struct cell *c = userdata;
	int64_t cpu, mem;

	c->usage = NULL;
	if (kernel_usage(c->ctx, usage, &cpu, &mem)) {
		c->row.kernel_memory_bytes = mem;
		if (c->kernel_cpu_start_ms >= 0 && cpu >= c->kernel_cpu_start_ms)
			c->row.kernel_cpu_ms = cpu - c->kernel_cpu_start_ms;
	}
	json_decref(usage);
	result_read(c);
}

/* The cell's run ended: the kernel's use read from the agent's usage report (asynchronously,
 * bounded by its timeout), then the result. A start reading still unanswered is given up. */
static void cell_usage_end(struct cell *c)
{
	struct context *ctx = c->ctx;

	manager_usage_cancel(TAKE_PTR(c->usage));
	if (c->row.number == 0 ||
	    manager_usage_get(ctx->ws->m, ctx->ws->row.id, on_end_usage, c, &c->usage, NULL) < 0)
		result_read(c);
}

static void on_run_end(void *userdata, json_t *run)
{
	struct cell *c = userdata;
	_cleanup_json_ json_t *fresh = NULL;
	struct context *ctx = c->ctx;

	c->run_waiter = NULL;
	if (!run) {
		(void)manager_run_get(ctx->ws->m, ctx->ws->row.id, c->row.run_id, &fresh, NULL);
		run = fresh;
	}
	json_t *code = json_object_get(run, "exitCode");
	c->run_exit = json_is_integer(code) ? json_integer_value(code) : -1;
	cell_usage_end(c);
}

static int run_start(struct cell *c, struct station_error *e)
{
	struct context *ctx = c->ctx;
	struct workspace *ws = ctx->ws;
	_cleanup_free_ char *prog = program_path(ws, ctx->lang), *cmd = NULL;
	_cleanup_json_ json_t *run = NULL;
	uint64_t timeout = c->timeout_ms;
	int r;

	if (!prog || asprintf(&cmd, "exec '%s' exec '%s' %" PRIu64 " %" PRIu64, prog, ctx->dir,
			      c->row.number, timeout) < 0)
		return station_error_set(e, -ENOMEM, NULL, "out of memory");
	struct run_spec spec = {
		.command = cmd,
		.timeout_ms = timeout + 10000,
	};
	c->oom_before = workspace_oom_kills(ws, &c->oom_known);
	c->kernel_attempt = service_current_attempt(ws, ctx->row.service_name);
	/* the kernel's CPU time as the cell begins: asked before the run, the agent answers its
	 * frames in order, so the reading precedes the exec client */
	c->kernel_cpu_start_ms = -1;
	if (c->row.number > 0)
		(void)manager_usage_get(ws->m, ws->row.id, on_start_usage, c, &c->usage, NULL);
	r = manager_run_start(ws->m, ws->row.id, &spec, &run, e);
	if (r < 0)
		return r;
	free(c->row.run_id);
	c->row.run_id = strdup(json_string_value(json_object_get(run, "id")) ?: "");
	if (!c->row.run_id)
		return station_error_set(e, -ENOMEM, NULL, "out of memory");
	r = manager_run_wait(ws->m, ws->row.id, c->row.run_id, on_run_end, c, &c->run_waiter, e);
	if (r == 1) /* ended already: read it from the loop */
		r = event_add_timer(ws->m->loop, &c->retry, now_usec(), on_retry, c);
	return r < 0 ? r : 0;
}

/* ---- executing ------------------------------------------------------------------------------ */

static int interrupt_start(struct context *ctx, struct station_error *e);

static void cell_started(struct cell *c)
{
	struct context *ctx = c->ctx;
	struct station_error e = {};
	int r = run_start(c, &e);

	if (r >= 0) {
		c->row.created_at = realtime_usec();
		r = store_cell_insert(ctx->ws->m->store, &c->row, CONTEXT_KEEP_CELLS);
		if (r < 0)
			station_error_set(&e, r, NULL, "cannot record the cell: %s", strerror(-r));
	}
	if (r < 0) {
		(void)free_and_strdup(&ctx->row.state, "idle");
		context_save(ctx);
		struct context_op *op = TAKE_PTR(c->op);
		cell_end(c);
		op_finish(op, r, NULL, &e);
		return;
	}
	op_finish(TAKE_PTR(c->op), 0, cell_to_json(ctx, &c->row), NULL);
	if (c->interrupt_pending && interrupt_start(ctx, &e) < 0)
		log_error("cannot interrupt the cell", "workspace", ctx->ws->row.id, "context",
			  ctx->row.id, "error", e.message, NULL);
}

static void on_code_writable(void *userdata)
{
	struct cell *c = userdata;

	while (!c->code_sent && c->code_len > 0) {
		size_t n = c->code_len > FILE_MAX_CHUNK ? FILE_MAX_CHUNK : c->code_len;
		if (manager_file_write(c->file, c->code, n) < 0)
			return; /* -EAGAIN: writable() again once drained */
		memmove(c->code, c->code + n, c->code_len - n);
		c->code_len -= n;
	}
	if (!c->code_sent) {
		c->code_sent = true;
		(void)manager_file_write_end(c->file);
	}
}

static void on_code_end(void *userdata, int r, bool flag, const struct station_error *e)
{
	struct cell *c = userdata;
	struct context *ctx = c->ctx;

	c->file = NULL;
	if (r < 0) {
		struct station_error err = {};
		station_error_set(&err, r, NULL, "cannot write the cell's code: %s",
				  e ? e->message : strerror(-r));
		(void)free_and_strdup(&ctx->row.state, "idle");
		context_save(ctx);
		struct context_op *op = TAKE_PTR(c->op);
		cell_end(c);
		op_finish(op, r, NULL, &err);
		return;
	}
	cell_started(c);
}

static const struct file_session_ops code_ops = {
	.writable = on_code_writable,
	.end = on_code_end,
};

static int code_write(struct cell *c, struct station_error *e)
{
	struct context *ctx = c->ctx;
	char path[4096];
	int r;

	snprintf(path, sizeof path, "%s/cells/%" PRIu64 "/code", ctx->dir, c->row.number);
	struct file_request req = {
		.op = FILE_OP_WRITE,
		.path = path,
		.flags = FILE_F_PARENTS,
		.has_mode = true,
		.mode = 0600,
		.field = "path",
	};
	r = manager_file_open(ctx->ws->m, ctx->ws->row.id, &req, &code_ops, c, &c->file, e);
	if (r < 0)
		return r;
	on_code_writable(c);
	return 0;
}

static struct cell *cell_new(struct context *ctx, uint64_t number, uint64_t timeout_ms)
{
	struct cell *c = calloc(1, sizeof *c);
	char id[PROTO_MAX_ID + 1];

	if (!c)
		return NULL;
	random_id("e-", 22, id, sizeof id);
	c->ctx = ctx;
	c->timeout_ms = timeout_ms;
	c->run_exit = -1;
	c->row = (struct cell_row){
		.id = strdup(id),
		.context_id = strdup(ctx->row.id),
		.number = number,
		.run_id = strdup(""),
		.status = strdup("running"),
		.execution_count = -1,
		.kernel_cpu_ms = -1,
		.kernel_memory_bytes = -1,
	};
	c->kernel_cpu_start_ms = -1;
	if (!c->row.id || !c->row.context_id || !c->row.run_id || !c->row.status) {
		cell_free(c);
		return NULL;
	}
	return c;
}

static int op_new(context_done_fn fn, void *userdata, struct context_op **ret)
{
	struct context_op *op = calloc(1, sizeof *op);

	if (!op)
		return -ENOMEM;
	op->fn = fn;
	op->userdata = userdata;
	*ret = op;
	return 0;
}

int manager_context_execute(struct manager *m, const char *ws_id, const char *cid, const char *code,
			    size_t code_len, uint64_t timeout_ms, context_done_fn fn,
			    void *userdata, struct context_op **ret_op, struct station_error *e)
{
	struct context *ctx = NULL;
	const char *reason;
	struct cell *c;
	int r = context_lookup(m, ws_id, cid, &ctx, e);

	if (r >= 0)
		r = workspace_wake_for(ctx->ws, "a cell", e);
	if (r < 0)
		return r;
	if (ctx->cell)
		return station_error_set(e, CONTEXT_EBUSY, NULL,
					 "context \"%s\" is running a cell (interrupt it, or wait)",
					 cid);
	if (strcmp(context_state(ctx, &reason), "dead") == 0)
		return station_error_set(e, -EBUSY, NULL, "context \"%s\" is dead: %s (restart it)",
					 cid, reason ? reason : "");
	if (timeout_ms == 0)
		timeout_ms = m->cfg.default_timeout_ms;
	c = cell_new(ctx, ctx->row.next_cell, timeout_ms);
	if (!c || !(c->code = malloc(code_len ? code_len : 1)) ||
	    op_new(fn, userdata, &c->op) < 0) {
		cell_free(c);
		return station_error_set(e, -ENOMEM, NULL, "out of memory");
	}
	memcpy(c->code, code, code_len);
	c->code_len = code_len;
	ctx->cell = c;
	r = code_write(c, e);
	if (r < 0) {
		free(TAKE_PTR(c->op));
		cell_end(c);
		return r;
	}
	ctx->row.next_cell++;
	(void)free_and_strdup(&ctx->row.state, "busy");
	context_save(ctx);
	*ret_op = c->op;
	return 0;
}

/* ---- create, restart, delete ------------------------------------------------------------- */

static int kernel_probe(struct context *ctx, context_done_fn fn, void *userdata,
			struct context_op **ret_op, struct station_error *e)
{
	struct cell *c = cell_new(ctx, 0, CONTEXT_START_TIMEOUT_MS);
	int r;

	if (!c || op_new(fn, userdata, &c->op) < 0) {
		cell_free(c);
		return station_error_set(e, -ENOMEM, NULL, "out of memory");
	}
	ctx->cell = c;
	r = run_start(c, e);
	if (r < 0) {
		free(TAKE_PTR(c->op));
		cell_end(c);
		return r;
	}
	*ret_op = c->op;
	return 0;
}

static int kernel_service_start(struct context *ctx, struct station_error *e)
{
	struct workspace *ws = ctx->ws;
	_cleanup_free_ char *prog = program_path(ws, ctx->lang), *cmd = NULL;
	_cleanup_json_ json_t *env = ctx->row.env_json ? json_loads(ctx->row.env_json, 0, NULL) :
							 NULL;
	_cleanup_json_ json_t *svc = NULL;

	if (!prog || asprintf(&cmd, "exec '%s' serve '%s'", prog, ctx->dir) < 0)
		return station_error_set(e, -ENOMEM, NULL, "out of memory");
	struct service_spec spec = {
		.name = ctx->row.service_name,
		.command = cmd,
		.cwd = ctx->row.cwd,
		.env = env,
		.policy = SERVICE_POLICY_NO,
		.stop_signal = SIGKILL,
		.stop_timeout_ms = 1000,
	};
	return manager_service_start(ws->m, ws->row.id, &spec, &svc, e);
}

static int context_row_new(struct workspace *ws, const struct context_spec *spec,
			   struct context_row *row)
{
	char id[PROTO_MAX_ID + 1], svc[PROTO_MAX_ID + 8];

	random_id("c-", 22, id, sizeof id);
	snprintf(svc, sizeof svc, CONTEXT_SERVICE_PREFIX "%s", id);
	*row = (struct context_row){
		.id = strdup(id),
		.workspace_id = strdup(ws->row.id),
		.language = strdup(spec->language),
		.cwd = spec->cwd ? strdup(spec->cwd) : NULL,
		.env_json = spec->env ? json_dumps(spec->env, JSON_COMPACT) : NULL,
		.service_name = strdup(svc),
		.state = strdup("busy"),
		.next_cell = 1,
		.created_at = realtime_usec(),
	};
	if (!row->id || !row->workspace_id || !row->language || !row->service_name || !row->state ||
	    (spec->cwd && !row->cwd) || (spec->env && !row->env_json)) {
		context_row_free(row);
		return -ENOMEM;
	}
	return 0;
}

static void context_forget(struct context *ctx)
{
	struct workspace *ws = ctx->ws;

	(void)manager_service_delete(ws->m, ws->row.id, ctx->row.service_name, NULL);
	(void)store_context_delete(ws->m->store, ctx->row.id);
	LIST_REMOVE(&ws->contexts, ctx);
	context_free(ctx);
}

int manager_context_create(struct manager *m, const char *ws_id, const struct context_spec *spec,
			   context_done_fn fn, void *userdata, struct context_op **ret_op,
			   struct station_error *e)
{
	struct workspace *ws = NULL;
	const struct kernel_lang *l = lang_find(spec->language);
	struct context *ctx;
	int r = workspace_lookup(m, ws_id, &ws, e);

	if (r >= 0)
		r = workspace_wake_for(ws, "a code context", e);
	if (r < 0)
		return r;
	if (!l)
		return station_error_set(e, -EINVAL, "language",
					 "language must be \"python\" or \"javascript\"");
	if (!program_installed(m, l))
		return station_error_set(e, CONTEXT_EMISSING, "language",
					 "this worker has no %s kernel program (%s is not "
					 "installed)",
					 l->name, l->program);
	if (contexts_count(ws) >= MANAGER_MAX_CONTEXTS)
		return station_error_set(e, -EAGAIN, NULL,
					 "workspace \"%s\" already has %d contexts (the limit)",
					 ws_id, MANAGER_MAX_CONTEXTS);
	ctx = calloc(1, sizeof *ctx);
	if (!ctx || context_row_new(ws, spec, &ctx->row) < 0) {
		free(ctx);
		return station_error_set(e, -ENOMEM, NULL, "out of memory");
	}
	ctx->ws = ws;
	ctx->lang = l;
	r = context_dir_set(ctx);
	if (r >= 0)
		r = store_context_insert(m->store, &ctx->row);
	if (r < 0) {
		context_free(ctx);
		return station_error_set(e, r, NULL, "cannot record the context: %s", strerror(-r));
	}
	LIST_PREPEND(&ws->contexts, ctx);
	r = kernel_service_start(ctx, e);
	if (r >= 0)
		r = kernel_probe(ctx, fn, userdata, ret_op, e);
	if (r < 0) {
		context_forget(ctx);
		return r;
	}
	log_info("context created", "workspace", ws_id, "context", ctx->row.id, "language", l->name,
		 NULL);
	return 0;
}

int manager_context_restart(struct manager *m, const char *ws_id, const char *cid,
			    context_done_fn fn, void *userdata, struct context_op **ret_op,
			    struct station_error *e)
{
	struct context *ctx = NULL;
	_cleanup_json_ json_t *svc = NULL;
	int r = context_lookup(m, ws_id, cid, &ctx, e);

	if (r >= 0)
		r = workspace_wake_for(ctx->ws, "a context restart", e);
	if (r < 0)
		return r;
	if (ctx->cell)
		return station_error_set(
			e, CONTEXT_EBUSY, NULL, "context \"%s\" is %s (interrupt it, or wait)", cid,
			ctx->cell->row.number ? "running a cell" : "starting its kernel");
	r = manager_service_restart(m, ws_id, ctx->row.service_name, &svc, e);
	if (r == -ENOENT)
		r = kernel_service_start(ctx, e);
	if (r < 0)
		return r;
	ctx->row.execution_count = 0;
	context_set_state(ctx, "busy", NULL);
	return kernel_probe(ctx, fn, userdata, ret_op, e);
}

static void on_dir_removed(void *userdata, int r, bool flag, const struct station_error *e)
{
}

static const struct file_session_ops dir_ops = { .end = on_dir_removed };

int manager_context_delete(struct manager *m, const char *ws_id, const char *cid,
			   struct station_error *e)
{
	struct context *ctx = NULL;
	struct file_session *s = NULL;
	int r = context_lookup(m, ws_id, cid, &ctx, e);

	if (r < 0)
		return r;
	struct file_request req = {
		.op = FILE_OP_DELETE,
		.path = ctx->dir,
		.flags = FILE_F_RECURSIVE,
		.field = "path",
	};
	/* the kernel goes first (SIGKILL to its service), then its directory */
	(void)manager_service_delete(m, ws_id, ctx->row.service_name, NULL);
	if (workspace_check_ready(ctx->ws, NULL) >= 0)
		(void)manager_file_open(m, ws_id, &req, &dir_ops, NULL, &s, NULL);
	log_info("context deleted", "workspace", ws_id, "context", cid, NULL);
	context_forget(ctx);
	return 0;
}

int manager_context_list(struct manager *m, const char *ws_id, const json_t *usage, json_t **ret,
			 struct station_error *e)
{
	struct workspace *ws = NULL;
	json_t *a;
	int r = workspace_lookup(m, ws_id, &ws, e);

	if (r < 0)
		return r;
	a = json_array();
	for (struct context *c = ws->contexts; a && c; c = c->next)
		json_array_insert_new(a, 0, context_to_json(c, usage));
	*ret = a ? json_pack("{s:o}", "contexts", a) : NULL;
	return *ret ? 0 : station_error_set(e, -ENOMEM, NULL, "out of memory");
}

int manager_context_get(struct manager *m, const char *ws_id, const char *cid, const json_t *usage,
			json_t **ret, struct station_error *e)
{
	struct context *ctx = NULL;
	int r = context_lookup(m, ws_id, cid, &ctx, e);

	if (r < 0)
		return r;
	*ret = context_to_json(ctx, usage);
	return *ret ? 0 : station_error_set(e, -ENOMEM, NULL, "out of memory");
}

/* ---- interrupt and executions --------------------------------------------------------------- */

/* The in-sandbox program SIGINTs the cell's exec client (waiting briefly for it to start),
 * which interrupts the kernel, or ends the cell as interrupted if it had not reached the kernel. */
static int interrupt_start(struct context *ctx, struct station_error *e)
{
	_cleanup_free_ char *prog = program_path(ctx->ws, ctx->lang), *cmd = NULL;
	_cleanup_json_ json_t *run = NULL;

	if (!prog || asprintf(&cmd, "exec '%s' interrupt '%s'", prog, ctx->dir) < 0)
		return station_error_set(e, -ENOMEM, NULL, "out of memory");
	struct run_spec spec = { .command = cmd, .timeout_ms = 10000 };
	return manager_run_start(ctx->ws->m, ctx->ws->row.id, &spec, &run, e);
}

int manager_context_interrupt(struct manager *m, const char *ws_id, const char *cid, char ret[64],
			      struct station_error *e)
{
	struct context *ctx = NULL;
	int r = context_lookup(m, ws_id, cid, &ctx, e);

	if (r < 0)
		return r;
	if (!ctx->cell || ctx->cell->row.number == 0)
		return station_error_set(e, -EBUSY, NULL, "context \"%s\" runs no cell", cid);
	if (!ctx->cell->row.run_id[0]) /* its code is still being written */
		ctx->cell->interrupt_pending = true;
	else if ((r = interrupt_start(ctx, e)) < 0)
		return r;
	snprintf(ret, 64, "%s", ctx->cell->row.id);
	return 0;
}

static int cell_get(struct context *ctx, const char *eid, struct cell_row *ret,
		    struct station_error *e)
{
	int r = store_cell_get(ctx->ws->m->store, ctx->row.id, eid, ret);

	if (r == -ENOENT)
		return station_error_set(e, -ENOENT, NULL,
					 "execution \"%s\" not found in context \"%s\"", eid,
					 ctx->row.id);
	if (r < 0)
		return station_error_set(e, r, NULL, "cannot read execution \"%s\": %s", eid,
					 strerror(-r));
	return 0;
}

int manager_execution_get(struct manager *m, const char *ws_id, const char *cid, const char *eid,
			  json_t **ret, struct station_error *e)
{
	struct context *ctx = NULL;
	struct cell_row row = {};
	int r = context_lookup(m, ws_id, cid, &ctx, e);

	if (r >= 0)
		r = cell_get(ctx, eid, &row, e);
	if (r < 0)
		return r;
	*ret = cell_to_json(ctx, &row);
	cell_row_free(&row);
	return *ret ? 0 : station_error_set(e, -ENOMEM, NULL, "out of memory");
}

int manager_execution_run_id(struct manager *m, const char *ws_id, const char *cid, const char *eid,
			     char ret[64], struct station_error *e)
{
	struct context *ctx = NULL;
	struct cell_row row = {};
	int r = context_lookup(m, ws_id, cid, &ctx, e);

	if (r >= 0)
		r = cell_get(ctx, eid, &row, e);
	if (r < 0)
		return r;
	snprintf(ret, 64, "%s", row.run_id);
	cell_row_free(&row);
	return 0;
}

int manager_execution_list(struct manager *m, const char *ws_id, const char *cid, json_t **ret,
			   struct station_error *e)
{
	struct context *ctx = NULL;
	struct cell_row *rows = NULL;
	size_t n = 0;
	json_t *a;
	int r = context_lookup(m, ws_id, cid, &ctx, e);

	if (r < 0)
		return r;
	r = store_cell_list(m->store, cid, CONTEXT_KEEP_CELLS, &rows, &n);
	if (r < 0)
		return station_error_set(e, r, NULL, "cannot list executions: %s", strerror(-r));
	a = json_array();
	for (size_t i = 0; i < n; i++) {
		if (a)
			json_array_append_new(a, cell_to_json(ctx, &rows[i]));
		cell_row_free(&rows[i]);
	}
	free(rows);
	*ret = a ? json_pack("{s:o}", "executions", a) : NULL;
	return *ret ? 0 : station_error_set(e, -ENOMEM, NULL, "out of memory");
}

int manager_execution_wait(struct manager *m, const char *ws_id, const char *cid, const char *eid,
			   void (*fn)(void *userdata), void *userdata,
			   struct execution_waiter **ret, struct station_error *e)
{
	struct context *ctx = NULL;
	struct execution_waiter *w;
	int r = context_lookup(m, ws_id, cid, &ctx, e);

	if (r < 0)
		return r;
	if (!ctx->cell || strcmp(ctx->cell->row.id, eid) != 0) {
		struct cell_row row = {};
		r = cell_get(ctx, eid, &row, e);
		cell_row_free(&row);
		return r < 0 ? r : 1;
	}
	w = calloc(1, sizeof *w);
	if (!w)
		return station_error_set(e, -ENOMEM, NULL, "out of memory");
	w->cell = ctx->cell;
	w->fn = fn;
	w->userdata = userdata;
	LIST_PREPEND(&ctx->cell->waiters, w);
	*ret = w;
	return 0;
}

void manager_execution_waiter_cancel(struct execution_waiter *w)
{
	if (!w)
		return;
	LIST_REMOVE(&w->cell->waiters, w);
	free(w);
}

/* ---- controller start: contexts from the store, cells that ended meanwhile -------------------- */

static void cell_resume(struct context *ctx, struct cell_row *row)
{
	struct cell *c = calloc(1, sizeof *c);
	struct station_error e = {};
	int r;

	if (!c)
		return;
	c->ctx = ctx;
	c->row = *row;
	*row = (struct cell_row){};
	c->run_exit = -1;
	c->kernel_cpu_start_ms = -1; /* asked by the controller that started the cell: lost */
	c->kernel_attempt = service_current_attempt(ctx->ws, ctx->row.service_name);
	ctx->cell = c;
	r = manager_run_wait(ctx->ws->m, ctx->ws->row.id, c->row.run_id, on_run_end, c,
			     &c->run_waiter, &e);
	if (r != 0) /* ended while the controller was away (or gone): read what it left */
		(void)event_add_timer(ctx->ws->m->loop, &c->retry,
				      now_usec() + CONTEXT_RETRY_MS * 1000ull, on_retry, c);
}

static void context_load(struct manager *m, struct context_row *row)
{
	struct workspace *ws = workspace_find(m, row->workspace_id);
	struct context *ctx = ws ? calloc(1, sizeof *ctx) : NULL;
	struct cell_row *cells = NULL;
	size_t n = 0;

	if (!ctx) {
		context_row_free(row);
		return;
	}
	ctx->ws = ws;
	ctx->row = *row;
	*row = (struct context_row){};
	ctx->lang = lang_find(ctx->row.language);
	if (!ctx->lang || context_dir_set(ctx) < 0) {
		context_free(ctx);
		return;
	}
	LIST_PREPEND(&ws->contexts, ctx);
	if (store_cell_list(m->store, ctx->row.id, 1, &cells, &n) >= 0 && n == 1 &&
	    strcmp(cells[0].status, "running") == 0)
		cell_resume(ctx, &cells[0]);
	else if (strcmp(ctx->row.state, "busy") == 0)
		context_set_state(ctx, "idle", NULL);
	for (size_t i = 0; i < n; i++)
		cell_row_free(&cells[i]);
	free(cells);
}

void contexts_load(struct manager *m)
{
	struct context_row *rows = NULL;
	size_t n = 0;
	int r = store_context_list_all(m->store, &rows, &n);

	if (r < 0) {
		log_error("cannot load contexts", "error", strerror(-r), NULL);
		return;
	}
	for (size_t i = 0; i < n; i++)
		context_load(m, &rows[i]);
	free(rows);
}

bool service_name_hidden(const char *name)
{
	return name && strncmp(name, CONTEXT_SERVICE_PREFIX, strlen(CONTEXT_SERVICE_PREFIX)) == 0;
}

void manager_usage_contexts_split(json_t *usage)
{
	json_t *services = json_object_get(usage, "services"), *contexts = json_array();
	size_t i = 0;

	if (!contexts)
		return;
	while (i < json_array_size(services)) {
		json_t *e = json_array_get(services, i);
		const char *name = json_string_value(json_object_get(e, "name"));
		if (!service_name_hidden(name)) {
			i++;
			continue;
		}
		json_array_append_new(contexts,
				      json_pack("{s:s,s:O,s:O}", "id",
						name + strlen(CONTEXT_SERVICE_PREFIX), "cpuMs",
						json_object_get(e, "cpuMs"), "memoryBytes",
						json_object_get(e, "memoryBytes")));
		json_array_remove(services, i);
	}
	json_object_set_new(usage, "contexts", contexts);
}
