/* SPDX-License-Identifier: MIT */
#include "agent-proto.h"

#include <errno.h>
#include <string.h>

static const char *const run_status_names[_RUN_STATUS_MAX] = {
	[RUN_RUNNING] = "running",     [RUN_EXITED] = "exited",
	[RUN_KILLED] = "killed",       [RUN_TIMED_OUT] = "timed_out",
	[RUN_CANCELLED] = "cancelled", [RUN_FAILED_TO_START] = "failed_to_start",
	[RUN_LOST] = "lost",
};

const char *run_status_to_string(enum run_status s)
{
	if ((unsigned)s >= _RUN_STATUS_MAX)
		return NULL;
	return run_status_names[s];
}

int run_status_from_string(const char *s)
{
	for (int i = 0; i < _RUN_STATUS_MAX; i++)
		if (strcmp(run_status_names[i], s) == 0)
			return i;
	return -EINVAL;
}

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
		if (strcmp(names[i], s) == 0)
			return i;
	return -EINVAL;
}

const char *service_policy_to_string(enum service_policy p)
{
	return name_of(service_policy_names, _SERVICE_POLICY_MAX, (int)p);
}

int service_policy_from_string(const char *s)
{
	return name_find(service_policy_names, _SERVICE_POLICY_MAX, s);
}

const char *service_state_to_string(enum service_state s)
{
	return name_of(service_state_names, _SERVICE_STATE_MAX, (int)s);
}

int service_state_from_string(const char *s)
{
	return name_find(service_state_names, _SERVICE_STATE_MAX, s);
}

const char *attempt_end_to_string(enum attempt_end e)
{
	return name_of(attempt_end_names, _ATTEMPT_END_MAX, (int)e);
}

int attempt_end_from_string(const char *s)
{
	return name_find(attempt_end_names, _ATTEMPT_END_MAX, s);
}
