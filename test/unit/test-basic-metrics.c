/* SPDX-License-Identifier: MIT */
/* basic/metrics.c: the Prometheus text format of GET /metrics: label values escaped, a
 * histogram's buckets cumulative with +Inf equal to the count, values past the last bound in
 * +Inf only. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "basic/metrics.h"

/* What fn wrote, NUL-terminated (free it). */
static char *render(void (*fn)(FILE *f, void *userdata), void *userdata)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	cr_assert(f);
	fn(f, userdata);
	cr_assert_eq(fclose(f), 0);
	return text;
}

static void write_escaped(FILE *f, void *userdata)
{
	const char *labels[] = { "workspace", "w1", "tenant", "a\"b\\c\nd", NULL };

	metrics_sample_u64(f, "station_x", labels, 7);
	metrics_sample(f, "station_y", NULL, 0.25);
}

Test(metrics, label_values_are_escaped)
{
	char *text = render(write_escaped, NULL);

	cr_assert_str_eq(text, "station_x{workspace=\"w1\",tenant=\"a\\\"b\\\\c\\nd\"} 7\n"
			       "station_y 0.25\n");
	free(text);
}

static void write_histogram(FILE *f, void *userdata)
{
	const char *labels[] = { "route", "/v1/workspaces/{id}", NULL };

	metrics_histogram_write(f, "station_h_seconds", labels, userdata);
}

Test(metrics, histogram_buckets_are_cumulative)
{
	struct metrics_histogram h = {};
	char *text, *line;

	metrics_histogram_observe(&h, 0.0005); /* first bucket */
	metrics_histogram_observe(&h, 0.001);  /* on the bound: le="0.001" */
	metrics_histogram_observe(&h, 0.3);    /* le="0.5" */
	metrics_histogram_observe(&h, 120);    /* past 60 s: +Inf only */
	text = render(write_histogram, &h);
	cr_assert(strstr(text, "station_h_seconds_bucket{route=\"/v1/workspaces/{id}\","
			       "le=\"0.001\"} 2\n"),
		  "%s", text);
	cr_assert(strstr(text, "le=\"0.25\"} 2\n"), "%s", text);
	cr_assert(strstr(text, "le=\"0.5\"} 3\n"), "%s", text);
	cr_assert(strstr(text, "le=\"60\"} 3\n"), "%s", text);
	cr_assert(strstr(text, "le=\"+Inf\"} 4\n"), "%s", text);
	cr_assert(strstr(text, "station_h_seconds_count{route=\"/v1/workspaces/{id}\"} 4\n"), "%s",
		  text);
	line = strstr(text, "station_h_seconds_sum{");
	cr_assert(line && strtod(strchr(line, ' ') + 1, NULL) > 120.3, "%s", text);
	free(text);
}
