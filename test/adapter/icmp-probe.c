/* SPDX-License-Identifier: MIT */
/* Static probe copied into the test rootfs: sends one ICMP echo to 127.0.0.1 through an ICMP
 * datagram socket (no CAP_NET_RAW needed when net.ipv4.ping_group_range admits our gid) and
 * prints "icmp=ok" on a reply, else "icmp=<errno name>". */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/ip_icmp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

int main(void)
{
	struct sockaddr_in to = { .sin_family = AF_INET,
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct icmphdr req = { .type = ICMP_ECHO, .un.echo.sequence = htons(1) };
	char reply[256];
	int fd = socket(AF_INET, SOCK_DGRAM, IPPROTO_ICMP);
	if (fd < 0 || sendto(fd, &req, sizeof req, 0, (struct sockaddr *)&to, sizeof to) < 0) {
		printf("icmp=%s\n", strerrorname_np(errno));
		return 1;
	}
	struct pollfd p = { fd, POLLIN, 0 };
	if (poll(&p, 1, 2000) != 1 || recv(fd, reply, sizeof reply, 0) < (ssize_t)sizeof req) {
		printf("icmp=noreply\n");
		return 1;
	}
	printf("icmp=ok\n");
	return 0;
}
