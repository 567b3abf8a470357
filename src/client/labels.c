/* SPDX-License-Identifier: MIT */
/* Names and labels (docs/api.md, "Names and labels"): a create's, a PATCH of them, and a list
 * filtered by them on every worker. A name is routed as an id is (route.c). */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "basic/json-util.h"
#include "client-internal.h"

/* entry "KEY=VALUE" into o[KEY]; "KEY-" (when removal) sets null. */
static int label_put(struct station_client *c, json_t *o, const char *entry, bool removal)
{
	const char *eq = strchr(entry, '=');
	size_t n = strlen(entry);
	_cleanup_free_ char *key = NULL;

	if (!eq && removal && n > 1 && entry[n - 1] == '-') {
		key = strndup(entry, n - 1);
		if (!key || json_object_set_new(o, key, json_null()) < 0)
			return client_error(c, -ENOMEM, "out of memory");
		return 0;
	}
	if (!eq || eq == entry)
		return client_error(c, -EINVAL, "invalid label '%.128s' (want KEY=VALUE%s)", entry,
				    removal ? " or KEY- to remove it" : "");
	key = strndup(entry, (size_t)(eq - entry));
	if (!key || json_object_set_new(o, key, json_string(eq + 1)) < 0)
		return client_error(c, -EINVAL, "invalid label '%.128s' (not UTF-8?)", entry);
	return 0;
}

static int labels_object(struct station_client *c, char *const *labels, bool removal, json_t **ret)
{
	_cleanup_json_ json_t *o = json_object();
	int r;

	if (!o)
		return client_error(c, -ENOMEM, "out of memory");
	for (char *const *i = labels; *i; i++) {
		r = label_put(c, o, *i, removal);
		if (r < 0)
			return r;
	}
	*ret = TAKE_PTR(o);
	return 0;
}

int client_put_labels(struct station_client *c, json_t *o, const char *name, char *const *labels)
{
	json_t *l = NULL;
	int r;

	if (name && json_object_set_new(o, "name", json_string(name)) < 0)
		return client_error(c, -EINVAL, "invalid name '%.128s'", name);
	if (!labels)
		return 0;
	r = labels_object(c, labels, false, &l);
	if (r < 0)
		return r;
	return json_object_set_new(o, "labels", l) < 0 ? client_error(c, -ENOMEM, "out of memory") :
							 0;
}

/* "?k=v&…" appended to *path. */
static int query_add(struct station_client *c, char **path, const char *key, const char *value)
{
	_cleanup_free_ char *enc = client_query_encode(value);
	char *next = NULL;

	if (!enc ||
	    asprintf(&next, "%s%c%s=%s", *path, strchr(*path, '?') ? '&' : '?', key, enc) < 0)
		return client_error(c, -ENOMEM, "out of memory");
	free(*path);
	*path = next;
	return 0;
}

int station_workspace_list_where(struct station_client *c, const struct station_workspace_filter *f,
				 json_t **ret)
{
	_cleanup_free_ char *path = strdup("/v1/workspaces");
	int r = path ? 0 : client_error(c, -ENOMEM, "out of memory");

	if (r >= 0 && f && f->name)
		r = query_add(c, &path, "name", f->name);
	if (r >= 0 && f && f->state)
		r = query_add(c, &path, "state", f->state);
	for (char *const *l = f ? f->labels : NULL; r >= 0 && l && *l; l++)
		r = query_add(c, &path, "label", *l);
	if (r < 0)
		return r;
	return client_list_all(c, path, ret);
}

int station_workspace_update(struct station_client *c, const char *id,
			     const struct station_workspace_update *u, json_t **ret)
{
	_cleanup_json_ json_t *body = json_object(), *doc = NULL;
	_cleanup_free_ char *path = NULL;
	json_t *labels = NULL;
	int r;

	if (!body || !u)
		return client_error(c, body ? -EINVAL : -ENOMEM, "nothing to update");
	if (u->set_name &&
	    json_object_set_new(body, "name", u->name ? json_string(u->name) : json_null()) < 0)
		return client_error(c, -EINVAL, "invalid name '%.128s'", u->name);
	if (u->labels) {
		r = labels_object(c, u->labels, true, &labels);
		if (r < 0)
			return r;
		json_object_set_new(body, "labels", labels);
	}
	CLIENT_ROUTE(c, id);
	r = client_path(c, id, NULL, NULL, &path);
	if (r < 0)
		return r;
	r = station_request_json(c, "PATCH", path, body, &doc);
	if (r >= 0 && ret)
		*ret = TAKE_PTR(doc);
	return r;
}
