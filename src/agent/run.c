/* SPDX-License-Identifier: MIT */
#include "agent/run.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent/child.h"
#include "basic/cleanup.h"
#include "basic/log.h"
#include "basic/util.h"
#include "proto/agent-proto.h"

#define SHUTDOWN_USEC 5000000ull

struct run {
	struct run_manager *m;
	char *id;
	char *cwd;
	struct child child;
	struct rusage ru;
	enum run_status forced; /* RUN_TIMED_OUT or RUN_CANCELLED once we killed it */
	struct event_source *stdin_io;
	uint8_t *stdin_data;
	size_t stdin_len;
	size_t stdin_pos;
	struct event_source *deadline;
	uint64_t deadline_at; /* CLOCK_MONOTONIC usec the deadline fires, while armed */
};

struct run_manager {
	struct child_base base; /* first (child_base_new()); its children are the live runs */
	uint64_t paused_at;	/* CLOCK_MONOTONIC usec of PAUSE; 0: not paused */
};

/* The parsed RUN_START. */
struct run_request {
	char *id;
	char *command;
	char *cwd;
	char **env;
	size_t n_env;
	uint8_t *stdin_data;
	size_t stdin_len;
	bool has_stdin;
	uint64_t timeout_ms;
	uint64_t head;
	uint64_t tail;
	bool watch;
	uint32_t seen; /* bit per tag */
};

static void request_done(struct run_request *q)
{
	free(q->id);
	free(q->command);
	free(q->cwd);
	spawn_env_free(q->env, q->n_env);
	free(q->stdin_data);
}

/* ---- validation ---------------------------------------------------------------------------- */

static int read_flag(const uint8_t *val, size_t len, bool *ret)
{
	uint64_t v;
	int r = frame_val_u64(val, len, &v);

	if (r < 0)
		return r;
	if (v > 1)
		return -EBADMSG;
	*ret = v;
	return 0;
}

static int request_add_env(struct run_request *q, const uint8_t *val, size_t len)
{
	return spawn_env_append(&q->env, &q->n_env, val, len);
}

static int request_set_stdin(struct run_request *q, const uint8_t *val, size_t len)
{
	if (len > PROTO_MAX_STDIN)
		return -E2BIG;
	q->stdin_data = malloc(len ? len : 1);
	if (!q->stdin_data)
		return -ENOMEM;
	memcpy(q->stdin_data, val, len);
	q->stdin_len = len;
	q->has_stdin = true;
	return 0;
}

static int request_field(void *userdata, uint16_t tag, const uint8_t *val, size_t len)
{
	struct run_request *q = userdata;

	if (tag == TAG_ENV)
		return request_add_env(q, val, len);
	if (tag >= 32 || (q->seen & (1u << tag)))
		return -EBADMSG; /* unknown or repeated */
	q->seen |= 1u << tag;
	switch (tag) {
	case TAG_RUN_ID:
		return proto_id_read(val, len, &q->id);
	case TAG_COMMAND:
		return frame_val_strdup(val, len, PROTO_MAX_COMMAND, &q->command);
	case TAG_CWD:
		return frame_val_strdup(val, len, PROTO_MAX_PATH, &q->cwd);
	case TAG_STDIN:
		return request_set_stdin(q, val, len);
	case TAG_TIMEOUT_MS:
		return frame_val_u64(val, len, &q->timeout_ms);
	case TAG_HEAD_BYTES:
		return frame_val_u64(val, len, &q->head);
	case TAG_TAIL_BYTES:
		return frame_val_u64(val, len, &q->tail);
	case TAG_WATCH:
		return read_flag(val, len, &q->watch);
	default:
		return -EBADMSG;
	}
}

static int request_parse(const struct frame *f, struct run_request *q)
{
	const uint32_t required = 1u << TAG_RUN_ID | 1u << TAG_COMMAND | 1u << TAG_TIMEOUT_MS |
				  1u << TAG_HEAD_BYTES | 1u << TAG_TAIL_BYTES;
	int r = frame_for_each_field(f, request_field, q);

	if (r < 0)
		return r;
	if ((q->seen & required) != required)
		return -EBADMSG;
	if (q->cwd && q->cwd[0] != '/')
		return -EBADMSG;
	/* Head and tail of both streams must fit one RUN_DONE (agent-proto.h). */
	if (q->head > AGENT_MAX_OUTPUT_BYTES || q->tail > AGENT_MAX_OUTPUT_BYTES - q->head)
		return -E2BIG;
	return 0;
}

/* ---- reporting ----------------------------------------------------------------------------- */

static void send_started(struct child *c)
{
	struct run *r = container_of(c, struct run, child);
	struct buf *b;
	size_t start;
	int k;

	log_debug("run started", "run", r->id, NULL);
	if (channel_begin(r->m->base.channel, MSG_RUN_STARTED, &b, &start) < 0)
		return;
	k = frame_put_str(b, TAG_RUN_ID, r->id);
	if (k >= 0)
		k = frame_put_u64(b, TAG_PID, (uint64_t)c->pid);
	if (k >= 0)
		k = frame_put_u64(b, TAG_STARTED_AT, c->started_at);
	(void)channel_end(r->m->base.channel, start, k);
}

static enum run_status run_status(const struct run *r)
{
	enum run_status s = child_status(&r->child);

	return s != RUN_FAILED_TO_START && r->forced != RUN_RUNNING ? r->forced : s;
}

static int put_status(struct buf *b, const struct run *r, const struct cgroup_stats *st)
{
	enum run_status status = run_status(r);
	int k;

	k = frame_put_str(b, TAG_RUN_ID, r->id);
	if (k >= 0)
		k = frame_put_u64(b, TAG_STATUS, status);
	if (k >= 0 && r->forced == RUN_RUNNING)
		k = child_put_exit(&r->child, b);
	if (k >= 0)
		k = frame_put_u64(b, TAG_OOM_KILLED, st->oom_kills > 0);
	if (k >= 0 && status == RUN_FAILED_TO_START)
		k = frame_put_str(b, TAG_REASON, r->child.reason ?: "failed to start");
	return k;
}

static int build_done(struct run *r, uint64_t seq, const struct cgroup_stats *st, uint64_t ended,
		      bool with_data, struct buf *b)
{
	size_t kept = child_output_kept(&r->child);
	size_t start;
	int k;

	/* One allocation of the right size instead of doubling up to twice the output. */
	k = buf_reserve(b, 1024 + (r->child.reason ? strlen(r->child.reason) : 0) +
				   (with_data ? kept : 0));
	if (k >= 0)
		k = frame_begin(b, &start, MSG_RUN_DONE, seq);
	if (k >= 0)
		k = put_status(b, r, st);
	if (k >= 0)
		k = child_put_output(&r->child, b, with_data);
	if (k >= 0)
		k = frame_put_u64(b, TAG_STARTED_AT, r->child.started_at);
	if (k >= 0)
		k = frame_put_u64(b, TAG_ENDED_AT, ended);
	if (k >= 0)
		k = frame_put_u64(b, TAG_CPU_USEC, st->cpu_usec);
	if (k >= 0)
		k = frame_put_u64(b, TAG_PEAK_MEMORY, st->peak_memory);
	if (k >= 0)
		k = frame_end(b, start);
	return k;
}

static void run_stats(struct run *r, struct cgroup_stats *ret)
{
	*ret = (struct cgroup_stats){ 0 };
	if (r->child.cg) {
		int k = cgroup_get_stats(r->child.cg, ret);

		if (k < 0)
			log_warn("cannot read run cgroup stats", "run", r->id, "error",
				 strerror(-k), NULL);
		return;
	}
	/* Unplaced runs (unit tests): what wait4() says about the main process and its waited-for
	 * descendants. */
	ret->cpu_usec = (uint64_t)r->ru.ru_utime.tv_sec * 1000000 + r->ru.ru_utime.tv_usec +
			(uint64_t)r->ru.ru_stime.tv_sec * 1000000 + r->ru.ru_stime.tv_usec;
	ret->peak_memory = (uint64_t)r->ru.ru_maxrss * 1024;
}

static void report_done(struct run *r, struct cgroup_stats *st)
{
	struct channel *c = r->m->base.channel;
	struct buf b = { 0 };
	uint64_t ended = realtime_usec(), seq = channel_next_seq(c);
	int k;

	run_stats(r, st);
	k = build_done(r, seq, st, ended, true, &b);
	if (k < 0) {
		/* Out of memory for the output: the status must still get through. */
		buf_free(&b);
		k = build_done(r, seq, st, ended, false, &b);
	}
	if (k >= 0)
		k = channel_submit_done(c, seq, r->id, &b);
	if (k < 0)
		log_error("cannot record run result", "run", r->id, "error", strerror(-k), NULL);
	buf_free(&b);
	/* the controller logs each result it records: here it would be a write per command */
	log_debug("run finished", "run", r->id, "status", run_status_to_string(run_status(r)),
		  NULL);
}

/* ---- run lifecycle ------------------------------------------------------------------------- */

static void stdin_close(struct run *r)
{
	event_source_free(r->stdin_io);
	r->stdin_io = NULL;
	if (r->child.stdin_fd >= 0)
		close(r->child.stdin_fd);
	r->child.stdin_fd = -1;
	free(r->stdin_data);
	r->stdin_data = NULL;
}

/* Frees the run's memory and fds; its cgroup (if still held) is only freed, not removed. */
static void run_free(struct run *r)
{
	stdin_close(r);
	child_done(&r->child);
	event_source_free(r->deadline);
	free(r->cwd);
	free(r->id);
	free(r);
}

/* Reaped, start known, both pipes done: report, then give the group back. */
static void run_finish(struct child *c)
{
	struct run *r = container_of(c, struct run, child);
	struct run_manager *m = r->m;
	struct cgroup_stats st;

	report_done(r, &st);
	/* an emptied group is reused: cgroup v1 mkdir and rmdir cost more than the run itself */
	if (c->cg && spawn_cgroup_recycle(m->base.cgroup, c->cg, &st, c->cg_empty))
		c->cg = NULL;
	if (c->cg)
		spawn_cgroup_release(m->base.loop, TAKE_PTR(c->cg));
	run_free(r);
	spawn_cgroup_pool_fill(m->base.cgroup);
	spawn_cgroup_pool_trim(m->base.loop);
}

static int on_stdin(struct event_source *s, int fd, uint32_t revents, void *userdata);

static void stdin_write(struct run *r)
{
	int fd = r->child.stdin_fd;

	while (r->stdin_pos < r->stdin_len) {
		ssize_t n = write(fd, r->stdin_data + r->stdin_pos, r->stdin_len - r->stdin_pos);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN) {
			if (r->stdin_io || event_add_io(r->m->base.loop, &r->stdin_io, fd, EPOLLOUT,
							on_stdin, r) >= 0)
				return;
			break;
		}
		if (n < 0)
			break; /* EPIPE: the command does not read its stdin */
		r->stdin_pos += (size_t)n;
	}
	stdin_close(r);
}

static int on_stdin(struct event_source *s, int fd, uint32_t revents, void *userdata)
{
	stdin_write(userdata);
	return 0;
}

/* Timeout or cancel: kill the run's whole tree, unless the main process is already done. */
static void run_kill(struct run *r, enum run_status why)
{
	if (r->child.pid <= 0 || r->forced != RUN_RUNNING || child_main_exited(&r->child))
		return;
	r->forced = why;
	log_info(why == RUN_TIMED_OUT ? "run timed out" : "run cancelled", "run", r->id, NULL);
	child_kill(&r->child);
}

static int on_deadline(struct event_source *s, uint64_t now, void *userdata)
{
	struct run *r = userdata;

	if (r->m->paused_at)
		return 0; /* stopped by PAUSE as it fired: RESUME arms it again */
	run_kill(r, RUN_TIMED_OUT);
	return 0;
}

static void run_exited(struct child *c)
{
	struct run *r = container_of(c, struct run, child);

	event_source_free(r->deadline);
	r->deadline = NULL;
	stdin_close(r);
}

void run_manager_child_exited(struct run_manager *m, pid_t pid, int status, const struct rusage *ru)
{
	struct child *c = child_base_find_pid(&m->base, pid);

	if (!c)
		return;
	container_of(c, struct run, child)->ru = *ru;
	child_exited(c, status);
}

/* ---- starting ------------------------------------------------------------------------------ */

static void arm_deadline(struct run *r, uint64_t timeout_ms)
{
	uint64_t now = now_usec();

	if (timeout_ms == 0 || timeout_ms > (UINT64_MAX - now) / 1000)
		return; /* no deadline */
	r->deadline_at = now + timeout_ms * 1000;
	if (event_add_timer(r->m->base.loop, &r->deadline,
			    r->m->paused_at ? UINT64_MAX : r->deadline_at, on_deadline, r) < 0)
		log_warn("cannot arm run deadline", "run", r->id, NULL);
	else if (r->m->paused_at) /* started just before PAUSE: its clock starts at RESUME */
		r->deadline_at = r->m->paused_at + timeout_ms * 1000;
}

/* PAUSE: every deadline stops where it is; RESUME: each goes on, pushed back by the pause. */
void run_manager_pause(struct run_manager *m, bool paused)
{
	uint64_t now = now_usec();

	if (paused == (m->paused_at != 0))
		return;
	for (struct child *c = m->base.children; c; c = c->next) {
		struct run *r = container_of(c, struct run, child);
		if (!r->deadline)
			continue;
		if (!paused)
			r->deadline_at += now - m->paused_at;
		(void)event_source_set_time(r->deadline, paused ? UINT64_MAX : r->deadline_at);
	}
	m->paused_at = paused ? now : 0;
}

/* Forks the run; any failure ends it as failed_to_start with the reason set. */
static void run_start(struct run *r, struct run_request *q)
{
	const struct child_cmd cmd = {
		.cwd = r->cwd,
		.command = q->command,
		.env = q->env,
		.n_env = q->n_env,
		.has_stdin = q->has_stdin,
	};

	if (child_start(&r->child, &cmd) < 0) {
		child_maybe_finish(&r->child);
		return;
	}
	if (r->child.failed_start)
		return; /* killed: the reaper and child_maybe_finish() take it from here */
	r->stdin_data = TAKE_PTR(q->stdin_data);
	r->stdin_len = q->stdin_len;
	if (r->child.stdin_fd >= 0)
		stdin_write(r);
	arm_deadline(r, q->timeout_ms);
}

static struct run *find_run(struct run_manager *m, const char *id)
{
	struct child *c = child_base_find(&m->base, id);

	return c ? container_of(c, struct run, child) : NULL;
}

static int run_new(struct run_manager *m, struct run_request *q, struct run **ret)
{
	struct run *r = calloc(1, sizeof *r);

	if (!r)
		return -ENOMEM;
	r->m = m;
	r->cwd = q->cwd ? TAKE_PTR(q->cwd) : strdup(m->base.workdir);
	if (!r->cwd || child_init(&r->child, &m->base, q->id, q->head, q->tail) < 0) {
		free(r->cwd);
		free(r);
		return -ENOMEM;
	}
	r->child.watch = q->watch;
	r->id = TAKE_PTR(q->id);
	*ret = r;
	return 0;
}

static int handle_start(struct run_manager *m, const struct frame *f)
{
	struct run_request q = { 0 };
	struct run *r;
	int k;

	k = request_parse(f, &q);
	if (k < 0)
		goto out;
	if (find_run(m, q.id) || channel_done_pending(m->base.channel, q.id))
		(void)channel_send_error(m->base.channel, TAG_RUN_ID, q.id, "duplicate run id");
	else if (m->base.n_children >= RUN_MAX_LIVE)
		(void)channel_send_error(m->base.channel, TAG_RUN_ID, q.id, "too many live runs");
	else if (run_new(m, &q, &r) < 0)
		(void)channel_send_error(m->base.channel, TAG_RUN_ID, q.id, "out of memory");
	else {
		log_debug("run starting", "run", r->id, NULL);
		run_start(r, &q);
	}
out:
	request_done(&q);
	return k;
}

static int handle_cancel(struct run_manager *m, const struct frame *f)
{
	_cleanup_free_ char *id = NULL;
	struct run *r;
	int k = proto_parse_key_flag(f, TAG_RUN_ID, proto_id_read, false, &id, NULL);

	if (k < 0)
		return k;
	r = find_run(m, id);
	if (r)
		run_kill(r, RUN_CANCELLED);
	else
		log_debug("cancel for a run that is not running", "run", id, NULL);
	return 0;
}

static int handle_watch(struct run_manager *m, const struct frame *f)
{
	_cleanup_free_ char *id = NULL;
	bool on = false;
	struct run *r;
	int k = proto_parse_key_flag(f, TAG_RUN_ID, proto_id_read, true, &id, &on);

	if (k < 0)
		return k;
	r = find_run(m, id);
	if (!r)
		return 0;
	r->child.watch = on;
	if (on)
		child_send_snapshot(&r->child);
	return 0;
}

int run_manager_message(struct run_manager *m, const struct frame *f)
{
	switch (f->type) {
	case MSG_RUN_START:
		return handle_start(m, f);
	case MSG_RUN_CANCEL:
		return handle_cancel(m, f);
	case MSG_RUN_WATCH:
		return handle_watch(m, f);
	default:
		return -EBADMSG;
	}
}

int run_manager_hello_fields(struct run_manager *m, struct buf *b)
{
	return child_base_put_names(&m->base, b);
}

int run_manager_put_usage(struct run_manager *m, struct buf *b)
{
	return child_base_put_usage(&m->base, b);
}

void run_manager_disconnected(struct run_manager *m)
{
	child_base_unwatch(&m->base);
}

void run_manager_output_room(struct run_manager *m)
{
	child_base_output_room(&m->base);
}

/* ---- the manager --------------------------------------------------------------------------- */

static const struct child_ops run_ops = {
	.kind = "run",
	.what = "run",
	.cgroup_prefix = "r",
	.output_type = MSG_RUN_OUTPUT,
	.name_tag = TAG_RUN_ID,
	.started = send_started,
	.exited = run_exited,
	.finish = run_finish,
};

int run_manager_new(struct event_loop *loop, struct channel *channel,
		    const struct child_config *config, struct run_manager **ret)
{
	struct run_manager *m = child_base_new(sizeof *m, &run_ops, loop, channel, config);

	if (!m)
		return -ENOMEM;
	*ret = m;
	return 0;
}

void run_manager_free(struct run_manager *m)
{
	if (!m)
		return;
	while (m->base.children)
		run_free(container_of(m->base.children, struct run, child));
	spawn_cgroup_pool_stop();
	spawn_cgroup_release_free();
	child_base_free(&m->base);
}

/* Both the cgroup and the process group: nothing of a run may outlive the agent. */
static void kill_run_tree(struct child *c)
{
	if (c->cg)
		(void)cgroup_kill(c->cg);
	if (c->pid > 0) {
		(void)kill(-c->pid, SIGKILL);
		if (!c->exited)
			(void)kill(c->pid, SIGKILL);
	}
}

void run_manager_shutdown(struct run_manager *m)
{
	log_info("shutting down", NULL);
	for (struct child *c = m->base.children; c; c = c->next)
		kill_run_tree(c);
	spawn_cgroup_release_kill();
	child_base_shutdown(&m->base, SHUTDOWN_USEC);
}
