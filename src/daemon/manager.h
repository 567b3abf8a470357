/* SPDX-License-Identifier: MIT */
#pragma once

/* The workspace state machine and run bookkeeping: what the API layer calls. Every function
 * runs on the controller's event loop and never blocks on an agent. JSON results are new
 * references the caller owns; their shapes are in docs/api.md. Errors carry a message and the
 * request field at fault (error.h maps them to HTTP statuses). */

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "basic/error.h"

struct manager;
struct event_loop;
struct store;

struct manager_config {
	const char *root;
	const char *worker;
	const char *agent_path;          /* station-agent binary */
	uint64_t default_timeout_ms;     /* 60000 */
	uint64_t max_timeout_ms;         /* 24 h */
	uint64_t default_output_bytes;   /* per stream kept: head + tail, 128 KiB */
	uint64_t max_output_bytes;       /* cap for a per-run override, 8 MiB (≤ AGENT_MAX_OUTPUT_BYTES) */
	size_t max_running_per_workspace; /* 64 */
	size_t max_workspaces;           /* 1000 */
	uint64_t retention_usec;         /* finished runs kept this long, 24 h */
	size_t retention_runs;           /* and at most this many per workspace, 1000 */
	const char *default_adapter;     /* "host" or "container" */
	const char *runtime;             /* OCI runtime: runc, crun, runsc or a path */
	const char *default_image;       /* NULL: container workspaces must name one */
	const char *default_seccomp;     /* the worker's default seccomp profile (path) */
	uint32_t id_base;                /* host uid/gid of container root (range of 65536) */
};

int manager_new(struct event_loop *loop, struct store *store, const struct manager_config *cfg,
		struct manager **ret);
/* Reconciles stored workspaces with their agents (after a restart). */
int manager_start(struct manager *m);
/* Closes agent connections without stopping agents or their runs. */
void manager_free(struct manager *m);

json_t *manager_ready(struct manager *m);  /* {"ready":bool,"checks":[{"name","ok","message"}]} */
json_t *manager_worker(struct manager *m);

struct workspace_spec {
	const char *adapter; /* NULL: "host" */
	json_t *env;         /* borrowed; NULL or an object of string values, validated */
	const char *image;           /* container: "name@sha256:…" or "sha256:…"; NULL: default */
	const char *seccomp_profile; /* container: absolute path of a Docker-format profile; NULL:
				      * the worker's default profile */
	const char *network;         /* container: "none" (NULL: "none") */
	double cpus;         /* 0: unlimited (docs/api.md ranges, validated by the API layer) */
	uint64_t memory_mb;  /* 0: unlimited */
	uint64_t pids_limit; /* 0: unlimited */
};

int manager_workspace_create(struct manager *m, const struct workspace_spec *spec, json_t **ret,
			     struct station_error *e);
int manager_workspace_list(struct manager *m, json_t **ret, struct station_error *e);
int manager_workspace_get(struct manager *m, const char *id, json_t **ret,
			  struct station_error *e);
int manager_workspace_delete(struct manager *m, const char *id, struct station_error *e);
int manager_workspace_restart(struct manager *m, const char *id, json_t **ret,
			      struct station_error *e);

struct run_spec {
	const char *command;
	const char *cwd;         /* NULL: the workspace directory */
	json_t *env;             /* borrowed; NULL or an object of string values, validated */
	const uint8_t *stdin_data;
	size_t stdin_len;
	uint64_t timeout_ms;     /* 0: default */
	uint64_t max_output_bytes; /* 0: default */
};

/* Starts a run; *ret is the run as JSON (status "running"). */
int manager_run_start(struct manager *m, const char *ws_id, const struct run_spec *spec,
		      json_t **ret, struct station_error *e);
int manager_run_get(struct manager *m, const char *ws_id, const char *run_id, json_t **ret,
		    struct station_error *e);
/* Newest first, without output. */
int manager_run_list(struct manager *m, const char *ws_id, json_t **ret, struct station_error *e);
/* -EBUSY when already terminal. */
int manager_run_cancel(struct manager *m, const char *ws_id, const char *run_id,
		       struct station_error *e);

/* Calls fn once when the run reaches a terminal status. Returns 0 with *ret set when
 * registered, 1 when the run is already terminal (nothing registered), < 0 on error (unknown
 * workspace or run). fn is never called from inside manager_run_wait. */
struct run_waiter;
typedef void (*run_waiter_fn)(void *userdata);
int manager_run_wait(struct manager *m, const char *ws_id, const char *run_id, run_waiter_fn fn,
		     void *userdata, struct run_waiter **ret, struct station_error *e);
/* Before fn was called; afterwards the waiter is gone and must not be touched. */
void manager_run_waiter_cancel(struct run_waiter *w);

/* Live output. output() receives bytes with their offset in the stream; an offset beyond the
 * previous chunk's end is a gap (bytes the watcher missed). done() is called once, after the
 * last output(), when the run is terminal. A finished run replays its stored head and tail and
 * then calls done(). Callbacks are never invoked from inside manager_run_watch. */
struct run_watch;
struct run_watch_ops {
	void (*output)(void *userdata, int stream, uint64_t offset, const void *data, size_t n);
	void (*done)(void *userdata);
};
int manager_run_watch(struct manager *m, const char *ws_id, const char *run_id,
		      const struct run_watch_ops *ops, void *userdata, struct run_watch **ret,
		      struct station_error *e);
/* Before done(); after done() the watch is gone. */
void manager_run_unwatch(struct run_watch *w);

/* Images (the container adapter's image store). Image JSON: {"digest","name","reference",
 * "size","layers","config":{"user","env","workdir"},"createdAt","usedBy":[workspace ids]}.
 * Import and pull block the loop while they run (a local layout or registry: seconds). */
int manager_image_import(struct manager *m, const char *path, const char *name, json_t **ret,
			 struct station_error *e);
int manager_image_pull(struct manager *m, const char *ref, const char *registry, bool plain_http,
		       json_t **ret, struct station_error *e);
int manager_image_list(struct manager *m, json_t **ret, struct station_error *e);
/* -EBUSY while a workspace uses it. */
int manager_image_remove(struct manager *m, const char *ref, struct station_error *e);
