/* SPDX-License-Identifier: MIT */
/* Links, namespaces and the denial log against the real kernel. Needs root. Each test runs in
 * its own process, which first moves into a fresh network namespace (the "router", where the
 * bridge lives) and a private mount namespace, so the host's network is never touched and every
 * link, namespace mount and nft table the test makes goes away with the process even when an
 * assertion fails; the tests remove them explicitly as well. Addresses are 10.250.0.0/24,
 * inside those namespaces only. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "basic/cleanup.h"
#include "basic/util.h"
#include "net/link.h"
#include "net/nflog.h"

#define ADDR(a, b, c, d) ((uint32_t)(a) << 24 | (uint32_t)(b) << 16 | (uint32_t)(c) << 8 | (d))
#define GATEWAY ADDR(10, 250, 0, 1)
#define WS1 ADDR(10, 250, 0, 2)
#define WS2 ADDR(10, 250, 0, 3)

static char tmpdir[64];
static char bridge[IFNAMSIZ];

static void setup(void)
{
	if (geteuid() != 0)
		cr_skip_test("needs root");
	cr_assert_eq(unshare(CLONE_NEWNET | CLONE_NEWNS), 0, "unshare: %m");
	cr_assert_eq(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL), 0, "%m");
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/test-net-link-%d-XXXXXX", (int)getpid());
	cr_assert_not_null(mkdtemp(tmpdir));
	snprintf(bridge, sizeof(bridge), "tbr%d", (int)getpid());
	/* The router's own lo, for connections to its own addresses. */
	_cleanup_close_ int self = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	cr_assert_eq(link_netns_loopback(self), 0);
}

static void teardown(void)
{
	if (tmpdir[0])
		rm_rf(tmpdir);
}

TestSuite(net_link, .init = setup, .fini = teardown, .timeout = 60);

/* Runs a shell command in the namespace at ns_path ("" for the current one); returns its
 * stdout (malloc'd). */
static char *run(const char *ns_path, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static char *run(const char *ns_path, const char *fmt, ...)
{
	char cmd[512], full[700];
	_cleanup_free_ char *out = malloc(65536);
	size_t n = 0;
	va_list ap;
	FILE *f;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	if (ns_path[0])
		snprintf(full, sizeof(full), "nsenter --net=%s %s", ns_path, cmd);
	else
		snprintf(full, sizeof(full), "%s", cmd);
	f = popen(full, "r");
	cr_assert_not_null(f);
	n = fread(out, 1, 65535, f);
	out[n] = '\0';
	cr_assert_eq(pclose(f), 0, "%s: %s", full, out);
	return TAKE_PTR(out);
}

/* A socket made in the namespace netns_fd (sockets keep the namespace they are born in). */
static int socket_in(int netns_fd, int type)
{
	_cleanup_close_ int orig = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	int fd;

	cr_assert_geq(orig, 0);
	if (netns_fd >= 0)
		cr_assert_eq(setns(netns_fd, CLONE_NEWNET), 0, "%m");
	fd = socket(AF_INET, type | SOCK_CLOEXEC, 0);
	cr_assert_eq(setns(orig, CLONE_NEWNET), 0, "%m");
	cr_assert_geq(fd, 0);
	return fd;
}

static struct sockaddr_in sin_of(uint32_t addr, uint16_t port)
{
	return (struct sockaddr_in){ .sin_family = AF_INET,
				     .sin_addr.s_addr = htonl(addr),
				     .sin_port = htons(port) };
}

/* A TCP listener on addr:port in the namespace netns_fd (-1: the router). */
static int listener(int netns_fd, uint32_t addr, uint16_t port)
{
	int fd = socket_in(netns_fd, SOCK_STREAM);
	struct sockaddr_in sa = sin_of(addr, port);
	int one = 1;

	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	cr_assert_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0, "bind: %m");
	cr_assert_eq(listen(fd, 8), 0);
	return fd;
}

/* Whether a TCP connection from the namespace netns_fd to addr:port is made within the
 * timeout. */
static bool tcp_reaches(int netns_fd, uint32_t addr, uint16_t port, int timeout_ms)
{
	_cleanup_close_ int fd = socket_in(netns_fd, SOCK_STREAM | SOCK_NONBLOCK);
	struct sockaddr_in sa = sin_of(addr, port);
	struct pollfd p = { .fd = fd, .events = POLLOUT };
	int err = 0;
	socklen_t len = sizeof(err);

	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
		return true;
	if (errno != EINPROGRESS)
		return false;
	if (poll(&p, 1, timeout_ms) != 1)
		return false;
	getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
	return err == 0;
}

static void ns_path(char *buf, size_t n, const char *name)
{
	snprintf(buf, n, "%s/%s", tmpdir, name);
}

/* A workspace: its namespace at <tmpdir>/<name>, host veth host_name, peer "eth0", addr. */
static int workspace_make(const char *name, const char *host_name, bool isolated, uint32_t addr)
{
	char path[128];
	int fd;

	ns_path(path, sizeof(path), name);
	cr_assert_eq(netns_create(path), 0);
	fd = netns_open(path);
	cr_assert_geq(fd, 0, "netns_open: %s", strerror(-fd));
	cr_assert_eq(link_veth_add(host_name, bridge, isolated, fd, "eth0"), 0);
	cr_assert_eq(link_netns_configure(fd, "eth0", addr, 24, GATEWAY), 0);
	return fd;
}

static void workspace_remove(const char *name, const char *host_name)
{
	char path[128];

	ns_path(path, sizeof(path), name);
	link_delete(host_name);
	netns_remove(path);
}

Test(net_link, bridge_ensure_is_idempotent)
{
	_cleanup_free_ char *addrs = NULL, *link = NULL;
	char **ports = NULL;

	cr_assert_eq(link_exists(bridge), 0);
	cr_assert_eq(link_bridge_ensure(bridge, GATEWAY, 24), 0);
	cr_assert_eq(link_bridge_ensure(bridge, GATEWAY, 24), 0);
	cr_assert_eq(link_exists(bridge), 1);

	addrs = run("",
		    "ip -j -4 addr show dev %s | jq -r '.[0].addr_info[] | "
		    "\"\\(.local)/\\(.prefixlen)\"'",
		    bridge);
	cr_assert_str_eq(addrs, "10.250.0.1/24\n");
	link = run("",
		   "ip -j -d link show dev %s | jq -r '.[0] | "
		   "\"\\(.linkinfo.info_kind) \\(.linkinfo.info_data.stp_state) \\(.flags | "
		   "index(\"UP\") != null)\"'",
		   bridge);
	cr_assert_str_eq(link, "bridge 0 true\n");

	cr_assert_eq(link_bridge_ports(bridge, &ports), 0);
	cr_assert_null(ports[0]);
	strv_free(ports);

	cr_assert_eq(link_bridge_ensure("lo", GATEWAY, 24), -EEXIST, "not a bridge");
	cr_assert_eq(link_bridge_ensure("bad/name", GATEWAY, 24), -EINVAL);
	cr_assert_eq(link_delete(bridge), 0);
	cr_assert_eq(link_exists(bridge), 0);
}

/* A bridge whose address the kernel picks follows its ports: the lowest port address becomes
 * the bridge's whenever a port comes or goes, and a workspace whose neighbour cache holds the
 * old one sends its packets to a MAC the worker no longer answers for, lost before any firewall
 * rule sees them, for the seconds its cache takes to notice. The bridge's address is ours,
 * stable across ports and across a second ensure (a controller restart). */
Test(net_link, bridge_address_is_fixed)
{
	_cleanup_free_ char *before = NULL, *again = NULL, *after = NULL, *gone = NULL;
	const char *mac = "ip -j link show dev %s | jq -r '.[0].address'";

	cr_assert_eq(link_bridge_ensure(bridge, GATEWAY, 24), 0);
	before = run("", mac, bridge);
	/* Positive control: a unicast, locally administered address, not the zeros a bridge
	 * without ports has. */
	cr_assert_neq(strcmp(before, "00:00:00:00:00:00\n"), 0, "the bridge's address: %s", before);
	unsigned first = (unsigned)strtoul(before, NULL, 16);
	cr_assert_eq(first & 3u, 2u, "locally administered unicast: %s", before);
	cr_assert_eq(link_bridge_ensure(bridge, GATEWAY, 24), 0);
	again = run("", mac, bridge);
	cr_assert_str_eq(again, before, "a second ensure keeps the address");

	/* A port whose address is lower than any other: the kernel would take it. */
	free(run("",
		 "ip link add tvlow type veth peer name tvlowp && ip link set tvlow address 02:00:00:00:00:01 "
		 "&& ip link set tvlow master %s up",
		 bridge));
	after = run("", mac, bridge);
	cr_assert_str_eq(after, before,
			 "a new port does not change the bridge's address (%s, was %s)", after,
			 before);
	cr_assert_eq(link_delete("tvlow"), 0);
	gone = run("", mac, bridge);
	cr_assert_str_eq(gone, before, "nor does a port going");
	cr_assert_eq(link_delete(bridge), 0);
}

Test(net_link, workspace_reaches_bridge)
{
	_cleanup_close_ int ws = -1, srv = -1;
	_cleanup_free_ char *route = NULL, *addrs = NULL, *peer = NULL;
	char path[128];

	cr_assert_eq(link_bridge_ensure(bridge, GATEWAY, 24), 0);
	srv = listener(-1, GATEWAY, 7001);
	cr_assert_eq(tcp_reaches(-1, GATEWAY, 7001, 1000), true, "positive control");

	ws = workspace_make("ws1", "tv1", true, WS1);
	ns_path(path, sizeof(path), "ws1");
	/* All of it again: nothing changes, nothing fails. */
	cr_assert_eq(netns_create(path), 0);
	cr_assert_eq(link_netns_configure(ws, "eth0", WS1, 24, GATEWAY), 0);
	cr_assert_eq(link_veth_add("tv1", bridge, true, ws, "eth0"), -EEXIST);

	cr_assert_eq(tcp_reaches(ws, GATEWAY, 7001, 2000), true);

	route = run(path, "ip -j -4 route show default | jq -r '.[] | \"\\(.gateway) \\(.dev)\"'");
	cr_assert_str_eq(route, "10.250.0.1 eth0\n");
	addrs = run(path, "ip -j -4 addr show dev eth0 | jq -r '.[0].addr_info[] | "
			  "\"\\(.local)/\\(.prefixlen)\"'");
	cr_assert_str_eq(addrs, "10.250.0.2/24\n");
	/* The peer was born in the namespace: it never showed up in the router's. */
	cr_assert_eq(link_exists("eth0"), 0);
	peer = run("", "ip -j -d link show dev tv1 | jq -r '.[0] | \"\\(.master) "
		       "\\(.linkinfo.info_slave_data.isolated)\"'");
	cr_assert_eq(strncmp(peer, bridge, strlen(bridge)), 0, "%s", peer);
	cr_assert_str_eq(peer + strlen(bridge), " true\n");

	workspace_remove("ws1", "tv1");
	link_delete(bridge);
}

Test(net_link, isolated_ports_reach_only_the_bridge)
{
	_cleanup_close_ int ws1 = -1, ws2 = -1, srv = -1, srv1 = -1, srv2 = -1;
	_cleanup_strv_free_ char **ports = NULL;

	cr_assert_eq(link_bridge_ensure(bridge, GATEWAY, 24), 0);
	ws1 = workspace_make("ws1", "tv1", true, WS1);
	ws2 = workspace_make("ws2", "tv2", true, WS2);
	srv = listener(-1, GATEWAY, 7001);
	srv1 = listener(ws1, WS1, 7002);
	srv2 = listener(ws2, WS2, 7003);

	cr_assert_eq(tcp_reaches(ws1, GATEWAY, 7001, 2000), true, "positive control");
	cr_assert_eq(tcp_reaches(ws2, GATEWAY, 7001, 2000), true, "positive control");
	cr_assert_eq(tcp_reaches(-1, WS1, 7002, 2000), true, "router reaches ws1");
	cr_assert_eq(tcp_reaches(ws2, WS1, 7002, 1500), false);
	cr_assert_eq(tcp_reaches(ws1, WS2, 7003, 1500), false);

	cr_assert_eq(link_bridge_ports(bridge, &ports), 0);
	cr_assert_eq(strv_length(ports), 2);
	cr_assert(strcmp(ports[0], "tv1") == 0 || strcmp(ports[1], "tv1") == 0);
	cr_assert(strcmp(ports[0], "tv2") == 0 || strcmp(ports[1], "tv2") == 0);

	workspace_remove("ws1", "tv1");
	workspace_remove("ws2", "tv2");
	link_delete(bridge);
}

Test(net_link, unisolated_ports_reach_each_other)
{
	_cleanup_close_ int ws1 = -1, ws2 = -1, srv1 = -1, srv2 = -1;

	cr_assert_eq(link_bridge_ensure(bridge, GATEWAY, 24), 0);
	ws1 = workspace_make("ws1", "tv1", false, WS1);
	ws2 = workspace_make("ws2", "tv2", false, WS2);
	srv1 = listener(ws1, WS1, 7002);
	srv2 = listener(ws2, WS2, 7003);

	cr_assert_eq(tcp_reaches(ws2, WS1, 7002, 2000), true);
	cr_assert_eq(tcp_reaches(ws1, WS2, 7003, 2000), true);

	workspace_remove("ws1", "tv1");
	workspace_remove("ws2", "tv2");
	link_delete(bridge);
}

static bool ns_has_link(int netns_fd, const char *name)
{
	_cleanup_close_ int orig = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	int r;

	cr_assert_eq(setns(netns_fd, CLONE_NEWNET), 0);
	r = link_exists(name);
	cr_assert_eq(setns(orig, CLONE_NEWNET), 0);
	cr_assert_geq(r, 0);
	return r;
}

Test(net_link, delete_removes_both_ends)
{
	_cleanup_close_ int ws = -1;
	_cleanup_strv_free_ char **ports = NULL;

	cr_assert_eq(link_bridge_ensure(bridge, GATEWAY, 24), 0);
	ws = workspace_make("ws1", "tv1", true, WS1);
	cr_assert_eq(link_exists("tv1"), 1);
	cr_assert_eq(ns_has_link(ws, "eth0"), true);

	cr_assert_eq(link_delete("tv1"), 0);
	cr_assert_eq(link_exists("tv1"), 0);
	cr_assert_eq(ns_has_link(ws, "eth0"), false);
	cr_assert_eq(ns_has_link(ws, "lo"), true);
	cr_assert_eq(link_delete("tv1"), -ENODEV);
	cr_assert_eq(link_bridge_ports(bridge, &ports), 0);
	cr_assert_null(ports[0]);

	workspace_remove("ws1", "tv1");
	link_delete(bridge);
}

static bool mounted(const char *path)
{
	_cleanup_free_ char *info = NULL;
	size_t n;

	cr_assert_eq(read_file("/proc/self/mountinfo", 1 << 22, &info, &n), 0);
	return strstr(info, path) != NULL;
}

Test(net_link, netns_remove_unmounts_and_unlinks)
{
	_cleanup_close_ int fd = -1, plain = -1;
	char path[128], file[128];
	struct stat st;

	ns_path(path, sizeof(path), "missing/ws1");
	cr_assert_eq(netns_create(path), -ENOENT, "its directory must exist");
	ns_path(path, sizeof(path), "ws1");
	cr_assert_eq(netns_remove(path), -ENOENT);
	cr_assert_eq(netns_create(path), 0);
	cr_assert_eq(mounted(path), true);
	cr_assert_eq(stat(path, &st), 0);
	fd = netns_open(path);
	cr_assert_geq(fd, 0);
	close(TAKE_FD(fd));

	cr_assert_eq(netns_remove(path), 0);
	cr_assert_eq(mounted(path), false);
	cr_assert_eq(stat(path, &st), -1);
	cr_assert_eq(errno, ENOENT);
	cr_assert_eq(netns_remove(path), -ENOENT);
	cr_assert_eq(netns_open(path), -ENOENT);

	/* A plain file is no namespace, and netns_create does not mount over it. */
	ns_path(file, sizeof(file), "plain");
	plain = open(file, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	cr_assert_geq(plain, 0);
	cr_assert_eq(netns_open(file), -EINVAL);
	cr_assert_eq(netns_create(file), -EEXIST);
	cr_assert_eq(mounted(file), false);
	cr_assert_eq(netns_remove(file), 0, "a leftover file is removed");
	cr_assert_eq(stat(file, &st), -1);
	/* Another kind of namespace is refused too. */
	ns_path(file, sizeof(file), "uts");
	close(open(file, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0444));
	cr_assert_eq(mount("/proc/self/ns/uts", file, NULL, MS_BIND, NULL), 0, "%m");
	cr_assert_eq(netns_open(file), -EINVAL);
	cr_assert_eq(netns_remove(file), 0);
}

static char *read_in(const char *path, const char *file)
{
	return run(path, "cat %s", file);
}

Test(net_link, ipv6_disabled_and_redirects_off_inside)
{
	_cleanup_close_ int ws = -1, fd6 = -1;
	_cleanup_free_ char *all = NULL, *eth = NULL, *lo = NULL, *acc = NULL, *snd = NULL,
			    *addr6 = NULL, *router = NULL;
	char path[128];

	cr_assert_eq(link_bridge_ensure(bridge, GATEWAY, 24), 0);
	ws = workspace_make("ws1", "tv1", true, WS1);
	ns_path(path, sizeof(path), "ws1");

	all = read_in(path, "/proc/sys/net/ipv6/conf/all/disable_ipv6");
	eth = read_in(path, "/proc/sys/net/ipv6/conf/eth0/disable_ipv6");
	lo = read_in(path, "/proc/sys/net/ipv6/conf/lo/disable_ipv6");
	acc = read_in(path, "/proc/sys/net/ipv4/conf/eth0/accept_redirects");
	snd = read_in(path, "/proc/sys/net/ipv4/conf/all/send_redirects");
	cr_assert_str_eq(all, "1\n");
	cr_assert_str_eq(eth, "1\n");
	cr_assert_str_eq(lo, "1\n");
	cr_assert_str_eq(acc, "0\n");
	cr_assert_str_eq(snd, "0\n");
	addr6 = run(path, "ip -j -6 addr | jq -c '[.[] | .addr_info[]]'");
	cr_assert_str_eq(addr6, "[]\n");
	/* The router's own namespace was not changed (the control). */
	router = run("", "cat /proc/sys/net/ipv6/conf/all/disable_ipv6");
	cr_assert_str_eq(router, "0\n");

	workspace_remove("ws1", "tv1");
	link_delete(bridge);
}

Test(net_link, loopback_only)
{
	_cleanup_close_ int ns = -1, srv = -1;
	_cleanup_free_ char *links = NULL;
	char path[128];

	ns_path(path, sizeof(path), "none");
	cr_assert_eq(netns_create(path), 0);
	ns = netns_open(path);
	cr_assert_geq(ns, 0);
	cr_assert_eq(tcp_reaches(ns, ADDR(127, 0, 0, 1), 7004, 500), false, "lo is down");
	cr_assert_eq(link_netns_loopback(ns), 0);
	cr_assert_eq(link_netns_loopback(ns), 0);
	srv = listener(ns, ADDR(127, 0, 0, 1), 7004);
	cr_assert_eq(tcp_reaches(ns, ADDR(127, 0, 0, 1), 7004, 1000), true);
	links = run(path, "ip -j link | jq -r '.[] | \"\\(.ifname) \\(.operstate)\"'");
	cr_assert_str_eq(links, "lo UNKNOWN\n");
	cr_assert_eq(netns_remove(path), 0);
}

Test(net_link, ip_forward)
{
	_cleanup_free_ char *v = NULL;

	cr_assert_eq(sysctl_ip_forward_enable(), 0);
	cr_assert_eq(sysctl_ip_forward_enable(), 0);
	v = run("", "cat /proc/sys/net/ipv4/ip_forward");
	cr_assert_str_eq(v, "1\n");
}

struct logged {
	size_t n;
	struct nflog_packet p[8];
	char prefix[8][64];
};

static void on_packet(void *userdata, const struct nflog_packet *p)
{
	struct logged *l = userdata;

	if (l->n >= ELEMENTSOF(l->p))
		return;
	l->p[l->n] = *p;
	snprintf(l->prefix[l->n], sizeof(l->prefix[0]), "%s", p->prefix);
	l->p[l->n].prefix = l->prefix[l->n];
	l->n++;
}

static void read_log(struct nflog *log, struct logged *got, size_t want)
{
	struct pollfd p = { .fd = nflog_fd(log), .events = POLLIN };

	for (int i = 0; i < 20 && got->n < want; i++) {
		if (poll(&p, 1, 100) == 1)
			cr_assert_eq(nflog_read(log, on_packet, got), 0);
	}
}

Test(net_link, nflog_reports_logged_packets)
{
	_cleanup_close_ int udp = -1, tcp = -1;
	_cleanup_free_ char *out = NULL;
	struct sockaddr_in to;
	struct logged got = { .n = 0 };
	struct nflog *log = NULL;
	char table[32];

	snprintf(table, sizeof(table), "tnflog%d", (int)getpid());
	out = run("",
		  "ip link set lo up && nft add table inet %s && "
		  "nft add chain inet %s out '{ type filter hook output priority 0; }' && "
		  "nft add rule inet %s out ip daddr 127.0.0.2 udp dport 4242 "
		  "log prefix '\"deny-udp \"' group 7 && "
		  "nft add rule inet %s out ip daddr 127.0.0.3 tcp dport 4343 "
		  "log prefix '\"deny-tcp \"' group 7 drop",
		  table, table, table, table);

	cr_assert_eq(nflog_open(7, &log), 0);
	cr_assert_geq(nflog_fd(log), 0);
	cr_assert_eq(nflog_read(log, on_packet, &got), 0, "nothing queued yet");
	cr_assert_eq(got.n, 0);

	udp = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	to = sin_of(ADDR(127, 0, 0, 2), 4241); /* not logged: the control */
	cr_assert_eq(sendto(udp, "x", 1, 0, (struct sockaddr *)&to, sizeof(to)), 1);
	to = sin_of(ADDR(127, 0, 0, 2), 4242);
	cr_assert_eq(sendto(udp, "x", 1, 0, (struct sockaddr *)&to, sizeof(to)), 1);
	cr_assert_eq(tcp_reaches(-1, ADDR(127, 0, 0, 3), 4343, 300), false);

	read_log(log, &got, 2);
	cr_assert_geq(got.n, 2);
	cr_assert_str_eq(got.p[0].prefix, "deny-udp ");
	cr_assert_eq(got.p[0].daddr, ADDR(127, 0, 0, 2));
	cr_assert_eq(got.p[0].saddr, ADDR(127, 0, 0, 1));
	cr_assert_eq(got.p[0].proto, IPPROTO_UDP);
	cr_assert_eq(got.p[0].dport, 4242);
	/* The SYN, perhaps retransmitted within the timeout: every one is the same. */
	for (size_t i = 1; i < got.n; i++) {
		cr_assert_str_eq(got.p[i].prefix, "deny-tcp ");
		cr_assert_eq(got.p[i].daddr, ADDR(127, 0, 0, 3));
		cr_assert_eq(got.p[i].proto, IPPROTO_TCP);
		cr_assert_eq(got.p[i].dport, 4343);
	}

	/* One socket per group: a second binder is refused (the kernel says EPERM). */
	struct nflog *again = NULL;
	int r = nflog_open(7, &again);
	cr_assert_eq(r, -EPERM, "%s", strerror(-r));
	nflog_close(log);
	cr_assert_eq(nflog_open(7, &again), 0, "closing released the group");
	nflog_close(again);

	free(run("", "nft delete table inet %s", table));
}
