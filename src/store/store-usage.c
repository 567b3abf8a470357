/* SPDX-License-Identifier: MIT */
/* The usage_samples and usage_worker tables (store-usage.h). */

#include "store/store-usage.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/store-internal.h"

#define USAGE_MINUTE_MS 60000
#define USAGE_COLUMNS "ts, span_ms, cpu_usec, mem_bytes, mem_max, pids, rx_bytes, tx_bytes"

static void bind_sample(struct store_binder *b, const struct usage_sample *v)
{
	store_bind_u64(b, v->ts_ms);
	store_bind_u64(b, v->span_ms);
	store_bind_u64(b, v->cpu_usec);
	store_bind_u64(b, v->mem_bytes);
	store_bind_u64(b, v->mem_max);
	store_bind_u64(b, v->pids);
	store_bind_u64(b, v->rx_bytes);
	store_bind_u64(b, v->tx_bytes);
}

static int insert_steps(struct store *s, const char *const *ws_ids,
			const struct usage_sample *samples, size_t n,
			const struct usage_sample *worker, uint64_t workspaces)
{
	_cleanup_stmt_finalize_ sqlite3_stmt *st = NULL, *wst = NULL;
	int k = store_prepare(s,
			      "INSERT OR REPLACE INTO usage_samples (workspace_id, " USAGE_COLUMNS
			      ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
			      &st);

	for (size_t i = 0; k >= 0 && i < n; i++) {
		struct store_binder b = STORE_BINDER(st);
		store_bind_text(&b, ws_ids[i]);
		bind_sample(&b, &samples[i]);
		k = store_exec_bound(s, &b);
		sqlite3_reset(st);
		sqlite3_clear_bindings(st);
	}
	if (k < 0 || !worker)
		return k;
	k = store_prepare(s,
			  "INSERT OR REPLACE INTO usage_worker (" USAGE_COLUMNS
			  ", workspaces) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
			  &wst);
	if (k < 0)
		return k;
	struct store_binder b = STORE_BINDER(wst);
	bind_sample(&b, worker);
	store_bind_u64(&b, workspaces);
	return store_exec_bound(s, &b);
}

int store_usage_insert(struct store *s, const char *const *ws_ids,
		       const struct usage_sample *samples, size_t n,
		       const struct usage_sample *worker, uint64_t workspaces)
{
	int k;

	if (!s || (n > 0 && (!ws_ids || !samples)))
		return -EINVAL;
	k = store_begin(s);
	if (k < 0)
		return k;
	k = insert_steps(s, ws_ids, samples, n, worker, workspaces);
	if (k >= 0)
		k = store_commit(s);
	if (k < 0)
		store_rollback(s);
	return k < 0 ? k : 0;
}

/* The bucket columns over rows of one series (a workspace's, or the worker's). A row of span 0
 * (the first after a start) weighs as 1 ms. */
#define BUCKET_AGGREGATES                                                                          \
	"SUM(span_ms), SUM(cpu_usec), "                                                            \
	"SUM(mem_bytes * MAX(span_ms, 1)) / SUM(MAX(span_ms, 1)), MAX(mem_max), MAX(pids), "       \
	"SUM(rx_bytes), SUM(tx_bytes)"

static const char sql_workspace[] = "SELECT ts / ?2 AS b, " BUCKET_AGGREGATES
				    " FROM usage_samples WHERE workspace_id = ?1 AND ts >= ?3 "
				    "GROUP BY b ORDER BY b DESC LIMIT ?4";
static const char sql_worker[] = "SELECT ts / ?2 AS b, " BUCKET_AGGREGATES
				 " FROM usage_worker WHERE ?1 IS NULL AND ts >= ?3 "
				 "GROUP BY b ORDER BY b DESC LIMIT ?4";
/* A tenant's sum: each workspace's bucket first, its CPU as a rate, the rates summed and
 * given back over the longest span (so that cpu_usec / span_ms is the sum of the rates). */
static const char sql_tenant[] =
	"SELECT b, MAX(span), CAST(SUM(rate) * MAX(span) AS INTEGER), SUM(mem), SUM(mmax), "
	"SUM(p), SUM(rx), SUM(tx) FROM ("
	" SELECT workspace_id, ts / ?2 AS b, SUM(span_ms) AS span,"
	"  CASE WHEN SUM(span_ms) > 0 THEN SUM(cpu_usec) * 1.0 / SUM(span_ms) ELSE 0 END AS rate,"
	"  SUM(mem_bytes * MAX(span_ms, 1)) / SUM(MAX(span_ms, 1)) AS mem, MAX(mem_max) AS mmax,"
	"  MAX(pids) AS p, SUM(rx_bytes) AS rx, SUM(tx_bytes) AS tx"
	" FROM usage_samples WHERE ts >= ?3 AND workspace_id IN"
	"  (SELECT id FROM workspaces WHERE tenant = ?1)"
	" GROUP BY workspace_id, b) GROUP BY b ORDER BY b DESC LIMIT ?4";

static int read_points(sqlite3_stmt *st, uint64_t step_ms, size_t max, struct usage_sample *v,
		       size_t *ret_n)
{
	size_t n = 0;
	int k;

	while (n < max && (k = store_step_row(st)) > 0) {
		struct store_reader rd = STORE_READER(st);
		v[n] = (struct usage_sample){ .ts_ms = store_read_u64(&rd) * step_ms };
		v[n].span_ms = store_read_u64(&rd);
		v[n].cpu_usec = store_read_u64(&rd);
		v[n].mem_bytes = store_read_u64(&rd);
		v[n].mem_max = store_read_u64(&rd);
		v[n].pids = store_read_u64(&rd);
		v[n].rx_bytes = store_read_u64(&rd);
		v[n].tx_bytes = store_read_u64(&rd);
		n++;
	}
	if (k < 0)
		return k;
	/* newest first from the query: oldest first for the caller */
	for (size_t i = 0; i < n / 2; i++) {
		struct usage_sample t = v[i];
		v[i] = v[n - 1 - i];
		v[n - 1 - i] = t;
	}
	*ret_n = n;
	return 0;
}

int store_usage_query(struct store *s, const char *ws_id, const char *tenant, uint64_t since_ms,
		      uint64_t step_ms, size_t max, struct usage_sample **ret, size_t *ret_n)
{
	_cleanup_stmt_finalize_ sqlite3_stmt *st = NULL;
	_cleanup_free_ struct usage_sample *v = NULL;
	const char *key = ws_id ? ws_id : tenant;
	size_t n = 0;
	int k;

	if (!s || step_ms == 0 || step_ms > INT64_MAX || since_ms > INT64_MAX || max == 0 || !ret ||
	    !ret_n)
		return -EINVAL;
	v = calloc(max, sizeof(*v));
	if (!v)
		return -ENOMEM;
	k = store_prepare_key(s,
			      ws_id  ? sql_workspace :
			      tenant ? sql_tenant :
				       sql_worker,
			      key, &st);
	if (k < 0)
		return k;
	if (sqlite3_bind_int64(st, 2, (int64_t)step_ms) != SQLITE_OK ||
	    sqlite3_bind_int64(st, 3, (int64_t)since_ms) != SQLITE_OK ||
	    sqlite3_bind_int64(st, 4, (int64_t)max) != SQLITE_OK)
		return -ENOMEM;
	k = read_points(st, step_ms, max, v, &n);
	if (k < 0)
		return k;
	*ret = TAKE_PTR(v);
	*ret_n = n;
	return 0;
}

/* Rows of [from, before) that are not minute rows already, merged per series and minute into
 * temp.usage_merge, deleted, and put back (added to a minute row that stands there). */
static int merge_table(struct store *s, bool workspaces, uint64_t from_ms, uint64_t before_ms,
		       uint64_t *ret_merged)
{
	const char *key_col = workspaces ? "workspace_id, " : "";
	const char *table = workspaces ? "usage_samples" : "usage_worker";
	const char *key_on = workspaces ? "workspace_id, ts" : "ts";
	const char *live = workspaces ? " AND workspace_id IN (SELECT id FROM workspaces)" : "";
	char sql[2048];
	int k;

	snprintf(sql, sizeof sql,
		 "DROP TABLE IF EXISTS temp.usage_merge;"
		 "CREATE TEMP TABLE usage_merge AS SELECT %s(ts + 59999) / 60000 * 60000 AS ts,"
		 " SUM(span_ms) AS span_ms, SUM(cpu_usec) AS cpu_usec,"
		 " SUM(mem_bytes * MAX(span_ms, 1)) / SUM(MAX(span_ms, 1)) AS mem_bytes,"
		 " MAX(mem_max) AS mem_max, MAX(pids) AS pids, SUM(rx_bytes) AS rx_bytes,"
		 " SUM(tx_bytes) AS tx_bytes%s FROM %s"
		 " WHERE ts >= %llu AND ts < %llu AND ts %% 60000 != 0 GROUP BY %s(ts + 59999) / "
		 "60000;",
		 key_col, workspaces ? "" : ", MAX(workspaces) AS workspaces", table,
		 (unsigned long long)from_ms, (unsigned long long)before_ms, key_col);
	k = store_exec(s, sql);
	if (k < 0)
		return k;
	snprintf(sql, sizeof sql,
		 "DELETE FROM %s WHERE ts >= %llu AND ts < %llu AND ts %% 60000 != 0", table,
		 (unsigned long long)from_ms, (unsigned long long)before_ms);
	k = store_exec(s, sql);
	if (k < 0)
		return k;
	*ret_merged += (uint64_t)store_changes(s);
	snprintf(
		sql, sizeof sql,
		"INSERT INTO %s SELECT * FROM temp.usage_merge WHERE true%s"
		" ON CONFLICT (%s) DO UPDATE SET"
		" mem_bytes = (mem_bytes * MAX(span_ms, 1) + excluded.mem_bytes *"
		"  MAX(excluded.span_ms, 1)) / (MAX(span_ms, 1) + MAX(excluded.span_ms, 1)),"
		" span_ms = span_ms + excluded.span_ms, cpu_usec = cpu_usec + excluded.cpu_usec,"
		" mem_max = MAX(mem_max, excluded.mem_max), pids = MAX(pids, excluded.pids),"
		" rx_bytes = rx_bytes + excluded.rx_bytes, tx_bytes = tx_bytes + excluded.tx_bytes;"
		"DROP TABLE temp.usage_merge",
		table, live, key_on);
	return store_exec(s, sql);
}

/* The oldest rows of table until it holds 9/10 of max_rows, when it holds more than max_rows. */
static int cap_table(struct store *s, const char *table, uint64_t max_rows, uint64_t *ret_deleted,
		     uint64_t *ret_rows)
{
	_cleanup_stmt_finalize_ sqlite3_stmt *st = NULL;
	char sql[256];
	uint64_t rows;
	int k;

	snprintf(sql, sizeof sql, "SELECT COUNT(*) FROM %s", table);
	k = store_prepare(s, sql, &st);
	if (k >= 0)
		k = store_step_row(st);
	if (k <= 0)
		return k < 0 ? k : -EIO;
	rows = (uint64_t)sqlite3_column_int64(st, 0);
	*ret_rows = rows;
	if (max_rows == 0 || rows <= max_rows)
		return 0;
	/* whole timestamps go: the rows of every series at the oldest ticks */
	snprintf(sql, sizeof sql,
		 "DELETE FROM %s WHERE ts <= (SELECT ts FROM %s ORDER BY ts LIMIT 1 OFFSET %llu)",
		 table, table, (unsigned long long)(rows - max_rows / 10 * 9 - 1));
	k = store_exec(s, sql);
	if (k < 0)
		return k;
	*ret_deleted += (uint64_t)store_changes(s);
	*ret_rows = rows - (uint64_t)store_changes(s);
	return 0;
}

/* Runs steps(s, a) in one transaction. */
static int in_transaction(struct store *s, int (*steps)(struct store *s, void *a), void *a)
{
	int k = store_begin(s);

	if (k < 0)
		return k;
	k = steps(s, a);
	if (k >= 0)
		k = store_commit(s);
	if (k < 0)
		store_rollback(s);
	return k;
}

struct merge_args {
	uint64_t from_ms, before_ms, merged;
};

static int merge_steps(struct store *s, void *userdata)
{
	struct merge_args *a = userdata;
	int k = merge_table(s, true, a->from_ms, a->before_ms, &a->merged);

	return k < 0 ? k : merge_table(s, false, a->from_ms, a->before_ms, &a->merged);
}

int store_usage_merge(struct store *s, uint64_t from_ms, uint64_t before_ms, uint64_t *ret_merged)
{
	struct merge_args a = { .from_ms = from_ms, .before_ms = before_ms };
	int k;

	if (!s || before_ms > INT64_MAX)
		return -EINVAL;
	if (before_ms <= from_ms)
		return 0;
	k = in_transaction(s, merge_steps, &a);
	if (k >= 0 && ret_merged)
		*ret_merged = a.merged;
	return k < 0 ? k : 0;
}

struct expire_args {
	uint64_t before_ms, max_rows;
	struct usage_prune_stats st;
};

static int expire_steps(struct store *s, void *userdata)
{
	struct expire_args *a = userdata;
	uint64_t worker_rows;
	char sql[256];
	int k;

	for (int i = 0; i < 2; i++) {
		snprintf(sql, sizeof sql, "DELETE FROM %s WHERE ts < %llu",
			 i == 0 ? "usage_samples" : "usage_worker",
			 (unsigned long long)a->before_ms);
		k = store_exec(s, sql);
		if (k < 0)
			return k;
		a->st.expired += (uint64_t)store_changes(s);
	}
	if (a->max_rows == 0)
		return 0;
	k = cap_table(s, "usage_samples", a->max_rows, &a->st.capped, &a->st.rows);
	if (k >= 0)
		k = cap_table(s, "usage_worker", MAX(a->max_rows / 100, 10000), &a->st.capped,
			      &worker_rows);
	return k;
}

int store_usage_expire(struct store *s, uint64_t before_ms, uint64_t max_rows,
		       struct usage_prune_stats *ret)
{
	struct expire_args a = { .before_ms = before_ms, .max_rows = max_rows };
	int k;

	if (!s || before_ms > INT64_MAX)
		return -EINVAL;
	k = in_transaction(s, expire_steps, &a);
	if (k >= 0 && ret)
		*ret = a.st;
	return k < 0 ? k : 0;
}

int store_usage_oldest(struct store *s, uint64_t *ret)
{
	_cleanup_stmt_finalize_ sqlite3_stmt *st = NULL;
	int k = store_prepare(
		s,
		"SELECT MIN(m) FROM (SELECT MIN(ts) AS m FROM usage_samples UNION ALL "
		"SELECT MIN(ts) FROM usage_worker)",
		&st);

	if (k >= 0)
		k = store_step_row(st);
	if (k <= 0)
		return k < 0 ? k : -EIO;
	*ret = sqlite3_column_type(st, 0) == SQLITE_NULL ? 0 :
							   (uint64_t)sqlite3_column_int64(st, 0);
	return 0;
}
