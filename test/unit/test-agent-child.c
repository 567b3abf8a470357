/* SPDX-License-Identifier: MIT */
/* The supervised child without a controller or cgroups: real /bin/sh children in a real loop,
 * reaped by the test the way the agent's reaper does. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/child.h"
#include "basic/cleanup.h"
#include "basic/util.h"

struct fixture {
	struct event_loop *loop;
	struct child_base *base;
	struct child child;
	unsigned started, exited, finished;
};

static struct fixture *fx;

static void on_started(struct child *c)
{
	fx->started++;
}

static void on_exited(struct child *c)
{
	fx->exited++;
}

static void on_finish(struct child *c)
{
	fx->finished++;
}

static const struct child_ops test_ops = {
	.kind = "test",
	.what = "test child",
	.cgroup_prefix = "x",
	.output_type = MSG_RUN_OUTPUT,
	.name_tag = TAG_RUN_ID,
	.started = on_started,
	.exited = on_exited,
	.finish = on_finish,
};

static void setup(void)
{
	static char *const env[] = { (char *)"FROM_BASE=base" };
	const struct child_config config = {
		.env = env,
		.n_env = 1,
		.home = "/tmp",
		.workdir = "/",
	};

	fx = calloc(1, sizeof *fx);
	cr_assert_not_null(fx);
	cr_assert_eq(event_loop_new(&fx->loop), 0);
	fx->base = child_base_new(sizeof *fx->base, &test_ops, fx->loop, NULL, &config);
	cr_assert_not_null(fx->base);
}

static void teardown(void)
{
	child_base_free(fx->base);
	event_loop_free(fx->loop);
	free(fx);
}

/* Runs the loop, reaping like the agent, until the child finished (or 20 s passed). */
static void run_until_finished(void)
{
	uint64_t deadline = now_usec() + 20 * 1000000ull;
	struct child *c;
	int status;
	pid_t pid;

	while (!fx->finished && now_usec() < deadline) {
		(void)event_loop_run_once(fx->loop, 20);
		while ((pid = waitpid(-1, &status, WNOHANG)) > 0)
			if ((c = child_base_find_pid(fx->base, pid)))
				child_exited(c, status);
	}
	cr_assert_eq(fx->finished, 1, "the child finished once");
}

static void start(const char *command, const char *cwd)
{
	const struct child_cmd cmd = { .cwd = cwd, .command = command };

	cr_assert_eq(child_init(&fx->child, fx->base, "c-1", 1024, 1024), 0);
	cr_assert_eq(child_start(&fx->child, &cmd), 0);
}

static void assert_kept(const struct child_pipe *p, const char *want)
{
	const uint8_t *data;
	size_t len;

	output_buffer_head(&p->buf, &data, &len);
	cr_assert_eq(len, strlen(want), "kept %zu bytes, want %zu", len, strlen(want));
	cr_assert_arr_eq(data, want, len);
}

TestSuite(child, .init = setup, .fini = teardown, .timeout = 60);

Test(child, output_exit_code_and_environment)
{
	struct buf b = { 0 };

	start("echo \"$FROM_BASE $HOME $PWD\"; echo err >&2; exit 3", "/tmp");
	cr_assert_eq(fx->base->n_children, 1);
	cr_assert_eq(child_base_find(fx->base, "c-1"), &fx->child);
	run_until_finished();
	cr_assert_eq(fx->started, 1);
	cr_assert_eq(fx->exited, 1);
	cr_assert_not(fx->child.failed_start);
	assert_kept(&fx->child.out[0], "base /tmp /tmp\n");
	assert_kept(&fx->child.out[1], "err\n");
	cr_assert_eq(child_status(&fx->child), RUN_EXITED);
	cr_assert_eq(child_exit_code(&fx->child), 3);
	cr_assert_eq(child_put_exit(&fx->child, &b), 0);
	cr_assert_gt(b.len, 0, "EXIT_CODE put");
	buf_free(&b);
	child_done(&fx->child);
	cr_assert_eq(fx->base->n_children, 0);
	cr_assert_null(child_base_find(fx->base, "c-1"));
}

Test(child, killed_by_a_signal)
{
	start("kill -9 $$", "/");
	run_until_finished();
	cr_assert_eq(child_status(&fx->child), RUN_KILLED);
	cr_assert_eq(WTERMSIG(fx->child.wait_status), SIGKILL);
	cr_assert_eq(child_exit_code(&fx->child), -1);
	child_done(&fx->child);
}

Test(child, a_missing_cwd_is_a_failed_start_with_its_reason)
{
	start("true", "/nonexistent-child-cwd");
	run_until_finished();
	cr_assert_eq(fx->started, 0, "never executed");
	cr_assert(fx->child.failed_start);
	cr_assert_str_eq(fx->child.reason,
			 "cwd \"/nonexistent-child-cwd\": No such file or directory");
	cr_assert_eq(child_status(&fx->child), RUN_FAILED_TO_START);
	cr_assert_eq(child_exit_code(&fx->child), -1);
	child_done(&fx->child);
}

Test(child, stdin_is_dev_null_without_a_pipe)
{
	start("cat; echo done", "/");
	run_until_finished();
	cr_assert_eq(fx->child.stdin_fd, -1);
	assert_kept(&fx->child.out[0], "done\n");
	child_done(&fx->child);
}

/* A process of another session keeps stdout open after the main process exited: the drain
 * timeout closes it and the child finishes all the same. */
Test(child, output_held_open_by_an_escaped_process_is_closed)
{
	const uint8_t *data;
	size_t len;
	char pid[32];

	start("setsid sleep 30 & echo $!", "/");
	run_until_finished();
	cr_assert_eq(fx->child.out[0].fd, -1);
	cr_assert_eq(fx->child.out[1].fd, -1);
	output_buffer_head(&fx->child.out[0].buf, &data, &len);
	cr_assert(len > 0 && len < sizeof pid);
	memcpy(pid, data, len);
	pid[len] = '\0';
	(void)kill(atoi(pid), SIGKILL);
	child_done(&fx->child);
}

/* The main process ignores SIGTERM: child_signal() reaches it, child_kill() ends it. */
Test(child, kill_ends_what_signal_did_not)
{
	start("trap '' TERM; echo ready; while :; do sleep 0.05; done", "/");
	while (output_buffer_total(&fx->child.out[0].buf) == 0)
		(void)event_loop_run_once(fx->loop, 20);
	child_signal(&fx->child, SIGTERM);
	cr_assert_not(child_main_exited(&fx->child));
	child_kill(&fx->child);
	run_until_finished();
	cr_assert_eq(child_status(&fx->child), RUN_KILLED);
	child_done(&fx->child);
}

static char pty_seen[256];
static size_t pty_seen_len;

static void on_pty_output(struct child *c, const uint8_t *p, size_t n)
{
	n = MIN(n, sizeof pty_seen - 1 - pty_seen_len);
	memcpy(pty_seen + pty_seen_len, p, n);
	pty_seen_len += n;
}

/* A PTY's output goes to ops->output, and reading ends at the EIO of a PTY nobody holds. */
Test(child, pty_output_goes_to_the_owner)
{
	struct child_ops ops = test_ops;
	struct child_base *base;
	struct child_cmd cmd = { .cwd = "/", .command = "echo on-the-pty", .pty = true };
	char name[64];
	int slave;

	ops.output = on_pty_output;
	base = child_base_new(sizeof *base, &ops, fx->loop, NULL,
			      &(struct child_config){ .home = "/", .workdir = "/" });
	cr_assert_not_null(base);
	cmd.pty_master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC | O_NONBLOCK);
	cr_assert_geq(cmd.pty_master, 0);
	cr_assert_eq(grantpt(cmd.pty_master), 0);
	cr_assert_eq(unlockpt(cmd.pty_master), 0);
	cr_assert_eq(ptsname_r(cmd.pty_master, name, sizeof name), 0);
	slave = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC);
	cr_assert_geq(slave, 0);
	cmd.pty_slave = slave;
	cr_assert_eq(child_init(&fx->child, base, "t-1", 0, 0), 0);
	cr_assert_eq(child_start(&fx->child, &cmd), 0);
	close(slave);
	child_base_free(fx->base);
	fx->base = base; /* reaped through this one, freed by the fixture */
	run_until_finished();
	cr_assert_eq(fx->started, 1);
	cr_assert_eq(child_status(&fx->child), RUN_EXITED);
	cr_assert_not_null(strstr(pty_seen, "on-the-pty"), "PTY output: %s", pty_seen);
	child_done(&fx->child);
}

/* ---- output to a controller ----------------------------------------------------------------- */

/* A controller's end of the channel: connected and authenticated, it reads only when asked, and
 * checks each output frame against what the child keeps. */
struct peer {
	struct channel *channel;
	int listen_fd, fd;
	struct buf in;
	uint64_t next[2]; /* per stream: the offset the next frame must start at */
};

static int peer_message(struct channel *c, const struct frame *f, void *userdata)
{
	return 0;
}

static void peer_drained(struct channel *c, void *userdata)
{
	child_base_output_room(userdata);
}

static const struct channel_ops peer_ops = { .message = peer_message, .drained = peer_drained };

static void peer_connect(struct peer *p, struct child_base **ret_base)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	static char *const env[] = { (char *)"FROM_BASE=base" };
	const struct child_config config = { .env = env, .n_env = 1, .home = "/", .workdir = "/" };
	socklen_t len;
	struct buf b = { 0 };
	size_t start;

	len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 +
			  (size_t)snprintf(a.sun_path + 1, sizeof a.sun_path - 1,
					   "test-agent-child-%d", (int)getpid()));
	p->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	cr_assert_geq(p->listen_fd, 0);
	cr_assert_eq(bind(p->listen_fd, (struct sockaddr *)&a, len), 0);
	cr_assert_eq(listen(p->listen_fd, 4), 0);
	/* the base is the channel's userdata: made first, its channel set once there is one */
	*ret_base = child_base_new(sizeof **ret_base, &test_ops, fx->loop, NULL, &config);
	cr_assert_not_null(*ret_base);
	cr_assert_eq(channel_new(fx->loop, p->listen_fd, "secret", 6, &peer_ops, *ret_base,
				 &p->channel),
		     0);
	(*ret_base)->channel = p->channel;
	p->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	cr_assert_eq(connect(p->fd, (struct sockaddr *)&a, len), 0);
	cr_assert_eq(frame_begin(&b, &start, MSG_HELLO, 0), 0);
	cr_assert_eq(frame_put_bytes(&b, TAG_SECRET, "secret", 6), 0);
	cr_assert_eq(frame_put_u64(&b, TAG_VERSION, PROTO_VERSION), 0);
	cr_assert_eq(frame_end(&b, start), 0);
	cr_assert_eq(write(p->fd, b.data, b.len), (ssize_t)b.len);
	buf_free(&b);
	for (int i = 0; i < 500 && !channel_output_ok(p->channel); i++)
		(void)event_loop_run_once(fx->loop, 10);
	cr_assert(channel_output_ok(p->channel), "the channel is connected");
}

static void peer_free(struct peer *p)
{
	channel_free(p->channel);
	close(p->fd);
	close(p->listen_fd);
	buf_free(&p->in);
}

/* One RUN_OUTPUT frame: it must start where the stream's last one ended and hold exactly the
 * bytes the child keeps there. */
static void peer_output(struct peer *p, struct child *c, const struct frame *f)
{
	const uint8_t *val, *data = NULL, *kept;
	uint64_t stream = 0, offset = 0, kept_offset;
	struct frame_iter it;
	size_t len, n = 0, kept_len;
	uint16_t tag;

	frame_iter_init(&it, f);
	while (frame_iter_next(&it, &tag, &val, &len) > 0)
		if (tag == TAG_STREAM)
			cr_assert_eq(frame_val_u64(val, len, &stream), 0);
		else if (tag == TAG_OFFSET)
			cr_assert_eq(frame_val_u64(val, len, &offset), 0);
		else if (tag == TAG_DATA) {
			data = val;
			n = len;
		}
	cr_assert(stream == 1 || stream == 2, "stream %llu", (unsigned long long)stream);
	cr_assert_eq(offset, p->next[stream - 1],
		     "stream %llu: a frame at %llu, the previous one ended at %llu",
		     (unsigned long long)stream, (unsigned long long)offset,
		     (unsigned long long)p->next[stream - 1]);
	output_buffer_piece(&c->out[stream - 1].buf, offset, &kept, &kept_len, &kept_offset);
	cr_assert(kept_offset == offset && kept_len >= n && memcmp(kept, data, n) == 0,
		  "stream %llu: the %zu bytes at %llu are the kept ones",
		  (unsigned long long)stream, n, (unsigned long long)offset);
	p->next[stream - 1] = offset + n;
}

/* Reads what the agent sent and runs the loop until both streams arrived up to the child's
 * totals, or 30 s passed. */
static void peer_read_all(struct peer *p, struct child *c)
{
	uint64_t deadline = now_usec() + 30 * 1000000ull;
	uint64_t want[2] = { output_buffer_total(&c->out[0].buf),
			     output_buffer_total(&c->out[1].buf) };
	struct frame f;
	ssize_t n;
	long k;
	int status;
	pid_t pid;

	while ((p->next[0] < want[0] || p->next[1] < want[1]) && now_usec() < deadline) {
		(void)event_loop_run_once(fx->loop, 5);
		while ((pid = waitpid(-1, &status, WNOHANG)) > 0)
			if (pid == c->pid)
				child_exited(c, status);
		cr_assert_eq(buf_reserve(&p->in, 256 * 1024), 0);
		n = read(p->fd, p->in.data + p->in.len, 256 * 1024);
		if (n > 0)
			p->in.len += (size_t)n;
		while ((k = frame_parse(p->in.data, p->in.len, PROTO_MAX_PAYLOAD, &f)) > 0) {
			if (f.type == MSG_RUN_OUTPUT)
				peer_output(p, c, &f);
			buf_consume(&p->in, (size_t)k);
		}
		cr_assert_geq(k, 0, "a valid frame");
		want[0] = output_buffer_total(&c->out[0].buf);
		want[1] = output_buffer_total(&c->out[1].buf);
	}
	cr_assert(p->next[0] == want[0] && p->next[1] == want[1],
		  "stdout arrived up to %llu of %llu, stderr up to %llu of %llu",
		  (unsigned long long)p->next[0], (unsigned long long)want[0],
		  (unsigned long long)p->next[1], (unsigned long long)want[1]);
}

/* A watch of a running child that keeps more than the link's limit (CHANNEL_MAX_UNSENT) sends
 * all of it from offset 0, as the link takes it; output written meanwhile comes after it, in
 * order, and nothing is skipped. */
Test(child, a_watch_sends_everything_kept_then_live_output_in_order)
{
	const struct child_cmd cmd = {
		.cwd = "/",
		.command = "head -c 6000000 /dev/urandom; head -c 1000000 /dev/urandom >&2; "
			   "read x; echo after; echo after >&2",
		.has_stdin = true,
	};
	struct child_base *base;
	struct peer p = { 0 };

	peer_connect(&p, &base);
	cr_assert_eq(child_init(&fx->child, base, "c-1", 4u << 20, 4u << 20), 0);
	cr_assert_eq(child_start(&fx->child, &cmd), 0);
	while (output_buffer_total(&fx->child.out[0].buf) < 6000000 ||
	       output_buffer_total(&fx->child.out[1].buf) < 1000000)
		(void)event_loop_run_once(fx->loop, 20);
	fx->child.watch = true;
	child_send_snapshot(&fx->child);
	cr_assert_eq(write(fx->child.stdin_fd, "\n", 1), 1);
	peer_read_all(&p, &fx->child);
	cr_assert_eq(p.next[0], 6000006);
	cr_assert_eq(p.next[1], 1000006);
	child_kill(&fx->child);
	child_done(&fx->child);
	peer_free(&p);
	child_base_free(base);
}
