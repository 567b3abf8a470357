/* SPDX-License-Identifier: MIT */
#pragma once

/* A workspace's name and labels (docs/api.md, "Names and labels"); libc only, so the API, the
 * manager and the clients check them alike.
 *
 * A name is [a-z0-9][a-z0-9._-]{0,62} and never has the shape of a workspace id
 * (basic/workers.h workspace_id_shaped(): WORKER-<26 of [a-z2-7]>): a string is an id or a
 * name by its shape alone, so no name can stand for another workspace's id on any worker. A
 * name is unique among one tenant's workspaces on a worker.
 *
 * Labels: at most LABELS_MAX pairs; a key is [a-z0-9][a-z0-9._/-]{0,62}; a value is UTF-8 of
 * at most LABEL_VALUE_MAX bytes without control characters; keys and values together at most
 * LABELS_BYTES_MAX bytes. */

#include <stdbool.h>
#include <stddef.h>

#include "basic/error.h"

#define WORKSPACE_NAME_MAX 63
#define LABELS_MAX 32
#define LABEL_KEY_MAX 63
#define LABEL_VALUE_MAX 256
#define LABELS_BYTES_MAX 4096

/* 0, or -EINVAL with e (field "name") saying what is wrong with it. */
int workspace_name_check(const char *name, struct station_error *e);
bool label_key_valid(const char *key);
/* 0, or -EINVAL with e (field "labels") naming the key and what is wrong. */
int label_check(const char *key, const char *value, struct station_error *e);
