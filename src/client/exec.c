/* SPDX-License-Identifier: MIT */
/* Runs: start a command, poll or long-poll it, cancel it, and follow its live output (GET
 * …/commands/{run}/output upgraded to a WebSocket; the server-sent event stream over an https://
 * endpoint, where the library has no WebSocket client). */

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "basic/cleanup.h"
#include "client-internal.h"
#include "domain/state.h"
#include "sse.h"
#include "ws-client.h"

/* Times a broken output stream is re-opened before following gives up. */
#define FOLLOW_RETRIES 3
/* The largest message a followed stream may send (an end message with its run or service). */
#define FOLLOW_MAX_MESSAGE (4u * 1024 * 1024)
/* One read from the socket. */
#define FOLLOW_READ_BYTES (256u * 1024)
/* The longest wait for bytes between two interrupt checks. */
#define FOLLOW_POLL_MS 1000
/* A binary output message: 1 byte stream, 8 bytes offset (big-endian), the data. */
#define FOLLOW_PREFIX 9u
/* Least time between two polls of station_run_wait(), should a server not hold its answer. */
#define POLL_MIN_USEC 50000

static const char b64_alphabet[] =
	"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static char *b64_encode(const unsigned char *p, size_t n)
{
	char *out = malloc((n + 2) / 3 * 4 + 1), *o = out;

	if (!out)
		return NULL;
	for (size_t i = 0; i < n; i += 3) {
		uint32_t v = (uint32_t)p[i] << 16;

		v |= i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0;
		v |= i + 2 < n ? p[i + 2] : 0;
		*o++ = b64_alphabet[v >> 18 & 63];
		*o++ = b64_alphabet[v >> 12 & 63];
		*o++ = i + 1 < n ? b64_alphabet[v >> 6 & 63] : '=';
		*o++ = i + 2 < n ? b64_alphabet[v & 63] : '=';
	}
	*o = '\0';
	return out;
}

static int b64_value(char ch)
{
	const char *p = ch ? strchr(b64_alphabet, ch) : NULL;

	return p ? (int)(p - b64_alphabet) : -1;
}

/* Decodes padded standard base64; the result is NUL-terminated for convenience. */
static int b64_decode(const char *s, size_t n, char **ret, size_t *ret_len)
{
	_cleanup_free_ char *out = NULL;
	size_t len = 0;

	if (n % 4 != 0)
		return -EPROTO;
	out = malloc(n / 4 * 3 + 1);
	if (!out)
		return -ENOMEM;
	for (size_t i = 0; i < n; i += 4) {
		int a = b64_value(s[i]), b = b64_value(s[i + 1]);
		int c = b64_value(s[i + 2]), d = b64_value(s[i + 3]);
		bool last = i + 4 == n;

		if (a < 0 || b < 0 || (c < 0 && !(last && s[i + 2] == '=' && s[i + 3] == '=')) ||
		    (d < 0 && !(last && s[i + 3] == '=')))
			return -EPROTO;
		out[len++] = (char)(a << 2 | b >> 4);
		if (c >= 0)
			out[len++] = (char)((b & 15) << 4 | c >> 2);
		if (c >= 0 && d >= 0)
			out[len++] = (char)((c & 3) << 6 | d);
	}
	out[len] = '\0';
	*ret = TAKE_PTR(out);
	*ret_len = len;
	return 0;
}

/* Length of the UTF-8 sequence starting at p (well-formed, not NUL), or 0. */
static size_t utf8_sequence(const unsigned char *p, size_t n)
{
	size_t len;
	uint32_t cp;

	if (p[0] == 0)
		return 0;
	if (p[0] < 0x80)
		return 1;
	if (p[0] >= 0xc2 && p[0] <= 0xdf)
		len = 2, cp = p[0] & 0x1f;
	else if (p[0] >= 0xe0 && p[0] <= 0xef)
		len = 3, cp = p[0] & 0x0f;
	else if (p[0] >= 0xf0 && p[0] <= 0xf4)
		len = 4, cp = p[0] & 0x07;
	else
		return 0;
	if (len > n)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (p[i] & 0x3f);
	}
	if ((len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
	    (len == 4 && (cp < 0x10000 || cp > 0x10ffff)))
		return 0;
	return len;
}

static bool utf8_is_text(const void *data, size_t n)
{
	const unsigned char *p = data;

	for (size_t i = 0, len; i < n; i += len) {
		len = utf8_sequence(p + i, n - i);
		if (len == 0)
			return false;
	}
	return true;
}

static int exec_put_stdin(struct station_client *c, json_t *o, const void *data, size_t n)
{
	_cleanup_free_ char *b64 = NULL;

	if (!data)
		return 0;
	if (utf8_is_text(data, n)) {
		json_object_set_new(o, "stdin", json_stringn(data, n));
		return 0;
	}
	b64 = b64_encode(data, n);
	if (!b64)
		return client_error(c, -ENOMEM, "out of memory");
	json_object_set_new(o, "stdin", json_string(b64));
	json_object_set_new(o, "stdinEncoding", json_string("base64"));
	return 0;
}

static int exec_body(struct station_client *c, const struct station_exec_options *o, json_t **ret)
{
	_cleanup_json_ json_t *body = json_object();
	int r;

	if (!body)
		return client_error(c, -ENOMEM, "out of memory");
	json_object_set_new(body, "command", json_string(o->command));
	if (o->cwd)
		json_object_set_new(body, "cwd", json_string(o->cwd));
	if (o->timeout_ms > 0)
		json_object_set_new(body, "timeoutMs", json_integer((json_int_t)o->timeout_ms));
	if (o->max_output_bytes > 0)
		json_object_set_new(body, "maxOutputBytes",
				    json_integer((json_int_t)o->max_output_bytes));
	r = client_put_env(c, body, o->env);
	if (r < 0)
		return r;
	r = exec_put_stdin(c, body, o->stdin_data, o->stdin_size);
	if (r < 0)
		return r;
	*ret = TAKE_PTR(body);
	return 0;
}

int station_exec_start(struct station_client *c, const char *ws,
		       const struct station_exec_options *opts, json_t **ret)
{
	CLIENT_ROUTE(c, ws);
	_cleanup_json_ json_t *body = NULL;
	_cleanup_free_ char *path = NULL;
	char suffix[64] = "/commands";
	int r;

	if (!opts || !opts->command)
		return client_error(c, -EINVAL, "no command to run");
	if (opts->wait_ms > 0)
		snprintf(suffix, sizeof(suffix), "/commands?waitMs=%llu",
			 (unsigned long long)MIN(opts->wait_ms, (uint64_t)STATION_MAX_WAIT_MS));
	r = client_path(c, ws, NULL, suffix, &path);
	if (r < 0)
		return r;
	r = exec_body(c, opts, &body);
	if (r < 0)
		return r;
	return client_create(c, path, body, opts->idempotency_key, ret);
}

/* client_path() for one run: a run id is required. */
static int run_path(struct station_client *c, const char *ws, const char *run, const char *suffix,
		    char **ret)
{
	if (!run)
		return client_error(c, -EINVAL, "no run id given");
	return client_path(c, ws, run, suffix, ret);
}

int station_run_get(struct station_client *c, const char *ws, const char *run, uint64_t wait_ms,
		    json_t **ret)
{
	CLIENT_ROUTE(c, ws);
	_cleanup_free_ char *path = NULL;
	char suffix[48] = "";
	int r;

	if (wait_ms > 0)
		snprintf(suffix, sizeof(suffix), "?waitMs=%llu",
			 (unsigned long long)MIN(wait_ms, (uint64_t)STATION_MAX_WAIT_MS));
	r = run_path(c, ws, run, suffix, &path);
	if (r < 0)
		return r;
	return station_request_json(c, "GET", path, NULL, ret);
}

static uint64_t now_usec(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

static void sleep_usec(uint64_t usec)
{
	struct timespec ts = { .tv_sec = usec / 1000000, .tv_nsec = usec % 1000000 * 1000 };

	nanosleep(&ts, NULL);
}

/* Milliseconds from now until deadline (UINT64_MAX: none), for one long-poll. */
static uint64_t wait_slice_ms(uint64_t deadline, uint64_t now)
{
	if (deadline == UINT64_MAX)
		return STATION_MAX_WAIT_MS;
	if (deadline <= now)
		return 0;
	return MIN((deadline - now + 999) / 1000, (uint64_t)STATION_MAX_WAIT_MS);
}

int station_run_wait(struct station_client *c, const char *ws, const char *run, int64_t timeout_ms,
		     json_t **ret)
{
	CLIENT_ROUTE(c, ws);
	uint64_t deadline = timeout_ms < 0 ? UINT64_MAX : now_usec() + (uint64_t)timeout_ms * 1000;

	for (;;) {
		_cleanup_json_ json_t *doc = NULL;
		uint64_t start = now_usec();
		int r;

		r = station_run_get(c, ws, run, wait_slice_ms(deadline, start), &doc);
		if (r < 0)
			return r;
		if (station_run_is_terminal(doc) || now_usec() >= deadline) {
			if (ret)
				*ret = TAKE_PTR(doc);
			return 0;
		}
		if (now_usec() - start < POLL_MIN_USEC)
			sleep_usec(POLL_MIN_USEC);
	}
}

int station_run_list(struct station_client *c, const char *ws, unsigned limit, json_t **ret)
{
	CLIENT_ROUTE(c, ws);
	_cleanup_json_ json_t *doc = NULL;
	_cleanup_free_ char *path = NULL;
	char suffix[48] = "/commands";
	json_t *list;
	int r;

	if (limit > 0)
		snprintf(suffix, sizeof(suffix), "/commands?limit=%u", limit);
	r = client_path(c, ws, NULL, suffix, &path);
	if (r < 0)
		return r;
	r = station_request_json(c, "GET", path, NULL, &doc);
	if (r < 0)
		return r;
	list = json_object_get(doc, "commands");
	if (!json_is_array(list))
		return client_error(c, -EPROTO, "%s answered without \"commands\"",
				    station_client_endpoint(c));
	*ret = json_incref(list);
	return 0;
}

int station_run_cancel(struct station_client *c, const char *ws, const char *run, json_t **ret)
{
	CLIENT_ROUTE(c, ws);
	_cleanup_free_ char *path = NULL;
	int r;

	r = run_path(c, ws, run, "/cancel", &path);
	if (r < 0)
		return r;
	return station_request_json(c, "POST", path, NULL, ret);
}

bool station_run_is_terminal(const json_t *run)
{
	const char *status = json_string_value(json_object_get(run, "status"));

	return status && run_status_from_string(status) != RUN_RUNNING;
}

const char *station_stream_to_string(enum station_stream s)
{
	return s == STATION_STREAM_STDERR ? "stderr" : "stdout";
}

static int stream_from_string(const char *s, enum station_stream *ret)
{
	if (s && strcmp(s, "stdout") == 0)
		*ret = STATION_STREAM_STDOUT;
	else if (s && strcmp(s, "stderr") == 0)
		*ret = STATION_STREAM_STDERR;
	else
		return -EPROTO;
	return 0;
}

int station_run_output(const json_t *run, enum station_stream s, bool tail, char **ret,
		       size_t *ret_len)
{
	const char *encoding = json_string_value(json_object_get(run, "encoding"));
	char key[16];
	json_t *part;
	char *text;
	size_t n;
	int r;

	snprintf(key, sizeof(key), "%s%s", station_stream_to_string(s), tail ? "Tail" : "");
	part = json_object_get(run, key);
	if (!part || json_is_null(part)) {
		*ret = NULL;
		*ret_len = 0;
		return 0;
	}
	if (!json_is_string(part))
		return -EPROTO;
	n = json_string_length(part);
	if (encoding && strcmp(encoding, "base64") == 0) {
		r = b64_decode(json_string_value(part), n, ret, ret_len);
		return r < 0 ? r : 1;
	}
	text = malloc(n + 1);
	if (!text)
		return -ENOMEM;
	memcpy(text, json_string_value(part), n + 1);
	*ret = text;
	*ret_len = n;
	return 1;
}

/* ---- Following output ---------------------------------------------------------------------- */

struct follow {
	struct station_client *c;
	const struct station_follow_callbacks *cb;
	void *userdata;
	const char *what; /* "run r-…", "service web": names the stream in errors */
	struct sse_parser sse;
	uint64_t seen[2]; /* per stream: bytes delivered or announced missing */
	json_t *end;	  /* the terminal run, once its event came */
	bool done;	  /* the end event was handled; the transfer is being stopped */
	bool any_end;	  /* any object ends the stream, not only a terminal run */
	int event_r;	  /* what the last event's handling returned */
};

static int follow_protocol_error(struct follow *f, const char *what)
{
	return client_error(f->c, -EPROTO, "bad output stream from %s: %s",
			    station_client_endpoint(f->c), what);
}

/* Reads the "stream" and "offset" every output and gap event carries. */
static int follow_position(struct follow *f, json_t *doc, enum station_stream *ret_stream,
			   uint64_t *ret_offset)
{
	json_t *offset = json_object_get(doc, "offset");

	if (stream_from_string(json_string_value(json_object_get(doc, "stream")), ret_stream) < 0)
		return follow_protocol_error(f, "event without a valid \"stream\"");
	if (!json_is_integer(offset) || json_integer_value(offset) < 0)
		return follow_protocol_error(f, "event without a valid \"offset\"");
	*ret_offset = (uint64_t)json_integer_value(offset);
	return 0;
}

/* Announces bytes [from, to) of a stream as missing, unless already seen. */
static int follow_announce_gap(struct follow *f, enum station_stream s, uint64_t from, uint64_t to)
{
	from = MAX(from, f->seen[s]);
	if (to <= from)
		return 0;
	f->seen[s] = to;
	return f->cb->on_gap ? f->cb->on_gap(s, from, to - from, f->userdata) : 0;
}

/* n bytes of stream s at offset: what lies between the last byte seen and offset is announced
 * missing, what was seen already (replayed after a reconnect) is skipped. */
static int follow_bytes(struct follow *f, enum station_stream s, uint64_t offset, const char *data,
			size_t n)
{
	uint64_t skip;
	int r;

	if (n > UINT64_MAX - offset)
		return follow_protocol_error(f, "output past the largest offset");
	r = follow_announce_gap(f, s, f->seen[s], offset);
	if (r < 0)
		return r;
	if (offset + n <= f->seen[s])
		return 0;
	skip = f->seen[s] - offset;
	f->seen[s] = offset + n;
	if (!f->cb->on_output)
		return 0;
	return f->cb->on_output(s, offset + skip, data + skip, n - skip, f->userdata);
}

static int follow_output(struct follow *f, json_t *doc)
{
	_cleanup_free_ char *data = NULL;
	json_t *b64 = json_object_get(doc, "data");
	enum station_stream s;
	uint64_t offset;
	size_t n;
	int r;

	r = follow_position(f, doc, &s, &offset);
	if (r < 0)
		return r;
	if (!json_is_string(b64) ||
	    b64_decode(json_string_value(b64), json_string_length(b64), &data, &n) < 0)
		return follow_protocol_error(f, "output event without valid base64 \"data\"");
	return follow_bytes(f, s, offset, data, n);
}

static int follow_gap(struct follow *f, json_t *doc)
{
	json_t *bytes = json_object_get(doc, "bytes");
	enum station_stream s;
	uint64_t offset, n;
	int r;

	r = follow_position(f, doc, &s, &offset);
	if (r < 0)
		return r;
	if (!json_is_integer(bytes) || json_integer_value(bytes) < 0)
		return follow_protocol_error(f, "gap event without a valid \"bytes\"");
	n = (uint64_t)json_integer_value(bytes);
	if (n > UINT64_MAX - offset)
		return follow_protocol_error(f, "gap past the largest offset");
	return follow_announce_gap(f, s, offset, offset + n);
}

static int follow_end(struct follow *f, json_t *doc)
{
	if (!json_is_object(doc) || (!f->any_end && !station_run_is_terminal(doc)))
		return follow_protocol_error(f, "end event without a finished run");
	f->end = json_incref(doc);
	return f->cb->on_end ? f->cb->on_end(doc, f->userdata) : 0;
}

/* Sentinel returned to the transport once the end event was handled. */
#define FOLLOW_DONE (-ECANCELED)

/* After an event was handled: FOLLOW_DONE once the end came. */
static int follow_handled(struct follow *f, int r)
{
	if (r == 0 && f->end) {
		f->done = true;
		r = FOLLOW_DONE;
	}
	return f->event_r = r;
}

/* ---- over WebSocket: binary output messages, text gap / end / error messages ---------------- */

/* {"type":"error","error":{"code","message"}}: the server could not end the stream (the run
 * was deleted meanwhile). */
static int follow_ws_error(struct follow *f, json_t *doc)
{
	json_t *e = json_object_get(doc, "error");
	const char *code = json_string_value(json_object_get(e, "code"));
	const char *msg = json_string_value(json_object_get(e, "message"));
	int err = code && strcmp(code, "not_found") == 0 ? -ENOENT : -EIO;

	client_error(f->c, err, "output stream of %s: %s", f->what,
		     msg ? msg : "the server reported an error");
	snprintf(f->c->error_code, sizeof f->c->error_code, "%s", code ? code : "");
	return err;
}

static int follow_ws_text(struct follow *f, const char *data, size_t n)
{
	_cleanup_json_ json_t *doc = NULL;
	json_error_t err;
	const char *type;
	json_t *end;

	doc = json_loadb(data, n, 0, &err);
	if (!doc)
		return follow_protocol_error(f, err.text);
	type = json_string_value(json_object_get(doc, "type"));
	if (!type)
		return follow_protocol_error(f, "text message without a \"type\"");
	if (strcmp(type, "gap") == 0)
		return follow_gap(f, doc);
	if (strcmp(type, "error") == 0)
		return follow_ws_error(f, doc);
	if (strcmp(type, "end") != 0)
		return 0; /* for newer clients */
	end = json_object_get(doc, "run");
	if (!end && f->any_end)
		end = json_object_get(doc, "service");
	if (!end && f->any_end)
		end = json_object_get(doc, "execution");
	return follow_end(f, end);
}

static int follow_ws_binary(struct follow *f, const uint8_t *data, size_t n)
{
	uint64_t offset = 0;

	if (n < FOLLOW_PREFIX)
		return follow_protocol_error(f, "binary message shorter than its 9-byte prefix");
	if (data[0] != 1 && data[0] != 2)
		return follow_protocol_error(f, "binary message of an unknown stream");
	for (unsigned i = 1; i < FOLLOW_PREFIX; i++)
		offset = offset << 8 | data[i];
	return follow_bytes(f, data[0] == 2 ? STATION_STREAM_STDERR : STATION_STREAM_STDOUT, offset,
			    (const char *)data + FOLLOW_PREFIX, n - FOLLOW_PREFIX);
}

static int follow_ws_message(void *userdata, enum ws_opcode op, const void *data, size_t n)
{
	struct follow *f = userdata;

	f->event_r = 0;
	if (f->done)
		return FOLLOW_DONE;
	return follow_handled(f, op == WS_OP_BINARY ? follow_ws_binary(f, data, n) :
						      follow_ws_text(f, data, n));
}

/* One connection: 0 once the end was handled, -ECONNRESET when the stream broke before it (the
 * caller may connect again), any other error as is. */
static int follow_ws_once(struct follow *f, const char *path, void *buf)
{
	struct station_client *c = f->c;
	struct client_ws *w = NULL;
	int r;

	r = client_ws_open(c, path, FOLLOW_MAX_MESSAGE, &w);
	if (r < 0)
		return r;
	w->on_message = follow_ws_message;
	w->userdata = f;
	for (;;) {
		if (c->interrupt && c->interrupt(c->interrupt_userdata)) {
			r = client_error(c, -EINTR, "interrupted");
			break;
		}
		f->event_r = 0;
		r = client_ws_pump(w, buf, FOLLOW_READ_BYTES, FOLLOW_POLL_MS);
		/* Silent past the server's ping interval and the answer deadline: it stopped. */
		if (r == 0 &&
		    client_ws_now_ms() - w->last_input >= c->timeout_ms + CLIENT_WS_PING_MS) {
			r = client_timed_out(c, c->timeout_ms + CLIENT_WS_PING_MS);
			break;
		}
		/* A signal woke the wait (the check above decides), unless a callback said -EINTR. */
		if (r != 0 && (r != -EINTR || f->event_r == r))
			break;
	}
	if (r == FOLLOW_DONE && f->done)
		r = 0;
	else if (r == 1 && w->closed)
		r = client_error(c, -ECONNRESET,
				 "output stream of %s ended early (the server closed it: %u%s%s)",
				 f->what, w->close_code, w->close_reason[0] ? " " : "",
				 w->close_reason);
	else if (r == 1)
		r = client_error(c, -ECONNRESET, "output stream of %s ended early", f->what);
	else if (r == -EPROTO && f->event_r != r)
		r = follow_protocol_error(f, client_ws_protocol_error(w));
	else if (r < 0 && r != -EINTR && r != -ETIMEDOUT && f->event_r != r)
		r = client_error(c, -ECONNRESET, "output stream of %s broke: %s", f->what,
				 strerror(-r));
	client_ws_free(w, r == -EPROTO ? WS_CLOSE_PROTOCOL_ERROR : WS_CLOSE_NORMAL, NULL);
	return r;
}

/* ---- over server-sent events (https:// endpoints) ---------------------------------------- */

static int follow_event(const char *event, const char *data, size_t len, void *userdata)
{
	struct follow *f = userdata;
	_cleanup_json_ json_t *doc = NULL;
	json_error_t err;
	int r = 0;

	doc = json_loadb(data, len, JSON_ALLOW_NUL, &err);
	if (!doc)
		return f->event_r = follow_protocol_error(f, err.text);
	if (strcmp(event, "output") == 0)
		r = follow_output(f, doc);
	else if (strcmp(event, "gap") == 0)
		r = follow_gap(f, doc);
	else if (strcmp(event, "end") == 0)
		r = follow_end(f, doc);
	/* other events are for newer clients */
	return follow_handled(f, r);
}

static int follow_data(const void *data, size_t len, void *userdata)
{
	struct follow *f = userdata;
	int r;

	f->event_r = 0;
	r = sse_feed(&f->sse, data, len);
	if (r < 0 && r != f->event_r)
		return follow_protocol_error(f, r == -E2BIG ? "event too large" : "out of memory");
	return r;
}

static int follow_sse_once(struct follow *f, const char *path)
{
	int r = station_request_stream(f->c, path, follow_data, f);

	if (f->done || (r == 0 && f->end))
		return 0;
	if (r == 0)
		return client_error(f->c, -ECONNRESET, "output stream of %s ended early", f->what);
	return r;
}

int station_run_follow(struct station_client *c, const char *ws, const char *run,
		       const struct station_follow_callbacks *cb, void *userdata, json_t **ret)
{
	CLIENT_ROUTE(c, ws);
	_cleanup_free_ char *path = NULL;
	char what[96];
	int r;

	r = run_path(c, ws, run, "/output", &path);
	if (r < 0)
		return r;
	snprintf(what, sizeof(what), "run %s", run);
	return client_follow(c, path, what, false, cb, userdata, ret);
}

int client_follow(struct station_client *c, const char *path, const char *what, bool any_end,
		  const struct station_follow_callbacks *cb, void *userdata, json_t **ret)
{
	static const struct station_follow_callbacks none = {};
	struct follow f = { .c = c,
			    .cb = cb ? cb : &none,
			    .userdata = userdata,
			    .what = what,
			    .any_end = any_end };
	/* The library speaks WebSocket over its own connections: a unix socket or http://. */
	bool sse = !c->socket_path && strncmp(c->base_url, "http://", 7) != 0;
	_cleanup_free_ void *buf = sse ? NULL : malloc(FOLLOW_READ_BYTES);
	int r;

	if (!sse && !buf)
		return client_error(c, -ENOMEM, "out of memory");
	f.sse.on_event = follow_event;
	f.sse.userdata = &f;
	for (unsigned attempt = 0;; attempt++) {
		_cleanup_free_ char *resume = NULL;
		uint64_t before = f.seen[0] + f.seen[1];

		/* Again: from where this watcher stands; the server announces what it no longer
		 * keeps of that as one gap per stream. */
		if (attempt > 0 &&
		    asprintf(&resume, "%s%cstdoutOffset=%" PRIu64 "&stderrOffset=%" PRIu64, path,
			     strchr(path, '?') ? '&' : '?', f.seen[0], f.seen[1]) < 0) {
			r = client_error(c, -ENOMEM, "out of memory");
			break;
		}
		r = sse ? follow_sse_once(&f, resume ? resume : path) :
			  follow_ws_once(&f, resume ? resume : path, buf);
		if (r != -ECONNRESET)
			break;
		/* Bounded: FOLLOW_RETRIES connections in a row that bring nothing new. */
		if (f.seen[0] + f.seen[1] > before)
			attempt = 0;
		if (attempt == FOLLOW_RETRIES)
			break;
		sse_reset(&f.sse);
		sleep_usec(100000 * (attempt + 1));
	}
	sse_done(&f.sse);
	if (r == 0 && ret)
		*ret = json_incref(f.end);
	json_decref(f.end);
	return r;
}
