/* SPDX-License-Identifier: MIT */
/* Usage history (docs/api.md, "Usage history"): GET /v1/workspaces/{id}/usage?since=&step=
 * and GET /v1/worker/usage. since is an RFC 3339 time, milliseconds since the epoch, or a
 * duration back from now ("1h"); step a duration ("5s", "1m") or milliseconds. */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "api/http.h"
#include "api/router.h"
#include "basic/util.h"
#include "daemon/manager.h"
#include "event/event.h"

#define STEP_MAX_MS (24ull * 3600 * 1000)
#define DEFAULT_SPAN_MS (3600ull * 1000)

/* "<digits>[ms|s|m|h]" (no unit: ms) into milliseconds, at most max. */
static int parse_duration_ms(const char *s, uint64_t max, uint64_t *ret)
{
	static const struct {
		const char *unit;
		uint64_t ms;
	} units[] = { { "", 1 }, { "ms", 1 }, { "s", 1000 }, { "m", 60000 }, { "h", 3600000 } };
	size_t digits = strspn(s, "0123456789");
	char num[16];
	uint64_t v;

	if (digits == 0 || digits >= sizeof num)
		return -EINVAL;
	memcpy(num, s, digits);
	num[digits] = '\0';
	if (parse_u64(num, UINT32_MAX, &v) < 0)
		return -EINVAL;
	for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
		if (strcmp(s + digits, units[i].unit) != 0)
			continue;
		if (v > max / units[i].ms)
			return -ERANGE;
		*ret = v * units[i].ms;
		return 0;
	}
	return -EINVAL;
}

/* since: realtime ms. An absolute time is RFC 3339 or 13+ digits of ms; fewer digits with or
 * without a unit is a duration back from now. */
static int parse_since(const char *s, uint64_t now_ms, uint64_t *ret)
{
	uint64_t v;

	if (strchr(s, 'T')) {
		if (parse_rfc3339(s, &v) < 0)
			return -EINVAL;
		*ret = v / 1000;
		return 0;
	}
	if (strspn(s, "0123456789") == strlen(s) && strlen(s) >= 13)
		return parse_u64(s, UINT64_C(1) << 53, ret) < 0 ? -EINVAL : 0;
	if (parse_duration_ms(s, STEP_MAX_MS * 365, &v) < 0)
		return -EINVAL;
	*ret = now_ms > v ? now_ms - v : 0;
	return 0;
}

/* since and step from the query, defaults filled in: since an hour ago, step the sampling
 * interval within the last hour, a minute before it. */
static int usage_query(struct http_request *req, uint64_t *ret_since, uint64_t *ret_step,
		       struct station_error *e)
{
	uint64_t now_ms = realtime_usec() / 1000, since = now_ms - DEFAULT_SPAN_MS, step;
	const char *v;
	bool present;

	v = http_request_query(req, "since", &present);
	if (present && (!v || parse_since(v, now_ms, &since) < 0))
		return station_error_set(e, -EINVAL, "since",
					 "since must be an RFC 3339 time, milliseconds since the "
					 "epoch or a duration back from now (\"1h\", \"30m\")");
	step = since + DEFAULT_SPAN_MS >= now_ms ? USAGE_INTERVAL_DEFAULT_MS : 60000;
	v = http_request_query(req, "step", &present);
	if (present &&
	    (!v || parse_duration_ms(v, STEP_MAX_MS, &step) < 0 || step < USAGE_INTERVAL_MIN_MS))
		return station_error_set(e, -EINVAL, "step",
					 "step must be a duration from %ums to 24h (\"5s\", "
					 "\"1m\", or milliseconds)",
					 USAGE_INTERVAL_MIN_MS);
	*ret_since = since;
	*ret_step = step;
	return 0;
}

bool api_usage_history_asked(struct http_request *req)
{
	bool since, step;

	(void)http_request_query(req, "since", &since);
	(void)http_request_query(req, "step", &step);
	return since || step;
}

int api_workspace_usage_history(struct http_request *req)
{
	const struct route_match *m = http_request_route(req);
	struct station_error e = {};
	uint64_t since, step;
	json_t *o = NULL;
	int r = usage_query(req, &since, &step, &e);

	if (r >= 0)
		r = manager_usage_history_get(http_request_manager(req), m->ws_id, since, step, &o,
					      &e);
	if (r < 0)
		return http_reply_error(req, &e);
	return http_reply_json(req, 200, o);
}

int api_worker_usage(struct http_request *req)
{
	struct station_error e = {};
	uint64_t since, step;
	json_t *o = NULL;
	int r = usage_query(req, &since, &step, &e);

	if (r >= 0)
		r = manager_worker_usage_history_get(http_request_manager(req), since, step, &o,
						     &e);
	if (r < 0)
		return http_reply_error(req, &e);
	return http_reply_json(req, 200, o);
}
