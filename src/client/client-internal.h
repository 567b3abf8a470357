/* SPDX-License-Identifier: MIT */
#pragma once

/* What client.c (handle, transport, worker and workspace calls) shares with exec.c (runs).
 * Not installed. */

#include <curl/curl.h>

#include "basic/cleanup.h"
#include "basic/json-util.h"
#include "station/client.h"

struct station_client {
	CURL *curl;
	char *endpoint;	   /* for people: "unix:/path" or "http://host:port" */
	char *base_url;	   /* "http://localhost" on a unix socket */
	char *socket_path; /* NULL over TCP */
	char *auth_header; /* "Authorization: Bearer …" or NULL */
	int (*interrupt)(void *userdata);
	void *interrupt_userdata;
	long last_status;
	char error_code[64];
	char error[1024];
	char curl_error[CURL_ERROR_SIZE];
};

/* Records a failure that is not an API error and returns err, so callers can
 * `return client_error(…)`. */
int client_error(struct station_client *c, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Builds "/v1/workspaces/{ws}", then "/commands/{run}" when run is non-NULL, then suffix
 * (NULL, or starting with '/' or '?'). Ids go into the URL as they are, so anything but
 * [A-Za-z0-9_-] is refused with -EINVAL. */
int client_path(struct station_client *c, const char *ws, const char *run, const char *suffix,
		char **ret);

/* Sets o["env"] to an object made of the NULL-terminated "KEY=VALUE" strings of env; nothing
 * when env is NULL. -EINVAL for an entry without '=' or with an empty key. */
int client_put_env(struct station_client *c, json_t *o, char *const *env);

/* Follows the server-sent output events at path (output, gap, end) the way station_run_follow()
 * does; what names the stream in errors. With any_end, any JSON object ends the stream (not
 * only a terminal run). */
int client_follow(struct station_client *c, const char *path, const char *what, bool any_end,
		  const struct station_follow_callbacks *cb, void *userdata, json_t **ret);

/* Sets o[key] to value unless value is NULL. A value that cannot be sent (not UTF-8) is -EINVAL
 * rather than a field silently left out. */
int client_put_string(struct station_client *c, json_t *o, const char *key, const char *value);
