/* SPDX-License-Identifier: MIT */
/* Docker-format seccomp profiles (src/adapter/seccomp.c): the bytes are read as the loader
 * reads a profile file (JSON, duplicate keys refused) and converted to the OCI linux.seccomp
 * object for three targets: no capabilities on this machine, Docker's default capabilities on
 * x86_64 with kernel 5.10, and CAP_SYS_ADMIN on aarch64 with kernel 4.0. Beyond memory errors:
 * what comes out is what the header promises a runtime gets: a known defaultAction, SCMP_ARCH_
 * architectures, rules with at least one valid syscall name, a known action, an errnoRet only
 * with SCMP_ACT_ERRNO or SCMP_ACT_TRACE, at most one condition per argument index 0-5 with a
 * known operator and valueTwo only with SCMP_CMP_MASKED_EQ; and it serialises. A refusal is
 * -EINVAL with a message naming the profile. */

#include <errno.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>

#include "adapter/seccomp.h"
#include "fuzz-harness.h"

static bool in(const char *s, const char *const *list)
{
	for (; *list; list++)
		if (strcmp(s, *list) == 0)
			return true;
	return false;
}

static const char *const actions[] = {
	"SCMP_ACT_KILL",  "SCMP_ACT_KILL_PROCESS", "SCMP_ACT_KILL_THREAD",
	"SCMP_ACT_TRAP",  "SCMP_ACT_ERRNO",	   "SCMP_ACT_TRACE",
	"SCMP_ACT_ALLOW", "SCMP_ACT_LOG",	   NULL,
};
static const char *const operators[] = {
	"SCMP_CMP_NE", "SCMP_CMP_LT", "SCMP_CMP_LE",	    "SCMP_CMP_EQ",
	"SCMP_CMP_GE", "SCMP_CMP_GT", "SCMP_CMP_MASKED_EQ", NULL,
};

static void check_errno_with(json_t *o, const char *key, const char *action)
{
	json_t *v = json_object_get(o, key);

	if (!v)
		return;
	FUZZ_CHECK(json_is_integer(v) && json_integer_value(v) >= 0);
	FUZZ_CHECK(strcmp(action, "SCMP_ACT_ERRNO") == 0 || strcmp(action, "SCMP_ACT_TRACE") == 0);
}

static void check_rule(json_t *rule)
{
	json_t *names = json_object_get(rule, "names"), *args = json_object_get(rule, "args"), *v;
	const char *action = json_string_value(json_object_get(rule, "action"));
	bool seen[6] = {};
	size_t i;

	FUZZ_CHECK(action && in(action, actions));
	check_errno_with(rule, "errnoRet", action);
	FUZZ_CHECK(json_is_array(names) && json_array_size(names) > 0);
	json_array_foreach(names, i, v) {
		const char *n = json_string_value(v);
		FUZZ_CHECK(n && n[0] && strlen(n) < 64 &&
			   strspn(n, "abcdefghijklmnopqrstuvwxyz0123456789_") == strlen(n));
	}
	if (!args)
		return;
	FUZZ_CHECK(json_is_array(args) && json_array_size(args) > 0 && json_array_size(args) <= 6);
	json_array_foreach(args, i, v) {
		json_int_t index = json_integer_value(json_object_get(v, "index"));
		const char *op = json_string_value(json_object_get(v, "op"));

		FUZZ_CHECK(index >= 0 && index <= 5 && !seen[index]);
		seen[index] = true;
		FUZZ_CHECK(op && in(op, operators));
		FUZZ_CHECK(json_integer_value(json_object_get(v, "value")) >= 0);
		FUZZ_CHECK(json_integer_value(json_object_get(v, "valueTwo")) == 0 ||
			   strcmp(op, "SCMP_CMP_MASKED_EQ") == 0);
	}
}

static void check_output(json_t *out)
{
	const char *def = json_string_value(json_object_get(out, "defaultAction"));
	json_t *arches = json_object_get(out, "architectures");
	json_t *rules = json_object_get(out, "syscalls"), *v;
	size_t i;

	FUZZ_CHECK(def && in(def, actions));
	check_errno_with(out, "defaultErrnoRet", def);
	FUZZ_CHECK(json_is_array(arches));
	json_array_foreach(arches, i, v) {
		const char *a = json_string_value(v);
		FUZZ_CHECK(a && strncmp(a, "SCMP_ARCH_", 10) == 0);
	}
	FUZZ_CHECK(json_is_array(rules));
	json_array_foreach(rules, i, v)
		check_rule(v);
	char *s = json_dumps(out, JSON_COMPACT);
	FUZZ_CHECK(s);
	free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const docker_caps[] = {
		"CAP_CHOWN",
		"CAP_DAC_OVERRIDE",
		"CAP_FSETID",
		"CAP_FOWNER",
		"CAP_MKNOD",
		"CAP_NET_RAW",
		"CAP_SETGID",
		"CAP_SETUID",
		"CAP_SETFCAP",
		"CAP_SETPCAP",
		"CAP_NET_BIND_SERVICE",
		"CAP_SYS_CHROOT",
		"CAP_KILL",
		"CAP_AUDIT_WRITE",
		NULL,
	};
	static const char *const admin_caps[] = { "CAP_SYS_ADMIN", NULL };
	const struct seccomp_target targets[] = {
		{ .caps = NULL },
		{ .caps = docker_caps, .arch = "x86_64", .kernel_major = 5, .kernel_minor = 10 },
		{ .caps = admin_caps, .arch = "aarch64", .kernel_major = 4, .kernel_minor = 0 },
	};
	json_error_t jerr;
	json_t *profile;

	if (size > SECCOMP_PROFILE_MAX)
		return 0;
	profile = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, &jerr);
	if (!profile)
		return 0;
	for (size_t i = 0; i < sizeof targets / sizeof targets[0]; i++) {
		struct station_error e = {};
		json_t *out = NULL;
		int r = seccomp_profile_convert(profile, "/fuzz.json", &targets[i], &out, &e);

		if (r == 0) {
			check_output(out);
			json_decref(out);
		} else {
			FUZZ_CHECK(r == -EINVAL);
			fuzz_check_error(&e);
			FUZZ_CHECK(strstr(e.message, "/fuzz.json"));
		}
	}
	json_decref(profile);
	return 0;
}
