/* SPDX-License-Identifier: MIT */
/* Pause and resume, snapshots and fork (docs/api.md, "Pause and resume", "Snapshots and
 * fork"). */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
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

/* Newest first, as each worker lists its own: createdAt is RFC 3339 UTC of one width. */
static int snapshot_newer_first(const void *a, const void *b)
{
	const char *x = json_string_value(json_object_get(*(json_t *const *)a, "createdAt"));
	const char *y = json_string_value(json_object_get(*(json_t *const *)b, "createdAt"));

	return strcmp(y ? y : "", x ? x : "");
}

int station_snapshot_list_all(struct station_client *c, json_t **ret)
{
	_cleanup_json_ json_t *doc = NULL, *list = NULL;
	_cleanup_free_ json_t **v = NULL;
	json_t *sorted, *s;
	size_t i, n;
	int r = client_snapshot_list_all(c, &doc);

	if (r < 0)
		return r;
	list = json_incref(json_object_get(doc, "snapshots"));
	n = json_array_size(list);
	v = calloc(n + 1, sizeof *v);
	sorted = json_array();
	if (!v || !sorted || json_object_set_new(doc, "snapshots", sorted) < 0)
		return client_error(c, -ENOMEM, "out of memory");
	json_array_foreach(list, i, s)
		v[i] = s;
	qsort(v, n, sizeof *v, snapshot_newer_first);
	for (i = 0; i < n; i++)
		json_array_append(sorted, v[i]);
	*ret = TAKE_PTR(doc);
	return 0;
}

int station_snapshot_list(struct station_client *c, json_t **ret)
{
	_cleanup_json_ json_t *all = NULL;
	json_t *u;
	int r = station_snapshot_list_all(c, &all);

	if (r < 0)
		return r;
	u = json_array_get(json_object_get(all, "unreachable"), 0);
	if (u)
		return client_error(c, -EHOSTUNREACH, "%s",
				    json_string_value(json_object_get(u, "error")) ?: "?");
	*ret = json_incref(json_object_get(all, "snapshots"));
	return 0;
}

/* "/v1/snapshots/{id}", on the worker id names. */
static int snapshot_path(struct station_client **c, const char *id, char **ret)
{
	int r = client_route_snapshot(c, id);

	if (r < 0)
		return r;
	if (asprintf(ret, "/v1/snapshots/%s", id) < 0)
		return client_error(*c, -ENOMEM, "out of memory");
	return 0;
}

int station_snapshot_get(struct station_client *c, const char *id, json_t **ret)
{
	_cleanup_free_ char *path = NULL;
	int r = snapshot_path(&c, id, &path);

	if (r < 0)
		return r;
	return station_request_json(c, "GET", path, NULL, ret);
}

int station_snapshot_delete(struct station_client *c, const char *id)
{
	_cleanup_free_ char *path = NULL;
	int r = snapshot_path(&c, id, &path);

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
