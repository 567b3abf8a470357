/* SPDX-License-Identifier: MIT */
/* The firewall against the kernel. Each test (Criterion forks one process per test) moves
 * itself into a network namespace of its own, the "router", and builds a small world there with
 * ip(8):
 *
 *   workspace ns  eth0 10.231.0.5/24, default via 10.231.0.1  (second: 10.231.0.6)
 *                   | veth (bridge ports sv0ae70005, sv0ae70006: net.h's naming)
 *   router ns     bridge br0 10.231.0.1/24;  rout 203.0.113.1/24;  rpriv 10.232.0.1/24
 *                   | veth                      | veth
 *   outside ns    eth0 203.0.113.2/24     private ns  eth0 10.232.0.2/24
 *                 lo 169.254.169.254 (the router's default route is the outside)
 *
 * Probes are real TCP connections and UDP datagrams from sockets made inside the workspace
 * namespace. Everything lives in namespaces that die with the test process, whatever happens:
 * the host's ruleset is never touched. Needs root. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "basic/cleanup.h"
#include "basic/json-util.h"
#include "basic/util.h"
#include "net/link.h"
#include "net/nft.h"

#define WS_ADDR 0x0ae70005u  /* 10.231.0.5 */
#define WS2_ADDR 0x0ae70006u /* 10.231.0.6 */
#define GW_ADDR 0x0ae70001u  /* 10.231.0.1 */
#define OUTSIDE "203.0.113.2"
#define PRIVATE "10.232.0.2"
#define ROUTER "10.231.0.1"
/* A probe that gets no answer in this time was dropped. */
#define DROP_MS 400

struct topo {
	int router, ws, ws2, out, priv; /* namespace fds */
	char table[32];
	struct nft *nft;
};

static struct topo T = { -1, -1, -1, -1, -1, "", NULL };

static void enter(int ns)
{
	cr_assert_eq(setns(ns, CLONE_NEWNET), 0, "setns: %m");
}

static void sh_in(int ns, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sh_in(int ns, const char *fmt, ...)
{
	char cmd[1024];
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	cr_assert_lt(r, (int)sizeof(cmd));
	enter(ns);
	r = system(cmd);
	enter(T.router);
	cr_assert_eq(r, 0, "'%s' failed (%d)", cmd, r);
}

/* A new namespace, kept by its fd (inherited by ip(8), which names it /proc/self/fd/N). */
static int new_ns(void)
{
	int fd;

	cr_assert_eq(unshare(CLONE_NEWNET), 0, "unshare: %m");
	fd = open("/proc/self/ns/net", O_RDONLY);
	cr_assert_geq(fd, 0);
	return fd;
}

static void link_ns(int ns, const char *addr, const char *gw)
{
	sh_in(ns, "ip link set lo up && ip addr add %s dev eth0 && ip link set eth0 up", addr);
	if (gw)
		sh_in(ns, "ip route add default via %s", gw);
}

static struct nft_base base_default(void)
{
	return (struct nft_base){ .bridge = "br0",
				  .gateway = GW_ADDR,
				  .range = 0x0ae70000u,
				  .prefix = 24,
				  .log_group = 7,
				  /* OUTSIDE is a documentation address */
				  .allow = NET_CLASS_BIT(NET_CLASS_DOCUMENTATION) };
}

static void topo_up(void)
{
	struct station_error e = {};
	int fd;

	if (geteuid() != 0)
		cr_skip_test("needs root");
	T.router = new_ns();
	T.ws = new_ns();
	T.ws2 = new_ns();
	T.out = new_ns();
	T.priv = new_ns();
	enter(T.router);
	sh_in(T.router,
	      "ip link set lo up && ip link add br0 type bridge && "
	      "ip addr add 10.231.0.1/24 dev br0 && ip link set br0 up && "
	      "ip link add sv0ae70005 type veth peer name eth0 netns /proc/self/fd/%d && "
	      "ip link set sv0ae70005 master br0 up && "
	      "ip link add sv0ae70006 type veth peer name eth0 netns /proc/self/fd/%d && "
	      "ip link set sv0ae70006 master br0 up && "
	      "ip link add rout type veth peer name eth0 netns /proc/self/fd/%d && "
	      "ip addr add 203.0.113.1/24 dev rout && ip link set rout up && "
	      "ip link add rpriv type veth peer name eth0 netns /proc/self/fd/%d && "
	      "ip addr add 10.232.0.1/24 dev rpriv && ip link set rpriv up && "
	      "ip route add default via 203.0.113.2",
	      T.ws, T.ws2, T.out, T.priv);
	link_ns(T.ws, "10.231.0.5/24", ROUTER);
	link_ns(T.ws2, "10.231.0.6/24", ROUTER);
	link_ns(T.out, OUTSIDE "/24", NULL);
	/* The metadata address lives outside too (the router's default route leads there). */
	sh_in(T.out, "ip addr add 169.254.169.254/32 dev lo");
	link_ns(T.priv, PRIVATE "/24", NULL);
	fd = open("/proc/sys/net/ipv4/ip_forward", O_WRONLY | O_CLOEXEC);
	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, "1", 1), 1);
	close(fd);
	snprintf(T.table, sizeof(T.table), "test_nft_%d", (int)getpid());
	cr_assert_eq(nft_open(T.table, &T.nft, &e), 0, "%s", e.message);
}

static void topo_down(void)
{
	/* The namespaces, and all in them, go with the process; the handle is all to free. */
	nft_close(T.nft);
	T.nft = NULL;
}

/* Probes */

static int socket_in(int ns, int type)
{
	int fd;

	enter(ns);
	fd = socket(AF_INET, type | SOCK_CLOEXEC, 0);
	enter(T.router);
	cr_assert_geq(fd, 0);
	return fd;
}

static struct sockaddr_in sin_of(const char *addr, uint16_t port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port) };

	cr_assert_eq(inet_pton(AF_INET, addr, &sa.sin_addr), 1);
	return sa;
}

static int tcp_listen(int ns, const char *addr, uint16_t port)
{
	struct sockaddr_in sa = sin_of(addr, port);
	int fd = socket_in(ns, SOCK_STREAM), one = 1;

	cr_assert_eq(setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)), 0);
	cr_assert_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0, "bind %s:%u: %m", addr, port);
	cr_assert_eq(listen(fd, 16), 0);
	cr_assert_eq(fd_set_nonblock(fd, true), 0);
	return fd;
}

/* 0 when a TCP connection from namespace ns to addr:port is established within ms, else the
 * error (-ETIMEDOUT: nothing came back). */
static int tcp_probe_from(int ns, const char *addr, uint16_t port, int ms)
{
	struct sockaddr_in sa = sin_of(addr, port);
	_cleanup_close_ int fd = socket_in(ns, SOCK_STREAM);
	struct pollfd p = { .fd = fd, .events = POLLOUT };
	socklen_t len = sizeof(int);
	int err = 0;

	cr_assert_eq(fd_set_nonblock(fd, true), 0);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
		return 0;
	cr_assert_eq(errno, EINPROGRESS);
	if (poll(&p, 1, ms) == 0)
		return -ETIMEDOUT;
	cr_assert_eq(getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len), 0);
	return -err;
}

/* A denial is a probe with no answer in DROP_MS; a success may take longer (the first ARP
 * exchange after a binding or a policy change). */
static int tcp_probe(const char *addr, uint16_t port)
{
	return tcp_probe_from(T.ws, addr, port, DROP_MS);
}

static int tcp_connects(const char *addr, uint16_t port)
{
	return tcp_probe_from(T.ws, addr, port, 3000);
}

/* The source address of the next connection the listener accepts. */
static void accept_peer(int lfd, char ret[INET_ADDRSTRLEN])
{
	struct pollfd p = { .fd = lfd, .events = POLLIN };
	struct sockaddr_in sa;
	socklen_t len = sizeof(sa);
	int fd;

	cr_assert_eq(poll(&p, 1, 2000), 1, "no connection to accept");
	fd = accept4(lfd, (struct sockaddr *)&sa, &len, SOCK_CLOEXEC);
	cr_assert_geq(fd, 0);
	close(fd);
	cr_assert_not_null(inet_ntop(AF_INET, &sa.sin_addr, ret, INET_ADDRSTRLEN));
}

/* Drains whatever a listener has queued (connections made by successful probes). */
static void drain(int lfd)
{
	int fd;

	while ((fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC)) >= 0)
		close(fd);
}

/* True when a datagram from the workspace reaches the bound UDP socket ufd (addr:port); waits
 * longer when it is expected to. */
static bool udp_probe(int ufd, const char *addr, uint16_t port, bool expect)
{
	struct sockaddr_in sa = sin_of(addr, port);
	_cleanup_close_ int fd = socket_in(T.ws, SOCK_DGRAM);
	struct pollfd p = { .fd = ufd, .events = POLLIN };
	char buf[16];

	cr_assert_eq(sendto(fd, "ping", 4, 0, (struct sockaddr *)&sa, sizeof(sa)), 4);
	if (poll(&p, 1, expect ? 3000 : DROP_MS) == 0)
		return false;
	cr_assert_eq(recv(ufd, buf, sizeof(buf), 0), 4);
	return true;
}

/* A datagram from the workspace with another's source address (IP_TRANSPARENT: not its own). */
static bool udp_spoof_probe(int ufd, const char *src, const char *addr, uint16_t port)
{
	struct sockaddr_in sa = sin_of(addr, port), from = sin_of(src, 0);
	_cleanup_close_ int fd = socket_in(T.ws, SOCK_DGRAM);
	struct pollfd p = { .fd = ufd, .events = POLLIN };
	int one = 1;
	char buf[16];

	cr_assert_eq(setsockopt(fd, IPPROTO_IP, IP_TRANSPARENT, &one, sizeof(one)), 0);
	cr_assert_eq(bind(fd, (struct sockaddr *)&from, sizeof(from)), 0, "bind %s: %m", src);
	cr_assert_eq(sendto(fd, "ping", 4, 0, (struct sockaddr *)&sa, sizeof(sa)), 4, "sendto: %m");
	if (poll(&p, 1, DROP_MS) == 0)
		return false;
	cr_assert_eq(recv(ufd, buf, sizeof(buf), 0), 4);
	return true;
}

static int udp_bind(int ns, const char *addr, uint16_t port)
{
	struct sockaddr_in sa = sin_of(addr, port);
	int fd = socket_in(ns, SOCK_DGRAM);

	cr_assert_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	return fd;
}

static uint64_t denied_now(void)
{
	uint64_t allowed, denied;

	cr_assert_eq(nft_workspace_counters(T.nft, "ws-1", &allowed, &denied), 0);
	return denied;
}

/* Far past the log's rate limit, every datagram is still counted and dropped: the limit guards
 * the log only. */
static void flood_dropped(int ufd)
{
	struct sockaddr_in sa = sin_of(OUTSIDE, 9000);
	_cleanup_close_ int fd = socket_in(T.ws, SOCK_DGRAM);
	struct pollfd p = { .fd = ufd, .events = POLLIN };
	uint64_t before = denied_now();

	for (int i = 0; i < 200; i++)
		cr_assert_eq(sendto(fd, "x", 1, 0, (struct sockaddr *)&sa, sizeof(sa)), 1);
	cr_assert_eq(poll(&p, 1, DROP_MS), 0, "a datagram passed");
	cr_assert_eq(denied_now() - before, 200);
}

/* Policies */

static struct net_rule cidr_rule(const char *net, unsigned prefix, enum net_proto proto,
				 const uint16_t *ports, size_t n_ports)
{
	struct net_rule r = { .kind = NET_RULE_CIDR, .prefix = prefix, .proto = proto };
	struct in_addr a;

	cr_assert_eq(inet_pton(AF_INET, net, &a), 1);
	r.addr = ntohl(a.s_addr);
	if (n_ports > 0)
		memcpy(r.ports, ports, n_ports * sizeof(*ports));
	r.n_ports = n_ports;
	return r;
}

static struct net_rule domain_rule(const char *name, enum net_proto proto, const uint16_t *ports,
				   size_t n_ports)
{
	struct net_rule r = { .kind = NET_RULE_DOMAIN, .domain = (char *)name, .proto = proto };

	if (n_ports > 0)
		memcpy(r.ports, ports, n_ports * sizeof(*ports));
	r.n_ports = n_ports;
	return r;
}

static uint32_t ip4(const char *s)
{
	struct in_addr a;

	cr_assert_eq(inet_pton(AF_INET, s, &a), 1);
	return ntohl(a.s_addr);
}

static void apply(const char *id, uint32_t addr, const struct net_policy *p)
{
	struct station_error e = {};

	cr_assert_eq(nft_workspace_apply(T.nft, id, addr, p, &e), 0, "apply %s: %s", id, e.message);
}

static void ensure(const struct nft_base *b)
{
	struct station_error e = {};

	cr_assert_eq(nft_base_ensure(T.nft, b, &e), 0, "%s", e.message);
}

/* `nft -j <what>` in the router namespace, parsed ("nftables" array); NULL when nft fails. */
static json_t *nft_json(const char *what)
{
	char cmd[256], buf[65536];
	size_t len;
	FILE *f;
	json_t *root, *items;

	snprintf(cmd, sizeof(cmd), "nft -j %s 2>/dev/null", what);
	f = popen(cmd, "r");
	cr_assert_not_null(f);
	len = fread(buf, 1, sizeof(buf) - 1, f);
	buf[len] = '\0';
	if (pclose(f) != 0)
		return NULL;
	root = json_loads(buf, 0, NULL);
	cr_assert_not_null(root, "nft -j %s: not JSON", what);
	items = json_incref(json_object_get(root, "nftables"));
	json_decref(root);
	return items;
}

/* The packets of a counter as `nft -j list counter` reports them. */
static uint64_t nft_counter_packets(const char *name)
{
	_cleanup_json_ json_t *items = NULL;
	char what[160];
	json_t *item;
	size_t i;

	snprintf(what, sizeof(what), "list counter inet %s %s", T.table, name);
	items = nft_json(what);
	cr_assert_not_null(items, "no counter %s", name);
	json_array_foreach(items, i, item) {
		json_t *c = json_object_get(item, "counter");
		json_t *packets = json_object_get(c, "packets");

		if (c && strcmp(json_string_value(json_object_get(c, "name")), name) == 0) {
			cr_assert(json_is_integer(packets));
			return (uint64_t)json_integer_value(packets);
		}
	}
	cr_assert_fail("nft listed no counter %s", name);
	return 0;
}

/* nft_workspace_counters() reads what nft(8) reads (no traffic may run meanwhile). */
static void assert_counters_as_nft(const char *id, const char *key, uint64_t *ret_allowed,
				   uint64_t *ret_denied)
{
	char allowed_name[96], denied_name[96];
	uint64_t allowed = UINT64_MAX, denied = UINT64_MAX;

	snprintf(allowed_name, sizeof(allowed_name), "ws_%s_allowed", key);
	snprintf(denied_name, sizeof(denied_name), "ws_%s_denied", key);
	cr_assert_eq(nft_workspace_counters(T.nft, id, &allowed, &denied), 0);
	cr_assert_eq(allowed, nft_counter_packets(allowed_name), "allowed %" PRIu64, allowed);
	cr_assert_eq(denied, nft_counter_packets(denied_name), "denied %" PRIu64, denied);
	*ret_allowed = allowed;
	*ret_denied = denied;
}

/* The configured timeout of addr in the set, 0 when absent. */
static long set_timeout(const char *set, const char *addr)
{
	_cleanup_json_ json_t *items = NULL;
	char what[128];
	json_t *item, *el;
	size_t i, j;

	snprintf(what, sizeof(what), "list set inet %s %s", T.table, set);
	items = nft_json(what);
	cr_assert_not_null(items, "no set %s", set);
	json_array_foreach(items, i, item) {
		json_t *elems = json_object_get(json_object_get(item, "set"), "elem");

		json_array_foreach(elems, j, el) {
			json_t *o = json_object_get(el, "elem");

			if (strcmp(json_string_value(json_object_get(o, "val")), addr) == 0)
				return json_integer_value(json_object_get(o, "timeout"));
		}
	}
	return 0;
}

static size_t map_size(void)
{
	_cleanup_json_ json_t *items = NULL;
	char what[128];

	snprintf(what, sizeof(what), "list map inet %s workspaces", T.table);
	items = nft_json(what);
	cr_assert_not_null(items);
	return json_array_size(
		json_object_get(json_object_get(json_array_get(items, 1), "map"), "elem"));
}

/* The chain's denial rules log to the group, with the id as prefix, behind a limit. */
static void assert_logged(const char *id, const char *key, int group, size_t want)
{
	_cleanup_json_ json_t *items = NULL;
	char what[160], prefix[80];
	size_t i, j, n_logs = 0;
	json_t *item, *st;

	snprintf(what, sizeof(what), "list chain inet %s ws_%s", T.table, key);
	snprintf(prefix, sizeof(prefix), "%s ", id);
	items = nft_json(what);
	cr_assert_not_null(items);
	json_array_foreach(items, i, item) {
		json_t *expr = json_object_get(json_object_get(item, "rule"), "expr");
		bool limited = false;

		json_array_foreach(expr, j, st) {
			json_t *log = json_object_get(st, "log");

			limited = limited || json_object_get(st, "limit");
			if (!log)
				continue;
			cr_assert(limited, "log without a limit before it");
			cr_assert_str_eq(json_string_value(json_object_get(log, "prefix")), prefix);
			cr_assert_eq(json_integer_value(json_object_get(log, "group")), group);
			n_logs++;
		}
	}
	cr_assert_eq(n_logs, want, "%zu log rules", n_logs);
}

static size_t bridge_set_size(const char *set)
{
	_cleanup_json_ json_t *items = NULL;
	char what[128];

	snprintf(what, sizeof(what), "list set bridge %s %s", T.table, set);
	items = nft_json(what);
	cr_assert_not_null(items);
	return json_array_size(
		json_object_get(json_object_get(json_array_get(items, 1), "set"), "elem"));
}

static void assert_ids(const char *const *want, size_t n)
{
	char **ids = NULL;

	cr_assert_eq(nft_workspace_list(T.nft, &ids), 0);
	cr_assert_eq(strv_length(ids), n, "%zu ids, want %zu", strv_length(ids), n);
	for (size_t i = 0; i < n; i++) {
		bool found = false;

		for (size_t j = 0; ids[j]; j++)
			found = found || strcmp(ids[j], want[i]) == 0;
		cr_assert(found, "%s not listed", want[i]);
	}
	strv_free(ids);
}

/* The blocked classes as intervals (no kernel needed). */

#define IP(a, b, c, d) (((uint32_t)(a) << 24) | ((uint32_t)(b) << 16) | ((uint32_t)(c) << 8) | (d))

static const struct net_cidr ws_range = { IP(10, 231, 0, 0), 24 };

/* Sorted, disjoint and not adjacent (an interval set refuses overlaps). */
static void assert_disjoint(const struct net_interval *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		cr_assert_leq(v[i].lo, v[i].hi, "interval %zu upside down", i);
		if (i > 0)
			cr_assert_gt(v[i].lo, v[i - 1].hi + 1, "intervals %zu and %zu touch", i - 1,
				     i);
	}
}

static bool blocked_has(const struct net_interval *v, size_t n, uint32_t a)
{
	for (size_t i = 0; i < n; i++)
		if (v[i].lo <= a && a <= v[i].hi)
			return true;
	return false;
}

static void assert_intervals(const struct net_interval *v, size_t n, const uint32_t (*want)[2],
			     size_t n_want)
{
	assert_disjoint(v, n);
	for (size_t i = 0; i < n && i < n_want; i++) {
		cr_assert_eq(v[i].lo, want[i][0], "interval %zu starts at %08x, not %08x", i,
			     v[i].lo, want[i][0]);
		cr_assert_eq(v[i].hi, want[i][1], "interval %zu ends at %08x, not %08x", i, v[i].hi,
			     want[i][1]);
	}
	cr_assert_eq(n, n_want, "%zu intervals, not %zu", n, n_want);
}

Test(net_blocked, default_classes)
{
	static const uint32_t want[][2] = {
		{ IP(0, 0, 0, 0), IP(0, 255, 255, 255) },
		{ IP(10, 0, 0, 0), IP(10, 255, 255, 255) }, /* the workspaces' range inside */
		{ IP(100, 64, 0, 0), IP(100, 127, 255, 255) },
		{ IP(127, 0, 0, 0), IP(127, 255, 255, 255) },
		{ IP(169, 254, 0, 0), IP(169, 254, 255, 255) },
		{ IP(172, 16, 0, 0), IP(172, 31, 255, 255) },
		{ IP(192, 0, 0, 0), IP(192, 0, 0, 8) },
		{ IP(192, 0, 0, 11), IP(192, 0, 0, 255) },
		{ IP(192, 0, 2, 0), IP(192, 0, 2, 255) },
		{ IP(192, 88, 99, 0), IP(192, 88, 99, 255) },
		{ IP(192, 168, 0, 0), IP(192, 168, 255, 255) },
		{ IP(198, 18, 0, 0), IP(198, 19, 255, 255) },
		{ IP(198, 51, 100, 0), IP(198, 51, 100, 255) },
		{ IP(203, 0, 113, 0), IP(203, 0, 113, 255) },
		{ IP(224, 0, 0, 0), IP(255, 255, 255, 255) }, /* multicast, reserved, broadcast */
	};
	_cleanup_free_ struct net_interval *v = NULL;
	size_t n;

	cr_assert_eq(net_blocked_compute(0, ws_range, NULL, &v, &n), 0);
	assert_intervals(v, n, want, ELEMENTSOF(want));
}

Test(net_blocked, every_class_open)
{
	_cleanup_free_ struct net_interval *v = NULL;
	size_t n = 1;

	cr_assert_eq(net_blocked_compute(~UINT32_C(0), ws_range, NULL, &v, &n), 0);
	cr_assert_eq(n, 0);
	cr_assert_null(v);
}

/* Workspaces open, private closed: the range is cut out of 10/8. */
Test(net_blocked, workspaces_cut_out_of_private)
{
	_cleanup_free_ struct net_interval *v = NULL;
	size_t n;

	cr_assert_eq(net_blocked_compute(NET_CLASS_BIT(NET_CLASS_WORKSPACES), ws_range, NULL, &v,
					 &n),
		     0);
	assert_disjoint(v, n);
	cr_assert(blocked_has(v, n, IP(10, 230, 255, 255)));
	cr_assert(!blocked_has(v, n, IP(10, 231, 0, 0)));
	cr_assert(!blocked_has(v, n, IP(10, 231, 0, 255)));
	cr_assert(blocked_has(v, n, IP(10, 232, 0, 0)));
}

static struct net_cidr worker[] = { { IP(10, 232, 0, 1), 32 },
				    { IP(203, 0, 113, 1), 32 },
				    { IP(127, 0, 0, 1), 32 },
				    { IP(10, 231, 0, 1), 32 } };
static struct net_cidr connected[] = { { IP(10, 231, 0, 0), 24 }, /* the bridge: workspaces */
				       { IP(10, 232, 0, 0), 24 },
				       { IP(203, 0, 113, 0), 24 },
				       { IP(203, 0, 113, 0), 24 }, /* twice (two tables) */
				       { 0, 0 } /* a default route through a device */ };
static struct net_cidr gateways[] = { { IP(203, 0, 113, 2), 32 }, { IP(10, 232, 0, 254), 32 } };
static const struct net_host host = {
	worker, connected, gateways, ELEMENTSOF(worker), ELEMENTSOF(connected), ELEMENTSOF(gateways)
};

/* The fixed ranges open: what the kernel says stays closed, whatever overlaps merged. */
Test(net_blocked, host_closed_inside_open_ranges)
{
	uint32_t allow = NET_CLASS_BIT(NET_CLASS_PRIVATE) | NET_CLASS_BIT(NET_CLASS_DOCUMENTATION) |
			 NET_CLASS_BIT(NET_CLASS_LOOPBACK);
	static const uint32_t want[][2] = {
		{ IP(0, 0, 0, 0), IP(0, 255, 255, 255) },
		{ IP(10, 231, 0, 0), IP(10, 231, 0, 255) }, /* workspaces */
		{ IP(10, 232, 0, 0), IP(10, 232, 0, 255) }, /* connected, a gateway inside */
		{ IP(100, 64, 0, 0), IP(100, 127, 255, 255) },
		{ IP(127, 0, 0, 1), IP(127, 0, 0, 1) }, /* loopback open, the address is ours */
		{ IP(169, 254, 0, 0), IP(169, 254, 255, 255) },
		{ IP(192, 0, 0, 0), IP(192, 0, 0, 8) },
		{ IP(192, 0, 0, 11), IP(192, 0, 0, 255) },
		{ IP(192, 88, 99, 0), IP(192, 88, 99, 255) },
		{ IP(198, 18, 0, 0), IP(198, 19, 255, 255) },
		{ IP(203, 0, 113, 0), IP(203, 0, 113, 255) },
		{ IP(224, 0, 0, 0), IP(255, 255, 255, 255) },
	};
	_cleanup_free_ struct net_interval *v = NULL;
	size_t n;

	cr_assert_eq(net_blocked_compute(allow, ws_range, &host, &v, &n), 0);
	assert_intervals(v, n, want, ELEMENTSOF(want));
	cr_assert(!blocked_has(v, n, IP(8, 8, 8, 8)), "the default route closed everything");
}

/* connected open: the networks are cut out of the private and documentation ranges, the
 * worker's addresses and the gateways in them stay closed. */
Test(net_blocked, connected_open_keeps_gateways_and_worker)
{
	_cleanup_free_ struct net_interval *v = NULL;
	size_t n;

	cr_assert_eq(net_blocked_compute(NET_CLASS_BIT(NET_CLASS_CONNECTED), ws_range, &host, &v,
					 &n),
		     0);
	assert_disjoint(v, n);
	cr_assert(!blocked_has(v, n, IP(10, 232, 0, 2)));
	cr_assert(!blocked_has(v, n, IP(203, 0, 113, 3)));
	cr_assert(blocked_has(v, n, IP(10, 232, 0, 1)), "the worker's address");
	cr_assert(blocked_has(v, n, IP(10, 232, 0, 254)), "a gateway");
	cr_assert(blocked_has(v, n, IP(203, 0, 113, 1)));
	cr_assert(blocked_has(v, n, IP(203, 0, 113, 2)));
	cr_assert(blocked_has(v, n, IP(10, 231, 0, 9)), "the workspaces' range");
	cr_assert(blocked_has(v, n, IP(10, 233, 0, 0)), "the rest of 10/8");
	cr_assert(blocked_has(v, n, IP(192, 0, 2, 1)), "documentation");
}

/* The class that blocks an address: the most specific holding it, none when that one is open
 * (as net_blocked_compute decides). */
Test(net_blocked, class_of_address)
{
	cr_assert_eq(net_blocked_class(0, ws_range, &host, IP(10, 232, 0, 1)), NET_CLASS_WORKER);
	cr_assert_eq(net_blocked_class(0, ws_range, &host, IP(10, 232, 0, 254)),
		     NET_CLASS_GATEWAYS);
	cr_assert_eq(net_blocked_class(0, ws_range, &host, IP(10, 232, 0, 2)), NET_CLASS_CONNECTED);
	cr_assert_eq(net_blocked_class(0, ws_range, &host, IP(10, 231, 0, 9)),
		     NET_CLASS_WORKSPACES);
	cr_assert_eq(net_blocked_class(0, ws_range, &host, IP(10, 233, 0, 0)), NET_CLASS_PRIVATE);
	cr_assert_eq(net_blocked_class(0, ws_range, &host, IP(169, 254, 169, 254)),
		     NET_CLASS_LINK_LOCAL);
	cr_assert_eq(net_blocked_class(0, ws_range, NULL, IP(192, 0, 2, 1)),
		     NET_CLASS_DOCUMENTATION);
	cr_assert_eq(net_blocked_class(0, ws_range, &host, IP(8, 8, 8, 8)), -ENOENT);
	/* open: the class deciding is open, whatever wider class holds it too */
	cr_assert_eq(net_blocked_class(NET_CLASS_BIT(NET_CLASS_CONNECTED), ws_range, &host,
				       IP(10, 232, 0, 2)),
		     -ENOENT);
	cr_assert_eq(net_blocked_class(NET_CLASS_BIT(NET_CLASS_CONNECTED), ws_range, &host,
				       IP(10, 232, 0, 254)),
		     NET_CLASS_GATEWAYS);
	cr_assert_eq(net_blocked_class(NET_CLASS_BIT(NET_CLASS_PRIVATE), ws_range, &host,
				       IP(10, 233, 0, 0)),
		     -ENOENT);
}

/* gateways open: cut out of their connected networks and of the fixed ranges; a connected
 * network wider than the workspaces' range leaves it to the workspaces class. */
Test(net_blocked, gateways_open_and_wide_connected)
{
	struct net_cidr wide[] = { { IP(10, 0, 0, 0), 8 } };
	struct net_host h = host;
	_cleanup_free_ struct net_interval *v = NULL, *w = NULL;
	size_t n, n_w;

	cr_assert_eq(
		net_blocked_compute(NET_CLASS_BIT(NET_CLASS_GATEWAYS), ws_range, &host, &v, &n), 0);
	assert_disjoint(v, n);
	cr_assert(!blocked_has(v, n, IP(203, 0, 113, 2)));
	cr_assert(!blocked_has(v, n, IP(10, 232, 0, 254)));
	cr_assert(blocked_has(v, n, IP(10, 232, 0, 253)));
	cr_assert(blocked_has(v, n, IP(10, 232, 0, 255)));
	cr_assert(blocked_has(v, n, IP(203, 0, 113, 1)), "the worker's address");

	h.connected = wide;
	h.n_connected = 1;
	cr_assert_eq(net_blocked_compute(NET_CLASS_BIT(NET_CLASS_PRIVATE) |
						 NET_CLASS_BIT(NET_CLASS_WORKSPACES),
					 ws_range, &h, &w, &n_w),
		     0);
	assert_disjoint(w, n_w);
	cr_assert(blocked_has(w, n_w, IP(10, 0, 0, 0)));
	cr_assert(!blocked_has(w, n_w, IP(10, 231, 0, 5)), "the open workspaces' range");
	cr_assert(blocked_has(w, n_w, IP(10, 231, 0, 1)), "the worker's bridge address");
}

Test(net_blocked, names)
{
	for (int c = 0; c < _NET_CLASS_MAX; c++) {
		cr_assert_not_null(net_class_to_string(c));
		cr_assert_eq(net_class_from_string(net_class_to_string(c)), c);
		cr_assert_not_null(strstr(net_class_names(), net_class_to_string(c)));
	}
	cr_assert_eq(net_class_from_string("Private"), -EINVAL);
	cr_assert_eq(net_class_from_string(""), -EINVAL);
}

/* Names: refused before any text is built. */

Test(nft_names, refused, .init = topo_up, .fini = topo_down)
{
	static const char *const bad_ids[] = {
		"",
		"A",
		"a_b",
		"a b",
		"a;b",
		"a\"b",
		"a\nb",
		"a.b",
		"é",
		"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", /* 65 */
	};
	static const char *const bad_tables[] = { "",
						  "1abc",
						  "a-b",
						  "A",
						  "a b",
						  "a;flush ruleset",
						  "abcdefghijklmnopqrstuvwxyzabcdefg" };
	struct net_rule bad_rule = { .kind = NET_RULE_CIDR, .addr = ip4("10.0.0.1"), .prefix = 8 };
	struct net_policy bad_policy = { .rules = &bad_rule, .n_rules = 1 };
	struct nft_base b = base_default();
	struct station_error e = {};
	struct nft *none = (struct nft *)0x1;
	uint32_t a = 1, ttl = 60;
	uint64_t x, y;

	for (size_t i = 0; i < ELEMENTSOF(bad_tables); i++)
		cr_assert_eq(nft_open(bad_tables[i], &none, &e), -EINVAL, "'%s'", bad_tables[i]);
	cr_assert_eq(none, (struct nft *)0x1);
	ensure(&b);
	for (size_t i = 0; i < ELEMENTSOF(bad_ids); i++) {
		cr_assert_eq(nft_workspace_apply(T.nft, bad_ids[i], WS_ADDR, NULL, &e), -EINVAL);
		cr_assert_eq(nft_workspace_remove(T.nft, bad_ids[i], WS_ADDR), -EINVAL);
		cr_assert_eq(nft_workspace_pin(T.nft, bad_ids[i], 0, &a, &ttl, 1, 0), -EINVAL);
		cr_assert_eq(nft_workspace_counters(T.nft, bad_ids[i], &x, &y), -EINVAL);
	}
	/* The longest id is fine. */
	apply("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", WS_ADDR, NULL);
	cr_assert_eq(nft_workspace_apply(T.nft, "ws-1", WS_ADDR, &bad_policy, &e), -EINVAL,
		     "host bits set");
	cr_assert_str_eq(e.field, "egress");
	b.bridge = "br0\" accept";
	cr_assert_eq(nft_base_ensure(T.nft, &b, &e), -EINVAL);
	b = base_default();
	b.gateway = ip4("10.1.0.1");
	cr_assert_eq(nft_base_ensure(T.nft, &b, &e), -EINVAL);
	cr_assert_eq(nft_workspace_pin(T.nft, "ws-1", NET_POLICY_MAX_RULES, &a, &ttl, 1, 0),
		     -EINVAL);
}

/* libnftables' own words reach the caller. */
Test(nft_base, error_message, .init = topo_up, .fini = topo_down)
{
	struct nft_base b = base_default();
	struct station_error e = {};

	/* A set of that name with another definition. */
	sh_in(T.router,
	      "nft add table inet %1$s && nft add set inet %1$s blocked '{ type "
	      "ipv4_addr; }'",
	      T.table);
	cr_assert_lt(nft_base_ensure(T.nft, &b, &e), 0);
	cr_assert_neq(e.err, 0);
	cr_assert(strstr(e.message, "nftables: ") == e.message, "%s", e.message);
	cr_assert(strstr(e.message, "flags interval"), "%s", e.message);
	/* Nothing of the failed batch is left: the transaction was refused whole. */
	cr_assert_null(nft_json("list chain inet test_nft_none forward"));
	{
		char what[96];

		snprintf(what, sizeof(what), "list chain inet %s forward", T.table);
		cr_assert_null(nft_json(what));
	}
	/* A workspace before its base. */
	cr_assert_eq(nft_base_remove(T.nft), 0);
	cr_assert_eq(nft_workspace_apply(T.nft, "ws-1", WS_ADDR, NULL, &e), -ENOENT);
	cr_assert(strstr(e.message, T.table), "%s", e.message);
}

/* Without CAP_NET_ADMIN: -EPERM, and the message says so in libnftables' words. */
Test(nft_base, no_permission, .init = topo_up, .fini = topo_down)
{
	struct nft_base b = base_default();
	struct station_error e = {};
	int pipefd[2], status, rc;
	pid_t pid;

	cr_assert_eq(pipe2(pipefd, O_CLOEXEC), 0);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		struct nft *n = NULL;
		uint64_t allowed, denied;
		int r = -EIO, rc = -EIO;

		if (setresgid(65534, 65534, 65534) == 0 && setresuid(65534, 65534, 65534) == 0 &&
		    nft_open("test_nft_perm", &n, &e) == 0) {
			r = nft_base_ensure(n, &b, &e);
			rc = nft_workspace_counters(n, "ws-1", &allowed, &denied);
		}
		e.err = r;
		(void)!write(pipefd[1], &e, sizeof(e));
		(void)!write(pipefd[1], &rc, sizeof(rc));
		_exit(0);
	}
	close(pipefd[1]);
	cr_assert_eq(read(pipefd[0], &e, sizeof(e)), (ssize_t)sizeof(e));
	cr_assert_eq(read(pipefd[0], &rc, sizeof(rc)), (ssize_t)sizeof(rc));
	close(pipefd[0]);
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert_eq(e.err, -EPERM, "%d: %s", e.err, e.message);
	cr_assert(strstr(e.message, "Operation not permitted"), "%s", e.message);
	cr_assert_eq(rc, -EPERM, "counters without the capability: %d", rc);
	/* Positive control: the same call with the capability. */
	ensure(&b);
}

/* bridge mode */

Test(nft_bridge, nat_blocked_worker, .init = topo_up, .fini = topo_down, .timeout = 60)
{
	struct nft_base b = base_default();
	_cleanup_close_ int out = tcp_listen(T.out, OUTSIDE, 8080);
	_cleanup_close_ int priv = tcp_listen(T.priv, PRIVATE, 8080);
	_cleanup_close_ int worker = tcp_listen(T.router, ROUTER, 8081);
	_cleanup_close_ int dns = tcp_listen(T.router, ROUTER, 53);
	_cleanup_close_ int meta = tcp_listen(T.out, "169.254.169.254", 80);
	_cleanup_close_ int inbound = -1;
	char peer[INET_ADDRSTRLEN];
	uint64_t allowed, denied;

	ensure(&b);
	apply("ws-1", WS_ADDR, NULL);

	cr_assert_eq(tcp_connects(OUTSIDE, 8080), 0);
	accept_peer(out, peer);
	cr_assert_str_eq(peer, "203.0.113.1", "not masqueraded: %s", peer);
	cr_assert_eq(tcp_probe(PRIVATE, 8080), -ETIMEDOUT, "private range reached");
	cr_assert_eq(tcp_probe(ROUTER, 8081), -ETIMEDOUT, "worker reached");
	cr_assert_eq(tcp_probe("169.254.169.254", 80), -ETIMEDOUT);
	cr_assert_eq(tcp_connects(ROUTER, 53), 0, "the resolver's port is open");
	drain(dns);
	cr_assert_eq(nft_workspace_counters(T.nft, "ws-1", &allowed, &denied), 0);
	cr_assert_eq(allowed, 1);
	cr_assert_geq(denied, 2);
	assert_logged("ws-1", "ws_1", 7, 2); /* the worker's addresses, the blocked ranges */

	/* Positive controls: the operator opens private ranges and the worker. The second
	 * ensure keeps the workspace's vmap element (the outside stays reachable). */
	b.allow |= NET_CLASS_BIT(NET_CLASS_PRIVATE) | NET_CLASS_BIT(NET_CLASS_WORKER);
	ensure(&b);
	cr_assert_eq(map_size(), 1);
	cr_assert_eq(tcp_connects(PRIVATE, 8080), 0);
	accept_peer(priv, peer);
	cr_assert_str_eq(peer, "10.232.0.1");
	cr_assert_eq(tcp_connects(ROUTER, 8081), 0);
	drain(worker);
	cr_assert_eq(tcp_connects(OUTSIDE, 8080), 0);
	drain(out);
	cr_assert_eq(tcp_probe("169.254.169.254", 80), -ETIMEDOUT, "link-local reached");
	b.allow |= NET_CLASS_BIT(NET_CLASS_LINK_LOCAL);
	ensure(&b);
	cr_assert_eq(tcp_connects("169.254.169.254", 80), 0);
	drain(meta);

	/* Nothing outside opens a connection to a workspace; the worker itself can (control). */
	sh_in(T.out, "ip route add 10.231.0.0/24 via 203.0.113.1");
	inbound = tcp_listen(T.ws, "10.231.0.5", 8082);
	cr_assert_eq(tcp_probe_from(T.out, "10.231.0.5", 8082, DROP_MS), -ETIMEDOUT);
	cr_assert_eq(tcp_probe_from(T.router, "10.231.0.5", 8082, 3000), 0);
	drain(inbound);
}

/* The bridge: no port to port, no address but a port's own. */
/* A packet for the worker's own address goes to the input hook: denied there through the
 * workspace's chain, counted once per packet (one SYN in DROP_MS) and logged. The resolver's
 * port is not. Restricted: a cidr rule naming the worker's address does not open it. */
Test(nft_bridge, worker_denial_counted, .init = topo_up, .fini = topo_down, .timeout = 60)
{
	struct nft_base b = base_default();
	_cleanup_close_ int worker = tcp_listen(T.router, ROUTER, 8081);
	_cleanup_close_ int dns = tcp_listen(T.router, ROUTER, 53);
	_cleanup_close_ int out = tcp_listen(T.out, OUTSIDE, 8080);
	struct net_rule rules[2];
	struct net_policy p = { .rules = rules, .n_rules = 2 };
	uint64_t allowed, denied;

	ensure(&b);
	apply("ws-1", WS_ADDR, NULL);
	cr_assert_eq(tcp_connects(ROUTER, 53), 0, "the resolver's port is open");
	drain(dns);
	cr_assert_eq(nft_workspace_counters(T.nft, "ws-1", &allowed, &denied), 0);
	cr_assert_eq(denied, 0, "the resolver counted as denied");
	cr_assert_eq(tcp_probe(ROUTER, 8081), -ETIMEDOUT, "worker reached");
	cr_assert_eq(nft_workspace_counters(T.nft, "ws-1", &allowed, &denied), 0);
	cr_assert_eq(denied, 1, "the worker's address: %" PRIu64 " denied", denied);

	rules[0] = cidr_rule(ROUTER, 32, NET_PROTO_TCP, NULL, 0);
	rules[1] = cidr_rule(OUTSIDE, 32, NET_PROTO_TCP, NULL, 0);
	apply("ws-1", WS_ADDR, &p);
	assert_logged("ws-1", "ws_1", 7, 4); /* the worker, fenced, blocked, the default */
	cr_assert_eq(tcp_probe(ROUTER, 8081), -ETIMEDOUT, "a cidr rule opened the worker");
	cr_assert_eq(nft_workspace_counters(T.nft, "ws-1", &allowed, &denied), 0);
	cr_assert_eq(denied, 2);
	cr_assert_eq(tcp_connects(OUTSIDE, 8080), 0, "positive control: the cidr rule's other");
	drain(out);

	/* Positive control: the operator opens the worker. */
	b.allow |= NET_CLASS_BIT(NET_CLASS_WORKER);
	ensure(&b);
	cr_assert_eq(tcp_connects(ROUTER, 8081), 0);
	drain(worker);
	cr_assert_eq(nft_workspace_counters(T.nft, "ws-1", &allowed, &denied), 0);
	cr_assert_eq(denied, 2);
}

/* A restricted workspace's cidr rules are its tenant's: they open a closed fixed class for it
 * (private, positive control) and never the worker's own: link-local (cloud metadata), a
 * connected network, a gateway. The operator's classes open them. */
Test(nft_restricted, cidr_fenced, .init = topo_up, .fini = topo_down, .timeout = 60)
{
	struct nft_base b = base_default();
	struct net_host host = {};
	_cleanup_close_ int out = tcp_listen(T.out, OUTSIDE, 8080);
	_cleanup_close_ int priv = tcp_listen(T.priv, PRIVATE, 8080);
	_cleanup_close_ int meta = tcp_listen(T.out, "169.254.169.254", 80);
	struct net_rule rules[3];
	struct net_policy p = { .rules = rules, .n_rules = 3 };
	struct station_error e = {};
	uint64_t allowed, denied;

	rules[0] = cidr_rule("169.254.169.254", 32, NET_PROTO_TCP, NULL, 0);
	rules[1] = cidr_rule(PRIVATE, 32, NET_PROTO_TCP, NULL, 0);
	rules[2] = cidr_rule(OUTSIDE, 32, NET_PROTO_TCP, NULL, 0);
	ensure(&b);
	apply("ws-1", WS_ADDR, &p);
	cr_assert_eq(tcp_probe("169.254.169.254", 80), -ETIMEDOUT, "a cidr rule opened link-local");
	cr_assert_eq(tcp_connects(PRIVATE, 8080), 0, "a cidr rule did not open a private address");
	drain(priv);
	cr_assert_eq(nft_workspace_counters(T.nft, "ws-1", &allowed, &denied), 0);
	cr_assert_eq(denied, 1);

	/* The router's own view: PRIVATE's network is connected, OUTSIDE its gateway. */
	cr_assert_eq(link_host_read(&host), 0);
	b.host = &host;
	cr_assert_eq(nft_blocked_update(T.nft, &b, &e), 0, "%s", e.message);
	cr_assert_eq(tcp_probe(PRIVATE, 8080), -ETIMEDOUT,
		     "a cidr rule opened a connected network");
	cr_assert_eq(tcp_probe(OUTSIDE, 8080), -ETIMEDOUT, "a cidr rule opened a gateway");

	/* Positive controls: the operator opens them. */
	b.allow |= NET_CLASS_BIT(NET_CLASS_LINK_LOCAL) | NET_CLASS_BIT(NET_CLASS_CONNECTED) |
		   NET_CLASS_BIT(NET_CLASS_GATEWAYS);
	cr_assert_eq(nft_blocked_update(T.nft, &b, &e), 0, "%s", e.message);
	cr_assert_eq(tcp_connects("169.254.169.254", 80), 0);
	drain(meta);
	cr_assert_eq(tcp_connects(PRIVATE, 8080), 0);
	drain(priv);
	cr_assert_eq(tcp_connects(OUTSIDE, 8080), 0);
	drain(out);
	net_host_done(&host);
}

/* The router's own view (link_host_read() in its namespace): its connected networks and its
 * default gateway (OUTSIDE) are closed, each opened by its class, the set replaced in place. */
Test(nft_bridge, host_view_classes, .init = topo_up, .fini = topo_down, .timeout = 60)
{
	struct nft_base b = base_default();
	struct net_host host = {};
	_cleanup_close_ int out = tcp_listen(T.out, OUTSIDE, 8080);
	_cleanup_close_ int priv = tcp_listen(T.priv, PRIVATE, 8080);
	struct station_error e = {};
	uint64_t allowed, denied;
	bool gw = false;

	cr_assert_eq(link_host_read(&host), 0);
	for (size_t i = 0; i < host.n_gateways; i++)
		gw = gw || host.gateways[i].addr == IP(203, 0, 113, 2);
	cr_assert(gw, "the default route's gateway not read");
	b.host = &host;
	b.allow |= NET_CLASS_BIT(NET_CLASS_PRIVATE);
	ensure(&b);
	apply("ws-1", WS_ADDR, NULL);
	cr_assert_eq(tcp_probe(PRIVATE, 8080), -ETIMEDOUT, "a connected network reached");
	cr_assert_eq(tcp_probe(OUTSIDE, 8080), -ETIMEDOUT, "the gateway reached");
	cr_assert_eq(nft_workspace_counters(T.nft, "ws-1", &allowed, &denied), 0);
	cr_assert_eq(denied, 2);

	b.allow |= NET_CLASS_BIT(NET_CLASS_CONNECTED);
	cr_assert_eq(nft_blocked_update(T.nft, &b, &e), 0, "%s", e.message);
	cr_assert_eq(tcp_connects(PRIVATE, 8080), 0);
	drain(priv);
	cr_assert_eq(tcp_probe(OUTSIDE, 8080), -ETIMEDOUT, "the gateway opened with its network");

	b.allow |= NET_CLASS_BIT(NET_CLASS_GATEWAYS);
	cr_assert_eq(nft_blocked_update(T.nft, &b, &e), 0, "%s", e.message);
	cr_assert_eq(tcp_connects(OUTSIDE, 8080), 0);
	drain(out);
	net_host_done(&host);
}

Test(nft_bridge, ports, .init = topo_up, .fini = topo_down, .timeout = 60)
{
	struct nft_base b = base_default();
	_cleanup_close_ int peer_ws = tcp_listen(T.ws2, "10.231.0.6", 8080);
	_cleanup_close_ int u9000 = udp_bind(T.out, OUTSIDE, 9000);
	uint64_t allowed, denied;

	ensure(&b);
	apply("ws-1", WS_ADDR, NULL);
	apply("other-2", WS2_ADDR, NULL);
	cr_assert(udp_probe(u9000, OUTSIDE, 9000, true), "own address refused");
	cr_assert(!udp_spoof_probe(u9000, "10.231.0.6", OUTSIDE, 9000), "spoofed source passed");
	cr_assert(!udp_spoof_probe(u9000, "10.231.0.77", OUTSIDE, 9000));
	cr_assert_eq(nft_workspace_counters(T.nft, "other-2", &allowed, &denied), 0);
	cr_assert_eq(allowed, 0, "the spoofed packet went through the other's chain");
	cr_assert_eq(tcp_probe("10.231.0.6", 8080), -ETIMEDOUT, "workspace reached another");

	/* Positive control: the operator lets workspaces talk. */
	b.allow |= NET_CLASS_BIT(NET_CLASS_WORKSPACES);
	ensure(&b);
	cr_assert_eq(tcp_connects("10.231.0.6", 8080), 0);
	drain(peer_ws);
	cr_assert(!udp_spoof_probe(u9000, "10.231.0.6", OUTSIDE, 9000));

	/* Removing a workspace takes its port out of both sets. */
	cr_assert_eq(nft_workspace_remove(T.nft, "ws-1", WS_ADDR), 0);
	cr_assert_eq(bridge_set_size("ports"), 1);
	cr_assert_eq(bridge_set_size("bound"), 1);
	cr_assert(!udp_probe(u9000, OUTSIDE, 9000, false), "removed workspace sent");
	cr_assert_eq(nft_workspace_remove(T.nft, "other-2", WS2_ADDR), 0);
	cr_assert_eq(bridge_set_size("ports"), 0);
	cr_assert_eq(bridge_set_size("bound"), 0);
}

/* restricted mode */

Test(nft_restricted, cidr_ports_udp, .init = topo_up, .fini = topo_down, .timeout = 60)
{
	static const uint16_t p8080[] = { 8080 }, p9000[] = { 9000 }, mixed[] = { 9000, 8081 };
	struct nft_base b = base_default();
	_cleanup_close_ int l8080 = tcp_listen(T.out, OUTSIDE, 8080);
	_cleanup_close_ int l8081 = tcp_listen(T.out, OUTSIDE, 8081);
	_cleanup_close_ int priv = tcp_listen(T.priv, PRIVATE, 8080);
	_cleanup_close_ int u9000 = udp_bind(T.out, OUTSIDE, 9000);
	struct net_rule rules[2];
	struct net_policy p = { .rules = rules, .n_rules = 1 };

	ensure(&b);
	rules[0] = cidr_rule("203.0.113.0", 24, NET_PROTO_TCP, p8080, 1);
	apply("ws-1", WS_ADDR, &p);
	cr_assert_eq(tcp_connects(OUTSIDE, 8080), 0);
	cr_assert_eq(tcp_probe(OUTSIDE, 8081), -ETIMEDOUT);
	cr_assert(!udp_probe(u9000, OUTSIDE, 9000, false), "udp passed a tcp-only policy");
	cr_assert_eq(tcp_probe(PRIVATE, 8080), -ETIMEDOUT);
	flood_dropped(u9000);

	/* udp only, to one port; and a listed private range wins over the blocked ranges. */
	rules[0] = cidr_rule("203.0.113.2", 32, NET_PROTO_UDP, p9000, 1);
	rules[1] = cidr_rule("10.232.0.0", 24, NET_PROTO_TCP, NULL, 0);
	p.n_rules = 2;
	apply("ws-1", WS_ADDR, &p);
	cr_assert(udp_probe(u9000, OUTSIDE, 9000, true));
	cr_assert_eq(tcp_probe(OUTSIDE, 8080), -ETIMEDOUT);
	cr_assert_eq(tcp_connects(PRIVATE, 8080), 0);

	/* proto any with ports: tcp and udp to those ports, nothing else. */
	rules[0] = cidr_rule("203.0.113.0", 24, NET_PROTO_ANY, mixed, 2);
	p.n_rules = 1;
	apply("ws-1", WS_ADDR, &p);
	cr_assert_eq(tcp_connects(OUTSIDE, 8081), 0);
	cr_assert(udp_probe(u9000, OUTSIDE, 9000, true));
	cr_assert_eq(tcp_probe(OUTSIDE, 8080), -ETIMEDOUT);
	cr_assert_eq(tcp_probe(PRIVATE, 8080), -ETIMEDOUT);
	drain(l8080);
	drain(l8081);
	drain(priv);
}

Test(nft_restricted, domain_pin_replace_counters, .init = topo_up, .fini = topo_down, .timeout = 60)
{
	static const uint16_t p8080[] = { 8080 };
	struct nft_base b = base_default();
	_cleanup_close_ int out = tcp_listen(T.out, OUTSIDE, 8080);
	_cleanup_close_ int l8081 = tcp_listen(T.out, OUTSIDE, 8081);
	_cleanup_close_ int u9000 = udp_bind(T.out, OUTSIDE, 9000);
	struct net_rule rules[2];
	struct net_policy p = { .rules = rules, .n_rules = 2 };
	uint32_t addr = ip4(OUTSIDE), ttl = 60;
	uint64_t a0, d0, a1, d1, a2, d2;
	char peer[INET_ADDRSTRLEN];

	ensure(&b);
	rules[0] = cidr_rule("198.51.100.0", 24, NET_PROTO_ANY, NULL, 0);
	rules[1] = domain_rule("outside.test", NET_PROTO_ANY, p8080, 1);
	apply("ws-1", WS_ADDR, &p);
	cr_assert_eq(nft_workspace_counters(T.nft, "ws-1", &a0, &d0), 0);
	cr_assert_eq(a0, 0);
	cr_assert_eq(d0, 0);

	cr_assert_eq(tcp_probe(OUTSIDE, 8080), -ETIMEDOUT, "reached before pinning");
	cr_assert_eq(nft_workspace_pin(T.nft, "ws-1", 1, &addr, &ttl, 1, 0), 0);
	cr_assert_eq(tcp_connects(OUTSIDE, 8080), 0, "pinned address refused");
	accept_peer(out, peer);
	cr_assert_str_eq(peer, "203.0.113.1");
	cr_assert_eq(tcp_probe(OUTSIDE, 8081), -ETIMEDOUT, "port outside the rule");
	cr_assert(!udp_probe(u9000, OUTSIDE, 9000, false), "udp to a pinned address");
	/* Rule 0 is a cidr rule: it has no set. */
	cr_assert_eq(nft_workspace_pin(T.nft, "ws-1", 0, &addr, &ttl, 1, 0), -ENOENT);

	assert_counters_as_nft("ws-1", "ws_1", &a1, &d1);
	cr_assert_eq(a1, 1);
	cr_assert_geq(d1, 3);
	assert_logged("ws-1", "ws_1", 7, 4); /* the worker, fenced, blocked, the default */

	/* Replaced without the domain rule: new connections are refused again, its set is
	 * gone, the counters carry on. */
	p.n_rules = 1;
	apply("ws-1", WS_ADDR, &p);
	{
		char what[96];

		snprintf(what, sizeof(what), "list set inet %s ws_ws_1_d1", T.table);
		cr_assert_null(nft_json(what), "set of a removed rule left");
	}
	cr_assert_eq(nft_workspace_counters(T.nft, "ws-1", &a2, &d2), 0);
	cr_assert_eq(a2, a1);
	cr_assert_eq(d2, d1);
	cr_assert_eq(tcp_probe(OUTSIDE, 8080), -ETIMEDOUT, "reached after the rule went");
	assert_counters_as_nft("ws-1", "ws_1", &a2, &d2);
	cr_assert_gt(d2, d1);

	/* The rule back: its set starts empty again (replacing empties the sets). */
	p.n_rules = 2;
	apply("ws-1", WS_ADDR, &p);
	cr_assert_eq(tcp_probe(OUTSIDE, 8080), -ETIMEDOUT);
	cr_assert_eq(nft_workspace_pin(T.nft, "ws-1", 1, &addr, &ttl, 1, 0), 0);
	cr_assert_eq(tcp_connects(OUTSIDE, 8080), 0);
	drain(out);
	drain(l8081);
}

Test(nft_pin, longer_timeout_wins, .init = topo_up, .fini = topo_down)
{
	struct nft_base b = base_default();
	struct net_rule rule = domain_rule("example.test", NET_PROTO_TCP, NULL, 0);
	struct net_policy p = { .rules = &rule, .n_rules = 1 };
	uint32_t a = ip4("198.51.100.7"), c = ip4("198.51.100.8"), ttl;
	uint32_t pair[] = { c, c }, pair_ttls[] = { 40, 500 };
	char what[96];

	ensure(&b);
	apply("ws-1", WS_ADDR, &p);
	ttl = 60;
	cr_assert_eq(nft_workspace_pin(T.nft, "ws-1", 0, &a, &ttl, 1, 0), 0);
	cr_assert_eq(set_timeout("ws_ws_1_d0", "198.51.100.7"), 60);
	ttl = 3600;
	cr_assert_eq(nft_workspace_pin(T.nft, "ws-1", 0, &a, &ttl, 1, 0), 0);
	cr_assert_eq(set_timeout("ws_ws_1_d0", "198.51.100.7"), 3600);
	ttl = 100;
	cr_assert_eq(nft_workspace_pin(T.nft, "ws-1", 0, &a, &ttl, 1, 0), 0);
	cr_assert_eq(set_timeout("ws_ws_1_d0", "198.51.100.7"), 3600, "shortened");
	/* Bounds: [30 s, 1 day]. */
	ttl = 1;
	cr_assert_eq(nft_workspace_pin(T.nft, "ws-1", 0, &c, &ttl, 1, 0), 0);
	cr_assert_eq(set_timeout("ws_ws_1_d0", "198.51.100.8"), 30);
	ttl = 100000000;
	cr_assert_eq(nft_workspace_pin(T.nft, "ws-1", 0, &c, &ttl, 1, 0), 0);
	cr_assert_eq(set_timeout("ws_ws_1_d0", "198.51.100.8"), 86400);
	/* One call naming an address twice: the longer. */
	pair[0] = pair[1] = ip4("198.51.100.9");
	cr_assert_eq(nft_workspace_pin(T.nft, "ws-1", 0, pair, pair_ttls, 2, 0), 0);
	cr_assert_eq(set_timeout("ws_ws_1_d0", "198.51.100.9"), 500);
	cr_assert_eq(nft_workspace_pin(T.nft, "ws-1", 0, pair, pair_ttls, 0, 0), 0);
	/* Replacing the policy empties the set; bridge mode has none. */
	apply("ws-1", WS_ADDR, &p);
	cr_assert_eq(set_timeout("ws_ws_1_d0", "198.51.100.7"), 0);
	apply("ws-1", WS_ADDR, NULL);
	snprintf(what, sizeof(what), "list set inet %s ws_ws_1_d0", T.table);
	cr_assert_null(nft_json(what), "bridge mode kept a domain set");
	cr_assert_eq(nft_workspace_pin(T.nft, "ws-1", 0, &a, &ttl, 1, 0), -ENOENT);
}

Test(nft_pin, timeout_of_ttl_and_pin_min)
{
	/* pin_min 0: the TTL alone, [30 s, 1 day], as before pin_min existed. */
	cr_assert_eq(nft_pin_timeout(0, 0), 30);
	cr_assert_eq(nft_pin_timeout(1, 0), 30);
	cr_assert_eq(nft_pin_timeout(60, 0), 60);
	cr_assert_eq(nft_pin_timeout(100000000, 0), 86400);
	/* pin_min > 0: the longer of the two, pin_min the floor (below 30 s too). */
	cr_assert_eq(nft_pin_timeout(1, 4), 4);
	cr_assert_eq(nft_pin_timeout(0, 1), 1);
	cr_assert_eq(nft_pin_timeout(60, 4), 60);
	cr_assert_eq(nft_pin_timeout(60, 600), 600);
	cr_assert_eq(nft_pin_timeout(1, 100000), 86400);
}

/* True when "ping" went from the workspace's end c of a connection to its outside end a and
 * back, each way within ms. */
static bool tcp_roundtrip(int c, int a, int ms)
{
	struct pollfd p = { .fd = a, .events = POLLIN };
	char buf[8] = "";

	if (write(c, "ping", 4) != 4 || poll(&p, 1, ms) != 1 || read(a, buf, 4) != 4 ||
	    write(a, buf, 4) != 4)
		return false;
	p.fd = c;
	return poll(&p, 1, ms) == 1 && read(c, buf, sizeof(buf)) == 4 &&
	       memcmp(buf, "ping", 4) == 0;
}

/* A pin of pin_min 2 s: the address is reachable for 2 s (not the TTL's 1 s, not 30 s), then new
 * connections are refused while one opened before goes on carrying data both ways: established
 * connections pass before the workspace's chain (nft.h). */
Test(nft_pin, window_ends_established_stays, .init = topo_up, .fini = topo_down, .timeout = 60)
{
	struct nft_base b = base_default();
	struct net_rule rule = domain_rule("outside.test", NET_PROTO_TCP, NULL, 0);
	struct net_policy p = { .rules = &rule, .n_rules = 1 };
	_cleanup_close_ int l = tcp_listen(T.out, OUTSIDE, 8080);
	_cleanup_close_ int c = socket_in(T.ws, SOCK_STREAM);
	_cleanup_close_ int a = -1;
	struct sockaddr_in sa = sin_of(OUTSIDE, 8080);
	struct pollfd pl = { .fd = l, .events = POLLIN };
	uint32_t addr = ip4(OUTSIDE), ttl = 1;
	int refused_after = -1;

	ensure(&b);
	apply("ws-1", WS_ADDR, &p);
	cr_assert_eq(tcp_probe(OUTSIDE, 8080), -ETIMEDOUT, "reached before pinning");
	cr_assert_eq(nft_workspace_pin(T.nft, "ws-1", 0, &addr, &ttl, 1, 2), 0);
	cr_assert_eq(set_timeout("ws_ws_1_d0", OUTSIDE), 2, "timeout of TTL 1 s, pin_min 2 s");
	cr_assert_eq(connect(c, (struct sockaddr *)&sa, sizeof(sa)), 0, "connect while pinned: %m");
	cr_assert_eq(poll(&pl, 1, 2000), 1);
	a = accept4(l, NULL, NULL, SOCK_CLOEXEC);
	cr_assert_geq(a, 0);
	cr_assert_eq(fd_set_nonblock(c, true), 0);
	cr_assert(tcp_roundtrip(c, a, 2000), "no data while pinned");
	/* The pin ends: new connections are refused after 2 s (a probe every 200 ms, 10 s at
	 * most). */
	for (int i = 0; i < 50 && refused_after < 0; i++) {
		if (tcp_probe(OUTSIDE, 8080) == -ETIMEDOUT)
			refused_after = i;
		drain(l);
		usleep(200000);
	}
	cr_assert_geq(refused_after, 0, "a new connection still passes 10 s after a 2 s pin");
	cr_assert(tcp_roundtrip(c, a, 2000), "the open connection was cut when its pin ended");
	cr_assert(tcp_roundtrip(c, a, 2000));
	/* Positive control of the refusal: pinned again, a new connection passes. */
	cr_assert_eq(nft_workspace_pin(T.nft, "ws-1", 0, &addr, &ttl, 1, 2), 0);
	cr_assert_eq(tcp_connects(OUTSIDE, 8080), 0);
	drain(l);
}

/* idempotence, listing, removal */

Test(nft_lifecycle, idempotent, .init = topo_up, .fini = topo_down, .timeout = 60)
{
	static const char *const both[] = { "ws-1", "other-2" }, *const other[] = { "other-2" };
	struct nft_base b = base_default();
	struct net_rule rule = domain_rule("example.test", NET_PROTO_TCP, NULL, 0);
	struct net_policy p = { .rules = &rule, .n_rules = 1 };
	_cleanup_close_ int out = tcp_listen(T.out, OUTSIDE, 8080);
	struct station_error e = {};
	char what[96];

	assert_ids(NULL, 0); /* no table yet */
	ensure(&b);
	ensure(&b);
	assert_ids(NULL, 0);
	apply("ws-1", WS_ADDR, NULL);
	apply("other-2", ip4("10.231.0.6"), &p);
	apply("other-2", ip4("10.231.0.6"), &p);
	cr_assert_eq(map_size(), 2);
	ensure(&b);
	cr_assert_eq(map_size(), 2);
	assert_ids(both, 2);
	cr_assert_eq(tcp_connects(OUTSIDE, 8080), 0, "vmap element lost");
	drain(out);

	/* The address moves to another workspace: the element follows, the old chain stays. */
	apply("other-2", WS_ADDR, &p);
	cr_assert_eq(map_size(), 1);
	cr_assert_eq(tcp_probe(OUTSIDE, 8080), -ETIMEDOUT, "still the bridge chain");
	apply("ws-1", WS_ADDR, NULL);
	cr_assert_eq(tcp_connects(OUTSIDE, 8080), 0);
	drain(out);

	cr_assert_eq(nft_workspace_remove(T.nft, "ws-1", WS_ADDR), 0);
	cr_assert_eq(nft_workspace_remove(T.nft, "ws-1", WS_ADDR), 0);
	cr_assert_eq(nft_workspace_remove(T.nft, "never-made", WS_ADDR), 0);
	assert_ids(other, 1);
	cr_assert_eq(map_size(), 0);
	cr_assert_eq(tcp_probe(OUTSIDE, 8080), -ETIMEDOUT, "removed workspace still forwarded");
	cr_assert_eq(nft_workspace_remove(T.nft, "other-2", ip4("10.231.0.6")), 0);
	assert_ids(NULL, 0);
	snprintf(what, sizeof(what), "list table inet %s", T.table);
	{
		_cleanup_json_ json_t *items = nft_json(what);
		size_t i;
		json_t *item;

		cr_assert_not_null(items);
		json_array_foreach(items, i, item) {
			json_t *o = json_object_get(item, "set");
			const char *name = json_string_value(json_object_get(o, "name"));

			cr_assert(!o || strcmp(name, "blocked") == 0 || strcmp(name, "fenced") == 0,
				  "set %s left", name);
			cr_assert_null(json_object_get(item, "counter"), "counter left");
		}
	}

	cr_assert_eq(nft_base_remove(T.nft), 0);
	cr_assert_null(nft_json(what), "table left");
	snprintf(what, sizeof(what), "list table bridge %s", T.table);
	cr_assert_null(nft_json(what), "bridge table left");
	cr_assert_eq(nft_base_remove(T.nft), 0);
	assert_ids(NULL, 0);
	cr_assert_eq(nft_workspace_remove(T.nft, "ws-1", WS_ADDR), 0);
	cr_assert_eq(nft_workspace_apply(T.nft, "ws-1", WS_ADDR, NULL, &e), -ENOENT);
}

/* Counters of a workspace that has none: -ENOENT, the out-parameters untouched; with no table,
 * with the table but not the workspace, and after the workspace's removal. */
Test(nft_counters, missing, .init = topo_up, .fini = topo_down, .timeout = 60)
{
	struct nft_base b = base_default();
	_cleanup_close_ int u9000 = udp_bind(T.out, OUTSIDE, 9000);
	uint64_t allowed = 7, denied = 8;

	cr_assert_eq(nft_workspace_counters(T.nft, "ws-1", &allowed, &denied), -ENOENT);
	ensure(&b);
	cr_assert_eq(nft_workspace_counters(T.nft, "ws-1", &allowed, &denied), -ENOENT);
	cr_assert_eq(allowed, 7);
	cr_assert_eq(denied, 8);

	/* Positive control: a bridge workspace's counters exist and count. */
	apply("ws-1", WS_ADDR, NULL);
	cr_assert(udp_probe(u9000, OUTSIDE, 9000, true));
	assert_counters_as_nft("ws-1", "ws_1", &allowed, &denied);
	cr_assert_eq(allowed, 1);
	cr_assert_eq(denied, 0);
	allowed = 7;
	denied = 8;
	cr_assert_eq(nft_workspace_counters(T.nft, "other-2", &allowed, &denied), -ENOENT);
	cr_assert_eq(allowed, 7);
	cr_assert_eq(denied, 8);

	/* Another table's counter of that name is not ours. */
	sh_in(T.router,
	      "nft add table inet %1$s_x && nft add counter inet %1$s_x ws_other_2_allowed"
	      " && nft add counter inet %1$s_x ws_other_2_denied",
	      T.table);
	cr_assert_eq(nft_workspace_counters(T.nft, "other-2", &allowed, &denied), -ENOENT);

	cr_assert_eq(nft_workspace_remove(T.nft, "ws-1", WS_ADDR), 0);
	cr_assert_eq(nft_workspace_counters(T.nft, "ws-1", &allowed, &denied), -ENOENT);
	cr_assert_eq(allowed, 7);
	cr_assert_eq(denied, 8);
	cr_assert_eq(nft_base_remove(T.nft), 0);
	cr_assert_eq(nft_workspace_counters(T.nft, "ws-1", &allowed, &denied), -ENOENT);
}
