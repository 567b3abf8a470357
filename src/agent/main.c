/* SPDX-License-Identifier: MIT */
/* station-agent: runs commands for one workspace (docs/agent-protocol.md). Single-threaded,
 * everything through one epoll loop; can be PID 1 of a container. */

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/channel.h"
#include "agent/credential.h"
#include "agent/files.h"
#include "agent/pty.h"
#include "agent/run.h"
#include "agent/service.h"
#include "agent/spawn.h"
#include "basic/cleanup.h"
#include "basic/log.h"
#include "basic/safe-fs.h"
#include "basic/util.h"
#include "cgroup/cgroup.h"
#include "event/event.h"
#include "proto/agent-proto.h"
#include "proto/agent-start.h"

#define AGENT_LOG_LINES_PER_MINUTE 600
#define AGENT_LOG_MAX_BYTES (64ull << 20)
#define SUN_PATH_MAX sizeof(((struct sockaddr_un *)0)->sun_path)

struct args {
	int listen_fd;
	const char *listen_path; /* --listen: the agent makes the socket (runsc passes no fds) */
	int secret_fd;
	const char *workdir;
	const char *home;
	const char *files_root;
	const char *cgroup;
	const char *credential_socket; /* NULL: none */
	bool set_user;
	uid_t uid;
	gid_t gid;
	enum log_format log_format;
};

struct agent {
	struct event_loop *loop;
	struct event_source *signals[3];
	struct channel *channel;
	struct run_manager *runs;
	struct service_manager *services;
	struct term_manager *terms;
	struct cred_server *creds; /* NULL: no credential socket */
	struct files_manager *files;
};

static int usage_error(const char *what, const char *value)
{
	log_error("bad arguments", "problem", what, "value", value ? value : "", NULL);
	fprintf(stderr,
		"usage: station-agent --listen-fd N | --listen PATH --secret-fd M [--workdir DIR]\n"
		"                     --home DIR [--cgroup v1:/a:/b | v2:/dir]\n"
		"                     [--user UID:GID] [--files-root DIR] [--credential-socket PATH]\n"
		"                     [--log-format json|text]\n"
		"       station-agent credential get|store|erase (git's credential helper; also\n"
		"                     as git-credential-station)\n"
		"--files-root: file sessions stay beneath DIR (a host workspace's HOME); without\n"
		"it they resolve inside the agent's own root (a container).\n"
		"The secret, the environment and the workdir (unless --workdir) come on the\n"
		"--secret-fd, never on the command line (docs/agent-protocol.md).\n");
	return -EINVAL;
}

static int parse_fd(const char *s, int *ret)
{
	uint64_t v;

	if (parse_u64(s, INT32_MAX, &v) < 0 || v < 3)
		return -EINVAL;
	*ret = (int)v;
	return 0;
}

/* "UID:GID", both decimal: the user runs switch to (the image's User, resolved by the
 * controller). */
static int parse_user(struct args *a, const char *s)
{
	char buf[32];
	uint64_t uid, gid;
	const char *colon = strchr(s, ':');

	if (!colon || (size_t)(colon - s) >= sizeof buf)
		return -EINVAL;
	memcpy(buf, s, (size_t)(colon - s));
	buf[colon - s] = 0;
	if (parse_u64(buf, UINT32_MAX - 1, &uid) < 0 ||
	    parse_u64(colon + 1, UINT32_MAX - 1, &gid) < 0)
		return -EINVAL;
	a->set_user = true;
	a->uid = (uid_t)uid;
	a->gid = (gid_t)gid;
	return 0;
}

static int parse_option(struct args *a, int c, const char *v)
{
	switch (c) {
	case 'l':
		return parse_fd(v, &a->listen_fd) < 0 ? usage_error("bad --listen-fd", v) : 0;
	case 'p':
		a->listen_path = v;
		return 0;
	case 's':
		/* 0: the secret comes on stdin (runsc passes no fd beyond stdio) */
		if (strcmp(v, "0") == 0) {
			a->secret_fd = 0;
			return 0;
		}
		return parse_fd(v, &a->secret_fd) < 0 ? usage_error("bad --secret-fd", v) : 0;
	case 'w':
		a->workdir = v;
		return 0;
	case 'h':
		a->home = v;
		return 0;
	case 'c':
		a->cgroup = v;
		return 0;
	case 'r':
		a->files_root = v;
		return 0;
	case 'u':
		return parse_user(a, v) < 0 ? usage_error("bad --user", v) : 0;
	case 'k':
		a->credential_socket = v;
		return 0;
	case 'f':
		if (strcmp(v, "json") == 0)
			a->log_format = LOG_FORMAT_JSON;
		else if (strcmp(v, "text") == 0)
			a->log_format = LOG_FORMAT_TEXT;
		else
			return usage_error("bad --log-format", v);
		return 0;
	default:
		return usage_error("unknown option", NULL);
	}
}

static int parse_args(int argc, char **argv, struct args *a)
{
	static const struct option options[] = {
		{ "listen-fd", required_argument, NULL, 'l' },
		{ "listen", required_argument, NULL, 'p' },
		{ "secret-fd", required_argument, NULL, 's' },
		{ "workdir", required_argument, NULL, 'w' },
		{ "home", required_argument, NULL, 'h' },
		{ "cgroup", required_argument, NULL, 'c' },
		{ "user", required_argument, NULL, 'u' },
		{ "credential-socket", required_argument, NULL, 'k' },
		{ "files-root", required_argument, NULL, 'r' },
		{ "log-format", required_argument, NULL, 'f' },
		{},
	};
	int c, r;

	*a = (struct args){ .listen_fd = -1, .secret_fd = -1, .log_format = LOG_FORMAT_JSON };
	while ((c = getopt_long(argc, argv, "", options, NULL)) != -1) {
		r = parse_option(a, c, optarg);
		if (r < 0)
			return r;
	}
	if (optind < argc)
		return usage_error("unexpected argument", argv[optind]);
	if ((a->listen_fd < 0) == !a->listen_path || a->secret_fd < 0 ||
	    a->listen_fd == a->secret_fd)
		return usage_error("one of --listen-fd and --listen, and a distinct --secret-fd, "
				   "are required",
				   NULL);
	if (a->listen_path && (a->listen_path[0] != '/' || strlen(a->listen_path) >= SUN_PATH_MAX))
		return usage_error("bad --listen", a->listen_path);
	if (a->credential_socket &&
	    (a->credential_socket[0] != '/' || strlen(a->credential_socket) >= SUN_PATH_MAX))
		return usage_error("bad --credential-socket", a->credential_socket);
	if ((a->workdir && a->workdir[0] != '/') || !a->home || a->home[0] != '/' ||
	    (a->files_root && a->files_root[0] != '/'))
		return usage_error("--workdir, --home and --files-root must be absolute paths",
				   NULL);
	return 0;
}

/* Pipes must never land on 0-2, where a child's dup2() would keep them CLOEXEC. */
static void ensure_stdio(void)
{
	for (int fd = 0; fd < 3; fd++)
		if (fcntl(fd, F_GETFD) < 0 && errno == EBADF) {
			int n = open("/dev/null", O_RDWR);

			if (n >= 0 && n != fd) {
				(void)dup2(n, fd);
				close(n);
			}
		}
}

/* The start block (proto/agent-start.h), read to EOF: a sealed memfd or a pipe. */
static int read_start(int fd, struct agent_start *ret)
{
	struct buf b = { 0 };
	int r = 0;

	for (;;) {
		r = buf_reserve(&b, 64 * 1024);
		if (r < 0)
			break;
		ssize_t n = read(fd, b.data + b.len, b.cap - b.len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			r = n < 0 ? -errno : 0;
			break;
		}
		b.len += (size_t)n;
		if (b.len > PROTO_MAX_START_BYTES) {
			r = -E2BIG;
			break;
		}
	}
	if (r >= 0)
		r = agent_start_decode(b.data, b.len, ret);
	if (b.data)
		explicit_bzero(b.data, b.len);
	buf_free(&b);
	return r;
}

/* The workdir from exactly one place; environment names as runs accept them. */
static int check_start(const struct args *args, const struct agent_start *st)
{
	if (!args->workdir == !st->workdir)
		return -EINVAL;
	for (size_t i = 0; i < st->n_env; i++)
		if (!spawn_env_entry_valid(st->env[i]))
			return -EINVAL;
	return 0;
}

/* --listen: the controller connects once it accepts. */
static int listen_path(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0), r = 0;

	if (fd < 0)
		return -errno;
	snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
	(void)unlink(path);
	mode_t old = umask(0177);
	if (bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(fd, 16) < 0)
		r = -errno;
	umask(old);
	if (r < 0) {
		close(fd);
		return r;
	}
	return fd;
}

static int check_listen_fd(int fd)
{
	int on = 0;
	socklen_t l = sizeof on;

	if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &on, &l) < 0)
		return -errno;
	if (!on)
		return -EINVAL;
	return fd_set_cloexec(fd, true);
}

static void agent_shutdown(struct agent *a)
{
	service_manager_kill_all(a->services);
	term_manager_kill_all(a->terms);
	run_manager_shutdown(a->runs);
	service_manager_shutdown(a->services);
	event_loop_exit(a->loop, 0);
}

/* Reaps every zombie, ours and reparented orphans alike; main processes of runs go to their
 * run. */
static int on_sigchld(struct event_source *s, const struct signalfd_siginfo *si, void *userdata)
{
	struct agent *a = userdata;

	for (;;) {
		struct rusage ru;
		int status;
		pid_t pid = wait4(-1, &status, WNOHANG, &ru);

		if (pid < 0 && errno == EINTR)
			continue;
		if (pid <= 0)
			break;
		if (files_manager_child_exited(a->files, pid))
			continue; /* a file worker: nobody else's */
		run_manager_child_exited(a->runs, pid, status, &ru);
		service_manager_child_exited(a->services, pid, status);
		term_manager_child_exited(a->terms, pid, status);
	}
	return 0;
}

/* Whether process pid descends from us: its parent chain reaches us (orphans of our commands
 * are reparented to us, the subreaper). False when it cannot be told (it is gone). */
static bool from_our_tree(pid_t pid)
{
	pid_t self = getpid();

	for (int depth = 0; pid > 1 && depth < 256; depth++) {
		char path[32], buf[512];
		snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			return false;
		ssize_t n = read(fd, buf, sizeof buf - 1);
		close(fd);
		if (n <= 0)
			return false;
		buf[n] = 0;
		/* "pid (comm) state ppid ...": comm may hold anything, the last ')' ends it */
		char *paren = strrchr(buf, ')');
		int ppid;
		if (!paren || sscanf(paren + 1, " %*c %d", &ppid) != 1)
			return false;
		if (ppid == self)
			return true;
		pid = ppid;
	}
	return false;
}

/* A stopping signal counts only from the kernel or from outside the sandbox. A negative si_code
 * (SI_QUEUE, SI_TKILL, SI_MESGQ...) is what rt_sigqueueinfo() lets any process put in, with any
 * si_pid, 0 included: nobody stops us that way. kill() gives SI_USER and the sender's pid in
 * our pid namespace, 0 when it is outside: as a container's PID 1, only 0 (the runtime, the
 * host). On the host (the host adapter) a sender outside our tree counts; our commands run
 * with our rights and could kill us anyway, but a stray `pkill` among them must not stop the
 * workspace. */
static bool stop_signal_allowed(const struct signalfd_siginfo *si)
{
	if (si->ssi_code != SI_USER && si->ssi_code != SI_KERNEL)
		return false;
	if (getpid() == 1)
		return si->ssi_pid == 0;
	return si->ssi_pid == 0 || !from_our_tree((pid_t)si->ssi_pid);
}

static int on_sigterm(struct event_source *s, const struct signalfd_siginfo *si, void *userdata)
{
	if (!stop_signal_allowed(si)) {
		char pid[16], code[16];
		snprintf(pid, sizeof pid, "%u", si->ssi_pid);
		snprintf(code, sizeof code, "%d", si->ssi_code);
		log_warn("ignored a stop signal from inside the sandbox or forged", "signal",
			 strsignal((int)si->ssi_signo), "pid", pid, "code", code, NULL);
		return 0;
	}
	agent_shutdown(userdata);
	return 0;
}

static int usage_request_field(void *userdata, uint16_t tag, const uint8_t *v, size_t n)
{
	uint64_t *request = userdata;

	if (tag != TAG_REQUEST || *request != UINT64_MAX)
		return -EBADMSG;
	return frame_val_u64(v, n, request);
}

/* USAGE_REQUEST: the cpu time and memory of every running run and service attempt, from their
 * cgroups, in one USAGE_REPLY. */
static int on_usage_request(struct agent *a, const struct frame *f)
{
	uint64_t request = UINT64_MAX;
	struct buf *b;
	size_t start;
	int r;

	r = frame_for_each_field(f, usage_request_field, &request);
	if (r < 0 || request == UINT64_MAX)
		return -EBADMSG;
	r = channel_begin(a->channel, MSG_USAGE_REPLY, &b, &start);
	if (r < 0)
		return 0; /* nobody to answer */
	r = frame_put_u64(b, TAG_REQUEST, request);
	if (r >= 0)
		r = run_manager_put_usage(a->runs, b);
	if (r >= 0)
		r = service_manager_put_usage(a->services, b);
	(void)channel_end(a->channel, start, r);
	return 0;
}

/* PAUSE: the clocks stop and PAUSED says every request before it was acted on (the
 * controller freezes the workspace's processes once it hears it); RESUME: they go on. */
static int on_pause(struct agent *a, const struct frame *f)
{
	uint64_t request = UINT64_MAX;
	struct buf *b;
	size_t start;
	bool paused = f->type == MSG_PAUSE;
	int r = paused ? frame_for_each_field(f, usage_request_field, &request) : 0;

	if (r < 0 || (paused && request == UINT64_MAX))
		return -EBADMSG;
	run_manager_pause(a->runs, paused);
	service_manager_pause(a->services, paused);
	log_info(paused ? "paused" : "resumed", NULL);
	if (!paused || channel_begin(a->channel, MSG_PAUSED, &b, &start) < 0)
		return 0;
	r = frame_put_u64(b, TAG_REQUEST, request);
	(void)channel_end(a->channel, start, r);
	return 0;
}

struct checkpoint_request {
	uint64_t request;
	char *dir;
};

static int checkpoint_field(void *userdata, uint16_t tag, const uint8_t *v, size_t n)
{
	struct checkpoint_request *q = userdata;

	if (tag == TAG_REQUEST && q->request == UINT64_MAX)
		return frame_val_u64(v, n, &q->request);
	if (tag == TAG_PATH && !q->dir)
		return frame_val_strdup(v, n, PROTO_MAX_PATH, &q->dir);
	return -EBADMSG;
}

/* DIR/agent.log as stdout and stderr: a regular file of one link, never what a symlink, FIFO
 * or device planted there leads to. */
static int checkpoint_log(int dfd, const char **ret_why)
{
	struct stat st;
	_cleanup_close_ int fd = openat(dfd, "agent.log",
					O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_NONBLOCK |
						O_NOCTTY | O_CLOEXEC,
					0600);
	if (fd < 0) {
		*ret_why = "cannot open agent.log in the run directory";
		return -errno;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_nlink != 1) {
		*ret_why = "agent.log in the run directory is not a regular file of one link";
		return -EINVAL;
	}
	if (dup2(fd, STDOUT_FILENO) < 0 || dup2(fd, STDERR_FILENO) < 0) {
		*ret_why = "cannot point stdout and stderr at agent.log";
		return -errno;
	}
	return 0;
}

/* A listener of ours at DIR/agent.sock, in the container's namespaces, in place of whatever is
 * at that name (the controller's socket, or anything planted there: removed, not followed). */
/* Bound by its path in the container (dir, absolute), not through dfd's /proc/self/fd name:
 * CRIU binds a listener again at the address it was bound to, in the restored container. That
 * path must lead to dfd (checked before, and the socket found there after). */
static int bind_in_run_dir(int fd, int dfd, const char *dir)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct stat a, b;
	int n = snprintf(sa.sun_path, sizeof sa.sun_path, "%s/agent.sock", dir);
	if (n < 0 || (size_t)n >= sizeof sa.sun_path)
		return -ENAMETOOLONG;
	if (stat(dir, &a) < 0 || fstat(dfd, &b) < 0)
		return -errno;
	if (a.st_dev != b.st_dev || a.st_ino != b.st_ino)
		return -EXDEV;
	if (bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0)
		return -errno;
	if (fstatat(dfd, "agent.sock", &a, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISSOCK(a.st_mode))
		return -EXDEV;
	return 0;
}

static int checkpoint_listener(int dfd, const char *dir, const char **ret_why)
{
	_cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || (unlinkat(dfd, "agent.sock", 0) < 0 && errno != ENOENT)) {
		*ret_why = "cannot replace agent.sock in the run directory";
		return -errno;
	}
	mode_t old = umask(0177);
	int r = bind_in_run_dir(fd, dfd, dir);
	umask(old);
	if (r >= 0 && listen(fd, 16) < 0)
		r = -errno;
	if (r < 0) {
		*ret_why = "cannot listen on agent.sock in the run directory";
		return r;
	}
	return TAKE_FD(fd);
}

/* The listener to take once CHECKPOINT_READY is queued, or < 0 with why. */
static int checkpoint_prepare(struct agent *a, const char *dir, const char **ret_why)
{
	if (files_manager_alive(a->files) > 0) {
		*ret_why =
			"file operations are in progress (their connections are the controller's)";
		return -EBUSY;
	}
	_cleanup_close_ int root = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	_cleanup_close_ int dfd = root < 0 ? -errno : safe_open_dir(root, dir + 1, SAFE_BENEATH);
	if (dfd < 0) {
		*ret_why = "cannot open the run directory (a symlink on its path?)";
		return dfd;
	}
	int r = checkpoint_log(dfd, ret_why);
	if (r < 0)
		return r;
	spawn_checkpoint_prepare();
	/* CRIU reads us through ptrace and /proc; non-dumpable again at the next HELLO */
	(void)prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
	return checkpoint_listener(dfd, dir, ret_why);
}

/* CHECKPOINT: nothing of ours reaches outside the container's mounts and namespaces, so that
 * CRIU can dump us (docs/agent-protocol.md "Checkpoint"). CHECKPOINT_READY is queued before the
 * listener is replaced, which closes every connection once it is sent. */
static int on_checkpoint(struct agent *a, const struct frame *f)
{
	struct checkpoint_request q = { .request = UINT64_MAX };
	const char *why = NULL;
	struct buf *b;
	size_t start;
	int r = frame_for_each_field(f, checkpoint_field, &q);

	if (r < 0 || q.request == UINT64_MAX || !q.dir || q.dir[0] != '/') {
		free(q.dir);
		return -EBADMSG;
	}
	if (!channel_connected(a->channel)) {
		free(q.dir);
		return 0; /* nobody to answer */
	}
	int fd = checkpoint_prepare(a, q.dir, &why);
	free(q.dir);
	log_info(fd < 0 ? "checkpoint refused" : "ready for a checkpoint", "reason", why ? why : "",
		 NULL);
	r = channel_begin(a->channel, MSG_CHECKPOINT_READY, &b, &start);
	if (r >= 0)
		r = frame_put_u64(b, TAG_REQUEST, q.request);
	if (r >= 0 && fd < 0)
		r = frame_put_str(b, TAG_REASON, why);
	(void)channel_end(a->channel, start, r);
	if (fd >= 0 && (r = channel_replace_listener(a->channel, fd)) < 0) {
		close(fd);
		log_error("cannot listen on the new socket", "error", strerror(-r), NULL);
	}
	return 0;
}

static int on_message(struct channel *c, const struct frame *f, void *userdata)
{
	struct agent *a = userdata;

	if (f->type == MSG_USAGE_REQUEST)
		return on_usage_request(a, f);
	if (f->type == MSG_PAUSE || f->type == MSG_RESUME)
		return on_pause(a, f);
	if (f->type == MSG_CHECKPOINT)
		return on_checkpoint(a, f);

	if (f->type == MSG_SHUTDOWN) {
		agent_shutdown(a);
		return 0;
	}
	if (f->type >= MSG_SERVICE_START && f->type <= MSG_SERVICE_PROGRESS_WATCH)
		return service_manager_message(a->services, f);
	if (f->type >= MSG_TERM_OPEN && f->type <= MSG_TERM_EXIT)
		return term_manager_message(a->terms, f);
	if (f->type == MSG_CRED_REPLY)
		return a->creds ? cred_server_message(a->creds, f) : 0;
	return run_manager_message(a->runs, f);
}

static int on_hello_fields(struct channel *c, struct buf *b, void *userdata)
{
	struct agent *a = userdata;

	/* dumpable only from a CHECKPOINT to the next controller (harden()) */
	(void)prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	int r = frame_put_u64(b, TAG_FEATURES, AGENT_FEATURES_ALL);

	if (r >= 0)
		r = run_manager_hello_fields(a->runs, b);

	if (r >= 0)
		r = term_manager_hello_fields(a->terms, b);
	return r < 0 ? r : service_manager_hello_fields(a->services, b);
}

static void on_disconnected(struct channel *c, void *userdata)
{
	struct agent *a = userdata;

	run_manager_disconnected(a->runs);
	service_manager_disconnected(a->services);
	term_manager_disconnected(a->terms);
	if (a->creds)
		cred_server_disconnected(a->creds);
}

static void on_drained(struct channel *c, void *userdata)
{
	struct agent *a = userdata;

	run_manager_output_room(a->runs);
	service_manager_output_room(a->services);
}

static void on_file_session(struct channel *c, int fd, const struct frame *f, const uint8_t *rest,
			    size_t rest_len, void *userdata)
{
	struct agent *a = userdata;

	files_manager_open(a->files, fd, f, rest, rest_len);
}

/* In a new file worker: the agent's secret stays with the agent. */
static void before_file_worker(void *userdata)
{
	struct agent *a = userdata;

	channel_forget_secret(a->channel);
}

static const struct channel_ops channel_ops = {
	.message = on_message,
	.hello_fields = on_hello_fields,
	.drained = on_drained,
	.disconnected = on_disconnected,
	.file_session = on_file_session,
};

static int agent_setup(struct agent *a, const struct args *args, const struct agent_start *st,
		       const struct cgroup *cg)
{
	const struct child_config config = {
		.cgroup = cg,
		.env = st->env,
		.n_env = st->n_env,
		.home = args->home,
		.workdir = args->workdir ? args->workdir : st->workdir,
		.set_user = args->set_user,
		.uid = args->uid,
		.gid = args->gid,
	};
	const struct files_config files = {
		.root = args->files_root,
		.workdir = config.workdir,
		.set_user = args->set_user,
		.uid = args->uid,
		.gid = args->gid,
	};
	int r;

	r = event_loop_new(&a->loop);
	if (r >= 0)
		r = event_add_signal(a->loop, &a->signals[0], SIGCHLD, on_sigchld, a);
	if (r >= 0)
		r = event_add_signal(a->loop, &a->signals[1], SIGTERM, on_sigterm, a);
	if (r >= 0)
		r = event_add_signal(a->loop, &a->signals[2], SIGINT, on_sigterm, a);
	if (r >= 0)
		r = channel_new(a->loop, args->listen_fd, st->secret, st->secret_len, &channel_ops,
				a, &a->channel);
	if (r >= 0)
		r = run_manager_new(a->loop, a->channel, &config, &a->runs);
	if (r >= 0)
		r = service_manager_new(a->loop, a->channel, &config, &a->services);
	if (r >= 0)
		r = term_manager_new(a->loop, a->channel, &config, &a->terms);
	if (r >= 0)
		r = files_manager_new(&files, before_file_worker, a, &a->files);
	/* without it, commands run as before; git's helper says it cannot reach the socket */
	if (r >= 0 && args->credential_socket &&
	    (r = cred_server_new(a->loop, a->channel, args->credential_socket,
				 args->set_user ? args->uid : geteuid(),
				 args->set_user ? args->gid : getegid(), &a->creds)) < 0) {
		log_warn("no credential socket", "path", args->credential_socket, "error",
			 strerror(-r), NULL);
		r = 0;
	}
	return r;
}

static void agent_free(struct agent *a)
{
	cred_server_free(a->creds);
	channel_free(a->channel);
	run_manager_free(a->runs);
	service_manager_free(a->services);
	term_manager_free(a->terms);
	files_manager_free(a->files);
	for (size_t i = 0; i < ELEMENTSOF(a->signals); i++)
		event_source_free(a->signals[i]);
	if (a->loop)
		event_loop_free(a->loop);
}

/* Non-dumpable (no ptrace, no /proc/<pid>/mem or environ for the commands we run), reaper of
 * every orphan below us, and deaf to SIGPIPE. Signals ignored by whoever started us (a shell
 * ignores SIGINT for background jobs) go back to their defaults here, once, so the commands we
 * fork inherit nothing but our own SIGPIPE, which the child resets. */
static int harden(void)
{
	struct sigaction dfl = { .sa_handler = SIG_DFL };
	for (int sig = 1; sig < _NSIG; sig++)
		if (sig != SIGKILL && sig != SIGSTOP)
			(void)sigaction(sig, &dfl, NULL);
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
		return -errno;
	if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) < 0)
		return -errno;
	if (signal(SIGPIPE, SIG_IGN) == SIG_ERR)
		return -errno;
	return 0;
}

static int fail(const char *what, int r)
{
	log_error(what, "error", strerror(-r), NULL);
	return EXIT_FAILURE;
}

/* STATION_CREDENTIAL_SOCKET (a path, not a secret) for every command, unless the workspace's
 * env names it already. */
static int add_credential_env(struct agent_start *st, const char *path)
{
	char *entry, **env;

	for (size_t i = 0; i < st->n_env; i++)
		if (strncmp(st->env[i], CRED_ENV "=", strlen(CRED_ENV) + 1) == 0)
			return 0;
	if (asprintf(&entry, CRED_ENV "=%s", path) < 0)
		return -ENOMEM;
	env = realloc(st->env, (st->n_env + 2) * sizeof *env);
	if (!env) {
		free(entry);
		return -ENOMEM;
	}
	env[st->n_env++] = entry;
	env[st->n_env] = NULL;
	st->env = env;
	return 0;
}

/* git-credential-station ACTION, station-agent credential ACTION: the helper, not the agent. */
static bool helper_invocation(int argc, char **argv, int *ret_argc, char ***ret_argv)
{
	const char *base = argc > 0 ? strrchr(argv[0], '/') : NULL;

	base = base ? base + 1 : argc > 0 ? argv[0] : "";
	if (strcmp(base, "git-credential-station") == 0) {
		*ret_argc = argc - 1;
		*ret_argv = argv + 1;
		return true;
	}
	if (argc > 1 && strcmp(argv[1], "credential") == 0) {
		*ret_argc = argc - 2;
		*ret_argv = argv + 2;
		return true;
	}
	return false;
}

#ifdef AGENT_SANITIZER_CANARY
/* The sanitizer test build only (meson.build): STATION_TEST_AGENT_CANARY=heap-overflow in the
 * agent's environment makes it read one byte past a heap block, after it has hardened itself
 * and closed its fds, so that the tests see a real AddressSanitizer report reach the file
 * their log_path names and fail the script. */
static void sanitizer_canary(void)
{
	const char *c = getenv("STATION_TEST_AGENT_CANARY");
	if (!c || strcmp(c, "heap-overflow") != 0)
		return;
	volatile size_t n = 16;
	char *p = malloc(n);
	if (!p)
		return;
	memset(p, 'x', n);
	volatile char past = p[n];
	(void)past;
	free(p);
}
#endif

int main(int argc, char **argv)
{
	struct agent_start start = { 0 };
	struct cgroup *cg = NULL;
	struct agent a = { 0 };
	struct args args;
	int r, helper_argc;
	char **helper_argv;

	if (helper_invocation(argc, argv, &helper_argc, &helper_argv))
		return cred_helper_main(helper_argc, helper_argv);
	ensure_stdio();
	log_setup(STDERR_FILENO, LOG_FORMAT_JSON, LOG_LEVEL_INFO, "station-agent");
	if (parse_args(argc, argv, &args) < 0)
		return EXIT_FAILURE;
	log_setup(STDERR_FILENO, args.log_format, LOG_LEVEL_INFO, "station-agent");
	/* our log is a file on the host, and commands can provoke lines (bad connections to our
	 * socket, signals): bounded in rate and size */
	log_set_limits(AGENT_LOG_LINES_PER_MINUTE, AGENT_LOG_MAX_BYTES);
	r = harden();
	if (r < 0)
		return fail("cannot protect the agent", r);
	r = close_all_fds_except((const int[]){ args.listen_fd, args.secret_fd }, 2);
	if (r < 0)
		return fail("cannot close inherited fds", r);
#ifdef AGENT_SANITIZER_CANARY
	sanitizer_canary();
#endif
	r = read_start(args.secret_fd, &start);
	close(args.secret_fd);
	ensure_stdio(); /* the block may have come on stdin */
	if (r < 0)
		return fail("cannot read the start block on --secret-fd", r);
	r = check_start(&args, &start);
	if (r < 0)
		return fail("bad start block (the workdir from it or --workdir, valid env names)",
			    r);
	if (args.credential_socket && (r = add_credential_env(&start, args.credential_socket)) < 0)
		return fail("out of memory", r);
	if (args.listen_path && (args.listen_fd = listen_path(args.listen_path)) < 0)
		return fail("cannot listen on --listen", args.listen_fd);
	/* one we made ourselves listens (gVisor does not answer SO_ACCEPTCONN for it) */
	r = args.listen_path ? 0 : check_listen_fd(args.listen_fd);
	if (r < 0)
		return fail("--listen-fd is not a listening socket", r);
	if (args.cgroup && (r = cgroup_from_string(args.cgroup, &cg)) < 0)
		return fail("bad --cgroup", r);
	if (chdir("/") < 0)
		return fail("cannot chdir to /", -errno);
	r = agent_setup(&a, &args, &start, cg);
	explicit_bzero(start.secret, sizeof start.secret); /* the channel has its copy */
	if (r < 0)
		return fail("cannot set up the agent", r);
	log_info("agent started", "workdir", args.workdir ? args.workdir : start.workdir, "cgroup",
		 args.cgroup ? args.cgroup : "", NULL);
	r = event_loop_run(a.loop);
	agent_free(&a);
	if (cg)
		cgroup_free(cg);
	agent_start_free(&start);
	if (r < 0)
		return fail("event loop failed", r);
	return EXIT_SUCCESS;
}
