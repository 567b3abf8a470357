/* SPDX-License-Identifier: MIT */
#pragma once

/* The OCI runtime-spec config.json of a workspace container (DESIGN §6), built with jansson
 * from one struct and written to <bundle>/config.json atomically.
 *
 * Posture, fixed here and not by callers:
 *  - every namespace new: pid, network (unless netns_path joins one the net module made), ipc,
 *    uts, mount, cgroup, user; container ids 0..n mapped to an unprivileged host range;
 *  - capabilities: OCI_DEFAULT_CAPS below in bounding, permitted and effective (inheritable and
 *    ambient empty, so a non-root process user ends with no effective capability);
 *  - noNewPrivileges; runc's masked and read-only /proc and /sys paths;
 *  - seccomp required: a NULL seccomp object is refused unless seccomp_unconfined is set (tests);
 *  - mounts: /proc, /dev (tmpfs) with devpts, shm, mqueue, /sys read-only, /sys/fs/cgroup
 *    read-only, /tmp tmpfs (size-limited), HOME rw at home_target, the agent binary read-only,
 *    the agent socket dir rw at /run/station, resolv.conf and hosts read-only when given, the
 *    CA bundle read-only at OCI_CA_BUNDLE and over the image's trust-store files when given, the
 *    credential socket dir rw at /run/station-credential (noexec; a bind or a small tmpfs)
 *    and the agent binary read-only as git-credential-station when either is asked for;
 *    each of kernel_programs read-only (executable) at OCI_KERNEL_DIR/<its name>;
 *  - lxcfs_dir: its /proc files (OCI_LXCFS_PROC_FILES) and /sys/devices/system/cpu bound
 *    read-only (nosuid, nodev, noexec) over the container's own, so that what a process inside
 *    reads there is what the container's cgroups allow (lxcfs decides per reader);
 *  - devices: everything denied except runc's and crun's default set;
 *  - net.ipv4.ping_group_range covers every mapped gid: ping works through ICMP datagram
 *    sockets without CAP_NET_RAW (new network namespace only: the creator of a joined
 *    netns_path sets it, in host gids, since the container's user namespace does not own it);
 *  - rlimits: NOFILE and CORE (and NPROC when nproc is set), never above the caller's current
 *    hard limits (root has no CAP_SYS_RESOURCE on our workers). */

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "basic/error.h"

/* The default capability set (see profiles/README.md, "Capabilities"). */
#define OCI_DEFAULT_CAPS                                                                           \
	"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FOWNER", "CAP_FSETID", "CAP_KILL", "CAP_SETGID",     \
		"CAP_SETUID", "CAP_SETPCAP", "CAP_NET_BIND_SERVICE"
/* The same set as a /proc/<pid>/status CapEff mask: bits 0 1 3 4 5 6 7 8 10. */
#define OCI_DEFAULT_CAPS_MASK 0x5fbULL

extern const char *const oci_default_caps[]; /* OCI_DEFAULT_CAPS, NULL-terminated */

#define OCI_AGENT_PATH "/run/station/agent/station-agent"
#define OCI_RUN_DIR "/run/station"
#define OCI_CGROUP_DIR OCI_RUN_DIR "/cgroup"
#define OCI_HOME_DIR "/home/node"
#define OCI_CRED_DIR "/run/station-credential"
#define OCI_CRED_SOCKET OCI_CRED_DIR "/socket"
#define OCI_CRED_HELPER "/usr/local/bin/git-credential-station"
/* Where the code contexts' kernel programs are bound (read-only, executable). */
#define OCI_KERNEL_DIR "/usr/local/bin"
#define OCI_KERNEL_PROGRAMS "station-kernel-python", "station-kernel-js"
/* The workspace's CA bundle (adapter/ca-bundle.h), where the CA variables name it. */
#define OCI_CA_BUNDLE "/run/station-ca/ca-certificates.crt"
/* What is bound from an lxcfs mount (lxcfs 5 or later has all of them). */
#define OCI_LXCFS_PROC_FILES "cpuinfo", "diskstats", "loadavg", "meminfo", "stat", "swaps", "uptime"
#define OCI_LXCFS_SYS_CPU "/sys/devices/system/cpu"
#define OCI_TMP_SIZE_DEFAULT (256ULL << 20)
#define OCI_NOFILE_DEFAULT 65536

struct oci_id_map {
	uint32_t container_id;
	uint32_t host_id;
	uint32_t size;
};

struct oci_config {
	const char *rootfs; /* absolute; the overlay mount point */
	bool rootfs_readonly;
	uint32_t uid, gid;    /* process user inside the container (image config; node: 1000) */
	char *const *env;     /* KEY=VALUE, NULL-terminated; may be NULL */
	const char *cwd;      /* absolute; NULL: "/" */
	char *const *args;    /* NULL-terminated, args[0] required */
	const char *hostname; /* NULL: none set */
	struct oci_id_map uid_map; /* size 0: refused (a user namespace is required) */
	struct oci_id_map gid_map;
	const char *home_dir;	 /* host dir bound rw at home_target; NULL: no HOME mount */
	const char *home_target; /* NULL: OCI_HOME_DIR */
	const char *agent_path;	 /* host path bound ro at OCI_AGENT_PATH; NULL: none */
	const char *run_dir;	 /* host dir bound rw at OCI_RUN_DIR (mounted before the agent) */
	const char *credential_dir; /* host dir bound rw at OCI_CRED_DIR, and agent_path bound ro
				     * at OCI_CRED_HELPER; NULL: neither, unless credential_tmpfs */
	bool credential_tmpfs;	    /* without credential_dir: a small tmpfs at OCI_CRED_DIR instead
				* (runsc: on a host directory it makes the socket but
				* refuses to chown it, EPERM) */
	/* host files (absolute) bound ro at OCI_KERNEL_DIR "/" <basename>: the caller checked
	 * that no symlink of the image redirects those targets (none: NULL, 0) */
	char *const *kernel_programs;
	size_t n_kernel_programs;
	char *const *cgroup_binds; /* host cgroup dirs delegated to the agent, bound rw at
				    * OCI_RUN_DIR "/cgroup/<i>" in this order */
	size_t n_cgroup_binds;
	const char *resolv_conf; /* host files bound ro at /etc/resolv.conf, /etc/hosts; optional */
	const char *hosts;
	/* host file bound ro at OCI_CA_BUNDLE and over each of ca_targets (absolute paths in the
	 * rootfs, symlinks already resolved: the image's trust-store files); NULL: none */
	const char *ca_bundle;
	char *const *ca_targets;
	size_t n_ca_targets;
	const char *netns_path;	  /* join this network namespace; NULL: a new one */
	uint64_t tmp_size_bytes;  /* /tmp tmpfs size; 0: OCI_TMP_SIZE_DEFAULT */
	const char *cgroups_path; /* linux.cgroupsPath; NULL: the runtime's default */
	const char *lxcfs_dir;	  /* where an lxcfs serves; NULL: the host's /proc and /sys */
	const char *cpuset;	  /* linux.resources.cpu.cpus ("0", "1,3"); NULL: every CPU */
	double cpus;		  /* 0: unlimited; else quota = cpus * 100 ms per 100 ms period */
	uint64_t memory_bytes;	  /* 0: unlimited; swap (memory+swap) set to the same value */
	uint64_t pids;		  /* 0: unlimited */
	uint64_t nofile;	  /* RLIMIT_NOFILE wanted; 0: OCI_NOFILE_DEFAULT; clamped */
	uint64_t nproc;		  /* RLIMIT_NPROC, soft = hard; 0: not set. Only where it counts
				   * one container's processes (runsc: per sandbox); under runc
				   * it would count every container of the shared host uid. */
	const char *const *caps;  /* NULL: oci_default_caps */
	const json_t *seccomp;	  /* linux.seccomp from seccomp_profile_load() */
	bool seccomp_unconfined;  /* must be set for seccomp == NULL to be accepted */
};

/* Builds the config object. Errors: -EINVAL with the offending field named. */
int oci_config_build(const struct oci_config *c, json_t **ret, struct station_error *e);

/* Builds it and writes <bundle_dir>/config.json (0600) via a temporary file and rename. */
int oci_config_write(const struct oci_config *c, const char *bundle_dir, struct station_error *e);
