/* SPDX-License-Identifier: MIT */
/* The firewall as nftables text handed to libnftables' parser. That text is a language: only
 * names we checked against a closed alphabet (the table, the bridge, workspace ids) and numbers
 * (addresses, ports, timeouts, the log group) are ever printed into it. Policy rules reach it as
 * numbers only; a domain rule is represented by its index, never by its name. Every change is
 * one nft_run_cmd_from_buffer() call, which libnftables sends as one kernel transaction. */

#include "nft.h"

#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <jansson.h>
#include <libmnl/libmnl.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <nftables/libnftables.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "basic/cleanup.h"
#include "basic/json-util.h"
#include "basic/util.h"

#define NFT_TABLE_MAX 32
#define NFT_ID_MAX 64
#define NFT_IFNAME_MAX 15
#define NFT_PIN_TTL_MIN 30u
#define NFT_PIN_TTL_MAX 86400u
#define NFT_PIN_MAX 512
/* Elements of one domain set: addresses answered for one rule, each for its TTL. */
#define NFT_DOMAIN_SET_SIZE 65536
/* Denials logged per workspace and rule, so a sandbox cannot flood the denial log. */
#define NFT_LOG_LIMIT "limit rate 10/second burst 20 packets"
/* Addresses a workspace already held elements for in the vmap: more is someone else's mess. */
#define NFT_MAP_SCAN_MAX 64
/* A workspace's bridge port: this and 8 hex digits of its address (net.h). */
#define NFT_PORT_PREFIX "sv"
/* A counter object's answer: names, type, data, handle and at most 256 bytes of user data. */
#define NFT_NL_BUFFER_SIZE 8192
/* A dump's parts (the kernel fills one to at most the size of our last read, 32 KiB). */
#define NFT_NL_DUMP_BUFFER_SIZE 32768
/* Our GETOBJ request: two names and the type. */
#define NFT_NL_REQUEST_SIZE 512
/* Stale datagrams read off the socket before a request (answers to an interrupted one). */
#define NFT_NL_DRAIN_MAX 16

struct nft {
	struct nft_ctx *ctx;
	/* For reading counters without libnftables' ruleset cache. Opened with the context, so
	 * both reach the same network namespace's ruleset. */
	struct mnl_socket *nl;
	unsigned portid;
	uint32_t seq;
	char table[NFT_TABLE_MAX + 1];
	uint16_t log_group;  /* the last nft_base_ensure()'s */
	uint32_t proxy_addr; /* nft_set_proxy(); proxy_port 0: none */
	uint16_t proxy_port;
	bool proxy_restricted;
	pthread_mutex_t lock; /* every public call holds it (recursive) */
};

/* Names */

static bool table_name_is_valid(const char *s)
{
	size_t len = strnlen(s, NFT_TABLE_MAX + 1);

	if (len == 0 || len > NFT_TABLE_MAX || !(s[0] >= 'a' && s[0] <= 'z'))
		return false;
	for (size_t i = 0; i < len; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '_'))
			return false;
	return true;
}

static bool ifname_is_valid(const char *s)
{
	size_t len = strnlen(s, NFT_IFNAME_MAX + 1);

	if (len == 0 || len > NFT_IFNAME_MAX)
		return false;
	for (size_t i = 0; i < len; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
		      (s[i] >= '0' && s[i] <= '9') || s[i] == '_' || s[i] == '-' || s[i] == '.'))
			return false;
	return true;
}

/* key: the id with '-' as '_' (ids are [a-z0-9-]{1,64}); -EINVAL for anything else. */
static int ws_key(const char *id, char ret[NFT_ID_MAX + 1])
{
	size_t len;

	if (!id)
		return -EINVAL;
	len = strnlen(id, NFT_ID_MAX + 1);
	if (len == 0 || len > NFT_ID_MAX)
		return -EINVAL;
	for (size_t i = 0; i < len; i++) {
		char c = id[i];

		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'))
			return -EINVAL;
		ret[i] = c == '-' ? '_' : c;
	}
	ret[len] = '\0';
	return 0;
}

/* The id of a chain named ws_<key>, or -EINVAL when the name is not one of ours. */
static int id_from_chain(const char *chain, char ret[NFT_ID_MAX + 1])
{
	size_t len;

	if (strncmp(chain, "ws_", 3) != 0)
		return -EINVAL;
	chain += 3;
	len = strnlen(chain, NFT_ID_MAX + 1);
	if (len == 0 || len > NFT_ID_MAX)
		return -EINVAL;
	for (size_t i = 0; i < len; i++) {
		char c = chain[i];

		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'))
			return -EINVAL;
		ret[i] = c == '_' ? '-' : c;
	}
	ret[len] = '\0';
	return 0;
}

static void addr_format(uint32_t a, char ret[16])
{
	snprintf(ret, 16, "%u.%u.%u.%u", a >> 24, (a >> 16) & 0xff, (a >> 8) & 0xff, a & 0xff);
}

static uint32_t prefix_mask(unsigned prefix)
{
	return prefix == 0 ? 0 : UINT32_MAX << (32 - prefix);
}

/* Running libnftables */

/* The errno whose strerror() text libnftables printed ("Could not process rule: File exists"). */
static int errno_from_text(const char *text)
{
	static const int known[] = { ENOENT,	   EEXIST,	    EBUSY,  EPERM,    EACCES,
				     EOPNOTSUPP,   EPROTONOSUPPORT, ENFILE, ENOSPC,   ENOMEM,
				     EAFNOSUPPORT, EINVAL,	    ERANGE, EMSGSIZE, ENOBUFS };

	for (size_t i = 0; i < ELEMENTSOF(known); i++)
		if (strstr(text, strerror(known[i])))
			return -known[i];
	return -EIO;
}

/* libnftables' error text, first two lines (the error and the command it refers to) joined. */
static void error_from_text(const char *text, int err, struct station_error *e)
{
	char line1[256] = "", line2[200] = "";
	const char *nl;
	size_t len;

	nl = strchr(text, '\n');
	len = nl ? (size_t)(nl - text) : strlen(text);
	snprintf(line1, sizeof(line1), "%.*s", (int)MIN(len, sizeof(line1) - 1), text);
	if (nl) {
		const char *l2 = nl + 1, *nl2 = strchr(l2, '\n');

		len = nl2 ? (size_t)(nl2 - l2) : strlen(l2);
		snprintf(line2, sizeof(line2), "%.*s", (int)MIN(len, sizeof(line2) - 1), l2);
	}
	if (line1[0] == '\0')
		snprintf(line1, sizeof(line1), "libnftables failed without a message");
	if (line2[0])
		station_error_set(e, err, NULL, "nftables: %s (in: %s)", line1, line2);
	else
		station_error_set(e, err, NULL, "nftables: %s", line1);
}

/* Runs cmds (one transaction); -errno from libnftables' words, with them in *e. */
static int nft_run(struct nft *n, const char *cmds, struct station_error *e)
{
	const char *err_text;
	int r;

	nft_ctx_output_set_flags(n->ctx, 0);
	r = nft_run_cmd_from_buffer(n->ctx, cmds);
	/* Reading a buffer rewinds it for the next command. */
	(void)nft_ctx_get_output_buffer(n->ctx);
	err_text = nft_ctx_get_error_buffer(n->ctx);
	if (r == 0)
		return 0;
	r = errno_from_text(err_text ? err_text : "");
	error_from_text(err_text ? err_text : "", r, e);
	return r;
}

/* The items of the JSON documents in out, one {"nftables": [...]} per list command. */
static int items_from_output(const char *out, json_t **ret)
{
	_cleanup_json_ json_t *all = json_array();
	size_t len = strlen(out), off = 0;

	if (!all)
		return -ENOMEM;
	for (;;) {
		_cleanup_json_ json_t *doc = NULL;
		json_error_t err;

		off += strspn(out + off, " \t\r\n");
		if (off >= len)
			break;
		doc = json_loadb(out + off, len - off, JSON_DISABLE_EOF_CHECK, &err);
		if (!doc || err.position <= 0)
			return -EBADMSG;
		off += (size_t)err.position;
		if (!json_is_array(json_object_get(doc, "nftables")) ||
		    json_array_extend(all, json_object_get(doc, "nftables")) < 0)
			return -EBADMSG;
	}
	*ret = TAKE_PTR(all);
	return 0;
}

/* Runs list commands with JSON output; returns the items of all their answers. */
static int nft_list(struct nft *n, const char *cmd, bool terse, json_t **ret)
{
	const char *out, *err_text;
	int r;

	nft_ctx_output_set_flags(n->ctx, NFT_CTX_OUTPUT_JSON | (terse ? NFT_CTX_OUTPUT_TERSE : 0));
	r = nft_run_cmd_from_buffer(n->ctx, cmd);
	out = nft_ctx_get_output_buffer(n->ctx);
	err_text = nft_ctx_get_error_buffer(n->ctx);
	if (r != 0)
		return errno_from_text(err_text ? err_text : "");
	return items_from_output(out ? out : "", ret);
}

/* Builds a batch in memory. */
struct batch {
	FILE *f;
	char *buf;
	size_t len;
};

static int batch_open(struct batch *b)
{
	*b = (struct batch){};
	b->f = open_memstream(&b->buf, &b->len);
	return b->f ? 0 : -ENOMEM;
}

static void batch_done(struct batch *b)
{
	if (b->f)
		fclose(b->f);
	free(b->buf);
	*b = (struct batch){};
}

static int batch_run(struct nft *n, struct batch *b, struct station_error *e)
{
	bool failed = ferror(b->f);

	if (fclose(b->f) != 0 || failed) {
		b->f = NULL;
		return station_error_set(e, -ENOMEM, NULL, "nftables: out of memory");
	}
	b->f = NULL;
	return nft_run(n, b->buf, e);
}

int nft_open(const char *table, struct nft **ret, struct station_error *e)
{
	_cleanup_free_ struct nft *n = NULL;

	if (!table || !table_name_is_valid(table))
		return station_error_set(e, -EINVAL, NULL,
					 "nftables: table name must be [a-z][a-z0-9_]{0,31}");
	n = calloc(1, sizeof(*n));
	if (!n)
		return -ENOMEM;
	snprintf(n->table, sizeof(n->table), "%s", table);
	n->ctx = nft_ctx_new(NFT_CTX_DEFAULT);
	if (!n->ctx)
		return station_error_set(e, -ENOMEM, NULL, "nftables: cannot make a context");
	if (nft_ctx_buffer_output(n->ctx) != 0 || nft_ctx_buffer_error(n->ctx) != 0) {
		nft_ctx_free(n->ctx);
		return station_error_set(e, -ENOMEM, NULL, "nftables: cannot buffer output");
	}
	n->nl = mnl_socket_open2(NETLINK_NETFILTER, SOCK_CLOEXEC | SOCK_NONBLOCK);
	if (!n->nl || mnl_socket_bind(n->nl, 0, MNL_SOCKET_AUTOPID) < 0) {
		int r = negative_errno();

		if (n->nl)
			mnl_socket_close(n->nl);
		nft_ctx_free(n->ctx);
		return station_error_set(e, r, NULL, "nftables: cannot open a netlink socket: %s",
					 strerror(-r));
	}
	n->portid = mnl_socket_get_portid(n->nl);
	n->seq = (uint32_t)time(NULL);
	pthread_mutexattr_t attr;
	pthread_mutexattr_init(&attr);
	pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_RECURSIVE);
	pthread_mutex_init(&n->lock, &attr);
	pthread_mutexattr_destroy(&attr);
	*ret = TAKE_PTR(n);
	return 0;
}

void nft_close(struct nft *n)
{
	if (!n)
		return;
	nft_ctx_free(n->ctx);
	if (n->nl)
		mnl_socket_close(n->nl);
	pthread_mutex_destroy(&n->lock);
	free(n);
}

/* Base */

static int base_check(const struct nft_base *b, struct station_error *e)
{
	if (!b->bridge || !ifname_is_valid(b->bridge))
		return station_error_set(e, -EINVAL, NULL,
					 "nftables: bridge name must be 1-15 of [A-Za-z0-9_.-]");
	if (b->prefix < 1 || b->prefix > 30 || (b->range & ~prefix_mask(b->prefix)) != 0)
		return station_error_set(e, -EINVAL, NULL, "nftables: range is not a network");
	if ((b->gateway & prefix_mask(b->prefix)) != b->range)
		return station_error_set(e, -EINVAL, NULL,
					 "nftables: gateway is not inside the range");
	return 0;
}

/* Set name's elements: the intervals of the classes not in allow (blocked.h), disjoint (an
 * interval set refuses overlapping elements). */
static int put_intervals(FILE *f, const char *t, const char *name, uint32_t allow,
			 const struct nft_base *b)
{
	_cleanup_free_ struct net_interval *v = NULL;
	size_t n = 0;
	int r = net_blocked_compute(allow, (struct net_cidr){ b->range, b->prefix }, b->host, &v,
				    &n);

	if (r < 0)
		return r;
	fprintf(f, "flush set inet %s %s\n", t, name);
	if (n > 0) {
		fprintf(f, "add element inet %s %s {", t, name);
		for (size_t i = 0; i < n; i++) {
			char a[16], z[16];

			addr_format(v[i].lo, a);
			addr_format(v[i].hi, z);
			fprintf(f, "%s %s-%s", i ? "," : "", a, z);
		}
		fprintf(f, " }\n");
	}
	return 0;
}

/* The sets blocked (every class the operator did not open) and fenced (those of them that are
 * the worker's own: NET_CLASSES_FENCED). After "add set" and before the map, so the same text
 * makes the sets and refreshes them. */
static int put_blocked(FILE *f, const char *t, const struct nft_base *b)
{
	int r = put_intervals(f, t, "blocked", b->allow, b);

	if (r >= 0)
		r = put_intervals(f, t, "fenced", b->allow | ~(uint32_t)NET_CLASSES_FENCED, b);
	return r;
}

static int put_base_sets(FILE *f, const char *t, const struct nft_base *b)
{
	fprintf(f,
		"add set inet %1$s blocked { type ipv4_addr; flags interval; }\n"
		"add set inet %1$s fenced { type ipv4_addr; flags interval; }\n",
		t);
	int r = put_blocked(f, t, b);
	fprintf(f, "add map inet %s workspaces { type ipv4_addr : verdict; }\n", t);
	return r;
}

static void put_base_chains(FILE *f, const char *t, const struct nft_base *b)
{
	const char *br = b->bridge;
	char gw[16], range[16];

	addr_format(b->gateway, gw);
	addr_format(b->range, range);
	fprintf(f,
		"add chain inet %1$s forward { type filter hook forward priority filter; }\n"
		"add chain inet %1$s input { type filter hook input priority filter; }\n"
		"add chain inet %1$s postrouting { type nat hook postrouting priority srcnat; }\n"
		"flush chain inet %1$s forward\n"
		"add rule inet %1$s forward iifname \"%2$s\" meta nfproto ipv6 drop\n"
		"add rule inet %1$s forward iifname \"%2$s\" icmp type redirect drop\n"
		"add rule inet %1$s forward iifname \"%2$s\" ct state established,related accept\n"
		"add rule inet %1$s forward iifname \"%2$s\" ip saddr vmap @workspaces\n"
		"add rule inet %1$s forward iifname \"%2$s\" drop\n"
		"add rule inet %1$s forward oifname \"%2$s\" ct state established,related accept\n"
		"add rule inet %1$s forward oifname \"%2$s\" drop\n"
		"flush chain inet %1$s input\n"
		"add rule inet %1$s input iifname \"%2$s\" ct state established,related accept\n"
		"add rule inet %1$s input iifname \"%2$s\" ip daddr %3$s udp dport 53 accept\n"
		"add rule inet %1$s input iifname \"%2$s\" ip daddr %3$s tcp dport 53 accept\n",
		t, br, gw);
	/* The worker's own addresses: denied in the workspace's chain (counted and logged), whose
	 * first rule drops what is for this host; what else comes here (broadcast, multicast)
	 * and what no workspace sent is dropped without a word. */
	if (!(b->allow & NET_CLASS_BIT(NET_CLASS_WORKER)))
		fprintf(f,
			"add rule inet %1$s input iifname \"%2$s\" fib daddr type local ip saddr "
			"vmap @workspaces\n"
			"add rule inet %1$s input iifname \"%2$s\" drop\n",
			t, br);
	fprintf(f,
		"flush chain inet %1$s postrouting\n"
		"add rule inet %1$s postrouting ip saddr %3$s/%4$u oifname != \"%2$s\" masquerade\n",
		t, br, range, b->prefix);
}

/* The bridge itself: frames between two workspace ports never reach the inet hooks (nothing is
 * routed), and a workspace could send with another's address (its policy would then apply).
 * A workspace's port (set ports, named as net.h says) may send IPv4 from its own address only
 * (set bound), ARP for it only, nothing else; a frame from or to one of them is not bridged to
 * another port unless the workspaces class is open. Ports that are not in the set (another bridge's, or a
 * workspace's before it is applied, when nothing runs in it yet) are left alone. */
static void put_bridge(FILE *f, const char *t, const struct nft_base *b)
{
	fprintf(f,
		"add table bridge %1$s\n"
		"add set bridge %1$s ports { type ifname; }\n"
		"add set bridge %1$s bound { type ifname . ipv4_addr; }\n"
		"add chain bridge %1$s prerouting { type filter hook prerouting priority filter; }\n"
		"add chain bridge %1$s forward { type filter hook forward priority filter; }\n"
		"flush chain bridge %1$s prerouting\n"
		"add rule bridge %1$s prerouting iifname @ports ether type != { ip, arp } drop\n"
		"add rule bridge %1$s prerouting iifname @ports iifname . ip saddr != @bound drop\n"
		"add rule bridge %1$s prerouting iifname @ports iifname . arp saddr ip != @bound "
		"drop\n"
		"flush chain bridge %1$s forward\n",
		t);
	if (!(b->allow & NET_CLASS_BIT(NET_CLASS_WORKSPACES)))
		fprintf(f,
			"add rule bridge %1$s forward iifname @ports drop\n"
			"add rule bridge %1$s forward oifname @ports drop\n",
			t);
}

static int nft_base_ensure_locked(struct nft *n, const struct nft_base *b, struct station_error *e)
{
	struct batch batch = {};
	int r;

	r = base_check(b, e);
	if (r < 0)
		return r;
	r = batch_open(&batch);
	if (r < 0)
		return station_error_set(e, r, NULL, "nftables: out of memory");
	fprintf(batch.f, "add table inet %s\n", n->table);
	r = put_base_sets(batch.f, n->table, b);
	put_base_chains(batch.f, n->table, b);
	put_bridge(batch.f, n->table, b);
	if (r < 0) {
		batch_done(&batch);
		return station_error_set(e, r, NULL, "nftables: out of memory");
	}
	r = batch_run(n, &batch, e);
	batch_done(&batch);
	if (r < 0)
		return r;
	n->log_group = b->log_group;
	return 0;
}

static int nft_blocked_update_locked(struct nft *n, const struct nft_base *b,
				     struct station_error *e)
{
	struct batch batch = {};
	int r;

	r = base_check(b, e);
	if (r < 0)
		return r;
	r = batch_open(&batch);
	if (r >= 0)
		r = put_blocked(batch.f, n->table, b);
	if (r < 0) {
		batch_done(&batch);
		return station_error_set(e, r, NULL, "nftables: out of memory");
	}
	r = batch_run(n, &batch, e);
	batch_done(&batch);
	return r;
}

static int nft_base_remove_locked(struct nft *n)
{
	char cmd[4 * NFT_TABLE_MAX + 96];

	/* "add" first makes the delete succeed whether the table exists or not. */
	snprintf(cmd, sizeof(cmd),
		 "add table inet %1$s\ndelete table inet %1$s\n"
		 "add table bridge %1$s\ndelete table bridge %1$s\n",
		 n->table);
	return nft_run(n, cmd, NULL);
}

/* What of a workspace is in the table now */

struct ws_inventory {
	bool table;
	uint64_t sets;			   /* bit i: ws_<key>_d<i> exists */
	uint32_t mapped[NFT_MAP_SCAN_MAX]; /* vmap keys that jump to ws_<key> */
	size_t n_mapped;
	bool addr_taken; /* the address of interest jumps to another chain */
};

/* i of a set named ws_<key>_d<i>, or -1. */
static int set_index(const char *name, const char *key)
{
	size_t kl = strlen(key);
	uint64_t i;

	if (strncmp(name, "ws_", 3) != 0 || strncmp(name + 3, key, kl) != 0 ||
	    strncmp(name + 3 + kl, "_d", 2) != 0)
		return -1;
	if (parse_u64(name + 3 + kl + 2, NET_POLICY_MAX_RULES - 1, &i) < 0)
		return -1;
	return (int)i;
}

static void inventory_sets(json_t *items, const char *key, struct ws_inventory *inv)
{
	size_t i;
	json_t *item;

	json_array_foreach(items, i, item) {
		const char *name =
			json_string_value(json_object_get(json_object_get(item, "set"), "name"));
		int idx = name ? set_index(name, key) : -1;

		if (idx >= 0)
			inv->sets |= UINT64_C(1) << idx;
	}
}

/* A vmap element: ["a.b.c.d", {"jump": {"target": "ws_<key>"}}]. */
static void inventory_map(json_t *items, const char *key, uint32_t addr, struct ws_inventory *inv)
{
	char chain[NFT_ID_MAX + 4];
	size_t i, j;
	json_t *item, *elem;

	snprintf(chain, sizeof(chain), "ws_%s", key);
	json_array_foreach(items, i, item) {
		json_t *elems = json_object_get(json_object_get(item, "map"), "elem");

		json_array_foreach(elems, j, elem) {
			const char *k = json_string_value(json_array_get(elem, 0));
			const char *target = json_string_value(json_object_get(
				json_object_get(json_array_get(elem, 1), "jump"), "target"));
			struct in_addr a;
			uint32_t ka;

			if (!k || inet_pton(AF_INET, k, &a) != 1)
				continue;
			ka = ntohl(a.s_addr);
			if (target && strcmp(target, chain) == 0) {
				if (inv->n_mapped < NFT_MAP_SCAN_MAX)
					inv->mapped[inv->n_mapped++] = ka;
			} else if (ka == addr) {
				inv->addr_taken = true;
			}
		}
	}
}

/* Listing sets and the map only: a table listing would carry every workspace's rules, and the
 * time it takes grows with them. */
static int ws_inventory(struct nft *n, const char *key, uint32_t addr, struct ws_inventory *ret)
{
	_cleanup_json_ json_t *sets = NULL, *map = NULL;
	char cmd[128];
	int r;

	*ret = (struct ws_inventory){};
	snprintf(cmd, sizeof(cmd), "list sets table inet %s", n->table);
	r = nft_list(n, cmd, true, &sets);
	if (r == -ENOENT)
		return 0;
	if (r < 0)
		return r;
	ret->table = true;
	inventory_sets(sets, key, ret);
	snprintf(cmd, sizeof(cmd), "list map inet %s workspaces", n->table);
	r = nft_list(n, cmd, false, &map);
	if (r == -ENOENT)
		return 0;
	if (r < 0)
		return r;
	inventory_map(map, key, addr, ret);
	return 0;
}

/* Workspace chains */

static bool ports_contain(const uint16_t *ports, size_t n, uint16_t p)
{
	for (size_t i = 0; i < n; i++)
		if (ports[i] == p)
			return true;
	return false;
}

static void put_ports(FILE *f, const char *what, const uint16_t *ports, size_t n)
{
	fprintf(f, " %s {", what);
	for (size_t i = 0; i < n; i++)
		if (!ports_contain(ports, i, ports[i]))
			fprintf(f, "%s %u", i ? "," : "", ports[i]);
	fprintf(f, " }");
}

/* The protocol and port match of a rule (ANY: tcp and udp for a cidr rule, tcp for a domain). */
static void put_l4(FILE *f, const struct net_rule *r)
{
	enum net_proto proto = r->proto;

	if (proto == NET_PROTO_ANY && r->kind == NET_RULE_DOMAIN)
		proto = NET_PROTO_TCP;
	if (proto == NET_PROTO_ANY) {
		fprintf(f, " meta l4proto { tcp, udp }");
		if (r->n_ports > 0)
			put_ports(f, "th dport", r->ports, r->n_ports);
	} else {
		const char *name = proto == NET_PROTO_TCP ? "tcp" : "udp";

		if (r->n_ports > 0) {
			char what[16];

			snprintf(what, sizeof(what), "%s dport", name);
			put_ports(f, what, r->ports, r->n_ports);
		} else {
			fprintf(f, " meta l4proto %s", name);
		}
	}
}

static int policy_check(const struct net_policy *p, struct station_error *e)
{
	if (p->n_rules > NET_POLICY_MAX_RULES || (p->n_rules > 0 && !p->rules))
		return station_error_set(e, -EINVAL, "egress", "nftables: too many rules");
	for (size_t i = 0; i < p->n_rules; i++) {
		const struct net_rule *r = &p->rules[i];

		if (r->kind != NET_RULE_CIDR && r->kind != NET_RULE_DOMAIN)
			return station_error_set(e, -EINVAL, "egress", "rule %zu: bad kind", i);
		if (r->proto != NET_PROTO_ANY && r->proto != NET_PROTO_TCP &&
		    r->proto != NET_PROTO_UDP)
			return station_error_set(e, -EINVAL, "egress", "rule %zu: bad proto", i);
		if (r->n_ports > NET_RULE_MAX_PORTS || ports_contain(r->ports, r->n_ports, 0))
			return station_error_set(e, -EINVAL, "egress", "rule %zu: bad ports", i);
		if (r->kind == NET_RULE_CIDR &&
		    (r->prefix > 32 || (r->addr & ~prefix_mask(r->prefix)) != 0))
			return station_error_set(e, -EINVAL, "egress", "rule %zu: bad cidr", i);
	}
	return 0;
}

/* The denial: counted, logged under a rate limit (a limit past its rate ends the rule before the
 * log, never before the drop), dropped. match: "" or a match every packet of both rules needs. */
static void put_deny(FILE *f, const char *t, const char *id, const char *key, const char *match,
		     uint16_t log_group)
{
	fprintf(f,
		"add rule inet %1$s ws_%2$s %3$scounter name ws_%2$s_denied " NFT_LOG_LIMIT
		" log prefix \"%4$s \" group %5$u\n"
		"add rule inet %1$s ws_%2$s %3$sdrop\n",
		t, key, match, id, log_group);
}

static void put_allow(FILE *f, const char *t, const char *key, const char *match,
		      const struct net_rule *r)
{
	fprintf(f, "add rule inet %s ws_%s %s", t, key, match);
	if (r)
		put_l4(f, r);
	fprintf(f, " ct state new counter name ws_%s_allowed accept\n", key);
}

static void put_policy_rules(FILE *f, const char *t, const char *id, const char *key,
			     const struct net_policy *p, uint16_t log_group)
{
	put_deny(f, t, id, key, "ip daddr @fenced ", log_group);
	for (size_t i = 0; i < p->n_rules; i++) {
		const struct net_rule *r = &p->rules[i];
		char match[48] = "", a[16];

		if (r->kind != NET_RULE_CIDR)
			continue;
		addr_format(r->addr, a);
		if (r->prefix > 0)
			snprintf(match, sizeof(match), "ip daddr %s/%u", a, r->prefix);
		put_allow(f, t, key, match, r);
	}
	put_deny(f, t, id, key, "ip daddr @blocked ", log_group);
	for (size_t i = 0; i < p->n_rules; i++) {
		char match[NFT_ID_MAX + 48];

		if (p->rules[i].kind != NET_RULE_DOMAIN)
			continue;
		snprintf(match, sizeof(match), "ip daddr @ws_%s_d%zu", key, i);
		put_allow(f, t, key, match, &p->rules[i]);
	}
	put_deny(f, t, id, key, "", log_group);
}

/* Domain sets: the policy's made or emptied, the others deleted (after the chain's flush, which
 * drops the rules that used them). */
static void put_domain_sets(FILE *f, const char *t, const char *key, const struct net_policy *p,
			    uint64_t existing)
{
	uint64_t wanted = 0;

	for (size_t i = 0; p && i < p->n_rules; i++)
		if (p->rules[i].kind == NET_RULE_DOMAIN)
			wanted |= UINT64_C(1) << i;
	for (unsigned i = 0; i < 64; i++) {
		uint64_t bit = UINT64_C(1) << i;

		if ((existing & bit) && !(wanted & bit))
			fprintf(f, "delete set inet %s ws_%s_d%u\n", t, key, i);
		if (wanted & bit)
			fprintf(f,
				"add set inet %1$s ws_%2$s_d%3$u { type ipv4_addr; flags timeout; "
				"size %4$u; }\nflush set inet %1$s ws_%2$s_d%3$u\n",
				t, key, i, NFT_DOMAIN_SET_SIZE);
	}
}

/* Takes addr out of the vmap and its port's binding ("add" first: the binding may be absent). */
static void put_unmap(FILE *f, const char *t, uint32_t addr)
{
	char a[16];

	addr_format(addr, a);
	fprintf(f,
		"delete element inet %1$s workspaces { %2$s }\n"
		"add element bridge %1$s ports { \"" NFT_PORT_PREFIX "%3$08x\" }\n"
		"delete element bridge %1$s ports { \"" NFT_PORT_PREFIX "%3$08x\" }\n"
		"add element bridge %1$s bound { \"" NFT_PORT_PREFIX "%3$08x\" . %2$s }\n"
		"delete element bridge %1$s bound { \"" NFT_PORT_PREFIX "%3$08x\" . %2$s }\n",
		t, a, addr);
}

static void put_map_elements(FILE *f, const char *t, const char *key, uint32_t addr,
			     const struct ws_inventory *inv)
{
	char a[16];

	addr_format(addr, a);
	if (inv->addr_taken)
		fprintf(f, "delete element inet %s workspaces { %s }\n", t, a);
	for (size_t i = 0; i < inv->n_mapped; i++) {
		if (inv->mapped[i] == addr)
			continue;
		put_unmap(f, t, inv->mapped[i]);
	}
	fprintf(f, "add element inet %s workspaces { %s : jump ws_%s }\n", t, a, key);
	fprintf(f,
		"add element bridge %1$s ports { \"" NFT_PORT_PREFIX "%2$08x\" }\n"
		"add element bridge %1$s bound { \"" NFT_PORT_PREFIX "%2$08x\" . %3$s }\n",
		t, addr, a);
}

static int nft_workspace_apply_locked(struct nft *n, const char *id, uint32_t addr,
				      const struct net_policy *policy, struct station_error *e)
{
	struct ws_inventory inv;
	struct batch b = {};
	char key[NFT_ID_MAX + 1];
	const char *t = n->table;
	int r;

	if (ws_key(id, key) < 0)
		return station_error_set(e, -EINVAL, NULL,
					 "nftables: workspace id must be [a-z0-9-]{1,64}");
	if (policy) {
		r = policy_check(policy, e);
		if (r < 0)
			return r;
	}
	r = ws_inventory(n, key, addr, &inv);
	if (r < 0)
		return station_error_set(e, r, NULL, "nftables: cannot list table %s: %s", t,
					 strerror(-r));
	if (!inv.table)
		return station_error_set(e, -ENOENT, NULL,
					 "nftables: table inet %s does not exist (base not set up)",
					 t);
	r = batch_open(&b);
	if (r < 0)
		return station_error_set(e, r, NULL, "nftables: out of memory");
	fprintf(b.f,
		"add chain inet %1$s ws_%2$s\n"
		"add counter inet %1$s ws_%2$s_allowed\n"
		"add counter inet %1$s ws_%2$s_denied\n"
		"flush chain inet %1$s ws_%2$s\n",
		t, key);
	put_domain_sets(b.f, t, key, policy, inv.sets);
	/* the operator's proxy, first: wherever it is (a blocked class, the worker itself) */
	if (n->proxy_port && (!policy || n->proxy_restricted)) {
		char a[16], match[64];

		addr_format(n->proxy_addr, a);
		snprintf(match, sizeof(match), "ip daddr %s tcp dport %u", a, n->proxy_port);
		put_allow(b.f, t, key, match, NULL);
	}
	/* Only from the input hook: no forwarded packet is for this host. */
	put_deny(b.f, t, id, key, "fib daddr type local ", n->log_group);
	if (policy) {
		put_policy_rules(b.f, t, id, key, policy, n->log_group);
	} else {
		put_deny(b.f, t, id, key, "ip daddr @blocked ", n->log_group);
		put_allow(b.f, t, key, "", NULL);
	}
	put_map_elements(b.f, t, key, addr, &inv);
	r = batch_run(n, &b, e);
	batch_done(&b);
	return r;
}

static int nft_workspace_remove_locked(struct nft *n, const char *id, uint32_t addr)
{
	struct ws_inventory inv;
	struct batch b = {};
	char key[NFT_ID_MAX + 1];
	const char *t = n->table;
	int r;

	if (ws_key(id, key) < 0)
		return -EINVAL;
	r = ws_inventory(n, key, addr, &inv);
	if (r < 0)
		return r;
	if (!inv.table)
		return 0;
	r = batch_open(&b);
	if (r < 0)
		return r;
	/* Only the elements that jump to this workspace's chain: an address given to another
	 * workspace since is that one's. */
	for (size_t i = 0; i < inv.n_mapped; i++)
		put_unmap(b.f, t, inv.mapped[i]);
	/* "add" before "delete" makes each delete succeed whether the object exists or not. */
	fprintf(b.f,
		"add chain inet %1$s ws_%2$s\n"
		"flush chain inet %1$s ws_%2$s\n"
		"delete chain inet %1$s ws_%2$s\n"
		"add counter inet %1$s ws_%2$s_allowed\n"
		"delete counter inet %1$s ws_%2$s_allowed\n"
		"add counter inet %1$s ws_%2$s_denied\n"
		"delete counter inet %1$s ws_%2$s_denied\n",
		t, key);
	for (unsigned i = 0; i < 64; i++)
		if (inv.sets & (UINT64_C(1) << i))
			fprintf(b.f, "delete set inet %s ws_%s_d%u\n", t, key, i);
	r = batch_run(n, &b, NULL);
	batch_done(&b);
	return r;
}

/* Pinning */

struct pinned {
	uint32_t addr;
	uint64_t expires; /* seconds left */
};

static int pinned_cmp(const void *a, const void *b)
{
	uint32_t x = ((const struct pinned *)a)->addr, y = ((const struct pinned *)b)->addr;

	return x < y ? -1 : x > y;
}

/* The set's elements, sorted by address: {"elem": {"val": "a.b.c.d", "expires": N, ...}}. */
static int pinned_from_json(json_t *items, struct pinned **ret, size_t *ret_n)
{
	_cleanup_free_ struct pinned *p = NULL;
	json_t *elems = NULL, *item, *el;
	size_t i, n = 0;

	json_array_foreach(items, i, item)
		if (json_object_get(item, "set"))
			elems = json_object_get(json_object_get(item, "set"), "elem");
	if (json_array_size(elems) > 0) {
		p = calloc(json_array_size(elems), sizeof(*p));
		if (!p)
			return -ENOMEM;
	}
	json_array_foreach(elems, i, el) {
		json_t *o = json_object_get(el, "elem");
		const char *val = json_string_value(o ? json_object_get(o, "val") : el);
		struct in_addr a;

		if (!val || inet_pton(AF_INET, val, &a) != 1)
			continue;
		p[n].addr = ntohl(a.s_addr);
		p[n].expires = json_integer_value(json_object_get(o, "expires"));
		n++;
	}
	if (n > 1)
		qsort(p, n, sizeof(*p), pinned_cmp);
	*ret = TAKE_PTR(p);
	*ret_n = n;
	return 0;
}

/* pin_min 0: the TTL alone, floored at NFT_PIN_TTL_MIN so that a client resolving with TTL 0
 * (or a short one) still has the time to connect. pin_min > 0 is the operator's window after an
 * answer and replaces that floor: it is at least as long as any client needs to connect after
 * its lookup (that is why it is asked for), and a window shorter than 30 s is what a test of the
 * window needs. At least 1 s either way: an nft element without a timeout would never go. */
uint32_t nft_pin_timeout(uint32_t ttl, uint32_t pin_min)
{
	uint32_t floor = pin_min > 0 ? pin_min : NFT_PIN_TTL_MIN;

	return MIN(MAX(MAX(ttl, floor), 1u), NFT_PIN_TTL_MAX);
}

/* The longest ttl asked for addrs[i], or 0 when an earlier index already asked for it. */
static uint32_t pin_ttl(const uint32_t *addrs, const uint32_t *ttls, size_t n, size_t i,
			uint32_t pin_min)
{
	uint32_t ttl = ttls[i];

	for (size_t j = 0; j < n; j++) {
		if (addrs[j] != addrs[i])
			continue;
		if (j < i)
			return 0;
		ttl = MAX(ttl, ttls[j]);
	}
	return nft_pin_timeout(ttl, pin_min);
}

static int pin_once(struct nft *n, const char *key, size_t rule_index, const uint32_t *addrs,
		    const uint32_t *ttls, size_t n_addrs, uint32_t pin_min)
{
	_cleanup_json_ json_t *items = NULL;
	_cleanup_free_ struct pinned *have = NULL;
	struct batch b = {};
	size_t n_have = 0, n_changes = 0;
	char cmd[160];
	int r;

	snprintf(cmd, sizeof(cmd), "list set inet %s ws_%s_d%zu", n->table, key, rule_index);
	r = nft_list(n, cmd, false, &items);
	if (r < 0)
		return r;
	r = pinned_from_json(items, &have, &n_have);
	if (r < 0)
		return r;
	r = batch_open(&b);
	if (r < 0)
		return r;
	for (size_t i = 0; i < n_addrs; i++) {
		uint32_t ttl = pin_ttl(addrs, ttls, n_addrs, i, pin_min);
		struct pinned k = { .addr = addrs[i] }, *old;
		char a[16];

		if (ttl == 0)
			continue;
		old = n_have ? bsearch(&k, have, n_have, sizeof(k), pinned_cmp) : NULL;
		if (old && old->expires >= ttl)
			continue;
		addr_format(addrs[i], a);
		/* Re-adding an element keeps its timeout on older kernels and sets the new one on
		 * newer ones: delete and add gives the longer one on both. */
		if (old)
			fprintf(b.f, "delete element inet %s ws_%s_d%zu { %s }\n", n->table, key,
				rule_index, a);
		fprintf(b.f, "add element inet %s ws_%s_d%zu { %s timeout %us }\n", n->table, key,
			rule_index, a, ttl);
		n_changes++;
	}
	r = n_changes > 0 ? batch_run(n, &b, NULL) : 0;
	batch_done(&b);
	return r;
}

static int nft_workspace_pin_locked(struct nft *n, const char *id, size_t rule_index,
				    const uint32_t *addrs, const uint32_t *ttls, size_t n_addrs,
				    uint32_t pin_min)
{
	char key[NFT_ID_MAX + 1];
	int r;

	if (ws_key(id, key) < 0 || rule_index >= NET_POLICY_MAX_RULES)
		return -EINVAL;
	if (n_addrs > NFT_PIN_MAX)
		return -E2BIG;
	if (n_addrs == 0)
		return 0;
	r = pin_once(n, key, rule_index, addrs, ttls, n_addrs, pin_min);
	/* An element that expired between the listing and the delete: once more from the top. */
	if (r == -ENOENT)
		r = pin_once(n, key, rule_index, addrs, ttls, n_addrs, pin_min);
	return r;
}

/* Counters and listing */

/* A counter is read with one NFT_MSG_GETOBJ request over nfnetlink. libnftables (1.0.6) would
 * read the whole ruleset into its cache first: milliseconds per workspace in the table, on the
 * event loop. The kernel answers in the sending call (nfnetlink runs the request in sendmsg),
 * so the non-blocking socket holds the answer and its ack by the time we read. */

struct counter_answer {
	const char *table, *name;
	bool found;
	uint64_t packets;
};

static int counter_data_attr_cb(const struct nlattr *a, void *data)
{
	const struct nlattr **tb = data;
	uint16_t type = mnl_attr_get_type(a);

	if (type == NFTA_COUNTER_PACKETS) {
		if (mnl_attr_validate(a, MNL_TYPE_U64) < 0)
			return MNL_CB_ERROR;
		tb[type] = a;
	}
	return MNL_CB_OK;
}

static int obj_attr_cb(const struct nlattr *a, void *data)
{
	const struct nlattr **tb = data;
	uint16_t type = mnl_attr_get_type(a);
	enum mnl_attr_data_type want;

	switch (type) {
	case NFTA_OBJ_TABLE:
	case NFTA_OBJ_NAME:
		want = MNL_TYPE_NUL_STRING;
		break;
	case NFTA_OBJ_TYPE:
		want = MNL_TYPE_U32;
		break;
	case NFTA_OBJ_DATA:
		want = MNL_TYPE_NESTED;
		break;
	default:
		return MNL_CB_OK;
	}
	if (mnl_attr_validate(a, want) < 0)
		return MNL_CB_ERROR;
	tb[type] = a;
	return MNL_CB_OK;
}

static int counter_cb(const struct nlmsghdr *nlh, void *data)
{
	struct counter_answer *ans = data;
	const struct nlattr *tb[NFTA_OBJ_MAX + 1] = {}, *ctb[NFTA_COUNTER_MAX + 1] = {};

	if (nlh->nlmsg_type != ((NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_NEWOBJ) ||
	    mnl_nlmsg_get_payload_len(nlh) < sizeof(struct nfgenmsg))
		return MNL_CB_OK;
	if (mnl_attr_parse(nlh, sizeof(struct nfgenmsg), obj_attr_cb, tb) < 0)
		goto bad;
	if (!tb[NFTA_OBJ_TABLE] || !tb[NFTA_OBJ_NAME] || !tb[NFTA_OBJ_TYPE] || !tb[NFTA_OBJ_DATA])
		goto bad;
	if (strcmp(mnl_attr_get_str(tb[NFTA_OBJ_TABLE]), ans->table) != 0 ||
	    strcmp(mnl_attr_get_str(tb[NFTA_OBJ_NAME]), ans->name) != 0 ||
	    ntohl(mnl_attr_get_u32(tb[NFTA_OBJ_TYPE])) != NFT_OBJECT_COUNTER)
		goto bad;
	if (mnl_attr_parse_nested(tb[NFTA_OBJ_DATA], counter_data_attr_cb, ctb) < 0 ||
	    !ctb[NFTA_COUNTER_PACKETS])
		goto bad;
	ans->packets = be64toh(mnl_attr_get_u64(ctb[NFTA_COUNTER_PACKETS]));
	ans->found = true;
	return MNL_CB_OK;
bad:
	errno = EBADMSG;
	return MNL_CB_ERROR;
}

/* Reads off what an earlier request left unread (it failed between its send and its ack). */
static void nl_drain(struct nft *n, char *buf)
{
	for (int i = 0; i < NFT_NL_DRAIN_MAX; i++)
		if (mnl_socket_recvfrom(n->nl, buf, NFT_NL_BUFFER_SIZE) < 0 && errno != EINTR)
			return;
}

/* The packets of counter name in `inet <table>`: 0, or the kernel's -errno (-ENOENT: no such
 * table or counter). */
static int counter_packets(struct nft *n, const char *name, uint64_t *ret)
{
	char req[NFT_NL_REQUEST_SIZE];
	_cleanup_free_ char *buf = malloc(NFT_NL_BUFFER_SIZE);
	struct counter_answer ans = { .table = n->table, .name = name };
	struct nlmsghdr *nlh;
	struct nfgenmsg *nfg;
	uint32_t seq;

	if (!buf)
		return -ENOMEM;
	nl_drain(n, buf);
	seq = ++n->seq;
	nlh = mnl_nlmsg_put_header(req);
	nlh->nlmsg_type = (NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_GETOBJ;
	nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK;
	nlh->nlmsg_seq = seq;
	nfg = mnl_nlmsg_put_extra_header(nlh, sizeof(*nfg));
	nfg->nfgen_family = NFPROTO_INET;
	nfg->version = NFNETLINK_V0;
	nfg->res_id = 0;
	mnl_attr_put_strz(nlh, NFTA_OBJ_TABLE, n->table);
	mnl_attr_put_strz(nlh, NFTA_OBJ_NAME, name);
	mnl_attr_put_u32(nlh, NFTA_OBJ_TYPE, htonl(NFT_OBJECT_COUNTER));

	if (mnl_socket_sendto(n->nl, nlh, nlh->nlmsg_len) < 0)
		return negative_errno();
	for (;;) {
		ssize_t len = mnl_socket_recvfrom(n->nl, buf, NFT_NL_BUFFER_SIZE);
		int r;

		if (len < 0) {
			if (errno == EINTR)
				continue;
			return negative_errno(); /* -EAGAIN: no answer, which the kernel never does */
		}
		r = mnl_cb_run(buf, (size_t)len, seq, n->portid, counter_cb, &ans);
		if (r < 0)
			return negative_errno();
		if (r == MNL_CB_STOP)
			break;
	}
	if (!ans.found)
		return -EBADMSG;
	*ret = ans.packets;
	return 0;
}

static int nft_workspace_counters_locked(struct nft *n, const char *id, uint64_t *ret_allowed,
					 uint64_t *ret_denied)
{
	char key[NFT_ID_MAX + 1], allowed_name[NFT_ID_MAX + 16], denied_name[NFT_ID_MAX + 16];
	uint64_t allowed, denied;
	int r;

	if (ws_key(id, key) < 0)
		return -EINVAL;
	snprintf(allowed_name, sizeof(allowed_name), "ws_%s_allowed", key);
	snprintf(denied_name, sizeof(denied_name), "ws_%s_denied", key);
	r = counter_packets(n, allowed_name, &allowed);
	if (r < 0)
		return r;
	r = counter_packets(n, denied_name, &denied);
	if (r < 0)
		return r;
	*ret_allowed = allowed;
	*ret_denied = denied;
	return 0;
}

/* Every counter of the table in one NFT_MSG_GETOBJ dump (the kernel filters by table and
 * type), each ws_<key>_allowed and ws_<key>_denied handed to fn: the cost of a scrape does not
 * grow by a request per workspace. */

struct counter_dump {
	const char *table;
	nft_counter_fn fn;
	void *userdata;
};

static int counter_dump_cb(const struct nlmsghdr *nlh, void *data)
{
	struct counter_dump *d = data;
	const struct nlattr *tb[NFTA_OBJ_MAX + 1] = {}, *ctb[NFTA_COUNTER_MAX + 1] = {};
	char name[NFT_ID_MAX + 16], id[NFT_ID_MAX + 1];
	size_t len;
	bool denied;

	if (nlh->nlmsg_type != ((NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_NEWOBJ) ||
	    mnl_nlmsg_get_payload_len(nlh) < sizeof(struct nfgenmsg) ||
	    mnl_attr_parse(nlh, sizeof(struct nfgenmsg), obj_attr_cb, tb) < 0 ||
	    !tb[NFTA_OBJ_TABLE] || !tb[NFTA_OBJ_NAME] || !tb[NFTA_OBJ_TYPE] || !tb[NFTA_OBJ_DATA])
		return MNL_CB_OK;
	if (strcmp(mnl_attr_get_str(tb[NFTA_OBJ_TABLE]), d->table) != 0 ||
	    ntohl(mnl_attr_get_u32(tb[NFTA_OBJ_TYPE])) != NFT_OBJECT_COUNTER ||
	    mnl_attr_parse_nested(tb[NFTA_OBJ_DATA], counter_data_attr_cb, ctb) < 0 ||
	    !ctb[NFTA_COUNTER_PACKETS])
		return MNL_CB_OK;
	snprintf(name, sizeof name, "%s", mnl_attr_get_str(tb[NFTA_OBJ_NAME]));
	len = strlen(name);
	if (len > 8 && strcmp(name + len - 8, "_allowed") == 0) {
		name[len - 8] = '\0';
		denied = false;
	} else if (len > 7 && strcmp(name + len - 7, "_denied") == 0) {
		name[len - 7] = '\0';
		denied = true;
	} else {
		return MNL_CB_OK;
	}
	if (id_from_chain(name, id) == 0)
		d->fn(d->userdata, id, denied,
		      be64toh(mnl_attr_get_u64(ctb[NFTA_COUNTER_PACKETS])));
	return MNL_CB_OK;
}

static int nft_counters_each_locked(struct nft *n, nft_counter_fn fn, void *userdata)
{
	char req[NFT_NL_REQUEST_SIZE];
	_cleanup_free_ char *buf = malloc(NFT_NL_DUMP_BUFFER_SIZE);
	struct counter_dump d = { .table = n->table, .fn = fn, .userdata = userdata };
	struct nlmsghdr *nlh;
	struct nfgenmsg *nfg;
	uint32_t seq;

	if (!buf)
		return -ENOMEM;
	nl_drain(n, buf);
	seq = ++n->seq;
	nlh = mnl_nlmsg_put_header(req);
	nlh->nlmsg_type = (NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_GETOBJ;
	nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
	nlh->nlmsg_seq = seq;
	nfg = mnl_nlmsg_put_extra_header(nlh, sizeof(*nfg));
	nfg->nfgen_family = NFPROTO_INET;
	nfg->version = NFNETLINK_V0;
	nfg->res_id = 0;
	mnl_attr_put_strz(nlh, NFTA_OBJ_TABLE, n->table);
	mnl_attr_put_u32(nlh, NFTA_OBJ_TYPE, htonl(NFT_OBJECT_COUNTER));

	if (mnl_socket_sendto(n->nl, nlh, nlh->nlmsg_len) < 0)
		return negative_errno();
	/* the kernel makes each next part of a dump as the last one is read: never a wait */
	for (;;) {
		ssize_t len = mnl_socket_recvfrom(n->nl, buf, NFT_NL_DUMP_BUFFER_SIZE);
		int r;

		if (len < 0) {
			if (errno == EINTR)
				continue;
			return negative_errno();
		}
		r = mnl_cb_run(buf, (size_t)len, seq, n->portid, counter_dump_cb, &d);
		if (r < 0)
			return errno == ENOENT ? 0 : negative_errno(); /* no table yet: none */
		if (r == MNL_CB_STOP)
			return 0;
	}
}

static int nft_workspace_list_locked(struct nft *n, char ***ret_ids)
{
	_cleanup_json_ json_t *items = NULL;
	char **ids = NULL;
	size_t i;
	json_t *item;
	int r;

	/* Chains only (every inet table's: the listing takes no table), so no rule is read. */
	r = nft_list(n, "list chains inet", true, &items);
	if (r < 0 && r != -ENOENT)
		return r;
	ids = calloc(1, sizeof(char *));
	if (!ids)
		return -ENOMEM;
	json_array_foreach(items, i, item) {
		json_t *chain = json_object_get(item, "chain");
		const char *name = json_string_value(json_object_get(chain, "name"));
		const char *table = json_string_value(json_object_get(chain, "table"));
		char id[NFT_ID_MAX + 1];

		if (!name || !table || strcmp(table, n->table) != 0 || id_from_chain(name, id) < 0)
			continue;
		r = strv_push(&ids, id);
		if (r < 0) {
			strv_free(ids);
			return r;
		}
	}
	*ret_ids = ids;
	return 0;
}

/* Locked: the loop (pins, counters, policies) and worker threads (a workspace's objects made
 * and removed) share the context and the socket. */

int nft_base_ensure(struct nft *n, const struct nft_base *b, struct station_error *e)
{
	pthread_mutex_lock(&n->lock);
	int r = nft_base_ensure_locked(n, b, e);
	pthread_mutex_unlock(&n->lock);
	return r;
}

int nft_blocked_update(struct nft *n, const struct nft_base *b, struct station_error *e)
{
	pthread_mutex_lock(&n->lock);
	int r = nft_blocked_update_locked(n, b, e);
	pthread_mutex_unlock(&n->lock);
	return r;
}

void nft_set_proxy(struct nft *n, uint32_t addr, uint16_t port, bool restricted)
{
	pthread_mutex_lock(&n->lock);
	n->proxy_addr = addr;
	n->proxy_port = port;
	n->proxy_restricted = restricted;
	pthread_mutex_unlock(&n->lock);
}

int nft_base_remove(struct nft *n)
{
	pthread_mutex_lock(&n->lock);
	int r = nft_base_remove_locked(n);
	pthread_mutex_unlock(&n->lock);
	return r;
}

int nft_workspace_apply(struct nft *n, const char *id, uint32_t addr,
			const struct net_policy *policy, struct station_error *e)
{
	pthread_mutex_lock(&n->lock);
	int r = nft_workspace_apply_locked(n, id, addr, policy, e);
	pthread_mutex_unlock(&n->lock);
	return r;
}

int nft_workspace_remove(struct nft *n, const char *id, uint32_t addr)
{
	pthread_mutex_lock(&n->lock);
	int r = nft_workspace_remove_locked(n, id, addr);
	pthread_mutex_unlock(&n->lock);
	return r;
}

int nft_workspace_pin(struct nft *n, const char *id, size_t rule_index, const uint32_t *addrs,
		      const uint32_t *ttls, size_t n_addrs, uint32_t pin_min)
{
	pthread_mutex_lock(&n->lock);
	int r = nft_workspace_pin_locked(n, id, rule_index, addrs, ttls, n_addrs, pin_min);
	pthread_mutex_unlock(&n->lock);
	return r;
}

int nft_workspace_counters(struct nft *n, const char *id, uint64_t *ret_allowed,
			   uint64_t *ret_denied)
{
	pthread_mutex_lock(&n->lock);
	int r = nft_workspace_counters_locked(n, id, ret_allowed, ret_denied);
	pthread_mutex_unlock(&n->lock);
	return r;
}

int nft_counters_each(struct nft *n, nft_counter_fn fn, void *userdata)
{
	pthread_mutex_lock(&n->lock);
	int r = nft_counters_each_locked(n, fn, userdata);
	pthread_mutex_unlock(&n->lock);
	return r;
}

int nft_workspace_list(struct nft *n, char ***ret_ids)
{
	pthread_mutex_lock(&n->lock);
	int r = nft_workspace_list_locked(n, ret_ids);
	pthread_mutex_unlock(&n->lock);
	return r;
}
