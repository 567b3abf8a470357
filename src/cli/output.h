/* SPDX-License-Identifier: MIT */
#pragma once

/* What the CLI prints: JSON documents, aligned tables, raw output bytes. */

#include <jansson.h>
#include <stddef.h>

#include "basic/cleanup.h"
#include "basic/json-util.h"

/* Pretty JSON (2-space indent, keys in order) and a newline to stdout, flushed: 0, or -errno
 * of the write that failed (-ENOSPC, -EPIPE…). */
int output_json(const json_t *doc);

/* The same on one line (compact), for a stream of documents such as events. */
int output_json_line(const json_t *doc);

/* Writes all of data to fd, unbuffered, retrying short writes and EINTR. */
int output_write(int fd, const void *data, size_t n);

/* The contents of the file at path ("-": standard input), at most max bytes (-EFBIG beyond),
 * NUL-terminated; *ret_len (when not NULL) is their length. */
int read_file_or_stdin(const char *path, size_t max, char **ret, size_t *ret_len);

/* A table: a header row, then rows; columns padded to their widest cell with two spaces
 * between them, the last column unpadded. */
struct table;

int table_new(size_t n_columns, const char *const *header, struct table **ret);
struct table *table_free(struct table *t);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct table *, table_free);
/* Adds a row of n_columns cells (copied; NULL prints as "-"). */
int table_add_row(struct table *t, const char *const *cells);
int table_print(const struct table *t);

/* s made safe to print to a terminal (free()): names a sandbox chose may hold escape sequences
 * or line breaks. Control characters (C0, DEL, C1) and bytes that are not UTF-8 become \xNN,
 * a backslash becomes \\; the rest is as it was. NULL when out of memory. */
char *output_escape(const char *s);

/* Shortens s for a table column: control characters become spaces and anything past max
 * characters becomes "…". ret must hold max * 4 + 4 bytes. */
const char *output_shorten(const char *s, size_t max, char *ret);
