/* SPDX-License-Identifier: MIT */
/* Docker-format seccomp profile → OCI linux.seccomp. The rules of the conversion are in
 * seccomp.h; this file only walks the JSON and refuses what it does not understand. */

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "basic/cleanup.h"
#include "basic/json-util.h"
#include "basic/safe-fs.h"
#include "basic/util.h"
#include "seccomp.h"

struct arch_info {
	const char *machine; /* uname -m */
	const char *go;	     /* Docker's includes/excludes name */
	const char *scmp;    /* libseccomp / OCI name */
};

static const struct arch_info arch_table[] = {
	{ "x86_64", "amd64", "SCMP_ARCH_X86_64" },
	{ "aarch64", "arm64", "SCMP_ARCH_AARCH64" },
	{ "i686", "386", "SCMP_ARCH_X86" },
	{ "armv7l", "arm", "SCMP_ARCH_ARM" },
	{ "ppc64le", "ppc64le", "SCMP_ARCH_PPC64LE" },
	{ "s390x", "s390x", "SCMP_ARCH_S390X" },
	{ "riscv64", "riscv64", "SCMP_ARCH_RISCV64" },
};

static const char *const actions[] = {
	"SCMP_ACT_KILL",  "SCMP_ACT_KILL_PROCESS", "SCMP_ACT_KILL_THREAD", "SCMP_ACT_TRAP",
	"SCMP_ACT_ERRNO", "SCMP_ACT_TRACE",	   "SCMP_ACT_ALLOW",	   "SCMP_ACT_LOG",
};

static const char *const operators[] = {
	"SCMP_CMP_NE", "SCMP_CMP_LT", "SCMP_CMP_LE",	    "SCMP_CMP_EQ",
	"SCMP_CMP_GE", "SCMP_CMP_GT", "SCMP_CMP_MASKED_EQ",
};

static const char *const filter_flags[] = {
	"SECCOMP_FILTER_FLAG_TSYNC",
	"SECCOMP_FILTER_FLAG_LOG",
	"SECCOMP_FILTER_FLAG_SPEC_ALLOW",
	"SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV",
};

struct conv {
	const char *origin;
	const struct arch_info *arch;
	const char *const *caps;
	unsigned kernel_major, kernel_minor;
	struct station_error *e;
};

static int conv_fail(const struct conv *c, const char *where, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int conv_fail(const struct conv *c, const char *where, const char *fmt, ...)
{
	char msg[384];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	return station_error_set(c->e, -EINVAL, "seccompProfile", "seccomp profile \"%s\": %s: %s",
				 c->origin, where, msg);
}

static bool in_list(const char *s, const char *const *list, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(s, list[i]) == 0)
			return true;
	return false;
}

static const struct arch_info *arch_lookup(const char *machine)
{
	for (size_t i = 0; i < ELEMENTSOF(arch_table); i++)
		if (strcmp(machine, arch_table[i].machine) == 0)
			return &arch_table[i];
	return NULL;
}

static bool arch_named(const struct arch_info *a, const char *name)
{
	return strcmp(name, a->go) == 0 || strcmp(name, a->machine) == 0 ||
	       strcmp(name, a->scmp) == 0;
}

/* "4.8", "5.10.0-21-amd64" → 4, 8 */
static int parse_kernel_version(const char *s, unsigned *ret_major, unsigned *ret_minor)
{
	unsigned major, minor;
	int n = 0;
	if (sscanf(s, "%u.%u%n", &major, &minor, &n) != 2 || n == 0)
		return -EINVAL;
	if (s[n] != '\0' && s[n] != '.' && s[n] != '-' && s[n] != '+')
		return -EINVAL;
	*ret_major = major;
	*ret_minor = minor;
	return 0;
}

static bool kernel_at_least(const struct conv *c, unsigned major, unsigned minor)
{
	return c->kernel_major > major || (c->kernel_major == major && c->kernel_minor >= minor);
}

static bool cap_held(const struct conv *c, const char *cap)
{
	for (size_t i = 0; c->caps && c->caps[i]; i++)
		if (strcasecmp(c->caps[i], cap) == 0)
			return true;
	return false;
}

/* errno names are what profiles carry beside (or instead of) errnoRet: "EPERM" → 1 */
static int errno_from_name(const char *name)
{
	for (int i = 1; i < 4096; i++) {
		const char *n = strerrorname_np(i);
		if (n && strcmp(n, name) == 0)
			return i;
	}
	return -EINVAL;
}

static int get_string(const struct conv *c, const json_t *obj, const char *key, const char *where,
		      const char **ret)
{
	json_t *v = json_object_get(obj, key);
	if (!v || json_is_null(v)) {
		*ret = NULL;
		return 0;
	}
	if (!json_is_string(v))
		return conv_fail(c, where, "\"%s\" must be a string", key);
	*ret = json_string_value(v);
	return 0;
}

/* An optional array; null counts as absent (containers-common writes "args": null). */
static int get_array(const struct conv *c, const json_t *obj, const char *key, const char *where,
		     json_t **ret)
{
	json_t *v = json_object_get(obj, key);
	if (v && json_is_null(v))
		v = NULL;
	if (v && !json_is_array(v))
		return conv_fail(c, where, "\"%s\" must be an array", key);
	*ret = v;
	return 0;
}

static int get_u64(const struct conv *c, const json_t *obj, const char *key, const char *where,
		   bool *ret_set, uint64_t *ret)
{
	json_t *v = json_object_get(obj, key);
	*ret_set = v && !json_is_null(v);
	if (!*ret_set)
		return 0;
	if (!json_is_integer(v) || json_integer_value(v) < 0)
		return conv_fail(c, where, "\"%s\" must be a non-negative integer", key);
	*ret = (uint64_t)json_integer_value(v);
	return 0;
}

/* errnoRet (a number) or errno (a name such as "EPERM"); the number wins when both are given. */
static int get_errno(const struct conv *c, const json_t *obj, const char *num_key,
		     const char *name_key, const char *where, bool *ret_set, uint64_t *ret)
{
	int r = get_u64(c, obj, num_key, where, ret_set, ret);
	if (r < 0 || *ret_set)
		return r;
	const char *name = NULL;
	r = get_string(c, obj, name_key, where, &name);
	if (r < 0 || !name || !*name)
		return r;
	int n = errno_from_name(name);
	if (n < 0)
		return conv_fail(c, where, "unknown errno name \"%s\"", name);
	*ret_set = true;
	*ret = (uint64_t)n;
	return 0;
}

static int check_action(const struct conv *c, const char *action, bool has_errno, const char *where)
{
	if (strcmp(action, "SCMP_ACT_NOTIFY") == 0)
		return conv_fail(c, where,
				 "action \"%s\" needs a seccomp agent, which is not supported",
				 action);
	if (!in_list(action, actions, ELEMENTSOF(actions)))
		return conv_fail(c, where, "unknown action \"%s\"", action);
	if (has_errno && strcmp(action, "SCMP_ACT_ERRNO") != 0 &&
	    strcmp(action, "SCMP_ACT_TRACE") != 0)
		return conv_fail(c, where,
				 "an errno return is only valid with SCMP_ACT_ERRNO or "
				 "SCMP_ACT_TRACE, not \"%s\"",
				 action);
	return 0;
}

static int convert_default(const struct conv *c, const json_t *profile, json_t *out)
{
	const char *action = NULL;
	bool has_errno;
	uint64_t err = 0;
	int r = get_string(c, profile, "defaultAction", "defaultAction", &action);
	if (r < 0)
		return r;
	if (!action)
		return conv_fail(c, "defaultAction", "missing");
	r = get_errno(c, profile, "defaultErrnoRet", "defaultErrno", "defaultErrnoRet", &has_errno,
		      &err);
	if (r >= 0)
		r = check_action(c, action, has_errno, "defaultAction");
	if (r < 0)
		return r;
	json_object_set_new(out, "defaultAction", json_string(action));
	if (has_errno)
		json_object_set_new(out, "defaultErrnoRet", json_integer((json_int_t)err));
	return 0;
}

static int append_scmp_arch(const struct conv *c, json_t *list, json_t *v, const char *where)
{
	if (!json_is_string(v) || strncmp(json_string_value(v), "SCMP_ARCH_", 10) != 0)
		return conv_fail(c, where, "an architecture must be a string \"SCMP_ARCH_…\"");
	json_array_append(list, v);
	return 0;
}

static int convert_arch_map_entry(const struct conv *c, const json_t *entry, size_t i, json_t *list)
{
	char where[64];
	snprintf(where, sizeof where, "archMap[%zu]", i);
	if (!json_is_object(entry))
		return conv_fail(c, where, "must be an object");
	const char *arch = NULL;
	json_t *subs, *v;
	size_t j;
	int r = get_string(c, entry, "architecture", where, &arch);
	if (r >= 0)
		r = get_array(c, entry, "subArchitectures", where, &subs);
	if (r < 0)
		return r;
	if (!arch)
		return conv_fail(c, where, "\"architecture\" missing");
	if (strcmp(arch, c->arch->scmp) != 0)
		return 0;
	json_array_append_new(list, json_string(arch));
	json_array_foreach(subs, j, v) {
		r = append_scmp_arch(c, list, v, where);
		if (r < 0)
			return r;
	}
	return 0;
}

static int convert_arches(const struct conv *c, const json_t *profile, json_t *out)
{
	json_t *map, *plain, *v;
	size_t i;
	int r = get_array(c, profile, "archMap", "archMap", &map);
	if (r >= 0)
		r = get_array(c, profile, "architectures", "architectures", &plain);
	if (r < 0)
		return r;
	if (map && plain && json_array_size(map) > 0 && json_array_size(plain) > 0)
		return conv_fail(c, "architectures",
				 "both \"architectures\" and \"archMap\" given");

	json_t *list = json_array();
	json_object_set_new(out, "architectures", list);
	json_array_foreach(plain, i, v) {
		r = append_scmp_arch(c, list, v, "architectures");
		if (r < 0)
			return r;
	}
	json_array_foreach(map, i, v) {
		r = convert_arch_map_entry(c, v, i, list);
		if (r < 0)
			return r;
	}
	return 0;
}

static int convert_flags(const struct conv *c, const json_t *profile, json_t *out)
{
	json_t *flags, *v;
	size_t i;
	int r = get_array(c, profile, "flags", "flags", &flags);
	if (r < 0 || !flags || json_array_size(flags) == 0)
		return r;
	json_array_foreach(flags, i, v) {
		if (!json_is_string(v) ||
		    !in_list(json_string_value(v), filter_flags, ELEMENTSOF(filter_flags)))
			return conv_fail(c, "flags", "unknown flag at index %zu", i);
	}
	json_object_set(out, "flags", flags);
	return 0;
}

static int convert_arg(const struct conv *c, const json_t *arg, const char *where, json_t **ret)
{
	uint64_t index = 0, value = 0, value_two = 0;
	bool has_index, has_value, has_two;
	const char *op = NULL;
	if (!json_is_object(arg))
		return conv_fail(c, where, "must be an object");
	int r = get_u64(c, arg, "index", where, &has_index, &index);
	if (r >= 0)
		r = get_u64(c, arg, "value", where, &has_value, &value);
	if (r >= 0)
		r = get_u64(c, arg, "valueTwo", where, &has_two, &value_two);
	if (r >= 0)
		r = get_string(c, arg, "op", where, &op);
	if (r < 0)
		return r;
	if (!has_index || index > 5)
		return conv_fail(c, where, "\"index\" must be 0 to 5");
	if (!op || !in_list(op, operators, ELEMENTSOF(operators)))
		return conv_fail(c, where, "unknown operator \"%s\"", op ? op : "");
	/* libseccomp ignores it for the other operators; runsc refuses the config */
	if (has_two && value_two != 0 && strcmp(op, "SCMP_CMP_MASKED_EQ") != 0)
		return conv_fail(c, where, "\"valueTwo\" is only valid with SCMP_CMP_MASKED_EQ");
	*ret = json_pack("{sI sI sI ss}", "index", (json_int_t)index, "value", (json_int_t)value,
			 "valueTwo", (json_int_t)value_two, "op", op);
	return *ret ? 0 : -ENOMEM;
}

static int convert_args(const struct conv *c, const json_t *rule, const char *where, json_t **ret)
{
	json_t *args, *v;
	size_t i;
	char w[96];
	int r = get_array(c, rule, "args", where, &args);
	if (r < 0 || !args || json_array_size(args) == 0) {
		*ret = NULL;
		return r;
	}
	_cleanup_json_ json_t *out = json_array();
	bool seen[6] = {};
	json_array_foreach(args, i, v) {
		json_t *a = NULL;
		snprintf(w, sizeof w, "%s.args[%zu]", where, i);
		r = convert_arg(c, v, w, &a);
		if (r < 0)
			return r;
		json_int_t index = json_integer_value(json_object_get(a, "index"));
		if (seen[index]) {
			json_decref(a);
			return conv_fail(
				c, w,
				"a second condition on argument %d: runtimes disagree on "
				"what that means (runc and runsc make each condition a rule "
				"of its own, an OR; libseccomp refuses it); write one rule per "
				"condition",
				(int)index);
		}
		seen[index] = true;
		json_array_append_new(out, a);
	}
	*ret = TAKE_PTR(out);
	return 0;
}

static bool syscall_name_valid(const char *s)
{
	size_t n = strlen(s);
	return n > 0 && n < 64 && strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789_") == n;
}

static int convert_names(const struct conv *c, const json_t *rule, const char *where, json_t **ret)
{
	const char *single = NULL;
	json_t *names, *v;
	size_t i;
	int r = get_string(c, rule, "name", where, &single);
	if (r >= 0)
		r = get_array(c, rule, "names", where, &names);
	if (r < 0)
		return r;
	if (single && names && json_array_size(names) > 0)
		return conv_fail(c, where, "both \"name\" and \"names\" given");
	_cleanup_json_ json_t *out = json_array();
	if (single)
		json_array_append_new(out, json_string(single));
	json_array_foreach(names, i, v)
		json_array_append(out, v);
	if (json_array_size(out) == 0)
		return conv_fail(c, where, "no syscall names");
	json_array_foreach(out, i, v) {
		if (!json_is_string(v) || !syscall_name_valid(json_string_value(v)))
			return conv_fail(c, where, "names[%zu] is not a syscall name", i);
	}
	*ret = TAKE_PTR(out);
	return 0;
}

/* caps of an includes (all must be held) or excludes (any held matches) object */
static int cond_caps(const struct conv *c, const json_t *cond, const char *where, bool includes,
		     bool *ret)
{
	json_t *caps, *v;
	size_t i;
	int r = get_array(c, cond, "caps", where, &caps);
	if (r < 0)
		return r;
	*ret = includes;
	json_array_foreach(caps, i, v) {
		if (!json_is_string(v))
			return conv_fail(c, where, "caps[%zu] must be a string", i);
		bool held = cap_held(c, json_string_value(v));
		if (includes && !held)
			*ret = false;
		if (!includes && held)
			*ret = true;
	}
	return 0;
}

/* *ret_listed: the target arch is in "arches"; *ret_any: the list is not empty */
static int cond_arches(const struct conv *c, const json_t *cond, const char *where, bool *ret_any,
		       bool *ret_listed)
{
	json_t *arches, *v;
	size_t i;
	int r = get_array(c, cond, "arches", where, &arches);
	if (r < 0)
		return r;
	*ret_any = json_array_size(arches) > 0;
	*ret_listed = false;
	json_array_foreach(arches, i, v) {
		if (!json_is_string(v))
			return conv_fail(c, where, "arches[%zu] must be a string", i);
		if (arch_named(c->arch, json_string_value(v)))
			*ret_listed = true;
	}
	return 0;
}

/* *ret_set: "minKernel" given; *ret_reached: the target kernel is at least that version */
static int cond_kernel(const struct conv *c, const json_t *cond, const char *where, bool *ret_set,
		       bool *ret_reached)
{
	const char *min = NULL;
	unsigned major, minor;
	int r = get_string(c, cond, "minKernel", where, &min);
	if (r < 0)
		return r;
	*ret_set = min && *min;
	*ret_reached = false;
	if (!*ret_set)
		return 0;
	if (parse_kernel_version(min, &major, &minor) < 0)
		return conv_fail(c, where, "\"minKernel\" \"%s\" is not a kernel version", min);
	*ret_reached = kernel_at_least(c, major, minor);
	return 0;
}

static int includes_met(const struct conv *c, const json_t *inc, const char *where, bool *ret)
{
	bool caps_ok, any_arch, listed, has_min, reached;
	int r = cond_caps(c, inc, where, true, &caps_ok);
	if (r >= 0)
		r = cond_arches(c, inc, where, &any_arch, &listed);
	if (r >= 0)
		r = cond_kernel(c, inc, where, &has_min, &reached);
	if (r < 0)
		return r;
	*ret = caps_ok && (!any_arch || listed) && (!has_min || reached);
	return 0;
}

static int excludes_hit(const struct conv *c, const json_t *exc, const char *where, bool *ret)
{
	bool held, any_arch, listed, has_min, reached;
	int r = cond_caps(c, exc, where, false, &held);
	if (r >= 0)
		r = cond_arches(c, exc, where, &any_arch, &listed);
	if (r >= 0)
		r = cond_kernel(c, exc, where, &has_min, &reached);
	if (r < 0)
		return r;
	*ret = held || listed || reached;
	return 0;
}

/* A rule is kept when its includes are met and its excludes do not match. */
static int rule_applies(const struct conv *c, const json_t *rule, const char *where, bool *ret)
{
	char w[96];
	bool met, hit;
	json_t *inc = json_object_get(rule, "includes"), *exc = json_object_get(rule, "excludes");
	if ((inc && !json_is_object(inc) && !json_is_null(inc)) ||
	    (exc && !json_is_object(exc) && !json_is_null(exc)))
		return conv_fail(c, where, "\"includes\" and \"excludes\" must be objects");

	snprintf(w, sizeof w, "%s.includes", where);
	int r = includes_met(c, inc, w, &met);
	if (r < 0)
		return r;
	snprintf(w, sizeof w, "%s.excludes", where);
	r = excludes_hit(c, exc, w, &hit);
	if (r < 0)
		return r;
	*ret = met && !hit;
	return 0;
}

static int convert_rule(const struct conv *c, const json_t *rule, size_t idx, json_t *out)
{
	char where[48];
	const char *action = NULL;
	bool applies = false, has_errno = false;
	uint64_t err = 0;
	json_t *names = NULL, *args = NULL;

	snprintf(where, sizeof where, "syscalls[%zu]", idx);
	if (!json_is_object(rule))
		return conv_fail(c, where, "must be an object");
	int r = get_string(c, rule, "action", where, &action);
	if (r >= 0 && !action)
		r = conv_fail(c, where, "\"action\" missing");
	if (r >= 0)
		r = get_errno(c, rule, "errnoRet", "errno", where, &has_errno, &err);
	if (r >= 0)
		r = check_action(c, action, has_errno, where);
	if (r >= 0)
		r = rule_applies(c, rule, where, &applies);
	if (r >= 0)
		r = convert_names(c, rule, where, &names);
	if (r >= 0)
		r = convert_args(c, rule, where, &args);
	if (r < 0 || !applies) {
		json_decref(names);
		json_decref(args);
		return r;
	}
	json_t *o = json_pack("{so ss}", "names", names, "action", action);
	if (!o) {
		json_decref(args);
		return -ENOMEM;
	}
	if (has_errno)
		json_object_set_new(o, "errnoRet", json_integer((json_int_t)err));
	if (args)
		json_object_set_new(o, "args", args);
	json_array_append_new(out, o);
	return 0;
}

static int convert_syscalls(const struct conv *c, const json_t *profile, json_t *out)
{
	json_t *rules, *v;
	size_t i;
	int r = get_array(c, profile, "syscalls", "syscalls", &rules);
	if (r < 0)
		return r;
	json_t *list = json_array();
	json_object_set_new(out, "syscalls", list);
	json_array_foreach(rules, i, v) {
		r = convert_rule(c, v, i, list);
		if (r < 0)
			return r;
	}
	return 0;
}

static int conv_init(struct conv *c, const char *origin, const struct seccomp_target *t,
		     struct station_error *e)
{
	static const struct seccomp_target none = {};
	struct utsname u;
	if (!t)
		t = &none;
	*c = (struct conv){ .origin = origin,
			    .caps = t->caps,
			    .e = e,
			    .kernel_major = t->kernel_major,
			    .kernel_minor = t->kernel_minor };
	if (uname(&u) < 0)
		return station_error_set(e, negative_errno(), NULL, "uname: %m");
	const char *machine = t->arch ? t->arch : u.machine;
	c->arch = arch_lookup(machine);
	if (!c->arch)
		return station_error_set(e, -ENOTSUP, NULL,
					 "seccomp: architecture \"%s\" is not supported", machine);
	if (c->kernel_major == 0 &&
	    parse_kernel_version(u.release, &c->kernel_major, &c->kernel_minor) < 0)
		return station_error_set(e, -EINVAL, NULL, "cannot parse kernel release \"%s\"",
					 u.release);
	return 0;
}

int seccomp_profile_convert(const json_t *profile, const char *origin,
			    const struct seccomp_target *t, json_t **ret, struct station_error *e)
{
	struct conv c;
	int r = conv_init(&c, origin, t, e);
	if (r < 0)
		return r;
	if (!json_is_object(profile))
		return conv_fail(&c, "(top level)", "must be a JSON object");

	_cleanup_json_ json_t *out = json_object();
	r = convert_default(&c, profile, out);
	if (r >= 0)
		r = convert_arches(&c, profile, out);
	if (r >= 0)
		r = convert_flags(&c, profile, out);
	if (r >= 0)
		r = convert_syscalls(&c, profile, out);
	if (r < 0)
		return r;
	*ret = TAKE_PTR(out);
	return 0;
}

static int load_json(const char *path, const char *data, size_t len, json_t **ret,
		     struct station_error *e)
{
	json_error_t jerr;
	json_t *j = json_loadb(data, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!j)
		return station_error_set(e, -EINVAL, "seccompProfile",
					 "seccomp profile \"%s\" is not valid JSON: %s (line %d, "
					 "column %d)",
					 path, jerr.text, jerr.line, jerr.column);
	*ret = j;
	return 0;
}

static int read_profile_fd(int fd, const char *path, char **ret, size_t *ret_len,
			   struct station_error *e)
{
	struct stat st;
	if (fstat(fd, &st) < 0)
		return station_error_set(e, negative_errno(), "seccompProfile",
					 "cannot read seccomp profile \"%s\": %m", path);
	if (!S_ISREG(st.st_mode))
		return station_error_set(e, -EINVAL, "seccompProfile",
					 "seccomp profile \"%s\" is not a regular file", path);
	if (st.st_size > SECCOMP_PROFILE_MAX)
		return station_error_set(e, -EFBIG, "seccompProfile",
					 "seccomp profile \"%s\" is larger than %d bytes", path,
					 SECCOMP_PROFILE_MAX);
	_cleanup_free_ char *buf = malloc(SECCOMP_PROFILE_MAX + 2);
	size_t len = 0;
	if (!buf)
		return station_error_set(e, -ENOMEM, NULL, "out of memory");
	for (;;) {
		ssize_t k = read(fd, buf + len, SECCOMP_PROFILE_MAX + 1 - len);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return station_error_set(e, negative_errno(), "seccompProfile",
						 "cannot read seccomp profile \"%s\": %m", path);
		if (k == 0)
			break;
		len += (size_t)k;
		if (len > SECCOMP_PROFILE_MAX)
			return station_error_set(e, -EFBIG, "seccompProfile",
						 "seccomp profile \"%s\" is larger than %d bytes",
						 path, SECCOMP_PROFILE_MAX);
	}
	buf[len] = '\0';
	*ret = TAKE_PTR(buf);
	*ret_len = len;
	return 0;
}

static int load_fd(int fd, const char *path, const struct seccomp_target *t, json_t **ret,
		   char ret_digest[SECCOMP_DIGEST_SIZE], struct station_error *e)
{
	_cleanup_free_ char *data = NULL;
	_cleanup_json_ json_t *profile = NULL;
	size_t len = 0;
	int r = read_profile_fd(fd, path, &data, &len, e);
	if (r < 0)
		return r;
	r = load_json(path, data, len, &profile, e);
	if (r < 0)
		return r;
	json_t *out;
	r = seccomp_profile_convert(profile, path, t, &out, e);
	if (r < 0)
		return r;
	if (ret_digest) {
		char hex[65];
		sha256_hex(data, len, hex);
		snprintf(ret_digest, SECCOMP_DIGEST_SIZE, "sha256:%s", hex);
	}
	*ret = out;
	return 0;
}

int seccomp_profile_load(const char *path, const struct seccomp_target *t, json_t **ret,
			 char ret_digest[SECCOMP_DIGEST_SIZE], struct station_error *e)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT)
		return station_error_set(e, -ENOENT, "seccompProfile",
					 "seccomp profile \"%s\" not found", path);
	if (fd < 0)
		return station_error_set(e, negative_errno(), "seccompProfile",
					 "cannot read seccomp profile \"%s\": %m", path);
	return load_fd(fd, path, t, ret, ret_digest, e);
}

/* A profile name: "default" or "default.json"; letters, digits, '.', '_', '-', not starting
 * with '.'. */
static bool profile_name_valid(const char *s)
{
	size_t n = strlen(s);
	return n > 0 && n <= 128 && s[0] != '.' &&
	       strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") == n;
}

/* Every component of rel is a plain name: no "", ".", "..". */
static bool components_plain(const char *rel)
{
	for (const char *p = rel; *p;) {
		size_t n = strcspn(p, "/");
		if (n == 0 || (n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
			return false;
		p += n;
		if (*p == '/' && !*++p)
			return false;
	}
	return *rel != '\0';
}

static int open_beneath(const char *dir, const char *rel, int *ret_fd)
{
	_cleanup_close_ int dfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return negative_errno();
	int fd = safe_openat(dfd, rel, O_RDONLY | O_NONBLOCK | O_NOFOLLOW, 0, SAFE_BENEATH);
	if (fd < 0)
		return fd;
	*ret_fd = fd;
	return 0;
}

static void list_dirs(const char *const *dirs, char *buf, size_t size)
{
	size_t off = 0;
	buf[0] = '\0';
	for (size_t i = 0; dirs && dirs[i] && off < size; i++)
		off += (size_t)snprintf(buf + off, size - off, "%s\"%s\"", i ? ", " : "", dirs[i]);
	if (!dirs || !dirs[0])
		snprintf(buf, size, "(none)");
}

int seccomp_profile_open(const char *const *dirs, const char *name, char **ret_path, int *ret_fd,
			 struct station_error *e)
{
	char allowed[1024];
	int r;
	list_dirs(dirs, allowed, sizeof allowed);
	if (name[0] != '/') {
		if (!profile_name_valid(name))
			return station_error_set(e, -EINVAL, "seccompProfile",
						 "seccomp profile \"%.200s\": give a profile name "
						 "(\"default\") or an absolute path in a profile "
						 "directory (%s)",
						 name, allowed);
		size_t n = strlen(name);
		bool ext = n > 5 && strcmp(name + n - 5, ".json") == 0;
		for (size_t i = 0; dirs && dirs[i]; i++) {
			_cleanup_free_ char *path = NULL;
			int fd = -1;
			if (asprintf(&path, "%s/%s%s", dirs[i], name, ext ? "" : ".json") < 0)
				return station_error_set(e, -ENOMEM, NULL, "out of memory");
			r = open_beneath(dirs[i], path + strlen(dirs[i]) + 1, &fd);
			if (r == -ENOENT)
				continue;
			if (r < 0)
				return station_error_set(e, r, "seccompProfile",
							 "seccomp profile \"%s\" cannot be opened "
							 "(symlinks are refused): %s",
							 path, strerror(-r));
			*ret_fd = fd;
			*ret_path = TAKE_PTR(path);
			return 0;
		}
		return station_error_set(e, -ENOENT, "seccompProfile",
					 "seccomp profile \"%s\" not found in the profile "
					 "directories (%s)",
					 name, allowed);
	}
	for (size_t i = 0; dirs && dirs[i]; i++) {
		size_t n = strlen(dirs[i]);
		if (strncmp(name, dirs[i], n) != 0 || name[n] != '/')
			continue;
		const char *rel = name + n + 1;
		if (!components_plain(rel))
			return station_error_set(e, -EINVAL, "seccompProfile",
						 "seccomp profile \"%.200s\": \".\", \"..\" and "
						 "empty path components are refused",
						 name);
		int fd = -1;
		r = open_beneath(dirs[i], rel, &fd);
		if (r == -ENOENT)
			return station_error_set(e, r, "seccompProfile",
						 "seccomp profile \"%s\" not found", name);
		if (r < 0)
			return station_error_set(
				e, r, "seccompProfile",
				"seccomp profile \"%s\" cannot be opened (symlinks "
				"are refused): %s",
				name, strerror(-r));
		*ret_path = strdup(name);
		if (!*ret_path) {
			close(fd);
			return station_error_set(e, -ENOMEM, NULL, "out of memory");
		}
		*ret_fd = fd;
		return 0;
	}
	return station_error_set(e, -EPERM, "seccompProfile",
				 "seccomp profile \"%.200s\" is not in a profile directory (%s); "
				 "the worker's --seccomp-dir adds one",
				 name, allowed);
}

int seccomp_profile_load_from(const char *const *dirs, const char *name,
			      const struct seccomp_target *t, json_t **ret, char **ret_path,
			      char ret_digest[SECCOMP_DIGEST_SIZE], struct station_error *e)
{
	_cleanup_free_ char *path = NULL;
	_cleanup_close_ int fd = -1;
	int r = seccomp_profile_open(dirs, name, &path, &fd, e);
	if (r < 0)
		return r;
	r = load_fd(fd, path, t, ret, ret_digest, e);
	if (r < 0)
		return r;
	if (ret_path)
		*ret_path = TAKE_PTR(path);
	return 0;
}
