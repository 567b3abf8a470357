/* SPDX-License-Identifier: MIT */
#pragma once

/* lxcfs, the FUSE filesystem that serves /proc/{cpuinfo,meminfo,stat,uptime,loadavg,…} and
 * /sys/devices/system/cpu as the reading container's cgroups see them. Container workspaces get
 * its files bound read-only over their own (oci-config.h), so that nproc, free, os.cpus() and
 * uptime inside tell the workspace's limits, not the host's.
 *
 * The controller owns the lxcfs it uses: it starts `lxcfs -f` on <root>/lxcfs (its own mount
 * point, never the distribution's /var/lib/lxcfs), watches it by pidfd and starts it again when
 * it dies. It outlives the controller like the agents do (their containers keep reading it);
 * a controller started on the same root adopts the one still serving there. Or the operator
 * points --lxcfs at a mount point some other supervisor keeps; then the controller only looks.
 *
 * Nothing here reads a file of the FUSE mount: a hung lxcfs (or a container hanging a read of
 * it) must never hang the loop. Whether it is mounted comes from /proc/self/mountinfo. */

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct event_loop;
struct lxcfs;

/* mode: "auto" (start our own when the lxcfs binary is installed), "off", or an absolute path
 * of a mount point where an lxcfs the operator runs is mounted. root: the controller's root. */
int lxcfs_new(struct event_loop *loop, const char *mode, const char *root, struct lxcfs **ret);

/* The mount point while an lxcfs serves it, else NULL. */
const char *lxcfs_dir(const struct lxcfs *x);
/* Which lxcfs serves (its pid; for an operator's mount, the mount's id): a workspace started
 * under another one has a view that died with it. 0 when none does. */
unsigned long lxcfs_serial(const struct lxcfs *x);

/* For GET /v1/ready: true when serving; msg says what serves or why nothing does. */
bool lxcfs_status(const struct lxcfs *x, char *msg, size_t n);
/* The operator turned it off (--lxcfs off): a choice, not a failure. */
bool lxcfs_disabled(const struct lxcfs *x);

/* Stops our own lxcfs and unmounts it when keep is false (no container still reads it);
 * otherwise leaves it serving for the next controller. Frees x. */
void lxcfs_free(struct lxcfs *x, bool keep);
