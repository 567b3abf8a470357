/* SPDX-License-Identifier: MIT */
/* Watching a directory: GET …/files/watch as server-sent events, one callback per event. */

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "basic/cleanup.h"
#include "client-internal.h"
#include "sse.h"

static const char *const watch_type_names[] = {
	[STATION_WATCH_UNKNOWN] = "unknown",   [STATION_WATCH_READY] = "ready",
	[STATION_WATCH_CREATED] = "created",   [STATION_WATCH_MODIFIED] = "modified",
	[STATION_WATCH_DELETED] = "deleted",   [STATION_WATCH_MOVED] = "moved",
	[STATION_WATCH_OVERFLOW] = "overflow",
};

const char *station_watch_event_type_to_string(enum station_watch_event_type t)
{
	return (size_t)t < ELEMENTSOF(watch_type_names) ? watch_type_names[t] : "unknown";
}

static enum station_watch_event_type watch_type_from_string(const char *s)
{
	for (size_t i = 1; s && i < ELEMENTSOF(watch_type_names); i++)
		if (strcmp(s, watch_type_names[i]) == 0)
			return (enum station_watch_event_type)i;
	return STATION_WATCH_UNKNOWN;
}

struct watch {
	struct station_client *c;
	int (*on_event)(const struct station_watch_event *e, void *userdata);
	void *userdata;
	int event_r; /* what the last event's handling returned */
};

static int watch_protocol_error(struct watch *w, const char *what)
{
	return client_error(w->c, -EPROTO, "bad watch stream from %s: %s",
			    station_client_endpoint(w->c), what);
}

static int watch_event(const char *event, const char *data, size_t len, void *userdata)
{
	struct watch *w = userdata;
	_cleanup_json_ json_t *doc = NULL;
	struct station_watch_event e = {};
	const char *type;
	json_t *seq;
	json_error_t err;

	doc = json_loadb(data, len, 0, &err);
	if (!doc)
		return w->event_r = watch_protocol_error(w, err.text);
	/* The type is in the data; the SSE event name says the same (and an error, which has
	 * none, ends the watch). */
	type = json_string_value(json_object_get(doc, "type"));
	if (!type && strcmp(event, "error") == 0) {
		json_t *e = json_object_get(doc, "error");
		const char *msg = json_string_value(json_object_get(e, "message"));

		return w->event_r = client_error(w->c, -EIO, "the watch failed: %s",
						 msg ? msg : "no reason given");
	}
	if (!type)
		return w->event_r = watch_protocol_error(w, "event without a \"type\"");
	seq = json_object_get(doc, "seq");
	e.type = watch_type_from_string(type);
	e.path = json_string_value(json_object_get(doc, "path"));
	e.to = json_string_value(json_object_get(doc, "to"));
	e.kind = client_file_type_from_string(json_string_value(json_object_get(doc, "kind")));
	e.seq = json_is_integer(seq) && json_integer_value(seq) >= 0 ?
			(uint64_t)json_integer_value(seq) :
			0;
	e.json = doc;
	return w->event_r = w->on_event ? w->on_event(&e, w->userdata) : 0;
}

static int watch_data(const void *data, size_t len, void *userdata)
{
	struct sse_parser *p = userdata;
	struct watch *w = p->userdata;
	int r;

	w->event_r = 0;
	r = sse_feed(p, data, len);
	if (r < 0 && r != w->event_r)
		return watch_protocol_error(w, r == -E2BIG ? "event too large" : "out of memory");
	return r;
}

int station_file_watch(struct station_client *c, const char *ws, const char *path, bool recursive,
		       int (*on_event)(const struct station_watch_event *e, void *userdata),
		       void *userdata)
{
	CLIENT_ROUTE(c, ws);
	struct watch w = { .c = c, .on_event = on_event, .userdata = userdata };
	struct sse_parser p = { .on_event = watch_event, .userdata = &w };
	_cleanup_free_ char *url = NULL;
	int r;

	r = client_file_path(c, ws, "/files/watch", path, recursive ? "&recursive=1" : NULL, &url);
	if (r < 0)
		return r;
	r = station_request_stream(c, url, watch_data, &p);
	sse_done(&p);
	return r;
}
