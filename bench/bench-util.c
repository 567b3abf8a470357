/* SPDX-License-Identifier: MIT */
/* Timing, statistics, result lines and process helpers shared by the subcommands. */

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <sched.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

double bench_now_ms(void)
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

void bench_stats_compute(double *samples, size_t n, struct bench_stats *ret)
{
	*ret = (struct bench_stats){ .n = n,
				     .median = NAN,
				     .p99 = NAN,
				     .min = NAN,
				     .max = NAN,
				     .mean = NAN };
	if (n == 0)
		return;
	qsort(samples, n, sizeof *samples, cmp_double);
	double sum = 0;
	for (size_t i = 0; i < n; i++)
		sum += samples[i];
	size_t rank = (size_t)ceil(0.99 * (double)n);
	ret->median = n % 2 ? samples[n / 2] : (samples[n / 2 - 1] + samples[n / 2]) / 2;
	ret->p99 = samples[rank > 0 ? rank - 1 : 0];
	ret->min = samples[0];
	ret->max = samples[n - 1];
	ret->mean = sum / (double)n;
}

/* One line appended under an exclusive lock: rows may come from concurrent processes. */
static int append_line(const char *path, json_t *row)
{
	char *text = json_dumps(row, JSON_COMPACT | JSON_REAL_PRECISION(6));
	if (!text)
		return -ENOMEM;
	int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0) {
		int r = -errno;
		fprintf(stderr, "station-bench: %s: %s\n", path, strerror(errno));
		free(text);
		return r;
	}
	flock(fd, LOCK_EX);
	size_t len = strlen(text);
	text[len] = '\n';
	ssize_t n = write(fd, text, len + 1);
	int r = n == (ssize_t)(len + 1) ? 0 : -EIO;
	close(fd);
	free(text);
	return r;
}

static json_t *real_or_null(double v)
{
	return isnan(v) ? json_null() : json_real(v);
}

int bench_emit(const struct bench_opts *o, const char *unit, const struct bench_stats *s,
	       json_t *extra)
{
	json_t *row = json_pack("{ss ss sI so so so so so}", "id", o->id, "unit", unit, "n",
				(json_int_t)s->n, "median", real_or_null(s->median), "p99",
				real_or_null(s->p99), "min", real_or_null(s->min), "max",
				real_or_null(s->max), "mean", real_or_null(s->mean));
	if (!row) {
		json_decref(extra);
		return -ENOMEM;
	}
	if (extra)
		json_object_set_new(row, "extra", extra);
	int r = append_line(o->out, row);
	json_decref(row);
	bench_log("%s: median %.4g %s, p99 %.4g, min %.4g, max %.4g (n %zu)", o->id, s->median,
		  unit, s->p99, s->min, s->max, s->n);
	return r;
}

int bench_emit_skip(const struct bench_opts *o, const char *reason)
{
	json_t *row = json_pack("{ss ss}", "id", o->id, "skipped", reason);
	int r = row ? append_line(o->out, row) : -ENOMEM;
	json_decref(row);
	bench_log("%s: skipped: %s", o->id, reason);
	return r;
}

int bench_emit_fail(const struct bench_opts *o, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	json_t *row = json_pack("{ss ss}", "id", o->id, "failed", msg);
	if (row)
		append_line(o->out, row);
	json_decref(row);
	bench_log("%s: FAILED: %s", o->id, msg);
	return -EIO;
}

void bench_log(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("bench: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

int bench_client(const struct bench_opts *o, struct station_client **ret)
{
	int r = station_client_new(o->endpoint, o->token, ret);
	if (r < 0)
		bench_log("cannot make a client for %s: %s", o->endpoint, strerror(-r));
	return r;
}

int bench_exec_true(struct station_client *c, const char *ws)
{
	struct station_exec_options eo = { .command = "true", .wait_ms = 60000 };
	json_t *run = NULL;
	int r = station_exec_start(c, ws, &eo, &run);
	if (r < 0)
		return r;
	const char *status = json_string_value(json_object_get(run, "status"));
	json_t *code = json_object_get(run, "exitCode");
	r = status && strcmp(status, "exited") == 0 && json_integer_value(code) == 0 ? 0 : -EIO;
	json_decref(run);
	return r;
}

int bench_spawn_wait(char *const *argv, int out_fd)
{
	posix_spawn_file_actions_t fa;
	pid_t pid;
	int status;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	if (out_fd >= 0)
		posix_spawn_file_actions_adddup2(&fa, out_fd, 1);
	else
		posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
	int r = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	if (r != 0)
		return -r;
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -errno;
	return status;
}

int bench_private_mntns(void)
{
	if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		return -errno;
	if (umount2("/sys/fs/cgroup/unified", MNT_DETACH) < 0 && errno != EINVAL && errno != ENOENT)
		return -errno;
	return 0;
}

int64_t bench_proc_kb_field(pid_t pid, const char *file, const char *key)
{
	char path[64], line[256];
	size_t klen = strlen(key);
	snprintf(path, sizeof path, "/proc/%d/%s", (int)pid, file);
	FILE *f = fopen(path, "re");
	if (!f)
		return -errno;
	int64_t v = -ENOENT;
	while (fgets(line, sizeof line, f))
		if (strncmp(line, key, klen) == 0 && line[klen] == ':') {
			v = strtoll(line + klen + 1, NULL, 10) * 1024;
			break;
		}
	fclose(f);
	return v;
}
