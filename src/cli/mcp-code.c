/* SPDX-License-Identifier: MIT */
/* The code_execute tool: a cell of Python or JavaScript in the workspace's code context for the
 * language (the oldest one alive, else a dead one restarted, else a new one), unless contextId
 * names one. The cell's stdout, stderr and text results come back as text content, its images
 * as MCP image content, its error with isError; structuredContent has the same without the
 * images' bytes. */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "basic/cleanup.h"
#include "mcp.h"

/* The longest cell code_execute waits for when given no timeoutMs. */
#define CODE_TIMEOUT_DEFAULT_MS 60000
#define CODE_TIMEOUT_MAX_MS 86400000
/* How long a context's create or restart may take: the controller's 30 s, and some. */
#define CODE_START_MS 60000

static const char *json_str(const json_t *o, const char *key)
{
	return json_string_value(json_object_get(o, key));
}

/* The context to run in: contextId, else the workspace's for the language. *ret borrowed from
 * *keep. */
static int code_context(struct mcp_call *call, const char *ws, const char *language, json_t **keep,
			const char **ret)
{
	const struct station_context_options opts = { .language = language };
	struct station_client *c = call->s->client;
	const char *dead = NULL;
	json_t *ctx;
	size_t i;
	int r;

	if (mcp_arg_string(call, "contextId", false, ret) < 0)
		return -1;
	if (*ret)
		return 0;
	if (station_context_list(c, ws, keep) < 0)
		return mcp_fail_client(call, "listing the workspace's contexts");
	json_array_foreach(*keep, i, ctx) {
		const char *lang = json_str(ctx, "language"), *state = json_str(ctx, "state");

		if (!lang || strcmp(lang, language) != 0 || !json_str(ctx, "id"))
			continue;
		if (state && strcmp(state, "dead") == 0) {
			dead = dead ? dead : json_str(ctx, "id");
			continue;
		}
		*ret = json_str(ctx, "id");
		return 0;
	}
	ctx = NULL;
	/* The controller answers once the kernel does: up to 30 s. */
	station_client_set_timeout(c, CODE_START_MS);
	r = dead ? station_context_restart(c, ws, dead, &ctx) :
		   station_context_create(c, ws, &opts, &ctx);
	station_client_set_timeout(c, 0);
	if (r < 0)
		return mcp_fail_client(call, dead ? "restarting the dead context" :
						    "creating a code context");
	json_decref(*keep);
	*keep = ctx;
	*ret = json_str(ctx, "id");
	return *ret ? 0 : mcp_fail(call, "the controller sent a context without an id");
}

/* Waits for the cell to end; a cancel of the request interrupts it. */
static int code_wait(struct mcp_call *call, const char *ws, const char *cid, json_t **e)
{
	struct station_client *c = call->s->client;
	const char *eid = json_str(*e, "id");
	int r = 0;

	if (!eid)
		return mcp_fail(call, "the controller sent an execution without an id");
	while (!station_execution_is_done(*e)) {
		json_t *next = NULL;

		r = station_execution_get(c, ws, cid, eid, STATION_MAX_WAIT_MS, &next);
		if (r < 0)
			break;
		json_decref(*e);
		*e = next;
	}
	if (r == -EINTR && call->s->cancelled) {
		call->s->quiet = true;
		station_context_interrupt(c, ws, cid, NULL);
		call->s->quiet = false;
		return mcp_fail(call, "cancelled: the cell was interrupted");
	}
	return r < 0 ? mcp_fail_client(call, "waiting for the cell") : 0;
}

static int content_text(json_t *content, const char *text)
{
	return json_array_append_new(content, json_pack("{s:s,s:s}", "type", "text", "text", text));
}

/* One stream as structuredContent shows it (head and tail within the limit), and its text as
 * content when it has any. */
static int code_stream(struct mcp_call *call, const json_t *e, enum station_stream s,
		       const char *ws, json_t *content, char **more)
{
	const char *name = station_stream_to_string(s);
	_cleanup_free_ char *head = NULL, *tail = NULL, *m = NULL, *key = NULL;
	struct mcp_stream_view v = { .name = name };
	json_t *o, *text;

	if (station_run_output(e, s, false, &head, &v.head_len) < 0 ||
	    station_run_output(e, s, true, &tail, &v.tail_len) < 0)
		return mcp_fail(call, "the controller sent malformed output");
	if (asprintf(&key, "%sBytes", name) < 0)
		return mcp_fail(call, "out of memory");
	v.total = (uint64_t)json_integer_value(json_object_get(e, key));
	v.head = head;
	v.tail = tail;
	if (v.total < v.head_len + v.tail_len)
		v.total = v.head_len + v.tail_len;
	o = mcp_stream_json(&v, call->s->limits.result_bytes, ws, json_str(e, "runId"), &m);
	if (!o)
		return mcp_fail(call, "out of memory");
	json_object_set_new(call->result, name, o);
	if (m && !*more)
		*more = TAKE_PTR(m);
	text = json_object_get(o, "head");
	if (v.total > 0 && json_is_string(text)) {
		_cleanup_free_ char *t = NULL;
		const char *tl = json_str(o, "tail");

		if (asprintf(&t, "%s%s%s%s", s == STATION_STREAM_STDERR ? "stderr:\n" : "",
			     json_string_value(text), tl && *tl ? "\n[...]\n" : "",
			     tl ? tl : "") < 0)
			return mcp_fail(call, "out of memory");
		content_text(content, t);
	}
	return 0;
}

/* The results: text/plain as text content, image/png as image content (a result with neither,
 * text/html alone say, shows only in structuredContent's copy, which lists each result's MIME
 * types and text). */
static int code_results(struct mcp_call *call, const json_t *e, json_t *content)
{
	json_t *results = json_object_get(e, "results"), *res, *out = json_array();
	size_t i;

	if (!out)
		return mcp_fail(call, "out of memory");
	json_object_set_new(call->result, "results", out);
	json_array_foreach(results, i, res) {
		json_t *data = json_object_get(res, "data"),
		       *png = json_object_get(data, "image/png");
		const char *text = json_str(data, "text/plain");
		json_t *mimes = json_array(), *v;
		const char *mime;

		json_object_foreach(data, mime, v)
			json_array_append_new(mimes, json_string(mime));
		json_array_append_new(out,
				      json_pack("{s:s?,s:o,s:s?}", "type", json_str(res, "type"),
						"mimeTypes", mimes, "text", text));
		if (json_is_string(png))
			json_array_append_new(content,
					      json_pack("{s:s,s:O,s:s}", "type", "image", "data",
							png, "mimeType", "image/png"));
		else if (text)
			content_text(content, text);
	}
	return 0;
}

/* The error's traceback without terminal colours, as one text. */
static char *traceback_text(const json_t *error)
{
	json_t *tb = json_object_get(error, "traceback"), *line;
	_cleanup_free_ char *buf = NULL;
	size_t len = 0, i;
	FILE *f = open_memstream(&buf, &len);

	if (!f)
		return NULL;
	fprintf(f, "%s: %s\n", json_str(error, "name") ? json_str(error, "name") : "Error",
		json_str(error, "value") ? json_str(error, "value") : "");
	json_array_foreach(tb, i, line) {
		for (const char *s = json_string_value(line); s && *s; s++) {
			if (*s == '\033' && s[1] == '[') {
				for (s += 2; *s && (*s < '@' || *s > '~'); s++)
					;
				if (!*s)
					break;
				continue;
			}
			fputc(*s, f);
		}
		fputc('\n', f);
	}
	if (fclose(f) != 0)
		return NULL;
	return TAKE_PTR(buf);
}

static int code_result(struct mcp_call *call, const json_t *e, const char *ws, const char *cid)
{
	_cleanup_free_ char *more = NULL, *summary = NULL;
	json_t *content = json_array(), *error = json_object_get(e, "error");
	const char *status = json_str(e, "status");

	call->result = json_pack("{s:s,s:s,s:s?,s:s?,s:s?,s:O?}", "workspaceId", ws, "contextId",
				 cid, "executionId", json_str(e, "id"), "runId",
				 json_str(e, "runId"), "status", status, "executionCount",
				 json_object_get(e, "executionCount"));
	call->content = content;
	if (!call->result || !content)
		return mcp_fail(call, "out of memory");
	if (code_stream(call, e, STATION_STREAM_STDOUT, ws, content, &more) < 0 ||
	    code_stream(call, e, STATION_STREAM_STDERR, ws, content, &more) < 0 ||
	    code_results(call, e, content) < 0)
		return -1;
	json_object_set_new(call->result, "more", more ? json_string(more) : json_null());
	json_object_set(call->result, "error", json_is_object(error) ? error : json_null());
	if (json_is_object(error)) {
		_cleanup_free_ char *tb = traceback_text(error);

		if (tb)
			content_text(content, tb);
	}
	call->is_error = status && strcmp(status, "error") == 0;
	if (asprintf(&summary, "status: %s, contextId: %s, executionCount: %lld%s%s",
		     status ? status : "unknown", cid,
		     (long long)json_integer_value(json_object_get(e, "executionCount")),
		     more ? "; " : "", more ? more : "") < 0)
		return mcp_fail(call, "out of memory");
	content_text(content, summary);
	return 0;
}

int mcp_tool_code_execute(struct mcp_call *call)
{
	static const char *const known[] = { "workspaceId", "code",	 "language",
					     "contextId",   "timeoutMs", NULL };
	struct station_execute_options o = { .timeout_ms = CODE_TIMEOUT_DEFAULT_MS };
	const struct mcp_limits *l = &call->s->limits;
	_cleanup_json_ json_t *keep = NULL, *e = NULL;
	const char *ws = NULL, *language = "python", *cid = NULL;

	if (mcp_args_check(call, known) < 0 || mcp_arg_string(call, "code", true, &o.code) < 0 ||
	    mcp_arg_string(call, "language", false, &language) < 0 ||
	    mcp_arg_u64(call, "timeoutMs", 1,
			l->max_timeout_ms ? l->max_timeout_ms : CODE_TIMEOUT_MAX_MS,
			&o.timeout_ms) < 0)
		return -1;
	if (strcmp(language, "python") != 0 && strcmp(language, "javascript") != 0)
		return mcp_fail(call, "argument 'language' must be python or javascript");
	if (l->max_timeout_ms && o.timeout_ms > l->max_timeout_ms)
		o.timeout_ms = l->max_timeout_ms;
	if (mcp_arg_workspace(call, &ws) < 0 || code_context(call, ws, language, &keep, &cid) < 0)
		return -1;
	/* As exec's start: not interrupted, so a cancel cannot leave a cell nobody interrupts. */
	call->s->quiet = true;
	if (station_context_execute(call->s->client, ws, cid, &o, &e) < 0) {
		call->s->quiet = false;
		return mcp_fail_client(call, "code_execute");
	}
	call->s->quiet = false;
	if (code_wait(call, ws, cid, &e) < 0)
		return -1;
	return code_result(call, e, ws, cid);
}
