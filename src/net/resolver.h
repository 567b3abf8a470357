/* SPDX-License-Identifier: MIT */
#pragma once

/* The workspaces' resolver, on the controller's event loop: UDP and TCP on the bridge's gateway
 * address, port 53. Each query is asked of decide() (which workspace sent it, from its source
 * address, and whether its name is allowed). A refused name gets NXDOMAIN; an AAAA question
 * gets an empty answer (workspaces have no IPv6); an allowed one is forwarded to an upstream
 * server (a new socket per query, a random id, the answer checked against the question asked),
 * and before its answer is relayed, answered() receives its A records and TTLs (to pin them in
 * the firewall). A query is never forwarded as the sandbox wrote it: the upstream gets a query
 * of our own for its one question (one carrying more gets FORMERR). Bounded: at most
 * RESOLVER_MAX_PENDING queries in flight, RESOLVER_TIMEOUT_MS each (then SERVFAIL), TCP
 * connections limited and timed out; per client address (a workspace) RESOLVER_CLIENT_PENDING
 * in flight and RESOLVER_CLIENT_RATE a second (burst RESOLVER_CLIENT_BURST), SERVFAIL beyond,
 * and a full table shared fairly (a client below an equal share takes the slot of the oldest
 * query of the client holding the most, answered SERVFAIL). */

#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>

#include "basic/error.h"
#include "net/dns.h"

#define RESOLVER_MAX_PENDING 256
#define RESOLVER_TIMEOUT_MS 5000
#define RESOLVER_MAX_UPSTREAMS 4
#define RESOLVER_MAX_TCP 32	   /* connections; more are closed when accepted */
#define RESOLVER_TCP_IDLE_MS 10000 /* a connection waiting on its client that long is closed */
/* Per workspace: an eighth of the table in flight, so eight flooding workspaces are needed
 * before the table is full (and even then the fair share holds); 50 forwarded queries a second
 * with a burst of 100 is ten times what a build tool's lookups need (npm, pip and git cache by
 * process; AAAA questions are answered here and cost nothing), and keeps one workspace at a
 * fifth of what the table drains at when the upstream answers within RESOLVER_TIMEOUT_MS. */
#define RESOLVER_CLIENT_PENDING 32
#define RESOLVER_CLIENT_RATE 50
#define RESOLVER_CLIENT_BURST 100

struct event_loop;
struct resolver;

enum resolver_verdict {
	RESOLVER_UNKNOWN, /* the source is no workspace: the query is dropped, no answer */
	RESOLVER_REFUSE,  /* NXDOMAIN, counted by the caller */
	RESOLVER_FORWARD,
};

struct resolver_ops {
	/* src: the sender's IPv4 address (host byte order). *ret_cookie is handed to answered(). */
	enum resolver_verdict (*decide)(void *userdata, uint32_t src, const struct dns_question *q,
					void **ret_cookie);
	/* Called before the upstream's answer is relayed to src. */
	void (*answered)(void *userdata, uint32_t src, void *cookie, const struct dns_answer *a);
	/* Optional: a query of src that decide() forwarded was answered SERVFAIL for the bounds of
	 * its client address (over its pending bound or rate, or its slot given to a client
	 * below its fair share). */
	void (*shed)(void *userdata, uint32_t src, void *cookie);
};

/* listen_addr:port (host byte order; port 53 in production; 0 picks a free port, the same for
 * UDP and TCP, see resolver_port()); upstreams: the servers forwarded to, tried in order on
 * timeout. */
int resolver_new(struct event_loop *loop, uint32_t listen_addr, uint16_t port,
		 const struct sockaddr_in *upstreams, size_t n_upstreams,
		 const struct resolver_ops *ops, void *userdata, struct resolver **ret,
		 struct station_error *e);
void resolver_free(struct resolver *r);

/* The port listened on (the one picked when resolver_new() was given 0). */
uint16_t resolver_port(const struct resolver *r);
/* The time each upstream is given (RESOLVER_TIMEOUT_MS unless set; tests make it short). */
void resolver_set_timeout_ms(struct resolver *r, unsigned ms);
/* The bounds per client address (RESOLVER_CLIENT_* unless set; tests change them). */
void resolver_set_client_limits(struct resolver *r, size_t pending, unsigned per_sec,
				unsigned burst);
/* Drops the queries in flight that decide() gave this cookie: answered() will not see it again
 * (call it before freeing what the cookie points to). */
void resolver_forget(struct resolver *r, const void *cookie);

/* Reads "nameserver" lines of a resolv.conf (IPv4 only, port 53) into ret (at most max). */
int resolver_upstreams_from_resolv_conf(const char *path, struct sockaddr_in *ret, size_t max,
					size_t *ret_n);
/* "a.b.c.d" or "a.b.c.d:port". */
int resolver_parse_upstream(const char *s, struct sockaddr_in *ret);
