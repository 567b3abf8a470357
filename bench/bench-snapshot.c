/* SPDX-License-Identifier: MIT */
/* Pause and resume, snapshots and fork (DESIGN §11), each beside a baseline measured in turns
 * with it in the same process:
 *
 * station-bench pause --endpoint E --image REF --count N --runs N [--cgroup NAME]
 *   A container workspace running N sleeping processes (one command:
 *   `for i in $(seq N); do sleep 100000 & done; wait`), paused and resumed --runs times:
 *   ID.pause and ID.resume (POST …/pause and …/resume, request → answer, ms). Beside each cycle
 *   the kernel's part alone: N sleeps in a freezer group of our own (--cgroup NAME, under the
 *   v1 freezer hierarchy, else cgroup2), frozen and thawed with a tight poll of its state:
 *   ID.pause.bare, ID.resume.bare.
 *
 * station-bench snapshot --endpoint E --workspace WS --root DIR --bytes N --runs N
 *   WS's HOME filled to N bytes of random files (1 MiB each, kept across calls so that a second
 *   call with more bytes adds to the first), then in turns: POST …/snapshots (request → 201,
 *   the snapshot deleted after, untimed) as ID, and `tar cf` of the same trees the snapshot
 *   reads (DIR/workspaces/WS/upper/upper and home) into a file under DIR as ID.tar, with that
 *   file's fsync after it as ID.tarsync. A snapshot is answered once its layer is written
 *   and hashed, and made durable (fsync()ed) right after: ID.durable is request → the
 *   snapshot reads "durable": true (polled), beside ID.tarsync. Dirty pages are written out
 *   (sync) before each timed step.
 *
 * station-bench fork --endpoint E --workspace WS --count N --runs N
 *   In turns: POST …/fork {"count":N} then each new workspace's first `true` (N threads) as ID,
 *   against the same by hand as ID.base: POST …/snapshots, then N creates from that snapshot at
 *   once, each to its first `true`. ID.paused: the fork answer's pausedMs (the source frozen).
 *   Everything made is deleted after each sample, untimed. */

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

#define CGROUP2_MAGIC 0x63677270
#define FREEZER_V1 "/sys/fs/cgroup/freezer"
#define SLEEP_SECONDS "100000"
#define RUN_TIMEOUT_MS 86400000u /* the sleepers' run outlives the bench */
#define FILL_CHUNK (1u << 20)
#define FORK_COUNT_MAX 100

/* A row of its own id: o->id, or o->id + "." + suffix. */
static int emit_as(const struct bench_opts *o, const char *suffix, const char *unit,
		   double *samples, size_t n, json_t *extra)
{
	char id[256];
	struct bench_opts x = *o;
	struct bench_stats s;
	if (suffix)
		snprintf(id, sizeof id, "%s.%s", o->id, suffix);
	else
		snprintf(id, sizeof id, "%s", o->id);
	x.id = id;
	bench_stats_compute(samples, n, &s);
	return bench_emit(&x, unit, &s, extra);
}

static int fail_as(const struct bench_opts *o, const char *suffix, const char *why)
{
	char id[256];
	struct bench_opts x = *o;
	snprintf(id, sizeof id, "%s.%s", o->id, suffix);
	x.id = id;
	return bench_emit_fail(&x, "%s", why);
}

/* Runs command in ws and waits for it (bounded): 0 when it exited 0. */
static int exec_sh(struct station_client *c, const char *ws, const char *command,
		   uint64_t timeout_ms, char *err, size_t size)
{
	struct station_exec_options eo = { .command = command,
					   .timeout_ms = timeout_ms,
					   .wait_ms = 60000 };
	json_t *run = NULL, *done = NULL;
	int r = station_exec_start(c, ws, &eo, &run);
	if (r < 0) {
		snprintf(err, size, "exec in %s: %s", ws, station_client_last_error(c));
		return r;
	}
	const char *id = json_string_value(json_object_get(run, "id"));
	if (!station_run_is_terminal(run) && id) {
		r = station_run_wait(c, ws, id, (int64_t)timeout_ms + 10000, &done);
		if (r < 0)
			snprintf(err, size, "waiting for a run in %s: %s", ws,
				 station_client_last_error(c));
	} else {
		done = json_incref(run);
	}
	if (r >= 0) {
		const char *status = json_string_value(json_object_get(done, "status"));
		long long code = json_integer_value(json_object_get(done, "exitCode"));
		if (!status || strcmp(status, "exited") != 0 || code != 0) {
			snprintf(err, size, "`%.60s…` in %s: %s, exit %lld", command, ws,
				 status ? status : "?", code);
			r = -EIO;
		}
	}
	json_decref(run);
	json_decref(done);
	return r;
}

/* The first `true` in a new workspace, refused while its agent is not there yet (bounded). */
static int first_exec(struct station_client *c, const char *ws)
{
	double deadline = bench_now_ms() + 60000;
	for (;;) {
		int r = bench_exec_true(c, ws);
		if ((r != -ENOTCONN && r != -EBUSY) || bench_now_ms() > deadline)
			return r;
		nanosleep(&(struct timespec){ 0, 200000 }, NULL);
	}
}

/* DELETE /v1/snapshots/{id}, again while a workspace made from it is still going (bounded). */
static int snapshot_delete(struct station_client *c, const char *id)
{
	double deadline = bench_now_ms() + 60000;
	for (;;) {
		int r = station_snapshot_delete(c, id);
		if (r != -EBUSY || bench_now_ms() > deadline)
			return r;
		nanosleep(&(struct timespec){ 0, 20000000 }, NULL);
	}
}

/* --- pause and resume --- */

/* N sleeps in a freezer group of our own: the kernel's part of a pause, alone. */
struct bare_freezer {
	char dir[256];
	bool v1;
	pid_t *pids;
	size_t n;
};

static int write_file(const char *dir, const char *file, const char *text)
{
	char path[600];
	snprintf(path, sizeof path, "%s/%s", dir, file);
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ssize_t n = write(fd, text, strlen(text));
	int r = n == (ssize_t)strlen(text) ? 0 : n < 0 ? -errno : -EIO;
	close(fd);
	return r;
}

/* 1 frozen, 0 not (yet), < 0 error. */
static int bare_state(const struct bare_freezer *b, bool frozen)
{
	char path[600], buf[256];
	snprintf(path, sizeof path, "%s/%s", b->dir, b->v1 ? "freezer.state" : "cgroup.events");
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n < 0)
		return -errno;
	buf[n] = '\0';
	if (b->v1)
		return strcmp(buf, frozen ? "FROZEN\n" : "THAWED\n") == 0;
	char *f = strstr(buf, "frozen ");
	return f && f[7] == (frozen ? '1' : '0');
}

/* Asks for the state, then polls until the group is in it (bounded): ms taken. */
static double bare_set(const struct bare_freezer *b, bool frozen, int *ret)
{
	double start = bench_now_ms(), deadline = start + 10000;
	*ret = b->v1 ? write_file(b->dir, "freezer.state", frozen ? "FROZEN" : "THAWED") :
		       write_file(b->dir, "cgroup.freeze", frozen ? "1" : "0");
	while (*ret >= 0) {
		int k = bare_state(b, frozen);
		if (k != 0) {
			*ret = k < 0 ? k : 0;
			break;
		}
		if (bench_now_ms() > deadline) {
			*ret = -ETIMEDOUT;
			break;
		}
		sched_yield();
	}
	return bench_now_ms() - start;
}

static void bare_teardown(struct bare_freezer *b)
{
	int r;
	if (b->dir[0])
		(void)bare_set(b, false, &r); /* a frozen process does not die */
	for (size_t i = 0; i < b->n; i++)
		kill(b->pids[i], SIGKILL);
	for (size_t i = 0; i < b->n; i++)
		while (waitpid(b->pids[i], NULL, 0) < 0 && errno == EINTR)
			;
	if (b->dir[0]) {
		double deadline = bench_now_ms() + 5000;
		while (rmdir(b->dir) < 0 && errno == EBUSY && bench_now_ms() < deadline)
			nanosleep(&(struct timespec){ 0, 5000000 }, NULL);
	}
	free(b->pids);
	*b = (struct bare_freezer){};
}

static int bare_setup(struct bare_freezer *b, const char *name, size_t count, char *err,
		      size_t size)
{
	struct statfs sf;
	struct stat st;
	*b = (struct bare_freezer){ .pids = calloc(count, sizeof(pid_t)) };
	if (!b->pids)
		return -ENOMEM;
	if (stat(FREEZER_V1, &st) == 0 && S_ISDIR(st.st_mode)) {
		b->v1 = true;
		snprintf(b->dir, sizeof b->dir, FREEZER_V1 "/%s", name);
	} else if (statfs("/sys/fs/cgroup", &sf) == 0 &&
		   (unsigned long)sf.f_type == CGROUP2_MAGIC) {
		snprintf(b->dir, sizeof b->dir, "/sys/fs/cgroup/%s", name);
	} else {
		snprintf(err, size, "no freezer: neither %s nor cgroup2 at /sys/fs/cgroup",
			 FREEZER_V1);
		return -EOPNOTSUPP;
	}
	if (mkdir(b->dir, 0755) < 0) {
		snprintf(err, size, "mkdir %s: %s", b->dir, strerror(errno));
		b->dir[0] = '\0';
		return -errno;
	}
	char *argv[] = { "sleep", SLEEP_SECONDS, NULL };
	for (size_t i = 0; i < count; i++) {
		pid_t pid = fork();
		if (pid < 0) {
			snprintf(err, size, "fork: %s", strerror(errno));
			return -errno;
		}
		if (pid == 0) {
			prctl(PR_SET_PDEATHSIG, SIGKILL); /* none left behind if we are killed */
			execvp(argv[0], argv);
			_exit(127);
		}
		b->pids[b->n++] = pid;
		char text[32];
		snprintf(text, sizeof text, "%d", (int)pid);
		int r = write_file(b->dir, "cgroup.procs", text);
		if (r < 0) {
			snprintf(err, size, "%s/cgroup.procs: %s", b->dir, strerror(-r));
			return r;
		}
	}
	return 0;
}

struct pause_ctx {
	const struct bench_opts *o;
	struct station_client *c;
	char *ws;
	struct bare_freezer bare;
	char err[1024];
};

/* 0 when the workspace runs --count sleeps, counted by ps (the image has no pgrep), and the
 * freezer group alone (when made) holds as many; -EIO when not. */
static int sleepers_all_there(struct pause_ctx *x)
{
	char cmd[128], path[300], line[64];
	snprintf(cmd, sizeof cmd, "[ \"$(ps -o comm | grep -cx sleep)\" -ge %d ]", x->o->count);
	int r = exec_sh(x->c, x->ws, cmd, 10000, x->err, sizeof x->err);
	if (r < 0 || !x->bare.dir[0])
		return r;
	snprintf(path, sizeof path, "%s/cgroup.procs", x->bare.dir);
	FILE *f = fopen(path, "re");
	int n = 0;
	while (f && fgets(line, sizeof line, f))
		n++;
	if (f)
		fclose(f);
	if (n != x->o->count) {
		snprintf(x->err, sizeof x->err, "%s holds %d processes, not %d", path, n,
			 x->o->count);
		return -EIO;
	}
	return 0;
}

static int pause_setup(struct pause_ctx *x)
{
	const struct bench_opts *o = x->o;
	struct station_workspace_options wo = { .adapter = "container",
						.image = o->image,
						.network = "none" };
	json_t *ws = NULL, *run = NULL;
	char cmd[256];
	int r = station_workspace_create(x->c, &wo, &ws);
	if (r < 0) {
		snprintf(x->err, sizeof x->err, "create: %s", station_client_last_error(x->c));
		return r;
	}
	x->ws = strdup(json_string_value(json_object_get(ws, "id")));
	json_decref(ws);
	if ((r = first_exec(x->c, x->ws)) < 0) {
		snprintf(x->err, sizeof x->err, "first exec in %s: %s", x->ws,
			 station_client_last_error(x->c));
		return r;
	}
	snprintf(cmd, sizeof cmd, "for i in $(seq %d); do sleep " SLEEP_SECONDS " & done; wait",
		 o->count);
	struct station_exec_options eo = { .command = cmd, .timeout_ms = RUN_TIMEOUT_MS };
	if ((r = station_exec_start(x->c, x->ws, &eo, &run)) < 0) {
		snprintf(x->err, sizeof x->err, "start the sleepers: %s",
			 station_client_last_error(x->c));
		return r;
	}
	json_decref(run);
	/* Every sleeper started: counted inside the workspace (bounded). */
	double deadline = bench_now_ms() + 60000;
	while ((r = sleepers_all_there(x)) == -EIO && bench_now_ms() < deadline)
		nanosleep(&(struct timespec){ 0, 50000000 }, NULL);
	if (r < 0) {
		snprintf(x->err, sizeof x->err, "%d sleeps did not all start in %s within 60 s",
			 o->count, x->ws);
		return r;
	}
	return o->cgroup ?
		       bare_setup(&x->bare, o->cgroup, (size_t)o->count, x->err, sizeof x->err) :
		       0;
}

/* POST …/pause or …/resume: ms, the answer's state checked. */
static double pause_call(struct pause_ctx *x, bool pause, int *ret)
{
	json_t *ws = NULL;
	double start = bench_now_ms();
	*ret = pause ? station_workspace_pause(x->c, x->ws, &ws) :
		       station_workspace_resume(x->c, x->ws, &ws);
	double t = bench_now_ms() - start;
	const char *state = json_string_value(json_object_get(ws, "state"));
	if (*ret < 0)
		snprintf(x->err, sizeof x->err, "%s %s: %s", pause ? "pause" : "resume", x->ws,
			 station_client_last_error(x->c));
	else if (!state || strcmp(state, pause ? "paused" : "ready") != 0) {
		snprintf(x->err, sizeof x->err, "%s %s: state %s", pause ? "pause" : "resume",
			 x->ws, state ? state : "missing");
		*ret = -EPROTO;
	}
	json_decref(ws);
	return t;
}

int cmd_pause(const struct bench_opts *o)
{
	struct pause_ctx x = { .o = o };
	size_t n = (size_t)o->runs;
	double *p = calloc(n, sizeof(double)), *q = calloc(n, sizeof(double));
	double *bp = calloc(n, sizeof(double)), *bq = calloc(n, sizeof(double));
	int r = p && q && bp && bq ? bench_client(o, &x.c) : -ENOMEM;
	if (r >= 0)
		r = pause_setup(&x);
	/* In turns: the freezer alone, then the API, every cycle. */
	for (int i = -o->warmup; r >= 0 && i < o->runs; i++) {
		double t[4] = {};
		if (x.bare.dir[0]) {
			t[2] = bare_set(&x.bare, true, &r);
			if (r >= 0)
				t[3] = bare_set(&x.bare, false, &r);
			if (r < 0) {
				snprintf(x.err, sizeof x.err, "the freezer alone: %s",
					 strerror(-r));
				break;
			}
		}
		t[0] = pause_call(&x, true, &r);
		if (r >= 0)
			t[1] = pause_call(&x, false, &r);
		if (i >= 0)
			p[i] = t[0], q[i] = t[1], bp[i] = t[2], bq[i] = t[3];
	}
	/* Still all there at the end: each sample froze and thawed the same processes. */
	if (r >= 0 && (r = sleepers_all_there(&x)) < 0)
		snprintf(x.err + strlen(x.err), sizeof x.err - strlen(x.err),
			 " (after the cycles)");
	if (r < 0 && x.c && x.ws) /* not left paused for the teardown */
		(void)station_workspace_resume(x.c, x.ws, NULL);
	bool bare = x.bare.dir[0] != '\0';
	bool v1 = x.bare.v1;
	bare_teardown(&x.bare);
	if (x.ws && x.c)
		(void)station_workspace_delete(x.c, x.ws, NULL);
	station_client_free(x.c);
	if (r < 0) {
		fail_as(o, "pause", x.err[0] ? x.err : strerror(-r));
		fail_as(o, "resume", x.err[0] ? x.err : strerror(-r));
	} else {
		emit_as(o, "pause", "ms", p, n, json_pack("{si}", "processes", o->count));
		emit_as(o, "resume", "ms", q, n, json_pack("{si}", "processes", o->count));
		if (bare) {
			const char *how = v1 ? "cgroup v1 freezer.state" : "cgroup2 cgroup.freeze";
			emit_as(o, "pause.bare", "ms", bp, n,
				json_pack("{si ss}", "processes", o->count, "freezer", how));
			emit_as(o, "resume.bare", "ms", bq, n,
				json_pack("{si ss}", "processes", o->count, "freezer", how));
		}
	}
	free(x.ws);
	free(p), free(q), free(bp), free(bq);
	return r < 0 ? -EIO : 0;
}

/* --- snapshot against tar --- */

/* HOME/bench-data holds bytes of random data: files f0… of 1 MiB (those there are kept) and r
 * with the rest. */
static int fill_home(struct station_client *c, const char *ws, uint64_t bytes, char *err,
		     size_t size)
{
	char cmd[512];
	uint64_t whole = bytes / FILL_CHUNK, rest = bytes % FILL_CHUNK;
	snprintf(
		cmd, sizeof cmd,
		"mkdir -p \"${HOME:-/home/node}/bench-data\" && cd \"${HOME:-/home/node}/bench-data\" "
		"&& i=0 && while [ $i -lt %" PRIu64 " ]; do [ -e f$i ] || head -c %u /dev/urandom "
		"> f$i || exit 1; i=$((i+1)); done && rm -f r && if [ %" PRIu64
		" -gt 0 ]; then head -c %" PRIu64 " /dev/urandom > r; fi",
		whole, FILL_CHUNK, rest, rest);
	return exec_sh(c, ws, cmd, 1800000, err, size);
}

struct snap_ctx {
	const struct bench_opts *o;
	struct station_client *c;
	char wsdir[300], out[300];
	double paused_ms;
	double durable_ms; /* request → the snapshot reads durable (its image fsync()ed) */
	uint64_t size_bytes;
	char err[1024];
};

/* `tar cf OUT -C WSDIR upper/upper home`, then OUT's fsync: ms of each. */
static int tar_once(struct snap_ctx *x, double *ret_tar, double *ret_sync)
{
	char *argv[] = { "tar", "cf", x->out, "-C", x->wsdir, "upper/upper", "home", NULL };
	sync();
	double start = bench_now_ms();
	int status = bench_spawn_wait(argv, -1);
	*ret_tar = bench_now_ms() - start;
	if (status != 0) {
		snprintf(x->err, sizeof x->err, "tar cf %s -C %s upper/upper home: status %d",
			 x->out, x->wsdir, status);
		unlink(x->out);
		return -EIO;
	}
	start = bench_now_ms();
	int fd = open(x->out, O_RDONLY | O_CLOEXEC);
	int r = fd >= 0 && fsync(fd) == 0 ? 0 : -errno;
	*ret_sync = bench_now_ms() - start;
	if (fd >= 0)
		close(fd);
	unlink(x->out);
	if (r < 0)
		snprintf(x->err, sizeof x->err, "fsync %s: %s", x->out, strerror(-r));
	return r;
}

/* POST …/snapshots: ms; the snapshot deleted after (untimed). */
static int snapshot_once(struct snap_ctx *x, double *ret)
{
	json_t *s = NULL;
	sync();
	double start = bench_now_ms();
	int r = station_snapshot_create(x->c, x->o->workspace, NULL, &s);
	*ret = bench_now_ms() - start;
	if (r < 0) {
		snprintf(x->err, sizeof x->err, "snapshot of %s: %s", x->o->workspace,
			 station_client_last_error(x->c));
		return r;
	}
	x->paused_ms = (double)json_integer_value(json_object_get(s, "pausedMs"));
	x->size_bytes = (uint64_t)json_integer_value(json_object_get(s, "sizeBytes"));
	const char *id = json_string_value(json_object_get(s, "id"));
	/* on disk: the snapshot reads durable once its image is fsync()ed (bounded) */
	json_t *d = json_incref(s);
	double deadline = start + 120000;
	while (id && !json_is_true(json_object_get(d, "durable")) && bench_now_ms() < deadline) {
		json_decref(d);
		d = NULL;
		nanosleep(&(struct timespec){ 0, 200000 }, NULL);
		if ((r = station_snapshot_get(x->c, id, &d)) < 0)
			break;
	}
	x->durable_ms = bench_now_ms() - start;
	if (r >= 0 && !json_is_true(json_object_get(d, "durable")))
		r = -ETIMEDOUT;
	json_decref(d);
	if (r < 0) {
		snprintf(x->err, sizeof x->err, "snapshot %s not durable within 120 s: %s",
			 id ? id : "(no id)",
			 r == -ETIMEDOUT ? "" : station_client_last_error(x->c));
		json_decref(s);
		return r;
	}
	r = id ? snapshot_delete(x->c, id) : -EPROTO;
	if (r < 0)
		snprintf(x->err, sizeof x->err, "delete snapshot %s: %s", id ? id : "(no id)",
			 station_client_last_error(x->c));
	json_decref(s);
	return r;
}

int cmd_snapshot(const struct bench_opts *o)
{
	struct snap_ctx x = { .o = o };
	size_t n = (size_t)o->runs;
	double *tar = calloc(n, sizeof(double)), *tarsync = calloc(n, sizeof(double));
	double *snap = calloc(n, sizeof(double)), *paused = calloc(n, sizeof(double));
	double *durable = calloc(n, sizeof(double));
	double fill_ms = 0;
	uint64_t size_bytes = 0;
	struct stat st;
	int r = tar && tarsync && snap && paused && durable ? 0 : -ENOMEM;
	if (r >= 0 && (!o->workspace || !o->root)) {
		snprintf(x.err, sizeof x.err, "--workspace and --root are required");
		r = -EINVAL;
	}
	if (r >= 0) {
		snprintf(x.wsdir, sizeof x.wsdir, "%s/workspaces/%s", o->root, o->workspace);
		snprintf(x.out, sizeof x.out, "%s/bench-snapshot.tar", o->root);
		if (stat(x.wsdir, &st) < 0) {
			snprintf(x.err, sizeof x.err, "%s: %s", x.wsdir, strerror(errno));
			r = -errno;
		}
	}
	if (r >= 0)
		r = bench_client(o, &x.c);
	if (r >= 0) {
		double start = bench_now_ms();
		r = fill_home(x.c, o->workspace, o->bytes, x.err, sizeof x.err);
		fill_ms = bench_now_ms() - start;
	}
	/* In turns, the first alternating, so that both meet the same machine. */
	for (int i = -o->warmup; r >= 0 && i < o->runs; i++) {
		double t[3];
		if (i % 2 == 0) {
			r = tar_once(&x, &t[0], &t[1]);
			if (r >= 0)
				r = snapshot_once(&x, &t[2]);
		} else {
			r = snapshot_once(&x, &t[2]);
			if (r >= 0)
				r = tar_once(&x, &t[0], &t[1]);
		}
		if (r >= 0 && i >= 0) {
			tar[i] = t[0], tarsync[i] = t[0] + t[1], snap[i] = t[2];
			paused[i] = x.paused_ms;
			durable[i] = x.durable_ms;
			size_bytes = x.size_bytes;
		}
	}
	station_client_free(x.c);
	if (r < 0) {
		const char *why = x.err[0] ? x.err : strerror(-r);
		fail_as(o, "tar", why);
		fail_as(o, "tarsync", why);
		fail_as(o, "durable", why);
		bench_emit_fail(o, "%s", why);
	} else {
		struct bench_stats ps;
		emit_as(o, "tar", "ms", tar, n, json_pack("{sI}", "bytes", (json_int_t)o->bytes));
		emit_as(o, "tarsync", "ms", tarsync, n,
			json_pack("{sI}", "bytes", (json_int_t)o->bytes));
		bench_stats_compute(paused, n, &ps);
		emit_as(o, NULL, "ms", snap, n,
			json_pack("{sI sI sf sf sf}", "bytes", (json_int_t)o->bytes, "sizeBytes",
				  (json_int_t)size_bytes, "pausedMedianMs", ps.median,
				  "pausedP99Ms", ps.p99, "fillMs", fill_ms));
		emit_as(o, "durable", "ms", durable, n,
			json_pack("{sI}", "bytes", (json_int_t)o->bytes));
	}
	free(tar), free(tarsync), free(snap), free(paused), free(durable);
	return r < 0 ? -EIO : 0;
}

/* --- fork against a snapshot and creates from it --- */

struct fork_thread {
	struct station_client *c;
	const char *snapshot; /* base: create from it; NULL: ws is made already */
	char ws[64];
	int r;
	char err[256];
	pthread_t t;
};

static void *fork_thread_run(void *userdata)
{
	struct fork_thread *t = userdata;
	if (t->snapshot) {
		struct station_workspace_options wo = { .adapter = "container",
							.network = "none",
							.snapshot = t->snapshot };
		json_t *ws = NULL;
		t->r = station_workspace_create(t->c, &wo, &ws);
		if (t->r < 0) {
			snprintf(t->err, sizeof t->err, "create from %s: %s", t->snapshot,
				 station_client_last_error(t->c));
			return NULL;
		}
		snprintf(t->ws, sizeof t->ws, "%s", json_string_value(json_object_get(ws, "id")));
		json_decref(ws);
	}
	t->r = first_exec(t->c, t->ws);
	if (t->r < 0)
		snprintf(t->err, sizeof t->err, "first exec in %s: %s", t->ws,
			 t->r == -EIO ? "run did not exit 0" : station_client_last_error(t->c));
	return NULL;
}

/* Runs the threads at once; the first error's text into err. */
static int fork_threads(struct fork_thread *t, size_t n, char *err, size_t size)
{
	int r = 0;
	for (size_t i = 0; i < n; i++)
		if (pthread_create(&t[i].t, NULL, fork_thread_run, &t[i]) != 0) {
			t[i].r = -EAGAIN;
			snprintf(t[i].err, sizeof t[i].err, "pthread_create failed");
			t[i].t = 0;
		}
	for (size_t i = 0; i < n; i++) {
		if (t[i].t)
			pthread_join(t[i].t, NULL);
		if (t[i].r < 0 && r >= 0) {
			r = t[i].r;
			snprintf(err, size, "%s", t[i].err);
		}
	}
	return r;
}

/* Deletes what a sample made: its workspaces, then its snapshot. */
static int fork_cleanup(struct station_client *c, struct fork_thread *t, size_t n,
			const char *snapshot, char *err, size_t size)
{
	int r = 0;
	for (size_t i = 0; i < n; i++)
		if (t[i].ws[0] && station_workspace_delete(c, t[i].ws, NULL) < 0 && r >= 0) {
			snprintf(err, size, "delete %s: %s", t[i].ws, station_client_last_error(c));
			r = -EIO;
		}
	if (snapshot && snapshot[0] && snapshot_delete(c, snapshot) < 0 && r >= 0) {
		snprintf(err, size, "delete snapshot %s: %s", snapshot,
			 station_client_last_error(c));
		r = -EIO;
	}
	return r;
}

/* By hand: one snapshot, then n creates from it at once, each to its first `true`. */
static int fork_base_once(struct station_client *c, struct fork_thread *t, size_t n, const char *ws,
			  double *ret, double *ret_snap_ms, double *ret_paused, char *err,
			  size_t size)
{
	json_t *s = NULL;
	char snapshot[64] = "";
	sync();
	double start = bench_now_ms();
	int r = station_snapshot_create(c, ws, NULL, &s);
	*ret_snap_ms = bench_now_ms() - start;
	if (r < 0) {
		snprintf(err, size, "snapshot of %s: %s", ws, station_client_last_error(c));
		return r;
	}
	snprintf(snapshot, sizeof snapshot, "%s", json_string_value(json_object_get(s, "id")));
	*ret_paused = (double)json_integer_value(json_object_get(s, "pausedMs"));
	json_decref(s);
	for (size_t i = 0; i < n; i++)
		t[i].snapshot = snapshot, t[i].ws[0] = '\0', t[i].r = 0;
	r = fork_threads(t, n, err, size);
	*ret = bench_now_ms() - start;
	int k = fork_cleanup(c, t, n, snapshot, r < 0 ? NULL : err, r < 0 ? 0 : size);
	return r < 0 ? r : k;
}

/* POST …/fork {"count":n}, then each new workspace's first `true`, at once. */
static int fork_once(struct station_client *c, struct fork_thread *t, size_t n, const char *ws,
		     double *ret, double *ret_paused, char *err, size_t size)
{
	json_t *f = NULL, *w;
	char snapshot[64] = "";
	size_t i;
	sync();
	double start = bench_now_ms();
	int r = station_workspace_fork(c, ws, (unsigned)n, &f);
	if (r < 0) {
		snprintf(err, size, "fork of %s: %s", ws, station_client_last_error(c));
		return r;
	}
	for (i = 0; i < n; i++)
		t[i].snapshot = NULL, t[i].ws[0] = '\0', t[i].r = 0;
	json_array_foreach(json_object_get(f, "workspaces"), i, w)
		if (i < n)
			snprintf(t[i].ws, sizeof t[i].ws, "%s",
				 json_string_value(json_object_get(w, "id")));
	const char *sid = json_string_value(json_object_get(f, "snapshot"));
	snprintf(snapshot, sizeof snapshot, "%s", sid ? sid : "");
	*ret_paused = (double)json_integer_value(json_object_get(f, "pausedMs"));
	if (json_array_size(json_object_get(f, "workspaces")) != n) {
		snprintf(err, size, "the fork answer lists %zu workspaces, not %zu",
			 json_array_size(json_object_get(f, "workspaces")), n);
		r = -EPROTO;
	}
	json_decref(f);
	if (r >= 0)
		r = fork_threads(t, n, err, size);
	*ret = bench_now_ms() - start;
	int k = fork_cleanup(c, t, n, snapshot, r < 0 ? NULL : err, r < 0 ? 0 : size);
	return r < 0 ? r : k;
}

int cmd_fork(const struct bench_opts *o)
{
	size_t n = (size_t)o->runs, count = (size_t)o->count;
	struct station_client *c = NULL;
	struct fork_thread *t = calloc(count, sizeof *t);
	double *base = calloc(n, sizeof(double)), *fork = calloc(n, sizeof(double));
	double *paused = calloc(n, sizeof(double)), *snap_ms = calloc(n, sizeof(double));
	double *snap_paused = calloc(n, sizeof(double));
	char err[1024] = "";
	int r = t && base && fork && paused && snap_ms && snap_paused ? 0 : -ENOMEM;
	if (r >= 0 && (!o->workspace || o->count < 1 || o->count > FORK_COUNT_MAX)) {
		snprintf(err, sizeof err, "--workspace and --count 1 to %d are required",
			 FORK_COUNT_MAX);
		r = -EINVAL;
	}
	if (r >= 0)
		r = bench_client(o, &c);
	for (size_t i = 0; r >= 0 && i < count; i++)
		r = bench_client(o, &t[i].c);
	for (int i = -o->warmup; r >= 0 && i < o->runs; i++) {
		double tb = 0, tf = 0, pf = 0, sm = 0, sp = 0;
		if (i % 2 == 0) {
			r = fork_base_once(c, t, count, o->workspace, &tb, &sm, &sp, err,
					   sizeof err);
			if (r >= 0)
				r = fork_once(c, t, count, o->workspace, &tf, &pf, err, sizeof err);
		} else {
			r = fork_once(c, t, count, o->workspace, &tf, &pf, err, sizeof err);
			if (r >= 0)
				r = fork_base_once(c, t, count, o->workspace, &tb, &sm, &sp, err,
						   sizeof err);
		}
		if (r >= 0 && i >= 0)
			base[i] = tb, fork[i] = tf, paused[i] = pf, snap_ms[i] = sm,
			snap_paused[i] = sp;
	}
	for (size_t i = 0; t && i < count; i++)
		station_client_free(t[i].c);
	station_client_free(c);
	if (r < 0) {
		const char *why = err[0] ? err : strerror(-r);
		fail_as(o, "base", why);
		bench_emit_fail(o, "%s", why);
		fail_as(o, "paused", why);
	} else {
		struct bench_stats ss, sp;
		bench_stats_compute(snap_ms, n, &ss);
		bench_stats_compute(snap_paused, n, &sp);
		emit_as(o, "base", "ms", base, n,
			json_pack("{si sf}", "count", o->count, "snapshotMedianMs", ss.median));
		emit_as(o, NULL, "ms", fork, n, json_pack("{si}", "count", o->count));
		emit_as(o, "paused", "ms", paused, n,
			json_pack("{si sf}", "count", o->count, "snapshotPausedMedianMs",
				  sp.median));
	}
	free(t), free(base), free(fork), free(paused), free(snap_ms), free(snap_paused);
	return r < 0 ? -EIO : 0;
}
