/* SPDX-License-Identifier: MIT */
/* The terminal messages of the agent link (docs/agent-protocol.md, "Terminals"): TERM_OPEN and
 * friends out; TERM_OPENED, TERM_OUTPUT, TERM_REPLAY, TERM_EXIT and HELLO_OK's TERM_IDs in.
 * Every field from the agent is checked before it reaches the manager. */

#include <errno.h>
#include <stdlib.h>

#include "agentlink-internal.h"
#include "proto/agent-proto.h"
#include "proto/frame.h"

#define REASON_MAX 1024
#define MAX_HELLO_TERMINALS 1024

/* ---- in ------------------------------------------------------------------------------------ */

struct term_fields {
	char *id, *command, *reason;
	const uint8_t *data;
	size_t data_len;
	bool have_data, have_offset, have_status, have_request;
	uint64_t pid, started_at, ended_at, offset, request, status, exit_code, signal, forced;
	bool have_exit_code, have_signal;
};

static void term_fields_done(struct term_fields *t)
{
	free(t->id);
	free(t->command);
	free(t->reason);
}

static int once_u64(const uint8_t *v, size_t n, uint64_t *ret, bool *seen)
{
	if (*seen)
		return -EBADMSG;
	*seen = true;
	return frame_val_u64(v, n, ret);
}

static int term_field(void *userdata, uint16_t tag, const uint8_t *v, size_t n)
{
	struct term_fields *t = userdata;

	switch (tag) {
	case TAG_TERM_ID:
		return agentlink_str_once(&t->id, v, n, PROTO_MAX_ID);
	case TAG_COMMAND:
		return agentlink_str_once(&t->command, v, n, PROTO_MAX_COMMAND);
	case TAG_REASON:
		return agentlink_str_once(&t->reason, v, n, REASON_MAX);
	case TAG_DATA:
		if (t->have_data)
			return -EBADMSG;
		t->have_data = true;
		t->data = v;
		t->data_len = n;
		return 0;
	case TAG_OFFSET:
		return once_u64(v, n, &t->offset, &t->have_offset);
	case TAG_REQUEST:
		return once_u64(v, n, &t->request, &t->have_request);
	case TAG_STATUS:
		return once_u64(v, n, &t->status, &t->have_status);
	case TAG_EXIT_CODE:
		return once_u64(v, n, &t->exit_code, &t->have_exit_code);
	case TAG_SIGNAL:
		return once_u64(v, n, &t->signal, &t->have_signal);
	case TAG_PID:
		return frame_val_u64(v, n, &t->pid);
	case TAG_STARTED_AT:
		return frame_val_u64(v, n, &t->started_at);
	case TAG_ENDED_AT:
		return frame_val_u64(v, n, &t->ended_at);
	case TAG_FORCED:
		return frame_val_u64(v, n, &t->forced);
	default:
		return 0; /* newer agents may add fields */
	}
}

static int term_parse(const struct frame *f, struct term_fields *t)
{
	int r = frame_for_each_field(f, term_field, t);

	if (r < 0)
		return r;
	return t->id ? 0 : -EBADMSG;
}

static int exit_check(const struct term_fields *t, struct agentlink_terminal_exit *x)
{
	*x = (struct agentlink_terminal_exit){ .id = t->id,
					       .status = (int)t->status,
					       .exit_code = -1,
					       .forced = t->forced != 0,
					       .started_at = t->started_at,
					       .ended_at = t->ended_at,
					       .output_bytes = t->offset };
	switch (t->status) {
	case RUN_EXITED:
		if (!t->have_exit_code || t->exit_code > 255)
			return -EBADMSG;
		x->exit_code = (int64_t)t->exit_code;
		return 0;
	case RUN_KILLED:
		if (!t->have_signal || t->signal == 0 || t->signal >= 128)
			return -EBADMSG;
		x->signal = (int64_t)t->signal;
		return 0;
	case RUN_FAILED_TO_START:
		x->reason = t->reason ? t->reason : "failed to start";
		return 0;
	default:
		return -EBADMSG;
	}
}

static int dispatch_fields(const struct agentlink_ops *ops, void *userdata, const struct frame *f,
			   const struct term_fields *t)
{
	struct agentlink_terminal_exit x;
	int r;

	switch (f->type) {
	case MSG_TERM_OPENED:
		if (!t->command || !t->pid || t->pid > INT32_MAX)
			return -EBADMSG;
		if (ops->terminal_opened)
			ops->terminal_opened(userdata, t->id, t->pid, t->started_at, t->command);
		return 0;
	case MSG_TERM_OUTPUT:
	case MSG_TERM_REPLAY:
		if (!t->have_data || !t->have_offset || t->offset > UINT64_MAX - t->data_len ||
		    (f->type == MSG_TERM_REPLAY && !t->have_request))
			return -EBADMSG;
		if (f->type == MSG_TERM_OUTPUT && ops->terminal_output)
			ops->terminal_output(userdata, t->id, t->offset, t->data, t->data_len);
		else if (f->type == MSG_TERM_REPLAY && ops->terminal_replay)
			ops->terminal_replay(userdata, t->id, t->request, t->offset, t->data,
					     t->data_len);
		return 0;
	case MSG_TERM_EXIT:
		r = t->have_status ? exit_check(t, &x) : -EBADMSG;
		if (r >= 0 && ops->terminal_exit)
			ops->terminal_exit(userdata, f->seq, &x);
		return r;
	default:
		return -EBADMSG;
	}
}

static int hello_id(void *userdata, uint16_t tag, const uint8_t *v, size_t n)
{
	return tag == TAG_TERM_ID ? agentlink_ids_push(userdata, MAX_HELLO_TERMINALS, v, n) : 0;
}

static int parse_hello_ids(const struct agentlink_ops *ops, void *userdata, const struct frame *f)
{
	struct agentlink_ids ids = {};
	int r = frame_for_each_field(f, hello_id, &ids);

	if (r >= 0 && ops->terminal_hello)
		ops->terminal_hello(userdata, ids.v, ids.n);
	agentlink_ids_free(&ids);
	return r;
}

int agentlink_terminal_dispatch(const struct agentlink_ops *ops, void *userdata,
				const struct frame *f)
{
	struct term_fields t = { 0 };
	int r;

	if (f->type == MSG_HELLO_OK)
		return parse_hello_ids(ops, userdata, f);
	r = term_parse(f, &t);
	if (r >= 0)
		r = dispatch_fields(ops, userdata, f, &t);
	term_fields_done(&t);
	return r;
}

/* ---- out ----------------------------------------------------------------------------------- */

/* Begins a frame about one terminal. */
static int term_begin(struct buf *b, size_t *ret_start, uint16_t type, const char *id)
{
	int r = frame_begin(b, ret_start, type, 0);

	return r < 0 ? r : frame_put_str(b, TAG_TERM_ID, id);
}

int agentlink_send_terminal_open(struct agentlink *l, const struct agentlink_terminal *t)
{
	struct buf b = { 0 };
	size_t start;
	int r = term_begin(&b, &start, MSG_TERM_OPEN, t->id);

	if (r >= 0 && t->command)
		r = frame_put_str(&b, TAG_COMMAND, t->command);
	if (r >= 0 && t->cwd)
		r = frame_put_str(&b, TAG_CWD, t->cwd);
	for (size_t i = 0; r >= 0 && t->env && t->env[i]; i++)
		r = frame_put_str(&b, TAG_ENV, t->env[i]);
	if (r >= 0)
		r = frame_put_u64(&b, TAG_COLS, t->cols);
	if (r >= 0)
		r = frame_put_u64(&b, TAG_ROWS, t->rows);
	if (r >= 0 && t->scrollback_bytes)
		r = frame_put_u64(&b, TAG_SCROLLBACK_BYTES, t->scrollback_bytes);
	return agentlink_send_frame_end(l, &b, start, r);
}

int agentlink_send_terminal_input(struct agentlink *l, const char *id, const void *data, size_t n)
{
	const uint8_t *p = data;
	int r = 0;

	while (n > 0 && r >= 0) {
		size_t piece = n < PROTO_MAX_TERM_INPUT ? n : PROTO_MAX_TERM_INPUT;
		struct buf b = { 0 };
		size_t start;

		r = term_begin(&b, &start, MSG_TERM_INPUT, id);
		if (r >= 0)
			r = frame_put_bytes(&b, TAG_DATA, p, piece);
		r = agentlink_send_frame_end(l, &b, start, r);
		p += piece;
		n -= piece;
	}
	return r;
}

int agentlink_send_terminal_resize(struct agentlink *l, const char *id, uint64_t cols,
				   uint64_t rows)
{
	struct buf b = { 0 };
	size_t start;
	int r = term_begin(&b, &start, MSG_TERM_RESIZE, id);

	if (r >= 0)
		r = frame_put_u64(&b, TAG_COLS, cols);
	if (r >= 0)
		r = frame_put_u64(&b, TAG_ROWS, rows);
	return agentlink_send_frame_end(l, &b, start, r);
}

int agentlink_send_terminal_attach(struct agentlink *l, const char *id, bool watch,
				   uint64_t request)
{
	struct buf b = { 0 };
	size_t start;
	int r = term_begin(&b, &start, MSG_TERM_ATTACH, id);

	if (r >= 0)
		r = frame_put_u64(&b, TAG_WATCH, watch);
	if (r >= 0 && watch)
		r = frame_put_u64(&b, TAG_REQUEST, request);
	return agentlink_send_frame_end(l, &b, start, r);
}

int agentlink_send_terminal_close(struct agentlink *l, const char *id)
{
	struct buf b = { 0 };
	size_t start;
	int r = term_begin(&b, &start, MSG_TERM_CLOSE, id);

	return agentlink_send_frame_end(l, &b, start, r);
}
