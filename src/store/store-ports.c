/* SPDX-License-Identifier: MIT */
/* The workspace_ports table: a workspace's exposed ports, each with its host label, access,
 * token hash and expiry. */

#include <errno.h>
#include <string.h>

#include "store/store-internal.h"

#define PORT_COLUMNS "workspace_id, port, label, access, token_hash, expires_at, created_at"

void port_row_free(struct port_row *r)
{
	if (!r)
		return;
	free(r->workspace_id);
	free(r->label);
	free(r->access);
	free(r->token_hash);
	*r = (struct port_row){};
}

static int port_read(sqlite3_stmt *st, void *userdata, void *ret)
{
	struct store_reader rd = STORE_READER(st);
	struct port_row r = {};

	(void)userdata;
	store_read_text(&rd, &r.workspace_id);
	r.port = store_read_u64(&rd);
	store_read_text(&rd, &r.label);
	store_read_text(&rd, &r.access);
	store_read_text(&rd, &r.token_hash);
	r.expires_at = store_read_u64(&rd);
	r.created_at = store_read_u64(&rd);
	if (rd.err < 0 || !r.workspace_id || !r.label || !r.access) {
		port_row_free(&r);
		return rd.err < 0 ? rd.err : -EIO;
	}
	*(struct port_row *)ret = r;
	return 0;
}

STORE_ROW_TYPE(port_row_type, struct port_row, port_read, port_row_free);

int store_port_insert(struct store *s, const struct port_row *r)
{
	_cleanup_stmt_finalize_ sqlite3_stmt *st = NULL;
	struct store_binder b;
	int k;

	if (!s || !r || !r->workspace_id || !r->label || !r->access || r->port == 0 ||
	    r->port > 65535)
		return -EINVAL;
	k = store_prepare(s,
			  "INSERT INTO workspace_ports (" PORT_COLUMNS
			  ") VALUES (?, ?, ?, ?, ?, ?, ?)",
			  &st);
	if (k < 0)
		return k;
	b = STORE_BINDER(st);
	store_bind_text(&b, r->workspace_id);
	store_bind_u64(&b, r->port);
	store_bind_text(&b, r->label);
	store_bind_text(&b, r->access);
	store_bind_text(&b, r->token_hash);
	store_bind_u64(&b, r->expires_at);
	store_bind_u64(&b, r->created_at);
	k = store_exec_bound(s, &b);
	return k < 0 ? k : 0;
}

int store_port_delete(struct store *s, const char *workspace_id, uint64_t port)
{
	_cleanup_stmt_finalize_ sqlite3_stmt *st = NULL;
	struct store_binder b;
	int k;

	if (!s || !workspace_id)
		return -EINVAL;
	k = store_prepare(s, "DELETE FROM workspace_ports WHERE workspace_id = ? AND port = ?",
			  &st);
	if (k < 0)
		return k;
	b = STORE_BINDER(st);
	store_bind_text(&b, workspace_id);
	store_bind_u64(&b, port);
	k = store_exec_bound(s, &b);
	return k < 0 ? k : k == 0 ? -ENOENT : 0;
}

int store_port_delete_workspace(struct store *s, const char *workspace_id)
{
	_cleanup_stmt_finalize_ sqlite3_stmt *st = NULL;
	struct store_binder b;
	int k;

	if (!s || !workspace_id)
		return -EINVAL;
	k = store_prepare(s, "DELETE FROM workspace_ports WHERE workspace_id = ?", &st);
	if (k < 0)
		return k;
	b = STORE_BINDER(st);
	store_bind_text(&b, workspace_id);
	return store_exec_bound(s, &b);
}

int store_port_delete_expired(struct store *s, uint64_t now)
{
	_cleanup_stmt_finalize_ sqlite3_stmt *st = NULL;
	struct store_binder b;
	int k;

	if (!s)
		return -EINVAL;
	k = store_prepare(s, "DELETE FROM workspace_ports WHERE expires_at <= ?", &st);
	if (k < 0)
		return k;
	b = STORE_BINDER(st);
	store_bind_u64(&b, now);
	return store_exec_bound(s, &b);
}

int store_port_list(struct store *s, struct port_row **ret, size_t *ret_n)
{
	if (!s || !ret || !ret_n)
		return -EINVAL;
	return store_list(s,
			  "SELECT " PORT_COLUMNS
			  " FROM workspace_ports ORDER BY workspace_id, port",
			  NULL, &port_row_type, NULL, (void **)ret, ret_n);
}
