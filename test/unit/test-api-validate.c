/* SPDX-License-Identifier: MIT */
/* Strict request parsing (validate.c), the error -> HTTP mapping and path routing (router.c). */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "basic/cleanup.h"
#include "api/router.h"
#include "api/validate.h"
#include "basic/json-util.h"

/* ---- helpers ------------------------------------------------------------------------------ */

static json_t *body_ok(const char *text)
{
	struct station_error e = {};
	json_t *v = NULL;

	cr_assert_eq(validate_body(text, strlen(text), false, &v, &e), 0, "%s: %s", text,
		     e.message);
	cr_assert(json_is_object(v));
	return v;
}

static void body_bad(const char *text, size_t n, const char *message_part)
{
	struct station_error e = {};
	json_t *v = NULL;

	cr_assert_eq(validate_body(text, n, false, &v, &e), -EINVAL, "accepted: %s", text);
	cr_assert_null(v);
	cr_assert_eq(e.err, -EINVAL);
	cr_assert_str_eq(e.field, "");
	cr_assert(strstr(e.message, message_part), "message \"%s\" lacks \"%s\"", e.message,
		  message_part);
}

/* A body that parses but whose workspace fields are refused with err, naming field. */
static void ws_bad(const char *text, int err, const char *field)
{
	struct station_error e = {};
	struct workspace_spec w;
	json_t *v = body_ok(text);

	cr_assert_eq(validate_workspace_spec(v, &w, &e), err, "%s", text);
	cr_assert_eq(e.err, err);
	cr_assert_str_eq(e.field, field, "%s: field \"%s\"", text, e.field);
	cr_assert_neq(e.message[0], '\0');
	json_decref(v);
}

static void run_bad(const char *text, const char *field)
{
	struct station_error e = {};
	struct run_spec spec;
	uint8_t *buf = (uint8_t *)"untouched";
	json_t *v = body_ok(text);

	cr_assert_eq(validate_run_spec(v, &spec, &buf, &e), -EINVAL, "accepted: %.200s", text);
	cr_assert_eq(e.err, -EINVAL);
	cr_assert_str_eq(e.field, field, "%.200s: field \"%s\" (%s)", text, e.field, e.message);
	cr_assert_str_eq((const char *)buf, "untouched");
	json_decref(v);
}

static void run_ok(const char *text, struct run_spec *spec, uint8_t **buf, json_t **body)
{
	struct station_error e = {};

	*body = body_ok(text);
	cr_assert_eq(validate_run_spec(*body, spec, buf, &e), 0, "%.200s: %s", text, e.message);
}

/* ---- bodies ------------------------------------------------------------------------------- */

Test(body, malformed_json)
{
	body_bad("{\"command\":", 11, "not valid JSON");
	body_bad("{command:1}", 11, "not valid JSON");
	body_bad("{\"a\":1,}", 8, "not valid JSON");
	body_bad("\xff\xfe{}", 4, "not valid JSON");
}

Test(body, duplicate_key)
{
	body_bad("{\"command\":\"a\",\"command\":\"b\"}", 29, "duplicate");
}

Test(body, trailing_garbage)
{
	body_bad("{} {}", 5, "not valid JSON");
	body_bad("{}x", 3, "not valid JSON");
}

Test(body, not_an_object)
{
	body_bad("[]", 2, "must be a JSON object, not an array");
	body_bad("[{\"command\":\"x\"}]", 17, "must be a JSON object");
}

Test(body, top_level_scalars)
{
	body_bad("\"x\"", 3, "not valid JSON");
	body_bad("null", 4, "not valid JSON");
	body_bad("1", 1, "not valid JSON");
}

Test(body, huge_numbers_are_malformed)
{
	body_bad("{\"timeoutMs\":99999999999999999999999}", 37, "not valid JSON");
	body_bad("{\"cpus\":1e999}", 14, "not valid JSON");
}

Test(body, empty)
{
	struct station_error e = {};
	json_t *v = NULL;

	cr_assert_eq(validate_body("", 0, false, &v, &e), -EINVAL);
	cr_assert(strstr(e.message, "empty"));
	cr_assert_null(v);
	cr_assert_eq(validate_body("", 0, true, &v, &e), 0);
	cr_assert(json_is_object(v));
	cr_assert_eq(json_object_size(v), 0);
	json_decref(v);
}

Test(body, nul_in_key_is_malformed)
{
	body_bad("{\"a\\u0000b\":1}", 14, "not valid JSON");
}

/* ---- workspaces --------------------------------------------------------------------------- */

Test(workspace, empty_body_is_defaults)
{
	struct station_error e = {};
	struct workspace_spec w;
	json_t *v = body_ok("{}");

	memset(&w, 0xaa, sizeof w);
	cr_assert_eq(validate_workspace_spec(v, &w, &e), 0);
	cr_assert_null(w.adapter);
	cr_assert_null(w.env);
	cr_assert_eq(w.cpus, 0.0);
	cr_assert_eq(w.memory_mb, 0);
	cr_assert_eq(w.pids_limit, 0);
	cr_assert_null(w.image);
	cr_assert_null(w.seccomp_profile);
	cr_assert_null(w.network);
	cr_assert_null(w.egress);
	json_decref(v);
}

Test(workspace, every_field)
{
	struct station_error e = {};
	struct workspace_spec w;
	json_t *v = body_ok("{\"adapter\":\"host\",\"env\":{\"FOO\":\"bar\",\"_x9\":\"\"},"
			    "\"cpus\":1.5,\"memoryMb\":1024,\"pidsLimit\":128}");

	cr_assert_eq(validate_workspace_spec(v, &w, &e), 0, "%s", e.message);
	cr_assert_str_eq(w.adapter, "host");
	cr_assert_eq(json_object_size(w.env), 2);
	cr_assert_str_eq(json_string_value(json_object_get(w.env, "FOO")), "bar");
	cr_assert_eq(w.cpus, 1.5);
	cr_assert_eq(w.memory_mb, 1024);
	cr_assert_eq(w.pids_limit, 128);
	json_decref(v);
}

Test(workspace, range_edges_accepted)
{
	struct station_error e = {};
	struct workspace_spec w;
	json_t *v = body_ok("{\"cpus\":1024,\"memoryMb\":1048576,\"pidsLimit\":4194304}");

	cr_assert_eq(validate_workspace_spec(v, &w, &e), 0, "%s", e.message);
	cr_assert_eq(w.cpus, 1024.0);
	cr_assert_eq(w.memory_mb, 1048576);
	cr_assert_eq(w.pids_limit, 4194304);
	json_decref(v);
}

Test(workspace, unknown_field)
{
	ws_bad("{\"adapter\":\"host\",\"colour\":\"red\"}", -EINVAL, "colour");
	ws_bad("{\"Env\":{}}", -EINVAL, "Env");
}

#define HEX64 "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
#define DIGEST "sha256:" HEX64

/* A workspace body that validates; *body keeps the strings *w points into. */
static void ws_ok(const char *text, struct workspace_spec *w, json_t **body)
{
	struct station_error e = {};

	*body = body_ok(text);
	cr_assert_eq(validate_workspace_spec(*body, w, &e), 0, "%s: %s", text, e.message);
}

Test(workspace, adapter)
{
	struct workspace_spec w;
	json_t *v;

	ws_bad("{\"adapter\":\"vm\"}", -EINVAL, "adapter");
	ws_bad("{\"adapter\":\"\"}", -EINVAL, "adapter");
	ws_bad("{\"adapter\":\"Container\"}", -EINVAL, "adapter");
	ws_bad("{\"adapter\":1}", -EINVAL, "adapter");
	ws_bad("{\"adapter\":null}", -EINVAL, "adapter");
	/* the manager decides whether it can run containers */
	ws_ok("{\"adapter\":\"container\"}", &w, &v);
	cr_assert_str_eq(w.adapter, "container");
	cr_assert_null(w.image);
	cr_assert_null(w.seccomp_profile);
	cr_assert_null(w.network);
	json_decref(v);
	ws_ok("{\"adapter\":\"host\"}", &w, &v);
	cr_assert_str_eq(w.adapter, "host");
	json_decref(v);
}

Test(workspace, container_fields)
{
	struct workspace_spec w;
	json_t *v;

	ws_ok("{\"adapter\":\"container\",\"image\":\"busybox@" DIGEST "\","
	      "\"seccompProfile\":\"/usr/share/containers/seccomp.json\",\"network\":\"none\","
	      "\"cpus\":0.5,\"memoryMb\":256,\"pidsLimit\":64}",
	      &w, &v);
	cr_assert_str_eq(w.adapter, "container");
	cr_assert_str_eq(w.image, "busybox@" DIGEST);
	cr_assert_str_eq(w.seccomp_profile, "/usr/share/containers/seccomp.json");
	cr_assert_str_eq(w.network, "none");
	cr_assert_eq(w.cpus, 0.5);
	cr_assert_eq(w.memory_mb, 256);
	cr_assert_eq(w.pids_limit, 64);
	json_decref(v);
	/* without an adapter the server picks the default: the fields pass to the manager */
	ws_ok("{\"image\":\"" DIGEST "\"}", &w, &v);
	cr_assert_null(w.adapter);
	cr_assert_str_eq(w.image, DIGEST);
	json_decref(v);
}

Test(workspace, container_fields_on_host)
{
	ws_bad("{\"adapter\":\"host\",\"image\":\"x@" DIGEST "\"}", -EINVAL, "image");
	ws_bad("{\"adapter\":\"host\",\"seccompProfile\":\"/p.json\"}", -EINVAL, "seccompProfile");
	ws_bad("{\"adapter\":\"host\",\"network\":\"none\"}", -EINVAL, "network");
	ws_bad("{\"adapter\":\"host\",\"egress\":{}}", -EINVAL, "egress");
	/* positive control: the same fields without "host" */
	{
		struct workspace_spec w;
		json_t *v;

		ws_ok("{\"seccompProfile\":\"/p.json\",\"network\":\"none\"}", &w, &v);
		json_decref(v);
	}
}

/* a host workspace starts from a host workspace's snapshot: the manager says which it is */
Test(workspace, snapshot_on_host)
{
	struct workspace_spec w;
	json_t *v;

	ws_ok("{\"adapter\":\"host\",\"snapshot\":\"s-abc\"}", &w, &v);
	cr_assert_str_eq(w.adapter, "host");
	cr_assert_str_eq(w.snapshot, "s-abc");
	json_decref(v);
}

/* The message of a refused workspace body must contain part. */
static void ws_bad_says(const char *text, int err, const char *field, const char *part)
{
	struct station_error e = {};
	struct workspace_spec w;
	json_t *v = body_ok(text);

	cr_assert_eq(validate_workspace_spec(v, &w, &e), err, "%s", text);
	cr_assert_str_eq(e.field, field, "%s: field \"%s\"", text, e.field);
	cr_assert(strstr(e.message, part), "%s: message \"%s\" lacks \"%s\"", text, e.message,
		  part);
	json_decref(v);
}

Test(workspace, image_reference_shapes)
{
	static const char *const good[] = {
		DIGEST,
		"busybox@" DIGEST,
		"library/busybox@" DIGEST,
		"127.0.0.1:5000/station/tools@" DIGEST,
		"localhost/busybox@" DIGEST,
	};
	char body[700];

	for (size_t i = 0; i < ELEMENTSOF(good); i++) {
		struct workspace_spec w;
		json_t *v;

		snprintf(body, sizeof body, "{\"image\":\"%s\"}", good[i]);
		ws_ok(body, &w, &v);
		cr_assert_str_eq(w.image, good[i]);
		json_decref(v);
	}
	ws_bad_says("{\"image\":\"busybox:latest\"}", -EINVAL, "image", "pinned by digest");
	ws_bad_says("{\"image\":\"busybox\"}", -EINVAL, "image", "pinned by digest");
	ws_bad_says("{\"image\":\"busybox:1.36@" DIGEST "\"}", -EINVAL, "image",
		    "pinned by digest");
	ws_bad("{\"image\":\"busybox@sha256:0123\"}", -EINVAL, "image");
	ws_bad("{\"image\":\"busybox@sha256:" HEX64 "0\"}", -EINVAL, "image");
	ws_bad("{\"image\":\"sha256:0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef\"}",
	       -EINVAL, "image");
	ws_bad("{\"image\":\"busybox@sha512:" HEX64 "\"}", -EINVAL, "image");
	ws_bad("{\"image\":\"BusyBox@" DIGEST "\"}", -EINVAL, "image");
	ws_bad("{\"image\":\"@" DIGEST "\"}", -EINVAL, "image");
	ws_bad("{\"image\":\"\"}", -EINVAL, "image");
	ws_bad("{\"image\":1}", -EINVAL, "image");
	ws_bad("{\"image\":null}", -EINVAL, "image");
	ws_bad("{\"image\":\"busybox\\u0000@" DIGEST "\"}", -EINVAL, "image");
}

Test(workspace, image_reference_size)
{
	char body[1024];
	char name[600];

	memset(name, 'a', sizeof name - 1);
	name[sizeof name - 1] = '\0';
	/* 513 bytes in all: over the field's cap */
	snprintf(body, sizeof body, "{\"image\":\"%.*s@" DIGEST "\"}", 513 - 72, name);
	ws_bad_says(body, -EINVAL, "image", "more than the maximum 512");
}

Test(workspace, seccomp_profile)
{
	struct workspace_spec w;
	char body[4200];
	size_t n;
	json_t *v;

	ws_bad_says("{\"seccompProfile\":\"profiles/default.json\"}", -EINVAL, "seccompProfile",
		    "absolute path");
	ws_bad_says("{\"seccompProfile\":\"../outside\"}", -EINVAL, "seccompProfile",
		    "profile name");
	ws_bad("{\"seccompProfile\":\"\"}", -EINVAL, "seccompProfile");
	/* a name: looked up in the worker's profile directories by the container adapter */
	ws_ok("{\"seccompProfile\":\"default\"}", &w, &v);
	cr_assert_str_eq(w.seccomp_profile, "default");
	json_decref(v);
	ws_bad("{\"seccompProfile\":\"/a\\u0000b\"}", -EINVAL, "seccompProfile");
	ws_bad("{\"seccompProfile\":[\"/a\"]}", -EINVAL, "seccompProfile");
	n = (size_t)snprintf(body, sizeof body, "{\"seccompProfile\":\"/");
	memset(body + n, 'p', 4095);
	snprintf(body + n + 4095, sizeof body - n - 4095, "\"}");
	ws_ok(body, &w, &v); /* 4096 bytes: the maximum */
	cr_assert_eq(strlen(w.seccomp_profile), 4096);
	json_decref(v);
	snprintf(body + n + 4095, sizeof body - n - 4095, "q\"}");
	ws_bad(body, -EINVAL, "seccompProfile");
}

Test(workspace, network)
{
	struct workspace_spec w;
	json_t *v;

	ws_ok("{\"network\":\"none\"}", &w, &v);
	cr_assert_str_eq(w.network, "none");
	cr_assert_null(w.egress);
	json_decref(v);
	ws_ok("{\"network\":\"bridge\"}", &w, &v);
	cr_assert_str_eq(w.network, "bridge");
	cr_assert_null(w.egress);
	json_decref(v);
	ws_ok("{\"network\":\"restricted\"}", &w, &v); /* no egress: deny all */
	cr_assert_str_eq(w.network, "restricted");
	cr_assert_null(w.egress);
	json_decref(v);
	ws_bad_says("{\"network\":\"host\"}", -EINVAL, "network",
		    "unknown network \"host\" (this build has \"none\", \"bridge\" and "
		    "\"restricted\")");
	ws_bad("{\"network\":\"None\"}", -EINVAL, "network");
	ws_bad("{\"network\":\"\"}", -EINVAL, "network");
	ws_bad("{\"network\":false}", -EINVAL, "network");
}

/* The rules are the manager's to check (net/policy.h); the API checks where egress may be. */
Test(workspace, egress)
{
	struct workspace_spec w;
	json_t *v;

	ws_ok("{\"network\":\"restricted\",\"egress\":{\"allow\":[{\"domain\":\"github.com\"}]}}",
	      &w, &v);
	cr_assert_str_eq(w.network, "restricted");
	cr_assert(json_is_object(w.egress));
	cr_assert_eq(w.egress, json_object_get(v, "egress")); /* borrowed from the body */
	json_decref(v);
	ws_bad_says("{\"network\":\"bridge\",\"egress\":{}}", -EINVAL, "egress",
		    "field \"egress\" needs network \"restricted\" (network is \"bridge\")");
	ws_bad_says("{\"network\":\"none\",\"egress\":{}}", -EINVAL, "egress",
		    "(network is \"none\")");
	ws_bad_says("{\"egress\":{}}", -EINVAL, "egress", "(network is \"none\")");
	ws_bad_says("{\"network\":\"restricted\",\"egress\":[]}", -EINVAL, "egress",
		    "field \"egress\" must be an object like {\"allow\": [...]}, not an array");
	ws_bad("{\"network\":\"restricted\",\"egress\":null}", -EINVAL, "egress");
	ws_bad("{\"network\":\"restricted\",\"egress\":\"github.com\"}", -EINVAL, "egress");
}

Test(workspace, network_update)
{
	struct station_error e = {};
	json_t *egress = NULL, *v = body_ok("{\"egress\":{\"allow\":[]}}");

	cr_assert_eq(validate_network_update(v, &egress, &e), 0, "%s", e.message);
	cr_assert_eq(egress, json_object_get(v, "egress"));
	json_decref(v);

	const char *bad[][2] = {
		{ "{}", "egress" },
		{ "{\"egress\":[]}", "egress" },
		{ "{\"egress\":null}", "egress" },
		{ "{\"allow\":[]}", "allow" },
		{ "{\"egress\":{},\"mode\":\"bridge\"}", "mode" },
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		struct station_error e2 = {};

		egress = NULL;
		v = body_ok(bad[i][0]);
		cr_assert_eq(validate_network_update(v, &egress, &e2), -EINVAL, "%s", bad[i][0]);
		cr_assert_str_eq(e2.field, bad[i][1], "%s: %s", bad[i][0], e2.field);
		cr_assert_null(egress);
		json_decref(v);
	}
}

Test(workspace, limits_out_of_range)
{
	ws_bad("{\"cpus\":-0.5}", -EINVAL, "cpus");
	ws_bad("{\"cpus\":1024.01}", -EINVAL, "cpus");
	ws_bad("{\"cpus\":\"2\"}", -EINVAL, "cpus");
	ws_bad("{\"cpus\":null}", -EINVAL, "cpus");
	ws_bad("{\"memoryMb\":1048577}", -EINVAL, "memoryMb");
	ws_bad("{\"memoryMb\":-1}", -EINVAL, "memoryMb");
	ws_bad("{\"memoryMb\":1.5}", -EINVAL, "memoryMb");
	ws_bad("{\"memoryMb\":true}", -EINVAL, "memoryMb");
	ws_bad("{\"pidsLimit\":4194305}", -EINVAL, "pidsLimit");
	ws_bad("{\"pidsLimit\":9223372036854775807}", -EINVAL, "pidsLimit");
}

Test(workspace, env_refused)
{
	ws_bad("{\"env\":{\"1A\":\"x\"}}", -EINVAL, "env");
	ws_bad("{\"env\":{\"A-B\":\"x\"}}", -EINVAL, "env");
	ws_bad("{\"env\":{\"\":\"x\"}}", -EINVAL, "env");
	ws_bad("{\"env\":{\"A=B\":\"x\"}}", -EINVAL, "env");
	ws_bad("{\"env\":{\"A\":1}}", -EINVAL, "env");
	ws_bad("{\"env\":{\"A\":null}}", -EINVAL, "env");
	ws_bad("{\"env\":{\"A\":[\"x\"]}}", -EINVAL, "env");
	ws_bad("{\"env\":{\"A\":\"x\\u0000y\"}}", -EINVAL, "env");
	ws_bad("{\"env\":[\"A=x\"]}", -EINVAL, "env");
	ws_bad("{\"env\":\"A=x\"}", -EINVAL, "env");
	ws_bad("{\"env\":null}", -EINVAL, "env");
}

static char *env_body(unsigned entries)
{
	size_t size = 32 + entries * 16;
	char *s = malloc(size), *p = s;

	cr_assert_not_null(s);
	p += snprintf(p, size, "{\"env\":{");
	for (unsigned i = 0; i < entries; i++)
		p += snprintf(p, size - (size_t)(p - s), "%s\"K%u\":\"v\"", i ? "," : "", i);
	snprintf(p, size - (size_t)(p - s), "}}");
	return s;
}

Test(workspace, env_entries_limit)
{
	_cleanup_free_ char *ok = env_body(256), *bad = env_body(257);
	struct station_error e = {};
	struct workspace_spec w;
	json_t *v = body_ok(ok);

	cr_assert_eq(validate_workspace_spec(v, &w, &e), 0, "%s", e.message);
	cr_assert_eq(json_object_size(w.env), 256);
	json_decref(v);
	ws_bad(bad, -EINVAL, "env");
}

Test(workspace, env_key_rule)
{
	cr_assert(validate_env_key("A"));
	cr_assert(validate_env_key("_"));
	cr_assert(validate_env_key("path_2"));
	cr_assert(validate_env_key("ZZ_top9"));
	cr_assert_not(validate_env_key(""));
	cr_assert_not(validate_env_key("9A"));
	cr_assert_not(validate_env_key("A B"));
	cr_assert_not(validate_env_key("é"));
	cr_assert_not(validate_env_key("A.B"));
}

/* ---- runs --------------------------------------------------------------------------------- */

Test(run, every_field)
{
	struct run_spec spec;
	uint8_t *buf = NULL;
	json_t *v;

	run_ok("{\"command\":\"echo hi\",\"cwd\":\"sub/dir\",\"env\":{\"K\":\"V\"},"
	       "\"stdin\":\"text\",\"stdinEncoding\":\"utf-8\",\"timeoutMs\":10000,"
	       "\"maxOutputBytes\":1048576}",
	       &spec, &buf, &v);
	cr_assert_str_eq(spec.command, "echo hi");
	cr_assert_str_eq(spec.cwd, "sub/dir");
	cr_assert_str_eq(json_string_value(json_object_get(spec.env, "K")), "V");
	cr_assert_eq(spec.stdin_len, 4);
	cr_assert_eq(memcmp(spec.stdin_data, "text", 4), 0);
	cr_assert_null(buf);
	cr_assert_eq(spec.timeout_ms, 10000);
	cr_assert_eq(spec.max_output_bytes, 1048576);
	json_decref(v);
}

Test(run, command_only_is_defaults)
{
	struct run_spec spec;
	uint8_t *buf = NULL;
	json_t *v;

	run_ok("{\"command\":\"true\"}", &spec, &buf, &v);
	cr_assert_str_eq(spec.command, "true");
	cr_assert_null(spec.cwd);
	cr_assert_null(spec.env);
	cr_assert_null(spec.stdin_data);
	cr_assert_eq(spec.stdin_len, 0);
	cr_assert_eq(spec.timeout_ms, 0);
	cr_assert_eq(spec.max_output_bytes, 0);
	cr_assert_null(buf);
	json_decref(v);
}

Test(run, stdin_base64)
{
	struct run_spec spec;
	uint8_t *buf = NULL;
	json_t *v;

	run_ok("{\"command\":\"cat\",\"stdin\":\"AGhpAP8=\",\"stdinEncoding\":\"base64\"}", &spec,
	       &buf, &v);
	cr_assert_not_null(buf);
	cr_assert_eq(spec.stdin_data, buf);
	cr_assert_eq(spec.stdin_len, 5);
	cr_assert_eq(memcmp(spec.stdin_data, "\0hi\0\xff", 5), 0);
	free(buf);
	json_decref(v);
}

Test(run, stdin_utf8_keeps_nul)
{
	struct run_spec spec;
	uint8_t *buf = NULL;
	json_t *v;

	run_ok("{\"command\":\"cat\",\"stdin\":\"a\\u0000b\"}", &spec, &buf, &v);
	cr_assert_eq(spec.stdin_len, 3);
	cr_assert_eq(memcmp(spec.stdin_data, "a\0b", 3), 0);
	json_decref(v);
}

Test(run, stdin_base64_invalid)
{
	run_bad("{\"command\":\"cat\",\"stdin\":\"!!!!\",\"stdinEncoding\":\"base64\"}", "stdin");
	run_bad("{\"command\":\"cat\",\"stdin\":\"aGk\",\"stdinEncoding\":\"base64\"}", "stdin");
	run_bad("{\"command\":\"cat\",\"stdin\":\"aG=k\",\"stdinEncoding\":\"base64\"}", "stdin");
	run_bad("{\"command\":\"cat\",\"stdin\":\"aGk=\\n\",\"stdinEncoding\":\"base64\"}",
		"stdin");
	run_bad("{\"command\":\"cat\",\"stdin\":\"aGk=aGk=\",\"stdinEncoding\":\"base64\"}",
		"stdin");
}

Test(run, stdin_encoding)
{
	run_bad("{\"command\":\"cat\",\"stdin\":\"x\",\"stdinEncoding\":\"latin1\"}",
		"stdinEncoding");
	run_bad("{\"command\":\"cat\",\"stdinEncoding\":\"UTF-8\"}", "stdinEncoding");
	run_bad("{\"command\":\"cat\",\"stdinEncoding\":null}", "stdinEncoding");
	run_bad("{\"command\":\"cat\",\"stdin\":5}", "stdin");
	run_bad("{\"command\":\"cat\",\"stdin\":null}", "stdin");
}

static char *big_string_body(const char *field, size_t n, const char *extra)
{
	size_t size = n + 128;
	char *s = malloc(size), *p = s;

	cr_assert_not_null(s);
	p += snprintf(p, size, "{\"command\":\"x\",%s\"%s\":\"", extra, field);
	memset(p, 'a', n);
	p += n;
	snprintf(p, size - (size_t)(p - s), "\"}");
	return s;
}

Test(run, stdin_size)
{
	_cleanup_free_ char *ok = big_string_body("stdin", 1024 * 1024, "");
	_cleanup_free_ char *bad = big_string_body("stdin", 1024 * 1024 + 1, "");
	/* 1 MiB + 3 bytes decoded: 1398104 characters of base64 */
	_cleanup_free_ char *bad64 =
		big_string_body("stdin", 1398104, "\"stdinEncoding\":\"base64\",");
	struct run_spec spec;
	uint8_t *buf = NULL;
	json_t *v;

	run_ok(ok, &spec, &buf, &v);
	cr_assert_eq(spec.stdin_len, 1024 * 1024);
	json_decref(v);
	run_bad(bad, "stdin");
	run_bad(bad64, "stdin");
}

Test(run, command_refused)
{
	run_bad("{}", "command");
	run_bad("{\"cwd\":\"/\"}", "command");
	run_bad("{\"command\":\"\"}", "command");
	run_bad("{\"command\":null}", "command");
	run_bad("{\"command\":[\"echo\",\"hi\"]}", "command");
	run_bad("{\"command\":42}", "command");
	run_bad("{\"command\":\"echo \\u0000 hi\"}", "command");
}

Test(run, command_size)
{
	_cleanup_free_ char *ok = NULL, *bad = NULL;
	struct run_spec spec;
	uint8_t *buf = NULL;
	json_t *v;

	ok = malloc(256 * 1024 + 32);
	bad = malloc(256 * 1024 + 32);
	cr_assert(ok && bad);
	memcpy(ok, "{\"command\":\"", 12);
	memset(ok + 12, 'a', 256 * 1024);
	memcpy(ok + 12 + 256 * 1024, "\"}", 3);
	memcpy(bad, "{\"command\":\"", 12);
	memset(bad + 12, 'a', 256 * 1024 + 1);
	memcpy(bad + 12 + 256 * 1024 + 1, "\"}", 3);
	run_ok(ok, &spec, &buf, &v);
	cr_assert_eq(strlen(spec.command), 256 * 1024);
	json_decref(v);
	run_bad(bad, "command");
}

Test(run, cwd_refused)
{
	run_bad("{\"command\":\"x\",\"cwd\":\"\"}", "cwd");
	run_bad("{\"command\":\"x\",\"cwd\":1}", "cwd");
	run_bad("{\"command\":\"x\",\"cwd\":null}", "cwd");
	run_bad("{\"command\":\"x\",\"cwd\":\"/tmp\\u0000/x\"}", "cwd");
}

Test(run, timeout_range)
{
	struct run_spec spec;
	uint8_t *buf = NULL;
	json_t *v;

	run_bad("{\"command\":\"x\",\"timeoutMs\":0}", "timeoutMs");
	run_bad("{\"command\":\"x\",\"timeoutMs\":86400001}", "timeoutMs");
	run_bad("{\"command\":\"x\",\"timeoutMs\":-5}", "timeoutMs");
	run_bad("{\"command\":\"x\",\"timeoutMs\":1.5}", "timeoutMs");
	run_bad("{\"command\":\"x\",\"timeoutMs\":1e3}", "timeoutMs");
	run_bad("{\"command\":\"x\",\"timeoutMs\":\"100\"}", "timeoutMs");
	run_bad("{\"command\":\"x\",\"timeoutMs\":true}", "timeoutMs");
	run_bad("{\"command\":\"x\",\"timeoutMs\":null}", "timeoutMs");
	run_bad("{\"command\":\"x\",\"timeoutMs\":9223372036854775807}", "timeoutMs");
	run_bad("{\"command\":\"x\",\"timeoutMs\":-9223372036854775808}", "timeoutMs");
	run_ok("{\"command\":\"x\",\"timeoutMs\":1}", &spec, &buf, &v);
	cr_assert_eq(spec.timeout_ms, 1);
	json_decref(v);
	run_ok("{\"command\":\"x\",\"timeoutMs\":86400000}", &spec, &buf, &v);
	cr_assert_eq(spec.timeout_ms, 86400000);
	json_decref(v);
}

Test(run, output_bytes_range)
{
	struct run_spec spec;
	uint8_t *buf = NULL;
	json_t *v;

	run_bad("{\"command\":\"x\",\"maxOutputBytes\":0}", "maxOutputBytes");
	run_bad("{\"command\":\"x\",\"maxOutputBytes\":1}", "maxOutputBytes");
	run_bad("{\"command\":\"x\",\"maxOutputBytes\":3}", "maxOutputBytes");
	run_bad("{\"command\":\"x\",\"maxOutputBytes\":8388610}", "maxOutputBytes");
	run_bad("{\"command\":\"x\",\"maxOutputBytes\":131071}", "maxOutputBytes");
	run_ok("{\"command\":\"x\",\"maxOutputBytes\":2}", &spec, &buf, &v);
	cr_assert_eq(spec.max_output_bytes, 2);
	json_decref(v);
	run_ok("{\"command\":\"x\",\"maxOutputBytes\":8388608}", &spec, &buf, &v);
	cr_assert_eq(spec.max_output_bytes, 8388608);
	json_decref(v);
}

Test(run, env_refused)
{
	run_bad("{\"command\":\"x\",\"env\":{\"BAD KEY\":\"v\"}}", "env");
	run_bad("{\"command\":\"x\",\"env\":{\"K\":false}}", "env");
	run_bad("{\"command\":\"x\",\"env\":{\"K\":{}}}", "env");
}

Test(run, env_entry_size)
{
	/* "K=" plus the value must fit 32 KiB */
	const size_t size = 40 * 1024;
	_cleanup_free_ char *s = malloc(size);
	char *p = s;

	cr_assert_not_null(s);
	p += snprintf(p, size, "{\"command\":\"x\",\"env\":{\"K\":\"");
	memset(p, 'v', 32 * 1024 - 1);
	p += 32 * 1024 - 1;
	snprintf(p, size - (size_t)(p - s), "\"}}");
	run_bad(s, "env");
}

Test(run, unknown_field)
{
	run_bad("{\"command\":\"x\",\"timeout\":5}", "timeout");
	run_bad("{\"command\":\"x\",\"waitMs\":5}", "waitMs");
}

/* ---- query parameters --------------------------------------------------------------------- */

static void query_bad(const char *value, uint64_t min, uint64_t max)
{
	struct station_error e = {};
	uint64_t v = 4242;

	cr_assert_eq(validate_query_u64("waitMs", value, min, max, &v, &e), -EINVAL,
		     "accepted \"%s\"", value ? value : "(null)");
	cr_assert_str_eq(e.field, "waitMs");
	cr_assert_eq(v, 4242);
}

static uint64_t query_ok(const char *value, uint64_t min, uint64_t max)
{
	struct station_error e = {};
	uint64_t v = 4242;

	cr_assert_eq(validate_query_u64("waitMs", value, min, max, &v, &e), 0, "%s: %s", value,
		     e.message);
	return v;
}

Test(query, digits_only)
{
	cr_assert_eq(query_ok("0", 0, UINT64_MAX), 0);
	cr_assert_eq(query_ok("60000", 0, UINT64_MAX), 60000);
	cr_assert_eq(query_ok("007", 0, UINT64_MAX), 7);
	cr_assert_eq(query_ok("18446744073709551615", 0, UINT64_MAX), UINT64_MAX);
	query_bad(NULL, 0, UINT64_MAX);
	query_bad("", 0, UINT64_MAX);
	query_bad("-1", 0, UINT64_MAX);
	query_bad("+1", 0, UINT64_MAX);
	query_bad(" 1", 0, UINT64_MAX);
	query_bad("1 ", 0, UINT64_MAX);
	query_bad("1e3", 0, UINT64_MAX);
	query_bad("0x10", 0, UINT64_MAX);
	query_bad("1.5", 0, UINT64_MAX);
	query_bad("abc", 0, UINT64_MAX);
	query_bad("18446744073709551616", 0, UINT64_MAX);
	query_bad("99999999999999999999999999", 0, UINT64_MAX);
}

Test(query, range)
{
	cr_assert_eq(query_ok("1", 1, 1000), 1);
	cr_assert_eq(query_ok("1000", 1, 1000), 1000);
	query_bad("0", 1, 1000);
	query_bad("1001", 1, 1000);
}

Test(content_type, json_only)
{
	cr_assert(validate_content_type("application/json"));
	cr_assert(validate_content_type("Application/JSON"));
	cr_assert(validate_content_type("application/json; charset=utf-8"));
	cr_assert(validate_content_type("application/json ;charset=UTF-8"));
	cr_assert_not(validate_content_type(NULL));
	cr_assert_not(validate_content_type(""));
	cr_assert_not(validate_content_type("text/plain"));
	cr_assert_not(validate_content_type("application/jsonp"));
	cr_assert_not(validate_content_type("application/json-patch+json"));
	cr_assert_not(validate_content_type("application/x-www-form-urlencoded"));
	cr_assert_not(validate_content_type("multipart/form-data; boundary=x"));
}

/* ---- errors ------------------------------------------------------------------------------- */

Test(errors, errno_to_status_and_code)
{
	static const struct {
		int err;
		unsigned status;
		const char *code;
	} table[] = {
		{ -EINVAL, 400, "invalid_argument" },
		{ -EACCES, 401, "unauthorized" },
		{ -ENOENT, 404, "not_found" },
		{ -EBUSY, 409, "conflict" },
		{ -E2BIG, 413, "payload_too_large" },
		{ -EMEDIUMTYPE, 415, "unsupported_media_type" },
		{ -EAGAIN, 429, "too_many_requests" },
		{ -ENOTSUP, 501, "not_implemented" },
		{ -ENOTCONN, 503, "unavailable" },
		{ -EHOSTDOWN, 503, "unavailable" },
		{ -ENOSPC, 507, "insufficient_storage" },
		{ -EDQUOT, 507, "insufficient_storage" },
		{ -EIO, 500, "internal" },
		{ -ENOMEM, 500, "internal" },
		{ -EPERM, 500, "internal" },
		{ STATION_EFORBIDDEN, 403, "forbidden" },
		{ -ESTALE, 412, "precondition_failed" },
		{ -EPROTO, 502, "bad_gateway" },
		{ 0, 500, "internal" },
	};

	for (size_t i = 0; i < ELEMENTSOF(table); i++) {
		unsigned status = error_http_status(table[i].err);

		cr_assert_eq(status, table[i].status, "errno %d", table[i].err);
		cr_assert_str_eq(error_http_code(status), table[i].code);
	}
	cr_assert_str_eq(error_http_code(405), "method_not_allowed");
	cr_assert_str_eq(error_http_code(416), "range_not_satisfiable");
}

Test(errors, json_shape)
{
	json_t *j = error_json(400, "field \"x\" is bad", "x");
	char *text = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);

	cr_assert_str_eq(text, "{\"error\":{\"code\":\"invalid_argument\",\"field\":\"x\","
			       "\"message\":\"field \\\"x\\\" is bad\"}}");
	free(text);
	json_decref(j);

	j = error_json(404, "no such workspace", "");
	text = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
	cr_assert_str_eq(text,
			 "{\"error\":{\"code\":\"not_found\",\"message\":\"no such workspace\"}}");
	free(text);
	json_decref(j);
}

Test(errors, json_survives_cut_utf8)
{
	/* snprintf may cut a request's UTF-8 in half; the error must still be JSON */
	json_t *j = error_json(400, "env key \"\xc3\"", NULL);

	cr_assert_not_null(j);
	cr_assert_str_eq(json_string_value(json_object_get(json_object_get(j, "error"), "message")),
			 "env key \"?\"");
	json_decref(j);
}

Test(errors, validation_errors_map_to_400)
{
	struct station_error e = {};
	json_t *v = body_ok("{\"command\":\"\"}");
	struct run_spec spec;
	uint8_t *buf = NULL;

	cr_assert_lt(validate_run_spec(v, &spec, &buf, &e), 0);
	cr_assert_eq(error_http_status(e.err), 400);
	json_decref(v);
}

/* ---- images ------------------------------------------------------------------------------- */

static void img_bad(const char *text, const char *field, const char *part)
{
	struct station_error e = {};
	struct image_request req = { .path = "untouched" };
	json_t *v = body_ok(text);

	cr_assert_eq(validate_image_request(v, &req, &e), -EINVAL, "accepted: %s", text);
	cr_assert_eq(e.err, -EINVAL);
	cr_assert_str_eq(e.field, field, "%s: field \"%s\" (%s)", text, e.field, e.message);
	cr_assert(strstr(e.message, part), "%s: message \"%s\" lacks \"%s\"", text, e.message,
		  part);
	cr_assert_str_eq(req.path, "untouched");
	json_decref(v);
}

static void img_ok(const char *text, struct image_request *req, json_t **body)
{
	struct station_error e = {};

	*body = body_ok(text);
	cr_assert_eq(validate_image_request(*body, req, &e), 0, "%s: %s", text, e.message);
}

Test(images, import)
{
	struct image_request req;
	json_t *v;

	img_ok("{\"path\":\"/srv/busybox-oci\"}", &req, &v);
	cr_assert_str_eq(req.path, "/srv/busybox-oci");
	cr_assert_null(req.name);
	cr_assert_null(req.reference);
	json_decref(v);
	img_ok("{\"path\":\"/srv/tools.tar\",\"name\":\"station/tools\"}", &req, &v);
	cr_assert_str_eq(req.path, "/srv/tools.tar");
	cr_assert_str_eq(req.name, "station/tools");
	json_decref(v);
	img_bad("{\"path\":\"busybox-oci\"}", "path", "absolute path");
	img_bad("{\"path\":\"\"}", "path", "absolute path");
	img_bad("{\"path\":\"/a\\u0000b\"}", "path", "NUL");
	img_bad("{\"path\":7}", "path", "must be a string");
	img_bad("{\"path\":\"/x\",\"name\":\"\"}", "name", "letter or digit");
	img_bad("{\"path\":\"/x\",\"name\":\"a b\"}", "name", "letter or digit");
	img_bad("{\"path\":\"/x\",\"name\":\"-x\"}", "name", "letter or digit");
	img_bad("{\"path\":\"/x\",\"registry\":\"r:5000\"}", "registry", "belongs to a pull");
	img_bad("{\"path\":\"/x\",\"plainHttp\":true}", "plainHttp", "belongs to a pull");
}

Test(images, pull)
{
	struct image_request req;
	json_t *v;

	img_ok("{\"reference\":\"127.0.0.1:5000/busybox@" DIGEST "\"}", &req, &v);
	cr_assert_str_eq(req.reference, "127.0.0.1:5000/busybox@" DIGEST);
	cr_assert_null(req.registry);
	cr_assert_not(req.plain_http);
	cr_assert_null(req.path);
	json_decref(v);
	img_ok("{\"reference\":\"busybox@" DIGEST "\",\"registry\":\"127.0.0.1:5000\","
	       "\"plainHttp\":true}",
	       &req, &v);
	cr_assert_str_eq(req.registry, "127.0.0.1:5000");
	cr_assert(req.plain_http);
	json_decref(v);
	img_bad("{\"reference\":\"busybox:latest\"}", "reference", "pinned by digest");
	img_bad("{\"reference\":\"" DIGEST "\"}", "reference", "repository");
	img_bad("{\"reference\":\"busybox@sha256:00\"}", "reference", "64");
	img_bad("{\"reference\":\"busybox@" DIGEST "\",\"registry\":\"http://r\"}", "registry",
		"host:port");
	img_bad("{\"reference\":\"busybox@" DIGEST "\",\"registry\":\"r:\"}", "registry",
		"host:port");
	img_bad("{\"reference\":\"busybox@" DIGEST "\",\"registry\":\"r:123456\"}", "registry",
		"host:port");
	img_bad("{\"reference\":\"busybox@" DIGEST "\",\"plainHttp\":\"yes\"}", "plainHttp",
		"a boolean");
	img_bad("{\"reference\":\"busybox@" DIGEST "\",\"plainHttp\":null}", "plainHttp",
		"a boolean");
	img_bad("{\"reference\":\"busybox@" DIGEST "\",\"name\":\"b\"}", "name",
		"belongs to an import");
}

Test(images, exactly_one_of_path_and_reference)
{
	img_bad("{\"path\":\"/x\",\"reference\":\"busybox@" DIGEST "\"}", "", "exclude each other");
	img_bad("{}", "", "is required");
	img_bad("{\"name\":\"busybox\"}", "", "is required");
	img_bad("{\"path\":\"/x\",\"tag\":\"latest\"}", "tag", "unknown field");
}

/* ---- routing ------------------------------------------------------------------------------ */

static void route_ok(const char *method, const char *path, enum endpoint ep, const char *ws,
		     const char *run)
{
	struct route_match m;
	const char *allow = NULL;

	cr_assert_eq(router_match(method, path, &m, &allow), 1, "%s %s", method, path);
	cr_assert_eq(m.endpoint, ep, "%s %s: %s", method, path, endpoint_to_string(m.endpoint));
	cr_assert_str_eq(m.ws_id, ws);
	cr_assert_str_eq(m.run_id, run);
}

static void route_405(const char *method, const char *path, const char *allow_want)
{
	struct route_match m;
	const char *allow = NULL;

	cr_assert_eq(router_match(method, path, &m, &allow), 0, "%s %s", method, path);
	cr_assert_str_eq(allow, allow_want);
}

static void route_404(const char *path)
{
	struct route_match m;
	const char *allow = NULL;

	cr_assert_eq(router_match("GET", path, &m, &allow), -ENOENT, "%s", path);
}

Test(router, every_endpoint)
{
	const char *ws = "w1-3vqkabcdefghijklmnopqrstuv", *run = "r-abcdefghijklmnopqrstuvwxyz";
	char p[256];

	route_ok("GET", "/v1/ready", EP_READY, "", "");
	route_ok("GET", "/v1/worker", EP_WORKER, "", "");
	route_ok("GET", "/v1/workspaces", EP_WORKSPACE_LIST, "", "");
	route_ok("POST", "/v1/workspaces", EP_WORKSPACE_CREATE, "", "");
	snprintf(p, sizeof p, "/v1/workspaces/%s", ws);
	route_ok("GET", p, EP_WORKSPACE_GET, ws, "");
	route_ok("PATCH", p, EP_WORKSPACE_UPDATE, ws, "");
	/* a workspace's name (with a '.') is a path segment as an id is */
	route_ok("GET", "/v1/workspaces/web.1/commands", EP_COMMAND_LIST, "web.1", "");
	route_ok("DELETE", p, EP_WORKSPACE_DELETE, ws, "");
	snprintf(p, sizeof p, "/v1/workspaces/%s/restart", ws);
	route_ok("POST", p, EP_WORKSPACE_RESTART, ws, "");
	snprintf(p, sizeof p, "/v1/workspaces/%s/network", ws);
	route_ok("GET", p, EP_WORKSPACE_NETWORK_GET, ws, "");
	route_ok("PUT", p, EP_WORKSPACE_NETWORK_SET, ws, "");
	snprintf(p, sizeof p, "/v1/workspaces/%s/usage", ws);
	route_ok("GET", p, EP_WORKSPACE_USAGE, ws, "");
	route_405("POST", p, "GET, HEAD");
	snprintf(p, sizeof p, "/v1/workspaces/%s/commands", ws);
	route_ok("GET", p, EP_COMMAND_LIST, ws, "");
	route_ok("POST", p, EP_COMMAND_START, ws, "");
	snprintf(p, sizeof p, "/v1/workspaces/%s/commands/%s", ws, run);
	route_ok("GET", p, EP_COMMAND_GET, ws, run);
	snprintf(p, sizeof p, "/v1/workspaces/%s/commands/%s/cancel", ws, run);
	route_ok("POST", p, EP_COMMAND_CANCEL, ws, run);
	snprintf(p, sizeof p, "/v1/workspaces/%s/commands/%s/output", ws, run);
	route_ok("GET", p, EP_COMMAND_OUTPUT, ws, run);
	route_ok("GET", "/v1/images", EP_IMAGE_LIST, "", "");
	route_ok("POST", "/v1/images", EP_IMAGE_CREATE, "", "");
	route_ok("GET", "/v1/images/" DIGEST, EP_IMAGE_GET, "", "");
	route_ok("DELETE", "/v1/images/" DIGEST, EP_IMAGE_DELETE, "", "");
}

Test(router, image_segments)
{
	struct route_match m;
	const char *allow = NULL;

	cr_assert_eq(router_match("DELETE", "/v1/images/" DIGEST, &m, &allow), 1);
	cr_assert_str_eq(m.image, DIGEST);
	cr_assert_eq(router_match("GET", "/v1/workspaces/w1-x", &m, &allow), 1);
	cr_assert_str_eq(m.image, "");
	route_405("PUT", "/v1/images/" DIGEST, "GET, HEAD, DELETE");
	route_405("DELETE", "/v1/images", "GET, HEAD, POST");
	route_404("/v1/images/");
	route_404("/v1/images/busybox");
	route_404("/v1/images/busybox@" DIGEST);
	route_404("/v1/images/" HEX64);
	route_404("/v1/images/sha256:0123");
	route_404("/v1/images/" DIGEST "0");
	route_404("/v1/images/" DIGEST "/");
	route_404(
		"/v1/images/sha256:0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef");
	route_404("/v1/images/sha512:" HEX64);
	/* a digest is no workspace id, and a workspace id no image */
	route_404("/v1/workspaces/" DIGEST);
}

Test(router, wrong_method)
{
	route_405("POST", "/v1/ready", "GET, HEAD");
	route_405("PUT", "/v1/worker", "GET, HEAD");
	route_405("DELETE", "/v1/workspaces", "GET, HEAD, POST");
	route_405("POST", "/v1/workspaces/w1-x", "GET, HEAD, PATCH, DELETE");
	route_405("GET", "/v1/workspaces/w1-x/restart", "POST");
	route_405("POST", "/v1/workspaces/w1-x/network", "GET, HEAD, PUT");
	route_405("PUT", "/v1/workspaces/w1-x/commands", "GET, HEAD, POST");
	route_405("DELETE", "/v1/workspaces/w1-x/commands/r-y", "GET, HEAD");
	route_405("GET", "/v1/workspaces/w1-x/commands/r-y/cancel", "POST");
	route_405("POST", "/v1/workspaces/w1-x/commands/r-y/output", "GET, HEAD");
	route_405("get", "/v1/ready", "GET, HEAD"); /* methods are case-sensitive */
	route_405("head", "/v1/ready", "GET, HEAD");
	route_405("HEAD", "/v1/workspaces/w1-x/restart", "POST"); /* HEAD only where GET is */
}

/* A path the pattern matches: '*' an id, '@' a digest, '+' a rest of the path. */
static void sample_path(const char *pattern, char *ret, size_t size)
{
	size_t n = 0;

	for (const char *p = pattern; *p && n + 80 < size; p++) {
		const char *part = *p == '*' ? "x1-a" :
				   *p == '@' ? DIGEST :
				   *p == '+' ? "rest" :
					       NULL;

		if (part) {
			memcpy(ret + n, part, strlen(part));
			n += strlen(part);
		} else {
			ret[n++] = *p;
		}
	}
	ret[n] = '\0';
}

struct head_walk {
	unsigned gets;
};

/* HEAD is served wherever GET is, by GET's endpoint, and every Allow that names GET names HEAD
 * right after it. */
static void check_head(const char *pattern, const char *method, enum endpoint ep, void *userdata)
{
	struct head_walk *w = userdata;
	struct route_match m;
	const char *allow = NULL;
	char path[512];

	sample_path(pattern, path, sizeof path);
	cr_assert_eq(router_match("OPTIONS", path, &m, &allow), 0, "%s", path);
	cr_assert_eq(strstr(allow, "GET") != NULL, strstr(allow, "GET, HEAD") != NULL,
		     "%s: Allow \"%s\"", pattern, allow);
	cr_assert(strstr(allow, method), "%s: Allow \"%s\" lacks %s", pattern, allow, method);
	if (strcmp(method, "GET") != 0)
		return;
	w->gets++;
	cr_assert_eq(router_match("HEAD", path, &m, &allow), 1, "HEAD %s", path);
	cr_assert_eq(m.endpoint, ep, "HEAD %s: %s, not %s", path, endpoint_to_string(m.endpoint),
		     endpoint_to_string(ep));
}

Test(router, head_wherever_get)
{
	struct head_walk w = {};

	router_foreach(check_head, &w);
	cr_assert_geq(w.gets, 30, "only %u GET routes walked", w.gets);
}

Test(router, unknown_paths)
{
	route_404("/");
	route_404("");
	route_404("/v1");
	route_404("/v1/");
	route_404("/v2/ready");
	route_404("/v1/ready/");
	route_404("/v1/readyx");
	route_404("/v1//ready");
	route_404("/v1/workspaces/");
	route_404("/v1/workspaces//commands");
	route_404("/v1/workspaces/w1-x/");
	route_404("/v1/workspaces/w1-x/commands/");
	route_404("/v1/workspaces/w1-x/commands/r-y/");
	route_404("/v1/workspaces/w1-x/commands/r-y/kill");
	route_404("/v1/workspaces/w1-x/commands/r-y/output/more");
	route_404("/v1/workspaces/w1-x/terminals/");
	route_404("/v1/workspaces/w1-x/terminals/t-y/kill");
	route_404("/V1/ready");
}

Test(router, terminals)
{
	route_ok("GET", "/v1/workspaces/w1-x/terminals", EP_TERMINAL_LIST, "w1-x", "");
	route_ok("POST", "/v1/workspaces/w1-x/terminals", EP_TERMINAL_CREATE, "w1-x", "");
	route_ok("GET", "/v1/workspaces/w1-x/terminals/t-y", EP_TERMINAL_GET, "w1-x", "t-y");
	route_ok("DELETE", "/v1/workspaces/w1-x/terminals/t-y", EP_TERMINAL_DELETE, "w1-x", "t-y");
	route_ok("GET", "/v1/workspaces/w1-x/terminals/t-y/attach", EP_TERMINAL_ATTACH, "w1-x",
		 "t-y");
	route_ok("POST", "/v1/workspaces/w1-x/terminals/t-y/resize", EP_TERMINAL_RESIZE, "w1-x",
		 "t-y");
}

Test(router, id_segments)
{
	char long_id[80];

	route_ok("GET", "/v1/workspaces/w1.example-ab_c", EP_WORKSPACE_GET, "w1.example-ab_c", "");
	route_404("/v1/workspaces/..");
	route_404("/v1/workspaces/.hidden");
	route_404("/v1/workspaces/a b");
	route_404("/v1/workspaces/a%2Fb");
	route_404("/v1/workspaces/a\\b");
	route_404("/v1/workspaces/\xc3\xa9");
	memset(long_id, 'a', 64);
	long_id[64] = '\0';
	{
		char p[128];

		snprintf(p, sizeof p, "/v1/workspaces/%s", long_id);
		route_ok("GET", p, EP_WORKSPACE_GET, long_id, "");
		snprintf(p, sizeof p, "/v1/workspaces/%sa", long_id);
		route_404(p);
	}
}

/* ---- terminals ----------------------------------------------------------------------------- */

static void terminal_bad(const char *text, const char *field)
{
	struct station_error e = {};
	struct terminal_spec spec = { .cols = 7 };
	json_t *v = body_ok(text);

	cr_assert_eq(validate_terminal_spec(v, &spec, &e), -EINVAL, "accepted: %.200s", text);
	cr_assert_str_eq(e.field, field, "%.200s: field \"%s\" (%s)", text, e.field, e.message);
	cr_assert_eq(spec.cols, 7, "untouched on failure");
	json_decref(v);
}

Test(terminal, every_field)
{
	struct station_error e = {};
	struct terminal_spec spec = {};
	json_t *v = body_ok("{\"command\":\"top\",\"cols\":132,\"rows\":43,\"cwd\":\"sub\","
			    "\"env\":{\"TERM\":\"vt100\"}}");

	cr_assert_eq(validate_terminal_spec(v, &spec, &e), 0, "%s", e.message);
	cr_assert_str_eq(spec.command, "top");
	cr_assert_eq(spec.cols, 132);
	cr_assert_eq(spec.rows, 43);
	cr_assert_str_eq(spec.cwd, "sub");
	cr_assert_str_eq(json_string_value(json_object_get(spec.env, "TERM")), "vt100");
	json_decref(v);
	v = body_ok("{\"cols\":1,\"rows\":10000}");
	cr_assert_eq(validate_terminal_spec(v, &spec, &e), 0, "%s", e.message);
	cr_assert_null(spec.command, "absent: the login shell");
	json_decref(v);
}

Test(terminal, refused)
{
	terminal_bad("{\"rows\":24}", "cols");
	terminal_bad("{\"cols\":80}", "rows");
	terminal_bad("{\"cols\":0,\"rows\":24}", "cols");
	terminal_bad("{\"cols\":80,\"rows\":10001}", "rows");
	terminal_bad("{\"cols\":\"80\",\"rows\":24}", "cols");
	terminal_bad("{\"cols\":80,\"rows\":24,\"command\":\"\"}", "command");
	terminal_bad("{\"cols\":80,\"rows\":24,\"command\":null}", "command");
	terminal_bad("{\"cols\":80,\"rows\":24,\"cwd\":\"\"}", "cwd");
	terminal_bad("{\"cols\":80,\"rows\":24,\"env\":{\"1A\":\"x\"}}", "env");
	terminal_bad("{\"cols\":80,\"rows\":24,\"shell\":\"x\"}", "shell");
}

Test(terminal, size)
{
	struct station_error e = {};
	unsigned cols = 0, rows = 0;
	json_t *v = body_ok("{\"type\":\"resize\",\"cols\":100,\"rows\":30}");

	cr_assert_eq(validate_terminal_size(v, "type", &cols, &rows, &e), 0, "%s", e.message);
	cr_assert_eq(cols, 100);
	cr_assert_eq(rows, 30);
	cr_assert_eq(validate_terminal_size(v, NULL, &cols, &rows, &e), -EINVAL, "type unknown");
	json_decref(v);
}

/* ---- ports ---------------------------------------------------------------------------------- */

static void port_bad(const char *text, const char *field)
{
	_cleanup_json_ json_t *b = body_ok(text);
	struct station_error e = {};
	struct port_spec s = {};

	cr_assert_eq(validate_port_spec(b, &s, &e), -EINVAL, "%s accepted", text);
	cr_assert_str_eq(e.field, field, "%s: field %s", text, e.field);
}

Test(ports, spec_defaults_and_bounds)
{
	_cleanup_json_ json_t *b = body_ok("{\"port\":3000}");
	_cleanup_json_ json_t *p =
		body_ok("{\"port\":65535,\"access\":\"public\",\"expiresInMs\":2592000000}");
	struct station_error e = {};
	struct port_spec s = {};

	cr_assert_eq(validate_port_spec(b, &s, &e), 0, "%s", e.message);
	cr_assert_eq(s.port, 3000);
	cr_assert(!s.public);
	cr_assert_eq(s.expires_in_ms, 0);
	cr_assert_eq(validate_port_spec(p, &s, &e), 0, "%s", e.message);
	cr_assert_eq(s.port, 65535);
	cr_assert(s.public);
	cr_assert_eq(s.expires_in_ms, PREVIEW_MAX_EXPIRES_MS);
}

Test(ports, spec_refusals_name_the_field)
{
	port_bad("{}", "port");
	port_bad("{\"port\":0}", "port");
	port_bad("{\"port\":65536}", "port");
	port_bad("{\"port\":-1}", "port");
	port_bad("{\"port\":\"80\"}", "port");
	port_bad("{\"port\":80.0}", "port");
	port_bad("{\"port\":80,\"access\":\"open\"}", "access");
	port_bad("{\"port\":80,\"access\":null}", "access");
	port_bad("{\"port\":80,\"expiresInMs\":0}", "expiresInMs");
	port_bad("{\"port\":80,\"expiresInMs\":2592000001}", "expiresInMs");
	port_bad("{\"port\":80,\"token\":\"x\"}", "token");
}

Test(ports, routes)
{
	struct route_match m;
	const char *allow = NULL;

	cr_assert_eq(router_match("POST", "/v1/workspaces/w1/ports", &m, &allow), 1);
	cr_assert_eq(m.endpoint, EP_PORT_EXPOSE);
	cr_assert_eq(router_match("GET", "/v1/workspaces/w1/ports", &m, &allow), 1);
	cr_assert_eq(m.endpoint, EP_PORT_LIST);
	cr_assert_eq(router_match("DELETE", "/v1/workspaces/w1/ports/3000", &m, &allow), 1);
	cr_assert_eq(m.endpoint, EP_PORT_REVOKE);
	cr_assert_str_eq(m.run_id, "3000");
	cr_assert_eq(router_match("GET", "/v1/workspaces/w1/ports/3000", &m, &allow), 0);
	cr_assert_str_eq(allow, "DELETE");
}
