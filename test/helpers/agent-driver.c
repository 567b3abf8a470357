/* SPDX-License-Identifier: MIT */
/* agent-driver: starts a station-agent the way the controller does (listening socket, start
 * block with the secret and the --env entries in a memfd) and speaks the agent protocol from a line script, for tests without a controller.
 *
 *   agent-driver [--cgroup CG] [--env KEY=VALUE]... AGENT_BINARY < script
 *
 * Script lines (words split on spaces; '#' starts a comment line):
 *   connect                     new connection + HELLO; prints the HELLO_OK
 *   connect-bad                 new connection with a wrong secret
 *   start [id=ID] [timeout=MS] [head=N] [tail=N] [cwd=DIR] [watch=0|1] [env=K=V]...
 *         [stdin=TEXT] -- COMMAND...
 *   cancel ID | watch ID 0|1 | ack SEQ | shutdown | disconnect | sleep MS
 *   wait TYPE [ID]              prints frames until one of TYPE (hello_ok started output done
 *                               error) for run ID arrives (30 s, else exits 1)
 *   expect-closed               waits until the agent closes the connection (else exits 1)
 * Frames print as one line: `done seq=1 run=r1 status=exited exit_code=3 ...`; data prints
 * escaped when short, else as its length and SHA-256. At the end of the script the agent gets
 * SIGTERM and the driver prints `agent exit=N`. */

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "basic/util.h"
#include "proto/agent-proto.h"
#include "proto/agent-start.h"
#include "proto/frame.h"

#define WAIT_MS 30000
#define SHOW_MAX 200
#define ELEMS(x) (sizeof(x) / sizeof((x)[0]))

static char dir[] = "/tmp/agent-driver-XXXXXX";
static char sock_path[108];
static uint8_t secret[32];
static int conn = -1;
static struct buf in;

static const char *const type_names[] = {
	[MSG_HELLO_OK] = "hello_ok", [MSG_RUN_STARTED] = "started", [MSG_RUN_OUTPUT] = "output",
	[MSG_RUN_DONE] = "done",     [MSG_ERROR] = "error",
};

static const char *const tag_names[] = {
	[TAG_VERSION] = "version",
	[TAG_PID] = "pid",
	[TAG_RUN_ID] = "run",
	[TAG_STARTED_AT] = "started_at",
	[TAG_ENDED_AT] = "ended_at",
	[TAG_STREAM] = "stream",
	[TAG_OFFSET] = "offset",
	[TAG_DATA] = "data",
	[TAG_STATUS] = "status",
	[TAG_EXIT_CODE] = "exit_code",
	[TAG_SIGNAL] = "signal",
	[TAG_OOM_KILLED] = "oom_killed",
	[TAG_REASON] = "reason",
	[TAG_STDOUT_HEAD] = "stdout_head",
	[TAG_STDOUT_TAIL] = "stdout_tail",
	[TAG_STDOUT_BYTES] = "stdout_bytes",
	[TAG_STDERR_HEAD] = "stderr_head",
	[TAG_STDERR_TAIL] = "stderr_tail",
	[TAG_STDERR_BYTES] = "stderr_bytes",
	[TAG_CPU_USEC] = "cpu_usec",
	[TAG_PEAK_MEMORY] = "peak_memory",
};

static bool tag_is_bytes(uint16_t tag)
{
	return tag == TAG_RUN_ID || tag == TAG_DATA || tag == TAG_REASON ||
	       (tag >= TAG_STDOUT_HEAD && tag <= TAG_STDERR_TAIL && tag != TAG_STDOUT_BYTES);
}

static _Noreturn void die(const char *what)
{
	fprintf(stdout, "error %s\n", what);
	exit(1);
}

static void print_bytes(const uint8_t *p, size_t n)
{
	char hex[65];

	if (n > SHOW_MAX) {
		sha256_hex(p, n, hex);
		printf("<%zu bytes sha256:%s>", n, hex);
		return;
	}
	for (size_t i = 0; i < n; i++)
		if (p[i] > ' ' && p[i] < 127 && p[i] != '\\')
			putchar(p[i]);
		else
			printf("\\x%02x", p[i]);
}

static void print_frame(const struct frame *f)
{
	struct frame_iter it;
	const uint8_t *val;
	uint16_t tag;
	size_t len;
	uint64_t v;

	printf("%s seq=%llu",
	       f->type < ELEMS(type_names) && type_names[f->type] ? type_names[f->type] : "?",
	       (unsigned long long)f->seq);
	frame_iter_init(&it, f);
	while (frame_iter_next(&it, &tag, &val, &len) > 0) {
		printf(" %s=", tag < ELEMS(tag_names) && tag_names[tag] ? tag_names[tag] : "?");
		if (tag == TAG_STATUS && frame_val_u64(val, len, &v) == 0)
			printf("%s", run_status_to_string(v) ? run_status_to_string(v) : "?");
		else if (!tag_is_bytes(tag) && frame_val_u64(val, len, &v) == 0)
			printf("%llu", (unsigned long long)v);
		else
			print_bytes(val, len);
	}
	putchar('\n');
	fflush(stdout);
}

static void send_frame(struct buf *b)
{
	if (conn < 0 || write_all(conn, b->data, b->len) < 0)
		die("send failed");
	buf_free(b);
}

/* Next frame within ms: 1 with *f (valid until the next call), 0 on timeout, -1 when closed. */
static int recv_frame(struct frame *f, int ms)
{
	static size_t consumed;

	buf_consume(&in, consumed);
	consumed = 0;
	for (;;) {
		long n = frame_parse(in.data, in.len, PROTO_MAX_PAYLOAD, f);
		struct pollfd p = { .fd = conn, .events = POLLIN };
		ssize_t got;

		if (n < 0)
			die("bad frame from agent");
		if (n > 0) {
			consumed = (size_t)n;
			return 1;
		}
		if (poll(&p, 1, ms) <= 0)
			return 0;
		if (buf_reserve(&in, 1 << 16) < 0)
			die("out of memory");
		got = read(conn, in.data + in.len, 1 << 16);
		if (got <= 0)
			return -1;
		in.len += (size_t)got;
	}
}

static bool frame_has_run(const struct frame *f, const char *id)
{
	struct frame_iter it;
	const uint8_t *val;
	uint16_t tag;
	size_t len;

	frame_iter_init(&it, f);
	while (frame_iter_next(&it, &tag, &val, &len) > 0)
		if (tag == TAG_RUN_ID && len == strlen(id) && memcmp(val, id, len) == 0)
			return true;
	return false;
}

static void cmd_wait(const char *type, const char *id)
{
	struct frame f;
	int r;

	while ((r = recv_frame(&f, WAIT_MS)) > 0) {
		print_frame(&f);
		if (f.type < ELEMS(type_names) && type_names[f.type] &&
		    strcmp(type_names[f.type], type) == 0 && (!id || frame_has_run(&f, id)))
			return;
	}
	die(r == 0 ? "timeout" : "connection closed");
}

static void cmd_connect(const uint8_t *key)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct buf b = { 0 };
	size_t start;

	if (conn >= 0)
		close(conn);
	buf_free(&in);
	conn = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	memcpy(sa.sun_path, sock_path, sizeof sock_path);
	if (conn < 0 || connect(conn, (struct sockaddr *)&sa, sizeof sa) < 0)
		die("connect failed");
	if (frame_begin(&b, &start, MSG_HELLO, 0) < 0 ||
	    frame_put_bytes(&b, TAG_SECRET, key, sizeof secret) < 0 ||
	    frame_put_u64(&b, TAG_VERSION, PROTO_VERSION) < 0 || frame_end(&b, start) < 0)
		die("out of memory");
	send_frame(&b);
	if (key == secret)
		cmd_wait("hello_ok", NULL);
}

static void cmd_expect_closed(void)
{
	struct frame f;
	int r;

	while ((r = recv_frame(&f, WAIT_MS)) > 0)
		print_frame(&f);
	if (r == 0)
		die("connection still open");
	printf("closed\n");
	fflush(stdout);
}

static int put_start_word(struct buf *b, char *w, bool *have)
{
	static const struct {
		const char *key;
		uint16_t tag;
		bool u64;
	} keys[] = {
		{ "id=", TAG_RUN_ID, false },	      { "cwd=", TAG_CWD, false },
		{ "env=", TAG_ENV, false },	      { "stdin=", TAG_STDIN, false },
		{ "timeout=", TAG_TIMEOUT_MS, true }, { "head=", TAG_HEAD_BYTES, true },
		{ "tail=", TAG_TAIL_BYTES, true },    { "watch=", TAG_WATCH, true },
	};

	for (size_t i = 0; i < ELEMS(keys); i++) {
		size_t n = strlen(keys[i].key);

		if (strncmp(w, keys[i].key, n) != 0)
			continue;
		have[keys[i].tag] = true;
		if (keys[i].u64)
			return frame_put_u64(b, keys[i].tag, strtoull(w + n, NULL, 0));
		return frame_put_str(b, keys[i].tag, w + n);
	}
	return -EINVAL;
}

/* Defaults: id=r, timeout=0, head=tail=4096, cwd=/tmp. */
static void cmd_start(char *args)
{
	char *cmd = strstr(args, "-- "), *save = NULL;
	bool have[32] = { false };
	struct buf b = { 0 };
	size_t start;

	if (!cmd)
		die("start needs -- COMMAND");
	*cmd = 0;
	if (frame_begin(&b, &start, MSG_RUN_START, 0) < 0)
		die("out of memory");
	for (char *w = strtok_r(args, " ", &save); w; w = strtok_r(NULL, " ", &save))
		if (put_start_word(&b, w, have) < 0)
			die("bad start argument");
	if ((!have[TAG_RUN_ID] && frame_put_str(&b, TAG_RUN_ID, "r") < 0) ||
	    (!have[TAG_CWD] && frame_put_str(&b, TAG_CWD, "/tmp") < 0) ||
	    (!have[TAG_TIMEOUT_MS] && frame_put_u64(&b, TAG_TIMEOUT_MS, 0) < 0) ||
	    (!have[TAG_HEAD_BYTES] && frame_put_u64(&b, TAG_HEAD_BYTES, 4096) < 0) ||
	    (!have[TAG_TAIL_BYTES] && frame_put_u64(&b, TAG_TAIL_BYTES, 4096) < 0) ||
	    frame_put_str(&b, TAG_COMMAND, cmd + 3) < 0 || frame_end(&b, start) < 0)
		die("out of memory");
	send_frame(&b);
}

static void cmd_simple(uint16_t type, uint64_t seq, const char *id, const char *watch)
{
	struct buf b = { 0 };
	size_t start;

	if (frame_begin(&b, &start, type, seq) < 0 ||
	    (id && frame_put_str(&b, TAG_RUN_ID, id) < 0) ||
	    (watch && frame_put_u64(&b, TAG_WATCH, strtoull(watch, NULL, 0)) < 0) ||
	    frame_end(&b, start) < 0)
		die("out of memory");
	send_frame(&b);
}

static void run_line(char *line)
{
	char *save = NULL, *verb = strtok_r(line, " ", &save), *a1, *a2;

	if (!verb || verb[0] == '#')
		return;
	if (strcmp(verb, "start") == 0) {
		cmd_start(save ? save : (char *)"");
		return;
	}
	a1 = strtok_r(NULL, " ", &save);
	a2 = a1 ? strtok_r(NULL, " ", &save) : NULL;
	if (strcmp(verb, "connect") == 0)
		cmd_connect(secret);
	else if (strcmp(verb, "connect-bad") == 0)
		cmd_connect((const uint8_t *)"wrong secret, wrong secret, wron");
	else if (strcmp(verb, "wait") == 0 && a1)
		cmd_wait(a1, a2);
	else if (strcmp(verb, "expect-closed") == 0)
		cmd_expect_closed();
	else if (strcmp(verb, "cancel") == 0 && a1)
		cmd_simple(MSG_RUN_CANCEL, 0, a1, NULL);
	else if (strcmp(verb, "watch") == 0 && a1 && a2)
		cmd_simple(MSG_RUN_WATCH, 0, a1, a2);
	else if (strcmp(verb, "ack") == 0 && a1)
		cmd_simple(MSG_ACK, strtoull(a1, NULL, 0), NULL, NULL);
	else if (strcmp(verb, "shutdown") == 0)
		cmd_simple(MSG_SHUTDOWN, 0, NULL, NULL);
	else if (strcmp(verb, "disconnect") == 0) {
		close(conn);
		conn = -1;
	} else if (strcmp(verb, "sleep") == 0 && a1)
		usleep((useconds_t)strtoul(a1, NULL, 0) * 1000);
	else
		die("bad script line");
}

/* argv: AGENT --listen-fd _ --secret-fd _ ...; the two fd values are filled in here. env: the
 * workspace environment, for the start block. */
static pid_t start_agent(char **agent_argv, char **env)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	static char lfd[16], sfd[16];
	struct buf block = { 0 };
	int ls, sp;
	pid_t pid;

	if (!mkdtemp(dir) || random_bytes(secret, sizeof secret) < 0)
		die("setup failed");
	snprintf(sock_path, sizeof sock_path, "%s/agent.sock", dir);
	memcpy(sa.sun_path, sock_path, sizeof sock_path);
	ls = socket(AF_UNIX, SOCK_STREAM, 0);
	sp = memfd_create("agent-start", 0);
	if (ls < 0 || bind(ls, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(ls, 16) < 0 ||
	    sp < 0 || agent_start_encode(&block, secret, sizeof secret, NULL, env) < 0 ||
	    write_all(sp, block.data, block.len) < 0 || lseek(sp, 0, SEEK_SET) < 0)
		die("setup failed");
	buf_free(&block);
	snprintf(lfd, sizeof lfd, "%d", ls);
	snprintf(sfd, sizeof sfd, "%d", sp);
	agent_argv[2] = lfd;
	agent_argv[4] = sfd;
	pid = fork();
	if (pid == 0) {
		execv(agent_argv[0], agent_argv);
		_exit(127);
	}
	close(ls);
	close(sp);
	return pid;
}

int main(int argc, char **argv)
{
	static const char *const fixed[] = { "--workdir", "/tmp",	  "--home",
					     "/root",	  "--log-format", "text" };
	char **agent_argv = calloc((size_t)argc + 16, sizeof(char *));
	char **env = calloc((size_t)argc + 1, sizeof(char *));
	static char line[PROTO_MAX_COMMAND + 1024];
	int n = 0, n_env = 0, status;
	pid_t pid;

	if (argc < 2 || !agent_argv || !env) {
		fprintf(stderr,
			"usage: agent-driver [--cgroup CG] [--env K=V]... AGENT < script\n");
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	agent_argv[n++] = argv[argc - 1];
	agent_argv[n++] = (char *)"--listen-fd";
	agent_argv[n++] = NULL;
	agent_argv[n++] = (char *)"--secret-fd";
	agent_argv[n++] = NULL;
	for (int i = 1; i < argc - 1; i++) {
		if (strcmp(argv[i], "--env") == 0 && i + 1 < argc - 1)
			env[n_env++] = argv[++i];
		else
			agent_argv[n++] = argv[i];
	}
	for (size_t i = 0; i < ELEMS(fixed); i++)
		agent_argv[n++] = (char *)fixed[i];
	pid = start_agent(agent_argv, env);
	while (fgets(line, sizeof line, stdin)) {
		line[strcspn(line, "\n")] = 0;
		run_line(line);
	}
	kill(pid, SIGTERM);
	if (waitpid(pid, &status, 0) < 0)
		die("waitpid failed");
	unlink(sock_path);
	rmdir(dir);
	printf("agent exit=%d\n", WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
	return 0;
}
