/* SPDX-License-Identifier: MIT */
#include "metrics.h"

#include <math.h>
#include <stdbool.h>

const double metrics_bucket_bounds[METRICS_BUCKETS] = { 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
							0.1,   0.25,   0.5,   1,    5,	   60 };

void metrics_histogram_observe(struct metrics_histogram *h, double seconds)
{
	if (!(seconds >= 0)) /* NaN too */
		seconds = 0;
	for (int i = 0; i < METRICS_BUCKETS; i++)
		if (seconds <= metrics_bucket_bounds[i]) {
			h->buckets[i]++;
			break;
		}
	h->count++;
	h->sum += seconds;
}

void metrics_family(FILE *f, const char *name, const char *type, const char *help)
{
	fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void write_escaped(FILE *f, const char *s)
{
	for (; s && *s; s++) {
		if (*s == '\\' || *s == '"')
			fputc('\\', f), fputc(*s, f);
		else if (*s == '\n')
			fputs("\\n", f);
		else
			fputc(*s, f);
	}
}

static void write_labels(FILE *f, const char *const *labels, const char *le)
{
	bool any = false;

	for (size_t i = 0; labels && labels[i]; i += 2) {
		fputc(any ? ',' : '{', f);
		fprintf(f, "%s=\"", labels[i]);
		write_escaped(f, labels[i + 1]);
		fputc('"', f);
		any = true;
	}
	if (le) {
		fprintf(f, "%sle=\"%s\"", any ? "," : "{", le);
		any = true;
	}
	if (any)
		fputc('}', f);
}

static void write_value(FILE *f, double v)
{
	if (isinf(v))
		fputs(v > 0 ? "+Inf" : "-Inf", f);
	else if (isnan(v))
		fputs("NaN", f);
	else
		fprintf(f, "%.12g", v);
}

void metrics_sample(FILE *f, const char *name, const char *const *labels, double value)
{
	fputs(name, f);
	write_labels(f, labels, NULL);
	fputc(' ', f);
	write_value(f, value);
	fputc('\n', f);
}

void metrics_sample_u64(FILE *f, const char *name, const char *const *labels, uint64_t value)
{
	fputs(name, f);
	write_labels(f, labels, NULL);
	fprintf(f, " %llu\n", (unsigned long long)value);
}

void metrics_histogram_write(FILE *f, const char *name, const char *const *labels,
			     const struct metrics_histogram *h)
{
	uint64_t cumulative = 0;
	char le[32];

	for (int i = 0; i < METRICS_BUCKETS; i++) {
		cumulative += h->buckets[i];
		snprintf(le, sizeof le, "%g", metrics_bucket_bounds[i]);
		fprintf(f, "%s_bucket", name);
		write_labels(f, labels, le);
		fprintf(f, " %llu\n", (unsigned long long)cumulative);
	}
	fprintf(f, "%s_bucket", name);
	write_labels(f, labels, "+Inf");
	fprintf(f, " %llu\n%s_sum", (unsigned long long)h->count, name);
	write_labels(f, labels, NULL);
	fputc(' ', f);
	write_value(f, h->sum);
	fprintf(f, "\n%s_count", name);
	write_labels(f, labels, NULL);
	fprintf(f, " %llu\n", (unsigned long long)h->count);
}
