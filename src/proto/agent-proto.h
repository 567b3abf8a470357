/* SPDX-License-Identifier: MIT */
#pragma once

/* The versioned message set between station-sandboxd and station-agent. Semantics are in
 * docs/agent-protocol.md; the wire format is in frame.h. */

#include <stdint.h>

#define PROTO_VERSION 1

/* Largest payload either side accepts. Sized for a RUN_DONE carrying head and tail of two
 * streams at the largest per-run output limit (AGENT_MAX_OUTPUT_BYTES each). */
#define AGENT_MAX_OUTPUT_BYTES (8u * 1024 * 1024)
#define PROTO_MAX_PAYLOAD (2u * AGENT_MAX_OUTPUT_BYTES + 1024u * 1024)

/* Limits the agent enforces on what the controller asks for. */
#define PROTO_MAX_ID 64
#define PROTO_MAX_COMMAND (256u * 1024)
#define PROTO_MAX_PATH 4096
#define PROTO_MAX_ENV_ENTRY (32u * 1024)
#define PROTO_MAX_ENV 256
#define PROTO_MAX_STDIN (1024u * 1024)
#define PROTO_MAX_SECRET 64

enum msg_type {
	MSG_HELLO = 1,       /* C->A: SECRET, VERSION */
	MSG_HELLO_OK = 2,    /* A->C: VERSION, PID, RUN_ID* (runs still running) */
	MSG_RUN_START = 10,  /* C->A: RUN_ID, COMMAND, CWD, ENV*, STDIN?, TIMEOUT_MS, HEAD_BYTES,
				TAIL_BYTES, WATCH? */
	MSG_RUN_STARTED = 11, /* A->C: RUN_ID, PID, STARTED_AT */
	MSG_RUN_OUTPUT = 12,  /* A->C: RUN_ID, STREAM, OFFSET, DATA */
	MSG_RUN_DONE = 13,    /* A->C, header seq = completion sequence: RUN_ID, STATUS, ... */
	MSG_ACK = 14,         /* C->A, header seq = the completion sequence being acknowledged */
	MSG_RUN_CANCEL = 15,  /* C->A: RUN_ID */
	MSG_RUN_WATCH = 16,   /* C->A: RUN_ID, WATCH (1 start, 0 stop) */
	MSG_SHUTDOWN = 20,    /* C->A: kill every run, remove run cgroups, exit 0 */
	MSG_ERROR = 30,       /* A->C: RUN_ID?, REASON */
	/* 40-49: terminals (docs/agent-protocol.md, "Terminals") */
	/* 50-59: services (docs/agent-protocol.md, "Services") */
};

/* Tags 100-149 are for terminals, 150-199 for services. */

enum msg_tag {
	TAG_SECRET = 1,
	TAG_VERSION = 2,
	TAG_PID = 3,
	TAG_RUN_ID = 4,
	TAG_COMMAND = 5,
	TAG_CWD = 6,
	TAG_ENV = 7,          /* "KEY=VALUE", repeated */
	TAG_STDIN = 8,
	TAG_TIMEOUT_MS = 9,
	TAG_HEAD_BYTES = 10,  /* per stream */
	TAG_TAIL_BYTES = 11,  /* per stream */
	TAG_WATCH = 12,
	TAG_STARTED_AT = 13,  /* CLOCK_REALTIME, microseconds */
	TAG_ENDED_AT = 14,
	TAG_STREAM = 15,      /* enum run_stream */
	TAG_OFFSET = 16,      /* byte offset of DATA within the stream */
	TAG_DATA = 17,
	TAG_STATUS = 18,      /* enum run_status */
	TAG_EXIT_CODE = 19,
	TAG_SIGNAL = 20,
	TAG_OOM_KILLED = 21,
	TAG_REASON = 22,
	TAG_STDOUT_HEAD = 23,
	TAG_STDOUT_TAIL = 24, /* only bytes not already in the head */
	TAG_STDOUT_BYTES = 25,
	TAG_STDERR_HEAD = 26,
	TAG_STDERR_TAIL = 27,
	TAG_STDERR_BYTES = 28,
	TAG_CPU_USEC = 29,
	TAG_PEAK_MEMORY = 30,
};

enum run_stream {
	RUN_STREAM_STDOUT = 1,
	RUN_STREAM_STDERR = 2,
};

/* Terminal statuses. RUN_LOST is decided by the controller, never sent by the agent. */
enum run_status {
	RUN_RUNNING = 0,
	RUN_EXITED = 1,
	RUN_KILLED = 2,
	RUN_TIMED_OUT = 3,
	RUN_CANCELLED = 4,
	RUN_FAILED_TO_START = 5,
	RUN_LOST = 6,
	_RUN_STATUS_MAX,
};

const char *run_status_to_string(enum run_status s);
int run_status_from_string(const char *s);
