/* SPDX-License-Identifier: MIT */
/* What the API does with a request's path, query and JSON body before anything reaches the
 * manager (src/api/router.c, src/api/validate.c), and the egress rules a workspace's network
 * body carries (src/net/policy.c): the strict body parser, then the spec validator of the
 * endpoint (workspace create, network update, commands, services, terminals and their resize,
 * images, files mkdir and rename).
 *
 * Input: one selector byte, then the bytes. Selectors 0-11 take the rest as a request body
 * (validate_body(), then one endpoint's validator; a body accepted is walked so that every
 * string a spec borrows is read); 12 splits the rest at the first NUL into a method and a path
 * for router_match(); 13 into a query parameter's name and value (validate_query_u64()), a
 * Content-Type (validate_content_type()) and a file mode (validate_file_mode()); 14 is a
 * secret's body (validate_body(), then the manager's checks); 15 a secret's name.
 *
 * fuzz-max-len: 8192 */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "api-parse.h"
#include "api/router.h"
#include "api/validate.h"
#include "fuzz.h"
#include "net/policy.h"

/* Reads every byte of s: a borrowed string that outlived its owner is caught here. */
static size_t touch(const char *s)
{
	return s ? strlen(s) : 0;
}

static void check_error(int r, const struct station_error *e)
{
	if (r >= 0)
		return;
	/* Every refusal names its problem, and the API can map it to a status. */
	if (e->err == 0 || e->message[0] == '\0')
		abort();
	if (error_http_status(r) < 400 || !error_http_code(error_http_status(r)))
		abort();
	json_t *j = error_json(error_http_status(r), e->message, e->field);
	if (!j)
		abort();
	json_decref(j);
}

static void fuzz_body(unsigned which, const uint8_t *data, size_t size)
{
	struct station_error e = {};
	json_t *body = NULL;
	int r = validate_body(data, size, which & 1, &body, &e);
	check_error(r, &e);
	if (r < 0)
		return;
	if (!json_is_object(body))
		abort();

	e = (struct station_error){};
	switch (which % 12) {
	case 0: {
		struct workspace_spec s = {};
		r = validate_workspace_spec(body, &s, &e);
		break;
	}
	case 1: {
		json_t *egress = NULL;
		r = validate_network_update(body, &egress, &e);
		if (r >= 0 && egress) {
			struct net_policy *p = NULL;
			struct station_error pe = {};
			int k = net_policy_from_json(egress, &p, &pe);
			check_error(k, &pe);
			net_policy_free(p);
		}
		break;
	}
	case 2: {
		struct run_spec s = {};
		uint8_t *stdin_copy = NULL;
		r = validate_run_spec(body, &s, &stdin_copy, &e);
		if (r >= 0) {
			touch(s.command);
			touch(s.cwd);
			/* stdin: every byte readable, decoded or borrowed */
			uint8_t sum = 0;
			for (size_t i = 0; i < s.stdin_len; i++)
				sum ^= s.stdin_data[i];
			(void)sum;
			if (s.timeout_ms > API_MAX_TIMEOUT_MS ||
			    s.max_output_bytes > API_MAX_OUTPUT_BYTES)
				abort();
		}
		free(stdin_copy);
		break;
	}
	case 3: {
		struct service_spec s = {};
		r = validate_service_spec(body, &s, &e);
		break;
	}
	case 4: {
		struct terminal_spec s = {};
		r = validate_terminal_spec(body, &s, &e);
		break;
	}
	case 5:
	case 6: {
		unsigned cols = 0, rows = 0;
		r = validate_terminal_size(body, which % 12 == 6 ? "type" : NULL, &cols, &rows, &e);
		if (r >= 0 && (cols < 1 || rows < 1 || cols > API_MAX_TERMINAL_SIZE ||
			       rows > API_MAX_TERMINAL_SIZE))
			abort();
		break;
	}
	case 7: {
		struct image_request s = {};
		r = validate_image_request(body, &s, &e);
		if (r >= 0) {
			if (!s.path == !s.reference)
				abort(); /* exactly one of them */
			touch(s.path);
			touch(s.name);
			touch(s.reference);
			touch(s.registry);
		}
		break;
	}
	case 8: {
		struct file_mkdir_request s = {};
		r = validate_file_mkdir(body, &s, &e);
		if (r >= 0 && (touch(s.path) == 0 || touch(s.path) > API_MAX_FILE_PATH_BYTES))
			abort();
		break;
	}
	case 9: {
		struct file_rename_request s = {};
		r = validate_file_rename(body, &s, &e);
		if (r >= 0 && (touch(s.from) == 0 || touch(s.to) == 0))
			abort();
		break;
	}
	case 10: {
		json_t *env = json_object_get(body, "env");
		r = env ? validate_env(env, "env", &e) : 0;
		break;
	}
	case 11: {
		/* The egress rules on their own, as a create body's "egress" carries them. */
		json_t *egress = json_object_get(body, "egress");
		if (egress) {
			struct net_policy *p = NULL;
			r = net_policy_from_json(egress, &p, &e);
			net_policy_free(p);
		}
		break;
	}
	}
	check_error(r, &e);
	json_decref(body);
}

/* The rest as NUL-separated strings (a copy each, NUL-terminated). */
static char *take_string(const uint8_t **data, size_t *size)
{
	const uint8_t *end = memchr(*data, '\0', *size);
	size_t n = end ? (size_t)(end - *data) : *size;
	char *s = malloc(n + 1);
	if (!s)
		abort();
	memcpy(s, *data, n);
	s[n] = '\0';
	*data += end ? n + 1 : n;
	*size -= end ? n + 1 : n;
	return s;
}

static void fuzz_route(const uint8_t *data, size_t size)
{
	char *method = take_string(&data, &size);
	char *path = take_string(&data, &size);
	struct route_match m;
	const char *allow = NULL;
	int r = router_match(method, path, &m, &allow);
	if (r == 1) {
		if (m.endpoint >= _EP_MAX || !endpoint_to_string(m.endpoint))
			abort();
		if (strnlen(m.ws_id, sizeof(m.ws_id)) > ROUTE_ID_MAX ||
		    strnlen(m.run_id, sizeof(m.run_id)) > ROUTE_ID_MAX ||
		    strnlen(m.image, sizeof(m.image)) > ROUTE_IMAGE_MAX)
			abort();
		/* an id never lets a path climb: no '/', never "." or ".." */
		if (strchr(m.ws_id, '/') || m.ws_id[0] == '.' || strchr(m.run_id, '/') ||
		    m.run_id[0] == '.')
			abort();
	} else if (r == 0) {
		if (!allow || allow[0] == '\0')
			abort();
	} else if (r != -ENOENT) {
		abort();
	}
	free(method);
	free(path);
}

static void fuzz_query(const uint8_t *data, size_t size)
{
	char *name = take_string(&data, &size);
	char *value = take_string(&data, &size);
	char *rest = take_string(&data, &size);
	struct station_error e = {};
	uint64_t v = 0;
	uint64_t max = strlen(rest) % 2 ? UINT64_MAX : API_MAX_LIST_LIMIT;
	int r = validate_query_u64(name, value[0] == '-' ? NULL : value, 1, max, &v, &e);
	check_error(r, &e);
	if (r >= 0 && (v < 1 || v > max))
		abort();
	(void)validate_content_type(rest);
	e = (struct station_error){};
	r = validate_file_mode("mode", value, &v, &e);
	check_error(r, &e);
	if (r >= 0 && v > 07777)
		abort();
	free(name);
	free(value);
	free(rest);
}

static void fuzz_secret(const uint8_t *data, size_t size)
{
	struct station_error e = {};
	json_t *body = NULL;
	int r = validate_body(data, size, false, &body, &e);
	check_error(r, &e);
	if (r < 0)
		return;
	e = (struct station_error){};
	r = fuzz_secret_body(body, &e);
	check_error(r, &e);
	json_decref(body);
}

static void fuzz_secret_name(const uint8_t *data, size_t size)
{
	char *name = take_string(&data, &size);
	if (fuzz_secret_name_valid(name) && (strchr(name, '/') || strlen(name) == 0))
		abort();
	free(name);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	unsigned which = data[0] % 16;
	data++;
	size--;
	if (which < 12)
		fuzz_body(which, data, size);
	else if (which == 12)
		fuzz_route(data, size);
	else if (which == 13)
		fuzz_query(data, size);
	else if (which == 14)
		fuzz_secret(data, size);
	else
		fuzz_secret_name(data, size);
	return 0;
}
