/* SPDX-License-Identifier: MIT */
#pragma once

/* The TCP sockets listening in a network namespace, from the kernel (NETLINK_SOCK_DIAG,
 * inet_diag, IPv4 and IPv6): what GET /v1/workspaces/{id}/ports shows as "listening". Nothing
 * here reads a file; the namespace's own processes cannot shape what is read beyond the sockets
 * they open, and at most LISTENING_MAX are kept. */

#include <stddef.h>
#include <stdint.h>

#define LISTENING_MAX 1024

struct listening_socket {
	uint16_t port;
	int family;	  /* AF_INET or AF_INET6 */
	char address[46]; /* the bound address, printed ("0.0.0.0", "::1") */
	uint64_t inode;	  /* the socket's inode: "socket:[inode]" in /proc/<pid>/fd */
	uint32_t uid;
};

/* Fills ret (room for max) with the listening TCP sockets of the namespace netns_fd, IPv4
 * first, each family by port as the kernel lists them; the count, or -errno. More than max:
 * the first max (the count is max). */
int listening_read(int netns_fd, struct listening_socket *ret, size_t max);
