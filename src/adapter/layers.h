/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdint.h>

#include "basic/error.h"

struct image;

/* Shifts layers chowned on disk by an older store (a "<layer>.ids-<base>" marker beside them)
 * back to the image's own ids, once, and removes the marker. */
int layers_unshift(const struct image *img, struct station_error *e);

/* Mounts each layer of img at <dir>/lower/<i> (dir opened as wfd), idmapped to host ids
 * base..base+65535, read-only, nosuid, nodev, and returns overlay's lowerdir option for them
 * (top layer first). Fails closed, naming the kernel requirement, where idmapped mounts are
 * unavailable. The caller mounts the overlay and then calls layers_detach(): the overlay keeps
 * its own references. */
int layers_mount_idmapped(int wfd, const char *dir, const struct image *img, uint32_t base,
			  char **ret_lowerdir, struct station_error *e);

/* Detaches whatever <dir>/lower/<i> holds. Idempotent. */
void layers_detach(const char *dir);
