/* SPDX-License-Identifier: MIT */
#pragma once

/* DNS messages (RFC 1035), only what the workspace resolver needs: read the question of a
 * query (and tell a plain query from one carrying more), build the query we ask upstream from
 * that question alone, read the address records and TTLs of an answer, make it the answer to
 * the client's query, build a short reply (an error rcode, an empty or a truncated answer).
 * The input is hostile (a sandbox sends queries; an upstream may be spoofed): every length and
 * pointer is bounded, compression loops end, nothing reads past len. */

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

#define DNS_TYPE_OPT 41
#define DNS_UDP_PLAIN 512 /* what a client without EDNS takes over UDP (RFC 1035) */
/* The size we advertise upstream: no IP fragments (DNS flag day 2020). */
#define DNS_UDP_PAYLOAD 1232

#define DNS_RCODE_NOERROR 0
#define DNS_RCODE_FORMERR 1
#define DNS_RCODE_SERVFAIL 2
#define DNS_RCODE_NXDOMAIN 3
#define DNS_RCODE_REFUSED 5

struct dns_question {
	uint16_t id;
	uint16_t flags;
	char name[DNS_NAME_MAX + 1]; /* lower case, no final dot; "" for the root */
	uint16_t qtype, qclass;
	size_t end;	   /* offset just past the question in the message */
	bool edns;	   /* a query: it carried an OPT record */
	uint16_t udp_size; /* a query with edns: the UDP payload size it takes (at least 512) */
};

/* A query: QR clear, opcode QUERY, a question whose name reads. Returns 0 for a plain query
 * (exactly one question, no answer or authority records, no additional record but one OPT),
 * DNS_RCODE_FORMERR when the first question was read (into ret) but the rest is not plain (a
 * resolver answers FORMERR and forwards nothing), -EBADMSG otherwise. */
int dns_parse_query(const uint8_t *msg, size_t len, struct dns_question *ret);

/* The query we ask upstream for q: our id, RD and no other flag, q's name (as parsed), type and
 * class, and an OPT record of our own (UDP payload DNS_UDP_PAYLOAD, no options, DO clear);
 * nothing else of the client's message. Returns its length or -ENOBUFS. */
int dns_build_query(const struct dns_question *q, uint16_t id, uint8_t *buf, size_t size);

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
/* The same with TC set: the answer did not fit what the client takes over UDP. */
int dns_build_truncated(const struct dns_question *q, const uint8_t *query, size_t query_len,
			uint8_t rcode, uint8_t *buf, size_t size);

/* Makes msg, the upstream's answer to the query we built for q (checked by the caller: its
 * question is q's and ends at q->end), the answer to the client's query: q's id and RD bit,
 * the question spelled as the client spelled it, and the answer's OPT record left out when q
 * had none (when it is the last record, where servers put it). Returns the new length (<= len). */
size_t dns_relay_answer(const struct dns_question *q, const uint8_t *query, uint8_t *msg,
			size_t len);
