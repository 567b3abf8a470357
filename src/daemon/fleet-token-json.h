/* SPDX-License-Identifier: MIT */
#pragma once

/* A fleet's token row as etcd holds it under tokens/HASH (docs/operations.md, "Many workers"):
 * JSON of the row, its SHA-256 but never the secret. Pure, unit-tested: every worker of the
 * fleet applies what any writer of etcd put there, so a value that is not one is refused
 * whole, never half read. */

#include <stddef.h>

#include "store/store.h"

/* The longest value decoded: a row is a few hundred bytes. */
#define FLEET_TOKEN_JSON_MAX 4096

/* The row as compact JSON (keys sorted); NULL when out of memory. */
char *fleet_token_encode(const struct token_row *row);
/* -EPROTO for anything but what fleet_token_encode() makes of a valid row: not an object, a
 * field of the wrong type or out of its range, a missing id, name, scope, hash or createdAt, a
 * hash that is not 64 lower-case hex, an id, name or tenant longer than its bound or of other
 * characters, a tenant token without a tenant or an admin one with one, the admin token's id
 * (each worker's own, never the fleet's), more than FLEET_TOKEN_JSON_MAX bytes. revoked_at and
 * last_used_at are each worker's own: 0. */
int fleet_token_decode(const char *json, size_t len, struct token_row *ret);
