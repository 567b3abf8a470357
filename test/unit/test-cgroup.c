/* SPDX-License-Identifier: MIT */
/* String and parser tests run anywhere. The rest uses real cgroups and needs root: each test
 * works below its own base group "<own cgroup>/test-cgroup-<pid>-<random>" and destroys it. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "basic/cleanup.h"
#include "basic/util.h"
#include "cgroup/cgroup-internal.h"
#include "cgroup/cgroup.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(struct cgroup *, cgroup_free)
#define _cleanup_cgroup_ _cleanup_(cgroup_freep)

/* strings */

static void check_round_trip(const char *s, size_t n_dirs)
{
	_cleanup_cgroup_ struct cgroup *cg = NULL;
	_cleanup_free_ char *back = NULL;

	cr_assert_eq(cgroup_from_string(s, &cg), 0, "%s", s);
	cr_assert_eq(cg->n_dirs, n_dirs);
	cr_assert_eq(cgroup_to_string(cg, &back), 0);
	cr_assert_str_eq(back, s);
}

Test(cgroup_string, round_trip)
{
	_cleanup_cgroup_ struct cgroup *cg = NULL;

	check_round_trip("v2:/sys/fs/cgroup/ws", 1);
	check_round_trip("v1:/sys/fs/cgroup/cpu/ws:/sys/fs/cgroup/memory/a/ws", 2);
	check_round_trip("v1:/a:/b:/c:/d:/e:/f:/g:/h", 8);
	cr_assert_eq(cgroup_from_string("v1:/x/y:/z", &cg), 0);
	cr_assert_eq(cg->version, CGROUP_V1);
	cr_assert_str_eq(cg->dirs[0], "/x/y");
	cr_assert_str_eq(cg->dirs[1], "/z");
}

Test(cgroup_string, rejects)
{
	static const char *const bad[] = {
		"",	      "v3:/a",	   "v1",
		"v1:",	      "v2:",	   "v1:a",
		"v1:/a::/b",  "v1:/a:",	   "v2:/a:/b",
		"v1:/a/../b", "v1:/a/./b", "v1:/..",
		"v1:/a/",     "v1:/a//b",  "v1:/",
		"v2:/a\nb",   "V1:/a",	   "v1:/a:/b:/c:/d:/e:/f:/g:/h:/i",
		" v1:/a",
	};
	struct cgroup *cg = (struct cgroup *)0x1;

	for (size_t i = 0; i < ELEMENTSOF(bad); i++)
		cr_assert_eq(cgroup_from_string(bad[i], &cg), -EINVAL, "'%s'", bad[i]);
	cr_assert_eq(cg, (struct cgroup *)0x1, "ret touched on failure");
}

Test(cgroup_string, child_names)
{
	_cleanup_cgroup_ struct cgroup *cg = NULL, *c = NULL;
	struct cgroup *untouched = (struct cgroup *)0x1;
	char long_name[66];
	static const char *const bad[] = { "", ".", "..", "a/b", "a:b", "a b", "ä", "a\n" };

	cr_assert_eq(cgroup_from_string("v1:/a/ws:/b/ws", &cg), 0);
	cr_assert_eq(cgroup_child(cg, "r-1", &c), 0);
	cr_assert_eq(c->version, CGROUP_V1);
	cr_assert_eq(c->n_dirs, 2);
	cr_assert_str_eq(c->dirs[0], "/a/ws/r-1");
	cr_assert_str_eq(c->dirs[1], "/b/ws/r-1");
	for (size_t i = 0; i < ELEMENTSOF(bad); i++)
		cr_assert_eq(cgroup_child(cg, bad[i], &untouched), -EINVAL, "'%s'", bad[i]);
	memset(long_name, 'a', 65);
	long_name[65] = '\0';
	cr_assert_eq(cgroup_child(cg, long_name, &untouched), -EINVAL);
	cr_assert_eq(untouched, (struct cgroup *)0x1);
	long_name[64] = '\0';
	cgroup_free(c);
	c = NULL;
	cr_assert_eq(cgroup_child(cg, long_name, &c), 0);
	cr_assert_eq(cgroup_open_base("../escape", &untouched), -EINVAL);
}

/* parsers */

Test(cgroup_parse, proc_cgroup)
{
	static const char hybrid[] = "9:name=systemd:/\n8:pids:/\n4:memory:/process_api/24fc\n"
				     "2:cpu,cpuacct:/user/x\n1:freezer:/\n0::/unified/y\n";
	_cleanup_free_ char *a = NULL, *b = NULL, *c = NULL, *d = NULL;
	char *none = (char *)0x1;

	cr_assert_eq(cg_parse_proc_cgroup(hybrid, "memory", &a), 0);
	cr_assert_str_eq(a, "/process_api/24fc");
	cr_assert_eq(cg_parse_proc_cgroup(hybrid, "cpuacct", &b), 0);
	cr_assert_str_eq(b, "/user/x");
	cr_assert_eq(cg_parse_proc_cgroup(hybrid, NULL, &c), 0);
	cr_assert_str_eq(c, "/unified/y");
	cr_assert_eq(cg_parse_proc_cgroup(hybrid, "freezer", &d), 0);
	cr_assert_str_eq(d, "/");
	cr_assert_eq(cg_parse_proc_cgroup(hybrid, "cpuset", &none), -ENOENT);
	cr_assert_eq(cg_parse_proc_cgroup(hybrid, "mem", &none), -ENOENT, "prefix is no match");
	cr_assert_eq(cg_parse_proc_cgroup("1:cpu:/a\n", NULL, &none), -ENOENT);
	cr_assert_eq(none, (char *)0x1);
}

Test(cgroup_parse, mountinfo)
{
	static const char mi[] =
		"24 1 0:22 / /sys rw - sysfs sysfs rw\n"
		"31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
		"32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime shared:9 - cgroup cgroup "
		"rw,cpu,cpuacct\n"
		"35 31 0:32 /ns/root /sys/fs/cgroup/mem\\040ory rw - cgroup cgroup rw,memory\n"
		"41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n"
		"40 31 0:37 / /sys/fs/cgroup/systemd rw - cgroup cgroup rw,xattr,name=systemd\n";
	_cleanup_free_ char *mp = NULL, *root = NULL, *mp2 = NULL, *root2 = NULL;
	char *none = (char *)0x1;

	cr_assert_eq(cg_parse_mountinfo(mi, "cpuacct", &mp, &root), 0);
	cr_assert_str_eq(mp, "/sys/fs/cgroup/cpu,cpuacct");
	cr_assert_str_eq(root, "/");
	cr_assert_eq(cg_parse_mountinfo(mi, "memory", &mp2, &root2), 0);
	cr_assert_str_eq(mp2, "/sys/fs/cgroup/mem ory");
	cr_assert_str_eq(root2, "/ns/root");
	cr_assert_eq(cg_parse_mountinfo(mi, "pids", &none, &none), -ENOENT);
	cr_assert_eq(cg_parse_mountinfo(mi, "relatime", &none, &none), -ENOENT,
		     "mount options are not controllers");
	cr_assert_eq(none, (char *)0x1);
}

Test(cgroup_parse, keyed)
{
	static const char cpu_stat[] = "usage_usec 1234\nuser_usec 1000\nsystem_usec 234\n";
	static const char oom[] = "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n";
	uint64_t v = 7;

	cr_assert_eq(cg_parse_keyed(cpu_stat, "usage_usec", &v), 0);
	cr_assert_eq(v, 1234);
	cr_assert_eq(cg_parse_keyed(cpu_stat, "system_usec", &v), 0);
	cr_assert_eq(v, 234);
	cr_assert_eq(cg_parse_keyed(oom, "oom_kill", &v), 0);
	cr_assert_eq(v, 3);
	v = 7;
	cr_assert_eq(cg_parse_keyed(cpu_stat, "usage", &v), -ENOENT);
	cr_assert_eq(cg_parse_keyed("populated x\n", "populated", &v), -EINVAL);
	cr_assert_eq(cg_parse_keyed("", "populated", &v), -ENOENT);
	cr_assert_eq(v, 7);
}

/* real cgroups */

static struct cgroup *base;
static enum cgroup_version version;

static void base_setup(void)
{
	char name[64];

	if (geteuid() != 0)
		cr_skip_test("needs root");
	cr_assert_eq(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
	cr_assert_eq(cgroup_detect_version(&version), 0);
	snprintf(name, sizeof(name), "test-cgroup-%d-", (int)getpid());
	cr_assert_eq(random_id(name, 6, name, sizeof(name)), 0);
	cr_assert_eq(cgroup_open_base(name, &base), 0);
}

/* Skips before anything is created: .fini does not run after a skip. */
static void base_setup_v2(void)
{
	enum cgroup_version v;

	cr_assert_eq(cgroup_detect_version(&v), 0);
	if (v != CGROUP_V2)
		cr_skip_test("cgroup v1 host");
	base_setup();
}

static void base_teardown(void)
{
	if (!base)
		return;
	cr_expect_eq(cgroup_destroy(base, 5000), 0);
	for (size_t i = 0; i < base->n_dirs; i++)
		cr_expect_neq(access(base->dirs[i], F_OK), 0, "%s left behind", base->dirs[i]);
	cgroup_free(base);
	base = NULL;
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
}

static struct cgroup *make_child(struct cgroup *parent, const char *name)
{
	struct cgroup *c;

	cr_assert_eq(cgroup_child(parent, name, &c), 0);
	cr_assert_eq(cgroup_create(c), 0);
	for (size_t i = 0; i < c->n_dirs; i++)
		cr_assert_eq(access(c->dirs[i], F_OK), 0, "%s", c->dirs[i]);
	return c;
}

/* Forks a child that joins cg and runs fn; the parent returns once the child is in place. */
static pid_t spawn_in(const struct cgroup *cg, int (*fn)(void *), void *userdata)
{
	int p[2];
	char c;
	pid_t pid;

	cr_assert_eq(pipe2(p, O_CLOEXEC), 0);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		close(p[0]);
		if (cgroup_attach(cg, 0) < 0)
			_exit(90);
		(void)write(p[1], "x", 1);
		close(p[1]);
		_exit(fn(userdata));
	}
	close(p[1]);
	cr_assert_eq(read(p[0], &c, 1), 1, "child failed to attach");
	close(p[0]);
	return pid;
}

static int pause_forever(void *userdata)
{
	for (;;)
		pause();
	return 0;
}

static bool procs_has(char *procs, pid_t pid)
{
	char *save = NULL;

	for (char *l = strtok_r(procs, "\n", &save); l; l = strtok_r(NULL, "\n", &save))
		if (atoi(l) == pid)
			return true;
	return false;
}

/* pid is listed in the group's cgroup.procs in every hierarchy. */
static bool in_group_of(pid_t pid, const struct cgroup *cg)
{
	for (size_t i = 0; i < cg->n_dirs; i++) {
		_cleanup_free_ char *procs = NULL;

		if (cg_read(cg->dirs[i], "cgroup.procs", &procs) < 0 || !procs_has(procs, pid))
			return false;
	}
	return true;
}

Test(cgroup, base_layout, .init = base_setup, .fini = base_teardown)
{
	_cleanup_free_ char *rel = NULL;
	const char *name = strrchr(base->dirs[0], '/');

	cr_assert_eq(cgroup_relative_path(base, &rel), 0);
	if (version == CGROUP_V2) {
		cr_assert_eq(base->n_dirs, 1);
		cr_assert_eq(strcmp(rel + strlen(rel) - strlen(name), name), 0, "%s", rel);
		return;
	}
	/* v1: the same path at the root of every hierarchy, so one cgroupsPath names it */
	cr_assert_geq(base->n_dirs, 3);
	cr_assert_str_eq(rel, name);
	for (size_t i = 0; i < base->n_dirs; i++) {
		cr_assert_eq(strncmp(base->dirs[i], "/sys/fs/cgroup/", 15), 0);
		cr_assert_str_eq(strrchr(base->dirs[i], '/'), name);
		cr_assert_eq(access(base->dirs[i], F_OK), 0, "%s exists", base->dirs[i]);
	}
}

Test(cgroup, relative_path_refuses_disagreeing_hierarchies)
{
	struct cgroup *cg = NULL;
	char *rel = NULL;

	cr_assert_eq(
		cgroup_from_string("v1:/sys/fs/cgroup/memory/a/b:/sys/fs/cgroup/pids/a/b", &cg), 0);
	cr_assert_eq(cgroup_relative_path(cg, &rel), 0);
	cr_assert_str_eq(rel, "/a/b");
	free(rel);
	cgroup_free(cg);
	cr_assert_eq(
		cgroup_from_string("v1:/sys/fs/cgroup/memory/a/b:/sys/fs/cgroup/pids/x/b", &cg), 0);
	cr_assert_eq(cgroup_relative_path(cg, &rel), -EINVAL);
	cgroup_free(cg);
}

static int grandchild_then_pause(void *userdata)
{
	int *fd = userdata;
	pid_t gc = fork();

	if (gc < 0)
		return 91;
	if (gc == 0) {
		setsid();
		execl("/bin/sleep", "sleep", "1000", (char *)NULL);
		_exit(92);
	}
	if (write(*fd, &gc, sizeof(gc)) != sizeof(gc))
		return 93;
	return pause_forever(NULL);
}

Test(cgroup, kill_reaches_daemonized_grandchild_only, .init = base_setup, .fini = base_teardown)
{
	_cleanup_cgroup_ struct cgroup *a = make_child(base, "run-a");
	_cleanup_cgroup_ struct cgroup *b = make_child(base, "run-b");
	int p[2], status;
	pid_t child, gc, sibling;

	cr_assert_eq(pipe(p), 0);
	child = spawn_in(a, grandchild_then_pause, &p[1]);
	close(p[1]);
	cr_assert_eq(read(p[0], &gc, sizeof(gc)), sizeof(gc));
	close(p[0]);
	sibling = spawn_in(b, pause_forever, NULL);

	/* positive controls: everyone is alive and where we put them */
	cr_assert_eq(kill(gc, 0), 0);
	cr_assert(in_group_of(child, a));
	cr_assert(in_group_of(sibling, b));
	for (int i = 0; i < 100 && !in_group_of(gc, a); i++)
		cg_sleep_ms(10);
	cr_assert(in_group_of(gc, a), "grandchild not in the group");
	cr_assert_eq(cgroup_is_empty(a), 0);

	cr_assert_eq(cgroup_kill(a), 0);

	cr_assert_eq(waitpid(child, &status, 0), child);
	cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	/* we are the subreaper: the orphaned grandchild comes back to us */
	cr_assert_eq(waitpid(gc, &status, 0), gc);
	cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "status %x", status);
	int empty = 0;
	for (int i = 0; i < 200 && (empty = cgroup_is_empty(a)) == 0; i++)
		cg_sleep_ms(5);
	cr_assert_eq(empty, 1);

	/* the sibling group is untouched */
	cr_assert_eq(waitpid(sibling, &status, WNOHANG), 0);
	cr_assert_eq(cgroup_is_empty(b), 0);
	kill(sibling, SIGKILL);
	cr_assert_eq(waitpid(sibling, &status, 0), sibling);
}

/* A leaf is judged without listing its directory (cgroupfs link count): a process in a group
 * below must still count. */
Test(cgroup, is_empty_sees_nested_group, .init = base_setup, .fini = base_teardown)
{
	_cleanup_cgroup_ struct cgroup *a = make_child(base, "run-nest");
	_cleanup_cgroup_ struct cgroup *nested = make_child(a, "inner");
	int status;
	pid_t pid;

	cr_assert_eq(cgroup_is_empty(a), 1, "positive control: nobody in it yet");
	pid = spawn_in(nested, pause_forever, NULL);
	cr_assert(in_group_of(pid, nested));
	cr_assert_eq(cgroup_is_empty(nested), 0);
	cr_assert_eq(cgroup_is_empty(a), 0, "the process below the group was missed");
	kill(pid, SIGKILL);
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	int empty = 0;
	for (int i = 0; i < 200 && (empty = cgroup_is_empty(a)) == 0; i++)
		cg_sleep_ms(5);
	cr_assert_eq(empty, 1);
	cr_assert_eq(cgroup_remove(nested), 0);
	cr_assert_eq(cgroup_is_empty(a), 1);
}

static int burn_and_touch(void *userdata)
{
	struct timespec ts;
	size_t n = 20u << 20;
	char *m;

	do
		clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	while (ts.tv_sec == 0 && ts.tv_nsec < 200 * 1000000);
	m = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		return 94;
	memset(m, 1, n);
	return 0;
}

Test(cgroup, stats_after_work, .init = base_setup, .fini = base_teardown)
{
	_cleanup_cgroup_ struct cgroup *s = make_child(base, "stats");
	struct cgroup_stats st = { 0 };
	int status;
	pid_t pid = spawn_in(s, burn_and_touch, NULL);

	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "status %x", status);
	cr_assert_eq(cgroup_get_stats(s, &st), 0);
	cr_assert_geq(st.cpu_usec, 190000, "cpu %llu", (unsigned long long)st.cpu_usec);
	cr_assert_lt(st.cpu_usec, 60ull * 1000000);
	cr_assert_geq(st.peak_memory, 20u << 20, "peak %llu", (unsigned long long)st.peak_memory);
	cr_assert_eq(st.oom_kills, 0);
}

/* The files kept open answer like the paths: fresh content on every read, a reset that takes,
 * a process that left the group gone from it (cgroup.procs is not kept: a v1 descriptor of it
 * would show the pid list it loaded first), and a removed group reads as missing. */
Test(cgroup, kept_files_read_reset_and_vanish, .init = base_setup, .fini = base_teardown)
{
	struct cgroup *s = make_child(base, "kept");
	_cleanup_cgroup_ struct cgroup *inner = make_child(s, "inner");
	struct cgroup_stats st = { 0 };
	size_t kept = 0;
	int status, empty = 0;
	pid_t pid;

	cgroup_keep_files(s);
	for (size_t i = 0; i < CGROUP_KEPT_MAX; i++)
		if (s->kept[i] > 0) {
			cr_assert(fcntl(s->kept[i] - 1, F_GETFD) & FD_CLOEXEC);
			kept++;
		}
	if (version == CGROUP_V1)
		cr_assert_eq(kept, CGROUP_KEPT_MAX, "kept %zu", kept);
	cr_assert_eq(cgroup_is_empty(s), 1, "positive control: nobody in it yet");
	pid = spawn_in(s, pause_forever, NULL);
	cr_assert_eq(cgroup_is_empty(s), 0, "the process in the group was missed");
	kill(pid, SIGKILL);
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	for (int i = 0; i < 200 && (empty = cgroup_is_empty(s)) == 0; i++)
		cg_sleep_ms(5);
	cr_assert_eq(empty, 1);
	pid = spawn_in(inner, pause_forever, NULL);
	cr_assert_eq(cgroup_is_empty(s), 0, "the process below the group was missed");
	kill(pid, SIGKILL);
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	for (int i = 0; i < 200 && (empty = cgroup_is_empty(s)) == 0; i++)
		cg_sleep_ms(5);
	cr_assert_eq(empty, 1);
	cr_assert_eq(cgroup_remove(inner), 0);

	pid = spawn_in(s, burn_and_touch, NULL);
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "status %x", status);
	cr_assert_eq(cgroup_get_stats(s, &st), 0);
	cr_assert_geq(st.cpu_usec, 190000, "cpu %llu", (unsigned long long)st.cpu_usec);
	cr_assert_geq(st.peak_memory, 20u << 20, "peak %llu", (unsigned long long)st.peak_memory);
	if (version == CGROUP_V1) {
		cr_assert_eq(cgroup_reset_stats(s), 0);
		cr_assert_eq(cgroup_get_stats(s, &st), 0);
		cr_assert_lt(st.cpu_usec, 190000, "cpu %llu after reset",
			     (unsigned long long)st.cpu_usec);
		cr_assert_lt(st.peak_memory, 20u << 20, "peak %llu after reset",
			     (unsigned long long)st.peak_memory);
	}

	cr_assert_eq(cgroup_remove(s), 0);
	cr_assert_eq(cgroup_is_empty(s), -ENOENT);
	cr_assert_eq(cgroup_get_stats(s, &st), 0);
	cr_assert_eq(st.cpu_usec, 0);
	cgroup_free(s); /* closes the kept files */
}

/* Forks up to 5 paused children; exit code: 10 * forks that worked + 1 if the next failed
 * with EAGAIN. */
static int fork_five(void *userdata)
{
	pid_t kids[5];
	int n = 0, eagain = 0;

	for (; n < 5; n++) {
		kids[n] = fork();
		if (kids[n] == 0)
			pause_forever(NULL);
		if (kids[n] < 0) {
			eagain = errno == EAGAIN;
			break;
		}
	}
	for (int i = 0; i < n; i++) {
		kill(kids[i], SIGKILL);
		waitpid(kids[i], NULL, 0);
	}
	return n * 10 + eagain;
}

Test(cgroup, pids_limit, .init = base_setup, .fini = base_teardown)
{
	_cleanup_cgroup_ struct cgroup *lim = make_child(base, "limited");
	_cleanup_cgroup_ struct cgroup *free_ = make_child(base, "unlimited");
	struct cgroup_limits l = { .pids = 3 };
	int status;
	pid_t pid;

	cr_assert_eq(cgroup_set_limits(lim, &l), 0);
	pid = spawn_in(lim, fork_five, NULL);
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFEXITED(status));
	cr_assert_eq(WEXITSTATUS(status), 21, "the child and 2 more fit in 3 pids");

	/* positive control: no limit, all five forks work */
	pid = spawn_in(free_, fork_five, NULL);
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFEXITED(status));
	cr_assert_eq(WEXITSTATUS(status), 50);
}

static void expect_file(const struct cgroup *cg, const char *file, const char *want)
{
	for (size_t i = 0; i < cg->n_dirs; i++) {
		_cleanup_free_ char *s = NULL;
		if (cg_read(cg->dirs[i], file, &s) < 0)
			continue;
		cr_assert_str_eq(s, want, "%s/%s", cg->dirs[i], file);
		return;
	}
	cr_assert_fail("no %s", file);
}

Test(cgroup, limits_written, .init = base_setup, .fini = base_teardown)
{
	_cleanup_cgroup_ struct cgroup *c = make_child(base, "lim");
	struct cgroup_limits l = { .cpus = 1.5, .memory_bytes = 64u << 20, .pids = 100 };
	struct cgroup_limits none = { 0 };

	cr_assert_eq(cgroup_set_limits(c, &l), 0);
	if (version == CGROUP_V1) {
		expect_file(c, "cpu.cfs_period_us", "100000\n");
		expect_file(c, "cpu.cfs_quota_us", "150000\n");
		expect_file(c, "memory.limit_in_bytes", "67108864\n");
		expect_file(c, "pids.max", "100\n");
	} else {
		expect_file(c, "cpu.max", "150000 100000\n");
		expect_file(c, "memory.max", "67108864\n");
		expect_file(c, "pids.max", "100\n");
	}
	cr_assert_eq(cgroup_set_limits(c, &none), 0);
	expect_file(c, "pids.max", "max\n");
	if (version == CGROUP_V1)
		expect_file(c, "cpu.cfs_quota_us", "-1\n");
	else
		expect_file(c, "cpu.max", "max 100000\n");
	l.cpus = -1;
	cr_assert_eq(cgroup_set_limits(c, &l), -EINVAL);
}

Test(cgroup, destroy_removes_every_directory, .init = base_setup, .fini = base_teardown)
{
	_cleanup_cgroup_ struct cgroup *d = make_child(base, "d");
	_cleanup_cgroup_ struct cgroup *e = make_child(d, "e");
	_cleanup_cgroup_ struct cgroup *f = make_child(e, "f");
	int status;
	pid_t pid = spawn_in(f, pause_forever, NULL);

	cr_assert_eq(cgroup_remove(d), -EBUSY, "remove refuses while busy");
	cr_assert_eq(cgroup_destroy(d, 5000), 0);
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	for (size_t i = 0; i < d->n_dirs; i++) {
		cr_assert_neq(access(f->dirs[i], F_OK), 0, "%s", f->dirs[i]);
		cr_assert_neq(access(e->dirs[i], F_OK), 0, "%s", e->dirs[i]);
		cr_assert_neq(access(d->dirs[i], F_OK), 0, "%s", d->dirs[i]);
		cr_assert_eq(access(base->dirs[i], F_OK), 0, "base must stay: %s", base->dirs[i]);
	}
	cr_assert_eq(cgroup_destroy(d, 100), 0, "destroying again is fine");
	cr_assert_eq(cgroup_remove(d), 0);
}

Test(cgroup, v2_controllers_enabled, .init = base_setup_v2, .fini = base_teardown)
{
	_cleanup_cgroup_ struct cgroup *c = NULL;
	_cleanup_free_ char *sub = NULL, *avail = NULL;

	c = make_child(base, "c");
	cr_assert_eq(cg_read(base->dirs[0], "cgroup.subtree_control", &sub), 0);
	cr_assert_eq(cg_read(c->dirs[0], "cgroup.controllers", &avail), 0);
	for (const char *const *w = (const char *const[]){ "cpu", "memory", "pids", NULL }; *w; w++)
		cr_assert(strstr(sub, *w) && strstr(avail, *w), "%s: '%s' '%s'", *w, sub, avail);
}

Test(cgroup, v2_kill_file_used, .init = base_setup_v2, .fini = base_teardown)
{
	_cleanup_cgroup_ struct cgroup *c = NULL;
	int status;
	pid_t pid;

	c = make_child(base, "k");
	pid = spawn_in(c, pause_forever, NULL);
	cr_assert_eq(cgroup_kill(c), 0);
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
}

/* ---- the freezer ---------------------------------------------------------------------------- */

static const char *freezer_dir_of(const struct cgroup *cg);

/* Counters the test's processes bump in shared memory, one slot each. */
static volatile uint64_t *counters;

static void counters_setup(void)
{
	base_setup();
	counters = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	cr_assert_neq(counters, MAP_FAILED);
}

static int count_forever(void *userdata)
{
	volatile uint64_t *c = &counters[(uintptr_t)userdata];
	for (;;)
		(*c)++;
	return 0;
}

/* Whether slot i moves within ms (a running process bumps it millions of times a second, but
 * on a loaded machine six spinning processes may each wait long for a CPU). */
static bool advances_within(size_t i, unsigned ms)
{
	uint64_t before = counters[i];
	for (unsigned k = 0; k < ms / 5; k++) {
		cg_sleep_ms(5);
		if (counters[i] != before)
			return true;
	}
	return false;
}

/* A positive answer comes at once; 5 s is the bound for a process that runs. */
static bool advances(size_t i)
{
	return advances_within(i, 5000);
}

/* Frozen: not one bump in 300 ms (with advances() before and after as the controls). */
static bool stays(size_t i)
{
	return !advances_within(i, 300);
}

/* Thaws dir and every group below it: a group frozen on its own account stays frozen under a
 * thawed parent, and a v1 SIGKILL waits for the thaw, so a failed test would leave its
 * processes behind. */
static void thaw_tree(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;

	if (!d)
		return;
	(void)cg_write(dir, version == CGROUP_V2 ? "cgroup.freeze" : "freezer.state",
		       version == CGROUP_V2 ? "0" : "THAWED");
	while ((de = readdir(d))) {
		char sub[PATH_MAX];
		if (de->d_type != DT_DIR || de->d_name[0] == '.')
			continue;
		snprintf(sub, sizeof sub, "%s/%s", dir, de->d_name);
		thaw_tree(sub);
	}
	closedir(d);
}

static void freeze_teardown(void)
{
	if (base)
		thaw_tree(freezer_dir_of(base));
	base_teardown();
}

static void kill_wait(pid_t pid)
{
	kill(pid, SIGKILL);
	cr_assert_eq(waitpid(pid, NULL, 0), pid);
}

Test(cgroup_freeze, group_stops_and_goes_on, .init = counters_setup, .fini = freeze_teardown)
{
	_cleanup_cgroup_ struct cgroup *a = make_child(base, "f");
	pid_t pid = spawn_in(a, count_forever, (void *)0);

	cr_assert(advances(0), "positive control: it counts before the freeze");
	cr_assert_eq(cgroup_freeze(a, true, 2000), 0);
	cr_assert(stays(0), "counted while frozen");
	cr_assert_eq(cgroup_freeze(a, false, 2000), 0);
	cr_assert(advances(0), "does not count after the thaw");
	kill_wait(pid);
}

/* A process that moves itself into the root again and again, making new groups to hide in,
 * thawing them, moving back and removing them: what a sandbox that owns the root's
 * cgroup.procs and the groups it makes can do while it runs. */
struct hostile {
	const char *root;
	size_t slot;
};

static int hostile_loop(void *userdata)
{
	struct hostile *h = userdata;
	char name[32];
	for (unsigned i = 0;; i++) {
		counters[h->slot]++;
		(void)cg_write_u64(h->root, "cgroup.procs", (uint64_t)getpid());
		snprintf(name, sizeof name, "%s/x-%u", h->root, i % 8);
		(void)cg_mkdir(name);
		(void)cg_write_u64(name, "cgroup.procs", (uint64_t)getpid());
		(void)cg_write(name, version == CGROUP_V2 ? "cgroup.freeze" : "freezer.state",
			       version == CGROUP_V2 ? "0" : "THAWED");
		if (i % 3 == 0) { /* out again, and the group gone */
			(void)cg_write_u64(h->root, "cgroup.procs", (uint64_t)getpid());
			(void)rmdir(name);
		}
	}
	return 0;
}

static const char *freezer_dir_of(const struct cgroup *cg)
{
	const struct cgroup_ops *ops = cg->version == CGROUP_V2 ? &cgroup_v2_ops : &cgroup_v1_ops;
	return ops->freezer_dir(cg);
}

Test(cgroup_freeze, below_spares_keeper_and_catches_strays, .init = counters_setup,
     .fini = freeze_teardown)
{
	_cleanup_cgroup_ struct cgroup *root = make_child(base, "root");
	_cleanup_cgroup_ struct cgroup *a = make_child(root, "r-1");
	_cleanup_cgroup_ struct cgroup *nest = make_child(a, "inner");
	_cleanup_cgroup_ struct cgroup *agent = make_child(root, "agent");
	/* three of them: one running thaws the groups the others were frozen in */
	struct hostile h[3] = { { freezer_dir_of(root), 4 },
				{ freezer_dir_of(root), 6 },
				{ freezer_dir_of(root), 7 } };
	struct cgroup_freeze_spec spec = { .keep = "agent", .hold = "held", .timeout_ms = 5000 };
	struct cgroup_freeze_stats st = {};
	pid_t keeper, kept_child, run, nested, stray, mover[3];

	cr_assert_not_null(h[0].root);
	keeper = spawn_in(root, count_forever, (void *)0);
	kept_child = spawn_in(agent, count_forever, (void *)1);
	run = spawn_in(a, count_forever, (void *)2);
	nested = spawn_in(nest, count_forever, (void *)3);
	for (size_t i = 0; i < 3; i++)
		mover[i] = spawn_in(a, hostile_loop, &h[i]);
	stray = spawn_in(root, count_forever, (void *)5);
	spec.keep_pid = keeper;
	for (size_t i = 0; i <= 7; i++)
		cr_assert(advances(i), "positive control: slot %zu counts before", i);

	cr_assert_eq(cgroup_freeze_below(root, &spec, &st), 0);
	cr_assert(advances(0), "the process kept in the root was frozen");
	cr_assert(advances(1), "the kept group was frozen");
	for (size_t i = 2; i <= 7; i++)
		cr_assert(stays(i), "slot %zu counts while frozen", i);
	cr_assert_geq(st.moved, 1, "the stray in the root was not moved");
	_cleanup_free_ char *procs = NULL;
	cr_assert_eq(cg_read(h[0].root, "cgroup.procs", &procs), 0);
	cr_assert_eq(atoi(procs), keeper, "left in the root: %s", procs);
	cr_assert(strchr(procs, '\n') == procs + strlen(procs) - 1, "left in the root: %s", procs);

	cr_assert_eq(cgroup_thaw_below(root, &spec), 0);
	for (size_t i = 0; i <= 7; i++)
		cr_assert(advances(i), "slot %zu does not count after the thaw", i);
	for (size_t i = 0; i < 3; i++)
		kill_wait(mover[i]);
	kill_wait(keeper);
	kill_wait(kept_child);
	kill_wait(run);
	kill_wait(nested);
	kill_wait(stray);
}

/* The hold group outlives the thaw (a removed one delays the next freeze until the kernel lets
 * it go) and serves the next freeze; one of that name the caller does not own is refused. */
Test(cgroup_freeze, below_keeps_hold_and_refuses_a_foreign_one, .init = counters_setup,
     .fini = freeze_teardown)
{
	_cleanup_cgroup_ struct cgroup *root = make_child(base, "root");
	_cleanup_cgroup_ struct cgroup *a = make_child(root, "r-1");
	struct cgroup_freeze_spec spec = { .hold = "held", .timeout_ms = 5000 };
	char hold[PATH_MAX];
	struct stat st;
	pid_t keeper = spawn_in(root, count_forever, (void *)0);
	pid_t run = spawn_in(a, count_forever, (void *)1);

	spec.keep_pid = keeper;
	snprintf(hold, sizeof hold, "%s/held", freezer_dir_of(root));
	cr_assert(advances(1), "positive control: the run counts before");
	for (int i = 0; i < 2; i++) {
		cr_assert_eq(cgroup_freeze_below(root, &spec, NULL), 0, "freeze %d", i);
		cr_assert(stays(1), "freeze %d: the run counts while frozen", i);
		cr_assert_eq(cgroup_thaw_below(root, &spec), 0);
		cr_assert(advances(1), "thaw %d: the run does not count", i);
		cr_assert_eq(stat(hold, &st), 0, "thaw %d: the hold group is gone", i);
	}

	/* the root's owner removes it and makes its own of that name */
	cr_assert_eq(rmdir(hold), 0);
	cr_assert_eq(mkdir(hold, 0755), 0);
	cr_assert_eq(chown(hold, 4242, 4242), 0);
	cr_assert_eq(cgroup_freeze_below(root, &spec, NULL), -EPERM);
	cr_assert(advances(1), "a refused freeze froze the run");
	cr_assert(advances(0), "a refused freeze froze the kept process");
	kill_wait(run);
	kill_wait(keeper);
}

/* pid ended by SIGKILL within 5 s (a v1 SIGKILL waits for a thaw that may never come, so the
 * wait is bounded and says what it saw). */
static void killed_within(pid_t pid, const char *what)
{
	int status = 0;
	pid_t got = 0;
	for (int i = 0; i < 500 && (got = waitpid(pid, &status, WNOHANG)) == 0; i++)
		cg_sleep_ms(10);
	cr_assert_eq(got, pid, "%s (pid %d) still there 5 s after the kill", what, (int)pid);
	cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "%s: status %x", what,
		  status);
}

/* Groups below the killed one that were frozen on their own account (a sandbox owns the groups
 * it makes and may freeze them): the kill thaws them too, so their processes die at once and
 * none is left behind in a frozen group. */
static void kill_through_frozen(struct cgroup *top, struct cgroup *inner, struct cgroup *deep)
{
	pid_t p[3] = { spawn_in(top, count_forever, (void *)0),
		       spawn_in(inner, count_forever, (void *)1),
		       spawn_in(deep, count_forever, (void *)2) };
	for (size_t i = 0; i < 3; i++)
		cr_assert(advances(i), "positive control: slot %zu counts before", i);
	cr_assert_eq(cgroup_freeze(deep, true, 2000), 0); /* each on its own account */
	cr_assert_eq(cgroup_freeze(inner, true, 2000), 0);
	cr_assert(advances(0), "the top group was frozen");
	cr_assert(stays(1) && stays(2), "the inner groups were not frozen");

	cr_assert_eq(cgroup_kill(top), 0);
	killed_within(p[0], "the top group's process");
	killed_within(p[1], "the frozen inner group's process");
	killed_within(p[2], "the frozen group's process below it");
	int empty = 0;
	for (int i = 0; i < 200 && (empty = cgroup_is_empty(top)) == 0; i++)
		cg_sleep_ms(5);
	cr_assert_eq(empty, 1, "processes left in the killed group");
}

Test(cgroup_freeze, kill_thaws_groups_frozen_below, .init = counters_setup, .fini = freeze_teardown)
{
	_cleanup_cgroup_ struct cgroup *top = make_child(base, "kt");
	_cleanup_cgroup_ struct cgroup *inner = make_child(top, "inner");
	_cleanup_cgroup_ struct cgroup *deep = make_child(inner, "deep");

	cr_assert_not_null(freezer_dir_of(top), "no freezer");
	kill_through_frozen(top, inner, deep);
}

/* The same on a cgroup v2 hierarchy where the host is v1 and mounts one beside (hybrid):
 * groups of our own there, no controllers needed for cgroup.freeze and cgroup.kill. */
#define UNIFIED_MOUNT "/sys/fs/cgroup/unified"
static struct cgroup *unified;

static void unified_thaw(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	if (!d)
		return;
	(void)cg_write(dir, "cgroup.freeze", "0");
	while ((de = readdir(d))) {
		char sub[PATH_MAX];
		if (de->d_type != DT_DIR || de->d_name[0] == '.')
			continue;
		snprintf(sub, sizeof sub, "%s/%s", dir, de->d_name);
		unified_thaw(sub);
	}
	closedir(d);
}

static void unified_setup(void)
{
	char name[64], path[PATH_MAX];

	counters_setup();
	if (version == CGROUP_V2)
		return;
	if (access(UNIFIED_MOUNT "/cgroup.procs", F_OK) < 0)
		cr_skip_test("cgroup v1 host without a v2 hierarchy beside it");
	snprintf(name, sizeof name, "test-cgroup-%d-", (int)getpid());
	cr_assert_eq(random_id(name, 6, name, sizeof name), 0);
	snprintf(path, sizeof path, "v2:" UNIFIED_MOUNT "/%s", name);
	cr_assert_eq(cgroup_from_string(path, &unified), 0);
	cr_assert_eq(cg_mkdir(unified->dirs[0]), 0);
}

static void unified_teardown(void)
{
	if (unified) {
		unified_thaw(unified->dirs[0]);
		cr_expect_eq(cgroup_destroy(unified, 5000), 0);
		cgroup_free(unified);
		unified = NULL;
	}
	freeze_teardown();
}

Test(cgroup_freeze, v2_kill_thaws_groups_frozen_below, .init = unified_setup,
     .fini = unified_teardown)
{
	struct cgroup *parent = unified ? unified : base;
	struct cgroup *top = NULL, *inner = NULL, *deep = NULL;

	cr_assert_eq(cgroup_child(parent, "kt", &top), 0);
	cr_assert_eq(cgroup_child(top, "inner", &inner), 0);
	cr_assert_eq(cgroup_child(inner, "deep", &deep), 0);
	cr_assert_eq(cg_mkdir(top->dirs[0]), 0);
	cr_assert_eq(cg_mkdir(inner->dirs[0]), 0);
	cr_assert_eq(cg_mkdir(deep->dirs[0]), 0);
	kill_through_frozen(top, inner, deep);
	cgroup_free(deep);
	cgroup_free(inner);
	cgroup_free(top);
}
