/* SPDX-License-Identifier: MIT */
/* Idempotency keys (docs/api.md, "Idempotency keys"): which object a creating request with an
 * Idempotency-Key made, kept in the store for the retention window, and the claims of requests
 * whose create is still under way, kept in memory (a create that answers later must not let a
 * duplicate start a second object meanwhile). */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "basic/list.h"
#include "basic/log.h"
#include "basic/util.h"
#include "event/event.h"
#include "manager-internal.h"

struct idempotency_claim {
	struct idempotency_claim *prev, *next;
	char *scope, *key;
	char hash[65];
};

static uint64_t expired_before(struct manager *m)
{
	uint64_t now = realtime_usec();

	return now - MIN(now, m->cfg.idempotency_retention_usec);
}

static struct idempotency_claim *claim_find(struct manager *m, const char *scope, const char *key)
{
	for (struct idempotency_claim *c = m->idempotency_claims; c; c = c->next)
		if (strcmp(c->scope, scope) == 0 && strcmp(c->key, key) == 0)
			return c;
	return NULL;
}

static void claim_free(struct idempotency_claim *c)
{
	if (!c)
		return;
	free(c->scope);
	free(c->key);
	free(c);
}

static int conflict(const char *key, const char *scope, struct station_error *e)
{
	return station_error_set(e, -EBUSY, "Idempotency-Key",
				 "Idempotency-Key \"%.255s\" was already used with a different "
				 "request on POST %.200s",
				 key, scope);
}

static int claim_new(struct manager *m, const char *scope, const char *key, const char *hash,
		     struct station_error *e)
{
	struct idempotency_claim *c = calloc(1, sizeof *c);

	if (c) {
		c->scope = strdup(scope);
		c->key = strdup(key);
	}
	if (!c || !c->scope || !c->key) {
		claim_free(c);
		return station_error_set(e, -ENOMEM, NULL, "out of memory");
	}
	snprintf(c->hash, sizeof c->hash, "%s", hash);
	LIST_PREPEND(&m->idempotency_claims, c);
	return 0;
}

int manager_idempotency_claim(struct manager *m, const char *scope, const char *key,
			      const char *hash, struct idempotency_hit *ret,
			      struct station_error *e)
{
	struct idempotency_row row = {};
	struct idempotency_claim *c;
	int r;

	c = claim_find(m, scope, key);
	if (c) {
		if (strcmp(c->hash, hash) != 0)
			return conflict(key, scope, e);
		return station_error_set(e, -EINPROGRESS, "Idempotency-Key",
					 "a request with Idempotency-Key \"%.255s\" on POST %.200s "
					 "is still in progress; retry it later",
					 key, scope);
	}
	r = store_idempotency_get(m->store, scope, key, expired_before(m), &row);
	if (r < 0)
		return station_error_set(e, r, NULL, "cannot read idempotency key \"%.255s\": %s",
					 key, strerror(-r));
	if (r > 0) {
		if (strcmp(row.request_hash, hash) != 0)
			r = conflict(key, scope, e);
		else {
			snprintf(ret->object_id, sizeof ret->object_id, "%s", row.object_id);
			ret->status = (unsigned)row.status;
			r = 1;
		}
		idempotency_row_free(&row);
		return r;
	}
	return claim_new(m, scope, key, hash, e);
}

static int claim_store(struct manager *m, const struct idempotency_claim *c, const char *object_id,
		       unsigned status)
{
	struct idempotency_row row = {
		.scope = c->scope,
		.key = c->key,
		.request_hash = (char *)c->hash,
		.object_id = (char *)object_id,
		.status = status,
		.created_at = realtime_usec(),
	};
	int r = store_idempotency_insert(m->store, &row, expired_before(m));

	if (r < 0)
		log_warn("cannot record idempotency key", "scope", c->scope, "object", object_id,
			 "error", strerror(-r), NULL);
	return r;
}

int manager_idempotency_record(struct manager *m, const char *scope, const char *key,
			       const char *object_id, unsigned status)
{
	struct idempotency_claim *c = claim_find(m, scope, key);

	if (!c)
		return -ENOENT;
	return claim_store(m, c, object_id, status);
}

int manager_idempotency_finish(struct manager *m, const char *scope, const char *key,
			       const char *object_id, unsigned status)
{
	struct idempotency_claim *c = claim_find(m, scope, key);
	int r = 0;

	if (!c)
		return -ENOENT;
	if (object_id)
		r = claim_store(m, c, object_id, status);
	LIST_REMOVE(&m->idempotency_claims, c);
	claim_free(c);
	return r;
}

void manager_idempotency_purge(struct manager *m)
{
	int r = store_idempotency_purge(m->store, expired_before(m));

	if (r > 0) {
		char count[24];

		snprintf(count, sizeof count, "%d", r);
		log_info("purged expired idempotency keys", "count", count, NULL);
	} else if (r < 0)
		log_warn("cannot purge idempotency keys", "error", strerror(-r), NULL);
}

void manager_idempotency_free(struct manager *m)
{
	while (m->idempotency_claims) {
		struct idempotency_claim *c = m->idempotency_claims;

		LIST_REMOVE(&m->idempotency_claims, c);
		claim_free(c);
	}
}
