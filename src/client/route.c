/* SPDX-License-Identifier: MIT */
/* A client over several workers (docs/operations.md, "Many workers"): one handle per worker,
 * each with its own kept connection and token. A call about a workspace goes to the worker its
 * id names; a list asks every worker at once (a thread per worker, each on its own handle) and
 * says which did not answer; a create goes to the worker named, or to the one with the most
 * free capacity. */

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "basic/placement.h"
#include "basic/util.h"
#include "basic/workers.h"
#include "basic/json-util.h"
#include "client-internal.h"

/* What a workspace name is made of (domain/labels.h has the whole rule; the worker checks it). */
#define NAME_CHARS "abcdefghijklmnopqrstuvwxyz0123456789._-"

/* STATION_WORKERS=discover:URL: the list is the one that worker knows (docs/operations.md). */
#define DISCOVER_PREFIX "discover:"

static struct station_client *worker_find(struct station_client *c, const char *name)
{
	for (size_t i = 0; i < c->n_workers; i++)
		if (strcmp(c->workers[i]->worker_name, name) == 0)
			return c->workers[i];
	return NULL;
}

static int route_name(struct station_client **cp, const char *ws);

int client_route(struct station_client **cp, const char *ws)
{
	struct station_client *c = *cp, *w;
	char name[WORKER_NAME_MAX + 1];

	if (!c->workers)
		return 0;
	if (ws && !workspace_id_shaped(ws) && ws[0] && strspn(ws, NAME_CHARS) == strlen(ws))
		return route_name(cp, ws);
	if (!ws || worker_of_id(ws, name) < 0)
		return client_error(c, -EINVAL, "invalid workspace id '%.128s': it names no worker",
				    ws ? ws : "");
	w = worker_find(c, name);
	if (!w)
		return client_error(c, -ENOENT,
				    "workspace %.128s is on worker %s, which is not in the worker "
				    "list (STATION_WORKERS)",
				    ws, name);
	c->current = w;
	*cp = w;
	return 0;
}

int client_unreachable(struct station_client *c, int err, const char *why)
{
	if (c->worker_name)
		return client_error(c, err, "worker %s (%s) did not answer: %s", c->worker_name,
				    c->endpoint, why);
	return client_error(c, err, "no controller at %s: %s", c->endpoint, why);
}

/* ---- the handle ------------------------------------------------------------------------ */

static void refs_donep(struct worker_refs *l)
{
	worker_refs_done(l);
}

/* The list a worker knows (its GET /v1/workers): each entry's name and URL, the worker asked
 * at url when it lists itself without one. */
static int discover_spec(const char *url, json_t *doc, char **ret, struct station_error *e)
{
	json_t *list = json_object_get(doc, "workers"), *entry;
	_cleanup_free_ char *spec = NULL;
	size_t i;

	if (!json_is_array(list))
		return station_error_set(
			e, -EPROTO, NULL,
			"discover: %s answered GET /v1/workers without \"workers\"", url);
	json_array_foreach(list, i, entry) {
		const char *name = json_string_value(json_object_get(entry, "name"));
		const char *at = json_string_value(json_object_get(entry, "url"));
		char *next;

		if (!at && json_is_true(json_object_get(entry, "self")))
			at = url;
		if (!name || !at || strchr(name, ',') || strchr(at, ','))
			return station_error_set(e, -EPROTO, NULL,
						 "discover: %s listed worker %zu without a usable "
						 "name and URL",
						 url, i + 1);
		if (asprintf(&next, "%s%s%s=%s", spec ? spec : "", spec ? "," : "", name, at) < 0)
			return station_error_set(e, -ENOMEM, NULL, "out of memory");
		free(spec);
		spec = next;
	}
	*ret = TAKE_PTR(spec);
	return 0;
}

/* STATION_WORKERS=discover:URL: the workers that worker lists, each checked as any list entry
 * is (workers_parse_env()). */
static int discover_refs(const char *url, const char *token, struct worker_refs *ret,
			 struct station_error *e)
{
	struct station_client *h = NULL;
	_cleanup_json_ json_t *doc = NULL;
	_cleanup_free_ char *spec = NULL;
	int r;

	if (!worker_url_valid(url))
		return station_error_set(e, -EINVAL, NULL,
					 "STATION_WORKERS: discover:%.256s is not discover:URL",
					 url);
	r = station_client_new(url, token, &h);
	if (r < 0)
		return station_error_set(e, r, NULL, "discover: cannot use %.256s", url);
	r = station_request_json(h, "GET", "/v1/workers", NULL, &doc);
	if (r < 0)
		station_error_set(e, r, NULL, "discover: GET /v1/workers of %.256s: %s", url,
				  station_client_last_error(h));
	station_client_free(h);
	if (r < 0)
		return r;
	r = discover_spec(url, doc, &spec, e);
	if (r < 0)
		return r;
	r = workers_parse_env(spec ? spec : "", ret, e);
	if (r < 0) {
		char why[sizeof e->message];

		snprintf(why, sizeof why, "%s", e->message);
		return station_error_set(e, r, NULL, "discover: %.256s listed: %s", url, why);
	}
	return 0;
}

static int load_refs(const char *workers, const char *workers_file, const char *token,
		     struct worker_refs *ret, struct station_error *e)
{
	const char *env = getenv("STATION_WORKERS");
	int r;

	if (!workers && !workers_file && env && strncmp(env, DISCOVER_PREFIX, 9) == 0)
		workers = env;
	if (workers && strncmp(workers, DISCOVER_PREFIX, 9) == 0)
		r = discover_refs(workers + 9, token, ret, e);
	else if (workers)
		r = workers_parse_env(workers, ret, e);
	else if (workers_file)
		r = workers_read_file(workers_file, ret, e);
	else {
		r = workers_from_env(ret, e);
		if (r == 0)
			return station_error_set(
				e, -ENOENT, NULL,
				"no worker list: set STATION_WORKERS or "
				"STATION_WORKERS_FILE, or write ~/" WORKERS_DEFAULT_FILE);
	}
	if (r >= 0 && ret->n == 0) {
		worker_refs_done(ret);
		return station_error_set(e, -EINVAL, NULL, "the worker list names no worker");
	}
	return r < 0 ? r : 0;
}

static int worker_handle(const struct worker_ref *ref, const char *token,
			 struct station_client **ret, struct station_error *e)
{
	char *own = NULL;
	struct station_client *w = NULL;
	int r;

	if (ref->token_file) {
		r = worker_token_read(ref->token_file, &own, e);
		if (r < 0)
			return station_error_set(e, r, NULL, "worker %s: %s", ref->name,
						 e->message);
	}
	r = station_client_new(ref->url, own ? own : token, &w);
	erase_and_free(own);
	if (r < 0)
		return station_error_set(e, r, NULL, "worker %s: cannot use %s", ref->name,
					 ref->url);
	w->worker_name = strdup(ref->name);
	if (!w->worker_name) {
		station_client_free(w);
		return station_error_set(e, -ENOMEM, NULL, "out of memory");
	}
	*ret = w;
	return 0;
}

static int set_error(char **ret_error, const struct station_error *e)
{
	if (ret_error)
		*ret_error = strdup(e->message);
	return e->err;
}

int station_client_new_workers(const char *workers, const char *workers_file, const char *token,
			       struct station_client **ret, char **ret_error)
{
	_cleanup_(refs_donep) struct worker_refs refs = {};
	struct station_error e = {};
	struct station_client *c;
	size_t len = sizeof "workers:", off;
	int r;

	if (!ret || (token && strpbrk(token, "\r\n"))) {
		station_error_set(&e, -EINVAL, NULL, "invalid arguments");
		return set_error(ret_error, &e);
	}
	r = load_refs(workers, workers_file, token, &refs, &e);
	if (r < 0)
		return set_error(ret_error, &e);
	c = calloc(1, sizeof *c);
	if (!c || !(c->workers = calloc(refs.n, sizeof *c->workers))) {
		free(c);
		station_error_set(&e, -ENOMEM, NULL, "out of memory");
		return set_error(ret_error, &e);
	}
	c->fd = -1;
	for (size_t i = 0; i < refs.n; i++) {
		r = worker_handle(&refs.v[i], token, &c->workers[i], &e);
		if (r < 0) {
			station_client_free(c);
			return set_error(ret_error, &e);
		}
		c->n_workers++;
		len += strlen(refs.v[i].name) + 1;
	}
	c->endpoint = calloc(1, len);
	c->base_url = strdup("");
	if (!c->endpoint || !c->base_url) {
		station_client_free(c);
		station_error_set(&e, -ENOMEM, NULL, "out of memory");
		return set_error(ret_error, &e);
	}
	off = (size_t)snprintf(c->endpoint, len, "workers:");
	for (size_t i = 0; i < c->n_workers && off < len; i++)
		off += (size_t)snprintf(c->endpoint + off, len - off, "%s%s", i ? "," : "",
					c->workers[i]->worker_name);
	*ret = c;
	return 0;
}

size_t station_client_n_workers(const struct station_client *c)
{
	return c->n_workers;
}

struct station_client *station_client_worker_at(struct station_client *c, size_t i)
{
	return i < c->n_workers ? c->workers[i] : NULL;
}

struct station_client *station_client_worker(struct station_client *c, const char *name)
{
	return name ? worker_find(c, name) : NULL;
}

const char *station_client_worker_name(const struct station_client *c)
{
	return c->worker_name;
}

/* ---- asking every worker at once ------------------------------------------------------- */

struct probe {
	struct station_client *w;
	const char *path;
	int (*parent_check)(void *userdata);
	void *parent_userdata;
	struct timespec deadline;
	bool timed_out;
	json_t *doc; /* the answer, or NULL */
	int r;
};

static int probe_interrupt(void *userdata)
{
	struct probe *p = userdata;
	struct timespec now;

	if (p->parent_check && p->parent_check(p->parent_userdata))
		return 1;
	clock_gettime(CLOCK_MONOTONIC, &now);
	if (now.tv_sec > p->deadline.tv_sec ||
	    (now.tv_sec == p->deadline.tv_sec && now.tv_nsec >= p->deadline.tv_nsec))
		p->timed_out = true;
	return p->timed_out;
}

static void *probe_run(void *userdata)
{
	struct probe *p = userdata;
	int (*check)(void *) = p->w->interrupt;
	void *check_userdata = p->w->interrupt_userdata;

	p->w->interrupt = probe_interrupt;
	p->w->interrupt_userdata = p;
	p->r = station_request_json(p->w, "GET", p->path, NULL, &p->doc);
	if (p->r == -EINTR && p->timed_out)
		p->r = client_unreachable(p->w, -ETIMEDOUT, "no answer within 10 s");
	p->w->interrupt = check;
	p->w->interrupt_userdata = check_userdata;
	return NULL;
}

/* GET path on every worker at once; probes[i] is worker i's outcome (doc or r with the error on
 * its handle). */
static int probe_all(struct station_client *c, const char *path, struct probe **ret)
{
	_cleanup_free_ struct probe *p = calloc(c->n_workers, sizeof *p);
	_cleanup_free_ pthread_t *t = calloc(c->n_workers, sizeof *t);
	_cleanup_free_ bool *started = calloc(c->n_workers, sizeof *started);
	struct timespec now;

	if (!p || !t || !started)
		return client_error(c, -ENOMEM, "out of memory");
	clock_gettime(CLOCK_MONOTONIC, &now);
	for (size_t i = 0; i < c->n_workers; i++) {
		p[i] = (struct probe){
			.w = c->workers[i],
			.path = path,
			.parent_check = c->workers[i]->interrupt,
			.parent_userdata = c->workers[i]->interrupt_userdata,
			.deadline = { now.tv_sec + CLIENT_WORKER_TIMEOUT_MS / 1000, now.tv_nsec },
		};
		/* Without a thread, the worker is asked in this one. */
		started[i] = pthread_create(&t[i], NULL, probe_run, &p[i]) == 0;
	}
	for (size_t i = 0; i < c->n_workers; i++) {
		if (started[i])
			pthread_join(t[i], NULL);
		else
			probe_run(&p[i]);
	}
	*ret = TAKE_PTR(p);
	return 0;
}

static void probes_free(struct probe *p, size_t n)
{
	for (size_t i = 0; p && i < n; i++)
		json_decref(p[i].doc);
	free(p);
}

/* A worker's error as a JSON string: a message cut inside a UTF-8 sequence (or quoting bytes
 * a server chose) must still mark the worker, not drop it. */
static json_t *error_json(const char *message)
{
	json_t *s = json_string(message);

	return s ? s : json_string("(an error whose message is not UTF-8)");
}

static json_t *unreachable_json(const struct probe *p)
{
	return json_pack("{s:s,s:s,s:o}", "worker", p->w->worker_name, "url", p->w->endpoint,
			 "error", error_json(p->w->error));
}

/* Every workspace a worker lists must be one its ids route back to: a worker listed under
 * another name than its own (--worker), or one answering for others, is an error rather than
 * workspaces that calls would then send elsewhere. */
static int check_owned(struct station_client *w, json_t *list)
{
	char name[WORKER_NAME_MAX + 1];
	json_t *ws;
	size_t i;

	json_array_foreach(list, i, ws) {
		const char *id = json_string_value(json_object_get(ws, "id"));

		if (!id || worker_of_id(id, name) < 0 || strcmp(name, w->worker_name) != 0)
			return client_error(w, -EPROTO,
					    "worker %s (%s) listed workspace '%.128s', whose id "
					    "does not name it (is %s its --worker name?)",
					    w->worker_name, w->endpoint, id ? id : "",
					    w->worker_name);
	}
	return 0;
}

int station_workspace_list_all(struct station_client *c, json_t **ret)
{
	return client_list_all(c, "/v1/workspaces", ret);
}

/* Every snapshot a worker lists must be one its id routes back to, as for workspaces; one
 * whose id names no worker (taken before ids carried it) is that worker's. */
static int check_snapshots_owned(struct station_client *w, json_t *list)
{
	char name[WORKER_NAME_MAX + 1];
	json_t *s;
	size_t i;

	json_array_foreach(list, i, s) {
		const char *id = json_string_value(json_object_get(s, "id"));
		int r = snapshot_id_worker(id, name);

		if (r < 0 || (r > 0 && strcmp(name, w->worker_name) != 0))
			return client_error(
				w, -EPROTO,
				"worker %s (%s) listed snapshot '%.128s', whose id does "
				"not name it (is %s its --worker name?)",
				w->worker_name, w->endpoint, id ? id : "", w->worker_name);
	}
	return 0;
}

/* GET path of one controller: {key:[…],"unreachable":[]}. */
static int list_one(struct station_client *c, const char *path, const char *key, json_t **ret)
{
	_cleanup_json_ json_t *doc = NULL;
	json_t *list;
	int r = station_request_json(c, "GET", path, NULL, &doc);

	if (r < 0)
		return r;
	list = json_object_get(doc, key);
	if (!json_is_array(list))
		return client_error(c, -EPROTO, "%s answered without \"%s\"", c->endpoint, key);
	*ret = json_pack("{s:O,s:[]}", key, list, "unreachable");
	return *ret ? 0 : client_error(c, -ENOMEM, "out of memory");
}

/* GET path on every worker at once: {key: every list joined, "unreachable": […]}, each
 * worker's list checked by owned. */
static int list_all(struct station_client *c, const char *path, const char *key,
		    int (*owned)(struct station_client *, json_t *), json_t **ret)
{
	_cleanup_json_ json_t *out = NULL;
	json_t *all, *unreachable;
	struct probe *p = NULL;
	int r;

	if (!c->workers)
		return list_one(c, path, key, ret);
	c->current = NULL;
	out = json_pack("{s:[],s:[]}", key, "unreachable");
	if (!out)
		return client_error(c, -ENOMEM, "out of memory");
	all = json_object_get(out, key);
	unreachable = json_object_get(out, "unreachable");
	r = probe_all(c, path, &p);
	if (r < 0)
		return r;
	for (size_t i = 0; i < c->n_workers; i++) {
		json_t *l = json_object_get(p[i].doc, key);

		if (p[i].r >= 0 && !json_is_array(l))
			p[i].r = client_error(p[i].w, -EPROTO,
					      "worker %s (%s) answered without \"%s\"",
					      p[i].w->worker_name, p[i].w->endpoint, key);
		if (p[i].r >= 0)
			p[i].r = owned(p[i].w, l);
		if (p[i].r < 0)
			json_array_append_new(unreachable, unreachable_json(&p[i]));
		else
			json_array_extend(all, l);
	}
	probes_free(p, c->n_workers);
	*ret = TAKE_PTR(out);
	return 0;
}

int client_list_all(struct station_client *c, const char *path, json_t **ret)
{
	return list_all(c, path, "workspaces", check_owned, ret);
}

int client_snapshot_list_all(struct station_client *c, json_t **ret)
{
	return list_all(c, "/v1/snapshots", "snapshots", check_snapshots_owned, ret);
}

int client_route_snapshot(struct station_client **cp, const char *id)
{
	struct station_client *c = *cp, *w;
	char name[WORKER_NAME_MAX + 1];
	int r = snapshot_id_worker(id, name);

	if (r < 0)
		return client_error(c, -EINVAL,
				    "invalid snapshot id '%.128s' (want s-WORKER-… as snapshot "
				    "create prints it)",
				    id ? id : "");
	if (!c->workers)
		return 0;
	if (r == 0)
		return client_error(c, -EINVAL,
				    "snapshot %s names no worker (it was taken before snapshot ids "
				    "carried one): ask the worker that keeps it (--worker NAME)",
				    id);
	w = worker_find(c, name);
	if (!w)
		return client_error(c, -ENOENT,
				    "snapshot %s is kept by worker %s, which is not in the worker "
				    "list (STATION_WORKERS)",
				    id, name);
	c->current = w;
	*cp = w;
	return 0;
}

int station_workers_status(struct station_client *c, json_t **ret)
{
	_cleanup_json_ json_t *out = json_array();
	struct station_client *one = c;
	struct probe single = { .w = c, .path = "/v1/worker" }, *p = &single;
	size_t n = 1;
	int r;

	if (!out)
		return client_error(c, -ENOMEM, "out of memory");
	if (c->workers) {
		c->current = NULL;
		r = probe_all(c, "/v1/worker", &p);
		if (r < 0)
			return r;
		n = c->n_workers;
	} else
		single.r = station_request_json(one, "GET", "/v1/worker", NULL, &single.doc);
	for (size_t i = 0; i < n; i++) {
		const char *name = p[i].w->worker_name ?
					   p[i].w->worker_name :
					   json_string_value(json_object_get(p[i].doc, "name"));

		json_array_append_new(out, json_pack("{s:s?,s:s,s:s,s:o?,s:O?}", "name", name,
						     "url", p[i].w->endpoint, "state",
						     p[i].r < 0 ? "down" : "up", "error",
						     p[i].r < 0 ? error_json(p[i].w->error) : NULL,
						     "worker", p[i].r < 0 ? NULL : p[i].doc));
	}
	if (p != &single)
		probes_free(p, n);
	else
		json_decref(single.doc);
	*ret = TAKE_PTR(out);
	return 0;
}

static int64_t capacity_number(const json_t *worker, const char *what, const char *key)
{
	json_t *v =
		json_object_get(json_object_get(json_object_get(worker, "capacity"), what), key);

	return json_is_integer(v) ? (int64_t)json_integer_value(v) : -1;
}

/* A worker's GET /v1/worker answer as the placement rule reads it. */
static struct placement_worker placement_entry(const struct probe *p)
{
	json_t *caller = json_object_get(p->doc, "caller");

	return (struct placement_worker){
		.name = p->w->worker_name,
		.error = p->r < 0 ? p->w->error : NULL,
		.tenant = json_string_value(json_object_get(p->doc, "tenant")),
		.caller_admin =
			json_is_string(json_object_get(caller, "scope")) &&
			strcmp(json_string_value(json_object_get(caller, "scope")), "admin") == 0,
		.caller_tenant = json_string_value(json_object_get(caller, "tenant")),
		.free = capacity_number(p->doc, "workspaces", "free"),
		.memory_available = capacity_number(p->doc, "memoryBytes", "available"),
	};
}

/* The placement rule (basic/placement.h) over every worker's GET /v1/worker. */
static int place(struct station_client *c, struct station_client **ret)
{
	_cleanup_free_ struct placement_worker *v = NULL;
	struct probe *p = NULL;
	char why[2048];
	int r = probe_all(c, "/v1/worker", &p);

	if (r < 0)
		return r;
	v = calloc(c->n_workers, sizeof *v);
	if (!v) {
		probes_free(p, c->n_workers);
		return client_error(c, -ENOMEM, "out of memory");
	}
	for (size_t i = 0; i < c->n_workers; i++) {
		const char *name = json_string_value(json_object_get(p[i].doc, "name"));

		/* its ids would not route back to it */
		if (p[i].r >= 0 && (!name || strcmp(name, p[i].w->worker_name) != 0))
			p[i].r = client_error(p[i].w, -EPROTO, "worker %s (%s) calls itself %.64s",
					      p[i].w->worker_name, p[i].w->endpoint,
					      name ? name : "(no name)");
		v[i] = placement_entry(&p[i]);
	}
	r = placement_choose(v, c->n_workers, why, sizeof why);
	probes_free(p, c->n_workers);
	if (r < 0)
		return client_error(c, r, "no worker can take this workspace: %s", why);
	*ret = c->workers[r];
	return 0;
}

int client_route_create(struct station_client **cp, const char *worker)
{
	struct station_client *c = *cp, *w = NULL;
	int r;

	if (!c->workers) {
		if (worker)
			return client_error(c, -EINVAL,
					    "a worker is chosen only on a client over several "
					    "workers (STATION_WORKERS)");
		return 0;
	}
	c->current = NULL;
	if (worker) {
		w = worker_find(c, worker);
		if (!w)
			return client_error(c, -ENOENT,
					    "worker %.64s is not in the worker list "
					    "(STATION_WORKERS)",
					    worker);
	} else {
		r = place(c, &w);
		if (r < 0)
			return r;
	}
	c->current = w;
	*cp = w;
	return 0;
}

/* A name: the worker that has a workspace of that name for the caller. Workers that do not
 * answer are passed over unless none has it (then the first one's error is the answer). */
static int route_name(struct station_client **cp, const char *ws)
{
	struct station_client *c = *cp, *found = NULL;
	_cleanup_json_ json_t *all = NULL;
	_cleanup_free_ char *path = NULL;
	char holders[1024] = "";
	size_t n_holders = 0, off = 0;
	json_t *list, *one;
	size_t i;
	int r;

	if (asprintf(&path, "/v1/workspaces?name=%s", ws) < 0)
		return client_error(c, -ENOMEM, "out of memory");
	r = client_list_all(c, path, &all);
	if (r < 0)
		return r;
	list = json_object_get(all, "workspaces");
	json_array_foreach(list, i, one) {
		const char *worker = json_string_value(json_object_get(one, "worker"));
		const char *id = json_string_value(json_object_get(one, "id"));

		if (!worker || !id)
			continue;
		found = worker_find(c, worker);
		n_holders++;
		if (off < sizeof holders)
			off += (size_t)snprintf(holders + off, sizeof holders - off, "%s%s (%s)",
						off ? ", " : "", worker, id);
	}
	if (n_holders > 1)
		return client_error(c, -EINVAL,
				    "workspace name '%s' is on several workers: %s; use the id", ws,
				    holders);
	if (!found) {
		json_t *u = json_array_get(json_object_get(all, "unreachable"), 0);

		if (u)
			return client_error(
				c, -ENOENT,
				"no worker that answered has a workspace named '%s' (%s)", ws,
				json_string_value(json_object_get(u, "error")));
		return client_error(c, -ENOENT, "no worker has a workspace named '%s'", ws);
	}
	c->current = found;
	*cp = found;
	return 0;
}
