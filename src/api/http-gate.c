/* SPDX-License-Identifier: MIT */
#include "http-gate.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "basic/cleanup.h"
#include "basic/log.h"
#include "event/event.h"

/* Accepts per wake-up: other sources are not kept waiting behind a flood. */
#define GATE_ACCEPTS_AT_ONCE 64
/* Refused connections still draining their request (so that closing does not reset the
 * connection under the answer before the client read it): at most this many, for at most
 * this long each. Past the count a refused connection is closed right after its answer. */
#define GATE_MAX_REFUSED 64
#define GATE_REFUSED_LINGER_USEC (2 * 1000000ull)

struct refused {
	struct http_gate *gate;
	struct refused *prev, *next;
	int fd;
	struct event_source *io, *timer;
};

struct http_gate {
	struct event_loop *loop;
	struct http_connections *conns;
	http_gate_admit_fn admit;
	void *userdata;
	int listen_fd;
	int spare_fd; /* closed to accept (and refuse) one connection when out of open files */
	struct event_source *io;
	struct refused *refused;
	unsigned n_refused;
};

static void refused_free(struct refused *c)
{
	struct http_gate *g = c->gate;

	event_source_free(c->io);
	event_source_free(c->timer);
	close(c->fd);
	if (c->prev)
		c->prev->next = c->next;
	else
		g->refused = c->next;
	if (c->next)
		c->next->prev = c->prev;
	g->n_refused--;
	free(c);
}

/* Reads per wake-up (of 4 KiB): a client that keeps sending cannot hold the loop. */
#define GATE_READS_AT_ONCE 16

/* Reads and drops what the client sends until it closes (or an error). */
static int on_refused_io(struct event_source *src, int fd, uint32_t revents, void *userdata)
{
	char buf[4096];

	for (int i = 0; i < GATE_READS_AT_ONCE; i++) {
		ssize_t n = read(fd, buf, sizeof buf);

		if (n > 0)
			continue;
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return 0;
		refused_free(userdata);
		return 0;
	}
	return 0;
}

static int on_refused_timer(struct event_source *src, uint64_t now, void *userdata)
{
	refused_free(userdata);
	return 0;
}

/* Keeps fd open for a while, reading and dropping, or closes it when that is not possible. */
static void refused_linger(struct http_gate *g, int fd)
{
	struct refused *c;

	if (g->n_refused >= GATE_MAX_REFUSED || !(c = calloc(1, sizeof *c))) {
		close(fd);
		return;
	}
	c->gate = g;
	c->fd = fd;
	if (event_add_io(g->loop, &c->io, fd, EPOLLIN | EPOLLRDHUP, on_refused_io, c) < 0 ||
	    event_add_timer(g->loop, &c->timer, now_usec() + GATE_REFUSED_LINGER_USEC,
			    on_refused_timer, c) < 0) {
		event_source_free(c->io);
		event_source_free(c->timer);
		free(c);
		close(fd);
		return;
	}
	c->next = g->refused;
	if (g->refused)
		g->refused->prev = c;
	g->refused = c;
	g->n_refused++;
}

/* The whole answer fits a fresh socket's send buffer: one non-blocking write. */
static void refuse(struct http_gate *g, int fd, const char *why)
{
	char body[256], head[256], drop[4096];
	int nb, nh;

	nb = snprintf(body, sizeof body,
		      "{\"error\":{\"code\":\"unavailable\",\"message\":\"%s: retry later\"}}",
		      why);
	nh = snprintf(head, sizeof head,
		      "HTTP/1.1 503 Service Unavailable\r\n"
		      "Content-Type: application/json\r\n"
		      "Retry-After: 1\r\n"
		      "Connection: close\r\n"
		      "Content-Length: %d\r\n\r\n",
		      nb);
	/* What the request sent so far: a close with unread bytes resets the connection. */
	for (int i = 0; i < GATE_READS_AT_ONCE && read(fd, drop, sizeof drop) > 0; i++)
		;
	if (write(fd, head, (size_t)nh) == nh && write(fd, body, (size_t)nb) == nb)
		(void)shutdown(fd, SHUT_WR);
	refused_linger(g, fd);
}

static void refuse_out_of_files(struct http_gate *g)
{
	int fd;

	if (g->spare_fd < 0)
		return;
	close(g->spare_fd);
	g->spare_fd = -1;
	fd = accept4(g->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	if (fd >= 0) {
		g->conns->refused++;
		log_warn("out of open files: refused a connection", NULL);
		refuse(g, fd, "the controller is out of open files");
	}
	g->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
}

static int on_listen(struct event_source *src, int fd, uint32_t revents, void *userdata)
{
	struct http_gate *g = userdata;
	char why[96];

	for (int i = 0; i < GATE_ACCEPTS_AT_ONCE; i++) {
		struct sockaddr_storage sa;
		socklen_t len = sizeof sa;
		int c = accept4(g->listen_fd, (struct sockaddr *)&sa, &len,
				SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (c < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno == EMFILE || errno == ENFILE)
				refuse_out_of_files(g);
			break;
		}
		if (g->conns->open >= g->conns->limit) {
			g->conns->refused++;
			snprintf(why, sizeof why, "too many connections (limit %u)",
				 g->conns->limit);
			refuse(g, c, why);
			continue;
		}
		g->admit(g->userdata, c, (struct sockaddr *)&sa, len);
	}
	return 0;
}

int http_gate_new(struct event_loop *loop, int listen_fd, struct http_connections *conns,
		  http_gate_admit_fn admit, void *userdata, struct http_gate **ret)
{
	struct http_gate *g = calloc(1, sizeof *g);
	int flags, r;

	if (!g)
		return -ENOMEM;
	flags = fcntl(listen_fd, F_GETFL);
	if (flags < 0 || fcntl(listen_fd, F_SETFL, flags | O_NONBLOCK) < 0) {
		r = negative_errno();
		free(g);
		return r;
	}
	g->loop = loop;
	g->conns = conns;
	g->admit = admit;
	g->userdata = userdata;
	g->listen_fd = listen_fd;
	g->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	r = event_add_io(loop, &g->io, listen_fd, EPOLLIN, on_listen, g);
	if (r < 0) {
		if (g->spare_fd >= 0)
			close(g->spare_fd);
		free(g);
		return r;
	}
	*ret = g;
	return 0;
}

void http_gate_free(struct http_gate *g)
{
	if (!g)
		return;
	while (g->refused)
		refused_free(g->refused);
	event_source_free(g->io);
	close(g->listen_fd);
	if (g->spare_fd >= 0)
		close(g->spare_fd);
	free(g);
}
