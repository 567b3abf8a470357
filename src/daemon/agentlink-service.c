/* SPDX-License-Identifier: MIT */
/* The service messages of the agent link (docs/agent-protocol.md, "Services"): SERVICE_START
 * and friends out, SERVICE_STATE, SERVICE_ATTEMPT_DONE and SERVICE_OUTPUT in. Every field from
 * the agent is checked before it reaches the manager. */

#include <errno.h>
#include <stdlib.h>

#include "agentlink-internal.h"
#include "proto/agent-proto.h"
#include "proto/frame.h"

#define REASON_MAX 1024

/* ---- in ------------------------------------------------------------------------------------ */

struct state_fields {
	char *name, *id, *reason;
	uint64_t state, restart_count, attempt, pid, started_at, next_restart_at, stopping;
	bool have_state;
};

static int state_field(void *userdata, uint16_t tag, const uint8_t *v, size_t n)
{
	struct state_fields *s = userdata;

	switch (tag) {
	case TAG_SERVICE_NAME:
		return agentlink_str_once(&s->name, v, n, PROTO_MAX_ID);
	case TAG_SERVICE_ID:
		return agentlink_str_once(&s->id, v, n, PROTO_MAX_ID);
	case TAG_REASON:
		return agentlink_str_once(&s->reason, v, n, REASON_MAX);
	case TAG_SERVICE_STATE:
		s->have_state = true;
		return frame_val_u64(v, n, &s->state);
	case TAG_RESTART_COUNT:
		return frame_val_u64(v, n, &s->restart_count);
	case TAG_ATTEMPT:
		return frame_val_u64(v, n, &s->attempt);
	case TAG_PID:
		return frame_val_u64(v, n, &s->pid);
	case TAG_STARTED_AT:
		return frame_val_u64(v, n, &s->started_at);
	case TAG_NEXT_RESTART_AT:
		return frame_val_u64(v, n, &s->next_restart_at);
	case TAG_STOPPING:
		return frame_val_u64(v, n, &s->stopping);
	default:
		return 0; /* newer agents may add fields */
	}
}

static int parse_state(const struct agentlink_ops *ops, void *userdata, const struct frame *f)
{
	struct state_fields s = {};
	int r = frame_for_each_field(f, state_field, &s);

	if (r >= 0 && (!s.name || !s.id || !s.have_state || s.state >= _SERVICE_STATE_MAX ||
		       s.pid > INT32_MAX || f->seq == 0))
		r = -EBADMSG;
	if (r >= 0 && ops->service_state) {
		struct agentlink_service_state st = {
			.name = s.name,
			.id = s.id,
			.state = (enum service_state)s.state,
			.restart_count = s.restart_count,
			.attempt = s.attempt,
			.pid = s.pid,
			.started_at = s.started_at,
			.next_restart_at = s.next_restart_at,
			.stopping = s.stopping != 0,
			.reason = s.reason,
		};
		ops->service_state(userdata, f->seq, &st);
	}
	free(s.name);
	free(s.id);
	free(s.reason);
	return r;
}

struct attempt_fields {
	struct service_attempt_row row;
	char *name;
};

static int attempt_field(void *userdata, uint16_t tag, const uint8_t *v, size_t n)
{
	struct attempt_fields *x = userdata;
	struct service_attempt_row *a = &x->row;
	uint64_t u = 0;
	int r = agentlink_end_field(&AGENTLINK_END(a), tag, v, n);

	if (r != 0)
		return r < 0 ? r : 0;
	if (tag == TAG_SERVICE_NAME)
		return agentlink_str_once(&x->name, v, n, PROTO_MAX_ID);
	if (tag == TAG_SERVICE_ID)
		return agentlink_str_once(&a->service_id, v, n, PROTO_MAX_ID);
	if (tag == TAG_REASON)
		return agentlink_str_once(&a->reason, v, n, REASON_MAX);
	/* unknown tags are skipped, but must be integers */
	r = frame_val_u64(v, n, &u);
	if (r < 0)
		return r;
	switch (tag) {
	case TAG_ATTEMPT:
		a->number = u;
		break;
	case TAG_END_REASON:
		if (u >= _ATTEMPT_END_MAX || u == ATTEMPT_LOST)
			return -EBADMSG;
		a->end_reason = (enum attempt_end)u;
		break;
	case TAG_DAEMONIZED:
		a->daemonized = u != 0;
		break;
	case TAG_OUTPUT_DROPPED:
		a->output_dropped = u != 0;
		break;
	case TAG_OOM_KILLED:
		a->has_stats = true;
		a->oom_killed = u != 0;
		break;
	case TAG_CPU_USEC:
		a->cpu_usec = u;
		break;
	case TAG_PEAK_MEMORY:
		a->peak_memory = u;
		break;
	default:
		break;
	}
	return 0;
}

static int parse_attempt(const struct agentlink_ops *ops, void *userdata, const struct frame *f)
{
	/* ATTEMPT_LOST until TAG_END_REASON names the end: the agent never sends it. */
	struct attempt_fields x = { .row = { .exit_code = -1, .end_reason = ATTEMPT_LOST } };
	const struct service_attempt_row *a = &x.row;
	int r = frame_for_each_field(f, attempt_field, &x);

	if (r >= 0 && (!x.name || !a->service_id || a->end_reason == ATTEMPT_LOST ||
		       a->number == 0 || !agentlink_end_consistent(a->out) || f->seq == 0))
		r = -EBADMSG;
	if (r >= 0 && ops->service_attempt)
		ops->service_attempt(userdata, f->seq, x.name, a);
	service_attempt_row_free(&x.row);
	free(x.name);
	return r;
}

static int parse_output(const struct agentlink_ops *ops, void *userdata, const struct frame *f)
{
	struct agentlink_output o = { .id_tag = TAG_SERVICE_NAME, .with_attempt = true };
	int r = agentlink_output_parse(f, &o);

	if (r >= 0 && ops->service_output)
		ops->service_output(userdata, o.id, o.attempt, (int)o.stream, o.offset, o.data,
				    o.data_len);
	free(o.id);
	return r;
}

struct progress_fields {
	char *name;
	uint64_t attempt, bytes[2];
	unsigned seen;
};

static int progress_field(void *userdata, uint16_t tag, const uint8_t *v, size_t n)
{
	struct progress_fields *p = userdata;
	unsigned bit;
	uint64_t *dst;

	switch (tag) {
	case TAG_SERVICE_NAME:
		return agentlink_str_once(&p->name, v, n, PROTO_MAX_ID);
	case TAG_ATTEMPT:
		bit = 1, dst = &p->attempt;
		break;
	case TAG_STDOUT_BYTES:
		bit = 2, dst = &p->bytes[0];
		break;
	case TAG_STDERR_BYTES:
		bit = 4, dst = &p->bytes[1];
		break;
	default:
		return 0; /* newer agents may add fields */
	}
	if (p->seen & bit)
		return -EBADMSG;
	p->seen |= bit;
	return frame_val_u64(v, n, dst);
}

/* The numbers are only the agent's word: the manager clamps them and keeps them per attempt. */
static int parse_progress(const struct agentlink_ops *ops, void *userdata, const struct frame *f)
{
	struct progress_fields p = {};
	int r = frame_for_each_field(f, progress_field, &p);

	if (r >= 0 && (!p.name || p.seen != 7 || p.attempt == 0))
		r = -EBADMSG;
	if (r >= 0 && ops->service_progress)
		ops->service_progress(userdata, p.name, p.attempt, p.bytes[0], p.bytes[1]);
	free(p.name);
	return r;
}

int agentlink_service_dispatch(const struct agentlink_ops *ops, void *userdata,
			       const struct frame *f)
{
	switch (f->type) {
	case MSG_SERVICE_STATE:
		return parse_state(ops, userdata, f);
	case MSG_SERVICE_ATTEMPT_DONE:
		return parse_attempt(ops, userdata, f);
	case MSG_SERVICE_OUTPUT:
		return parse_output(ops, userdata, f);
	case MSG_SERVICE_PROGRESS:
		return parse_progress(ops, userdata, f);
	default:
		return -EBADMSG;
	}
}

/* ---- out ----------------------------------------------------------------------------------- */

static int put_restart(struct agentlink *l, struct buf *b, const struct agentlink_service *s)
{
	int r = frame_put_u64(b, TAG_RESTART_POLICY, (uint64_t)s->policy);

	if (r >= 0)
		r = frame_put_u64(b, TAG_MAX_RESTARTS, s->max_restarts);
	if (r >= 0)
		r = frame_put_u64(b, TAG_DELAY_MS, s->delay_ms);
	if (r >= 0 && s->backoff_permille)
		r = frame_put_u64(b, TAG_BACKOFF_PERMILLE, s->backoff_permille);
	if (r >= 0 && s->backoff_permille)
		r = frame_put_u64(b, TAG_MAX_DELAY_MS, s->max_delay_ms);
	/* An older agent closes the connection on a field it does not know. */
	if (r >= 0 && agentlink_has_feature(l, AGENT_FEATURE_SERVICE_RESET))
		r = frame_put_u64(b, TAG_RESET_AFTER_MS, s->reset_after_ms);
	if (r >= 0)
		r = frame_put_u64(b, TAG_STOP_SIGNAL, (uint64_t)s->stop_signal);
	if (r >= 0)
		r = frame_put_u64(b, TAG_STOP_TIMEOUT_MS, s->stop_timeout_ms);
	return r;
}

int agentlink_send_service_start(struct agentlink *l, const struct agentlink_service *s)
{
	struct buf b = { 0 };
	size_t start;
	int r = frame_begin(&b, &start, MSG_SERVICE_START, 0);

	if (r >= 0)
		r = frame_put_str(&b, TAG_SERVICE_NAME, s->name);
	if (r >= 0)
		r = frame_put_str(&b, TAG_SERVICE_ID, s->id);
	if (r >= 0)
		r = frame_put_str(&b, TAG_COMMAND, s->command);
	if (r >= 0)
		r = frame_put_str(&b, TAG_CWD, s->cwd);
	for (size_t i = 0; r >= 0 && s->env && s->env[i]; i++)
		r = frame_put_str(&b, TAG_ENV, s->env[i]);
	if (r >= 0)
		r = put_restart(l, &b, s);
	if (r >= 0)
		r = frame_put_u64(&b, TAG_HEAD_BYTES, s->head_bytes);
	if (r >= 0)
		r = frame_put_u64(&b, TAG_TAIL_BYTES, s->tail_bytes);
	if (r >= 0)
		r = frame_put_u64(&b, TAG_ATTEMPT, s->first_attempt);
	return agentlink_send_frame_end(l, &b, start, r);
}

int agentlink_send_service(struct agentlink *l, uint16_t type, const char *name, int watch)
{
	struct buf b = { 0 };
	size_t start;
	int r = frame_begin(&b, &start, type, 0);

	if (r >= 0)
		r = frame_put_str(&b, TAG_SERVICE_NAME, name);
	if (r >= 0 && watch >= 0)
		r = frame_put_u64(&b, TAG_WATCH, (uint64_t)watch);
	return agentlink_send_frame_end(l, &b, start, r);
}

int agentlink_send_progress_watch(struct agentlink *l, bool on)
{
	struct buf b = { 0 };
	size_t start;
	int r;

	if (!agentlink_has_feature(l, AGENT_FEATURE_SERVICE_PROGRESS))
		return -EOPNOTSUPP;
	r = frame_begin(&b, &start, MSG_SERVICE_PROGRESS_WATCH, 0);
	if (r >= 0)
		r = frame_put_u64(&b, TAG_WATCH, on ? 1 : 0);
	return agentlink_send_frame_end(l, &b, start, r);
}
