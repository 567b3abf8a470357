/* SPDX-License-Identifier: MIT */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "basic/cleanup.h"
#include "net/dns.h"

/* Each parse gets a heap copy of exactly len bytes, so that a read past the end is caught by
 * AddressSanitizer in the sanitized build. */
static int parse_query(const uint8_t *msg, size_t len, struct dns_question *q)
{
	_cleanup_free_ uint8_t *copy = malloc(len ? len : 1);
	cr_assert_not_null(copy);
	memcpy(copy, msg, len);
	return dns_parse_query(copy, len, q);
}

static int parse_response(const uint8_t *msg, size_t len, struct dns_answer *a)
{
	_cleanup_free_ uint8_t *copy = malloc(len ? len : 1);
	cr_assert_not_null(copy);
	memcpy(copy, msg, len);
	return dns_parse_response(copy, len, a);
}

/* Wire messages written out byte by byte, a line per field or record. */
/* clang-format off */
/* www.Example.COM IN A, id 0x1234, RD */
static const uint8_t query_a[] = {
	0x12, 0x34, 0x01, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, /* header */
	3, 'w', 'w', 'w', 7, 'E', 'x', 'a', 'm', 'p', 'l', 'e', 3, 'C', 'O', 'M', 0,
	0x00, 0x01, 0x00, 0x01,
};

/* The answer to query_a: www.example.com CNAME edge.cdn.net (TTL 3600), then edge.cdn.net A
 * 203.0.113.10 (TTL 60) and A 203.0.113.11 (TTL 300), owners compressed. */
static const uint8_t response_cname[] = {
	0x12, 0x34, 0x81, 0x80, 0x00, 0x01, 0x00, 0x03, 0x00, 0x00, 0x00, 0x00,
	/* question, offset 12 */
	3, 'w', 'w', 'w', 7, 'e', 'x', 'a', 'm', 'p', 'l', 'e', 3, 'c', 'o', 'm', 0, 0x00, 0x01,
	0x00, 0x01,
	/* offset 33: CNAME, its target at offset 45 */
	0xc0, 0x0c, 0x00, 0x05, 0x00, 0x01, 0x00, 0x00, 0x0e, 0x10, 0x00, 14, 4, 'e', 'd', 'g',
	'e', 3, 'c', 'd', 'n', 3, 'n', 'e', 't', 0,
	/* A records of the target */
	0xc0, 45, 0x00, 0x01, 0x00, 0x01, 0x00, 0x00, 0x00, 60, 0x00, 4, 203, 0, 113, 10, /* */
	0xc0, 45, 0x00, 0x01, 0x00, 0x01, 0x00, 0x00, 0x01, 0x2c, 0x00, 4, 203, 0, 113, 11,
};

/* a.test A: three A records with different TTLs (one with the high bit set, read as 0), an
 * AAAA, an A of class CH and an A with rdlength 5, the last three skipped. */
static const uint8_t response_ttls[] = {
	0xab, 0xcd, 0x81, 0x80, 0x00, 0x01, 0x00, 0x06, 0x00, 0x00, 0x00, 0x00,
	/* question */
	1, 'a', 4, 't', 'e', 's', 't', 0, 0x00, 0x01, 0x00, 0x01,
	/* A 198.51.100.1 TTL 10 */
	0xc0, 0x0c, 0x00, 0x01, 0x00, 0x01, 0x00, 0x00, 0x00, 10, 0x00, 4, 198, 51, 100, 1,
	/* AAAA 2001:db8::1 */
	0xc0, 0x0c, 0x00, 28, 0x00, 0x01, 0x00, 0x00, 0x00, 10, 0x00, 16, 0x20, 0x01, 0x0d,
	0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1,
	/* A 198.51.100.2 TTL 86400 */
	0xc0, 0x0c, 0x00, 0x01, 0x00, 0x01, 0x00, 0x01, 0x51, 0x80, 0x00, 4, 198, 51, 100, 2,
	/* A class CH */
	0xc0, 0x0c, 0x00, 0x01, 0x00, 0x03, 0x00, 0x00, 0x00, 10, 0x00, 4, 198, 51, 100, 9,
	/* A with rdlength 5 */
	0xc0, 0x0c, 0x00, 0x01, 0x00, 0x01, 0x00, 0x00, 0x00, 10, 0x00, 5, 198, 51, 100, 9, 9,
	/* A 198.51.100.3 TTL 0x80000000 */
	0xc0, 0x0c, 0x00, 0x01, 0x00, 0x01, 0x80, 0x00, 0x00, 0x00, 0x00, 4, 198, 51, 100, 3,
};

/* clang-format on */

/* A mutable copy of a message, to break one byte of it. */
struct msg {
	uint8_t b[1024];
	size_t len;
};

static struct msg msg_of(const uint8_t *m, size_t len)
{
	struct msg r = { .len = len };
	cr_assert_leq(len, sizeof(r.b));
	memcpy(r.b, m, len);
	return r;
}

#define MSG(a) msg_of(a, sizeof(a))

/* A query for the name given as wire labels (ending with its 0). */
static struct msg query_for(const uint8_t *name, size_t name_len)
{
	struct msg r = MSG(query_a);
	r.len = 12;
	memcpy(r.b + r.len, name, name_len);
	r.len += name_len;
	memcpy(r.b + r.len, "\x00\x01\x00\x01", 4);
	r.len += 4;
	return r;
}

/* n labels of the given lengths, filled with 'x'. */
static struct msg query_labels(const unsigned *lens, size_t n)
{
	uint8_t name[600];
	size_t len = 0;

	for (size_t i = 0; i < n; i++) {
		name[len++] = (uint8_t)lens[i];
		memset(name + len, 'x', lens[i]);
		len += lens[i];
	}
	name[len++] = 0;
	return query_for(name, len);
}

Test(dns_query, good)
{
	struct dns_question q;

	cr_assert_eq(parse_query(query_a, sizeof(query_a), &q), 0);
	cr_assert_eq(q.id, 0x1234);
	cr_assert_eq(q.flags, 0x0100);
	cr_assert_str_eq(q.name, "www.example.com");
	cr_assert_eq(q.qtype, DNS_TYPE_A);
	cr_assert_eq(q.qclass, DNS_CLASS_IN);
	cr_assert_eq(q.end, sizeof(query_a));
}

Test(dns_query, root_and_trailing_records)
{
	static const uint8_t root[] = { 0 };
	struct msg m = query_for(root, sizeof(root));
	struct dns_question q;

	cr_assert_eq(parse_query(m.b, m.len, &q), 0);
	cr_assert_str_eq(q.name, "");
	cr_assert_eq(q.end, 17);

	/* An EDNS OPT record after the question (arcount 1): its size is noted. */
	m = MSG(query_a);
	m.b[11] = 1;
	memcpy(m.b + m.len, "\x00\x00\x29\x04\xd0\x00\x00\x00\x00\x00\x00", 11);
	m.len += 11;
	cr_assert_eq(parse_query(m.b, m.len, &q), 0);
	cr_assert_eq(q.end, sizeof(query_a));
	cr_assert(q.edns);
	cr_assert_eq(q.udp_size, 1232);
}

Test(dns_query, truncated_at_every_offset)
{
	struct dns_question q;

	for (size_t len = 0; len < sizeof(query_a); len++)
		cr_assert_eq(parse_query(query_a, len, &q), -EBADMSG, "len %zu", len);
}

Test(dns_query, header_checks)
{
	struct dns_question q;
	struct msg m;

	m = MSG(query_a);
	m.b[2] |= 0x80; /* QR */
	cr_assert_eq(parse_query(m.b, m.len, &q), -EBADMSG);

	m = MSG(query_a);
	m.b[2] |= 0x10; /* opcode 2 (STATUS) */
	cr_assert_eq(parse_query(m.b, m.len, &q), -EBADMSG);

	m = MSG(query_a);
	m.b[5] = 0; /* no question */
	cr_assert_eq(parse_query(m.b, m.len, &q), -EBADMSG);

	/* Two questions, the second one whole: the first is read, the message gets FORMERR */
	m = MSG(query_a);
	m.b[5] = 2;
	memcpy(m.b + m.len, "\xc0\x0c\x00\x01\x00\x01", 6);
	m.len += 6;
	cr_assert_eq(parse_query(m.b, m.len, &q), DNS_RCODE_FORMERR);
	cr_assert_str_eq(q.name, "www.example.com");

	m = MSG(query_a);
	m.b[4] = 1; /* 257 questions */
	cr_assert_eq(parse_query(m.b, m.len, &q), DNS_RCODE_FORMERR);
}

/* Records after the question: one OPT is all a plain query carries (its options and DO bit are
 * never read, the resolver sends its own); anything else makes it a FORMERR. */
Test(dns_query, records_beyond_the_question)
{
	static const uint8_t opt[] = { 0, 0,	41,   0x10, 0x00, 0,   0,   0x80, 0,  0,
				       8, 0xfd, 0xe9, 0,    4,	  'l', 'e', 'a',  'k' };
	static const uint8_t txt[] = { 0xc0, 0x0c, 0, 16, 0,   1,   0,	 0,  0,
				       0,    0,	   5, 4,  'l', 'e', 'a', 'k' };
	struct dns_question q;
	struct msg m;

	/* positive control: OPT (size 4096, DO, an option of code 65001) */
	m = MSG(query_a);
	m.b[11] = 1;
	memcpy(m.b + m.len, opt, sizeof(opt));
	m.len += sizeof(opt);
	cr_assert_eq(parse_query(m.b, m.len, &q), 0);
	cr_assert(q.edns);
	cr_assert_eq(q.udp_size, 4096);
	cr_assert_eq(q.end, sizeof(query_a));
	/* a payload size below 512 counts as 512 */
	m.b[sizeof(query_a) + 3] = 0;
	m.b[sizeof(query_a) + 4] = 100;
	cr_assert_eq(parse_query(m.b, m.len, &q), 0);
	cr_assert_eq(q.udp_size, DNS_UDP_PLAIN);
	/* without OPT: no EDNS */
	cr_assert_eq(parse_query(query_a, sizeof(query_a), &q), 0);
	cr_assert_not(q.edns);

	/* the OPT record's data running past the end */
	m.len--;
	cr_assert_eq(parse_query(m.b, m.len, &q), DNS_RCODE_FORMERR);
	m.len++;
	/* an OPT owner other than the root */
	m.b[sizeof(query_a)] = 0xc0;
	cr_assert_eq(parse_query(m.b, m.len, &q), DNS_RCODE_FORMERR);

	/* a TXT record in the additional section, alone or after the OPT */
	m = MSG(query_a);
	m.b[11] = 1;
	memcpy(m.b + m.len, txt, sizeof(txt));
	m.len += sizeof(txt);
	cr_assert_eq(parse_query(m.b, m.len, &q), DNS_RCODE_FORMERR);
	m = MSG(query_a);
	m.b[11] = 2;
	memcpy(m.b + m.len, opt, sizeof(opt));
	m.len += sizeof(opt);
	memcpy(m.b + m.len, txt, sizeof(txt));
	m.len += sizeof(txt);
	cr_assert_eq(parse_query(m.b, m.len, &q), DNS_RCODE_FORMERR);

	/* the same record as an answer or an authority record */
	for (size_t count = 6; count <= 8; count += 2) {
		m = MSG(query_a);
		m.b[count + 1] = 1;
		memcpy(m.b + m.len, txt, sizeof(txt));
		m.len += sizeof(txt);
		cr_assert_eq(parse_query(m.b, m.len, &q), DNS_RCODE_FORMERR, "count at %zu", count);
		cr_assert_str_eq(q.name, "www.example.com");
	}
}

/* The query asked upstream holds the parsed question and nothing of the client's but it. */
Test(dns_query, built_from_the_question_alone)
{
	/* clang-format off */
	static const uint8_t want[] = {
		0xbe, 0xef, 0x01, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01,
		3, 'w', 'w', 'w', 7, 'e', 'x', 'a', 'm', 'p', 'l', 'e', 3, 'c', 'o', 'm', 0,
		0x00, 0x01, 0x00, 0x01,
		0, 0x00, 41, 0x04, 0xd0, 0, 0, 0, 0, 0x00, 0x00, /* OPT 1232, DO clear, no data */
	};
	static const uint8_t opt[] = { 0, 0, 41, 0x10, 0x00, 0, 0, 0x80, 0, 0, 8,
				       0xfd, 0xe9, 0, 4, 'l', 'e', 'a', 'k' };
	/* clang-format on */
	uint8_t buf[512];
	struct dns_question q, back;
	struct msg m = MSG(query_a);
	int n;

	m.b[2] = 0x01 | 0x04 | 0x02; /* RD, AA, TC */
	m.b[3] = 0x30;		     /* AD, CD */
	m.b[11] = 1;
	memcpy(m.b + m.len, opt, sizeof(opt));
	m.len += sizeof(opt);
	cr_assert_eq(parse_query(m.b, m.len, &q), 0);
	n = dns_build_query(&q, 0xbeef, buf, sizeof(buf));
	cr_assert_eq(n, (int)sizeof(want));
	cr_assert_eq(memcmp(buf, want, sizeof(want)), 0);
	cr_assert_eq(dns_parse_query(buf, (size_t)n, &back), 0);
	cr_assert_str_eq(back.name, "www.example.com");
	cr_assert_eq(back.udp_size, DNS_UDP_PAYLOAD);
	cr_assert_eq(dns_build_query(&q, 0xbeef, buf, sizeof(want) - 1), -ENOBUFS);

	/* the root */
	static const uint8_t root[] = { 0 };
	m = query_for(root, sizeof(root));
	cr_assert_eq(parse_query(m.b, m.len, &q), 0);
	n = dns_build_query(&q, 1, buf, sizeof(buf));
	cr_assert_eq(n, 12 + 1 + 4 + 11);
	cr_assert_eq(dns_parse_query(buf, (size_t)n, &back), 0);
	cr_assert_str_eq(back.name, "");
}

/* An upstream answer to the query we built becomes the answer to the client's query. */
Test(dns_reply, relayed_answer)
{
	static const uint8_t opt[] = { 0, 0, 41, 0x04, 0xd0, 0, 0, 0, 0, 0, 0 };
	struct dns_question q;
	struct dns_answer a;
	struct msg up = MSG(response_cname), m;
	size_t n;

	/* the upstream's answer: our id, RD, our OPT last */
	up.b[0] = 0xbe;
	up.b[1] = 0xef;
	up.b[11] = 1;
	memcpy(up.b + up.len, opt, sizeof(opt));
	up.len += sizeof(opt);

	/* a client without EDNS, RD clear, its own spelling: the OPT left out */
	m = MSG(query_a);
	m.b[2] = 0;
	cr_assert_eq(parse_query(m.b, m.len, &q), 0);
	struct msg r = up;
	n = dns_relay_answer(&q, m.b, r.b, r.len);
	cr_assert_eq(n, sizeof(response_cname));
	cr_assert_eq(r.b[0], 0x12);
	cr_assert_eq(r.b[1], 0x34);
	cr_assert_eq(r.b[2], 0x80);
	cr_assert_eq(r.b[11], 0);
	cr_assert_eq(memcmp(r.b + 12, query_a + 12, sizeof(query_a) - 12), 0);
	cr_assert_eq(memcmp(r.b + sizeof(query_a), response_cname + sizeof(query_a),
			    sizeof(response_cname) - sizeof(query_a)),
		     0);
	cr_assert_eq(parse_response(r.b, n, &a), 0);
	cr_assert_eq(a.n_addrs, 2);

	/* a client with EDNS: the OPT stays */
	m.b[11] = 1;
	memcpy(m.b + m.len, opt, sizeof(opt));
	m.len += sizeof(opt);
	cr_assert_eq(parse_query(m.b, m.len, &q), 0);
	r = up;
	cr_assert_eq(dns_relay_answer(&q, m.b, r.b, r.len), up.len);
	cr_assert_eq(r.b[11], 1);

	/* an OPT that is not the last record stays, whoever asked */
	m = MSG(query_a);
	cr_assert_eq(parse_query(m.b, m.len, &q), 0);
	r = up;
	r.b[11] = 2;
	memcpy(r.b + r.len, "\xc0\x0c\x00\x01\x00\x01\x00\x00\x00\x01\x00\x04\x01\x02\x03\x04", 16);
	r.len += 16;
	cr_assert_eq(dns_relay_answer(&q, m.b, r.b, r.len), up.len + 16);
	cr_assert_eq(r.b[11], 2);
}

Test(dns_reply, truncated)
{
	uint8_t buf[512];
	struct dns_question q;
	struct dns_answer a;
	int n;

	cr_assert_eq(parse_query(query_a, sizeof(query_a), &q), 0);
	n = dns_build_truncated(&q, query_a, sizeof(query_a), DNS_RCODE_NOERROR, buf, sizeof(buf));
	cr_assert_eq(n, (int)sizeof(query_a));
	cr_assert_eq(buf[2], 0x83); /* QR, TC, RD */
	cr_assert_eq(parse_response(buf, (size_t)n, &a), 0);
	cr_assert(a.truncated);
	cr_assert_eq(a.n_addrs, 0);
}

Test(dns_query, label_bytes)
{
	static const uint8_t dot[] = { 3, 'a', '.', 'b', 4, 't', 'e', 's', 't', 0 };
	static const uint8_t nul[] = { 3, 'a', 0, 'b', 4, 't', 'e', 's', 't', 0 };
	static const uint8_t ctl[] = { 3, 'a', 0x01, 'b', 4, 't', 'e', 's', 't', 0 };
	static const uint8_t space[] = { 3, 'a', ' ', 'b', 4, 't', 'e', 's', 't', 0 };
	static const uint8_t high[] = { 3, 'a', 0xc3, 'b', 4, 't', 'e', 's', 't', 0 };
	static const uint8_t ok[] = { 3, 'A', '_', 'b', 4, 'T', 'e', 's', 't', 0 };
	const uint8_t *bad[] = { dot, nul, ctl, space, high };
	struct dns_question q;
	struct msg m;

	for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
		m = query_for(bad[i], sizeof(dot));
		cr_assert_eq(parse_query(m.b, m.len, &q), -EBADMSG, "case %zu", i);
	}
	/* the positive control: the same shape with acceptable bytes */
	m = query_for(ok, sizeof(ok));
	cr_assert_eq(parse_query(m.b, m.len, &q), 0);
	cr_assert_str_eq(q.name, "a_b.test");
}

Test(dns_query, label_and_name_lengths)
{
	static const unsigned l63[] = { 63, 4 };
	static const unsigned l64[] = { 64, 4 };
	static const unsigned max[] = { 63, 63, 63, 61 };  /* 255 bytes in wire form */
	static const unsigned over[] = { 63, 63, 63, 62 }; /* 256 */
	static const unsigned far[] = { 63, 63, 63, 63, 63 };
	struct dns_question q;
	struct msg m;

	m = query_labels(l63, ELEMENTSOF(l63));
	cr_assert_eq(parse_query(m.b, m.len, &q), 0);
	cr_assert_eq(strlen(q.name), 63 + 1 + 4);

	m = query_labels(l64, ELEMENTSOF(l64));
	cr_assert_eq(parse_query(m.b, m.len, &q), -EBADMSG);

	m = query_labels(max, ELEMENTSOF(max));
	cr_assert_eq(parse_query(m.b, m.len, &q), 0);
	cr_assert_eq(strlen(q.name), 253);

	m = query_labels(over, ELEMENTSOF(over));
	cr_assert_eq(parse_query(m.b, m.len, &q), -EBADMSG);

	m = query_labels(far, ELEMENTSOF(far));
	cr_assert_eq(parse_query(m.b, m.len, &q), -EBADMSG);

	/* 0x80 and 0x40 label types */
	m = MSG(query_a);
	m.b[12] = 0x83;
	cr_assert_eq(parse_query(m.b, m.len, &q), -EBADMSG);
}

Test(dns_query, pointers)
{
	/* a pointer to itself, and one into the header: a question has nothing before it */
	static const uint8_t self[] = { 0xc0, 12 };
	static const uint8_t header[] = { 0xc0, 0 };
	static const uint8_t forward[] = { 0xc0, 14, 1, 'a', 0 };
	struct dns_question q;
	struct msg m;

	m = query_for(self, sizeof(self));
	cr_assert_eq(parse_query(m.b, m.len, &q), -EBADMSG);
	m = query_for(header, sizeof(header));
	cr_assert_eq(parse_query(m.b, m.len, &q), -EBADMSG);
	m = query_for(forward, sizeof(forward));
	cr_assert_eq(parse_query(m.b, m.len, &q), -EBADMSG);

	/* into the header, where the bytes read as a name (id 0: the root), which the upstream
	 * would read differently once the id is rewritten */
	m = query_for(header, sizeof(header));
	m.b[0] = m.b[1] = 0;
	cr_assert_eq(parse_query(m.b, m.len, &q), -EBADMSG);
}

Test(dns_response, cname_chain)
{
	struct dns_answer a;

	cr_assert_eq(parse_response(response_cname, sizeof(response_cname), &a), 0);
	cr_assert_eq(a.id, 0x1234);
	cr_assert_eq(a.rcode, DNS_RCODE_NOERROR);
	cr_assert_eq(a.truncated, false);
	cr_assert_str_eq(a.q.name, "www.example.com");
	cr_assert_eq(a.q.qtype, DNS_TYPE_A);
	cr_assert_eq(a.q.qclass, DNS_CLASS_IN);
	cr_assert_eq(a.n_addrs, 2);
	cr_assert_eq(a.addrs[0], 0xcb00710a);
	cr_assert_eq(a.ttls[0], 60);
	cr_assert_eq(a.addrs[1], 0xcb00710b);
	cr_assert_eq(a.ttls[1], 300);
}

Test(dns_response, ttls_and_skipped_records)
{
	struct dns_answer a;

	cr_assert_eq(parse_response(response_ttls, sizeof(response_ttls), &a), 0);
	cr_assert_eq(a.id, 0xabcd);
	cr_assert_str_eq(a.q.name, "a.test");
	cr_assert_eq(a.n_addrs, 3);
	cr_assert_eq(a.addrs[0], 0xc6336401);
	cr_assert_eq(a.ttls[0], 10);
	cr_assert_eq(a.addrs[1], 0xc6336402);
	cr_assert_eq(a.ttls[1], 86400);
	cr_assert_eq(a.addrs[2], 0xc6336403);
	cr_assert_eq(a.ttls[2], 0);
}

Test(dns_response, truncated_at_every_offset)
{
	struct dns_answer a;

	for (size_t len = 0; len < sizeof(response_cname); len++)
		cr_assert_eq(parse_response(response_cname, len, &a), -EBADMSG, "len %zu", len);
	for (size_t len = 0; len < sizeof(response_ttls); len++)
		cr_assert_eq(parse_response(response_ttls, len, &a), -EBADMSG, "len %zu", len);
}

Test(dns_response, tc_keeps_whole_records)
{
	struct msg m = MSG(response_cname);
	struct dns_answer a;

	m.b[2] |= 0x02; /* TC */
	m.len -= 3;	/* the last A record cut */
	cr_assert_eq(parse_response(m.b, m.len, &a), 0);
	cr_assert_eq(a.truncated, true);
	cr_assert_eq(a.n_addrs, 1);
	cr_assert_eq(a.addrs[0], 0xcb00710a);
	/* the question itself must still be whole */
	for (size_t len = 0; len < 33; len++)
		cr_assert_eq(parse_response(m.b, len, &a), -EBADMSG, "len %zu", len);
}

Test(dns_response, header_checks)
{
	struct dns_answer a;
	struct msg m;

	m = MSG(response_cname);
	m.b[2] &= 0x7f; /* QR clear */
	cr_assert_eq(parse_response(m.b, m.len, &a), -EBADMSG);

	m = MSG(response_cname);
	m.b[5] = 0;
	cr_assert_eq(parse_response(m.b, m.len, &a), -EBADMSG);

	m = MSG(response_cname);
	m.b[5] = 2;
	cr_assert_eq(parse_response(m.b, m.len, &a), -EBADMSG);

	m = MSG(response_cname);
	m.b[3] = 0x83;
	cr_assert_eq(parse_response(m.b, m.len, &a), 0);
	cr_assert_eq(a.rcode, DNS_RCODE_NXDOMAIN);

	/* ancount larger than what follows */
	m = MSG(response_cname);
	m.b[7] = 4;
	cr_assert_eq(parse_response(m.b, m.len, &a), -EBADMSG);
	m.b[6] = 0xff;
	m.b[7] = 0xff;
	cr_assert_eq(parse_response(m.b, m.len, &a), -EBADMSG);
}

Test(dns_response, rdlength_past_end)
{
	struct msg m = MSG(response_cname);
	struct dns_answer a;

	m.b[m.len - 5] = 5; /* the last A's rdlength: one byte more than there is */
	cr_assert_eq(parse_response(m.b, m.len, &a), -EBADMSG);
	m.b[m.len - 6] = 0xff;
	cr_assert_eq(parse_response(m.b, m.len, &a), -EBADMSG);
}

Test(dns_response, owner_pointers)
{
	struct dns_answer a;
	struct msg m;

	/* the CNAME's owner points at itself */
	m = MSG(response_cname);
	m.b[34] = 33;
	cr_assert_eq(parse_response(m.b, m.len, &a), -EBADMSG);

	/* forward: at the second A record's owner */
	m = MSG(response_cname);
	m.b[34] = 59;
	cr_assert_eq(parse_response(m.b, m.len, &a), -EBADMSG);

	/* past the end */
	m = MSG(response_cname);
	m.b[33] = 0xc3;
	m.b[34] = 0xff;
	cr_assert_eq(parse_response(m.b, m.len, &a), -EBADMSG);

	/* a loop of backward pointers: the CNAME target becomes "edge" then a pointer back to
	 * its own start (45); the A records' owners point at it */
	m = MSG(response_cname);
	m.b[50] = 0xc0;
	m.b[51] = 45;
	cr_assert_eq(parse_response(m.b, m.len, &a), -EBADMSG);

	/* two pointers that point at each other: the first A's owner a pointer to 33, the
	 * CNAME's owner a pointer to 59 */
	m = MSG(response_cname);
	m.b[34] = 59;
	m.b[59] = 0xc0;
	m.b[60] = 33;
	cr_assert_eq(parse_response(m.b, m.len, &a), -EBADMSG);

	/* the positive control: a chain of backward pointers is fine (the CNAME target's
	 * suffix as a pointer to "com" of the question, at 24) */
	m = MSG(response_cname);
	m.b[54] = 0xc0;
	m.b[55] = 24;
	cr_assert_eq(parse_response(m.b, m.len, &a), 0);
	cr_assert_eq(a.n_addrs, 2);
}

Test(dns_response, question_label_checks_apply)
{
	struct msg m = MSG(response_cname);
	struct dns_answer a;

	m.b[14] = '.'; /* "w.w" as one label */
	cr_assert_eq(parse_response(m.b, m.len, &a), -EBADMSG);
}

Test(dns_response, at_most_max_addrs)
{
	struct msg m = MSG(response_ttls);
	struct dns_answer a;
	unsigned n = DNS_MAX_ADDRS + 8;

	m.len = 24;
	m.b[6] = 0;
	m.b[7] = (uint8_t)n;
	for (unsigned i = 0; i < n; i++) {
		uint8_t rr[] = { 0xc0, 0x0c,	   0, 1, 0,  1, 0, 0,
				 0,    (uint8_t)i, 0, 4, 10, 0, 0, (uint8_t)i };
		memcpy(m.b + m.len, rr, sizeof(rr));
		m.len += sizeof(rr);
	}
	cr_assert_eq(parse_response(m.b, m.len, &a), 0);
	cr_assert_eq(a.n_addrs, DNS_MAX_ADDRS);
	cr_assert_eq(a.addrs[DNS_MAX_ADDRS - 1], 0x0a000000 | (DNS_MAX_ADDRS - 1));
	cr_assert_eq(a.ttls[DNS_MAX_ADDRS - 1], DNS_MAX_ADDRS - 1);
}

Test(dns_reply, round_trip)
{
	uint8_t buf[512];
	struct dns_question q;
	struct dns_answer a;
	int n;

	cr_assert_eq(parse_query(query_a, sizeof(query_a), &q), 0);
	n = dns_build_reply(&q, query_a, sizeof(query_a), DNS_RCODE_NXDOMAIN, buf, sizeof(buf));
	cr_assert_eq(n, (int)sizeof(query_a));
	cr_assert_eq(buf[2], 0x81); /* QR, RD */
	cr_assert_eq(buf[3], 0x83); /* RA, NXDOMAIN */
	cr_assert_eq(memcmp(buf + 4, "\x00\x01\x00\x00\x00\x00\x00\x00", 8), 0);
	/* the question is echoed as sent, case included */
	cr_assert_eq(memcmp(buf + 12, query_a + 12, sizeof(query_a) - 12), 0);
	cr_assert_eq(parse_response(buf, (size_t)n, &a), 0);
	cr_assert_eq(a.id, 0x1234);
	cr_assert_eq(a.rcode, DNS_RCODE_NXDOMAIN);
	cr_assert_eq(a.n_addrs, 0);
	cr_assert_str_eq(a.q.name, "www.example.com");
	cr_assert_eq(a.q.qtype, DNS_TYPE_A);

	/* RD clear in the query, clear in the reply; an EDNS record after the question is not
	 * echoed */
	struct msg m = MSG(query_a);
	m.b[2] = 0;
	m.b[11] = 1;
	memcpy(m.b + m.len, "\x00\x00\x29\x04\xd0\x00\x00\x00\x00\x00\x00", 11);
	m.len += 11;
	cr_assert_eq(parse_query(m.b, m.len, &q), 0);
	n = dns_build_reply(&q, m.b, m.len, DNS_RCODE_NOERROR, buf, sizeof(buf));
	cr_assert_eq(n, (int)sizeof(query_a));
	cr_assert_eq(buf[2], 0x80);
	cr_assert_eq(buf[3], 0x80);
	cr_assert_eq(buf[11], 0);
	cr_assert_eq(parse_response(buf, (size_t)n, &a), 0);
	cr_assert_eq(a.rcode, DNS_RCODE_NOERROR);
}

Test(dns_reply, small_buffer)
{
	uint8_t buf[sizeof(query_a)];
	struct dns_question q;

	cr_assert_eq(parse_query(query_a, sizeof(query_a), &q), 0);
	cr_assert_eq(dns_build_reply(&q, query_a, sizeof(query_a), DNS_RCODE_SERVFAIL, buf,
				     sizeof(buf) - 1),
		     -ENOBUFS);
	cr_assert_eq(dns_build_reply(&q, query_a, sizeof(query_a), DNS_RCODE_SERVFAIL, buf,
				     sizeof(buf)),
		     (int)sizeof(buf));
	cr_assert_eq(buf[3] & 0xf, DNS_RCODE_SERVFAIL);
}

/* Every byte of the valid messages replaced by values that mean something to the parser
 * (pointers, label types, lengths): whatever the result, nothing is read out of bounds (the
 * sanitized build checks) and a success returns a well-formed answer. */
Test(dns_response, every_byte_replaced)
{
	static const uint8_t values[] = { 0x00, 0x01, 0x3f, 0x40, 0x80, 0xc0, 0xff };
	const struct {
		const uint8_t *m;
		size_t len;
	} msgs[] = { { response_cname, sizeof(response_cname) },
		     { response_ttls, sizeof(response_ttls) },
		     { query_a, sizeof(query_a) } };

	for (size_t k = 0; k < ELEMENTSOF(msgs); k++)
		for (size_t i = 0; i < msgs[k].len; i++)
			for (size_t v = 0; v < ELEMENTSOF(values) + 1; v++) {
				struct msg m = msg_of(msgs[k].m, msgs[k].len);
				struct dns_answer a;
				struct dns_question q;

				m.b[i] = v < ELEMENTSOF(values) ? values[v] : (uint8_t)i;
				if (parse_response(m.b, m.len, &a) == 0) {
					cr_assert_leq(a.n_addrs, DNS_MAX_ADDRS);
					cr_assert_lt(strlen(a.q.name), DNS_NAME_MAX);
					cr_assert_leq(a.q.end, m.len);
				}
				if (parse_query(m.b, m.len, &q) == 0) {
					cr_assert_lt(strlen(q.name), DNS_NAME_MAX);
					cr_assert_leq(q.end, m.len);
					for (const char *c = q.name; *c; c++)
						cr_assert(*c > 0x20 && *c < 0x7f &&
							  !(*c >= 'A' && *c <= 'Z'));
				}
			}
}
