/* SPDX-License-Identifier: MIT */
#include "domain/state.h"

#include <errno.h>
#include <string.h>

static const char *const workspace_state_names[_WORKSPACE_STATE_MAX] = {
	[WORKSPACE_CREATING] = "creating", [WORKSPACE_READY] = "ready",
	[WORKSPACE_STOPPED] = "stopped",   [WORKSPACE_FAILED] = "failed",
	[WORKSPACE_DELETING] = "deleting", [WORKSPACE_PAUSED] = "paused",
};

static const char *const terminal_state_names[_TERMINAL_STATE_MAX] = {
	[TERMINAL_STARTING] = "starting", [TERMINAL_RUNNING] = "running",
	[TERMINAL_EXITED] = "exited",	  [TERMINAL_CLOSED] = "closed",
	[TERMINAL_FAILED] = "failed",	  [TERMINAL_LOST] = "lost",
};

static const char *const run_status_names[_RUN_STATUS_MAX] = {
	[RUN_RUNNING] = "running",     [RUN_EXITED] = "exited",
	[RUN_KILLED] = "killed",       [RUN_TIMED_OUT] = "timed_out",
	[RUN_CANCELLED] = "cancelled", [RUN_FAILED_TO_START] = "failed_to_start",
	[RUN_LOST] = "lost",
};

/* Entry 0 stays NULL: streams start at 1 on the wire. */
static const char *const run_stream_names[_RUN_STREAM_MAX] = {
	[RUN_STREAM_STDOUT] = "stdout",
	[RUN_STREAM_STDERR] = "stderr",
};

static const char *const service_policy_names[_SERVICE_POLICY_MAX] = {
	[SERVICE_POLICY_NO] = "no",
	[SERVICE_POLICY_ON_FAILURE] = "on-failure",
	[SERVICE_POLICY_ALWAYS] = "always",
};

static const char *const service_state_names[_SERVICE_STATE_MAX] = {
	[SERVICE_STARTING] = "starting", [SERVICE_RUNNING] = "running",
	[SERVICE_BACKOFF] = "backoff",	 [SERVICE_STOPPED] = "stopped",
	[SERVICE_FAILED] = "failed",	 [SERVICE_EXHAUSTED] = "exhausted",
};

static const char *const attempt_end_names[_ATTEMPT_END_MAX] = {
	[ATTEMPT_EXITED] = "exited",
	[ATTEMPT_KILLED] = "killed",
	[ATTEMPT_STOPPED] = "stopped",
	[ATTEMPT_RESTARTED] = "restarted",
	[ATTEMPT_FAILED_TO_START] = "failed_to_start",
	[ATTEMPT_DAEMONIZED] = "daemonized",
	[ATTEMPT_LOST] = "lost",
};

static const char *name_of(const char *const *names, int n, int v)
{
	return v >= 0 && v < n ? names[v] : NULL;
}

static int name_find(const char *const *names, int n, const char *s)
{
	for (int i = 0; s && i < n; i++)
		if (names[i] && strcmp(names[i], s) == 0)
			return i;
	return -EINVAL;
}

#define DEFINE_STRING_TABLE(name, max)                                                             \
	const char *name##_to_string(enum name v)                                                  \
	{                                                                                          \
		return name_of(name##_names, max, (int)v);                                         \
	}                                                                                          \
	int name##_from_string(const char *s)                                                      \
	{                                                                                          \
		return name_find(name##_names, max, s);                                            \
	}

DEFINE_STRING_TABLE(workspace_state, _WORKSPACE_STATE_MAX)
DEFINE_STRING_TABLE(terminal_state, _TERMINAL_STATE_MAX)
DEFINE_STRING_TABLE(run_status, _RUN_STATUS_MAX)
DEFINE_STRING_TABLE(run_stream, _RUN_STREAM_MAX)
DEFINE_STRING_TABLE(service_policy, _SERVICE_POLICY_MAX)
DEFINE_STRING_TABLE(service_state, _SERVICE_STATE_MAX)
DEFINE_STRING_TABLE(attempt_end, _ATTEMPT_END_MAX)
