/* SPDX-License-Identifier: MIT */
/* Pause and resume, snapshots and fork (docs/api.md, "Pause and resume", "Snapshots and
 * fork"). */

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "basic/cleanup.h"
#include "client-internal.h"

static int workspace_post(struct station_client *c, const char *ws, const char *suffix,
			  json_t **ret)
{
	_cleanup_free_ char *path = NULL;
	int r;

	CLIENT_ROUTE(c, ws);
	r = client_path(c, ws, NULL, suffix, &path);
	if (r < 0)
		return r;
	return station_request_json(c, "POST", path, NULL, ret);
}

int station_workspace_pause(struct station_client *c, const char *ws, json_t **ret)
{
	return workspace_post(c, ws, "/pause", ret);
}

int station_workspace_resume(struct station_client *c, const char *ws, json_t **ret)
{
	return workspace_post(c, ws, "/resume", ret);
}

/* Printable ASCII or any UTF-8 beyond it, no control characters: what the controller takes. */
static bool snapshot_name_valid(const char *name)
{
	size_t n = strlen(name);

	if (n == 0 || n > STATION_SNAPSHOT_NAME_MAX)
		return false;
	for (const unsigned char *p = (const unsigned char *)name; *p; p++)
		if (*p < 0x20 || *p == 0x7f)
			return false;
	return true;
}

int station_snapshot_create(struct station_client *c, const char *ws,
			    const struct station_snapshot_options *opts, json_t **ret)
{
	static const struct station_snapshot_options none = {};
	const struct station_snapshot_options *o = opts ? opts : &none;
	_cleanup_json_ json_t *body = NULL;
	_cleanup_free_ char *path = NULL;
	int r;

	CLIENT_ROUTE(c, ws);
	if (o->name && !snapshot_name_valid(o->name))
		return client_error(c, -EINVAL,
				    "invalid snapshot name '%.200s' (want 1 to %d characters, no "
				    "control characters)",
				    o->name, STATION_SNAPSHOT_NAME_MAX);
	body = json_pack("{s:b}", "memory", o->memory);
	if (!body)
		return client_error(c, -ENOMEM, "out of memory");
	r = client_put_string(c, body, "name", o->name);
	if (r >= 0)
		r = client_path(c, ws, NULL, "/snapshots", &path);
	if (r < 0)
		return r;
	return client_create(c, path, body, NULL, ret);
}

int station_snapshot_list(struct station_client *c, json_t **ret)
{
	_cleanup_json_ json_t *doc = NULL;
	json_t *list;
	int r;

	r = station_request_json(c, "GET", "/v1/snapshots", NULL, &doc);
	if (r < 0)
		return r;
	list = json_object_get(doc, "snapshots");
	if (!json_is_array(list))
		return client_error(c, -EPROTO, "%s answered without \"snapshots\"",
				    station_client_endpoint(c));
	*ret = json_incref(list);
	return 0;
}

/* "/v1/snapshots/{id}": ids go into the URL as they are, so [A-Za-z0-9_-] only. */
static int snapshot_path(struct station_client *c, const char *id, char **ret)
{
	size_t n = id ? strlen(id) : 0;

	if (n == 0 || n > 128 ||
	    strspn(id, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") != n)
		return client_error(c, -EINVAL, "invalid snapshot id '%.128s'", id ? id : "");
	if (asprintf(ret, "/v1/snapshots/%s", id) < 0)
		return client_error(c, -ENOMEM, "out of memory");
	return 0;
}

int station_snapshot_get(struct station_client *c, const char *id, json_t **ret)
{
	_cleanup_free_ char *path = NULL;
	int r = snapshot_path(c, id, &path);

	if (r < 0)
		return r;
	return station_request_json(c, "GET", path, NULL, ret);
}

int station_snapshot_delete(struct station_client *c, const char *id)
{
	_cleanup_free_ char *path = NULL;
	int r = snapshot_path(c, id, &path);

	if (r < 0)
		return r;
	return station_request_json(c, "DELETE", path, NULL, NULL);
}

int station_workspace_fork(struct station_client *c, const char *ws, unsigned count, json_t **ret)
{
	_cleanup_json_ json_t *body = NULL, *doc = NULL;
	_cleanup_free_ char *path = NULL;
	int r;

	CLIENT_ROUTE(c, ws);
	if (count < 1 || count > STATION_FORK_MAX)
		return client_error(c, -EINVAL, "invalid fork count %u (want 1-%d)", count,
				    STATION_FORK_MAX);
	body = json_pack("{s:I}", "count", (json_int_t)count);
	if (!body)
		return client_error(c, -ENOMEM, "out of memory");
	r = client_path(c, ws, NULL, "/fork", &path);
	if (r >= 0)
		r = client_create(c, path, body, NULL, &doc);
	if (r < 0)
		return r;
	if (!json_is_array(json_object_get(doc, "workspaces")))
		return client_error(c, -EPROTO, "%s answered a fork without \"workspaces\"",
				    station_client_endpoint(c));
	if (ret)
		*ret = TAKE_PTR(doc);
	return 0;
}
