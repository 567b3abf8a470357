/* SPDX-License-Identifier: MIT */
/* The idempotency_keys table: which object a creating request with an Idempotency-Key made. */

#include <errno.h>
#include <limits.h>
#include <stdlib.h>

#include "store/store-internal.h"

void idempotency_row_free(struct idempotency_row *r)
{
	if (!r)
		return;
	free(r->scope);
	free(r->key);
	free(r->request_hash);
	free(r->object_id);
	*r = (struct idempotency_row){};
}

int store_idempotency_insert(struct store *s, const struct idempotency_row *r,
			     uint64_t expired_before)
{
	_cleanup_stmt_reset_ sqlite3_stmt *st = NULL;
	int k;

	if (!s || !r || !r->scope || !r->key || !r->request_hash || !r->object_id)
		return -EINVAL;
	/* An expired row of the same key gives way; a live one makes the insert a no-op. */
	k = store_stmt(
		s, STORE_STMT_IDEMPOTENCY_INSERT,
		"INSERT INTO idempotency_keys (scope, key, request_hash, object_id, "
		"status, created_at) VALUES (?, ?, ?, ?, ?, ?) "
		"ON CONFLICT (scope, key) DO UPDATE SET request_hash = excluded.request_hash, "
		"object_id = excluded.object_id, status = excluded.status, "
		"created_at = excluded.created_at WHERE created_at < ?",
		&st);
	if (k < 0)
		return k;
	struct store_binder b = STORE_BINDER(st);
	store_bind_text(&b, r->scope);
	store_bind_text(&b, r->key);
	store_bind_text(&b, r->request_hash);
	store_bind_text(&b, r->object_id);
	store_bind_i64(&b, r->status);
	store_bind_u64(&b, r->created_at);
	store_bind_u64(&b, expired_before);
	k = store_exec_bound(s, &b);
	if (k < 0)
		return k;
	return k == 1 ? 0 : -EEXIST;
}

static int idempotency_read(sqlite3_stmt *st, struct idempotency_row *ret)
{
	struct store_reader rd = STORE_READER(st);
	struct idempotency_row r = {};

	store_read_text(&rd, &r.scope);
	store_read_text(&rd, &r.key);
	store_read_text(&rd, &r.request_hash);
	store_read_text(&rd, &r.object_id);
	r.status = store_read_i64(&rd);
	r.created_at = store_read_u64(&rd);
	if (rd.err < 0 || !r.scope || !r.key || !r.request_hash || !r.object_id) {
		idempotency_row_free(&r);
		return rd.err < 0 ? rd.err : -EIO;
	}
	*ret = r;
	return 0;
}

int store_idempotency_get(struct store *s, const char *scope, const char *key,
			  uint64_t expired_before, struct idempotency_row *ret)
{
	_cleanup_stmt_reset_ sqlite3_stmt *st = NULL;
	int k;

	if (!s || !scope || !key || !ret)
		return -EINVAL;
	k = store_stmt(s, STORE_STMT_IDEMPOTENCY_GET,
		       "SELECT scope, key, request_hash, object_id, status, created_at "
		       "FROM idempotency_keys WHERE scope = ? AND key = ? AND created_at >= ?",
		       &st);
	if (k < 0)
		return k;
	struct store_binder b = STORE_BINDER(st);
	store_bind_text(&b, scope);
	store_bind_text(&b, key);
	store_bind_u64(&b, expired_before);
	k = store_bind_result(&b);
	if (k >= 0)
		k = store_step_row(st);
	if (k <= 0)
		return k;
	k = idempotency_read(st, ret);
	return k < 0 ? k : 1;
}

int store_idempotency_purge(struct store *s, uint64_t expired_before)
{
	_cleanup_stmt_finalize_ sqlite3_stmt *st = NULL;
	int k;

	if (!s)
		return -EINVAL;
	k = store_prepare(s, "DELETE FROM idempotency_keys WHERE created_at < ?", &st);
	if (k < 0)
		return k;
	struct store_binder b = STORE_BINDER(st);
	store_bind_u64(&b, expired_before);
	return store_exec_bound(s, &b);
}

int store_idempotency_delete(struct store *s, const char *scope, const char *key)
{
	_cleanup_stmt_finalize_ sqlite3_stmt *st = NULL;
	int k;

	if (!s || !scope || !key)
		return -EINVAL;
	k = store_prepare(s, "DELETE FROM idempotency_keys WHERE scope = ? AND key = ?", &st);
	if (k < 0)
		return k;
	struct store_binder b = STORE_BINDER(st);
	store_bind_text(&b, scope);
	store_bind_text(&b, key);
	return store_exec_bound(s, &b);
}
