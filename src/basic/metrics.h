/* SPDX-License-Identifier: MIT */
#pragma once

/* The Prometheus text exposition format (version 0.0.4) and the fixed-bucket histograms the
 * controller keeps: what the HTTP layer and the manager each write of GET /metrics
 * (docs/operations.md, "Metrics"). libc only; nothing here allocates but the FILE it is
 * given (an open_memstream()). */

#include <stdint.h>
#include <stdio.h>

/* Buckets in seconds, from a millisecond to a minute: API requests, runs, creates and the
 * loop's lateness all fall in it (slower ones count in +Inf only). */
#define METRICS_BUCKETS 12
extern const double metrics_bucket_bounds[METRICS_BUCKETS];

struct metrics_histogram {
	uint64_t buckets[METRICS_BUCKETS]; /* not cumulative: the count of each bucket alone */
	uint64_t count;
	double sum; /* seconds */
};

void metrics_histogram_observe(struct metrics_histogram *h, double seconds);

/* "# HELP name help\n# TYPE name type\n" (type: counter, gauge, histogram). */
void metrics_family(FILE *f, const char *name, const char *type, const char *help);
/* One sample: name{labels} value. labels: pairs of name and value, NULL-terminated (values
 * escaped here: backslash, double quote, newline); NULL or empty: none. */
void metrics_sample(FILE *f, const char *name, const char *const *labels, double value);
void metrics_sample_u64(FILE *f, const char *name, const char *const *labels, uint64_t value);
/* name_bucket{labels,le="…"} (cumulative), name_sum, name_count. */
void metrics_histogram_write(FILE *f, const char *name, const char *const *labels,
			     const struct metrics_histogram *h);
