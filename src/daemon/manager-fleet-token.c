/* SPDX-License-Identifier: MIT */
/* A fleet's tokens in etcd (docs/operations.md, "Many workers"): tokens/HASH holds a token's
 * row as JSON (its SHA-256, never the secret; its id, name, scope, tenant, limits and times),
 * written by the worker that mints it before anything else knows it, deleted by the worker
 * that revokes it. Every worker applies what etcd holds to its table (manager-token.c) and
 * keeps a copy in its SQLite, so that it still knows them while etcd is away.
 *
 * A mint's write and a revocation's delete run on the fleet's pool of call threads
 * (manager_fleet_queue()), never on the loop: etcd may take ETCD_CALL_MS to fail. The table
 * changes, and the request is answered, once etcd has answered (done(), on the loop). */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "basic/cleanup.h"
#include "basic/log.h"
#include "event/work.h"
#include "fleet-token-json.h"
#include "manager-internal.h"
#include "store/etcd.h"

#define TOKEN_KEY_PREFIX "tokens/"

struct own_tokens {
	const struct etcd_kv *range;
	size_t n_range;
	struct etcd_kv *kvs;
	size_t n;
};

static int own_add(const struct token_row *row, void *userdata)
{
	struct own_tokens *o = userdata;
	char key[sizeof TOKEN_KEY_PREFIX + 64];
	struct etcd_kv *kvs, *kv;

	snprintf(key, sizeof key, TOKEN_KEY_PREFIX "%s", row->hash);
	for (size_t i = 0; i < o->n_range; i++)
		if (strcmp(o->range[i].key, key) == 0)
			return 0;
	kvs = realloc(o->kvs, (o->n + 1) * sizeof *kvs);
	if (!kvs)
		return -ENOMEM;
	o->kvs = kvs;
	kv = &kvs[o->n];
	*kv = (struct etcd_kv){ .key = strdup(key), .value = fleet_token_encode(row) };
	if (!kv->key || !kv->value) {
		free(kv->key);
		free(kv->value);
		return -ENOMEM;
	}
	kv->value_len = strlen(kv->value);
	o->n++;
	return 0;
}

int fleet_token_own(struct manager *m, const struct etcd_kv *kvs, size_t n, struct etcd_kv **ret,
		    size_t *ret_n)
{
	struct own_tokens o = { .range = kvs, .n_range = n };
	int r = manager_token_fleet_each(m, own_add, &o);

	if (r < 0) {
		etcd_kv_free_array(o.kvs, o.n);
		return r;
	}
	*ret = o.kvs;
	*ret_n = o.n;
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

struct fleet_call {
	struct manager *m;
	char key[sizeof TOKEN_KEY_PREFIX + 64];
	char *value; /* a put's row; NULL: a delete */
	int r;
	struct station_error why;
	fleet_token_done_fn done;
	void *userdata;
};

/* On a call thread: etcd's answer, a put's -EEXIST and a delete's -ENOENT kept apart. */
static void call_run(void *userdata)
{
	struct fleet_call *c = userdata;
	struct etcd *etcd = c->m->cfg.fleet;

	if (c->value)
		c->r = etcd_create(etcd, c->key, c->value, strlen(c->value), 0, &c->why);
	else
		c->r = etcd_delete(etcd, c->key, false, &c->why);
}

static void call_done(void *userdata, bool cancelled)
{
	struct fleet_call *c = userdata;
	const char *what = c->value ? "mint a token" : "revoke a token";
	struct station_error e = {};
	int r = c->r;

	if (cancelled)
		r = station_error_set(&e, -ECANCELED, NULL, "cannot %s: the controller is stopping",
				      what);
	else if (c->value && r == -EEXIST)
		r = station_error_set(&e, -EIO, NULL, "a token with this hash exists already");
	else if (!c->value && r == -ENOENT)
		r = 0; /* gone already: revoked by another worker meanwhile */
	else if (r < 0)
		r = fleet_unavailable(c->m, r, what, &c->why, &e);
	c->done(c->userdata, r, &e);
	free(c->value);
	free(c);
}

static int call_queue(struct manager *m, const char *hash_hex, char *value, const char *what,
		      fleet_token_done_fn done, void *userdata, struct station_error *e)
{
	struct station_error why = {};
	struct fleet_call *c;
	int r;

	if (!manager_fleet_watching(m)) {
		free(value);
		station_error_set(&why, -ENOTCONN, NULL, "it is unreachable since the last try");
		return fleet_unavailable(m, -ENOTCONN, what, &why, e);
	}
	c = calloc(1, sizeof *c);
	if (!c) {
		free(value);
		return station_error_set(e, -ENOMEM, NULL, "out of memory");
	}
	*c = (struct fleet_call){ .m = m, .value = value, .done = done, .userdata = userdata };
	snprintf(c->key, sizeof c->key, TOKEN_KEY_PREFIX "%s", hash_hex);
	r = manager_fleet_queue(m, call_run, call_done, c);
	if (r >= 0)
		return 0;
	free(c->value);
	free(c);
	if (r == -EBUSY)
		return station_error_set(e, STATION_EFLEET, NULL,
					 "cannot %s: too many calls wait for the fleet's store "
					 "(%s); nothing changed, try again",
					 what, manager_fleet_describe(m));
	return station_error_set(e, r, NULL, "cannot %s: %s", what, strerror(-r));
}

int manager_fleet_token_put(struct manager *m, const struct token_row *row,
			    fleet_token_done_fn done, void *userdata, struct station_error *e)
{
	char *value = fleet_token_encode(row);

	if (!value)
		return station_error_set(e, -ENOMEM, NULL, "out of memory");
	return call_queue(m, row->hash, value, "mint a token", done, userdata, e);
}

int manager_fleet_token_delete(struct manager *m, const char *hash_hex, fleet_token_done_fn done,
			       void *userdata, struct station_error *e)
{
	return call_queue(m, hash_hex, NULL, "revoke a token", done, userdata, e);
}
