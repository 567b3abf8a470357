/* SPDX-License-Identifier: MIT */
/* Tokens: create, list, revoke; and the audit log (docs/api.md, "Tokens", "Audit"). */

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "basic/cleanup.h"
#include "client-internal.h"

/* An id, a tenant or a workspace in a path or a query: nothing that needs escaping. */
static bool id_is_valid(const char *s)
{
	size_t n = s ? strlen(s) : 0;

	return n > 0 && n <= 71 &&
	       strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.:-") == n;
}

int station_token_create(struct station_client *c, const char *name, const char *scope,
			 const struct station_token_options *opts, json_t **ret)
{
	static const struct station_token_options none = {};
	_cleanup_json_ json_t *body = json_object();
	const struct station_token_options *o = opts ? opts : &none;
	int r;

	if (!body)
		return client_error(c, -ENOMEM, "out of memory");
	if (!name || !scope)
		return client_error(c, -EINVAL, "a token needs a name and a scope");
	r = client_put_string(c, body, "name", name);
	if (r >= 0)
		r = client_put_string(c, body, "scope", scope);
	if (r >= 0)
		r = client_put_string(c, body, "tenant", o->tenant);
	if (r >= 0)
		r = client_put_string(c, body, "expiresAt", o->expires_at);
	if (r < 0)
		return r;
	if (o->limits) {
		json_t *l = json_pack("{s:f,s:I,s:I,s:I}", "cpus", o->cpus, "memoryMb",
				      (json_int_t)o->memory_mb, "pidsLimit",
				      (json_int_t)o->pids_limit, "workspaces",
				      (json_int_t)o->workspaces);

		if (!l || json_object_set_new(body, "limits", l) < 0)
			return client_error(c, -ENOMEM, "out of memory");
	}
	return station_request_json(c, "POST", "/v1/tokens", body, ret);
}

int station_token_list(struct station_client *c, json_t **ret)
{
	_cleanup_json_ json_t *doc = NULL;
	json_t *list;
	int r;

	r = station_request_json(c, "GET", "/v1/tokens", NULL, &doc);
	if (r < 0)
		return r;
	list = json_object_get(doc, "tokens");
	if (!json_is_array(list))
		return client_error(c, -EPROTO, "%s answered without \"tokens\"",
				    station_client_endpoint(c));
	*ret = json_incref(list);
	return 0;
}

int station_token_revoke(struct station_client *c, const char *id, json_t **ret)
{
	char path[128];

	if (!id_is_valid(id))
		return client_error(c, -EINVAL, "invalid token id '%s'", id ? id : "");
	snprintf(path, sizeof(path), "/v1/tokens/%s", id);
	return station_request_json(c, "DELETE", path, NULL, ret);
}

/* Appends "&key=value" (the first one with '?'). */
static int query_add(struct station_client *c, char *buf, size_t size, const char *key,
		     const char *value)
{
	size_t n = strlen(buf);

	if (!value)
		return 0;
	if (!id_is_valid(value))
		return client_error(c, -EINVAL, "invalid %s '%s'", key, value);
	if ((size_t)snprintf(buf + n, size - n, "%c%s=%s", strchr(buf, '?') ? '&' : '?', key,
			     value) >= size - n)
		return client_error(c, -EINVAL, "the audit query is too long");
	return 0;
}

int station_audit(struct station_client *c, const struct station_audit_options *opts, json_t **ret)
{
	static const struct station_audit_options none = {};
	const struct station_audit_options *o = opts ? opts : &none;
	char path[512] = "/v1/audit", num[32];
	int r = 0;

	if (o->limit > 1000)
		return client_error(c, -EINVAL, "an audit page is 1 to 1000 entries, not %zu",
				    o->limit);
	if (o->limit) {
		snprintf(num, sizeof(num), "%zu", o->limit);
		r = query_add(c, path, sizeof(path), "limit", num);
	}
	if (r >= 0 && o->before > 0) {
		snprintf(num, sizeof(num), "%lld", o->before);
		r = query_add(c, path, sizeof(path), "before", num);
	}
	if (r >= 0)
		r = query_add(c, path, sizeof(path), "tokenId", o->token_id);
	if (r >= 0)
		r = query_add(c, path, sizeof(path), "tenant", o->tenant);
	if (r >= 0)
		r = query_add(c, path, sizeof(path), "workspace", o->workspace);
	if (r < 0)
		return r;
	return station_request_json(c, "GET", path, NULL, ret);
}
