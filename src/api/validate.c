/* SPDX-License-Identifier: MIT */
#include "validate.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "basic/cleanup.h"
#include "basic/util.h"
#include "image/image.h"

static const char *json_type_name(const json_t *v)
{
	switch (json_typeof(v)) {
	case JSON_OBJECT:
		return "an object";
	case JSON_ARRAY:
		return "an array";
	case JSON_STRING:
		return "a string";
	case JSON_INTEGER:
		return "an integer";
	case JSON_REAL:
		return "a real number";
	case JSON_TRUE:
	case JSON_FALSE:
		return "a boolean";
	case JSON_NULL:
		return "null";
	}
	return "unknown";
}

static int type_error(struct station_error *e, const char *field, const char *want, const json_t *v)
{
	return station_error_set(e, -EINVAL, field, "field \"%s\" must be %s, not %s", field, want,
				 json_type_name(v));
}

static bool has_nul(const json_t *s)
{
	return strlen(json_string_value(s)) != json_string_length(s);
}

int validate_body(const void *data, size_t n, bool allow_empty, json_t **ret,
		  struct station_error *e)
{
	json_error_t jerr;
	json_t *v;

	if (n == 0) {
		if (!allow_empty)
			return station_error_set(
				e, -EINVAL, NULL,
				"request body is empty: a JSON object is required");
		v = json_object();
		if (!v)
			return station_error_set(e, -ENOMEM, NULL, "out of memory");
		*ret = v;
		return 0;
	}

	v = json_loadb(data, n, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &jerr);
	if (!v) {
		/* jansson quotes the token it stopped at ("… near '\"ghp_…'"): a body may carry a
		 * secret, and this message reaches the debug log. A duplicated key is a name, kept. */
		char *near = strstr(jerr.text, " near ");
		if (near && strncmp(jerr.text, "duplicate object key", 20) != 0)
			*near = '\0';
		return station_error_set(e, -EINVAL, NULL,
					 "request body is not valid JSON: %s at line %d column %d",
					 jerr.text, jerr.line, jerr.column);
	}
	if (!json_is_object(v)) {
		station_error_set(e, -EINVAL, NULL, "request body must be a JSON object, not %s",
				  json_type_name(v));
		json_decref(v);
		return -EINVAL;
	}
	*ret = v;
	return 0;
}

static bool str_in(const char *s, const char *const *list)
{
	for (; *list; list++)
		if (strcmp(s, *list) == 0)
			return true;
	return false;
}

static int check_known_fields(json_t *body, const char *const *known, struct station_error *e)
{
	const char *key;
	json_t *v;

	json_object_foreach(body, key, v)
		if (!str_in(key, known))
			return station_error_set(e, -EINVAL, key, "unknown field \"%s\"", key);
	return 0;
}

/* A string field: absent leaves *ret untouched; present must be a string of 1..max bytes
 * without NUL (when allow_nul is false). */
static int get_string(json_t *body, const char *field, size_t max, bool allow_nul, const char **ret,
		      size_t *ret_len, struct station_error *e)
{
	json_t *v = json_object_get(body, field);

	if (!v)
		return 0;
	if (!json_is_string(v))
		return type_error(e, field, "a string", v);
	if (!allow_nul && has_nul(v))
		return station_error_set(e, -EINVAL, field, "field \"%s\" must not contain NUL",
					 field);
	if (json_string_length(v) > max)
		return station_error_set(e, -EINVAL, field,
					 "field \"%s\" is %zu bytes, more than the maximum %zu",
					 field, json_string_length(v), max);
	*ret = json_string_value(v);
	if (ret_len)
		*ret_len = json_string_length(v);
	return 1;
}

/* An integer member key of obj in [min, max], named label in errors; absent leaves *ret. */
static int get_uint_in(json_t *obj, const char *key, const char *label, uint64_t min, uint64_t max,
		       uint64_t *ret, struct station_error *e)
{
	json_t *v = json_object_get(obj, key);
	json_int_t i;

	if (!v)
		return 0;
	if (!json_is_integer(v))
		return type_error(e, label, "an integer", v);
	i = json_integer_value(v);
	if (i < 0 || (uint64_t)i < min || (uint64_t)i > max)
		return station_error_set(e, -EINVAL, label,
					 "field \"%s\" is %lld, out of range %llu-%llu", label,
					 (long long)i, (unsigned long long)min,
					 (unsigned long long)max);
	*ret = (uint64_t)i;
	return 1;
}

/* An integer field in [min, max]: absent leaves *ret untouched. */
static int get_uint(json_t *body, const char *field, uint64_t min, uint64_t max, uint64_t *ret,
		    struct station_error *e)
{
	return get_uint_in(body, field, field, min, max, ret, e);
}

bool validate_env_key(const char *key)
{
	if (!((*key >= 'A' && *key <= 'Z') || (*key >= 'a' && *key <= 'z') || *key == '_'))
		return false;
	for (key++; *key; key++)
		if (!((*key >= 'A' && *key <= 'Z') || (*key >= 'a' && *key <= 'z') ||
		      (*key >= '0' && *key <= '9') || *key == '_'))
			return false;
	return true;
}

int validate_env(json_t *env, const char *field, struct station_error *e)
{
	const char *key;
	json_t *v;

	if (!json_is_object(env))
		return type_error(e, field, "an object of strings", env);
	if (json_object_size(env) > API_MAX_ENV_ENTRIES)
		return station_error_set(e, -EINVAL, field,
					 "field \"%s\" has %zu entries, more than the maximum %u",
					 field, json_object_size(env), API_MAX_ENV_ENTRIES);
	json_object_foreach(env, key, v) {
		if (!validate_env_key(key))
			return station_error_set(e, -EINVAL, field,
						 "%s key \"%.64s\" is not a variable name "
						 "([A-Za-z_][A-Za-z0-9_]*)",
						 field, key);
		if (!json_is_string(v))
			return station_error_set(e, -EINVAL, field,
						 "%s value of \"%.64s\" must be a string, not %s",
						 field, key, json_type_name(v));
		if (has_nul(v))
			return station_error_set(e, -EINVAL, field,
						 "%s value of \"%.64s\" must not contain NUL",
						 field, key);
		if (strlen(key) + 1 + json_string_length(v) > API_MAX_ENV_ENTRY_BYTES)
			return station_error_set(e, -EINVAL, field,
						 "%s entry \"%.64s\" is longer than %u bytes",
						 field, key, API_MAX_ENV_ENTRY_BYTES);
	}
	return 0;
}

static int get_env(json_t *body, json_t **ret, struct station_error *e)
{
	json_t *v = json_object_get(body, "env");
	int r;

	if (!v)
		return 0;
	r = validate_env(v, "env", e);
	if (r < 0)
		return r;
	*ret = v;
	return 0;
}

static int get_cpus(json_t *body, double *ret, struct station_error *e)
{
	json_t *v = json_object_get(body, "cpus");
	double d;

	if (!v)
		return 0;
	if (!json_is_number(v))
		return type_error(e, "cpus", "a number", v);
	d = json_number_value(v);
	if (!(d >= 0.0 && d <= WORKSPACE_MAX_CPUS))
		return station_error_set(e, -EINVAL, "cpus",
					 "field \"cpus\" is %g, out of range 0-%g", d,
					 WORKSPACE_MAX_CPUS);
	*ret = d;
	return 0;
}

/* "snapshot" is not among them: a host workspace starts from a host workspace's snapshot */
static const char *const container_fields[] = { "image", "seccompProfile", "network", "egress",
						NULL };

/* Absent: the manager picks its default adapter, and the container fields may be given. */
static int get_adapter(json_t *body, const char **ret, struct station_error *e)
{
	const char *adapter = NULL;
	int r;

	r = get_string(body, "adapter", 64, false, &adapter, NULL, e);
	if (r <= 0)
		return r;
	if (strcmp(adapter, "host") != 0 && strcmp(adapter, "container") != 0)
		return station_error_set(e, -EINVAL, "adapter",
					 "unknown adapter \"%.64s\" (this build has \"host\" and "
					 "\"container\")",
					 adapter);
	if (strcmp(adapter, "host") == 0)
		for (const char *const *f = container_fields; *f; f++)
			if (json_object_get(body, *f))
				return station_error_set(e, -EINVAL, *f,
							 "field \"%s\" belongs to the container "
							 "adapter, not to \"host\"",
							 *f);
	*ret = adapter;
	return 0;
}

/* An image reference pinned by digest (image_ref_parse()); with need_name, a bare digest is
 * refused (a pull needs a repository). */
static int get_image_ref(json_t *body, const char *field, bool need_name, const char **ret,
			 struct station_error *e)
{
	struct station_error ref_error = {};
	struct image_ref ref;
	const char *s = NULL;
	int r;

	r = get_string(body, field, API_MAX_IMAGE_REF_BYTES, false, &s, NULL, e);
	if (r <= 0)
		return r;
	r = image_ref_parse(s, &ref, &ref_error);
	if (r < 0)
		return station_error_set(e, r, field, "field \"%s\": %s", field, ref_error.message);
	if (need_name && ref.name[0] == '\0')
		return station_error_set(e, -EINVAL, field,
					 "field \"%s\" is a bare digest: a pull needs the "
					 "repository too (name@sha256:<64 hex>)",
					 field);
	*ret = s;
	return 0;
}

static int get_absolute_path(json_t *body, const char *field, const char **ret,
			     struct station_error *e)
{
	const char *s = NULL;
	int r;

	r = get_string(body, field, API_MAX_PATH_BYTES, false, &s, NULL, e);
	if (r <= 0)
		return r;
	if (s[0] != '/')
		return station_error_set(e, -EINVAL, field,
					 "field \"%s\" must be an absolute path, not \"%.200s\"",
					 field, s);
	*ret = s;
	return 0;
}

/* A seccomp profile: a name ("default") or an absolute path; where it may come from is the
 * container adapter's check (the worker's profile directories). */
static int get_profile_ref(json_t *body, const char *field, const char **ret,
			   struct station_error *e)
{
	const char *s = NULL;
	int r;

	r = get_string(body, field, API_MAX_PATH_BYTES, false, &s, NULL, e);
	if (r <= 0)
		return r;
	if (!s[0] || (s[0] != '/' && strchr(s, '/')))
		return station_error_set(e, -EINVAL, field,
					 "field \"%s\" must be a profile name (\"default\") or an "
					 "absolute path, not \"%.200s\"",
					 field, s);
	*ret = s;
	return 0;
}

static int get_network(json_t *body, const char **ret, struct station_error *e)
{
	const char *s = NULL;
	int r;

	r = get_string(body, "network", 64, false, &s, NULL, e);
	if (r <= 0)
		return r;
	if (strcmp(s, "none") != 0 && strcmp(s, "bridge") != 0 && strcmp(s, "restricted") != 0)
		return station_error_set(e, -EINVAL, "network",
					 "unknown network \"%.64s\" (this build has \"none\", "
					 "\"bridge\" and \"restricted\")",
					 s);
	*ret = s;
	return 0;
}

/* An object whose rules the manager checks (net/policy.h); here only where it may appear. */
static int get_egress(json_t *body, const char *network, json_t **ret, struct station_error *e)
{
	json_t *v = json_object_get(body, "egress");

	if (!v)
		return 0;
	if (!json_is_object(v))
		return type_error(e, "egress", "an object like {\"allow\": [...]}", v);
	if (!network || strcmp(network, "restricted") != 0)
		return station_error_set(e, -EINVAL, "egress",
					 "field \"egress\" needs network \"restricted\" (network "
					 "is \"%s\")",
					 network ? network : "none");
	*ret = v;
	return 0;
}

static int get_container_fields(json_t *body, struct workspace_spec *w, struct station_error *e)
{
	int r;

	r = get_image_ref(body, "image", false, &w->image, e);
	if (r < 0)
		return r;
	r = get_profile_ref(body, "seccompProfile", &w->seccomp_profile, e);
	if (r < 0)
		return r;
	r = get_network(body, &w->network, e);
	if (r < 0)
		return r;
	return get_egress(body, w->network, &w->egress, e);
}

int validate_network_update(json_t *body, json_t **ret, struct station_error *e)
{
	static const char *const known[] = { "egress", NULL };
	json_t *v;
	int r;

	r = check_known_fields(body, known, e);
	if (r < 0)
		return r;
	v = json_object_get(body, "egress");
	if (!v)
		return station_error_set(e, -EINVAL, "egress", "field \"egress\" is required");
	if (!json_is_object(v))
		return type_error(e, "egress", "an object like {\"allow\": [...]}", v);
	*ret = v;
	return 0;
}

/* "autoResume": a boolean; "idleAction": "stop" (the default) or "pause". */
static int get_pause_fields(json_t *body, struct workspace_spec *w, struct station_error *e)
{
	json_t *auto_resume = json_object_get(body, "autoResume");
	const char *action = NULL;
	int r;

	if (auto_resume && !json_is_boolean(auto_resume))
		return type_error(e, "autoResume", "a boolean", auto_resume);
	w->auto_resume = json_is_true(auto_resume);
	r = get_string(body, "idleAction", 16, false, &action, NULL, e);
	if (r < 0)
		return r;
	if (!action || strcmp(action, "stop") == 0)
		w->idle_action = IDLE_ACTION_STOP;
	else if (strcmp(action, "pause") == 0)
		w->idle_action = IDLE_ACTION_PAUSE;
	else
		return station_error_set(e, -EINVAL, "idleAction",
					 "field \"idleAction\" is \"%s\": \"stop\" or \"pause\"",
					 action);
	return 0;
}

int validate_workspace_spec(json_t *body, struct workspace_spec *ret, struct station_error *e)
{
	static const char *const known[] = {
		"adapter",    "env",	       "cpus",		 "memoryMb",
		"pidsLimit",  "image",	       "seccompProfile", "network",
		"egress",     "idleTimeoutMs", "snapshot",	 "autoResume",
		"idleAction", "name",	       "labels",	 NULL
	};
	struct workspace_spec w = {};
	int r;

	r = check_known_fields(body, known, e);
	if (r < 0)
		return r;
	r = get_adapter(body, &w.adapter, e);
	if (r < 0)
		return r;
	r = get_env(body, &w.env, e);
	if (r < 0)
		return r;
	r = get_cpus(body, &w.cpus, e);
	if (r < 0)
		return r;
	r = get_uint(body, "memoryMb", 0, WORKSPACE_MAX_MEMORY_MB, &w.memory_mb, e);
	if (r < 0)
		return r;
	r = get_uint(body, "pidsLimit", 0, WORKSPACE_MAX_PIDS_LIMIT, &w.pids_limit, e);
	if (r < 0)
		return r;
	r = get_uint(body, "idleTimeoutMs", 0, WORKSPACE_MAX_IDLE_TIMEOUT_MS, &w.idle_timeout_ms,
		     e);
	if (r < 0)
		return r;
	if (w.idle_timeout_ms > 0 && w.idle_timeout_ms < WORKSPACE_MIN_IDLE_TIMEOUT_MS)
		return station_error_set(e, -EINVAL, "idleTimeoutMs",
					 "field \"idleTimeoutMs\" is %llu: 0 (never) or at least "
					 "%u ms",
					 (unsigned long long)w.idle_timeout_ms,
					 WORKSPACE_MIN_IDLE_TIMEOUT_MS);
	r = get_container_fields(body, &w, e);
	if (r < 0)
		return r;
	r = get_string(body, "snapshot", 64, false, &w.snapshot, NULL, e);
	if (r < 0)
		return r;
	r = get_pause_fields(body, &w, e);
	if (r < 0)
		return r;
	r = validate_workspace_labels(body, &w.name, &w.labels, e);
	if (r < 0)
		return r;
	*ret = w;
	return 0;
}

int validate_snapshot_spec(json_t *body, struct snapshot_spec *ret, struct station_error *e)
{
	static const char *const known[] = { "name", "memory", NULL };
	struct snapshot_spec s = {};
	json_t *memory = json_object_get(body, "memory");
	int r;

	r = check_known_fields(body, known, e);
	if (r < 0)
		return r;
	r = get_string(body, "name", SNAPSHOT_NAME_MAX, false, &s.name, NULL, e);
	if (r < 0)
		return r;
	if (s.name && !s.name[0])
		return station_error_set(e, -EINVAL, "name", "field \"name\" is empty");
	if (memory && !json_is_boolean(memory))
		return type_error(e, "memory", "a boolean", memory);
	s.memory = json_is_true(memory);
	*ret = s;
	return 0;
}

int validate_fork(json_t *body, unsigned *ret, struct station_error *e)
{
	static const char *const known[] = { "count", NULL };
	uint64_t count = 1;
	int r;

	r = check_known_fields(body, known, e);
	if (r < 0)
		return r;
	r = get_uint(body, "count", 1, FORK_MAX, &count, e);
	if (r < 0)
		return r;
	*ret = (unsigned)count;
	return 0;
}

static bool is_alnum(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

/* A label for listings: a repository-like name ("busybox", "station/tools:1"). */
static int get_image_name(json_t *body, const char **ret, struct station_error *e)
{
	const char *s = NULL;
	int r;

	r = get_string(body, "name", API_MAX_IMAGE_NAME_BYTES, false, &s, NULL, e);
	if (r <= 0)
		return r;
	if (!is_alnum(s[0]) ||
	    strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._/:-") !=
		    strlen(s))
		return station_error_set(e, -EINVAL, "name",
					 "field \"name\" must be [A-Za-z0-9._/:-] starting with a "
					 "letter or digit, like \"busybox\" or \"station/tools\"");
	*ret = s;
	return 0;
}

/* "host" or "host:port": letters, digits, '.', '-', a port of 1-5 digits. */
static bool registry_is_valid(const char *s)
{
	size_t host = strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-");
	size_t port;

	if (host == 0 || !is_alnum(s[0]))
		return false;
	if (s[host] == '\0')
		return true;
	if (s[host] != ':')
		return false;
	port = strspn(s + host + 1, "0123456789");
	return port >= 1 && port <= 5 && s[host + 1 + port] == '\0';
}

static int get_pull_fields(json_t *body, struct image_request *req, struct station_error *e)
{
	json_t *plain = json_object_get(body, "plainHttp");
	int r;

	r = get_image_ref(body, "reference", true, &req->reference, e);
	if (r < 0)
		return r;
	r = get_string(body, "registry", API_MAX_REGISTRY_BYTES, false, &req->registry, NULL, e);
	if (r < 0)
		return r;
	if (req->registry && !registry_is_valid(req->registry))
		return station_error_set(e, -EINVAL, "registry",
					 "field \"registry\" must be host or host:port, not "
					 "\"%.200s\"",
					 req->registry);
	if (plain && !json_is_boolean(plain))
		return type_error(e, "plainHttp", "a boolean", plain);
	req->plain_http = json_is_true(plain);
	return 0;
}

/* Exactly one of path (import) and reference (pull), and only the fields of that one. */
static int check_image_request_kind(json_t *body, bool *ret_pull, struct station_error *e)
{
	static const char *const import_only[] = { "name", NULL };
	static const char *const pull_only[] = { "registry", "plainHttp", NULL };
	bool path = json_object_get(body, "path"), ref = json_object_get(body, "reference");

	if (path && ref)
		return station_error_set(e, -EINVAL, NULL,
					 "fields \"path\" (import) and \"reference\" (pull) "
					 "exclude each other: give one");
	if (!path && !ref)
		return station_error_set(e, -EINVAL, NULL,
					 "field \"path\" (import) or \"reference\" (pull) is "
					 "required");
	for (const char *const *f = path ? pull_only : import_only; *f; f++)
		if (json_object_get(body, *f))
			return station_error_set(e, -EINVAL, *f,
						 "field \"%s\" belongs to %s, not to %s", *f,
						 path ? "a pull" : "an import",
						 path ? "an import" : "a pull");
	*ret_pull = ref;
	return 0;
}

int validate_image_request(json_t *body, struct image_request *ret, struct station_error *e)
{
	static const char *const known[] = { "path",	 "name",      "reference",
					     "registry", "plainHttp", NULL };
	struct image_request req = {};
	bool pull = false;
	int r;

	r = check_known_fields(body, known, e);
	if (r < 0)
		return r;
	r = check_image_request_kind(body, &pull, e);
	if (r < 0)
		return r;
	if (pull) {
		r = get_pull_fields(body, &req, e);
	} else {
		r = get_absolute_path(body, "path", &req.path, e);
		if (r >= 0)
			r = get_image_name(body, &req.name, e);
	}
	if (r < 0)
		return r;
	*ret = req;
	return 0;
}

static int decode_stdin(const char *s, size_t n, uint8_t **ret, size_t *ret_len,
			struct station_error *e)
{
	_cleanup_free_ uint8_t *buf = NULL;
	size_t len;
	int r;

	if (n / 4 * 3 > API_MAX_STDIN_BYTES + 2)
		return station_error_set(e, -EINVAL, "stdin",
					 "field \"stdin\" decodes to more than %u bytes",
					 API_MAX_STDIN_BYTES);
	r = base64_decode(s, n, &buf, &len);
	if (r < 0)
		return station_error_set(
			e, r == -ENOMEM ? -ENOMEM : -EINVAL, "stdin",
			"field \"stdin\" is not valid base64 (standard alphabet, padded)");
	if (len > API_MAX_STDIN_BYTES)
		return station_error_set(e, -EINVAL, "stdin",
					 "field \"stdin\" decodes to %zu bytes, more than %u", len,
					 API_MAX_STDIN_BYTES);
	*ret = TAKE_PTR(buf);
	*ret_len = len;
	return 0;
}

static int get_stdin(json_t *body, struct run_spec *spec, uint8_t **ret_buf,
		     struct station_error *e)
{
	const char *encoding = "utf-8", *s = NULL;
	size_t n = 0;
	int r;

	r = get_string(body, "stdinEncoding", 16, false, &encoding, NULL, e);
	if (r < 0)
		return r;
	if (strcmp(encoding, "utf-8") != 0 && strcmp(encoding, "base64") != 0)
		return station_error_set(e, -EINVAL, "stdinEncoding",
					 "field \"stdinEncoding\" must be \"utf-8\" or \"base64\"");
	/* base64 of 1 MiB is 4/3 larger; the decoded size is checked below. */
	r = get_string(body, "stdin", API_MAX_STDIN_BYTES / 3 * 4 + 4, true, &s, &n, e);
	if (r <= 0)
		return r;
	if (strcmp(encoding, "base64") == 0)
		return decode_stdin(s, n, ret_buf, &spec->stdin_len, e);
	if (n > API_MAX_STDIN_BYTES)
		return station_error_set(e, -EINVAL, "stdin",
					 "field \"stdin\" is %zu bytes, more than the maximum %u",
					 n, API_MAX_STDIN_BYTES);
	spec->stdin_data = (const uint8_t *)s;
	spec->stdin_len = n;
	return 0;
}

/* "command" (required, not empty) and "cwd" (optional, not empty), for runs and services. */
static int get_command(json_t *body, const char **command, const char **cwd,
		       struct station_error *e)
{
	int r;

	if (!json_object_get(body, "command"))
		return station_error_set(e, -EINVAL, "command", "field \"command\" is required");
	r = get_string(body, "command", API_MAX_COMMAND_BYTES, false, command, NULL, e);
	if (r < 0)
		return r;
	if ((*command)[0] == '\0')
		return station_error_set(e, -EINVAL, "command", "field \"command\" is empty");
	r = get_string(body, "cwd", API_MAX_CWD_BYTES, false, cwd, NULL, e);
	if (r < 0)
		return r;
	if (*cwd && (*cwd)[0] == '\0')
		return station_error_set(e, -EINVAL, "cwd",
					 "field \"cwd\" is empty (omit it for the workspace "
					 "directory)");
	return 0;
}

static int get_limits(json_t *body, struct run_spec *spec, struct station_error *e)
{
	int r;

	r = get_uint(body, "timeoutMs", 1, API_MAX_TIMEOUT_MS, &spec->timeout_ms, e);
	if (r < 0)
		return r;
	r = get_uint(body, "maxOutputBytes", API_MIN_OUTPUT_BYTES, API_MAX_OUTPUT_BYTES,
		     &spec->max_output_bytes, e);
	if (r < 0)
		return r;
	if (spec->max_output_bytes % 2 != 0)
		return station_error_set(e, -EINVAL, "maxOutputBytes",
					 "field \"maxOutputBytes\" must be even (head and tail "
					 "halves)");
	return 0;
}

int validate_run_spec(json_t *body, struct run_spec *ret, uint8_t **ret_stdin,
		      struct station_error *e)
{
	static const char *const known[] = {
		"command",	  "cwd", "env", "stdin", "stdinEncoding", "timeoutMs",
		"maxOutputBytes", NULL
	};
	_cleanup_free_ uint8_t *stdin_buf = NULL;
	struct run_spec spec = {};
	int r;

	r = check_known_fields(body, known, e);
	if (r < 0)
		return r;
	r = get_command(body, &spec.command, &spec.cwd, e);
	if (r < 0)
		return r;
	r = get_env(body, &spec.env, e);
	if (r < 0)
		return r;
	r = get_limits(body, &spec, e);
	if (r < 0)
		return r;
	r = get_stdin(body, &spec, &stdin_buf, e);
	if (r < 0)
		return r;
	if (stdin_buf)
		spec.stdin_data = stdin_buf;
	*ret = spec;
	*ret_stdin = TAKE_PTR(stdin_buf);
	return 0;
}

static int get_terminal_size(json_t *body, unsigned *ret_cols, unsigned *ret_rows,
			     struct station_error *e)
{
	uint64_t cols = 0, rows = 0;
	int r;

	if (!json_object_get(body, "cols"))
		return station_error_set(e, -EINVAL, "cols", "field \"cols\" is required");
	if (!json_object_get(body, "rows"))
		return station_error_set(e, -EINVAL, "rows", "field \"rows\" is required");
	r = get_uint(body, "cols", 1, API_MAX_TERMINAL_SIZE, &cols, e);
	if (r >= 0)
		r = get_uint(body, "rows", 1, API_MAX_TERMINAL_SIZE, &rows, e);
	if (r < 0)
		return r;
	*ret_cols = (unsigned)cols;
	*ret_rows = (unsigned)rows;
	return 0;
}

int validate_terminal_size(json_t *body, const char *known_extra, unsigned *ret_cols,
			   unsigned *ret_rows, struct station_error *e)
{
	const char *const known[] = { "cols", "rows", known_extra, NULL };
	int r = check_known_fields(body, known, e);

	return r < 0 ? r : get_terminal_size(body, ret_cols, ret_rows, e);
}

int validate_terminal_spec(json_t *body, struct terminal_spec *ret, struct station_error *e)
{
	static const char *const known[] = { "command", "cols", "rows", "cwd", "env", NULL };
	struct terminal_spec spec = {};
	int r;

	r = check_known_fields(body, known, e);
	if (r >= 0)
		r = get_terminal_size(body, &spec.cols, &spec.rows, e);
	if (r >= 0)
		r = get_string(body, "command", API_MAX_COMMAND_BYTES, false, &spec.command, NULL,
			       e);
	if (r >= 0 && spec.command && !spec.command[0])
		r = station_error_set(e, -EINVAL, "command",
				      "field \"command\" is empty (omit it for the login shell)");
	if (r >= 0)
		r = get_string(body, "cwd", API_MAX_CWD_BYTES, false, &spec.cwd, NULL, e);
	if (r >= 0 && spec.cwd && !spec.cwd[0])
		r = station_error_set(e, -EINVAL, "cwd",
				      "field \"cwd\" is empty (omit it for the workspace "
				      "directory)");
	if (r >= 0)
		r = get_env(body, &spec.env, e);
	if (r < 0)
		return r;
	*ret = spec;
	return 0;
}

int validate_query_u64(const char *name, const char *value, uint64_t min, uint64_t max,
		       uint64_t *ret, struct station_error *e)
{
	uint64_t v = 0;

	if (!value || !*value)
		return station_error_set(e, -EINVAL, name, "query parameter \"%s\" needs a value",
					 name);
	for (const char *p = value; *p; p++) {
		unsigned d = (unsigned char)*p - '0';

		if (d > 9)
			return station_error_set(e, -EINVAL, name,
						 "query parameter \"%s\" must be decimal digits",
						 name);
		if (v > (UINT64_MAX - d) / 10)
			return station_error_set(e, -EINVAL, name,
						 "query parameter \"%s\" is too large", name);
		v = v * 10 + d;
	}
	if (v < min || v > max)
		return station_error_set(e, -EINVAL, name,
					 "query parameter \"%s\" is %llu, out of range %llu-%llu",
					 name, (unsigned long long)v, (unsigned long long)min,
					 (unsigned long long)max);
	*ret = v;
	return 0;
}

bool validate_content_type(const char *value)
{
	static const char json[] = "application/json";
	const char *p;

	if (!value)
		return false;
	while (*value == ' ' || *value == '\t')
		value++;
	if (strncasecmp(value, json, sizeof json - 1) != 0)
		return false;
	p = value + sizeof json - 1;
	while (*p == ' ' || *p == '\t')
		p++;
	return *p == '\0' || *p == ';';
}

unsigned error_http_status(int err)
{
	switch (err) {
	case -EINVAL:
		return 400;
	case -EACCES:
		return 401;
	case -ENOENT:
		return 404;
	case -EBUSY:
	case -EINPROGRESS:
	case STATION_EPAUSED:
		return 409;
	case -E2BIG:
		return 413;
	case -EMEDIUMTYPE:
		return 415;
	case STATION_EFORBIDDEN:
		return 403;
	case -ESTALE:
		return 412;
	case -EPROTO:
		return 502;
	case -EAGAIN:
		return 429;
	case -ENOTSUP:
		return 501;
	case -ENOTCONN:
	case -EHOSTDOWN:
	case STATION_EFLEET:
		return 503;
	case -ENOSPC:
	case -EDQUOT:
		return 507;
	default:
		return 500;
	}
}

const char *error_http_code(unsigned status)
{
	switch (status) {
	case 400:
		return "invalid_argument";
	case 401:
		return "unauthorized";
	case 403:
		return "forbidden";
	case 404:
		return "not_found";
	case 405:
		return "method_not_allowed";
	case 409:
		return "conflict";
	case 413:
		return "payload_too_large";
	case 412:
		return "precondition_failed";
	case 415:
		return "unsupported_media_type";
	case 416:
		return "range_not_satisfiable";
	case 429:
		return "too_many_requests";
	case 501:
		return "not_implemented";
	case 502:
		return "bad_gateway";
	case 503:
		return "unavailable";
	case 504:
		return "gateway_timeout";
	case 507:
		return "insufficient_storage";
	default:
		return "internal";
	}
}

const char *error_code_of(int err)
{
	if (err == STATION_EPAUSED)
		return "paused";
	if (err == STATION_EFLEET)
		return "fleet_unavailable";
	return error_http_code(error_http_status(err));
}

/* A message may hold request bytes cut by snprintf in the middle of a UTF-8 sequence: keep
 * it readable rather than fail. */
static json_t *json_string_lossy(const char *s)
{
	_cleanup_free_ char *copy = NULL;
	json_t *v = json_string(s);

	if (v)
		return v;
	copy = strdup(s);
	if (!copy)
		return NULL;
	for (char *p = copy; *p; p++)
		if ((unsigned char)*p >= 0x80)
			*p = '?';
	return json_string(copy);
}

json_t *error_json(unsigned status, const char *message, const char *field)
{
	json_t *err, *body;

	err = json_object();
	body = json_object();
	if (!err || !body) {
		json_decref(err);
		json_decref(body);
		return NULL;
	}
	json_object_set_new(body, "error", err);
	json_object_set_new(err, "code", json_string(error_http_code(status)));
	json_object_set_new(err, "message",
			    json_string_lossy(message && *message ? message : "internal error"));
	if (field && *field)
		json_object_set_new(err, "field", json_string_lossy(field));
	return body;
}

/* ---- services ------------------------------------------------------------------------------ */

static bool service_name_ok(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > API_MAX_SERVICE_NAME_BYTES)
		return false;
	if (!((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= '0' && s[0] <= '9')))
		return false;
	return strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789._-") == n;
}

static int check_known_in(json_t *obj, const char *parent, const char *const *known,
			  struct station_error *e)
{
	const char *key;
	json_t *v;
	char label[64];

	json_object_foreach(obj, key, v)
		if (!str_in(key, known)) {
			snprintf(label, sizeof label, "%s.%.40s", parent, key);
			return station_error_set(e, -EINVAL, label, "unknown field \"%s\"", label);
		}
	return 0;
}

static int get_backoff(json_t *restart, struct service_spec *s, struct station_error *e)
{
	static const char *const known[] = { "multiplier", "maxDelayMs", NULL };
	json_t *b = json_object_get(restart, "backoff"), *mult;
	double d = 2.0;
	int r;

	if (!b)
		return 0;
	if (!json_is_object(b))
		return type_error(e, "restart.backoff", "an object", b);
	r = check_known_in(b, "restart.backoff", known, e);
	if (r < 0)
		return r;
	mult = json_object_get(b, "multiplier");
	if (mult && !json_is_number(mult))
		return type_error(e, "restart.backoff.multiplier", "a number", mult);
	if (mult)
		d = json_number_value(mult);
	if (!(d >= 1.0 && d <= 100.0))
		return station_error_set(e, -EINVAL, "restart.backoff.multiplier",
					 "field \"restart.backoff.multiplier\" is %g, out of range "
					 "1-100",
					 d);
	s->backoff_permille = (uint64_t)(d * 1000.0 + 0.5);
	s->max_delay_ms = API_DEFAULT_SERVICE_MAX_DELAY_MS;
	r = get_uint_in(b, "maxDelayMs", "restart.backoff.maxDelayMs", 0, API_MAX_SERVICE_DELAY_MS,
			&s->max_delay_ms, e);
	return r < 0 ? r : 0;
}

static int get_restart(json_t *body, struct service_spec *s, struct station_error *e)
{
	static const char *const known[] = { "policy",	"maxRestarts",	"delayMs",
					     "backoff", "resetAfterMs", NULL };
	json_t *restart = json_object_get(body, "restart"), *policy;
	int r;

	s->policy = SERVICE_POLICY_NO;
	s->max_restarts = API_DEFAULT_SERVICE_MAX_RESTARTS;
	s->delay_ms = API_DEFAULT_SERVICE_DELAY_MS;
	s->reset_after_ms = API_DEFAULT_SERVICE_RESET_AFTER_MS;
	if (!restart)
		return 0;
	if (!json_is_object(restart))
		return type_error(e, "restart", "an object", restart);
	r = check_known_in(restart, "restart", known, e);
	if (r < 0)
		return r;
	policy = json_object_get(restart, "policy");
	if (policy && !json_is_string(policy))
		return type_error(e, "restart.policy", "a string", policy);
	if (policy &&
	    (has_nul(policy) || service_policy_from_string(json_string_value(policy)) < 0))
		return station_error_set(e, -EINVAL, "restart.policy",
					 "field \"restart.policy\" must be \"no\", \"on-failure\" "
					 "or \"always\"");
	if (policy)
		s->policy = service_policy_from_string(json_string_value(policy));
	r = get_uint_in(restart, "maxRestarts", "restart.maxRestarts", 0, API_MAX_SERVICE_RESTARTS,
			&s->max_restarts, e);
	if (r >= 0)
		r = get_uint_in(restart, "delayMs", "restart.delayMs", 0, API_MAX_SERVICE_DELAY_MS,
				&s->delay_ms, e);
	if (r >= 0)
		r = get_uint_in(restart, "resetAfterMs", "restart.resetAfterMs", 0,
				API_MAX_SERVICE_RESET_AFTER_MS, &s->reset_after_ms, e);
	if (r >= 0)
		r = get_backoff(restart, s, e);
	return r < 0 ? r : 0;
}

/* "SIGTERM", "TERM" or a number from 1 to 64. */
static int get_stop_signal(json_t *body, int *ret, struct station_error *e)
{
	json_t *v = json_object_get(body, "stopSignal");
	const char *name;

	*ret = SIGTERM;
	if (!v)
		return 0;
	if (json_is_integer(v)) {
		if (json_integer_value(v) < 1 || json_integer_value(v) > 64)
			return station_error_set(e, -EINVAL, "stopSignal",
						 "field \"stopSignal\" is %lld, out of range 1-64",
						 (long long)json_integer_value(v));
		*ret = (int)json_integer_value(v);
		return 0;
	}
	if (!json_is_string(v))
		return type_error(e, "stopSignal", "a signal name or number", v);
	name = json_string_value(v);
	if (strncmp(name, "SIG", 3) == 0)
		name += 3;
	for (int sig = 1; sig < NSIG && !has_nul(v); sig++) {
		const char *abbrev = sigabbrev_np(sig);

		if (abbrev && strcmp(abbrev, name) == 0) {
			*ret = sig;
			return 0;
		}
	}
	return station_error_set(e, -EINVAL, "stopSignal",
				 "field \"stopSignal\" is not a signal name (like \"SIGTERM\" or "
				 "\"SIGINT\")");
}

static int get_service_strings(json_t *body, struct service_spec *s, struct station_error *e)
{
	int r;

	if (!json_object_get(body, "name"))
		return station_error_set(e, -EINVAL, "name", "field \"name\" is required");
	r = get_string(body, "name", 256, false, &s->name, NULL, e);
	if (r < 0)
		return r;
	if (!service_name_ok(s->name))
		return station_error_set(e, -EINVAL, "name",
					 "field \"name\" must match [a-z0-9][a-z0-9._-]{0,62}, not "
					 "\"%.64s\"",
					 s->name);
	return get_command(body, &s->command, &s->cwd, e);
}

int validate_service_spec(json_t *body, struct service_spec *ret, struct station_error *e)
{
	static const char *const known[] = { "name",	      "command",   "cwd",
					     "env",	      "restart",   "stopSignal",
					     "stopTimeoutMs", "autostart", NULL };
	struct service_spec s = { .stop_timeout_ms = API_DEFAULT_SERVICE_STOP_TIMEOUT_MS };
	json_t *autostart = json_object_get(body, "autostart");
	int r;

	r = check_known_fields(body, known, e);
	if (r >= 0)
		r = get_service_strings(body, &s, e);
	if (r >= 0)
		r = get_env(body, &s.env, e);
	if (r >= 0)
		r = get_restart(body, &s, e);
	if (r >= 0)
		r = get_stop_signal(body, &s.stop_signal, e);
	if (r >= 0)
		r = get_uint(body, "stopTimeoutMs", 0, API_MAX_SERVICE_STOP_TIMEOUT_MS,
			     &s.stop_timeout_ms, e);
	if (r >= 0 && autostart && !json_is_boolean(autostart))
		r = type_error(e, "autostart", "a boolean", autostart);
	if (r < 0)
		return r;
	s.autostart = json_is_true(autostart);
	*ret = s;
	return 0;
}

/* ---- ports --------------------------------------------------------------------------------- */

int validate_port_spec(json_t *body, struct port_spec *ret, struct station_error *e)
{
	static const char *const known[] = { "port", "access", "expiresInMs", NULL };
	struct port_spec s = {};
	const char *access = NULL;
	uint64_t port = 0;
	int r;

	r = check_known_fields(body, known, e);
	if (r >= 0)
		r = get_uint(body, "port", 1, 65535, &port, e);
	if (r == 0)
		return station_error_set(e, -EINVAL, "port",
					 "field \"port\" is required: the workspace's TCP port, 1 "
					 "to 65535");
	if (r >= 0)
		r = get_string(body, "access", 16, false, &access, NULL, e);
	if (r > 0 && strcmp(access, "token") != 0 && strcmp(access, "public") != 0)
		r = station_error_set(e, -EINVAL, "access",
				      "field \"access\" must be \"token\" or \"public\"");
	if (r >= 0)
		r = get_uint(body, "expiresInMs", 1, PREVIEW_MAX_EXPIRES_MS, &s.expires_in_ms, e);
	if (r < 0)
		return r;
	s.port = (uint16_t)port;
	s.public = access && strcmp(access, "public") == 0;
	*ret = s;
	return 0;
}

/* ---- files --------------------------------------------------------------------------------- */

int validate_file_mode(const char *field, const char *s, uint64_t *ret, struct station_error *e)
{
	uint64_t v = 0;
	size_t n = s ? strlen(s) : 0;

	if (n == 0 || n > 5)
		return station_error_set(e, -EINVAL, field,
					 "%s must be octal permission bits such as \"0644\"",
					 field);
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '7')
			return station_error_set(e, -EINVAL, field,
						 "%s must be octal permission bits such as "
						 "\"0644\"",
						 field);
		v = v * 8 + (uint64_t)(s[i] - '0');
	}
	if (v > 07777)
		return station_error_set(e, -EINVAL, field, "%s is over 07777", field);
	*ret = v;
	return 0;
}

static int get_file_path(json_t *body, const char *field, const char **ret, struct station_error *e)
{
	int r = get_string(body, field, SIZE_MAX, false, ret, NULL, e);

	if (r == 0)
		return station_error_set(e, -EINVAL, field, "field \"%s\" is required", field);
	if (r > 0 && (**ret == '\0' || strlen(*ret) > API_MAX_FILE_PATH_BYTES))
		return station_error_set(e, -EINVAL, field,
					 "invalid path: field \"%s\" must be 1 to %u bytes", field,
					 API_MAX_FILE_PATH_BYTES);
	return r < 0 ? r : 0;
}

static int get_flag(json_t *body, const char *field, bool *ret, struct station_error *e)
{
	json_t *v = json_object_get(body, field);

	if (!v)
		return 0;
	if (!json_is_boolean(v))
		return type_error(e, field, "a boolean", v);
	*ret = json_is_true(v);
	return 0;
}

int validate_file_mkdir(json_t *body, struct file_mkdir_request *ret, struct station_error *e)
{
	static const char *const known[] = { "path", "parents", "mode", NULL };
	const char *mode = NULL;
	int r = check_known_fields(body, known, e);

	*ret = (struct file_mkdir_request){};
	if (r >= 0)
		r = get_file_path(body, "path", &ret->path, e);
	if (r >= 0)
		r = get_flag(body, "parents", &ret->parents, e);
	if (r >= 0)
		r = get_string(body, "mode", 8, false, &mode, NULL, e);
	if (r > 0) {
		ret->has_mode = true;
		r = validate_file_mode("mode", mode, &ret->mode, e);
	}
	return r < 0 ? r : 0;
}

int validate_file_rename(json_t *body, struct file_rename_request *ret, struct station_error *e)
{
	static const char *const known[] = { "from", "to", "overwrite", NULL };
	int r = check_known_fields(body, known, e);

	*ret = (struct file_rename_request){ .overwrite = true };
	if (r >= 0)
		r = get_file_path(body, "from", &ret->from, e);
	if (r >= 0)
		r = get_file_path(body, "to", &ret->to, e);
	if (r >= 0)
		r = get_flag(body, "overwrite", &ret->overwrite, e);
	return r;
}

json_t *error_json_of(const struct station_error *e)
{
	json_t *body = error_json(error_http_status(e->err), e->message, e->field);

	if (body && e->err == STATION_EPAUSED)
		json_object_set_new(json_object_get(body, "error"), "code",
				    json_string(error_code_of(e->err)));
	return body;
}
