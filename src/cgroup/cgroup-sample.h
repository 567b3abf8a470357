/* SPDX-License-Identifier: MIT */
#pragma once

/* What a group uses, read every few seconds for the usage history and the metrics: the
 * counter files are opened once, when the group is made or adopted, and each reading is one
 * pread() per file. libc only.
 *
 * The group's directories are the host's (the controller made them), but a delegated group
 * (a container's) is written by someone hostile below it: its files are opened beneath a
 * directory fd of the group's own directory (openat2, no symlink, no escape), must be regular
 * files of a cgroup filesystem, and only these fixed names are opened, never a path the
 * sandbox names. A sandbox can create child groups below, never replace the group's own
 * control files.
 *
 * Memory in use is what docker reports: v1 memory.usage_in_bytes minus total_inactive_file of
 * memory.stat, v2 memory.current minus inactive_file (the page cache the kernel would drop
 * first does not count). */

#include <stdint.h>

struct cgroup;
struct cgroup_sampler;

struct cgroup_sample {
	uint64_t cpu_usec;     /* CPU time so far (v1 cpuacct.usage / 1000, v2 usage_usec) */
	uint64_t memory_bytes; /* in use now, inactive file cache left out */
	uint64_t pids;	       /* processes (and threads) now, pids.current */
};

/* Opens the counter files of cg that exist (a missing controller reads as 0). -ENOENT when the
 * group has none of them (gone, or never made). */
int cgroup_sampler_open(const struct cgroup *cg, struct cgroup_sampler **ret);
/* One reading: -ENODEV (or another -errno) when the group went away meanwhile. */
int cgroup_sampler_read(struct cgroup_sampler *s, struct cgroup_sample *ret);
void cgroup_sampler_free(struct cgroup_sampler *s);
