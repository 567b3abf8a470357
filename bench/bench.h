/* SPDX-License-Identifier: MIT */
#pragma once

/* station-bench: the measuring half of `make bench` (bench/run is the other half: it starts the
 * controllers, builds the image and bundles, calls the subcommands below and tears everything
 * down).
 *
 * Every measuring subcommand appends one JSON object per table row to the results file (--out):
 *   {"id":"exec.host","unit":"ms","n":1000,"median":…,"p99":…,"min":…,"max":…,"mean":…,
 *    "extra":{…}}
 * or {"id":…,"skipped":"reason"} / {"id":…,"failed":"what went wrong"}. `report` turns that file
 * into the one table (or JSON): labels, order, ratios and budgets live there, keyed by id. */

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "station/client.h"

/* Options shared by the subcommands; each uses the ones it needs. */
struct bench_opts {
	const char *out;      /* results file (appended to) */
	const char *id;	      /* row id */
	const char *endpoint; /* controller endpoint for the client library */
	const char *token;    /* bearer token (TCP), or NULL */
	const char *workspace;
	const char *image;
	const char *runtime; /* runc, crun: the binary's name or path */
	const char *state;   /* runtime --root */
	const char *bundle;
	const char *url;	/* wrk target */
	const char *token_file; /* wrk: file holding the bearer token */
	const char *transport;	/* output: follow (default), sse or ws */
	const char *network;	/* create: the workspace's network mode; NULL: the library's
				 * create with "none" */
	const char *egress;	/* create: the egress policy (JSON) of a restricted workspace */
	bool private_mntns;	/* crun on a hybrid cgroup host */
	int runs;		/* latency samples */
	int warmup;		/* discarded samples before them */
	int reps;		/* repetitions of a throughput measurement */
	int clients;		/* concurrent clients */
	double seconds;		/* duration of one repetition */
	int count;		/* workspaces (memory) */
	uint64_t bytes;		/* output bytes */
	pid_t controller_pid;
	pid_t netns_pid;    /* preview: a process in the workspace's network namespace */
	int app_port;	    /* preview: the app's port inside it */
	bool pool;	    /* create: served from the warm pool, waited full before each sample */
	const char *root;   /* snapshot: the controller's --root (the workspace's trees for tar) */
	const char *cgroup; /* pause: the name of a freezer group of our own (the freezer alone) */
};

/* --- bench-util.c --- */

double bench_now_ms(void);

/* Sorted-sample statistics; p99 is the sample at rank ceil(0.99 n). */
struct bench_stats {
	size_t n;
	double median, p99, min, max, mean;
};
void bench_stats_compute(double *samples, size_t n, struct bench_stats *ret);

/* A row: {"id","unit",stats…,"extra"} (extra is stolen, may be NULL). */
int bench_emit(const struct bench_opts *o, const char *unit, const struct bench_stats *s,
	       json_t *extra);
int bench_emit_skip(const struct bench_opts *o, const char *reason);
int bench_emit_fail(const struct bench_opts *o, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Progress on stderr: "bench: …". */
void bench_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* A client handle on o->endpoint with o->token; logs and returns -errno on failure. */
int bench_client(const struct bench_opts *o, struct station_client **ret);

/* Runs `true` through the API with waitMs; 0 when it exited 0. */
int bench_exec_true(struct station_client *c, const char *ws);

/* posix_spawnp + waitpid of argv with stdio on /dev/null (stdout on out_fd when >= 0). Returns
 * the wait status, or -errno when the child could not be started. */
int bench_spawn_wait(char *const *argv, int out_fd);

/* unshare(CLONE_NEWNS), / private, /sys/fs/cgroup/unified detached: what the controller does
 * for each crun call on a hybrid host, done once for the whole process. */
int bench_private_mntns(void);

/* Reads "Key:   N kB" from /proc/PID/status or /proc/PID/smaps_rollup; bytes, or -errno. */
int64_t bench_proc_kb_field(pid_t pid, const char *file, const char *key);

/* --- subcommands --- */
int cmd_floor(const struct bench_opts *o);
int cmd_exec(const struct bench_opts *o);
int cmd_oci_exec(const struct bench_opts *o);
int cmd_oci_run(const struct bench_opts *o);
int cmd_create(const struct bench_opts *o);
/* --clients N creates at once (default 20) beside one alone; also the row "api.burst". */
int cmd_create_burst(const struct bench_opts *o);
int cmd_rate(const struct bench_opts *o);
int cmd_spawn_rate(const struct bench_opts *o);
int cmd_memory(const struct bench_opts *o);
int cmd_output(const struct bench_opts *o);
int cmd_polls(const struct bench_opts *o);
int cmd_oci_clean(const struct bench_opts *o);
/* A preview URL (--url) against a direct connection inside the namespace (bench-preview.c). */
int cmd_preview(const struct bench_opts *o);
/* Pause/resume, snapshot against tar, fork against a snapshot and creates (bench-snapshot.c). */
int cmd_pause(const struct bench_opts *o);
int cmd_snapshot(const struct bench_opts *o);
int cmd_fork(const struct bench_opts *o);
int cmd_command(const struct bench_opts *o, char **argv); /* times argv (after "--") */
int cmd_report(int argc, char **argv);
