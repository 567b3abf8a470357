/* SPDX-License-Identifier: MIT */
#pragma once

/* docs/openapi.yaml as JSON, built into the controller by scripts/embed-openapi and served at
 * GET /v1/openapi.json (api-system.c). */

#include <stddef.h>

extern const unsigned char openapi_json[];
extern const size_t openapi_json_size;
extern const char openapi_json_etag[]; /* quoted, from the bytes */
