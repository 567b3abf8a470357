/* SPDX-License-Identifier: MIT */
#pragma once

/* Strict parsing of API requests (docs/api.md) and the mapping of errors to HTTP.
 *
 * Bodies are parsed with jansson, refusing duplicate keys and trailing garbage; the body must
 * be an object and every field must be known. A field given as JSON null is refused like any
 * other wrong type: an optional field is either absent or of its type. Strings may carry
 * \u0000 through the parser so that the field at fault can be named; every field that reaches
 * a path, an argv or an environment then refuses NUL. Query parameters are decimal digits
 * only: no sign, no spaces, no empty value.
 *
 * Every function fills a struct station_error on failure (errno-style code, message, field)
 * and returns its code. Nothing here logs. */

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "basic/error.h"
#include "daemon/manager.h"

/* Limits from docs/api.md. */
#define API_MAX_COMMAND_BYTES (256u * 1024)
#define API_MAX_CWD_BYTES 4096u
#define API_MAX_STDIN_BYTES (1024u * 1024)
#define API_MAX_ENV_ENTRIES 256u
#define API_MAX_ENV_ENTRY_BYTES (32u * 1024) /* "KEY=VALUE", what the agent accepts */
#define API_MAX_TIMEOUT_MS 86400000u
#define API_MIN_OUTPUT_BYTES 2u
#define API_MAX_OUTPUT_BYTES (8u * 1024 * 1024)
/* cpus, memoryMb, pidsLimit: WORKSPACE_MAX_* in manager.h */
#define API_MAX_LIST_LIMIT 1000u
#define API_DEFAULT_LIST_LIMIT 100u
#define API_MAX_IMAGE_REF_BYTES 512u
#define API_MAX_PATH_BYTES 4096u
#define API_MAX_IMAGE_NAME_BYTES 255u
#define API_MAX_REGISTRY_BYTES 255u

/* Services (docs/api.md, "Services"). */
#define API_MAX_SERVICE_NAME_BYTES 63u
#define API_MAX_SERVICE_RESTARTS 1000000u
#define API_MAX_SERVICE_DELAY_MS 3600000u
#define API_MAX_SERVICE_STOP_TIMEOUT_MS 3600000u
#define API_DEFAULT_SERVICE_MAX_RESTARTS 5u
#define API_DEFAULT_SERVICE_DELAY_MS 1000u
#define API_DEFAULT_SERVICE_MAX_DELAY_MS 300000u
#define API_DEFAULT_SERVICE_STOP_TIMEOUT_MS 10000u
/* An attempt that ran this long resets the restart budget; 0: never. */
#define API_DEFAULT_SERVICE_RESET_AFTER_MS 60000u
#define API_MAX_SERVICE_RESET_AFTER_MS 86400000u

/* Parses a request body. An empty body is {} when allow_empty, else an error. *ret is a new
 * reference to an object. */
int validate_body(const void *data, size_t n, bool allow_empty, json_t **ret,
		  struct station_error *e);

/* Fills *ret from a POST /v1/workspaces body; strings stay owned by body. adapter "host" and
 * "container" are accepted (absent: the manager's default); image, seccompProfile, network and
 * egress are refused only next to an explicit "host". network is "none", "bridge" or
 * "restricted" (whether this worker can provide it is the manager's answer, 503 when not).
 * egress is an object, accepted only with network "restricted" (absent there: deny all); its
 * rules are the manager's to check (net/policy.h). */
int validate_workspace_spec(json_t *body, struct workspace_spec *ret, struct station_error *e);

/* Names and labels (validate-labels.c, domain/labels.h). "name" and "labels" of a create:
 * *ret_name a name or NULL (absent or null), *ret_labels an object of string values or NULL;
 * both borrowed from body. -EINVAL naming the bad name or key. */
int validate_workspace_labels(json_t *body, const char **ret_name, json_t **ret_labels,
			      struct station_error *e);
/* A PATCH /v1/workspaces/{id} body, {"name": string|null, "labels": {KEY: string|null}|null},
 * both optional: a JSON merge patch (RFC 7396). Strings and objects borrowed from body. */
struct workspace_update {
	bool name_set;
	const char *name; /* NULL with name_set: remove the name */
	bool labels_clear;
	json_t *labels; /* NULL: unchanged; values strings (set) or null (remove) */
};
int validate_workspace_update(json_t *body, struct workspace_update *ret, struct station_error *e);
/* A ?label= selector of GET /v1/workspaces: "KEY" (present) or "KEY=VALUE". */
int validate_label_selector(const char *s, struct station_error *e);

/* A PUT /v1/workspaces/{id}/network body, {"egress": {...}}: *ret borrows the egress object
 * (its rules are the manager's to check). */
int validate_network_update(json_t *body, json_t **ret, struct station_error *e);
/* POST /v1/workspaces/{id}/snapshots: {"name": 1 … SNAPSHOT_NAME_MAX bytes, "memory": bool},
 * both optional. */
int validate_snapshot_spec(json_t *body, struct snapshot_spec *ret, struct station_error *e);
/* POST /v1/workspaces/{id}/fork: {"count": 1 … FORK_MAX}, 1 when absent. */
int validate_fork(json_t *body, unsigned *ret, struct station_error *e);

/* A POST /v1/images body: an import (path, name) or a pull (reference, registry, plainHttp),
 * exactly one of path and reference. Strings stay owned by the body. */
struct image_request {
	const char *path;      /* import: absolute path of an OCI layout directory or tar */
	const char *name;      /* import: recorded for listings, NULL when not given */
	const char *reference; /* pull: "name@sha256:<64 hex>" */
	const char *registry;  /* pull: "host[:port]", NULL: the reference's host part */
	bool plain_http;
};

int validate_image_request(json_t *body, struct image_request *ret, struct station_error *e);

/* Fills *ret from a POST …/commands body; strings stay owned by body. stdin given as base64 is
 * decoded into *ret_stdin (malloc'd, the caller frees it; NULL when stdin points into body). */
int validate_run_spec(json_t *body, struct run_spec *ret, uint8_t **ret_stdin,
		      struct station_error *e);

/* Fills *ret from a POST …/services body, defaults applied; strings stay owned by body.
 * Errors name the field, nested ones with a dot ("restart.policy"). */
int validate_service_spec(json_t *body, struct service_spec *ret, struct station_error *e);

/* Fills *ret from a POST …/ports body (docs/api.md, "Previews"): port 1-65535 (required),
 * access "token" (the default) or "public", expiresInMs 1 to PREVIEW_MAX_EXPIRES_MS (absent:
 * 0, the default); unknown fields refused. */
int validate_port_spec(json_t *body, struct port_spec *ret, struct station_error *e);

/* Terminals (docs/api.md, "Terminals"): cols and rows 1-10000. */
#define API_MAX_TERMINAL_SIZE 10000u

/* Fills *ret from a POST …/terminals body (command?, cols, rows, cwd?, env?); strings stay
 * owned by body. */
int validate_terminal_spec(json_t *body, struct terminal_spec *ret, struct station_error *e);
/* cols and rows, both required (POST …/resize, and the attach's resize message where
 * known_extra is "type"). */
int validate_terminal_size(json_t *body, const char *known_extra, unsigned *ret_cols,
			   unsigned *ret_rows, struct station_error *e);

/* An env object: at most 256 entries, keys [A-Za-z_][A-Za-z0-9_]*, string values without NUL.
 * field names the request field in errors. */
int validate_env(json_t *env, const char *field, struct station_error *e);
bool validate_env_key(const char *key);

/* A query parameter: digits only, value in [min, max]. value NULL means "name" was given
 * without "=" and is refused. */
int validate_query_u64(const char *name, const char *value, uint64_t min, uint64_t max,
		       uint64_t *ret, struct station_error *e);

/* True for "application/json", any case, optionally followed by parameters. */
bool validate_content_type(const char *value);

/* The API's view of an error: -EINVAL 400, -EACCES 401, STATION_EFORBIDDEN 403, -ENOENT 404,
 * -EBUSY and -EINPROGRESS 409, -ESTALE 412, -E2BIG 413, -EMEDIUMTYPE 415, -EAGAIN 429, -EPROTO 502 (the agent
 * broke its protocol), -ENOTSUP 501, -ENOTCONN / -EHOSTDOWN 503, -ENOSPC / -EDQUOT
 * 507, anything else 500. */
unsigned error_http_status(int err);
/* "invalid_argument", …; "internal" for a status without a code of its own. */
const char *error_http_code(unsigned status);
/* The code of an error: its status's, but "paused" for STATION_EPAUSED (a 409 a client acts
 * on differently: resume, or create with autoResume) and "fleet_unavailable" for
 * STATION_EFLEET (a 503: the fleet's etcd does not answer). */
const char *error_code_of(int err);
/* error_json() of e, with error_code_of()'s code. */
json_t *error_json_of(const struct station_error *e);
/* {"error":{"code","message","field"?}}; field NULL or "" leaves it out. Never NULL unless out
 * of memory. */
json_t *error_json(unsigned status, const char *message, const char *field);

/* Files (docs/api.md, "Files"). A path is 1 to 4096 bytes without NUL. */
#define API_MAX_FILE_PATH_BYTES 4096u

/* "0644": 1 to 5 octal digits, at most 07777. */
int validate_file_mode(const char *field, const char *s, uint64_t *ret, struct station_error *e);

struct file_mkdir_request {
	const char *path;
	bool parents;
	bool has_mode;
	uint64_t mode;
};
/* POST …/files/mkdir {"path", "parents"?, "mode"?}; strings stay owned by body. */
int validate_file_mkdir(json_t *body, struct file_mkdir_request *ret, struct station_error *e);

struct file_rename_request {
	const char *from, *to;
	bool overwrite; /* default true */
};
/* POST …/files/rename {"from", "to", "overwrite"?}. */
int validate_file_rename(json_t *body, struct file_rename_request *ret, struct station_error *e);
