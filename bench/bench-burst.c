/* SPDX-License-Identifier: MIT */
/* A burst of concurrent container creates (each to its first exec), as a ratio to one create
 * alone in the same run, and the API's latency (GET /v1/workspaces) while a second, identical
 * burst runs. The two are separate bursts: a probe that asks back to back keeps a client and the
 * controller busy, which takes a core from the creates it is meant to watch.
 *
 * Beside the times, the machine's busy CPU (from /proc/stat) over the creates alone and over the
 * burst: when one create alone keeps the cores as busy as its wall time allows, N of them cannot
 * end sooner than N x its CPU / the cores, whatever the controller does ("cpuFloorRatio"). */

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

#define BURST_MAX 256
#define API_SAMPLES_MAX 200000

struct burst {
	const struct bench_opts *o;
	pthread_barrier_t start;
	double t0;
	double done_ms[BURST_MAX]; /* from the burst's start to the first exec's end */
	char *ids[BURST_MAX];
	int failed;
	char error[512];
	pthread_mutex_t lock;
	int running;
};

struct burst_arg {
	struct burst *b;
	int i;
};

/* Create + first `true` (retried while the agent is not there yet); the id in *ret_id. */
static int create_first_exec(struct station_client *c, const char *image, char **ret_id, char *err,
			     size_t n)
{
	struct station_workspace_options wo = { .adapter = "container",
						.image = image,
						.network = "none" };
	json_t *ws = NULL;
	int r = station_workspace_create(c, &wo, &ws);
	if (r < 0) {
		snprintf(err, n, "create: %s", station_client_last_error(c));
		return r;
	}
	*ret_id = strdup(json_string_value(json_object_get(ws, "id")));
	json_decref(ws);
	double deadline = bench_now_ms() + 60000;
	do {
		r = bench_exec_true(c, *ret_id);
		if (r != -ENOTCONN && r != -EBUSY)
			break;
		nanosleep(&(struct timespec){ 0, 200000 }, NULL);
	} while (bench_now_ms() < deadline);
	if (r < 0)
		snprintf(err, n, "first exec in %s: %s", *ret_id,
			 r == -EIO ? "run did not exit 0" : station_client_last_error(c));
	return r;
}

static void *burst_one(void *arg)
{
	struct burst_arg *a = arg;
	struct burst *b = a->b;
	struct station_client *c = NULL;
	char err[512] = "";
	int r = bench_client(b->o, &c);
	pthread_barrier_wait(&b->start);
	if (r >= 0)
		r = create_first_exec(c, b->o->image, &b->ids[a->i], err, sizeof err);
	double end = bench_now_ms();
	pthread_mutex_lock(&b->lock);
	b->done_ms[a->i] = end - b->t0;
	if (r < 0) {
		b->failed++;
		if (!b->error[0])
			snprintf(b->error, sizeof b->error, "%s", err[0] ? err : strerror(-r));
	}
	b->running--;
	pthread_mutex_unlock(&b->lock);
	station_client_free(c);
	return NULL;
}

/* Busy CPU of the whole machine so far (user, nice, system, irq, softirq), in ms; NaN when
 * /proc/stat cannot be read. */
static double machine_cpu_ms(void)
{
	unsigned long long user, nice, sys, idle, iowait, irq, softirq;
	FILE *f = fopen("/proc/stat", "re");
	int n = f ? fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu", &user, &nice, &sys, &idle,
			   &iowait, &irq, &softirq) :
		    0;
	if (f)
		fclose(f);
	if (n != 7)
		return NAN;
	return (double)(user + nice + sys + irq + softirq) * 1000.0 / (double)sysconf(_SC_CLK_TCK);
}

static int still_running(struct burst *b)
{
	pthread_mutex_lock(&b->lock);
	int n = b->running;
	pthread_mutex_unlock(&b->lock);
	return n;
}

#define SINGLE_RUNS 5

/* One create alone, SINGLE_RUNS times: the median is the reference; *ret_cpu the machine's busy
 * CPU per create (deletes not counted). */
static int single_reference(const struct bench_opts *o, struct station_client *c, double *ret,
			    double *ret_cpu)
{
	double s[SINGLE_RUNS], cpu = 0;
	char err[512] = "";
	for (int i = 0; i < SINGLE_RUNS; i++) {
		double c0 = machine_cpu_ms();
		char *id = NULL;
		double t = bench_now_ms();
		int r = create_first_exec(c, o->image, &id, err, sizeof err);
		s[i] = bench_now_ms() - t;
		cpu += machine_cpu_ms() - c0;
		if (id)
			station_workspace_delete(c, id, NULL);
		free(id);
		if (r < 0) {
			bench_emit_fail(o, "one create alone: %s", err);
			return r;
		}
	}
	struct bench_stats st;
	bench_stats_compute(s, SINGLE_RUNS, &st);
	*ret = st.median;
	*ret_cpu = cpu / SINGLE_RUNS;
	return 0;
}

/* n creates at once, each on its own client and thread; with api_ms, GET /v1/workspaces back
 * to back on c while they run (the latencies in api_ms, their count in *n_api). The burst's
 * times in b->done_ms, its busy machine CPU in *ret_cpu (when not NULL). */
static int run_burst(const struct bench_opts *o, struct station_client *c, struct burst *b, int n,
		     double *api_ms, size_t *n_api, int *api_failed, double *ret_cpu)
{
	struct burst_arg args[BURST_MAX];
	pthread_t threads[BURST_MAX];
	*b = (struct burst){ .o = o, .running = n };
	pthread_mutex_init(&b->lock, NULL);
	pthread_barrier_init(&b->start, NULL, (unsigned)n + 1);
	for (int i = 0; i < n; i++) {
		args[i] = (struct burst_arg){ b, i };
		pthread_create(&threads[i], NULL, burst_one, &args[i]);
	}
	double c0 = machine_cpu_ms();
	b->t0 = bench_now_ms();
	pthread_barrier_wait(&b->start);
	if (api_ms)
		while (still_running(b) > 0 && *n_api < API_SAMPLES_MAX) {
			json_t *list = NULL;
			double t = bench_now_ms();
			if (station_request_json(c, "GET", "/v1/workspaces", NULL, &list) < 0)
				(*api_failed)++;
			api_ms[(*n_api)++] = bench_now_ms() - t;
			json_decref(list);
		}
	for (int i = 0; i < n; i++)
		pthread_join(threads[i], NULL);
	if (ret_cpu)
		*ret_cpu = machine_cpu_ms() - c0;
	for (int i = 0; i < n; i++)
		if (b->ids[i]) {
			station_workspace_delete(c, b->ids[i], NULL);
			free(b->ids[i]);
			b->ids[i] = NULL;
		}
	pthread_barrier_destroy(&b->start);
	pthread_mutex_destroy(&b->lock);
	if (b->failed) {
		bench_emit_fail(o, "%d of %d creates failed: %s", b->failed, n, b->error);
		return -EIO;
	}
	return 0;
}

int cmd_create_burst(const struct bench_opts *o)
{
	int n = o->clients > 0 ? o->clients : 20;
	if (n > BURST_MAX)
		n = BURST_MAX;
	struct station_client *c = NULL;
	struct burst *b = calloc(1, sizeof *b);
	double *api = calloc(API_SAMPLES_MAX, sizeof *api);
	double single = 0, single_cpu = 0, burst_cpu = 0;
	long cores = sysconf(_SC_NPROCESSORS_ONLN);
	size_t n_api = 0;
	int api_failed = 0;
	int r = b && api ? bench_client(o, &c) : -ENOMEM;
	if (r < 0)
		bench_emit_fail(o, "client: %s", strerror(-r));
	if (r >= 0)
		r = single_reference(o, c, &single, &single_cpu);
	if (r >= 0)
		r = run_burst(o, c, b, n, NULL, NULL, NULL, &burst_cpu);
	if (r < 0)
		goto out;
	struct bench_stats sb, sa;
	bench_stats_compute(b->done_ms, (size_t)n, &sb);
	/* The least time n creates can take, each costing the CPU of one alone. */
	double floor_ms = (double)n * single_cpu / (double)(cores > 0 ? cores : 1);
	r = bench_emit(o, "ms", &sb,
		       json_pack("{s:f,s:f,s:f,s:i,s:f,s:f,s:f,s:f,s:I}", "singleMs", single,
				 "medianRatio", sb.median / single, "lastRatio", sb.max / single,
				 "creates", n, "singleCpuMs", single_cpu, "burstCpuMsPerCreate",
				 burst_cpu / n, "cpuFloorRatio", floor_ms / single,
				 "lastToCpuFloor", sb.max / floor_ms, "cores", (json_int_t)cores));
	if (r < 0)
		goto out;
	struct bench_opts ao = *o;
	ao.id = "api.burst";
	r = run_burst(&ao, c, b, n, api, &n_api, &api_failed, NULL);
	if (r >= 0 && n_api > 0) {
		bench_stats_compute(api, n_api, &sa);
		bench_emit(&ao, "ms", &sa,
			   json_pack("{s:i,s:i}", "failed", api_failed, "creates", n));
	}
out:
	station_client_free(c);
	free(api);
	free(b);
	return r;
}
