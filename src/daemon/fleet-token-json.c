/* SPDX-License-Identifier: MIT */
#include "fleet-token-json.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "basic/json-util.h"
#include "domain/auth.h"

#define SCOPE_MAX 16

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

/* An integer field from 0 to max; absent: 0 unless required. */
static int int_of(json_t *o, const char *key, bool required, uint64_t max, uint64_t *ret)
{
	json_t *v = json_object_get(o, key);
	json_int_t i;

	*ret = 0;
	if (!v)
		return required ? -EPROTO : 0;
	if (!json_is_integer(v) || (i = json_integer_value(v)) < 0 || (uint64_t)i > max)
		return -EPROTO;
	*ret = (uint64_t)i;
	return 0;
}

static int u32_of(json_t *o, const char *key, uint32_t *ret)
{
	uint64_t v;
	int r = int_of(o, key, false, UINT32_MAX, &v);

	*ret = (uint32_t)v;
	return r;
}

/* A string field of 1 to max bytes, each of chars (NULL: printable ASCII); absent or null:
 * NULL unless required. */
static int str_of(json_t *o, const char *key, bool required, size_t max, const char *chars,
		  char **ret)
{
	json_t *v = json_object_get(o, key);
	const char *s;
	size_t n;

	*ret = NULL;
	if (!v || json_is_null(v))
		return required ? -EPROTO : 0;
	if (!json_is_string(v))
		return -EPROTO;
	s = json_string_value(v);
	n = json_string_length(v);
	if (n == 0 || n > max || strlen(s) != n)
		return -EPROTO;
	for (size_t i = 0; i < n; i++)
		if (chars ? !strchr(chars, s[i]) : (uint8_t)s[i] < 0x20 || (uint8_t)s[i] > 0x7e)
			return -EPROTO;
	*ret = strdup(s);
	return *ret ? 0 : -ENOMEM;
}

static int limits_of(json_t *o, struct auth_limits *ret)
{
	json_t *l = json_object_get(o, "limits");
	int r;

	if (!l || json_is_null(l))
		return 0;
	if (!json_is_object(l))
		return -EPROTO;
	r = u32_of(l, "cpusMilli", &ret->cpus_milli);
	if (r >= 0)
		r = u32_of(l, "memoryMb", &ret->memory_mb);
	if (r >= 0)
		r = u32_of(l, "pidsLimit", &ret->pids_limit);
	if (r >= 0)
		r = u32_of(l, "workspaces", &ret->workspaces);
	return r;
}

static int row_of(json_t *o, struct token_row *r)
{
	static const char id_chars[] = "abcdefghijklmnopqrstuvwxyz0123456789-";
	static const char hex[] = "0123456789abcdef";
	int e = str_of(o, "id", true, AUTH_TOKEN_ID_MAX, id_chars, &r->id);

	if (e >= 0)
		e = str_of(o, "name", true, AUTH_NAME_MAX, NULL, &r->name);
	if (e >= 0)
		e = str_of(o, "scope", true, SCOPE_MAX, "abcdefghijklmnopqrstuvwxyz", &r->scope);
	if (e >= 0)
		e = str_of(o, "tenant", false, AUTH_TENANT_MAX, id_chars, &r->tenant);
	if (e >= 0)
		e = str_of(o, "hash", true, 64, hex, &r->hash);
	if (e >= 0)
		e = int_of(o, "createdAt", true, INT64_MAX, &r->created_at);
	if (e >= 0)
		e = int_of(o, "expiresAt", false, INT64_MAX, &r->expires_at);
	if (e >= 0)
		e = limits_of(o, &r->limits);
	if (e < 0)
		return e;
	if (strlen(r->hash) != 64 || strcmp(r->id, "admin") == 0 ||
	    (r->tenant && !auth_tenant_valid(r->tenant)))
		return -EPROTO;
	/* what a mint refuses: a tenant token without its tenant, an admin token with one */
	if (strcmp(r->scope, "tenant") == 0 ? !r->tenant :
	    strcmp(r->scope, "admin") == 0  ? r->tenant != NULL :
					      false)
		return -EPROTO;
	return 0;
}

int fleet_token_decode(const char *s, size_t len, struct token_row *ret)
{
	struct token_row r = {};
	json_t *o;
	int e;

	if (len > FLEET_TOKEN_JSON_MAX)
		return -EPROTO;
	o = json_loadb(s, len, JSON_REJECT_DUPLICATES, NULL);
	e = json_is_object(o) ? row_of(o, &r) : -EPROTO;
	json_decref(o);
	if (e < 0) {
		token_row_free(&r);
		return e;
	}
	*ret = r;
	return 0;
}
