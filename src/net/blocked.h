/* SPDX-License-Identifier: MIT */
#pragma once

/* What a workspace may not reach unless the operator opens it (--network-allow CLASS,...), by
 * class (docs/operations.md "Network"):
 *
 *   worker         the worker's own addresses (read from the kernel)
 *   gateways       the gateways of the worker's routes (read from the kernel)
 *   connected      the networks the worker is directly connected to: routes without a gateway
 *                  in any routing table, but a default one and the workspaces' own range
 *   workspaces     the workspaces' range
 *   private        10/8, 172.16/12, 192.168/16 (RFC 1918)
 *   link-local     169.254/16 (cloud metadata)
 *   and the IANA special-purpose ranges that are not globally reachable (RFC 6890 registry):
 *   shared 100.64/10, documentation 192.0.2/24 198.51.100/24 203.0.113/24, benchmarking
 *   198.18/15, 6to4-relay 192.88.99/24, reserved 240/4 (255.255.255.255 with it),
 *   this-network 0/8, loopback 127/8, multicast 224/4, ietf-protocol 192.0.0/24 (but its
 *   globally reachable 192.0.0.9 and 192.0.0.10).
 *
 * Classes overlap (a gateway lies in a connected network, which may lie in a private range):
 * the more specific decides. In this order, each opened class is cut out of what is blocked so
 * far and each closed one added: the fixed ranges, connected, workspaces, gateways, worker. So
 * `connected` opens the worker's networks though they are private, and the gateway and the
 * worker's address inside them stay closed unless opened too. */

#include <stddef.h>
#include <stdint.h>

enum net_class {
	NET_CLASS_WORKER,
	NET_CLASS_GATEWAYS,
	NET_CLASS_CONNECTED,
	NET_CLASS_WORKSPACES,
	NET_CLASS_PRIVATE,
	NET_CLASS_LINK_LOCAL,
	NET_CLASS_SHARED,
	NET_CLASS_DOCUMENTATION,
	NET_CLASS_BENCHMARKING,
	NET_CLASS_6TO4_RELAY,
	NET_CLASS_RESERVED,
	NET_CLASS_THIS_NETWORK,
	NET_CLASS_LOOPBACK,
	NET_CLASS_MULTICAST,
	NET_CLASS_IETF_PROTOCOL,
	_NET_CLASS_MAX,
};

#define NET_CLASS_BIT(c) (UINT32_C(1) << (c))
/* The classes that are the worker's own or lead into it: only the operator opens them. A
 * restricted workspace's policy is its tenant's, and its cidr rules open what else is blocked
 * for that workspace alone, never these (a tenant naming 169.254.169.254 or the worker's LAN
 * would otherwise reach the worker's credentials and neighbours). */
#define NET_CLASSES_FENCED                                                                         \
	(NET_CLASS_BIT(NET_CLASS_WORKER) | NET_CLASS_BIT(NET_CLASS_GATEWAYS) |                     \
	 NET_CLASS_BIT(NET_CLASS_CONNECTED) | NET_CLASS_BIT(NET_CLASS_WORKSPACES) |                \
	 NET_CLASS_BIT(NET_CLASS_LINK_LOCAL))

const char *net_class_to_string(enum net_class c);
int net_class_from_string(const char *s); /* enum net_class or -EINVAL */
/* "worker, gateways, ...": every name, for messages. */
const char *net_class_names(void);

struct net_cidr {
	uint32_t addr; /* host byte order, no host bits set */
	unsigned prefix;
};

struct net_interval {
	uint32_t lo, hi; /* inclusive */
};

/* What the kernel says of the worker (link_host_read()). */
struct net_host {
	struct net_cidr *worker, *connected, *gateways;
	size_t n_worker, n_connected, n_gateways;
};
void net_host_done(struct net_host *h);

/* The blocked addresses as sorted, disjoint, non-adjacent intervals (what an nft interval set
 * takes): every class whose bit is not in allow, host the kernel's part (NULL: none),
 * workspaces the workspaces' range. *ret is malloc'ed (NULL when empty). -ENOMEM only. */
int net_blocked_compute(uint32_t allow, struct net_cidr workspaces, const struct net_host *host,
			struct net_interval **ret, size_t *ret_n);
/* The class that blocks addr (the most specific holding it, as net_blocked_compute() decides),
 * or -ENOENT when none does (no class holds it, or the one deciding is open); -ENOMEM. */
int net_blocked_class(uint32_t allow, struct net_cidr workspaces, const struct net_host *host,
		      uint32_t addr);
