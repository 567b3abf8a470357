/* SPDX-License-Identifier: MIT */
/* Listening TCP sockets of a namespace through inet_diag: one dump request per family on a
 * NETLINK_SOCK_DIAG socket made inside the namespace (which is what the dump then shows). */

#include "listening.h"

#include <errno.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "basic/cleanup.h"
#include "net/link.h"

#define DIAG_BUF_BYTES 32768
#define DIAG_TIMEOUT_MS 2000

static int diag_request(int fd, int family)
{
	struct {
		struct nlmsghdr nh;
		struct inet_diag_req_v2 req;
	} msg = {
		.nh = { .nlmsg_len = sizeof msg,
			.nlmsg_type = SOCK_DIAG_BY_FAMILY,
			.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP,
			.nlmsg_seq = (uint32_t)family },
		.req = { .sdiag_family = (uint8_t)family,
			 .sdiag_protocol = IPPROTO_TCP,
			 .idiag_states = 1u << TCP_LISTEN },
	};
	struct sockaddr_nl to = { .nl_family = AF_NETLINK };

	if (sendto(fd, &msg, sizeof msg, 0, (struct sockaddr *)&to, sizeof to) < 0)
		return -errno;
	return 0;
}

static void diag_entry(const struct inet_diag_msg *d, struct listening_socket *ret)
{
	*ret = (struct listening_socket){
		.port = ntohs(d->id.idiag_sport),
		.family = d->idiag_family,
		.inode = d->idiag_inode,
		.uid = d->idiag_uid,
	};
	if (!inet_ntop(d->idiag_family, d->id.idiag_src, ret->address, sizeof ret->address))
		snprintf(ret->address, sizeof ret->address, "?");
}

/* Reads the dump's answer to its end: 0 (entries added to *n, up to max), or -errno. */
static int diag_read(int fd, struct listening_socket *ret, size_t max, size_t *n)
{
	uint8_t buf[DIAG_BUF_BYTES] __attribute__((aligned(NLMSG_ALIGNTO)));

	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		ssize_t k;
		int len;

		if (poll(&p, 1, DIAG_TIMEOUT_MS) <= 0)
			return -ETIMEDOUT;
		k = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
		if (k < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			return -errno;
		}
		len = (int)k;
		for (struct nlmsghdr *h = (struct nlmsghdr *)buf; NLMSG_OK(h, len);
		     h = NLMSG_NEXT(h, len)) {
			if (h->nlmsg_type == NLMSG_DONE)
				return 0;
			if (h->nlmsg_type == NLMSG_ERROR) {
				const struct nlmsgerr *err = NLMSG_DATA(h);

				if (h->nlmsg_len < NLMSG_LENGTH(sizeof *err))
					return -EPROTO;
				return err->error < 0 ? err->error : -EPROTO;
			}
			if (h->nlmsg_type != SOCK_DIAG_BY_FAMILY ||
			    h->nlmsg_len < NLMSG_LENGTH(sizeof(struct inet_diag_msg)))
				continue;
			if (*n < max)
				diag_entry(NLMSG_DATA(h), &ret[(*n)++]);
		}
	}
}

int listening_read(int netns_fd, struct listening_socket *ret, size_t max)
{
	static const int families[] = { AF_INET, AF_INET6 };
	_cleanup_close_ int fd = -1;
	size_t n = 0;
	int r;

	fd = netns_socket(netns_fd, AF_NETLINK, SOCK_DGRAM, NETLINK_SOCK_DIAG);
	if (fd < 0)
		return fd;
	for (size_t i = 0; i < sizeof families / sizeof families[0]; i++) {
		r = diag_request(fd, families[i]);
		if (r >= 0)
			r = diag_read(fd, ret, max, &n);
		/* a namespace without IPv6 has nothing to list there */
		if (r == -ENOENT || r == -EAFNOSUPPORT)
			continue;
		if (r < 0)
			return r;
	}
	return (int)n;
}
