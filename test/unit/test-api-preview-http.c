/* SPDX-License-Identifier: MIT */
/* The preview listener's HTTP/1.1 text (src/api/preview-http.c): heads, body framing fed in
 * every split, the Host's label, the station's parameter and cookie, an app's cookie Domain.
 * The framing's approved bytes are forwarded verbatim, so each case says exactly where it
 * stops. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/preview-http.h"

/* ---- heads ----------------------------------------------------------------------------- */

static int parse(const char *s, struct head *h)
{
	return preview_head_parse(s, strlen(s), h);
}

static void assert_field(const struct header *f, const char *name, const char *value)
{
	cr_assert_eq(f->name_len, strlen(name));
	cr_assert_eq(memcmp(f->name, name, f->name_len), 0);
	cr_assert_eq(f->value_len, strlen(value), "value '%.*s', not '%s'", (int)f->value_len,
		     f->value, value);
	cr_assert_eq(memcmp(f->value, value, f->value_len), 0);
}

Test(head, well_formed)
{
	static struct head h;

	cr_assert_eq(parse("GET /a?b HTTP/1.1\r\nHost: x.preview.localhost\r\nX-A:  v w \t\r\n"
			   "Empty:\r\nTab: a\tb\r\n\r\n",
			   &h),
		     0);
	cr_assert_eq(h.line_len, strlen("GET /a?b HTTP/1.1"));
	cr_assert_eq(memcmp(h.line, "GET /a?b HTTP/1.1", h.line_len), 0);
	cr_assert_eq(h.n, 4);
	assert_field(&h.h[0], "Host", "x.preview.localhost");
	assert_field(&h.h[1], "X-A", "v w");
	assert_field(&h.h[2], "Empty", "");
	assert_field(&h.h[3], "Tab", "a\tb");
	cr_assert(preview_header_is(&h.h[0], "host"));
	cr_assert(!preview_header_is(&h.h[0], "hos"));
	/* a head of the start line alone */
	cr_assert_eq(parse("GET / HTTP/1.1\r\n\r\n", &h), 0);
	cr_assert_eq(h.n, 0);
	/* only the head: the body's bytes after it are not looked at */
	cr_assert_eq(parse("GET / HTTP/1.1\r\nA: b\r\n\r\n\n\r\x01", &h), 0);
	cr_assert_eq(h.n, 1);
}

Test(head, refused)
{
	static const char *const bad[] = {
		"GET / HTTP/1.1\r\nA: b\r\n c\r\n\r\n",	 /* obs-fold */
		"GET / HTTP/1.1\r\nA: b\r\n\tc\r\n\r\n", /* obs-fold with a tab */
		"GET / HTTP/1.1\r\n Host: x\r\n\r\n",	 /* a first field folded */
		"GET / HTTP/1.1\r\nA: b\rc\r\n\r\n",	 /* bare CR in a value */
		"GET / HTTP/1.1\r\nA: b\nc\r\n\r\n",	 /* bare LF in a value */
		"GET / HTTP/1.1\nA: b\r\n\r\n",		 /* bare LF ends the start line */
		"GET / HTTP/1.1\rA: b\r\n\r\n",		 /* bare CR ends the start line */
		"GET / HTTP/1.1\r\nA: b\n\r\n",		 /* bare LF ends a field */
		"GET / HTTP/1.1\r\nA : b\r\n\r\n",	 /* space before the colon */
		"GET / HTTP/1.1\r\nA\t: b\r\n\r\n",	 /* tab before the colon */
		"GET / HTTP/1.1\r\n: b\r\n\r\n",	 /* empty name */
		"GET / HTTP/1.1\r\nA b\r\n\r\n",	 /* no colon */
		"GET / HTTP/1.1\r\nA\r\n\r\n",		 /* a name alone */
		"GET / HTTP/1.1\r\nA(: b\r\n\r\n",	 /* not a token */
		"GET / HTTP/1.1\r\nA: b\x01\r\n\r\n",	 /* control in a value */
		"GET / HTTP/1.1\r\nA: \x1b[31m\r\n\r\n", /* escape in a value */
		"GET / HTTP/1.1\r\nA: b\x7f\r\n\r\n",	 /* DEL in a value */
		"GET / HTTP/1.1\r\nA: b\r\n\r",		 /* incomplete */
		"GET / HTTP/1.1\r\nA: b\r\n",		 /* incomplete */
		"",
	};
	static struct head h;

	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		cr_assert_eq(parse(bad[i], &h), -EBADMSG, "case %zu", i);

	/* NUL in the start line, in a name, in a value */
	static const char nul_line[] = "GET /\0 HTTP/1.1\r\nA: b\r\n\r\n";
	static const char nul_name[] = "GET / HTTP/1.1\r\nA\0: b\r\n\r\n";
	static const char nul_value[] = "GET / HTTP/1.1\r\nA: b\0c\r\n\r\n";
	cr_assert_eq(preview_head_parse(nul_line, sizeof nul_line - 1, &h), -EBADMSG);
	cr_assert_eq(preview_head_parse(nul_name, sizeof nul_name - 1, &h), -EBADMSG);
	cr_assert_eq(preview_head_parse(nul_value, sizeof nul_value - 1, &h), -EBADMSG);
	/* the same heads without the NUL: the control */
	cr_assert_eq(parse("GET / HTTP/1.1\r\nA: bc\r\n\r\n", &h), 0);
}

static char *many_fields(size_t n)
{
	size_t cap = 32 + n * 16;
	char *s = malloc(cap);
	size_t len = (size_t)snprintf(s, cap, "GET / HTTP/1.1\r\n");
	for (size_t i = 0; i < n; i++)
		len += (size_t)snprintf(s + len, cap - len, "F%zu: v\r\n", i);
	snprintf(s + len, cap - len, "\r\n");
	return s;
}

Test(head, too_many_fields)
{
	static struct head h;
	char *s = many_fields(PREVIEW_MAX_HEADERS);

	cr_assert_eq(parse(s, &h), 0);
	cr_assert_eq(h.n, PREVIEW_MAX_HEADERS);
	free(s);
	s = many_fields(PREVIEW_MAX_HEADERS + 1);
	cr_assert_eq(parse(s, &h), -E2BIG);
	free(s);
}

Test(head, end)
{
	cr_assert_eq(preview_head_end("GET / HTTP/1.1\r\n\r\n", 18), 18);
	cr_assert_eq(preview_head_end("GET / HTTP/1.1\r\n\r\nGET / HTTP/1.1\r\n\r\n", 36), 18);
	cr_assert_eq(preview_head_end("\r\n\r\n", 4), 4);
	cr_assert_eq(preview_head_end("GET / HTTP/1.1\r\n\r", 17), 0);
	cr_assert_eq(preview_head_end("GET / HTTP/1.1\n\n", 16), 0);
	cr_assert_eq(preview_head_end("GET / HTTP/1.1\r\n\n\r\n", 19), 0);
	cr_assert_eq(preview_head_end("", 0), 0);
	/* the length given bounds the search */
	cr_assert_eq(preview_head_end("GET / HTTP/1.1\r\n\r\n", 17), 0);
}

Test(head, bare_lf)
{
	cr_assert(!preview_has_bare_lf("a\r\nb\r\n", 0, 6));
	cr_assert(preview_has_bare_lf("a\nb", 0, 3));
	cr_assert(preview_has_bare_lf("\n", 0, 1));
	cr_assert(preview_has_bare_lf("a\r\nb\n", 0, 5));
	cr_assert(!preview_has_bare_lf("", 0, 0));
	/* from an offset: the byte before it is looked at */
	cr_assert(!preview_has_bare_lf("a\r\nb", 2, 4));
	cr_assert(preview_has_bare_lf("a\n\nb", 2, 4));
	cr_assert(!preview_has_bare_lf("a\nb\r\n", 3, 5)); /* the bare LF is before from */
	cr_assert(preview_has_bare_lf("a\r\nb\n", 3, 5));
	/* len bounds it */
	cr_assert(!preview_has_bare_lf("ab\n", 0, 2));
}

Test(head, parse_length)
{
	static const struct {
		const char *s;
		uint64_t v;
	} good[] = {
		{ "0", 0 },
		{ "5", 5 },
		{ "0000000000000005", 5 },
		{ "1234567890", 1234567890 },
		{ "9007199254740992", 1ull << 53 },
	};
	static const char *const bad[] = {
		"",
		"+5",
		" 5",
		"5 ",
		"-1",
		"0x5",
		"5a",
		"5,5",
		"1e3",
		"00000000000000005", /* 17 digits */
		"9007199254740993",  /* 2^53 + 1 */
		"9999999999999999",
		"99999999999999999999",
	};
	uint64_t v;

	for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
		v = 7;
		cr_assert_eq(preview_parse_length(good[i].s, strlen(good[i].s), &v), 0, "%s",
			     good[i].s);
		cr_assert_eq(v, good[i].v, "%s", good[i].s);
	}
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		v = 7;
		cr_assert_eq(preview_parse_length(bad[i], strlen(bad[i]), &v), -EBADMSG, "'%s'",
			     bad[i]);
		cr_assert_eq(v, 7, "'%s' set a value", bad[i]);
	}
	/* the length given, not the NUL, ends it */
	cr_assert_eq(preview_parse_length("12", 1, &v), 0);
	cr_assert_eq(v, 1);
}

/* ---- framing --------------------------------------------------------------------------- */

struct outcome {
	int r;
	size_t approved;
	bool done;
};

/* Scans buf fed as it grows by the sizes of steps (the last repeated), checking that approved
 * never goes back nor past what was given; a message done consumes nothing more. */
static struct outcome scan_steps(enum body_kind kind, uint64_t length, const char *buf, size_t len,
				 size_t step)
{
	struct framing f;
	struct outcome o = {};
	size_t have = 0;

	preview_framing_start(&f, kind, length);
	while (have < len) {
		size_t before = o.approved;
		have = have + step < len ? have + step : len;
		o.r = preview_framing_scan(&f, buf, have, &o.approved);
		cr_assert_geq(o.approved, before);
		cr_assert_leq(o.approved, have);
		if (o.r < 0)
			break;
	}
	if (len == 0)
		o.r = preview_framing_scan(&f, buf, 0, &o.approved);
	o.done = f.done;
	if (o.r == 0 && f.done) {
		size_t at = o.approved;
		cr_assert_eq(preview_framing_scan(&f, buf, len, &o.approved), 0);
		cr_assert_eq(o.approved, at, "a done message went on");
	}
	return o;
}

/* Fed whole, byte by byte and cut in two at every place: the same outcome each time. */
static struct outcome scan_all(enum body_kind kind, uint64_t length, const char *buf, size_t len)
{
	struct outcome whole = scan_steps(kind, length, buf, len, len ? len : 1);
	struct outcome bytes = scan_steps(kind, length, buf, len, 1);

	cr_assert_eq(bytes.r, whole.r, "byte by byte: %d, whole: %d", bytes.r, whole.r);
	cr_assert_eq(bytes.approved, whole.approved, "byte by byte: %zu, whole: %zu",
		     bytes.approved, whole.approved);
	cr_assert_eq(bytes.done, whole.done);
	for (size_t cut = 1; cut < len; cut++) {
		struct framing f;
		struct outcome o = {};

		preview_framing_start(&f, kind, length);
		o.r = preview_framing_scan(&f, buf, cut, &o.approved);
		cr_assert_leq(o.approved, cut);
		if (o.r == 0)
			o.r = preview_framing_scan(&f, buf, len, &o.approved);
		cr_assert_eq(o.r, whole.r, "cut at %zu", cut);
		cr_assert_eq(o.approved, whole.approved, "cut at %zu: %zu, whole: %zu", cut,
			     o.approved, whole.approved);
		cr_assert_eq(f.done, whole.done, "cut at %zu", cut);
	}
	return whole;
}

static struct outcome chunked(const char *s)
{
	return scan_all(BODY_CHUNKED, 0, s, strlen(s));
}

/* A chunked body that ends exactly where the pipelined request after it starts. */
static void assert_chunked_ends(const char *body)
{
	char buf[4096];
	size_t n = strlen(body);

	snprintf(buf, sizeof buf, "%sGET /next HTTP/1.1\r\n\r\n", body);
	struct outcome o = chunked(buf);
	cr_assert_eq(o.r, 0, "'%s'", body);
	cr_assert(o.done, "'%s' not done", body);
	cr_assert_eq(o.approved, n, "'%s': %zu approved", body, o.approved);
}

/* A chunked body refused after exactly approved bytes (what came before the fault). */
static void assert_chunked_refused(const char *body, size_t approved)
{
	struct outcome o = chunked(body);
	cr_assert_eq(o.r, -EBADMSG, "'%s': %d", body, o.r);
	cr_assert(!o.done);
	cr_assert_eq(o.approved, approved, "'%s': %zu approved, not %zu", body, o.approved,
		     approved);
}

Test(framing, chunked_well_formed)
{
	assert_chunked_ends("0\r\n\r\n");
	assert_chunked_ends("5\r\nhello\r\n0\r\n\r\n");
	assert_chunked_ends("5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n");
	assert_chunked_ends("A\r\n0123456789\r\n0\r\n\r\n");
	assert_chunked_ends("a\r\n0123456789\r\n0\r\n\r\n");
	assert_chunked_ends("5;name=value\r\nhello\r\n0\r\n\r\n");
	assert_chunked_ends("5;a=\"b c\";d\r\nhello\r\n0;last\r\n\r\n");
	assert_chunked_ends("5;a\tb\r\nhello\r\n0\r\n\r\n");
	/* 15 hex digits */
	assert_chunked_ends("00000000000000a\r\n0123456789\r\n0\r\n\r\n");
	/* data that looks like framing is data */
	assert_chunked_ends("6\r\n0\r\n\r\nX\r\n0\r\n\r\n");
	/* trailers */
	assert_chunked_ends("5\r\nhello\r\n0\r\nX-Sum: 1\r\nY:\r\n\r\n");
}

Test(framing, chunked_incomplete)
{
	static const char *const partial[] = {
		"",
		"5",
		"5\r",
		"5\r\nhel",
		"5\r\nhello",
		"5\r\nhello\r",
		"5\r\nhello\r\n0\r\n",
		"5\r\nhello\r\n0\r\nX: 1\r\n",
		"5\r\nhello\r\n0\r\n\r",
	};
	for (size_t i = 0; i < sizeof partial / sizeof partial[0]; i++) {
		struct outcome o = chunked(partial[i]);
		cr_assert_eq(o.r, 0, "'%s'", partial[i]);
		cr_assert(!o.done, "'%s' done", partial[i]);
	}
	/* what is approved: whole lines and the data, never a line's start */
	cr_assert_eq(chunked("5\r\nhel").approved, 6);
	cr_assert_eq(chunked("5\r\nhello\r").approved, 8);
	cr_assert_eq(chunked("5\r\nhello\r\n0\r\nX: 1\r\n").approved, 19);
	cr_assert_eq(chunked("5\r\nhello\r\n0\r\n\r").approved, 13);
}

Test(framing, chunked_refused)
{
	/* the size line */
	assert_chunked_refused("000000000000000a\r\n0123456789\r\n0\r\n\r\n", 0); /* 16 digits */
	assert_chunked_refused("\r\n", 0);
	assert_chunked_refused(";a\r\n", 0);
	assert_chunked_refused("0x5\r\nhello\r\n0\r\n\r\n", 0);
	assert_chunked_refused("-5\r\nhello\r\n0\r\n\r\n", 0);
	assert_chunked_refused("+5\r\nhello\r\n0\r\n\r\n", 0);
	assert_chunked_refused(" 5\r\nhello\r\n0\r\n\r\n", 0);
	assert_chunked_refused("5 \r\nhello\r\n0\r\n\r\n", 0);
	assert_chunked_refused("5\n\nhello\r\n0\r\n\r\n", 0);	    /* bare LF */
	assert_chunked_refused("5\rhello\r\n0\r\n\r\n", 0);	    /* bare CR */
	assert_chunked_refused("5;a\rb\r\nhello\r\n0\r\n\r\n", 0);  /* CR in an extension */
	assert_chunked_refused("5;a\x01\r\nhello\r\n0\r\n\r\n", 0); /* control in one */
	assert_chunked_refused("5;a\x7f\r\nhello\r\n0\r\n\r\n", 0); /* DEL in one */
	assert_chunked_refused("5\r\nhello\r\n0\n\r\n", 10);	    /* the last one's LF */
	/* a chunk longer than its size: its CRLF is missing where the size says */
	assert_chunked_refused("3\r\nhello\r\n0\r\n\r\n", 6);
	assert_chunked_refused("5\r\nhelloX\r\n0\r\n\r\n", 8);
	assert_chunked_refused("4\r\nhello\n0\r\n\r\n", 7); /* a byte over, then a bare LF */
	assert_chunked_refused("5\r\nhelloX\n0\r\n\r\n", 8);
	assert_chunked_refused("5\r\nhello\n0\r\n\r\n", 8);
	assert_chunked_refused("5\r\nhello\r0\r\n\r\n", 8);
	assert_chunked_refused("5\r\nhello0\r\n\r\n", 8);
	/* trailers */
	assert_chunked_refused("0\r\n: v\r\n\r\n", 3);
	assert_chunked_refused("0\r\n v\r\n\r\n", 3); /* folded */
	assert_chunked_refused("0\r\nX v\r\n\r\n", 3);
	assert_chunked_refused("0\r\nX : v\r\n\r\n", 3);
	assert_chunked_refused("0\r\nX: v\n\r\n", 3);
	assert_chunked_refused("0\r\nX: a\rb\r\n\r\n", 3);
	assert_chunked_refused("0\r\nX: a\x01b\r\n\r\n", 3); /* a control, as in a head */
	assert_chunked_refused("0\r\nX: a\x1b[31m\r\n\r\n", 3);
	assert_chunked_refused("0\r\nX: a\x7f\r\n\r\n", 3);
	static const char nul[] = "0\r\nX: a\0b\r\n\r\n";
	struct outcome o = scan_all(BODY_CHUNKED, 0, nul, sizeof nul - 1);
	cr_assert_eq(o.r, -EBADMSG);
	cr_assert_eq(o.approved, 3);
}

Test(framing, chunked_line_bounds)
{
	static char buf[TRAILER_MAX + 4096];
	size_t n;

	/* a size line of CHUNK_LINE_MAX bytes with its CRLF, and one more */
	n = (size_t)snprintf(buf, sizeof buf, "1;");
	memset(buf + n, 'x', CHUNK_LINE_MAX - 4);
	n += CHUNK_LINE_MAX - 4;
	n += (size_t)snprintf(buf + n, sizeof buf - n, "\r\nA\r\n0\r\n\r\n");
	struct outcome o = scan_all(BODY_CHUNKED, 0, buf, n);
	cr_assert_eq(o.r, 0);
	cr_assert(o.done);
	cr_assert_eq(o.approved, n);
	n = (size_t)snprintf(buf, sizeof buf, "1;");
	memset(buf + n, 'x', CHUNK_LINE_MAX - 3);
	n += CHUNK_LINE_MAX - 3;
	n += (size_t)snprintf(buf + n, sizeof buf - n, "\r\nA\r\n0\r\n\r\n");
	o = scan_steps(BODY_CHUNKED, 0, buf, n, n);
	cr_assert_eq(o.r, -EBADMSG);
	cr_assert_eq(o.approved, 0);
	o = scan_steps(BODY_CHUNKED, 0, buf, n, 1);
	cr_assert_eq(o.r, -EBADMSG);
	cr_assert_eq(o.approved, 0);

	/* trailers up to TRAILER_MAX bytes, not one more */
	n = (size_t)snprintf(buf, sizeof buf, "0\r\n");
	size_t trailer = 0;
	while (trailer + 1002 <= TRAILER_MAX) {
		n += (size_t)snprintf(buf + n, sizeof buf - n, "X: ");
		memset(buf + n, 'v', 997);
		n += 997;
		n += (size_t)snprintf(buf + n, sizeof buf - n, "\r\n");
		trailer += 1002;
	}
	size_t fill = TRAILER_MAX - trailer; /* one last field of exactly this size */
	cr_assert_geq(fill, 5);
	n += (size_t)snprintf(buf + n, sizeof buf - n, "Y:");
	memset(buf + n, 'v', fill - 4);
	n += fill - 4;
	size_t full = n + 2;
	n += (size_t)snprintf(buf + n, sizeof buf - n, "\r\n\r\n");
	o = scan_steps(BODY_CHUNKED, 0, buf, n, n);
	cr_assert_eq(o.r, 0);
	cr_assert(o.done);
	cr_assert_eq(o.approved, n);
	/* the last field a byte longer */
	memmove(buf + full - 1, buf + full - 2, 4);
	buf[full - 2] = 'v';
	o = scan_steps(BODY_CHUNKED, 0, buf, n + 1, n + 1);
	cr_assert_eq(o.r, -EBADMSG);
	cr_assert_eq(o.approved, full - fill);
}

Test(framing, length)
{
	static const char req[] = "helloGET / HTTP/1.1\r\n\r\n";
	struct outcome o = scan_all(BODY_LENGTH, 5, req, sizeof req - 1);

	cr_assert_eq(o.r, 0);
	cr_assert(o.done);
	cr_assert_eq(o.approved, 5);
	/* short: everything given, not done */
	o = scan_all(BODY_LENGTH, 100, req, sizeof req - 1);
	cr_assert_eq(o.r, 0);
	cr_assert(!o.done);
	cr_assert_eq(o.approved, sizeof req - 1);
	/* exactly */
	o = scan_all(BODY_LENGTH, sizeof req - 1, req, sizeof req - 1);
	cr_assert(o.done);
	cr_assert_eq(o.approved, sizeof req - 1);
	/* an empty body and none are done before a byte */
	o = scan_all(BODY_LENGTH, 0, req, sizeof req - 1);
	cr_assert(o.done);
	cr_assert_eq(o.approved, 0);
	o = scan_all(BODY_NONE, 0, req, sizeof req - 1);
	cr_assert(o.done);
	cr_assert_eq(o.approved, 0);
	/* the most a Content-Length can say */
	o = scan_all(BODY_LENGTH, 1ull << 53, req, sizeof req - 1);
	cr_assert(!o.done);
	cr_assert_eq(o.approved, sizeof req - 1);
}

Test(framing, close_and_tunnel)
{
	static const char any[] = "5\r\nhello\r\n\x01\n";
	struct outcome o = scan_all(BODY_CLOSE, 0, any, sizeof any - 1);

	cr_assert_eq(o.r, 0);
	cr_assert(!o.done);
	cr_assert_eq(o.approved, sizeof any - 1);
	o = scan_all(BODY_TUNNEL, 0, any, sizeof any - 1);
	cr_assert(!o.done);
	cr_assert_eq(o.approved, sizeof any - 1);
}

/* ---- the Host's label ------------------------------------------------------------------ */

#define DOMAIN "preview.localhost"

static bool label_of(const char *host, char *label)
{
	memset(label, '#', PREVIEW_LABEL_MAX + 1);
	return preview_host_label(DOMAIN, strlen(DOMAIN), host, strlen(host), label);
}

Test(host, label)
{
	static const struct {
		const char *host, *label;
	} good[] = {
		{ "abc.preview.localhost", "abc" },
		{ "3000-ab12.preview.localhost", "3000-ab12" },
		{ "ABC.Preview.LOCALHOST", "abc" },
		{ "abc.preview.localhost.", "abc" },
		{ "abc.preview.localhost:8081", "abc" },
		{ "abc.preview.localhost.:8081", "abc" },
		{ "a.preview.localhost", "a" },
	};
	char label[PREVIEW_LABEL_MAX + 1];

	for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
		cr_assert(label_of(good[i].host, label), "%s", good[i].host);
		cr_assert_str_eq(label, good[i].label);
	}
	/* 63 characters, the most a label has */
	char host[256];
	memset(host, 'a', 63);
	snprintf(host + 63, sizeof host - 63, "." DOMAIN);
	cr_assert(label_of(host, label));
	cr_assert_eq(strlen(label), 63);
	memset(host, 'a', 64);
	snprintf(host + 64, sizeof host - 64, "." DOMAIN);
	cr_assert(!label_of(host, label));
}

Test(host, refused)
{
	static const char *const bad[] = {
		"",
		DOMAIN,
		"." DOMAIN,
		"a.b." DOMAIN,
		"a..preview.localhost",
		"abc.preview.localhost..",
		"abc.other.localhost",
		"abc.xpreview.localhost",
		"abc.preview.localhost.evil",
		"abc-preview.localhost",
		"abc.preview.localhos",
		"abc.preview.localhost:80x",
		"abc.preview.localhost:-1",
		"abc.preview.localhost:80:80",
		"abc.preview.localhost :80",
		"ab_c." DOMAIN,
		"a b." DOMAIN,
		"a%2e." DOMAIN,
		"a*." DOMAIN,
		"\xc3\xa9." DOMAIN,
		"[::1]",
		"[::1]:8081",
		"127.0.0.1:8081",
		"abc@evil." DOMAIN,
	};
	char label[PREVIEW_LABEL_MAX + 1];

	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		cr_assert(!label_of(bad[i], label), "'%s' gave '%s'", bad[i], label);
	/* a NUL in the host: the whole value counts */
	static const char nul[] = "abc\0." DOMAIN;
	cr_assert(!preview_host_label(DOMAIN, strlen(DOMAIN), nul, sizeof nul - 1, label));
}

/* ---- the station's parameter ----------------------------------------------------------- */

static void assert_strip(const char *target, const char *want, const char *want_tok)
{
	struct text t = {};
	char tok[32];

	memset(tok, '#', sizeof tok);
	preview_target_strip(target, strlen(target), &t, tok, sizeof tok);
	cr_assert(!t.failed);
	cr_assert_str_eq(t.p ? t.p : "", want, "'%s'", target);
	cr_assert_str_eq(tok, want_tok, "'%s'", target);
	free(t.p);
}

Test(target, strip)
{
	assert_strip("/p", "/p", "");
	assert_strip("/p?a=1&b=2", "/p?a=1&b=2", "");
	assert_strip("/p?station_preview_token=abc", "/p", "abc");
	assert_strip("/p?station_preview_token=abc&a=1&b=2", "/p?a=1&b=2", "abc");
	assert_strip("/p?a=1&station_preview_token=abc&b=2", "/p?a=1&b=2", "abc");
	assert_strip("/p?a=1&b=2&station_preview_token=abc", "/p?a=1&b=2", "abc");
	assert_strip("/?station%5Fpreview_token=abc&a=1", "/?a=1", "abc");
	assert_strip("/?%73tation_preview_token=abc", "/", "abc");
	assert_strip("/?station_preview_token=a%2Bb+c", "/", "a+b c");
	/* present but empty: a wrong token, never none */
	assert_strip("/?station_preview_token=", "/", "-");
	assert_strip("/?station_preview_token&a=1", "/?a=1", "-");
	/* too long for tok (32 bytes) */
	assert_strip("/?station_preview_token=0123456789012345678901234567890123456789", "/", "-");
	/* twice: the last */
	assert_strip("/?station_preview_token=a&x=1&station_preview_token=b", "/?x=1", "b");
	/* names that are not the parameter stay, in order */
	assert_strip("/?station_preview_token2=x&station_preview=y&STATION_PREVIEW_TOKEN=z",
		     "/?station_preview_token2=x&station_preview=y&STATION_PREVIEW_TOKEN=z", "");
	assert_strip("/?z=1&station_preview_token=t&y=2&a=3&a=4", "/?z=1&y=2&a=3&a=4", "t");
	/* empty pairs around it stay as they were */
	assert_strip("/?a=1&&station_preview_token=t&b", "/?a=1&&b", "t");
	/* the path keeps its own look-alike */
	assert_strip("/station_preview_token=x?y=1", "/station_preview_token=x?y=1", "");
}

/* ---- the station's cookie -------------------------------------------------------------- */

static void assert_cookie(const char *value, const char *want, const char *want_tok)
{
	struct header f = { "Cookie", value, 6, strlen(value) };
	struct text t = {};
	char tok[32] = "kept";

	preview_cookie_strip(&f, &t, tok, sizeof tok);
	cr_assert(!t.failed);
	cr_assert_str_eq(t.p ? t.p : "", want, "'%s'", value);
	cr_assert_str_eq(tok, want_tok, "'%s'", value);
	free(t.p);
}

Test(cookie, strip)
{
	assert_cookie("a=1; b=2", "Cookie: a=1; b=2\r\n", "kept");
	assert_cookie("station_preview=tok", "", "tok");
	assert_cookie("a=1; station_preview=tok; b=2", "Cookie: a=1; b=2\r\n", "tok");
	assert_cookie("station_preview=tok; a=1", "Cookie: a=1\r\n", "tok");
	assert_cookie("a=1;station_preview=tok", "Cookie: a=1\r\n", "tok");
	assert_cookie("station_preview=x; station_preview=y", "", "y");
	assert_cookie("station_preview2=x; station_preview=tok", "Cookie: station_preview2=x\r\n",
		      "tok");
	assert_cookie("xstation_preview=x; station_preview_token=y",
		      "Cookie: xstation_preview=x; station_preview_token=y\r\n", "kept");
	/* the name is case-sensitive: another cookie, the app's */
	assert_cookie("Station_Preview=x; STATION_PREVIEW=y",
		      "Cookie: Station_Preview=x; STATION_PREVIEW=y\r\n", "kept");
	/* a value too long for tok leaves it, and the cookie still goes */
	assert_cookie("a=1; station_preview=0123456789012345678901234567890123456789",
		      "Cookie: a=1\r\n", "kept");
	/* the name alone (no '='): an empty token, and the pair goes */
	assert_cookie("a=1; station_preview", "Cookie: a=1\r\n", "");
	assert_cookie("station_preview", "", "");
	/* empty pairs go */
	assert_cookie(";; a=1 ;", "Cookie: a=1\r\n", "kept");
}

/* ---- an app's Set-Cookie --------------------------------------------------------------- */

static void assert_set_cookie(const char *value, const char *want)
{
	struct header f = { "Set-Cookie", value, 10, strlen(value) };
	struct text t = {};

	preview_set_cookie_add(&t, &f);
	cr_assert(!t.failed);
	cr_assert_str_eq(t.p, want, "'%s'", value);
	free(t.p);
}

Test(set_cookie, domain_removed)
{
	assert_set_cookie("sid=1", "Set-Cookie: sid=1\r\n");
	assert_set_cookie("sid=1; Path=/; HttpOnly", "Set-Cookie: sid=1; Path=/; HttpOnly\r\n");
	assert_set_cookie("sid=1; Domain=example.com; Path=/; HttpOnly",
			  "Set-Cookie: sid=1; Path=/; HttpOnly\r\n");
	assert_set_cookie("sid=1;domain=.preview.localhost;Secure",
			  "Set-Cookie: sid=1; Secure\r\n");
	assert_set_cookie("sid=1; DOMAIN = x; Path=/", "Set-Cookie: sid=1; Path=/\r\n");
	assert_set_cookie("sid=1; \tDoMaIn\t=x", "Set-Cookie: sid=1\r\n");
	assert_set_cookie("sid=1; Domain", "Set-Cookie: sid=1\r\n");
	assert_set_cookie("sid=1; Domain=a; Max-Age=5; domain=b",
			  "Set-Cookie: sid=1; Max-Age=5\r\n");
	/* look-alikes stay */
	assert_set_cookie("sid=1; Domainx=1; X-Domain=2",
			  "Set-Cookie: sid=1; Domainx=1; X-Domain=2\r\n");
	/* the cookie's own name=value is never an attribute */
	assert_set_cookie("domain=x; Path=/", "Set-Cookie: domain=x; Path=/\r\n");
	assert_set_cookie("Domain=x; Domain=y", "Set-Cookie: Domain=x\r\n");
}
