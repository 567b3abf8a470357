/* SPDX-License-Identifier: MIT */
#pragma once

/* Forking a command for the agent: `/bin/sh -c COMMAND` in its own child cgroup of the
 * workspace cgroup, its own process group, stdio on the caller's fds, every other fd closed,
 * signals reset, cwd and environment set. A failure before exec is reported through a CLOEXEC
 * pipe (stage + errno). Below child.c, which forks runs, service attempts and terminals with
 * it; their cgroups are made and released here. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "cgroup/cgroup.h"

struct event_loop;

#define SPAWN_SHELL "/bin/sh"
#define SPAWN_PATH_ENTRY "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

/* Where a child failed before exec; sent with errno through the CLOEXEC pipe. */
enum spawn_stage {
	SPAWN_STAGE_CGROUP = 1,
	SPAWN_STAGE_SETPGID,
	SPAWN_STAGE_STDIO,
	SPAWN_STAGE_FDS,
	SPAWN_STAGE_CWD,
	SPAWN_STAGE_EXEC,
	SPAWN_STAGE_USER,
};

struct spawn_error {
	int stage;
	int err;
};

struct spawn_child {
	const struct cgroup *cg; /* joined first; NULL: not placed */
	bool set_user;		 /* drop to uid:gid, no supplementary groups */
	uid_t uid;
	gid_t gid;
	int stdio[3]; /* become 0, 1 and 2 (blocking fds, CLOEXEC in the parent) */
	int errpipe;  /* write end of a CLOEXEC pipe: a struct spawn_error on failure */
	const char *cwd;
	const char *command; /* run as SPAWN_SHELL -c command */
	char *const *envp;
	/* Terminals: setsid() instead of setpgid(), and stdio[0] (a PTY) becomes the controlling
	 * terminal. */
	bool session;
	/* With argv: exec path with argv instead of SPAWN_SHELL -c command (a login shell). */
	const char *path;
	char *const *argv;
};

/* Forks the child, which sets itself up and execs, or writes a struct spawn_error to errpipe
 * and _exit(127)s. -errno when fork() failed. */
int spawn_fork(const struct spawn_child *c, pid_t *ret_pid);

/* Reads the child's verdict from the parent's (non-blocking) end of the error pipe: 1 when
 * exec happened (EOF), 0 with *ret filled when the child failed, -EAGAIN when not known yet. */
int spawn_errpipe_read(int fd, struct spawn_error *ret);

/* The reason for a failed start, e.g. `cwd "/nope": No such file or directory` or
 * `exec "/bin/sh": No such file or directory` (path: what was executed; NULL: SPAWN_SHELL).
 * malloc'd; NULL when out of memory. */
char *spawn_error_reason(const struct spawn_error *e, const char *cwd, const char *path);

/* "what \"arg\": strerror(err)" (or "what: strerror(err)" when arg is NULL), malloc'd. */
char *spawn_reason(const char *what, const char *arg, int err);

/* The environment of a child: PATH, home_entry ("HOME=…"), PWD=cwd, then base (--env), then
 * extra; a later entry replaces an earlier one of the same name, in its place. The array's
 * entries point into the arguments and *ret_pwd; free() the array and *ret_pwd. */
int spawn_build_env(char *const *base, size_t n_base, const char *home_entry, const char *cwd,
		    char *const *extra, size_t n_extra, char ***ret, char **ret_pwd);

/* A child group of parent for one command, created: taken from the pool of groups made ahead
 * of time when it has one (then named "p-<n>", not name), else "<parent>/<name>" made now. */
int spawn_cgroup_new(const struct cgroup *parent, const char *name, struct cgroup **ret);

/* Frees a group spawn_cgroup_new() made (not removed: cgroup_remove() first), and closes the
 * control files kept open for it. Every such group goes through here, never cgroup_free(). */
void spawn_cgroup_free(struct cgroup *cg);

/* Tops the pool up: mkdir is a good part of a command's start, so it is done between commands,
 * after a result went out. */
void spawn_cgroup_pool_fill(const struct cgroup *parent);
/* After a command's group went back to the pool: the groups kept beyond the pool's size while
 * commands ran side by side are removed once none has finished for a while, and the rest once
 * none has finished for longer (an idle agent keeps no spare group): a timer on loop, pushed
 * back by every call. _stop() drops the timer (shutdown). */
void spawn_cgroup_pool_trim(struct event_loop *loop);
void spawn_cgroup_pool_stop(void);
/* Before a checkpoint: every cgroup file kept open closed (reached by path from then on) and the
 * pool's spare groups removed, so that a restore holds no descriptor into cgroupfs (its groups
 * are made anew by the restore, as root, until the controller hands them back). */
void spawn_checkpoint_prepare(void);

/* "KEY=VALUE" with KEY matching [A-Za-z_][A-Za-z0-9_]*. */
bool spawn_env_entry_valid(const char *s);

/* Frees what spawn_env_append() made. */
void spawn_env_free(char **env, size_t n);

/* Appends a frame's "KEY=VALUE" entry (ENV tag) to *env (n entries): at most PROTO_MAX_ENV of
 * PROTO_MAX_ENV_ENTRY bytes each, with a valid name. -E2BIG, -EBADMSG, -ENOMEM. */
int spawn_env_append(char ***env, size_t *n, const uint8_t *val, size_t len);

/* Removes a finished command's group. Killed processes take a moment to leave: when the group
 * is still busy it is retried from a timer (never blocking the loop), killed again now and
 * then, and given up after a while. */
void spawn_cgroup_release(struct event_loop *loop, struct cgroup *cg);
/* For shutdown: kill what is left in the groups being released; whether they are all empty;
 * rmdir them; forget them. */
void spawn_cgroup_release_kill(void);
bool spawn_cgroup_release_empty(void);
void spawn_cgroup_release_remove(void);
void spawn_cgroup_release_free(void);

/* Takes a finished command's group back into the pool when it can pass for new: empty, no OOM
 * kill in it, counters reset (cgroup v1). known_empty: found empty after its last process
 * was gone (not read again). True when taken; else the caller removes it. */
bool spawn_cgroup_recycle(const struct cgroup *parent, struct cgroup *cg,
			  const struct cgroup_stats *stats, bool known_empty);

/* Sends sig to every process in cg. Returns how many were signalled, or -errno. */
int spawn_cgroup_signal(const struct cgroup *cg, int sig);

/* How many processes in cg are still alive (zombies not counted), or -errno. */
int spawn_cgroup_count(const struct cgroup *cg);
