/* SPDX-License-Identifier: MIT */
/* A worker of a fleet whose shared state is etcd (--fleet; docs/operations.md, "Many
 * workers"). Keys, under the fleet's prefix:
 *   workers/NAME   {name, url, version, tenant, capacity, updatedAt}, under a lease of
 *                  FLEET_LEASE_TTL_S renewed every FLEET_RENEW_USEC: a worker that stops
 *                  renewing (killed, cut off) leaves the list when its lease expires
 *   tokens/HASH    a token's row (manager-fleet-token.c)
 * Two threads of their own (a pool of two jobs that run until the manager stops): the lease
 * (renewal, the registration's value put again when its capacity changed) and the watch (a
 * range of the whole prefix, then a watch from the revision after it; any failure or a
 * compacted revision ranges again). What they learn is applied on the loop
 * (event_work_call_on_loop()), never touched from the threads.
 *
 * etcd away: the worker goes on with the workers and tokens it saw last, for
 * FLEET_TOKENS_TRUST_USEC after etcd last answered (kept in <root>/fleet.synced, so a restart
 * does not start the clock again); past that, only the admin token works. Minting and revoking
 * answer 503 meanwhile, so no revocation is ever lost: it waits for etcd.
 *
 * Joining: a worker that never synced with the fleet (no fleet.synced) holds only tokens it
 * minted before it joined. At its first sync those etcd does not hold are written there
 * (fleet_join()), so that they go on working, on every worker; fleet.synced is written once
 * they are, and from then on a token absent from etcd is a revoked one. */

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "basic/cleanup.h"
#include "basic/log.h"
#include "basic/util.h"
#include "basic/workers.h"
#include "event/event.h"
#include "event/work.h"
#include "fleet-token-json.h"
#include "manager-internal.h"
#include "store/etcd.h"

#define FLEET_LEASE_TTL_S 10
#define FLEET_RENEW_USEC (3ull * 1000000)
#define FLEET_RETRY_USEC (1ull * 1000000)
#define FLEET_TOKENS_TRUST_USEC (24ull * 3600 * 1000000)
#define FLEET_SYNCED_WRITE_USEC (60ull * 1000000)
#define FLEET_TICK_NSEC (100 * 1000000L)
/* The calls of mints and revocations: threads, and how many may wait or run at once (a hung
 * etcd holds each for ETCD_CALL_MS) */
#define FLEET_CALL_THREADS 2
#define FLEET_CALLS_MAX 64
#define WORKER_KEY_PREFIX "workers/"
#define TOKEN_KEY_PREFIX "tokens/"

struct manager_fleet {
	struct manager *m;
	struct etcd *etcd;
	struct event_work_pool *pool;  /* the lease and the watch */
	struct event_work_pool *calls; /* mints and revocations (manager-fleet-token.c) */
	struct event_source *timer;    /* the registration's value, made again */
	volatile int stop;
	/* the registration's value: made on the loop, put by the lease thread */
	pthread_mutex_t lock;
	char *value;
	uint64_t value_gen;
	json_t *capacity; /* loop: the capacity of the last value */
	int64_t lease;	  /* the lease thread's, once started */
	int64_t start_revision;
	uint64_t start_range_usec;
	/* loop: name -> registration, as last seen */
	json_t *workers;
	/* atomics: when etcd last answered (realtime), whether the watch is up, whether this
	 * worker ever synced with the fleet (fleet.synced) */
	uint64_t contact_usec;
	int watching;
	int synced;
	char key[sizeof WORKER_KEY_PREFIX + 64];
	char synced_path[PATH_MAX];
};

/* ---- either side ------------------------------------------------------------------------- */

static void fleet_contact(struct manager_fleet *f)
{
	__atomic_store_n(&f->contact_usec, realtime_usec(), __ATOMIC_RELAXED);
}

bool manager_fleet_watching(struct manager *m)
{
	return m->fleet && __atomic_load_n(&m->fleet->watching, __ATOMIC_RELAXED);
}

bool manager_fleet_tokens_trusted(struct manager *m)
{
	uint64_t at;

	if (!m->fleet)
		return true;
	at = __atomic_load_n(&m->fleet->contact_usec, __ATOMIC_RELAXED);
	return at && realtime_usec() - at < FLEET_TOKENS_TRUST_USEC;
}

const char *manager_fleet_describe(struct manager *m)
{
	return m->fleet ? etcd_describe(m->fleet->etcd) : "";
}

const json_t *manager_fleet_workers(struct manager *m)
{
	return m->fleet ? m->fleet->workers : NULL;
}

static void fleet_sleep(struct manager_fleet *f, uint64_t usec)
{
	struct timespec tick = { .tv_nsec = FLEET_TICK_NSEC };

	for (uint64_t slept = 0; slept < usec && !__atomic_load_n(&f->stop, __ATOMIC_RELAXED);
	     slept += FLEET_TICK_NSEC / 1000)
		nanosleep(&tick, NULL);
}

static char *value_copy(struct manager_fleet *f, uint64_t *ret_gen)
{
	char *v;

	pthread_mutex_lock(&f->lock);
	v = f->value ? strdup(f->value) : NULL;
	*ret_gen = f->value_gen;
	pthread_mutex_unlock(&f->lock);
	return v;
}

/* The registration under a new lease: created, or put again when the key holds this worker's
 * own URL (a restart before the old lease expired); -EEXIST with e naming the other worker. */
static int fleet_register(struct manager_fleet *f, int64_t *ret_lease, uint64_t *ret_gen,
			  struct station_error *e)
{
	_cleanup_free_ char *value = value_copy(f, ret_gen);
	struct etcd_kv kv = {};
	int64_t lease = 0;
	json_t *doc, *url;
	int r;

	if (!value)
		return station_error_set(e, -ENOMEM, NULL, "out of memory");
	r = etcd_lease_grant(f->etcd, FLEET_LEASE_TTL_S, &lease, e);
	if (r < 0)
		return r;
	r = etcd_create(f->etcd, f->key, value, strlen(value), lease, e);
	if (r == -EEXIST)
		r = etcd_get(f->etcd, f->key, &kv, NULL, e);
	else if (r >= 0)
		goto out;
	if (r >= 0) {
		doc = json_loadb(kv.value ?: "", kv.value_len, 0, NULL);
		url = json_object_get(doc, "url");
		if (json_is_string(url) &&
		    strcmp(json_string_value(url), f->m->cfg.advertise_url) == 0)
			r = etcd_put(f->etcd, f->key, value, strlen(value), lease, e);
		else
			r = station_error_set(e, -EEXIST, NULL,
					      "worker \"%s\" is registered in the fleet (%s) by "
					      "another worker at %.256s: give this one another "
					      "--worker name, or stop that one",
					      f->m->cfg.worker, etcd_describe(f->etcd),
					      json_is_string(url) ? json_string_value(url) :
								    "(no URL)");
		json_decref(doc);
		free(kv.key);
		free(kv.value);
	}
out:
	if (r < 0) {
		(void)etcd_lease_revoke(f->etcd, lease, NULL);
		return r;
	}
	*ret_lease = lease;
	fleet_contact(f);
	return 0;
}

/* ---- the loop: what the threads learned ---------------------------------------------------- */

static void apply_worker(struct manager_fleet *f, const struct etcd_kv *kv, bool put)
{
	const char *name = kv->key + strlen(WORKER_KEY_PREFIX);
	json_t *doc;

	if (!put) {
		json_object_del(f->workers, name);
		return;
	}
	/* Every member of the fleet can write here: a name or URL no worker list would take,
	 * or more workers than a list may hold, is not taken either. */
	if (!worker_name_valid(name) ||
	    (!json_object_get(f->workers, name) && json_object_size(f->workers) >= WORKERS_MAX)) {
		log_warn("a worker's registration in the fleet is not taken (a bad name, or more "
			 "workers than a fleet may have)",
			 "key", kv->key, NULL);
		return;
	}
	doc = json_loadb(kv->value ?: "", kv->value_len, 0, NULL);
	if (!json_is_object(doc) || !json_is_string(json_object_get(doc, "url")) ||
	    !worker_url_valid(json_string_value(json_object_get(doc, "url"))) ||
	    !json_is_string(json_object_get(doc, "name")) ||
	    strcmp(json_string_value(json_object_get(doc, "name")), name) != 0) {
		log_warn("a worker's registration in the fleet is not one: ignored", "key", kv->key,
			 NULL);
		json_decref(doc);
		return;
	}
	json_object_set_new(f->workers, name, doc);
}

static void apply_token(struct manager_fleet *f, const struct etcd_kv *kv, bool put)
{
	const char *hash = kv->key + strlen(TOKEN_KEY_PREFIX);
	struct token_row row = {};
	int r;

	if (!put) {
		manager_token_fleet_gone(f->m, hash);
		return;
	}
	r = fleet_token_decode(kv->value ?: "", kv->value_len, &row);
	if (r >= 0 && strcmp(row.hash, hash) != 0)
		r = -EPROTO;
	if (r >= 0)
		r = manager_token_fleet_put(f->m, &row);
	if (r < 0)
		log_warn("a token in the fleet cannot be used here", "key", kv->key, "error",
			 strerror(-r), NULL);
	token_row_free(&row);
}

static void apply_kv(struct manager_fleet *f, const struct etcd_kv *kv, bool put)
{
	if (strncmp(kv->key, WORKER_KEY_PREFIX, strlen(WORKER_KEY_PREFIX)) == 0)
		apply_worker(f, kv, put);
	else if (strncmp(kv->key, TOKEN_KEY_PREFIX, strlen(TOKEN_KEY_PREFIX)) == 0)
		apply_token(f, kv, put);
}

struct fleet_snapshot {
	struct manager_fleet *f;
	struct etcd_kv *kvs;
	size_t n;
	uint64_t range_usec; /* when the range was asked for */
};

/* The whole prefix again: tokens not in it are revoked here (those minted here after the range
 * began are left to the watch), workers not in it are gone. */
static void apply_snapshot(void *userdata)
{
	struct fleet_snapshot *s = userdata;
	struct manager_fleet *f = s->f;

	manager_token_fleet_mark(f->m);
	json_object_clear(f->workers);
	for (size_t i = 0; i < s->n; i++)
		apply_kv(f, &s->kvs[i], true);
	manager_token_fleet_sweep(f->m, s->range_usec);
}

struct fleet_event {
	struct manager_fleet *f;
	const struct etcd_event *ev;
};

static void apply_event(void *userdata)
{
	struct fleet_event *fe = userdata;

	apply_kv(fe->f, &fe->ev->kv, fe->ev->type == ETCD_EVENT_PUT);
}

/* ---- the watch thread ---------------------------------------------------------------------- */

static void on_watch_event(const struct etcd_event *ev, void *userdata)
{
	struct manager_fleet *f = userdata;
	struct fleet_event fe = { .f = f, .ev = ev };

	fleet_contact(f);
	event_work_call_on_loop(f->pool, apply_event, &fe);
}

static void synced_store(struct manager_fleet *f, uint64_t at, uint64_t *written);

struct fleet_own {
	struct manager_fleet *f;
	const struct fleet_snapshot *s;
	struct etcd_kv *kvs;
	size_t n;
	int r;
};

static void own_collect(void *userdata)
{
	struct fleet_own *o = userdata;

	o->r = fleet_token_own(o->f->m, o->s->kvs, o->s->n, &o->kvs, &o->n);
}

/* The first sync of a worker that never synced: its tokens that etcd does not hold written
 * there, then fleet.synced. 1 when some were (range again), 0 when none, or -errno (tried again
 * at the next range: nothing of the fleet is applied meanwhile). */
static int fleet_join(struct manager_fleet *f, bool on_loop, const struct fleet_snapshot *s,
		      struct station_error *e)
{
	struct fleet_own o = { .f = f, .s = s };
	uint64_t written = 0;
	char count[24];
	int r = 0;

	if (on_loop)
		own_collect(&o);
	else
		event_work_call_on_loop(f->pool, own_collect, &o);
	if (o.r < 0)
		return station_error_set(e, o.r, NULL, "cannot list this worker's tokens: %s",
					 strerror(-o.r));
	for (size_t i = 0; i < o.n && r >= 0; i++) {
		r = etcd_create(f->etcd, o.kvs[i].key, o.kvs[i].value, o.kvs[i].value_len, 0, e);
		if (r == -EEXIST)
			r = 0;
	}
	if (r >= 0) {
		synced_store(f, realtime_usec(), &written);
		if (!written)
			r = station_error_set(e, -EIO, NULL, "cannot write %s", f->synced_path);
	}
	if (r >= 0 && o.n) {
		snprintf(count, sizeof count, "%zu", o.n);
		log_info("tokens minted before this worker joined the fleet are the fleet's now",
			 "tokens", count, "store", etcd_describe(f->etcd), NULL);
	}
	etcd_kv_free_array(o.kvs, o.n);
	if (r < 0)
		return r;
	__atomic_store_n(&f->synced, 1, __ATOMIC_RELAXED);
	return o.n > 0;
}

/* A range of the whole prefix applied on the loop: its revision, or -errno. */
static int fleet_range(struct manager_fleet *f, bool on_loop, int64_t *ret_revision,
		       struct station_error *e)
{
	struct fleet_snapshot s = { .f = f, .range_usec = realtime_usec() };
	int r = etcd_range(f->etcd, "", &s.kvs, &s.n, ret_revision, e);

	if (r >= 0 && !__atomic_load_n(&f->synced, __ATOMIC_RELAXED)) {
		r = fleet_join(f, on_loop, &s, e);
		if (r > 0) { /* the written tokens are in the range this time */
			etcd_kv_free_array(s.kvs, s.n);
			s = (struct fleet_snapshot){ .f = f, .range_usec = realtime_usec() };
			r = etcd_range(f->etcd, "", &s.kvs, &s.n, ret_revision, e);
		}
	}
	if (r < 0) {
		etcd_kv_free_array(s.kvs, s.n);
		return r;
	}
	fleet_contact(f);
	if (on_loop)
		apply_snapshot(&s);
	else
		event_work_call_on_loop(f->pool, apply_snapshot, &s);
	etcd_kv_free_array(s.kvs, s.n);
	return 0;
}

static void watch_run(void *userdata)
{
	struct manager_fleet *f = userdata;
	int64_t revision = f->start_revision;
	bool said = false;

	while (!__atomic_load_n(&f->stop, __ATOMIC_RELAXED)) {
		struct station_error e = {};
		int r = 0;

		if (!revision)
			r = fleet_range(f, false, &revision, &e);
		if (r >= 0) {
			if (said)
				log_info("the fleet's store answers again: caught up", "store",
					 etcd_describe(f->etcd), NULL);
			said = false;
			__atomic_store_n(&f->watching, 1, __ATOMIC_RELAXED);
			r = etcd_watch(f->etcd, "", revision + 1, on_watch_event, f, &f->stop, &e);
			if (r == 0)
				break;
		}
		__atomic_store_n(&f->watching, 0, __ATOMIC_RELAXED);
		revision = 0;
		if (!said)
			log_warn(
				"the fleet's store does not answer: serving the tokens and workers "
				"last seen",
				"store", etcd_describe(f->etcd), "error",
				e.message[0] ? e.message : strerror(-r), NULL);
		said = true;
		if (r != -ERANGE)
			fleet_sleep(f, FLEET_RETRY_USEC);
	}
}

/* ---- the lease thread ---------------------------------------------------------------------- */

static void synced_store(struct manager_fleet *f, uint64_t at, uint64_t *written)
{
	char buf[32];

	snprintf(buf, sizeof buf, "%llu\n", (unsigned long long)at);
	if (write_file_atomic(f->synced_path, buf, strlen(buf), 0600) >= 0)
		*written = at;
}

/* Not before the first sync: the file says this worker synced once. */
static void synced_write(struct manager_fleet *f, uint64_t *written)
{
	uint64_t at = __atomic_load_n(&f->contact_usec, __ATOMIC_RELAXED);

	if (at - *written >= FLEET_SYNCED_WRITE_USEC &&
	    __atomic_load_n(&f->synced, __ATOMIC_RELAXED))
		synced_store(f, at, written);
}

static void lease_renew(struct manager_fleet *f, uint64_t *put_gen, bool *said)
{
	struct station_error e = {};
	_cleanup_free_ char *value = NULL;
	uint64_t gen;
	int r = 0;

	if (f->lease) {
		r = etcd_lease_keepalive(f->etcd, f->lease, &e);
		if (r == -ENOENT) {
			log_warn("the fleet lease expired: registering again", "store",
				 etcd_describe(f->etcd), NULL);
			f->lease = 0;
		}
	}
	if (!f->lease)
		r = fleet_register(f, &f->lease, put_gen, &e);
	if (r < 0) {
		if (!*said)
			log_warn("cannot renew this worker's registration in the fleet", "store",
				 etcd_describe(f->etcd), "error", e.message, NULL);
		*said = true;
		return;
	}
	*said = false;
	fleet_contact(f);
	value = value_copy(f, &gen);
	if (gen != *put_gen && value &&
	    etcd_put(f->etcd, f->key, value, strlen(value), f->lease, &e) >= 0)
		*put_gen = gen;
}

static void lease_run(void *userdata)
{
	struct manager_fleet *f = userdata;
	uint64_t put_gen = f->value_gen, written = 0;
	bool said = false;

	while (!__atomic_load_n(&f->stop, __ATOMIC_RELAXED)) {
		fleet_sleep(f, FLEET_RENEW_USEC);
		if (__atomic_load_n(&f->stop, __ATOMIC_RELAXED))
			break;
		lease_renew(f, &put_gen, &said);
		synced_write(f, &written);
	}
	/* A clean stop: the registration goes now, not when the lease runs out. */
	if (f->lease)
		(void)etcd_lease_revoke(f->etcd, f->lease, NULL);
}

/* ---- the loop: the registration's value ---------------------------------------------------- */

static int value_refresh(struct manager_fleet *f)
{
	struct manager *m = f->m;
	json_t *worker = manager_worker(m), *capacity, *doc;
	char at[32];
	char *s;

	if (!worker)
		return -ENOMEM;
	capacity = json_object_get(worker, "capacity");
	if (f->value && json_equal(capacity, f->capacity)) {
		json_decref(worker);
		return 0;
	}
	format_rfc3339(realtime_usec(), at);
	doc = json_pack("{s:s,s:s,s:O*,s:O*,s:O*,s:s}", "name", m->cfg.worker, "url",
			m->cfg.advertise_url, "version", json_object_get(worker, "version"),
			"tenant", json_object_get(worker, "tenant"), "capacity", capacity,
			"updatedAt", at);
	s = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
	json_decref(doc);
	if (!s) {
		json_decref(worker);
		return -ENOMEM;
	}
	json_decref(f->capacity);
	f->capacity = json_incref(capacity);
	json_decref(worker);
	pthread_mutex_lock(&f->lock);
	free(f->value);
	f->value = s;
	f->value_gen++;
	pthread_mutex_unlock(&f->lock);
	return 0;
}

static int on_value_timer(struct event_source *s, uint64_t now, void *userdata)
{
	struct manager_fleet *f = userdata;

	(void)value_refresh(f);
	return event_source_set_time(s, now + FLEET_RENEW_USEC);
}

/* ---- the calls of mints and revocations ----------------------------------------------------- */

int manager_fleet_queue(struct manager *m, void (*fn)(void *userdata),
			void (*done)(void *userdata, bool cancelled), void *userdata)
{
	struct manager_fleet *f = m->fleet;

	if (!f)
		return -ENOTCONN;
	if (event_work_pending(f->calls) + event_work_running(f->calls) >= FLEET_CALLS_MAX)
		return -EBUSY;
	return event_work_queue(f->calls, fn, done, userdata);
}

/* ---- start and stop ------------------------------------------------------------------------ */

/* The jobs hold nothing to free: the fleet outlives its pool. */
static void job_done(void *userdata, bool cancelled)
{
}

static void synced_read(struct manager_fleet *f)
{
	_cleanup_free_ char *buf = NULL;
	uint64_t at = 0;
	size_t n = 0;
	int r = read_file(f->synced_path, 64, &buf, &n);

	f->synced = r != -ENOENT; /* a file that cannot be read: synced (absent means revoked) */
	if (r < 0)
		return;
	buf[strcspn(buf, "\n")] = '\0';
	if (parse_u64(buf, UINT64_MAX, &at) >= 0)
		f->contact_usec = at;
}

static int fleet_new(struct manager *m, struct manager_fleet **ret)
{
	struct manager_fleet *f = calloc(1, sizeof *f);
	int r;

	if (!f)
		return -ENOMEM;
	f->m = m;
	f->etcd = m->cfg.fleet;
	pthread_mutex_init(&f->lock, NULL);
	snprintf(f->key, sizeof f->key, WORKER_KEY_PREFIX "%s", m->cfg.worker);
	snprintf(f->synced_path, sizeof f->synced_path, "%s/fleet.synced", m->cfg.root);
	f->workers = json_object();
	r = f->workers ? event_work_pool_new(m->loop, 2, &f->pool) : -ENOMEM;
	if (r >= 0)
		r = event_work_pool_new(m->loop, FLEET_CALL_THREADS, &f->calls);
	if (r >= 0)
		r = value_refresh(f);
	if (r >= 0)
		r = event_add_timer(m->loop, &f->timer, now_usec() + FLEET_RENEW_USEC,
				    on_value_timer, f);
	m->fleet = f;
	synced_read(f);
	return r;
}

int manager_fleet_start(struct manager *m, struct station_error *e)
{
	struct station_error why = {};
	struct manager_fleet *f;
	int r;

	if (!m->cfg.fleet)
		return 0;
	if (!m->cfg.advertise_url)
		return station_error_set(e, -EINVAL, NULL, "a fleet needs this worker's URL");
	r = fleet_new(m, &f);
	if (r < 0)
		return station_error_set(e, r, NULL, "cannot start the fleet: %s", strerror(-r));
	f = m->fleet;
	r = fleet_register(f, &f->lease, &(uint64_t){ 0 }, &why);
	if (r == -EEXIST)
		return station_error_set(e, r, NULL, "%s", why.message);
	if (r < 0)
		log_warn("the fleet's store does not answer: starting with the tokens and workers "
			 "last seen, registering once it does",
			 "store", etcd_describe(f->etcd), "error", why.message, NULL);
	else
		log_info("registered in the fleet", "store", etcd_describe(f->etcd), "url",
			 m->cfg.advertise_url, NULL);
	if (r >= 0 && fleet_range(f, true, &f->start_revision, &why) >= 0)
		__atomic_store_n(&f->watching, 1, __ATOMIC_RELAXED);
	if (event_work_queue(f->pool, watch_run, job_done, f) < 0 ||
	    event_work_queue(f->pool, lease_run, job_done, f) < 0)
		return station_error_set(e, -ENOMEM, NULL, "cannot start the fleet's threads");
	return 0;
}

void manager_fleet_stop(struct manager *m)
{
	struct manager_fleet *f = m->fleet;

	if (!f)
		return;
	__atomic_store_n(&f->stop, 1, __ATOMIC_RELAXED);
	/* The HTTP servers are gone: a revocation learned from here on closes no stream. */
	manager_token_on_revoke(m, NULL, NULL);
	event_work_pool_free(f->calls); /* the table still there for the calls' done */
	event_work_pool_free(f->pool);
	event_source_free(f->timer);
	json_decref(f->workers);
	json_decref(f->capacity);
	free(f->value);
	pthread_mutex_destroy(&f->lock);
	free(f);
	m->fleet = NULL;
}
