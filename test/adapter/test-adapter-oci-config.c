/* SPDX-License-Identifier: MIT */
/* config.json: the key fields of DESIGN §6, checked value by value, and the refusals. */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>
#include <dirent.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "adapter/oci-config.h"
#include "basic/cleanup.h"
#include "basic/util.h"

static char *const args[] = { "/run/station/agent/station-agent", "--listen-fd=3", NULL };
static char *const env[] = { "HOME=/home/node", "LANG=C.UTF-8", NULL };

static json_t *fake_seccomp(void)
{
	return json_pack("{ss s[]}", "defaultAction", "SCMP_ACT_ERRNO", "syscalls");
}

static struct oci_config base(const json_t *seccomp)
{
	return (struct oci_config){
		.rootfs = "/srv/ws/rootfs",
		.uid = 1000,
		.gid = 1000,
		.env = env,
		.cwd = "/home/node/workspace",
		.args = args,
		.hostname = "ws-abc",
		.uid_map = { 0, 200000, 65536 },
		.gid_map = { 0, 300000, 65536 },
		.home_dir = "/srv/ws/home",
		.agent_path = "/usr/libexec/station-agent",
		.run_dir = "/srv/ws/run",
		.resolv_conf = "/etc/resolv.conf",
		.cgroups_path = "/station/ws-abc",
		.cpus = 0.5,
		.memory_bytes = 512ULL << 20,
		.pids = 128,
		.tmp_size_bytes = 64ULL << 20,
		.seccomp = seccomp,
	};
}

static char *dump(const json_t *j)
{
	return json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
}

static void assert_json(const json_t *root, const char *pointer_a, const char *pointer_b,
			const char *want)
{
	const json_t *j = json_object_get(root, pointer_a);
	if (pointer_b)
		j = json_object_get(j, pointer_b);
	_cleanup_free_ char *s = dump(j);
	cr_assert_str_eq(s, want, "%s.%s", pointer_a, pointer_b ? pointer_b : "");
}

Test(oci_config, golden_fields)
{
	json_t *sec = fake_seccomp(), *root = NULL;
	struct oci_config c = base(sec);
	struct station_error e = {};
	cr_assert_eq(oci_config_build(&c, &root, &e), 0, "%s", e.message);
	json_t *process = json_object_get(root, "process");

	assert_json(root, "ociVersion", NULL, "\"1.0.2\"");
	assert_json(root, "root", NULL, "{\"path\":\"/srv/ws/rootfs\",\"readonly\":false}");
	assert_json(root, "hostname", NULL, "\"ws-abc\"");
	assert_json(process, "user", NULL, "{\"gid\":1000,\"uid\":1000}");
	assert_json(process, "args", NULL,
		    "[\"/run/station/agent/station-agent\",\"--listen-fd=3\"]");
	assert_json(process, "env", NULL,
		    "[\"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\","
		    "\"HOME=/home/node\",\"LANG=C.UTF-8\"]");
	assert_json(process, "cwd", NULL, "\"/home/node/workspace\"");
	assert_json(process, "noNewPrivileges", NULL, "true");
	assert_json(process, "terminal", NULL, "false");
	const char caps[] = "[\"CAP_CHOWN\",\"CAP_DAC_OVERRIDE\",\"CAP_FOWNER\",\"CAP_FSETID\","
			    "\"CAP_KILL\",\"CAP_SETGID\",\"CAP_SETUID\",\"CAP_SETPCAP\","
			    "\"CAP_NET_BIND_SERVICE\"]";
	json_t *cj = json_object_get(process, "capabilities");
	assert_json(cj, "bounding", NULL, caps);
	assert_json(cj, "effective", NULL, caps);
	assert_json(cj, "permitted", NULL, caps);
	assert_json(cj, "inheritable", NULL, "[]");
	assert_json(cj, "ambient", NULL, "[]");

	json_t *lx = json_object_get(root, "linux");
	assert_json(lx, "uidMappings", NULL,
		    "[{\"containerID\":0,\"hostID\":200000,\"size\":65536}]");
	assert_json(lx, "gidMappings", NULL,
		    "[{\"containerID\":0,\"hostID\":300000,\"size\":65536}]");
	assert_json(
		lx, "namespaces", NULL,
		"[{\"type\":\"network\"},{\"type\":\"pid\"},{\"type\":\"ipc\"},{\"type\":\"uts\"},"
		"{\"type\":\"mount\"},{\"type\":\"cgroup\"},{\"type\":\"user\"}]");
	assert_json(lx, "cgroupsPath", NULL, "\"/station/ws-abc\"");
	assert_json(lx, "sysctl", NULL, "{\"net.ipv4.ping_group_range\":\"0 65535\"}");
	assert_json(
		lx, "resources", NULL,
		"{\"cpu\":{\"period\":100000,\"quota\":50000},"
		"\"devices\":[{\"access\":\"rwm\",\"allow\":false}],"
		"\"memory\":{\"limit\":536870912,\"swap\":536870912},\"pids\":{\"limit\":128}}");
	assert_json(lx, "maskedPaths", NULL,
		    "[\"/proc/acpi\",\"/proc/asound\",\"/proc/kcore\",\"/proc/keys\","
		    "\"/proc/latency_stats\",\"/proc/timer_list\",\"/proc/timer_stats\","
		    "\"/proc/sched_debug\",\"/proc/scsi\",\"/sys/firmware\","
		    "\"/sys/devices/virtual/powercap\"]");
	assert_json(
		lx, "readonlyPaths", NULL,
		"[\"/proc/bus\",\"/proc/fs\",\"/proc/irq\",\"/proc/sys\",\"/proc/sysrq-trigger\"]");
	assert_json(lx, "seccomp", NULL, "{\"defaultAction\":\"SCMP_ACT_ERRNO\",\"syscalls\":[]}");

	json_t *m, *mounts = json_object_get(root, "mounts");
	size_t i;
	char dests[1024] = "";
	size_t len = 0;
	json_array_foreach(mounts, i, m) {
		len += (size_t)snprintf(dests + len, sizeof dests - len, "%s ",
					json_string_value(json_object_get(m, "destination")));
		cr_assert_lt(len, sizeof dests);
	}
	cr_assert_str_eq(dests, "/proc /dev /dev/pts /dev/shm /dev/mqueue /sys /sys/fs/cgroup /tmp "
				"/home/node /run/station /run/station/agent/station-agent "
				"/etc/resolv.conf ");
	_cleanup_free_ char *tmp = dump(json_array_get(mounts, 7));
	cr_assert_str_eq(
		tmp, "{\"destination\":\"/tmp\",\"options\":[\"nosuid\",\"nodev\","
		     "\"mode=1777\",\"size=67108864\"],\"source\":\"tmpfs\",\"type\":\"tmpfs\"}");
	_cleanup_free_ char *agent = dump(json_array_get(mounts, 10));
	cr_assert_str_eq(agent, "{\"destination\":\"/run/station/agent/station-agent\",\"options\":"
				"[\"bind\",\"ro\",\"nosuid\",\"nodev\"],\"source\":"
				"\"/usr/libexec/station-agent\",\"type\":\"bind\"}");
	_cleanup_free_ char *home = dump(json_array_get(mounts, 8));
	cr_assert_str_eq(home,
			 "{\"destination\":\"/home/node\",\"options\":[\"rbind\",\"rw\","
			 "\"nosuid\",\"nodev\"],\"source\":\"/srv/ws/home\",\"type\":\"bind\"}");
	json_decref(root);
	json_decref(sec);
}

Test(oci_config, rlimits_never_above_the_hard_limit)
{
	json_t *sec = fake_seccomp(), *root = NULL;
	struct oci_config c = base(sec);
	struct rlimit nofile;
	c.nofile = UINT32_MAX;
	cr_assert_eq(getrlimit(RLIMIT_NOFILE, &nofile), 0);
	cr_assert_eq(oci_config_build(&c, &root, NULL), 0);
	json_t *rl, *list = json_object_get(json_object_get(root, "process"), "rlimits");
	size_t i;
	cr_assert_eq(json_array_size(list), 2);
	json_array_foreach(list, i, rl) {
		const char *type = json_string_value(json_object_get(rl, "type"));
		json_int_t hard = json_integer_value(json_object_get(rl, "hard"));
		json_int_t soft = json_integer_value(json_object_get(rl, "soft"));
		cr_assert_leq(soft, hard);
		if (strcmp(type, "RLIMIT_NOFILE") == 0 && nofile.rlim_max != RLIM_INFINITY)
			cr_assert_eq((rlim_t)hard, MIN(nofile.rlim_max, (rlim_t)UINT32_MAX));
		if (strcmp(type, "RLIMIT_CORE") == 0)
			cr_assert_eq(soft, 0);
	}
	json_decref(root);
	json_decref(sec);
}

Test(oci_config, refusals)
{
	json_t *sec = fake_seccomp(), *root = NULL;
	struct station_error e = {};
	struct oci_config c = base(NULL);

	cr_assert_eq(oci_config_build(&c, &root, &e), -EINVAL);
	cr_assert_str_eq(e.message, "oci config: no seccomp profile (refusing to run unconfined)");
	c.seccomp_unconfined = true;
	cr_assert_eq(oci_config_build(&c, &root, &e), 0);
	cr_assert_null(json_object_get(json_object_get(root, "linux"), "seccomp"));
	json_decref(root);
	root = NULL;

	c = base(sec);
	c.uid_map.host_id = 0;
	cr_assert_eq(oci_config_build(&c, &root, &e), -EINVAL);
	cr_assert_str_eq(e.field, "uid_map");
	c = base(sec);
	c.rootfs = "relative/rootfs";
	cr_assert_eq(oci_config_build(&c, &root, &e), -EINVAL);
	cr_assert_str_eq(e.message, "oci config: rootfs must be an absolute path");
	c = base(sec);
	c.cpus = 0.001;
	cr_assert_eq(oci_config_build(&c, &root, &e), -EINVAL);
	cr_assert_str_eq(e.field, "cpus");
	char *const bad_env[] = { "NOEQUALS", NULL };
	c = base(sec);
	c.env = bad_env;
	cr_assert_eq(oci_config_build(&c, &root, &e), -EINVAL);
	cr_assert_str_eq(e.field, "env");
	cr_assert_null(root);
	json_decref(sec);
}

Test(oci_config, write_is_complete)
{
	char dir[] = "/tmp/test-oci-config-XXXXXX", path[64];
	json_t *sec = fake_seccomp(), *built = NULL;
	struct oci_config c = base(sec);
	cr_assert_not_null(mkdtemp(dir));
	cr_assert_eq(oci_config_write(&c, dir, NULL), 0);
	cr_assert_eq(oci_config_build(&c, &built, NULL), 0);
	snprintf(path, sizeof path, "%s/config.json", dir);
	json_t *read = json_load_file(path, 0, NULL);
	cr_assert_not_null(read);
	cr_assert(json_equal(read, built));
	struct stat st;
	cr_assert_eq(stat(path, &st), 0);
	cr_assert_eq(st.st_mode & 07777, 0600);
	/* nothing but config.json is left behind: no temporary file */
	DIR *d = opendir(dir);
	struct dirent *de;
	size_t n = 0;
	while ((de = readdir(d)))
		if (de->d_name[0] != '.')
			n++;
	closedir(d);
	cr_assert_eq(n, 1);
	/* written again over a longer one (the previous start's): nothing of it is left */
	char junk[16384];
	memset(junk, ' ', sizeof junk);
	FILE *f = fopen(path, "w");
	cr_assert_not_null(f);
	cr_assert_eq(fwrite(junk, 1, sizeof junk, f), sizeof junk);
	fclose(f);
	cr_assert_eq(oci_config_write(&c, dir, NULL), 0);
	json_decref(read);
	read = json_load_file(path, 0, NULL);
	cr_assert_not_null(read);
	cr_assert(json_equal(read, built));
	json_decref(read);
	/* a symlink at config.json is not followed: refused, its target untouched */
	char target[80];
	snprintf(target, sizeof target, "%s/target", dir);
	cr_assert_eq(unlink(path), 0);
	cr_assert_eq(symlink(target, path), 0);
	struct station_error e = { 0 };
	cr_assert_lt(oci_config_write(&c, dir, &e), 0);
	cr_assert_eq(e.err, -ELOOP, "%d %s", e.err, e.message);
	cr_assert_not_null(strstr(e.message, "config.json"), "%s", e.message);
	cr_assert_eq(access(target, F_OK), -1);
	json_decref(built);
	json_decref(sec);
	rm_rf(dir);
}

Test(oci_config, joined_network_namespace)
{
	json_t *sec = fake_seccomp(), *root = NULL;
	struct oci_config c = base(sec);
	c.netns_path = "/run/netns/ws-abc";
	cr_assert_eq(oci_config_build(&c, &root, NULL), 0);
	json_t *lx = json_object_get(root, "linux");
	_cleanup_free_ char *net = dump(json_array_get(json_object_get(lx, "namespaces"), 0));
	cr_assert_str_eq(net, "{\"path\":\"/run/netns/ws-abc\",\"type\":\"network\"}");
	cr_assert_null(json_object_get(lx, "sysctl")); /* its creator owns that sysctl */
	json_decref(root);
	json_decref(sec);
}

/* The credential socket's directory is writable but noexec; the helper is the agent binary,
 * read-only and executable; neither exists without credential_dir (positive control above:
 * golden_fields has no such mount). */
Test(oci_config, credential_mounts)
{
	json_t *sec = fake_seccomp(), *root = NULL;
	struct oci_config c = base(sec);
	struct station_error e = { 0 };

	c.credential_dir = "/srv/ws/cred";
	cr_assert_eq(oci_config_build(&c, &root, &e), 0, "%s", e.message);
	json_t *mounts = json_object_get(root, "mounts");
	size_t n = json_array_size(mounts);
	_cleanup_free_ char *dir = dump(json_array_get(mounts, n - 2));
	cr_assert_str_eq(dir, "{\"destination\":\"/run/station-credential\",\"options\":[\"bind\","
			      "\"rw\",\"nosuid\",\"nodev\",\"noexec\"],\"source\":\"/srv/ws/cred\","
			      "\"type\":\"bind\"}");
	_cleanup_free_ char *helper = dump(json_array_get(mounts, n - 1));
	cr_assert_str_eq(helper,
			 "{\"destination\":\"/usr/local/bin/git-credential-station\",\"options\":"
			 "[\"bind\",\"ro\",\"nosuid\",\"nodev\"],\"source\":"
			 "\"/usr/libexec/station-agent\",\"type\":\"bind\"}");
	json_decref(root);
	root = NULL;
	c.credential_dir = NULL;
	c.credential_tmpfs = true;
	cr_assert_eq(oci_config_build(&c, &root, &e), 0, "%s", e.message);
	mounts = json_object_get(root, "mounts");
	n = json_array_size(mounts);
	_cleanup_free_ char *tmpfs = dump(json_array_get(mounts, n - 2));
	cr_assert_str_eq(tmpfs,
			 "{\"destination\":\"/run/station-credential\",\"options\":[\"nosuid\","
			 "\"nodev\",\"noexec\",\"mode=755\",\"size=64k\"],\"source\":\"tmpfs\","
			 "\"type\":\"tmpfs\"}");
	_cleanup_free_ char *helper2 = dump(json_array_get(mounts, n - 1));
	cr_assert_str_eq(helper2, helper);
	json_decref(root);
	root = NULL;
	c.credential_tmpfs = false;
	c.credential_dir = "srv/ws/cred";
	cr_assert_eq(oci_config_build(&c, &root, &e), -EINVAL);
	cr_assert_str_eq(e.message, "oci config: credential_dir must be an absolute path");
	json_decref(sec);
}

/* The kernel programs are bound read-only and executable at /usr/local/bin under their own
 * names, after everything else; none without kernel_programs (golden_fields); a relative path
 * is refused. */
Test(oci_config, kernel_mounts)
{
	json_t *sec = fake_seccomp(), *root = NULL;
	struct oci_config c = base(sec);
	struct station_error e = { 0 };
	char *const progs[] = { "/usr/libexec/station-sandbox/station-kernel-python",
				"/usr/libexec/station-sandbox/station-kernel-js" };
	char *const bad[] = { "station-kernel-js" };

	c.kernel_programs = progs;
	c.n_kernel_programs = 2;
	cr_assert_eq(oci_config_build(&c, &root, &e), 0, "%s", e.message);
	json_t *mounts = json_object_get(root, "mounts");
	size_t n = json_array_size(mounts);
	_cleanup_free_ char *py = dump(json_array_get(mounts, n - 2));
	cr_assert_str_eq(
		py, "{\"destination\":\"/usr/local/bin/station-kernel-python\",\"options\":"
		    "[\"bind\",\"ro\",\"nosuid\",\"nodev\"],\"source\":"
		    "\"/usr/libexec/station-sandbox/station-kernel-python\",\"type\":\"bind\"}");
	_cleanup_free_ char *js = dump(json_array_get(mounts, n - 1));
	cr_assert_str_eq(js,
			 "{\"destination\":\"/usr/local/bin/station-kernel-js\",\"options\":"
			 "[\"bind\",\"ro\",\"nosuid\",\"nodev\"],\"source\":"
			 "\"/usr/libexec/station-sandbox/station-kernel-js\",\"type\":\"bind\"}");
	json_decref(root);
	root = NULL;
	c.kernel_programs = bad;
	c.n_kernel_programs = 1;
	cr_assert_eq(oci_config_build(&c, &root, &e), -EINVAL);
	cr_assert_str_eq(e.message, "oci config: kernel_programs must be absolute paths of files");
	json_decref(sec);
}

/* lxcfs: its /proc files and /sys/devices/system/cpu bound read-only over the container's own
 * (after /proc and /sys are mounted), nothing of its cgroup tree; a cpuset in the resources. */
Test(oci_config, lxcfs_and_cpuset)
{
	static const char *const files[] = { OCI_LXCFS_PROC_FILES };
	json_t *sec = fake_seccomp(), *root = NULL;
	struct oci_config c = base(sec);
	struct station_error e = { 0 };

	cr_assert_eq(oci_config_build(&c, &root, &e), 0, "%s", e.message);
	json_t *mounts = json_object_get(root, "mounts");
	size_t n_plain = json_array_size(mounts);
	assert_json(json_object_get(root, "linux"), "resources", "cpu",
		    "{\"period\":100000,\"quota\":50000}");
	json_decref(root);
	root = NULL;

	c.lxcfs_dir = "/srv/root/lxcfs";
	c.cpuset = "1,3";
	cr_assert_eq(oci_config_build(&c, &root, &e), 0, "%s", e.message);
	mounts = json_object_get(root, "mounts");
	cr_assert_eq(json_array_size(mounts), n_plain + ELEMENTSOF(files) + 1);
	size_t proc = SIZE_MAX, sys = SIZE_MAX, first = SIZE_MAX, last = 0, k = 0;
	for (size_t i = 0; i < json_array_size(mounts); i++) {
		json_t *m = json_array_get(mounts, i);
		const char *dest = json_string_value(json_object_get(m, "destination"));
		const char *src = json_string_value(json_object_get(m, "source"));
		if (strcmp(dest, "/proc") == 0)
			proc = i;
		if (strcmp(dest, "/sys") == 0)
			sys = i;
		if (strncmp(src, "/srv/root/lxcfs/", 16) != 0)
			continue;
		first = MIN(first, i), last = MAX(last, i), k++;
		cr_assert(strncmp(src + 15, "/cgroup", 7) != 0, "cgroup tree bound: %s", src);
		cr_assert_str_eq(src + 15, dest, "source %s for %s", src, dest);
		_cleanup_free_ char *opts = dump(json_object_get(m, "options"));
		cr_assert_str_eq(opts, "[\"bind\",\"ro\",\"nosuid\",\"nodev\",\"noexec\"]", "%s",
				 dest);
	}
	cr_assert_eq(k, ELEMENTSOF(files) + 1);
	cr_assert(proc < first && sys < first, "after /proc and /sys");
	cr_assert_eq(last - first + 1, k, "together");
	assert_json(json_object_get(root, "linux"), "resources", "cpu",
		    "{\"cpus\":\"1,3\",\"period\":100000,\"quota\":50000}");
	json_decref(root);
	root = NULL;

	c.cpus = 0; /* the quota lives on the workspace group: a cpu object with cpus alone */
	cr_assert_eq(oci_config_build(&c, &root, &e), 0, "%s", e.message);
	assert_json(json_object_get(root, "linux"), "resources", "cpu", "{\"cpus\":\"1,3\"}");
	json_decref(root);
	root = NULL;

	c.cpuset = "0;rm";
	cr_assert_eq(oci_config_build(&c, &root, &e), -EINVAL);
	cr_assert_str_eq(e.field, "cpuset");
	c.cpuset = "0";
	c.lxcfs_dir = "lxcfs";
	cr_assert_eq(oci_config_build(&c, &root, &e), -EINVAL);
	cr_assert_str_eq(e.message, "oci config: lxcfs_dir must be an absolute path");
	cr_assert_null(root);
	json_decref(sec);
}
