/* SPDX-License-Identifier: MIT */
#include "router.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "basic/cleanup.h"

/* '*' in a pattern is one id segment, the first the workspace (or the worker), the second the
 * run (or the service, terminal or secret); '@' is an image digest segment; a final '+' is
 * the rest of the path, at least one character. The Allow value names HEAD after GET:
 * every GET route serves HEAD (router_match()). */
struct route {
	const char *pattern;
	const char *allow;
	struct {
		const char *method;
		enum endpoint endpoint;
	} methods[5];
};

static const struct route routes[] = {
	{ "/v1/ready", "GET, HEAD", { { "GET", EP_READY } } },
	{ "/metrics", "GET, HEAD", { { "GET", EP_METRICS } } },
	{ "/v1/openapi.json", "GET, HEAD", { { "GET", EP_OPENAPI } } },
	{ "/v1/worker", "GET, HEAD", { { "GET", EP_WORKER } } },
	{ "/v1/worker/usage", "GET, HEAD", { { "GET", EP_WORKER_USAGE } } },
	{ "/v1/events", "GET, HEAD", { { "GET", EP_EVENTS } } },
	{ "/v1/workers", "GET, HEAD", { { "GET", EP_WORKERS } } },
	{ "/v1/workers/*/v1/+",
	  "GET, HEAD, POST, PUT, PATCH, DELETE",
	  { { "GET", EP_WORKER_FORWARD_GET },
	    { "POST", EP_WORKER_FORWARD_POST },
	    { "PUT", EP_WORKER_FORWARD_PUT },
	    { "PATCH", EP_WORKER_FORWARD_PATCH },
	    { "DELETE", EP_WORKER_FORWARD_DELETE } } },
	{ "/v1/tokens",
	  "GET, HEAD, POST",
	  { { "GET", EP_TOKEN_LIST }, { "POST", EP_TOKEN_CREATE } } },
	{ "/v1/tokens/*",
	  "GET, HEAD, DELETE",
	  { { "GET", EP_TOKEN_GET }, { "DELETE", EP_TOKEN_REVOKE } } },
	{ "/v1/audit", "GET, HEAD", { { "GET", EP_AUDIT_LIST } } },
	{ "/v1/workspaces",
	  "GET, HEAD, POST",
	  { { "GET", EP_WORKSPACE_LIST }, { "POST", EP_WORKSPACE_CREATE } } },
	{ "/v1/workspaces/*",
	  "GET, HEAD, PATCH, DELETE",
	  { { "GET", EP_WORKSPACE_GET },
	    { "PATCH", EP_WORKSPACE_UPDATE },
	    { "DELETE", EP_WORKSPACE_DELETE } } },
	{ "/v1/workspaces/*/restart", "POST", { { "POST", EP_WORKSPACE_RESTART } } },
	{ "/v1/workspaces/*/pause", "POST", { { "POST", EP_WORKSPACE_PAUSE } } },
	{ "/v1/workspaces/*/resume", "POST", { { "POST", EP_WORKSPACE_RESUME } } },
	{ "/v1/workspaces/*/snapshots", "POST", { { "POST", EP_SNAPSHOT_CREATE } } },
	{ "/v1/workspaces/*/fork", "POST", { { "POST", EP_WORKSPACE_FORK } } },
	{ "/v1/snapshots", "GET, HEAD", { { "GET", EP_SNAPSHOT_LIST } } },
	{ "/v1/snapshots/*",
	  "GET, HEAD, DELETE",
	  { { "GET", EP_SNAPSHOT_GET }, { "DELETE", EP_SNAPSHOT_DELETE } } },
	{ "/v1/workspaces/*/network",
	  "GET, HEAD, PUT",
	  { { "GET", EP_WORKSPACE_NETWORK_GET }, { "PUT", EP_WORKSPACE_NETWORK_SET } } },
	{ "/v1/workspaces/*/usage", "GET, HEAD", { { "GET", EP_WORKSPACE_USAGE } } },
	{ "/v1/workspaces/*/commands",
	  "GET, HEAD, POST",
	  { { "GET", EP_COMMAND_LIST }, { "POST", EP_COMMAND_START } } },
	{ "/v1/workspaces/*/commands/*", "GET, HEAD", { { "GET", EP_COMMAND_GET } } },
	{ "/v1/workspaces/*/commands/*/cancel", "POST", { { "POST", EP_COMMAND_CANCEL } } },
	{ "/v1/workspaces/*/commands/*/output", "GET, HEAD", { { "GET", EP_COMMAND_OUTPUT } } },
	{ "/v1/images",
	  "GET, HEAD, POST",
	  { { "GET", EP_IMAGE_LIST }, { "POST", EP_IMAGE_CREATE } } },
	{ "/v1/images/@",
	  "GET, HEAD, DELETE",
	  { { "GET", EP_IMAGE_GET }, { "DELETE", EP_IMAGE_DELETE } } },
	{ "/v1/images/@/export", "GET, HEAD", { { "GET", EP_IMAGE_EXPORT } } },
	{ "/v1/workspaces/*/services",
	  "GET, HEAD, POST",
	  { { "GET", EP_SERVICE_LIST }, { "POST", EP_SERVICE_CREATE } } },
	{ "/v1/workspaces/*/services/*",
	  "GET, HEAD, DELETE",
	  { { "GET", EP_SERVICE_GET }, { "DELETE", EP_SERVICE_DELETE } } },
	{ "/v1/workspaces/*/services/*/stop", "POST", { { "POST", EP_SERVICE_STOP } } },
	{ "/v1/workspaces/*/services/*/restart", "POST", { { "POST", EP_SERVICE_RESTART } } },
	{ "/v1/workspaces/*/services/*/logs", "GET, HEAD", { { "GET", EP_SERVICE_LOGS } } },
	{ "/v1/workspaces/*/terminals",
	  "GET, HEAD, POST",
	  { { "GET", EP_TERMINAL_LIST }, { "POST", EP_TERMINAL_CREATE } } },
	{ "/v1/workspaces/*/terminals/*",
	  "GET, HEAD, DELETE",
	  { { "GET", EP_TERMINAL_GET }, { "DELETE", EP_TERMINAL_DELETE } } },
	{ "/v1/workspaces/*/terminals/*/attach", "GET, HEAD", { { "GET", EP_TERMINAL_ATTACH } } },
	{ "/v1/workspaces/*/terminals/*/resize", "POST", { { "POST", EP_TERMINAL_RESIZE } } },
	{ "/v1/workspaces/*/ports",
	  "GET, HEAD, POST",
	  { { "GET", EP_PORT_LIST }, { "POST", EP_PORT_EXPOSE } } },
	{ "/v1/workspaces/*/ports/*", "DELETE", { { "DELETE", EP_PORT_REVOKE } } },
	{ "/v1/workspaces/*/secrets", "GET, HEAD", { { "GET", EP_SECRET_LIST } } },
	{ "/v1/workspaces/*/secrets/*",
	  "GET, HEAD, PUT, DELETE",
	  { { "GET", EP_SECRET_GET }, { "PUT", EP_SECRET_PUT }, { "DELETE", EP_SECRET_DELETE } } },
	{ "/v1/workspaces/*/files",
	  "GET, HEAD, PUT, DELETE",
	  { { "GET", EP_FILE_READ }, { "PUT", EP_FILE_WRITE }, { "DELETE", EP_FILE_DELETE } } },
	{ "/v1/workspaces/*/files/stat", "GET, HEAD", { { "GET", EP_FILE_STAT } } },
	{ "/v1/workspaces/*/files/list", "GET, HEAD", { { "GET", EP_FILE_LIST } } },
	{ "/v1/workspaces/*/files/mkdir", "POST", { { "POST", EP_FILE_MKDIR } } },
	{ "/v1/workspaces/*/files/rename", "POST", { { "POST", EP_FILE_RENAME } } },
	{ "/v1/workspaces/*/files/watch", "GET, HEAD", { { "GET", EP_FILE_WATCH } } },
	{ "/v1/workspaces/*/contexts",
	  "GET, HEAD, POST",
	  { { "GET", EP_CONTEXT_LIST }, { "POST", EP_CONTEXT_CREATE } } },
	{ "/v1/workspaces/*/contexts/*",
	  "GET, HEAD, DELETE",
	  { { "GET", EP_CONTEXT_GET }, { "DELETE", EP_CONTEXT_DELETE } } },
	{ "/v1/workspaces/*/contexts/*/restart", "POST", { { "POST", EP_CONTEXT_RESTART } } },
	{ "/v1/workspaces/*/contexts/*/interrupt", "POST", { { "POST", EP_CONTEXT_INTERRUPT } } },
	{ "/v1/workspaces/*/contexts/*/execute", "POST", { { "POST", EP_CONTEXT_EXECUTE } } },
	{ "/v1/workspaces/*/contexts/*/executions", "GET, HEAD", { { "GET", EP_EXECUTION_LIST } } },
	{ "/v1/workspaces/*/contexts/*/executions/*", "GET, HEAD", { { "GET", EP_EXECUTION_GET } } },
	{ "/v1/workspaces/*/contexts/*/executions/*/output",
	  "GET, HEAD",
	  { { "GET", EP_EXECUTION_OUTPUT } } },
};

static const char *const endpoint_names[_EP_MAX] = {
	[EP_READY] = "ready",
	[EP_METRICS] = "metrics",
	[EP_TOKEN_LIST] = "token-list",
	[EP_TOKEN_CREATE] = "token-create",
	[EP_TOKEN_GET] = "token-get",
	[EP_TOKEN_REVOKE] = "token-revoke",
	[EP_AUDIT_LIST] = "audit-list",
	[EP_OPENAPI] = "openapi",
	[EP_WORKER] = "worker",
	[EP_WORKER_USAGE] = "worker-usage",
	[EP_WORKSPACE_LIST] = "workspace-list",
	[EP_WORKSPACE_CREATE] = "workspace-create",
	[EP_WORKSPACE_GET] = "workspace-get",
	[EP_WORKSPACE_DELETE] = "workspace-delete",
	[EP_WORKSPACE_UPDATE] = "workspace-update",
	[EP_WORKSPACE_RESTART] = "workspace-restart",
	[EP_WORKSPACE_PAUSE] = "workspace-pause",
	[EP_WORKSPACE_RESUME] = "workspace-resume",
	[EP_WORKSPACE_NETWORK_GET] = "workspace-network-get",
	[EP_WORKSPACE_NETWORK_SET] = "workspace-network-set",
	[EP_WORKSPACE_USAGE] = "workspace-usage",
	[EP_COMMAND_LIST] = "command-list",
	[EP_COMMAND_START] = "command-start",
	[EP_COMMAND_GET] = "command-get",
	[EP_COMMAND_CANCEL] = "command-cancel",
	[EP_COMMAND_OUTPUT] = "command-output",
	[EP_IMAGE_LIST] = "image-list",
	[EP_IMAGE_CREATE] = "image-create",
	[EP_IMAGE_GET] = "image-get",
	[EP_IMAGE_DELETE] = "image-delete",
	[EP_IMAGE_EXPORT] = "image-export",
	[EP_SERVICE_LIST] = "service-list",
	[EP_SERVICE_CREATE] = "service-create",
	[EP_SERVICE_GET] = "service-get",
	[EP_SERVICE_DELETE] = "service-delete",
	[EP_SERVICE_STOP] = "service-stop",
	[EP_SERVICE_RESTART] = "service-restart",
	[EP_SERVICE_LOGS] = "service-logs",
	[EP_TERMINAL_LIST] = "terminal-list",
	[EP_TERMINAL_CREATE] = "terminal-create",
	[EP_TERMINAL_GET] = "terminal-get",
	[EP_TERMINAL_DELETE] = "terminal-delete",
	[EP_TERMINAL_ATTACH] = "terminal-attach",
	[EP_TERMINAL_RESIZE] = "terminal-resize",
	[EP_PORT_LIST] = "port-list",
	[EP_PORT_EXPOSE] = "port-expose",
	[EP_PORT_REVOKE] = "port-revoke",
	[EP_SNAPSHOT_CREATE] = "snapshot-create",
	[EP_SNAPSHOT_LIST] = "snapshot-list",
	[EP_SNAPSHOT_GET] = "snapshot-get",
	[EP_SNAPSHOT_DELETE] = "snapshot-delete",
	[EP_WORKSPACE_FORK] = "workspace-fork",
	[EP_SECRET_LIST] = "secret-list",
	[EP_SECRET_GET] = "secret-get",
	[EP_SECRET_PUT] = "secret-put",
	[EP_SECRET_DELETE] = "secret-delete",
	[EP_FILE_STAT] = "file-stat",
	[EP_FILE_LIST] = "file-list",
	[EP_FILE_READ] = "file-read",
	[EP_FILE_WRITE] = "file-write",
	[EP_FILE_DELETE] = "file-delete",
	[EP_FILE_MKDIR] = "file-mkdir",
	[EP_FILE_RENAME] = "file-rename",
	[EP_FILE_WATCH] = "file-watch",
	[EP_EVENTS] = "events",
	[EP_WORKERS] = "workers",
	[EP_WORKER_FORWARD_GET] = "worker-forward-get",
	[EP_WORKER_FORWARD_POST] = "worker-forward-post",
	[EP_WORKER_FORWARD_PUT] = "worker-forward-put",
	[EP_WORKER_FORWARD_PATCH] = "worker-forward-patch",
	[EP_WORKER_FORWARD_DELETE] = "worker-forward-delete",
	[EP_CONTEXT_LIST] = "context-list",
	[EP_CONTEXT_CREATE] = "context-create",
	[EP_CONTEXT_GET] = "context-get",
	[EP_CONTEXT_DELETE] = "context-delete",
	[EP_CONTEXT_RESTART] = "context-restart",
	[EP_CONTEXT_INTERRUPT] = "context-interrupt",
	[EP_CONTEXT_EXECUTE] = "context-execute",
	[EP_EXECUTION_LIST] = "execution-list",
	[EP_EXECUTION_GET] = "execution-get",
	[EP_EXECUTION_OUTPUT] = "execution-output",
};

const char *endpoint_to_string(enum endpoint ep)
{
	if ((unsigned)ep >= _EP_MAX)
		return NULL;
	return endpoint_names[ep];
}

static bool id_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '-' || c == '_' || c == '.';
}

/* Copies the id segment at *path into ret and advances *path past it. */
static bool take_id(const char **path, char ret[ROUTE_ID_MAX + 1])
{
	const char *p = *path;
	size_t n = 0;

	if (*p == '.')
		return false;
	while (p[n] && p[n] != '/') {
		if (!id_char(p[n]) || n >= ROUTE_ID_MAX)
			return false;
		n++;
	}
	if (n == 0)
		return false;
	memcpy(ret, p, n);
	ret[n] = '\0';
	*path = p + n;
	return true;
}

/* Copies the digest segment at *path ("sha256:" and 64 lower-case hex) into ret and advances
 * *path past it. */
static bool take_digest(const char **path, char ret[ROUTE_IMAGE_MAX + 1])
{
	static const char prefix[] = "sha256:";
	const char *p = *path;
	size_t n = strlen(prefix);

	if (strncmp(p, prefix, n) != 0)
		return false;
	for (; n < ROUTE_IMAGE_MAX; n++)
		if (!((p[n] >= '0' && p[n] <= '9') || (p[n] >= 'a' && p[n] <= 'f')))
			return false;
	if (p[n] != '\0' && p[n] != '/')
		return false;
	memcpy(ret, p, n);
	ret[n] = '\0';
	*path = p + n;
	return true;
}

static bool match_pattern(const char *pattern, const char *path, struct route_match *ret)
{
	char *ids[] = { ret->ws_id, ret->run_id, ret->sub_id };
	size_t n_ids = 0;

	ret->ws_id[0] = ret->run_id[0] = ret->sub_id[0] = ret->image[0] = '\0';
	while (*pattern) {
		if (*pattern == '@') {
			if (!take_digest(&path, ret->image))
				return false;
			pattern++;
			continue;
		}
		if (*pattern == '+')
			return *path != '\0';
		if (*pattern == '*') {
			if (n_ids >= ELEMENTSOF(ids) || !take_id(&path, ids[n_ids++]))
				return false;
			pattern++;
			continue;
		}
		if (*pattern++ != *path++)
			return false;
	}
	return *path == '\0';
}

const char *endpoint_route(enum endpoint ep)
{
	for (size_t i = 0; i < ELEMENTSOF(routes); i++)
		for (size_t j = 0; j < ELEMENTSOF(routes[i].methods) && routes[i].methods[j].method;
		     j++)
			if (routes[i].methods[j].endpoint == ep)
				return routes[i].pattern;
	return "-";
}

void router_foreach(router_route_fn fn, void *userdata)
{
	for (size_t i = 0; i < ELEMENTSOF(routes); i++)
		for (size_t j = 0; j < ELEMENTSOF(routes[i].methods) && routes[i].methods[j].method;
		     j++)
			fn(routes[i].pattern, routes[i].methods[j].method,
			   routes[i].methods[j].endpoint, userdata);
}

/* HEAD is served wherever GET is, by GET's endpoint (RFC 9110 9.3.2): the HTTP layer sends
 * GET's status and headers without the body. */
static bool method_serves(const char *route_method, const char *method)
{
	return strcmp(method, route_method) == 0 ||
	       (strcmp(method, "HEAD") == 0 && strcmp(route_method, "GET") == 0);
}

int router_match(const char *method, const char *path, struct route_match *ret,
		 const char **ret_allow)
{
	struct route_match m;

	for (size_t i = 0; i < ELEMENTSOF(routes); i++) {
		const struct route *r = &routes[i];

		if (!match_pattern(r->pattern, path, &m))
			continue;
		for (size_t j = 0; j < ELEMENTSOF(r->methods) && r->methods[j].method; j++)
			if (method_serves(r->methods[j].method, method)) {
				m.endpoint = r->methods[j].endpoint;
				*ret = m;
				return 1;
			}
		*ret_allow = r->allow;
		return 0;
	}
	return -ENOENT;
}
