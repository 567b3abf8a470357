/* SPDX-License-Identifier: MIT */
/* The terminals table: a terminal's request, its size, its state and how it ended. */

#include <errno.h>
#include <string.h>

#include "store/store-internal.h"

#define TERMINAL_COLUMNS                                                                           \
	"id, workspace_id, command, cwd, env_json, cols, rows, state, reason, pid, exit_code, "    \
	"signal, output_bytes, created_at, started_at, ended_at"

void terminal_row_free(struct terminal_row *r)
{
	if (!r)
		return;
	free(r->id);
	free(r->workspace_id);
	free(r->command);
	free(r->cwd);
	free(r->env_json);
	free(r->reason);
	*r = (struct terminal_row){};
}

static int terminal_read(sqlite3_stmt *st, void *userdata, void *ret)
{
	struct store_reader rd = STORE_READER(st);
	struct terminal_row r = {};

	store_read_text(&rd, &r.id);
	store_read_text(&rd, &r.workspace_id);
	store_read_text(&rd, &r.command);
	store_read_text(&rd, &r.cwd);
	store_read_text(&rd, &r.env_json);
	r.cols = store_read_u64(&rd);
	r.rows = store_read_u64(&rd);
	r.state = store_read_enum(&rd, terminal_state_from_string);
	store_read_text(&rd, &r.reason);
	r.pid = store_read_i64(&rd);
	r.exit_code = store_read_i64(&rd);
	r.signal = store_read_i64(&rd);
	r.output_bytes = store_read_u64(&rd);
	r.created_at = store_read_u64(&rd);
	r.started_at = store_read_u64(&rd);
	r.ended_at = store_read_u64(&rd);
	if (rd.err < 0 || !r.id || !r.workspace_id) {
		terminal_row_free(&r);
		return rd.err < 0 ? rd.err : -EIO;
	}
	*(struct terminal_row *)ret = r;
	return 0;
}

/* Ended terminals beyond the newest `keep` of the workspace go. The two states spelled below are
 * the live ones, terminal_state_is_live(). */
static int terminal_prune(struct store *s, const char *workspace_id, size_t keep)
{
	_cleanup_stmt_finalize_ sqlite3_stmt *st = NULL;
	struct store_binder b;
	int k;

	k = store_prepare(s,
			  "DELETE FROM terminals WHERE workspace_id = ?1 AND state NOT IN "
			  "('starting', 'running') AND id NOT IN (SELECT id FROM terminals WHERE "
			  "workspace_id = ?1 AND state NOT IN ('starting', 'running') ORDER BY "
			  "created_at DESC, rowid DESC LIMIT ?2)",
			  &st);
	if (k < 0)
		return k;
	b = STORE_BINDER(st);
	store_bind_text(&b, workspace_id);
	store_bind_u64(&b, keep);
	k = store_bind_result(&b);
	return k < 0 ? k : store_step_done(st);
}

int store_terminal_insert(struct store *s, const struct terminal_row *r, size_t keep_ended)
{
	_cleanup_stmt_finalize_ sqlite3_stmt *st = NULL;
	struct store_binder b;
	int k;

	if (!s || !r || !r->id || !r->workspace_id)
		return -EINVAL;
	k = store_prepare(s,
			  "INSERT INTO terminals (" TERMINAL_COLUMNS ") VALUES (?, ?, ?, ?, ?, "
			  "?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
			  &st);
	if (k < 0)
		return k;
	b = STORE_BINDER(st);
	store_bind_text(&b, r->id);
	store_bind_text(&b, r->workspace_id);
	store_bind_text(&b, r->command);
	store_bind_text(&b, r->cwd);
	store_bind_text(&b, r->env_json);
	store_bind_u64(&b, r->cols);
	store_bind_u64(&b, r->rows);
	store_bind_text(&b, terminal_state_to_string(r->state));
	store_bind_text(&b, r->reason);
	store_bind_i64(&b, r->pid);
	store_bind_i64(&b, r->exit_code);
	store_bind_i64(&b, r->signal);
	store_bind_u64(&b, r->output_bytes);
	store_bind_u64(&b, r->created_at);
	store_bind_u64(&b, r->started_at);
	store_bind_u64(&b, r->ended_at);
	k = store_bind_result(&b);
	if (k >= 0)
		k = store_step_done(st);
	if (k >= 0 && keep_ended > 0)
		k = terminal_prune(s, r->workspace_id, keep_ended);
	return k;
}

int store_terminal_update(struct store *s, const struct terminal_row *r)
{
	_cleanup_stmt_finalize_ sqlite3_stmt *st = NULL;
	struct store_binder b;
	int k;

	if (!s || !r || !r->id)
		return -EINVAL;
	k = store_prepare(s,
			  "UPDATE terminals SET command = ?, cols = ?, rows = ?, state = ?, "
			  "reason = ?, pid = ?, exit_code = ?, signal = ?, output_bytes = ?, "
			  "started_at = ?, ended_at = ? WHERE id = ?",
			  &st);
	if (k < 0)
		return k;
	b = STORE_BINDER(st);
	store_bind_text(&b, r->command);
	store_bind_u64(&b, r->cols);
	store_bind_u64(&b, r->rows);
	store_bind_text(&b, terminal_state_to_string(r->state));
	store_bind_text(&b, r->reason);
	store_bind_i64(&b, r->pid);
	store_bind_i64(&b, r->exit_code);
	store_bind_i64(&b, r->signal);
	store_bind_u64(&b, r->output_bytes);
	store_bind_u64(&b, r->started_at);
	store_bind_u64(&b, r->ended_at);
	store_bind_text(&b, r->id);
	k = store_exec_bound(s, &b);
	if (k < 0)
		return k;
	return k > 0 ? 0 : -ENOENT;
}

int store_terminal_get(struct store *s, const char *workspace_id, const char *id,
		       struct terminal_row *ret)
{
	_cleanup_stmt_finalize_ sqlite3_stmt *st = NULL;
	struct store_binder b;
	int k;

	if (!s || !workspace_id || !id || !ret)
		return -EINVAL;
	k = store_prepare(s,
			  "SELECT " TERMINAL_COLUMNS " FROM terminals WHERE workspace_id = ? AND "
			  "id = ?",
			  &st);
	if (k < 0)
		return k;
	b = STORE_BINDER(st);
	store_bind_text(&b, workspace_id);
	store_bind_text(&b, id);
	k = store_bind_result(&b);
	if (k >= 0)
		k = store_step_row(st);
	if (k == 0)
		return -ENOENT;
	return k < 0 ? k : terminal_read(st, NULL, ret);
}

STORE_ROW_TYPE(terminal_rows, struct terminal_row, terminal_read, terminal_row_free);

int store_terminal_list(struct store *s, const char *workspace_id, struct terminal_row **ret,
			size_t *ret_n)
{
	if (!s || !workspace_id || !ret || !ret_n)
		return -EINVAL;
	return store_list(s,
			  "SELECT " TERMINAL_COLUMNS " FROM terminals WHERE workspace_id = ? "
			  "ORDER BY created_at, rowid",
			  workspace_id, &terminal_rows, NULL, (void **)ret, ret_n);
}
