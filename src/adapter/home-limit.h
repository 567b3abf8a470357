/* SPDX-License-Identifier: MIT */
#pragma once

/* A size limit on a container workspace's HOME (spec "homeSizeMb", set at create from
 * --home-size-mb). The root filesystem of a worker need not support project quotas (ext4
 * without the quota feature, as on the machines this was written on), so HOME is a filesystem
 * of its own: <dir>/home.img, a sparse file formatted ext4 (e2fsprogs' mke2fs), attached to a
 * loop device that detaches itself when unmounted (LO_FLAGS_AUTOCLEAR) and mounted
 * nosuid,nodev at <dir>/home while the workspace runs. A full HOME is ENOSPC inside the
 * sandbox and nowhere else. */

#include "adapter.h"

/* After HOME was prepared: on first use makes the image from HOME's seeded contents, then
 * mounts it over <dir>/home. Nothing when the workspace has no limit or HOME is mounted
 * already. */
int home_limit_mount(const struct adapter_workspace *ws, struct station_error *e);
/* Unmounts HOME (lazily: a dying container may still hold it); the loop device goes with the
 * last reference. Idempotent, nothing when the workspace has no limit. */
void home_limit_unmount(const struct adapter_workspace *ws);
