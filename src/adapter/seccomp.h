/* SPDX-License-Identifier: MIT */
#pragma once

/* Docker-format seccomp profiles (the JSON Docker, Podman and containers-common ship:
 * defaultAction, defaultErrnoRet, archMap or architectures, syscalls[] with names, action,
 * errnoRet, args and includes/excludes by caps, arches and minKernel) converted to the OCI
 * runtime-spec `linux.seccomp` object for one architecture and one capability set.
 *
 * The conversion follows Docker's: an archMap entry whose architecture is the target's
 * contributes it and its subArchitectures; a rule is kept when every includes.caps is held, the
 * target arch is in includes.arches (when listed), the kernel is at least includes.minKernel,
 * and no excludes condition matches (any excludes.caps held, the arch listed, the kernel at
 * least excludes.minKernel). Arches in includes/excludes are Go names ("amd64", "arm64"), as
 * Docker writes them; uname and SCMP_ARCH_ names are accepted too.
 *
 * Stricter than Docker: an unknown action or comparison operator, a wrong JSON type, an errnoRet
 * on an action that has none, SCMP_ACT_NOTIFY (no seccomp agent here), duplicate keys, syscall
 * names that cannot be syscall names, two conditions on the same argument in one rule (runc and
 * runsc make each condition a rule of its own, an OR; libseccomp refuses such a rule) and a
 * valueTwo with an operator other than SCMP_CMP_MASKED_EQ are errors. Argument values are at
 * most 2^63-1 (JSON integers as jansson reads them). Every error message names the profile and
 * the place in it: `seccomp profile "/p.json": syscalls[3].action: unknown action "X"`. */

#include <jansson.h>

#include "basic/error.h"

/* "sha256:" + 64 hex digits + NUL */
#define SECCOMP_DIGEST_SIZE 72
/* Larger profiles are refused (Docker's default is ~20 KiB). */
#define SECCOMP_PROFILE_MAX (1024 * 1024)

struct seccomp_target {
	const char *const *caps; /* CAP_* names the container holds, NULL-terminated; NULL: none */
	const char *arch;	 /* uname machine name ("x86_64", "aarch64"); NULL: this machine */
	unsigned kernel_major;	 /* compared with minKernel; 0: this machine's (uname) */
	unsigned kernel_minor;
};

/* Reads the profile at path (any path: for tests and the worker's own checks; a request's
 * profile goes through seccomp_profile_load_from()) and converts it. On success
 * *ret is a new reference to the OCI object and ret_digest (may be NULL) holds
 * "sha256:<hex>" of the file's bytes. Errors: -ENOENT (no such file), -EINVAL (not a valid
 * profile), -EFBIG, -ENOTSUP (architecture unknown to us), other -errno from reading. */
int seccomp_profile_load(const char *path, const struct seccomp_target *t, json_t **ret,
			 char ret_digest[SECCOMP_DIGEST_SIZE], struct station_error *e);

/* Profiles from configured directories only (dirs: absolute, canonical directory paths,
 * NULL-terminated; the shipped profiles/ and each --seccomp-dir). name is either a profile name
 * ("default" or "default.json": [A-Za-z0-9._-], not starting with '.'), looked up in dirs in
 * order, or an absolute path that lies lexically beneath one of dirs and has no "", "." or ".."
 * component. The file is opened from the directory's fd with openat2(RESOLVE_BENEATH |
 * RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS), O_NOFOLLOW | O_NONBLOCK, and must be a regular
 * file of at most SECCOMP_PROFILE_MAX bytes. *ret_path is the profile's absolute path (what the
 * workspace records). Errors name the field "seccompProfile": -EINVAL (not a name or path we
 * take), -EPERM (outside every directory), -ENOENT, -ELOOP (a symlink on the way), -EFBIG. */
int seccomp_profile_open(const char *const *dirs, const char *name, char **ret_path, int *ret_fd,
			 struct station_error *e);
/* seccomp_profile_open() + read + convert; ret_path may be NULL. */
int seccomp_profile_load_from(const char *const *dirs, const char *name,
			      const struct seccomp_target *t, json_t **ret, char **ret_path,
			      char ret_digest[SECCOMP_DIGEST_SIZE], struct station_error *e);

/* Converts a parsed profile; origin names it in error messages (usually its path). */
int seccomp_profile_convert(const json_t *profile, const char *origin,
			    const struct seccomp_target *t, json_t **ret, struct station_error *e);
