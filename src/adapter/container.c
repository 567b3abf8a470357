/* SPDX-License-Identifier: MIT */
/* The container adapter: the agent is PID 1 of an OCI container started through the runtime
 * CLI, so every command it forks inherits the container's isolation by construction.
 *
 * Layout under <root>/workspaces/<id>/: home/ (persistent HOME, bound at /home/node), upper/
 * (overlay upper and work dirs, made fresh on every start), rootfs/ (the overlay: image layers
 * below, upper above), run/ (agent socket, the agent binary's mount point, the delegated
 * cgroup mount points; bound at /run/station), bundle/config.json, agent.log.
 *
 * Cgroups: the workspace group W carries the limits and stays root-owned; its child W/c is the
 * container's group, delegated to container root (chowned), bound into the container, where
 * the agent makes one group per run. Nothing inside can change W's limits.
 *
 * runsc (gVisor) differs (docs/operations.md, "runsc (gVisor)"): it passes no fds beyond stdio,
 * so the secret comes on the agent's stdin and the agent binds its own socket (runsc's
 * --host-uds=create makes it a host socket); host cgroupfs dirs bound into the sandbox would
 * not be cgroupfs there, so W/c is not delegated: runsc puts the whole sandbox (sentry, gofer)
 * in W/c, W's limits hold it, and the agent makes its run groups in the sandbox's own emulated
 * cgroupfs (memory hierarchy; no freezer: a kill is a kill-every-member loop). */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "adapter.h"
#include "ca-bundle.h"
#include "home-limit.h"
#include "layers.h"
#include "basic/cleanup.h"
#include "basic/safe-fs.h"
#include "basic/util.h"
#include "cgroup/cgroup.h"
#include "image/image.h"
#include "oci-config.h"
#include "proto/agent-start.h"
#include "runtime.h"
#include "seccomp.h"

#define ID_RANGE 65536u
#define DEFAULT_WORKDIR OCI_HOME_DIR "/workspace"
#define MAX_AGENT_ARGS 16
/* runsc: the sandbox's own cgroupfs (--cgroupfs mounts cpu and memory; only memory is a
 * per-run hierarchy), and how long the agent may take to bind its socket after `run`. */
#define RUNSC_AGENT_CGROUP "v1:/sys/fs/cgroup/memory"
#define RUNSC_SOCKET_WAIT_MS 10000
/* runsc: pidsLimit counts the sandbox's own processes (RLIMIT_NPROC, which the sentry enforces
 * per sandbox: every process there is one uid). The host pids.max of W then bounds the
 * sandbox's host tasks: the sentry's and gofer's threads (about 40 to 100 idle) and, on the
 * ptrace platform, about 10 per sandbox process (measured: 20 sleepers took 209 more). A host
 * limit at pidsLimit itself would kill the sentry (Go: "failed to create new OS thread"), and
 * the whole workspace with it, long before pidsLimit processes ran. */
#define RUNSC_HOST_TASKS_BASE 256
#define RUNSC_HOST_TASKS_PER_PROC 12

static bool is_runsc(const struct adapter_context *ctx)
{
	return ctx->runtime && ctx->runtime->kind == RUNTIME_RUNSC;
}

bool adapter_agent_binds_socket(const struct adapter_context *ctx, const struct adapter_ops *ops)
{
	return ops == &adapter_container && is_runsc(ctx);
}

/* --- check: fail closed, naming the missing piece --- */

/* Cheap, for every create: the binary is there and executable. Whether it works is what
 * ready() probes (`--version`), and a runtime that fails to start the container says why. */
static int check_runtime(const struct adapter_context *ctx, struct station_error *e)
{
	if (!ctx->runtime)
		return station_error_set(e, -EHOSTDOWN, NULL, "container runtime unavailable: %s",
					 ctx->runtime_error);
	if (access(ctx->runtime->path, X_OK) < 0)
		return station_error_set(e, -EHOSTDOWN, NULL,
					 "container runtime \"%s\" unusable: %m",
					 ctx->runtime->path);
	return 0;
}

static int check_image(const struct adapter_context *ctx, json_t *spec, struct station_error *e)
{
	const char *ref = json_string_value(json_object_get(spec, "image"));
	if (!ref)
		ref = ctx->default_image;
	if (!ref)
		return station_error_set(
			e, -EINVAL, "image",
			"no image: name one with \"image\" "
			"(name@sha256:…) or start the worker with --default-image");
	if (!ctx->images)
		return station_error_set(e, -EHOSTDOWN, "image", "the image store is unavailable");
	struct image *img = NULL;
	int r = image_lookup(ctx->images, ref, &img, e);
	if (r < 0) {
		if (e && e->err != -EINVAL)
			snprintf(e->field, sizeof e->field, "image");
		return e ? (e->err = -EINVAL) : -EINVAL;
	}
	char full[IMAGE_NAME_MAX + IMAGE_DIGEST_MAX + 2];
	snprintf(full, sizeof full, "%s%s%s", img->name ? img->name : "", img->name ? "@" : "",
		 img->digest);
	json_object_set_new(spec, "image", json_string(full));
	/* "/" is what an image without a WorkingDir gets: the workspace directory is better */
	const char *wd = img->config.workdir;
	bool own = wd && wd[0] == '/' && wd[1];
	json_object_set_new(spec, "workdir", json_string(own ? wd : DEFAULT_WORKDIR));
	image_free(img);
	return 0;
}

/* The workspace's profile, from the worker's profile directories only (seccomp.h). At create
 * (want_digest NULL) the request's name or path, else the worker's default; at every start the
 * path recorded at create, whose digest must still be the one recorded (want_digest): a profile
 * edited since fails the start, and nothing runs. */
static int load_profile(const struct adapter_context *ctx, const json_t *spec,
			const char *want_digest, json_t **ret, char **ret_path,
			char digest[SECCOMP_DIGEST_SIZE], struct station_error *e)
{
	const char *name = json_string_value(json_object_get(spec, "seccompProfile"));
	struct seccomp_target target = { .caps = oci_default_caps };
	_cleanup_free_ char *path = NULL;
	if (!name)
		name = ctx->default_seccomp;
	if (!name)
		return station_error_set(e, -EINVAL, "seccompProfile",
					 "no seccomp profile: name one "
					 "with \"seccompProfile\" or start the worker with "
					 "--seccomp-profile");
	int r = seccomp_profile_load_from(ctx->seccomp_dirs, name, &target, ret, &path, digest, e);
	if (r >= 0 && want_digest && strcmp(want_digest, digest) != 0) {
		json_decref(*ret);
		*ret = NULL;
		r = station_error_set(
			e, -EINVAL, "seccompProfile",
			"seccomp profile \"%s\" changed since the workspace was created "
			"(%s then, %s now); nothing was started",
			path, want_digest, digest);
	}
	if (r < 0) {
		if (e)
			snprintf(e->field, sizeof e->field, "seccompProfile");
		return e ? (e->err = -EINVAL) : -EINVAL;
	}
	if (ret_path)
		*ret_path = TAKE_PTR(path);
	return 0;
}

/* Container root is an unprivileged host uid: it must be able to search every directory
 * above the workspace, or the runtime cannot mount its rootfs. */
static int check_traversable(const char *root, struct station_error *e)
{
	char path[PATH_MAX];
	snprintf(path, sizeof path, "%s", root);
	for (;;) {
		struct stat st;
		if (stat(path, &st) == 0 && !(st.st_mode & S_IXOTH))
			return station_error_set(e, -EACCES, NULL,
						 "directory \"%s\" is not "
						 "searchable by others (mode %o): container "
						 "workspaces under it cannot start; chmod o+x it",
						 path, st.st_mode & 07777);
		char *slash = strrchr(path, '/');
		if (!slash || slash == path)
			return 0;
		*slash = 0;
	}
}

static int container_check(const struct adapter_context *ctx, json_t *spec, struct station_error *e)
{
	/* what the request names first (400), then what the worker must provide (503) */
	const char *network = json_string_value(json_object_get(spec, "network"));
	if (!network)
		network = "none";
	if (strcmp(network, "none") != 0 && ctx->runtime && is_runsc(ctx))
		return station_error_set(e, -ENOTSUP, "network",
					 "network \"%s\" is not available with runsc on this "
					 "worker (runsc runs with --network=none); use \"none\"",
					 network);
	int r = check_image(ctx, spec, e);
	if (r < 0)
		return r;
	json_t *profile = NULL;
	_cleanup_free_ char *profile_path = NULL;
	char digest[SECCOMP_DIGEST_SIZE];
	r = load_profile(ctx, spec, NULL, &profile, &profile_path, digest, e);
	if (r < 0)
		return r;
	json_decref(profile);
	r = check_runtime(ctx, e);
	if (r < 0)
		return r;
	if (check_traversable(ctx->root, e) < 0)
		return e ? (e->err = -EHOSTDOWN) : -EHOSTDOWN;
	json_object_set_new(spec, "seccompProfile", json_string(profile_path));
	json_object_set_new(spec, "seccompDigest", json_string(digest));
	json_object_set_new(spec, "network", json_string(network));
	json_object_set_new(spec, "runtime", json_string(ctx->runtime->name));
	return 0;
}

/* --- ready: the worker-wide pieces, each named --- */

static json_t *check_json(const char *name, bool ok, const char *message)
{
	return json_pack("{s:s,s:b,s:s}", "name", name, "ok", ok, "message", message);
}

/* Runtime, image store, default image, default profile. */
static bool container_ready(const struct adapter_context *ctx, json_t *checks)
{
	struct station_error e = { 0 };
	_cleanup_free_ char *version = NULL;
	bool ok = ctx->runtime && runtime_probe(ctx->runtime, &version, &e) >= 0;
	json_array_append_new(checks, check_json("runtime", ok,
						 ok	      ? version :
						 ctx->runtime ? e.message :
								ctx->runtime_error));
	bool all = ok;
	json_array_append_new(checks, check_json("images", ctx->images != NULL,
						 ctx->images ? "image store open" :
							       "image store unavailable"));
	all &= ctx->images != NULL;
	if (ctx->default_image) {
		struct image *img = NULL;
		e = (struct station_error){ 0 };
		ok = ctx->images && image_lookup(ctx->images, ctx->default_image, &img, &e) >= 0;
		image_free(img);
		json_array_append_new(checks,
				      check_json("image", ok, ok ? ctx->default_image : e.message));
		all &= ok;
	}
	json_t *profile = NULL;
	struct seccomp_target target = { .caps = oci_default_caps };
	e = (struct station_error){ 0 };
	ok = ctx->default_seccomp &&
	     seccomp_profile_load(ctx->default_seccomp, &target, &profile, NULL, &e) >= 0;
	json_decref(profile);
	json_array_append_new(checks, check_json("seccompProfile", ok,
						 ok		      ? ctx->default_seccomp :
						 ctx->default_seccomp ? e.message :
									"no default profile"));
	return all && ok;
}

/* --- prepare --- */

/* The workspace's host uid/gid base: its own range ("idBase" in the spec, given at create),
 * or the worker's single base for a workspace created before ranges were per workspace. */
static uint32_t ws_base(const struct adapter_workspace *ws)
{
	json_int_t v = json_integer_value(json_object_get(ws->spec, "idBase"));
	return v > 0 ? (uint32_t)v : ws->ctx->id_base;
}

/* <root>/workspaces/<id>, made and opened by the controller: root:<container root's gid>
 * 0710, so only this workspace's container root (for the runtime, which mounts its rootfs as
 * that uid) passes through it, and no one lists it. Everything below is reached through the
 * returned fd (safe-fs.h). */
static int open_ws_dir(const struct adapter_workspace *ws, struct station_error *e)
{
	char parent[PATH_MAX];
	snprintf(parent, sizeof parent, "%s/workspaces", ws->ctx->root);
	int r = mkdir_p(parent, 0711);
	if (r >= 0 && chmod(parent, 0711) < 0) /* searchable, not listable, by others */
		r = negative_errno();
	if (r >= 0 && mkdir(ws->dir, 0710) < 0 && errno != EEXIST)
		r = negative_errno();
	_cleanup_close_ int fd =
		r < 0 ? r : open(ws->dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 && r >= 0)
		r = negative_errno();
	if (r >= 0 && (fchown(fd, 0, ws_base(ws)) < 0 || fchmod(fd, 0710) < 0))
		r = negative_errno();
	if (r < 0)
		return station_error_set(e, r, NULL, "cannot create \"%s\": %s", ws->dir,
					 strerror(-r));
	return TAKE_FD(fd);
}

/* mkdir or open sub beneath dfd (the directory dir names), mode and owner set through its fd;
 * a symlink or file planted there is refused (safe_mkdir_open). Returns the fd. */
static int make_dir_fd(int dfd, const char *dir, const char *sub, mode_t mode, int owner,
		       struct station_error *e)
{
	int fd = safe_mkdir_open(dfd, sub, mode, owner >= 0 ? (uid_t)owner : (uid_t)-1,
				 owner >= 0 ? (gid_t)owner : (gid_t)-1);
	if (fd < 0)
		return station_error_set(e, fd, NULL, "cannot create \"%s/%s\": %s%s", dir, sub,
					 strerror(-fd),
					 fd == -ELOOP || fd == -ENOTDIR ?
						 " (something other than a directory is there)" :
						 "");
	return fd;
}

static int make_dir(int dfd, const char *dir, const char *sub, mode_t mode, int owner,
		    struct station_error *e)
{
	int fd = make_dir_fd(dfd, dir, sub, mode, owner, e);
	if (fd < 0)
		return fd;
	close(fd);
	return 0;
}

#define PASSWD_MAX (4u << 20)

/* "name", "uid", "uid:gid" or "name:group" against the image's /etc/passwd, read beneath the
 * rootfs fd (safe-fs.h: in the image's root, a regular file, O_NONBLOCK, at most 4 MiB). An
 * image without one resolves numeric users only. */
static int resolve_user(int rootfd, const char *user, uid_t *ret_uid, gid_t *ret_gid,
			struct station_error *e)
{
	char name[256] = "";
	uint64_t uid = 0, gid = 0;
	bool have_gid = false;
	if (!user || !user[0]) {
		*ret_uid = 0;
		*ret_gid = 0;
		return 0;
	}
	snprintf(name, sizeof name, "%s", user);
	char *colon = strchr(name, ':');
	if (colon) {
		*colon = 0;
		if (parse_u64(colon + 1, ID_RANGE - 1, &gid) < 0)
			return station_error_set(e, -EINVAL, "image",
						 "image user \"%s\": bad group", user);
		have_gid = true;
	}
	bool numeric = parse_u64(name, ID_RANGE - 1, &uid) >= 0;
	_cleanup_free_ char *text = NULL;
	size_t len = 0;
	int r = safe_read_file(rootfd, "etc/passwd", SAFE_IN_ROOT, PASSWD_MAX, &text, &len);
	if (r < 0 && r != -ENOENT)
		return station_error_set(e, -EINVAL, "image",
					 "image user \"%s\": cannot read the image's /etc/passwd: "
					 "%s",
					 user,
					 r == -EINVAL ? "not a regular file" :
					 r == -ELOOP  ? "a symlink" :
							strerror(-r));
	_cleanup_fclose_ FILE *f = text ? fmemopen(text, len ? len : 1, "r") : NULL;
	struct passwd *pw;
	while (f && len && (pw = fgetpwent(f))) {
		if (numeric ? pw->pw_uid == uid : strcmp(pw->pw_name, name) == 0) {
			uid = pw->pw_uid;
			if (!have_gid)
				gid = pw->pw_gid;
			numeric = true;
			have_gid = true;
			break;
		}
	}
	if (!numeric || uid >= ID_RANGE || gid >= ID_RANGE)
		return station_error_set(e, -EINVAL, "image",
					 "image user \"%s\" is not in the image's /etc/passwd",
					 user);
	*ret_uid = (uid_t)uid;
	*ret_gid = (gid_t)(have_gid ? gid : uid);
	return 0;
}

static int open_rootfs(const struct adapter_workspace *ws, struct station_error *e)
{
	char rootfs[PATH_MAX];
	snprintf(rootfs, sizeof rootfs, "%s/rootfs", ws->dir);
	int fd = open(rootfs, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return station_error_set(e, negative_errno(), NULL, "cannot open \"%s\": %m",
					 rootfs);
	return fd;
}

static int mount_rootfs(const struct adapter_workspace *ws, int wfd, const struct image *img,
			struct station_error *e)
{
	char rootfs[PATH_MAX], upper[PATH_MAX];
	_cleanup_free_ char *lower = NULL, *opts = NULL;
	snprintf(rootfs, sizeof rootfs, "%s/rootfs", ws->dir);
	snprintf(upper, sizeof upper, "%s/upper", ws->dir);
	umount2(rootfs, MNT_DETACH);
	int r = rm_rf(upper);
	if (r < 0 && r != -ENOENT)
		return station_error_set(e, r, NULL, "cannot reset \"%s\": %s", upper,
					 strerror(-r));
	uint32_t root = ws_base(ws);
	if ((r = make_dir(wfd, ws->dir, "upper", 0700, -1, e)) < 0 ||
	    (r = make_dir(wfd, ws->dir, "upper/upper", 0755, (int)root, e)) < 0 ||
	    (r = make_dir(wfd, ws->dir, "upper/work", 0700, -1, e)) < 0 ||
	    (r = make_dir(wfd, ws->dir, "rootfs", 0755, -1, e)) < 0 ||
	    (r = make_dir(wfd, ws->dir, "lower", 0700, 0, e)) < 0)
		return r;
	r = layers_mount_idmapped(wfd, ws->dir, img, root, &lower, e);
	if (r >= 0 && asprintf(&opts, "lowerdir=%s,upperdir=%s/upper,workdir=%s/work", lower, upper,
			       upper) < 0)
		r = station_error_set(e, -ENOMEM, NULL, "out of memory");
	/* nosuid: a setuid file of the image never raises privileges, inside or on the host */
	if (r >= 0 && mount("overlay", rootfs, "overlay", MS_NODEV | MS_NOSUID, opts) < 0)
		r = station_error_set(e, negative_errno(), NULL,
				      "cannot mount the root filesystem at \"%s\": %m", rootfs);
	layers_detach(ws->dir);
	return r;
}

#define HOME_SEED_MAX_ENTRIES 10000
#define HOME_SEED_MAX_BYTES (256ull << 20)

struct seed_budget {
	size_t entries;
	uint64_t bytes;
};

static int copy_file_at(int sfd, int dfd, const char *name, const struct stat *st,
			struct seed_budget *b)
{
	/* a regular file both sides, whatever was swapped in since the fstatat */
	_cleanup_close_ int in = safe_open_file(sfd, name, O_RDONLY, 0, SAFE_BENEATH);
	_cleanup_close_ int out =
		in < 0 ? in :
			 safe_open_file(dfd, name, O_WRONLY | O_CREAT | O_EXCL, 0600, SAFE_BENEATH);
	if (in < 0 || out < 0)
		return in < 0 ? in : out;
	char buf[64 * 1024];
	ssize_t n;
	while ((n = read(in, buf, sizeof buf)) > 0) {
		if ((b->bytes += (uint64_t)n) > HOME_SEED_MAX_BYTES)
			return -EFBIG;
		int r = write_all(out, buf, (size_t)n);
		if (r < 0)
			return r;
	}
	if (n < 0 || fchown(out, st->st_uid, st->st_gid) < 0 ||
	    fchmod(out, st->st_mode & 07777) < 0)
		return negative_errno();
	return 0;
}

/* Copies the image's /home/node into a new HOME, owners kept (they are mapped already), like
 * a volume's first mount: dot files and tool settings the image put there stay visible. */
static int seed_tree(int sfd, int dfd, struct seed_budget *b)
{
	_cleanup_close_ int dup_fd = dup(sfd);
	DIR *d = dup_fd < 0 ? NULL : fdopendir(dup_fd);
	if (!d)
		return negative_errno();
	dup_fd = -1;
	int r = 0;
	struct dirent *de;
	while (r >= 0 && (de = readdir(d))) {
		struct stat st;
		const char *n = de->d_name;
		if (!strcmp(n, ".") || !strcmp(n, "..") ||
		    fstatat(sfd, n, &st, AT_SYMLINK_NOFOLLOW))
			continue;
		if (++b->entries > HOME_SEED_MAX_ENTRIES) {
			r = -E2BIG;
		} else if (S_ISDIR(st.st_mode)) {
			_cleanup_close_ int s2 = -1, d2 = -1;
			if (mkdirat(dfd, n, 0700) < 0 && errno != EEXIST)
				r = negative_errno();
			else if ((s2 = safe_open_dir(sfd, n, SAFE_BENEATH)) < 0 ||
				 (d2 = safe_open_dir(dfd, n, SAFE_BENEATH)) < 0)
				r = s2 < 0 ? s2 : d2;
			else if ((r = seed_tree(s2, d2, b)) >= 0 &&
				 (fchown(d2, st.st_uid, st.st_gid) < 0 ||
				  fchmod(d2, st.st_mode & 07777) < 0))
				r = negative_errno();
		} else if (S_ISREG(st.st_mode)) {
			r = copy_file_at(sfd, dfd, n, &st, b);
		} else if (S_ISLNK(st.st_mode)) {
			char target[PATH_MAX];
			ssize_t k = readlinkat(sfd, n, target, sizeof target - 1);
			if (k < 0)
				continue;
			target[k] = 0;
			if (symlinkat(target, dfd, n) < 0 ||
			    fchownat(dfd, n, st.st_uid, st.st_gid, AT_SYMLINK_NOFOLLOW) < 0)
				r = negative_errno();
		}
	}
	closedir(d);
	return r;
}

/* The image's /home/node is looked up inside the image's root (RESOLVE_IN_ROOT): a symlink
 * there, or at /home, leads to the image's own directories, never to the host's. */
static int seed_home(int rootfd, int hfd, struct station_error *e)
{
	_cleanup_close_ int sfd = safe_open_dir(rootfd, OCI_HOME_DIR, SAFE_IN_ROOT);
	if (sfd == -ENOENT || sfd == -ENOTDIR)
		return 0; /* the image has no /home/node */
	struct seed_budget b = { 0 };
	int r = sfd < 0 ? sfd : seed_tree(sfd, hfd, &b);
	if (r < 0)
		return station_error_set(e, r, NULL,
					 "cannot copy the image's " OCI_HOME_DIR
					 " into the new HOME: %s",
					 strerror(-r));
	return 0;
}

/* A workspace created from a snapshot (spec "snapshot"): its fresh HOME is the snapshot's, the
 * "home/node" subtree of its image's top layer (the snapshot's own layer), owners moved into
 * this workspace's range. */
static int seed_home_from_snapshot(const struct adapter_workspace *ws, const struct image *img,
				   int hfd, struct station_error *e)
{
	int r = image_layer_copy_subtree(img, OCI_HOME_DIR + 1, hfd, ws_base(ws), e);
	return r == -ENOENT ? 0 : r; /* a snapshot of no HOME: an empty one */
}

/* home/ (bound at /home/node) and home/workspace. A fresh HOME is seeded from the image (or
 * the snapshot) and goes to the image user; an existing one keeps its owners. Below home/ the
 * sandbox writes: a symlink or file it put at workspace is its own business, left as it is. */
static int prepare_home(const struct adapter_workspace *ws, int wfd, int rootfd,
			const struct image *img, uid_t uid, gid_t gid, struct station_error *e)
{
	uid_t huid = ws_base(ws) + uid;
	gid_t hgid = ws_base(ws) + gid;
	struct stat st;
	bool fresh = fstatat(wfd, "home", &st, AT_SYMLINK_NOFOLLOW) < 0;
	_cleanup_close_ int hfd = make_dir_fd(wfd, ws->dir, "home", 0755, -1, e);
	if (hfd < 0)
		return hfd;
	bool from_snapshot = json_object_get(ws->spec, "snapshot") != NULL;
	int r = !fresh	      ? 0 :
		from_snapshot ? seed_home_from_snapshot(ws, img, hfd, e) :
				seed_home(rootfd, hfd, e);
	if (r < 0)
		return r;
	_cleanup_close_ int wsfd = safe_mkdir_open(hfd, "workspace", 0755, (uid_t)-1, (gid_t)-1);
	if (wsfd < 0 && wsfd != -ELOOP && wsfd != -ENOTDIR)
		return station_error_set(e, wsfd, NULL, "cannot create \"%s/home/workspace\": %s",
					 ws->dir, strerror(-wsfd));
	int fds[] = { hfd, wsfd };
	for (size_t i = 0; i < ELEMENTSOF(fds); i++) {
		if (fds[i] < 0)
			continue;
		if (fstat(fds[i], &st) == 0 && st.st_uid == 0 && fchown(fds[i], huid, hgid) < 0)
			return station_error_set(e, negative_errno(), NULL, "chown \"%s/%s\": %m",
						 ws->dir, i ? "home/workspace" : "home");
	}
	return 0;
}

/* A directory of run/ (container root's): whatever else container root left at that name (a
 * symlink, a file, a FIFO) is removed, not followed, and the directory made. */
static int run_dir(int rfd, const char *dir, const char *sub, int root, struct station_error *e)
{
	int fd = safe_mkdir_open(rfd, sub, 0755, (uid_t)root, (gid_t)root);
	if (fd == -ELOOP || fd == -ENOTDIR) {
		if (unlinkat(rfd, sub, 0) < 0 && errno != ENOENT)
			return station_error_set(e, negative_errno(), NULL,
						 "cannot remove \"%s/%s\": %m", dir, sub);
		fd = safe_mkdir_open(rfd, sub, 0755, (uid_t)root, (gid_t)root);
	}
	if (fd < 0)
		return station_error_set(e, fd, NULL, "cannot create \"%s/%s\": %s", dir, sub,
					 strerror(-fd));
	return fd;
}

/* run/agent/station-agent, the agent binary's mount point: a regular file, or made one. */
static int agent_mount_point(int afd, const char *dir, struct station_error *e)
{
	static const char name[] = "station-agent";
	int fd = safe_open_file(afd, name, O_WRONLY | O_CREAT, 0755, SAFE_BENEATH);
	if (fd == -ELOOP || fd == -EINVAL || fd == -ENXIO) { /* a symlink, FIFO, socket */
		if (unlinkat(afd, name, 0) < 0 && errno != ENOENT && errno != EISDIR)
			return station_error_set(e, negative_errno(), NULL,
						 "cannot remove \"%s/%s\": %m", dir, name);
		fd = safe_open_file(afd, name, O_WRONLY | O_CREAT, 0755, SAFE_BENEATH);
	}
	if (fd < 0)
		return station_error_set(e, fd, NULL, "cannot create \"%s/%s\": %s", dir, name,
					 strerror(-fd));
	close(fd);
	return 0;
}

static int prepare_run_dir(const struct adapter_workspace *ws, int wfd, size_t n_cgroups,
			   struct station_error *e)
{
	int root = (int)ws_base(ws);
	char path[PATH_MAX + 16], dir[PATH_MAX];
	snprintf(dir, sizeof dir, "%s/run", ws->dir);
	_cleanup_close_ int rfd = make_dir_fd(wfd, ws->dir, "run", 0700, root, e);
	if (rfd < 0)
		return rfd;
	_cleanup_close_ int afd = run_dir(rfd, dir, "agent", root, e);
	if (afd < 0)
		return afd;
	_cleanup_close_ int cfd = n_cgroups > 0 ? run_dir(rfd, dir, "cgroup", root, e) : -1;
	if (n_cgroups > 0 && cfd < 0)
		return cfd;
	snprintf(path, sizeof path, "%s/cgroup", dir);
	for (size_t i = 0; i < n_cgroups; i++) {
		char sub[32];
		snprintf(sub, sizeof sub, "%zu", i);
		int fd = run_dir(cfd, path, sub, root, e);
		if (fd < 0)
			return fd;
		close(fd);
	}
	int r = make_dir(wfd, ws->dir, "bundle", 0700, -1, e);
	if (r < 0)
		return r;
	/* where the agent makes the credential socket: container root's, passable by all */
	_cleanup_close_ int kfd = run_dir(wfd, ws->dir, "cred", root, e);
	if (kfd < 0)
		return kfd;
	snprintf(path, sizeof path, "%s/agent", dir);
	return agent_mount_point(afd, path, e);
}

/* The workspace's image, its layers unpacked (a snapshot's are on its first use). */
static int lookup_image(const struct adapter_workspace *ws, struct image **ret,
			struct station_error *e)
{
	const char *ref = json_string_value(json_object_get(ws->spec, "image"));
	struct image *img = NULL;
	if (!ref || !ws->ctx->images)
		return station_error_set(e, -EINVAL, "image", "workspace \"%s\" has no image",
					 ws->id);
	int r = image_lookup(ws->ctx->images, ref, &img, e);
	if (r >= 0)
		r = image_layers_unpack(ws->ctx->images, img, e);
	if (r < 0) {
		image_free(img);
		return r;
	}
	*ret = img;
	return 0;
}

static int container_prepare(const struct adapter_workspace *ws, struct station_error *e)
{
	struct image *img = NULL;
	uid_t uid;
	gid_t gid;
	_cleanup_close_ int wfd = -1, rootfd = -1;
	int r = lookup_image(ws, &img, e);
	if (r >= 0)
		r = wfd = open_ws_dir(ws, e);
	if (r >= 0)
		r = layers_unshift(img, e);
	if (r >= 0)
		r = mount_rootfs(ws, wfd, img, e);
	if (r >= 0)
		r = rootfd = open_rootfs(ws, e);
	if (r >= 0)
		r = resolve_user(rootfd, img->config.user, &uid, &gid, e);
	if (r >= 0)
		r = prepare_home(ws, wfd, rootfd, img, uid, gid, e);
	if (r >= 0)
		r = home_limit_mount(ws, e);
	if (r >= 0)
		r = prepare_run_dir(ws, wfd,
				    ws->cgroup && !is_runsc(ws->ctx) ? ws->cgroup->n_dirs : 0, e);
	image_free(img);
	return r < 0 ? r : 0;
}

/* --- start --- */

/* W/c, made and handed to container root: the group runc puts the agent in, where the agent
 * makes its run groups. */
static int delegate_cgroup(const struct adapter_workspace *ws, struct cgroup **ret,
			   struct station_error *e)
{
	static const char *const files[] = { "cgroup.procs", "cgroup.subtree_control",
					     "cgroup.threads", "tasks" };
	struct cgroup *c = NULL;
	uid_t root = ws_base(ws);
	int r = cgroup_child(ws->cgroup, "c", &c);
	if (r >= 0)
		r = cgroup_create(c);
	/* runsc: W/c holds the sandbox's host processes; nothing inside reaches it */
	for (size_t i = 0; r >= 0 && !is_runsc(ws->ctx) && i < c->n_dirs; i++) {
		if (chown(c->dirs[i], root, root) < 0) {
			r = negative_errno();
			break;
		}
		for (size_t j = 0; j < ELEMENTSOF(files); j++) {
			char path[PATH_MAX];
			snprintf(path, sizeof path, "%s/%s", c->dirs[i], files[j]);
			if (chown(path, root, root) < 0 && errno != ENOENT) {
				r = negative_errno();
				break;
			}
		}
	}
	if (r < 0) {
		cgroup_free(c);
		return station_error_set(e, r, NULL, "cannot delegate the container cgroup: %s",
					 strerror(-r));
	}
	*ret = c;
	return 0;
}

/* What the agent starts with. Its command line is readable by every host user (the container's
 * PID 1 is a host process too) and lands in config.json: only our own settings go there. The
 * environment (the image's, then the workspace's) and the workdir (the spec's or the image's)
 * go in the start block, through the secret fd. */
struct agent_args {
	char *argv[MAX_AGENT_ARGS];
	char cgroup[256];
	char user[32];
	char workdir[PATH_MAX];
	char **env;	  /* borrowed from the image, ca, the worker and the workspace */
	struct ca_env ca; /* the CA variables, when the worker has --workspace-ca */
	bool have_ca;
};

/* The image's env without HOME (the persistent one we mount wins), the CA variables, the
 * worker's (proxy), then the workspace's: a later entry wins (the agent keeps the last). */
static int build_agent_env(const struct adapter_workspace *ws, const struct image *img,
			   struct agent_args *a)
{
	char *const *lists[] = { img->config.env, a->have_ca ? a->ca.list : NULL, ws->worker_env,
				 ws->env };
	size_t n = 0, total = 0;
	for (size_t l = 0; l < ELEMENTSOF(lists); l++)
		for (size_t i = 0; lists[l] && lists[l][i]; i++)
			total++;
	a->env = calloc(total + 1, sizeof *a->env);
	if (!a->env)
		return -ENOMEM;
	for (size_t l = 0; l < ELEMENTSOF(lists); l++)
		for (size_t i = 0; lists[l] && lists[l][i]; i++)
			if (l != 0 || strncmp(lists[l][i], "HOME=", 5) != 0)
				a->env[n++] = lists[l][i];
	return 0;
}

static int build_agent_args(const struct adapter_workspace *ws, const struct image *img,
			    const struct cgroup *c, uid_t uid, gid_t gid, struct agent_args *a)
{
	size_t n = 0, len;
	const char *wd = json_string_value(json_object_get(ws->spec, "workdir"));
	snprintf(a->workdir, sizeof a->workdir, "%s", wd ? wd : DEFAULT_WORKDIR);
	len = (size_t)snprintf(a->cgroup, sizeof a->cgroup, "v%d", c->version);
	for (size_t i = 0; i < c->n_dirs && len < sizeof a->cgroup; i++)
		len += (size_t)snprintf(a->cgroup + len, sizeof a->cgroup - len,
					":" OCI_CGROUP_DIR "/%zu", i);
	snprintf(a->user, sizeof a->user, "%u:%u", (unsigned)uid, (unsigned)gid);
	a->argv[n++] = (char *)OCI_AGENT_PATH;
	if (is_runsc(ws->ctx)) {
		snprintf(a->cgroup, sizeof a->cgroup, "%s", RUNSC_AGENT_CGROUP);
		a->argv[n++] = (char *)"--listen=" OCI_RUN_DIR "/agent.sock";
		a->argv[n++] = (char *)"--secret-fd=0";
	} else {
		a->argv[n++] = (char *)"--listen-fd=4";
		a->argv[n++] = (char *)"--secret-fd=3";
	}
	a->argv[n++] = (char *)"--home";
	a->argv[n++] = (char *)OCI_HOME_DIR;
	a->argv[n++] = (char *)"--cgroup";
	a->argv[n++] = a->cgroup;
	a->argv[n++] = (char *)"--user";
	a->argv[n++] = a->user;
	a->argv[n++] = (char *)"--credential-socket=" OCI_CRED_SOCKET;
	a->argv[n] = NULL;
	return build_agent_env(ws, img, a);
}

static uint64_t spec_pids_limit(const struct adapter_workspace *ws)
{
	json_int_t v = json_integer_value(json_object_get(ws->spec, "pidsLimit"));
	return v > 0 ? (uint64_t)v : 0;
}

/* runsc: W's host pids.max becomes the sandbox's host task budget (see above); the manager set
 * it to pidsLimit, which the sentry's own threads would exhaust. cpus and memory stay. */
static int runsc_host_limits(const struct adapter_workspace *ws, struct station_error *e)
{
	uint64_t pids = spec_pids_limit(ws);
	if (!pids || !ws->cgroup)
		return 0;
	struct cgroup_limits limits = {
		.cpus = json_number_value(json_object_get(ws->spec, "cpus")),
		.memory_bytes = (uint64_t)json_integer_value(json_object_get(ws->spec, "memoryMb"))
				<< 20,
		.pids = RUNSC_HOST_TASKS_BASE + RUNSC_HOST_TASKS_PER_PROC * pids,
	};
	int r = cgroup_set_limits(ws->cgroup, &limits);
	if (r < 0)
		return station_error_set(e, r, NULL, "cannot set the sandbox's host limits: %s",
					 strerror(-r));
	return 0;
}

/* <dir>/resolv.conf and <dir>/hosts, bound read-only into a networked container: the worker's
 * resolver is its only one. The workspace directory is root's (0710): nothing inside reaches
 * these files but through the read-only binds. */
static int write_net_files(const struct adapter_workspace *ws, char *resolv, char *hosts,
			   size_t size, struct station_error *e)
{
	char text[256];
	int r, n;

	snprintf(resolv, size, "%s/resolv.conf", ws->dir);
	snprintf(hosts, size, "%s/hosts", ws->dir);
	n = snprintf(text, sizeof text, "nameserver %s\noptions edns0\n", ws->nameserver);
	r = write_file_atomic(resolv, text, (size_t)n, 0644);
	if (r >= 0) {
		n = snprintf(text, sizeof text,
			     "127.0.0.1\tlocalhost\n127.0.1.1\tworkspace\n::1\tlocalhost "
			     "ip6-localhost ip6-loopback\n");
		r = write_file_atomic(hosts, text, (size_t)n, 0644);
	}
	if (r < 0)
		return station_error_set(e, r, NULL, "cannot write \"%s\": %s", resolv,
					 strerror(-r));
	return 0;
}

/* The workspace's CA bundle, bound read-only at OCI_CA_BUNDLE and over the image's own
 * trust-store files (ca-bundle.h). */
struct ca_binds {
	char path[PATH_MAX]; /* "": the worker has no --workspace-ca */
	char *targets[CA_STORE_MAX_TARGETS];
	size_t n_targets;
};

static void ca_binds_done(struct ca_binds *b)
{
	for (size_t i = 0; i < b->n_targets; i++)
		free(b->targets[i]);
	*b = (struct ca_binds){ 0 };
}

/* <dir>/ca-certificates.crt: the image's trust store, read from the rootfs just mounted, then
 * the operator's CAs. Made per workspace at every start, not cached per image: it costs one
 * read of the image's store (about 220 KB for Debian) and one write, it goes with the
 * workspace's directory (nothing to collect), a changed --workspace-ca reaches every workspace
 * at its next start, and no file is shared between workspaces (or tenants) that one bad write
 * could spoil for all. */
static int write_ca_bundle(const struct adapter_workspace *ws, int rootfd, struct ca_binds *ret,
			   struct station_error *e)
{
	char rootfs[PATH_MAX];
	_cleanup_free_ char *store = NULL, *bundle = NULL;
	size_t store_len = 0, len = 0;
	*ret = (struct ca_binds){ 0 };
	if (!ws->ctx->ca_pem)
		return 0;
	snprintf(rootfs, sizeof rootfs, "%s/rootfs", ws->dir);
	snprintf(ret->path, sizeof ret->path, "%s/ca-certificates.crt", ws->dir);
	int r = ca_image_store(rootfd, rootfs, &store, &store_len, ret->targets, &ret->n_targets);
	if (r >= 0)
		r = ca_bundle_join(store, store_len, ws->ctx->ca_pem, ws->ctx->ca_pem_len, &bundle,
				   &len);
	if (r >= 0)
		r = write_file_atomic(ret->path, bundle, len, 0644);
	if (r < 0) {
		ca_binds_done(ret);
		return station_error_set(e, r, NULL, "cannot write the workspace's CA bundle: %s",
					 strerror(-r));
	}
	return 0;
}

/* The code contexts' kernel programs the container gets, read-only at OCI_KERNEL_DIR. The
 * runtime resolves a mount's destination inside the rootfs, following the image's symlinks
 * there, so an image with /usr/local/bin (or the program's own name) a symlink would have the
 * bind land elsewhere (over /etc/resolv.conf, over the agent): a target reached through a
 * symlink, or that is not a regular file, gets no bind (the context then finds no kernel). A
 * target missing is made by the runtime, beneath no symlink. Nothing of the sandbox runs
 * between this check and the runtime's mount. */
struct kernel_binds {
	char *paths[2];
	size_t n;
};

static void kernel_binds_done(struct kernel_binds *b)
{
	for (size_t i = 0; i < b->n; i++)
		free(b->paths[i]);
	*b = (struct kernel_binds){ 0 };
}

static bool bind_target_plain(int rootfd, const char *target)
{
	struct stat st;
	_cleanup_close_ int fd =
		safe_openat(rootfd, target + 1, O_PATH | O_NOFOLLOW, 0, SAFE_BENEATH);
	if (fd == -ENOENT)
		return true;
	return fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
}

static void kernel_binds_find(const struct adapter_workspace *ws, int rootfd,
			      struct kernel_binds *ret)
{
	static const char *const names[] = { OCI_KERNEL_PROGRAMS };
	char host[PATH_MAX], target[128];
	*ret = (struct kernel_binds){ 0 };
	for (size_t i = 0; ws->ctx->kernel_dir && i < ELEMENTSOF(names); i++) {
		snprintf(host, sizeof host, "%s/%s", ws->ctx->kernel_dir, names[i]);
		snprintf(target, sizeof target, OCI_KERNEL_DIR "/%s", names[i]);
		if (access(host, R_OK) < 0 || !bind_target_plain(rootfd, target))
			continue;
		ret->paths[ret->n] = strdup(host);
		if (ret->paths[ret->n])
			ret->n++;
	}
}

/* The /proc view the container gets, recorded in the spec ("procView", docs/api.md): lxcfs's
 * when one serves (never under runsc, whose sentry makes its own /proc), else the host's. The
 * spec's "cpuset" (the manager's placement for "cpus") pins it to that many CPUs, which is what
 * nproc (sched_getaffinity) and lxcfs's cpuinfo, stat and cpu/online count. */
static const char *proc_view(const struct adapter_workspace *ws)
{
	const char *lx = is_runsc(ws->ctx) ? NULL : ws->ctx->lxcfs_dir;
	json_object_set_new(ws->spec, "procView",
			    json_string(lx		  ? "lxcfs" :
					is_runsc(ws->ctx) ? "runsc" :
							    "host"));
	if (lx)
		json_object_set_new(ws->spec, "lxcfsSerial",
				    json_integer((json_int_t)ws->ctx->lxcfs_serial));
	else
		json_object_del(ws->spec, "lxcfsSerial");
	/* runsc writes a cpuset only where the parent group has one (it does not fill W's in, as
	 * runc does); its sentry makes its own view anyway */
	if (is_runsc(ws->ctx))
		json_object_del(ws->spec, "cpuset");
	return lx;
}

static int write_bundle(const struct adapter_workspace *ws, const struct cgroup *c, char **argv,
			json_t *seccomp, const struct ca_binds *ca,
			const struct kernel_binds *kernels, struct station_error *e)
{
	char rootfs[PATH_MAX], home[PATH_MAX], run[PATH_MAX], bundle[PATH_MAX], cred[PATH_MAX];
	char resolv[PATH_MAX], hosts[PATH_MAX];
	_cleanup_free_ char *cg_path = NULL;
	uint32_t base = ws_base(ws);
	snprintf(rootfs, sizeof rootfs, "%s/rootfs", ws->dir);
	snprintf(home, sizeof home, "%s/home", ws->dir);
	snprintf(run, sizeof run, "%s/run", ws->dir);
	snprintf(cred, sizeof cred, "%s/cred", ws->dir);
	snprintf(bundle, sizeof bundle, "%s/bundle", ws->dir);
	int r = cgroup_relative_path(c, &cg_path);
	if (r < 0)
		return station_error_set(e, r, NULL, "the workspace cgroup has no single path: %s",
					 strerror(-r));
	if (ws->net_attach && (r = write_net_files(ws, resolv, hosts, PATH_MAX, e)) < 0)
		return r;
	const char *lxcfs_dir = proc_view(ws);
	struct oci_config cfg = {
		.rootfs = rootfs,
		.args = argv,
		.cwd = "/",
		.hostname = "workspace",
		.uid_map = { 0, base, ID_RANGE },
		.gid_map = { 0, base, ID_RANGE },
		.home_dir = home,
		.agent_path = ws->ctx->agent_path,
		.run_dir = run,
		.credential_dir = is_runsc(ws->ctx) ? NULL : cred,
		.credential_tmpfs = is_runsc(ws->ctx),
		.cgroup_binds = c->dirs,
		.n_cgroup_binds = is_runsc(ws->ctx) ? 0 : c->n_dirs,
		.cgroups_path = cg_path,
		.seccomp = seccomp,
		.nproc = is_runsc(ws->ctx) ? spec_pids_limit(ws) : 0,
		.resolv_conf = ws->net_attach ? resolv : NULL,
		.hosts = ws->net_attach ? hosts : NULL,
		.ca_bundle = ca->path[0] ? ca->path : NULL,
		.ca_targets = ca->targets,
		.n_ca_targets = ca->n_targets,
		.kernel_programs = kernels->paths,
		.n_kernel_programs = kernels->n,
		.lxcfs_dir = lxcfs_dir,
		.cpuset = json_string_value(json_object_get(ws->spec, "cpuset")),
	};
	return oci_config_write(&cfg, bundle, e);
}

static int open_log(const struct adapter_workspace *ws)
{
	_cleanup_close_ int wfd = open(ws->dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (wfd < 0)
		return negative_errno();
	return safe_open_file(wfd, "agent.log", O_WRONLY | O_CREAT | O_APPEND, 0600, SAFE_BENEATH);
}

/* An error naming what failed and the last line of agent.log (the agent's own words). */
static int agent_log_error(const struct adapter_workspace *ws, int err, const char *what,
			   struct station_error *e)
{
	char path[PATH_MAX];
	_cleanup_free_ char *text = NULL;
	size_t len = 0;
	snprintf(path, sizeof path, "%s/agent.log", ws->dir);
	_cleanup_close_ int wfd = open(ws->dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (wfd < 0 || safe_read_file(wfd, "agent.log", SAFE_BENEATH, 1 << 20, &text, &len) < 0)
		len = 0;
	while (len > 0 && (text[len - 1] == '\n' || text[len - 1] == ' '))
		len--;
	size_t start = len;
	while (start > 0 && text[start - 1] != '\n')
		start--;
	return station_error_set(e, err, NULL, "%s: %s: %.*s", ws->ctx->runtime->name, what,
				 (int)MIN(len - start, 400),
				 len ? text + start : "agent.log is empty");
}

static void remove_stale_state(const struct adapter_workspace *ws)
{
	char state[PATH_MAX];
	snprintf(state, sizeof state, "%s/%s", ws->ctx->runtime->root, ws->id);
	if (access(state, F_OK) == 0) /* a container left from before (a crash, a restart) */
		runtime_delete(ws->ctx->runtime, ws->id, NULL);
}

/* A networked workspace is created, then given its links while the container's init still waits
 * in the runtime (nothing of the sandbox has run), then started. The namespace is the
 * container's own, owned by its user namespace, so the runtime can mount a sysfs there (a
 * namespace owned by the host's user namespace refuses it); its processes hold no CAP_NET_ADMIN
 * (oci_default_caps), so they cannot change what the links were given. */
static int start_runtime(const struct adapter_workspace *ws, const char *bundle,
			 const struct runtime_io *io, pid_t *ret_pid, struct station_error *e)
{
	const struct runtime *rt = ws->ctx->runtime;
	bool attach_failed = false;
	pid_t pid;
	int r;

	if (!ws->net_attach)
		r = runtime_run_detached(rt, ws->id, bundle, io, &pid, e);
	else if ((r = runtime_create(rt, ws->id, bundle, io, &pid, e)) >= 0) {
		r = ws->net_attach(ws->net_userdata, pid, e);
		attach_failed = r < 0;
		if (r >= 0)
			r = runtime_start(rt, ws->id, e);
		if (r < 0)
			runtime_delete(rt, ws->id, NULL);
	}
	if (attach_failed)
		return r; /* the network's own failure, named by it */
	if (r < 0) {
		/* a runtime broken as a whole says so best when asked for its version */
		struct station_error probe = { 0 };
		if (runtime_probe(ws->ctx->runtime, NULL, &probe) < 0 && e)
			*e = probe;
		return e ? (e->err = -EHOSTDOWN) : -EHOSTDOWN; /* the worker's runtime failed */
	}
	*ret_pid = pid;
	return 0;
}

/* runsc: the agent binds run/agent.sock itself. Waits, bounded, until a connection to it
 * succeeds (the agent drops a connection that closes before HELLO without a word); the sandbox
 * dying first ends the wait. */
static int wait_agent_socket(const struct adapter_workspace *ws, const char *sock, pid_t pid,
			     struct station_error *e)
{
	for (unsigned waited = 0, delay = 1;; waited += delay, delay = MIN(delay * 2, 20u)) {
		_cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0)
			return station_error_set(e, negative_errno(), NULL, "socket: %m");
		/* a socket at run/agent.sock, not a symlink container root put there */
		if (safe_connect_unix(fd, sock) == 0)
			return 0;
		if (kill(pid, 0) < 0 && errno == ESRCH)
			return agent_log_error(ws, -EHOSTDOWN,
					       "the sandbox exited before the agent "
					       "listened",
					       e);
		if (waited >= RUNSC_SOCKET_WAIT_MS)
			return agent_log_error(ws, -ETIMEDOUT, "the agent did not listen in time",
					       e);
		usleep(delay * 1000);
	}
}

/* The fd of the agent's start block, or a station error naming why (E2BIG: the image's and the
 * workspace's env together exceed what the agent takes). */
static int open_start_block(const struct agent_args *args, const uint8_t *secret, size_t secret_len,
			    struct station_error *e)
{
	int fd = adapter_start_fd(secret, secret_len, args->workdir, args->env);
	if (fd == -E2BIG)
		return station_error_set(e, fd, "env",
					 "the image's and the workspace's env together have more "
					 "than %u entries",
					 PROTO_MAX_START_ENV);
	if (fd < 0)
		return station_error_set(e, fd, NULL, "cannot hand the agent its start block: %s",
					 strerror(-fd));
	return fd;
}

/* runsc: stdin is the start block, stdout and stderr the log, no other fd. */
static int run_sandbox(const struct adapter_workspace *ws, const char *sock, const char *bundle,
		       const struct agent_args *args, const uint8_t *secret, size_t secret_len,
		       pid_t *ret_pid, struct station_error *e)
{
	if (unlink(sock) < 0 && errno != ENOENT) /* run/ is ours; unlink never follows */
		return station_error_set(e, negative_errno(), NULL, "cannot remove \"%s\": %m",
					 sock);
	_cleanup_close_ int secret_fd = open_start_block(args, secret, secret_len, e);
	if (secret_fd < 0)
		return secret_fd;
	_cleanup_close_ int log_fd = open_log(ws);
	if (log_fd < 0)
		return station_error_set(e, log_fd, NULL, "cannot open the agent's log: %s",
					 strerror(-log_fd));
	struct runtime_io io = { .in = secret_fd, .out = log_fd, .err = log_fd };
	remove_stale_state(ws);
	pid_t pid = 0;
	int r = start_runtime(ws, bundle, &io, &pid, e);
	if (r >= 0)
		r = wait_agent_socket(ws, sock, pid, e);
	if (r < 0)
		return r;
	*ret_pid = pid;
	return 0;
}

static int run_container(const struct adapter_workspace *ws, const struct agent_args *args,
			 const uint8_t *secret, size_t secret_len, pid_t *ret_pid,
			 struct station_error *e)
{
	char sock[PATH_MAX], bundle[PATH_MAX];
	snprintf(sock, sizeof sock, "%s/run/agent.sock", ws->dir);
	snprintf(bundle, sizeof bundle, "%s/bundle", ws->dir);
	if (is_runsc(ws->ctx))
		return run_sandbox(ws, sock, bundle, args, secret, secret_len, ret_pid, e);
	_cleanup_close_ int secret_fd = open_start_block(args, secret, secret_len, e);
	if (secret_fd < 0)
		return secret_fd;
	_cleanup_close_ int wfd = open(ws->dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	_cleanup_close_ int rfd = wfd < 0 ? negative_errno() :
					    safe_open_dir(wfd, "run", SAFE_BENEATH);
	_cleanup_close_ int listen_fd = rfd < 0 ? rfd : adapter_listen_unix(rfd, "agent.sock");
	_cleanup_close_ int log_fd = open_log(ws);
	if (listen_fd < 0 || log_fd < 0)
		return station_error_set(e, listen_fd < 0 ? listen_fd : log_fd, NULL,
					 "cannot set up the agent's socket or log");
	/* the agent, as container root, accepts on it; others inside cannot pass the secret */
	uint32_t root = ws_base(ws);
	int r = safe_chown_at(rfd, "agent.sock", S_IFSOCK, root, root, (mode_t)-1);
	if (r < 0)
		return station_error_set(e, r, NULL, "chown \"%s\": %s", sock, strerror(-r));
	int extra[] = { secret_fd, listen_fd };
	struct runtime_io io = { .in = -1,
				 .out = log_fd,
				 .err = log_fd,
				 .extra_fds = extra,
				 .n_extra_fds = ELEMENTSOF(extra) };
	remove_stale_state(ws);
	return start_runtime(ws, bundle, &io, ret_pid, e);
}

/* ---- memory snapshots: checkpoint and restore (docs/operations.md "Memory snapshots") ---- */

#define CHECKPOINT_LOG_MAX (64u << 20)

const char *adapter_container_run_dir(void)
{
	return OCI_RUN_DIR;
}

/* Copies the regular file of from_fd (at most max bytes, its size now) to a new file name in
 * dfd (0600, uid:gid), which must not exist. */
static int copy_log(int from_fd, int dfd, const char *name, uid_t uid, gid_t gid, size_t max)
{
	struct stat st;
	char buf[65536];
	if (fstat(from_fd, &st) < 0)
		return negative_errno();
	if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size > max)
		return -EFBIG;
	_cleanup_close_ int to =
		openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (to < 0)
		return negative_errno();
	if (fchown(to, uid, gid) < 0)
		return negative_errno();
	for (off_t left = st.st_size, at = 0; left > 0;) {
		ssize_t n = pread(from_fd, buf, MIN((size_t)left, sizeof buf), at);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? negative_errno() : -EIO; /* shrunk meanwhile */
		if (write_all(to, buf, (size_t)n) < 0)
			return negative_errno();
		left -= n, at += n;
	}
	return 0;
}

int adapter_checkpoint(const struct adapter_context *ctx, const char *id, const char *ws_dir,
		       const char *criu, const char *dir, const uint8_t *secret, size_t secret_len,
		       struct station_error *e)
{
	char images[PATH_MAX], work[PATH_MAX], path[PATH_MAX];
	snprintf(images, sizeof images, "%s/images", dir);
	snprintf(work, sizeof work, "%s/work", dir);
	if (!ctx->runtime)
		return station_error_set(e, -ENOTSUP, NULL, "no container runtime");
	int r = runtime_checkpoint(ctx->runtime, id, criu, images, work, e);
	if (r < 0)
		return r;
	/* run/ is container root's: its agent.log is opened beneath it, never followed, a regular
	 * file only, bounded; copied at once, before the agent (running on) writes more */
	_cleanup_close_ int wfd = open(ws_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	_cleanup_close_ int log =
		wfd < 0 ? negative_errno() :
			  safe_open_file(wfd, "run/agent.log", O_RDONLY, 0, SAFE_BENEATH);
	_cleanup_close_ int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	r = log < 0 ? log :
	    dfd < 0 ? negative_errno() :
		      copy_log(log, dfd, "agent.log", 0, 0, CHECKPOINT_LOG_MAX);
	if (r < 0)
		return station_error_set(e, r, NULL,
					 "cannot keep the agent's log (run/agent.log) with the "
					 "checkpoint: %s",
					 strerror(-r));
	snprintf(path, sizeof path, "%s/secret", dir);
	_cleanup_close_ int sfd =
		openat(dfd, "secret", O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (sfd < 0 || write_all(sfd, secret, secret_len) < 0)
		return station_error_set(e, negative_errno(), NULL, "cannot write \"%s\": %m",
					 path);
	return 0;
}

int adapter_checkpoint_secret(const char *dir, uint8_t *secret, size_t secret_len,
			      struct station_error *e)
{
	_cleanup_close_ int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	_cleanup_free_ char *s = NULL;
	size_t len = 0;
	int r = dfd < 0 ? negative_errno() :
			  safe_read_file(dfd, "secret", SAFE_BENEATH, 4096, &s, &len);
	if (r >= 0 && len != secret_len)
		r = -EBADMSG;
	if (r < 0)
		return station_error_set(e, r, "snapshot",
					 "the checkpoint in \"%s\" has no agent secret: %s", dir,
					 strerror(-r));
	memcpy(secret, s, secret_len);
	explicit_bzero(s, len);
	return 0;
}

void adapter_criu_log_error(const char *work, const char *name, struct station_error *e)
{
	_cleanup_close_ int wfd = open(work, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	_cleanup_free_ char *log = NULL;
	size_t len = 0;
	if (wfd < 0 || safe_read_file(wfd, name, SAFE_BENEATH, 4 << 20, &log, &len) < 0)
		return;
	/* the first error criu did not go on past (it does past an RLIMIT_NOFILE it may not
	 * raise, without CAP_SYS_RESOURCE) */
	const char *err = strstr(log, "Error (");
	while (err && memmem(err, strcspn(err, "\n"), "RLIMIT_NOFILE", 13))
		err = strstr(err + 1, "Error (");
	if (!err)
		return;
	size_t n = strcspn(err, "\n");
	size_t used = strnlen(e->message, sizeof e->message - 1);
	snprintf(e->message + used, sizeof e->message - used, "; criu: %.*s", (int)MIN(n, 300u),
		 err);
}

/* criu reads some images (timens, utsns, …) once inside the restored user namespace, as its
 * root (an unprivileged host uid), by the images directory's fd: the directory 0711 and its
 * files 0644 for that; the checkpoint's own directory around them stays 0700 root's. */
static int images_readable(const char *images)
{
	_cleanup_close_ int dfd = open(images, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0 || fchmod(dfd, 0711) < 0)
		return negative_errno();
	_cleanup_close_ int lfd = dup(dfd);
	DIR *d = lfd < 0 ? NULL : fdopendir(lfd);
	if (!d)
		return negative_errno();
	lfd = -1; /* the DIR's now */
	int r = 0;
	struct dirent *de;
	while (r >= 0 && (de = readdir(d))) {
		struct stat st;
		if (fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			r = negative_errno();
		else if (S_ISREG(st.st_mode) && (st.st_mode & 07777) != 0644 &&
			 fchmodat(dfd, de->d_name, 0644, 0) < 0)
			r = negative_errno();
	}
	closedir(d);
	return r;
}

/* The groups below dfd (a directory of W/c) and every file in them, handed to uid: the restore
 * made the agent's groups anew as root, whose own they were (a group's files are its maker's),
 * and the agent writes some of them (a counter's reset, joining one). cgroupfs holds no
 * symlinks; nothing is followed all the same. Bounded in depth like the agent's groups are. */
static int chown_groups_below(int dfd, uid_t uid, unsigned depth)
{
	_cleanup_close_ int lfd = dup(dfd);
	DIR *d = lfd < 0 ? NULL : fdopendir(lfd);
	if (!d)
		return negative_errno();
	lfd = -1;
	int r = 0;
	struct dirent *de;
	while (r >= 0 && (de = readdir(d))) {
		if (de->d_type != DT_DIR || strcmp(de->d_name, ".") == 0 ||
		    strcmp(de->d_name, "..") == 0)
			continue;
		_cleanup_close_ int sub =
			openat(dfd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (sub < 0 || fchown(sub, uid, uid) < 0) {
			r = negative_errno();
			break;
		}
		DIR *files = NULL;
		_cleanup_close_ int ffd = dup(sub);
		if (ffd < 0 || !(files = fdopendir(ffd))) {
			r = negative_errno();
			break;
		}
		ffd = -1;
		struct dirent *fe;
		while (r >= 0 && (fe = readdir(files)))
			if (fe->d_type == DT_REG &&
			    fchownat(sub, fe->d_name, uid, uid, AT_SYMLINK_NOFOLLOW) < 0 &&
			    errno != ENOENT)
				r = negative_errno();
		closedir(files);
		if (r >= 0 && depth > 0)
			r = chown_groups_below(sub, uid, depth - 1);
	}
	closedir(d);
	return r;
}

static int give_back_groups(const struct adapter_workspace *ws)
{
	struct cgroup *c = NULL;
	int r = cgroup_child(ws->cgroup, "c", &c);
	for (size_t i = 0; r >= 0 && i < c->n_dirs; i++) {
		_cleanup_close_ int dfd =
			open(c->dirs[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		r = dfd < 0 ? negative_errno() : chown_groups_below(dfd, ws_base(ws), 8);
	}
	cgroup_free(c);
	return r;
}

/* The checkpoint's processes, restored into this workspace's container: the agent's log put
 * back where the dump found it (at its size: criu checks it), the images readable past the
 * user namespace's setup (timens-0.img is read then: 0711, inside the checkpoint's 0700
 * directory), criu's work files in a directory of this restore's own. The agent listens on its
 * own socket at run/agent.sock (it did at the dump); nothing is handed to it. */
static int restore_container(const struct adapter_workspace *ws, pid_t *ret_pid,
			     struct station_error *e)
{
	char images[PATH_MAX], work[PATH_MAX], bundle[PATH_MAX];
	snprintf(images, sizeof images, "%s/images", ws->restore_dir);
	snprintf(work, sizeof work, "%s/restore-%s", ws->restore_dir, ws->id);
	snprintf(bundle, sizeof bundle, "%s/bundle", ws->dir);
	uint32_t root = ws_base(ws);
	_cleanup_close_ int cfd =
		open(ws->restore_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	_cleanup_close_ int log =
		cfd < 0 ? negative_errno() :
			  safe_open_file(cfd, "agent.log", O_RDONLY, 0, SAFE_BENEATH);
	_cleanup_close_ int wfd = open(ws->dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	_cleanup_close_ int rfd = wfd < 0 ? negative_errno() :
					    safe_open_dir(wfd, "run", SAFE_BENEATH);
	int r = log < 0 ? log : rfd < 0 ? rfd : 0;
	if (r >= 0 && unlinkat(rfd, "agent.log", 0) < 0 && errno != ENOENT)
		r = negative_errno();
	if (r >= 0)
		r = copy_log(log, rfd, "agent.log", root, root, CHECKPOINT_LOG_MAX);
	if (r < 0)
		return station_error_set(e, r, "snapshot",
					 "cannot put the checkpoint's agent log in place: %s",
					 strerror(-r));
	r = images_readable(images);
	if (r < 0)
		return station_error_set(e, r, "snapshot", "the checkpoint's images (\"%s\"): %s",
					 images, strerror(-r));
	(void)rm_rf(work);
	if (mkdir(work, 0700) < 0)
		return station_error_set(e, negative_errno(), NULL, "cannot make \"%s\": %m", work);
	remove_stale_state(ws);
	r = runtime_restore(ws->ctx->runtime, ws->id, ws->criu, images, work, bundle, ret_pid, e);
	if (r < 0)
		adapter_criu_log_error(work, "restore.log", e);
	else if ((r = give_back_groups(ws)) < 0)
		station_error_set(e, r, NULL,
				  "cannot hand the restored groups to the workspace: %s",
				  strerror(-r));
	(void)rm_rf(work);
	return r;
}

static int container_start_agent(const struct adapter_workspace *ws, const uint8_t *secret,
				 size_t secret_len, pid_t *ret_pid, struct station_error *e)
{
	struct image *img = NULL;
	struct cgroup *c = NULL;
	json_t *seccomp = NULL;
	struct ca_binds ca = { 0 };
	struct kernel_binds kernels = { 0 };
	char digest[SECCOMP_DIGEST_SIZE];
	_cleanup_close_ int rootfd = -1;
	uid_t uid = 0;
	gid_t gid = 0;
	struct agent_args *args = calloc(1, sizeof *args);
	if (!args)
		return station_error_set(e, -ENOMEM, NULL, "out of memory");
	int r = check_runtime(ws->ctx, e);
	if (r >= 0)
		r = lookup_image(ws, &img, e);
	if (r >= 0)
		r = rootfd = open_rootfs(ws, e);
	if (r >= 0)
		r = resolve_user(rootfd, img->config.user, &uid, &gid, e);
	if (r >= 0)
		r = load_profile(ws->ctx, ws->spec,
				 json_string_value(json_object_get(ws->spec, "seccompDigest")),
				 &seccomp, NULL, digest, e);
	if (r >= 0 && is_runsc(ws->ctx))
		r = runsc_host_limits(ws, e);
	if (r >= 0)
		r = write_ca_bundle(ws, rootfd, &ca, e);
	if (r >= 0 && (args->have_ca = ca.path[0] != 0))
		ca_env_fill(&args->ca, OCI_CA_BUNDLE);
	if (r >= 0)
		kernel_binds_find(ws, rootfd, &kernels);
	if (r >= 0)
		r = delegate_cgroup(ws, &c, e);
	if (r >= 0 && build_agent_args(ws, img, c, uid, gid, args) < 0)
		r = station_error_set(e, -ENOMEM, NULL, "out of memory");
	if (r >= 0)
		r = write_bundle(ws, c, args->argv, seccomp, &ca, &kernels, e);
	if (r >= 0 && ws->restore_dir)
		r = restore_container(ws, ret_pid, e);
	else if (r >= 0)
		r = run_container(ws, args, secret, secret_len, ret_pid, e);
	json_decref(seccomp);
	ca_binds_done(&ca);
	kernel_binds_done(&kernels);
	cgroup_free(c);
	image_free(img);
	free(args->env);
	free(args);
	return r;
}

/* The runtime made the container's group in every hierarchy, ours or not: remove sub (and
 * then the workspace group) there too, once the runtime has let go of it. */
static void remove_runtime_cgroups(const struct adapter_workspace *ws, bool workspace_too)
{
	_cleanup_free_ char *rel = NULL, *c = NULL;
	if (!ws->cgroup || cgroup_relative_path(ws->cgroup, &rel) < 0 ||
	    asprintf(&c, "%s/c", rel) < 0)
		return;
	cgroup_remove_in_all_hierarchies(c);
	if (workspace_too)
		cgroup_remove_in_all_hierarchies(rel);
}

/* What the container held on the host once the runtime let go of it: its cgroups, the
 * rootfs mount, the layers' mounts, a size-limited HOME. */
static void release_host_side(const struct adapter_workspace *ws)
{
	char rootfs[PATH_MAX];
	remove_runtime_cgroups(ws, false);
	snprintf(rootfs, sizeof rootfs, "%s/rootfs", ws->dir);
	umount2(rootfs, MNT_DETACH);
	layers_detach(ws->dir);
	home_limit_unmount(ws);
}

static void container_stop(const struct adapter_workspace *ws)
{
	if (ws->ctx->runtime)
		runtime_delete(ws->ctx->runtime, ws->id, NULL);
	release_host_side(ws);
}

/* One runtime delete; the workspace is removed only once the runtime no longer knows the
 * container (else the error says what is left, and a retry deletes again). */
static int container_remove(const struct adapter_workspace *ws, struct station_error *e)
{
	const struct runtime *rt = ws->ctx->runtime;
	if (rt) {
		struct station_error de = { 0 };
		struct runtime_state st;
		int r = runtime_delete(rt, ws->id, &de);
		struct station_error se = { 0 };
		int k = runtime_state(rt, ws->id, &st, &se);
		char state_dir[PATH_MAX];
		snprintf(state_dir, sizeof state_dir, "%s/%s", rt->root, ws->id);
		/* a runtime that cannot answer (broken, gone) holds nothing if it has no state */
		if ((r < 0 || k != -ENOENT) && k < 0 && access(state_dir, F_OK) < 0 &&
		    errno == ENOENT)
			r = 0, k = -ENOENT;
		if (r < 0 || k != -ENOENT)
			return station_error_set(
				e, r < 0 ? r : -EBUSY, NULL,
				"the runtime still knows container \"%s\" (%s)%s%s", ws->id,
				k >= 0 ? runtime_status_to_string(st.status) : "state unknown",
				r < 0 ? ": " : "", r < 0 ? de.message : "");
	}
	release_host_side(ws);
	remove_runtime_cgroups(ws, true);
	int r = rm_rf(ws->dir);
	if (r < 0 && r != -ENOENT)
		return station_error_set(e, r, NULL, "cannot remove \"%s\": %s", ws->dir,
					 strerror(-r));
	return 0;
}

static int container_paths(const struct adapter_workspace *ws, char **ret_home, char **ret_workdir)
{
	const char *wd = json_string_value(json_object_get(ws->spec, "workdir"));
	*ret_home = strdup(OCI_HOME_DIR);
	*ret_workdir = strdup(wd ? wd : DEFAULT_WORKDIR);
	if (!*ret_home || !*ret_workdir) {
		free(*ret_home);
		free(*ret_workdir);
		return -ENOMEM;
	}
	return 0;
}

const struct adapter_ops adapter_container = {
	.name = "container",
	.check = container_check,
	.prepare = container_prepare,
	.start_agent = container_start_agent,
	.stop = container_stop,
	.remove = container_remove,
	.paths = container_paths,
	.ready = container_ready,
};
