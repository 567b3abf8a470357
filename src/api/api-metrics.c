/* SPDX-License-Identifier: MIT */
/* GET /metrics (docs/operations.md, "Metrics"): the Prometheus text format (0.0.4) of what
 * the HTTP layer counts (requests by route template, open connections and WebSockets) and of
 * the manager's series (manager_metrics_write()). Admin and read tokens see it all; a tenant's
 * token sees its own workspaces' series only, nothing worker-wide; the unix socket needs no
 * token. */

#include <errno.h>
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api-metrics.h"
#include "api/auth.h"
#include "api/http.h"
#include "daemon/manager.h"

#define METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

static unsigned status_class(unsigned status)
{
	return status >= 100 && status < 600 ? status / 100 : 0;
}

void api_metrics_request(struct api_metrics *am, unsigned route, unsigned status,
			 uint64_t duration_usec)
{
	if (!am || route >= API_METRICS_ROUTES)
		return;
	am->requests[route][status_class(status)]++;
	metrics_histogram_observe(&am->duration[route], (double)duration_usec / 1e6);
}

void api_metrics_route_template(unsigned route, char *buf, size_t size)
{
	const char *p;
	size_t n = 0;
	int stars = 0;

	if (route == API_METRICS_MCP || route == API_METRICS_UNROUTED) {
		snprintf(buf, size, "%s", route == API_METRICS_MCP ? "/mcp" : "unrouted");
		return;
	}
	buf[0] = '\0';
	for (p = endpoint_route(route); *p && n + 12 < size; p++) {
		const char *put = *p == '*' ? (stars++ ? "{name}" : "{id}") :
				  *p == '@' ? "{digest}" :
				  *p == '+' ? "{path}" :
					      NULL;
		if (put) {
			n += (size_t)snprintf(buf + n, size - n, "%s", put);
		} else {
			buf[n++] = *p;
			buf[n] = '\0';
		}
	}
}

static void method_of(const char *pattern, const char *method, enum endpoint ep, void *userdata)
{
	const char **methods = userdata;

	(void)pattern;
	methods[ep] = method;
}

/* The method an endpoint serves (each serves one; HEAD counts as GET). */
static const char *endpoint_method(unsigned route)
{
	static const char *methods[_EP_MAX];

	if (!methods[0])
		router_foreach(method_of, methods);
	return route < _EP_MAX ? methods[route] : route == API_METRICS_MCP ? "POST" : "";
}

static void write_requests(FILE *f, const struct api_metrics *am)
{
	static const char *const classes[API_METRICS_CLASSES] = { "none", "1xx", "2xx",
								  "3xx",  "4xx", "5xx" };
	char route[160];

	metrics_family(f, "station_http_requests_total", "counter",
		       "API requests answered, by route template, method and status class "
		       "(none: the client went away first).");
	for (unsigned r = 0; r < API_METRICS_ROUTES; r++)
		for (unsigned c = 0; c < API_METRICS_CLASSES; c++) {
			if (!am->requests[r][c])
				continue;
			api_metrics_route_template(r, route, sizeof route);
			const char *labels[] = { "route",  route,
						 "method", endpoint_method(r) ?: "",
						 "code",   classes[c],
						 NULL };
			metrics_sample_u64(f, "station_http_requests_total", labels,
					   am->requests[r][c]);
		}
	metrics_family(f, "station_http_request_duration_seconds", "histogram",
		       "Time from a request's headers to the end of its answer, by route template "
		       "and method.");
	for (unsigned r = 0; r < API_METRICS_ROUTES; r++) {
		if (!am->duration[r].count)
			continue;
		api_metrics_route_template(r, route, sizeof route);
		const char *labels[] = { "route", route, "method", endpoint_method(r) ?: "", NULL };
		metrics_histogram_write(f, "station_http_request_duration_seconds", labels,
					&am->duration[r]);
	}
}

static void write_connections(FILE *f, const struct http_connections *c,
			      const struct api_metrics *am)
{
	metrics_family(f, "station_http_connections_open", "gauge",
		       "Client connections open now (every listener; WebSockets included).");
	metrics_sample_u64(f, "station_http_connections_open", NULL, c ? c->open : 0);
	metrics_family(f, "station_http_long_lived_requests", "gauge",
		       "Long-polls, event streams and WebSockets holding a connection now.");
	metrics_sample_u64(f, "station_http_long_lived_requests", NULL, c ? c->long_lived : 0);
	metrics_family(f, "station_http_connections_refused_total", "counter",
		       "Connections and long-lived requests refused 503 past the limits.");
	metrics_sample_u64(f, "station_http_connections_refused_total", NULL,
			   c ? c->refused + c->refused_long : 0);
	metrics_family(f, "station_websockets_open", "gauge", "WebSockets open now.");
	metrics_sample_u64(f, "station_websockets_open", NULL, am ? am->websockets : 0);
}

int api_metrics(struct http_request *req)
{
	const struct auth_principal *p = http_request_principal(req);
	const struct api_metrics *am = http_request_metrics(req);
	struct MHD_Response *r;
	char *text = NULL;
	size_t len = 0;
	FILE *f;
	int ret;

	f = open_memstream(&text, &len);
	if (!f)
		return http_reply_status(req, 500, NULL, "out of memory");
	/* a tenant's view: its workspaces' series, none of the worker's (manager-metrics.c) */
	if (!p->tenant[0]) {
		if (am)
			write_requests(f, am);
		write_connections(f, http_request_connections(req), am);
	}
	manager_metrics_write(http_request_manager(req), f);
	if (fclose(f) != 0 || !text) {
		free(text);
		return http_reply_status(req, 500, NULL, "out of memory");
	}
	r = MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE);
	if (!r) {
		free(text);
		return http_reply_status(req, 500, NULL, "out of memory");
	}
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, METRICS_CONTENT_TYPE);
	ret = http_reply_response(req, 200, r);
	MHD_destroy_response(r);
	return ret;
}
