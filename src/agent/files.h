/* SPDX-License-Identifier: MIT */
#pragma once

/* File sessions (proto/file-proto.h, docs/agent-protocol.md "Files"): a connection whose first
 * frame was FILE_OPEN, with the right secret, is handed to a file worker: a child of the agent
 * that drops to the sandbox's user, serves that one operation with blocking I/O and exits. The
 * agent's loop never touches a file itself. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "proto/frame.h"

struct files_config {
	const char *root;    /* --files-root (host: the workspace's HOME), or NULL: "/" */
	const char *workdir; /* what a relative PATH is relative to */
	bool set_user;	     /* workers drop to uid:gid with no supplementary groups */
	uid_t uid;
	gid_t gid;
};

struct files_manager;

/* config is copied. before_worker (may be NULL) runs in every new worker right after the fork,
 * before anything else: it wipes what the worker must not keep of the agent's memory. */
int files_manager_new(const struct files_config *config, void (*before_worker)(void *userdata),
		      void *userdata, struct files_manager **ret);
void files_manager_free(struct files_manager *m);

/* A FILE_OPEN whose secret was checked: fd (taken) is the connection, f its first frame, rest
 * the bytes that came after it. Forks the worker, or answers FILE_ERROR EBUSY when
 * FILE_MAX_SESSIONS are alive, and closes fd either way. */
void files_manager_open(struct files_manager *m, int fd, const struct frame *f, const uint8_t *rest,
			size_t rest_len);

/* From the reaper: true when pid was a file worker (now forgotten). */
bool files_manager_child_exited(struct files_manager *m, pid_t pid);
size_t files_manager_alive(const struct files_manager *m);
