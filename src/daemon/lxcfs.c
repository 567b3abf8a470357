/* SPDX-License-Identifier: MIT */
/* Our own lxcfs: started, adopted, watched and started again (lxcfs.h). */

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/magic.h>
#include <sys/mount.h>
#include <sys/statfs.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "basic/cleanup.h"
#include "basic/log.h"
#include "basic/util.h"
#include "event/event.h"
#include "event/work.h"
#include "lxcfs.h"

extern char **environ;

#define MOUNT_POLL_USEC 100000ull   /* how often a starting lxcfs is looked for in mountinfo */
#define MOUNT_WAIT_USEC 15000000ull /* how long it may take to mount */
#define RESTART_MIN_USEC 500000ull  /* first restart delay, doubled up to the max */
#define RESTART_MAX_USEC 30000000ull
#define OPERATOR_POLL_USEC 5000000ull /* how often an operator's mount is looked at */
#define STOP_WAIT_MS 3000
/* A child reads <dir>/proc/uptime this often and must be done within the timeout: an lxcfs
 * that takes longer is "not answering" and new containers get the host's view (a start binding
 * a hung FUSE file would hang in the runtime until its timeout). */
#define PROBE_INTERVAL_USEC 5000000ull
#define PROBE_TIMEOUT_USEC 5000000ull
#define MOUNTINFO_MAX (16u << 20)

enum lxcfs_mode {
	LXCFS_OFF,
	LXCFS_OWN,	/* we start and supervise it */
	LXCFS_OPERATOR, /* someone else serves it at dir; we look */
};

struct lxcfs {
	struct event_loop *loop;
	enum lxcfs_mode mode;
	char dir[PATH_MAX];
	char pidfile[PATH_MAX];
	char log[PATH_MAX];
	char binary[PATH_MAX]; /* own: the lxcfs found on PATH; empty: not installed */
	pid_t pid;
	int pidfd;
	bool child; /* pid is our child (we reap it), not an adopted one */
	struct event_source *watch, *timer;
	bool serving;
	bool hung;	 /* mounted, but the last probe did not finish in time */
	pid_t probe_pid; /* the probe child, 0: none */
	int probe_fd;	 /* its pidfd */
	/* the probe's fork runs on this pool's thread: a fork copies the controller's page tables
	 * (milliseconds of CPU, more the more workspaces it holds), never on the loop */
	struct event_work_pool *probe_pool;
	bool probe_forking; /* its job is queued or running */
	struct event_source *probe_watch, *probe_timer;
	uint64_t probe_started_at;
	unsigned long serial;
	uint64_t started_at, restart_delay;
	unsigned restarts;
	char error[3 * PATH_MAX];
};

static const char *const search_path[] = { "/usr/bin",	      "/usr/sbin", "/usr/local/bin",
					   "/usr/local/sbin", "/bin",	   "/sbin" };

static void find_binary(struct lxcfs *x)
{
	for (size_t i = 0; i < ELEMENTSOF(search_path); i++) {
		snprintf(x->binary, sizeof x->binary, "%s/lxcfs", search_path[i]);
		if (access(x->binary, X_OK) == 0)
			return;
	}
	x->binary[0] = 0;
}

/* mountinfo escapes space, tab, newline and backslash as \ooo. */
static void mountinfo_escape(const char *s, char *out, size_t n)
{
	size_t j = 0;
	for (; *s && j + 5 < n; s++) {
		if (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\\')
			j += (size_t)snprintf(out + j, n - j, "\\%03o", (unsigned char)*s);
		else
			out[j++] = *s;
	}
	out[j] = 0;
}

/* The id of the FUSE mount at dir (the topmost one), 0 when none. Kernel data only: nothing
 * here reaches the FUSE server. */
static unsigned long fuse_mount_id(const char *dir)
{
	_cleanup_free_ char *text = NULL;
	size_t len = 0;
	char want[PATH_MAX * 4];
	unsigned long found = 0;
	mountinfo_escape(dir, want, sizeof want);
	if (read_file("/proc/self/mountinfo", MOUNTINFO_MAX, &text, &len) < 0)
		return 0;
	for (char *line = text, *next; line && *line; line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = 0;
		unsigned long id;
		char point[PATH_MAX * 4];
		/* id parent major:minor root mountpoint ... - fstype source opts */
		if (sscanf(line, "%lu %*u %*s %*s %4095s", &id, point) != 2 ||
		    strcmp(point, want) != 0)
			continue;
		const char *sep = strstr(line, " - ");
		if (sep && strncmp(sep + 3, "fuse", 4) == 0)
			found = id;
		else
			found = 0; /* something mounted over it */
	}
	return found;
}

static void set_error(struct lxcfs *x, const char *fmt, const char *arg)
{
	snprintf(x->error, sizeof x->error, fmt, arg);
}

static void forget_process(struct lxcfs *x)
{
	event_source_free(x->watch);
	x->watch = NULL;
	if (x->pidfd >= 0)
		close(x->pidfd);
	x->pidfd = -1;
	x->pid = 0;
	x->child = false;
	x->serving = false;
	x->hung = false;
	x->serial = 0;
}

static int on_timer(struct event_source *s, uint64_t now, void *userdata);

static int arm_timer(struct lxcfs *x, uint64_t delay)
{
	if (!x->timer)
		return event_add_timer(x->loop, &x->timer, now_usec() + delay, on_timer, x);
	return event_source_set_time(x->timer, now_usec() + delay);
}
static int on_exit_(struct event_source *s, int fd, uint32_t revents, void *userdata);

static int watch_pid(struct lxcfs *x, pid_t pid, bool child)
{
	int fd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (fd < 0)
		return negative_errno();
	x->pid = pid;
	x->pidfd = fd;
	x->child = child;
	return event_add_io(x->loop, &x->watch, fd, EPOLLIN, on_exit_, x);
}

/* A dead lxcfs leaves its mount behind ("transport endpoint is not connected"): detached so a
 * new one mounts on a clean point. Containers started under the old one keep their dead binds
 * until they restart (docs/operations.md, "lxcfs"). */
static void unmount_stale(struct lxcfs *x)
{
	for (int i = 0; i < 8 && fuse_mount_id(x->dir); i++)
		if (umount2(x->dir, MNT_DETACH) < 0)
			break;
}

static int spawn(struct lxcfs *x)
{
	posix_spawnattr_t attr;
	posix_spawn_file_actions_t fa;
	sigset_t none, def;
	pid_t pid;
	/* -l: a per-container /proc/loadavg; pidfds: no pid reuse races */
	char *argv[] = { x->binary,
			 "--foreground",
			 "--enable-loadavg",
			 "--enable-pidfd",
			 "--pidfile",
			 x->pidfile,
			 x->dir,
			 NULL };

	unmount_stale(x);
	int r = mkdir_p(x->dir, 0755);
	if (r < 0) {
		set_error(x, "cannot make the mount point: %s", strerror(-r));
		return r;
	}
	sigemptyset(&none);
	sigfillset(&def);
	posix_spawnattr_init(&attr);
	posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK |
						POSIX_SPAWN_SETSIGDEF);
	posix_spawnattr_setsigmask(&attr, &none);
	posix_spawnattr_setsigdefault(&attr, &def);
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 1, x->log, O_WRONLY | O_CREAT | O_APPEND, 0600);
	posix_spawn_file_actions_adddup2(&fa, 1, 2);
	r = posix_spawn(&pid, x->binary, &fa, &attr, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&attr);
	if (r != 0) {
		set_error(x, "cannot start lxcfs: %s", strerror(r));
		return -r;
	}
	r = watch_pid(x, pid, true);
	if (r < 0) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		set_error(x, "cannot watch lxcfs: %s", strerror(-r));
		return r;
	}
	x->started_at = now_usec();
	char p[24];
	snprintf(p, sizeof p, "%d", (int)pid);
	log_info("lxcfs started", "pid", p, "mount", x->dir, NULL);
	set_error(x, "lxcfs (pid %s) is starting", p);
	return arm_timer(x, MOUNT_POLL_USEC);
}

static void schedule_restart(struct lxcfs *x)
{
	x->restart_delay = x->restart_delay ? MIN(2 * x->restart_delay, RESTART_MAX_USEC) :
					      RESTART_MIN_USEC;
	arm_timer(x, x->restart_delay);
}

static int on_exit_(struct event_source *s, int fd, uint32_t revents, void *userdata)
{
	struct lxcfs *x = userdata;
	siginfo_t si = { 0 };
	char how[64] = "exited";
	if (x->child && waitid((idtype_t)P_PIDFD, (id_t)x->pidfd, &si, WEXITED | WNOHANG) == 0 &&
	    si.si_pid != 0)
		snprintf(how, sizeof how,
			 si.si_code == CLD_EXITED ? "exited with status %d" :
						    "was killed by signal %d",
			 si.si_status);
	char p[24];
	snprintf(p, sizeof p, "%d", (int)x->pid);
	log_warn("lxcfs gone, starting it again", "pid", p, "how", how, NULL);
	snprintf(x->error, sizeof x->error,
		 "lxcfs (pid %s) %s; starting it again (see %s). Container workspaces started "
		 "under it read their /proc views from a dead mount until they restart",
		 p, how, x->log);
	forget_process(x);
	x->restarts++;
	unmount_stale(x);
	schedule_restart(x);
	return 0;
}

static void probe_start(struct lxcfs *x);

static int on_timer(struct event_source *s, uint64_t now, void *userdata)
{
	struct lxcfs *x = userdata;
	if (x->mode == LXCFS_OPERATOR) {
		unsigned long id = fuse_mount_id(x->dir);
		x->serving = id != 0;
		x->serial = id;
		if (!id)
			set_error(x, "no FUSE filesystem is mounted at \"%s\" (--lxcfs)", x->dir);
		event_source_set_time(s, now + OPERATOR_POLL_USEC);
		return 0;
	}
	if (!x->pid) { /* a restart is due */
		if (spawn(x) < 0)
			schedule_restart(x);
		return 0;
	}
	if (x->serving)
		return 0;
	unsigned long id = fuse_mount_id(x->dir);
	if (id) {
		x->serving = true;
		x->serial = (unsigned long)x->pid;
		x->restart_delay = 0;
		log_info("lxcfs serving", "mount", x->dir, NULL);
		if (!x->probe_pid)
			probe_start(x); /* covers the cgroup tree at once */
		return 0;
	}
	if (now - x->started_at > MOUNT_WAIT_USEC) {
		snprintf(x->error, sizeof x->error,
			 "lxcfs (pid %d) did not mount \"%s\" within %llu s (see %s)", (int)x->pid,
			 x->dir, MOUNT_WAIT_USEC / 1000000, x->log);
		log_warn("lxcfs did not mount, killed", "mount", x->dir, NULL);
		kill(x->pid, SIGKILL); /* on_exit_ restarts it */
		return 0;
	}
	event_source_set_time(s, now + MOUNT_POLL_USEC);
	return 0;
}

/* --- the probe: a child reads one file; the controller never does --- */

static void probe_forget(struct lxcfs *x)
{
	event_source_free(x->probe_watch);
	x->probe_watch = NULL;
	if (x->probe_fd >= 0)
		close(x->probe_fd);
	x->probe_fd = -1;
	x->probe_pid = 0;
}

static int on_probe_exit(struct event_source *s, int fd, uint32_t revents, void *userdata)
{
	struct lxcfs *x = userdata;
	siginfo_t si = { 0 };
	bool ok = waitid((idtype_t)P_PIDFD, (id_t)x->probe_fd, &si, WEXITED | WNOHANG) == 0 &&
		  si.si_pid != 0 && si.si_code == CLD_EXITED && si.si_status == 0;
	bool late = now_usec() - x->probe_started_at > PROBE_TIMEOUT_USEC;
	probe_forget(x);
	if (ok && !late && x->hung) {
		x->hung = false;
		log_info("lxcfs answers again", "mount", x->dir, NULL);
	}
	return 0;
}

/* In the child (system calls only: the controller has threads). lxcfs also serves the host's
 * whole cgroup tree, with rmdir, under DIR/cgroup: an rm -rf of the controller's root while
 * lxcfs is mounted there would remove every empty cgroup of the host. Containers are given
 * only its proc and sys files, so the tree is covered with an empty read-only tmpfs (a lazy
 * unmount of DIR takes it along). Done here because the path walk reaches lxcfs. */
static void probe_child(const char *dir)
{
	char path[PATH_MAX + 16], buf[256];
	struct statfs sf;
	snprintf(path, sizeof path, "%s/cgroup", dir);
	if (statfs(path, &sf) == 0 && sf.f_type != TMPFS_MAGIC)
		(void)mount("station-lxcfs-hide", path, "tmpfs",
			    MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=4k,mode=0555");
	snprintf(path, sizeof path, "%s/proc/uptime", dir);
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	_exit(fd >= 0 && read(fd, buf, sizeof buf) > 0 ? 0 : 1);
}

struct probe_job {
	struct lxcfs *x;
	char dir[PATH_MAX];
	pid_t pid; /* the child, or -errno */
	int fd;	   /* its pidfd, or -errno */
	uint64_t started_at;
};

/* On the pool's thread. */
static void probe_fork(void *userdata)
{
	struct probe_job *j = userdata;
	j->started_at = now_usec();
	j->pid = fork();
	if (j->pid == 0)
		probe_child(j->dir);
	if (j->pid < 0) {
		j->pid = negative_errno();
		return;
	}
	j->fd = (int)syscall(SYS_pidfd_open, j->pid, 0);
	if (j->fd < 0)
		j->fd = negative_errno();
}

/* On the loop: the child is watched by its pidfd, like before. */
static void probe_forked(void *userdata, bool cancelled)
{
	struct probe_job *j = userdata;
	struct lxcfs *x = j->x;
	x->probe_forking = false;
	if (!cancelled && j->pid > 0 && j->fd >= 0 &&
	    event_add_io(x->loop, &x->probe_watch, j->fd, EPOLLIN, on_probe_exit, x) >= 0) {
		x->probe_pid = j->pid;
		x->probe_fd = j->fd;
		x->probe_started_at = j->started_at;
	} else if (j->pid > 0) {
		kill(j->pid, SIGKILL);
		waitpid(j->pid, NULL, 0);
		if (j->fd >= 0)
			close(j->fd);
	}
	free(j);
}

static void probe_start(struct lxcfs *x)
{
	if (x->probe_pid || x->probe_forking)
		return;
	struct probe_job *j = calloc(1, sizeof *j);
	if (!j)
		return;
	*j = (struct probe_job){ .x = x, .pid = -ECHILD, .fd = -EBADF };
	snprintf(j->dir, sizeof j->dir, "%s", x->dir);
	if ((x->probe_pool || event_work_pool_new(x->loop, 1, &x->probe_pool) >= 0) &&
	    event_work_queue(x->probe_pool, probe_fork, probe_forked, j) >= 0)
		x->probe_forking = true;
	else
		free(j);
}

/* A probe still running past its timeout: lxcfs does not answer. The child is killed (a read
 * lxcfs has not taken is interrupted; one it took and sits on keeps the child until lxcfs
 * answers or dies, and no second probe starts meanwhile). */
static int on_probe_timer(struct event_source *s, uint64_t now, void *userdata)
{
	struct lxcfs *x = userdata;
	if (x->probe_pid && now - x->probe_started_at > PROBE_TIMEOUT_USEC) {
		if (!x->hung) {
			log_warn("lxcfs does not answer reads; new containers get the host's view",
				 "mount", x->dir, NULL);
			x->hung = true;
		}
		kill(x->probe_pid, SIGKILL);
	} else if (!x->probe_pid && x->serving) {
		probe_start(x);
	}
	event_source_set_time(s,
			      now + (x->probe_pid ? PROBE_TIMEOUT_USEC / 2 : PROBE_INTERVAL_USEC));
	return 0;
}

/* An lxcfs a previous controller started on this root, still serving: ours again. */
static bool adopt(struct lxcfs *x)
{
	_cleanup_free_ char *text = NULL;
	size_t len = 0;
	uint64_t pid = 0;
	char exe[PATH_MAX], link[64];
	if (read_file(x->pidfile, 64, &text, &len) < 0)
		return false;
	while (len && (text[len - 1] == '\n' || text[len - 1] == ' '))
		text[--len] = 0;
	if (parse_u64(text, INT32_MAX, &pid) < 0 || pid < 2)
		return false;
	snprintf(link, sizeof link, "/proc/%d/exe", (int)pid);
	ssize_t n = readlink(link, exe, sizeof exe - 1);
	if (n <= 0)
		return false;
	exe[n] = 0;
	const char *base = strrchr(exe, '/');
	if (strcmp(base ? base + 1 : exe, "lxcfs") != 0 || !fuse_mount_id(x->dir))
		return false;
	if (watch_pid(x, (pid_t)pid, false) < 0) {
		forget_process(x);
		return false;
	}
	x->serving = true;
	x->serial = (unsigned long)pid;
	log_info("lxcfs adopted", "pid", text, "mount", x->dir, NULL);
	if (!x->probe_pid)
		probe_start(x); /* covers the cgroup tree if the last controller had not */
	return true;
}

int lxcfs_new(struct event_loop *loop, const char *mode, const char *root, struct lxcfs **ret)
{
	struct lxcfs *x = calloc(1, sizeof *x);
	if (!x)
		return -ENOMEM;
	x->loop = loop;
	x->pidfd = -1;
	x->probe_fd = -1;
	*ret = x;
	if (!mode || strcmp(mode, "off") == 0) {
		x->mode = LXCFS_OFF;
		set_error(x, "off (--lxcfs off): container workspaces see the host's /proc%s", "");
		return 0;
	}
	int r = event_add_timer(loop, &x->probe_timer, now_usec() + PROBE_INTERVAL_USEC,
				on_probe_timer, x);
	if (r < 0)
		return r;
	if (strcmp(mode, "auto") != 0) {
		x->mode = LXCFS_OPERATOR;
		snprintf(x->dir, sizeof x->dir, "%s", mode);
		return event_add_timer(loop, &x->timer, now_usec(), on_timer, x);
	}
	x->mode = LXCFS_OWN;
	snprintf(x->dir, sizeof x->dir, "%s/lxcfs", root);
	snprintf(x->pidfile, sizeof x->pidfile, "%s/lxcfs.pid", root);
	snprintf(x->log, sizeof x->log, "%s/lxcfs.log", root);
	find_binary(x);
	if (!x->binary[0]) {
		set_error(x,
			  "lxcfs is not installed (apt-get install lxcfs): container workspaces "
			  "see the host's /proc%s",
			  "");
		return 0;
	}
	r = event_add_timer(loop, &x->timer, UINT64_MAX, on_timer, x);
	if (r < 0)
		return r;
	if (adopt(x))
		return 0;
	if (spawn(x) < 0)
		schedule_restart(x);
	return 0;
}

const char *lxcfs_dir(const struct lxcfs *x)
{
	return x && x->serving && !x->hung ? x->dir : NULL;
}

unsigned long lxcfs_serial(const struct lxcfs *x)
{
	return x && x->serving ? x->serial : 0;
}

bool lxcfs_status(const struct lxcfs *x, char *msg, size_t n)
{
	if (x && x->serving && x->hung)
		snprintf(msg, n,
			 "lxcfs at \"%s\" does not answer reads within %llu s (hung?): container "
			 "workspaces started now get the host's /proc",
			 x->dir, PROBE_TIMEOUT_USEC / 1000000);
	else if (x && x->serving && x->mode == LXCFS_OWN)
		snprintf(msg, n, "lxcfs (pid %d) serves /proc views at \"%s\"%s", (int)x->pid,
			 x->dir, x->restarts ? " (restarted after it died)" : "");
	else if (x && x->serving)
		snprintf(msg, n, "lxcfs serves /proc views at \"%s\" (--lxcfs)", x->dir);
	else
		snprintf(msg, n, "%s", x ? x->error : "lxcfs: off");
	return x && x->serving && !x->hung;
}

bool lxcfs_disabled(const struct lxcfs *x)
{
	return !x || x->mode == LXCFS_OFF;
}

/* SIGTERM: lxcfs unmounts as it exits; bounded, then SIGKILL and a detach. */
static void stop(struct lxcfs *x)
{
	kill(x->pid, SIGTERM);
	struct pollfd p = { .fd = x->pidfd, .events = POLLIN };
	if (poll(&p, 1, STOP_WAIT_MS) <= 0) {
		kill(x->pid, SIGKILL);
		poll(&p, 1, STOP_WAIT_MS);
	}
	if (x->child)
		waitid((idtype_t)P_PIDFD, (id_t)x->pidfd, &(siginfo_t){ 0 }, WEXITED | WNOHANG);
	unmount_stale(x);
	unlink(x->pidfile);
	rmdir(x->dir);
}

void lxcfs_free(struct lxcfs *x, bool keep)
{
	if (!x)
		return;
	if (x->mode == LXCFS_OWN && x->pid > 0) {
		if (keep)
			log_info("lxcfs left serving the containers that still run", "mount",
				 x->dir, NULL);
		else
			stop(x);
	}
	/* a probe being forked ends (its done runs here), then it is killed like a running one */
	event_work_pool_free(TAKE_PTR(x->probe_pool));
	forget_process(x);
	if (x->probe_pid) {
		kill(x->probe_pid, SIGKILL);
		waitid((idtype_t)P_PIDFD, (id_t)x->probe_fd, &(siginfo_t){ 0 }, WEXITED | WNOHANG);
	}
	probe_forget(x);
	event_source_free(x->probe_timer);
	event_source_free(x->timer);
	free(x);
}
