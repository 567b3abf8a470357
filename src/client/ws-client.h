/* SPDX-License-Identifier: MIT */
#pragma once

/* The library's WebSocket client connection, for every stream that speaks it (terminals,
 * followed output): the opening handshake over client_connect() with the bearer token, masked
 * frames out, and the RFC 6455 codec of src/proto/ws-codec.c (client role) for what comes in;
 * pings are answered and a close is echoed here. Not installed. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "client-internal.h"
#include "proto/ws-codec.h"

struct client_ws {
	struct station_client *c;
	int fd;
	struct ws_parser *parser;
	/* A whole data message (its data lives only during the call). 0 goes on; < 0 stops:
	 * client_ws_pump() returns it. */
	int (*on_message)(void *userdata, enum ws_opcode op, const void *data, size_t n);
	void *userdata;
	uint8_t *extra; /* bytes read past the handshake, fed to the parser first */
	size_t extra_len;
	bool closed;	 /* a close frame came */
	bool close_sent; /* ours went out */
	uint16_t close_code;
	char close_reason[WS_CONTROL_MAX];
	uint64_t last_input; /* client_ws_now_ms() when bytes last came */
};

/* CLOCK_MONOTONIC in milliseconds, as last_input counts it. */
uint64_t client_ws_now_ms(void);

/* Connects and upgrades GET path (its answer must begin within client_answer_ms() and a body
 * of a refusal must not stall for the answer deadline: -ETIMEDOUT naming the server); max_message bounds one message from the server (a bigger
 * one is a protocol error, decided from its header). A refused upgrade is the API error its
 * body carries (404 -ENOENT, 401 -EACCES, …). Errors are recorded on c. */
int client_ws_open(struct station_client *c, const char *path, uint64_t max_message,
		   struct client_ws **ret);

/* Sends a close frame (code, reason) unless one went out, and frees everything. NULL is fine. */
void client_ws_free(struct client_ws *w, uint16_t code, const char *reason);

/* One frame, masked as a client must. -EPIPE once our close went out. */
int client_ws_send(struct client_ws *w, enum ws_opcode op, const void *data, size_t n);

/* Reads once into buf (size bytes) and feeds what came to the parser; the bytes read past the
 * handshake go first. timeout_ms: how long to wait for bytes (0: not at all, < 0: forever).
 * Returns 1 when the stream is over (a close frame came: closed is set; or the server hung up),
 * 0 when it goes on (what came was taken, or nothing came in time), -EINTR when a signal
 * interrupted the wait (only with timeout_ms != 0), -EPROTO when the server
 * broke the protocol (a close with the parser's code is sent; the reason is in
 * client_ws_protocol_error()), what on_message returned, or -errno of recv(). */
int client_ws_pump(struct client_ws *w, void *buf, size_t size, int timeout_ms);

/* After -EPROTO from client_ws_pump(): what the server got wrong ("message too big", …). */
const char *client_ws_protocol_error(const struct client_ws *w);
