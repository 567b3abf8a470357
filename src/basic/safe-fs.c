/* SPDX-License-Identifier: MIT */
#include "safe-fs.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include "cleanup.h"
#include "util.h"

int safe_openat(int dfd, const char *path, int flags, mode_t mode, enum safe_resolve how)
{
	struct open_how oh = {
		.flags = (uint64_t)(flags | O_CLOEXEC),
		.mode = (flags & (O_CREAT | O_TMPFILE)) ? mode : 0,
		.resolve = how == SAFE_IN_ROOT ?
				   RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS :
				   RESOLVE_NO_SYMLINKS | RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS,
	};
	if (!path || !*path)
		path = ".";
	int fd;
	do
		fd = (int)syscall(SYS_openat2, dfd, path, &oh, sizeof oh);
	while (fd < 0 && (errno == EINTR || errno == EAGAIN));
	return fd < 0 ? negative_errno() : fd;
}

/* 0 when fd's type is `type`, else the errno the contract names. */
static int check_type(int fd, mode_t type)
{
	struct stat st;
	if (fstat(fd, &st) < 0)
		return negative_errno();
	mode_t t = st.st_mode & S_IFMT;
	if (t == type)
		return 0;
	if (t == S_IFLNK)
		return -ELOOP;
	if (type == S_IFDIR)
		return -ENOTDIR;
	return t == S_IFDIR ? -EISDIR : -EINVAL;
}

int safe_open_dir(int dfd, const char *path, enum safe_resolve how)
{
	/* O_PATH first: the type is known before anything is opened for real, and a trailing
	 * symlink reads as -ELOOP (O_DIRECTORY would say -ENOTDIR) */
	_cleanup_close_ int p =
		safe_openat(dfd, path, O_PATH | (how == SAFE_IN_ROOT ? 0 : O_NOFOLLOW), 0, how);
	if (p < 0)
		return p;
	int r = check_type(p, S_IFDIR);
	if (r < 0)
		return r;
	int fd = openat(p, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	return fd < 0 ? negative_errno() : fd;
}

int safe_mkdir_open(int dfd, const char *path, mode_t mode, uid_t uid, gid_t gid)
{
	_cleanup_free_ char *copy = strdup(path ? path : "");
	if (!copy)
		return -ENOMEM;
	_cleanup_close_ int cur = safe_open_dir(dfd, ".", SAFE_BENEATH);
	char *save = NULL;
	for (char *c = strtok_r(copy, "/", &save); cur >= 0 && c; c = strtok_r(NULL, "/", &save)) {
		if (strcmp(c, ".") == 0)
			continue;
		if (mkdirat(cur, c, mode) < 0 && errno != EEXIST)
			return negative_errno();
		int next = safe_open_dir(cur, c, SAFE_BENEATH);
		close(cur);
		cur = next;
	}
	if (cur < 0)
		return cur;
	if (uid != (uid_t)-1 && fchown(cur, uid, gid) < 0)
		return negative_errno();
	if (fchmod(cur, mode) < 0)
		return negative_errno();
	return TAKE_FD(cur);
}

int safe_mkdir(int dfd, const char *path, mode_t mode, uid_t uid, gid_t gid)
{
	int fd = safe_mkdir_open(dfd, path, mode, uid, gid);
	if (fd < 0)
		return fd;
	close(fd);
	return 0;
}

int safe_open_file(int dfd, const char *path, int flags, mode_t mode, enum safe_resolve how)
{
	_cleanup_close_ int fd =
		safe_openat(dfd, path, flags | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY, mode, how);
	if (fd < 0)
		return fd;
	int r = check_type(fd, S_IFREG);
	return r < 0 ? r : TAKE_FD(fd);
}

int safe_read_file(int dfd, const char *path, enum safe_resolve how, size_t max, char **ret,
		   size_t *ret_len)
{
	_cleanup_close_ int fd = safe_open_file(dfd, path, O_RDONLY, 0, how);
	if (fd < 0)
		return fd;
	_cleanup_free_ char *buf = malloc(max + 1);
	if (!buf)
		return -ENOMEM;
	size_t len = 0;
	for (;;) {
		/* one byte more than max tells a file of exactly max from a larger one */
		ssize_t n = read(fd, buf + len, max + 1 - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return negative_errno();
		if (n == 0)
			break;
		len += (size_t)n;
		if (len > max)
			return -EFBIG;
	}
	buf[len] = 0;
	*ret = TAKE_PTR(buf);
	if (ret_len)
		*ret_len = len;
	return 0;
}

int safe_chown_at(int dfd, const char *name, mode_t type, uid_t uid, gid_t gid, mode_t mode)
{
	if (!name || !*name || strchr(name, '/'))
		return -EINVAL;
	_cleanup_close_ int fd = safe_openat(dfd, name, O_PATH | O_NOFOLLOW, 0, SAFE_BENEATH);
	if (fd < 0)
		return fd;
	int r = check_type(fd, type);
	if (r < 0)
		return r;
	if (fchownat(fd, "", uid, gid, AT_EMPTY_PATH) < 0)
		return negative_errno();
	if (mode != (mode_t)-1) {
		/* an O_PATH fd has no fchmod; its /proc link names this very inode */
		char proc[64];
		snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
		if (chmod(proc, mode) < 0)
			return negative_errno();
	}
	return 0;
}

int safe_connect_unix(int fd, const char *path)
{
	_cleanup_close_ int p = open(path, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (p < 0)
		return negative_errno();
	int r = check_type(p, S_IFSOCK);
	if (r < 0)
		return r == -EINVAL ? -ENOTSOCK : r;
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	snprintf(sa.sun_path, sizeof sa.sun_path, "/proc/self/fd/%d", p);
	return connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0 ? negative_errno() : 0;
}

int safe_bind_unix(int fd, int dfd, const char *name)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	if (!name || !*name || strchr(name, '/') || strcmp(name, "..") == 0)
		return -EINVAL;
	if ((size_t)snprintf(sa.sun_path, sizeof sa.sun_path, "/proc/self/fd/%d/%s", dfd, name) >=
	    sizeof sa.sun_path)
		return -ENAMETOOLONG;
	return bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 ? negative_errno() : 0;
}
