/* SPDX-License-Identifier: MIT */
/* The restart policy of services: pure functions, no processes (service.h). */

#include "agent/service.h"

#include <string.h>

bool service_attempt_failed(enum attempt_end end, int exit_code)
{
	switch (end) {
	case ATTEMPT_EXITED:
		return exit_code != 0;
	case ATTEMPT_KILLED:
	case ATTEMPT_FAILED_TO_START:
	case ATTEMPT_DAEMONIZED:
	case ATTEMPT_LOST:
		return true;
	default:
		return false;
	}
}

struct service_next service_policy_next(const struct service_restart *r, uint64_t restarts_done,
					enum attempt_end end, int exit_code)
{
	bool failed = service_attempt_failed(end, exit_code);
	bool wants_restart;

	if (end == ATTEMPT_STOPPED)
		return (struct service_next){ .state = SERVICE_STOPPED };
	if (end == ATTEMPT_RESTARTED)
		return (struct service_next){ .state = SERVICE_STARTING };
	switch (r->policy) {
	case SERVICE_POLICY_ALWAYS:
		wants_restart = true;
		break;
	case SERVICE_POLICY_ON_FAILURE:
		wants_restart = failed;
		break;
	default:
		wants_restart = false;
		break;
	}
	if (!wants_restart)
		return (struct service_next){ .state = failed ? SERVICE_FAILED : SERVICE_STOPPED };
	if (restarts_done >= r->max_restarts)
		return (struct service_next){ .state = SERVICE_EXHAUSTED };
	return (struct service_next){ .state = SERVICE_BACKOFF,
				      .delay_ms = service_restart_delay_ms(r, restarts_done) };
}

bool service_budget_resets(const struct service_restart *r, uint64_t ran_ms)
{
	return r->reset_after_ms > 0 && ran_ms >= r->reset_after_ms;
}

uint64_t service_restart_delay_ms(const struct service_restart *r, uint64_t restarts_done)
{
	uint64_t delay = r->delay_ms;
	uint64_t cap = r->max_delay_ms ? r->max_delay_ms : UINT64_MAX;

	if (r->backoff_permille == 0)
		return delay;
	for (uint64_t i = 0; i < restarts_done && delay < cap; i++) {
		if (delay > UINT64_MAX / r->backoff_permille) {
			delay = UINT64_MAX;
			break;
		}
		delay = delay * r->backoff_permille / 1000;
	}
	return delay < cap ? delay : cap;
}

bool service_name_valid(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > SERVICE_NAME_MAX)
		return false;
	if (!((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= '0' && s[0] <= '9')))
		return false;
	return strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789._-") == n;
}
