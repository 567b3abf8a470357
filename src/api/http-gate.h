/* SPDX-License-Identifier: MIT */
#pragma once

/* The door in front of libmicrohttpd: accepts on the listening socket itself and hands a
 * connection to the server only while the connection table has room. Past the limit the new
 * connection is answered "503 Service Unavailable" with Retry-After and a JSON error body at
 * once and closed: never left waiting in the listen backlog (libmicrohttpd's own limit closes
 * connections without a word). The same answer when the controller is out of open files. */

#include <sys/socket.h>

#include "api/http.h"

struct event_loop;
struct http_gate;

/* Gives the server a connection (it owns fd from here on, also on failure). */
typedef void (*http_gate_admit_fn)(void *userdata, int fd, const struct sockaddr *sa,
				   socklen_t len);

/* Takes listen_fd (closed by http_gate_free(); on failure untouched). conns must outlive it. */
int http_gate_new(struct event_loop *loop, int listen_fd, struct http_connections *conns,
		  http_gate_admit_fn admit, void *userdata, struct http_gate **ret);
/* Closes the listening socket and every connection still being refused. NULL is fine. */
void http_gate_free(struct http_gate *g);
