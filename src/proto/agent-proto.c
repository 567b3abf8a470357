/* SPDX-License-Identifier: MIT */
#include "agent-proto.h"

#include <errno.h>
#include <string.h>

static const char *const run_status_names[_RUN_STATUS_MAX] = {
	[RUN_RUNNING] = "running",
	[RUN_EXITED] = "exited",
	[RUN_KILLED] = "killed",
	[RUN_TIMED_OUT] = "timed_out",
	[RUN_CANCELLED] = "cancelled",
	[RUN_FAILED_TO_START] = "failed_to_start",
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
