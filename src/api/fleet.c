/* SPDX-License-Identifier: MIT */
/* The serving controller's worker list: parsing and the pool its remote calls run on. */
#include "fleet.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#include "basic/cleanup.h"
#include "basic/workers.h"
#include "event/work.h"

/* Remote calls at once: a hung worker holds one thread for at most its call's bound. */
#define FLEET_THREADS 16

/* An entry of the shared list (basic/workers.h, as clients read STATION_WORKERS) as kept here. */
static int fleet_add(struct fleet *w, const struct worker_ref *ref, struct station_error *e)
{
	struct fleet_worker *entry;
	size_t n;

	if (w->n == FLEET_MAX)
		return station_error_set(e, -EINVAL, "workers", "more than %d workers", FLEET_MAX);
	entry = &w->v[w->n++];
	memset(entry, 0, sizeof *entry);
	snprintf(entry->name, sizeof entry->name, "%s", ref->name);
	snprintf(entry->url, sizeof entry->url, "%s", ref->url);
	/* "http://host:8080/" and "http://host:8080" are the same worker. */
	n = strlen(entry->url);
	while (n > 0 && entry->url[n - 1] == '/' && strncmp(entry->url, "unix:", 5) != 0)
		entry->url[--n] = '\0';
	return 0;
}

int fleet_parse(struct fleet *w, const char *spec, const char *path, const char *self,
		struct station_error *e)
{
	struct fleet_worker *own;
	int r;

	_cleanup_(worker_refs_done) struct worker_refs refs = {};

	memset(w, 0, sizeof *w);
	r = path ? workers_read_file(path, &refs, e) : workers_parse_env(spec ?: "", &refs, e);
	if (r < 0)
		return r;
	for (size_t i = 0; i < refs.n; i++) {
		r = fleet_add(w, &refs.v[i], e);
		if (r < 0)
			return r;
	}
	own = (struct fleet_worker *)fleet_find(w, self);
	if (!own) {
		if (w->n == FLEET_MAX)
			return station_error_set(e, -EINVAL, "workers", "more than %d workers",
						 FLEET_MAX);
		memmove(w->v + 1, w->v, w->n * sizeof w->v[0]);
		own = &w->v[0];
		memset(own, 0, sizeof *own);
		snprintf(own->name, sizeof own->name, "%s", self);
		w->n++;
	}
	own->self = true;
	return 0;
}

const struct fleet_worker *fleet_find(const struct fleet *w, const char *name)
{
	for (size_t i = 0; w && name && i < w->n; i++)
		if (strcmp(w->v[i].name, name) == 0)
			return &w->v[i];
	return NULL;
}

/* A registration (manager-fleet.c) as an entry; false when it cannot be one. */
static bool registered_entry(const char *name, json_t *doc, struct fleet_worker *ret)
{
	const char *url = json_string_value(json_object_get(doc, "url"));

	if (!url || strlen(name) > FLEET_NAME_MAX || strlen(url) > FLEET_URL_MAX)
		return false;
	memset(ret, 0, sizeof *ret);
	snprintf(ret->name, sizeof ret->name, "%s", name);
	snprintf(ret->url, sizeof ret->url, "%s", url);
	return true;
}

int fleet_list(const struct fleet *w, const json_t *registered, struct fleet_worker **ret,
	       size_t *ret_n)
{
	struct fleet_worker *v = calloc(FLEET_MAX, sizeof *v);
	const char *name;
	json_t *doc;
	size_t n;

	if (!v)
		return -ENOMEM;
	n = w ? w->n : 0;
	if (n)
		memcpy(v, w->v, n * sizeof *v);
	json_object_foreach((json_t *)registered, name, doc) {
		if (n == FLEET_MAX)
			break;
		if (!fleet_find(w, name) && registered_entry(name, doc, &v[n]))
			n++;
	}
	*ret = v;
	*ret_n = n;
	return 0;
}

const struct fleet_worker *fleet_resolve(struct fleet *w, const json_t *registered,
					 const char *name)
{
	const struct fleet_worker *wk = fleet_find(w, name);
	json_t *doc;

	if (wk || !w || !name)
		return wk;
	doc = json_object_get(registered, name);
	return doc && registered_entry(name, doc, &w->found) ? &w->found : NULL;
}

const struct fleet_worker *fleet_self(const struct fleet *w)
{
	for (size_t i = 0; w && i < w->n; i++)
		if (w->v[i].self)
			return &w->v[i];
	return NULL;
}

int fleet_start(struct fleet *w, struct event_loop *loop)
{
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
		return -ENOMEM;
	return event_work_pool_new(loop, FLEET_THREADS, &w->pool);
}

void fleet_stop(struct fleet *w)
{
	if (!w)
		return;
	__atomic_store_n(&w->stopping, 1, __ATOMIC_RELAXED);
	event_work_pool_free(w->pool);
	w->pool = NULL;
}
