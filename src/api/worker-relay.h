/* SPDX-License-Identifier: MIT */
#pragma once

/* A WebSocket to /v1/workers/NAME/v1/... relayed to worker NAME (docs/api.md, "Workers"). The
 * caller has checked the worker and the path; the handshake is the checked one of http.c.
 *
 * The opening handshake goes to the worker on the fleet's pool (libcurl, connect-only: http,
 * https and unix: alike) with the user's token as "Authorization: Bearer" (from the request's
 * Authorization header or its "bearer." subprotocol offer, never a token of this controller),
 * the client's Sec-WebSocket-Key, and its subprotocol offers but the bearer one. The worker's
 * 101 (its Sec-WebSocket-Accept checked) completes the client's upgrade; any other answer is
 * the client's answer, status and body (bounded). From the 101 on, bytes are relayed both ways
 * on the loop through two bounded buffers: a side that does not read stops the other side's
 * reading (back-pressure), never more memory. Either side closing, an error, the token's
 * revocation or the server stopping closes both. */

#include <stddef.h>

struct http_request;
struct fleet_worker;

/* Relays at once, across the controller (past it: 503). */
#define WORKER_RELAY_MAX 64u
/* Each direction's buffer. */
#define WORKER_RELAY_BUFFER (64u * 1024)

/* target: the path and query on the worker ("/v1/..."). Replies or suspends req. */
int worker_relay_start(struct http_request *req, const struct fleet_worker *wk, const char *target);
