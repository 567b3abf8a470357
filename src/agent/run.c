/* SPDX-License-Identifier: MIT */
#include "agent/run.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent/output.h"
#include "agent/spawn.h"
#include "basic/cleanup.h"
#include "basic/log.h"
#include "basic/util.h"
#include "proto/agent-proto.h"

#define READ_CHUNK (64 * 1024)
#define DRAIN_USEC 1000000ull
#define SHUTDOWN_USEC 5000000ull

struct run_pipe {
	struct run *run;
	enum run_stream stream;
	int fd;
	struct event_source *io;
	struct output_buffer buf;
};

struct run {
	struct run_manager *m;
	struct run *next;
	char *id;
	char *cwd;
	struct cgroup *cg;
	pid_t pid;
	bool exited;
	int wait_status;
	struct rusage ru;
	struct cgroup_stats stats; /* as reported, for recycling the group */
	enum run_status forced;	   /* RUN_TIMED_OUT or RUN_CANCELLED once we killed it */
	bool failed_start;
	char *reason; /* why it failed to start; NULL when even that could not be allocated */
	int errpipe_fd;
	struct event_source *errpipe_io;
	int stdin_fd;
	struct event_source *stdin_io;
	uint8_t *stdin_data;
	size_t stdin_len;
	size_t stdin_pos;
	struct run_pipe out;
	struct run_pipe err;
	struct event_source *deadline;
	struct event_source *drain_timer;
	bool watch;
	uint64_t started_at;
};

struct run_manager {
	struct event_loop *loop;
	struct channel *channel;
	struct cgroup *cgroup;
	char **env;
	size_t n_env;
	char *home_entry; /* "HOME=..." */
	char *workdir;
	bool set_user;
	uid_t uid;
	gid_t gid;
	struct run *runs;
	size_t n_runs;
	uint64_t next_cgroup;
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
	for (size_t i = 0; i < q->n_env; i++)
		free(q->env[i]);
	free(q->env);
	free(q->stdin_data);
}

/* ---- validation ---------------------------------------------------------------------------- */

bool run_env_entry_valid(const char *s)
{
	if (!(s[0] == '_' || (s[0] >= 'A' && s[0] <= 'Z') || (s[0] >= 'a' && s[0] <= 'z')))
		return false;
	for (s++; *s != '='; s++)
		if (!(*s == '_' || (*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') ||
		      (*s >= '0' && *s <= '9')))
			return false;
	return true;
}

static bool run_id_valid(const char *s)
{
	if (!*s)
		return false;
	for (; *s; s++)
		if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') ||
		      (*s >= '0' && *s <= '9') || strchr("._:-", *s)))
			return false;
	return true;
}

static int read_id(const uint8_t *val, size_t len, char **ret)
{
	char *s;
	int r = frame_val_strdup(val, len, PROTO_MAX_ID, &s);

	if (r < 0)
		return r;
	if (!run_id_valid(s)) {
		free(s);
		return -EBADMSG;
	}
	*ret = s;
	return 0;
}

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

static int request_field(struct run_request *q, uint16_t tag, const uint8_t *val, size_t len)
{
	if (tag == TAG_ENV)
		return request_add_env(q, val, len);
	if (tag >= 32 || (q->seen & (1u << tag)))
		return -EBADMSG; /* unknown or repeated */
	q->seen |= 1u << tag;
	switch (tag) {
	case TAG_RUN_ID:
		return read_id(val, len, &q->id);
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
	struct frame_iter it;
	const uint8_t *val;
	uint16_t tag;
	size_t len;
	int r;

	frame_iter_init(&it, f);
	while ((r = frame_iter_next(&it, &tag, &val, &len)) > 0) {
		r = request_field(q, tag, val, len);
		if (r < 0)
			return r;
	}
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

static int send_error(struct run_manager *m, const char *run_id, const char *reason)
{
	struct buf *b;
	size_t start;
	int r;

	r = channel_begin(m->channel, MSG_ERROR, &b, &start);
	if (r < 0)
		return r;
	r = run_id ? frame_put_str(b, TAG_RUN_ID, run_id) : 0;
	if (r >= 0)
		r = frame_put_str(b, TAG_REASON, reason);
	return channel_end(m->channel, start, r);
}

static void send_started(struct run *r)
{
	struct buf *b;
	size_t start;
	int k;

	if (channel_begin(r->m->channel, MSG_RUN_STARTED, &b, &start) < 0)
		return;
	k = frame_put_str(b, TAG_RUN_ID, r->id);
	if (k >= 0)
		k = frame_put_u64(b, TAG_PID, (uint64_t)r->pid);
	if (k >= 0)
		k = frame_put_u64(b, TAG_STARTED_AT, r->started_at);
	(void)channel_end(r->m->channel, start, k);
}

/* RUN_OUTPUT in frames of at most READ_CHUNK; each is dropped while the queue is over its cap. */
static void send_output(struct run *r, enum run_stream stream, uint64_t offset, const uint8_t *p,
			size_t n)
{
	while (n > 0) {
		size_t len = MIN(n, (size_t)READ_CHUNK);
		struct buf *b;
		size_t start;
		int k;

		if (!channel_output_ok(r->m->channel) ||
		    channel_begin(r->m->channel, MSG_RUN_OUTPUT, &b, &start) < 0)
			return; /* a gap the controller sees in the offsets */
		k = frame_put_str(b, TAG_RUN_ID, r->id);
		if (k >= 0)
			k = frame_put_u64(b, TAG_STREAM, stream);
		if (k >= 0)
			k = frame_put_u64(b, TAG_OFFSET, offset);
		if (k >= 0)
			k = frame_put_bytes(b, TAG_DATA, p, len);
		(void)channel_end(r->m->channel, start, k);
		offset += len;
		p += len;
		n -= len;
	}
}

static void send_snapshot(struct run *r, struct run_pipe *p)
{
	const uint8_t *data;
	uint64_t offset;
	size_t len;

	output_buffer_head(&p->buf, &data, &len);
	send_output(r, p->stream, 0, data, len);
	output_buffer_tail(&p->buf, &data, &len, &offset);
	send_output(r, p->stream, offset, data, len);
}

static int put_stream(struct buf *b, struct run_pipe *p, uint16_t tag_head, bool with_data)
{
	const uint8_t *head = NULL, *tail = NULL;
	size_t head_len = 0, tail_len = 0;
	uint64_t offset;
	int r;

	if (with_data) {
		output_buffer_head(&p->buf, &head, &head_len);
		output_buffer_tail(&p->buf, &tail, &tail_len, &offset);
	}
	/* TAG_*_HEAD, TAG_*_TAIL and TAG_*_BYTES are consecutive for both streams. */
	r = frame_put_bytes(b, tag_head, head, head_len);
	if (r >= 0)
		r = frame_put_bytes(b, tag_head + 1, tail, tail_len);
	if (r >= 0)
		r = frame_put_u64(b, tag_head + 2, output_buffer_total(&p->buf));
	return r;
}

static enum run_status run_status(const struct run *r)
{
	if (r->failed_start)
		return RUN_FAILED_TO_START;
	if (r->forced != RUN_RUNNING)
		return r->forced;
	if (WIFSIGNALED(r->wait_status))
		return RUN_KILLED;
	return RUN_EXITED;
}

static int put_status(struct buf *b, const struct run *r, const struct cgroup_stats *st)
{
	enum run_status status = run_status(r);
	int k;

	k = frame_put_str(b, TAG_RUN_ID, r->id);
	if (k >= 0)
		k = frame_put_u64(b, TAG_STATUS, status);
	if (k >= 0 && status == RUN_EXITED)
		k = frame_put_u64(b, TAG_EXIT_CODE, (uint64_t)WEXITSTATUS(r->wait_status));
	if (k >= 0 && status == RUN_KILLED)
		k = frame_put_u64(b, TAG_SIGNAL, (uint64_t)WTERMSIG(r->wait_status));
	if (k >= 0)
		k = frame_put_u64(b, TAG_OOM_KILLED, st->oom_kills > 0);
	if (k >= 0 && status == RUN_FAILED_TO_START)
		k = frame_put_str(b, TAG_REASON, r->reason ? r->reason : "failed to start");
	return k;
}

static int build_done(struct run *r, uint64_t seq, const struct cgroup_stats *st, uint64_t ended,
		      bool with_data, struct buf *b)
{
	size_t kept = r->out.buf.head_len + r->out.buf.tail_len + r->err.buf.head_len +
		      r->err.buf.tail_len;
	size_t start;
	int k;

	/* One allocation of the right size instead of doubling up to twice the output. */
	k = buf_reserve(b, 1024 + (r->reason ? strlen(r->reason) : 0) + (with_data ? kept : 0));
	if (k >= 0)
		k = frame_begin(b, &start, MSG_RUN_DONE, seq);
	if (k >= 0)
		k = put_status(b, r, st);
	if (k >= 0)
		k = put_stream(b, &r->out, TAG_STDOUT_HEAD, with_data);
	if (k >= 0)
		k = put_stream(b, &r->err, TAG_STDERR_HEAD, with_data);
	if (k >= 0)
		k = frame_put_u64(b, TAG_STARTED_AT, r->started_at);
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
	if (r->cg) {
		int k = cgroup_get_stats(r->cg, ret);

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

static void report_done(struct run *r)
{
	struct channel *c = r->m->channel;
	struct buf b = { 0 };
	struct cgroup_stats st;
	uint64_t ended = realtime_usec(), seq = channel_next_seq(c);
	int k;

	run_stats(r, &st);
	r->stats = st;
	k = build_done(r, seq, &st, ended, true, &b);
	if (k < 0) {
		/* Out of memory for the output: the status must still get through. */
		buf_free(&b);
		k = build_done(r, seq, &st, ended, false, &b);
	}
	if (k >= 0)
		k = channel_submit_done(c, seq, r->id, &b);
	if (k < 0)
		log_error("cannot record run result", "run", r->id, "error", strerror(-k), NULL);
	buf_free(&b);
	log_info("run finished", "run", r->id, "status", run_status_to_string(run_status(r)), NULL);
}

/* ---- run lifecycle ------------------------------------------------------------------------- */

static void close_source(struct event_source **s, int *fd)
{
	event_source_free(*s);
	*s = NULL;
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

static void stdin_close(struct run *r)
{
	close_source(&r->stdin_io, &r->stdin_fd);
	free(r->stdin_data);
	r->stdin_data = NULL;
}

/* Frees the run's memory and fds; its cgroup (if still held) is only freed, not removed. */
static void run_free(struct run *r)
{
	struct run_manager *m = r->m;

	for (struct run **p = &m->runs; *p; p = &(*p)->next)
		if (*p == r) {
			*p = r->next;
			m->n_runs--;
			break;
		}
	close_source(&r->errpipe_io, &r->errpipe_fd);
	stdin_close(r);
	close_source(&r->out.io, &r->out.fd);
	close_source(&r->err.io, &r->err.fd);
	output_buffer_done(&r->out.buf);
	output_buffer_done(&r->err.buf);
	event_source_free(r->deadline);
	event_source_free(r->drain_timer);
	cgroup_free(r->cg);
	free(r->reason);
	free(r->cwd);
	free(r->id);
	free(r);
}

static void run_finish(struct run *r)
{
	struct run_manager *m = r->m;
	report_done(r);
	/* an emptied group is reused: cgroup v1 mkdir and rmdir cost more than the run itself */
	if (r->cg && spawn_cgroup_recycle(m->cgroup, r->cg, &r->stats))
		r->cg = NULL;
	if (r->cg)
		spawn_cgroup_release(m->loop, TAKE_PTR(r->cg));
	run_free(r);
	spawn_cgroup_pool_fill(m->cgroup);
}

/* The run ends once its main process is reaped, its start is known and both pipes are done. */
static void run_maybe_finish(struct run *r)
{
	if (r->exited && r->errpipe_fd < 0 && r->out.fd < 0 && r->err.fd < 0)
		run_finish(r);
}

static void pipe_close(struct run_pipe *p)
{
	close_source(&p->io, &p->fd);
}

static void reason_set(struct run *r, char *s)
{
	r->failed_start = true;
	if (!s)
		return;
	free(r->reason);
	r->reason = s;
}

static int set_reason(struct run *r, const char *what, const char *arg, int err)
{
	char *s = spawn_reason(what, arg, err);

	reason_set(r, s);
	return s ? 0 : -ENOMEM;
}

static void start_failed(struct run *r, const struct spawn_error *e)
{
	reason_set(r, spawn_error_reason(e, r->cwd));
	log_info("run failed to start", "run", r->id, "reason", r->reason ? r->reason : "", NULL);
}

/* Reads the child's verdict: a spawn_error, or EOF once exec closed the CLOEXEC pipe. */
static void errpipe_read(struct run *r)
{
	struct spawn_error e;
	int n = spawn_errpipe_read(r->errpipe_fd, &e);

	if (n == -EAGAIN)
		return;
	close_source(&r->errpipe_io, &r->errpipe_fd);
	if (n == 0) {
		start_failed(r, &e);
		return;
	}
	log_debug("run started", "run", r->id, NULL);
	send_started(r);
}

static int on_errpipe(struct event_source *s, int fd, uint32_t revents, void *userdata)
{
	struct run *r = userdata;

	errpipe_read(r);
	run_maybe_finish(r);
	return 0;
}

static int on_stdin(struct event_source *s, int fd, uint32_t revents, void *userdata);

static void stdin_write(struct run *r)
{
	while (r->stdin_pos < r->stdin_len) {
		ssize_t n = write(r->stdin_fd, r->stdin_data + r->stdin_pos,
				  r->stdin_len - r->stdin_pos);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN) {
			if (r->stdin_io || event_add_io(r->m->loop, &r->stdin_io, r->stdin_fd,
							EPOLLOUT, on_stdin, r) >= 0)
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

static int on_pipe(struct event_source *s, int fd, uint32_t revents, void *userdata)
{
	static uint8_t chunk[READ_CHUNK];
	struct run_pipe *p = userdata;
	struct run *r = p->run;
	uint64_t offset;
	ssize_t n;

	do
		n = read(fd, chunk, sizeof chunk);
	while (n < 0 && errno == EINTR);
	if (n < 0 && errno == EAGAIN)
		return 0;
	if (n <= 0) {
		pipe_close(p);
		run_maybe_finish(r);
		return 0;
	}
	offset = output_buffer_total(&p->buf);
	output_buffer_append(&p->buf, chunk, (size_t)n);
	if (r->watch)
		send_output(r, p->stream, offset, chunk, (size_t)n);
	return 0;
}

static bool main_has_exited(const struct run *r)
{
	siginfo_t si = { 0 };

	if (r->exited)
		return true;
	/* A zombie not reaped yet has exited on its own: leave it to the reaper. */
	if (waitid(P_PID, (id_t)r->pid, &si, WEXITED | WNOHANG | WNOWAIT) < 0)
		return errno == ECHILD;
	return si.si_pid == r->pid;
}

/* Timeout or cancel: kill the run's whole tree, unless the main process is already done. */
static void run_kill(struct run *r, enum run_status why)
{
	int k;

	if (r->pid <= 0 || r->forced != RUN_RUNNING || main_has_exited(r))
		return;
	r->forced = why;
	log_info(why == RUN_TIMED_OUT ? "run timed out" : "run cancelled", "run", r->id, NULL);
	if (r->cg) {
		k = cgroup_kill(r->cg);
		if (k < 0)
			log_warn("cannot kill run cgroup", "run", r->id, "error", strerror(-k),
				 NULL);
	} else
		(void)kill(-r->pid, SIGKILL);
	/* The main process itself may not have joined its cgroup or process group yet; it is
	 * ours and not reaped, so its pid cannot have been reused. */
	(void)kill(r->pid, SIGKILL);
}

static int on_deadline(struct event_source *s, uint64_t now, void *userdata)
{
	run_kill(userdata, RUN_TIMED_OUT);
	return 0;
}

static int on_drain_timeout(struct event_source *s, uint64_t now, void *userdata)
{
	struct run *r = userdata;

	log_warn("output pipes still open after the run exited, closing them", "run", r->id, NULL);
	pipe_close(&r->out);
	pipe_close(&r->err);
	run_maybe_finish(r);
	return 0;
}

/* The main process is gone: whatever it left behind goes too, so the pipes reach EOF. */
static void kill_leftovers(struct run *r)
{
	int k;

	if (!r->cg) {
		(void)kill(-r->pid, SIGKILL);
		return;
	}
	if (cgroup_is_empty(r->cg) == 1)
		return;
	k = cgroup_kill(r->cg);
	if (k < 0)
		log_warn("cannot kill run cgroup", "run", r->id, "error", strerror(-k), NULL);
}

void run_manager_child_exited(struct run_manager *m, pid_t pid, int status, const struct rusage *ru)
{
	struct run *r;

	for (r = m->runs; r; r = r->next)
		if (r->pid == pid && !r->exited)
			break;
	if (!r)
		return;
	r->exited = true;
	r->wait_status = status;
	r->ru = *ru;
	event_source_free(r->deadline);
	r->deadline = NULL;
	stdin_close(r);
	if (r->errpipe_fd >= 0)
		errpipe_read(r);
	kill_leftovers(r);
	if ((r->out.fd >= 0 || r->err.fd >= 0) &&
	    event_add_timer(m->loop, &r->drain_timer, now_usec() + DRAIN_USEC, on_drain_timeout,
			    r) < 0) {
		pipe_close(&r->out);
		pipe_close(&r->err);
	}
	run_maybe_finish(r);
}

/* ---- starting ------------------------------------------------------------------------------ */

/* PATH, HOME, PWD, then the workspace env, then the run's ENV. Entries point into m, q and *ret_pwd. */
static int build_env(struct run_manager *m, const struct run *r, const struct run_request *q,
		     char ***ret, char **ret_pwd)
{
	return spawn_build_env(m->env, m->n_env, m->home_entry, r->cwd, q->env, q->n_env, ret,
			       ret_pwd);
}

static void close_pair(int p[2])
{
	for (int i = 0; i < 2; i++)
		if (p[i] >= 0) {
			close(p[i]);
			p[i] = -1;
		}
}

/* stdin: a pipe when STDIN was given, else /dev/null (read end only). */
static int open_pipes(int in[2], int out[2], int err[2], int ep[2], bool has_stdin)
{
	if (pipe2(out, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0 || pipe2(ep, O_CLOEXEC) < 0)
		return -errno;
	if (has_stdin)
		return pipe2(in, O_CLOEXEC) < 0 ? -errno : 0;
	in[0] = open("/dev/null", O_RDONLY | O_CLOEXEC);
	return in[0] < 0 ? -errno : 0;
}

/* The parent's ends, non-blocking, into the loop. The child's ends stay blocking. */
static int watch_pipes(struct run *r)
{
	struct event_loop *loop = r->m->loop;
	int k;

	if (fd_set_nonblock(r->out.fd, true) < 0 || fd_set_nonblock(r->err.fd, true) < 0 ||
	    fd_set_nonblock(r->errpipe_fd, true) < 0 ||
	    (r->stdin_fd >= 0 && fd_set_nonblock(r->stdin_fd, true) < 0))
		return -errno;
	k = event_add_io(loop, &r->out.io, r->out.fd, EPOLLIN, on_pipe, &r->out);
	if (k >= 0)
		k = event_add_io(loop, &r->err.io, r->err.fd, EPOLLIN, on_pipe, &r->err);
	if (k >= 0)
		k = event_add_io(loop, &r->errpipe_io, r->errpipe_fd, EPOLLIN, on_errpipe, r);
	return k;
}

static int run_fork(struct run *r, const struct run_request *q, char **envp)
{
	int in[2] = { -1, -1 }, out[2] = { -1, -1 }, err[2] = { -1, -1 }, ep[2] = { -1, -1 };
	struct spawn_child c = {
		.cg = r->cg,
		.set_user = r->m->set_user,
		.uid = r->m->uid,
		.gid = r->m->gid,
		.cwd = r->cwd,
		.command = q->command,
		.envp = envp,
	};
	pid_t pid = -1;
	int k;

	k = open_pipes(in, out, err, ep, q->has_stdin);
	if (k < 0) {
		(void)set_reason(r, "pipe", NULL, -k);
		goto fail;
	}
	c.stdio[0] = in[0];
	c.stdio[1] = out[1];
	c.stdio[2] = err[1];
	c.errpipe = ep[1];
	k = spawn_fork(&c, &pid);
	if (k < 0) {
		(void)set_reason(r, "fork", NULL, -k);
		goto fail;
	}
	r->pid = pid;
	r->out.fd = TAKE_FD(out[0]);
	r->err.fd = TAKE_FD(err[0]);
	r->errpipe_fd = TAKE_FD(ep[0]);
	r->stdin_fd = TAKE_FD(in[1]);
	k = 0;
fail:
	close_pair(in);
	close_pair(out);
	close_pair(err);
	close_pair(ep);
	return k;
}

static int run_cgroup_create(struct run *r)
{
	char name[32];
	int k;

	snprintf(name, sizeof name, "r-%" PRIu64, ++r->m->next_cgroup);
	k = spawn_cgroup_new(r->m->cgroup, name, &r->cg);
	if (k < 0)
		(void)set_reason(r, "cgroup", name, -k);
	return k;
}

static void arm_deadline(struct run *r, uint64_t timeout_ms)
{
	uint64_t now = now_usec();

	if (timeout_ms == 0 || timeout_ms > (UINT64_MAX - now) / 1000)
		return; /* no deadline */
	if (event_add_timer(r->m->loop, &r->deadline, now + timeout_ms * 1000, on_deadline, r) < 0)
		log_warn("cannot arm run deadline", "run", r->id, NULL);
}

/* Forks the run; any failure ends it as failed_to_start with the reason set. */
static void run_start(struct run *r, struct run_request *q)
{
	_cleanup_free_ char **envp = NULL;
	_cleanup_free_ char *pwd = NULL;
	int k;

	if (r->m->cgroup && run_cgroup_create(r) < 0)
		goto fail;
	if (build_env(r->m, r, q, &envp, &pwd) < 0) {
		(void)set_reason(r, "environment", NULL, ENOMEM);
		goto fail;
	}
	if (run_fork(r, q, envp) < 0)
		goto fail;
	k = watch_pipes(r);
	if (k < 0) {
		/* Unwatchable: stop it; the reaper and run_maybe_finish() take it from here. */
		(void)set_reason(r, "event loop", NULL, -k);
		(void)kill(r->pid, SIGKILL);
		close_source(&r->errpipe_io, &r->errpipe_fd);
		pipe_close(&r->out);
		pipe_close(&r->err);
		stdin_close(r);
		return;
	}
	r->stdin_data = TAKE_PTR(q->stdin_data);
	r->stdin_len = q->stdin_len;
	if (r->stdin_fd >= 0)
		stdin_write(r);
	arm_deadline(r, q->timeout_ms);
	return;
fail:
	r->exited = true; /* nothing to wait for */
	run_maybe_finish(r);
}

static struct run *find_run(struct run_manager *m, const char *id)
{
	for (struct run *r = m->runs; r; r = r->next)
		if (strcmp(r->id, id) == 0)
			return r;
	return NULL;
}

static int run_new(struct run_manager *m, struct run_request *q, struct run **ret)
{
	struct run *r = calloc(1, sizeof *r);

	if (!r)
		return -ENOMEM;
	*r = (struct run){
		.m = m,
		.pid = -1,
		.errpipe_fd = -1,
		.stdin_fd = -1,
		.out = { .run = r, .stream = RUN_STREAM_STDOUT, .fd = -1 },
		.err = { .run = r, .stream = RUN_STREAM_STDERR, .fd = -1 },
		.watch = q->watch,
		.started_at = realtime_usec(),
	};
	r->cwd = q->cwd ? TAKE_PTR(q->cwd) : strdup(m->workdir);
	if (!r->cwd || output_buffer_init(&r->out.buf, q->head, q->tail) < 0 ||
	    output_buffer_init(&r->err.buf, q->head, q->tail) < 0) {
		output_buffer_done(&r->out.buf);
		free(r->cwd);
		free(r);
		return -ENOMEM;
	}
	r->id = TAKE_PTR(q->id);
	r->next = m->runs;
	m->runs = r;
	m->n_runs++;
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
	if (find_run(m, q.id) || channel_done_pending(m->channel, q.id))
		(void)send_error(m, q.id, "duplicate run id");
	else if (m->n_runs >= RUN_MAX_LIVE)
		(void)send_error(m, q.id, "too many live runs");
	else if (run_new(m, &q, &r) < 0)
		(void)send_error(m, q.id, "out of memory");
	else {
		log_debug("run starting", "run", r->id, NULL);
		run_start(r, &q);
	}
out:
	request_done(&q);
	return k;
}

/* RUN_CANCEL (RUN_ID) and RUN_WATCH (RUN_ID, WATCH). */
static int parse_id_flag(const struct frame *f, bool want_flag, char **ret_id, bool *ret_flag)
{
	_cleanup_free_ char *id = NULL;
	struct frame_iter it;
	const uint8_t *val;
	bool have_flag = false;
	uint16_t tag;
	size_t len;
	int k;

	frame_iter_init(&it, f);
	while ((k = frame_iter_next(&it, &tag, &val, &len)) > 0) {
		if (tag == TAG_RUN_ID && !id)
			k = read_id(val, len, &id);
		else if (tag == TAG_WATCH && want_flag && !have_flag) {
			k = read_flag(val, len, ret_flag);
			have_flag = true;
		} else
			k = -EBADMSG;
		if (k < 0)
			return k;
	}
	if (k < 0)
		return k;
	if (!id || have_flag != want_flag)
		return -EBADMSG;
	*ret_id = TAKE_PTR(id);
	return 0;
}

static int handle_cancel(struct run_manager *m, const struct frame *f)
{
	_cleanup_free_ char *id = NULL;
	struct run *r;
	int k = parse_id_flag(f, false, &id, NULL);

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
	int k = parse_id_flag(f, true, &id, &on);

	if (k < 0)
		return k;
	r = find_run(m, id);
	if (!r)
		return 0;
	r->watch = on;
	if (on) {
		send_snapshot(r, &r->out);
		send_snapshot(r, &r->err);
	}
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
	int k = 0;

	for (struct run *r = m->runs; r && k >= 0; r = r->next)
		k = frame_put_str(b, TAG_RUN_ID, r->id);
	return k;
}

void run_manager_disconnected(struct run_manager *m)
{
	for (struct run *r = m->runs; r; r = r->next)
		r->watch = false;
}

/* ---- the manager --------------------------------------------------------------------------- */

int run_manager_new(struct event_loop *loop, struct channel *channel,
		    const struct run_config *config, struct run_manager **ret)
{
	struct run_manager *m = calloc(1, sizeof *m);

	if (!m)
		return -ENOMEM;
	*m = (struct run_manager){
		.loop = loop,
		.channel = channel,
		.cgroup = (struct cgroup *)config->cgroup,
		.env = (char **)config->env,
		.n_env = config->n_env,
	};
	m->workdir = strdup(config->workdir);
	m->set_user = config->set_user;
	m->uid = config->uid;
	m->gid = config->gid;
	if (!m->workdir || asprintf(&m->home_entry, "HOME=%s", config->home) < 0) {
		free(m->workdir);
		free(m);
		return -ENOMEM;
	}
	*ret = m;
	return 0;
}

void run_manager_free(struct run_manager *m)
{
	if (!m)
		return;
	while (m->runs)
		run_free(m->runs);
	spawn_cgroup_release_free();
	free(m->home_entry);
	free(m->workdir);
	free(m);
}

static void kill_run_tree(struct run *r)
{
	if (r->cg)
		(void)cgroup_kill(r->cg);
	if (r->pid > 0) {
		(void)kill(-r->pid, SIGKILL);
		if (!r->exited)
			(void)kill(r->pid, SIGKILL);
	}
}

/* Everything of every run is gone: cgroups empty, or without cgroups process groups empty. */
static bool all_runs_gone(struct run_manager *m)
{
	for (struct run *r = m->runs; r; r = r->next) {
		if (r->cg ? cgroup_is_empty(r->cg) == 0 :
			    r->pid > 0 && (kill(-r->pid, 0) == 0 || errno != ESRCH))
			return false;
	}
	return spawn_cgroup_release_empty();
}

void run_manager_shutdown(struct run_manager *m)
{
	uint64_t deadline = now_usec() + SHUTDOWN_USEC;

	log_info("shutting down", NULL);
	for (struct run *r = m->runs; r; r = r->next)
		kill_run_tree(r);
	spawn_cgroup_release_kill();
	for (;;) {
		/* Reap here: the loop is not running any more. */
		while (waitpid(-1, NULL, WNOHANG) > 0)
			;
		if (all_runs_gone(m) || now_usec() >= deadline)
			break;
		(void)nanosleep(&(struct timespec){ .tv_nsec = 10 * 1000 * 1000 }, NULL);
	}
	for (struct run *r = m->runs; r; r = r->next)
		if (r->cg && cgroup_remove(r->cg) < 0)
			log_warn("cannot remove run cgroup", "run", r->id, NULL);
	spawn_cgroup_release_remove();
}
