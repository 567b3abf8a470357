/* SPDX-License-Identifier: MIT */
/* Throughputs: execs per second from concurrent clients, output streamed to a client, and
 * status polls per second (wrk). Each is repeated o->reps times; the row is over repetitions. */

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench-ws.h"
#include "bench.h"

/* --- execs per second --- */

struct rate_shared {
	const struct bench_opts *o;
	bool floor; /* posix_spawn + wait of /bin/sh -c true instead of an exec through the API */
	pthread_barrier_t ready, start, end;
	double rep_end; /* written by main between the ready and the start barrier */
	atomic_int failed;
};

struct rate_thread {
	struct rate_shared *sh;
	pthread_t thread;
	long count;	/* this repetition */
	double last_ms; /* when its last exec of this repetition returned */
	double *lat;	/* every exec's latency, all repetitions */
	size_t nlat, cap;
	char error[256];
};

static void rate_record(struct rate_thread *t, double ms)
{
	if (t->nlat == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 4096;
		double *p = realloc(t->lat, cap * sizeof *p);
		if (!p)
			return;
		t->lat = p, t->cap = cap;
	}
	t->lat[t->nlat++] = ms;
}

/* The floor's one operation, exactly what exec.floor times, here from every thread at once. */
static int spawn_true(void)
{
	static char *const argv[] = { "/bin/sh", "-c", "true", NULL };
	pid_t pid;
	int status, r = posix_spawn(&pid, argv[0], NULL, NULL, argv, environ);
	if (r != 0)
		return -r;
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -errno;
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -EIO;
}

static int rate_one(struct rate_shared *sh, struct station_client *c)
{
	return sh->floor ? spawn_true() : bench_exec_true(c, sh->o->workspace);
}

static const char *rate_error(struct rate_shared *sh, struct station_client *c, int r)
{
	if (sh->floor)
		return r == -EIO ? "/bin/sh -c true did not exit 0" : strerror(-r);
	if (r == -EIO)
		return "run did not exit 0";
	return c ? station_client_last_error(c) : "client";
}

static void *rate_main(void *userdata)
{
	struct rate_thread *t = userdata;
	struct rate_shared *sh = t->sh;
	struct station_client *c = NULL;
	int r = sh->floor ? 0 : bench_client(sh->o, &c);
	for (int i = 0; r >= 0 && i < 5; i++) /* warm-up: connection and first requests */
		r = rate_one(sh, c);
	if (r < 0) {
		snprintf(t->error, sizeof t->error, "%s", rate_error(sh, c, r));
		atomic_store(&sh->failed, 1);
	}
	for (int rep = 0; rep < sh->o->reps; rep++) {
		/* every thread warmed up (or failed) before the repetition's clock starts: under
		 * load the warm-up alone can outlast a repetition */
		pthread_barrier_wait(&sh->ready);
		pthread_barrier_wait(&sh->start);
		t->count = 0;
		t->last_ms = bench_now_ms();
		while (!atomic_load(&sh->failed) && t->last_ms < sh->rep_end) {
			double start = t->last_ms;
			r = rate_one(sh, c);
			t->last_ms = bench_now_ms();
			if (r < 0) {
				snprintf(t->error, sizeof t->error, "%s", rate_error(sh, c, r));
				atomic_store(&sh->failed, 1);
				break;
			}
			t->count++;
			rate_record(t, t->last_ms - start);
		}
		pthread_barrier_wait(&sh->end);
	}
	station_client_free(c);
	return NULL;
}

/* One repetition: releases the threads, waits for them, returns execs per second. */
static double rate_rep(struct rate_shared *sh, struct rate_thread *th, int n)
{
	pthread_barrier_wait(&sh->ready);
	double start = bench_now_ms();
	sh->rep_end = start + sh->o->seconds * 1000;
	pthread_barrier_wait(&sh->start);
	pthread_barrier_wait(&sh->end);
	long total = 0;
	double last = start;
	for (int i = 0; i < n; i++) {
		total += th[i].count;
		last = th[i].last_ms > last ? th[i].last_ms : last;
	}
	return last > start ? (double)total * 1000 / (last - start) : 0;
}

static int rate(const struct bench_opts *o, bool floor)
{
	int n = o->clients > 0 ? o->clients : 1;
	struct rate_shared sh = { .o = o, .floor = floor };
	struct rate_thread *th = calloc((size_t)n, sizeof *th);
	double *rates = calloc((size_t)o->reps, sizeof *rates);
	if (!th || !rates)
		return -ENOMEM;
	pthread_barrier_init(&sh.ready, NULL, (unsigned)n + 1);
	pthread_barrier_init(&sh.start, NULL, (unsigned)n + 1);
	pthread_barrier_init(&sh.end, NULL, (unsigned)n + 1);
	for (int i = 0; i < n; i++) {
		th[i].sh = &sh;
		pthread_create(&th[i].thread, NULL, rate_main, &th[i]);
	}
	for (int rep = 0; rep < o->reps; rep++)
		rates[rep] = rate_rep(&sh, th, n);
	size_t nlat = 0;
	for (int i = 0; i < n; i++) {
		pthread_join(th[i].thread, NULL);
		nlat += th[i].nlat;
	}
	int r = 0;
	if (atomic_load(&sh.failed)) {
		for (int i = 0; i < n && r == 0; i++)
			if (th[i].error[0])
				r = bench_emit_fail(o, "%s with %d %s: %s",
						    floor ? "posix_spawn /bin/sh -c true" :
							    "exec `true`",
						    n, floor ? "threads" : "clients", th[i].error);
	} else {
		double *all = malloc((nlat ? nlat : 1) * sizeof *all);
		struct bench_stats s, lat;
		size_t k = 0;
		for (int i = 0; all && i < n; i++) {
			memcpy(all + k, th[i].lat, th[i].nlat * sizeof *all);
			k += th[i].nlat;
		}
		bench_stats_compute(all, all ? k : 0, &lat);
		bench_stats_compute(rates, (size_t)o->reps, &s);
		s.p99 = NAN; /* over a few repetitions: min-max says more */
		r = bench_emit(o, floor ? "spawns/s" : "exec/s", &s,
			       json_pack("{si sf sf sf sI}", "clients", n, "secondsPerRep",
					 o->seconds, "latencyP50Ms", lat.median, "latencyP99Ms",
					 lat.p99, "execs", (json_int_t)k));
		free(all);
	}
	for (int i = 0; i < n; i++)
		free(th[i].lat);
	pthread_barrier_destroy(&sh.ready);
	pthread_barrier_destroy(&sh.start);
	pthread_barrier_destroy(&sh.end);
	free(th), free(rates);
	return r;
}

int cmd_rate(const struct bench_opts *o)
{
	return rate(o, false);
}

/* The floor of the rate rows: o->clients threads each spawning and waiting for /bin/sh -c true
 * in a loop, for the same repetitions and seconds. */
int cmd_spawn_rate(const struct bench_opts *o)
{
	return rate(o, true);
}

/* --- output streamed to a client --- */

struct follow_count {
	uint64_t delivered, gaps;
	uint64_t stdout_bytes;
	double duration_ms; /* the run's own, from the controller */
	struct ws_count go; /* the go file, created at the first byte */
};

static int on_output(enum station_stream s, uint64_t offset, const void *data, size_t len,
		     void *userdata)
{
	struct follow_count *f = userdata;
	f->delivered += len;
	bench_go(&f->go);
	return 0;
}

static int on_gap(enum station_stream s, uint64_t offset, uint64_t bytes, void *userdata)
{
	struct follow_count *f = userdata;
	f->gaps += bytes;
	return 0;
}

static int on_end(json_t *run, void *userdata)
{
	struct follow_count *f = userdata;
	f->stdout_bytes = (uint64_t)json_integer_value(json_object_get(run, "stdoutBytes"));
	f->duration_ms = (double)json_integer_value(json_object_get(run, "durationMs"));
	return 0;
}

/* Streams `head -c BYTES /dev/zero` once the follower is attached: the run writes one byte,
 * then waits for go_path, which the follower creates at the first byte it receives (so nothing
 * is written before the watch began). *ret_mbs is MB/s (1 MB = 10^6 bytes) of the BYTES
 * delivered from then to the end message; *ret counts the marker byte too. */
static int output_once(struct station_client *c, const struct bench_opts *o, const char *go_path,
		       uint64_t bytes, double *ret_mbs, struct follow_count *ret)
{
	static const struct station_follow_callbacks cb = { on_output, on_gap, on_end };
	char cmd[4200];
	snprintf(cmd, sizeof cmd,
		 "printf x; while [ ! -e '%s' ]; do sleep 0.001; done; head -c %llu /dev/zero",
		 go_path, (unsigned long long)bytes);
	struct station_exec_options eo = { .command = cmd, .timeout_ms = 600000 };
	json_t *run = NULL;
	*ret = (struct follow_count){ 0 };
	if (unlink(go_path) < 0 && errno != ENOENT)
		return -errno;
	int r = station_exec_start(c, o->workspace, &eo, &run);
	if (r < 0)
		return r;
	char *id = strdup(json_string_value(json_object_get(run, "id")));
	json_decref(run);
	const char *tr = o->transport ? o->transport : "follow";
	if (strcmp(tr, "ws") == 0 || strcmp(tr, "sse") == 0) {
		struct ws_count w = { .go_path = go_path };
		r = strcmp(tr, "ws") == 0 ? bench_ws_follow(o->endpoint, o->workspace, id, &w) :
					    bench_sse_follow(o->endpoint, o->workspace, id, &w);
		*ret = (struct follow_count){ w.delivered, w.gaps, w.stdout_bytes, w.duration_ms,
					      w };
	} else {
		ret->go.go_path = go_path;
		r = station_run_follow(c, o->workspace, id, &cb, ret, NULL);
	}
	double end = bench_now_ms();
	free(id);
	unlink(go_path);
	if (r < 0)
		return r;
	if (ret->go.go_ms <= 0 || ret->delivered < 1)
		return -EIO;
	*ret_mbs = (double)(ret->delivered - 1) / 1e3 / (end - ret->go.go_ms);
	return 0;
}

int cmd_output(const struct bench_opts *o)
{
	struct station_client *c = NULL;
	struct follow_count f;
	double warm, *mbs = calloc((size_t)o->reps, sizeof *mbs);
	double *gap = calloc((size_t)o->reps, sizeof *gap);
	double *producer = calloc((size_t)o->reps, sizeof *producer);
	char go_path[4096] = "";
	int r = mbs && gap && producer ? bench_client(o, &c) : -ENOMEM;
	if (r >= 0) { /* the go file lives in the workspace's home */
		json_t *ws = NULL;
		r = station_workspace_get(c, o->workspace, &ws);
		const char *home = json_string_value(json_object_get(ws, "home"));
		if (r >= 0 && !home)
			r = -EPROTO;
		if (r >= 0)
			snprintf(go_path, sizeof go_path, "%s/.bench-output-go", home);
		json_decref(ws);
	}
	if (r >= 0)
		r = output_once(c, o, go_path, o->bytes < (64u << 20) ? o->bytes : (64u << 20),
				&warm, &f);
	for (int rep = 0; r >= 0 && rep < o->reps; rep++) {
		r = output_once(c, o, go_path, o->bytes, &mbs[rep], &f);
		if (r >= 0 && f.stdout_bytes != o->bytes + 1)
			r = -EIO;
		gap[rep] = (double)f.gaps / (double)o->bytes;
		producer[rep] = f.duration_ms > 0 ? (double)f.stdout_bytes / 1e3 / f.duration_ms :
						    0;
	}
	const char *tr = o->transport ? o->transport : "follow";
	bool lib = strcmp(tr, "follow") == 0;
	const char *name = strcmp(tr, "ws") == 0  ? "WebSocket, minimal reader" :
			   strcmp(tr, "sse") == 0 ? "SSE, minimal reader" :
						    "WebSocket, station_run_follow";
	if (r < 0) {
		r = bench_emit_fail(o, "streaming head -c %llu /dev/zero over %s: %s",
				    (unsigned long long)o->bytes, name,
				    r == -EIO  ? "the run did not write every byte" :
				    !lib || !c ? strerror(-r) :
						 station_client_last_error(c));
	} else {
		struct bench_stats s, g, p;
		bench_stats_compute(mbs, (size_t)o->reps, &s);
		s.p99 = NAN;
		bench_stats_compute(gap, (size_t)o->reps, &g);
		bench_stats_compute(producer, (size_t)o->reps, &p);
		r = bench_emit(o, "MB/s", &s,
			       json_pack("{sI sf sf sf ss}", "bytes", (json_int_t)o->bytes,
					 "gapFractionMedian", g.median, "gapFractionMax", g.max,
					 "producerMBsMedian", p.median, "transport", name));
	}
	station_client_free(c);
	free(mbs), free(gap), free(producer);
	return r;
}

/* --- status polls per second (wrk) --- */

struct wrk_result {
	double rps, p50_ms, p99_ms;
	long non2xx, socket_errors;
};

static double wrk_time_ms(const char *s)
{
	char *end;
	double v = strtod(s, &end);
	if (strncmp(end, "us", 2) == 0)
		return v / 1000;
	if (strncmp(end, "ms", 2) == 0)
		return v;
	if (*end == 's')
		return v * 1000;
	if (*end == 'm')
		return v * 60000;
	return NAN;
}

static void wrk_parse(const char *text, struct wrk_result *ret)
{
	const char *p;
	*ret = (struct wrk_result){ NAN, NAN, NAN, 0, 0 };
	if ((p = strstr(text, "Requests/sec:")))
		ret->rps = strtod(p + 13, NULL);
	if ((p = strstr(text, " 50% ")))
		ret->p50_ms = wrk_time_ms(p + 5 + strspn(p + 5, " "));
	if ((p = strstr(text, " 99% ")))
		ret->p99_ms = wrk_time_ms(p + 5 + strspn(p + 5, " "));
	if ((p = strstr(text, "Non-2xx or 3xx responses:")))
		ret->non2xx = strtol(p + 25, NULL, 10);
	if ((p = strstr(text, "Socket errors:"))) {
		long a = 0, b = 0, c = 0, d = 0;
		sscanf(p, "Socket errors: connect %ld, read %ld, write %ld, timeout %ld", &a, &b,
		       &c, &d);
		ret->socket_errors = a + b + c + d;
	}
}

static int read_token(const char *path, char *buf, size_t size)
{
	FILE *f = fopen(path, "re");
	if (!f)
		return -errno;
	if (!fgets(buf, (int)size, f))
		buf[0] = '\0';
	fclose(f);
	buf[strcspn(buf, "\r\n")] = '\0';
	return buf[0] ? 0 : -EINVAL;
}

static int wrk_once(const struct bench_opts *o, const char *header, double seconds,
		    struct wrk_result *ret, char *out, size_t out_size)
{
	char conns[16], dur[16];
	snprintf(conns, sizeof conns, "%d", o->clients);
	snprintf(dur, sizeof dur, "%ds", (int)(seconds + 0.5));
	char *argv[] = { "wrk",	      "-t2", "-c",	     conns,	     "-d", dur,
			 "--latency", "-H",  (char *)header, (char *)o->url, NULL };
	int fd = memfd_create("wrk-out", MFD_CLOEXEC);
	if (fd < 0)
		return -errno;
	int status = bench_spawn_wait(argv, fd);
	ssize_t n = pread(fd, out, out_size - 1, 0);
	close(fd);
	out[n > 0 ? n : 0] = '\0';
	if (status != 0)
		return -EIO;
	wrk_parse(out, ret);
	return isnan(ret->rps) ? -EPROTO : 0;
}

int cmd_polls(const struct bench_opts *o)
{
	char token[256], header[320], out[8192];
	struct wrk_result w;
	double *rps = calloc((size_t)o->reps, sizeof *rps), p50 = NAN, p99 = NAN;
	long non2xx = 0, errors = 0;
	int r = rps ? read_token(o->token_file, token, sizeof token) : -ENOMEM;
	if (r < 0) {
		free(rps);
		return bench_emit_fail(o, "admin token %s: %s", o->token_file, strerror(-r));
	}
	snprintf(header, sizeof header, "Authorization: Bearer %s", token);
	r = wrk_once(o, header, 1, &w, out, sizeof out); /* warm-up */
	for (int rep = 0; r >= 0 && rep < o->reps; rep++) {
		r = wrk_once(o, header, o->seconds, &w, out, sizeof out);
		rps[rep] = w.rps;
		non2xx += w.non2xx;
		errors += w.socket_errors;
		if (rep == o->reps / 2)
			p50 = w.p50_ms, p99 = w.p99_ms;
	}
	if (r < 0) {
		free(rps);
		return bench_emit_fail(o, "wrk %s: %s", r == -EIO ? "failed" : "printed no rate",
				       out);
	}
	struct bench_stats s;
	bench_stats_compute(rps, (size_t)o->reps, &s);
	s.p99 = NAN;
	free(rps);
	return bench_emit(o, "req/s", &s,
			  json_pack("{si si sf sf sI sI ss}", "connections", o->clients, "threads",
				    2, "latencyP50Ms", p50, "latencyP99Ms", p99, "non2xx",
				    (json_int_t)non2xx, "socketErrors", (json_int_t)errors,
				    "transport", "TCP, bearer token"));
}
