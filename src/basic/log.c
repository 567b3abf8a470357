/* SPDX-License-Identifier: MIT */
#include "log.h"

#include <sys/stat.h>

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cleanup.h"
#include "util.h"

#define LOG_LINE_MAX (64 * 1024)
/* room always kept free for the line's ending: ,"truncated":"true"}\n */
#define LOG_TAIL_SPARE 32

static int log_fd = 2;
static enum log_format log_format = LOG_FORMAT_JSON;
static enum log_level log_min_level = LOG_LEVEL_INFO;
static char log_program[64];

void log_setup(int fd, enum log_format format, enum log_level min_level, const char *program)
{
	log_fd = fd;
	log_format = format;
	log_min_level = min_level;
	snprintf(log_program, sizeof(log_program), "%s", program ? program : "");
}

bool log_level_enabled(enum log_level level)
{
	return level >= log_min_level;
}

/* A line under construction: starts in a stack buffer, moves to the heap when it grows. At
 * LOG_LINE_MAX (or when memory runs out) it stops growing: the field being added is dropped,
 * later ones too, and the line is marked truncated. */
struct line {
	char *p;
	size_t len, cap;
	bool heap, full;
	char stack[1024];
};

static bool line_reserve(struct line *l, size_t n)
{
	if (l->full)
		return false;
	n += LOG_TAIL_SPARE;
	if (l->len + n <= l->cap)
		return true;
	size_t ncap = MAX(l->cap * 2, l->len + n);
	if (ncap > LOG_LINE_MAX)
		ncap = LOG_LINE_MAX;
	if (l->len + n > ncap) {
		l->full = true;
		return false;
	}
	char *np = l->heap ? realloc(l->p, ncap) : malloc(ncap);
	if (!np) {
		l->full = true;
		return false;
	}
	if (!l->heap)
		memcpy(np, l->p, l->len);
	l->p = np;
	l->cap = ncap;
	l->heap = true;
	return true;
}

static void line_put(struct line *l, const char *s, size_t n)
{
	if (!line_reserve(l, n))
		return;
	memcpy(l->p + l->len, s, n);
	l->len += n;
}

static void line_puts(struct line *l, const char *s)
{
	line_put(l, s, strlen(s));
}

/* Escapes s for a JSON string (or a quoted text value: same rules). Invalid UTF-8 becomes
 * U+FFFD so the line stays valid UTF-8. */
static void line_put_escaped(struct line *l, const char *s)
{
	size_t n = strlen(s);

	while (n > 0) {
		unsigned char c = (unsigned char)*s;
		size_t k = utf8_char_len(s, n);
		char esc[8];

		if (k == 0) {
			line_puts(l, "\\ufffd");
			k = 1;
		} else if (c == '"' || c == '\\') {
			esc[0] = '\\', esc[1] = (char)c;
			line_put(l, esc, 2);
		} else if (c == '\n') {
			line_puts(l, "\\n");
		} else if (c == '\t') {
			line_puts(l, "\\t");
		} else if (c == '\r') {
			line_puts(l, "\\r");
		} else if (c < 0x20 || c == 0x7f) {
			snprintf(esc, sizeof(esc), "\\u%04x", c);
			line_puts(l, esc);
		} else {
			line_put(l, s, k);
		}
		s += k;
		n -= k;
	}
}

static void line_put_json_string(struct line *l, const char *s)
{
	line_puts(l, "\"");
	line_put_escaped(l, s);
	line_puts(l, "\"");
}

static void line_put_json_field(struct line *l, const char *key, const char *value)
{
	line_puts(l, ",");
	line_put_json_string(l, key);
	line_puts(l, ":");
	if (value)
		line_put_json_string(l, value);
	else
		line_puts(l, "null");
}

static bool text_needs_quotes(const char *s)
{
	if (!*s)
		return true;
	for (; *s; s++)
		if ((unsigned char)*s <= ' ' || *s == '"' || *s == '=' || *s == '\\' ||
		    *s == 0x7f || (unsigned char)*s >= 0x80)
			return true;
	return false;
}

static void line_put_text_field(struct line *l, const char *key, const char *value)
{
	line_puts(l, " ");
	line_puts(l, key);
	line_puts(l, "=");
	if (!value) {
		line_puts(l, "(null)");
	} else if (text_needs_quotes(value)) {
		line_puts(l, "\"");
		line_put_escaped(l, value);
		line_puts(l, "\"");
	} else {
		line_puts(l, value);
	}
}

static const char *const level_names[] = {
	[LOG_LEVEL_DEBUG] = "debug",
	[LOG_LEVEL_INFO] = "info",
	[LOG_LEVEL_WARN] = "warn",
	[LOG_LEVEL_ERROR] = "error",
};

static void line_start(struct line *l, enum log_level level, const char *msg)
{
	struct timespec ts;
	char tbuf[32];

	clock_gettime(CLOCK_REALTIME, &ts);
	format_rfc3339((uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000, tbuf);
	if (log_format == LOG_FORMAT_TEXT) {
		line_puts(l, tbuf);
		line_puts(l, " ");
		line_puts(l, level_names[level]);
		line_puts(l, " ");
		line_put_escaped(l, msg);
		return;
	}
	line_puts(l, "{\"ts\":\"");
	line_puts(l, tbuf);
	line_puts(l, "\",\"level\":\"");
	line_puts(l, level_names[level]);
	line_puts(l, "\"");
	if (log_program[0])
		line_put_json_field(l, "program", log_program);
	line_put_json_field(l, "msg", msg);
}

/* Appends a field; on overflow rolls back to the end of the previous complete field. */
static bool line_add_field(struct line *l, const char *key, const char *value)
{
	size_t committed = l->len;

	if (log_format == LOG_FORMAT_TEXT)
		line_put_text_field(l, key, value);
	else
		line_put_json_field(l, key, value);
	if (l->full)
		l->len = committed;
	return !l->full;
}

/* LOG_TAIL_SPARE bytes are always free here. */
static void line_finish(struct line *l)
{
	const char *tail;

	if (log_format == LOG_FORMAT_TEXT)
		tail = l->full ? " truncated=true\n" : "\n";
	else
		tail = l->full ? ",\"truncated\":\"true\"}\n" : "}\n";
	memcpy(l->p + l->len, tail, strlen(tail));
	l->len += strlen(tail);
}

/* Optional bounds (the agent's log is a file on the host that a sandbox can make it write):
 * lines per minute, and the size of a regular-file log past which only errors are written. */
static unsigned limit_per_minute;
static uint64_t limit_file_bytes;
static uint64_t window_start_usec, window_lines, suppressed;

void log_set_limits(unsigned lines_per_minute, uint64_t max_file_bytes)
{
	limit_per_minute = lines_per_minute;
	limit_file_bytes = max_file_bytes;
}

static uint64_t monotonic_usec(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

static bool log_allowed(enum log_level level)
{
	struct stat st;
	if (limit_file_bytes && level < LOG_LEVEL_ERROR && fstat(log_fd, &st) == 0 &&
	    S_ISREG(st.st_mode) && (uint64_t)st.st_size > limit_file_bytes)
		return false;
	if (!limit_per_minute)
		return true;
	uint64_t now = monotonic_usec();
	if (now - window_start_usec >= 60ull * 1000000) {
		uint64_t dropped = suppressed;
		window_start_usec = now;
		window_lines = 0;
		suppressed = 0;
		if (dropped) {
			char n[24];
			snprintf(n, sizeof n, "%llu", (unsigned long long)dropped);
			log_fields(LOG_LEVEL_WARN, "log lines suppressed (rate limit)", "count", n,
				   NULL);
		}
	}
	if (++window_lines <= limit_per_minute)
		return true;
	suppressed++;
	return false;
}

void log_fields(enum log_level level, const char *msg, ...)
{
	struct line l = { .cap = sizeof(l.stack) };
	va_list ap;
	const char *key;

	if ((unsigned)level > LOG_LEVEL_ERROR)
		level = LOG_LEVEL_ERROR;
	if (level < log_min_level || log_fd < 0 || !log_allowed(level))
		return;
	l.p = l.stack;
	line_start(&l, level, msg ? msg : "");
	if (l.full) { /* a message beyond LOG_LINE_MAX: keep the header at least */
		l.len = 0;
		l.full = false;
		line_start(&l, level, "(message too long)");
		l.full = true;
	}
	va_start(ap, msg);
	while (!l.full && (key = va_arg(ap, const char *))) {
		const char *value = va_arg(ap, const char *);
		if (!line_add_field(&l, key, value) || !value)
			break;
	}
	va_end(ap);
	line_finish(&l);
	(void)write_all(log_fd, l.p, l.len);
	if (l.heap)
		free(l.p);
}
