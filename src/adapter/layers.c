/* SPDX-License-Identifier: MIT */
/* Image layers as a container workspace sees them. The store keeps each layer with the image's
 * own owners (0-65535; unpack.c maps the rest to 65534); a workspace sees them through idmapped
 * mounts of its own host id range, read-only, nosuid and nodev, so that one workspace's ids own
 * nothing of another's and no layer file is ever owned by a host id outside the range. */

#include <pthread.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <glob.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "basic/cleanup.h"
#include "basic/safe-fs.h"
#include "basic/util.h"
#include "image/image.h"
#include "layers.h"

#define ID_RANGE 65536u

/* Layers are stored with the image's own owners and shown to each workspace through idmapped
 * mounts of its own range. A store from before kept one range chowned on disk, with a marker
 * "<layer>.ids-<base>" beside each layer: those are shifted back, once, the first time a
 * workspace starts on them (a container of the old kind still running on such a layer sees
 * its image files as nobody until it restarts). */
static uint32_t unshift_base;
/* nftw() takes no userdata: creates on worker threads take turns */
static pthread_mutex_t unshift_lock = PTHREAD_MUTEX_INITIALIZER;

static int unshift_one(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	uint32_t b = unshift_base;
	bool u = st->st_uid >= b && st->st_uid - b < ID_RANGE;
	bool g = st->st_gid >= b && st->st_gid - b < ID_RANGE;
	if (!u && !g)
		return 0;
	if (lchown(path, u ? st->st_uid - b : (uid_t)-1, g ? st->st_gid - b : (gid_t)-1) < 0)
		return -1;
	/* chown clears setuid and setgid: put them back */
	if (S_ISREG(st->st_mode) && (st->st_mode & (S_ISUID | S_ISGID)) &&
	    chmod(path, st->st_mode & 07777) < 0)
		return -1;
	return 0;
}

static int unshift_locked(const struct image *img, struct station_error *e)
{
	for (size_t i = 0; i < img->n_layers; i++) {
		char pattern[PATH_MAX];
		glob_t g = { 0 };
		snprintf(pattern, sizeof pattern, "%s.ids-*", img->layers[i]);
		if (glob(pattern, GLOB_NOSORT, NULL, &g) != 0)
			continue;
		int r = 0;
		for (size_t k = 0; r >= 0 && k < g.gl_pathc; k++) {
			uint64_t b;
			const char *tail = strrchr(g.gl_pathv[k], '-') + 1;
			if (parse_u64(tail, UINT32_MAX - ID_RANGE, &b) < 0 || b < ID_RANGE)
				continue;
			unshift_base = (uint32_t)b;
			if (nftw(img->layers[i], unshift_one, 64, FTW_PHYS | FTW_MOUNT) != 0)
				r = station_error_set(
					e, negative_errno(), NULL,
					"cannot restore the owners of layer \"%s\": %m",
					img->layers[i]);
			else if (unlink(g.gl_pathv[k]) < 0)
				r = station_error_set(e, negative_errno(), NULL,
						      "cannot remove \"%s\": %m", g.gl_pathv[k]);
		}
		globfree(&g);
		if (r < 0)
			return r;
	}
	return 0;
}

int layers_unshift(const struct image *img, struct station_error *e)
{
	pthread_mutex_lock(&unshift_lock);
	int r = unshift_locked(img, e);
	pthread_mutex_unlock(&unshift_lock);
	return r;
}

struct idmap_hold {
	int read_fd, write_fd;
};

/* Born in the new user namespace: lets go of the write end and waits for EOF. Only the parent
 * holds the write end then: its exit (a SIGKILLed controller) ends the read, so this child
 * never outlives it holding the controller's fds (its root lock among them). Raw system calls
 * only: it may share the controller's memory (below). */
static int idmap_child(void *arg)
{
	const struct idmap_hold *h = arg;
	char c;
	syscall(SYS_close, h->write_fd);
	syscall(SYS_read, h->read_fd, &c, 1);
	syscall(SYS_exit, 0);
	return 0;
}

#ifndef __SANITIZE_ADDRESS__
/* No copy of the controller's page tables: the child runs on a stack in this frame, which
 * stays put until it is reaped (sanitizer builds copy, as fork does). */
#define IDMAP_CLONE_FLAGS (CLONE_NEWUSER | CLONE_VM | SIGCHLD)
#else
#define IDMAP_CLONE_FLAGS (CLONE_NEWUSER | SIGCHLD)
#endif

/* A user namespace mapping ids 0..65535 to base..: what the lower layers are idmapped with. A
 * child is cloned into it and waits while we write its maps and open it. */
static int idmap_userns(uint32_t base)
{
	char stack[16 * 1024] __attribute__((aligned(16)));
	int hold[2] = { -1, -1 }, fd;
	if (pipe2(hold, O_CLOEXEC) < 0)
		return negative_errno();
	const struct idmap_hold h = { hold[0], hold[1] };
	pid_t pid = clone(idmap_child, stack + sizeof stack, IDMAP_CLONE_FLAGS, (void *)&h);
	if (pid < 0) {
		fd = negative_errno();
		close(hold[0]);
		close(hold[1]);
		return fd == -EINVAL ? -EPERM : fd;
	}
	char path[64], map[64];
	snprintf(map, sizeof map, "0 %u %u\n", base, ID_RANGE);
	static const char *const files[] = { "uid_map", "gid_map" };
	fd = 0;
	for (size_t i = 0; fd >= 0 && i < ELEMENTSOF(files); i++) {
		snprintf(path, sizeof path, "/proc/%d/%s", (int)pid, files[i]);
		_cleanup_close_ int m = open(path, O_WRONLY | O_CLOEXEC);
		if (m < 0 || write(m, map, strlen(map)) < 0)
			fd = negative_errno();
	}
	snprintf(path, sizeof path, "/proc/%d/ns/user", (int)pid);
	if (fd >= 0 && (fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		fd = negative_errno();
	close(hold[1]);
	kill(pid, SIGKILL);
	while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
	close(hold[0]);
	return fd;
}

#define LOWER_MAX 128

void layers_detach(const char *dir)
{
	for (int i = 0; i < LOWER_MAX; i++) {
		char path[PATH_MAX];
		snprintf(path, sizeof path, "%s/lower/%d", dir, i);
		if (access(path, F_OK) < 0)
			break;
		while (umount2(path, MNT_DETACH | UMOUNT_NOFOLLOW) == 0)
			;
	}
}

static int idmap_error(const struct image *img, size_t i, int r, struct station_error *e)
{
	return station_error_set(
		e, r == -EINVAL || r == -ENOSYS || r == -EPERM || r == -EOPNOTSUPP ? -EHOSTDOWN : r,
		NULL,
		"cannot make an idmapped mount of layer \"%s\": %s (needs Linux "
		">= 5.19 and a filesystem supporting idmapped mounts for the "
		"image store)",
		img->layers[i], strerror(-r));
}

int layers_mount_idmapped(int wfd, const char *dir, const struct image *img, uint32_t base,
			  char **ret_lowerdir, struct station_error *e)
{
	if (img->n_layers == 0 || img->n_layers > LOWER_MAX)
		return station_error_set(e, -E2BIG, "image", "image has %zu layers (at most %d)",
					 img->n_layers, LOWER_MAX);
	layers_detach(dir);
	_cleanup_close_ int ns = idmap_userns(base);
	if (ns == -ENOSPC || ns == -EUSERS)
		return station_error_set(
			e, -EAGAIN, NULL,
			"cannot create a user namespace: the host's limit is reached "
			"(sysctl user.max_user_namespaces; every container workspace "
			"holds one): %s",
			strerror(-ns));
	if (ns < 0)
		return idmap_error(img, 0, ns, e);
	size_t len = 1;
	for (size_t i = 0; i < img->n_layers; i++)
		len += strlen(dir) + 32;
	_cleanup_free_ char *lowerdir = calloc(1, len);
	if (!lowerdir)
		return station_error_set(e, -ENOMEM, NULL, "out of memory");
	for (size_t i = 0; i < img->n_layers; i++) {
		char sub[32], path[PATH_MAX];
		snprintf(sub, sizeof sub, "lower/%zu", i);
		int r = safe_mkdir(wfd, sub, 0700, 0, 0);
		if (r < 0)
			return station_error_set(e, r, NULL, "cannot create \"%s/%s\": %s", dir,
						 sub, strerror(-r));
		snprintf(path, sizeof path, "%s/%s", dir, sub);
		_cleanup_close_ int t =
			open_tree(AT_FDCWD, img->layers[i], OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
		struct mount_attr attr = {
			.attr_set = MOUNT_ATTR_IDMAP | MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID |
				    MOUNT_ATTR_NODEV,
			.userns_fd = (uint64_t)ns,
		};
		if (t < 0 || mount_setattr(t, "", AT_EMPTY_PATH, &attr, sizeof attr) < 0 ||
		    move_mount(t, "", AT_FDCWD, path, MOVE_MOUNT_F_EMPTY_PATH) < 0)
			return idmap_error(img, i, negative_errno(), e);
	}
	/* overlay's lowerdir lists the top layer first */
	for (size_t i = img->n_layers; i > 0; i--) {
		size_t n = strlen(lowerdir);
		snprintf(lowerdir + n, len - n, "%s%s/lower/%zu", n ? ":" : "", dir, i - 1);
	}
	*ret_lowerdir = TAKE_PTR(lowerdir);
	return 0;
}
