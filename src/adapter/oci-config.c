/* SPDX-License-Identifier: MIT */
/* config.json for a workspace container. The posture is documented in oci-config.h; the values
 * of masked and read-only paths and of the /dev mounts follow `runc spec`. */

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "basic/cleanup.h"
#include "basic/json-util.h"
#include "basic/util.h"
#include "oci-config.h"

const char *const oci_default_caps[] = { OCI_DEFAULT_CAPS, NULL };

static const char *const masked_paths[] = {
	"/proc/acpi",
	"/proc/asound",
	"/proc/kcore",
	"/proc/keys",
	"/proc/latency_stats",
	"/proc/timer_list",
	"/proc/timer_stats",
	"/proc/sched_debug",
	"/proc/scsi",
	"/sys/firmware",
	"/sys/devices/virtual/powercap",
};

static const char *const readonly_paths[] = {
	"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger",
};

static const char *const namespaces[] = { "pid", "ipc", "uts", "mount", "cgroup", "user" };

#define DEFAULT_PATH "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
#define CPU_PERIOD_USEC 100000

static json_t *strv_to_json(const char *const *v, size_t n)
{
	json_t *a = json_array();
	for (size_t i = 0; a && (n == SIZE_MAX ? v[i] != NULL : i < n); i++)
		json_array_append_new(a, json_string(v[i]));
	return a;
}

static bool is_abs(const char *p)
{
	return p && p[0] == '/';
}

static int check_paths(const struct oci_config *c, struct station_error *e)
{
	const struct {
		const char *name, *value;
		bool required;
	} paths[] = {
		{ "rootfs", c->rootfs, true },
		{ "cwd", c->cwd, false },
		{ "home_dir", c->home_dir, false },
		{ "home_target", c->home_target, false },
		{ "agent_path", c->agent_path, false },
		{ "run_dir", c->run_dir, false },
		{ "credential_dir", c->credential_dir, false },
		{ "resolv_conf", c->resolv_conf, false },
		{ "hosts", c->hosts, false },
		{ "ca_bundle", c->ca_bundle, false },
		{ "netns_path", c->netns_path, false },
		{ "cgroups_path", c->cgroups_path, false },
		{ "lxcfs_dir", c->lxcfs_dir, false },
	};
	for (size_t i = 0; i < ELEMENTSOF(paths); i++) {
		if (!paths[i].value && !paths[i].required)
			continue;
		if (!is_abs(paths[i].value))
			return station_error_set(e, -EINVAL, paths[i].name,
						 "oci config: %s must be an absolute path",
						 paths[i].name);
	}
	for (size_t i = 0; i < c->n_kernel_programs; i++) {
		const char *p = c->kernel_programs[i], *name = p ? strrchr(p, '/') : NULL;
		if (!is_abs(p) || !name[1] || strlen(name) > 64)
			return station_error_set(
				e, -EINVAL, "kernel_programs",
				"oci config: kernel_programs must be absolute paths "
				"of files");
	}
	return 0;
}

static int check_id_map(const struct oci_id_map *m, const char *name, struct station_error *e)
{
	if (m->size == 0)
		return station_error_set(e, -EINVAL, name, "oci config: %s is empty", name);
	if (m->host_id == 0)
		return station_error_set(e, -EINVAL, name,
					 "oci config: %s maps onto host id 0; use an unprivileged "
					 "host range",
					 name);
	if ((uint64_t)m->host_id + m->size > (uint64_t)UINT32_MAX + 1 ||
	    (uint64_t)m->container_id + m->size > (uint64_t)UINT32_MAX + 1)
		return station_error_set(e, -EINVAL, name, "oci config: %s overflows", name);
	return 0;
}

static int check_config(const struct oci_config *c, struct station_error *e)
{
	int r = check_paths(c, e);
	if (r >= 0)
		r = check_id_map(&c->uid_map, "uid_map", e);
	if (r >= 0)
		r = check_id_map(&c->gid_map, "gid_map", e);
	if (r < 0)
		return r;
	if (!c->args || !c->args[0])
		return station_error_set(e, -EINVAL, "args", "oci config: no process arguments");
	for (size_t i = 0; c->env && c->env[i]; i++)
		if (!strchr(c->env[i], '=') || c->env[i][0] == '=')
			return station_error_set(e, -EINVAL, "env",
						 "oci config: env entry \"%s\" is not KEY=VALUE",
						 c->env[i]);
	if (isnan(c->cpus) || c->cpus < 0 || (c->cpus > 0 && c->cpus < 0.01) || c->cpus > 1024)
		return station_error_set(e, -EINVAL, "cpus",
					 "oci config: cpus must be 0 (unlimited) or 0.01 to 1024");
	for (const char *p = c->cpuset; p && *p; p++)
		if (!((*p >= '0' && *p <= '9') || *p == ',' || *p == '-'))
			return station_error_set(e, -EINVAL, "cpuset",
						 "oci config: cpuset \"%s\" is not a CPU list",
						 c->cpuset);
	if (!c->seccomp && !c->seccomp_unconfined)
		return station_error_set(e, -EINVAL, "seccompProfile",
					 "oci config: no seccomp profile (refusing to run "
					 "unconfined)");
	return 0;
}

static json_t *build_env(const struct oci_config *c)
{
	json_t *a = json_array();
	bool has_path = false;
	for (size_t i = 0; c->env && c->env[i]; i++) {
		has_path = has_path || strncmp(c->env[i], "PATH=", 5) == 0;
		json_array_append_new(a, json_string(c->env[i]));
	}
	if (!has_path)
		json_array_insert_new(a, 0, json_string(DEFAULT_PATH));
	return a;
}

static json_t *build_caps(const struct oci_config *c)
{
	const char *const *caps = c->caps ? c->caps : oci_default_caps;
	json_t *set = strv_to_json(caps, SIZE_MAX);
	json_t *o = json_pack("{sO sO sO s[] s[]}", "bounding", set, "effective", set, "permitted",
			      set, "inheritable", "ambient");
	json_decref(set);
	return o;
}

/* min(wanted, current hard limit): a container may not ask for more than we hold. */
static json_t *rlimit_entry(const char *name, int resource, uint64_t soft, uint64_t hard)
{
	struct rlimit cur;
	if (getrlimit(resource, &cur) < 0)
		return NULL;
	if (cur.rlim_max != RLIM_INFINITY) {
		hard = MIN(hard, (uint64_t)cur.rlim_max);
		soft = MIN(soft, hard);
	}
	return json_pack("{ss sI sI}", "type", name, "hard", (json_int_t)hard, "soft",
			 (json_int_t)soft);
}

static json_t *build_rlimits(const struct oci_config *c)
{
	uint64_t nofile = c->nofile ? c->nofile : OCI_NOFILE_DEFAULT;
	struct rlimit core;
	json_t *a = json_array();
	json_t *n = rlimit_entry("RLIMIT_NOFILE", RLIMIT_NOFILE, nofile, nofile);
	/* No core dumps into HOME; the hard limit stays as inherited. */
	json_t *k = getrlimit(RLIMIT_CORE, &core) == 0 ?
			    rlimit_entry("RLIMIT_CORE", RLIMIT_CORE, 0,
					 core.rlim_max == RLIM_INFINITY ? (uint64_t)INT64_MAX :
									  core.rlim_max) :
			    NULL;
	json_t *p = c->nproc ? rlimit_entry("RLIMIT_NPROC", RLIMIT_NPROC, c->nproc, c->nproc) :
			       NULL;
	if (!a || !n || !k || (c->nproc && !p)) {
		json_decref(a), json_decref(n), json_decref(k), json_decref(p);
		return NULL;
	}
	json_array_append_new(a, n);
	json_array_append_new(a, k);
	if (p)
		json_array_append_new(a, p);
	return a;
}

static json_t *build_process(const struct oci_config *c)
{
	json_t *args = json_array();
	for (size_t i = 0; c->args[i]; i++)
		json_array_append_new(args, json_string(c->args[i]));
	return json_pack("{sb s{sI sI} so so ss so so sb so}", "terminal", 0, "user", "uid",
			 (json_int_t)c->uid, "gid", (json_int_t)c->gid, "args", args, "env",
			 build_env(c), "cwd", c->cwd ? c->cwd : "/", "capabilities", build_caps(c),
			 "rlimits", build_rlimits(c), "noNewPrivileges", 1, "oomScoreAdj",
			 json_integer(0));
}

static int add_mount(json_t *mounts, const char *dest, const char *type, const char *source,
		     const char *const *opts)
{
	json_t *m = json_pack("{ss ss ss so}", "destination", dest, "type", type, "source", source,
			      "options", strv_to_json(opts, SIZE_MAX));
	if (!m)
		return -ENOMEM;
	return json_array_append_new(mounts, m) < 0 ? -ENOMEM : 0;
}

static int add_system_mounts(json_t *m, const struct oci_config *c)
{
	char tmp_size[48];
	snprintf(tmp_size, sizeof tmp_size, "size=%llu",
		 (unsigned long long)(c->tmp_size_bytes ? c->tmp_size_bytes :
							  OCI_TMP_SIZE_DEFAULT));
	const char *const none[] = { "nosuid", "noexec", "nodev", NULL };
	const char *const dev[] = { "nosuid", "strictatime", "mode=755", "size=65536k", NULL };
	const char *const pts[] = { "nosuid",	 "noexec", "newinstance", "ptmxmode=0666",
				    "mode=0620", "gid=5",  NULL };
	const char *const shm[] = { "nosuid", "noexec", "nodev", "mode=1777", "size=65536k", NULL };
	const char *const ro[] = { "nosuid", "noexec", "nodev", "ro", NULL };
	const char *const cg[] = { "nosuid", "noexec", "nodev", "relatime", "ro", NULL };
	const char *const tmp[] = { "nosuid", "nodev", "mode=1777", tmp_size, NULL };

	int r = add_mount(m, "/proc", "proc", "proc", none);
	if (r >= 0)
		r = add_mount(m, "/dev", "tmpfs", "tmpfs", dev);
	if (r >= 0)
		r = add_mount(m, "/dev/pts", "devpts", "devpts", pts);
	if (r >= 0)
		r = add_mount(m, "/dev/shm", "tmpfs", "shm", shm);
	if (r >= 0)
		r = add_mount(m, "/dev/mqueue", "mqueue", "mqueue", none);
	if (r >= 0)
		r = add_mount(m, "/sys", "sysfs", "sysfs", ro);
	if (r >= 0)
		r = add_mount(m, "/sys/fs/cgroup", "cgroup", "cgroup", cg);
	if (r >= 0)
		r = add_mount(m, "/tmp", "tmpfs", "tmpfs", tmp);
	return r;
}

/* The agent binary is mounted after the socket dir it lives in. */
static int add_bind_mounts(json_t *m, const struct oci_config *c)
{
	const char *const rw[] = { "rbind", "rw", "nosuid", "nodev", NULL };
	const char *const run[] = { "bind", "rw", "nosuid", "nodev", "noexec", NULL };
	const char *const agent[] = { "bind", "ro", "nosuid", "nodev", NULL };
	const char *const file[] = { "bind", "ro", "nosuid", "nodev", "noexec", NULL };
	int r = 0;

	if (c->home_dir)
		r = add_mount(m, c->home_target ? c->home_target : OCI_HOME_DIR, "bind",
			      c->home_dir, rw);
	if (r >= 0 && c->run_dir)
		r = add_mount(m, OCI_RUN_DIR, "bind", c->run_dir, run);
	if (r >= 0 && c->agent_path)
		r = add_mount(m, OCI_AGENT_PATH, "bind", c->agent_path, agent);
	for (size_t i = 0; r >= 0 && i < c->n_cgroup_binds; i++) {
		char dest[64];
		snprintf(dest, sizeof dest, OCI_CGROUP_DIR "/%zu", i);
		r = add_mount(m, dest, "bind", c->cgroup_binds[i], run);
	}
	if (r >= 0 && c->resolv_conf)
		r = add_mount(m, "/etc/resolv.conf", "bind", c->resolv_conf, file);
	if (r >= 0 && c->hosts)
		r = add_mount(m, "/etc/hosts", "bind", c->hosts, file);
	if (r >= 0 && c->ca_bundle)
		r = add_mount(m, OCI_CA_BUNDLE, "bind", c->ca_bundle, file);
	for (size_t i = 0; r >= 0 && c->ca_bundle && i < c->n_ca_targets; i++)
		r = is_abs(c->ca_targets[i]) ?
			    add_mount(m, c->ca_targets[i], "bind", c->ca_bundle, file) :
			    -EINVAL;
	/* the sandbox's user reaches both: /run/station is container root's alone */
	const char *const cred_tmpfs[] = {
		"nosuid", "nodev", "noexec", "mode=755", "size=64k", NULL
	};
	if (r >= 0 && c->credential_dir)
		r = add_mount(m, OCI_CRED_DIR, "bind", c->credential_dir, run);
	else if (r >= 0 && c->credential_tmpfs)
		r = add_mount(m, OCI_CRED_DIR, "tmpfs", "tmpfs", cred_tmpfs);
	if (r >= 0 && (c->credential_dir || c->credential_tmpfs) && c->agent_path)
		r = add_mount(m, OCI_CRED_HELPER, "bind", c->agent_path, agent);
	for (size_t i = 0; r >= 0 && i < c->n_kernel_programs; i++) {
		const char *name = strrchr(c->kernel_programs[i], '/'); /* check_paths: there */
		char dest[128];
		snprintf(dest, sizeof dest, OCI_KERNEL_DIR "%s", name);
		r = add_mount(m, dest, "bind", c->kernel_programs[i], agent);
	}
	return r;
}

/* Read-only, and never executable or a device: the files are served by a root process on the
 * host, the reader is hostile. */
static int add_lxcfs_mounts(json_t *m, const struct oci_config *c)
{
	static const char *const files[] = { OCI_LXCFS_PROC_FILES };
	const char *const ro[] = { "bind", "ro", "nosuid", "nodev", "noexec", NULL };
	char src[PATH_MAX], dest[64];
	int r = 0;
	if (!c->lxcfs_dir)
		return 0;
	for (size_t i = 0; r >= 0 && i < ELEMENTSOF(files); i++) {
		snprintf(src, sizeof src, "%s/proc/%s", c->lxcfs_dir, files[i]);
		snprintf(dest, sizeof dest, "/proc/%s", files[i]);
		r = add_mount(m, dest, "bind", src, ro);
	}
	snprintf(src, sizeof src, "%s" OCI_LXCFS_SYS_CPU, c->lxcfs_dir);
	if (r >= 0)
		r = add_mount(m, OCI_LXCFS_SYS_CPU, "bind", src, ro);
	return r;
}

static json_t *build_mounts(const struct oci_config *c)
{
	_cleanup_json_ json_t *m = json_array();
	if (!m || add_system_mounts(m, c) < 0 || add_lxcfs_mounts(m, c) < 0 ||
	    add_bind_mounts(m, c) < 0)
		return NULL;
	return TAKE_PTR(m);
}

static json_t *build_namespaces(const struct oci_config *c)
{
	json_t *a = json_array();
	json_t *net = c->netns_path ?
			      json_pack("{ss ss}", "type", "network", "path", c->netns_path) :
			      json_pack("{ss}", "type", "network");
	json_array_append_new(a, net);
	for (size_t i = 0; i < ELEMENTSOF(namespaces); i++)
		json_array_append_new(a, json_pack("{ss}", "type", namespaces[i]));
	return a;
}

static json_t *build_id_map(const struct oci_id_map *m)
{
	return json_pack("[{sI sI sI}]", "containerID", (json_int_t)m->container_id, "hostID",
			 (json_int_t)m->host_id, "size", (json_int_t)m->size);
}

static json_t *build_resources(const struct oci_config *c)
{
	json_t *r = json_pack("{s[{sb ss}]}", "devices", "allow", 0, "access", "rwm");
	if (!r)
		return NULL;
	if (c->cpus > 0) {
		json_int_t quota = (json_int_t)(c->cpus * CPU_PERIOD_USEC + 0.5);
		json_object_set_new(r, "cpu",
				    json_pack("{sI sI}", "quota", quota, "period",
					      (json_int_t)CPU_PERIOD_USEC));
	}
	if (c->cpuset && c->cpuset[0]) {
		json_t *cpu = json_object_get(r, "cpu");
		if (!cpu)
			json_object_set_new(r, "cpu", cpu = json_object());
		json_object_set_new(cpu, "cpus", json_string(c->cpuset));
	}
	if (c->memory_bytes > 0)
		json_object_set_new(r, "memory",
				    json_pack("{sI sI}", "limit", (json_int_t)c->memory_bytes,
					      "swap", (json_int_t)c->memory_bytes));
	if (c->pids > 0)
		json_object_set_new(r, "pids", json_pack("{sI}", "limit", (json_int_t)c->pids));
	return r;
}

static json_t *build_linux(const struct oci_config *c)
{
	char ping_range[32];
	snprintf(ping_range, sizeof ping_range, "0 %u", c->gid_map.size - 1);
	json_t *l = json_pack("{so so so so so so}", "uidMappings", build_id_map(&c->uid_map),
			      "gidMappings", build_id_map(&c->gid_map), "namespaces",
			      build_namespaces(c), "resources", build_resources(c), "maskedPaths",
			      strv_to_json(masked_paths, ELEMENTSOF(masked_paths)), "readonlyPaths",
			      strv_to_json(readonly_paths, ELEMENTSOF(readonly_paths)));
	if (!l)
		return NULL;
	if (c->cgroups_path)
		json_object_set_new(l, "cgroupsPath", json_string(c->cgroups_path));
	/* ping through ICMP datagram sockets instead of CAP_NET_RAW: every mapped group may. Only
	 * in a namespace of our own: a joined one is not owned by the container's user namespace,
	 * so whoever made it sets this (in host gids). */
	if (!c->netns_path)
		json_object_set_new(l, "sysctl",
				    json_pack("{ss}", "net.ipv4.ping_group_range", ping_range));
	if (c->seccomp)
		json_object_set_new(l, "seccomp", json_deep_copy(c->seccomp));
	return l;
}

int oci_config_build(const struct oci_config *c, json_t **ret, struct station_error *e)
{
	int r = check_config(c, e);
	if (r < 0)
		return r;
	_cleanup_json_ json_t *root = json_pack("{ss so s{ss sb} so so}", "ociVersion", "1.0.2",
						"process", build_process(c), "root", "path",
						c->rootfs, "readonly", c->rootfs_readonly, "mounts",
						build_mounts(c), "linux", build_linux(c));
	if (!root)
		return station_error_set(e, -ENOMEM, NULL, "oci config: out of memory");
	if (c->hostname)
		json_object_set_new(root, "hostname", json_string(c->hostname));
	*ret = TAKE_PTR(root);
	return 0;
}

int oci_config_write(const struct oci_config *c, const char *bundle_dir, struct station_error *e)
{
	_cleanup_json_ json_t *root = NULL;
	_cleanup_free_ char *text = NULL;
	char path[PATH_MAX];

	int r = oci_config_build(c, &root, e);
	if (r < 0)
		return r;
	text = json_dumps(root, JSON_COMPACT);
	if (!text)
		return station_error_set(e, -ENOMEM, NULL, "oci config: out of memory");
	if (snprintf(path, sizeof path, "%s/config.json", bundle_dir) >= (int)sizeof path)
		return station_error_set(e, -ENAMETOOLONG, NULL, "bundle path \"%s\" too long",
					 bundle_dir);
	/* Written again before every start and read only by the runtime right after: not
	 * synced to disk (a crash loses nothing the next start does not write anew). The
	 * bundle directory is the controller's alone (0700): no one else plants a file or a
	 * link at that name. */
	r = mkdir_p(bundle_dir, 0700);
	_cleanup_close_ int fd =
		r < 0 ? r : open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0 && r >= 0)
		r = negative_errno();
	if (r >= 0 && fchmod(fd, 0600) < 0)
		r = negative_errno();
	if (r >= 0)
		r = write_all(fd, text, strlen(text));
	if (r < 0)
		return station_error_set(e, r, NULL, "cannot write \"%s\": %s", path, strerror(-r));
	return 0;
}
