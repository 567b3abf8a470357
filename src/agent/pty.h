/* SPDX-License-Identifier: MIT */
#pragma once

/* Terminals: one PTY session each, from TERM_OPEN to TERM_EXIT (docs/agent-protocol.md,
 * "Terminals"). The terminal manager owns every terminal, its PTY master, its child cgroup and
 * its scrollback ring. The command (or the user's login shell) runs in a new session with the
 * PTY as its controlling terminal. Output is drained continuously into the ring and, while the
 * controller watches, forwarded as TERM_OUTPUT; a terminal keeps running without a controller.
 *
 * The scrollback ring is the pure part, apart so that it is tested without processes. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "agent/channel.h"
#include "agent/child.h"
#include "event/event.h"
#include "proto/frame.h"

#define PTY_DEFAULT_SCROLLBACK (256u * 1024)
#define PTY_MAX_INPUT_QUEUE (256u * 1024) /* input not yet taken by the PTY, per terminal */
#define PTY_DEFAULT_TERM "TERM=xterm-256color"

/* ---- the scrollback ring ------------------------------------------------------------------ */

/* The last `cap` bytes of a stream and the count of every byte. All memory is allocated by
 * pty_ring_init(); appending never allocates. */
struct pty_ring {
	uint8_t *mem;
	size_t cap;
	size_t len;  /* bytes kept, <= cap */
	size_t next; /* where the next byte goes; the oldest kept byte once full */
	uint64_t total;
};

/* cap > 0; -ENOMEM or 0. */
int pty_ring_init(struct pty_ring *r, size_t cap);
void pty_ring_done(struct pty_ring *r);
void pty_ring_append(struct pty_ring *r, const void *data, size_t n);
/* Stream offset of the oldest byte kept. */
uint64_t pty_ring_start(const struct pty_ring *r);
/* Copies the kept bytes from stream offset `from` (raised to the oldest kept one) into out
 * (room for max bytes), oldest first. Returns how many were copied; *ret_offset is the stream
 * offset of the first. */
size_t pty_ring_read(const struct pty_ring *r, uint64_t from, void *out, size_t max,
		     uint64_t *ret_offset);

/* ---- the terminal manager ----------------------------------------------------------------- */

struct term_manager;

/* config as for runs (child.h): the same cgroup, environment, home, workdir and user. */
int term_manager_new(struct event_loop *loop, struct channel *channel,
		     const struct child_config *config, struct term_manager **ret);
/* Frees every terminal without reporting it and without touching its processes. */
void term_manager_free(struct term_manager *m);

/* TERM_OPEN, _INPUT, _RESIZE, _ATTACH, _CLOSE. < 0 for a frame the controller should not have
 * sent: the connection is closed. */
int term_manager_message(struct term_manager *m, const struct frame *f);
/* TERM_ID of every live terminal and of every ended one whose TERM_EXIT awaits its ACK. */
int term_manager_hello_fields(struct term_manager *m, struct buf *b);
/* The controller went away: nobody watches any more. */
void term_manager_disconnected(struct term_manager *m);
/* From the reaper; pids that are no terminal's main process are ignored. */
void term_manager_child_exited(struct term_manager *m, pid_t pid, int status);
/* SHUTDOWN: SIGKILLs every terminal's cgroup (does not wait: the runs' shutdown reaps). */
void term_manager_kill_all(struct term_manager *m);

/* The login shell of uid from passwd_path (an /etc/passwd), when it names an executable
 * file other than nologin or false; else "/bin/sh". malloc'd, NULL when out of memory. */
char *pty_login_shell(const char *passwd_path, uid_t uid);
