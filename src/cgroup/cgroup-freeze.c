/* SPDX-License-Identifier: MIT */
/* The freezer: one group, and the child groups of a root whose own process keeps running
 * (cgroup.h, "the freezer"). The root belongs to the sandbox (container root owns a container
 * workspace's W/c and its cgroup.procs), so what is in it is read afresh on every pass and
 * nothing found there is trusted: a process may move itself into the root, or make a new
 * group and move into it, until the pass that freezes it. A frozen process cannot move or
 * thaw anything, so once a pass finds every group frozen and nobody to move, nothing in the
 * sandbox runs. */

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

/* Asks every child of dir but keep to freeze (or thaw); *ret_busy: how many are not frozen
 * yet, *ret_groups: how many there are. A group removed meanwhile is skipped. */
static int set_children(const struct cgroup_ops *ops, const char *dir, const char *keep,
			bool frozen, size_t *ret_busy, size_t *ret_groups)
{
	_cleanup_(closedirp) DIR *d = opendir(dir);
	size_t busy = 0, groups = 0;
	struct dirent *de;

	if (!d)
		return negative_errno();
	while ((de = readdir(d))) {
		char sub[PATH_MAX];
		if (!is_child_dir(de) || (keep && strcmp(de->d_name, keep) == 0))
			continue;
		if (snprintf(sub, sizeof sub, "%s/%s", dir, de->d_name) >= (int)sizeof sub)
			return -ENAMETOOLONG;
		int st = ops->freeze_state(sub);
		if (st >= 0 && (st == 1) != frozen) {
			int k = ops->freeze_set(sub, frozen);
			if (k >= 0)
				st = ops->freeze_state(sub);
			else
				st = k;
		}
		if (st == -ENOENT || st == -ENODEV)
			continue;
		if (st < 0)
			return st;
		groups++;
		if ((st == 1) != frozen)
			busy++;
	}
	*ret_busy = busy;
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

int cgroup_freeze_below(const struct cgroup *root, const struct cgroup_freeze_spec *spec,
			struct cgroup_freeze_stats *ret)
{
	const struct cgroup_ops *ops = freeze_ops(root);
	const char *dir = root->n_dirs > 0 ? ops->freezer_dir(root) : NULL;
	uint64_t deadline = monotonic_ms() + (uint64_t)MAX(spec->timeout_ms, 0);
	struct cgroup_freeze_stats stats = {};
	char hold[PATH_MAX];
	unsigned delay = 1;
	int r;

	if (!dir)
		return -EOPNOTSUPP;
	r = hold_dir(dir, spec, hold);
	if (r >= 0)
		r = cg_mkdir(hold);
	if (r >= 0) /* frozen before anyone enters: a process moved in freezes on arrival */
		r = ops->freeze_set(hold, true);
	while (r >= 0) {
		size_t moved = 0, busy = 0;
		stats.passes++;
		r = move_strays(dir, spec->keep_pid, hold, &moved);
		if (r >= 0)
			r = set_children(ops, dir, spec->keep, true, &busy, &stats.groups);
		if (r < 0)
			break;
		stats.moved += moved;
		if (moved == 0 && busy == 0) {
			if (ret)
				*ret = stats;
			return 0;
		}
		if (monotonic_ms() >= deadline)
			return -ETIMEDOUT;
		if (moved == 0)
			poll_sleep(&delay);
	}
	return r;
}

int cgroup_thaw_below(const struct cgroup *root, const struct cgroup_freeze_spec *spec)
{
	const struct cgroup_ops *ops = freeze_ops(root);
	const char *dir = root->n_dirs > 0 ? ops->freezer_dir(root) : NULL;
	size_t busy = 0, groups = 0;
	char hold[PATH_MAX];
	int r;

	if (!dir)
		return -EOPNOTSUPP;
	r = set_children(ops, dir, spec->keep, false, &busy, &groups);
	if (r >= 0 && hold_dir(dir, spec, hold) >= 0)
		(void)rmdir(hold); /* busy while it holds someone: it stays, thawed */
	return r;
}
