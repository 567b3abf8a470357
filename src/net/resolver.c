/* SPDX-License-Identifier: MIT */
/*
 * The workspaces' resolver. A query comes over UDP or TCP from a sandbox and is hostile: it is
 * parsed by dns.c (malformed: dropped, or the TCP connection closed), and decide() says who sent
 * it and whether its name is allowed. A query carrying more than its one question (more
 * questions, answer or authority records, additional records but one OPT) is answered FORMERR,
 * as Unbound does. The sandbox's message never leaves: a forwarded query is built anew from its
 * parsed question (dns_build_query: our header, the name, type and class, our own OPT), so
 * neither its flags nor its EDNS options nor any record of its choosing reach the upstream. It
 * goes from a new UDP socket connect()ed to the upstream (the kernel then hands us only that
 * address's datagrams, from a new random source port) with a new random id; an answer counts
 * only when it parses, carries that id and echoes the question asked. It is relayed with the
 * client's id, RD bit and spelling of the question, without our OPT when the client sent none,
 * and over UDP truncated (TC, no records) when larger than the client takes. Queries that came
 * over TCP are forwarded over UDP as well, and the answer relayed as it came (a truncated one
 * included).
 *
 * Bounds: RESOLVER_MAX_PENDING forwarded queries in all, each with a timeout per upstream (then
 * the next one, then SERVFAIL); RESOLVER_MAX_TCP connections, one query at a time each, closed
 * after RESOLVER_TCP_IDLE_MS without progress; messages of DNS_MAX_MESSAGE bytes.
 *
 * Fairness: one client address (one workspace) may have RESOLVER_CLIENT_PENDING queries pending
 * and forward RESOLVER_CLIENT_RATE a second (a token bucket of RESOLVER_CLIENT_BURST); beyond
 * either it gets SERVFAIL at once. When the table is full, a client holding less than an equal
 * share of it (RESOLVER_MAX_PENDING over the clients with queries pending) takes the slot of
 * the oldest query of the client holding the most, which is answered SERVFAIL: a flood of slow
 * names costs the workspace that sends it, not the others.
 */
#include "resolver.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "basic/cleanup.h"
#include "basic/list.h"
#include "basic/util.h"
#include "event/event.h"

#define RESOLVER_UDP_BURST 64 /* datagrams read per wakeup, so one sender cannot starve the loop */
#define RESOLV_CONF_MAX (64 * 1024)

struct tcp_conn;
struct share;

/* Where an answer goes: a UDP peer, or a TCP connection (NULL once it is gone). */
struct client {
	uint32_t src; /* host byte order */
	struct sockaddr_in addr;
	struct tcp_conn *conn;
};

struct pending {
	struct resolver *r;
	struct pending *prev, *next;
	struct client client;
	struct share *share; /* its client address's */
	void *cookie;
	struct dns_question q;		/* as the client asked it: its id, its name */
	uint8_t query[DNS_MAX_MESSAGE]; /* the client's, for its question and our error replies */
	size_t query_len;
	uint16_t upstream_id;
	size_t upstream; /* index of the upstream asked */
	int fd;
	struct event_source *io, *timer;
};

struct tcp_conn {
	struct resolver *r;
	struct tcp_conn *prev, *next;
	int fd;
	uint32_t src;
	struct event_source *io, *timer;
	struct pending *pending;
	bool broken; /* could not take an answer: to be closed */
	uint8_t in[2 + DNS_MAX_MESSAGE];
	size_t in_len;
	uint8_t out[2 + DNS_MAX_MESSAGE];
	size_t out_len, out_off;
};

/* What one client address may still ask: its queries pending and its token bucket. */
struct share {
	struct share *prev, *next;
	uint32_t src;
	size_t n_pending;
	uint64_t micro_tokens; /* a query costs 1000000 */
	uint64_t refilled_usec;
};

struct resolver {
	struct event_loop *loop;
	const struct resolver_ops *ops;
	void *userdata;
	struct sockaddr_in upstreams[RESOLVER_MAX_UPSTREAMS];
	size_t n_upstreams;
	uint64_t timeout_usec;
	uint16_t port;
	int udp_fd, tcp_fd;
	struct event_source *udp_io, *tcp_io;
	struct pending *pending; /* newest first */
	size_t n_pending;
	struct share *shares;
	size_t client_pending;
	uint64_t client_rate, client_burst;
	struct tcp_conn *conns;
	size_t n_conns;
};

static void tcp_conn_free(struct tcp_conn *c);
static void tcp_conn_send(struct tcp_conn *c, const uint8_t *msg, size_t len);

/* Never frees a TCP connection (our callers may still hold it): one that cannot take the
 * answer is marked broken, and whoever called us from its own event closes it. */
static void reply(struct resolver *r, const struct client *cl, const uint8_t *msg, size_t len)
{
	if (cl->conn) {
		tcp_conn_send(cl->conn, msg, len);
		return;
	}
	/* A client that does not read its socket loses the answer; it will ask again. */
	(void)sendto(r->udp_fd, msg, len, MSG_DONTWAIT | MSG_NOSIGNAL,
		     (const struct sockaddr *)&cl->addr, sizeof(cl->addr));
}

static void reply_rcode(struct resolver *r, const struct client *cl, const struct dns_question *q,
			const uint8_t *query, size_t query_len, uint8_t rcode)
{
	uint8_t buf[DNS_MAX_MESSAGE];
	int n = dns_build_reply(q, query, query_len, rcode, buf, sizeof(buf));

	if (n > 0)
		reply(r, cl, buf, (size_t)n);
}

static bool tcp_conn_broken(const struct tcp_conn *c);

static void pending_free(struct pending *p)
{
	if (!p)
		return;
	event_source_free(p->io);
	event_source_free(p->timer);
	if (p->fd >= 0)
		close(p->fd);
	if (p->client.conn)
		p->client.conn->pending = NULL;
	if (p->share)
		p->share->n_pending--;
	LIST_REMOVE(&p->r->pending, p);
	p->r->n_pending--;
	free(p);
}

/* Frees p, then answers its client with msg (which must not live in p). Returns the client's
 * TCP connection when it could not take the answer, for the caller to close. */
static struct tcp_conn *pending_finish(struct pending *p, const uint8_t *msg, size_t len)
{
	struct resolver *r = p->r;
	struct client cl = p->client;

	pending_free(p);
	if (msg)
		reply(r, &cl, msg, len);
	return cl.conn && tcp_conn_broken(cl.conn) ? cl.conn : NULL;
}

static struct tcp_conn *pending_fail(struct pending *p)
{
	uint8_t buf[DNS_MAX_MESSAGE];
	int n = dns_build_reply(&p->q, p->query, p->query_len, DNS_RCODE_SERVFAIL, buf,
				sizeof(buf));

	return pending_finish(p, n > 0 ? buf : NULL, n > 0 ? (size_t)n : 0);
}

/* The upstream's answer: checked against what we asked, handed to answered(), relayed with
 * the client's id. Anything else that arrives on the socket is ignored. */
static bool pending_answer(struct pending *p, uint8_t *msg, size_t len)
{
	struct resolver *r = p->r;
	uint8_t truncated[DNS_MAX_MESSAGE];
	struct dns_answer a;
	int n;

	if (dns_parse_response(msg, len, &a) < 0 || a.id != p->upstream_id ||
	    a.q.qtype != p->q.qtype || a.q.qclass != p->q.qclass ||
	    strcmp(a.q.name, p->q.name) != 0 || a.q.end != p->q.end)
		return false;
	if (r->ops->answered)
		r->ops->answered(r->userdata, p->client.src, p->cookie, &a);
	len = dns_relay_answer(&p->q, p->query, msg, len);
	if (!p->client.conn && len > (p->q.edns ? p->q.udp_size : DNS_UDP_PLAIN)) {
		n = dns_build_truncated(&p->q, p->query, p->query_len, a.rcode, truncated,
					sizeof(truncated));
		tcp_conn_free(pending_finish(p, n > 0 ? truncated : NULL, n > 0 ? (size_t)n : 0));
		return true;
	}
	tcp_conn_free(pending_finish(p, msg, len));
	return true;
}

static int pending_ask(struct pending *p);

/* The current upstream failed (timeout, or refused): the next one, or SERVFAIL. Called from
 * p's own events only. */
static void pending_next(struct pending *p)
{
	p->upstream++;
	if (pending_ask(p) < 0)
		tcp_conn_free(pending_fail(p));
}

static int on_upstream_io(struct event_source *s, int fd, uint32_t revents, void *userdata)
{
	struct pending *p = userdata;
	uint8_t buf[DNS_MAX_MESSAGE];

	(void)s;
	(void)revents;
	for (;;) {
		ssize_t n = recv(fd, buf, sizeof(buf), MSG_TRUNC);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN)
				pending_next(p); /* ICMP unreachable from this upstream */
			return 0;
		}
		if ((size_t)n <= sizeof(buf) && pending_answer(p, buf, (size_t)n))
			return 0; /* p is gone */
		/* Malformed, too large for us, or not the answer to our question: ignored. */
	}
}

static int on_upstream_timeout(struct event_source *s, uint64_t now, void *userdata)
{
	(void)s;
	(void)now;
	pending_next(userdata);
	return 0;
}

/* Asks upstream p->upstream from a new socket, with a new id. */
static int pending_send(struct pending *p)
{
	struct resolver *r = p->r;
	_cleanup_close_ int fd = -1;
	uint8_t query[DNS_UDP_PLAIN];
	uint16_t id;
	int k, len;

	event_source_free(p->io);
	p->io = NULL;
	if (p->fd >= 0)
		close(p->fd);
	p->fd = -1;

	k = random_bytes(&id, sizeof(id));
	if (k < 0)
		return k;
	len = dns_build_query(&p->q, id, query, sizeof(query));
	if (len < 0)
		return len;
	fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return negative_errno();
	if (connect(fd, (const struct sockaddr *)&r->upstreams[p->upstream],
		    sizeof(r->upstreams[0])) < 0)
		return negative_errno();
	p->upstream_id = id;
	if (send(fd, query, (size_t)len, MSG_NOSIGNAL) < 0)
		return negative_errno();
	k = event_add_io(r->loop, &p->io, fd, EPOLLIN, on_upstream_io, p);
	if (k < 0)
		return k;
	p->fd = TAKE_FD(fd);
	return event_source_set_time(p->timer, now_usec() + r->timeout_usec);
}

/* Asks the upstreams from p->upstream on, until one can be sent to. */
static int pending_ask(struct pending *p)
{
	int k = -ENETUNREACH;

	for (; p->upstream < p->r->n_upstreams; p->upstream++) {
		k = pending_send(p);
		if (k >= 0)
			return 0;
	}
	return k;
}

/* --- shares: each client address's bound, rate and fair part of the table --- */

static void share_refill(struct resolver *r, struct share *s, uint64_t now)
{
	uint64_t cap = r->client_burst * 1000000;
	uint64_t add = (now - s->refilled_usec) * r->client_rate;

	s->micro_tokens = add >= cap - s->micro_tokens ? cap : s->micro_tokens + add;
	s->refilled_usec = now;
}

/* Shares with nothing pending and a full bucket are as good as new: freed whenever a share is
 * made, so there are never many more than the clients asking lately. */
static void share_sweep(struct resolver *r, uint64_t now)
{
	struct share *s = r->shares;

	while (s) {
		struct share *next = s->next;
		share_refill(r, s, now);
		if (s->n_pending == 0 && s->micro_tokens == r->client_burst * 1000000) {
			LIST_REMOVE(&r->shares, s);
			free(s);
		}
		s = next;
	}
}

static struct share *share_get(struct resolver *r, uint32_t src)
{
	uint64_t now = now_usec();
	struct share *s;

	for (s = r->shares; s; s = s->next)
		if (s->src == src) {
			share_refill(r, s, now);
			return s;
		}
	share_sweep(r, now);
	s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	*s = (struct share){ .src = src,
			     .micro_tokens = r->client_burst * 1000000,
			     .refilled_usec = now };
	LIST_PREPEND(&r->shares, s);
	return s;
}

/* Within its own bound and rate; takes a token. */
static bool share_admit(struct resolver *r, struct share *s)
{
	if (s->n_pending >= r->client_pending || s->micro_tokens < 1000000)
		return false;
	s->micro_tokens -= 1000000;
	return true;
}

static void shed(struct resolver *r, uint32_t src, void *cookie)
{
	if (r->ops->shed)
		r->ops->shed(r->userdata, src, cookie);
}

/* The table is full: when s holds less than an equal share of it, the oldest query of the
 * share holding the most (more than s would) is answered SERVFAIL and its slot freed. */
static bool share_make_room(struct resolver *r, struct share *s)
{
	struct share *most = NULL;
	struct pending *victim = NULL;
	size_t n_active = s->n_pending == 0;

	for (struct share *t = r->shares; t; t = t->next) {
		n_active += t->n_pending > 0;
		if (!most || t->n_pending > most->n_pending)
			most = t;
	}
	if (s->n_pending >= RESOLVER_MAX_PENDING / n_active || most == s ||
	    most->n_pending <= s->n_pending + 1)
		return false;
	for (struct pending *p = r->pending; p; p = p->next)
		if (p->share == most)
			victim = p;
	if (!victim)
		return false;
	shed(r, victim->client.src, victim->cookie);
	/* Another client's query: its TCP connection is no caller's, ours to close if broken. */
	tcp_conn_free(pending_fail(victim));
	return true;
}

static void forward(struct resolver *r, const struct client *cl, const struct dns_question *q,
		    const uint8_t *query, size_t len, void *cookie)
{
	struct share *s = r->n_upstreams > 0 ? share_get(r, cl->src) : NULL;
	struct pending *p;

	if (!s) {
		reply_rcode(r, cl, q, query, len, DNS_RCODE_SERVFAIL);
		return;
	}
	if (!share_admit(r, s) ||
	    (r->n_pending >= RESOLVER_MAX_PENDING && !share_make_room(r, s))) {
		shed(r, cl->src, cookie);
		reply_rcode(r, cl, q, query, len, DNS_RCODE_SERVFAIL);
		return;
	}
	p = calloc(1, sizeof(*p));
	if (!p) {
		reply_rcode(r, cl, q, query, len, DNS_RCODE_SERVFAIL);
		return;
	}
	*p = (struct pending){ .r = r,
			       .client = *cl,
			       .share = s,
			       .cookie = cookie,
			       .q = *q,
			       .fd = -1 };
	memcpy(p->query, query, len);
	p->query_len = len;
	LIST_PREPEND(&r->pending, p);
	r->n_pending++;
	s->n_pending++;
	if (cl->conn)
		cl->conn->pending = p;
	if (event_add_timer(r->loop, &p->timer, UINT64_MAX, on_upstream_timeout, p) < 0 ||
	    pending_ask(p) < 0)
		(void)pending_fail(p); /* a broken connection is closed by our caller */
}

/* One query from a client, len <= DNS_MAX_MESSAGE. Returns -EBADMSG when it is malformed or
 * its sender is no workspace (nothing was answered). A query carrying more than its question
 * gets FORMERR, once decide() has said its sender is a workspace. */
static int handle_query(struct resolver *r, const struct client *cl, const uint8_t *query,
			size_t len)
{
	struct dns_question q;
	enum resolver_verdict verdict;
	void *cookie = NULL;
	int k;

	k = dns_parse_query(query, len, &q);
	if (k < 0)
		return k;
	verdict = r->ops->decide(r->userdata, cl->src, &q, &cookie);
	if (verdict != RESOLVER_REFUSE && verdict != RESOLVER_FORWARD)
		return -EBADMSG;
	if (k == DNS_RCODE_FORMERR)
		reply_rcode(r, cl, &q, query, len, DNS_RCODE_FORMERR);
	else if (verdict == RESOLVER_REFUSE)
		reply_rcode(r, cl, &q, query, len, DNS_RCODE_NXDOMAIN);
	else if (q.qtype == DNS_TYPE_AAAA && q.qclass == DNS_CLASS_IN)
		reply_rcode(r, cl, &q, query, len, DNS_RCODE_NOERROR);
	else
		forward(r, cl, &q, query, len, cookie);
	return 0;
}

static int on_udp_io(struct event_source *s, int fd, uint32_t revents, void *userdata)
{
	struct resolver *r = userdata;
	uint8_t buf[DNS_MAX_MESSAGE];

	(void)s;
	(void)revents;
	for (unsigned i = 0; i < RESOLVER_UDP_BURST; i++) {
		struct client cl = {};
		struct iovec iov = { .iov_base = buf, .iov_len = sizeof(buf) };
		struct msghdr mh = { .msg_name = &cl.addr,
				     .msg_namelen = sizeof(cl.addr),
				     .msg_iov = &iov,
				     .msg_iovlen = 1 };
		ssize_t n = recvmsg(fd, &mh, MSG_DONTWAIT);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return 0; /* EAGAIN, or an error queued by an ICMP: nothing to answer */
		}
		if ((mh.msg_flags & MSG_TRUNC) || mh.msg_namelen != sizeof(cl.addr) ||
		    cl.addr.sin_family != AF_INET || cl.addr.sin_port == 0)
			continue;
		cl.src = ntohl(cl.addr.sin_addr.s_addr);
		(void)handle_query(r, &cl, buf, (size_t)n);
	}
	return 0;
}

/* TCP: a 2-byte length, then the message; one query at a time per connection. */

static void tcp_conn_free(struct tcp_conn *c)
{
	if (!c)
		return;
	pending_free(c->pending); /* nobody to relay its answer to */
	event_source_free(c->io);
	event_source_free(c->timer);
	close(c->fd);
	LIST_REMOVE(&c->r->conns, c);
	c->r->n_conns--;
	free(c);
}

/* Reading when idle, writing while an answer is unsent, neither while the upstream is asked;
 * the idle timer runs whenever we wait on the client. */
static int tcp_conn_update(struct tcp_conn *c)
{
	uint32_t events = 0;
	uint64_t deadline = UINT64_MAX;
	int k;

	if (c->out_off < c->out_len)
		events = EPOLLOUT;
	else if (!c->pending)
		events = EPOLLIN;
	if (!c->pending)
		deadline = now_usec() + (uint64_t)RESOLVER_TCP_IDLE_MS * 1000;
	k = event_source_set_io_events(c->io, events);
	if (k < 0)
		return k;
	return event_source_set_time(c->timer, deadline);
}

static int tcp_conn_flush(struct tcp_conn *c)
{
	while (c->out_off < c->out_len) {
		ssize_t n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off,
				 MSG_DONTWAIT | MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN)
				break;
			return negative_errno();
		}
		c->out_off += (size_t)n;
	}
	return tcp_conn_update(c);
}

static bool tcp_conn_broken(const struct tcp_conn *c)
{
	return c->broken;
}

/* Queued; written when the socket is writable. */
static void tcp_conn_send(struct tcp_conn *c, const uint8_t *msg, size_t len)
{
	if (len > DNS_MAX_MESSAGE || c->out_off < c->out_len) {
		c->broken = true;
		return;
	}
	c->out[0] = (uint8_t)(len >> 8);
	c->out[1] = (uint8_t)len;
	memcpy(c->out + 2, msg, len);
	c->out_len = 2 + len;
	c->out_off = 0;
	if (tcp_conn_update(c) < 0)
		c->broken = true;
}

/* Reads what the current message still lacks; returns > 0 once it is whole. */
static int tcp_conn_read(struct tcp_conn *c)
{
	size_t need = c->in_len < 2 ? 2 : 2 + ((size_t)c->in[0] << 8 | c->in[1]);
	ssize_t n = read(c->fd, c->in + c->in_len, need - c->in_len);

	if (n < 0)
		return errno == EAGAIN || errno == EINTR ? 0 : negative_errno();
	if (n == 0)
		return -ECONNRESET;
	c->in_len += (size_t)n;
	if (c->in_len == 2) {
		size_t msg_len = (size_t)c->in[0] << 8 | c->in[1];
		if (msg_len == 0 || msg_len > DNS_MAX_MESSAGE)
			return -EBADMSG;
		return 0;
	}
	return c->in_len == need ? 1 : 0;
}

static int on_tcp_conn_io(struct event_source *s, int fd, uint32_t revents, void *userdata)
{
	struct tcp_conn *c = userdata;
	struct client cl = { .src = c->src, .conn = c };
	int k;

	(void)s;
	(void)fd;
	if (revents & EPOLLOUT) {
		if (tcp_conn_flush(c) < 0)
			tcp_conn_free(c);
		return 0;
	}
	if (!(revents & EPOLLIN) || c->pending) {
		if (revents & (EPOLLERR | EPOLLHUP))
			tcp_conn_free(c);
		return 0;
	}
	k = tcp_conn_read(c);
	if (k < 0) {
		tcp_conn_free(c);
		return 0;
	}
	if (k == 0)
		return 0;
	c->in_len = 0;
	/* A query we do not answer (malformed, or from no workspace) closes the connection. */
	k = handle_query(c->r, &cl, c->in + 2, ((size_t)c->in[0] << 8 | c->in[1]));
	if (k < 0 || c->broken || tcp_conn_update(c) < 0)
		tcp_conn_free(c);
	return 0;
}

static int on_tcp_conn_timeout(struct event_source *s, uint64_t now, void *userdata)
{
	(void)s;
	(void)now;
	tcp_conn_free(userdata);
	return 0;
}

static void tcp_accept_one(struct resolver *r, int fd, const struct sockaddr_in *peer)
{
	struct tcp_conn *c;

	if (r->n_conns >= RESOLVER_MAX_TCP || peer->sin_family != AF_INET) {
		close(fd);
		return;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		close(fd);
		return;
	}
	*c = (struct tcp_conn){ .r = r, .fd = fd, .src = ntohl(peer->sin_addr.s_addr) };
	LIST_PREPEND(&r->conns, c);
	r->n_conns++;
	if (event_add_io(r->loop, &c->io, fd, EPOLLIN, on_tcp_conn_io, c) < 0 ||
	    event_add_timer(r->loop, &c->timer, UINT64_MAX, on_tcp_conn_timeout, c) < 0 ||
	    tcp_conn_update(c) < 0)
		tcp_conn_free(c);
}

static int on_tcp_listen_io(struct event_source *s, int fd, uint32_t revents, void *userdata)
{
	struct resolver *r = userdata;

	(void)s;
	(void)revents;
	for (unsigned i = 0; i < RESOLVER_MAX_TCP; i++) {
		struct sockaddr_in peer = {};
		socklen_t peer_len = sizeof(peer);
		int cfd = accept4(fd, (struct sockaddr *)&peer, &peer_len,
				  SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (cfd < 0)
			return 0; /* EAGAIN, or a connection gone before we took it */
		tcp_accept_one(r, cfd, &peer);
	}
	return 0;
}

static int bind_socket(int type, uint32_t addr, uint16_t port, int *ret_fd, uint16_t *ret_port)
{
	_cleanup_close_ int fd = socket(AF_INET, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_port = htons(port),
				  .sin_addr.s_addr = htonl(addr) };
	socklen_t sa_len = sizeof(sa);
	int one = 1;

	if (fd < 0)
		return negative_errno();
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0)
		return negative_errno();
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return negative_errno();
	if (type == SOCK_STREAM && listen(fd, 16) < 0)
		return negative_errno();
	if (getsockname(fd, (struct sockaddr *)&sa, &sa_len) < 0)
		return negative_errno();
	*ret_port = ntohs(sa.sin_port);
	*ret_fd = TAKE_FD(fd);
	return 0;
}

/* UDP first; with port 0 the kernel picks one and TCP takes the same (tried a few times, as
 * the port may be taken for TCP). */
static int resolver_bind(struct resolver *r, uint32_t addr, uint16_t port)
{
	int k = -EADDRINUSE;

	for (unsigned attempt = 0; attempt < (port == 0 ? 8 : 1) && k == -EADDRINUSE; attempt++) {
		if (r->udp_fd >= 0)
			close(r->udp_fd);
		r->udp_fd = -1;
		k = bind_socket(SOCK_DGRAM, addr, port, &r->udp_fd, &r->port);
		if (k < 0)
			return k;
		k = bind_socket(SOCK_STREAM, addr, r->port, &r->tcp_fd, &r->port);
	}
	return k;
}

int resolver_new(struct event_loop *loop, uint32_t listen_addr, uint16_t port,
		 const struct sockaddr_in *upstreams, size_t n_upstreams,
		 const struct resolver_ops *ops, void *userdata, struct resolver **ret,
		 struct station_error *e)
{
	struct resolver *r;
	struct in_addr a = { .s_addr = htonl(listen_addr) };
	char addr_str[INET_ADDRSTRLEN] = "?";
	int k;

	inet_ntop(AF_INET, &a, addr_str, sizeof(addr_str));
	if (n_upstreams > RESOLVER_MAX_UPSTREAMS || !ops || !ops->decide)
		return station_error_set(e, -EINVAL, NULL, "resolver: at most %d upstream servers",
					 RESOLVER_MAX_UPSTREAMS);
	r = calloc(1, sizeof(*r));
	if (!r)
		return station_error_set(e, -ENOMEM, NULL, "resolver: out of memory");
	*r = (struct resolver){ .loop = loop,
				.ops = ops,
				.userdata = userdata,
				.n_upstreams = n_upstreams,
				.timeout_usec = (uint64_t)RESOLVER_TIMEOUT_MS * 1000,
				.client_pending = RESOLVER_CLIENT_PENDING,
				.client_rate = RESOLVER_CLIENT_RATE,
				.client_burst = RESOLVER_CLIENT_BURST,
				.udp_fd = -1,
				.tcp_fd = -1 };
	if (n_upstreams > 0)
		memcpy(r->upstreams, upstreams, n_upstreams * sizeof(*upstreams));

	k = resolver_bind(r, listen_addr, port);
	if (k < 0) {
		resolver_free(r);
		return station_error_set(e, k, NULL, "resolver: cannot listen on %s:%u: %s",
					 addr_str, port, strerror(-k));
	}
	k = event_add_io(loop, &r->udp_io, r->udp_fd, EPOLLIN, on_udp_io, r);
	if (k >= 0)
		k = event_add_io(loop, &r->tcp_io, r->tcp_fd, EPOLLIN, on_tcp_listen_io, r);
	if (k < 0) {
		resolver_free(r);
		return station_error_set(e, k, NULL, "resolver: cannot watch %s:%u: %s", addr_str,
					 port, strerror(-k));
	}
	*ret = r;
	return 0;
}

void resolver_free(struct resolver *r)
{
	if (!r)
		return;
	while (r->pending)
		pending_free(r->pending);
	while (r->conns)
		tcp_conn_free(r->conns);
	while (r->shares) {
		struct share *s = r->shares;
		LIST_REMOVE(&r->shares, s);
		free(s);
	}
	event_source_free(r->udp_io);
	event_source_free(r->tcp_io);
	if (r->udp_fd >= 0)
		close(r->udp_fd);
	if (r->tcp_fd >= 0)
		close(r->tcp_fd);
	free(r);
}

uint16_t resolver_port(const struct resolver *r)
{
	return r->port;
}

void resolver_set_timeout_ms(struct resolver *r, unsigned ms)
{
	r->timeout_usec = (uint64_t)ms * 1000;
}

void resolver_set_client_limits(struct resolver *r, size_t pending, unsigned per_sec,
				unsigned burst)
{
	r->client_pending = pending;
	r->client_rate = per_sec;
	r->client_burst = burst;
	for (struct share *s = r->shares; s; s = s->next)
		s->micro_tokens = (uint64_t)burst * 1000000;
}

void resolver_forget(struct resolver *r, const void *cookie)
{
	struct pending *p = r->pending;

	while (p) {
		struct pending *next = p->next;
		if (p->cookie == cookie)
			pending_free(p);
		p = next;
	}
}

int resolver_parse_upstream(const char *s, struct sockaddr_in *ret)
{
	char host[INET_ADDRSTRLEN];
	const char *colon;
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(53) };
	size_t host_len;

	if (!s)
		return -EINVAL;
	colon = strchr(s, ':');
	host_len = colon ? (size_t)(colon - s) : strlen(s);
	if (host_len == 0 || host_len >= sizeof(host))
		return -EINVAL;
	memcpy(host, s, host_len);
	host[host_len] = '\0';
	if (inet_pton(AF_INET, host, &sa.sin_addr) != 1)
		return -EINVAL;
	if (colon) {
		uint64_t port;
		if (colon[1] == '0' || parse_u64(colon + 1, 65535, &port) < 0 || port == 0)
			return -EINVAL;
		sa.sin_port = htons((uint16_t)port);
	}
	*ret = sa;
	return 0;
}

/* One line of resolv.conf: 1 and *ret for an IPv4 nameserver, 0 for anything else. */
static int parse_resolv_conf_line(char *line, struct sockaddr_in *ret)
{
	const char *sep = " \t\r";
	char *save = NULL, *key, *value;

	key = strtok_r(line, sep, &save);
	if (!key || strcmp(key, "nameserver") != 0)
		return 0;
	value = strtok_r(NULL, sep, &save);
	if (!value || strchr(value, ':'))
		return 0; /* an IPv6 server: workspaces have no IPv6 */
	if (strchr(value, '#') || strchr(value, ';'))
		*strpbrk(value, "#;") = '\0';
	if (resolver_parse_upstream(value, ret) < 0)
		return -EINVAL;
	return 1;
}

int resolver_upstreams_from_resolv_conf(const char *path, struct sockaddr_in *ret, size_t max,
					size_t *ret_n)
{
	_cleanup_free_ char *text = NULL;
	size_t len, n = 0;
	char *save = NULL;
	int k;

	k = read_file(path, RESOLV_CONF_MAX, &text, &len);
	if (k < 0)
		return k;
	if (memchr(text, '\0', len))
		return -EINVAL;
	for (char *line = strtok_r(text, "\n", &save); line && n < max;
	     line = strtok_r(NULL, "\n", &save)) {
		struct sockaddr_in sa;
		if (line[0] == '#' || line[0] == ';')
			continue;
		k = parse_resolv_conf_line(line, &sa);
		if (k < 0)
			return k;
		if (k > 0)
			ret[n++] = sa;
	}
	*ret_n = n;
	return 0;
}
