/* SPDX-License-Identifier: MIT */
/* Exec round trip through the API: client → result of `true`, one run at a time.
 *   exec-latency ENDPOINT WORKSPACE [RUNS]
 * Prints p50, p99 and max in milliseconds (after 20 warm-up runs). */

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "station/client.h"

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: exec-latency ENDPOINT WORKSPACE [RUNS]\n");
		return 64;
	}
	int runs = argc > 3 ? atoi(argv[3]) : 1000;
	struct station_client *c;
	if (station_client_new(argv[1], getenv("STATION_TOKEN"), &c) < 0) {
		fprintf(stderr, "exec-latency: cannot connect to %s\n", argv[1]);
		return 1;
	}
	struct station_exec_options o = { .command = "true", .wait_ms = 60000 };
	double *t = calloc((size_t)runs, sizeof *t);
	for (int i = -20; i < runs; i++) {
		json_t *run = NULL;
		double start = now_ms();
		int r = station_exec_start(c, argv[2], &o, &run);
		double end = now_ms();
		const char *status = run ? json_string_value(json_object_get(run, "status")) : NULL;
		if (r < 0 || !status || strcmp(status, "exited") != 0) {
			fprintf(stderr, "exec-latency: run %d failed: %s\n", i,
				r < 0  ? station_client_last_error(c) :
				status ? status :
					 "?");
			return 1;
		}
		json_decref(run);
		if (i >= 0)
			t[i] = end - start;
	}
	qsort(t, (size_t)runs, sizeof *t, cmp_double);
	printf("runs %d p50 %.3f ms p99 %.3f ms max %.3f ms\n", runs, t[runs / 2],
	       t[(size_t)(runs * 0.99)], t[runs - 1]);
	free(t);
	station_client_free(c);
	return 0;
}
