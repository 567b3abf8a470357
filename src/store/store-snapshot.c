/* SPDX-License-Identifier: MIT */
/* The snapshots table: a workspace's snapshot, its image and where it came from. */

#include <errno.h>
#include <string.h>

#include "store/store-internal.h"

#define SNAPSHOT_COLUMNS                                                                           \
	"id, workspace_id, tenant, name, image, base_image, size_bytes, memory, paused_ms, "       \
	"created_at, durable"

void snapshot_row_free(struct snapshot_row *r)
{
	if (!r)
		return;
	free(r->id);
	free(r->workspace_id);
	free(r->tenant);
	free(r->name);
	free(r->image);
	free(r->base_image);
	*r = (struct snapshot_row){};
}

static int snapshot_read(sqlite3_stmt *st, void *userdata, void *ret)
{
	struct store_reader rd = STORE_READER(st);
	struct snapshot_row r = {};

	(void)userdata;
	store_read_text(&rd, &r.id);
	store_read_text(&rd, &r.workspace_id);
	store_read_text(&rd, &r.tenant);
	store_read_text(&rd, &r.name);
	store_read_text(&rd, &r.image);
	store_read_text(&rd, &r.base_image);
	r.size_bytes = store_read_u64(&rd);
	r.memory = store_read_u64(&rd) != 0;
	r.paused_ms = store_read_u64(&rd);
	r.created_at = store_read_u64(&rd);
	r.durable = store_read_u64(&rd) != 0;
	if (rd.err < 0 || !r.id || !r.workspace_id || !r.tenant || !r.image || !r.base_image) {
		snapshot_row_free(&r);
		return rd.err < 0 ? rd.err : -EIO;
	}
	*(struct snapshot_row *)ret = r;
	return 0;
}

STORE_ROW_TYPE(snapshot_rows, struct snapshot_row, snapshot_read, snapshot_row_free);

/* sql, whose one parameter is the snapshot's id: 0, -ENOENT when it changed no row. */
static int snapshot_exec_id(struct store *s, const char *sql, const char *id)
{
	_cleanup_stmt_finalize_ sqlite3_stmt *st = NULL;
	int k;

	if (!s || !id)
		return -EINVAL;
	k = store_prepare_key(s, sql, id, &st);
	if (k >= 0)
		k = store_step_done(st);
	return k < 0 ? k : store_changes(s) > 0 ? 0 : -ENOENT;
}

int store_snapshot_insert(struct store *s, const struct snapshot_row *r)
{
	_cleanup_stmt_finalize_ sqlite3_stmt *st = NULL;
	struct store_binder b;
	int k;

	if (!s || !r || !r->id || !r->workspace_id || !r->tenant || !r->image || !r->base_image)
		return -EINVAL;
	k = store_prepare(s,
			  "INSERT INTO snapshots (" SNAPSHOT_COLUMNS
			  ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
			  &st);
	if (k < 0)
		return k;
	b = STORE_BINDER(st);
	store_bind_text(&b, r->id);
	store_bind_text(&b, r->workspace_id);
	store_bind_text(&b, r->tenant);
	store_bind_text(&b, r->name);
	store_bind_text(&b, r->image);
	store_bind_text(&b, r->base_image);
	store_bind_u64(&b, r->size_bytes);
	store_bind_u64(&b, r->memory ? 1 : 0);
	store_bind_u64(&b, r->paused_ms);
	store_bind_u64(&b, r->created_at);
	store_bind_u64(&b, r->durable ? 1 : 0);
	k = store_exec_bound(s, &b);
	return k < 0 ? k : 0;
}

int store_snapshot_set_durable(struct store *s, const char *id)
{
	return snapshot_exec_id(s, "UPDATE snapshots SET durable = 1 WHERE id = ?", id);
}

int store_snapshot_get(struct store *s, const char *id, struct snapshot_row *ret)
{
	_cleanup_stmt_finalize_ sqlite3_stmt *st = NULL;
	int k;

	if (!s || !id || !ret)
		return -EINVAL;
	k = store_prepare_key(s, "SELECT " SNAPSHOT_COLUMNS " FROM snapshots WHERE id = ?", id,
			      &st);
	if (k < 0)
		return k;
	k = store_step_row(st);
	if (k <= 0)
		return k < 0 ? k : -ENOENT;
	return snapshot_read(st, NULL, ret);
}

int store_snapshot_delete(struct store *s, const char *id)
{
	return snapshot_exec_id(s, "DELETE FROM snapshots WHERE id = ?", id);
}

int store_snapshot_list(struct store *s, struct snapshot_row **ret, size_t *ret_n)
{
	if (!s || !ret || !ret_n)
		return -EINVAL;
	return store_list(s,
			  "SELECT " SNAPSHOT_COLUMNS
			  " FROM snapshots ORDER BY created_at DESC, rowid DESC",
			  NULL, &snapshot_rows, NULL, (void **)ret, ret_n);
}

int store_snapshot_count(struct store *s, const char *tenant, uint64_t *ret)
{
	_cleanup_stmt_finalize_ sqlite3_stmt *st = NULL;
	int k;

	if (!s || !tenant || !ret)
		return -EINVAL;
	k = store_prepare_key(s, "SELECT count(*) FROM snapshots WHERE tenant = ?", tenant, &st);
	if (k < 0)
		return k;
	k = store_step_row(st);
	if (k <= 0)
		return k < 0 ? k : -EIO;
	*ret = (uint64_t)sqlite3_column_int64(st, 0);
	return 0;
}
