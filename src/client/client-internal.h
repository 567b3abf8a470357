/* SPDX-License-Identifier: MIT */
#pragma once

/* What client.c (handle, transport, worker and workspace calls) shares with exec.c (runs).
 * Not installed. */

#include "basic/cleanup.h"
#include "basic/json-util.h"
#include "station/client.h"

/* The transport over TCP and TLS (libcurl, loaded at its first use; curl.c). */
struct client_curl;

struct station_client {
	int fd;			  /* the unix socket's connection kept between calls, or -1 */
	char *buf;		  /* its receive buffer, CLIENT_BUF_SIZE, made at first use */
	struct client_curl *curl; /* NULL until the first request over TCP */
	char *endpoint;		  /* for people: "unix:/path" or "http://host:port" */
	char *base_url;		  /* "http://localhost" on a unix socket */
	char *socket_path;	  /* NULL over TCP */
	char *auth_header;	  /* "Authorization: Bearer …" or NULL */
	int (*interrupt)(void *userdata);
	void *interrupt_userdata;
	long last_status;
	char error_code[64];
	char error[1024];
	long transfer_status; /* the status of the answer being received (0 before its head) */
	/* A client over several workers (station_client_new_workers(), workers.c): one handle per
	 * worker, each used by one call at a time, so a list can ask them all at once. NULL for a
	 * client of one controller. */
	struct station_client **workers;
	size_t n_workers;
	struct station_client *current; /* the worker handle of the last failed call, or NULL */
	char *worker_name;		/* a worker handle's name: its errors name it */
	uint64_t timeout_ms; /* the answer deadline (station_client_set_timeout()), > 0 */
};

/* How long a call that asks every worker (a list, the choice of a worker for a create) waits
 * for one before it counts as not answering. */
#define CLIENT_WORKER_TIMEOUT_MS 10000L

/* The largest response body kept in memory: a run with 8 MiB of head and tail per stream is
 * about 22 MiB of base64; this leaves room and still bounds a misbehaving server. */
#define CLIENT_RESPONSE_MAX (256u * 1024 * 1024)
#define CLIENT_CONNECT_TIMEOUT_MS 10000L
/* How long an answer may keep a call waiting beyond what the call asked the server to hold
 * (waitMs), and the longest silence inside an answer once it began; STATION_TIMEOUT_MS or
 * station_client_set_timeout() change it. */
#define CLIENT_TIMEOUT_MS ((uint64_t)STATION_DEFAULT_TIMEOUT_MS)
/* The server pings a WebSocket after this long without input (ws-conn.h): a followed stream
 * that stays silent longer than this plus the answer deadline has a server that stopped. */
#define CLIENT_WS_PING_MS 30000L
/* The server sends a quiet event stream a heartbeat comment this often (docs/api.md): one
 * silent longer than this plus the answer deadline has a server that stopped. */
#define CLIENT_SSE_HEARTBEAT_MS 15000L
#define CLIENT_BUF_SIZE (64u * 1024)

/* Records a failure that is not an API error and returns err, so callers can
 * `return client_error(…)`. */
int client_error(struct station_client *c, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* A controller that did not answer: "no controller at URL: why", or for a worker handle
 * "worker NAME (URL) did not answer: why". Returns err. */
int client_unreachable(struct station_client *c, int err, const char *why);

/* A call that got no answer within ms (connect, head or body): "worker NAME (URL) did not
 * answer within N s", or "URL did not answer within N s". Returns -ETIMEDOUT. */
int client_timed_out(struct station_client *c, uint64_t ms);

/* How long the answer to a request for path may take to begin: the answer deadline plus the
 * waitMs=N the path asks the server to hold (at most STATION_MAX_WAIT_MS). */
uint64_t client_answer_ms(const struct station_client *c, const char *path);

/* On a client over several workers, *c becomes the handle of the worker ws names (the prefix
 * of the id); an id whose worker is not in the list is -ENOENT naming it. ws without an id's
 * shape is a name: the worker whose GET /v1/workspaces?name= lists it (-ENOENT when none does,
 * -EINVAL naming them when several do). A client of one controller is left as it is. */
int client_route(struct station_client **c, const char *ws);
#define CLIENT_ROUTE(c, ws)                                                                        \
	do {                                                                                       \
		int route_r_ = client_route(&(c), (ws));                                           \
		if (route_r_ < 0)                                                                  \
			return route_r_;                                                           \
	} while (0)

/* For a create on a client over several workers: *c becomes the handle of the worker named
 * (-ENOENT when it is not in the list), or with worker NULL of the one with the most free
 * capacity (route.c). On a client of one controller, worker must be NULL. */
int client_route_create(struct station_client **c, const char *worker);

/* Builds "/v1/workspaces/{ws}", then "/commands/{run}" when run is non-NULL, then suffix
 * (NULL, or starting with '/' or '?'). Ids go into the URL as they are, so anything but
 * [A-Za-z0-9_-] is refused with -EINVAL. */
int client_path(struct station_client *c, const char *ws, const char *run, const char *suffix,
		char **ret);

/* Sets o["env"] to an object made of the NULL-terminated "KEY=VALUE" strings of env; nothing
 * when env is NULL. -EINVAL for an entry without '=' or with an empty key. */
int client_put_env(struct station_client *c, json_t *o, char *const *env);
/* labels.c: "name" (when not NULL) and "labels" (from "KEY=VALUE" entries; NULL: none) into o. */
int client_put_labels(struct station_client *c, json_t *o, const char *name, char *const *labels);

/* Follows the server-sent output events at path (output, gap, end) the way station_run_follow()
 * does; what names the stream in errors. With any_end, any JSON object ends the stream (not
 * only a terminal run). */
int client_follow(struct station_client *c, const char *path, const char *what, bool any_end,
		  const struct station_follow_callbacks *cb, void *userdata, json_t **ret);

/* Sets o[key] to value unless value is NULL. A value that cannot be sent (not UTF-8) is -EINVAL
 * rather than a field silently left out. */
int client_put_string(struct station_client *c, json_t *o, const char *key, const char *value);

/* POST body to a creating endpoint with an Idempotency-Key header: key, or a random one made
 * here when key is NULL (so the transport's own retry of the request, on a kept connection
 * the server had closed, cannot create twice). The reply is parsed as station_request_json()
 * does. -EINVAL without a request for a key of bad shape. */
int client_create(struct station_client *c, const char *path, json_t *body, const char *key,
		  json_t **ret);

#define CLIENT_ETAG_MAX STATION_ETAG_MAX

/* One request with what the JSON calls do not need: raw bodies, uploads from an fd, extra
 * headers, a response body streamed to a callback, the ETag captured. */
struct client_io {
	const char *method;
	const char *path;
	const char *accept;	    /* a whole header; NULL: "Accept: application/json" */
	const char *content_type;   /* a whole header, with a body; NULL: none */
	const char *const *headers; /* more whole headers, NULL-terminated; NULL: none */
	const void *data;	    /* the body from memory (size bytes), or NULL */
	size_t size;
	int upload_fd;	     /* >= 0: the body is read from this fd as it is sent */
	int64_t upload_size; /* with upload_fd: its length, or -1 (sent chunked) */
	/* A 2xx response's body goes to on_data as it arrives (the status is known by then);
	 * without on_data it is kept in body. */
	int (*on_data)(const void *data, size_t len, void *userdata);
	void *userdata;
	char *etag; /* NULL, or CLIENT_ETAG_MAX bytes that receive the response's ETag ("" none) */
	/* Results */
	long status;
	char *body; /* the kept body of a 2xx answer (NUL-terminated, free()), or NULL */
	size_t body_len;
};

/* One answer as a transport receives it. */
struct client_response {
	struct station_client *c;
	int (*on_data)(const void *data, size_t len, void *userdata); /* NULL: keep the body */
	void *userdata;
	int stop;	/* < 0: why the body's delivery stopped the transfer */
	int body_error; /* < 0: keeping the body failed: -E2BIG past CLIENT_RESPONSE_MAX, -ENOMEM */
	long status;	/* 0 until known */
	char *body;	/* NUL-terminated when non-NULL */
	size_t len;
	size_t cap;
	char *etag; /* where the ETag header goes (CLIENT_ETAG_MAX bytes), or NULL */
	const struct client_io *io;
	int upload_error; /* < 0: reading the upload's fd failed */
};

/* Body bytes of r's answer (r->status known): streamed to on_data for a 2xx, else kept.
 * Returns r->stop: < 0 stops the transfer. */
int client_response_data(struct client_response *r, const void *data, size_t n);

/* An ETag header's value (without the name), trimmed, goes to r->etag when it fits. */
void client_response_etag(struct client_response *r, const char *value, size_t n);

/* The transports: one request, its answer in r. 0 once a whole answer arrived, or -errno with
 * the error recorded. http1.c carries the unix socket, curl.c http:// and https://. */
int client_http1_perform(struct station_client *c, const struct client_io *io,
			 struct client_response *r);
void client_http1_close(struct station_client *c);
int client_curl_perform(struct station_client *c, const struct client_io *io,
			struct client_response *r);
void client_curl_free(struct client_curl *t);

/* Performs io. Returns 0 for a 2xx answer; any other status is the API error it carries (as for
 * station_request_json()); < 0 when no answer arrived or on_data stopped the transfer. */
int client_io(struct station_client *c, struct client_io *io);

/* Percent-encodes s for a query value: RFC 3986's unreserved characters and '/' stay. NULL:
 * out of memory. */
char *client_query_encode(const char *s);

/* route.c: GET path (a list of workspaces, "/v1/workspaces?…") on every worker at once, as
 * station_workspace_list_all() answers. */
int client_list_all(struct station_client *c, const char *path, json_t **ret);

/* route.c: GET /v1/snapshots on every worker at once: {"snapshots":[…],"unreachable":[…]}
 * (on a client of one controller, its list and no unreachable). */
int client_snapshot_list_all(struct station_client *c, json_t **ret);

/* -EINVAL naming id when it has no snapshot id's shape (basic/workers.h). On a client over
 * several workers, *c becomes the handle of the worker id names: -ENOENT when it is not in
 * the list, -EINVAL for an id that names none (taken before ids carried their worker). */
int client_route_snapshot(struct station_client **c, const char *id);

/* "/v1/workspaces/{ws}" + suffix + "path=<path, percent-encoded>" + tail. The path must be a
 * non-empty string without NUL of at most 4096 bytes (else -EINVAL, without a request). */
int client_file_path(struct station_client *c, const char *ws, const char *suffix, const char *path,
		     const char *tail, char **ret);

/* The type an API string names ("file", "dir", …); STATION_FILE_UNKNOWN for anything else. */
enum station_file_type client_file_type_from_string(const char *s);

/* Turns a response that is not the answer wanted (a non-2xx, a refused upgrade) into the error
 * it carries: the server's code and message, the errno its status maps to; returns that. */
int client_api_error(struct station_client *c, long status, const char *body);

/* Parses a 2xx body into *ret (optional); any other status becomes the API error it carries. */
int client_parse_reply(struct station_client *c, long status, const char *body, json_t **ret);

/* A new blocking socket connected to the controller (the unix socket, or host:port of an
 * http:// endpoint; https:// is -EOPNOTSUPP), close-on-exec. Errors are recorded. */
int client_connect(struct station_client *c, int *ret_fd);

/* Sends all n bytes (MSG_NOSIGNAL, EINTR retried): 0 or -errno. */
int client_send_all(int fd, const void *data, size_t n);
