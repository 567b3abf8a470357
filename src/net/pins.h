/* SPDX-License-Identifier: MIT */
#pragma once

/* What a restricted workspace has pinned: the deadline of each address an allowed DNS answer
 * put into its nftables domain sets (nft.h), so that the controller can say how many addresses
 * are reachable now and how many went because no allowed answer came again before their
 * deadline. The kernel expires its elements on its own; this is only the count kept beside
 * them, in the same seconds, so it tells the same story.
 *
 * Keyed by address alone: an address answered under two domain rules is one address, reachable
 * until the later of its deadlines. Bounded: PINS_MAX addresses (16 bytes each, 64 KiB at
 * most) per workspace, a small part of what its domain sets may hold (65536 elements per rule)
 * but far more than a build reaches; an answer beyond the bound is still pinned in the kernel
 * and only counted in `untracked`. Expired addresses are dropped when the table is touched
 * (pins_refresh, pins_sweep), so the table holds what is pinned now and no more. */

#include <stddef.h>
#include <stdint.h>

#define PINS_MAX 4096

struct pin {
	uint32_t addr;	   /* host byte order */
	uint64_t deadline; /* usec, the clock of now_usec() */
};

struct pins {
	struct pin *v; /* sorted by address */
	size_t n, cap;
	uint64_t expired;   /* addresses whose deadline passed without a refresh */
	uint64_t untracked; /* answers not kept: the table was full */
};

/* Counts and drops the addresses whose deadline is at or before now. */
void pins_sweep(struct pins *p, uint64_t now);
/* An allowed answer named addr, pinned until deadline: its deadline becomes the later of the
 * two (a kernel element is re-added only when the new timeout is longer, nft.h). -ENOMEM; a
 * full table counts the answer in untracked and returns 0. */
int pins_refresh(struct pins *p, uint32_t addr, uint64_t deadline, uint64_t now);
/* The addresses pinned now (after pins_sweep). */
size_t pins_count(const struct pins *p);
/* Forgets every address (the domain sets were emptied: a policy applied again), keeping the
 * counts. */
void pins_clear(struct pins *p);
void pins_free(struct pins *p);
