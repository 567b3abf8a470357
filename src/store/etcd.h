/* SPDX-License-Identifier: MIT */
#pragma once

/* A client of etcd's v3 JSON gateway (etcd 3.4 and later: POST /v3/kv/range, /v3/kv/put,
 * /v3/kv/deleterange, /v3/kv/txn, /v3/lease/grant, /v3/lease/keepalive, /v3/lease/revoke and
 * the streaming /v3/watch), over libcurl: the shared state of a fleet of workers
 * (docs/operations.md, "Many workers"). Keys and values are bytes (base64 on the wire, as the
 * gateway wants); every key a caller names is relative to the client's prefix, which is
 * prepended on the way out and removed on the way in, so that fleets with different prefixes
 * share one etcd without seeing each other.
 *
 * Every call blocks, tries each endpoint in turn until one answers, and is bounded: a connect
 * deadline and a whole-call deadline (ETCD_CONNECT_MS, ETCD_CALL_MS), so a hung etcd is an
 * error (-ETIMEDOUT, e naming the endpoint), never a hang. Calls are safe from several threads
 * at once (each uses its own curl handle). Functions return -errno: -ENOENT for a key that is
 * absent, -ECONNREFUSED / -ETIMEDOUT / -EHOSTUNREACH when no endpoint answered, -ECANCELED
 * when a compare of a transaction failed, -EPROTO for an answer that is not what the gateway
 * sends; e says which endpoint and why. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "basic/error.h"

#define ETCD_CONNECT_MS 2000
#define ETCD_CALL_MS 5000
#define ETCD_ENDPOINTS_MAX 8
/* The largest answer of a call, and of one message of a watch (etcd's own limit on a request,
 * 1.5 MiB by default, is about 2 MiB of base64): -EFBIG beyond. */
#define ETCD_ANSWER_MAX (64 << 20)
#define ETCD_WATCH_MESSAGE_MAX (8 << 20)

struct etcd;

struct etcd_config {
	/* "etcd://HOST:PORT[,HOST:PORT...]" (plain HTTP) or "etcds://..." (HTTPS); the
	 * gateway's paths are added by the client. */
	const char *url;
	const char *prefix;    /* "/station/" when NULL; always ends with '/' once parsed */
	const char *ca_file;   /* HTTPS: the CA bundle that signed etcd's certificate */
	const char *cert_file; /* HTTPS: a client certificate (etcd --client-cert-auth) */
	const char *key_file;  /* and its key */
};

/* Parses and checks cfg (no connection is made): -EINVAL with e naming the part that is
 * wrong (an empty host, a port out of range, more than ETCD_ENDPOINTS_MAX endpoints, a
 * certificate without its key, a file that cannot be read). */
int etcd_new(const struct etcd_config *cfg, struct etcd **ret, struct station_error *e);
void etcd_free(struct etcd *c);
/* "etcd://127.0.0.1:2379 prefix /station/": for logs and errors. */
const char *etcd_describe(const struct etcd *c);

struct etcd_kv {
	char *key; /* relative to the prefix, NUL-terminated */
	char *value;
	size_t value_len; /* value is NUL-terminated too, for JSON values */
	int64_t mod_revision;
	int64_t lease; /* 0: none */
};
void etcd_kv_free_array(struct etcd_kv *v, size_t n);

/* The value of key: -ENOENT when absent. *ret_revision (optional) is the store's revision
 * the answer was read at. */
int etcd_get(struct etcd *c, const char *key, struct etcd_kv *ret, int64_t *ret_revision,
	     struct station_error *e);
/* Every key beginning with key_prefix (relative; "" is the whole prefix), in key order, at
 * one revision (*ret_revision): the snapshot a watch continues from (revision + 1). */
int etcd_range(struct etcd *c, const char *key_prefix, struct etcd_kv **ret, size_t *ret_n,
	       int64_t *ret_revision, struct station_error *e);
/* Puts key = value (lease 0: none). */
int etcd_put(struct etcd *c, const char *key, const void *value, size_t len, int64_t lease,
	     struct station_error *e);
/* Puts key = value only when key is absent (a transaction comparing its create revision to
 * 0): -EEXIST when it is there. */
int etcd_create(struct etcd *c, const char *key, const void *value, size_t len, int64_t lease,
		struct station_error *e);
/* Deletes key (-ENOENT when absent) or, with prefix, every key beginning with it (0 when
 * none). */
int etcd_delete(struct etcd *c, const char *key, bool prefix, struct station_error *e);

/* A lease of ttl_s seconds: its id in *ret_id. */
int etcd_lease_grant(struct etcd *c, int ttl_s, int64_t *ret_id, struct station_error *e);
/* One renewal of lease id (a keepalive request and its answer): -ENOENT when the lease has
 * expired or was revoked (its keys are gone: grant a new one and put them again). */
int etcd_lease_keepalive(struct etcd *c, int64_t id, struct station_error *e);
int etcd_lease_revoke(struct etcd *c, int64_t id, struct station_error *e);

enum etcd_event_type { ETCD_EVENT_PUT, ETCD_EVENT_DELETE };

struct etcd_event {
	enum etcd_event_type type;
	struct etcd_kv kv; /* on delete: the key and mod_revision only */
};

/* Called for each event of a watch, in revision order, on the watching thread. */
typedef void (*etcd_watch_fn)(const struct etcd_event *ev, void *userdata);

/* Watches every key beginning with key_prefix from start_revision on (the revision after a
 * etcd_range()'s), calling fn for each event, until *stop becomes nonzero (checked at least
 * every ETCD_WATCH_TICK_MS: 0 is returned) or the stream ends or fails (-errno; e says why;
 * the caller ranges again and watches from there). -ERANGE when start_revision was compacted
 * away (range again). Blocks: run it on a thread of its own. */
#define ETCD_WATCH_TICK_MS 200
int etcd_watch(struct etcd *c, const char *key_prefix, int64_t start_revision, etcd_watch_fn fn,
	       void *userdata, volatile int *stop, struct station_error *e);
