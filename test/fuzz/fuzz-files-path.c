/* SPDX-License-Identifier: MIT */
/* Paths of the files API: the agent's lexical check (files_path_check(), src/agent/
 * files-path.c) and the controller's check of the same path in a mkdir and a rename body
 * (validate_file_mkdir(), validate_file_rename()). The first input byte picks the root (a
 * container's "/" or a host workspace's directory) and the workdir; the rest is the path.
 * Beyond memory errors:
 *   - the agent and the controller agree on what is a path at all (1-4096 bytes, no NUL);
 *   - an accepted path has a rel with no empty, "." or leading-slash component whose `..`
 *     never climb above the root, and an abs that is the lexically normalised absolute form,
 *     beneath the root, equal to the root plus rel normalised;
 *   - a path whose normalised absolute form is outside the root is refused with -EXDEV. */

#include <errno.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>

#include "agent/files-internal.h"
#include "api/validate.h"
#include "proto/agent-proto.h"
#include "fuzz-harness.h"

struct root_case {
	const char *prefix, *workdir;
};

static const struct root_case roots[] = {
	{ "", "/" },
	{ "", "/home/user/work" },
	{ "/home/ws", "/home/ws" },
	{ "/home/ws", "/home/ws/sub/dir" },
};

/* Lexical normalisation of an absolute path: "." and empty components dropped, ".." pops
 * (and stays at "/"). */
static char *normalise(const char *path)
{
	size_t n = strlen(path);
	char *out = malloc(n + 2);
	size_t len = 0;
	const char *p = path;

	FUZZ_CHECK(out);
	out[0] = '\0';
	while (*p) {
		while (*p == '/')
			p++;
		size_t c = strcspn(p, "/");
		if (c == 0)
			break;
		if (c == 1 && p[0] == '.') {
		} else if (c == 2 && p[0] == '.' && p[1] == '.') {
			while (len > 0 && out[len - 1] != '/')
				len--;
			if (len > 0)
				len--;
			out[len] = '\0';
		} else {
			out[len++] = '/';
			memcpy(out + len, p, c);
			len += c;
			out[len] = '\0';
		}
		p += c;
	}
	if (len == 0) {
		out[0] = '/';
		out[1] = '\0';
	}
	return out;
}

/* Whether abs names prefix or lies beneath it ("" is "/"). */
static bool beneath(const char *prefix, const char *abs)
{
	size_t n = strlen(prefix);

	if (n == 0)
		return abs[0] == '/';
	return strncmp(abs, prefix, n) == 0 && (abs[n] == '\0' || abs[n] == '/');
}

static void check_rel(const char *rel)
{
	long depth = 0;
	const char *p = rel;

	if (strcmp(rel, ".") == 0)
		return;
	FUZZ_CHECK(rel[0] && rel[0] != '/');
	for (;;) {
		size_t c = strcspn(p, "/");
		FUZZ_CHECK(c > 0);
		FUZZ_CHECK(!(c == 1 && p[0] == '.'));
		if (c == 2 && p[0] == '.' && p[1] == '.')
			depth--;
		else
			depth++;
		FUZZ_CHECK(depth >= 0);
		if (p[c] == '\0')
			break;
		p += c + 1;
	}
}

static void controller_check(const uint8_t *path, size_t len, bool agent_einval)
{
	json_t *mk = json_object(), *rn = json_object();
	struct file_mkdir_request m;
	struct file_rename_request r;
	struct station_error e1 = {}, e2 = {};

	FUZZ_CHECK(mk && rn);
	json_object_set_new(mk, "path", json_stringn_nocheck((const char *)path, len));
	json_object_set_new(rn, "from", json_stringn_nocheck((const char *)path, len));
	json_object_set_new(rn, "to", json_string("/tmp/x"));
	int rm = validate_file_mkdir(mk, &m, &e1);
	int rr = validate_file_rename(rn, &r, &e2);
	FUZZ_CHECK((rm == 0) == !agent_einval);
	FUZZ_CHECK((rr == 0) == !agent_einval);
	if (rm == 0)
		FUZZ_CHECK(strlen(m.path) == len && memcmp(m.path, path, len) == 0);
	else
		fuzz_check_error(&e1);
	if (rr != 0)
		fuzz_check_error(&e2);
	json_decref(mk);
	json_decref(rn);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const struct root_case *rc;
	struct files_path fp = {};
	const uint8_t *path;
	size_t len;
	int r;

	if (size < 1 || size > 8192)
		return 0;
	rc = &roots[data[0] % (sizeof roots / sizeof roots[0])];
	path = data + 1;
	len = size - 1;

	r = files_path_check(rc->prefix, rc->workdir, path, len, &fp);
	bool einval = len == 0 || len > PROTO_MAX_PATH || memchr(path, 0, len);
	controller_check(path, len, einval);
	if (einval) {
		FUZZ_CHECK(r == -EINVAL);
		return 0;
	}
	FUZZ_CHECK(r == 0 || r == -EXDEV);

	/* The absolute form, as the agent builds it, normalised lexically. */
	char *full = NULL;
	if (path[0] == '/')
		FUZZ_CHECK(asprintf(&full, "%.*s", (int)len, (const char *)path) >= 0);
	else
		FUZZ_CHECK(asprintf(&full, "%s/%.*s", rc->workdir, (int)len, (const char *)path) >=
			   0);
	char *norm = normalise(full);

	if (r == 0) {
		check_rel(fp.rel);
		FUZZ_CHECK(strcmp(fp.abs, norm) == 0);
		FUZZ_CHECK(beneath(rc->prefix, fp.abs));
		char *joined = NULL;
		FUZZ_CHECK(asprintf(&joined, "%s/%s", rc->prefix, fp.rel) >= 0);
		char *jn = normalise(joined);
		FUZZ_CHECK(strcmp(jn, fp.abs) == 0);
		free(jn);
		free(joined);
		files_path_done(&fp);
	}
	if (!beneath(rc->prefix, norm))
		FUZZ_CHECK(r == -EXDEV);
	free(norm);
	free(full);
	return 0;
}
