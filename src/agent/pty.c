/* SPDX-License-Identifier: MIT */
/* Terminals (pty.h, docs/agent-protocol.md "Terminals"): PTY sessions, their scrollback, input,
 * resize, force-close through their cgroup, and their exit reports. */
#include "agent/pty.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "agent/spawn.h"
#include "basic/cleanup.h"
#include "basic/log.h"
#include "basic/util.h"
#include "proto/agent-proto.h"

#define READ_CHUNK (64 * 1024)
#define DRAIN_USEC 1000000ull
#define REMOVE_RETRY_USEC 20000ull
#define REMOVE_TRIES 100
#define PASSWD_MAX (4u * 1024 * 1024)

struct term {
	struct term_manager *m;
	struct term *next;
	char *id;
	char *command; /* what runs: the command, or the login shell's path */
	bool login_shell;
	char *cwd;
	struct cgroup *cg;
	pid_t pid;
	int master;
	struct event_source *io;
	uint32_t events;
	int errpipe_fd;
	struct event_source *errpipe_io;
	struct pty_ring ring;
	uint8_t *in; /* input not yet written to the PTY */
	size_t in_len;
	uint64_t in_dropped;
	bool watch;
	bool exited;
	int wait_status;
	bool forced;
	bool failed;
	char *reason;
	bool opened_sent;
	struct event_source *timer; /* output drain after exit, then cgroup removal */
	unsigned remove_tries;
	uint64_t started_at;
};

/* An ended terminal whose TERM_EXIT the channel holds until ACK. */
struct term_ended {
	struct term_ended *next;
	char *id;
};

struct term_manager {
	struct event_loop *loop;
	struct channel *channel;
	struct cgroup *cgroup;
	char **env;
	size_t n_env;
	char *home_entry;
	char *workdir;
	bool set_user;
	uid_t uid;
	gid_t gid;
	struct term *terms;
	size_t n_terms;
	struct term_ended *ended;
	uint64_t next_cgroup;
};

/* The parsed TERM_OPEN. */
struct term_request {
	char *id;
	char *command;
	char *cwd;
	char **env;
	size_t n_env;
	uint64_t cols, rows, scrollback;
	bool has_cols, has_rows;
};

static void request_done(struct term_request *q)
{
	free(q->id);
	free(q->command);
	free(q->cwd);
	for (size_t i = 0; i < q->n_env; i++)
		free(q->env[i]);
	free(q->env);
}

/* ---- parsing ------------------------------------------------------------------------------ */

static bool term_id_valid(const char *s)
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
	int r;

	if (*ret)
		return -EBADMSG; /* repeated */
	r = frame_val_strdup(val, len, PROTO_MAX_ID, &s);
	if (r < 0)
		return r;
	if (!term_id_valid(s)) {
		free(s);
		return -EBADMSG;
	}
	*ret = s;
	return 0;
}

static int read_size(const uint8_t *val, size_t len, uint64_t *ret, bool *seen)
{
	int r;

	if (*seen)
		return -EBADMSG;
	r = frame_val_u64(val, len, ret);
	if (r < 0)
		return r;
	if (*ret == 0 || *ret > PROTO_MAX_TERM_SIZE)
		return -EBADMSG;
	*seen = true;
	return 0;
}

static int request_add_env(struct term_request *q, const uint8_t *val, size_t len)
{
	return spawn_env_append(&q->env, &q->n_env, val, len);
}

static int request_field(struct term_request *q, uint16_t tag, const uint8_t *val, size_t len)
{
	switch (tag) {
	case TAG_TERM_ID:
		return read_id(val, len, &q->id);
	case TAG_COMMAND:
		return q->command ? -EBADMSG :
				    frame_val_strdup(val, len, PROTO_MAX_COMMAND, &q->command);
	case TAG_CWD:
		return q->cwd ? -EBADMSG : frame_val_strdup(val, len, PROTO_MAX_PATH, &q->cwd);
	case TAG_ENV:
		return request_add_env(q, val, len);
	case TAG_COLS:
		return read_size(val, len, &q->cols, &q->has_cols);
	case TAG_ROWS:
		return read_size(val, len, &q->rows, &q->has_rows);
	case TAG_SCROLLBACK_BYTES:
		return frame_val_u64(val, len, &q->scrollback);
	default:
		return -EBADMSG;
	}
}

static int request_parse(const struct frame *f, struct term_request *q)
{
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
	if (!q->id || !q->has_cols || !q->has_rows)
		return -EBADMSG;
	if ((q->command && !q->command[0]) || (q->cwd && q->cwd[0] != '/'))
		return -EBADMSG;
	if (q->scrollback == 0)
		q->scrollback = PTY_DEFAULT_SCROLLBACK;
	if (q->scrollback > PROTO_MAX_SCROLLBACK)
		return -E2BIG;
	return 0;
}

/* The small messages: TERM_ID and some of DATA, COLS, ROWS, WATCH, REQUEST. */
struct term_small {
	char *id;
	const uint8_t *data;
	size_t data_len;
	bool has_data;
	uint64_t cols, rows, watch, request;
	bool has_cols, has_rows, has_watch, has_request;
};

static int small_u64(const uint8_t *val, size_t len, uint64_t *ret, bool *seen)
{
	if (*seen)
		return -EBADMSG;
	*seen = true;
	return frame_val_u64(val, len, ret);
}

static int small_field(struct term_small *s, uint16_t tag, const uint8_t *val, size_t len)
{
	switch (tag) {
	case TAG_TERM_ID:
		return read_id(val, len, &s->id);
	case TAG_DATA:
		if (s->has_data || len > PROTO_MAX_TERM_INPUT)
			return -EBADMSG;
		s->data = val;
		s->data_len = len;
		s->has_data = true;
		return 0;
	case TAG_COLS:
		return read_size(val, len, &s->cols, &s->has_cols);
	case TAG_ROWS:
		return read_size(val, len, &s->rows, &s->has_rows);
	case TAG_WATCH:
		return small_u64(val, len, &s->watch, &s->has_watch);
	case TAG_REQUEST:
		return small_u64(val, len, &s->request, &s->has_request);
	default:
		return -EBADMSG;
	}
}

static int small_parse(const struct frame *f, struct term_small *s)
{
	struct frame_iter it;
	const uint8_t *val;
	uint16_t tag;
	size_t len;
	int r;

	frame_iter_init(&it, f);
	while ((r = frame_iter_next(&it, &tag, &val, &len)) > 0) {
		r = small_field(s, tag, val, len);
		if (r < 0)
			return r;
	}
	if (r < 0)
		return r;
	return s->id ? 0 : -EBADMSG;
}

/* ---- reporting ---------------------------------------------------------------------------- */

static void send_opened(struct term *t)
{
	struct buf *b;
	size_t start;
	int k;

	if (channel_begin(t->m->channel, MSG_TERM_OPENED, &b, &start) < 0)
		return;
	k = frame_put_str(b, TAG_TERM_ID, t->id);
	if (k >= 0)
		k = frame_put_u64(b, TAG_PID, (uint64_t)t->pid);
	if (k >= 0)
		k = frame_put_u64(b, TAG_STARTED_AT, t->started_at);
	if (k >= 0)
		k = frame_put_str(b, TAG_COMMAND, t->command);
	(void)channel_end(t->m->channel, start, k);
}

/* TERM_OUTPUT in frames of at most READ_CHUNK; each is dropped while the queue is over its
 * cap (the controller sees the offset jump as a gap). */
static void send_output(struct term *t, uint64_t offset, const uint8_t *p, size_t n)
{
	while (n > 0) {
		size_t len = MIN(n, (size_t)READ_CHUNK);
		struct buf *b;
		size_t start;
		int k;

		if (!channel_output_ok(t->m->channel) ||
		    channel_begin(t->m->channel, MSG_TERM_OUTPUT, &b, &start) < 0)
			return;
		k = frame_put_str(b, TAG_TERM_ID, t->id);
		if (k >= 0)
			k = frame_put_u64(b, TAG_OFFSET, offset);
		if (k >= 0)
			k = frame_put_bytes(b, TAG_DATA, p, len);
		(void)channel_end(t->m->channel, start, k);
		offset += len;
		p += len;
		n -= len;
	}
}

static int send_replay(struct term *t, uint64_t request)
{
	_cleanup_free_ uint8_t *data = malloc(MAX(t->ring.len, (size_t)1));
	uint64_t offset;
	size_t n, start;
	struct buf *b;
	int k;

	if (!data)
		return -ENOMEM;
	n = pty_ring_read(&t->ring, 0, data, t->ring.len, &offset);
	k = channel_begin(t->m->channel, MSG_TERM_REPLAY, &b, &start);
	if (k < 0)
		return k;
	k = frame_put_str(b, TAG_TERM_ID, t->id);
	if (k >= 0)
		k = frame_put_u64(b, TAG_REQUEST, request);
	if (k >= 0)
		k = frame_put_u64(b, TAG_OFFSET, offset);
	if (k >= 0)
		k = frame_put_bytes(b, TAG_DATA, data, n);
	return channel_end(t->m->channel, start, k);
}

static int put_status(struct buf *b, const struct term *t)
{
	enum run_status status = t->failed		     ? RUN_FAILED_TO_START :
				 WIFSIGNALED(t->wait_status) ? RUN_KILLED :
							       RUN_EXITED;
	int k = frame_put_str(b, TAG_TERM_ID, t->id);

	if (k >= 0)
		k = frame_put_u64(b, TAG_STATUS, status);
	if (k >= 0 && status == RUN_EXITED)
		k = frame_put_u64(b, TAG_EXIT_CODE, (uint64_t)WEXITSTATUS(t->wait_status));
	if (k >= 0 && status == RUN_KILLED)
		k = frame_put_u64(b, TAG_SIGNAL, (uint64_t)WTERMSIG(t->wait_status));
	if (k >= 0 && t->forced)
		k = frame_put_u64(b, TAG_FORCED, 1);
	if (k >= 0 && status == RUN_FAILED_TO_START)
		k = frame_put_str(b, TAG_REASON, t->reason ? t->reason : "failed to start");
	return k;
}

static int remember_ended(struct term_manager *m, const char *id)
{
	struct term_ended *e = calloc(1, sizeof *e);

	if (!e || !(e->id = strdup(id))) {
		free(e);
		return -ENOMEM;
	}
	e->next = m->ended;
	m->ended = e;
	return 0;
}

static void report_exit(struct term *t)
{
	struct channel *c = t->m->channel;
	uint64_t seq = channel_next_seq(c);
	struct buf b = { 0 };
	size_t start;
	int k;

	k = frame_begin(&b, &start, MSG_TERM_EXIT, seq);
	if (k >= 0)
		k = put_status(&b, t);
	if (k >= 0)
		k = frame_put_u64(&b, TAG_STARTED_AT, t->started_at);
	if (k >= 0)
		k = frame_put_u64(&b, TAG_ENDED_AT, realtime_usec());
	if (k >= 0)
		k = frame_put_u64(&b, TAG_OFFSET, t->ring.total);
	if (k >= 0)
		k = frame_end(&b, start);
	if (k >= 0)
		k = remember_ended(t->m, t->id);
	if (k >= 0)
		k = channel_submit_held(c, seq, MSG_TERM_EXIT, t->id, &b);
	if (k < 0)
		log_error("cannot record terminal exit", "terminal", t->id, "error", strerror(-k),
			  NULL);
	buf_free(&b);
	log_info("terminal ended", "terminal", t->id, "reason", t->reason ? t->reason : "", NULL);
}

/* ---- terminal lifecycle ------------------------------------------------------------------- */

static void close_source(struct event_source **s, int *fd)
{
	event_source_free(*s);
	*s = NULL;
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

static void term_free(struct term *t)
{
	struct term_manager *m = t->m;

	for (struct term **p = &m->terms; *p; p = &(*p)->next)
		if (*p == t) {
			*p = t->next;
			m->n_terms--;
			break;
		}
	close_source(&t->io, &t->master);
	close_source(&t->errpipe_io, &t->errpipe_fd);
	event_source_free(t->timer);
	pty_ring_done(&t->ring);
	cgroup_free(t->cg);
	free(t->in);
	free(t->reason);
	free(t->cwd);
	free(t->command);
	free(t->id);
	free(t);
}

static int on_timer(struct event_source *s, uint64_t now, void *userdata);

static bool term_arm_timer(struct term *t, uint64_t when)
{
	if (t->timer)
		return event_source_set_time(t->timer, when) >= 0;
	return event_add_timer(t->m->loop, &t->timer, when, on_timer, t) >= 0;
}

/* The terminal's cgroup is removed once its killed processes have left (retried from the
 * timer, never blocking); then TERM_EXIT goes out and the terminal is forgotten. */
static void term_maybe_finish(struct term *t)
{
	int k;

	if (!t->exited || t->errpipe_fd >= 0 || t->master >= 0)
		return;
	if (t->cg) {
		k = cgroup_remove(t->cg);
		if (k == -EBUSY && ++t->remove_tries < REMOVE_TRIES) {
			if (t->remove_tries % 10 == 0)
				(void)cgroup_kill(t->cg);
			if (term_arm_timer(t, now_usec() + REMOVE_RETRY_USEC))
				return;
		}
		if (k < 0)
			log_warn("cannot remove terminal cgroup", "terminal", t->id, "error",
				 strerror(-k), NULL);
	}
	report_exit(t);
	term_free(t);
}

static int on_timer(struct event_source *s, uint64_t now, void *userdata)
{
	struct term *t = userdata;

	if (t->master >= 0) {
		log_warn("terminal output still open after its process exited, closing it",
			 "terminal", t->id, NULL);
		close_source(&t->io, &t->master);
	}
	term_maybe_finish(t);
	return 0;
}

static void set_reason(struct term *t, char *s)
{
	t->failed = true;
	if (!s)
		return;
	free(t->reason);
	t->reason = s;
}

static void errpipe_read(struct term *t)
{
	struct spawn_error e;
	int n = spawn_errpipe_read(t->errpipe_fd, &e);

	if (n == -EAGAIN)
		return;
	close_source(&t->errpipe_io, &t->errpipe_fd);
	if (n == 0) {
		set_reason(t, e.stage == SPAWN_STAGE_EXEC && t->login_shell ?
				      spawn_reason("exec", t->command, e.err) :
				      spawn_error_reason(&e, t->cwd));
		log_info("terminal failed to start", "terminal", t->id, "reason",
			 t->reason ? t->reason : "", NULL);
		return;
	}
	t->opened_sent = true;
	send_opened(t);
}

static int on_errpipe(struct event_source *s, int fd, uint32_t revents, void *userdata)
{
	struct term *t = userdata;

	errpipe_read(t);
	term_maybe_finish(t);
	return 0;
}

static void term_set_events(struct term *t)
{
	uint32_t events = EPOLLIN | (t->in_len > 0 ? EPOLLOUT : 0);

	if (t->io && events != t->events && event_source_set_io_events(t->io, events) >= 0)
		t->events = events;
}

static void input_write(struct term *t)
{
	while (t->in_len > 0 && t->master >= 0) {
		ssize_t n = write(t->master, t->in, t->in_len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			break;
		if (n < 0) { /* EIO: nobody reads the other side any more */
			t->in_len = 0;
			break;
		}
		memmove(t->in, t->in + n, t->in_len - (size_t)n);
		t->in_len -= (size_t)n;
	}
	term_set_events(t);
}

static void output_read(struct term *t)
{
	static uint8_t chunk[READ_CHUNK];
	uint64_t offset;
	ssize_t n;

	do
		n = read(t->master, chunk, sizeof chunk);
	while (n < 0 && errno == EINTR);
	if (n < 0 && errno == EAGAIN)
		return;
	if (n <= 0) { /* EIO: no process has the terminal open any more */
		close_source(&t->io, &t->master);
		term_maybe_finish(t);
		return;
	}
	offset = t->ring.total;
	pty_ring_append(&t->ring, chunk, (size_t)n);
	if (t->watch)
		send_output(t, offset, chunk, (size_t)n);
}

static int on_master(struct event_source *s, int fd, uint32_t revents, void *userdata)
{
	struct term *t = userdata;

	if (revents & EPOLLOUT)
		input_write(t);
	if (t->master >= 0 && (revents & (EPOLLIN | EPOLLHUP | EPOLLERR)))
		output_read(t);
	return 0;
}

/* Kills every process of the terminal: its cgroup, or without one its session. */
static void term_kill_tree(struct term *t)
{
	int k;

	if (t->pid <= 0)
		return;
	if (t->cg) {
		k = cgroup_kill(t->cg);
		if (k < 0)
			log_warn("cannot kill terminal cgroup", "terminal", t->id, "error",
				 strerror(-k), NULL);
	} else
		(void)kill(-t->pid, SIGKILL);
	/* Not reaped yet, so the pid is still ours even if it has not joined its group. */
	if (!t->exited)
		(void)kill(t->pid, SIGKILL);
}

void term_manager_child_exited(struct term_manager *m, pid_t pid, int status)
{
	struct term *t;

	for (t = m->terms; t; t = t->next)
		if (t->pid == pid && !t->exited)
			break;
	if (!t)
		return;
	t->exited = true;
	t->wait_status = status;
	if (t->errpipe_fd >= 0)
		errpipe_read(t);
	/* The session is over: what it left behind goes too, so the PTY reaches EOF. */
	if (!t->cg || cgroup_is_empty(t->cg) != 1)
		term_kill_tree(t);
	if (t->master >= 0 && !term_arm_timer(t, now_usec() + DRAIN_USEC))
		close_source(&t->io, &t->master);
	term_maybe_finish(t);
}

/* ---- starting ----------------------------------------------------------------------------- */

/* nologin and false: an account kept from interactive logins (a system user such as nobody,
 * what a host workspace's --host-user often is) still gets a shell in a terminal we open. */
static bool shell_refuses(const char *shell)
{
	const char *base = strrchr(shell, '/') + 1;
	return strcmp(base, "nologin") == 0 || strcmp(base, "false") == 0;
}

char *pty_login_shell(const char *passwd_path, uid_t uid)
{
	_cleanup_free_ char *s = NULL;
	char *save = NULL;
	size_t len;

	if (read_file(passwd_path, PASSWD_MAX, &s, &len) >= 0) {
		for (char *l = strtok_r(s, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
			char *f[7] = { 0 }, *p = l;
			uint64_t u;
			size_t i;

			for (i = 0; i < 7 && p; i++) {
				f[i] = p;
				p = strchr(p, ':');
				if (p)
					*p++ = '\0';
			}
			if (i < 7 || parse_u64(f[2], UINT32_MAX, &u) < 0 || u != (uint64_t)uid)
				continue;
			if (f[6][0] == '/' && access(f[6], X_OK) == 0 && !shell_refuses(f[6]))
				return strdup(f[6]);
			break;
		}
	}
	return strdup(SPAWN_SHELL);
}

static int pty_open(int *ret_master, int *ret_slave)
{
	_cleanup_close_ int master = -1;
	int slave;
	char name[64];

	master = open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC | O_NONBLOCK);
	if (master < 0)
		return -errno;
	if (grantpt(master) < 0 || unlockpt(master) < 0)
		return -errno;
	slave = ioctl(master, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (slave < 0) {
		if (ptsname_r(master, name, sizeof name) != 0)
			return -errno;
		slave = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC);
		if (slave < 0)
			return -errno;
	}
	*ret_master = TAKE_FD(master);
	*ret_slave = slave;
	return 0;
}

static int term_resize(struct term *t, uint64_t cols, uint64_t rows)
{
	struct winsize w = { .ws_col = (unsigned short)cols, .ws_row = (unsigned short)rows };

	if (t->master < 0)
		return 0;
	return ioctl(t->master, TIOCSWINSZ, &w) < 0 ? -errno : 0;
}

/* TERM, SHELL (login shell only), then the request's ENV: a later entry wins. */
static int extra_env(struct term *t, const struct term_request *q, char **shell_entry, char ***ret)
{
	char **v = calloc(q->n_env + 3, sizeof *v);
	size_t n = 0;

	if (!v)
		return -ENOMEM;
	v[n++] = (char *)PTY_DEFAULT_TERM;
	if (!q->command) {
		if (asprintf(shell_entry, "SHELL=%s", t->command) < 0) {
			free(v);
			return -ENOMEM;
		}
		v[n++] = *shell_entry;
	}
	for (size_t i = 0; i < q->n_env; i++)
		v[n++] = q->env[i];
	*ret = v;
	return (int)n;
}

static int term_fork(struct term *t, const struct term_request *q, char **envp, int slave)
{
	int ep[2] = { -1, -1 };
	const char *base = strrchr(t->command, '/');
	_cleanup_free_ char *argv0 = NULL;
	char *argv[2] = { NULL, NULL };
	struct spawn_child c = {
		.cg = t->cg,
		.set_user = t->m->set_user,
		.uid = t->m->uid,
		.gid = t->m->gid,
		.stdio = { slave, slave, slave },
		.cwd = t->cwd,
		.command = t->command,
		.envp = envp,
		.session = true,
	};
	int k;

	/* A login shell: argv[0] is "-" and its name. */
	if (!q->command) {
		if (asprintf(&argv0, "-%s", base ? base + 1 : t->command) < 0)
			return -ENOMEM;
		argv[0] = argv0;
		c.path = t->command;
		c.argv = argv;
	}
	if (pipe2(ep, O_CLOEXEC) < 0)
		return -errno;
	c.errpipe = ep[1];
	k = spawn_fork(&c, &t->pid);
	close(ep[1]);
	if (k < 0) {
		close(ep[0]);
		return k;
	}
	t->errpipe_fd = ep[0];
	return 0;
}

static int term_watch_fds(struct term *t)
{
	int k;

	if (fd_set_nonblock(t->errpipe_fd, true) < 0)
		return -errno;
	k = event_add_io(t->m->loop, &t->io, t->master, EPOLLIN, on_master, t);
	t->events = EPOLLIN;
	if (k >= 0)
		k = event_add_io(t->m->loop, &t->errpipe_io, t->errpipe_fd, EPOLLIN, on_errpipe, t);
	return k;
}

/* Owns the PTY's slave end only for the fork. */
static int term_spawn(struct term *t, const struct term_request *q)
{
	_cleanup_free_ char **envp = NULL, **extra = NULL;
	_cleanup_free_ char *pwd = NULL, *shell_entry = NULL;
	_cleanup_close_ int slave = -1;
	int k, n_extra;

	k = pty_open(&t->master, &slave);
	if (k < 0)
		return set_reason(t, spawn_reason("open a PTY", NULL, -k)), k;
	if (t->m->set_user && fchown(slave, t->m->uid, t->m->gid) < 0)
		log_debug("cannot hand the PTY to the user", "terminal", t->id, NULL);
	(void)term_resize(t, q->cols, q->rows);
	n_extra = extra_env(t, q, &shell_entry, &extra);
	if (n_extra < 0 || spawn_build_env(t->m->env, t->m->n_env, t->m->home_entry, t->cwd, extra,
					   (size_t)n_extra, &envp, &pwd) < 0)
		return set_reason(t, spawn_reason("environment", NULL, ENOMEM)), -ENOMEM;
	k = term_fork(t, q, envp, slave);
	if (k < 0)
		return set_reason(t, spawn_reason("fork", NULL, -k)), k;
	k = term_watch_fds(t);
	if (k < 0) {
		set_reason(t, spawn_reason("event loop", NULL, -k));
		(void)kill(t->pid, SIGKILL);
		close_source(&t->errpipe_io, &t->errpipe_fd);
		close_source(&t->io, &t->master);
	}
	return 0;
}

static int term_cgroup_create(struct term *t)
{
	char name[32];
	int k;

	snprintf(name, sizeof name, "t-%" PRIu64, ++t->m->next_cgroup);
	k = spawn_cgroup_new(t->m->cgroup, name, &t->cg);
	if (k < 0)
		set_reason(t, spawn_reason("cgroup", name, -k));
	return k;
}

static void term_start(struct term *t, const struct term_request *q)
{
	if (t->m->cgroup && term_cgroup_create(t) < 0)
		goto fail;
	if (term_spawn(t, q) < 0)
		goto fail;
	log_info("terminal started", "terminal", t->id, "command", t->command, NULL);
	return;
fail:
	close_source(&t->io, &t->master);
	if (t->pid <= 0)
		t->exited = true; /* nothing to wait for */
	term_maybe_finish(t);
}

static int term_new(struct term_manager *m, struct term_request *q, struct term **ret)
{
	struct term *t = calloc(1, sizeof *t);
	uid_t uid = m->set_user ? m->uid : getuid();

	if (!t)
		return -ENOMEM;
	*t = (struct term){ .m = m,
			    .pid = -1,
			    .master = -1,
			    .errpipe_fd = -1,
			    .started_at = realtime_usec() };
	t->cwd = q->cwd ? TAKE_PTR(q->cwd) : strdup(m->workdir);
	t->command = q->command ? strdup(q->command) : pty_login_shell("/etc/passwd", uid);
	t->login_shell = !q->command;
	if (!t->cwd || !t->command || pty_ring_init(&t->ring, q->scrollback) < 0) {
		free(t->cwd);
		free(t->command);
		free(t);
		return -ENOMEM;
	}
	t->id = TAKE_PTR(q->id);
	t->next = m->terms;
	m->terms = t;
	m->n_terms++;
	*ret = t;
	return 0;
}

static struct term *term_find(struct term_manager *m, const char *id)
{
	for (struct term *t = m->terms; t; t = t->next)
		if (strcmp(t->id, id) == 0)
			return t;
	return NULL;
}

static bool term_known(struct term_manager *m, const char *id)
{
	return term_find(m, id) || channel_held_pending(m->channel, MSG_TERM_EXIT, id);
}

static int send_error(struct term_manager *m, const char *reason)
{
	struct buf *b;
	size_t start;
	int r = channel_begin(m->channel, MSG_ERROR, &b, &start);

	if (r < 0)
		return r;
	return channel_end(m->channel, start, frame_put_str(b, TAG_REASON, reason));
}

/* A TERM_OPEN refused before anything started: a TERM_EXIT failed_to_start all the same, so
 * the controller's record ends. */
static void refuse(struct term_manager *m, struct term_request *q, const char *reason)
{
	struct term t = { .m = m,
			  .id = q->id,
			  .failed = true,
			  .reason = (char *)reason,
			  .started_at = realtime_usec() };

	log_warn("terminal refused", "terminal", q->id, "reason", reason, NULL);
	report_exit(&t);
}

static int handle_open(struct term_manager *m, const struct frame *f)
{
	struct term_request q = { 0 };
	struct term *t;
	int k = request_parse(f, &q);

	if (k < 0)
		goto out;
	if (term_known(m, q.id))
		(void)send_error(m, "duplicate terminal id");
	else if (m->n_terms >= PROTO_MAX_TERMINALS)
		refuse(m, &q, "too many terminals (16 per workspace)");
	else if (term_new(m, &q, &t) < 0)
		refuse(m, &q, "out of memory");
	else
		term_start(t, &q);
out:
	request_done(&q);
	return k;
}

static void handle_input(struct term *t, const uint8_t *data, size_t n)
{
	size_t room = PTY_MAX_INPUT_QUEUE - t->in_len;

	if (t->master < 0 || t->exited)
		return;
	if (n > room) {
		t->in_dropped += n - room;
		log_debug("terminal input queue full, input dropped", "terminal", t->id, NULL);
		n = room;
	}
	if (!t->in && !(t->in = malloc(PTY_MAX_INPUT_QUEUE)))
		return;
	memcpy(t->in + t->in_len, data, n);
	t->in_len += n;
	input_write(t);
}

static int handle_small(struct term_manager *m, const struct frame *f)
{
	struct term_small s = { 0 };
	struct term *t;
	int k = small_parse(f, &s);

	if (k < 0)
		goto out;
	t = term_find(m, s.id);
	if (f->type == MSG_TERM_INPUT && !s.has_data)
		k = -EBADMSG;
	else if (f->type == MSG_TERM_RESIZE && (!s.has_cols || !s.has_rows))
		k = -EBADMSG;
	else if (f->type == MSG_TERM_ATTACH && (!s.has_watch || s.watch > 1))
		k = -EBADMSG;
	if (k < 0 || !t)
		goto out; /* an ended terminal: its TERM_EXIT tells the controller */
	switch (f->type) {
	case MSG_TERM_INPUT:
		handle_input(t, s.data, s.data_len);
		break;
	case MSG_TERM_RESIZE:
		(void)term_resize(t, s.cols, s.rows);
		break;
	case MSG_TERM_ATTACH:
		t->watch = s.watch;
		if (s.watch)
			(void)send_replay(t, s.request);
		break;
	case MSG_TERM_CLOSE:
		log_info("terminal force-closed", "terminal", t->id, NULL);
		t->forced = true;
		term_kill_tree(t);
		break;
	}
out:
	free(s.id);
	return k;
}

int term_manager_message(struct term_manager *m, const struct frame *f)
{
	switch (f->type) {
	case MSG_TERM_OPEN:
		return handle_open(m, f);
	case MSG_TERM_INPUT:
	case MSG_TERM_RESIZE:
	case MSG_TERM_ATTACH:
	case MSG_TERM_CLOSE:
		return handle_small(m, f);
	default:
		return -EBADMSG;
	}
}

int term_manager_hello_fields(struct term_manager *m, struct buf *b)
{
	int k = 0;

	for (struct term *t = m->terms; t && k >= 0; t = t->next)
		k = frame_put_str(b, TAG_TERM_ID, t->id);
	for (struct term_ended **p = &m->ended; *p && k >= 0;) {
		struct term_ended *e = *p;

		if (!channel_held_pending(m->channel, MSG_TERM_EXIT, e->id)) {
			*p = e->next; /* acknowledged: forget it */
			free(e->id);
			free(e);
			continue;
		}
		k = frame_put_str(b, TAG_TERM_ID, e->id);
		p = &e->next;
	}
	return k;
}

void term_manager_disconnected(struct term_manager *m)
{
	for (struct term *t = m->terms; t; t = t->next)
		t->watch = false;
}

void term_manager_kill_all(struct term_manager *m)
{
	for (struct term *t = m->terms; t; t = t->next)
		term_kill_tree(t);
}

/* ---- the manager -------------------------------------------------------------------------- */

int term_manager_new(struct event_loop *loop, struct channel *channel,
		     const struct run_config *config, struct term_manager **ret)
{
	struct term_manager *m = calloc(1, sizeof *m);

	if (!m)
		return -ENOMEM;
	*m = (struct term_manager){
		.loop = loop,
		.channel = channel,
		.cgroup = (struct cgroup *)config->cgroup,
		.env = (char **)config->env,
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

void term_manager_free(struct term_manager *m)
{
	if (!m)
		return;
	while (m->terms)
		term_free(m->terms);
	while (m->ended) {
		struct term_ended *e = m->ended;

		m->ended = e->next;
		free(e->id);
		free(e);
	}
	free(m->home_entry);
	free(m->workdir);
	free(m);
}
