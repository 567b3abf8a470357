/* SPDX-License-Identifier: MIT */
/* The fields runs and services share on the agent link: HELLO_OK's id lists, the end of a
 * process (RUN_DONE, SERVICE_ATTEMPT_DONE) and a stream's output (RUN_OUTPUT, SERVICE_OUTPUT).
 * Each is checked here once, for both. */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "agentlink-internal.h"
#include "proto/agent-proto.h"
#include "proto/frame.h"

int agentlink_str_once(char **dst, const uint8_t *val, size_t len, size_t max_len)
{
	return *dst ? -EBADMSG : frame_val_strdup(val, len, max_len, dst);
}

int agentlink_ids_push(struct agentlink_ids *ids, size_t max, const uint8_t *val, size_t len)
{
	char **t = ids->n < max ? realloc(ids->v, (ids->n + 1) * sizeof *ids->v) : NULL;
	int r;

	if (!t)
		return -E2BIG;
	ids->v = t;
	r = frame_val_strdup(val, len, PROTO_MAX_ID, &ids->v[ids->n]);
	if (r < 0)
		return r;
	ids->n++;
	return 0;
}

void agentlink_ids_free(struct agentlink_ids *ids)
{
	for (size_t i = 0; i < ids->n; i++)
		free(ids->v[i]);
	free(ids->v);
	*ids = (struct agentlink_ids){};
}

static int end_bytes(const struct agentlink_end *e, uint16_t tag, const uint8_t *val, size_t len)
{
	struct run_output *o = &e->out[tag == TAG_STDERR_HEAD || tag == TAG_STDERR_TAIL];
	bool head = tag == TAG_STDOUT_HEAD || tag == TAG_STDERR_HEAD;
	uint8_t **dst = head ? &o->head : &o->tail;
	size_t *dst_len = head ? &o->head_len : &o->tail_len;

	if (len > AGENT_MAX_OUTPUT_BYTES || *dst)
		return -EBADMSG;
	*dst = malloc(len ? len : 1);
	if (!*dst)
		return -ENOMEM;
	memcpy(*dst, val, len);
	*dst_len = len;
	return 1;
}

int agentlink_end_field(const struct agentlink_end *e, uint16_t tag, const uint8_t *val, size_t len)
{
	uint64_t u = 0;
	int r;

	switch (tag) {
	case TAG_STDOUT_HEAD:
	case TAG_STDOUT_TAIL:
	case TAG_STDERR_HEAD:
	case TAG_STDERR_TAIL:
		return end_bytes(e, tag, val, len);
	case TAG_EXIT_CODE:
	case TAG_SIGNAL:
	case TAG_STDOUT_BYTES:
	case TAG_STDERR_BYTES:
	case TAG_STARTED_AT:
	case TAG_ENDED_AT:
		break;
	default:
		return 0;
	}
	r = frame_val_u64(val, len, &u);
	if (r < 0)
		return r;
	if (tag == TAG_EXIT_CODE)
		*e->exit_code = u <= 255 ? (int64_t)u : -1;
	else if (tag == TAG_SIGNAL)
		*e->signal = u < 128 ? (int64_t)u : 0;
	else if (tag == TAG_STDOUT_BYTES || tag == TAG_STDERR_BYTES)
		e->out[tag == TAG_STDERR_BYTES].total = u;
	else if (tag == TAG_STARTED_AT)
		*e->started_at = u;
	else
		*e->ended_at = u;
	return 1;
}

bool agentlink_end_consistent(const struct run_output *out)
{
	for (int i = 0; i < 2; i++)
		if (out[i].head_len + out[i].tail_len > out[i].total)
			return false;
	return true;
}

static int output_field(void *userdata, uint16_t tag, const uint8_t *val, size_t len)
{
	struct agentlink_output *o = userdata;

	if (tag == o->id_tag && !o->id)
		return frame_val_strdup(val, len, PROTO_MAX_ID, &o->id);
	if (tag == TAG_ATTEMPT && o->with_attempt)
		return frame_val_u64(val, len, &o->attempt);
	if (tag == TAG_STREAM)
		return frame_val_u64(val, len, &o->stream);
	if (tag == TAG_OFFSET)
		return frame_val_u64(val, len, &o->offset);
	if (tag == TAG_DATA) {
		o->data = val;
		o->data_len = len;
	}
	return 0;
}

int agentlink_output_parse(const struct frame *f, struct agentlink_output *o)
{
	int r = frame_for_each_field(f, output_field, o);

	if (r < 0)
		return r;
	if (!o->id || (o->stream != RUN_STREAM_STDOUT && o->stream != RUN_STREAM_STDERR) ||
	    o->offset > UINT64_MAX - o->data_len)
		return -EBADMSG;
	return 0;
}
