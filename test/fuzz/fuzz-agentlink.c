/* SPDX-License-Identifier: MIT */
/* The controller's side of the agent link (src/daemon/agentlink*.c): what it does with the
 * bytes an agent sends, which a sandbox that took its agent over chooses freely. The input is
 * the byte stream from the agent: frames (proto/frame.h) of every type the controller reads
 * (HELLO_OK, RUN_*, SERVICE_*, TERM_*, CRED_REQUEST, USAGE_REPLY) or garbage.
 *
 * The link's own dispatch (link_dispatch_input(), the loop behind its socket reads) runs on the
 * stream twice: all of it at once, and as it would arrive in pieces (the buffer grown a few
 * bytes at a time, sizes from the stream itself). Both must hand the same checked events to the
 * receiver and end the same way. The receiver stands for the manager: it reads every byte and
 * string it is handed and checks what agentlink.h promises of them (ids within their bound,
 * usage entries with valid ids, streams 0 or 1, lengths within the protocol's limits).
 *
 * fuzz-max-len: 65536 */

/* The link's static functions: the harness builds a link without a socket around them. */
#include "daemon/agentlink.c"

#include "fuzz.h"

struct trace {
	uint64_t hash;
	unsigned events;
};

static struct trace *cur;

static void mix(const void *data, size_t n)
{
	const uint8_t *p = data;
	for (size_t i = 0; i < n; i++)
		cur->hash = (cur->hash ^ p[i]) * 1099511628211ull;
}

static void mix_u64(uint64_t v)
{
	mix(&v, sizeof(v));
}

static void mix_str(const char *s)
{
	if (!s) {
		mix_u64(UINT64_MAX);
		return;
	}
	size_t n = strlen(s);
	mix_u64(n);
	mix(s, n);
}

static void event(unsigned kind)
{
	cur->events++;
	mix_u64(kind);
}

/* A run's, a service's or a terminal's key as the agent named it: a bounded string without
 * NUL (the manager looks it up; an unknown one is ignored). */
static void check_id(const char *id)
{
	if (!id || strlen(id) > PROTO_MAX_ID)
		abort();
	mix_str(id);
}

static void check_stream(int stream)
{
	if (stream != 0 && stream != 1)
		abort();
	mix_u64((uint64_t)stream);
}

static void check_out(const struct run_output *o)
{
	for (int i = 0; i < 2; i++) {
		if (o[i].head_len > AGENT_MAX_OUTPUT_BYTES ||
		    o[i].tail_len > AGENT_MAX_OUTPUT_BYTES)
			abort();
		mix(o[i].head, o[i].head_len);
		mix(o[i].tail, o[i].tail_len);
		mix_u64(o[i].total);
	}
}

static void on_hello(void *u, uint64_t pid, char **ids, size_t n)
{
	event(1);
	mix_u64(pid);
	for (size_t i = 0; i < n; i++)
		check_id(ids[i]);
}

static void on_run_started(void *u, const char *run_id, uint64_t started_at)
{
	event(2);
	check_id(run_id);
	mix_u64(started_at);
}

static void on_run_output(void *u, const char *run_id, int stream, uint64_t offset,
			  const uint8_t *data, size_t n)
{
	event(3);
	check_id(run_id);
	check_stream(stream);
	mix_u64(offset);
	mix(data, n);
}

static void on_run_done(void *u, uint64_t seq, const struct run_row *r)
{
	event(4);
	mix_u64(seq);
	check_id(r->id);
	mix_u64((uint64_t)r->status);
	mix_u64((uint64_t)r->exit_code);
	mix_u64((uint64_t)r->signal);
	mix_str(r->reason);
	check_out(r->out);
	mix_u64(r->started_at);
	mix_u64(r->ended_at);
	mix_u64(r->cpu_usec);
	mix_u64(r->peak_memory);
}

static void on_run_error(void *u, const char *run_id, const char *reason)
{
	event(5);
	if (run_id) /* an ERROR about no run in particular */
		check_id(run_id);
	else
		mix_str(NULL);
	mix_str(reason);
}

static void on_closed(void *u, int err)
{
	abort(); /* only the socket's end or a failed send closes the link, and there is none */
}

static void on_service_hello(void *u, char **names, size_t n)
{
	event(6);
	for (size_t i = 0; i < n; i++)
		check_id(names[i]);
}

static void on_service_state(void *u, uint64_t seq, const struct agentlink_service_state *s)
{
	event(7);
	mix_u64(seq);
	check_id(s->name);
	mix_str(s->id);
	mix_u64((uint64_t)s->state);
	mix_u64(s->restart_count);
	mix_u64(s->attempt);
	mix_u64(s->pid);
	mix_u64(s->started_at);
	mix_u64(s->next_restart_at);
	mix_u64(s->stopping);
	mix_str(s->reason);
}

static void on_service_attempt(void *u, uint64_t seq, const char *name,
			       const struct service_attempt_row *a)
{
	event(8);
	mix_u64(seq);
	check_id(name);
	mix_str(a->service_id);
	mix_u64(a->number);
	mix_u64((uint64_t)a->exit_code);
	mix_u64((uint64_t)a->signal);
	mix_u64((uint64_t)a->end_reason);
	mix_str(a->reason);
	check_out(a->out);
}

static void on_service_output(void *u, const char *name, uint64_t attempt, int stream,
			      uint64_t offset, const uint8_t *data, size_t n)
{
	event(9);
	check_id(name);
	mix_u64(attempt);
	check_stream(stream);
	mix_u64(offset);
	mix(data, n);
}

static void on_service_error(void *u, const char *name, const char *reason)
{
	event(10);
	check_id(name);
	mix_str(reason);
}

static void on_terminal_hello(void *u, char **ids, size_t n)
{
	event(11);
	for (size_t i = 0; i < n; i++)
		check_id(ids[i]);
}

static void on_terminal_opened(void *u, const char *id, uint64_t pid, uint64_t started_at,
			       const char *command)
{
	event(12);
	check_id(id);
	mix_u64(pid);
	mix_u64(started_at);
	mix_str(command);
}

static void on_terminal_output(void *u, const char *id, uint64_t offset, const uint8_t *data,
			       size_t n)
{
	event(13);
	check_id(id);
	mix_u64(offset);
	mix(data, n);
}

static void on_terminal_replay(void *u, const char *id, uint64_t request, uint64_t offset,
			       const uint8_t *data, size_t n)
{
	event(14);
	check_id(id);
	mix_u64(request);
	mix_u64(offset);
	mix(data, n);
}

static void on_terminal_exit(void *u, uint64_t seq, const struct agentlink_terminal_exit *x)
{
	event(15);
	mix_u64(seq);
	check_id(x->id);
	if (x->status != RUN_EXITED && x->status != RUN_KILLED && x->status != RUN_FAILED_TO_START)
		abort();
	mix_u64((uint64_t)x->exit_code);
	mix_u64((uint64_t)x->signal);
	mix_u64(x->forced);
	mix_str(x->reason);
	mix_u64(x->output_bytes);
}

static void on_cred_request(void *u, const struct agentlink_cred_request *q)
{
	event(16);
	mix_u64(q->request);
	if (!q->protocol || !q->host)
		abort();
	mix_str(q->protocol);
	mix_str(q->host);
	mix_str(q->path);
	mix_str(q->username);
}

static void on_usage(void *u, uint64_t request, const struct agentlink_usage *v, size_t n)
{
	event(17);
	if (n > AGENTLINK_MAX_USAGE)
		abort();
	mix_u64(request);
	for (size_t i = 0; i < n; i++) {
		if (!v[i].run_id == !v[i].service)
			abort(); /* one or the other, a valid id */
		if (!proto_id_valid(v[i].run_id ? v[i].run_id : v[i].service))
			abort();
		mix_str(v[i].run_id);
		mix_str(v[i].service);
		mix_u64(v[i].attempt);
		mix_u64(v[i].cpu_usec);
		mix_u64(v[i].memory_bytes);
	}
}

static const struct agentlink_ops ops = {
	.hello = on_hello,
	.run_started = on_run_started,
	.run_output = on_run_output,
	.run_done = on_run_done,
	.run_error = on_run_error,
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

/* Runs the link's dispatch over data, whole or growing piece by piece as reads would add it. */
static int dispatch(const uint8_t *data, size_t size, bool cut, struct trace *t)
{
	struct agentlink l = { .fd = -1, .ops = &ops };
	int r = 0;

	*t = (struct trace){ .hash = 14695981039346656037ull };
	cur = t;
	/* Exactly size bytes on the heap: a read past what arrived is a heap overflow. */
	l.in.data = malloc(size ? size : 1);
	if (!l.in.data)
		abort();
	memcpy(l.in.data, data, size);
	l.in.cap = size;
	if (!cut) {
		l.in.len = size;
		r = link_dispatch_input(&l);
	} else {
		while (l.in.len < size && r == 0) {
			size_t piece = (size_t)(data[l.in.len] % 61) + 1;
			l.in.len += piece < size - l.in.len ? piece : size - l.in.len;
			r = link_dispatch_input(&l);
		}
	}
	if (r > 0)
		abort(); /* the receiver never closes */
	if (l.in_off > l.in.len)
		abort();
	mix_u64(l.hello_seen);
	mix_u64(l.features);
	buf_free(&l.in);
	buf_free(&l.out);
	cur = NULL;
	return r;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct trace whole, pieces;
	int r_whole = dispatch(data, size, false, &whole);
	int r_pieces = dispatch(data, size, true, &pieces);
	if (r_whole != r_pieces || whole.hash != pieces.hash || whole.events != pieces.events)
		abort();
	return 0;
}
