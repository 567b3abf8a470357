/* SPDX-License-Identifier: MIT */
/* The service messages of the agent link (docs/agent-protocol.md, "Services"): SERVICE_START
 * and friends out, SERVICE_STATE, SERVICE_ATTEMPT_DONE and SERVICE_OUTPUT in. Every field from
 * the agent is checked before it reaches the manager. */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "agentlink.h"
#include "basic/cleanup.h"
#include "proto/agent-proto.h"
#include "proto/frame.h"

#define REASON_MAX 1024

static int get_str(const uint8_t *v, size_t n, size_t max, char **ret)
{
	return frame_val_strdup(v, n, max, ret);
}

/* ---- in ------------------------------------------------------------------------------------ */

struct state_fields {
	char *name, *id, *reason;
	uint64_t state, restart_count, attempt, pid, started_at, next_restart_at, stopping;
	bool have_state;
};

static int state_field(struct state_fields *s, uint16_t tag, const uint8_t *v, size_t n)
{
	switch (tag) {
	case TAG_SERVICE_NAME:
		return s->name ? -EBADMSG : get_str(v, n, PROTO_MAX_ID, &s->name);
	case TAG_SERVICE_ID:
		return s->id ? -EBADMSG : get_str(v, n, PROTO_MAX_ID, &s->id);
	case TAG_REASON:
		return s->reason ? -EBADMSG : get_str(v, n, REASON_MAX, &s->reason);
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
	struct frame_iter it;
	const uint8_t *v;
	uint16_t tag;
	size_t n;
	int r;

	frame_iter_init(&it, f);
	while ((r = frame_iter_next(&it, &tag, &v, &n)) > 0) {
		r = state_field(&s, tag, v, n);
		if (r < 0)
			break;
	}
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

static int attempt_bytes(struct service_attempt_row *a, uint16_t tag, const uint8_t *v, size_t n)
{
	struct run_output *o = &a->out[tag == TAG_STDERR_HEAD || tag == TAG_STDERR_TAIL];
	bool head = tag == TAG_STDOUT_HEAD || tag == TAG_STDERR_HEAD;
	uint8_t **dst = head ? &o->head : &o->tail;
	size_t *dst_len = head ? &o->head_len : &o->tail_len;

	if (n > AGENT_MAX_OUTPUT_BYTES || *dst)
		return -EBADMSG;
	*dst = malloc(n ? n : 1);
	if (!*dst)
		return -ENOMEM;
	memcpy(*dst, v, n);
	*dst_len = n;
	return 0;
}

static int attempt_field(struct service_attempt_row *a, char **name, uint16_t tag, const uint8_t *v,
			 size_t n)
{
	uint64_t u = 0;
	int r;

	switch (tag) {
	case TAG_SERVICE_NAME:
		return *name ? -EBADMSG : get_str(v, n, PROTO_MAX_ID, name);
	case TAG_SERVICE_ID:
		return a->service_id ? -EBADMSG : get_str(v, n, PROTO_MAX_ID, &a->service_id);
	case TAG_REASON:
		return a->reason ? -EBADMSG : get_str(v, n, REASON_MAX, &a->reason);
	case TAG_STDOUT_HEAD:
	case TAG_STDOUT_TAIL:
	case TAG_STDERR_HEAD:
	case TAG_STDERR_TAIL:
		return attempt_bytes(a, tag, v, n);
	default:
		break;
	}
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
	case TAG_EXIT_CODE:
		a->exit_code = u <= 255 ? (int64_t)u : -1;
		break;
	case TAG_SIGNAL:
		a->signal = u < 128 ? (int64_t)u : 0;
		break;
	case TAG_DAEMONIZED:
		a->daemonized = u != 0;
		break;
	case TAG_OUTPUT_DROPPED:
		a->output_dropped = u != 0;
		break;
	case TAG_STDOUT_BYTES:
		a->out[0].total = u;
		break;
	case TAG_STDERR_BYTES:
		a->out[1].total = u;
		break;
	case TAG_STARTED_AT:
		a->started_at = u;
		break;
	case TAG_ENDED_AT:
		a->ended_at = u;
		break;
	default:
		break;
	}
	return 0;
}

static bool attempt_consistent(const struct service_attempt_row *a, const char *name)
{
	if (!name || !a->service_id || a->end_reason == ATTEMPT_LOST || a->number == 0)
		return false;
	for (int i = 0; i < 2; i++)
		if (a->out[i].head_len + a->out[i].tail_len > a->out[i].total)
			return false;
	return true;
}

static int parse_attempt(const struct agentlink_ops *ops, void *userdata, const struct frame *f)
{
	/* ATTEMPT_LOST until TAG_END_REASON names the end: the agent never sends it. */
	struct service_attempt_row a = { .exit_code = -1, .end_reason = ATTEMPT_LOST };
	_cleanup_free_ char *name = NULL;
	struct frame_iter it;
	const uint8_t *v;
	uint16_t tag;
	size_t n;
	int r;

	frame_iter_init(&it, f);
	while ((r = frame_iter_next(&it, &tag, &v, &n)) > 0) {
		r = attempt_field(&a, &name, tag, v, n);
		if (r < 0)
			break;
	}
	if (r >= 0 && (!attempt_consistent(&a, name) || f->seq == 0))
		r = -EBADMSG;
	if (r >= 0 && ops->service_attempt)
		ops->service_attempt(userdata, f->seq, name, &a);
	service_attempt_row_free(&a);
	return r;
}

static int parse_output(const struct agentlink_ops *ops, void *userdata, const struct frame *f)
{
	_cleanup_free_ char *name = NULL;
	const uint8_t *v, *data = NULL;
	uint64_t attempt = 0, stream = 0, offset = 0;
	struct frame_iter it;
	size_t n, data_len = 0;
	uint16_t tag;
	int r;

	frame_iter_init(&it, f);
	while ((r = frame_iter_next(&it, &tag, &v, &n)) > 0) {
		if (tag == TAG_SERVICE_NAME && !name)
			r = get_str(v, n, PROTO_MAX_ID, &name);
		else if (tag == TAG_ATTEMPT)
			r = frame_val_u64(v, n, &attempt);
		else if (tag == TAG_STREAM)
			r = frame_val_u64(v, n, &stream);
		else if (tag == TAG_OFFSET)
			r = frame_val_u64(v, n, &offset);
		else if (tag == TAG_DATA) {
			data = v;
			data_len = n;
		}
		if (r < 0)
			return r;
	}
	if (r < 0 || !name || (stream != RUN_STREAM_STDOUT && stream != RUN_STREAM_STDERR) ||
	    offset > UINT64_MAX - data_len)
		return -EBADMSG;
	if (ops->service_output)
		ops->service_output(userdata, name, attempt, (int)stream, offset, data, data_len);
	return 0;
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
	default:
		return -EBADMSG;
	}
}

/* ---- out ----------------------------------------------------------------------------------- */

static int put_restart(struct buf *b, const struct agentlink_service *s)
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
		r = put_restart(&b, s);
	if (r >= 0)
		r = frame_put_u64(&b, TAG_HEAD_BYTES, s->head_bytes);
	if (r >= 0)
		r = frame_put_u64(&b, TAG_TAIL_BYTES, s->tail_bytes);
	if (r >= 0)
		r = frame_put_u64(&b, TAG_ATTEMPT, s->first_attempt);
	if (r >= 0)
		r = frame_end(&b, start);
	if (r < 0) {
		buf_free(&b);
		return r;
	}
	return agentlink_send_buf(l, &b);
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
	if (r >= 0)
		r = frame_end(&b, start);
	if (r < 0) {
		buf_free(&b);
		return r;
	}
	return agentlink_send_buf(l, &b);
}
