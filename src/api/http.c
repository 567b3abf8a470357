/* SPDX-License-Identifier: MIT */
#include "http.h"

#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "basic/cleanup.h"
#include "basic/log.h"
#include "basic/workers.h"
#include "api/api-metrics.h"
#include "api/auth.h"
#include "api/http-gate.h"
#include "api/router.h"
#include "api/validate.h"
#include "api/web.h"
#include "daemon/manager.h"
#include "event/event.h"

#define HTTP_DEFAULT_MAX_BODY_BYTES (2u * 1024 * 1024)
#define HTTP_DEFAULT_MAX_WAIT_MS 60000u
#define HTTP_DEFAULT_MAX_CONNECTIONS 1024u
#define HTTP_DEFAULT_MAX_WEBSOCKETS 256u
/* An idle connection (no bytes either way, not suspended) is closed after this. */
#define HTTP_IDLE_TIMEOUT_SEC 60u
/* Per-connection MHD memory: request headers and the I/O buffers. */
#define HTTP_CONNECTION_MEMORY (64u * 1024)
/* WebSocket subprotocols: ours, and the bearer token of a client that cannot send headers. */
#define WS_PROTOCOL_HEADER "Sec-WebSocket-Protocol"
#define WS_PROTOCOL "station-sandbox"
#define WS_BEARER_PREFIX "bearer."

struct endpoint_info {
	http_handler_fn fn;	  /* NULL: WebSocket only */
	bool body;		  /* takes a JSON body (Content-Type checked) */
	const char *const *query; /* the query parameters it knows */
	http_handler_fn ws;	  /* for "Upgrade: websocket", handshake checked; NULL: none */
	bool stream;		  /* fn runs at the headers and takes the body as it comes */
};

static const char *const query_none[] = { NULL };
static const char *const query_wait[] = { "waitMs", NULL };
static const char *const query_refresh[] = { "refresh", NULL };
static const char *const query_limit[] = { "limit", NULL };
static const char *const query_output[] = { "offset", "stdoutOffset", "stderrOffset", NULL };
static const char *const query_logs[] = { "follow", "offset", "stdoutOffset", "stderrOffset",
					  NULL };
static const char *const query_events[] = { "since", "workspace", "types", NULL };
static const char *const query_attach[] = { "readOnly", "offset", NULL };
static const char *const query_path[] = { "path", NULL };
static const char *const query_watch[] = { "path", "recursive", NULL };
static const char *const query_download[] = { "path", "maxBytes", NULL };
static const char *const query_upload[] = { "path", "mode", "parents", "exclusive", NULL };
static const char *const query_delete[] = { "path", "recursive", NULL };
static const char *const query_usage[] = { "since", "step", NULL };
static const char *const query_workspaces[] = { "label", "name", "state", NULL };
static const char *const query_audit[] = {
	"limit", "before", "tokenId", "tenant", "workspace", NULL
};

static const struct endpoint_info endpoints[_EP_MAX] = {
	[EP_READY] = { api_ready, false, query_refresh },
	[EP_METRICS] = { api_metrics, false, query_none },
	[EP_OPENAPI] = { api_openapi, false, query_none },
	[EP_WORKER] = { api_worker, false, query_none },
	[EP_WORKER_USAGE] = { api_worker_usage, false, query_usage },
	[EP_WORKSPACE_LIST] = { api_workspace_list, false, query_workspaces },
	[EP_WORKSPACE_CREATE] = { api_workspace_create, true, query_none },
	[EP_WORKSPACE_GET] = { api_workspace_get, false, query_none },
	[EP_WORKSPACE_DELETE] = { api_workspace_delete, false, query_none },
	[EP_WORKSPACE_UPDATE] = { api_workspace_update, true, query_none },
	[EP_WORKSPACE_RESTART] = { api_workspace_restart, false, query_none },
	[EP_WORKSPACE_PAUSE] = { api_workspace_pause, false, query_none },
	[EP_WORKSPACE_RESUME] = { api_workspace_resume, false, query_none },
	[EP_WORKSPACE_NETWORK_GET] = { api_workspace_network_get, false, query_none },
	[EP_WORKSPACE_NETWORK_SET] = { api_workspace_network_set, true, query_none },
	[EP_WORKSPACE_USAGE] = { api_workspace_usage, false, query_usage },
	[EP_COMMAND_LIST] = { api_command_list, false, query_limit },
	[EP_COMMAND_START] = { api_command_start, true, query_wait },
	[EP_COMMAND_GET] = { api_command_get, false, query_wait },
	[EP_COMMAND_CANCEL] = { api_command_cancel, false, query_none },
	[EP_COMMAND_OUTPUT] = { api_command_output, false, query_output, api_command_output_ws },
	[EP_IMAGE_LIST] = { api_image_list, false, query_none },
	[EP_IMAGE_CREATE] = { api_image_create, true, query_none },
	[EP_IMAGE_GET] = { api_image_get, false, query_none },
	[EP_IMAGE_DELETE] = { api_image_delete, false, query_none },
	[EP_IMAGE_EXPORT] = { api_image_export, false, query_none },
	[EP_SERVICE_LIST] = { api_service_list, false, query_none },
	[EP_SERVICE_CREATE] = { api_service_create, true, query_none },
	[EP_SERVICE_GET] = { api_service_get, false, query_none },
	[EP_SERVICE_DELETE] = { api_service_delete, false, query_none },
	[EP_SERVICE_STOP] = { api_service_stop, false, query_none },
	[EP_SERVICE_RESTART] = { api_service_restart, false, query_none },
	[EP_SERVICE_LOGS] = { api_service_logs, false, query_logs, api_service_logs_ws },
	[EP_TERMINAL_LIST] = { api_terminal_list, false, query_none },
	[EP_TERMINAL_CREATE] = { api_terminal_create, true, query_none },
	[EP_TERMINAL_GET] = { api_terminal_get, false, query_none },
	[EP_TERMINAL_DELETE] = { api_terminal_delete, false, query_none },
	[EP_TERMINAL_ATTACH] = { NULL, false, query_attach, api_terminal_attach },
	[EP_TERMINAL_RESIZE] = { api_terminal_resize, true, query_none },
	[EP_PORT_LIST] = { api_port_list, false, query_none },
	[EP_PORT_EXPOSE] = { api_port_expose, true, query_none },
	[EP_PORT_REVOKE] = { api_port_revoke, false, query_none },
	[EP_SNAPSHOT_CREATE] = { api_snapshot_create, true, query_none },
	[EP_SNAPSHOT_LIST] = { api_snapshot_list, false, query_none },
	[EP_SNAPSHOT_GET] = { api_snapshot_get, false, query_none },
	[EP_SNAPSHOT_DELETE] = { api_snapshot_delete, false, query_none },
	[EP_WORKSPACE_FORK] = { api_workspace_fork, true, query_none },
	[EP_SECRET_LIST] = { api_secret_list, false, query_none },
	[EP_SECRET_GET] = { api_secret_get, false, query_none },
	[EP_SECRET_PUT] = { api_secret_put, true, query_none },
	[EP_SECRET_DELETE] = { api_secret_delete, false, query_none },
	[EP_FILE_STAT] = { api_file_stat, false, query_path },
	[EP_FILE_LIST] = { api_file_list, false, query_path },
	[EP_FILE_READ] = { api_file_read, false, query_download },
	[EP_FILE_WRITE] = { api_file_write, false, query_upload, NULL, true },
	[EP_FILE_DELETE] = { api_file_delete, false, query_delete },
	[EP_FILE_MKDIR] = { api_file_mkdir, true, query_none },
	[EP_FILE_RENAME] = { api_file_rename, true, query_none },
	[EP_FILE_WATCH] = { api_file_watch, false, query_watch, api_file_watch_ws },
	[EP_EVENTS] = { api_events, false, query_events, api_events_ws },
	[EP_WORKERS] = { api_workers, false, query_none },
	/* Any query (passed on), the body as it is (up to max_body_bytes). */
	[EP_WORKER_FORWARD_GET] = { api_worker_forward, false, NULL, api_worker_forward_ws },
	[EP_WORKER_FORWARD_POST] = { api_worker_forward, false, NULL },
	[EP_WORKER_FORWARD_PUT] = { api_worker_forward, false, NULL },
	[EP_WORKER_FORWARD_PATCH] = { api_worker_forward, false, NULL },
	[EP_WORKER_FORWARD_DELETE] = { api_worker_forward, false, NULL },
	[EP_TOKEN_LIST] = { api_token_list, false, query_none },
	[EP_TOKEN_CREATE] = { api_token_create, true, query_none },
	[EP_TOKEN_GET] = { api_token_get, false, query_none },
	[EP_TOKEN_REVOKE] = { api_token_revoke, false, query_none },
	[EP_AUDIT_LIST] = { api_audit_list, false, query_audit },
	[EP_CONTEXT_LIST] = { api_context_list, false, query_none },
	[EP_CONTEXT_CREATE] = { api_context_create, true, query_none },
	[EP_CONTEXT_GET] = { api_context_get, false, query_none },
	[EP_CONTEXT_DELETE] = { api_context_delete, false, query_none },
	[EP_CONTEXT_RESTART] = { api_context_restart, false, query_none },
	[EP_CONTEXT_INTERRUPT] = { api_context_interrupt, false, query_none },
	[EP_CONTEXT_EXECUTE] = { api_context_execute, true, query_wait },
	[EP_EXECUTION_LIST] = { api_execution_list, false, query_limit },
	[EP_EXECUTION_GET] = { api_execution_get, false, query_wait },
	[EP_EXECUTION_OUTPUT] = { api_execution_output, false, query_output,
				  api_execution_output_ws },
};

static int endpoint_mcp(struct http_request *req);
static const struct endpoint_info mcp_endpoint = { endpoint_mcp, true, query_none };

struct http_server {
	struct event_loop *loop;
	struct manager *manager;
	struct http_config cfg;
	struct MHD_Daemon *daemon;
	struct http_connections own_conns; /* when the config shares none */
	struct http_connections *conns;
	struct http_gate *gate;	 /* the listening socket */
	struct event_source *io; /* MHD's epoll fd */
	/* A response ended in error (a stream cut short): MHD closes its socket only in its next
	 * run, which must not wait for the next timeout. */
	bool run_again;
	struct event_source *timer; /* MHD_get_timeout(), or "now" after a resume */
	struct http_request *requests;
	struct http_websocket *websockets;
	unsigned n_websockets;
	char *web_csp; /* the dashboard's (web_csp_new()) */
};

/* A WebSocket from its 101 to its closed(): waiting for the upgrade (req set), then on the
 * upgraded socket (urh set, until the connection releases it). */
struct http_websocket {
	struct http_server *server;
	struct http_websocket *prev, *next;
	struct http_request *req;
	struct MHD_UpgradeResponseHandle *urh;
	struct ws_conn *conn;
	const struct ws_conn_ops *ops;	    /* the endpoint's */
	const struct http_upgrade_ops *raw; /* a raw upgrade instead (conn NULL) */
	void *userdata;
	char token_id[AUTH_TOKEN_ID_MAX + 1]; /* the principal's, for revocation */
};

struct http_request {
	struct http_server *server;
	struct MHD_Connection *connection;
	struct http_request *prev, *next;
	struct route_match route;
	const struct endpoint_info *endpoint;

	char *body;
	size_t body_len, body_alloc;
	bool body_too_large;
	bool body_oom;

	bool dispatched;
	bool replied;
	http_body_fn body_fn; /* a streamed body: its chunks, then body_end */
	http_handler_fn body_end;
	bool suspended;
	bool gone;
	bool held; /* counted long-lived */
	http_handler_fn resume_fn;
	struct event_source *hangup;	/* the socket, while suspended */
	struct event_source *heartbeat; /* an event stream's quiet (http_sse_idle()) */
	bool heartbeat_due;		/* that quiet lasted HTTP_SSE_HEARTBEAT_MS */

	void *state;
	void (*state_free)(void *state);

	char *url;	   /* as libmicrohttpd gave it (decoded, no query); the method is below */
	bool started;	   /* the handler has seen its headers */
	char refused[128]; /* why the target as sent is refused (target_check()); "": it is not */
	char refused_field[33]; /* the query parameter refused, if one was */

	bool websocket; /* a checked WebSocket handshake */
	char ws_accept[WS_ACCEPT_SIZE];
	struct http_websocket *ws; /* 101 queued, upgrade pending */

	struct auth_principal principal; /* who sent it: a copy, a revoked token's table entry goes */
	bool audit;			 /* recorded when it ends */
	bool token_checked;		 /* principal comes from a bearer token that checked out */
	unsigned status;		 /* the status queued; 0: none yet */
	uint64_t begun_usec;		 /* its request line came (CLOCK_MONOTONIC) */
	char method[16];
	char path[256]; /* without the query */
};

/* ---- accessors ---------------------------------------------------------------------------- */

const struct api_metrics *http_request_metrics(struct http_request *req)
{
	return req->server->cfg.metrics;
}

struct manager *http_request_manager(struct http_request *req)
{
	return req->server->manager;
}

const struct auth_principal *http_request_principal(struct http_request *req)
{
	return &req->principal;
}

struct event_loop *http_request_loop(struct http_request *req)
{
	return req->server->loop;
}

const struct route_match *http_request_route(struct http_request *req)
{
	return &req->route;
}

uint64_t http_request_max_wait_ms(struct http_request *req)
{
	return req->server->cfg.max_wait_ms;
}

static bool request_is_head(const struct http_request *req)
{
	return strcmp(req->method, "HEAD") == 0;
}

uint64_t http_request_wait_ms(struct http_request *req, uint64_t asked_ms)
{
	return request_is_head(req) ? 0 : MIN(asked_ms, req->server->cfg.max_wait_ms);
}

struct fleet *http_request_fleet(struct http_request *req)
{
	return req->server->cfg.fleet;
}

const char *http_request_method(struct http_request *req)
{
	return req->method;
}

const char *http_request_url(struct http_request *req)
{
	return req->url;
}

struct query_string {
	char *buf;
	size_t len;
	bool oom;
};

static void query_append_encoded(struct query_string *q, const char *s)
{
	static const char hex[] = "0123456789ABCDEF";

	for (; s && *s && !q->oom; s++) {
		unsigned char c = (unsigned char)*s;
		bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			     (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.' || c == '~';
		char *p = realloc(q->buf, q->len + 4);

		if (!p) {
			q->oom = true;
			return;
		}
		q->buf = p;
		if (plain) {
			q->buf[q->len++] = (char)c;
		} else {
			q->buf[q->len++] = '%';
			q->buf[q->len++] = hex[c >> 4];
			q->buf[q->len++] = hex[c & 15];
		}
		q->buf[q->len] = '\0';
	}
}

static enum MHD_Result query_encode_one(void *cls, enum MHD_ValueKind kind, const char *key,
					const char *value)
{
	struct query_string *q = cls;
	char *p = realloc(q->buf, q->len + 2);

	if (!p) {
		q->oom = true;
		return MHD_NO;
	}
	q->buf = p;
	if (q->len > 0)
		q->buf[q->len++] = '&';
	q->buf[q->len] = '\0';
	query_append_encoded(q, key);
	if (value && !q->oom) {
		p = realloc(q->buf, q->len + 2);
		if (!p) {
			q->oom = true;
			return MHD_NO;
		}
		q->buf = p;
		q->buf[q->len++] = '=';
		q->buf[q->len] = '\0';
		query_append_encoded(q, value);
	}
	return q->oom ? MHD_NO : MHD_YES;
}

char *http_request_query_string(struct http_request *req)
{
	struct query_string q = { .buf = strdup("") };

	if (!q.buf)
		return NULL;
	MHD_get_connection_values(req->connection, MHD_GET_ARGUMENT_KIND, query_encode_one, &q);
	if (q.oom) {
		free(q.buf);
		return NULL;
	}
	return q.buf;
}

uint64_t http_request_max_body_bytes(struct http_request *req)
{
	return req->server->cfg.max_body_bytes;
}

const char *http_request_query(struct http_request *req, const char *key, bool *ret_present)
{
	const char *value = NULL;
	size_t len = 0;
	bool present;

	present = MHD_lookup_connection_value_n(req->connection, MHD_GET_ARGUMENT_KIND, key,
						strlen(key), &value, &len) == MHD_YES;
	if (ret_present)
		*ret_present = present;
	return present ? value : NULL;
}

struct query_all {
	const char *key;
	const char **values;
	size_t max, n;
};

static enum MHD_Result query_all_one(void *cls, enum MHD_ValueKind kind, const char *key,
				     const char *value)
{
	struct query_all *q = cls;

	(void)kind;
	if (key && strcmp(key, q->key) == 0) {
		if (q->n < q->max)
			q->values[q->n] = value;
		q->n++;
	}
	return MHD_YES;
}

size_t http_request_query_all(struct http_request *req, const char *key, const char **ret,
			      size_t max)
{
	struct query_all q = { .key = key, .values = ret, .max = max };

	MHD_get_connection_values(req->connection, MHD_GET_ARGUMENT_KIND, query_all_one, &q);
	return q.n;
}

const char *http_request_query_n(struct http_request *req, const char *key, bool *ret_present,
				 size_t *ret_len)
{
	const char *value = NULL;
	size_t len = 0;
	bool present;

	present = MHD_lookup_connection_value_n(req->connection, MHD_GET_ARGUMENT_KIND, key,
						strlen(key), &value, &len) == MHD_YES;
	if (ret_present)
		*ret_present = present;
	*ret_len = present && value ? len : 0;
	return present ? value : NULL;
}

int http_request_stream_body(struct http_request *req, http_body_fn chunk, http_handler_fn end)
{
	if (!req->endpoint || !req->endpoint->stream || req->replied)
		return -EINVAL;
	req->body_fn = chunk;
	req->body_end = end;
	return 0;
}

const void *http_request_body(struct http_request *req, size_t *ret_len)
{
	*ret_len = req->body_len;
	return req->body;
}

bool http_request_gone(struct http_request *req)
{
	return req->gone;
}

void *http_request_state(struct http_request *req)
{
	return req->state;
}

static void request_free_state(struct http_request *req)
{
	void (*free_fn)(void *) = req->state_free;
	void *state = req->state;

	req->state = NULL;
	req->state_free = NULL;
	if (free_fn)
		free_fn(state);
}

void http_request_set_state(struct http_request *req, void *state, void (*free_fn)(void *state))
{
	request_free_state(req);
	req->state = state;
	req->state_free = free_fn;
}

static const char *request_name(struct http_request *req)
{
	return req->endpoint ? endpoint_to_string(req->route.endpoint) : "-";
}

/* ---- replies ------------------------------------------------------------------------------ */

/* A HEAD gets GET's status and headers, and MHD sends no body for it. An event stream and an
 * image export have no size, which would make them chunked, and MHD 0.9.75 sends the chunked
 * terminator even for a HEAD (five bytes a keep-alive client reads as the next answer): such an
 * answer is sent unchunked, without a Content-Length, and closes the connection. */
static void response_for_head(struct MHD_Response *r)
{
	static const char *const unsized[] = { "text/event-stream", "application/x-tar" };
	const char *type = MHD_get_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE);

	for (size_t i = 0; type && i < ELEMENTSOF(unsized); i++)
		if (strncmp(type, unsized[i], strlen(unsized[i])) == 0)
			(void)MHD_set_response_options(r, MHD_RF_HTTP_1_0_COMPATIBLE_STRICT,
						       MHD_RO_END);
}

int http_reply_response(struct http_request *req, unsigned status, struct MHD_Response *r)
{
	if (req->replied)
		return -EALREADY;
	if (request_is_head(req))
		response_for_head(r);
	if (MHD_queue_response(req->connection, status, r) != MHD_YES)
		return -EIO;
	req->replied = true;
	req->status = status;
	return 0;
}

/* headers: name, value, …, NULL; or NULL. */
static int reply_json_with(struct http_request *req, unsigned status, json_t *body,
			   const char *const *headers)
{
	char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
	struct MHD_Response *r;
	int ret;

	json_decref(body);
	if (!text)
		return -ENOMEM;
	r = MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE);
	if (!r) {
		free(text);
		return -ENOMEM;
	}
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
	for (size_t i = 0; headers && headers[i]; i += 2)
		MHD_add_response_header(r, headers[i], headers[i + 1]);
	ret = http_reply_response(req, status, r);
	MHD_destroy_response(r);
	return ret;
}

int http_reply_json(struct http_request *req, unsigned status, json_t *body)
{
	return reply_json_with(req, status, body, NULL);
}

static int reply_error_with(struct http_request *req, unsigned status, const char *message,
			    const char *field, const char *header, const char *value)
{
	const char *const headers[] = { header, value, NULL };

	log_debug("api request failed", "endpoint", request_name(req), "message", message, NULL);
	return reply_json_with(req, status, error_json(status, message, field), headers);
}

/* 426 names the protocol and the version to use (RFC 9110 15.5.22, RFC 6455 4.4). */
static int reply_upgrade_required(struct http_request *req, const char *message)
{
	static const char *const headers[] = { MHD_HTTP_HEADER_UPGRADE, "websocket",
					       "Sec-WebSocket-Version", "13", NULL };
	json_t *body = error_json(426, message, NULL);

	log_debug("api request failed", "endpoint", request_name(req), "message", message, NULL);
	/* error_http_code() has no name for 426. */
	json_object_set_new(json_object_get(body, "error"), "code",
			    json_string("upgrade_required"));
	return reply_json_with(req, 426, body, headers);
}

int http_reply_error(struct http_request *req, const struct station_error *e)
{
	unsigned status = error_http_status(e->err);

	if (e->err == STATION_EPAUSED || e->err == STATION_EFLEET)
		return http_reply_error_code(req, e, error_code_of(e->err), NULL, NULL);
	return reply_error_with(req, status, e->message, e->field,
				status == 401 ? MHD_HTTP_HEADER_WWW_AUTHENTICATE : NULL, "Bearer");
}

int http_reply_error_code(struct http_request *req, const struct station_error *e, const char *code,
			  const char *header, const char *value)
{
	unsigned status = error_http_status(e->err);
	const char *const headers[] = { header, value, NULL };
	json_t *body = error_json(status, e->message, e->field);

	log_debug("api request failed", "endpoint", request_name(req), "message", e->message, NULL);
	if (body && code)
		json_object_set_new(json_object_get(body, "error"), "code", json_string(code));
	return reply_json_with(req, status, body, headers);
}

int http_reply_status(struct http_request *req, unsigned status, const char *field, const char *fmt,
		      ...)
{
	char message[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(message, sizeof message, fmt, ap);
	va_end(ap);
	return reply_error_with(req, status, message, field,
				status == 401 ? MHD_HTTP_HEADER_WWW_AUTHENTICATE : NULL, "Bearer");
}

static bool long_lived_full(const struct http_connections *c)
{
	return c->long_lived >= c->limit - c->reserve;
}

int http_reply_busy(struct http_request *req)
{
	struct http_connections *c = req->server->conns;
	char message[200];

	c->refused_long++;
	snprintf(message, sizeof message,
		 "too many long-lived requests (%u of %u connections; %u kept for short requests)",
		 c->long_lived, c->limit, c->reserve);
	return reply_error_with(req, 503, message, NULL, MHD_HTTP_HEADER_RETRY_AFTER, "1");
}

int http_request_hold(struct http_request *req)
{
	struct http_connections *c = req->server->conns;

	if (req->held)
		return 0;
	if (long_lived_full(c))
		return -EBUSY;
	req->held = true;
	c->long_lived++;
	return 0;
}

const struct http_connections *http_request_connections(struct http_request *req)
{
	return req->server->conns;
}

unsigned http_connections_default_reserve(unsigned limit)
{
	unsigned r = MIN(MAX(limit / 8, 2u), 128u);

	return r < limit ? r : limit - 1;
}

/* ---- suspension --------------------------------------------------------------------------- */

/* MHD has no thread and no wake-up channel of its own here: after a resume it must be run
 * again from the loop. Time 0 is due in the loop's current pass over its timers (a resume comes
 * from an I/O source or a timer of that iteration), not in one more wait. */
static void server_wake(struct http_server *s)
{
	if (s->timer)
		(void)event_source_set_time(s->timer, 0);
}

static int on_hangup(struct event_source *src, int fd, uint32_t revents, void *userdata)
{
	struct http_request *req = userdata;

	log_debug("api client went away while waiting", "endpoint", request_name(req), NULL);
	req->gone = true;
	request_free_state(req);
	http_request_resume(req);
	return 0;
}

int http_request_suspend(struct http_request *req, http_handler_fn resume_fn)
{
	const union MHD_ConnectionInfo *ci;
	int r;

	if (req->suspended || req->gone)
		return -EALREADY;
	ci = MHD_get_connection_info(req->connection, MHD_CONNECTION_INFO_CONNECTION_FD);
	if (!ci)
		return -EIO;
	/* Only the hang-up: EPOLLIN would fire for every pipelined byte. */
	r = event_add_io(req->server->loop, &req->hangup, ci->connect_fd, EPOLLRDHUP, on_hangup,
			 req);
	if (r < 0)
		return r;
	MHD_suspend_connection(req->connection);
	req->suspended = true;
	req->resume_fn = resume_fn;
	return 0;
}

void http_request_resume(struct http_request *req)
{
	if (!req->suspended)
		return;
	event_source_free(req->hangup);
	req->hangup = NULL;
	req->suspended = false;
	MHD_resume_connection(req->connection);
	server_wake(req->server);
}

static int on_heartbeat(struct event_source *src, uint64_t now, void *userdata)
{
	struct http_request *req = userdata;

	if (req->suspended) {
		req->heartbeat_due = true;
		http_request_resume(req);
	}
	return 0;
}

ssize_t http_sse_idle(struct http_request *req, char *out, size_t max)
{
	static const char ping[] = HTTP_SSE_HEARTBEAT;
	uint64_t when = now_usec() + (uint64_t)HTTP_SSE_HEARTBEAT_MS * 1000;
	int r;

	if (req->heartbeat_due && max >= sizeof ping - 1) {
		req->heartbeat_due = false;
		memcpy(out, ping, sizeof ping - 1);
		return (ssize_t)(sizeof ping - 1);
	}
	req->heartbeat_due = false;
	r = req->heartbeat ?
		    event_source_set_time(req->heartbeat, when) :
		    event_add_timer(req->server->loop, &req->heartbeat, when, on_heartbeat, req);
	if (r >= 0)
		r = http_request_suspend(req, NULL);
	return r < 0 ? MHD_CONTENT_READER_END_WITH_ERROR : 0;
}

/* ---- WebSocket ---------------------------------------------------------------------------- */

static const char *request_header(struct http_request *req, const char *name)
{
	return MHD_lookup_connection_value(req->connection, MHD_HEADER_KIND, name);
}

const char *http_request_header(struct http_request *req, const char *name)
{
	return request_header(req, name);
}

const char *http_request_header_n(struct http_request *req, const char *name, size_t *ret_len)
{
	const char *value = NULL;
	size_t len = 0;

	if (MHD_lookup_connection_value_n(req->connection, MHD_HEADER_KIND, name, strlen(name),
					  &value, &len) != MHD_YES ||
	    !value)
		return NULL;
	*ret_len = len;
	return value;
}

struct header_count {
	const char *name;
	unsigned n;
};

static enum MHD_Result header_count_one(void *cls, enum MHD_ValueKind kind, const char *key,
					const char *value)
{
	struct header_count *c = cls;

	(void)kind;
	(void)value;
	if (key && strcasecmp(key, c->name) == 0)
		c->n++;
	return MHD_YES;
}

unsigned http_request_header_count(struct http_request *req, const char *name)
{
	struct header_count c = { .name = name };

	MHD_get_connection_values(req->connection, MHD_HEADER_KIND, header_count_one, &c);
	return c.n;
}

/* token is one of the comma-separated, case-insensitive elements of value. */
static bool header_has_token(const char *value, const char *token)
{
	size_t n = strlen(token);

	while (value && *value) {
		size_t k, e;

		value += strspn(value, " \t,");
		k = strcspn(value, ",");
		for (e = k; e > 0 && (value[e - 1] == ' ' || value[e - 1] == '\t'); e--)
			;
		if (e == n && strncasecmp(value, token, n) == 0)
			return true;
		value += k;
	}
	return false;
}

/* RFC 6455 4.2.1, once the endpoint is known. Sets req->websocket when the request is a valid
 * opening handshake; replies when it is a broken one. */
static int request_check_upgrade(struct http_request *req, const char *version)
{
	struct http_server *s = req->server;
	const char *upgrade = request_header(req, MHD_HTTP_HEADER_UPGRADE);
	const char *v;

	/* A HEAD is GET's answer without the body: never an upgrade. */
	if (!upgrade || !header_has_token(upgrade, "websocket") || request_is_head(req)) {
		if (!req->endpoint->fn)
			return reply_upgrade_required(req, "this endpoint is WebSocket only");
		return 0;
	}
	if (!req->endpoint->ws)
		return http_reply_status(req, 400, NULL, "endpoint %s has no WebSocket variant",
					 request_name(req));
	if (strcmp(version, MHD_HTTP_VERSION_1_1) != 0)
		return http_reply_status(req, 400, NULL, "a WebSocket upgrade needs HTTP/1.1");
	if (!header_has_token(request_header(req, MHD_HTTP_HEADER_CONNECTION), "upgrade"))
		return http_reply_status(req, 400, NULL,
					 "a WebSocket upgrade needs \"Connection: Upgrade\"");
	v = request_header(req, "Sec-WebSocket-Version");
	if (!v || strcmp(v, "13") != 0)
		return reply_upgrade_required(req, "Sec-WebSocket-Version must be 13");
	if (ws_accept_key(request_header(req, "Sec-WebSocket-Key"), req->ws_accept) < 0)
		return http_reply_status(req, 400, NULL,
					 "Sec-WebSocket-Key must be 16 bytes in base64");
	if (s->n_websockets >= s->cfg.max_websockets)
		return http_reply_status(req, 429, NULL, "too many WebSocket connections (%u)",
					 s->cfg.max_websockets);
	if (long_lived_full(s->conns))
		return http_reply_busy(req);
	req->websocket = true;
	return 0;
}

static void websocket_on_message(void *userdata, struct ws_conn *c, enum ws_opcode op,
				 const void *data, size_t n)
{
	struct http_websocket *h = userdata;

	if (h->ops->message)
		h->ops->message(h->userdata, c, op, data, n);
}

static void websocket_on_drain(void *userdata, struct ws_conn *c)
{
	struct http_websocket *h = userdata;

	if (h->ops->drain)
		h->ops->drain(h->userdata, c);
}

static void websocket_unlink(struct http_websocket *h)
{
	struct http_server *s = h->server;

	if (h->req)
		h->req->ws = NULL;
	if (h->prev)
		h->prev->next = h->next;
	else
		s->websockets = h->next;
	if (h->next)
		h->next->prev = h->prev;
	s->n_websockets--;
	if (s->cfg.metrics && s->cfg.metrics->websockets > 0)
		s->cfg.metrics->websockets--;
	s->conns->long_lived--;
	free(h);
}

/* The connection's last word: the endpoint hears, then our record of it goes. */
static void websocket_on_closed(void *userdata, struct ws_conn *c, uint16_t code,
				const char *reason)
{
	struct http_websocket *h = userdata;

	if (h->ops->closed)
		h->ops->closed(h->userdata, c, code, reason);
	websocket_unlink(h);
}

static const struct ws_conn_ops websocket_ops = {
	.message = websocket_on_message,
	.drain = websocket_on_drain,
	.closed = websocket_on_closed,
};

/* The connection is done with the socket: MHD closes it in its next run. */
static void websocket_release(void *userdata, int fd)
{
	struct http_websocket *h = userdata;

	if (!h->urh)
		return;
	(void)MHD_upgrade_action(h->urh, MHD_UPGRADE_ACTION_CLOSE);
	h->urh = NULL;
	server_wake(h->server);
}

/* MHD sent the 101 and hands over the socket (and what it read past the request). */
static void on_upgrade(void *cls, struct MHD_Connection *connection, void *con_cls,
		       const char *extra_in, size_t extra_in_size, MHD_socket sock,
		       struct MHD_UpgradeResponseHandle *urh)
{
	struct http_request *req = con_cls;
	struct http_websocket *h = req ? req->ws : NULL;
	int r;

	if (!h) {
		(void)MHD_upgrade_action(urh, MHD_UPGRADE_ACTION_CLOSE);
		return;
	}
	req->ws = NULL;
	h->req = NULL;
	h->urh = urh;
	if (h->raw) {
		h->raw->attach(h->userdata, h, sock, extra_in, extra_in_size);
		return;
	}
	r = ws_conn_attach(h->conn, sock, extra_in, extra_in_size, websocket_release, h);
	if (r < 0) {
		websocket_release(h, sock);
		ws_conn_abort(h->conn, WS_CLOSE_INTERNAL, "could not take over the socket");
	}
}

/* The subprotocol to select, when the client offered any (a browser fails the connection
 * unless one of its offers is selected): WS_PROTOCOL, else the offered bearer token as is.
 * NULL when none; malloc'd. */
static char *websocket_protocol(struct http_request *req)
{
	const char *v = request_header(req, WS_PROTOCOL_HEADER);
	char *bearer = NULL;

	while (v && *v) {
		size_t k;

		v += strspn(v, " \t,");
		k = strcspn(v, " \t,");
		if (k == strlen(WS_PROTOCOL) && strncmp(v, WS_PROTOCOL, k) == 0) {
			free(bearer);
			return strdup(WS_PROTOCOL);
		}
		if (!bearer && k > 0 && strncmp(v, WS_BEARER_PREFIX, strlen(WS_BEARER_PREFIX)) == 0)
			bearer = strndup(v, k);
		v += k;
	}
	return bearer;
}

static struct MHD_Response *websocket_response(struct http_request *req)
{
	struct MHD_Response *r = MHD_create_response_for_upgrade(on_upgrade, req->server);
	_cleanup_free_ char *protocol = websocket_protocol(req);

	if (r && MHD_add_response_header(r, MHD_HTTP_HEADER_UPGRADE, "websocket") == MHD_YES &&
	    MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "Upgrade") == MHD_YES &&
	    MHD_add_response_header(r, "Sec-WebSocket-Accept", req->ws_accept) == MHD_YES &&
	    (!protocol || MHD_add_response_header(r, WS_PROTOCOL_HEADER, protocol) == MHD_YES))
		return r;
	if (r)
		MHD_destroy_response(r);
	return NULL;
}

/* Queues the 101 that completes the upgrade (on_upgrade takes the socket). */
static int reply_switching_protocols(struct http_request *req)
{
	struct MHD_Response *resp = websocket_response(req);
	int r;

	if (!resp)
		return -ENOMEM;
	r = http_reply_response(req, MHD_HTTP_SWITCHING_PROTOCOLS, resp);
	MHD_destroy_response(resp);
	return r;
}

/* A WebSocket whose 101 is queued joins the server's list (closed on revocation and shutdown)
 * and counts as a long-lived connection until it is released. */
static void websocket_track(struct http_request *req, struct http_websocket *h)
{
	struct http_server *s = req->server;

	h->server = s;
	h->req = req;
	if (req->token_checked)
		snprintf(h->token_id, sizeof h->token_id, "%s", req->principal.token_id);
	h->next = s->websockets;
	if (s->websockets)
		s->websockets->prev = h;
	s->websockets = h;
	s->n_websockets++;
	if (s->cfg.metrics)
		s->cfg.metrics->websockets++;
	s->conns->long_lived++;
	req->ws = h;
}

int http_reply_websocket(struct http_request *req, const struct ws_conn_ops *ops, void *userdata,
			 struct ws_conn **ret)
{
	struct http_server *s = req->server;
	struct http_websocket *h;
	int r;

	if (!req->websocket || req->replied)
		return -EINVAL;
	h = calloc(1, sizeof *h);
	if (!h)
		return -ENOMEM;
	r = ws_conn_new(s->loop, &s->cfg.ws, &websocket_ops, h, &h->conn);
	if (r < 0) {
		free(h);
		return r;
	}
	r = reply_switching_protocols(req);
	if (r < 0) {
		ws_conn_free(h->conn);
		free(h);
		return r;
	}
	h->ops = ops;
	h->userdata = userdata;
	websocket_track(req, h);
	*ret = h->conn;
	return 0;
}

int http_reply_upgrade(struct http_request *req, const struct http_upgrade_ops *ops, void *userdata,
		       struct http_websocket **ret)
{
	struct http_websocket *h;
	int r;

	if (!req->websocket || req->replied)
		return -EINVAL;
	h = calloc(1, sizeof *h);
	if (!h)
		return -ENOMEM;
	r = reply_switching_protocols(req);
	if (r < 0) {
		free(h);
		return r;
	}
	h->raw = ops;
	h->userdata = userdata;
	websocket_track(req, h);
	*ret = h;
	return 0;
}

void http_upgrade_close(struct http_websocket *h)
{
	if (!h)
		return;
	if (h->urh) {
		(void)MHD_upgrade_action(h->urh, MHD_UPGRADE_ACTION_CLOSE);
		h->urh = NULL;
		server_wake(h->server);
	}
	websocket_unlink(h);
}

/* Ends a WebSocket of either kind from the server's side: code and reason for a local one. */
static void websocket_end(struct http_websocket *h, uint16_t code, const char *reason)
{
	if (h->raw)
		h->raw->close(h->userdata); /* calls http_upgrade_close() */
	else if (h->urh)
		(void)ws_close(h->conn, code, reason);
	else
		ws_conn_abort(h->conn, code, reason);
}

/* ---- request life ------------------------------------------------------------------------- */

/* A body may carry a secret's value: no copy of it outlives the request unwiped. */
static void request_body_free(struct http_request *req)
{
	if (req->body)
		explicit_bzero(req->body, req->body_alloc);
	free(req->body);
	req->body = NULL;
	req->body_len = req->body_alloc = 0;
}

/* A workspace named in the path by its name (docs/api.md, "Names and labels"): the route's id
 * becomes the id of the caller's tenant's workspace of that name, before anything reads it. A
 * name never has an id's shape, so an id is never taken for a name; another tenant's name finds
 * nothing, and the handler answers 404 for it as for any unknown id. */
static void request_resolve_name(struct http_request *req)
{
	static const char prefix[] = "/v1/workspaces/*";
	struct route_match *m = &req->route;

	if (!m->ws_id[0] || workspace_id_shaped(m->ws_id) ||
	    strncmp(endpoint_route(m->endpoint), prefix, strlen(prefix)) != 0)
		return;
	manager_workspace_resolve(req->server->manager, req->principal.tenant, m->ws_id, m->ws_id,
				  sizeof m->ws_id);
}

static void request_audit(struct http_request *req)
{
	const struct route_match *m = &req->route;
	struct manager_audit_entry e = {
		.principal = req->token_checked || !req->server->cfg.require_token ?
				     &req->principal :
				     NULL,
		.method = req->method,
		.route = req->endpoint == &mcp_endpoint ? "/mcp" :
			 req->endpoint			? endpoint_route(m->endpoint) :
							  "-",
		.path = req->path,
		.workspace_id = req->endpoint && req->endpoint != &mcp_endpoint ? m->ws_id : NULL,
		.object_id = !req->endpoint || req->endpoint == &mcp_endpoint ? NULL :
			     m->image[0]				      ? m->image :
										m->run_id,
		.status = req->status,
	};

	/* /v1/tokens/{id} and /v1/snapshots/{id} capture the object's id as the path's first. */
	if (req->endpoint &&
	    (m->endpoint == EP_TOKEN_GET || m->endpoint == EP_TOKEN_REVOKE ||
	     m->endpoint == EP_SNAPSHOT_GET || m->endpoint == EP_SNAPSHOT_DELETE)) {
		e.object_id = m->ws_id;
		e.workspace_id = NULL;
	}
	manager_audit_record(req->server->manager, &e);
}

static void request_free(struct http_request *req)
{
	struct http_server *s = req->server;

	if (req->audit && req->method[0])
		request_audit(req);
	if (req->method[0]) /* a dashboard file is not an API request */
		api_metrics_request(s->cfg.metrics,
				    req->endpoint == &mcp_endpoint ? API_METRICS_MCP :
				    req->endpoint		   ? (unsigned)req->route.endpoint :
								     API_METRICS_UNROUTED,
				    req->status, now_usec() - req->begun_usec);
	request_free_state(req);
	event_source_free(req->hangup);
	event_source_free(req->heartbeat);
	if (req->held)
		s->conns->long_lived--;
	if (req->ws) { /* a 101 that never went out */
		req->ws->req = NULL;
		if (req->ws->raw)
			req->ws->raw->close(req->ws->userdata);
		else
			ws_conn_abort(req->ws->conn, WS_CLOSE_ABNORMAL,
				      "the upgrade did not complete");
		req->ws = NULL;
	}
	if (req->prev)
		req->prev->next = req->next;
	else
		s->requests = req->next;
	if (req->next)
		req->next->prev = req->prev;
	request_body_free(req);
	free(req->url);
	free(req);
}

static struct http_request *request_new(struct http_server *s, struct MHD_Connection *c)
{
	struct http_request *req = calloc(1, sizeof *req);

	if (!req)
		return NULL;
	req->server = s;
	req->connection = c;
	req->begun_usec = now_usec();
	req->principal = auth_admin_principal;
	req->next = s->requests;
	if (s->requests)
		s->requests->prev = req;
	s->requests = req;
	return req;
}

static int hex_digit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* The request line's target as the client sent it, before libmicrohttpd decodes its escapes
 * in place: a decoded %00 cuts short the path every route reads (/v1/workspaces/ID%00x would
 * be ID's) and a query value read as a string. A path holding a control character, escaped or
 * not, and a query parameter holding a NUL are refused: why into ret (the parameter into
 * ret_field), "" when neither. */
static void target_check(const char *uri, char *ret, size_t size, char *ret_field,
			 size_t field_size)
{
	const char *param = NULL; /* the query parameter being read */

	ret[0] = ret_field[0] = '\0';
	for (const char *p = uri; *p; p++) {
		bool escaped = p[0] == '%' && hex_digit(p[1]) >= 0 && hex_digit(p[2]) >= 0;
		int c = escaped ? hex_digit(p[1]) * 16 + hex_digit(p[2]) : (unsigned char)*p;

		if (*p == '?' || (param && *p == '&'))
			param = p + 1;
		if (param && c == 0) {
			snprintf(ret_field, field_size, "%.*s", (int)strcspn(param, "=&"), param);
			snprintf(ret, size, "query parameter \"%s\" holds a NUL (%%00)", ret_field);
			return;
		}
		if (!param && (c < 0x20 || c == 0x7f)) {
			snprintf(ret, size, "the path holds a control character (%s%02X)",
				 escaped ? "%" : "byte 0x", (unsigned)c);
			return;
		}
		if (escaped)
			p += 2;
	}
}

/* Each request begins at its request line (MHD_OPTION_URI_LOG_CALLBACK): the request made here
 * is the one the handler gets, its target checked as sent. */
static void *on_request_line(void *cls, const char *uri, struct MHD_Connection *c)
{
	struct http_request *req = request_new(cls, c);

	if (req)
		target_check(uri, req->refused, sizeof req->refused, req->refused_field,
			     sizeof req->refused_field);
	return req;
}

/* Browsers cannot set Authorization on a WebSocket: an upgrade may instead offer the token as
 * a subprotocol "bearer.<token>" (docs/api.md, "Authentication"). Copies the first such
 * offer's token into ret; false when there is none (or it does not fit). */
static bool websocket_bearer(struct MHD_Connection *c, char *ret, size_t size)
{
	const char *upgrade =
		MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_UPGRADE);
	const char *v = MHD_lookup_connection_value(c, MHD_HEADER_KIND, WS_PROTOCOL_HEADER);

	if (!upgrade || !header_has_token(upgrade, "websocket"))
		return false;
	while (v && *v) {
		size_t k;

		v += strspn(v, " \t,");
		k = strcspn(v, " \t,");
		if (k > strlen(WS_BEARER_PREFIX) && k - strlen(WS_BEARER_PREFIX) < size &&
		    strncmp(v, WS_BEARER_PREFIX, strlen(WS_BEARER_PREFIX)) == 0) {
			k -= strlen(WS_BEARER_PREFIX);
			memcpy(ret, v + strlen(WS_BEARER_PREFIX), k);
			ret[k] = '\0';
			return true;
		}
		v += k;
	}
	return false;
}

/* The bearer token of the request (the Authorization header, or a WebSocket's subprotocol
 * offer) to its principal: 0, -ENOKEY when it carries none, or the check's -errno. The unix
 * socket's requests need none: they stay the admin principal. */
static int request_authenticate(struct http_request *req)
{
	struct http_server *s = req->server;
	const char *h = MHD_lookup_connection_value(req->connection, MHD_HEADER_KIND,
						    MHD_HTTP_HEADER_AUTHORIZATION);
	char token[256];
	int r;

	if (!s->cfg.require_token)
		return 0;
	if (!s->cfg.authenticate)
		return -EACCES;
	if (!h && websocket_bearer(req->connection, token, sizeof token)) {
		r = s->cfg.authenticate(s->cfg.token_userdata, token, strlen(token),
					&req->principal);
		explicit_bzero(token, sizeof token);
	} else {
		if (!h || strncasecmp(h, "Bearer ", 7) != 0)
			return -ENOKEY;
		h += 7;
		while (*h == ' ')
			h++;
		if (!*h)
			return -ENOKEY;
		r = s->cfg.authenticate(s->cfg.token_userdata, h, strlen(h), &req->principal);
	}
	if (r < 0) {
		req->principal = auth_admin_principal; /* not used: the request ends 401 */
		return r;
	}
	req->token_checked = true;
	return 0;
}

/* The 401 says why: no token, a revoked one, an expired one, or one not known here. */
static int reply_unauthenticated(struct http_request *req, int r)
{
	switch (r) {
	case -ENOKEY:
		return http_reply_status(
			req, 401, NULL,
			"a bearer token is required (Authorization: Bearer <token>)");
	case -EKEYREVOKED:
		return http_reply_status(req, 401, NULL, "the bearer token was revoked");
	case -EKEYEXPIRED:
		return http_reply_status(req, 401, NULL, "the bearer token has expired");
	default:
		return http_reply_status(req, 401, NULL, "a valid bearer token is required");
	}
}

/* What the principal's scope allows at this endpoint; replies 403 when it is not allowed. */
static int request_check_scope(struct http_request *req, const char *method)
{
	const struct auth_principal *p = &req->principal;
	enum endpoint ep = req->route.endpoint;
	const char *scope = auth_scope_to_string(p->scope) ?: "unknown";

	if (p->scope == AUTH_SCOPE_ADMIN)
		return 0;
	if (ep == EP_TOKEN_LIST || ep == EP_TOKEN_CREATE || ep == EP_TOKEN_GET ||
	    ep == EP_TOKEN_REVOKE || ep == EP_AUDIT_LIST)
		return http_reply_status(req, 403, NULL,
					 "a %s token cannot manage tokens or read the audit log: "
					 "that needs an admin token",
					 scope);
	if (p->scope != AUTH_SCOPE_READ)
		return 0;
	if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0)
		return http_reply_status(
			req, 403, NULL,
			"a read token may only GET: %.16s %.200s needs a tenant or "
			"admin token",
			method, req->path);
	/* A terminal's WebSocket carries keystrokes in: not a read. */
	if (ep == EP_TERMINAL_ATTACH)
		return http_reply_status(req, 403, NULL,
					 "a read token cannot attach to a terminal (it sends "
					 "input): that needs a tenant or admin token");
	return 0;
}

struct query_check {
	const char *const *known;
	const char *unknown;
};

static enum MHD_Result query_check_one(void *cls, enum MHD_ValueKind kind, const char *key,
				       const char *value)
{
	struct query_check *q = cls;

	for (const char *const *k = q->known; *k; k++)
		if (strcmp(key, *k) == 0)
			return MHD_YES;
	q->unknown = key;
	return MHD_NO;
}

static bool content_length_over(struct MHD_Connection *c, uint64_t max, uint64_t *ret_len)
{
	const char *h =
		MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
	uint64_t n = 0;

	*ret_len = 0;
	if (!h)
		return false;
	/* MHD has refused a malformed value before calling us. */
	for (; *h >= '0' && *h <= '9'; h++) {
		if (n > max)
			return true;
		n = n * 10 + (uint64_t)(*h - '0');
	}
	*ret_len = n;
	return n > max;
}

static const char *content_type(struct http_request *req)
{
	return MHD_lookup_connection_value(req->connection, MHD_HEADER_KIND,
					   MHD_HTTP_HEADER_CONTENT_TYPE);
}

static int reply_unsupported_media(struct http_request *req)
{
	return http_reply_status(req, 415, NULL,
				 "request body must be application/json, not \"%.100s\"",
				 content_type(req) ?: "(none)");
}

static const char *method_message(const char *method, const char *url, const char *allow)
{
	static char buf[300];

	snprintf(buf, sizeof buf, "method %.16s is not allowed on %.200s (allowed: %s)", method,
		 url, allow);
	return buf;
}

int http_reply_method_not_allowed(struct http_request *req, const char *method, const char *url,
				  const char *allow)
{
	return reply_error_with(req, 405, method_message(method, url, allow), NULL,
				MHD_HTTP_HEADER_ALLOW, allow);
}

static int endpoint_mcp(struct http_request *req)
{
	return api_mcp(req, req->server->cfg.mcp_argv, req->server->cfg.mcp_listen_host);
}

/* /mcp: Host and Origin (403) before the token (401), then the method (POST only). */
static int request_check_mcp(struct http_request *req, const char *url, const char *method,
			     const char *version)
{
	struct http_server *s = req->server;
	const char *why = NULL;
	uint64_t len = 0;

	int r;

	if (api_mcp_check(req, s->cfg.mcp_listen_host ?: "", s->cfg.mcp_hosts, &why) < 0)
		return http_reply_status(req, 403, NULL, "%s", why);
	r = request_authenticate(req);
	if (r < 0)
		return reply_unauthenticated(req, r);
	if (strcmp(method, "POST") != 0)
		return http_reply_method_not_allowed(req, method, url, "POST");
	req->endpoint = &mcp_endpoint;
	if (content_length_over(req->connection, s->cfg.max_body_bytes, &len))
		return http_reply_status(req, 413, NULL, "request body is over %llu bytes",
					 (unsigned long long)s->cfg.max_body_bytes);
	if (!validate_content_type(content_type(req)))
		return reply_unsupported_media(req);
	return request_check_upgrade(req, version);
}

/* The first call, with the headers: everything that can be refused before the body is read. */
static int request_check_headers(struct http_request *req, const char *url, const char *method,
				 const char *version)
{
	struct http_server *s = req->server;
	struct query_check q = {};
	const char *allow = NULL;
	uint64_t len = 0;
	int r;

	if (req->refused[0])
		return http_reply_status(req, 400,
					 req->refused_field[0] ? req->refused_field : NULL, "%s",
					 req->refused);
	/* The dashboard's static files hold no data: no token (its API calls carry one). */
	if (web_path(url))
		return web_reply(req, method, url, s->web_csp);
	snprintf(req->method, sizeof req->method, "%s", method);
	snprintf(req->path, sizeof req->path, "%s", url);
	req->audit = s->cfg.audit && (s->cfg.require_token ||
				      (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0));
	if (s->cfg.mcp_argv && strcmp(url, "/mcp") == 0)
		return request_check_mcp(req, url, method, version);
	r = request_authenticate(req);
	if (r < 0)
		return reply_unauthenticated(req, r);
	req->url = strdup(url);
	if (!req->url)
		return http_reply_status(req, 500, NULL, "out of memory");
	r = router_match(method, url, &req->route, &allow);
	if (r < 0)
		return http_reply_status(req, 404, NULL, "no such endpoint or id: %s %.200s",
					 method, url);
	if (r == 0)
		return http_reply_method_not_allowed(req, method, url, allow);
	req->endpoint = &endpoints[req->route.endpoint];
	r = request_check_scope(req, method);
	if (r < 0 || req->replied)
		return r;
	request_resolve_name(req);
	q.known = req->endpoint->query;
	if (q.known)
		MHD_get_connection_values(req->connection, MHD_GET_ARGUMENT_KIND, query_check_one,
					  &q);
	if (q.unknown)
		return http_reply_status(req, 400, q.unknown, "unknown query parameter \"%.64s\"",
					 q.unknown);
	if (!req->endpoint->stream &&
	    content_length_over(req->connection, s->cfg.max_body_bytes, &len))
		return http_reply_status(req, 413, NULL, "request body is over %llu bytes",
					 (unsigned long long)s->cfg.max_body_bytes);
	if (len > 0 && req->endpoint->body && !validate_content_type(content_type(req)))
		return reply_unsupported_media(req);
	return request_check_upgrade(req, version);
}

/* Keeps at most max_body_bytes; beyond that the rest is read and dropped (413 at the end). */
static void request_take_body(struct http_request *req, const char *data, size_t n)
{
	uint64_t max = req->server->cfg.max_body_bytes;
	char *p;

	if (req->body_too_large || req->body_oom)
		return;
	if (req->body_len + n > max) {
		req->body_too_large = true;
		request_body_free(req);
		return;
	}
	if (req->body_len + n > req->body_alloc) {
		size_t want = MAX(req->body_len + n, MIN(MAX(req->body_alloc * 2, 4096u), max));

		p = malloc(want); /* not realloc: the old copy is wiped first */
		if (!p) {
			req->body_oom = true;
			return;
		}
		size_t len = req->body_len;
		if (len)
			memcpy(p, req->body, len);
		request_body_free(req);
		req->body = p;
		req->body_len = len;
		req->body_alloc = want;
	}
	memcpy(req->body + req->body_len, data, n);
	req->body_len += n;
}

static int request_dispatch(struct http_request *req)
{
	req->dispatched = true;
	if (req->body_too_large)
		return http_reply_status(req, 413, NULL, "request body is over %llu bytes",
					 (unsigned long long)req->server->cfg.max_body_bytes);
	if (req->body_oom)
		return http_reply_status(req, 500, NULL, "out of memory reading the request body");
	if (req->body_len > 0 && req->endpoint->body && !validate_content_type(content_type(req)))
		return reply_unsupported_media(req);
	return req->websocket ? req->endpoint->ws(req) : req->endpoint->fn(req);
}

static enum MHD_Result request_result(struct http_request *req, int r);

/* A streamed body: the handler runs at the headers and either replies at once or takes the
 * body (http_request_stream_body()). */
static enum MHD_Result request_dispatch_stream(struct http_request *req)
{
	int r;

	req->dispatched = true;
	r = req->endpoint->fn(req);
	if (r >= 0 && !req->replied && !req->body_fn)
		r = http_reply_status(req, 500, NULL, "the request was not answered");
	if (r < 0 && r != -EALREADY)
		return MHD_NO;
	return MHD_YES;
}

static enum MHD_Result request_result(struct http_request *req, int r)
{
	if (r < 0 && r != -EALREADY) {
		log_debug("api request aborted", "endpoint", request_name(req), "error",
			  strerror(-r), NULL);
		return MHD_NO;
	}
	if (!req->replied && !req->suspended) {
		/* A handler that neither replied nor waited: never leave MHD spinning on us. */
		r = http_reply_status(req, 500, NULL, "the request was not answered");
		return r < 0 ? MHD_NO : MHD_YES;
	}
	return MHD_YES;
}

/* The manager sees what the request's principal may see while its handlers run (tenant
 * scoping, docs/security.md "The tenant boundary"). */
static void request_scope(struct http_request *req)
{
	manager_set_viewer(req->server->manager, req->principal.tenant);
}

static enum MHD_Result access_serve(struct http_request *req, struct MHD_Connection *c,
				    const char *url, const char *method, const char *version,
				    const char *data, size_t *data_size, void **con_cls,
				    struct http_server *s)
{
	http_handler_fn fn;
	int r;

	if (!req) /* out of memory at its request line: its target was never checked */
		return MHD_NO;
	if (!req->started) {
		req->started = true;
		r = request_check_headers(req, url, method, version);
		request_scope(req);
		if (r >= 0 && !req->replied && req->endpoint && req->endpoint->stream)
			return request_dispatch_stream(req);
		return r < 0 && r != -EALREADY ? MHD_NO : MHD_YES;
	}
	request_scope(req);
	if (req->gone)
		return MHD_NO;
	if (*data_size > 0 && req->body_fn && !req->replied) {
		ssize_t n = req->body_fn(req, data, *data_size);

		if (n < 0 || (size_t)n > *data_size)
			return MHD_NO;
		*data_size -= (size_t)n;
		return MHD_YES;
	}
	if (*data_size > 0) {
		if (!req->replied)
			request_take_body(req, data, *data_size);
		*data_size = 0;
		return MHD_YES;
	}
	if (req->gone)
		return MHD_NO;
	if (req->replied)
		return MHD_YES;
	if (req->resume_fn) {
		fn = req->resume_fn;
		req->resume_fn = NULL;
		return request_result(req, fn(req));
	}
	if (req->body_end) {
		fn = req->body_end;
		req->body_end = NULL;
		req->body_fn = NULL;
		return request_result(req, fn(req));
	}
	if (req->dispatched)
		return MHD_NO;
	return request_result(req, request_dispatch(req));
}

static enum MHD_Result on_access(void *cls, struct MHD_Connection *c, const char *url,
				 const char *method, const char *version, const char *data,
				 size_t *data_size, void **con_cls)
{
	struct http_server *s = cls;
	enum MHD_Result r;

	r = access_serve(*con_cls, c, url, method, version, data, data_size, con_cls, s);
	manager_set_viewer(s->manager, NULL);
	return r;
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
			 enum MHD_RequestTerminationCode toe)
{
	struct http_request *req = *con_cls;

	if (toe == MHD_REQUEST_TERMINATED_WITH_ERROR)
		((struct http_server *)cls)->run_again = true;
	if (!req)
		return;
	*con_cls = NULL;
	request_free(req);
}

/* ---- the server --------------------------------------------------------------------------- */

/* MHD often has more to do at once after a run (a resumed connection is only taken back in
 * one run and served in the next; a sent reply is finished in the next): a few runs here
 * instead of as many passes of the loop, each with its own wait. Bounded, so that other sources
 * are not kept waiting. */
#define SERVER_RUNS_AT_ONCE 3

static void server_run(struct http_server *s)
{
	MHD_UNSIGNED_LONG_LONG ms = 0;
	uint64_t when = UINT64_MAX;
	bool timed = false;

	s->run_again = false;
	for (int i = 0; i < SERVER_RUNS_AT_ONCE && ms == 0; i++) {
		(void)MHD_run(s->daemon);
		timed = MHD_get_timeout(s->daemon, &ms) == MHD_YES;
		if (!timed)
			break;
	}
	if (timed)
		when = now_usec() + (uint64_t)MIN(ms, 3600000ULL) * 1000;
	if (s->run_again)
		when = 0;
	(void)event_source_set_time(s->timer, when);
}

static int on_mhd_io(struct event_source *src, int fd, uint32_t revents, void *userdata)
{
	server_run(userdata);
	return 0;
}

static int on_mhd_timer(struct event_source *src, uint64_t now, void *userdata)
{
	server_run(userdata);
	return 0;
}

static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
	char buf[512];
	size_t n;

	vsnprintf(buf, sizeof buf, fmt, ap);
	n = strlen(buf);
	while (n > 0 && buf[n - 1] == '\n')
		buf[--n] = '\0';
	log_debug("libmicrohttpd", "detail", buf, NULL);
}

/* Every connection MHD holds, upgraded ones included, from its start to its close. */
static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
			  enum MHD_ConnectionNotificationCode toe)
{
	struct http_server *s = cls;

	if (toe == MHD_CONNECTION_NOTIFY_STARTED)
		s->conns->open++;
	else if (toe == MHD_CONNECTION_NOTIFY_CLOSED && s->conns->open > 0)
		s->conns->open--;
}

/* The gate admits a connection: MHD owns fd from here on (it closes it on failure too). */
static void server_admit(void *userdata, int fd, const struct sockaddr *sa, socklen_t len)
{
	struct http_server *s = userdata;

	if (MHD_add_connection(s->daemon, fd, sa, len) != MHD_YES)
		log_debug("libmicrohttpd refused a connection", NULL);
	server_wake(s);
}

/* MHD never sees the listening socket: the gate accepts and hands connections over. */
static struct MHD_Daemon *server_start_mhd(struct http_server *s)
{
	unsigned flags = MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_ALLOW_UPGRADE |
			 MHD_USE_TURBO | MHD_USE_ERROR_LOG | MHD_USE_NO_LISTEN_SOCKET;

	/* clang-format off */
	return MHD_start_daemon(flags, 0, NULL, NULL, on_access, s,
				MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, s, /* first: see MHD */
				MHD_OPTION_CONNECTION_LIMIT, s->conns->limit,
				MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)HTTP_IDLE_TIMEOUT_SEC,
				MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)HTTP_CONNECTION_MEMORY,
				MHD_OPTION_STRICT_FOR_CLIENT, (int)1,
				MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
				MHD_OPTION_URI_LOG_CALLBACK, on_request_line, s,
				MHD_OPTION_NOTIFY_CONNECTION, on_connection, s,
				MHD_OPTION_END);
	/* clang-format on */
}

static void server_connections(struct http_server *s)
{
	if (s->cfg.connections) {
		s->conns = s->cfg.connections;
		return;
	}
	s->own_conns.limit = s->cfg.max_connections;
	s->own_conns.reserve = http_connections_default_reserve(s->own_conns.limit);
	s->conns = &s->own_conns;
}

static void config_defaults(struct http_config *cfg)
{
	if (cfg->max_body_bytes == 0)
		cfg->max_body_bytes = HTTP_DEFAULT_MAX_BODY_BYTES;
	if (cfg->max_wait_ms == 0)
		cfg->max_wait_ms = HTTP_DEFAULT_MAX_WAIT_MS;
	if (cfg->max_connections < 2)
		cfg->max_connections = HTTP_DEFAULT_MAX_CONNECTIONS;
	if (cfg->max_websockets == 0)
		cfg->max_websockets = HTTP_DEFAULT_MAX_WEBSOCKETS;
	ws_limits_defaults(&cfg->ws);
}

static int server_attach(struct http_server *s)
{
	const union MHD_DaemonInfo *info;
	int r;

	info = MHD_get_daemon_info(s->daemon, MHD_DAEMON_INFO_EPOLL_FD);
	if (!info)
		return -EIO;
	r = event_add_io(s->loop, &s->io, info->epoll_fd, EPOLLIN, on_mhd_io, s);
	if (r < 0)
		return r;
	/* First run now: accepts whatever queued up before we were attached. */
	return event_add_timer(s->loop, &s->timer, now_usec(), on_mhd_timer, s);
}

int http_server_new(struct event_loop *loop, struct manager *m, int listen_fd,
		    const struct http_config *cfg, struct http_server **ret)
{
	struct http_server *s;
	int fd, r;

	s = calloc(1, sizeof *s);
	if (!s)
		return -ENOMEM;
	r = web_csp_new(cfg->preview_scheme, cfg->preview_domain, cfg->preview_port, &s->web_csp);
	if (r < 0) {
		free(s);
		return r;
	}
	s->loop = loop;
	s->manager = m;
	s->cfg = *cfg;
	config_defaults(&s->cfg);
	server_connections(s);

	s->daemon = server_start_mhd(s);
	if (!s->daemon) {
		free(s);
		return -EIO;
	}
	fd = fcntl(listen_fd, F_DUPFD_CLOEXEC, 3);
	r = fd < 0 ? negative_errno() :
		     http_gate_new(loop, fd, s->conns, server_admit, s, &s->gate);
	if (r < 0) {
		if (fd >= 0)
			close(fd);
		http_server_free(s);
		return r;
	}
	r = server_attach(s);
	if (r < 0) {
		http_server_free(s);
		return r;
	}
	close(listen_fd);
	*ret = s;
	return 0;
}

void http_server_revoke(struct http_server *s, const char *token_id)
{
	struct http_websocket *h, *h_next;

	if (!s || !token_id)
		return;
	for (struct http_request *req = s->requests; req; req = req->next) {
		const union MHD_ConnectionInfo *ci;

		if (!req->token_checked || strcmp(req->principal.token_id, token_id) != 0)
			continue;
		/* A long-poll or a watch: released, and its connection closed below. */
		request_free_state(req);
		if (req->suspended) {
			req->gone = true;
			http_request_resume(req);
		}
		/* An event stream being written, or a request still coming in: no more of it. */
		ci = MHD_get_connection_info(req->connection, MHD_CONNECTION_INFO_CONNECTION_FD);
		/* (A WebSocket's socket is its connection's: closed below, with a close frame.) */
		if (ci && !req->websocket)
			(void)shutdown(ci->connect_fd, SHUT_RDWR);
	}
	for (h = s->websockets; h; h = h_next) {
		h_next = h->next;
		if (strcmp(h->token_id, token_id) != 0)
			continue;
		websocket_end(h, WS_CLOSE_POLICY, "the token was revoked");
	}
	server_wake(s);
}

void http_server_free(struct http_server *s)
{
	if (!s)
		return;
	http_gate_free(s->gate);
	/* Upgraded sockets go back to MHD first, and their endpoints hear of it (1001). */
	while (s->websockets) {
		if (s->websockets->raw)
			s->websockets->raw->close(s->websockets->userdata);
		else
			ws_conn_shutdown(s->websockets->conn);
	}
	/* MHD must not be stopped with suspended connections: release their waits and hand
	 * them back; MHD_stop_daemon() closes them and reports each one completed. */
	for (struct http_request *req = s->requests; req; req = req->next) {
		request_free_state(req);
		if (req->suspended) {
			req->gone = true;
			http_request_resume(req);
		}
	}
	if (s->daemon)
		MHD_stop_daemon(s->daemon);
	event_source_free(s->io);
	event_source_free(s->timer);
	free(s->web_csp);
	free(s);
}
