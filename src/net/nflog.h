/* SPDX-License-Identifier: MIT */
#pragma once

/* Packets that nftables logged with `log group G` (nfnetlink_log, libmnl): the denials of a
 * restricted workspace's egress policy. The socket is non-blocking; the caller polls it and
 * calls nflog_read() when it is readable. */

#include <stdint.h>

struct nflog;

struct nflog_packet {
	const char *prefix; /* the rule's log prefix ("" when none) */
	uint32_t saddr;	    /* IPv4, host byte order */
	uint32_t daddr;
	uint8_t proto;	/* IPPROTO_* */
	uint16_t dport; /* tcp and udp; 0 otherwise */
};

typedef void (*nflog_fn)(void *userdata, const struct nflog_packet *p);

/* Binds group (copy mode: the first 64 bytes of each packet). */
int nflog_open(uint16_t group, struct nflog **ret);
int nflog_fd(const struct nflog *l);
/* Reads what is queued, calling fn once per packet; returns 0, or -errno on a socket error
 * (-ENOBUFS: the kernel dropped messages; the caller may go on reading). */
int nflog_read(struct nflog *l, nflog_fn fn, void *userdata);
void nflog_close(struct nflog *l);
