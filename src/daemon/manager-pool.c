/* SPDX-License-Identifier: MIT */
/* The warm pool (docs/operations.md, "Warm pool"): per --pool entry, a number of started, idle
 * container workspaces made by workspace_make() exactly as a create makes them, with the
 * worker's default limits and no env. A create whose resolved spec matches a pool's takes its
 * oldest ready member: the request's limits are written to the member's cgroup, its spec and
 * createdAt become the request's in one store transaction, and from then on it is a normal
 * workspace. Nothing ran in a member but its agent, so the sandbox cannot tell it from a fresh
 * one. A member is claimed at most once: the claim deletes its pool row, and a deleted
 * workspace is never returned to a pool.
 *
 * The pool is topped up by a timer, one workspace per turn (each made off the loop like any
 * create), and failures back off. Members that no configured pool wants any more (after a
 * restart with fewer or other pools) or whose agent died are torn down by the same timer, one
 * per turn; those whose image is being removed at once, each deleted off the loop. */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "basic/cleanup.h"
#include "basic/log.h"
#include "basic/util.h"
#include "cgroup/cgroup.h"
#include "event/event.h"
#include "manager-internal.h"

#define POOL_GAP_USEC 2000 /* between two refill or teardown steps */
/* The refill after a claim waits this long, and while the claimed workspace has a command
 * running up to POOL_CLAIM_HOLD_USEC: a claimer's first requests come right after its create
 * and would otherwise queue behind the refill's runtime calls on the loop. */
#define POOL_CLAIM_QUIET_USEC 50000
#define POOL_CLAIM_HOLD_USEC 1000000
#define POOL_BACKOFF_MIN_USEC 1000000ull	/* after a failed refill, doubling */
#define POOL_BACKOFF_MAX_USEC (60ull * 1000000) /* up to */

struct pool {
	struct pool_config cfg;
	char *key;		/* the resolved spec without limits and env, canonical JSON */
	char *image;		/* resolved: name@sha256:… or sha256:… */
	char *digest;		/* the image manifest's digest */
	uint64_t claimed;	/* creates it served since the controller started */
	unsigned failures;	/* refills failed in a row */
	uint64_t next_try;	/* CLOCK_MONOTONIC usec; no refill before */
	char *last_error;	/* the last refill's or teardown's failure; NULL: none */
	char last_claim[128];	/* the workspace it served last, */
	uint64_t last_claim_at; /* when (CLOCK_MONOTONIC usec) */
};

/* Members no configured pool wants: torn down on the next turns. */
static struct pool pool_unwanted;

/* --- configuration --- */

static int parse_setting(char *kv, struct pool_config *c, char *err, size_t n)
{
	char *eq = strchr(kv, '=');
	if (!eq || eq == kv || !eq[1]) {
		snprintf(err, n, "\"%s\" is not KEY=VALUE (size, network, seccomp)", kv);
		return -EINVAL;
	}
	*eq = 0;
	const char *v = eq + 1;
	if (strcmp(kv, "size") == 0) {
		uint64_t size = 0;
		if (parse_u64(v, POOL_MAX_SIZE, &size) < 0 || size == 0) {
			snprintf(err, n, "size \"%s\" is not a number from 1 to %d", v,
				 POOL_MAX_SIZE);
			return -EINVAL;
		}
		c->size = (size_t)size;
	} else if (strcmp(kv, "network") == 0) {
		if (strcmp(v, "restricted") == 0) {
			snprintf(err, n,
				 "network \"restricted\" cannot be pooled: its egress policy is "
				 "the request's and is installed at create (use none or bridge)");
			return -EINVAL;
		}
		if (strcmp(v, "none") && strcmp(v, "bridge")) {
			snprintf(err, n, "network \"%s\" is not none or bridge", v);
			return -EINVAL;
		}
		c->network = v;
	} else if (strcmp(kv, "seccomp") == 0) {
		c->seccomp = v;
	} else {
		snprintf(err, n, "unknown setting \"%s\" (size, network, seccomp)", kv);
		return -EINVAL;
	}
	return 0;
}

int pool_config_parse(char *buf, struct pool_config *ret, char *err, size_t n)
{
	struct pool_config c = { .network = "none", .size = 1 };
	char *save = NULL, *tok = strtok_r(buf, ",", &save);
	if (!tok || strchr(tok, '=')) {
		snprintf(err, n,
			 "no image: the value starts with the image (name@sha256:… or "
			 "sha256:…)");
		return -EINVAL;
	}
	c.image = tok;
	unsigned seen = 0;
	while ((tok = strtok_r(NULL, ",", &save))) {
		unsigned bit = strncmp(tok, "size=", 5) == 0	? 1 :
			       strncmp(tok, "network=", 8) == 0 ? 2 :
			       strncmp(tok, "seccomp=", 8) == 0 ? 4 :
								  0;
		if (bit & seen) {
			snprintf(err, n, "\"%.*s\" given twice", (int)strcspn(tok, "="), tok);
			return -EINVAL;
		}
		seen |= bit;
		if (parse_setting(tok, &c, err, n) < 0)
			return -EINVAL;
	}
	*ret = c;
	return 0;
}

/* The spec a create of the pool's members (and of a matching request) starts from. */
static struct workspace_spec pool_spec(const struct pool_config *c)
{
	return (struct workspace_spec){ .adapter = "container",
					.image = c->image,
					.seccomp_profile = c->seccomp,
					.network = c->network };
}

/* What a pool is: the resolved spec less what a claim sets (limits, env, idle timeout), the uid
 * range and what a start records (the /proc view and cpuset, manager-view.c). */
static char *spec_key(json_t *resolved)
{
	json_t *k = json_deep_copy(resolved);
	if (!k)
		return NULL;
	static const char *const per_claim[] = { "env",	      "cpus",	     "memoryMb",
						 "pidsLimit", "idBase",	     "idleTimeoutMs",
						 "procView",  "lxcfsSerial", "cpuset" };
	for (size_t i = 0; i < ELEMENTSOF(per_claim); i++)
		json_object_del(k, per_claim[i]);
	char *s = json_dumps(k, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(k);
	return s;
}

static void pool_clear(struct pool *p)
{
	free(p->key);
	free(p->image);
	free(p->digest);
	free(p->last_error);
}

static int pool_resolve(struct manager *m, struct pool *p, struct station_error *e)
{
	const struct workspace_spec req = pool_spec(&p->cfg);
	const struct workspace_spec spec = workspace_spec_effective(m, &req);
	enum net_mode mode;
	struct net_policy *policy = NULL;
	json_t *resolved = NULL;
	if (!m->cfg.allow_container)
		return station_error_set(e, -EINVAL, NULL,
					 "the container adapter is not enabled on this worker");
	if (adapter_runtime_name(&m->actx) && strcmp(adapter_runtime_name(&m->actx), "runsc") == 0)
		return station_error_set(e, -EINVAL, NULL,
					 "runsc workspaces cannot be pooled: their host limits "
					 "are derived from pidsLimit at create");
	int r = workspace_network_check(m, &spec, &mode, &policy, e);
	net_policy_free(policy);
	if (r >= 0)
		r = workspace_spec_resolve(m, &adapter_container, &spec, &resolved, e);
	if (r < 0)
		return r;
	const char *image = json_string_value(json_object_get(resolved, "image"));
	const char *at = image ? strrchr(image, '@') : NULL;
	p->image = image ? strdup(image) : NULL;
	p->digest = image ? strdup(at ? at + 1 : image) : NULL;
	p->key = spec_key(resolved);
	json_decref(resolved);
	if (!p->image || !p->digest || !p->key)
		return station_error_set(e, -ENOMEM, NULL, "out of memory");
	return 0;
}

static int on_pool_timer(struct event_source *s, uint64_t now, void *userdata);

int manager_pools_setup(struct manager *m, struct station_error *e)
{
	if (m->cfg.n_pools == 0)
		return 0;
	m->pools = calloc(m->cfg.n_pools, sizeof *m->pools);
	if (!m->pools)
		return station_error_set(e, -ENOMEM, NULL, "out of memory");
	for (size_t i = 0; i < m->cfg.n_pools; i++) {
		struct pool *p = &m->pools[m->n_pools++];
		p->cfg = m->cfg.pools[i];
		int r = pool_resolve(m, p, e);
		for (size_t j = 0; r >= 0 && j + 1 < m->n_pools; j++)
			if (strcmp(m->pools[j].key, p->key) == 0)
				r = station_error_set(e, -EINVAL, NULL,
						      "the same pool as an earlier --pool");
		if (r < 0) {
			char why[sizeof e->message];
			snprintf(why, sizeof why, "%s", e->message);
			return station_error_set(e, r, NULL, "--pool \"%s\": %s", p->cfg.image,
						 why);
		}
	}
	return event_add_timer(m->loop, &m->pool_timer, now_usec(), on_pool_timer, m);
}

void manager_pools_free(struct manager *m)
{
	event_source_free(m->pool_timer);
	m->pool_timer = NULL;
	for (size_t i = 0; i < m->n_pools; i++)
		pool_clear(&m->pools[i]);
	free(m->pools);
	m->pools = NULL;
	m->n_pools = 0;
}

/* --- members --- */

static size_t pool_count(struct manager *m, const struct pool *p, bool ready_only)
{
	size_t n = 0;
	for (struct workspace *ws = m->workspaces; ws; ws = ws->next)
		if (ws->pool == p &&
		    (!ready_only || (ws->row.state == WORKSPACE_READY && ws->link_ready)))
			n++;
	return n;
}

static void pool_kick(struct manager *m, uint64_t at)
{
	if (m->pool_timer)
		event_source_set_time(m->pool_timer, at);
}

static void member_release(struct workspace *ws)
{
	ws->pool = &pool_unwanted;
	pool_kick(ws->m, now_usec());
}

bool pool_adopt(struct manager *m, struct workspace *ws, const struct pool_member_row *rows,
		size_t n_rows)
{
	const char *key = NULL;
	for (size_t i = 0; i < n_rows && !key; i++)
		if (strcmp(rows[i].workspace_id, ws->row.id) == 0)
			key = rows[i].pool;
	if (!key)
		return false;
	struct pool *p = &pool_unwanted;
	for (size_t i = 0; i < m->n_pools && p == &pool_unwanted; i++)
		if (strcmp(m->pools[i].key, key) == 0 &&
		    pool_count(m, &m->pools[i], false) < m->pools[i].cfg.size)
			p = &m->pools[i];
	ws->pool = p;
	m->n_pool_members++;
	log_info(p == &pool_unwanted ? "pool member no pool wants, to be torn down" :
				       "pool member adopted",
		 "workspace", ws->row.id, NULL);
	if (p == &pool_unwanted)
		pool_kick(m, now_usec());
	return true;
}

void pool_member_lost(struct workspace *ws)
{
	if (ws->pool != &pool_unwanted)
		log_warn("pool member lost, to be torn down", "workspace", ws->row.id, NULL);
	member_release(ws);
}

void pool_image_remove(struct manager *m, const char *digest)
{
	for (struct workspace *ws = m->workspaces, *next; ws; ws = next) {
		next = ws->next;
		if (!ws->pool)
			continue;
		if (workspace_op_pending(ws)) { /* being made: torn down once it is */
			ws->pool = &pool_unwanted;
			continue;
		}
		const char *image = json_string_value(json_object_get(ws->spec, "image"));
		const char *at = image ? strrchr(image, '@') : NULL;
		if (!image || strcmp(at ? at + 1 : image, digest) != 0)
			continue;
		log_info("pool member torn down: its image is being removed", "workspace",
			 ws->row.id, "image", digest, NULL);
		/* off the loop like any delete (the runtime's delete may hang); listed to no
		 * client meanwhile, and unlinked once done */
		ws->pool = &pool_unwanted;
		workspace_delete_begin(ws);
	}
	for (size_t i = 0; i < m->n_pools; i++) {
		struct pool *p = &m->pools[i];
		if (strcmp(p->digest, digest) != 0)
			continue;
		char msg[256];
		snprintf(msg, sizeof msg, "image %s was removed from the store", p->image);
		free(p->last_error);
		p->last_error = strdup(msg);
		/* its refill fails from now on: the first try after the shortest backoff */
		p->next_try = now_usec() + POOL_BACKOFF_MIN_USEC;
		pool_kick(m, p->next_try);
	}
}

/* --- claim --- */

static struct pool *pool_by_key(struct manager *m, const char *key)
{
	for (size_t i = 0; i < m->n_pools; i++)
		if (strcmp(m->pools[i].key, key) == 0)
			return &m->pools[i];
	return NULL;
}

/* The oldest ready member of p. */
static struct workspace *pool_oldest(struct manager *m, const struct pool *p)
{
	struct workspace *best = NULL;
	for (struct workspace *ws = m->workspaces; ws; ws = ws->next)
		if (ws->pool == p && ws->row.state == WORKSPACE_READY && ws->link_ready &&
		    (!best || ws->row.created_at <= best->row.created_at))
			best = ws;
	return best;
}

/* ws becomes the workspace spec asked for: its limits on the cgroup, then its row. */
static int member_claim(struct workspace *ws, const struct workspace_spec *spec, json_t *resolved)
{
	struct cgroup_limits limits = { .cpus = spec->cpus,
					.memory_bytes = spec->memory_mb * 1024 * 1024,
					.pids = spec->pids_limit };
	int r = ws->cgroup ? cgroup_set_limits(ws->cgroup, &limits) : -EINVAL;
	if (r < 0)
		return r;
	json_object_set(resolved, "idBase", json_object_get(ws->spec, "idBase"));
	/* what the member's container got when it started */
	static const char *const started[] = { "procView", "lxcfsSerial" };
	for (size_t i = 0; i < ELEMENTSOF(started); i++)
		if (json_object_get(ws->spec, started[i]))
			json_object_set(resolved, started[i],
					json_object_get(ws->spec, started[i]));
	char *spec_json = json_dumps(resolved, JSON_COMPACT);
	if (!spec_json)
		return -ENOMEM;
	char *tenant = strdup(spec->tenant ? spec->tenant : "");
	if (!tenant) {
		free(spec_json);
		return -ENOMEM;
	}
	struct workspace_row row = ws->row, named = { 0 };
	row.spec_json = spec_json;
	row.tenant = tenant;
	row.created_at = row.updated_at = realtime_usec();
	r = workspace_name_free_check(ws->m, tenant, spec->name, NULL, NULL);
	if (r >= 0)
		r = workspace_row_set_labels(&named, spec->name, spec->labels);
	row.name = named.name;
	row.labels_json = named.labels_json;
	if (r >= 0)
		r = store_pool_claim(ws->m->store, &row);
	if (r < 0) {
		workspace_row_free(&named);
		free(spec_json);
		free(tenant);
		return r;
	}
	free(ws->row.name);
	ws->row.name = named.name;
	free(ws->row.labels_json);
	ws->row.labels_json = named.labels_json;
	free(ws->row.tenant);
	ws->row.tenant = tenant;
	free(ws->row.spec_json);
	ws->row.spec_json = spec_json;
	ws->row.created_at = ws->row.updated_at = row.created_at;
	json_decref(ws->spec);
	ws->spec = json_incref(resolved);
	workspace_touch(ws); /* its idle time starts now, not when the member started */
	return 0;
}

static bool str_eq(const char *a, const char *b)
{
	return a && b && strcmp(a, b) == 0;
}

/* A pool whose image, profile and network the request names as the pool's --pool did (or as
 * resolved, for the image): only then is the spec resolved (the image store and the profile
 * read, off the loop: manager.c) to compare it exactly. A request that spells them otherwise gets a cold
 * create. */
static bool pool_may_serve(struct manager *m, const struct workspace_spec *spec)
{
	const char *image = spec->image ? spec->image : m->cfg.default_image;
	const char *network = spec->network ? spec->network : "none";
	for (size_t i = 0; i < m->n_pools; i++) {
		const struct pool *p = &m->pools[i];
		if (!str_eq(image, p->cfg.image) && !str_eq(image, p->image) &&
		    !str_eq(image, p->digest))
			continue;
		if (!str_eq(network, p->cfg.network))
			continue;
		if ((spec->seccomp_profile || p->cfg.seccomp) &&
		    !str_eq(spec->seccomp_profile, p->cfg.seccomp))
			continue;
		return true;
	}
	return false;
}

bool pool_claim_wanted(struct manager *m, const struct workspace_spec *spec)
{
	const char *adapter = spec->adapter ? spec->adapter : m->cfg.default_adapter;
	if (m->n_pools == 0 || strcmp(adapter, "container") != 0 || spec->egress ||
	    json_object_size(spec->env) > 0)
		return false; /* the env reaches the agent when it starts: a cold create */
	if (workspace_view_cpu_count(m, spec->cpus) > 0)
		return false; /* so does the cpuset of "cpus" (manager-view.c) */
	/* no disk read for a create no pool can serve; none of an image being removed */
	return pool_may_serve(m, spec) && !manager_image_removing(m, spec->image);
}

int pool_claim_resolved(struct manager *m, const struct workspace_spec *spec, json_t *resolved,
			json_t **ret)
{
	if (manager_image_removing(m, spec->image))
		return 0; /* marked while the spec was resolved: the cold create refuses it */
	_cleanup_free_ char *key = spec_key(resolved);
	struct pool *p = key ? pool_by_key(m, key) : NULL;
	struct workspace *ws = p ? pool_oldest(m, p) : NULL;
	if (!ws)
		return 0;
	int r = member_claim(ws, spec, resolved);
	if (r < 0) {
		log_warn("pool member could not be claimed, torn down; a cold create follows",
			 "workspace", ws->row.id, "error", strerror(-r), NULL);
		member_release(ws);
		return 0;
	}
	ws->pool = NULL;
	workspace_event(ws, MANAGER_EVENT_WORKSPACE, "created", ws->row.id,
			workspace_state_to_string(ws->row.state), NULL);
	m->n_pool_members--;
	p->claimed++;
	snprintf(p->last_claim, sizeof p->last_claim, "%s", ws->row.id);
	p->last_claim_at = now_usec();
	log_info("workspace served from the warm pool", "workspace", ws->row.id, "image", p->image,
		 NULL);
	pool_kick(m, p->last_claim_at + POOL_CLAIM_QUIET_USEC);
	*ret = workspace_to_json(ws);
	return 1;
}

/* --- refill and teardown, one workspace per turn --- */

static bool reap_one(struct manager *m)
{
	for (struct workspace *ws = m->workspaces; ws; ws = ws->next) {
		if (!ws->pool || workspace_op_pending(ws) ||
		    (ws->pool != &pool_unwanted && ws->row.state == WORKSPACE_READY))
			continue;
		/* a delete that failed is tried again after a while, not every turn */
		if (ws->row.state == WORKSPACE_DELETING &&
		    realtime_usec() < ws->row.updated_at + POOL_BACKOFF_MAX_USEC)
			continue;
		log_info("pool member torn down", "workspace", ws->row.id, NULL);
		workspace_delete_begin(ws); /* off the loop; unlinked once done */
		return true;
	}
	return false;
}

static void refill_failed(struct pool *p, uint64_t now, const char *why)
{
	unsigned shift = p->failures < 6 ? p->failures : 6;
	uint64_t delay = POOL_BACKOFF_MIN_USEC << shift;
	p->failures++;
	p->next_try = now + (delay < POOL_BACKOFF_MAX_USEC ? delay : POOL_BACKOFF_MAX_USEC);
	free(p->last_error);
	p->last_error = strdup(why);
	log_warn("pool refill failed", "image", p->cfg.image, "error", why, NULL);
}

static void refill_done(void *userdata, int r, json_t *result, const struct station_error *e)
{
	struct pool *p = userdata;
	if (r < 0) {
		refill_failed(p, now_usec(), e && e->message[0] ? e->message : strerror(-r));
		return;
	}
	p->failures = 0;
	free(p->last_error);
	p->last_error = NULL;
}

/* The member is made off the loop; it counts toward the pool (starting) meanwhile. */
static void refill(struct manager *m, struct pool *p, uint64_t now)
{
	struct station_error e = { 0 };
	const struct workspace_spec req = pool_spec(&p->cfg);
	const struct workspace_spec spec = workspace_spec_effective(m, &req);
	int r = workspace_make(m, &spec, p->key, p, refill_done, p, NULL, &e);
	if (r < 0)
		refill_failed(p, now, e.message[0] ? e.message : strerror(-r));
}

/* When p's refill may run: after the quiet time that follows a claim, and not while the
 * claimed workspace runs its first commands (bounded). */
static uint64_t refill_at(struct manager *m, const struct pool *p, uint64_t now)
{
	uint64_t at = p->next_try;
	if (!p->last_claim_at || now >= p->last_claim_at + POOL_CLAIM_HOLD_USEC)
		return at;
	at = MAX(at, p->last_claim_at + POOL_CLAIM_QUIET_USEC);
	struct workspace *ws = workspace_find(m, p->last_claim);
	if (ws && !ws->pool && ws->n_running > 0)
		at = MAX(at, now + POOL_GAP_USEC);
	return at;
}

static int on_pool_timer(struct event_source *s, uint64_t now, void *userdata)
{
	struct manager *m = userdata;
	uint64_t next = UINT64_MAX;
	bool worked = reap_one(m);
	for (size_t i = 0; i < m->n_pools; i++) {
		struct pool *p = &m->pools[i];
		if (pool_count(m, p, false) >= p->cfg.size)
			continue;
		uint64_t when = refill_at(m, p, now);
		if (worked || when > now) {
			uint64_t at = worked ? now + POOL_GAP_USEC : when;
			next = at < next ? at : next;
			continue;
		}
		refill(m, p, now);
		worked = true;
		next = now_usec() + POOL_GAP_USEC;
	}
	if (worked)
		next = MIN(next, now_usec() + POOL_GAP_USEC);
	event_source_set_time(s, next);
	return 0;
}

json_t *manager_pools_json(struct manager *m)
{
	json_t *a = json_array();
	for (size_t i = 0; i < m->n_pools; i++) {
		struct pool *p = &m->pools[i];
		size_t all = pool_count(m, p, false), ready = pool_count(m, p, true);
		json_array_append_new(
			a, json_pack("{s:s,s:s?,s:s,s:s?,s:I,s:I,s:I,s:I,s:s?}", "image", p->image,
				     "runtime", adapter_runtime_name(&m->actx), "network",
				     p->cfg.network, "seccompProfile", p->cfg.seccomp, "size",
				     (json_int_t)p->cfg.size, "ready", (json_int_t)ready,
				     "starting", (json_int_t)(all - ready), "claimed",
				     (json_int_t)p->claimed, "lastError", p->last_error));
	}
	return a;
}
