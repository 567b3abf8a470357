/* SPDX-License-Identifier: MIT */
/* JSON documents, aligned tables and raw bytes, the way the CLI prints them. */

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "output.h"

struct table {
	size_t n_columns;
	size_t n_cells;
	size_t cap;
	char **cells; /* row-major, the header first */
};

/* The error of a write to stdout that failed, now or when buffered earlier. */
static int stdout_error(void)
{
	return errno > 0 ? -errno : -EIO;
}

static int json_print(const json_t *doc, size_t flags)
{
	errno = 0;
	if (json_dumpf(doc, stdout, flags | JSON_PRESERVE_ORDER) < 0 || putchar('\n') == EOF ||
	    fflush(stdout) == EOF)
		return stdout_error();
	return 0;
}

int output_json(const json_t *doc)
{
	return json_print(doc, JSON_INDENT(2));
}

int output_json_line(const json_t *doc)
{
	return json_print(doc, JSON_COMPACT);
}

int output_write(int fd, const void *data, size_t n)
{
	const char *p = data;

	while (n > 0) {
		ssize_t k = write(fd, p, n);

		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return -errno;
		p += k;
		n -= (size_t)k;
	}
	return 0;
}

int table_new(size_t n_columns, const char *const *header, struct table **ret)
{
	_cleanup_(table_freep) struct table *t = calloc(1, sizeof(*t));
	int r;

	if (!t)
		return -ENOMEM;
	t->n_columns = n_columns;
	r = table_add_row(t, header);
	if (r < 0)
		return r;
	*ret = TAKE_PTR(t);
	return 0;
}

struct table *table_free(struct table *t)
{
	if (!t)
		return NULL;
	for (size_t i = 0; i < t->n_cells; i++)
		free(t->cells[i]);
	free(t->cells);
	free(t);
	return NULL;
}

int table_add_row(struct table *t, const char *const *cells)
{
	if (t->n_cells + t->n_columns > t->cap) {
		size_t cap = MAX(t->cap * 2, t->n_columns * 8);
		char **p = realloc(t->cells, cap * sizeof(*p));

		if (!p)
			return -ENOMEM;
		t->cells = p;
		t->cap = cap;
	}
	for (size_t i = 0; i < t->n_columns; i++) {
		char *s = strdup(cells[i] ? cells[i] : "-");

		if (!s)
			return -ENOMEM; /* the row's earlier cells stay; n_cells counts them */
		t->cells[t->n_cells++] = s;
	}
	return 0;
}

/* Display width of a UTF-8 string: its code points, good enough for ids, states and times. */
static size_t text_width(const char *s)
{
	size_t w = 0;

	for (; *s; s++)
		w += ((unsigned char)*s & 0xc0) != 0x80;
	return w;
}

int table_print(const struct table *t)
{
	size_t width[t->n_columns];

	memset(width, 0, sizeof(width));
	for (size_t i = 0; i < t->n_cells; i++)
		width[i % t->n_columns] = MAX(width[i % t->n_columns], text_width(t->cells[i]));
	for (size_t i = 0; i < t->n_cells; i++) {
		size_t col = i % t->n_columns;

		if (col + 1 == t->n_columns)
			printf("%s\n", t->cells[i]);
		else
			printf("%s%*s", t->cells[i],
			       (int)(width[col] - text_width(t->cells[i]) + 2), "");
	}
	return fflush(stdout) == EOF ? -EIO : 0;
}

const char *output_shorten(const char *s, size_t max, char *ret)
{
	size_t chars = 0, o = 0;

	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		bool starts_char = (*p & 0xc0) != 0x80;

		if (starts_char && chars == max) {
			memcpy(ret + o - (o > 0 && ret[o - 1] == ' ' ? 1 : 0), "…", sizeof("…"));
			return ret;
		}
		chars += starts_char;
		ret[o++] = *p < 0x20 || *p == 0x7f ? ' ' : (char)*p;
	}
	ret[o] = '\0';
	return ret;
}

int read_file_or_stdin(const char *path, size_t max, char **ret, size_t *ret_len)
{
	_cleanup_close_ int fd = -1;
	_cleanup_free_ char *buf = malloc(max + 1);
	size_t n = 0;

	if (!buf)
		return -ENOMEM;
	fd = strcmp(path, "-") == 0 ? dup(STDIN_FILENO) : open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	while (n <= max) {
		ssize_t k = read(fd, buf + n, max + 1 - n);

		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return -errno;
		if (k == 0)
			break;
		n += (size_t)k;
	}
	if (n > max)
		return -EFBIG;
	buf[n] = '\0';
	*ret = TAKE_PTR(buf);
	if (ret_len)
		*ret_len = n;
	return 0;
}

/* Length of the UTF-8 sequence at p (well-formed, not a control character), or 0. */
static size_t printable_sequence(const unsigned char *p)
{
	size_t len;

	if (p[0] >= 0x20 && p[0] < 0x7f)
		return 1;
	if (p[0] >= 0xc2 && p[0] <= 0xdf)
		len = 2;
	else if (p[0] >= 0xe0 && p[0] <= 0xef)
		len = 3;
	else if (p[0] >= 0xf0 && p[0] <= 0xf4)
		len = 4;
	else
		return 0;
	for (size_t i = 1; i < len; i++)
		if ((p[i] & 0xc0) != 0x80)
			return 0;
	if (p[0] == 0xc2 && p[1] < 0xa0)
		return 0; /* C1 controls, U+0080-U+009F */
	if ((p[0] == 0xe0 && p[1] < 0xa0) || (p[0] == 0xf0 && p[1] < 0x90) ||
	    (p[0] == 0xf4 && p[1] > 0x8f) || (p[0] == 0xed && p[1] > 0x9f))
		return 0; /* overlong, past U+10FFFF, surrogates */
	return len;
}

char *output_escape(const char *s)
{
	static const char hex[] = "0123456789abcdef";
	char *out = malloc(strlen(s) * 4 + 1), *o = out;
	const unsigned char *p = (const unsigned char *)s;

	if (!out)
		return NULL;
	while (*p) {
		size_t len = printable_sequence(p);

		if (*p == '\\') {
			*o++ = '\\';
			*o++ = '\\';
			p++;
		} else if (len > 0) {
			memcpy(o, p, len);
			o += len;
			p += len;
		} else {
			*o++ = '\\';
			*o++ = 'x';
			*o++ = hex[*p >> 4];
			*o++ = hex[*p & 15];
			p++;
		}
	}
	*o = '\0';
	return out;
}
