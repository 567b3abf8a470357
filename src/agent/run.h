/* SPDX-License-Identifier: MIT */
#pragma once

/* Runs: one `/bin/sh -c COMMAND` each, from RUN_START to RUN_DONE (docs/agent-protocol.md,
 * "Runs"). The run manager owns every live run, its pipes, timers and run cgroup; it reports
 * through the channel and learns about exits from the agent's reaper. */

#include <stdbool.h>
#include <stddef.h>
#include <sys/resource.h>
#include <sys/types.h>

#include "agent/channel.h"
#include "agent/child.h"
#include "cgroup/cgroup.h"
#include "event/event.h"
#include "proto/frame.h"

#define RUN_MAX_LIVE 256

struct run_manager;

/* The config is copied (its env array is borrowed). */
int run_manager_new(struct event_loop *loop, struct channel *channel,
		    const struct child_config *config, struct run_manager **ret);
/* Frees every run without reporting it and without touching its processes. */
void run_manager_free(struct run_manager *m);

/* RUN_START, RUN_CANCEL, RUN_WATCH. < 0 for a frame the controller should not have sent (bad or
 * missing fields, unknown type): the connection is closed. */
int run_manager_message(struct run_manager *m, const struct frame *f);
/* RUN_ID of every live run, for HELLO_OK. */
int run_manager_hello_fields(struct run_manager *m, struct buf *b);
/* USAGE_REPLY's entries: RUN_ID, CPU_USEC, MEMORY_BYTES per running run. */
int run_manager_put_usage(struct run_manager *m, struct buf *b);
/* The controller went away: watches end with the connection. */
void run_manager_disconnected(struct run_manager *m);
/* PAUSE (paused) and RESUME: run deadlines stop, then go on pushed back by the time paused. */
void run_manager_pause(struct run_manager *m, bool paused);
/* The link has room again: watched runs behind with their output send on. */
void run_manager_output_room(struct run_manager *m);

/* From the reaper: pid has been waited for. Pids that are no run's main process are ignored. */
void run_manager_child_exited(struct run_manager *m, pid_t pid, int status,
			      const struct rusage *ru);

/* SHUTDOWN: kills every run, waits for them (bounded, 5 s), removes the run cgroups. Blocks. */
void run_manager_shutdown(struct run_manager *m);
