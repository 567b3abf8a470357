/* SPDX-License-Identifier: MIT */
#pragma once

/* Services: long-running foreground commands supervised by the agent under a restart policy
 * (docs/agent-protocol.md, "Services"). Each attempt is one `/bin/sh -c COMMAND` in its own
 * child cgroup with its own bounded output. The service manager keeps supervising while no
 * controller is connected: state changes and attempt results are sequenced and held until
 * ACK, like RUN_DONE.
 *
 * service-policy.c holds the pure part (what follows an attempt, the restart delay, name
 * rules) so it can be tested without processes; service.c the processes and the protocol. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "agent/child.h"
#include "proto/agent-proto.h"

#define SERVICE_MAX 32		/* per agent (one workspace) */
#define SERVICE_NAME_MAX 63	/* [a-z0-9][a-z0-9._-]{0,62} */
#define SERVICE_KEEP_OUTPUTS 20 /* unacknowledged attempt results that keep their output */
#define SERVICE_MAX_BACKOFF_PERMILLE 100000u

struct service_restart {
	enum service_policy policy;
	uint64_t max_restarts;
	uint64_t delay_ms;
	uint64_t backoff_permille; /* 0: none; else each restart multiplies the delay by this / 1000 */
	uint64_t max_delay_ms;	   /* with backoff: the delay never exceeds this (0: no cap) */
	uint64_t reset_after_ms; /* an attempt this long resets the restart count (0: never) */
};

/* What an attempt resets when a controller names no RESET_AFTER_MS (docs/api.md). */
#define SERVICE_DEFAULT_RESET_AFTER_MS 60000u

/* What follows the end of an attempt. */
struct service_next {
	enum service_state state; /* BACKOFF, STOPPED, FAILED, EXHAUSTED; STARTING after a restart */
	uint64_t delay_ms;	  /* BACKOFF: until the next attempt */
};

/* A failure for on-failure: a non-zero exit, a signal, a failed start, a daemonized command. */
bool service_attempt_failed(enum attempt_end end, int exit_code);

/* restarts_done: restarts already made since the service (or its last restart request)
 * started. STOPPED ends stay stopped, RESTARTED ones start again at once; on-failure restarts
 * only failures; always restarts every end; both stop at max_restarts with EXHAUSTED. */
struct service_next service_policy_next(const struct service_restart *r, uint64_t restarts_done,
					enum attempt_end end, int exit_code);

/* Whether an attempt that ran ran_ms resets the restart count (and with it the backoff), as
 * systemd and Kubernetes do: a service that crashes after a healthy run starts its budget
 * afresh, a crash loop still exhausts it. */
bool service_budget_resets(const struct service_restart *r, uint64_t ran_ms);

/* delay_ms, times backoff_permille / 1000 per restart already made, capped at max_delay_ms. */
uint64_t service_restart_delay_ms(const struct service_restart *r, uint64_t restarts_done);

/* [a-z0-9][a-z0-9._-]{0,62} */
bool service_name_valid(const char *s);

/* A SERVICE_START, checked (service-request.c). cwd is NULL when the controller sent none. */
struct service_def {
	char *name;
	char *id;
	char *command;
	char *cwd;
	char **env; /* valid KEY=VALUE entries */
	size_t n_env;
	struct service_restart restart;
	int stop_signal;
	uint64_t stop_timeout_ms;
	uint64_t head, tail; /* output kept per stream, per attempt */
	uint64_t first_attempt;
};

/* -EBADMSG (or -E2BIG) for a frame with missing, repeated, unknown or out-of-range fields;
 * *ret is filled either way and must be released with service_def_done(). */
int service_def_parse(const struct frame *f, struct service_def *ret);
void service_def_done(struct service_def *d);
/* SERVICE_STOP, _RESTART, _REMOVE: SERVICE_NAME only; SERVICE_WATCH (want_flag): and WATCH. */
int service_parse_name(const struct frame *f, bool want_flag, char **ret_name, bool *ret_flag);

struct service_manager;

/* config as for runs (child.h): the same cgroup, environment, home, workdir and user. */
int service_manager_new(struct event_loop *loop, struct channel *channel,
			const struct child_config *config, struct service_manager **ret);
/* Frees every service without reporting it and without touching its processes. */
void service_manager_free(struct service_manager *m);

/* SERVICE_START, _STOP, _RESTART, _WATCH, _REMOVE. < 0 for a frame the controller should not
 * have sent: the connection is closed. */
int service_manager_message(struct service_manager *m, const struct frame *f);
/* SERVICE_NAME of every service, for HELLO_OK. */
int service_manager_hello_fields(struct service_manager *m, struct buf *b);
/* USAGE_REPLY's entries: SERVICE_NAME, ATTEMPT, CPU_USEC, MEMORY_BYTES per running attempt. */
int service_manager_put_usage(struct service_manager *m, struct buf *b);
void service_manager_disconnected(struct service_manager *m);
/* PAUSE (paused) and RESUME: restart delays stop, then go on with what they had left. */
void service_manager_pause(struct service_manager *m, bool paused);
/* The link has room again: watched attempts behind with their output send on. */
void service_manager_output_room(struct service_manager *m);
/* From the reaper; pids that are no attempt's main process are ignored. */
void service_manager_child_exited(struct service_manager *m, pid_t pid, int status);

/* SHUTDOWN: kill_all() SIGKILLs every attempt's cgroup at once; shutdown() then waits
 * (bounded) for them to empty and removes them. Both block. */
void service_manager_kill_all(struct service_manager *m);
void service_manager_shutdown(struct service_manager *m);
