/* SPDX-License-Identifier: MIT */
/* Secrets: put, list, delete (docs/api.md, "Secrets"). A value goes out in one request body
 * and every copy made of it here is wiped before the call returns. */

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "basic/cleanup.h"
#include "client-internal.h"

#define SECRET_VALUE_MAX 16384

static bool secret_name_is_valid(const char *s)
{
	size_t n = s ? strlen(s) : 0;

	return n > 0 && n <= 64 &&
	       strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") == n;
}

/* "/v1/workspaces/{ws}/secrets[/{name}]" */
static int secret_path(struct station_client *c, const char *ws, const char *name, char **ret)
{
	char tail[96];

	if (name && !secret_name_is_valid(name))
		return client_error(c, -EINVAL,
				    "invalid secret name '%s' (want [A-Za-z0-9_.-]{1,64})", name);
	snprintf(tail, sizeof(tail), "/secrets%s%s", name ? "/" : "", name ? name : "");
	return client_path(c, ws, NULL, tail, ret);
}

/* A secret-holding buffer: wiped, then freed. */
struct wiped {
	char *p;
	size_t cap;
};

static void wipedp(struct wiped *w)
{
	if (w->p) {
		explicit_bzero(w->p, w->cap);
		free(w->p);
	}
}

/* True when the n bytes are UTF-8 without NUL (what a JSON string can carry). */
static bool value_is_text(const unsigned char *p, size_t n)
{
	json_t *s;

	if (memchr(p, 0, n))
		return false;
	s = json_stringn((const char *)p, n); /* jansson checks the encoding */
	if (!s)
		return false;
	explicit_bzero((char *)json_string_value(s), n);
	json_decref(s);
	return true;
}

/* Appends the value as a JSON string (escaped) at w->p + *len. w has room for the worst case. */
static void put_json_string(struct wiped *w, size_t *len, const unsigned char *v, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	char *o = w->p + *len;

	*o++ = '"';
	for (size_t i = 0; i < n; i++) {
		if (v[i] == '"' || v[i] == '\\') {
			*o++ = '\\';
			*o++ = (char)v[i];
		} else if (v[i] < 0x20 || v[i] == 0x7f) {
			*o++ = '\\';
			*o++ = 'u';
			*o++ = '0';
			*o++ = '0';
			*o++ = hex[v[i] >> 4];
			*o++ = hex[v[i] & 15];
		} else {
			*o++ = (char)v[i];
		}
	}
	*o++ = '"';
	*len = (size_t)(o - w->p);
}

/* The request body: {"value":…} followed by the other fields, made without jansson so that no
 * copy of the value is left in memory that is not wiped. */
static int secret_body(struct station_client *c, const void *value, size_t n,
		       const struct station_secret_options *o, struct wiped *ret)
{
	_cleanup_json_ json_t *rest = json_object();
	_cleanup_free_ char *rest_text = NULL;
	size_t len = 0, rest_len;
	int r;

	if (!rest)
		return client_error(c, -ENOMEM, "out of memory");
	r = client_put_string(c, rest, "host", o->host);
	if (r >= 0)
		r = client_put_string(c, rest, "username", o->username);
	if (r >= 0)
		r = client_put_string(c, rest, "expiresAt", o->expires_at);
	if (r < 0)
		return r;
	rest_text = json_dumps(rest, JSON_COMPACT);
	if (!rest_text)
		return client_error(c, -ENOMEM, "out of memory");
	rest_len = strlen(rest_text); /* "{}" or "{…}" */
	ret->cap = strlen("{\"value\":") + n * 6 + 2 + 1 + rest_len + 1;
	ret->p = malloc(ret->cap);
	if (!ret->p)
		return client_error(c, -ENOMEM, "out of memory");
	memcpy(ret->p, "{\"value\":", strlen("{\"value\":"));
	len = strlen("{\"value\":");
	put_json_string(ret, &len, value, n);
	if (rest_len > 2)
		ret->p[len++] = ',';
	memcpy(ret->p + len, rest_text + 1, rest_len - 1); /* without its '{', with its '}' */
	len += rest_len - 1;
	ret->p[len] = '\0';
	return 0;
}

int station_secret_put(struct station_client *c, const char *ws, const char *name,
		       const void *value, size_t n, const struct station_secret_options *opts,
		       json_t **ret)
{
	CLIENT_ROUTE(c, ws);
	static const struct station_secret_options none = {};
	_cleanup_(wipedp) struct wiped body = {};
	_cleanup_free_ char *path = NULL;
	_cleanup_free_ char *reply = NULL;
	long status;
	int r;

	if (!name)
		return client_error(c, -EINVAL, "no secret name given");
	if (!value || n == 0 || n > SECRET_VALUE_MAX)
		return client_error(c, -EINVAL, "a secret's value must be 1 to %d bytes (got %zu)",
				    SECRET_VALUE_MAX, value ? n : 0);
	if (!value_is_text(value, n))
		return client_error(c, -EINVAL, "a secret's value must be UTF-8 text without NUL");
	r = secret_path(c, ws, name, &path);
	if (r >= 0)
		r = secret_body(c, value, n, opts ? opts : &none, &body);
	if (r < 0)
		return r;
	r = station_request(c, "PUT", path, body.p, &status, &reply);
	if (r < 0)
		return r;
	return client_parse_reply(c, status, reply, ret);
}

int station_secret_list(struct station_client *c, const char *ws, json_t **ret)
{
	CLIENT_ROUTE(c, ws);
	_cleanup_json_ json_t *doc = NULL;
	_cleanup_free_ char *path = NULL;
	json_t *list;
	int r;

	r = secret_path(c, ws, NULL, &path);
	if (r >= 0)
		r = station_request_json(c, "GET", path, NULL, &doc);
	if (r < 0)
		return r;
	list = json_object_get(doc, "secrets");
	if (!json_is_array(list))
		return client_error(c, -EPROTO, "%s answered without \"secrets\"",
				    station_client_endpoint(c));
	*ret = json_incref(list);
	return 0;
}

int station_secret_delete(struct station_client *c, const char *ws, const char *name, json_t **ret)
{
	CLIENT_ROUTE(c, ws);
	_cleanup_free_ char *path = NULL;
	int r;

	if (!name)
		return client_error(c, -EINVAL, "no secret name given");
	r = secret_path(c, ws, name, &path);
	if (r < 0)
		return r;
	return station_request_json(c, "DELETE", path, NULL, ret);
}
