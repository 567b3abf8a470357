/* SPDX-License-Identifier: MIT */
#include "agent/channel.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "basic/cleanup.h"
#include "basic/log.h"
#include "basic/util.h"
#include "proto/agent-proto.h"
#include "proto/file-proto.h"

/* Before HELLO a peer is nobody: it gets small frames, little time and few slots. */
#define HELLO_MAX_PAYLOAD 1024
#define HELLO_TIMEOUT_USEC (5 * 1000000ull)
/* room for every file session the controller may open at once (each starts as a stranger),
 * and a few more */
#define MAX_UNAUTHENTICATED (FILE_MAX_SESSIONS + 8)
#define READ_CHUNK (64 * 1024)
#define KEEP_BUFFER_BYTES (256 * 1024)
#define ACCEPT_PAUSE_USEC 100000ull

struct conn {
	struct channel *channel;
	struct conn *next;
	int fd;
	struct event_source *io;
	struct event_source *hello_timer;
	uint32_t events;
	struct buf in;
	struct buf out;
	size_t out_pos;
	bool authenticated;
	bool failed;
	bool close_when_sent; /* checkpoint: closed once its queue is sent */
};

struct done {
	struct done *next;
	uint64_t seq;
	uint16_t type; /* MSG_RUN_DONE, MSG_SERVICE_STATE, ... */
	char *run_id;  /* the key: a run id, or a service name */
	struct buf frame;
};

struct channel {
	struct event_loop *loop;
	int listen_fd;
	struct event_source *listen_io;
	struct event_source *accept_timer;
	uint8_t secret[PROTO_MAX_SECRET];
	size_t secret_len;
	const struct channel_ops *ops;
	void *userdata;
	struct conn *conns;  /* every open connection, newest first */
	struct conn *active; /* the authenticated one, or NULL */
	struct done *done_first;
	struct done *done_last;
	uint64_t next_seq;
};

static void conn_close(struct conn *k)
{
	struct channel *c = k->channel;
	bool was_active = c->active == k;

	for (struct conn **p = &c->conns; *p; p = &(*p)->next)
		if (*p == k) {
			*p = k->next;
			break;
		}
	event_source_free(k->io);
	event_source_free(k->hello_timer);
	if (k->fd >= 0)
		close(k->fd);
	buf_free(&k->in);
	buf_free(&k->out);
	free(k);
	if (was_active) {
		c->active = NULL;
		log_info("controller disconnected", NULL);
		if (c->ops->disconnected)
			c->ops->disconnected(c, c->userdata);
	}
}

static void conn_set_events(struct conn *k, uint32_t events)
{
	if (events == k->events)
		return;
	if (event_source_set_io_events(k->io, events) < 0) {
		k->failed = true;
		return;
	}
	k->events = events;
}

static void conn_flush(struct conn *k)
{
	while (!k->failed && k->out_pos < k->out.len) {
		ssize_t n = send(k->fd, k->out.data + k->out_pos, k->out.len - k->out_pos,
				 MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN)
				k->failed = true; /* the io callback closes it */
			break;
		}
		k->out_pos += (size_t)n;
	}
	if (k->out_pos == k->out.len && k->close_when_sent)
		k->failed = true;
	if (k->out_pos == k->out.len) {
		k->out.len = k->out_pos = 0;
		if (k->out.cap > KEEP_BUFFER_BYTES)
			buf_free(&k->out);
	} else if (k->out_pos > KEEP_BUFFER_BYTES && k->out_pos > k->out.len / 2) {
		buf_consume(&k->out, k->out_pos);
		k->out_pos = 0;
	}
	/* A failed socket reports EPOLLERR/EPOLLHUP at once, which brings us back to close it. */
	conn_set_events(k, EPOLLIN | (k->failed || k->out_pos < k->out.len ? EPOLLOUT : 0));
}

static size_t conn_unsent(const struct conn *k)
{
	return k->out.len - k->out_pos;
}

static int send_hello_ok(struct channel *c, struct conn *k)
{
	size_t start;
	int r;

	r = frame_begin(&k->out, &start, MSG_HELLO_OK, 0);
	if (r >= 0)
		r = frame_put_u64(&k->out, TAG_VERSION, PROTO_VERSION);
	if (r >= 0)
		r = frame_put_u64(&k->out, TAG_PID, (uint64_t)getpid());
	if (r >= 0 && c->ops->hello_fields)
		r = c->ops->hello_fields(c, &k->out, c->userdata);
	/* Finished runs awaiting ACK are known too: the controller must not call them lost. */
	for (struct done *d = c->done_first; r >= 0 && d; d = d->next)
		if (d->type == MSG_RUN_DONE)
			r = frame_put_str(&k->out, TAG_RUN_ID, d->run_id);
	if (r >= 0)
		r = frame_end(&k->out, start);
	for (struct done *d = c->done_first; r >= 0 && d; d = d->next)
		r = buf_append(&k->out, d->frame.data, d->frame.len);
	return r;
}

/* HELLO, or with other_fields the FILE_OPEN whose other fields the file worker reads. */
static int hello_parse(const struct frame *f, bool other_fields, const uint8_t **ret_secret,
		       size_t *ret_len)
{
	const uint8_t *secret = NULL, *val;
	size_t secret_len = 0, len;
	struct frame_iter it;
	bool have_version = false;
	uint16_t tag;
	uint64_t v;
	int r;

	frame_iter_init(&it, f);
	while ((r = frame_iter_next(&it, &tag, &val, &len)) > 0) {
		if (tag == TAG_SECRET && !secret) {
			secret = val;
			secret_len = len;
		} else if (tag == TAG_VERSION && !have_version) {
			if (frame_val_u64(val, len, &v) < 0 || v != PROTO_VERSION)
				return -EPROTO;
			have_version = true;
		} else if (!other_fields || tag == TAG_SECRET || tag == TAG_VERSION)
			return -EBADMSG;
	}
	if (r < 0)
		return r;
	if (!secret || !have_version)
		return -EBADMSG;
	*ret_secret = secret;
	*ret_len = secret_len;
	return 0;
}

/* The secret and version of a HELLO or FILE_OPEN, checked in constant time. */
static int conn_check_secret(struct conn *k, const struct frame *f)
{
	struct channel *c = k->channel;
	const uint8_t *secret;
	size_t len;
	int r;

	r = hello_parse(f, f->type == MSG_FILE_OPEN, &secret, &len);
	if (r < 0)
		return r;
	if (len != c->secret_len || !memeq_consttime(secret, c->secret, len)) {
		log_warn("controller authentication failed", NULL);
		return -EACCES;
	}
	return 0;
}

static int conn_hello(struct conn *k, const struct frame *f)
{
	struct channel *c = k->channel;
	int r;

	if (f->payload_len > HELLO_MAX_PAYLOAD)
		return -EMSGSIZE;
	r = conn_check_secret(k, f);
	if (r < 0)
		return r;
	if (c->active && c->active != k) {
		log_info("controller connection replaced", NULL);
		conn_close(c->active);
	}
	if (!k->authenticated)
		log_info("controller connected", NULL);
	k->authenticated = true;
	c->active = k;
	event_source_free(k->hello_timer);
	k->hello_timer = NULL;
	return send_hello_ok(c, k);
}

static int channel_ack(struct channel *c, uint64_t seq)
{
	struct done *prev = NULL;

	for (struct done *d = c->done_first; d; prev = d, d = d->next) {
		if (d->seq != seq)
			continue;
		if (prev)
			prev->next = d->next;
		else
			c->done_first = d->next;
		if (c->done_last == d)
			c->done_last = prev;
		free(d->run_id);
		buf_free(&d->frame);
		free(d);
		return 0;
	}
	log_debug("ack for an unknown completion", NULL);
	return 0;
}

static int conn_dispatch(struct conn *k, const struct frame *f)
{
	struct channel *c = k->channel;

	if (f->type == MSG_HELLO)
		return conn_hello(k, f);
	if (!k->authenticated)
		return -EACCES;
	if (f->type == MSG_ACK)
		return channel_ack(c, f->seq);
	return c->ops->message(c, f, c->userdata);
}

/* A FILE_OPEN as the first frame: 1 once the connection was handed over (the caller forgets
 * it), < 0 when it must close. */
static int conn_file_open(struct conn *k, const struct frame *f, size_t end)
{
	struct channel *c = k->channel;
	int r;

	if (k->authenticated || !c->ops->file_session)
		return -EPROTO;
	r = conn_check_secret(k, f);
	if (r < 0)
		return r;
	/* out of epoll before the fd leaves: the worker's copy would keep it registered */
	event_source_free(k->io);
	k->io = NULL;
	c->ops->file_session(c, TAKE_FD(k->fd), f, k->in.data + end, k->in.len - end, c->userdata);
	return 1;
}

/* Handles every complete frame in the input buffer; < 0 when the connection must go, 1 when it
 * became a file session (and is no longer ours). */
static int conn_process(struct conn *k)
{
	size_t pos = 0;
	int r = 0;

	while (!k->failed) {
		/* a stranger may send one FILE_OPEN (two paths); HELLO is checked for its own cap */
		size_t max = k->authenticated ? PROTO_MAX_PAYLOAD : FILE_OPEN_MAX_PAYLOAD;
		struct frame f;
		long n = frame_parse(k->in.data + pos, k->in.len - pos, max, &f);

		if (n <= 0) {
			r = (int)n;
			break;
		}
		pos += (size_t)n;
		r = f.type == MSG_FILE_OPEN ? conn_file_open(k, &f, pos) : conn_dispatch(k, &f);
		if (r > 0)
			return r;
		if (r < 0) {
			char type[8];

			snprintf(type, sizeof type, "%u", f.type);
			log_warn("closing controller connection after a bad frame", "type", type,
				 "error", strerror(-r), NULL);
			return r;
		}
	}
	if (r < 0) {
		log_warn("closing controller connection after a bad frame header", "error",
			 strerror(-r), NULL);
		return r;
	}
	buf_consume(&k->in, pos);
	if (k->in.len == 0 && k->in.cap > KEEP_BUFFER_BYTES)
		buf_free(&k->in);
	return 0;
}

/* Reads what is there: 1 with new bytes, 0 at EOF or error (the peer is gone), -EAGAIN. */
static int conn_read(struct conn *k)
{
	ssize_t n;

	if (buf_reserve(&k->in, READ_CHUNK) < 0)
		return 0;
	do
		n = read(k->fd, k->in.data + k->in.len, READ_CHUNK);
	while (n < 0 && errno == EINTR);
	if (n < 0 && errno == EAGAIN)
		return -EAGAIN;
	if (n <= 0)
		return 0;
	k->in.len += (size_t)n;
	return 1;
}

static int on_conn_io(struct event_source *s, int fd, uint32_t revents, void *userdata)
{
	struct conn *k = userdata;
	struct channel *c = k->channel;
	size_t unsent;

	if (revents & EPOLLIN) {
		int r = conn_read(k);

		if (r > 0)
			r = conn_process(k) < 0 ? 0 : 1; /* a file session's fd is no longer ours */
		if (r == 0 || k->fd < 0) {
			conn_close(k);
			return 0;
		}
	} else if (revents & (EPOLLHUP | EPOLLERR))
		k->failed = true;
	unsent = conn_unsent(k);
	if (!k->failed)
		conn_flush(k);
	if (k->failed) {
		conn_close(k);
		return 0;
	}
	if (k == c->active && unsent > CHANNEL_MAX_UNSENT && conn_unsent(k) <= CHANNEL_MAX_UNSENT &&
	    c->ops->drained)
		c->ops->drained(c, c->userdata);
	return 0;
}

static int on_hello_timeout(struct event_source *s, uint64_t now, void *userdata)
{
	struct conn *k = userdata;

	log_warn("closing connection that sent no hello", NULL);
	conn_close(k);
	return 0;
}

/* Keeps at most MAX_UNAUTHENTICATED strangers: the oldest one makes room. */
static void limit_unauthenticated(struct channel *c)
{
	struct conn *oldest = NULL;
	size_t n = 0;

	for (struct conn *k = c->conns; k; k = k->next)
		if (!k->authenticated) {
			n++;
			oldest = k;
		}
	if (n >= MAX_UNAUTHENTICATED)
		conn_close(oldest);
}

static int conn_new(struct channel *c, int fd)
{
	struct conn *k = calloc(1, sizeof *k);
	int r;

	if (!k)
		return -ENOMEM;
	*k = (struct conn){ .channel = c, .fd = fd, .events = EPOLLIN };
	r = event_add_io(c->loop, &k->io, fd, EPOLLIN, on_conn_io, k);
	if (r >= 0)
		r = event_add_timer(c->loop, &k->hello_timer, now_usec() + HELLO_TIMEOUT_USEC,
				    on_hello_timeout, k);
	if (r < 0) {
		event_source_free(k->io);
		free(k);
		return r;
	}
	limit_unauthenticated(c);
	k->next = c->conns;
	c->conns = k;
	return 0;
}

static int on_accept_resume(struct event_source *s, uint64_t now, void *userdata)
{
	struct channel *c = userdata;

	(void)event_source_set_io_events(c->listen_io, EPOLLIN);
	return 0;
}

/* Out of fds: stop accepting for a moment instead of spinning on a level-triggered fd. */
static void accept_pause(struct channel *c)
{
	log_warn("cannot accept controller connections", "error", strerror(errno), NULL);
	if (event_source_set_io_events(c->listen_io, 0) < 0)
		return;
	if (c->accept_timer)
		(void)event_source_set_time(c->accept_timer, now_usec() + ACCEPT_PAUSE_USEC);
	else
		(void)event_add_timer(c->loop, &c->accept_timer, now_usec() + ACCEPT_PAUSE_USEC,
				      on_accept_resume, c);
}

static int on_listen_io(struct event_source *s, int fd, uint32_t revents, void *userdata)
{
	struct channel *c = userdata;

	for (int i = 0; i < 16; i++) {
		int cfd = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (cfd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno != EAGAIN)
				accept_pause(c);
			break;
		}
		if (conn_new(c, cfd) < 0) {
			close(cfd);
			break;
		}
	}
	return 0;
}

int channel_new(struct event_loop *loop, int listen_fd, const void *secret, size_t secret_len,
		const struct channel_ops *ops, void *userdata, struct channel **ret)
{
	struct channel *c;
	int r;

	if (secret_len == 0 || secret_len > PROTO_MAX_SECRET)
		return -EINVAL;
	r = fd_set_nonblock(listen_fd, true);
	if (r < 0)
		return r;
	c = calloc(1, sizeof *c);
	if (!c)
		return -ENOMEM;
	*c = (struct channel){
		.loop = loop,
		.listen_fd = listen_fd,
		.secret_len = secret_len,
		.ops = ops,
		.userdata = userdata,
		.next_seq = 1,
	};
	memcpy(c->secret, secret, secret_len);
	r = event_add_io(loop, &c->listen_io, listen_fd, EPOLLIN, on_listen_io, c);
	if (r < 0) {
		free(c);
		return r;
	}
	*ret = c;
	return 0;
}

void channel_free(struct channel *c)
{
	if (!c)
		return;
	c->ops = &(const struct channel_ops){ 0 }; /* no callbacks while tearing down */
	while (c->conns)
		conn_close(c->conns);
	while (c->done_first)
		channel_ack(c, c->done_first->seq);
	event_source_free(c->listen_io);
	event_source_free(c->accept_timer);
	explicit_bzero(c->secret, sizeof c->secret);
	free(c);
}

int channel_replace_listener(struct channel *c, int listen_fd)
{
	struct event_source *io = NULL;
	int r = fd_set_nonblock(listen_fd, true);
	if (r >= 0)
		r = event_add_io(c->loop, &io, listen_fd, EPOLLIN, on_listen_io, c);
	if (r < 0)
		return r;
	event_source_free(c->listen_io);
	event_source_free(c->accept_timer);
	c->accept_timer = NULL;
	close(c->listen_fd);
	c->listen_fd = listen_fd;
	c->listen_io = io;
	for (struct conn *k = c->conns, *next; k; k = next) {
		next = k->next;
		if (k != c->active) {
			conn_close(k);
			continue;
		}
		k->close_when_sent = true;
		conn_flush(k);
	}
	return 0;
}

void channel_forget_secret(struct channel *c)
{
	explicit_bzero(c->secret, sizeof c->secret);
}

bool channel_connected(const struct channel *c)
{
	return c->active && !c->active->failed;
}

bool channel_output_ok(const struct channel *c)
{
	return channel_connected(c) && conn_unsent(c->active) <= CHANNEL_MAX_UNSENT;
}

int channel_begin(struct channel *c, uint16_t type, struct buf **ret_buf, size_t *ret_start)
{
	int r;

	if (!channel_connected(c))
		return -ENOTCONN;
	r = frame_begin(&c->active->out, ret_start, type, 0);
	if (r < 0) {
		c->active->out.len = *ret_start;
		return r;
	}
	*ret_buf = &c->active->out;
	return 0;
}

int channel_end(struct channel *c, size_t start, int r)
{
	struct conn *k = c->active;

	if (r >= 0)
		r = frame_end(&k->out, start);
	if (r < 0) {
		k->out.len = start;
		return r;
	}
	/* With EPOLLOUT armed the socket is full; the io callback sends when it drains. */
	if (!(k->events & EPOLLOUT))
		conn_flush(k);
	return 0;
}

int channel_end_with_data(struct channel *c, size_t start, int r, uint16_t tag, const void *data,
			  size_t n)
{
	struct conn *k = c->active;
	bool direct;
	size_t head;
	ssize_t sent = 0;

	if (r >= 0)
		r = frame_end_with_bytes(&k->out, start, tag, n);
	if (r < 0) {
		k->out.len = start;
		return r;
	}
	head = k->out.len - k->out_pos;
	/* Only when this frame is all that is unsent and the socket is not known to be full. */
	direct = k->out_pos == start && !(k->events & EPOLLOUT) && !k->failed;
	if (direct) {
		struct iovec iov[2] = { { k->out.data + k->out_pos, head }, { (void *)data, n } };
		struct msghdr mh = { .msg_iov = iov, .msg_iovlen = 2 };

		do
			sent = sendmsg(k->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
		while (sent < 0 && errno == EINTR);
		if (sent < 0 && errno != EAGAIN)
			k->failed = true; /* the io callback closes it */
		if (sent < 0)
			sent = 0;
	}
	if ((size_t)sent < head) {
		r = buf_append(&k->out, data, n);
		if (r < 0 && sent == 0) { /* nothing of it is out: dropped whole */
			k->out.len = start;
			return r;
		}
		k->out_pos += (size_t)sent;
	} else {
		/* the header is out: the queue keeps only the rest of the data */
		k->out.len = k->out_pos = 0;
		r = buf_append(&k->out, (const uint8_t *)data + ((size_t)sent - head),
			       n - ((size_t)sent - head));
	}
	if (r < 0)
		k->failed = true; /* half a frame is out: the stream cannot go on */
	if (!direct && !(k->events & EPOLLOUT))
		conn_flush(k);
	else if (direct && (k->failed || k->out_pos < k->out.len))
		conn_set_events(k,
				EPOLLIN | EPOLLOUT); /* full (or failed): the io callback goes on */
	return r < 0 ? r : 0;
}

int channel_send_error(struct channel *c, uint16_t tag, const char *key, const char *reason)
{
	struct buf *b;
	size_t start;
	int r = channel_begin(c, MSG_ERROR, &b, &start);

	if (r < 0)
		return r;
	r = tag && key ? frame_put_str(b, tag, key) : 0;
	if (r >= 0)
		r = frame_put_str(b, TAG_REASON, reason);
	return channel_end(c, start, r);
}

uint64_t channel_next_seq(struct channel *c)
{
	return c->next_seq++;
}

int channel_submit_done(struct channel *c, uint64_t seq, const char *run_id, struct buf *frame)
{
	return channel_submit_held(c, seq, MSG_RUN_DONE, run_id, frame);
}

int channel_submit_held(struct channel *c, uint64_t seq, uint16_t type, const char *key,
			struct buf *frame)
{
	struct done *d = calloc(1, sizeof *d);

	if (!d)
		return -ENOMEM;
	d->run_id = strdup(key);
	if (!d->run_id) {
		free(d);
		return -ENOMEM;
	}
	d->seq = seq;
	d->type = type;
	d->frame = *frame;
	*frame = (struct buf){ 0 };
	if (c->done_last)
		c->done_last->next = d;
	else
		c->done_first = d;
	c->done_last = d;
	if (channel_connected(c)) {
		struct conn *k = c->active;

		if (buf_append(&k->out, d->frame.data, d->frame.len) < 0)
			k->failed = true; /* re-sent after the next HELLO */
		if (!(k->events & EPOLLOUT))
			conn_flush(k);
	}
	return 0;
}

bool channel_done_pending(const struct channel *c, const char *run_id)
{
	for (const struct done *d = c->done_first; d; d = d->next)
		if (d->type == MSG_RUN_DONE && strcmp(d->run_id, run_id) == 0)
			return true;
	return false;
}

void channel_drop_held(struct channel *c, uint16_t type, const char *key)
{
	for (struct done *d = c->done_first, *next; d; d = next) {
		next = d->next;
		if (d->type == type && strcmp(d->run_id, key) == 0)
			channel_ack(c, d->seq);
	}
}

void channel_trim_held(struct channel *c, uint16_t type, const char *key, size_t keep,
		       int (*strip)(struct buf *frame))
{
	size_t n = 0;

	for (struct done *d = c->done_first; d; d = d->next)
		n += d->type == type && strcmp(d->run_id, key) == 0;
	for (struct done *d = c->done_first; d && n > keep; d = d->next)
		if (d->type == type && strcmp(d->run_id, key) == 0) {
			(void)strip(&d->frame);
			n--;
		}
}

bool channel_held_pending(const struct channel *c, uint16_t type, const char *key)
{
	for (const struct done *d = c->done_first; d; d = d->next)
		if (d->type == type && strcmp(d->run_id, key) == 0)
			return true;
	return false;
}
