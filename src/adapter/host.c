/* SPDX-License-Identifier: MIT */
/* The host adapter: the agent is a plain process on the host, in the workspace cgroup, in its
 * own session so a terminal's signals never reach it. */

#include <errno.h>
#include <signal.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "adapter.h"
#include "ca-bundle.h"
#include "basic/cleanup.h"
#include "basic/safe-fs.h"
#include "basic/util.h"
#include "cgroup/cgroup.h"
#include "image/image.h"
#include "proto/agent-start.h"

enum { AGENT_SECRET_FD = 3, AGENT_LISTEN_FD = 4, MAX_AGENT_ARGS = 16 };

/* HOME and its workspace directory to the configured user, while the controller still owns
 * them (made just now): what the user changed since stays the user's. */
static int give_home(const struct adapter_workspace *ws, int dfd, struct station_error *e)
{
	static const char *const subs[] = { "home", "home/workspace" };
	for (size_t i = 0; i < ELEMENTSOF(subs); i++) {
		struct stat st;
		_cleanup_close_ int fd = safe_open_dir(dfd, subs[i], SAFE_BENEATH);
		if (fd == -ELOOP || fd == -ENOTDIR || fd == -ENOENT)
			continue; /* the user replaced it: theirs */
		if (fd < 0 || fstat(fd, &st) < 0 ||
		    (st.st_uid == 0 && fchown(fd, ws->ctx->host_uid, ws->ctx->host_gid) < 0))
			return station_error_set(e, fd < 0 ? fd : negative_errno(), NULL,
						 "cannot give \"%s/%s\" to uid %u: %s", ws->dir,
						 subs[i], ws->ctx->host_uid,
						 strerror(fd < 0 ? -fd : errno));
		if (i == 0 && st.st_uid == 0 && fchmod(fd, 0700) < 0)
			return station_error_set(e, negative_errno(), NULL, "chmod \"%s/home\": %m",
						 ws->dir);
	}
	return 0;
}

/* A host workspace made from a snapshot (spec "snapshot", and "image" its image): its new HOME
 * is the snapshot's, every entry the commands' user's (root's without --host-user). A HOME
 * there already (a restart) is kept. */
static int seed_home_from_snapshot(const struct adapter_workspace *ws, int wfd,
				   struct station_error *e)
{
	const char *ref = json_string_value(json_object_get(ws->spec, "image"));
	struct stat st;
	if (!json_object_get(ws->spec, "snapshot") || !ref ||
	    fstatat(wfd, "home", &st, AT_SYMLINK_NOFOLLOW) == 0)
		return 0;
	if (!ws->ctx->images)
		return station_error_set(e, -EHOSTDOWN, NULL, "the image store is unavailable");
	struct image *img = NULL;
	int r = image_lookup(ws->ctx->images, ref, &img, e);
	if (r >= 0)
		r = image_layers_unpack(ws->ctx->images, img, e);
	if (r < 0) {
		image_free(img);
		return r;
	}
	_cleanup_close_ int hfd = safe_mkdir_open(wfd, "home", 0700, (uid_t)-1, (gid_t)-1);
	if (hfd < 0)
		r = station_error_set(e, hfd, NULL, "cannot create \"%s/home\": %s", ws->dir,
				      strerror(-hfd));
	else
		r = image_layer_copy_subtree_owned(img, ADAPTER_HOST_SNAPSHOT_HOME, hfd,
						   ws->ctx->host_user_set ? ws->ctx->host_uid : 0,
						   ws->ctx->host_user_set ? ws->ctx->host_gid : 0,
						   e);
	image_free(img);
	return r == -ENOENT ? 0 : r; /* a snapshot of no HOME: an empty one */
}

static int host_prepare(const struct adapter_workspace *ws, struct station_error *e)
{
	int r = mkdir_p(ws->dir, 0755);
	_cleanup_close_ int wfd =
		r < 0 ? r : open(ws->dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (wfd < 0)
		return station_error_set(e, r < 0 ? r : negative_errno(), NULL,
					 "cannot create \"%s\": %s", ws->dir,
					 strerror(r < 0 ? -r : errno));
	static const struct {
		const char *sub;
		mode_t mode;
	} dirs[] = { { "home", 0755 }, { "home/workspace", 0755 }, { "run", 0700 } };
	r = seed_home_from_snapshot(ws, wfd, e);
	if (r < 0)
		return r;
	for (size_t i = 0; i < ELEMENTSOF(dirs); i++) {
		r = safe_mkdir(wfd, dirs[i].sub, dirs[i].mode, (uid_t)-1, (gid_t)-1);
		if (r < 0)
			return station_error_set(e, r, NULL, "cannot create \"%s/%s\": %s", ws->dir,
						 dirs[i].sub, strerror(-r));
	}
	/* root's, searchable only by the group commands run as (none: root alone) */
	gid_t group = ws->ctx->host_user_set ? ws->ctx->host_gid : 0;
	if (fchown(wfd, 0, group) < 0 || fchmod(wfd, 0710) < 0)
		return station_error_set(e, negative_errno(), NULL, "cannot secure \"%s\": %m",
					 ws->dir);
	/* the credential socket's directory: the agent's, passable by the commands' group */
	r = safe_mkdir(wfd, "cred", 0710, 0, group);
	if (r < 0)
		return station_error_set(e, r, NULL, "cannot create \"%s/cred\": %s", ws->dir,
					 strerror(-r));
	return ws->ctx->host_user_set ? give_home(ws, wfd, e) : 0;
}

int adapter_listen_unix(int dfd, const char *name)
{
	_cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return negative_errno();
	if (unlinkat(dfd, name, 0) < 0 && errno != ENOENT)
		return negative_errno();
	int r = safe_bind_unix(fd, dfd, name);
	if (r < 0)
		return r;
	r = safe_chown_at(dfd, name, S_IFSOCK, 0, 0, 0600);
	if (r < 0)
		return r;
	if (listen(fd, 64) < 0)
		return negative_errno();
	return TAKE_FD(fd);
}

/* A memfd, not a pipe: the block can be megabytes (256 env entries of 32 KiB each, and the
 * image's), and a pipe written before the agent runs holds 64 KiB. Sealed, and at offset 0. */
int adapter_start_fd(const uint8_t *secret, size_t secret_len, const char *workdir,
		     char *const *env)
{
	struct buf b = { 0 };
	int r = agent_start_encode(&b, secret, secret_len, workdir, env);
	_cleanup_close_ int fd =
		r < 0 ? -1 : memfd_create("station-agent-start", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (r >= 0 && fd < 0)
		r = negative_errno();
	if (r >= 0)
		r = write_all(fd, b.data, b.len);
	if (r >= 0 &&
	    (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0 ||
	     lseek(fd, 0, SEEK_SET) < 0))
		r = negative_errno();
	if (b.data)
		explicit_bzero(b.data, b.len);
	buf_free(&b);
	return r < 0 ? r : TAKE_FD(fd);
}

#if defined(__SANITIZE_ADDRESS__)
#define HOST_SANITIZER_BUILD 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HOST_SANITIZER_BUILD 1
#endif
#endif

/* The agent binary a host workspace runs. In a build with AddressSanitizer (make test-asan)
 * only, STATION_TEST_HOST_AGENT names another one: the agent built with the same sanitizers
 * (station-agent-asan, dynamically linked, which is why containers keep the static one). Every
 * other build ignores the variable. */
static const char *host_agent_path(const struct adapter_context *ctx)
{
#ifdef HOST_SANITIZER_BUILD
	const char *p = getenv("STATION_TEST_HOST_AGENT");
	if (p && p[0] == '/')
		return p;
#endif
	return ctx->agent_path;
}

/* Runs in the forked child: never returns. Reports errno through err_fd on failure. */
static void agent_exec(const char *agent_path, const struct cgroup *agent_cg, int secret_fd,
		       int listen_fd, int log_fd, int err_fd, char **argv)
{
	int r = 0;
	signals_reset_for_exec(); /* forked from a worker thread: all blocked */
	if (setsid() < 0)
		r = negative_errno();
	if (r >= 0 && agent_cg)
		r = cgroup_attach(agent_cg, 0);
	int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (r >= 0 &&
	    (devnull < 0 || dup2(devnull, 0) < 0 || dup2(log_fd, 1) < 0 || dup2(log_fd, 2) < 0 ||
	     dup2(secret_fd, AGENT_SECRET_FD) < 0 || dup2(listen_fd, AGENT_LISTEN_FD) < 0))
		r = negative_errno();
	if (r >= 0) {
		int keep[] = { AGENT_SECRET_FD, AGENT_LISTEN_FD, err_fd };
		close_all_fds_except(keep, ELEMENTSOF(keep));
		execv(agent_path, argv);
		r = negative_errno();
	}
	(void)!write(err_fd, &r, sizeof r);
	_exit(127);
}

static int build_argv(const struct adapter_workspace *ws, const char *cgroup_str, char **argv,
		      char bufs[][PATH_MAX])
{
	size_t n = 0;
	snprintf(bufs[0], PATH_MAX, "%s/home/workspace", ws->dir);
	snprintf(bufs[1], PATH_MAX, "%s/home", ws->dir);
	argv[n++] = (char *)"station-agent";
	/* The agent stays root (it makes a cgroup per command and keeps its socket and log out
	 * of the user's reach); every run, service and terminal drops to the user. */
	if (ws->ctx->host_user_set) {
		snprintf(bufs[2], PATH_MAX, "%u:%u", ws->ctx->host_uid, ws->ctx->host_gid);
		argv[n++] = (char *)"--user";
		argv[n++] = bufs[2];
	}
	/* the agent makes it (owned by the commands' user); a root too deep for a unix socket's
	 * path gets none, and git's helper then says it cannot reach it */
	int n_sock = snprintf(bufs[3], PATH_MAX, "%s/cred/socket", ws->dir);
	if (n_sock > 0 && (size_t)n_sock < sizeof(((struct sockaddr_un *)0)->sun_path)) {
		argv[n++] = (char *)"--credential-socket";
		argv[n++] = bufs[3];
	}
	argv[n++] = (char *)"--listen-fd=4";
	argv[n++] = (char *)"--secret-fd=3";
	argv[n++] = (char *)"--workdir";
	argv[n++] = bufs[0];
	argv[n++] = (char *)"--home";
	argv[n++] = bufs[1];
	/* file sessions stay beneath HOME (docs/agent-protocol.md, "Files") */
	argv[n++] = (char *)"--files-root";
	argv[n++] = bufs[1];
	if (cgroup_str) {
		argv[n++] = (char *)"--cgroup";
		argv[n++] = (char *)cgroup_str;
	}
	/* the workspace env goes in the start block (adapter_start_fd), never here */
	argv[n] = NULL;
	return 0;
}

static int wait_exec(pid_t pid, int err_fd)
{
	int child_err = 0;
	ssize_t n;
	do
		n = read(err_fd, &child_err, sizeof child_err);
	while (n < 0 && errno == EINTR);
	if (n == sizeof child_err) {
		waitpid(pid, NULL, 0);
		return child_err < 0 ? child_err : -EIO;
	}
	return 0;
}

/* The CA variables naming the host bundle (when the worker has --workspace-ca), the worker's
 * (proxy), then the workspace's env, which wins (the agent keeps the last of a name): borrowed
 * pointers, NULL-terminated; ca holds the CA entries. */
static char **host_env(const struct adapter_workspace *ws, struct ca_env *ca)
{
	if (ws->ctx->host_ca_bundle)
		ca_env_fill(ca, ws->ctx->host_ca_bundle);
	char *const *lists[] = { ws->ctx->host_ca_bundle ? ca->list : NULL, ws->worker_env,
				 ws->env };
	size_t total = 0, n = 0;
	for (size_t l = 0; l < ELEMENTSOF(lists); l++)
		for (size_t i = 0; lists[l] && lists[l][i]; i++)
			total++;
	char **env = calloc(total + 1, sizeof *env);
	for (size_t l = 0; env && l < ELEMENTSOF(lists); l++)
		for (size_t i = 0; lists[l] && lists[l][i]; i++)
			env[n++] = lists[l][i];
	return env;
}

static int host_start_agent(const struct adapter_workspace *ws, const uint8_t *secret,
			    size_t secret_len, pid_t *ret_pid, struct station_error *e)
{
	char sock[PATH_MAX];
	snprintf(sock, sizeof sock, "%s/run/agent.sock", ws->dir);
	_cleanup_close_ int wfd = open(ws->dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	_cleanup_close_ int rfd = wfd < 0 ? -1 : safe_open_dir(wfd, "run", SAFE_BENEATH);
	_cleanup_close_ int listen_fd = rfd < 0 ? rfd : adapter_listen_unix(rfd, "agent.sock");
	if (wfd < 0 || listen_fd < 0)
		return station_error_set(e, wfd < 0 ? -errno : listen_fd, NULL,
					 "agent socket \"%s\": %s", sock,
					 strerror(wfd < 0 ? errno : -listen_fd));
	_cleanup_free_ struct ca_env *ca = calloc(1, sizeof *ca);
	_cleanup_free_ char **env = ca ? host_env(ws, ca) : NULL;
	if (!env)
		return station_error_set(e, -ENOMEM, NULL, "out of memory");
	_cleanup_close_ int secret_fd = adapter_start_fd(secret, secret_len, NULL, env);
	if (secret_fd < 0)
		return station_error_set(e, secret_fd, "env", "the agent's start block: %s",
					 strerror(-secret_fd));
	_cleanup_close_ int log_fd =
		safe_open_file(wfd, "agent.log", O_WRONLY | O_CREAT | O_APPEND, 0600, SAFE_BENEATH);
	if (log_fd < 0)
		return station_error_set(e, log_fd, NULL, "agent log \"%s/agent.log\": %s", ws->dir,
					 strerror(-log_fd));

	struct cgroup *agent_cg = NULL;
	_cleanup_free_ char *cgroup_str = NULL;
	int r = 0;
	if (ws->cgroup) {
		r = cgroup_child(ws->cgroup, "agent", &agent_cg);
		if (r >= 0)
			r = cgroup_create(agent_cg);
		if (r >= 0)
			r = cgroup_to_string(ws->cgroup, &cgroup_str);
		if (r < 0) {
			cgroup_free(agent_cg);
			return station_error_set(e, r, NULL, "agent cgroup: %s", strerror(-r));
		}
	}

	char *argv[MAX_AGENT_ARGS];
	char bufs[4][PATH_MAX];
	r = build_argv(ws, cgroup_str, argv, bufs);
	if (r < 0) {
		cgroup_free(agent_cg);
		return station_error_set(e, r, "env", "too many environment entries");
	}

	int err_pipe[2];
	if (pipe2(err_pipe, O_CLOEXEC) < 0) {
		cgroup_free(agent_cg);
		return station_error_set(e, negative_errno(), NULL, "pipe: %m");
	}
	const char *agent_path = host_agent_path(ws->ctx);
	pid_t pid = fork();
	if (pid == 0) {
		close(err_pipe[0]);
		agent_exec(agent_path, agent_cg, secret_fd, listen_fd, log_fd, err_pipe[1], argv);
	}
	r = pid < 0 ? negative_errno() : 0;
	close(err_pipe[1]);
	if (r >= 0)
		r = wait_exec(pid, err_pipe[0]);
	close(err_pipe[0]);
	cgroup_free(agent_cg);
	if (r < 0)
		return station_error_set(e, r, NULL, "cannot start agent \"%s\": %s", agent_path,
					 strerror(-r));
	*ret_pid = pid;
	return 0;
}

static int host_remove(const struct adapter_workspace *ws, struct station_error *e)
{
	int r = rm_rf(ws->dir);
	if (r < 0 && r != -ENOENT)
		return station_error_set(e, r, NULL, "cannot remove \"%s\": %s", ws->dir,
					 strerror(-r));
	return 0;
}

static int host_check(const struct adapter_context *ctx, json_t *spec, struct station_error *e)
{
	return 0;
}

static void host_stop(const struct adapter_workspace *ws)
{
}

static int host_paths(const struct adapter_workspace *ws, char **ret_home, char **ret_workdir)
{
	if (asprintf(ret_home, "%s/home", ws->dir) < 0)
		return -ENOMEM;
	if (asprintf(ret_workdir, "%s/home/workspace", ws->dir) < 0) {
		free(*ret_home);
		return -ENOMEM;
	}
	return 0;
}

const struct adapter_ops adapter_host = {
	.name = "host",
	.check = host_check,
	.prepare = host_prepare,
	.start_agent = host_start_agent,
	.stop = host_stop,
	.remove = host_remove,
	.paths = host_paths,
};

const struct adapter_ops *adapter_find(const char *name)
{
	if (!name || strcmp(name, "host") == 0)
		return &adapter_host;
	if (strcmp(name, "container") == 0)
		return &adapter_container;
	return NULL;
}
