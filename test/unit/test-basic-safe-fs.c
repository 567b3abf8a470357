/* SPDX-License-Identifier: MIT */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <unistd.h>

#include "basic/cleanup.h"
#include "basic/safe-fs.h"
#include "basic/util.h"

/* top/ holds tree/ (what the functions are given) and outside/ (what they must not reach). */
static char top[64];
static char tree[128], outside[128];
static int dfd = -1;

static void setup(void)
{
	snprintf(top, sizeof top, "/tmp/safe-fs-XXXXXX");
	cr_assert_not_null(mkdtemp(top));
	snprintf(tree, sizeof tree, "%s/tree", top);
	snprintf(outside, sizeof outside, "%s/outside", top);
	cr_assert_eq(mkdir(tree, 0755), 0);
	cr_assert_eq(mkdir(outside, 0700), 0);
	dfd = open(tree, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	cr_assert_geq(dfd, 0);
	cr_assert_eq(mkdirat(dfd, "a", 0755), 0);
	cr_assert_eq(mkdirat(dfd, "a/b", 0755), 0);
	cr_assert_eq(symlinkat("a", dfd, "link"), 0);
	cr_assert_eq(symlinkat(outside, dfd, "out"), 0);
	cr_assert_eq(mkfifoat(dfd, "fifo", 0644), 0);
	cr_assert_eq(mknodat(dfd, "null", S_IFCHR | 0644, makedev(1, 3)), 0);
	int fd = openat(dfd, "file", O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, "0123456789", 10), 10);
	close(fd);
}

static void teardown(void)
{
	close(dfd);
	rm_rf(top);
}

static void assert_outside_untouched(void)
{
	struct stat st;
	cr_assert_eq(stat(outside, &st), 0);
	cr_assert_eq(st.st_uid, 0);
	cr_assert_eq(st.st_mode & 07777, 0700);
	cr_assert_eq(faccessat(AT_FDCWD, outside, F_OK, 0), 0);
	char p[256];
	snprintf(p, sizeof p, "%s/x", outside);
	cr_assert_eq(access(p, F_OK), -1, "nothing was made outside");
}

TestSuite(safe_fs, .init = setup, .fini = teardown);

Test(safe_fs, open_dir_positive_control)
{
	int fd = safe_open_dir(dfd, "a/b", SAFE_BENEATH);
	cr_assert_geq(fd, 0);
	close(fd);
	fd = safe_open_dir(dfd, "a/../a/b", SAFE_BENEATH);
	cr_assert_geq(fd, 0, "'..' that stays beneath is fine");
	close(fd);
	/* the same symlinks, followed by a plain open: what the refusals below prevent */
	fd = openat(dfd, "link/b", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	cr_assert_geq(fd, 0);
	close(fd);
}

Test(safe_fs, open_dir_refuses_symlink_in_the_middle)
{
	cr_assert_eq(safe_open_dir(dfd, "link/b", SAFE_BENEATH), -ELOOP);
	cr_assert_eq(safe_open_dir(dfd, "out/.", SAFE_BENEATH), -ELOOP);
}

Test(safe_fs, open_dir_refuses_symlink_at_the_end)
{
	cr_assert_eq(safe_open_dir(dfd, "link", SAFE_BENEATH), -ELOOP);
	cr_assert_eq(safe_open_dir(dfd, "out", SAFE_BENEATH), -ELOOP);
}

Test(safe_fs, open_dir_refuses_dotdot_and_absolute)
{
	cr_assert_eq(safe_open_dir(dfd, "../outside", SAFE_BENEATH), -EXDEV);
	cr_assert_eq(safe_open_dir(dfd, "a/../../outside", SAFE_BENEATH), -EXDEV);
	cr_assert_eq(safe_open_dir(dfd, outside, SAFE_BENEATH), -EXDEV);
	cr_assert_eq(safe_open_dir(dfd, "file", SAFE_BENEATH), -ENOTDIR);
}

Test(safe_fs, in_root_keeps_symlinks_inside)
{
	struct stat want, got;
	cr_assert_eq(symlinkat("/a", dfd, "abs"), 0);
	cr_assert_eq(symlinkat("../../../..", dfd, "up"), 0);
	int fd = safe_open_dir(dfd, "abs/b", SAFE_IN_ROOT);
	cr_assert_geq(fd, 0, "an absolute symlink resolves against the root");
	cr_assert_eq(fstatat(dfd, "a/b", &want, 0), 0);
	cr_assert_eq(fstat(fd, &got), 0);
	cr_assert_eq(got.st_ino, want.st_ino);
	close(fd);
	fd = safe_open_dir(dfd, "up", SAFE_IN_ROOT);
	cr_assert_geq(fd, 0);
	cr_assert_eq(fstat(dfd, &want), 0);
	cr_assert_eq(fstat(fd, &got), 0);
	cr_assert_eq(got.st_ino, want.st_ino, "'..' stops at the root");
	close(fd);
	cr_assert_eq(safe_open_dir(dfd, "out", SAFE_IN_ROOT), -ENOENT,
		     "an absolute host path is looked up inside the root");
	cr_assert_eq(safe_open_dir(dfd, "/proc/self/root", SAFE_IN_ROOT), -ENOENT);
}

Test(safe_fs, mkdir_positive_control)
{
	int fd = safe_mkdir_open(dfd, "a/new/deeper", 0710, 1234, 5678);
	cr_assert_geq(fd, 0);
	struct stat st;
	cr_assert_eq(fstat(fd, &st), 0);
	cr_assert_eq(st.st_uid, 1234);
	cr_assert_eq(st.st_gid, 5678);
	cr_assert_eq(st.st_mode & 07777, 0710);
	close(fd);
	cr_assert_eq(safe_mkdir(dfd, "a/new/deeper", 0700, (uid_t)-1, (gid_t)-1), 0,
		     "an existing directory is opened");
	cr_assert_eq(fstatat(dfd, "a/new/deeper", &st, 0), 0);
	cr_assert_eq(st.st_uid, 1234, "uid -1 keeps the owner");
	cr_assert_eq(st.st_mode & 07777, 0700);
	/* the detector: a chown through the symlink by name does change outside */
	char p[256];
	snprintf(p, sizeof p, "%s/out", tree);
	cr_assert_eq(chown(p, 1234, 1234), 0);
	cr_assert_eq(stat(outside, &st), 0);
	cr_assert_eq(st.st_uid, 1234);
	cr_assert_eq(chown(outside, 0, 0), 0);
}

Test(safe_fs, mkdir_refuses_symlinks_and_files)
{
	cr_assert_eq(safe_mkdir(dfd, "out", 0755, 1234, 1234), -ELOOP, "symlink at the end");
	cr_assert_eq(safe_mkdir(dfd, "out/x", 0755, 1234, 1234), -ELOOP, "in the middle");
	cr_assert_eq(safe_mkdir(dfd, "../outside/x", 0755, 1234, 1234), -EXDEV);
	cr_assert_eq(safe_mkdir(dfd, "file", 0755, 1234, 1234), -ENOTDIR);
	cr_assert_eq(safe_mkdir(dfd, "fifo", 0755, 1234, 1234), -ENOTDIR);
	assert_outside_untouched();
	struct stat st;
	cr_assert_eq(fstatat(dfd, "out", &st, AT_SYMLINK_NOFOLLOW), 0);
	cr_assert(S_ISLNK(st.st_mode), "the planted symlink is left alone");
}

Test(safe_fs, swapped_entry_changes_only_what_was_checked)
{
	int fd = safe_mkdir_open(dfd, "w", 0755, (uid_t)-1, (gid_t)-1);
	cr_assert_geq(fd, 0);
	/* between check and use: w becomes a symlink to outside */
	cr_assert_eq(renameat(dfd, "w", dfd, "w2"), 0);
	cr_assert_eq(symlinkat(outside, dfd, "w"), 0);
	cr_assert_eq(fchown(fd, 1234, 1234), 0);
	cr_assert_eq(fchmod(fd, 0711), 0);
	close(fd);
	assert_outside_untouched();
	struct stat st;
	cr_assert_eq(fstatat(dfd, "w2", &st, 0), 0);
	cr_assert_eq(st.st_uid, 1234, "the directory checked got the owner");
	cr_assert_eq(safe_mkdir(dfd, "w", 0755, 1234, 1234), -ELOOP);
	cr_assert_eq(safe_chown_at(dfd, "w", S_IFDIR, 1234, 1234, 0755), -ELOOP);
	assert_outside_untouched();
}

Test(safe_fs, open_file_positive_control)
{
	int fd = safe_open_file(dfd, "file", O_RDONLY, 0, SAFE_BENEATH);
	cr_assert_geq(fd, 0);
	close(fd);
	fd = safe_open_file(dfd, "a/made", O_WRONLY | O_CREAT, 0640, SAFE_BENEATH);
	cr_assert_geq(fd, 0);
	close(fd);
	/* what a plain open does with the FIFO: it opens (O_NONBLOCK here, else it blocks) */
	fd = openat(dfd, "fifo", O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	cr_assert_geq(fd, 0);
	close(fd);
}

Test(safe_fs, open_file_refuses_fifo_device_dir_symlink)
{
	cr_assert_eq(safe_open_file(dfd, "fifo", O_RDONLY, 0, SAFE_BENEATH), -EINVAL);
	cr_assert_eq(safe_open_file(dfd, "null", O_RDONLY, 0, SAFE_BENEATH), -EINVAL);
	cr_assert_eq(safe_open_file(dfd, "a", O_RDONLY, 0, SAFE_BENEATH), -EISDIR);
	cr_assert_eq(symlinkat("file", dfd, "flink"), 0);
	cr_assert_eq(safe_open_file(dfd, "flink", O_RDONLY, 0, SAFE_BENEATH), -ELOOP);
	cr_assert_eq(safe_open_file(dfd, "flink", O_RDONLY, 0, SAFE_IN_ROOT), -ELOOP,
		     "O_NOFOLLOW holds in a root too");
	cr_assert_eq(safe_open_file(dfd, "out/x", O_WRONLY | O_CREAT, 0644, SAFE_BENEATH), -ELOOP);
	cr_assert_eq(safe_open_file(dfd, "fifo", O_WRONLY | O_CREAT, 0644, SAFE_BENEATH), -ENXIO,
		     "no reader: refused without blocking");
	assert_outside_untouched();
}

Test(safe_fs, read_file_caps_size)
{
	_cleanup_free_ char *s = NULL;
	size_t n = 0;
	cr_assert_eq(safe_read_file(dfd, "a/../file", SAFE_IN_ROOT, 10, &s, &n), 0);
	cr_assert_eq(n, 10);
	cr_assert_str_eq(s, "0123456789");
	char *t = NULL;
	cr_assert_eq(safe_read_file(dfd, "file", SAFE_BENEATH, 9, &t, &n), -EFBIG);
	cr_assert_eq(safe_read_file(dfd, "fifo", SAFE_IN_ROOT, 9, &t, &n), -EINVAL);
	cr_assert_null(t);
}

Test(safe_fs, chown_at_socket)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	snprintf(sa.sun_path, sizeof sa.sun_path, "%.90s/sock", tree);
	int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	cr_assert_geq(s, 0);
	cr_assert_eq(bind(s, (struct sockaddr *)&sa, sizeof sa), 0);
	cr_assert_eq(safe_chown_at(dfd, "sock", S_IFSOCK, 1234, 4321, 0600), 0);
	struct stat st;
	cr_assert_eq(fstatat(dfd, "sock", &st, AT_SYMLINK_NOFOLLOW), 0);
	cr_assert_eq(st.st_uid, 1234);
	cr_assert_eq(st.st_gid, 4321);
	cr_assert_eq(st.st_mode & 07777, 0600);
	close(s);
	cr_assert_eq(safe_chown_at(dfd, "file", S_IFSOCK, 1234, 1234, 0600), -EINVAL);
	cr_assert_eq(safe_chown_at(dfd, "out", S_IFSOCK, 1234, 1234, 0600), -ELOOP);
	cr_assert_eq(safe_chown_at(dfd, "a/b", S_IFDIR, 1234, 1234, 0600), -EINVAL);
	assert_outside_untouched();
}
