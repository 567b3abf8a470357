/* SPDX-License-Identifier: MIT */
#pragma once

/* Maps a request's method and path to one endpoint of docs/api.md and captures the ids in the
 * path. Pure string work: no MHD, no manager, so it is unit-tested on its own. An id segment is
 * 1-64 characters of [A-Za-z0-9._-] not starting with '.'; anything else cannot name a
 * workspace or a run and is an unknown path. An image segment is a digest, "sha256:" and 64
 * lower-case hex digits. A final '+' segment (the forwarding route) is one or more characters
 * of anything; the caller takes it from the path. */

#include <stddef.h>

#define ROUTE_ID_MAX 64
#define ROUTE_IMAGE_MAX 71 /* "sha256:" + 64 hex */

enum endpoint {
	EP_READY,
	EP_OPENAPI,
	EP_WORKER,
	EP_WORKSPACE_LIST,
	EP_WORKSPACE_CREATE,
	EP_WORKSPACE_GET,
	EP_WORKSPACE_DELETE,
	EP_WORKSPACE_UPDATE,
	EP_WORKSPACE_RESTART,
	EP_WORKSPACE_PAUSE,
	EP_WORKSPACE_RESUME,
	EP_WORKSPACE_NETWORK_GET,
	EP_WORKSPACE_NETWORK_SET,
	EP_WORKSPACE_USAGE,
	EP_COMMAND_LIST,
	EP_COMMAND_START,
	EP_COMMAND_GET,
	EP_COMMAND_CANCEL,
	EP_COMMAND_OUTPUT,
	EP_IMAGE_LIST,
	EP_IMAGE_CREATE,
	EP_IMAGE_GET,
	EP_IMAGE_DELETE,
	EP_SERVICE_LIST,
	EP_SERVICE_CREATE,
	EP_SERVICE_GET,
	EP_SERVICE_DELETE,
	EP_SERVICE_STOP,
	EP_SERVICE_RESTART,
	EP_SERVICE_LOGS,
	EP_TERMINAL_LIST,
	EP_TERMINAL_CREATE,
	EP_TERMINAL_GET,
	EP_TERMINAL_DELETE,
	EP_TERMINAL_ATTACH,
	EP_TERMINAL_RESIZE,
	EP_SECRET_LIST,
	EP_SECRET_GET,
	EP_SECRET_PUT,
	EP_SECRET_DELETE,
	EP_FILE_STAT,
	EP_FILE_LIST,
	EP_FILE_READ,
	EP_FILE_WRITE,
	EP_FILE_DELETE,
	EP_FILE_MKDIR,
	EP_FILE_RENAME,
	EP_FILE_WATCH,
	EP_EVENTS,
	EP_WORKERS,
	EP_WORKER_FORWARD_GET, /* /v1/workers/NAME/v1/..., one per method passed on */
	EP_WORKER_FORWARD_POST,
	EP_WORKER_FORWARD_PUT,
	EP_WORKER_FORWARD_PATCH,
	EP_WORKER_FORWARD_DELETE,
	EP_TOKEN_LIST,
	EP_TOKEN_CREATE,
	EP_TOKEN_GET,
	EP_TOKEN_REVOKE,
	EP_AUDIT_LIST,
	EP_PORT_LIST,
	EP_PORT_EXPOSE,
	EP_PORT_REVOKE,
	EP_SNAPSHOT_CREATE, /* api-snapshots.c */
	EP_SNAPSHOT_LIST,
	EP_SNAPSHOT_GET,
	EP_SNAPSHOT_DELETE,
	EP_WORKSPACE_FORK,
	EP_IMAGE_EXPORT, /* api-images.c */
	EP_METRICS,	 /* api-metrics.c */
	EP_WORKER_USAGE, /* api-usage.c */
	EP_CONTEXT_LIST, /* api-contexts.c */
	EP_CONTEXT_CREATE,
	EP_CONTEXT_GET,
	EP_CONTEXT_DELETE,
	EP_CONTEXT_RESTART,
	EP_CONTEXT_INTERRUPT,
	EP_CONTEXT_EXECUTE,
	EP_EXECUTION_LIST,
	EP_EXECUTION_GET,
	EP_EXECUTION_OUTPUT,
	_EP_MAX,
};

struct route_match {
	enum endpoint endpoint;
	char ws_id[ROUTE_ID_MAX + 1];	 /* "" when the path has none */
	char run_id[ROUTE_ID_MAX + 1];	 /* the run, the service name, the terminal or the secret */
	char sub_id[ROUTE_ID_MAX + 1];	 /* a third id: an execution of a context */
	char image[ROUTE_IMAGE_MAX + 1]; /* "" when the path has none */
};

/* Returns 1 with *ret filled when method and path name an endpoint; 0 when the path is known
 * but the method is not, with *ret_allow set to the value of the Allow header ("GET, HEAD,
 * POST"); -ENOENT when no endpoint has this path. HEAD matches wherever GET does, with GET's
 * endpoint: the caller answers it as GET without the body. */
int router_match(const char *method, const char *path, struct route_match *ret,
		 const char **ret_allow);

const char *endpoint_to_string(enum endpoint ep);
/* The pattern of the route that serves ep (as in the table: an id is a star), for the audit
 * log. */
const char *endpoint_route(enum endpoint ep);

/* Calls fn once per method of every route, in table order: the pattern as above ('*' an id
 * segment, '@' a digest segment, '+' the rest), the method and its endpoint. For the test that holds
 * docs/openapi.yaml to this table. */
typedef void (*router_route_fn)(const char *pattern, const char *method, enum endpoint ep,
				void *userdata);
void router_foreach(router_route_fn fn, void *userdata);
