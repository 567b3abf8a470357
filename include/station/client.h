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
 *   -ENOMEM        out of memory, or a response larger than the client accepts (256 MiB)
 *   -EINVAL (400, 405, 415), -EACCES (401), -ENOENT (404), -EBUSY (409), -E2BIG (413),
 *   -EAGAIN (429), -EIO (500 and anything else), -EOPNOTSUPP (501), -ENOTCONN (503),
 *   -ENOSPC (507): the controller answered with that HTTP status;
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
 * -EINVAL for an endpoint of another form. */
int station_client_new(const char *endpoint, const char *token, struct station_client **ret);

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
};

/* POST /v1/workspaces; *ret is the new workspace. opts may be NULL. -EINVAL (without a
 * request) for an env entry without '=', or an egress that is not a JSON object. */
int station_workspace_create(struct station_client *c, const struct station_workspace_options *opts,
			     json_t **ret);

/* GET /v1/workspaces; *ret is the array of workspaces. */
int station_workspace_list(struct station_client *c, json_t **ret);

int station_workspace_get(struct station_client *c, const char *id, json_t **ret);

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

/* Follows a run's output (GET …/commands/{run}/output, server-sent events) until it ends,
 * calling cb as events arrive. A connection that breaks mid-stream is re-opened (a few times);
 * the replayed bytes are skipped, so each byte still reaches on_output at most once. Returns 0
 * after on_end, with *ret (optional) the terminal run. */
int station_run_follow(struct station_client *c, const char *ws, const char *run,
		       const struct station_follow_callbacks *cb, void *userdata, json_t **ret);

/* Decodes one output part of a finished run (its "encoding" says how): the stream's head
 * ("stdout"/"stderr"), or with tail its "stdoutTail"/"stderrTail". Returns 1 with *ret
 * (NUL-terminated for convenience, free()) and *ret_len; 0 with *ret = NULL when the run has no
 * such part; -EPROTO when the part is malformed. */
int station_run_output(const json_t *run, enum station_stream s, bool tail, char **ret,
		       size_t *ret_len);

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
	const char *stop_signal;    /* "SIGTERM", "SIGINT", …; NULL: SIGTERM */
	int64_t stop_timeout_ms;    /* < 0: the server's default (10000) */
	bool autostart;		    /* start again after the workspace restarts */
};

/* POST /v1/workspaces/{ws}/services; *ret is the new service. -EBUSY when the name is taken. */
int station_service_start(struct station_client *c, const char *ws,
			  const struct station_service_options *opts, json_t **ret);

/* GET …/services; *ret is the array of services (attempts without output). */
int station_service_list(struct station_client *c, const char *ws, json_t **ret);

/* GET …/services/{name}: with every kept attempt and its output. */
int station_service_get(struct station_client *c, const char *ws, const char *name, json_t **ret);

/* POST …/services/{name}/stop and …/restart; *ret (optional) is the service as it is right
 * after the request (a stop completes when state becomes "stopped"). */
int station_service_stop(struct station_client *c, const char *ws, const char *name, json_t **ret);
int station_service_restart(struct station_client *c, const char *ws, const char *name,
			    json_t **ret);

/* DELETE …/services/{name}: stops it and forgets it. */
int station_service_delete(struct station_client *c, const char *ws, const char *name,
			   json_t **ret);

/* GET …/services/{name}/logs: with follow, the current attempt's output live until it ends;
 * without (or with no current attempt), the newest finished attempt's output. cb as for
 * station_run_follow(); on_end gets the service. */
int station_service_logs(struct station_client *c, const char *ws, const char *name, bool follow,
			 const struct station_follow_callbacks *cb, void *userdata, json_t **ret);

/* ---- Terminals --------------------------------------------------------------------------- */

/* A terminal is {"id","command","cols","rows","state","exitCode","signal",…} (docs/api.md,
 * "Terminals"); state is starting, running, exited, closed, failed or lost. */

struct station_terminal_options {
	const char *command; /* NULL: the user's login shell */
	const char *cwd;     /* NULL: the workspace directory */
	char *const *env;    /* NULL-terminated "KEY=VALUE" strings, or NULL */
	unsigned cols;	     /* 0: 80 */
	unsigned rows;	     /* 0: 24 */
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

#ifdef __cplusplus
}
#endif
