/* SPDX-License-Identifier: MIT */
/* text/event-stream: lines, fields, events. */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "basic/cleanup.h"
#include "sse.h"

static int buf_append(char **p, size_t *len, size_t *cap, const void *data, size_t n)
{
	if (n > SSE_EVENT_MAX - *len)
		return -E2BIG;
	if (*len + n + 1 > *cap) {
		size_t want = MAX(*cap * 2, *len + n + 1);
		char *q = realloc(*p, want);

		if (!q)
			return -ENOMEM;
		*p = q;
		*cap = want;
	}
	memcpy(*p + *len, data, n);
	*len += n;
	(*p)[*len] = '\0';
	return 0;
}

static int sse_dispatch(struct sse_parser *p)
{
	int r = 0;

	if (p->has_data)
		r = p->on_event(p->event[0] ? p->event : "message", p->data, p->data_len,
				p->userdata);
	p->event[0] = '\0';
	p->data_len = 0;
	p->has_data = false;
	return r;
}

/* One line of the stream, without its line break. */
static int sse_line(struct sse_parser *p, const char *line, size_t n)
{
	const char *colon = memchr(line, ':', n);
	size_t field_len = colon ? (size_t)(colon - line) : n;
	const char *value = colon ? colon + 1 : line + n;
	size_t value_len = (size_t)(line + n - value);
	int r;

	if (n == 0)
		return sse_dispatch(p);
	if (line[0] == ':')
		return 0; /* a comment: keep-alive */
	if (value_len > 0 && value[0] == ' ')
		value++, value_len--;
	if (field_len == 5 && memcmp(line, "event", 5) == 0) {
		snprintf(p->event, sizeof(p->event), "%.*s", (int)value_len, value);
	} else if (field_len == 4 && memcmp(line, "data", 4) == 0) {
		if (p->has_data) {
			r = buf_append(&p->data, &p->data_len, &p->data_cap, "\n", 1);
			if (r < 0)
				return r;
		}
		r = buf_append(&p->data, &p->data_len, &p->data_cap, value, value_len);
		if (r < 0)
			return r;
		p->has_data = true;
	}
	return 0;
}

int sse_feed(struct sse_parser *p, const void *data, size_t len)
{
	const char *s = data, *end = s + len;

	while (s < end) {
		const char *nl = memchr(s, '\n', (size_t)(end - s));
		size_t n = (size_t)((nl ? nl : end) - s);
		int r;

		r = buf_append(&p->line, &p->line_len, &p->line_cap, s, n);
		if (r < 0)
			return r;
		s += n;
		if (!nl)
			break;
		s++;
		if (p->line_len > 0 && p->line[p->line_len - 1] == '\r')
			p->line_len--;
		r = sse_line(p, p->line ? p->line : "", p->line_len);
		p->line_len = 0;
		if (r < 0)
			return r;
	}
	return 0;
}

void sse_reset(struct sse_parser *p)
{
	p->line_len = 0;
	p->data_len = 0;
	p->has_data = false;
	p->event[0] = '\0';
}

void sse_done(struct sse_parser *p)
{
	free(p->line);
	free(p->data);
	p->line = p->data = NULL;
	p->line_cap = p->data_cap = 0;
	sse_reset(p);
}
