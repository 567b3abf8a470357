/* SPDX-License-Identifier: MIT */
#pragma once

/* GET …/commands/{run}/output: the run's output as server-sent events (docs/api.md).
 *
 * Each request has its own bounded buffer (SSE_BUFFER_BYTES of encoded events), so a slow
 * client costs bounded memory and never slows the run. A chunk that does not fit stops the
 * request from taking any more: it remembers where it stands in each stream, and once the
 * buffer has drained it watches again from there, which sends what is still kept (the stored
 * head and tail, or what the agent holds) and tells of what is not. So a `gap` is only ever
 * bytes no longer kept. When the buffer is empty the connection is suspended (no polling)
 * until the manager delivers more output or the end. The `end` event carries the run as GET returns it,
 * fetched when everything before it has been sent. */

#include "api/http.h"
#include "daemon/manager.h"

#define SSE_BUFFER_BYTES (1024u * 1024)

/* Where a follower of a run's output or a service's logs resumes (docs/api.md, "Resuming"):
 * ?stdoutOffset=N and ?stderrOffset=N, or ?offset=STDOUT:STDERR, else the Last-Event-ID
 * header an event stream's `id:` gave (STDOUT:STDERR). *ret_set is false when none is given
 * (from the start). A malformed value is -EINVAL naming the parameter or header. */
int api_output_from(struct http_request *req, uint64_t ret[2], bool *ret_set,
		    struct station_error *e);

/* Replies with an error when the workspace or run is unknown. ws_id and run_id must be the
 * request's route ids. */
int sse_start(struct http_request *req, const char *ws_id, const char *run_id);

/* The same stream for another source of output (a service's logs). */
struct sse_source {
	/* Starts delivering to ops from from (NULL: the start); *ret_watch goes to unwatch()
	 * unless done() came first. shown: 0, or what shown() said of an earlier watch of this
	 * request (a service's attempt), which a watch again shows. */
	int (*watch)(struct http_request *req, uint64_t shown, const uint64_t *from,
		     const struct run_watch_ops *ops, void *userdata, void **ret_watch,
		     struct station_error *e);
	void (*unwatch)(void *watch);
	/* NULL, or what a watch (before done()) shows, for watching the same again. */
	uint64_t (*shown)(void *watch);
	/* The document of the `end` event, fetched once everything before it is sent. */
	int (*end)(struct http_request *req, json_t **ret, struct station_error *e);
};

/* label goes into the opening comment line. */
int sse_start_source(struct http_request *req, const struct sse_source *src, const char *label);
