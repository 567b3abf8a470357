/* SPDX-License-Identifier: MIT */
/* The preview listener's HTTP/1.1 text (preview-http.h): heads, framing, the station's own
 * parameter and cookie. Pure functions over bytes, so that they are tested and fuzzed alone. */

#include "api/preview-http.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "basic/cleanup.h"

/* ---- small parsing helpers ------------------------------------------------------------- */

/* A byte a field value may not hold (RFC 9110 §5.5): a control other than tab, or DEL. */
static bool value_forbidden(unsigned char ch)
{
	return (ch < 0x20 && ch != '\t') || ch == 0x7f;
}

bool preview_tchar(unsigned char ch)
{
	return isalnum(ch) || (ch && strchr("!#$%&'*+-.^_`|~", ch));
}

bool preview_token_eq(const char *s, size_t n, const char *lit)
{
	return strlen(lit) == n && strncasecmp(s, lit, n) == 0;
}

/* Whether the comma-separated list s (n bytes) holds the token lit (case-insensitive). */
bool preview_list_has(const char *s, size_t n, const char *lit)
{
	size_t i = 0;
	while (i < n) {
		size_t j = i;
		while (j < n && s[j] != ',')
			j++;
		size_t a = i, b = j;
		while (a < b && (s[a] == ' ' || s[a] == '\t'))
			a++;
		while (b > a && (s[b - 1] == ' ' || s[b - 1] == '\t'))
			b--;
		if (preview_token_eq(s + a, b - a, lit))
			return true;
		i = j + 1;
	}
	return false;
}

static int hexval(char ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	ch = (char)tolower((unsigned char)ch);
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	return -1;
}

/* Percent-decodes s (n bytes, '+' as space) into out (at most out_size - 1 bytes); false when
 * it does not fit. */
bool preview_percent_decode(const char *s, size_t n, char *out, size_t out_size)
{
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		char ch = s[i];
		if (ch == '%' && i + 2 < n && hexval(s[i + 1]) >= 0 && hexval(s[i + 2]) >= 0) {
			ch = (char)(hexval(s[i + 1]) * 16 + hexval(s[i + 2]));
			i += 2;
		} else if (ch == '+') {
			ch = ' ';
		}
		if (k + 1 >= out_size)
			return false;
		out[k++] = ch;
	}
	out[k] = 0;
	return true;
}

/* ---- heads ----------------------------------------------------------------------------- */

/* The end of a head (the byte after its empty line) in buf, or 0 while it is incomplete. */
size_t preview_head_end(const char *buf, size_t len)
{
	const char *p = memmem(buf, len, "\r\n\r\n", 4);
	return p ? (size_t)(p - buf) + 4 : 0;
}

/* Whether buf holds a LF that no CR precedes: a head that ends its lines so never holds the
 * CRLF CRLF preview_head_end() waits for, and is refused at once rather than at the head timeout. */
bool preview_has_bare_lf(const char *buf, size_t from, size_t len)
{
	for (const char *p = memchr(buf + from, '\n', len - from); p;
	     p = memchr(p + 1, '\n', len - (size_t)(p + 1 - buf)))
		if (p == buf || p[-1] != '\r')
			return true;
	return false;
}

/* Splits a complete head (ending in CRLF CRLF) into its start line and fields, strictly:
 * every line ends in CRLF (no bare CR or LF, no NUL), no folded line, a field name is a token
 * followed at once by ':'. -EBADMSG otherwise, -E2BIG past PREVIEW_MAX_HEADERS. */
int preview_head_parse(const char *buf, size_t len, struct head *h)
{
	size_t i = 0;
	bool first = true;

	h->n = 0;
	for (;;) {
		const char *cr = memchr(buf + i, '\r', len - i);
		if (!cr || (size_t)(cr - buf) + 1 >= len || cr[1] != '\n')
			return -EBADMSG;
		size_t end = (size_t)(cr - buf);
		const char *line = buf + i;
		size_t n = end - i;
		if (memchr(line, '\n', n) || memchr(line, 0, n))
			return -EBADMSG;
		i = end + 2;
		if (first) {
			h->line = line;
			h->line_len = n;
			first = false;
			continue;
		}
		if (n == 0)
			return 0;
		if (line[0] == ' ' || line[0] == '\t')
			return -EBADMSG; /* obs-fold */
		size_t k = 0;
		while (k < n && preview_tchar((unsigned char)line[k]))
			k++;
		if (k == 0 || k == n || line[k] != ':')
			return -EBADMSG;
		if (h->n == PREVIEW_MAX_HEADERS)
			return -E2BIG;
		struct header *f = &h->h[h->n++];
		f->name = line;
		f->name_len = k;
		size_t a = k + 1, b = n;
		while (a < b && (line[a] == ' ' || line[a] == '\t'))
			a++;
		while (b > a && (line[b - 1] == ' ' || line[b - 1] == '\t'))
			b--;
		for (size_t q = a; q < b; q++)
			if (value_forbidden((unsigned char)line[q]))
				return -EBADMSG;
		f->value = line + a;
		f->value_len = b - a;
	}
}

bool preview_header_is(const struct header *f, const char *name)
{
	return preview_token_eq(f->name, f->name_len, name);
}

/* A Content-Length value: digits only, at most 2^53. */
int preview_parse_length(const char *s, size_t n, uint64_t *ret)
{
	uint64_t v = 0;
	if (n == 0 || n > 16)
		return -EBADMSG;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -EBADMSG;
		v = v * 10 + (uint64_t)(s[i] - '0');
	}
	if (v > (1ull << 53))
		return -EBADMSG;
	*ret = v;
	return 0;
}

void preview_text_add(struct text *t, const char *s, size_t n)
{
	if (t->failed)
		return;
	if (t->len + n + 1 > t->cap) {
		size_t cap = MAX(t->cap * 2, t->len + n + 256);
		char *p = realloc(t->p, cap);
		if (!p) {
			t->failed = true;
			return;
		}
		t->p = p;
		t->cap = cap;
	}
	memcpy(t->p + t->len, s, n);
	t->len += n;
	t->p[t->len] = 0;
}

void preview_text_str(struct text *t, const char *s)
{
	preview_text_add(t, s, strlen(s));
}

void preview_text_field(struct text *t, const char *name, const char *value, size_t n)
{
	preview_text_str(t, name);
	preview_text_add(t, ": ", 2);
	preview_text_add(t, value, n);
	preview_text_add(t, "\r\n", 2);
}

void preview_header_add(struct text *t, const struct header *f)
{
	preview_text_add(t, f->name, f->name_len);
	preview_text_add(t, ": ", 2);
	preview_text_add(t, f->value, f->value_len);
	preview_text_add(t, "\r\n", 2);
}

/* ---- framing --------------------------------------------------------------------------- */

void preview_framing_start(struct framing *f, enum body_kind kind, uint64_t length)
{
	*f = (struct framing){ .kind = kind, .remaining = length };
	if (kind == BODY_NONE || (kind == BODY_LENGTH && length == 0))
		f->done = true;
}

/* A chunk-size line: 1 to 16 hex digits, then CRLF or ';' and extensions without controls.
 * The size's value in *ret. */
static int chunk_size_line(const char *s, size_t n, uint64_t *ret)
{
	uint64_t v = 0;
	size_t i = 0;
	while (i < n && hexval(s[i]) >= 0) {
		if (i == 15)
			return -EBADMSG;
		v = v * 16 + (uint64_t)hexval(s[i]);
		i++;
	}
	if (i == 0)
		return -EBADMSG;
	if (i < n) {
		if (s[i] != ';')
			return -EBADMSG;
		for (size_t k = i; k < n; k++)
			if (value_forbidden((unsigned char)s[k]))
				return -EBADMSG;
	}
	*ret = v;
	return 0;
}

/* Moves *approved forward over what the framing allows; -EBADMSG on a malformed chunked
 * body. */
int preview_framing_scan(struct framing *f, const char *buf, size_t len, size_t *approved)
{
	while (!f->done && *approved < len) {
		size_t avail = len - *approved;
		const char *p = buf + *approved;

		switch (f->kind) {
		case BODY_NONE:
			f->done = true;
			break;
		case BODY_CLOSE:
		case BODY_TUNNEL:
			*approved = len;
			break;
		case BODY_LENGTH: {
			size_t take = (size_t)MIN((uint64_t)avail, f->remaining);
			*approved += take;
			f->remaining -= take;
			if (f->remaining == 0)
				f->done = true;
			break;
		}
		case BODY_CHUNKED:
			switch (f->phase) {
			case CHUNK_SIZE:
			case CHUNK_TRAILER: {
				const char *lf =
					memchr(p, '\n', MIN(avail, (size_t)CHUNK_LINE_MAX));
				if (!lf) {
					if (avail >= CHUNK_LINE_MAX)
						return -EBADMSG;
					return 0;
				}
				size_t n = (size_t)(lf - p);
				if (n == 0 || p[n - 1] != '\r' || memchr(p, '\r', n - 1))
					return -EBADMSG;
				n--; /* without the CR */
				if (f->phase == CHUNK_SIZE) {
					uint64_t size;
					if (chunk_size_line(p, n, &size) < 0)
						return -EBADMSG;
					*approved += n + 2;
					if (size == 0) {
						f->phase = CHUNK_TRAILER;
					} else {
						f->phase = CHUNK_DATA;
						f->remaining = size;
					}
				} else if (n == 0) {
					*approved += 2;
					f->done = true;
				} else {
					size_t k = 0;
					while (k < n && preview_tchar((unsigned char)p[k]))
						k++;
					f->trailer += n + 2;
					if (k == 0 || k == n || p[k] != ':' ||
					    f->trailer > TRAILER_MAX)
						return -EBADMSG;
					for (size_t q = k + 1; q < n; q++)
						if (value_forbidden((unsigned char)p[q]))
							return -EBADMSG;
					*approved += n + 2;
				}
				break;
			}
			case CHUNK_DATA: {
				size_t take = (size_t)MIN((uint64_t)avail, f->remaining);
				*approved += take;
				f->remaining -= take;
				if (f->remaining == 0)
					f->phase = CHUNK_DATA_END;
				break;
			}
			case CHUNK_DATA_END:
				if (avail < 2)
					return 0;
				if (p[0] != '\r' || p[1] != '\n')
					return -EBADMSG;
				*approved += 2;
				f->phase = CHUNK_SIZE;
				break;
			}
			break;
		}
	}
	return 0;
}

/* The label of a Host value under the domain: lower-cased into label; false when the host is
 * not <one label>.<domain>[:port]. */
bool preview_host_label(const char *domain, size_t domain_len, const char *v, size_t n, char *label)
{
	size_t end = n;
	if (n == 0 || v[0] == '[')
		return false;
	const char *colon = memchr(v, ':', n);
	if (colon) {
		end = (size_t)(colon - v);
		for (size_t i = end + 1; i < n; i++)
			if (v[i] < '0' || v[i] > '9')
				return false;
	}
	if (end > 0 && v[end - 1] == '.')
		end--; /* a fully qualified name */
	if (end < domain_len + 2 || v[end - domain_len - 1] != '.' ||
	    strncasecmp(v + end - domain_len, domain, domain_len) != 0)
		return false;
	size_t ln = end - domain_len - 1;
	if (ln > PREVIEW_LABEL_MAX)
		return false;
	for (size_t i = 0; i < ln; i++) {
		char ch = (char)tolower((unsigned char)v[i]);
		if (!(isalnum((unsigned char)ch) || ch == '-'))
			return false;
		label[i] = ch;
	}
	label[ln] = 0;
	return true;
}

/* The target without the station's parameter into t; the parameter's (last) value into tok
 * (empty when absent). */
void preview_target_strip(const char *target, size_t n, struct text *t, char *tok, size_t tok_size)
{
	const char *q = memchr(target, '?', n);
	tok[0] = 0;
	if (!q) {
		preview_text_add(t, target, n);
		return;
	}
	preview_text_add(t, target, (size_t)(q - target));
	size_t i = (size_t)(q - target) + 1;
	bool first = true;
	while (i <= n) {
		size_t j = i;
		while (j < n && target[j] != '&')
			j++;
		const char *pair = target + i;
		size_t plen = j - i;
		const char *eq = memchr(pair, '=', plen);
		size_t nlen = eq ? (size_t)(eq - pair) : plen;
		char name[64];
		if (preview_percent_decode(pair, nlen, name, sizeof name) &&
		    strcmp(name, TOKEN_PARAM) == 0) {
			/* present but empty or too long: a wrong token, never none */
			if (!eq ||
			    !preview_percent_decode(eq + 1, plen - nlen - 1, tok, tok_size) ||
			    !tok[0])
				snprintf(tok, tok_size, "-");
		} else if (plen > 0 || j < n) {
			preview_text_add(t, first ? "?" : "&", 1);
			preview_text_add(t, pair, plen);
			first = false;
		}
		i = j + 1;
	}
}

/* The value of the station's cookie among a Cookie field's pairs into tok (kept when absent),
 * and the field without it into t (nothing when no pair is left). */
void preview_cookie_strip(const struct header *f, struct text *t, char *tok, size_t tok_size)
{
	struct text rest = {};
	size_t i = 0, n = f->value_len;
	const char *v = f->value;
	while (i < n) {
		size_t j = i;
		while (j < n && v[j] != ';')
			j++;
		size_t a = i, b = j;
		while (a < b && v[a] == ' ')
			a++;
		while (b > a && v[b - 1] == ' ')
			b--;
		const char *eq = memchr(v + a, '=', b - a);
		size_t nlen = eq ? (size_t)(eq - (v + a)) : b - a;
		if (preview_token_eq(v + a, nlen, TOKEN_COOKIE) &&
		    strncmp(v + a, TOKEN_COOKIE, nlen) == 0) {
			/* the name alone is an empty value */
			const char *val = eq ? eq + 1 : v + b;
			size_t vl = (size_t)(v + b - val);
			if (vl + 1 <= tok_size) {
				memcpy(tok, val, vl);
				tok[vl] = 0;
			}
		} else if (b > a) {
			if (rest.len)
				preview_text_add(&rest, "; ", 2);
			preview_text_add(&rest, v + a, b - a);
		}
		i = j + 1;
	}
	if (rest.len && !rest.failed)
		preview_text_field(t, "Cookie", rest.p, rest.len);
	free(rest.p);
}

/* A Set-Cookie of the app without its Domain attribute: every cookie stays on the host of
 * its own exposure, so no preview can set one for another's (all previews share the
 * domain). */
void preview_set_cookie_add(struct text *t, const struct header *f)
{
	const char *v = f->value;
	size_t n = f->value_len, i = 0;
	bool first = true;

	preview_text_str(t, "Set-Cookie: ");
	while (i < n) {
		size_t j = i;
		while (j < n && v[j] != ';')
			j++;
		size_t a = i;
		while (a < j && (v[a] == ' ' || v[a] == '\t'))
			a++;
		const char *eq = memchr(v + a, '=', j - a);
		size_t nlen = eq ? (size_t)(eq - (v + a)) : j - a;
		while (nlen > 0 && (v[a + nlen - 1] == ' ' || v[a + nlen - 1] == '\t'))
			nlen--;
		if (first || !preview_token_eq(v + a, nlen, "domain")) {
			if (!first)
				preview_text_add(t, "; ", 2);
			preview_text_add(t, v + a, j - a);
			first = false;
		}
		i = j + 1;
	}
	preview_text_add(t, "\r\n", 2);
}
