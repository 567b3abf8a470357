/* SPDX-License-Identifier: MIT */
/* Docker-format → OCI seccomp conversion: exact outputs on small profiles, the errors a person
 * sees, and our default and Debian's (containers-common) profiles as real inputs. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "adapter/oci-config.h"
#include "adapter/seccomp.h"
#include "basic/cleanup.h"
#include "basic/util.h"

#define DEFAULT_PROFILE STATION_SOURCE_ROOT "/profiles/default.json"
#define DEBIAN_PROFILE "/usr/share/containers/seccomp.json"

static const char *const no_caps[] = { NULL };
static const char *const admin_caps[] = { "CAP_SYS_ADMIN", "CAP_SYS_CHROOT", NULL };

static const struct seccomp_target x86_old = { .caps = no_caps,
					       .arch = "x86_64",
					       .kernel_major = 4,
					       .kernel_minor = 4 };
static const struct seccomp_target x86_admin = { .caps = admin_caps,
						 .arch = "x86_64",
						 .kernel_major = 5,
						 .kernel_minor = 10 };
static const struct seccomp_target arm_new = { .caps = no_caps,
					       .arch = "aarch64",
					       .kernel_major = 6,
					       .kernel_minor = 1 };

static char tmpdir[] = "/tmp/test-seccomp-XXXXXX";

static void setup(void)
{
	cr_assert_not_null(mkdtemp(tmpdir));
}

static void teardown(void)
{
	rm_rf(tmpdir);
}

TestSuite(seccomp, .init = setup, .fini = teardown);

static void write_profile(const char *name, const char *text, char *path, size_t size)
{
	snprintf(path, size, "%s/%s", tmpdir, name);
	cr_assert_eq(write_file_atomic(path, text, strlen(text), 0644), 0);
}

/* Converts text and returns the compact, key-sorted output. */
static char *convert(const char *text, const struct seccomp_target *t)
{
	char path[256];
	json_t *out = NULL;
	struct station_error e = {};
	write_profile("p.json", text, path, sizeof path);
	int r = seccomp_profile_load(path, t, &out, NULL, &e);
	cr_assert_eq(r, 0, "load: %d %s", r, e.message);
	char *s = json_dumps(out, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(out);
	return s;
}

/* Returns the error message; asserts the errno. */
static void convert_fails(const char *text, int want, const char *want_msg)
{
	char path[256];
	json_t *out = NULL;
	struct station_error e = {};
	write_profile("bad.json", text, path, sizeof path);
	int r = seccomp_profile_load(path, &x86_old, &out, NULL, &e);
	cr_assert_eq(r, want, "r=%d msg=%s", r, e.message);
	cr_assert_null(out);
	cr_assert_eq(e.err, want);
	char expect[1024];
	snprintf(expect, sizeof expect, want_msg, path);
	cr_assert_str_eq(e.message, expect);
}

static const char caps_profile[] =
	"{\"defaultAction\":\"SCMP_ACT_ERRNO\",\"defaultErrnoRet\":1,"
	"\"syscalls\":["
	"{\"names\":[\"read\",\"write\"],\"action\":\"SCMP_ACT_ALLOW\"},"
	"{\"names\":[\"mount\"],\"action\":\"SCMP_ACT_ALLOW\",\"includes\":{\"caps\":[\"CAP_SYS_ADMIN\"]}},"
	"{\"names\":[\"chroot\"],\"action\":\"SCMP_ACT_ALLOW\","
	"\"includes\":{\"caps\":[\"CAP_SYS_ADMIN\",\"CAP_SYS_BOOT\"]}},"
	"{\"names\":[\"bpf\"],\"action\":\"SCMP_ACT_ERRNO\",\"errnoRet\":1,"
	"\"excludes\":{\"caps\":[\"CAP_SYS_ADMIN\"]}},"
	"{\"names\":[\"ptrace\"],\"action\":\"SCMP_ACT_ALLOW\",\"includes\":{\"minKernel\":\"4.8\"}},"
	"{\"names\":[\"kcmp\"],\"action\":\"SCMP_ACT_ALLOW\",\"excludes\":{\"minKernel\":\"5.0\"}}"
	"]}";

Test(seccomp, includes_excludes_caps_and_kernel)
{
	_cleanup_free_ char *plain = convert(caps_profile, &x86_old);
	cr_assert_str_eq(plain,
			 "{\"architectures\":[],\"defaultAction\":\"SCMP_ACT_ERRNO\","
			 "\"defaultErrnoRet\":1,\"syscalls\":["
			 "{\"action\":\"SCMP_ACT_ALLOW\",\"names\":[\"read\",\"write\"]},"
			 "{\"action\":\"SCMP_ACT_ERRNO\",\"errnoRet\":1,\"names\":[\"bpf\"]},"
			 "{\"action\":\"SCMP_ACT_ALLOW\",\"names\":[\"kcmp\"]}]}");

	_cleanup_free_ char *admin = convert(caps_profile, &x86_admin);
	cr_assert_str_eq(admin, "{\"architectures\":[],\"defaultAction\":\"SCMP_ACT_ERRNO\","
				"\"defaultErrnoRet\":1,\"syscalls\":["
				"{\"action\":\"SCMP_ACT_ALLOW\",\"names\":[\"read\",\"write\"]},"
				"{\"action\":\"SCMP_ACT_ALLOW\",\"names\":[\"mount\"]},"
				"{\"action\":\"SCMP_ACT_ALLOW\",\"names\":[\"ptrace\"]}]}");
}

static const char arch_profile[] =
	"{\"defaultAction\":\"SCMP_ACT_KILL_PROCESS\","
	"\"archMap\":[{\"architecture\":\"SCMP_ARCH_X86_64\","
	"\"subArchitectures\":[\"SCMP_ARCH_X86\",\"SCMP_ARCH_X32\"]},"
	"{\"architecture\":\"SCMP_ARCH_AARCH64\",\"subArchitectures\":[\"SCMP_ARCH_ARM\"]}],"
	"\"syscalls\":["
	"{\"name\":\"arch_prctl\",\"action\":\"SCMP_ACT_ALLOW\",\"includes\":{\"arches\":[\"amd64\",\"x32\"]}},"
	"{\"names\":[\"set_tls\"],\"action\":\"SCMP_ACT_ALLOW\",\"includes\":{\"arches\":[\"arm64\"]}},"
	"{\"names\":[\"modify_ldt\"],\"action\":\"SCMP_ACT_LOG\",\"excludes\":{\"arches\":[\"arm64\"]}},"
	"{\"names\":[\"personality\"],\"action\":\"SCMP_ACT_ALLOW\",\"args\":"
	"[{\"index\":0,\"value\":4294967295,\"op\":\"SCMP_CMP_EQ\"}]},"
	"{\"names\":[\"clone\"],\"action\":\"SCMP_ACT_ALLOW\",\"args\":"
	"[{\"index\":0,\"value\":2114060288,\"valueTwo\":0,\"op\":\"SCMP_CMP_MASKED_EQ\"}]},"
	"{\"names\":[\"clone3\"],\"action\":\"SCMP_ACT_ERRNO\",\"errno\":\"ENOSYS\",\"args\":null}"
	"]}";

Test(seccomp, arch_map_args_and_errno_names)
{
	_cleanup_free_ char *x86 = convert(arch_profile, &x86_old);
	cr_assert_str_eq(
		x86,
		"{\"architectures\":[\"SCMP_ARCH_X86_64\",\"SCMP_ARCH_X86\",\"SCMP_ARCH_X32\"],"
		"\"defaultAction\":\"SCMP_ACT_KILL_PROCESS\",\"syscalls\":["
		"{\"action\":\"SCMP_ACT_ALLOW\",\"names\":[\"arch_prctl\"]},"
		"{\"action\":\"SCMP_ACT_LOG\",\"names\":[\"modify_ldt\"]},"
		"{\"action\":\"SCMP_ACT_ALLOW\",\"args\":[{\"index\":0,\"op\":\"SCMP_CMP_EQ\","
		"\"value\":4294967295,\"valueTwo\":0}],\"names\":[\"personality\"]},"
		"{\"action\":\"SCMP_ACT_ALLOW\",\"args\":[{\"index\":0,"
		"\"op\":\"SCMP_CMP_MASKED_EQ\",\"value\":2114060288,\"valueTwo\":0}],"
		"\"names\":[\"clone\"]},"
		"{\"action\":\"SCMP_ACT_ERRNO\",\"errnoRet\":38,\"names\":[\"clone3\"]}]}");

	_cleanup_free_ char *arm = convert(arch_profile, &arm_new);
	cr_assert_str_eq(
		arm, "{\"architectures\":[\"SCMP_ARCH_AARCH64\",\"SCMP_ARCH_ARM\"],"
		     "\"defaultAction\":\"SCMP_ACT_KILL_PROCESS\",\"syscalls\":["
		     "{\"action\":\"SCMP_ACT_ALLOW\",\"names\":[\"set_tls\"]},"
		     "{\"action\":\"SCMP_ACT_ALLOW\",\"args\":[{\"index\":0,\"op\":\"SCMP_CMP_EQ\","
		     "\"value\":4294967295,\"valueTwo\":0}],\"names\":[\"personality\"]},"
		     "{\"action\":\"SCMP_ACT_ALLOW\",\"args\":[{\"index\":0,"
		     "\"op\":\"SCMP_CMP_MASKED_EQ\",\"value\":2114060288,\"valueTwo\":0}],"
		     "\"names\":[\"clone\"]},"
		     "{\"action\":\"SCMP_ACT_ERRNO\",\"errnoRet\":38,\"names\":[\"clone3\"]}]}");
}

Test(seccomp, plain_architectures_and_flags)
{
	_cleanup_free_ char *s = convert(
		"{\"defaultAction\":\"SCMP_ACT_ALLOW\",\"architectures\":[\"SCMP_ARCH_X86_64\"],"
		"\"flags\":[\"SECCOMP_FILTER_FLAG_LOG\"],\"syscalls\":null}",
		&x86_old);
	cr_assert_str_eq(s, "{\"architectures\":[\"SCMP_ARCH_X86_64\"],"
			    "\"defaultAction\":\"SCMP_ACT_ALLOW\","
			    "\"flags\":[\"SECCOMP_FILTER_FLAG_LOG\"],\"syscalls\":[]}");
}

Test(seccomp, digest_is_sha256_of_the_file)
{
	char path[256], hex[65], want[80], digest[SECCOMP_DIGEST_SIZE];
	const char text[] = "{\"defaultAction\":\"SCMP_ACT_ALLOW\"}";
	json_t *out = NULL;
	write_profile("d.json", text, path, sizeof path);
	cr_assert_eq(seccomp_profile_load(path, &x86_old, &out, digest, NULL), 0);
	sha256_hex(text, strlen(text), hex);
	snprintf(want, sizeof want, "sha256:%s", hex);
	cr_assert_str_eq(digest, want);
	json_decref(out);
}

Test(seccomp, unknown_action)
{
	convert_fails("{\"defaultAction\":\"SCMP_ACT_ERRNO\",\"syscalls\":[{\"names\":[\"read\"],"
		      "\"action\":\"SCMP_ACT_ALLOW\"},{\"names\":[\"write\"],"
		      "\"action\":\"SCMP_ACT_PERMIT\"}]}",
		      -EINVAL,
		      "seccomp profile \"%s\": syscalls[1]: unknown action \"SCMP_ACT_PERMIT\"");
	convert_fails("{\"defaultAction\":\"ALLOW\"}", -EINVAL,
		      "seccomp profile \"%s\": defaultAction: unknown action \"ALLOW\"");
}

Test(seccomp, invalid_json)
{
	convert_fails("{\"defaultAction\": \"SCMP_ACT_ERRNO\",\n \"syscalls\": [}", -EINVAL,
		      "seccomp profile \"%s\" is not valid JSON: unexpected token near '}' "
		      "(line 2, column 15)");
	convert_fails("{\"defaultAction\":\"SCMP_ACT_ERRNO\",\"defaultAction\":\"SCMP_ACT_ALLOW\"}",
		      -EINVAL,
		      "seccomp profile \"%s\" is not valid JSON: duplicate object key near "
		      "'\"defaultAction\"' (line 1, column 49)");
}

Test(seccomp, wrong_types)
{
	convert_fails("[]", -EINVAL, "seccomp profile \"%s\": (top level): must be a JSON object");
	convert_fails("{\"defaultAction\":1}", -EINVAL,
		      "seccomp profile \"%s\": defaultAction: \"defaultAction\" must be a string");
	convert_fails("{\"defaultAction\":\"SCMP_ACT_ERRNO\",\"syscalls\":{}}", -EINVAL,
		      "seccomp profile \"%s\": syscalls: \"syscalls\" must be an array");
	convert_fails("{\"defaultAction\":\"SCMP_ACT_ERRNO\",\"syscalls\":[{\"names\":[\"read\"],"
		      "\"action\":\"SCMP_ACT_ALLOW\",\"args\":[{\"index\":7,\"value\":1,"
		      "\"op\":\"SCMP_CMP_EQ\"}]}]}",
		      -EINVAL,
		      "seccomp profile \"%s\": syscalls[0].args[0]: \"index\" must be 0 to 5");
	convert_fails(
		"{\"defaultAction\":\"SCMP_ACT_ERRNO\",\"syscalls\":[{\"names\":[\"read\"],"
		"\"action\":\"SCMP_ACT_ALLOW\",\"args\":[{\"index\":0,\"value\":1,"
		"\"op\":\"SCMP_CMP_LIKE\"}]}]}",
		-EINVAL,
		"seccomp profile \"%s\": syscalls[0].args[0]: unknown operator \"SCMP_CMP_LIKE\"");
	convert_fails("{\"defaultAction\":\"SCMP_ACT_ALLOW\",\"defaultErrnoRet\":1}", -EINVAL,
		      "seccomp profile \"%s\": defaultAction: an errno return is only valid with "
		      "SCMP_ACT_ERRNO or SCMP_ACT_TRACE, not \"SCMP_ACT_ALLOW\"");
	convert_fails("{\"defaultAction\":\"SCMP_ACT_ERRNO\",\"syscalls\":[{\"names\":[\"../x\"],"
		      "\"action\":\"SCMP_ACT_ALLOW\"}]}",
		      -EINVAL,
		      "seccomp profile \"%s\": syscalls[0]: names[0] is not a syscall name");
	convert_fails("{\"defaultAction\":\"SCMP_ACT_ERRNO\",\"syscalls\":[{\"names\":[\"read\"],"
		      "\"action\":\"SCMP_ACT_NOTIFY\"}]}",
		      -EINVAL,
		      "seccomp profile \"%s\": syscalls[0]: action \"SCMP_ACT_NOTIFY\" needs a "
		      "seccomp agent, which is not supported");
	convert_fails("{\"defaultAction\":\"SCMP_ACT_ERRNO\",\"syscalls\":[{\"names\":[\"read\"],"
		      "\"action\":\"SCMP_ACT_ALLOW\",\"includes\":{\"minKernel\":\"four\"}}]}",
		      -EINVAL,
		      "seccomp profile \"%s\": syscalls[0].includes: \"minKernel\" \"four\" is not "
		      "a kernel version");
}

/* Argument conditions reach the OCI object as they are written (index, value, valueTwo, op;
 * MASKED_EQ: value is the mask, valueTwo the result, as runc, crun and runsc read them), and
 * the forms the runtimes read differently are refused. */
Test(seccomp, argument_conditions)
{
	_cleanup_free_ char *s = convert(
		"{\"defaultAction\":\"SCMP_ACT_ERRNO\",\"syscalls\":[{\"names\":[\"socket\"],"
		"\"action\":\"SCMP_ACT_ALLOW\",\"args\":[{\"index\":0,\"value\":16,"
		"\"op\":\"SCMP_CMP_EQ\"},{\"index\":2,\"value\":0,\"valueTwo\":0,"
		"\"op\":\"SCMP_CMP_EQ\"}]},{\"names\":[\"socket\"],\"action\":\"SCMP_ACT_ERRNO\","
		"\"errnoRet\":97,\"args\":[{\"index\":0,\"value\":17,\"op\":\"SCMP_CMP_GE\"}]},"
		"{\"names\":[\"ioctl\"],\"action\":\"SCMP_ACT_ALLOW\",\"args\":[{\"index\":1,"
		"\"value\":4294967295,\"valueTwo\":21505,\"op\":\"SCMP_CMP_MASKED_EQ\"}]}]}",
		&x86_old);
	cr_assert_str_eq(s,
			 "{\"architectures\":[],\"defaultAction\":\"SCMP_ACT_ERRNO\",\"syscalls\":["
			 "{\"action\":\"SCMP_ACT_ALLOW\",\"args\":["
			 "{\"index\":0,\"op\":\"SCMP_CMP_EQ\",\"value\":16,\"valueTwo\":0},"
			 "{\"index\":2,\"op\":\"SCMP_CMP_EQ\",\"value\":0,\"valueTwo\":0}],"
			 "\"names\":[\"socket\"]},"
			 "{\"action\":\"SCMP_ACT_ERRNO\",\"args\":["
			 "{\"index\":0,\"op\":\"SCMP_CMP_GE\",\"value\":17,\"valueTwo\":0}],"
			 "\"errnoRet\":97,\"names\":[\"socket\"]},"
			 "{\"action\":\"SCMP_ACT_ALLOW\",\"args\":["
			 "{\"index\":1,\"op\":\"SCMP_CMP_MASKED_EQ\",\"value\":4294967295,"
			 "\"valueTwo\":21505}],\"names\":[\"ioctl\"]}]}");

	convert_fails(
		"{\"defaultAction\":\"SCMP_ACT_ERRNO\",\"syscalls\":[{\"names\":[\"socket\"],"
		"\"action\":\"SCMP_ACT_ALLOW\",\"args\":[{\"index\":0,\"value\":2,"
		"\"op\":\"SCMP_CMP_GE\"},{\"index\":0,\"value\":10,\"op\":\"SCMP_CMP_LE\"}]}]}",
		-EINVAL,
		"seccomp profile \"%s\": syscalls[0].args[1]: a second condition on argument "
		"0: runtimes disagree on what that means (runc and runsc make each "
		"condition a rule of its own, an OR; libseccomp refuses it); write one rule "
		"per condition");
	convert_fails(
		"{\"defaultAction\":\"SCMP_ACT_ERRNO\",\"syscalls\":[{\"names\":[\"socket\"],"
		"\"action\":\"SCMP_ACT_ALLOW\",\"args\":[{\"index\":0,\"value\":2,"
		"\"valueTwo\":3,\"op\":\"SCMP_CMP_EQ\"}]}]}",
		-EINVAL,
		"seccomp profile \"%s\": syscalls[0].args[0]: \"valueTwo\" is only valid with "
		"SCMP_CMP_MASKED_EQ");
	convert_fails("{\"defaultAction\":\"SCMP_ACT_ERRNO\",\"syscalls\":[{\"names\":[\"socket\"],"
		      "\"action\":\"SCMP_ACT_ALLOW\",\"args\":[{\"index\":0,\"value\":-1,"
		      "\"op\":\"SCMP_CMP_EQ\"}]}]}",
		      -EINVAL,
		      "seccomp profile \"%s\": syscalls[0].args[0]: \"value\" must be a "
		      "non-negative integer");
}

Test(seccomp, missing_file_names_the_path)
{
	char path[256];
	json_t *out = NULL;
	struct station_error e = {};
	snprintf(path, sizeof path, "%s/no-such-profile.json", tmpdir);
	cr_assert_eq(seccomp_profile_load(path, NULL, &out, NULL, &e), -ENOENT);
	char want[512];
	snprintf(want, sizeof want, "seccomp profile \"%s\" not found", path);
	cr_assert_str_eq(e.message, want);
	cr_assert_str_eq(e.field, "seccompProfile");
	cr_assert_null(out);
}

/* Every rule of the converted object, as (name → action) lookups. */
static const char *action_of(const json_t *oci, const char *name)
{
	const json_t *rule, *n;
	size_t i, j;
	const char *found = NULL;
	json_array_foreach(json_object_get(oci, "syscalls"), i, rule) {
		json_array_foreach(json_object_get(rule, "names"), j, n) {
			if (strcmp(json_string_value(n), name) == 0 && !found)
				found = json_string_value(json_object_get(rule, "action"));
		}
	}
	return found;
}

static json_t *load_default(const char *const *caps)
{
	struct seccomp_target t = { .caps = caps, .arch = "x86_64" };
	struct station_error e = {};
	json_t *out = NULL;
	char digest[SECCOMP_DIGEST_SIZE];
	cr_assert_eq(seccomp_profile_load(DEFAULT_PROFILE, &t, &out, digest, &e), 0, "%s",
		     e.message);
	cr_assert_eq(strlen(digest), 7 + 64);
	return out;
}

/* The dangerous syscalls of profiles/README.md: never allowed by our profile, even with every
 * capability. */
static const char *const never[] = {
	"kexec_load",
	"kexec_file_load",
	"init_module",
	"finit_module",
	"delete_module",
	"mount",
	"umount2",
	"pivot_root",
	"fsopen",
	"open_tree",
	"bpf",
	"perf_event_open",
	"userfaultfd",
	"keyctl",
	"add_key",
	"request_key",
	"ptrace",
	"process_vm_readv",
	"unshare",
	"setns",
	"open_by_handle_at",
	"name_to_handle_at",
	"iopl",
	"ioperm",
	"swapon",
	"swapoff",
	"reboot",
	"acct",
	"settimeofday",
	"clock_settime",
	"io_uring_setup",
	"syslog",
	"kcmp",
	"pidfd_getfd",
	"modify_ldt",
};

Test(seccomp, default_profile)
{
	static const char *const all_caps[] = { "CAP_SYS_ADMIN",
						"CAP_SYS_MODULE",
						"CAP_SYS_PTRACE",
						"CAP_SYS_RAWIO",
						"CAP_SYS_BOOT",
						"CAP_SYS_TIME",
						"CAP_SYSLOG",
						"CAP_BPF",
						"CAP_PERFMON",
						"CAP_SYS_CHROOT",
						NULL };
	json_t *def = load_default(oci_default_caps);
	json_t *all = load_default(all_caps);

	cr_assert_str_eq(json_string_value(json_object_get(def, "defaultAction")),
			 "SCMP_ACT_ERRNO");
	cr_assert_eq(json_integer_value(json_object_get(def, "defaultErrnoRet")), 1);
	_cleanup_free_ char *arches =
		json_dumps(json_object_get(def, "architectures"), JSON_COMPACT);
	/* no x86: libseccomp would turn the socket rules into socketcall(SYS_SOCKET) allowed */
	cr_assert_str_eq(arches, "[\"SCMP_ARCH_X86_64\",\"SCMP_ARCH_X32\"]");
	for (size_t i = 0; i < ELEMENTSOF(never); i++) {
		const char *a = action_of(def, never[i]), *b = action_of(all, never[i]);
		cr_assert(!a || strcmp(a, "SCMP_ACT_ALLOW") != 0, "%s allowed", never[i]);
		cr_assert(!b || strcmp(b, "SCMP_ACT_ALLOW") != 0, "%s allowed with caps", never[i]);
	}
	cr_assert_str_eq(action_of(def, "execve"), "SCMP_ACT_ALLOW");
	cr_assert_str_eq(action_of(def, "arch_prctl"), "SCMP_ACT_ALLOW");
	cr_assert_str_eq(action_of(def, "clone3"), "SCMP_ACT_ERRNO");
	cr_assert_null(action_of(def, "chroot")); /* no CAP_SYS_CHROOT in our set */
	cr_assert_str_eq(action_of(all, "chroot"), "SCMP_ACT_ALLOW");
	json_decref(def);
	json_decref(all);
}

Test(seccomp, debian_containers_common_profile)
{
	if (access(DEBIAN_PROFILE, R_OK) < 0)
		cr_skip_test("%s missing (apt-get install golang-github-containers-common)",
			     DEBIAN_PROFILE);
	struct seccomp_target t = { .caps = oci_default_caps, .arch = "x86_64" };
	struct station_error e = {};
	json_t *out = NULL;
	cr_assert_eq(seccomp_profile_load(DEBIAN_PROFILE, &t, &out, NULL, &e), 0, "%s", e.message);
	cr_assert_eq(json_integer_value(json_object_get(out, "defaultErrnoRet")), 38);
	cr_assert_str_eq(action_of(out, "read"), "SCMP_ACT_ALLOW");
	/* excludes.caps CAP_SYS_ADMIN: the ERRNO rule is kept, the ALLOW rule dropped */
	cr_assert_str_eq(action_of(out, "bpf"), "SCMP_ACT_ERRNO");
	cr_assert_str_eq(action_of(out, "modify_ldt"), "SCMP_ACT_ALLOW"); /* arches amd64 */
	cr_assert_null(action_of(out, "s390_pci_mmio_read"));
	json_decref(out);
}

/* The decision the converted default profile makes for socket(family, type, protocol) and
 * socketpair: the action and errno of the one rule that matches, "default" when none does.
 * More than one matching rule is a failure: the runtimes resolve overlaps differently (runsc:
 * the first rule; libseccomp: by its own priorities), so the profile must not have any. */
static bool cond_holds(const json_t *a, uint64_t args[6])
{
	uint64_t v = (uint64_t)json_integer_value(json_object_get(a, "value"));
	uint64_t two = (uint64_t)json_integer_value(json_object_get(a, "valueTwo"));
	uint64_t x = args[json_integer_value(json_object_get(a, "index"))];
	const char *op = json_string_value(json_object_get(a, "op"));
	if (strcmp(op, "SCMP_CMP_EQ") == 0)
		return x == v;
	if (strcmp(op, "SCMP_CMP_NE") == 0)
		return x != v;
	if (strcmp(op, "SCMP_CMP_LT") == 0)
		return x < v;
	if (strcmp(op, "SCMP_CMP_LE") == 0)
		return x <= v;
	if (strcmp(op, "SCMP_CMP_GT") == 0)
		return x > v;
	if (strcmp(op, "SCMP_CMP_GE") == 0)
		return x >= v;
	return (x & v) == two;
}

static void decide(const json_t *oci, const char *name, uint64_t args[6], char *ret, size_t size)
{
	const json_t *rule, *n, *a;
	size_t i, j, k, matched = 0;
	snprintf(ret, size, "default");
	json_array_foreach(json_object_get(oci, "syscalls"), i, rule) {
		bool named = false, holds = true;
		json_array_foreach(json_object_get(rule, "names"), j, n)
			named |= strcmp(json_string_value(n), name) == 0;
		if (!named)
			continue;
		json_array_foreach(json_object_get(rule, "args"), k, a)
			holds &= cond_holds(a, args);
		if (!holds)
			continue;
		matched++;
		const char *act = json_string_value(json_object_get(rule, "action"));
		json_t *err = json_object_get(rule, "errnoRet");
		snprintf(ret, size, "%s%s%s", act, err ? ":" : "",
			 err ? strerrorname_np((int)json_integer_value(err)) : "");
	}
	cr_assert_leq(matched, 1, "%s(%llu, %llu, %llu): %zu rules match", name,
		      (unsigned long long)args[0], (unsigned long long)args[1],
		      (unsigned long long)args[2], matched);
}

Test(seccomp, default_profile_socket_families)
{
	json_t *def = load_default(oci_default_caps);
	static const uint64_t protocols[] = { 0, 4 /* SOCK_DIAG */, 9 /* AUDIT */, 15, 1ull << 32 };
	static const uint64_t high[] = { 46, 255, 1ull << 31, (1ull << 32) | 1, UINT64_MAX >> 1 };
	char got[64];
	for (uint64_t fam = 0; fam < 64 + ELEMENTSOF(high); fam++) {
		uint64_t f = fam < 64 ? fam : high[fam - 64];
		for (size_t p = 0; p < ELEMENTSOF(protocols); p++) {
			uint64_t args[6] = { f, 1 /* SOCK_STREAM */, protocols[p] };
			const char *want = "SCMP_ACT_ERRNO:EAFNOSUPPORT";
			if (f == 1 || f == 2 || f == 10)
				want = "SCMP_ACT_ALLOW";
			else if (f == 16)
				want = protocols[p] == 0 ? "SCMP_ACT_ALLOW" :
							   "SCMP_ACT_ERRNO:EPROTONOSUPPORT";
			decide(def, "socket", args, got, sizeof got);
			cr_assert_str_eq(got, want, "socket(%llu, 1, %llu)", (unsigned long long)f,
					 (unsigned long long)protocols[p]);
		}
		uint64_t args[6] = { f, 1, 0 };
		decide(def, "socketpair", args, got, sizeof got);
		cr_assert_str_eq(got, f == 1 ? "SCMP_ACT_ALLOW" : "SCMP_ACT_ERRNO:EAFNOSUPPORT",
				 "socketpair(%llu)", (unsigned long long)f);
	}
	cr_assert_null(action_of(def, "socketcall"));
	json_decref(def);
}

/* Profiles from the configured directories only: by name, by a path beneath one of them; no
 * path elsewhere, no symlink, no "..", no FIFO or directory. */
Test(seccomp, profile_directories)
{
	char dir[256], other[256], path[512], want[512], msg[2048];
	const char text[] = "{\"defaultAction\":\"SCMP_ACT_ALLOW\"}";
	snprintf(dir, sizeof dir, "%s/profiles", tmpdir);
	snprintf(other, sizeof other, "%s/other", tmpdir);
	cr_assert_eq(mkdir(dir, 0755), 0);
	cr_assert_eq(mkdir(other, 0755), 0);
	const char *const dirs[] = { dir, NULL };
	write_profile("profiles/strict.json", text, path, sizeof path);
	write_profile("other/evil.json", text, path, sizeof path);
	struct station_error e = {};
	json_t *out = NULL;
	char *got = NULL;
	char digest[SECCOMP_DIGEST_SIZE];

	/* by name, with or without .json, and by path: the control */
	snprintf(want, sizeof want, "%s/strict.json", dir);
	const char *const ok[] = { "strict", "strict.json", want };
	for (size_t i = 0; i < ELEMENTSOF(ok); i++) {
		cr_assert_eq(seccomp_profile_load_from(dirs, ok[i], &x86_old, &out, &got, digest,
						       &e),
			     0, "%s: %s", ok[i], e.message);
		cr_assert_str_eq(got, want);
		json_decref(TAKE_PTR(out));
		free(got);
	}

	/* a path outside every directory, with the same content */
	snprintf(path, sizeof path, "%s/evil.json", other);
	cr_assert_eq(seccomp_profile_load_from(dirs, path, &x86_old, &out, NULL, NULL, &e), -EPERM);
	snprintf(msg, sizeof msg,
		 "seccomp profile \"%s\" is not in a profile directory (\"%s\"); the worker's "
		 "--seccomp-dir adds one",
		 path, dir);
	cr_assert_str_eq(e.message, msg);
	cr_assert_str_eq(e.field, "seccompProfile");

	/* a symlink in the directory to that file, by name and by path */
	snprintf(want, sizeof want, "%s/link.json", dir);
	cr_assert_eq(symlink(path, want), 0);
	cr_assert_eq(seccomp_profile_load_from(dirs, "link", &x86_old, &out, NULL, NULL, &e),
		     -ELOOP, "%s", e.message);
	cr_assert_eq(seccomp_profile_load_from(dirs, want, &x86_old, &out, NULL, NULL, &e), -ELOOP,
		     "%s", e.message);
	/* a symlinked directory on the way */
	snprintf(want, sizeof want, "%s/sub", dir);
	cr_assert_eq(symlink(other, want), 0);
	snprintf(want, sizeof want, "%s/sub/evil.json", dir);
	cr_assert_eq(seccomp_profile_load_from(dirs, want, &x86_old, &out, NULL, NULL, &e), -ELOOP,
		     "%s", e.message);

	/* ".." and names that are not names */
	snprintf(want, sizeof want, "%s/../other/evil.json", dir);
	cr_assert_eq(seccomp_profile_load_from(dirs, want, &x86_old, &out, NULL, NULL, &e),
		     -EINVAL);
	cr_assert(strstr(e.message, "\"..\""), "%s", e.message);
	cr_assert_eq(seccomp_profile_load_from(dirs, "..", &x86_old, &out, NULL, NULL, &e),
		     -EINVAL);
	cr_assert_eq(seccomp_profile_load_from(dirs, "nope", &x86_old, &out, NULL, NULL, &e),
		     -ENOENT);

	/* a FIFO (opened without blocking) and a directory are not profiles */
	snprintf(want, sizeof want, "%s/fifo.json", dir);
	cr_assert_eq(mkfifo(want, 0644), 0);
	cr_assert_eq(seccomp_profile_load_from(dirs, "fifo", &x86_old, &out, NULL, NULL, &e),
		     -EINVAL);
	snprintf(msg, sizeof msg, "seccomp profile \"%s\" is not a regular file", want);
	cr_assert_str_eq(e.message, msg);
	snprintf(want, sizeof want, "%s/d.json", dir);
	cr_assert_eq(mkdir(want, 0755), 0);
	cr_assert_eq(seccomp_profile_load_from(dirs, want, &x86_old, &out, NULL, NULL, &e),
		     -EINVAL);
	cr_assert_null(out);
}
