/* SPDX-License-Identifier: MIT */
/* RFC 6455: the codec (proto/ws-codec.c) byte by byte, every rule with its exact close code and
 * a positive control beside it; then the connection (api/ws-conn.c) on a socketpair, the test
 * playing the client with its own parser in client role. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "basic/cleanup.h"
#include "api/ws-conn.h"
#include "event/event.h"

static const uint8_t KEY[4] = { 0x37, 0xfa, 0x21, 0x3d };

/* ---- a recorder of parser events ------------------------------------------------------------- */

struct event {
	enum ws_opcode op;
	uint16_t code;
	size_t n;
	uint8_t data[256 * 1024];
};

struct recorder {
	struct event ev[8];
	size_t n;
	int fail_with; /* a message callback's return */
};

static struct event *rec_push(struct recorder *r, enum ws_opcode op, const void *data, size_t n)
{
	struct event *e;

	cr_assert_lt(r->n, ELEMENTSOF(r->ev), "too many events");
	cr_assert_leq(n, sizeof r->ev[0].data);
	e = &r->ev[r->n++];
	e->op = op;
	e->n = n;
	memcpy(e->data, data, n);
	return e;
}

static int rec_message(void *userdata, enum ws_opcode op, const void *data, size_t n)
{
	struct recorder *r = userdata;

	rec_push(r, op, data, n);
	return r->fail_with;
}

static int rec_control(void *userdata, enum ws_opcode op, const void *data, size_t n)
{
	rec_push(userdata, op, data, n);
	return 0;
}

static int rec_close(void *userdata, uint16_t code, const char *reason)
{
	rec_push(userdata, WS_OP_CLOSE, reason, strlen(reason))->code = code;
	return 0;
}

static const struct ws_parser_ops rec_ops = {
	.message = rec_message,
	.control = rec_control,
	.close = rec_close,
};

static struct recorder *rec;
static struct ws_parser *parser;

static void new_parser(enum ws_role role, uint64_t max_frame, uint64_t max_message)
{
	ws_parser_free(parser);
	free(rec);
	rec = calloc(1, sizeof *rec);
	cr_assert_not_null(rec);
	cr_assert_eq(ws_parser_new(role, max_frame, max_message, &rec_ops, rec, &parser), 0);
}

static void setup(void)
{
	new_parser(WS_ROLE_SERVER, 1 << 20, 1 << 20);
}

static void teardown(void)
{
	ws_parser_free(parser);
	parser = NULL;
	free(rec);
	rec = NULL;
}

TestSuite(codec, .init = setup, .fini = teardown);

/* ---- frames as a client writes them ------------------------------------------------------------ */

struct bytes {
	uint8_t d[300 * 1024];
	size_t n;
};

static struct bytes *wire;

/* Appends one frame; byte0 is FIN|RSV|opcode as is, so tests can set any bit. */
static void put_raw(uint8_t byte0, const void *payload, size_t n, bool masked)
{
	size_t h;

	cr_assert_leq(wire->n + WS_HEADER_MAX + n, sizeof wire->d);
	h = ws_frame_header(wire->d + wire->n, byte0 & 0x0f, true, n, masked ? KEY : NULL);
	wire->d[wire->n] = byte0;
	memcpy(wire->d + wire->n + h, payload, n);
	if (masked)
		ws_mask(wire->d + wire->n + h, n, KEY, 0);
	wire->n += h + n;
}

static void put(enum ws_opcode op, bool fin, const void *payload, size_t n)
{
	put_raw((uint8_t)((fin ? 0x80 : 0) | op), payload, n, true);
}

static void put_str(enum ws_opcode op, bool fin, const char *s)
{
	put(op, fin, s, strlen(s));
}

static void wire_reset(void)
{
	if (!wire)
		wire = malloc(sizeof *wire);
	cr_assert_not_null(wire);
	wire->n = 0;
}

/* Feeds the wire one byte at a time; returns the first error and the byte it came at. */
static int feed_bytewise(size_t *ret_at)
{
	for (size_t i = 0; i < wire->n; i++) {
		int r = ws_parser_feed(parser, wire->d + i, 1);

		if (r < 0) {
			*ret_at = i;
			return r;
		}
	}
	*ret_at = wire->n;
	return 0;
}

static int feed_all(void)
{
	return ws_parser_feed(parser, wire->d, wire->n);
}

/* The whole wire fails with code, fed at once and (a fresh parser) byte by byte. */
static void expect_fail(uint16_t code, enum ws_role role, uint64_t max_frame, uint64_t max_msg)
{
	size_t at;

	new_parser(role, max_frame, max_msg);
	cr_assert_eq(feed_all(), -EBADMSG);
	cr_assert_eq(ws_parser_error(parser, NULL), code, "code %u, expected %u",
		     ws_parser_error(parser, NULL), code);
	new_parser(role, max_frame, max_msg);
	cr_assert_eq(feed_bytewise(&at), -EBADMSG);
	cr_assert_eq(ws_parser_error(parser, NULL), code);
	/* Nothing more is taken. */
	cr_assert_eq(ws_parser_feed(parser, "\x81", 1), -EBADMSG);
}

static void expect_ok(size_t n_events)
{
	size_t at;

	new_parser(WS_ROLE_SERVER, 1 << 20, 1 << 20);
	cr_assert_eq(feed_bytewise(&at), 0, "failed at byte %zu: %u", at,
		     ws_parser_error(parser, NULL));
	cr_assert_eq(rec->n, n_events, "%zu events", rec->n);
}

static void assert_event_in(struct recorder *r, size_t i, enum ws_opcode op, const void *data,
			    size_t n)
{
	cr_assert_lt(i, r->n, "no event %zu", i);
	cr_assert_eq(r->ev[i].op, op, "event %zu: op %d, expected %d", i, r->ev[i].op, op);
	cr_assert_eq(r->ev[i].n, n, "event %zu: %zu bytes, expected %zu", i, r->ev[i].n, n);
	cr_assert(memcmp(r->ev[i].data, data, n) == 0, "event %zu: payload differs", i);
}

static void assert_event(size_t i, enum ws_opcode op, const void *data, size_t n)
{
	assert_event_in(rec, i, op, data, n);
}

/* ---- handshake, helpers ----------------------------------------------------------------------- */

Test(codec, accept_key_rfc_example)
{
	char accept[WS_ACCEPT_SIZE];

	cr_assert_eq(ws_accept_key("dGhlIHNhbXBsZSBub25jZQ==", accept), 0);
	cr_assert_str_eq(accept, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
}

Test(codec, accept_key_must_be_16_bytes_of_base64)
{
	static const char *const bad[] = {
		"",
		"dGhlIHNhbXBsZSBub25jZQ=",   /* 23 characters */
		"dGhlIHNhbXBsZSBub25jZQ===", /* 25 */
		"dGhlIHNhbXBsZSBub25jZQ!=",  /* not base64 */
		"dGhlIHNhbXBsZSBub25jZWVl",  /* 18 bytes */
		"dGhlIHNhbXBsZSBub25j",	     /* 15 bytes */
		" dGhlIHNhbXBsZSBub25jZQ==", /* padded */
	};
	char accept[WS_ACCEPT_SIZE] = "untouched";

	for (size_t i = 0; i < ELEMENTSOF(bad); i++)
		cr_assert_eq(ws_accept_key(bad[i], accept), -EINVAL, "\"%s\"", bad[i]);
	cr_assert_eq(ws_accept_key(NULL, accept), -EINVAL);
	cr_assert_str_eq(accept, "untouched");
}

Test(codec, close_codes)
{
	static const unsigned valid[] = { 1000, 1001, 1002, 1003, 1007, 1008, 1009,
					  1010, 1011, 1012, 1013, 1014, 3000, 4999 };
	static const unsigned invalid[] = { 0,	  999,	1004, 1005, 1006, 1015,
					    1016, 2000, 2999, 5000, 65535 };

	for (size_t i = 0; i < ELEMENTSOF(valid); i++)
		cr_assert(ws_close_code_valid(valid[i]), "%u", valid[i]);
	for (size_t i = 0; i < ELEMENTSOF(invalid); i++)
		cr_assert_not(ws_close_code_valid(invalid[i]), "%u", invalid[i]);
}

Test(codec, frame_header_lengths)
{
	uint8_t h[WS_HEADER_MAX];

	cr_assert_eq(ws_frame_header(h, WS_OP_TEXT, true, 0, NULL), 2);
	cr_assert(h[0] == 0x81 && h[1] == 0x00);
	cr_assert_eq(ws_frame_header(h, WS_OP_BINARY, false, 125, NULL), 2);
	cr_assert(h[0] == 0x02 && h[1] == 125);
	cr_assert_eq(ws_frame_header(h, WS_OP_BINARY, true, 126, NULL), 4);
	cr_assert(h[1] == 126 && h[2] == 0 && h[3] == 126);
	cr_assert_eq(ws_frame_header(h, WS_OP_BINARY, true, 65535, NULL), 4);
	cr_assert(h[1] == 126 && h[2] == 0xff && h[3] == 0xff);
	cr_assert_eq(ws_frame_header(h, WS_OP_BINARY, true, 65536, NULL), 10);
	cr_assert(h[1] == 127 && h[2] == 0 && h[7] == 1 && h[8] == 0 && h[9] == 0);
	/* Server frames are never masked; a client's carry the key. */
	cr_assert_eq(ws_frame_header(h, WS_OP_PING, true, 5, KEY), 6);
	cr_assert(h[0] == 0x89 && h[1] == (0x80 | 5) && memcmp(h + 2, KEY, 4) == 0);
}

Test(codec, close_payload_cuts_at_a_character)
{
	uint8_t p[WS_CONTROL_MAX];
	char reason[200];
	size_t n;

	cr_assert_eq(ws_close_payload(p, 0, "ignored"), 0);
	n = ws_close_payload(p, 1000, "bye");
	cr_assert(n == 5 && p[0] == 0x03 && p[1] == 0xe8 && memcmp(p + 2, "bye", 3) == 0);
	/* 122 ASCII bytes then a 2-byte character: it does not fit in 123 and is left out. */
	memset(reason, 'a', 122);
	snprintf(reason + 122, sizeof reason - 122, "\xc3\xa9tail");
	n = ws_close_payload(p, 1001, reason);
	cr_assert_eq(n, 2 + 122);
}

Test(codec, utf8_incremental)
{
	static const char *const valid[] = {
		"",
		"plain",
		"caf\xc3\xa9",
		"\xe2\x82\xac",
		"\xf0\x9f\x98\x80",
		"\xf4\x8f\xbf\xbf",
		"\xed\x9f\xbf",
		"a\0b",
	};
	static const char *const invalid[] = {
		"\xc0\x80",	    /* overlong NUL */
		"\xc1\xbf",	    /* overlong */
		"\xe0\x80\x80",	    /* overlong */
		"\xed\xa0\x80",	    /* surrogate U+D800 */
		"\xf0\x80\x80\x80", /* overlong */
		"\xf4\x90\x80\x80", /* U+110000 */
		"\xf5\x80\x80\x80", "\x80", "\xff", "\xe2\x28\xa1",
	};

	for (size_t i = 0; i < ELEMENTSOF(valid); i++) {
		size_t n = i == ELEMENTSOF(valid) - 1 ? 3 : strlen(valid[i]);

		/* Split at every position: the state carries across. */
		for (size_t cut = 0; cut <= n; cut++) {
			struct ws_utf8 u = {};

			cr_assert(ws_utf8_feed(&u, valid[i], cut), "%zu at %zu", i, cut);
			cr_assert(ws_utf8_feed(&u, valid[i] + cut, n - cut), "%zu at %zu", i, cut);
			cr_assert(ws_utf8_complete(&u));
		}
	}
	for (size_t i = 0; i < ELEMENTSOF(invalid); i++) {
		struct ws_utf8 u = {};

		cr_assert_not(ws_utf8_feed(&u, invalid[i], strlen(invalid[i])), "invalid %zu", i);
	}
	/* A character cut short is not wrong yet, only incomplete. */
	{
		struct ws_utf8 u = {};

		cr_assert(ws_utf8_feed(&u, "\xe2\x82", 2));
		cr_assert_not(ws_utf8_complete(&u));
	}
}

/* ---- the parser: positive controls ------------------------------------------------------------ */

Test(codec, rfc_masked_hello_byte_by_byte)
{
	/* RFC 6455 5.7: a masked text frame "Hello". */
	static const uint8_t frame[] = { 0x81, 0x85, 0x37, 0xfa, 0x21, 0x3d,
					 0x7f, 0x9f, 0x4d, 0x51, 0x58 };

	wire_reset();
	memcpy(wire->d, frame, sizeof frame);
	wire->n = sizeof frame;
	expect_ok(1);
	assert_event(0, WS_OP_TEXT, "Hello", 5);
}

Test(codec, client_role_takes_unmasked_and_refuses_masked)
{
	static const uint8_t hello[] = { 0x81, 0x05, 'H', 'e', 'l', 'l', 'o' };
	size_t at;

	new_parser(WS_ROLE_CLIENT, 1024, 1024);
	cr_assert_eq(ws_parser_feed(parser, hello, sizeof hello), 0);
	assert_event(0, WS_OP_TEXT, "Hello", 5);

	wire_reset();
	put_str(WS_OP_TEXT, true, "Hello");
	new_parser(WS_ROLE_CLIENT, 1024, 1024);
	cr_assert_eq(feed_bytewise(&at), -EBADMSG);
	cr_assert_eq(ws_parser_error(parser, NULL), WS_CLOSE_PROTOCOL_ERROR);
	cr_assert_eq(at, 1, "decided at the second byte");
}

/* Where a client parser's message callbacks found their data: in the bytes fed, or not. */
static const uint8_t *fed_lo, *fed_hi;
static unsigned in_place, copied;

static int where_message(void *userdata, enum ws_opcode op, const void *data, size_t n)
{
	const uint8_t *d = data;

	if (d >= fed_lo && d + n <= fed_hi)
		in_place++;
	else
		copied++;
	return rec_message(userdata, op, data, n);
}

static const struct ws_parser_ops where_ops = {
	.message = where_message,
	.control = rec_control,
	.close = rec_close,
};

Test(codec, client_whole_frames_in_place_split_ones_copied)
{
	static uint8_t big[70000];
	struct recorder *r = calloc(1, sizeof *r);
	struct ws_parser *p = NULL;
	size_t split;

	for (size_t i = 0; i < sizeof big; i++)
		big[i] = (uint8_t)(i * 7);
	wire_reset();
	put_raw(0x82, big, sizeof big, false);
	put_raw(0x81, "hi", 2, false);
	put_raw(0x89, "p", 1, false);
	split = wire->n;
	put_raw(0x82, big, sizeof big, false);
	cr_assert_eq(ws_parser_new(WS_ROLE_CLIENT, 1 << 20, 1 << 20, &where_ops, r, &p), 0);
	in_place = copied = 0;
	/* Two whole messages and a ping, then the last message in two reads. */
	fed_lo = wire->d;
	fed_hi = wire->d + split + 100;
	cr_assert_eq(ws_parser_feed(p, wire->d, split + 100), 0);
	fed_lo = wire->d + split + 100;
	fed_hi = wire->d + wire->n;
	cr_assert_eq(ws_parser_feed(p, wire->d + split + 100, wire->n - split - 100), 0);
	assert_event_in(r, 0, WS_OP_BINARY, big, sizeof big);
	assert_event_in(r, 1, WS_OP_TEXT, "hi", 2);
	assert_event_in(r, 2, WS_OP_PING, "p", 1);
	assert_event_in(r, 3, WS_OP_BINARY, big, sizeof big);
	cr_assert_eq(in_place, 2, "the whole messages are handed over where they lie");
	cr_assert_eq(copied, 1, "the split one comes from the parser's buffer");
	ws_parser_free(p);

	/* Text in one whole frame is still checked: 1007. */
	memset(r, 0, sizeof *r);
	wire_reset();
	put_raw(0x81, "ok\xff", 3, false);
	cr_assert_eq(ws_parser_new(WS_ROLE_CLIENT, 1024, 1024, &where_ops, r, &p), 0);
	cr_assert_eq(ws_parser_feed(p, wire->d, wire->n), -EBADMSG);
	cr_assert_eq(ws_parser_error(p, NULL), WS_CLOSE_INVALID_DATA);
	cr_assert_eq(r->n, 0, "no message");
	ws_parser_free(p);
	free(r);
}

Test(codec, lengths_7_16_64_bit)
{
	static uint8_t big[70000];

	for (size_t i = 0; i < sizeof big; i++)
		big[i] = (uint8_t)(i * 7);
	wire_reset();
	put(WS_OP_BINARY, true, big, 125);
	put(WS_OP_BINARY, true, big, 126);
	put(WS_OP_BINARY, true, big, 65535);
	put(WS_OP_BINARY, true, big, 65536);
	put(WS_OP_BINARY, true, big, sizeof big);
	put(WS_OP_TEXT, true, "", 0);
	expect_ok(6);
	assert_event(0, WS_OP_BINARY, big, 125);
	assert_event(1, WS_OP_BINARY, big, 126);
	assert_event(2, WS_OP_BINARY, big, 65535);
	assert_event(3, WS_OP_BINARY, big, 65536);
	assert_event(4, WS_OP_BINARY, big, sizeof big);
	assert_event(5, WS_OP_TEXT, "", 0);
}

Test(codec, fragments_with_control_frames_between)
{
	wire_reset();
	put_str(WS_OP_TEXT, false, "Hel");
	put_str(WS_OP_PING, true, "p1");
	put_str(WS_OP_CONTINUATION, false, "");
	put_str(WS_OP_PONG, true, "p2");
	put_str(WS_OP_CONTINUATION, true, "lo");
	put_str(WS_OP_BINARY, false, "\x01");
	put_str(WS_OP_CONTINUATION, false, "\x02");
	put_str(WS_OP_CONTINUATION, true, "\x03");
	expect_ok(4);
	assert_event(0, WS_OP_PING, "p1", 2);
	assert_event(1, WS_OP_PONG, "p2", 2);
	assert_event(2, WS_OP_TEXT, "Hello", 5);
	assert_event(3, WS_OP_BINARY, "\x01\x02\x03", 3);
}

Test(codec, utf8_across_fragments)
{
	wire_reset();
	/* € is E2 82 AC, split over three frames. */
	put(WS_OP_TEXT, false, "\xe2", 1);
	put(WS_OP_CONTINUATION, false, "\x82", 1);
	put(WS_OP_CONTINUATION, true, "\xac", 1);
	expect_ok(1);
	assert_event(0, WS_OP_TEXT, "\xe2\x82\xac", 3);
}

Test(codec, control_frame_of_125_bytes)
{
	char p[125];

	memset(p, 'x', sizeof p);
	wire_reset();
	put(WS_OP_PING, true, p, sizeof p);
	expect_ok(1);
	assert_event(0, WS_OP_PING, p, sizeof p);
}

Test(codec, frame_and_message_at_their_caps)
{
	static uint8_t data[1000];
	size_t at;

	wire_reset();
	put(WS_OP_BINARY, true, data, 1000);
	put(WS_OP_BINARY, false, data, 500);
	put(WS_OP_CONTINUATION, true, data, 500);
	new_parser(WS_ROLE_SERVER, 1000, 1000);
	cr_assert_eq(feed_bytewise(&at), 0);
	cr_assert_eq(rec->n, 2);
	cr_assert_eq(rec->ev[1].n, 1000);
}

Test(codec, close_frames_valid)
{
	static const unsigned codes[] = { 1000, 1001, 1003, 1007, 1011, 1014, 3000, 4999 };

	wire_reset();
	put(WS_OP_CLOSE, true, "", 0);
	expect_ok(1);
	cr_assert_eq(rec->ev[0].code, WS_CLOSE_NO_STATUS);
	cr_assert_eq(rec->ev[0].n, 0);
	for (size_t i = 0; i < ELEMENTSOF(codes); i++) {
		uint8_t p[WS_CONTROL_MAX];

		wire_reset();
		put(WS_OP_CLOSE, true, p,
		    ws_close_payload(p, (uint16_t)codes[i], "bye \xe2\x82\xac"));
		expect_ok(1);
		cr_assert_eq(rec->ev[0].code, codes[i]);
		assert_event(0, WS_OP_CLOSE, "bye \xe2\x82\xac", 7);
	}
}

Test(codec, nothing_after_close)
{
	uint8_t p[WS_CONTROL_MAX];

	wire_reset();
	put(WS_OP_CLOSE, true, p, ws_close_payload(p, 1000, ""));
	put_str(WS_OP_TEXT, true, "late");
	put_raw(0xff, "", 0, false); /* would be an error, were it read */
	expect_ok(1);
	cr_assert_eq(rec->ev[0].op, WS_OP_CLOSE);
}

Test(codec, callback_error_is_passed_through)
{
	wire_reset();
	put_str(WS_OP_TEXT, true, "one");
	put_str(WS_OP_TEXT, true, "two");
	new_parser(WS_ROLE_SERVER, 1024, 1024);
	rec->fail_with = -EIO;
	cr_assert_eq(feed_all(), -EIO);
	cr_assert_eq(rec->n, 1, "stops at the failing callback");
}

/* ---- the parser: violations and their codes --------------------------------------------------- */

Test(codec, unmasked_client_frame_is_1002)
{
	wire_reset();
	put_raw(0x81, "hi", 2, false);
	expect_fail(WS_CLOSE_PROTOCOL_ERROR, WS_ROLE_SERVER, 1024, 1024);
	cr_assert_eq(rec->n, 0);
}

Test(codec, rsv_bits_are_1002)
{
	static const uint8_t rsv[] = { 0x40, 0x20, 0x10 };

	for (size_t i = 0; i < ELEMENTSOF(rsv); i++) {
		wire_reset();
		put_raw((uint8_t)(0x81 | rsv[i]), "hi", 2, true);
		expect_fail(WS_CLOSE_PROTOCOL_ERROR, WS_ROLE_SERVER, 1024, 1024);
	}
}

Test(codec, unknown_opcodes_are_1002)
{
	static const uint8_t ops[] = { 3, 4, 5, 6, 7, 0xb, 0xc, 0xd, 0xe, 0xf };

	for (size_t i = 0; i < ELEMENTSOF(ops); i++) {
		wire_reset();
		put_raw((uint8_t)(0x80 | ops[i]), "", 0, true);
		expect_fail(WS_CLOSE_PROTOCOL_ERROR, WS_ROLE_SERVER, 1024, 1024);
	}
}

Test(codec, control_frame_rules_are_1002)
{
	char p[126];

	memset(p, 'x', sizeof p);
	wire_reset();
	put(WS_OP_PING, false, "x", 1); /* fragmented */
	expect_fail(WS_CLOSE_PROTOCOL_ERROR, WS_ROLE_SERVER, 1024, 1024);
	wire_reset();
	put(WS_OP_PING, true, p, 126); /* over 125 */
	expect_fail(WS_CLOSE_PROTOCOL_ERROR, WS_ROLE_SERVER, 1024, 1024);
	wire_reset();
	put(WS_OP_CLOSE, true, p, 126);
	expect_fail(WS_CLOSE_PROTOCOL_ERROR, WS_ROLE_SERVER, 1024, 1024);
}

Test(codec, non_minimal_lengths_are_1002)
{
	/* 16-bit length holding 125; 64-bit holding 65535; 64-bit with the top bit set. */
	static const uint8_t short16[] = { 0x82, 0xfe, 0x00, 0x7d };
	static const uint8_t short64[] = { 0x82, 0xff, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
	static const uint8_t huge64[] = { 0x82, 0xff, 0x80, 0, 0, 0, 0, 0, 0, 0 };
	const struct {
		const uint8_t *d;
		size_t n;
	} cases[] = { { short16, sizeof short16 },
		      { short64, sizeof short64 },
		      { huge64, sizeof huge64 } };

	for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
		wire_reset();
		memcpy(wire->d, cases[i].d, cases[i].n);
		wire->n = cases[i].n;
		/* Decided from the length bytes alone, before any mask key or payload. */
		expect_fail(WS_CLOSE_PROTOCOL_ERROR, WS_ROLE_SERVER, 1 << 20, 1 << 20);
	}
}

Test(codec, sequencing_is_1002)
{
	wire_reset();
	put_str(WS_OP_CONTINUATION, true, "orphan");
	expect_fail(WS_CLOSE_PROTOCOL_ERROR, WS_ROLE_SERVER, 1024, 1024);
	wire_reset();
	put_str(WS_OP_TEXT, false, "a");
	put_str(WS_OP_TEXT, true, "b");
	expect_fail(WS_CLOSE_PROTOCOL_ERROR, WS_ROLE_SERVER, 1024, 1024);
	wire_reset();
	put_str(WS_OP_BINARY, false, "a");
	put_str(WS_OP_TEXT, true, "b");
	expect_fail(WS_CLOSE_PROTOCOL_ERROR, WS_ROLE_SERVER, 1024, 1024);
}

Test(codec, frame_over_cap_is_1009_from_the_header)
{
	static uint8_t data[1001];
	size_t at;

	wire_reset();
	put(WS_OP_BINARY, true, data, 1001);
	expect_fail(WS_CLOSE_TOO_BIG, WS_ROLE_SERVER, 1000, 1 << 20);
	/* Decided at the last length byte, before the mask key and the payload. */
	new_parser(WS_ROLE_SERVER, 1000, 1 << 20);
	cr_assert_eq(feed_bytewise(&at), -EBADMSG);
	cr_assert_eq(at, 3);
	/* Control frames have their own cap, whatever max_frame is. */
	wire_reset();
	put(WS_OP_PING, true, "xx", 2);
	expect_fail(WS_CLOSE_TOO_BIG, WS_ROLE_SERVER, 1, 1 << 20);
}

Test(codec, message_over_cap_is_1009)
{
	static uint8_t data[600];
	size_t at;

	wire_reset();
	put(WS_OP_BINARY, false, data, 600);
	put(WS_OP_CONTINUATION, true, data, 600);
	new_parser(WS_ROLE_SERVER, 1000, 1000);
	cr_assert_eq(feed_bytewise(&at), -EBADMSG);
	cr_assert_eq(ws_parser_error(parser, NULL), WS_CLOSE_TOO_BIG);
	cr_assert_eq(at, 2 + 2 + 4 + 600 + 3, "at the second frame's length, byte %zu", at);
}

Test(codec, invalid_utf8_is_1007_at_the_first_bad_byte)
{
	size_t at;

	wire_reset();
	put(WS_OP_TEXT, true,
	    "ab\xff"
	    "cd",
	    5);
	new_parser(WS_ROLE_SERVER, 1024, 1024);
	cr_assert_eq(feed_bytewise(&at), -EBADMSG);
	cr_assert_eq(ws_parser_error(parser, NULL), WS_CLOSE_INVALID_DATA);
	cr_assert_eq(at, 2 + 4 + 2, "failed at byte %zu", at);
	cr_assert_eq(rec->n, 0);

	/* In a first fragment: fails before the message is complete. */
	wire_reset();
	put(WS_OP_TEXT, false, "\xed\xa0\x80", 3);
	expect_fail(WS_CLOSE_INVALID_DATA, WS_ROLE_SERVER, 1024, 1024);

	/* Cut short at the message's end. */
	wire_reset();
	put(WS_OP_TEXT, false, "\xe2", 1);
	put(WS_OP_CONTINUATION, true, "\x82", 1);
	expect_fail(WS_CLOSE_INVALID_DATA, WS_ROLE_SERVER, 1024, 1024);

	/* Binary is not checked: the same bytes pass. */
	wire_reset();
	put(WS_OP_BINARY, true,
	    "ab\xff"
	    "cd",
	    5);
	expect_ok(1);
}

Test(codec, close_payload_rules)
{
	static const unsigned bad_codes[] = { 0, 999, 1004, 1005, 1006, 1015, 2999, 5000 };
	uint8_t p[WS_CONTROL_MAX];

	wire_reset();
	put(WS_OP_CLOSE, true, "\x03", 1);
	expect_fail(WS_CLOSE_PROTOCOL_ERROR, WS_ROLE_SERVER, 1024, 1024);
	for (size_t i = 0; i < ELEMENTSOF(bad_codes); i++) {
		p[0] = (uint8_t)(bad_codes[i] >> 8);
		p[1] = (uint8_t)bad_codes[i];
		wire_reset();
		put(WS_OP_CLOSE, true, p, 2);
		expect_fail(WS_CLOSE_PROTOCOL_ERROR, WS_ROLE_SERVER, 1024, 1024);
	}
	wire_reset();
	put(WS_OP_CLOSE, true, "\x03\xe8\xc3\x28", 4);
	expect_fail(WS_CLOSE_INVALID_DATA, WS_ROLE_SERVER, 1024, 1024);
}

/* ---- the connection on a socketpair ------------------------------------------------------------ */

struct conn_log {
	struct ws_conn *conn;
	int messages, drains, closed, released;
	enum ws_opcode last_op;
	char last[256];
	uint16_t code;
	char reason[WS_CONTROL_MAX];
	bool echo;
};

static struct event_loop *loop;
static int peer = -1; /* the client's end */
static struct conn_log clog;
static struct ws_parser *client;
static struct recorder *crec;

static void log_message(void *userdata, struct ws_conn *c, enum ws_opcode op, const void *data,
			size_t n)
{
	struct conn_log *l = userdata;

	l->messages++;
	l->last_op = op;
	snprintf(l->last, sizeof l->last, "%.*s", (int)n, (const char *)data);
	if (l->echo)
		cr_assert_eq(op == WS_OP_TEXT ? ws_send_text(c, data, n) :
						ws_send_binary(c, data, n),
			     0);
}

static void log_drain(void *userdata, struct ws_conn *c)
{
	((struct conn_log *)userdata)->drains++;
}

static void log_closed(void *userdata, struct ws_conn *c, uint16_t code, const char *reason)
{
	struct conn_log *l = userdata;

	l->closed++;
	l->code = code;
	snprintf(l->reason, sizeof l->reason, "%s", reason);
	l->conn = NULL;
}

static const struct ws_conn_ops log_ops = {
	.message = log_message,
	.drain = log_drain,
	.closed = log_closed,
};

static void on_release(void *userdata, int fd)
{
	struct conn_log *l = userdata;

	l->released++;
	close(fd);
}

static const struct ws_limits test_limits = {
	.max_frame_bytes = 4096,
	.max_message_bytes = 8192,
	.max_queue_bytes = 16384,
	.ping_interval_ms = 100,
	.idle_timeout_ms = 350,
	.close_timeout_ms = 200,
};

static void conn_setup(void)
{
	int sv[2];

	memset(&clog, 0, sizeof clog);
	cr_assert_eq(event_loop_new(&loop), 0);
	cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	peer = sv[1];
	cr_assert_eq(ws_conn_new(loop, &test_limits, &log_ops, &clog, &clog.conn), 0);
	cr_assert_eq(ws_conn_attach(clog.conn, sv[0], NULL, 0, on_release, &clog), 0);
	crec = calloc(1, sizeof *crec);
	cr_assert_eq(ws_parser_new(WS_ROLE_CLIENT, 1 << 20, 1 << 20, &rec_ops, crec, &client), 0);
	wire_reset();
}

static void conn_teardown(void)
{
	if (clog.conn)
		ws_conn_shutdown(clog.conn);
	ws_parser_free(client);
	client = NULL;
	free(crec);
	if (peer >= 0)
		close(peer);
	peer = -1;
	event_loop_free(loop);
	loop = NULL;
}

TestSuite(conn, .init = conn_setup, .fini = conn_teardown, .timeout = 20);

static void run_for_ms(int ms)
{
	uint64_t end = now_usec() + (uint64_t)ms * 1000;

	while (now_usec() < end)
		cr_assert_geq(event_loop_run_once(loop, 5), 0);
}

#define RUN_UNTIL(cond, ms)                                                                        \
	do {                                                                                       \
		uint64_t end_ = now_usec() + (uint64_t)(ms)*1000;                                  \
		while (!(cond) && now_usec() < end_)                                               \
			cr_assert_geq(event_loop_run_once(loop, 5), 0);                            \
		cr_assert((cond), "timed out waiting for " #cond);                                 \
	} while (0)

/* Sends the wire to the server. */
static void send_wire(void)
{
	cr_assert_eq(write(peer, wire->d, wire->n), (ssize_t)wire->n);
	wire->n = 0;
}

/* Reads what the server sent so far into the client parser; true at EOF. */
static bool client_read(void)
{
	uint8_t buf[65536];

	for (;;) {
		struct pollfd p = { .fd = peer, .events = POLLIN };
		ssize_t k;

		if (poll(&p, 1, 0) <= 0)
			return false;
		k = read(peer, buf, sizeof buf);
		if (k <= 0)
			return true;
		cr_assert_eq(ws_parser_feed(client, buf, (size_t)k), 0, "server sent a bad frame");
	}
}

/* Runs the loop until the client has seen n events (or EOF). */
static bool client_until(size_t n, int ms)
{
	uint64_t end = now_usec() + (uint64_t)ms * 1000;
	bool eof = false;

	while (crec->n < n && !eof && now_usec() < end) {
		cr_assert_geq(event_loop_run_once(loop, 5), 0);
		eof = client_read();
	}
	cr_assert_geq(crec->n, n, "client saw %zu of %zu events", crec->n, n);
	return eof;
}

static void client_close_reply(uint16_t code)
{
	uint8_t p[WS_CONTROL_MAX];

	put(WS_OP_CLOSE, true, p, ws_close_payload(p, code, ""));
	send_wire();
}

Test(conn, echo_text_and_binary_unmasked)
{
	uint8_t head[2];

	clog.echo = true;
	put_str(WS_OP_TEXT, true, "hi");
	send_wire();
	RUN_UNTIL(clog.messages == 1, 2000);
	cr_assert_eq(clog.last_op, WS_OP_TEXT);
	cr_assert_str_eq(clog.last, "hi");
	/* The raw bytes of the answer: FIN, text, no mask bit, length 2. */
	cr_assert_eq(recv(peer, head, 2, MSG_PEEK), 2);
	cr_assert(head[0] == 0x81 && head[1] == 0x02, "%02x %02x", head[0], head[1]);
	put(WS_OP_BINARY, true, "\0\1\2", 3);
	send_wire();
	client_until(2, 2000);
	assert_event_in(crec, 0, WS_OP_TEXT, "hi", 2);
	assert_event_in(crec, 1, WS_OP_BINARY, "\0\1\2", 3);
	cr_assert_eq(clog.closed, 0);
}

Test(conn, bytes_read_before_the_upgrade_are_parsed_first)
{
	struct conn_log l = {};
	struct ws_conn *c;
	int sv[2];

	/* A second connection, attached with a frame MHD had already read. */
	put_str(WS_OP_TEXT, true, "early");
	cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	cr_assert_eq(ws_conn_new(loop, &test_limits, &log_ops, &l, &c), 0);
	cr_assert_eq(ws_conn_attach(c, sv[0], wire->d, wire->n, on_release, &l), 0);
	cr_assert_eq(l.messages, 0, "never from inside attach");
	RUN_UNTIL(l.messages == 1, 2000);
	cr_assert_str_eq(l.last, "early");
	ws_conn_shutdown(c);
	cr_assert_eq(l.released, 1);
	close(sv[1]);
}

Test(conn, sends_before_attach_are_queued)
{
	struct conn_log l = {};
	struct ws_conn *c;
	int sv[2];

	cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	cr_assert_eq(ws_conn_new(loop, &test_limits, &log_ops, &l, &c), 0);
	cr_assert_eq(ws_send_text(c, "queued", 6), 0);
	cr_assert_eq(ws_queued_bytes(c), 8);
	run_for_ms(20);
	cr_assert_eq(ws_queued_bytes(c), 8, "nowhere to go yet");
	close(peer);
	peer = sv[1];
	cr_assert_eq(ws_conn_attach(c, sv[0], NULL, 0, on_release, &l), 0);
	client_until(1, 2000);
	assert_event_in(crec, 0, WS_OP_TEXT, "queued", 6);
	ws_conn_shutdown(c);
}

Test(conn, ping_gets_pong_with_its_payload)
{
	put_str(WS_OP_PING, true, "are you there");
	send_wire();
	client_until(1, 2000);
	assert_event_in(crec, 0, WS_OP_PONG, "are you there", 13);
}

Test(conn, pongs_do_not_pile_up)
{
	/* 200 pings while the client reads nothing: at most one pong waits, the latest. */
	for (int i = 0; i < 200; i++) {
		char p[16];

		snprintf(p, sizeof p, "ping %d", i);
		put_str(WS_OP_PING, true, p);
	}
	send_wire();
	RUN_UNTIL(ws_queued_bytes(clog.conn) == 0, 2000);
	client_until(1, 2000);
	cr_assert_leq(crec->n, 200);
	assert_event_in(crec, crec->n - 1, WS_OP_PONG, "ping 199", 8);
}

Test(conn, client_close_is_echoed_then_closed)
{
	uint8_t p[WS_CONTROL_MAX];
	bool eof;

	put(WS_OP_CLOSE, true, p, ws_close_payload(p, 4001, "bye"));
	send_wire();
	eof = client_until(1, 2000);
	cr_assert_eq(crec->ev[0].op, WS_OP_CLOSE);
	cr_assert_eq(crec->ev[0].code, 4001, "the code is echoed");
	RUN_UNTIL(clog.closed == 1, 2000);
	cr_assert_eq(clog.code, 4001);
	cr_assert_str_eq(clog.reason, "bye");
	cr_assert_eq(clog.released, 1);
	(void)eof;
}

Test(conn, close_without_code_is_1005)
{
	put(WS_OP_CLOSE, true, "", 0);
	send_wire();
	client_until(1, 2000);
	cr_assert_eq(crec->ev[0].code, WS_CLOSE_NO_STATUS, "an empty close is echoed empty");
	RUN_UNTIL(clog.closed == 1, 2000);
	cr_assert_eq(clog.code, WS_CLOSE_NO_STATUS);
}

Test(conn, server_close_after_queued_data)
{
	cr_assert_eq(ws_send_text(clog.conn, "last words", 10), 0);
	cr_assert_eq(ws_close(clog.conn, WS_CLOSE_NORMAL, "done"), 0);
	cr_assert_eq(ws_close(clog.conn, WS_CLOSE_NORMAL, "again"), -EALREADY);
	cr_assert_eq(ws_send_text(clog.conn, "late", 4), -EPIPE);
	cr_assert_eq(ws_send_room(clog.conn), 0);
	/* Messages from the client are dropped once closing. */
	put_str(WS_OP_TEXT, true, "ignored");
	send_wire();
	cr_assert(client_until(2, 2000), "EOF after the close frame: the server shut down writing");
	assert_event_in(crec, 0, WS_OP_TEXT, "last words", 10);
	assert_event_in(crec, 1, WS_OP_CLOSE, "done", 4);
	cr_assert_eq(crec->ev[1].code, 1000);
	cr_assert_eq(clog.closed, 0, "waits for the client's close");
	client_close_reply(1000);
	RUN_UNTIL(clog.closed == 1, 2000);
	cr_assert_eq(clog.code, 1000);
	cr_assert_str_eq(clog.reason, "done");
	cr_assert_eq(clog.messages, 0);
}

Test(conn, close_handshake_times_out)
{
	uint64_t t0 = now_usec();

	cr_assert_eq(ws_close(clog.conn, WS_CLOSE_NORMAL, "done"), 0);
	RUN_UNTIL(clog.closed == 1, 2000);
	cr_assert_geq(now_usec() - t0, test_limits.close_timeout_ms * 1000);
	cr_assert_eq(clog.code, 1000, "ours, the client never answered");
}

Test(conn, invalid_close_code_is_refused)
{
	cr_assert_eq(ws_close(clog.conn, 1005, NULL), -EINVAL);
	cr_assert_eq(ws_close(clog.conn, 999, NULL), -EINVAL);
}

static void expect_server_fail(uint16_t code)
{
	bool eof = client_until(1, 2000);

	cr_assert_eq(crec->ev[0].op, WS_OP_CLOSE);
	cr_assert_eq(crec->ev[0].code, code, "close %u, expected %u", crec->ev[0].code, code);
	if (!eof)
		eof = client_until(1, 2000) || client_read();
	/* The client, having read the close, hangs up. */
	close(peer);
	peer = -1;
	RUN_UNTIL(clog.closed == 1, 2000);
	cr_assert_eq(clog.code, code);
	cr_assert_eq(clog.messages, 0);
}

Test(conn, unmasked_frame_closes_1002)
{
	put_raw(0x81, "hi", 2, false);
	send_wire();
	expect_server_fail(WS_CLOSE_PROTOCOL_ERROR);
}

Test(conn, invalid_utf8_closes_1007)
{
	put(WS_OP_TEXT, true, "\xc3\x28", 2);
	send_wire();
	expect_server_fail(WS_CLOSE_INVALID_DATA);
}

Test(conn, oversized_frame_closes_1009)
{
	static uint8_t big[4097];

	put(WS_OP_BINARY, true, big, sizeof big);
	send_wire();
	expect_server_fail(WS_CLOSE_TOO_BIG);
}

Test(conn, frame_at_the_cap_is_taken)
{
	static uint8_t big[4096];

	put(WS_OP_BINARY, true, big, sizeof big);
	send_wire();
	RUN_UNTIL(clog.messages == 1, 2000);
	cr_assert_eq(clog.last_op, WS_OP_BINARY);
}

Test(conn, hang_up_without_close_is_1006)
{
	close(peer);
	peer = -1;
	RUN_UNTIL(clog.closed == 1, 2000);
	cr_assert_eq(clog.code, WS_CLOSE_ABNORMAL);
	cr_assert_eq(clog.released, 1);
}

Test(conn, backpressure_refuses_then_drains)
{
	static char chunk[1000];
	int r = 0, sent = 0;

	/* The client reads nothing: the socket buffer fills, then the queue. */
	while (sent < 100000 && (r = ws_send_binary(clog.conn, chunk, sizeof chunk)) == 0)
		sent++;
	cr_assert_eq(r, -EAGAIN, "%d after %d sends", r, sent);
	cr_assert_leq(ws_queued_bytes(clog.conn), test_limits.max_queue_bytes);
	cr_assert_lt(ws_send_room(clog.conn), sizeof chunk);
	cr_assert_eq(ws_send_binary(clog.conn, chunk, 1), 0, "a small message still fits");
	cr_assert_eq(ws_send_binary(clog.conn, chunk, test_limits.max_queue_bytes), -EMSGSIZE);
	run_for_ms(50);
	cr_assert_eq(clog.drains, 0, "nothing drains while the client does not read");
	/* The client reads: everything arrives, drain() comes once, sends work again. */
	{
		uint8_t buf[65536];
		uint64_t end = now_usec() + 5000000;

		while (clog.drains == 0 && now_usec() < end) {
			cr_assert_geq(event_loop_run_once(loop, 1), 0);
			(void)recv(peer, buf, sizeof buf, MSG_DONTWAIT);
		}
	}
	cr_assert_eq(clog.drains, 1);
	cr_assert_leq(ws_queued_bytes(clog.conn), test_limits.max_queue_bytes / 2);
	cr_assert_eq(ws_send_binary(clog.conn, chunk, sizeof chunk), 0);
	cr_assert_eq(clog.closed, 0);
}

Test(conn, text_must_be_utf8)
{
	cr_assert_eq(ws_send_text(clog.conn, "\xff", 1), -EINVAL);
	cr_assert_eq(ws_send_text(clog.conn, "ok \xe2\x82\xac", 6), 0);
	cr_assert_eq(ws_queued_bytes(clog.conn), 0, "written at once");
}

Test(conn, idle_client_is_pinged_then_closed_1001)
{
	uint64_t t0 = now_usec();
	size_t i;

	/* The client reads but never answers. */
	RUN_UNTIL(clog.closed == 1 || (client_read(), false), 3000);
	cr_assert_geq(now_usec() - t0, test_limits.idle_timeout_ms * 1000);
	cr_assert_eq(clog.code, WS_CLOSE_GOING_AWAY);
	cr_assert_str_eq(clog.reason, "idle timeout");
	cr_assert_geq(crec->n, 2, "pings, then the close");
	for (i = 0; i + 1 < crec->n; i++)
		cr_assert_eq(crec->ev[i].op, WS_OP_PING);
	cr_assert_eq(crec->ev[i].op, WS_OP_CLOSE);
	cr_assert_eq(crec->ev[i].code, WS_CLOSE_GOING_AWAY);
}

Test(conn, answering_pings_keeps_it_open)
{
	uint64_t end = now_usec() + 3 * test_limits.idle_timeout_ms * 1000;
	size_t answered = 0;

	while (now_usec() < end) {
		cr_assert_geq(event_loop_run_once(loop, 5), 0);
		client_read();
		for (size_t i = 0; i < crec->n; i++, answered++) {
			cr_assert_eq(crec->ev[i].op, WS_OP_PING);
			put(WS_OP_PONG, true, "", 0);
			send_wire();
		}
		crec->n = 0;
	}
	cr_assert_eq(clog.closed, 0);
	cr_assert_geq(answered, 2);
}

Test(conn, abort_before_attach_is_1006_without_release)
{
	struct conn_log l = {};
	struct ws_conn *c;

	cr_assert_eq(ws_conn_new(loop, NULL, &log_ops, &l, &c), 0);
	ws_conn_abort(c, WS_CLOSE_ABNORMAL, "the upgrade did not complete");
	cr_assert_eq(l.closed, 0, "from the loop, not from inside abort");
	RUN_UNTIL(l.closed == 1, 2000);
	cr_assert_eq(l.code, WS_CLOSE_ABNORMAL);
	cr_assert_eq(l.released, 0);
}

Test(conn, shutdown_sends_1001_and_reports_at_once)
{
	ws_conn_shutdown(clog.conn);
	cr_assert_eq(clog.closed, 1);
	cr_assert_eq(clog.released, 1);
	cr_assert_eq(clog.code, WS_CLOSE_GOING_AWAY);
	client_read();
	cr_assert_eq(crec->n, 1);
	cr_assert_eq(crec->ev[0].code, WS_CLOSE_GOING_AWAY);
}
