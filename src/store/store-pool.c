/* SPDX-License-Identifier: MIT */
/* The pool_members table: which workspaces are unclaimed warm pool members, and of which pool. */

#include <errno.h>
#include <string.h>

#include "store/store-internal.h"

int store_pool_member_insert(struct store *s, const char *workspace_id, const char *pool)
{
	_cleanup_stmt_finalize_ sqlite3_stmt *st = NULL;
	int k;

	if (!s || !workspace_id || !pool)
		return -EINVAL;
	k = store_prepare(s, "INSERT INTO pool_members (workspace_id, pool) VALUES (?, ?)", &st);
	if (k < 0)
		return k;
	struct store_binder b = STORE_BINDER(st);
	store_bind_text(&b, workspace_id);
	store_bind_text(&b, pool);
	k = store_exec_bound(s, &b);
	return k < 0 ? k : 0;
}

void pool_member_row_free(struct pool_member_row *r)
{
	if (!r)
		return;
	free(r->workspace_id);
	free(r->pool);
	*r = (struct pool_member_row){};
}

static int pool_member_read(sqlite3_stmt *st, void *userdata, void *ret)
{
	struct store_reader rd = STORE_READER(st);
	struct pool_member_row m = {};

	store_read_text(&rd, &m.workspace_id);
	store_read_text(&rd, &m.pool);
	if (rd.err < 0 || !m.workspace_id || !m.pool) {
		pool_member_row_free(&m);
		return rd.err < 0 ? rd.err : -EIO;
	}
	*(struct pool_member_row *)ret = m;
	return 0;
}

STORE_ROW_TYPE(pool_member_rows, struct pool_member_row, pool_member_read, pool_member_row_free);

int store_pool_member_list(struct store *s, struct pool_member_row **ret, size_t *ret_n)
{
	if (!s || !ret || !ret_n)
		return -EINVAL;
	return store_list(s, "SELECT workspace_id, pool FROM pool_members ORDER BY rowid", NULL,
			  &pool_member_rows, NULL, (void **)ret, ret_n);
}

static int claim_steps(struct store *s, const struct workspace_row *r)
{
	_cleanup_stmt_finalize_ sqlite3_stmt *del = NULL, *upd = NULL;
	int k = store_prepare_key(s, "DELETE FROM pool_members WHERE workspace_id = ?", r->id,
				  &del);
	if (k >= 0)
		k = store_step_done(del);
	if (k >= 0 && store_changes(s) != 1)
		k = -ENOENT; /* not a member (any more): never handed out twice */
	if (k >= 0)
		k = store_prepare(s,
				  "UPDATE workspaces SET spec_json = ?, created_at = ?, "
				  "updated_at = ?, tenant = ?, name = ?, labels = ? WHERE id = ?",
				  &upd);
	if (k < 0)
		return k;
	struct store_binder b = STORE_BINDER(upd);
	store_bind_text(&b, r->spec_json);
	store_bind_u64(&b, r->created_at);
	store_bind_u64(&b, r->updated_at);
	store_bind_text(&b, r->tenant ? r->tenant : "");
	store_bind_text(&b, r->name);
	store_bind_text(&b, r->labels_json);
	store_bind_text(&b, r->id);
	k = store_exec_bound(s, &b);
	if (k < 0)
		return k;
	return k == 1 ? 0 : -ENOENT;
}

int store_pool_claim(struct store *s, const struct workspace_row *r)
{
	if (!s || !r || !r->id || !r->spec_json)
		return -EINVAL;
	int k = store_begin(s);
	if (k < 0)
		return k;
	k = claim_steps(s, r);
	if (k < 0) {
		store_rollback(s);
		return k;
	}
	k = store_commit(s);
	if (k < 0)
		store_rollback(s);
	return k;
}
