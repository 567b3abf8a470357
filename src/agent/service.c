/* SPDX-License-Identifier: MIT */
/* Services: attempts, their processes and output, the restart policy in motion, and the
 * SERVICE_* messages (docs/agent-protocol.md, "Services"). */

#include "agent/service.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
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

#define READ_CHUNK (64 * 1024)
#define DRAIN_USEC 1000000ull
#define SHUTDOWN_USEC 2000000ull
#define REASON_MAX 1024

struct service;

struct service_pipe {
	struct service *svc;
	enum run_stream stream;
	int fd;
	struct event_source *io;
};

/* One run of the command. */
struct attempt {
	uint64_t number;
	pid_t pid;
	struct cgroup *cg;
	int errpipe_fd;
	struct event_source *errpipe_io;
	struct service_pipe out;
	struct service_pipe err;
	struct output_buffer buf[2]; /* [0] stdout, [1] stderr */
	struct event_source *drain_timer;
	struct event_source *stop_timer;
	bool exec_done;
	bool exited;
	int wait_status;
	bool failed_start;
	bool daemonized;
	char *reason; /* failed start or daemonized */
	int forced;   /* ATTEMPT_STOPPED or ATTEMPT_RESTARTED once asked to end, else -1 */
	uint64_t started_at;
};

struct service {
	struct service_manager *m;
	struct service *next;
	struct service_def def;
	enum service_state state;
	char *reason;
	uint64_t restart_count;
	uint64_t next_attempt;
	uint64_t last_attempt;	  /* number of the newest attempt, 0 before the first */
	uint64_t next_restart_at; /* CLOCK_REALTIME usec, in backoff */
	struct event_source *restart_timer;
	struct attempt *attempt; /* the current one, NULL when none */
	bool watch;
	bool remove; /* forget it once the attempt has ended */
};

struct service_manager {
	struct event_loop *loop;
	struct channel *channel;
	const struct cgroup *cgroup;
	char *const *env;
	size_t n_env;
	char *home_entry;
	char *workdir;
	bool set_user;
	uid_t uid;
	gid_t gid;
	struct service *services;
	size_t n_services;
	uint64_t next_cgroup;
};

static void attempt_maybe_finish(struct service *svc);
static void service_start_attempt(struct service *svc);

/* ---- definitions ---------------------------------------------------------------------------- */

static void service_free(struct service *svc)
{
	struct service_manager *m = svc->m;

	for (struct service **p = &m->services; *p; p = &(*p)->next)
		if (*p == svc) {
			*p = svc->next;
			m->n_services--;
			break;
		}
	event_source_free(svc->restart_timer);
	service_def_done(&svc->def);
	free(svc->reason);
	free(svc);
}

static struct service *service_find(struct service_manager *m, const char *name)
{
	for (struct service *s = m->services; s; s = s->next)
		if (strcmp(s->def.name, name) == 0)
			return s;
	return NULL;
}

static bool service_active(const struct service *svc)
{
	return svc->attempt || svc->state == SERVICE_BACKOFF;
}

static void service_set_reason(struct service *svc, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void service_set_reason(struct service *svc, const char *fmt, ...)
{
	va_list ap;
	char *s = NULL;

	va_start(ap, fmt);
	if (vasprintf(&s, fmt, ap) < 0)
		s = NULL;
	va_end(ap);
	free(svc->reason);
	svc->reason = s;
}

static void service_clear_reason(struct service *svc)
{
	free(svc->reason);
	svc->reason = NULL;
}

/* ---- reporting ----------------------------------------------------------------------------- */

static int send_error(struct service_manager *m, const char *name, const char *reason)
{
	struct buf *b;
	size_t start;
	int r;

	log_warn("service request refused", "service", name ? name : "", "reason", reason, NULL);
	r = channel_begin(m->channel, MSG_ERROR, &b, &start);
	if (r < 0)
		return r;
	r = name ? frame_put_str(b, TAG_SERVICE_NAME, name) : 0;
	if (r >= 0)
		r = frame_put_str(b, TAG_REASON, reason);
	return channel_end(m->channel, start, r);
}

static int put_ids(struct buf *b, const struct service *svc)
{
	int k = frame_put_str(b, TAG_SERVICE_NAME, svc->def.name);

	if (k >= 0)
		k = frame_put_str(b, TAG_SERVICE_ID, svc->def.id);
	return k;
}

static int build_state(const struct service *svc, uint64_t seq, struct buf *b)
{
	const struct attempt *a = svc->attempt;
	size_t start;
	int k;

	k = frame_begin(b, &start, MSG_SERVICE_STATE, seq);
	if (k >= 0)
		k = put_ids(b, svc);
	if (k >= 0)
		k = frame_put_u64(b, TAG_SERVICE_STATE, svc->state);
	if (k >= 0)
		k = frame_put_u64(b, TAG_RESTART_COUNT, svc->restart_count);
	if (k >= 0)
		k = frame_put_u64(b, TAG_ATTEMPT, svc->last_attempt);
	if (k >= 0 && a && a->pid > 0 && !a->exited)
		k = frame_put_u64(b, TAG_PID, (uint64_t)a->pid);
	if (k >= 0 && a)
		k = frame_put_u64(b, TAG_STARTED_AT, a->started_at);
	if (k >= 0 && a && a->forced >= 0)
		k = frame_put_u64(b, TAG_STOPPING, 1);
	if (k >= 0 && svc->state == SERVICE_BACKOFF)
		k = frame_put_u64(b, TAG_NEXT_RESTART_AT, svc->next_restart_at);
	if (k >= 0 && svc->reason)
		k = frame_put_str(b, TAG_REASON, svc->reason);
	if (k >= 0)
		k = frame_end(b, start);
	return k;
}

/* The newest state replaces any older one still held: only the latest matters. */
static void report_state(struct service *svc)
{
	struct channel *c = svc->m->channel;
	struct buf b = { 0 };
	uint64_t seq = channel_next_seq(c);
	int k;

	channel_drop_held(c, MSG_SERVICE_STATE, svc->def.name);
	k = build_state(svc, seq, &b);
	if (k >= 0)
		k = channel_submit_held(c, seq, MSG_SERVICE_STATE, svc->def.name, &b);
	if (k < 0)
		log_error("cannot record service state", "service", svc->def.name, "error",
			  strerror(-k), NULL);
	buf_free(&b);
	log_info("service state", "service", svc->def.name, "state",
		 service_state_to_string(svc->state), "reason", svc->reason ? svc->reason : "",
		 NULL);
}

static int put_stream(struct buf *b, struct output_buffer *o, uint16_t tag_head)
{
	const uint8_t *head, *tail;
	size_t head_len, tail_len;
	uint64_t offset;
	int k;

	output_buffer_head(o, &head, &head_len);
	output_buffer_tail(o, &tail, &tail_len, &offset);
	/* TAG_*_HEAD, TAG_*_TAIL and TAG_*_BYTES are consecutive for both streams. */
	k = frame_put_bytes(b, tag_head, head, head_len);
	if (k >= 0)
		k = frame_put_bytes(b, tag_head + 1, tail, tail_len);
	if (k >= 0)
		k = frame_put_u64(b, tag_head + 2, output_buffer_total(o));
	return k;
}

static int put_end(struct buf *b, const struct attempt *a, enum attempt_end end)
{
	int k = frame_put_u64(b, TAG_END_REASON, end);

	if (k >= 0 && a->exited && !a->failed_start && WIFEXITED(a->wait_status))
		k = frame_put_u64(b, TAG_EXIT_CODE, (uint64_t)WEXITSTATUS(a->wait_status));
	if (k >= 0 && a->exited && !a->failed_start && WIFSIGNALED(a->wait_status))
		k = frame_put_u64(b, TAG_SIGNAL, (uint64_t)WTERMSIG(a->wait_status));
	if (k >= 0)
		k = frame_put_u64(b, TAG_DAEMONIZED, a->daemonized);
	if (k >= 0 && a->reason)
		k = frame_put_str(b, TAG_REASON, a->reason);
	return k;
}

static int build_done(const struct service *svc, struct attempt *a, enum attempt_end end,
		      uint64_t seq, uint64_t ended, struct buf *b)
{
	size_t kept =
		a->buf[0].head_len + a->buf[0].tail_len + a->buf[1].head_len + a->buf[1].tail_len;
	size_t start;
	int k;

	k = buf_reserve(b, 1024 + REASON_MAX + kept);
	if (k >= 0)
		k = frame_begin(b, &start, MSG_SERVICE_ATTEMPT_DONE, seq);
	if (k >= 0)
		k = put_ids(b, svc);
	if (k >= 0)
		k = frame_put_u64(b, TAG_ATTEMPT, a->number);
	if (k >= 0)
		k = put_end(b, a, end);
	if (k >= 0)
		k = put_stream(b, &a->buf[0], TAG_STDOUT_HEAD);
	if (k >= 0)
		k = put_stream(b, &a->buf[1], TAG_STDERR_HEAD);
	if (k >= 0)
		k = frame_put_u64(b, TAG_STARTED_AT, a->started_at);
	if (k >= 0)
		k = frame_put_u64(b, TAG_ENDED_AT, ended);
	if (k >= 0)
		k = frame_end(b, start);
	return k;
}

/* Rewrites a held ATTEMPT_DONE without its output bytes (totals stay): only the newest
 * SERVICE_KEEP_OUTPUTS results of a service keep theirs while no controller acknowledges. */
static int strip_output(struct buf *frame)
{
	struct buf out = { 0 };
	struct frame f;
	struct frame_iter it;
	const uint8_t *val;
	uint16_t tag;
	size_t len, start;
	long n = frame_parse(frame->data, frame->len, SIZE_MAX, &f);
	int k;

	if (n <= 0)
		return -EBADMSG;
	k = frame_begin(&out, &start, f.type, f.seq);
	frame_iter_init(&it, &f);
	while (k >= 0 && (k = frame_iter_next(&it, &tag, &val, &len)) > 0) {
		if (tag == TAG_OUTPUT_DROPPED) {
			buf_free(&out);
			return 0; /* stripped before */
		}
		if (tag == TAG_STDOUT_HEAD || tag == TAG_STDOUT_TAIL || tag == TAG_STDERR_HEAD ||
		    tag == TAG_STDERR_TAIL)
			continue;
		k = frame_put_bytes(&out, tag, val, len);
	}
	if (k >= 0)
		k = frame_put_u64(&out, TAG_OUTPUT_DROPPED, 1);
	if (k >= 0)
		k = frame_end(&out, start);
	if (k < 0) {
		buf_free(&out);
		return k;
	}
	buf_free(frame);
	*frame = out;
	return 0;
}

static void report_done(struct service *svc, struct attempt *a, enum attempt_end end)
{
	struct channel *c = svc->m->channel;
	struct buf b = { 0 };
	uint64_t seq = channel_next_seq(c);
	int k;

	k = build_done(svc, a, end, seq, realtime_usec(), &b);
	if (k >= 0)
		k = channel_submit_held(c, seq, MSG_SERVICE_ATTEMPT_DONE, svc->def.name, &b);
	if (k < 0)
		log_error("cannot record service attempt", "service", svc->def.name, "error",
			  strerror(-k), NULL);
	buf_free(&b);
	channel_trim_held(c, MSG_SERVICE_ATTEMPT_DONE, svc->def.name, SERVICE_KEEP_OUTPUTS,
			  strip_output);
}

/* SERVICE_OUTPUT in frames of at most READ_CHUNK; dropped while the queue is over its cap. */
static void send_output(struct service *svc, const struct attempt *a, enum run_stream stream,
			uint64_t offset, const uint8_t *p, size_t n)
{
	struct channel *c = svc->m->channel;

	while (n > 0) {
		size_t len = MIN(n, (size_t)READ_CHUNK);
		struct buf *b;
		size_t start;
		int k;

		if (!channel_output_ok(c) || channel_begin(c, MSG_SERVICE_OUTPUT, &b, &start) < 0)
			return; /* a gap the controller sees in the offsets */
		k = frame_put_str(b, TAG_SERVICE_NAME, svc->def.name);
		if (k >= 0)
			k = frame_put_u64(b, TAG_ATTEMPT, a->number);
		if (k >= 0)
			k = frame_put_u64(b, TAG_STREAM, stream);
		if (k >= 0)
			k = frame_put_u64(b, TAG_OFFSET, offset);
		if (k >= 0)
			k = frame_put_bytes(b, TAG_DATA, p, len);
		(void)channel_end(c, start, k);
		offset += len;
		p += len;
		n -= len;
	}
}

static void send_snapshot(struct service *svc, struct attempt *a)
{
	for (int i = 0; i < 2; i++) {
		const uint8_t *data;
		uint64_t offset;
		size_t len;

		output_buffer_head(&a->buf[i], &data, &len);
		send_output(svc, a, i + 1, 0, data, len);
		output_buffer_tail(&a->buf[i], &data, &len, &offset);
		send_output(svc, a, i + 1, offset, data, len);
	}
}

/* ---- attempts ------------------------------------------------------------------------------- */

static void close_source(struct event_source **s, int *fd)
{
	event_source_free(*s);
	*s = NULL;
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

static void attempt_free(struct attempt *a)
{
	if (!a)
		return;
	close_source(&a->errpipe_io, &a->errpipe_fd);
	close_source(&a->out.io, &a->out.fd);
	close_source(&a->err.io, &a->err.fd);
	output_buffer_done(&a->buf[0]);
	output_buffer_done(&a->buf[1]);
	event_source_free(a->drain_timer);
	event_source_free(a->stop_timer);
	if (a->cg)
		cgroup_free(a->cg);
	free(a->reason);
	free(a);
}

static enum attempt_end attempt_end_of(const struct attempt *a)
{
	if (a->failed_start)
		return ATTEMPT_FAILED_TO_START;
	if (a->forced >= 0)
		return (enum attempt_end)a->forced;
	if (a->daemonized)
		return ATTEMPT_DAEMONIZED;
	if (WIFSIGNALED(a->wait_status))
		return ATTEMPT_KILLED;
	return ATTEMPT_EXITED;
}

static int exit_code_of(const struct attempt *a)
{
	return a->exited && !a->failed_start && WIFEXITED(a->wait_status) ?
		       WEXITSTATUS(a->wait_status) :
		       -1;
}

/* The service's reason after an attempt ended this way. */
static void describe_end(struct service *svc, const struct attempt *a, enum attempt_end end,
			 const char *prefix)
{
	if (a->reason)
		service_set_reason(svc, "%s%s", prefix, a->reason);
	else if (end == ATTEMPT_STOPPED)
		service_set_reason(svc, "stopped on request");
	else if (WIFSIGNALED(a->wait_status))
		service_set_reason(svc, "%skilled by signal %d (SIG%s)", prefix,
				   WTERMSIG(a->wait_status),
				   sigabbrev_np(WTERMSIG(a->wait_status)) ?: "?");
	else
		service_set_reason(svc, "%sexited with code %d", prefix, exit_code_of(a));
}

static int on_restart_timer(struct event_source *s, uint64_t now, void *userdata)
{
	struct service *svc = userdata;

	svc->restart_count++;
	svc->next_restart_at = 0;
	service_start_attempt(svc);
	return 0;
}

static void enter_backoff(struct service *svc, uint64_t delay_ms)
{
	uint64_t delay_usec = delay_ms > UINT64_MAX / 2000 ? UINT64_MAX / 2 : delay_ms * 1000;
	int k;

	svc->state = SERVICE_BACKOFF;
	svc->next_restart_at = realtime_usec() + delay_usec;
	if (svc->restart_timer)
		k = event_source_set_time(svc->restart_timer, now_usec() + delay_usec);
	else
		k = event_add_timer(svc->m->loop, &svc->restart_timer, now_usec() + delay_usec,
				    on_restart_timer, svc);
	if (k < 0) {
		log_error("cannot arm service restart timer", "service", svc->def.name, NULL);
		svc->state = SERVICE_FAILED;
		service_set_reason(svc, "cannot arm the restart timer: %s", strerror(-k));
	}
}

/* The attempt is over: report it, then follow the policy. */
static void attempt_finish(struct service *svc)
{
	struct attempt *a = TAKE_PTR(svc->attempt);
	enum attempt_end end = attempt_end_of(a);
	struct service_next next;

	report_done(svc, a, end);
	log_info("service attempt ended", "service", svc->def.name, "end",
		 attempt_end_to_string(end), NULL);
	if (a->cg)
		spawn_cgroup_release(svc->m->loop, TAKE_PTR(a->cg));
	if (svc->remove) {
		attempt_free(a);
		service_free(svc);
		return;
	}
	next = service_policy_next(&svc->def.restart, svc->restart_count, end, exit_code_of(a));
	switch (next.state) {
	case SERVICE_STARTING:
		attempt_free(a);
		svc->restart_count = 0;
		service_start_attempt(svc);
		return;
	case SERVICE_BACKOFF:
		describe_end(svc, a, end, "restarting after: ");
		enter_backoff(svc, next.delay_ms);
		break;
	case SERVICE_EXHAUSTED:
		describe_end(svc, a, end, "gave up after the restart limit; last attempt: ");
		svc->state = next.state;
		break;
	default:
		describe_end(svc, a, end, "");
		svc->state = next.state;
		break;
	}
	attempt_free(a);
	report_state(svc);
}

static void attempt_maybe_finish(struct service *svc)
{
	struct attempt *a = svc->attempt;

	if (a && a->exited && a->errpipe_fd < 0 && a->out.fd < 0 && a->err.fd < 0)
		attempt_finish(svc);
}

static void pipe_close(struct service_pipe *p)
{
	close_source(&p->io, &p->fd);
}

static void errpipe_read(struct service *svc)
{
	struct attempt *a = svc->attempt;
	struct spawn_error e;
	int n = spawn_errpipe_read(a->errpipe_fd, &e);

	if (n == -EAGAIN)
		return;
	close_source(&a->errpipe_io, &a->errpipe_fd);
	if (n == 0) {
		a->failed_start = true;
		a->reason = spawn_error_reason(&e, svc->def.cwd);
		log_info("service attempt failed to start", "service", svc->def.name, "reason",
			 a->reason ? a->reason : "", NULL);
		return;
	}
	a->exec_done = true;
	if (a->exited || svc->state != SERVICE_STARTING)
		return;
	svc->state = SERVICE_RUNNING;
	service_clear_reason(svc);
	report_state(svc);
}

static int on_errpipe(struct event_source *s, int fd, uint32_t revents, void *userdata)
{
	struct service *svc = userdata;

	errpipe_read(svc);
	attempt_maybe_finish(svc);
	return 0;
}

static int on_pipe(struct event_source *s, int fd, uint32_t revents, void *userdata)
{
	static uint8_t chunk[READ_CHUNK];
	struct service_pipe *p = userdata;
	struct service *svc = p->svc;
	struct attempt *a = svc->attempt;
	struct output_buffer *o = &a->buf[p->stream - 1];
	uint64_t offset;
	ssize_t n;

	do
		n = read(fd, chunk, sizeof chunk);
	while (n < 0 && errno == EINTR);
	if (n < 0 && errno == EAGAIN)
		return 0;
	if (n <= 0) {
		pipe_close(p);
		attempt_maybe_finish(svc);
		return 0;
	}
	offset = output_buffer_total(o);
	output_buffer_append(o, chunk, (size_t)n);
	if (svc->watch)
		send_output(svc, a, p->stream, offset, chunk, (size_t)n);
	return 0;
}

static int on_drain_timeout(struct event_source *s, uint64_t now, void *userdata)
{
	struct service *svc = userdata;

	log_warn("output pipes still open after the attempt ended, closing them", "service",
		 svc->def.name, NULL);
	pipe_close(&svc->attempt->out);
	pipe_close(&svc->attempt->err);
	attempt_maybe_finish(svc);
	return 0;
}

/* SIGKILL for the attempt's whole tree. */
static void attempt_kill(struct attempt *a)
{
	int k;

	if (a->cg) {
		k = cgroup_kill(a->cg);
		if (k < 0)
			log_warn("cannot kill service cgroup", "error", strerror(-k), NULL);
	} else if (a->pid > 0)
		(void)kill(-a->pid, SIGKILL);
	/* The main process may not have joined its group yet; it is ours and not reaped. */
	if (a->pid > 0 && !a->exited)
		(void)kill(a->pid, SIGKILL);
}

/* The main process exited while others stayed: services must run in the foreground. */
static void check_daemonized(struct service *svc, struct attempt *a)
{
	int n;

	if (!a->cg || a->failed_start || a->forced >= 0)
		return;
	n = spawn_cgroup_count(a->cg);
	if (n <= 0)
		return;
	a->daemonized = true;
	free(a->reason);
	if (asprintf(&a->reason,
		     "the main process exited while %d process%s still running; services must "
		     "run in the foreground",
		     n, n == 1 ? " was" : "es were") < 0)
		a->reason = NULL;
	log_warn("service daemonized", "service", svc->def.name, NULL);
}

void service_manager_child_exited(struct service_manager *m, pid_t pid, int status)
{
	struct service *svc;
	struct attempt *a = NULL;

	for (svc = m->services; svc; svc = svc->next)
		if (svc->attempt && svc->attempt->pid == pid && !svc->attempt->exited) {
			a = svc->attempt;
			break;
		}
	if (!a)
		return;
	a->exited = true;
	a->wait_status = status;
	event_source_free(a->stop_timer);
	a->stop_timer = NULL;
	if (a->errpipe_fd >= 0)
		errpipe_read(svc);
	check_daemonized(svc, a);
	if (a->cg ? cgroup_is_empty(a->cg) != 1 : true)
		attempt_kill(a); /* whatever is left goes, so the pipes reach EOF */
	if ((a->out.fd >= 0 || a->err.fd >= 0) &&
	    event_add_timer(m->loop, &a->drain_timer, now_usec() + DRAIN_USEC, on_drain_timeout,
			    svc) < 0) {
		pipe_close(&a->out);
		pipe_close(&a->err);
	}
	attempt_maybe_finish(svc);
}

static int on_stop_timeout(struct event_source *s, uint64_t now, void *userdata)
{
	struct service *svc = userdata;
	struct attempt *a = svc->attempt;

	log_info("service did not stop in time, killing it", "service", svc->def.name, NULL);
	event_source_free(a->stop_timer);
	a->stop_timer = NULL;
	attempt_kill(a);
	return 0;
}

/* Stop or restart: stopSignal to every process of the attempt, SIGKILL after the timeout. */
static void attempt_stop(struct service *svc, enum attempt_end why)
{
	struct attempt *a = svc->attempt;
	bool first = a->forced < 0;
	int n = 0;

	a->forced = why;
	if (!first || a->exited)
		return;
	if (a->cg)
		n = spawn_cgroup_signal(a->cg, svc->def.stop_signal);
	else if (a->pid > 0 && kill(-a->pid, svc->def.stop_signal) == 0)
		n = 1;
	if (n <= 0 && a->pid > 0)
		(void)kill(a->pid, svc->def.stop_signal);
	if (event_add_timer(svc->m->loop, &a->stop_timer,
			    now_usec() + svc->def.stop_timeout_ms * 1000, on_stop_timeout, svc) < 0)
		attempt_kill(a);
	report_state(svc);
}

static int open_pipes(int in[2], int out[2], int err[2], int ep[2])
{
	if (pipe2(out, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0 || pipe2(ep, O_CLOEXEC) < 0)
		return -errno;
	in[0] = open("/dev/null", O_RDONLY | O_CLOEXEC);
	return in[0] < 0 ? -errno : 0;
}

static void close_pair(int p[2])
{
	for (int i = 0; i < 2; i++)
		if (p[i] >= 0) {
			close(p[i]);
			p[i] = -1;
		}
}

static int attempt_fork(struct service *svc, struct attempt *a, char **envp)
{
	int in[2] = { -1, -1 }, out[2] = { -1, -1 }, err[2] = { -1, -1 }, ep[2] = { -1, -1 };
	struct spawn_child c = {
		.cg = a->cg,
		.set_user = svc->m->set_user,
		.uid = svc->m->uid,
		.gid = svc->m->gid,
		.cwd = svc->def.cwd,
		.command = svc->def.command,
		.envp = envp,
	};
	int k = open_pipes(in, out, err, ep);

	if (k < 0) {
		a->reason = spawn_reason("pipe", NULL, -k);
		goto out;
	}
	c.stdio[0] = in[0];
	c.stdio[1] = out[1];
	c.stdio[2] = err[1];
	c.errpipe = ep[1];
	k = spawn_fork(&c, &a->pid);
	if (k < 0) {
		a->reason = spawn_reason("fork", NULL, -k);
		goto out;
	}
	a->out.fd = TAKE_FD(out[0]);
	a->err.fd = TAKE_FD(err[0]);
	a->errpipe_fd = TAKE_FD(ep[0]);
out:
	close_pair(in);
	close_pair(out);
	close_pair(err);
	close_pair(ep);
	return k;
}

static int watch_pipes(struct service *svc, struct attempt *a)
{
	struct event_loop *loop = svc->m->loop;
	int k;

	if (fd_set_nonblock(a->out.fd, true) < 0 || fd_set_nonblock(a->err.fd, true) < 0 ||
	    fd_set_nonblock(a->errpipe_fd, true) < 0)
		return -errno;
	k = event_add_io(loop, &a->out.io, a->out.fd, EPOLLIN, on_pipe, &a->out);
	if (k >= 0)
		k = event_add_io(loop, &a->err.io, a->err.fd, EPOLLIN, on_pipe, &a->err);
	if (k >= 0)
		k = event_add_io(loop, &a->errpipe_io, a->errpipe_fd, EPOLLIN, on_errpipe, svc);
	return k;
}

static int attempt_new(struct service *svc, struct attempt **ret)
{
	struct attempt *a = calloc(1, sizeof *a);

	if (!a)
		return -ENOMEM;
	*a = (struct attempt){
		.number = svc->next_attempt++,
		.pid = -1,
		.errpipe_fd = -1,
		.out = { .svc = svc, .stream = RUN_STREAM_STDOUT, .fd = -1 },
		.err = { .svc = svc, .stream = RUN_STREAM_STDERR, .fd = -1 },
		.forced = -1,
		.started_at = realtime_usec(),
	};
	if (output_buffer_init(&a->buf[0], svc->def.head, svc->def.tail) < 0 ||
	    output_buffer_init(&a->buf[1], svc->def.head, svc->def.tail) < 0) {
		output_buffer_done(&a->buf[0]);
		free(a);
		return -ENOMEM;
	}
	*ret = a;
	return 0;
}

/* Cgroup, environment, fork, pipes; a failure makes it a failed start. */
static void attempt_launch(struct service *svc, struct attempt *a)
{
	struct service_manager *m = svc->m;
	_cleanup_free_ char **envp = NULL;
	_cleanup_free_ char *pwd = NULL;
	char name[32];
	int k;

	snprintf(name, sizeof name, "s-%" PRIu64, ++m->next_cgroup);
	if (m->cgroup && (k = spawn_cgroup_new(m->cgroup, name, &a->cg)) < 0) {
		a->reason = spawn_reason("cgroup", name, -k);
		goto fail;
	}
	if (spawn_build_env(m->env, m->n_env, m->home_entry, svc->def.cwd, svc->def.env,
			    svc->def.n_env, &envp, &pwd) < 0) {
		a->reason = spawn_reason("environment", NULL, ENOMEM);
		goto fail;
	}
	if (attempt_fork(svc, a, envp) < 0)
		goto fail;
	k = watch_pipes(svc, a);
	if (k < 0) {
		a->reason = spawn_reason("event loop", NULL, -k);
		a->failed_start = true;
		(void)kill(a->pid, SIGKILL);
		close_source(&a->errpipe_io, &a->errpipe_fd);
		pipe_close(&a->out);
		pipe_close(&a->err);
	}
	return;
fail:
	a->failed_start = true;
	a->exited = true; /* nothing to wait for */
}

static void service_start_attempt(struct service *svc)
{
	struct attempt *a;

	event_source_free(svc->restart_timer);
	svc->restart_timer = NULL;
	svc->next_restart_at = 0;
	if (attempt_new(svc, &a) < 0) {
		svc->state = SERVICE_FAILED;
		service_set_reason(svc, "out of memory");
		report_state(svc);
		return;
	}
	svc->attempt = a;
	svc->last_attempt = a->number;
	svc->state = SERVICE_STARTING;
	attempt_launch(svc, a);
	log_info("service attempt starting", "service", svc->def.name, NULL);
	report_state(svc);
	attempt_maybe_finish(svc);
}

/* ---- requests ------------------------------------------------------------------------------ */

static int handle_start(struct service_manager *m, const struct frame *f)
{
	struct service *svc = calloc(1, sizeof *svc), *old;
	int k;

	if (!svc)
		return -ENOMEM;
	svc->m = m;
	k = service_def_parse(f, &svc->def);
	if (k >= 0 && !svc->def.cwd && !(svc->def.cwd = strdup(m->workdir)))
		k = -ENOMEM;
	if (k < 0) {
		service_free(svc);
		return k;
	}
	svc->next_attempt = svc->def.first_attempt;
	old = service_find(m, svc->def.name);
	if (old && service_active(old)) {
		(void)send_error(m, svc->def.name, "the service is already running");
		service_free(svc);
		return 0;
	}
	if (old)
		service_free(old);
	else if (m->n_services >= SERVICE_MAX) {
		(void)send_error(m, svc->def.name, "too many services (32 per workspace)");
		service_free(svc);
		return 0;
	}
	svc->next = m->services;
	m->services = svc;
	m->n_services++;
	service_start_attempt(svc);
	return 0;
}

static void service_stop(struct service *svc)
{
	if (svc->attempt) {
		attempt_stop(svc, ATTEMPT_STOPPED);
		return;
	}
	if (svc->state != SERVICE_BACKOFF)
		return;
	event_source_free(svc->restart_timer);
	svc->restart_timer = NULL;
	svc->next_restart_at = 0;
	svc->state = SERVICE_STOPPED;
	service_set_reason(svc, "stopped on request");
	report_state(svc);
}

static void service_restart(struct service *svc)
{
	if (svc->attempt) {
		attempt_stop(svc, ATTEMPT_RESTARTED);
		return;
	}
	svc->restart_count = 0;
	service_start_attempt(svc);
}

static void service_remove(struct service *svc)
{
	if (svc->attempt) {
		svc->remove = true;
		attempt_stop(svc, ATTEMPT_STOPPED);
		return;
	}
	log_info("service removed", "service", svc->def.name, NULL);
	service_free(svc);
}

static int handle_named(struct service_manager *m, const struct frame *f)
{
	_cleanup_free_ char *name = NULL;
	bool watch = false;
	struct service *svc;
	int k = service_parse_name(f, f->type == MSG_SERVICE_WATCH, &name, &watch);

	if (k < 0)
		return k;
	svc = service_find(m, name);
	if (!svc) {
		if (f->type != MSG_SERVICE_WATCH && f->type != MSG_SERVICE_REMOVE)
			(void)send_error(m, name, "no such service");
		return 0;
	}
	switch (f->type) {
	case MSG_SERVICE_STOP:
		service_stop(svc);
		break;
	case MSG_SERVICE_RESTART:
		service_restart(svc);
		break;
	case MSG_SERVICE_REMOVE:
		service_remove(svc);
		break;
	default:
		svc->watch = watch;
		if (watch && svc->attempt)
			send_snapshot(svc, svc->attempt);
		break;
	}
	return 0;
}

int service_manager_message(struct service_manager *m, const struct frame *f)
{
	switch (f->type) {
	case MSG_SERVICE_START:
		return handle_start(m, f);
	case MSG_SERVICE_STOP:
	case MSG_SERVICE_RESTART:
	case MSG_SERVICE_REMOVE:
	case MSG_SERVICE_WATCH:
		return handle_named(m, f);
	default:
		return -EBADMSG;
	}
}

int service_manager_hello_fields(struct service_manager *m, struct buf *b)
{
	int k = 0;

	for (struct service *s = m->services; s && k >= 0; s = s->next)
		k = frame_put_str(b, TAG_SERVICE_NAME, s->def.name);
	return k;
}

void service_manager_disconnected(struct service_manager *m)
{
	for (struct service *s = m->services; s; s = s->next)
		s->watch = false;
}

/* ---- the manager --------------------------------------------------------------------------- */

int service_manager_new(struct event_loop *loop, struct channel *channel,
			const struct run_config *config, struct service_manager **ret)
{
	struct service_manager *m = calloc(1, sizeof *m);

	if (!m)
		return -ENOMEM;
	*m = (struct service_manager){
		.loop = loop,
		.channel = channel,
		.cgroup = config->cgroup,
		.env = config->env,
		.n_env = config->n_env,
		.set_user = config->set_user,
		.uid = config->uid,
		.gid = config->gid,
	};
	m->workdir = strdup(config->workdir);
	if (!m->workdir || asprintf(&m->home_entry, "HOME=%s", config->home) < 0) {
		free(m->workdir);
		free(m);
		return -ENOMEM;
	}
	*ret = m;
	return 0;
}

void service_manager_free(struct service_manager *m)
{
	if (!m)
		return;
	while (m->services) {
		attempt_free(TAKE_PTR(m->services->attempt));
		service_free(m->services);
	}
	spawn_cgroup_release_free();
	free(m->home_entry);
	free(m->workdir);
	free(m);
}

void service_manager_kill_all(struct service_manager *m)
{
	for (struct service *s = m->services; s; s = s->next)
		if (s->attempt)
			attempt_kill(s->attempt);
	spawn_cgroup_release_kill();
}

static bool all_gone(struct service_manager *m)
{
	for (struct service *s = m->services; s; s = s->next) {
		struct attempt *a = s->attempt;

		if (a && (a->cg ? cgroup_is_empty(a->cg) == 0 :
				  a->pid > 0 && (kill(-a->pid, 0) == 0 || errno != ESRCH)))
			return false;
	}
	return spawn_cgroup_release_empty();
}

void service_manager_shutdown(struct service_manager *m)
{
	uint64_t deadline = now_usec() + SHUTDOWN_USEC;

	service_manager_kill_all(m);
	for (;;) {
		while (waitpid(-1, NULL, WNOHANG) > 0)
			;
		if (all_gone(m) || now_usec() >= deadline)
			break;
		(void)nanosleep(&(struct timespec){ .tv_nsec = 10 * 1000 * 1000 }, NULL);
	}
	for (struct service *s = m->services; s; s = s->next)
		if (s->attempt && s->attempt->cg && cgroup_remove(s->attempt->cg) < 0)
			log_warn("cannot remove service cgroup", "service", s->def.name, NULL);
	spawn_cgroup_release_remove();
}
