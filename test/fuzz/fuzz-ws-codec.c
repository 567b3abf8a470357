/* SPDX-License-Identifier: MIT */
/* The WebSocket frame parser (src/proto/ws-codec.c) in both roles: a server reading a hostile
 * client's masked frames (the API's ws-conn.c) and a client reading a hostile server's frames
 * (the client library's ws-client.c).
 *
 * Input: one byte of settings (bit 0: the role; bits 1-2: the limits, small ones reach the
 * 1009 path from the header), then the stream. The stream is parsed twice, once in one call and
 * once cut into pieces whose sizes come from the stream itself; both must produce the same
 * events and the same end, whatever the cut (a frame's meaning never depends on how its bytes
 * arrive). Every byte a callback is given is read, so a pointer past the input is caught.
 *
 * fuzz-max-len: 8192 */

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "proto/ws-codec.h"

/* What one parse produced: a running hash of every event, in order. */
struct trace {
	uint64_t hash;
	unsigned events;
	uint64_t max_message;
};

static void trace_mix(struct trace *t, const void *data, size_t n)
{
	const uint8_t *p = data;
	for (size_t i = 0; i < n; i++)
		t->hash = (t->hash ^ p[i]) * 1099511628211ull; /* FNV-1a */
}

static void trace_event(struct trace *t, unsigned kind, unsigned op, const void *data, size_t n)
{
	uint64_t head[3] = { kind, op, n };
	trace_mix(t, head, sizeof(head));
	trace_mix(t, data, n);
	t->events++;
}

static int on_message(void *userdata, enum ws_opcode op, const void *data, size_t n)
{
	struct trace *t = userdata;
	if (op != WS_OP_TEXT && op != WS_OP_BINARY)
		abort();
	if (n > t->max_message)
		abort();
	if (op == WS_OP_TEXT) {
		struct ws_utf8 u = { 0 };
		if (!ws_utf8_feed(&u, data, n) || !ws_utf8_complete(&u))
			abort(); /* the parser promised valid UTF-8 */
	}
	trace_event(t, 1, op, data, n);
	return 0;
}

static int on_control(void *userdata, enum ws_opcode op, const void *data, size_t n)
{
	struct trace *t = userdata;
	if ((op != WS_OP_PING && op != WS_OP_PONG) || n > WS_CONTROL_MAX)
		abort();
	trace_event(t, 2, op, data, n);
	return 0;
}

static int on_close(void *userdata, uint16_t code, const char *reason)
{
	struct trace *t = userdata;
	size_t n = strlen(reason);
	if (n > WS_CONTROL_MAX - 2)
		abort();
	if (code != WS_CLOSE_NO_STATUS && !ws_close_code_valid(code))
		abort();
	trace_event(t, 3, code, reason, n);
	return 0;
}

static const struct ws_parser_ops ops = {
	.message = on_message,
	.control = on_control,
	.close = on_close,
};

/* Parses data cut into pieces (piece sizes from the data's bytes, 1-64) or in one call. */
static int parse(enum ws_role role, uint64_t max_frame, uint64_t max_message, const uint8_t *data,
		 size_t n, bool cut, struct trace *t, uint16_t *ret_code)
{
	struct ws_parser *p = NULL;
	int r;

	*t = (struct trace){ .hash = 14695981039346656037ull, .max_message = max_message };
	if (ws_parser_new(role, max_frame, max_message, &ops, t, &p) < 0)
		abort();
	if (!cut) {
		r = ws_parser_feed(p, data, n);
	} else {
		size_t off = 0;
		r = 0;
		while (off < n && r == 0) {
			size_t piece = (size_t)(data[off] % 64) + 1;
			if (piece > n - off)
				piece = n - off;
			/* Its own allocation: a read past the piece is a read past a heap block. */
			uint8_t *copy = malloc(piece);
			if (!copy)
				abort();
			memcpy(copy, data + off, piece);
			r = ws_parser_feed(p, copy, piece);
			free(copy);
			off += piece;
		}
	}
	const char *reason = NULL;
	*ret_code = ws_parser_error(p, &reason);
	if (r == -EBADMSG && (*ret_code == 0 || !reason))
		abort(); /* a refusal always says why */
	if (r != 0 && r != -EBADMSG)
		abort(); /* the callbacks never fail */
	ws_parser_free(p);
	return r;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const uint64_t limits[4][2] = {
		{ 1u << 20, 1u << 20 }, /* the API's defaults are in this range */
		{ 125, 125 },
		{ 16, 64 },
		{ 64, 16 },
	};
	if (size < 1)
		return 0;
	enum ws_role role = (data[0] & 1) ? WS_ROLE_CLIENT : WS_ROLE_SERVER;
	const uint64_t *lim = limits[(data[0] >> 1) & 3];
	data++;
	size--;

	struct trace whole, pieces;
	uint16_t code_whole, code_pieces;
	int r_whole = parse(role, lim[0], lim[1], data, size, false, &whole, &code_whole);
	int r_pieces = parse(role, lim[0], lim[1], data, size, true, &pieces, &code_pieces);
	if (r_whole != r_pieces || code_whole != code_pieces || whole.hash != pieces.hash ||
	    whole.events != pieces.events)
		abort();
	return 0;
}
