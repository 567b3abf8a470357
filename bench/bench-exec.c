/* SPDX-License-Identifier: MIT */
/* One-at-a-time latencies: the posix_spawn floor, exec through the API, `runtime exec` into a
 * running container, `runtime run` of /bin/true, and workspace create → first exec. */

#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

/* Times fn over o->warmup discarded and o->runs kept iterations. i < 0 during the warm-up. */
typedef int (*sample_fn)(void *userdata, int i);

static int sample_loop(const struct bench_opts *o, sample_fn fn, void *userdata,
		       struct bench_stats *ret)
{
	double *t = calloc((size_t)(o->runs > 0 ? o->runs : 1), sizeof *t);
	if (!t)
		return -ENOMEM;
	for (int i = -o->warmup; i < o->runs; i++) {
		double start = bench_now_ms();
		int r = fn(userdata, i);
		double end = bench_now_ms();
		if (r < 0) {
			free(t);
			return r;
		}
		if (i >= 0)
			t[i] = end - start;
	}
	bench_stats_compute(t, (size_t)o->runs, ret);
	free(t);
	return 0;
}

static const char *status_text(int status, char *buf, size_t size)
{
	if (status < 0)
		snprintf(buf, size, "cannot start: %s", strerror(-status));
	else if (WIFEXITED(status))
		snprintf(buf, size, "exit status %d", WEXITSTATUS(status));
	else
		snprintf(buf, size, "killed by signal %d", WTERMSIG(status));
	return buf;
}

/* --- floor --- */

static int floor_one(void *userdata, int i)
{
	static char *const argv[] = { "/bin/sh", "-c", "true", NULL };
	pid_t pid;
	int status;
	if (posix_spawn(&pid, argv[0], NULL, NULL, argv, environ) != 0)
		return -errno;
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
		return -EIO;
	return 0;
}

int cmd_floor(const struct bench_opts *o)
{
	struct bench_stats s;
	int r = sample_loop(o, floor_one, NULL, &s);
	if (r < 0)
		return bench_emit_fail(o, "posix_spawn /bin/sh -c true: %s", strerror(-r));
	return bench_emit(o, "ms", &s, json_pack("{ss}", "command", "/bin/sh -c true"));
}

/* --- exec through the API --- */

struct exec_ctx {
	struct station_client *c;
	const char *ws;
};

static int exec_one(void *userdata, int i)
{
	struct exec_ctx *x = userdata;
	return bench_exec_true(x->c, x->ws);
}

int cmd_exec(const struct bench_opts *o)
{
	struct exec_ctx x = { .ws = o->workspace };
	struct bench_stats s;
	int r = bench_client(o, &x.c);
	if (r < 0)
		return bench_emit_fail(o, "client: %s", strerror(-r));
	r = sample_loop(o, exec_one, &x, &s);
	if (r < 0) {
		bench_emit_fail(o, "exec `true` in %s: %s", o->workspace,
				r == -EIO ? "run did not exit 0" : station_client_last_error(x.c));
		station_client_free(x.c);
		return r;
	}
	station_client_free(x.c);
	return bench_emit(o, "ms", &s,
			  json_pack("{ss ss}", "command", "true (as /bin/sh -c true)", "transport",
				    "client library, keep-alive, POST …/commands?waitMs=60000"));
}

/* --- OCI runtime baselines --- */

struct oci_ctx {
	const struct bench_opts *o;
	char id[64];
	int last_status;
};

static int oci_call(struct oci_ctx *x, const char *const *args)
{
	char *argv[16];
	size_t n = 0;
	argv[n++] = (char *)x->o->runtime;
	argv[n++] = "--root";
	argv[n++] = (char *)x->o->state;
	for (size_t i = 0; args[i] && n + 1 < 16; i++)
		argv[n++] = (char *)args[i];
	argv[n] = NULL;
	x->last_status = bench_spawn_wait(argv, -1);
	return x->last_status == 0 ? 0 : -EIO;
}

static int oci_exec_one(void *userdata, int i)
{
	struct oci_ctx *x = userdata;
	const char *args[] = { "exec", x->id, "/bin/sh", "-c", "true", NULL };
	return oci_call(x, args);
}

static int oci_setup(const struct bench_opts *o)
{
	if (!o->private_mntns)
		return 0;
	int r = bench_private_mntns();
	if (r < 0)
		bench_log("private mount namespace for %s: %s", o->runtime, strerror(-r));
	return r;
}

int cmd_oci_exec(const struct bench_opts *o)
{
	struct oci_ctx x = { .o = o };
	struct bench_stats s;
	char why[64];
	if (oci_setup(o) < 0)
		return bench_emit_fail(o, "cannot set up a private mount namespace for %s",
				       o->runtime);
	snprintf(x.id, sizeof x.id, "stbench-exec-%d", (int)getpid());
	const char *run[] = { "run", "-d", "--bundle", o->bundle, x.id, NULL };
	const char *del[] = { "delete", "--force", x.id, NULL };
	if (oci_call(&x, run) < 0)
		return bench_emit_fail(o, "%s run -d --bundle %s: %s", o->runtime, o->bundle,
				       status_text(x.last_status, why, sizeof why));
	int r = sample_loop(o, oci_exec_one, &x, &s);
	int exec_status = x.last_status;
	oci_call(&x, del);
	if (r < 0)
		return bench_emit_fail(o, "%s exec %s /bin/sh -c true: %s", o->runtime, x.id,
				       status_text(exec_status, why, sizeof why));
	return bench_emit(o, "ms", &s,
			  json_pack("{ss sb}", "command", "/bin/sh -c true", "privateMountNs",
				    o->private_mntns));
}

static int oci_run_one(void *userdata, int i)
{
	struct oci_ctx *x = userdata;
	char id[64];
	snprintf(id, sizeof id, "stbench-run-%d-%d", (int)getpid(), i + 1000);
	const char *args[] = { "run", "--bundle", x->o->bundle, id, NULL };
	int r = oci_call(x, args);
	if (r < 0) {
		const char *del[] = { "delete", "--force", id, NULL };
		int status = x->last_status;
		oci_call(x, del);
		x->last_status = status;
	}
	return r;
}

int cmd_oci_run(const struct bench_opts *o)
{
	struct oci_ctx x = { .o = o };
	struct bench_stats s;
	char why[64];
	if (oci_setup(o) < 0)
		return bench_emit_fail(o, "cannot set up a private mount namespace for %s",
				       o->runtime);
	int r = sample_loop(o, oci_run_one, &x, &s);
	if (r < 0)
		return bench_emit_fail(o, "%s run --bundle %s (/bin/true): %s", o->runtime,
				       o->bundle, status_text(x.last_status, why, sizeof why));
	return bench_emit(o, "ms", &s,
			  json_pack("{ss sb}", "command", "/bin/true", "privateMountNs",
				    o->private_mntns));
}

/* --- workspace create → first exec --- */

struct create_ctx {
	const struct bench_opts *o;
	struct station_client *c;
	double *create_ms; /* POST /v1/workspaces alone */
	double *delete_ms;
	double *second_ms;	      /* --pool: a second exec after the first, for comparison */
	int refused_503, refused_409; /* first execs refused: agent not connected, not ready */
	char error[512];
};

static int first_exec(struct create_ctx *x, const char *ws)
{
	double deadline = bench_now_ms() + 30000;
	for (;;) {
		int r = bench_exec_true(x->c, ws);
		if (r != -ENOTCONN && r != -EBUSY)
			return r;
		if (bench_now_ms() > deadline)
			return r;
		if (r == -ENOTCONN)
			x->refused_503++;
		else
			x->refused_409++;
		nanosleep(&(struct timespec){ 0, 200000 }, NULL);
	}
}

/* POST /v1/workspaces with the network mode (and egress policy) of the options: the same request
 * for every mode, so that the network rows differ by the mode alone. */
static int create_with_network(struct create_ctx *x, json_t **ret)
{
	json_t *body = json_pack("{ss ss ss}", "adapter", "container", "image", x->o->image,
				 "network", x->o->network);
	if (!body)
		return -ENOMEM;
	if (x->o->egress) {
		json_t *e = json_loads(x->o->egress, 0, NULL);
		if (!e) {
			json_decref(body);
			snprintf(x->error, sizeof x->error, "--egress is not JSON");
			return -EINVAL;
		}
		json_object_set_new(body, "egress", e);
	}
	int r = station_request_json(x->c, "POST", "/v1/workspaces", body, ret);
	json_decref(body);
	return r;
}

static int create_one(void *userdata, int i)
{
	struct create_ctx *x = userdata;
	struct station_workspace_options wo = { .adapter = "container",
						.image = x->o->image,
						.network = "none" };
	json_t *ws = NULL;
	double start = bench_now_ms();
	int r = x->o->network ? create_with_network(x, &ws) :
				station_workspace_create(x->c, &wo, &ws);
	if (r < 0) {
		if (!x->error[0])
			snprintf(x->error, sizeof x->error, "create: %s",
				 station_client_last_error(x->c));
		return r;
	}
	double created = bench_now_ms();
	char *id = strdup(json_string_value(json_object_get(ws, "id")));
	json_decref(ws);
	r = first_exec(x, id);
	double done = bench_now_ms();
	if (r >= 0 && x->o->pool && i >= 0) {
		r = bench_exec_true(x->c, id);
		x->second_ms[i] = bench_now_ms() - done;
		done = bench_now_ms();
	}
	if (r < 0)
		snprintf(x->error, sizeof x->error, "first exec in %s: %s", id,
			 r == -EIO ? "run did not exit 0" : station_client_last_error(x->c));
	int d = station_workspace_delete(x->c, id, NULL);
	if (d < 0 && r >= 0) {
		snprintf(x->error, sizeof x->error, "delete %s: %s", id,
			 station_client_last_error(x->c));
		r = d;
	}
	if (i >= 0) {
		x->create_ms[i] = created - start;
		x->delete_ms[i] = bench_now_ms() - done;
	}
	free(id);
	return r;
}

/* --pool: GET /v1/worker's pools; *ret_claimed the sum of their claimed counters. 1 when every
 * pool is full and starts nothing, 0 when not yet, < 0 on error. */
static int pools_full(struct create_ctx *x, long long *ret_claimed)
{
	json_t *w = NULL, *p;
	size_t i;
	int r = station_request_json(x->c, "GET", "/v1/worker", NULL, &w);
	if (r < 0)
		return r;
	json_t *pools = json_object_get(w, "pools");
	int full = json_array_size(pools) > 0;
	long long claimed = 0;
	json_array_foreach(pools, i, p) {
		full &= json_integer_value(json_object_get(p, "ready")) ==
				json_integer_value(json_object_get(p, "size")) &&
			json_integer_value(json_object_get(p, "starting")) == 0;
		claimed += json_integer_value(json_object_get(p, "claimed"));
	}
	json_decref(w);
	*ret_claimed = claimed;
	return full;
}

/* Before a sample: the pool is full again (bounded), so the create does not queue behind a
 * refill on the controller's loop. */
static int pool_wait_full(struct create_ctx *x, long long *ret_claimed)
{
	double deadline = bench_now_ms() + 60000;
	for (;;) {
		int r = pools_full(x, ret_claimed);
		if (r != 0)
			return r < 0 ? r : 0;
		if (bench_now_ms() > deadline) {
			snprintf(x->error, sizeof x->error, "the warm pool did not fill in 60 s");
			return -ETIMEDOUT;
		}
		nanosleep(&(struct timespec){ 0, 20000000 }, NULL);
	}
}

/* --pool: the sample was served from the pool (its claimed counter moved by one). */
static int pool_check_claimed(struct create_ctx *x, long long before)
{
	long long after = 0;
	int r = pools_full(x, &after);
	if (r < 0)
		return r;
	if (after != before + 1) {
		snprintf(x->error, sizeof x->error,
			 "a create was not served from the warm pool (claimed %lld -> %lld)",
			 before, after);
		return -EPROTO;
	}
	return 0;
}

/* The timed span of create_one is create + first exec; the delete after it is excluded by
 * measuring it apart and subtracting. */
int cmd_create(const struct bench_opts *o)
{
	struct create_ctx x = { .o = o };
	struct bench_stats s, sc, sd;
	size_t n = (size_t)(o->runs > 0 ? o->runs : 1);
	x.create_ms = calloc(n, sizeof(double));
	x.delete_ms = calloc(n, sizeof(double));
	x.second_ms = calloc(n, sizeof(double));
	double *t = calloc(n, sizeof(double));
	int r = x.create_ms && x.delete_ms && x.second_ms && t ? bench_client(o, &x.c) : -ENOMEM;
	if (r < 0) {
		free(t), free(x.create_ms), free(x.delete_ms), free(x.second_ms);
		return bench_emit_fail(o, "client: %s", strerror(-r));
	}
	for (int i = -o->warmup; r >= 0 && i < o->runs; i++) {
		long long claimed = 0;
		if (o->pool && (r = pool_wait_full(&x, &claimed)) < 0)
			break;
		double start = bench_now_ms();
		r = create_one(&x, i);
		if (i >= 0)
			t[i] = bench_now_ms() - start - x.delete_ms[i] - x.second_ms[i];
		if (r >= 0 && o->pool)
			r = pool_check_claimed(&x, claimed);
	}
	station_client_free(x.c);
	if (r < 0) {
		free(t), free(x.create_ms), free(x.delete_ms), free(x.second_ms);
		return bench_emit_fail(o, "%s", x.error);
	}
	bench_stats_compute(t, n, &s);
	bench_stats_compute(x.create_ms, n, &sc);
	bench_stats_compute(x.delete_ms, n, &sd);
	struct bench_stats s2;
	bench_stats_compute(x.second_ms, n, &s2);
	json_t *extra = json_pack("{ss sf sf sf sf si si ss sb}", "image", o->image,
				  "createMedianMs", sc.median, "createP99Ms", sc.p99,
				  "deleteMedianMs", sd.median, "deleteP99Ms", sd.p99,
				  "firstExecRefused503", x.refused_503, "firstExecRefused409",
				  x.refused_409, "network", o->network ? o->network : "none",
				  "pool", o->pool);
	if (o->pool)
		json_object_set_new(extra, "secondExecMedianMs", json_real(s2.median));
	free(t), free(x.create_ms), free(x.delete_ms), free(x.second_ms);
	return bench_emit(o, "ms", &s, extra);
}

/* --- any command (podman exec) --- */

struct cmd_ctx {
	char **argv;
	int last_status;
};

static int cmd_one(void *userdata, int i)
{
	struct cmd_ctx *x = userdata;
	x->last_status = bench_spawn_wait(x->argv, -1);
	return x->last_status == 0 ? 0 : -EIO;
}

int cmd_command(const struct bench_opts *o, char **argv)
{
	struct cmd_ctx x = { .argv = argv };
	struct bench_stats s;
	char why[64];
	if (!argv || !argv[0])
		return bench_emit_fail(o, "no command to time");
	int r = sample_loop(o, cmd_one, &x, &s);
	if (r < 0)
		return bench_emit_fail(o, "%s: %s", argv[0],
				       status_text(x.last_status, why, sizeof why));
	json_t *args = json_array();
	for (size_t i = 0; argv[i]; i++)
		json_array_append_new(args, json_string(argv[i]));
	return bench_emit(o, "ms", &s, json_pack("{so}", "argv", args));
}

/* --- teardown: every container in a runtime state root --- */

/* Every container in o->state (a controller's runtime root holds one per workspace: a
 * thousand after the density rows), deleted with --force. */
int cmd_oci_clean(const struct bench_opts *o)
{
	struct oci_ctx x = { .o = o };
	if (oci_setup(o) < 0)
		return -EIO;
	int fd = memfd_create("oci-list", MFD_CLOEXEC);
	if (fd < 0)
		return -errno;
	char *argv[] = { (char *)o->runtime, "--root", (char *)o->state, "list", "-q", NULL };
	int status = bench_spawn_wait(argv, fd);
	off_t size = lseek(fd, 0, SEEK_END);
	char *list = size >= 0 && size < (64 << 20) ? malloc((size_t)size + 1) : NULL;
	ssize_t n = list ? pread(fd, list, (size_t)size, 0) : -1;
	close(fd);
	if (!list)
		return -ENOMEM;
	list[n > 0 ? n : 0] = '\0';
	if (status != 0) {
		free(list);
		return -EIO;
	}
	int failed = 0;
	for (char *save = NULL, *id = strtok_r(list, "\n", &save); id;
	     id = strtok_r(NULL, "\n", &save)) {
		const char *del[] = { "delete", "--force", id, NULL };
		if (oci_call(&x, del) < 0) {
			bench_log("%s delete --force %s failed", o->runtime, id);
			failed = 1;
		}
	}
	free(list);
	return failed ? -EIO : 0;
}
