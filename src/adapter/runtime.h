/* SPDX-License-Identifier: MIT */
#pragma once

/* Drives an OCI runtime CLI (runc, crun, runsc or any binary with the same interface): create,
 * start, state, kill, delete, with container state under our own --root.
 *
 * No shell: every call is fork + execv of the runtime with an argv, its stdout and stderr
 * captured through CLOEXEC pipes (bounded), waited for with a deadline (the runtime is
 * SIGKILLed and -ETIMEDOUT returned when it passes). A runtime failure returns -EIO (or
 * -ETIMEDOUT, or -ENOENT for an unknown container) with a station_error carrying the command,
 * the exit status and the tail of the runtime's own error output.
 *
 * crun refuses hybrid cgroup hosts (v1 controllers plus a cgroup2 mount at
 * /sys/fs/cgroup/unified). On such a host every crun call runs in a private mount namespace
 * without that mount: the child unshares CLONE_NEWNS, makes / recursively private and detaches
 * the unified mount before exec; the host's mounts are not touched.
 *
 * runsc (gVisor) gets its own global flags on every call: --network=none (the sandbox's
 * netstack with loopback only), --oci-seccomp (else linux.seccomp is ignored), --cgroupfs (the
 * sandbox's emulated cgroupfs at /sys/fs/cgroup: cpu and memory) and --host-uds=create (a
 * socket bound inside a bind mount is a host socket: runsc cannot pass fds beyond stdio, so the
 * agent makes its own). It has no --preserve-fds: create with extra_fds is refused. */

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "basic/error.h"

enum runtime_kind {
	RUNTIME_RUNC,
	RUNTIME_CRUN,
	RUNTIME_RUNSC,
	RUNTIME_OTHER,
};

enum runtime_status {
	RUNTIME_STATUS_CREATING,
	RUNTIME_STATUS_CREATED,
	RUNTIME_STATUS_RUNNING,
	RUNTIME_STATUS_PAUSED,
	RUNTIME_STATUS_STOPPED,
};

const char *runtime_status_to_string(enum runtime_status s);
int runtime_status_from_string(const char *s, enum runtime_status *ret);

#define RUNTIME_TIMEOUT_MS_DEFAULT 30000
#define RUNTIME_STDERR_MAX 4096	       /* bytes of the runtime's error output kept */
#define RUNTIME_STDOUT_MAX (64 * 1024) /* bytes of `state` output accepted */
#define RUNTIME_EXTRA_FDS_MAX 8

struct runtime {
	enum runtime_kind kind;
	char *name;	    /* "runc", "crun", "runsc" or the binary's basename */
	char *path;	    /* absolute path of the binary */
	char *root;	    /* --root state directory */
	bool private_mntns; /* crun on a hybrid cgroup host: see above */
	int timeout_ms;	    /* per invocation */
};

struct runtime_state {
	enum runtime_status status;
	pid_t pid; /* host pid of the container's init; 0 when stopped */
};

/* The container's stdio and inherited fds for create. -1 for in/out/err means /dev/null.
 * extra_fds become fds 3, 4, … of the container process (--preserve-fds). */
struct runtime_io {
	int in, out, err;
	const int *extra_fds;
	size_t n_extra_fds;
};

/* True when /sys/fs/cgroup is not cgroup2 but /sys/fs/cgroup/unified is. */
bool runtime_host_is_hybrid(void);

/* name: "runc", "crun", "runsc" (looked up in PATH), another name looked up in PATH, or an
 * absolute path. state_root is created (0700) if missing. Errors: -ENOENT not found,
 * -EACCES not executable. */
int runtime_new(const char *name, const char *state_root, struct runtime **ret,
		struct station_error *e);
void runtime_free(struct runtime *rt);

/* For ready(): the binary exists and is executable, `--version` exits 0 in time (through the
 * private mount namespace when one is needed, which proves it can be set up), the state root
 * is a directory. ret_version (may be NULL) gets the first line of the version output. */
int runtime_probe(const struct runtime *rt, char **ret_version, struct station_error *e);

/* `create --bundle B --pid-file B/container.pid [--preserve-fds N] ID`. The runtime's own
 * errors are read from a log file in the state root, since its stdio belongs to the container.
 * ret_pid (may be NULL) gets the container init's host pid. */
int runtime_create(const struct runtime *rt, const char *id, const char *bundle,
		   const struct runtime_io *io, pid_t *ret_pid, struct station_error *e);
/* create and start in one invocation: `run --detach`, with the same arguments and errors. */
int runtime_run_detached(const struct runtime *rt, const char *id, const char *bundle,
			 const struct runtime_io *io, pid_t *ret_pid, struct station_error *e);
int runtime_start(const struct runtime *rt, const char *id, struct station_error *e);
/* -ENOENT when the runtime does not know the container. */
int runtime_state(const struct runtime *rt, const char *id, struct runtime_state *ret,
		  struct station_error *e);
/* all: signal every process of the container (--all), not only its init. */
int runtime_kill(const struct runtime *rt, const char *id, int sig, bool all,
		 struct station_error *e);
/* `delete --force`: kills what still runs and removes the state. A container the runtime does
 * not know is not an error (teardown is idempotent). */
int runtime_delete(const struct runtime *rt, const char *id, struct station_error *e);
/* `runc [--criu CRIU] checkpoint --leave-running` of id into image_dir (criu's log and work
 * files in work_dir); -EOPNOTSUPP for another runtime. */
int runtime_checkpoint(const struct runtime *rt, const char *id, const char *criu,
		       const char *image_dir, const char *work_dir, struct station_error *e);
/* `runc [--criu CRIU] restore --detach` of id from image_dir with bundle's config.json (criu's
 * log and work files in work_dir); the restored init's pid in *ret_pid. -EOPNOTSUPP for
 * another runtime. */
int runtime_restore(const struct runtime *rt, const char *id, const char *criu,
		    const char *image_dir, const char *work_dir, const char *bundle, pid_t *ret_pid,
		    struct station_error *e);
