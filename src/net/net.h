/* SPDX-License-Identifier: MIT */
#pragma once

/* A container workspace's network beyond "none" (DESIGN.md §8, docs/operations.md "Network"):
 *
 *   bridge      its own network namespace (the container's, made by the runtime; filled here
 *               before the container starts), a veth pair to the worker's bridge, one IPv4 address of the worker's range, the
 *               default route via the bridge, the worker's resolver in /etc/resolv.conf,
 *               outbound traffic masqueraded. It cannot reach the blocked classes (blocked.h:
 *               other workspaces, the worker's own addresses, its connected networks and
 *               gateways, link-local, private and the special-purpose ranges) unless the
 *               operator opens them. The worker's addresses and routes are read at start and
 *               again after each change (a netlink socket on the loop; a burst is one update).
 *   restricted  bridge, plus an egress policy (policy.h), default deny; domain rules are
 *               enforced by DNS pinning: the resolver answers allowed names only and puts the
 *               addresses it answered into the workspace's nftables sets for their TTL, or
 *               for the operator's egress_pin_min_ms when that is longer.
 *
 * The manager records each workspace's mode, address and policy (store: workspace_networks)
 * and hands them back here: nothing of this module needs the database. Every kernel object is
 * named from the workspace id and its address (host veth "sv<8 hex of the address>", nft
 * chain ws_<id>), so a record is all that teardown and reconcile need; the namespace and the
 * veth's peer end with the container. */

#include <jansson.h>
#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "basic/error.h"
#include "net/blocked.h"
#include "net/policy.h"

struct event_loop;
struct net;

enum net_mode {
	NET_NONE,
	NET_BRIDGE,
	NET_RESTRICTED,
	_NET_MODE_MAX,
};

const char *net_mode_to_string(enum net_mode m);
int net_mode_from_string(const char *s); /* enum net_mode or -EINVAL */

struct net_config {
	const char *root;   /* the controller's root (its lock file) */
	const char *bridge; /* the bridge's name, also our nft table's (default "station0") */
	const char *range;  /* IPv4 CIDR the workspaces' addresses come from; the first host
			     * address is the bridge's (the gateway and resolver) */
	const char *const *dns_upstreams; /* "a.b.c.d[:port]", NULL-terminated; NULL: the
					   * nameservers of /etc/resolv.conf */
	uint16_t dns_port;		  /* the resolver's port on the gateway (53) */
	uint16_t log_group;		  /* nflog group for denials */
	/* An address of an allowed answer stays pinned at least this long after the last allowed
	 * answer naming it (clients cache lookups longer than TTLs); 0: the TTL alone, at least
	 * 30 s. Rounded up to whole seconds, at most a day (nft.h's nft_pin_timeout). */
	uint64_t egress_pin_min_ms;
	uint32_t allow; /* NET_CLASS_BIT()s of the blocked classes the operator opened (blocked.h) */
	/* --workspace-proxy (adapter/proxy.h): its IPv4 address and port, opened exactly to
	 * bridge workspaces and, with proxy_restricted, restricted ones (nft_set_proxy); port 0:
	 * none */
	uint32_t proxy_address;
	uint16_t proxy_port;
	bool proxy_restricted;
};

/* A denial, for the daemon to log: what is "connection" (a packet the policy dropped; proto
 * "tcp", "udp", "icmp" or "ip", port 0 when none) or "dns" (a name the policy does not allow:
 * dest is the name). */
typedef void (*net_denied_fn)(void *userdata, const char *id, const char *what, const char *dest,
			      uint16_t port, const char *proto);

/* Sets up the worker's side (bridge, ip_forward, base table, resolver, denial log). Failure
 * leaves a net that is not ready: every create asking for bridge or restricted then fails
 * closed with its reason, and net_ready() names it. One controller per bridge (a lock under
 * /run). Returns -ENOMEM only. */
int net_new(struct event_loop *loop, const struct net_config *cfg, net_denied_fn on_denied,
	    void *userdata, struct net **ret);
/* Closes the resolver and log sockets; kernel objects stay (workspaces outlive the
 * controller). */
void net_free(struct net *n);

/* Appends {name, ok, message} checks (bridge, nftables, ip_forward, resolver); true when all
 * pass. */
bool net_ready(struct net *n, json_t *checks);
/* 0 when mode can be provided now; else why (-EHOSTDOWN, 503, with the missing piece). */
int net_check(struct net *n, enum net_mode mode, struct station_error *e);

struct net_workspace {
	const char *id;
	enum net_mode mode;		 /* NET_BRIDGE or NET_RESTRICTED */
	uint32_t address;		 /* host byte order */
	const struct net_policy *policy; /* restricted only */
};

/* The lowest address of the range that is neither the network, the gateway, the broadcast
 * address nor in used (n_used addresses). -EAGAIN when the range is full. */
int net_address_alloc(struct net *n, const uint32_t *used, size_t n_used, uint32_t *ret,
		      struct station_error *e);

/* Fills the network namespace of process pid (a container's init that the runtime created and
 * has not started: the namespace is the container's own) with w's links, after removing
 * whatever of w exists (so a stale network is made again): the veth pair (its peer "eth0"
 * inside), the address, the default route, the firewall chain, the resolver entry. A pid in
 * the controller's own namespace is refused. */
int net_workspace_up(struct net *n, const struct net_workspace *w, pid_t pid,
		     struct station_error *e);
/* Removes every object of the workspace; idempotent. */
void net_workspace_down(struct net *n, const char *id, uint32_t address);

/* net_workspace_up() and net_workspace_down() in two halves, for a worker thread beside the
 * loop: the kernel's objects (links, addresses, the firewall chain; safe on any thread, the
 * nftables context is locked), and what the resolver and the denial log know (the loop's, as
 * every other call here). make's failure removes what it made; net_workspace_adopt() then
 * makes the workspace known. */
int net_workspace_make(struct net *n, const struct net_workspace *w, pid_t pid,
		       struct station_error *e);
void net_workspace_unmake(struct net *n, const char *id, uint32_t address);
void net_workspace_forget(struct net *n, const char *id);
/* At controller start, for a workspace whose network is recorded: the resolver knows it again
 * (its kernel objects are left as they are: its container may be running in them). */
int net_workspace_adopt(struct net *n, const struct net_workspace *w);
/* At controller start, after every recorded workspace was adopted: removes the bridge ports and
 * firewall chains of ours that no recorded workspace holds. */
void net_reconcile(struct net *n);

/* "a.b.c.d" of a host byte order address. */
void net_address_string(uint32_t address, char buf[16]);
/* The resolver's address ("a.b.c.d") for the sandbox's /etc/resolv.conf. */
const char *net_nameserver(const struct net *n);
/* The name of the class (--network-allow) that blocks address (host byte order) for every
 * workspace, as the blocked set was last made; NULL when none does. */
const char *net_address_class(struct net *n, uint32_t address);

/* Replaces a restricted workspace's policy (new connections see it at once). */
int net_policy_replace(struct net *n, const char *id, uint32_t address,
		       const struct net_policy *policy, struct station_error *e);

struct net_counters {
	uint64_t allowed;     /* new connections accepted */
	uint64_t denied;      /* packets dropped by the policy (or the blocked ranges) */
	uint64_t dns_allowed; /* queries forwarded (since the controller started) */
	uint64_t dns_refused; /* queries answered NXDOMAIN (since the controller started) */
	/* Allowed queries answered SERVFAIL at the workspace's resolver bounds (its pending
	 * queries, its rate, its fair share of the table; since the controller started). */
	uint64_t dns_shed;
	/* Addresses of allowed answers pinned now, and those whose pin ended with no allowed
	 * answer renewing it (pins.h; since the controller started). */
	uint64_t pinned, pins_expired;
};
int net_workspace_counters(struct net *n, const char *id, struct net_counters *ret);
/* Every workspace's firewall counters (allowed: new connections accepted; denied: packets
 * dropped) in one request to the kernel, fn called once per counter; nothing when the network
 * has no firewall. */
typedef void (*net_counter_fn)(void *userdata, const char *id, bool denied, uint64_t packets);
int net_counters_each(struct net *n, net_counter_fn fn, void *userdata);
/* Hands every denial logged so far to the net_denied_fn, at once rather than when the event
 * loop next polls the log (a run's end reads what happened before it). */
void net_denials_drain(struct net *n);
