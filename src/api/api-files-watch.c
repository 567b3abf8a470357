/* SPDX-License-Identifier: MIT */
/* GET /v1/workspaces/{id}/files/watch (docs/api.md, "Files"): a WATCH session's events as
 * server-sent events or WebSocket text messages. The answer waits for the agent's INFO (the
 * watch is in place): an error before it is a plain JSON error; after it, a `ready` event, then
 * one event per change, each with a sequence number.
 *
 * A slow client costs bounded memory: at most WATCH_QUEUE events wait for it (on top of what
 * the socket and, for a WebSocket, the connection's own queue hold); beyond that events are
 * dropped, and once the client has taken what waited, one `overflow` event tells it to re-list.
 * The stream ends when the session does: the directory went away, the workspace stopped, or an
 * error (an `error` event first). */
#include <errno.h>
#include <inttypes.h>
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "basic/cleanup.h"
#include "basic/util.h"
#include "api/api-files.h"
#include "api/http.h"
#include "api/router.h"
#include "api/validate.h"
#include "api/ws-conn.h"
#include "daemon/manager.h"
#include "proto/file-proto.h"

#define WATCH_QUEUE 4096u
#define WATCH_QUEUE_BYTES (4u * 1024 * 1024) /* paths may be 4 KiB each: bytes are capped too */
#define WATCH_BLOCK (16u * 1024)

struct watch {
	struct http_request *req; /* until the response or the upgrade is under way */
	struct ws_conn *conn;	  /* WebSocket, once upgraded */
	bool websocket;
	struct file_session *session;
	char *path; /* what the client named */
	char *base; /* the watched directory, absolute */
	/* the queue: encoded events, oldest at head */
	char *q[WATCH_QUEUE];
	size_t q_len[WATCH_QUEUE];
	size_t head, count, off, bytes;
	bool overflow_pending;
	uint64_t seq;
	bool ready;
	bool ended; /* the session is over */
	int err;
	struct station_error e;
	bool end_pushed; /* the last events are queued */
	bool finished;	 /* WebSocket: the close is begun */
};

static void watch_clear(struct watch *w)
{
	manager_file_close(w->session);
	w->session = NULL;
	while (w->count > 0) {
		free(w->q[w->head]);
		w->head = (w->head + 1) % WATCH_QUEUE;
		w->count--;
	}
	free(w->path);
	free(w->base);
	free(w);
}

/* The request's state: the watch, unless a WebSocket has taken it over. */
static void watch_req_free(void *userdata)
{
	struct watch *w = userdata;

	if (w->conn) {
		w->req = NULL;
		return;
	}
	watch_clear(w);
}

static void watch_pump(struct watch *w);

/* Queues one event (type set in o, which it takes): "seq" is added here. */
static void watch_push(struct watch *w, const char *type, json_t *o)
{
	_cleanup_free_ char *json = NULL;
	char *text = NULL;
	size_t slot;
	int n;

	if (!o)
		return;
	if (w->count >= WATCH_QUEUE || w->bytes >= WATCH_QUEUE_BYTES) {
		w->overflow_pending = true;
		json_decref(o);
		return;
	}
	json_object_set_new(o, "seq", json_integer((json_int_t)++w->seq));
	json = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	if (!json)
		return;
	if (w->websocket)
		n = asprintf(&text, "%s", json);
	else
		n = asprintf(&text, "event: %s\nid: %" PRIu64 "\ndata: %s\n\n", type, w->seq, json);
	if (n < 0)
		return;
	slot = (w->head + w->count) % WATCH_QUEUE;
	w->q[slot] = text;
	w->q_len[slot] = (size_t)n;
	w->count++;
	w->bytes += (size_t)n;
}

static void watch_pop(struct watch *w)
{
	w->bytes -= w->q_len[w->head];
	free(w->q[w->head]);
	w->q[w->head] = NULL;
	w->head = (w->head + 1) % WATCH_QUEUE;
	w->count--;
	w->off = 0;
}

/* Once the client has taken everything that waited. */
static void watch_caught_up(struct watch *w)
{
	if (w->count == 0 && w->overflow_pending) {
		w->overflow_pending = false;
		watch_push(w, "overflow", json_pack("{s:s}", "type", "overflow"));
	}
}

static json_t *error_event(const struct station_error *e)
{
	json_t *body = error_json(error_http_status(e->err), e->message, e->field);
	json_t *err = json_incref(json_object_get(body, "error"));

	json_decref(body);
	return err ? json_pack("{s:s,s:o}", "type", "error", "error", err) : NULL;
}

/* The stream's last events: an error, when the session did not end well (a stopped
 * workspace is a normal end). */
static void watch_push_end(struct watch *w)
{
	if (w->err < 0 && w->e.err != -EBUSY)
		watch_push(w, "error", error_event(&w->e));
}

/* ---- the session --------------------------------------------------------------------------- */

static void wake(struct watch *w)
{
	if (w->websocket && w->conn)
		watch_pump(w);
	else if (w->req)
		http_request_resume(w->req);
}

static void watch_info(void *userdata, const struct file_entry *en)
{
	struct watch *w = userdata;
	json_t *o;

	w->base = strdup(en->path ? en->path : w->path);
	w->ready = true;
	o = json_pack("{s:s}", "type", "ready");
	if (o)
		api_file_set_string(o, "path", w->base ? w->base : w->path);
	watch_push(w, "ready", o);
	wake(w);
}

static void watch_event(void *userdata, const struct file_event_info *ev)
{
	struct watch *w = userdata;
	const char *type = file_event_to_string(ev->event);
	const char *base = w->base ? w->base : w->path;
	_cleanup_free_ char *path = NULL, *to = NULL;
	json_t *o;

	if (ev->event == FILE_EVENT_OVERFLOW) {
		w->overflow_pending = true;
		watch_caught_up(w);
		wake(w);
		return;
	}
	path = api_file_join(base, ev->path);
	to = ev->path2 ? api_file_join(base, ev->path2) : NULL;
	o = json_pack("{s:s,s:s}", "type", type, "kind",
		      ev->type == FILE_TYPE_DIR ? "dir" : "file");
	if (!o || !path || (ev->path2 && !to)) {
		json_decref(o);
		return;
	}
	api_file_set_string(o, "path", path);
	if (to)
		api_file_set_string(o, "to", to);
	watch_push(w, type, o);
	wake(w);
}

static void watch_end(void *userdata, int r, bool flag, const struct station_error *e)
{
	struct watch *w = userdata;

	w->session = NULL;
	w->ended = true;
	w->err = r;
	if (r < 0)
		w->e = *e;
	wake(w);
}

static const struct file_session_ops watch_ops = {
	.info = watch_info,
	.event = watch_event,
	.end = watch_end,
};

static int watch_open(struct http_request *req, struct watch **ret)
{
	const struct route_match *m = http_request_route(req);
	struct station_error e = {};
	struct file_request q = { .op = FILE_OP_WATCH };
	bool recursive = false;
	struct watch *w;
	int r = api_file_query_path(req, "path", &q.path, &e);

	if (r >= 0)
		r = api_file_query_flag(req, "recursive", &recursive, &e);
	if (r < 0)
		return http_reply_error(req, &e);
	q.flags = recursive ? FILE_F_RECURSIVE : 0;
	w = calloc(1, sizeof *w);
	if (!w || !(w->path = strdup(q.path))) {
		free(w);
		return http_reply_status(req, 500, NULL, "out of memory");
	}
	w->req = req;
	r = manager_file_open(http_request_manager(req), m->ws_id, &q, &watch_ops, w, &w->session,
			      &e);
	if (r < 0) {
		watch_clear(w);
		return http_reply_error(req, &e);
	}
	http_request_set_state(req, w, watch_req_free);
	*ret = w;
	return 1;
}

/* ---- server-sent events -------------------------------------------------------------------- */

static ssize_t sse_read(void *cls, uint64_t pos, char *out, size_t max)
{
	struct http_request *req = cls;
	struct watch *w = http_request_state(req);
	size_t n;

	if (!w || http_request_gone(req))
		return MHD_CONTENT_READER_END_WITH_ERROR;
	watch_caught_up(w);
	if (w->count == 0 && w->ended && !w->end_pushed) {
		w->end_pushed = true;
		watch_push_end(w);
	}
	if (w->count == 0) {
		if (w->ended)
			return MHD_CONTENT_READER_END_OF_STREAM;
		return http_sse_idle(req, out, max);
	}
	n = MIN(max, w->q_len[w->head] - w->off);
	memcpy(out, w->q[w->head] + w->off, n);
	w->off += n;
	if (w->off == w->q_len[w->head])
		watch_pop(w);
	return (ssize_t)n;
}

static int sse_ready(struct http_request *req)
{
	struct watch *w = http_request_state(req);
	struct MHD_Response *r;
	int ret;

	if (!w)
		return http_reply_status(req, 500, NULL, "the watch was lost");
	if (!w->ready && w->ended)
		return w->err < 0 ? http_reply_error(req, &w->e) :
				    http_reply_status(req, 502, NULL,
						      "the workspace agent ended the watch early");
	if (!w->ready)
		return http_request_suspend(req, sse_ready);
	r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, WATCH_BLOCK, sse_read, req, NULL);
	if (!r)
		return -ENOMEM;
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
	MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
	ret = http_reply_response(req, 200, r);
	MHD_destroy_response(r);
	return ret;
}

int api_file_watch(struct http_request *req)
{
	struct watch *w = NULL;
	int r;

	if (http_request_hold(req) < 0)
		return http_reply_busy(req);
	r = watch_open(req, &w);
	if (r <= 0 || !w)
		return r;
	return http_request_suspend(req, sse_ready);
}

/* ---- WebSocket ----------------------------------------------------------------------------- */

static void watch_pump(struct watch *w)
{
	if (!w->conn || w->finished)
		return;
	for (;;) {
		int r;

		watch_caught_up(w);
		if (w->count == 0 && w->ended && !w->end_pushed) {
			w->end_pushed = true;
			watch_push_end(w);
		}
		if (w->count == 0)
			break;
		r = ws_send_text(w->conn, w->q[w->head], w->q_len[w->head]);
		if (r == -EAGAIN)
			return; /* drain() comes back */
		watch_pop(w);
		if (r == -EPIPE)
			return;
	}
	if (!w->ended)
		return;
	w->finished = true;
	(void)ws_close(w->conn,
		       w->err < 0 && w->e.err != -EBUSY ? WS_CLOSE_INTERNAL : WS_CLOSE_NORMAL,
		       "the watch ended");
}

static void ws_on_drain(void *userdata, struct ws_conn *c)
{
	watch_pump(userdata);
}

static void ws_on_closed(void *userdata, struct ws_conn *c, uint16_t code, const char *reason)
{
	struct watch *w = userdata;

	if (w->req) /* its state lets go of w (w->conn is set) */
		http_request_set_state(w->req, NULL, NULL);
	watch_clear(w);
}

static void ws_on_message(void *userdata, struct ws_conn *c, enum ws_opcode op, const void *data,
			  size_t n)
{
}

static const struct ws_conn_ops watch_ws_ops = {
	.message = ws_on_message,
	.drain = ws_on_drain,
	.closed = ws_on_closed,
};

static int ws_ready(struct http_request *req)
{
	struct watch *w = http_request_state(req);
	struct ws_conn *conn = NULL;
	int r;

	if (!w)
		return http_reply_status(req, 500, NULL, "the watch was lost");
	if (!w->ready && w->ended)
		return w->err < 0 ? http_reply_error(req, &w->e) :
				    http_reply_status(req, 502, NULL,
						      "the workspace agent ended the watch early");
	if (!w->ready)
		return http_request_suspend(req, ws_ready);
	r = http_reply_websocket(req, &watch_ws_ops, w, &conn);
	if (r < 0)
		return http_reply_status(req, 500, NULL, "could not upgrade to a WebSocket");
	w->conn = conn;
	http_request_set_state(req, NULL, NULL); /* the connection owns the watch now */
	watch_pump(w);
	return 0;
}

int api_file_watch_ws(struct http_request *req)
{
	struct watch *w = NULL;
	int r = watch_open(req, &w);

	if (r <= 0 || !w)
		return r;
	w->websocket = true;
	return http_request_suspend(req, ws_ready);
}
