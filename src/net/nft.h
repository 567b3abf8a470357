/* SPDX-License-Identifier: MIT */
#pragma once

/* The workspaces' firewall: nftables tables of ours, `inet <table>` and `bridge <table>`,
 * written through libnftables (no `nft` process; counters are read over nfnetlink). Every
 * change is one transaction (nft_run_cmd_from_buffer of a batch): it applies whole or not at
 * all.
 *
 * Base (nft_base_ensure), for the bridge B with gateway G and range R:
 *   forward hook: from B (iifname B): established/related accepted; IPv6 dropped; ICMP
 *     redirects dropped; `ip saddr vmap @workspaces` jumps to the workspace's chain; a source
 *     no workspace holds is dropped. Towards B (oifname B) only established/related passes:
 *     nothing outside opens a connection to a workspace.
 *   input hook: from B: established/related accepted; udp and tcp port 53 to G (the resolver)
 *     accepted; unless the worker class is open, what is for one of this host's addresses
 *     jumps through `ip saddr vmap @workspaces` to the sender's chain (which denies it, counted
 *     and logged), everything else is dropped.
 *   postrouting (nat): from R out of any interface but B: masquerade.
 *   Sets: blocked (flags interval): every class of blocked.h not in b->allow, the worker's
 *     addresses, connected networks and gateways as b->host says (net_blocked_compute()).
 *     fenced (flags interval): the part of blocked that is the worker's own (blocked.h,
 *     NET_CLASSES_FENCED), which no cidr rule opens.
 *     nft_blocked_update() replaces their elements alone, in one transaction.
 *   `bridge <table>`, for what never reaches the inet hooks (bridged frames): a workspace's port
 *     (set ports; net.h's "sv<8 hex of the address>") sends IPv4 and ARP from its own address
 *     only (set bound: ifname . ipv4_addr) and nothing but IPv4 and ARP; frames from or to such
 *     a port are not bridged to another port unless the workspaces class is open. Other ports are left
 *     alone.
 * Idempotent: called at every controller start; the per-workspace objects survive it.
 *
 * Per workspace (key: the id with '-' as '_'; chain ws_<key>, counters ws_<key>_allowed and
 * ws_<key>_denied, sets ws_<key>_d<i> for domain rule i), entered by the vmap element
 * <addr> : jump ws_<key>, its port bound to <addr> in the bridge table:
 *   first (both modes): `fib daddr type local` (a packet for this host: only the input hook
 *     jumps here with one) counted as denied, logged, dropped.
 *   bridge: daddr in @blocked: counted as denied, logged, dropped; else new connections
 *     counted as allowed and accepted.
 *   restricted (policy): cidr rules first (proto and ports as the rule says; a listed cidr
 *     wins over @blocked but never over @fenced, dropped before them); then @blocked dropped; then each domain rule i: daddr in
 *     @ws_<key>_d<i> (with its proto and ports) accepted; everything else counted as denied,
 *     logged (`log group <log_group> prefix "<id> "`, rate limited) and dropped.
 * The allowed counter counts new connections (ct state new) accepted. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "basic/error.h"
#include "net/blocked.h"
#include "net/policy.h"

struct nft;

struct nft_base {
	const char *bridge;
	uint32_t gateway; /* host byte order */
	uint32_t range;	  /* network address */
	unsigned prefix;
	uint16_t log_group;
	uint32_t allow;		     /* NET_CLASS_BIT()s of the classes the operator opened */
	const struct net_host *host; /* the worker's addresses and routes; NULL: none known */
};

/* table: the name of our table (family inet). Opening does not touch the ruleset. */
int nft_open(const char *table, struct nft **ret, struct station_error *e);
void nft_close(struct nft *n);

/* Makes or refreshes the base chains and sets (above). Error messages carry libnftables' own
 * words (no nf_tables in the kernel, no permission). The handle keeps b->log_group for the
 * workspace chains it writes afterwards. */
int nft_base_ensure(struct nft *n, const struct nft_base *b, struct station_error *e);
/* Replaces the elements of the set blocked with what b says now (b as nft_base_ensure() had
 * it, its host read again), in one transaction: no packet sees the set half made. */
int nft_blocked_update(struct nft *n, const struct nft_base *b, struct station_error *e);
/* The operator's proxy (--workspace-proxy): the workspace chains written afterwards accept new
 * TCP connections to addr:port exactly, counted as allowed, before any denial (a blocked class,
 * the worker's own addresses): in bridge chains, and in restricted ones when restricted. port
 * 0: none. */
void nft_set_proxy(struct nft *n, uint32_t addr, uint16_t port, bool restricted);
/* Removes both tables (every workspace's objects with them); absent tables are no error. */
int nft_base_remove(struct nft *n);

/* Makes or replaces, in one transaction, the workspace's chain, counters, domain sets and vmap
 * element. policy NULL: bridge; else restricted with that policy. Replacing keeps the counters
 * and empties the domain sets (the resolver fills them again). */
int nft_workspace_apply(struct nft *n, const char *id, uint32_t addr,
			const struct net_policy *policy, struct station_error *e);
/* Removes what nft_workspace_apply made; idempotent (absent objects are not an error). addr 0:
 * not known (reconcile of a chain no record names): the map elements that jump to the chain
 * are found in the map. */
int nft_workspace_remove(struct nft *n, const char *id, uint32_t addr);
/* The timeout in seconds of an address answered with ttl seconds when the operator keeps
 * answers at least pin_min seconds: max(ttl, pin_min), where pin_min 0 means a 30 s floor (the
 * TTL alone, as a client needs a moment to connect after its lookup); at most 1 day, at least
 * 1 s. */
uint32_t nft_pin_timeout(uint32_t ttl, uint32_t pin_min);
/* Adds addrs[i] to the set of domain rule rule_index with timeout nft_pin_timeout(ttls[i],
 * pin_min) seconds (an address already there gets the longer of the two: it is re-added only
 * when the new timeout is longer than what it has left). At most 512 addresses (-E2BIG);
 * -ENOENT when the rule has no set. */
int nft_workspace_pin(struct nft *n, const char *id, size_t rule_index, const uint32_t *addrs,
		      const uint32_t *ttls, size_t n_addrs, uint32_t pin_min);
/* The packet counts of the workspace's counters ws_<key>_allowed and ws_<key>_denied, asked of
 * the kernel by name (nfnetlink, not libnftables: no ruleset cache, so the cost does not grow
 * with the table). -ENOENT when the table or the counters do not exist; the out-parameters are
 * set on success only. */
int nft_workspace_counters(struct nft *n, const char *id, uint64_t *ret_allowed,
			   uint64_t *ret_denied);
/* Every workspace's two counters at once (one nfnetlink dump of the table's counter objects):
 * fn is called for each, with the workspace's id, which of the two (denied or allowed) and its
 * packets. A table that does not exist yet gives none. */
typedef void (*nft_counter_fn)(void *userdata, const char *id, bool denied, uint64_t packets);
int nft_counters_each(struct nft *n, nft_counter_fn fn, void *userdata);
/* The ids that have a chain in the table (from the chain names), NULL-terminated (strv_free()).
 * A table that does not exist yet gives an empty list. */
int nft_workspace_list(struct nft *n, char ***ret_ids);
