/* SPDX-License-Identifier: MIT */
#pragma once

/* Reaching into trees that someone hostile writes: a workspace's directories (HOME, run/, the
 * overlay upper), an image's rootfs. The controller runs as root; a path walked by name there
 * follows whatever the sandbox or the image planted (a symlink to a host directory, a FIFO
 * where a file should be, a directory swapped for a symlink between a check and its use).
 *
 * Contract, for every function here:
 *  - dfd is a directory fd the caller trusts (opened by a path only root can change, or by
 *    another function here). path is relative to it, one or more components.
 *  - SAFE_BENEATH: no symlink anywhere in path (the last component included) and no escape
 *    from dfd (`..` above it, an absolute path): -ELOOP for a symlink, -EXDEV for an escape.
 *    SAFE_IN_ROOT: for paths an image names; symlinks and `..` resolve as if dfd were "/"
 *    (they cannot leave it), magic links (/proc/self/...) refused. A trailing symlink is
 *    followed (inside the root) for a directory, never for a file (O_NOFOLLOW: -ELOOP).
 *  - Everything opened is checked with fstat() after the open: a directory where one is
 *    wanted (-ENOTDIR otherwise), a regular file where a file is wanted (-EISDIR for a
 *    directory, -EINVAL for a FIFO, a device or a socket). Files are opened O_NONBLOCK, so a
 *    FIFO never blocks the caller.
 *  - Owners and modes are changed through the fd that was checked, never by name.
 *  - fds are O_CLOEXEC. Functions return an fd or 0 on success, -errno on failure; nothing
 *    is logged.
 * libc only (openat2 through syscall(2)); needs Linux >= 5.6. */

#include <stddef.h>
#include <sys/types.h>

enum safe_resolve {
	SAFE_BENEATH, /* RESOLVE_NO_SYMLINKS | RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS */
	SAFE_IN_ROOT, /* RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS */
};

/* Opens path beneath dfd with openat2(): flags as for open(2) plus O_CLOEXEC, no type check.
 * The building block of the rest; prefer those. */
int safe_openat(int dfd, const char *path, int flags, mode_t mode, enum safe_resolve how);

/* The directory at path beneath dfd, O_RDONLY | O_DIRECTORY, checked through an O_PATH fd
 * before it is opened. path "." or "" gives a new fd for dfd itself. */
int safe_open_dir(int dfd, const char *path, enum safe_resolve how);

/* mkdir path beneath dfd (every missing component, each with mode), or open it when it is a
 * directory already, then fchmod(mode) and, when uid != (uid_t)-1, fchown(uid, gid) through
 * the fd. Something other than a directory there (a symlink, a file) is refused and left
 * alone. Returns the fd of the directory. */
int safe_mkdir_open(int dfd, const char *path, mode_t mode, uid_t uid, gid_t gid);
/* The same, closing the fd. */
int safe_mkdir(int dfd, const char *path, mode_t mode, uid_t uid, gid_t gid);

/* A regular file beneath dfd: O_NOFOLLOW | O_NONBLOCK | flags (O_RDONLY, O_WRONLY | O_CREAT,
 * O_APPEND, ...), then the S_ISREG check. A FIFO, device, socket or directory is refused. */
int safe_open_file(int dfd, const char *path, int flags, mode_t mode, enum safe_resolve how);

/* Reads the regular file at path beneath dfd, at most max bytes (-EFBIG when larger), into a
 * NUL-terminated malloc'd buffer. */
int safe_read_file(int dfd, const char *path, enum safe_resolve how, size_t max, char **ret,
		   size_t *ret_len);

/* fchown + fchmod of the entry name in dfd (one component, no symlink) after checking its
 * type is `type` (S_IFSOCK, S_IFREG, S_IFDIR). mode (mode_t)-1 leaves the mode. */
int safe_chown_at(int dfd, const char *name, mode_t type, uid_t uid, gid_t gid, mode_t mode);

/* connect(2) the unix stream socket fd to the socket at path, whose directories the caller
 * trusts (its last component may be planted): that component must be a socket, not a symlink
 * to one elsewhere. Connects through /proc/self/fd of an O_PATH fd to the checked inode. */
int safe_connect_unix(int fd, const char *path);

/* bind(2) fd to name in the directory dfd (through /proc/self/fd/<dfd>/name); name is one
 * component. An entry there already (a planted symlink included) fails with -EADDRINUSE. */
int safe_bind_unix(int fd, int dfd, const char *name);
