/* SPDX-License-Identifier: MIT */
/* A fleet's tokens in etcd (docs/operations.md, "Many workers"): tokens/HASH holds a token's
 * row as JSON (its SHA-256, never the secret; its id, name, scope, tenant, limits and times),
 * written by the worker that mints it before anything else knows it, deleted by the worker
 * that revokes it. Every worker applies what etcd holds to its table (manager-token.c) and
 * keeps a copy in its SQLite, so that it still knows them while etcd is away. */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "basic/cleanup.h"
#include "basic/log.h"
#include "manager-internal.h"
#include "store/etcd.h"

#define TOKEN_KEY_PREFIX "tokens/"

char *fleet_token_encode(const struct token_row *row)
{
	json_t *o = json_pack("{s:s,s:s,s:s,s:s?,s:s,s:I,s:I,s:{s:I,s:I,s:I,s:I}}", "id", row->id,
			      "name", row->name, "scope", row->scope, "tenant", row->tenant, "hash",
			      row->hash, "createdAt", (json_int_t)row->created_at, "expiresAt",
			      (json_int_t)row->expires_at, "limits", "cpusMilli",
			      (json_int_t)row->limits.cpus_milli, "memoryMb",
			      (json_int_t)row->limits.memory_mb, "pidsLimit",
			      (json_int_t)row->limits.pids_limit, "workspaces",
			      (json_int_t)row->limits.workspaces);
	char *s = o ? json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS) : NULL;

	json_decref(o);
	return s;
}

static uint32_t u32_of(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);
	json_int_t i = json_is_integer(v) ? json_integer_value(v) : 0;

	return i < 0 ? 0 : i > UINT32_MAX ? UINT32_MAX : (uint32_t)i;
}

static uint64_t u64_of(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);
	json_int_t i = json_is_integer(v) ? json_integer_value(v) : 0;

	return i < 0 ? 0 : (uint64_t)i;
}

static char *str_of(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);

	return json_is_string(v) ? strdup(json_string_value(v)) : NULL;
}

int fleet_token_decode(const char *s, size_t len, struct token_row *ret)
{
	json_t *o = json_loadb(s, len, JSON_REJECT_DUPLICATES, NULL), *limits;
	struct token_row r = {};

	if (!json_is_object(o)) {
		json_decref(o);
		return -EPROTO;
	}
	r.id = str_of(o, "id");
	r.name = str_of(o, "name");
	r.scope = str_of(o, "scope");
	r.tenant = str_of(o, "tenant");
	r.hash = str_of(o, "hash");
	r.created_at = u64_of(o, "createdAt");
	r.expires_at = u64_of(o, "expiresAt");
	limits = json_object_get(o, "limits");
	r.limits.cpus_milli = u32_of(limits, "cpusMilli");
	r.limits.memory_mb = u32_of(limits, "memoryMb");
	r.limits.pids_limit = u32_of(limits, "pidsLimit");
	r.limits.workspaces = u32_of(limits, "workspaces");
	json_decref(o);
	/* The admin token is each worker's own (--admin-token-file), never the fleet's. */
	if (!r.id || !r.name || !r.scope || !r.hash || strlen(r.hash) != 64 ||
	    strspn(r.hash, "0123456789abcdef") != 64 || strcmp(r.id, "admin") == 0) {
		token_row_free(&r);
		return -EPROTO;
	}
	*ret = r;
	return 0;
}

static int fleet_unavailable(struct manager *m, int r, const char *what,
			     const struct station_error *why, struct station_error *e)
{
	log_warn("the fleet's store did not answer", "store", manager_fleet_describe(m), "error",
		 why->message[0] ? why->message : strerror(-r), NULL);
	return station_error_set(e, STATION_EFLEET, NULL,
				 "cannot %s: the fleet's store (%s) did not answer: %s; nothing "
				 "changed, try again once it is back",
				 what, manager_fleet_describe(m),
				 why->message[0] ? why->message : strerror(-r));
}

int manager_fleet_token_put(struct manager *m, const struct token_row *row, struct station_error *e)
{
	struct station_error why = {};
	char key[sizeof TOKEN_KEY_PREFIX + 64];
	_cleanup_free_ char *value = fleet_token_encode(row);
	int r;

	if (!value)
		return station_error_set(e, -ENOMEM, NULL, "out of memory");
	if (!manager_fleet_watching(m)) {
		station_error_set(&why, -ENOTCONN, NULL, "it is unreachable since the last try");
		return fleet_unavailable(m, -ENOTCONN, "mint a token", &why, e);
	}
	snprintf(key, sizeof key, TOKEN_KEY_PREFIX "%s", row->hash);
	r = etcd_create(m->cfg.fleet, key, value, strlen(value), 0, &why);
	if (r == -EEXIST)
		return station_error_set(e, -EIO, NULL, "a token with this hash exists already");
	return r < 0 ? fleet_unavailable(m, r, "mint a token", &why, e) : 0;
}

int manager_fleet_token_delete(struct manager *m, const char *hash_hex, struct station_error *e)
{
	struct station_error why = {};
	char key[sizeof TOKEN_KEY_PREFIX + 64];
	int r;

	if (!manager_fleet_watching(m)) {
		station_error_set(&why, -ENOTCONN, NULL, "it is unreachable since the last try");
		return fleet_unavailable(m, -ENOTCONN, "revoke a token", &why, e);
	}
	snprintf(key, sizeof key, TOKEN_KEY_PREFIX "%s", hash_hex);
	r = etcd_delete(m->cfg.fleet, key, false, &why);
	/* Gone already: revoked elsewhere, or minted before this worker joined the fleet. */
	return r < 0 && r != -ENOENT ? fleet_unavailable(m, r, "revoke a token", &why, e) : 0;
}
