/* SPDX-License-Identifier: MIT */
/* GET /v1/events as server-sent events (docs/api.md, "Events"): each event to a callback; a
 * connection that drops is opened again with since= the last seq seen, EVENTS_RETRIES times in a
 * row without a new event at most. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "basic/cleanup.h"
#include "client-internal.h"
#include "sse.h"

/* Connections in a row without a new event, the waits before them growing from 250 ms to 4 s
 * (a controller restarting takes a few seconds). */
#define EVENTS_RETRIES 5

struct events {
	struct station_client *c;
	station_event_fn fn;
	void *userdata;
	struct sse_parser sse;
	uint64_t last; /* the seq of the last event handled; 0: none */
	bool has_last;
	int event_r;
};

static int events_protocol_error(struct events *ev, const char *what)
{
	return client_error(ev->c, -EPROTO, "bad event stream from %s: %s",
			    station_client_endpoint(ev->c), what);
}

static int on_event(const char *event, const char *data, size_t len, void *userdata)
{
	struct events *ev = userdata;
	_cleanup_json_ json_t *doc = NULL;
	json_t *seq;
	json_error_t err;

	doc = json_loadb(data, len, 0, &err);
	if (!doc || !json_is_object(doc))
		return ev->event_r = events_protocol_error(
			       ev, doc ? "an event that is not an object" : err.text);
	seq = json_object_get(doc, "seq");
	if (!json_is_integer(seq) || json_integer_value(seq) < 0)
		return ev->event_r = events_protocol_error(ev, "an event without a valid \"seq\"");
	if (strcmp(event, "gap") == 0 && !json_object_get(doc, "type"))
		json_object_set_new(doc, "type", json_string("gap"));
	/* Seen already (a server that replays after a reconnect): skipped. */
	if (ev->has_last && (uint64_t)json_integer_value(seq) <= ev->last)
		return 0;
	ev->last = (uint64_t)json_integer_value(seq);
	ev->has_last = true;
	return ev->event_r = ev->fn ? ev->fn(doc, ev->userdata) : 0;
}

static int on_data(const void *data, size_t len, void *userdata)
{
	struct events *ev = userdata;
	int r;

	ev->event_r = 0;
	r = sse_feed(&ev->sse, data, len);
	if (r < 0 && r != ev->event_r)
		return events_protocol_error(ev, r == -E2BIG ? "event too large" : "out of memory");
	return r;
}

/* Letters, digits, '.', '_', '-' and (for types) ','. */
static bool query_value_ok(const char *s, bool comma)
{
	if (!s || !*s || strlen(s) > 256)
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		      (*s >= '0' && *s <= '9') || *s == '.' || *s == '_' || *s == '-' ||
		      (comma && *s == ',')))
			return false;
	return true;
}

static void pause_usec(uint64_t usec)
{
	struct timespec ts = { .tv_sec = (time_t)(usec / 1000000),
			       .tv_nsec = (long)(usec % 1000000) * 1000 };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

int station_events(struct station_client *c, const struct station_events_options *opts,
		   station_event_fn fn, void *userdata)
{
	static const struct station_events_options none = {};
	struct events ev = { .c = c, .fn = fn, .userdata = userdata };
	int r = 0;

	if (!opts)
		opts = &none;
	if (opts->workspace && !query_value_ok(opts->workspace, false))
		return client_error(c, -EINVAL, "not a workspace id: \"%.64s\"", opts->workspace);
	if (opts->types && !query_value_ok(opts->types, true))
		return client_error(c, -EINVAL,
				    "types must be a comma-separated list of workspace, run, "
				    "service, terminal");
	if (opts->workspace) {
		CLIENT_ROUTE(c, opts->workspace);
		ev.c = c;
	}
	ev.has_last = opts->has_since;
	ev.last = opts->since;
	ev.sse.on_event = on_event;
	ev.sse.userdata = &ev;
	for (unsigned failed = 0;;) {
		_cleanup_free_ char *path = NULL;
		uint64_t before = ev.last;
		bool had = ev.has_last;
		char since[40] = "";

		if (ev.has_last)
			snprintf(since, sizeof since, "since=%" PRIu64, ev.last);
		if (asprintf(&path, "/v1/events?%s%s%s%s%s%s", since,
			     opts->workspace ? (*since ? "&workspace=" : "workspace=") : "",
			     opts->workspace ? opts->workspace : "",
			     opts->types ? (*since || opts->workspace ? "&types=" : "types=") : "",
			     opts->types ? opts->types : "", "") < 0) {
			r = client_error(c, -ENOMEM, "out of memory");
			break;
		}
		sse_reset(&ev.sse);
		ev.event_r = 0;
		r = station_request_stream(c, path, on_data, &ev);
		if (r < 0 && r == ev.event_r)
			break; /* the callback's own answer, or the stream's protocol error */
		if (r == 0)
			r = client_error(c, -ECONNRESET, "the event stream ended");
		/* A refusal (400, 401…) is final, and so is a controller that did not answer in time
		 * (a quiet stream has its heartbeat: one silent past the deadline has a controller that
		 * stopped); a connection that broke, or a controller not there (restarting: no socket,
		 * refused), is tried again. */
		if (r != -ECONNRESET && r != -EPIPE && r != -ECONNREFUSED && r != -ENOENT &&
		    r != -EIO)
			break;
		if (c->interrupt && c->interrupt(c->interrupt_userdata)) {
			r = client_error(c, -EINTR, "interrupted");
			break;
		}
		failed = ev.has_last != had || ev.last != before ? 1 : failed + 1;
		if (failed > EVENTS_RETRIES)
			break;
		pause_usec(MIN(250000u << (failed - 1), 4000000u));
	}
	sse_done(&ev.sse);
	return r;
}
