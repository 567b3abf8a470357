/* SPDX-License-Identifier: MIT */
/* `make bench` row usage.sample: what the usage history's sampler costs the controller for N
 * idle workspaces, measured synthetically: N empty cgroups of our own (made as the controller
 * makes a workspace's, below one base group), each read through cgroup-sample.c's open files,
 * and one tick's rows written with store_usage_insert() into a store of its own, as the
 * controller's timer does every 5 s. A sample is one tick's CPU time (user + system of this
 * process, ms); the row's extra gives the CPU seconds per second at the default 5 s interval.
 * Real workspaces add processes to their groups, which makes memory.stat no dearer to read. */

#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "cgroup/cgroup-sample.h"
#include "cgroup/cgroup.h"
#include "store/store-usage.h"
#include "store/store.h"

#define INTERVAL_MS 5000.0

static double cpu_ms(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000.0 +
	       (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1000.0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* The workspaces' rows, which the samples' foreign key names. */
static int add_workspaces(const char *db, size_t n)
{
	sqlite3 *h = NULL;
	char sql[256];
	int rc = sqlite3_open(db, &h);

	rc = rc == SQLITE_OK ? sqlite3_exec(h, "BEGIN", NULL, NULL, NULL) : rc;
	for (size_t i = 0; rc == SQLITE_OK && i < n; i++) {
		snprintf(sql, sizeof sql,
			 "INSERT INTO workspaces (id, worker, adapter, state, created_at, "
			 "updated_at) VALUES ('w-bench%06zu', 'bench', 'host', 'ready', 0, 0)",
			 i);
		rc = sqlite3_exec(h, sql, NULL, NULL, NULL);
	}
	rc = rc == SQLITE_OK ? sqlite3_exec(h, "COMMIT", NULL, NULL, NULL) : rc;
	sqlite3_close(h);
	return rc == SQLITE_OK ? 0 : -EIO;
}

struct bench {
	size_t n, made;
	struct cgroup *base, **groups;
	struct cgroup_sampler **samplers;
	char **ids;
	struct usage_sample *rows;
	struct store *store;
};

static int setup(struct bench *b, const char *base_name, const char *dir)
{
	char db[4096], name[32];
	int r = cgroup_open_base(base_name, &b->base);

	if (r < 0)
		return fprintf(stderr, "usage-sampler: base cgroup: %s\n", strerror(-r)), r;
	b->groups = calloc(b->n, sizeof(*b->groups));
	b->samplers = calloc(b->n, sizeof(*b->samplers));
	b->ids = calloc(b->n, sizeof(*b->ids));
	b->rows = calloc(b->n, sizeof(*b->rows));
	if (!b->groups || !b->samplers || !b->ids || !b->rows)
		return -ENOMEM;
	for (; b->made < b->n; b->made++) {
		size_t i = b->made;
		snprintf(name, sizeof name, "w%zu", i);
		r = cgroup_child(b->base, name, &b->groups[i]);
		if (r >= 0)
			r = cgroup_create(b->groups[i]);
		if (r >= 0)
			r = cgroup_sampler_open(b->groups[i], &b->samplers[i]);
		if (r >= 0 && asprintf(&b->ids[i], "w-bench%06zu", i) < 0)
			r = -ENOMEM;
		if (r < 0) {
			fprintf(stderr, "usage-sampler: group %zu: %s\n", i, strerror(-r));
			cgroup_free(b->groups[i]);
			b->groups[i] = NULL;
			return r;
		}
	}
	snprintf(db, sizeof db, "%s/usage.db", dir);
	r = store_open(db, &b->store);
	if (r >= 0)
		r = add_workspaces(db, b->n);
	if (r < 0)
		fprintf(stderr, "usage-sampler: store %s: %s\n", db, strerror(-r));
	return r;
}

static void teardown(struct bench *b)
{
	for (size_t i = 0; i < b->made; i++) {
		cgroup_sampler_free(b->samplers[i]);
		if (b->groups[i])
			(void)cgroup_remove(b->groups[i]);
		cgroup_free(b->groups[i]);
		free(b->ids[i]);
	}
	if (b->base)
		(void)cgroup_remove(b->base);
	cgroup_free(b->base);
	store_close(b->store);
	free(b->groups);
	free(b->samplers);
	free(b->ids);
	free(b->rows);
}

/* One tick as the controller's: read every group, write the rows and the worker's. */
static int tick(struct bench *b, uint64_t now_ms)
{
	struct usage_sample worker = { .ts_ms = now_ms, .span_ms = 5000 };

	for (size_t i = 0; i < b->n; i++) {
		struct cgroup_sample c;
		int r = cgroup_sampler_read(b->samplers[i], &c);
		if (r < 0)
			return r;
		b->rows[i] = (struct usage_sample){ .ts_ms = now_ms,
						    .span_ms = 5000,
						    .mem_bytes = c.memory_bytes,
						    .mem_max = c.memory_bytes,
						    .pids = c.pids };
		worker.mem_bytes += c.memory_bytes;
	}
	return store_usage_insert(b->store, (const char *const *)b->ids, b->rows, b->n, &worker,
				  b->n);
}

static int emit(const char *out, const char *id, double *v, size_t n, size_t count)
{
	double sum = 0;
	FILE *f;

	qsort(v, n, sizeof(*v), cmp_double);
	for (size_t i = 0; i < n; i++)
		sum += v[i];
	double median = v[n / 2], p99 = v[(n * 99 + 99) / 100 - 1];
	json_t *row = json_pack("{ss ss sI sf sf sf sf sf s{sI sf sf}}", "id", id, "unit", "ms",
				"n", (json_int_t)n, "median", median, "p99", p99, "min", v[0],
				"max", v[n - 1], "mean", sum / n, "extra", "workspaces",
				(json_int_t)count, "cpu_seconds_per_second_at_5s",
				median / INTERVAL_MS, "cpu_ms_per_workspace_tick",
				median / (double)count);
	f = out ? fopen(out, "ae") : stdout;
	if (!row || !f)
		return -EIO;
	json_dumpf(row, f, JSON_COMPACT);
	fputc('\n', f);
	if (out)
		fclose(f);
	json_decref(row);
	fprintf(stderr,
		"bench: %s: %zu workspaces: %.3f ms of CPU a tick (p99 %.3f), %.5f CPU s/s at "
		"5 s\n",
		id, count, median, p99, median / INTERVAL_MS);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = { { "count", required_argument, NULL, 'n' },
					      { "ticks", required_argument, NULL, 't' },
					      { "out", required_argument, NULL, 'o' },
					      { "id", required_argument, NULL, 'i' },
					      { "cgroup", required_argument, NULL, 'c' },
					      {} };
	const char *out = NULL, *id = "usage.sample", *cg = "stbench-usage";
	struct bench b = { .n = 1000 };
	size_t ticks = 30;
	char dir[] = "/tmp/station-usage-bench.XXXXXX";
	int c, r;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (c == 'n')
			b.n = strtoul(optarg, NULL, 10);
		else if (c == 't')
			ticks = strtoul(optarg, NULL, 10);
		else if (c == 'o')
			out = optarg;
		else if (c == 'i')
			id = optarg;
		else if (c == 'c')
			cg = optarg;
		else
			return 64;
	}
	if (b.n == 0 || ticks == 0 || !mkdtemp(dir))
		return 64;
	double *v = calloc(ticks, sizeof(*v));
	r = v ? setup(&b, cg, dir) : -ENOMEM;
	for (size_t i = 0; r >= 0 && i < ticks; i++) {
		double before = cpu_ms();
		r = tick(&b, 1700000000000ull + i * 5000);
		v[i] = cpu_ms() - before;
	}
	if (r >= 0)
		r = emit(out, id, v, ticks, b.n);
	else
		fprintf(stderr, "usage-sampler: %s\n", strerror(-r));
	teardown(&b);
	free(v);
	char db[64];
	for (const char *sfx = "usage.db"; sfx; sfx = NULL) {
		snprintf(db, sizeof db, "%s/%s", dir, sfx);
		unlink(db);
	}
	snprintf(db, sizeof db, "%s/usage.db-wal", dir);
	unlink(db);
	snprintf(db, sizeof db, "%s/usage.db-shm", dir);
	unlink(db);
	rmdir(dir);
	return r < 0 ? 1 : 0;
}
