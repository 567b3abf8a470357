/* SPDX-License-Identifier: MIT */
/* The runs table. Insert, finish and get are on every exec's path: their statements stay
 * prepared on the handle. */

#include <errno.h>
#include <string.h>

#include "store/store-internal.h"

/* The SQL below spells "status = 0" for a running run. */
_Static_assert(RUN_RUNNING == 0, "runs.status 0 must mean running");

/* Everything but the output bytes; a list reads only these. */
#define RUN_META_COLUMNS                                                                           \
	"id, workspace_id, command, cwd, env_json, timeout_ms, max_output_bytes, status, "         \
	"exit_code, signal, oom_killed, truncated, reason, stdout_total, stderr_total, "           \
	"created_at, started_at, ended_at, cpu_usec, peak_memory, network_json"
#define RUN_OUTPUT_COLUMNS "stdout_head, stdout_tail, stderr_head, stderr_tail"

static void run_output_free(struct run_output *o)
{
	free(o->head);
	free(o->tail);
}

void run_row_free(struct run_row *r)
{
	if (!r)
		return;
	free(r->id);
	free(r->workspace_id);
	free(r->command);
	free(r->cwd);
	free(r->env_json);
	free(r->reason);
	free(r->network_json);
	run_output_free(&r->out[0]);
	run_output_free(&r->out[1]);
	*r = (struct run_row){};
}

/* The result columns, in the order insert and finish both name them. */
static void bind_result(struct store_binder *b, const struct run_row *r)
{
	store_bind_i64(b, r->status);
	store_bind_i64(b, r->exit_code);
	store_bind_i64(b, r->signal);
	store_bind_i64(b, r->oom_killed);
	store_bind_i64(b, r->truncated);
	store_bind_text(b, r->reason);
	store_bind_u64(b, r->out[0].total);
	store_bind_u64(b, r->out[1].total);
	store_bind_u64(b, r->started_at);
	store_bind_u64(b, r->ended_at);
	store_bind_u64(b, r->cpu_usec);
	store_bind_u64(b, r->peak_memory);
	store_bind_blob(b, r->out[0].head, r->out[0].head_len);
	store_bind_blob(b, r->out[0].tail, r->out[0].tail_len);
	store_bind_blob(b, r->out[1].head, r->out[1].head_len);
	store_bind_blob(b, r->out[1].tail, r->out[1].tail_len);
	store_bind_text(b, r->network_json);
}

int store_run_insert(struct store *s, const struct run_row *r)
{
	_cleanup_stmt_reset_ sqlite3_stmt *st = NULL;
	struct store_binder b;
	int k;

	if (!s || !r || !r->id || !r->workspace_id)
		return -EINVAL;
	k = store_stmt(
		s, STORE_STMT_RUN_INSERT,
		"INSERT INTO runs (status, exit_code, signal, oom_killed, truncated, reason, "
		"stdout_total, stderr_total, started_at, ended_at, cpu_usec, peak_memory, " RUN_OUTPUT_COLUMNS
		", network_json, id, workspace_id, command, cwd, env_json, timeout_ms, "
		"max_output_bytes, created_at) "
		"VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
		&st);
	if (k < 0)
		return k;
	b = STORE_BINDER(st);
	bind_result(&b, r);
	store_bind_text(&b, r->id);
	store_bind_text(&b, r->workspace_id);
	store_bind_text(&b, r->command);
	store_bind_text(&b, r->cwd);
	store_bind_text(&b, r->env_json);
	store_bind_u64(&b, r->timeout_ms);
	store_bind_u64(&b, r->max_output_bytes);
	store_bind_u64(&b, r->created_at);
	k = store_exec_bound(s, &b);
	return k < 0 ? k : 0;
}

/* Whether the workspace has a run with this id: 1, 0, or -errno. */
static int run_exists(struct store *s, const char *workspace_id, const char *id)
{
	_cleanup_stmt_reset_ sqlite3_stmt *st = NULL;
	struct store_binder b;
	int k;

	k = store_stmt(s, STORE_STMT_RUN_EXISTS,
		       "SELECT 1 FROM runs WHERE id = ? AND workspace_id = ?", &st);
	if (k < 0)
		return k;
	b = STORE_BINDER(st);
	store_bind_text(&b, id);
	store_bind_text(&b, workspace_id);
	k = store_bind_result(&b);
	if (k < 0)
		return k;
	return store_step_row(st);
}

/* Only a running row of the workspace changes, so a duplicate completion report cannot
 * overwrite the first, nor a report about another workspace's run touch it. A started_at of 0
 * keeps the time store_run_set_started() recorded. */
static int run_finish_update(struct store *s, const struct run_row *r)
{
	_cleanup_stmt_reset_ sqlite3_stmt *st = NULL;
	struct store_binder b;
	int k;

	k = store_stmt(s, STORE_STMT_RUN_FINISH,
		       "UPDATE runs SET status = ?, exit_code = ?, signal = ?, oom_killed = ?, "
		       "truncated = ?, reason = ?, stdout_total = ?, stderr_total = ?, "
		       "started_at = coalesce(nullif(?, 0), started_at), ended_at = ?, "
		       "cpu_usec = ?, peak_memory = ?, stdout_head = ?, stdout_tail = ?, "
		       "stderr_head = ?, stderr_tail = ?, network_json = ? "
		       "WHERE id = ? AND workspace_id = ? AND status = 0",
		       &st);
	if (k < 0)
		return k;
	b = STORE_BINDER(st);
	bind_result(&b, r);
	store_bind_text(&b, r->id);
	store_bind_text(&b, r->workspace_id);
	k = store_exec_bound(s, &b);
	return k < 0 ? k : k > 0;
}

int store_run_finish(struct store *s, const struct run_row *r)
{
	int k;

	if (!s || !r || !r->id || !r->workspace_id || r->status == RUN_RUNNING)
		return -EINVAL;
	k = run_finish_update(s, r);
	if (k != 0)
		return k;
	k = run_exists(s, r->workspace_id, r->id);
	if (k < 0)
		return k;
	return k ? 0 : -ENOENT;
}

int store_run_set_started(struct store *s, const char *id, uint64_t started_at)
{
	_cleanup_stmt_reset_ sqlite3_stmt *st = NULL;
	struct store_binder b;
	int k;

	if (!s || !id)
		return -EINVAL;
	k = store_stmt(s, STORE_STMT_RUN_SET_STARTED, "UPDATE runs SET started_at = ? WHERE id = ?",
		       &st);
	if (k < 0)
		return k;
	b = STORE_BINDER(st);
	store_bind_u64(&b, started_at);
	store_bind_text(&b, id);
	k = store_exec_bound(s, &b);
	if (k < 0)
		return k;
	return k > 0 ? 0 : -ENOENT;
}

/* Reads RUN_META_COLUMNS, then RUN_OUTPUT_COLUMNS when the bool at userdata is true, into *ret
 * (untouched on failure). */
static int run_read(sqlite3_stmt *st, void *userdata, void *ret)
{
	bool with_output = *(const bool *)userdata;
	struct store_reader rd = STORE_READER(st);
	struct run_row r = {};

	store_read_text(&rd, &r.id);
	store_read_text(&rd, &r.workspace_id);
	store_read_text(&rd, &r.command);
	store_read_text(&rd, &r.cwd);
	store_read_text(&rd, &r.env_json);
	r.timeout_ms = store_read_u64(&rd);
	r.max_output_bytes = store_read_u64(&rd);
	r.status = (enum run_status)store_read_i64(&rd);
	r.exit_code = store_read_i64(&rd);
	r.signal = store_read_i64(&rd);
	r.oom_killed = store_read_i64(&rd) != 0;
	r.truncated = store_read_i64(&rd) != 0;
	store_read_text(&rd, &r.reason);
	r.out[0].total = store_read_u64(&rd);
	r.out[1].total = store_read_u64(&rd);
	r.created_at = store_read_u64(&rd);
	r.started_at = store_read_u64(&rd);
	r.ended_at = store_read_u64(&rd);
	r.cpu_usec = store_read_u64(&rd);
	r.peak_memory = store_read_u64(&rd);
	store_read_text(&rd, &r.network_json);
	if (with_output) {
		store_read_blob(&rd, &r.out[0].head, &r.out[0].head_len);
		store_read_blob(&rd, &r.out[0].tail, &r.out[0].tail_len);
		store_read_blob(&rd, &r.out[1].head, &r.out[1].head_len);
		store_read_blob(&rd, &r.out[1].tail, &r.out[1].tail_len);
	}
	if (rd.err < 0) {
		run_row_free(&r);
		return rd.err;
	}
	*(struct run_row *)ret = r;
	return 0;
}

int store_run_get(struct store *s, const char *workspace_id, const char *id, struct run_row *ret)
{
	_cleanup_stmt_reset_ sqlite3_stmt *st = NULL;
	struct store_binder b;
	int k;

	if (!s || !workspace_id || !id || !ret)
		return -EINVAL;
	k = store_stmt(s, STORE_STMT_RUN_GET,
		       "SELECT " RUN_META_COLUMNS ", " RUN_OUTPUT_COLUMNS
		       " FROM runs WHERE id = ? AND workspace_id = ?",
		       &st);
	if (k < 0)
		return k;
	b = STORE_BINDER(st);
	store_bind_text(&b, id);
	store_bind_text(&b, workspace_id);
	k = store_bind_result(&b);
	if (k < 0)
		return k;
	k = store_step_row(st);
	if (k <= 0)
		return k < 0 ? k : -ENOENT;
	return run_read(st, &(bool){ true }, ret);
}

/* SQLite's LIMIT is signed: a limit beyond it means no limit. */
static int64_t sql_limit(size_t n)
{
	return n > INT64_MAX ? -1 : (int64_t)n;
}

STORE_ROW_TYPE(run_rows, struct run_row, run_read, run_row_free);

int store_run_list(struct store *s, const char *workspace_id, size_t limit, struct run_row **ret,
		   size_t *ret_n)
{
	_cleanup_stmt_finalize_ sqlite3_stmt *st = NULL;
	struct store_binder b;
	int k;

	if (!s || !workspace_id || !ret || !ret_n)
		return -EINVAL;
	k = store_prepare(s,
			  "SELECT " RUN_META_COLUMNS " FROM runs WHERE workspace_id = ? "
			  "ORDER BY created_at DESC, rowid DESC LIMIT ?",
			  &st);
	if (k < 0)
		return k;
	b = STORE_BINDER(st);
	store_bind_text(&b, workspace_id);
	store_bind_i64(&b, sql_limit(limit));
	k = store_bind_result(&b);
	if (k < 0)
		return k;
	return store_list_rows(st, &run_rows, &(bool){ false }, (void **)ret, ret_n);
}

static int run_read_id(sqlite3_stmt *st, void *userdata, void *ret)
{
	struct store_reader rd = STORE_READER(st);
	char *id;

	store_read_text(&rd, &id);
	if (rd.err < 0)
		return rd.err;
	if (!id)
		return -EIO;
	*(char **)ret = id;
	return 0;
}

static void id_free(char **id)
{
	free(*id);
}

STORE_ROW_TYPE(run_ids, char *, run_read_id, id_free);

/* The array is also NULL-terminated (store_list_rows() ends it with a zeroed element). */
int store_run_list_running(struct store *s, const char *workspace_id, char ***ret_ids,
			   size_t *ret_n)
{
	if (!s || !workspace_id || !ret_ids || !ret_n)
		return -EINVAL;
	return store_list(s,
			  "SELECT id FROM runs WHERE workspace_id = ? AND status = 0 "
			  "ORDER BY created_at, rowid",
			  workspace_id, &run_ids, NULL, (void **)ret_ids, ret_n);
}

static int prune_exec(struct store *s, const char *sql, int64_t arg, int64_t *deleted)
{
	_cleanup_stmt_finalize_ sqlite3_stmt *st = NULL;
	struct store_binder b;
	int k;

	k = store_prepare(s, sql, &st);
	if (k < 0)
		return k;
	b = STORE_BINDER(st);
	store_bind_i64(&b, arg);
	k = store_exec_bound(s, &b);
	if (k < 0)
		return k;
	*deleted += k;
	return 0;
}

static int prune_both(struct store *s, uint64_t ended_before, size_t keep, int64_t *deleted)
{
	int k;

	k = prune_exec(s, "DELETE FROM runs WHERE status != 0 AND ended_at < ?",
		       (int64_t)MIN(ended_before, (uint64_t)INT64_MAX), deleted);
	if (k < 0 || keep > INT64_MAX)
		return k;
	return prune_exec(s,
			  "DELETE FROM runs WHERE rowid IN (SELECT rowid FROM (SELECT rowid, "
			  "row_number() OVER (PARTITION BY workspace_id ORDER BY ended_at DESC, "
			  "created_at DESC, rowid DESC) AS n FROM runs WHERE status != 0) "
			  "WHERE n > ?)",
			  (int64_t)keep, deleted);
}

/* Both deletes in one savepoint: inside a caller's transaction it nests, outside it is one. */
int store_run_prune(struct store *s, uint64_t ended_before, size_t keep_per_workspace)
{
	int64_t deleted = 0;
	int k;

	if (!s)
		return -EINVAL;
	k = store_exec(s, "SAVEPOINT run_prune");
	if (k < 0)
		return k;
	k = prune_both(s, ended_before, keep_per_workspace, &deleted);
	if (k >= 0)
		k = store_exec(s, "RELEASE run_prune");
	if (k < 0) {
		store_exec(s, "ROLLBACK TO run_prune");
		store_exec(s, "RELEASE run_prune");
		return k;
	}
	return (int)MIN(deleted, (int64_t)INT32_MAX);
}
