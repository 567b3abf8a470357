/* SPDX-License-Identifier: MIT */
#pragma once

/* The versioned message set between station-sandboxd and station-agent. Semantics are in
 * docs/agent-protocol.md; the wire format is in frame.h. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "domain/state.h"

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
#define PROTO_MAX_TERMINALS 16			/* live terminals per agent */
#define PROTO_MAX_SCROLLBACK (4u * 1024 * 1024) /* a terminal's ring */
#define PROTO_MAX_TERM_INPUT (64u * 1024)	/* one TERM_INPUT */
#define PROTO_MAX_TERM_SIZE 10000		/* cols and rows */

/* An id the controller names a run, service or terminal with: 1 to PROTO_MAX_ID characters of
 * [A-Za-z0-9._:-]. */
bool proto_id_valid(const char *s);
/* A frame value that is such an id, malloc'd: -EBADMSG when not one, -ENOMEM. */
int proto_id_read(const uint8_t *val, size_t len, char **ret);

struct frame;
/* A message of one key (the field tag, read by read_key) and, with want_flag, one WATCH of 0 or
 * 1 (RUN_CANCEL, RUN_WATCH, SERVICE_STOP, SERVICE_WATCH…). -EBADMSG for a missing, repeated or
 * other field. */
int proto_parse_key_flag(const struct frame *f, uint16_t tag,
			 int (*read_key)(const uint8_t *val, size_t len, char **ret),
			 bool want_flag, char **ret_key, bool *ret_flag);

/* What an agent speaks beyond version 1's runs, services and terminals. An agent keeps running
 * across a controller upgrade, so the controller sends a newer message only to an agent that
 * said it knows it (an older one would close the connection on an unknown type). */
enum agent_feature {
	AGENT_FEATURE_FILES = 1u << 0,		  /* FILE_OPEN sessions */
	AGENT_FEATURE_USAGE = 1u << 1,		  /* USAGE_REQUEST */
	AGENT_FEATURE_CREDENTIALS = 1u << 2,	  /* CRED_REQUEST / CRED_REPLY */
	AGENT_FEATURE_SERVICE_RESET = 1u << 3,	  /* SERVICE_START's RESET_AFTER_MS */
	AGENT_FEATURE_SERVICE_PROGRESS = 1u << 4, /* SERVICE_PROGRESS_WATCH / SERVICE_PROGRESS */
	AGENT_FEATURE_PAUSE = 1u << 5,		  /* PAUSE / PAUSED / RESUME */
	AGENT_FEATURE_CHECKPOINT = 1u << 6,	  /* CHECKPOINT / CHECKPOINT_READY */
};
#define AGENT_FEATURES_ALL                                                                         \
	(AGENT_FEATURE_FILES | AGENT_FEATURE_USAGE | AGENT_FEATURE_CREDENTIALS |                   \
	 AGENT_FEATURE_SERVICE_RESET | AGENT_FEATURE_SERVICE_PROGRESS | AGENT_FEATURE_PAUSE |      \
	 AGENT_FEATURE_CHECKPOINT)

enum msg_type {
	MSG_HELLO = 1,	      /* C->A: SECRET, VERSION */
	MSG_HELLO_OK = 2,     /* A->C: VERSION, PID, RUN_ID* (runs still running), TERM_ID* */
	MSG_AGENT_START = 3,  /* C->A on the start fd, not the socket: SECRET, CWD?, ENV*
				 (agent-start.h) */
	MSG_RUN_START = 10,   /* C->A: RUN_ID, COMMAND, CWD, ENV*, STDIN?, TIMEOUT_MS, HEAD_BYTES,
				TAIL_BYTES, WATCH? */
	MSG_RUN_STARTED = 11, /* A->C: RUN_ID, PID, STARTED_AT */
	MSG_RUN_OUTPUT = 12,  /* A->C: RUN_ID, STREAM, OFFSET, DATA */
	MSG_RUN_DONE = 13,    /* A->C, header seq = completion sequence: RUN_ID, STATUS, ... */
	MSG_ACK = 14,	      /* C->A, header seq = the completion sequence being acknowledged */
	MSG_RUN_CANCEL = 15,  /* C->A: RUN_ID */
	MSG_RUN_WATCH = 16,   /* C->A: RUN_ID, WATCH (1 start, 0 stop) */
	MSG_SHUTDOWN = 20,    /* C->A: kill every run, remove run cgroups, exit 0 */
	MSG_ERROR = 30,	      /* A->C: RUN_ID?, REASON */
	/* 40-49: terminals (docs/agent-protocol.md, "Terminals") */
	MSG_TERM_OPEN = 40, /* C->A: TERM_ID, COMMAND?, CWD?, ENV*, COLS, ROWS, SCROLLBACK_BYTES? */
	MSG_TERM_OPENED = 41, /* A->C: TERM_ID, PID, STARTED_AT, COMMAND (what runs) */
	MSG_TERM_OUTPUT = 42, /* A->C: TERM_ID, OFFSET, DATA (dropped over the unsent cap: a gap) */
	MSG_TERM_INPUT = 43,  /* C->A: TERM_ID, DATA */
	MSG_TERM_RESIZE = 44, /* C->A: TERM_ID, COLS, ROWS */
	MSG_TERM_ATTACH = 45, /* C->A: TERM_ID, WATCH (1: REQUEST, replay then live; 0: stop) */
	MSG_TERM_REPLAY = 46, /* A->C: TERM_ID, REQUEST, OFFSET, DATA (the scrollback ring) */
	MSG_TERM_CLOSE = 47,  /* C->A: TERM_ID: kill the terminal's cgroup */
	MSG_TERM_EXIT = 48,   /* A->C, sequenced, acked: TERM_ID, STATUS, EXIT_CODE | SIGNAL,
				 FORCED?, REASON?, STARTED_AT, ENDED_AT, OFFSET (bytes written) */
	/* 50-59: services (docs/agent-protocol.md, "Services") */
	MSG_SERVICE_START =
		50, /* C->A: SERVICE_NAME, SERVICE_ID, COMMAND, CWD, ENV*, RESTART_POLICY,
				     MAX_RESTARTS, DELAY_MS, BACKOFF_PERMILLE?, MAX_DELAY_MS?,
				     STOP_SIGNAL, STOP_TIMEOUT_MS, HEAD_BYTES, TAIL_BYTES, ATTEMPT */
	MSG_SERVICE_STOP = 51,	  /* C->A: SERVICE_NAME */
	MSG_SERVICE_RESTART = 52, /* C->A: SERVICE_NAME */
	MSG_SERVICE_STATE =
		53, /* A->C, sequenced, acked: SERVICE_NAME, SERVICE_ID, SERVICE_STATE, ... */
	MSG_SERVICE_ATTEMPT_DONE = 54,	 /* A->C, sequenced, acked: SERVICE_NAME, ATTEMPT, ... */
	MSG_SERVICE_OUTPUT = 55,	 /* A->C: SERVICE_NAME, ATTEMPT, STREAM, OFFSET, DATA */
	MSG_SERVICE_WATCH = 56,		 /* C->A: SERVICE_NAME, WATCH (1 start, 0 stop) */
	MSG_SERVICE_REMOVE = 57,	 /* C->A: SERVICE_NAME: stop it and forget it */
	MSG_SERVICE_PROGRESS_WATCH = 58, /* C->A: WATCH (1: send SERVICE_PROGRESS, 0: stop) */
	MSG_SERVICE_PROGRESS = 59, /* A->C: SERVICE_NAME, ATTEMPT, STDOUT_BYTES, STDERR_BYTES (the
				      running attempt's totals so far) */
	/* 60-69: file sessions, on a connection of their own (file-proto.h) */
	MSG_FILE_OPEN = 60,  /* C->A, instead of HELLO: SECRET, VERSION, FILE_OP, PATH, ... */
	MSG_FILE_INFO = 61,  /* A->C: one entry (stat, a list's entries, what read/write did) */
	MSG_FILE_DATA = 62,  /* both ways: DATA (at most FILE_MAX_CHUNK bytes) */
	MSG_FILE_END = 63,   /* both ways: the data is complete / the operation succeeded */
	MSG_FILE_ERROR = 64, /* A->C, last frame: ERRNO, PATH?, REASON? */
	MSG_FILE_EVENT = 65, /* A->C, watch: FILE_EVENT, PATH, PATH2?, FILE_TYPE? */
	/* 70-79: credentials (docs/agent-protocol.md, "Credentials"), main connection */
	MSG_CRED_REQUEST = 70, /* A->C: REQUEST, CRED_PROTOCOL, CRED_HOST, CRED_PATH?,
				  CRED_USERNAME? (what git asked with) */
	MSG_CRED_REPLY = 71,   /* C->A: REQUEST, CRED_USERNAME + CRED_PASSWORD, or REASON (refused)
				*/
	/* 80-89: resource use, main connection */
	MSG_USAGE_REQUEST = 80, /* C->A: REQUEST */
	MSG_USAGE_REPLY = 81,	/* A->C: REQUEST, then per live run / service attempt, in this
				   order: RUN_ID | SERVICE_NAME (+ ATTEMPT), CPU_USEC, MEMORY_BYTES */
	/* 90-99: pause (docs/agent-protocol.md, "Pause"), main connection */
	MSG_PAUSE = 90,	 /* C->A: REQUEST: stop the clocks (run deadlines, service restart
			    delays); answered by PAUSED once every request before it is done */
	MSG_PAUSED = 91, /* A->C: REQUEST */
	MSG_RESUME = 92, /* C->A: the clocks go on, each pushed back by the time paused */
	/* 93-94: checkpoint (docs/agent-protocol.md, "Checkpoint"), main connection */
	MSG_CHECKPOINT = 93,	   /* C->A: REQUEST, PATH (the run dir, as the container sees it):
				      log to PATH/agent.log, listen on PATH/agent.sock, close every
				      connection once CHECKPOINT_READY is sent */
	MSG_CHECKPOINT_READY = 94, /* A->C: REQUEST, REASON? (present: refused, nothing changed) */
};

/* Tags 100-149 are for terminals, 150-199 for services. */

enum msg_tag {
	TAG_SECRET = 1,
	TAG_VERSION = 2,
	TAG_PID = 3,
	TAG_RUN_ID = 4,
	TAG_COMMAND = 5,
	TAG_CWD = 6,
	TAG_ENV = 7, /* "KEY=VALUE", repeated */
	TAG_STDIN = 8,
	TAG_TIMEOUT_MS = 9,
	TAG_HEAD_BYTES = 10, /* per stream */
	TAG_TAIL_BYTES = 11, /* per stream */
	TAG_WATCH = 12,
	TAG_STARTED_AT = 13, /* CLOCK_REALTIME, microseconds */
	TAG_ENDED_AT = 14,
	TAG_STREAM = 15, /* enum run_stream */
	TAG_OFFSET = 16, /* byte offset of DATA within the stream */
	TAG_DATA = 17,
	TAG_STATUS = 18, /* enum run_status */
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
	TAG_FEATURES = 31, /* HELLO_OK: AGENT_FEATURE_* this agent speaks (absent: none) */
	/* 100-149: terminals */
	TAG_TERM_ID = 100,
	TAG_COLS = 101,
	TAG_ROWS = 102,
	TAG_SCROLLBACK_BYTES = 103,
	TAG_REQUEST = 104, /* TERM_ATTACH's number, echoed by its TERM_REPLAY */
	TAG_FORCED = 105,  /* TERM_EXIT: ended by TERM_CLOSE */
	/* 150-199: services */
	TAG_SERVICE_NAME = 150,
	TAG_SERVICE_ID = 151,	  /* the controller's id of this definition */
	TAG_RESTART_POLICY = 152, /* enum service_policy */
	TAG_MAX_RESTARTS = 153,
	TAG_DELAY_MS = 154,
	TAG_BACKOFF_PERMILLE = 155, /* delay multiplier per restart, x1000 (2000: doubles) */
	TAG_MAX_DELAY_MS = 156,
	TAG_STOP_SIGNAL = 157,
	TAG_STOP_TIMEOUT_MS = 158,
	TAG_ATTEMPT = 159,	 /* attempt number (START: the number of the first attempt) */
	TAG_SERVICE_STATE = 160, /* enum service_state */
	TAG_RESTART_COUNT = 161,
	TAG_NEXT_RESTART_AT = 162, /* CLOCK_REALTIME microseconds, in backoff */
	TAG_END_REASON = 163,	   /* enum attempt_end */
	TAG_DAEMONIZED = 164,
	TAG_OUTPUT_DROPPED = 165, /* the agent no longer had this attempt's output */
	TAG_STOPPING = 166,	  /* a stop or restart is under way */
	TAG_RESET_AFTER_MS = 167, /* an attempt this long resets the restart budget (0: never) */
	/* 200-249: file sessions (file-proto.h) */
	TAG_FILE_OP = 200,     /* enum file_op */
	TAG_PATH = 201,	       /* as the client gave it, at most PROTO_MAX_PATH bytes */
	TAG_PATH2 = 202,       /* RENAME's target; a moved event's new path */
	TAG_FILE_FLAGS = 203,  /* FILE_F_* */
	TAG_MODE = 204,	       /* permission bits (07777) */
	TAG_LENGTH = 205,      /* READ: bytes wanted from OFFSET (absent: to the end) */
	TAG_SUFFIX = 206,      /* READ: the last N bytes instead of OFFSET/LENGTH */
	TAG_MAX_BYTES = 207,   /* READ: refuse (EFBIG) a file larger than this */
	TAG_IF_MATCH = 208,    /* WRITE/DELETE/RENAME: the target's ETAG must still be this */
	TAG_NAME = 209,	       /* INFO: the entry's name (LIST) */
	TAG_FILE_TYPE = 210,   /* enum file_type */
	TAG_SIZE = 211,	       /* bytes */
	TAG_MTIME_NS = 212,    /* CLOCK_REALTIME nanoseconds */
	TAG_LINK_TARGET = 213, /* a symlink's target, never followed */
	TAG_ETAG = 214,	       /* an opaque version of a regular file */
	TAG_ERRNO = 215,       /* FILE_ERROR: a Linux errno */
	TAG_FILE_EVENT = 216,  /* enum file_event */
	TAG_UID = 217,	       /* INFO: owner */
	TAG_GID = 218,	       /* INFO: group */
	TAG_TRUNCATED = 219,   /* FILE_END of LIST: more entries than FILE_MAX_ENTRIES */
	/* 250-269: credentials */
	TAG_CRED_PROTOCOL = 250,
	TAG_CRED_HOST = 251,
	TAG_CRED_PATH = 252,
	TAG_CRED_USERNAME = 253,
	TAG_CRED_PASSWORD = 254,
	/* 270-289: resource use */
	TAG_MEMORY_BYTES = 270, /* USAGE_REPLY: memory charged now (CPU_USEC: cpu time so far) */
};
