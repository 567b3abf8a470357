/* SPDX-License-Identifier: MIT */
/* The tokens table (API bearer tokens, kept only as the SHA-256 of the secret) and the audit
 * log. */

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "store/store-internal.h"

/* Lower-case hex of 32 bytes only, so one token cannot be stored or looked up two ways. */
static bool hash_is_valid(const char *h)
{
	if (!h || strlen(h) != 64)
		return false;
	return strspn(h, "0123456789abcdef") == 64;
}

#define TOKEN_COLUMNS                                                                              \
	"token_id, name, scope, tenant, cpus_milli, memory_mb, pids_limit, workspaces, hash, "     \
	"created_at, expires_at, revoked_at, last_used_at"

void token_row_free(struct token_row *r)
{
	if (!r)
		return;
	free(r->id);
	free(r->name);
	free(r->scope);
	free(r->tenant);
	free(r->hash);
	*r = (struct token_row){};
}

static uint32_t read_u32(struct store_reader *rd)
{
	uint64_t v = store_read_u64(rd);

	return v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;
}

static int token_read(sqlite3_stmt *st, void *userdata, void *ret)
{
	struct store_reader rd = STORE_READER(st);
	struct token_row r = {};

	store_read_text(&rd, &r.id);
	store_read_text(&rd, &r.name);
	store_read_text(&rd, &r.scope);
	store_read_text(&rd, &r.tenant);
	r.limits.cpus_milli = read_u32(&rd);
	r.limits.memory_mb = read_u32(&rd);
	r.limits.pids_limit = read_u32(&rd);
	r.limits.workspaces = read_u32(&rd);
	store_read_text(&rd, &r.hash);
	r.created_at = store_read_u64(&rd);
	r.expires_at = store_read_u64(&rd);
	r.revoked_at = store_read_u64(&rd);
	r.last_used_at = store_read_u64(&rd);
	if (rd.err < 0 || !r.id || !r.name || !r.scope || !r.hash) {
		token_row_free(&r);
		return rd.err < 0 ? rd.err : -EIO;
	}
	*(struct token_row *)ret = r;
	return 0;
}

STORE_ROW_TYPE(token_row_type, struct token_row, token_read, token_row_free);

int store_token_insert(struct store *s, const struct token_row *r)
{
	_cleanup_stmt_finalize_ sqlite3_stmt *st = NULL;
	struct store_binder b;
	int k;

	if (!s || !r || !r->id || !r->name || !r->scope || !hash_is_valid(r->hash))
		return -EINVAL;
	k = store_prepare(s,
			  "INSERT INTO tokens (" TOKEN_COLUMNS
			  ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
			  &st);
	if (k < 0)
		return k;
	b = STORE_BINDER(st);
	store_bind_text(&b, r->id);
	store_bind_text(&b, r->name);
	store_bind_text(&b, r->scope);
	store_bind_text(&b, r->tenant);
	store_bind_u64(&b, r->limits.cpus_milli);
	store_bind_u64(&b, r->limits.memory_mb);
	store_bind_u64(&b, r->limits.pids_limit);
	store_bind_u64(&b, r->limits.workspaces);
	store_bind_text(&b, r->hash);
	store_bind_u64(&b, r->created_at);
	store_bind_u64(&b, r->expires_at);
	store_bind_u64(&b, r->revoked_at);
	store_bind_u64(&b, r->last_used_at);
	k = store_exec_bound(s, &b);
	return k < 0 ? k : 0;
}

int store_token_list(struct store *s, struct token_row **ret, size_t *ret_n)
{
	if (!s || !ret || !ret_n)
		return -EINVAL;
	return store_list(s, "SELECT " TOKEN_COLUMNS " FROM tokens ORDER BY id", NULL,
			  &token_row_type, NULL, (void **)ret, ret_n);
}

static int token_set_time(struct store *s, const char *sql, const char *id, uint64_t at)
{
	_cleanup_stmt_finalize_ sqlite3_stmt *st = NULL;
	struct store_binder b;
	int k;

	if (!s || !id)
		return -EINVAL;
	k = store_prepare(s, sql, &st);
	if (k < 0)
		return k;
	b = STORE_BINDER(st);
	store_bind_u64(&b, at);
	store_bind_text(&b, id);
	k = store_exec_bound(s, &b);
	if (k < 0)
		return k;
	return k == 0 ? -ENOENT : 0;
}

int store_token_revoke(struct store *s, const char *id, uint64_t at)
{
	return token_set_time(s, "UPDATE tokens SET revoked_at = ? WHERE token_id = ?", id, at);
}

int store_token_touch(struct store *s, const char *id, uint64_t at)
{
	return token_set_time(s, "UPDATE tokens SET last_used_at = ? WHERE token_id = ?", id, at);
}

int store_token_set_admin(struct store *s, const char *hash_hex, uint64_t now)
{
	_cleanup_stmt_finalize_ sqlite3_stmt *st = NULL;
	struct store_binder b;
	int k;

	if (!s || !hash_is_valid(hash_hex))
		return -EINVAL;
	k = store_prepare(s,
			  "INSERT INTO tokens (token_id, name, scope, hash, created_at) "
			  "VALUES ('admin', 'admin', 'admin', ?, ?) "
			  "ON CONFLICT (token_id) DO UPDATE SET hash = excluded.hash, "
			  "created_at = excluded.created_at WHERE hash != excluded.hash",
			  &st);
	if (k < 0)
		return k;
	b = STORE_BINDER(st);
	store_bind_text(&b, hash_hex);
	store_bind_u64(&b, now);
	k = store_exec_bound(s, &b);
	return k < 0 ? k : 0;
}

int store_token_check(struct store *s, const char *hash_hex)
{
	_cleanup_stmt_reset_ sqlite3_stmt *st = NULL;
	struct store_binder b;
	int k;

	if (!s || !hash_is_valid(hash_hex))
		return -EINVAL;
	k = store_stmt(s, STORE_STMT_TOKEN_CHECK, "SELECT 1 FROM tokens WHERE hash = ?", &st);
	if (k < 0)
		return k;
	b = STORE_BINDER(st);
	store_bind_text(&b, hash_hex);
	k = store_bind_result(&b);
	if (k < 0)
		return k;
	return store_step_row(st);
}

int store_token_count(struct store *s, size_t *ret)
{
	_cleanup_stmt_finalize_ sqlite3_stmt *st = NULL;
	int k;

	if (!s || !ret)
		return -EINVAL;
	k = store_prepare(s, "SELECT count(*) FROM tokens", &st);
	if (k < 0)
		return k;
	k = store_step_row(st);
	if (k <= 0)
		return k < 0 ? k : -EIO;
	*ret = (size_t)sqlite3_column_int64(st, 0);
	return 0;
}

/* ---- the audit log ---------------------------------------------------------------------- */

#define AUDIT_COLUMNS                                                                              \
	"id, at, token_id, token_name, tenant, method, route, path, workspace_id, object_id, "     \
	"status, outcome"

void audit_row_free(struct audit_row *r)
{
	if (!r)
		return;
	free(r->token_id);
	free(r->token_name);
	free(r->tenant);
	free(r->method);
	free(r->route);
	free(r->path);
	free(r->workspace_id);
	free(r->object_id);
	free(r->outcome);
	*r = (struct audit_row){};
}

static int audit_read(sqlite3_stmt *st, void *userdata, void *ret)
{
	struct store_reader rd = STORE_READER(st);
	struct audit_row r = {};

	r.id = store_read_i64(&rd);
	r.at = store_read_u64(&rd);
	store_read_text(&rd, &r.token_id);
	store_read_text(&rd, &r.token_name);
	store_read_text(&rd, &r.tenant);
	store_read_text(&rd, &r.method);
	store_read_text(&rd, &r.route);
	store_read_text(&rd, &r.path);
	store_read_text(&rd, &r.workspace_id);
	store_read_text(&rd, &r.object_id);
	r.status = (unsigned)store_read_u64(&rd);
	store_read_text(&rd, &r.outcome);
	if (rd.err < 0 || !r.method || !r.route || !r.path || !r.outcome) {
		audit_row_free(&r);
		return rd.err < 0 ? rd.err : -EIO;
	}
	*(struct audit_row *)ret = r;
	return 0;
}

STORE_ROW_TYPE(audit_row_type, struct audit_row, audit_read, audit_row_free);

static int audit_insert_one(struct store *s, sqlite3_stmt *st, const struct audit_row *r)
{
	struct store_binder b = STORE_BINDER(st);
	int k;

	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	store_bind_u64(&b, r->at);
	store_bind_text(&b, r->token_id);
	store_bind_text(&b, r->token_name);
	store_bind_text(&b, r->tenant);
	store_bind_text(&b, r->method ?: "-");
	store_bind_text(&b, r->route ?: "-");
	store_bind_text(&b, r->path ?: "-");
	store_bind_text(&b, r->workspace_id);
	store_bind_text(&b, r->object_id);
	store_bind_u64(&b, r->status);
	store_bind_text(&b, r->outcome ?: "-");
	k = store_exec_bound(s, &b);
	return k < 0 ? k : 0;
}

int store_audit_insert(struct store *s, const struct audit_row *rows, size_t n, uint64_t keep)
{
	_cleanup_stmt_finalize_ sqlite3_stmt *st = NULL;
	_cleanup_stmt_finalize_ sqlite3_stmt *trim = NULL;
	int k;

	if (!s || (n > 0 && !rows))
		return -EINVAL;
	if (n == 0)
		return 0;
	k = store_prepare(
		s,
		"INSERT INTO audit (at, token_id, token_name, tenant, method, route, path, "
		"workspace_id, object_id, status, outcome) "
		"VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
		&st);
	if (k >= 0 && keep > 0)
		k = store_prepare(
			s, "DELETE FROM audit WHERE id <= (SELECT max(id) FROM audit) - ?", &trim);
	if (k < 0)
		return k;
	k = store_begin(s);
	if (k < 0)
		return k;
	for (size_t i = 0; k >= 0 && i < n; i++)
		k = audit_insert_one(s, st, &rows[i]);
	if (k >= 0 && trim) {
		struct store_binder b = STORE_BINDER(trim);

		store_bind_u64(&b, keep);
		k = store_exec_bound(s, &b);
	}
	if (k < 0) {
		(void)store_rollback(s);
		return k;
	}
	return store_commit(s);
}

int store_audit_list(struct store *s, const struct audit_filter *f, struct audit_row **ret,
		     size_t *ret_n)
{
	_cleanup_stmt_finalize_ sqlite3_stmt *st = NULL;
	struct store_binder b;
	int k;

	if (!s || !f || !ret || !ret_n || f->limit == 0 || f->limit > 1000)
		return -EINVAL;
	/* A NULL parameter matches every row: one statement for every combination. */
	k = store_prepare(s,
			  "SELECT " AUDIT_COLUMNS " FROM audit WHERE (?1 = 0 OR id < ?1) "
			  "AND (?2 IS NULL OR token_id = ?2) AND (?3 IS NULL OR tenant = ?3) "
			  "AND (?4 IS NULL OR workspace_id = ?4) ORDER BY id DESC LIMIT ?5",
			  &st);
	if (k < 0)
		return k;
	b = STORE_BINDER(st);
	store_bind_i64(&b, f->before);
	store_bind_text(&b, f->token_id);
	store_bind_text(&b, f->tenant);
	store_bind_text(&b, f->workspace_id);
	store_bind_u64(&b, f->limit);
	k = store_bind_result(&b);
	if (k < 0)
		return k;
	return store_list_rows(st, &audit_row_type, NULL, (void **)ret, ret_n);
}
