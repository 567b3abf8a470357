/* SPDX-License-Identifier: MIT */
#pragma once

/* The start block: what the controller hands station-agent at start through the fd named by
 * --secret-fd, never on a command line (docs/agent-protocol.md, "Start"): the secret, the
 * workspace environment and, for a container, the working directory (the spec's or the
 * image's). Every host user can read a process's command line in /proc; nobody but root and
 * the agent itself can read this fd.
 *
 * It is one frame (frame.h) of type MSG_AGENT_START, sequence 0, with the fields:
 *   SECRET  once, PROTO_MIN_SECRET..PROTO_MAX_SECRET bytes
 *   CWD     at most once, an absolute path of at most PROTO_MAX_PATH bytes (the workdir)
 *   ENV     up to PROTO_MAX_START_ENV times, "KEY=VALUE", each at most PROTO_MAX_ENV_ENTRY
 * followed by end of file. Unknown tags are refused: both sides come from one build. The
 * block can exceed a pipe's buffer, so the controller hands it over in a sealed memfd. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agent-proto.h"
#include "frame.h"

#define PROTO_MIN_SECRET 16
/* The image's environment and the workspace's, each up to PROTO_MAX_ENV entries. */
#define PROTO_MAX_START_ENV (2 * PROTO_MAX_ENV)
#define PROTO_MAX_START_PAYLOAD                                                                    \
	(PROTO_MAX_START_ENV * (6 + PROTO_MAX_ENV_ENTRY) + 6 + PROTO_MAX_PATH + 6 +                \
	 PROTO_MAX_SECRET)
#define PROTO_MAX_START_BYTES (FRAME_HEADER_SIZE + PROTO_MAX_START_PAYLOAD)

struct agent_start {
	uint8_t secret[PROTO_MAX_SECRET];
	size_t secret_len;
	char *workdir; /* NULL: the block names none */
	char **env;    /* "KEY=VALUE", NULL-terminated (never NULL after a successful decode) */
	size_t n_env;
};

/* Appends the block to b. env is NULL-terminated and may be NULL; workdir may be NULL.
 * -EINVAL when a piece is out of the limits above (the block would be refused), -ENOMEM. */
int agent_start_encode(struct buf *b, const uint8_t *secret, size_t secret_len, const char *workdir,
		       char *const *env);

/* Parses and checks a whole block. -EBADMSG (malformed, a field missing, repeated or out of
 * limits), -E2BIG (too many entries or bytes), -ENOMEM; *ret is filled only on success. */
int agent_start_decode(const uint8_t *data, size_t len, struct agent_start *ret);

/* Wipes the secret and frees the strings. */
void agent_start_free(struct agent_start *s);
