/* SPDX-License-Identifier: MIT */
#include "cgroup/cgroup.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>

#include "basic/cleanup.h"
#include "basic/util.h"
#include "cgroup/cgroup-internal.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(DIR *, closedir)

/* Helpers shared by the backends. */

struct cgroup *cg_new(enum cgroup_version version)
{
	struct cgroup *cg = calloc(1, sizeof(*cg));

	if (cg)
		cg->version = version;
	return cg;
}

static const struct {
	const char *prefix;
	const char *probe;
	unsigned role;
} cg_role_table[] = {
	{ "cpuacct.", "cpuacct.usage", CG_ROLE_CPUACCT },
	{ "cpu.", "cpu.cfs_quota_us", CG_ROLE_CPU },
	{ "memory.", "memory.limit_in_bytes", CG_ROLE_MEMORY },
	{ "pids.", "pids.max", CG_ROLE_PIDS },
	{ "freezer.", "freezer.state", CG_ROLE_FREEZER },
};

unsigned cg_role_of_file(const char *file)
{
	for (size_t i = 0; i < ELEMENTSOF(cg_role_table); i++)
		if (!strncmp(file, cg_role_table[i].prefix, strlen(cg_role_table[i].prefix)))
			return cg_role_table[i].role;
	return 0;
}

unsigned cg_roles(struct cgroup *cg, size_t i)
{
	if (!(cg->roles[i] & CG_ROLE_KNOWN)) {
		unsigned roles = CG_ROLE_KNOWN;
		for (size_t j = 0; j < ELEMENTSOF(cg_role_table); j++)
			if (cg_file_exists(cg->dirs[i], cg_role_table[j].probe))
				roles |= cg_role_table[j].role;
		cg->roles[i] = roles;
	}
	return cg->roles[i];
}

int cg_add_dir(struct cgroup *cg, const char *prefix, const char *suffix)
{
	size_t a = strlen(prefix), b = suffix ? strlen(suffix) : 0;
	char *p;

	if (cg->n_dirs >= CGROUP_MAX_DIRS)
		return -E2BIG;
	if (a + b + 64 >= PATH_MAX) /* room left for "/<control file>" */
		return -ENAMETOOLONG;
	p = malloc(a + b + 1);
	if (!p)
		return -ENOMEM;
	memcpy(p, prefix, a);
	memcpy(p + a, suffix ? suffix : "", b + 1);
	cg->dirs[cg->n_dirs++] = p;
	return 0;
}

bool cg_name_is_valid(const char *name)
{
	size_t n = name ? strlen(name) : 0;

	if (n == 0 || n > 64 || !strcmp(name, ".") || !strcmp(name, ".."))
		return false;
	return strspn(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") ==
	       n;
}

int cg_file_path(const char *dir, const char *file, char ret[PATH_MAX])
{
	size_t a = strlen(dir), b = strlen(file);

	if (a + 1 + b >= PATH_MAX)
		return -ENAMETOOLONG;
	memcpy(ret, dir, a);
	ret[a] = '/';
	memcpy(ret + a + 1, file, b + 1);
	return 0;
}

int cg_write(const char *dir, const char *file, const char *value)
{
	char path[PATH_MAX];
	size_t n = strlen(value);
	ssize_t k;
	int fd, r;

	r = cg_file_path(dir, file, path);
	if (r < 0)
		return r;
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return negative_errno();
	do
		k = write(fd, value, n);
	while (k < 0 && errno == EINTR);
	r = k < 0 ? negative_errno() : (size_t)k == n ? 0 : -EIO;
	close(fd);
	return r;
}

int cg_write_u64(const char *dir, const char *file, uint64_t value)
{
	char buf[24], *p = buf + sizeof(buf);

	*--p = '\0';
	do {
		*--p = (char)('0' + value % 10);
		value /= 10;
	} while (value > 0);
	return cg_write(dir, file, p);
}

bool cg_file_exists(const char *dir, const char *file)
{
	char path[PATH_MAX];

	return cg_file_path(dir, file, path) >= 0 && access(path, F_OK) >= 0;
}

int cg_mkdir(const char *dir)
{
	if (mkdir(dir, 0755) < 0 && errno != EEXIST)
		return negative_errno();
	return 0;
}

int cg_read(const char *dir, const char *file, char **ret)
{
	char path[PATH_MAX];
	int r = cg_file_path(dir, file, path);

	if (r < 0)
		return r;
	return read_file(path, CGROUP_FILE_MAX, ret, NULL);
}

ssize_t cg_read_some(const char *dir, const char *file, char *buf, size_t size)
{
	char path[PATH_MAX];
	ssize_t n;
	int fd, r;

	if (size < 2)
		return -EINVAL;
	r = cg_file_path(dir, file, path);
	if (r < 0)
		return r;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return negative_errno();
	do
		n = read(fd, buf, size - 1);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		n = negative_errno();
	else
		buf[n] = '\0';
	close(fd);
	return n;
}

int cg_read_u64(const char *dir, const char *file, uint64_t *ret)
{
	_cleanup_free_ char *s = NULL;
	char buf[64];
	ssize_t n = cg_read_some(dir, file, buf, sizeof buf);
	int r;

	/* a value fits one read; a short read of a control file is all of it */
	if (n < 0)
		return (int)n;
	if ((size_t)n < sizeof buf - 1) {
		buf[strcspn(buf, "\n")] = '\0';
		return parse_u64(buf, UINT64_MAX, ret);
	}
	r = cg_read(dir, file, &s);
	if (r < 0)
		return r;
	s[strcspn(s, "\n")] = '\0';
	return parse_u64(s, UINT64_MAX, ret);
}

int cg_parse_keyed(const char *content, const char *key, uint64_t *ret)
{
	size_t klen = strlen(key);

	for (const char *l = content; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL) {
		if (strncmp(l, key, klen) != 0 || l[klen] != ' ')
			continue;
		char num[24];
		size_t n = strcspn(l + klen + 1, "\n");
		if (n >= sizeof(num))
			return -ERANGE;
		memcpy(num, l + klen + 1, n);
		num[n] = '\0';
		return parse_u64(num, UINT64_MAX, ret);
	}
	return -ENOENT;
}

/* Does the comma-separated list [list, list + n) hold item? */
static bool list_has(const char *list, size_t n, const char *item)
{
	size_t k = strlen(item);

	for (const char *p = list, *end = list + n; p < end;) {
		size_t c = strcspn(p, ",:");
		if (c > (size_t)(end - p))
			c = (size_t)(end - p);
		if (c == k && !strncmp(p, item, k))
			return true;
		p += c + 1;
	}
	return false;
}

int cg_parse_proc_cgroup(const char *content, const char *controller, char **ret)
{
	for (const char *l = content; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL) {
		const char *c1 = strchr(l, ':'), *eol = l + strcspn(l, "\n");
		const char *c2 = c1 && c1 < eol ? memchr(c1 + 1, ':', (size_t)(eol - c1 - 1)) :
						  NULL;
		bool match;

		if (!c2)
			continue;
		if (controller)
			match = list_has(c1 + 1, (size_t)(c2 - c1 - 1), controller);
		else
			match = c1 - l == 1 && l[0] == '0' && c2 == c1 + 1;
		if (!match)
			continue;
		if (c2[1] != '/')
			return -EINVAL;
		char *p = strndup(c2 + 1, (size_t)(eol - c2 - 1));
		if (!p)
			return -ENOMEM;
		*ret = p;
		return 0;
	}
	return -ENOENT;
}

int cg_read_keyed(const char *dir, const char *file, const char *key, uint64_t *ret)
{
	_cleanup_free_ char *s = NULL;
	char buf[512];
	ssize_t n = cg_read_some(dir, file, buf, sizeof buf);
	int r;

	if (n < 0)
		return (int)n;
	if ((size_t)n < sizeof buf - 1)
		return cg_parse_keyed(buf, key, ret);
	r = cg_read(dir, file, &s);

	if (r < 0)
		return r;
	return cg_parse_keyed(s, key, ret);
}

void cg_sleep_ms(unsigned ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000 };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* Calls fn on dir, then (when fn returns 0) on every group below it, depth-first pre-order.
 * Stops at the first error or positive return. A group below dir that vanished meanwhile is
 * skipped; dir itself missing is -ENOENT. */
static int cg_tree_walk(const char *dir, int (*fn)(const char *dir, void *userdata), void *userdata)
{
	_cleanup_(closedirp) DIR *d = NULL;
	struct dirent *de;
	struct stat st;
	int r;

	r = fn(dir, userdata);
	if (r != 0)
		return r;
	/* cgroupfs counts subdirectories in the link count (2 + n): a leaf needs no listing, the
	 * common case on every command's exit */
	if (stat(dir, &st) < 0)
		return negative_errno();
	if (S_ISDIR(st.st_mode) && st.st_nlink == 2)
		return 0;
	d = opendir(dir);
	if (!d)
		return negative_errno();
	while ((de = readdir(d))) {
		_cleanup_free_ char *sub = NULL;
		if (de->d_type != DT_DIR || !strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (asprintf(&sub, "%s/%s", dir, de->d_name) < 0) {
			sub = NULL;
			return -ENOMEM;
		}
		r = cg_tree_walk(sub, fn, userdata);
		if (r != 0 && r != -ENOENT)
			return r;
	}
	return 0;
}

static int has_procs_one(const char *dir, void *userdata)
{
	char buf[32];
	ssize_t n = cg_read_some(dir, "cgroup.procs", buf, sizeof buf);

	return n < 0 ? (int)n : n > 0;
}

int cg_tree_has_procs(const char *dir)
{
	return cg_tree_walk(dir, has_procs_one, NULL);
}

static int kill_one(const char *dir, void *userdata)
{
	_cleanup_free_ char *s = NULL;
	size_t *n = userdata;
	int r = cg_read(dir, "cgroup.procs", &s);

	if (r < 0)
		return r;
	char *save = NULL;

	for (char *l = strtok_r(s, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		uint64_t pid;
		if (parse_u64(l, INT32_MAX, &pid) < 0 || pid == 0)
			continue;
		if (kill((pid_t)pid, SIGKILL) < 0 && errno != ESRCH)
			return negative_errno();
		(*n)++;
	}
	return 0;
}

int cg_tree_kill(const char *dir, size_t *ret_n)
{
	size_t n = 0;
	int r = cg_tree_walk(dir, kill_one, &n);

	if (r < 0)
		return r;
	if (ret_n)
		*ret_n = n;
	return 0;
}

struct tree_write {
	const char *file, *value;
};

static int write_one(const char *dir, void *userdata)
{
	const struct tree_write *t = userdata;
	return cg_write(dir, t->file, t->value);
}

int cg_tree_write(const char *dir, const char *file, const char *value)
{
	return cg_tree_walk(dir, write_one, &(struct tree_write){ .file = file, .value = value });
}

int cg_tree_remove_children(const char *dir)
{
	_cleanup_(closedirp) DIR *d = opendir(dir);
	struct dirent *de;
	int r = 0;

	if (!d)
		return errno == ENOENT ? 0 : negative_errno();
	while ((de = readdir(d))) {
		_cleanup_free_ char *sub = NULL;
		if (de->d_type != DT_DIR || !strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (asprintf(&sub, "%s/%s", dir, de->d_name) < 0) {
			sub = NULL;
			return -ENOMEM;
		}
		int k = cg_tree_remove_children(sub);
		if (k >= 0 && rmdir(sub) < 0 && errno != ENOENT)
			k = negative_errno();
		if (k < 0 && r >= 0)
			r = k;
	}
	return r;
}

/* Dispatch. */

int cgroup_detect_version(enum cgroup_version *ret)
{
	static enum cgroup_version cached;
	struct statfs fs;

	if (!cached) {
		if (statfs(CGROUP_MOUNT_ROOT, &fs) < 0)
			return negative_errno();
		cached = fs.f_type == CGROUP2_SUPER_MAGIC ? CGROUP_V2 : CGROUP_V1;
	}
	*ret = cached;
	return 0;
}

static const struct cgroup_ops *ops_of(const struct cgroup *cg)
{
	return cg->version == CGROUP_V2 ? &cgroup_v2_ops : &cgroup_v1_ops;
}

int cgroup_open_base(const char *name, struct cgroup **ret)
{
	enum cgroup_version v;
	int r;

	if (!cg_name_is_valid(name))
		return -EINVAL;
	r = cgroup_detect_version(&v);
	if (r < 0)
		return r;
	return (v == CGROUP_V2 ? &cgroup_v2_ops : &cgroup_v1_ops)->open_base(name, ret);
}

/* A v1 hierarchy a leaf needs: the one that measures CPU, memory, or freezes for the kill. */
static bool v1_leaf_hierarchy(struct cgroup *cg, size_t i)
{
	return cg_roles(cg, i) & (CG_ROLE_CPUACCT | CG_ROLE_MEMORY | CG_ROLE_FREEZER);
}

static int child_of(const struct cgroup *cg, const char *name, bool leaf, struct cgroup **ret)
{
	struct cgroup *c;
	char suffix[66];
	int r = 0;

	if (!cg_name_is_valid(name))
		return -EINVAL;
	c = cg_new(cg->version);
	if (!c)
		return -ENOMEM;
	snprintf(suffix, sizeof suffix, "/%s", name); /* a valid name fits */
	/* the roles are the parent's: a child dir need not exist yet */
	struct cgroup *parent = (struct cgroup *)cg;
	for (size_t i = 0; i < cg->n_dirs && r >= 0; i++) {
		bool v1 = cg->version == CGROUP_V1;
		if (leaf && v1 && !v1_leaf_hierarchy(parent, i))
			continue;
		r = cg_add_dir(c, cg->dirs[i], suffix);
		if (r >= 0 && v1)
			c->roles[c->n_dirs - 1] = cg_roles(parent, i);
	}
	if (r >= 0 && c->n_dirs == 0)
		r = -EOPNOTSUPP;
	if (r < 0) {
		cgroup_free(c);
		return r;
	}
	*ret = c;
	return 0;
}

int cgroup_child(const struct cgroup *cg, const char *name, struct cgroup **ret)
{
	return child_of(cg, name, false, ret);
}

int cgroup_child_leaf(const struct cgroup *cg, const char *name, struct cgroup **ret)
{
	return child_of(cg, name, true, ret);
}

int cgroup_create(const struct cgroup *cg)
{
	return ops_of(cg)->create(cg);
}

int cgroup_set_limits(const struct cgroup *cg, const struct cgroup_limits *limits)
{
	if (limits->cpus < 0 || limits->cpus > 1e6)
		return -EINVAL;
	return ops_of(cg)->set_limits(cg, limits);
}

int cgroup_attach(const struct cgroup *cg, pid_t pid)
{
	if (pid < 0)
		return -EINVAL;
	return ops_of(cg)->attach(cg, pid);
}

int cgroup_kill(const struct cgroup *cg)
{
	return ops_of(cg)->kill(cg);
}

int cgroup_is_empty(const struct cgroup *cg)
{
	return ops_of(cg)->is_empty(cg);
}

int cgroup_get_stats(const struct cgroup *cg, struct cgroup_stats *ret)
{
	return ops_of(cg)->get_stats(cg, ret);
}

int cgroup_get_usage(const struct cgroup *cg, struct cgroup_usage *ret)
{
	return ops_of(cg)->get_usage(cg, ret);
}

int cgroup_reset_stats(const struct cgroup *cg)
{
	return ops_of(cg)->reset_stats ? ops_of(cg)->reset_stats(cg) : -EOPNOTSUPP;
}

int cgroup_remove(const struct cgroup *cg)
{
	int r = 0;

	for (size_t i = 0; i < cg->n_dirs; i++)
		if (rmdir(cg->dirs[i]) < 0 && errno != ENOENT && r >= 0)
			r = negative_errno();
	return r;
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* 0 once the group (and everything below) is empty or gone, -EBUSY after timeout_ms. */
static int cgroup_wait_empty(const struct cgroup *cg, int timeout_ms)
{
	uint64_t deadline = now_ms() + (uint64_t)MAX(timeout_ms, 0);
	unsigned delay = 1;

	for (;;) {
		int r = cgroup_is_empty(cg);
		if (r == -ENOENT || r > 0)
			return 0;
		if (r < 0)
			return r;
		uint64_t now = now_ms();
		if (now >= deadline)
			return -EBUSY;
		cg_sleep_ms((unsigned)MIN((uint64_t)delay, deadline - now));
		delay = MIN(delay * 2, 16u);
	}
}

int cgroup_destroy(const struct cgroup *cg, int timeout_ms)
{
	int r;

	r = cgroup_kill(cg);
	if (r < 0 && r != -ENOENT)
		return r;
	r = cgroup_wait_empty(cg, timeout_ms);
	if (r < 0)
		return r;
	for (size_t i = 0; i < cg->n_dirs; i++) {
		int k = cg_tree_remove_children(cg->dirs[i]);
		if (k < 0 && r >= 0)
			r = k;
	}
	if (r < 0)
		return r;
	return cgroup_remove(cg);
}

void cgroup_keep_files(struct cgroup *cg)
{
	if (ops_of(cg)->keep_files)
		ops_of(cg)->keep_files(cg);
}

void cgroup_unkeep_files(struct cgroup *cg)
{
	for (size_t i = 0; i < CGROUP_KEPT_MAX; i++) {
		if (cg->kept[i] > 0)
			close(cg->kept[i] - 1);
		cg->kept[i] = 0;
	}
}

void cgroup_free(struct cgroup *cg)
{
	if (!cg)
		return;
	cgroup_unkeep_files(cg);
	for (size_t i = 0; i < cg->n_dirs; i++)
		free(cg->dirs[i]);
	free(cg);
}

int cgroup_to_string(const struct cgroup *cg, char **ret)
{
	size_t len = 3;
	char *s, *p;

	for (size_t i = 0; i < cg->n_dirs; i++)
		len += 1 + strlen(cg->dirs[i]);
	s = malloc(len + 1);
	if (!s)
		return -ENOMEM;
	p = stpcpy(s, cg->version == CGROUP_V2 ? "v2" : "v1");
	for (size_t i = 0; i < cg->n_dirs; i++) {
		*p++ = ':';
		p = stpcpy(p, cg->dirs[i]);
	}
	*ret = s;
	return 0;
}

/* Absolute, no "." or ".." component, no empty component, no control characters. */
static bool cg_path_is_valid(const char *p, size_t n)
{
	if (n < 2 || p[0] != '/' || p[n - 1] == '/')
		return false;
	for (size_t i = 0; i < n; i++) {
		if ((unsigned char)p[i] < 0x20 || p[i] == 0x7f)
			return false;
		if (p[i] != '/')
			continue;
		size_t c = strcspn(p + i + 1, "/");
		c = MIN(c, n - i - 1);
		if (c == 0 || (c == 1 && p[i + 1] == '.') ||
		    (c == 2 && p[i + 1] == '.' && p[i + 2] == '.'))
			return false;
	}
	return true;
}

static int cg_parse_dirs(struct cgroup *cg, const char *s)
{
	while (*s) {
		size_t n = strcspn(s, ":");
		_cleanup_free_ char *dir = NULL;
		int r;

		if (!cg_path_is_valid(s, n))
			return -EINVAL;
		dir = strndup(s, n);
		if (!dir)
			return -ENOMEM;
		r = cg_add_dir(cg, dir, NULL);
		if (r < 0)
			return r == -ENOMEM ? r : -EINVAL;
		s += n;
		if (*s == ':' && *++s == '\0')
			return -EINVAL; /* trailing ':' */
	}
	return 0;
}

int cgroup_from_string(const char *s, struct cgroup **ret)
{
	enum cgroup_version v;
	struct cgroup *cg;
	int r;

	if (!strncmp(s, "v1:", 3))
		v = CGROUP_V1;
	else if (!strncmp(s, "v2:", 3))
		v = CGROUP_V2;
	else
		return -EINVAL;
	cg = cg_new(v);
	if (!cg)
		return -ENOMEM;
	r = cg_parse_dirs(cg, s + 3);
	if (r >= 0 && (cg->n_dirs == 0 || (v == CGROUP_V2 && cg->n_dirs != 1)))
		r = -EINVAL;
	if (r < 0) {
		cgroup_free(cg);
		return r;
	}
	*ret = cg;
	return 0;
}

static const char *relative_of(const struct cgroup *cg, const char *dir)
{
	size_t n = strlen(CGROUP_MOUNT_ROOT);
	if (strncmp(dir, CGROUP_MOUNT_ROOT, n) != 0 || dir[n] != '/')
		return NULL;
	dir += n;
	if (cg->version == CGROUP_V1)
		dir = strchr(dir + 1, '/'); /* skip the hierarchy's own directory */
	return dir;
}

int cgroup_relative_path(const struct cgroup *cg, char **ret)
{
	const char *first = cg->n_dirs ? relative_of(cg, cg->dirs[0]) : NULL;
	if (!first)
		return -EINVAL;
	for (size_t i = 1; i < cg->n_dirs; i++) {
		const char *p = relative_of(cg, cg->dirs[i]);
		if (!p || strcmp(p, first) != 0)
			return -EINVAL;
	}
	char *s = strdup(first);
	if (!s)
		return -ENOMEM;
	*ret = s;
	return 0;
}

void cgroup_remove_in_all_hierarchies(const char *relative)
{
	_cleanup_free_ char *mountinfo = NULL;
	if (read_file("/proc/self/mountinfo", CGROUP_FILE_MAX, &mountinfo, NULL) < 0)
		return;
	for (char *line = mountinfo, *next; line && *line; line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = 0;
		const char *sep = strstr(line, " - ");
		if (!sep ||
		    (strncmp(sep, " - cgroup ", 10) != 0 && strncmp(sep, " - cgroup2 ", 11)))
			continue;
		/* fields: id parent major:minor root mount-point … */
		char mp[PATH_MAX], path[PATH_MAX];
		if (sscanf(line, "%*s %*s %*s %*s %4095s", mp) != 1 || strchr(mp, '\\'))
			continue;
		snprintf(path, sizeof path, "%s%s", mp, relative);
		(void)rmdir(path);
	}
}
