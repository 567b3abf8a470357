/* SPDX-License-Identifier: MIT */
#include "agentlink.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "basic/cleanup.h"
#include "basic/safe-fs.h"
#include "event/event.h"
#include "proto/agent-proto.h"
#include "proto/frame.h"

enum { READ_CHUNK = 256 * 1024, MAX_HELLO_IDS = 4096 };

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
	if (l->closing)
		return -ENOTCONN;
	int r = buf_append(&l->out, frame->data, frame->len);
	buf_free(frame);
	if (r < 0)
		return r;
	return link_flush(l);
}

static int get_str(const uint8_t *v, size_t n, size_t max, char **ret)
{
	return frame_val_strdup(v, n, max, ret);
}

static int parse_hello(struct agentlink *l, const struct frame *f)
{
	struct frame_iter it;
	uint16_t tag;
	const uint8_t *v;
	size_t n;
	uint64_t pid = 0;
	char **ids = NULL, **names = NULL;
	size_t n_ids = 0, n_names = 0;
	int r;

	frame_iter_init(&it, f);
	while ((r = frame_iter_next(&it, &tag, &v, &n)) > 0) {
		if (tag == TAG_PID) {
			r = frame_val_u64(v, n, &pid);
		} else if (tag == TAG_RUN_ID) {
			char **t = n_ids < MAX_HELLO_IDS ? realloc(ids, (n_ids + 1) * sizeof *ids) :
							   NULL;
			r = t ? 0 : -E2BIG;
			if (t) {
				ids = t;
				r = get_str(v, n, PROTO_MAX_ID, &ids[n_ids]);
				if (r >= 0)
					n_ids++;
			}
		} else if (tag == TAG_SERVICE_NAME) {
			char **t = n_names < MAX_HELLO_IDS ?
					   realloc(names, (n_names + 1) * sizeof *names) :
					   NULL;
			r = t ? 0 : -E2BIG;
			if (t) {
				names = t;
				r = get_str(v, n, PROTO_MAX_ID, &names[n_names]);
				if (r >= 0)
					n_names++;
			}
		}
		if (r < 0)
			break;
	}
	if (r >= 0 && l->ops->service_hello)
		l->ops->service_hello(l->userdata, names, n_names);
	if (r >= 0) {
		l->hello_seen = true;
		l->ops->hello(l->userdata, pid, ids, n_ids);
	}
	if (r >= 0 && !l->closing)
		r = agentlink_terminal_dispatch(l->ops, l->userdata, f);
	for (size_t i = 0; i < n_ids; i++)
		free(ids[i]);
	free(ids);
	for (size_t i = 0; i < n_names; i++)
		free(names[i]);
	free(names);
	return r;
}

static int parse_output(struct agentlink *l, const struct frame *f)
{
	struct frame_iter it;
	uint16_t tag;
	const uint8_t *v, *data = NULL;
	size_t n, data_len = 0;
	uint64_t stream = 0, offset = 0;
	_cleanup_free_ char *id = NULL;
	int r;

	frame_iter_init(&it, f);
	while ((r = frame_iter_next(&it, &tag, &v, &n)) > 0) {
		if (tag == TAG_RUN_ID && !id)
			r = get_str(v, n, PROTO_MAX_ID, &id);
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
	if (r < 0 || !id || (stream != RUN_STREAM_STDOUT && stream != RUN_STREAM_STDERR) ||
	    offset > UINT64_MAX - data_len)
		return -EBADMSG;
	l->ops->run_output(l->userdata, id, (int)stream, offset, data, data_len);
	return 0;
}

static int done_field(struct run_row *row, uint16_t tag, const uint8_t *v, size_t n)
{
	uint64_t u = 0;
	struct run_output *o = NULL;

	switch (tag) {
	case TAG_RUN_ID:
		return row->id ? -EBADMSG : get_str(v, n, PROTO_MAX_ID, &row->id);
	case TAG_REASON:
		return row->reason ? -EBADMSG : get_str(v, n, 1024, &row->reason);
	case TAG_STDOUT_HEAD:
	case TAG_STDOUT_TAIL:
	case TAG_STDERR_HEAD:
	case TAG_STDERR_TAIL: {
		if (n > AGENT_MAX_OUTPUT_BYTES)
			return -EBADMSG;
		o = &row->out[tag == TAG_STDERR_HEAD || tag == TAG_STDERR_TAIL];
		bool head = tag == TAG_STDOUT_HEAD || tag == TAG_STDERR_HEAD;
		uint8_t **dst = head ? &o->head : &o->tail;
		size_t *dst_len = head ? &o->head_len : &o->tail_len;
		if (*dst)
			return -EBADMSG;
		*dst = malloc(n ? n : 1);
		if (!*dst)
			return -ENOMEM;
		memcpy(*dst, v, n);
		*dst_len = n;
		return 0;
	}
	default:
		break;
	}
	int r = frame_val_u64(v, n, &u);
	if (r < 0)
		return r;
	switch (tag) {
	case TAG_STATUS:
		row->status = u >= RUN_EXITED && u <= RUN_FAILED_TO_START ? (int)u : -1;
		break;
	case TAG_EXIT_CODE:
		row->exit_code = u <= 255 ? (int64_t)u : -1;
		break;
	case TAG_SIGNAL:
		row->signal = u < 128 ? (int64_t)u : 0;
		break;
	case TAG_OOM_KILLED:
		row->oom_killed = u != 0;
		break;
	case TAG_STDOUT_BYTES:
		row->out[0].total = u;
		break;
	case TAG_STDERR_BYTES:
		row->out[1].total = u;
		break;
	case TAG_STARTED_AT:
		row->started_at = u;
		break;
	case TAG_ENDED_AT:
		row->ended_at = u;
		break;
	case TAG_CPU_USEC:
		row->cpu_usec = u;
		break;
	case TAG_PEAK_MEMORY:
		row->peak_memory = u;
		break;
	default:
		break; /* unknown tags are skipped: newer agents may add fields */
	}
	return 0;
}

static bool done_consistent(const struct run_row *row)
{
	if (!row->id || row->status < RUN_EXITED)
		return false;
	for (int i = 0; i < 2; i++) {
		const struct run_output *o = &row->out[i];
		if (o->head_len + o->tail_len > o->total)
			return false;
	}
	return true;
}

static int parse_done(struct agentlink *l, const struct frame *f)
{
	struct frame_iter it;
	uint16_t tag;
	const uint8_t *v;
	size_t n;
	struct run_row row = { .exit_code = -1, .status = -1 };
	int r;

	frame_iter_init(&it, f);
	while ((r = frame_iter_next(&it, &tag, &v, &n)) > 0) {
		r = done_field(&row, tag, v, n);
		if (r < 0)
			break;
	}
	if (r >= 0 && !done_consistent(&row))
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

static int parse_id_and(struct agentlink *l, const struct frame *f)
{
	struct frame_iter it;
	uint16_t tag;
	const uint8_t *v;
	size_t n;
	_cleanup_free_ char *id = NULL, *reason = NULL, *service = NULL;
	uint64_t started = 0;
	int r;

	frame_iter_init(&it, f);
	while ((r = frame_iter_next(&it, &tag, &v, &n)) > 0) {
		if (tag == TAG_RUN_ID && !id)
			r = get_str(v, n, PROTO_MAX_ID, &id);
		else if (tag == TAG_REASON && !reason)
			r = get_str(v, n, 1024, &reason);
		else if (tag == TAG_STARTED_AT)
			r = frame_val_u64(v, n, &started);
		else if (tag == TAG_SERVICE_NAME && !service)
			r = get_str(v, n, PROTO_MAX_ID, &service);
		if (r < 0)
			return r;
	}
	if (r < 0)
		return r;
	if (f->type == MSG_ERROR && service && l->ops->service_error)
		l->ops->service_error(l->userdata, service, reason ? reason : "unknown error");
	else if (f->type == MSG_RUN_STARTED && id)
		l->ops->run_started(l->userdata, id, started);
	else if (f->type == MSG_ERROR)
		l->ops->run_error(l->userdata, id, reason ? reason : "unknown error");
	return 0;
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
		return agentlink_service_dispatch(l->ops, l->userdata, f);
	case MSG_TERM_OPENED:
	case MSG_TERM_OUTPUT:
	case MSG_TERM_REPLAY:
	case MSG_TERM_EXIT:
		return agentlink_terminal_dispatch(l->ops, l->userdata, f);
	default:
		return -EBADMSG;
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
		if (n < 0)
			return errno == EAGAIN ? 0 : errno == EINTR ? 1 : negative_errno();
		if (n == 0)
			return -ECONNRESET;
		l->in.len += (size_t)n;

		for (;;) {
			struct frame f;
			long sz = frame_parse(l->in.data + l->in_off, l->in.len - l->in_off,
					      PROTO_MAX_PAYLOAD, &f);
			if (sz < 0)
				return (int)sz;
			if (sz == 0)
				break;
			r = link_dispatch(l, &f);
			if (r < 0)
				return r;
			if (l->closing)
				return 0;
			l->in_off += (size_t)sz;
		}
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

static int link_send_hello(struct agentlink *l, const uint8_t *secret, size_t secret_len)
{
	struct buf b = { 0 };
	size_t start;
	int r = frame_begin(&b, &start, MSG_HELLO, 0);
	if (r >= 0)
		r = frame_put_bytes(&b, TAG_SECRET, secret, secret_len);
	if (r >= 0)
		r = frame_put_u64(&b, TAG_VERSION, PROTO_VERSION);
	if (r >= 0)
		r = frame_end(&b, start);
	if (r < 0) {
		buf_free(&b);
		return r;
	}
	return link_send(l, &b);
}

int agentlink_connect(struct event_loop *loop, const char *socket_path, const uint8_t *secret,
		      size_t secret_len, const struct agentlink_ops *ops, void *userdata,
		      struct agentlink **ret)
{
	_cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return negative_errno();
	/* the socket lives in run/, which container root owns: a symlink it put there in place
	 * of the socket is refused, not followed to another socket on the host */
	int r = safe_connect_unix(fd, socket_path);
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
	if (r >= 0)
		r = frame_end(&b, start);
	if (r < 0) {
		buf_free(&b);
		return r;
	}
	return link_send(l, &b);
}

int agentlink_send_buf(struct agentlink *l, struct buf *frame)
{
	return link_send(l, frame);
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

int agentlink_send_shutdown(struct agentlink *l)
{
	return send_simple(l, MSG_SHUTDOWN, 0, NULL, -1);
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
	if (r >= 0)
		r = frame_end(&b, start);
	if (r < 0) {
		buf_free(&b);
		return r;
	}
	return link_send(l, &b);
}
