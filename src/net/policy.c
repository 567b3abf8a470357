/* SPDX-License-Identifier: MIT */
/* The egress policy: parsed from what a client sent, so every field is hostile until checked.
 * Each string is bounded before it is read, each array before it is walked, and each refusal
 * names the rule by its index and says what would have been accepted. */

#include "policy.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "basic/cleanup.h"
#include "basic/json-util.h"

#define CIDR_TEXT_MAX 18 /* "255.255.255.255/32" */
#define LABEL_MAX 63

static const char *const proto_names[] = {
	[NET_PROTO_TCP] = "tcp",
	[NET_PROTO_UDP] = "udp",
};

void net_policy_free(struct net_policy *p)
{
	if (!p)
		return;
	for (size_t i = 0; i < p->n_rules; i++)
		free(p->rules[i].domain);
	free(p->rules);
	free(p);
}

DEFINE_TRIVIAL_CLEANUP_FUNC(struct net_policy *, net_policy_free);

static int rule_error(struct station_error *e, size_t i, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int rule_error(struct station_error *e, size_t i, const char *fmt, ...)
{
	char what[400];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof what, fmt, ap);
	va_end(ap);
	return station_error_set(e, -EINVAL, "egress", "egress.allow[%zu]: %s", i, what);
}

/* "0".."32" without sign, spaces or leading zeros. */
static int parse_prefix(const char *s, unsigned *ret)
{
	size_t n = strlen(s);

	if (n == 0 || n > 2 || (n == 2 && s[0] == '0'))
		return -EINVAL;
	for (size_t i = 0; i < n; i++)
		if (!isdigit((unsigned char)s[i]))
			return -EINVAL;
	unsigned v = (unsigned)atoi(s);
	if (v > 32)
		return -EINVAL;
	*ret = v;
	return 0;
}

static uint32_t prefix_mask(unsigned prefix)
{
	return prefix == 0 ? 0 : UINT32_MAX << (32 - prefix);
}

static void format_cidr(uint32_t addr, unsigned prefix, char *buf, size_t size)
{
	snprintf(buf, size, "%u.%u.%u.%u/%u", addr >> 24, (addr >> 16) & 0xff, (addr >> 8) & 0xff,
		 addr & 0xff, prefix);
}

/* "a.b.c.d/n", or "a.b.c.d" for a single address (/32). */
static int parse_cidr(const char *s, size_t i, struct net_rule *r, struct station_error *e)
{
	char text[CIDR_TEXT_MAX + 1], net[CIDR_TEXT_MAX + 1];
	struct in_addr in;
	unsigned prefix = 32;

	if (strchr(s, ':'))
		return rule_error(e, i, "IPv6 egress is not available: workspaces have no IPv6");
	if (strlen(s) > CIDR_TEXT_MAX)
		return rule_error(e, i, "\"cidr\" must be an IPv4 network like 203.0.113.0/24");
	snprintf(text, sizeof text, "%s", s);
	char *slash = strchr(text, '/');
	if (slash) {
		*slash = '\0';
		if (parse_prefix(slash + 1, &prefix) < 0)
			return rule_error(e, i, "\"cidr\" prefix length must be from 0 to 32");
	}
	if (inet_pton(AF_INET, text, &in) != 1)
		return rule_error(e, i, "\"cidr\" must be an IPv4 network like 203.0.113.0/24");

	uint32_t addr = ntohl(in.s_addr);
	if (addr & ~prefix_mask(prefix)) {
		format_cidr(addr & prefix_mask(prefix), prefix, net, sizeof net);
		return rule_error(e, i, "\"cidr\" %s has host bits set (the network is %s)", s,
				  net);
	}
	r->kind = NET_RULE_CIDR;
	r->addr = addr;
	r->prefix = prefix;
	return 0;
}

static bool label_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
}

/* A lower-case name without final dot: labels of 1..63 of [a-z0-9-], not starting or ending
 * with '-', and a last label that is not all digits (that would be an address). NULL when
 * valid, else why not. */
static const char *dns_name_invalid(const char *name)
{
	const char *label = name;
	bool all_digits = true;

	for (const char *c = name;; c++) {
		if (*c == '.' || *c == '\0') {
			size_t len = (size_t)(c - label);
			if (len == 0)
				return "has an empty label";
			if (len > LABEL_MAX)
				return "has a label longer than 63 characters";
			if (label[0] == '-' || c[-1] == '-')
				return "has a label that starts or ends with '-'";
			if (*c == '\0')
				break;
			label = c + 1;
			all_digits = true;
			continue;
		}
		if (*c == '*')
			return "may have \"*.\" only as its whole first label";
		if (!label_char(*c))
			return "may contain only letters, digits, '-' and '.'";
		if (!isdigit((unsigned char)*c))
			all_digits = false;
	}
	if (all_digits)
		return "looks like an address (use \"cidr\")";
	return NULL;
}

static int parse_domain(const char *s, size_t i, struct net_rule *r, struct station_error *e)
{
	char name[NET_DOMAIN_MAX + 2];
	size_t n = strlen(s);

	if (n > 0 && s[n - 1] == '.')
		n--;
	if (n == 0)
		return rule_error(e, i, "\"domain\" must not be empty");
	if (n > NET_DOMAIN_MAX)
		return rule_error(e, i, "\"domain\" must be at most %d characters", NET_DOMAIN_MAX);
	for (size_t k = 0; k < n; k++)
		name[k] = (char)tolower((unsigned char)s[k]);
	name[n] = '\0';

	bool wildcard = strncmp(name, "*.", 2) == 0;
	const char *why = dns_name_invalid(wildcard ? name + 2 : name);
	if (why)
		return rule_error(e, i, "\"domain\" %s", why);

	r->domain = strdup(wildcard ? name + 2 : name);
	if (!r->domain)
		return station_error_set(e, -ENOMEM, NULL, "out of memory");
	r->kind = NET_RULE_DOMAIN;
	r->wildcard = wildcard;
	return 0;
}

static int cmp_port(const void *a, const void *b)
{
	return (int)*(const uint16_t *)a - (int)*(const uint16_t *)b;
}

/* Sorted, duplicates dropped: the normalised form that to_json shows. */
static int parse_ports(const json_t *ports, size_t i, struct net_rule *r, struct station_error *e)
{
	size_t k;
	json_t *v;

	if (!json_is_array(ports) || json_array_size(ports) == 0)
		return rule_error(e, i,
				  "\"ports\" must be a non-empty array (leave it out for every "
				  "port)");
	if (json_array_size(ports) > NET_RULE_MAX_PORTS)
		return rule_error(e, i, "\"ports\" may list at most %d ports", NET_RULE_MAX_PORTS);
	json_array_foreach(ports, k, v) {
		if (!json_is_integer(v) || json_integer_value(v) < 1 ||
		    json_integer_value(v) > 65535)
			return rule_error(e, i, "\"ports\" must be integers from 1 to 65535");
		r->ports[k] = (uint16_t)json_integer_value(v);
	}
	qsort(r->ports, json_array_size(ports), sizeof r->ports[0], cmp_port);
	r->n_ports = 0;
	for (k = 0; k < json_array_size(ports); k++)
		if (r->n_ports == 0 || r->ports[r->n_ports - 1] != r->ports[k])
			r->ports[r->n_ports++] = r->ports[k];
	return 0;
}

static int parse_proto(const json_t *proto, size_t i, struct net_rule *r, struct station_error *e)
{
	const char *s = json_string_value(proto);

	if (s && strcmp(s, "tcp") == 0)
		r->proto = NET_PROTO_TCP;
	else if (s && strcmp(s, "udp") == 0)
		r->proto = NET_PROTO_UDP;
	else
		return rule_error(e, i, "\"proto\" must be \"tcp\" or \"udp\"");
	return 0;
}

static int parse_rule(const json_t *o, size_t i, struct net_rule *r, struct station_error *e)
{
	const char *key;
	json_t *v;
	int ret;

	if (!json_is_object(o))
		return rule_error(e, i, "must be an object with \"cidr\" or \"domain\"");
	json_object_foreach((json_t *)o, key, v) {
		if (strcmp(key, "cidr") != 0 && strcmp(key, "domain") != 0 &&
		    strcmp(key, "ports") != 0 && strcmp(key, "proto") != 0)
			return rule_error(e, i,
					  "unknown key \"%.64s\" (known: cidr, domain, ports, "
					  "proto)",
					  key);
	}

	const json_t *cidr = json_object_get(o, "cidr"), *domain = json_object_get(o, "domain");
	if (!cidr == !domain)
		return rule_error(e, i, "must have exactly one of \"cidr\" and \"domain\"");
	if (cidr && !json_is_string(cidr))
		return rule_error(e, i, "\"cidr\" must be a string");
	if (domain && !json_is_string(domain))
		return rule_error(e, i, "\"domain\" must be a string");
	if (cidr && strlen(json_string_value(cidr)) != json_string_length(cidr))
		return rule_error(e, i, "\"cidr\" must not contain NUL");
	if (domain && strlen(json_string_value(domain)) != json_string_length(domain))
		return rule_error(e, i, "\"domain\" must not contain NUL");

	ret = cidr ? parse_cidr(json_string_value(cidr), i, r, e) :
		     parse_domain(json_string_value(domain), i, r, e);
	if (ret < 0)
		return ret;
	if (json_object_get(o, "ports")) {
		ret = parse_ports(json_object_get(o, "ports"), i, r, e);
		if (ret < 0)
			return ret;
	}
	if (json_object_get(o, "proto")) {
		ret = parse_proto(json_object_get(o, "proto"), i, r, e);
		if (ret < 0)
			return ret;
	}
	return 0;
}

int net_policy_from_json(const json_t *egress, struct net_policy **ret, struct station_error *e)
{
	_cleanup_(net_policy_freep) struct net_policy *p = NULL;
	const json_t *allow;
	const char *key;
	json_t *v;
	size_t i;

	if (!json_is_object(egress))
		return station_error_set(e, -EINVAL, "egress",
					 "egress must be an object like {\"allow\": [...]}");
	json_object_foreach((json_t *)egress, key, v)
		if (strcmp(key, "allow") != 0)
			return station_error_set(e, -EINVAL, "egress",
						 "egress: unknown key \"%.64s\" (known: allow)",
						 key);

	allow = json_object_get(egress, "allow");
	if (allow && !json_is_array(allow))
		return station_error_set(e, -EINVAL, "egress",
					 "egress.allow must be an array of rules");
	if (json_array_size(allow) > NET_POLICY_MAX_RULES)
		return station_error_set(e, -EINVAL, "egress",
					 "egress.allow has %zu rules, at most %d are allowed",
					 json_array_size(allow), NET_POLICY_MAX_RULES);

	p = calloc(1, sizeof *p);
	if (!p)
		return station_error_set(e, -ENOMEM, NULL, "out of memory");
	if (json_array_size(allow) > 0) {
		p->rules = calloc(json_array_size(allow), sizeof *p->rules);
		if (!p->rules)
			return station_error_set(e, -ENOMEM, NULL, "out of memory");
	}
	json_array_foreach(allow, i, v) {
		/* Counted first, so net_policy_free() sees a domain parse_rule() set. */
		p->n_rules++;
		int r = parse_rule(v, i, &p->rules[i], e);
		if (r < 0)
			return r;
	}
	*ret = TAKE_PTR(p);
	return 0;
}

static json_t *rule_to_json(const struct net_rule *r)
{
	_cleanup_json_ json_t *o = json_object(), *ports = NULL;
	char text[NET_DOMAIN_MAX + 3];

	if (!o)
		return NULL;
	if (r->kind == NET_RULE_CIDR)
		format_cidr(r->addr, r->prefix, text, sizeof text);
	else
		snprintf(text, sizeof text, "%s%s", r->wildcard ? "*." : "", r->domain);
	if (json_object_set_new(o, r->kind == NET_RULE_CIDR ? "cidr" : "domain",
				json_string(text)) < 0)
		return NULL;
	if (r->n_ports > 0) {
		ports = json_array();
		if (!ports)
			return NULL;
		for (size_t k = 0; k < r->n_ports; k++)
			if (json_array_append_new(ports, json_integer(r->ports[k])) < 0)
				return NULL;
		if (json_object_set(o, "ports", ports) < 0)
			return NULL;
	}
	if (r->proto != NET_PROTO_ANY &&
	    json_object_set_new(o, "proto", json_string(proto_names[r->proto])) < 0)
		return NULL;
	return TAKE_PTR(o);
}

json_t *net_policy_to_json(const struct net_policy *p)
{
	_cleanup_json_ json_t *o = json_object(), *allow = json_array();

	if (!o || !allow)
		return NULL;
	for (size_t i = 0; p && i < p->n_rules; i++)
		if (json_array_append_new(allow, rule_to_json(&p->rules[i])) < 0)
			return NULL;
	if (json_object_set(o, "allow", allow) < 0)
		return NULL;
	return TAKE_PTR(o);
}

/* name (no final dot, n characters) equals domain, or lies below it when wildcard. */
static bool rule_matches(const struct net_rule *r, const char *name, size_t n)
{
	size_t d = strlen(r->domain);

	if (!r->wildcard)
		return n == d && strncasecmp(name, r->domain, n) == 0;
	return n > d + 1 && name[n - d - 1] == '.' && strncasecmp(name + n - d, r->domain, d) == 0;
}

uint64_t net_policy_match_domain(const struct net_policy *p, const char *name)
{
	uint64_t bits = 0;
	size_t n;

	if (!p || !name)
		return 0;
	n = strnlen(name, NET_DOMAIN_MAX + 2);
	if (n > 0 && name[n - 1] == '.')
		n--;
	/* A name no rule could have been written for: empty, too long, or with an empty label
	 * ("..npmjs.org" must not pass as a name below npmjs.org). */
	if (n == 0 || n > NET_DOMAIN_MAX || name[0] == '.' || name[n - 1] == '.')
		return 0;
	for (size_t k = 1; k < n; k++)
		if (name[k] == '.' && name[k - 1] == '.')
			return 0;

	for (size_t i = 0; i < p->n_rules && i < 64; i++)
		if (p->rules[i].kind == NET_RULE_DOMAIN && rule_matches(&p->rules[i], name, n))
			bits |= UINT64_C(1) << i;
	return bits;
}
