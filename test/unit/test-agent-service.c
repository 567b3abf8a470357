/* SPDX-License-Identifier: MIT */
/* The services' restart policy as a state machine (src/agent/service-policy.c): what follows
 * each kind of attempt end under each policy, the restart limit, delays and backoff, names. */

#include <criterion/criterion.h>

#include "agent/service.h"

static const struct service_restart no = { .policy = SERVICE_POLICY_NO,
					   .max_restarts = 3,
					   .delay_ms = 100 };
static const struct service_restart on_failure = { .policy = SERVICE_POLICY_ON_FAILURE,
						   .max_restarts = 3,
						   .delay_ms = 100 };
static const struct service_restart always = { .policy = SERVICE_POLICY_ALWAYS,
					       .max_restarts = 3,
					       .delay_ms = 100 };

static enum service_state next_state(const struct service_restart *r, uint64_t done,
				     enum attempt_end end, int code)
{
	return service_policy_next(r, done, end, code).state;
}

Test(service_policy, failures)
{
	cr_assert(service_attempt_failed(ATTEMPT_EXITED, 1));
	cr_assert(service_attempt_failed(ATTEMPT_EXITED, 255));
	cr_assert_not(service_attempt_failed(ATTEMPT_EXITED, 0));
	cr_assert(service_attempt_failed(ATTEMPT_KILLED, -1));
	cr_assert(service_attempt_failed(ATTEMPT_FAILED_TO_START, -1));
	cr_assert(service_attempt_failed(ATTEMPT_DAEMONIZED, 0));
	cr_assert_not(service_attempt_failed(ATTEMPT_STOPPED, -1));
	cr_assert_not(service_attempt_failed(ATTEMPT_RESTARTED, -1));
}

Test(service_policy, no_never_restarts)
{
	cr_assert_eq(next_state(&no, 0, ATTEMPT_EXITED, 0), SERVICE_STOPPED);
	cr_assert_eq(next_state(&no, 0, ATTEMPT_EXITED, 1), SERVICE_FAILED);
	cr_assert_eq(next_state(&no, 0, ATTEMPT_KILLED, -1), SERVICE_FAILED);
	cr_assert_eq(next_state(&no, 0, ATTEMPT_DAEMONIZED, 0), SERVICE_FAILED);
}

Test(service_policy, on_failure_restarts_only_failures)
{
	struct service_next n = service_policy_next(&on_failure, 0, ATTEMPT_EXITED, 1);

	cr_assert_eq(n.state, SERVICE_BACKOFF);
	cr_assert_eq(n.delay_ms, 100);
	cr_assert_eq(next_state(&on_failure, 0, ATTEMPT_KILLED, -1), SERVICE_BACKOFF);
	cr_assert_eq(next_state(&on_failure, 0, ATTEMPT_FAILED_TO_START, -1), SERVICE_BACKOFF);
	cr_assert_eq(next_state(&on_failure, 0, ATTEMPT_EXITED, 0), SERVICE_STOPPED);
}

/* The acceptance case: maxRestarts 3 means exactly 4 attempts, then exhausted. */
Test(service_policy, on_failure_exhausts_after_max_restarts)
{
	uint64_t restarts = 0, attempts = 1;

	while (next_state(&on_failure, restarts, ATTEMPT_EXITED, 1) == SERVICE_BACKOFF) {
		restarts++;
		attempts++;
		cr_assert_leq(attempts, 100);
	}
	cr_assert_eq(next_state(&on_failure, restarts, ATTEMPT_EXITED, 1), SERVICE_EXHAUSTED);
	cr_assert_eq(attempts, 4);
	cr_assert_eq(restarts, 3);
}

Test(service_policy, always_restarts_after_success_too)
{
	cr_assert_eq(next_state(&always, 0, ATTEMPT_EXITED, 0), SERVICE_BACKOFF);
	cr_assert_eq(next_state(&always, 2, ATTEMPT_EXITED, 1), SERVICE_BACKOFF);
	cr_assert_eq(next_state(&always, 3, ATTEMPT_EXITED, 0), SERVICE_EXHAUSTED);
}

Test(service_policy, zero_max_restarts)
{
	struct service_restart r = always;

	r.max_restarts = 0;
	cr_assert_eq(next_state(&r, 0, ATTEMPT_EXITED, 0), SERVICE_EXHAUSTED);
}

Test(service_policy, stop_and_restart_override_the_policy)
{
	const struct service_restart *policies[] = { &no, &on_failure, &always };

	for (size_t i = 0; i < 3; i++) {
		cr_assert_eq(next_state(policies[i], 0, ATTEMPT_STOPPED, -1), SERVICE_STOPPED);
		cr_assert_eq(next_state(policies[i], 3, ATTEMPT_STOPPED, -1), SERVICE_STOPPED);
		cr_assert_eq(next_state(policies[i], 0, ATTEMPT_RESTARTED, -1), SERVICE_STARTING);
		cr_assert_eq(next_state(policies[i], 3, ATTEMPT_RESTARTED, -1), SERVICE_STARTING);
	}
}

Test(service_policy, backoff_delays)
{
	struct service_restart r = { .policy = SERVICE_POLICY_ALWAYS,
				     .max_restarts = 100,
				     .delay_ms = 100,
				     .backoff_permille = 2000,
				     .max_delay_ms = 1000 };

	cr_assert_eq(service_restart_delay_ms(&r, 0), 100);
	cr_assert_eq(service_restart_delay_ms(&r, 1), 200);
	cr_assert_eq(service_restart_delay_ms(&r, 2), 400);
	cr_assert_eq(service_restart_delay_ms(&r, 3), 800);
	cr_assert_eq(service_restart_delay_ms(&r, 4), 1000);
	cr_assert_eq(service_restart_delay_ms(&r, 60), 1000);
	cr_assert_eq(service_policy_next(&r, 2, ATTEMPT_EXITED, 0).delay_ms, 400);
	r.backoff_permille = 1500;
	cr_assert_eq(service_restart_delay_ms(&r, 2), 225);
	r.backoff_permille = 0;
	cr_assert_eq(service_restart_delay_ms(&r, 50), 100);
}

Test(service_policy, backoff_without_cap_saturates)
{
	struct service_restart r = { .policy = SERVICE_POLICY_ALWAYS,
				     .delay_ms = 1000,
				     .backoff_permille = 100000 };

	cr_assert_eq(service_restart_delay_ms(&r, 1000), UINT64_MAX);
}

Test(service_policy, names)
{
	cr_assert(service_name_valid("web"));
	cr_assert(service_name_valid("0"));
	cr_assert(service_name_valid("agent-gateway.v2_1"));
	cr_assert(service_name_valid(
		"a23456789012345678901234567890123456789012345678901234567890123"));
	cr_assert_not(service_name_valid(""));
	cr_assert_not(service_name_valid("Web"));
	cr_assert_not(service_name_valid("-web"));
	cr_assert_not(service_name_valid(".web"));
	cr_assert_not(service_name_valid("we b"));
	cr_assert_not(service_name_valid("we/b"));
	cr_assert_not(service_name_valid(
		"a234567890123456789012345678901234567890123456789012345678901234"));
}

Test(service_policy, budget_resets_after_a_long_attempt)
{
	struct service_restart r = { .policy = SERVICE_POLICY_ON_FAILURE,
				     .max_restarts = 1,
				     .reset_after_ms = 1000 };

	cr_assert(!service_budget_resets(&r, 999));
	cr_assert(service_budget_resets(&r, 1000));
	cr_assert(service_budget_resets(&r, 86400000));
	r.reset_after_ms = 0; /* never */
	cr_assert(!service_budget_resets(&r, UINT64_MAX));
}
