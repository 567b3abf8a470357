/* SPDX-License-Identifier: MIT */

/* rtnetlink over libmnl. Each public function opens its own netlink socket, sends one request
 * at a time and waits for the kernel's answer: the NLMSG_ERROR carrying 0 (the ack) or -errno,
 * or NLMSG_DONE after a dump. Work inside another network namespace uses a socket opened there
 * (setns to it, socket(), setns back): the socket keeps the namespace it was made in.
 *
 * The controller is single-threaded; a namespace switch is undone on every path before the
 * function returns, and a failure to switch back is reported (the caller must not go on in the
 * wrong namespace). */

#include "link.h"

#include <errno.h>
#include <fcntl.h>
#include <libmnl/libmnl.h>
#include <linux/if.h>
#include <linux/if_link.h>
#include <linux/magic.h>
#include <linux/nsfs.h>
#include <linux/rtnetlink.h>
#include <linux/veth.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>

#include "basic/cleanup.h"
#include "basic/util.h"

/* Large enough for any message of a link dump (the kernel sizes dump messages to what the
 * reader asked for, up to 32 KiB). */
#define NL_BUFFER_SIZE 32768
/* Our requests hold a handful of attributes. */
#define NL_REQUEST_SIZE 1024

static void mnl_socket_closep(struct mnl_socket **nl)
{
	if (*nl)
		mnl_socket_close(*nl);
}
#define _cleanup_mnl_ _cleanup_(mnl_socket_closep)

/* Link names go into paths under /proc/sys and into IFLA_IFNAME: refuse what the kernel
 * would refuse, and '/'. */
static bool ifname_valid(const char *name)
{
	size_t n = name ? strnlen(name, IFNAMSIZ) : 0;

	if (n == 0 || n >= IFNAMSIZ || strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
		return false;
	for (size_t i = 0; i < n; i++)
		if (name[i] == '/' || name[i] == ':' || name[i] <= ' ' || name[i] == 0x7f)
			return false;
	return true;
}

static int nl_open(struct mnl_socket **ret)
{
	struct mnl_socket *nl = mnl_socket_open2(NETLINK_ROUTE, SOCK_CLOEXEC);

	if (!nl)
		return negative_errno();
	if (mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID) < 0) {
		int r = negative_errno();
		mnl_socket_close(nl);
		return r;
	}
	*ret = nl;
	return 0;
}

/* Sends the request nlh and reads answers until the ack (or NLMSG_DONE of a dump), passing
 * each data message to cb. Returns 0 or the kernel's -errno. */
static int nl_talk(struct mnl_socket *nl, struct nlmsghdr *nlh, mnl_cb_t cb, void *data)
{
	_cleanup_free_ char *buf = malloc(NL_BUFFER_SIZE);
	unsigned portid = mnl_socket_get_portid(nl);
	uint32_t seq = nlh->nlmsg_seq;

	if (!buf)
		return -ENOMEM;
	if (mnl_socket_sendto(nl, nlh, nlh->nlmsg_len) < 0)
		return negative_errno();
	for (;;) {
		ssize_t n = mnl_socket_recvfrom(nl, buf, NL_BUFFER_SIZE);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return negative_errno();
		}
		int r = mnl_cb_run(buf, (size_t)n, seq, portid, cb, data);
		if (r < 0)
			return negative_errno();
		if (r == MNL_CB_STOP)
			return 0;
	}
}

static uint32_t nl_seq(void)
{
	static uint32_t seq;

	if (seq == 0)
		seq = (uint32_t)time(NULL);
	return ++seq;
}

static struct nlmsghdr *nl_request(char *buf, uint16_t type, uint16_t flags)
{
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);

	nlh->nlmsg_type = type;
	nlh->nlmsg_flags = NLM_F_REQUEST | flags;
	nlh->nlmsg_seq = nl_seq();
	return nlh;
}

static struct ifinfomsg *put_ifinfo(struct nlmsghdr *nlh, uint8_t family, int ifindex)
{
	struct ifinfomsg *ifi = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifi));

	ifi->ifi_family = family;
	ifi->ifi_index = ifindex;
	return ifi;
}

/* What RTM_GETLINK tells about one link. */
struct link_info {
	int ifindex;
	unsigned flags;
	uint32_t master;
	char name[IFNAMSIZ];
	char kind[16];
};

static int linkinfo_attr_cb(const struct nlattr *a, void *data)
{
	const struct nlattr **tb = data;
	uint16_t type = mnl_attr_get_type(a);

	if (type == IFLA_INFO_KIND && mnl_attr_validate(a, MNL_TYPE_NUL_STRING) >= 0)
		tb[type] = a;
	return MNL_CB_OK;
}

static int link_attr_cb(const struct nlattr *a, void *data)
{
	const struct nlattr **tb = data;
	uint16_t type = mnl_attr_get_type(a);

	switch (type) {
	case IFLA_IFNAME:
		if (mnl_attr_validate(a, MNL_TYPE_NUL_STRING) < 0)
			return MNL_CB_OK;
		break;
	case IFLA_MASTER:
		if (mnl_attr_validate(a, MNL_TYPE_U32) < 0)
			return MNL_CB_OK;
		break;
	case IFLA_LINKINFO:
		if (mnl_attr_validate(a, MNL_TYPE_NESTED) < 0)
			return MNL_CB_OK;
		break;
	default:
		return MNL_CB_OK;
	}
	tb[type] = a;
	return MNL_CB_OK;
}

static void link_info_parse(const struct nlmsghdr *nlh, struct link_info *ret)
{
	const struct nlattr *tb[IFLA_MAX + 1] = {};
	const struct ifinfomsg *ifi = mnl_nlmsg_get_payload(nlh);

	*ret = (struct link_info){ .ifindex = ifi->ifi_index, .flags = ifi->ifi_flags };
	mnl_attr_parse(nlh, sizeof(*ifi), link_attr_cb, tb);
	if (tb[IFLA_IFNAME])
		snprintf(ret->name, sizeof(ret->name), "%s", mnl_attr_get_str(tb[IFLA_IFNAME]));
	if (tb[IFLA_MASTER])
		ret->master = mnl_attr_get_u32(tb[IFLA_MASTER]);
	if (tb[IFLA_LINKINFO]) {
		const struct nlattr *info[IFLA_INFO_MAX + 1] = {};
		mnl_attr_parse_nested(tb[IFLA_LINKINFO], linkinfo_attr_cb, info);
		if (info[IFLA_INFO_KIND])
			snprintf(ret->kind, sizeof(ret->kind), "%s",
				 mnl_attr_get_str(info[IFLA_INFO_KIND]));
	}
}

static int link_get_cb(const struct nlmsghdr *nlh, void *data)
{
	if (nlh->nlmsg_type != RTM_NEWLINK ||
	    mnl_nlmsg_get_payload_len(nlh) < sizeof(struct ifinfomsg))
		return MNL_CB_OK;
	link_info_parse(nlh, data);
	return MNL_CB_OK;
}

/* -ENODEV when there is no such link. */
static int link_get(struct mnl_socket *nl, const char *name, struct link_info *ret)
{
	char buf[NL_REQUEST_SIZE];
	struct link_info info = { .ifindex = 0 };
	struct nlmsghdr *nlh = nl_request(buf, RTM_GETLINK, NLM_F_ACK);
	int r;

	put_ifinfo(nlh, AF_UNSPEC, 0);
	mnl_attr_put_strz(nlh, IFLA_IFNAME, name);
	r = nl_talk(nl, nlh, link_get_cb, &info);
	if (r < 0)
		return r;
	if (info.ifindex <= 0)
		return -ENODEV;
	*ret = info;
	return 0;
}

static int link_set_up(struct mnl_socket *nl, int ifindex)
{
	char buf[NL_REQUEST_SIZE];
	struct nlmsghdr *nlh = nl_request(buf, RTM_NEWLINK, NLM_F_ACK);
	struct ifinfomsg *ifi = put_ifinfo(nlh, AF_UNSPEC, ifindex);

	ifi->ifi_flags = IFF_UP;
	ifi->ifi_change = IFF_UP;
	return nl_talk(nl, nlh, NULL, NULL);
}

/* Adds addr/prefix to the link; an address that is there already is kept (0). */
static int addr_add(struct mnl_socket *nl, int ifindex, uint32_t addr, unsigned prefix)
{
	char buf[NL_REQUEST_SIZE];
	struct nlmsghdr *nlh = nl_request(buf, RTM_NEWADDR, NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL);
	struct ifaddrmsg *ifa = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifa));
	uint32_t be = htonl(addr);
	int r;

	if (prefix > 32)
		return -EINVAL;
	ifa->ifa_family = AF_INET;
	ifa->ifa_prefixlen = prefix;
	ifa->ifa_scope = RT_SCOPE_UNIVERSE;
	ifa->ifa_index = ifindex;
	mnl_attr_put_u32(nlh, IFA_LOCAL, be);
	mnl_attr_put_u32(nlh, IFA_ADDRESS, be);
	r = nl_talk(nl, nlh, NULL, NULL);
	return r == -EEXIST ? 0 : r;
}

/* The default route via gateway out of ifindex, replacing any other default route. */
static int route_default_set(struct mnl_socket *nl, int ifindex, uint32_t gateway)
{
	char buf[NL_REQUEST_SIZE];
	struct nlmsghdr *nlh =
		nl_request(buf, RTM_NEWROUTE, NLM_F_ACK | NLM_F_CREATE | NLM_F_REPLACE);
	struct rtmsg *rtm = mnl_nlmsg_put_extra_header(nlh, sizeof(*rtm));

	rtm->rtm_family = AF_INET;
	rtm->rtm_table = RT_TABLE_MAIN;
	rtm->rtm_protocol = RTPROT_STATIC;
	rtm->rtm_scope = RT_SCOPE_UNIVERSE;
	rtm->rtm_type = RTN_UNICAST;
	mnl_attr_put_u32(nlh, RTA_GATEWAY, htonl(gateway));
	mnl_attr_put_u32(nlh, RTA_OIF, (uint32_t)ifindex);
	return nl_talk(nl, nlh, NULL, NULL);
}

static int write_string_file(const char *path, const char *value)
{
	_cleanup_close_ int fd = open(path, O_WRONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY);

	if (fd < 0)
		return negative_errno();
	return write_all(fd, value, strlen(value));
}

/* Opens the current thread's network namespace: what netns_leave() goes back to. */
static int netns_enter(int netns_fd, int *ret_orig)
{
	int orig = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);

	if (orig < 0)
		return negative_errno();
	if (setns(netns_fd, CLONE_NEWNET) < 0) {
		int r = negative_errno();
		close(orig);
		return r;
	}
	*ret_orig = orig;
	return 0;
}

static int netns_leave(int orig)
{
	int r = setns(orig, CLONE_NEWNET) < 0 ? negative_errno() : 0;

	close(orig);
	return r;
}

/* A netlink socket that lives in the namespace netns_fd. */
static int nl_open_in(int netns_fd, struct mnl_socket **ret)
{
	int orig, r, q;

	r = netns_enter(netns_fd, &orig);
	if (r < 0)
		return r;
	r = nl_open(ret);
	q = netns_leave(orig);
	if (q < 0) {
		if (r >= 0)
			mnl_socket_close(*ret);
		return q;
	}
	return r;
}

int netns_socket(int netns_fd, int domain, int type, int protocol)
{
	int orig, fd, r, q;

	if (netns_fd < 0)
		return -EBADF;
	r = netns_enter(netns_fd, &orig);
	if (r < 0)
		return r;
	fd = socket(domain, type | SOCK_CLOEXEC, protocol);
	r = fd < 0 ? negative_errno() : fd;
	q = netns_leave(orig);
	if (q < 0) {
		if (fd >= 0)
			close(fd);
		return q;
	}
	return r;
}

int netns_create(const char *path)
{
	_cleanup_close_ int file = -1, existing = -1;
	char target[64];
	struct statfs sfs;
	int orig, r, q;

	existing = open(path, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (existing >= 0 && fstatfs(existing, &sfs) >= 0 && sfs.f_type == NSFS_MAGIC)
		return 0;
	file = open(path, O_RDONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0444);
	if (file < 0)
		return negative_errno();
	/* Mount onto the file just made, not onto whatever path names by the time of mount(). */
	snprintf(target, sizeof(target), "/proc/self/fd/%d", file);

	orig = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	if (orig < 0) {
		r = negative_errno();
		goto fail;
	}
	if (unshare(CLONE_NEWNET) < 0) {
		r = negative_errno();
		close(orig);
		goto fail;
	}
	r = 0;
	if (mount("/proc/thread-self/ns/net", target, NULL, MS_BIND, NULL) < 0)
		r = negative_errno();
	q = netns_leave(orig);
	if (r >= 0 && q < 0) {
		umount2(path, MNT_DETACH | UMOUNT_NOFOLLOW);
		r = q;
	}
	if (r >= 0)
		return 0;
fail:
	unlink(path);
	return r;
}

int netns_remove(const char *path)
{
	bool mounted = false;

	/* A namespace mounted twice over the same file would need two; a few is plenty. */
	for (int i = 0; i < 8; i++) {
		if (umount2(path, MNT_DETACH | UMOUNT_NOFOLLOW) < 0) {
			if (errno == EINVAL)
				break;
			if (errno == ENOENT)
				return -ENOENT;
			return negative_errno();
		}
		mounted = true;
	}
	if (unlink(path) < 0) {
		if (errno == ENOENT && mounted)
			return 0;
		return negative_errno();
	}
	return 0;
}

static int netns_check(int fd)
{
	struct statfs sfs;

	if (fstatfs(fd, &sfs) < 0)
		return negative_errno();
	if (sfs.f_type != NSFS_MAGIC || ioctl(fd, NS_GET_NSTYPE) != CLONE_NEWNET)
		return -EINVAL;
	return 0;
}

int netns_open_pid(pid_t pid)
{
	char path[64];
	int r;

	if (pid <= 0)
		return -EINVAL;
	snprintf(path, sizeof path, "/proc/%d/ns/net", (int)pid);
	/* the kernel's own link to the namespace: followed, and what it leads to checked */
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return negative_errno();
	r = netns_check(fd);
	return r < 0 ? r : TAKE_FD(fd);
}

int netns_open(const char *path)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	struct statfs sfs;

	if (fd < 0)
		return negative_errno();
	if (fstatfs(fd, &sfs) < 0)
		return negative_errno();
	if (sfs.f_type != NSFS_MAGIC || ioctl(fd, NS_GET_NSTYPE) != CLONE_NEWNET)
		return -EINVAL;
	return TAKE_FD(fd);
}

static int bridge_create(struct mnl_socket *nl, const char *name)
{
	char buf[NL_REQUEST_SIZE];
	struct nlmsghdr *nlh = nl_request(buf, RTM_NEWLINK, NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL);
	struct nlattr *linkinfo, *data;

	put_ifinfo(nlh, AF_UNSPEC, 0);
	mnl_attr_put_strz(nlh, IFLA_IFNAME, name);
	linkinfo = mnl_attr_nest_start(nlh, IFLA_LINKINFO);
	mnl_attr_put_strz(nlh, IFLA_INFO_KIND, "bridge");
	data = mnl_attr_nest_start(nlh, IFLA_INFO_DATA);
	mnl_attr_put_u32(nlh, IFLA_BR_STP_STATE, 0);
	mnl_attr_nest_end(nlh, data);
	mnl_attr_nest_end(nlh, linkinfo);
	return nl_talk(nl, nlh, NULL, NULL);
}

/* The bridge's own MAC address: locally administered, unicast, derived from its name so that
 * it is the same after a controller restart. Left to the kernel, a bridge takes the lowest
 * address of its ports and changes it whenever a port comes or goes, and a workspace whose
 * neighbour cache holds the old one loses its packets (to a MAC the worker no longer answers
 * for, before any firewall rule sees them) until its cache notices, seconds later. An address
 * set by us stays. */
static int bridge_set_address(struct mnl_socket *nl, int ifindex, const char *name)
{
	char buf[NL_REQUEST_SIZE];
	struct nlmsghdr *nlh = nl_request(buf, RTM_NEWLINK, NLM_F_ACK);
	uint32_t h = 2166136261u;
	uint8_t mac[6];

	for (const char *p = name; *p; p++)
		h = (h ^ (uint8_t)*p) * 16777619u;
	mac[0] = 0x02; /* locally administered, unicast */
	mac[1] = 0x5a;
	memcpy(&mac[2], &h, sizeof h);
	put_ifinfo(nlh, AF_UNSPEC, ifindex);
	mnl_attr_put(nlh, IFLA_ADDRESS, sizeof mac, mac);
	return nl_talk(nl, nlh, NULL, NULL);
}

int link_bridge_ensure(const char *name, uint32_t addr, unsigned prefix)
{
	_cleanup_mnl_ struct mnl_socket *nl = NULL;
	struct link_info info;
	int r;

	if (!ifname_valid(name) || prefix > 32)
		return -EINVAL;
	r = nl_open(&nl);
	if (r < 0)
		return r;
	r = bridge_create(nl, name);
	if (r < 0 && r != -EEXIST)
		return r;
	r = link_get(nl, name, &info);
	if (r < 0)
		return r;
	if (strcmp(info.kind, "bridge") != 0)
		return -EEXIST; /* a link of another kind holds the name */
	r = bridge_set_address(nl, info.ifindex, name);
	if (r < 0)
		return r;
	r = addr_add(nl, info.ifindex, addr, prefix);
	if (r < 0)
		return r;
	return link_set_up(nl, info.ifindex);
}

/* A veth whose peer is born in the namespace netns_fd; the host end is a port of master,
 * down until the caller has set its port flags. */
static int veth_create(struct mnl_socket *nl, const char *host_name, uint32_t master, int netns_fd,
		       const char *peer_name)
{
	char buf[NL_REQUEST_SIZE];
	struct nlmsghdr *nlh = nl_request(buf, RTM_NEWLINK, NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL);
	struct nlattr *linkinfo, *data, *peer;

	put_ifinfo(nlh, AF_UNSPEC, 0);
	mnl_attr_put_strz(nlh, IFLA_IFNAME, host_name);
	mnl_attr_put_u32(nlh, IFLA_MASTER, master);
	linkinfo = mnl_attr_nest_start(nlh, IFLA_LINKINFO);
	mnl_attr_put_strz(nlh, IFLA_INFO_KIND, "veth");
	data = mnl_attr_nest_start(nlh, IFLA_INFO_DATA);
	peer = mnl_attr_nest_start(nlh, VETH_INFO_PEER);
	/* VETH_INFO_PEER is an ifinfomsg followed by the peer's own link attributes. */
	mnl_nlmsg_put_extra_header(nlh, sizeof(struct ifinfomsg));
	mnl_attr_put_strz(nlh, IFLA_IFNAME, peer_name);
	mnl_attr_put_u32(nlh, IFLA_NET_NS_FD, (uint32_t)netns_fd);
	mnl_attr_nest_end(nlh, peer);
	mnl_attr_nest_end(nlh, data);
	mnl_attr_nest_end(nlh, linkinfo);
	return nl_talk(nl, nlh, NULL, NULL);
}

/* Bridge port isolation (IFLA_BRPORT_ISOLATED): the port forwards to and from non-isolated
 * ports and the bridge itself only. */
static int bridge_port_isolate(struct mnl_socket *nl, int ifindex)
{
	char buf[NL_REQUEST_SIZE];
	struct nlmsghdr *nlh = nl_request(buf, RTM_SETLINK, NLM_F_ACK);
	struct nlattr *protinfo;

	put_ifinfo(nlh, AF_BRIDGE, ifindex);
	protinfo = mnl_attr_nest_start(nlh, IFLA_PROTINFO);
	mnl_attr_put_u8(nlh, IFLA_BRPORT_ISOLATED, 1);
	mnl_attr_nest_end(nlh, protinfo);
	return nl_talk(nl, nlh, NULL, NULL);
}

static int link_delete_index(struct mnl_socket *nl, int ifindex)
{
	char buf[NL_REQUEST_SIZE];
	struct nlmsghdr *nlh = nl_request(buf, RTM_DELLINK, NLM_F_ACK);

	put_ifinfo(nlh, AF_UNSPEC, ifindex);
	return nl_talk(nl, nlh, NULL, NULL);
}

int link_veth_add(const char *host_name, const char *bridge, bool isolated, int netns_fd,
		  const char *peer_name)
{
	_cleanup_mnl_ struct mnl_socket *nl = NULL;
	struct link_info br, veth;
	int r;

	if (!ifname_valid(host_name) || !ifname_valid(bridge) || !ifname_valid(peer_name) ||
	    netns_fd < 0)
		return -EINVAL;
	r = nl_open(&nl);
	if (r < 0)
		return r;
	r = link_get(nl, bridge, &br);
	if (r < 0)
		return r;
	r = veth_create(nl, host_name, (uint32_t)br.ifindex, netns_fd, peer_name);
	if (r < 0)
		return r;
	r = link_get(nl, host_name, &veth);
	if (r < 0) {
		link_delete(host_name);
		return r;
	}
	if (isolated) {
		r = bridge_port_isolate(nl, veth.ifindex);
		if (r < 0)
			goto fail;
	}
	r = link_set_up(nl, veth.ifindex);
	if (r < 0)
		goto fail;
	return 0;
fail:
	link_delete_index(nl, veth.ifindex);
	return r;
}

/* sysctls of the current network namespace: /proc/sys/net shows the namespace of the task
 * that opens the file. IPv6 may be absent from the kernel altogether, which is as good. */
static int netns_sysctls_harden(const char *ifname)
{
	static const char *const ipv6[] = {
		"/proc/sys/net/ipv6/conf/all/disable_ipv6",
		"/proc/sys/net/ipv6/conf/default/disable_ipv6",
	};
	static const char *const confs[] = { "all", "default", NULL };
	char path[128];
	int r;

	for (size_t i = 0; i < ELEMENTSOF(ipv6); i++) {
		r = write_string_file(ipv6[i], "1");
		if (r < 0 && r != -ENOENT)
			return r;
	}
	/* The link existed before "default" changed: it needs its own values too. */
	for (size_t i = 0; i < ELEMENTSOF(confs); i++) {
		const char *conf = confs[i] ? confs[i] : ifname;
		snprintf(path, sizeof(path), "/proc/sys/net/ipv4/conf/%s/accept_redirects", conf);
		r = write_string_file(path, "0");
		if (r < 0)
			return r;
		snprintf(path, sizeof(path), "/proc/sys/net/ipv4/conf/%s/send_redirects", conf);
		r = write_string_file(path, "0");
		if (r < 0)
			return r;
	}
	return 0;
}

static int netns_sysctls_harden_in(int netns_fd, const char *ifname)
{
	int orig, r, q;

	r = netns_enter(netns_fd, &orig);
	if (r < 0)
		return r;
	r = netns_sysctls_harden(ifname);
	q = netns_leave(orig);
	return q < 0 ? q : r;
}

static int loopback_up(struct mnl_socket *nl)
{
	struct link_info lo;
	int r = link_get(nl, "lo", &lo);

	if (r < 0)
		return r;
	return link_set_up(nl, lo.ifindex);
}

int link_netns_configure(int netns_fd, const char *ifname, uint32_t addr, unsigned prefix,
			 uint32_t gateway)
{
	_cleanup_mnl_ struct mnl_socket *nl = NULL;
	struct link_info link;
	int r;

	if (netns_fd < 0 || !ifname_valid(ifname) || prefix > 32)
		return -EINVAL;
	r = nl_open_in(netns_fd, &nl);
	if (r < 0)
		return r;
	r = link_get(nl, ifname, &link);
	if (r < 0)
		return r;
	/* Before any link comes up, so that no IPv6 address is ever made. */
	r = netns_sysctls_harden_in(netns_fd, ifname);
	if (r < 0)
		return r;
	r = loopback_up(nl);
	if (r < 0)
		return r;
	r = addr_add(nl, link.ifindex, addr, prefix);
	if (r < 0)
		return r;
	r = link_set_up(nl, link.ifindex);
	if (r < 0)
		return r;
	return route_default_set(nl, link.ifindex, gateway);
}

int link_netns_loopback(int netns_fd)
{
	_cleanup_mnl_ struct mnl_socket *nl = NULL;
	int r;

	if (netns_fd < 0)
		return -EINVAL;
	r = nl_open_in(netns_fd, &nl);
	if (r < 0)
		return r;
	return loopback_up(nl);
}

int link_delete(const char *name)
{
	_cleanup_mnl_ struct mnl_socket *nl = NULL;
	char buf[NL_REQUEST_SIZE];
	struct nlmsghdr *nlh;
	int r;

	if (!ifname_valid(name))
		return -EINVAL;
	r = nl_open(&nl);
	if (r < 0)
		return r;
	nlh = nl_request(buf, RTM_DELLINK, NLM_F_ACK);
	put_ifinfo(nlh, AF_UNSPEC, 0);
	mnl_attr_put_strz(nlh, IFLA_IFNAME, name);
	return nl_talk(nl, nlh, NULL, NULL);
}

struct ports_dump {
	uint32_t master;
	char **names;
	int error;
};

static int ports_dump_cb(const struct nlmsghdr *nlh, void *data)
{
	struct ports_dump *d = data;
	struct link_info info;
	int r;

	if (nlh->nlmsg_type != RTM_NEWLINK ||
	    mnl_nlmsg_get_payload_len(nlh) < sizeof(struct ifinfomsg))
		return MNL_CB_OK;
	link_info_parse(nlh, &info);
	if (info.master != d->master || info.name[0] == '\0' || d->error < 0)
		return MNL_CB_OK;
	r = strv_push(&d->names, info.name);
	if (r < 0)
		d->error = r; /* the dump is read to its end all the same */
	return MNL_CB_OK;
}

int link_bridge_ports(const char *bridge, char ***ret)
{
	_cleanup_mnl_ struct mnl_socket *nl = NULL;
	char buf[NL_REQUEST_SIZE];
	struct ports_dump d = { .names = calloc(1, sizeof(char *)) };
	struct link_info br;
	struct nlmsghdr *nlh;
	int r;

	if (!ifname_valid(bridge))
		return -EINVAL;
	if (!d.names)
		return -ENOMEM;
	r = nl_open(&nl);
	if (r >= 0)
		r = link_get(nl, bridge, &br);
	if (r < 0) {
		strv_free(d.names);
		return r;
	}
	d.master = (uint32_t)br.ifindex;
	/* The kernel filters the dump by IFLA_MASTER; the callback checks it again. */
	nlh = nl_request(buf, RTM_GETLINK, NLM_F_DUMP);
	put_ifinfo(nlh, AF_UNSPEC, 0);
	mnl_attr_put_u32(nlh, IFLA_MASTER, d.master);
	r = nl_talk(nl, nlh, ports_dump_cb, &d);
	if (r >= 0)
		r = d.error;
	if (r < 0) {
		strv_free(d.names);
		return r;
	}
	*ret = d.names;
	return 0;
}

int link_exists(const char *name)
{
	_cleanup_mnl_ struct mnl_socket *nl = NULL;
	struct link_info info;
	int r;

	if (!ifname_valid(name))
		return -EINVAL;
	r = nl_open(&nl);
	if (r < 0)
		return r;
	r = link_get(nl, name, &info);
	if (r == -ENODEV)
		return 0;
	return r < 0 ? r : 1;
}

int sysctl_ip_forward_enable(void)
{
	return write_string_file("/proc/sys/net/ipv4/ip_forward", "1");
}

/* The worker's own view */

/* Distinct entries a list of the host's view keeps: more gateways or networks than this is no
 * worker we know of. */
#define HOST_LIST_MAX 4096

struct host_dump {
	struct net_host *h;
	int error;
};

static int cidr_list_add(struct net_cidr **v, size_t *n, uint32_t addr, unsigned prefix)
{
	for (size_t i = 0; i < *n; i++)
		if ((*v)[i].addr == addr && (*v)[i].prefix == prefix)
			return 0;
	if (*n == HOST_LIST_MAX)
		return -E2BIG;
	if (*n % 64 == 0) {
		struct net_cidr *nv = reallocarray(*v, *n + 64, sizeof(**v));
		if (!nv)
			return -ENOMEM;
		*v = nv;
	}
	(*v)[(*n)++] = (struct net_cidr){ addr, prefix };
	return 0;
}

static int addr_attr_cb(const struct nlattr *a, void *data)
{
	const struct nlattr **tb = data;
	uint16_t type = mnl_attr_get_type(a);

	if ((type == IFA_LOCAL || type == IFA_ADDRESS) &&
	    mnl_attr_validate2(a, MNL_TYPE_BINARY, sizeof(uint32_t)) >= 0)
		tb[type] = a;
	return MNL_CB_OK;
}

static int addr_dump_cb(const struct nlmsghdr *nlh, void *data)
{
	struct host_dump *d = data;
	const struct nlattr *tb[IFA_MAX + 1] = {};
	const struct ifaddrmsg *ifa = mnl_nlmsg_get_payload(nlh);
	const struct nlattr *a;
	uint32_t addr;

	if (nlh->nlmsg_type != RTM_NEWADDR || mnl_nlmsg_get_payload_len(nlh) < sizeof(*ifa) ||
	    ifa->ifa_family != AF_INET || d->error < 0)
		return MNL_CB_OK;
	mnl_attr_parse(nlh, sizeof(*ifa), addr_attr_cb, tb);
	a = tb[IFA_LOCAL] ? tb[IFA_LOCAL] : tb[IFA_ADDRESS];
	if (!a)
		return MNL_CB_OK;
	memcpy(&addr, mnl_attr_get_payload(a), sizeof(addr));
	d->error = cidr_list_add(&d->h->worker, &d->h->n_worker, ntohl(addr), 32);
	return MNL_CB_OK;
}

static int route_attr_cb(const struct nlattr *a, void *data)
{
	const struct nlattr **tb = data;
	uint16_t type = mnl_attr_get_type(a);

	switch (type) {
	case RTA_DST:
	case RTA_GATEWAY:
		if (mnl_attr_validate2(a, MNL_TYPE_BINARY, sizeof(uint32_t)) < 0)
			return MNL_CB_OK;
		break;
	case RTA_MULTIPATH:
		break;
	default:
		return MNL_CB_OK;
	}
	tb[type] = a;
	return MNL_CB_OK;
}

static int gateway_add(struct host_dump *d, const struct nlattr *a)
{
	uint32_t gw;

	memcpy(&gw, mnl_attr_get_payload(a), sizeof(gw));
	return cidr_list_add(&d->h->gateways, &d->h->n_gateways, ntohl(gw), 32);
}

/* The gateways of a multipath route's next hops. */
static int multipath_gateways(struct host_dump *d, const struct nlattr *mp)
{
	const char *p = mnl_attr_get_payload(mp);
	size_t left = mnl_attr_get_payload_len(mp);
	int r = 0;

	while (r >= 0 && left >= sizeof(struct rtnexthop)) {
		const struct rtnexthop *nh = (const struct rtnexthop *)p;
		size_t len = nh->rtnh_len;

		if (len < sizeof(*nh) || len > left)
			break;
		for (const struct nlattr *a = (const struct nlattr *)RTNH_DATA(nh);
		     r >= 0 && mnl_attr_ok(a, (int)((const char *)nh + len - (const char *)a));
		     a = mnl_attr_next(a))
			if (mnl_attr_get_type(a) == RTA_GATEWAY &&
			    mnl_attr_validate2(a, MNL_TYPE_BINARY, sizeof(uint32_t)) >= 0)
				r = gateway_add(d, a);
		len = RTNH_ALIGN(len);
		if (len > left)
			break;
		p += len;
		left -= len;
	}
	return r;
}

/* Unicast routes of every table: a gateway is the worker's gateway, a route without one (scope
 * link) a network it is connected to. */
static int route_dump_cb(const struct nlmsghdr *nlh, void *data)
{
	struct host_dump *d = data;
	const struct nlattr *tb[RTA_MAX + 1] = {};
	const struct rtmsg *rt = mnl_nlmsg_get_payload(nlh);
	uint32_t dst = 0;

	if (nlh->nlmsg_type != RTM_NEWROUTE || mnl_nlmsg_get_payload_len(nlh) < sizeof(*rt) ||
	    rt->rtm_family != AF_INET || rt->rtm_type != RTN_UNICAST || rt->rtm_dst_len > 32 ||
	    d->error < 0)
		return MNL_CB_OK;
	mnl_attr_parse(nlh, sizeof(*rt), route_attr_cb, tb);
	if (tb[RTA_GATEWAY])
		d->error = gateway_add(d, tb[RTA_GATEWAY]);
	else if (tb[RTA_MULTIPATH])
		d->error = multipath_gateways(d, tb[RTA_MULTIPATH]);
	else if (rt->rtm_scope == RT_SCOPE_LINK) {
		if (tb[RTA_DST])
			memcpy(&dst, mnl_attr_get_payload(tb[RTA_DST]), sizeof(dst));
		d->error = cidr_list_add(&d->h->connected, &d->h->n_connected, ntohl(dst),
					 rt->rtm_dst_len);
	}
	return MNL_CB_OK;
}

static int host_dump(struct mnl_socket *nl, uint16_t type, mnl_cb_t cb, struct host_dump *d)
{
	char buf[NL_REQUEST_SIZE];
	struct nlmsghdr *nlh = nl_request(buf, type, NLM_F_DUMP);
	int r;

	if (type == RTM_GETADDR) {
		struct ifaddrmsg *ifa = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifa));
		ifa->ifa_family = AF_INET;
	} else {
		struct rtmsg *rt = mnl_nlmsg_put_extra_header(nlh, sizeof(*rt));
		rt->rtm_family = AF_INET;
		rt->rtm_table = RT_TABLE_UNSPEC; /* every table */
	}
	r = nl_talk(nl, nlh, cb, d);
	return r < 0 ? r : d->error;
}

int link_host_read(struct net_host *ret)
{
	_cleanup_mnl_ struct mnl_socket *nl = NULL;
	struct net_host h = {};
	struct host_dump d = { .h = &h };
	int r;

	r = nl_open(&nl);
	if (r >= 0)
		r = host_dump(nl, RTM_GETADDR, addr_dump_cb, &d);
	if (r >= 0)
		r = host_dump(nl, RTM_GETROUTE, route_dump_cb, &d);
	if (r < 0) {
		net_host_done(&h);
		return r;
	}
	*ret = h;
	return 0;
}

int link_monitor_open(void)
{
	struct sockaddr_nl sa = { .nl_family = AF_NETLINK,
				  .nl_groups = RTMGRP_IPV4_IFADDR | RTMGRP_IPV4_ROUTE };
	_cleanup_close_ int fd =
		socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, NETLINK_ROUTE);

	if (fd < 0)
		return negative_errno();
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return negative_errno();
	return TAKE_FD(fd);
}

void link_monitor_drain(int fd)
{
	char buf[8192];

	/* What changed is read again whole (link_host_read()): the messages only say when. An
	 * overrun (ENOBUFS) says the same. */
	for (int i = 0; i < 1024; i++) {
		ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
		if (n < 0 && errno != EINTR && errno != ENOBUFS)
			return;
	}
}
