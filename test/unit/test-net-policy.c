/* SPDX-License-Identifier: MIT */
/* The egress policy (net/policy.c): what it accepts, the exact refusals, the normalised form it
 * shows back, and which names a domain rule matches. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "basic/json-util.h"
#include "net/policy.h"

static json_t *parse_json(const char *text)
{
	json_error_t je;
	json_t *v = json_loads(text, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &je);

	cr_assert_not_null(v, "bad test JSON %s: %s", text, je.text);
	return v;
}

static struct net_policy *policy_ok(const char *text)
{
	_cleanup_json_ json_t *v = parse_json(text);
	struct station_error e = {};
	struct net_policy *p = NULL;

	cr_assert_eq(net_policy_from_json(v, &p, &e), 0, "%s: %s", text, e.message);
	cr_assert_not_null(p);
	return p;
}

/* Refused with -EINVAL on field "egress" and exactly this message. */
static void policy_bad(const char *text, const char *message)
{
	_cleanup_json_ json_t *v = parse_json(text);
	struct station_error e = {};
	struct net_policy *p = (struct net_policy *)"untouched";

	cr_assert_eq(net_policy_from_json(v, &p, &e), -EINVAL, "accepted: %s", text);
	cr_assert_eq(e.err, -EINVAL);
	cr_assert_str_eq(e.field, "egress");
	cr_assert_str_eq(e.message, message, "%s", text);
	cr_assert_str_eq((const char *)p, "untouched");
}

/* to_json(from_json(text)) is want, and parsing want again gives want (a fixed point). */
static void round_trip(const char *text, const char *want)
{
	struct net_policy *p = policy_ok(text);
	_cleanup_json_ json_t *shown = net_policy_to_json(p);
	_cleanup_free_ char *s = json_dumps(shown, JSON_COMPACT);

	cr_assert_str_eq(s, want);
	net_policy_free(p);

	p = policy_ok(s);
	_cleanup_json_ json_t *again = net_policy_to_json(p);
	_cleanup_free_ char *s2 = json_dumps(again, JSON_COMPACT);
	cr_assert_str_eq(s2, want);
	net_policy_free(p);
}

/* ---- accepted ----------------------------------------------------------------------------- */

Test(policy, the_header_example)
{
	struct net_policy *p =
		policy_ok("{\"allow\": [{\"cidr\": \"203.0.113.0/24\", \"ports\": [443], "
			  "\"proto\": \"tcp\"}, {\"domain\": \"github.com\"}, "
			  "{\"domain\": \"*.npmjs.org\", \"ports\": [443]}]}");

	cr_assert_eq(p->n_rules, 3);
	cr_assert_eq(p->rules[0].kind, NET_RULE_CIDR);
	cr_assert_eq(p->rules[0].addr, 0xcb007100u);
	cr_assert_eq(p->rules[0].prefix, 24);
	cr_assert_eq(p->rules[0].proto, NET_PROTO_TCP);
	cr_assert_eq(p->rules[0].n_ports, 1);
	cr_assert_eq(p->rules[0].ports[0], 443);
	cr_assert_null(p->rules[0].domain);

	cr_assert_eq(p->rules[1].kind, NET_RULE_DOMAIN);
	cr_assert_str_eq(p->rules[1].domain, "github.com");
	cr_assert_not(p->rules[1].wildcard);
	cr_assert_eq(p->rules[1].proto, NET_PROTO_ANY);
	cr_assert_eq(p->rules[1].n_ports, 0);

	cr_assert_str_eq(p->rules[2].domain, "npmjs.org");
	cr_assert(p->rules[2].wildcard);
	cr_assert_eq(p->rules[2].n_ports, 1);
	net_policy_free(p);
}

Test(policy, empty_policy_denies_everything)
{
	struct net_policy *p = policy_ok("{}");

	cr_assert_eq(p->n_rules, 0);
	cr_assert_eq(net_policy_match_domain(p, "github.com"), 0);
	net_policy_free(p);

	p = policy_ok("{\"allow\": []}");
	cr_assert_eq(p->n_rules, 0);
	net_policy_free(p);
}

Test(policy, cidr_forms)
{
	struct net_policy *p = policy_ok("{\"allow\": [{\"cidr\": \"198.51.100.7\"}, "
					 "{\"cidr\": \"0.0.0.0/0\"}, {\"cidr\": \"10.0.0.0/8\"}]}");

	cr_assert_eq(p->rules[0].addr, 0xc6336407u);
	cr_assert_eq(p->rules[0].prefix, 32);
	cr_assert_eq(p->rules[1].addr, 0);
	cr_assert_eq(p->rules[1].prefix, 0);
	cr_assert_eq(p->rules[2].addr, 0x0a000000u);
	cr_assert_eq(p->rules[2].prefix, 8);
	cr_assert_eq(p->rules[2].proto, NET_PROTO_ANY);
	net_policy_free(p);
}

Test(policy, domain_is_normalised)
{
	struct net_policy *p = policy_ok(
		"{\"allow\": [{\"domain\": \"GitHub.COM.\"}, {\"domain\": \"*.NpmJS.org\"}, "
		"{\"domain\": \"x-1.a0.example\"}, {\"domain\": \"localhost\"}]}");

	cr_assert_str_eq(p->rules[0].domain, "github.com");
	cr_assert_str_eq(p->rules[1].domain, "npmjs.org");
	cr_assert(p->rules[1].wildcard);
	cr_assert_str_eq(p->rules[2].domain, "x-1.a0.example");
	cr_assert_str_eq(p->rules[3].domain, "localhost");
	net_policy_free(p);
}

Test(policy, longest_names_and_most_rules)
{
	char label[64], name[300], text[16384];
	size_t n = 0;

	/* A 63-character label; a 253-character name (63+1+63+1+63+1+61). */
	memset(label, 'a', 63);
	label[63] = '\0';
	snprintf(name, sizeof name, "%s.%s.%s.%.61s", label, label, label, label);
	cr_assert_eq(strlen(name), 253);
	snprintf(text, sizeof text, "{\"allow\": [{\"domain\": \"%s\"}]}", name);
	net_policy_free(policy_ok(text));

	n += (size_t)snprintf(text, sizeof text, "{\"allow\": [");
	for (int i = 0; i < NET_POLICY_MAX_RULES; i++)
		n += (size_t)snprintf(text + n, sizeof text - n, "%s{\"cidr\": \"203.0.113.%d\"}",
				      i ? "," : "", i);
	snprintf(text + n, sizeof text - n, "]}");
	struct net_policy *p = policy_ok(text);
	cr_assert_eq(p->n_rules, NET_POLICY_MAX_RULES);
	net_policy_free(p);
}

Test(policy, ports_sorted_and_deduplicated)
{
	struct net_policy *p =
		policy_ok("{\"allow\": [{\"domain\": \"a.example\", \"ports\": [443, 80, 443, "
			  "1, 65535], \"proto\": \"udp\"}]}");

	cr_assert_eq(p->rules[0].n_ports, 4);
	cr_assert_eq(p->rules[0].ports[0], 1);
	cr_assert_eq(p->rules[0].ports[1], 80);
	cr_assert_eq(p->rules[0].ports[2], 443);
	cr_assert_eq(p->rules[0].ports[3], 65535);
	cr_assert_eq(p->rules[0].proto, NET_PROTO_UDP);
	net_policy_free(p);
}

/* ---- refused ------------------------------------------------------------------------------ */

Test(policy, refuses_bad_shapes)
{
	policy_bad("[]", "egress must be an object like {\"allow\": [...]}");
	policy_bad("{\"deny\": []}", "egress: unknown key \"deny\" (known: allow)");
	policy_bad("{\"allow\": {}}", "egress.allow must be an array of rules");
	policy_bad("{\"allow\": [\"github.com\"]}",
		   "egress.allow[0]: must be an object with \"cidr\" or \"domain\"");
	policy_bad("{\"allow\": [{}]}",
		   "egress.allow[0]: must have exactly one of \"cidr\" and \"domain\"");
	policy_bad("{\"allow\": [{\"domain\": \"a.example\"}, {\"domain\": \"b.example\", "
		   "\"cidr\": \"203.0.113.0/24\"}]}",
		   "egress.allow[1]: must have exactly one of \"cidr\" and \"domain\"");
	policy_bad("{\"allow\": [{\"domain\": \"a.example\", \"port\": 443}]}",
		   "egress.allow[0]: unknown key \"port\" (known: cidr, domain, ports, proto)");
	policy_bad("{\"allow\": [{\"domain\": 1}]}",
		   "egress.allow[0]: \"domain\" must be a string");
	policy_bad("{\"allow\": [{\"cidr\": null}]}", "egress.allow[0]: \"cidr\" must be a string");
	policy_bad("{\"allow\": [{\"domain\": \"a\\u0000.example\"}]}",
		   "egress.allow[0]: \"domain\" must not contain NUL");
}

Test(policy, refuses_too_many_rules)
{
	char text[16384];
	size_t n = (size_t)snprintf(text, sizeof text, "{\"allow\": [");

	for (int i = 0; i <= NET_POLICY_MAX_RULES; i++)
		n += (size_t)snprintf(text + n, sizeof text - n, "%s{\"domain\": \"h%d.example\"}",
				      i ? "," : "", i);
	snprintf(text + n, sizeof text - n, "]}");
	policy_bad(text, "egress.allow has 65 rules, at most 64 are allowed");
}

Test(policy, refuses_bad_ports_and_proto)
{
	const char *msg = "egress.allow[2]: \"ports\" must be integers from 1 to 65535";
	const char *prefix =
		"{\"allow\": [{\"domain\": \"a.example\"}, {\"cidr\": \"203.0.113.0/24\"}, "
		"{\"domain\": \"b.example\", ";
	const char *bad[] = {
		"[0]", "[65536]", "[-1]", "[443.0]", "[\"443\"]", "[null]", "[80, 0]"
	};
	char text[512];

	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		snprintf(text, sizeof text, "%s\"ports\": %s}]}", prefix, bad[i]);
		policy_bad(text, msg);
	}
	snprintf(text, sizeof text, "%s\"ports\": []}]}", prefix);
	policy_bad(text, "egress.allow[2]: \"ports\" must be a non-empty array (leave it out for "
			 "every port)");
	snprintf(text, sizeof text, "%s\"ports\": 443}]}", prefix);
	policy_bad(text, "egress.allow[2]: \"ports\" must be a non-empty array (leave it out for "
			 "every port)");
	snprintf(text, sizeof text,
		 "%s\"ports\": [1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,"
		 "25,26,27,28,29,30,31,32,33]}]}",
		 prefix);
	policy_bad(text, "egress.allow[2]: \"ports\" may list at most 32 ports");
	policy_bad("{\"allow\": [{\"domain\": \"a.example\", \"proto\": \"icmp\"}]}",
		   "egress.allow[0]: \"proto\" must be \"tcp\" or \"udp\"");
	policy_bad("{\"allow\": [{\"domain\": \"a.example\", \"proto\": \"TCP\"}]}",
		   "egress.allow[0]: \"proto\" must be \"tcp\" or \"udp\"");
}

Test(policy, refuses_bad_cidrs)
{
	const char *shape = "egress.allow[0]: \"cidr\" must be an IPv4 network like 203.0.113.0/24";
	const char *prefix = "egress.allow[0]: \"cidr\" prefix length must be from 0 to 32";

	policy_bad("{\"allow\": [{\"cidr\": \"203.0.113.5/24\"}]}",
		   "egress.allow[0]: \"cidr\" 203.0.113.5/24 has host bits set (the network is "
		   "203.0.113.0/24)");
	policy_bad("{\"allow\": [{\"cidr\": \"10.1.2.3/0\"}]}",
		   "egress.allow[0]: \"cidr\" 10.1.2.3/0 has host bits set (the network is "
		   "0.0.0.0/0)");
	policy_bad("{\"allow\": [{\"cidr\": \"2001:db8::/32\"}]}",
		   "egress.allow[0]: IPv6 egress is not available: workspaces have no IPv6");
	policy_bad("{\"allow\": [{\"cidr\": \"::ffff:203.0.113.1\"}]}",
		   "egress.allow[0]: IPv6 egress is not available: workspaces have no IPv6");
	policy_bad("{\"allow\": [{\"cidr\": \"203.0.113.0/33\"}]}", prefix);
	policy_bad("{\"allow\": [{\"cidr\": \"203.0.113.0/\"}]}", prefix);
	policy_bad("{\"allow\": [{\"cidr\": \"203.0.113.0/024\"}]}", prefix);
	policy_bad("{\"allow\": [{\"cidr\": \"203.0.113.0/+8\"}]}", prefix);
	policy_bad("{\"allow\": [{\"cidr\": \"203.0.113.0/ 8\"}]}", prefix);
	policy_bad("{\"allow\": [{\"cidr\": \"203.0.113/24\"}]}", shape);
	policy_bad("{\"allow\": [{\"cidr\": \"203.0.113.256/32\"}]}", shape);
	policy_bad("{\"allow\": [{\"cidr\": \"github.com\"}]}", shape);
	policy_bad("{\"allow\": [{\"cidr\": \"\"}]}", shape);
	policy_bad("{\"allow\": [{\"cidr\": \"203.000.113.0/24\"}]}", shape);
	policy_bad("{\"allow\": [{\"cidr\": \"203.0.113.0/24/24\"}]}", prefix);
	policy_bad("{\"allow\": [{\"cidr\": \"1234567890123456789/24\"}]}", shape);
}

Test(policy, refuses_bad_domains)
{
	char label[65], text[512], name[300];

	policy_bad("{\"allow\": [{\"domain\": \"\"}]}",
		   "egress.allow[0]: \"domain\" must not be empty");
	policy_bad("{\"allow\": [{\"domain\": \".\"}]}",
		   "egress.allow[0]: \"domain\" must not be empty");
	policy_bad("{\"allow\": [{\"domain\": \"a..example\"}]}",
		   "egress.allow[0]: \"domain\" has an empty label");
	policy_bad("{\"allow\": [{\"domain\": \".example\"}]}",
		   "egress.allow[0]: \"domain\" has an empty label");
	policy_bad("{\"allow\": [{\"domain\": \"a.example..\"}]}",
		   "egress.allow[0]: \"domain\" has an empty label");
	policy_bad("{\"allow\": [{\"domain\": \"-a.example\"}]}",
		   "egress.allow[0]: \"domain\" has a label that starts or ends with '-'");
	policy_bad("{\"allow\": [{\"domain\": \"a-.example\"}]}",
		   "egress.allow[0]: \"domain\" has a label that starts or ends with '-'");
	policy_bad("{\"allow\": [{\"domain\": \"a_b.example\"}]}",
		   "egress.allow[0]: \"domain\" may contain only letters, digits, '-' and '.'");
	policy_bad("{\"allow\": [{\"domain\": \"gith\\u00fcb.com\"}]}",
		   "egress.allow[0]: \"domain\" may contain only letters, digits, '-' and '.'");
	policy_bad("{\"allow\": [{\"domain\": \"a b.example\"}]}",
		   "egress.allow[0]: \"domain\" may contain only letters, digits, '-' and '.'");
	policy_bad("{\"allow\": [{\"domain\": \"*\"}]}",
		   "egress.allow[0]: \"domain\" may have \"*.\" only as its whole first label");
	policy_bad("{\"allow\": [{\"domain\": \"*npmjs.org\"}]}",
		   "egress.allow[0]: \"domain\" may have \"*.\" only as its whole first label");
	policy_bad("{\"allow\": [{\"domain\": \"a.*.npmjs.org\"}]}",
		   "egress.allow[0]: \"domain\" may have \"*.\" only as its whole first label");
	policy_bad("{\"allow\": [{\"domain\": \"*.*.npmjs.org\"}]}",
		   "egress.allow[0]: \"domain\" may have \"*.\" only as its whole first label");
	policy_bad("{\"allow\": [{\"domain\": \"*.\"}]}",
		   "egress.allow[0]: \"domain\" may have \"*.\" only as its whole first label");
	policy_bad("{\"allow\": [{\"domain\": \"203.0.113.1\"}]}",
		   "egress.allow[0]: \"domain\" looks like an address (use \"cidr\")");

	memset(label, 'a', 64);
	label[64] = '\0';
	snprintf(text, sizeof text, "{\"allow\": [{\"domain\": \"%s.example\"}]}", label);
	policy_bad(text, "egress.allow[0]: \"domain\" has a label longer than 63 characters");

	/* 254 characters. */
	snprintf(name, sizeof name, "%.63s.%.63s.%.63s.%.62s", label, label, label, label);
	cr_assert_eq(strlen(name), 254);
	snprintf(text, sizeof text, "{\"allow\": [{\"domain\": \"%s\"}]}", name);
	policy_bad(text, "egress.allow[0]: \"domain\" must be at most 253 characters");
}

/* ---- shown back --------------------------------------------------------------------------- */

Test(policy, round_trips)
{
	round_trip("{}", "{\"allow\":[]}");
	round_trip("{\"allow\":[{\"cidr\":\"203.0.113.0/24\",\"ports\":[443],\"proto\":\"tcp\"},"
		   "{\"domain\":\"github.com\"},{\"domain\":\"*.npmjs.org\",\"ports\":[443]}]}",
		   "{\"allow\":[{\"cidr\":\"203.0.113.0/24\",\"ports\":[443],\"proto\":\"tcp\"},"
		   "{\"domain\":\"github.com\"},{\"domain\":\"*.npmjs.org\",\"ports\":[443]}]}");
	round_trip(
		"{\"allow\":[{\"proto\":\"udp\",\"ports\":[53,53,5353,1],\"cidr\":\"198.51.100.9\"},"
		"{\"domain\":\"*.Example.ORG.\"}]}",
		"{\"allow\":[{\"cidr\":\"198.51.100.9/32\",\"ports\":[1,53,5353],\"proto\":\"udp\"},"
		"{\"domain\":\"*.example.org\"}]}");
	round_trip("{\"allow\":[{\"cidr\":\"0.0.0.0/0\"}]}",
		   "{\"allow\":[{\"cidr\":\"0.0.0.0/0\"}]}");
}

/* ---- domain matching ---------------------------------------------------------------------- */

Test(policy, match_domain)
{
	struct net_policy *p = policy_ok(
		"{\"allow\": [{\"domain\": \"github.com\"}, {\"cidr\": \"203.0.113.0/24\"}, "
		"{\"domain\": \"*.npmjs.org\"}, {\"domain\": \"registry.npmjs.org\"}, "
		"{\"domain\": \"*.github.com\"}]}");

	cr_assert_eq(net_policy_match_domain(p, "github.com"), 1u << 0);
	cr_assert_eq(net_policy_match_domain(p, "GitHub.Com."), 1u << 0);
	cr_assert_eq(net_policy_match_domain(p, "api.github.com"), 1u << 4);
	cr_assert_eq(net_policy_match_domain(p, "npmjs.org"), 0);
	cr_assert_eq(net_policy_match_domain(p, "a.npmjs.org"), 1u << 2);
	cr_assert_eq(net_policy_match_domain(p, "A.B.NPMJS.ORG."), 1u << 2);
	cr_assert_eq(net_policy_match_domain(p, "registry.npmjs.org"), (1u << 2) | (1u << 3));

	/* Positive controls above; near misses below. */
	cr_assert_eq(net_policy_match_domain(p, "evilgithub.com"), 0);
	cr_assert_eq(net_policy_match_domain(p, "github.com.evil.example"), 0);
	cr_assert_eq(net_policy_match_domain(p, "xnpmjs.org"), 0);
	cr_assert_eq(net_policy_match_domain(p, ".npmjs.org"), 0);
	cr_assert_eq(net_policy_match_domain(p, "..npmjs.org"), 0);
	cr_assert_eq(net_policy_match_domain(p, "a..npmjs.org"), 0);
	cr_assert_eq(net_policy_match_domain(p, "github.com.."), 0);
	cr_assert_eq(net_policy_match_domain(p, "."), 0);
	cr_assert_eq(net_policy_match_domain(p, ""), 0);
	cr_assert_eq(net_policy_match_domain(p, "203.0.113.1"), 0);
	cr_assert_eq(net_policy_match_domain(NULL, "github.com"), 0);
	net_policy_free(p);
}

Test(policy, match_domain_bounds)
{
	struct net_policy *p = policy_ok("{\"allow\": [{\"domain\": \"*.example\"}]}");
	char name[400];

	/* 253 characters with a final dot, matched; 254 refused, however it ends. */
	memset(name, 'a', sizeof name);
	for (size_t i = 63; i < 240; i += 64)
		name[i] = '.';
	snprintf(name + 245, sizeof name - 245, ".example.");
	cr_assert_eq(strlen(name), 254);
	cr_assert_eq(net_policy_match_domain(p, name), 1);
	name[253] = '\0'; /* without the final dot: 253 */
	cr_assert_eq(net_policy_match_domain(p, name), 1);

	memset(name, 'a', sizeof name);
	for (size_t i = 63; i < 240; i += 64)
		name[i] = '.';
	snprintf(name + 246, sizeof name - 246, ".example");
	cr_assert_eq(strlen(name), 254);
	cr_assert_eq(net_policy_match_domain(p, name), 0);
	memset(name, 'a', sizeof name - 1);
	name[sizeof name - 1] = '\0';
	cr_assert_eq(net_policy_match_domain(p, name), 0);
	net_policy_free(p);
}

Test(policy, match_domain_rule_64)
{
	char text[16384];
	size_t n = (size_t)snprintf(text, sizeof text, "{\"allow\": [");

	for (int i = 0; i < NET_POLICY_MAX_RULES; i++)
		n += (size_t)snprintf(text + n, sizeof text - n, "%s{\"domain\": \"h%d.example\"}",
				      i ? "," : "", i);
	snprintf(text + n, sizeof text - n, "]}");

	struct net_policy *p = policy_ok(text);
	cr_assert_eq(net_policy_match_domain(p, "h0.example"), UINT64_C(1));
	cr_assert_eq(net_policy_match_domain(p, "h63.example"), UINT64_C(1) << 63);
	cr_assert_eq(net_policy_match_domain(p, "h64.example"), 0);
	net_policy_free(p);
}
