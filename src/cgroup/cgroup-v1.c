/* SPDX-License-Identifier: MIT */
/* cgroup v1: one directory per hierarchy we use. Hybrid hosts (v1 hierarchies plus an empty
 * cgroup2 mount) are treated as v1. Each operation finds the directory it needs by the control
 * file it touches, so a group rebuilt from its string form works the same. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "basic/cleanup.h"
#include "basic/util.h"
#include "cgroup/cgroup-internal.h"

#define V1_CPU_PERIOD_US 100000
#define V1_FREEZE_WAIT_MS 2000
#define MOUNTINFO_MAX (16 * 1024 * 1024)

static const char *const v1_controllers[] = { "cpu", "cpuacct", "memory", "pids", "freezer" };

/* Copies the mountinfo field [s, s + n) undoing its octal escapes (\040 for a space). */
static char *mountinfo_unescape(const char *s, size_t n)
{
	char *ret = malloc(n + 1), *o = ret;

	if (!ret)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		if (s[i] == '\\' && i + 3 < n && s[i + 1] >= '0' && s[i + 1] <= '3' &&
		    s[i + 2] >= '0' && s[i + 2] <= '7' && s[i + 3] >= '0' && s[i + 3] <= '7') {
			*o++ = (char)((s[i + 1] - '0') << 6 | (s[i + 2] - '0') << 3 |
				      (s[i + 3] - '0'));
			i += 3;
		} else {
			*o++ = s[i];
		}
	}
	*o = '\0';
	return ret;
}

/* Splits line [l, eol) into space-separated fields; returns how many (at most max). */
static size_t split_fields(const char *l, const char *eol, const char **f, size_t *len, size_t max)
{
	size_t n = 0;

	while (l < eol && n < max) {
		while (l < eol && *l == ' ')
			l++;
		if (l == eol)
			break;
		f[n] = l;
		while (l < eol && *l != ' ')
			l++;
		len[n] = (size_t)(l - f[n]);
		n++;
	}
	return n;
}

static bool comma_list_has(const char *list, size_t n, const char *item)
{
	size_t k = strlen(item);

	for (size_t i = 0; i < n;) {
		size_t c = 0;
		while (i + c < n && list[i + c] != ',')
			c++;
		if (c == k && !strncmp(list + i, item, k))
			return true;
		i += c + 1;
	}
	return false;
}

/* A mountinfo line: id parent maj:min root mount-point options [optional...] - fstype source
 * super-options. Matches a v1 cgroup mount whose super options name controller. */
static int mountinfo_line_match(const char *l, const char *eol, const char *controller,
				char **ret_mount_point, char **ret_root)
{
	const char *f[32], *sep;
	size_t len[32], n;

	sep = strstr(l, " - ");
	if (!sep || sep > eol)
		return 0;
	n = split_fields(l, sep, f, len, 6);
	if (n < 5)
		return 0;
	const char *mp = f[4], *root = f[3];
	size_t mp_len = len[4], root_len = len[3];
	n = split_fields(sep + 3, eol, f, len, 3);
	if (n < 3 || len[0] != 6 || strncmp(f[0], "cgroup", 6) != 0)
		return 0;
	if (!comma_list_has(f[2], len[2], controller))
		return 0;
	_cleanup_free_ char *m = mountinfo_unescape(mp, mp_len);
	_cleanup_free_ char *r = mountinfo_unescape(root, root_len);
	if (!m || !r)
		return -ENOMEM;
	*ret_mount_point = TAKE_PTR(m);
	*ret_root = TAKE_PTR(r);
	return 1;
}

int cg_parse_mountinfo(const char *content, const char *controller, char **ret_mount_point,
		       char **ret_root)
{
	for (const char *l = content; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL) {
		const char *eol = l + strcspn(l, "\n");
		int r = mountinfo_line_match(l, eol, controller, ret_mount_point, ret_root);
		if (r != 0)
			return r < 0 ? r : 0;
	}
	return -ENOENT;
}

static bool v1_has_dir(const struct cgroup *cg, const char *dir, size_t name_len)
{
	size_t n = strlen(dir);

	for (size_t i = 0; i < cg->n_dirs; i++)
		if (strlen(cg->dirs[i]) == n + name_len && !strncmp(cg->dirs[i], dir, n))
			return true;
	return false;
}

/* The group "/<name>" at the root of every hierarchy we use; co-mounted hierarchies appear
 * once. The root, not our own group: on v1 our own group can differ between hierarchies, and
 * an OCI runtime takes one cgroupsPath for all of them. */
static int v1_base_paths(const char *name, struct cgroup *cg)
{
	_cleanup_free_ char *mountinfo = NULL;
	char suffix[66];
	int r;

	r = read_file("/proc/self/mountinfo", MOUNTINFO_MAX, &mountinfo, NULL);
	if (r < 0)
		return r;
	snprintf(suffix, sizeof suffix, "/%s", name); /* a valid name fits */
	for (size_t i = 0; i < ELEMENTSOF(v1_controllers); i++) {
		_cleanup_free_ char *dir = NULL, *root = NULL;
		r = cg_parse_mountinfo(mountinfo, v1_controllers[i], &dir, &root);
		if (r == -ENOENT)
			continue; /* controller not mounted here */
		if (r < 0)
			return r;
		if (v1_has_dir(cg, dir, strlen(suffix)))
			continue;
		r = cg_add_dir(cg, dir, suffix);
		if (r < 0)
			return r;
	}
	return cg->n_dirs > 0 ? 0 : -EOPNOTSUPP;
}

static int v1_create(const struct cgroup *cg)
{
	for (size_t i = 0; i < cg->n_dirs; i++) {
		int r = cg_mkdir(cg->dirs[i]);
		if (r < 0)
			return r;
	}
	return 0;
}

/* The directory of cg whose hierarchy has the control file, NULL when none has. */
static const char *v1_dir_with(const struct cgroup *cg, const char *file)
{
	struct cgroup *c = (struct cgroup *)cg; /* only the role cache changes */
	unsigned role = cg_role_of_file(file);
	for (size_t i = 0; i < c->n_dirs; i++)
		if (role ? cg_roles(c, i) & role : cg_file_exists(c->dirs[i], file))
			return c->dirs[i];
	return NULL;
}

static int v1_open_base(const char *name, struct cgroup **ret)
{
	struct cgroup *cg = cg_new(CGROUP_V1);
	const char *mem;
	int r;

	if (!cg)
		return -ENOMEM;
	r = v1_base_paths(name, cg);
	if (r >= 0)
		r = v1_create(cg);
	if (r < 0) {
		cgroup_free(cg);
		return r;
	}
	/* limits must cover the groups below; read-only (always 1) on newer kernels */
	mem = v1_dir_with(cg, "memory.use_hierarchy");
	if (mem)
		(void)cg_write(mem, "memory.use_hierarchy", "1");
	*ret = cg;
	return 0;
}

static int v1_set_cpu(const struct cgroup *cg, double cpus)
{
	const char *dir = v1_dir_with(cg, "cpu.cfs_quota_us");
	int r;

	if (!dir)
		return cpus > 0 ? -EOPNOTSUPP : 0;
	r = cg_write_u64(dir, "cpu.cfs_period_us", V1_CPU_PERIOD_US);
	if (r < 0)
		return r;
	if (cpus <= 0)
		return cg_write(dir, "cpu.cfs_quota_us", "-1");
	return cg_write_u64(dir, "cpu.cfs_quota_us",
			    MAX((uint64_t)(cpus * V1_CPU_PERIOD_US), 1000));
}

static int v1_set_memsw(const char *dir, const char *value)
{
	int r = cg_write(dir, "memory.memsw.limit_in_bytes", value);

	/* no swap accounting (ENOENT) or memsw below memory for now (EINVAL) */
	return r == -ENOENT || r == -EINVAL ? 0 : r;
}

static int v1_set_memory(const struct cgroup *cg, uint64_t bytes)
{
	const char *dir = v1_dir_with(cg, "memory.limit_in_bytes");
	char value[24];
	int r;

	if (!dir)
		return bytes > 0 ? -EOPNOTSUPP : 0;
	if (bytes > 0)
		snprintf(value, sizeof(value), "%llu", (unsigned long long)bytes);
	else
		snprintf(value, sizeof(value), "-1");
	/* memsw must stay >= memory: raising needs memsw first, lowering memory first */
	r = v1_set_memsw(dir, value);
	if (r < 0)
		return r;
	r = cg_write(dir, "memory.limit_in_bytes", value);
	if (r < 0)
		return r;
	return v1_set_memsw(dir, value);
}

static int v1_set_pids(const struct cgroup *cg, uint64_t pids)
{
	const char *dir = v1_dir_with(cg, "pids.max");

	if (!dir)
		return pids > 0 ? -EOPNOTSUPP : 0;
	return pids > 0 ? cg_write_u64(dir, "pids.max", pids) : cg_write(dir, "pids.max", "max");
}

static int v1_set_limits(const struct cgroup *cg, const struct cgroup_limits *limits)
{
	int r;

	r = v1_set_cpu(cg, limits->cpus);
	if (r < 0)
		return r;
	r = v1_set_memory(cg, limits->memory_bytes);
	if (r < 0)
		return r;
	return v1_set_pids(cg, limits->pids);
}

/* open/write/close only: runs in forked children. */
static int v1_attach(const struct cgroup *cg, pid_t pid)
{
	for (size_t i = 0; i < cg->n_dirs; i++) {
		int r = cg_write_u64(cg->dirs[i], "cgroup.procs", (uint64_t)pid);
		if (r < 0)
			return r;
	}
	return 0;
}

/* Bounded: a task stuck in the kernel can keep the group FREEZING; we kill anyway. */
static int v1_freeze(const char *dir)
{
	unsigned waited = 0, delay = 1;
	int r;

	r = cg_write(dir, "freezer.state", "FROZEN");
	if (r < 0)
		return r;
	for (;;) {
		_cleanup_free_ char *state = NULL;
		r = cg_read(dir, "freezer.state", &state);
		if (r < 0)
			return r;
		if (!strncmp(state, "FROZEN", 6))
			return 0;
		if (waited >= V1_FREEZE_WAIT_MS)
			return -ETIMEDOUT;
		cg_sleep_ms(delay);
		waited += delay;
		delay = MIN(delay * 2, 10u);
	}
}

/* Kills in every hierarchy; a half-built group may miss some directories. */
static int v1_kill_all(const struct cgroup *cg, size_t *ret_n)
{
	size_t total = 0, missing = 0;

	for (size_t i = 0; i < cg->n_dirs; i++) {
		size_t n = 0;
		int r = cg_tree_kill(cg->dirs[i], &n);
		if (r == -ENOENT) {
			missing++;
			continue;
		}
		if (r < 0)
			return r;
		total += n;
	}
	if (missing == cg->n_dirs)
		return -ENOENT;
	*ret_n = total;
	return 0;
}

static int v1_kill(const struct cgroup *cg)
{
	const char *freezer = v1_dir_with(cg, "freezer.state");
	size_t n = 0;
	int r;

	if (cg->n_dirs == 0)
		return -EINVAL;
	if (freezer) {
		/* frozen members cannot fork; SIGKILL takes effect at thaw, so every group below
		 * that is frozen on its own account (the sandbox may freeze the groups it makes)
		 * is thawed too, or its processes would stay, killed and frozen, for ever */
		(void)v1_freeze(freezer);
		r = v1_kill_all(cg, &n);
		int k = cg_tree_write(freezer, "freezer.state", "THAWED");
		return r < 0 ? r : k;
	}
	/* no freezer: kill until a pass finds nobody (bounded; forks may race a pass) */
	for (int pass = 0; pass < 20; pass++) {
		r = v1_kill_all(cg, &n);
		if (r < 0 || n == 0)
			return r;
		cg_sleep_ms(1);
	}
	return 0;
}

/* ---- files kept open (cgroup_keep_files) ------------------------------------------------------
 * The agent reads a reused group's counters and resets them after every command; by path that
 * is a walk of cgroupfs, an open and a close per file. Kept open, each is one pread or pwrite
 * at offset 0 (these files print their current value on every read from offset 0). A
 * descriptor whose file is gone (the group removed: ENODEV) is ignored and the file reached by
 * path, which answers as before (ENOENT). Not cgroup.procs: a v1 descriptor of it keeps
 * serving the pid list it loaded first (for about a second after the last read), so it would
 * show a process that has left; it is opened afresh for every check. */

enum {
	KEPT_CPUACCT_USAGE,
	KEPT_MEM_MAX_USAGE,
	KEPT_MEM_USAGE,
	KEPT_OOM_CONTROL,
	KEPT_MAX,
};

static const struct {
	const char *file;
	int flags;
} kept_files[KEPT_MAX] = {
	[KEPT_CPUACCT_USAGE] = { "cpuacct.usage", O_RDWR },
	[KEPT_MEM_MAX_USAGE] = { "memory.max_usage_in_bytes", O_RDWR },
	[KEPT_MEM_USAGE] = { "memory.usage_in_bytes", O_RDONLY },
	[KEPT_OOM_CONTROL] = { "memory.oom_control", O_RDONLY },
};

static void keep_one(struct cgroup *cg, size_t slot, const char *dir, const char *file, int flags)
{
	char path[PATH_MAX];
	int fd;

	if (!dir || cg->kept[slot] || cg_file_path(dir, file, path) < 0)
		return;
	fd = open(path, flags | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY);
	if (fd >= 0)
		cg->kept[slot] = fd + 1;
}

static void v1_keep_files(struct cgroup *cg)
{
	_Static_assert(KEPT_MAX <= CGROUP_KEPT_MAX, "struct cgroup's kept[] is too small");
	for (size_t k = 0; k < KEPT_MAX; k++)
		keep_one(cg, k, v1_dir_with(cg, kept_files[k].file), kept_files[k].file,
			 kept_files[k].flags);
}

/* Like cg_read_some(), through the kept descriptor of slot when there is one. */
static ssize_t kept_read_some(const struct cgroup *cg, size_t slot, const char *dir,
			      const char *file, char *buf, size_t size)
{
	if (cg->kept[slot] > 0) {
		ssize_t n;

		do
			n = pread(cg->kept[slot] - 1, buf, size - 1, 0);
		while (n < 0 && errno == EINTR);
		if (n >= 0) {
			buf[n] = '\0';
			return n;
		}
	}
	return cg_read_some(dir, file, buf, size);
}

static int kept_read_u64(const struct cgroup *cg, size_t slot, const char *dir, const char *file,
			 uint64_t *ret)
{
	char buf[64];
	ssize_t n = kept_read_some(cg, slot, dir, file, buf, sizeof buf);

	if (n < 0)
		return (int)n;
	if ((size_t)n < sizeof buf - 1) { /* a short read of a control file is all of it */
		buf[strcspn(buf, "\n")] = '\0';
		return parse_u64(buf, UINT64_MAX, ret);
	}
	return cg_read_u64(dir, file, ret);
}

static int kept_read_keyed(const struct cgroup *cg, size_t slot, const char *dir, const char *file,
			   const char *key, uint64_t *ret)
{
	char buf[512];
	ssize_t n = kept_read_some(cg, slot, dir, file, buf, sizeof buf);

	if (n < 0)
		return (int)n;
	if ((size_t)n < sizeof buf - 1)
		return cg_parse_keyed(buf, key, ret);
	return cg_read_keyed(dir, file, key, ret);
}

static int kept_write(const struct cgroup *cg, size_t slot, const char *dir, const char *file,
		      const char *value)
{
	size_t len = strlen(value);

	if (cg->kept[slot] > 0) {
		ssize_t n;

		do
			n = pwrite(cg->kept[slot] - 1, value, len, 0);
		while (n < 0 && errno == EINTR);
		if (n == (ssize_t)len)
			return 0;
		if (n >= 0 || errno != ENODEV)
			return n < 0 ? negative_errno() : -EIO;
	}
	return cg_write(dir, file, value);
}

static int v1_is_empty(const struct cgroup *cg)
{
	size_t missing = 0;

	for (size_t i = 0; i < cg->n_dirs; i++) {
		int r = cg_tree_has_procs(cg->dirs[i]);
		if (r == -ENOENT) {
			missing++;
			continue;
		}
		if (r != 0)
			return r > 0 ? 0 : r;
	}
	return missing == cg->n_dirs ? -ENOENT : 1;
}

/* Missing files read as 0: old kernels lack oom_kill, some hosts lack a hierarchy. */
static int read_or_zero(int r, uint64_t *v)
{
	if (r == -ENOENT) {
		*v = 0;
		return 0;
	}
	return r;
}

static int v1_get_stats(const struct cgroup *cg, struct cgroup_stats *ret)
{
	const char *cpuacct = v1_dir_with(cg, "cpuacct.usage");
	const char *mem = v1_dir_with(cg, "memory.max_usage_in_bytes");
	uint64_t ns = 0, peak = 0, ooms = 0;
	int r = 0;

	if (cpuacct)
		r = read_or_zero(
			kept_read_u64(cg, KEPT_CPUACCT_USAGE, cpuacct, "cpuacct.usage", &ns), &ns);
	if (r >= 0 && mem)
		r = read_or_zero(kept_read_u64(cg, KEPT_MEM_MAX_USAGE, mem,
					       "memory.max_usage_in_bytes", &peak),
				 &peak);
	if (r >= 0 && mem)
		r = read_or_zero(kept_read_keyed(cg, KEPT_OOM_CONTROL, mem, "memory.oom_control",
						 "oom_kill", &ooms),
				 &ooms);
	if (r < 0)
		return r;
	*ret = (struct cgroup_stats){ .cpu_usec = ns / 1000,
				      .peak_memory = peak,
				      .oom_kills = ooms };
	return 0;
}

static int v1_get_usage(const struct cgroup *cg, struct cgroup_usage *ret)
{
	const char *cpuacct = v1_dir_with(cg, "cpuacct.usage");
	const char *mem = v1_dir_with(cg, "memory.usage_in_bytes");
	uint64_t ns = 0, current = 0;
	int r = 0;

	if (!cpuacct && !mem)
		return -ENOENT;
	if (cpuacct)
		r = kept_read_u64(cg, KEPT_CPUACCT_USAGE, cpuacct, "cpuacct.usage", &ns);
	if (r >= 0 && mem)
		r = kept_read_u64(cg, KEPT_MEM_USAGE, mem, "memory.usage_in_bytes", &current);
	if (r < 0)
		return r;
	*ret = (struct cgroup_usage){ .cpu_usec = ns / 1000, .memory_bytes = current };
	return 0;
}

static int v1_reset_stats(const struct cgroup *cg)
{
	const char *cpuacct = v1_dir_with(cg, "cpuacct.usage");
	const char *mem = v1_dir_with(cg, "memory.max_usage_in_bytes");
	uint64_t usage = 0;
	/* page cache the last command left stays charged here: the next one's peak would carry
	 * it, so only a group holding (almost) nothing is reused */
	if (mem && (kept_read_u64(cg, KEPT_MEM_USAGE, mem, "memory.usage_in_bytes", &usage) < 0 ||
		    usage > (1u << 20)))
		return -EBUSY;
	int r = cpuacct ? kept_write(cg, KEPT_CPUACCT_USAGE, cpuacct, "cpuacct.usage", "0") : 0;
	if (r >= 0 && mem)
		r = kept_write(cg, KEPT_MEM_MAX_USAGE, mem, "memory.max_usage_in_bytes", "0");
	return r;
}

/* ---- the freezer (cgroup-freeze.c) ------------------------------------------------------------ */

static const char *v1_freezer_dir(const struct cgroup *cg)
{
	return v1_dir_with(cg, "freezer.state");
}

static int v1_freeze_set(const char *dir, bool frozen)
{
	return cg_write(dir, "freezer.state", frozen ? "FROZEN" : "THAWED");
}

/* FREEZING (some member not yet stopped) is not frozen. */
static int v1_freeze_state(const char *dir)
{
	char buf[32];
	ssize_t n = cg_read_some(dir, "freezer.state", buf, sizeof buf);

	if (n < 0)
		return (int)n;
	return strncmp(buf, "FROZEN", 6) == 0;
}

const struct cgroup_ops cgroup_v1_ops = {
	.open_base = v1_open_base,
	.create = v1_create,
	.set_limits = v1_set_limits,
	.attach = v1_attach,
	.kill = v1_kill,
	.is_empty = v1_is_empty,
	.get_stats = v1_get_stats,
	.get_usage = v1_get_usage,
	.keep_files = v1_keep_files,
	.reset_stats = v1_reset_stats,
	.freezer_dir = v1_freezer_dir,
	.freeze_set = v1_freeze_set,
	.freeze_state = v1_freeze_state,
};
