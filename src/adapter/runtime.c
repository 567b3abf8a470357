/* SPDX-License-Identifier: MIT */
/* The OCI runtime CLI, called with fork + execv and bounded waits. See runtime.h. */

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <linux/magic.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "basic/cleanup.h"
#include "basic/json-util.h"
#include "basic/util.h"
#include "runtime.h"

#define UNIFIED_MOUNT "/sys/fs/cgroup/unified"
#define DEFAULT_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
#define MAX_ARGS 24
#define CHILD_FD_BASE 64 /* above every fd the child places (0-2, 3..3+EXTRA_FDS_MAX) */
#define ERROR_TAIL_MAX 320

static const char *const status_names[] = {
	[RUNTIME_STATUS_CREATING] = "creating", [RUNTIME_STATUS_CREATED] = "created",
	[RUNTIME_STATUS_RUNNING] = "running",	[RUNTIME_STATUS_PAUSED] = "paused",
	[RUNTIME_STATUS_STOPPED] = "stopped",
};

const char *runtime_status_to_string(enum runtime_status s)
{
	return (size_t)s < ELEMENTSOF(status_names) ? status_names[s] : NULL;
}

int runtime_status_from_string(const char *s, enum runtime_status *ret)
{
	for (size_t i = 0; s && i < ELEMENTSOF(status_names); i++)
		if (strcmp(s, status_names[i]) == 0) {
			*ret = (enum runtime_status)i;
			return 0;
		}
	return -EINVAL;
}

/* One invocation of the runtime. */
struct call {
	const char *what; /* "create", "state", …: for messages */
	const char *id;
	char *argv[MAX_ARGS];
	size_t argc;
	const struct runtime_io *io; /* NULL: stdin /dev/null, stdout and stderr captured */
	char *out;
	size_t out_len;
	char err[RUNTIME_STDERR_MAX + 1];
	size_t err_len;
	int status; /* from waitpid */
};

/* What the child reports through its CLOEXEC pipe when it fails before exec. */
enum child_stage { STAGE_UNSHARE, STAGE_PRIVATE, STAGE_UMOUNT, STAGE_FDS, STAGE_EXEC };
struct child_report {
	int stage;
	int err;
};

static const char *const stage_names[] = {
	[STAGE_UNSHARE] = "private mount namespace: unshare(CLONE_NEWNS)",
	[STAGE_PRIVATE] = "private mount namespace: making / private",
	[STAGE_UMOUNT] = "private mount namespace: detaching " UNIFIED_MOUNT,
	[STAGE_FDS] = "setting up stdio",
	[STAGE_EXEC] = "exec",
};

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void call_push(struct call *c, const char *arg)
{
	if (c->argc + 1 < MAX_ARGS)
		c->argv[c->argc++] = (char *)arg;
	c->argv[c->argc] = NULL;
}

/* runsc's global flags (see runtime.h): every call gets them, so that what `create` stored and
 * what later calls assume never differ. */
static const char *const runsc_flags[] = {
	"--network=none",    /* netstack loopback only; "sandbox" wants a prepared netns */
	"--oci-seccomp",     /* else runsc ignores linux.seccomp */
	"--cgroupfs",	     /* the sandbox's own cgroupfs at /sys/fs/cgroup, for the agent */
	"--host-uds=create", /* the agent binds its socket in /run/station (no fd passing) */
};

/* argv: name [--log=FILE] --root ROOT [--log-format=json] [runsc flags] [--criu CRIU] WHAT */
static void call_init_criu(struct call *c, const struct runtime *rt, const char *what,
			   const char *id, const char *log_arg, const char *criu)
{
	*c = (struct call){ .what = what, .id = id };
	call_push(c, rt->name);
	if (log_arg)
		call_push(c, log_arg);
	call_push(c, "--root");
	call_push(c, rt->root);
	if (rt->kind != RUNTIME_OTHER)
		call_push(c, "--log-format=json");
	for (size_t i = 0; rt->kind == RUNTIME_RUNSC && i < ELEMENTSOF(runsc_flags); i++)
		call_push(c, runsc_flags[i]);
	if (criu) {
		call_push(c, "--criu");
		call_push(c, criu);
	}
	call_push(c, what);
}

static void call_init(struct call *c, const struct runtime *rt, const char *what, const char *id,
		      const char *log_arg)
{
	call_init_criu(c, rt, what, id, log_arg, NULL);
}

bool runtime_host_is_hybrid(void)
{
	struct statfs root, unified;
	if (statfs("/sys/fs/cgroup", &root) < 0 || statfs(UNIFIED_MOUNT, &unified) < 0)
		return false;
	return root.f_type != CGROUP2_SUPER_MAGIC && unified.f_type == CGROUP2_SUPER_MAGIC;
}

/* --- the child, between fork and exec --- */

static int child_private_mntns(int *ret_stage)
{
	*ret_stage = STAGE_UNSHARE;
	if (unshare(CLONE_NEWNS) < 0)
		return -errno;
	*ret_stage = STAGE_PRIVATE;
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		return -errno;
	*ret_stage = STAGE_UMOUNT;
	if (umount2(UNIFIED_MOUNT, MNT_DETACH) < 0 && errno != EINVAL && errno != ENOENT)
		return -errno;
	return 0;
}

/* Places src[i] at fd i (0, 1, 2, 3, …) and closes everything else but keep_fd. Sources are
 * first copied above CHILD_FD_BASE so that no dup2 overwrites a source still to be placed. */
static int child_place_fds(const int *src, size_t n, int keep_fd)
{
	int tmp[3 + RUNTIME_EXTRA_FDS_MAX];
	for (size_t i = 0; i < n; i++) {
		tmp[i] = fcntl(src[i], F_DUPFD_CLOEXEC, CHILD_FD_BASE);
		if (tmp[i] < 0)
			return -errno;
	}
	for (size_t i = 0; i < n; i++)
		if (dup2(tmp[i], (int)i) < 0)
			return -errno;
	int keep[RUNTIME_EXTRA_FDS_MAX + 1];
	size_t k = 0;
	for (size_t i = 3; i < n; i++)
		keep[k++] = (int)i;
	keep[k++] = keep_fd;
	return close_all_fds_except(keep, k);
}

static _Noreturn void child_exec(const struct runtime *rt, struct call *c, const int *fds,
				 size_t n_fds, int report_fd)
{
	struct child_report rep = { .stage = STAGE_FDS };
	int r = 0;

	signals_reset_for_exec(); /* the child shares our memory until it execs */
	/* its own process group: a call that times out is killed with all it forked */
	(void)setpgid(0, 0);
	report_fd = fcntl(report_fd, F_DUPFD_CLOEXEC, CHILD_FD_BASE + 16);
	if (rt->private_mntns)
		r = child_private_mntns(&rep.stage);
	if (r >= 0) {
		rep.stage = STAGE_FDS;
		r = report_fd < 0 ? -EBADF : child_place_fds(fds, n_fds, report_fd);
	}
	if (r >= 0) {
		rep.stage = STAGE_EXEC;
		execv(rt->path, c->argv);
		r = -errno;
	}
	rep.err = r;
	(void)!write(report_fd, &rep, sizeof rep);
	_exit(127);
}

struct child_args {
	const struct runtime *rt;
	struct call *c;
	const int *fds;
	size_t n_fds;
	int report_fd;
};

#ifndef __SANITIZE_ADDRESS__
#define CHILD_STACK_SIZE (64 * 1024)

static int child_trampoline(void *arg)
{
	const struct child_args *a = arg;
	child_exec(a->rt, a->c, a->fds, a->n_fds, a->report_fd);
}

/* The child runs on a stack in our frame, in our memory, until it execs (posix_spawn's way):
 * no page tables to copy (a controller holding a thousand workspaces is tens of MiB), no
 * copy-on-write faults after it, and we are suspended meanwhile. It makes system calls and
 * writes its own stack only; its fd table and signal dispositions are its own. */
static pid_t child_spawn(const struct child_args *a)
{
	char stack[CHILD_STACK_SIZE] __attribute__((aligned(16)));
	return clone(child_trampoline, stack + sizeof stack, CLONE_VM | CLONE_VFORK | SIGCHLD,
		     (void *)a);
}
#else
/* Sanitizer builds: a plain fork, since the sanitizers' runtime cannot share memory with a
 * child that runs instrumented code. */
static pid_t child_spawn(const struct child_args *a)
{
	pid_t pid = fork();
	if (pid == 0)
		child_exec(a->rt, a->c, a->fds, a->n_fds, a->report_fd);
	return pid;
}
#endif

/* --- the parent --- */

static void drain(int *fd, char *buf, size_t max, size_t *len)
{
	char scratch[4096];
	for (;;) {
		char *dst = *len < max ? buf + *len : scratch;
		size_t room = *len < max ? max - *len : sizeof scratch;
		ssize_t n = read(*fd, dst, room);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return;
		if (n <= 0) {
			close(*fd);
			*fd = -1;
			return;
		}
		if (dst != scratch)
			*len += (size_t)n;
	}
}

static int pidfd_open_(pid_t pid)
{
	return (int)syscall(SYS_pidfd_open, pid, 0);
}

/* Waits for the child to exit, collecting stdout and stderr, until the deadline. */
static int call_collect(struct call *c, pid_t pid, int out_fd, int err_fd, uint64_t deadline)
{
	_cleanup_close_ int pidfd = pidfd_open_(pid);
	if (pidfd < 0)
		return negative_errno();
	for (;;) {
		uint64_t now = now_ms();
		if (now >= deadline)
			return -ETIMEDOUT;
		struct pollfd p[3] = { { pidfd, POLLIN, 0 },
				       { out_fd, POLLIN, 0 },
				       { err_fd, POLLIN, 0 } };
		int n = poll(p, 3, (int)MIN(deadline - now, (uint64_t)INT_MAX));
		if (n < 0 && errno != EINTR)
			return negative_errno();
		if (out_fd >= 0 && p[1].revents)
			drain(&out_fd, c->out, RUNTIME_STDOUT_MAX, &c->out_len);
		if (err_fd >= 0 && p[2].revents)
			drain(&err_fd, c->err, RUNTIME_STDERR_MAX, &c->err_len);
		if (p[0].revents && waitpid(pid, &c->status, WNOHANG) == pid)
			break;
	}
	/* Everything the runtime wrote is in the pipes now; a lingering child holding them
	 * open does not keep us waiting. */
	if (out_fd >= 0)
		drain(&out_fd, c->out, RUNTIME_STDOUT_MAX, &c->out_len);
	if (err_fd >= 0)
		drain(&err_fd, c->err, RUNTIME_STDERR_MAX, &c->err_len);
	if (out_fd >= 0)
		close(out_fd);
	if (err_fd >= 0)
		close(err_fd);
	return 0;
}

static int read_report(int fd, uint64_t deadline, struct child_report *ret)
{
	struct pollfd p = { fd, POLLIN, 0 };
	int n;
	do {
		uint64_t now = now_ms();
		if (now >= deadline)
			return -ETIMEDOUT;
		n = poll(&p, 1, (int)MIN(deadline - now, (uint64_t)INT_MAX));
	} while (n < 0 && errno == EINTR);
	if (n < 0)
		return negative_errno();
	if (n == 0)
		return -ETIMEDOUT;
	ssize_t k = read(fd, ret, sizeof *ret);
	return k == sizeof *ret ? 1 : 0; /* 0: EOF, the exec happened */
}

struct pipes {
	int report[2], out[2], err[2];
	int devnull;
};

static void pipes_close(struct pipes *p)
{
	int *all[] = { &p->report[0], &p->report[1], &p->out[0], &p->out[1],
		       &p->err[0],    &p->err[1],    &p->devnull };
	for (size_t i = 0; i < ELEMENTSOF(all); i++)
		if (*all[i] >= 0) {
			close(*all[i]);
			*all[i] = -1;
		}
}

static int pipes_open(struct pipes *p, bool capture)
{
	*p = (struct pipes){ { -1, -1 }, { -1, -1 }, { -1, -1 }, -1 };
	p->devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (p->devnull < 0 || pipe2(p->report, O_CLOEXEC) < 0)
		return negative_errno();
	if (capture && (pipe2(p->out, O_CLOEXEC | O_NONBLOCK) < 0 ||
			pipe2(p->err, O_CLOEXEC | O_NONBLOCK) < 0))
		return negative_errno();
	/* Only our ends are non-blocking. */
	if (capture &&
	    (fd_set_nonblock(p->out[1], false) < 0 || fd_set_nonblock(p->err[1], false) < 0))
		return negative_errno();
	return 0;
}

static size_t child_fds(const struct call *c, const struct pipes *p, int *fds)
{
	size_t n = 0;
	if (!c->io) {
		fds[n++] = p->devnull;
		fds[n++] = p->out[1];
		fds[n++] = p->err[1];
		return n;
	}
	fds[n++] = c->io->in >= 0 ? c->io->in : p->devnull;
	fds[n++] = c->io->out >= 0 ? c->io->out : p->devnull;
	fds[n++] = c->io->err >= 0 ? c->io->err : p->devnull;
	for (size_t i = 0; i < c->io->n_extra_fds && i < RUNTIME_EXTRA_FDS_MAX; i++)
		fds[n++] = c->io->extra_fds[i];
	return n;
}

static int call_failed_start(const struct runtime *rt, const struct call *c,
			     const struct child_report *rep, struct station_error *e)
{
	const char *stage = (size_t)rep->stage < ELEMENTSOF(stage_names) ? stage_names[rep->stage] :
									   "?";
	return station_error_set(e, rep->err < 0 ? rep->err : -EIO, NULL,
				 "cannot run %s \"%s\" for %s: %s: %s", rt->name, rt->path, c->what,
				 stage, strerror(-rep->err));
}

/* Runs the call to completion. A timeout kills the runtime. */
static int call_run(const struct runtime *rt, struct call *c, struct station_error *e)
{
	struct pipes p;
	int fds[3 + RUNTIME_EXTRA_FDS_MAX];
	uint64_t deadline = now_ms() + (uint64_t)(rt->timeout_ms > 0 ? rt->timeout_ms :
								       RUNTIME_TIMEOUT_MS_DEFAULT);
	int r = pipes_open(&p, !c->io);
	if (r < 0) {
		pipes_close(&p);
		return station_error_set(e, r, NULL, "%s %s: pipes: %s", rt->name, c->what,
					 strerror(-r));
	}
	size_t n_fds = child_fds(c, &p, fds);
	const struct child_args args = { rt, c, fds, n_fds, p.report[1] };
	pid_t pid = child_spawn(&args);
	if (pid < 0) {
		r = negative_errno();
		pipes_close(&p);
		return station_error_set(e, r, NULL, "%s %s: fork: %s", rt->name, c->what,
					 strerror(-r));
	}
	int out_fd = TAKE_FD(p.out[0]), err_fd = TAKE_FD(p.err[0]);
	struct child_report rep;
	close(TAKE_FD(p.report[1]));
	r = read_report(p.report[0], deadline, &rep);
	pipes_close(&p); /* our copies of the child's ends */
	if (r == 0)
		r = call_collect(c, pid, out_fd, err_fd, deadline);
	else {
		if (out_fd >= 0)
			close(out_fd);
		if (err_fd >= 0)
			close(err_fd);
	}
	if (r == -ETIMEDOUT || r < 0) {
		kill(-pid, SIGKILL);
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		if (r == -ETIMEDOUT)
			return station_error_set(e, r, NULL, "%s %s \"%s\" timed out after %d ms",
						 rt->name, c->what, c->id ? c->id : "",
						 rt->timeout_ms);
		return station_error_set(e, r, NULL, "%s %s: %s", rt->name, c->what, strerror(-r));
	}
	if (r == 1) {
		waitpid(pid, NULL, 0);
		return call_failed_start(rt, c, &rep, e);
	}
	return 0;
}

static void call_done(struct call *c)
{
	free(c->out);
	c->out = NULL;
}

/* Appends the text a runtime meant as an error: the msg of JSON log lines at level error or
 * fatal (runc and crun with --log-format=json), else any non-empty plain line. */
static void summarize_line(const char *line, size_t len, char *buf, size_t size, size_t *used)
{
	_cleanup_json_ json_t *j = json_loadb(line, len, 0, NULL);
	const char *text = NULL;
	size_t n = len;
	if (j) {
		const char *level = json_string_value(json_object_get(j, "level"));
		text = json_string_value(json_object_get(j, "msg"));
		if (!text || !level || (strcmp(level, "error") != 0 && strcmp(level, "fatal") != 0))
			return;
		n = strlen(text);
	} else {
		text = line;
	}
	while (n > 0 && (text[n - 1] == ' ' || text[n - 1] == '\r' || text[n - 1] == '\t'))
		n--;
	if (n == 0)
		return;
	if (*used > 0 && *used + 2 < size) {
		memcpy(buf + *used, "; ", 2);
		*used += 2;
	}
	size_t k = MIN(n, size - 1 - *used);
	memcpy(buf + *used, text, k);
	*used += k;
	buf[*used] = '\0';
}

/* The runtime's error output as one line, its tail kept when long. */
static void summarize_errors(const char *data, size_t len, char *ret, size_t ret_size)
{
	_cleanup_free_ char *buf = malloc(len * 2 + 16);
	size_t used = 0;
	ret[0] = '\0';
	if (!buf)
		return;
	buf[0] = '\0';
	for (size_t start = 0; start < len;) {
		const char *nl = memchr(data + start, '\n', len - start);
		size_t end = nl ? (size_t)(nl - data) : len;
		summarize_line(data + start, end - start, buf, len * 2 + 16, &used);
		start = end + 1;
	}
	if (used == 0)
		snprintf(ret, ret_size, "no error output");
	else if (used < ret_size)
		memcpy(ret, buf, used + 1);
	else
		snprintf(ret, ret_size, "…%s", buf + used - (ret_size - 4));
}

static bool says_not_found(const char *summary)
{
	return strstr(summary, "does not exist") || strstr(summary, "No such file or directory");
}

/* Turns the exit status into 0, -ENOENT (unknown container) or -EIO with a message. */
static int call_result(const struct runtime *rt, const struct call *c, const char *errors,
		       size_t errors_len, struct station_error *e)
{
	char summary[ERROR_TAIL_MAX];
	if (WIFEXITED(c->status) && WEXITSTATUS(c->status) == 0)
		return 0;
	summarize_errors(errors, errors_len, summary, sizeof summary);
	int r = says_not_found(summary) && c->id ? -ENOENT : -EIO;
	if (WIFSIGNALED(c->status))
		return station_error_set(e, r, NULL, "%s %s \"%s\" killed by signal %d: %s",
					 rt->name, c->what, c->id ? c->id : "", WTERMSIG(c->status),
					 summary);
	return station_error_set(e, r, NULL, "%s %s \"%s\" failed with exit status %d: %s",
				 rt->name, c->what, c->id ? c->id : "", WEXITSTATUS(c->status),
				 summary);
}

/* Runs a call whose output we capture: every command but create. */
static int call_capture(const struct runtime *rt, struct call *c, struct station_error *e)
{
	c->out = malloc(RUNTIME_STDOUT_MAX + 1);
	if (!c->out)
		return station_error_set(e, -ENOMEM, NULL, "out of memory");
	int r = call_run(rt, c, e);
	if (r < 0)
		return r;
	c->out[c->out_len] = '\0';
	c->err[c->err_len] = '\0';
	return call_result(rt, c, c->err, c->err_len, e);
}

/* --- setup --- */

static int find_in_path(const char *name, char **ret)
{
	const char *path = getenv("PATH");
	char buf[PATH_MAX];
	if (!path || !*path)
		path = DEFAULT_PATH;
	for (const char *p = path; *p;) {
		size_t n = strcspn(p, ":");
		if (n > 0 &&
		    snprintf(buf, sizeof buf, "%.*s/%s", (int)n, p, name) < (int)sizeof buf) {
			struct stat st;
			if (buf[0] == '/' && stat(buf, &st) == 0 && S_ISREG(st.st_mode) &&
			    access(buf, X_OK) == 0) {
				*ret = strdup(buf);
				return *ret ? 0 : -ENOMEM;
			}
		}
		p += n;
		if (*p == ':')
			p++;
	}
	return -ENOENT;
}

static enum runtime_kind kind_of(const char *base)
{
	if (strncmp(base, "runc", 4) == 0)
		return RUNTIME_RUNC;
	if (strncmp(base, "crun", 4) == 0)
		return RUNTIME_CRUN;
	if (strncmp(base, "runsc", 5) == 0)
		return RUNTIME_RUNSC;
	return RUNTIME_OTHER;
}

static int resolve_binary(const char *name, char **ret, struct station_error *e)
{
	if (!name || !*name)
		return station_error_set(e, -EINVAL, "runtime", "no OCI runtime named");
	if (strchr(name, '/')) {
		if (name[0] != '/')
			return station_error_set(e, -EINVAL, "runtime",
						 "OCI runtime path \"%s\" must be absolute", name);
		*ret = strdup(name);
		return *ret ? 0 : station_error_set(e, -ENOMEM, NULL, "out of memory");
	}
	int r = find_in_path(name, ret);
	if (r == -ENOENT)
		return station_error_set(e, r, "runtime",
					 "OCI runtime \"%s\" not found in PATH (install it, e.g. "
					 "'apt-get install %s')",
					 name, name);
	return r < 0 ? station_error_set(e, r, NULL, "%s", strerror(-r)) : 0;
}

void runtime_free(struct runtime *rt)
{
	if (!rt)
		return;
	free(rt->name);
	free(rt->path);
	free(rt->root);
	free(rt);
}

DEFINE_TRIVIAL_CLEANUP_FUNC(struct runtime *, runtime_free)

int runtime_new(const char *name, const char *state_root, struct runtime **ret,
		struct station_error *e)
{
	_cleanup_(runtime_freep) struct runtime *rt = calloc(1, sizeof *rt);
	if (!rt)
		return station_error_set(e, -ENOMEM, NULL, "out of memory");
	int r = resolve_binary(name, &rt->path, e);
	if (r < 0)
		return r;
	const char *base = strrchr(rt->path, '/') + 1;
	rt->name = strdup(base);
	rt->root = state_root ? strdup(state_root) : NULL;
	if (!rt->name || !rt->root)
		return station_error_set(e, -ENOMEM, NULL, "out of memory");
	if (rt->root[0] != '/')
		return station_error_set(e, -EINVAL, NULL,
					 "runtime state root \"%s\" must be absolute", rt->root);
	rt->kind = kind_of(base);
	rt->private_mntns = rt->kind == RUNTIME_CRUN && runtime_host_is_hybrid();
	rt->timeout_ms = RUNTIME_TIMEOUT_MS_DEFAULT;
	r = mkdir_p(rt->root, 0700);
	if (r < 0)
		return station_error_set(e, r, NULL, "cannot create runtime state root \"%s\": %s",
					 rt->root, strerror(-r));
	*ret = TAKE_PTR(rt);
	return 0;
}

static int check_binary(const struct runtime *rt, struct station_error *e)
{
	struct stat st;
	if (stat(rt->path, &st) < 0)
		return station_error_set(e, negative_errno(), "runtime",
					 "OCI runtime \"%s\" not found: %m", rt->path);
	if (!S_ISREG(st.st_mode) || access(rt->path, X_OK) < 0)
		return station_error_set(e, -EACCES, "runtime",
					 "OCI runtime \"%s\" is not an executable file", rt->path);
	return 0;
}

int runtime_probe(const struct runtime *rt, char **ret_version, struct station_error *e)
{
	struct call c = { .what = "--version" };
	struct stat st;
	int r = check_binary(rt, e);
	if (r < 0)
		return r;
	if (stat(rt->root, &st) < 0 || !S_ISDIR(st.st_mode))
		return station_error_set(e, -ENOTDIR, NULL,
					 "runtime state root \"%s\" is not a directory", rt->root);
	call_push(&c, rt->name);
	call_push(&c, "--root"); /* else crun makes its default /run/crun */
	call_push(&c, rt->root);
	call_push(&c, "--version");
	r = call_capture(rt, &c, e);
	if (r >= 0 && c.out_len == 0)
		r = station_error_set(e, -EIO, "runtime", "%s --version printed nothing", rt->path);
	if (r >= 0 && ret_version) {
		*ret_version = strndup(c.out, strcspn(c.out, "\n"));
		if (!*ret_version)
			r = -ENOMEM;
	}
	call_done(&c);
	return r;
}

/* --- container commands --- */

static bool id_valid(const char *id)
{
	size_t n = id ? strlen(id) : 0;
	return n > 0 && n <= 128 && id[0] != '.' &&
	       strspn(id, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") == n;
}

static int check_id(const char *id, struct station_error *e)
{
	return id_valid(id) ? 0 :
			      station_error_set(e, -EINVAL, NULL, "invalid container id \"%s\"",
						id ? id : "");
}

static int read_pid_file(const char *path, pid_t *ret)
{
	_cleanup_free_ char *s = NULL;
	uint64_t v;
	int r = read_file(path, 64, &s, NULL);
	if (r < 0)
		return r;
	s[strcspn(s, "\n")] = '\0';
	r = parse_u64(s, INT_MAX, &v);
	if (r < 0 || v == 0)
		return -EINVAL;
	*ret = (pid_t)v;
	return 0;
}

/* The runtime's errors during create go to a log file: its stdio is the container's. */
static int create_result(const struct runtime *rt, struct call *c, const char *log,
			 struct station_error *e)
{
	_cleanup_free_ char *text = NULL;
	size_t len = 0;
	if (read_file(log, 256 * 1024, &text, &len) < 0)
		len = 0;
	return call_result(rt, c, text ? text : "", len, e);
}

static int create_or_run(const struct runtime *rt, bool run, const char *id, const char *bundle,
			 const struct runtime_io *io, pid_t *ret_pid, struct station_error *e);

int runtime_create(const struct runtime *rt, const char *id, const char *bundle,
		   const struct runtime_io *io, pid_t *ret_pid, struct station_error *e)
{
	return create_or_run(rt, false, id, bundle, io, ret_pid, e);
}

int runtime_run_detached(const struct runtime *rt, const char *id, const char *bundle,
			 const struct runtime_io *io, pid_t *ret_pid, struct station_error *e)
{
	return create_or_run(rt, true, id, bundle, io, ret_pid, e);
}

static int create_or_run(const struct runtime *rt, bool run, const char *id, const char *bundle,
			 const struct runtime_io *io, pid_t *ret_pid, struct station_error *e)
{
	static const struct runtime_io none = { -1, -1, -1, NULL, 0 };
	char log[PATH_MAX], log_arg[PATH_MAX + 8], pid_file[PATH_MAX], n_fds[32];
	struct call c;
	int r = check_id(id, e);
	if (r < 0)
		return r;
	if (!io)
		io = &none;
	if (io->n_extra_fds > RUNTIME_EXTRA_FDS_MAX)
		return station_error_set(e, -E2BIG, NULL, "too many fds for the container");
	if (io->n_extra_fds > 0 && rt->kind == RUNTIME_RUNSC)
		return station_error_set(e, -EOPNOTSUPP, NULL,
					 "%s passes no file descriptors beyond stdio "
					 "(it has no --preserve-fds)",
					 rt->name);
	if (snprintf(log, sizeof log, "%s/%s.create.log", rt->root, id) >= (int)sizeof log ||
	    snprintf(pid_file, sizeof pid_file, "%s/container.pid", bundle) >= (int)sizeof pid_file)
		return station_error_set(e, -ENAMETOOLONG, NULL, "bundle or state path too long");
	snprintf(log_arg, sizeof log_arg, "--log=%s", log);
	snprintf(n_fds, sizeof n_fds, "--preserve-fds=%zu", io->n_extra_fds);
	(void)unlink(log);
	(void)unlink(pid_file);

	call_init(&c, rt, run ? "run" : "create", id, log_arg);
	c.io = io;
	if (run)
		call_push(&c, "--detach");
	call_push(&c, "--bundle");
	call_push(&c, bundle);
	call_push(&c, "--pid-file");
	call_push(&c, pid_file);
	if (io->n_extra_fds > 0)
		call_push(&c, n_fds);
	call_push(&c, id);

	r = call_run(rt, &c, e);
	if (r >= 0)
		r = create_result(rt, &c, log, e);
	(void)unlink(log);
	if (r < 0)
		return r;
	pid_t pid = 0;
	r = read_pid_file(pid_file, &pid);
	if (r < 0)
		return station_error_set(e, r, NULL, "%s create \"%s\": no pid in \"%s\": %s",
					 rt->name, id, pid_file, strerror(-r));
	if (ret_pid)
		*ret_pid = pid;
	return 0;
}

/* A command with the container id as its last argument and nothing to parse. */
static int simple_call(const struct runtime *rt, const char *what, const char *const *extra,
		       const char *id, struct station_error *e)
{
	struct call c;
	int r = check_id(id, e);
	if (r < 0)
		return r;
	call_init(&c, rt, what, id, NULL);
	for (size_t i = 0; extra && extra[i]; i++)
		call_push(&c, extra[i]);
	call_push(&c, id);
	r = call_capture(rt, &c, e);
	call_done(&c);
	return r;
}

int runtime_start(const struct runtime *rt, const char *id, struct station_error *e)
{
	return simple_call(rt, "start", NULL, id, e);
}

static int parse_state(const struct runtime *rt, const struct call *c, struct runtime_state *ret,
		       struct station_error *e)
{
	json_error_t jerr;
	_cleanup_json_ json_t *j = json_loadb(c->out, c->out_len, 0, &jerr);
	enum runtime_status status;
	if (!j)
		return station_error_set(e, -EIO, NULL, "%s state \"%s\": invalid JSON: %s",
					 rt->name, c->id, jerr.text);
	const char *s = json_string_value(json_object_get(j, "status"));
	json_t *pid = json_object_get(j, "pid");
	if (runtime_status_from_string(s, &status) < 0)
		return station_error_set(e, -EIO, NULL, "%s state \"%s\": unknown status \"%s\"",
					 rt->name, c->id, s ? s : "");
	if (pid && (!json_is_integer(pid) || json_integer_value(pid) < 0 ||
		    json_integer_value(pid) > INT_MAX))
		return station_error_set(e, -EIO, NULL, "%s state \"%s\": invalid pid", rt->name,
					 c->id);
	ret->status = status;
	ret->pid = status == RUNTIME_STATUS_STOPPED ? 0 : (pid_t)json_integer_value(pid);
	return 0;
}

int runtime_state(const struct runtime *rt, const char *id, struct runtime_state *ret,
		  struct station_error *e)
{
	struct call c;
	int r = check_id(id, e);
	if (r < 0)
		return r;
	call_init(&c, rt, "state", id, NULL);
	call_push(&c, id);
	r = call_capture(rt, &c, e);
	if (r >= 0)
		r = parse_state(rt, &c, ret, e);
	call_done(&c);
	return r;
}

int runtime_kill(const struct runtime *rt, const char *id, int sig, bool all,
		 struct station_error *e)
{
	struct call c;
	char signum[16];
	int r = check_id(id, e);
	if (r < 0)
		return r;
	if (sig <= 0 || sig >= NSIG)
		return station_error_set(e, -EINVAL, NULL, "invalid signal %d", sig);
	snprintf(signum, sizeof signum, "%d", sig);
	call_init(&c, rt, "kill", id, NULL);
	if (all)
		call_push(&c, "--all");
	call_push(&c, id);
	call_push(&c, signum);
	r = call_capture(rt, &c, e);
	call_done(&c);
	return r;
}

int runtime_delete(const struct runtime *rt, const char *id, struct station_error *e)
{
	static const char *const force[] = { "--force", NULL };
	struct station_error ignored = {};
	int r = simple_call(rt, "delete", force, id, e ? e : &ignored);
	if (r == -ENOENT) {
		if (e)
			*e = (struct station_error){};
		return 0;
	}
	return r;
}

/* Where criu's images are (written or read) and its log and work files go. */
static void call_push_criu_dirs(struct call *c, const char *image_dir, const char *work_dir)
{
	call_push(c, "--image-path");
	call_push(c, image_dir);
	call_push(c, "--work-path");
	call_push(c, work_dir);
}

/* runc: the images in image_dir, criu's log (dump.log) and work files in work_dir; the
 * container runs on. criu: the criu binary runc is to run (NULL: runc's PATH's). */
int runtime_checkpoint(const struct runtime *rt, const char *id, const char *criu,
		       const char *image_dir, const char *work_dir, struct station_error *e)
{
	struct call c;
	int r = check_id(id, e);
	if (r < 0)
		return r;
	if (rt->kind != RUNTIME_RUNC)
		return station_error_set(e, -EOPNOTSUPP, NULL,
					 "%s checkpoints are not taken here (runc only)", rt->name);
	call_init_criu(&c, rt, "checkpoint", id, NULL, criu);
	call_push(&c, "--leave-running");
	call_push_criu_dirs(&c, image_dir, work_dir);
	call_push(&c, id);
	r = call_capture(rt, &c, e);
	call_done(&c);
	return r;
}

/* runc restore of id from image_dir into bundle (its config.json: the new cgroup path and
 * binds; runc maps bind mounts by destination), detached; criu's restore.log and work files in
 * work_dir. The restored init's pid in *ret_pid. */
int runtime_restore(const struct runtime *rt, const char *id, const char *criu,
		    const char *image_dir, const char *work_dir, const char *bundle, pid_t *ret_pid,
		    struct station_error *e)
{
	char pid_file[PATH_MAX];
	struct call c;
	int r = check_id(id, e);
	if (r < 0)
		return r;
	if (rt->kind != RUNTIME_RUNC)
		return station_error_set(e, -EOPNOTSUPP, NULL,
					 "%s restores no checkpoint here (runc only)", rt->name);
	if (snprintf(pid_file, sizeof pid_file, "%s/container.pid", bundle) >= (int)sizeof pid_file)
		return station_error_set(e, -ENAMETOOLONG, NULL, "bundle path too long");
	(void)unlink(pid_file);
	call_init_criu(&c, rt, "restore", id, NULL, criu);
	call_push(&c, "--detach");
	call_push_criu_dirs(&c, image_dir, work_dir);
	call_push(&c, "--bundle");
	call_push(&c, bundle);
	call_push(&c, "--pid-file");
	call_push(&c, pid_file);
	call_push(&c, id);
	r = call_capture(rt, &c, e);
	call_done(&c);
	if (r < 0)
		return r;
	pid_t pid = 0;
	r = read_pid_file(pid_file, &pid);
	if (r < 0)
		return station_error_set(e, r, NULL, "%s restore \"%s\": no pid in \"%s\": %s",
					 rt->name, id, pid_file, strerror(-r));
	*ret_pid = pid;
	return 0;
}
