/* SPDX-License-Identifier: MIT */
/* GET …/commands/{run}/output and GET …/services/{name}/logs upgraded to a WebSocket
 * (docs/api.md "WebSocket"): the events of the SSE variant (sse.c) as messages. Binary: 1 byte
 * stream (1 stdout, 2 stderr), 8 bytes big-endian offset, the data. Text: {"type":"gap",…},
 * then {"type":"end","run":{…}} (a service's logs: "service") and a normal close. A client that
 * does not keep up never slows the run: once a message does not fit in the connection's queue,
 * nothing more is taken; when the queue has drained to half, the output is watched again from
 * where the client stands, which sends what is still kept from there (the stored head and
 * tail, or what the agent holds) and tells of what is not. So a gap is only ever bytes no
 * longer kept. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "basic/cleanup.h"
#include "api/http.h"
#include "api/output-cursor.h"
#include "api/sse.h"
#include "daemon/manager.h"
#include "api/router.h"
#include "api/validate.h"
#include "api/ws-conn.h"
#include "proto/agent-proto.h"

/* Data bytes per binary message. */
#define WS_OUTPUT_CHUNK (64u * 1024)
#define WS_OUTPUT_PREFIX 9u
#define WS_GAP_MESSAGE_MAX 128u
/* The connection's queue: a follower descheduled for a few milliseconds while the run writes
 * at 1 GB/s catches up from here instead of losing bytes. Held only while the client lags. */
#define WS_OUTPUT_QUEUE (16u * 1024 * 1024)

struct ws_output;

/* Where the output comes from: a run, or a service's attempts. */
struct ws_output_source {
	int (*watch)(struct ws_output *o, const struct run_watch_ops *ops, struct station_error *e);
	void (*unwatch)(void *watch);
	/* NULL, or what the watch shows (a service's attempt), for watching the same again. */
	uint64_t (*shown)(struct ws_output *o);
	/* The object of the end message, under end_key. */
	int (*end)(struct ws_output *o, json_t **ret, struct station_error *e);
	const char *end_key;
};

struct ws_output {
	struct ws_conn *conn;
	struct manager *manager;
	const struct ws_output_source *src;
	void *watch; /* struct run_watch or struct service_watch */
	char ws_id[ROUTE_ID_MAX + 1];
	char run_id[ROUTE_ID_MAX + 1]; /* the run, or the service's name */
	bool follow;		       /* a service's logs: ?follow=1 */
	bool resumed;		       /* from holds where the client resumes */
	uint64_t from[2];
	uint64_t shown; /* 0, or what the watch shows (ws_output_source.shown), once behind */
	struct output_cursor streams[2];
	bool behind; /* a send was refused: nothing is taken until the watch starts again */
	bool done;   /* the manager has nothing more */
	bool ended;  /* the end message is queued and the close begun */
	struct station_error rewatch_error; /* why watching again failed (err < 0) */
};

/* 0 when announced (or nothing to announce), -EAGAIN and friends when it did not fit. */
static int send_gap(struct ws_output *o, int idx)
{
	struct output_cursor *st = &o->streams[idx];
	char text[WS_GAP_MESSAGE_MAX];
	int n, r;

	if (st->gap_bytes == 0)
		return 0;
	n = snprintf(text, sizeof text,
		     "{\"type\":\"gap\",\"stream\":\"%s\",\"offset\":%" PRIu64 ",\"bytes\":%" PRIu64
		     "}",
		     output_cursor_stream_name(idx), st->gap_offset, st->gap_bytes);
	r = ws_send_text(o->conn, text, (size_t)n);
	if (r >= 0)
		st->gap_bytes = 0;
	return r;
}

static int send_chunk(struct ws_output *o, int idx, uint64_t offset, const void *data, size_t n)
{
	uint8_t prefix[WS_OUTPUT_PREFIX];
	struct iovec iov[2] = { { prefix, sizeof prefix }, { (void *)data, n } };

	prefix[0] = (uint8_t)(idx + 1);
	for (int i = 0; i < 8; i++)
		prefix[1 + i] = (uint8_t)(offset >> (56 - 8 * i));
	return ws_send_binaryv(o->conn, iov, 2);
}

/* Sends one piece; false when the queue has no room for it (the client is behind: the piece
 * is left for the next watch). A pending gap of this stream goes first, so the client always
 * learns of it before the bytes after it. A piece that cannot be sent for another reason (the
 * connection is closing, out of memory) is counted missing. */
static bool take_piece(struct ws_output *o, int idx, uint64_t offset, const void *data, size_t n)
{
	struct output_cursor *st = &o->streams[idx];
	int r = send_gap(o, idx);

	if (r >= 0)
		r = send_chunk(o, idx, offset, data, n);
	if (r == -EAGAIN)
		return false;
	st->next = offset + n;
	if (r < 0)
		output_cursor_miss(st, offset, n);
	return true;
}

static void on_output(void *userdata, int stream, uint64_t offset, const void *data, size_t n)
{
	struct ws_output *o = userdata;
	const uint8_t *p = data;
	int idx = output_cursor_index(stream);

	if (o->behind || idx < 0 || o->ended ||
	    !output_cursor_take(&o->streams[idx], &offset, &p, &n))
		return;
	while (n > 0) {
		size_t piece = MIN(n, (size_t)WS_OUTPUT_CHUNK);

		if (!take_piece(o, idx, offset, p, piece)) {
			/* drain() comes once the queue is down to half */
			o->behind = true;
			if (o->src->shown && o->watch)
				o->shown = o->src->shown(o);
			return;
		}
		offset += piece;
		p += piece;
		n -= piece;
	}
}

static json_t *error_message(const struct station_error *e)
{
	json_t *body = error_json(error_http_status(e->err), e->message, e->field);
	json_t *err = json_incref(json_object_get(body, "error"));

	json_decref(body);
	return err ? json_pack("{s:s,s:o}", "type", "error", "error", err) : NULL;
}

/* The run (or the service) as GET returns it without output fields: those bytes came as binary
 * messages. */
static json_t *end_message(struct ws_output *o, bool *ret_ok)
{
	struct station_error e = o->rewatch_error;
	json_t *doc = NULL;
	int r;

	r = e.err < 0 ? e.err : o->src->end(o, &doc, &e);
	*ret_ok = r >= 0;
	if (r < 0)
		return error_message(&e);
	return json_pack("{s:s,s:o}", "type", "end", o->src->end_key, doc);
}

/* Once the manager is done: the gaps still owed, then `end`, then a normal close. Retried from
 * drain() while the queue has no room. */
static void try_finish(struct ws_output *o)
{
	_cleanup_free_ char *text = NULL;
	json_t *msg;
	bool ok;
	int r;

	if (!o->done || o->ended || o->behind)
		return;
	for (int i = 0; i < 2; i++)
		if (send_gap(o, i) < 0)
			return;
	msg = end_message(o, &ok);
	text = msg ? json_dumps(msg, JSON_COMPACT) : NULL;
	json_decref(msg);
	r = text ? ws_send_text(o->conn, text, strlen(text)) : -ENOMEM;
	if (r == -EAGAIN)
		return;
	o->ended = true;
	if (r < 0)
		ok = false;
	(void)ws_close(o->conn, ok ? WS_CLOSE_NORMAL : WS_CLOSE_INTERNAL,
		       ok ? "run finished" : "run unavailable");
}

static void on_done(void *userdata)
{
	struct ws_output *o = userdata;

	o->watch = NULL; /* gone once done() is called */
	o->done = true;
	try_finish(o);
}

static const struct run_watch_ops ws_output_watch_ops = {
	.output = on_output,
	.done = on_done,
};

/* The client has half a queue left to read: a new watch from where it stands sends what is
 * still kept from there (done() may have come meanwhile; the new watch replays the rest) and
 * tells of what is not. A failure ends the stream with an error message. Callbacks never come
 * from inside the watch call. */
static void rewatch(struct ws_output *o)
{
	void *old = o->watch;

	o->watch = NULL;
	o->behind = false;
	o->done = false;
	o->resumed = true;
	for (int i = 0; i < 2; i++)
		o->from[i] = o->streams[i].next;
	if (o->src->watch(o, &ws_output_watch_ops, &o->rewatch_error) < 0) {
		if (o->rewatch_error.err >= 0)
			station_error_set(&o->rewatch_error, -EIO, NULL,
					  "cannot watch the output again");
		o->watch = NULL;
		o->done = true;
	}
	if (old)
		o->src->unwatch(old);
}

static void on_drain(void *userdata, struct ws_conn *c)
{
	struct ws_output *o = userdata;

	if (o->behind && !o->ended)
		rewatch(o);
	for (int i = 0; i < 2; i++)
		if (send_gap(o, i) < 0)
			return;
	try_finish(o);
}

static void on_closed(void *userdata, struct ws_conn *c, uint16_t code, const char *reason)
{
	struct ws_output *o = userdata;

	if (o->watch)
		o->src->unwatch(o->watch);
	free(o);
}

/* Messages from the client mean nothing here. */
static void on_message(void *userdata, struct ws_conn *c, enum ws_opcode op, const void *data,
		       size_t n)
{
}

static const struct ws_conn_ops ws_output_conn_ops = {
	.message = on_message,
	.drain = on_drain,
	.closed = on_closed,
};

/* ---- the sources ------------------------------------------------------------------------- */

static int run_watch(struct ws_output *o, const struct run_watch_ops *ops, struct station_error *e)
{
	struct run_watch *w = NULL;
	int r = manager_run_watch(o->manager, o->ws_id, o->run_id, o->resumed ? o->from : NULL, ops,
				  o, &w, e);

	o->watch = w;
	return r;
}

static void run_unwatch(void *watch)
{
	manager_run_unwatch(watch);
}

/* A run's or an attempt's output fields: the bytes came as binary messages, and the end message
 * must fit in the connection's queue. */
static void strip_output(json_t *o)
{
	static const char *const output_keys[] = { "stdout", "stderr", "stdoutTail", "stderrTail",
						   "encoding" };

	for (size_t i = 0; i < ELEMENTSOF(output_keys); i++)
		json_object_del(o, output_keys[i]);
}

static int run_end(struct ws_output *o, json_t **ret, struct station_error *e)
{
	int r = manager_run_get(o->manager, o->ws_id, o->run_id, ret, e);

	if (r >= 0)
		strip_output(*ret);
	return r;
}

static const struct ws_output_source run_source = {
	.watch = run_watch,
	.unwatch = run_unwatch,
	.end = run_end,
	.end_key = "run",
};

static int service_watch(struct ws_output *o, const struct run_watch_ops *ops,
			 struct station_error *e)
{
	struct service_watch *w = NULL;
	const uint64_t *from = o->resumed ? o->from : NULL;
	int r = o->shown ? manager_service_watch_attempt(o->manager, o->ws_id, o->run_id, o->shown,
							 from, ops, o, &w, e) :
			   manager_service_watch(o->manager, o->ws_id, o->run_id, o->follow, from,
						 ops, o, &w, e);

	o->watch = w;
	return r;
}

static void service_unwatch(void *watch)
{
	manager_service_unwatch(watch);
}

static uint64_t service_shown(struct ws_output *o)
{
	return manager_service_watch_number(o->watch);
}

/* The service as GET returns it, its attempts without their output (up to 100 attempts with
 * their output would not fit in one message). */
static int service_end(struct ws_output *o, json_t **ret, struct station_error *e)
{
	int r = manager_service_get(o->manager, o->ws_id, o->run_id, ret, e);
	json_t *attempt;
	size_t i;

	if (r >= 0)
		json_array_foreach(json_object_get(*ret, "attempts"), i, attempt)
			strip_output(attempt);
	return r;
}

static const struct ws_output_source service_source = {
	.watch = service_watch,
	.unwatch = service_unwatch,
	.shown = service_shown,
	.end = service_end,
	.end_key = "service",
};

static int output_ws_start(struct http_request *req, const struct ws_output_source *src,
			   bool follow)
{
	const struct route_match *m = http_request_route(req);
	struct station_error e = {};
	struct ws_output *o;
	int r;

	o = calloc(1, sizeof *o);
	if (!o)
		return http_reply_status(req, 500, NULL, "out of memory");
	o->manager = http_request_manager(req);
	o->src = src;
	o->follow = follow;
	snprintf(o->ws_id, sizeof o->ws_id, "%s", m->ws_id);
	snprintf(o->run_id, sizeof o->run_id, "%s", m->run_id);
	r = api_output_from(req, o->from, &o->resumed, &e);
	if (r < 0) {
		free(o);
		return http_reply_error(req, &e);
	}
	for (int i = 0; i < 2; i++)
		o->streams[i].next = o->from[i];
	/* The watch checks the run or service exists (404 before any upgrade); its callbacks
	 * come later from the loop, by when the connection below exists and queues what they
	 * send. */
	r = src->watch(o, &ws_output_watch_ops, &e);
	if (r < 0) {
		free(o);
		return http_reply_error(req, &e);
	}
	r = http_reply_websocket(req, &ws_output_conn_ops, o, &o->conn);
	if (r < 0) {
		if (o->watch)
			src->unwatch(o->watch);
		free(o);
		return http_reply_status(req, 500, NULL, "could not upgrade to a WebSocket");
	}
	ws_conn_set_max_queue(o->conn, WS_OUTPUT_QUEUE);
	return 0;
}

int api_command_output_ws(struct http_request *req)
{
	return output_ws_start(req, &run_source, false);
}

int api_service_logs_ws(struct http_request *req)
{
	struct station_error e = {};
	uint64_t follow = 0;
	bool present;
	const char *v = http_request_query(req, "follow", &present);

	if (present && validate_query_u64("follow", v, 0, 1, &follow, &e) < 0)
		return http_reply_error(req, &e);
	return output_ws_start(req, &service_source, follow != 0);
}
