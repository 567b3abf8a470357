/* SPDX-License-Identifier: MIT */
#pragma once

/* One supervised process of the agent: a run, a service attempt or a terminal session. A child
 * owns what all of them have: its cgroup, its main pid until the reaper reports it, the CLOEXEC
 * error pipe that tells a failed start from an exec, and its output (two pipes, or one PTY
 * master) read until EOF or, once the main process is gone, until the drain timeout; it kills
 * its tree and classifies its end. What differs is its owner's, through struct child_ops: the
 * frames it names itself with, where PTY output goes, what happens on start and at the end.
 *
 * Life: child_init(); child_start() (any failure there is a failed start with its reason);
 * child_exited() from the reaper; once the main process is reaped, the start is known and the
 * output is at EOF, ops->finish() reports and frees (child_done()). */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "agent/channel.h"
#include "agent/output.h"
#include "agent/spawn.h"
#include "cgroup/cgroup.h"
#include "event/event.h"
#include "proto/agent-proto.h"
#include "proto/frame.h"

#define container_of(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))

/* What the agent's children share, from its start block and arguments. */
struct child_config {
	const struct cgroup *cgroup; /* the workspace cgroup; NULL: children are not placed */
	char *const *env; /* the start block's KEY=VALUE entries, valid (spawn_env_entry_valid) */
	size_t n_env;
	const char *home;
	const char *workdir; /* cwd of a child that names none */
	bool set_user;	     /* children drop to uid:gid (and no supplementary groups) */
	uid_t uid;
	gid_t gid;
};

struct child;

struct child_ops {
	const char *kind;	   /* the log field naming a child: "run", "service", "terminal" */
	const char *what;	   /* in log messages: "run", "service attempt", "terminal" */
	const char *cgroup_prefix; /* a child's cgroup is "<prefix>-<n>" */
	uint16_t output_type;	   /* RUN_OUTPUT, SERVICE_OUTPUT, TERM_OUTPUT */
	uint16_t name_tag; /* the field with a child's name: RUN_ID, SERVICE_NAME, TERM_ID */
	/* The fields of an output frame before STREAM (pipes) or OFFSET (a PTY). NULL: the name. */
	int (*put_ids)(const struct child *c, struct buf *b);
	/* Bytes read from a PTY. NULL for pipes: kept in the pipe's buffer and sent while watched. */
	void (*output)(struct child *c, const uint8_t *p, size_t n);
	/* The PTY master can take input again (EPOLLOUT, when the owner asked for it). */
	void (*writable)(struct child *c);
	/* The command was executed. */
	void (*started)(struct child *c);
	/* The main process was reaped and the start is known; its leftovers are not killed yet.
	 * May be NULL. */
	void (*exited)(struct child *c);
	/* Reaped, start known, output at EOF: the owner reports and frees. Called once. */
	void (*finish)(struct child *c);
	/* Pipes: bytes were added to a stream's totals. May be NULL. */
	void (*kept)(struct child *c);
};

/* The side of a manager every one of its children shares. */
struct child_base {
	const struct child_ops *ops;
	struct event_loop *loop;
	struct channel *channel;
	const struct cgroup *cgroup;
	char *const *env;
	size_t n_env;
	char *home_entry; /* "HOME=..." */
	char *workdir;
	bool set_user;
	uid_t uid;
	gid_t gid;
	uint64_t next_cgroup;
	struct child *children; /* every child from child_init() to child_done(), newest first */
	size_t n_children;
};

/* A manager of size bytes, zeroed but for its first member, the base, made from config (copied;
 * its env array is borrowed). NULL when out of memory. */
void *child_base_new(size_t size, const struct child_ops *ops, struct event_loop *loop,
		     struct channel *channel, const struct child_config *config);
/* Frees the manager; its children must be gone (child_done()). */
void child_base_free(struct child_base *b);

/* The child of that name, or NULL. */
struct child *child_base_find(struct child_base *b, const char *name);
/* The child whose main process this is, not reaped yet, or NULL. */
struct child *child_base_find_pid(struct child_base *b, pid_t pid);
/* Every child's name (HELLO_OK). */
int child_base_put_names(struct child_base *b, struct buf *buf);
/* Per child whose main process runs: its ids (put_ids, else name_tag), CPU_USEC and
 * MEMORY_BYTES from its cgroup (USAGE_REPLY). A child whose group cannot be read is left out. */
int child_base_put_usage(struct child_base *b, struct buf *buf);
/* The controller went away: nobody watches any more. */
void child_base_unwatch(struct child_base *b);
/* child_kill() for every child. */
void child_base_kill(struct child_base *b);
/* SHUTDOWN, once they were killed and with the loop stopped: reaps until every child's tree and
 * every group being released are gone (at most usec), then removes their groups. Blocks. */
void child_base_shutdown(struct child_base *b, uint64_t usec);

struct child_pipe {
	struct child *child;
	int stream; /* RUN_STREAM_STDOUT or _STDERR; 0 for a PTY */
	int fd;
	struct event_source *io;
	struct output_buffer buf;  /* pipes: what is kept of the stream */
	struct event_source *hold; /* the timer that looks again while the pipe is not read */
	uint64_t held_since;	   /* the link has been backed up since (CLOCK_MONOTONIC usec) */
	uint64_t read_bytes;	   /* read so far, until the pipe is grown (output_pipe_grow()) */
	uint64_t resend_next;	   /* while the child's output is behind: the next offset to send */
	bool grown;
};

struct child {
	struct child_base *base;
	struct child *prev, *next;
	const char *name; /* the owner's id or name, for logs */
	const char *cwd;  /* for the reason of a failed start */
	const char *path; /* what is executed; NULL: SPAWN_SHELL */
	struct cgroup *cg;
	pid_t pid;
	bool exited;
	bool cg_empty; /* the group held nobody once the main process was reaped: nothing can
			* join it after that, so it need not be checked again */
	int wait_status;
	bool failed_start;
	char *reason; /* why the start failed (services: or why it daemonized); may be NULL */
	int errpipe_fd;
	struct event_source *errpipe_io;
	int stdin_fd; /* a pipe for stdin: its write end, the owner's to write and close */
	struct child_pipe out[2];
	struct event_source *drain_timer;
	bool watch;  /* output is forwarded as it comes */
	bool behind; /* pipes: output goes from out[].resend_next, as the link takes it */
	uint64_t started_at;
};

/* What to start: SPAWN_SHELL -c command, or path with argv. */
struct child_cmd {
	const char *cwd;
	const char *command;
	const char *path;
	char *const *argv;
	char *const *env; /* after the base's entries; a later one wins */
	size_t n_env;
	bool has_stdin; /* pipes: stdin is a pipe (c->stdin_fd), else /dev/null */
	bool pty;	/* a PTY instead of pipes: */
	int pty_master; /* taken, its output is out[0] */
	int pty_slave;	/* stdio of the child, in a new session; borrowed */
};

/* head and tail: what each output pipe keeps (0 for a PTY). Joins base's children. -ENOMEM. */
int child_init(struct child *c, struct child_base *base, const char *name, size_t head,
	       size_t tail);
/* After a child_init() that succeeded: leaves base's children, closes and frees what the child
 * holds; its processes and cgroup directory are left. */
void child_done(struct child *c);

/* Cgroup, environment, pipes, fork, watching. < 0 when nothing was forked: a failed start, and
 * the child counts as reaped (child_maybe_finish() finishes it). A failure after the fork is a
 * failed start too, with the main process killed, and 0. */
int child_start(struct child *c, const struct child_cmd *cmd);
/* A failure of the owner's before child_start(): reason (may be NULL) is taken. */
void child_fail_start(struct child *c, char *reason);

/* From the reaper: the main process was waited for with this status. */
void child_exited(struct child *c, int status);
/* Calls ops->finish() when the child is reaped, its start known and its output at EOF. */
void child_maybe_finish(struct child *c);

/* SIGKILL for the whole tree: the cgroup, or without one the process group. */
void child_kill(struct child *c);
/* sig to every process of the tree, or to the main process when the tree has none. */
void child_signal(struct child *c, int sig);
/* The main process has exited, reaped or not (a zombie is left to the reaper). */
bool child_main_exited(const struct child *c);

/* RUN_FAILED_TO_START, RUN_KILLED (by a signal) or RUN_EXITED: how it ended, requests aside. */
enum run_status child_status(const struct child *c);
/* The exit code, or -1 when it did not exit by itself. */
int child_exit_code(const struct child *c);
/* EXIT_CODE or SIGNAL, as the main process ended; nothing for a failed start. */
int child_put_exit(const struct child *c, struct buf *b);

/* Output frames of at most OUTPUT_READ_BYTES each, dropped while the channel's queue is over
 * its cap (a gap the controller sees in the offsets). stream 0: none (a PTY). */
void child_send_output(struct child *c, int stream, uint64_t offset, const uint8_t *p, size_t n);
/* What both pipes keep, as output frames from offset 0 (head, then tail, stdout first), and
 * then live output: paced by the link, never dropped. Until it has caught up, the child is
 * behind: frames go only while the channel's queue is at most CHANNEL_MAX_UNSENT, from what the
 * pipes keep at that moment (bytes that left the tail meanwhile are skipped, a gap the
 * controller sees in the offsets), and new output goes the same way after them. A watched
 * child whose live output does not fit falls behind the same way, from that output on. */
void child_send_snapshot(struct child *c);
/* The channel has room again (channel_ops.drained): children behind send on. */
void child_base_output_room(struct child_base *b);
/* Bytes kept by both pipes. */
size_t child_output_kept(const struct child *c);
/* STDOUT_HEAD, _TAIL, _BYTES, then STDERR's; without data (with_data false) empty head and
 * tail with the totals. */
int child_put_output(struct child *c, struct buf *b, bool with_data);
