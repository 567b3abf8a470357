/* SPDX-License-Identifier: MIT */
#pragma once

/* Where a workspace's agent runs. One ops table per adapter: host.c now, container.c next.
 * Setup happens in steps; teardown is idempotent and removes whatever exists. */

#include <stdint.h>
#include <sys/types.h>

#include "basic/error.h"

struct cgroup;

struct adapter_workspace {
	const char *id;
	const char *dir;            /* <root>/workspaces/<id> */
	const struct cgroup *cgroup; /* the workspace cgroup, created by the caller */
	char *const *env;           /* KEY=VALUE, NULL-terminated; may be NULL */
	const char *agent_path;
};

struct adapter_ops {
	const char *name;
	/* Makes the workspace's directories (existing ones are kept: HOME persists). */
	int (*prepare)(const struct adapter_workspace *ws, struct station_error *e);
	/* Starts the agent with a fresh listening socket at <dir>/run/agent.sock and the secret
	 * through an inherited pipe. The agent outlives the controller. */
	int (*start_agent)(const struct adapter_workspace *ws, const uint8_t *secret,
			   size_t secret_len, pid_t *ret_pid, struct station_error *e);
	/* Removes the directories. The caller has already destroyed the cgroup. */
	int (*remove)(const struct adapter_workspace *ws, struct station_error *e);
	/* Paths the API shows. */
	const char *home_subdir;    /* relative to dir: "home" */
	const char *workdir_subdir; /* relative to dir: "home/workspace" */
};

extern const struct adapter_ops adapter_host;

const struct adapter_ops *adapter_find(const char *name);
