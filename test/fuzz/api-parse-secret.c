/* SPDX-License-Identifier: MIT */
/* The checks of a PUT …/secrets/{name} (daemon/manager-secret.c, static there: the manager
 * validates secrets itself) for fuzz-api-request.c. The manager's workspace lookups are not
 * reached from here; the stubs only satisfy the linker. */
#include "daemon/manager-secret.c"

#include "api-parse.h"

struct workspace *workspace_find(struct manager *m, const char *id)
{
	return NULL;
}

int workspace_lookup(struct manager *m, const char *id, struct workspace **ret,
		     struct station_error *e)
{
	*ret = NULL;
	station_error_set(e, -ENOENT, NULL, "no workspace \"%s\"", id);
	return -ENOENT;
}

int fuzz_secret_body(json_t *body, struct station_error *e)
{
	struct secret_input in = {};
	int r = secret_input_check(body, &in, e);
	if (r >= 0) {
		const char *v = json_string_value(in.value);
		if (!v || strlen(v) == 0 || strpbrk(v, "\r\n") || !in.username ||
		    strlen(in.username) > SECRET_USERNAME_MAX)
			abort(); /* what git's credential protocol would read as more lines */
		if (in.host && !host_valid(in.host))
			abort(); /* lower-cased once, it stays valid */
	}
	secret_input_done(&in);
	return r;
}

bool fuzz_secret_name_valid(const char *name)
{
	return name_valid(name);
}
