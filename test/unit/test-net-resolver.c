/* SPDX-License-Identifier: MIT */
/* The resolver on 127.0.0.1 with a port the kernel picks, fake upstreams that are UDP sockets
 * on the same event loop answering with crafted messages (never a name under "slow."), and
 * clients on 127.0.0.1 and 127.0.0.3 onwards (workspaces) and 127.0.0.2 (no workspace). */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "basic/cleanup.h"
#include "event/event.h"
#include "net/dns.h"
#include "net/resolver.h"

#define LOCALHOST 0x7f000001
#define OTHER_HOST 0x7f000002	 /* a source decide() does not know */
#define FLOOD_HOST 0x7f000003	 /* another workspace */
#define ANSWER_ADDR1 0xcb007107u /* 203.0.113.7 */
#define ANSWER_ADDR2 0xcb007108u /* 203.0.113.8 */
#define SPOOF_ADDR 0xc6336442u	 /* 198.51.100.66 */

enum upstream_mode { UPSTREAM_ANSWER, UPSTREAM_SPOOF_FIRST, UPSTREAM_SILENT, UPSTREAM_LARGE };
#define LARGE_N 40 /* A records in a large answer: 673 bytes */

struct upstream {
	int fd;
	struct sockaddr_in addr;
	struct event_source *io;
	enum upstream_mode mode;
	unsigned n_queries;
	uint16_t last_id;
	char last_name[DNS_NAME_MAX + 1];
	uint8_t last_query[DNS_MAX_MESSAGE];
	size_t last_len;
	struct sockaddr_in last_from;
};

static struct {
	struct event_loop *loop;
	struct resolver *r;
	struct upstream up[2];
	unsigned n_decide, n_answered;
	unsigned n_shed[8]; /* by the last byte of the source address */
	uint32_t answered_src;
	void *answered_cookie;
	struct dns_answer answered;
	int client_fd; /* whose readability answered() records */
	bool client_readable_at_answered;
} f;

static int cookie_marker;

static bool readable(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	return poll(&p, 1, 0) == 1;
}

/* Wire form of a dotted name. */
static size_t put_name(uint8_t *p, const char *name)
{
	size_t len = 0;

	while (*name) {
		const char *dot = strchr(name, '.');
		size_t n = dot ? (size_t)(dot - name) : strlen(name);
		p[len++] = (uint8_t)n;
		memcpy(p + len, name, n);
		len += n;
		name += n + (dot ? 1 : 0);
	}
	p[len++] = 0;
	return len;
}

static size_t build_query(uint8_t *buf, uint16_t id, const char *name, uint16_t qtype)
{
	size_t len = 12;

	memset(buf, 0, 12);
	buf[0] = (uint8_t)(id >> 8);
	buf[1] = (uint8_t)id;
	buf[2] = 0x01; /* RD */
	buf[5] = 1;
	len += put_name(buf + len, name);
	buf[len++] = (uint8_t)(qtype >> 8);
	buf[len++] = (uint8_t)qtype;
	buf[len++] = 0;
	buf[len++] = DNS_CLASS_IN;
	return len;
}

/* An answer to the query in buf (len bytes, question ending at end), with A records. */
static size_t build_answer(uint8_t *buf, size_t end, const uint32_t *addrs, const uint32_t *ttls,
			   size_t n)
{
	size_t len = end;

	buf[2] |= 0x80;
	buf[3] = 0x80;
	buf[6] = 0;
	buf[7] = (uint8_t)n;
	buf[8] = buf[9] = buf[10] = buf[11] = 0;
	for (size_t i = 0; i < n; i++) {
		uint8_t rr[] = { 0xc0,
				 0x0c,
				 0,
				 DNS_TYPE_A,
				 0,
				 DNS_CLASS_IN,
				 (uint8_t)(ttls[i] >> 24),
				 (uint8_t)(ttls[i] >> 16),
				 (uint8_t)(ttls[i] >> 8),
				 (uint8_t)ttls[i],
				 0,
				 4,
				 (uint8_t)(addrs[i] >> 24),
				 (uint8_t)(addrs[i] >> 16),
				 (uint8_t)(addrs[i] >> 8),
				 (uint8_t)addrs[i] };
		memcpy(buf + len, rr, sizeof(rr));
		len += sizeof(rr);
	}
	return len;
}

static void upstream_reply(struct upstream *u, const uint8_t *query, size_t len,
			   const struct dns_question *q, const struct sockaddr_in *to)
{
	static const uint32_t addrs[] = { ANSWER_ADDR1, ANSWER_ADDR2 };
	static const uint32_t ttls[] = { 120, 30 };
	static const uint32_t spoof[] = { SPOOF_ADDR };
	uint8_t buf[DNS_MAX_MESSAGE];
	size_t n;

	if (u->mode == UPSTREAM_SPOOF_FIRST) {
		/* a wrong id */
		memcpy(buf, query, len);
		buf[1] ^= 1;
		n = build_answer(buf, q->end, spoof, ttls, 1);
		cr_assert_eq(sendto(u->fd, buf, n, 0, (const struct sockaddr *)to, sizeof(*to)),
			     (ssize_t)n);
		/* the right id, another name (its first letter changed) */
		memcpy(buf, query, len);
		buf[13] = buf[13] == 'z' ? 'y' : 'z';
		n = build_answer(buf, q->end, spoof, ttls, 1);
		cr_assert_eq(sendto(u->fd, buf, n, 0, (const struct sockaddr *)to, sizeof(*to)),
			     (ssize_t)n);
		/* the right id and name, another type */
		memcpy(buf, query, len);
		buf[q->end - 3] = 16;
		n = build_answer(buf, q->end, spoof, ttls, 1);
		cr_assert_eq(sendto(u->fd, buf, n, 0, (const struct sockaddr *)to, sizeof(*to)),
			     (ssize_t)n);
		/* the right everything, cut in its answer */
		memcpy(buf, query, len);
		n = build_answer(buf, q->end, spoof, ttls, 1);
		cr_assert_eq(sendto(u->fd, buf, n - 2, 0, (const struct sockaddr *)to, sizeof(*to)),
			     (ssize_t)n - 2);
	}
	memcpy(buf, query, len);
	if (u->mode == UPSTREAM_LARGE) {
		uint32_t many[LARGE_N], many_ttls[LARGE_N];
		for (size_t i = 0; i < LARGE_N; i++) {
			many[i] = ANSWER_ADDR1 + (uint32_t)i;
			many_ttls[i] = 60;
		}
		n = build_answer(buf, q->end, many, many_ttls, LARGE_N);
	} else {
		n = build_answer(buf, q->end, addrs, ttls, ELEMENTSOF(addrs));
	}
	cr_assert_eq(sendto(u->fd, buf, n, 0, (const struct sockaddr *)to, sizeof(*to)),
		     (ssize_t)n);
}

static int on_upstream(struct event_source *s, int fd, uint32_t revents, void *userdata)
{
	struct upstream *u = userdata;
	uint8_t buf[DNS_MAX_MESSAGE];
	struct sockaddr_in from;
	socklen_t from_len = sizeof(from);
	struct dns_question q;
	ssize_t n;

	(void)s;
	(void)revents;
	n = recvfrom(fd, buf, sizeof(buf), MSG_DONTWAIT, (struct sockaddr *)&from, &from_len);
	if (n < 0)
		return 0;
	cr_assert_eq(dns_parse_query(buf, (size_t)n, &q), 0);
	u->n_queries++;
	u->last_id = q.id;
	snprintf(u->last_name, sizeof(u->last_name), "%s", q.name);
	memcpy(u->last_query, buf, (size_t)n);
	u->last_len = (size_t)n;
	u->last_from = from;
	if (u->mode != UPSTREAM_SILENT && strncmp(q.name, "slow.", 5) != 0)
		upstream_reply(u, buf, (size_t)n, &q, &from);
	return 0;
}

static void upstream_open(struct upstream *u, enum upstream_mode mode)
{
	socklen_t len = sizeof(u->addr);

	*u = (struct upstream){ .mode = mode };
	u->fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	cr_assert_geq(u->fd, 0);
	u->addr =
		(struct sockaddr_in){ .sin_family = AF_INET, .sin_addr.s_addr = htonl(LOCALHOST) };
	cr_assert_eq(bind(u->fd, (struct sockaddr *)&u->addr, sizeof(u->addr)), 0);
	cr_assert_eq(getsockname(u->fd, (struct sockaddr *)&u->addr, &len), 0);
	cr_assert_eq(event_add_io(f.loop, &u->io, u->fd, EPOLLIN, on_upstream, u), 0);
}

static enum resolver_verdict decide(void *userdata, uint32_t src, const struct dns_question *q,
				    void **ret_cookie)
{
	(void)userdata;
	f.n_decide++;
	if (src >> 8 != LOCALHOST >> 8 || src == OTHER_HOST)
		return RESOLVER_UNKNOWN;
	if (strcmp(q->name, "refused.test") == 0)
		return RESOLVER_REFUSE;
	*ret_cookie = &cookie_marker;
	return RESOLVER_FORWARD;
}

static void answered(void *userdata, uint32_t src, void *cookie, const struct dns_answer *a)
{
	(void)userdata;
	f.n_answered++;
	f.answered_src = src;
	f.answered_cookie = cookie;
	f.answered = *a;
	f.client_readable_at_answered = f.client_fd >= 0 && readable(f.client_fd);
}

static void shed(void *userdata, uint32_t src, void *cookie)
{
	(void)userdata;
	cr_assert_eq(cookie, &cookie_marker);
	f.n_shed[src & 7]++;
}

static const struct resolver_ops ops = { .decide = decide, .answered = answered, .shed = shed };

static void start(size_t n_upstreams, unsigned timeout_ms)
{
	struct sockaddr_in ups[2];
	struct station_error e = {};

	for (size_t i = 0; i < n_upstreams; i++)
		ups[i] = f.up[i].addr;
	cr_assert_eq(resolver_new(f.loop, LOCALHOST, 0, ups, n_upstreams, &ops, NULL, &f.r, &e), 0,
		     "%s", e.message);
	cr_assert_neq(resolver_port(f.r), 0);
	if (timeout_ms)
		resolver_set_timeout_ms(f.r, timeout_ms);
}

static void setup(void)
{
	memset(&f, 0, sizeof(f));
	f.client_fd = -1;
	f.up[0].fd = f.up[1].fd = -1;
	cr_assert_eq(event_loop_new(&f.loop), 0);
}

static void teardown(void)
{
	resolver_free(f.r);
	for (size_t i = 0; i < ELEMENTSOF(f.up); i++) {
		event_source_free(f.up[i].io);
		if (f.up[i].fd >= 0)
			close(f.up[i].fd);
	}
	if (f.client_fd >= 0)
		close(f.client_fd);
	event_loop_free(f.loop);
}

TestSuite(resolver, .init = setup, .fini = teardown, .timeout = 30);

static struct sockaddr_in resolver_addr(void)
{
	return (struct sockaddr_in){ .sin_family = AF_INET,
				     .sin_port = htons(resolver_port(f.r)),
				     .sin_addr.s_addr = htonl(LOCALHOST) };
}

static int client_open(int type, uint32_t src)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(src) };
	int fd = socket(AF_INET, type | SOCK_CLOEXEC, 0);

	cr_assert_geq(fd, 0);
	cr_assert_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	return fd;
}

static void send_query(int fd, uint16_t id, const char *name, uint16_t qtype)
{
	uint8_t buf[512];
	size_t len = build_query(buf, id, name, qtype);
	struct sockaddr_in to = resolver_addr();

	cr_assert_eq(sendto(fd, buf, len, 0, (struct sockaddr *)&to, sizeof(to)), (ssize_t)len);
}

/* Runs the loop until fd is readable or timeout_ms have passed. */
static bool run_until_readable(int fd, unsigned timeout_ms)
{
	uint64_t end = now_usec() + (uint64_t)timeout_ms * 1000;

	while (!readable(fd) && now_usec() < end)
		cr_assert_geq(event_loop_run_once(f.loop, 10), 0);
	return readable(fd);
}

static void run_for(unsigned ms)
{
	uint64_t end = now_usec() + (uint64_t)ms * 1000;

	while (now_usec() < end)
		cr_assert_geq(event_loop_run_once(f.loop, 10), 0);
}

static size_t recv_answer(int fd, struct dns_answer *a)
{
	uint8_t buf[DNS_MAX_MESSAGE];
	ssize_t n;

	cr_assert(run_until_readable(fd, 2000), "no answer");
	n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
	cr_assert_gt(n, 0);
	cr_assert_eq(dns_parse_response(buf, (size_t)n, a), 0);
	return (size_t)n;
}

static unsigned count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	unsigned n = 0;

	cr_assert_not_null(d);
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

static void assert_real_answer(const struct dns_answer *a, uint16_t id, const char *name)
{
	cr_assert_eq(a->id, id);
	cr_assert_eq(a->rcode, DNS_RCODE_NOERROR);
	cr_assert_str_eq(a->q.name, name);
	cr_assert_eq(a->n_addrs, 2);
	cr_assert_eq(a->addrs[0], ANSWER_ADDR1);
	cr_assert_eq(a->addrs[1], ANSWER_ADDR2);
}

Test(resolver, refused_name_gets_nxdomain_without_upstream)
{
	struct dns_answer a;

	upstream_open(&f.up[0], UPSTREAM_ANSWER);
	start(1, 0);
	f.client_fd = client_open(SOCK_DGRAM, LOCALHOST);
	send_query(f.client_fd, 0x4242, "Refused.Test", DNS_TYPE_A);
	recv_answer(f.client_fd, &a);
	cr_assert_eq(a.id, 0x4242);
	cr_assert_eq(a.rcode, DNS_RCODE_NXDOMAIN);
	cr_assert_str_eq(a.q.name, "refused.test");
	cr_assert_eq(a.n_addrs, 0);
	cr_assert_eq(f.up[0].n_queries, 0);
	cr_assert_eq(f.n_answered, 0);
}

Test(resolver, allowed_query_is_forwarded_with_a_new_id)
{
	unsigned fds_before, n_same_id = 0;
	struct dns_answer a;

	upstream_open(&f.up[0], UPSTREAM_ANSWER);
	start(1, 0);
	f.client_fd = client_open(SOCK_DGRAM, LOCALHOST);
	fds_before = count_fds();
	/* the upstream's id is random: over four queries, at most one may equal the client's */
	for (unsigned i = 0; i < 4; i++) {
		f.n_answered = 0;
		send_query(f.client_fd, 0x1111, "www.Example.com", DNS_TYPE_A);
		recv_answer(f.client_fd, &a);
		assert_real_answer(&a, 0x1111, "www.example.com");
		cr_assert_eq(f.up[0].n_queries, i + 1);
		cr_assert_str_eq(f.up[0].last_name, "www.example.com");
		n_same_id += f.up[0].last_id == 0x1111;

		cr_assert_eq(f.n_answered, 1);
		cr_assert_eq(f.client_readable_at_answered, false);
		cr_assert_eq(f.answered_src, LOCALHOST);
		cr_assert_eq(f.answered_cookie, &cookie_marker);
		cr_assert_eq(f.answered.n_addrs, 2);
		cr_assert_eq(f.answered.addrs[0], ANSWER_ADDR1);
		cr_assert_eq(f.answered.ttls[0], 120);
		cr_assert_eq(f.answered.addrs[1], ANSWER_ADDR2);
		cr_assert_eq(f.answered.ttls[1], 30);
	}
	cr_assert_leq(n_same_id, 1);
	run_for(20);
	cr_assert_eq(count_fds(), fds_before, "the upstream socket is closed after the answer");
}

Test(resolver, aaaa_gets_an_empty_answer_without_upstream)
{
	struct dns_answer a;

	upstream_open(&f.up[0], UPSTREAM_ANSWER);
	start(1, 0);
	f.client_fd = client_open(SOCK_DGRAM, LOCALHOST);
	send_query(f.client_fd, 0x0a0a, "www.example.com", DNS_TYPE_AAAA);
	recv_answer(f.client_fd, &a);
	cr_assert_eq(a.id, 0x0a0a);
	cr_assert_eq(a.rcode, DNS_RCODE_NOERROR);
	cr_assert_eq(a.q.qtype, DNS_TYPE_AAAA);
	cr_assert_eq(a.n_addrs, 0);
	cr_assert_eq(f.up[0].n_queries, 0);
	cr_assert_eq(f.n_decide, 1);
}

Test(resolver, unknown_source_gets_no_answer)
{
	_cleanup_close_ int other = -1;
	struct dns_answer a;

	upstream_open(&f.up[0], UPSTREAM_ANSWER);
	start(1, 0);
	other = client_open(SOCK_DGRAM, OTHER_HOST);
	send_query(other, 0x0b0b, "www.example.com", DNS_TYPE_A);
	cr_assert_eq(run_until_readable(other, 300), false);
	cr_assert_eq(f.n_decide, 1);
	cr_assert_eq(f.up[0].n_queries, 0);

	/* the positive control: the same query from a known source */
	f.client_fd = client_open(SOCK_DGRAM, LOCALHOST);
	send_query(f.client_fd, 0x0b0b, "www.example.com", DNS_TYPE_A);
	recv_answer(f.client_fd, &a);
	assert_real_answer(&a, 0x0b0b, "www.example.com");
}

Test(resolver, malformed_query_is_dropped)
{
	static const uint8_t junk[] = { 0x12, 0x34, 0x01, 0x00, 0x00, 0x01, 0, 0, 0, 0, 0,
					0,    3,    'a',  '.',	'b',  0,    0, 1, 0, 1 };
	struct sockaddr_in to;
	struct dns_answer a;

	upstream_open(&f.up[0], UPSTREAM_ANSWER);
	start(1, 0);
	to = resolver_addr();
	f.client_fd = client_open(SOCK_DGRAM, LOCALHOST);
	cr_assert_eq(sendto(f.client_fd, junk, sizeof(junk), 0, (struct sockaddr *)&to, sizeof(to)),
		     (ssize_t)sizeof(junk));
	cr_assert_eq(run_until_readable(f.client_fd, 300), false);
	cr_assert_eq(f.n_decide, 0);

	send_query(f.client_fd, 0x0c0c, "a.b", DNS_TYPE_A);
	recv_answer(f.client_fd, &a);
	assert_real_answer(&a, 0x0c0c, "a.b");
}

Test(resolver, spoofed_answers_are_ignored)
{
	struct dns_answer a;

	upstream_open(&f.up[0], UPSTREAM_SPOOF_FIRST);
	start(1, 0);
	f.client_fd = client_open(SOCK_DGRAM, LOCALHOST);
	send_query(f.client_fd, 0x5151, "www.example.com", DNS_TYPE_A);
	recv_answer(f.client_fd, &a);
	assert_real_answer(&a, 0x5151, "www.example.com");
	cr_assert_eq(f.n_answered, 1);
	cr_assert_eq(f.answered.addrs[0], ANSWER_ADDR1);
	cr_assert_eq(run_until_readable(f.client_fd, 100), false, "one answer only");
}

Test(resolver, answer_from_another_address_is_not_read)
{
	_cleanup_close_ int offpath = -1;
	static const uint32_t spoof[] = { SPOOF_ADDR }, ttl[] = { 1 };
	uint8_t buf[DNS_MAX_MESSAGE];
	struct dns_question q;
	struct dns_answer a;
	size_t len;

	/* The upstream keeps the query; an answer with the right id and question is sent to
	 * the resolver's upstream socket from another port first. */
	upstream_open(&f.up[0], UPSTREAM_SILENT);
	start(1, 0);
	f.client_fd = client_open(SOCK_DGRAM, LOCALHOST);
	send_query(f.client_fd, 0x6161, "www.example.com", DNS_TYPE_A);
	while (f.up[0].n_queries == 0)
		cr_assert_geq(event_loop_run_once(f.loop, 100), 0);
	memcpy(buf, f.up[0].last_query, f.up[0].last_len);
	cr_assert_eq(dns_parse_query(buf, f.up[0].last_len, &q), 0);
	len = build_answer(buf, q.end, spoof, ttl, 1);

	offpath = client_open(SOCK_DGRAM, LOCALHOST);
	cr_assert_eq(sendto(offpath, buf, len, 0, (struct sockaddr *)&f.up[0].last_from,
			    sizeof(f.up[0].last_from)),
		     (ssize_t)len);
	cr_assert_eq(run_until_readable(f.client_fd, 200), false);
	cr_assert_eq(f.n_answered, 0);

	/* the positive control: the same bytes from the upstream's own socket */
	cr_assert_eq(sendto(f.up[0].fd, buf, len, 0, (struct sockaddr *)&f.up[0].last_from,
			    sizeof(f.up[0].last_from)),
		     (ssize_t)len);
	recv_answer(f.client_fd, &a);
	cr_assert_eq(a.id, 0x6161);
	cr_assert_eq(a.n_addrs, 1);
	cr_assert_eq(a.addrs[0], SPOOF_ADDR);
	cr_assert_eq(f.n_answered, 1);
}

Test(resolver, forget_drops_pending_queries)
{
	unsigned fds_before;
	int other = 0;

	upstream_open(&f.up[0], UPSTREAM_SILENT);
	start(1, 100);
	f.client_fd = client_open(SOCK_DGRAM, LOCALHOST);
	fds_before = count_fds();
	send_query(f.client_fd, 0x3131, "www.example.com", DNS_TYPE_A);
	while (f.up[0].n_queries == 0)
		cr_assert_geq(event_loop_run_once(f.loop, 100), 0);

	/* another cookie: nothing dropped, the SERVFAIL still comes after the timeout */
	resolver_forget(f.r, &other);
	cr_assert(run_until_readable(f.client_fd, 2000));
	cr_assert_gt(recv(f.client_fd, (char[512]){}, 512, 0), 0);

	send_query(f.client_fd, 0x3232, "www.example.com", DNS_TYPE_A);
	while (f.up[0].n_queries == 1)
		cr_assert_geq(event_loop_run_once(f.loop, 100), 0);
	resolver_forget(f.r, &cookie_marker);
	cr_assert_eq(run_until_readable(f.client_fd, 300), false, "no answer once forgotten");
	cr_assert_eq(f.n_answered, 0);
	cr_assert_eq(count_fds(), fds_before);
}

Test(resolver, silent_upstream_gets_servfail)
{
	struct dns_answer a;
	unsigned fds_before;
	uint64_t t0;

	upstream_open(&f.up[0], UPSTREAM_SILENT);
	start(1, 100);
	f.client_fd = client_open(SOCK_DGRAM, LOCALHOST);
	fds_before = count_fds();
	t0 = now_usec();
	send_query(f.client_fd, 0x7171, "www.example.com", DNS_TYPE_A);
	recv_answer(f.client_fd, &a);
	cr_assert_geq(now_usec() - t0, 100 * 1000);
	cr_assert_eq(a.id, 0x7171);
	cr_assert_eq(a.rcode, DNS_RCODE_SERVFAIL);
	cr_assert_str_eq(a.q.name, "www.example.com");
	cr_assert_eq(f.up[0].n_queries, 1);
	cr_assert_eq(f.n_answered, 0);
	run_for(20);
	cr_assert_eq(count_fds(), fds_before);
}

Test(resolver, next_upstream_after_a_timeout)
{
	struct dns_answer a;

	upstream_open(&f.up[0], UPSTREAM_SILENT);
	upstream_open(&f.up[1], UPSTREAM_ANSWER);
	start(2, 100);
	f.client_fd = client_open(SOCK_DGRAM, LOCALHOST);
	send_query(f.client_fd, 0x8181, "www.example.com", DNS_TYPE_A);
	recv_answer(f.client_fd, &a);
	assert_real_answer(&a, 0x8181, "www.example.com");
	cr_assert_eq(f.up[0].n_queries, 1);
	cr_assert_eq(f.up[1].n_queries, 1);
	cr_assert_eq(f.n_answered, 1);
}

Test(resolver, next_upstream_when_refused)
{
	struct dns_answer a;
	uint64_t t0;

	/* the first upstream is a closed port: the ICMP error moves on without waiting */
	upstream_open(&f.up[0], UPSTREAM_SILENT);
	upstream_open(&f.up[1], UPSTREAM_ANSWER);
	event_source_free(f.up[0].io);
	f.up[0].io = NULL;
	close(f.up[0].fd);
	f.up[0].fd = -1;
	start(2, 10000);
	f.client_fd = client_open(SOCK_DGRAM, LOCALHOST);
	t0 = now_usec();
	send_query(f.client_fd, 0x9191, "www.example.com", DNS_TYPE_A);
	recv_answer(f.client_fd, &a);
	cr_assert_lt(now_usec() - t0, 2000 * 1000);
	assert_real_answer(&a, 0x9191, "www.example.com");
	cr_assert_eq(f.up[1].n_queries, 1);
}

static void tcp_send(int fd, const uint8_t *msg, size_t len)
{
	uint8_t buf[2 + 512];

	buf[0] = (uint8_t)(len >> 8);
	buf[1] = (uint8_t)len;
	memcpy(buf + 2, msg, len);
	cr_assert_eq(send(fd, buf, len + 2, MSG_NOSIGNAL), (ssize_t)len + 2);
}

static void tcp_recv_answer(int fd, struct dns_answer *a)
{
	uint8_t buf[DNS_MAX_MESSAGE];
	size_t len;

	cr_assert(run_until_readable(fd, 2000), "no answer");
	cr_assert_eq(recv(fd, buf, 2, MSG_WAITALL), 2);
	len = (size_t)buf[0] << 8 | buf[1];
	cr_assert_eq(recv(fd, buf, len, MSG_WAITALL), (ssize_t)len);
	cr_assert_eq(dns_parse_response(buf, len, a), 0);
}

static int tcp_connect(uint32_t src)
{
	int fd = client_open(SOCK_STREAM, src);
	struct sockaddr_in to = resolver_addr();

	cr_assert_eq(connect(fd, (struct sockaddr *)&to, sizeof(to)), 0);
	return fd;
}

Test(resolver, tcp)
{
	uint8_t q[512];
	struct dns_answer a;
	size_t len;

	upstream_open(&f.up[0], UPSTREAM_ANSWER);
	start(1, 0);
	f.client_fd = tcp_connect(LOCALHOST);

	/* forwarded (over UDP to the upstream), two queries on one connection */
	for (uint16_t id = 1; id <= 2; id++) {
		len = build_query(q, id, "www.example.com", DNS_TYPE_A);
		tcp_send(f.client_fd, q, len);
		tcp_recv_answer(f.client_fd, &a);
		assert_real_answer(&a, id, "www.example.com");
		cr_assert_eq(f.n_answered, id);
		cr_assert_eq(f.client_readable_at_answered, false);
	}
	cr_assert_eq(f.up[0].n_queries, 2);

	/* refused */
	len = build_query(q, 3, "refused.test", DNS_TYPE_A);
	tcp_send(f.client_fd, q, len);
	tcp_recv_answer(f.client_fd, &a);
	cr_assert_eq(a.id, 3);
	cr_assert_eq(a.rcode, DNS_RCODE_NXDOMAIN);

	/* malformed: the connection is closed */
	q[13] = '.';
	tcp_send(f.client_fd, q, len);
	cr_assert(run_until_readable(f.client_fd, 2000));
	cr_assert_eq(recv(f.client_fd, q, sizeof(q), 0), 0);
}

Test(resolver, tcp_unknown_source_and_bad_length)
{
	_cleanup_close_ int other = -1, zero = -1;
	uint8_t q[512];
	size_t len;

	upstream_open(&f.up[0], UPSTREAM_ANSWER);
	start(1, 0);

	other = tcp_connect(OTHER_HOST);
	len = build_query(q, 1, "www.example.com", DNS_TYPE_A);
	tcp_send(other, q, len);
	cr_assert(run_until_readable(other, 2000));
	cr_assert_eq(recv(other, q, sizeof(q), 0), 0);
	cr_assert_eq(f.up[0].n_queries, 0);

	zero = tcp_connect(LOCALHOST);
	cr_assert_eq(send(zero, "\x00\x00", 2, MSG_NOSIGNAL), 2);
	cr_assert(run_until_readable(zero, 2000));
	cr_assert_eq(recv(zero, q, sizeof(q), 0), 0);

	f.client_fd = tcp_connect(LOCALHOST);
	cr_assert_eq(send(f.client_fd, "\x10\x01", 2, MSG_NOSIGNAL), 2); /* 4097 */
	cr_assert(run_until_readable(f.client_fd, 2000));
	cr_assert_eq(recv(f.client_fd, q, sizeof(q), 0), 0);
}

Test(resolver, tcp_connection_limit)
{
	int fds[RESOLVER_MAX_TCP];
	_cleanup_close_ int over = -1;
	uint8_t q[512], buf[16];
	struct dns_answer a;
	size_t len;

	upstream_open(&f.up[0], UPSTREAM_ANSWER);
	start(1, 0);
	/* accepted one by one, as the listen backlog is shorter than the limit */
	for (size_t i = 0; i < ELEMENTSOF(fds); i++) {
		fds[i] = tcp_connect(LOCALHOST);
		cr_assert_geq(event_loop_run_once(f.loop, 100), 0);
	}
	run_for(50);

	/* one more: accepted and closed at once */
	over = tcp_connect(LOCALHOST);
	cr_assert(run_until_readable(over, 2000));
	cr_assert_eq(recv(over, buf, sizeof(buf), 0), 0);

	/* the positive control: each of the others still answers */
	len = build_query(q, 7, "refused.test", DNS_TYPE_A);
	for (size_t i = 0; i < ELEMENTSOF(fds); i++) {
		tcp_send(fds[i], q, len);
		tcp_recv_answer(fds[i], &a);
		cr_assert_eq(a.rcode, DNS_RCODE_NXDOMAIN);
	}
	/* and once one is gone, a new connection is served */
	close(fds[0]);
	run_for(50);
	fds[0] = tcp_connect(LOCALHOST);
	tcp_send(fds[0], q, len);
	tcp_recv_answer(fds[0], &a);
	cr_assert_eq(a.id, 7);
	for (size_t i = 0; i < ELEMENTSOF(fds); i++)
		close(fds[i]);
}

Test(resolver, tcp_client_gone_while_pending)
{
	uint8_t q[512];
	size_t len;
	unsigned fds_before;
	int fd;

	upstream_open(&f.up[0], UPSTREAM_SILENT);
	start(1, 100);
	fds_before = count_fds();
	fd = tcp_connect(LOCALHOST);
	len = build_query(q, 1, "www.example.com", DNS_TYPE_A);
	tcp_send(fd, q, len);
	while (f.up[0].n_queries == 0)
		cr_assert_geq(event_loop_run_once(f.loop, 100), 0);
	close(fd);
	run_for(300); /* past the timeout: nothing to answer, nothing left open */
	cr_assert_eq(count_fds(), fds_before);
}

/* Sends n queries for name from fd with ids from id0, in batches that the resolver reads
 * before the next (so that no datagram is lost to a full socket buffer). */
static void send_batched(int fd, uint16_t id0, unsigned n, const char *name)
{
	unsigned decided = f.n_decide;

	for (unsigned i = 0; i < n; i++) {
		send_query(fd, (uint16_t)(id0 + i), name, DNS_TYPE_A);
		if (i % 32 == 31 || i == n - 1)
			while (f.n_decide < decided + i + 1)
				cr_assert_geq(event_loop_run_once(f.loop, 100), 0);
	}
}

/* Runs the loop until the upstream u has seen n queries (2 s at most), then asserts it saw n. */
static void upstream_wait(struct upstream *u, unsigned n)
{
	uint64_t end = now_usec() + 2000000;

	while (u->n_queries < n && now_usec() < end)
		cr_assert_geq(event_loop_run_once(f.loop, 10), 0);
	run_for(20);
	cr_assert_eq(u->n_queries, n, "the upstream saw %u queries, not %u", u->n_queries, n);
}

/* Reads the n answers fd has (each within 2 s), asserting their rcode; returns a bitmap of
 * their ids (ids < 512). */
static void recv_rcodes(int fd, unsigned n, uint8_t rcode, bool *ids)
{
	struct dns_answer a;

	for (unsigned i = 0; i < n; i++) {
		recv_answer(fd, &a);
		cr_assert_eq(a.rcode, rcode, "answer %u of %u: rcode %u, id %u", i, n, a.rcode,
			     a.id);
		cr_assert_lt(a.id, 512);
		cr_assert_not(ids[a.id], "id %u twice", a.id);
		ids[a.id] = true;
	}
}

/* The case: one workspace floods a name its upstream never answers; another one's
 * lookups are all answered, and the flood is shed at the flooder's own bounds. */
Test(resolver, flood_costs_its_own_workspace)
{
	_cleanup_close_ int flood = -1;
	bool ids[512] = {};
	struct dns_answer a;

	upstream_open(&f.up[0], UPSTREAM_ANSWER);
	start(1, 10000);
	flood = client_open(SOCK_DGRAM, FLOOD_HOST);
	/* more than the whole table, read as they come: 32 pending, the others SERVFAIL at once */
	for (unsigned i = 0; i < 300; i += 30) {
		send_batched(flood, (uint16_t)i, 30, "slow.example.com");
		while (readable(flood))
			recv_rcodes(flood, 1, DNS_RCODE_SERVFAIL, ids);
	}
	upstream_wait(&f.up[0], RESOLVER_CLIENT_PENDING);
	for (unsigned i = RESOLVER_CLIENT_PENDING; i < 300; i++)
		if (!ids[i])
			recv_rcodes(flood, 1, DNS_RCODE_SERVFAIL, ids);
	cr_assert_eq(f.n_shed[FLOOD_HOST & 7], 300 - RESOLVER_CLIENT_PENDING);
	for (unsigned i = 0; i < RESOLVER_CLIENT_PENDING; i++)
		cr_assert_not(ids[i], "a pending query %u was answered", i);

	/* the positive control: another workspace's lookups, while the flood's are pending */
	f.client_fd = client_open(SOCK_DGRAM, LOCALHOST);
	for (unsigned i = 0; i < 7; i++) {
		send_query(f.client_fd, (uint16_t)(0x700 + i), "www.example.com", DNS_TYPE_A);
		recv_answer(f.client_fd, &a);
		assert_real_answer(&a, (uint16_t)(0x700 + i), "www.example.com");
	}
	cr_assert_eq(f.n_shed[LOCALHOST & 7], 0);
}

/* The table full of two clients' queries: a third client below its fair share takes the slot
 * of the oldest query of the client holding the most; that client, above its share, cannot
 * take a slot back. */
Test(resolver, full_table_is_shared_fairly)
{
	_cleanup_close_ int big = -1, small = -1, third = -1;
	bool ids[512] = {};
	struct dns_answer a;

	upstream_open(&f.up[0], UPSTREAM_SILENT);
	start(1, 10000);
	resolver_set_client_limits(f.r, 200, 1000, 1000);
	big = client_open(SOCK_DGRAM, FLOOD_HOST);
	small = client_open(SOCK_DGRAM, 0x7f000004);
	third = client_open(SOCK_DGRAM, 0x7f000005);
	send_batched(big, 0, 200, "www.example.com");
	send_batched(small, 0, RESOLVER_MAX_PENDING - 200, "www.example.com");
	upstream_wait(&f.up[0], RESOLVER_MAX_PENDING);
	cr_assert_eq(run_until_readable(big, 50), false);
	cr_assert_eq(run_until_readable(small, 0), false);

	/* the third client: forwarded; the big one's oldest (id 0) answered SERVFAIL */
	send_query(third, 0x300, "www.example.com", DNS_TYPE_A);
	recv_answer(big, &a);
	cr_assert_eq(a.rcode, DNS_RCODE_SERVFAIL);
	cr_assert_eq(a.id, 0);
	upstream_wait(&f.up[0], RESOLVER_MAX_PENDING + 1);
	cr_assert_eq(run_until_readable(third, 0), false);
	cr_assert_eq(f.n_shed[FLOOD_HOST & 7], 1);

	/* the big one, above its share (256 / 3): its own new query is refused */
	send_query(big, 0x301, "www.example.com", DNS_TYPE_A);
	recv_answer(big, &a);
	cr_assert_eq(a.rcode, DNS_RCODE_SERVFAIL);
	cr_assert_eq(a.id, 0x301);
	cr_assert_eq(f.up[0].n_queries, RESOLVER_MAX_PENDING + 1);
	cr_assert_eq(f.n_shed[FLOOD_HOST & 7], 2);

	/* the small one, below its share: the big one's next oldest (id 1) goes */
	send_query(small, 0x302, "www.example.com", DNS_TYPE_A);
	recv_answer(big, &a);
	cr_assert_eq(a.rcode, DNS_RCODE_SERVFAIL);
	cr_assert_eq(a.id, 1);
	upstream_wait(&f.up[0], RESOLVER_MAX_PENDING + 2);
	cr_assert_eq(run_until_readable(small, 0), false);
	cr_assert_eq(f.n_shed[0x7f000004 & 7], 0);
	cr_assert_eq(f.n_shed[0x7f000005 & 7], 0);
	(void)ids;
}

/* A client's own bound of pending queries. */
Test(resolver, per_client_pending_bound)
{
	bool ids[512] = {};

	upstream_open(&f.up[0], UPSTREAM_SILENT);
	start(1, 10000);
	f.client_fd = client_open(SOCK_DGRAM, LOCALHOST);
	send_batched(f.client_fd, 0, RESOLVER_CLIENT_PENDING + 4, "www.example.com");
	recv_rcodes(f.client_fd, 4, DNS_RCODE_SERVFAIL, ids);
	for (unsigned i = RESOLVER_CLIENT_PENDING; i < RESOLVER_CLIENT_PENDING + 4; i++)
		cr_assert(ids[i], "id %u not refused", i);
	upstream_wait(&f.up[0], RESOLVER_CLIENT_PENDING);
	cr_assert_eq(run_until_readable(f.client_fd, 50), false);
	cr_assert_eq(f.n_shed[LOCALHOST & 7], 4);
}

/* The rate: a burst, then SERVFAIL until the bucket refills. */
Test(resolver, per_client_rate)
{
	struct dns_answer a;

	upstream_open(&f.up[0], UPSTREAM_ANSWER);
	start(1, 0);
	resolver_set_client_limits(f.r, 32, 1, 5);
	f.client_fd = client_open(SOCK_DGRAM, LOCALHOST);
	for (unsigned i = 0; i < 5; i++) {
		send_query(f.client_fd, (uint16_t)i, "www.example.com", DNS_TYPE_A);
		recv_answer(f.client_fd, &a);
		assert_real_answer(&a, (uint16_t)i, "www.example.com");
	}
	send_query(f.client_fd, 5, "www.example.com", DNS_TYPE_A);
	recv_answer(f.client_fd, &a);
	cr_assert_eq(a.rcode, DNS_RCODE_SERVFAIL);
	cr_assert_eq(f.up[0].n_queries, 5);
	/* refused names and AAAA questions cost no token */
	send_query(f.client_fd, 6, "refused.test", DNS_TYPE_A);
	recv_answer(f.client_fd, &a);
	cr_assert_eq(a.rcode, DNS_RCODE_NXDOMAIN);
	send_query(f.client_fd, 7, "www.example.com", DNS_TYPE_AAAA);
	recv_answer(f.client_fd, &a);
	cr_assert_eq(a.rcode, DNS_RCODE_NOERROR);
	/* a second later, one more */
	run_for(1100);
	send_query(f.client_fd, 8, "www.example.com", DNS_TYPE_A);
	recv_answer(f.client_fd, &a);
	assert_real_answer(&a, 8, "www.example.com");
	cr_assert_eq(f.n_shed[LOCALHOST & 7], 1);
}

/* Nothing of the client's message but its question reaches the upstream: not its flags, not
 * its EDNS size, DO bit or options; the client gets the answer with its id and spelling. */
Test(resolver, upstream_query_is_rebuilt)
{
	/* clang-format off */
	static const uint8_t opt[] = { 0, 0, 41, 0x10, 0x00, 0, 0, 0x80, 0, 0, 8,
				       0xfd, 0xe9, 0, 4, 'l', 'e', 'a', 'k' };
	/* clang-format on */
	uint8_t q[512], want[512], got[DNS_MAX_MESSAGE];
	size_t len = build_query(q, 0x5151, "wWw.ExAmple.cOm", DNS_TYPE_A), qend = len;
	size_t want_len = build_query(want, 0, "www.example.com", DNS_TYPE_A);
	struct sockaddr_in to;
	struct dns_answer a;
	ssize_t n;

	q[2] = 0x01 | 0x04; /* RD, AA */
	q[3] = 0x30;	    /* AD, CD */
	q[11] = 1;
	memcpy(q + len, opt, sizeof(opt));
	len += sizeof(opt);
	/* what the upstream must get: RD, one question in lower case, our OPT (1232, no DO) */
	want[11] = 1;
	memcpy(want + want_len, "\x00\x00\x29\x04\xd0\x00\x00\x00\x00\x00\x00", 11);
	want_len += 11;

	upstream_open(&f.up[0], UPSTREAM_ANSWER);
	start(1, 0);
	f.client_fd = client_open(SOCK_DGRAM, LOCALHOST);
	to = resolver_addr();
	cr_assert_eq(sendto(f.client_fd, q, len, 0, (struct sockaddr *)&to, sizeof(to)),
		     (ssize_t)len);
	cr_assert(run_until_readable(f.client_fd, 2000), "no answer");
	n = recv(f.client_fd, got, sizeof(got), MSG_DONTWAIT);
	cr_assert_gt(n, 0);

	cr_assert_eq(f.up[0].n_queries, 1);
	cr_assert_eq(f.up[0].last_len, want_len);
	cr_assert_eq(memcmp(f.up[0].last_query + 2, want + 2, want_len - 2), 0,
		     "the upstream got flags %02x%02x, counts %02x%02x %02x%02x",
		     f.up[0].last_query[2], f.up[0].last_query[3], f.up[0].last_query[5],
		     f.up[0].last_query[11], f.up[0].last_query[want_len - 8],
		     f.up[0].last_query[want_len - 7]);
	/* the client's answer: its id, its RD, its spelling of the question */
	cr_assert_eq(dns_parse_response(got, (size_t)n, &a), 0);
	assert_real_answer(&a, 0x5151, "www.example.com");
	cr_assert_eq(got[2] & 0x01, 0x01);
	cr_assert_eq(memcmp(got + 12, q + 12, qend - 12), 0);
}

/* Messages carrying more than a question get FORMERR and are never forwarded; from no
 * workspace, nothing. */
Test(resolver, more_than_a_question_gets_formerr)
{
	static const uint8_t txt[] = { 0xc0, 0x0c, 0, 16, 0,   1,   0,	 0,  0,
				       0,    0,	   5, 4,  'l', 'e', 'a', 'k' };
	struct sockaddr_in to;
	struct dns_answer a;
	_cleanup_close_ int other = -1;

	upstream_open(&f.up[0], UPSTREAM_ANSWER);
	start(1, 0);
	f.client_fd = client_open(SOCK_DGRAM, LOCALHOST);
	other = client_open(SOCK_DGRAM, OTHER_HOST);
	to = resolver_addr();
	/* count at 4: a second question (the same one); 6, 8, 10: a TXT record */
	for (size_t count = 4; count <= 10; count += 2) {
		uint8_t q[512];
		size_t len = build_query(q, (uint16_t)count, "www.example.com", DNS_TYPE_A);
		if (count == 4) {
			memcpy(q + len, "\xc0\x0c\x00\x01\x00\x01", 6);
			len += 6;
		} else {
			memcpy(q + len, txt, sizeof(txt));
			len += sizeof(txt);
		}
		q[count + 1]++;
		cr_assert_eq(sendto(f.client_fd, q, len, 0, (struct sockaddr *)&to, sizeof(to)),
			     (ssize_t)len);
		recv_answer(f.client_fd, &a);
		cr_assert_eq(a.id, count);
		cr_assert_eq(a.rcode, DNS_RCODE_FORMERR, "count at %zu", count);
		cr_assert_eq(sendto(other, q, len, 0, (struct sockaddr *)&to, sizeof(to)),
			     (ssize_t)len);
		cr_assert_eq(run_until_readable(other, 100), false);
	}
	cr_assert_eq(f.up[0].n_queries, 0);

	/* the positive control: the plain query */
	send_query(f.client_fd, 0x0d0d, "www.example.com", DNS_TYPE_A);
	recv_answer(f.client_fd, &a);
	assert_real_answer(&a, 0x0d0d, "www.example.com");
}

/* An answer larger than a UDP client takes (512 without EDNS) comes truncated, so that it asks
 * again over TCP; with EDNS 4096, or over TCP, whole. */
Test(resolver, large_answer_truncated_for_a_plain_udp_client)
{
	uint8_t q[512];
	size_t len;
	struct sockaddr_in to;
	struct dns_answer a;
	_cleanup_close_ int tcp = -1;

	upstream_open(&f.up[0], UPSTREAM_LARGE);
	start(1, 0);
	f.client_fd = client_open(SOCK_DGRAM, LOCALHOST);
	send_query(f.client_fd, 0x0e0e, "www.example.com", DNS_TYPE_A);
	cr_assert_eq(recv_answer(f.client_fd, &a), 33);
	cr_assert(a.truncated);
	cr_assert_eq(a.id, 0x0e0e);
	cr_assert_eq(a.n_addrs, 0);

	len = build_query(q, 0x0f0f, "www.example.com", DNS_TYPE_A);
	q[11] = 1;
	memcpy(q + len, "\x00\x00\x29\x10\x00\x00\x00\x00\x00\x00\x00", 11);
	len += 11;
	to = resolver_addr();
	cr_assert_eq(sendto(f.client_fd, q, len, 0, (struct sockaddr *)&to, sizeof(to)),
		     (ssize_t)len);
	cr_assert_eq(recv_answer(f.client_fd, &a), 33 + LARGE_N * 16);
	cr_assert_not(a.truncated);
	cr_assert_eq(a.n_addrs, DNS_MAX_ADDRS);

	tcp = tcp_connect(LOCALHOST);
	len = build_query(q, 0x1010, "www.example.com", DNS_TYPE_A);
	tcp_send(tcp, q, len);
	tcp_recv_answer(tcp, &a);
	cr_assert_not(a.truncated);
	cr_assert_eq(a.n_addrs, DNS_MAX_ADDRS);
}

Test(resolver_config, parse_upstream)
{
	struct sockaddr_in sa;

	cr_assert_eq(resolver_parse_upstream("192.0.2.1", &sa), 0);
	cr_assert_eq(sa.sin_family, AF_INET);
	cr_assert_eq(ntohl(sa.sin_addr.s_addr), 0xc0000201);
	cr_assert_eq(ntohs(sa.sin_port), 53);
	cr_assert_eq(resolver_parse_upstream("192.0.2.1:5353", &sa), 0);
	cr_assert_eq(ntohs(sa.sin_port), 5353);
	cr_assert_eq(resolver_parse_upstream("127.0.0.1:65535", &sa), 0);
	cr_assert_eq(ntohs(sa.sin_port), 65535);

	static const char *const bad[] = {
		"",
		"192.0.2",
		"192.0.2.1.5",
		"192.0.2.256",
		"192.0.2.1:",
		"192.0.2.1:0",
		"192.0.2.1:65536",
		"192.0.2.1:053",
		"192.0.2.1:5x",
		":53",
		"::1",
		"[::1]:53",
		" 192.0.2.1",
		"192.0.2.1 ",
		"192.0.2.1:53:53",
		"192.0.2.01",
		"example.com",
		"192.0.2.1:+53",
	};
	for (size_t i = 0; i < ELEMENTSOF(bad); i++)
		cr_assert_eq(resolver_parse_upstream(bad[i], &sa), -EINVAL, "\"%s\"", bad[i]);
}

static void write_tmp(char *path, const char *text)
{
	int fd = mkstemp(path);

	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
}

Test(resolver_config, resolv_conf)
{
	char path[] = "/tmp/test-net-resolver-XXXXXX";
	struct sockaddr_in ups[RESOLVER_MAX_UPSTREAMS];
	size_t n = 99;

	write_tmp(path, "# comment\n"
			"; comment\n"
			"search example.com\n"
			"nameserver 192.0.2.1\n"
			"nameserver 2001:db8::1\n"
			"nameserver\t198.51.100.2  # trailing comment\n"
			"options edns0\n"
			"nameserver 203.0.113.3\n"
			"nameserver 203.0.113.4\n"
			"nameserver 203.0.113.5\n");
	cr_assert_eq(resolver_upstreams_from_resolv_conf(path, ups, 3, &n), 0);
	cr_assert_eq(n, 3);
	cr_assert_eq(ntohl(ups[0].sin_addr.s_addr), 0xc0000201);
	cr_assert_eq(ntohl(ups[1].sin_addr.s_addr), 0xc6336402);
	cr_assert_eq(ntohl(ups[2].sin_addr.s_addr), 0xcb007103);
	cr_assert_eq(ntohs(ups[2].sin_port), 53);
	unlink(path);

	char bad[] = "/tmp/test-net-resolver-XXXXXX";
	write_tmp(bad, "nameserver 192.0.2.300\n");
	cr_assert_eq(resolver_upstreams_from_resolv_conf(bad, ups, 3, &n), -EINVAL);
	unlink(bad);

	char empty[] = "/tmp/test-net-resolver-XXXXXX";
	write_tmp(empty, "search example.com\n");
	cr_assert_eq(resolver_upstreams_from_resolv_conf(empty, ups, 3, &n), 0);
	cr_assert_eq(n, 0);
	unlink(empty);

	cr_assert_eq(resolver_upstreams_from_resolv_conf("/nonexistent/resolv.conf", ups, 3, &n),
		     -ENOENT);
}
