/* SPDX-License-Identifier: MIT */
#include "agent/spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <inttypes.h>
#include <grp.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "basic/cleanup.h"
#include "basic/util.h"
#include "basic/log.h"
#include "event/event.h"
#include "proto/agent-proto.h"
#include "proto/frame.h"

#define PROCS_MAX (1024u * 1024)

static _Noreturn void child_fail(int fd, int stage, int err)
{
	struct spawn_error e = { .stage = stage, .err = err };

	(void)!write(fd, &e, sizeof e);
	_exit(127);
}

/* ---- groups' cgroup.procs, kept open ----------------------------------------------------------
 * Joining a group is a write of "0" to its cgroup.procs in every hierarchy. Opening those files
 * is a path walk through cgroupfs each time (the costlier half of the join); the groups the
 * agent makes are used again and again (the pool), so their files are opened once, write-only
 * (no read buffer behind them: a few hundred bytes of kernel memory each), and closed when the
 * group is freed. The forked child finds them here without allocating. */

struct attach_files {
	struct attach_files *next;
	const struct cgroup *cg;
	size_t n;
	int fd[CGROUP_MAX_DIRS];
};

/* A bound on the fds this holds (live runs have pipes to open too). */
#define ATTACH_FILES_MAX 20

static struct attach_files *attach_files;
static size_t n_attach_files;

static void attach_files_close(struct attach_files *a)
{
	for (size_t i = 0; i < a->n; i++)
		close(a->fd[i]);
	free(a);
}

/* Best effort: without them the child opens the files by path, as before. */
static void attach_files_open(const struct cgroup *cg)
{
	struct attach_files *a;

	if (n_attach_files >= ATTACH_FILES_MAX || cg->n_dirs > CGROUP_MAX_DIRS)
		return;
	a = calloc(1, sizeof *a);
	if (!a)
		return;
	a->cg = cg;
	for (size_t i = 0; i < cg->n_dirs; i++) {
		char path[PATH_MAX];
		int n = snprintf(path, sizeof path, "%s/cgroup.procs", cg->dirs[i]);

		if (n < 0 || (size_t)n >= sizeof path)
			break;
		a->fd[a->n] = open(path, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
		if (a->fd[a->n] < 0)
			break;
		a->n++;
	}
	if (a->n != cg->n_dirs) {
		attach_files_close(a);
		return;
	}
	a->next = attach_files;
	attach_files = a;
	n_attach_files++;
}

static const struct attach_files *attach_files_find(const struct cgroup *cg)
{
	for (const struct attach_files *a = attach_files; a; a = a->next)
		if (a->cg == cg)
			return a;
	return NULL;
}

void spawn_cgroup_free(struct cgroup *cg)
{
	if (!cg)
		return;
	for (struct attach_files **p = &attach_files; *p; p = &(*p)->next)
		if ((*p)->cg == cg) {
			struct attach_files *a = *p;
			*p = a->next;
			attach_files_close(a);
			n_attach_files--;
			break;
		}
	cgroup_free(cg);
}

/* In the child: the caller joins cg, through the kept files when there are. */
static int attach_self(const struct cgroup *cg)
{
	const struct attach_files *a = attach_files_find(cg);

	if (!a)
		return cgroup_attach(cg, 0);
	for (size_t i = 0; i < a->n; i++) {
		ssize_t n;

		do
			n = write(a->fd[i], "0", 1);
		while (n < 0 && errno == EINTR);
		if (n < 0)
			return -errno;
	}
	return 0;
}

/* In the forked child: only system calls and the cgroup write, nothing that logs. */
static _Noreturn void child_exec(const struct spawn_child *c)
{
	struct sigaction dfl = { .sa_handler = SIG_DFL };
	char *argv[] = { (char *)"sh", (char *)"-c", (char *)c->command, NULL };
	sigset_t none;
	int k;

	if (c->cg && (k = attach_self(c->cg)) < 0)
		child_fail(c->errpipe, SPAWN_STAGE_CGROUP, -k);
	if (c->set_user && (setgroups(0, NULL) < 0 || setgid(c->gid) < 0 || setuid(c->uid) < 0))
		child_fail(c->errpipe, SPAWN_STAGE_USER, errno);
	if (c->session ? setsid() < 0 : setpgid(0, 0) < 0)
		child_fail(c->errpipe, SPAWN_STAGE_SETPGID, errno);
	/* exec resets handled signals by itself; only what the agent ignores is inherited */
	(void)sigaction(SIGPIPE, &dfl, NULL);
	sigemptyset(&none);
	(void)sigprocmask(SIG_SETMASK, &none, NULL);
	for (int i = 0; i < 3; i++)
		if (dup2(c->stdio[i], i) < 0)
			child_fail(c->errpipe, SPAWN_STAGE_STDIO, errno);
	if (c->session && ioctl(0, TIOCSCTTY, 0) < 0)
		child_fail(c->errpipe, SPAWN_STAGE_STDIO, errno);
	k = close_all_fds_except(&c->errpipe, 1);
	if (k < 0)
		child_fail(c->errpipe, SPAWN_STAGE_FDS, -k);
	if (chdir(c->cwd) < 0)
		child_fail(c->errpipe, SPAWN_STAGE_CWD, errno);
	if (c->path && c->argv)
		execve(c->path, c->argv, c->envp);
	else
		execve(SPAWN_SHELL, argv, c->envp);
	child_fail(c->errpipe, SPAWN_STAGE_EXEC, errno);
}

#ifndef __SANITIZE_ADDRESS__
/* The child runs on its own stack in our memory until it execs (posix_spawn's way): no page
 * tables to copy, no copy-on-write faults after it, and we are suspended meanwhile, so nothing
 * it touches changes under it. It only makes system calls and writes its own stack. */
static char child_stack[128 * 1024] __attribute__((aligned(16)));

static int child_trampoline(void *arg)
{
	child_exec(arg);
}

int spawn_fork(const struct spawn_child *c, pid_t *ret_pid)
{
	pid_t pid = clone(child_trampoline, child_stack + sizeof child_stack,
			  CLONE_VM | CLONE_VFORK | SIGCHLD, (void *)c);
	if (pid < 0)
		return -errno;
	*ret_pid = pid;
	return 0;
}
#else
/* Sanitizer builds: a plain fork, since the sanitizers' runtime cannot share memory with a
 * child that runs instrumented code. */
int spawn_fork(const struct spawn_child *c, pid_t *ret_pid)
{
	pid_t pid = fork();

	if (pid == 0)
		child_exec(c);
	if (pid < 0)
		return -errno;
	*ret_pid = pid;
	return 0;
}
#endif

int spawn_errpipe_read(int fd, struct spawn_error *ret)
{
	struct spawn_error e;
	ssize_t n;

	do
		n = read(fd, &e, sizeof e);
	while (n < 0 && errno == EINTR);
	if (n < 0 && errno == EAGAIN)
		return -EAGAIN;
	if (n == (ssize_t)sizeof e) {
		*ret = e;
		return 0;
	}
	return 1;
}

char *spawn_reason(const char *what, const char *arg, int err)
{
	char *s;
	int n = arg ? asprintf(&s, "%s \"%s\": %s", what, arg, strerror(err)) :
		      asprintf(&s, "%s: %s", what, strerror(err));

	return n < 0 ? NULL : s;
}

char *spawn_error_reason(const struct spawn_error *e, const char *cwd, const char *path)
{
	switch (e->stage) {
	case SPAWN_STAGE_CGROUP:
		return spawn_reason("cgroup attach", NULL, e->err);
	case SPAWN_STAGE_CWD:
		return spawn_reason("cwd", cwd, e->err);
	case SPAWN_STAGE_EXEC:
		return spawn_reason("exec", path ? path : SPAWN_SHELL, e->err);
	case SPAWN_STAGE_USER:
		return spawn_reason("switch user", NULL, e->err);
	default:
		return spawn_reason("child setup", NULL, e->err);
	}
}

static void env_put(char **envp, size_t *n, char *entry)
{
	size_t key = strcspn(entry, "=") + 1;

	for (size_t i = 0; i < *n; i++)
		if (strncmp(envp[i], entry, key) == 0) {
			envp[i] = entry; /* later wins, in the earlier one's place */
			return;
		}
	envp[(*n)++] = entry;
}

int spawn_build_env(char *const *base, size_t n_base, const char *home_entry, const char *cwd,
		    char *const *extra, size_t n_extra, char ***ret, char **ret_pwd)
{
	_cleanup_free_ char *pwd = NULL;
	char **envp;
	size_t n = 0;

	if (asprintf(&pwd, "PWD=%s", cwd) < 0)
		return -ENOMEM;
	envp = calloc(3 + n_base + n_extra + 1, sizeof *envp);
	if (!envp)
		return -ENOMEM;
	env_put(envp, &n, (char *)SPAWN_PATH_ENTRY);
	env_put(envp, &n, (char *)home_entry);
	env_put(envp, &n, pwd);
	for (size_t i = 0; i < n_base; i++)
		env_put(envp, &n, base[i]);
	for (size_t i = 0; i < n_extra; i++)
		env_put(envp, &n, extra[i]);
	*ret = envp;
	*ret_pwd = TAKE_PTR(pwd);
	return 0;
}

/* Made ahead of time and kept between commands. */
#define SPAWN_POOL_SIZE 2
/* Kept after use while commands run side by side (16 clients would otherwise make and remove
 * a group in every hierarchy for most commands); back to SPAWN_POOL_SIZE once no command has
 * finished for POOL_TRIM_USEC. */
#define SPAWN_POOL_MAX 16
#define POOL_TRIM_USEC 2000000ull
/* Then none at all once no command has finished for POOL_IDLE_USEC: an idle workspace holds
 * no spare group. Each is a memory cgroup, and the kernel's memory for one grows with every
 * filesystem mounted on the host (its shrinker map): at a thousand container workspaces, more
 * than the agent itself (BENCHMARKS.md, density). The first command after that pays the mkdir
 * that the pool saves the others. */
#define POOL_IDLE_USEC 30000000ull

/* The agent has one workspace group: one pool, for that parent. */
static struct {
	const struct cgroup *parent;
	struct cgroup *items[SPAWN_POOL_MAX];
	size_t n;
	uint64_t next;
	struct event_source *trim;
	bool trimmed; /* down to SPAWN_POOL_SIZE: the timer's next step empties it */
} pool;

static int cgroup_make(const struct cgroup *parent, const char *name, struct cgroup **ret);

void spawn_cgroup_pool_fill(const struct cgroup *parent)
{
	if (!parent)
		return;
	if (pool.parent != parent) {
		while (pool.n > 0) {
			struct cgroup *cg = pool.items[--pool.n];
			(void)cgroup_remove(cg);
			spawn_cgroup_free(cg);
		}
		pool.parent = parent;
	}
	while (pool.n < SPAWN_POOL_SIZE) {
		char name[32];
		snprintf(name, sizeof name, "p-%" PRIu64, ++pool.next);
		if (cgroup_make(parent, name, &pool.items[pool.n]) < 0)
			return;
		pool.n++;
	}
}

static int on_pool_trim(struct event_source *s, uint64_t now, void *userdata)
{
	struct event_loop *loop = userdata;
	size_t keep = pool.trimmed ? 0 : SPAWN_POOL_SIZE;

	while (pool.n > keep)
		spawn_cgroup_release(loop, pool.items[--pool.n]);
	if (!pool.trimmed && pool.n > 0 && s) {
		pool.trimmed = true;
		(void)event_source_set_time(s, now_usec() + POOL_IDLE_USEC - POOL_TRIM_USEC);
	}
	return 0;
}

void spawn_cgroup_pool_trim(struct event_loop *loop)
{
	uint64_t at = now_usec() + POOL_TRIM_USEC;

	pool.trimmed = false;
	if (pool.n == 0)
		return;
	if (pool.trim)
		(void)event_source_set_time(pool.trim, at);
	else if (event_add_timer(loop, &pool.trim, at, on_pool_trim, loop) < 0)
		on_pool_trim(NULL, 0, loop); /* no timer: at once, down to the idle size */
}

void spawn_checkpoint_prepare(void)
{
	while (attach_files) {
		struct attach_files *a = attach_files;
		attach_files = a->next;
		/* the group's own (cgroup_keep_files() took it as non-const) */
		cgroup_unkeep_files((struct cgroup *)a->cg);
		attach_files_close(a);
	}
	n_attach_files = 0;
	while (pool.n > 0) {
		struct cgroup *cg = pool.items[--pool.n];
		(void)cgroup_remove(cg);
		spawn_cgroup_free(cg);
	}
}

void spawn_cgroup_pool_stop(void)
{
	event_source_free(pool.trim);
	pool.trim = NULL;
}

bool spawn_env_entry_valid(const char *s)
{
	if (!(s[0] == '_' || (s[0] >= 'A' && s[0] <= 'Z') || (s[0] >= 'a' && s[0] <= 'z')))
		return false;
	for (s++; *s != '='; s++)
		if (!(*s == '_' || (*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') ||
		      (*s >= '0' && *s <= '9')))
			return false;
	return true;
}

int spawn_env_append(char ***env, size_t *n, const uint8_t *val, size_t len)
{
	char *s, **e;
	int r;

	if (*n >= PROTO_MAX_ENV)
		return -E2BIG;
	r = frame_val_strdup(val, len, PROTO_MAX_ENV_ENTRY, &s);
	if (r < 0)
		return r;
	if (!strchr(s, '=') || !spawn_env_entry_valid(s)) {
		free(s);
		return -EBADMSG;
	}
	e = realloc(*env, (*n + 1) * sizeof *e);
	if (!e) {
		free(s);
		return -ENOMEM;
	}
	*env = e;
	e[(*n)++] = s;
	return 0;
}

void spawn_env_free(char **env, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(env[i]);
	free(env);
}

#define RELEASE_RETRY_USEC 20000ull
#define RELEASE_TRIES 100

struct release {
	struct release *next;
	struct cgroup *cg;
	struct event_source *timer;
	unsigned tries;
};

static struct release *releases;

static void release_free(struct release *rl)
{
	for (struct release **p = &releases; *p; p = &(*p)->next)
		if (*p == rl) {
			*p = rl->next;
			break;
		}
	event_source_free(rl->timer);
	spawn_cgroup_free(rl->cg);
	free(rl);
}

static int on_release_retry(struct event_source *s, uint64_t now, void *userdata)
{
	struct release *rl = userdata;
	int k = cgroup_remove(rl->cg);

	if (k == -EBUSY && ++rl->tries < RELEASE_TRIES) {
		if (rl->tries % 10 == 0)
			(void)cgroup_kill(rl->cg);
		(void)event_source_set_time(rl->timer, now + RELEASE_RETRY_USEC);
		return 0;
	}
	if (k < 0)
		log_warn("cannot remove a command cgroup", "cgroup", rl->cg->dirs[0], "error",
			 strerror(-k), NULL);
	release_free(rl);
	return 0;
}

void spawn_cgroup_release(struct event_loop *loop, struct cgroup *cg)
{
	struct release *rl;
	int k = cgroup_remove(cg);

	if (k != -EBUSY) {
		if (k < 0)
			log_warn("cannot remove a command cgroup", "cgroup", cg->dirs[0], "error",
				 strerror(-k), NULL);
		spawn_cgroup_free(cg);
		return;
	}
	rl = calloc(1, sizeof *rl);
	if (!rl || event_add_timer(loop, &rl->timer, now_usec() + RELEASE_RETRY_USEC,
				   on_release_retry, rl) < 0) {
		log_warn("cannot remove a command cgroup", "cgroup", cg->dirs[0], NULL);
		free(rl);
		spawn_cgroup_free(cg);
		return;
	}
	rl->cg = cg;
	rl->next = releases;
	releases = rl;
}

void spawn_cgroup_release_kill(void)
{
	for (struct release *rl = releases; rl; rl = rl->next)
		(void)cgroup_kill(rl->cg);
}

bool spawn_cgroup_release_empty(void)
{
	for (struct release *rl = releases; rl; rl = rl->next)
		if (cgroup_is_empty(rl->cg) == 0)
			return false;
	return true;
}

void spawn_cgroup_release_remove(void)
{
	for (struct release *rl = releases; rl; rl = rl->next)
		(void)cgroup_remove(rl->cg);
}

void spawn_cgroup_release_free(void)
{
	while (releases)
		release_free(releases);
}

bool spawn_cgroup_recycle(const struct cgroup *parent, struct cgroup *cg,
			  const struct cgroup_stats *stats, bool known_empty)
{
	if (pool.parent != parent || pool.n >= SPAWN_POOL_MAX || stats->oom_kills > 0 ||
	    (!known_empty && cgroup_is_empty(cg) != 1) || cgroup_reset_stats(cg) < 0)
		return false;
	pool.items[pool.n++] = cg;
	return true;
}

int spawn_cgroup_new(const struct cgroup *parent, const char *name, struct cgroup **ret)
{
	if (pool.parent == parent && pool.n > 0) {
		*ret = pool.items[--pool.n];
		return 0;
	}
	return cgroup_make(parent, name, ret);
}

static int cgroup_make(const struct cgroup *parent, const char *name, struct cgroup **ret)
{
	struct cgroup *cg = NULL;
	int k = cgroup_child_leaf(parent, name, &cg);

	if (k >= 0)
		k = cgroup_create(cg);
	if (k < 0) {
		if (cg)
			cgroup_free(cg);
		return k;
	}
	/* the files read and reset after each command, kept open like the attach files (and
	 * within their bound) */
	if (n_attach_files < ATTACH_FILES_MAX)
		cgroup_keep_files(cg);
	attach_files_open(cg);
	*ret = cg;
	return 0;
}

/* A process that has exited but is not reaped yet still shows in cgroup.procs on some
 * kernels: it counts as gone. */
static bool pid_alive(pid_t pid)
{
	char path[64], *s = NULL, *p;
	size_t n;
	bool alive;

	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	if (read_file(path, 4096, &s, &n) < 0)
		return false;
	p = strrchr(s, ')');
	alive = p && p[1] == ' ' && p[2] != 'Z' && p[2] != 'X';
	free(s);
	return alive;
}

/* Signals (sig > 0) and counts every live process of the group; returns the count or -errno. */
static int cgroup_foreach(const struct cgroup *cg, int sig)
{
	_cleanup_free_ char *s = NULL;
	char path[4200], *save = NULL;
	size_t len;
	int k, count = 0;

	if (!cg || cg->n_dirs == 0)
		return -EINVAL;
	snprintf(path, sizeof path, "%s/cgroup.procs", cg->dirs[0]);
	k = read_file(path, PROCS_MAX, &s, &len);
	if (k < 0)
		return k;
	for (char *l = strtok_r(s, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		uint64_t pid;

		if (parse_u64(l, INT32_MAX, &pid) < 0 || pid == 0 || !pid_alive((pid_t)pid))
			continue;
		if (sig > 0 && kill((pid_t)pid, sig) < 0)
			continue;
		count++;
	}
	return count;
}

int spawn_cgroup_signal(const struct cgroup *cg, int sig)
{
	return sig > 0 ? cgroup_foreach(cg, sig) : -EINVAL;
}

int spawn_cgroup_count(const struct cgroup *cg)
{
	return cgroup_foreach(cg, 0);
}
