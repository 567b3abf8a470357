/* SPDX-License-Identifier: MIT */
/* Runs and workspaces as the API shows them (docs/api.md). Process output never goes into JSON
 * unencoded: it is text when every stream is valid UTF-8 as written, else every part is base64.
 * A truncated stream shown as text has its head end and its tail begin on a character boundary:
 * a cut inside a character drops that character's bytes on the cut's side (at most 3 each). */

#include <stdlib.h>
#include <string.h>

#include "basic/cleanup.h"
#include "basic/json-util.h"
#include "basic/util.h"
#include "manager-internal.h"

void json_set_time(json_t *o, const char *key, uint64_t usec)
{
	char buf[32];
	if (!usec) {
		json_object_set_new(o, key, json_null());
		return;
	}
	format_rfc3339(usec, buf);
	json_object_set_new(o, key, json_string(buf));
}

static json_t *bytes_json(const uint8_t *data, size_t n, bool base64)
{
	if (base64) {
		_cleanup_free_ char *s = base64_encode(data ? data : (const uint8_t *)"", n);
		return s ? json_string(s) : json_null();
	}
	return json_stringn(data ? (const char *)data : "", n);
}

static bool stream_truncated(const struct run_output *o)
{
	return o->head_len + o->tail_len < o->total;
}

/* p + skip, with p NULL when there are no bytes. */
static const uint8_t *bytes_from(const uint8_t *p, size_t skip)
{
	return skip ? p + skip : p;
}

/* What a truncated stream shows as text: its head up to the last character boundary, its tail
 * from the first. */
static void text_cut(const struct run_output *o, size_t *ret_head_len, size_t *ret_tail_skip)
{
	*ret_head_len = o->head_len - utf8_cut_head(o->head, o->head_len);
	*ret_tail_skip = utf8_cut_tail(o->tail, o->tail_len);
}

/* A stream that was not truncated: head + tail, the character across their seam included. */
static bool whole_is_valid(const struct run_output *o)
{
	size_t k = utf8_cut_head(o->head, o->head_len), skip = 0;
	uint8_t c[4];

	if (!utf8_is_valid(o->head, o->head_len - k))
		return false;
	if (k > 0) {
		if (o->tail_len == 0)
			return false;
		skip = MIN(sizeof c - k, o->tail_len);
		memcpy(c, o->head + o->head_len - k, k);
		memcpy(c + k, o->tail, skip);
		skip = utf8_char_len(c, k + skip);
		if (skip <= k)
			return false;
		skip -= k;
	}
	return utf8_is_valid(bytes_from(o->tail, skip), o->tail_len - skip);
}

static bool stream_is_text(const struct run_output *o)
{
	size_t head_len, skip;

	if (!stream_truncated(o))
		return whole_is_valid(o);
	text_cut(o, &head_len, &skip);
	return utf8_is_valid(o->head, head_len) &&
	       utf8_is_valid(bytes_from(o->tail, skip), o->tail_len - skip);
}

static bool output_is_text(const struct run_output out[2])
{
	return stream_is_text(&out[0]) && stream_is_text(&out[1]);
}

/* Not truncated: head + tail is the whole stream, shown as one string. */
static void set_stream(json_t *o, const char *name, const struct run_output *out, bool base64)
{
	bool truncated = stream_truncated(out);
	size_t head_len = out->head_len, skip = 0;
	char key[32];

	if (truncated && !base64)
		text_cut(out, &head_len, &skip);
	if (truncated || out->tail_len == 0) {
		json_object_set_new(o, name, bytes_json(out->head, head_len, base64));
	} else {
		size_t n = out->head_len + out->tail_len;
		_cleanup_free_ uint8_t *all = malloc(n);
		if (all) {
			memcpy(all, out->head, out->head_len);
			memcpy(all + out->head_len, out->tail, out->tail_len);
		}
		json_object_set_new(o, name, all ? bytes_json(all, n, base64) : json_null());
	}
	if (truncated) {
		snprintf(key, sizeof key, "%sTail", name);
		json_object_set_new(o, key,
				    bytes_json(bytes_from(out->tail, skip), out->tail_len - skip,
					       base64));
	}
	snprintf(key, sizeof key, "%sBytes", name);
	json_object_set_new(o, key, json_integer((json_int_t)out->total));
}

json_t *env_redacted_json(json_t *env)
{
	json_t *o = json_object();
	const char *key;
	json_t *v;

	if (json_is_object(env))
		json_object_foreach(env, key, v)
			json_object_set_new(o, key, json_string(ENV_REDACTED));
	return o;
}

json_t *env_json_redacted(const char *env_json)
{
	_cleanup_json_ json_t *env = env_json ? json_loads(env_json, 0, NULL) : NULL;

	return env_redacted_json(env);
}

static json_t *nullable_str(const char *s)
{
	return s ? json_string(s) : json_null();
}

json_t *run_to_json(const struct run_row *r, bool with_output)
{
	json_t *o = json_object();
	if (!o)
		return NULL;
	bool done = r->status != RUN_RUNNING;
	json_object_set_new(o, "id", json_string(r->id));
	json_object_set_new(o, "workspaceId", json_string(r->workspace_id));
	json_object_set_new(o, "command", json_string(r->command ? r->command : ""));
	json_object_set_new(o, "cwd", nullable_str(r->cwd));
	json_object_set_new(o, "env", env_json_redacted(r->env_json));
	json_object_set_new(o, "status", json_string(run_status_to_string(r->status)));
	json_object_set_new(o, "exitCode",
			    r->status == RUN_EXITED && r->exit_code >= 0 ?
				    json_integer(r->exit_code) :
				    json_null());
	json_object_set_new(o, "signal", r->signal > 0 ? json_integer(r->signal) : json_null());
	json_object_set_new(o, "oomKilled", json_boolean(r->oom_killed));
	json_object_set_new(o, "reason", nullable_str(r->reason));
	if (with_output) {
		bool base64 = !output_is_text(r->out);
		set_stream(o, "stdout", &r->out[0], base64);
		set_stream(o, "stderr", &r->out[1], base64);
		json_object_set_new(o, "encoding", json_string(base64 ? "base64" : "utf-8"));
	} else {
		json_object_set_new(o, "stdoutBytes", json_integer((json_int_t)r->out[0].total));
		json_object_set_new(o, "stderrBytes", json_integer((json_int_t)r->out[1].total));
	}
	json_object_set_new(o, "truncated", json_boolean(r->truncated));
	json_object_set_new(o, "timeoutMs", json_integer((json_int_t)r->timeout_ms));
	json_object_set_new(o, "maxOutputBytes", json_integer((json_int_t)r->max_output_bytes));
	json_set_time(o, "createdAt", r->created_at);
	json_set_time(o, "startedAt", r->started_at);
	json_set_time(o, "endedAt", done ? r->ended_at : 0);
	bool timed = done && r->started_at && r->ended_at >= r->started_at;
	json_object_set_new(
		o, "durationMs",
		timed ? json_integer((json_int_t)((r->ended_at - r->started_at) / 1000)) :
			json_null());
	bool measured = done && r->status != RUN_LOST && r->status != RUN_FAILED_TO_START;
	json_object_set_new(o, "cpuMs",
			    measured ? json_integer((json_int_t)(r->cpu_usec / 1000)) :
				       json_null());
	json_object_set_new(o, "peakMemoryBytes",
			    measured ? json_integer((json_int_t)r->peak_memory) : json_null());
	json_t *network = r->network_json ? json_loads(r->network_json, 0, NULL) : NULL;
	if (network)
		json_object_set_new(o, "network", network);
	return o;
}

void output_to_json(json_t *o, const struct run_output out[2])
{
	bool base64 = !output_is_text(out);
	bool truncated = stream_truncated(&out[0]) || stream_truncated(&out[1]);

	set_stream(o, "stdout", &out[0], base64);
	set_stream(o, "stderr", &out[1], base64);
	json_object_set_new(o, "encoding", json_string(base64 ? "base64" : "utf-8"));
	json_object_set_new(o, "truncated", json_boolean(truncated));
}
