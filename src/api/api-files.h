/* SPDX-License-Identifier: MIT */
#pragma once

/* What api-files.c (operations) and api-files-watch.c (watch) share. */

#include <jansson.h>
#include <stdbool.h>

#include "api/http.h"

/* Sets o[key] to s (JSON null when NULL): as is when UTF-8, else base64 with
 * o[key + "Encoding"] = "base64". */
void api_file_set_string(json_t *o, const char *key, const char *s);
/* dir + "/" + name (dir itself when name is empty); NULL when out of memory. */
char *api_file_join(const char *dir, const char *name);
/* The query parameter key as a path: present, 1-4096 bytes, no NUL (a decoded %00). */
int api_file_query_path(struct http_request *req, const char *key, const char **ret,
			struct station_error *e);
/* "1" true, "0" or absent false, anything else 400. */
int api_file_query_flag(struct http_request *req, const char *key, bool *ret,
			struct station_error *e);
