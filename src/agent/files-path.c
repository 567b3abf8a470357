/* SPDX-License-Identifier: MIT */
/* Paths of file sessions. A PATH is checked lexically first (size, NUL, `..` above the root,
 * an absolute path outside a host root), then every lookup goes through openat2() on the
 * root's fd with RESOLVE_IN_ROOT (a container: every symlink resolves inside it) or
 * RESOLVE_BENEATH (a host workspace: a symlink leading out is -EXDEV), and always
 * RESOLVE_NO_MAGICLINKS. The last component is looked at with fstatat(AT_SYMLINK_NOFOLLOW) in
 * the directory that holds it; following it is a loop of ours over readlinkat(), each step
 * resolved the same way again. */

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "agent/files-internal.h"
#include "basic/cleanup.h"
#include "proto/agent-proto.h"

void files_path_done(struct files_path *p)
{
	free(p->rel);
	free(p->abs);
	*p = (struct files_path){ 0 };
}

/* The next component of *p (skipping slashes): its start and length, 0 at the end. */
static size_t next_component(const char **p, const char **ret_start)
{
	const char *s = *p;
	size_t n;

	while (*s == '/')
		s++;
	n = strcspn(s, "/");
	*ret_start = s;
	*p = s + n;
	return n;
}

static bool is_dot(const char *c, size_t n)
{
	return n == 1 && c[0] == '.';
}

static bool is_dotdot(const char *c, size_t n)
{
	return n == 2 && c[0] == '.' && c[1] == '.';
}

/* Appends "/" and n bytes of c to a string of capacity cap (with its NUL). */
static void append_component(char *s, size_t *len, const char *c, size_t n)
{
	s[(*len)++] = '/';
	memcpy(s + *len, c, n);
	*len += n;
	s[*len] = 0;
}

/* rel and abs from the components of full after the root's: `..` may not climb above the
 * root; rel keeps it (the kernel resolves it, symlinks and all), abs collapses it. */
static int split_beneath(const char *prefix, const char *rest, struct files_path *ret)
{
	size_t cap = strlen(prefix) + strlen(rest) + 3, rel_len = 0, abs_len = strlen(prefix);
	_cleanup_free_ char *rel = malloc(cap), *abs = malloc(cap);
	const char *c;
	size_t n;
	long depth = 0;

	if (!rel || !abs)
		return -ENOMEM;
	memcpy(abs, prefix, abs_len + 1);
	rel[0] = 0;
	while ((n = next_component(&rest, &c)) > 0) {
		if (is_dot(c, n))
			continue;
		if (is_dotdot(c, n)) {
			if (--depth < 0)
				return -EXDEV;
			abs_len = (size_t)(strrchr(abs, '/') - abs);
			abs[abs_len] = 0;
		} else {
			depth++;
			append_component(abs, &abs_len, c, n);
		}
		append_component(rel, &rel_len, c, n);
	}
	if (abs_len == 0)
		snprintf(abs, cap, "/");
	ret->rel = rel_len ? strdup(rel + 1) : strdup(".");
	ret->abs = TAKE_PTR(abs);
	if (!ret->rel) {
		files_path_done(ret);
		return -ENOMEM;
	}
	return 0;
}

/* The part of full beneath prefix, or NULL when full does not start with prefix's
 * components (a `.` or empty component in full is skipped; a `..` there never matches). */
static const char *strip_prefix(const char *prefix, const char *full)
{
	const char *pc, *fc;
	size_t pn, fn;

	for (;;) {
		pn = next_component(&prefix, &pc);
		if (pn == 0)
			return full;
		do
			fn = next_component(&full, &fc);
		while (is_dot(fc, fn));
		if (fn != pn || memcmp(pc, fc, pn) != 0)
			return NULL;
	}
}

int files_path_check(const char *prefix, const char *workdir, const uint8_t *path, size_t len,
		     struct files_path *ret)
{
	_cleanup_free_ char *full = NULL;
	const char *rest;
	int n;

	if (len == 0 || len > PROTO_MAX_PATH || memchr(path, 0, len))
		return -EINVAL;
	if (path[0] == '/')
		n = asprintf(&full, "%.*s", (int)len, (const char *)path);
	else
		n = asprintf(&full, "%s/%.*s", workdir, (int)len, (const char *)path);
	if (n < 0)
		return -ENOMEM;
	rest = strip_prefix(prefix, full);
	if (!rest)
		return -EXDEV;
	return split_beneath(prefix, rest, ret);
}

int files_openat(const struct files_root *root, const char *rel, int flags, mode_t mode)
{
	struct open_how how = {
		.flags = (uint64_t)(flags | O_CLOEXEC),
		.mode = (flags & (O_CREAT | O_TMPFILE)) ? mode : 0,
		.resolve = RESOLVE_NO_MAGICLINKS |
			   (root->how == FILES_IN_ROOT ? RESOLVE_IN_ROOT : RESOLVE_BENEATH),
	};
	long fd;

	do
		fd = syscall(SYS_openat2, root->fd, rel, &how, sizeof how);
	while (fd < 0 && errno == EINTR);
	return fd < 0 ? -errno : (int)fd;
}

/* rel split at its last slash: the directory part (in dir, "." when none) and the name. */
static int split_last(const char *rel, char *dir, size_t dir_size, char *name)
{
	const char *slash = strrchr(rel, '/');
	const char *base = slash ? slash + 1 : rel;
	size_t dn = slash ? (size_t)(slash - rel) : 0;

	if (strlen(base) > FILE_MAX_NAME)
		return -ENAMETOOLONG;
	if (dn + 2 > dir_size)
		return -ENAMETOOLONG;
	if (dn == 0)
		snprintf(dir, dir_size, "%s", slash ? "/" : ".");
	else {
		memcpy(dir, rel, dn);
		dir[dn] = 0;
	}
	snprintf(name, FILE_MAX_NAME + 1, "%s", base);
	return 0;
}

int files_lookup(const struct files_root *root, const char *rel, int *ret_dirfd, char *ret_name)
{
	char name[FILE_MAX_NAME + 1];
	_cleanup_free_ char *dir = malloc(strlen(rel) + 2);
	int fd, r;

	if (!dir)
		return -ENOMEM;
	r = split_last(rel, dir, strlen(rel) + 2, name);
	if (r < 0)
		return r;
	/* the root, ".", "..": nothing to not follow; the directory itself */
	if (name[0] == 0 || strcmp(name, ".") == 0 || strcmp(name, "..") == 0) {
		fd = files_openat(root, rel[0] ? rel : ".", O_PATH | O_DIRECTORY, 0);
		if (fd < 0)
			return fd;
		*ret_dirfd = fd;
		snprintf(ret_name, FILE_MAX_NAME + 1, ".");
		return 0;
	}
	fd = files_openat(root, dir, O_PATH | O_DIRECTORY, 0);
	if (fd < 0)
		return fd;
	*ret_dirfd = fd;
	snprintf(ret_name, FILE_MAX_NAME + 1, "%s", name);
	return 0;
}

/* The symlink name in dirfd, which sits at dir (relative to the root), as the path it leads
 * to: its target when absolute (IN_ROOT resolves it from the root; BENEATH refuses it), else
 * dir/target. */
static int link_next(int dirfd, const char *dir, const char *name, char **ret)
{
	char target[PROTO_MAX_PATH + 1];
	ssize_t n = readlinkat(dirfd, name, target, sizeof target);

	if (n < 0)
		return -errno;
	if ((size_t)n >= sizeof target || n == 0)
		return -ENAMETOOLONG;
	target[n] = 0;
	if (target[0] == '/' || strcmp(dir, ".") == 0)
		*ret = strdup(target);
	else if (asprintf(ret, "%s/%s", dir, target) < 0)
		*ret = NULL;
	if (!*ret)
		return -ENOMEM;
	if (strlen(*ret) > 2 * PROTO_MAX_PATH) {
		free(*ret);
		return -ENAMETOOLONG;
	}
	return 0;
}

int files_lookup_follow(const struct files_root *root, const char *rel, int *ret_dirfd,
			char *ret_name)
{
	_cleanup_free_ char *cur = strdup(rel);
	char name[FILE_MAX_NAME + 1];
	struct stat st;

	if (!cur)
		return -ENOMEM;
	for (int i = 0; i <= FILES_MAX_SYMLINKS; i++) {
		_cleanup_close_ int dirfd = -1;
		_cleanup_free_ char *dir = NULL;
		char *next;
		int r = files_lookup(root, cur, &dirfd, name);

		if (r < 0)
			return r;
		if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISLNK(st.st_mode)) {
			*ret_dirfd = TAKE_FD(dirfd);
			snprintf(ret_name, FILE_MAX_NAME + 1, "%s", name);
			return 0;
		}
		dir = malloc(strlen(cur) + 2);
		if (!dir)
			return -ENOMEM;
		r = split_last(cur, dir, strlen(cur) + 2, name);
		if (r >= 0)
			r = link_next(dirfd, dir, name, &next);
		if (r < 0)
			return r;
		free(cur);
		cur = next;
	}
	return -ELOOP;
}

int files_mkdir_parents(const struct files_root *root, const char *rel)
{
	_cleanup_free_ char *p = strdup(rel);
	char *s;

	if (!p)
		return -ENOMEM;
	/* every prefix ending before a slash, then the whole path */
	for (s = p;; s++) {
		if (*s != '/' && *s != 0)
			continue;
		char saved = *s;
		*s = 0;
		if (s > p) {
			_cleanup_close_ int dirfd = -1;
			char name[FILE_MAX_NAME + 1];
			int r = files_lookup(root, p, &dirfd, name);

			if (r < 0)
				return r;
			if (strcmp(name, ".") != 0 && mkdirat(dirfd, name, 0755) < 0 &&
			    errno != EEXIST)
				return -errno;
		}
		*s = saved;
		if (saved == 0)
			return 0;
	}
}
