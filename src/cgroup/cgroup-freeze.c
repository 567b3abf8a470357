/* SPDX-License-Identifier: MIT */
/* The freezer: one group, and the child groups of a root whose own process keeps running
 * (cgroup.h, "the freezer"). The root belongs to the sandbox (container root owns a container
 * workspace's W/c and its cgroup.procs), so nothing found in it is trusted: a process may move
 * itself into the root, make a new group and move into it, move back and remove the group,
 * between any two reads of ours; no order of reads catches a process that keeps moving. So the
 * root is frozen whole first (the kept process too, for a moment): once the kernel says it is
 * frozen, nothing in it runs, nothing moves, and what is read then stays true. Every stray in
 * the root is moved into a frozen hold group, every child group but the kept one is frozen on
 * its own account, and the root is thawed: only the kept process and the kept group go on. A
 * frozen process cannot move or thaw anything, and nothing else of the sandbox runs, so nothing
 * undoes it.
 *
 * The hold group outlives the thaw, empty or not. A removed group lingers in the kernel until it
 * goes offline, a grace period or more after its rmdir, and until then its parent does not read
 * frozen (v1: a child online and not frozen): a pause right after a resume that removed the
 * hold waited 10-20 ms for it, every time (100 sleeps, runc, cgroup v1). */

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "basic/cleanup.h"
#include "basic/util.h"
#include "cgroup/cgroup-internal.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(DIR *, closedir)

static const struct cgroup_ops *freeze_ops(const struct cgroup *cg)
{
	return cg->version == CGROUP_V2 ? &cgroup_v2_ops : &cgroup_v1_ops;
}

static uint64_t monotonic_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* The next wait between polls: 1 ms, doubling up to 10. */
static void poll_sleep(unsigned *delay)
{
	cg_sleep_ms(*delay);
	*delay = MIN(*delay * 2, 10u);
}

int cgroup_freeze(const struct cgroup *cg, bool frozen, int timeout_ms)
{
	const struct cgroup_ops *ops = freeze_ops(cg);
	const char *dir = cg->n_dirs > 0 ? ops->freezer_dir(cg) : NULL;
	uint64_t deadline = monotonic_ms() + (uint64_t)MAX(timeout_ms, 0);
	unsigned delay = 1;
	int r;

	if (!dir)
		return -EOPNOTSUPP;
	r = ops->freeze_set(dir, frozen);
	for (;;) {
		if (r < 0)
			return r;
		r = ops->freeze_state(dir);
		if (r >= 0 && (r == 1) == frozen)
			return 0;
		if (r >= 0 && monotonic_ms() >= deadline)
			return -ETIMEDOUT;
		if (r >= 0)
			poll_sleep(&delay);
	}
}

static bool is_child_dir(const struct dirent *de)
{
	return de->d_type == DT_DIR && strcmp(de->d_name, ".") != 0 &&
	       strcmp(de->d_name, "..") != 0;
}

/* Moves every process of dir but keep_pid into hold. *ret_n: how many were listed. */
static int move_strays(const char *dir, pid_t keep_pid, const char *hold, size_t *ret_n)
{
	_cleanup_free_ char *procs = NULL;
	char *save = NULL;
	size_t n = 0;
	int r = cg_read(dir, "cgroup.procs", &procs);

	if (r < 0)
		return r;
	for (char *l = strtok_r(procs, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		uint64_t pid;
		if (parse_u64(l, INT32_MAX, &pid) < 0 || pid == 0 || (pid_t)pid == keep_pid)
			continue;
		r = cg_write_u64(hold, "cgroup.procs", pid);
		if (r < 0 && r != -ESRCH) /* gone meanwhile: nothing to hold */
			return r;
		n++;
	}
	*ret_n = n;
	return 0;
}

/* Asks every child of dir but keep to freeze (or thaw) on its own account, even where it
 * reads frozen already (a frozen parent freezes it, and the parent is thawed next). A group
 * removed meanwhile is skipped. *ret_groups: how many there are. */
static int set_children(const struct cgroup_ops *ops, const char *dir, const char *keep,
			bool frozen, size_t *ret_groups)
{
	_cleanup_(closedirp) DIR *d = opendir(dir);
	size_t groups = 0;
	struct dirent *de;

	if (!d)
		return negative_errno();
	while ((de = readdir(d))) {
		char sub[PATH_MAX];
		if (!is_child_dir(de) || (keep && strcmp(de->d_name, keep) == 0))
			continue;
		if (snprintf(sub, sizeof sub, "%s/%s", dir, de->d_name) >= (int)sizeof sub)
			return -ENAMETOOLONG;
		int r = ops->freeze_set(sub, frozen);
		if (r == -ENOENT || r == -ENODEV)
			continue;
		if (r < 0)
			return r;
		groups++;
	}
	*ret_groups = groups;
	return 0;
}

static int hold_dir(const char *dir, const struct cgroup_freeze_spec *spec, char ret[PATH_MAX])
{
	if (!spec->hold || !cg_name_is_valid(spec->hold))
		return -EINVAL;
	if (snprintf(ret, PATH_MAX, "%s/%s", dir, spec->hold) >= PATH_MAX)
		return -ENAMETOOLONG;
	return 0;
}

/* The hold group, made by us or kept from an earlier freeze (cgroup_thaw_below() leaves it):
 * the root's owner can make groups in it too, so one of that name must be ours. */
static int hold_make(const char *hold)
{
	struct stat st;

	if (mkdir(hold, 0755) < 0 && errno != EEXIST)
		return negative_errno();
	if (lstat(hold, &st) < 0)
		return negative_errno();
	if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid())
		return -EPERM;
	return 0;
}

int cgroup_freeze_below(const struct cgroup *root, const struct cgroup_freeze_spec *spec,
			struct cgroup_freeze_stats *ret)
{
	const struct cgroup_ops *ops = freeze_ops(root);
	const char *dir = root->n_dirs > 0 ? ops->freezer_dir(root) : NULL;
	struct cgroup_freeze_stats stats = { .passes = 1 };
	char hold[PATH_MAX];
	int r, k;

	if (!dir)
		return -EOPNOTSUPP;
	r = hold_dir(dir, spec, hold);
	if (r >= 0)
		r = hold_make(hold);
	if (r >= 0) /* frozen on its own account before anyone enters */
		r = ops->freeze_set(hold, true);
	if (r < 0)
		return r;
	r = cgroup_freeze(root, true, spec->timeout_ms);
	if (r >= 0) /* nothing below the root runs from here until its thaw */
		r = move_strays(dir, spec->keep_pid, hold, &stats.moved);
	if (r >= 0)
		r = set_children(ops, dir, spec->keep, true, &stats.groups);
	k = cgroup_freeze(root, false, spec->timeout_ms); /* the kept ones go on */
	if (r >= 0)
		r = k;
	if (r >= 0 && ret)
		*ret = stats;
	return r;
}

int cgroup_thaw_below(const struct cgroup *root, const struct cgroup_freeze_spec *spec)
{
	const struct cgroup_ops *ops = freeze_ops(root);
	const char *dir = root->n_dirs > 0 ? ops->freezer_dir(root) : NULL;
	size_t groups = 0;
	int r;

	if (!dir)
		return -EOPNOTSUPP;
	r = ops->freeze_set(dir, false); /* left frozen by a freeze that never finished */
	if (r >= 0)
		r = set_children(ops, dir, spec->keep, false, &groups);
	return r;
}
