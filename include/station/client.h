/* SPDX-License-Identifier: MIT */
#pragma once

/* libstation-client: talks to a station-sandbox controller (docs/api.md) over its unix socket,
 * or over TCP with a bearer token.
 *
 * A struct station_client is one handle holding one keep-alive connection, reused by every call
 * made through it, so repeated calls cost one round trip each. A handle is not thread-safe: use
 * one per thread.
 *
 * Errors: a fallible function returns 0 (or a documented non-negative value) on success and
 * -errno on failure. Outputs go through ret_ parameters and are left untouched on failure. After
 * a failure, station_client_last_error() returns a sentence meant for a person: the controller's
 * error.message, or what went wrong on the way to it. The codes:
 *
 *   -ECONNREFUSED  no controller answered at the endpoint (socket missing, connection refused,
 *                  host not found, connect timed out after 10 s)
 *   -EACCES        the socket's permissions refused us (or HTTP 401, below)
 *   -ECONNRESET    the connection broke before a whole response arrived
 *   -EPROTO        the answer was not the API's (not JSON, a broken event stream)
 *   -EINTR         the interrupt check (station_client_set_interrupt()) asked to stop
 *   -EDESTADDRREQ  a call about no workspace made on a client over several workers: it goes
 *                  to one worker's handle (station_client_worker())
 *   -ETIMEDOUT     the controller (or worker) did not answer within the call's deadline
 *                  (station_client_set_timeout()); the message names it and the time
 *   -ENOMEM        out of memory, or a response larger than the client accepts (256 MiB)
 *   -EINVAL (400, 405, 415), -EACCES (401), -EPERM (403), -ENOENT (404), -EBUSY (409),
 *   -ESTALE (412), -E2BIG (413), -ERANGE (416), -EAGAIN (429), -EIO (500 and anything else),
 *   -EOPNOTSUPP (501), -ENOTCONN (503), -ENOSPC (507): the controller answered with that HTTP
 *   status;
 *                  station_client_last_error_code() gives the API's code ("not_found", …).
 *
 * JSON: every json_t ** output receives a new reference the caller owns and releases with
 * json_decref(). json_t * inputs are borrowed. Object shapes are those of docs/api.md. */

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The unix socket a controller listens on by default. */
#define STATION_DEFAULT_SOCKET "/var/lib/station-sandbox/station.sock"

/* The longest wait the controller grants one long-poll request. */
#define STATION_MAX_WAIT_MS 60000

struct station_client;

/* ---- Handle ------------------------------------------------------------------------------ */

/* Makes a handle; nothing is connected until the first call. endpoint is "unix:/path/to/sock",
 * a bare absolute socket path, or "http://host:port" (https too, when libcurl has TLS). token is
 * sent as "Authorization: Bearer <token>"; NULL sends none (enough on the unix socket).
 * -EINVAL for an endpoint of another form. The unix socket needs no other library; an http://
 * or https:// endpoint loads libcurl (libcurl.so.4) at its first request, and every call fails
 * with -EOPNOTSUPP, the error naming it, when it cannot be loaded. */
int station_client_new(const char *endpoint, const char *token, struct station_client **ret);

/* ---- Many workers (docs/operations.md, "Many workers") ----------------------------------
 *
 * A client over several workers holds one handle per worker (its own kept connection and
 * token) and routes each call about a workspace (workspaces, runs, services, terminals, files,
 * secrets, network, events of one workspace) to the worker its id names: "w2-3vqk…" is on w2
 * (the id before its last '-'). An id whose worker is not in the list is -ENOENT naming the
 * worker. A worker that does not answer is -ECONNREFUSED with "worker w2 (http://…) did not
 * answer: …"; the other workers keep working. station_workspace_list() asks every worker at
 * once; station_workspace_create() goes to opts->worker, or to the worker with the most free
 * capacity. Calls about no workspace (images, ready, worker, all events, raw requests whose
 * path names no workspace) are -EINVAL on it: make them on station_client_worker(). Such a
 * client is not thread-safe either; its interrupt check (station_client_set_interrupt()) may
 * be called from the threads of a list, so it must be safe to call from any thread. */

/* Makes a client over the workers listed by workers (the STATION_WORKERS form:
 * "w1=http://host1:8080,w2=http://host2:8080"), else by the workers file workers_file ("NAME
 * URL [TOKEN-FILE]" lines), else by the environment (STATION_WORKERS, STATION_WORKERS_FILE,
 * ~/.config/station-sandbox/workers; -ENOENT when none is set). A worker's token is read from
 * its TOKEN-FILE (refused when group or others may read it), else token. On failure
 * *ret_error (optional) receives a message naming the problem (free()): a bad name or URL, a
 * worker named twice, an unreadable token file. station_client_new() is unchanged: it never
 * reads the worker list. */
int station_client_new_workers(const char *workers, const char *workers_file, const char *token,
			       struct station_client **ret, char **ret_error);

/* On a client over several workers, station_client_endpoint() is "workers:w1,w2,…" and
 * station_client_last_error() is the error of the worker the last failed call went to. */

/* The number of workers (0 for a client of one controller), and worker i's handle or the
 * handle of the worker named name (borrowed: valid until the client is freed; NULL when there
 * is none). A worker's handle is an ordinary client of that one controller. */
size_t station_client_n_workers(const struct station_client *c);
struct station_client *station_client_worker_at(struct station_client *c, size_t i);
struct station_client *station_client_worker(struct station_client *c, const char *name);

/* The name of the worker a handle of station_client_worker() talks to; NULL for any other. */
const char *station_client_worker_name(const struct station_client *c);

/* GET /v1/worker of every worker at once (a client of one controller: its one). *ret is an
 * array in list order of {"name","url","state":"up"|"down","error":…,"worker":{…}}: "error"
 * (why it did not answer within 10 s, or answered an error) only when down, "worker" (the
 * answer, with "capacity") only when up. */
int station_workers_status(struct station_client *c, json_t **ret);

/* Closes the connection and frees the handle. Accepts NULL. Returns NULL. */
struct station_client *station_client_free(struct station_client *c);

/* The endpoint as a person should read it: "unix:/path" or "http://host:port". */
const char *station_client_endpoint(const struct station_client *c);

/* About the last failed call: a message (never NULL, "" before any failure), the API's error
 * code ("" when the failure was not an API error) and the HTTP status (0 when none arrived). */
const char *station_client_last_error(const struct station_client *c);
const char *station_client_last_error_code(const struct station_client *c);
long station_client_last_status(const struct station_client *c);

/* check is called while a call waits on the network, at least once a second and as soon as a
 * signal interrupts the wait (install handlers without SA_RESTART). When it returns nonzero, the
 * call gives up, drops the connection and returns -EINTR. NULL removes the check. */
void station_client_set_interrupt(struct station_client *c, int (*check)(void *userdata),
				  void *userdata);

/* Deadlines. Every call gives up with -ETIMEDOUT, naming the controller or worker ("worker w2
 * (http://host:8080) did not answer within 32 s"), when
 * - a connection is not made within 10 s (or timeout_ms when shorter);
 * - an answer does not begin within timeout_ms plus what the call asked the server to hold
 *   (the waitMs of station_exec_start() and station_run_get(): a long-poll of 60 s with the
 *   default is given 90 s);
 * - an answer that began (a body, a download, an upload's acknowledgement, a WebSocket
 *   upgrade) stays silent for timeout_ms;
 * - a followed WebSocket stream (station_run_follow() and the other follows, terminals) stays
 *   silent for timeout_ms plus 30 s: the server pings an idle one every 30 s, so only a server
 *   that stopped answering is that silent; a server-sent event stream
 *   (station_request_stream(), station_events_follow(), follows over https://) silent for
 *   timeout_ms plus 15 s: the server sends a quiet one a heartbeat comment every 15 s.
 * timeout_ms is STATION_TIMEOUT_MS from the environment when station_client_new() reads it (a
 * positive integer), else 30000; this sets it for c and, on a client over several workers, for
 * every worker's handle. 0 restores the default. */
#define STATION_DEFAULT_TIMEOUT_MS 30000
void station_client_set_timeout(struct station_client *c, uint64_t timeout_ms);

/* ---- Requests ---------------------------------------------------------------------------- */

/* One raw request. path starts with "/v1/" (query string allowed); body_json is sent as
 * application/json when non-NULL. Returns 0 once any HTTP response arrived, whatever its
 * status, with *ret_status and *ret_body (NUL-terminated, free()), both optional; < 0 only
 * when no response arrived. */
int station_request(struct station_client *c, const char *method, const char *path,
		    const char *body_json, long *ret_status, char **ret_body);

/* A JSON request: body is serialized when non-NULL. A 2xx response is parsed into *ret
 * (optional); any other status is an error, its message taken from the response. */
int station_request_json(struct station_client *c, const char *method, const char *path,
			 json_t *body, json_t **ret);

/* A streaming GET: each piece of a 2xx response body is handed to on_data as it arrives (data
 * is not NUL-terminated). on_data returns 0 to go on, or < 0 to stop: the call then returns
 * that value. Any other status is an error, as for station_request_json(). Returns 0 when the
 * server ended the response. */
int station_request_stream(struct station_client *c, const char *path,
			   int (*on_data)(const void *data, size_t len, void *userdata),
			   void *userdata);

/* ---- Worker ------------------------------------------------------------------------------ */

/* GET /v1/ready. Returns 1 when the worker is ready, 0 when not (HTTP 503); *ret receives
 * {"ready":…,"checks":[{"name","ok","message"}]} in both cases. */
int station_ready(struct station_client *c, json_t **ret);

/* GET /v1/worker: name, version, adapters, limits. */
int station_worker(struct station_client *c, json_t **ret);

/* ---- Workspaces -------------------------------------------------------------------------- */

/* Creates (station_workspace_create(), station_exec_start(), station_service_start(),
 * station_terminal_open()) always send an Idempotency-Key (docs/api.md, "Idempotency keys"):
 * the options' idempotency_key, or a random one the call makes. The library's own retry of a
 * request (once, when a kept connection turns out closed before any answer) therefore never
 * creates twice. A caller that retries a create after an error of its own (a timeout, a lost
 * connection) passes the same idempotency_key both times and gets the first object back; the
 * same key with other options is -EBUSY (HTTP 409, code "conflict"). A key is 1 to
 * STATION_IDEMPOTENCY_KEY_MAX printable ASCII characters (-EINVAL otherwise, without a
 * request). */
#define STATION_IDEMPOTENCY_KEY_MAX 255

struct station_workspace_options {
	const char *adapter; /* "host", "container"; NULL: the server's default */
	char *const *env;    /* NULL-terminated "KEY=VALUE" strings, or NULL */
	double cpus;	     /* 0: unlimited */
	uint64_t memory_mb;  /* 0: unlimited */
	uint64_t pids_limit; /* 0: unlimited */
	/* The container adapter's; NULL: the server's default. */
	const char *image;	     /* "name@sha256:<64 hex>" or "sha256:<64 hex>" */
	const char *seccomp_profile; /* absolute path of a Docker-format profile on the server */
	const char *network;	     /* "none", "bridge", "restricted" */
	/* network "restricted": the egress policy as JSON text, {"allow": [...]} (docs/api.md,
	 * "Network"); NULL: none, every destination denied. */
	const char *egress;
	const char *idempotency_key; /* see STATION_IDEMPOTENCY_KEY_MAX */
	/* Stop the workspace once nothing runs, nobody is attached and no API call came for this
	 * long (1000 ms to 30 days); 0: never. */
	uint64_t idle_timeout_ms;
	/* On a client over several workers: the worker to create on (-ENOENT when it is not in
	 * the list); NULL: the one with the most capacity.workspaces.free, then the most
	 * capacity.memoryBytes.available, then the first listed (-EAGAIN when none answered with
	 * room). Must be NULL on a client of one controller (-EINVAL). */
	const char *worker;
	/* "s-WORKER-…": start from that snapshot's image, HOME and root filesystem (image must
	 * then be NULL); NULL: none. On a client over several workers, the create goes to the
	 * worker the id names (worker, when given, must be that one: -EINVAL otherwise); an id
	 * of the older shape "s-…" names no worker: worker must name the one that keeps it
	 * (-EINVAL without a request when it is NULL). */
	const char *snapshot;
	/* A paused workspace resumes by itself for a command, terminal, file write or service
	 * start, instead of answering 409 "paused". */
	bool auto_resume;
	/* What idle_timeout_ms does: "stop" or "pause"; NULL: the server's default (stop). */
	const char *idle_action;
	/* Its name, unique among the caller's workspaces on the worker (docs/api.md, "Names and
	 * labels"); NULL: none. Any call that takes a workspace id takes its name too. */
	const char *name;
	/* NULL-terminated "KEY=VALUE" labels, or NULL (-EINVAL without a request for an entry
	 * without '='). */
	char *const *labels;
};

/* POST /v1/workspaces; *ret is the new workspace. opts may be NULL. -EINVAL (without a
 * request) for an env entry without '=', or an egress that is not a JSON object. On a client
 * over several workers, the chosen worker's GET /v1/worker must give the name it is listed
 * under (its ids start with it): -EPROTO naming both names, nothing created, otherwise. */
int station_workspace_create(struct station_client *c, const struct station_workspace_options *opts,
			     json_t **ret);

/* GET /v1/workspaces; *ret is the array of workspaces. On a client over several workers, every
 * worker's, asked at once, in list order; workers that did not answer are left out (an error
 * only when none answered): station_workspace_list_all() says which. */
int station_workspace_list(struct station_client *c, json_t **ret);

/* Every worker's workspaces, asked at once: *ret is {"workspaces":[…],"unreachable":[{"worker",
 * "url","error"}]}, the workers that did not answer within 10 s (or answered an error) in
 * "unreachable". Returns 0 even when none answered; on a client of one controller, its failure
 * is the call's. */
int station_workspace_list_all(struct station_client *c, json_t **ret);

int station_workspace_get(struct station_client *c, const char *id, json_t **ret);

/* What GET /v1/workspaces?label=…&name=…&state=… selects: every condition holds. */
struct station_workspace_filter {
	const char *name;    /* NULL: any */
	const char *state;   /* NULL: any; "ready", "stopped", … */
	char *const *labels; /* NULL-terminated "KEY=VALUE" (equal) or "KEY" (present) */
};
/* As station_workspace_list_all(), of the workspaces f selects (NULL: all), on every worker of
 * a client over several. A malformed selector is the server's 400 (-EINVAL). */
int station_workspace_list_where(struct station_client *c, const struct station_workspace_filter *f,
				 json_t **ret);

/* PATCH /v1/workspaces/{id}: with set_name, the name becomes name (NULL: none); labels is a
 * NULL-terminated list of "KEY=VALUE" (set) and "KEY-" (remove), merged into the workspace's
 * (NULL: unchanged). *ret (optional) is the workspace. -EBUSY when another workspace has the
 * name (the message names it). */
struct station_workspace_update {
	bool set_name;
	const char *name;
	char *const *labels;
};
int station_workspace_update(struct station_client *c, const char *id,
			     const struct station_workspace_update *u, json_t **ret);

/* DELETE /v1/workspaces/{id}; *ret (optional) is {"id":…,"state":"deleted"}. */
int station_workspace_delete(struct station_client *c, const char *id, json_t **ret);

/* POST /v1/workspaces/{id}/restart; *ret (optional) is the workspace. */
int station_workspace_restart(struct station_client *c, const char *id, json_t **ret);

/* GET /v1/workspaces/{id}/network; *ret is {"mode","address","gateway","egress","counters":
 * {"allowed","denied","dnsAllowed","dnsRefused"}} (mode "none": {"mode"} only). */
int station_workspace_network_get(struct station_client *c, const char *id, json_t **ret);

/* PUT /v1/workspaces/{id}/network {"egress": …}: replaces a restricted workspace's egress
 * policy, given as JSON text ({"allow": [...]}); *ret (optional) is the network as
 * station_workspace_network_get() shows it. -EINVAL without a request when egress_json is not
 * a JSON object; -EINVAL (400) for a policy the controller refuses (its message names the
 * rule), -EBUSY (409) when the workspace's network is not "restricted". */
int station_workspace_network_set(struct station_client *c, const char *id, const char *egress_json,
				  json_t **ret);

/* ---- Usage history ----------------------------------------------------------------------- */

/* What part of the history to ask for (docs/api.md, "Usage history"), as the API takes it. */
struct station_usage_options {
	/* An RFC 3339 time, milliseconds since the epoch (13 digits or more), or a duration back
	 * from now ("90s", "30m", "1h"); NULL: an hour ago. */
	const char *since;
	/* The width of each point: "200ms", "5s", "1m", "1h" or milliseconds, 100 ms to 24 h;
	 * NULL: the sampling interval within the last hour, else a minute. */
	const char *step;
};

/* Whether opts holds what the controller takes: 0, or -EINVAL with a sentence in ret_error
 * (size bytes, NUL-terminated) that starts with the parameter's name ("since '2x': want …").
 * The calls below check opts so, without a request. */
int station_usage_options_check(const struct station_usage_options *opts, char *ret_error,
				size_t size);

/* GET /v1/workspaces/{id}/usage?since=…&step=…; opts may be NULL. *ret is {"workspaceId",
 * "stepMs","intervalMs","limits":{"cpus","memoryBytes","pidsLimit"},"samples":[{"t","cpu",
 * "memoryBytes","memoryMaxBytes","pids","rxBytes","txBytes","spanMs"}]}, oldest first; a step
 * without samples is absent. -ENOENT (404) for an unknown workspace (or another tenant's). */
int station_workspace_usage_history(struct station_client *c, const char *id,
				    const struct station_usage_options *opts, json_t **ret);

/* GET /v1/worker/usage?since=…&step=…: the worker's totals, the same points with "worker" and
 * "tenant" instead of "workspaceId" and "limits" (a tenant's token: its own workspaces' sum).
 * On a client over several workers, make it on station_client_worker() (-EDESTADDRREQ
 * otherwise). */
int station_worker_usage(struct station_client *c, const struct station_usage_options *opts,
			 json_t **ret);

/* ---- Pause, snapshots and fork ----------------------------------------------------------- */

/* POST /v1/workspaces/{id}/pause: every process of the workspace is frozen (its agent keeps
 * answering status and file reads), its clocks (run timeouts, idle time) stop; state "paused",
 * "pausedAt" set. POST …/resume thaws it: state "ready". *ret (optional) is the workspace.
 * Pausing a paused workspace or resuming a ready one changes nothing. -EBUSY (409) when it is
 * neither ready nor paused.
 *
 * A command, terminal open or attach, file write or service start on a paused workspace
 * created without auto_resume fails with -EBUSY (409) and station_client_last_error_code()
 * "paused" (STATION_ERROR_PAUSED): resume it first. */
#define STATION_ERROR_PAUSED "paused"
int station_workspace_pause(struct station_client *c, const char *id, json_t **ret);
int station_workspace_resume(struct station_client *c, const char *id, json_t **ret);

/* A snapshot is {"id":"s-WORKER-…","worker","workspaceId","name","createdAt","sizeBytes",
 * "baseImage","image","memory","pausedMs"} (docs/api.md, "Snapshots and fork"): the
 * workspace's HOME and root filesystem changes (a host workspace: its directory), kept as an
 * image of the worker's image store. Its id names the worker that keeps it, as a workspace
 * id does: on a client over several workers, get, delete and a create from it go there, and
 * a list asks every worker. An id of the older shape "s-<26 of [a-z2-7]>" (taken before ids
 * carried their worker) names none: ask its worker's handle (station_client_worker()). An id
 * of neither shape is -EINVAL without a request. */
#define STATION_SNAPSHOT_NAME_MAX 128
#define STATION_FORK_MAX 100

struct station_snapshot_options {
	const char *name; /* NULL: none; else 1 to 128 bytes without control characters */
	bool memory;	  /* the processes too (CRIU); -EOPNOTSUPP (501) naming what is missing */
};

/* POST /v1/workspaces/{ws}/snapshots: the workspace is paused while it is read (and resumed
 * after, unless it was paused already). opts may be NULL. *ret (optional) is the snapshot.
 * -EINVAL without a request for a bad name; -EAGAIN (429) past the tenant's snapshot count,
 * -E2BIG (413) past the worker's --max-snapshot-bytes. */
int station_snapshot_create(struct station_client *c, const char *ws,
			    const struct station_snapshot_options *opts, json_t **ret);

/* GET /v1/snapshots: *ret is the array of snapshots, newest first. On a client over several
 * workers, every worker's, asked at once: -EHOSTUNREACH naming a worker that did not answer
 * (station_snapshot_list_all() lists those that did). */
int station_snapshot_list(struct station_client *c, json_t **ret);

/* GET /v1/snapshots of every worker at once: *ret is {"snapshots":[…] newest first,
 * "unreachable":[{"worker","url","error"}]} (as station_workspace_list_all()); an error only
 * when the client cannot ask. On a client of one controller: its list, unreachable empty. */
int station_snapshot_list_all(struct station_client *c, json_t **ret);

/* GET /v1/snapshots/{id}. -ENOENT (404) for an unknown id (or another tenant's). */
int station_snapshot_get(struct station_client *c, const char *id, json_t **ret);

/* DELETE /v1/snapshots/{id}: the snapshot and its image. -EBUSY (409) while a workspace runs
 * on it. */
int station_snapshot_delete(struct station_client *c, const char *id);

/* POST /v1/workspaces/{ws}/fork {"count"}: one snapshot of ws, then count workspaces made from
 * it, each independent from then on. count 1 to STATION_FORK_MAX (-EINVAL without a request
 * otherwise). *ret (optional) is {"workspaces":[…],"snapshot":"s-…","pausedMs"}. -EAGAIN (429)
 * past the worker's capacity, before anything is made. */
int station_workspace_fork(struct station_client *c, const char *ws, unsigned count, json_t **ret);

/* ---- Images ------------------------------------------------------------------------------ */

/* An image is {"digest","name","reference","size","layers","config","createdAt","usedBy"}
 * (docs/api.md); digest ("sha256:<64 hex>") is its identity. */

/* POST /v1/images {"path","name"}: imports the OCI image layout (a directory or a tar) at path,
 * an absolute path on the controller's host. name (NULL: none) is recorded for listings.
 * *ret (optional) is the image. */
int station_image_import(struct station_client *c, const char *path, const char *name,
			 json_t **ret);

struct station_pull_options {
	const char *registry; /* "host[:port]"; NULL: the host part of the reference */
	bool plain_http;      /* http:// instead of https:// (a test registry on loopback) */
};

/* POST /v1/images {"reference",…}: pulls ref ("[host[:port]/]name@sha256:<64 hex>") by digest.
 * opts may be NULL. *ret (optional) is the image. */
int station_image_pull(struct station_client *c, const char *ref,
		       const struct station_pull_options *opts, json_t **ret);

/* GET /v1/images; *ret is the array of images. */
int station_image_list(struct station_client *c, json_t **ret);

/* GET /v1/images/{digest}. ref is "sha256:<64 hex>" or "name@sha256:<64 hex>" (the name is not
 * compared); -EINVAL (without a request) for anything else. */
int station_image_get(struct station_client *c, const char *ref, json_t **ret);

/* DELETE /v1/images/{digest}, ref as for station_image_get(). -EBUSY while a workspace uses the
 * image (the message names the workspaces). *ret (optional) is {"digest":…,"removed":true}. */
int station_image_remove(struct station_client *c, const char *ref, json_t **ret);

/* GET /v1/images/{digest}/export, ref as for station_image_get(): the image as an OCI image
 * layout tar, written to fd as it arrives (never whole in memory); station_image_import() of
 * the tar, on this worker or another, gives the same digest. Nothing is written unless the
 * controller answered 2xx. -ENOENT (404) for an image not in the store (or another tenant's);
 * -EIO (500) naming the blob when its manifest or config is damaged; -ECONNRESET when the
 * transfer is cut short after part of it was written (a damaged layer: the controller's log
 * names it), which must be taken as a failure. *ret_bytes (optional) is the count written. */
int station_image_export(struct station_client *c, const char *ref, int fd, uint64_t *ret_bytes);

/* ---- Runs -------------------------------------------------------------------------------- */

struct station_exec_options {
	const char *command;	/* required: run as /bin/sh -c COMMAND */
	const char *cwd;	/* NULL: the workspace directory */
	char *const *env;	/* NULL-terminated "KEY=VALUE" strings, or NULL */
	const void *stdin_data; /* sent as UTF-8 text when valid UTF-8 without NUL, else base64 */
	size_t stdin_size;
	uint64_t timeout_ms;	   /* 0: the server's default (60 s) */
	uint64_t max_output_bytes; /* 0: the server's default (128 KiB) */
	uint64_t wait_ms;	   /* > 0: the response waits up to this long for the run to end */
	const char *idempotency_key; /* see STATION_IDEMPOTENCY_KEY_MAX */
};

/* POST /v1/workspaces/{ws}/commands; *ret is the run: "running", or terminal when wait_ms
 * allowed it to finish. */
int station_exec_start(struct station_client *c, const char *ws,
		       const struct station_exec_options *opts, json_t **ret);

/* GET …/commands/{run}; with wait_ms > 0 the server holds the response until the run is
 * terminal or wait_ms passed (capped by the server at STATION_MAX_WAIT_MS). */
int station_run_get(struct station_client *c, const char *ws, const char *run, uint64_t wait_ms,
		    json_t **ret);

/* Long-polls until the run is terminal or timeout_ms passed (< 0: no limit). *ret is the last
 * state seen, which is still "running" after a timeout. */
int station_run_wait(struct station_client *c, const char *ws, const char *run, int64_t timeout_ms,
		     json_t **ret);

/* GET …/commands, newest first, without output; limit 0: the server's default (100). *ret is
 * the array of runs. */
int station_run_list(struct station_client *c, const char *ws, unsigned limit, json_t **ret);

/* POST …/commands/{run}/cancel; *ret (optional) is the run once terminal. -EBUSY when the run
 * had already finished. */
int station_run_cancel(struct station_client *c, const char *ws, const char *run, json_t **ret);

/* True when run's status is anything but "running". */
bool station_run_is_terminal(const json_t *run);

enum station_stream {
	STATION_STREAM_STDOUT,
	STATION_STREAM_STDERR,
};

const char *station_stream_to_string(enum station_stream s);

/* Callbacks of station_run_follow(); each may be NULL. A callback returns 0 to go on, or < 0 to
 * stop following: station_run_follow() then returns that value. */
struct station_follow_callbacks {
	/* len bytes of a stream at offset, decoded, in order, each byte once. */
	int (*on_output)(enum station_stream stream, uint64_t offset, const void *data, size_t len,
			 void *userdata);
	/* bytes bytes of a stream at offset that this watcher will never see. */
	int (*on_gap)(enum station_stream stream, uint64_t offset, uint64_t bytes, void *userdata);
	/* The terminal run (borrowed), once, last. */
	int (*on_end)(json_t *run, void *userdata);
};

/* Follows a run's output (GET …/commands/{run}/output upgraded to a WebSocket; server-sent
 * events over an https:// endpoint) until it ends, calling cb as messages arrive. A connection
 * that breaks mid-stream (or a server that closes it before the end) is re-opened a few times;
 * the replayed bytes are skipped, so each byte still reaches on_output at most once; then the
 * call fails with -ECONNRESET. A server that breaks the protocol (a message over 4 MiB, a bad
 * frame, an output message or event that is not the API's) is -EPROTO, naming what was wrong.
 * The interrupt check (station_client_set_interrupt()) is honoured while it waits. Returns 0
 * after on_end, with *ret (optional) the terminal run. Over WebSocket that run (on_end's and
 * *ret) is the run as GET returns it without its output fields (stdout, stderr, stdoutTail,
 * stderrTail, encoding): those bytes came through on_output; station_run_get() has them. */
int station_run_follow(struct station_client *c, const char *ws, const char *run,
		       const struct station_follow_callbacks *cb, void *userdata, json_t **ret);

/* Decodes one output part of a finished run (its "encoding" says how): the stream's head
 * ("stdout"/"stderr"), or with tail its "stdoutTail"/"stderrTail". Returns 1 with *ret
 * (NUL-terminated for convenience, free()) and *ret_len; 0 with *ret = NULL when the run has no
 * such part; -EPROTO when the part is malformed. */
int station_run_output(const json_t *run, enum station_stream s, bool tail, char **ret,
		       size_t *ret_len);

/* ---- Code contexts ----------------------------------------------------------------------- */

/* A context is a stateful interpreter (a Jupyter kernel) in a workspace, {"id":"c-…",
 * "workspaceId","language","state":"idle"|"busy"|"dead","reason","cwd","executionCount",
 * "createdAt","cpuMs","memoryBytes"} (docs/api.md, "Code contexts"): what one cell defines,
 * the next sees. An execution is one cell, {"id":"e-…","contextId","runId","status":"running"|
 * "ok"|"error"|"timed_out"|"interrupted","executionCount","stdout","stderr",… (a run's output
 * fields),"results":[{"type","data":{MIME:value},"truncated"}],"error":null|{"name","value",
 * "traceback":[…]},"durationMs",…}; binary MIME values (image/png) are base64. */

struct station_context_options {
	const char *language; /* "python" or "javascript"; NULL: python */
	const char *cwd;      /* NULL: the workspace directory */
	char *const *env;     /* NULL-terminated "KEY=VALUE" strings, or NULL */
};

/* POST …/contexts; *ret is the context once its kernel answers. opts may be NULL. -EINVAL
 * (422, code "kernel_missing") when the workspace has no kernel for the language (the message
 * names the package); -EAGAIN (429) past the workspace's 8 contexts; -EIO (504) when the
 * kernel did not answer in time (the message has its stderr's tail). */
int station_context_create(struct station_client *c, const char *ws,
			   const struct station_context_options *opts, json_t **ret);
/* GET …/contexts; *ret is the array of contexts. */
int station_context_list(struct station_client *c, const char *ws, json_t **ret);
int station_context_get(struct station_client *c, const char *ws, const char *cid, json_t **ret);
/* DELETE …/contexts/{cid}: the kernel and what it held are gone. */
int station_context_delete(struct station_client *c, const char *ws, const char *cid);
/* POST …/contexts/{cid}/restart: a new kernel, its variables gone; *ret (optional) the
 * context. */
int station_context_restart(struct station_client *c, const char *ws, const char *cid,
			    json_t **ret);
/* POST …/contexts/{cid}/interrupt: *ret (optional) is the interrupted execution once it ended.
 * -EBUSY (409) when nothing runs. */
int station_context_interrupt(struct station_client *c, const char *ws, const char *cid,
			      json_t **ret);

struct station_execute_options {
	const char *code;    /* required, at most 1 MiB */
	uint64_t timeout_ms; /* 0: the server's default */
	uint64_t wait_ms;    /* > 0: the answer waits up to this long for the cell to end */
};

/* POST …/contexts/{cid}/execute; *ret is the execution: "running", or ended when wait_ms let
 * it. -EBUSY (409, code "busy") while another cell runs in the context. */
int station_context_execute(struct station_client *c, const char *ws, const char *cid,
			    const struct station_execute_options *opts, json_t **ret);

/* GET …/contexts/{cid}/executions/{eid}, held up to wait_ms for the cell to end. */
int station_execution_get(struct station_client *c, const char *ws, const char *cid,
			  const char *eid, uint64_t wait_ms, json_t **ret);

/* GET …/contexts/{cid}/executions: *ret is the array, newest first. */
int station_execution_list(struct station_client *c, const char *ws, const char *cid, json_t **ret);

/* Follows the cell's stdout and stderr as they come (…/executions/{eid}/output, as
 * station_run_follow() follows a run's; cb->on_end gets the execution), then waits for the
 * execution to be recorded: returns 0 with *ret (optional) the ended execution, its results
 * and error included. */
int station_execution_follow(struct station_client *c, const char *ws, const char *cid,
			     const char *eid, const struct station_follow_callbacks *cb,
			     void *userdata, json_t **ret);

/* True when the execution's status is anything but "running". */
bool station_execution_is_done(const json_t *execution);

/* One value of a result's MIME bundle (result is one element of "results"): the text of a text
 * type, or the decoded bytes of a binary one (image/png, image/jpeg: base64 in the JSON).
 * Returns 1 with *ret (NUL-terminated, free()) and *ret_len; 0 when the bundle has no such
 * type; -EPROTO for a value that is not a string or not valid base64. */
int station_result_data(const json_t *result, const char *mime, char **ret, size_t *ret_len);

/* ---- Services ---------------------------------------------------------------------------- */

/* A service is {"name","command","state","reason","restartCount","nextRestartAt","mainPid",
 * "attempts":[…],…} (docs/api.md, "Services"); state is starting, running, backoff, stopped,
 * failed or exhausted. Names are [a-z0-9][a-z0-9._-]{0,62}. */

struct station_service_options {
	const char *name;	    /* required */
	const char *command;	    /* required: run as /bin/sh -c COMMAND, in the foreground */
	const char *cwd;	    /* NULL: the workspace directory */
	char *const *env;	    /* NULL-terminated "KEY=VALUE" strings, or NULL */
	const char *restart_policy; /* "no", "on-failure", "always"; NULL: the server's ("no") */
	int64_t max_restarts;	    /* < 0: the server's default (5) */
	int64_t delay_ms;	    /* < 0: the server's default (1000) */
	double backoff_multiplier;  /* 0: no backoff; else 1-100 */
	int64_t max_delay_ms;	    /* with backoff; < 0: the server's default */
	/* An attempt that ran this long resets the restart count and backoff: > 0 that many
	 * milliseconds, 0 the server's default (60000), < 0 never. */
	int64_t reset_after_ms;
	const char *stop_signal;     /* "SIGTERM", "SIGINT", …; NULL: SIGTERM */
	int64_t stop_timeout_ms;     /* < 0: the server's default (10000) */
	bool autostart;		     /* start again after the workspace restarts */
	const char *idempotency_key; /* see STATION_IDEMPOTENCY_KEY_MAX */
};

/* POST /v1/workspaces/{ws}/services; *ret is the new service. -EBUSY when the name is taken. */
int station_service_start(struct station_client *c, const char *ws,
			  const struct station_service_options *opts, json_t **ret);

/* GET …/services; *ret is the array of services (attempts without output). */
int station_service_list(struct station_client *c, const char *ws, json_t **ret);

/* GET …/services/{name}: with every kept attempt and its output. */
int station_service_get(struct station_client *c, const char *ws, const char *name, json_t **ret);

/* POST …/services/{name}/stop and …/restart; *ret (optional) is the service. A stop answers
 * once the service is stopped (state "stopped", the stopped attempt in "attempts"), at most
 * stopTimeoutMs + 5 s after the request; a restart answers at once. */
int station_service_stop(struct station_client *c, const char *ws, const char *name, json_t **ret);
int station_service_restart(struct station_client *c, const char *ws, const char *name,
			    json_t **ret);

/* DELETE …/services/{name}: stops it and forgets it. */
int station_service_delete(struct station_client *c, const char *ws, const char *name,
			   json_t **ret);

/* GET …/services/{name}/logs (over WebSocket as station_run_follow()): with follow, the current
 * attempt's output live until it ends; without (or with no current attempt), the newest finished
 * attempt's output. cb as for station_run_follow(); on_end and *ret get the service as GET
 * returns it, over WebSocket with its attempts' output fields left out (station_service_get()
 * has them). */
int station_service_logs(struct station_client *c, const char *ws, const char *name, bool follow,
			 const struct station_follow_callbacks *cb, void *userdata, json_t **ret);

/* ---- Terminals --------------------------------------------------------------------------- */

/* A terminal is {"id","command","cols","rows","state","exitCode","signal",…} (docs/api.md,
 * "Terminals"); state is starting, running, exited, closed, failed or lost. */

struct station_terminal_options {
	const char *command;	     /* NULL: the user's login shell */
	const char *cwd;	     /* NULL: the workspace directory */
	char *const *env;	     /* NULL-terminated "KEY=VALUE" strings, or NULL */
	unsigned cols;		     /* 0: 80 */
	unsigned rows;		     /* 0: 24 */
	const char *idempotency_key; /* see STATION_IDEMPOTENCY_KEY_MAX */
};

/* POST /v1/workspaces/{ws}/terminals; *ret is the terminal once it runs (or failed). opts may
 * be NULL. */
int station_terminal_open(struct station_client *c, const char *ws,
			  const struct station_terminal_options *opts, json_t **ret);
/* GET …/terminals; *ret is the array of terminals, oldest first. */
int station_terminal_list(struct station_client *c, const char *ws, json_t **ret);
int station_terminal_get(struct station_client *c, const char *ws, const char *term, json_t **ret);
/* POST …/terminals/{t}/resize. *ret optional. */
int station_terminal_resize(struct station_client *c, const char *ws, const char *term,
			    unsigned cols, unsigned rows, json_t **ret);
/* DELETE …/terminals/{t}: kills the terminal's processes; *ret (optional) is the terminal as it
 * ended. */
int station_terminal_close(struct station_client *c, const char *ws, const char *term,
			   json_t **ret);

/* Attaching: a WebSocket of its own (GET …/terminals/{t}/attach), over the client's endpoint
 * and token. First the terminal's scrollback arrives, then live output. A connection is used
 * from one thread; its fd may be polled for input. */
struct station_term;

/* read_only: what is sent is ignored by the controller. Errors as for the requests (-ENOENT for
 * an unknown terminal, …), with station_client_last_error() set on c. */
int station_term_attach(struct station_client *c, const char *ws, const char *term, bool read_only,
			struct station_term **ret);
/* Sends a close (1000) and frees. NULL is fine. */
void station_term_free(struct station_term *t);
/* The socket, to wait for with poll(2) (POLLIN: call station_term_pump()). */
int station_term_fd(const struct station_term *t);
/* Keystrokes, as one binary message (blocking write). */
int station_term_send(struct station_term *t, const void *data, size_t n);
int station_term_resize(struct station_term *t, unsigned cols, unsigned rows);

struct station_term_callbacks {
	/* Output bytes, in order. */
	void (*output)(const void *data, size_t n, void *userdata);
	/* bytes the client will never see (it fell behind further than the scrollback). */
	void (*gap)(uint64_t bytes, void *userdata);
	/* The terminal ended: exit_code or signal, -1 when none. */
	void (*exit)(int exit_code, int signal, void *userdata);
};

/* Reads what the socket has (without blocking) and calls cb for what it carried. Returns 0 to
 * go on, 1 once the connection has closed (after an exit, or the controller went away), < 0
 * on a protocol or I/O error. Call it once right after the attach, before waiting on the fd:
 * the first output may have arrived with the handshake. */
int station_term_pump(struct station_term *t, const struct station_term_callbacks *cb,
		      void *userdata);

/* ---- Files ------------------------------------------------------------------------------- */

/* Files are read and written by the workspace's agent, inside the sandbox, as the sandbox's
 * user (docs/api.md, "Files"). A path is absolute in the sandbox's view or relative to the
 * workspace's workdir; the controller judges it: -EINVAL (400) for an invalid path, one that
 * escapes a host workspace, or a FIFO/device/socket where a regular file is needed; -EPERM
 * (403) when the sandbox's user may not; -ENOENT (404) when it does not exist; -EBUSY (409)
 * when it exists and should not, a directory is not empty, or the workspace is not ready;
 * -EAGAIN (429) at the workspace's 32 file operations and watches. The message names the path
 * and the cause; station_client_last_error_code() gives the API's code. */

enum station_file_type {
	STATION_FILE_UNKNOWN, /* a type this library does not know */
	STATION_FILE_REGULAR,
	STATION_FILE_DIR,
	STATION_FILE_SYMLINK,
	STATION_FILE_FIFO,
	STATION_FILE_SOCKET,
	STATION_FILE_CHAR,
	STATION_FILE_BLOCK,
};

/* "file", "dir", "symlink", "fifo", "socket", "char", "block"; "unknown". */
const char *station_file_type_to_string(enum station_file_type t);

/* One entry, as GET …/files/stat and …/files/list give it. */
struct station_file_entry {
	char *name; /* the last component */
	char *path; /* absolute, in the sandbox's view */
	enum station_file_type type;
	uint64_t size;
	unsigned mode;	  /* permission bits, 0644 */
	char *mtime;	  /* RFC 3339 with milliseconds, "2026-12-02T10:00:00.123Z" */
	int64_t mtime_ms; /* the same in milliseconds since the epoch */
	uint32_t uid;
	uint32_t gid;
	char *etag;	   /* regular files only, else NULL; for If-Match */
	char *link_target; /* a symlink's target as stored (never followed), else NULL */
};

/* A directory's entries, sorted by name (at most 10,000: truncated says more were left out). */
struct station_file_list {
	char *path;
	struct station_file_entry *entries;
	size_t n_entries;
	bool truncated;
};

/* Free what the calls below return. Accept NULL; return NULL. */
struct station_file_entry *station_file_entry_free(struct station_file_entry *e);
struct station_file_list *station_file_list_free(struct station_file_list *l);

/* The entry as the API's JSON object (the CLI's --json), a new reference; NULL when out of
 * memory. */
json_t *station_file_entry_to_json(const struct station_file_entry *e);

/* GET …/files/stat?path=P: does not follow a final symlink. */
int station_file_stat(struct station_client *c, const char *ws, const char *path,
		      struct station_file_entry **ret);

/* GET …/files/list?path=P. */
int station_file_list(struct station_client *c, const char *ws, const char *path,
		      struct station_file_list **ret);

/* Room for an ETag with its NUL. */
#define STATION_ETAG_MAX 160

/* GET …/files?path=P&maxBytes=max_bytes: the whole file in memory. *ret is NUL-terminated for
 * convenience (free()), *ret_len its length; ret_etag (optional) receives its ETag ("" when
 * none came). -E2BIG (413) for a file larger than max_bytes (0: 64 MiB, as the SDKs read);
 * -EINVAL (400) for a directory, FIFO or device. */
int station_file_read(struct station_client *c, const char *ws, const char *path,
		      uint64_t max_bytes, char **ret, size_t *ret_len,
		      char ret_etag[STATION_ETAG_MAX]);

struct station_download_options {
	uint64_t offset;    /* the first byte to send */
	uint64_t length;    /* 0: to the end; else a range of this many bytes from offset */
	uint64_t max_bytes; /* > 0: refuse (413) a file or range larger than this */
};

/* GET …/files?path=P, the bytes written to fd as they arrive: never the whole file in memory.
 * opts may be NULL. Nothing is written unless the controller answered 2xx; a connection that
 * breaks midway is -ECONNRESET after part of the file was written. *ret_bytes (optional) is
 * the count written. -ERANGE (416) for an offset at or past the end; write errors on fd are
 * their -errno. */
int station_file_download(struct station_client *c, const char *ws, const char *path, int fd,
			  const struct station_download_options *opts, uint64_t *ret_bytes);

struct station_write_options {
	unsigned mode;	      /* permission bits; 0: the replaced file's mode, or 0644 */
	bool parents;	      /* make missing parent directories */
	bool exclusive;	      /* -EBUSY (409) when the path exists */
	const char *if_match; /* an etag: -ESTALE (412) when the file changed since (or is gone) */
};

/* PUT …/files?path=P from memory: atomic (readers see the old or the new content). opts may
 * be NULL. *ret (optional) is the new entry. */
int station_file_write(struct station_client *c, const char *ws, const char *path, const void *data,
		       size_t n, const struct station_write_options *opts,
		       struct station_file_entry **ret);

/* PUT …/files?path=P with the body read from fd as it is sent (a regular file with its length,
 * anything else chunked), never held whole in memory. Atomic as station_file_write(); a
 * failed read of fd aborts the upload and changes nothing (its -errno). */
int station_file_upload(struct station_client *c, const char *ws, const char *path, int fd,
			const struct station_write_options *opts, struct station_file_entry **ret);

/* POST …/files/mkdir; mode 0: 0755. */
int station_file_mkdir(struct station_client *c, const char *ws, const char *path, bool parents,
		       unsigned mode, struct station_file_entry **ret);

/* POST …/files/rename; without overwrite, -EBUSY (409) when to exists. *ret is the entry at
 * to. */
int station_file_rename(struct station_client *c, const char *ws, const char *from, const char *to,
			bool overwrite, struct station_file_entry **ret);

/* DELETE …/files?path=P: a symlink is removed, never followed; a non-empty directory needs
 * recursive (else -EBUSY, 409). */
int station_file_delete(struct station_client *c, const char *ws, const char *path, bool recursive);

enum station_watch_event_type {
	STATION_WATCH_UNKNOWN, /* a type this library does not know */
	STATION_WATCH_READY,   /* the watch is in place: changes from now on are reported */
	STATION_WATCH_CREATED,
	STATION_WATCH_MODIFIED, /* written and closed, or attributes changed */
	STATION_WATCH_DELETED,
	STATION_WATCH_MOVED,	/* path → to */
	STATION_WATCH_OVERFLOW, /* events were lost: re-list what you show */
};

/* "ready", "created", …; "unknown". */
const char *station_watch_event_type_to_string(enum station_watch_event_type t);

/* Borrowed, valid during the callback only. */
struct station_watch_event {
	enum station_watch_event_type type;
	const char *path;	     /* NULL for ready and overflow */
	const char *to;		     /* moved: the new path; else NULL */
	enum station_file_type kind; /* what changed (STATION_FILE_UNKNOWN when not said) */
	uint64_t seq;
	const json_t *json; /* the event as it came */
};

/* GET …/files/watch?path=P[&recursive=1] (server-sent events): calls on_event for each event,
 * in order, until the stream ends (the directory was deleted or the workspace stopped: 0) or
 * on_event returns < 0 (that value). A connection that breaks is -ECONNRESET: events may have
 * been missed, re-list and watch again. */
int station_file_watch(struct station_client *c, const char *ws, const char *path, bool recursive,
		       int (*on_event)(const struct station_watch_event *e, void *userdata),
		       void *userdata);

/* ---- Secrets ----------------------------------------------------------------------------- */

/* A secret is {"name","host","username","expiresAt","createdAt","updatedAt","expired"}
 * (docs/api.md, "Secrets"): its value is never in an answer. Names are [A-Za-z0-9_.-]{1,64}. */

struct station_secret_options {
	const char *host;	/* the only host the secret is released for; NULL: any */
	const char *username;	/* NULL: the server's default, x-access-token */
	const char *expires_at; /* RFC 3339; NULL: never */
};

/* PUT …/secrets/{name}. value: n bytes, 1-16384, UTF-8 without NUL (-EINVAL without a request
 * otherwise). The copies this call makes of the value are wiped before it returns. opts may
 * be NULL. *ret (optional) is the secret. */
int station_secret_put(struct station_client *c, const char *ws, const char *name,
		       const void *value, size_t n, const struct station_secret_options *opts,
		       json_t **ret);

/* GET …/secrets; *ret is the array of secrets. */
int station_secret_list(struct station_client *c, const char *ws, json_t **ret);

/* DELETE …/secrets/{name}: revoked at once. *ret (optional) is {"name":…,"deleted":true}. */
int station_secret_delete(struct station_client *c, const char *ws, const char *name, json_t **ret);

/* ---- Previews ---------------------------------------------------------------------------- */

/* A port of a workspace opened to people and programs outside through the controller's preview
 * listener (docs/api.md, "Previews"), which connects to it inside the workspace's own network:
 * a server bound to 127.0.0.1 is reachable, nothing is published on the host. An exposure is
 * {"port","host","url","access":"token"|"public","expiresAt","createdAt"}; a token exposure's
 * secret is only in station_port_expose()'s answer, as "token". A port is 1-65535 (-EINVAL
 * without a request otherwise). */

struct station_port_options {
	bool public;		/* "access": "public", no token needed; false: "token" */
	uint64_t expires_in_ms; /* 0: the server's default (24 h); at most 30 days */
};

/* POST …/ports: exposes port. opts may be NULL. *ret (optional) is the exposure, with "token"
 * for token access: shown this once. -EBUSY (409) when the port is exposed already, when
 * previews are off on the controller (no --preview-listen), or for a workspace without a
 * network of its own (the host adapter): the message says which; -EINVAL (400) for an expiry
 * out of range. */
int station_port_expose(struct station_client *c, const char *ws, unsigned port,
			const struct station_port_options *opts, json_t **ret);

/* GET …/ports; *ret is {"exposed":[…],"listening":[{"port","address","proto","pid","command"}]}:
 * the exposures (without tokens) and the TCP sockets listening in the workspace's network (pid
 * as the workspace sees it, null when no process of the workspace holds the socket). */
int station_port_list(struct station_client *c, const char *ws, json_t **ret);

/* DELETE …/ports/{port}: the exposure ends at once, its URL answers 404 from then on and its
 * open connections are closed. -ENOENT (404) when the port is not exposed. */
int station_port_revoke(struct station_client *c, const char *ws, unsigned port);

/* ---- Tokens and the audit log (admin only) ---------------------------------------------- */

/* A token is {"id","name","scope","tenant","limits":{"cpus","memoryMb","pidsLimit",
 * "workspaces"},"createdAt","expiresAt","revokedAt","lastUsedAt","expired"} (docs/api.md,
 * "Tokens"); its secret is only in station_token_create()'s answer, as "token". */

struct station_token_options {
	const char *tenant;	/* required for scope "tenant"; NULL: none */
	const char *expires_at; /* RFC 3339, in the future; NULL: never */
	bool limits;		/* send the limits below (a tenant token only); 0: no cap */
	double cpus;		/* per workspace */
	uint32_t memory_mb;	/* per workspace */
	uint32_t pids_limit;	/* per workspace */
	uint32_t workspaces;	/* at once, for the tenant */
};

/* POST /v1/tokens. scope: "admin", "tenant" or "read". opts may be NULL. *ret (optional) is
 * the token with its secret, "token": shown this once. */
int station_token_create(struct station_client *c, const char *name, const char *scope,
			 const struct station_token_options *opts, json_t **ret);
/* GET /v1/tokens; *ret is the array of tokens, revoked ones too, without secrets. */
int station_token_list(struct station_client *c, json_t **ret);
/* DELETE /v1/tokens/{id}: revoked at once, its open streams closed. *ret (optional) is the
 * token. */
int station_token_revoke(struct station_client *c, const char *id, json_t **ret);

struct station_audit_options {
	size_t limit;	       /* 1-1000; 0: the server's default (100) */
	long long before;      /* entries older than this id (nextBefore); 0: the newest */
	const char *token_id;  /* NULL: any */
	const char *tenant;    /* NULL: any */
	const char *workspace; /* NULL: any */
};

/* GET /v1/audit: *ret is {"entries":[…],"nextBefore":id|null}, newest first. opts may be
 * NULL. */
int station_audit(struct station_client *c, const struct station_audit_options *opts, json_t **ret);

/* ---- Events ------------------------------------------------------------------------------ */

/* GET /v1/events (docs/api.md, "Events"): state changes of workspaces, runs, services and
 * terminals, {"seq","type","change","id","workspaceId","state","at","reason"?}; events that are
 * no longer kept come as one {"type":"gap","seq","from","missed"} (missed null: unknown, the
 * controller restarted). */
struct station_events_options {
	const char *workspace; /* NULL: every workspace */
	const char *types;     /* "run,service"; NULL: all */
	bool has_since;	       /* since: resume after that seq; else from now on */
	uint64_t since;
};
/* Returns 0 to go on, < 0 to stop: station_events() then returns that value. */
typedef int (*station_event_fn)(json_t *event, void *userdata);
/* Calls fn for each event (borrowed) until fn returns < 0 or the stream fails. A connection
 * that drops is opened again with since = the last seq handled (an event seen twice is skipped);
 * after 5 connections in a row without a new event (waits of 0.25 to 4 s between), the error. A refusal (400 for a bad
 * filter) ends it at once. The interrupt check is honoured (-EINTR). */
int station_events(struct station_client *c, const struct station_events_options *opts,
		   station_event_fn fn, void *userdata);

#ifdef __cplusplus
}
#endif
