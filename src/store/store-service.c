/* SPDX-License-Identifier: MIT */
/* The services and service_attempts tables. */

#include <errno.h>
#include <string.h>

#include "store/store-internal.h"

#define SERVICE_COLUMNS                                                                            \
	"id, workspace_id, name, command, cwd, env_json, restart_policy, max_restarts, delay_ms, " \
	"backoff_permille, max_delay_ms, stop_signal, stop_timeout_ms, autostart, "                \
	"max_output_bytes, created_at, state, reason, restart_count, next_restart_at, main_pid, "  \
	"current_attempt, attempt_started_at, next_attempt, stopping, updated_at, agent_id, "      \
	"reset_after_ms"
#define ATTEMPT_META_COLUMNS                                                                       \
	"service_id, number, started_at, ended_at, exit_code, signal, end_reason, reason, "        \
	"daemonized, output_dropped, stdout_total, stderr_total"
#define ATTEMPT_OUTPUT_COLUMNS "stdout_head, stdout_tail, stderr_head, stderr_tail"

void service_row_free(struct service_row *r)
{
	if (!r)
		return;
	free(r->id);
	free(r->workspace_id);
	free(r->name);
	free(r->command);
	free(r->cwd);
	free(r->env_json);
	free(r->reason);
	free(r->agent_id);
	*r = (struct service_row){};
}

void service_attempt_row_free(struct service_attempt_row *r)
{
	if (!r)
		return;
	free(r->service_id);
	free(r->reason);
	for (int i = 0; i < 2; i++) {
		free(r->out[i].head);
		free(r->out[i].tail);
	}
	*r = (struct service_attempt_row){};
}

/* The state columns, in the order insert and update both name them. */
static void bind_state(struct store_binder *b, const struct service_row *r)
{
	store_bind_text(b, service_state_to_string(r->state));
	store_bind_text(b, r->reason);
	store_bind_u64(b, r->restart_count);
	store_bind_u64(b, r->next_restart_at);
	store_bind_i64(b, r->main_pid);
	store_bind_u64(b, r->current_attempt);
	store_bind_u64(b, r->attempt_started_at);
	store_bind_u64(b, r->next_attempt);
	store_bind_i64(b, r->stopping);
	store_bind_u64(b, r->updated_at);
	store_bind_text(b, r->agent_id);
}

int store_service_insert(struct store *s, const struct service_row *r)
{
	_cleanup_stmt_finalize_ sqlite3_stmt *st = NULL;
	struct store_binder b;
	int k;

	if (!s || !r || !r->id || !r->workspace_id || !r->name)
		return -EINVAL;
	k = store_prepare(s,
			  "INSERT INTO services (" SERVICE_COLUMNS ") VALUES (?, ?, ?, ?, ?, ?, ?, "
			  "?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
			  &st);
	if (k < 0)
		return k;
	b = STORE_BINDER(st);
	store_bind_text(&b, r->id);
	store_bind_text(&b, r->workspace_id);
	store_bind_text(&b, r->name);
	store_bind_text(&b, r->command);
	store_bind_text(&b, r->cwd);
	store_bind_text(&b, r->env_json);
	store_bind_text(&b, service_policy_to_string(r->restart_policy));
	store_bind_u64(&b, r->max_restarts);
	store_bind_u64(&b, r->delay_ms);
	store_bind_u64(&b, r->backoff_permille);
	store_bind_u64(&b, r->max_delay_ms);
	store_bind_i64(&b, r->stop_signal);
	store_bind_u64(&b, r->stop_timeout_ms);
	store_bind_i64(&b, r->autostart);
	store_bind_u64(&b, r->max_output_bytes);
	store_bind_u64(&b, r->created_at);
	bind_state(&b, r);
	store_bind_u64(&b, r->reset_after_ms);
	k = store_exec_bound(s, &b);
	return k < 0 ? k : 0;
}

int store_service_update(struct store *s, const struct service_row *r)
{
	_cleanup_stmt_finalize_ sqlite3_stmt *st = NULL;
	struct store_binder b;
	int k;

	if (!s || !r || !r->id)
		return -EINVAL;
	k = store_prepare(s,
			  "UPDATE services SET state = ?, reason = ?, restart_count = ?, "
			  "next_restart_at = ?, main_pid = ?, current_attempt = ?, "
			  "attempt_started_at = ?, next_attempt = ?, stopping = ?, updated_at = ?, "
			  "agent_id = ? "
			  "WHERE id = ?",
			  &st);
	if (k < 0)
		return k;
	b = STORE_BINDER(st);
	bind_state(&b, r);
	store_bind_text(&b, r->id);
	k = store_exec_bound(s, &b);
	if (k < 0)
		return k;
	return k > 0 ? 0 : -ENOENT;
}

int store_service_delete(struct store *s, const char *id)
{
	_cleanup_stmt_finalize_ sqlite3_stmt *st = NULL;
	int k;

	if (!s || !id)
		return -EINVAL;
	k = store_prepare_key(s, "DELETE FROM services WHERE id = ?", id, &st);
	return k < 0 ? k : store_step_done(st);
}

static int service_read(sqlite3_stmt *st, void *userdata, void *ret)
{
	struct store_reader rd = STORE_READER(st);
	struct service_row r = {};

	store_read_text(&rd, &r.id);
	store_read_text(&rd, &r.workspace_id);
	store_read_text(&rd, &r.name);
	store_read_text(&rd, &r.command);
	store_read_text(&rd, &r.cwd);
	store_read_text(&rd, &r.env_json);
	r.restart_policy = store_read_enum(&rd, service_policy_from_string);
	r.max_restarts = store_read_u64(&rd);
	r.delay_ms = store_read_u64(&rd);
	r.backoff_permille = store_read_u64(&rd);
	r.max_delay_ms = store_read_u64(&rd);
	r.stop_signal = store_read_i64(&rd);
	r.stop_timeout_ms = store_read_u64(&rd);
	r.autostart = store_read_i64(&rd) != 0;
	r.max_output_bytes = store_read_u64(&rd);
	r.created_at = store_read_u64(&rd);
	r.state = store_read_enum(&rd, service_state_from_string);
	store_read_text(&rd, &r.reason);
	r.restart_count = store_read_u64(&rd);
	r.next_restart_at = store_read_u64(&rd);
	r.main_pid = store_read_i64(&rd);
	r.current_attempt = store_read_u64(&rd);
	r.attempt_started_at = store_read_u64(&rd);
	r.next_attempt = store_read_u64(&rd);
	r.stopping = store_read_i64(&rd) != 0;
	r.updated_at = store_read_u64(&rd);
	store_read_text(&rd, &r.agent_id);
	r.reset_after_ms = store_read_u64(&rd);
	if (rd.err < 0 || !r.id || !r.name) {
		service_row_free(&r);
		return rd.err < 0 ? rd.err : -EIO;
	}
	*(struct service_row *)ret = r;
	return 0;
}

STORE_ROW_TYPE(service_rows, struct service_row, service_read, service_row_free);

int store_service_list(struct store *s, const char *workspace_id, struct service_row **ret,
		       size_t *ret_n)
{
	if (!s || !workspace_id || !ret || !ret_n)
		return -EINVAL;
	return store_list(s,
			  "SELECT " SERVICE_COLUMNS " FROM services WHERE workspace_id = ? "
			  "ORDER BY created_at, rowid",
			  workspace_id, &service_rows, NULL, (void **)ret, ret_n);
}

/* ---- attempts ------------------------------------------------------------------------------ */

static int attempt_prune(struct store *s, const char *service_id, size_t keep)
{
	_cleanup_stmt_finalize_ sqlite3_stmt *st = NULL;
	struct store_binder b;
	int k;

	if (keep > INT64_MAX)
		return 0;
	k = store_prepare(s,
			  "DELETE FROM service_attempts WHERE service_id = ?1 AND number <= "
			  "(SELECT max(number) FROM service_attempts WHERE service_id = ?1) - ?2",
			  &st);
	if (k < 0)
		return k;
	b = STORE_BINDER(st);
	store_bind_text(&b, service_id);
	store_bind_i64(&b, (int64_t)keep);
	k = store_exec_bound(s, &b);
	return k < 0 ? k : 0;
}

int store_attempt_insert(struct store *s, const struct service_attempt_row *r, size_t keep)
{
	_cleanup_stmt_finalize_ sqlite3_stmt *st = NULL;
	struct store_binder b;
	int k;

	if (!s || !r || !r->service_id)
		return -EINVAL;
	k = store_prepare(s,
			  "INSERT OR IGNORE INTO service_attempts (" ATTEMPT_META_COLUMNS
			  ", " ATTEMPT_OUTPUT_COLUMNS
			  ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, "
			  "?, ?, ?, ?)",
			  &st);
	if (k < 0)
		return k;
	b = STORE_BINDER(st);
	store_bind_text(&b, r->service_id);
	store_bind_u64(&b, r->number);
	store_bind_u64(&b, r->started_at);
	store_bind_u64(&b, r->ended_at);
	store_bind_i64(&b, r->exit_code);
	store_bind_i64(&b, r->signal);
	store_bind_text(&b, attempt_end_to_string(r->end_reason));
	store_bind_text(&b, r->reason);
	store_bind_i64(&b, r->daemonized);
	store_bind_i64(&b, r->output_dropped);
	store_bind_u64(&b, r->out[0].total);
	store_bind_u64(&b, r->out[1].total);
	store_bind_blob(&b, r->out[0].head, r->out[0].head_len);
	store_bind_blob(&b, r->out[0].tail, r->out[0].tail_len);
	store_bind_blob(&b, r->out[1].head, r->out[1].head_len);
	store_bind_blob(&b, r->out[1].tail, r->out[1].tail_len);
	k = store_exec_bound(s, &b);
	if (k <= 0)
		return k;
	k = attempt_prune(s, r->service_id, keep);
	return k < 0 ? k : 1;
}

/* userdata: a bool, whether to read the output columns too. */
static int attempt_read(sqlite3_stmt *st, void *userdata, void *ret)
{
	bool with_output = *(const bool *)userdata;
	struct store_reader rd = STORE_READER(st);
	struct service_attempt_row r = {};

	store_read_text(&rd, &r.service_id);
	r.number = store_read_u64(&rd);
	r.started_at = store_read_u64(&rd);
	r.ended_at = store_read_u64(&rd);
	r.exit_code = store_read_i64(&rd);
	r.signal = store_read_i64(&rd);
	r.end_reason = store_read_enum(&rd, attempt_end_from_string);
	store_read_text(&rd, &r.reason);
	r.daemonized = store_read_i64(&rd) != 0;
	r.output_dropped = store_read_i64(&rd) != 0;
	r.out[0].total = store_read_u64(&rd);
	r.out[1].total = store_read_u64(&rd);
	if (with_output) {
		store_read_blob(&rd, &r.out[0].head, &r.out[0].head_len);
		store_read_blob(&rd, &r.out[0].tail, &r.out[0].tail_len);
		store_read_blob(&rd, &r.out[1].head, &r.out[1].head_len);
		store_read_blob(&rd, &r.out[1].tail, &r.out[1].tail_len);
	}
	if (rd.err < 0) {
		service_attempt_row_free(&r);
		return rd.err;
	}
	*(struct service_attempt_row *)ret = r;
	return 0;
}

STORE_ROW_TYPE(attempt_rows, struct service_attempt_row, attempt_read, service_attempt_row_free);

int store_attempt_list(struct store *s, const char *service_id, bool with_output,
		       struct service_attempt_row **ret, size_t *ret_n)
{
	if (!s || !service_id || !ret || !ret_n)
		return -EINVAL;
	return store_list(s,
			  with_output ?
				  "SELECT " ATTEMPT_META_COLUMNS ", " ATTEMPT_OUTPUT_COLUMNS
				  " FROM service_attempts WHERE service_id = ? ORDER BY number" :
				  "SELECT " ATTEMPT_META_COLUMNS
				  " FROM service_attempts WHERE service_id = ? ORDER BY number",
			  service_id, &attempt_rows, &with_output, (void **)ret, ret_n);
}

int store_attempt_get(struct store *s, const char *service_id, uint64_t number,
		      struct service_attempt_row *ret)
{
	_cleanup_stmt_finalize_ sqlite3_stmt *st = NULL;
	struct store_binder b;
	int k;

	if (!s || !service_id || !ret)
		return -EINVAL;
	k = store_prepare(s,
			  "SELECT " ATTEMPT_META_COLUMNS ", " ATTEMPT_OUTPUT_COLUMNS
			  " FROM service_attempts WHERE service_id = ? AND (? = 0 OR number = ?) "
			  "ORDER BY number DESC LIMIT 1",
			  &st);
	if (k < 0)
		return k;
	b = STORE_BINDER(st);
	store_bind_text(&b, service_id);
	store_bind_u64(&b, number);
	store_bind_u64(&b, number);
	k = store_bind_result(&b);
	if (k < 0)
		return k;
	k = store_step_row(st);
	if (k <= 0)
		return k < 0 ? k : -ENOENT;
	return attempt_read(st, &(bool){ true }, ret);
}
