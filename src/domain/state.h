/* SPDX-License-Identifier: MIT */
#pragma once

/* The states of the things the controller and the agent manage: workspaces, terminals, runs,
 * services and their attempts. Below both the store and the agent protocol, so both speak the
 * same enums; libc only.
 *
 * Numbers and strings are fixed: the numbers travel in the agent protocol's TLVs
 * (docs/agent-protocol.md) and sit in the runs table's status column, the strings are the API's
 * (docs/api.md) and sit in the other tables' text columns. Never renumber, never rename.
 *
 * Each enum has X_to_string() and X_from_string(), and the API's strings come from those only:
 * - X_to_string() returns a static string, or NULL for a value outside the enum.
 * - X_from_string() returns the value (>= 0), or -EINVAL for NULL or an unknown string. */

#include <stdbool.h>

enum workspace_state {
	WORKSPACE_CREATING = 0,
	WORKSPACE_READY = 1,
	WORKSPACE_STOPPED = 2,
	WORKSPACE_FAILED = 3,
	WORKSPACE_DELETING = 4,
	WORKSPACE_PAUSED =
		5, /* every process frozen but the agent (docs/api.md, "Pause and resume") */
	_WORKSPACE_STATE_MAX,
};

/* Terminal states, as the controller records them from the agent's reports. */
enum terminal_state {
	TERMINAL_STARTING = 0,
	TERMINAL_RUNNING = 1,
	TERMINAL_EXITED = 2, /* its process ended by itself */
	TERMINAL_CLOSED = 3, /* ended by a close request */
	TERMINAL_FAILED = 4, /* never started */
	TERMINAL_LOST = 5,   /* the agent no longer knew it */
	_TERMINAL_STATE_MAX,
};

/* How a run ended. RUN_LOST is decided by the controller, never sent by the agent. */
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

/* A run's or a service attempt's output stream. Starts at 1 on the wire. */
enum run_stream {
	RUN_STREAM_STDOUT = 1,
	RUN_STREAM_STDERR = 2,
	_RUN_STREAM_MAX,
};

/* Service restart policies, states and attempt ends (docs/agent-protocol.md, "Services"). */
enum service_policy {
	SERVICE_POLICY_NO = 0,
	SERVICE_POLICY_ON_FAILURE = 1,
	SERVICE_POLICY_ALWAYS = 2,
	_SERVICE_POLICY_MAX,
};

enum service_state {
	SERVICE_STARTING = 0,
	SERVICE_RUNNING = 1,
	SERVICE_BACKOFF = 2,
	SERVICE_STOPPED = 3,
	SERVICE_FAILED = 4,
	SERVICE_EXHAUSTED = 5,
	_SERVICE_STATE_MAX,
};

/* Why an attempt ended. ATTEMPT_LOST is decided by the controller, never sent by the agent. */
enum attempt_end {
	ATTEMPT_EXITED = 0,
	ATTEMPT_KILLED = 1,    /* by a signal nobody asked for */
	ATTEMPT_STOPPED = 2,   /* stop (or remove) */
	ATTEMPT_RESTARTED = 3, /* restart */
	ATTEMPT_FAILED_TO_START = 4,
	ATTEMPT_DAEMONIZED = 5, /* the main process exited, leaving processes behind */
	ATTEMPT_LOST = 6,
	_ATTEMPT_END_MAX,
};

const char *workspace_state_to_string(enum workspace_state s);
int workspace_state_from_string(const char *s);
const char *terminal_state_to_string(enum terminal_state s);
int terminal_state_from_string(const char *s);
const char *run_status_to_string(enum run_status s);
int run_status_from_string(const char *s);
/* "stdout", "stderr". */
const char *run_stream_to_string(enum run_stream s);
int run_stream_from_string(const char *s);
const char *service_policy_to_string(enum service_policy p);
int service_policy_from_string(const char *s);
const char *service_state_to_string(enum service_state s);
int service_state_from_string(const char *s);
const char *attempt_end_to_string(enum attempt_end e);
int attempt_end_from_string(const char *s);

/* A terminal whose process runs, or is about to. */
static inline bool terminal_state_is_live(enum terminal_state s)
{
	return s == TERMINAL_STARTING || s == TERMINAL_RUNNING;
}

/* A service with an attempt running, starting or waiting to restart. */
static inline bool service_state_is_active(enum service_state s)
{
	return s == SERVICE_STARTING || s == SERVICE_RUNNING || s == SERVICE_BACKOFF;
}
