/* SPDX-License-Identifier: MIT */
/* cgroup v2 (pure unified hierarchy at /sys/fs/cgroup): one directory per group. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "basic/cleanup.h"
#include "basic/util.h"
#include "cgroup/cgroup-internal.h"

#define V2_CPU_PERIOD_US 100000
#define V2_FREEZE_WAIT_MS 2000
#define V2_SUPERVISOR "supervisor"

/* cpuset: where the container of a workspace with "cpus" is pinned (the OCI runtime writes its
 * cpuset.cpus; a group cannot widen what its parent allows) */
static const char *const v2_controllers[] = { "cpu", "cpuset", "memory", "pids" };

static bool word_list_has(const char *list, const char *word)
{
	size_t k = strlen(word);

	for (const char *p = list; *p;) {
		size_t n = strcspn(p, " \n");
		if (n == k && !strncmp(p, word, k))
			return true;
		p += n;
		p += strspn(p, " \n");
	}
	return false;
}

/* Enables in dir's subtree_control each wanted controller dir has and has not enabled yet. */
static int v2_enable_controllers(const char *dir)
{
	_cleanup_free_ char *avail = NULL, *enabled = NULL;
	char req[64] = "";
	size_t len = 0;
	int n, r;

	r = cg_read(dir, "cgroup.controllers", &avail);
	if (r < 0)
		return r;
	r = cg_read(dir, "cgroup.subtree_control", &enabled);
	if (r < 0)
		return r;
	for (size_t i = 0; i < ELEMENTSOF(v2_controllers); i++) {
		const char *c = v2_controllers[i];
		if (!word_list_has(avail, c) || word_list_has(enabled, c))
			continue;
		n = snprintf(req + len, sizeof req - len, "%s+%s", len ? " " : "", c);
		if (n < 0 || (size_t)n >= sizeof req - len)
			return -ENAMETOOLONG; /* the list of wanted controllers fits */
		len += (size_t)n;
	}
	return len ? cg_write(dir, "cgroup.subtree_control", req) : 0;
}

/* Best effort, top-down from the mount root to (excluding) own: a wanted controller missing
 * from own's cgroup.controllers is enabled by its ancestors, when we may write there. */
static void v2_enable_ancestors(const char *own)
{
	size_t root = strlen(CGROUP_MOUNT_ROOT);
	_cleanup_free_ char *p = strdup(own);

	if (!p)
		return;
	for (char *s = p + root; s && *s;) {
		*s = '\0';
		(void)v2_enable_controllers(p);
		*s = '/';
		s = strchr(s + 1, '/');
	}
}

/* Moves every process of own (the caller first) to own/supervisor, so that own may hand
 * controllers down (no-internal-process rule). */
static int v2_move_to_supervisor(const char *own)
{
	_cleanup_free_ char *sup = NULL, *procs = NULL;
	char *save = NULL;
	int r;

	if (asprintf(&sup, "%s/%s", own, V2_SUPERVISOR) < 0)
		return -ENOMEM;
	r = cg_mkdir(sup);
	if (r < 0)
		return r;
	r = cg_write(sup, "cgroup.procs", "0");
	if (r < 0)
		return r;
	r = cg_read(own, "cgroup.procs", &procs);
	if (r < 0)
		return r;
	for (char *l = strtok_r(procs, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		r = cg_write(sup, "cgroup.procs", l);
		if (r < 0 && r != -ESRCH)
			return r;
	}
	return 0;
}

static int v2_prepare_own(const char *own)
{
	int r;

	v2_enable_ancestors(own);
	r = v2_enable_controllers(own);
	if (r != -EBUSY)
		return r;
	r = v2_move_to_supervisor(own);
	if (r < 0)
		return r;
	return v2_enable_controllers(own);
}

static int v2_own_dir(char **ret)
{
	_cleanup_free_ char *content = NULL, *own = NULL;
	int r;

	r = read_file("/proc/self/cgroup", CGROUP_FILE_MAX, &content, NULL);
	if (r < 0)
		return r;
	r = cg_parse_proc_cgroup(content, NULL, &own);
	if (r < 0)
		return r;
	if (asprintf(ret, "%s%s", CGROUP_MOUNT_ROOT, strcmp(own, "/") ? own : "") < 0)
		return -ENOMEM;
	return 0;
}

static int v2_open_base(const char *name, struct cgroup **ret)
{
	_cleanup_free_ char *own = NULL;
	char suffix[66];
	struct cgroup *cg;
	int r;

	if (!strcmp(name, V2_SUPERVISOR))
		return -EINVAL;
	r = v2_own_dir(&own);
	if (r < 0)
		return r;
	r = v2_prepare_own(own);
	if (r < 0)
		return r;
	cg = cg_new(CGROUP_V2);
	if (!cg)
		return -ENOMEM;
	snprintf(suffix, sizeof suffix, "/%s", name); /* a valid name fits */
	r = cg_add_dir(cg, own, suffix);
	if (r >= 0)
		r = cg_mkdir(cg->dirs[0]);
	if (r < 0) {
		cgroup_free(cg);
		return r;
	}
	*ret = cg;
	return 0;
}

static int v2_create(const struct cgroup *cg)
{
	_cleanup_free_ char *parent = strdup(cg->dirs[0]);
	char *slash;
	int r;

	if (!parent)
		return -ENOMEM;
	slash = strrchr(parent, '/');
	if (!slash || slash == parent)
		return -EINVAL;
	*slash = '\0';
	if (strcmp(parent, CGROUP_MOUNT_ROOT) != 0) {
		r = v2_enable_controllers(parent);
		if (r < 0)
			return r;
	}
	return cg_mkdir(cg->dirs[0]);
}

static int v2_set_cpu(const char *dir, double cpus)
{
	char value[48];

	if (!cg_file_exists(dir, "cpu.max"))
		return cpus > 0 ? -EOPNOTSUPP : 0;
	if (cpus > 0)
		snprintf(value, sizeof(value), "%llu %u",
			 (unsigned long long)MAX((uint64_t)(cpus * V2_CPU_PERIOD_US), 1000),
			 V2_CPU_PERIOD_US);
	else
		snprintf(value, sizeof(value), "max %u", V2_CPU_PERIOD_US);
	return cg_write(dir, "cpu.max", value);
}

static int v2_set_memory(const char *dir, uint64_t bytes)
{
	int r;

	if (!cg_file_exists(dir, "memory.max"))
		return bytes > 0 ? -EOPNOTSUPP : 0;
	r = bytes > 0 ? cg_write_u64(dir, "memory.max", bytes) : cg_write(dir, "memory.max", "max");
	if (r < 0)
		return r;
	/* memory.swap.max counts swap alone: 0 keeps memory + swap within the limit, as the v1
	 * memsw limit does. Without swap accounting the file is missing. */
	r = cg_write(dir, "memory.swap.max", bytes > 0 ? "0" : "max");
	return r == -ENOENT ? 0 : r;
}

static int v2_set_limits(const struct cgroup *cg, const struct cgroup_limits *limits)
{
	const char *dir = cg->dirs[0];
	int r;

	r = v2_set_cpu(dir, limits->cpus);
	if (r < 0)
		return r;
	r = v2_set_memory(dir, limits->memory_bytes);
	if (r < 0)
		return r;
	if (!cg_file_exists(dir, "pids.max"))
		return limits->pids > 0 ? -EOPNOTSUPP : 0;
	if (limits->pids > 0)
		return cg_write_u64(dir, "pids.max", limits->pids);
	return cg_write(dir, "pids.max", "max");
}

/* open/write/close only: runs in forked children. */
static int v2_attach(const struct cgroup *cg, pid_t pid)
{
	return cg_write_u64(cg->dirs[0], "cgroup.procs", (uint64_t)pid);
}

static int v2_wait_frozen(const char *dir)
{
	unsigned waited = 0, delay = 1;

	for (;;) {
		uint64_t frozen = 0;
		int r = cg_read_keyed(dir, "cgroup.events", "frozen", &frozen);
		if (r < 0)
			return r;
		if (frozen == 1)
			return 0;
		if (waited >= V2_FREEZE_WAIT_MS)
			return -ETIMEDOUT;
		cg_sleep_ms(delay);
		waited += delay;
		delay = MIN(delay * 2, 10u);
	}
}

/* Kernels before 5.14 have no cgroup.kill: freeze, kill every member, thaw. */
static int v2_kill_frozen(const char *dir)
{
	int r, k;

	r = cg_write(dir, "cgroup.freeze", "1");
	if (r < 0)
		return r;
	(void)v2_wait_frozen(dir);
	r = cg_tree_kill(dir, NULL);
	k = cg_tree_write(dir, "cgroup.freeze", "0");
	return r < 0 ? r : k;
}

/* A fatal signal ends a v2 frozen process, so cgroup.kill reaches groups frozen below too;
 * they are thawed all the same (cg_tree_write), so that nothing of the subtree stays frozen. */
static int v2_kill(const struct cgroup *cg)
{
	const char *dir = cg->dirs[0];
	int r = cg_write(dir, "cgroup.kill", "1");

	if (r >= 0) {
		r = cg_tree_write(dir, "cgroup.freeze", "0");
		return r == -ENOENT ? 0 : r; /* removed meanwhile: nothing is left in it */
	}
	if (r != -ENOENT || !cg_file_exists(dir, "cgroup.procs"))
		return r;
	return v2_kill_frozen(dir);
}

static int v2_is_empty(const struct cgroup *cg)
{
	uint64_t populated;
	int r = cg_read_keyed(cg->dirs[0], "cgroup.events", "populated", &populated);

	if (r < 0)
		return r;
	return populated == 0;
}

static int read_or_zero(int r, uint64_t *v)
{
	if (r == -ENOENT) {
		*v = 0;
		return 0;
	}
	return r;
}

static int v2_get_stats(const struct cgroup *cg, struct cgroup_stats *ret)
{
	const char *dir = cg->dirs[0];
	uint64_t usec = 0, peak = 0, ooms = 0;
	int r;

	r = cg_read_keyed(dir, "cpu.stat", "usage_usec", &usec);
	if (r >= 0) /* memory.peak: kernel 5.19+ */
		r = read_or_zero(cg_read_u64(dir, "memory.peak", &peak), &peak);
	if (r >= 0)
		r = read_or_zero(cg_read_keyed(dir, "memory.events", "oom_kill", &ooms), &ooms);
	if (r < 0)
		return r;
	*ret = (struct cgroup_stats){ .cpu_usec = usec, .peak_memory = peak, .oom_kills = ooms };
	return 0;
}

static int v2_get_usage(const struct cgroup *cg, struct cgroup_usage *ret)
{
	const char *dir = cg->dirs[0];
	uint64_t usec = 0, current = 0;
	int r;

	r = cg_read_keyed(dir, "cpu.stat", "usage_usec", &usec);
	if (r >= 0)
		r = read_or_zero(cg_read_u64(dir, "memory.current", &current), &current);
	if (r < 0)
		return r;
	*ret = (struct cgroup_usage){ .cpu_usec = usec, .memory_bytes = current };
	return 0;
}

/* ---- the freezer (cgroup-freeze.c) ------------------------------------------------------------ */

static const char *v2_freezer_dir(const struct cgroup *cg)
{
	return cg_file_exists(cg->dirs[0], "cgroup.freeze") ? cg->dirs[0] : NULL;
}

static int v2_freeze_set(const char *dir, bool frozen)
{
	return cg_write(dir, "cgroup.freeze", frozen ? "1" : "0");
}

/* cgroup.events "frozen 1" once every member stopped. */
static int v2_freeze_state(const char *dir)
{
	uint64_t frozen = 0;
	int r = cg_read_keyed(dir, "cgroup.events", "frozen", &frozen);

	return r < 0 ? r : frozen == 1;
}

const struct cgroup_ops cgroup_v2_ops = {
	.open_base = v2_open_base,
	.create = v2_create,
	.set_limits = v2_set_limits,
	.attach = v2_attach,
	.kill = v2_kill,
	.is_empty = v2_is_empty,
	.get_stats = v2_get_stats,
	.get_usage = v2_get_usage,
	.freezer_dir = v2_freezer_dir,
	.freeze_set = v2_freeze_set,
	.freeze_state = v2_freeze_state,
};
