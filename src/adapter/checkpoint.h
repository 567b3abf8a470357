/* SPDX-License-Identifier: MIT */
#pragma once

/* Memory snapshots (checkpoint.c; docs/operations.md "Memory snapshots"): a container
 * workspace's processes checkpointed through the OCI runtime (`runc checkpoint` / `crun
 * checkpoint`, which drive CRIU) and restored into a new workspace (`restore`). What this
 * worker can do is probed once at start (and by GET /v1/ready's "checkpoint" check): criu
 * installed and new enough, `criu check` passing on this kernel, the runtime able to
 * checkpoint a container in a user namespace. */

#include <stdbool.h>

#include "basic/error.h"

struct checkpoint_status {
	bool ok;
	/* When !ok: what is missing, in words an operator acts on ("criu is not installed
	 * (apt-get install criu)", "criu check: …", "runc 1.1.5 cannot checkpoint a container
	 * with a user namespace: …"). When ok: "criu 3.17.1 via runc". */
	char message[512];
};

/* Runs the probe (blocks: criu check and a runtime call; off the event loop). runtime: the
 * worker's runtime name or path. */
void checkpoint_probe(const char *runtime, struct checkpoint_status *ret);
