/* SPDX-License-Identifier: MIT */
/* HOME as a size-limited filesystem of its own (home-limit.h). What the controller touches:
 * <dir> (its own), <dir>/home.img (its own, never bound into the sandbox) and the directory
 * <dir>/home itself, opened beneath <dir> without following symlinks; HOME's contents are
 * read only by mke2fs, once, right after the controller seeded them and before any sandbox
 * process exists. */

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/loop.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "basic/cleanup.h"
#include "basic/safe-fs.h"
#include "basic/util.h"
#include "home-limit.h"

#define HOME_IMAGE "home.img"
#define LOOP_ATTEMPTS 8

static const char *const mke2fs_paths[] = { "/usr/sbin/mke2fs", "/sbin/mke2fs" };

bool adapter_home_limit_probe(char *msg, size_t n)
{
	const char *mkfs = NULL;
	for (size_t i = 0; i < ELEMENTSOF(mke2fs_paths) && !mkfs; i++)
		if (access(mke2fs_paths[i], X_OK) == 0)
			mkfs = mke2fs_paths[i];
	if (!mkfs) {
		snprintf(msg, n, "mke2fs not found in /usr/sbin or /sbin (install e2fsprogs)");
		return false;
	}
	if (access("/dev/loop-control", R_OK | W_OK) < 0) {
		snprintf(msg, n, "no loop devices: /dev/loop-control: %s", strerror(errno));
		return false;
	}
	snprintf(msg, n, "HOME images by %s on loop devices", mkfs);
	return true;
}

static uint64_t home_size_mb(const struct adapter_workspace *ws)
{
	json_t *v = json_object_get(ws->spec, "homeSizeMb");
	return json_is_integer(v) && json_integer_value(v) > 0 ? (uint64_t)json_integer_value(v) :
								 0;
}

/* HOME is a mount point already (a start after a start without a stop in between). */
static bool home_mounted(int dfd, int hfd)
{
	struct stat d, h;
	return fstat(dfd, &d) == 0 && fstat(hfd, &h) == 0 && d.st_dev != h.st_dev;
}

/* mke2fs on the image, filled from src (HOME as seeded), its root owned like src. */
static int run_mkfs(const char *image, const char *src, const struct stat *st,
		    struct station_error *e)
{
	char owner[64], errbuf[256] = "";
	snprintf(owner, sizeof owner, "root_owner=%u:%u,lazy_itable_init=1,nodiscard",
		 (unsigned)st->st_uid, (unsigned)st->st_gid);
	const char *argv[] = { "mke2fs", "-q",	"-F", "-t", "ext4", "-m", "0",
			       "-E",	 owner, "-d", src,  image,  NULL };
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		return station_error_set(e, negative_errno(), NULL, "pipe: %m");
	pid_t pid = fork();
	if (pid == 0) {
		int devnull = open("/dev/null", O_RDWR);
		if (devnull < 0 || dup2(devnull, 0) < 0 || dup2(devnull, 1) < 0 ||
		    dup2(p[1], 2) < 0)
			_exit(127);
		close_all_fds_except(NULL, 0);
		for (size_t i = 0; i < ELEMENTSOF(mke2fs_paths); i++)
			execv(mke2fs_paths[i], (char **)argv);
		dprintf(2, "mke2fs not found in /usr/sbin or /sbin (install e2fsprogs)");
		_exit(127);
	}
	int err = pid < 0 ? negative_errno() : 0;
	close(p[1]);
	ssize_t n = 0, k;
	while (err == 0 && (size_t)n < sizeof errbuf - 1 &&
	       (k = read(p[0], errbuf + n, sizeof errbuf - 1 - (size_t)n)) > 0)
		n += k;
	close(p[0]);
	errbuf[n] = 0;
	errbuf[strcspn(errbuf, "\n")] = 0;
	int status = 0;
	if (err == 0 && waitpid(pid, &status, 0) < 0)
		err = negative_errno();
	if (err == 0 && !(WIFEXITED(status) && WEXITSTATUS(status) == 0))
		err = -EIO;
	if (err < 0)
		return station_error_set(e, err, NULL, "cannot make the HOME filesystem \"%s\": %s",
					 image, errbuf[0] ? errbuf : strerror(-err));
	return 0;
}

/* The sparse image, formatted with HOME's seeded contents; HOME itself is emptied (the
 * contents live in the image from now on) and keeps its owner and mode. */
static int image_create(const struct adapter_workspace *ws, int dfd, uint64_t size_mb,
			struct station_error *e)
{
	char image[PATH_MAX], home[PATH_MAX];
	struct stat st;
	snprintf(image, sizeof image, "%s/" HOME_IMAGE, ws->dir);
	snprintf(home, sizeof home, "%s/home", ws->dir);
	_cleanup_close_ int hfd = safe_open_dir(dfd, "home", SAFE_BENEATH);
	if (hfd < 0 || fstat(hfd, &st) < 0)
		return station_error_set(e, hfd < 0 ? hfd : negative_errno(), NULL,
					 "cannot open \"%s\": %s", home,
					 strerror(hfd < 0 ? -hfd : errno));
	_cleanup_close_ int fd = openat(dfd, HOME_IMAGE ".new",
					O_RDWR | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0 || ftruncate(fd, (off_t)(size_mb << 20)) < 0)
		return station_error_set(e, negative_errno(), NULL, "cannot create \"%s.new\": %m",
					 image);
	snprintf(image, sizeof image, "%s/" HOME_IMAGE ".new", ws->dir);
	int r = run_mkfs(image, home, &st, e);
	if (r >= 0 && (fsync(fd) < 0 || renameat(dfd, HOME_IMAGE ".new", dfd, HOME_IMAGE) < 0))
		r = station_error_set(e, negative_errno(), NULL, "cannot install \"%s\": %m",
				      image);
	if (r < 0) {
		unlinkat(dfd, HOME_IMAGE ".new", 0);
		return r;
	}
	r = rm_rf(home);
	if (r >= 0 && mkdirat(dfd, "home", 0700) < 0)
		r = negative_errno();
	if (r < 0)
		return station_error_set(e, r, NULL, "cannot empty \"%s\": %s", home, strerror(-r));
	return 0;
}

/* A free loop device backed by the image, detaching itself when its last user goes. */
static int loop_attach(int image_fd, char ret_dev[static 32])
{
	_cleanup_close_ int ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
	if (ctl < 0)
		return negative_errno();
	struct loop_config cfg = { .fd = (uint32_t)image_fd,
				   .info = { .lo_flags = LO_FLAGS_AUTOCLEAR } };
	for (int i = 0; i < LOOP_ATTEMPTS; i++) {
		int n = ioctl(ctl, LOOP_CTL_GET_FREE);
		if (n < 0)
			return negative_errno();
		snprintf(ret_dev, 32, "/dev/loop%d", n);
		int fd = open(ret_dev, O_RDWR | O_CLOEXEC);
		if (fd < 0)
			return negative_errno();
		if (ioctl(fd, LOOP_CONFIGURE, &cfg) == 0)
			return fd;
		int err = errno;
		close(fd);
		if (err != EBUSY) /* another user took it meanwhile: ask again */
			return -err;
	}
	return -EBUSY;
}

static int image_mount(const struct adapter_workspace *ws, int dfd, struct station_error *e)
{
	char dev[32], target[64];
	_cleanup_close_ int img = openat(dfd, HOME_IMAGE, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
	if (img < 0)
		return station_error_set(e, negative_errno(), NULL,
					 "cannot open \"%s/" HOME_IMAGE "\": %m", ws->dir);
	_cleanup_close_ int loop = loop_attach(img, dev);
	if (loop < 0)
		return station_error_set(e, loop, NULL,
					 "no loop device for \"%s/" HOME_IMAGE "\": %s", ws->dir,
					 strerror(-loop));
	_cleanup_close_ int hfd = safe_open_dir(dfd, "home", SAFE_BENEATH);
	if (hfd < 0)
		return station_error_set(e, hfd, NULL, "cannot open \"%s/home\": %s", ws->dir,
					 strerror(-hfd));
	snprintf(target, sizeof target, "/proc/self/fd/%d", hfd);
	if (mount(dev, target, "ext4", MS_NOSUID | MS_NODEV, NULL) < 0)
		return station_error_set(e, negative_errno(), NULL,
					 "cannot mount \"%s/" HOME_IMAGE "\" on \"%s/home\": %m",
					 ws->dir, ws->dir);
	return 0;
}

int home_limit_mount(const struct adapter_workspace *ws, struct station_error *e)
{
	uint64_t size_mb = home_size_mb(ws);
	if (size_mb == 0)
		return 0;
	_cleanup_close_ int dfd = open(ws->dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0)
		return station_error_set(e, negative_errno(), NULL, "cannot open \"%s\": %m",
					 ws->dir);
	_cleanup_close_ int hfd = safe_open_dir(dfd, "home", SAFE_BENEATH);
	if (hfd >= 0 && home_mounted(dfd, hfd))
		return 0;
	int r = 0;
	if (faccessat(dfd, HOME_IMAGE, F_OK, AT_SYMLINK_NOFOLLOW) < 0)
		r = image_create(ws, dfd, size_mb, e);
	if (r >= 0)
		r = image_mount(ws, dfd, e);
	return r;
}

void home_limit_unmount(const struct adapter_workspace *ws)
{
	char home[PATH_MAX];
	if (home_size_mb(ws) == 0)
		return;
	snprintf(home, sizeof home, "%s/home", ws->dir);
	(void)umount2(home, MNT_DETACH | UMOUNT_NOFOLLOW);
}
