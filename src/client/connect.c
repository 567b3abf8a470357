/* SPDX-License-Identifier: MIT */
/* The client's own connections, for what libcurl does not carry: a socket to the controller's
 * unix socket or to host:port of an http:// endpoint, and sending on it. */

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "client-internal.h"

static int connect_unix(struct station_client *c, int *ret)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	/* A controller whose listen queue is full makes connect() wait: this long at most. */
	struct timeval timeout = { .tv_sec = CLIENT_CONNECT_TIMEOUT_MS / 1000 }, none = {};
	int fd;

	if (snprintf(sa.sun_path, sizeof sa.sun_path, "%s", c->socket_path) >=
	    (int)sizeof sa.sun_path)
		return client_error(c, -ENAMETOOLONG, "socket path too long: %s", c->socket_path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return client_error(c, -errno, "socket: %s", strerror(errno));
	(void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
	if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
		int err = errno;

		close(fd);
		return client_unreachable(
			c, err == EACCES || err == EPERM ? -EACCES : -ECONNREFUSED, strerror(err));
	}
	(void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &none, sizeof none);
	*ret = fd;
	return 0;
}

/* base_url "http://host[:port]" (IPv6 literals in brackets). */
static int split_url(struct station_client *c, char *host, size_t host_size, char *port,
		     size_t port_size)
{
	const char *h, *end, *colon;
	size_t n;

	if (strncmp(c->base_url, "http://", 7) != 0)
		return client_error(c, -EOPNOTSUPP,
				    "a stream connection needs a unix socket or http:// (%s)",
				    c->endpoint);
	h = c->base_url + 7;
	end = h + strcspn(h, "/");
	if (*h == '[') {
		const char *close_br = memchr(h, ']', (size_t)(end - h));

		if (!close_br)
			return client_error(c, -EINVAL, "bad URL %s", c->endpoint);
		colon = close_br[1] == ':' ? close_br + 1 : NULL;
		h++;
		n = (size_t)(close_br - h);
	} else {
		colon = memchr(h, ':', (size_t)(end - h));
		n = (size_t)((colon ? colon : end) - h);
	}
	if (n == 0 || n >= host_size)
		return client_error(c, -EINVAL, "bad URL %s", c->endpoint);
	memcpy(host, h, n);
	host[n] = '\0';
	n = colon ? (size_t)(end - colon - 1) : 2;
	if (n == 0 || n >= port_size)
		return client_error(c, -EINVAL, "bad URL %s", c->endpoint);
	memcpy(port, colon ? colon + 1 : "80", n);
	port[n] = '\0';
	return 0;
}

/* connect() that gives up after timeout_ms (a host that drops the SYN would take minutes):
 * 0, or -errno with -ETIMEDOUT for the deadline and -EINTR when the interrupt check asked. */
static int connect_within(struct station_client *c, int fd, const struct sockaddr *sa,
			  socklen_t len, uint64_t timeout_ms)
{
	int flags = fcntl(fd, F_GETFL), err = 0, waited = 0;
	socklen_t err_len = sizeof err;

	if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0)
		return -errno;
	if (connect(fd, sa, len) < 0 && errno != EINPROGRESS)
		return -errno;
	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLOUT };
		int n;

		if ((uint64_t)waited >= timeout_ms)
			return -ETIMEDOUT;
		n = poll(&p, 1, (int)MIN(timeout_ms - (uint64_t)waited, (uint64_t)200));
		if (n < 0 && errno != EINTR)
			return -errno;
		if (c->interrupt && c->interrupt(c->interrupt_userdata))
			return -EINTR;
		if (n > 0)
			break;
		if (n == 0)
			waited += (int)MIN(timeout_ms - (uint64_t)waited, (uint64_t)200);
	}
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &err_len) < 0)
		return -errno;
	if (err != 0)
		return -err;
	return fcntl(fd, F_SETFL, flags) < 0 ? -errno : 0;
}

static int connect_tcp(struct station_client *c, int *ret)
{
	uint64_t timeout_ms = MIN((uint64_t)CLIENT_CONNECT_TIMEOUT_MS, c->timeout_ms);
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *ai = NULL;
	char host[256], port[16];
	int r = split_url(c, host, sizeof host, port, sizeof port), fd = -1, err = 0;

	if (r < 0)
		return r;
	r = getaddrinfo(host, port, &hints, &ai);
	if (r != 0)
		return client_unreachable(c, -ECONNREFUSED, gai_strerror(r));
	for (struct addrinfo *a = ai; a && fd < 0; a = a->ai_next) {
		fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
		r = fd < 0 ? 0 : connect_within(c, fd, a->ai_addr, a->ai_addrlen, timeout_ms);
		if (r < 0) {
			err = -r;
			close(fd);
			fd = -1;
		}
		if (err == ETIMEDOUT || err == EINTR)
			break;
	}
	freeaddrinfo(ai);
	if (err == ETIMEDOUT)
		return client_timed_out(c, timeout_ms);
	if (err == EINTR)
		return client_error(c, -EINTR, "interrupted");
	if (fd < 0)
		return client_unreachable(c, -ECONNREFUSED, strerror(err ? err : ECONNREFUSED));
	*ret = fd;
	return 0;
}

int client_send_all(int fd, const void *data, size_t n)
{
	const uint8_t *p = data;

	while (n > 0) {
		ssize_t k = send(fd, p, n, MSG_NOSIGNAL);

		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return -errno;
		p += k;
		n -= (size_t)k;
	}
	return 0;
}

int client_connect(struct station_client *c, int *ret)
{
	if (c->workers)
		return client_error(c, -EDESTADDRREQ,
				    "with several workers, a stream goes to one "
				    "worker's handle (station_client_worker())");
	return c->socket_path ? connect_unix(c, ret) : connect_tcp(c, ret);
}
