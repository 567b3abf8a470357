/* SPDX-License-Identifier: MIT */
#pragma once

/* Shared by cgroup.c and the backends: the ops table and small helpers. Not for other modules
 * (the unit tests use the parse helpers). */

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "cgroup/cgroup.h"

/* What differs between v1 and v2. Everything else (child paths, remove, destroy, strings) is
 * common and lives in cgroup.c. */
struct cgroup_ops {
	int (*open_base)(const char *name, struct cgroup **ret);
	int (*create)(const struct cgroup *cg);
	int (*set_limits)(const struct cgroup *cg, const struct cgroup_limits *limits);
	int (*attach)(const struct cgroup *cg, pid_t pid);
	int (*kill)(const struct cgroup *cg);
	int (*is_empty)(const struct cgroup *cg);
	int (*get_stats)(const struct cgroup *cg, struct cgroup_stats *ret);
	int (*get_usage)(const struct cgroup *cg, struct cgroup_usage *ret);
	int (*reset_stats)(const struct cgroup *cg); /* NULL: cannot */
	void (*keep_files)(struct cgroup *cg);	     /* NULL: nothing to keep */
	/* The freezer (cgroup-freeze.c): the dir of cg that has it (NULL: none), asking one dir
	 * to freeze or thaw, and whether it is frozen now (1), not (0), or < 0. */
	const char *(*freezer_dir)(const struct cgroup *cg);
	int (*freeze_set)(const char *dir, bool frozen);
	int (*freeze_state)(const char *dir);
};

extern const struct cgroup_ops cgroup_v1_ops;
extern const struct cgroup_ops cgroup_v2_ops;

#define CGROUP_MOUNT_ROOT "/sys/fs/cgroup"
#define CGROUP_FILE_MAX (1024 * 1024)

/* v1: the controllers of a dir's hierarchy, probed once through its control files. */
enum {
	CG_ROLE_KNOWN = 1u << 0,
	CG_ROLE_CPU = 1u << 1,
	CG_ROLE_CPUACCT = 1u << 2,
	CG_ROLE_MEMORY = 1u << 3,
	CG_ROLE_PIDS = 1u << 4,
	CG_ROLE_FREEZER = 1u << 5,
};
/* Probes dir i of cg (its parent's dir when it does not exist yet is the caller's business:
 * children copy their parent's roles). */
unsigned cg_roles(struct cgroup *cg, size_t i);
/* The role a control file belongs to ("memory.max_usage_in_bytes" → CG_ROLE_MEMORY). */
unsigned cg_role_of_file(const char *file);

/* Allocation. */
struct cgroup *cg_new(enum cgroup_version version);
/* Appends "<prefix><suffix>" (suffix may be NULL) as the next dir. */
int cg_add_dir(struct cgroup *cg, const char *prefix, const char *suffix);
/* [A-Za-z0-9._-]{1,64}, not "." or "..". */
bool cg_name_is_valid(const char *name);

/* File access without allocation (safe after fork): "<dir>/<file>" into a PATH_MAX buffer. */
int cg_file_path(const char *dir, const char *file, char ret[PATH_MAX]);
int cg_write(const char *dir, const char *file, const char *value);
int cg_write_u64(const char *dir, const char *file, uint64_t value);
bool cg_file_exists(const char *dir, const char *file);
int cg_mkdir(const char *dir);

/* One read of at most size - 1 bytes, NUL-terminated: the byte count or -errno. Control files
 * answer a read with all they have up to its size (seq_file), so a short read is the whole
 * file. No allocation. */
ssize_t cg_read_some(const char *dir, const char *file, char *buf, size_t size);
/* Reading (allocates). */
int cg_read(const char *dir, const char *file, char **ret);
int cg_read_u64(const char *dir, const char *file, uint64_t *ret);
/* The value of the "key <u64>" line of a flat-keyed file (cpu.stat, memory.events). */
int cg_read_keyed(const char *dir, const char *file, const char *key, uint64_t *ret);
/* 1 when the cgroup.procs of dir or of any group below it lists a process, 0 when none do. */
int cg_tree_has_procs(const char *dir);
/* SIGKILLs every pid in cgroup.procs of dir and every group below it. *ret_n counts them. */
int cg_tree_kill(const char *dir, size_t *ret_n);
/* Writes value to file in dir and in every group below it (pre-order; a group gone meanwhile
 * is skipped): a kill thaws with it every group frozen on its own account below the one it
 * killed (v1 freezer.state, v2 cgroup.freeze), which a thaw of the parent leaves frozen. */
int cg_tree_write(const char *dir, const char *file, const char *value);
/* Depth-first rmdir of every group below dir (dir itself stays). Missing is fine. */
int cg_tree_remove_children(const char *dir);
/* Sleeps for ms milliseconds (restarting on EINTR). */
void cg_sleep_ms(unsigned ms);

/* Parsers, on file contents. */
int cg_parse_keyed(const char *content, const char *key, uint64_t *ret);
/* The path of hierarchy controller in /proc/self/cgroup contents: controller NULL means the
 * unified "0::" line. */
int cg_parse_proc_cgroup(const char *content, const char *controller, char **ret);
/* The first v1 ("cgroup") mount in /proc/self/mountinfo contents whose super options name
 * controller: its mount point and its root within the hierarchy (both unescaped). */
int cg_parse_mountinfo(const char *content, const char *controller, char **ret_mount_point,
		       char **ret_root);
