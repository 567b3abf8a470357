/* SPDX-License-Identifier: MIT */
/* A workspace's secrets (docs/api.md, "Secrets"): validated, sealed into the store under the
 * worker's key (store/secret-box.h), kept open in memory for the credential path, listed
 * without their values, revoked at once. A value is never logged, never in a response, and
 * wiped from memory when it is replaced, deleted, or the controller stops. */

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "basic/cleanup.h"
#include "basic/json-util.h"
#include "basic/list.h"
#include "basic/log.h"
#include "basic/util.h"
#include "event/event.h"
#include "manager-internal.h"
#include "store/secret-box.h"

#define SECRET_NAME_MAX 64
#define SECRET_VALUE_MAX 16384
#define SECRET_USERNAME_MAX 256
#define SECRET_HOST_MAX 253
#define SECRET_DEFAULT_USERNAME "x-access-token"

struct secret {
	struct secret *prev, *next; /* in workspace->secrets, by name */
	char *name;
	char *value; /* NUL-terminated, value_len bytes */
	size_t value_len;
	char *host; /* lower-case "name" or "name:port"; NULL: released for no host */
	char *username;
	uint64_t expires_at; /* CLOCK_REALTIME µs; 0: never */
	uint64_t created_at;
	uint64_t updated_at;
};

static void secret_free(struct secret *s)
{
	if (!s)
		return;
	if (s->value) {
		explicit_bzero(s->value, s->value_len);
		free(s->value);
	}
	free(s->name);
	free(s->host);
	free(s->username);
	free(s);
}

void secrets_free_all(struct workspace *ws)
{
	while (ws->secrets) {
		struct secret *s = ws->secrets;
		LIST_REMOVE(&ws->secrets, s);
		secret_free(s);
	}
	ws->n_secrets = 0;
}

static struct secret *secret_find(struct workspace *ws, const char *name)
{
	for (struct secret *s = ws->secrets; s; s = s->next)
		if (strcmp(s->name, name) == 0)
			return s;
	return NULL;
}

/* Into ws->secrets, which stays sorted by name. */
static void secret_link(struct workspace *ws, struct secret *s)
{
	struct secret *before = NULL;

	for (struct secret *p = ws->secrets; p && strcmp(p->name, s->name) < 0; p = p->next)
		before = p;
	if (!before) {
		LIST_PREPEND(&ws->secrets, s);
	} else {
		s->prev = before;
		s->next = before->next;
		if (before->next)
			before->next->prev = s;
		before->next = s;
	}
	ws->n_secrets++;
}

static void secret_unlink(struct workspace *ws, struct secret *s)
{
	LIST_REMOVE(&ws->secrets, s);
	ws->n_secrets--;
}

static bool secret_expired(const struct secret *s, uint64_t now)
{
	return s->expires_at && now >= s->expires_at;
}

static json_t *secret_to_json(const struct secret *s, uint64_t now)
{
	json_t *o = json_object();

	if (!o)
		return NULL;
	json_object_set_new(o, "name", json_string(s->name));
	json_object_set_new(o, "host", s->host ? json_string(s->host) : json_null());
	json_object_set_new(o, "username", json_string(s->username));
	json_set_time(o, "expiresAt", s->expires_at);
	json_object_set_new(o, "expired", json_boolean(secret_expired(s, now)));
	json_set_time(o, "createdAt", s->created_at);
	json_set_time(o, "updatedAt", s->updated_at);
	return o;
}

/* The associated data of a sealed value: the workspace id and the name, NUL between. */
static int secret_aad(const char *ws_id, const char *name, char **ret, size_t *ret_len)
{
	size_t a = strlen(ws_id), b = strlen(name);
	char *p = malloc(a + 1 + b);

	if (!p)
		return -ENOMEM;
	memcpy(p, ws_id, a);
	p[a] = '\0';
	memcpy(p + a + 1, name, b);
	*ret = p;
	*ret_len = a + 1 + b;
	return 0;
}

/* --- validation (docs/api.md, "Secrets"); no message quotes a value --- */

static bool name_valid(const char *name)
{
	size_t n = strlen(name);

	if (n == 0 || n > SECRET_NAME_MAX)
		return false;
	for (const char *p = name; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		      (*p >= '0' && *p <= '9') || *p == '_' || *p == '.' || *p == '-'))
			return false;
	return true;
}

/* One DNS label of a lower-cased name: [a-z0-9-]{1,63}, no hyphen at either end. */
static bool label_valid(const char *p, size_t n)
{
	if (n == 0 || n > 63 || p[0] == '-' || p[n - 1] == '-')
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((p[i] >= 'a' && p[i] <= 'z') || (p[i] >= '0' && p[i] <= '9') || p[i] == '-'))
			return false;
	return true;
}

/* A DNS name or name:port, lower-cased in place. */
static bool host_valid(char *host)
{
	char *colon, *label;
	uint64_t port;
	size_t n;

	for (char *p = host; *p; p++)
		if (*p >= 'A' && *p <= 'Z')
			*p = (char)(*p - 'A' + 'a');
	colon = strchr(host, ':');
	n = colon ? (size_t)(colon - host) : strlen(host);
	if (colon && (colon[1] == '0' || parse_u64(colon + 1, 65535, &port) < 0 || port == 0))
		return false;
	if (n == 0 || n > SECRET_HOST_MAX)
		return false;
	label = host;
	for (char *p = host;; p++) {
		if (p == host + n || *p == '.') {
			if (!label_valid(label, (size_t)(p - label)))
				return false;
			if (p == host + n)
				return true;
			label = p + 1;
		}
	}
}

static bool username_valid(const char *s, size_t n)
{
	if (n == 0 || n > SECRET_USERNAME_MAX || strlen(s) != n)
		return false;
	for (size_t i = 0; i < n; i++)
		if ((uint8_t)s[i] < 0x20 || s[i] == 0x7f)
			return false;
	return true;
}

struct secret_input {
	json_t *value; /* the body's string */
	char *host;
	char *username;
	uint64_t expires_at;
};

static void secret_input_done(struct secret_input *in)
{
	free(in->host);
	free(in->username);
}

static int optional_string(json_t *body, const char *field, json_t **ret, struct station_error *e)
{
	json_t *v = json_object_get(body, field);

	*ret = NULL;
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_string(v))
		return station_error_set(e, -EINVAL, field, "field \"%s\" must be a string, not %s",
					 field, json_kind_name(v));
	*ret = v;
	return 1;
}

static int check_value(json_t *body, struct secret_input *in, struct station_error *e)
{
	json_t *v = json_object_get(body, "value");
	const char *s;
	size_t n;

	if (!v)
		return station_error_set(e, -EINVAL, "value", "field \"value\" is required");
	if (!json_is_string(v))
		return station_error_set(e, -EINVAL, "value",
					 "field \"value\" must be a string, not %s",
					 json_kind_name(v));
	s = json_string_value(v);
	n = json_string_length(v);
	if (n == 0 || n > SECRET_VALUE_MAX)
		return station_error_set(e, -EINVAL, "value",
					 "field \"value\" is %zu bytes, not 1 to %d", n,
					 SECRET_VALUE_MAX);
	if (strlen(s) != n)
		return station_error_set(e, -EINVAL, "value",
					 "field \"value\" must not contain NUL");
	/* git's credential protocol is line-based: a line break would forge attributes */
	if (strpbrk(s, "\r\n"))
		return station_error_set(e, -EINVAL, "value",
					 "field \"value\" must not contain a line break");
	in->value = v;
	return 0;
}

static int check_host(json_t *body, struct secret_input *in, struct station_error *e)
{
	json_t *v;
	int r = optional_string(body, "host", &v, e);

	if (r <= 0)
		return r;
	if (json_string_length(v) > SECRET_HOST_MAX + 6 ||
	    strlen(json_string_value(v)) != json_string_length(v))
		return station_error_set(e, -EINVAL, "host",
					 "field \"host\" must be a DNS name or name:port");
	in->host = strdup(json_string_value(v));
	if (!in->host)
		return station_error_set(e, -ENOMEM, NULL, "out of memory");
	if (!host_valid(in->host))
		return station_error_set(e, -EINVAL, "host",
					 "field \"host\" \"%s\" is not a DNS name or name:port "
					 "(e.g. \"github.com\", \"git.example.com:8443\")",
					 json_string_value(v));
	return 0;
}

static int check_username(json_t *body, struct secret_input *in, struct station_error *e)
{
	json_t *v;
	int r = optional_string(body, "username", &v, e);

	if (r < 0)
		return r;
	if (r > 0 && !username_valid(json_string_value(v), json_string_length(v)))
		return station_error_set(e, -EINVAL, "username",
					 "field \"username\" must be 1 to %d bytes without control "
					 "characters",
					 SECRET_USERNAME_MAX);
	in->username = strdup(r > 0 ? json_string_value(v) : SECRET_DEFAULT_USERNAME);
	return in->username ? 0 : station_error_set(e, -ENOMEM, NULL, "out of memory");
}

static int check_expiry(json_t *body, struct secret_input *in, struct station_error *e)
{
	json_t *v;
	int r = optional_string(body, "expiresAt", &v, e);

	if (r <= 0)
		return r;
	if (strlen(json_string_value(v)) != json_string_length(v) ||
	    parse_rfc3339(json_string_value(v), &in->expires_at) < 0)
		return station_error_set(e, -EINVAL, "expiresAt",
					 "field \"expiresAt\" must be an RFC 3339 time such as "
					 "\"2026-12-02T11:00:00Z\"");
	if (in->expires_at <= realtime_usec())
		return station_error_set(e, -EINVAL, "expiresAt",
					 "field \"expiresAt\" \"%s\" is not in the future",
					 json_string_value(v));
	return 0;
}

static int secret_input_check(json_t *body, struct secret_input *in, struct station_error *e)
{
	static const char *const known[] = { "value", "host", "username", "expiresAt" };
	const char *key;
	json_t *v;
	int r;

	if (!json_is_object(body))
		return station_error_set(e, -EINVAL, NULL, "request body must be a JSON object");
	json_object_foreach(body, key, v) {
		bool ok = false;
		for (size_t i = 0; i < ELEMENTSOF(known); i++)
			ok |= strcmp(key, known[i]) == 0;
		if (!ok)
			return station_error_set(e, -EINVAL, key, "unknown field \"%.64s\"", key);
	}
	r = check_value(body, in, e);
	if (r >= 0)
		r = check_host(body, in, e);
	if (r >= 0)
		r = check_username(body, in, e);
	if (r >= 0)
		r = check_expiry(body, in, e);
	return r;
}

/* --- the API --- */

static int secret_workspace(struct manager *m, const char *ws_id, const char *name, bool change,
			    struct workspace **ret, struct station_error *e)
{
	struct workspace *ws;
	int r = workspace_lookup(m, ws_id, &ws, e);

	if (r < 0)
		return r;
	if (change && ws->row.state == WORKSPACE_DELETING)
		return station_error_set(e, -EBUSY, NULL, "workspace \"%s\" is being deleted",
					 ws_id);
	if (name && !name_valid(name))
		return station_error_set(e, -EINVAL, "name",
					 "secret name \"%.64s\" is not 1 to %d of [A-Za-z0-9_.-]",
					 name, SECRET_NAME_MAX);
	*ret = ws;
	return 0;
}

/* Seals value into a row of the store for ws and name. */
static int secret_store(struct workspace *ws, const char *name, const struct secret_input *in,
			const char *value, size_t n, uint64_t created_at, uint64_t now)
{
	_cleanup_free_ char *aad = NULL;
	_cleanup_free_ uint8_t *sealed = NULL;
	uint8_t nonce[SECRET_NONCE_BYTES];
	size_t aad_len, sealed_len;
	int r;

	if (!ws->m->secret_key_set)
		return -ENOKEY;
	r = secret_aad(ws->row.id, name, &aad, &aad_len);
	if (r >= 0)
		r = secret_box_seal(ws->m->secret_key, aad, aad_len, value, n, nonce, &sealed,
				    &sealed_len);
	if (r < 0)
		return r;
	struct secret_row row = {
		.workspace_id = ws->row.id,
		.name = (char *)name,
		.nonce = nonce,
		.nonce_len = sizeof nonce,
		.ciphertext = sealed,
		.ciphertext_len = sealed_len,
		.host = in->host,
		.username = in->username,
		.expires_at = in->expires_at,
		.created_at = created_at,
		.updated_at = now,
	};
	return store_secret_put(ws->m->store, &row);
}

int manager_secret_put(struct manager *m, const char *ws_id, const char *name, json_t *body,
		       json_t **ret, bool *ret_created, struct station_error *e)
{
	struct secret_input in = {};
	struct workspace *ws;
	struct secret *old, *s;
	uint64_t now = realtime_usec();
	int r;

	r = secret_workspace(m, ws_id, name, true, &ws, e);
	if (r >= 0)
		r = secret_input_check(body, &in, e);
	if (r < 0)
		goto out;
	old = secret_find(ws, name);
	if (!old && ws->n_secrets >= MANAGER_MAX_SECRETS) {
		r = station_error_set(e, -EAGAIN, NULL,
				      "workspace \"%s\" already has %d secrets (the limit)", ws_id,
				      MANAGER_MAX_SECRETS);
		goto out;
	}
	s = calloc(1, sizeof *s);
	if (!s || !(s->name = strdup(name)) ||
	    !(s->value = strndup(json_string_value(in.value), json_string_length(in.value)))) {
		secret_free(s);
		r = station_error_set(e, -ENOMEM, NULL, "out of memory");
		goto out;
	}
	s->value_len = json_string_length(in.value);
	s->created_at = old ? old->created_at : now;
	s->updated_at = now;
	s->expires_at = in.expires_at;
	r = secret_store(ws, name, &in, s->value, s->value_len, s->created_at, now);
	if (r < 0) {
		secret_free(s);
		r = station_error_set(e, r, NULL, "cannot store secret \"%s\": %s", name,
				      r == -ENOKEY ? "the worker has no secrets key" :
						     strerror(-r));
		goto out;
	}
	s->host = TAKE_PTR(in.host);
	s->username = TAKE_PTR(in.username);
	if (old) {
		secret_unlink(ws, old);
		secret_free(old);
	}
	secret_link(ws, s);
	log_info(old ? "secret replaced" : "secret stored", "workspace", ws_id, "secret", name,
		 "host", s->host ? s->host : "", NULL);
	*ret = secret_to_json(s, now);
	*ret_created = !old;
out:
	/* the request's copy of the value goes as soon as the secret has its own */
	in.value = json_object_get(body, "value");
	if (json_is_string(in.value))
		explicit_bzero((char *)json_string_value(in.value), json_string_length(in.value));
	secret_input_done(&in);
	return r;
}

int manager_secret_list(struct manager *m, const char *ws_id, json_t **ret, struct station_error *e)
{
	struct workspace *ws;
	uint64_t now = realtime_usec();
	json_t *a;
	int r = secret_workspace(m, ws_id, NULL, false, &ws, e);

	if (r < 0)
		return r;
	a = json_array();
	for (struct secret *s = ws->secrets; a && s; s = s->next)
		json_array_append_new(a, secret_to_json(s, now));
	*ret = json_pack("{s:o}", "secrets", a);
	return *ret ? 0 : station_error_set(e, -ENOMEM, NULL, "out of memory");
}

static int secret_lookup(struct manager *m, const char *ws_id, const char *name, bool change,
			 struct workspace **ret_ws, struct secret **ret, struct station_error *e)
{
	int r = secret_workspace(m, ws_id, name, change, ret_ws, e);

	if (r < 0)
		return r;
	*ret = secret_find(*ret_ws, name);
	if (!*ret)
		return station_error_set(e, -ENOENT, NULL,
					 "secret \"%s\" not found in workspace \"%s\"", name,
					 ws_id);
	return 0;
}

int manager_secret_get(struct manager *m, const char *ws_id, const char *name, json_t **ret,
		       struct station_error *e)
{
	struct workspace *ws;
	struct secret *s;
	int r = secret_lookup(m, ws_id, name, false, &ws, &s, e);

	if (r < 0)
		return r;
	*ret = secret_to_json(s, realtime_usec());
	return 0;
}

int manager_secret_delete(struct manager *m, const char *ws_id, const char *name, json_t **ret,
			  struct station_error *e)
{
	struct workspace *ws;
	struct secret *s;
	int r = secret_lookup(m, ws_id, name, true, &ws, &s, e);

	if (r < 0)
		return r;
	r = store_secret_delete(m->store, ws_id, name);
	if (r < 0 && r != -ENOENT)
		return station_error_set(e, r, NULL, "cannot delete secret \"%s\": %s", name,
					 strerror(-r));
	secret_unlink(ws, s);
	secret_free(s);
	log_info("secret deleted", "workspace", ws_id, "secret", name, NULL);
	*ret = json_pack("{s:s,s:b}", "name", name, "deleted", 1);
	return 0;
}

int manager_secret_for_host(struct manager *m, const char *ws_id, const char *protocol,
			    const char *host, char **ret_name, char **ret_username,
			    char **ret_password)
{
	struct workspace *ws = ws_id && host ? workspace_find(m, ws_id) : NULL;
	struct secret *best = NULL;
	uint64_t now = realtime_usec();
	char *name, *username, *password;

	if (!ws || ws->row.state == WORKSPACE_DELETING || !protocol ||
	    (strcmp(protocol, "https") != 0 && strcmp(protocol, "http") != 0))
		return -ENOENT;
	for (struct secret *s = ws->secrets; s; s = s->next)
		if (s->host && strcasecmp(s->host, host) == 0 && !secret_expired(s, now) &&
		    (!best || s->updated_at > best->updated_at))
			best = s;
	if (!best)
		return -ENOENT;
	name = strdup(best->name);
	username = strdup(best->username);
	password = strndup(best->value, best->value_len);
	if (!name || !username || !password) {
		free(name);
		free(username);
		erase_and_free(password);
		return -ENOMEM;
	}
	*ret_name = name;
	*ret_username = username;
	*ret_password = password;
	return 0;
}

/* --- start and stop --- */

/* One stored secret opened into its workspace; a row that does not open stays in the store
 * (a later PUT of the name replaces it) and is reported by name. */
static int secret_load(struct manager *m, struct secret_row *row)
{
	_cleanup_free_ char *aad = NULL;
	struct workspace *ws = workspace_find(m, row->workspace_id);
	struct secret *s;
	size_t aad_len;
	int r;

	if (!ws)
		return -ENOENT;
	if (!m->secret_key_set)
		return -ENOKEY;
	if (row->nonce_len != SECRET_NONCE_BYTES || !name_valid(row->name))
		return -EBADMSG;
	s = calloc(1, sizeof *s);
	if (!s)
		return -ENOMEM;
	r = secret_aad(row->workspace_id, row->name, &aad, &aad_len);
	if (r >= 0)
		r = secret_box_open(m->secret_key, row->nonce, aad, aad_len, row->ciphertext,
				    row->ciphertext_len, &s->value, &s->value_len);
	if (r < 0) {
		secret_free(s);
		return r;
	}
	s->name = TAKE_PTR(row->name);
	s->host = TAKE_PTR(row->host);
	s->username = TAKE_PTR(row->username);
	s->expires_at = row->expires_at;
	s->created_at = row->created_at;
	s->updated_at = row->updated_at;
	secret_link(ws, s);
	return 0;
}

void secrets_load(struct manager *m)
{
	struct secret_row *rows = NULL;
	size_t n = 0;
	int r = store_secret_list(m->store, &rows, &n);

	if (r < 0) {
		log_error("cannot load secrets", "error", strerror(-r), NULL);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		_cleanup_free_ char *name = strdup(rows[i].name);
		r = secret_load(m, &rows[i]);
		if (r < 0)
			log_error(
				"cannot open a stored secret", "workspace", rows[i].workspace_id,
				"secret", name ? name : "", "error",
				r == -EBADMSG ?
					"it does not open with the secrets key (another key, or the row was altered)" :
					strerror(-r),
				NULL);
		secret_row_free(&rows[i]);
	}
	free(rows);
}
