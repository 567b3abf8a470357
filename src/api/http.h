/* SPDX-License-Identifier: MIT */
#pragma once

/* The controller's HTTP API (docs/api.md): libmicrohttpd without threads of its own, driven
 * from our event loop. MHD's epoll fd is an io source of the loop; a loop timer follows
 * MHD_get_timeout() and is re-armed after every MHD_run(). Everything, MHD callbacks and
 * manager calls included, runs on the loop thread. Nothing here logs above debug. */

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "basic/error.h"
#include "api/fleet.h"
#include "api/auth.h"
#include "api/ws-conn.h"

struct event_loop;
struct fleet;
struct manager;
struct route_match;
struct MHD_Response;

struct http_server;
struct api_metrics;

/* The connection table: one per controller, shared by its listeners. Every connection counts
 * in open. Past limit a new connection is answered 503 (Retry-After) and closed at once,
 * before libmicrohttpd sees it. Long-lived requests (waitMs long-polls, event streams,
 * WebSockets) hold at most limit - reserve of the table, so short requests and probes always
 * find a place; past that share they are refused 503 too. */
struct http_connections {
	unsigned limit;	       /* > 0 */
	unsigned reserve;      /* < limit */
	unsigned open;	       /* accepted, not yet closed */
	unsigned long_lived;   /* of those */
	uint64_t refused;      /* connections answered 503 at accept since start */
	uint64_t refused_long; /* long-lived requests answered 503 since start */
};

/* The defaults for a limit: a reserve of an eighth, at least 2 and at most 128, below it. */
unsigned http_connections_default_reserve(unsigned limit);

struct http_config {
	bool require_token; /* TCP listeners: every request is authenticated and audited */
	/* The bearer token (n bytes) to a principal: 0 with *ret filled, -EKEYEXPIRED for an
	 * expired token, -EKEYREVOKED for a revoked one, another -errno for an unknown one (401
	 * all, each message saying which). */
	int (*authenticate)(void *userdata, const char *token, size_t n,
			    struct auth_principal *ret);
	void *token_userdata;
	/* Audit (manager_audit_record()): every request on a listener that requires a token, and
	 * the mutating ones (not GET or HEAD) on the others. */
	bool audit;
	uint64_t max_body_bytes;	      /* 2 MiB; 0: the default */
	uint64_t max_wait_ms;		      /* 60000; 0: the default */
	unsigned max_connections;	      /* 1024; 0: the default (when connections is NULL) */
	struct http_connections *connections; /* shared table; NULL: the server's own */
	unsigned max_websockets;	      /* upgraded or upgrading, 256; 0: the default */
	struct ws_limits ws;		      /* zero fields: the defaults of ws-conn.h */
	/* POST /mcp (api-mcp.c): the MCP server's argv (NULL-terminated), or NULL when off; the
	 * listener's HOST:PORT, which Host and Origin must name. */
	const char *const *mcp_argv;
	const char *mcp_listen_host;
	const char *const *mcp_hosts; /* more host names Host and Origin may give; NULL: none */
	/* GET /v1/workers and /v1/workers/NAME/v1/... (api-workers.c): the workers this
	 * controller knows, started (fleet_start()); NULL: only itself, nothing forwarded. */
	struct fleet *fleet;
	/* The previews' URLs (manager_config's preview_scheme, preview_domain, preview_port):
	 * the dashboard may frame them (web_csp_new()); preview_domain NULL: previews off. */
	const char *preview_scheme;
	const char *preview_domain;
	uint16_t preview_port;
	/* GET /metrics's request counts and WebSockets (api-metrics.h), shared by the listeners;
	 * NULL: not kept. */
	struct api_metrics *metrics;
};

/* Serves the API on listen_fd, a listening stream socket (unix or TCP). On success the server
 * owns listen_fd: it is closed at once and the server accepts on a CLOEXEC duplicate (made
 * non-blocking), closed in http_server_free(). On failure listen_fd is untouched and still the
 * caller's. The manager, and cfg->connections when set, must outlive the server. */
int http_server_new(struct event_loop *loop, struct manager *m, int listen_fd,
		    const struct http_config *cfg, struct http_server **ret);
/* The token was revoked: every request and WebSocket it authenticated on this server is ended
 * now (long-polls and event streams closed, WebSockets sent a close frame, 1008). */
void http_server_revoke(struct http_server *s, const char *token_id);

/* Releases every long-poll and live-output watch, closes every connection (their requests get
 * no response; WebSockets get a close frame, 1001, and their closed() callbacks), stops MHD and
 * closes its listening socket. Call before manager_free(). NULL is fine. */
void http_server_free(struct http_server *s);

/* ---- For the endpoint handlers (api-*.c, sse.c), not for main.c ---------------------------- */

/* One request, alive from its headers to its completion (or its client going away). */
struct http_request;

/* An endpoint handler: called once the whole body is in. It must respond with one of the
 * http_reply_*() calls, or suspend the request; a negative return closes the connection. */
typedef int (*http_handler_fn)(struct http_request *req);

struct manager *http_request_manager(struct http_request *req);
/* The listeners' request counts (http_config.metrics); NULL when not kept. */
const struct api_metrics *http_request_metrics(struct http_request *req);
struct event_loop *http_request_loop(struct http_request *req);
const struct route_match *http_request_route(struct http_request *req);
uint64_t http_request_max_wait_ms(struct http_request *req);
/* How long the request may wait for a state its client asked to wait for (waitMs): asked_ms
 * capped at max_wait_ms; 0 for a HEAD, which is answered at once with what a GET would get
 * now (docs/api.md, "HEAD"). */
uint64_t http_request_wait_ms(struct http_request *req, uint64_t asked_ms);
uint64_t http_request_max_body_bytes(struct http_request *req);
struct fleet *http_request_fleet(struct http_request *req);
/* The request's method and path (decoded, without the query). */
const char *http_request_method(struct http_request *req);
const char *http_request_url(struct http_request *req);
/* The query again, each key and value percent-encoded ("" when none); NULL when out of
 * memory. Free it. */
char *http_request_query_string(struct http_request *req);
/* A query argument; NULL when absent. *ret_present tells "?k" (NULL value) from absent. */
const char *http_request_query(struct http_request *req, const char *key, bool *ret_present);
const void *http_request_body(struct http_request *req, size_t *ret_len);
/* The same with the value's length as libmicrohttpd decoded it: a "%00" in the query makes it
 * differ from strlen(). */
const char *http_request_query_n(struct http_request *req, const char *key, bool *ret_present,
				 size_t *ret_len);
/* Every value of a repeated query argument, in order, into ret (NULL for "?k" without '='):
 * how many there are (more than max: only max stored). */
size_t http_request_query_all(struct http_request *req, const char *key, const char **ret,
			      size_t max);

/* A streamed body (an endpoint marked so in http.c's table): its handler runs as soon as the
 * headers are in, before any of the body, and either replies (the body is then not read) or
 * calls http_request_stream_body(). chunk gets the body's bytes as they arrive (chunked or
 * with a Content-Length, no size cap) and returns how many it took; fewer than n only after it
 * suspended the request (http_request_suspend(req, NULL)): the rest comes again after the
 * resume. A negative return closes the connection. end runs once the body is complete and
 * must reply or suspend, like a handler. A reply queued before the body is complete is sent
 * only after it (libmicrohttpd): chunk should then drop what it gets. */
typedef ssize_t (*http_body_fn)(struct http_request *req, const void *data, size_t n);
int http_request_stream_body(struct http_request *req, http_body_fn chunk, http_handler_fn end);

/* Each reply queues the response once; after it the handler is done with the request. */
int http_reply_json(struct http_request *req, unsigned status, json_t *body); /* takes body */
int http_reply_error(struct http_request *req, const struct station_error *e);
int http_reply_status(struct http_request *req, unsigned status, const char *field, const char *fmt,
		      ...) __attribute__((format(printf, 4, 5)));
/* Queues r (the request keeps its own reference; the caller still destroys r). */
int http_reply_response(struct http_request *req, unsigned status, struct MHD_Response *r);
/* 405 with the Allow header: "method M is not allowed on URL (allowed: ALLOW)". */
int http_reply_method_not_allowed(struct http_request *req, const char *method, const char *url,
				  const char *allow);
/* Makes req long-lived (a waitMs long-poll, an event stream): 0 when it fits the long-lived
 * share of the connection table, -EBUSY when not (the caller answers at once, or with
 * http_reply_busy()). Idempotent; released when the request ends. */
int http_request_hold(struct http_request *req);
/* 503 with Retry-After: the long-lived share of the connection table is full. */
int http_reply_busy(struct http_request *req);
/* The connection table this request's server counts in. */
const struct http_connections *http_request_connections(struct http_request *req);

/* A request header; NULL when absent. */
const char *http_request_header(struct http_request *req, const char *name);
/* The same with its length: a value may hold a NUL, which a string would hide. */
const char *http_request_header_n(struct http_request *req, const char *name, size_t *ret_len);
/* How many times the request carries the header (names compared without case). */
unsigned http_request_header_count(struct http_request *req, const char *name);
/* Replies e with its status, the error code `code` instead of the status's own (NULL: the
 * status's), and one more response header unless header is NULL. */
int http_reply_error_code(struct http_request *req, const struct station_error *e, const char *code,
			  const char *header, const char *value);

/* WebSocket (RFC 6455). An endpoint with a WebSocket handler (http.c's table) gets requests
 * carrying "Upgrade: websocket" there, their handshake already checked: HTTP/1.1, "Connection:
 * Upgrade", "Sec-WebSocket-Version: 13" (else 426), a Sec-WebSocket-Key of 16 bytes (else 400),
 * under max_websockets (else 429), and the bearer token like any request. An endpoint without
 * one answers such a request 400; a WebSocket-only endpoint answers plain requests 426.
 *
 * Answers req with 101 Switching Protocols and returns the connection at once: sends queue
 * until libmicrohttpd hands over the socket, after the 101 went out. From a successful call on,
 * ops->closed() is called exactly once, also when the upgrade never completes (1006). On
 * failure nothing was queued and no callback will come. */
int http_reply_websocket(struct http_request *req, const struct ws_conn_ops *ops, void *userdata,
			 struct ws_conn **ret);

/* A raw upgrade: the same 101 as http_reply_websocket() (the handshake checked the same way),
 * but the socket goes to ops->attach() as it is, for a relay of its bytes (the WebSocket
 * forward to another worker). attach() owns the relay from then on; the relay ends with
 * http_upgrade_close(u), which gives the socket back to libmicrohttpd to close. ops->close()
 * asks the owner to end it now (the 101 never went out, the token was revoked, the server
 * stops): it must call http_upgrade_close(u) (u: the handle *ret, also when attach() has not
 * been called yet) before returning. */
struct http_websocket;
struct http_upgrade_ops {
	void (*attach)(void *userdata, struct http_websocket *u, int fd, const char *extra,
		       size_t extra_len);
	void (*close)(void *userdata);
};
int http_reply_upgrade(struct http_request *req, const struct http_upgrade_ops *ops, void *userdata,
		       struct http_websocket **ret);
void http_upgrade_close(struct http_websocket *u);

/* State a handler keeps across a suspension. free_fn runs once: when the request completes,
 * when its client goes away while suspended (releasing waits at once), or at server shutdown.
 * Replaces (and frees) earlier state. */
void http_request_set_state(struct http_request *req, void *state, void (*free_fn)(void *state));
void *http_request_state(struct http_request *req);

/* Long-poll: stops processing the request until http_request_resume(); then resume_fn is
 * called (from MHD) and must reply or suspend again. While suspended the socket is watched
 * for the client hanging up. May be called from a handler or, with resume_fn NULL, from a
 * response's content reader (then MHD calls the reader again after the resume). */
int http_request_suspend(struct http_request *req, http_handler_fn resume_fn);
/* No-op unless suspended. Safe from any loop callback, never needs MHD to be running. */
void http_request_resume(struct http_request *req);
/* The client hung up (the request will be closed without a response). */
bool http_request_gone(struct http_request *req);

/* A server-sent event stream sends this comment line (HTTP_SSE_HEARTBEAT) after
 * HTTP_SSE_HEARTBEAT_MS without anything else, so that a client can bound its wait and tell a
 * quiet stream from a server that stopped (docs/api.md, "Event streams"). Half the WebSocket
 * ping interval (ws-conn.h): a client allows its own deadline plus this much silence. */
#define HTTP_SSE_HEARTBEAT_MS 15000
#define HTTP_SSE_HEARTBEAT ": ping\n\n"
/* What an event stream's content reader returns when it has nothing to send: suspends the
 * request (as http_request_suspend(req, NULL)) until a resume or HTTP_SSE_HEARTBEAT_MS of
 * quiet; called again after that quiet, it puts the heartbeat in out (max bytes) and returns
 * its length. */
ssize_t http_sse_idle(struct http_request *req, char *out, size_t max);

/* Endpoint handlers: api-system.c, api-workspaces.c, api-commands.c, api-images.c. */
int api_ready(struct http_request *req);
int api_metrics(struct http_request *req); /* api-metrics.c */
int api_openapi(struct http_request *req);
int api_worker(struct http_request *req);
/* api-usage.c: GET /v1/worker/usage, and GET …/usage when since or step is given. */
int api_worker_usage(struct http_request *req);
int api_workspace_usage_history(struct http_request *req);
bool api_usage_history_asked(struct http_request *req);
int api_token_list(struct http_request *req);
int api_token_create(struct http_request *req);
int api_token_get(struct http_request *req);
int api_token_revoke(struct http_request *req);
int api_audit_list(struct http_request *req);
int api_workspace_list(struct http_request *req);
int api_workspace_create(struct http_request *req);
int api_workspace_get(struct http_request *req);
int api_workspace_update(struct http_request *req);
int api_workspace_delete(struct http_request *req);
int api_workspace_restart(struct http_request *req);
int api_workspace_pause(struct http_request *req);
int api_workspace_resume(struct http_request *req);
int api_workspace_network_get(struct http_request *req);
int api_workspace_network_set(struct http_request *req);
int api_workspace_usage(struct http_request *req);
int api_command_list(struct http_request *req);
int api_command_start(struct http_request *req);
int api_command_get(struct http_request *req);
int api_command_cancel(struct http_request *req);
int api_command_output(struct http_request *req);
int api_command_output_ws(struct http_request *req); /* ws-output.c */
int api_image_list(struct http_request *req);	     /* api-images.c */
int api_image_create(struct http_request *req);
int api_image_get(struct http_request *req);
int api_image_delete(struct http_request *req);
int api_image_export(struct http_request *req); /* the tar streamed */
int api_service_list(struct http_request *req); /* api-services.c */
int api_service_create(struct http_request *req);
int api_service_get(struct http_request *req);
int api_service_delete(struct http_request *req);
int api_service_stop(struct http_request *req);
int api_service_restart(struct http_request *req);
int api_service_logs(struct http_request *req);
int api_service_logs_ws(struct http_request *req); /* ws-output.c */
int api_context_list(struct http_request *req);	   /* api-contexts.c */
int api_context_create(struct http_request *req);
int api_context_get(struct http_request *req);
int api_context_delete(struct http_request *req);
int api_context_restart(struct http_request *req);
int api_context_interrupt(struct http_request *req);
int api_context_execute(struct http_request *req);
int api_execution_list(struct http_request *req);
int api_execution_get(struct http_request *req);
int api_execution_output(struct http_request *req);
int api_execution_output_ws(struct http_request *req);
int api_terminal_list(struct http_request *req); /* api-terminals.c */
int api_terminal_create(struct http_request *req);
int api_terminal_get(struct http_request *req);
int api_terminal_delete(struct http_request *req);
int api_terminal_resize(struct http_request *req);
int api_terminal_attach(struct http_request *req); /* WebSocket only */
int api_port_list(struct http_request *req);	   /* api-ports.c */
int api_port_expose(struct http_request *req);
int api_port_revoke(struct http_request *req);
int api_snapshot_create(struct http_request *req); /* api-snapshots.c */
int api_snapshot_list(struct http_request *req);
int api_snapshot_get(struct http_request *req);
int api_snapshot_delete(struct http_request *req);
int api_workspace_fork(struct http_request *req); /* api-workspaces.c */
int api_secret_list(struct http_request *req);	  /* api-secrets.c */
int api_secret_get(struct http_request *req);
int api_secret_put(struct http_request *req);
int api_secret_delete(struct http_request *req);
int api_file_stat(struct http_request *req); /* api-files.c */
int api_file_list(struct http_request *req);
int api_file_read(struct http_request *req);
int api_file_write(struct http_request *req); /* streamed body */
int api_file_delete(struct http_request *req);
int api_file_mkdir(struct http_request *req);
int api_file_rename(struct http_request *req);
int api_file_watch(struct http_request *req);	 /* SSE */
int api_file_watch_ws(struct http_request *req); /* api-files-watch.c */
int api_events(struct http_request *req);	 /* SSE; api-events.c */
int api_events_ws(struct http_request *req);
int api_workers(struct http_request *req);	     /* api-workers.c */
int api_worker_forward(struct http_request *req);    /* /v1/workers/NAME/v1/... */
int api_worker_forward_ws(struct http_request *req); /* the same, a WebSocket relayed */
/* POST /v1/workspaces {"placement":"any"} on a controller with --workers: the placement rule
 * over this worker and the others (their GET /v1/worker with the caller's token), then the
 * create here (api_workspace_create_here()) or forwarded to the chosen worker. Both take
 * body, the create's fields without "placement". */
int api_workspace_place(struct http_request *req, json_t *body);
int api_workspace_create_here(struct http_request *req, json_t *body);

/* POST /mcp (api-mcp.c): serves the request's JSON-RPC message with the MCP server argv. */
int api_mcp(struct http_request *req, const char *const *argv, const char *listen_host);
/* Refuses (-EPERM, *ret_why saying why) a request whose Host, or Origin when present, does not
 * name listen_host ("HOST:PORT"; any loopback name when HOST is loopback) or one of the names
 * in more (NULL-terminated, or NULL). */
int api_mcp_check(struct http_request *req, const char *listen_host, const char *const *more,
		  const char **ret_why);

/* Shared by the handlers: {"key":[…]} from a list the manager returned as an array (an object
 * passes through); NULL when out of memory. */
json_t *api_wrap_list(json_t *list, const char *key);
/* r < 0: replies with e; else with result (NULL: out of memory). */
/* The request's body as a JSON object (validate_body(): an empty one is {} when allow_empty).
 * *ret is a new reference. */
int api_request_json(struct http_request *req, bool allow_empty, json_t **ret,
		     struct station_error *e);
int api_reply_result(struct http_request *req, int r, unsigned status, json_t *result,
		     const struct station_error *e);
