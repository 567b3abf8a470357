/* SPDX-License-Identifier: MIT */
#pragma once

/* What the files of the agent link (agentlink.c: runs, agentlink-service.c, agentlink-terminal.c)
 * share: sending a frame, and parsing the fields that runs and services both carry. Every parser
 * here checks each field as hostile input, exactly as docs/agent-protocol.md allows it. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agentlink.h"

struct buf;
struct frame;
struct run_output;

/* Finishes the frame begun at start in b and queues it; r is the result of building it (< 0:
 * nothing is sent and r is returned). b is emptied either way. */
int agentlink_send_frame_end(struct agentlink *l, struct buf *b, size_t start, int r);

/* Queues the finished frame data[0..n) like agentlink_send_frame_end(), and wipes the link's
 * output buffer beyond what is still unsent until all of it is gone: for a frame that carries
 * a secret. The caller wipes its own copy. */
int agentlink_send_secret(struct agentlink *l, const uint8_t *data, size_t n);

/* Bounds of CRED_REQUEST's fields (the agent's own bounds are tighter). */
#define AGENTLINK_CRED_MAX_PROTOCOL 16
#define AGENTLINK_CRED_MAX_HOST 262
#define AGENTLINK_CRED_MAX_VALUE 1024

/* CRED_REQUEST. */
int agentlink_cred_dispatch(const struct agentlink_ops *ops, void *userdata, const struct frame *f);

/* SERVICE_STATE, SERVICE_ATTEMPT_DONE, SERVICE_OUTPUT. */
int agentlink_service_dispatch(const struct agentlink_ops *ops, void *userdata,
			       const struct frame *f);
/* HELLO_OK (its TERM_IDs), TERM_OPENED, TERM_OUTPUT, TERM_REPLAY, TERM_EXIT. */
int agentlink_terminal_dispatch(const struct agentlink_ops *ops, void *userdata,
				const struct frame *f);

/* USAGE_REPLY. */
int agentlink_usage_dispatch(const struct agentlink_ops *ops, void *userdata,
			     const struct frame *f);
int agentlink_checkpoint_ready_dispatch(const struct agentlink_ops *ops, void *userdata,
					const struct frame *f);
int agentlink_paused_dispatch(const struct agentlink_ops *ops, void *userdata,
			      const struct frame *f);

/* Copies the string in val to *dst; -EBADMSG when *dst is set already (a repeated field). */
int agentlink_str_once(char **dst, const uint8_t *val, size_t len, size_t max_len);

/* A list of ids from HELLO_OK. */
struct agentlink_ids {
	char **v;
	size_t n;
};

/* Appends a copy of the id in val; -E2BIG once the list holds max ids. */
int agentlink_ids_push(struct agentlink_ids *ids, size_t max, const uint8_t *val, size_t len);
void agentlink_ids_free(struct agentlink_ids *ids);

/* The end of a process as RUN_DONE and SERVICE_ATTEMPT_DONE both report it: where a row keeps
 * its exit code, signal, times and output. */
struct agentlink_end {
	int64_t *exit_code;
	int64_t *signal;
	uint64_t *started_at;
	uint64_t *ended_at;
	struct run_output *out; /* [0] stdout, [1] stderr */
};

#define AGENTLINK_END(row)                                                                         \
	((struct agentlink_end){ .exit_code = &(row)->exit_code,                                   \
				 .signal = &(row)->signal,                                         \
				 .started_at = &(row)->started_at,                                 \
				 .ended_at = &(row)->ended_at,                                     \
				 .out = (row)->out })

/* Stores one of the shared fields: EXIT_CODE (over 255: -1), SIGNAL (128 or over: 0),
 * STDOUT/STDERR_BYTES, STARTED_AT, ENDED_AT, and the head and tail bytes (each at most
 * AGENT_MAX_OUTPUT_BYTES, each once). Returns 1 when stored, 0 when tag is none of them,
 * -EBADMSG when refused. */
int agentlink_end_field(const struct agentlink_end *e, uint16_t tag, const uint8_t *val,
			size_t len);
/* Each stream kept no more bytes (head + tail) than it produced. */
bool agentlink_end_consistent(const struct run_output *out);

/* RUN_OUTPUT or SERVICE_OUTPUT. */
struct agentlink_output {
	uint16_t id_tag;   /* TAG_RUN_ID or TAG_SERVICE_NAME: the first one names the stream */
	bool with_attempt; /* TAG_ATTEMPT is a field (a service's), else skipped */
	char *id;
	uint64_t attempt;
	uint64_t stream;
	uint64_t offset;
	const uint8_t *data; /* borrowed from the frame */
	size_t data_len;
};

/* Fills o (id_tag and with_attempt set by the caller); -EBADMSG without an id, with a stream
 * other than stdout or stderr, or with an offset past the end of the stream's numbers. The
 * caller frees o->id either way. */
int agentlink_output_parse(const struct frame *f, struct agentlink_output *o);
