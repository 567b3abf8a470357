/* SPDX-License-Identifier: MIT */
/* docs/openapi.yaml, as built into the controller, against the endpoint table: every route and
 * method of src/api/router.c is described, nothing else is, and each operationId is the
 * endpoint's name in camelCase ("workspace-create" → "workspaceCreate"). */
#include <criterion/criterion.h>
#include <ctype.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "api/openapi.h"
#include "api/router.h"

static json_t *load(void)
{
	json_error_t err;
	json_t *doc = json_loadb((const char *)openapi_json, openapi_json_size, 0, &err);

	cr_assert(doc, "the built-in description is not JSON: %s (line %d)", err.text, err.line);
	return doc;
}

/* A path of the description ("/v1/images/{digest}") or a pattern of the table, whose '*', '@', '+'
 * are segments too, with every parameter segment as "{}": "/v1/images/{}". */
static void normalize(const char *path, char *ret, size_t size)
{
	size_t n = 0;

	for (const char *p = path; *p && n + 3 < size; p++) {
		if (*p == '*' || *p == '@' || *p == '+') {
			memcpy(ret + n, "{}", 2);
			n += 2;
		} else if (*p == '{') {
			const char *end = strchr(p, '}');
			cr_assert(end, "unclosed parameter in %s", path);
			memcpy(ret + n, "{}", 2);
			n += 2;
			p = end;
		} else {
			ret[n++] = *p;
		}
	}
	ret[n] = '\0';
}

static void camel(const char *name, char *ret, size_t size)
{
	size_t n = 0;
	bool up = false;

	for (const char *p = name; *p && n + 1 < size; p++) {
		if (*p == '-') {
			up = true;
			continue;
		}
		ret[n++] = up ? (char)toupper((unsigned char)*p) : *p;
		up = false;
	}
	ret[n] = '\0';
}

/* The description's operations as "METHOD {}-path" → operationId. */
static json_t *described(json_t *doc)
{
	static const char *const methods[] = { "get",  "put",	  "post",  "delete",
					       "head", "options", "patch", "trace" };
	json_t *paths = json_object_get(doc, "paths"), *item, *ops = json_object();
	const char *path;

	cr_assert(json_is_object(paths), "no \"paths\" in the description");
	json_object_foreach(paths, path, item) {
		char norm[512], key[600];

		normalize(path, norm, sizeof norm);
		for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++) {
			json_t *op = json_object_get(item, methods[i]);
			if (!op)
				continue;
			snprintf(key, sizeof key, "%s %s", methods[i], norm);
			for (char *k = key; *k != ' '; k++)
				*k = (char)toupper((unsigned char)*k);
			cr_assert(!json_object_get(ops, key), "%s is described twice", key);
			json_object_set(ops, key,
					json_object_get(op, "operationId") ?: json_null());
		}
	}
	return ops;
}

struct walk {
	json_t *ops;
	unsigned n;
};

static void check_route(const char *pattern, const char *method, enum endpoint ep, void *userdata)
{
	struct walk *w = userdata;
	char norm[512], key[600], want[128];
	json_t *id;

	normalize(pattern, norm, sizeof norm);
	snprintf(key, sizeof key, "%s %s", method, norm);
	id = json_object_get(w->ops, key);
	cr_expect(id, "route %s %s of the endpoint table is missing from docs/openapi.yaml", method,
		  pattern);
	if (id) {
		camel(endpoint_to_string(ep), want, sizeof want);
		cr_expect(json_is_string(id) && strcmp(json_string_value(id), want) == 0,
			  "%s %s: operationId should be \"%s\", not %s", method, pattern, want,
			  json_is_string(id) ? json_string_value(id) : "absent");
		json_object_del(w->ops, key);
	}
	w->n++;
}

Test(openapi, is_openapi_3_1)
{
	json_t *doc = load();
	const char *v = json_string_value(json_object_get(doc, "openapi"));

	cr_assert(v && strncmp(v, "3.1.", 4) == 0, "openapi is %s", v ? v : "absent");
	cr_assert_eq(openapi_json[openapi_json_size - 1], '\n');
	json_decref(doc);
}

Test(openapi, matches_endpoint_table)
{
	json_t *doc = load();
	struct walk w = { .ops = described(doc) };
	const char *key;
	json_t *v;

	router_foreach(check_route, &w);
	cr_expect_eq(w.n, _EP_MAX, "the table has %u routes and methods, %d endpoints", w.n,
		     _EP_MAX);
	json_object_foreach(w.ops, key, v)
		cr_expect(false, "%s is in docs/openapi.yaml but not in the endpoint table", key);
	json_decref(w.ops);
	json_decref(doc);
}

/* The test's own positive control: a route the table lacks is reported, a present one is not. */
Test(openapi, walk_reports_extra_operation)
{
	json_t *doc = load();
	json_t *ops = described(doc);

	cr_assert(json_object_get(ops, "GET /v1/workspaces/{}/commands/{}/output"));
	cr_assert(!json_object_get(ops, "GET /v1/nothing"));
	json_decref(ops);
	json_decref(doc);
}

/* Every {parameter} in a path is declared as a path parameter of that path or operation. */
Test(openapi, path_parameters_declared)
{
	json_t *doc = load(), *item;
	json_t *params = json_object_get(json_object_get(doc, "components"), "parameters");
	const char *path;

	json_object_foreach(json_object_get(doc, "paths"), path, item) {
		for (const char *p = strchr(path, '{'); p; p = strchr(p + 1, '{')) {
			size_t n = strcspn(p + 1, "}");
			bool found = false;
			json_t *list = json_object_get(item, "parameters"), *prm;
			size_t i;

			json_array_foreach(list, i, prm) {
				const char *ref = json_string_value(json_object_get(prm, "$ref"));
				if (ref && strncmp(ref, "#/components/parameters/", 24) == 0)
					prm = json_object_get(params, ref + 24);
				const char *name = json_string_value(json_object_get(prm, "name"));
				const char *in = json_string_value(json_object_get(prm, "in"));
				if (name && in && strcmp(in, "path") == 0 && strlen(name) == n &&
				    strncmp(name, p + 1, n) == 0)
					found = true;
			}
			cr_expect(found, "%s: parameter {%.*s} is not declared", path, (int)n,
				  p + 1);
		}
	}
	json_decref(doc);
}
