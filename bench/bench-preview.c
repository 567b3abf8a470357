/* SPDX-License-Identifier: MIT */
/* station-bench preview --url URL --netns-pid PID --app-port N --runs N --bytes N --reps N
 * [--controller-pid PID]: a request through the preview listener beside the same request on a
 * direct connection to the app inside the workspace's network namespace (a socket made there,
 * from the namespace of PID, the workspace's agent), with the same client code, in turns.
 *
 * The app is test/helpers/preview-app: GET / (a small page), GET /bytes?n=N (N bytes with
 * Content-Length), POST /sink (reads the body, answers "bytes=N crc32=…"). Rows (--id ID):
 *   ID.rtt.direct, ID.rtt     round trip of GET / on one keep-alive connection each (ms)
 *   ID.down.direct, ID.down   GET /bytes?n=BYTES, request sent → last byte read (MB/s)
 *   ID.up.direct, ID.up       POST /sink of BYTES, first byte sent → answer read (MB/s)
 * The preview rows carry the controller's CPU time (--controller-pid) per GiB moved. */

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "bench.h"

#define IO_BUFFER (1u << 20) /* reads and writes of a body, both ways */
#define HEAD_MAX 16384
#define IO_TIMEOUT_S 120
#define WARMUP_BYTES (64ull << 20)

/* One keep-alive HTTP/1.1 connection: the same code direct and through the preview. */
struct hconn {
	const char *name; /* "direct" or "preview", for messages */
	int fd;
	char host[300]; /* the Host header's value */
	char *buf;	/* IO_BUFFER bytes: a response's head and body as read */
	size_t off, len;
};

static char *body_out; /* IO_BUFFER bytes of request body */

static int hconn_setup(struct hconn *c, int fd)
{
	struct timeval tv = { .tv_sec = IO_TIMEOUT_S };
	int one = 1;

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
	c->fd = fd;
	c->buf = malloc(IO_BUFFER);
	c->off = c->len = 0;
	return c->buf ? 0 : -ENOMEM;
}

static int connect_loopback(int fd, uint16_t port)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_port = htons(port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	return connect(fd, (struct sockaddr *)&a, sizeof a) < 0 ? -errno : 0;
}

/* A TCP socket made inside the network namespace of pid (the thread back in its own after),
 * connected to 127.0.0.1:port there. */
static int connect_in_netns(pid_t pid, uint16_t port, int *ret_fd)
{
	char path[64];
	int self = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC), target, fd = -1, r = 0;

	snprintf(path, sizeof path, "/proc/%d/ns/net", (int)pid);
	target = open(path, O_RDONLY | O_CLOEXEC);
	if (self < 0 || target < 0) {
		r = -errno;
		goto out;
	}
	if (setns(target, CLONE_NEWNET) < 0) {
		r = -errno;
		goto out;
	}
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		r = -errno;
	if (setns(self, CLONE_NEWNET) < 0) { /* cannot go on in the wrong namespace */
		perror("station-bench preview: setns back");
		abort();
	}
	if (r == 0 && (r = connect_loopback(fd, port)) == 0)
		*ret_fd = fd;
	else if (fd >= 0)
		close(fd);
out:
	if (self >= 0)
		close(self);
	if (target >= 0)
		close(target);
	return r;
}

static int write_all(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return w < 0 ? -errno : -EIO;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* More bytes into c->buf after what it holds (moved to its start first when full). */
static int hconn_fill(struct hconn *c)
{
	if (c->off > 0 && c->off == c->len)
		c->off = c->len = 0;
	if (c->len == IO_BUFFER) {
		memmove(c->buf, c->buf + c->off, c->len - c->off);
		c->len -= c->off;
		c->off = 0;
	}
	for (;;) {
		ssize_t n = recv(c->fd, c->buf + c->len, IO_BUFFER - c->len, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -ECONNRESET;
		c->len += (size_t)n;
		return 0;
	}
}

static int hconn_send(struct hconn *c, const char *method, const char *target, uint64_t body)
{
	char head[1024];
	int n = snprintf(head, sizeof head, "%s %s HTTP/1.1\r\nHost: %s\r\n", method, target,
			 c->host);
	if (body > 0)
		n += snprintf(head + n, sizeof head - (size_t)n,
			      "Content-Type: application/octet-stream\r\nContent-Length: %" PRIu64
			      "\r\n",
			      body);
	n += snprintf(head + n, sizeof head - (size_t)n, "\r\n");
	int r = write_all(c->fd, head, (size_t)n);
	for (uint64_t left = body; r == 0 && left > 0;) {
		size_t k = left < IO_BUFFER ? (size_t)left : IO_BUFFER;
		r = write_all(c->fd, body_out, k);
		left -= k;
	}
	return r;
}

/* Reads one response: its status must be 200, its body framed by Content-Length (read whole;
 * its first bytes, up to keep_size - 1, into keep as a string when keep is not NULL). */
static int hconn_response(struct hconn *c, uint64_t *ret_length, char *keep, size_t keep_size)
{
	char *end;
	int r;

	while (!(end = memmem(c->buf + c->off, c->len - c->off, "\r\n\r\n", 4))) {
		if (c->len - c->off > HEAD_MAX)
			return -E2BIG;
		if ((r = hconn_fill(c)) < 0)
			return r;
	}
	char *head = c->buf + c->off, *cl = NULL;
	*end = '\0';
	if (strncmp(head, "HTTP/1.1 200 ", 13) != 0) {
		fprintf(stderr, "station-bench preview: %s: answer \"%.80s\"\n", c->name, head);
		return -EPROTO;
	}
	for (char *h = strstr(head, "\r\n"); h; h = strstr(h + 2, "\r\n")) {
		if (strncasecmp(h + 2, "transfer-encoding:", 18) == 0)
			return -EPROTO; /* the app answers with Content-Length */
		if (strncasecmp(h + 2, "content-length:", 15) == 0)
			cl = h + 17;
	}
	if (!cl)
		return -EPROTO;
	uint64_t length = strtoull(cl, NULL, 10), left = length;
	size_t kept = 0;
	c->off = (size_t)(end + 4 - c->buf);
	while (left > 0) {
		if (c->off == c->len && (r = hconn_fill(c)) < 0)
			return r;
		size_t k = c->len - c->off < left ? c->len - c->off : (size_t)left;
		if (keep && kept + 1 < keep_size) {
			size_t m = k < keep_size - 1 - kept ? k : keep_size - 1 - kept;
			memcpy(keep + kept, c->buf + c->off, m);
			kept += m;
		}
		c->off += k;
		left -= k;
	}
	if (keep)
		keep[kept] = '\0';
	*ret_length = length;
	return 0;
}

static int round_trip(struct hconn *c, double *ret_ms)
{
	uint64_t n;
	double t0 = bench_now_ms();
	int r = hconn_send(c, "GET", "/", 0);
	if (r == 0)
		r = hconn_response(c, &n, NULL, 0);
	*ret_ms = bench_now_ms() - t0;
	return r;
}

/* GET /bytes?n=bytes or POST /sink of bytes: MB/s from the request's first byte to the
 * answer's last. */
static int transfer(struct hconn *c, bool up, uint64_t bytes, double *ret_mbs)
{
	char target[64], answer[96], want[48];
	uint64_t n;
	int r;

	snprintf(target, sizeof target, "/bytes?n=%" PRIu64, bytes);
	double t0 = bench_now_ms();
	r = up ? hconn_send(c, "POST", "/sink", bytes) : hconn_send(c, "GET", target, 0);
	if (r == 0)
		r = hconn_response(c, &n, answer, sizeof answer);
	double ms = bench_now_ms() - t0;
	if (r < 0)
		return r;
	snprintf(want, sizeof want, "bytes=%" PRIu64 " ", bytes);
	if (up ? strncmp(answer, want, strlen(want)) != 0 : n != bytes) {
		fprintf(stderr,
			"station-bench preview: %s: %s moved %" PRIu64 " bytes (%s), not %" PRIu64
			"\n",
			c->name, up ? "POST /sink" : "GET /bytes", n, up ? answer : "length",
			bytes);
		return -EIO;
	}
	*ret_mbs = (double)bytes / 1e3 / ms;
	return 0;
}

/* The controller's user + system CPU time so far (ms), or NAN. */
static double cpu_ms(pid_t pid)
{
	char path[64], line[2048];
	unsigned long long ut = 0, st = 0;
	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	FILE *f = pid > 0 ? fopen(path, "re") : NULL;
	char *p = f && fgets(line, sizeof line, f) ? strrchr(line, ')') : NULL;
	if (f)
		fclose(f);
	/* after ")": state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime
	 * stime */
	if (!p ||
	    sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
		return NAN;
	return (double)(ut + st) * 1e3 / (double)sysconf(_SC_CLK_TCK);
}

static int emit_row(const struct bench_opts *o, const char *suffix, const char *unit,
		    double *samples, size_t n, json_t *extra)
{
	char id[128];
	struct bench_opts ro = *o;
	struct bench_stats s;

	snprintf(id, sizeof id, "%s.%s", o->id, suffix);
	ro.id = id;
	bench_stats_compute(samples, n, &s);
	return bench_emit(&ro, unit, &s, extra);
}

/* The round trips, direct and through the preview in turns (which goes first alternates). */
static int measure_rtt(const struct bench_opts *o, struct hconn *c)
{
	size_t n = (size_t)o->runs;
	double *d = calloc(n, sizeof *d), *p = calloc(n, sizeof *p), ms;
	int r = d && p ? 0 : -ENOMEM;

	for (int i = -o->warmup; r == 0 && i < o->runs; i++)
		for (int k = 0; r == 0 && k < 2; k++) {
			int which = (i + k) & 1; /* 0 direct, 1 preview */
			if ((r = round_trip(&c[which], &ms)) == 0 && i >= 0)
				(which ? p : d)[i] = ms;
		}
	if (r == 0) {
		struct bench_stats sd, sp;
		bench_stats_compute(d, n, &sd); /* sorts; emit_row sorts again, harmlessly */
		bench_stats_compute(p, n, &sp);
		r = emit_row(o, "rtt.direct", "ms", d, n, NULL);
		if (r == 0)
			r = emit_row(o, "rtt", "ms", p, n,
				     json_pack("{sf sf}", "addedP50Ms", sp.median - sd.median,
					       "addedP99Ms", sp.p99 - sd.p99));
	}
	free(d);
	free(p);
	return r;
}

/* One direction's reps, direct and through the preview in turns. */
static int measure_transfer(const struct bench_opts *o, struct hconn *c, bool up)
{
	size_t n = (size_t)o->reps;
	double *d = calloc(n, sizeof *d), *p = calloc(n, sizeof *p), mbs, cpu = 0;
	uint64_t warm = o->bytes < WARMUP_BYTES ? o->bytes : WARMUP_BYTES;
	int r = d && p ? 0 : -ENOMEM;

	for (int k = 0; r == 0 && k < 2; k++)
		r = transfer(&c[k], up, warm, &mbs);
	for (size_t i = 0; r == 0 && i < n; i++)
		for (int k = 0; r == 0 && k < 2; k++) {
			int which = (int)((i + (size_t)k) & 1);
			double c0 = which ? cpu_ms(o->controller_pid) : 0;
			if ((r = transfer(&c[which], up, o->bytes, &mbs)) == 0)
				(which ? p : d)[i] = mbs;
			if (which)
				cpu += cpu_ms(o->controller_pid) - c0;
		}
	if (r == 0) {
		double gib = (double)o->bytes * (double)n / (double)(1ull << 30);
		r = emit_row(o, up ? "up.direct" : "down.direct", "MB/s", d, n, NULL);
		if (r == 0)
			r = emit_row(o, up ? "up" : "down", "MB/s", p, n,
				     json_pack("{sI sf}", "bytes", (json_int_t)o->bytes,
					       "controllerCpuMsPerGiB", cpu / gib));
	}
	free(d);
	free(p);
	return r;
}

/* "http://HOST:PORT/…": the Host header's value and the listener's port (on 127.0.0.1). */
static int parse_url(const char *url, char *host, size_t size, uint16_t *ret_port)
{
	const char *h = strncmp(url, "http://", 7) == 0 ? url + 7 : NULL;
	size_t len = h ? strcspn(h, "/") : 0;
	const char *colon = h ? memchr(h, ':', len) : NULL;
	long port = colon ? strtol(colon + 1, NULL, 10) : 0;

	if (!colon || len >= size || port <= 0 || port > 65535)
		return -EINVAL;
	snprintf(host, size, "%.*s", (int)len, h);
	*ret_port = (uint16_t)port;
	return 0;
}

/* Marks the rows from the first one not measured (rows measured earlier stay). */
static int fail_from(const struct bench_opts *o, size_t first, const char *fmt, const char *why)
{
	static const char *const rows[] = { "rtt.direct", "rtt",       "down.direct",
					    "down",	  "up.direct", "up" };
	for (size_t i = first; i < sizeof rows / sizeof rows[0]; i++) {
		char id[128];
		struct bench_opts ro = *o;
		snprintf(id, sizeof id, "%s.%s", o->id, rows[i]);
		ro.id = id;
		bench_emit_fail(&ro, fmt, why);
	}
	return -EIO;
}

int cmd_preview(const struct bench_opts *o)
{
	struct hconn c[2] = { { .name = "direct", .fd = -1 }, { .name = "preview", .fd = -1 } };
	uint16_t lport;
	int fd = -1, r;

	if (!o->url || o->netns_pid <= 0 || o->app_port <= 0 ||
	    parse_url(o->url, c[1].host, sizeof c[1].host, &lport) < 0) {
		fprintf(stderr, "station-bench preview: --url http://HOST:PORT/, --netns-pid and "
				"--app-port are required\n");
		return -EINVAL;
	}
	snprintf(c[0].host, sizeof c[0].host, "127.0.0.1:%d", o->app_port);
	if (!(body_out = malloc(IO_BUFFER)))
		return -ENOMEM;
	for (size_t i = 0; i < IO_BUFFER; i++)
		body_out[i] = (char)(i % 251);
	if ((r = connect_in_netns(o->netns_pid, (uint16_t)o->app_port, &fd)) < 0)
		return fail_from(o, 0, "direct connection inside the namespace: %s", strerror(-r));
	hconn_setup(&c[0], fd);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || (r = connect_loopback(fd, lport)) < 0)
		return fail_from(o, 0, "connection to the preview listener: %s", strerror(errno));
	hconn_setup(&c[1], fd);

	bench_log("%s.rtt: GET / on one keep-alive connection, direct and through the preview in "
		  "turns, %d runs",
		  o->id, o->runs);
	if ((r = measure_rtt(o, c)) < 0)
		return fail_from(o, 0, "a round trip failed: %s", strerror(-r));
	bench_log("%s.down: GET /bytes?n=%" PRIu64 ", direct and through the preview in turns, "
		  "%d reps",
		  o->id, o->bytes, o->reps);
	if ((r = measure_transfer(o, c, false)) < 0)
		return fail_from(o, 2, "a download failed: %s", strerror(-r));
	bench_log("%s.up: POST /sink of %" PRIu64 " bytes, direct and through the preview in "
		  "turns, %d reps",
		  o->id, o->bytes, o->reps);
	if ((r = measure_transfer(o, c, true)) < 0)
		return fail_from(o, 4, "an upload failed: %s", strerror(-r));
	for (int k = 0; k < 2; k++) {
		close(c[k].fd);
		free(c[k].buf);
	}
	free(body_out);
	return 0;
}
