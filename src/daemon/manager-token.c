/* SPDX-License-Identifier: MIT */
/* Bearer tokens (docs/api.md, "Tokens"): created with a scope, a tenant and limits, shown once,
 * kept in the store as the SHA-256 of the secret only, and in a table on the loop so that a
 * request's check never reaches SQLite: one bucket of the table by the hash, then a
 * constant-time compare of the whole hash. Revocation is at once: the table forgets the token
 * and the HTTP layer closes the streams it authenticated. */

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "basic/cleanup.h"
#include "basic/json-util.h"
#include "basic/log.h"
#include "basic/util.h"
#include "event/event.h"
#include "manager-internal.h"

#define TOKEN_BUCKETS 256
#define TOKEN_TOUCH_USEC (60ull * 1000000u) /* lastUsedAt: written at most once a minute */
#define TOKEN_ID_CHARS 26
#define TOKEN_SECRET_PREFIX "sst_"

/* Caps a token's limits may carry (docs/api.md, "Tokens"). */
#define LIMIT_CPUS_MAX 1024
#define LIMIT_MEMORY_MB_MAX (16u * 1024 * 1024)
#define LIMIT_PIDS_MAX 4194304
#define LIMIT_WORKSPACES_MAX 100000

struct token {
	struct token *next;	/* in its bucket */
	struct token *all_next; /* in m->tokens->all, by creation */
	uint8_t hash[32];	/* SHA-256 of the secret */
	struct token_row row;	/* the stored row (hash hex included) */
	struct auth_principal principal;
	bool fleet_seen;     /* put since manager_token_fleet_mark() */
	uint64_t added_usec; /* when it entered the table (realtime) */
};

struct manager_tokens {
	struct token *buckets[TOKEN_BUCKETS];
	struct token *all, **all_tail;
	size_t n;
	size_t minting; /* mints waiting for the fleet's store */
	manager_token_revoked_fn revoked;
	void *revoked_data;
};

static void token_free(struct token *t)
{
	if (!t)
		return;
	token_row_free(&t->row);
	free(t);
}

static unsigned bucket_of(const uint8_t hash[32])
{
	return hash[0] % TOKEN_BUCKETS;
}

/* No early exit: the time does not tell how much of a hash matched. */
static bool hash_equal(const uint8_t a[32], const uint8_t b[32])
{
	uint8_t d = 0;

	for (size_t i = 0; i < 32; i++)
		d |= a[i] ^ b[i];
	return d == 0;
}

static void secret_hash(const char *secret, size_t n, uint8_t ret[32])
{
	struct sha256_ctx c;

	sha256_init(&c);
	sha256_update(&c, secret, n);
	sha256_final(&c, ret);
}

static void principal_fill(struct token *t)
{
	struct auth_principal *p = &t->principal;
	int s = auth_scope_from_string(t->row.scope);

	*p = (struct auth_principal){};
	snprintf(p->token_id, sizeof p->token_id, "%s", t->row.id);
	snprintf(p->name, sizeof p->name, "%s", t->row.name);
	/* A scope this binary does not know reads as the narrowest. */
	p->scope = s < 0 ? AUTH_SCOPE_READ : (enum auth_scope)s;
	snprintf(p->tenant, sizeof p->tenant, "%s", t->row.tenant ?: "");
	if (s < 0 && !t->row.tenant)
		snprintf(p->tenant, sizeof p->tenant, "%s", "-"); /* sees no tenant's objects */
	p->limits = t->row.limits;
}

/* Takes row. */
static int token_add(struct manager_tokens *tt, struct token_row *row)
{
	struct token *t;

	if (!row->hash || strlen(row->hash) != 64)
		return -EINVAL;
	t = calloc(1, sizeof *t);
	if (!t)
		return -ENOMEM;
	t->row = *row;
	*row = (struct token_row){};
	if (hex_decode(t->row.hash, t->hash, sizeof t->hash) < 0) {
		token_free(t);
		return -EINVAL;
	}
	principal_fill(t);
	t->added_usec = realtime_usec();
	t->next = tt->buckets[bucket_of(t->hash)];
	tt->buckets[bucket_of(t->hash)] = t;
	*tt->all_tail = t;
	tt->all_tail = &t->all_next;
	tt->n++;
	return 0;
}

static struct token *token_find_id(struct manager *m, const char *id)
{
	for (struct token *t = m->tokens ? m->tokens->all : NULL; t; t = t->all_next)
		if (strcmp(t->row.id, id) == 0)
			return t;
	return NULL;
}

static struct token *token_find_hash(struct manager *m, const char *hash_hex)
{
	for (struct token *t = m->tokens ? m->tokens->all : NULL; t; t = t->all_next)
		if (strcmp(t->row.hash, hash_hex) == 0)
			return t;
	return NULL;
}

int manager_tokens_init(struct manager *m)
{
	struct manager_tokens *tt = calloc(1, sizeof *tt);
	struct token_row *rows = NULL;
	size_t n = 0;
	int r;

	if (!tt)
		return -ENOMEM;
	tt->all_tail = &tt->all;
	m->tokens = tt;
	r = store_token_list(m->store, &rows, &n);
	if (r < 0)
		return r;
	for (size_t i = 0; i < n; i++) {
		r = token_add(tt, &rows[i]);
		if (r < 0)
			log_error("cannot load a token", "token", rows[i].id, "error", strerror(-r),
				  NULL);
		token_row_free(&rows[i]);
	}
	free(rows);
	return 0;
}

void manager_tokens_free(struct manager *m)
{
	struct manager_tokens *tt = m->tokens;

	if (!tt)
		return;
	while (tt->all) {
		struct token *t = tt->all;

		tt->all = t->all_next;
		token_free(t);
	}
	free(tt);
	m->tokens = NULL;
}

void manager_token_on_revoke(struct manager *m, manager_token_revoked_fn fn, void *userdata)
{
	if (!m->tokens)
		return;
	m->tokens->revoked = fn;
	m->tokens->revoked_data = userdata;
}

static bool token_expired(const struct token *t, uint64_t now)
{
	return t->row.expires_at && now >= t->row.expires_at;
}

int manager_token_authenticate(struct manager *m, const char *secret, size_t n,
			       struct auth_principal *ret)
{
	struct token *found = NULL;
	uint8_t hash[32];
	uint64_t now;

	if (!m->tokens || !secret || n == 0)
		return -EACCES;
	secret_hash(secret, n, hash);
	for (struct token *t = m->tokens->buckets[bucket_of(hash)]; t; t = t->next)
		if (hash_equal(t->hash, hash))
			found = t;
	explicit_bzero(hash, sizeof hash);
	if (!found)
		return -EACCES;
	/* The fleet's tokens, once etcd has not answered for too long (manager-fleet.c). */
	if (m->fleet && strcmp(found->row.id, "admin") != 0 && !manager_fleet_tokens_trusted(m))
		return -EACCES;
	if (found->row.revoked_at)
		return -EKEYREVOKED;
	now = realtime_usec();
	if (token_expired(found, now))
		return -EKEYEXPIRED;
	if (now - found->row.last_used_at >= TOKEN_TOUCH_USEC || now < found->row.last_used_at) {
		found->row.last_used_at = now;
		(void)store_token_touch(m->store, found->row.id, now);
	}
	*ret = found->principal;
	return 0;
}

/* ---- JSON --------------------------------------------------------------------------------- */

static json_t *limits_to_json(const struct auth_limits *l)
{
	json_t *o = json_object();

	if (!o)
		return NULL;
	json_object_set_new(o, "cpus", json_real(l->cpus_milli / 1000.0));
	json_object_set_new(o, "memoryMb", json_integer(l->memory_mb));
	json_object_set_new(o, "pidsLimit", json_integer(l->pids_limit));
	json_object_set_new(o, "workspaces", json_integer(l->workspaces));
	return o;
}

static json_t *token_to_json(const struct token *t, uint64_t now)
{
	json_t *o = json_object();

	if (!o)
		return NULL;
	json_object_set_new(o, "id", json_string(t->row.id));
	json_object_set_new(o, "name", json_string(t->row.name));
	json_object_set_new(o, "scope", json_string(t->row.scope));
	json_object_set_new(o, "tenant", t->row.tenant ? json_string(t->row.tenant) : json_null());
	json_object_set_new(o, "limits", limits_to_json(&t->row.limits));
	json_set_time(o, "createdAt", t->row.created_at);
	json_set_time(o, "expiresAt", t->row.expires_at);
	json_set_time(o, "revokedAt", t->row.revoked_at);
	json_set_time(o, "lastUsedAt", t->row.last_used_at);
	json_object_set_new(o, "expired", json_boolean(token_expired(t, now)));
	return o;
}

/* ---- validation --------------------------------------------------------------------------- */

static int check_known(json_t *o, const char *const *known, size_t n, const char *prefix,
		       struct station_error *e)
{
	const char *key;
	json_t *v;

	json_object_foreach(o, key, v) {
		bool ok = false;

		for (size_t i = 0; i < n; i++)
			ok |= strcmp(key, known[i]) == 0;
		if (!ok) {
			char field[96];

			snprintf(field, sizeof field, "%s%.64s", prefix, key);
			return station_error_set(e, -EINVAL, field, "unknown field \"%s\"", field);
		}
	}
	return 0;
}

static bool name_valid(const char *s, size_t n)
{
	if (n == 0 || n > AUTH_NAME_MAX || strlen(s) != n)
		return false;
	for (size_t i = 0; i < n; i++)
		if ((uint8_t)s[i] < 0x20 || (uint8_t)s[i] > 0x7e)
			return false;
	return true;
}

static int limit_u32(json_t *limits, const char *key, uint32_t max, uint32_t *ret,
		     struct station_error *e)
{
	json_t *v = json_object_get(limits, key);
	char field[32];
	json_int_t i;

	if (!v || json_is_null(v))
		return 0;
	snprintf(field, sizeof field, "limits.%s", key);
	if (!json_is_integer(v) || (i = json_integer_value(v)) < 0 || (uint64_t)i > max)
		return station_error_set(e, -EINVAL, field,
					 "field \"%s\" must be an integer from 0 to %u", field,
					 max);
	*ret = (uint32_t)i;
	return 0;
}

static int check_limits(json_t *body, struct auth_limits *ret, struct station_error *e)
{
	static const char *const known[] = { "cpus", "memoryMb", "pidsLimit", "workspaces" };
	json_t *l = json_object_get(body, "limits"), *cpus;
	int r;

	if (!l || json_is_null(l))
		return 0;
	if (!json_is_object(l))
		return station_error_set(e, -EINVAL, "limits",
					 "field \"limits\" must be an object, not %s",
					 json_kind_name(l));
	r = check_known(l, known, ELEMENTSOF(known), "limits.", e);
	if (r < 0)
		return r;
	cpus = json_object_get(l, "cpus");
	if (cpus && !json_is_null(cpus)) {
		double c = json_is_number(cpus) ? json_number_value(cpus) : -1;

		if (!json_is_number(cpus) || !isfinite(c) || c < 0 || c > LIMIT_CPUS_MAX)
			return station_error_set(e, -EINVAL, "limits.cpus",
						 "field \"limits.cpus\" must be a number from 0 to "
						 "%d",
						 LIMIT_CPUS_MAX);
		ret->cpus_milli = (uint32_t)(c * 1000 + 0.5);
	}
	r = limit_u32(l, "memoryMb", LIMIT_MEMORY_MB_MAX, &ret->memory_mb, e);
	if (r >= 0)
		r = limit_u32(l, "pidsLimit", LIMIT_PIDS_MAX, &ret->pids_limit, e);
	if (r >= 0)
		r = limit_u32(l, "workspaces", LIMIT_WORKSPACES_MAX, &ret->workspaces, e);
	return r;
}

struct token_input {
	const char *name;
	int scope;
	const char *tenant;
	uint64_t expires_at;
	struct auth_limits limits;
	bool has_limits;
};

static int token_input_check(json_t *body, struct token_input *in, struct station_error *e)
{
	static const char *const known[] = { "name", "scope", "tenant", "expiresAt", "limits" };
	json_t *v;
	int r;

	if (!json_is_object(body))
		return station_error_set(e, -EINVAL, NULL, "request body must be a JSON object");
	r = check_known(body, known, ELEMENTSOF(known), "", e);
	if (r < 0)
		return r;

	v = json_object_get(body, "name");
	if (!v)
		return station_error_set(e, -EINVAL, "name", "field \"name\" is required");
	if (!json_is_string(v) || !name_valid(json_string_value(v), json_string_length(v)))
		return station_error_set(e, -EINVAL, "name",
					 "field \"name\" must be a string of 1 to %d printable "
					 "ASCII characters",
					 AUTH_NAME_MAX);
	in->name = json_string_value(v);

	v = json_object_get(body, "scope");
	if (!v)
		return station_error_set(e, -EINVAL, "scope",
					 "field \"scope\" is required: \"admin\", \"tenant\" or "
					 "\"read\"");
	in->scope = json_is_string(v) ? auth_scope_from_string(json_string_value(v)) : -EINVAL;
	if (in->scope < 0)
		return station_error_set(e, -EINVAL, "scope",
					 "field \"scope\" must be \"admin\", \"tenant\" or "
					 "\"read\"");

	v = json_object_get(body, "tenant");
	if (v && !json_is_null(v)) {
		if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v) ||
		    !auth_tenant_valid(json_string_value(v)))
			return station_error_set(e, -EINVAL, "tenant",
						 "field \"tenant\" must be 1 to %d of [a-z0-9-], "
						 "not starting with '-'",
						 AUTH_TENANT_MAX);
		in->tenant = json_string_value(v);
	}
	if (in->scope == AUTH_SCOPE_TENANT && !in->tenant)
		return station_error_set(e, -EINVAL, "tenant",
					 "field \"tenant\" is required for a tenant token");
	if (in->scope == AUTH_SCOPE_ADMIN && in->tenant)
		return station_error_set(e, -EINVAL, "tenant",
					 "field \"tenant\": an admin token has no tenant");

	v = json_object_get(body, "expiresAt");
	if (v && !json_is_null(v)) {
		if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v) ||
		    parse_rfc3339(json_string_value(v), &in->expires_at) < 0)
			return station_error_set(e, -EINVAL, "expiresAt",
						 "field \"expiresAt\" must be an RFC 3339 time "
						 "such as \"2026-12-02T11:00:00Z\"");
		if (in->expires_at <= realtime_usec())
			return station_error_set(e, -EINVAL, "expiresAt",
						 "field \"expiresAt\" \"%.40s\" is not in the "
						 "future",
						 json_string_value(v));
	}
	r = check_limits(body, &in->limits, e);
	if (r < 0)
		return r;
	v = json_object_get(body, "limits");
	in->has_limits = v && !json_is_null(v);
	if (in->has_limits && in->scope != AUTH_SCOPE_TENANT)
		return station_error_set(e, -EINVAL, "limits",
					 "field \"limits\": only a tenant token carries limits");
	return 0;
}

/* "tok-" and 26 of base32's lower-case alphabet: 130 random bits. */
static int token_new_id(char ret[AUTH_TOKEN_ID_MAX + 1])
{
	static const char alphabet[] = "abcdefghijklmnopqrstuvwxyz234567";
	uint8_t raw[TOKEN_ID_CHARS];
	int r = random_bytes(raw, sizeof raw);

	if (r < 0)
		return r;
	memcpy(ret, "tok-", 4);
	for (size_t i = 0; i < TOKEN_ID_CHARS; i++)
		ret[4 + i] = alphabet[raw[i] & 31];
	ret[4 + TOKEN_ID_CHARS] = '\0';
	return 0;
}

/* ---- the API ------------------------------------------------------------------------------ */

/* A mint or a revocation in a fleet, while etcd is asked (manager-fleet-token.c). */
struct token_call {
	struct manager *m;
	struct token_row row; /* a mint's new row */
	char id[AUTH_TOKEN_ID_MAX + 1];
	char hash[65];
	char secret[sizeof TOKEN_SECRET_PREFIX + 64]; /* a mint's, shown once */
	manager_token_done_fn done;		      /* NULL once forgotten */
	void *userdata;
};

static void token_call_free(struct token_call *c)
{
	token_row_free(&c->row);
	explicit_bzero(c->secret, sizeof c->secret);
	free(c);
}

void manager_token_call_forget(struct token_call *c)
{
	if (c)
		c->done = NULL;
}

static void token_call_answer(struct token_call *c, int r, json_t *token,
			      const struct station_error *e)
{
	if (c->done)
		c->done(c->userdata, r, token, e);
	else
		json_decref(token);
	token_call_free(c);
}

/* The new token in the table and the store; the watch may have put it there already. */
static int token_keep(struct manager *m, struct token_row *row, const char *secret, json_t **ret,
		      struct station_error *e)
{
	char hash[65];
	struct token *t = token_find_hash(m, row->hash);
	json_t *o;
	int r;

	snprintf(hash, sizeof hash, "%s", row->hash);
	if (!t) {
		r = store_token_insert(m->store, row);
		if (r < 0)
			return station_error_set(e, r, NULL, "cannot store the token: %s",
						 strerror(-r));
		r = token_add(m->tokens, row);
		if (r < 0)
			return station_error_set(e, r, NULL, "cannot keep the token: %s",
						 strerror(-r));
		t = token_find_hash(m, hash);
	}
	o = t ? token_to_json(t, realtime_usec()) : NULL;
	if (!o)
		return station_error_set(e, -ENOMEM, NULL, "out of memory");
	json_object_set_new(o, "token", json_string(secret));
	log_info("token created", "token", t->row.id, "scope", t->row.scope, "tenant",
		 t->row.tenant ?: "", NULL);
	*ret = o;
	return 0;
}

static void on_fleet_put(void *userdata, int r, const struct station_error *fe)
{
	struct token_call *c = userdata;
	struct station_error e = *fe;
	json_t *token = NULL;

	c->m->tokens->minting--;
	if (r >= 0)
		r = token_keep(c->m, &c->row, c->secret, &token, &e);
	token_call_answer(c, r, token, &e);
}

/* In a fleet, etcd first: a token no other worker knows is never handed out. Takes row. */
static int token_mint_fleet(struct manager *m, struct token_row *row, const char *secret,
			    manager_token_done_fn done, void *userdata, struct token_call **ret,
			    struct station_error *e)
{
	struct token_call *c = calloc(1, sizeof *c);
	int r;

	if (!c)
		return station_error_set(e, -ENOMEM, NULL, "out of memory");
	c->m = m;
	c->row = *row;
	*row = (struct token_row){};
	snprintf(c->secret, sizeof c->secret, "%s", secret);
	c->done = done;
	c->userdata = userdata;
	r = manager_fleet_token_put(m, &c->row, on_fleet_put, c, e);
	if (r < 0) {
		token_call_free(c);
		return r;
	}
	m->tokens->minting++;
	*ret = c;
	return 1;
}

int manager_token_create(struct manager *m, json_t *body, manager_token_done_fn done,
			 void *userdata, struct token_call **ret_call, json_t **ret,
			 struct station_error *e)
{
	struct token_input in = {};
	struct token_row row = {};
	uint8_t raw[32];
	char id[AUTH_TOKEN_ID_MAX + 1], secret[sizeof TOKEN_SECRET_PREFIX + 64], hash[65];
	int r;

	r = token_input_check(body, &in, e);
	if (r < 0)
		return r;
	if (!m->tokens)
		return station_error_set(e, -EIO, NULL, "the token table is not loaded");
	if (m->tokens->n + m->tokens->minting >= MANAGER_TOKENS_MAX)
		return station_error_set(e, -EAGAIN, NULL,
					 "too many tokens (%d, revoked ones included)",
					 MANAGER_TOKENS_MAX);
	r = token_new_id(id);
	if (r >= 0)
		r = random_bytes(raw, sizeof raw);
	if (r < 0)
		return station_error_set(e, r, NULL, "cannot make a token: %s", strerror(-r));
	memcpy(secret, TOKEN_SECRET_PREFIX, strlen(TOKEN_SECRET_PREFIX));
	hex_encode(raw, sizeof raw, secret + strlen(TOKEN_SECRET_PREFIX));
	explicit_bzero(raw, sizeof raw);
	sha256_hex(secret, strlen(secret), hash);

	row.id = strdup(id);
	row.name = strdup(in.name);
	row.scope = strdup(auth_scope_to_string((enum auth_scope)in.scope));
	row.tenant = in.tenant ? strdup(in.tenant) : NULL;
	row.hash = strdup(hash);
	row.limits = in.limits;
	row.created_at = realtime_usec();
	row.expires_at = in.expires_at;
	if (!row.id || !row.name || !row.scope || !row.hash || (in.tenant && !row.tenant))
		r = station_error_set(e, -ENOMEM, NULL, "out of memory");
	else if (m->fleet)
		r = token_mint_fleet(m, &row, secret, done, userdata, ret_call, e);
	else
		r = token_keep(m, &row, secret, ret, e);
	explicit_bzero(secret, sizeof secret);
	token_row_free(&row);
	return r;
}

int manager_token_list(struct manager *m, json_t **ret, struct station_error *e)
{
	json_t *list = json_array();
	uint64_t now = realtime_usec();

	if (!list)
		return station_error_set(e, -ENOMEM, NULL, "out of memory");
	for (struct token *t = m->tokens ? m->tokens->all : NULL; t; t = t->all_next)
		json_array_append_new(list, token_to_json(t, now));
	*ret = list;
	return 0;
}

static int token_lookup(struct manager *m, const char *id, struct token **ret,
			struct station_error *e)
{
	struct token *t = token_find_id(m, id);

	if (!t)
		return station_error_set(e, -ENOENT, NULL, "no such token: \"%.64s\"", id);
	*ret = t;
	return 0;
}

int manager_token_get(struct manager *m, const char *id, json_t **ret, struct station_error *e)
{
	struct token *t = NULL;
	int r = token_lookup(m, id, &t, e);

	if (r < 0)
		return r;
	*ret = token_to_json(t, realtime_usec());
	return *ret ? 0 : station_error_set(e, -ENOMEM, NULL, "out of memory");
}

/* The token revoked in the store and the table, its streams closed. Once etcd deleted it,
 * the table follows even when the store fails; otherwise the store's failure changes nothing. */
static int token_revoke_here(struct manager *m, struct token *t, const char *by)
{
	uint64_t now = realtime_usec();
	int r;

	if (t->row.revoked_at || strcmp(t->row.id, "admin") == 0)
		return 0;
	r = store_token_revoke(m->store, t->row.id, now);
	if (r < 0 && !m->fleet)
		return r;
	t->row.revoked_at = now;
	log_info("token revoked", "token", t->row.id, "by", by, NULL);
	if (m->tokens->revoked)
		m->tokens->revoked(m->tokens->revoked_data, t->row.id);
	return r;
}

static int token_revoked_json(struct manager *m, struct token *t, int r, json_t **ret,
			      struct station_error *e)
{
	if (r < 0)
		return station_error_set(e, r, NULL, "cannot revoke token \"%s\": %s", t->row.id,
					 strerror(-r));
	*ret = token_to_json(t, realtime_usec());
	return *ret ? 0 : station_error_set(e, -ENOMEM, NULL, "out of memory");
}

static void on_fleet_delete(void *userdata, int r, const struct station_error *fe)
{
	struct token_call *c = userdata;
	struct station_error e = *fe;
	struct token *t = token_find_id(c->m, c->id);
	json_t *token = NULL;

	if (r >= 0 && !t)
		r = station_error_set(&e, -ENOENT, NULL, "no such token: \"%.64s\"", c->id);
	else if (r >= 0)
		r = token_revoked_json(c->m, t, token_revoke_here(c->m, t, "api"), &token, &e);
	token_call_answer(c, r, token, &e);
}

/* In a fleet, etcd first: a revocation is answered once no worker can learn the token from
 * etcd any more. */
static int token_revoke_fleet(struct manager *m, struct token *t, manager_token_done_fn done,
			      void *userdata, struct token_call **ret, struct station_error *e)
{
	struct token_call *c = calloc(1, sizeof *c);
	int r;

	if (!c)
		return station_error_set(e, -ENOMEM, NULL, "out of memory");
	c->m = m;
	snprintf(c->id, sizeof c->id, "%s", t->row.id);
	snprintf(c->hash, sizeof c->hash, "%s", t->row.hash);
	c->done = done;
	c->userdata = userdata;
	r = manager_fleet_token_delete(m, c->hash, on_fleet_delete, c, e);
	if (r < 0) {
		token_call_free(c);
		return r;
	}
	*ret = c;
	return 1;
}

int manager_token_revoke(struct manager *m, const char *id, manager_token_done_fn done,
			 void *userdata, struct token_call **ret_call, json_t **ret,
			 struct station_error *e)
{
	struct token *t = NULL;
	int r = token_lookup(m, id, &t, e);

	if (r < 0)
		return r;
	if (strcmp(t->row.id, "admin") == 0)
		return station_error_set(e, -EINVAL, NULL,
					 "the admin token cannot be revoked through the API "
					 "(give the controller another one with "
					 "--admin-token-file and restart it)");
	if (!t->row.revoked_at && m->fleet)
		return token_revoke_fleet(m, t, done, userdata, ret_call, e);
	return token_revoked_json(m, t, token_revoke_here(m, t, "api"), ret, e);
}

/* ---- the fleet's tokens (manager-fleet-token.c hands them over on the loop) --------------- */

int manager_token_fleet_put(struct manager *m, struct token_row *row)
{
	char hash[65];
	struct token *t;
	int r;

	if (!m->tokens || !row->hash)
		return -EINVAL;
	t = token_find_hash(m, row->hash);
	if (t) {
		t->fleet_seen = true;
		return 0;
	}
	if (m->tokens->n >= MANAGER_TOKENS_MAX)
		return -EAGAIN;
	r = store_token_insert(m->store, row);
	if (r < 0)
		log_warn("cannot keep a copy of the fleet's token", "token", row->id, "error",
			 strerror(-r), NULL);
	snprintf(hash, sizeof hash, "%s", row->hash);
	r = token_add(m->tokens, row);
	if (r < 0)
		return r;
	t = token_find_hash(m, hash);
	if (t)
		t->fleet_seen = true;
	return 0;
}

void manager_token_fleet_gone(struct manager *m, const char *hash_hex)
{
	struct token *t = token_find_hash(m, hash_hex);

	if (t)
		(void)token_revoke_here(m, t, "fleet");
}

int manager_token_fleet_each(struct manager *m,
			     int (*fn)(const struct token_row *row, void *userdata), void *userdata)
{
	int r;

	for (struct token *t = m->tokens ? m->tokens->all : NULL; t; t = t->all_next) {
		if (t->row.revoked_at || strcmp(t->row.id, "admin") == 0)
			continue;
		r = fn(&t->row, userdata);
		if (r < 0)
			return r;
	}
	return 0;
}

void manager_token_fleet_mark(struct manager *m)
{
	for (struct token *t = m->tokens ? m->tokens->all : NULL; t; t = t->all_next)
		t->fleet_seen = false;
}

void manager_token_fleet_sweep(struct manager *m, uint64_t since_usec)
{
	for (struct token *t = m->tokens ? m->tokens->all : NULL; t; t = t->all_next)
		if (!t->fleet_seen && t->added_usec < since_usec)
			(void)token_revoke_here(m, t, "fleet");
}
