/* SPDX-License-Identifier: MIT */
/* The blocked classes (blocked.h) as one list of disjoint address intervals. */

#include "blocked.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "basic/cleanup.h"
#include "basic/util.h"

static const char *const class_names[_NET_CLASS_MAX] = {
	[NET_CLASS_WORKER] = "worker",
	[NET_CLASS_GATEWAYS] = "gateways",
	[NET_CLASS_CONNECTED] = "connected",
	[NET_CLASS_WORKSPACES] = "workspaces",
	[NET_CLASS_PRIVATE] = "private",
	[NET_CLASS_LINK_LOCAL] = "link-local",
	[NET_CLASS_SHARED] = "shared",
	[NET_CLASS_DOCUMENTATION] = "documentation",
	[NET_CLASS_BENCHMARKING] = "benchmarking",
	[NET_CLASS_6TO4_RELAY] = "6to4-relay",
	[NET_CLASS_RESERVED] = "reserved",
	[NET_CLASS_THIS_NETWORK] = "this-network",
	[NET_CLASS_LOOPBACK] = "loopback",
	[NET_CLASS_MULTICAST] = "multicast",
	[NET_CLASS_IETF_PROTOCOL] = "ietf-protocol",
};

/* The fixed ranges, by class (RFC 6890 registry, as of 2024). */
static const struct {
	enum net_class class;
	struct net_interval range;
} fixed[] = {
	{ NET_CLASS_PRIVATE, { 0x0a000000, 0x0affffff } },	 /* 10/8 */
	{ NET_CLASS_PRIVATE, { 0xac100000, 0xac1fffff } },	 /* 172.16/12 */
	{ NET_CLASS_PRIVATE, { 0xc0a80000, 0xc0a8ffff } },	 /* 192.168/16 */
	{ NET_CLASS_LINK_LOCAL, { 0xa9fe0000, 0xa9feffff } },	 /* 169.254/16 */
	{ NET_CLASS_SHARED, { 0x64400000, 0x647fffff } },	 /* 100.64/10 */
	{ NET_CLASS_DOCUMENTATION, { 0xc0000200, 0xc00002ff } }, /* 192.0.2/24 */
	{ NET_CLASS_DOCUMENTATION, { 0xc6336400, 0xc63364ff } }, /* 198.51.100/24 */
	{ NET_CLASS_DOCUMENTATION, { 0xcb007100, 0xcb0071ff } }, /* 203.0.113/24 */
	{ NET_CLASS_BENCHMARKING, { 0xc6120000, 0xc613ffff } },	 /* 198.18/15 */
	{ NET_CLASS_6TO4_RELAY, { 0xc0586300, 0xc05863ff } },	 /* 192.88.99/24 */
	{ NET_CLASS_RESERVED, { 0xf0000000, 0xffffffff } },	 /* 240/4, 255.255.255.255 */
	{ NET_CLASS_THIS_NETWORK, { 0x00000000, 0x00ffffff } },	 /* 0/8 */
	{ NET_CLASS_LOOPBACK, { 0x7f000000, 0x7fffffff } },	 /* 127/8 */
	{ NET_CLASS_MULTICAST, { 0xe0000000, 0xefffffff } },	 /* 224/4 */
	/* 192.0.0/24 but 192.0.0.9 and 192.0.0.10 (PCP and TURN anycast: globally reachable) */
	{ NET_CLASS_IETF_PROTOCOL, { 0xc0000000, 0xc0000008 } },
	{ NET_CLASS_IETF_PROTOCOL, { 0xc000000b, 0xc00000ff } },
};

const char *net_class_to_string(enum net_class c)
{
	return c >= 0 && c < _NET_CLASS_MAX ? class_names[c] : NULL;
}

int net_class_from_string(const char *s)
{
	for (int i = 0; s && i < _NET_CLASS_MAX; i++)
		if (strcmp(s, class_names[i]) == 0)
			return i;
	return -EINVAL;
}

const char *net_class_names(void)
{
	return "worker, gateways, connected, workspaces, private, link-local, shared, "
	       "documentation, benchmarking, 6to4-relay, reserved, this-network, loopback, "
	       "multicast, ietf-protocol";
}

void net_host_done(struct net_host *h)
{
	free(h->worker);
	free(h->connected);
	free(h->gateways);
	*h = (struct net_host){};
}

/* A growing list of intervals; normalised: sorted, disjoint, non-adjacent. */
struct ivs {
	struct net_interval *v;
	size_t n, cap;
};

static int ivs_push(struct ivs *s, uint32_t lo, uint32_t hi)
{
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 32;
		struct net_interval *v = reallocarray(s->v, cap, sizeof(*v));
		if (!v)
			return -ENOMEM;
		s->v = v;
		s->cap = cap;
	}
	s->v[s->n++] = (struct net_interval){ lo, hi };
	return 0;
}

static struct net_interval cidr_interval(struct net_cidr c)
{
	uint32_t mask = c.prefix == 0 ? 0 : ~UINT32_C(0) << (32 - MIN(c.prefix, 32u));

	return (struct net_interval){ c.addr & mask, (c.addr & mask) | ~mask };
}

static int interval_cmp(const void *a, const void *b)
{
	const struct net_interval *x = a, *y = b;

	return x->lo < y->lo ? -1 : x->lo > y->lo;
}

static void ivs_normalise(struct ivs *s)
{
	size_t k = 0;

	if (s->n < 2)
		return;
	qsort(s->v, s->n, sizeof(*s->v), interval_cmp);
	for (size_t i = 1; i < s->n; i++) {
		struct net_interval *last = &s->v[k];

		if (last->hi == UINT32_MAX || s->v[i].lo <= last->hi + 1)
			last->hi = MAX(last->hi, s->v[i].hi);
		else
			s->v[++k] = s->v[i];
	}
	s->n = k + 1;
}

/* s minus the normalised cut, into s (normalised). */
static int ivs_subtract(struct ivs *s, const struct ivs *cut)
{
	struct ivs out = {};
	size_t j = 0;

	for (size_t i = 0; i < s->n; i++) {
		uint32_t lo = s->v[i].lo, hi = s->v[i].hi;
		bool gone = false;

		while (j < cut->n && cut->v[j].hi < lo)
			j++;
		for (size_t k = j; k < cut->n && cut->v[k].lo <= hi && !gone; k++) {
			if (cut->v[k].lo > lo && ivs_push(&out, lo, cut->v[k].lo - 1) < 0)
				goto oom;
			if (cut->v[k].hi >= hi)
				gone = true;
			else
				lo = cut->v[k].hi + 1;
		}
		if (!gone && ivs_push(&out, lo, hi) < 0)
			goto oom;
	}
	free(s->v);
	*s = out;
	return 0;
oom:
	free(out.v);
	return -ENOMEM;
}

static int ivs_add_cidrs(struct ivs *s, const struct net_cidr *c, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		struct net_interval v = cidr_interval(c[i]);
		if (ivs_push(s, v.lo, v.hi) < 0)
			return -ENOMEM;
	}
	return 0;
}

/* The connected networks but the workspaces' own (the bridge's route) and a default route
 * through a device (a point-to-point link: it would close everything). */
static int connected_ranges(const struct net_host *host, struct net_cidr ws, struct ivs *ret)
{
	struct net_interval w = cidr_interval(ws);

	for (size_t i = 0; host && i < host->n_connected; i++) {
		struct net_interval v = cidr_interval(host->connected[i]);

		if (host->connected[i].prefix == 0 || (v.lo >= w.lo && v.hi <= w.hi))
			continue;
		if (ivs_push(ret, v.lo, v.hi) < 0)
			return -ENOMEM;
	}
	return 0;
}

static int class_ranges(enum net_class c, struct net_cidr ws, const struct net_host *host,
			struct ivs *ret)
{
	switch (c) {
	case NET_CLASS_WORKER:
		return host ? ivs_add_cidrs(ret, host->worker, host->n_worker) : 0;
	case NET_CLASS_GATEWAYS:
		return host ? ivs_add_cidrs(ret, host->gateways, host->n_gateways) : 0;
	case NET_CLASS_CONNECTED:
		return connected_ranges(host, ws, ret);
	case NET_CLASS_WORKSPACES:
		return ivs_add_cidrs(ret, &ws, 1);
	default:
		for (size_t i = 0; i < ELEMENTSOF(fixed); i++)
			if (fixed[i].class == c &&
			    ivs_push(ret, fixed[i].range.lo, fixed[i].range.hi) < 0)
				return -ENOMEM;
		return 0;
	}
}

/* One specific class over what is blocked so far: cut out when open, added when closed. */
static int apply_class(struct ivs *blocked, enum net_class c, bool open, struct net_cidr ws,
		       const struct net_host *host)
{
	struct ivs these = {};
	int r = class_ranges(c, ws, host, &these);

	if (r >= 0) {
		ivs_normalise(&these);
		if (open) {
			r = ivs_subtract(blocked, &these);
		} else {
			for (size_t i = 0; i < these.n && r >= 0; i++)
				r = ivs_push(blocked, these.v[i].lo, these.v[i].hi);
			ivs_normalise(blocked);
		}
	}
	free(these.v);
	return r;
}

int net_blocked_compute(uint32_t allow, struct net_cidr workspaces, const struct net_host *host,
			struct net_interval **ret, size_t *ret_n)
{
	static const enum net_class specific[] = { NET_CLASS_CONNECTED, NET_CLASS_WORKSPACES,
						   NET_CLASS_GATEWAYS, NET_CLASS_WORKER };
	struct ivs blocked = {};
	int r = 0;

	for (int c = NET_CLASS_PRIVATE; c < _NET_CLASS_MAX && r >= 0; c++)
		if (!(allow & NET_CLASS_BIT(c)))
			r = class_ranges(c, workspaces, host, &blocked);
	ivs_normalise(&blocked);
	for (size_t i = 0; i < ELEMENTSOF(specific) && r >= 0; i++)
		r = apply_class(&blocked, specific[i], allow & NET_CLASS_BIT(specific[i]),
				workspaces, host);
	if (r < 0) {
		free(blocked.v);
		return r;
	}
	if (blocked.n == 0) {
		free(blocked.v);
		blocked.v = NULL;
	}
	*ret = blocked.v;
	*ret_n = blocked.n;
	return 0;
}

/* Whether class c holds addr. */
static int class_holds(enum net_class c, struct net_cidr ws, const struct net_host *host,
		       uint32_t addr)
{
	struct ivs these = {};
	int r = class_ranges(c, ws, host, &these);

	for (size_t i = 0; r >= 0 && i < these.n; i++)
		if (addr >= these.v[i].lo && addr <= these.v[i].hi)
			r = 1;
	free(these.v);
	return r;
}

int net_blocked_class(uint32_t allow, struct net_cidr workspaces, const struct net_host *host,
		      uint32_t addr)
{
	/* net_blocked_compute()'s order backwards: the most specific class holding addr. */
	static const enum net_class specific[] = { NET_CLASS_WORKER, NET_CLASS_GATEWAYS,
						   NET_CLASS_WORKSPACES, NET_CLASS_CONNECTED };

	for (size_t i = 0; i < ELEMENTSOF(specific); i++) {
		int r = class_holds(specific[i], workspaces, host, addr);

		if (r < 0)
			return r;
		if (r > 0)
			return allow & NET_CLASS_BIT(specific[i]) ? -ENOENT : (int)specific[i];
	}
	for (size_t i = 0; i < ELEMENTSOF(fixed); i++)
		if (addr >= fixed[i].range.lo && addr <= fixed[i].range.hi)
			return allow & NET_CLASS_BIT(fixed[i].class) ? -ENOENT :
								       (int)fixed[i].class;
	return -ENOENT;
}
