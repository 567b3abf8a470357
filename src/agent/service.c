/* SPDX-License-Identifier: MIT */
/* Services: attempts, their processes and output, the restart policy in motion, and the
 * SERVICE_* messages (docs/agent-protocol.md, "Services"). */

#include "agent/service.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "basic/cleanup.h"
#include "basic/log.h"
#include "basic/util.h"
#include "cgroup/cgroup.h"

#define SHUTDOWN_USEC 2000000ull
#define REASON_MAX 1024
/* SERVICE_PROGRESS: output is counted as it is read; the totals go out at most this often. */
#define PROGRESS_USEC 250000ull

struct service;

/* One run of the command. */
struct attempt {
	struct service *svc;
	uint64_t number;
	struct child child;
	struct event_source *stop_timer;
	uint64_t started_mono; /* CLOCK_MONOTONIC usec: how long it ran decides the budget */
	bool daemonized;
	int forced;	      /* ATTEMPT_STOPPED or ATTEMPT_RESTARTED once asked to end, else -1 */
	uint64_t reported[2]; /* stdout and stderr totals the last SERVICE_PROGRESS sent */
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
	uint64_t restart_left;	 /* paused in backoff: usec the delay had left */
	struct attempt *attempt; /* the current one, NULL when none */
	bool watch;
	bool remove; /* forget it once the attempt has ended */
};

struct service_manager {
	struct child_base base; /* first (child_base_new()); its children are the attempts */
	struct service *services;
	size_t n_services;
	bool progress;			     /* the controller asked for SERVICE_PROGRESS */
	struct event_source *progress_timer; /* armed while totals wait to be sent */
	bool progress_armed;
	uint64_t paused_at; /* CLOCK_MONOTONIC usec of PAUSE; 0: not paused */
};

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
	log_warn("service request refused", "service", name ? name : "", "reason", reason, NULL);
	return channel_send_error(m->base.channel, TAG_SERVICE_NAME, name, reason);
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
	if (k >= 0 && a && a->child.pid > 0 && !a->child.exited)
		k = frame_put_u64(b, TAG_PID, (uint64_t)a->child.pid);
	if (k >= 0 && a)
		k = frame_put_u64(b, TAG_STARTED_AT, a->child.started_at);
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
	struct channel *c = svc->m->base.channel;
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

static int put_end(struct buf *b, const struct attempt *a, enum attempt_end end)
{
	int k = frame_put_u64(b, TAG_END_REASON, end);

	if (k >= 0)
		k = child_put_exit(&a->child, b);
	if (k >= 0)
		k = frame_put_u64(b, TAG_DAEMONIZED, a->daemonized);
	if (k >= 0 && a->child.reason)
		k = frame_put_str(b, TAG_REASON, a->child.reason);
	return k;
}

/* The attempt's group at its end, read before it is released: OOM_KILLED, CPU_USEC and
 * PEAK_MEMORY go out only when it could be read (a controller takes their absence as unknown). */
static int put_stats(struct buf *b, const struct attempt *a)
{
	struct cgroup_stats st = {};
	int k;

	if (!a->child.cg)
		return 0;
	k = cgroup_get_stats(a->child.cg, &st);
	if (k < 0) {
		log_warn("cannot read service attempt cgroup stats", "service", a->svc->def.name,
			 "error", strerror(-k), NULL);
		return 0;
	}
	k = frame_put_u64(b, TAG_OOM_KILLED, st.oom_kills > 0);
	if (k >= 0)
		k = frame_put_u64(b, TAG_CPU_USEC, st.cpu_usec);
	if (k >= 0)
		k = frame_put_u64(b, TAG_PEAK_MEMORY, st.peak_memory);
	return k;
}

static int build_done(const struct service *svc, struct attempt *a, enum attempt_end end,
		      uint64_t seq, uint64_t ended, struct buf *b)
{
	size_t kept = child_output_kept(&a->child);
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
		k = child_put_output(&a->child, b, true);
	if (k >= 0)
		k = frame_put_u64(b, TAG_STARTED_AT, a->child.started_at);
	if (k >= 0)
		k = frame_put_u64(b, TAG_ENDED_AT, ended);
	if (k >= 0)
		k = put_stats(b, a);
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
	struct channel *c = svc->m->base.channel;
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

static int put_output_ids(const struct child *c, struct buf *b)
{
	const struct attempt *a = container_of(c, struct attempt, child);
	int k = frame_put_str(b, TAG_SERVICE_NAME, a->svc->def.name);

	if (k >= 0)
		k = frame_put_u64(b, TAG_ATTEMPT, a->number);
	return k;
}

/* ---- progress ------------------------------------------------------------------------------ */

static int send_progress(struct service_manager *m, struct attempt *a)
{
	uint64_t out = output_buffer_total(&a->child.out[0].buf);
	uint64_t err = output_buffer_total(&a->child.out[1].buf);
	struct buf *b;
	size_t start;
	int k = channel_begin(m->base.channel, MSG_SERVICE_PROGRESS, &b, &start);

	if (k < 0)
		return k;
	k = frame_put_str(b, TAG_SERVICE_NAME, a->svc->def.name);
	if (k >= 0)
		k = frame_put_u64(b, TAG_ATTEMPT, a->number);
	if (k >= 0)
		k = frame_put_u64(b, TAG_STDOUT_BYTES, out);
	if (k >= 0)
		k = frame_put_u64(b, TAG_STDERR_BYTES, err);
	k = channel_end(m->base.channel, start, k);
	if (k >= 0) {
		a->reported[0] = out;
		a->reported[1] = err;
	}
	return k;
}

/* The totals of every running attempt that changed since they were last sent (all: every one). */
static void progress_flush(struct service_manager *m, bool all)
{
	for (struct service *s = m->services; s; s = s->next) {
		struct attempt *a = s->attempt;

		if (!a || (!all && a->reported[0] == output_buffer_total(&a->child.out[0].buf) &&
			   a->reported[1] == output_buffer_total(&a->child.out[1].buf)))
			continue;
		if (send_progress(m, a) < 0)
			return; /* no controller: nothing to tell */
	}
}

static int on_progress_timer(struct event_source *s, uint64_t now, void *userdata)
{
	struct service_manager *m = userdata;

	m->progress_armed = false;
	if (m->progress)
		progress_flush(m, false);
	return 0;
}

/* Output was kept: its totals go out with the next tick, so a chatty attempt costs at most one
 * small frame per PROGRESS_USEC and a quiet one none. */
static void attempt_kept(struct child *c)
{
	struct service_manager *m = (struct service_manager *)c->base;
	uint64_t due = now_usec() + PROGRESS_USEC;
	int k;

	if (!m->progress || m->progress_armed)
		return;
	if (m->progress_timer)
		k = event_source_set_time(m->progress_timer, due);
	else
		k = event_add_timer(m->base.loop, &m->progress_timer, due, on_progress_timer, m);
	m->progress_armed = k >= 0;
}

static int handle_progress_watch(struct service_manager *m, const struct frame *f)
{
	uint64_t watch = UINT64_MAX;
	struct frame_iter it;
	const uint8_t *v;
	uint16_t tag;
	size_t n;
	int k;

	frame_iter_init(&it, f);
	while ((k = frame_iter_next(&it, &tag, &v, &n)) > 0) {
		if (tag != TAG_WATCH || watch != UINT64_MAX || frame_val_u64(v, n, &watch) < 0)
			return -EBADMSG;
	}
	if (k < 0 || watch > 1)
		return -EBADMSG;
	m->progress = watch == 1;
	if (m->progress)
		progress_flush(m, true);
	return 0;
}

/* ---- attempts ------------------------------------------------------------------------------- */

static void attempt_free(struct attempt *a)
{
	if (!a)
		return;
	child_done(&a->child);
	event_source_free(a->stop_timer);
	free(a);
}

static enum attempt_end attempt_end_of(const struct attempt *a)
{
	if (a->child.failed_start)
		return ATTEMPT_FAILED_TO_START;
	if (a->forced >= 0)
		return (enum attempt_end)a->forced;
	if (a->daemonized)
		return ATTEMPT_DAEMONIZED;
	if (WIFSIGNALED(a->child.wait_status))
		return ATTEMPT_KILLED;
	return ATTEMPT_EXITED;
}

/* The service's reason after an attempt ended this way. */
static void describe_end(struct service *svc, const struct attempt *a, enum attempt_end end,
			 const char *prefix)
{
	int status = a->child.wait_status;

	if (a->child.reason)
		service_set_reason(svc, "%s%s", prefix, a->child.reason);
	else if (end == ATTEMPT_STOPPED)
		service_set_reason(svc, "stopped on request");
	else if (WIFSIGNALED(status))
		service_set_reason(svc, "%skilled by signal %d (SIG%s)", prefix, WTERMSIG(status),
				   sigabbrev_np(WTERMSIG(status)) ?: "?");
	else
		service_set_reason(svc, "%sexited with code %d", prefix,
				   child_exit_code(&a->child));
}

static int on_restart_timer(struct event_source *s, uint64_t now, void *userdata)
{
	struct service *svc = userdata;

	if (svc->m->paused_at) { /* stopped by PAUSE as it fired: RESUME restarts it */
		svc->restart_left = 0;
		return 0;
	}
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
	svc->restart_left = delay_usec;
	/* paused: the delay starts at RESUME */
	uint64_t at = svc->m->paused_at ? UINT64_MAX : now_usec() + delay_usec;
	if (svc->restart_timer)
		k = event_source_set_time(svc->restart_timer, at);
	else
		k = event_add_timer(svc->m->base.loop, &svc->restart_timer, at, on_restart_timer,
				    svc);
	if (k < 0) {
		log_error("cannot arm service restart timer", "service", svc->def.name, NULL);
		svc->state = SERVICE_FAILED;
		service_set_reason(svc, "cannot arm the restart timer: %s", strerror(-k));
	}
}

/* The attempt is over: report it, then follow the policy. */
static void attempt_finish(struct child *c)
{
	struct attempt *a = container_of(c, struct attempt, child);
	struct service *svc = a->svc;
	enum attempt_end end = attempt_end_of(a);
	struct service_next next;

	report_done(svc, a, end);
	log_info("service attempt ended", "service", svc->def.name, "end",
		 attempt_end_to_string(end), NULL);
	svc->attempt = NULL;
	if (c->cg)
		spawn_cgroup_release(svc->m->base.loop, TAKE_PTR(c->cg));
	if (svc->remove) {
		attempt_free(a);
		service_free(svc);
		return;
	}
	if (service_budget_resets(&svc->def.restart, (now_usec() - a->started_mono) / 1000))
		svc->restart_count = 0;
	next = service_policy_next(&svc->def.restart, svc->restart_count, end, child_exit_code(c));
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

/* The command was executed: the service runs, unless it already ended or is stopping. */
static void attempt_started(struct child *c)
{
	struct service *svc = container_of(c, struct attempt, child)->svc;

	if (c->exited || svc->state != SERVICE_STARTING)
		return;
	svc->state = SERVICE_RUNNING;
	service_clear_reason(svc);
	report_state(svc);
}

/* The main process exited while others stayed: services must run in the foreground. */
static void check_daemonized(struct service *svc, struct attempt *a)
{
	int n;

	if (!a->child.cg || a->child.failed_start || a->forced >= 0)
		return;
	n = spawn_cgroup_count(a->child.cg);
	if (n <= 0)
		return;
	a->daemonized = true;
	free(a->child.reason);
	if (asprintf(&a->child.reason,
		     "the main process exited while %d process%s still running; services must "
		     "run in the foreground",
		     n, n == 1 ? " was" : "es were") < 0)
		a->child.reason = NULL;
	log_warn("service daemonized", "service", svc->def.name, NULL);
}

static void attempt_exited(struct child *c)
{
	struct attempt *a = container_of(c, struct attempt, child);

	event_source_free(a->stop_timer);
	a->stop_timer = NULL;
	check_daemonized(a->svc, a);
}

void service_manager_child_exited(struct service_manager *m, pid_t pid, int status)
{
	struct child *c = child_base_find_pid(&m->base, pid);

	if (c)
		child_exited(c, status);
}

static int on_stop_timeout(struct event_source *s, uint64_t now, void *userdata)
{
	struct service *svc = userdata;
	struct attempt *a = svc->attempt;

	log_info("service did not stop in time, killing it", "service", svc->def.name, NULL);
	event_source_free(a->stop_timer);
	a->stop_timer = NULL;
	child_kill(&a->child);
	return 0;
}

/* Stop or restart: stopSignal to every process of the attempt, SIGKILL after the timeout. */
static void attempt_stop(struct service *svc, enum attempt_end why)
{
	struct attempt *a = svc->attempt;
	bool first = a->forced < 0;

	a->forced = why;
	if (!first || a->child.exited)
		return;
	child_signal(&a->child, svc->def.stop_signal);
	if (event_add_timer(svc->m->base.loop, &a->stop_timer,
			    now_usec() + svc->def.stop_timeout_ms * 1000, on_stop_timeout, svc) < 0)
		child_kill(&a->child);
	report_state(svc);
}

static int attempt_new(struct service *svc, struct attempt **ret)
{
	struct attempt *a = calloc(1, sizeof *a);

	if (!a)
		return -ENOMEM;
	*a = (struct attempt){ .svc = svc, .number = svc->next_attempt++, .forced = -1 };
	if (child_init(&a->child, &svc->m->base, svc->def.name, svc->def.head, svc->def.tail) < 0) {
		free(a);
		return -ENOMEM;
	}
	a->child.watch = svc->watch;
	*ret = a;
	return 0;
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
	a->started_mono = now_usec();
	(void)child_start(&a->child, &(const struct child_cmd){ .cwd = svc->def.cwd,
								.command = svc->def.command,
								.env = svc->def.env,
								.n_env = svc->def.n_env });
	log_info("service attempt starting", "service", svc->def.name, NULL);
	report_state(svc);
	child_maybe_finish(&a->child);
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
	if (k >= 0 && !svc->def.cwd && !(svc->def.cwd = strdup(m->base.workdir)))
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

/* Watching a service is watching each of its attempts. */
static void service_watch(struct service *svc, bool on)
{
	svc->watch = on;
	if (svc->attempt)
		svc->attempt->child.watch = on;
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
		service_watch(svc, watch);
		if (watch && svc->attempt)
			child_send_snapshot(&svc->attempt->child);
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
	case MSG_SERVICE_PROGRESS_WATCH:
		return handle_progress_watch(m, f);
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

int service_manager_put_usage(struct service_manager *m, struct buf *b)
{
	return child_base_put_usage(&m->base, b);
}

void service_manager_disconnected(struct service_manager *m)
{
	for (struct service *s = m->services; s; s = s->next)
		service_watch(s, false);
	m->progress = false;
}

void service_manager_output_room(struct service_manager *m)
{
	child_base_output_room(&m->base);
}

/* ---- the manager --------------------------------------------------------------------------- */

static const struct child_ops attempt_ops = {
	.kind = "service",
	.what = "service attempt",
	.cgroup_prefix = "s",
	.output_type = MSG_SERVICE_OUTPUT,
	.name_tag = TAG_SERVICE_NAME,
	.put_ids = put_output_ids,
	.started = attempt_started,
	.exited = attempt_exited,
	.finish = attempt_finish,
	.kept = attempt_kept,
};

int service_manager_new(struct event_loop *loop, struct channel *channel,
			const struct child_config *config, struct service_manager **ret)
{
	struct service_manager *m = child_base_new(sizeof *m, &attempt_ops, loop, channel, config);

	if (!m)
		return -ENOMEM;
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
	event_source_free(m->progress_timer);
	spawn_cgroup_release_free();
	child_base_free(&m->base);
}

void service_manager_kill_all(struct service_manager *m)
{
	child_base_kill(&m->base);
	spawn_cgroup_release_kill();
}

void service_manager_shutdown(struct service_manager *m)
{
	service_manager_kill_all(m);
	child_base_shutdown(&m->base, SHUTDOWN_USEC);
}

/* ---- pause ------------------------------------------------------------------------------------ */

static void service_pause(struct service *svc, bool paused, uint64_t paused_usec)
{
	struct attempt *a = svc->attempt;

	if (a && !paused) /* how long it ran (the restart budget's reset) leaves the pause out */
		a->started_mono += paused_usec;
	if (svc->state != SERVICE_BACKOFF || !svc->restart_timer)
		return;
	if (paused) {
		uint64_t now = realtime_usec();
		svc->restart_left = svc->next_restart_at > now ? svc->next_restart_at - now : 0;
		(void)event_source_set_time(svc->restart_timer, UINT64_MAX);
		return;
	}
	svc->next_restart_at = realtime_usec() + svc->restart_left;
	(void)event_source_set_time(svc->restart_timer, now_usec() + svc->restart_left);
	report_state(svc);
}

void service_manager_pause(struct service_manager *m, bool paused)
{
	uint64_t now = now_usec();

	if (paused == (m->paused_at != 0))
		return;
	for (struct service *svc = m->services; svc; svc = svc->next)
		service_pause(svc, paused, paused ? 0 : now - m->paused_at);
	m->paused_at = paused ? now : 0;
}
