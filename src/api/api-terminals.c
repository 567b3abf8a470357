/* SPDX-License-Identifier: MIT */
/* /v1/workspaces/{id}/terminals: open, list, get, resize, force-close, and attach over a
 * WebSocket (docs/api.md, "Terminals"). Attach: binary messages carry the terminal's raw bytes
 * both ways; text messages are control: {"type":"resize","cols","rows"} from the client,
 * {"type":"gap","bytes"} and {"type":"exit","exitCode","signal"} (then a normal close) from us.
 * A client that does not keep up never slows the terminal: what does not fit in its queue is
 * dropped; once the queue has drained, the client gets the scrollback from where it stopped,
 * with a gap message for what even the scrollback no longer has. Closing the WebSocket leaves
 * the terminal running. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "basic/cleanup.h"
#include "api/http.h"
#include "api/idempotency.h"
#include "daemon/manager.h"
#include "api/router.h"
#include "api/validate.h"
#include "api/ws-conn.h"
#include "event/event.h"

/* POST answers once the agent reports the terminal running (or failed), at most after this. */
#define OPEN_WAIT_MS 5000u
/* DELETE answers once the terminal's end is recorded, at most after this. */
#define CLOSE_WAIT_MS 10000u
#define WS_TERM_CHUNK (64u * 1024)

/* ---- plain requests ------------------------------------------------------------------------ */

/* A request waiting for a terminal to start or end. */
struct term_poll {
	struct http_request *req;
	unsigned status;
	char term_id[ROUTE_ID_MAX + 1];
	struct terminal_waiter *waiter;
	struct event_source *timer;
};

static void term_poll_free(void *userdata)
{
	struct term_poll *p = userdata;

	manager_terminal_waiter_cancel(p->waiter);
	event_source_free(p->timer);
	free(p);
}

static int reply_terminal(struct http_request *req, unsigned status, const char *term_id)
{
	const struct route_match *m = http_request_route(req);
	struct station_error e = {};
	json_t *t = NULL;
	int r = manager_terminal_get(http_request_manager(req), m->ws_id, term_id, &t, &e);

	return api_reply_result(req, r, status, t, &e);
}

static int term_poll_resumed(struct http_request *req)
{
	struct term_poll *p = http_request_state(req);
	char term_id[ROUTE_ID_MAX + 1];
	unsigned status;

	if (!p)
		return http_reply_status(req, 500, NULL, "the wait was lost");
	snprintf(term_id, sizeof term_id, "%s", p->term_id);
	status = p->status;
	http_request_set_state(req, NULL, NULL);
	return reply_terminal(req, status, term_id);
}

static void on_term_due(void *userdata)
{
	struct term_poll *p = userdata;

	p->waiter = NULL; /* gone once called */
	http_request_resume(p->req);
}

static int on_term_poll_timeout(struct event_source *s, uint64_t now, void *userdata)
{
	struct term_poll *p = userdata;

	manager_terminal_waiter_cancel(p->waiter);
	p->waiter = NULL;
	http_request_resume(p->req);
	return 0;
}

/* Answers with the terminal once it reaches what, or after wait_ms as it is then. */
static int term_poll_begin(struct http_request *req, unsigned status, const char *term_id,
			   enum terminal_wait what, uint64_t wait_ms)
{
	const struct route_match *m = http_request_route(req);
	struct station_error e = {};
	struct term_poll *p = calloc(1, sizeof *p);
	int r;

	if (!p)
		return http_reply_status(req, 500, NULL, "out of memory");
	p->req = req;
	p->status = status;
	snprintf(p->term_id, sizeof p->term_id, "%s", term_id);
	r = manager_terminal_wait(http_request_manager(req), m->ws_id, term_id, what, on_term_due,
				  p, &p->waiter, &e);
	if (r == 0)
		r = event_add_timer(http_request_loop(req), &p->timer, now_usec() + wait_ms * 1000,
				    on_term_poll_timeout, p);
	if (r != 0) {
		term_poll_free(p);
		return reply_terminal(req, status, term_id);
	}
	http_request_set_state(req, p, term_poll_free);
	r = http_request_suspend(req, term_poll_resumed);
	if (r < 0) {
		http_request_set_state(req, NULL, NULL);
		return reply_terminal(req, status, term_id);
	}
	return 0;
}

int api_terminal_create(struct http_request *req)
{
	const struct route_match *m = http_request_route(req);
	struct station_error e = {};
	struct terminal_spec spec = {};
	struct api_idempotency idem;
	struct idempotency_hit hit;
	json_t *body = NULL, *t = NULL;
	char id[ROUTE_ID_MAX + 1];
	int r;

	r = api_idempotency_begin(req, &idem, &hit);
	if (r < 0 || r == IDEMPOTENCY_REPLIED)
		return r;
	if (r == IDEMPOTENCY_REPLAY) {
		r = manager_terminal_get(http_request_manager(req), m->ws_id, hit.object_id, &t,
					 &e);
		if (r == -ENOENT)
			return api_idempotency_reply_gone(req, &idem, "terminal", hit.object_id);
		json_decref(t);
		if (r < 0)
			return http_reply_error(req, &e);
		return term_poll_begin(req, hit.status, hit.object_id, TERMINAL_WAIT_STARTED,
				       OPEN_WAIT_MS);
	}
	r = api_request_json(req, false, &body, &e);
	if (r >= 0)
		r = validate_terminal_spec(body, &spec, &e);
	if (r >= 0)
		r = manager_terminal_open(http_request_manager(req), m->ws_id, &spec, &t, &e);
	json_decref(body);
	api_idempotency_end(req, &idem, r < 0 ? NULL : json_string_value(json_object_get(t, "id")),
			    201);
	if (r < 0)
		return http_reply_error(req, &e);
	snprintf(id, sizeof id, "%s", json_string_value(json_object_get(t, "id")));
	json_decref(t);
	return term_poll_begin(req, 201, id, TERMINAL_WAIT_STARTED, OPEN_WAIT_MS);
}

int api_terminal_list(struct http_request *req)
{
	const struct route_match *m = http_request_route(req);
	struct station_error e = {};
	json_t *list = NULL;
	int r = manager_terminal_list(http_request_manager(req), m->ws_id, &list, &e);

	return api_reply_result(req, r, 200, r < 0 ? NULL : api_wrap_list(list, "terminals"), &e);
}

int api_terminal_get(struct http_request *req)
{
	const struct route_match *m = http_request_route(req);

	return reply_terminal(req, 200, m->run_id);
}

int api_terminal_resize(struct http_request *req)
{
	const struct route_match *m = http_request_route(req);
	struct station_error e = {};
	json_t *body = NULL, *t = NULL;
	unsigned cols = 0, rows = 0;
	int r;

	r = api_request_json(req, false, &body, &e);
	if (r >= 0)
		r = validate_terminal_size(body, NULL, &cols, &rows, &e);
	if (r >= 0)
		r = manager_terminal_resize(http_request_manager(req), m->ws_id, m->run_id, cols,
					    rows, &t, &e);
	json_decref(body);
	return api_reply_result(req, r, 200, t, &e);
}

int api_terminal_delete(struct http_request *req)
{
	const struct route_match *m = http_request_route(req);
	struct station_error e = {};
	int r = manager_terminal_close(http_request_manager(req), m->ws_id, m->run_id, &e);

	if (r < 0)
		return http_reply_error(req, &e);
	if (r > 0)
		return reply_terminal(req, 200, m->run_id);
	return term_poll_begin(req, 200, m->run_id, TERMINAL_WAIT_ENDED, CLOSE_WAIT_MS);
}

/* ---- attach -------------------------------------------------------------------------------- */

struct term_ws {
	struct ws_conn *conn;
	struct terminal_attach *attach;
	bool read_only;
	bool started;  /* next is known */
	uint64_t next; /* stream offset after the last byte sent */
	bool blocked;  /* a send was refused: nothing is sent until drain() */
	json_t *final; /* the ended terminal, its exit not yet sent */
	bool ended;    /* exit sent, closing */
};

/* Bytes between what the client has and offset: announced as a gap. */
static int send_gap(struct term_ws *o, uint64_t offset)
{
	char text[96];
	int n, r;

	if (offset <= o->next)
		return 0;
	n = snprintf(text, sizeof text, "{\"type\":\"gap\",\"bytes\":%" PRIu64 "}",
		     offset - o->next);
	r = ws_send_text(o->conn, text, (size_t)n);
	if (r >= 0)
		o->next = offset;
	return r;
}

/* Sends what fits; once a send is refused, the rest is dropped and drain() asks the manager
 * for the scrollback from where the client stopped (a gap when that is gone too). */
static void on_term_output(void *userdata, uint64_t offset, const void *data, size_t n)
{
	struct term_ws *o = userdata;
	const uint8_t *p = data;
	int r;

	if (o->ended || o->blocked)
		return;
	if (!o->started) {
		o->started = true;
		o->next = offset;
	}
	if (!output_skip_seen(o->next, &offset, &p, &n))
		return;
	r = send_gap(o, offset); /* the agent dropped them */
	while (r >= 0 && n > 0) {
		size_t piece = MIN(n, (size_t)WS_TERM_CHUNK);

		r = ws_send_binary(o->conn, p, piece);
		if (r < 0)
			break;
		o->next += piece;
		p += piece;
		n -= piece;
	}
	if (r == -EAGAIN)
		o->blocked = true;
}

static json_t *exit_message(json_t *t)
{
	json_t *code = json_object_get(t, "exitCode"), *sig = json_object_get(t, "signal");

	return json_pack("{s:s,s:O,s:O,s:O}", "type", "exit", "exitCode", code ? code : json_null(),
			 "signal", sig ? sig : json_null(), "state",
			 json_object_get(t, "state") ?: json_null());
}

/* Once the terminal has ended: the gap still owed, then exit, then a normal close. Retried from
 * drain() while the queue has no room. */
static void try_finish(struct term_ws *o)
{
	_cleanup_free_ char *text = NULL;
	json_t *msg;
	int r;

	json_t *bytes;

	if (!o->final || o->ended)
		return;
	bytes = json_object_get(o->final, "outputBytes");
	if (o->started && json_is_integer(bytes) &&
	    send_gap(o, (uint64_t)json_integer_value(bytes)) < 0)
		return;
	msg = exit_message(o->final);
	text = msg ? json_dumps(msg, JSON_COMPACT) : NULL;
	json_decref(msg);
	r = text ? ws_send_text(o->conn, text, strlen(text)) : -ENOMEM;
	if (r == -EAGAIN)
		return;
	o->ended = true;
	(void)ws_close(o->conn, r < 0 ? WS_CLOSE_INTERNAL : WS_CLOSE_NORMAL, "terminal ended");
}

static void on_term_ended(void *userdata, json_t *terminal)
{
	struct term_ws *o = userdata;

	o->attach = NULL; /* gone once ended() is called */
	o->final = json_incref(terminal);
	try_finish(o);
}

static const struct terminal_attach_ops term_attach_ops = {
	.output = on_term_output,
	.ended = on_term_ended,
};

static void on_ws_drain(void *userdata, struct ws_conn *c)
{
	struct term_ws *o = userdata;

	o->blocked = false;
	if (o->attach && o->started)
		(void)manager_terminal_resync(o->attach, o->next);
	try_finish(o);
}

static void send_error(struct term_ws *o, const struct station_error *e)
{
	json_t *body = error_json_of(e);
	json_t *msg = body ? json_pack("{s:s,s:O}", "type", "error", "error",
				       json_object_get(body, "error")) :
			     NULL;
	_cleanup_free_ char *text = msg ? json_dumps(msg, JSON_COMPACT) : NULL;

	if (text)
		(void)ws_send_text(o->conn, text, strlen(text));
	json_decref(msg);
	json_decref(body);
}

/* {"type":"resize","cols":N,"rows":N}; anything else is answered with an error message. */
static void on_control(struct term_ws *o, const void *data, size_t n)
{
	struct station_error e = {};
	json_t *body = NULL;
	const char *type;
	unsigned cols, rows;
	int r = validate_body(data, n, false, &body, &e);

	if (r >= 0) {
		type = json_string_value(json_object_get(body, "type"));
		if (!type || strcmp(type, "resize") != 0)
			r = station_error_set(&e, -EINVAL, "type",
					      "unknown control message (want {\"type\":\"resize\","
					      "\"cols\":N,\"rows\":N})");
	}
	if (r >= 0)
		r = validate_terminal_size(body, "type", &cols, &rows, &e);
	json_decref(body);
	if (r < 0) {
		send_error(o, &e);
		return;
	}
	if (!o->read_only && o->attach)
		(void)manager_terminal_attach_resize(o->attach, cols, rows);
}

static void on_ws_message(void *userdata, struct ws_conn *c, enum ws_opcode op, const void *data,
			  size_t n)
{
	struct term_ws *o = userdata;

	if (op == WS_OP_TEXT)
		on_control(o, data, n);
	else if (op == WS_OP_BINARY && !o->read_only && o->attach)
		(void)manager_terminal_input(o->attach, data, n);
}

static void on_ws_closed(void *userdata, struct ws_conn *c, uint16_t code, const char *reason)
{
	struct term_ws *o = userdata;

	manager_terminal_detach(o->attach);
	json_decref(o->final);
	free(o);
}

static const struct ws_conn_ops term_conn_ops = {
	.message = on_ws_message,
	.drain = on_ws_drain,
	.closed = on_ws_closed,
};

static int parse_read_only(struct http_request *req, bool *ret, struct station_error *e)
{
	bool present;
	const char *v = http_request_query(req, "readOnly", &present);
	uint64_t flag = 0;
	int r = 0;

	if (present)
		r = validate_query_u64("readOnly", v, 0, 1, &flag, e);
	*ret = flag;
	return r;
}

/* ?offset=N: the output from N on instead of from the oldest kept byte; what is no longer kept
 * of it comes as one gap. N counts the terminal's output since it was created; beyond what an
 * ended terminal wrote is refused. */
static int resume_at(struct http_request *req, struct term_ws *o, struct station_error *e)
{
	const struct route_match *m = http_request_route(req);
	bool present;
	const char *v = http_request_query(req, "offset", &present);
	uint64_t from;
	json_t *t = NULL;
	int r;

	if (!present)
		return 0;
	r = validate_query_u64("offset", v, 0, UINT64_C(1) << 62, &from, e);
	if (r < 0)
		return r;
	if (manager_terminal_resync(o->attach, from) == -ENOTCONN) {
		/* ended: nothing kept, its byte count final */
		r = manager_terminal_get(http_request_manager(req), m->ws_id, m->run_id, &t, e);
		if (r < 0)
			return r;
		json_t *bytes = json_object_get(t, "outputBytes");
		uint64_t total = json_is_integer(bytes) ? (uint64_t)json_integer_value(bytes) : 0;

		json_decref(t);
		if (from > total)
			return station_error_set(e, -EINVAL, "offset",
						 "offset %" PRIu64 " is beyond the %" PRIu64
						 " bytes terminal \"%s\" wrote",
						 from, total, m->run_id);
	}
	o->started = true;
	o->next = from;
	return 0;
}

int api_terminal_attach(struct http_request *req)
{
	const struct route_match *m = http_request_route(req);
	struct manager *mgr = http_request_manager(req);
	struct station_error e = {};
	struct term_ws *o = calloc(1, sizeof *o);
	int r;

	if (!o)
		return http_reply_status(req, 500, NULL, "out of memory");
	r = parse_read_only(req, &o->read_only, &e);
	/* The attach checks the terminal exists (404 before any upgrade); its callbacks come
	 * later from the loop, by when the connection below exists and queues what they send. */
	if (r >= 0)
		r = manager_terminal_attach(mgr, m->ws_id, m->run_id, &term_attach_ops, o,
					    &o->attach, &e);
	if (r >= 0)
		r = resume_at(req, o, &e);
	if (r < 0) {
		manager_terminal_detach(o->attach);
		free(o);
		return http_reply_error(req, &e);
	}
	r = http_reply_websocket(req, &term_conn_ops, o, &o->conn);
	if (r < 0) {
		manager_terminal_detach(o->attach);
		free(o);
		return http_reply_status(req, 500, NULL, "could not upgrade to a WebSocket");
	}
	return 0;
}
