/* SPDX-License-Identifier: MIT */
#pragma once

/* The controller's metadata and final results in SQLite (WAL, synchronous=NORMAL, foreign
 * keys on, busy timeout). The schema is versioned: src/store/schema/NNNN-*.sql are embedded at
 * build time and applied in order inside a transaction; PRAGMA user_version records the last.
 * A database newer than this binary is refused (-EPROTONOSUPPORT).
 *
 * Strings in rows are malloc'd and owned by the row; *_row_free() releases them. States are
 * enums (domain/state.h), stored as their X_to_string() text (a run's status as its number);
 * a row whose text this binary does not know reads as -EIO. Times are
 * CLOCK_REALTIME microseconds. Functions return -errno; SQLite failures map to -EIO
 * (SQLITE_FULL to -ENOSPC, SQLITE_BUSY to -EBUSY). */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "domain/auth.h"
#include "domain/state.h"

struct store;

int store_open(const char *path, struct store **ret);
void store_close(struct store *s);

int store_begin(struct store *s);
int store_commit(struct store *s);
int store_rollback(struct store *s);

struct workspace_row {
	char *id;
	char *worker;
	char *adapter; /* "host" */
	enum workspace_state state;
	char *reason;	    /* why the state was entered; NULL when none */
	char *spec_json;    /* the create request after defaults, as JSON */
	char *cgroup;	    /* cgroup_to_string() of the workspace cgroup; NULL before made */
	char *agent_secret; /* hex; NULL when no agent */
	int64_t agent_pid;  /* 0 when none */
	uint64_t created_at;
	uint64_t updated_at;
	char *tenant;	    /* "" (or NULL before insert): the operator's; else the tenant's name */
	uint64_t paused_at; /* CLOCK_REALTIME µs the state became "paused"; 0 unless paused */
	char *name;	    /* NULL: none; unique per tenant (-EEXIST) */
	char *labels_json;  /* a JSON object of string values; NULL: none */
};
void workspace_row_free(struct workspace_row *r);

int store_workspace_insert(struct store *s, const struct workspace_row *r);
/* Replaces every mutable column (state, reason, spec_json, cgroup, agent_secret, agent_pid,
 * updated_at, tenant, paused_at, name, labels_json) of the row with r->id. -ENOENT when absent;
 * -EEXIST when another workspace of the tenant has the name (insert too). */
int store_workspace_update(struct store *s, const struct workspace_row *r);
int store_workspace_delete(struct store *s, const char *id); /* its runs go too */
int store_workspace_get(struct store *s, const char *id, struct workspace_row *ret);
/* Every workspace, oldest first. */
int store_workspace_list(struct store *s, struct workspace_row **ret, size_t *ret_n);

/* Warm pool members (store-pool.c): an unclaimed member's workspace row has a pool_members
 * row naming its pool's key; the row goes with its workspace. */
struct pool_member_row {
	char *workspace_id;
	char *pool;
};
void pool_member_row_free(struct pool_member_row *r);
int store_pool_member_insert(struct store *s, const char *workspace_id, const char *pool);
/* Every member, oldest first. */
int store_pool_member_list(struct store *s, struct pool_member_row **ret, size_t *ret_n);
/* In one transaction: r->id stops being a member (-ENOENT when it was not one: nothing is
 * changed) and its spec_json, created_at, updated_at, tenant, name and labels_json become
 * r's. */
int store_pool_claim(struct store *s, const struct workspace_row *r);

/* Image owners (store-image.c): a row per tenant that imported or pulled the image with this
 * digest ("" the operator); an image without rows is the operator's. add is idempotent; remove
 * drops every row of the digest. */
struct image_owner_row {
	char *digest;
	char *tenant;
};
void image_owner_row_free(struct image_owner_row *r);
int store_image_owner_add(struct store *s, const char *digest, const char *tenant);
int store_image_owner_remove(struct store *s, const char *digest);
int store_image_owner_list(struct store *s, struct image_owner_row **ret, size_t *ret_n);

/* Idempotency keys (store-idempotency.c): one row per (scope, key), scope being the request's
 * path. */
struct idempotency_row {
	char *scope;
	char *key;
	char *request_hash; /* SHA-256 hex of method, path and body */
	char *object_id;    /* what the first request made */
	int64_t status;	    /* the HTTP status it answered */
	uint64_t created_at;
};
void idempotency_row_free(struct idempotency_row *r);
/* Inserts r, replacing a row of the same scope and key created before `expired_before` (an
 * expired key is free again). -EEXIST when a live row holds the key. */
int store_idempotency_insert(struct store *s, const struct idempotency_row *r,
			     uint64_t expired_before);
/* The row of (scope, key) created at or after `expired_before`: 1 with *ret filled, 0 when
 * there is none. */
int store_idempotency_get(struct store *s, const char *scope, const char *key,
			  uint64_t expired_before, struct idempotency_row *ret);
/* Deletes the row of (scope, key); returns how many (0 or 1). */
int store_idempotency_delete(struct store *s, const char *scope, const char *key);
/* Deletes the rows created before `expired_before`; returns how many. */
int store_idempotency_purge(struct store *s, uint64_t expired_before);

struct run_output {
	uint8_t *head;
	size_t head_len;
	uint8_t *tail; /* bytes after the omitted gap; empty unless truncated */
	size_t tail_len;
	uint64_t total; /* bytes the stream produced */
};

struct run_row {
	char *id;
	char *workspace_id;
	char *command;
	char *cwd;	/* NULL: the workspace default */
	char *env_json; /* JSON object of the run's own variables; NULL when none */
	uint64_t timeout_ms;
	uint64_t max_output_bytes; /* per stream */
	enum run_status status;
	int64_t exit_code; /* -1 when none */
	int64_t signal;	   /* 0 when none */
	bool oom_killed;
	bool truncated;
	char *reason;		  /* failed_to_start / lost reason; NULL when none */
	struct run_output out[2]; /* [0] stdout, [1] stderr */
	uint64_t created_at;
	uint64_t started_at; /* 0 until the agent reports */
	uint64_t ended_at;   /* 0 while running */
	uint64_t cpu_usec;
	uint64_t peak_memory;
	char *network_json; /* the run's denials ({denied, lastDenied}); NULL without a network */
};
void run_row_free(struct run_row *r);

/* Inserts with the row's status (running). */
int store_run_insert(struct store *s, const struct run_row *r);
/* Records the final result: UPDATE … WHERE id = r->id AND workspace_id = r->workspace_id AND
 * status = running (a report about another workspace's run touches nothing). Returns 1 when the
 * row changed, 0 when it was already terminal (a duplicate completion), -ENOENT when the
 * workspace has no such run, -EINVAL without an id or a workspace id. */
int store_run_finish(struct store *s, const struct run_row *r);
int store_run_set_started(struct store *s, const char *id, uint64_t started_at);
/* -ENOENT unless the run exists and belongs to workspace_id. */
int store_run_get(struct store *s, const char *workspace_id, const char *id, struct run_row *ret);
/* The newest `limit` runs of a workspace, newest first, without output bytes. */
int store_run_list(struct store *s, const char *workspace_id, size_t limit, struct run_row **ret,
		   size_t *ret_n);
/* Ids of the runs of a workspace still marked running. */
int store_run_list_running(struct store *s, const char *workspace_id, char ***ret_ids,
			   size_t *ret_n);
/* Retention: deletes finished runs that ended before `ended_before`, and beyond the newest
 * `keep_per_workspace` finished runs of each workspace. Returns how many were deleted. */
int store_run_prune(struct store *s, uint64_t ended_before, size_t keep_per_workspace);

/* A container workspace's network beyond "none" (src/net/net.h): one row per workspace, gone
 * with it. address is the IPv4 lease (host byte order), unique: inserting a taken one is
 * -EEXIST. */
struct network_row {
	char *workspace_id;
	char *mode; /* "bridge" or "restricted" */
	uint32_t address;
	char *policy_json; /* restricted: the egress policy; NULL otherwise */
	uint64_t created_at;
	uint64_t updated_at;
};
void network_row_free(struct network_row *r);

int store_network_insert(struct store *s, const struct network_row *r);
/* -ENOENT when the workspace has no network row. */
int store_network_set_policy(struct store *s, const char *workspace_id, const char *policy_json,
			     uint64_t updated_at);
int store_network_delete(struct store *s, const char *workspace_id);
/* Every row, by address. */
int store_network_list(struct store *s, struct network_row **ret, size_t *ret_n);

/* API tokens (store-token.c), stored as the SHA-256 of the secret, lower-case hex, only. */
struct token_row {
	char *id;     /* "tok-<26 base32>", or "admin" */
	char *name;   /* 1-64 printable */
	char *scope;  /* auth_scope_to_string() */
	char *tenant; /* NULL: none */
	struct auth_limits limits;
	char *hash;	       /* 64 lower-case hex */
	uint64_t created_at;   /* CLOCK_REALTIME µs */
	uint64_t expires_at;   /* 0: never */
	uint64_t revoked_at;   /* 0: not revoked */
	uint64_t last_used_at; /* 0: never used; coarse */
};

void token_row_free(struct token_row *r);
/* -EEXIST when the id or the hash is taken, -EINVAL for a hash that is not 64 lower-case hex. */
int store_token_insert(struct store *s, const struct token_row *r);
/* Every token, revoked ones too, in creation order. */
int store_token_list(struct store *s, struct token_row **ret, size_t *ret_n);
/* -ENOENT when no token has this id. */
int store_token_revoke(struct store *s, const char *id, uint64_t at);
int store_token_touch(struct store *s, const char *id, uint64_t at);
/* The admin token ("admin") gets this hash: inserted when there is none, replaced when there
 * is (--admin-token-file). */
int store_token_set_admin(struct store *s, const char *hash_hex, uint64_t now);
/* 1 when a token with this hash exists, else 0. */
int store_token_check(struct store *s, const char *hash_hex);
int store_token_count(struct store *s, size_t *ret);

/* The audit log (store-token.c): one row per audited request. */
struct audit_row {
	int64_t id; /* the cursor; set by the store */
	uint64_t at;
	char *token_id; /* NULL: no token checked out (a 401) */
	char *token_name;
	char *tenant; /* NULL: none */
	char *method;
	char *route; /* the route template, e.g. "/v1/workspaces/{id}/commands" */
	char *path;  /* the path without its query */
	char *workspace_id;
	char *object_id; /* the run, service, terminal, secret, image or token it named */
	unsigned status;
	char *outcome; /* "ok", "denied", "error", "aborted" */
};

void audit_row_free(struct audit_row *r);
/* In one transaction; then drops the oldest rows past keep (0: none dropped). */
int store_audit_insert(struct store *s, const struct audit_row *rows, size_t n, uint64_t keep);
struct audit_filter {
	size_t limit;	      /* 1 to 1000 */
	int64_t before;	      /* rows with a smaller id only; 0: from the newest */
	const char *token_id; /* NULL: any */
	const char *tenant;
	const char *workspace_id;
};
/* Newest first. */
int store_audit_list(struct store *s, const struct audit_filter *f, struct audit_row **ret,
		     size_t *ret_n);

/* Services (store-service.c). A definition with its current state; names are unique per
 * workspace. The enums are stored as their API strings (state "running", restart_policy
 * "on-failure"). */
struct service_row {
	char *id;
	char *workspace_id;
	char *name;
	char *command;
	char *cwd;	/* NULL: the workspace directory */
	char *env_json; /* JSON object; NULL when none */
	enum service_policy restart_policy;
	uint64_t max_restarts;
	uint64_t delay_ms;
	uint64_t backoff_permille; /* 0: no backoff */
	uint64_t max_delay_ms;
	uint64_t reset_after_ms; /* the budget resets after an attempt this long; 0: never */
	int64_t stop_signal;
	uint64_t stop_timeout_ms;
	bool autostart;
	uint64_t max_output_bytes; /* per stream, head + tail */
	enum service_state state;
	char *reason;
	uint64_t restart_count;
	uint64_t next_restart_at;
	int64_t main_pid;	  /* 0 when none */
	uint64_t current_attempt; /* 0 when none runs */
	uint64_t attempt_started_at;
	uint64_t next_attempt; /* number the next attempt gets */
	bool stopping;
	uint64_t created_at;
	uint64_t updated_at;
	/* the id the agent knows it by when not id (a service carried into a workspace restored
	 * from a memory snapshot: its source's); NULL: id */
	char *agent_id;
};
void service_row_free(struct service_row *r);

/* -EEXIST when the workspace already has a service of that name. */
int store_service_insert(struct store *s, const struct service_row *r);
/* The state columns: state, reason, restart_count, next_restart_at, main_pid, current_attempt,
 * attempt_started_at, next_attempt, stopping, updated_at, agent_id. -ENOENT when absent. */
int store_service_update(struct store *s, const struct service_row *r);
int store_service_delete(struct store *s, const char *id); /* its attempts go too */
/* Every service of a workspace, oldest first. */
int store_service_list(struct store *s, const char *workspace_id, struct service_row **ret,
		       size_t *ret_n);

/* One finished attempt of a service. */
struct service_attempt_row {
	char *service_id;
	uint64_t number;
	uint64_t started_at;
	uint64_t ended_at;
	int64_t exit_code; /* -1 when none */
	int64_t signal;	   /* 0 when none */
	enum attempt_end end_reason;
	char *reason;
	bool daemonized;
	bool output_dropped;
	struct run_output out[2];
	/* The agent's report of the attempt's cgroup at its end, not stored: has_stats false when
	 * it said nothing (an older agent, or no group). */
	bool has_stats;
	bool oom_killed;
	uint64_t cpu_usec;
	uint64_t peak_memory;
};
void service_attempt_row_free(struct service_attempt_row *r);

/* Returns 1 when recorded, 0 when that attempt was recorded before (a re-sent result). Keeps
 * only the newest `keep` attempts of the service. */
int store_attempt_insert(struct store *s, const struct service_attempt_row *r, size_t keep);
/* Oldest first. */
int store_attempt_list(struct store *s, const char *service_id, bool with_output,
		       struct service_attempt_row **ret, size_t *ret_n);
/* number 0: the newest. -ENOENT when there is none. */
int store_attempt_get(struct store *s, const char *service_id, uint64_t number,
		      struct service_attempt_row *ret);

/* Terminals (store-terminal.c). The state is stored as its API string. */
struct terminal_row {
	char *id;
	char *workspace_id;
	char *command;	/* what runs; NULL until known (the login shell) */
	char *cwd;	/* NULL: the workspace directory */
	char *env_json; /* JSON object; NULL when none */
	uint64_t cols;
	uint64_t rows;
	enum terminal_state state;
	char *reason;
	int64_t pid;	   /* 0 when none */
	int64_t exit_code; /* -1 when none */
	int64_t signal;	   /* 0 when none */
	uint64_t output_bytes;
	uint64_t created_at;
	uint64_t started_at;
	uint64_t ended_at;
};
void terminal_row_free(struct terminal_row *r);

/* Then drops the ended terminals of the workspace beyond the newest keep_ended (0: none). */
int store_terminal_insert(struct store *s, const struct terminal_row *r, size_t keep_ended);
/* command, cols, rows, state, reason, pid, exit_code, signal, output_bytes, started_at,
 * ended_at of the row with r->id. -ENOENT when absent. */
int store_terminal_update(struct store *s, const struct terminal_row *r);
/* -ENOENT unless the terminal exists and belongs to workspace_id. */
int store_terminal_get(struct store *s, const char *workspace_id, const char *id,
		       struct terminal_row *ret);
/* Every terminal of a workspace, oldest first. */
int store_terminal_list(struct store *s, const char *workspace_id, struct terminal_row **ret,
			size_t *ret_n);

/* Secrets (store-secret.c): a workspace's secret values sealed by secret-box.h, never in
 * plaintext; names are unique per workspace; the rows go with their workspace. */
struct secret_row {
	char *workspace_id;
	char *name;
	uint8_t *nonce; /* SECRET_NONCE_BYTES */
	size_t nonce_len;
	uint8_t *ciphertext; /* ciphertext and tag */
	size_t ciphertext_len;
	char *host; /* NULL: not released for any host */
	char *username;
	uint64_t expires_at; /* 0: never */
	uint64_t created_at;
	uint64_t updated_at;
};
void secret_row_free(struct secret_row *r);

/* Inserts, or replaces the sealed value, host, username, expiry and updated_at of the secret of
 * that name (created_at stays). -ENOENT when the workspace does not exist. */
int store_secret_put(struct store *s, const struct secret_row *r);
/* -ENOENT when the workspace has no secret of that name. */
int store_secret_delete(struct store *s, const char *workspace_id, const char *name);
/* Every secret of every workspace, by workspace and name. */
int store_secret_list(struct store *s, struct secret_row **ret, size_t *ret_n);

/* Exposed ports (store-ports.c; docs/api.md, "Previews"): one row per (workspace, port), its
 * host label unique; a token exposure keeps only its token's SHA-256 (64 lower-case hex). The
 * rows go with their workspace. */
struct port_row {
	char *workspace_id;
	uint64_t port;	  /* 1 … 65535 */
	char *label;	  /* "<port>-<26 base32>" */
	char *access;	  /* "token" or "public" */
	char *token_hash; /* NULL for a public one */
	uint64_t expires_at;
	uint64_t created_at;
};
void port_row_free(struct port_row *r);
/* -EEXIST when the workspace has that port exposed already or the label is taken; -ENOENT when
 * the workspace does not exist. */
int store_port_insert(struct store *s, const struct port_row *r);
/* -ENOENT when that port of the workspace is not exposed. */
int store_port_delete(struct store *s, const char *workspace_id, uint64_t port);
/* Every exposure of the workspace goes; returns how many. */
int store_port_delete_workspace(struct store *s, const char *workspace_id);
/* The exposures that expired at or before now; returns how many. */
int store_port_delete_expired(struct store *s, uint64_t now);
/* Every exposure, by workspace and port. */
int store_port_list(struct store *s, struct port_row **ret, size_t *ret_n);

/* Snapshots (store-snapshot.c; docs/api.md, "Snapshots and fork"): one row per snapshot, kept
 * after its workspace is gone. */
struct snapshot_row {
	char *id;	    /* "s-<26 base32>" */
	char *workspace_id; /* the workspace it was made of */
	char *tenant;	    /* "": the operator's */
	char *name;	    /* NULL: none */
	char *image;	    /* the snapshot's image digest */
	char *base_image;   /* the workspace's image digest it was made on ("" host) */
	uint64_t size_bytes;
	bool memory;
	uint64_t paused_ms;
	uint64_t created_at;
	bool durable; /* its image fsync()ed (0020-snapshot-durable.sql) */
};
void snapshot_row_free(struct snapshot_row *r);
/* -EEXIST when the id is taken. */
int store_snapshot_insert(struct store *s, const struct snapshot_row *r);
/* -ENOENT when there is no such snapshot (deleted meanwhile). */
int store_snapshot_set_durable(struct store *s, const char *id);
/* -ENOENT when there is no such snapshot. */
int store_snapshot_get(struct store *s, const char *id, struct snapshot_row *ret);
int store_snapshot_delete(struct store *s, const char *id);
/* Every snapshot, newest first. */
int store_snapshot_list(struct store *s, struct snapshot_row **ret, size_t *ret_n);
/* How many snapshots tenant ("" the operator) has. */
int store_snapshot_count(struct store *s, const char *tenant, uint64_t *ret);

/* Code contexts and their cells (store-context.c; docs/api.md, "Code contexts"). The states
 * and statuses are stored as their API strings. */
struct context_row {
	char *id;
	char *workspace_id;
	char *language;
	char *cwd;	/* NULL: the workspace directory */
	char *env_json; /* NULL: none */
	char *service_name;
	char *state;  /* "idle", "busy", "dead" */
	char *reason; /* NULL: none */
	uint64_t execution_count;
	uint64_t next_cell;
	uint64_t created_at;
};
void context_row_free(struct context_row *r);
int store_context_insert(struct store *s, const struct context_row *r);
/* state, reason, execution_count, next_cell. -ENOENT when gone. */
int store_context_update(struct store *s, const struct context_row *r);
int store_context_delete(struct store *s, const char *id);
/* Every context of every workspace, oldest first (controller start). */
int store_context_list_all(struct store *s, struct context_row **ret, size_t *ret_n);

struct cell_row {
	char *id;
	char *context_id;
	uint64_t number;
	char *run_id;
	char *status;		 /* "running", "ok", "error", "timed_out", "interrupted" */
	int64_t execution_count; /* -1: none */
	char *results_json;	 /* NULL while running */
	char *error_json;	 /* NULL: none */
	uint64_t created_at;
	uint64_t ended_at; /* 0 while running */
	/* The kernel's CPU time during the cell and its memory in use at the end; -1: unknown. */
	int64_t kernel_cpu_ms;
	int64_t kernel_memory_bytes;
};
void cell_row_free(struct cell_row *r);
/* Inserts the cell; keeps the newest `keep` cells of its context. */
int store_cell_insert(struct store *s, const struct cell_row *r, size_t keep);
/* Records the end (with the kernel's use): UPDATE … WHERE status = 'running'. 1 when it changed, 0 when it had ended
 * already (a second recording), -ENOENT when there is no such cell. */
int store_cell_finish(struct store *s, const struct cell_row *r);
int store_cell_get(struct store *s, const char *context_id, const char *id, struct cell_row *ret);
/* Newest first, at most limit. */
int store_cell_list(struct store *s, const char *context_id, size_t limit, struct cell_row **ret,
		    size_t *ret_n);
