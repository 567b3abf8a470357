/* SPDX-License-Identifier: MIT */
/* DNS messages (src/net/dns.c): the input is read as a query from the sandbox and as an answer
 * from upstream. Beyond memory errors: a name read is lower case, printable, without a space
 * or an empty label, and at most DNS_NAME_MAX bytes; at most DNS_MAX_ADDRS addresses; the
 * reply built to an accepted query parses back as an answer to the same question with the
 * rcode given and no address; the query built for it upstream parses back as a plain query for
 * the same question with our EDNS size; an answer made the client's is no longer and still
 * parses, with the same addresses. */

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "net/dns.h"

#define CHECK(x)                                                                                   \
	do {                                                                                       \
		if (!(x))                                                                          \
			abort();                                                                   \
	} while (0)

static void check_name(const char *name)
{
	size_t n = strnlen(name, DNS_NAME_MAX + 1);

	CHECK(n <= DNS_NAME_MAX);
	CHECK(n == 0 || (name[0] != '.' && name[n - 1] != '.'));
	for (size_t i = 0; i < n; i++) {
		CHECK(name[i] > 0x20 && name[i] < 0x7f);
		CHECK(!(name[i] >= 'A' && name[i] <= 'Z'));
		CHECK(!(name[i] == '.' && name[i + 1] == '.'));
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct dns_question q;
	struct dns_answer a;
	int r;

	if (size > DNS_MAX_MESSAGE)
		return 0;

	r = dns_parse_query(data, size, &q);
	if (r == 0 || r == DNS_RCODE_FORMERR) {
		uint8_t reply[DNS_MAX_MESSAGE];
		struct dns_answer back;
		struct dns_question up;
		int n;

		check_name(q.name);
		CHECK(q.end >= 12 + 1 + 4 && q.end <= size);
		n = dns_build_reply(&q, data, size, DNS_RCODE_NXDOMAIN, reply, sizeof reply);
		CHECK(n == (int)q.end);
		CHECK(dns_parse_response(reply, (size_t)n, &back) == 0);
		CHECK(back.id == q.id && back.rcode == DNS_RCODE_NXDOMAIN && back.n_addrs == 0);
		CHECK(strcmp(back.q.name, q.name) == 0);
		CHECK(back.q.qtype == q.qtype && back.q.qclass == q.qclass);
		/* Too small a buffer is refused, not overrun. */
		CHECK(dns_build_reply(&q, data, size, DNS_RCODE_REFUSED, reply, q.end - 1) ==
		      -ENOBUFS);
		n = dns_build_query(&q, 0xbeef, reply, 512);
		CHECK(n > 0 && dns_parse_query(reply, (size_t)n, &up) == 0);
		CHECK(up.id == 0xbeef && up.flags == 0x0100 && up.edns &&
		      up.udp_size == DNS_UDP_PAYLOAD);
		CHECK(strcmp(up.name, q.name) == 0 && up.qtype == q.qtype && up.qclass == q.qclass);
	} else {
		CHECK(r == -EBADMSG);
	}

	r = dns_parse_response(data, size, &a);
	if (r == 0) {
		check_name(a.q.name);
		CHECK(a.n_addrs <= DNS_MAX_ADDRS);
		CHECK(a.rcode <= 0xf);
		for (size_t i = 0; i < a.n_addrs; i++)
			CHECK(a.ttls[i] <= INT32_MAX);
		/* relayed to a client that asked the same question without EDNS */
		uint8_t *copy = malloc(size);
		struct dns_question cq = a.q;
		struct dns_answer back;
		size_t n;
		CHECK(copy);
		memcpy(copy, data, size);
		cq.edns = false;
		n = dns_relay_answer(&cq, data, copy, size);
		CHECK(n <= size && dns_parse_response(copy, n, &back) == 0);
		CHECK(back.n_addrs == a.n_addrs && back.id == cq.id);
		free(copy);
	} else {
		CHECK(r == -EBADMSG);
	}
	return 0;
}
