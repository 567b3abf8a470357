/* SPDX-License-Identifier: MIT */
#pragma once

/* The workers a serving controller knows (--workers, --workers-file): GET /v1/workers lists
 * them with their state, and /v1/workers/NAME/v1/... forwards one request to worker NAME for
 * the signed-in user (docs/api.md, "Workers"). Only names of this list are ever reached: a
 * request names a worker, never a URL. Remote calls run on a small thread pool of their own,
 * with libcurl and a bound on every call, so a hung worker never blocks the event loop nor
 * the manager's pool.
 *
 * The list's syntax is the clients' STATION_WORKERS: "w1=http://host1:8080,w2=unix:/path", or
 * a file with one worker a line, "NAME URL [TOKEN-FILE]" (basic/workers.h; a token file is for
 * clients and ignored here: the controller forwards the user's own token). */

#include <stdbool.h>
#include <stddef.h>

#include "basic/error.h"

#define FLEET_MAX 64
#define FLEET_NAME_MAX 32
#define FLEET_URL_MAX 2048

#include <jansson.h>

struct event_loop;
struct event_work_pool;

struct fleet_worker {
	char name[FLEET_NAME_MAX + 1];
	char url[FLEET_URL_MAX + 1]; /* "" for this controller when it was added, not listed */
	bool self;		     /* this controller: answered in process, never over HTTP */
};

struct fleet {
	struct fleet_worker v[FLEET_MAX];
	size_t n;
	struct event_work_pool *pool; /* the remote calls; NULL until fleet_start() */
	volatile int stopping;	      /* set by fleet_stop(): calls under way abort */
	struct fleet_worker found;    /* fleet_resolve()'s answer for a registered worker */
};

/* Parses a STATION_WORKERS list (spec) or, when path is set instead, a workers file, with
 * basic/workers.h (the clients' parser) into w (zeroed first). self names this controller: it
 * is marked, or added first when the list does not name it. Fails with -EINVAL (-ENOENT: no
 * such file) and e saying which entry and why. */
int fleet_parse(struct fleet *w, const char *spec, const char *path, const char *self,
		struct station_error *e);

const struct fleet_worker *fleet_find(const struct fleet *w, const char *name);
/* The workers a request may name (--fleet; docs/operations.md, "Many workers"): the list
 * first, then the workers registered in the fleet's store (registered: name -> {url, ...}, as
 * manager_fleet_workers() keeps them; NULL: none) that it does not name, each at its
 * registered URL, at most FLEET_MAX in all. *ret is the caller's to free. */
int fleet_list(const struct fleet *w, const json_t *registered, struct fleet_worker **ret,
	       size_t *ret_n);
/* fleet_find() over that list: a registered worker is copied into w->found, valid until the
 * next call (on the loop). */
const struct fleet_worker *fleet_resolve(struct fleet *w, const json_t *registered,
					 const char *name);

/* The entry of this controller (there is always one after fleet_parse()). */
const struct fleet_worker *fleet_self(const struct fleet *w);

/* Makes the pool of remote calls on loop. */
int fleet_start(struct fleet *w, struct event_loop *loop);
/* Aborts calls under way and frees the pool (their requests are gone by then: free the HTTP
 * servers first). The list itself is the caller's. NULL is fine. */
void fleet_stop(struct fleet *w);
