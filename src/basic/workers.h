/* SPDX-License-Identifier: MIT */
#pragma once

/* The list of workers a client routes to (docs/operations.md, "Many workers"): the
 * STATION_WORKERS string "w1=http://host1:8080,w2=http://host2:8080", or a workers file of
 * "NAME URL [TOKEN-FILE]" lines (# comments). Parsing only: no connection is made here, so the
 * client library, the CLI and the controller share it. A worker's name is the prefix of its
 * workspace ids ("w2-3vqk…" is on w2). */

#include <stdbool.h>
#include <stddef.h>

#include "error.h"

#define WORKER_NAME_MAX 32
#define WORKER_URL_MAX 2048
#define WORKERS_MAX 256
#define WORKERS_FILE_MAX (256u * 1024)
#define WORKER_TOKEN_MAX 4096

/* The file read when neither STATION_WORKERS nor STATION_WORKERS_FILE is set, under $HOME. */
#define WORKERS_DEFAULT_FILE ".config/station-sandbox/workers"

struct worker_ref {
	char *name;	  /* [a-z0-9-]{1,32} */
	char *url;	  /* http://…, https://… or unix:/path */
	char *token_file; /* absolute; NULL: the client's default token (STATION_TOKEN) */
};

struct worker_refs {
	struct worker_ref *v;
	size_t n;
};

/* [a-z0-9-]{1,32}, as the controller's --worker takes it. */
bool worker_name_valid(const char *s);

/* http://HOST[:PORT][/PATH] or https://…, or unix:/ABSOLUTE/PATH; no whitespace, control
 * characters, '?' or '#'; at most WORKER_URL_MAX bytes. */
bool worker_url_valid(const char *s);

/* Parses STATION_WORKERS: "NAME=URL" entries separated by ',' (spaces around them ignored,
 * empty entries skipped). On failure *e names the entry and what is wrong with it (a bad name,
 * a bad URL, a name given twice, more than WORKERS_MAX) and -EINVAL is returned; *ret is set
 * only on success (possibly empty). */
int workers_parse_env(const char *s, struct worker_refs *ret, struct station_error *e);

/* Parses a workers file's text: one "NAME URL [TOKEN-FILE]" per line, fields separated by
 * spaces or tabs, '#' starting a comment. A relative TOKEN-FILE is taken from the directory of
 * origin (the file's path, also used in messages: "FILE line N: …"); "~/" is $HOME. */
int workers_parse_file_text(const char *text, const char *origin, struct worker_refs *ret,
			    struct station_error *e);

/* Reads and parses the workers file at path (at most WORKERS_FILE_MAX bytes). -ENOENT when it
 * does not exist (e says so). */
int workers_read_file(const char *path, struct worker_refs *ret, struct station_error *e);

/* The worker list the environment configures: STATION_WORKERS when set and not empty, else the
 * file STATION_WORKERS_FILE names (which must exist), else ~/WORKERS_DEFAULT_FILE when it
 * exists. Returns 1 with *ret set when a list is configured, 0 when none is (*ret untouched),
 * or -errno with e set. */
int workers_from_env(struct worker_refs *ret, struct station_error *e);

/* Frees the entries and empties l. */
void worker_refs_done(struct worker_refs *l);

/* The entry named name, or NULL. */
const struct worker_ref *worker_refs_find(const struct worker_refs *l, const char *name);

/* The worker a workspace id names: everything before its last '-' ("w2-3vqk…" → "w2",
 * "eu-1-3vqk…" → "eu-1"). -EINVAL when that is not a worker name. */
int worker_of_id(const char *id, char ret[WORKER_NAME_MAX + 1]);

/* The length of the random part of a workspace id: WORKER-<26 of [a-z2-7]>. */
#define WORKSPACE_ID_RANDOM 26
/* Whether s has the shape of a workspace id: a worker name, '-', then WORKSPACE_ID_RANDOM
 * characters of [a-z2-7]. A workspace name never has it (domain/labels.h), so a client tells
 * an id from a name by its shape alone. */
bool workspace_id_shaped(const char *s);

/* The worker a snapshot id names. A snapshot id is "s-" and a workspace id's shape
 * ("s-w2-3vqk…" is on w2), or "s-" and WORKSPACE_ID_RANDOM characters of [a-z2-7] alone, as
 * snapshots were named before their ids carried a worker. Returns 1 with the worker in ret for
 * the first, 0 (ret "") for the second, -EINVAL for anything else. */
int snapshot_id_worker(const char *id, char ret[WORKER_NAME_MAX + 1]);

/* Reads a token file: a regular file (symlinks followed) owned by the caller or root that
 * neither group nor others may read or write (else -EPERM naming its mode), holding one token
 * of printable ASCII without spaces (a final newline is dropped). *ret is freshly allocated;
 * wipe it with erase_and_free(). */
int worker_token_read(const char *path, char **ret, struct station_error *e);
