/* SPDX-License-Identifier: MIT */
#pragma once

/* The agent's side of the controller connection (docs/agent-protocol.md, "Connection").
 *
 * Accepts on the listening socket for the agent's whole life. A connection must authenticate
 * with HELLO as its first frame; the newest authenticated connection is the one the agent talks
 * to and replaces any earlier one. A connection whose first frame is FILE_OPEN (file-proto.h)
 * is checked the same way and handed over whole to ops->file_session. RUN_DONE frames are kept, in sequence order, until ACKed and
 * re-sent after every HELLO_OK. Everything else is sent only while a controller is connected. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "event/event.h"
#include "proto/frame.h"

/* Above this many unsent bytes no output frame is added: a run's or service's output waits
 * for room in what its pipes keep (child.c), a terminal's is dropped (a gap in its offsets). */
#define CHANNEL_MAX_UNSENT (4u * 1024 * 1024)

struct channel;

struct channel_ops {
	/* An authenticated frame other than HELLO and ACK. < 0 closes the connection. */
	int (*message)(struct channel *c, const struct frame *f, void *userdata);
	/* Appends the HELLO_OK fields that describe the agent's runs (RUN_ID*). */
	int (*hello_fields)(struct channel *c, struct buf *b, void *userdata);
	/* The authenticated connection's queue, over CHANNEL_MAX_UNSENT before, went down to it or
	 * below: output that waited for room fits again. Never called from inside a channel call
	 * that builds a frame. May be NULL. */
	void (*drained)(struct channel *c, void *userdata);
	/* The authenticated connection went away (closed, failed or replaced). */
	void (*disconnected)(struct channel *c, void *userdata);
	/* A new connection's first frame was FILE_OPEN with the right secret and version: fd
	 * (taken, non-blocking) and the frame, with rest the bytes that came after it. The channel
	 * has forgotten the connection. NULL: FILE_OPEN closes the connection. */
	void (*file_session)(struct channel *c, int fd, const struct frame *f, const uint8_t *rest,
			     size_t rest_len, void *userdata);
};

int channel_new(struct event_loop *loop, int listen_fd, const void *secret, size_t secret_len,
		const struct channel_ops *ops, void *userdata, struct channel **ret);
void channel_free(struct channel *c);
/* Listens on listen_fd (taken) in place of the listener so far, which is closed; every
 * connection is closed, the authenticated one once what is queued on it is sent. */
int channel_replace_listener(struct channel *c, int listen_fd);
/* Wipes the secret (in a forked child, which must not keep it). */
void channel_forget_secret(struct channel *c);

bool channel_connected(const struct channel *c);
/* A controller is connected and its queue has room for droppable output. */
bool channel_output_ok(const struct channel *c);

/* Builds a frame in place on the connection's output queue:
 *	r = channel_begin(c, MSG_X, &b, &start);
 *	if (r < 0) return r;
 *	r = frame_put_...(b, ...);
 *	return channel_end(c, start, r);
 * channel_begin() returns -ENOTCONN without a controller. channel_end() drops the partial frame
 * when r < 0 (and returns r), else finishes it and starts sending. */
int channel_begin(struct channel *c, uint16_t type, struct buf **ret_buf, size_t *ret_start);
int channel_end(struct channel *c, size_t start, int r);
/* channel_end() for a frame whose last field is tag with n bytes of data: with nothing else
 * waiting to be sent, the data goes from where it is (header and data in one sendmsg) and only
 * what the socket did not take is copied into the queue. */
int channel_end_with_data(struct channel *c, size_t start, int r, uint16_t tag, const void *data,
			  size_t n);

/* ERROR with tag (RUN_ID, SERVICE_NAME; 0: none) = key unless key is NULL, and REASON. */
int channel_send_error(struct channel *c, uint16_t tag, const char *key, const char *reason);

/* RUN_DONE: channel_next_seq() gives the frame's seq; channel_submit_done() takes the finished
 * frame (*frame is emptied), keeps it until ACK and sends it when a controller is connected. */
uint64_t channel_next_seq(struct channel *c);
int channel_submit_done(struct channel *c, uint64_t seq, const char *run_id, struct buf *frame);
/* Whether an unacknowledged RUN_DONE for run_id is held. */
bool channel_done_pending(const struct channel *c, const char *run_id);

/* Any sequenced frame kept until ACK like RUN_DONE (service states and attempt results): type
 * and key (a service name) let later calls find it; only RUN_DONE keys are listed in HELLO_OK
 * as RUN_ID. */
int channel_submit_held(struct channel *c, uint64_t seq, uint16_t type, const char *key,
			struct buf *frame);
/* Forgets every held frame of this type and key (superseded by a newer one). */
void channel_drop_held(struct channel *c, uint16_t type, const char *key);
/* Keeps the newest `keep` held frames of this type and key as they are and passes every older
 * one to strip(), which rewrites the frame in place (e.g. without its output). */
void channel_trim_held(struct channel *c, uint16_t type, const char *key, size_t keep,
		       int (*strip)(struct buf *frame));
/* Whether a held frame of this type and key awaits its ACK. */
bool channel_held_pending(const struct channel *c, uint16_t type, const char *key);
