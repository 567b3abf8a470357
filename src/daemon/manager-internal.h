/* SPDX-License-Identifier: MIT */
#pragma once

/* State shared by manager.c (workspaces, agents) and manager-run.c (runs, waiters, watches). */

#include "adapter/adapter.h"
#include "manager.h"
#include "net/net.h"
#include "proto/agent-proto.h"
#include "store/secret-box.h"
#include "store/store.h"

#define SECRET_BYTES 32

struct cgroup;
struct agentlink;
struct agentlink_service_state;
struct agentlink_terminal_exit;
struct agentlink_usage;
struct terminal;
struct service;
struct secret;
struct event_source;
struct adapter_ops;
struct idempotency_claim;

/* A follower of the stdout and stderr of a run or a service attempt: gets each byte once and in
 * order, live or from the stored head and tail.
 *
 * A live follower asks the agent to watch, and the agent answers by sending what it keeps (the
 * head from offset 0, then the tail), then live output. Output the agent sent before it had the
 * request (for another follower) may still be on its way: until the replay comes, such bytes
 * would make the follower count the kept head as missed. So each stream of a new live follower
 * waits for the replay: chunks are dropped until one at offset 0 (the replay's head, or the
 * stream's first bytes, all contiguous from there) or one that starts before the end of a
 * dropped one (a replay whose head was not sent). */
struct output_follower {
	const struct run_watch_ops *ops;
	void *userdata;
	uint64_t next_offset[2]; /* per stream: it has every byte before */
	bool awaiting_replay[2]; /* per stream: live chunks are dropped until the replay */
	uint64_t dropped_end[2]; /* per stream: the end of the last chunk dropped so */
};

/* A run's window on its workspace's denials (manager-denials.c): read when it starts, again
 * when it ends. */
struct run_network {
	bool tracked;	/* the workspace had a network when the run started */
	uint64_t base;	/* its denials then: packets dropped plus names refused */
	uint64_t since; /* realtime usec of that reading */
};

struct run_state {
	struct run_state *prev, *next; /* in workspace->runs */
	struct workspace *ws;
	char id[PROTO_MAX_ID + 1];
	uint64_t started_at;
	struct run_network net; /* not tracked for runs found running at startup */
	unsigned link_gen;	/* the agent connection it was sent on */
	/* What the run's row was inserted with (id and workspace_id not kept): the finished run
	 * is answered from it and the result, not read back. NULL for runs found running at
	 * startup. */
	struct run_row *start;
	struct run_waiter *waiters;
	struct run_watch *watches;
	/* A terminal result the store could not record (a full disk): readers are answered from
	 * it, the agent is not acknowledged until it is written (a retry every second and after
	 * each successful write), so a controller restart in between hears it again. The run no
	 * longer counts as running. */
	struct run_row *pending;
	uint64_t pending_seq; /* the RUN_DONE to acknowledge once written, on pending_gen */
	unsigned pending_gen;
	bool pending_ack;
};

struct run_waiter {
	struct run_waiter *prev, *next;
	struct run_waiter **head; /* the list it is on */
	struct manager *m;
	run_result_fn fn;
	void *userdata;
	json_t *result; /* the finished run, once known from memory */
};

struct run_watch {
	struct run_watch *prev, *next;
	struct run_watch **head;
	struct manager *m;
	struct output_follower follower;
	struct run_row *replay; /* a finished run's stored output, replayed by a timer */
	struct event_source *timer;
};

struct workspace;
typedef void (*workspace_held_fn)(struct workspace *ws, void *userdata);

struct workspace {
	struct workspace *prev, *next;
	struct manager *m;
	struct workspace_row row;
	const struct adapter_ops *adapter;
	json_t *spec; /* parsed row.spec_json */
	char **env;   /* KEY=VALUE from spec.env, NULL-terminated */
	char *dir, *home, *workdir, *socket_path;
	struct cgroup *cgroup;
	uint8_t secret[SECRET_BYTES];
	pid_t agent_pid;
	int agent_pidfd;
	struct event_source *agent_watch;
	struct agentlink *link;
	bool link_ready;   /* HELLO_OK received */
	unsigned link_gen; /* counts connections: requests queue behind HELLO on a new one */
	struct event_source *link_timer; /* reconnect, or free a closed link */
	unsigned reconnects;
	struct run_state *runs;
	size_t n_running;
	struct service *services; /* manager-service.c */
	size_t n_services;
	/* attempt ends the store could not record yet (a full disk), written by the retry of
	 * run results and acknowledged to the agent after */
	struct pending_attempt *pending_attempts;
	bool agent_fresh; /* an agent is being started that runs no service yet: its HELLO starts
			     the autostart ones (manager.c sets it as the start is queued) */
	struct terminal *terminals; /* manager-terminal.c: the live ones */
	size_t n_terminals;
	uint64_t ignored_logged_at; /* agent_report_ignored(): the last line, CLOCK_MONOTONIC */
	unsigned ignored_unlogged;  /* reports ignored since that line */
	enum net_mode net_mode;	    /* manager-network.c; NET_NONE: no record */
	uint32_t net_address;
	struct net_policy *net_policy; /* restricted */
	struct denials *denials;       /* manager-denials.c: NULL until the first denial */
	struct secret *secrets;	       /* manager-secret.c, by name */
	size_t n_secrets;
	uint64_t cred_window_start;	    /* manager-cred.c: the rate limit's window, monotonic */
	unsigned cred_window_count;	    /* credential requests in that window */
	struct file_session *file_sessions; /* manager-file.c */
	size_t n_file_sessions;
	struct pool *pool;	/* manager-pool.c: an unclaimed warm pool member of this pool */
	uint64_t last_activity; /* manager-idle.c: realtime usec of the last activity seen */
	/* create, restart, stop, delete: the head runs (its slow steps on a worker thread), the
	 * rest wait their turn, in order */
	struct workspace_op *ops;
	struct event_source *hello_timer; /* a started agent's HELLO, bounded */
	/* manager-pause.c: PAUSE sent, PAUSED awaited (commands are refused meanwhile) */
	bool pausing;
	uint64_t pause_request;
	struct event_source *pause_timer;
	workspace_held_fn held_fn; /* workspace_hold_agent(): called on PAUSED (or its timeout) */
	void *held_data;
	char pause_reason[192];	    /* the reason "paused" is entered with ("" for none) */
	unsigned snapshots_running; /* manager-snapshot.c: its trees are being read */
	/* manager-snapshot.c: frozen by a snapshot whose read of its trees goes on: what would
	 * start a process or change a file is refused (workspace_wake_for()) until the thaw */
	unsigned snapshot_reading;
	struct usage_track *usage; /* manager-usage-history.c: its open counter files */
	struct context *contexts;  /* manager-contexts.c: its code contexts */
	/* manager-checkpoint.c: a checkpoint under way (its agent's connection closed on
	 * purpose: no reconnect until the runtime's checkpoint ended) */
	struct checkpoint_take *checkpoint;
};

#define MANAGER_MAX_CPUS 1024

struct manager {
	struct event_loop *loop;
	struct adapter_context actx;
	struct store *store;
	struct manager_config cfg;
	struct cgroup *base_cgroup;
	int cgroup_error;
	struct workspace *workspaces;
	size_t n_workspaces;
	struct run_waiter *fire_queue; /* waiters whose run ended, fired by fire_timer */
	struct event_source *fire_timer;
	struct event_source *prune_timer;
	struct event_source *pending_timer; /* writes the runs' pending results (manager-run.c) */
	size_t n_pending;		    /* run results and service attempt ends */
	struct image_job *image_jobs;	    /* imports and pulls under way (manager-image.c) */
	size_t n_image_jobs;
	struct image_removal *image_removals; /* DELETEs of images under way (manager-image.c) */
	struct event_work_pool *export_work; /* image exports (manager-image.c), made at the first */
	size_t n_image_exports;		     /* under way */
	struct net *net;		     /* NULL: networking off (manager-network.c) */
	uint8_t secret_key[SECRET_KEY_BYTES]; /* cfg.secret_key's copy (manager-secret.c) */
	bool secret_key_set;
	struct usage_waiter *usage_waiters; /* manager-usage.c */
	uint64_t usage_requests;	    /* the last USAGE_REQUEST's number */
	struct pool *pools;		    /* manager-pool.c: cfg.pools, resolved */
	size_t n_pools;
	size_t n_pool_members; /* of n_workspaces: unclaimed members, which no client sees */
	struct idempotency_claim *idempotency_claims; /* manager-idempotency.c: creates under way */
	struct event_source *idle_timer;	      /* manager-idle.c */
	struct lxcfs *lxcfs;	    /* manager-view.c; NULL: no container adapter */
	int cpus[MANAGER_MAX_CPUS]; /* the CPUs the controller may use, placed from */
	size_t n_cpus;
	struct event_source *pool_timer;     /* refills and reaps, one workspace per turn */
	struct event_work_pool *create_work; /* creates and restarts: cfg.create_concurrency */
	struct event_work_pool *work;	     /* stops, deletes, readiness checks */
	/* GET /v1/ready answers from the last check; a check runs on a timer, on events and on
	 * ?refresh=1, one at a time */
	json_t *ready;
	bool ready_but_store; /* the last check's verdict without the store's */
	bool ready_running, ready_again;
	struct event_source *ready_timer;
	struct ready_waiter *ready_waiters;
	struct manager_events *events; /* manager-events.c */
	/* manager_set_viewer(): the tenant the request being served may see (NULL: all) */
	const char *viewer;
	struct manager_tokens *tokens; /* manager-token.c */
	struct manager_fleet *fleet;   /* manager-fleet.c: NULL without cfg.fleet */
	struct manager_audit *audit;   /* manager-audit.c */
	struct manager_ports *ports;   /* manager-ports.c: the live exposures */
	/* manager-checkpoint.c: the memory-snapshot probe's answer, once it ran (at start) */
	struct checkpoint_status checkpoint;
	bool checkpoint_probed;
	/* manager-checkpoint.c: each checkpoint's uid range (its meta.json's idBase), read at start
	 * and kept as checkpoints are taken and removed, so that a create reads no file */
	struct checkpoint_base *checkpoint_bases;
	size_t n_checkpoint_bases;
	struct manager_metrics *metrics;	     /* manager-metrics.c */
	struct manager_usage_history *usage_history; /* manager-usage-history.c */
};

/* manager-usage-history.c: the sampler's timer, and a workspace's counter files closed. */
struct usage_track;
int manager_usage_history_init(struct manager *m);
void manager_usage_history_free(struct manager *m);
void usage_track_free(struct workspace *ws);
/* The workspace's counters now (GET /metrics), through the sampler's open files (opened if
 * need be; nothing the history keeps changes): net[] its veth's received and sent bytes (0
 * without a network). false when its group cannot be read. */
struct cgroup_sample;
bool usage_track_read(struct workspace *ws, struct cgroup_sample *ret, uint64_t net[2]);

/* manager-tenant.c: ws is the viewer's to see (manager_set_viewer()). */
bool workspace_visible(const struct manager *m, const struct workspace *ws);
/* GET /v1/worker: "tenant" (a private worker's, else null), "tenantPolicy" (the allow lists);
 * for a tenant viewer, "workspaces" counts its own. */
void manager_tenant_worker_json(struct manager *m, json_t *o);

/* manager-token.c, manager-audit.c */
int manager_tokens_init(struct manager *m);
void manager_tokens_free(struct manager *m);
/* The fleet's tokens (manager-fleet.c hands them over on the loop): a row put (taken; kept
 * in the store too when new), a row gone (revoked here, its streams closed), and a whole
 * snapshot: mark, put each, then sweep revokes every token that was not put since the mark
 * and was in the table before since_usec (realtime: when the range began; one minted here
 * since is left to the watch). The admin token is never the fleet's. */
int manager_token_fleet_put(struct manager *m, struct token_row *row);
void manager_token_fleet_gone(struct manager *m, const char *hash_hex);
void manager_token_fleet_mark(struct manager *m);
void manager_token_fleet_sweep(struct manager *m, uint64_t since_usec);
/* fn for each token of the table but the admin token and revoked ones; stops at its first
 * -errno, returned. */
int manager_token_fleet_each(struct manager *m,
			     int (*fn)(const struct token_row *row, void *userdata),
			     void *userdata);
/* manager-fleet.c: stops the threads and revokes the registration's lease (NULL fleet: no-op). */
void manager_fleet_stop(struct manager *m);
/* Whether the fleet's tokens may still be used: etcd answered within the last 24 h. */
bool manager_fleet_tokens_trusted(struct manager *m);
/* manager-fleet-token.c: a new token written to etcd (tokens/HASH) or a revoked one deleted
 * there, before the table changes, on a call thread: 0 once under way, then done() on the
 * loop with 0 or STATION_EFLEET and e naming the store (exactly once, -ECANCELED when the
 * controller stops first); or -errno at once (STATION_EFLEET when etcd did not answer the
 * watch last time, or too many calls wait for it), done() never called. */
typedef void (*fleet_token_done_fn)(void *userdata, int r, const struct station_error *e);
int manager_fleet_token_put(struct manager *m, const struct token_row *row,
			    fleet_token_done_fn done, void *userdata, struct station_error *e);
int manager_fleet_token_delete(struct manager *m, const char *hash_hex, fleet_token_done_fn done,
			       void *userdata, struct station_error *e);
/* manager-fleet-token.c: the tokens of the table (manager_token_fleet_each()) that the range
 * kvs of etcd does not hold, as keys and values to create there: what a worker that never
 * synced with the fleet brings to it at its first sync. */
struct etcd_kv;
int fleet_token_own(struct manager *m, const struct etcd_kv *kvs, size_t n, struct etcd_kv **ret,
		    size_t *ret_n);
/* manager-fleet.c: fn on one of the fleet's call threads, done on the loop (event/work.h);
 * -EBUSY when FLEET_CALLS_MAX calls wait or run already. */
int manager_fleet_queue(struct manager *m, void (*fn)(void *userdata),
			void (*done)(void *userdata, bool cancelled), void *userdata);
/* manager-fleet.c: whether etcd answered the watch last time (a mint is refused at once when
 * not), and its description for errors. */
bool manager_fleet_watching(struct manager *m);
const char *manager_fleet_describe(struct manager *m);
int manager_audit_init(struct manager *m);
void manager_audit_free(struct manager *m);

/* manager-ports.c: the exposures from the store (an expired one dropped), their expiry timer. */
struct manager_ports;
int manager_ports_init(struct manager *m);
void manager_ports_free(struct manager *m);
/* The workspace's row is gone (its exposures' rows with it): its exposures end, the revoke
 * hook told of each. */
void ports_workspace_deleted(struct manager *m, const char *ws_id);
/* The network namespace of ws through its live agent (its pidfd checked after the open, so a
 * reused pid cannot hand over another namespace): an fd, or -errno with e in words a preview
 * visitor may read. */
int workspace_netns_open(const struct workspace *ws, struct station_error *e);
/* manager-ports-listening.c: GET …/ports "listening" (a new reference; [] when the workspace
 * does not run; NULL out of memory). */
json_t *workspace_listening_json(const struct workspace *ws);

/* manager-idempotency.c: deletes expired keys (from the prune timer); releases the claims. */
void manager_idempotency_purge(struct manager *m);
void manager_idempotency_free(struct manager *m);

/* manager-events.c */
struct manager_events;
int manager_events_init(struct manager *m);
void manager_events_free(struct manager *m);
/* change: created, state, ended, deleted; state and reason may be NULL. */
void manager_event_emit(struct manager *m, enum manager_event_kind kind, const char *change,
			const char *id, const char *ws_id, const char *tenant, const char *state,
			const char *reason);
/* The same for something of ws (none while ws is an unclaimed pool member). */
void workspace_event(struct workspace *ws, enum manager_event_kind kind, const char *change,
		     const char *id, const char *state, const char *reason);

struct workspace *workspace_find(struct manager *m, const char *id);
/* The workspace's agent reported about a run, terminal or service (what) that the workspace
 * does not have (another workspace's, or none): the report was ignored. Logged at most once a
 * minute per workspace, with the count of those not logged: every agent frame is hostile. */
void agent_report_ignored(struct workspace *ws, const char *what, const char *id);
int workspace_lookup(struct manager *m, const char *id, struct workspace **ret,
		     struct station_error *e);
/* -EBUSY with "workspace "ID" is STATE, not ready[: REASON]" unless it is ready. */
int workspace_check_ready(const struct workspace *ws, struct station_error *e);
/* A command's working directory: the workspace's workdir, cwd when absolute, else cwd below
 * the workdir; "." components dropped (they add nothing but noise to PWD). NULL: no memory. */
char *workspace_cwd(const struct workspace *ws, const char *cwd);
/* {"K":"V",…} (NULL: none) as a NULL-terminated vector of "K=V" (free with strv_free()). */
int env_object_to_strv(json_t *env, char ***ret);

/* manager-run.c: output for f, without what it already has. */
/* Sets where f resumes (from: NULL, or per stream); out: the finished output, which from must
 * not lie beyond (-EINVAL naming the parameter), or NULL while it is still being produced (f
 * then waits for the agent's replay of what it keeps). */
int output_follower_start(struct output_follower *f, const uint64_t *from,
			  const struct run_output *out, struct station_error *e);
void output_follower_deliver(struct output_follower *f, int stream, uint64_t offset,
			     const uint8_t *data, size_t n);
/* A chunk of live output from the agent (a replay of what it keeps, or new output). */
void output_follower_deliver_live(struct output_follower *f, int stream, uint64_t offset,
				  const uint8_t *data, size_t n);
/* The stored output out[2] (NULL: none), what f does not have of it, then done(). */
void output_follower_finish(struct output_follower *f, const struct run_output *out);

/* manager-image.c */
void manager_adapters_init(struct manager *m);
/* Kills the jobs still running (controller shutdown); their callers are not called. */
void manager_image_jobs_free(struct manager *m);
/* The digest of the image ref names (NULL: the default image) when a removal of it is under
 * way (creates of it are refused meanwhile), else NULL. */
const char *manager_image_removing(struct manager *m, const char *ref);
/* At start, off the loop: frees what a removal or import cut short left in the image store. */
void manager_image_store_clean(struct manager *m);

/* manager-service.c: writes ws's pending attempt ends; -EINPROGRESS while the store fails. */
int services_pending_write(struct workspace *ws);
/* manager-run.c: the retry of pending results runs at when. */
void manager_pending_retry_at(struct manager *m, uint64_t when);

/* manager-run.c */
struct run_state *run_state_find(struct workspace *ws, const char *id);
int run_state_add(struct workspace *ws, const char *id, struct run_state **ret);
/* Records a terminal result (store first), then ends waiters and watches. Returns 1 when
 * recorded, 0 when the run was already terminal, -ENOENT when ws has no such run; when the
 * store fails the result is kept in memory as the run's pending one (-EINPROGRESS), waiters
 * and watches end with it and it is written by a retry. */
int run_finish(struct workspace *ws, const struct run_row *result);
/* The RUN_DONE of seq (on the current connection) is acknowledged once run_id's pending
 * result is written. */
void run_pending_ack_later(struct workspace *ws, const char *run_id, uint64_t seq);
/* Every run still running in ws ends `lost` with reason. */
void runs_lose_all(struct workspace *ws, const char *reason);
void runs_free_all(struct workspace *ws);
/* Pending results (run_finish()) are kept; how many there are in the manager. */
bool runs_pending(const struct manager *m);
void run_on_output(struct workspace *ws, const char *run_id, int stream, uint64_t offset,
		   const uint8_t *data, size_t n);

/* run-json.c */
json_t *run_to_json(const struct run_row *r, bool with_output);
json_t *workspace_to_json(const struct workspace *ws);

/* manager-labels.c: 0 when no workspace of tenant but except is called name (NULL: none),
 * else -EBUSY with e naming the holder. */
int workspace_name_free_check(struct manager *m, const char *tenant, const char *name,
			      const struct workspace *except, struct station_error *e);
/* Sets row's name and labels_json (labels NULL or {}: none) from copies; -ENOMEM. */
int workspace_row_set_labels(struct workspace_row *row, const char *name, json_t *labels);
/* Adds "name" and "labels" to the workspace's JSON o. */
void workspace_labels_json(const struct workspace *ws, json_t *o);
/* An env object as every response shows it: the names, each value ENV_REDACTED ({} for NULL or
 * anything but an object). Values may be tokens; they reach commands, never clients. */
#define ENV_REDACTED "[redacted]"
json_t *env_redacted_json(json_t *env);
/* The same from a stored env (JSON text; NULL: none). */
json_t *env_json_redacted(const char *env_json);
void json_set_time(json_t *o, const char *key, uint64_t usec);

/* manager-service.c */
/* The workspace's services from the store (controller start). */
void services_load(struct workspace *ws);
/* The agent and every process are gone: running attempts end `lost`, services stop. */
void services_lose_all(struct workspace *ws, const char *reason);
void services_free_all(struct workspace *ws);
/* The workspace's services as a memory snapshot's checkpoint records them (every one a client
 * sees, each with the id its agent knows it by); NULL when out of memory. */
json_t *services_checkpoint_json(struct workspace *ws);
/* Those records as ws's services (new ids, the agent's kept), in the store and in memory:
 * before the restored agent's HELLO. Each is checked as input; one that is not what
 * services_checkpoint_json() writes fails it all. */
int services_restore(struct workspace *ws, const json_t *rows, struct station_error *e);
/* agentlink ops; userdata is the workspace. */
void services_on_hello(void *userdata, char **names, size_t n_names);
void services_on_state(void *userdata, uint64_t seq, const struct agentlink_service_state *st);
void services_on_attempt(void *userdata, uint64_t seq, const char *name,
			 const struct service_attempt_row *a);
void services_on_output(void *userdata, const char *name, uint64_t attempt, int stream,
			uint64_t offset, const uint8_t *data, size_t n);
void services_on_error(void *userdata, const char *name, const char *reason);
/* After HELLO_OK: asks an agent that can for its running attempts' byte counts. */
void services_on_link_ready(struct workspace *ws);
void services_on_progress(void *userdata, const char *name, uint64_t attempt, uint64_t stdout_bytes,
			  uint64_t stderr_bytes);

/* run-json.c: stdout, stderr, their tails and byte counts, encoding and truncated, the way a
 * run shows them. */
void output_to_json(json_t *o, const struct run_output out[2]);

/* Stops the workspace (state stopped with reason; restart starts it again): what runs ends
 * lost with reason, every process is killed through the workspace cgroup, the adapter releases
 * its container. */
int workspace_stop(struct workspace *ws, const char *reason);

/* manager-idle.c: activity and the idle timeout (docs/api.md, "Activity and idle") */
int manager_idle_init(struct manager *m);
/* Something happened on ws: an API call on it, a run or a service state change, a terminal
 * attach or detach. */
void workspace_touch(struct workspace *ws);
/* Whether a command or a service runs or a terminal is attached. */
bool workspace_busy(const struct workspace *ws);
/* "lastActivityAt", "idleTimeoutMs", "stopReason" into a workspace's JSON. */
void workspace_activity_json(const struct workspace *ws, json_t *o);
/* manager-service.c, manager-terminal.c */
size_t services_active_count(const struct workspace *ws);
size_t terminals_attached_count(const struct workspace *ws);

/* manager-view.c: lxcfs and CPU placement (the view inside a container) */
void manager_view_init(struct manager *m);
/* Leaves lxcfs serving while a container workspace still runs. */
void manager_view_free(struct manager *m);
void manager_view_ready(struct manager *m, json_t *checks);
/* How many CPUs a workspace of "cpus" is pinned to; 0: not pinned. */
unsigned workspace_view_cpu_count(const struct manager *m, double cpus);
/* Before a start: the adapter context's lxcfs, the spec's "cpuset". */
int workspace_view_prepare(struct workspace *ws);
/* After a start: the spec (with "procView", "cpuset") into the row, stored with the state. */
int workspace_view_persist(struct workspace *ws);
/* "procView" (and "cpuset") into a workspace's JSON. */
void workspace_view_json(const struct workspace *ws, json_t *o);

/* manager-terminal.c */
/* The workspace's live terminals from the store (controller start). */
void terminals_load(struct workspace *ws);
/* The agent and every process are gone: live terminals end `lost` with reason. */
void terminals_lose_all(struct workspace *ws, const char *reason);
void terminals_free_all(struct workspace *ws);
/* agentlink ops; userdata is the workspace. */
void terminals_on_hello(void *userdata, char **ids, size_t n_ids);
void terminals_on_opened(void *userdata, const char *id, uint64_t pid, uint64_t started_at,
			 const char *command);
void terminals_on_output(void *userdata, const char *id, uint64_t offset, const uint8_t *data,
			 size_t n);
void terminals_on_replay(void *userdata, const char *id, uint64_t request, uint64_t offset,
			 const uint8_t *data, size_t n);
void terminals_on_exit(void *userdata, uint64_t seq, const struct agentlink_terminal_exit *x);

/* manager-cred.c: agentlink op (userdata is the workspace); the host check. */
struct agentlink_cred_request;
void creds_on_request(void *userdata, const struct agentlink_cred_request *req);
bool cred_host_valid(const char *host);
/* manager-file.c: every session of ws ends (end() with -EBUSY, reason in the message). */
void files_lose_all(struct workspace *ws, const char *reason);
/* Frees them without callbacks (shutdown). */
void files_free_all(struct workspace *ws);
/* manager-capacity.c: GET /v1/worker's "capacity" (a new reference; NULL out of memory). */
json_t *manager_capacity_json(struct manager *m);
/* manager-usage.c */
/* agentlink op; userdata is the workspace. */
void usage_on_reply(void *userdata, uint64_t request, const struct agentlink_usage *v, size_t n);
/* Controller shutdown: every waiter left is dropped without a call. */
void usage_waiters_free(struct manager *m);

/* manager-contexts.c: the contexts from the store (controller start, after the workspaces; a
 * cell that ended meanwhile is recorded then); a workspace's freed without callbacks. A
 * context's kernel is the service "ctx-<cid>", which the services API does not show. */
struct context;
void contexts_load(struct manager *m);
void contexts_free_all(struct workspace *ws);
bool service_name_hidden(const char *name);
/* An attempt of a hidden service (a kernel) ended as the agent reports it (each report once
 * or more: a re-sent copy after a reconnect). */
void contexts_on_kernel_end(struct workspace *ws, const char *name,
			    const struct service_attempt_row *a);
/* manager-service.c: the service has an attempt alive or starting. */
bool service_is_active(struct workspace *ws, const char *name);
/* manager-service.c: the number of the service's live attempt; 0: none. */
uint64_t service_current_attempt(struct workspace *ws, const char *name);

/* manager-service.c: whether the service's current attempt is this one. */
bool service_attempt_is_current(struct workspace *ws, const char *name, uint64_t attempt);

/* manager-network.c */
void manager_network_init(struct manager *m);
void manager_network_free(struct manager *m);
void manager_network_start(struct manager *m);
bool manager_network_ready(struct manager *m, json_t *checks);
json_t *manager_network_worker_json(struct manager *m);
int workspace_network_check(struct manager *m, const struct workspace_spec *spec,
			    enum net_mode *ret_mode, struct net_policy **ret_policy,
			    struct station_error *e);
int workspace_network_create(struct workspace *ws, enum net_mode mode, struct net_policy *policy,
			     struct station_error *e);
int workspace_network_attach(void *userdata, pid_t pid, struct station_error *e);
/* What a job on a worker thread needs to make or remove the workspace's links and firewall
 * (net_workspace_make()/unmake(), which run beside the loop): copied on the loop, the policy
 * the job's own. */
struct workspace_network_job {
	struct net *net;
	enum net_mode mode;
	uint32_t address;
	struct net_policy *policy;
};
int workspace_network_job(struct workspace *ws, struct workspace_network_job *ret);
void workspace_network_job_free(struct workspace_network_job *j);
/* On the worker thread. */
int workspace_network_make(const struct workspace_network_job *j, const char *id, pid_t pid,
			   struct station_error *e);
void workspace_network_unmake(const struct workspace_network_job *j, const char *id);
/* On the loop, once made: the resolver and the denial log know the workspace. */
int workspace_network_known(struct workspace *ws);
/* On the loop, once its kernel objects are gone (or were never made): the record and what the
 * resolver knew. */
void workspace_network_remove(struct workspace *ws);
void workspace_network_free(struct workspace *ws);

/* manager-denials.c: what a workspace's network refused, kept in memory (the last
 * DENIALS_MAX destinations), and each run's share of it. */
#define DENIALS_MAX 100
/* A denial the network logged (net_denied_fn): recorded on its workspace. */
void workspace_denial_record(struct manager *m, const char *id, const char *what, const char *dest,
			     uint16_t port, const char *proto);
/* [{address, port, proto, name?, count, firstAt, lastAt}], most recent first. */
json_t *workspace_refused_json(const struct workspace *ws);
void workspace_denials_free(struct workspace *ws);
/* Before the run starts: its window opens (untracked without a network). */
void run_network_begin(struct workspace *ws, struct run_network *ret);
/* {denied, lastDenied} of the window so far; NULL when untracked or unreadable. */
json_t *run_network_json(struct workspace *ws, const struct run_network *rn);

/* manager-secret.c */
/* Every stored secret, opened into its workspace (controller start, after the workspaces). */
void secrets_load(struct manager *m);
/* Wipes and frees the workspace's secrets. */
void secrets_free_all(struct workspace *ws);

/* --- metrics (manager-metrics.c): bumped where it happens, read by manager_metrics_write() --- */
struct manager_metrics;
int manager_metrics_init(struct manager *m);
void manager_metrics_free(struct manager *m);
void metrics_run_started(struct manager *m);
/* A terminal result recorded (its status, output totals and duration). */
void metrics_run_ended(struct manager *m, const struct run_row *r);
/* A create (not a pool's refill) ended: its workspace ready, or failed. */
void metrics_create_ended(struct manager *m, const struct workspace *ws, bool ready);
void metrics_snapshot_created(struct manager *m);
void metrics_fork_done(struct manager *m, unsigned count);
/* An agent's connection closed while the agent lives: a reconnect follows. */
void metrics_agent_reconnect(struct manager *m);
/* Live port exposures (manager-ports.c). */
size_t ports_exposures_count(struct manager *m);

/* --- the warm pool (manager-pool.c) ---
 * Pool members are container workspaces made by workspace_make() like any other, kept in
 * m->workspaces (so ids, uid ranges and addresses stay unique) but hidden from every client:
 * workspace_find() skips them and n_workspaces - n_pool_members is what a client is told. */
struct workspace_spec;
void manager_pools_free(struct manager *m);
/* A stored workspace at controller start: true when it is a pool member (the pool then owns
 * it: adopted or torn down). */
bool pool_adopt(struct manager *m, struct workspace *ws, const struct pool_member_row *rows,
		size_t n_rows);
/* Whether a create may be served by a pool (names a pool's image, profile and network; no
 * env, egress or cpus): its spec is then resolved off the loop, and pool_claim_resolved() on
 * the loop claims the oldest ready member of the pool whose resolved spec it matches (1, *ret
 * the workspace's JSON) or finds none (0: a cold create follows). */
bool pool_claim_wanted(struct manager *m, const struct workspace_spec *spec);
int pool_claim_resolved(struct manager *m, const struct workspace_spec *spec, json_t *resolved,
			json_t **ret);
/* The member's agent is gone: the pool tears it down on its next turn. */
void pool_member_lost(struct workspace *ws);
/* An image is about to be removed from the store: members of digest are torn down now,
 * before its layers go, and its pools report it. */
void pool_image_remove(struct manager *m, const char *digest);
json_t *manager_pools_json(struct manager *m);
/* manager.c, for the pool: the whole create of a workspace (row, network, cgroup, container,
 * agent HELLO) as POST /v1/workspaces does it, spec after defaults; pool_key non-NULL:
 * recorded as pool's member (key) before anything is started. Linked at once in state
 * creating; the container and the agent are started off the loop and fn(userdata) is
 * called on the loop when the workspace is ready (r >= 0, result its JSON) or gone (r < 0).
 * *ret_op (may be NULL) is set before anything starts (fn may run before this returns). */
int workspace_make(struct manager *m, const struct workspace_spec *spec, const char *pool_key,
		   struct pool *pool, workspace_op_fn fn, void *userdata,
		   struct workspace_op **ret_op, struct station_error *e);
/* A readiness check soon (something it looks at changed). */
void manager_ready_kick(struct manager *m);
/* The spec a create of spec (after defaults) asks for, as recorded until its job's check()
 * resolved it; NULL: no memory. */
json_t *workspace_spec_request(struct manager *m, const struct adapter_ops *ops,
			       const struct workspace_spec *spec);
/* The spec a fresh create of spec (after defaults) records: check()ed and resolved, idBase
 * not yet allocated (reads the image store and the profile: a pool claim's). */
int workspace_spec_resolve(struct manager *m, const struct adapter_ops *ops,
			   const struct workspace_spec *spec, json_t **ret,
			   struct station_error *e);
struct workspace_spec workspace_spec_effective(const struct manager *m,
					       const struct workspace_spec *spec);
void workspace_adopt(struct workspace *ws);
/* Deletes ws as DELETE does (off the loop, after what is queued on it), nobody waiting: a pool
 * member is unlinked (and uncounted) once it is gone. */
void workspace_delete_begin(struct workspace *ws);
/* A create, restart or delete is under way or queued. */
bool workspace_op_pending(const struct workspace *ws);
void workspace_link(struct manager *m, struct workspace *ws);
void workspace_unlink(struct manager *m, struct workspace *ws);
int workspace_set_state(struct workspace *ws, enum workspace_state state, const char *reason);

/* Pause (manager-pause.c), used by snapshots and fork (manager-snapshot.c): on the loop,
 * synchronous and bounded. workspace_freeze() freezes every process of ws but its agent
 * (-ETIMEDOUT when the freezer does not settle, everything thawed again); workspace_thaw()
 * undoes it. Neither changes the recorded state: the API's pause does that. */
int workspace_freeze(struct workspace *ws, struct station_error *e);
int workspace_thaw(struct workspace *ws, struct station_error *e);
/* Before a freeze: PAUSE to the agent (its clocks stop) and fn(ws, userdata) once it answered
 * PAUSED, on the loop: every request sent to it before has been acted on (a command forked
 * into its group, frozen with the rest), none starts beside the freeze. 1: fn comes later
 * (bounded: without PAUSED in 2 s it comes anyway); 0: the agent cannot hold (it predates
 * PAUSE or is not connected), fn is not called and the caller goes on at once; < 0 with e.
 * workspace_release_agent() is the RESUME after the thaw of a hold that answered 1. */
int workspace_hold_agent(struct workspace *ws, workspace_held_fn fn, void *userdata,
			 struct station_error *e);
void workspace_release_agent(struct workspace *ws);
/* The workspace's state is "paused" (recorded; its processes frozen). */
bool workspace_is_paused(const struct workspace *ws);
/* For a command, attach, open, write or service start: 0 when ws may take it now (ready, or
 * paused with autoResume: resumed first, synchronously), STATION_EPAUSED with e otherwise. */
int workspace_wake_for(struct workspace *ws, const char *what, struct station_error *e);
/* manager-pause.c, for manager.c: the head operation OP_PAUSE (reason: NULL, or why: "idle:
 * …") and OP_RESUME; each ends with workspace_op_done() (at once or later), or returns < 0 with
 * e and leaves ending it to the caller. The agent's PAUSED. Before a restart, delete, stop or
 * a lost agent's kill: a paused workspace thawed (its state left to the caller). */
int workspace_pause_begin(struct workspace *ws, const char *reason, struct station_error *e);
int workspace_resume_begin(struct workspace *ws, struct station_error *e);
void workspace_on_paused(struct workspace *ws, uint64_t request);
void workspace_unpause_for_teardown(struct workspace *ws);
bool workspace_auto_resume(const struct workspace *ws);
/* manager.c: the head operation ended: its waiter told (result's reference taken), the next
 * one started. */
void workspace_op_done(struct workspace *ws, int r, json_t *result, const struct station_error *e);
/* manager.c: queues a pause nobody waits for (the idle clock's), reason as the state's. */
void workspace_pause_queue(struct workspace *ws, const char *reason);

/* manager-snapshot.c, for create: spec with its snapshot resolved (the viewer's own, else
 * -ENOENT; the snapshot's image in place of spec.image, which may name only that image, else
 * -EINVAL), into *ret, whose image points into image_buf. */
#define SNAPSHOT_IMAGE_REF_MAX 80
int snapshot_spec_apply(struct manager *m, const struct workspace_spec *spec,
			struct workspace_spec *ret, char image_buf[SNAPSHOT_IMAGE_REF_MAX],
			struct station_error *e);
/* manager-snapshot.c, for image DELETE: -EBUSY naming the snapshot whose image digest is. */
int snapshot_image_in_use(struct manager *m, const char *digest, struct station_error *e);
/* manager-snapshot.c, at start: each snapshot not yet on disk when the controller stopped is
 * checked against its image off the loop, then made durable, or removed when it does not hold
 * (the machine lost power before its fsync()). */
void manager_snapshots_recover(struct manager *m);
/* manager.c: a handle of no workspace (as a warm pool's claim uses), for operations that
 * span several (snapshots, fork): forgotten by manager_workspace_op_forget() like any other;
 * ..._end() calls its fn (unless forgotten) and frees it. */
struct workspace_op *workspace_op_detached(workspace_op_fn fn, void *userdata);
void workspace_op_detached_end(struct workspace_op *op, int r, json_t *result,
			       const struct station_error *e);

/* manager-checkpoint.c: memory snapshots. _init() queues the probe (adapter/checkpoint.h) off
 * the loop, once; _ready() adds GET /v1/ready's "checkpoint" check (named, not required: ok
 * and the probe's message, "checking …" until it answered). workspace_checkpoint_check(): 0
 * when a memory snapshot of ws can be taken here, else -ENOTSUP (501) with the probe's
 * message (what is missing) in e. */
void manager_checkpoint_init(struct manager *m);
void manager_checkpoint_ready(struct manager *m, json_t *checks);
int workspace_checkpoint_check(struct workspace *ws, struct station_error *e);
/* Takes ws's checkpoint into dir (made here, 0700: images/ and criu's work/ in it, files
 * 0600) with the workspace running on: CHECKPOINT to the agent, which lets go of everything of
 * the controller's and closes the connection; the runtime's checkpoint off the loop; the agent
 * reconnected. done: called once, on the loop, unless this fails at once (< 0, e set). */
typedef void (*checkpoint_done_fn)(void *userdata, int r, const struct station_error *e);
int workspace_checkpoint_take(struct workspace *ws, const char *dir, checkpoint_done_fn done,
			      void *userdata, struct station_error *e);
/* A memory snapshot's checkpoint: <root>/checkpoints/<snapshot id> (0700, root's), the bytes
 * of its images, its removal (with the snapshot, or its failure). */
#define CHECKPOINT_DIR "checkpoints"
void checkpoint_dir_path(const struct manager *m, const char *snapshot_id, char *buf, size_t n);
void checkpoint_dir_remove(struct manager *m, const char *snapshot_id);
uint64_t checkpoint_dir_bytes(const char *dir);
/* Restoring one: 0 when this worker can restore snapshot_id's checkpoint (its images there,
 * the same runtime and criu), else an error naming what is not. */
#define CHECKPOINT_META "meta.json"
int checkpoint_restore_check(struct manager *m, const char *snapshot_id, struct station_error *e);
/* For a create from snapshot_id: 1 with spec_json given the checkpoint's uid range ("idBase")
 * and "checkpoint" (the snapshot id) when it holds processes, 0 when it does not. */
int checkpoint_spec_apply(struct manager *m, const char *snapshot_id, json_t *spec_json,
			  struct station_error *e);
/* The source's services recorded beside the images (services.json, 0600) as ws's, before its
 * restored agent connects: 0 (none recorded is fine), else e names what is wrong. */
#define CHECKPOINT_SERVICES "services.json"
#define CHECKPOINT_SERVICES_MAX (4u << 20)
int checkpoint_services_restore(struct workspace *ws, const char *snapshot_id,
				struct station_error *e);
/* Whether base is a memory snapshot's checkpoint's uid range (idBase): its restored processes
 * run in their source's range, which no new workspace gets. In memory: no file read. */
bool checkpoint_base_reserved(const struct manager *m, uint64_t base);
void manager_checkpoint_free(struct manager *m);
/* From the link (manager.c): CHECKPOINT_READY, and the connection's close (true when the
 * checkpoint under way expected it). */
void workspace_on_checkpoint_ready(struct workspace *ws, uint64_t request, const char *reason);
bool workspace_checkpoint_link_closed(struct workspace *ws);
/* manager.c: 0 when the listener of the socket fd reached is the controller (uid 0) or ws's
 * agent (its pid), -EPROTO when not (the sandbox's), -ENOTCONN when it cannot be asked. */
int workspace_agent_peer_check(const struct workspace *ws, int fd);
/* manager.c: connect to the agent again now (as after a controller restart). */
void workspace_agent_reconnect(struct workspace *ws);
