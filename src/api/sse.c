/* SPDX-License-Identifier: MIT */
#include "sse.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "basic/cleanup.h"
#include "basic/util.h"
#include "daemon/manager.h"
#include "api/output-cursor.h"
#include "api/router.h"
#include "api/validate.h"
#include "proto/agent-proto.h"

/* Raw bytes per output event (64 KiB once in base64), and MHD's read size. */
#define SSE_CHUNK_BYTES (48u * 1024)
#define SSE_BLOCK_BYTES (64u * 1024)
#define SSE_GAP_EVENT_MAX 128u
#define SSE_ID_LINE_MAX 64u

/* Offsets up to 2^62: far beyond any stream, and safe to add a chunk's length to. */
#define OUTPUT_OFFSET_MAX (UINT64_C(1) << 62)

/* "STDOUT:STDERR", each decimal. */
static int parse_offset_pair(const char *name, const char *v, uint64_t ret[2],
			     struct station_error *e)
{
	const char *colon = v ? strchr(v, ':') : NULL;
	char first[24];
	size_t n;

	if (!colon || (n = (size_t)(colon - v)) == 0 || n >= sizeof first)
		return station_error_set(
			e, -EINVAL, name,
			"%s must be STDOUT:STDERR, two byte offsets (as an event's "
			"id gives them), or use stdoutOffset and stderrOffset",
			name);
	memcpy(first, v, n);
	first[n] = '\0';
	if (validate_query_u64(name, first, 0, OUTPUT_OFFSET_MAX, &ret[0], e) < 0 ||
	    validate_query_u64(name, colon + 1, 0, OUTPUT_OFFSET_MAX, &ret[1], e) < 0)
		return station_error_set(e, -EINVAL, name,
					 "%s must be STDOUT:STDERR, two byte offsets of at most "
					 "2^62",
					 name);
	return 0;
}

int api_output_from(struct http_request *req, uint64_t ret[2], bool *ret_set,
		    struct station_error *e)
{
	static const char *const names[2] = { "stdoutOffset", "stderrOffset" };
	uint64_t from[2] = { 0, 0 };
	bool set = false, pair, present;
	const char *v;
	int r;

	v = http_request_query(req, "offset", &present);
	if (present) {
		r = parse_offset_pair("offset", v, from, e);
		if (r < 0)
			return r;
		set = true;
	}
	pair = set;
	for (int i = 0; i < 2; i++) {
		v = http_request_query(req, names[i], &present);
		if (!present)
			continue;
		if (pair)
			return station_error_set(e, -EINVAL, "offset",
						 "give either offset or stdoutOffset and "
						 "stderrOffset, not both");
		r = validate_query_u64(names[i], v, 0, OUTPUT_OFFSET_MAX, &from[i], e);
		if (r < 0)
			return r;
		set = true;
	}
	if (!set) {
		v = http_request_header(req, "Last-Event-ID");
		if (v && *v) {
			r = parse_offset_pair("Last-Event-ID", v, from, e);
			if (r < 0)
				return r;
			set = true;
		}
	}
	ret[0] = from[0];
	ret[1] = from[1];
	*ret_set = set;
	return 0;
}

struct sse {
	struct http_request *req;
	const struct sse_source *src;
	void *watch;
	uint64_t shown; /* what the watch shows (sse_source.shown), once behind */
	char *buf;
	size_t start, len, alloc;
	struct output_cursor streams[2];
	bool resumed;  /* the client gave an offset */
	bool behind;   /* a piece did not fit: nothing is taken until the watch starts again */
	bool done;     /* the manager has nothing more */
	bool finished; /* the end event is in buf */
	struct station_error rewatch_error; /* why watching again failed (err < 0) */
};

static int buf_reserve(struct sse *sse, size_t n)
{
	size_t want;
	char *p;

	if (sse->start > 0 && sse->start + sse->len + n > sse->alloc) {
		memmove(sse->buf, sse->buf + sse->start, sse->len);
		sse->start = 0;
	}
	if (sse->len + n <= sse->alloc)
		return 0;
	want = MAX(sse->len + n, MIN(MAX(sse->alloc * 2, 64u * 1024), SSE_BUFFER_BYTES));
	p = realloc(sse->buf, want);
	if (!p)
		return -ENOMEM;
	sse->buf = p;
	sse->alloc = want;
	return 0;
}

static int buf_printf(struct sse *sse, size_t max, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int buf_printf(struct sse *sse, size_t max, const char *fmt, ...)
{
	va_list ap;
	int n, r;

	r = buf_reserve(sse, max);
	if (r < 0)
		return r;
	va_start(ap, fmt);
	n = vsnprintf(sse->buf + sse->start + sse->len, max, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= max)
		return -ENOBUFS;
	sse->len += (size_t)n;
	return 0;
}

static int buf_append(struct sse *sse, const char *data, size_t n)
{
	int r = buf_reserve(sse, n);

	if (r < 0)
		return r;
	memcpy(sse->buf + sse->start + sse->len, data, n);
	sse->len += n;
	return 0;
}

/* Per stream, the offset a client that has everything written to the buffer so far resumes
 * at: a gap not yet announced is still owed to it. */
static uint64_t resume_offset(const struct output_cursor *c)
{
	return c->gap_bytes ? c->gap_offset : c->next;
}

/* The `id:` line that ends an event: a client sends it back as Last-Event-ID. */
static int append_id(struct sse *sse)
{
	return buf_printf(sse, SSE_ID_LINE_MAX, "id: %" PRIu64 ":%" PRIu64 "\n\n",
			  resume_offset(&sse->streams[0]), resume_offset(&sse->streams[1]));
}

static int append_gap(struct sse *sse, int idx)
{
	struct output_cursor *st = &sse->streams[idx];
	int r;

	if (st->gap_bytes == 0)
		return 0;
	size_t saved = sse->len;
	uint64_t gap_bytes = st->gap_bytes;

	r = buf_printf(sse, SSE_GAP_EVENT_MAX,
		       "event: gap\ndata: {\"stream\":\"%s\",\"offset\":%" PRIu64
		       ",\"bytes\":%" PRIu64 "}\n",
		       output_cursor_stream_name(idx), st->gap_offset, st->gap_bytes);
	if (r >= 0) {
		st->gap_bytes = 0;
		r = append_id(sse);
	}
	if (r < 0) {
		st->gap_bytes = gap_bytes;
		sse->len = saved;
	}
	return r;
}

static int append_output(struct sse *sse, int idx, uint64_t offset, const void *data, size_t n)
{
	_cleanup_free_ char *b64 = base64_encode(data, n);
	size_t saved = sse->len;
	int r;

	if (!b64)
		return -ENOMEM;
	r = buf_printf(sse, SSE_GAP_EVENT_MAX,
		       "event: output\ndata: {\"stream\":\"%s\",\"offset\":%" PRIu64 ",\"data\":\"",
		       output_cursor_stream_name(idx), offset);
	if (r >= 0)
		r = buf_append(sse, b64, strlen(b64));
	if (r >= 0)
		r = buf_append(sse, "\"}\n", 3);
	if (r >= 0)
		r = append_id(sse);
	if (r < 0)
		sse->len = saved;
	return r;
}

static size_t output_event_size(size_t n)
{
	return SSE_GAP_EVENT_MAX + (n + 2) / 3 * 4 + 3 + SSE_ID_LINE_MAX;
}

/* Sends one piece; false when it does not fit (the client is behind: the piece is left for
 * the next watch). A piece that fits but cannot be written (out of memory) is counted
 * missing. */
static bool take_piece(struct sse *sse, int idx, uint64_t offset, const uint8_t *data, size_t n)
{
	struct output_cursor *st = &sse->streams[idx];
	size_t need =
		output_event_size(n) + (st->gap_bytes ? SSE_GAP_EVENT_MAX + SSE_ID_LINE_MAX : 0);

	if (sse->len + need > SSE_BUFFER_BYTES)
		return false;
	st->next = offset + n;
	if (append_gap(sse, idx) < 0 || append_output(sse, idx, offset, data, n) < 0)
		output_cursor_miss(st, offset, n);
	return true;
}

static void on_output(void *userdata, int stream, uint64_t offset, const void *data, size_t n)
{
	struct sse *sse = userdata;
	const uint8_t *p = data;
	int idx = output_cursor_index(stream);

	if (sse->behind || idx < 0 || !output_cursor_take(&sse->streams[idx], &offset, &p, &n))
		return;
	while (n > 0) {
		size_t piece = MIN(n, (size_t)SSE_CHUNK_BYTES);

		if (!take_piece(sse, idx, offset, p, piece)) {
			sse->behind = true;
			if (sse->src->shown && sse->watch)
				sse->shown = sse->src->shown(sse->watch);
			break;
		}
		offset += piece;
		p += piece;
		n -= piece;
	}
	http_request_resume(sse->req);
}

static void on_done(void *userdata)
{
	struct sse *sse = userdata;

	sse->watch = NULL; /* gone once done() is called */
	sse->done = true;
	http_request_resume(sse->req);
}

static const struct run_watch_ops sse_watch_ops = {
	.output = on_output,
	.done = on_done,
};

/* The announcements still owed, then `end` with the run as it is now. */
static int sse_finish(struct sse *sse)
{
	struct station_error e = sse->rewatch_error;
	_cleanup_free_ char *text = NULL;
	const char *event = "end";
	json_t *run = NULL;
	int r;

	for (int i = 0; i < 2; i++) {
		r = append_gap(sse, i);
		if (r < 0)
			return r;
	}
	r = e.err < 0 ? e.err : sse->src->end(sse->req, &run, &e);
	if (r < 0) {
		event = "error";
		run = error_json(error_http_status(e.err), e.message, e.field);
	}
	text = run ? json_dumps(run, JSON_COMPACT) : NULL;
	json_decref(run);
	if (!text)
		return -ENOMEM;
	r = buf_printf(sse, 32, "event: %s\ndata: ", event);
	if (r >= 0)
		r = buf_append(sse, text, strlen(text));
	if (r >= 0)
		r = buf_append(sse, "\n\n", 2);
	if (r >= 0)
		sse->finished = true;
	return r;
}

/* The client has everything that fitted: a new watch from where it stands sends what is still
 * kept from there (done() may have come meanwhile; the new watch replays the rest) and tells
 * of what is not. A failure ends the stream with an error event. Callbacks never come from
 * inside the watch call. */
static void sse_rewatch(struct sse *sse)
{
	uint64_t from[2] = { sse->streams[0].next, sse->streams[1].next };
	void *old = sse->watch;

	sse->watch = NULL;
	sse->behind = false;
	sse->done = false;
	if (sse->src->watch(sse->req, sse->shown, from, &sse_watch_ops, sse, &sse->watch,
			    &sse->rewatch_error) < 0) {
		if (sse->rewatch_error.err >= 0)
			station_error_set(&sse->rewatch_error, -EIO, NULL,
					  "cannot watch the output again");
		sse->done = true;
	}
	if (old)
		sse->src->unwatch(old);
}

static ssize_t sse_read(void *cls, uint64_t pos, char *out, size_t max)
{
	struct http_request *req = cls;
	struct sse *sse = http_request_state(req);
	size_t n;

	if (!sse || http_request_gone(req))
		return MHD_CONTENT_READER_END_WITH_ERROR;
	if (sse->len == 0 && sse->behind)
		sse_rewatch(sse);
	if (sse->len == 0 && sse->done) {
		if (sse->finished)
			return MHD_CONTENT_READER_END_OF_STREAM;
		if (sse_finish(sse) < 0)
			return MHD_CONTENT_READER_END_WITH_ERROR;
	}
	if (sse->len == 0)
		/* Nothing to send: wait for the manager rather than be polled. */
		return http_sse_idle(req, out, max);
	n = MIN(max, sse->len);
	memcpy(out, sse->buf + sse->start, n);
	sse->start += n;
	sse->len -= n;
	if (sse->len == 0)
		sse->start = 0;
	return (ssize_t)n;
}

static void sse_free(void *userdata)
{
	struct sse *sse = userdata;

	if (sse->watch)
		sse->src->unwatch(sse->watch);
	free(sse->buf);
	free(sse);
}

static int sse_reply(struct http_request *req)
{
	struct MHD_Response *r;
	int ret;

	r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, SSE_BLOCK_BYTES, sse_read, req,
					      NULL);
	if (!r)
		return -ENOMEM;
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
	MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
	ret = http_reply_response(req, 200, r);
	MHD_destroy_response(r);
	return ret;
}

int sse_start_source(struct http_request *req, const struct sse_source *src, const char *label)
{
	struct station_error e = {};
	uint64_t from[2] = { 0, 0 };
	struct sse *sse;
	int r;

	if (http_request_hold(req) < 0)
		return http_reply_busy(req);
	sse = calloc(1, sizeof *sse);
	if (!sse)
		return http_reply_status(req, 500, NULL, "out of memory");
	sse->req = req;
	sse->src = src;
	r = api_output_from(req, from, &sse->resumed, &e);
	for (int i = 0; i < 2; i++)
		sse->streams[i].next = from[i];
	if (r >= 0)
		r = src->watch(req, 0, sse->resumed ? from : NULL, &sse_watch_ops, sse, &sse->watch,
			       &e);
	if (r < 0) {
		free(sse);
		return http_reply_error(req, &e);
	}
	http_request_set_state(req, sse, sse_free);
	/* A comment first: MHD sends the headers with the first bytes of the body, and a client
	 * should see the stream open before the run's first output. */
	r = buf_printf(sse, 160, ": %s\n\n", label);
	if (r >= 0)
		r = sse_reply(req);
	if (r < 0) {
		http_request_set_state(req, NULL, NULL);
		return http_reply_status(req, 500, NULL, "could not start the event stream");
	}
	return 0;
}

static int run_watch(struct http_request *req, uint64_t shown, const uint64_t *from,
		     const struct run_watch_ops *ops, void *userdata, void **ret,
		     struct station_error *e)
{
	const struct route_match *m = http_request_route(req);
	struct run_watch *w = NULL;
	int r = manager_run_watch(http_request_manager(req), m->ws_id, m->run_id, from, ops,
				  userdata, &w, e);

	if (r >= 0)
		*ret = w;
	return r;
}

static void run_unwatch(void *watch)
{
	manager_run_unwatch(watch);
}

static int run_end(struct http_request *req, json_t **ret, struct station_error *e)
{
	const struct route_match *m = http_request_route(req);

	return manager_run_get(http_request_manager(req), m->ws_id, m->run_id, ret, e);
}

static const struct sse_source run_source = {
	.watch = run_watch,
	.unwatch = run_unwatch,
	.end = run_end,
};

int sse_start(struct http_request *req, const char *ws_id, const char *run_id)
{
	char label[96];

	snprintf(label, sizeof label, "run %s", run_id);
	return sse_start_source(req, &run_source, label);
}
