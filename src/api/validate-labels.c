/* SPDX-License-Identifier: MIT */
/* Names and labels in requests (docs/api.md, "Names and labels"): the rules are
 * domain/labels.h's; here they meet JSON and the query. */
#include <errno.h>
#include <string.h>

#include "api/validate.h"
#include "domain/labels.h"

static int name_get(json_t *v, const char **ret, struct station_error *e)
{
	if (json_is_null(v))
		return 0;
	if (!json_is_string(v))
		return station_error_set(e, -EINVAL, "name", "field \"name\" must be a string");
	if (strlen(json_string_value(v)) != json_string_length(v))
		return station_error_set(e, -EINVAL, "name", "field \"name\" must not contain NUL");
	*ret = json_string_value(v);
	return workspace_name_check(*ret, e);
}

/* One label of a create or a patch (null: a removal, when allowed). */
static int label_get(const char *key, json_t *v, bool allow_null, struct station_error *e)
{
	if (allow_null && json_is_null(v))
		return label_key_valid(key) ? 0 : label_check(key, "", e);
	if (!json_is_string(v))
		return station_error_set(e, -EINVAL, "labels",
					 "label \"%.80s\": the value must be a string%s", key,
					 allow_null ? " (or null to remove it)" : "");
	if (strlen(json_string_value(v)) != json_string_length(v))
		return station_error_set(e, -EINVAL, "labels",
					 "label \"%.80s\": the value must not contain NUL", key);
	return label_check(key, json_string_value(v), e);
}

static int labels_get(json_t *labels, bool allow_null, struct station_error *e)
{
	const char *key;
	json_t *v;
	int r;

	if (!json_is_object(labels))
		return station_error_set(e, -EINVAL, "labels",
					 "field \"labels\" must be an object of strings");
	if (json_object_size(labels) > LABELS_MAX)
		return station_error_set(e, -EINVAL, "labels", "%zu labels: at most %d",
					 json_object_size(labels), LABELS_MAX);
	json_object_foreach(labels, key, v) {
		r = label_get(key, v, allow_null, e);
		if (r < 0)
			return r;
	}
	return 0;
}

int validate_workspace_labels(json_t *body, const char **ret_name, json_t **ret_labels,
			      struct station_error *e)
{
	json_t *name = json_object_get(body, "name"), *labels = json_object_get(body, "labels");
	const char *n = NULL;
	int r = name ? name_get(name, &n, e) : 0;

	if (r >= 0 && labels && !json_is_null(labels))
		r = labels_get(labels, false, e);
	if (r < 0)
		return r;
	/* the manager checks the total bytes of the set, here of a patch's result too */
	*ret_name = n;
	*ret_labels = json_is_object(labels) ? labels : NULL;
	return 0;
}

int validate_workspace_update(json_t *body, struct workspace_update *ret, struct station_error *e)
{
	struct workspace_update u = {};
	json_t *name = json_object_get(body, "name"), *labels = json_object_get(body, "labels");
	const char *key;
	json_t *v;
	int r = 0;

	json_object_foreach(body, key, v)
		if (strcmp(key, "name") != 0 && strcmp(key, "labels") != 0)
			return station_error_set(e, -EINVAL, key,
						 "unknown field \"%.64s\" (a workspace's name and "
						 "labels change, nothing else)",
						 key);
	if (name) {
		u.name_set = true;
		r = name_get(name, &u.name, e);
	}
	if (r >= 0 && labels) {
		u.labels_clear = json_is_null(labels);
		if (!u.labels_clear) {
			r = labels_get(labels, true, e);
			u.labels = labels;
		}
	}
	if (r < 0)
		return r;
	*ret = u;
	return 0;
}

int validate_label_selector(const char *s, struct station_error *e)
{
	const char *eq = s ? strchr(s, '=') : NULL;
	char key[LABEL_KEY_MAX + 2];
	size_t n;

	if (!s)
		return station_error_set(e, -EINVAL, "label",
					 "query \"label\" needs KEY or KEY=VALUE");
	n = eq ? (size_t)(eq - s) : strlen(s);
	if (n >= sizeof key)
		n = sizeof key - 1; /* too long a key: refused as one below */
	memcpy(key, s, n);
	key[n] = '\0';
	int r = label_check(key, eq ? eq + 1 : "", e);
	if (r < 0)
		snprintf(e->field, sizeof e->field, "label");
	return r;
}
