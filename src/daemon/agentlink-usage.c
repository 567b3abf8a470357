/* SPDX-License-Identifier: MIT */
/* Resource use over the agent link (docs/agent-protocol.md, "Resource use"): USAGE_REQUEST out,
 * USAGE_REPLY in. The reply is hostile input like every agent frame: its entries are counted
 * (at most AGENTLINK_MAX_USAGE), each id is checked, and the fields must come in the order the
 * protocol gives (an id, for a service its ATTEMPT, then CPU_USEC, then MEMORY_BYTES). Whether
 * an entry names a run or service of this workspace is the receiver's check. */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "agentlink-internal.h"
#include "proto/agent-proto.h"
#include "proto/frame.h"

/* What the next field of an entry must be. */
enum usage_expect {
	EXPECT_ID,	/* RUN_ID or SERVICE_NAME (or the end) */
	EXPECT_ATTEMPT, /* after SERVICE_NAME */
	EXPECT_CPU,
	EXPECT_MEMORY,
};

struct usage_fields {
	bool have_request;
	uint64_t request;
	enum usage_expect expect;
	struct agentlink_usage *v; /* AGENTLINK_MAX_USAGE entries */
	char (*ids)[PROTO_MAX_ID + 1];
	size_t n;
};

static int usage_id(struct usage_fields *u, uint16_t tag, const uint8_t *v, size_t n)
{
	struct agentlink_usage *e;

	if (tag != TAG_RUN_ID && tag != TAG_SERVICE_NAME)
		return -EBADMSG;
	if (u->n >= AGENTLINK_MAX_USAGE)
		return -E2BIG;
	if (n == 0 || n > PROTO_MAX_ID || memchr(v, 0, n))
		return -EBADMSG;
	memcpy(u->ids[u->n], v, n);
	u->ids[u->n][n] = 0;
	if (!proto_id_valid(u->ids[u->n]))
		return -EBADMSG;
	e = &u->v[u->n];
	*e = (struct agentlink_usage){ 0 };
	if (tag == TAG_RUN_ID)
		e->run_id = u->ids[u->n];
	else
		e->service = u->ids[u->n];
	u->expect = tag == TAG_RUN_ID ? EXPECT_CPU : EXPECT_ATTEMPT;
	return 0;
}

static int usage_field(void *userdata, uint16_t tag, const uint8_t *v, size_t n)
{
	struct usage_fields *u = userdata;
	struct agentlink_usage *e = &u->v[u->n];

	if (!u->have_request) {
		if (tag != TAG_REQUEST)
			return -EBADMSG;
		u->have_request = true;
		return frame_val_u64(v, n, &u->request);
	}
	switch (u->expect) {
	case EXPECT_ID:
		return usage_id(u, tag, v, n);
	case EXPECT_ATTEMPT:
		u->expect = EXPECT_CPU;
		return tag == TAG_ATTEMPT ? frame_val_u64(v, n, &e->attempt) : -EBADMSG;
	case EXPECT_CPU:
		u->expect = EXPECT_MEMORY;
		return tag == TAG_CPU_USEC ? frame_val_u64(v, n, &e->cpu_usec) : -EBADMSG;
	case EXPECT_MEMORY:
		u->expect = EXPECT_ID;
		u->n++;
		return tag == TAG_MEMORY_BYTES ? frame_val_u64(v, n, &e->memory_bytes) : -EBADMSG;
	}
	return -EBADMSG;
}

int agentlink_usage_dispatch(const struct agentlink_ops *ops, void *userdata, const struct frame *f)
{
	struct usage_fields u = { .expect = EXPECT_ID };
	int r;

	u.v = calloc(AGENTLINK_MAX_USAGE, sizeof *u.v);
	u.ids = calloc(AGENTLINK_MAX_USAGE, sizeof *u.ids);
	r = u.v && u.ids ? frame_for_each_field(f, usage_field, &u) : -ENOMEM;
	if (r >= 0 && (!u.have_request || u.expect != EXPECT_ID))
		r = -EBADMSG; /* no REQUEST, or the last entry is cut short */
	if (r >= 0 && ops->usage)
		ops->usage(userdata, u.request, u.v, u.n);
	free(u.v);
	free(u.ids);
	return r;
}

int agentlink_send_usage_request(struct agentlink *l, uint64_t request)
{
	struct buf b = { 0 };
	size_t start;
	int r = frame_begin(&b, &start, MSG_USAGE_REQUEST, 0);

	if (r >= 0)
		r = frame_put_u64(&b, TAG_REQUEST, request);
	return agentlink_send_frame_end(l, &b, start, r);
}

/* ---- pause (docs/agent-protocol.md, "Pause") ------------------------------------------------ */

static int paused_field(void *userdata, uint16_t tag, const uint8_t *v, size_t n)
{
	uint64_t *request = userdata;

	if (tag != TAG_REQUEST || *request != UINT64_MAX)
		return -EBADMSG;
	return frame_val_u64(v, n, request);
}

int agentlink_paused_dispatch(const struct agentlink_ops *ops, void *userdata,
			      const struct frame *f)
{
	uint64_t request = UINT64_MAX;
	int r = frame_for_each_field(f, paused_field, &request);

	if (r >= 0 && request == UINT64_MAX)
		r = -EBADMSG;
	if (r >= 0 && ops->paused)
		ops->paused(userdata, request);
	return r;
}

int agentlink_send_pause(struct agentlink *l, uint64_t request)
{
	struct buf b = { 0 };
	size_t start;
	int r;

	if (!agentlink_has_feature(l, AGENT_FEATURE_PAUSE))
		return -EOPNOTSUPP;
	r = frame_begin(&b, &start, MSG_PAUSE, 0);
	if (r >= 0)
		r = frame_put_u64(&b, TAG_REQUEST, request);
	return agentlink_send_frame_end(l, &b, start, r);
}

int agentlink_send_resume(struct agentlink *l)
{
	struct buf b = { 0 };
	size_t start;

	if (!agentlink_has_feature(l, AGENT_FEATURE_PAUSE))
		return -EOPNOTSUPP;
	int r = frame_begin(&b, &start, MSG_RESUME, 0);
	return agentlink_send_frame_end(l, &b, start, r);
}

/* ---- checkpoint (docs/agent-protocol.md, "Checkpoint") -------------------------------------- */

struct checkpoint_ready {
	uint64_t request;
	char *reason;
};

static int checkpoint_ready_field(void *userdata, uint16_t tag, const uint8_t *v, size_t n)
{
	struct checkpoint_ready *q = userdata;

	if (tag == TAG_REQUEST && q->request == UINT64_MAX)
		return frame_val_u64(v, n, &q->request);
	if (tag == TAG_REASON && !q->reason)
		return frame_val_strdup(v, n, 1024, &q->reason);
	return -EBADMSG;
}

int agentlink_checkpoint_ready_dispatch(const struct agentlink_ops *ops, void *userdata,
					const struct frame *f)
{
	struct checkpoint_ready q = { .request = UINT64_MAX };
	int r = frame_for_each_field(f, checkpoint_ready_field, &q);

	if (r >= 0 && q.request == UINT64_MAX)
		r = -EBADMSG;
	if (r >= 0 && ops->checkpoint_ready)
		ops->checkpoint_ready(userdata, q.request, q.reason);
	free(q.reason);
	return r;
}

int agentlink_send_checkpoint(struct agentlink *l, uint64_t request, const char *run_dir)
{
	struct buf b = { 0 };
	size_t start;
	int r;

	if (!agentlink_has_feature(l, AGENT_FEATURE_CHECKPOINT))
		return -EOPNOTSUPP;
	r = frame_begin(&b, &start, MSG_CHECKPOINT, 0);
	if (r >= 0)
		r = frame_put_u64(&b, TAG_REQUEST, request);
	if (r >= 0)
		r = frame_put_str(&b, TAG_PATH, run_dir);
	return agentlink_send_frame_end(l, &b, start, r);
}
