/* SPDX-License-Identifier: MIT */
/* The workspaces table. */

#include <errno.h>
#include <string.h>

#include "store/store-internal.h"

#define WORKSPACE_COLUMNS                                                                          \
	"id, worker, adapter, state, reason, spec_json, cgroup, agent_secret, agent_pid, "         \
	"created_at, updated_at, tenant, paused_at, name, labels"

void workspace_row_free(struct workspace_row *r)
{
	if (!r)
		return;
	free(r->id);
	free(r->worker);
	free(r->adapter);
	free(r->reason);
	free(r->spec_json);
	free(r->cgroup);
	free(r->agent_secret);
	free(r->tenant);
	free(r->name);
	free(r->labels_json);
	*r = (struct workspace_row){};
}

/* Binds the mutable columns in the order both insert and update name them. */
static void bind_mutable(struct store_binder *b, const struct workspace_row *r)
{
	store_bind_text(b, workspace_state_to_string(r->state));
	store_bind_text(b, r->reason);
	store_bind_text(b, r->spec_json);
	store_bind_text(b, r->cgroup);
	store_bind_text(b, r->agent_secret);
	store_bind_i64(b, r->agent_pid);
	store_bind_u64(b, r->updated_at);
	store_bind_text(b, r->tenant ? r->tenant : "");
	store_bind_u64(b, r->paused_at);
	store_bind_text(b, r->name);
	store_bind_text(b, r->labels_json);
}

int store_workspace_insert(struct store *s, const struct workspace_row *r)
{
	_cleanup_stmt_finalize_ sqlite3_stmt *st = NULL;
	struct store_binder b;
	int k;

	if (!s || !r || !r->id)
		return -EINVAL;
	k = store_prepare(
		s,
		"INSERT INTO workspaces (state, reason, spec_json, cgroup, agent_secret, "
		"agent_pid, updated_at, tenant, paused_at, name, labels, id, worker, adapter, "
		"created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
		&st);
	if (k < 0)
		return k;
	b = STORE_BINDER(st);
	bind_mutable(&b, r);
	store_bind_text(&b, r->id);
	store_bind_text(&b, r->worker);
	store_bind_text(&b, r->adapter);
	store_bind_u64(&b, r->created_at);
	k = store_exec_bound(s, &b);
	return k < 0 ? k : 0;
}

int store_workspace_update(struct store *s, const struct workspace_row *r)
{
	_cleanup_stmt_finalize_ sqlite3_stmt *st = NULL;
	struct store_binder b;
	int k;

	if (!s || !r || !r->id)
		return -EINVAL;
	k = store_prepare(
		s,
		"UPDATE workspaces SET state = ?, reason = ?, spec_json = ?, cgroup = ?, "
		"agent_secret = ?, agent_pid = ?, updated_at = ?, tenant = ?, paused_at = ?, "
		"name = ?, labels = ? WHERE id = ?",
		&st);
	if (k < 0)
		return k;
	b = STORE_BINDER(st);
	bind_mutable(&b, r);
	store_bind_text(&b, r->id);
	k = store_exec_bound(s, &b);
	if (k < 0)
		return k;
	return k > 0 ? 0 : -ENOENT;
}

/* The runs go with it through ON DELETE CASCADE. */
int store_workspace_delete(struct store *s, const char *id)
{
	_cleanup_stmt_finalize_ sqlite3_stmt *st = NULL;
	int k;

	if (!s || !id)
		return -EINVAL;
	k = store_prepare_key(s, "DELETE FROM workspaces WHERE id = ?", id, &st);
	if (k < 0)
		return k;
	k = store_step_done(st);
	if (k < 0)
		return k;
	return store_changes(s) > 0 ? 0 : -ENOENT;
}

/* Reads the current row (WORKSPACE_COLUMNS) into *ret, untouched on failure. */
static int workspace_read(sqlite3_stmt *st, void *userdata, void *ret)
{
	struct store_reader rd = STORE_READER(st);
	struct workspace_row w = {};

	store_read_text(&rd, &w.id);
	store_read_text(&rd, &w.worker);
	store_read_text(&rd, &w.adapter);
	w.state = store_read_enum(&rd, workspace_state_from_string);
	store_read_text(&rd, &w.reason);
	store_read_text(&rd, &w.spec_json);
	store_read_text(&rd, &w.cgroup);
	store_read_text(&rd, &w.agent_secret);
	w.agent_pid = store_read_i64(&rd);
	w.created_at = store_read_u64(&rd);
	w.updated_at = store_read_u64(&rd);
	store_read_text(&rd, &w.tenant);
	w.paused_at = store_read_u64(&rd);
	store_read_text(&rd, &w.name);
	store_read_text(&rd, &w.labels_json);
	if (rd.err < 0) {
		workspace_row_free(&w);
		return rd.err;
	}
	*(struct workspace_row *)ret = w;
	return 0;
}

int store_workspace_get(struct store *s, const char *id, struct workspace_row *ret)
{
	_cleanup_stmt_finalize_ sqlite3_stmt *st = NULL;
	int k;

	if (!s || !id || !ret)
		return -EINVAL;
	k = store_prepare_key(s, "SELECT " WORKSPACE_COLUMNS " FROM workspaces WHERE id = ?", id,
			      &st);
	if (k < 0)
		return k;
	k = store_step_row(st);
	if (k <= 0)
		return k < 0 ? k : -ENOENT;
	return workspace_read(st, NULL, ret);
}

STORE_ROW_TYPE(workspace_rows, struct workspace_row, workspace_read, workspace_row_free);

int store_workspace_list(struct store *s, struct workspace_row **ret, size_t *ret_n)
{
	if (!s || !ret || !ret_n)
		return -EINVAL;
	return store_list(s,
			  "SELECT " WORKSPACE_COLUMNS " FROM workspaces ORDER BY created_at, rowid",
			  NULL, &workspace_rows, NULL, (void **)ret, ret_n);
}
