/* SPDX-License-Identifier: MIT */
#pragma once

/* Where a workspace's agent runs. One ops table per adapter: host.c and container.c. Setup
 * happens in steps; teardown is idempotent and removes whatever exists. */

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "basic/error.h"
/* The worker-wide parts of a workspace's environment that the manager reads the flags of. */
#include "adapter/ca-bundle.h"
#include "adapter/checkpoint.h"
#include "adapter/proxy.h"

struct cgroup;
struct runtime;
struct image_store;

/* Worker-wide settings and handles, made once by the manager. */
struct adapter_context {
	const char *root;
	const char *agent_path;
	/* the code contexts' kernel programs (station-kernel-python, station-kernel-js): bound
	 * read-only into a container at OCI_KERNEL_DIR; NULL: none */
	const char *kernel_dir;
	struct runtime *runtime;     /* NULL: the container adapter is unavailable */
	char runtime_error[512];     /* why, when runtime is NULL */
	struct image_store *images;  /* NULL: no image store */
	const char *default_image;   /* NULL: a container workspace must name its image */
	const char *default_seccomp; /* path of the worker's default profile */
	/* where profiles may come from: the shipped profiles/ and each --seccomp-dir (absolute,
	 * canonical, NULL-terminated; NULL: none) */
	const char *const *seccomp_dirs;
	uint32_t id_base; /* host uid/gid of container root; ids base..base+65535 */
	/* Where an lxcfs serves now (NULL: none) and which one (daemon/lxcfs.h), refreshed by the
	 * manager before each start: a container gets its /proc views from there. */
	const char *lxcfs_dir;
	unsigned long lxcfs_serial;
	bool host_user_set;	     /* host adapter: commands run as host_uid:host_gid, */
	uint32_t host_uid, host_gid; /* no supplementary groups; else as root */
	/* --workspace-ca (ca-bundle.h): the operator's certificates, checked PEM; NULL: none.
	 * A container's bundle is its image's trust store and these, written at each start; a
	 * host workspace's is host_ca_bundle (the host's trust store and these, made at start). */
	const char *ca_pem;
	size_t ca_pem_len;
	const char *host_ca_bundle;
};

struct adapter_workspace {
	const struct adapter_context *ctx;
	const char *id;
	const char *dir;	     /* <root>/workspaces/<id> */
	const struct cgroup *cgroup; /* the workspace cgroup, created by the caller */
	char *const *env;	     /* workspace env, KEY=VALUE, NULL-terminated; may be NULL */
	/* what the worker sets before env (which overrides it): the proxy variables of a
	 * workspace whose network reaches the proxy; NULL-terminated, may be NULL */
	char *const *worker_env;
	json_t *spec; /* the workspace spec (adapter fields are resolved into it) */
	/* container, network bridge or restricted: called between the runtime's create and its
	 * start with the container's init pid, whose new network namespace it fills (net.h)
	 * before anything of the sandbox runs; nameserver is the resolver its /etc/resolv.conf
	 * names. NULL: the namespace keeps only lo. */
	int (*net_attach)(void *userdata, pid_t pid, struct station_error *e);
	void *net_userdata;
	const char *nameserver;
	/* a create from a memory snapshot (container, runc): the checkpoint's directory
	 * (adapter_checkpoint()); start_agent restores its processes instead of starting an agent,
	 * with criu (NULL: PATH's) */
	const char *restore_dir;
	const char *criu;
};

struct adapter_ops {
	const char *name;
	/* Before anything is made: every piece the adapter needs exists and is valid (image in
	 * the store, profile readable and valid, runtime working), each failure named. May add
	 * resolved fields to spec (the image digest, the profile digest). Fails closed. */
	int (*check)(const struct adapter_context *ctx, json_t *spec, struct station_error *e);
	/* Makes the workspace's directories (HOME persists across restarts). */
	int (*prepare)(const struct adapter_workspace *ws, struct station_error *e);
	/* Starts the agent with a fresh listening socket at <dir>/run/agent.sock and the secret
	 * through an inherited pipe. The agent outlives the controller. */
	int (*start_agent)(const struct adapter_workspace *ws, const uint8_t *secret,
			   size_t secret_len, pid_t *ret_pid, struct station_error *e);
	/* After the workspace cgroup was killed: releases what start_agent and prepare made
	 * outside the directory (runtime state, mounts). Idempotent. */
	void (*stop)(const struct adapter_workspace *ws);
	/* Removes the directories. */
	int (*remove)(const struct adapter_workspace *ws, struct station_error *e);
	/* HOME and the default working directory as commands see them. */
	int (*paths)(const struct adapter_workspace *ws, char **ret_home, char **ret_workdir);
	/* The worker-wide pieces the adapter needs, each appended to checks as {name, ok,
	 * message}; true when all of them are there. NULL: the adapter needs none. */
	bool (*ready)(const struct adapter_context *ctx, json_t *checks);
};

extern const struct adapter_ops adapter_host;
extern const struct adapter_ops adapter_container;

/* A host workspace's snapshot holds its HOME alone, at "home" in its one layer (where it is in
 * the workspace directory); a create from it (spec "snapshot" and that image) is seeded so. */
#define ADAPTER_HOST_SNAPSHOT_HOME "home"

/* The agent of a workspace of ops binds its socket itself (runsc), so the socket's listener
 * is not the controller; otherwise the adapter listens and hands the socket over. */
bool adapter_agent_binds_socket(const struct adapter_context *ctx, const struct adapter_ops *ops);

const struct adapter_ops *adapter_find(const char *name);

/* The container runtime named name (runtime.h: "runc", "crun", "runsc" or an absolute path),
 * its state under <ctx->root>/runtime, into ctx->runtime. On failure ctx->runtime stays NULL,
 * ctx->runtime_error and e say why: the container adapter is then unavailable. */
int adapter_runtime_open(struct adapter_context *ctx, const char *name, struct station_error *e);
void adapter_runtime_close(struct adapter_context *ctx);
/* Each runtime call's bound (a call past it is killed with its process group); 0: keep the
 * default (RUNTIME_TIMEOUT_MS_DEFAULT, 30 s). */
void adapter_runtime_set_timeout(struct adapter_context *ctx, int timeout_ms);
/* The runtime's name ("runc", ...); NULL when none is open. */
const char *adapter_runtime_name(const struct adapter_context *ctx);
/* The runtime binary's absolute path; NULL when none is open. */
const char *adapter_runtime_path(const struct adapter_context *ctx);

/* Memory snapshots (container.c; docs/operations.md "Memory snapshots"). The run directory as
 * the container sees it: where an agent told CHECKPOINT logs and listens. */
const char *adapter_container_run_dir(void);
/* The runtime's checkpoint of workspace id (its directory ws_dir) into dir, the workspace
 * running on: dir/images (criu's images), dir/work (its log), dir/agent.log (the agent's log as
 * the dump found it: a restore puts it back, criu checks its size) and dir/secret (the agent's
 * secret, which the restored agent holds); every file 0600, root's. Blocks: off the loop. */
int adapter_checkpoint(const struct adapter_context *ctx, const char *id, const char *ws_dir,
		       const char *criu, const char *dir, const uint8_t *secret, size_t secret_len,
		       struct station_error *e);
/* criu's first error in work/name (its dump.log or restore.log, in a directory of root's)
 * that it did not go on past, after e's message. */
void adapter_criu_log_error(const char *work, const char *name, struct station_error *e);
/* The secret a checkpoint in dir holds (adapter_checkpoint()); -ENOENT naming a missing one. */
int adapter_checkpoint_secret(const char *dir, uint8_t *secret, size_t secret_len,
			      struct station_error *e);

/* Finds the seccomp profile name (a name or an absolute path) in dirs the way a request's
 * profile is found, and checks that it opens: *ret_path is its absolute path. Errors and their
 * messages as seccomp_profile_open() in seccomp.h. */
int adapter_seccomp_find(const char *const *dirs, const char *name, char **ret_path,
			 struct station_error *e);

/* Whether this worker can make size-limited HOMEs (mke2fs, loop devices); false with why in
 * msg. */
bool adapter_home_limit_probe(char *msg, size_t n);

/* Shared by the adapters: a listening unix socket at name in the directory dfd (0600, an entry
 * there replaced, a symlink never followed); the fd the agent reads its start block from
 * (proto/agent-start.h: the secret, env, and workdir unless NULL), which is how anything secret
 * or from the workspace's spec reaches the agent: never on a command line. */
int adapter_listen_unix(int dfd, const char *name);
int adapter_start_fd(const uint8_t *secret, size_t secret_len, const char *workdir,
		     char *const *env);
