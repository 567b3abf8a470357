/* SPDX-License-Identifier: MIT */
/* The workspace_networks table: a workspace's network mode, its address lease and its egress
 * policy. */

#include <errno.h>
#include <string.h>

#include "store/store-internal.h"

#define NETWORK_COLUMNS "workspace_id, mode, address, policy_json, created_at, updated_at"

void network_row_free(struct network_row *r)
{
	if (!r)
		return;
	free(r->workspace_id);
	free(r->mode);
	free(r->policy_json);
	*r = (struct network_row){};
}

static int network_read(sqlite3_stmt *st, void *userdata, void *ret)
{
	struct store_reader rd = STORE_READER(st);
	struct network_row r = {};
	uint64_t address;

	store_read_text(&rd, &r.workspace_id);
	store_read_text(&rd, &r.mode);
	address = store_read_u64(&rd);
	store_read_text(&rd, &r.policy_json);
	r.created_at = store_read_u64(&rd);
	r.updated_at = store_read_u64(&rd);
	if (rd.err < 0 || !r.workspace_id || !r.mode || address > UINT32_MAX) {
		network_row_free(&r);
		return rd.err < 0 ? rd.err : -EIO;
	}
	r.address = (uint32_t)address;
	*(struct network_row *)ret = r;
	return 0;
}

STORE_ROW_TYPE(network_row_type, struct network_row, network_read, network_row_free);

int store_network_insert(struct store *s, const struct network_row *r)
{
	_cleanup_stmt_finalize_ sqlite3_stmt *st = NULL;
	struct store_binder b;
	int k;

	if (!s || !r || !r->workspace_id || !r->mode)
		return -EINVAL;
	k = store_prepare(s,
			  "INSERT INTO workspace_networks (" NETWORK_COLUMNS
			  ") VALUES (?, ?, ?, ?, ?, ?)",
			  &st);
	if (k < 0)
		return k;
	b = STORE_BINDER(st);
	store_bind_text(&b, r->workspace_id);
	store_bind_text(&b, r->mode);
	store_bind_u64(&b, r->address);
	store_bind_text(&b, r->policy_json);
	store_bind_u64(&b, r->created_at);
	store_bind_u64(&b, r->updated_at);
	k = store_exec_bound(s, &b);
	return k < 0 ? k : 0;
}

int store_network_set_policy(struct store *s, const char *workspace_id, const char *policy_json,
			     uint64_t updated_at)
{
	_cleanup_stmt_finalize_ sqlite3_stmt *st = NULL;
	struct store_binder b;
	int k;

	if (!s || !workspace_id)
		return -EINVAL;
	k = store_prepare(s,
			  "UPDATE workspace_networks SET policy_json = ?, updated_at = ? WHERE "
			  "workspace_id = ?",
			  &st);
	if (k < 0)
		return k;
	b = STORE_BINDER(st);
	store_bind_text(&b, policy_json);
	store_bind_u64(&b, updated_at);
	store_bind_text(&b, workspace_id);
	k = store_exec_bound(s, &b);
	return k < 0 ? k : k == 0 ? -ENOENT : 0;
}

int store_network_delete(struct store *s, const char *workspace_id)
{
	_cleanup_stmt_finalize_ sqlite3_stmt *st = NULL;
	int k;

	if (!s || !workspace_id)
		return -EINVAL;
	k = store_prepare_key(s, "DELETE FROM workspace_networks WHERE workspace_id = ?",
			      workspace_id, &st);
	if (k < 0)
		return k;
	k = store_step_done(st);
	return k < 0 ? k : 0;
}

int store_network_list(struct store *s, struct network_row **ret, size_t *ret_n)
{
	if (!s || !ret || !ret_n)
		return -EINVAL;
	return store_list(s, "SELECT " NETWORK_COLUMNS " FROM workspace_networks ORDER BY address",
			  NULL, &network_row_type, NULL, (void **)ret, ret_n);
}
