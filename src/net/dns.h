/* SPDX-License-Identifier: MIT */
#pragma once

/* DNS messages (RFC 1035), only what the workspace resolver needs: read the question of a
 * query, read the address records and TTLs of an answer, build a short reply (an error rcode or
 * an empty answer). The input is hostile (a sandbox sends queries; an upstream may be spoofed):
 * every length and pointer is bounded, compression loops end, nothing reads past len. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define DNS_MAX_MESSAGE 4096 /* what we read or relay over UDP */
#define DNS_NAME_MAX 255     /* presentation form, without the final dot, plus NUL */
#define DNS_MAX_ADDRS 32

#define DNS_TYPE_A 1
#define DNS_TYPE_CNAME 5
#define DNS_TYPE_AAAA 28
#define DNS_CLASS_IN 1

#define DNS_RCODE_NOERROR 0
#define DNS_RCODE_SERVFAIL 2
#define DNS_RCODE_NXDOMAIN 3
#define DNS_RCODE_REFUSED 5

struct dns_question {
	uint16_t id;
	uint16_t flags;
	char name[DNS_NAME_MAX + 1]; /* lower case, no final dot; "" for the root */
	uint16_t qtype, qclass;
	size_t end; /* offset just past the question in the message */
};

/* A query: QR clear, opcode QUERY, exactly one question. -EBADMSG otherwise. */
int dns_parse_query(const uint8_t *msg, size_t len, struct dns_question *ret);

struct dns_answer {
	uint16_t id;
	uint8_t rcode;
	bool truncated;
	struct dns_question q;	       /* the echoed question */
	uint32_t addrs[DNS_MAX_ADDRS]; /* A records in the answer section, host byte order */
	uint32_t ttls[DNS_MAX_ADDRS];
	size_t n_addrs;
};

/* A response (QR set) to a query with one question; A records beyond DNS_MAX_ADDRS are left
 * out. -EBADMSG when malformed. */
int dns_parse_response(const uint8_t *msg, size_t len, struct dns_answer *ret);

/* A reply to the query q (its id, its RD bit, its question echoed) with rcode and no records,
 * into buf; returns its length or -ENOBUFS. */
int dns_build_reply(const struct dns_question *q, const uint8_t *query, size_t query_len,
		    uint8_t rcode, uint8_t *buf, size_t size);
