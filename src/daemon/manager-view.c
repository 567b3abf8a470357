/* SPDX-License-Identifier: MIT */
/* What a container workspace sees of the machine (docs/operations.md, "The view inside"): the
 * worker's lxcfs (lxcfs.h) for /proc and /sys/devices/system/cpu, and for "cpus" a cpuset of
 * that many CPUs (rounded up).
 *
 * Why a cpuset and not only lxcfs's CPU view: nproc, os.cpus() in some runtimes and every
 * thread pool that sizes itself ask sched_getaffinity(), which no file changes; and lxcfs counts
 * CPUs from the reader's cpuset (its quota-based count needs --enable-cfs and a quota on the
 * container's own group, and still leaves sched_getaffinity at the host's count). A cpuset
 * makes both agree, on cgroup v1 and v2 alike. The quota on the workspace group still bounds
 * the CPU time ("cpus": 0.5 gets one CPU and half of its time). CPUs are placed where the fewest
 * started workspaces of this controller are pinned. */

#include <errno.h>
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adapter/adapter.h"
#include "basic/log.h"
#include "lxcfs.h"
#include "manager-internal.h"

void manager_view_init(struct manager *m)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	m->n_cpus = 0;
	if (sched_getaffinity(0, sizeof set, &set) == 0)
		for (int i = 0; i < CPU_SETSIZE && m->n_cpus < MANAGER_MAX_CPUS; i++)
			if (CPU_ISSET(i, &set))
				m->cpus[m->n_cpus++] = i;
	if (!m->cfg.allow_container)
		return;
	if (lxcfs_new(m->loop, m->cfg.lxcfs ? m->cfg.lxcfs : "auto", m->cfg.root, &m->lxcfs) < 0)
		log_warn("lxcfs unavailable", "error", "cannot watch it", NULL);
}

void manager_view_free(struct manager *m)
{
	bool live = false;
	for (struct workspace *ws = m->workspaces; ws && !live; ws = ws->next)
		live = ws->adapter == &adapter_container && ws->agent_pid > 0;
	lxcfs_free(m->lxcfs, live);
	m->lxcfs = NULL;
}

/* How many CPUs "cpus" pins; 0: none (unlimited, or not fewer than the worker has). */
unsigned workspace_view_cpu_count(const struct manager *m, double cpus)
{
	if (!(cpus > 0) || m->n_cpus == 0)
		return 0;
	double n = ceil(cpus);
	return n < (double)m->n_cpus ? (unsigned)n : 0;
}

/* Adds 1 to use[i] for each CPU m->cpus[i] a cpuset string ("0,3") names. */
static void count_cpuset(const struct manager *m, const char *s, unsigned *use)
{
	while (s && *s) {
		char *end;
		long cpu = strtol(s, &end, 10);
		if (end == s)
			return;
		for (size_t i = 0; i < m->n_cpus; i++)
			if (m->cpus[i] == cpu)
				use[i]++;
		s = *end == ',' ? end + 1 : end;
		if (*end && *end != ',')
			return;
	}
}

static int place_cpus(struct workspace *ws, unsigned n)
{
	struct manager *m = ws->m;
	unsigned use[MANAGER_MAX_CPUS] = { 0 };
	bool pick[MANAGER_MAX_CPUS] = { false };
	char buf[MANAGER_MAX_CPUS * 5 + 1] = "";
	size_t len = 0;

	for (struct workspace *o = m->workspaces; o; o = o->next)
		if (o != ws && o->agent_pid > 0)
			count_cpuset(m, json_string_value(json_object_get(o->spec, "cpuset")), use);
	for (unsigned k = 0; k < n; k++) {
		size_t best = SIZE_MAX;
		for (size_t i = 0; i < m->n_cpus; i++)
			if (!pick[i] && (best == SIZE_MAX || use[i] < use[best]))
				best = i;
		pick[best] = true;
	}
	for (size_t i = 0; i < m->n_cpus; i++)
		if (pick[i])
			len += (size_t)snprintf(buf + len, sizeof buf - len, "%s%d", len ? "," : "",
						m->cpus[i]);
	return json_object_set_new(ws->spec, "cpuset", json_string(buf));
}

int workspace_view_prepare(struct workspace *ws)
{
	struct manager *m = ws->m;
	m->actx.lxcfs_dir = lxcfs_dir(m->lxcfs);
	m->actx.lxcfs_serial = lxcfs_serial(m->lxcfs);
	if (ws->adapter != &adapter_container)
		return 0;
	unsigned n =
		workspace_view_cpu_count(m, json_number_value(json_object_get(ws->spec, "cpus")));
	if (!n) {
		json_object_del(ws->spec, "cpuset");
		return 0;
	}
	return place_cpus(ws, n);
}

int workspace_view_persist(struct workspace *ws)
{
	char *text = json_dumps(ws->spec, JSON_COMPACT);
	if (!text)
		return -ENOMEM;
	free(ws->row.spec_json);
	ws->row.spec_json = text;
	return 0;
}

void manager_view_ready(struct manager *m, json_t *checks)
{
	char msg[3 * PATH_MAX + 256];
	if (!m->cfg.allow_container)
		return;
	bool ok = lxcfs_status(m->lxcfs, msg, sizeof msg);
	json_t *check = json_pack("{s:s,s:b,s:s}", "name", "lxcfs", "ok", ok, "message", msg);

	/* --lxcfs off is the operator's choice: said so, for a client not to show it failed. */
	if (check && lxcfs_disabled(m->lxcfs))
		json_object_set_new(check, "disabled", json_true());
	json_array_append_new(checks, check);
}
