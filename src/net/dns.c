/* SPDX-License-Identifier: MIT */
/*
 * The security contract: msg is hostile (a sandbox's query, or an upstream's answer that may be
 * spoofed). Nothing is read at or past len. A name is at most 255 bytes in wire form, its labels
 * 1..63 bytes; a compression pointer points strictly before the start of the part of the name
 * that led to it (so the reads go ever further back and end) and not into the header (whose id
 * we rewrite when forwarding), and at most DNS_MAX_POINTERS of them are followed. The names we return (the question's) hold printable bytes other than '.'
 * only, lower-cased: the caller matches them against an allow list, so "a.b" as one label, a
 * NUL, or a control byte could otherwise name something else than what the upstream resolves.
 * The answer section is walked up to DNS_MAX_RRS records.
 */
#include "dns.h"

#include <errno.h>
#include <limits.h>
#include <string.h>

#define DNS_HEADER_SIZE 12
#define DNS_WIRE_NAME_MAX 255
#define DNS_LABEL_MAX 63
#define DNS_MAX_POINTERS 32
#define DNS_MAX_RRS 1024

#define DNS_FLAG_QR 0x8000
#define DNS_FLAG_TC 0x0200
#define DNS_FLAG_RD 0x0100
#define DNS_FLAG_RA 0x0080
#define DNS_OPCODE(flags) (((flags) >> 11) & 0xf)
#define DNS_RCODE(flags) ((flags)&0xf)

struct dns_header {
	uint16_t id, flags, qdcount, ancount, nscount, arcount;
};

static uint16_t get_u16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static uint32_t get_u32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void put_u16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static int read_header(const uint8_t *msg, size_t len, struct dns_header *ret)
{
	if (len < DNS_HEADER_SIZE)
		return -EBADMSG;
	*ret = (struct dns_header){
		.id = get_u16(msg),
		.flags = get_u16(msg + 2),
		.qdcount = get_u16(msg + 4),
		.ancount = get_u16(msg + 6),
		.nscount = get_u16(msg + 8),
		.arcount = get_u16(msg + 10),
	};
	return 0;
}

/* A byte we accept inside a label of a name we hand out: printable, not a space, not '.'. */
static bool label_byte_ok(uint8_t c)
{
	return c > 0x20 && c < 0x7f && c != '.';
}

/* Reads the name at *pos; *pos moves past it (past the first pointer when there is one). With
 * ret, the name is checked byte by byte and written in presentation form; without it the name
 * is only walked (an answer's owner names, which we do not use). */
static int read_name(const uint8_t *msg, size_t len, size_t *pos, char *ret)
{
	size_t p = *pos, segment_start = *pos, end = 0, wire_len = 1, out = 0;
	unsigned n_pointers = 0;

	for (;;) {
		uint8_t c;

		if (p >= len)
			return -EBADMSG;
		c = msg[p];
		if ((c & 0xc0) == 0xc0) {
			size_t target;

			if (p + 1 >= len)
				return -EBADMSG;
			target = (size_t)(c & 0x3f) << 8 | msg[p + 1];
			if (target < DNS_HEADER_SIZE || target >= segment_start ||
			    ++n_pointers > DNS_MAX_POINTERS)
				return -EBADMSG;
			if (end == 0)
				end = p + 2;
			p = segment_start = target;
			continue;
		}
		if (c & 0xc0) /* 0x40 and 0x80: extended label types, obsolete */
			return -EBADMSG;
		if (c == 0)
			break;
		wire_len += 1 + (size_t)c;
		if (wire_len > DNS_WIRE_NAME_MAX || c > len - p - 1)
			return -EBADMSG;
		if (ret) {
			if (out > 0)
				ret[out++] = '.';
			for (size_t i = 1; i <= c; i++) {
				uint8_t b = msg[p + i];
				if (!label_byte_ok(b))
					return -EBADMSG;
				ret[out++] = (char)(b >= 'A' && b <= 'Z' ? b - 'A' + 'a' : b);
			}
		}
		p += 1 + (size_t)c;
	}
	if (ret)
		ret[out] = '\0';
	*pos = end ? end : p + 1;
	return 0;
}

static int read_question(const uint8_t *msg, size_t len, const struct dns_header *h,
			 struct dns_question *ret)
{
	size_t pos = DNS_HEADER_SIZE;
	int r;

	if (h->qdcount == 0)
		return -EBADMSG;
	r = read_name(msg, len, &pos, ret->name);
	if (r < 0)
		return r;
	if (len - pos < 4)
		return -EBADMSG;
	ret->id = h->id;
	ret->flags = h->flags;
	ret->qtype = get_u16(msg + pos);
	ret->qclass = get_u16(msg + pos + 2);
	ret->end = pos + 4;
	return 0;
}

/* What follows a query's question: nothing, or one OPT record (RFC 6891: the root name, type
 * OPT, the UDP payload size as its class), whose size is kept; its options are never read. */
static int read_query_rest(const uint8_t *msg, size_t len, const struct dns_header *h,
			   struct dns_question *q)
{
	size_t pos = q->end;
	uint16_t size;

	if (h->qdcount != 1 || h->ancount != 0 || h->nscount != 0 || h->arcount > 1)
		return DNS_RCODE_FORMERR;
	if (h->arcount == 0)
		return 0;
	if (len - pos < 11 || msg[pos] != 0 || get_u16(msg + pos + 1) != DNS_TYPE_OPT ||
	    get_u16(msg + pos + 9) > len - pos - 11)
		return DNS_RCODE_FORMERR;
	size = get_u16(msg + pos + 3);
	q->edns = true;
	q->udp_size = size < DNS_UDP_PLAIN ? DNS_UDP_PLAIN : size;
	return 0;
}

int dns_parse_query(const uint8_t *msg, size_t len, struct dns_question *ret)
{
	struct dns_header h;
	struct dns_question q = {};
	int r;

	r = read_header(msg, len, &h);
	if (r < 0)
		return r;
	if ((h.flags & DNS_FLAG_QR) || DNS_OPCODE(h.flags) != 0)
		return -EBADMSG;
	r = read_question(msg, len, &h, &q);
	if (r < 0)
		return r;
	r = read_query_rest(msg, len, &h, &q);
	*ret = q;
	return r;
}

int dns_build_query(const struct dns_question *q, uint16_t id, uint8_t *buf, size_t size)
{
	size_t name_len = strnlen(q->name, sizeof(q->name)), pos = DNS_HEADER_SIZE;
	size_t len = DNS_HEADER_SIZE + (name_len ? name_len + 2 : 1) + 4 + 11;

	if (name_len > DNS_NAME_MAX)
		return -EINVAL;
	if (size < len)
		return -ENOBUFS;
	put_u16(buf, id);
	put_u16(buf + 2, DNS_FLAG_RD);
	put_u16(buf + 4, 1);
	memset(buf + 6, 0, 4);
	put_u16(buf + 10, 1);
	/* The parsed name's labels hold no '.', so the dots are exactly the label boundaries. */
	for (const char *label = q->name; *label;) {
		size_t n = strcspn(label, ".");
		buf[pos++] = (uint8_t)n;
		memcpy(buf + pos, label, n);
		pos += n;
		label += n + (label[n] == '.');
	}
	buf[pos++] = 0;
	put_u16(buf + pos, q->qtype);
	put_u16(buf + pos + 2, q->qclass);
	pos += 4;
	buf[pos++] = 0; /* OPT: the root, its type, our payload size, TTL 0 (DO clear), no data */
	put_u16(buf + pos, DNS_TYPE_OPT);
	put_u16(buf + pos + 2, DNS_UDP_PAYLOAD);
	memset(buf + pos + 4, 0, 6);
	return (int)(pos + 10);
}

/* One resource record at *pos: an A record of class IN is added to a; others are skipped. */
static int read_rr(const uint8_t *msg, size_t len, size_t *pos, struct dns_answer *a)
{
	size_t p = *pos;
	uint16_t type, class, rdlength;
	uint32_t ttl;
	int r;

	r = read_name(msg, len, &p, NULL);
	if (r < 0)
		return r;
	if (len - p < 10)
		return -EBADMSG;
	type = get_u16(msg + p);
	class = get_u16(msg + p + 2);
	ttl = get_u32(msg + p + 4);
	rdlength = get_u16(msg + p + 8);
	p += 10;
	if (rdlength > len - p)
		return -EBADMSG;
	if (type == DNS_TYPE_A && class == DNS_CLASS_IN && rdlength == 4 &&
	    a->n_addrs < DNS_MAX_ADDRS) {
		a->addrs[a->n_addrs] = get_u32(msg + p);
		a->ttls[a->n_addrs] = ttl > INT32_MAX ? 0 : ttl; /* RFC 2181 §8 */
		a->n_addrs++;
	}
	*pos = p + rdlength;
	return 0;
}

int dns_parse_response(const uint8_t *msg, size_t len, struct dns_answer *ret)
{
	struct dns_header h;
	struct dns_answer a = {};
	size_t pos;
	int r;

	r = read_header(msg, len, &h);
	if (r < 0)
		return r;
	if (!(h.flags & DNS_FLAG_QR) || DNS_OPCODE(h.flags) != 0 || h.ancount > DNS_MAX_RRS ||
	    h.qdcount != 1)
		return -EBADMSG;
	r = read_question(msg, len, &h, &a.q);
	if (r < 0)
		return r;
	a.id = h.id;
	a.rcode = DNS_RCODE(h.flags);
	a.truncated = h.flags & DNS_FLAG_TC;
	pos = a.q.end;
	for (unsigned i = 0; i < h.ancount; i++) {
		r = read_rr(msg, len, &pos, &a);
		if (r < 0) {
			/* A truncated answer may end inside its records: keep what is whole. */
			if (a.truncated)
				break;
			return r;
		}
	}
	*ret = a;
	return 0;
}

static int build_reply(const struct dns_question *q, const uint8_t *query, size_t query_len,
		       uint16_t flags, uint8_t rcode, uint8_t *buf, size_t size)
{
	if (q->end < DNS_HEADER_SIZE || q->end > query_len || q->end > INT_MAX || rcode > 0xf)
		return -EINVAL;
	if (size < q->end)
		return -ENOBUFS;
	put_u16(buf, q->id);
	put_u16(buf + 2,
		(uint16_t)(DNS_FLAG_QR | (q->flags & DNS_FLAG_RD) | DNS_FLAG_RA | flags | rcode));
	put_u16(buf + 4, 1);
	memset(buf + 6, 0, 6);
	memcpy(buf + DNS_HEADER_SIZE, query + DNS_HEADER_SIZE, q->end - DNS_HEADER_SIZE);
	return (int)q->end;
}

int dns_build_reply(const struct dns_question *q, const uint8_t *query, size_t query_len,
		    uint8_t rcode, uint8_t *buf, size_t size)
{
	return build_reply(q, query, query_len, 0, rcode, buf, size);
}

int dns_build_truncated(const struct dns_question *q, const uint8_t *query, size_t query_len,
			uint8_t rcode, uint8_t *buf, size_t size)
{
	return build_reply(q, query, query_len, DNS_FLAG_TC, rcode, buf, size);
}

/* Where the last record of a response starts when it is an OPT record that ends the message,
 * 0 otherwise. Its caller checks that what is left still parses: a pointer leads backwards,
 * but the labels it leads to may run on into the record cut. */
static size_t last_opt_offset(const uint8_t *msg, size_t len)
{
	struct dns_header h;
	size_t pos = DNS_HEADER_SIZE, last = 0;
	uint16_t type = 0;
	unsigned n;

	if (read_header(msg, len, &h) < 0 || h.qdcount != 1 || h.arcount == 0)
		return 0;
	n = (unsigned)h.ancount + h.nscount + h.arcount;
	if (n > DNS_MAX_RRS || read_name(msg, len, &pos, NULL) < 0 || len - pos < 4)
		return 0;
	pos += 4;
	for (unsigned i = 0; i < n; i++) {
		last = pos;
		if (read_name(msg, len, &pos, NULL) < 0 || len - pos < 10 ||
		    get_u16(msg + pos + 8) > len - pos - 10)
			return 0;
		type = get_u16(msg + pos);
		pos += 10 + get_u16(msg + pos + 8);
	}
	return pos == len && type == DNS_TYPE_OPT ? last : 0;
}

size_t dns_relay_answer(const struct dns_question *q, const uint8_t *query, uint8_t *msg,
			size_t len)
{
	uint16_t flags = get_u16(msg + 2);
	size_t opt;

	put_u16(msg, q->id);
	put_u16(msg + 2, (uint16_t)((flags & ~DNS_FLAG_RD) | (q->flags & DNS_FLAG_RD)));
	/* The same labels (the first name of a message cannot be compressed), so the same length:
	 * only the case of its letters may differ. */
	memcpy(msg + DNS_HEADER_SIZE, query + DNS_HEADER_SIZE, q->end - DNS_HEADER_SIZE);
	if (!q->edns) {
		opt = last_opt_offset(msg, len);
		if (opt) {
			struct dns_answer whole, cut;
			bool same;

			/* A name may run on from where a pointer leads into the bytes cut: then
			 * the message keeps its OPT rather than say something else (or nothing
			 * that parses) to the client. */
			same = dns_parse_response(msg, len, &whole) == 0;
			put_u16(msg + 10, (uint16_t)(get_u16(msg + 10) - 1));
			same = same && dns_parse_response(msg, opt, &cut) == 0 &&
			       cut.rcode == whole.rcode && cut.n_addrs == whole.n_addrs &&
			       memcmp(cut.addrs, whole.addrs,
				      whole.n_addrs * sizeof(whole.addrs[0])) == 0;
			if (same)
				len = opt;
			else
				put_u16(msg + 10, (uint16_t)(get_u16(msg + 10) + 1));
		}
	}
	return len;
}
