/* SPDX-License-Identifier: MIT */
/* The preview listener's HTTP/1.1 text (src/api/preview-http.c) against a hostile client and
 * app. The framing scan approves bytes that are then forwarded verbatim, so one that approves a
 * byte it should not is request smuggling; the checks here are about where it stops.
 *
 * Input: two 16-bit cut points and a 16-bit Content-Length, then the bytes. The bytes are:
 *  - a head: split (preview_head_parse) up to its end (preview_head_end) and whole; a head
 *    taken holds no bare CR or LF and no NUL, its names are tokens, its values are trimmed and
 *    free of controls but tab;
 *  - a chunked body and a Content-Length body, scanned whole, in three pieces cut at the
 *    points, and (when short) byte by byte: the same approved bytes, end and refusal each way;
 *    approved never goes back nor past what was given; a message done consumes nothing more
 *    when scanned again; a chunked body done is exactly a complete chunked message by an
 *    independent reading of RFC 9112 (and one complete is done there);
 *  - a request target, a Cookie value, a Host value and a Set-Cookie value: the output never
 *    holds the station's parameter or cookie by name, a label is one lower-case
 *    [a-z0-9-] label, an app's cookie keeps no Domain.
 *
 * fuzz-max-len: 4096 */

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "api/preview-http.h"
#include "fuzz.h"

#define CHECK(x)                                                                                   \
	do {                                                                                       \
		if (!(x))                                                                          \
			abort();                                                                   \
	} while (0)

#define DOMAIN "preview.localhost"
#define MIN_SIZE(a, b) ((a) < (b) ? (a) : (b))
#define MAX_SIZE(a, b) ((a) > (b) ? (a) : (b))

/* ---- heads ----------------------------------------------------------------------------- */

static void check_head(const char *buf, size_t len)
{
	static struct head h;
	int r = preview_head_parse(buf, len, &h);

	CHECK(r == 0 || r == -EBADMSG || r == -E2BIG);
	if (r != 0)
		return;
	CHECK(h.n <= PREVIEW_MAX_HEADERS);
	CHECK(h.line >= buf && h.line + h.line_len <= buf + len);
	CHECK(!memchr(h.line, '\r', h.line_len) && !memchr(h.line, '\n', h.line_len));
	CHECK(!memchr(h.line, 0, h.line_len));
	for (size_t i = 0; i < h.n; i++) {
		const struct header *f = &h.h[i];
		CHECK(f->name >= buf && f->name_len > 0 && f->name + f->name_len < buf + len);
		CHECK(f->name[f->name_len] == ':');
		for (size_t k = 0; k < f->name_len; k++)
			CHECK(preview_tchar((unsigned char)f->name[k]));
		CHECK(f->value >= f->name + f->name_len + 1 &&
		      f->value + f->value_len <= buf + len);
		if (f->value_len) {
			CHECK(f->value[0] != ' ' && f->value[0] != '\t');
			CHECK(f->value[f->value_len - 1] != ' ' &&
			      f->value[f->value_len - 1] != '\t');
		}
		for (size_t k = 0; k < f->value_len; k++)
			CHECK(((unsigned char)f->value[k] >= 0x20 || f->value[k] == '\t') &&
			      (unsigned char)f->value[k] != 0x7f);
	}
}

static void check_heads(const char *buf, size_t len)
{
	size_t end = preview_head_end(buf, len);

	check_head(buf, len);
	if (end == 0)
		return;
	CHECK(end >= 4 && end <= len && memcmp(buf + end - 4, "\r\n\r\n", 4) == 0);
	check_head(buf, end);
	static struct head h;
	if (preview_head_parse(buf, end, &h) == 0) {
		/* every line of a head taken ends in CRLF: no bare CR or LF, no NUL */
		CHECK(!preview_has_bare_lf(buf, 0, end));
		CHECK(!memchr(buf, 0, end));
		for (size_t i = 0; i < end; i++)
			if (buf[i] == '\r')
				CHECK(i + 1 < end && buf[i + 1] == '\n');
	}
}

/* ---- framing --------------------------------------------------------------------------- */

struct outcome {
	int r;
	size_t approved;
	bool done;
};

/* One scan of buf[0, have) that must keep approved between where it was and have. */
static int scan(struct framing *f, const char *buf, size_t have, size_t *approved)
{
	size_t before = *approved;
	int r = preview_framing_scan(f, buf, have, approved);

	CHECK(r == 0 || r == -EBADMSG);
	CHECK(*approved >= before && *approved <= have);
	if (f->done) {
		/* a message done goes no further */
		size_t at = *approved;
		CHECK(preview_framing_scan(f, buf, have, approved) == 0 && *approved == at);
	}
	return r;
}

/* buf fed as it grows to each of cuts (ascending, the last one len). */
static struct outcome feed(enum body_kind kind, uint64_t length, const char *buf,
			   const size_t *cuts, size_t n_cuts)
{
	struct framing f;
	struct outcome o = {};

	preview_framing_start(&f, kind, length);
	for (size_t i = 0; i < n_cuts && o.r == 0; i++)
		o.r = scan(&f, buf, cuts[i], &o.approved);
	if (o.r < 0)
		CHECK(!f.done);
	o.done = f.done;
	return o;
}

static bool same(struct outcome a, struct outcome b)
{
	return a.r == b.r && a.approved == b.approved && a.done == b.done;
}

static int hexval(unsigned char ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	if (ch >= 'A' && ch <= 'F')
		return ch - 'A' + 10;
	return -1;
}

/* A line from b[i]: its length without CRLF in *n; 1 when whole, 0 while it may still come,
 * -1 when malformed (no LF within CHUNK_LINE_MAX bytes, a CR anywhere but before the LF). */
static int ref_line(const unsigned char *b, size_t len, size_t i, size_t *n)
{
	for (size_t k = i; k < len; k++) {
		if (k - i >= CHUNK_LINE_MAX)
			return -1;
		if (b[k] == '\n') {
			if (k == i || b[k - 1] != '\r')
				return -1;
			*n = k - 1 - i;
			for (size_t q = i; q < k - 1; q++)
				if (b[q] == '\r')
					return -1;
			return 1;
		}
	}
	return len - i >= CHUNK_LINE_MAX ? -1 : 0;
}

/* RFC 9112 7.1, as strictly as the listener wants it, over the whole buffer: 1 and the end in
 * *end when b holds a complete chunked message, 0 when a prefix of one, -1 when none. */
static int ref_chunked(const unsigned char *b, size_t len, size_t *end)
{
	size_t i = 0, n, trailer = 0;
	int r;

	for (;;) {
		if ((r = ref_line(b, len, i, &n)) <= 0)
			return r;
		size_t d = 0;
		uint64_t size = 0;
		while (d < n && hexval(b[i + d]) >= 0)
			size = size * 16 + (uint64_t)hexval(b[i + d++]);
		if (d == 0 || d > 15 || (d < n && b[i + d] != ';'))
			return -1;
		for (size_t k = d; k < n; k++)
			if ((b[i + k] < 0x20 && b[i + k] != '\t') || b[i + k] == 0x7f)
				return -1;
		i += n + 2;
		if (size == 0)
			break;
		if (len - i < size)
			return 0;
		i += size;
		if (len - i < 2)
			return len - i == 1 && b[i] != '\r' ? -1 : 0;
		if (b[i] != '\r' || b[i + 1] != '\n')
			return -1;
		i += 2;
	}
	for (;;) {
		if ((r = ref_line(b, len, i, &n)) <= 0)
			return r;
		if (n == 0) {
			*end = i + 2;
			return 1;
		}
		size_t k = 0;
		while (k < n && preview_tchar(b[i + k]))
			k++;
		if (k == 0 || k == n || b[i + k] != ':')
			return -1;
		for (size_t v = k + 1; v < n; v++) /* a value, as a head's (RFC 9110 5.5) */
			if ((b[i + v] < 0x20 && b[i + v] != '\t') || b[i + v] == 0x7f)
				return -1;
		trailer += n + 2;
		if (trailer > TRAILER_MAX)
			return -1;
		i += n + 2;
	}
}

static void check_framing(enum body_kind kind, uint64_t length, const char *buf, size_t len,
			  size_t cut1, size_t cut2)
{
	size_t whole_cut[] = { len };
	size_t cuts[] = { MIN_SIZE(cut1, cut2), MAX_SIZE(cut1, cut2), len };
	struct outcome whole = feed(kind, length, buf, whole_cut, 1);
	struct outcome split = feed(kind, length, buf, cuts, 3);

	CHECK(same(whole, split));
	if (len <= 1024) {
		struct outcome bytes;
		struct framing f;

		preview_framing_start(&f, kind, length);
		bytes = (struct outcome){};
		for (size_t have = 1; have <= len && bytes.r == 0; have++)
			bytes.r = scan(&f, buf, have, &bytes.approved);
		bytes.done = f.done;
		CHECK(same(whole, bytes));
	}

	if (kind == BODY_LENGTH) {
		CHECK(whole.r == 0);
		CHECK(whole.approved == MIN_SIZE((uint64_t)len, length));
		CHECK(whole.done == (length <= len));
	} else if (kind == BODY_CHUNKED) {
		size_t end = 0;
		int ref = ref_chunked((const unsigned char *)buf, len, &end);
		if (whole.done)
			CHECK(ref == 1 && end == whole.approved);
		if (ref == 1)
			CHECK(whole.r == 0 && whole.done && whole.approved == end);
		if (ref == 0)
			CHECK(whole.r == 0 && !whole.done);
		if (whole.r < 0)
			CHECK(ref < 0);
	}
}

/* ---- the station's parameter and cookie, hosts, an app's cookies ------------------------ */

static size_t decode(const char *s, size_t n, char *out)
{
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		if (s[i] == '%' && i + 2 < n && hexval((unsigned char)s[i + 1]) >= 0 &&
		    hexval((unsigned char)s[i + 2]) >= 0) {
			out[k++] = (char)(hexval((unsigned char)s[i + 1]) * 16 +
					  hexval((unsigned char)s[i + 2]));
			i += 2;
		} else {
			out[k++] = s[i] == '+' ? ' ' : s[i];
		}
	}
	return k;
}

static void check_target(const char *target, size_t n)
{
	struct text t = {};
	char tok[160];

	preview_target_strip(target, n, &t, tok, sizeof tok);
	CHECK(!t.failed);
	CHECK(t.len <= n);
	CHECK(memchr(tok, 0, sizeof tok));
	const char *q = memchr(target, '?', n);
	if (!q) {
		CHECK(t.len == n && memcmp(t.p, target, n) == 0);
		CHECK(tok[0] == 0);
		free(t.p);
		return;
	}
	size_t path = (size_t)(q - target);
	CHECK(t.len >= path && memcmp(t.p, target, path) == 0);
	/* no pair left is the station's by its decoded name */
	char *name = malloc(n + 1);
	size_t i = path + 1;
	while (i <= t.len) {
		size_t j = i;
		while (j < t.len && t.p[j] != '&')
			j++;
		const char *eq = memchr(t.p + i, '=', j - i);
		size_t k = decode(t.p + i, eq ? (size_t)(eq - t.p) - i : j - i, name);
		CHECK(!(k == strlen(TOKEN_PARAM) && memcmp(name, TOKEN_PARAM, k) == 0));
		i = j + 1;
	}
	free(name);
	free(t.p);
}

static void check_cookie(const char *v, size_t n)
{
	struct header f = { "Cookie", v, 6, n };
	struct text t = {};
	char tok[160] = "kept";

	preview_cookie_strip(&f, &t, tok, sizeof tok);
	CHECK(!t.failed);
	CHECK(memchr(tok, 0, sizeof tok));
	if (t.len == 0) {
		free(t.p);
		return;
	}
	CHECK(t.len >= 10 && memcmp(t.p, "Cookie: ", 8) == 0 &&
	      memcmp(t.p + t.len - 2, "\r\n", 2) == 0);
	const char *p = t.p + 8;
	size_t len = t.len - 10, i = 0;
	while (i <= len) {
		size_t j = i;
		while (j < len && p[j] != ';')
			j++;
		size_t a = i, b = j;
		while (a < b && p[a] == ' ')
			a++;
		while (b > a && p[b - 1] == ' ')
			b--;
		CHECK(b > a); /* no empty pair */
		const char *eq = memchr(p + a, '=', b - a);
		size_t nlen = eq ? (size_t)(eq - (p + a)) : b - a;
		CHECK(!(nlen == strlen(TOKEN_COOKIE) && memcmp(p + a, TOKEN_COOKIE, nlen) == 0));
		i = j + 1;
	}
	free(t.p);
}

static void check_host(const char *v, size_t n)
{
	char label[PREVIEW_LABEL_MAX + 1];

	if (!preview_host_label(DOMAIN, strlen(DOMAIN), v, n, label))
		return;
	size_t ln = strnlen(label, sizeof label);
	CHECK(ln >= 1 && ln <= PREVIEW_LABEL_MAX);
	for (size_t i = 0; i < ln; i++)
		CHECK((label[i] >= 'a' && label[i] <= 'z') ||
		      (label[i] >= '0' && label[i] <= '9') || label[i] == '-');
	/* the label is the host's first label, then the domain */
	CHECK(n > ln + strlen(DOMAIN) && strncasecmp(v, label, ln) == 0 && v[ln] == '.');
	CHECK(strncasecmp(v + ln + 1, DOMAIN, strlen(DOMAIN)) == 0);
}

static void check_set_cookie(const char *v, size_t n)
{
	struct header f = { "Set-Cookie", v, 10, n };
	struct text t = {};

	preview_set_cookie_add(&t, &f);
	CHECK(!t.failed);
	CHECK(t.len >= 14 && memcmp(t.p, "Set-Cookie: ", 12) == 0 &&
	      memcmp(t.p + t.len - 2, "\r\n", 2) == 0);
	const char *p = t.p + 12;
	size_t len = t.len - 14, i = 0;
	bool first = true;
	while (i < len) {
		size_t j = i;
		while (j < len && p[j] != ';')
			j++;
		size_t a = i, b;
		while (a < j && (p[a] == ' ' || p[a] == '\t'))
			a++;
		const char *eq = memchr(p + a, '=', j - a);
		b = eq ? (size_t)(eq - p) : j;
		while (b > a && (p[b - 1] == ' ' || p[b - 1] == '\t'))
			b--;
		CHECK(first || !(b - a == 6 && strncasecmp(p + a, "domain", 6) == 0));
		first = false;
		i = j + 1;
	}
	free(t.p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 6)
		return 0;
	size_t cut1 = (size_t)(data[0] | data[1] << 8), cut2 = (size_t)(data[2] | data[3] << 8);
	uint64_t length = (uint64_t)(data[4] | data[5] << 8);
	size_t len = size - 6;
	/* a copy of its own, so that a read past the end is ASan's */
	char *buf = malloc(len ? len : 1);
	memcpy(buf, data + 6, len);
	cut1 %= len + 1;
	cut2 %= len + 1;

	check_heads(buf, len);
	check_framing(BODY_CHUNKED, 0, buf, len, cut1, cut2);
	check_framing(BODY_LENGTH, length, buf, len, cut1, cut2);
	check_target(buf, len);
	check_cookie(buf, len);
	check_host(buf, len);
	check_set_cookie(buf, len);
	free(buf);
	return 0;
}
