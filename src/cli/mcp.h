/* SPDX-License-Identifier: MIT */
#pragma once

/* station-sandbox mcp: a Model Context Protocol server on stdio (newline-delimited JSON-RPC
 * 2.0), whose tools are the controller's workspaces, runs, services and files, reached through
 * the client library. What the command (cmd-mcp.c), the protocol (mcp-rpc.c), the tools
 * (mcp-tools.c, mcp-run.c) and the output shaping (mcp-output.c) share.
 *
 * One request is served at a time. While a tool waits on the controller, the client's interrupt
 * check reads standard input: a ping is answered at once, notifications/cancelled for the
 * request being served stops it (and cancels the run an exec started), anything else waits in a
 * queue. */

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "basic/json-util.h"
#include "station/client.h"

#define MCP_PROTOCOL_MODERN "2026-07-28"
#define MCP_PROTOCOL_LEGACY "2025-11-25"

/* JSON-RPC and MCP error codes. */
#define MCP_PARSE_ERROR -32700
#define MCP_INVALID_REQUEST -32600
#define MCP_METHOD_NOT_FOUND -32601
#define MCP_INVALID_PARAMS -32602
#define MCP_INTERNAL_ERROR -32603
#define MCP_UNSUPPORTED_VERSION -32022

/* The longest input line (one JSON-RPC message): a file_write of 2 MiB in base64 fits. */
#define MCP_LINE_MAX (8u * 1024 * 1024)

/* The idle timeout of a workspace that exec makes (no workspaceId given): an agent that calls
 * exec that way on every turn leaves a workspace per call, and none should stay forever. */
#define MCP_EXEC_IDLE_TIMEOUT_MS (30u * 60 * 1000)

/* What the operator lets MCP clients do (cmd-mcp.c's flags). */
struct mcp_limits {
	bool allow_host;      /* the host adapter may be used (never by default) */
	bool allow_container; /* the container adapter may be used (the default) */
	bool allow_delete;    /* workspace_delete is offered */
	char **networks;      /* NULL-terminated network modes workspace_create may ask for */
	const char *image;    /* default image of workspace_create; NULL: the worker's */
	double cpus, max_cpus;
	uint64_t memory_mb, max_memory_mb;
	uint64_t pids_limit, max_pids_limit;
	uint64_t max_timeout_ms;   /* 0: the worker's */
	uint64_t max_output_bytes; /* the most a run may keep per stream (head + tail) */
	uint64_t result_bytes;	   /* the most output shown per stream in one result */
	uint64_t max_wait_ms;	   /* the longest waitMs of exec and run_wait */
	uint64_t default_wait_ms;  /* waitMs when not given */
	/* The idle timeout of a workspace exec makes when given no workspaceId; 0: never. */
	uint64_t exec_idle_timeout_ms;
};

struct mcp_server {
	struct station_client *client;
	struct mcp_limits limits;
	int in_fd, out_fd;
	/* Input: bytes read and not yet split into lines; messages read while a request ran. */
	char *in_buf;
	size_t in_len, in_cap;
	bool in_eof;
	bool in_skipping; /* discarding the rest of an over-long line */
	json_t *queue;	  /* what to serve next: [0, message] or [error code, text] */
	/* The request being served. */
	json_t *cur_id;		/* borrowed; NULL between requests */
	json_t *progress_token; /* borrowed; NULL when the client asked for no progress */
	bool cancelled;		/* notifications/cancelled named it */
	double progress_sent;	/* the last progress value sent */
	uint64_t progress_at;	/* when (monotonic ms) */
	uint64_t deadline;	/* monotonic ms at which the current wait ends; 0: none */
	bool deadline_hit;
	bool modern;	 /* the request declared MCP_PROTOCOL_MODERN in its _meta */
	bool out_closed; /* writing the output failed: the client is gone */
	bool quiet; /* the interrupt check interrupts nothing (while starting or cancelling a run) */
	json_t *runs; /* runId -> workspaceId of the runs this server started */
};

/* Monotonic milliseconds. */
uint64_t mcp_now_ms(void);

/* Writes msg as one line to the output. 0 or -errno. */
int mcp_send(struct mcp_server *s, json_t *msg);
/* A response to id (borrowed): result (stolen), or an error. */
int mcp_send_result(struct mcp_server *s, json_t *id, json_t *result);
int mcp_send_error(struct mcp_server *s, json_t *id, int code, const char *message, json_t *data);

/* Serves one message (borrowed): a request is answered, a notification acted upon. */
void mcp_handle(struct mcp_server *s, json_t *msg);

/* Serves one entry of the queue: [0, message], or [code, text] for a line that was refused. */
void mcp_handle_queued(struct mcp_server *s, json_t *entry);

/* Reads what standard input has without blocking (wait_ms > 0: waits that long at most for it)
 * and queues the messages found; answers pings and marks cancellation on the way. A line that
 * is not JSON is answered at once with MCP_PARSE_ERROR. */
void mcp_input_poll(struct mcp_server *s, int wait_ms);

/* Set by SIGTERM: the request in progress is cancelled, and the server ends. */
extern volatile sig_atomic_t mcp_terminated;

/* The client library's interrupt check: input, the wait's deadline, progress. */
int mcp_interrupt_check(void *userdata);

/* Sends a progress notification when the client asked for one and value grew. */
void mcp_progress(struct mcp_server *s, double value, const char *message);

/* ---- Tools (mcp-tools.c) ----------------------------------------------------------------- */

/* One tools/call being served. A tool returns 0 with result set (the structured result), or
 * -1 with error set to a sentence for the model (an isError result). */
struct mcp_call {
	struct mcp_server *s;
	json_t *args;	/* borrowed, an object */
	json_t *result; /* owned */
	/* owned; NULL: the content is result as JSON text. With is_error, result and content
	 * still go out, as an isError result (a cell that raised). */
	json_t *content;
	bool is_error;
	char error[1024];
};

/* tools/list's array, what the limits offer. */
json_t *mcp_tools_list(struct mcp_server *s);

/* Runs tool name. Returns 0 when the tool ran (call->result, or call->error for an isError
 * result), or -ENOENT when no such tool is offered. */
int mcp_tool_run(struct mcp_call *call, const char *name);

/* Sets call->error (printf) and returns -1. */
int mcp_fail(struct mcp_call *call, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A failed client call: the controller's message. Returns -1. */
int mcp_fail_client(struct mcp_call *call, const char *what);

/* Argument readers: each returns 0 (the value set, or left alone when absent and optional) or
 * -1 with call->error naming the argument. */
int mcp_arg_string(struct mcp_call *call, const char *key, bool required, const char **ret);
int mcp_arg_u64(struct mcp_call *call, const char *key, uint64_t min, uint64_t max, uint64_t *ret);
int mcp_arg_double(struct mcp_call *call, const char *key, double min, double max, double *ret);
int mcp_arg_bool(struct mcp_call *call, const char *key, bool *ret);
/* An object of string values, as a NULL-terminated "K=V" list (free() each and the array). */
int mcp_arg_env(struct mcp_call *call, const char *key, char ***ret);
void mcp_env_free(char **env);
/* Refuses an argument not in the NULL-terminated list known. */
int mcp_args_check(struct mcp_call *call, const char *const *known);
/* The workspace named by the argument workspaceId, which must use an adapter the limits allow. */
int mcp_arg_workspace(struct mcp_call *call, const char **ret_id);

/* A new workspace with the operator's defaults (exec without workspaceId). */
int mcp_workspace_new(struct mcp_call *call, json_t **ret);

/* ---- Runs (mcp-run.c) -------------------------------------------------------------------- */

int mcp_tool_exec(struct mcp_call *call);
int mcp_tool_run_wait(struct mcp_call *call);
int mcp_tool_run_cancel(struct mcp_call *call);
int mcp_tool_run_output(struct mcp_call *call);

/* ---- Code (mcp-code.c) ------------------------------------------------------------------- */

int mcp_tool_code_execute(struct mcp_call *call);

/* ---- Output shaping (mcp-output.c) ------------------------------------------------------- */

/* What a run's stream looks like in a result: the first and last bytes of what was kept, at
 * most limit bytes in all. */
struct mcp_stream_view {
	const char *name; /* "stdout", "stderr" */
	uint64_t total;	  /* every byte the command wrote */
	const char *head; /* the kept head: bytes [0, head_len) */
	size_t head_len;
	const char *tail; /* the kept tail: the last tail_len bytes, or NULL */
	size_t tail_len;
};

/* {"bytes","encoding","head","tail","headBytes","tailBytes","truncated","omittedBytes",
 * "omittedFrom"}; *ret_more (free()) gets the run_output hint when bytes were left out, else
 * NULL. NULL when out of memory. */
json_t *mcp_stream_json(const struct mcp_stream_view *v, uint64_t limit, const char *ws,
			const char *run, char **ret_more);

/* Output followed live, kept as a view would show it: per stream the first limit/2 bytes and
 * the last limit/2, and the count. Reports progress (the bytes seen) to s. */
struct mcp_collect_stream {
	char *head;
	size_t head_len;
	bool head_closed; /* a gap came before the head was full */
	char *ring;	  /* the latest bytes after the head */
	size_t ring_fill, ring_pos;
	uint64_t total;
};

struct mcp_collect {
	struct mcp_server *s; /* for progress; may be NULL */
	size_t head_cap, ring_cap;
	struct mcp_collect_stream st[2]; /* enum station_stream */
};

int mcp_collect_init(struct mcp_collect *c, uint64_t limit);
void mcp_collect_done(struct mcp_collect *c);
/* len bytes of stream at offset (data NULL: only the offset advances, a gap). 0. */
int mcp_collect_add(struct mcp_collect *c, enum station_stream stream, uint64_t offset,
		    const void *data, size_t len);
/* Sets result's "stdout", "stderr" and "more" (a sentence, or null). 0 or -ENOMEM. */
int mcp_collect_result(struct mcp_collect *c, json_t *result, const char *ws, const char *run,
		       uint64_t limit);

/* True when the n bytes are UTF-8 without NUL. */
bool mcp_utf8_valid(const char *p, size_t n);

/* JSON text with ' for " (the tools' schemas, written readably), parsed; aborts on a typo. */
json_t *mcp_json_q(const char *text);
