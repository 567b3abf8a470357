/* SPDX-License-Identifier: MIT */
/* How a run's output goes into a tool result: its head and tail within a byte budget, text when
 * it is UTF-8 and base64 (with the byte count) when not, and a sentence telling the model how to
 * read what was left out. */

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcp.h"

bool mcp_utf8_valid(const char *p, size_t n)
{
	const unsigned char *s = (const unsigned char *)p;
	size_t i = 0;

	while (i < n) {
		unsigned c = s[i], len, cp;

		if (c == 0)
			return false;
		if (c < 0x80) {
			i++;
			continue;
		}
		if (c >= 0xc2 && c <= 0xdf)
			len = 2, cp = c & 0x1f;
		else if (c >= 0xe0 && c <= 0xef)
			len = 3, cp = c & 0x0f;
		else if (c >= 0xf0 && c <= 0xf4)
			len = 4, cp = c & 0x07;
		else
			return false;
		if (n - i < len)
			return false;
		for (unsigned k = 1; k < len; k++) {
			if ((s[i + k] & 0xc0) != 0x80)
				return false;
			cp = (cp << 6) | (s[i + k] & 0x3f);
		}
		if ((len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
		    (len == 4 && (cp < 0x10000 || cp > 0x10ffff)))
			return false;
		i += len;
	}
	return true;
}

static bool continuation(char c)
{
	return ((unsigned char)c & 0xc0) == 0x80;
}

static const char b64chars[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static json_t *base64_json(const char *data, size_t n)
{
	const unsigned char *s = (const unsigned char *)data;
	_cleanup_free_ char *out = malloc((n + 2) / 3 * 4 + 1);
	size_t o = 0;

	if (!out)
		return NULL;
	for (size_t i = 0; i < n; i += 3) {
		uint32_t v = (uint32_t)s[i] << 16;

		if (i + 1 < n)
			v |= (uint32_t)s[i + 1] << 8;
		if (i + 2 < n)
			v |= s[i + 2];
		out[o++] = b64chars[(v >> 18) & 63];
		out[o++] = b64chars[(v >> 12) & 63];
		out[o++] = i + 1 < n ? b64chars[(v >> 6) & 63] : '=';
		out[o++] = i + 2 < n ? b64chars[v & 63] : '=';
	}
	return json_stringn_nocheck(out, o);
}

json_t *mcp_stream_json(const struct mcp_stream_view *v, uint64_t limit, const char *ws,
			const char *run, char **ret_more)
{
	const char *head = v->head ? v->head : "", *tail = "";
	size_t half = (size_t)(limit / 2), hl = v->head_len, tl = 0, h, t;
	uint64_t kept_end = v->tail ? v->total : v->head_len, tail_from, omitted;
	bool text;
	json_t *o;

	if (!v->tail) {
		if (hl > limit) { /* one kept part: its start and its end are shown */
			tl = (size_t)limit - half;
			tail = head + hl - tl;
			hl = half;
		}
	} else {
		if (hl > half)
			hl = half;
		tl = MIN(v->tail_len, (size_t)limit - hl);
		tail = v->tail + v->tail_len - tl;
	}
	/* Text when the shown parts are UTF-8 once their cut characters are left out. */
	h = hl;
	while (h > 0 && hl - h < 3 && h < v->head_len && continuation(head[h]))
		h--;
	t = 0;
	while (t < tl && t < 3 && continuation(tail[t]))
		t++;
	text = mcp_utf8_valid(head, h) && mcp_utf8_valid(tail + t, tl - t);
	if (text) {
		hl = h;
		tail += t;
		tl -= t;
	}
	tail_from = kept_end - tl;
	omitted = (tl ? tail_from : v->total) - hl;
	o = json_pack("{s:s,s:I,s:s,s:o,s:o,s:I,s:I,s:b,s:I,s:I}", "stream", v->name, "bytes",
		      (json_int_t)v->total, "encoding", text ? "utf-8" : "base64", "head",
		      text ? json_stringn_nocheck(head, hl) : base64_json(head, hl), "tail",
		      text ? json_stringn_nocheck(tail, tl) : base64_json(tail, tl), "headBytes",
		      (json_int_t)hl, "tailBytes", (json_int_t)tl, "truncated", omitted > 0,
		      "omittedBytes", (json_int_t)omitted, "omittedFrom", (json_int_t)hl);
	*ret_more = NULL;
	if (o && omitted > 0 &&
	    asprintf(ret_more,
		     "%s: %" PRIu64 " bytes, %" PRIu64 " not shown from offset %zu; read them with "
		     "run_output {\"workspaceId\":\"%s\",\"runId\":\"%s\",\"stream\":\"%s\","
		     "\"offset\":%zu}",
		     v->name, v->total, omitted, hl, ws, run, v->name, hl) < 0)
		*ret_more = NULL;
	return o;
}

int mcp_collect_init(struct mcp_collect *c, uint64_t limit)
{
	c->head_cap = (size_t)(limit / 2);
	c->ring_cap = (size_t)limit - c->head_cap;
	for (int i = 0; i < 2; i++) {
		c->st[i].head = malloc(c->head_cap + 1);
		c->st[i].ring = malloc(c->ring_cap + 1);
		if (!c->st[i].head || !c->st[i].ring)
			return -ENOMEM;
	}
	return 0;
}

void mcp_collect_done(struct mcp_collect *c)
{
	for (int i = 0; i < 2; i++) {
		free(c->st[i].head);
		free(c->st[i].ring);
	}
}

static void ring_put(struct mcp_collect *c, struct mcp_collect_stream *st, const char *p, size_t n)
{
	if (n >= c->ring_cap) {
		p += n - c->ring_cap;
		n = c->ring_cap;
	}
	while (n > 0) {
		size_t k = MIN(n, c->ring_cap - st->ring_pos);

		memcpy(st->ring + st->ring_pos, p, k);
		st->ring_pos = (st->ring_pos + k) % c->ring_cap;
		st->ring_fill = MIN(st->ring_fill + k, c->ring_cap);
		p += k;
		n -= k;
	}
}

int mcp_collect_add(struct mcp_collect *c, enum station_stream stream, uint64_t offset,
		    const void *data, size_t len)
{
	struct mcp_collect_stream *st = &c->st[stream == STATION_STREAM_STDERR];
	const char *p = data;

	if (offset > st->total) { /* bytes this watcher never saw */
		st->head_closed = true;
		st->ring_fill = st->ring_pos = 0;
		st->total = offset;
	}
	if (offset < st->total) { /* already seen */
		uint64_t skip = st->total - offset;

		if (skip >= len)
			return 0;
		p += skip;
		len -= (size_t)skip;
	}
	if (!p)
		return 0;
	st->total += len;
	if (!st->head_closed && st->head_len < c->head_cap) {
		size_t k = MIN(len, c->head_cap - st->head_len);

		memcpy(st->head + st->head_len, p, k);
		st->head_len += k;
		p += k;
		len -= k;
	}
	if (len > 0)
		ring_put(c, st, p, len);
	if (c->s) {
		double seen = (double)(c->st[0].total + c->st[1].total);
		char msg[64];

		snprintf(msg, sizeof(msg), "%.0f bytes of output so far", seen);
		mcp_progress(c->s, seen, msg);
	}
	return 0;
}

int mcp_collect_result(struct mcp_collect *c, json_t *result, const char *ws, const char *run,
		       uint64_t limit)
{
	static const char *const names[] = { "stdout", "stderr" };
	_cleanup_free_ char *more = NULL;

	for (int i = 0; i < 2; i++) {
		struct mcp_collect_stream *st = &c->st[i];
		_cleanup_free_ char *tail = NULL, *m = NULL;
		struct mcp_stream_view v = { .name = names[i],
					     .total = st->total,
					     .head = st->head,
					     .head_len = st->head_len };
		json_t *o;

		if (st->ring_fill > 0) {
			size_t start = (st->ring_pos + c->ring_cap - st->ring_fill) % c->ring_cap;
			size_t k = MIN(st->ring_fill, c->ring_cap - start);

			tail = malloc(st->ring_fill);
			if (!tail)
				return -ENOMEM;
			memcpy(tail, st->ring + start, k);
			memcpy(tail + k, st->ring, st->ring_fill - k);
			v.tail = tail;
			v.tail_len = st->ring_fill;
		}
		o = mcp_stream_json(&v, limit, ws, run, &m);
		if (!o || json_object_set_new(result, names[i], o) < 0)
			return -ENOMEM;
		if (m && !more)
			more = TAKE_PTR(m);
	}
	return json_object_set_new(result, "more", more ? json_string(more) : json_null());
}

json_t *mcp_json_q(const char *text)
{
	_cleanup_free_ char *s = strdup(text);
	json_error_t e;
	json_t *o;

	if (!s)
		return NULL;
	for (char *p = s; *p; p++)
		if (*p == '\'')
			*p = '"';
	o = json_loads(s, JSON_REJECT_DUPLICATES, &e);
	if (!o) {
		fprintf(stderr, "station-sandbox mcp: bad built-in schema: %s at %d: %.80s\n",
			e.text, e.column, s);
		abort();
	}
	return o;
}
