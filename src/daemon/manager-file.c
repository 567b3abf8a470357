/* SPDX-License-Identifier: MIT */
/* File sessions (proto/file-proto.h): one connection to the workspace's agent per file
 * operation or watch, driven from the loop and never waited on.
 *
 * Security: the agent, and whoever holds its socket, is hostile. Each frame is capped
 * (FILE_MAX_CHUNK and a little) before it is buffered; each field is checked for its type and
 * length; a NAME is at most FILE_MAX_NAME bytes without '/'; an ETAG is at most FILE_MAX_ETAG
 * bytes of [A-Za-z0-9._:-] (it goes into an HTTP header); an ERRNO lies in 1-4095; a LIST has
 * at most FILE_MAX_ENTRIES entries; each operation may send only the frames its contract names,
 * in order. Anything else ends the session with -EPROTO. Memory per session is bounded: the
 * input buffer holds at most one read and one frame, and a paused session is not read. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "basic/cleanup.h"
#include "basic/list.h"
#include "basic/log.h"
#include "basic/safe-fs.h"
#include "basic/util.h"
#include "event/event.h"
#include "agentlink-internal.h"
#include "manager-internal.h"
#include "proto/agent-proto.h"
#include "proto/file-proto.h"
#include "proto/frame.h"

#define FILE_READ_BYTES (64u * 1024)
#define FILE_MAX_FRAME (FILE_MAX_CHUNK + 1024u)
#define FILE_OUT_HIGH (256u * 1024) /* queued to the agent: refuse more above */
#define FILE_OUT_LOW (64u * 1024)   /* writable() once below */
#define FILE_MAX_ERRNO 4095u

struct file_session {
	struct file_session *prev, *next; /* in workspace->file_sessions */
	struct workspace *ws;
	int fd;
	struct event_source *io;
	struct event_source *kick; /* delivers buffered frames after an unpause */
	struct buf in;
	size_t in_off;
	struct buf out;
	const struct file_session_ops *ops;
	void *userdata;
	unsigned op;
	char *path, *path2;
	const char *field, *field2;
	unsigned n_infos;
	bool paused;
	bool want_writable;
	bool sent_end;
	bool eof;	    /* the agent closed its side */
	unsigned depth;	    /* callbacks under way */
	bool close_pending; /* closed from a callback: freed when it returns */
};

/* ---- errors -------------------------------------------------------------------------------- */

struct errno_map {
	int agent; /* what FILE_ERROR said */
	int api;   /* what the API answers (validate.c's statuses) */
	const char *what;
};

static const struct errno_map errno_map[] = {
	{ EINVAL, -EINVAL, "invalid path" },
	{ ENAMETOOLONG, -EINVAL, "invalid path (a name or the path is too long)" },
	{ EXDEV, -EINVAL, "escapes the workspace" },
	{ ELOOP, -EINVAL, "escapes the workspace or has too many levels of symbolic links" },
	{ ENXIO, -EINVAL, "not a regular file" },
	{ EISDIR, -EINVAL, "is a directory" },
	{ ENOTDIR, -EINVAL, "not a directory" },
	{ EACCES, STATION_EFORBIDDEN, "permission denied" },
	{ EPERM, STATION_EFORBIDDEN, "permission denied" },
	{ EROFS, STATION_EFORBIDDEN, "permission denied (read-only filesystem)" },
	{ ENOENT, -ENOENT, "no such file or directory" },
	{ EEXIST, -EBUSY, "exists" },
	{ ENOTEMPTY, -EBUSY, "not empty" },
	{ ESTALE, -ESTALE, "changed since (If-Match does not match its etag)" },
	{ EFBIG, -E2BIG, "larger than maxBytes" },
	{ ENOSPC, -ENOSPC, "the sandbox's filesystem is full" },
	{ EDQUOT, -ENOSPC, "the sandbox's disk quota is exhausted" },
	{ EBUSY, -EAGAIN, "too many file operations under way in the workspace" },
	{ EMLINK, -EBUSY, "too many links" },
};

static int session_error(struct file_session *s, uint64_t err, const char *err_path,
			 struct station_error *e)
{
	char q[600];
	const char *path = s->path, *field = s->field;

	/* RENAME: the error is about the target when the agent says so, or when it exists */
	if (s->path2 && ((err_path && strcmp(err_path, s->path2) == 0) || err == EEXIST)) {
		path = s->path2;
		field = s->field2;
	}
	quote_bytes(path, q, 300);
	for (size_t i = 0; i < ELEMENTSOF(errno_map); i++)
		if ((uint64_t)errno_map[i].agent == err)
			return station_error_set(
				e, errno_map[i].api,
				errno_map[i].api == -EAGAIN || errno_map[i].api == -ENOSPC ? NULL :
											     field,
				"%s: %s", q, errno_map[i].what);
	return station_error_set(e, -EIO, NULL, "%s: the file operation failed: %s", q,
				 strerror((int)err));
}

static int protocol_error(struct file_session *s, const char *what, struct station_error *e)
{
	char q[320];

	quote_bytes(s->path, q, 300);
	return station_error_set(e, -EPROTO, NULL,
				 "%s: the workspace agent broke off the file operation (%s)", q,
				 what);
}

/* ---- the session's life -------------------------------------------------------------------- */

static void session_free(struct file_session *s)
{
	if (s->ws) {
		LIST_REMOVE(&s->ws->file_sessions, s);
		s->ws->n_file_sessions--;
	}
	event_source_free(s->io);
	event_source_free(s->kick);
	if (s->fd >= 0)
		close(s->fd);
	buf_free(&s->in);
	buf_free(&s->out);
	free(s->path);
	free(s->path2);
	free(s);
}

/* The end: end() once, then the session goes. */
static void session_end(struct file_session *s, int r, bool truncated,
			const struct station_error *e)
{
	const struct file_session_ops *ops = s->ops;
	void *userdata = s->userdata;

	event_source_free(s->io);
	s->io = NULL;
	session_free(s);
	ops->end(userdata, r, truncated, e);
}

static void session_fail(struct file_session *s, int r, const char *what)
{
	struct station_error e = {};

	if (r == -EPROTO || r == -EBADMSG || r == -EMSGSIZE || r == -E2BIG)
		protocol_error(s, what, &e);
	else {
		char q[320];

		quote_bytes(s->path, q, 300);
		station_error_set(&e, -EPROTO, NULL,
				  "%s: the connection to the workspace agent failed (%s)", q,
				  strerror(-r));
	}
	session_end(s, e.err, false, &e);
}

static void session_update_events(struct file_session *s)
{
	uint32_t ev = (s->paused || s->eof ? 0 : EPOLLIN) | (s->out.len ? EPOLLOUT : 0);

	if (s->io)
		event_source_set_io_events(s->io, ev);
}

static int session_flush(struct file_session *s)
{
	while (s->out.len > 0) {
		ssize_t n = send(s->fd, s->out.data, s->out.len, MSG_NOSIGNAL | MSG_DONTWAIT);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN)
				break;
			return negative_errno();
		}
		buf_consume(&s->out, (size_t)n);
	}
	session_update_events(s);
	return 0;
}

/* ---- frames from the agent ----------------------------------------------------------------- */

struct info_fields {
	struct file_entry entry;
	char *name, *path, *link_target, *etag;
	bool has_type;
};

static bool etag_ok(const char *s)
{
	for (; *s; s++)
		if (!((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'z') ||
		      (*s >= 'A' && *s <= 'Z') || *s == '-' || *s == '.' || *s == '_' || *s == ':'))
			return false;
	return true;
}

static int info_u64(uint16_t tag, const uint8_t *v, size_t n, struct file_entry *en, bool *has_type)
{
	uint64_t u;
	int r = frame_val_u64(v, n, &u);

	if (r < 0)
		return r;
	switch (tag) {
	case TAG_FILE_TYPE:
		if (!file_type_to_string(u))
			return -EBADMSG;
		en->type = (unsigned)u;
		*has_type = true;
		return 0;
	case TAG_SIZE:
		en->size = u;
		return 0;
	case TAG_MODE:
		if (u > 07777)
			return -EBADMSG;
		en->mode = u;
		return 0;
	case TAG_MTIME_NS:
		en->mtime_ns = u;
		return 0;
	case TAG_UID:
		en->uid = u;
		return 0;
	case TAG_GID:
		en->gid = u;
		return 0;
	default:
		return 0; /* a newer agent's field: skipped, but it had to be an integer */
	}
}

static int info_field(void *userdata, uint16_t tag, const uint8_t *v, size_t n)
{
	struct info_fields *x = userdata;
	int r;

	switch (tag) {
	case TAG_NAME:
		if (n == 0 || n > FILE_MAX_NAME || memchr(v, '/', n))
			return -EBADMSG;
		return agentlink_str_once(&x->name, v, n, FILE_MAX_NAME);
	case TAG_PATH:
		return agentlink_str_once(&x->path, v, n, PROTO_MAX_PATH);
	case TAG_LINK_TARGET:
		return agentlink_str_once(&x->link_target, v, n, PROTO_MAX_PATH);
	case TAG_ETAG:
		r = agentlink_str_once(&x->etag, v, n, FILE_MAX_ETAG);
		return r < 0 ? r : etag_ok(x->etag) && n > 0 ? 0 : -EBADMSG;
	default:
		return info_u64(tag, v, n, &x->entry, &x->has_type);
	}
}

static void info_fields_free(struct info_fields *x)
{
	free(x->name);
	free(x->path);
	free(x->link_target);
	free(x->etag);
}

/* How many INFOs the operation may send, and whether its later ones are named entries. */
static unsigned op_max_infos(unsigned op)
{
	switch (op) {
	case FILE_OP_LIST:
		return FILE_MAX_ENTRIES + 1;
	case FILE_OP_DELETE:
		return 0;
	default:
		return 1;
	}
}

static int on_info(struct file_session *s, const struct frame *f)
{
	struct info_fields x = {};
	bool entry = s->op == FILE_OP_LIST && s->n_infos > 0;
	int r;

	if (s->n_infos >= op_max_infos(s->op))
		return -EBADMSG;
	r = frame_for_each_field(f, info_field, &x);
	if (r >= 0 && (!x.has_type || entry != !!x.name))
		r = -EBADMSG;
	if (r >= 0) {
		s->n_infos++;
		x.entry.name = x.name;
		x.entry.path = x.path;
		x.entry.link_target = x.link_target;
		x.entry.etag = x.etag;
		if (s->ops->info)
			s->ops->info(s->userdata, &x.entry);
	}
	info_fields_free(&x);
	return r;
}

static int on_data(struct file_session *s, const struct frame *f)
{
	struct frame_iter it;
	const uint8_t *v;
	size_t n;
	uint16_t tag;
	int r;

	if (s->op != FILE_OP_READ || s->n_infos != 1)
		return -EBADMSG;
	frame_iter_init(&it, f);
	while ((r = frame_iter_next(&it, &tag, &v, &n)) > 0) {
		if (tag != TAG_DATA)
			continue;
		if (n > FILE_MAX_CHUNK)
			return -EBADMSG;
		if (n > 0 && s->ops->data)
			s->ops->data(s->userdata, v, n);
		return 0;
	}
	return r < 0 ? r : -EBADMSG;
}

struct event_fields {
	struct file_event_info ev;
	char *path, *path2;
	bool has_event;
};

static int event_field(void *userdata, uint16_t tag, const uint8_t *v, size_t n)
{
	struct event_fields *x = userdata;
	uint64_t u;
	int r;

	if (tag == TAG_PATH)
		return agentlink_str_once(&x->path, v, n, PROTO_MAX_PATH);
	if (tag == TAG_PATH2)
		return agentlink_str_once(&x->path2, v, n, PROTO_MAX_PATH);
	r = frame_val_u64(v, n, &u);
	if (r < 0)
		return r;
	if (tag == TAG_FILE_EVENT) {
		if (!file_event_to_string(u))
			return -EBADMSG;
		x->ev.event = (unsigned)u;
		x->has_event = true;
	} else if (tag == TAG_FILE_TYPE) {
		if (!file_type_to_string(u))
			return -EBADMSG;
		x->ev.type = (unsigned)u;
	}
	return 0;
}

static int on_event(struct file_session *s, const struct frame *f)
{
	struct event_fields x = {};
	int r;

	if (s->op != FILE_OP_WATCH || s->n_infos != 1)
		return -EBADMSG;
	r = frame_for_each_field(f, event_field, &x);
	if (r >= 0 && (!x.has_event || (!x.path && x.ev.event != FILE_EVENT_OVERFLOW) ||
		       (x.ev.event == FILE_EVENT_MOVED && !x.path2)))
		r = -EBADMSG;
	if (r >= 0) {
		x.ev.path = x.path ? x.path : "";
		x.ev.path2 = x.path2;
		if (s->ops->event)
			s->ops->event(s->userdata, &x.ev);
	}
	free(x.path);
	free(x.path2);
	return r;
}

struct end_fields {
	uint64_t err, truncated, flags;
	char *path, *reason;
};

static int end_field(void *userdata, uint16_t tag, const uint8_t *v, size_t n)
{
	struct end_fields *x = userdata;

	switch (tag) {
	case TAG_ERRNO:
		return frame_val_u64(v, n, &x->err);
	case TAG_TRUNCATED:
		return frame_val_u64(v, n, &x->truncated);
	case TAG_FILE_FLAGS:
		return frame_val_u64(v, n, &x->flags);
	case TAG_PATH:
		return agentlink_str_once(&x->path, v, n, PROTO_MAX_PATH);
	case TAG_REASON:
		return agentlink_str_once(&x->reason, v, n, FILE_MAX_REASON);
	default:
		return 0;
	}
}

/* END or FILE_ERROR: the last frame. Returns 1 when the session ended (and is gone). */
static int on_end(struct file_session *s, const struct frame *f)
{
	struct end_fields x = {};
	struct station_error e = {};
	int r = frame_for_each_field(f, end_field, &x);

	if (r >= 0 && f->type == MSG_FILE_ERROR && (x.err == 0 || x.err > FILE_MAX_ERRNO))
		r = -EBADMSG;
	/* every operation but DELETE reports what it did or saw before its END */
	if (r >= 0 && f->type == MSG_FILE_END && s->op != FILE_OP_DELETE && s->n_infos == 0)
		r = -EBADMSG;
	/* a WRITE ends only after the controller's END: earlier, only an error may come */
	if (r >= 0 && f->type == MSG_FILE_END && s->op == FILE_OP_WRITE && !s->sent_end)
		r = -EBADMSG;
	if (r >= 0) {
		if (f->type == MSG_FILE_ERROR) {
			log_debug("file operation refused", "workspace", s->ws->row.id, "errno",
				  strerrorname_np((int)x.err) ?: "?", "reason",
				  x.reason ? x.reason : "", NULL);
			r = session_error(s, x.err, x.path, &e);
		} else {
			r = 0;
		}
	}
	free(x.path);
	free(x.reason);
	if (r == -EBADMSG)
		return r;
	session_end(s, r,
		    s->op == FILE_OP_WRITE ? (x.flags & FILE_F_CREATED) != 0 : x.truncated != 0,
		    &e);
	return 1;
}

/* Returns < 0 for a broken frame, 1 when the session ended, else 0. */
static int session_dispatch(struct file_session *s, const struct frame *f)
{
	switch (f->type) {
	case MSG_FILE_INFO:
		return on_info(s, f);
	case MSG_FILE_DATA:
		return on_data(s, f);
	case MSG_FILE_EVENT:
		return on_event(s, f);
	case MSG_FILE_END:
	case MSG_FILE_ERROR:
		return on_end(s, f);
	default:
		return -EBADMSG;
	}
}

/* Delivers the buffered frames until paused. 1 when the session is gone. */
static int session_process(struct file_session *s)
{
	while (!s->paused) {
		struct frame f;
		long sz = frame_parse(s->in.data + s->in_off, s->in.len - s->in_off, FILE_MAX_FRAME,
				      &f);
		int r;

		if (sz < 0) {
			session_fail(s, (int)sz,
				     "a frame over the size limit or of another version");
			return 1;
		}
		if (sz == 0)
			break;
		s->depth++;
		r = session_dispatch(s, &f);
		if (r == 1)
			return 1; /* ended: s is gone */
		s->depth--;
		if (s->close_pending) {
			session_free(s);
			return 1;
		}
		if (r < 0) {
			session_fail(s, r, "a frame the operation does not allow");
			return 1;
		}
		s->in_off += (size_t)sz;
	}
	if (s->in_off > 0) {
		buf_consume(&s->in, s->in_off);
		s->in_off = 0;
	}
	return 0;
}

static int session_read(struct file_session *s)
{
	while (!s->paused && !s->eof) {
		ssize_t n;
		int r;

		/* At most one read beyond a whole frame is ever buffered. */
		if (s->in.len >= FILE_MAX_FRAME + FRAME_HEADER_SIZE)
			return session_process(s);
		r = buf_reserve(&s->in, FILE_READ_BYTES);
		if (r < 0) {
			session_fail(s, r, "out of memory");
			return 1;
		}
		n = recv(s->fd, s->in.data + s->in.len, FILE_READ_BYTES, MSG_DONTWAIT);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return 0;
		if (n < 0) {
			session_fail(s, negative_errno(), NULL);
			return 1;
		}
		if (n == 0)
			s->eof = true;
		s->in.len += (size_t)n;
		if (session_process(s))
			return 1;
	}
	if (s->eof && !s->paused) {
		session_fail(s, -EPROTO, "the connection closed before the operation ended");
		return 1;
	}
	session_update_events(s);
	return 0;
}

static int on_session_io(struct event_source *src, int fd, uint32_t revents, void *userdata)
{
	struct file_session *s = userdata;
	int r;

	if (revents & EPOLLOUT) {
		r = session_flush(s);
		if (r < 0 && r != -EPIPE && r != -ECONNRESET) {
			session_fail(s, r, NULL);
			return 0;
		}
		if (r < 0) { /* the agent hung up: what it said last is still to be read */
			buf_free(&s->out);
			session_update_events(s);
		}
		if (s->want_writable && s->out.len < FILE_OUT_LOW) {
			s->want_writable = false;
			s->depth++;
			if (s->ops->writable)
				s->ops->writable(s->userdata);
			s->depth--;
			if (s->close_pending) {
				session_free(s);
				return 0;
			}
		}
	}
	if (revents & (EPOLLIN | EPOLLHUP | EPOLLERR))
		(void)session_read(s);
	return 0;
}

static int on_session_kick(struct event_source *src, uint64_t now, void *userdata)
{
	struct file_session *s = userdata;

	if (!s->paused && session_process(s) == 0)
		(void)session_read(s);
	return 0;
}

/* ---- opening ------------------------------------------------------------------------------- */

static int put_open(struct buf *b, const struct workspace *ws, const struct file_request *q)
{
	size_t start;
	int r = frame_begin(b, &start, MSG_FILE_OPEN, 0);

	if (r >= 0)
		r = frame_put_bytes(b, TAG_SECRET, ws->secret, SECRET_BYTES);
	if (r >= 0)
		r = frame_put_u64(b, TAG_VERSION, PROTO_VERSION);
	if (r >= 0)
		r = frame_put_u64(b, TAG_FILE_OP, q->op);
	if (r >= 0)
		r = frame_put_str(b, TAG_PATH, q->path);
	if (r >= 0 && q->path2)
		r = frame_put_str(b, TAG_PATH2, q->path2);
	if (r >= 0 && q->flags)
		r = frame_put_u64(b, TAG_FILE_FLAGS, q->flags);
	if (r >= 0 && q->has_mode)
		r = frame_put_u64(b, TAG_MODE, q->mode);
	if (r >= 0 && q->has_offset)
		r = frame_put_u64(b, TAG_OFFSET, q->offset);
	if (r >= 0 && q->has_length)
		r = frame_put_u64(b, TAG_LENGTH, q->length);
	if (r >= 0 && q->has_suffix)
		r = frame_put_u64(b, TAG_SUFFIX, q->suffix);
	if (r >= 0 && q->has_max_bytes)
		r = frame_put_u64(b, TAG_MAX_BYTES, q->max_bytes);
	if (r >= 0 && q->if_match)
		r = frame_put_str(b, TAG_IF_MATCH, q->if_match);
	if (r >= 0)
		r = frame_end(b, start);
	return r;
}

static int request_check(const struct file_request *q, struct station_error *e)
{
	const char *p[2] = { q->path, q->path2 };
	const char *f[2] = { q->field ? q->field : "path", q->field2 ? q->field2 : "to" };

	if (q->op < FILE_OP_STAT || q->op > FILE_OP_WATCH)
		return station_error_set(e, -EINVAL, NULL, "unknown file operation");
	for (int i = 0; i < 2; i++) {
		if (!p[i] && i == 1)
			continue;
		if (!p[i] || !*p[i])
			return station_error_set(e, -EINVAL, f[i], "invalid path: empty");
		if (strlen(p[i]) > PROTO_MAX_PATH)
			return station_error_set(e, -EINVAL, f[i],
						 "invalid path: %zu bytes, over %u", strlen(p[i]),
						 PROTO_MAX_PATH);
	}
	if (q->if_match && (strlen(q->if_match) > FILE_MAX_ETAG || !etag_ok(q->if_match)))
		return station_error_set(e, -ESTALE, NULL,
					 "If-Match does not match any etag of this file");
	return 0;
}

/* FILE_OPEN carries the agent's secret: it goes only to a socket that host root made listen.
 * run/ belongs to container root, who could rename the agent's socket and put one of its own
 * there, then read the secret of every file operation. The listener's credentials are taken
 * at listen(), by the adapter in the controller (host, runc, crun), whose uid is 0; container
 * root is a uid of the workspace's range, and a host workspace's commands run as --host-user.
 * The controller's pid is no help (after a restart the listener is an earlier controller); the
 * agent's is: after a checkpoint the agent listens itself, and only it has its pid
 * (workspace_agent_peer_check()). runsc's agent binds its own socket through the sandbox:
 * there the socket's safety rests on run/. */
static int peer_check(const struct workspace *ws, int fd, struct station_error *e)
{
	int r = workspace_agent_peer_check(ws, fd);
	if (r == -ENOTCONN)
		return station_error_set(e, r, NULL, "cannot check the agent's socket: %m");
	if (r < 0)
		return station_error_set(e, r, NULL,
					 "the agent socket of workspace \"%s\" is not the agent's",
					 ws->row.id);
	return 0;
}

static int session_connect(struct file_session *s, const struct file_request *q,
			   struct station_error *e)
{
	_cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	int r;

	if (fd < 0)
		return station_error_set(e, negative_errno(), NULL, "no socket: %m");
	/* the socket lives in run/, which container root owns: safe_connect_unix() refuses a
	 * symlink put there in its place */
	r = safe_connect_unix(fd, s->ws->socket_path);
	if (r < 0)
		return station_error_set(e, -ENOTCONN, NULL,
					 "cannot reach the agent of workspace \"%s\": %s",
					 s->ws->row.id, strerror(-r));
	r = peer_check(s->ws, fd, e);
	if (r < 0)
		return r;
	r = put_open(&s->out, s->ws, q);
	if (r >= 0)
		r = event_add_io(s->ws->m->loop, &s->io, fd, EPOLLIN | EPOLLOUT, on_session_io, s);
	if (r >= 0)
		r = event_add_timer(s->ws->m->loop, &s->kick, UINT64_MAX, on_session_kick, s);
	if (r < 0)
		return station_error_set(e, r, NULL, "cannot start a file session: %s",
					 strerror(-r));
	s->fd = TAKE_FD(fd);
	return 0;
}

static bool file_op_writes(int op)
{
	return op == FILE_OP_WRITE || op == FILE_OP_MKDIR || op == FILE_OP_RENAME ||
	       op == FILE_OP_DELETE;
}

int manager_file_open(struct manager *m, const char *ws_id, const struct file_request *q,
		      const struct file_session_ops *ops, void *userdata, struct file_session **ret,
		      struct station_error *e)
{
	struct workspace *ws = NULL;
	struct file_session *s;
	int r = workspace_lookup(m, ws_id, &ws, e);

	if (r >= 0) /* reads answer while paused: the agent does them */
		r = file_op_writes(q->op) ? workspace_wake_for(ws, "a file change", e) :
					    workspace_check_ready(ws, e);
	if (r >= 0)
		r = request_check(q, e);
	if (r < 0)
		return r;
	if (ws->link && ws->link_ready && !agentlink_has_feature(ws->link, AGENT_FEATURE_FILES))
		return station_error_set(e, -ENOTCONN, NULL,
					 "the agent of workspace \"%s\" predates file operations; "
					 "restart the workspace to use them",
					 ws->row.id);
	if (ws->n_file_sessions >= MANAGER_MAX_FILE_SESSIONS)
		return station_error_set(e, -EAGAIN, NULL,
					 "%u file operations and watches already run in "
					 "workspace \"%s\"",
					 MANAGER_MAX_FILE_SESSIONS, ws->row.id);
	s = calloc(1, sizeof *s);
	if (!s)
		return station_error_set(e, -ENOMEM, NULL, "out of memory");
	*s = (struct file_session){ .fd = -1,
				    .ops = ops,
				    .userdata = userdata,
				    .op = q->op,
				    .field = q->field ? q->field : "path",
				    .field2 = q->field2 ? q->field2 : "to" };
	s->path = strdup(q->path);
	s->path2 = q->path2 ? strdup(q->path2) : NULL;
	if (!s->path || (q->path2 && !s->path2)) {
		session_free(s);
		return station_error_set(e, -ENOMEM, NULL, "out of memory");
	}
	s->ws = ws;
	LIST_PREPEND(&ws->file_sessions, s);
	ws->n_file_sessions++;
	r = session_connect(s, q, e);
	if (r < 0) {
		session_free(s);
		return r;
	}
	*ret = s;
	return 0;
}

/* ---- the consumer's side ------------------------------------------------------------------- */

void manager_file_pause(struct file_session *s, bool pause)
{
	if (s->paused == pause)
		return;
	s->paused = pause;
	session_update_events(s);
	if (!pause)
		(void)event_source_set_time(s->kick, now_usec());
}

int manager_file_write(struct file_session *s, const void *data, size_t n)
{
	const uint8_t *p = data;
	int r;

	if (s->sent_end || s->op != FILE_OP_WRITE)
		return -EPIPE;
	if (s->out.len >= FILE_OUT_HIGH) {
		s->want_writable = true;
		return -EAGAIN;
	}
	while (n > 0) {
		size_t piece = MIN(n, (size_t)FILE_MAX_CHUNK), start;

		r = frame_begin(&s->out, &start, MSG_FILE_DATA, 0);
		if (r >= 0)
			r = frame_put_bytes(&s->out, TAG_DATA, p, piece);
		if (r >= 0)
			r = frame_end(&s->out, start);
		if (r < 0)
			return r;
		p += piece;
		n -= piece;
	}
	r = session_flush(s);
	return r == -EPIPE || r == -ECONNRESET ? 0 : r; /* the agent's word on it comes by read */
}

int manager_file_write_end(struct file_session *s)
{
	size_t start;
	int r;

	if (s->sent_end || s->op != FILE_OP_WRITE)
		return -EPIPE;
	r = frame_begin(&s->out, &start, MSG_FILE_END, 0);
	if (r >= 0)
		r = frame_end(&s->out, start);
	if (r < 0)
		return r;
	s->sent_end = true;
	r = session_flush(s);
	return r == -EPIPE || r == -ECONNRESET ? 0 : r;
}

void manager_file_close(struct file_session *s)
{
	if (!s)
		return;
	if (s->depth > 0) {
		s->close_pending = true;
		return;
	}
	session_free(s);
}

/* ---- the workspace's end ------------------------------------------------------------------- */

void files_lose_all(struct workspace *ws, const char *reason)
{
	while (ws->file_sessions) {
		struct file_session *s = ws->file_sessions;
		struct station_error e = {};
		char q[320];

		quote_bytes(s->path, q, 300);
		station_error_set(&e, -EBUSY, NULL, "%s: workspace \"%s\" stopped (%s)", q,
				  ws->row.id, reason);
		session_end(s, e.err, false, &e);
	}
}

void files_free_all(struct workspace *ws)
{
	while (ws->file_sessions)
		session_free(ws->file_sessions);
}
