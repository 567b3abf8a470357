/* SPDX-License-Identifier: MIT */
#pragma once

/* A restricted workspace's egress policy (docs/api.md, "Network"): default deny, and a list of
 * what is allowed:
 *
 *   {"allow": [{"cidr": "203.0.113.0/24", "ports": [443], "proto": "tcp"},
 *              {"domain": "github.com"}, {"domain": "*.npmjs.org", "ports": [443]}]}
 *
 * A cidr rule allows IPv4 destinations in that range (IPv6 is refused: this worker gives
 * workspaces no IPv6). A domain rule allows the names it matches to be resolved through the
 * workspace's resolver, and then the addresses those answers carried, for their TTL (DNS
 * pinning, net.h). "github.com" matches that name only; "*.npmjs.org" matches every name below
 * npmjs.org and not npmjs.org itself. Names compare without case and without a final dot.
 * "ports" (1..65535, at most NET_RULE_MAX_PORTS; absent: every port) and "proto" ("tcp",
 * "udp" or absent: both for a cidr rule, tcp for a domain rule) narrow a rule. */

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "basic/error.h"

#define NET_POLICY_MAX_RULES 64
#define NET_RULE_MAX_PORTS 32
#define NET_DOMAIN_MAX 253

enum net_rule_kind {
	NET_RULE_CIDR,
	NET_RULE_DOMAIN,
};

enum net_proto {
	NET_PROTO_ANY, /* cidr: tcp and udp; domain: tcp */
	NET_PROTO_TCP,
	NET_PROTO_UDP,
};

struct net_rule {
	enum net_rule_kind kind;
	uint32_t addr;	 /* cidr: network address, host byte order, host bits zero */
	unsigned prefix; /* cidr: 0..32 */
	char *domain;	 /* domain: lower case, no final dot, without the "*." of a wildcard */
	bool wildcard;	 /* domain: "*.<domain>": names below domain, not domain itself */
	enum net_proto proto;
	uint16_t ports[NET_RULE_MAX_PORTS];
	size_t n_ports; /* 0: every port */
};

struct net_policy {
	struct net_rule *rules;
	size_t n_rules;
};

/* Parses and validates an "egress" object ({"allow": [...]}); each problem is a -EINVAL whose
 * field is "egress" and whose message names the rule (by index) and what is wrong with it.
 * Unknown keys are refused. */
int net_policy_from_json(const json_t *egress, struct net_policy **ret, struct station_error *e);
/* The policy as the API shows it (the same shape it was given, normalised). */
json_t *net_policy_to_json(const struct net_policy *p);
void net_policy_free(struct net_policy *p);

/* Which domain rules name matches (a DNS name as asked, any case, final dot or not): bit i set
 * for rules[i]. 0: the name is not allowed. Rules past 64 cannot exist (NET_POLICY_MAX_RULES). */
uint64_t net_policy_match_domain(const struct net_policy *p, const char *name);
