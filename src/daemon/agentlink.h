/* SPDX-License-Identifier: MIT */
#pragma once

/* One framed connection to a workspace's agent. Every frame from the agent is treated as
 * hostile: the payload cap is enforced and every field is checked before it reaches the
 * manager. Sends are queued and written as the socket allows. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store/store.h"

struct agentlink;
struct event_loop;

struct agentlink_ops {
	/* ids: every run the agent knows (running or with an unacknowledged result). */
	void (*hello)(void *userdata, uint64_t agent_pid, char **ids, size_t n_ids);
	void (*run_started)(void *userdata, const char *run_id, uint64_t started_at);
	void (*run_output)(void *userdata, const char *run_id, int stream, uint64_t offset,
			   const uint8_t *data, size_t n);
	/* result: id, status, exit_code, signal, oom_killed, truncated, reason, out[], started_at,
	 * ended_at, cpu_usec, peak_memory; borrowed for the call. The receiver acknowledges seq
	 * with agentlink_send_ack() once the result is stored. */
	void (*run_done)(void *userdata, uint64_t seq, const struct run_row *result);
	void (*run_error)(void *userdata, const char *run_id, const char *reason);
	/* The connection is gone (err < 0: protocol error or I/O failure, 0: EOF). The link must
	 * be freed by the receiver; nothing else is called afterwards. */
	void (*closed)(void *userdata, int err);
};

int agentlink_connect(struct event_loop *loop, const char *socket_path, const uint8_t *secret,
		      size_t secret_len, const struct agentlink_ops *ops, void *userdata,
		      struct agentlink **ret);
void agentlink_free(struct agentlink *l);

struct agentlink_run {
	const char *id;
	const char *command;
	const char *cwd;
	char *const *env; /* KEY=VALUE, NULL-terminated, may be NULL */
	const uint8_t *stdin_data;
	size_t stdin_len;
	uint64_t timeout_ms;
	uint64_t head_bytes;
	uint64_t tail_bytes;
	bool watch;
};

int agentlink_send_run_start(struct agentlink *l, const struct agentlink_run *run);
int agentlink_send_cancel(struct agentlink *l, const char *run_id);
int agentlink_send_watch(struct agentlink *l, const char *run_id, bool watch);
int agentlink_send_ack(struct agentlink *l, uint64_t seq);
int agentlink_send_shutdown(struct agentlink *l);
