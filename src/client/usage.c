/* SPDX-License-Identifier: MIT */
/* Usage history: a workspace's CPU, memory, pids and network over time, and the worker's totals
 * (docs/api.md, "Usage history"). */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "basic/cleanup.h"
#include "basic/util.h"
#include "client-internal.h"

#define USAGE_STEP_MIN_MS 100ull
#define USAGE_STEP_MAX_MS (24ull * 3600 * 1000)
#define USAGE_SINCE_MAX_MS (365 * USAGE_STEP_MAX_MS)

/* "<digits>[ms|s|m|h]" (no unit: milliseconds) as the controller reads it, at most max ms. */
static int usage_duration_ms(const char *s, uint64_t max, uint64_t *ret)
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
	for (size_t i = 0; i < ELEMENTSOF(units); i++)
		if (strcmp(s + digits, units[i].unit) == 0) {
			if (v > max / units[i].ms)
				return -ERANGE;
			*ret = v * units[i].ms;
			return 0;
		}
	return -EINVAL;
}

static bool usage_since_valid(const char *s)
{
	uint64_t v;

	if (strchr(s, 'T'))
		return parse_rfc3339(s, &v) >= 0;
	if (strlen(s) >= 13 && strspn(s, "0123456789") == strlen(s))
		return parse_u64(s, UINT64_C(1) << 53, &v) >= 0;
	return usage_duration_ms(s, USAGE_SINCE_MAX_MS, &v) >= 0;
}

static bool usage_step_valid(const char *s)
{
	uint64_t v;

	return usage_duration_ms(s, USAGE_STEP_MAX_MS, &v) >= 0 && v >= USAGE_STEP_MIN_MS;
}

int station_usage_options_check(const struct station_usage_options *opts, char *ret_error,
				size_t size)
{
	if (opts && opts->since && !usage_since_valid(opts->since)) {
		snprintf(
			ret_error, size,
			"since '%.64s': want an RFC 3339 time (2026-12-07T07:00:00Z), milliseconds "
			"since the epoch, or a duration back from now (90s, 30m, 1h)",
			opts->since);
		return -EINVAL;
	}
	if (opts && opts->step && !usage_step_valid(opts->step)) {
		snprintf(ret_error, size,
			 "step '%.64s': want a duration from 100ms to 24h (5s, 1m, 1h) or "
			 "milliseconds",
			 opts->step);
		return -EINVAL;
	}
	return 0;
}

/* A checked since or step holds digits, letters and ":.-+": only '+' needs escaping. */
static char *usage_query_value(const char *s)
{
	char *out = malloc(strlen(s) * 3 + 1), *o = out;

	if (!out)
		return NULL;
	for (; *s; s++) {
		if (*s == '+')
			o = stpcpy(o, "%2B");
		else
			*o++ = *s;
	}
	*o = '\0';
	return out;
}

/* prefix + "?since=…&step=…" of opts. Without either the workspace's path answers its live
 * usage instead, so since is then the server's own default, an hour back. */
static int usage_path(struct station_client *c, const char *prefix,
		      const struct station_usage_options *opts, char **ret)
{
	const char *since = opts && opts->since ? opts->since : NULL;
	const char *step = opts && opts->step ? opts->step : NULL;
	_cleanup_free_ char *since_q = NULL, *step_q = NULL;
	char why[256];

	if (station_usage_options_check(opts, why, sizeof why) < 0)
		return client_error(c, -EINVAL, "%s", why);
	if (!since && !step)
		since = "1h";
	if (since && !(since_q = usage_query_value(since)))
		return client_error(c, -ENOMEM, "out of memory");
	if (step && !(step_q = usage_query_value(step)))
		return client_error(c, -ENOMEM, "out of memory");
	if (asprintf(ret, "%s?%s%s%s%s%s", prefix, since_q ? "since=" : "", since_q ? since_q : "",
		     since_q && step_q ? "&" : "", step_q ? "step=" : "", step_q ? step_q : "") < 0)
		return client_error(c, -ENOMEM, "out of memory");
	return 0;
}

/* The answer has the history's shape: the samples array at least. */
static int usage_check(struct station_client *c, json_t *doc)
{
	if (!json_is_array(json_object_get(doc, "samples")) ||
	    !json_is_integer(json_object_get(doc, "stepMs")))
		return client_error(c, -EPROTO, "%s answered without \"samples\" and \"stepMs\"",
				    station_client_endpoint(c));
	return 0;
}

int station_workspace_usage_history(struct station_client *c, const char *ws,
				    const struct station_usage_options *opts, json_t **ret)
{
	_cleanup_free_ char *base = NULL, *path = NULL;
	_cleanup_json_ json_t *doc = NULL;
	int r;

	CLIENT_ROUTE(c, ws);
	r = client_path(c, ws, NULL, "/usage", &base);
	if (r >= 0)
		r = usage_path(c, base, opts, &path);
	if (r >= 0)
		r = station_request_json(c, "GET", path, NULL, &doc);
	if (r >= 0)
		r = usage_check(c, doc);
	if (r < 0)
		return r;
	*ret = TAKE_PTR(doc);
	return 0;
}

int station_worker_usage(struct station_client *c, const struct station_usage_options *opts,
			 json_t **ret)
{
	_cleanup_free_ char *path = NULL;
	_cleanup_json_ json_t *doc = NULL;
	int r;

	r = usage_path(c, "/v1/worker/usage", opts, &path);
	if (r >= 0)
		r = station_request_json(c, "GET", path, NULL, &doc);
	if (r >= 0)
		r = usage_check(c, doc);
	if (r < 0)
		return r;
	*ret = TAKE_PTR(doc);
	return 0;
}
