/* SPDX-License-Identifier: MIT */
/* Static probe run inside container workspaces by the network tests (a busybox image has neither
 * a UDP netcat nor a DNS client that tells NXDOMAIN from a timeout). One action per call; facts
 * as key=value lines; exit status 0 when the action succeeded, 1 when it did not, 2 on usage.
 *
 *   net-probe tcp HOST PORT             connect=ok|<errno name>, then recv=<first line received>
 *   net-probe tcp6 ADDR PORT            the same over IPv6 (ADDR a literal)
 *   net-probe http HOST PORT NAME PATH  GET PATH with "Host: NAME": connect=…, status=<code>,
 *                                       body=<first line of the body>
 *   net-probe udp HOST PORT TEXT        one datagram: send=ok|<errno name>
 *   net-probe dns NAME [SERVER] [a|aaaa]  one query (SERVER: the first nameserver of
 *                                       /etc/resolv.conf): rcode=NOERROR|NXDOMAIN|REFUSED|…|
 *                                       timeout|<errno name>, then answer=<address> per record
 *   net-probe dns-raw KIND NAME [SERVER]  one A query carrying more than its question, KIND:
 *                                       edns-options (an OPT of size 4096 with DO and option
 *                                       65001 "leak", header flags AA, AD and CD),
 *                                       two-questions, answer-record, extra-record (an OPT and a
 *                                       TXT record): rcode=… and answer=… as for dns
 *   net-probe dns-flood NAME MS [SERVER]  A queries for NAME, one every 2 ms during MS
 *                                       milliseconds, answers read as they come (and 3 s more):
 *                                       sent=<n> noerror=<n> servfail=<n> other=<n>
 *   net-probe listen PORT TEXT [any] [N]  listens on 127.0.0.1:PORT (any: every address),
 *                                       prints listening=PORT, sends TEXT to each of the first
 *                                       N clients (default 1; 30 s at most), accepted=<count>
 *   net-probe ifaces                    ifaces=<names, sorted, comma-separated>
 *
 * HOST is an IPv4 literal or a name, resolved (A) through the resolver as "dns" does, printing
 * resolved=<address> or resolve=<rcode>. Every wait is bounded (3 s for connects and queries,
 * 5 s for answers). */

#include <arpa/inet.h>
#include <errno.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define CONNECT_MS 3000
#define RECV_MS 5000

static const char *err_name(int e)
{
	switch (e) {
	case ECONNREFUSED:
		return "ECONNREFUSED";
	case ETIMEDOUT:
		return "ETIMEDOUT";
	case ENETUNREACH:
		return "ENETUNREACH";
	case EHOSTUNREACH:
		return "EHOSTUNREACH";
	case EPERM:
		return "EPERM";
	case EACCES:
		return "EACCES";
	case EADDRNOTAVAIL:
		return "EADDRNOTAVAIL";
	case EAFNOSUPPORT:
		return "EAFNOSUPPORT";
	case ECONNRESET:
		return "ECONNRESET";
	case EINVAL:
		return "EINVAL";
	default:
		return "EOTHER";
	}
}

static int nameserver(struct in_addr *ret)
{
	char line[256];
	FILE *f = fopen("/etc/resolv.conf", "re");
	if (!f)
		return -errno;
	while (fgets(line, sizeof line, f)) {
		char addr[64];
		if (sscanf(line, " nameserver %63s", addr) == 1 &&
		    inet_pton(AF_INET, addr, ret) == 1) {
			fclose(f);
			return 0;
		}
	}
	fclose(f);
	return -ENOENT;
}

static const char *rcode_name(int r)
{
	static const char *const n[] = { "NOERROR",  "FORMERR", "SERVFAIL",
					 "NXDOMAIN", "NOTIMP",	"REFUSED" };
	return r >= 0 && r < 6 ? n[r] : "OTHER";
}

/* A query for name (id 0x5a17, RD, one question) into q (512 bytes); its length or -EINVAL. */
static int dns_build(const char *name, int qtype, uint8_t *q)
{
	size_t len = 12;
	const char *p = name;
	memset(q, 0, 512);
	q[0] = 0x5a, q[1] = 0x17, q[2] = 0x01, q[5] = 1; /* id, RD, one question */
	while (*p) {
		const char *dot = strchr(p, '.');
		size_t l = dot ? (size_t)(dot - p) : strlen(p);
		if (l == 0 || l > 63 || len + l + 6 > 400)
			return -EINVAL;
		q[len++] = (uint8_t)l;
		memcpy(q + len, p, l);
		len += l;
		p += l + (dot ? 1 : 0);
	}
	q[len++] = 0;
	q[len++] = 0, q[len++] = (uint8_t)qtype, q[len++] = 0, q[len++] = 1;
	return (int)len;
}

/* Adds what KIND carries beyond the question of the query q (len bytes); the new length, or
 * -EINVAL for an unknown kind. */
static int dns_add_extras(const char *kind, uint8_t *q, size_t len)
{
	static const uint8_t opt[] = { 0, 0,	41,   0x10, 0x00, 0,   0,   0x80, 0,  0,
				       8, 0xfd, 0xe9, 0,    4,	  'l', 'e', 'a',  'k' };
	static const uint8_t txt[] = { 0xc0, 0x0c, 0, 16, 0,   1,   0,	 0,  0,
				       0,    0,	   5, 4,  'l', 'e', 'a', 'k' };
	if (strcmp(kind, "edns-options") == 0) {
		q[2] |= 0x04, q[3] |= 0x30, q[11] = 1; /* AA; AD, CD; one additional */
		memcpy(q + len, opt, sizeof opt);
		return (int)(len + sizeof opt);
	}
	if (strcmp(kind, "two-questions") == 0) {
		q[5] = 2;
		memcpy(q + len, "\xc0\x0c\x00\x01\x00\x01", 6);
		return (int)len + 6;
	}
	if (strcmp(kind, "answer-record") == 0) {
		q[7] = 1;
		memcpy(q + len, txt, sizeof txt);
		return (int)(len + sizeof txt);
	}
	if (strcmp(kind, "extra-record") == 0) {
		q[11] = 2;
		memcpy(q + len, opt, sizeof opt);
		memcpy(q + len + sizeof opt, txt, sizeof txt);
		return (int)(len + sizeof opt + sizeof txt);
	}
	return -EINVAL;
}

/* One query (kind: NULL for a plain one, see dns_add_extras); fills up to max addresses (A or
 * AAAA as text). Returns the rcode (>= 0), -ETIMEDOUT or another -errno. */
static int dns_query(const char *name, const char *kind, struct in_addr server, int qtype,
		     char (*addrs)[64], int max, int *n_addrs)
{
	uint8_t q[512], r[1500];
	int built = dns_build(name, qtype, q);
	*n_addrs = 0;
	if (built >= 0 && kind)
		built = dns_add_extras(kind, q, (size_t)built);
	if (built < 0)
		return built;
	size_t len = (size_t)built;

	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_port = htons(53),
				  .sin_addr = server };
	if (sendto(fd, q, len, 0, (struct sockaddr *)&sa, sizeof sa) < 0) {
		int e = errno;
		close(fd);
		return -e;
	}
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	int k = poll(&pfd, 1, CONNECT_MS);
	if (k <= 0) {
		close(fd);
		return k == 0 ? -ETIMEDOUT : -errno;
	}
	ssize_t got = recv(fd, r, sizeof r, 0);
	int e = errno;
	close(fd);
	if (got < 0)
		return -e;
	if (got < 12 || r[0] != 0x5a || r[1] != 0x17 || !(r[2] & 0x80))
		return -EPROTO;
	int rcode = r[3] & 0x0f, an = r[6] << 8 | r[7];
	size_t off = 12;
	/* skip the question */
	while (off < (size_t)got && r[off] != 0) {
		if (r[off] & 0xc0) {
			off += 1;
			break;
		}
		off += r[off] + 1;
	}
	off += 1 + 4;
	for (int i = 0; i < an && off < (size_t)got; i++) {
		/* name: a pointer or labels */
		while (off < (size_t)got && r[off] != 0 && !(r[off] & 0xc0))
			off += r[off] + 1;
		off += off < (size_t)got && (r[off] & 0xc0) ? 2 : 1;
		if (off + 10 > (size_t)got)
			break;
		int type = r[off] << 8 | r[off + 1];
		size_t rdlen = (size_t)(r[off + 8] << 8 | r[off + 9]);
		off += 10;
		if (off + rdlen > (size_t)got)
			break;
		if (*n_addrs < max && ((type == 1 && rdlen == 4) || (type == 28 && rdlen == 16)))
			inet_ntop(type == 1 ? AF_INET : AF_INET6, r + off, addrs[(*n_addrs)++], 64);
		off += rdlen;
	}
	return rcode;
}

/* An IPv4 literal, or a name resolved through the resolver (prints resolved= or resolve=). */
static int resolve(const char *host, struct in_addr *ret)
{
	if (inet_pton(AF_INET, host, ret) == 1)
		return 0;
	struct in_addr ns;
	char addrs[4][64];
	int n;
	if (nameserver(&ns) < 0) {
		printf("resolve=no-nameserver\n");
		return -ENOENT;
	}
	int r = dns_query(host, NULL, ns, 1, addrs, 4, &n);
	if (r != 0 || n == 0) {
		printf("resolve=%s\n", r == -ETIMEDOUT ? "timeout" :
				       r < 0	       ? err_name(-r) :
				       r == 0	       ? "NODATA" :
							 rcode_name(r));
		return -ENOENT;
	}
	printf("resolved=%s\n", addrs[0]);
	return inet_pton(AF_INET, addrs[0], ret) == 1 ? 0 : -EINVAL;
}

static int connect_timeout(int family, const struct sockaddr *sa, socklen_t salen)
{
	int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0) {
		printf("connect=%s\n", err_name(errno));
		return -1;
	}
	int r = connect(fd, sa, salen), e = errno;
	if (r < 0 && e == EINPROGRESS) {
		struct pollfd pfd = { .fd = fd, .events = POLLOUT };
		socklen_t l = sizeof e;
		r = poll(&pfd, 1, CONNECT_MS);
		if (r == 0)
			e = ETIMEDOUT, r = -1;
		else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &l) < 0 || e != 0)
			r = -1;
		else
			r = 0;
	}
	if (r < 0) {
		printf("connect=%s\n", err_name(e));
		close(fd);
		return -1;
	}
	printf("connect=ok\n");
	return fd;
}

/* Reads until EOF, the buffer's end or the timeout. */
static size_t read_all(int fd, char *buf, size_t size)
{
	size_t n = 0;
	while (n + 1 < size) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		if (poll(&pfd, 1, RECV_MS) <= 0)
			break;
		ssize_t k = read(fd, buf + n, size - 1 - n);
		if (k <= 0)
			break;
		n += (size_t)k;
	}
	buf[n] = 0;
	return n;
}

static void print_line(const char *key, const char *s)
{
	size_t l = strcspn(s, "\r\n");
	printf("%s=%.*s\n", key, (int)(l > 200 ? 200 : l), s);
}

static int parse_port(const char *s)
{
	char *end;
	long p = strtol(s, &end, 10);
	return *end || p < 1 || p > 65535 ? -1 : (int)p;
}

static int do_tcp(const char *host, const char *port_s, int family)
{
	char buf[4096];
	int port = parse_port(port_s), fd;
	if (port < 0)
		return 2;
	if (family == AF_INET6) {
		struct sockaddr_in6 sa = { .sin6_family = AF_INET6,
					   .sin6_port = htons((uint16_t)port) };
		if (inet_pton(AF_INET6, host, &sa.sin6_addr) != 1)
			return 2;
		fd = connect_timeout(AF_INET6, (struct sockaddr *)&sa, sizeof sa);
	} else {
		struct sockaddr_in sa = { .sin_family = AF_INET,
					  .sin_port = htons((uint16_t)port) };
		if (resolve(host, &sa.sin_addr) < 0)
			return 1;
		fd = connect_timeout(AF_INET, (struct sockaddr *)&sa, sizeof sa);
	}
	if (fd < 0)
		return 1;
	read_all(fd, buf, sizeof buf);
	close(fd);
	print_line("recv", buf);
	return 0;
}

static int do_http(const char *host, const char *port_s, const char *name, const char *path)
{
	char req[1024], buf[8192];
	int port = parse_port(port_s);
	struct sockaddr_in sa = { .sin_family = AF_INET };
	if (port < 0 || strlen(name) > 255 || strlen(path) > 512)
		return 2;
	sa.sin_port = htons((uint16_t)port);
	if (resolve(host, &sa.sin_addr) < 0)
		return 1;
	int fd = connect_timeout(AF_INET, (struct sockaddr *)&sa, sizeof sa);
	if (fd < 0)
		return 1;
	int l = snprintf(req, sizeof req,
			 "GET %s HTTP/1.0\r\nHost: %s\r\nUser-Agent: net-probe\r\n\r\n", path,
			 name);
	if (write(fd, req, (size_t)l) != l) {
		printf("send=%s\n", err_name(errno));
		close(fd);
		return 1;
	}
	read_all(fd, buf, sizeof buf);
	close(fd);
	int status = 0;
	if (sscanf(buf, "HTTP/%*s %d", &status) != 1) {
		printf("status=none\n");
		return 1;
	}
	printf("status=%d\n", status);
	const char *body = strstr(buf, "\r\n\r\n");
	print_line("body", body ? body + 4 : "");
	return 0;
}

static int do_udp(const char *host, const char *port_s, const char *text)
{
	int port = parse_port(port_s);
	struct sockaddr_in sa = { .sin_family = AF_INET };
	if (port < 0)
		return 2;
	sa.sin_port = htons((uint16_t)port);
	if (resolve(host, &sa.sin_addr) < 0)
		return 1;
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || sendto(fd, text, strlen(text), 0, (struct sockaddr *)&sa, sizeof sa) < 0) {
		printf("send=%s\n", err_name(errno));
		return 1;
	}
	close(fd);
	printf("send=ok\n");
	return 0;
}

/* SERVER (or "-"/absent: the first nameserver of /etc/resolv.conf) into ns; 1 (printed) when
 * there is none, 2 when SERVER is no address. */
static int server_arg(int argc, char **argv, int i, struct in_addr *ns)
{
	if (argc > i && strcmp(argv[i], "-") != 0)
		return inet_pton(AF_INET, argv[i], ns) == 1 ? 0 : 2;
	if (nameserver(ns) < 0) {
		printf("rcode=no-nameserver\n");
		return 1;
	}
	return 0;
}

static int print_answer(int r, char (*addrs)[64], int n)
{
	if (r < 0) {
		printf("rcode=%s\n", r == -ETIMEDOUT ? "timeout" : err_name(-r));
		return 1;
	}
	printf("rcode=%s\n", rcode_name(r));
	for (int i = 0; i < n; i++)
		printf("answer=%s\n", addrs[i]);
	return r == 0 ? 0 : 1;
}

static int do_dns_raw(int argc, char **argv)
{
	struct in_addr ns;
	char addrs[16][64];
	int n, k = server_arg(argc, argv, 3, &ns);
	if (k)
		return k;
	int r = dns_query(argv[2], argv[1], ns, 1, addrs, 16, &n);
	return r == -EINVAL ? 2 : print_answer(r, addrs, n);
}

static long long ms_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int do_dns_flood(int argc, char **argv)
{
	struct in_addr ns;
	uint8_t q[512], r[1500];
	unsigned sent = 0, noerror = 0, servfail = 0, other = 0;
	int k = server_arg(argc, argv, 3, &ns), len;
	long long ms = atoll(argv[2]), start = ms_now(), next = start;
	if (k)
		return k;
	len = dns_build(argv[1], 1, q);
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (len < 0 || fd < 0 || ms <= 0)
		return 2;
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(53), .sin_addr = ns };
	for (;;) {
		long long now = ms_now();
		if (now >= start + ms + 3000 ||
		    (now >= start + ms && noerror + servfail + other >= sent))
			break;
		if (now >= next && now < start + ms) {
			q[0] = (uint8_t)(sent >> 8), q[1] = (uint8_t)sent;
			if (sendto(fd, q, (size_t)len, 0, (struct sockaddr *)&sa, sizeof sa) == len)
				sent++;
			next += 2;
		}
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		if (poll(&pfd, 1, 1) == 1) {
			ssize_t got = recv(fd, r, sizeof r, 0);
			if (got >= 12) {
				int rc = r[3] & 0x0f;
				noerror += rc == 0, servfail += rc == 2,
					other += rc != 0 && rc != 2;
			}
		}
	}
	close(fd);
	printf("sent=%u\nnoerror=%u\nservfail=%u\nother=%u\n", sent, noerror, servfail, other);
	return 0;
}

static int do_dns(int argc, char **argv)
{
	struct in_addr ns;
	char addrs[16][64];
	int n, qtype = 1;
	if (argc > 3 && strcmp(argv[3], "aaaa") == 0)
		qtype = 28;
	else if (argc > 3 && strcmp(argv[3], "a") != 0)
		return 2;
	if (argc > 2 && strcmp(argv[2], "-") != 0) {
		if (inet_pton(AF_INET, argv[2], &ns) != 1)
			return 2;
	} else if (nameserver(&ns) < 0) {
		printf("rcode=no-nameserver\n");
		return 1;
	}
	int r = dns_query(argv[1], NULL, ns, qtype, addrs, 16, &n);
	if (r < 0) {
		printf("rcode=%s\n", r == -ETIMEDOUT ? "timeout" : err_name(-r));
		return 1;
	}
	printf("rcode=%s\n", rcode_name(r));
	for (int i = 0; i < n; i++)
		printf("answer=%s\n", addrs[i]);
	return r == 0 ? 0 : 1;
}

static int do_listen(int argc, char **argv)
{
	int port = parse_port(argv[1]), one = 1, want = 1, got = 0;
	const char *text = argv[2];
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	if (port < 0)
		return 2;
	if (argc > 3 && strcmp(argv[3], "any") == 0)
		sa.sin_addr.s_addr = htonl(INADDR_ANY);
	if (argc > 4 && (want = atoi(argv[4])) < 1)
		return 2;
	sa.sin_port = htons((uint16_t)port);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
	    bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(fd, 8) < 0) {
		printf("listening=%s\n", err_name(errno));
		return 1;
	}
	printf("listening=%d\n", port);
	fflush(stdout);
	struct timespec end, now;
	clock_gettime(CLOCK_MONOTONIC, &end);
	end.tv_sec += 30;
	while (got < want) {
		clock_gettime(CLOCK_MONOTONIC, &now);
		long left =
			(end.tv_sec - now.tv_sec) * 1000 + (end.tv_nsec - now.tv_nsec) / 1000000;
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		if (left <= 0 || poll(&pfd, 1, (int)left) <= 0)
			break;
		int c = accept(fd, NULL, NULL);
		if (c < 0)
			continue;
		if (write(c, text, strlen(text)) >= 0)
			got++;
		close(c);
	}
	printf("accepted=%d\n", got);
	return got == want ? 0 : 1;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int do_ifaces(void)
{
	struct if_nameindex *ifs = if_nameindex();
	char *names[256];
	size_t n = 0;
	if (!ifs) {
		printf("ifaces=%s\n", err_name(errno));
		return 1;
	}
	for (struct if_nameindex *i = ifs; i->if_index && n < 256; i++)
		names[n++] = i->if_name;
	qsort(names, n, sizeof *names, cmp_str);
	printf("ifaces=");
	for (size_t i = 0; i < n; i++)
		printf("%s%s", i ? "," : "", names[i]);
	printf("\n");
	if_freenameindex(ifs);
	return 0;
}

int main(int argc, char **argv)
{
	int r = 2;
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc >= 4 && strcmp(argv[1], "tcp") == 0)
		r = do_tcp(argv[2], argv[3], AF_INET);
	else if (argc >= 4 && strcmp(argv[1], "tcp6") == 0)
		r = do_tcp(argv[2], argv[3], AF_INET6);
	else if (argc >= 6 && strcmp(argv[1], "http") == 0)
		r = do_http(argv[2], argv[3], argv[4], argv[5]);
	else if (argc >= 5 && strcmp(argv[1], "udp") == 0)
		r = do_udp(argv[2], argv[3], argv[4]);
	else if (argc >= 3 && strcmp(argv[1], "dns") == 0)
		r = do_dns(argc - 1, argv + 1);
	else if (argc >= 4 && strcmp(argv[1], "dns-raw") == 0)
		r = do_dns_raw(argc - 1, argv + 1);
	else if (argc >= 4 && strcmp(argv[1], "dns-flood") == 0)
		r = do_dns_flood(argc - 1, argv + 1);
	else if (argc >= 4 && strcmp(argv[1], "listen") == 0)
		r = do_listen(argc - 1, argv + 1);
	else if (argc >= 2 && strcmp(argv[1], "ifaces") == 0)
		r = do_ifaces();
	if (r == 2)
		fprintf(stderr,
			"usage: net-probe tcp|tcp6|http|udp|dns|dns-raw|dns-flood|listen|ifaces ... "
			"(see the source)\n");
	return r;
}
