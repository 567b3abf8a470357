/* SPDX-License-Identifier: MIT */
#pragma once

/* The secret checks that are static in daemon/manager-secret.c, reached through
 * api-parse-secret.c for fuzz-api-request.c. */

#include <jansson.h>
#include <stdbool.h>

#include "basic/error.h"

/* A PUT …/secrets/{name} body: value, host?, username?, expiresAt?. */
int fuzz_secret_body(json_t *body, struct station_error *e);
/* A secret's name as the path gives it. */
bool fuzz_secret_name_valid(const char *name);
