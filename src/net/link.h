/* SPDX-License-Identifier: MIT */
#pragma once

/* Links, addresses, routes and network namespaces through rtnetlink (libmnl): no `ip`
 * process. Addresses are IPv4 in host byte order. Functions return -errno (the kernel's
 * netlink error where there is one). Everything here is idempotent where the comment says so,
 * so that a half-made workspace network can be made again or removed. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "net/blocked.h"

/* A persistent network namespace: a new one, bind-mounted at path (the file is made, mode
 * 0444; its directory must exist). The caller's own namespace is unchanged afterwards. A path
 * that already holds a namespace mount is left as it is (0). */
int netns_create(const char *path);
/* Unmounts (MNT_DETACH) and unlinks path; -ENOENT when nothing is there. */
int netns_remove(const char *path);
/* Opens the namespace at path (O_RDONLY | O_CLOEXEC), checking that it is a namespace file
 * (NSFS_MAGIC): a plain file there is -EINVAL. */
int netns_open(const char *path);
/* The network namespace of process pid (/proc/<pid>/ns/net), checked the same way. */
int netns_open_pid(pid_t pid);
/* socket(domain, type, protocol) made inside the namespace netns_fd (it lives there for good),
 * the calling thread back in its own namespace afterwards: the socket's fd, or -errno (a
 * failure to switch back is reported, the socket closed). */
int netns_socket(int netns_fd, int domain, int type, int protocol);

/* The bridge: made when missing (type bridge, no STP), addr/prefix on it (kept when there),
 * up. Idempotent. */
int link_bridge_ensure(const char *name, uint32_t addr, unsigned prefix);
/* A veth pair: host_name in the caller's namespace, a port of bridge, "isolated" (bridge port
 * isolation: an isolated port reaches only the bridge itself, never another isolated port)
 * unless isolated is false, up; its peer peer_name made directly in the namespace netns_fd.
 * -EEXIST when host_name exists. */
int link_veth_add(const char *host_name, const char *bridge, bool isolated, int netns_fd,
		  const char *peer_name);
/* Inside the namespace netns_fd: lo up; ifname gets addr/prefix and comes up; the default
 * route via gateway; IPv6 disabled on every interface (net.ipv6.conf.{all,default}.
 * disable_ipv6=1); ICMP redirects neither accepted nor sent. The caller's namespace is
 * unchanged afterwards. Idempotent. */
int link_netns_configure(int netns_fd, const char *ifname, uint32_t addr, unsigned prefix,
			 uint32_t gateway);
/* Only lo up in the namespace (what a "none" network has). */
int link_netns_loopback(int netns_fd);
/* Deletes the link (a veth takes its peer with it); -ENODEV when there is none. */
int link_delete(const char *name);
/* Names of the links whose master is bridge, into a NULL-terminated array (strv_free()). */
int link_bridge_ports(const char *bridge, char ***ret);
/* Whether the link exists. */
int link_exists(const char *name);

/* net.ipv4.ip_forward = 1 in the caller's namespace (idempotent). */
int sysctl_ip_forward_enable(void);

/* The worker's IPv4 side, from the kernel: its addresses (worker, /32 each), the destinations of
 * unicast routes without a gateway and of scope link in every routing table (connected; a
 * default one included: the caller decides) and the gateways of unicast routes (gateways,
 * multipath next hops included). -E2BIG past 4096 distinct entries in one list. */
int link_host_read(struct net_host *ret);
/* A non-blocking netlink socket told of every IPv4 address and route change (the caller reads
 * the whole view again), and the reading off of what it holds. */
int link_monitor_open(void);
void link_monitor_drain(int fd);
