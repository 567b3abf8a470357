/* SPDX-License-Identifier: MIT */
/* The contexts and cells tables: code contexts, their kernels' hidden services, and each cell's
 * run and validated result. */

#include <errno.h>
#include <string.h>

#include "store/store-internal.h"

#define CONTEXT_COLUMNS                                                                            \
	"id, workspace_id, language, cwd, env_json, service_name, state, reason, "                 \
	"execution_count, next_cell, created_at"
#define CELL_COLUMNS                                                                               \
	"id, context_id, number, run_id, status, execution_count, results_json, error_json, "      \
	"created_at, ended_at, kernel_cpu_ms, kernel_memory_bytes"

void context_row_free(struct context_row *r)
{
	if (!r)
		return;
	free(r->id);
	free(r->workspace_id);
	free(r->language);
	free(r->cwd);
	free(r->env_json);
	free(r->service_name);
	free(r->state);
	free(r->reason);
	*r = (struct context_row){};
}

void cell_row_free(struct cell_row *r)
{
	if (!r)
		return;
	free(r->id);
	free(r->context_id);
	free(r->run_id);
	free(r->status);
	free(r->results_json);
	free(r->error_json);
	*r = (struct cell_row){};
}

static int context_read(sqlite3_stmt *st, void *userdata, void *ret)
{
	struct store_reader rd = STORE_READER(st);
	struct context_row r = {};

	store_read_text(&rd, &r.id);
	store_read_text(&rd, &r.workspace_id);
	store_read_text(&rd, &r.language);
	store_read_text(&rd, &r.cwd);
	store_read_text(&rd, &r.env_json);
	store_read_text(&rd, &r.service_name);
	store_read_text(&rd, &r.state);
	store_read_text(&rd, &r.reason);
	r.execution_count = store_read_u64(&rd);
	r.next_cell = store_read_u64(&rd);
	r.created_at = store_read_u64(&rd);
	if (rd.err < 0 || !r.id || !r.workspace_id || !r.language || !r.service_name || !r.state) {
		context_row_free(&r);
		return rd.err < 0 ? rd.err : -EIO;
	}
	*(struct context_row *)ret = r;
	return 0;
}

/* A nullable integer column: -1 when NULL. */
static int64_t read_opt_i64(struct store_reader *rd)
{
	if (sqlite3_column_type(rd->st, rd->idx) == SQLITE_NULL) {
		rd->idx++;
		return -1;
	}
	return store_read_i64(rd);
}

static void bind_opt_i64(struct store_binder *b, int64_t v)
{
	if (v < 0)
		store_bind_text(b, NULL);
	else
		store_bind_i64(b, v);
}

static int cell_read(sqlite3_stmt *st, void *userdata, void *ret)
{
	struct store_reader rd = STORE_READER(st);
	struct cell_row r = {};

	store_read_text(&rd, &r.id);
	store_read_text(&rd, &r.context_id);
	r.number = store_read_u64(&rd);
	store_read_text(&rd, &r.run_id);
	store_read_text(&rd, &r.status);
	r.execution_count = sqlite3_column_type(st, rd.idx) == SQLITE_NULL ? -1 : 0;
	if (r.execution_count == 0)
		r.execution_count = store_read_i64(&rd);
	else
		rd.idx++;
	store_read_text(&rd, &r.results_json);
	store_read_text(&rd, &r.error_json);
	r.created_at = store_read_u64(&rd);
	r.ended_at = store_read_u64(&rd);
	r.kernel_cpu_ms = read_opt_i64(&rd);
	r.kernel_memory_bytes = read_opt_i64(&rd);
	if (rd.err < 0 || !r.id || !r.context_id || !r.run_id || !r.status) {
		cell_row_free(&r);
		return rd.err < 0 ? rd.err : -EIO;
	}
	*(struct cell_row *)ret = r;
	return 0;
}

int store_context_insert(struct store *s, const struct context_row *r)
{
	_cleanup_stmt_finalize_ sqlite3_stmt *st = NULL;
	struct store_binder b;
	int k;

	if (!s || !r || !r->id || !r->workspace_id)
		return -EINVAL;
	k = store_prepare(s,
			  "INSERT INTO contexts (" CONTEXT_COLUMNS
			  ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
			  &st);
	if (k < 0)
		return k;
	b = STORE_BINDER(st);
	store_bind_text(&b, r->id);
	store_bind_text(&b, r->workspace_id);
	store_bind_text(&b, r->language);
	store_bind_text(&b, r->cwd);
	store_bind_text(&b, r->env_json);
	store_bind_text(&b, r->service_name);
	store_bind_text(&b, r->state);
	store_bind_text(&b, r->reason);
	store_bind_u64(&b, r->execution_count);
	store_bind_u64(&b, r->next_cell);
	store_bind_u64(&b, r->created_at);
	k = store_exec_bound(s, &b);
	return k < 0 ? k : 0;
}

int store_context_update(struct store *s, const struct context_row *r)
{
	_cleanup_stmt_finalize_ sqlite3_stmt *st = NULL;
	struct store_binder b;
	int k;

	if (!s || !r || !r->id)
		return -EINVAL;
	k = store_prepare(s,
			  "UPDATE contexts SET state = ?, reason = ?, execution_count = ?, "
			  "next_cell = ? WHERE id = ?",
			  &st);
	if (k < 0)
		return k;
	b = STORE_BINDER(st);
	store_bind_text(&b, r->state);
	store_bind_text(&b, r->reason);
	store_bind_u64(&b, r->execution_count);
	store_bind_u64(&b, r->next_cell);
	store_bind_text(&b, r->id);
	k = store_exec_bound(s, &b);
	if (k < 0)
		return k;
	return k > 0 ? 0 : -ENOENT;
}

int store_context_delete(struct store *s, const char *id)
{
	_cleanup_stmt_finalize_ sqlite3_stmt *st = NULL;
	int k;

	if (!s || !id)
		return -EINVAL;
	k = store_prepare_key(s, "DELETE FROM contexts WHERE id = ?", id, &st);
	return k < 0 ? k : store_step_done(st);
}

STORE_ROW_TYPE(context_rows, struct context_row, context_read, context_row_free);
STORE_ROW_TYPE(cell_rows, struct cell_row, cell_read, cell_row_free);

int store_context_list_all(struct store *s, struct context_row **ret, size_t *ret_n)
{
	if (!s || !ret || !ret_n)
		return -EINVAL;
	return store_list(s, "SELECT " CONTEXT_COLUMNS " FROM contexts ORDER BY created_at, rowid",
			  NULL, &context_rows, NULL, (void **)ret, ret_n);
}

static int cell_prune(struct store *s, const char *context_id, size_t keep)
{
	_cleanup_stmt_finalize_ sqlite3_stmt *st = NULL;
	struct store_binder b;
	int k;

	k = store_prepare(s,
			  "DELETE FROM cells WHERE context_id = ?1 AND status != 'running' AND id "
			  "NOT IN (SELECT id FROM cells WHERE context_id = ?1 ORDER BY created_at "
			  "DESC, rowid DESC LIMIT ?2)",
			  &st);
	if (k < 0)
		return k;
	b = STORE_BINDER(st);
	store_bind_text(&b, context_id);
	store_bind_u64(&b, keep);
	k = store_bind_result(&b);
	return k < 0 ? k : store_step_done(st);
}

int store_cell_insert(struct store *s, const struct cell_row *r, size_t keep)
{
	_cleanup_stmt_finalize_ sqlite3_stmt *st = NULL;
	struct store_binder b;
	int k;

	if (!s || !r || !r->id || !r->context_id)
		return -EINVAL;
	k = store_prepare(s,
			  "INSERT INTO cells (" CELL_COLUMNS
			  ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
			  &st);
	if (k < 0)
		return k;
	b = STORE_BINDER(st);
	store_bind_text(&b, r->id);
	store_bind_text(&b, r->context_id);
	store_bind_u64(&b, r->number);
	store_bind_text(&b, r->run_id);
	store_bind_text(&b, r->status);
	if (r->execution_count < 0)
		store_bind_text(&b, NULL);
	else
		store_bind_i64(&b, r->execution_count);
	store_bind_text(&b, r->results_json);
	store_bind_text(&b, r->error_json);
	store_bind_u64(&b, r->created_at);
	store_bind_u64(&b, r->ended_at);
	bind_opt_i64(&b, r->kernel_cpu_ms);
	bind_opt_i64(&b, r->kernel_memory_bytes);
	k = store_exec_bound(s, &b);
	if (k >= 0 && keep > 0)
		k = cell_prune(s, r->context_id, keep);
	return k < 0 ? k : 0;
}

int store_cell_finish(struct store *s, const struct cell_row *r)
{
	_cleanup_stmt_finalize_ sqlite3_stmt *st = NULL;
	struct store_binder b;
	int k;

	if (!s || !r || !r->id)
		return -EINVAL;
	k = store_prepare(
		s,
		"UPDATE cells SET status = ?, execution_count = ?, results_json = ?, "
		"error_json = ?, ended_at = ?, kernel_cpu_ms = ?, kernel_memory_bytes = ? "
		"WHERE id = ? AND status = 'running'",
		&st);
	if (k < 0)
		return k;
	b = STORE_BINDER(st);
	store_bind_text(&b, r->status);
	if (r->execution_count < 0)
		store_bind_text(&b, NULL);
	else
		store_bind_i64(&b, r->execution_count);
	store_bind_text(&b, r->results_json);
	store_bind_text(&b, r->error_json);
	store_bind_u64(&b, r->ended_at);
	bind_opt_i64(&b, r->kernel_cpu_ms);
	bind_opt_i64(&b, r->kernel_memory_bytes);
	store_bind_text(&b, r->id);
	k = store_exec_bound(s, &b);
	if (k != 0)
		return k < 0 ? k : 1;
	struct cell_row old = {};
	k = store_cell_get(s, r->context_id, r->id, &old);
	cell_row_free(&old);
	return k < 0 ? k : 0;
}

int store_cell_get(struct store *s, const char *context_id, const char *id, struct cell_row *ret)
{
	_cleanup_stmt_finalize_ sqlite3_stmt *st = NULL;
	struct store_binder b;
	int k;

	if (!s || !context_id || !id || !ret)
		return -EINVAL;
	k = store_prepare(s, "SELECT " CELL_COLUMNS " FROM cells WHERE context_id = ? AND id = ?",
			  &st);
	if (k < 0)
		return k;
	b = STORE_BINDER(st);
	store_bind_text(&b, context_id);
	store_bind_text(&b, id);
	k = store_bind_result(&b);
	if (k >= 0)
		k = store_step_row(st);
	if (k == 0)
		return -ENOENT;
	return k < 0 ? k : cell_read(st, NULL, ret);
}

int store_cell_list(struct store *s, const char *context_id, size_t limit, struct cell_row **ret,
		    size_t *ret_n)
{
	_cleanup_stmt_finalize_ sqlite3_stmt *st = NULL;
	struct store_binder b;
	int k;

	if (!s || !context_id || !ret || !ret_n)
		return -EINVAL;
	k = store_prepare(s,
			  "SELECT " CELL_COLUMNS " FROM cells WHERE context_id = ? ORDER BY "
			  "created_at DESC, rowid DESC LIMIT ?",
			  &st);
	if (k < 0)
		return k;
	b = STORE_BINDER(st);
	store_bind_text(&b, context_id);
	store_bind_u64(&b, limit);
	k = store_bind_result(&b);
	if (k < 0)
		return k;
	return store_list_rows(st, &cell_rows, NULL, (void **)ret, ret_n);
}
