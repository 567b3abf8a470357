/* SPDX-License-Identifier: MIT */
/* The domain's enums and their strings (src/domain/state.c): every value round-trips, the
 * strings are the API's, the wire numbers are fixed, and anything else is refused. */

#include <criterion/criterion.h>
#include <errno.h>

#include "domain/state.h"

/* One enum: its functions, how many values and the first (streams start at 1). */
struct enum_table {
	const char *name;
	const char *(*to_string)(int v);
	int (*from_string)(const char *s);
	int first, max;
};

/* The to_string functions take their own enum: call each through a wrapper with an int. */
#define WRAP(name)                                                                                 \
	static const char *name##_str(int v)                                                       \
	{                                                                                          \
		return name##_to_string(v);                                                        \
	}
WRAP(workspace_state)
WRAP(terminal_state)
WRAP(run_status)
WRAP(run_stream)
WRAP(service_policy)
WRAP(service_state)
WRAP(attempt_end)

static const struct enum_table tables[] = {
	{ "workspace_state", workspace_state_str, workspace_state_from_string, 0,
	  _WORKSPACE_STATE_MAX },
	{ "terminal_state", terminal_state_str, terminal_state_from_string, 0,
	  _TERMINAL_STATE_MAX },
	{ "run_status", run_status_str, run_status_from_string, 0, _RUN_STATUS_MAX },
	{ "run_stream", run_stream_str, run_stream_from_string, 1, _RUN_STREAM_MAX },
	{ "service_policy", service_policy_str, service_policy_from_string, 0,
	  _SERVICE_POLICY_MAX },
	{ "service_state", service_state_str, service_state_from_string, 0, _SERVICE_STATE_MAX },
	{ "attempt_end", attempt_end_str, attempt_end_from_string, 0, _ATTEMPT_END_MAX },
};

Test(domain_state, every_value_round_trips)
{
	for (size_t t = 0; t < sizeof(tables) / sizeof(tables[0]); t++) {
		const struct enum_table *e = &tables[t];

		for (int v = e->first; v < e->max; v++) {
			const char *s = e->to_string(v);

			cr_assert_not_null(s, "%s %d has no name", e->name, v);
			cr_assert_eq(e->from_string(s), v, "%s \"%s\"", e->name, s);
		}
	}
}

Test(domain_state, unknown_is_refused)
{
	for (size_t t = 0; t < sizeof(tables) / sizeof(tables[0]); t++) {
		const struct enum_table *e = &tables[t];

		cr_assert_eq(e->from_string("unknown"), -EINVAL, "%s", e->name);
		cr_assert_eq(e->from_string(""), -EINVAL, "%s", e->name);
		cr_assert_eq(e->from_string(NULL), -EINVAL, "%s", e->name);
		cr_assert_null(e->to_string(e->max), "%s", e->name);
		cr_assert_null(e->to_string(-1), "%s", e->name);
		cr_assert_null(e->to_string(e->first - 1), "%s", e->name);
	}
	/* case and surrounding text matter */
	cr_assert_eq(workspace_state_from_string("Ready"), -EINVAL);
	cr_assert_eq(workspace_state_from_string("ready "), -EINVAL);
	cr_assert_eq(service_policy_from_string("on_failure"), -EINVAL);
}

/* The strings of docs/api.md, which the database's text columns hold too. */
Test(domain_state, api_strings)
{
	static const char *const workspace[] = { "creating", "ready",	 "stopped",
						 "failed",   "deleting", "paused" };
	static const char *const terminal[] = { "starting", "running", "exited",
						"closed",   "failed",  "lost" };
	static const char *const run[] = { "running",	"exited",	   "killed", "timed_out",
					   "cancelled", "failed_to_start", "lost" };
	static const char *const policy[] = { "no", "on-failure", "always" };
	static const char *const service[] = { "starting", "running", "backoff",
					       "stopped",  "failed",  "exhausted" };
	static const char *const end[] = { "exited",	      "killed",	    "stopped", "restarted",
					   "failed_to_start", "daemonized", "lost" };

	for (int i = 0; i < _WORKSPACE_STATE_MAX; i++)
		cr_assert_str_eq(workspace_state_to_string(i), workspace[i]);
	for (int i = 0; i < _TERMINAL_STATE_MAX; i++)
		cr_assert_str_eq(terminal_state_to_string(i), terminal[i]);
	for (int i = 0; i < _RUN_STATUS_MAX; i++)
		cr_assert_str_eq(run_status_to_string(i), run[i]);
	for (int i = 0; i < _SERVICE_POLICY_MAX; i++)
		cr_assert_str_eq(service_policy_to_string(i), policy[i]);
	for (int i = 0; i < _SERVICE_STATE_MAX; i++)
		cr_assert_str_eq(service_state_to_string(i), service[i]);
	for (int i = 0; i < _ATTEMPT_END_MAX; i++)
		cr_assert_str_eq(attempt_end_to_string(i), end[i]);
	cr_assert_str_eq(run_stream_to_string(RUN_STREAM_STDOUT), "stdout");
	cr_assert_str_eq(run_stream_to_string(RUN_STREAM_STDERR), "stderr");
	cr_assert_eq(_WORKSPACE_STATE_MAX, 6);
	cr_assert_eq(_TERMINAL_STATE_MAX, 6);
}

/* The numbers travel in the agent protocol and sit in runs.status: they never change. */
Test(domain_state, wire_numbers)
{
	cr_assert_eq(RUN_RUNNING, 0);
	cr_assert_eq(RUN_EXITED, 1);
	cr_assert_eq(RUN_KILLED, 2);
	cr_assert_eq(RUN_TIMED_OUT, 3);
	cr_assert_eq(RUN_CANCELLED, 4);
	cr_assert_eq(RUN_FAILED_TO_START, 5);
	cr_assert_eq(RUN_LOST, 6);
	cr_assert_eq(RUN_STREAM_STDOUT, 1);
	cr_assert_eq(RUN_STREAM_STDERR, 2);
	cr_assert_eq(SERVICE_POLICY_NO, 0);
	cr_assert_eq(SERVICE_POLICY_ON_FAILURE, 1);
	cr_assert_eq(SERVICE_POLICY_ALWAYS, 2);
	cr_assert_eq(SERVICE_STARTING, 0);
	cr_assert_eq(SERVICE_RUNNING, 1);
	cr_assert_eq(SERVICE_BACKOFF, 2);
	cr_assert_eq(SERVICE_STOPPED, 3);
	cr_assert_eq(SERVICE_FAILED, 4);
	cr_assert_eq(SERVICE_EXHAUSTED, 5);
	cr_assert_eq(ATTEMPT_EXITED, 0);
	cr_assert_eq(ATTEMPT_KILLED, 1);
	cr_assert_eq(ATTEMPT_STOPPED, 2);
	cr_assert_eq(ATTEMPT_RESTARTED, 3);
	cr_assert_eq(ATTEMPT_FAILED_TO_START, 4);
	cr_assert_eq(ATTEMPT_DAEMONIZED, 5);
	cr_assert_eq(ATTEMPT_LOST, 6);
}

Test(domain_state, live_and_active)
{
	cr_assert(terminal_state_is_live(TERMINAL_STARTING));
	cr_assert(terminal_state_is_live(TERMINAL_RUNNING));
	for (int s = TERMINAL_EXITED; s < _TERMINAL_STATE_MAX; s++)
		cr_assert_not(terminal_state_is_live(s), "%s", terminal_state_to_string(s));
	cr_assert(service_state_is_active(SERVICE_STARTING));
	cr_assert(service_state_is_active(SERVICE_RUNNING));
	cr_assert(service_state_is_active(SERVICE_BACKOFF));
	cr_assert_not(service_state_is_active(SERVICE_STOPPED));
	cr_assert_not(service_state_is_active(SERVICE_FAILED));
	cr_assert_not(service_state_is_active(SERVICE_EXHAUSTED));
}
