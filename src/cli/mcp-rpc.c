/* SPDX-License-Identifier: MIT */
/* The JSON-RPC side of station-sandbox mcp: reading messages from standard input, writing
 * answers and notifications to standard output, and the protocol methods (initialize for the
 * 2025-11-25 revision, server/discover and per-request _meta for 2026-07-28, ping, tools/list,
 * tools/call). */

#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "mcp.h"
#include "output.h"

#define META_VERSION "io.modelcontextprotocol/protocolVersion"
#define META_CAPABILITIES "io.modelcontextprotocol/clientCapabilities"
#define META_SERVER_INFO "io.modelcontextprotocol/serverInfo"
/* How often a long wait reports progress at most. */
#define PROGRESS_EVERY_MS 500

/* Versions an initialize may settle on, newest first. */
static const char *const legacy_versions[] = { MCP_PROTOCOL_LEGACY, "2025-06-18", "2025-03-26",
					       "2024-11-05" };

#define INSTRUCTIONS                                                                                 \
	"Workspaces are sandboxes (containers) that keep their files between calls: create one "     \
	"with workspace_create and pass its id to the other tools. exec runs a shell command and "   \
	"returns its exit code and output; a command still running after waitMs comes back with "    \
	"status running and a runId: call run_wait with it. Long output is shown as head and tail; " \
	"run_output reads the rest. Start long-lived processes (servers) with service_start; "       \
	"port_expose gives a server's port a URL a person can open."

uint64_t mcp_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* ---- Output ------------------------------------------------------------------------------ */

int mcp_send(struct mcp_server *s, json_t *msg)
{
	_cleanup_free_ char *text = json_dumps(msg, JSON_COMPACT | JSON_ENSURE_ASCII);
	size_t n;
	int r;

	if (!text)
		return -ENOMEM;
	n = strlen(text);
	text[n] = '\n'; /* json_dumps's NUL becomes the line's end */
	r = output_write(s->out_fd, text, n + 1);
	text[n] = '\0';
	if (r < 0)
		s->out_closed = true;
	return r;
}

int mcp_send_result(struct mcp_server *s, json_t *id, json_t *result)
{
	_cleanup_json_ json_t *msg = json_pack("{s:s,s:O,s:o}", "jsonrpc", "2.0", "id", id,
					       "result", result ? result : json_object());

	return msg ? mcp_send(s, msg) : -ENOMEM;
}

int mcp_send_error(struct mcp_server *s, json_t *id, int code, const char *message, json_t *data)
{
	_cleanup_json_ json_t *err = json_pack("{s:i,s:s}", "code", code, "message", message);
	_cleanup_json_ json_t *msg = NULL;

	if (!err) {
		json_decref(data);
		return -ENOMEM;
	}
	if (data)
		json_object_set_new(err, "data", data);
	msg = json_pack("{s:s,s:O,s:O}", "jsonrpc", "2.0", "id", id ? id : json_null(), "error",
			err);
	return msg ? mcp_send(s, msg) : -ENOMEM;
}

void mcp_progress(struct mcp_server *s, double value, const char *message)
{
	_cleanup_json_ json_t *msg = NULL;
	uint64_t now = mcp_now_ms();

	if (!s->progress_token || value <= s->progress_sent)
		return;
	if (s->progress_at && now - s->progress_at < PROGRESS_EVERY_MS)
		return;
	msg = json_pack("{s:s,s:s,s:{s:O,s:f,s:s}}", "jsonrpc", "2.0", "method",
			"notifications/progress", "params", "progressToken", s->progress_token,
			"progress", value, "message", message);
	if (msg && mcp_send(s, msg) >= 0) {
		s->progress_sent = value;
		s->progress_at = now;
	}
}

/* ---- Input ------------------------------------------------------------------------------- */

static bool id_equal(const json_t *a, const json_t *b)
{
	return a && b && json_equal((json_t *)a, (json_t *)b);
}

/* A message read while a request is being served: acted upon now, or queued. */
static void input_message(struct mcp_server *s, json_t *msg)
{
	const char *method = json_string_value(json_object_get(msg, "method"));
	json_t *id = json_object_get(msg, "id");

	if (s->cur_id && method && strcmp(method, "notifications/cancelled") == 0) {
		json_t *params = json_object_get(msg, "params");

		if (id_equal(json_object_get(params, "requestId"), s->cur_id))
			s->cancelled = true;
		return; /* a cancel for anything else names nothing in progress */
	}
	if (s->cur_id && method && id && strcmp(method, "ping") == 0) {
		mcp_send_result(s, id, json_object());
		return;
	}
	json_array_append_new(s->queue, json_pack("[iO]", 0, msg));
}

static void input_line(struct mcp_server *s, const char *line, size_t n)
{
	_cleanup_json_ json_t *msg = NULL;
	json_error_t e;

	while (n > 0 && (line[n - 1] == '\r' || line[n - 1] == ' ' || line[n - 1] == '\t'))
		n--;
	if (n == 0)
		return;
	msg = json_loadb(line, n, JSON_REJECT_DUPLICATES, &e);
	if (!msg) {
		char text[256];

		/* Answered in turn, after what came before it. */
		snprintf(text, sizeof(text), "parse error: %s (column %d)", e.text, e.column);
		json_array_append_new(s->queue, json_pack("[is]", MCP_PARSE_ERROR, text));
		return;
	}
	input_message(s, msg);
}

static void input_split(struct mcp_server *s)
{
	size_t start = 0;
	char *nl;

	while ((nl = memchr(s->in_buf + start, '\n', s->in_len - start))) {
		size_t n = (size_t)(nl - (s->in_buf + start));

		if (s->in_skipping)
			s->in_skipping = false;
		else
			input_line(s, s->in_buf + start, n);
		start += n + 1;
	}
	memmove(s->in_buf, s->in_buf + start, s->in_len - start);
	s->in_len -= start;
	if (s->in_len >= MCP_LINE_MAX) {
		/* A line that will not fit: refused once, and skipped to its end. */
		if (!s->in_skipping)
			json_array_append_new(s->queue,
					      json_pack("[is]", MCP_INVALID_REQUEST,
							"message too large (the limit is 8 MiB "
							"per line)"));
		s->in_skipping = true;
		s->in_len = 0;
	}
}

void mcp_input_poll(struct mcp_server *s, int wait_ms)
{
	struct pollfd p = { .fd = s->in_fd, .events = POLLIN };

	while (!s->in_eof) {
		ssize_t n;

		if (poll(&p, 1, wait_ms) <= 0)
			return;
		wait_ms = 0;
		if (s->in_cap - s->in_len < 65536) {
			size_t cap = s->in_cap ? s->in_cap * 2 : 131072;
			char *b;

			if (cap > MCP_LINE_MAX + 65536)
				cap = MCP_LINE_MAX + 65536;
			b = realloc(s->in_buf, cap);
			if (!b)
				return;
			s->in_buf = b;
			s->in_cap = cap;
		}
		n = read(s->in_fd, s->in_buf + s->in_len, s->in_cap - s->in_len);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n <= 0) {
			s->in_eof = true;
			if (s->in_len > 0 && !s->in_skipping)
				input_line(s, s->in_buf, s->in_len); /* a last line without '\n' */
			s->in_len = 0;
			return;
		}
		s->in_len += (size_t)n;
		input_split(s);
	}
}

int mcp_interrupt_check(void *userdata)
{
	struct mcp_server *s = userdata;

	if (s->quiet)
		return 0;
	mcp_input_poll(s, 0);
	if (mcp_terminated && s->cur_id) {
		s->cancelled = true;
		s->in_eof = true;
	}
	if (s->deadline && mcp_now_ms() >= s->deadline)
		s->deadline_hit = true;
	return s->cancelled || s->deadline_hit;
}

/* ---- Methods ----------------------------------------------------------------------------- */

static json_t *server_info(void)
{
	return json_pack("{s:s,s:s,s:s}", "name", "station-sandbox", "title",
			 "station-sandbox workspaces", "version", STATION_VERSION);
}

static json_t *capabilities(void)
{
	return json_pack("{s:{s:b}}", "tools", "listChanged", false);
}

static json_t *method_initialize(json_t *params)
{
	const char *asked = json_string_value(json_object_get(params, "protocolVersion"));
	const char *version = MCP_PROTOCOL_LEGACY;

	for (size_t i = 0; asked && i < ELEMENTSOF(legacy_versions); i++)
		if (strcmp(asked, legacy_versions[i]) == 0)
			version = legacy_versions[i];
	return json_pack("{s:s,s:o,s:o,s:s}", "protocolVersion", version, "capabilities",
			 capabilities(), "serverInfo", server_info(), "instructions", INSTRUCTIONS);
}

static json_t *supported_versions(void)
{
	json_t *a = json_pack("[s]", MCP_PROTOCOL_MODERN);

	for (size_t i = 0; a && i < ELEMENTSOF(legacy_versions); i++)
		json_array_append_new(a, json_string(legacy_versions[i]));
	return a;
}

static json_t *method_discover(void)
{
	return json_pack("{s:o,s:o,s:o,s:s,s:{s:o}}", "supportedVersions", supported_versions(),
			 "capabilities", capabilities(), "serverInfo", server_info(),
			 "instructions", INSTRUCTIONS, "_meta", META_SERVER_INFO, server_info());
}

/* A tool's outcome as the protocol carries it: structuredContent and the same JSON as text, or
 * the error as text with isError. */
static json_t *call_result(struct mcp_call *call, int r)
{
	_cleanup_free_ char *text = NULL;

	if (r < 0)
		return json_pack("{s:[{s:s,s:s}],s:b}", "content", "type", "text", "text",
				 call->error, "isError", true);
	if (call->content)
		return json_pack("{s:O,s:O,s:b}", "content", call->content, "structuredContent",
				 call->result, "isError", call->is_error);
	text = json_dumps(call->result, JSON_COMPACT);
	if (!text)
		return NULL;
	return json_pack("{s:[{s:s,s:s}],s:O,s:b}", "content", "type", "text", "text", text,
			 "structuredContent", call->result, "isError", false);
}

/* tools/call. Returns the result, or NULL with *code and msg set for a protocol error. */
static json_t *method_tools_call(struct mcp_server *s, json_t *params, int *code, char *msg,
				 size_t msg_size)
{
	const char *name = json_string_value(json_object_get(params, "name"));
	json_t *args = json_object_get(params, "arguments");
	_cleanup_json_ json_t *empty = json_object();
	struct mcp_call call = { .s = s };
	json_t *result;
	int r;

	*code = MCP_INVALID_PARAMS;
	if (!name) {
		snprintf(msg, msg_size, "tools/call needs params.name, a string");
		return NULL;
	}
	if (args && !json_is_object(args)) {
		snprintf(msg, msg_size, "tools/call params.arguments must be an object");
		return NULL;
	}
	call.args = args ? args : empty;
	r = mcp_tool_run(&call, name);
	if (r == -ENOENT) {
		snprintf(msg, msg_size, "unknown tool '%.64s'%s", name,
			 strcmp(name, "workspace_delete") == 0 ?
				 " (the operator did not allow workspace_delete)" :
				 " (tools/list names the tools)");
		return NULL;
	}
	if (s->cancelled) {
		json_decref(call.result);
		json_decref(call.content);
		return NULL; /* a cancelled request is not answered */
	}
	result = call_result(&call, r);
	json_decref(call.result);
	json_decref(call.content);
	if (!result) {
		*code = MCP_INTERNAL_ERROR;
		snprintf(msg, msg_size, "out of memory");
	}
	return result;
}

/* The 2026-07-28 revision's per-request _meta. Returns 0 (s->modern set when it is one), or an
 * error code with msg and *data set. */
static int request_meta(struct mcp_server *s, json_t *params, char *msg, size_t msg_size,
			json_t **data)
{
	json_t *meta = json_object_get(params, "_meta");
	json_t *version = json_object_get(meta, META_VERSION);

	s->modern = false;
	if (!version)
		return 0;
	if (!json_is_string(version)) {
		snprintf(msg, msg_size, "_meta " META_VERSION " must be a string");
		return MCP_INVALID_PARAMS;
	}
	if (strcmp(json_string_value(version), MCP_PROTOCOL_MODERN) != 0) {
		snprintf(msg, msg_size, "unsupported protocol version '%.40s'",
			 json_string_value(version));
		*data = json_pack("{s:O,s:o}", "requested", version, "supported",
				  supported_versions());
		return MCP_UNSUPPORTED_VERSION;
	}
	if (!json_is_object(json_object_get(meta, META_CAPABILITIES))) {
		snprintf(msg, msg_size,
			 "_meta " META_CAPABILITIES " (an object) is required with "
			 "protocol version " MCP_PROTOCOL_MODERN);
		return MCP_INVALID_PARAMS;
	}
	s->modern = true;
	return 0;
}

/* Dispatches a request; returns the result, or NULL with *code and msg set. */
static json_t *request_dispatch(struct mcp_server *s, const char *method, json_t *params, int *code,
				char *msg, size_t msg_size)
{
	if (params && !json_is_object(params)) {
		*code = MCP_INVALID_PARAMS;
		snprintf(msg, msg_size, "params must be an object");
		return NULL;
	}
	*code = MCP_INTERNAL_ERROR;
	snprintf(msg, msg_size, "out of memory");
	if (strcmp(method, "initialize") == 0)
		return method_initialize(params);
	if (strcmp(method, "server/discover") == 0)
		return method_discover();
	if (strcmp(method, "ping") == 0)
		return json_object();
	if (strcmp(method, "tools/list") == 0)
		return json_pack("{s:o}", "tools", mcp_tools_list(s));
	if (strcmp(method, "tools/call") == 0)
		return method_tools_call(s, params, code, msg, msg_size);
	*code = MCP_METHOD_NOT_FOUND;
	snprintf(msg, msg_size, "method '%.64s' not found", method);
	return NULL;
}

static void handle_request(struct mcp_server *s, json_t *id, const char *method, json_t *params)
{
	json_t *meta = json_object_get(params, "_meta");
	json_t *data = NULL, *result;
	char msg[512];
	int code;

	code = request_meta(s, params, msg, sizeof(msg), &data);
	if (code != 0) {
		mcp_send_error(s, id, code, msg, data);
		return;
	}
	s->cur_id = id;
	s->cancelled = false;
	s->progress_token = json_object_get(meta, "progressToken");
	if (s->progress_token && !json_is_string(s->progress_token) &&
	    !json_is_integer(s->progress_token))
		s->progress_token = NULL;
	s->progress_sent = 0;
	s->progress_at = 0;
	result = request_dispatch(s, method, params, &code, msg, sizeof(msg));
	if (result && s->modern && json_is_object(result))
		json_object_set_new(result, "resultType", json_string("complete"));
	if (result)
		mcp_send_result(s, id, result);
	else if (!s->cancelled)
		mcp_send_error(s, id, code, msg, NULL);
	s->cur_id = NULL;
	s->progress_token = NULL;
	s->cancelled = false;
	s->deadline = 0;
	s->deadline_hit = false;
}

void mcp_handle_queued(struct mcp_server *s, json_t *entry)
{
	int kind = (int)json_integer_value(json_array_get(entry, 0));
	json_t *payload = json_array_get(entry, 1);

	if (kind == 0)
		mcp_handle(s, payload);
	else
		mcp_send_error(s, NULL, kind, json_string_value(payload), NULL);
}

void mcp_handle(struct mcp_server *s, json_t *msg)
{
	json_t *id, *method, *params;
	const char *version;

	if (json_is_array(msg)) {
		mcp_send_error(s, NULL, MCP_INVALID_REQUEST, "batches are not supported", NULL);
		return;
	}
	if (!json_is_object(msg)) {
		mcp_send_error(s, NULL, MCP_INVALID_REQUEST, "a message must be a JSON object",
			       NULL);
		return;
	}
	id = json_object_get(msg, "id");
	method = json_object_get(msg, "method");
	params = json_object_get(msg, "params");
	if (id && !json_is_string(id) && !json_is_integer(id)) {
		mcp_send_error(s, NULL, MCP_INVALID_REQUEST, "id must be a string or an integer",
			       NULL);
		return;
	}
	if (!method && (json_object_get(msg, "result") || json_object_get(msg, "error")))
		return; /* a response: this server sends no requests */
	version = json_string_value(json_object_get(msg, "jsonrpc"));
	if (!json_is_string(method) || !version || strcmp(version, "2.0") != 0) {
		if (id)
			mcp_send_error(s, id, MCP_INVALID_REQUEST,
				       "not a JSON-RPC 2.0 request (jsonrpc \"2.0\" and a string "
				       "method are required)",
				       NULL);
		else
			mcp_send_error(s, NULL, MCP_INVALID_REQUEST, "not a JSON-RPC 2.0 message",
				       NULL);
		return;
	}
	if (!id)
		return; /* notifications: initialized, cancelled (nothing in progress), … */
	handle_request(s, id, json_string_value(method), params);
}
