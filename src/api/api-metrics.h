/* SPDX-License-Identifier: MIT */
#pragma once

/* What the HTTP layer counts for GET /metrics (api-metrics.c): requests and their durations
 * by route template and method (never by path: ids stay out of the labels), and the
 * WebSockets open. One per controller, shared by its listeners (http_config.metrics); bumped
 * on the loop. */

#include <stdint.h>

#include "api/router.h"
#include "basic/metrics.h"

/* Beyond the router's endpoints: POST /mcp, and requests that matched no route (refused
 * before routing: 400, 401, 404, 405). */
#define API_METRICS_MCP _EP_MAX
#define API_METRICS_UNROUTED (_EP_MAX + 1)
#define API_METRICS_ROUTES (_EP_MAX + 2)
/* Status classes 1xx to 5xx, and [0] for no answer (the client went away first). */
#define API_METRICS_CLASSES 6

struct api_metrics {
	uint64_t requests[API_METRICS_ROUTES][API_METRICS_CLASSES];
	struct metrics_histogram duration[API_METRICS_ROUTES];
	const char *method[API_METRICS_ROUTES]; /* the last seen for the unrouted (static) */
	unsigned websockets;			/* upgraded or upgrading, every listener's */
};

/* A request ended: route is an enum endpoint or API_METRICS_MCP / API_METRICS_UNROUTED,
 * status 0 when nothing was answered. */
void api_metrics_request(struct api_metrics *am, unsigned route, unsigned status,
			 uint64_t duration_usec);

/* "/v1/workspaces/{id}/commands/{name}" of the router's pattern (or "/mcp", "unrouted"). */
void api_metrics_route_template(unsigned route, char *buf, size_t size);
