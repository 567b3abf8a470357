/* SPDX-License-Identifier: MIT */
/* The RFC 6455 codec: handshake key, frame headers, masking, UTF-8, the frame parser. Pure: no
 * I/O. The connection that drives it on a socket is ws-conn.c. */
#include "proto/ws-codec.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "basic/cleanup.h"
#include "basic/util.h"

#define WS_GUID "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
#define WS_KEY_BYTES 16u

int ws_accept_key(const char *key, char ret[WS_ACCEPT_SIZE])
{
	_cleanup_free_ uint8_t *raw = NULL;
	_cleanup_free_ char *b64 = NULL;
	struct sha1_ctx c;
	uint8_t digest[20];
	size_t n, len = key ? strlen(key) : 0;

	/* Exactly 24 characters: base64_decode() is strict about padding and alphabet. */
	if (len != 24 || base64_decode(key, len, &raw, &n) < 0 || n != WS_KEY_BYTES)
		return -EINVAL;
	sha1_init(&c);
	sha1_update(&c, key, len);
	sha1_update(&c, WS_GUID, strlen(WS_GUID));
	sha1_final(&c, digest);
	b64 = base64_encode(digest, sizeof digest);
	if (!b64)
		return -ENOMEM;
	memcpy(ret, b64, WS_ACCEPT_SIZE);
	return 0;
}

bool ws_close_code_valid(unsigned code)
{
	return (code >= 1000 && code <= 1003) || (code >= 1007 && code <= 1014) ||
	       (code >= 3000 && code <= 4999);
}

size_t ws_frame_header(uint8_t out[WS_HEADER_MAX], enum ws_opcode op, bool fin, uint64_t len,
		       const uint8_t *mask_key)
{
	size_t i = 2;

	out[0] = (uint8_t)((fin ? 0x80 : 0) | (op & 0x0f));
	if (len < 126) {
		out[1] = (uint8_t)len;
	} else if (len <= 0xffff) {
		out[1] = 126;
		out[2] = (uint8_t)(len >> 8);
		out[3] = (uint8_t)len;
		i = 4;
	} else {
		out[1] = 127;
		for (int k = 0; k < 8; k++)
			out[2 + k] = (uint8_t)(len >> (56 - 8 * k));
		i = 10;
	}
	if (mask_key) {
		out[1] |= 0x80;
		memcpy(out + i, mask_key, 4);
		i += 4;
	}
	return i;
}

void ws_mask(void *data, size_t n, const uint8_t key[4], uint64_t offset)
{
	uint8_t *p = data;

	for (size_t i = 0; i < n; i++)
		p[i] ^= key[(offset + i) & 3];
}

size_t ws_close_payload(uint8_t out[WS_CONTROL_MAX], uint16_t code, const char *reason)
{
	size_t n = reason ? strlen(reason) : 0;

	if (code == 0)
		return 0;
	out[0] = (uint8_t)(code >> 8);
	out[1] = (uint8_t)code;
	if (n > WS_CONTROL_MAX - 2) {
		n = WS_CONTROL_MAX - 2;
		/* Never cut a character: back off to the start of the one at the cut. */
		while (n > 0 && ((uint8_t)reason[n] & 0xc0) == 0x80)
			n--;
	}
	if (n > 0)
		memcpy(out + 2, reason, n);
	return 2 + n;
}

/* ---- UTF-8 ---------------------------------------------------------------------------------- */

/* The lead byte's continuation count and the range of its first continuation byte, which is
 * where overlongs (E0, F0), surrogates (ED) and code points over U+10FFFF (F4) are told. */
static bool utf8_lead(struct ws_utf8 *u, uint8_t b)
{
	u->lo = 0x80;
	u->hi = 0xbf;
	if (b >= 0xc2 && b <= 0xdf)
		u->need = 1;
	else if (b >= 0xe0 && b <= 0xef)
		u->need = 2;
	else if (b >= 0xf0 && b <= 0xf4)
		u->need = 3;
	else
		return false;
	if (b == 0xe0)
		u->lo = 0xa0;
	else if (b == 0xed)
		u->hi = 0x9f;
	else if (b == 0xf0)
		u->lo = 0x90;
	else if (b == 0xf4)
		u->hi = 0x8f;
	return true;
}

bool ws_utf8_feed(struct ws_utf8 *u, const void *data, size_t n)
{
	const uint8_t *p = data;

	for (size_t i = 0; i < n; i++) {
		uint8_t b = p[i];

		if (u->need == 0) {
			if (b < 0x80)
				continue;
			if (!utf8_lead(u, b))
				return false;
			continue;
		}
		if (b < u->lo || b > u->hi)
			return false;
		u->need--;
		u->lo = 0x80;
		u->hi = 0xbf;
	}
	return true;
}

bool ws_utf8_complete(const struct ws_utf8 *u)
{
	return u->need == 0;
}

/* ---- the parser ----------------------------------------------------------------------------- */

enum parse_state {
	PARSE_HEADER,
	PARSE_PAYLOAD,
	PARSE_CLOSED, /* a close frame arrived: nothing more is looked at */
	PARSE_FAILED,
};

struct ws_parser {
	enum ws_role role;
	uint64_t max_frame, max_message;
	const struct ws_parser_ops *ops;
	void *userdata;
	enum parse_state state;

	uint8_t hdr[WS_HEADER_MAX];
	size_t hdr_len, hdr_need, len_end; /* len_end: where the length bytes end */

	/* the frame being read */
	enum ws_opcode op;
	bool fin, masked;
	uint8_t key[4];
	uint64_t len, pos;
	uint8_t control[WS_CONTROL_MAX];

	/* the message being put together; msg_op 0 when none */
	enum ws_opcode msg_op;
	uint8_t *msg;
	size_t msg_len, msg_alloc;
	struct ws_utf8 utf8;

	uint16_t error;
	const char *error_reason;
};

/* Beyond this, a message buffer is not kept around for the next message. A client (the library
 * following output: server messages of 64 KiB + 9) keeps more, so a message split across two
 * reads does not cost an allocation. */
#define PARSER_KEEP_BYTES (64u * 1024)
#define PARSER_KEEP_BYTES_CLIENT (256u * 1024)

int ws_parser_new(enum ws_role role, uint64_t max_frame, uint64_t max_message,
		  const struct ws_parser_ops *ops, void *userdata, struct ws_parser **ret)
{
	struct ws_parser *p;

	if (max_frame == 0 || max_message == 0 || max_message > SIZE_MAX / 2)
		return -EINVAL;
	p = calloc(1, sizeof *p);
	if (!p)
		return -ENOMEM;
	p->role = role;
	p->max_frame = max_frame;
	p->max_message = max_message;
	p->ops = ops;
	p->userdata = userdata;
	p->hdr_need = 2;
	*ret = p;
	return 0;
}

void ws_parser_free(struct ws_parser *p)
{
	if (!p)
		return;
	free(p->msg);
	free(p);
}

uint16_t ws_parser_error(const struct ws_parser *p, const char **ret_reason)
{
	if (ret_reason)
		*ret_reason = p->error_reason ? p->error_reason : "";
	return p->error;
}

static int parser_fail(struct ws_parser *p, uint16_t code, const char *reason)
{
	p->state = PARSE_FAILED;
	p->error = code;
	p->error_reason = reason;
	return -EBADMSG;
}

static bool opcode_known(unsigned op)
{
	return op == WS_OP_CONTINUATION || op == WS_OP_TEXT || op == WS_OP_BINARY ||
	       op == WS_OP_CLOSE || op == WS_OP_PING || op == WS_OP_PONG;
}

static bool opcode_control(unsigned op)
{
	return op & 0x8;
}

/* The first two bytes: everything but the length's value can be judged here. */
static int header_start(struct ws_parser *p)
{
	uint8_t b0 = p->hdr[0], b1 = p->hdr[1];
	unsigned len7 = b1 & 0x7f;

	p->fin = b0 & 0x80;
	p->op = b0 & 0x0f;
	p->masked = b1 & 0x80;
	if (b0 & 0x70)
		return parser_fail(p, WS_CLOSE_PROTOCOL_ERROR, "reserved bits set");
	if (!opcode_known(p->op))
		return parser_fail(p, WS_CLOSE_PROTOCOL_ERROR, "unknown opcode");
	if (p->role == WS_ROLE_SERVER && !p->masked)
		return parser_fail(p, WS_CLOSE_PROTOCOL_ERROR, "client frames must be masked");
	if (p->role == WS_ROLE_CLIENT && p->masked)
		return parser_fail(p, WS_CLOSE_PROTOCOL_ERROR, "server frames must not be masked");
	if (opcode_control(p->op) && !p->fin)
		return parser_fail(p, WS_CLOSE_PROTOCOL_ERROR, "fragmented control frame");
	if (opcode_control(p->op) && len7 > WS_CONTROL_MAX)
		return parser_fail(p, WS_CLOSE_PROTOCOL_ERROR, "control frame over 125 bytes");
	if (p->op == WS_OP_CONTINUATION && !p->msg_op)
		return parser_fail(p, WS_CLOSE_PROTOCOL_ERROR, "continuation without a message");
	if ((p->op == WS_OP_TEXT || p->op == WS_OP_BINARY) && p->msg_op)
		return parser_fail(p, WS_CLOSE_PROTOCOL_ERROR,
				   "new message inside a fragmented one");
	p->len_end = 2 + (len7 == 126 ? 2 : len7 == 127 ? 8 : 0);
	p->hdr_need = p->len_end + (p->masked ? 4 : 0);
	return 0;
}

/* The length bytes are in: its encoding and the caps are judged before the mask key. */
static int header_length(struct ws_parser *p)
{
	unsigned len7 = p->hdr[1] & 0x7f;
	uint64_t len = len7;

	if (len7 == 126) {
		len = (uint64_t)p->hdr[2] << 8 | p->hdr[3];
		if (len < 126)
			return parser_fail(p, WS_CLOSE_PROTOCOL_ERROR,
					   "length not minimally encoded");
	} else if (len7 == 127) {
		len = 0;
		for (size_t i = 2; i < 10; i++)
			len = len << 8 | p->hdr[i];
		if (len >> 63)
			return parser_fail(p, WS_CLOSE_PROTOCOL_ERROR, "length over 2^63");
		if (len <= 0xffff)
			return parser_fail(p, WS_CLOSE_PROTOCOL_ERROR,
					   "length not minimally encoded");
	}
	if (len > p->max_frame)
		return parser_fail(p, WS_CLOSE_TOO_BIG, "frame too big");
	if (!opcode_control(p->op)) {
		size_t so_far = p->op == WS_OP_CONTINUATION ? p->msg_len : 0;

		if (len > p->max_message - so_far)
			return parser_fail(p, WS_CLOSE_TOO_BIG, "message too big");
	}
	p->len = len;
	return 0;
}

static int msg_reserve(struct ws_parser *p, uint64_t n)
{
	size_t want = p->msg_len + (size_t)n, alloc;
	uint8_t *m;

	if (want <= p->msg_alloc)
		return 0;
	alloc = MAX(want, MIN(MAX(p->msg_alloc * 2, 4096u), (size_t)p->max_message));
	m = realloc(p->msg, alloc);
	if (!m)
		return -ENOMEM;
	p->msg = m;
	p->msg_alloc = alloc;
	return 0;
}

static int frame_end(struct ws_parser *p);

/* The whole header is in: the payload follows (or the end of an empty frame). */
static int frame_begin(struct ws_parser *p)
{
	if (p->masked)
		memcpy(p->key, p->hdr + p->len_end, 4);
	if (!opcode_control(p->op) && p->op != WS_OP_CONTINUATION) {
		p->msg_op = p->op;
		p->msg_len = 0;
		p->utf8 = (struct ws_utf8){};
	}
	p->pos = 0;
	p->hdr_len = 0;
	p->hdr_need = 2;
	p->state = PARSE_PAYLOAD;
	if (p->len == 0)
		return frame_end(p);
	return 0;
}

static size_t take_header(struct ws_parser *p, const uint8_t *d, size_t n, int *ret)
{
	size_t k = 0;

	*ret = 0;
	while (k < n && p->hdr_len < p->hdr_need) {
		p->hdr[p->hdr_len++] = d[k++];
		if (p->hdr_len == 2)
			*ret = header_start(p);
		if (*ret >= 0 && p->hdr_len == p->len_end)
			*ret = header_length(p);
		if (*ret < 0)
			return k;
	}
	if (p->hdr_len == p->hdr_need)
		*ret = frame_begin(p);
	return k;
}

static int close_frame(struct ws_parser *p)
{
	char reason[WS_CONTROL_MAX];
	struct ws_utf8 u = {};
	uint16_t code = WS_CLOSE_NO_STATUS;
	size_t n = (size_t)p->len;

	if (n == 1)
		return parser_fail(p, WS_CLOSE_PROTOCOL_ERROR, "close payload of 1 byte");
	if (n >= 2) {
		code = (uint16_t)(p->control[0] << 8 | p->control[1]);
		if (!ws_close_code_valid(code))
			return parser_fail(p, WS_CLOSE_PROTOCOL_ERROR, "invalid close code");
		if (!ws_utf8_feed(&u, p->control + 2, n - 2) || !ws_utf8_complete(&u))
			return parser_fail(p, WS_CLOSE_INVALID_DATA, "close reason is not UTF-8");
		memcpy(reason, p->control + 2, n - 2);
		reason[n - 2] = '\0';
	} else {
		reason[0] = '\0';
	}
	p->state = PARSE_CLOSED;
	return p->ops->close ? p->ops->close(p->userdata, code, reason) : 0;
}

static int message_end(struct ws_parser *p)
{
	enum ws_opcode op = p->msg_op;
	size_t n = p->msg_len;
	int r;

	if (op == WS_OP_TEXT && !ws_utf8_complete(&p->utf8))
		return parser_fail(p, WS_CLOSE_INVALID_DATA, "text message is not UTF-8");
	p->msg_op = 0;
	p->msg_len = 0;
	r = p->ops->message ? p->ops->message(p->userdata, op, p->msg ? p->msg : (uint8_t *)"", n) :
			      0;
	if (p->msg_alloc >
	    (p->role == WS_ROLE_CLIENT ? PARSER_KEEP_BYTES_CLIENT : PARSER_KEEP_BYTES)) {
		free(p->msg);
		p->msg = NULL;
		p->msg_alloc = 0;
	}
	return r;
}

static int frame_end(struct ws_parser *p)
{
	p->state = PARSE_HEADER;
	switch (p->op) {
	case WS_OP_CLOSE:
		return close_frame(p);
	case WS_OP_PING:
	case WS_OP_PONG:
		return p->ops->control ?
			       p->ops->control(p->userdata, p->op, p->control, (size_t)p->len) :
			       0;
	default:
		return p->fin ? message_end(p) : 0;
	}
}

/* A whole unmasked message in one frame, all of it in the bytes fed: handed over where it lies,
 * without a copy. */
static size_t take_whole_message(struct ws_parser *p, const uint8_t *d, int *ret)
{
	size_t k = (size_t)p->len;
	enum ws_opcode op = p->msg_op;

	if (op == WS_OP_TEXT && (!ws_utf8_feed(&p->utf8, d, k) || !ws_utf8_complete(&p->utf8))) {
		*ret = parser_fail(p, WS_CLOSE_INVALID_DATA, "text message is not UTF-8");
		return k;
	}
	p->state = PARSE_HEADER;
	p->msg_op = 0;
	p->msg_len = 0;
	*ret = p->ops->message ? p->ops->message(p->userdata, op, d, k) : 0;
	return k;
}

static size_t take_payload(struct ws_parser *p, const uint8_t *d, size_t n, int *ret)
{
	size_t k = (size_t)MIN((uint64_t)n, p->len - p->pos);
	uint8_t *dst;

	*ret = 0;
	if (p->pos == 0 && !p->masked && p->fin && (p->op == WS_OP_TEXT || p->op == WS_OP_BINARY) &&
	    (uint64_t)n >= p->len)
		return take_whole_message(p, d, ret);
	if (opcode_control(p->op)) {
		dst = p->control + p->pos;
	} else {
		*ret = msg_reserve(p, k);
		if (*ret < 0)
			return 0;
		dst = p->msg + p->msg_len;
	}
	memcpy(dst, d, k);
	if (p->masked)
		ws_mask(dst, k, p->key, p->pos);
	p->pos += k;
	if (!opcode_control(p->op)) {
		p->msg_len += k;
		if (p->msg_op == WS_OP_TEXT && !ws_utf8_feed(&p->utf8, dst, k)) {
			*ret = parser_fail(p, WS_CLOSE_INVALID_DATA, "text message is not UTF-8");
			return k;
		}
	}
	if (p->pos == p->len)
		*ret = frame_end(p);
	return k;
}

int ws_parser_feed(struct ws_parser *p, const void *data, size_t n)
{
	const uint8_t *d = data;
	int r = 0;

	while (n > 0 && r >= 0) {
		size_t k;

		switch (p->state) {
		case PARSE_HEADER:
			k = take_header(p, d, n, &r);
			break;
		case PARSE_PAYLOAD:
			k = take_payload(p, d, n, &r);
			break;
		case PARSE_CLOSED:
			return 0;
		default:
			return -EBADMSG;
		}
		d += k;
		n -= k;
	}
	if (r >= 0 && p->state == PARSE_FAILED)
		return -EBADMSG;
	return r < 0 ? r : 0;
}
