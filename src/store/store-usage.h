/* SPDX-License-Identifier: MIT */
#pragma once

/* Usage history (store-usage.c; schema/0015-usage.sql): one row per workspace per sample, and
 * the worker's totals, kept 24 h (docs/operations.md, "Usage history"). Times here are
 * CLOCK_REALTIME milliseconds. */

#include <stddef.h>
#include <stdint.h>

struct store;

/* What was used in the span_ms before ts_ms (cpu_usec, rx_bytes, tx_bytes: deltas), the memory
 * in use (mem_bytes the average over the span, mem_max the largest) and pids at its end (the
 * largest, once merged). */
struct usage_sample {
	uint64_t ts_ms;
	uint64_t span_ms;
	uint64_t cpu_usec;
	uint64_t mem_bytes;
	uint64_t mem_max;
	uint64_t pids;
	uint64_t rx_bytes;
	uint64_t tx_bytes;
};

/* One tick, in one transaction: samples[i] of ws_ids[i], and the worker's row (workspaces: how
 * many were summed into it). */
int store_usage_insert(struct store *s, const char *const *ws_ids,
		       const struct usage_sample *samples, size_t n,
		       const struct usage_sample *worker, uint64_t workspaces);

/* The samples since since_ms in buckets of step_ms (bucket k covers [k*step, (k+1)*step);
 * ts_ms of each point is its bucket's start, span_ms the time its rows cover, cpu_usec,
 * rx_bytes, tx_bytes their sums, mem_bytes the span-weighted average, mem_max and pids the
 * largest), oldest first, at most max points (the newest). ws_id: that workspace's; NULL with
 * tenant NULL: the worker's totals; NULL with tenant: the sum over the workspaces of that
 * tenant ("" the operator's) that exist now. *ret is malloc'd. */
int store_usage_query(struct store *s, const char *ws_id, const char *tenant, uint64_t since_ms,
		      uint64_t step_ms, size_t max, struct usage_sample **ret, size_t *ret_n);

struct usage_prune_stats {
	uint64_t expired; /* rows deleted for their age */
	uint64_t capped;  /* rows deleted to stay within max_rows */
	uint64_t rows;	  /* usage_samples rows left (counted when max_rows is given) */
};

/* The retention pass, in bounded steps, each one transaction (so that the loop that samples
 * never waits long): rows in [from_ms, before_ms) that are not minute rows become one row per
 * series and minute (its end's ts, a multiple of 60 000; added to a minute row that stands
 * there; rows of a workspace that no longer exists dropped). */
int store_usage_merge(struct store *s, uint64_t from_ms, uint64_t before_ms, uint64_t *ret_merged);
/* Rows before before_ms deleted; then, with max_rows, when usage_samples holds more than that
 * the oldest go until it holds 9/10 of it (usage_worker: max_rows / 100, at least 10 000). */
int store_usage_expire(struct store *s, uint64_t before_ms, uint64_t max_rows,
		       struct usage_prune_stats *ret);
/* The oldest row's ts in either table, 0 when both are empty. */
int store_usage_oldest(struct store *s, uint64_t *ret);
