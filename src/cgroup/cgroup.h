/* SPDX-License-Identifier: MIT */
#pragma once

/* Workspace and per-run cgroups behind one interface, with a cgroup v1 and a cgroup v2 backend
 * (cgroup-v1.c, cgroup-v2.c; the ops table lives in cgroup.c). libc only: linked by the
 * controller and by the static agent.
 *
 * A struct cgroup names one group across hierarchies: on v2 a single directory, on v1 one
 * directory in each hierarchy we use (cpu, cpuacct, memory, pids, freezer; co-mounted
 * hierarchies appear once). Paths never contain ':'. */

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define CGROUP_MAX_DIRS 8
/* cgroup_keep_files(): the counter files */
#define CGROUP_KEPT_MAX 4

enum cgroup_version {
	CGROUP_V1 = 1,
	CGROUP_V2 = 2,
};

struct cgroup {
	enum cgroup_version version;
	size_t n_dirs;
	char *dirs[CGROUP_MAX_DIRS];	 /* absolute paths */
	unsigned roles[CGROUP_MAX_DIRS]; /* v1: which controllers each dir's hierarchy has, learnt
					  * once (0: not yet); internal to the backends */
	/* v1: control files kept open by cgroup_keep_files(), fd + 1 (0: not kept); internal to
	 * the backends */
	int kept[CGROUP_KEPT_MAX];
};

struct cgroup_limits {
	double cpus;	       /* 0: unlimited; else quota = cpus * period (period 100 ms) */
	uint64_t memory_bytes; /* 0: unlimited; swap is limited to the same value where possible */
	uint64_t pids;	       /* 0: unlimited */
};

struct cgroup_stats {
	uint64_t cpu_usec;    /* user + system CPU time of every process that ran in the group */
	uint64_t peak_memory; /* high-water mark of memory charged to the group, bytes */
	uint64_t oom_kills;   /* processes of the group killed by an OOM killer */
};

/* What a group uses now, for a live view (the stats above are for the end of a command). */
struct cgroup_usage {
	uint64_t cpu_usec;     /* as in cgroup_stats */
	uint64_t memory_bytes; /* memory charged to the group now (v2 memory.current, v1
				* memory.usage_in_bytes) */
};

/* v2 when /sys/fs/cgroup is a cgroup2 mount (pure unified), else v1 (hybrid hosts included). */
int cgroup_detect_version(enum cgroup_version *ret);

/* The group "<own cgroup>/<name>" in every hierarchy we use, created if missing. On v2 the
 * needed controllers (cpu, memory, pids) are enabled down to it; if the own cgroup holds
 * processes (no-internal-process rule) the caller is first moved to "<own cgroup>/supervisor". */
int cgroup_open_base(const char *name, struct cgroup **ret);

/* The child group "<cg>/<name>" (paths only, nothing created). name: [A-Za-z0-9._-]{1,64}. */
int cgroup_child(const struct cgroup *cg, const char *name, struct cgroup **ret);

/* A child for one command (run, service attempt, terminal): on v1 only in the hierarchies
 * that account for it and kill it (cpuacct, memory, freezer); for the others it stays in the
 * parent's group, whose limits hold it all the same. Each hierarchy is a mkdir, an attach and
 * an rmdir per command: fewer is faster. On v2 the same as cgroup_child(). */
int cgroup_child_leaf(const struct cgroup *cg, const char *name, struct cgroup **ret);

/* mkdir in every hierarchy (existing is fine). v2: the parent's subtree_control gets the
 * controllers first. */
int cgroup_create(const struct cgroup *cg);
int cgroup_set_limits(const struct cgroup *cg, const struct cgroup_limits *limits);

/* Moves pid (0: the caller) into the group in every hierarchy. Safe in a forked child of a
 * single-threaded process. */
int cgroup_attach(const struct cgroup *cg, pid_t pid);

/* SIGKILLs every process in the group and its descendants, including processes forked while
 * the kill is in progress: v2 cgroup.kill (freeze + kill loop on kernels without it), v1 freeze
 * through the freezer hierarchy, kill every member, thaw. Does not wait for them to exit. */
int cgroup_kill(const struct cgroup *cg);

/* 1 when no process is left in the group or below it, 0 when some are, < 0 on error. */
int cgroup_is_empty(const struct cgroup *cg);

int cgroup_get_stats(const struct cgroup *cg, struct cgroup_stats *ret);
/* CPU time so far and memory charged now; a controller file the host lacks reads as 0,
 * -ENOENT when the group is gone. */
int cgroup_get_usage(const struct cgroup *cg, struct cgroup_usage *ret);
/* Starts CPU time and peak memory over from zero, so an empty group can serve again (v1:
 * cpuacct.usage and memory.max_usage_in_bytes take a 0). -EOPNOTSUPP where the counters
 * cannot be reset (v2, whose memory.peak resets only per open file on new kernels). OOM-kill
 * counts never reset: a group that saw one is not reused. */
int cgroup_reset_stats(const struct cgroup *cg);

/* rmdir in every hierarchy; missing is fine; -EBUSY while processes remain. */
int cgroup_remove(const struct cgroup *cg);
/* Kills everything, waits (bounded, up to timeout_ms) for it to exit, removes child groups
 * depth-first, then the group. */
int cgroup_destroy(const struct cgroup *cg, int timeout_ms);

/* Keeps the files read and reset after every command in a reused group open (its counters,
 * v1): each later read or reset is a pread or pwrite on the kept descriptor
 * (O_CLOEXEC) instead of a path walk, open and close. Best effort: a file that cannot be
 * opened, or that vanished since, is reached by path as before. cgroup_free() closes them.
 * A no-op on cgroup v2. */
void cgroup_keep_files(struct cgroup *cg);
/* Closes them: reads and resets go by path from then on. */
void cgroup_unkeep_files(struct cgroup *cg);
void cgroup_free(struct cgroup *cg);

/* ---- the freezer (cgroup-freeze.c) -------------------------------------------------------- */

/* Freezes (frozen) or thaws the group and everything below it (v1 freezer.state FROZEN or
 * THAWED, v2 cgroup.freeze 1 or 0), then waits at most timeout_ms for the kernel to say so (v1
 * freezer.state reads FROZEN, v2 cgroup.events "frozen 1"; and back). -ETIMEDOUT when it did
 * not settle in time (still asked: the caller thaws if it gives up), -EOPNOTSUPP where the
 * group has no freezer (v1 without the freezer hierarchy). */
int cgroup_freeze(const struct cgroup *cg, bool frozen, int timeout_ms);

/* Freezing what runs below a group whose own process must keep running: a workspace's command
 * root, where the agent lives (container: the agent is in the root itself; host: in a child
 * group). Whoever owns the root's cgroup.procs and the groups it makes may move itself between
 * them, make and remove groups and thaw them while we look, so no order of reads can be
 * trusted: the root is frozen whole first (keep_pid and keep too, until the kernel says every
 * member stopped, bounded by timeout_ms), then every process in the root but keep_pid is moved
 * into hold (a child the caller's uid makes and owns, frozen before anyone enters), every child
 * group but keep is frozen on its own account, and the root is thawed: keep_pid and keep go
 * on, nothing else of the root runs, and nothing frozen can undo it. On error (-ETIMEDOUT: a
 * member did not stop in time) the root is thawed again, its children may be left frozen: the
 * caller thaws with cgroup_thaw_below(). */
struct cgroup_freeze_spec {
	const char *keep; /* a child group left running (the host agent's); NULL: none */
	pid_t keep_pid;	  /* the one process of the root left running; 0: none */
	const char *hold; /* the child group strays are moved into: [A-Za-z0-9._-]{1,64} */
	int timeout_ms;
};
struct cgroup_freeze_stats {
	unsigned passes; /* always 1: everything is read while the root is frozen */
	size_t groups;	 /* child groups frozen */
	size_t moved;	 /* processes moved into hold */
};
int cgroup_freeze_below(const struct cgroup *root, const struct cgroup_freeze_spec *spec,
			struct cgroup_freeze_stats *ret);
/* Thaws root itself and every child group of root but spec->keep (hold included, and kept
 * for the next freeze: cgroup-freeze.c says why). What was moved into hold stays there,
 * thawed. A hold found at the next freeze that the caller's uid does not own (the root's owner
 * made one of that name) fails the freeze with -EPERM, nothing frozen. */
int cgroup_thaw_below(const struct cgroup *root, const struct cgroup_freeze_spec *spec);

/* "v1:/dir/a:/dir/b" or "v2:/dir": for argv and the store. */
int cgroup_to_string(const struct cgroup *cg, char **ret);
int cgroup_from_string(const char *s, struct cgroup **ret);

/* The group's path relative to its hierarchy's root ("/station-sandbox/w1-…"), the form an
 * OCI runtime's linux.cgroupsPath takes. -EINVAL when the hierarchies disagree or a dir is not
 * under /sys/fs/cgroup. */
int cgroup_relative_path(const struct cgroup *cg, char **ret);

/* rmdir "<mount point><relative>" in every cgroup hierarchy mounted on this host, not only the
 * ones we manage: an OCI runtime creates its cgroupsPath in all of them (blkio, devices,
 * name=systemd, …). Missing or busy directories are skipped. */
void cgroup_remove_in_all_hierarchies(const char *relative);
