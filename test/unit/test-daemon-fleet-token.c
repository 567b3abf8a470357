/* SPDX-License-Identifier: MIT */
/* A fleet's token row as etcd holds it (src/daemon/fleet-token-json.c): every field round
 * trips; what is not a row a worker wrote is refused whole, never half read. */
#include <criterion/criterion.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/fleet-token-json.h"

#define HASH "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

static struct token_row row_full(void)
{
	return (struct token_row){
		.id = "tok-abcdefghijklmnopqrstuvwxyz",
		.name = "acme ci (nightly)",
		.scope = "tenant",
		.tenant = "acme-2",
		.hash = HASH,
		.limits = { .cpus_milli = 1500,
			    .memory_mb = 4096,
			    .pids_limit = 512,
			    .workspaces = 7 },
		.created_at = 1765000000123456ull,
		.expires_at = 1766000000000000ull,
		.revoked_at = 99,
		.last_used_at = 98,
	};
}

Test(fleet_token, every_field_round_trips)
{
	struct token_row in = row_full(), out = {};
	char *s = fleet_token_encode(&in);

	cr_assert_not_null(s);
	cr_assert_null(strstr(s, "sst_"), "no secret: %s", s);
	cr_assert_eq(fleet_token_decode(s, strlen(s), &out), 0, "%s", s);
	cr_assert_str_eq(out.id, in.id);
	cr_assert_str_eq(out.name, in.name);
	cr_assert_str_eq(out.scope, in.scope);
	cr_assert_str_eq(out.tenant, in.tenant);
	cr_assert_str_eq(out.hash, in.hash);
	cr_assert_eq(out.created_at, in.created_at);
	cr_assert_eq(out.expires_at, in.expires_at);
	cr_assert_eq(out.limits.cpus_milli, 1500);
	cr_assert_eq(out.limits.memory_mb, 4096);
	cr_assert_eq(out.limits.pids_limit, 512);
	cr_assert_eq(out.limits.workspaces, 7);
	cr_assert_eq(out.revoked_at, 0, "each worker's own");
	cr_assert_eq(out.last_used_at, 0, "each worker's own");
	token_row_free(&out);
	free(s);
}

Test(fleet_token, no_tenant_no_expiry_round_trips)
{
	struct token_row in = row_full(), out = {};
	char *s;

	in.scope = "read";
	in.tenant = NULL;
	in.expires_at = 0;
	in.limits = (struct auth_limits){ .workspaces = UINT32_MAX };
	s = fleet_token_encode(&in);
	cr_assert_eq(fleet_token_decode(s, strlen(s), &out), 0, "%s", s);
	cr_assert_null(out.tenant);
	cr_assert_str_eq(out.scope, "read");
	cr_assert_eq(out.expires_at, 0);
	cr_assert_eq(out.limits.workspaces, UINT32_MAX);
	token_row_free(&out);
	free(s);
}

/* The row encoded, then one field set (or removed, NULL) to a JSON value. */
static char *row_with(const char *key, const char *value_json)
{
	struct token_row in = row_full();
	char *s = fleet_token_encode(&in), *ret;
	json_t *o = json_loads(s, 0, NULL), *limits = json_object_get(o, "limits");
	json_t *target = strncmp(key, "limits.", 7) == 0 ? limits : o;
	const char *name = target == limits ? key + 7 : key;

	cr_assert_not_null(o);
	if (value_json) {
		json_t *v = json_loads(value_json, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);

		cr_assert_not_null(v, "%s", value_json);
		cr_assert_eq(json_object_set_new(target, name, v), 0);
	} else
		json_object_del(target, name);
	ret = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	free(s);
	return ret;
}

static void refused(const char *s, size_t n)
{
	struct token_row out = { .id = (char *)"untouched" };

	cr_assert_eq(fleet_token_decode(s, n, &out), -EPROTO, "accepted: %.200s", s);
	cr_assert_str_eq(out.id, "untouched", "ret untouched on failure");
}

Test(fleet_token, hostile_values_are_refused)
{
	static const char *const cases[][2] = {
		/* missing */
		{ "hash", NULL },
		{ "id", NULL },
		{ "name", NULL },
		{ "scope", NULL },
		{ "createdAt", NULL },
		/* wrong types */
		{ "hash", "64" },
		{ "id", "5" },
		{ "name", "[\"x\"]" },
		{ "scope", "true" },
		{ "tenant", "5" },
		{ "tenant", "{}" },
		{ "createdAt", "\"1765000000\"" },
		{ "createdAt", "1.5" },
		{ "expiresAt", "\"never\"" },
		{ "limits", "[]" },
		{ "limits", "7" },
		{ "limits.workspaces", "\"1\"" },
		{ "limits.memoryMb", "null" },
		{ "limits.cpusMilli", "2.5" },
		/* out of range */
		{ "createdAt", "-1" },
		{ "limits.workspaces", "-1" },
		{ "limits.pidsLimit", "4294967296" },
		/* hashes that are not 64 lower-case hex */
		{ "hash", "\"\"" },
		{ "hash", "\"0123\"" },
		{ "hash", "\"" HASH "0\"" },
		{ "hash", "\"0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef\"" },
		{ "hash", "\"0123456789abcdeg0123456789abcdef0123456789abcdef0123456789abcdef\"" },
		{ "hash",
		  "\"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcde\\u0000\"" },
		/* oversized, or of other characters */
		{ "id", "\"tok-abcdefghijklmnopqrstuvwxyz01\"" },
		{ "id", "\"tok-ABC\"" },
		{ "id", "\"tok-a/b\"" },
		{ "id", "\"\"" },
		{ "name", "\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"" },
		{ "name", "\"a\\nb\"" },
		{ "name", "\"a\\u0000b\"" },
		{ "name", "\"\"" },
		{ "tenant",
		  "\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"" },
		{ "tenant", "\"-acme\"" },
		{ "tenant", "\"Acme\"" },
		{ "scope", "\"xxxxxxxxxxxxxxxxx\"" },
		{ "scope", "\"Admin\"" },
		/* what a mint refuses */
		{ "id", "\"admin\"" },
		{ "tenant", "null" }, /* a tenant token without its tenant */
	};

	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		char *s = row_with(cases[i][0], cases[i][1]);

		refused(s, strlen(s));
		free(s);
	}
}

Test(fleet_token, an_admin_scope_with_a_tenant_is_refused)
{
	struct token_row in = row_full();
	char *s;

	in.scope = "admin";
	s = fleet_token_encode(&in);
	refused(s, strlen(s));
	free(s);
	in.tenant = NULL;
	in.limits = (struct auth_limits){};
	s = fleet_token_encode(&in);
	struct token_row out = {};
	cr_assert_eq(fleet_token_decode(s, strlen(s), &out), 0, "positive control: %s", s);
	token_row_free(&out);
	free(s);
}

Test(fleet_token, not_rows_are_refused)
{
	static const char *const docs[] = {
		"",
		"null",
		"[]",
		"\"row\"",
		"42",
		"{",
		"{}",
		"{\"id\":\"tok-a\"}",
		"{\"id\":\"tok-a\",\"id\":\"tok-b\"}",
	};
	struct token_row in = row_full();
	char *s = fleet_token_encode(&in), *big;
	size_t n = strlen(s);

	for (size_t i = 0; i < sizeof docs / sizeof docs[0]; i++)
		refused(docs[i], strlen(docs[i]));
	/* a duplicate key, and bytes past the value's end */
	big = malloc(n + 128);
	memcpy(big, s, n - 1);
	snprintf(big + n - 1, 128, ",\"hash\":\"" HASH "\"}");
	refused(big, strlen(big));
	refused(s, n + 1); /* the NUL read as part of it */
	/* a valid row padded past FLEET_TOKEN_JSON_MAX with spaces */
	free(big);
	big = malloc(FLEET_TOKEN_JSON_MAX + 2);
	memset(big, ' ', FLEET_TOKEN_JSON_MAX + 1);
	memcpy(big, s, n);
	big[FLEET_TOKEN_JSON_MAX + 1] = '\0';
	refused(big, FLEET_TOKEN_JSON_MAX + 1);
	/* positive control: the same padded to the bound */
	struct token_row out = {};
	cr_assert_eq(fleet_token_decode(big, FLEET_TOKEN_JSON_MAX, &out), 0);
	token_row_free(&out);
	free(big);
	free(s);
}
