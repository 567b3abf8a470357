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

#define REMOVE_RETRY_USEC 20000ull
#define REMOVE_TRIES 100
#define PASSWD_MAX (4u * 1024 * 1024)

struct term {
	struct term_manager *m;
	char *id;
	char *command; /* what runs: the command, or the login shell's path */
	char *cwd;
	struct child child; /* its output is the PTY master */
	uint32_t events;
	struct pty_ring ring;
	uint8_t *in; /* input not yet written to the PTY */
	size_t in_len;
	uint64_t in_dropped;
	bool forced;
	struct event_source *remove_timer;
	unsigned remove_tries;
};

/* An ended terminal whose TERM_EXIT the channel holds until ACK. */
struct term_ended {
	struct term_ended *next;
	char *id;
};

struct term_manager {
	struct child_base base; /* first (child_base_new()); its children are the terminals */
	struct term_ended *ended;
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
	spawn_env_free(q->env, q->n_env);
}

/* ---- parsing ------------------------------------------------------------------------------ */

static int read_id(const uint8_t *val, size_t len, char **ret)
{
	return *ret ? -EBADMSG /* repeated */ : proto_id_read(val, len, ret);
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

static int request_field(void *userdata, uint16_t tag, const uint8_t *val, size_t len)
{
	struct term_request *q = userdata;

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
	int r = frame_for_each_field(f, request_field, q);

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

static int small_field(void *userdata, uint16_t tag, const uint8_t *val, size_t len)
{
	struct term_small *s = userdata;

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
	int r = frame_for_each_field(f, small_field, s);

	if (r < 0)
		return r;
	return s->id ? 0 : -EBADMSG;
}

/* ---- reporting ---------------------------------------------------------------------------- */

static void send_opened(struct child *c)
{
	struct term *t = container_of(c, struct term, child);
	struct buf *b;
	size_t start;
	int k;

	if (channel_begin(t->m->base.channel, MSG_TERM_OPENED, &b, &start) < 0)
		return;
	k = frame_put_str(b, TAG_TERM_ID, t->id);
	if (k >= 0)
		k = frame_put_u64(b, TAG_PID, (uint64_t)c->pid);
	if (k >= 0)
		k = frame_put_u64(b, TAG_STARTED_AT, c->started_at);
	if (k >= 0)
		k = frame_put_str(b, TAG_COMMAND, t->command);
	(void)channel_end(t->m->base.channel, start, k);
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
	k = channel_begin(t->m->base.channel, MSG_TERM_REPLAY, &b, &start);
	if (k < 0)
		return k;
	k = frame_put_str(b, TAG_TERM_ID, t->id);
	if (k >= 0)
		k = frame_put_u64(b, TAG_REQUEST, request);
	if (k >= 0)
		k = frame_put_u64(b, TAG_OFFSET, offset);
	if (k >= 0)
		k = frame_put_bytes(b, TAG_DATA, data, n);
	return channel_end(t->m->base.channel, start, k);
}

static int put_status(struct buf *b, const struct term *t)
{
	enum run_status status = child_status(&t->child);
	int k = frame_put_str(b, TAG_TERM_ID, t->id);

	if (k >= 0)
		k = frame_put_u64(b, TAG_STATUS, status);
	if (k >= 0)
		k = child_put_exit(&t->child, b);
	if (k >= 0 && t->forced)
		k = frame_put_u64(b, TAG_FORCED, 1);
	if (k >= 0 && status == RUN_FAILED_TO_START)
		k = frame_put_str(b, TAG_REASON, t->child.reason ?: "failed to start");
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
	struct channel *c = t->m->base.channel;
	uint64_t seq = channel_next_seq(c);
	struct buf b = { 0 };
	size_t start;
	int k;

	k = frame_begin(&b, &start, MSG_TERM_EXIT, seq);
	if (k >= 0)
		k = put_status(&b, t);
	if (k >= 0)
		k = frame_put_u64(&b, TAG_STARTED_AT, t->child.started_at);
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
	log_info("terminal ended", "terminal", t->id, "reason", t->child.reason ?: "", NULL);
}

/* ---- terminal lifecycle ------------------------------------------------------------------- */

static void term_free(struct term *t)
{
	child_done(&t->child);
	event_source_free(t->remove_timer);
	pty_ring_done(&t->ring);
	free(t->in);
	free(t->cwd);
	free(t->command);
	free(t->id);
	free(t);
}

static int on_remove_retry(struct event_source *s, uint64_t now, void *userdata);

/* The terminal's cgroup is removed once its killed processes have left (retried from a timer,
 * never blocking); then TERM_EXIT goes out and the terminal is forgotten. */
static void term_remove(struct term *t)
{
	struct cgroup *cg = t->child.cg;
	uint64_t when = now_usec() + REMOVE_RETRY_USEC;
	int k;

	if (cg) {
		k = cgroup_remove(cg);
		if (k == -EBUSY && ++t->remove_tries < REMOVE_TRIES) {
			if (t->remove_tries % 10 == 0)
				(void)cgroup_kill(cg);
			if (t->remove_timer ? event_source_set_time(t->remove_timer, when) >= 0 :
					      event_add_timer(t->m->base.loop, &t->remove_timer,
							      when, on_remove_retry, t) >= 0)
				return;
		}
		if (k < 0)
			log_warn("cannot remove terminal cgroup", "terminal", t->id, "error",
				 strerror(-k), NULL);
	}
	report_exit(t);
	term_free(t);
}

static int on_remove_retry(struct event_source *s, uint64_t now, void *userdata)
{
	term_remove(userdata);
	return 0;
}

static void term_finish(struct child *c)
{
	term_remove(container_of(c, struct term, child));
}

static void term_set_events(struct term *t)
{
	uint32_t events = EPOLLIN | (t->in_len > 0 ? EPOLLOUT : 0);
	struct event_source *io = t->child.out[0].io;

	if (io && events != t->events && event_source_set_io_events(io, events) >= 0)
		t->events = events;
}

static void input_write(struct term *t)
{
	int fd = t->child.out[0].fd;

	while (t->in_len > 0 && fd >= 0) {
		ssize_t n = write(fd, t->in, t->in_len);

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

static void term_writable(struct child *c)
{
	input_write(container_of(c, struct term, child));
}

static void term_output(struct child *c, const uint8_t *p, size_t n)
{
	struct term *t = container_of(c, struct term, child);
	uint64_t offset = t->ring.total;

	pty_ring_append(&t->ring, p, n);
	if (c->watch)
		child_send_output(c, 0, offset, p, n);
}

void term_manager_child_exited(struct term_manager *m, pid_t pid, int status)
{
	struct child *c = child_base_find_pid(&m->base, pid);

	if (c)
		child_exited(c, status);
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

static int pty_resize(int master, uint64_t cols, uint64_t rows)
{
	struct winsize w = { .ws_col = (unsigned short)cols, .ws_row = (unsigned short)rows };

	if (master < 0)
		return 0;
	return ioctl(master, TIOCSWINSZ, &w) < 0 ? -errno : 0;
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

/* The PTY, its size and owner, the environment, then the child; < 0 when nothing was forked. */
static int term_spawn(struct term *t, const struct term_request *q)
{
	_cleanup_free_ char **extra = NULL;
	_cleanup_free_ char *shell_entry = NULL, *argv0 = NULL;
	_cleanup_close_ int slave = -1;
	const char *base = strrchr(t->command, '/');
	char *argv[2] = { NULL, NULL };
	struct child_cmd cmd = { .cwd = t->cwd, .command = t->command, .pty = true };
	int k, n_extra;

	k = pty_open(&cmd.pty_master, &slave);
	if (k < 0)
		return child_fail_start(&t->child, spawn_reason("open a PTY", NULL, -k)), k;
	t->child.out[0].fd = cmd.pty_master; /* the child's from here on */
	cmd.pty_slave = slave;
	if (t->m->base.set_user && fchown(slave, t->m->base.uid, t->m->base.gid) < 0)
		log_debug("cannot hand the PTY to the user", "terminal", t->id, NULL);
	(void)pty_resize(cmd.pty_master, q->cols, q->rows);
	n_extra = extra_env(t, q, &shell_entry, &extra);
	if (n_extra < 0)
		return child_fail_start(&t->child, spawn_reason("environment", NULL, ENOMEM)),
		       -ENOMEM;
	cmd.env = extra;
	cmd.n_env = (size_t)n_extra;
	/* A login shell: argv[0] is "-" and its name. */
	if (!q->command) {
		if (asprintf(&argv0, "-%s", base ? base + 1 : t->command) < 0)
			return child_fail_start(&t->child, spawn_reason("fork", NULL, ENOMEM)),
			       -ENOMEM;
		argv[0] = argv0;
		cmd.path = t->command;
		cmd.argv = argv;
	}
	return child_start(&t->child, &cmd);
}

static void term_start(struct term *t, const struct term_request *q)
{
	if (term_spawn(t, q) < 0) {
		child_maybe_finish(&t->child);
		return;
	}
	log_info("terminal started", "terminal", t->id, "command", t->command, NULL);
}

static int term_new(struct term_manager *m, struct term_request *q, struct term **ret)
{
	struct term *t = calloc(1, sizeof *t);
	uid_t uid = m->base.set_user ? m->base.uid : getuid();

	if (!t)
		return -ENOMEM;
	t->m = m;
	t->events = EPOLLIN;
	t->cwd = q->cwd ? TAKE_PTR(q->cwd) : strdup(m->base.workdir);
	t->command = q->command ? strdup(q->command) : pty_login_shell("/etc/passwd", uid);
	if (!t->cwd || !t->command || pty_ring_init(&t->ring, q->scrollback) < 0 ||
	    child_init(&t->child, &m->base, q->id, 0, 0) < 0) {
		pty_ring_done(&t->ring);
		free(t->cwd);
		free(t->command);
		free(t);
		return -ENOMEM;
	}
	t->id = TAKE_PTR(q->id);
	*ret = t;
	return 0;
}

static struct term *term_find(struct term_manager *m, const char *id)
{
	struct child *c = child_base_find(&m->base, id);

	return c ? container_of(c, struct term, child) : NULL;
}

static bool term_known(struct term_manager *m, const char *id)
{
	return term_find(m, id) || channel_held_pending(m->base.channel, MSG_TERM_EXIT, id);
}

/* A TERM_OPEN refused before anything started: a TERM_EXIT failed_to_start all the same, so
 * the controller's record ends. */
static void refuse(struct term_manager *m, struct term_request *q, const char *reason)
{
	struct term t = { .m = m,
			  .id = q->id,
			  .child = { .failed_start = true,
				     .reason = (char *)reason,
				     .started_at = realtime_usec() } };

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
		(void)channel_send_error(m->base.channel, 0, NULL, "duplicate terminal id");
	else if (m->base.n_children >= PROTO_MAX_TERMINALS)
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

	if (t->child.out[0].fd < 0 || t->child.exited)
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
		(void)pty_resize(t->child.out[0].fd, s.cols, s.rows);
		break;
	case MSG_TERM_ATTACH:
		t->child.watch = s.watch;
		if (s.watch)
			(void)send_replay(t, s.request);
		break;
	case MSG_TERM_CLOSE:
		log_info("terminal force-closed", "terminal", t->id, NULL);
		t->forced = true;
		child_kill(&t->child);
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
	int k = child_base_put_names(&m->base, b);

	for (struct term_ended **p = &m->ended; *p && k >= 0;) {
		struct term_ended *e = *p;

		if (!channel_held_pending(m->base.channel, MSG_TERM_EXIT, e->id)) {
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
	child_base_unwatch(&m->base);
}

void term_manager_kill_all(struct term_manager *m)
{
	child_base_kill(&m->base);
}

/* ---- the manager -------------------------------------------------------------------------- */

static const struct child_ops term_ops = {
	.kind = "terminal",
	.what = "terminal",
	.cgroup_prefix = "t",
	.output_type = MSG_TERM_OUTPUT,
	.name_tag = TAG_TERM_ID,
	.output = term_output,
	.writable = term_writable,
	.started = send_opened,
	.finish = term_finish,
};

int term_manager_new(struct event_loop *loop, struct channel *channel,
		     const struct child_config *config, struct term_manager **ret)
{
	struct term_manager *m = child_base_new(sizeof *m, &term_ops, loop, channel, config);

	if (!m)
		return -ENOMEM;
	*ret = m;
	return 0;
}

void term_manager_free(struct term_manager *m)
{
	if (!m)
		return;
	while (m->base.children)
		term_free(container_of(m->base.children, struct term, child));
	while (m->ended) {
		struct term_ended *e = m->ended;

		m->ended = e->next;
		free(e->id);
		free(e);
	}
	child_base_free(&m->base);
}
