/* SPDX-License-Identifier: MIT */
#pragma once

/* Where a create goes when it names no worker (docs/operations.md, "Placement"): the one rule
 * the client library, the controller's "placement":"any" and both SDKs apply.
 *
 * A worker is a candidate when it answered GET /v1/worker, has room (capacity.workspaces.free
 * above 0) and is not private to another tenant (its tenant is none, or the caller's, or the
 * caller is the operator). Among candidates: the caller's own private workers first, then the
 * most workspaces free, then the most memory available, then the first listed. Libc only: each
 * side fills the entries from its own JSON. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One worker as the rule sees it, from its GET /v1/worker answer. */
struct placement_worker {
	const char *name;
	const char *error;  /* why it did not answer (or answered an error); NULL: it answered */
	const char *tenant; /* the worker's --tenant; NULL or "": shared */
	bool caller_admin;  /* the caller's scope there is admin (the operator) */
	const char *caller_tenant; /* the caller's tenant there; NULL or "": none */
	int64_t free;		   /* capacity.workspaces.free; < 0: not said */
	int64_t memory_available;  /* capacity.memoryBytes.available; < 0: not said */
};

/* Why worker w is not a candidate ("down: …", "full", "private to another tenant"), or NULL
 * when it is one. */
const char *placement_skip_reason(const struct placement_worker *w);

/* The index of the chosen worker in v[0..n), or -EAGAIN when none is a candidate, with why
 * (when set) holding "worker w1 …; worker w2 is private to another tenant; worker w3 is full"
 * cut to why_size. */
int placement_choose(const struct placement_worker *v, size_t n, char *why, size_t why_size);
