/* SPDX-License-Identifier: MIT */
/* The workspaces' network: the worker's side (bridge, forwarding, our nft table, the resolver,
 * the denial log) made once, and each workspace's objects made, replaced and removed from what
 * the manager recorded. */

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "net.h"
#include "basic/cleanup.h"
#include "basic/util.h"
#include "event/event.h"
#include "link.h"
#include "nflog.h"
#include "nft.h"
#include "pins.h"
#include "resolver.h"

#define NET_PEER_NAME "eth0"
#define NET_MIN_PREFIX 16 /* at most 65536 addresses: the allocator's bitmap stays small */
#define NET_MAX_PREFIX 29
#define NET_LOG_PER_SEC 10 /* refused names logged per workspace and second (the rest counted) */
/* A change of the worker's addresses or routes comes in bursts (an interface coming up adds an
 * address and several routes): the blocked set is made again once they settle. */
#define NET_HOST_SETTLE_USEC (200 * 1000)

/* One workspace the resolver and the denial log know, by address. */
struct net_entry {
	struct net_entry *next;
	char *id;
	uint32_t address;
	enum net_mode mode;
	struct net_policy *policy; /* restricted: our own copy */
	uint64_t dns_allowed, dns_refused, dns_shed;
	struct pins pins;	  /* restricted: what its allowed answers pinned, until when */
	uint64_t log_window_usec; /* refused names logged in this second, at most NET_LOG_PER_SEC */
	unsigned logged;
};

struct net_check {
	bool ok;
	char message[256];
};

/* What net_ready() reports, in its order; a required one missing fails net_check(). */
enum {
	NET_CHECK_RANGE,
	NET_CHECK_BRIDGE,
	NET_CHECK_FORWARD,
	NET_CHECK_NFT,
	NET_CHECK_RESOLVER,
	NET_CHECK_LOG,
	_NET_CHECK_MAX,
};

static const struct {
	const char *name;
	bool required;
} check_info[_NET_CHECK_MAX] = {
	[NET_CHECK_RANGE] = { "networkRange", true }, [NET_CHECK_BRIDGE] = { "bridge", true },
	[NET_CHECK_FORWARD] = { "ipForward", true },  [NET_CHECK_NFT] = { "nftables", true },
	[NET_CHECK_RESOLVER] = { "resolver", true },  [NET_CHECK_LOG] = { "denialLog", false },
};

struct net {
	struct event_loop *loop;
	char *root, *bridge;
	uint16_t dns_port, log_group;
	uint32_t pin_min; /* seconds; 0: the TTL alone (nft_pin_timeout) */
	uint32_t allow;
	net_denied_fn on_denied;
	void *userdata;

	uint32_t range, gateway; /* host byte order */
	unsigned prefix;
	char nameserver[INET_ADDRSTRLEN];

	int lock_fd;
	struct net_check checks[_NET_CHECK_MAX];
	struct nft *nft;
	struct resolver *resolver;
	struct nflog *nflog;
	struct event_source *nflog_source;
	struct net_entry *entries;

	/* The worker's addresses and routes: read at start, again NET_HOST_SETTLE_USEC after the
	 * first of a burst of changes. */
	int host_fd;
	struct event_source *host_source, *host_timer;
	bool host_pending;
	struct net_host host; /* as the blocked set was last made from it */
};

static const char *const mode_names[_NET_MODE_MAX] = {
	[NET_NONE] = "none",
	[NET_BRIDGE] = "bridge",
	[NET_RESTRICTED] = "restricted",
};

const char *net_mode_to_string(enum net_mode m)
{
	return m >= 0 && m < _NET_MODE_MAX ? mode_names[m] : NULL;
}

int net_mode_from_string(const char *s)
{
	for (int i = 0; s && i < _NET_MODE_MAX; i++)
		if (strcmp(s, mode_names[i]) == 0)
			return i;
	return -EINVAL;
}

static void check_set(struct net_check *c, bool ok, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void check_set(struct net_check *c, bool ok, const char *fmt, ...)
{
	va_list ap;

	c->ok = ok;
	va_start(ap, fmt);
	vsnprintf(c->message, sizeof c->message, fmt, ap);
	va_end(ap);
}

static void addr_string(uint32_t a, char buf[INET_ADDRSTRLEN])
{
	struct in_addr in = { .s_addr = htonl(a) };

	inet_ntop(AF_INET, &in, buf, INET_ADDRSTRLEN);
}

/* "a.b.c.d/p" with no host bits set, p within what the allocator takes. */
static int parse_range(const char *s, uint32_t *ret_net, unsigned *ret_prefix)
{
	char buf[32];
	struct in_addr in;
	uint64_t p;
	char *slash;

	if (!s || strlen(s) >= sizeof buf)
		return -EINVAL;
	snprintf(buf, sizeof buf, "%s", s);
	slash = strchr(buf, '/');
	if (!slash)
		return -EINVAL;
	*slash = 0;
	if (inet_pton(AF_INET, buf, &in) != 1 || parse_u64(slash + 1, 32, &p) < 0 ||
	    p < NET_MIN_PREFIX || p > NET_MAX_PREFIX)
		return -EINVAL;
	uint32_t a = ntohl(in.s_addr), mask = ~0u << (32 - p);
	if (a & ~mask)
		return -EINVAL;
	*ret_net = a;
	*ret_prefix = (unsigned)p;
	return 0;
}

static struct net_entry *entry_by_address(struct net *n, uint32_t a)
{
	for (struct net_entry *e = n->entries; e; e = e->next)
		if (e->address == a)
			return e;
	return NULL;
}

static struct net_entry *entry_by_id(struct net *n, const char *id)
{
	for (struct net_entry *e = n->entries; e; e = e->next)
		if (strcmp(e->id, id) == 0)
			return e;
	return NULL;
}

static void entry_free(struct net_entry *e)
{
	if (!e)
		return;
	free(e->id);
	net_policy_free(e->policy);
	pins_free(&e->pins);
	free(e);
}

static void entry_remove(struct net *n, const char *id)
{
	for (struct net_entry **p = &n->entries; *p; p = &(*p)->next)
		if (strcmp((*p)->id, id) == 0) {
			struct net_entry *e = *p;
			*p = e->next;
			entry_free(e);
			return;
		}
}

static int policy_copy(const struct net_policy *p, struct net_policy **ret)
{
	json_t *j = net_policy_to_json(p);
	int r = j ? net_policy_from_json(j, ret, NULL) : -ENOMEM;

	json_decref(j);
	return r;
}

/* Records w for the resolver and the denial log, replacing what was there for its id. */
static int entry_set(struct net *n, const struct net_workspace *w)
{
	struct net_entry *e = calloc(1, sizeof *e);
	int r = 0;

	if (!e || !(e->id = strdup(w->id)))
		r = -ENOMEM;
	if (r >= 0 && w->mode == NET_RESTRICTED)
		r = w->policy ? policy_copy(w->policy, &e->policy) : -EINVAL;
	if (r < 0) {
		entry_free(e);
		return r;
	}
	e->address = w->address;
	e->mode = w->mode;
	struct net_entry *old = entry_by_id(n, w->id);
	if (old) {
		e->dns_allowed = old->dns_allowed;
		e->dns_refused = old->dns_refused;
		e->dns_shed = old->dns_shed;
		/* Its domain sets were emptied (applied again) or are as they were (adopted at
		 * start, with nothing known of them): either way nothing is known pinned. */
		e->pins.expired = old->pins.expired;
		e->pins.untracked = old->pins.untracked;
		entry_remove(n, w->id);
	}
	e->next = n->entries;
	n->entries = e;
	return 0;
}

/* --- the resolver's questions --- */

static enum resolver_verdict on_dns_decide(void *userdata, uint32_t src,
					   const struct dns_question *q, void **ret_cookie)
{
	struct net *n = userdata;
	struct net_entry *e = entry_by_address(n, src);

	*ret_cookie = NULL;
	if (!e)
		return RESOLVER_UNKNOWN;
	if (e->mode == NET_RESTRICTED && net_policy_match_domain(e->policy, q->name) == 0) {
		e->dns_refused++;
		uint64_t now = now_usec();
		if (now - e->log_window_usec >= 1000000) {
			e->log_window_usec = now;
			e->logged = 0;
		}
		if (n->on_denied && e->logged++ < NET_LOG_PER_SEC)
			n->on_denied(n->userdata, e->id, "dns", q->name, 53, "udp");
		return RESOLVER_REFUSE;
	}
	e->dns_allowed++;
	return RESOLVER_FORWARD;
}

/* The answer to an allowed name: its addresses become reachable for max(TTL, pin_min) from
 * now, under every domain rule the name matched (the rule's ports and protocol still apply),
 * and their deadlines are kept to count what expires. The clock is read before the kernel's
 * elements are added, so a deadline here never comes after the kernel's. */
static void on_dns_answered(void *userdata, uint32_t src, void *cookie, const struct dns_answer *a)
{
	struct net *n = userdata;
	struct net_entry *e = entry_by_address(n, src);
	uint64_t now = now_usec();
	bool pinned = false;

	if (!e || e->mode != NET_RESTRICTED || a->n_addrs == 0 || !n->nft)
		return;
	uint64_t mask = net_policy_match_domain(e->policy, a->q.name);
	for (size_t i = 0; i < e->policy->n_rules && i < 64; i++)
		if ((mask & (UINT64_C(1) << i)) &&
		    nft_workspace_pin(n->nft, e->id, i, a->addrs, a->ttls, a->n_addrs,
				      n->pin_min) >= 0)
			pinned = true;
	for (size_t i = 0; pinned && i < a->n_addrs; i++)
		pins_refresh(&e->pins, a->addrs[i],
			     now + nft_pin_timeout(a->ttls[i], n->pin_min) * UINT64_C(1000000),
			     now);
}

static void on_dns_shed(void *userdata, uint32_t src, void *cookie)
{
	struct net_entry *e = entry_by_address(userdata, src);

	(void)cookie;
	if (e)
		e->dns_shed++;
}

static const struct resolver_ops resolver_ops = {
	.decide = on_dns_decide,
	.answered = on_dns_answered,
	.shed = on_dns_shed,
};

/* --- the denial log --- */

static void on_nflog_packet(void *userdata, const struct nflog_packet *p)
{
	struct net *n = userdata;
	char id[128], dest[INET_ADDRSTRLEN];
	size_t len = strcspn(p->prefix, " ");

	if (!n->on_denied || len == 0 || len >= sizeof id)
		return;
	memcpy(id, p->prefix, len);
	id[len] = 0;
	addr_string(p->daddr, dest);
	n->on_denied(n->userdata, id, "connection", dest, p->dport,
		     p->proto == 6  ? "tcp" :
		     p->proto == 17 ? "udp" :
		     p->proto == 1  ? "icmp" :
				      "ip");
}

static int on_nflog_io(struct event_source *s, int fd, uint32_t revents, void *userdata)
{
	struct net *n = userdata;

	nflog_read(n->nflog, on_nflog_packet, n);
	return 0;
}

/* --- the worker's side --- */

/* One controller per bridge: a second one would reconcile away the first one's workspaces. */
static int lock_bridge(struct net *n)
{
	char path[PATH_MAX];

	snprintf(path, sizeof path, "/run/station-sandbox-net-%s.lock", n->bridge);
	_cleanup_close_ int fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return negative_errno();
	if (flock(fd, LOCK_EX | LOCK_NB) < 0)
		return negative_errno();
	n->lock_fd = TAKE_FD(fd);
	return 0;
}

static int upstreams_from_config(const struct net_config *cfg, struct sockaddr_in *ret,
				 size_t *ret_n, struct net_check *c)
{
	size_t n = 0;

	if (!cfg->dns_upstreams)
		return resolver_upstreams_from_resolv_conf("/etc/resolv.conf", ret,
							   RESOLVER_MAX_UPSTREAMS, ret_n);
	for (size_t i = 0; cfg->dns_upstreams[i]; i++) {
		if (n == RESOLVER_MAX_UPSTREAMS)
			break;
		if (resolver_parse_upstream(cfg->dns_upstreams[i], &ret[n]) < 0) {
			check_set(c, false, "bad DNS upstream \"%s\" (a.b.c.d or a.b.c.d:port)",
				  cfg->dns_upstreams[i]);
			return -EINVAL;
		}
		n++;
	}
	*ret_n = n;
	return 0;
}

/* The base table (whole: ensure) or its blocked set alone, from the kernel's view now. */
static int base_apply(struct net *n, bool ensure, struct station_error *e)
{
	struct net_host host = {};
	struct nft_base b = {
		.bridge = n->bridge,
		.gateway = n->gateway,
		.range = n->range,
		.prefix = n->prefix,
		.log_group = n->log_group,
		.allow = n->allow,
		.host = &host,
	};
	int r = link_host_read(&host);

	if (r < 0)
		return station_error_set(e, r, NULL,
					 "cannot read the worker's addresses and routes: %s",
					 strerror(-r));
	r = ensure ? nft_base_ensure(n->nft, &b, e) : nft_blocked_update(n->nft, &b, e);
	if (r < 0) {
		net_host_done(&host);
		return r;
	}
	net_host_done(&n->host);
	n->host = host;
	return r;
}

const char *net_address_class(struct net *n, uint32_t address)
{
	int c = net_blocked_class(n->allow, (struct net_cidr){ n->range, n->prefix }, &n->host,
				  address);

	return c >= 0 ? net_class_to_string(c) : NULL;
}

static int on_host_settled(struct event_source *s, uint64_t now, void *userdata)
{
	struct net *n = userdata;
	struct station_error e = { 0 };
	int r;

	n->host_pending = false;
	r = base_apply(n, false, &e);
	/* On failure the set keeps what it blocked before the change, until the next one. */
	if (r < 0)
		check_set(&n->checks[NET_CHECK_NFT], true,
			  "table inet %s (the last change of the worker's addresses or routes is "
			  "not applied: %s)",
			  n->bridge, e.message);
	else
		check_set(&n->checks[NET_CHECK_NFT], true, "table inet %s", n->bridge);
	return 0;
}

static int on_host_changed(struct event_source *s, int fd, uint32_t revents, void *userdata)
{
	struct net *n = userdata;

	link_monitor_drain(fd);
	if (!n->host_pending) {
		n->host_pending = true;
		event_source_set_time(n->host_timer, now_usec() + NET_HOST_SETTLE_USEC);
	}
	return 0;
}

/* Follows the worker's addresses and routes. Subscribed after the first read: a change between
 * the two is caught by reading once more at once. */
static void host_watch(struct net *n)
{
	int r;

	n->host_fd = link_monitor_open();
	if (n->host_fd < 0)
		return;
	r = event_add_timer(n->loop, &n->host_timer, now_usec(), on_host_settled, n);
	if (r >= 0)
		r = event_add_io(n->loop, &n->host_source, n->host_fd, EPOLLIN, on_host_changed, n);
	if (r >= 0)
		n->host_pending = true;
}

static void net_setup(struct net *n, const struct net_config *cfg)
{
	struct station_error e = { 0 };
	char range[64];
	int r;

	if (parse_range(cfg->range, &n->range, &n->prefix) < 0) {
		check_set(
			&n->checks[NET_CHECK_RANGE], false,
			"bad network range \"%s\": an IPv4 network a.b.c.d/p with p from %d to %d "
			"and no host bits set",
			cfg->range ? cfg->range : "", NET_MIN_PREFIX, NET_MAX_PREFIX);
		return;
	}
	n->gateway = n->range + 1;
	addr_string(n->gateway, n->nameserver);
	addr_string(n->range, range);
	check_set(&n->checks[NET_CHECK_RANGE], true, "%s/%u, gateway %s", range, n->prefix,
		  n->nameserver);

	r = lock_bridge(n);
	if (r < 0) {
		check_set(&n->checks[NET_CHECK_BRIDGE], false,
			  r == -EWOULDBLOCK ? "bridge \"%s\" is used by another controller on this "
					      "machine (choose another with --network-bridge)" :
					      "bridge \"%s\": cannot take its lock: %s",
			  n->bridge, strerror(-r));
		return;
	}
	r = link_bridge_ensure(n->bridge, n->gateway, n->prefix);
	if (r < 0) {
		check_set(&n->checks[NET_CHECK_BRIDGE], false, "cannot set up bridge \"%s\": %s%s",
			  n->bridge, strerror(-r), r == -EPERM ? " (CAP_NET_ADMIN is needed)" : "");
		return;
	}
	check_set(&n->checks[NET_CHECK_BRIDGE], true, "bridge \"%s\" at %s/%u", n->bridge,
		  n->nameserver, n->prefix);

	r = sysctl_ip_forward_enable();
	check_set(&n->checks[NET_CHECK_FORWARD], r >= 0,
		  r >= 0 ? "net.ipv4.ip_forward = 1" : "cannot set net.ipv4.ip_forward: %s",
		  strerror(-r));

	r = nft_open(n->bridge, &n->nft, &e);
	if (r >= 0)
		nft_set_proxy(n->nft, cfg->proxy_address, cfg->proxy_port, cfg->proxy_restricted);
	if (r >= 0)
		r = base_apply(n, true, &e);
	check_set(&n->checks[NET_CHECK_NFT], r >= 0, r >= 0 ? "table inet %s" : "nftables: %s",
		  r >= 0 ? n->bridge : e.message);
	if (r >= 0)
		host_watch(n);

	struct sockaddr_in ups[RESOLVER_MAX_UPSTREAMS];
	size_t n_ups = 0;
	r = upstreams_from_config(cfg, ups, &n_ups, &n->checks[NET_CHECK_RESOLVER]);
	if (r == -EINVAL)
		return;
	if (r < 0 || n_ups == 0) {
		check_set(
			&n->checks[NET_CHECK_RESOLVER], false,
			"no DNS upstream: /etc/resolv.conf names no IPv4 nameserver (name one with "
			"--dns-upstream)");
		return;
	}
	e = (struct station_error){ 0 };
	r = resolver_new(n->loop, n->gateway, n->dns_port, ups, n_ups, &resolver_ops, n,
			 &n->resolver, &e);
	check_set(&n->checks[NET_CHECK_RESOLVER], r >= 0, r >= 0 ? "%s:%u" : "resolver: %s",
		  r >= 0 ? n->nameserver : e.message, n->dns_port);

	r = nflog_open(n->log_group, &n->nflog);
	if (r >= 0)
		r = event_add_io(n->loop, &n->nflog_source, nflog_fd(n->nflog), EPOLLIN,
				 on_nflog_io, n);
	check_set(&n->checks[NET_CHECK_LOG], r >= 0,
		  r >= 0 ? "nflog group %u" : "denials are not logged: nflog group %u: %s",
		  n->log_group, strerror(-r));
}

int net_new(struct event_loop *loop, const struct net_config *cfg, net_denied_fn on_denied,
	    void *userdata, struct net **ret)
{
	struct net *n = calloc(1, sizeof *n);

	if (!n)
		return -ENOMEM;
	n->loop = loop;
	n->lock_fd = -1;
	n->root = strdup(cfg->root);
	n->bridge = strdup(cfg->bridge ? cfg->bridge : "station0");
	if (!n->root || !n->bridge) {
		net_free(n);
		return -ENOMEM;
	}
	n->dns_port = cfg->dns_port ? cfg->dns_port : 53;
	n->log_group = cfg->log_group;
	/* nft timeouts are whole seconds: a window is never shorter than asked */
	n->pin_min = (uint32_t)((cfg->egress_pin_min_ms + 999) / 1000);
	n->allow = cfg->allow;
	n->host_fd = -1;
	n->on_denied = on_denied;
	n->userdata = userdata;
	check_set(&n->checks[NET_CHECK_BRIDGE], false, "not set up");
	check_set(&n->checks[NET_CHECK_FORWARD], false, "not set up");
	check_set(&n->checks[NET_CHECK_NFT], false, "not set up");
	check_set(&n->checks[NET_CHECK_RESOLVER], false, "not set up");
	check_set(&n->checks[NET_CHECK_LOG], false, "not set up");
	if (strlen(n->bridge) == 0 || strlen(n->bridge) > 15 ||
	    strspn(n->bridge, "abcdefghijklmnopqrstuvwxyz0123456789_") != strlen(n->bridge))
		check_set(&n->checks[NET_CHECK_RANGE], false,
			  "bad bridge name \"%s\": 1 to 15 of a-z, 0-9 and _", n->bridge);
	else
		net_setup(n, cfg);
	*ret = n;
	return 0;
}

void net_free(struct net *n)
{
	if (!n)
		return;
	while (n->entries) {
		struct net_entry *e = n->entries;
		n->entries = e->next;
		entry_free(e);
	}
	event_source_free(n->nflog_source);
	nflog_close(n->nflog);
	event_source_free(n->host_source);
	event_source_free(n->host_timer);
	net_host_done(&n->host);
	if (n->host_fd >= 0)
		close(n->host_fd);
	resolver_free(n->resolver);
	nft_close(n->nft);
	if (n->lock_fd >= 0)
		close(n->lock_fd);
	free(n->root);
	free(n->bridge);
	free(n);
}

bool net_ready(struct net *n, json_t *checks_json)
{
	bool all = true;

	for (size_t i = 0; i < _NET_CHECK_MAX; i++) {
		const struct net_check *c = &n->checks[i];
		bool ok = c->ok || !check_info[i].required;
		json_array_append_new(checks_json,
				      json_pack("{s:s,s:b,s:s}", "name", check_info[i].name, "ok",
						ok, "message", c->message));
		all &= ok;
	}
	return all;
}

int net_check(struct net *n, enum net_mode mode, struct station_error *e)
{
	if (mode == NET_NONE)
		return 0;
	for (size_t i = 0; i < _NET_CHECK_MAX; i++) {
		const struct net_check *c = &n->checks[i];
		if (check_info[i].required && !c->ok)
			return station_error_set(e, -EHOSTDOWN, "network",
						 "network \"%s\" is not available on this worker: "
						 "%s: %s",
						 net_mode_to_string(mode), check_info[i].name,
						 c->message);
	}
	return 0;
}

int net_address_alloc(struct net *n, const uint32_t *used, size_t n_used, uint32_t *ret,
		      struct station_error *e)
{
	size_t size = (size_t)1 << (32 - n->prefix);
	_cleanup_free_ uint8_t *taken = calloc(size / 8 + 1, 1);

	if (!taken)
		return station_error_set(e, -ENOMEM, NULL, "out of memory");
	for (size_t i = 0; i < n_used; i++) {
		uint32_t off = used[i] - n->range;
		if (used[i] >= n->range && off < size)
			taken[off / 8] |= (uint8_t)(1u << (off % 8));
	}
	/* 0 the network, 1 the gateway, size - 1 the broadcast address */
	for (size_t off = 2; off + 1 < size; off++)
		if (!(taken[off / 8] & (1u << (off % 8)))) {
			*ret = n->range + (uint32_t)off;
			return 0;
		}
	return station_error_set(e, -EAGAIN, "network",
				 "the worker's network range has no address left (%zu in use)",
				 n_used);
}

const char *net_nameserver(const struct net *n)
{
	return n->nameserver;
}

static void host_link_name(uint32_t address, char buf[16])
{
	snprintf(buf, 16, "sv%08x", address);
}

static void objects_remove(struct net *n, const char *id, uint32_t address)
{
	char link[16];

	if (n->nft)
		nft_workspace_remove(n->nft, id, address);
	host_link_name(address, link);
	link_delete(link);
}

/* The network namespace of pid, refused when it is ours: links made there would be the
 * worker's. */
static int open_pid_netns(pid_t pid)
{
	struct stat own, st;
	_cleanup_close_ int fd = netns_open_pid(pid);
	if (fd < 0)
		return fd;
	if (stat("/proc/self/ns/net", &own) < 0 || fstat(fd, &st) < 0)
		return negative_errno();
	if (own.st_dev == st.st_dev && own.st_ino == st.st_ino)
		return -EEXIST;
	return TAKE_FD(fd);
}

int net_workspace_make(struct net *n, const struct net_workspace *w, pid_t pid,
		       struct station_error *e)
{
	char link[16];
	const char *step;
	int r = net_check(n, w->mode, e);

	if (r < 0)
		return r;
	objects_remove(n, w->id, w->address);
	host_link_name(w->address, link);
	step = "network namespace (the container's)";
	_cleanup_close_ int fd = open_pid_netns(pid);
	r = fd < 0 ? fd : 0;
	if (r >= 0) {
		step = "veth pair";
		r = link_veth_add(link, n->bridge,
				  !(n->allow & NET_CLASS_BIT(NET_CLASS_WORKSPACES)), fd,
				  NET_PEER_NAME);
	}
	if (r >= 0) {
		step = "address and route";
		r = link_netns_configure(fd, NET_PEER_NAME, w->address, n->prefix, n->gateway);
	}
	if (r < 0) {
		station_error_set(e, r, NULL, "cannot set up the workspace's %s: %s", step,
				  strerror(-r));
	} else {
		r = nft_workspace_apply(n->nft, w->id, w->address,
					w->mode == NET_RESTRICTED ? w->policy : NULL, e);
	}
	if (r < 0) { /* e says why: every failure above set it */
		objects_remove(n, w->id, w->address);
		return r;
	}
	return 0;
}

int net_workspace_up(struct net *n, const struct net_workspace *w, pid_t pid,
		     struct station_error *e)
{
	int r = net_workspace_make(n, w, pid, e);

	if (r >= 0 && entry_set(n, w) < 0) {
		objects_remove(n, w->id, w->address);
		r = station_error_set(e, -ENOMEM, NULL, "out of memory");
	}
	if (r < 0)
		entry_remove(n, w->id);
	return r;
}

void net_workspace_unmake(struct net *n, const char *id, uint32_t address)
{
	objects_remove(n, id, address);
}

void net_workspace_forget(struct net *n, const char *id)
{
	entry_remove(n, id);
}

void net_workspace_down(struct net *n, const char *id, uint32_t address)
{
	objects_remove(n, id, address);
	entry_remove(n, id);
}

int net_workspace_adopt(struct net *n, const struct net_workspace *w)
{
	return entry_set(n, w);
}

void net_reconcile(struct net *n)
{
	_cleanup_strv_free_ char **ports = NULL, **ids = NULL;

	/* ports of our bridge named like ours and held by no workspace */
	if (n->checks[NET_CHECK_BRIDGE].ok && link_bridge_ports(n->bridge, &ports) >= 0)
		for (size_t i = 0; ports[i]; i++) {
			unsigned a;
			char rest;
			if (sscanf(ports[i], "sv%8x%c", &a, &rest) == 1 && !entry_by_address(n, a))
				link_delete(ports[i]);
		}
	/* firewall chains of workspaces gone */
	if (n->nft && n->checks[NET_CHECK_NFT].ok && nft_workspace_list(n->nft, &ids) >= 0)
		for (size_t i = 0; ids[i]; i++)
			if (!entry_by_id(n, ids[i]))
				nft_workspace_remove(n->nft, ids[i], 0);
}

int net_policy_replace(struct net *n, const char *id, uint32_t address,
		       const struct net_policy *policy, struct station_error *e)
{
	struct net_entry *old = entry_by_id(n, id);
	int r;

	if (!n->nft)
		return net_check(n, NET_RESTRICTED, e);
	r = nft_workspace_apply(n->nft, id, address, policy, e);
	if (r < 0)
		return r;
	struct net_workspace w = { .id = id,
				   .mode = NET_RESTRICTED,
				   .address = address,
				   .policy = policy };
	if (!old || entry_set(n, &w) < 0)
		return station_error_set(e, -ENOMEM, NULL, "out of memory");
	return 0;
}

void net_denials_drain(struct net *n)
{
	if (n->nflog)
		nflog_read(n->nflog, on_nflog_packet, n);
}

int net_workspace_counters(struct net *n, const char *id, struct net_counters *ret)
{
	struct net_entry *e = entry_by_id(n, id);
	struct net_counters c = { 0 };
	int r = 0;

	if (n->nft)
		r = nft_workspace_counters(n->nft, id, &c.allowed, &c.denied);
	if (e) {
		c.dns_allowed = e->dns_allowed;
		c.dns_refused = e->dns_refused;
		c.dns_shed = e->dns_shed;
		pins_sweep(&e->pins, now_usec());
		c.pinned = pins_count(&e->pins);
		c.pins_expired = e->pins.expired;
	}
	*ret = c;
	return r;
}

int net_counters_each(struct net *n, net_counter_fn fn, void *userdata)
{
	return n && n->nft ? nft_counters_each(n->nft, fn, userdata) : 0;
}

void net_address_string(uint32_t address, char buf[16])
{
	addr_string(address, buf);
}
