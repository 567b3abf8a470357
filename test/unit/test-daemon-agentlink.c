/* SPDX-License-Identifier: MIT */
/* The controller's side of the agent link (daemon/agentlink*.c): frames the test builds with
 * proto/frame.h, written by the test playing the agent on a real socket, each followed by a
 * HELLO_OK; agentlink_wait_hello() then returns the first refusal, or 0 when every frame was
 * accepted. Each refusal has an accepted frame beside it that differs in the one field. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "basic/cleanup.h"
#include "daemon/agentlink.h"
#include "event/event.h"
#include "proto/agent-proto.h"
#include "proto/frame.h"

/* ---- what the link handed to the manager ---------------------------------------------------- */

struct got {
	int hello, started, output, done, error, closed;
	int service_hello, service_state, service_attempt, service_output, service_error;
	int terminal_hello, terminal_opened, terminal_output, terminal_replay, terminal_exit;
	int cred;
	char cred_fields[1400];
	int usage;
	size_t n_usage;
	char usage_text[256]; /* the first entries as "id cpu mem," or "name/attempt cpu mem," */
	uint64_t seq, pid, started_at, offset, attempt, request;
	int stream;
	size_t n_ids, n_names, n_terms, data_len;
	char id[128], reason[1100], data[64], ids[256];
	struct run_row run;		      /* scalars of run_done's row */
	struct service_attempt_row att;	      /* scalars of service_attempt's row */
	char head[2][64], tail[2][64];	      /* of either */
	struct agentlink_service_state state; /* scalars */
	struct agentlink_terminal_exit term;  /* scalars */
};

static struct got got;

static void copy(char *dst, size_t size, const void *src, size_t n)
{
	cr_assert_lt(n, size);
	memcpy(dst, src, n);
	dst[n] = 0;
}

static void copy_str(char *dst, size_t size, const char *s)
{
	copy(dst, size, s, strlen(s));
}

static void append(char *dst, size_t size, const char *s)
{
	size_t len = strlen(dst);

	copy(dst + len, size - len, s, strlen(s));
}

static void copy_out(const struct run_output *o)
{
	for (int i = 0; i < 2; i++) {
		copy(got.head[i], sizeof got.head[i], o[i].head ? (char *)o[i].head : "",
		     o[i].head_len);
		copy(got.tail[i], sizeof got.tail[i], o[i].tail ? (char *)o[i].tail : "",
		     o[i].tail_len);
	}
}

static void on_hello(void *u, uint64_t pid, char **ids, size_t n)
{
	got.hello++;
	got.pid = pid;
	got.n_ids = n;
	for (size_t i = 0; i < n; i++) {
		append(got.ids, sizeof got.ids, ids[i]);
		append(got.ids, sizeof got.ids, ",");
	}
}

static void on_started(void *u, const char *id, uint64_t started_at)
{
	got.started++;
	copy_str(got.id, sizeof got.id, id);
	got.started_at = started_at;
}

static void on_output(void *u, const char *id, int stream, uint64_t offset, const uint8_t *data,
		      size_t n)
{
	got.output++;
	copy_str(got.id, sizeof got.id, id);
	got.stream = stream;
	got.offset = offset;
	got.data_len = n;
	copy(got.data, sizeof got.data, data ? (const char *)data : "", n);
}

static void on_done(void *u, uint64_t seq, const struct run_row *r)
{
	got.done++;
	got.seq = seq;
	copy_str(got.id, sizeof got.id, r->id);
	copy_str(got.reason, sizeof got.reason, r->reason ? r->reason : "(null)");
	got.run = *r;
	copy_out(r->out);
	got.run.id = got.run.reason = NULL;
	for (int i = 0; i < 2; i++)
		got.run.out[i].head = got.run.out[i].tail = NULL;
}

static void on_error(void *u, const char *id, const char *reason)
{
	got.error++;
	copy_str(got.id, sizeof got.id, id ? id : "(null)");
	copy_str(got.reason, sizeof got.reason, reason);
}

static void on_closed(void *u, int err)
{
	got.closed++;
}

static void on_service_hello(void *u, char **names, size_t n)
{
	got.service_hello++;
	got.n_names = n;
	for (size_t i = 0; i < n; i++) {
		append(got.ids, sizeof got.ids, names[i]);
		append(got.ids, sizeof got.ids, ",");
	}
}

static void on_service_state(void *u, uint64_t seq, const struct agentlink_service_state *s)
{
	got.service_state++;
	got.seq = seq;
	copy_str(got.id, sizeof got.id, s->name);
	append(got.id, sizeof got.id, "/");
	append(got.id, sizeof got.id, s->id);
	copy_str(got.reason, sizeof got.reason, s->reason ? s->reason : "(null)");
	got.state = *s;
	got.state.name = got.state.id = got.state.reason = NULL;
}

static void on_service_attempt(void *u, uint64_t seq, const char *name,
			       const struct service_attempt_row *a)
{
	got.service_attempt++;
	got.seq = seq;
	copy_str(got.id, sizeof got.id, name);
	append(got.id, sizeof got.id, "/");
	append(got.id, sizeof got.id, a->service_id);
	copy_str(got.reason, sizeof got.reason, a->reason ? a->reason : "(null)");
	got.att = *a;
	copy_out(a->out);
	got.att.service_id = got.att.reason = NULL;
	for (int i = 0; i < 2; i++)
		got.att.out[i].head = got.att.out[i].tail = NULL;
}

static void on_service_output(void *u, const char *name, uint64_t attempt, int stream,
			      uint64_t offset, const uint8_t *data, size_t n)
{
	on_output(u, name, stream, offset, data, n);
	got.output--;
	got.service_output++;
	got.attempt = attempt;
}

static void on_service_error(void *u, const char *name, const char *reason)
{
	got.service_error++;
	copy_str(got.id, sizeof got.id, name);
	copy_str(got.reason, sizeof got.reason, reason);
}

static void on_terminal_hello(void *u, char **ids, size_t n)
{
	got.terminal_hello++;
	got.n_terms = n;
	for (size_t i = 0; i < n; i++) {
		append(got.ids, sizeof got.ids, ids[i]);
		append(got.ids, sizeof got.ids, ",");
	}
}

static void on_terminal_opened(void *u, const char *id, uint64_t pid, uint64_t started_at,
			       const char *command)
{
	got.terminal_opened++;
	copy_str(got.id, sizeof got.id, id);
	copy_str(got.data, sizeof got.data, command);
	got.request = pid;
	got.started_at = started_at;
}

static void on_terminal_output(void *u, const char *id, uint64_t offset, const uint8_t *data,
			       size_t n)
{
	on_output(u, id, -1, offset, data, n);
	got.output--;
	got.terminal_output++;
}

static void on_terminal_replay(void *u, const char *id, uint64_t request, uint64_t offset,
			       const uint8_t *data, size_t n)
{
	on_output(u, id, -1, offset, data, n);
	got.output--;
	got.terminal_replay++;
	got.request = request;
}

static void on_terminal_exit(void *u, uint64_t seq, const struct agentlink_terminal_exit *x)
{
	got.terminal_exit++;
	got.seq = seq;
	copy_str(got.id, sizeof got.id, x->id);
	copy_str(got.reason, sizeof got.reason, x->reason ? x->reason : "(null)");
	got.term = *x;
	got.term.id = got.term.reason = NULL;
}

static void on_cred_request(void *u, const struct agentlink_cred_request *r)
{
	char n[32];

	got.cred++;
	got.request = r->request;
	snprintf(n, sizeof n, "%llu ", (unsigned long long)r->request);
	copy_str(got.cred_fields, sizeof got.cred_fields, n);
	append(got.cred_fields, sizeof got.cred_fields, r->protocol);
	append(got.cred_fields, sizeof got.cred_fields, " ");
	append(got.cred_fields, sizeof got.cred_fields, r->host);
	append(got.cred_fields, sizeof got.cred_fields, " ");
	append(got.cred_fields, sizeof got.cred_fields, r->path ? r->path : "(null)");
	append(got.cred_fields, sizeof got.cred_fields, " ");
	append(got.cred_fields, sizeof got.cred_fields, r->username ? r->username : "(null)");
}

static void on_usage(void *u, uint64_t request, const struct agentlink_usage *v, size_t n)
{
	got.usage++;
	got.request = request;
	got.n_usage = n;
	got.usage_text[0] = 0;
	for (size_t i = 0; i < n && i < 4; i++) {
		char one[128];

		if (v[i].run_id)
			snprintf(one, sizeof one, "%s %lu %lu,", v[i].run_id,
				 (unsigned long)v[i].cpu_usec, (unsigned long)v[i].memory_bytes);
		else
			snprintf(one, sizeof one, "%s/%lu %lu %lu,", v[i].service,
				 (unsigned long)v[i].attempt, (unsigned long)v[i].cpu_usec,
				 (unsigned long)v[i].memory_bytes);
		append(got.usage_text, sizeof got.usage_text, one);
	}
}

static const struct agentlink_ops ops = {
	.hello = on_hello,
	.run_started = on_started,
	.run_output = on_output,
	.run_done = on_done,
	.run_error = on_error,
	.closed = on_closed,
	.service_hello = on_service_hello,
	.service_state = on_service_state,
	.service_attempt = on_service_attempt,
	.service_output = on_service_output,
	.service_error = on_service_error,
	.terminal_hello = on_terminal_hello,
	.terminal_opened = on_terminal_opened,
	.terminal_output = on_terminal_output,
	.terminal_replay = on_terminal_replay,
	.terminal_exit = on_terminal_exit,
	.cred_request = on_cred_request,
	.usage = on_usage,
};

/* ---- the test's agent ------------------------------------------------------------------------ */

static char dir[] = "/tmp/test-agentlink-XXXXXX";
static char sock_path[sizeof(((struct sockaddr_un *)0)->sun_path)];
static struct event_loop *loop;
static struct agentlink *link_;
static int peer = -1;
static struct buf out; /* frames not yet written */
static size_t start;

static void setup(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	static const uint8_t secret[16] = { 1, 2, 3 };
	int lfd;

	memset(&got, 0, sizeof got);
	cr_assert_not_null(mkdtemp(dir));
	snprintf(sock_path, sizeof sock_path, "%s/agent.sock", dir);
	memcpy(sa.sun_path, sock_path, sizeof sock_path);
	lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	cr_assert_geq(lfd, 0);
	cr_assert_eq(bind(lfd, (struct sockaddr *)&sa, sizeof sa), 0);
	cr_assert_eq(listen(lfd, 1), 0);
	cr_assert_eq(event_loop_new(&loop), 0);
	cr_assert_eq(agentlink_connect(loop, sock_path, secret, sizeof secret, &ops, NULL, &link_),
		     0);
	peer = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	cr_assert_geq(peer, 0);
	close(lfd);
}

static void teardown(void)
{
	agentlink_free(link_);
	event_loop_free(loop);
	if (peer >= 0)
		close(peer);
	buf_free(&out);
	unlink(sock_path);
	rmdir(dir);
}

TestSuite(agentlink, .init = setup, .fini = teardown);

static void begin(uint16_t type, uint64_t seq)
{
	cr_assert_eq(frame_begin(&out, &start, type, seq), 0);
}

static void put_u64(uint16_t tag, uint64_t v)
{
	cr_assert_eq(frame_put_u64(&out, tag, v), 0);
}

static void put_str(uint16_t tag, const char *s)
{
	cr_assert_eq(frame_put_str(&out, tag, s), 0);
}

static void put_bytes(uint16_t tag, const void *p, size_t n)
{
	cr_assert_eq(frame_put_bytes(&out, tag, p, n), 0);
}

static void end(void)
{
	cr_assert_eq(frame_end(&out, start), 0);
}

/* Writes the frames built so far and a HELLO_OK; returns what the link made of them. */
static int feed(void)
{
	const uint8_t *p;
	size_t left;

	begin(MSG_HELLO_OK, 0);
	put_u64(TAG_VERSION, PROTO_VERSION);
	end();
	p = out.data;
	left = out.len;
	while (left > 0) {
		ssize_t n = write(peer, p, left);
		cr_assert_gt(n, 0);
		p += n;
		left -= (size_t)n;
	}
	buf_free(&out);
	return agentlink_wait_hello(link_, 5000);
}

/* ---- HELLO_OK, RUN_STARTED, ERROR ------------------------------------------------------------ */

Test(agentlink, hello_lists)
{
	begin(MSG_HELLO_OK, 0);
	put_u64(TAG_PID, 42);
	put_str(TAG_RUN_ID, "r1");
	put_str(TAG_SERVICE_NAME, "web");
	put_str(TAG_RUN_ID, "r2");
	put_str(TAG_TERM_ID, "t1");
	put_u64(999, 7);
	put_str(998, "ignored");
	end();
	cr_assert_eq(feed(), 0);
	cr_assert_eq(got.hello, 2); /* and the plain one feed() sends */
	cr_assert_eq(got.service_hello, 2);
	cr_assert_eq(got.terminal_hello, 2);
	cr_assert_str_eq(got.ids, "web,r1,r2,t1,");
}

/* An agent says what it speaks beyond version 1; one that says nothing (an agent started before
 * a controller upgrade) is never sent FILE_OPEN or USAGE_REQUEST. */
Test(agentlink, hello_features)
{
	cr_assert_eq(feed(), 0); /* a HELLO_OK without FEATURES */
	cr_assert(!agentlink_has_feature(link_, AGENT_FEATURE_FILES));
	cr_assert(!agentlink_has_feature(link_, AGENT_FEATURE_USAGE));
}

Test(agentlink, hello_features_named)
{
	const uint8_t *p;
	size_t left;

	cr_assert(!agentlink_has_feature(link_, AGENT_FEATURE_FILES)); /* before HELLO_OK */
	begin(MSG_HELLO_OK, 0);
	put_u64(TAG_VERSION, PROTO_VERSION);
	put_u64(TAG_FEATURES, AGENT_FEATURE_FILES | AGENT_FEATURE_USAGE);
	end();
	for (p = out.data, left = out.len; left > 0;) {
		ssize_t n = write(peer, p, left);
		cr_assert_gt(n, 0);
		p += n;
		left -= (size_t)n;
	}
	buf_free(&out);
	cr_assert_eq(agentlink_wait_hello(link_, 5000), 0);
	cr_assert(agentlink_has_feature(link_, AGENT_FEATURE_FILES));
	cr_assert(agentlink_has_feature(link_, AGENT_FEATURE_USAGE));
	cr_assert(!agentlink_has_feature(link_, AGENT_FEATURE_CREDENTIALS));
}

Test(agentlink, hello_refusals)
{
	begin(MSG_HELLO_OK, 0);
	put_str(TAG_PID, "x");
	end();
	cr_assert_eq(feed(), -EBADMSG);
	cr_assert_eq(got.hello, 0);
	cr_assert_eq(got.service_hello, 0);
}

Test(agentlink, hello_long_id)
{
	char id[PROTO_MAX_ID + 2];

	memset(id, 'a', sizeof id - 1);
	id[sizeof id - 1] = 0;
	begin(MSG_HELLO_OK, 0);
	put_str(TAG_SERVICE_NAME, id);
	end();
	cr_assert_eq(feed(), -E2BIG);
	cr_assert_eq(got.hello, 0);
}

Test(agentlink, hello_long_term_id)
{
	char id[PROTO_MAX_ID + 2];

	memset(id, 'a', sizeof id - 1);
	id[sizeof id - 1] = 0;
	begin(MSG_HELLO_OK, 0);
	put_str(TAG_TERM_ID, id);
	end();
	cr_assert_eq(feed(), -E2BIG);
	cr_assert_eq(got.hello, 1); /* runs and services are reported before terminals */
	cr_assert_eq(got.terminal_hello, 0);
}

Test(agentlink, run_started_and_error)
{
	begin(MSG_RUN_STARTED, 0);
	put_str(TAG_RUN_ID, "r1");
	put_str(TAG_RUN_ID, "r2"); /* the first wins */
	put_u64(TAG_STARTED_AT, 77);
	put_u64(TAG_STARTED_AT, 78); /* the last wins */
	end();
	cr_assert_eq(feed(), 0);
	cr_assert_eq(got.started, 1);
	cr_assert_str_eq(got.id, "r1");
	cr_assert_eq(got.started_at, 78);
}

Test(agentlink, run_started_without_id_is_ignored)
{
	begin(MSG_RUN_STARTED, 0);
	put_u64(TAG_STARTED_AT, 77);
	end();
	cr_assert_eq(feed(), 0);
	cr_assert_eq(got.started, 0);
}

Test(agentlink, run_started_bad_u64)
{
	begin(MSG_RUN_STARTED, 0);
	put_str(TAG_RUN_ID, "r1");
	put_bytes(TAG_STARTED_AT, "1234", 4);
	end();
	cr_assert_eq(feed(), -EBADMSG);
	cr_assert_eq(got.started, 0);
}

Test(agentlink, errors)
{
	begin(MSG_ERROR, 0);
	put_str(TAG_RUN_ID, "r1");
	end();
	cr_assert_eq(feed(), 0);
	cr_assert_eq(got.error, 1);
	cr_assert_str_eq(got.id, "r1");
	cr_assert_str_eq(got.reason, "unknown error");
}

Test(agentlink, error_for_service)
{
	begin(MSG_ERROR, 0);
	put_str(TAG_SERVICE_NAME, "web");
	put_str(TAG_REASON, "no such service");
	put_str(TAG_REASON, "second"); /* the first wins */
	end();
	cr_assert_eq(feed(), 0);
	cr_assert_eq(got.service_error, 1);
	cr_assert_eq(got.error, 0);
	cr_assert_str_eq(got.id, "web");
	cr_assert_str_eq(got.reason, "no such service");
}

Test(agentlink, error_without_id)
{
	begin(MSG_ERROR, 0);
	put_str(TAG_REASON, "bad frame");
	end();
	cr_assert_eq(feed(), 0);
	cr_assert_eq(got.error, 1);
	cr_assert_str_eq(got.id, "(null)");
	cr_assert_str_eq(got.reason, "bad frame");
}

Test(agentlink, error_long_reason)
{
	char reason[1026];

	memset(reason, 'x', sizeof reason - 1);
	reason[sizeof reason - 1] = 0;
	begin(MSG_ERROR, 0);
	put_str(TAG_REASON, reason);
	end();
	cr_assert_eq(feed(), -E2BIG);
	cr_assert_eq(got.error, 0);
}

Test(agentlink, unknown_type)
{
	begin(99, 0);
	end();
	cr_assert_eq(feed(), -EBADMSG);
}

/* ---- RUN_OUTPUT, SERVICE_OUTPUT -------------------------------------------------------------- */

static void run_output(uint64_t stream, uint64_t offset)
{
	begin(MSG_RUN_OUTPUT, 0);
	put_str(TAG_RUN_ID, "r1");
	put_str(TAG_RUN_ID, "r2");
	put_u64(TAG_ATTEMPT, 5); /* not a run's field: skipped */
	put_u64(TAG_STREAM, stream);
	put_u64(TAG_OFFSET, offset);
	put_bytes(TAG_DATA, "first", 5);
	put_bytes(TAG_DATA, "hello", 5); /* the last wins */
	put_str(999, "unknown");
	end();
}

Test(agentlink, run_output)
{
	run_output(RUN_STREAM_STDERR, 100);
	cr_assert_eq(feed(), 0);
	cr_assert_eq(got.output, 1);
	cr_assert_str_eq(got.id, "r1");
	cr_assert_eq(got.stream, RUN_STREAM_STDERR);
	cr_assert_eq(got.offset, 100);
	cr_assert_str_eq(got.data, "hello");
}

Test(agentlink, run_output_attempt_any_length)
{
	begin(MSG_RUN_OUTPUT, 0);
	put_str(TAG_RUN_ID, "r1");
	put_str(TAG_ATTEMPT, "x");
	put_u64(TAG_STREAM, RUN_STREAM_STDOUT);
	end();
	cr_assert_eq(feed(), 0);
	cr_assert_eq(got.output, 1);
	cr_assert_eq(got.stream, RUN_STREAM_STDOUT);
	cr_assert_eq(got.data_len, 0);
}

Test(agentlink, run_output_without_stream)
{
	begin(MSG_RUN_OUTPUT, 0);
	put_str(TAG_RUN_ID, "r1");
	end();
	cr_assert_eq(feed(), -EBADMSG);
}

Test(agentlink, run_output_refusals)
{
	run_output(_RUN_STREAM_MAX, 0);
	cr_assert_eq(feed(), -EBADMSG);
	cr_assert_eq(got.output, 0);
}

Test(agentlink, run_output_offset_overflow)
{
	run_output(RUN_STREAM_STDOUT, UINT64_MAX - 4);
	cr_assert_eq(feed(), -EBADMSG);
	cr_assert_eq(got.output, 0);
}

Test(agentlink, run_output_offset_edge)
{
	run_output(RUN_STREAM_STDOUT, UINT64_MAX - 5);
	cr_assert_eq(feed(), 0);
	cr_assert_eq(got.output, 1);
}

Test(agentlink, run_output_without_id)
{
	begin(MSG_RUN_OUTPUT, 0);
	put_u64(TAG_STREAM, 0);
	end();
	cr_assert_eq(feed(), -EBADMSG);
}

Test(agentlink, run_output_service_name_is_not_an_id)
{
	begin(MSG_RUN_OUTPUT, 0);
	put_str(TAG_SERVICE_NAME, "web");
	end();
	cr_assert_eq(feed(), -EBADMSG);
}

Test(agentlink, run_output_bad_offset)
{
	begin(MSG_RUN_OUTPUT, 0);
	put_str(TAG_RUN_ID, "r1");
	put_u64(TAG_STREAM, RUN_STREAM_STDOUT);
	put_bytes(TAG_OFFSET, "1", 1);
	end();
	cr_assert_eq(feed(), -EBADMSG);
}

static void service_output(uint64_t stream)
{
	begin(MSG_SERVICE_OUTPUT, 0);
	put_str(TAG_SERVICE_NAME, "web");
	put_str(TAG_SERVICE_NAME, "db");
	put_u64(TAG_ATTEMPT, 3);
	put_u64(TAG_STREAM, stream);
	put_u64(TAG_OFFSET, 9);
	put_bytes(TAG_DATA, "out", 3);
	put_str(TAG_RUN_ID, "ignored");
	end();
}

Test(agentlink, service_output)
{
	service_output(RUN_STREAM_STDOUT);
	cr_assert_eq(feed(), 0);
	cr_assert_eq(got.service_output, 1);
	cr_assert_str_eq(got.id, "web");
	cr_assert_eq(got.attempt, 3);
	cr_assert_eq(got.stream, RUN_STREAM_STDOUT);
	cr_assert_eq(got.offset, 9);
	cr_assert_str_eq(got.data, "out");
}

Test(agentlink, service_output_refusals)
{
	service_output(0);
	cr_assert_eq(feed(), -EBADMSG);
	cr_assert_eq(got.service_output, 0);
}

Test(agentlink, service_output_bad_attempt)
{
	begin(MSG_SERVICE_OUTPUT, 0);
	put_str(TAG_SERVICE_NAME, "web");
	put_u64(TAG_STREAM, RUN_STREAM_STDOUT);
	put_str(TAG_ATTEMPT, "x");
	end();
	cr_assert_eq(feed(), -EBADMSG);
}

Test(agentlink, service_output_without_name)
{
	begin(MSG_SERVICE_OUTPUT, 0);
	put_str(TAG_RUN_ID, "r1");
	end();
	cr_assert_eq(feed(), -EBADMSG);
}

/* ---- RUN_DONE -------------------------------------------------------------------------------- */

/* A complete DONE up to its end; tests add a field, then end(). */
static void run_done(uint64_t seq)
{
	begin(MSG_RUN_DONE, seq);
	put_str(TAG_RUN_ID, "r1");
	put_u64(TAG_STATUS, RUN_KILLED);
	put_u64(TAG_EXIT_CODE, 3);
	put_u64(TAG_SIGNAL, 9);
	put_u64(TAG_OOM_KILLED, 2);
	put_str(TAG_REASON, "why");
	put_bytes(TAG_STDOUT_HEAD, "head", 4);
	put_bytes(TAG_STDOUT_TAIL, "tail", 4);
	put_u64(TAG_STDOUT_BYTES, 8);
	put_bytes(TAG_STDERR_HEAD, "err", 3);
	put_u64(TAG_STDERR_BYTES, 10);
	put_u64(TAG_STARTED_AT, 11);
	put_u64(TAG_ENDED_AT, 12);
	put_u64(TAG_CPU_USEC, 13);
	put_u64(TAG_PEAK_MEMORY, 14);
	put_u64(999, 1); /* unknown: skipped */
}

Test(agentlink, run_done)
{
	run_done(5);
	end();
	cr_assert_eq(feed(), 0);
	cr_assert_eq(got.done, 1);
	cr_assert_eq(got.seq, 5);
	cr_assert_str_eq(got.id, "r1");
	cr_assert_str_eq(got.reason, "why");
	cr_assert_eq(got.run.status, RUN_KILLED);
	cr_assert_eq(got.run.exit_code, 3);
	cr_assert_eq(got.run.signal, 9);
	cr_assert(got.run.oom_killed);
	cr_assert(got.run.truncated); /* stderr: 3 of 10 */
	cr_assert_str_eq(got.head[0], "head");
	cr_assert_str_eq(got.tail[0], "tail");
	cr_assert_str_eq(got.head[1], "err");
	cr_assert_str_eq(got.tail[1], "");
	cr_assert_eq(got.run.out[0].total, 8);
	cr_assert_eq(got.run.out[1].total, 10);
	cr_assert_eq(got.run.started_at, 11);
	cr_assert_eq(got.run.ended_at, 12);
	cr_assert_eq(got.run.cpu_usec, 13);
	cr_assert_eq(got.run.peak_memory, 14);
}

Test(agentlink, run_done_minimal)
{
	begin(MSG_RUN_DONE, 0); /* seq 0 is not checked for runs */
	put_str(TAG_RUN_ID, "r1");
	put_u64(TAG_STATUS, RUN_EXITED);
	put_bytes(TAG_STDOUT_HEAD, "", 0);
	end();
	cr_assert_eq(feed(), 0);
	cr_assert_eq(got.done, 1);
	cr_assert_eq(got.run.exit_code, -1);
	cr_assert_eq(got.run.signal, 0);
	cr_assert(!got.run.truncated);
	cr_assert(!got.run.oom_killed);
	cr_assert_str_eq(got.reason, "(null)");
}

Test(agentlink, run_done_out_of_range_values)
{
	run_done(5);
	put_u64(TAG_EXIT_CODE, 256);
	put_u64(TAG_SIGNAL, 128);
	end();
	cr_assert_eq(feed(), 0);
	cr_assert_eq(got.run.exit_code, -1);
	cr_assert_eq(got.run.signal, 0);
}

Test(agentlink, run_done_edge_values)
{
	run_done(5);
	put_u64(TAG_EXIT_CODE, 255);
	put_u64(TAG_SIGNAL, 127);
	put_u64(TAG_STATUS, RUN_FAILED_TO_START);
	end();
	cr_assert_eq(feed(), 0);
	cr_assert_eq(got.run.exit_code, 255);
	cr_assert_eq(got.run.signal, 127);
	cr_assert_eq(got.run.status, RUN_FAILED_TO_START);
}

/* Today a status out of range, or none, reaches run_done as (enum run_status)-1: the "status <
 * RUN_EXITED" check compares an unsigned enum. Pinned here so that a change is deliberate. */
Test(agentlink, run_done_bad_status)
{
	run_done(5);
	put_u64(TAG_STATUS, RUN_LOST);
	end();
	cr_assert_eq(feed(), -EBADMSG);
	cr_assert_eq(got.done, 0);
}

Test(agentlink, run_done_running_status)
{
	run_done(5);
	put_u64(TAG_STATUS, RUN_RUNNING);
	end();
	cr_assert_eq(feed(), -EBADMSG);
	cr_assert_eq(got.done, 0);
}

Test(agentlink, run_done_without_status)
{
	begin(MSG_RUN_DONE, 1);
	put_str(TAG_RUN_ID, "r1");
	end();
	cr_assert_eq(feed(), -EBADMSG);
	cr_assert_eq(got.done, 0);
}

Test(agentlink, run_done_without_id)
{
	begin(MSG_RUN_DONE, 1);
	put_u64(TAG_STATUS, RUN_EXITED);
	end();
	cr_assert_eq(feed(), -EBADMSG);
}

Test(agentlink, run_done_repeated_id)
{
	run_done(5);
	put_str(TAG_RUN_ID, "r1");
	end();
	cr_assert_eq(feed(), -EBADMSG);
}

Test(agentlink, run_done_repeated_reason)
{
	run_done(5);
	put_str(TAG_REASON, "again");
	end();
	cr_assert_eq(feed(), -EBADMSG);
}

Test(agentlink, run_done_repeated_head)
{
	run_done(5);
	put_bytes(TAG_STDERR_HEAD, "", 0);
	end();
	cr_assert_eq(feed(), -EBADMSG);
}

Test(agentlink, run_done_repeated_tail)
{
	run_done(5);
	put_bytes(TAG_STDOUT_TAIL, "", 0);
	end();
	cr_assert_eq(feed(), -EBADMSG);
}

Test(agentlink, run_done_more_kept_than_produced)
{
	run_done(5);
	put_u64(TAG_STDOUT_BYTES, 7);
	end();
	cr_assert_eq(feed(), -EBADMSG);
}

Test(agentlink, run_done_kept_all)
{
	run_done(5);
	put_u64(TAG_STDERR_BYTES, 3);
	end();
	cr_assert_eq(feed(), 0);
	cr_assert(!got.run.truncated);
}

Test(agentlink, run_done_unknown_tag_must_be_u64)
{
	run_done(5);
	put_str(998, "abc");
	end();
	cr_assert_eq(feed(), -EBADMSG);
}

Test(agentlink, run_done_long_reason)
{
	char reason[1026];

	memset(reason, 'x', sizeof reason - 1);
	reason[sizeof reason - 1] = 0;
	begin(MSG_RUN_DONE, 1);
	put_str(TAG_REASON, reason);
	end();
	cr_assert_eq(feed(), -E2BIG);
}

Test(agentlink, run_done_reason_with_nul)
{
	begin(MSG_RUN_DONE, 1);
	put_bytes(TAG_REASON, "a\0b", 3);
	end();
	cr_assert_eq(feed(), -EBADMSG);
}

/* ---- SERVICE_STATE --------------------------------------------------------------------------- */

static void service_state(uint64_t seq)
{
	begin(MSG_SERVICE_STATE, seq);
	put_str(TAG_SERVICE_NAME, "web");
	put_str(TAG_SERVICE_ID, "s1");
	put_u64(TAG_SERVICE_STATE, SERVICE_BACKOFF);
	put_u64(TAG_RESTART_COUNT, 2);
	put_u64(TAG_ATTEMPT, 3);
	put_u64(TAG_PID, 0);
	put_u64(TAG_STARTED_AT, 4);
	put_u64(TAG_NEXT_RESTART_AT, 5);
	put_u64(TAG_STOPPING, 6);
	put_str(TAG_REASON, "crashed");
	put_str(999, "unknown");
}

Test(agentlink, service_state)
{
	service_state(8);
	end();
	cr_assert_eq(feed(), 0);
	cr_assert_eq(got.service_state, 1);
	cr_assert_eq(got.seq, 8);
	cr_assert_str_eq(got.id, "web/s1");
	cr_assert_str_eq(got.reason, "crashed");
	cr_assert_eq(got.state.state, SERVICE_BACKOFF);
	cr_assert_eq(got.state.restart_count, 2);
	cr_assert_eq(got.state.attempt, 3);
	cr_assert_eq(got.state.pid, 0);
	cr_assert_eq(got.state.started_at, 4);
	cr_assert_eq(got.state.next_restart_at, 5);
	cr_assert(got.state.stopping);
}

Test(agentlink, service_state_pid_edge)
{
	service_state(8);
	put_u64(TAG_PID, INT32_MAX);
	end();
	cr_assert_eq(feed(), 0);
	cr_assert_eq(got.state.pid, INT32_MAX);
}

Test(agentlink, service_state_refusals)
{
	service_state(0);
	end();
	cr_assert_eq(feed(), -EBADMSG);
	cr_assert_eq(got.service_state, 0);
}

Test(agentlink, service_state_pid_too_large)
{
	service_state(8);
	put_u64(TAG_PID, (uint64_t)INT32_MAX + 1);
	end();
	cr_assert_eq(feed(), -EBADMSG);
}

Test(agentlink, service_state_bad_state)
{
	service_state(8);
	put_u64(TAG_SERVICE_STATE, _SERVICE_STATE_MAX);
	end();
	cr_assert_eq(feed(), -EBADMSG);
}

Test(agentlink, service_state_without_state)
{
	begin(MSG_SERVICE_STATE, 1);
	put_str(TAG_SERVICE_NAME, "web");
	put_str(TAG_SERVICE_ID, "s1");
	end();
	cr_assert_eq(feed(), -EBADMSG);
}

Test(agentlink, service_state_without_id)
{
	begin(MSG_SERVICE_STATE, 1);
	put_str(TAG_SERVICE_NAME, "web");
	put_u64(TAG_SERVICE_STATE, 0);
	end();
	cr_assert_eq(feed(), -EBADMSG);
}

Test(agentlink, service_state_without_name)
{
	begin(MSG_SERVICE_STATE, 1);
	put_str(TAG_SERVICE_ID, "s1");
	put_u64(TAG_SERVICE_STATE, 0);
	end();
	cr_assert_eq(feed(), -EBADMSG);
}

Test(agentlink, service_state_repeated_name)
{
	service_state(8);
	put_str(TAG_SERVICE_NAME, "web");
	end();
	cr_assert_eq(feed(), -EBADMSG);
}

Test(agentlink, service_state_repeated_reason)
{
	service_state(8);
	put_str(TAG_REASON, "again");
	end();
	cr_assert_eq(feed(), -EBADMSG);
}

Test(agentlink, service_state_bad_u64)
{
	service_state(8);
	put_bytes(TAG_STOPPING, "x", 1);
	end();
	cr_assert_eq(feed(), -EBADMSG);
}

/* ---- SERVICE_ATTEMPT_DONE -------------------------------------------------------------------- */

static void attempt_done(uint64_t seq)
{
	begin(MSG_SERVICE_ATTEMPT_DONE, seq);
	put_str(TAG_SERVICE_NAME, "web");
	put_str(TAG_SERVICE_ID, "s1");
	put_u64(TAG_ATTEMPT, 4);
	put_u64(TAG_END_REASON, ATTEMPT_KILLED);
	put_u64(TAG_EXIT_CODE, 1);
	put_u64(TAG_SIGNAL, 15);
	put_u64(TAG_DAEMONIZED, 3);
	put_u64(TAG_OUTPUT_DROPPED, 1);
	put_str(TAG_REASON, "killed");
	put_bytes(TAG_STDOUT_HEAD, "ab", 2);
	put_bytes(TAG_STDERR_TAIL, "yz", 2);
	put_u64(TAG_STDOUT_BYTES, 2);
	put_u64(TAG_STDERR_BYTES, 5);
	put_u64(TAG_STARTED_AT, 21);
	put_u64(TAG_ENDED_AT, 22);
	put_u64(TAG_CPU_USEC, 1); /* without OOM_KILLED: an older agent's, no stats */
	put_u64(999, 1);
}

Test(agentlink, attempt_done)
{
	attempt_done(9);
	end();
	cr_assert_eq(feed(), 0);
	cr_assert_eq(got.service_attempt, 1);
	cr_assert_eq(got.seq, 9);
	cr_assert_str_eq(got.id, "web/s1");
	cr_assert_str_eq(got.reason, "killed");
	cr_assert_eq(got.att.number, 4);
	cr_assert_eq(got.att.end_reason, ATTEMPT_KILLED);
	cr_assert_eq(got.att.exit_code, 1);
	cr_assert_eq(got.att.signal, 15);
	cr_assert(got.att.daemonized);
	cr_assert(got.att.output_dropped);
	cr_assert_str_eq(got.head[0], "ab");
	cr_assert_str_eq(got.tail[0], "");
	cr_assert_str_eq(got.head[1], "");
	cr_assert_str_eq(got.tail[1], "yz");
	cr_assert_eq(got.att.out[0].total, 2);
	cr_assert_eq(got.att.out[1].total, 5);
	cr_assert_eq(got.att.started_at, 21);
	cr_assert_eq(got.att.ended_at, 22);
	cr_assert(!got.att.has_stats);
	cr_assert(!got.att.oom_killed);
}

/* The attempt's cgroup at its end: OOM_KILLED, CPU_USEC, PEAK_MEMORY. */
Test(agentlink, attempt_done_stats)
{
	attempt_done(9);
	put_u64(TAG_OOM_KILLED, 1);
	put_u64(TAG_CPU_USEC, 5000);
	put_u64(TAG_PEAK_MEMORY, 7 << 20);
	end();
	cr_assert_eq(feed(), 0);
	cr_assert(got.att.has_stats);
	cr_assert(got.att.oom_killed);
	cr_assert_eq(got.att.cpu_usec, 5000);
	cr_assert_eq(got.att.peak_memory, 7 << 20);
}

Test(agentlink, attempt_done_out_of_range_values)
{
	attempt_done(9);
	put_u64(TAG_EXIT_CODE, 1000);
	put_u64(TAG_SIGNAL, 200);
	put_u64(TAG_STATUS, 77); /* not an attempt's: skipped */
	end();
	cr_assert_eq(feed(), 0);
	cr_assert_eq(got.att.exit_code, -1);
	cr_assert_eq(got.att.signal, 0);
}

Test(agentlink, attempt_done_refusals)
{
	attempt_done(0);
	end();
	cr_assert_eq(feed(), -EBADMSG);
	cr_assert_eq(got.service_attempt, 0);
}

Test(agentlink, attempt_done_lost)
{
	attempt_done(9);
	put_u64(TAG_END_REASON, ATTEMPT_LOST);
	end();
	cr_assert_eq(feed(), -EBADMSG);
}

Test(agentlink, attempt_done_bad_end_reason)
{
	attempt_done(9);
	put_u64(TAG_END_REASON, _ATTEMPT_END_MAX);
	end();
	cr_assert_eq(feed(), -EBADMSG);
}

Test(agentlink, attempt_done_without_end_reason)
{
	begin(MSG_SERVICE_ATTEMPT_DONE, 1);
	put_str(TAG_SERVICE_NAME, "web");
	put_str(TAG_SERVICE_ID, "s1");
	put_u64(TAG_ATTEMPT, 1);
	end();
	cr_assert_eq(feed(), -EBADMSG);
}

Test(agentlink, attempt_done_minimal)
{
	begin(MSG_SERVICE_ATTEMPT_DONE, 1);
	put_str(TAG_SERVICE_NAME, "web");
	put_str(TAG_SERVICE_ID, "s1");
	put_u64(TAG_ATTEMPT, 1);
	put_u64(TAG_END_REASON, ATTEMPT_EXITED);
	end();
	cr_assert_eq(feed(), 0);
	cr_assert_eq(got.service_attempt, 1);
	cr_assert_eq(got.att.exit_code, -1);
	cr_assert_eq(got.att.signal, 0);
	cr_assert_str_eq(got.reason, "(null)");
}

Test(agentlink, attempt_done_number_zero)
{
	attempt_done(9);
	put_u64(TAG_ATTEMPT, 0);
	end();
	cr_assert_eq(feed(), -EBADMSG);
}

Test(agentlink, attempt_done_without_service_id)
{
	begin(MSG_SERVICE_ATTEMPT_DONE, 1);
	put_str(TAG_SERVICE_NAME, "web");
	put_u64(TAG_ATTEMPT, 1);
	put_u64(TAG_END_REASON, ATTEMPT_EXITED);
	end();
	cr_assert_eq(feed(), -EBADMSG);
}

Test(agentlink, attempt_done_repeated_service_id)
{
	attempt_done(9);
	put_str(TAG_SERVICE_ID, "s1");
	end();
	cr_assert_eq(feed(), -EBADMSG);
}

Test(agentlink, attempt_done_repeated_tail)
{
	attempt_done(9);
	put_bytes(TAG_STDERR_TAIL, "", 0);
	end();
	cr_assert_eq(feed(), -EBADMSG);
}

Test(agentlink, attempt_done_more_kept_than_produced)
{
	attempt_done(9);
	put_u64(TAG_STDERR_BYTES, 1);
	end();
	cr_assert_eq(feed(), -EBADMSG);
}

Test(agentlink, attempt_done_unknown_tag_must_be_u64)
{
	attempt_done(9);
	put_str(998, "abc");
	end();
	cr_assert_eq(feed(), -EBADMSG);
}

/* ---- terminals ------------------------------------------------------------------------------- */

Test(agentlink, terminal_opened)
{
	begin(MSG_TERM_OPENED, 0);
	put_str(TAG_TERM_ID, "t1");
	put_u64(TAG_PID, 55);
	put_u64(TAG_STARTED_AT, 6);
	put_str(TAG_COMMAND, "/bin/sh");
	end();
	cr_assert_eq(feed(), 0);
	cr_assert_eq(got.terminal_opened, 1);
	cr_assert_str_eq(got.id, "t1");
	cr_assert_str_eq(got.data, "/bin/sh");
	cr_assert_eq(got.request, 55);
}

Test(agentlink, terminal_opened_without_pid)
{
	begin(MSG_TERM_OPENED, 0);
	put_str(TAG_TERM_ID, "t1");
	put_str(TAG_COMMAND, "/bin/sh");
	end();
	cr_assert_eq(feed(), -EBADMSG);
}

Test(agentlink, terminal_output_and_replay)
{
	begin(MSG_TERM_OUTPUT, 0);
	put_str(TAG_TERM_ID, "t1");
	put_u64(TAG_OFFSET, 3);
	put_bytes(TAG_DATA, "abc", 3);
	end();
	begin(MSG_TERM_REPLAY, 0);
	put_str(TAG_TERM_ID, "t1");
	put_u64(TAG_REQUEST, 12);
	put_u64(TAG_OFFSET, 0);
	put_bytes(TAG_DATA, "xyz", 3);
	end();
	cr_assert_eq(feed(), 0);
	cr_assert_eq(got.terminal_output, 1);
	cr_assert_eq(got.terminal_replay, 1);
	cr_assert_eq(got.request, 12);
	cr_assert_str_eq(got.data, "xyz");
}

Test(agentlink, terminal_output_repeated_offset)
{
	begin(MSG_TERM_OUTPUT, 0);
	put_str(TAG_TERM_ID, "t1");
	put_u64(TAG_OFFSET, 3);
	put_u64(TAG_OFFSET, 3);
	put_bytes(TAG_DATA, "abc", 3);
	end();
	cr_assert_eq(feed(), -EBADMSG);
}

Test(agentlink, terminal_replay_without_request)
{
	begin(MSG_TERM_REPLAY, 0);
	put_str(TAG_TERM_ID, "t1");
	put_u64(TAG_OFFSET, 0);
	put_bytes(TAG_DATA, "xyz", 3);
	end();
	cr_assert_eq(feed(), -EBADMSG);
}

Test(agentlink, terminal_exit)
{
	begin(MSG_TERM_EXIT, 4);
	put_str(TAG_TERM_ID, "t1");
	put_u64(TAG_STATUS, RUN_KILLED);
	put_u64(TAG_SIGNAL, 9);
	put_u64(TAG_FORCED, 1);
	put_u64(TAG_OFFSET, 100);
	put_u64(TAG_STARTED_AT, 1);
	put_u64(TAG_ENDED_AT, 2);
	end();
	cr_assert_eq(feed(), 0);
	cr_assert_eq(got.terminal_exit, 1);
	cr_assert_eq(got.seq, 4);
	cr_assert_eq(got.term.status, RUN_KILLED);
	cr_assert_eq(got.term.signal, 9);
	cr_assert_eq(got.term.exit_code, -1);
	cr_assert(got.term.forced);
	cr_assert_eq(got.term.output_bytes, 100);
}

Test(agentlink, terminal_exit_without_id)
{
	begin(MSG_TERM_EXIT, 4);
	put_u64(TAG_STATUS, RUN_EXITED);
	put_u64(TAG_EXIT_CODE, 0);
	end();
	cr_assert_eq(feed(), -EBADMSG);
}

Test(agentlink, terminal_exit_code_out_of_range)
{
	begin(MSG_TERM_EXIT, 4);
	put_str(TAG_TERM_ID, "t1");
	put_u64(TAG_STATUS, RUN_EXITED);
	put_u64(TAG_EXIT_CODE, 256);
	end();
	cr_assert_eq(feed(), -EBADMSG);
}

Test(agentlink, terminal_malformed_field)
{
	static const uint8_t junk[3] = { 1, 2, 3 };

	begin(MSG_TERM_OUTPUT, 0);
	cr_assert_eq(buf_append(&out, junk, sizeof junk), 0);
	end();
	cr_assert_eq(feed(), -EBADMSG);
}

/* ---- what the controller sends, byte for byte ------------------------------------------------ */

static struct buf want; /* the frames expected, built with proto/frame.h */

static void want_begin(uint16_t type, uint64_t seq)
{
	cr_assert_eq(frame_begin(&want, &start, type, seq), 0);
}

static void want_u64(uint16_t tag, uint64_t v)
{
	cr_assert_eq(frame_put_u64(&want, tag, v), 0);
}

static void want_str(uint16_t tag, const char *s)
{
	cr_assert_eq(frame_put_str(&want, tag, s), 0);
}

static void want_bytes(uint16_t tag, const void *p, size_t n)
{
	cr_assert_eq(frame_put_bytes(&want, tag, p, n), 0);
}

static void want_end(void)
{
	cr_assert_eq(frame_end(&want, start), 0);
}

/* Reads what the link has sent since the last call and compares it with want. */
static void check_sent(void)
{
	struct buf got_b = {};

	for (;;) {
		uint8_t chunk[65536];
		ssize_t n = recv(peer, chunk, sizeof chunk, MSG_DONTWAIT);

		if (n <= 0)
			break;
		cr_assert_eq(buf_append(&got_b, chunk, (size_t)n), 0);
	}
	cr_assert_eq(got_b.len, want.len);
	cr_assert(memcmp(got_b.data, want.data, want.len) == 0);
	buf_free(&got_b);
	buf_free(&want);
}

static void want_hello(void)
{
	static const uint8_t secret[16] = { 1, 2, 3 };

	want_begin(MSG_HELLO, 0);
	want_bytes(TAG_SECRET, secret, sizeof secret);
	want_u64(TAG_VERSION, PROTO_VERSION);
	want_end();
}

Test(agentlink, send_hello)
{
	want_hello();
	check_sent();
}

Test(agentlink, send_runs)
{
	char *env[] = { "A=1", "B=2", NULL };
	struct agentlink_run run = { .id = "r1",
				     .command = "echo hi",
				     .cwd = "/w",
				     .env = env,
				     .stdin_data = (const uint8_t *)"in",
				     .stdin_len = 2,
				     .timeout_ms = 5,
				     .head_bytes = 6,
				     .tail_bytes = 7,
				     .watch = true };
	struct agentlink_run plain = { .id = "r2", .command = "true", .cwd = "/" };

	want_hello();
	cr_assert_eq(agentlink_send_run_start(link_, &run), 0);
	want_begin(MSG_RUN_START, 0);
	want_str(TAG_RUN_ID, "r1");
	want_str(TAG_COMMAND, "echo hi");
	want_str(TAG_CWD, "/w");
	want_str(TAG_ENV, "A=1");
	want_str(TAG_ENV, "B=2");
	want_bytes(TAG_STDIN, "in", 2);
	want_u64(TAG_TIMEOUT_MS, 5);
	want_u64(TAG_HEAD_BYTES, 6);
	want_u64(TAG_TAIL_BYTES, 7);
	want_u64(TAG_WATCH, 1);
	want_end();
	cr_assert_eq(agentlink_send_run_start(link_, &plain), 0);
	want_begin(MSG_RUN_START, 0);
	want_str(TAG_RUN_ID, "r2");
	want_str(TAG_COMMAND, "true");
	want_str(TAG_CWD, "/");
	want_u64(TAG_TIMEOUT_MS, 0);
	want_u64(TAG_HEAD_BYTES, 0);
	want_u64(TAG_TAIL_BYTES, 0);
	want_end();
	cr_assert_eq(agentlink_send_cancel(link_, "r1"), 0);
	want_begin(MSG_RUN_CANCEL, 0);
	want_str(TAG_RUN_ID, "r1");
	want_end();
	cr_assert_eq(agentlink_send_watch(link_, "r1", true), 0);
	want_begin(MSG_RUN_WATCH, 0);
	want_str(TAG_RUN_ID, "r1");
	want_u64(TAG_WATCH, 1);
	want_end();
	cr_assert_eq(agentlink_send_watch(link_, "r1", false), 0);
	want_begin(MSG_RUN_WATCH, 0);
	want_str(TAG_RUN_ID, "r1");
	want_u64(TAG_WATCH, 0);
	want_end();
	cr_assert_eq(agentlink_send_ack(link_, 77), 0);
	want_begin(MSG_ACK, 77);
	want_end();
	check_sent();
}

Test(agentlink, send_services)
{
	char *env[] = { "A=1", NULL };
	struct agentlink_service svc = { .name = "web",
					 .id = "s1",
					 .command = "serve",
					 .cwd = "/w",
					 .env = env,
					 .policy = 2,
					 .max_restarts = 3,
					 .delay_ms = 4,
					 .backoff_permille = 2000,
					 .max_delay_ms = 5,
					 .stop_signal = 15,
					 .stop_timeout_ms = 6,
					 .head_bytes = 7,
					 .tail_bytes = 8,
					 .first_attempt = 9 };

	want_hello();
	cr_assert_eq(agentlink_send_service_start(link_, &svc), 0);
	want_begin(MSG_SERVICE_START, 0);
	want_str(TAG_SERVICE_NAME, "web");
	want_str(TAG_SERVICE_ID, "s1");
	want_str(TAG_COMMAND, "serve");
	want_str(TAG_CWD, "/w");
	want_str(TAG_ENV, "A=1");
	want_u64(TAG_RESTART_POLICY, 2);
	want_u64(TAG_MAX_RESTARTS, 3);
	want_u64(TAG_DELAY_MS, 4);
	want_u64(TAG_BACKOFF_PERMILLE, 2000);
	want_u64(TAG_MAX_DELAY_MS, 5);
	want_u64(TAG_STOP_SIGNAL, 15);
	want_u64(TAG_STOP_TIMEOUT_MS, 6);
	want_u64(TAG_HEAD_BYTES, 7);
	want_u64(TAG_TAIL_BYTES, 8);
	want_u64(TAG_ATTEMPT, 9);
	want_end();
	svc.backoff_permille = 0;
	svc.env = NULL;
	cr_assert_eq(agentlink_send_service_start(link_, &svc), 0);
	want_begin(MSG_SERVICE_START, 0);
	want_str(TAG_SERVICE_NAME, "web");
	want_str(TAG_SERVICE_ID, "s1");
	want_str(TAG_COMMAND, "serve");
	want_str(TAG_CWD, "/w");
	want_u64(TAG_RESTART_POLICY, 2);
	want_u64(TAG_MAX_RESTARTS, 3);
	want_u64(TAG_DELAY_MS, 4);
	want_u64(TAG_STOP_SIGNAL, 15);
	want_u64(TAG_STOP_TIMEOUT_MS, 6);
	want_u64(TAG_HEAD_BYTES, 7);
	want_u64(TAG_TAIL_BYTES, 8);
	want_u64(TAG_ATTEMPT, 9);
	want_end();
	cr_assert_eq(agentlink_send_service(link_, MSG_SERVICE_STOP, "web", -1), 0);
	want_begin(MSG_SERVICE_STOP, 0);
	want_str(TAG_SERVICE_NAME, "web");
	want_end();
	cr_assert_eq(agentlink_send_service(link_, MSG_SERVICE_WATCH, "web", 1), 0);
	want_begin(MSG_SERVICE_WATCH, 0);
	want_str(TAG_SERVICE_NAME, "web");
	want_u64(TAG_WATCH, 1);
	want_end();
	check_sent();
}

Test(agentlink, send_terminals)
{
	char *env[] = { "TERM=xterm", NULL };
	struct agentlink_terminal t = { .id = "t1",
					.command = "sh",
					.cwd = "/w",
					.env = env,
					.cols = 80,
					.rows = 24,
					.scrollback_bytes = 4096 };
	struct agentlink_terminal shell = { .id = "t2", .cols = 1, .rows = 2 };
	static uint8_t input[PROTO_MAX_TERM_INPUT + 5];

	memset(input, 'i', sizeof input);
	want_hello();
	cr_assert_eq(agentlink_send_terminal_open(link_, &t), 0);
	want_begin(MSG_TERM_OPEN, 0);
	want_str(TAG_TERM_ID, "t1");
	want_str(TAG_COMMAND, "sh");
	want_str(TAG_CWD, "/w");
	want_str(TAG_ENV, "TERM=xterm");
	want_u64(TAG_COLS, 80);
	want_u64(TAG_ROWS, 24);
	want_u64(TAG_SCROLLBACK_BYTES, 4096);
	want_end();
	cr_assert_eq(agentlink_send_terminal_open(link_, &shell), 0);
	want_begin(MSG_TERM_OPEN, 0);
	want_str(TAG_TERM_ID, "t2");
	want_u64(TAG_COLS, 1);
	want_u64(TAG_ROWS, 2);
	want_end();
	cr_assert_eq(agentlink_send_terminal_resize(link_, "t1", 100, 30), 0);
	want_begin(MSG_TERM_RESIZE, 0);
	want_str(TAG_TERM_ID, "t1");
	want_u64(TAG_COLS, 100);
	want_u64(TAG_ROWS, 30);
	want_end();
	cr_assert_eq(agentlink_send_terminal_attach(link_, "t1", true, 12), 0);
	want_begin(MSG_TERM_ATTACH, 0);
	want_str(TAG_TERM_ID, "t1");
	want_u64(TAG_WATCH, 1);
	want_u64(TAG_REQUEST, 12);
	want_end();
	cr_assert_eq(agentlink_send_terminal_attach(link_, "t1", false, 12), 0);
	want_begin(MSG_TERM_ATTACH, 0);
	want_str(TAG_TERM_ID, "t1");
	want_u64(TAG_WATCH, 0);
	want_end();
	cr_assert_eq(agentlink_send_terminal_close(link_, "t1"), 0);
	want_begin(MSG_TERM_CLOSE, 0);
	want_str(TAG_TERM_ID, "t1");
	want_end();
	check_sent();
	cr_assert_eq(agentlink_send_terminal_input(link_, "t1", input, sizeof input), 0);
	want_begin(MSG_TERM_INPUT, 0);
	want_str(TAG_TERM_ID, "t1");
	want_bytes(TAG_DATA, input, PROTO_MAX_TERM_INPUT);
	want_end();
	want_begin(MSG_TERM_INPUT, 0);
	want_str(TAG_TERM_ID, "t1");
	want_bytes(TAG_DATA, input, 5);
	want_end();
	check_sent();
}

Test(agentlink, send_after_close)
{
	close(peer);
	peer = -1;
	for (int i = 0; i < 100 && !got.closed; i++)
		cr_assert_geq(event_loop_run_once(loop, 100), 0);
	cr_assert_eq(got.closed, 1);
	cr_assert_eq(agentlink_send_cancel(link_, "r1"), -ENOTCONN);
}

/* ---- CRED_REQUEST, CRED_REPLY ---------------------------------------------------------------- */

static void cred_request(uint64_t request, const char *protocol, const char *host, const char *path)
{
	begin(MSG_CRED_REQUEST, 0);
	put_u64(TAG_REQUEST, request);
	if (protocol)
		put_str(TAG_CRED_PROTOCOL, protocol);
	if (host)
		put_str(TAG_CRED_HOST, host);
	if (path)
		put_str(TAG_CRED_PATH, path);
}

Test(agentlink, cred_request_accepted)
{
	cred_request(7, "https", "github.com", "org/repo.git");
	put_str(TAG_CRED_USERNAME, "x-access-token");
	end();
	cr_assert_eq(feed(), 0);
	cr_assert_eq(got.cred, 1);
	cr_assert_str_eq(got.cred_fields, "7 https github.com org/repo.git x-access-token");
}

/* Each refusal beside the accepted frame above: the link is closed, nothing reaches the
 * manager. What the fields say (ftp, a bad host) is the manager's to refuse, not the link's. */
Test(agentlink, cred_request_no_host)
{
	cred_request(1, "https", NULL, NULL);
	end();
	cr_assert_eq(feed(), -EBADMSG, "no host");
	cr_assert_eq(got.cred, 0);
}

Test(agentlink, cred_request_no_request)
{
	begin(MSG_CRED_REQUEST, 0);
	put_str(TAG_CRED_PROTOCOL, "https");
	put_str(TAG_CRED_HOST, "github.com");
	end();
	cr_assert_eq(feed(), -EBADMSG);
	cr_assert_eq(got.cred, 0);
}

Test(agentlink, cred_request_repeated_host)
{
	cred_request(1, "https", "github.com", NULL);
	put_str(TAG_CRED_HOST, "evil.test");
	end();
	cr_assert_eq(feed(), -EBADMSG);
	cr_assert_eq(got.cred, 0);
}

Test(agentlink, cred_request_unknown_tag)
{
	cred_request(1, "https", "github.com", NULL);
	put_str(TAG_CRED_PASSWORD, "from the agent");
	end();
	cr_assert_eq(feed(), -EBADMSG);
	cr_assert_eq(got.cred, 0);
}

Test(agentlink, cred_request_long_host)
{
	char host[264];

	memset(host, 'a', sizeof host - 1);
	host[sizeof host - 1] = 0;
	cred_request(1, "https", host, NULL);
	end();
	cr_assert_eq(feed(), -E2BIG);
	cr_assert_eq(got.cred, 0);
}

Test(agentlink, cred_request_kept_to_the_manager)
{
	cred_request(3, "ftp", "not a host!", NULL);
	end();
	cr_assert_eq(feed(), 0);
	cr_assert_str_eq(got.cred_fields, "3 ftp not a host! (null) (null)");
}

static void read_frame(struct frame *f, uint8_t *buf, size_t cap)
{
	size_t len = 0;
	long n = 0;

	while (n == 0) {
		ssize_t r = read(peer, buf + len, cap - len);
		cr_assert_gt(r, 0);
		len += (size_t)r;
		n = frame_parse(buf, len, cap, f);
		cr_assert_geq(n, 0);
	}
}

struct reply_fields {
	uint64_t request;
	char username[64], password[64], reason[128];
};

static int reply_field(void *u, uint16_t tag, const uint8_t *v, size_t n)
{
	struct reply_fields *x = u;

	if (tag == TAG_REQUEST)
		return frame_val_u64(v, n, &x->request);
	if (tag == TAG_CRED_USERNAME)
		copy(x->username, sizeof x->username, v, n);
	else if (tag == TAG_CRED_PASSWORD)
		copy(x->password, sizeof x->password, v, n);
	else if (tag == TAG_REASON)
		copy(x->reason, sizeof x->reason, v, n);
	else
		cr_assert_fail("unexpected tag %u", tag);
	return 0;
}

Test(agentlink, cred_reply)
{
	uint8_t buf[4096];
	struct reply_fields x = { 0 };
	struct frame f;

	/* the HELLO the link sent first */
	read_frame(&f, buf, sizeof buf);
	cr_assert_eq(f.type, MSG_HELLO);
	cr_assert_eq(agentlink_send_cred_reply(link_, 9, "x-access-token", "tok", NULL), 0);
	read_frame(&f, buf, sizeof buf);
	cr_assert_eq(f.type, MSG_CRED_REPLY);
	cr_assert_eq(frame_for_each_field(&f, reply_field, &x), 0);
	cr_assert_eq(x.request, 9);
	cr_assert_str_eq(x.username, "x-access-token");
	cr_assert_str_eq(x.password, "tok");
	cr_assert_str_eq(x.reason, "");

	memset(&x, 0, sizeof x);
	cr_assert_eq(agentlink_send_cred_reply(link_, 10, NULL, NULL, "no secret for this host"),
		     0);
	read_frame(&f, buf, sizeof buf);
	cr_assert_eq(frame_for_each_field(&f, reply_field, &x), 0);
	cr_assert_eq(x.request, 10);
	cr_assert_str_eq(x.password, "");
	cr_assert_str_eq(x.reason, "no secret for this host");
}

/* ---- USAGE_REPLY ------------------------------------------------------------------------------ */

static void usage_run(const char *id, uint64_t cpu, uint64_t mem)
{
	put_str(TAG_RUN_ID, id);
	put_u64(TAG_CPU_USEC, cpu);
	put_u64(TAG_MEMORY_BYTES, mem);
}

Test(agentlink, usage_reply)
{
	begin(MSG_USAGE_REPLY, 0);
	put_u64(TAG_REQUEST, 7);
	usage_run("r1", 1000, 2048);
	put_str(TAG_SERVICE_NAME, "web");
	put_u64(TAG_ATTEMPT, 2);
	put_u64(TAG_CPU_USEC, 5);
	put_u64(TAG_MEMORY_BYTES, 6);
	end();
	cr_assert_eq(feed(), 0);
	cr_assert_eq(got.usage, 1);
	cr_assert_eq(got.request, 7);
	cr_assert_eq(got.n_usage, 2);
	cr_assert_str_eq(got.usage_text, "r1 1000 2048,web/2 5 6,");
}

Test(agentlink, usage_reply_empty)
{
	begin(MSG_USAGE_REPLY, 0);
	put_u64(TAG_REQUEST, 3);
	end();
	cr_assert_eq(feed(), 0);
	cr_assert_eq(got.usage, 1);
	cr_assert_eq(got.n_usage, 0);
}

Test(agentlink, usage_reply_without_request)
{
	begin(MSG_USAGE_REPLY, 0);
	usage_run("r1", 1, 2);
	end();
	cr_assert_eq(feed(), -EBADMSG);
	cr_assert_eq(got.usage, 0);
}

Test(agentlink, usage_reply_cut_short)
{
	begin(MSG_USAGE_REPLY, 0);
	put_u64(TAG_REQUEST, 1);
	put_str(TAG_RUN_ID, "r1");
	put_u64(TAG_CPU_USEC, 1);
	end();
	cr_assert_eq(feed(), -EBADMSG);
	cr_assert_eq(got.usage, 0);
}

Test(agentlink, usage_reply_out_of_order)
{
	begin(MSG_USAGE_REPLY, 0);
	put_u64(TAG_REQUEST, 1);
	put_str(TAG_RUN_ID, "r1");
	put_u64(TAG_MEMORY_BYTES, 2);
	put_u64(TAG_CPU_USEC, 1);
	end();
	cr_assert_eq(feed(), -EBADMSG);
	cr_assert_eq(got.usage, 0);
}

Test(agentlink, usage_reply_service_without_attempt)
{
	begin(MSG_USAGE_REPLY, 0);
	put_u64(TAG_REQUEST, 1);
	put_str(TAG_SERVICE_NAME, "web");
	put_u64(TAG_CPU_USEC, 1);
	put_u64(TAG_MEMORY_BYTES, 2);
	end();
	cr_assert_eq(feed(), -EBADMSG);
	cr_assert_eq(got.usage, 0);
}

Test(agentlink, usage_reply_bad_id)
{
	begin(MSG_USAGE_REPLY, 0);
	put_u64(TAG_REQUEST, 1);
	usage_run("../r1", 1, 2);
	end();
	cr_assert_eq(feed(), -EBADMSG);
	cr_assert_eq(got.usage, 0);
}

/* A refused frame closes the link: one refusal per test. */
Test(agentlink, usage_reply_long_id)
{
	char id[PROTO_MAX_ID + 2];

	memset(id, 'a', sizeof id - 1);
	id[sizeof id - 1] = 0;
	begin(MSG_USAGE_REPLY, 0);
	put_u64(TAG_REQUEST, 1);
	usage_run(id, 1, 2);
	end();
	cr_assert_eq(feed(), -EBADMSG);
	cr_assert_eq(got.usage, 0);
}

Test(agentlink, usage_reply_longest_id)
{
	char id[PROTO_MAX_ID + 1];

	memset(id, 'a', sizeof id - 1);
	id[PROTO_MAX_ID] = 0; /* the longest id is fine */
	begin(MSG_USAGE_REPLY, 0);
	put_u64(TAG_REQUEST, 1);
	usage_run(id, 1, 2);
	end();
	cr_assert_eq(feed(), 0);
	cr_assert_eq(got.usage, 1);
}

static void usage_many(size_t n)
{
	begin(MSG_USAGE_REPLY, 0);
	put_u64(TAG_REQUEST, 9);
	for (size_t i = 0; i < n; i++) {
		char id[16];

		snprintf(id, sizeof id, "r%zu", i);
		usage_run(id, i, i);
	}
	end();
}

Test(agentlink, usage_reply_count_bound)
{
	usage_many(AGENTLINK_MAX_USAGE);
	cr_assert_eq(feed(), 0);
	cr_assert_eq(got.usage, 1);
	cr_assert_eq(got.n_usage, AGENTLINK_MAX_USAGE);
}

Test(agentlink, usage_reply_over_count_bound)
{
	usage_many(AGENTLINK_MAX_USAGE + 1);
	cr_assert_eq(feed(), -E2BIG);
	cr_assert_eq(got.usage, 0);
}
