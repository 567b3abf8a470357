/* SPDX-License-Identifier: MIT */
#pragma once

/* The preview listener (docs/api.md, "Previews"; DESIGN.md §15): an HTTP/1.1 reverse proxy
 * that serves exposed ports only. A request's Host names one exposure by its label (the only
 * label in front of the preview domain); its access is checked (a bearer token, a one-time
 * query parameter that becomes a host-only cookie, or none for a public exposure); the
 * station's own parameter, cookie and header are taken out; and the request goes to the port
 * inside the workspace's own network namespace over a socket the manager made there.
 *
 * Bodies stream both ways without being held whole; chunked bodies are checked chunk by chunk
 * and forwarded as they came. A 101 answer to an Upgrade request (WebSocket) turns the
 * connection into a tunnel. What can split one request into two on the way (a request with
 * both Content-Length and Transfer-Encoding, two Content-Lengths, a coding other than chunked,
 * folded or malformed header lines) is refused and the connection closed. Bounded: a request
 * head, connections per exposure, per workspace and in all, and idle time. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct event_loop;
struct manager;
struct preview_server;

struct preview_config {
	const char *domain;	  /* lower case; a Host is <label>.<domain>[:port] */
	bool https;		  /* the URLs are https (a reverse proxy in front): Secure cookies,
				      * X-Forwarded-Proto https */
	unsigned max_connections; /* client connections in all (0: 1024) */
	unsigned max_per_workspace; /* 0: 512 */
	unsigned max_per_exposure;  /* 0: 256 */
	uint64_t idle_timeout_ms; /* no byte either way for this long ends a connection (0: 5 min) */
	uint64_t head_timeout_ms; /* a request head must arrive whole within this (0: 10 s) */
	size_t max_head_bytes;	  /* a request head's size (0: 16 KiB) */
};

/* Serves the listening sockets fds (taken: closed by preview_server_free()). */
int preview_server_new(struct event_loop *loop, struct manager *m, const struct preview_config *cfg,
		       const int *fds, size_t n_fds, struct preview_server **ret);
void preview_server_free(struct preview_server *p);
/* Closes every connection of the exposure label now (its exposure ended). */
void preview_server_revoke(struct preview_server *p, const char *label);
