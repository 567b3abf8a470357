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

/* A SERVICE_STATE from the agent, checked; strings borrowed for the call. */
struct agentlink_service_state {
	const char *name;
	const char *id;
	enum service_state state;
	uint64_t restart_count;
	uint64_t attempt; /* the newest attempt's number, 0 before the first */
	uint64_t pid;	  /* 0 unless an attempt's main process runs */
	uint64_t started_at;
	uint64_t next_restart_at;
	bool stopping;
	const char *reason; /* NULL when none */
};

/* A TERM_EXIT from the agent, checked; strings borrowed for the call. */
struct agentlink_terminal_exit {
	const char *id;
	int status;	    /* RUN_EXITED, RUN_KILLED or RUN_FAILED_TO_START */
	int64_t exit_code;  /* -1 unless exited */
	int64_t signal;	    /* 0 unless killed */
	bool forced;	    /* ended by TERM_CLOSE */
	const char *reason; /* failed to start: why; else NULL */
	uint64_t started_at;
	uint64_t ended_at;
	uint64_t output_bytes;
};

/* A CRED_REQUEST from the agent (what git asked with), each field within its bound; nothing
 * else checked yet. Strings borrowed for the call. */
struct agentlink_cred_request {
	uint64_t request;
	const char *protocol;
	const char *host;
	const char *path;     /* NULL when none */
	const char *username; /* NULL when none */
};

/* One entry of a USAGE_REPLY, checked: a valid id, fields in the protocol's order. Strings
 * borrowed for the call. */
struct agentlink_usage {
	const char *run_id;  /* a run's, or NULL */
	const char *service; /* a service's name, or NULL */
	uint64_t attempt;    /* with service */
	uint64_t cpu_usec;
	uint64_t memory_bytes;
};

/* A USAGE_REPLY with more entries closes the link (an agent has at most 256 runs and 32
 * services). */
#define AGENTLINK_MAX_USAGE 512

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
	/* Services (agentlink-service.c); each may be NULL. service_hello comes just before hello
	 * with the name of every service the agent knows. service_state and service_attempt are
	 * sequenced: the receiver acknowledges seq once stored. */
	void (*service_hello)(void *userdata, char **names, size_t n_names);
	void (*service_state)(void *userdata, uint64_t seq,
			      const struct agentlink_service_state *state);
	void (*service_attempt)(void *userdata, uint64_t seq, const char *name,
				const struct service_attempt_row *attempt);
	void (*service_output)(void *userdata, const char *name, uint64_t attempt, int stream,
			       uint64_t offset, const uint8_t *data, size_t n);
	void (*service_error)(void *userdata, const char *name, const char *reason);
	/* SERVICE_PROGRESS: the running attempt's output totals so far, as the agent claims. */
	void (*service_progress)(void *userdata, const char *name, uint64_t attempt,
				 uint64_t stdout_bytes, uint64_t stderr_bytes);
	/* Terminals (agentlink-terminal.c); each may be NULL. terminal_hello comes right after
	 * hello with every terminal the agent knows (live, or ended with an unacknowledged
	 * TERM_EXIT). terminal_exit is sequenced: the receiver acknowledges seq once stored. */
	void (*terminal_hello)(void *userdata, char **ids, size_t n_ids);
	void (*terminal_opened)(void *userdata, const char *id, uint64_t pid, uint64_t started_at,
				const char *command);
	void (*terminal_output)(void *userdata, const char *id, uint64_t offset,
				const uint8_t *data, size_t n);
	void (*terminal_replay)(void *userdata, const char *id, uint64_t request, uint64_t offset,
				const uint8_t *data, size_t n);
	void (*terminal_exit)(void *userdata, uint64_t seq,
			      const struct agentlink_terminal_exit *x);
	/* Credentials (agentlink-cred.c); may be NULL (the request is then never answered, and
	 * the agent's client times out). Answer with agentlink_send_cred_reply(). */
	void (*cred_request)(void *userdata, const struct agentlink_cred_request *req);
	/* Resource use (agentlink-usage.c); may be NULL. request: the USAGE_REQUEST's number, as
	 * the agent echoed it (any number: it may not match a request). */
	void (*usage)(void *userdata, uint64_t request, const struct agentlink_usage *v, size_t n);
	/* PAUSED (agentlink-usage.c); may be NULL. request: as the agent echoed it. */
	void (*paused)(void *userdata, uint64_t request);
	/* CHECKPOINT_READY (agentlink-usage.c); may be NULL. reason: NULL when the agent is
	 * ready (it closes the connection next), else why it refused. */
	void (*checkpoint_ready)(void *userdata, uint64_t request, const char *reason);
};

int agentlink_connect(struct event_loop *loop, const char *socket_path, const uint8_t *secret,
		      size_t secret_len, const struct agentlink_ops *ops, void *userdata,
		      struct agentlink **ret);
/* agentlink_connect() that asks peer_check(fd, userdata) about the socket's listener before
 * HELLO (and the secret) is sent: < 0 refuses it. */
int agentlink_connect_checked(struct event_loop *loop, const char *socket_path,
			      int (*peer_check)(int fd, void *userdata), const uint8_t *secret,
			      size_t secret_len, const struct agentlink_ops *ops, void *userdata,
			      struct agentlink **ret);
void agentlink_free(struct agentlink *l);

/* Blocks (at most timeout_ms) until the agent's HELLO_OK has been handled: for a freshly
 * started agent, which answers at once, so a new workspace is ready when it is reported.
 * Frames that arrive meanwhile are dispatched as usual. */
int agentlink_wait_hello(struct agentlink *l, int timeout_ms);
/* Whether the agent's HELLO_OK named feature (AGENT_FEATURE_*); false before it. */
bool agentlink_has_feature(const struct agentlink *l, uint64_t feature);

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

/* SERVICE_START (agentlink-service.c). */
struct agentlink_service {
	const char *name;
	const char *id;
	const char *command;
	const char *cwd;
	char *const *env; /* KEY=VALUE, NULL-terminated, may be NULL */
	int policy;	  /* enum service_policy */
	uint64_t max_restarts;
	uint64_t delay_ms;
	uint64_t backoff_permille;
	uint64_t max_delay_ms;
	uint64_t reset_after_ms;
	int stop_signal;
	uint64_t stop_timeout_ms;
	uint64_t head_bytes;
	uint64_t tail_bytes;
	uint64_t first_attempt;
};

int agentlink_send_service_start(struct agentlink *l, const struct agentlink_service *svc);
/* SERVICE_STOP, SERVICE_RESTART, SERVICE_REMOVE (watch < 0) or SERVICE_WATCH (watch 0/1). */
int agentlink_send_service(struct agentlink *l, uint16_t type, const char *name, int watch);
/* SERVICE_PROGRESS_WATCH: only to an agent with AGENT_FEATURE_SERVICE_PROGRESS (-EOPNOTSUPP). */
int agentlink_send_progress_watch(struct agentlink *l, bool on);

/* Terminals (agentlink-terminal.c). */
struct agentlink_terminal {
	const char *id;
	const char *command; /* NULL: the user's login shell */
	const char *cwd;
	char *const *env; /* KEY=VALUE, NULL-terminated, may be NULL */
	uint64_t cols;
	uint64_t rows;
	uint64_t scrollback_bytes;
};

int agentlink_send_terminal_open(struct agentlink *l, const struct agentlink_terminal *t);
/* In TERM_INPUT frames of at most PROTO_MAX_TERM_INPUT bytes. */
int agentlink_send_terminal_input(struct agentlink *l, const char *id, const void *data, size_t n);
int agentlink_send_terminal_resize(struct agentlink *l, const char *id, uint64_t cols,
				   uint64_t rows);
/* watch: the agent answers TERM_REPLAY with request, then sends live output; !watch: stop. */
int agentlink_send_terminal_attach(struct agentlink *l, const char *id, bool watch,
				   uint64_t request);
int agentlink_send_terminal_close(struct agentlink *l, const char *id);

/* CRED_REPLY to request: username and password when password is set, else refused with reason.
 * Every copy the link makes of the frame is wiped once sent. */
int agentlink_send_cred_reply(struct agentlink *l, uint64_t request, const char *username,
			      const char *password, const char *reason);

/* USAGE_REQUEST (agentlink-usage.c): the agent answers with one USAGE_REPLY carrying request. */
int agentlink_send_usage_request(struct agentlink *l, uint64_t request);

/* PAUSE (request: echoed in PAUSED) and RESUME; only to an agent with AGENT_FEATURE_PAUSE
 * (-EOPNOTSUPP). */
int agentlink_send_pause(struct agentlink *l, uint64_t request);
int agentlink_send_resume(struct agentlink *l);

/* CHECKPOINT (request: echoed in CHECKPOINT_READY; run_dir: the run directory as the
 * container sees it); only to an agent with AGENT_FEATURE_CHECKPOINT (-EOPNOTSUPP). */
int agentlink_send_checkpoint(struct agentlink *l, uint64_t request, const char *run_dir);
