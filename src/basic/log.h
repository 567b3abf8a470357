/* SPDX-License-Identifier: MIT */
#pragma once

/* Process-wide logging for the daemon, the agent and tools. Libraries log at debug only.
 * Messages are lowercase without a final period; fields are key=value pairs passed as
 * alternating const char * arguments, NULL-terminated:
 *   log_info("run finished", "workspace", ws->id, "run", run->id, NULL);
 * JSON lines by default ({"ts":"…","level":"info","msg":"…","workspace":"…"}), or text. */

#include <stdbool.h>
#include <stdint.h>

enum log_level { LOG_LEVEL_DEBUG, LOG_LEVEL_INFO, LOG_LEVEL_WARN, LOG_LEVEL_ERROR };
enum log_format { LOG_FORMAT_JSON, LOG_FORMAT_TEXT };

void log_setup(int fd, enum log_format format, enum log_level min_level, const char *program);
void log_fields(enum log_level level, const char *msg, ...) __attribute__((sentinel));
/* Whether lines of this level are written at all (for measurements that only a debug log
 * reports). */
bool log_level_enabled(enum log_level level);

/* Bounds for a log that others can make us write: at most lines_per_minute lines (0: no
 * limit; the rest are counted and reported once the minute is over), and when the log is a
 * regular file larger than max_file_bytes (0: no limit), only errors. */
void log_set_limits(unsigned lines_per_minute, uint64_t max_file_bytes);

#define log_debug(...) log_fields(LOG_LEVEL_DEBUG, __VA_ARGS__)
#define log_info(...) log_fields(LOG_LEVEL_INFO, __VA_ARGS__)
#define log_warn(...) log_fields(LOG_LEVEL_WARN, __VA_ARGS__)
#define log_error(...) log_fields(LOG_LEVEL_ERROR, __VA_ARGS__)
