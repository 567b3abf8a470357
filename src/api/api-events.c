/* SPDX-License-Identifier: MIT */
/* GET /v1/events (docs/api.md, "Events"): state changes as server-sent events or WebSocket text
 * messages. A client holds only where it stands (a seq) and one event being written: it reads
 * the manager's ring at its own pace, so a slow client costs no memory; one that falls out of
 * the ring gets a single `gap` with the count it missed. */
#include <errno.h>
#include <inttypes.h>
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "basic/cleanup.h"
#include "basic/workers.h"
#include "api/http.h"
#include "api/router.h"
#include "api/validate.h"
#include "api/ws-conn.h"
#include "daemon/manager.h"

#define EVENTS_BLOCK_BYTES (16u * 1024)
/* What one WebSocket client may have queued: events are small, a client that lags this much
 * waits for drain() while the ring moves on. */
#define EVENTS_WS_QUEUE (256u * 1024)
#define EVENTS_TYPES_MAX 256

struct events_client {
	struct manager *m;
	struct http_request *req; /* SSE */
	struct ws_conn *conn;	  /* WebSocket */
	struct events_sub *sub;
	struct manager_events_cursor at; /* where it stands */
	char ws_id[ROUTE_ID_MAX + 1];
	char tenant[MANAGER_TENANT_MAX + 1]; /* a tenant's stream: that tenant's events only */
	struct manager_event_filter filter;
	char *out; /* SSE: the event being written */
	size_t out_len, out_off;
	bool closing;
};

static int parse_types(const char *v, unsigned *ret, struct station_error *e)
{
	char buf[EVENTS_TYPES_MAX];
	unsigned kinds = 0;
	char *save = NULL;

	if (!v || !*v || strlen(v) >= sizeof buf)
		return station_error_set(e, -EINVAL, "types",
					 "types must be a comma-separated list of workspace, run, "
					 "service, terminal, snapshot");
	snprintf(buf, sizeof buf, "%s", v);
	for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		int k = manager_event_kind_from_string(t);

		if (k < 0)
			return station_error_set(e, -EINVAL, "types",
						 "unknown event type \"%.32s\" (want workspace, "
						 "run, service, terminal, snapshot)",
						 t);
		kinds |= 1u << k;
	}
	if (!kinds)
		return station_error_set(e, -EINVAL, "types", "types names no type");
	*ret = kinds;
	return 0;
}

static int parse_request(struct http_request *req, struct events_client *c, struct station_error *e)
{
	bool present;
	const char *v;
	uint64_t since;
	int r;

	if (manager_viewer(c->m)) {
		snprintf(c->tenant, sizeof c->tenant, "%s", manager_viewer(c->m));
		c->filter.tenant = c->tenant;
	}
	v = http_request_query(req, "workspace", &present);
	if (present) {
		if (!v || !*v || strlen(v) > ROUTE_ID_MAX)
			return station_error_set(e, -EINVAL, "workspace",
						 "workspace must be a workspace id or name");
		snprintf(c->ws_id, sizeof c->ws_id, "%s", v);
		/* A name, as in a path (docs/api.md, "Names and labels"): the caller's tenant's
		 * workspace of that name now. A name none holds (another tenant's too) stays as
		 * it is: no id has a name's shape, so it matches nothing, as an unknown id does. */
		if (!workspace_id_shaped(v))
			(void)manager_workspace_resolve(c->m, c->filter.tenant, v, c->ws_id,
							sizeof c->ws_id);
		c->filter.ws_id = c->ws_id;
	}
	v = http_request_query(req, "types", &present);
	if (present) {
		r = parse_types(v, &c->filter.kinds, e);
		if (r < 0)
			return r;
	}
	v = http_request_query(req, "since", &present);
	if (present) {
		r = validate_query_u64("since", v, 0, UINT64_C(1) << 53, &since, e);
		if (r < 0)
			return r;
	} else if ((v = http_request_header(req, "Last-Event-ID")) && *v) {
		r = validate_query_u64("Last-Event-ID", v, 0, UINT64_C(1) << 53, &since, e);
		if (r < 0)
			return station_error_set(e, -EINVAL, "Last-Event-ID",
						 "Last-Event-ID must be the seq of an event");
		present = true;
	}
	if (!present) { /* from now on */
		c->at.after = manager_events_last(c->m, c->filter.tenant);
		c->at.pos = manager_events_last(c->m, NULL);
		return 0;
	}
	r = manager_events_check_since(c->m, since, c->filter.tenant, e);
	if (r < 0)
		return r;
	c->at = (struct manager_events_cursor){ .after = since,
						.pos = c->filter.tenant ? 0 : since };
	return 0;
}

/* The next event for c as JSON, with where c then stands; NULL when there is none yet (c->at
 * moves to where the ring stands), or out of memory (*ret_r < 0). */
static char *next_event(struct events_client *c, struct manager_events_cursor *ret_at,
			bool *ret_gap, int *ret_r)
{
	struct manager_event ev;
	char *text = NULL;

	*ret_r = 0;
	if (manager_events_next(c->m, &c->at, &c->filter, &ev) == 0) {
		c->at = (struct manager_events_cursor){ .after = ev.seq, .pos = ev.pos };
		return NULL;
	}
	if (ev.gap) {
		if (ev.missed < 0)
			*ret_r = asprintf(&text,
					  "{\"type\":\"gap\",\"seq\":%" PRIu64 ",\"from\":%" PRIu64
					  ",\"missed\":null,\"reason\":\"the controller "
					  "restarted\"}",
					  ev.seq, ev.gap_from);
		else
			*ret_r = asprintf(&text,
					  "{\"type\":\"gap\",\"seq\":%" PRIu64 ",\"from\":%" PRIu64
					  ",\"missed\":%" PRId64 "}",
					  ev.seq, ev.gap_from, ev.missed);
		if (*ret_r < 0)
			text = NULL;
	} else {
		text = strdup(ev.text);
	}
	if (!text) {
		*ret_r = -ENOMEM;
		return NULL;
	}
	*ret_at = (struct manager_events_cursor){ .after = ev.seq, .pos = ev.pos };
	*ret_gap = ev.gap;
	return text;
}

static void client_free(struct events_client *c)
{
	manager_events_unsubscribe(c->sub);
	free(c->out);
	free(c);
}

/* ---- server-sent events ------------------------------------------------------------------ */

static int sse_fill(struct events_client *c)
{
	_cleanup_free_ char *text = NULL;
	struct manager_events_cursor at;
	bool gap;
	int r;

	text = next_event(c, &at, &gap, &r);
	if (!text)
		return r;
	free(c->out);
	c->out = NULL;
	r = asprintf(&c->out, "%sid: %" PRIu64 "\ndata: %s\n\n", gap ? "event: gap\n" : "",
		     at.after, text);
	if (r < 0) {
		c->out = NULL;
		return -ENOMEM;
	}
	c->out_len = (size_t)r;
	c->out_off = 0;
	c->at = at;
	return 1;
}

static ssize_t sse_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct http_request *req = cls;
	struct events_client *c = http_request_state(req);
	size_t n = 0;

	if (!c || http_request_gone(req))
		return MHD_CONTENT_READER_END_WITH_ERROR;
	while (n < max) {
		size_t k;

		if (c->out_off == c->out_len) {
			int r = sse_fill(c);

			if (r < 0)
				return MHD_CONTENT_READER_END_WITH_ERROR;
			if (r == 0)
				break;
		}
		k = MIN(max - n, c->out_len - c->out_off);
		memcpy(buf + n, c->out + c->out_off, k);
		c->out_off += k;
		n += k;
	}
	if (n > 0)
		return (ssize_t)n;
	/* Nothing new: wait for the manager rather than be polled. */
	return http_sse_idle(req, buf, max);
}

static void sse_notify(void *userdata)
{
	struct events_client *c = userdata;

	http_request_resume(c->req);
}

static void sse_state_free(void *state)
{
	client_free(state);
}

int api_events(struct http_request *req)
{
	struct station_error e = {};
	struct events_client *c = calloc(1, sizeof *c);
	struct MHD_Response *resp;
	int r;

	if (!c)
		return http_reply_status(req, 500, NULL, "out of memory");
	c->m = http_request_manager(req);
	c->req = req;
	r = parse_request(req, c, &e);
	if (r < 0) {
		free(c);
		return http_reply_error(req, &e);
	}
	/* a stream is long-lived: it takes a place of the connection table's long-lived share */
	if (http_request_hold(req) < 0) {
		free(c);
		return http_reply_busy(req);
	}
	if (manager_events_subscribe(c->m, sse_notify, c, &c->sub) < 0) {
		free(c);
		return http_reply_status(req, 500, NULL, "out of memory");
	}
	/* A comment first, so that the client sees the stream open before the first event. */
	c->out = strdup(": events\n\n");
	c->out_len = c->out ? strlen(c->out) : 0;
	http_request_set_state(req, c, sse_state_free);
	resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, EVENTS_BLOCK_BYTES, sse_read,
						 req, NULL);
	if (!resp)
		return http_reply_status(req, 500, NULL, "out of memory");
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
	r = http_reply_response(req, 200, resp);
	MHD_destroy_response(resp);
	return r;
}

/* ---- WebSocket --------------------------------------------------------------------------- */

/* Sends what the queue takes; drain() goes on from there. */
static void ws_pump(struct events_client *c)
{
	while (!c->closing) {
		_cleanup_free_ char *text = NULL;
		struct manager_events_cursor at, before = c->at;
		bool gap;
		int r;

		text = next_event(c, &at, &gap, &r);
		if (!text) {
			if (r < 0) {
				c->closing = true;
				(void)ws_close(c->conn, WS_CLOSE_INTERNAL, "out of memory");
			}
			return;
		}
		r = ws_send_text(c->conn, text, strlen(text));
		if (r == -EAGAIN) {
			c->at = before; /* again after drain() */
			return;
		}
		if (r < 0) {
			c->closing = true;
			return;
		}
		c->at = at;
	}
}

static void ws_notify(void *userdata)
{
	ws_pump(userdata);
}

static void on_ws_drain(void *userdata, struct ws_conn *conn)
{
	ws_pump(userdata);
}

static void on_ws_message(void *userdata, struct ws_conn *conn, enum ws_opcode op, const void *data,
			  size_t n)
{
}

static void on_ws_closed(void *userdata, struct ws_conn *conn, uint16_t code, const char *reason)
{
	client_free(userdata);
}

static const struct ws_conn_ops events_conn_ops = {
	.message = on_ws_message,
	.drain = on_ws_drain,
	.closed = on_ws_closed,
};

int api_events_ws(struct http_request *req)
{
	struct station_error e = {};
	struct events_client *c = calloc(1, sizeof *c);
	int r;

	if (!c)
		return http_reply_status(req, 500, NULL, "out of memory");
	c->m = http_request_manager(req);
	r = parse_request(req, c, &e);
	if (r < 0) {
		free(c);
		return http_reply_error(req, &e);
	}
	r = http_reply_websocket(req, &events_conn_ops, c, &c->conn);
	if (r < 0) {
		free(c);
		return http_reply_status(req, 500, NULL, "could not upgrade to a WebSocket");
	}
	ws_conn_set_max_queue(c->conn, EVENTS_WS_QUEUE);
	/* From here on closed() frees c. What is there already goes out now. */
	if (manager_events_subscribe(c->m, ws_notify, c, &c->sub) < 0) {
		c->closing = true;
		(void)ws_close(c->conn, WS_CLOSE_INTERNAL, "out of memory");
		return 0;
	}
	ws_pump(c);
	return 0;
}
