/* SPDX-License-Identifier: MIT */
/* Usage history (docs/api.md, "Usage history"; docs/operations.md, "Usage history"): every
 * interval (5 s) a timer on the loop reads each workspace's cgroup counters and its host
 * veth's byte counts through descriptors opened once (cgroup-sample.h; the veth's files when
 * the workspace has a network) and writes one row per workspace and one for the worker, in one
 * transaction. CPU and network are stored as what was used since the last reading (a counter
 * that went back, a group made again, counts from zero). Once a minute the retention pass
 * merges rows older than an hour into one per minute, deletes rows older than 24 h and keeps
 * the table within its cap. */

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "basic/log.h"
#include "basic/util.h"
#include "cgroup/cgroup-sample.h"
#include "event/event.h"
#include "manager-internal.h"
#include "store/store-usage.h"

#define MINUTE_MS 60000ull
#define USAGE_FINE_MS (60 * MINUTE_MS) /* rows older than this are merged per minute */
#define USAGE_KEEP_MS (24 * 60 * MINUTE_MS)
#define USAGE_PRUNE_EVERY_MS MINUTE_MS
#define USAGE_PRUNE_CHUNK_MS (10 * MINUTE_MS) /* expired in steps of this much */
#define USAGE_PRUNE_BUDGET_USEC 20000	      /* of the loop's time per tick */
#define USAGE_POINTS_MAX 2000		      /* points in one answer: the newest */

/* What the sampler keeps of one workspace (ws->usage). */
/* The files a track holds open: the group's counters (cgroup-sample.c: at most 4) and the
 * veth's two. */
#define USAGE_TRACK_FDS 6

struct usage_track {
	struct cgroup_sampler *cg;
	int net_fd[2]; /* the host veth's tx_bytes, rx_bytes: what the workspace received, sent */
	bool held;     /* its files stay open between readings (counted in tracks_held) */
	bool have_last;
	struct cgroup_sample last;
	uint64_t last_net[2];
	uint64_t last_ms;
};

struct manager_usage_history {
	struct event_source *timer;
	uint64_t interval_ms;
	uint64_t max_rows;
	uint64_t next_prune_ms; /* realtime */
	bool pruning;		/* a retention pass under way, a share each tick */
	uint64_t merged_to_ms;	/* rows before it are per minute already (0: not known yet) */
	uint64_t expired_to_ms; /* rows before it are deleted */
	unsigned passes;
	bool store_failed; /* logged once until a write succeeds */
	/* Workspaces whose counter files stay open, at most held_max: the rest open and close
	 * theirs at each reading, so that the readings never take the open files a create or a
	 * client connection needs (a quarter of RLIMIT_NOFILE at most). */
	size_t tracks_held, held_max;
	/* one tick's rows, grown as needed */
	const char **ids;
	struct usage_sample *rows;
	size_t cap;
};

static void net_close(struct usage_track *t)
{
	for (int i = 0; i < 2; i++) {
		if (t->net_fd[i] >= 0)
			close(t->net_fd[i]);
		t->net_fd[i] = -1;
	}
}

/* Closes t's files (opened again at the next reading). */
static void track_close(struct workspace *ws, struct usage_track *t)
{
	struct manager_usage_history *h = ws->m->usage_history;

	cgroup_sampler_free(t->cg);
	t->cg = NULL;
	net_close(t);
	if (t->held && h)
		h->tracks_held--;
	t->held = false;
}

/* After a reading: a track over the budget lets its files go. */
static void track_done(struct workspace *ws, struct usage_track *t)
{
	if (!t->held)
		track_close(ws, t);
}

void usage_track_free(struct workspace *ws)
{
	struct usage_track *t = ws->usage;

	if (!t)
		return;
	track_close(ws, t);
	free(t);
	ws->usage = NULL;
}

/* The host veth ("sv" and the address in hex, net.h): a name the controller gave it. */
static void net_open(const struct workspace *ws, struct usage_track *t)
{
	static const char *const names[2] = { "tx_bytes", "rx_bytes" };
	char path[96];

	for (int i = 0; i < 2; i++) {
		snprintf(path, sizeof path, "/sys/class/net/sv%08x/statistics/%s", ws->net_address,
			 names[i]);
		t->net_fd[i] = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	}
}

static int net_read(int fd, uint64_t *ret)
{
	char buf[32];
	ssize_t n;

	do
		n = pread(fd, buf, sizeof buf - 1, 0);
	while (n < 0 && errno == EINTR);
	if (n <= 0)
		return n < 0 ? negative_errno() : -EIO;
	buf[n] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	return parse_u64(buf, UINT64_MAX, ret);
}

/* ws's track with its files open; track_done() after the reading. */
static struct usage_track *track_get(struct workspace *ws)
{
	struct manager_usage_history *h = ws->m->usage_history;
	struct usage_track *t = ws->usage;

	if (!t) {
		t = calloc(1, sizeof(*t));
		if (!t)
			return NULL;
		t->net_fd[0] = t->net_fd[1] = -1;
		ws->usage = t;
	}
	if (!t->cg && cgroup_sampler_open(ws->cgroup, &t->cg) < 0)
		return NULL; /* no group now (stopped): tried again next tick */
	if (ws->net_mode != NET_NONE && t->net_fd[0] < 0)
		net_open(ws, t);
	if (!t->held && h && h->tracks_held < h->held_max) {
		t->held = true;
		h->tracks_held++;
	}
	return t;
}

bool usage_track_read(struct workspace *ws, struct cgroup_sample *ret, uint64_t net[2])
{
	struct usage_track *t = track_get(ws);

	bool ok;

	net[0] = net[1] = 0;
	if (!t)
		return false;
	ok = cgroup_sampler_read(t->cg, ret) >= 0;
	for (int i = 0; ok && i < 2; i++)
		if (t->net_fd[i] >= 0 && net_read(t->net_fd[i], &net[i]) < 0)
			net[i] = 0;
	track_done(ws, t);
	return ok;
}

static uint64_t counter_delta(uint64_t now, uint64_t before)
{
	return now >= before ? now - before : now; /* went back: counted from zero */
}

/* One reading of ws into *row: false when its group cannot be read (gone: reopened next tick). */
static bool workspace_sample(struct workspace *ws, uint64_t now_ms, struct usage_sample *row)
{
	struct usage_track *t = track_get(ws);
	struct cgroup_sample c;
	uint64_t net[2] = { 0, 0 };

	if (!t)
		return false;
	if (cgroup_sampler_read(t->cg, &c) < 0) {
		track_close(ws, t);
		t->have_last = false;
		return false;
	}
	for (int i = 0; i < 2; i++)
		if (t->net_fd[i] >= 0 && net_read(t->net_fd[i], &net[i]) < 0)
			net_close(t); /* the veth went: opened again next tick */
	*row = (struct usage_sample){ .ts_ms = now_ms,
				      .mem_bytes = c.memory_bytes,
				      .mem_max = c.memory_bytes,
				      .pids = c.pids };
	if (t->have_last && now_ms > t->last_ms) {
		row->span_ms = now_ms - t->last_ms;
		row->cpu_usec = counter_delta(c.cpu_usec, t->last.cpu_usec);
		row->rx_bytes = counter_delta(net[0], t->last_net[0]);
		row->tx_bytes = counter_delta(net[1], t->last_net[1]);
	}
	t->have_last = true;
	t->last = c;
	t->last_net[0] = net[0];
	t->last_net[1] = net[1];
	t->last_ms = now_ms;
	track_done(ws, t);
	return true;
}

static int rows_reserve(struct manager_usage_history *h, size_t n)
{
	if (n <= h->cap)
		return 0;
	size_t cap = MAX(n, h->cap * 2);
	const char **ids = reallocarray(h->ids, cap, sizeof(*ids));
	if (!ids)
		return -ENOMEM;
	h->ids = ids;
	struct usage_sample *rows = reallocarray(h->rows, cap, sizeof(*rows));
	if (!rows)
		return -ENOMEM;
	h->rows = rows;
	h->cap = cap;
	return 0;
}

static void worker_add(struct usage_sample *w, const struct usage_sample *r)
{
	w->span_ms = MAX(w->span_ms, r->span_ms);
	w->cpu_usec += r->cpu_usec;
	w->mem_bytes += r->mem_bytes;
	w->mem_max += r->mem_max;
	w->pids += r->pids;
	w->rx_bytes += r->rx_bytes;
	w->tx_bytes += r->tx_bytes;
}

static void usage_store_result(struct manager_usage_history *h, int r, const char *what)
{
	if (r >= 0) {
		h->store_failed = false;
		return;
	}
	if (!h->store_failed)
		log_error("cannot record usage history", "step", what, "error", strerror(-r), NULL);
	h->store_failed = true;
}

/* One tick's share of the retention pass: expire, merge and cap in steps of a transaction
 * each, until USAGE_PRUNE_BUDGET_USEC is spent; true when caught up. */
static bool usage_prune(struct manager *m, uint64_t now_ms)
{
	struct manager_usage_history *h = m->usage_history;
	uint64_t keep = now_ms > USAGE_KEEP_MS ? now_ms - USAGE_KEEP_MS : 0;
	uint64_t target =
		now_ms > USAGE_FINE_MS ? (now_ms - USAGE_FINE_MS) / MINUTE_MS * MINUTE_MS : 0;
	uint64_t deadline = now_usec() + USAGE_PRUNE_BUDGET_USEC, oldest;
	struct usage_prune_stats st = {};
	int r = 0;

	if (h->merged_to_ms == 0) {
		r = store_usage_oldest(m->store, &oldest);
		if (r < 0)
			goto fail;
		h->merged_to_ms = oldest ? MIN(oldest / MINUTE_MS * MINUTE_MS, target) : target;
		h->expired_to_ms = h->merged_to_ms;
	}
	while (h->expired_to_ms < keep && r >= 0) {
		uint64_t next = MIN(keep, h->expired_to_ms + USAGE_PRUNE_CHUNK_MS);
		r = store_usage_expire(m->store, next, 0, NULL);
		h->expired_to_ms = next;
		if (now_usec() >= deadline)
			goto out;
	}
	h->merged_to_ms = MAX(h->merged_to_ms, keep / MINUTE_MS * MINUTE_MS);
	while (h->merged_to_ms < target && r >= 0) {
		/* a minute a step; a backlog (rows written by another controller, or a clock
		 * that jumped) in 60 steps */
		uint64_t step =
			MAX(MINUTE_MS, (target - h->merged_to_ms) / 60 / MINUTE_MS * MINUTE_MS);
		uint64_t next = MIN(target, h->merged_to_ms + step);
		r = store_usage_merge(m->store, h->merged_to_ms, next, NULL);
		h->merged_to_ms = next;
		if (now_usec() >= deadline)
			goto out;
	}
	/* the cap counts the table: every tenth pass */
	if (r >= 0 && h->passes++ % 10 == 0)
		r = store_usage_expire(m->store, keep, h->max_rows, &st);
out:
	if (r < 0)
		goto fail;
	usage_store_result(h, 0, NULL);
	if (st.capped > 0) {
		char deleted[24];
		snprintf(deleted, sizeof deleted, "%llu", (unsigned long long)st.capped);
		log_warn("usage history over its cap: oldest rows deleted", "deleted", deleted,
			 NULL);
	}
	return h->expired_to_ms >= keep && h->merged_to_ms >= target;
fail:
	usage_store_result(h, r, "retention");
	return true; /* tried again at the next pass */
}

static int on_usage_tick(struct event_source *s, uint64_t now, void *userdata)
{
	struct manager *m = userdata;
	struct manager_usage_history *h = m->usage_history;
	uint64_t now_ms = realtime_usec() / 1000;
	struct usage_sample worker = { .ts_ms = now_ms };
	size_t n = 0;

	event_source_set_time(s, now + h->interval_ms * 1000);
	if (rows_reserve(h, m->n_workspaces) < 0)
		return 0;
	for (struct workspace *ws = m->workspaces; ws; ws = ws->next) {
		if (ws->pool || !ws->cgroup || n >= h->cap) {
			usage_track_free(ws);
			continue;
		}
		if (!workspace_sample(ws, now_ms, &h->rows[n]))
			continue;
		h->ids[n] = ws->row.id;
		worker_add(&worker, &h->rows[n]);
		n++;
	}
	usage_store_result(h, store_usage_insert(m->store, h->ids, h->rows, n, &worker, n),
			   "samples");
	if (now_ms >= h->next_prune_ms) {
		h->next_prune_ms = now_ms + USAGE_PRUNE_EVERY_MS;
		h->pruning = true;
	}
	if (h->pruning)
		h->pruning = !usage_prune(m, now_ms);
	return 0;
}

int manager_usage_history_init(struct manager *m)
{
	struct manager_usage_history *h = calloc(1, sizeof(*h));
	struct rlimit rl;

	if (!h)
		return -ENOMEM;
	h->interval_ms = m->cfg.usage_interval_ms ? m->cfg.usage_interval_ms :
						    USAGE_INTERVAL_DEFAULT_MS;
	h->interval_ms = MAX(h->interval_ms, USAGE_INTERVAL_MIN_MS);
	h->max_rows = m->cfg.usage_max_rows ? m->cfg.usage_max_rows : USAGE_MAX_ROWS_DEFAULT;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
		h->held_max = (size_t)(rl.rlim_cur / 4 / USAGE_TRACK_FDS);
	else
		h->held_max = SIZE_MAX;
	m->usage_history = h;
	return event_add_timer(m->loop, &h->timer, now_usec() + h->interval_ms * 1000,
			       on_usage_tick, m);
}

void manager_usage_history_free(struct manager *m)
{
	struct manager_usage_history *h = m->usage_history;

	if (!h)
		return;
	for (struct workspace *ws = m->workspaces; ws; ws = ws->next)
		usage_track_free(ws);
	event_source_free(h->timer);
	free(h->ids);
	free(h->rows);
	free(h);
	m->usage_history = NULL;
}

/* ---- the answers ------------------------------------------------------------------------ */

static json_t *u64_json(uint64_t v)
{
	return json_integer(v > (uint64_t)INT64_MAX ? INT64_MAX : (json_int_t)v);
}

static json_t *point_json(const struct usage_sample *p)
{
	char t[32];

	format_rfc3339(p->ts_ms * 1000, t);
	return json_pack("{s:s, s:f, s:o, s:o, s:o, s:o, s:o, s:I}", "t", t, "cpu",
			 p->span_ms > 0 ? (double)p->cpu_usec / ((double)p->span_ms * 1000) : 0.0,
			 "memoryBytes", u64_json(p->mem_bytes), "memoryMaxBytes",
			 u64_json(p->mem_max), "pids", u64_json(p->pids), "rxBytes",
			 u64_json(p->rx_bytes), "txBytes", u64_json(p->tx_bytes), "spanMs",
			 (json_int_t)MIN(p->span_ms, (uint64_t)INT64_MAX));
}

static int samples_json(struct manager *m, const char *ws_id, const char *tenant, uint64_t since_ms,
			uint64_t step_ms, json_t **ret, struct station_error *e)
{
	_cleanup_free_ struct usage_sample *v = NULL;
	json_t *a;
	size_t n = 0;
	int r = store_usage_query(m->store, ws_id, tenant, since_ms, step_ms, USAGE_POINTS_MAX, &v,
				  &n);

	if (r < 0)
		return station_error_set(e, r, NULL, "cannot read the usage history: %s",
					 strerror(-r));
	a = json_array();
	for (size_t i = 0; a && i < n; i++)
		if (json_array_append_new(a, point_json(&v[i])) < 0) {
			json_decref(a);
			a = NULL;
		}
	if (!a)
		return station_error_set(e, -ENOMEM, NULL, "out of memory");
	*ret = a;
	return 0;
}

static json_t *limits_json(const struct workspace *ws)
{
	double cpus = json_number_value(json_object_get(ws->spec, "cpus"));
	json_int_t mb = json_integer_value(json_object_get(ws->spec, "memoryMb"));
	json_int_t pids = json_integer_value(json_object_get(ws->spec, "pidsLimit"));

	return json_pack("{s:o, s:o, s:o}", "cpus", cpus > 0 ? json_real(cpus) : json_null(),
			 "memoryBytes", mb > 0 ? u64_json((uint64_t)mb * 1024 * 1024) : json_null(),
			 "pidsLimit", pids > 0 ? json_integer(pids) : json_null());
}

int manager_usage_history_get(struct manager *m, const char *ws_id, uint64_t since_ms,
			      uint64_t step_ms, json_t **ret, struct station_error *e)
{
	struct workspace *ws = workspace_find(m, ws_id);
	json_t *samples = NULL;
	int r;

	/* an unclaimed pool member is no client's; another tenant's answers as a missing one.
	 * Reading the history is not activity (the idle timeout does not move). */
	if (!ws || ws->pool || !workspace_visible(m, ws))
		return station_error_set(e, -ENOENT, NULL, "workspace \"%s\" not found", ws_id);
	r = samples_json(m, ws->row.id, NULL, since_ms, step_ms, &samples, e);
	if (r < 0)
		return r;
	*ret = json_pack("{s:s, s:I, s:I, s:o, s:o}", "workspaceId", ws->row.id, "stepMs",
			 (json_int_t)step_ms, "intervalMs",
			 (json_int_t)m->usage_history->interval_ms, "limits", limits_json(ws),
			 "samples", samples);
	return *ret ? 0 : station_error_set(e, -ENOMEM, NULL, "out of memory");
}

int manager_worker_usage_history_get(struct manager *m, uint64_t since_ms, uint64_t step_ms,
				     json_t **ret, struct station_error *e)
{
	json_t *samples = NULL;
	int r;

	/* the operator: the worker's rows (every workspace, deleted ones while their rows
	 * lived); a tenant: the sum over its own workspaces */
	r = samples_json(m, NULL, m->viewer, since_ms, step_ms, &samples, e);
	if (r < 0)
		return r;
	*ret = json_pack("{s:s, s:o, s:I, s:I, s:o}", "worker", m->cfg.worker, "tenant",
			 m->viewer ? json_string(m->viewer) : json_null(), "stepMs",
			 (json_int_t)step_ms, "intervalMs",
			 (json_int_t)m->usage_history->interval_ms, "samples", samples);
	return *ret ? 0 : station_error_set(e, -ENOMEM, NULL, "out of memory");
}
