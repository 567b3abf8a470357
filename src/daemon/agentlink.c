/* SPDX-License-Identifier: MIT */
#include "agentlink-internal.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "basic/cleanup.h"
#include "basic/safe-fs.h"
#include "basic/util.h"
#include "event/event.h"
#include "proto/agent-proto.h"
#include "proto/frame.h"

enum { READ_CHUNK = 256 * 1024, MAX_HELLO_IDS = 4096, REASON_MAX = 1024 };

struct agentlink {
	struct event_loop *loop;
	int fd;
	struct event_source *io;
	struct buf in;
	size_t in_off; /* parsed bytes at the front of in */
	struct buf out;
	const struct agentlink_ops *ops;
	void *userdata;
	bool closing;
	bool hello_seen;
	uint64_t features; /* HELLO_OK's FEATURES */
	bool wipe_out;	   /* a secret was queued: wipe out's spare bytes until it is all sent */
};

static void link_update_events(struct agentlink *l)
{
	uint32_t ev = EPOLLIN | (l->out.len ? EPOLLOUT : 0);
	event_source_set_io_events(l->io, ev);
}

static int link_flush(struct agentlink *l)
{
	while (l->out.len > 0) {
		ssize_t n = send(l->fd, l->out.data, l->out.len, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN)
				break;
			return negative_errno();
		}
		buf_consume(&l->out, (size_t)n);
	}
	if (l->wipe_out && l->out.data) {
		/* what buf_consume() left behind the data still to send */
		explicit_bzero(l->out.data + l->out.len, l->out.cap - l->out.len);
		l->wipe_out = l->out.len > 0;
	}
	link_update_events(l);
	return 0;
}

static void link_fail(struct agentlink *l, int err)
{
	if (l->closing)
		return;
	l->closing = true;
	event_source_free(l->io);
	l->io = NULL;
	l->ops->closed(l->userdata, err);
}

/* Frames are queued whole; a failed allocation drops the frame being built. */
static int link_send(struct agentlink *l, struct buf *frame)
{
	if (l->closing) {
		buf_free(frame);
		return -ENOTCONN;
	}
	int r = buf_append(&l->out, frame->data, frame->len);
	buf_free(frame);
	if (r < 0)
		return r;
	return link_flush(l);
}

struct hello_fields {
	uint64_t pid;
	uint64_t features;
	struct agentlink_ids runs;
	struct agentlink_ids services;
};

static int hello_field(void *userdata, uint16_t tag, const uint8_t *v, size_t n)
{
	struct hello_fields *h = userdata;

	if (tag == TAG_PID)
		return frame_val_u64(v, n, &h->pid);
	if (tag == TAG_FEATURES)
		return frame_val_u64(v, n, &h->features);
	if (tag == TAG_RUN_ID)
		return agentlink_ids_push(&h->runs, MAX_HELLO_IDS, v, n);
	if (tag == TAG_SERVICE_NAME)
		return agentlink_ids_push(&h->services, MAX_HELLO_IDS, v, n);
	return 0;
}

static int parse_hello(struct agentlink *l, const struct frame *f)
{
	struct hello_fields h = {};
	int r = frame_for_each_field(f, hello_field, &h);

	if (r >= 0 && l->ops->service_hello)
		l->ops->service_hello(l->userdata, h.services.v, h.services.n);
	if (r >= 0) {
		l->hello_seen = true;
		l->features = h.features;
		l->ops->hello(l->userdata, h.pid, h.runs.v, h.runs.n);
	}
	if (r >= 0 && !l->closing)
		r = agentlink_terminal_dispatch(l->ops, l->userdata, f);
	agentlink_ids_free(&h.runs);
	agentlink_ids_free(&h.services);
	return r;
}

static int parse_output(struct agentlink *l, const struct frame *f)
{
	struct agentlink_output o = { .id_tag = TAG_RUN_ID };
	int r = agentlink_output_parse(f, &o);

	if (r >= 0)
		l->ops->run_output(l->userdata, o.id, (int)o.stream, o.offset, o.data, o.data_len);
	free(o.id);
	return r;
}

static int done_field(void *userdata, uint16_t tag, const uint8_t *v, size_t n)
{
	struct run_row *row = userdata;
	uint64_t u = 0;
	int r = agentlink_end_field(&AGENTLINK_END(row), tag, v, n);

	if (r != 0)
		return r < 0 ? r : 0;
	if (tag == TAG_RUN_ID)
		return agentlink_str_once(&row->id, v, n, PROTO_MAX_ID);
	if (tag == TAG_REASON)
		return agentlink_str_once(&row->reason, v, n, REASON_MAX);
	/* unknown tags are skipped (newer agents may add fields), but must be integers */
	r = frame_val_u64(v, n, &u);
	if (r < 0)
		return r;
	switch (tag) {
	case TAG_STATUS:
		/* RUN_RUNNING, as before any status came: refused below (the enum is unsigned,
		 * so no negative "none" is possible) */
		row->status = u >= RUN_EXITED && u <= RUN_FAILED_TO_START ? (enum run_status)u :
									    RUN_RUNNING;
		break;
	case TAG_OOM_KILLED:
		row->oom_killed = u != 0;
		break;
	case TAG_CPU_USEC:
		row->cpu_usec = u;
		break;
	case TAG_PEAK_MEMORY:
		row->peak_memory = u;
		break;
	default:
		break;
	}
	return 0;
}

static int parse_done(struct agentlink *l, const struct frame *f)
{
	struct run_row row = { .exit_code = -1, .status = RUN_RUNNING };
	int r = frame_for_each_field(f, done_field, &row);

	if (r >= 0 && (!row.id || row.status == RUN_RUNNING || !agentlink_end_consistent(row.out)))
		r = -EBADMSG;
	if (r >= 0) {
		for (int i = 0; i < 2; i++)
			row.truncated |= row.out[i].head_len + row.out[i].tail_len <
					 row.out[i].total;
		l->ops->run_done(l->userdata, f->seq, &row);
	}
	run_row_free(&row);
	return r;
}

struct id_fields {
	char *id, *reason, *service;
	uint64_t started;
};

static int id_field(void *userdata, uint16_t tag, const uint8_t *v, size_t n)
{
	struct id_fields *x = userdata;

	if (tag == TAG_RUN_ID && !x->id)
		return frame_val_strdup(v, n, PROTO_MAX_ID, &x->id);
	if (tag == TAG_REASON && !x->reason)
		return frame_val_strdup(v, n, REASON_MAX, &x->reason);
	if (tag == TAG_STARTED_AT)
		return frame_val_u64(v, n, &x->started);
	if (tag == TAG_SERVICE_NAME && !x->service)
		return frame_val_strdup(v, n, PROTO_MAX_ID, &x->service);
	return 0;
}

static void id_dispatch(struct agentlink *l, const struct frame *f, const struct id_fields *x)
{
	const char *reason = x->reason ? x->reason : "unknown error";

	if (f->type == MSG_ERROR && x->service && l->ops->service_error)
		l->ops->service_error(l->userdata, x->service, reason);
	else if (f->type == MSG_RUN_STARTED && x->id)
		l->ops->run_started(l->userdata, x->id, x->started);
	else if (f->type == MSG_ERROR)
		l->ops->run_error(l->userdata, x->id, reason);
}

/* RUN_STARTED and ERROR. */
static int parse_id_and(struct agentlink *l, const struct frame *f)
{
	struct id_fields x = {};
	int r = frame_for_each_field(f, id_field, &x);

	if (r >= 0)
		id_dispatch(l, f, &x);
	free(x.id);
	free(x.reason);
	free(x.service);
	return r;
}

static int link_dispatch(struct agentlink *l, const struct frame *f)
{
	switch (f->type) {
	case MSG_HELLO_OK:
		return parse_hello(l, f);
	case MSG_RUN_STARTED:
	case MSG_ERROR:
		return parse_id_and(l, f);
	case MSG_RUN_OUTPUT:
		return parse_output(l, f);
	case MSG_RUN_DONE:
		return parse_done(l, f);
	case MSG_SERVICE_STATE:
	case MSG_SERVICE_ATTEMPT_DONE:
	case MSG_SERVICE_OUTPUT:
	case MSG_SERVICE_PROGRESS:
		return agentlink_service_dispatch(l->ops, l->userdata, f);
	case MSG_TERM_OPENED:
	case MSG_TERM_OUTPUT:
	case MSG_TERM_REPLAY:
	case MSG_TERM_EXIT:
		return agentlink_terminal_dispatch(l->ops, l->userdata, f);
	case MSG_CRED_REQUEST:
		return agentlink_cred_dispatch(l->ops, l->userdata, f);
	case MSG_USAGE_REPLY:
		return agentlink_usage_dispatch(l->ops, l->userdata, f);
	case MSG_PAUSED:
		return agentlink_paused_dispatch(l->ops, l->userdata, f);
	case MSG_CHECKPOINT_READY:
		return agentlink_checkpoint_ready_dispatch(l->ops, l->userdata, f);
	default:
		return -EBADMSG;
	}
}

/* Dispatches every whole frame buffered in l->in past in_off, stopping at a partial one (0).
 * 1 when a receiver closed the link meanwhile, < 0 for a broken frame. */
static int link_dispatch_input(struct agentlink *l)
{
	for (;;) {
		struct frame f;
		long sz = frame_parse(l->in.data + l->in_off, l->in.len - l->in_off,
				      PROTO_MAX_PAYLOAD, &f);
		if (sz < 0)
			return (int)sz;
		if (sz == 0)
			return 0;
		int r = link_dispatch(l, &f);
		if (r < 0)
			return r;
		if (l->closing)
			return 1;
		l->in_off += (size_t)sz;
	}
}

static int link_read(struct agentlink *l)
{
	for (;;) {
		if (l->in_off > 0) {
			buf_consume(&l->in, l->in_off);
			l->in_off = 0;
		}
		int r = buf_reserve(&l->in, READ_CHUNK);
		if (r < 0)
			return r;
		ssize_t n =
			recv(l->fd, l->in.data + l->in.len, l->in.cap - l->in.len, MSG_DONTWAIT);
		if (n < 0 && errno == EAGAIN) {
			/* Drained: without a partial frame the read buffer goes back to the heap.
			 * An idle link holds none (a thousand idle workspaces would otherwise hold
			 * a thousand 256 KiB buffers, their pages touched by earlier use). */
			if (l->in_off >= l->in.len) {
				buf_free(&l->in);
				l->in_off = 0;
			}
			return 0;
		}
		if (n < 0)
			return errno == EINTR ? 1 : negative_errno();
		if (n == 0)
			return -ECONNRESET;
		l->in.len += (size_t)n;

		r = link_dispatch_input(l);
		if (r != 0)
			return r < 0 ? r : 0;
	}
}

static int on_io(struct event_source *s, int fd, uint32_t revents, void *userdata)
{
	struct agentlink *l = userdata;
	int r = 0;
	if (revents & EPOLLOUT)
		r = link_flush(l);
	if (r >= 0 && (revents & (EPOLLIN | EPOLLHUP | EPOLLERR)))
		r = link_read(l);
	if (r < 0)
		link_fail(l, r == -ECONNRESET ? 0 : r);
	return 0;
}

int agentlink_send_frame_end(struct agentlink *l, struct buf *b, size_t start, int r)
{
	if (r >= 0)
		r = frame_end(b, start);
	if (r < 0) {
		buf_free(b);
		return r;
	}
	return link_send(l, b);
}

int agentlink_send_secret(struct agentlink *l, const uint8_t *data, size_t n)
{
	if (l->closing)
		return -ENOTCONN;
	int r = buf_append(&l->out, data, n);
	if (r < 0)
		return r;
	l->wipe_out = true;
	return link_flush(l);
}

static int link_send_hello(struct agentlink *l, const uint8_t *secret, size_t secret_len)
{
	struct buf b = { 0 };
	size_t start;
	int r = frame_begin(&b, &start, MSG_HELLO, 0);
	if (r >= 0)
		r = frame_put_bytes(&b, TAG_SECRET, secret, secret_len);
	if (r >= 0)
		r = frame_put_u64(&b, TAG_VERSION, PROTO_VERSION);
	return agentlink_send_frame_end(l, &b, start, r);
}

int agentlink_connect(struct event_loop *loop, const char *socket_path, const uint8_t *secret,
		      size_t secret_len, const struct agentlink_ops *ops, void *userdata,
		      struct agentlink **ret)
{
	return agentlink_connect_checked(loop, socket_path, NULL, secret, secret_len, ops, userdata,
					 ret);
}

int agentlink_connect_checked(struct event_loop *loop, const char *socket_path,
			      int (*peer_check)(int fd, void *userdata), const uint8_t *secret,
			      size_t secret_len, const struct agentlink_ops *ops, void *userdata,
			      struct agentlink **ret)
{
	_cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return negative_errno();
	/* the socket lives in run/, which container root owns: a symlink it put there in place
	 * of the socket is refused, not followed to another socket on the host */
	int r = safe_connect_unix(fd, socket_path);
	if (r >= 0 && peer_check) /* before the secret goes out */
		r = peer_check(fd, userdata);
	if (r < 0)
		return r;

	struct agentlink *l = calloc(1, sizeof *l);
	if (!l)
		return -ENOMEM;
	*l = (struct agentlink){ .loop = loop, .fd = fd, .ops = ops, .userdata = userdata };
	r = event_add_io(loop, &l->io, fd, EPOLLIN, on_io, l);
	if (r < 0) {
		free(l);
		return r;
	}
	l->fd = TAKE_FD(fd);
	r = link_send_hello(l, secret, secret_len);
	if (r < 0) {
		l->closing = true;
		agentlink_free(l);
		return r;
	}
	*ret = l;
	return 0;
}

bool agentlink_has_feature(const struct agentlink *l, uint64_t feature)
{
	return l && l->hello_seen && (l->features & feature) == feature;
}

int agentlink_wait_hello(struct agentlink *l, int timeout_ms)
{
	uint64_t deadline = now_usec() + (uint64_t)timeout_ms * 1000;
	while (!l->hello_seen && !l->closing) {
		uint64_t now = now_usec();
		if (now >= deadline)
			return -ETIMEDOUT;
		struct pollfd p = { .fd = l->fd, .events = POLLIN };
		int n = poll(&p, 1, (int)((deadline - now + 999) / 1000));
		if (n < 0 && errno != EINTR)
			return negative_errno();
		if (n <= 0)
			continue;
		int r = link_read(l);
		if (r < 0)
			return r; /* the loop's next look at the socket closes the link */
	}
	return l->hello_seen ? 0 : -ECONNRESET;
}

void agentlink_free(struct agentlink *l)
{
	if (!l)
		return;
	event_source_free(l->io);
	if (l->fd >= 0)
		close(l->fd);
	buf_free(&l->in);
	buf_free(&l->out);
	free(l);
}

static int send_simple(struct agentlink *l, uint16_t type, uint64_t seq, const char *run_id,
		       int watch)
{
	struct buf b = { 0 };
	size_t start;
	int r = frame_begin(&b, &start, type, seq);
	if (r >= 0 && run_id)
		r = frame_put_str(&b, TAG_RUN_ID, run_id);
	if (r >= 0 && watch >= 0)
		r = frame_put_u64(&b, TAG_WATCH, (uint64_t)watch);
	return agentlink_send_frame_end(l, &b, start, r);
}

int agentlink_send_cancel(struct agentlink *l, const char *run_id)
{
	return send_simple(l, MSG_RUN_CANCEL, 0, run_id, -1);
}

int agentlink_send_watch(struct agentlink *l, const char *run_id, bool watch)
{
	return send_simple(l, MSG_RUN_WATCH, 0, run_id, watch);
}

int agentlink_send_ack(struct agentlink *l, uint64_t seq)
{
	return send_simple(l, MSG_ACK, seq, NULL, -1);
}

int agentlink_send_run_start(struct agentlink *l, const struct agentlink_run *run)
{
	struct buf b = { 0 };
	size_t start;
	int r = frame_begin(&b, &start, MSG_RUN_START, 0);
	if (r >= 0)
		r = frame_put_str(&b, TAG_RUN_ID, run->id);
	if (r >= 0)
		r = frame_put_str(&b, TAG_COMMAND, run->command);
	if (r >= 0)
		r = frame_put_str(&b, TAG_CWD, run->cwd);
	for (size_t i = 0; r >= 0 && run->env && run->env[i]; i++)
		r = frame_put_str(&b, TAG_ENV, run->env[i]);
	if (r >= 0 && run->stdin_data)
		r = frame_put_bytes(&b, TAG_STDIN, run->stdin_data, run->stdin_len);
	if (r >= 0)
		r = frame_put_u64(&b, TAG_TIMEOUT_MS, run->timeout_ms);
	if (r >= 0)
		r = frame_put_u64(&b, TAG_HEAD_BYTES, run->head_bytes);
	if (r >= 0)
		r = frame_put_u64(&b, TAG_TAIL_BYTES, run->tail_bytes);
	if (r >= 0 && run->watch)
		r = frame_put_u64(&b, TAG_WATCH, 1);
	return agentlink_send_frame_end(l, &b, start, r);
}
