/* SPDX-License-Identifier: MIT */
/* Previews: expose, list, revoke a workspace's ports (docs/api.md, "Previews"). */

#include <errno.h>
#include <stdio.h>

#include "basic/cleanup.h"
#include "client-internal.h"

/* "/v1/workspaces/{ws}/ports[/{port}]"; port 0: the collection. */
static int port_path(struct station_client *c, const char *ws, unsigned port, char **ret)
{
	char tail[32] = "/ports";

	if (port > 0)
		snprintf(tail, sizeof(tail), "/ports/%u", port);
	return client_path(c, ws, NULL, tail, ret);
}

static int port_check(struct station_client *c, unsigned port)
{
	if (port < 1 || port > 65535)
		return client_error(c, -EINVAL, "invalid port %u (want 1-65535)", port);
	return 0;
}

int station_port_expose(struct station_client *c, const char *ws, unsigned port,
			const struct station_port_options *opts, json_t **ret)
{
	CLIENT_ROUTE(c, ws);
	static const struct station_port_options none = {};
	const struct station_port_options *o = opts ? opts : &none;
	_cleanup_json_ json_t *body = NULL;
	_cleanup_free_ char *path = NULL;
	int r;

	r = port_check(c, port);
	if (r >= 0)
		r = port_path(c, ws, 0, &path);
	if (r < 0)
		return r;
	body = json_pack("{s:I,s:s}", "port", (json_int_t)port, "access",
			 o->public ? "public" : "token");
	if (!body)
		return client_error(c, -ENOMEM, "out of memory");
	if (o->expires_in_ms > 0 &&
	    json_object_set_new(body, "expiresInMs", json_integer((json_int_t)o->expires_in_ms)) <
		    0)
		return client_error(c, -ENOMEM, "out of memory");
	return station_request_json(c, "POST", path, body, ret);
}

int station_port_list(struct station_client *c, const char *ws, json_t **ret)
{
	CLIENT_ROUTE(c, ws);
	_cleanup_json_ json_t *doc = NULL;
	_cleanup_free_ char *path = NULL;
	int r;

	r = port_path(c, ws, 0, &path);
	if (r >= 0)
		r = station_request_json(c, "GET", path, NULL, &doc);
	if (r < 0)
		return r;
	if (!json_is_array(json_object_get(doc, "exposed")) ||
	    !json_is_array(json_object_get(doc, "listening")))
		return client_error(c, -EPROTO, "%s answered without \"exposed\" and \"listening\"",
				    station_client_endpoint(c));
	*ret = TAKE_PTR(doc);
	return 0;
}

int station_port_revoke(struct station_client *c, const char *ws, unsigned port)
{
	CLIENT_ROUTE(c, ws);
	_cleanup_free_ char *path = NULL;
	int r;

	r = port_check(c, port);
	if (r >= 0)
		r = port_path(c, ws, port, &path);
	if (r < 0)
		return r;
	return station_request_json(c, "DELETE", path, NULL, NULL);
}
