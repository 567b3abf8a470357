/* SPDX-License-Identifier: MIT */
/* station-bench report FILE [--json] [--wall SECONDS] [--settings TEXT]: the one table (or the
 * same as JSON) from the rows the measuring subcommands wrote. Labels, order, same-run ratios
 * and the DESIGN §11 budget verdicts are defined here, by row id. */

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statfs.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "bench.h"

#define CGROUP2_MAGIC 0x63677270

struct verdict {
	char text[160];
	int met; /* 1 met, 0 not met, -1 no budget */
};

struct row_spec;
typedef void (*budget_fn)(const struct row_spec *spec, json_t *row, json_t *ref,
			  struct verdict *ret);

struct row_spec {
	const char *id;
	const char *group; /* printed above the first row of its group */
	const char *label;
	const char *ref;      /* the same-run reference for the ratio, or NULL */
	const char *ref_name; /* how the ratio names it */
	bool inverse; /* ratio is this/ref (slower baseline) rather than ref… see ratio() */
	budget_fn budget;
};

static double num(json_t *row, const char *key)
{
	json_t *v = json_object_get(row, key);
	return json_is_number(v) ? json_number_value(v) : NAN;
}

static double extra(json_t *row, const char *key)
{
	return num(json_object_get(row, "extra"), key);
}

static const char *yes(bool met)
{
	return met ? "met" : "NOT met";
}

static void budget_exec(const struct row_spec *s, json_t *row, json_t *ref, struct verdict *v)
{
	double ratio = num(row, "median") / num(ref, "median"), p99 = num(row, "p99");
	if (!ref || isnan(ratio)) {
		v->met = -1;
		snprintf(v->text, sizeof v->text, "p50 <= 1.3x floor, p99 <= 3 ms: no result");
		return;
	}
	v->met = ratio <= 1.3 && p99 <= 3;
	snprintf(v->text, sizeof v->text, "p50 <= 1.3x floor, p99 <= 3 ms: %s", yes(v->met));
}

static void budget_faster(const struct row_spec *s, json_t *row, json_t *ref, struct verdict *v,
			  double factor)
{
	double ratio = num(row, "median") / num(ref, "median");
	if (!ref || isnan(ratio)) {
		v->met = -1;
		snprintf(v->text, sizeof v->text, "ours >= %gx faster: no result", factor);
		return;
	}
	v->met = ratio >= factor;
	snprintf(v->text, sizeof v->text, "ours >= %gx faster: %s", factor, yes(v->met));
}

static void budget_runc(const struct row_spec *s, json_t *row, json_t *ref, struct verdict *v)
{
	budget_faster(s, row, ref, v, 20);
}

static void budget_crun(const struct row_spec *s, json_t *row, json_t *ref, struct verdict *v)
{
	budget_faster(s, row, ref, v, 6);
}

/* `station-sandbox exec WS -- true` as a whole process. */
static void budget_cli(const struct row_spec *s, json_t *row, json_t *ref, struct verdict *v)
{
	v->met = num(row, "median") <= 2;
	snprintf(v->text, sizeof v->text, "p50 <= 2 ms: %s", yes(v->met));
}

static void budget_cli_crun(const struct row_spec *s, json_t *row, json_t *ref, struct verdict *v)
{
	budget_faster(s, row, ref, v, 2.5);
}

static void budget_cli_docker(const struct row_spec *s, json_t *row, json_t *ref, struct verdict *v)
{
	budget_faster(s, row, ref, v, 50);
}

static void budget_create(const struct row_spec *s, json_t *row, json_t *ref, struct verdict *v)
{
	double ratio = num(row, "median") / num(ref, "median");
	if (!ref || isnan(ratio)) {
		v->met = -1;
		snprintf(v->text, sizeof v->text, "<= 1.3x %s: no result", s->ref_name);
		return;
	}
	v->met = ratio <= 1.3;
	snprintf(v->text, sizeof v->text, "<= 1.3x %s: %s", s->ref_name, yes(v->met));
}

/* DESIGN §11: from the warm pool ≤ 5 ms, whatever `runtime run` costs. */
static void budget_pool(const struct row_spec *s, json_t *row, json_t *ref, struct verdict *v)
{
	v->met = num(row, "median") <= 5;
	snprintf(v->text, sizeof v->text, "p50 <= 5 ms: %s", yes(v->met));
}

static void budget_rate(const struct row_spec *s, json_t *row, json_t *ref, struct verdict *v)
{
	v->met = num(row, "median") >= 2000;
	snprintf(v->text, sizeof v->text, ">= 2,000/s: %s", yes(v->met));
}

static void budget_mem(const struct row_spec *s, json_t *row, json_t *ref, struct verdict *v)
{
	v->met = num(row, "mean") <= 1024;
	snprintf(v->text, sizeof v->text, "mean <= 1 MiB: %s", yes(v->met));
}

static void budget_mem_system(const struct row_spec *s, json_t *row, json_t *ref, struct verdict *v)
{
	if (num(row, "median") < 0) { /* other work freed memory meanwhile: no verdict */
		v->met = -1;
		snprintf(v->text, sizeof v->text, "<= 1 MiB: no result");
		return;
	}
	v->met = num(row, "median") <= 1024;
	snprintf(v->text, sizeof v->text, "<= 1 MiB: %s", yes(v->met));
}

static void budget_controller(const struct row_spec *s, json_t *row, json_t *ref, struct verdict *v)
{
	double n = extra(row, "workspaces");
	if (n >= 1000) {
		v->met = num(row, "median") <= 100;
		snprintf(v->text, sizeof v->text, "<= 100 MiB with 1,000: %s", yes(v->met));
		return;
	}
	double x = extra(row, "extrapolated1000MiB");
	v->met = x <= 100;
	snprintf(v->text, sizeof v->text, "<= 100 MiB at 1,000 (extrapolated %.0f): %s", x,
		 yes(v->met));
}

/* Through the client library, with nothing lost when the client keeps up. */
static void budget_output(const struct row_spec *s, json_t *row, json_t *ref, struct verdict *v)
{
	double gap = extra(row, "gapFractionMax");

	v->met = num(row, "median") >= 1000 && gap == 0;
	snprintf(v->text, sizeof v->text, ">= 1 GB/s, no gap: %s", yes(v->met));
}

/* The last of the burst within 8x one create alone, same run (creates run side by side). */
static void budget_burst(const struct row_spec *s, json_t *row, json_t *ref, struct verdict *v)
{
	double last = extra(row, "lastRatio");
	if (isnan(last)) {
		v->met = -1;
		snprintf(v->text, sizeof v->text, "last <= 8x one alone: no result");
		return;
	}
	v->met = last <= 8;
	snprintf(v->text, sizeof v->text, "last <= 8x one alone: %s", yes(v->met));
}

/* The loop stays free while creates run. */
static void budget_api_burst(const struct row_spec *s, json_t *row, json_t *ref, struct verdict *v)
{
	v->met = num(row, "p99") <= 5;
	snprintf(v->text, sizeof v->text, "p99 <= 5 ms: %s", yes(v->met));
}

/* DESIGN §11: a request through a preview URL adds at most 0.3 ms to the p50 of the same
 * request on a direct connection into the workspace's namespace (same run, same client). */
static void budget_preview_rtt(const struct row_spec *s, json_t *row, json_t *ref,
			       struct verdict *v)
{
	double added = num(row, "median") - num(ref, "median");
	if (!ref || isnan(added)) {
		v->met = -1;
		snprintf(v->text, sizeof v->text, "added p50 <= 0.3 ms: no result");
		return;
	}
	v->met = added <= 0.3;
	snprintf(v->text, sizeof v->text, "added p50 <= 0.3 ms: %s", yes(v->met));
}

/* …and keeps at least 0.8x the direct connection's throughput. */
static void budget_preview_rate(const struct row_spec *s, json_t *row, json_t *ref,
				struct verdict *v)
{
	double ratio = num(row, "median") / num(ref, "median");
	if (!ref || isnan(ratio)) {
		v->met = -1;
		snprintf(v->text, sizeof v->text, ">= 0.8x direct: no result");
		return;
	}
	v->met = ratio >= 0.8;
	snprintf(v->text, sizeof v->text, ">= 0.8x direct: %s", yes(v->met));
}

/* DESIGN §11: pause and resume of a workspace running 100 processes, p50 <= 10 ms each. */
static void budget_pause(const struct row_spec *s, json_t *row, json_t *ref, struct verdict *v)
{
	v->met = num(row, "median") <= 10;
	snprintf(v->text, sizeof v->text, "p50 <= 10 ms: %s", yes(v->met));
}

/* DESIGN §11: a snapshot <= 1.2x `tar` of the same tree; a fork of 10 <= 1.2x 10 creates plus
 * one snapshot. */
static void budget_within_1_2(const struct row_spec *s, json_t *row, json_t *ref, struct verdict *v)
{
	double ratio = num(row, "median") / num(ref, "median");
	if (!ref || isnan(ratio)) {
		v->met = -1;
		snprintf(v->text, sizeof v->text, "<= 1.2x %s: no result", s->ref_name);
		return;
	}
	v->met = ratio <= 1.2;
	snprintf(v->text, sizeof v->text, "<= 1.2x %s: %s", s->ref_name, yes(v->met));
}

#define G_EXEC "exec round trip of `true`, client → result"
#define G_CLI "`station-sandbox exec WS -- true` as a whole process (spawn → exit 0)"
#define G_CREATE "workspace create → first exec possible (network none)"
#define G_BURST "20 container creates at once (runc, network none), each to its first exec"
#define G_NET "workspace create → first exec by network mode (runc, one controller)"
#define G_NETEXEC                                                                                  \
	"exec round trip of `true` by network mode (runc, one controller: bridge and restricted "  \
	"add the run's denial bookkeeping)"
#define G_RATE "execs per second, one host workspace, N clients (one handle each)"
#define G_MEM "idle host workspaces, all held at once"
#define G_CODE                                                                                      \
	"code contexts, host workspace: a cell `1+1` to its result and a context's start, through " \
	"the API against a bare jupyter_client client of a python3 ipykernel it started"
#define G_USAGE "usage history: one 5 s tick of the sampler, --workspaces idle cgroups (CPU ms)"
#define G_CMEM "idle container workspaces (busybox, runc, network none), all held at once"
#define G_OUT "output streamed to a client: head -c N /dev/zero"
#define G_POLL "API status polls: GET of a finished run"
#define G_PREVIEW                                                                                  \
	"a request through a preview URL (public, container workspace, network none) against a "   \
	"direct connection to the app inside the workspace's namespace: same client, in turns"
#define G_PAUSE                                                                                    \
	"pause and resume of a container workspace running 100 sleeping processes (runc), beside " \
	"the freezer alone on 100 sleeps, in turns"
#define G_SNAP                                                                                     \
	"a snapshot (POST …/snapshots, without memory) against `tar cf` of the same trees (the " \
	"overlay's upper and HOME), in turns"
#define G_FORK                                                                                        \
	"fork of 10 (POST …/fork, each new workspace to its first exec) against the same by hand: " \
	"one snapshot, then 10 creates from it at once"

/* The ratio shown is this median / the ref's median: "2.41x floor"; for a baseline slower than
 * us (inverse) the same number reads "ours/ctr 14.0x faster" (ours = the container workspace). */
static const struct row_spec specs[] = {
	{ "exec.floor", G_EXEC, "floor: posix_spawn + wait of /bin/sh -c true" },
	{ "exec.host", G_EXEC, "ours: host workspace (API, keep-alive)", "exec.floor", "floor",
	  false, budget_exec },
	{ "exec.container", G_EXEC, "ours: container workspace (busybox, runc)", "exec.floor",
	  "floor", false, budget_exec },
	{ "exec.runc", G_EXEC, "runc exec into a running busybox container", "exec.container",
	  "ours/ctr", true, budget_runc },
	{ "exec.crun", G_EXEC, "crun exec into a running busybox container", "exec.container",
	  "ours/ctr", true, budget_crun },
	{ "exec.podman", G_EXEC, "podman exec into a running busybox container", "exec.container",
	  "ours/ctr", true },
	{ "cli.host", G_CLI, "ours: host workspace (unix socket)", "exec.floor", "floor", false,
	  budget_cli },
	{ "cli.container", G_CLI, "ours: container workspace (busybox, runc)", "exec.floor",
	  "floor", false, budget_cli },
	{ "cli.runc", G_CLI, "runc exec (the exec.runc row)", "cli.container", "ours/ctr", true },
	{ "cli.crun", G_CLI, "crun exec (the exec.crun row)", "cli.container", "ours/ctr", true,
	  budget_cli_crun },
	{ "cli.podman", G_CLI, "podman exec (the exec.podman row)", "cli.container", "ours/ctr",
	  true, budget_cli_docker },
	{ "cli.docker", G_CLI, "docker exec into a running busybox container", "cli.container",
	  "ours/ctr", true, budget_cli_docker },
	{ "create.runc", G_CREATE, "ours, runc: create + first `true`", "run.runc", "runc run",
	  false, budget_create },
	{ "run.runc", G_CREATE, "runc run /bin/true, same image and config" },
	{ "create.crun", G_CREATE, "ours, crun: create + first `true`", "run.crun", "crun run",
	  false, budget_create },
	{ "run.crun", G_CREATE, "crun run /bin/true, same image and config" },
	{ "create.pool", G_CREATE, "ours, runc: create from the warm pool + first `true`",
	  "run.runc", "runc run", false, budget_pool },
	{ "create.burst", G_BURST, "ours: start of the burst → each first exec", NULL, NULL, false,
	  budget_burst },
	{ "api.burst", G_BURST, "ours: GET /v1/workspaces while the burst runs", NULL, NULL, false,
	  budget_api_burst },
	{ "net.none", G_NET, "ours: network none" },
	{ "net.bridge", G_NET, "ours: network bridge", "net.none", "none" },
	{ "net.restricted", G_NET, "ours: network restricted (2-rule policy)", "net.none", "none" },
	{ "net.ip", G_NET, "`ip`: netns, veth, port, address, route" },
	{ "netexec.none", G_NETEXEC, "ours: network none (no bookkeeping)" },
	{ "netexec.bridge", G_NETEXEC, "ours: network bridge", "netexec.none", "none" },
	{ "netexec.restricted", G_NETEXEC, "ours: network restricted (2-rule policy)",
	  "netexec.none", "none" },
	{ "rate.floor", G_RATE, "floor: 16 threads, posix_spawn + wait of /bin/sh" },
	{ "rate.1", G_RATE, "1 client" },
	{ "rate.4", G_RATE, "4 clients", "rate.1", "1 client" },
	{ "rate.16", G_RATE, "16 clients", "rate.1", "1 client", false, budget_rate },
	{ "mem.cgroup", G_MEM, "per workspace: cgroup memory minus page cache", NULL, NULL, false,
	  budget_mem },
	{ "mem.agent", G_MEM, "per workspace: agent RSS (/proc)" },
	{ "mem.system", G_MEM, "per workspace: host used-memory delta / count", NULL, NULL, false,
	  budget_mem_system },
	{ "mem.controller", G_MEM, "controller RSS with them", NULL, NULL, false,
	  budget_controller },
	{ "mem.scrape", G_MEM, "GET /metrics with them, ms" },
	{ "cmem.cgroup", G_CMEM, "per workspace: cgroup memory minus page cache", NULL, NULL, false,
	  budget_mem },
	{ "cmem.agent", G_CMEM, "per workspace: agent RSS (/proc)" },
	{ "cmem.system", G_CMEM, "per workspace: host used-memory delta / count", NULL, NULL, false,
	  budget_mem_system },
	{ "cmem.controller", G_CMEM, "controller RSS with them", NULL, NULL, false,
	  budget_controller },
	{ "cmem.scrape", G_CMEM, "GET /metrics with them, ms" },
	{ "cmem.exec", G_CMEM, "exec `true` into the last one created", "exec.floor", "floor",
	  false, budget_exec },
	{ "output.follow", G_OUT, "station_run_follow (WebSocket), MB/s delivered", NULL, NULL,
	  false, budget_output },
	{ "output.ws", G_OUT, "WebSocket, minimal reader, MB/s delivered", "output.follow",
	  "library" },
	{ "output.sse", G_OUT, "SSE (curl users), minimal reader, MB/s", "output.follow",
	  "library" },
	{ "polls.wrk", G_POLL, "wrk, 64 connections, TCP + bearer token" },
	{ "preview.rtt.direct", G_PREVIEW, "direct: GET / round trip (keep-alive)" },
	{ "preview.rtt", G_PREVIEW, "preview: GET / round trip (keep-alive)", "preview.rtt.direct",
	  "direct", false, budget_preview_rtt },
	{ "preview.down.direct", G_PREVIEW, "direct: GET /bytes, MB/s" },
	{ "preview.down", G_PREVIEW, "preview: GET /bytes, MB/s", "preview.down.direct", "direct",
	  false, budget_preview_rate },
	{ "preview.up.direct", G_PREVIEW, "direct: POST /sink, MB/s" },
	{ "preview.up", G_PREVIEW, "preview: POST /sink, MB/s", "preview.up.direct", "direct",
	  false, budget_preview_rate },
	{ "snapshot.pause.bare", G_PAUSE, "the freezer alone: freeze 100 sleeps" },
	{ "snapshot.pause", G_PAUSE, "ours: POST /v1/workspaces/{id}/pause", "exec.floor", "floor",
	  false, budget_pause },
	{ "snapshot.resume.bare", G_PAUSE, "the freezer alone: thaw them" },
	{ "snapshot.resume", G_PAUSE, "ours: POST /v1/workspaces/{id}/resume", "exec.floor",
	  "floor", false, budget_pause },
	{ "snapshot.small.tar", G_SNAP, "`tar cf` of the trees, 10 MiB in HOME" },
	{ "snapshot.small.tarsync", G_SNAP, "`tar cf` + fsync of the archive, 10 MiB" },
	{ "snapshot.small", G_SNAP, "ours: snapshot, 10 MiB in HOME", "snapshot.small.tar", "tar",
	  false, budget_within_1_2 },
	{ "snapshot.small.durable", G_SNAP, "ours: the same until durable, 10 MiB",
	  "snapshot.small.tarsync", "tar + fsync" },
	{ "snapshot.big.tar", G_SNAP, "`tar cf` of the trees, --bytes in HOME" },
	{ "snapshot.big.tarsync", G_SNAP, "`tar cf` + fsync of the archive, --bytes" },
	{ "snapshot.big", G_SNAP, "ours: snapshot, --bytes in HOME", "snapshot.big.tar", "tar",
	  false, budget_within_1_2 },
	{ "snapshot.big.durable", G_SNAP, "ours: the same until durable, --bytes",
	  "snapshot.big.tarsync", "tar + fsync" },
	{ "snapshot.fork.base", G_FORK, "by hand: snapshot + 10 creates from it" },
	{ "snapshot.fork", G_FORK, "ours: fork of 10", "snapshot.fork.base", "by hand", false,
	  budget_within_1_2 },
	{ "snapshot.fork.paused", G_FORK, "ours: the source paused during the fork" },
	{ "usage.sample", G_USAGE, "read every group's open files + one transaction of rows" },
	{ "code.rtt.bare", G_CODE, "bare: jupyter_client execute → reply" },
	{ "code.rtt", G_CODE, "ours: POST …/execute?waitMs, python", "code.rtt.bare", "bare" },
	{ "code.rtt.js", G_CODE, "ours: the same, javascript", "code.rtt.bare", "bare" },
	{ "code.start.bare", G_CODE, "bare: KernelManager start → ready" },
	{ "code.start", G_CODE, "ours: POST …/contexts → 201, python", "code.start.bare", "bare" },
	{ "code.start.js", G_CODE, "ours: the same, javascript", "code.start.bare", "bare" },
};

/* --- machine --- */

static void first_line(const char *cmd, char *buf, size_t size)
{
	FILE *p = popen(cmd, "r");
	buf[0] = '\0';
	if (p) {
		if (!fgets(buf, (int)size, p))
			buf[0] = '\0';
		pclose(p);
	}
	buf[strcspn(buf, "\n")] = '\0';
}

static const char *cgroup_layout(void)
{
	struct statfs root, unified;
	if (statfs("/sys/fs/cgroup", &root) < 0)
		return "none";
	if ((unsigned long)root.f_type == CGROUP2_MAGIC)
		return "v2";
	if (statfs("/sys/fs/cgroup/unified", &unified) == 0 &&
	    (unsigned long)unified.f_type == CGROUP2_MAGIC)
		return "hybrid (v1 controllers + v2 at /sys/fs/cgroup/unified)";
	return "v1";
}

static json_t *machine(void)
{
	struct utsname u;
	char cpu[256] = "", runc[128], crun[128], mem[64] = "";
	FILE *f = fopen("/proc/cpuinfo", "re");
	char line[512];
	while (f && fgets(line, sizeof line, f))
		if (strncmp(line, "model name", 10) == 0) {
			snprintf(cpu, sizeof cpu, "%s", strchr(line, ':') + 2);
			cpu[strcspn(cpu, "\n")] = '\0';
			break;
		}
	if (f)
		fclose(f);
	uname(&u);
	first_line("runc --version 2>/dev/null", runc, sizeof runc);
	first_line("crun --version 2>/dev/null", crun, sizeof crun);
	double gib = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE) / (1 << 30);
	snprintf(mem, sizeof mem, "%.1f GiB", gib);
	return json_pack("{sI ss ss ss ss ss ss ss}", "nproc",
			 (json_int_t)sysconf(_SC_NPROCESSORS_ONLN), "cpu", cpu, "memory", mem,
			 "kernel", u.release, "arch", u.machine, "cgroup", cgroup_layout(), "runc",
			 runc[0] ? runc : "not installed", "crun",
			 crun[0] ? crun : "not installed");
}

/* --- rows --- */

static json_t *load_rows(const char *path)
{
	FILE *f = fopen(path, "re");
	json_t *rows = json_object();
	char *line = NULL;
	size_t cap = 0;
	if (!f) {
		fprintf(stderr, "station-bench report: %s: %s\n", path, strerror(errno));
		json_decref(rows);
		return NULL;
	}
	while (getline(&line, &cap, f) > 0) {
		json_t *row = json_loads(line, 0, NULL);
		const char *id = json_string_value(json_object_get(row, "id"));
		if (id)
			json_object_set(rows, id, row); /* the last row of an id wins */
		json_decref(row);
	}
	free(line);
	fclose(f);
	return rows;
}

static const struct row_spec *spec_of(const char *id)
{
	for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++)
		if (strcmp(specs[i].id, id) == 0)
			return &specs[i];
	return NULL;
}

/* The ratio text, or "" when there is none. */
static double ratio(const struct row_spec *s, json_t *row, json_t *ref, char *buf, size_t size)
{
	double r = ref ? num(row, "median") / num(ref, "median") : NAN;
	buf[0] = '\0';
	if (isnan(r) || isinf(r))
		return NAN;
	if (s->inverse)
		snprintf(buf, size, "%s %.1fx faster", s->ref_name, r);
	else
		snprintf(buf, size, "%.2fx %s", r, s->ref_name);
	return r;
}

static void fmt_value(double v, const char *unit, char *buf, size_t size)
{
	if (isnan(v))
		snprintf(buf, size, "—");
	else if (strcmp(unit, "ms") == 0)
		snprintf(buf, size, v < 10 ? "%.2f" : v < 100 ? "%.1f" : "%.0f", v);
	else if (strcmp(unit, "MiB") == 0)
		snprintf(buf, size, "%.1f", v);
	else
		snprintf(buf, size, "%.0f", v);
}

static void fmt_cell(double v, const char *unit, char *buf, size_t size)
{
	char n[24];
	fmt_value(v, unit, n, sizeof n);
	if (isnan(v))
		snprintf(buf, size, "—");
	else
		snprintf(buf, size, "%s %s", n, unit);
}

static bool measured_row(json_t *row)
{
	return row && !json_object_get(row, "skipped") && !json_object_get(row, "failed");
}

/* Notes beside the ratio for rows whose extra matters to a reader. rows: every row, by id. */
static void row_note(const char *id, json_t *row, json_t *rows, char *buf, size_t size)
{
	buf[0] = '\0';
	const char *m = strncmp(id, "mem.", 4) == 0  ? id + 4 :
			strncmp(id, "cmem.", 5) == 0 ? id + 5 :
						       NULL;
	if (m && (strcmp(m, "cgroup") == 0 || strcmp(m, "agent") == 0))
		snprintf(buf, size, "mean %.0f KiB", num(row, "mean"));
	if (m && strcmp(m, "cgroup") == 0)
		snprintf(buf, size, "mean %.0f KiB (kernel %.0f); create %.0f ms, delete %.0f ms",
			 num(row, "mean"), extra(row, "kmemMedianKiB"),
			 extra(row, "createMedianMs"), extra(row, "deleteMedianMs"));
	if (m && strcmp(m, "agent") == 0)
		snprintf(buf, size, "mean %.0f, PSS mean %.0f KiB", num(row, "mean"),
			 extra(row, "pssMeanKiB"));
	if (m && strcmp(m, "system") == 0 && !isnan(extra(row, "memcgsPerWorkspace"))) {
		/* the drivers of the kernel's share (bench-memory.c, .system) */
		int n = snprintf(buf, size, "memory cgroups +%.1f/ws (%.0f on the host)",
				 extra(row, "memcgsPerWorkspace"), extra(row, "memcgsAfter"));
		if (!isnan(extra(row, "kmalloc1kKiBPerWorkspace")) && n > 0 && (size_t)n < size)
			snprintf(buf + n, size - (size_t)n, "; kmalloc-1k +%.0f KiB/ws",
				 extra(row, "kmalloc1kKiBPerWorkspace"));
	}
	if (m && strcmp(m, "controller") == 0)
		snprintf(buf, size, "%.1f MiB before, +%.1f KiB/ws", extra(row, "rssBeforeMiB"),
			 extra(row, "perWorkspaceKiB"));
	if (m && strcmp(m, "scrape") == 0)
		snprintf(buf, size, "%.0f KiB, %.0f series, %.0f workspaces",
			 extra(row, "bytes") / 1024, extra(row, "series"),
			 extra(row, "workspaces"));
	if (strncmp(id, "output.", 7) == 0)
		snprintf(buf, size, "%.1f%% lost to gaps; producer %.0f MB/s",
			 100 * extra(row, "gapFractionMedian"), extra(row, "producerMBsMedian"));
	if (strcmp(id, "polls.wrk") == 0 || strncmp(id, "rate.", 5) == 0) {
		int n = snprintf(buf, size, "latency p50 %.2f p99 %.2f ms",
				 extra(row, "latencyP50Ms"), extra(row, "latencyP99Ms"));
		/* The 16-client rate beside what the machine spawns from 16 threads, same run. */
		json_t *floor = json_object_get(rows, "rate.floor");
		if (strcmp(id, "rate.16") == 0 && measured_row(floor) && num(floor, "median") > 0 &&
		    n > 0 && (size_t)n < size)
			snprintf(buf + n, size - (size_t)n,
				 "; %.2fx the floor rate (%.0f spawns/s)",
				 num(row, "median") / num(floor, "median"), num(floor, "median"));
	}
	if (strcmp(id, "net.bridge") == 0 || strcmp(id, "net.restricted") == 0) {
		/* What the network adds to a create, beside the same kernel steps done with `ip`. */
		json_t *none = json_object_get(rows, "net.none"),
		       *ip = json_object_get(rows, "net.ip");
		double cost = num(row, "median") - num(none, "median");
		if (measured_row(none) && measured_row(ip))
			snprintf(buf, size,
				 "network cost over none %.1f ms = %.2fx the `ip` script", cost,
				 cost / num(ip, "median"));
		else if (measured_row(none))
			snprintf(buf, size, "network cost over none %.1f ms", cost);
		return;
	}
	if (strcmp(id, "net.ip") == 0) {
		snprintf(buf, size,
			 "one shell script of 7 `ip` calls, as a whole; no nftables, no resolver");
		return;
	}
	if (strcmp(id, "create.burst") == 0) {
		int k = snprintf(buf, size, "one alone %.0f ms; median %.2fx, last %.2fx one alone",
				 extra(row, "singleMs"), extra(row, "medianRatio"),
				 extra(row, "lastRatio"));
		/* The machine's busy CPU per create, alone and in the burst, and what that
		 * allows: the burst cannot end sooner than creates x CPU of one / cores. */
		if (!isnan(extra(row, "cpuFloorRatio")) && k > 0 && (size_t)k < size)
			snprintf(
				buf + k, size - (size_t)k,
				"\n      CPU per create (whole machine) %.0f ms alone, %.0f ms in the burst: %d cores "
				"cannot end the burst before %.2fx one alone; last at %.2fx that floor",
				extra(row, "singleCpuMs"), extra(row, "burstCpuMsPerCreate"),
				(int)extra(row, "cores"), extra(row, "cpuFloorRatio"),
				extra(row, "lastToCpuFloor"));
		return;
	}
	if (strcmp(id, "preview.rtt") == 0) {
		snprintf(buf, size, "added p50 %.3f ms, p99 %.3f ms", extra(row, "addedP50Ms"),
			 extra(row, "addedP99Ms"));
		return;
	}
	if (strcmp(id, "preview.down") == 0 || strcmp(id, "preview.up") == 0) {
		/* What the proxy costs, and the rate that cost allows on a core of its own. */
		double cpu = extra(row, "controllerCpuMsPerGiB");
		int n = snprintf(buf, size, "%.0f MiB per transfer",
				 extra(row, "bytes") / (1 << 20));
		if (!isnan(cpu) && cpu > 0 && n > 0 && (size_t)n < size)
			snprintf(buf + n, size - (size_t)n,
				 "; controller CPU %.0f ms per GiB through it (one core's worth: "
				 "%.0f MB/s)",
				 cpu, (double)(1ull << 30) / 1e3 / cpu);
		return;
	}
	if (strcmp(id, "snapshot.pause") == 0 || strcmp(id, "snapshot.resume") == 0) {
		/* What we add to the kernel's own freeze or thaw of the same number of processes. */
		char bare_id[32];
		snprintf(bare_id, sizeof bare_id, "%s.bare", id);
		json_t *bare = json_object_get(rows, bare_id);
		int n = snprintf(buf, size, "%.0f processes", extra(row, "processes"));
		if (measured_row(bare) && n > 0 && (size_t)n < size)
			snprintf(buf + n, size - (size_t)n,
				 "; the freezer alone p50 %.2f ms (%s): ours adds %.2f ms",
				 num(bare, "median"),
				 json_string_value(json_object_get(json_object_get(bare, "extra"),
								   "freezer")),
				 num(row, "median") - num(bare, "median"));
		return;
	}
	if (strcmp(id, "snapshot.small") == 0 || strcmp(id, "snapshot.big") == 0) {
		/* Against the archive made durable too (ID.durable is that row's own). */
		char sync_id[32];
		snprintf(sync_id, sizeof sync_id, "%s.tarsync", id);
		json_t *ts = json_object_get(rows, sync_id);
		int n = snprintf(buf, size,
				 "%.0f MiB in HOME, layer %.1f MiB; source paused p50 %.0f ms",
				 extra(row, "bytes") / (1 << 20),
				 extra(row, "sizeBytes") / (1 << 20), extra(row, "pausedMedianMs"));
		if (measured_row(ts) && n > 0 && (size_t)n < size)
			snprintf(buf + n, size - (size_t)n, "; %.2fx tar + fsync",
				 num(row, "median") / num(ts, "median"));
		return;
	}
	if (strcmp(id, "snapshot.fork.base") == 0) {
		snprintf(buf, size, "its snapshot p50 %.0f ms", extra(row, "snapshotMedianMs"));
		return;
	}
	if (strcmp(id, "snapshot.fork.paused") == 0) {
		snprintf(buf, size, "the snapshot by hand paused it p50 %.0f ms",
			 extra(row, "snapshotPausedMedianMs"));
		return;
	}
	if (strcmp(id, "api.burst") == 0) {
		snprintf(buf, size, "%.0f requests failed", extra(row, "failed"));
		return;
	}
	if (strcmp(id, "create.pool") == 0) {
		json_t *crun = json_object_get(rows, "run.crun");
		int n = snprintf(buf, size, "create alone %.2f ms; a second exec %.2f ms",
				 extra(row, "createMedianMs"), extra(row, "secondExecMedianMs"));
		if (measured_row(crun) && n > 0 && (size_t)n < size)
			snprintf(buf + n, size - (size_t)n, "; %.3fx crun run",
				 num(row, "median") / num(crun, "median"));
		return;
	}
	if (strncmp(id, "create.", 7) == 0 || strncmp(id, "net.", 4) == 0)
		snprintf(buf, size,
			 "create alone %.0f ms; first exec refused %.0f times with 503 (agent "
			 "not connected), %.0f with 409",
			 extra(row, "createMedianMs"), extra(row, "firstExecRefused503"),
			 extra(row, "firstExecRefused409"));
}

struct report {
	json_t *rows;
	bool json;
	double wall;
	const char *settings;
	json_t *out; /* the JSON form */
};

static void print_header(const struct report *rp, json_t *m)
{
	printf("station-sandbox bench: %lld CPUs (%s), %s, Linux %s %s, cgroup %s\n",
	       (long long)json_integer_value(json_object_get(m, "nproc")),
	       json_string_value(json_object_get(m, "cpu")),
	       json_string_value(json_object_get(m, "memory")),
	       json_string_value(json_object_get(m, "kernel")),
	       json_string_value(json_object_get(m, "arch")),
	       json_string_value(json_object_get(m, "cgroup")));
	printf("%s; %s\n", json_string_value(json_object_get(m, "runc")),
	       json_string_value(json_object_get(m, "crun")));
	if (rp->settings)
		printf("settings: %s\n", rp->settings);
	printf("every row: median, p99 and min-max of its samples (latencies) or of its "
	       "repetitions (rates); ratios are of medians measured in this run\n\n");
	printf("%-46s %6s %11s %11s  %-20s %-24s %s\n", "", "n", "median", "p99", "min-max",
	       "ratio (same run)", "budget (DESIGN §11)");
}

static void print_row(const struct row_spec *s, const char *id, json_t *row, const char *ratio_s,
		      const char *note, const struct verdict *v)
{
	const char *label = s ? s->label : id;
	const char *skipped = json_string_value(json_object_get(row, "skipped"));
	const char *failed = json_string_value(json_object_get(row, "failed"));
	if (skipped || failed) {
		if (skipped)
			printf("  %-44s skipped: %s\n", label, skipped);
		if (failed)
			printf("  %-44s FAILED: %s\n", label, failed);
		return;
	}
	const char *unit = json_string_value(json_object_get(row, "unit"));
	char med[48], p99[48], lo[32], hi[32], range[80];
	fmt_cell(num(row, "median"), unit, med, sizeof med);
	fmt_cell(num(row, "p99"), unit, p99, sizeof p99);
	fmt_value(num(row, "min"), unit, lo, 20);
	fmt_value(num(row, "max"), unit, hi, 20);
	snprintf(range, sizeof range, "%s-%s %s", lo, hi, unit);
	char line[512];
	int n = snprintf(line, sizeof line, "  %-44s %6lld %11s %11s  %-20s %-24s %s", label,
			 (long long)json_integer_value(json_object_get(row, "n")), med, p99, range,
			 ratio_s, v->met >= 0 ? v->text : "");
	while (n > 0 && (size_t)n < sizeof line && line[n - 1] == ' ')
		line[--n] = '\0';
	puts(line);
	if (note[0])
		printf("      %s\n", note);
}

static void report_row(struct report *rp, const struct row_spec *s, const char *id,
		       const char **group)
{
	json_t *row = json_object_get(rp->rows, id);
	json_t *ref = s && s->ref ? json_object_get(rp->rows, s->ref) : NULL;
	char ratio_s[96], note[512];
	struct verdict v = { "", -1 };
	if (!row)
		return;
	if (ref && (json_object_get(ref, "skipped") || json_object_get(ref, "failed")))
		ref = NULL;
	bool measured = !json_object_get(row, "skipped") && !json_object_get(row, "failed");
	double r = measured && s ? ratio(s, row, ref, ratio_s, sizeof ratio_s) : NAN;
	if (!measured || !s)
		ratio_s[0] = '\0';
	row_note(id, row, rp->rows, note, sizeof note);
	if (measured && s && s->budget)
		s->budget(s, row, ref, &v);
	if (!rp->json && s && (!*group || strcmp(*group, s->group) != 0)) {
		if (strcmp(s->group, G_MEM) == 0 || strcmp(s->group, G_CMEM) == 0)
			printf("%s: %.0f (budget: >= 1,000 with controller RSS <= 100 MiB)\n",
			       s->group, extra(row, "workspaces"));
		else
			printf("%s\n", s->group);
	}
	if (s)
		*group = s->group;
	if (!rp->json) {
		print_row(s, id, row, ratio_s, note, &v);
		return;
	}
	json_t *o = json_deep_copy(row);
	json_object_set_new(o, "group", json_string(s ? s->group : ""));
	json_object_set_new(o, "label", json_string(s ? s->label : id));
	if (!isnan(r))
		json_object_set_new(o, "ratio",
				    json_pack("{sf ss ss}", "value", r, "to", s->ref, "text",
					      ratio_s));
	if (v.met >= 0)
		json_object_set_new(o, "budget",
				    json_pack("{ss sb}", "text", v.text, "met", v.met));
	json_array_append_new(json_object_get(rp->out, "rows"), o);
}

int cmd_report(int argc, char **argv)
{
	struct report rp = { .wall = NAN };
	const char *path = NULL;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--json") == 0)
			rp.json = true;
		else if (strcmp(argv[i], "--wall") == 0 && i + 1 < argc)
			rp.wall = atof(argv[++i]);
		else if (strcmp(argv[i], "--settings") == 0 && i + 1 < argc)
			rp.settings = argv[++i];
		else
			path = argv[i];
	}
	if (!path || !(rp.rows = load_rows(path)))
		return -EINVAL;
	json_t *m = machine();
	rp.out = json_pack("{so s[]}", "machine", json_incref(m), "rows");
	if (rp.settings)
		json_object_set_new(rp.out, "settings", json_string(rp.settings));
	if (!rp.json)
		print_header(&rp, m);
	const char *group = NULL, *id;
	json_t *row;
	for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++)
		report_row(&rp, &specs[i], specs[i].id, &group);
	json_object_foreach(rp.rows, id, row)
		if (!spec_of(id))
			report_row(&rp, NULL, id, &group);
	if (!isnan(rp.wall))
		json_object_set_new(rp.out, "wallSeconds", json_real(rp.wall));
	if (rp.json) {
		json_dumpf(rp.out, stdout, JSON_INDENT(2) | JSON_REAL_PRECISION(6));
		putchar('\n');
	} else if (!isnan(rp.wall)) {
		printf("\nwall time: %dm%02ds\n", (int)rp.wall / 60, (int)rp.wall % 60);
	}
	json_decref(m);
	json_decref(rp.out);
	json_decref(rp.rows);
	return 0;
}
