/* SPDX-License-Identifier: MIT */
#include "agent/child.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "basic/cleanup.h"
#include "basic/list.h"
#include "basic/log.h"
#include "basic/util.h"

/* A PTY gives at most a few KiB per read; a pipe up to its size (output_pipe_grow()). */
#define PTY_READ_BYTES (64 * 1024)
#define DRAIN_USEC 1000000ull
/* A watched run's pipe is not read while the link to the controller is backed up, for at most
 * this long in a row; then reading goes on and the bytes wait in the run's buffer (pipe_hold()). */
#define HOLD_MAX_USEC 100000ull
#define HOLD_RETRY_USEC 1000ull

/* ---- the base ------------------------------------------------------------------------------ */

void *child_base_new(size_t size, const struct child_ops *ops, struct event_loop *loop,
		     struct channel *channel, const struct child_config *config)
{
	struct child_base *b = calloc(1, size);

	if (!b)
		return NULL;
	*b = (struct child_base){
		.ops = ops,
		.loop = loop,
		.channel = channel,
		.cgroup = config->cgroup,
		.env = config->env,
		.n_env = config->n_env,
		.set_user = config->set_user,
		.uid = config->uid,
		.gid = config->gid,
	};
	b->workdir = strdup(config->workdir);
	if (!b->workdir || asprintf(&b->home_entry, "HOME=%s", config->home) < 0) {
		free(b->workdir);
		free(b);
		return NULL;
	}
	return b;
}

void child_base_free(struct child_base *b)
{
	free(b->home_entry);
	free(b->workdir);
	free(b);
}

struct child *child_base_find(struct child_base *b, const char *name)
{
	for (struct child *c = b->children; c; c = c->next)
		if (strcmp(c->name, name) == 0)
			return c;
	return NULL;
}

struct child *child_base_find_pid(struct child_base *b, pid_t pid)
{
	for (struct child *c = b->children; c; c = c->next)
		if (c->pid == pid && !c->exited)
			return c;
	return NULL;
}

int child_base_put_names(struct child_base *b, struct buf *buf)
{
	int k = 0;

	for (struct child *c = b->children; c && k >= 0; c = c->next)
		k = frame_put_str(buf, b->ops->name_tag, c->name);
	return k;
}

int child_base_put_usage(struct child_base *b, struct buf *buf)
{
	int k = 0;

	for (struct child *c = b->children; c && k >= 0; c = c->next) {
		struct cgroup_usage u;

		if (!c->cg || c->pid <= 0 || c->exited || cgroup_get_usage(c->cg, &u) < 0)
			continue;
		k = b->ops->put_ids ? b->ops->put_ids(c, buf) :
				      frame_put_str(buf, b->ops->name_tag, c->name);
		if (k >= 0)
			k = frame_put_u64(buf, TAG_CPU_USEC, u.cpu_usec);
		if (k >= 0)
			k = frame_put_u64(buf, TAG_MEMORY_BYTES, u.memory_bytes);
	}
	return k;
}

void child_base_unwatch(struct child_base *b)
{
	for (struct child *c = b->children; c; c = c->next)
		c->watch = c->behind = false;
}

void child_base_kill(struct child_base *b)
{
	for (struct child *c = b->children; c; c = c->next)
		child_kill(c);
}

/* ---- the child ----------------------------------------------------------------------------- */

int child_init(struct child *c, struct child_base *base, const char *name, size_t head, size_t tail)
{
	*c = (struct child){
		.base = base,
		.name = name,
		.pid = -1,
		.errpipe_fd = -1,
		.stdin_fd = -1,
		.out = { { .child = c, .stream = RUN_STREAM_STDOUT, .fd = -1 },
			 { .child = c, .stream = RUN_STREAM_STDERR, .fd = -1 } },
		.started_at = realtime_usec(),
	};
	if (output_buffer_init(&c->out[0].buf, head, tail) < 0 ||
	    output_buffer_init(&c->out[1].buf, head, tail) < 0) {
		output_buffer_done(&c->out[0].buf);
		return -ENOMEM;
	}
	LIST_PREPEND(&base->children, c);
	base->n_children++;
	return 0;
}

static void close_source(struct event_source **s, int *fd)
{
	event_source_free(*s);
	*s = NULL;
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

static void outputs_close(struct child *c)
{
	for (int i = 0; i < 2; i++) {
		close_source(&c->out[i].io, &c->out[i].fd);
		event_source_free(c->out[i].hold);
		c->out[i].hold = NULL;
	}
}

/* The buffer every output pipe is read into (one loop thread: consumed before the next read).
 * Its pages cost nothing until a read fills them; past the first PTY_READ_BYTES they are given
 * back when a command that wrote fast ends, so an idle agent holds no more than before. */
static uint8_t read_chunk[OUTPUT_READ_BYTES] __attribute__((aligned(4096)));
static size_t read_chunk_used;

static void read_chunk_release(void)
{
	if (read_chunk_used <= PTY_READ_BYTES)
		return;
	(void)madvise(read_chunk + PTY_READ_BYTES, sizeof read_chunk - PTY_READ_BYTES,
		      MADV_DONTNEED);
	read_chunk_used = PTY_READ_BYTES;
}

void child_done(struct child *c)
{
	read_chunk_release();
	LIST_REMOVE(&c->base->children, c);
	c->base->n_children--;
	close_source(&c->errpipe_io, &c->errpipe_fd);
	if (c->stdin_fd >= 0)
		close(c->stdin_fd);
	c->stdin_fd = -1;
	outputs_close(c);
	for (int i = 0; i < 2; i++)
		output_buffer_done(&c->out[i].buf);
	event_source_free(c->drain_timer);
	c->drain_timer = NULL;
	spawn_cgroup_free(c->cg);
	c->cg = NULL;
	free(c->reason);
	c->reason = NULL;
}

void child_maybe_finish(struct child *c)
{
	if (!c->exited || c->errpipe_fd >= 0 || c->out[0].fd >= 0 || c->out[1].fd >= 0)
		return;
	/* Nothing can call this again: every fd is closed and the drain timer goes. */
	event_source_free(c->drain_timer);
	c->drain_timer = NULL;
	c->base->ops->finish(c);
}

static void fail_reason(struct child *c, char *s)
{
	c->failed_start = true;
	if (!s)
		return;
	free(c->reason);
	c->reason = s;
}

void child_fail_start(struct child *c, char *reason)
{
	fail_reason(c, reason);
	outputs_close(c);
	c->exited = true; /* nothing to wait for */
}

/* ---- output -------------------------------------------------------------------------------- */

/* One output frame of len <= OUTPUT_READ_BYTES bytes, whatever the queue holds. */
static int send_frame(struct child *c, int stream, uint64_t offset, const uint8_t *p, size_t len)
{
	struct channel *ch = c->base->channel;
	struct buf *b;
	size_t start;
	int k = channel_begin(ch, c->base->ops->output_type, &b, &start);

	if (k < 0)
		return k;
	k = c->base->ops->put_ids ? c->base->ops->put_ids(c, b) :
				    frame_put_str(b, c->base->ops->name_tag, c->name);
	if (k >= 0 && stream)
		k = frame_put_u64(b, TAG_STREAM, (uint64_t)stream);
	if (k >= 0)
		k = frame_put_u64(b, TAG_OFFSET, offset);
	return channel_end_with_data(ch, start, k, TAG_DATA, p, len);
}

void child_send_output(struct child *c, int stream, uint64_t offset, const uint8_t *p, size_t n)
{
	while (n > 0) {
		size_t len = MIN(n, (size_t)OUTPUT_READ_BYTES); /* one frame per pipe read */

		if (!channel_output_ok(c->base->channel) ||
		    send_frame(c, stream, offset, p, len) < 0)
			return;
		offset += len;
		p += len;
		n -= len;
	}
}

/* A child behind sends from each pipe's resend_next what its buffer keeps there (or after it,
 * when those bytes left the tail), stdout first, one frame at a time while the link has room.
 * The queue so holds at most CHANNEL_MAX_UNSENT and one frame more, and the bytes wait in the
 * buffer they are kept in anyway. Caught up with both pipes' totals: live again. */
static void child_catch_up(struct child *c)
{
	for (int i = 0; i < 2; i++) {
		struct child_pipe *p = &c->out[i];

		while (p->resend_next < output_buffer_total(&p->buf)) {
			const uint8_t *data;
			uint64_t offset;
			size_t len;

			if (!channel_output_ok(c->base->channel))
				return;
			output_buffer_piece(&p->buf, p->resend_next, &data, &len, &offset);
			len = MIN(len, (size_t)OUTPUT_READ_BYTES);
			if (len > 0 && send_frame(c, p->stream, offset, data, len) < 0)
				return;
			p->resend_next = offset + len;
		}
	}
	c->behind = false;
}

/* Behind from offset on in p's stream (and from its total in the other one: nothing of it
 * waits), unless already behind; then as far as the link takes it. */
static void child_fall_behind(struct child_pipe *p, uint64_t offset)
{
	struct child *c = p->child;

	if (!c->behind) {
		for (int i = 0; i < 2; i++)
			c->out[i].resend_next = output_buffer_total(&c->out[i].buf);
		p->resend_next = offset;
		c->behind = true;
	}
	child_catch_up(c);
}

void child_send_snapshot(struct child *c)
{
	if (c->base->ops->output)
		return; /* a PTY's owner replays its own */
	c->out[0].resend_next = c->out[1].resend_next = 0;
	c->behind = true;
	child_catch_up(c);
}

void child_base_output_room(struct child_base *b)
{
	for (struct child *c = b->children; c && channel_output_ok(b->channel); c = c->next)
		if (c->behind && c->watch)
			child_catch_up(c);
}

size_t child_output_kept(const struct child *c)
{
	return c->out[0].buf.head_len + c->out[0].buf.tail_len + c->out[1].buf.head_len +
	       c->out[1].buf.tail_len;
}

static int put_stream(struct buf *b, struct output_buffer *o, uint16_t tag_head, bool with_data)
{
	const uint8_t *head = NULL, *tail = NULL;
	size_t head_len = 0, tail_len = 0;
	uint64_t offset;
	int k;

	if (with_data) {
		output_buffer_head(o, &head, &head_len);
		output_buffer_tail(o, &tail, &tail_len, &offset);
	}
	/* TAG_*_HEAD, TAG_*_TAIL and TAG_*_BYTES are consecutive for both streams. */
	k = frame_put_bytes(b, tag_head, head, head_len);
	if (k >= 0)
		k = frame_put_bytes(b, tag_head + 1, tail, tail_len);
	if (k >= 0)
		k = frame_put_u64(b, tag_head + 2, output_buffer_total(o));
	return k;
}

int child_put_output(struct child *c, struct buf *b, bool with_data)
{
	int k = put_stream(b, &c->out[0].buf, TAG_STDOUT_HEAD, with_data);

	if (k >= 0)
		k = put_stream(b, &c->out[1].buf, TAG_STDERR_HEAD, with_data);
	return k;
}

static void pipe_keep(struct child_pipe *p, const uint8_t *data, size_t n)
{
	struct child *c = p->child;
	uint64_t offset = output_buffer_total(&p->buf);

	output_buffer_append(&p->buf, data, n);
	/* in order: live while the link has room, else after what the child is behind with (n is
	 * one read, so one frame) */
	if (c->watch && channel_connected(c->base->channel) &&
	    (c->behind || !channel_output_ok(c->base->channel) ||
	     send_frame(c, p->stream, offset, data, n) < 0))
		child_fall_behind(p, offset);
	if (c->base->ops->kept)
		c->base->ops->kept(c);
}

static int on_hold(struct event_source *s, uint64_t now, void *userdata);

/* A watched run writing faster than the controller takes it (the link over CHANNEL_MAX_UNSENT,
 * or the run behind with what it keeps): the pipe is left unread for a moment, so the command
 * waits in write() as it would for any slower reader and the controller (a moment descheduled,
 * on a busy machine) catches up with nothing lost. Never longer than HOLD_MAX_USEC in a row: a
 * controller that stopped reading cannot stop the run; past that the bytes are read and kept
 * in the run's head and tail, and go to the controller as the link takes them, after what was
 * waiting; those that left the tail before their turn are a gap the controller sees. Nobody
 * watching: never held. */
static bool pipe_hold(struct child_pipe *p)
{
	struct child *c = p->child;
	struct channel *ch = c->base->channel;
	uint64_t now;

	if (!c->watch || c->base->ops->output || !channel_connected(ch) ||
	    (channel_output_ok(ch) && !c->behind)) {
		p->held_since = 0;
		return false;
	}
	now = now_usec();
	if (p->held_since == 0)
		p->held_since = now;
	if (now - p->held_since >= HOLD_MAX_USEC)
		return false;
	if (!p->hold &&
	    event_add_timer(c->base->loop, &p->hold, now + HOLD_RETRY_USEC, on_hold, p) < 0)
		return false;
	if (event_source_set_time(p->hold, now + HOLD_RETRY_USEC) < 0)
		return false;
	/* out of the loop, not just without EPOLLIN: a writer gone would report EPOLLHUP on
	 * every iteration */
	event_source_free(p->io);
	p->io = NULL;
	return true;
}

static void pipe_read(struct child_pipe *p)
{
	struct child *c = p->child;
	size_t size = c->base->ops->output ? PTY_READ_BYTES : sizeof read_chunk;
	uint8_t *chunk = read_chunk;
	ssize_t n;

	if (pipe_hold(p))
		return;

	do
		n = read(p->fd, chunk, size);
	while (n < 0 && errno == EINTR);
	if (n < 0 && errno == EAGAIN)
		return;
	if (n > 0 && (size_t)n > read_chunk_used)
		read_chunk_used = (size_t)n;
	if (n <= 0) { /* a PTY says EIO once no process has it open any more */
		close_source(&p->io, &p->fd);
		child_maybe_finish(c);
		return;
	}
	if (c->base->ops->output) {
		c->base->ops->output(c, chunk, (size_t)n);
		return;
	}
	/* Most commands write little: only one that has written a kernel pipe's worth gets the
	 * larger pipe (two fcntl calls saved per exec, and no pipe pages charged for nothing). */
	if (!p->grown) {
		p->read_bytes += (uint64_t)n;
		if (p->read_bytes >= OUTPUT_PIPE_GROW_AFTER) {
			output_pipe_grow(p->fd);
			p->grown = true;
		}
	}
	pipe_keep(p, chunk, (size_t)n);
}

static int on_output(struct event_source *s, int fd, uint32_t revents, void *userdata)
{
	struct child_pipe *p = userdata;
	struct child *c = p->child;

	if ((revents & EPOLLOUT) && c->base->ops->writable)
		c->base->ops->writable(c);
	if (p->fd >= 0 && (revents & (EPOLLIN | EPOLLHUP | EPOLLERR)))
		pipe_read(p);
	return 0;
}

static int on_hold(struct event_source *s, uint64_t now, void *userdata)
{
	struct child_pipe *p = userdata;

	if (p->fd < 0 || p->io)
		return 0;
	if (event_add_io(p->child->base->loop, &p->io, p->fd, EPOLLIN, on_output, p) < 0) {
		/* cannot watch it any more: as at EOF, so that the run still ends */
		close_source(&p->io, &p->fd);
		child_maybe_finish(p->child);
		return 0;
	}
	pipe_read(p);
	return 0;
}

static int on_drain_timeout(struct event_source *s, uint64_t now, void *userdata)
{
	struct child *c = userdata;
	char msg[128];

	snprintf(msg, sizeof msg, "output still open after the %s exited, closing it",
		 c->base->ops->what);
	log_warn(msg, c->base->ops->kind, c->name, NULL);
	outputs_close(c);
	child_maybe_finish(c);
	return 0;
}

/* ---- start --------------------------------------------------------------------------------- */

/* Reads the child's verdict: a spawn_error, or EOF once exec closed the CLOEXEC pipe. */
static void errpipe_read(struct child *c)
{
	struct spawn_error e;
	char msg[128];
	int n = spawn_errpipe_read(c->errpipe_fd, &e);

	if (n == -EAGAIN)
		return;
	close_source(&c->errpipe_io, &c->errpipe_fd);
	if (n != 0) {
		c->base->ops->started(c);
		return;
	}
	fail_reason(c, spawn_error_reason(&e, c->cwd, c->path));
	snprintf(msg, sizeof msg, "%s failed to start", c->base->ops->what);
	log_info(msg, c->base->ops->kind, c->name, "reason", c->reason ? c->reason : "", NULL);
}

static int on_errpipe(struct event_source *s, int fd, uint32_t revents, void *userdata)
{
	struct child *c = userdata;

	errpipe_read(c);
	child_maybe_finish(c);
	return 0;
}

static int child_cgroup_create(struct child *c)
{
	struct child_base *b = c->base;
	char name[32];
	int k;

	snprintf(name, sizeof name, "%s-%" PRIu64, b->ops->cgroup_prefix, ++b->next_cgroup);
	k = spawn_cgroup_new(b->cgroup, name, &c->cg);
	if (k < 0)
		fail_reason(c, spawn_reason("cgroup", name, -k));
	return k;
}

static void close_pair(int p[2])
{
	for (int i = 0; i < 2; i++)
		if (p[i] >= 0) {
			close(p[i]);
			p[i] = -1;
		}
}

/* /dev/null for the stdin of commands without one: opened once, kept (CLOEXEC; the child
 * gets it through dup2). */
static int devnull_fd = -1;

static int devnull(void)
{
	if (devnull_fd < 0)
		devnull_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	return devnull_fd < 0 ? -errno : devnull_fd;
}

/* [0] stdin, [1] stdout, [2] stderr, [3] the error pipe. Without a PTY, stdin is a pipe when
 * the command has one, else the kept /dev/null (p[0][0] then left -1, nothing to close: see
 * stdin_of()); with a PTY, only the error pipe. */
static int open_pipes(int p[4][2], const struct child_cmd *cmd)
{
	if (pipe2(p[3], O_CLOEXEC) < 0)
		return -errno;
	if (cmd->pty)
		return 0;
	if (pipe2(p[1], O_CLOEXEC) < 0 || pipe2(p[2], O_CLOEXEC) < 0)
		return -errno;
	if (cmd->has_stdin)
		return pipe2(p[0], O_CLOEXEC) < 0 ? -errno : 0;
	int fd = devnull();

	return fd < 0 ? fd : 0;
}

static int stdin_of(int p[4][2], const struct child_cmd *cmd)
{
	return cmd->has_stdin ? p[0][0] : devnull_fd;
}

static int fork_with(struct child *c, const struct child_cmd *cmd, char **envp)
{
	int p[4][2] = { { -1, -1 }, { -1, -1 }, { -1, -1 }, { -1, -1 } };
	struct child_base *b = c->base;
	struct spawn_child s = {
		.cg = c->cg,
		.set_user = b->set_user,
		.uid = b->uid,
		.gid = b->gid,
		.cwd = cmd->cwd,
		.command = cmd->command,
		.envp = envp,
		.session = cmd->pty,
		.path = cmd->path,
		.argv = cmd->argv,
	};
	int k = open_pipes(p, cmd);

	if (k < 0) {
		fail_reason(c, spawn_reason("pipe", NULL, -k));
		goto out;
	}
	for (int i = 0; i < 3; i++)
		s.stdio[i] = cmd->pty ? cmd->pty_slave : i == 0 ? stdin_of(p, cmd) : p[i][1];
	s.errpipe = p[3][1];
	k = spawn_fork(&s, &c->pid);
	if (k < 0) {
		fail_reason(c, spawn_reason("fork", NULL, -k));
		goto out;
	}
	c->errpipe_fd = TAKE_FD(p[3][0]);
	if (!cmd->pty) { /* with a PTY, out[0] is its master already */
		c->stdin_fd = TAKE_FD(p[0][1]);
		c->out[0].fd = TAKE_FD(p[1][0]);
		c->out[1].fd = TAKE_FD(p[2][0]);
	}
out:
	for (int i = 0; i < 4; i++)
		close_pair(p[i]);
	return k;
}

/* A pipe end we made has no status flag to keep: one fcntl instead of a read and a write. */
static int pipe_set_nonblock(int fd)
{
	return fcntl(fd, F_SETFL, O_NONBLOCK) < 0 ? -errno : 0;
}

/* The parent's ends, non-blocking, into the loop. The child's ends stay blocking. */
static int watch_fds(struct child *c, bool pty)
{
	int k = 0;

	if (pipe_set_nonblock(c->errpipe_fd) < 0 ||
	    (c->stdin_fd >= 0 && pipe_set_nonblock(c->stdin_fd) < 0))
		return -errno;
	for (int i = 0; i < 2 && k >= 0; i++) {
		struct child_pipe *p = &c->out[i];

		if (p->fd < 0)
			continue;
		if ((pty ? fd_set_nonblock(p->fd, true) : pipe_set_nonblock(p->fd)) < 0)
			return -errno;
		k = event_add_io(c->base->loop, &p->io, p->fd, EPOLLIN, on_output, p);
	}
	if (k >= 0)
		k = event_add_io(c->base->loop, &c->errpipe_io, c->errpipe_fd, EPOLLIN, on_errpipe,
				 c);
	return k;
}

static int spawn_with_env(struct child *c, const struct child_cmd *cmd)
{
	struct child_base *b = c->base;
	_cleanup_free_ char **envp = NULL;
	_cleanup_free_ char *pwd = NULL;

	if (spawn_build_env(b->env, b->n_env, b->home_entry, cmd->cwd, cmd->env, cmd->n_env, &envp,
			    &pwd) < 0) {
		fail_reason(c, spawn_reason("environment", NULL, ENOMEM));
		return -ENOMEM;
	}
	return fork_with(c, cmd, envp);
}

int child_start(struct child *c, const struct child_cmd *cmd)
{
	int k;

	c->cwd = cmd->cwd;
	c->path = cmd->path;
	if (cmd->pty)
		c->out[0].fd = cmd->pty_master;
	k = c->base->cgroup ? child_cgroup_create(c) : 0;
	if (k >= 0)
		k = spawn_with_env(c, cmd);
	if (k < 0) {
		child_fail_start(c, NULL);
		return k;
	}
	k = watch_fds(c, cmd->pty);
	if (k < 0) {
		/* Unwatchable: stop it; the reaper and child_maybe_finish() take it from here. */
		fail_reason(c, spawn_reason("event loop", NULL, -k));
		(void)kill(c->pid, SIGKILL);
		close_source(&c->errpipe_io, &c->errpipe_fd);
		outputs_close(c);
		if (c->stdin_fd >= 0)
			close(c->stdin_fd);
		c->stdin_fd = -1;
	}
	return 0;
}

/* ---- the end ------------------------------------------------------------------------------- */

void child_kill(struct child *c)
{
	char msg[64];
	int k;

	if (c->pid <= 0)
		return;
	if (c->cg) {
		k = cgroup_kill(c->cg);
		if (k < 0) {
			snprintf(msg, sizeof msg, "cannot kill %s cgroup", c->base->ops->kind);
			log_warn(msg, c->base->ops->kind, c->name, "error", strerror(-k), NULL);
		}
	} else
		(void)kill(-c->pid, SIGKILL);
	/* The main process may not have joined its cgroup or process group yet; it is ours and
	 * not reaped, so its pid cannot have been reused. */
	if (!c->exited)
		(void)kill(c->pid, SIGKILL);
}

void child_signal(struct child *c, int sig)
{
	int n = 0;

	if (c->cg)
		n = spawn_cgroup_signal(c->cg, sig);
	else if (c->pid > 0 && kill(-c->pid, sig) == 0)
		n = 1;
	if (n <= 0 && c->pid > 0)
		(void)kill(c->pid, sig);
}

bool child_main_exited(const struct child *c)
{
	siginfo_t si = { 0 };

	if (c->exited)
		return true;
	if (waitid(P_PID, (id_t)c->pid, &si, WEXITED | WNOHANG | WNOWAIT) < 0)
		return errno == ECHILD;
	return si.si_pid == c->pid;
}

/* Nothing of the tree is left: its cgroup empty, or without one its process group. */
static bool child_gone(const struct child *c)
{
	if (c->cg)
		return cgroup_is_empty(c->cg) != 0;
	return !(c->pid > 0 && (kill(-c->pid, 0) == 0 || errno != ESRCH));
}

static bool base_gone(const struct child_base *b)
{
	for (const struct child *c = b->children; c; c = c->next)
		if (!child_gone(c))
			return false;
	return spawn_cgroup_release_empty();
}

void child_base_shutdown(struct child_base *b, uint64_t usec)
{
	uint64_t deadline = now_usec() + usec;
	char msg[64];

	for (;;) {
		/* Reap here: the loop is not running any more. */
		while (waitpid(-1, NULL, WNOHANG) > 0)
			;
		if (base_gone(b) || now_usec() >= deadline)
			break;
		(void)nanosleep(&(struct timespec){ .tv_nsec = 10 * 1000 * 1000 }, NULL);
	}
	snprintf(msg, sizeof msg, "cannot remove %s cgroup", b->ops->kind);
	for (struct child *c = b->children; c; c = c->next)
		if (c->cg && cgroup_remove(c->cg) < 0)
			log_warn(msg, b->ops->kind, c->name, NULL);
	spawn_cgroup_release_remove();
}

void child_exited(struct child *c, int status)
{
	c->exited = true;
	c->wait_status = status;
	if (c->errpipe_fd >= 0)
		errpipe_read(c);
	if (c->base->ops->exited)
		c->base->ops->exited(c);
	/* The main process is gone: whatever it left behind goes too, so the output reaches EOF. */
	c->cg_empty = c->cg && cgroup_is_empty(c->cg) == 1;
	if (!c->cg_empty)
		child_kill(c);
	if ((c->out[0].fd >= 0 || c->out[1].fd >= 0) &&
	    event_add_timer(c->base->loop, &c->drain_timer, now_usec() + DRAIN_USEC,
			    on_drain_timeout, c) < 0)
		outputs_close(c);
	child_maybe_finish(c);
}

enum run_status child_status(const struct child *c)
{
	if (c->failed_start)
		return RUN_FAILED_TO_START;
	return WIFSIGNALED(c->wait_status) ? RUN_KILLED : RUN_EXITED;
}

int child_exit_code(const struct child *c)
{
	return c->exited && !c->failed_start && WIFEXITED(c->wait_status) ?
		       WEXITSTATUS(c->wait_status) :
		       -1;
}

int child_put_exit(const struct child *c, struct buf *b)
{
	if (!c->exited || c->failed_start)
		return 0;
	if (WIFEXITED(c->wait_status))
		return frame_put_u64(b, TAG_EXIT_CODE, (uint64_t)WEXITSTATUS(c->wait_status));
	if (WIFSIGNALED(c->wait_status))
		return frame_put_u64(b, TAG_SIGNAL, (uint64_t)WTERMSIG(c->wait_status));
	return 0;
}
