/* SPDX-License-Identifier: MIT */
#pragma once

/* WebSocket, RFC 6455, server side: terminals and live output (docs/api.md "WebSocket").
 *
 * The codec (ws_parser, ws_frame_header(), ws_accept_key(), …) is in proto/ws-codec.h. The
 * connection (ws_conn) runs the protocol on a socket handed over after the HTTP upgrade (http.c does the
 * handshake and the libmicrohttpd side): non-blocking reads and writes on our event loop, the
 * closing handshake, pong replies, our own periodic ping, an idle timeout, and a bounded
 * outbound queue. Nothing here logs above debug.
 *
 * Backpressure: a send that would take the outbound queue over its cap (ws_limits.
 * max_queue_bytes) is refused with -EAGAIN and queues nothing; once the queue has drained to
 * half the cap, ops->drain() is called. A producer that must never wait (a PTY, a run's output)
 * drops what is refused, counts it, and in drain() first sends a small text message such as
 * {"type":"gap","bytes":N}, then carries on: the client sees a marked gap, memory stays bounded
 * and the producer is never blocked. ws_send_room() tells beforehand what would fit. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "proto/ws-codec.h"

struct event_loop;

struct ws_limits {
	uint64_t max_frame_bytes;   /* inbound frame payload: 1 MiB */
	uint64_t max_message_bytes; /* inbound message, defragmented: 1 MiB */
	size_t max_queue_bytes;	    /* outbound, queued frames: 1 MiB */
	uint64_t ping_interval_ms;  /* a ping after this long without input: 30 s */
	uint64_t idle_timeout_ms;   /* closed (1001) after this long without input: 75 s */
	uint64_t close_timeout_ms;  /* the closing handshake, at most: 5 s */
};
/* Fills the zero fields of l with the defaults. */
void ws_limits_defaults(struct ws_limits *l);

struct ws_conn;

/* Callbacks run on the loop, never from inside a ws_*() call. */
struct ws_conn_ops {
	/* A whole text or binary message from the client; dropped once closing. */
	void (*message)(void *userdata, struct ws_conn *c, enum ws_opcode op, const void *data,
			size_t n);
	/* Optional: after a send was refused with -EAGAIN, the queue is down to half its cap. */
	void (*drain)(void *userdata, struct ws_conn *c);
	/* Exactly once, last: the connection is over and c is freed after the call returns. code
	 * and reason: the client's close frame when the client closed first (1005 without a
	 * code); ours when we did (ws_close(), a protocol error, the idle timeout, shutdown); 1006
	 * when the connection ended without a close frame (or never opened). */
	void (*closed)(void *userdata, struct ws_conn *c, uint16_t code, const char *reason);
};

/* Called once when the connection is done with the socket handed to ws_conn_attach(); the fd
 * must then be closed by whoever owns it (libmicrohttpd: MHD_UPGRADE_ACTION_CLOSE). */
typedef void (*ws_release_fn)(void *userdata, int fd);

/* A connection without a socket yet: sends queue (up to the cap) until ws_conn_attach().
 * limits NULL: the defaults. */
int ws_conn_new(struct event_loop *loop, const struct ws_limits *limits,
		const struct ws_conn_ops *ops, void *userdata, struct ws_conn **ret);
/* Frees c without calling closed() (releasing its socket if it has one): for its creator's
 * failure path only, e.g. when the upgrade response could not be queued. NULL is fine. */
void ws_conn_free(struct ws_conn *c);
/* Hands over the upgraded socket (made non-blocking here) and the bytes the HTTP layer read
 * past the request (extra, copied). The connection owns fd until it calls release (exactly
 * once, from the loop or from ws_conn_shutdown()). Fails only for lack of memory or loop
 * sources; then nothing is taken and the caller still ends c (ws_conn_abort()). */
int ws_conn_attach(struct ws_conn *c, int fd, const void *extra, size_t n, ws_release_fn release,
		   void *release_data);
/* Ends c without a closing handshake (e.g. the upgrade never happened): closed(code, reason)
 * follows from the loop. */
void ws_conn_abort(struct ws_conn *c, uint16_t code, const char *reason);
/* For server shutdown: tries once to send a close frame (1001) without blocking, releases the
 * socket, calls closed() and frees c, all before returning. */
void ws_conn_shutdown(struct ws_conn *c);

/* Each queues one message as one frame. 0: queued (and written as far as the socket takes it).
 * -EAGAIN: over the queue cap, nothing queued, drain() will follow. -EMSGSIZE: larger than the
 * cap could ever take. -EPIPE: closing or closed. -EINVAL: text that is not UTF-8. */
int ws_send_binary(struct ws_conn *c, const void *data, size_t n);
int ws_send_text(struct ws_conn *c, const char *data, size_t n);
/* One binary message gathered from several pieces (a prefix and the data, say). */
int ws_send_binaryv(struct ws_conn *c, const struct iovec *iov, size_t n_iov);
/* How many payload bytes one message may have to be queued now (0 when closing). */
size_t ws_send_room(const struct ws_conn *c);
/* Starts the closing handshake after whatever is queued: a close frame with code (a valid
 * one; 0 for none) and reason, then waits for the client's (close_timeout_ms at most).
 * Messages from the client are dropped from now on; closed() follows. -EALREADY when
 * closing. */
int ws_close(struct ws_conn *c, uint16_t code, const char *reason);
/* Another cap for this connection's outbound queue (0: unchanged), e.g. a larger one for a
 * stream that comes in fast bursts. Memory is taken only while frames wait in the queue. */
void ws_conn_set_max_queue(struct ws_conn *c, size_t bytes);
/* Bytes queued and not yet written. */
size_t ws_queued_bytes(const struct ws_conn *c);
