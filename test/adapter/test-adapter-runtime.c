/* SPDX-License-Identifier: MIT */
/* The runtime driver against real runtimes. Error paths use stand-in binaries; the end-to-end
 * tests need root and runc (crun too when installed): a busybox rootfs made here, a config from
 * oci-config with our default seccomp profile, and the posture read from /proc/self/status
 * inside the container, each denial beside a positive control. Every container, state dir,
 * cgroup and temporary directory is removed. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "adapter/oci-config.h"
#include "adapter/runtime.h"
#include "adapter/seccomp.h"
#include "basic/cleanup.h"
#include "basic/util.h"

#define DEFAULT_PROFILE STATION_SOURCE_ROOT "/profiles/default.json"
#define HOST_BASE 300000 /* container 0..65535 → host 300000..365535 */
#define BUSYBOX "/bin/busybox"

static char tmpdir[] = "/tmp/test-oci-runtime-XXXXXX";

static void setup(void)
{
	cr_assert_not_null(mkdtemp(tmpdir));
	cr_assert_eq(chmod(tmpdir, 0755),
		     0); /* the container's root (host uid HOST_BASE) walks it */
}

static void teardown(void)
{
	rm_rf(tmpdir);
}

TestSuite(runtime, .init = setup, .fini = teardown, .timeout = 120);

static void path_in_tmp(char *buf, size_t size, const char *sub)
{
	snprintf(buf, size, "%s/%s", tmpdir, sub);
}

static void write_script(const char *name, const char *text, char *path, size_t size, mode_t mode)
{
	path_in_tmp(path, size, name);
	cr_assert_eq(write_file_atomic(path, text, strlen(text), mode), 0);
}

/* --- without a real runtime --- */

Test(runtime, unknown_runtime_is_named)
{
	struct runtime *rt = NULL;
	struct station_error e = {};
	char root[256];
	path_in_tmp(root, sizeof root, "state");
	cr_assert_eq(runtime_new("no-such-runtime-xyz", root, &rt, &e), -ENOENT);
	cr_assert_str_eq(e.message,
			 "OCI runtime \"no-such-runtime-xyz\" not found in PATH (install "
			 "it, e.g. 'apt-get install no-such-runtime-xyz')");
	cr_assert_null(rt);
	cr_assert_eq(runtime_new("relative/runc", root, &rt, &e), -EINVAL);
}

Test(runtime, probe_refuses_a_non_executable)
{
	struct runtime *rt = NULL;
	struct station_error e = {};
	char root[256], bin[256];
	path_in_tmp(root, sizeof root, "state");
	write_script("fake-runc", "#!/bin/sh\necho hi\n", bin, sizeof bin, 0644);
	cr_assert_eq(runtime_new(bin, root, &rt, &e), 0, "%s", e.message);
	cr_assert_eq(runtime_probe(rt, NULL, &e), -EACCES);
	char want[512];
	snprintf(want, sizeof want, "OCI runtime \"%s\" is not an executable file", bin);
	cr_assert_str_eq(e.message, want);
	runtime_free(rt);
}

Test(runtime, failure_carries_exit_status_and_stderr)
{
	struct runtime *rt = NULL;
	struct station_error e = {};
	struct runtime_state st;
	char root[256], bin[256];
	path_in_tmp(root, sizeof root, "state");
	write_script("fake-runc", "#!/bin/sh\necho 'first line' >&2\necho 'it broke' >&2\nexit 3\n",
		     bin, sizeof bin, 0755);
	cr_assert_eq(runtime_new(bin, root, &rt, &e), 0);
	cr_assert_eq(runtime_state(rt, "c1", &st, &e), -EIO);
	cr_assert_str_eq(e.message, "fake-runc state \"c1\" failed with exit status 3: first line; "
				    "it broke");
	cr_assert_eq(runtime_state(rt, "../x", &st, &e), -EINVAL);
	runtime_free(rt);
}

Test(runtime, waits_are_bounded)
{
	struct runtime *rt = NULL;
	struct station_error e = {};
	char root[256], bin[256];
	path_in_tmp(root, sizeof root, "state");
	write_script("slow-runc", "#!/bin/sh\nexec sleep 30\n", bin, sizeof bin, 0755);
	cr_assert_eq(runtime_new(bin, root, &rt, &e), 0);
	rt->timeout_ms = 300;
	struct timespec a, b;
	clock_gettime(CLOCK_MONOTONIC, &a);
	cr_assert_eq(runtime_start(rt, "c1", &e), -ETIMEDOUT);
	clock_gettime(CLOCK_MONOTONIC, &b);
	cr_assert_str_eq(e.message, "slow-runc start \"c1\" timed out after 300 ms");
	cr_assert_lt(b.tv_sec - a.tv_sec, 5);
	runtime_free(rt);
}

/* --- real runtimes --- */

static bool have_runtime(const char *name)
{
	char *path = NULL;
	struct runtime *rt = NULL;
	char root[256];
	path_in_tmp(root, sizeof root, "probe");
	int r = runtime_new(name, root, &rt, NULL);
	runtime_free(rt);
	free(path);
	return r == 0;
}

static void need_root_and(const char *runtime)
{
	if (geteuid() != 0)
		cr_skip_test("needs root");
	if (!have_runtime(runtime))
		cr_skip_test("%s not installed", runtime);
	if (access(BUSYBOX, X_OK) < 0)
		cr_skip_test("%s missing (apt-get install busybox-static)", BUSYBOX);
}

static void chown_tree(const char *path, uid_t uid)
{
	char cmd[512];
	snprintf(cmd, sizeof cmd, "chown -R -h %u:%u '%s'", uid, uid, path);
	cr_assert_eq(system(cmd), 0);
}

/* rootfs/bin/busybox with sh, cat, true, unshare, test links; mount points made ahead. */
static void make_rootfs(char *rootfs, size_t size)
{
	static const char *const dirs[] = { "bin", "proc",	"dev",	       "sys", "tmp",
					    "etc", "home/node", "run/station", "root" };
	static const char *const links[] = { "sh",   "cat",  "true", "unshare",
					     "test", "echo", "id",   "ping" };
	char p[512], cmd[1024];
	path_in_tmp(rootfs, size, "rootfs");
	for (size_t i = 0; i < ELEMENTSOF(dirs); i++) {
		snprintf(p, sizeof p, "%s/%s", rootfs, dirs[i]);
		cr_assert_eq(mkdir_p(p, 0755), 0);
	}
	snprintf(cmd, sizeof cmd, "cp %s '%s/bin/busybox' && cp %s '%s/bin/icmp-probe'", BUSYBOX,
		 rootfs, STATION_ICMP_PROBE, rootfs);
	cr_assert_eq(system(cmd), 0);
	for (size_t i = 0; i < ELEMENTSOF(links); i++) {
		snprintf(p, sizeof p, "%s/bin/%s", rootfs, links[i]);
		cr_assert_eq(symlink("busybox", p), 0);
	}
	snprintf(p, sizeof p, "%s/etc/passwd", rootfs);
	const char passwd[] =
		"root:x:0:0:root:/root:/bin/sh\nnode:x:1000:1000::/home/node:/bin/sh\n";
	cr_assert_eq(write_file_atomic(p, passwd, strlen(passwd), 0644), 0);
	chown_tree(rootfs, HOST_BASE);
}

struct fixture {
	char rootfs[256], home[256], run[256], bundle[256], state[256], cgroup[128];
	struct runtime *rt;
	const char *runtime;
};

static void fixture_init(struct fixture *f, const char *runtime)
{
	char agent[512];
	struct station_error e = {};
	*f = (struct fixture){ .runtime = runtime };
	make_rootfs(f->rootfs, sizeof f->rootfs);
	path_in_tmp(f->home, sizeof f->home, "home");
	path_in_tmp(f->run, sizeof f->run, "run");
	path_in_tmp(f->bundle, sizeof f->bundle, "bundle");
	path_in_tmp(f->state, sizeof f->state, "state");
	cr_assert_eq(mkdir_p(f->home, 0755), 0);
	snprintf(agent, sizeof agent, "%s/agent", f->run);
	cr_assert_eq(mkdir_p(agent, 0700), 0);
	snprintf(agent, sizeof agent, "%s/agent/station-agent", f->run);
	cr_assert_eq(write_file_atomic(agent, "", 0, 0755), 0); /* the bind's mount point */
	chown_tree(f->home, HOST_BASE + 1000);
	chown_tree(f->run, HOST_BASE);
	snprintf(f->cgroup, sizeof f->cgroup, "/station-test-oci-%d-%s", (int)getpid(), runtime);
	cr_assert_eq(runtime_new(runtime, f->state, &f->rt, &e), 0, "%s", e.message);
}

static void fixture_done(struct fixture *f)
{
	runtime_free(f->rt);
}

static json_t *load_profile(const char *path)
{
	struct seccomp_target t = { .caps = oci_default_caps };
	struct station_error e = {};
	json_t *out = NULL;
	cr_assert_eq(seccomp_profile_load(path, &t, &out, NULL, &e), 0, "%s", e.message);
	return out;
}

static void write_config(struct fixture *f, uint32_t uid, const json_t *seccomp, const char *script)
{
	char *const args[] = { "/bin/sh", "-c", (char *)script, NULL };
	char *const env[] = { "HOME=/home/node", NULL };
	struct station_error e = {};
	struct oci_config c = {
		.rootfs = f->rootfs,
		.uid = uid,
		.gid = uid,
		.env = env,
		.cwd = "/",
		.args = args,
		.hostname = "posture",
		.uid_map = { 0, HOST_BASE, 65536 },
		.gid_map = { 0, HOST_BASE, 65536 },
		.home_dir = f->home,
		.agent_path = BUSYBOX,
		.run_dir = f->run,
		.cgroups_path = f->cgroup,
		.cpus = 0.5,
		.memory_bytes = 256ULL << 20,
		.pids = 64,
		.tmp_size_bytes = 16ULL << 20,
		.seccomp = seccomp,
		.seccomp_unconfined = !seccomp,
	};
	cr_assert_eq(oci_config_write(&c, f->bundle, &e), 0, "%s", e.message);
}

/* Reads fd to EOF, with a deadline. */
static char *read_all(int fd, int timeout_ms)
{
	size_t cap = 65536, len = 0;
	char *buf = malloc(cap);
	cr_assert_not_null(buf);
	for (;;) {
		struct pollfd p = { fd, POLLIN, 0 };
		cr_assert_gt(poll(&p, 1, timeout_ms), 0, "container output timed out");
		ssize_t n = read(fd, buf + len, cap - 1 - len);
		cr_assert_geq(n, 0);
		if (n == 0)
			break;
		len += (size_t)n;
		cr_assert_lt(len, cap - 1);
	}
	buf[len] = '\0';
	return buf;
}

static void cgroup_file(const char *ctrl, const char *cg, const char *file, char *buf, size_t n)
{
	char p[512];
	_cleanup_free_ char *s = NULL;
	snprintf(p, sizeof p, "/sys/fs/cgroup/%s%s/%s", ctrl, cg, file);
	cr_assert_eq(read_file(p, 4096, &s, NULL), 0, "%s", p);
	snprintf(buf, n, "%s", s);
	buf[strcspn(buf, "\n")] = '\0';
}

/* The limits of the config reached the container's cgroup (v1 hybrid or pure v2). */
static void check_limits(const struct fixture *f)
{
	char v[128];
	struct stat st;
	if (stat("/sys/fs/cgroup/cgroup.controllers", &st) == 0) {
		cgroup_file("", f->cgroup, "pids.max", v, sizeof v);
		cr_assert_str_eq(v, "64");
		cgroup_file("", f->cgroup, "memory.max", v, sizeof v);
		cr_assert_str_eq(v, "268435456");
		cgroup_file("", f->cgroup, "cpu.max", v, sizeof v);
		cr_assert_str_eq(v, "50000 100000");
		return;
	}
	cgroup_file("pids", f->cgroup, "pids.max", v, sizeof v);
	cr_assert_str_eq(v, "64");
	cgroup_file("memory", f->cgroup, "memory.limit_in_bytes", v, sizeof v);
	cr_assert_str_eq(v, "268435456");
	cgroup_file("memory", f->cgroup, "memory.memsw.limit_in_bytes", v, sizeof v);
	cr_assert_str_eq(v, "268435456");
	cgroup_file("cpu", f->cgroup, "cpu.cfs_quota_us", v, sizeof v);
	cr_assert_str_eq(v, "50000");
}

/* The runtime removed the container's cgroup on delete, in every hierarchy. */
static void check_cgroup_gone(const struct fixture *f)
{
	static const char *const ctrls[] = { "", "memory/", "pids/", "cpu/", "freezer/" };
	char p[512];
	struct stat st;
	for (size_t i = 0; i < ELEMENTSOF(ctrls); i++) {
		snprintf(p, sizeof p, "/sys/fs/cgroup/%s%s", ctrls[i], f->cgroup + 1);
		cr_assert(stat(p, &st) < 0 && errno == ENOENT, "%s left behind", p);
	}
}

static void wait_stopped(struct fixture *f, const char *id)
{
	struct runtime_state st = {};
	struct station_error e = {};
	for (int i = 0; i < 200; i++) {
		cr_assert_eq(runtime_state(f->rt, id, &st, &e), 0, "%s", e.message);
		if (st.status == RUNTIME_STATUS_STOPPED)
			return;
		usleep(20000);
	}
	cr_assert_fail("container %s did not stop", id);
}

/* Creates, checks the cgroup limits, starts, collects stdout+stderr, deletes. */
static char *run_container(struct fixture *f, const char *id)
{
	struct station_error e = {};
	struct runtime_state st = {};
	int p[2];
	pid_t pid = 0;
	cr_assert_eq(pipe2(p, O_CLOEXEC), 0);
	struct runtime_io io = { .in = -1, .out = p[1], .err = p[1] };
	int r = runtime_create(f->rt, id, f->bundle, &io, &pid, &e);
	close(p[1]);
	cr_assert_eq(r, 0, "%s", e.message);
	cr_assert_gt(pid, 1);
	cr_assert_eq(runtime_state(f->rt, id, &st, &e), 0, "%s", e.message);
	cr_assert_eq(st.status, RUNTIME_STATUS_CREATED);
	cr_assert_eq(st.pid, pid);
	check_limits(f);
	cr_assert_eq(runtime_start(f->rt, id, &e), 0, "%s", e.message);
	char *out = read_all(p[0], 20000);
	close(p[0]);
	if (getenv("STATION_TEST_VERBOSE"))
		fprintf(stderr, "--- %s %s ---\n%s", f->runtime, id, out);
	wait_stopped(f, id);
	cr_assert_eq(runtime_delete(f->rt, id, &e), 0, "%s", e.message);
	cr_assert_eq(runtime_state(f->rt, id, &st, &e), -ENOENT, "%s", e.message);
	cr_assert_eq(runtime_delete(f->rt, id, &e), 0, "a second delete is fine: %s", e.message);
	check_cgroup_gone(f);
	return out;
}

static void assert_line(const char *out, const char *line)
{
	char want[256];
	snprintf(want, sizeof want, "\n%s\n", line);
	cr_assert_not_null(strstr(out, want), "no line \"%s\" in:\n%s", line, out);
}

#define PROBE                                                                                      \
	"cat /proc/self/status; echo uid_map: $(cat /proc/self/uid_map); "                         \
	"unshare -U true; echo unshare=$?; "                                                       \
	"test -x /run/station/agent/station-agent && echo agent=present; "                         \
	"echo x > /run/station/agent/station-agent || echo agent=readonly; "                       \
	"echo hi > /home/node/f && echo home=writable; "                                           \
	"ping -c 1 -W 2 127.0.0.1 >/dev/null; /bin/icmp-probe"

static void posture_default_root(const char *runtime)
{
	struct fixture f;
	need_root_and(runtime);
	fixture_init(&f, runtime);
	json_t *prof = load_profile(DEFAULT_PROFILE);
	write_config(&f, 0, prof, PROBE);
	_cleanup_free_ char *out = run_container(&f, "posture-default");
	assert_line(out, "NoNewPrivs:\t1");
	assert_line(out, "Seccomp:\t2");
	assert_line(out, "CapEff:\t00000000000005fb");
	assert_line(out, "CapPrm:\t00000000000005fb");
	assert_line(out, "CapBnd:\t00000000000005fb");
	assert_line(out, "CapInh:\t0000000000000000");
	assert_line(out, "CapAmb:\t0000000000000000");
	assert_line(out, "Uid:\t0\t0\t0\t0");
	assert_line(out, "uid_map: 0 300000 65536");
	assert_line(out, "unshare: unshare(0x10000000): Operation not permitted");
	assert_line(out, "unshare=1");
	assert_line(out, "agent=present");
	assert_line(out, "agent=readonly");
	assert_line(out, "home=writable");
	/* no CAP_NET_RAW: raw ICMP refused; ping through ICMP datagram sockets works instead */
	assert_line(out, "ping: permission denied (are you root?)");
	assert_line(out, "icmp=ok");
	json_decref(prof);
	fixture_done(&f);
}

/* Positive control: the same probe without seccomp may create a user namespace. */
static void posture_unconfined(const char *runtime)
{
	struct fixture f;
	need_root_and(runtime);
	fixture_init(&f, runtime);
	write_config(&f, 0, NULL, PROBE);
	_cleanup_free_ char *out = run_container(&f, "posture-unconfined");
	assert_line(out, "Seccomp:\t0");
	assert_line(out, "NoNewPrivs:\t1");
	assert_line(out, "unshare=0");
	fixture_done(&f);
}

/* Debian's containers-common profile, converted and loaded by the runtime: a filter is on
 * (Seccomp 2) yet unshare works, since that profile allows it — the denial above is our
 * profile's doing, not a side effect of filtering. */
static void posture_debian_profile(const char *runtime)
{
	struct fixture f;
	need_root_and(runtime);
	if (access("/usr/share/containers/seccomp.json", R_OK) < 0)
		cr_skip_test("golang-github-containers-common not installed");
	fixture_init(&f, runtime);
	json_t *prof = load_profile("/usr/share/containers/seccomp.json");
	write_config(&f, 0, prof, PROBE);
	_cleanup_free_ char *out = run_container(&f, "posture-debian");
	assert_line(out, "Seccomp:\t2");
	assert_line(out, "unshare=0");
	assert_line(out, "home=writable");
	json_decref(prof);
	fixture_done(&f);
}

/* As node (1000): the set bounds what the process could get, and it holds none. */
static void posture_default_node(const char *runtime)
{
	struct fixture f;
	need_root_and(runtime);
	fixture_init(&f, runtime);
	json_t *prof = load_profile(DEFAULT_PROFILE);
	write_config(&f, 1000, prof, PROBE);
	_cleanup_free_ char *out = run_container(&f, "posture-node");
	assert_line(out, "Uid:\t1000\t1000\t1000\t1000");
	assert_line(out, "CapEff:\t0000000000000000");
	assert_line(out, "CapPrm:\t0000000000000000");
	assert_line(out, "CapBnd:\t00000000000005fb");
	assert_line(out, "Seccomp:\t2");
	assert_line(out, "NoNewPrivs:\t1");
	assert_line(out, "home=writable");
	assert_line(out, "agent=readonly");
	assert_line(out, "icmp=ok");
	json_decref(prof);
	fixture_done(&f);
}

/* start → running with the create pid → kill --all → stopped → delete. */
static void kill_running(const char *runtime)
{
	struct fixture f;
	struct station_error e = {};
	struct runtime_state st = {};
	pid_t pid = 0;
	need_root_and(runtime);
	fixture_init(&f, runtime);
	json_t *prof = load_profile(DEFAULT_PROFILE);
	write_config(&f, 1000, prof, "sleep 60");
	cr_assert_eq(runtime_create(f.rt, "sleeper", f.bundle, NULL, &pid, &e), 0, "%s", e.message);
	cr_assert_eq(runtime_start(f.rt, "sleeper", &e), 0, "%s", e.message);
	cr_assert_eq(runtime_state(f.rt, "sleeper", &st, &e), 0, "%s", e.message);
	cr_assert_eq(st.status, RUNTIME_STATUS_RUNNING);
	cr_assert_eq(st.pid, pid);
	cr_assert_eq(kill(pid, 0), 0);
	cr_assert_eq(runtime_kill(f.rt, "sleeper", SIGKILL, true, &e), 0, "%s", e.message);
	wait_stopped(&f, "sleeper");
	cr_assert_eq(runtime_delete(f.rt, "sleeper", &e), 0, "%s", e.message);
	cr_assert_eq(runtime_kill(f.rt, "sleeper", SIGKILL, true, &e), -ENOENT, "%s", e.message);
	check_cgroup_gone(&f);
	json_decref(prof);
	fixture_done(&f);
}

static void probe_and_errors(const char *runtime)
{
	struct fixture f;
	struct station_error e = {};
	struct runtime_state st;
	_cleanup_free_ char *version = NULL;
	need_root_and(runtime);
	fixture_init(&f, runtime);
	cr_assert_eq(runtime_probe(f.rt, &version, &e), 0, "%s", e.message);
	cr_assert_eq(strncmp(version, runtime, strlen(runtime)), 0, "%s", version);
	cr_assert_eq(f.rt->private_mntns, strcmp(runtime, "crun") == 0 && runtime_host_is_hybrid());
	cr_assert_eq(runtime_state(f.rt, "no-such-container", &st, &e), -ENOENT, "%s", e.message);
	cr_assert_eq(runtime_delete(f.rt, "no-such-container", &e), 0, "%s", e.message);
	/* a bundle without config.json: the runtime's own words reach the message */
	cr_assert_eq(mkdir_p(f.bundle, 0700), 0);
	cr_assert_eq(runtime_create(f.rt, "no-config", f.bundle, NULL, NULL, &e), -EIO);
	cr_assert_not_null(strstr(e.message, "create \"no-config\" failed with exit status 1: "),
			   "%s", e.message);
	cr_assert_not_null(strstr(e.message, "config.json"), "%s", e.message);
	if (getenv("STATION_TEST_VERBOSE"))
		fprintf(stderr, "%s\n", e.message);
	cr_assert_eq(runtime_delete(f.rt, "no-config", &e), 0, "%s", e.message);
	fixture_done(&f);
}

/* Control for the workaround: on a hybrid host crun without the private mount namespace refuses
 * to create, and says why. */
Test(runtime, crun_needs_the_private_mount_namespace_on_hybrid_hosts)
{
	struct fixture f;
	struct station_error e = {};
	need_root_and("crun");
	if (!runtime_host_is_hybrid())
		cr_skip_test("not a hybrid cgroup host");
	fixture_init(&f, "crun");
	json_t *prof = load_profile(DEFAULT_PROFILE);
	write_config(&f, 0, prof, "true");
	f.rt->private_mntns = false;
	int r = runtime_create(f.rt, "no-workaround", f.bundle, NULL, NULL, &e);
	cr_assert_eq(r, -EIO);
	cr_assert_str_eq(e.message,
			 "crun create \"no-workaround\" failed with exit status 1: cgroups "
			 "in hybrid mode not supported, drop all controllers from cgroupv2");
	cr_assert_eq(runtime_delete(f.rt, "no-workaround", &e), 0, "%s", e.message);
	f.rt->private_mntns = true;
	cr_assert_eq(runtime_delete(f.rt, "no-workaround", &e), 0, "%s", e.message);
	json_decref(prof);
	fixture_done(&f);
}

Test(runtime, runc_probe_and_errors)
{
	probe_and_errors("runc");
}
Test(runtime, runc_posture_default_root)
{
	posture_default_root("runc");
}
Test(runtime, runc_posture_unconfined_control)
{
	posture_unconfined("runc");
}
Test(runtime, runc_posture_default_node)
{
	posture_default_node("runc");
}
Test(runtime, runc_posture_debian_profile)
{
	posture_debian_profile("runc");
}
Test(runtime, crun_probe_and_errors)
{
	probe_and_errors("crun");
}
Test(runtime, crun_posture_default_root)
{
	posture_default_root("crun");
}
Test(runtime, crun_posture_unconfined_control)
{
	posture_unconfined("crun");
}
Test(runtime, crun_posture_default_node)
{
	posture_default_node("crun");
}
Test(runtime, crun_posture_debian_profile)
{
	posture_debian_profile("crun");
}
Test(runtime, runc_kill_running)
{
	kill_running("runc");
}
Test(runtime, crun_kill_running)
{
	kill_running("crun");
}
