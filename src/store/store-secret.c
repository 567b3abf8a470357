/* SPDX-License-Identifier: MIT */
/* The workspace_secrets table: sealed secret values with their scope and expiry. */

#include <errno.h>
#include <string.h>

#include "store/store-internal.h"

#define SECRET_COLUMNS                                                                             \
	"workspace_id, name, nonce, ciphertext, host, username, expires_at, created_at, "          \
	"updated_at"

void secret_row_free(struct secret_row *r)
{
	if (!r)
		return;
	free(r->workspace_id);
	free(r->name);
	free(r->nonce);
	free(r->ciphertext);
	free(r->host);
	free(r->username);
	*r = (struct secret_row){};
}

static int secret_read(sqlite3_stmt *st, void *userdata, void *ret)
{
	struct store_reader rd = STORE_READER(st);
	struct secret_row r = {};

	store_read_text(&rd, &r.workspace_id);
	store_read_text(&rd, &r.name);
	store_read_blob(&rd, &r.nonce, &r.nonce_len);
	store_read_blob(&rd, &r.ciphertext, &r.ciphertext_len);
	store_read_text(&rd, &r.host);
	store_read_text(&rd, &r.username);
	r.expires_at = store_read_u64(&rd);
	r.created_at = store_read_u64(&rd);
	r.updated_at = store_read_u64(&rd);
	if (rd.err < 0 || !r.workspace_id || !r.name || !r.nonce || !r.ciphertext || !r.username) {
		secret_row_free(&r);
		return rd.err < 0 ? rd.err : -EIO;
	}
	*(struct secret_row *)ret = r;
	return 0;
}

STORE_ROW_TYPE(secret_row_type, struct secret_row, secret_read, secret_row_free);

int store_secret_put(struct store *s, const struct secret_row *r)
{
	_cleanup_stmt_finalize_ sqlite3_stmt *st = NULL;
	struct store_binder b;
	int k;

	if (!s || !r || !r->workspace_id || !r->name || !r->nonce || !r->nonce_len ||
	    !r->ciphertext || !r->ciphertext_len || !r->username)
		return -EINVAL;
	k = store_prepare(s,
			  "INSERT INTO workspace_secrets (" SECRET_COLUMNS
			  ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (workspace_id, name) "
			  "DO UPDATE SET nonce = excluded.nonce, ciphertext = excluded.ciphertext, "
			  "host = excluded.host, username = excluded.username, expires_at = "
			  "excluded.expires_at, updated_at = excluded.updated_at",
			  &st);
	if (k < 0)
		return k;
	b = STORE_BINDER(st);
	store_bind_text(&b, r->workspace_id);
	store_bind_text(&b, r->name);
	store_bind_blob(&b, r->nonce, r->nonce_len);
	store_bind_blob(&b, r->ciphertext, r->ciphertext_len);
	store_bind_text(&b, r->host);
	store_bind_text(&b, r->username);
	store_bind_u64(&b, r->expires_at);
	store_bind_u64(&b, r->created_at);
	store_bind_u64(&b, r->updated_at);
	k = store_exec_bound(s, &b);
	return k < 0 ? k : 0;
}

int store_secret_delete(struct store *s, const char *workspace_id, const char *name)
{
	_cleanup_stmt_finalize_ sqlite3_stmt *st = NULL;
	struct store_binder b;
	int k;

	if (!s || !workspace_id || !name)
		return -EINVAL;
	k = store_prepare(s, "DELETE FROM workspace_secrets WHERE workspace_id = ? AND name = ?",
			  &st);
	if (k < 0)
		return k;
	b = STORE_BINDER(st);
	store_bind_text(&b, workspace_id);
	store_bind_text(&b, name);
	k = store_exec_bound(s, &b);
	return k < 0 ? k : k == 0 ? -ENOENT : 0;
}

int store_secret_list(struct store *s, struct secret_row **ret, size_t *ret_n)
{
	if (!s || !ret || !ret_n)
		return -EINVAL;
	return store_list(s,
			  "SELECT " SECRET_COLUMNS
			  " FROM workspace_secrets ORDER BY workspace_id, name",
			  NULL, &secret_row_type, NULL, (void **)ret, ret_n);
}
