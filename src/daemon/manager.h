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
#include <stdio.h>

#include "basic/error.h"
#include "domain/auth.h"
#include "domain/state.h"
#include "image/image.h"

struct manager;
struct event_loop;
struct etcd;
struct store;
struct net_config;

struct manager_config {
	const char *root;
	const char *worker;
	const char *agent_path;	       /* station-agent binary */
	const char *kernel_dir;	       /* the code contexts' kernel programs; NULL: none */
	uint64_t default_timeout_ms;   /* 60000 */
	uint64_t max_timeout_ms;       /* 24 h */
	uint64_t default_output_bytes; /* per stream kept: head + tail, 128 KiB */
	uint64_t max_output_bytes; /* cap for a per-run override, 8 MiB (≤ AGENT_MAX_OUTPUT_BYTES) */
	size_t max_running_per_workspace;    /* 64 */
	size_t max_workspaces;		     /* 1000 */
	uint64_t retention_usec;	     /* finished runs kept this long, 24 h */
	size_t retention_runs;		     /* and at most this many per workspace, 1000 */
	uint64_t idempotency_retention_usec; /* Idempotency-Key kept this long, 24 h */
	const char *default_adapter;	     /* "host" or "container", one of the allowed ones */
	bool allow_host;		     /* --adapters: what the API may create */
	size_t events_kept;		     /* 0: MANAGER_EVENTS_KEPT (--events-kept) */
	uint64_t audit_kept;		     /* audit rows kept, 100000; 0: the default */
	/* Usage history (manager-usage-history.c): the sampling interval, 0: 5000, at least
	 * USAGE_INTERVAL_MIN_MS; the cap on its rows, 0: USAGE_MAX_ROWS_DEFAULT */
	uint64_t usage_interval_ms;
	uint64_t usage_max_rows;
	bool allow_container;
	uint64_t default_pids_limit; /* for workspaces that name none; 0: unlimited */
	uint64_t default_memory_mb;  /* likewise */
	uint64_t home_size_mb;	     /* container HOME size limit for new workspaces; 0: none */
	bool host_user_set;	     /* --host-user: host workspaces run commands as */
	uint32_t host_uid, host_gid; /* this uid and gid, with no supplementary groups */
	const char *runtime;	     /* OCI runtime: runc, crun, runsc or a path */
	/* --criu: the criu memory snapshots use (the probe and the runtime); NULL: PATH's */
	const char *criu;
	const char *default_image;	 /* NULL: container workspaces must name one */
	const char *default_seccomp;	 /* the worker's default seccomp profile (path) */
	uint32_t id_base;		 /* host uid/gid of container root (range of 65536) */
	const char *const *seccomp_dirs; /* profile directories, NULL-terminated (adapter.h) */
	/* Image imports (manager-image.c): layouts only from beneath these directories
	 * (--import-dir; none: path imports are refused), within these limits (0: defaults). */
	const char *const *import_dirs;
	size_t n_import_dirs;
	struct image_limits image_limits;
	/* Bridge and restricted networks for container workspaces (net/net.h; root is filled
	 * in by the manager). NULL: networking off, only "none". */
	const struct net_config *network;
	/* The key secrets are sealed with in the store (store/secret-box.h; main.c loads it from
	 * <root>/secrets.key), 32 bytes, copied by manager_new(). NULL: secrets cannot be put. */
	const uint8_t *secret_key;
	/* The warm pool (--pool, docs/operations.md): per entry, this many started idle container
	 * workspaces of the image, network and profile, claimed by a matching create. */
	const struct pool_config *pools;
	size_t n_pools;
	/* --lxcfs: "auto" (NULL; start our own lxcfs when installed), "off", or the absolute
	 * mount point of an lxcfs the operator runs (daemon/lxcfs.h). */
	const char *lxcfs;
	unsigned create_concurrency; /* creates and restarts at once; 0: cores x 2 */
	/* Tenants (manager-tenant.c): --tenant makes a private worker, whose creates by another
	 * tenant are refused (NULL: any tenant). What a tenant's create may name, from the
	 * operator's allow lists, each NULL-terminated: images as digest references
	 * (name@sha256:…, sha256:…) or "repo@*" (any digest of repo); NULL: the default image
	 * only. Seccomp profile names; NULL: "default" only. Network modes; NULL: "none" only. */
	const char *tenant;
	const char *const *tenant_images;
	const char *const *tenant_seccomp_profiles;
	const char *const *tenant_networks;
	int runtime_timeout_ms; /* per runtime call; 0: the runtime's default (30 s) */
	/* --workspace-ca (adapter/ca-bundle.h): the operator's certificates, checked PEM; NULL:
	 * none. --workspace-proxy (adapter/proxy.h): NULL: none; its variables go to host
	 * workspaces and bridge ones, to restricted ones only with proxy_restricted. */
	const char *workspace_ca_pem;
	size_t workspace_ca_len;
	const struct workspace_proxy *workspace_proxy;
	bool workspace_proxy_restricted;
	/* Previews (manager-ports.c; docs/api.md "Previews"): the domain a preview's host label
	 * goes under (NULL: no --preview-listen, previews off: exposing answers 409), and how
	 * its URL is written: scheme ("http" or "https") and the port (0: the scheme's own, left
	 * out of the URL). A URL is scheme://<label>.<domain>[:port]/. */
	const char *preview_domain;
	const char *preview_scheme;
	uint16_t preview_port;
	/* Snapshots (manager-snapshot.c): the most bytes one snapshot's layer holds
	 * (--max-snapshot-bytes) and the most snapshots a tenant keeps (the operator counts as
	 * one tenant; --max-snapshots-per-tenant). */
	uint64_t max_snapshot_bytes;
	uint64_t max_snapshots_per_tenant;
	/* The fleet's shared state (manager-fleet.c, --fleet; docs/operations.md "Many
	 * workers"): a client of etcd (store/etcd.h) the caller owns and frees after the
	 * manager, and the URL this worker is registered at. NULL: no fleet, tokens in SQLite
	 * alone. */
	struct etcd *fleet;
	const char *advertise_url;
	/* GET /metrics: per-workspace series for at most this many workspaces
	 * (--metrics-max-workspaces); 0: MANAGER_METRICS_MAX_WORKSPACES. */
	size_t metrics_max_workspaces;
};

struct pool_config {
	const char *image;   /* as a create names it: name@sha256:… or sha256:… */
	const char *network; /* "none" or "bridge" */
	const char *seccomp; /* NULL: the worker's default profile */
	size_t size;	     /* 1 … POOL_MAX_SIZE */
};
#define POOL_MAX_SIZE 1000
#define POOL_MAX 16
/* Parses one --pool value (IMAGE[,size=N][,network=none|bridge][,seccomp=PROFILE]) into ret,
 * whose strings point into buf (a copy of the value the caller keeps); -EINVAL with why in
 * err. */
int pool_config_parse(char *buf, struct pool_config *ret, char *err, size_t err_size);

int manager_new(struct event_loop *loop, struct store *store, const struct manager_config *cfg,
		struct manager **ret);

/* Tenants (manager-tenant.c, docs/security.md "The tenant boundary"). Every workspace records its tenant ("" for the
 * operator's); its runs, services, terminals, files and secrets are the workspace's.
 *
 * The viewer: while it is set, every call that names a workspace (or something in one) by id
 * treats another tenant's as missing, through the same lookup and with the same error as an
 * id that does not exist; lists show the viewer's only; an image is seen when the operator's or
 * the viewer's. The API layer sets it for each request it dispatches to the principal's tenant
 * and clears it after (NULL: everything, the operator's view); the string must outlive that.
 * An image imported or pulled while a viewer is set is recorded as that tenant's. */
#define MANAGER_TENANT_MAX 64
void manager_set_viewer(struct manager *m, const char *tenant);
const char *manager_viewer(const struct manager *m);
/* The workspaces of tenant (those being created included, pool members not). */
size_t manager_tenant_workspaces(const struct manager *m, const char *tenant);
/* What a principal's workspace create may have, before manager_workspace_create(): sets
 * spec->tenant; for a tenant, refuses (STATION_EFORBIDDEN, naming the field and what is
 * allowed) the host adapter, an image, profile or network off the allow lists, cpus,
 * memoryMb or pidsLimit above the token's limits, and (-EAGAIN) a create beyond its
 * workspaces limit; fills absent limits with the token's caps where they are lower than the
 * worker's defaults. On a private worker another tenant's create is refused. */
struct auth_principal;
struct workspace_spec;
int manager_tenant_admit(struct manager *m, const struct auth_principal *p,
			 struct workspace_spec *spec, struct station_error *e);
/* Whether the viewer sees the image ref names: the operator's images and its own. */
bool manager_image_visible(struct manager *m, const char *ref);
/* Whether a tenant may import or pull this reference (the image allow list): 0, or
 * STATION_EFORBIDDEN naming the list. */
int manager_tenant_image_allowed(struct manager *m, const char *ref, const char *field,
				 struct station_error *e);
/* Resolves cfg.pools (images and profiles in the store, network available) and arms their
 * refill; -EINVAL with e naming the bad pool. Before manager_start(). */
int manager_pools_setup(struct manager *m, struct station_error *e);
/* Reconciles stored workspaces with their agents (after a restart). */
int manager_start(struct manager *m);
/* Closes agent connections without stopping agents or their runs. */
void manager_free(struct manager *m);

/* Idempotency keys (docs/api.md, "Idempotency keys"). scope is the creating request's path,
 * hash the SHA-256 hex of its canonical form (method, path, body). A claim returns:
 *   0     the key is free: it is now claimed; the caller creates, then finishes the claim;
 *   1     a live key with the same hash made *ret's object, with *ret's status: answer that;
 *   -EBUSY        (e, field "Idempotency-Key") the key was used with a different request;
 *   -EINPROGRESS  (e) a claim on the key with the same hash is still under way.
 * finish() ends a claim: with object_id the key is stored with the object and status (kept
 * for the retention window, across restarts); with NULL the key is free again (the create
 * failed). -ENOENT when no such claim. */
struct idempotency_hit {
	char object_id[128]; /* a workspace, run or terminal id, or a service name */
	unsigned status;
};
int manager_idempotency_claim(struct manager *m, const char *scope, const char *key,
			      const char *hash, struct idempotency_hit *ret,
			      struct station_error *e);
int manager_idempotency_finish(struct manager *m, const char *scope, const char *key,
			       const char *object_id, unsigned status);
/* Stores the claimed key with object_id and status now, in the caller's transaction, so that
 * the object's row and its key are written together; the claim stays until finish() (called
 * then with NULL). -ENOENT when no such claim. */
int manager_idempotency_record(struct manager *m, const char *scope, const char *key,
			       const char *object_id, unsigned status);

/* {"ready":bool,"checks":[{"name","ok","message"}],"checkedAt"}: the last check's result (a new
 * reference), kept current by checks off the loop (on a timer and on events). NULL while no
 * check has ended yet, or refresh: then fn(userdata, result) is called once the check under
 * way (or started now) ends, unless manager_ready_forget(*ret_waiter) came first. */
struct ready_waiter;
json_t *manager_ready(struct manager *m, bool refresh, void (*fn)(void *userdata, json_t *result),
		      void *userdata, struct ready_waiter **ret_waiter);
void manager_ready_forget(struct ready_waiter *w);
/* The store check of manager_ready(), cheap (a statvfs): false, with the reason in msg, when the
 * metadata root's filesystem is full or run results wait in memory for the store to take them. */
bool manager_store_check(struct manager *m, char *msg, size_t size);
json_t *manager_worker(struct manager *m);

/* A workspace's limits (docs/api.md), which the API and the worker's defaults
 * (--default-memory-mb, --default-pids-limit) both stay within. */
#define WORKSPACE_MAX_CPUS 1024.0
#define WORKSPACE_MAX_MEMORY_MB 1048576u
#define WORKSPACE_MAX_PIDS_LIMIT 4194304u

/* What a workspace does once idle for idleTimeoutMs (workspace_spec.idle_action). */
enum idle_action {
	IDLE_ACTION_STOP = 0, /* today's: stopped, stopReason "idle" */
	IDLE_ACTION_PAUSE,    /* paused, pauseReason "idle"; resumed by autoResume or resume */
};

struct workspace_spec {
	const char *adapter; /* NULL: the worker's default adapter */
	json_t *env;	     /* borrowed; NULL or an object of string values, validated */
	const char *image;   /* container: "name@sha256:…" or "sha256:…"; NULL: default */
	const char *seccomp_profile; /* container: absolute path of a Docker-format profile; NULL:
				      * the worker's default profile */
	const char *network;	     /* container: "none", "bridge", "restricted" (NULL: "none") */
	json_t *egress;		     /* borrowed; restricted: the egress policy object as the API
				      * got it (validated by the manager: net/policy.h) */
	double cpus;	     /* 0: unlimited (docs/api.md ranges, validated by the API layer) */
	uint64_t memory_mb;  /* 0: the worker's default (--default-memory-mb) */
	uint64_t pids_limit; /* 0: the worker's default (--default-pids-limit) */
	uint64_t idle_timeout_ms; /* 0: never stopped for being idle (manager-idle.c) */
	const char *tenant;	  /* who the workspace is for; NULL or "": the operator */
	/* Pause and snapshots (manager-pause.c, manager-snapshot.c) */
	const char *snapshot;	      /* "s-…": start from this snapshot's image and HOME; the
					* snapshot's image replaces image (both given: -EINVAL) */
	bool auto_resume;	      /* a paused workspace resumes for a command, attach, write */
	enum idle_action idle_action; /* what idle_timeout_ms does */
	/* Names and labels (manager-labels.c), validated by the API layer (domain/labels.h) */
	const char *name; /* NULL: none; unique per tenant (-EBUSY naming the holder) */
	json_t *labels;	  /* borrowed; NULL or an object of string values */
};
/* idleTimeoutMs: 0 (none) or in this range */
#define WORKSPACE_MIN_IDLE_TIMEOUT_MS 1000u
#define WORKSPACE_MAX_IDLE_TIMEOUT_MS (30ull * 86400 * 1000)

/* Create, delete and restart run their slow steps (the runtime, the agent's start, the
 * cgroup's teardown) off the loop. Each returns < 0 with e at once for what it can refuse at
 * once, 0 with *ret when answered at once (a create served by the warm pool), or 1 when under
 * way: fn(userdata, ...) is then called on the loop once it ends (result: the workspace's
 * JSON, a new reference; NULL for a delete), unless manager_workspace_op_forget(*ret_op) came
 * first (the client went away: the operation itself goes on). Requests for one workspace run
 * in order: a delete of a workspace being created waits for the create to end. */
struct workspace_op;
typedef void (*workspace_op_fn)(void *userdata, int r, json_t *result,
				const struct station_error *e);
int manager_workspace_create(struct manager *m, const struct workspace_spec *spec,
			     workspace_op_fn fn, void *userdata, struct workspace_op **ret_op,
			     json_t **ret, struct station_error *e);
void manager_workspace_op_forget(struct workspace_op *op);
/* The workspace an operation under way is for (listed from the start, `creating` for a
 * create); NULL once the operation has ended. */
const char *manager_workspace_op_id(const struct workspace_op *op);
/* What GET /v1/workspaces lists (docs/api.md, "Names and labels"): every condition holds. */
struct workspace_filter {
	const char *name;	   /* NULL: any */
	const char *state;	   /* NULL: any; a workspace_state_to_string() */
	const char *const *labels; /* NULL-terminated "KEY=VALUE" (equal) or "KEY" (present) */
};
/* f NULL: every workspace the viewer sees. */
int manager_workspace_list(struct manager *m, const struct workspace_filter *f, json_t **ret,
			   struct station_error *e);
int manager_workspace_get(struct manager *m, const char *id, json_t **ret, struct station_error *e);
/* PATCH /v1/workspaces/{id} (manager-labels.c): with name_set the name becomes name (NULL:
 * none; -EBUSY naming the holder when another of the tenant's workspaces has it); labels (NULL:
 * unchanged) is merged as a JSON merge patch: a string sets the key, null removes it, the
 * labels null removes them all (labels_clear). -EINVAL (field "labels") beyond LABELS_MAX or
 * LABELS_BYTES_MAX after the merge. *ret: the workspace as GET shows it; a "workspace"
 * "updated" event. */
int manager_workspace_update(struct manager *m, const char *id, bool name_set, const char *name,
			     bool labels_clear, json_t *labels, json_t **ret,
			     struct station_error *e);
/* The id of the workspace of tenant (NULL or "": the operator's) called name, into ret: 0, or
 * -ENOENT. Another tenant's workspace of that name is never found. */
int manager_workspace_resolve(struct manager *m, const char *tenant, const char *name, char *ret,
			      size_t size);
int manager_workspace_delete(struct manager *m, const char *id, workspace_op_fn fn, void *userdata,
			     struct workspace_op **ret_op, struct station_error *e);
/* A workspace's network (docs/api.md, "Network"): {"mode", "address", "gateway", "egress",
 * "counters": {"allowed", "denied", "dnsAllowed", "dnsRefused"}}; mode "none" has only "mode".
 * set replaces a restricted workspace's egress policy (-EINVAL, field "egress", for a bad one;
 * -EBUSY when the workspace's mode is not restricted) and answers as get. */
int manager_workspace_network_get(struct manager *m, const char *id, json_t **ret,
				  struct station_error *e);
int manager_workspace_network_set(struct manager *m, const char *id, json_t *egress, json_t **ret,
				  struct station_error *e);
int manager_workspace_restart(struct manager *m, const char *id, workspace_op_fn fn, void *userdata,
			      struct workspace_op **ret_op, struct station_error *e);

struct run_spec {
	const char *command;
	const char *cwd; /* NULL: the workspace directory */
	json_t *env;	 /* borrowed; NULL or an object of string values, validated */
	const uint8_t *stdin_data;
	size_t stdin_len;
	uint64_t timeout_ms;	   /* 0: default */
	uint64_t max_output_bytes; /* 0: default */
	/* A claimed Idempotency-Key (manager_idempotency_claim), or NULL: stored with the run
	 * in the run's own transaction, with idempotency_status. */
	const char *idempotency_scope, *idempotency_key;
	unsigned idempotency_status;
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

/* Calls fn once when the run reaches a terminal status, with the run as GET shows it then
 * (borrowed; take a reference to keep it) when this controller recorded that status itself,
 * else NULL (read it with manager_run_get()). Returns 0 with *ret set when registered, 1 when
 * the run is already terminal (nothing registered), < 0 on error (unknown workspace or run).
 * fn is never called from inside manager_run_wait. */
struct run_waiter;
typedef void (*run_waiter_fn)(void *userdata);
typedef void (*run_result_fn)(void *userdata, json_t *run);
int manager_run_wait(struct manager *m, const char *ws_id, const char *run_id, run_result_fn fn,
		     void *userdata, struct run_waiter **ret, struct station_error *e);
/* Before fn was called; afterwards the waiter is gone and must not be touched. */
void manager_run_waiter_cancel(struct run_waiter *w);

/* For a follower of an output stream (run, service attempt, terminal) that has every byte
 * before next: drops from the chunk at *offset (*data, *n bytes) what it already has, since a
 * replay of stored output may overlap live output. Returns false when nothing new is left;
 * otherwise *offset > next means the follower missed the bytes in between (a gap). */
static inline bool output_skip_seen(uint64_t next, uint64_t *offset, const uint8_t **data,
				    size_t *n)
{
	size_t seen;

	if (*offset + *n <= next)
		return false;
	if (*offset < next) {
		seen = (size_t)(next - *offset);
		*data += seen;
		*n -= seen;
		*offset = next;
	}
	return true;
}

/* Live output. output() receives bytes with their offset in the stream; an offset beyond the
 * previous chunk's end is a gap (bytes the watcher missed). done() is called once, after the
 * last output(), when the run is terminal. A finished run replays its stored head and tail and
 * then calls done(). Callbacks are never invoked from inside manager_run_watch.
 *
 * from: NULL, or per stream (stdout, stderr) the offset to resume at: nothing before it is
 * delivered, and output() for a chunk beyond it (or a chunk of no bytes at the stream's end)
 * tells the watcher what is no longer kept. A finished run rejects an offset beyond what its
 * stream produced (-EINVAL, naming stdoutOffset or stderrOffset); a running run cannot tell
 * yet and delivers from there once produced. */
struct run_watch;
struct run_watch_ops {
	void (*output)(void *userdata, int stream, uint64_t offset, const void *data, size_t n);
	void (*done)(void *userdata);
};
int manager_run_watch(struct manager *m, const char *ws_id, const char *run_id,
		      const uint64_t *from, const struct run_watch_ops *ops, void *userdata,
		      struct run_watch **ret, struct station_error *e);
/* Before done(); after done() the watch is gone. */
void manager_run_unwatch(struct run_watch *w);

/* Images (the container adapter's image store). Image JSON: {"digest","name","reference",
 * "size","layers","config":{"user","env","workdir"},"createdAt","usedBy":[workspace ids]}.
 *
 * Import and pull run in a child process (a job), never on the loop: done() is called once,
 * from the loop, with the result (r < 0: e says why; else the image JSON, which done() takes).
 * At most MANAGER_MAX_IMAGE_JOBS run at once (-EAGAIN beyond). The path of an import must lie
 * beneath one of cfg.import_dirs, and is resolved there without following symlinks. */
#define MANAGER_MAX_IMAGE_JOBS 4
struct image_job;
typedef void (*image_job_done_fn)(void *userdata, int r, json_t *image,
				  const struct station_error *e);
int manager_image_import(struct manager *m, const char *path, const char *name,
			 image_job_done_fn done, void *userdata, struct image_job **ret,
			 struct station_error *e);
int manager_image_pull(struct manager *m, const char *ref, const char *registry, bool plain_http,
		       image_job_done_fn done, void *userdata, struct image_job **ret,
		       struct station_error *e);
/* The caller no longer wants the result: done() will not be called. The job itself runs to its
 * end (its own timeouts bound it), so the store is left as a whole import or none. */
void manager_image_job_forget(struct image_job *j);
/* The program of an image job: `station-sandboxd --image-job REQUEST`, which the controller
 * runs for each import and pull (manager-image.c says why a fresh program), with the layout on
 * fd 3 and its report's pipe on fd 4. Returns the exit status. */
int manager_image_job_main(const char *request);
int manager_image_list(struct manager *m, json_t **ret, struct station_error *e);
/* Removal runs off the loop (a large image is many files; the store's filesystem may stall):
 * done() is called once, from the loop, with the result (r < 0: e says why). Errors found at
 * once are returned (done() not called): a bad reference, the store unavailable. Later:
 * -ENOENT not in the store (or another tenant's), -EBUSY while a workspace uses it (one being
 * created included), while it is already being removed, or while an import, pull or other
 * removal holds the store (never waits). While it is being removed, a create naming it fails
 * with -EBUSY (manager_image_removing()). */
struct image_removal;
typedef void (*image_remove_done_fn)(void *userdata, int r, const struct station_error *e);
int manager_image_remove(struct manager *m, const char *ref, image_remove_done_fn done,
			 void *userdata, struct image_removal **ret, struct station_error *e);
/* The caller no longer wants the result: done() will not be called; the removal goes on. */
void manager_image_removal_forget(struct image_removal *x);
/* Export (GET /v1/images/{ref}/export): the image as an OCI image layout tar
 * (image_export_layout()), written by a worker thread into a pipe whose read end *ret_fd gets
 * (O_NONBLOCK, CLOEXEC; the caller reads and closes it: a close ends the export, its writes
 * failing with EPIPE). Nothing is read or held in memory but a pipe's worth. done() is called
 * once, from the loop, when the export ended: r < 0 and e when it failed (the bytes read so
 * far are then not a whole layout); a failure before its first byte leaves the pipe empty. At
 * once: -ENOENT (404) for an image not in the store or another tenant's, as GET
 * /v1/images/{ref} says; -EAGAIN (429) past MANAGER_MAX_IMAGE_EXPORTS at once. */
#define MANAGER_MAX_IMAGE_EXPORTS 8
struct image_export;
typedef void (*image_export_done_fn)(void *userdata, int r, const struct station_error *e);
int manager_image_export(struct manager *m, const char *ref, image_export_done_fn done,
			 void *userdata, struct image_export **ret, int *ret_fd,
			 struct station_error *e);
/* The caller no longer wants the result: done() will not be called. Close the fd too. */
void manager_image_export_forget(struct image_export *x);

/* Services (manager-service.c): foreground commands the workspace's agent supervises under a
 * restart policy. Service JSON and its attempts: docs/api.md, "Services". Names are unique
 * per workspace (-EBUSY, 409, for a taken one); at most MANAGER_MAX_SERVICES per workspace. */
#define MANAGER_MAX_SERVICES 32

struct service_spec {
	const char *name; /* [a-z0-9][a-z0-9._-]{0,62} */
	const char *command;
	const char *cwd; /* NULL: the workspace directory */
	json_t *env;	 /* borrowed; NULL or an object of string values, validated */
	enum service_policy policy;
	uint64_t max_restarts;
	uint64_t delay_ms;
	uint64_t backoff_permille; /* 0: none; else >= 1000 (the delay multiplier x1000) */
	uint64_t max_delay_ms;
	uint64_t reset_after_ms; /* an attempt this long resets the restart budget; 0: never */
	int stop_signal;
	uint64_t stop_timeout_ms;
	bool autostart; /* start again after the workspace restarts */
};

int manager_service_start(struct manager *m, const char *ws_id, const struct service_spec *spec,
			  json_t **ret, struct station_error *e);
int manager_service_list(struct manager *m, const char *ws_id, json_t **ret,
			 struct station_error *e);
int manager_service_get(struct manager *m, const char *ws_id, const char *name, json_t **ret,
			struct station_error *e);
/* stopSignal to the current attempt's processes, SIGKILL after stopTimeoutMs, no restart; a
 * pending restart is cancelled. *ret is the service as it is now (the stop completes later:
 * the API waits for it with manager_service_wait_rest()). */
int manager_service_stop(struct manager *m, const char *ws_id, const char *name, json_t **ret,
			 struct station_error *e);
/* Waiting for a service to be at rest (no attempt alive, no restart pending: stopped, failed,
 * exhausted), e.g. after a stop. Returns 1 (no waiter) when it is already, 0 with *ret a waiter
 * whose fn is called once: with true when the service came to rest, false when it went away
 * (deleted, its workspace gone). Never called from inside this call. The caller cancels a
 * waiter it no longer wants (not after fn ran). */
struct service_waiter;
typedef void (*service_rest_fn)(void *userdata, bool at_rest);
int manager_service_wait_rest(struct manager *m, const char *ws_id, const char *name,
			      service_rest_fn fn, void *userdata, struct service_waiter **ret,
			      struct station_error *e);
void manager_service_waiter_cancel(struct service_waiter *w);
/* The service's stopTimeoutMs (a stop's bound), or 0 when there is no such service. */
uint64_t manager_service_stop_timeout_ms(struct manager *m, const char *ws_id, const char *name);

/* A fresh attempt: the current one is stopped first. */
int manager_service_restart(struct manager *m, const char *ws_id, const char *name, json_t **ret,
			    struct station_error *e);
/* Stops it and forgets it, attempts included. */
int manager_service_delete(struct manager *m, const char *ws_id, const char *name,
			   struct station_error *e);

/* Output of a service, with the callbacks of run watches. follow: the current attempt, live,
 * until it ends; otherwise (or with no current attempt) the newest finished attempt's stored
 * output. done() comes once, after the last output(). Never called from inside the call.
 * from: as for manager_run_watch(), in the attempt shown. */
struct service_watch;
int manager_service_watch(struct manager *m, const char *ws_id, const char *name, bool follow,
			  const uint64_t *from, const struct run_watch_ops *ops, void *userdata,
			  struct service_watch **ret, struct station_error *e);
/* The same for attempt `attempt` (> 0) alone: live while it is the current attempt, else its
 * stored output (-ENOENT when there is none). What a follower that fell behind watches again
 * from where it stood, as offsets count within one attempt. */
int manager_service_watch_attempt(struct manager *m, const char *ws_id, const char *name,
				  uint64_t attempt, const uint64_t *from,
				  const struct run_watch_ops *ops, void *userdata,
				  struct service_watch **ret, struct station_error *e);
/* The attempt w shows (before done()): 0 while the service it waits for has not reported it. */
uint64_t manager_service_watch_number(const struct service_watch *w);
/* Before done(); afterwards the watch is gone. */
void manager_service_unwatch(struct service_watch *w);

/* Terminals (manager-terminal.c): PTY sessions run by the workspace's agent. Terminal JSON:
 * docs/api.md, "Terminals". At most MANAGER_MAX_TERMINALS live ones per workspace (-EAGAIN,
 * 429). A terminal outlives its attachers and the controller; it ends when its command exits
 * or it is force-closed. */
#define MANAGER_MAX_TERMINALS 16
#define MANAGER_TERMINAL_SCROLLBACK (256u * 1024)

struct terminal_spec {
	const char *command; /* NULL: the user's login shell */
	const char *cwd;     /* NULL: the workspace directory */
	json_t *env;	     /* borrowed; NULL or an object of string values, validated */
	unsigned cols;	     /* 1-10000 */
	unsigned rows;
};

/* *ret is the terminal (state "starting": the agent reports it running or failed soon). */
int manager_terminal_open(struct manager *m, const char *ws_id, const struct terminal_spec *spec,
			  json_t **ret, struct station_error *e);
int manager_terminal_list(struct manager *m, const char *ws_id, json_t **ret,
			  struct station_error *e);
int manager_terminal_get(struct manager *m, const char *ws_id, const char *term_id, json_t **ret,
			 struct station_error *e);
/* -EBUSY when the terminal has ended. *ret (optional) is the terminal. */
int manager_terminal_resize(struct manager *m, const char *ws_id, const char *term_id,
			    unsigned cols, unsigned rows, json_t **ret, struct station_error *e);
/* Force-close: the agent kills the terminal's process tree (its cgroup) and nothing else. The
 * end is reported later (manager_terminal_wait(TERMINAL_WAIT_ENDED)). 1 when it had already
 * ended. */
int manager_terminal_close(struct manager *m, const char *ws_id, const char *term_id,
			   struct station_error *e);

enum terminal_wait {
	TERMINAL_WAIT_STARTED, /* running, or ended */
	TERMINAL_WAIT_ENDED,
};
/* Calls fn once when the terminal reaches what. 0 with *ret when registered, 1 when it already
 * has (nothing registered), < 0 for an unknown workspace or terminal. Never called from inside
 * the call. */
struct terminal_waiter;
int manager_terminal_wait(struct manager *m, const char *ws_id, const char *term_id,
			  enum terminal_wait what, run_waiter_fn fn, void *userdata,
			  struct terminal_waiter **ret, struct station_error *e);
/* Before fn was called; afterwards the waiter is gone. */
void manager_terminal_waiter_cancel(struct terminal_waiter *w);

/* An attacher: first the scrollback (from its oldest kept byte), then live output. output()
 * gets bytes with their stream offset; an offset beyond the previous chunk's end is a gap.
 * ended() comes once, last, with the terminal (borrowed); the attach is gone afterwards. An
 * attach to an ended terminal gets ended() at once (from the loop). */
struct terminal_attach;
struct terminal_attach_ops {
	void (*output)(void *userdata, uint64_t offset, const void *data, size_t n);
	void (*ended)(void *userdata, json_t *terminal);
};
int manager_terminal_attach(struct manager *m, const char *ws_id, const char *term_id,
			    const struct terminal_attach_ops *ops, void *userdata,
			    struct terminal_attach **ret, struct station_error *e);
/* Before ended(); the terminal keeps running. */
void manager_terminal_detach(struct terminal_attach *a);
/* Keystrokes to the terminal; dropped once it has ended. */
int manager_terminal_input(struct terminal_attach *a, const void *data, size_t n);
int manager_terminal_attach_resize(struct terminal_attach *a, unsigned cols, unsigned rows);
/* For an attacher that fell behind and dropped output: from now on it gets the scrollback
 * from stream offset `from` (or its oldest kept byte, if later), then live output again. */
int manager_terminal_resync(struct terminal_attach *a, uint64_t from);

/* ---- Secrets (manager-secret.c; docs/api.md, "Secrets") ------------------------------------ */

/* At most this many secrets per workspace (-EAGAIN, 429, for one more). */
#define MANAGER_MAX_SECRETS 64

/* PUT …/secrets/{name}: body {"value", "host"?, "username"?, "expiresAt"?}, validated here.
 * *ret is the secret without its value; *ret_created tells 201 from 200. The body's value
 * string is wiped (explicit_bzero) before the call returns, whatever the outcome. -EBUSY while
 * the workspace is being deleted. */
int manager_secret_put(struct manager *m, const char *ws_id, const char *name, json_t *body,
		       json_t **ret, bool *ret_created, struct station_error *e);
int manager_secret_list(struct manager *m, const char *ws_id, json_t **ret,
			struct station_error *e);
int manager_secret_get(struct manager *m, const char *ws_id, const char *name, json_t **ret,
		       struct station_error *e);
int manager_secret_delete(struct manager *m, const char *ws_id, const char *name, json_t **ret,
			  struct station_error *e);

/* For a credential request from the workspace's agent: the secret released for protocol
 * ("https" or "http") and host (as git sent it, compared case-insensitively with the secret's
 * scope, port included), unexpired and not revoked. 0 with *ret_name (for the log),
 * *ret_username and *ret_password, all malloc'd (the caller wipes the password with
 * erase_and_free()); -ENOENT when no secret may be released (no match, expired, revoked, an
 * unscoped secret, another protocol); -ENOMEM. Never logs the value. */
int manager_secret_for_host(struct manager *m, const char *ws_id, const char *protocol,
			    const char *host, char **ret_name, char **ret_username,
			    char **ret_password);

/* ---- Files (manager-file.c; docs/api.md, "Files"; proto/file-proto.h) ---------------------- */

/* One file operation or watch is one session: a connection of its own to the workspace's agent,
 * FILE_OPEN first, then frames both ways on the loop. At most MANAGER_MAX_FILE_SESSIONS per
 * workspace (-EAGAIN, 429); a workspace that is not ready is -EBUSY (409). Every frame from the
 * agent is checked as hostile: one that breaks the contract ends the session with -EPROTO
 * (502). Sessions end (end() with -EBUSY) when the workspace stops, restarts or is deleted. */
#define MANAGER_MAX_FILE_SESSIONS 32

struct file_request {
	unsigned op;	   /* enum file_op */
	const char *path;  /* as the client gave it: no NUL, 1 to PROTO_MAX_PATH bytes */
	const char *path2; /* RENAME's target */
	uint64_t flags;	   /* FILE_F_* */
	bool has_mode, has_offset, has_length, has_suffix, has_max_bytes;
	uint64_t mode, offset, length, suffix, max_bytes;
	const char *if_match; /* NULL: none */
	const char *field2;   /* the request field that names path2, for errors ("to") */
	const char *field;    /* the request field that names path ("path", "from") */
};

/* What INFO said; strings borrowed for the callback, NULL when absent. name and path may hold
 * any byte but NUL and '/' (name). */
struct file_entry {
	const char *name; /* LIST entries */
	const char *path; /* WRITE, MKDIR, RENAME: the absolute path in the sandbox's view */
	unsigned type;	  /* enum file_type */
	uint64_t size, mode, mtime_ns, uid, gid;
	const char *link_target;
	const char *etag;
};

struct file_event_info {
	unsigned event; /* enum file_event */
	const char *path;
	const char *path2; /* moved: the new path */
	unsigned type;	   /* enum file_type; 0 when not given */
};

/* Callbacks come from the loop, never from inside a manager_file_*() call. */
struct file_session_ops {
	void (*info)(void *userdata, const struct file_entry *entry);
	void (*data)(void *userdata, const uint8_t *data, size_t n);	 /* READ */
	void (*event)(void *userdata, const struct file_event_info *ev); /* WATCH */
	/* WRITE: a manager_file_write() refused with -EAGAIN may be tried again. */
	void (*writable)(void *userdata);
	/* Exactly once, last: r 0 for END, else the operation's error in e (its message names
	 * the path). flag: LIST left entries out (TRUNCATED); WRITE made a new file (CREATED).
	 * The session is gone afterwards. */
	void (*end)(void *userdata, int r, bool flag, const struct station_error *e);
};

struct file_session;
int manager_file_open(struct manager *m, const char *ws_id, const struct file_request *req,
		      const struct file_session_ops *ops, void *userdata, struct file_session **ret,
		      struct station_error *e);
/* A consumer that holds enough: paused, the agent's socket is not read (the agent blocks on
 * it); unpaused, frames already read are delivered from the loop. */
void manager_file_pause(struct file_session *s, bool pause);
/* WRITE: queues the body bytes as DATA. -EAGAIN when the queue to the agent is full (nothing
 * taken; writable() follows once it has drained), -EPIPE once ended. */
int manager_file_write(struct file_session *s, const void *data, size_t n);
/* WRITE: the body is complete. */
int manager_file_write_end(struct file_session *s);
/* Before end(): closes the connection without END (a WRITE leaves the target untouched). No
 * callback follows. NULL is fine. */
void manager_file_close(struct file_session *s);

/* ---- Resource use (manager-usage.c; docs/api.md, "Resource use") --------------------------- */

/* How long the agent has to report the use of its runs and services. */
#define USAGE_AGENT_TIMEOUT_MS 3000

/* GET …/usage. fn is called exactly once, never from inside manager_usage_get(): with the
 * usage (the receiver owns it) and e NULL, or with NULL and the error (the workspace went away
 * (404) or stopped being ready (409), or its agent did not answer within
 * USAGE_AGENT_TIMEOUT_MS (503)). 0 with *ret when registered; < 0 for an unknown (404) or
 * not-ready (409) workspace, fn never called. */
struct usage_waiter;
typedef void (*usage_fn)(void *userdata, json_t *usage, const struct station_error *e);
int manager_usage_get(struct manager *m, const char *ws_id, usage_fn fn, void *userdata,
		      struct usage_waiter **ret, struct station_error *e);
/* Before fn was called; afterwards the waiter is gone. */
void manager_usage_cancel(struct usage_waiter *w);

/* Usage history (manager-usage-history.c, docs/api.md "Usage history"): what the sampler
 * recorded since since_ms (realtime ms) in buckets of step_ms, at most USAGE_POINTS_MAX of the
 * newest. A workspace's: 404 (-ENOENT) for one the viewer cannot see. The worker's: the
 * operator gets every workspace's totals, a tenant viewer the sum over its own workspaces. */
#define USAGE_INTERVAL_DEFAULT_MS 5000
#define USAGE_INTERVAL_MIN_MS 100
#define USAGE_MAX_ROWS_DEFAULT 4000000
int manager_usage_history_get(struct manager *m, const char *ws_id, uint64_t since_ms,
			      uint64_t step_ms, json_t **ret, struct station_error *e);
int manager_worker_usage_history_get(struct manager *m, uint64_t since_ms, uint64_t step_ms,
				     json_t **ret, struct station_error *e);

/* Events (manager-events.c, docs/api.md "Events"): state changes of workspaces, runs, services
 * and terminals as JSON {seq,type,change,id,workspaceId,state,at,reason?}, the newest
 * MANAGER_EVENTS_KEPT kept in memory. seq grows strictly, across restarts too (a boot epoch in
 * its upper bits). */
#define MANAGER_EVENTS_KEPT 10000
#define MANAGER_EVENTS_KEPT_MAX 1000000
enum manager_event_kind {
	MANAGER_EVENT_WORKSPACE,
	MANAGER_EVENT_RUN,
	MANAGER_EVENT_SERVICE,
	MANAGER_EVENT_TERMINAL,
	MANAGER_EVENT_SNAPSHOT, /* change created, deleted, lost; id the snapshot's */
	_MANAGER_EVENT_KIND_MAX,
};
const char *manager_event_kind_to_string(enum manager_event_kind k);
int manager_event_kind_from_string(const char *s);

struct manager_event_filter {
	const char *ws_id;  /* NULL: every workspace */
	unsigned kinds;	    /* bit per manager_event_kind; 0: all */
	const char *tenant; /* NULL: every tenant's; else only this tenant's workspaces' */
};
struct manager_event {
	uint64_t seq;
	const char *text; /* the event's JSON (borrowed until the next event is emitted) */
	bool gap;	  /* events after gap_from up to seq are no longer kept */
	uint64_t gap_from;
	int64_t missed; /* how many; -1: unknown (they were before the controller restarted) */
	uint64_t pos;	/* the ring position of the event (or where the reader now stands) */
};
/* A tenant's events are numbered on their own (seq: the boot epoch times 2^32 plus the
 * event's number among that tenant's in this boot), so that its stream shows no gap where
 * another tenant's events went by. A reader stands at `after` (seq as it sees them: its
 * tenant's, f->tenant) and at `pos` in the ring behind it (0: not known yet, found from after;
 * for the operator's numbering after itself). */
struct manager_events_cursor {
	uint64_t after, pos;
};
/* The first event after the cursor that passes f (NULL: all): 1 with *ret (a gap first when
 * events after `after` are gone; after = 0: from the oldest kept, no gap), 0 when there is none
 * yet (ret->seq and ret->pos: where the caller now stands). */
int manager_events_next(struct manager *m, const struct manager_events_cursor *at,
			const struct manager_event_filter *f, struct manager_event *ret);
/* The newest event's seq (of this boot; its number 0 when none yet) in tenant's numbering
 * (NULL: the operator's, every event). */
uint64_t manager_events_last(struct manager *m, const char *tenant);
/* -EINVAL naming since when since lies beyond the newest event (tenant's numbering). */
int manager_events_check_since(struct manager *m, uint64_t since, const char *tenant,
			       struct station_error *e);
/* fn is called from the loop (never from inside an emit) when events may have come. */
struct events_sub;
typedef void (*manager_events_fn)(void *userdata);
int manager_events_subscribe(struct manager *m, manager_events_fn fn, void *userdata,
			     struct events_sub **ret);
void manager_events_unsubscribe(struct events_sub *s);

/* ---- Tokens (manager-token.c; docs/api.md, "Tokens") --------------------------------------- */

/* At most this many tokens, revoked ones included (-EAGAIN, 429, for one more). */
#define MANAGER_TOKENS_MAX 10000

/* The principal of a bearer secret (n bytes): 0 with *ret filled; -EACCES for an unknown one,
 * -EKEYREVOKED for a revoked one, -EKEYEXPIRED for an expired one. From the table on the
 * loop: no SQLite, except lastUsedAt written at most once a minute per token. */
int manager_token_authenticate(struct manager *m, const char *secret, size_t n,
			       struct auth_principal *ret);
/* A mint or a revocation in a fleet asks etcd first, off the loop: the call returns 1 with
 * the call under way in *ret_call, and done() is called on the loop with the token or the
 * error (STATION_EFLEET when etcd did not answer: nothing changed), unless the caller forgot
 * the call. Without a fleet, or when nothing needs etcd, the answer is at once: 0 with *ret,
 * or -errno (as is a call refused before etcd is asked). */
struct token_call;
typedef void (*manager_token_done_fn)(void *userdata, int r, json_t *token,
				      const struct station_error *e);
/* POST /v1/tokens: body {name, scope, tenant?, expiresAt?, limits?}, validated here (400 naming
 * the field). The token carries "token", the secret, which nothing shows again. */
int manager_token_create(struct manager *m, json_t *body, manager_token_done_fn done,
			 void *userdata, struct token_call **ret_call, json_t **ret,
			 struct station_error *e);
int manager_token_list(struct manager *m, json_t **ret, struct station_error *e);
int manager_token_get(struct manager *m, const char *id, json_t **ret, struct station_error *e);
/* Revoked at once, or once etcd deleted it (a second revocation answers the same); "admin"
 * cannot be (-EINVAL). Calls the revocation hook with the id, so that open streams of the
 * token are closed. */
int manager_token_revoke(struct manager *m, const char *id, manager_token_done_fn done,
			 void *userdata, struct token_call **ret_call, json_t **ret,
			 struct station_error *e);
/* The caller no longer wants the answer (its client went away): done() will not be called;
 * the call goes on, and the table follows etcd's answer. NULL is fine. */
void manager_token_call_forget(struct token_call *c);
typedef void (*manager_token_revoked_fn)(void *userdata, const char *token_id);
void manager_token_on_revoke(struct manager *m, manager_token_revoked_fn fn, void *userdata);

/* ---- The fleet (manager-fleet.c; docs/operations.md, "Many workers") ------------------------ */

/* 503 with the error code "fleet_unavailable": a token cannot be minted or revoked because the
 * fleet's store (etcd) does not answer; nothing was changed. */
#define STATION_EFLEET (-ENOLINK)
/* With cfg.fleet: registers this worker under a lease (refused, -EEXIST with e naming the
 * other's URL, when another worker holds its name), loads the fleet's tokens and workers
 * and watches them from threads of their own. When etcd does not answer, the worker starts
 * with what it last saw and catches up once etcd is back. 0 without cfg.fleet. */
int manager_fleet_start(struct manager *m, struct station_error *e);
/* The workers registered in the fleet, this one included: an object of name -> {name, url,
 * version, tenant, capacity, updatedAt}, as last seen (borrowed; changes on the loop). NULL
 * without a fleet. */
const json_t *manager_fleet_workers(struct manager *m);

/* ---- Metrics (manager-metrics.c; docs/operations.md, "Metrics") ---------------------------- */

#define MANAGER_METRICS_MAX_WORKSPACES 1000
/* Appends the manager's series to f in the Prometheus text format (0.0.4): workspaces by state
 * and adapter, commands running, runs, creates, pools, snapshots, forks, agent reconnects,
 * the loop's lag, the image store's bytes, and per workspace (at most
 * cfg.metrics_max_workspaces, the rest counted) its CPU time, memory, pids, network bytes and
 * its firewall's counters (one dump of the table for all), the preview exposures. A tenant
 * viewer (manager_set_viewer()) gets its own workspaces' series and nothing
 * worker-wide. Reads cgroup and sysfs files: a few microseconds per workspace. */
void manager_metrics_write(struct manager *m, FILE *f);
/* The preview listener's own series (its requests by result, connections and WebSockets
 * open), written by fn into each operator's scrape (never a tenant's); fn NULL: none. */
typedef void (*manager_metrics_fn)(void *userdata, FILE *f);
void manager_metrics_on_write(struct manager *m, manager_metrics_fn fn, void *userdata);

/* ---- Audit (manager-audit.c; docs/api.md, "Audit") ------------------------------------------ */

struct manager_audit_entry {
	const struct auth_principal *principal; /* NULL: no token checked out (a 401) */
	const char *method;
	const char *route; /* the route template */
	const char *path;  /* without the query */
	const char *workspace_id;
	const char *object_id;
	unsigned status; /* 0: no answer (the client went away) */
};
/* Queues a row (copied); written in batches off the request path. */
void manager_audit_record(struct manager *m, const struct manager_audit_entry *entry);
struct manager_audit_query {
	size_t limit;		  /* 1 to 1000 */
	int64_t before;		  /* entries with a smaller id only; 0: from the newest */
	const char *token_id;	  /* NULL: any */
	const char *tenant;	  /* NULL: any */
	const char *workspace_id; /* NULL: any */
};
/* {"entries": [...], "nextBefore": id|null, "queued": n}, newest first. */
int manager_audit_list(struct manager *m, const struct manager_audit_query *q, json_t **ret,
		       struct station_error *e);

/* ---- Previews (manager-ports.c; docs/api.md, "Previews") ------------------------------------ */

/* A port of a workspace reached from outside through the preview listener (api/preview.c),
 * which connects to it inside the workspace's own network namespace. An exposure has one host
 * label of its own (PREVIEW_LABEL_MAX characters at most, unguessable), its access ("token":
 * a bearer secret shown once and kept only as its SHA-256; "public": none) and an expiry. It
 * is stored, so it outlives a controller restart; it ends with its DELETE, its expiry or its
 * workspace's deletion, and the revoke hook is told each time. */
#define PREVIEW_LABEL_MAX 63
#define PREVIEW_DEFAULT_EXPIRES_MS (24ull * 3600 * 1000)
#define PREVIEW_MAX_EXPIRES_MS (30ull * 24 * 3600 * 1000)

struct port_spec {
	uint16_t port;		/* 1 … 65535 */
	bool public;		/* "access": "public"; else "token" */
	uint64_t expires_in_ms; /* 1 … PREVIEW_MAX_EXPIRES_MS; 0: PREVIEW_DEFAULT_EXPIRES_MS */
};

/* At most this many exposures per workspace (-EAGAIN, 429, for one more). */
#define MANAGER_MAX_PORTS 32
/* POST /v1/workspaces/{id}/ports: {"port","host","url","access","token" (token access only,
 * the only time it is shown),"openUrl" (token access only: url with
 * ?station_preview_token=<token>, shown once too),"expiresAt","createdAt"} (times RFC 3339
 * UTC, as elsewhere). 409 (-EBUSY) when previews are off, when the workspace has no network
 * namespace of its own (host adapter; runsc), or when the port is exposed already (naming
 * DELETE). */
int manager_port_expose(struct manager *m, const char *ws_id, const struct port_spec *spec,
			json_t **ret, struct station_error *e);
/* GET …/ports: {"exposed":[{"port","host","url","access","expiresAt","createdAt"}…],
 * "listening":[{"port","address","proto","pid","command"}…]}: the TCP sockets listening in the
 * workspace's network namespace, pid as the workspace sees it (null when no process of the
 * workspace holds the socket), command its name. */
int manager_port_list(struct manager *m, const char *ws_id, json_t **ret, struct station_error *e);
/* One exposure as the list shows it (an idempotent POST's replay: without its token); -ENOENT
 * when that port is not exposed. */
int manager_port_get(struct manager *m, const char *ws_id, uint16_t port, json_t **ret,
		     struct station_error *e);
/* DELETE …/ports/{port}: 0, or -ENOENT when that port is not exposed. */
int manager_port_revoke(struct manager *m, const char *ws_id, uint16_t port,
			struct station_error *e);

/* What the preview listener knows of a live exposure: a copy, valid until the next call into
 * the manager. */
struct preview_target {
	char label[PREVIEW_LABEL_MAX + 1];
	char ws_id[64];
	uint16_t port;
	bool public;
	bool https;	     /* the preview URL's scheme is https (its cookie gets Secure) */
	uint64_t expires_at; /* realtime usec */
};
/* The live (not expired) exposure whose host label is label (n bytes, lower case): 0, or
 * -ENOENT (none, expired or revoked: the listener answers each the same). Not scoped by the
 * viewer: the label is the capability. */
int manager_preview_find(struct manager *m, const char *label, size_t n,
			 struct preview_target *ret);
/* Whether token (n bytes) is the exposure's: a constant-time compare of its SHA-256. false
 * for a public one, an unknown label or an expired exposure. */
bool manager_preview_token_ok(struct manager *m, const char *label, const char *token, size_t n);
/* A non-blocking TCP socket made inside the exposure's workspace's network namespace with its
 * connect() to the port on the namespace's loopback started (127.0.0.1; ipv6 true: ::1):
 * 0 with *ret_fd, or -errno with e saying why in words a preview visitor may read (the
 * workspace is not running, ...). */
int manager_preview_connect(struct manager *m, const struct preview_target *t, bool ipv6,
			    int *ret_fd, struct station_error *e);
/* Called with the label of each exposure that ends (DELETE, expiry, workspace deletion), so
 * that the listener closes its open connections at once. */
typedef void (*manager_preview_revoked_fn)(void *userdata, const char *label);
void manager_preview_on_revoke(struct manager *m, manager_preview_revoked_fn fn, void *userdata);

/* ---- Pause, snapshots and fork (manager-pause.c, manager-snapshot.c; docs/api.md "Pause and
 * resume", "Snapshots and fork") ---------------------------------------------------------- */

/* POST …/pause: every process of the workspace but its agent frozen (the cgroup freezer, v1
 * freezer.state or v2 cgroup.freeze, on each group the agent's commands run in; a process the
 * sandbox moved next to the agent is moved into a frozen group first), the agent told to stop
 * its clocks (run timeouts, service restart delays) and the controller's idle clock stopped;
 * the state "paused" is recorded, so that a paused workspace is paused still after a
 * controller restart (the freezer holds without us). The agent keeps answering: status, file
 * reads, usage. POST …/resume thaws it all, the clocks go on, state "ready". Each answers
 * like restart: < 0 with e (-ENOENT; -EBUSY, 409, when neither ready nor paused), 0 with *ret
 * at once (pausing a paused workspace, resuming a ready one: nothing to do), or 1 with fn
 * called once it is done (the workspace's JSON, "pausedAt" set while paused). */
int manager_workspace_pause(struct manager *m, const char *id, workspace_op_fn fn, void *userdata,
			    struct workspace_op **ret_op, json_t **ret, struct station_error *e);
int manager_workspace_resume(struct manager *m, const char *id, workspace_op_fn fn, void *userdata,
			     struct workspace_op **ret_op, json_t **ret, struct station_error *e);

/* 409 with the error code "paused" (not "conflict"): a command, terminal attach or open, file
 * write or service start on a paused workspace created without "autoResume": true. With it,
 * those requests resume the workspace first (the manager does it before it acts on them). */
#define STATION_EPAUSED (-ESTRPIPE)

/* POST …/snapshots {"name", "memory"}: HOME and the root filesystem's changes (the overlay's
 * upper layer) of a container workspace, read while it is paused (paused for it and resumed
 * after unless it was paused already; "pausedMs" says how long), stored as an image: the
 * workspace's image's layers plus one new content-addressed layer (image_commit_layer()), so
 * that it is listed, pinned by digest, exported and pulled like any image. A host workspace's
 * snapshot holds its workspace directory only. memory: the processes too, through the
 * runtime's checkpoint and CRIU (-ENOTSUP, 501, naming what this worker lacks, where it cannot).
 * Answered through fn: {"id":"s-…","workspaceId","name","createdAt","sizeBytes","baseImage",
 * "image","memory","pausedMs","tenant"}. -EAGAIN (429) past the tenant's snapshot count,
 * -EFBIG (413) past --max-snapshot-bytes (naming the file that passed it). */
struct snapshot_spec {
	const char *name; /* NULL: none; else 1 … 128 printable characters */
	bool memory;
};
#define SNAPSHOT_NAME_MAX 128
#define SNAPSHOTS_PER_TENANT_DEFAULT 100
#define SNAPSHOT_MAX_BYTES_DEFAULT (10ull << 30)
int manager_snapshot_create(struct manager *m, const char *ws_id, const struct snapshot_spec *spec,
			    workspace_op_fn fn, void *userdata, struct workspace_op **ret_op,
			    struct station_error *e);
/* GET /v1/snapshots: {"snapshots":[…]} the viewer's, newest first. GET /v1/snapshots/{id}: one
 * (-ENOENT, 404, for another tenant's, as for a missing id). */
int manager_snapshot_list(struct manager *m, json_t **ret, struct station_error *e);
int manager_snapshot_get(struct manager *m, const char *id, json_t **ret, struct station_error *e);
/* DELETE /v1/snapshots/{id}: the record, then its image (and whatever layers no other image
 * uses) off the loop; fn gets NULL on success. -EBUSY (409) while a workspace runs on it. */
int manager_snapshot_delete(struct manager *m, const char *id, workspace_op_fn fn, void *userdata,
			    struct workspace_op **ret_op, struct station_error *e);

/* POST …/fork {"count": N}: one snapshot of the workspace, then N workspaces created from it
 * (as workspace_spec.snapshot, each with the source's limits, network mode, env, tenant), each
 * independent from then on. fn gets {"workspaces":[…],"snapshot":"s-…","pausedMs"}. count
 * 1 … FORK_MAX (-EINVAL, field "count"); past the worker's capacity -EAGAIN (429) before
 * anything is made. */
#define FORK_MAX 100
int manager_workspace_fork(struct manager *m, const char *id, unsigned count, workspace_op_fn fn,
			   void *userdata, struct workspace_op **ret_op, struct station_error *e);

/* Code contexts: their part of the manager's API, in a header of its own. */
#include "manager-contexts.h"
