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
 * worker's runtime name or path; criu: the criu binary the runtime is to run (--criu), NULL for
 * the criu of PATH (then /usr/sbin, where Debian puts it). */
void checkpoint_probe(const char *runtime, const char *criu, struct checkpoint_status *ret);

/* What the probe found, for checkpoint_status_from() (which the unit tests call with made-up
 * facts). NULL strings: not found. */
struct checkpoint_facts {
	const char *criu_version;     /* "3.17.1"; NULL: criu not installed */
	int criu_check_status;	      /* exit status of `criu check`; -1: it did not finish */
	const char *criu_check_error; /* its first error, without criu's "Error (file:line): " */
	const char *kernel;	      /* uname -r */
	const char *runtime_name;     /* "runc", "crun", "runsc", another binary's basename */
	const char *runtime_version;  /* NULL: the runtime is missing or `--version` failed */
	bool runtime_criu;	      /* `--version` names +CRIU (crun's build feature) */
};

/* The status and the message for those facts: every missing piece named, joined by "; ". */
void checkpoint_status_from(const struct checkpoint_facts *f, struct checkpoint_status *ret);
