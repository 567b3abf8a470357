/* SPDX-License-Identifier: MIT */
/* Names and labels (docs/api.md, "Names and labels"): a workspace's name, unique among its
 * tenant's workspaces on this worker, and its labels; what a list filters on and what a
 * request path may name a workspace by. The row holds both (name, labels_json); the labels are
 * read from their JSON text when asked, which keeps one copy of them. */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "basic/util.h"
#include "domain/labels.h"
#include "event/event.h"
#include "manager-internal.h"

static const char *tenant_of(const struct workspace *ws)
{
	return ws->row.tenant ? ws->row.tenant : "";
}

/* tenant's workspace (pool members are none's) called name, other than except; NULL when none. */
static struct workspace *name_holder(struct manager *m, const char *tenant, const char *name,
				     const struct workspace *except)
{
	for (struct workspace *ws = m->workspaces; ws; ws = ws->next)
		if (ws != except && !ws->pool && ws->row.name && strcmp(ws->row.name, name) == 0 &&
		    strcmp(tenant_of(ws), tenant ? tenant : "") == 0)
			return ws;
	return NULL;
}

int workspace_name_free_check(struct manager *m, const char *tenant, const char *name,
			      const struct workspace *except, struct station_error *e)
{
	struct workspace *holder = name ? name_holder(m, tenant, name, except) : NULL;

	if (!holder)
		return 0;
	return station_error_set(e, -EBUSY, "name", "name \"%s\" is taken by workspace \"%s\"",
				 name, holder->row.id);
}

/* The stored form: compact, keys sorted; NULL for none. */
static int labels_text(json_t *labels, char **ret)
{
	char *s = NULL;

	if (labels && json_object_size(labels) > 0) {
		s = json_dumps(labels, JSON_COMPACT | JSON_SORT_KEYS);
		if (!s)
			return -ENOMEM;
	}
	*ret = s;
	return 0;
}

int workspace_row_set_labels(struct workspace_row *row, const char *name, json_t *labels)
{
	char *n = NULL, *l = NULL;

	if (name && !(n = strdup(name)))
		return -ENOMEM;
	if (labels_text(labels, &l) < 0) {
		free(n);
		return -ENOMEM;
	}
	free(row->name);
	row->name = n;
	free(row->labels_json);
	row->labels_json = l;
	return 0;
}

/* The labels as an object (a new reference; {} when none or unreadable). */
static json_t *labels_of(const struct workspace *ws)
{
	json_t *o = ws->row.labels_json ? json_loads(ws->row.labels_json, 0, NULL) : NULL;

	if (json_is_object(o))
		return o;
	json_decref(o);
	return json_object();
}

void workspace_labels_json(const struct workspace *ws, json_t *o)
{
	json_object_set_new(o, "name", ws->row.name ? json_string(ws->row.name) : json_null());
	json_object_set_new(o, "labels", labels_of(ws));
}

/* The bounds that hold for the whole set (each pair was checked as it came). */
static int labels_bounds_check(json_t *labels, struct station_error *e)
{
	size_t bytes = 0;
	const char *key;
	json_t *v;

	if (json_object_size(labels) > LABELS_MAX)
		return station_error_set(e, -EINVAL, "labels", "%zu labels: at most %d",
					 json_object_size(labels), LABELS_MAX);
	json_object_foreach(labels, key, v)
		bytes += strlen(key) + json_string_length(v);
	if (bytes > LABELS_BYTES_MAX)
		return station_error_set(e, -EINVAL, "labels",
					 "labels of %zu bytes (keys and values): at most %d", bytes,
					 LABELS_BYTES_MAX);
	return 0;
}

static int labels_merge(const struct workspace *ws, bool clear, json_t *patch, json_t **ret,
			struct station_error *e)
{
	json_t *merged = clear ? json_object() : labels_of(ws);
	const char *key;
	json_t *v;

	if (!merged)
		return station_error_set(e, -ENOMEM, NULL, "out of memory");
	json_object_foreach(patch, key, v) {
		if (json_is_null(v))
			json_object_del(merged, key);
		else
			json_object_set(merged, key, v);
	}
	int r = labels_bounds_check(merged, e);
	if (r < 0) {
		json_decref(merged);
		return r;
	}
	*ret = merged;
	return 0;
}

int manager_workspace_update(struct manager *m, const char *id, bool name_set, const char *name,
			     bool labels_clear, json_t *labels, json_t **ret,
			     struct station_error *e)
{
	struct workspace *ws = NULL;
	json_t *merged = NULL;
	int r = workspace_lookup(m, id, &ws, e);

	if (r >= 0 && name_set)
		r = workspace_name_free_check(m, tenant_of(ws), name, ws, e);
	if (r >= 0)
		r = labels_merge(ws, labels_clear, labels, &merged, e);
	if (r < 0)
		return r;
	struct workspace_row row = { 0 };
	r = workspace_row_set_labels(&row, name_set ? name : ws->row.name, merged);
	json_decref(merged);
	if (r < 0)
		return station_error_set(e, r, NULL, "out of memory");
	/* the row as it would be, written first: memory changes only once it is stored */
	struct workspace_row next = ws->row;
	next.name = row.name;
	next.labels_json = row.labels_json;
	next.updated_at = realtime_usec();
	r = store_workspace_update(m->store, &next);
	if (r < 0) {
		workspace_row_free(&row);
		if (r == -EEXIST)
			return station_error_set(e, -EBUSY, "name", "name \"%s\" is taken", name);
		return station_error_set(e, r, NULL, "cannot record the workspace: %s",
					 strerror(-r));
	}
	free(ws->row.name);
	free(ws->row.labels_json);
	ws->row.name = row.name;
	ws->row.labels_json = row.labels_json;
	ws->row.updated_at = next.updated_at;
	workspace_event(ws, MANAGER_EVENT_WORKSPACE, "updated", ws->row.id,
			workspace_state_to_string(ws->row.state), NULL);
	*ret = workspace_to_json(ws);
	return 0;
}

/* "KEY=VALUE": the labels have KEY with VALUE; "KEY": they have KEY. */
static bool label_selected(json_t *labels, const char *selector)
{
	const char *eq = strchr(selector, '=');
	char key[LABEL_KEY_MAX + 1];
	size_t n = eq ? (size_t)(eq - selector) : strlen(selector);
	json_t *v;

	if (n > LABEL_KEY_MAX)
		return false;
	memcpy(key, selector, n);
	key[n] = '\0';
	v = json_object_get(labels, key);
	return v && (!eq || strcmp(json_string_value(v), eq + 1) == 0);
}

static bool workspace_selected(const struct workspace *ws, const struct workspace_filter *f)
{
	bool ok = true;

	if (f->name && (!ws->row.name || strcmp(ws->row.name, f->name) != 0))
		return false;
	if (f->state && strcmp(workspace_state_to_string(ws->row.state), f->state) != 0)
		return false;
	if (!f->labels || !f->labels[0])
		return true;
	json_t *labels = labels_of(ws);
	for (const char *const *l = f->labels; *l && ok; l++)
		ok = label_selected(labels, *l);
	json_decref(labels);
	return ok;
}

int manager_workspace_list(struct manager *m, const struct workspace_filter *f, json_t **ret,
			   struct station_error *e)
{
	json_t *a = json_array();

	if (!a)
		return station_error_set(e, -ENOMEM, NULL, "out of memory");
	for (struct workspace *ws = m->workspaces; ws; ws = ws->next)
		if (!ws->pool && workspace_visible(m, ws) && (!f || workspace_selected(ws, f)))
			json_array_append_new(a, workspace_to_json(ws));
	*ret = json_pack("{s:o}", "workspaces", a);
	return *ret ? 0 : station_error_set(e, -ENOMEM, NULL, "out of memory");
}

int manager_workspace_resolve(struct manager *m, const char *tenant, const char *name, char *ret,
			      size_t size)
{
	struct workspace *ws = name_holder(m, tenant, name, NULL);

	if (!ws || strlen(ws->row.id) >= size)
		return -ENOENT;
	memcpy(ret, ws->row.id, strlen(ws->row.id) + 1);
	return 0;
}
