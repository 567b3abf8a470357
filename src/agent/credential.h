/* SPDX-License-Identifier: MIT */
#pragma once

/* The credential socket (docs/agent-protocol.md, "Credentials"): a unix socket the sandbox's
 * user may connect to, speaking git's credential protocol. `get` becomes a CRED_REQUEST to the
 * controller; its CRED_REPLY becomes `username=` and `password=` lines, or nothing at all when
 * refused (also when no controller is connected). `store` and `erase` are read and ignored.
 *
 * Everything a client sends is hostile: the peer must be the sandbox's user (SO_PEERCRED), a
 * request is a few short lines of known keys, at most CRED_MAX_CONNS clients are served at
 * once and each one gets CRED_TIMEOUT_USEC from accept to its answer. The loop never waits
 * for the controller. The password is wiped from the agent's memory once written. */

#include <stdbool.h>
#include <sys/types.h>

#include "agent/channel.h"
#include "event/event.h"
#include "proto/frame.h"

#define CRED_MAX_CONNS 4
#define CRED_TIMEOUT_USEC (10 * 1000000ull)
#define CRED_MAX_LINE 2048  /* bytes of one line, newline included */
#define CRED_MAX_LINES 16   /* the action and the key=value lines */
#define CRED_MAX_HOST 262   /* a DNS name (253) and ":port" */
#define CRED_MAX_VALUE 1024 /* path, username */

/* Where the helper connects when $STATION_CREDENTIAL_SOCKET is unset (the container's). */
#define CRED_DEFAULT_SOCKET "/run/station-credential/socket"
#define CRED_ENV "STATION_CREDENTIAL_SOCKET"

struct cred_server;

/* Makes the socket at path (a stale entry replaced), owned by uid:gid, mode 0600; only peers
 * of that uid are served. */
int cred_server_new(struct event_loop *loop, struct channel *channel, const char *path, uid_t uid,
		    gid_t gid, struct cred_server **ret);
void cred_server_free(struct cred_server *s);

/* A CRED_REPLY from the controller. < 0 only for a malformed frame. */
int cred_server_message(struct cred_server *s, const struct frame *f);
/* The controller went away: every waiting client is refused. */
void cred_server_disconnected(struct cred_server *s);

/* The helper: `git-credential-station ACTION` or `station-agent credential ACTION`. Returns the
 * process's exit code. */
int cred_helper_main(int argc, char **argv);
