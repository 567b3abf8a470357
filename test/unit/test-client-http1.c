/* SPDX-License-Identifier: MIT */
/* The client's own HTTP/1.1 transport: the response parser byte by byte with hostile answers,
 * then the whole client library against a small server in the test that answers what each
 * test scripts (garbage, a premature close, a kept connection the server dropped). */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "client/http1-parse.h"
#include "station/client.h"

#ifndef MIN
#define MIN(a, b) ((a) < (b) ? (a) : (b))
#endif

/* ---- the parser ---- */

struct collected {
	char body[65536];
	size_t len;
	long head_status;
	int heads;
	char etag[64];
};

static int on_header(const char *name, size_t nl, const char *value, size_t vl, void *u)
{
	struct collected *c = u;

	if (nl == 4 && strncasecmp(name, "etag", 4) == 0 && vl < sizeof c->etag) {
		memcpy(c->etag, value, vl);
		c->etag[vl] = '\0';
	}
	return 0;
}

static int on_head(long status, void *u)
{
	struct collected *c = u;

	c->head_status = status;
	c->heads++;
	return 0;
}

static int on_body(const void *data, size_t len, void *u)
{
	struct collected *c = u;

	cr_assert_leq(c->len + len, sizeof c->body);
	memcpy(c->body + c->len, data, len);
	c->len += len;
	return 0;
}

static void parser_init(struct http1_parser *p, struct collected *c)
{
	memset(p, 0, sizeof *p);
	memset(c, 0, sizeof *c);
	p->on_header = on_header;
	p->on_head = on_head;
	p->on_body = on_body;
	p->userdata = c;
	http1_parser_reset(p);
}

/* Feeds all of s (in pieces of step bytes; 0: at once); returns the last result. */
static int feed(struct http1_parser *p, const char *s, size_t n, size_t step)
{
	size_t off = 0;
	int k = HTTP1_MORE;

	while (off < n) {
		size_t len = step ? MIN(step, n - off) : n - off, used = 0;

		k = http1_parser_feed(p, s + off, len, &used);
		if (k < 0)
			return k;
		off += used;
		if (k != HTTP1_MORE && off < n && k == HTTP1_DONE)
			return k;
	}
	return k;
}

static int feed_str(struct http1_parser *p, const char *s, size_t step)
{
	return feed(p, s, strlen(s), step);
}

Test(http1_parser, content_length_body_in_one_piece_and_byte_by_byte)
{
	static const char ans[] =
		"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nETag: \"v1\"\r\n\r\nhello";

	for (size_t step = 0; step <= 1; step++) {
		struct http1_parser p;
		struct collected c;

		parser_init(&p, &c);
		cr_assert_eq(feed_str(&p, ans, step), HTTP1_DONE);
		cr_expect_eq(c.head_status, 200);
		cr_expect_eq(c.len, 5);
		cr_expect_eq(memcmp(c.body, "hello", 5), 0);
		cr_expect_str_eq(c.etag, "\"v1\"");
		cr_expect(p.keep_alive);
	}
}

Test(http1_parser, chunked_with_extensions_and_trailers)
{
	static const char ans[] = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
				  "3;x=y\r\nabc\r\nA\r\n0123456789\r\n0\r\nX-T: 1\r\n\r\n";

	for (size_t step = 0; step <= 3; step++) {
		struct http1_parser p;
		struct collected c;

		parser_init(&p, &c);
		cr_assert_eq(feed_str(&p, ans, step), HTTP1_DONE, "step %zu", step);
		cr_expect_eq(c.len, 13);
		cr_expect_eq(memcmp(c.body, "abc0123456789", 13), 0);
	}
}

static void expect_proto_error(const char *ans, const char *why)
{
	struct http1_parser p;
	struct collected c;

	for (size_t step = 0; step <= 1; step++) {
		parser_init(&p, &c);
		cr_expect_eq(feed_str(&p, ans, step), -EPROTO, "'%.60s' step %zu", ans, step);
		cr_expect_str_eq(p.error ? p.error : "", why, "'%.60s'", ans);
	}
}

Test(http1_parser, bad_chunk_sizes)
{
	expect_proto_error("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
			   "bad chunk size");
	expect_proto_error("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n\r\n",
			   "bad chunk size");
	expect_proto_error("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n-1\r\n",
			   "bad chunk size");
	expect_proto_error("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcd\r\n",
			   "chunk longer than its size");
}

Test(http1_parser, chunk_size_overflow)
{
	expect_proto_error("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
			   "10000000000000000\r\n",
			   "chunk size too large");
	expect_proto_error("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
			   "fffffffffffffffffffffffff\r\n",
			   "chunk size too large");
}

Test(http1_parser, content_length_garbage_overflow_and_conflict)
{
	expect_proto_error("HTTP/1.1 200 OK\r\nContent-Length: +5\r\n\r\n", "bad Content-Length");
	expect_proto_error("HTTP/1.1 200 OK\r\nContent-Length: 5 5\r\n\r\n", "bad Content-Length");
	expect_proto_error("HTTP/1.1 200 OK\r\nContent-Length:\r\n\r\n", "empty Content-Length");
	expect_proto_error("HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999\r\n\r\n",
			   "Content-Length too large");
	expect_proto_error("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n",
			   "conflicting Content-Length headers");
	expect_proto_error("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
			   "unsupported Transfer-Encoding");
}

Test(http1_parser, status_line_garbage)
{
	expect_proto_error("garbage\r\n", "bad status line");
	expect_proto_error("HTTP/2 200 OK\r\n", "bad status line");
	expect_proto_error("HTTP/1.1 20 OK\r\n", "bad status line");
	expect_proto_error("HTTP/1.1 2000 OK\r\n", "bad status line");
	expect_proto_error("HTTP/1.1 099 X\r\n", "bad status code");
	expect_proto_error("HTTP/1.1 600 X\r\n", "bad status code");
}

Test(http1_parser, missing_crlf_and_control_characters)
{
	expect_proto_error("HTTP/1.1 200 OK\n", "line without CRLF");
	expect_proto_error("HTTP/1.1 200 OK\r\nContent-Length: 0\n\r\n", "line without CRLF");
	expect_proto_error("HTTP/1.1 200 OK\r\nX-A: a\rb\r\n\r\n", "control character in a line");
	expect_proto_error("HTTP/1.1 200 OK\r\n folded: x\r\n\r\n", "bad header name");
	expect_proto_error("HTTP/1.1 200 OK\r\nno colon\r\n\r\n", "bad header line");
}

Test(http1_parser, huge_lines_and_heads_are_refused)
{
	size_t n = HTTP1_LINE_MAX + 100;
	char *s = malloc(n + 64);
	struct http1_parser p;
	struct collected c;
	int k;

	cr_assert_not_null(s);
	/* One header line longer than a line may be. */
	memcpy(s, "HTTP/1.1 200 OK\r\nX-Big: ", 24);
	memset(s + 24, 'a', n);
	s[24 + n] = '\0';
	expect_proto_error(s, "line too long");
	/* A status line that never ends. */
	memset(s, 'H', n);
	s[n] = '\0';
	expect_proto_error(s, "status line too long");
	free(s);

	/* Many lines each below the line limit, together over the head's. */
	parser_init(&p, &c);
	k = feed_str(&p, "HTTP/1.1 200 OK\r\n", 0);
	for (int i = 0; i < 20 && k == HTTP1_MORE; i++) {
		char line[4100];

		memset(line, 'b', sizeof line);
		memcpy(line, "X-H: ", 5);
		memcpy(line + sizeof line - 3, "\r\n", 3);
		k = feed_str(&p, line, 0);
	}
	cr_expect_eq(k, -EPROTO);
	cr_expect_str_eq(p.error, "response head too large");

	/* Many small headers. */
	parser_init(&p, &c);
	k = feed_str(&p, "HTTP/1.1 200 OK\r\n", 0);
	for (int i = 0; i < 200 && k == HTTP1_MORE; i++)
		k = feed_str(&p, "A: b\r\n", 0);
	cr_expect_eq(k, -EPROTO);
	cr_expect_str_eq(p.error, "too many headers");
}

Test(http1_parser, continue_then_the_real_answer)
{
	static const char ans[] = "HTTP/1.1 100 Continue\r\nETag: \"no\"\r\n\r\n"
				  "HTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok";
	struct http1_parser p;
	struct collected c;
	size_t used = 0;

	parser_init(&p, &c);
	cr_assert_eq(http1_parser_feed(&p, ans, sizeof ans - 1, &used), HTTP1_INFO);
	cr_expect_eq(p.status, 100);
	cr_expect_eq(c.heads, 0, "an interim answer is no head for the caller");
	cr_assert_eq(feed(&p, ans + used, sizeof ans - 1 - used, 0), HTTP1_DONE);
	cr_expect_eq(c.head_status, 201);
	cr_expect_eq(c.len, 2);
}

Test(http1_parser, interim_answers_with_a_body_or_a_switch_are_refused)
{
	expect_proto_error("HTTP/1.1 100 Continue\r\nContent-Length: 3\r\n\r\n",
			   "a 1xx answer with a body");
	expect_proto_error("HTTP/1.1 101 Switching Protocols\r\n\r\n",
			   "unexpected protocol switch");
}

Test(http1_parser, no_body_for_204_304_and_head)
{
	struct http1_parser p;
	struct collected c;

	parser_init(&p, &c);
	cr_expect_eq(feed_str(&p, "HTTP/1.1 204 No Content\r\nContent-Length: 9\r\n\r\n", 0),
		     HTTP1_DONE);
	parser_init(&p, &c);
	cr_expect_eq(feed_str(&p, "HTTP/1.1 304 Not Modified\r\n\r\n", 0), HTTP1_DONE);
	parser_init(&p, &c);
	p.no_body = true;
	cr_expect_eq(feed_str(&p, "HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n", 0), HTTP1_DONE);
	cr_expect_eq(c.len, 0);
}

Test(http1_parser, premature_close_and_length_mismatch)
{
	struct http1_parser p;
	struct collected c;
	size_t used;

	/* Fewer bytes than announced, then the end of the connection. */
	parser_init(&p, &c);
	cr_expect_eq(feed_str(&p, "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", 0),
		     HTTP1_MORE);
	cr_expect_eq(http1_parser_eof(&p), -ECONNRESET);
	/* More bytes than announced: the answer ends at its length, the rest is left. */
	parser_init(&p, &c);
	cr_expect_eq(http1_parser_feed(&p, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nabcd", 42,
				       &used),
		     HTTP1_DONE);
	cr_expect_eq(used, 40);
	cr_expect_eq(c.len, 2);
	/* Nothing at all, or a head cut short. */
	parser_init(&p, &c);
	cr_expect_eq(http1_parser_eof(&p), -ECONNRESET);
	cr_expect_not(p.got_bytes);
	parser_init(&p, &c);
	feed_str(&p, "HTTP/1.1 200 OK\r\nContent-Le", 0);
	cr_expect_eq(http1_parser_eof(&p), -ECONNRESET);
	cr_expect(p.got_bytes);
	/* A chunked body cut inside a chunk. */
	parser_init(&p, &c);
	feed_str(&p, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab", 0);
	cr_expect_eq(http1_parser_eof(&p), -ECONNRESET);
	/* Without a length the body ends with the connection, which is then not kept. */
	parser_init(&p, &c);
	cr_expect_eq(feed_str(&p, "HTTP/1.1 200 OK\r\n\r\nuntil close", 0), HTTP1_MORE);
	cr_expect_eq(http1_parser_eof(&p), HTTP1_DONE);
	cr_expect_eq(c.len, 11);
	cr_expect_not(p.keep_alive);
}

Test(http1_parser, connection_close_and_http10)
{
	struct http1_parser p;
	struct collected c;

	parser_init(&p, &c);
	cr_expect_eq(
		feed_str(&p, "HTTP/1.1 200 OK\r\nConnection: x, Close\r\nContent-Length: 0\r\n\r\n",
			 0),
		HTTP1_DONE);
	cr_expect_not(p.keep_alive);
	parser_init(&p, &c);
	cr_expect_eq(feed_str(&p, "HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n", 0), HTTP1_DONE);
	cr_expect_not(p.keep_alive);
}

/* ---- the client library against a scripted server ---- */

struct step {
	bool new_conn;	    /* accept a new connection for this request */
	const char *answer; /* NULL: close as soon as the request's head arrived */
	size_t answer_len;  /* 0: strlen(answer) */
	bool close;	    /* close after answering */
	bool never_answer;  /* keep the connection open and silent until the test ends */
};

struct server {
	char dir[64];
	char path[96];
	int listen_fd;
	const struct step *steps;
	size_t n_steps;
	pthread_t thread;
	/* Results */
	int accepted;
	int requests;
	char first_request[4096];
};

/* Reads one request's head (and a Content-Length body); 0 at EOF, -1 on error. */
static int read_request(int fd, char *out, size_t out_size)
{
	size_t len = 0;
	char *end;
	long body = 0;

	for (;;) {
		ssize_t n;

		if (len + 1 >= out_size)
			return -1;
		n = recv(fd, out + len, 1, 0); /* one byte at a time: never eat the next request */
		if (n <= 0)
			return len == 0 ? 0 : -1;
		len += (size_t)n;
		out[len] = '\0';
		end = strstr(out, "\r\n\r\n");
		if (end)
			break;
	}
	if (strcasestr(out, "content-length: "))
		body = strtol(strcasestr(out, "content-length: ") + 16, NULL, 10);
	for (char ch; body > 0; body--)
		if (recv(fd, &ch, 1, 0) != 1)
			return -1;
	return 1;
}

static void *server_run(void *userdata)
{
	struct server *s = userdata;
	int fd = -1;

	for (size_t i = 0; i < s->n_steps; i++) {
		const struct step *st = &s->steps[i];
		char req[4096];
		struct timeval tv = { .tv_sec = 10 };

		if (st->new_conn || fd < 0) {
			if (fd >= 0)
				close(fd);
			fd = accept(s->listen_fd, NULL, NULL);
			if (fd < 0)
				return NULL;
			setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
			s->accepted++;
		}
		if (read_request(fd, req, sizeof req) <= 0)
			break;
		if (s->requests++ == 0)
			snprintf(s->first_request, sizeof s->first_request, "%s", req);
		if (st->never_answer) {
			/* Silent until the client goes. */
			while (recv(fd, req, sizeof req, 0) > 0)
				;
			break;
		}
		if (!st->answer) {
			close(fd);
			fd = -1;
			continue;
		}
		send(fd, st->answer, st->answer_len ? st->answer_len : strlen(st->answer),
		     MSG_NOSIGNAL);
		if (st->close) {
			close(fd);
			fd = -1;
		}
	}
	if (fd >= 0)
		close(fd);
	return NULL;
}

static void server_start(struct server *s, const struct step *steps, size_t n)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };

	memset(s, 0, sizeof *s);
	snprintf(s->dir, sizeof s->dir, "/tmp/test-http1-XXXXXX");
	cr_assert_not_null(mkdtemp(s->dir));
	snprintf(s->path, sizeof s->path, "%s/api.sock", s->dir);
	snprintf(sa.sun_path, sizeof sa.sun_path, "%s", s->path);
	s->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	cr_assert_geq(s->listen_fd, 0);
	cr_assert_eq(bind(s->listen_fd, (struct sockaddr *)&sa, sizeof sa), 0);
	cr_assert_eq(listen(s->listen_fd, 8), 0);
	s->steps = steps;
	s->n_steps = n;
	cr_assert_eq(pthread_create(&s->thread, NULL, server_run, s), 0);
}

static void server_stop(struct server *s)
{
	shutdown(s->listen_fd, SHUT_RDWR);
	pthread_join(s->thread, NULL);
	close(s->listen_fd);
	unlink(s->path);
	rmdir(s->dir);
}

static struct station_client *client_for(struct server *s)
{
	struct station_client *c = NULL;
	char endpoint[160];

	snprintf(endpoint, sizeof endpoint, "unix:%s", s->path);
	cr_assert_eq(station_client_new(endpoint, "tok", &c), 0);
	return c;
}

/* One GET; returns its result, the body in *ret_body (may be NULL). */
static int get(struct station_client *c, long *ret_status, char **ret_body)
{
	*ret_body = NULL;
	return station_request(c, "GET", "/v1/worker", NULL, ret_status, ret_body);
}

#define OK_ANSWER(body) "HTTP/1.1 200 OK\r\nContent-Length: " #body "\r\n\r\n"

static void expect_request_fails(const struct step *steps, size_t n, int err, const char *msg)
{
	struct server s;
	struct station_client *c;
	char *body = NULL;
	long status = 0;

	server_start(&s, steps, n);
	c = client_for(&s);
	cr_expect_eq(get(c, &status, &body), err, "%s", station_client_last_error(c));
	cr_expect(strstr(station_client_last_error(c), msg), "error '%s' should say '%s'",
		  station_client_last_error(c), msg);
	free(body);
	station_client_free(c);
	server_stop(&s);
}

Test(http1_client, a_request_and_its_answer)
{
	static const struct step steps[] = {
		{ .new_conn = true,
		  .answer = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
			    "2\r\n{}\r\n0\r\n\r\n" },
	};
	struct server s;
	struct station_client *c;
	char *body;
	long status;

	server_start(&s, steps, 1);
	c = client_for(&s);
	cr_assert_eq(get(c, &status, &body), 0, "%s", station_client_last_error(c));
	cr_expect_eq(status, 200);
	cr_expect_str_eq(body, "{}");
	cr_expect(strstr(s.first_request, "GET /v1/worker HTTP/1.1\r\n") == s.first_request);
	cr_expect(strstr(s.first_request, "\r\nAuthorization: Bearer tok\r\n"));
	cr_expect(strstr(s.first_request, "\r\nAccept: application/json\r\n"));
	free(body);
	station_client_free(c);
	server_stop(&s);
}

Test(http1_client, garbage_and_oversized_answers_are_errors)
{
	static const struct step garbage[] = {
		{ .new_conn = true, .answer = "SSH-2.0-OpenSSH\r\n\r\n", .close = true },
	};
	static const struct step overflow[] = {
		{ .new_conn = true,
		  .answer = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
			    "fffffffffffffffffff\r\n",
		  .close = true },
	};

	expect_request_fails(garbage, 1, -EIO, "bad status line");
	expect_request_fails(overflow, 1, -EIO, "chunk size too large");
}

Test(http1_client, a_close_before_or_inside_the_answer_is_a_lost_connection)
{
	static const struct step nothing[] = { { .new_conn = true } };
	static const struct step cut[] = {
		{ .new_conn = true, .answer = OK_ANSWER(10) "abc", .close = true },
	};

	expect_request_fails(nothing, 1, -ECONNRESET, "lost: empty reply from server");
	expect_request_fails(cut, 1, -ECONNRESET, "lost: the answer was cut short");
}

Test(http1_client, api_errors_keep_their_mapping)
{
	static const struct step steps[] = {
		{ .new_conn = true,
		  .answer = "HTTP/1.1 404 Not Found\r\nContent-Length: 50\r\n\r\n"
			    "{\"error\":{\"code\":\"not_found\",\"message\":\"no such\"}}" },
	};
	struct server s;
	struct station_client *c;

	server_start(&s, steps, 1);
	c = client_for(&s);
	cr_expect_eq(station_request_json(c, "GET", "/v1/worker", NULL, NULL), -ENOENT);
	cr_expect_str_eq(station_client_last_error(c), "no such");
	cr_expect_str_eq(station_client_last_error_code(c), "not_found");
	cr_expect_eq(station_client_last_status(c), 404);
	station_client_free(c);
	server_stop(&s);
}

Test(http1_client, a_continue_before_the_answer)
{
	static const struct step steps[] = {
		{ .new_conn = true, .answer = "HTTP/1.1 100 Continue\r\n\r\n" OK_ANSWER(2) "{}" },
	};
	struct server s;
	struct station_client *c;
	char *body;
	long status;

	server_start(&s, steps, 1);
	c = client_for(&s);
	cr_expect_eq(get(c, &status, &body), 0, "%s", station_client_last_error(c));
	cr_expect_eq(status, 200);
	free(body);
	station_client_free(c);
	server_stop(&s);
}

Test(http1_client, the_connection_is_kept_between_calls)
{
	static const struct step steps[] = {
		{ .new_conn = true, .answer = OK_ANSWER(2) "{}" },
		{ .answer = OK_ANSWER(2) "[]" },
		{ .answer = OK_ANSWER(2) "{}" },
	};
	struct server s;
	struct station_client *c;
	char *body;
	long status;

	server_start(&s, steps, 3);
	c = client_for(&s);
	for (int i = 0; i < 3; i++) {
		cr_assert_eq(get(c, &status, &body), 0, "%s", station_client_last_error(c));
		cr_expect_str_eq(body, i == 1 ? "[]" : "{}");
		free(body);
	}
	station_client_free(c);
	server_stop(&s);
	cr_expect_eq(s.accepted, 1);
	cr_expect_eq(s.requests, 3);
}

Test(http1_client, a_kept_connection_closed_before_the_answer_is_replaced_once)
{
	static const struct step steps[] = {
		{ .new_conn = true, .answer = OK_ANSWER(2) "{}" },
		{ .answer = NULL }, /* the kept connection: closed once the request is read */
		{ .new_conn = true, .answer = OK_ANSWER(2) "[]" },
	};
	struct server s;
	struct station_client *c;
	char *body;
	long status;

	server_start(&s, steps, 3);
	c = client_for(&s);
	cr_assert_eq(get(c, &status, &body), 0, "%s", station_client_last_error(c));
	free(body);
	cr_assert_eq(get(c, &status, &body), 0, "%s", station_client_last_error(c));
	cr_expect_str_eq(body, "[]");
	free(body);
	station_client_free(c);
	server_stop(&s);
	cr_expect_eq(s.accepted, 2);
	cr_expect_eq(s.requests, 3);
}

Test(http1_client, never_sent_again_once_part_of_the_answer_came)
{
	static const struct step steps[] = {
		{ .new_conn = true, .answer = OK_ANSWER(2) "{}" },
		{ .answer = "HTTP/1.1 200 OK\r\nContent-Le", .close = true },
		{ .new_conn = true, .answer = OK_ANSWER(2) "[]" }, /* must not be reached */
	};
	struct server s;
	struct station_client *c;
	char *body;
	long status;

	server_start(&s, steps, 3);
	c = client_for(&s);
	cr_assert_eq(get(c, &status, &body), 0, "%s", station_client_last_error(c));
	free(body);
	cr_expect_eq(get(c, &status, &body), -ECONNRESET);
	cr_expect(strstr(station_client_last_error(c), "cut short"), "%s",
		  station_client_last_error(c));
	free(body);
	station_client_free(c);
	server_stop(&s);
	cr_expect_eq(s.accepted, 1);
	cr_expect_eq(s.requests, 2);
}

static int interrupt_after_a_few(void *userdata)
{
	int *calls = userdata;

	return ++*calls >= 3;
}

Test(http1_client, the_interrupt_callback_ends_a_wait)
{
	static const struct step steps[] = { { .new_conn = true, .never_answer = true } };
	struct server s;
	struct station_client *c;
	int calls = 0;
	char *body;
	long status;

	server_start(&s, steps, 1);
	c = client_for(&s);
	station_client_set_interrupt(c, interrupt_after_a_few, &calls);
	cr_expect_eq(get(c, &status, &body), -EINTR);
	cr_expect_str_eq(station_client_last_error(c), "interrupted");
	cr_expect_eq(calls, 3);
	station_client_free(c); /* closes the connection: the server's wait ends */
	server_stop(&s);
}

Test(http1_client, no_controller_and_bad_requests)
{
	struct station_client *c = NULL;
	char *body;
	long status;

	cr_assert_eq(station_client_new("unix:/nonexistent/api.sock", NULL, &c), 0);
	cr_expect_eq(get(c, &status, &body), -ECONNREFUSED);
	cr_expect(strstr(station_client_last_error(c),
			 "no controller at unix:/nonexistent/api.sock"),
		  "%s", station_client_last_error(c));
	/* What would split the request line is refused before any connection. */
	cr_expect_eq(station_request(c, "GET", "/v1/x HTTP/1.1\r\nX: y", NULL, &status, &body),
		     -EINVAL);
	cr_expect(strstr(station_client_last_error(c), "bad request path"));
	cr_expect_eq(station_request(c, "GET\r\n", "/v1/x", NULL, &status, &body), -EINVAL);
	station_client_free(c);
}

Test(http1_client, an_upload_refused_before_its_body_reads_nothing_of_it)
{
	static const struct step steps[] = {
		{ .new_conn = true,
		  .answer = "HTTP/1.1 409 Conflict\r\nContent-Length: 45\r\n\r\n"
			    "{\"error\":{\"code\":\"busy\",\"message\":\"not now\"}}",
		  .close = true },
	};
	struct server s;
	struct station_client *c;
	char got[16];
	int p[2];

	cr_assert_eq(pipe(p), 0);
	cr_assert_eq(write(p[1], "payload", 7), 7);
	close(p[1]);
	server_start(&s, steps, 1);
	c = client_for(&s);
	cr_expect_eq(station_file_upload(c, "ws1", "a.txt", p[0], NULL, NULL), -EBUSY, "%s",
		     station_client_last_error(c));
	cr_expect_str_eq(station_client_last_error(c), "not now");
	cr_expect(strstr(s.first_request, "\r\nExpect: 100-continue\r\n"), "%s", s.first_request);
	cr_expect(strstr(s.first_request, "\r\nTransfer-Encoding: chunked\r\n"), "%s",
		  s.first_request);
	/* The body never left: all of it is still in the pipe. */
	cr_expect_eq(read(p[0], got, sizeof got), 7);
	close(p[0]);
	station_client_free(c);
	server_stop(&s);
}
