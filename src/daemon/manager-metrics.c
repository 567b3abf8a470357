/* SPDX-License-Identifier: MIT */
/* The manager's part of GET /metrics (docs/operations.md, "Metrics"): counters and histograms
 * bumped on the loop where things happen (a run's start and end, a create's end, a snapshot,
 * a fork, an agent connection lost), the loop's own lateness from a timer, and what the
 * manager already keeps read at scrape time: workspaces by state and adapter, commands,
 * services and terminals running, the warm pools, the image store's bytes, and per workspace
 * its CPU time, memory, pids and network bytes from its cgroup and its veth, read through the
 * usage history's open counter files (usage_track_read(): a pread per file).
 *
 * Cardinality is bounded: per-workspace series for at most cfg.metrics_max_workspaces
 * workspaces (the newest), the rest counted in station_metrics_workspaces_omitted; every
 * other label takes values from a fixed set (states, adapters, statuses, pool images).
 *
 * A tenant (the viewer, manager_set_viewer()) sees its own workspaces' series and nothing
 * worker-wide: counters of runs, creates or the loop would tell it of other tenants' work. */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "basic/cleanup.h"
#include "basic/metrics.h"
#include "cgroup/cgroup-sample.h"
#include "domain/state.h"
#include "event/event.h"
#include "manager-internal.h"

/* The loop's lateness is measured this often. */
#define LAG_PERIOD_USEC 500000ull

struct manager_metrics {
	uint64_t runs_started;
	uint64_t runs_ended[_RUN_STATUS_MAX];
	struct metrics_histogram run_duration;
	uint64_t output_bytes[2]; /* stdout, stderr of ended runs */
	uint64_t creates_ready, creates_failed;
	struct metrics_histogram create_duration;
	uint64_t snapshots, forks;
	uint64_t agent_reconnects;
	struct metrics_histogram loop_lag;
	double loop_lag_last;
	uint64_t lag_due; /* CLOCK_MONOTONIC usec the timer was set for */
	struct event_source *lag_timer;
	manager_metrics_fn preview_fn; /* manager_metrics_on_write() */
	void *preview_userdata;
};

static int on_lag_timer(struct event_source *s, uint64_t now, void *userdata)
{
	struct manager_metrics *mm = userdata;
	double late = now > mm->lag_due ? (double)(now - mm->lag_due) / 1e6 : 0;

	mm->loop_lag_last = late;
	metrics_histogram_observe(&mm->loop_lag, late);
	mm->lag_due = now_usec() + LAG_PERIOD_USEC;
	event_source_set_time(s, mm->lag_due);
	return 0;
}

int manager_metrics_init(struct manager *m)
{
	struct manager_metrics *mm = calloc(1, sizeof *mm);

	if (!mm)
		return -ENOMEM;
	mm->lag_due = now_usec() + LAG_PERIOD_USEC;
	int r = event_add_timer(m->loop, &mm->lag_timer, mm->lag_due, on_lag_timer, mm);
	if (r < 0) {
		free(mm);
		return r;
	}
	m->metrics = mm;
	return 0;
}

void manager_metrics_free(struct manager *m)
{
	if (!m->metrics)
		return;
	event_source_free(m->metrics->lag_timer);
	free(m->metrics);
	m->metrics = NULL;
}

void metrics_run_started(struct manager *m)
{
	if (m->metrics)
		m->metrics->runs_started++;
}

void metrics_run_ended(struct manager *m, const struct run_row *r)
{
	struct manager_metrics *mm = m->metrics;

	if (!mm || (unsigned)r->status >= _RUN_STATUS_MAX)
		return;
	mm->runs_ended[r->status]++;
	mm->output_bytes[0] += r->out[0].total;
	mm->output_bytes[1] += r->out[1].total;
	if (r->started_at && r->ended_at >= r->started_at)
		metrics_histogram_observe(&mm->run_duration,
					  (double)(r->ended_at - r->started_at) / 1e6);
}

void metrics_create_ended(struct manager *m, const struct workspace *ws, bool ready)
{
	struct manager_metrics *mm = m->metrics;
	uint64_t now = realtime_usec();

	if (!mm || ws->pool) /* a pool's refill: its claims count (station_pool_claims_total) */
		return;
	if (!ready) {
		mm->creates_failed++;
		return;
	}
	mm->creates_ready++;
	metrics_histogram_observe(
		&mm->create_duration,
		now > ws->row.created_at ? (double)(now - ws->row.created_at) / 1e6 : 0);
}

void metrics_snapshot_created(struct manager *m)
{
	if (m->metrics)
		m->metrics->snapshots++;
}

void metrics_fork_done(struct manager *m, unsigned count)
{
	if (m->metrics)
		m->metrics->forks += count;
}

void metrics_agent_reconnect(struct manager *m)
{
	if (m->metrics)
		m->metrics->agent_reconnects++;
}

void manager_metrics_on_write(struct manager *m, manager_metrics_fn fn, void *userdata)
{
	if (!m->metrics)
		return;
	m->metrics->preview_fn = fn;
	m->metrics->preview_userdata = userdata;
}

/* ---- the scrape -------------------------------------------------------------------------- */

static void write_workspace_counts(struct manager *m, FILE *f)
{
	static const char *const adapters[] = { "host", "container" };
	uint64_t n[_WORKSPACE_STATE_MAX][ELEMENTSOF(adapters)] = {};

	for (struct workspace *ws = m->workspaces; ws; ws = ws->next) {
		if (ws->pool || !workspace_visible(m, ws) ||
		    (unsigned)ws->row.state >= _WORKSPACE_STATE_MAX)
			continue;
		for (size_t a = 0; a < ELEMENTSOF(adapters); a++)
			if (ws->row.adapter && strcmp(ws->row.adapter, adapters[a]) == 0)
				n[ws->row.state][a]++;
	}
	metrics_family(f, "station_workspaces", "gauge",
		       "Workspaces by state and adapter (warm pool members not included).");
	for (int s = 0; s < _WORKSPACE_STATE_MAX; s++)
		for (size_t a = 0; a < ELEMENTSOF(adapters); a++) {
			const char *labels[] = { "state", workspace_state_to_string(s), "adapter",
						 adapters[a], NULL };
			metrics_sample_u64(f, "station_workspaces", labels, n[s][a]);
		}
}

static void write_running(struct manager *m, FILE *f)
{
	uint64_t runs = 0, services = 0, terminals = 0;

	for (struct workspace *ws = m->workspaces; ws; ws = ws->next) {
		if (!workspace_visible(m, ws))
			continue;
		runs += ws->n_running;
		services += ws->n_services;
		terminals += ws->n_terminals;
	}
	metrics_family(f, "station_commands_running", "gauge", "Commands (runs) running now.");
	metrics_sample_u64(f, "station_commands_running", NULL, runs);
	metrics_family(f, "station_services", "gauge", "Services defined on live workspaces.");
	metrics_sample_u64(f, "station_services", NULL, services);
	metrics_family(f, "station_terminals_open", "gauge", "Terminals open now.");
	metrics_sample_u64(f, "station_terminals_open", NULL, terminals);
}

static void write_counters(struct manager_metrics *mm, FILE *f)
{
	metrics_family(f, "station_runs_started_total", "counter",
		       "Commands started since the controller started.");
	metrics_sample_u64(f, "station_runs_started_total", NULL, mm->runs_started);
	metrics_family(f, "station_runs_ended_total", "counter",
		       "Commands that reached a terminal status, by status.");
	for (int s = RUN_EXITED; s < _RUN_STATUS_MAX; s++) {
		const char *labels[] = { "status", run_status_to_string(s), NULL };
		metrics_sample_u64(f, "station_runs_ended_total", labels, mm->runs_ended[s]);
	}
	metrics_family(f, "station_run_duration_seconds", "histogram",
		       "Time from a command's start to its end.");
	metrics_histogram_write(f, "station_run_duration_seconds", NULL, &mm->run_duration);
	metrics_family(f, "station_run_output_bytes_total", "counter",
		       "Bytes of output the ended commands produced, by stream.");
	metrics_sample_u64(f, "station_run_output_bytes_total",
			   (const char *[]){ "stream", "stdout", NULL }, mm->output_bytes[0]);
	metrics_sample_u64(f, "station_run_output_bytes_total",
			   (const char *[]){ "stream", "stderr", NULL }, mm->output_bytes[1]);
	metrics_family(f, "station_workspace_creates_total", "counter",
		       "Workspace creates that ended, by result (pool refills not included).");
	metrics_sample_u64(f, "station_workspace_creates_total",
			   (const char *[]){ "result", "ready", NULL }, mm->creates_ready);
	metrics_sample_u64(f, "station_workspace_creates_total",
			   (const char *[]){ "result", "failed", NULL }, mm->creates_failed);
	metrics_family(f, "station_workspace_create_duration_seconds", "histogram",
		       "Time from a create's request to its workspace being ready.");
	metrics_histogram_write(f, "station_workspace_create_duration_seconds", NULL,
				&mm->create_duration);
	metrics_family(f, "station_snapshots_created_total", "counter", "Snapshots taken.");
	metrics_sample_u64(f, "station_snapshots_created_total", NULL, mm->snapshots);
	metrics_family(f, "station_fork_workspaces_total", "counter", "Workspaces made by forks.");
	metrics_sample_u64(f, "station_fork_workspaces_total", NULL, mm->forks);
	metrics_family(f, "station_agent_reconnects_total", "counter",
		       "Agent connections lost while the agent lived (each is reconnected).");
	metrics_sample_u64(f, "station_agent_reconnects_total", NULL, mm->agent_reconnects);
	metrics_family(f, "station_event_loop_lag_seconds", "histogram",
		       "How late the controller's loop ran a timer due every 0.5 s.");
	metrics_histogram_write(f, "station_event_loop_lag_seconds", NULL, &mm->loop_lag);
	metrics_family(f, "station_event_loop_last_lag_seconds", "gauge",
		       "The last such lateness.");
	metrics_sample(f, "station_event_loop_last_lag_seconds", NULL, mm->loop_lag_last);
}

static void write_pools(struct manager *m, FILE *f)
{
	json_t *pools = manager_pools_json(m), *p;
	size_t i;

	metrics_family(f, "station_pool_size", "gauge", "Warm pool members wanted, by image.");
	json_array_foreach(pools, i, p) {
		const char *labels[] = { "image",
					 json_string_value(json_object_get(p, "image")) ?: "",
					 NULL };
		metrics_sample_u64(f, "station_pool_size", labels,
				   (uint64_t)json_integer_value(json_object_get(p, "size")));
	}
	metrics_family(f, "station_pool_ready", "gauge", "Warm pool members ready, by image.");
	json_array_foreach(pools, i, p) {
		const char *labels[] = { "image",
					 json_string_value(json_object_get(p, "image")) ?: "",
					 NULL };
		metrics_sample_u64(f, "station_pool_ready", labels,
				   (uint64_t)json_integer_value(json_object_get(p, "ready")));
	}
	metrics_family(f, "station_pool_claims_total", "counter",
		       "Creates served by a warm pool member, by image.");
	json_array_foreach(pools, i, p) {
		const char *labels[] = { "image",
					 json_string_value(json_object_get(p, "image")) ?: "",
					 NULL };
		metrics_sample_u64(f, "station_pool_claims_total", labels,
				   (uint64_t)json_integer_value(json_object_get(p, "claimed")));
	}
	json_decref(pools);
}

/* The bytes of the image store's blobs (every image's manifests, configs and layers). */
static void write_image_bytes(struct manager *m, FILE *f)
{
	char path[4096];
	uint64_t bytes = 0;
	struct dirent *de;
	DIR *d;

	snprintf(path, sizeof path, "%s/images/blobs/sha256", m->cfg.root);
	d = opendir(path);
	while (d && (de = readdir(d))) {
		struct stat st;

		if (de->d_name[0] != '.' &&
		    fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
		    S_ISREG(st.st_mode))
			bytes += (uint64_t)st.st_size;
	}
	if (d)
		closedir(d);
	metrics_family(f, "station_image_store_bytes", "gauge",
		       "Bytes of the image store's blobs.");
	metrics_sample_u64(f, "station_image_store_bytes", NULL, bytes);
}

struct ws_reading {
	const struct workspace *ws;
	struct cgroup_sample u;
	uint64_t net[2]; /* as the workspace sees them: received, sent */
	bool has_net;
	uint64_t egress[2]; /* the firewall's counters: allowed, denied */
	bool has_egress;
};

/* Through the usage history's open counter files: a pread per file. */
static bool workspace_read(struct workspace *ws, struct ws_reading *ret)
{
	*ret = (struct ws_reading){ .ws = ws, .has_net = ws->net_mode != NET_NONE };
	return usage_track_read(ws, &ret->u, ret->net);
}

/* The firewall's counters of every workspace, from one dump of the table (net_counters_each()),
 * matched to the readings by id: sorted pointers, a binary search per counter. */
static int reading_by_id(const void *a, const void *b)
{
	const struct ws_reading *const *x = a, *const *y = b;

	return strcmp((*x)->ws->row.id, (*y)->ws->row.id);
}

static int reading_key(const void *key, const void *elem)
{
	const struct ws_reading *const *y = elem;

	return strcmp(key, (*y)->ws->row.id);
}

struct egress_match {
	struct ws_reading **sorted;
	size_t n;
};

static void on_egress_counter(void *userdata, const char *id, bool denied, uint64_t packets)
{
	struct egress_match *em = userdata;
	struct ws_reading **w = bsearch(id, em->sorted, em->n, sizeof *em->sorted, reading_key);

	if (!w)
		return;
	(*w)->egress[denied ? 1 : 0] = packets;
	(*w)->has_egress = true;
}

static void workspaces_read_egress(struct manager *m, struct ws_reading *v, size_t n)
{
	struct egress_match em = { .sorted = calloc(n ?: 1, sizeof *em.sorted), .n = 0 };

	if (!em.sorted || !m->net)
		goto out;
	for (size_t i = 0; i < n; i++)
		if (v[i].has_net)
			em.sorted[em.n++] = &v[i];
	if (em.n == 0)
		goto out;
	qsort(em.sorted, em.n, sizeof *em.sorted, reading_by_id);
	(void)net_counters_each(m->net, on_egress_counter, &em); /* a failed dump: no series */
out:
	free(em.sorted);
}

enum ws_series {
	WS_CPU,
	WS_MEMORY,
	WS_PIDS,
	WS_RX,
	WS_TX,
	WS_EGRESS_ALLOWED,
	WS_EGRESS_DENIED,
	_WS_SERIES_MAX
};

static const struct {
	const char *name, *type, *help;
} ws_series[_WS_SERIES_MAX] = {
	[WS_CPU] = { "station_workspace_cpu_seconds_total", "counter",
		     "CPU time used by the workspace's processes (its cgroup)." },
	[WS_MEMORY] = { "station_workspace_memory_bytes", "gauge",
			"Memory the workspace uses now, inactive file cache left out." },
	[WS_PIDS] = { "station_workspace_pids", "gauge",
		      "Processes and threads in the workspace." },
	[WS_RX] = { "station_workspace_network_receive_bytes_total", "counter",
		    "Bytes the workspace received on its network (bridge and restricted only)." },
	[WS_TX] = { "station_workspace_network_transmit_bytes_total", "counter",
		    "Bytes the workspace sent on its network (bridge and restricted only)." },
	[WS_EGRESS_ALLOWED] = { "station_egress_allowed_total", "counter",
				"New connections the workspace's firewall let out (bridge and "
				"restricted only; DNS to the worker's resolver not counted)." },
	[WS_EGRESS_DENIED] = { "station_egress_denied_total", "counter",
			       "Packets the workspace's firewall dropped (bridge and restricted "
			       "only; each retry of a refused connection counts)." },
};

static void write_ws_sample(struct manager *m, FILE *f, enum ws_series k,
			    const struct ws_reading *w)
{
	const char *labels[] = { "workspace", w->ws->row.id,
				 "tenant",    w->ws->row.tenant ?: "",
				 "worker",    m->cfg.worker ?: "",
				 NULL };

	switch (k) {
	case WS_CPU:
		metrics_sample(f, ws_series[k].name, labels, (double)w->u.cpu_usec / 1e6);
		break;
	case WS_MEMORY:
		metrics_sample_u64(f, ws_series[k].name, labels, w->u.memory_bytes);
		break;
	case WS_PIDS:
		metrics_sample_u64(f, ws_series[k].name, labels, w->u.pids);
		break;
	case WS_RX:
	case WS_TX:
		if (w->has_net)
			metrics_sample_u64(f, ws_series[k].name, labels,
					   w->net[k == WS_RX ? 0 : 1]);
		break;
	case WS_EGRESS_ALLOWED:
	case WS_EGRESS_DENIED:
		if (w->has_egress)
			metrics_sample_u64(f, ws_series[k].name, labels,
					   w->egress[k == WS_EGRESS_ALLOWED ? 0 : 1]);
		break;
	default:
		break;
	}
}

static void write_workspaces(struct manager *m, FILE *f)
{
	size_t max = m->cfg.metrics_max_workspaces ?: MANAGER_METRICS_MAX_WORKSPACES;
	struct ws_reading *v = calloc(max, sizeof *v);
	size_t n = 0;
	uint64_t omitted = 0;

	for (struct workspace *ws = m->workspaces; ws; ws = ws->next) {
		if (ws->pool || !workspace_visible(m, ws) || !ws->cgroup)
			continue;
		if (!v || n >= max) {
			omitted++;
			continue;
		}
		if (workspace_read(ws, &v[n]))
			n++;
	}
	workspaces_read_egress(m, v, n);
	/* the list runs newest first: written oldest first */
	for (int k = 0; k < _WS_SERIES_MAX; k++) {
		metrics_family(f, ws_series[k].name, ws_series[k].type, ws_series[k].help);
		for (size_t i = n; i-- > 0;)
			write_ws_sample(m, f, k, &v[i]);
	}
	free(v);
	metrics_family(f, "station_metrics_workspaces_omitted", "gauge",
		       "Workspaces whose series this scrape left out (past "
		       "--metrics-max-workspaces).");
	metrics_sample_u64(f, "station_metrics_workspaces_omitted", NULL, omitted);
}

void manager_metrics_write(struct manager *m, FILE *f)
{
	bool tenant = m->viewer != NULL;

	write_workspace_counts(m, f);
	write_running(m, f);
	if (!tenant && m->metrics) {
		write_counters(m->metrics, f);
		write_pools(m, f);
		write_image_bytes(m, f);
		metrics_family(f, "station_preview_exposures", "gauge",
			       "Ports exposed through the preview listener now.");
		metrics_sample_u64(f, "station_preview_exposures", NULL, ports_exposures_count(m));
		if (m->metrics->preview_fn)
			m->metrics->preview_fn(m->metrics->preview_userdata, f);
	}
	write_workspaces(m, f);
}
