/* SPDX-License-Identifier: MIT */
/* The credential socket (credential.h). A client's life: READING its request (bounded lines of
 * known keys), WAITING for the controller's CRED_REPLY (a `get`), WRITING the answer, closed.
 * Any refusal closes the connection without a word: git then goes on as if no helper knew. */
#include "agent/credential.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "basic/cleanup.h"
#include "basic/log.h"
#include "basic/util.h"
#include "proto/agent-proto.h"

#define CRED_MAX_REQUEST (CRED_MAX_LINES * CRED_MAX_LINE)
#define CRED_MAX_PASSWORD 16384

enum cred_state { CRED_READING, CRED_WAITING, CRED_WRITING };

struct cred_conn {
	struct cred_server *server;
	struct cred_conn *next;
	int fd;
	struct event_source *io;
	struct event_source *timer;
	enum cred_state state;
	uint64_t request;
	struct buf in;
	struct buf out;
	size_t out_pos;
};

struct cred_server {
	struct event_loop *loop;
	struct channel *channel;
	int listen_fd;
	struct event_source *listen_io;
	uid_t uid;
	size_t n_conns;
	struct cred_conn *conns;
	uint64_t next_request;
};

/* What a request says, copied out of the client's lines. */
struct cred_request {
	char action[8];
	char protocol[16];
	char host[CRED_MAX_HOST + 1];
	char path[CRED_MAX_VALUE + 1];
	char username[CRED_MAX_VALUE + 1];
	bool have_protocol, have_host, have_path, have_username;
};

static void buf_wipe_free(struct buf *b)
{
	if (b->data)
		explicit_bzero(b->data, b->cap);
	buf_free(b);
}

static void conn_close(struct cred_conn *k)
{
	struct cred_server *s = k->server;

	for (struct cred_conn **p = &s->conns; *p; p = &(*p)->next)
		if (*p == k) {
			*p = k->next;
			break;
		}
	s->n_conns--;
	event_source_free(k->io);
	event_source_free(k->timer);
	close(k->fd);
	buf_wipe_free(&k->in); /* a `store` carried a password */
	buf_wipe_free(&k->out);
	free(k);
}

static void conn_refuse(struct cred_conn *k, const char *why)
{
	if (why)
		log_warn("credential request refused", "reason", why, NULL);
	conn_close(k);
}

/* Keys of git's credential protocol (gitcredentials(7), "input/output format"). */
static bool key_known(const char *key, size_t n)
{
	static const char *const keys[] = {
		"protocol",	      "host",	      "path",
		"username",	      "password",     "url",
		"wwwauth[]",	      "capability[]", "password_expiry_utc",
		"oauth_refresh_token"
	};
	for (size_t i = 0; i < ELEMENTSOF(keys); i++)
		if (strlen(keys[i]) == n && memcmp(keys[i], key, n) == 0)
			return true;
	return false;
}

static int copy_value(char *dst, size_t cap, bool *have, const char *v, size_t n)
{
	if (*have)
		return -EBADMSG; /* repeated */
	if (n >= cap)
		return -E2BIG;
	memcpy(dst, v, n);
	dst[n] = 0;
	*have = true;
	return 0;
}

static int request_field(struct cred_request *req, const char *line, size_t n)
{
	const char *eq = memchr(line, '=', n);

	if (!eq || eq == line || !key_known(line, (size_t)(eq - line)))
		return -EBADMSG;
	size_t klen = (size_t)(eq - line), vlen = n - klen - 1;
	const char *v = eq + 1;

#define FIELD(name)                                                                                \
	if (klen == strlen(#name) && memcmp(line, #name, klen) == 0)                               \
		return copy_value(req->name, sizeof req->name, &req->have_##name, v, vlen);
	FIELD(protocol)
	FIELD(host)
	FIELD(path)
	FIELD(username)
#undef FIELD
	return 0; /* known, and not needed to answer */
}

/* 0: a whole request is in data (ends with a blank line, or at eof); -EAGAIN: more to come;
 * -EBADMSG, -E2BIG: refused. */
static int request_parse(const char *data, size_t len, bool eof, struct cred_request *req)
{
	size_t pos = 0, lines = 0;

	*req = (struct cred_request){ 0 };
	if (memchr(data, 0, len))
		return -EBADMSG;
	while (pos < len) {
		const char *nl = memchr(data + pos, '\n', len - pos);
		size_t n = nl ? (size_t)(nl - (data + pos)) : len - pos;
		int r;

		if (n + 1 > CRED_MAX_LINE || ++lines > CRED_MAX_LINES)
			return -E2BIG;
		if (!nl && !eof)
			return -EAGAIN;
		if (n == 0)
			return lines > 1 ? 0 : -EBADMSG; /* the blank line ends it */
		if (lines == 1)
			r = copy_value(req->action, sizeof req->action, &(bool){ false },
				       data + pos, n);
		else
			r = request_field(req, data + pos, n);
		if (r < 0)
			return r;
		pos += n + (nl ? 1 : 0);
	}
	if (!eof)
		return -EAGAIN;
	return lines > 0 ? 0 : -EBADMSG;
}

static int send_request(struct cred_conn *k, const struct cred_request *req)
{
	struct cred_server *s = k->server;
	struct buf *b;
	size_t start;
	int r = channel_begin(s->channel, MSG_CRED_REQUEST, &b, &start);

	if (r < 0)
		return r;
	k->request = ++s->next_request;
	r = frame_put_u64(b, TAG_REQUEST, k->request);
	if (r >= 0)
		r = frame_put_str(b, TAG_CRED_PROTOCOL, req->protocol);
	if (r >= 0)
		r = frame_put_str(b, TAG_CRED_HOST, req->host);
	if (r >= 0 && req->have_path)
		r = frame_put_str(b, TAG_CRED_PATH, req->path);
	if (r >= 0 && req->have_username)
		r = frame_put_str(b, TAG_CRED_USERNAME, req->username);
	return channel_end(s->channel, start, r);
}

static void conn_request(struct cred_conn *k, const struct cred_request *req)
{
	if (strcmp(req->action, "store") == 0 || strcmp(req->action, "erase") == 0) {
		conn_close(k); /* nothing is kept in the sandbox, so nothing to store or erase */
		return;
	}
	const char *refused = strcmp(req->action, "get") != 0	     ? "unknown action" :
			      !req->have_protocol || !req->have_host ? "no protocol or host" :
								       NULL;
	if (refused || send_request(k, req) < 0) {
		conn_refuse(k, refused); /* none: no controller, nobody to ask */
		return;
	}
	k->state = CRED_WAITING;
	(void)event_source_set_io_events(k->io, 0);
	buf_wipe_free(&k->in);
}

static void conn_read(struct cred_conn *k)
{
	struct cred_request req;
	bool eof = false;
	int r;

	ssize_t n = -1;

	if (buf_reserve(&k->in, CRED_MAX_LINE) >= 0)
		n = read(k->fd, k->in.data + k->in.len, CRED_MAX_LINE);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n < 0) {
		conn_close(k);
		return;
	}
	eof = n == 0;
	k->in.len += (size_t)n;
	r = request_parse((const char *)k->in.data, k->in.len, eof, &req);
	if (r == -EAGAIN && k->in.len <= CRED_MAX_REQUEST)
		return;
	if (r < 0)
		conn_refuse(k, r == -EBADMSG ? "malformed request" : "request too long");
	else
		conn_request(k, &req);
	explicit_bzero(&req, sizeof req);
}

static void conn_write(struct cred_conn *k)
{
	while (k->out_pos < k->out.len) {
		ssize_t n = send(k->fd, k->out.data + k->out_pos, k->out.len - k->out_pos,
				 MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return;
		if (n < 0)
			break;
		k->out_pos += (size_t)n;
	}
	conn_close(k); /* buffers wiped there */
}

static int on_conn_io(struct event_source *src, int fd, uint32_t revents, void *userdata)
{
	struct cred_conn *k = userdata;

	if (k->state == CRED_READING && (revents & (EPOLLIN | EPOLLHUP | EPOLLERR)))
		conn_read(k);
	else if (k->state == CRED_WRITING)
		conn_write(k);
	else if (revents & (EPOLLHUP | EPOLLERR))
		conn_close(k);
	return 0;
}

static int on_conn_timeout(struct event_source *src, uint64_t now, void *userdata)
{
	conn_refuse(userdata, "client too slow, or no answer in time");
	return 0;
}

static bool peer_allowed(const struct cred_server *s, int fd)
{
	struct ucred cred;
	socklen_t l = sizeof cred;

	return getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &l) == 0 && cred.uid == s->uid;
}

static void conn_new(struct cred_server *s, int fd)
{
	struct cred_conn *k;

	if (s->n_conns >= CRED_MAX_CONNS) {
		log_warn("credential client refused: too many at once", NULL);
		close(fd);
		return;
	}
	if (!peer_allowed(s, fd)) {
		log_warn("credential client refused: another user", NULL);
		close(fd);
		return;
	}
	k = calloc(1, sizeof *k);
	if (!k) {
		close(fd);
		return;
	}
	*k = (struct cred_conn){ .server = s, .fd = fd, .state = CRED_READING };
	if (event_add_io(s->loop, &k->io, fd, EPOLLIN, on_conn_io, k) < 0 ||
	    event_add_timer(s->loop, &k->timer, now_usec() + CRED_TIMEOUT_USEC, on_conn_timeout,
			    k) < 0) {
		event_source_free(k->io);
		free(k);
		close(fd);
		return;
	}
	k->next = s->conns;
	s->conns = k;
	s->n_conns++;
}

static int on_listen_io(struct event_source *src, int fd, uint32_t revents, void *userdata)
{
	for (int i = 0; i < CRED_MAX_CONNS * 2; i++) {
		int cfd = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (cfd < 0 && (errno == EINTR || errno == ECONNABORTED))
			continue;
		if (cfd < 0)
			break; /* EAGAIN; out of fds: the next connection tries again */
		conn_new(userdata, cfd);
	}
	return 0;
}

static int listen_socket(const char *path, uid_t uid, gid_t gid)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	_cleanup_close_ int fd = -1;
	int r = 0;

	if (strlen(path) >= sizeof sa.sun_path)
		return -ENAMETOOLONG;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
	if (unlink(path) < 0 && errno != ENOENT)
		return -errno;
	mode_t old = umask(0177);
	if (bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0)
		r = -errno;
	umask(old);
	/* the directory is ours alone (root's, or container root's): nobody swaps the entry */
	if (r >= 0 && fchownat(AT_FDCWD, path, uid, gid, AT_SYMLINK_NOFOLLOW) < 0)
		r = -errno;
	if (r >= 0 && listen(fd, CRED_MAX_CONNS * 2) < 0)
		r = -errno;
	return r < 0 ? r : TAKE_FD(fd);
}

int cred_server_new(struct event_loop *loop, struct channel *channel, const char *path, uid_t uid,
		    gid_t gid, struct cred_server **ret)
{
	_cleanup_free_ struct cred_server *s = calloc(1, sizeof *s);
	int r;

	if (!s)
		return -ENOMEM;
	*s = (struct cred_server){ .loop = loop, .channel = channel, .uid = uid };
	s->listen_fd = listen_socket(path, uid, gid);
	if (s->listen_fd < 0)
		return s->listen_fd;
	r = event_add_io(loop, &s->listen_io, s->listen_fd, EPOLLIN, on_listen_io, s);
	if (r < 0) {
		close(s->listen_fd);
		return r;
	}
	*ret = TAKE_PTR(s);
	return 0;
}

void cred_server_free(struct cred_server *s)
{
	if (!s)
		return;
	while (s->conns)
		conn_close(s->conns);
	event_source_free(s->listen_io);
	close(s->listen_fd);
	free(s);
}

void cred_server_disconnected(struct cred_server *s)
{
	for (struct cred_conn *k = s->conns, *next; k; k = next) {
		next = k->next;
		if (k->state == CRED_WAITING)
			conn_close(k);
	}
}

struct cred_reply {
	uint64_t request;
	bool have_request;
	const uint8_t *username, *password;
	size_t username_len, password_len;
	bool refused;
};

/* A value git reads back as one line: no NUL, no newline (else it would add lines of its own to
 * the answer). One that is not is refused, not written. */
static bool line_value_ok(const uint8_t *v, size_t n, size_t max)
{
	return n > 0 && n <= max && !memchr(v, 0, n) && !memchr(v, '\n', n);
}

static int reply_parse(const struct frame *f, struct cred_reply *ret)
{
	struct frame_iter it;
	const uint8_t *val;
	uint16_t tag;
	size_t len;
	int r;

	*ret = (struct cred_reply){ 0 };
	frame_iter_init(&it, f);
	while ((r = frame_iter_next(&it, &tag, &val, &len)) > 0) {
		if (tag == TAG_REQUEST && !ret->have_request) {
			ret->have_request = true;
			r = frame_val_u64(val, len, &ret->request);
		} else if (tag == TAG_CRED_USERNAME && !ret->username) {
			ret->username = val;
			ret->username_len = len;
			ret->refused |= !line_value_ok(val, len, CRED_MAX_VALUE);
		} else if (tag == TAG_CRED_PASSWORD && !ret->password) {
			ret->password = val;
			ret->password_len = len;
			ret->refused |= !line_value_ok(val, len, CRED_MAX_PASSWORD);
		} else if (tag == TAG_REASON)
			ret->refused = true;
		if (r < 0)
			return r;
	}
	if (r < 0 || !ret->have_request)
		return -EBADMSG;
	if (!ret->refused && (!ret->username || !ret->password))
		return -EBADMSG;
	return 0;
}

static int answer(struct cred_conn *k, const struct cred_reply *rep)
{
	int r = buf_reserve(&k->out, rep->username_len + rep->password_len + 32);

	if (r >= 0)
		r = buf_append(&k->out, "username=", 9);
	if (r >= 0)
		r = buf_append(&k->out, rep->username, rep->username_len);
	if (r >= 0)
		r = buf_append(&k->out, "\npassword=", 10);
	if (r >= 0)
		r = buf_append(&k->out, rep->password, rep->password_len);
	if (r >= 0)
		r = buf_append(&k->out, "\n", 1);
	return r;
}

int cred_server_message(struct cred_server *s, const struct frame *f)
{
	struct cred_reply rep;
	struct cred_conn *k = NULL;
	int r = reply_parse(f, &rep);

	if (r >= 0)
		for (k = s->conns; k; k = k->next)
			if (k->state == CRED_WAITING && k->request == rep.request)
				break;
	if (k && rep.refused)
		conn_close(k);
	else if (k && answer(k, &rep) < 0)
		conn_close(k);
	else if (k) {
		k->state = CRED_WRITING;
		(void)event_source_set_io_events(k->io, EPOLLOUT);
	}
	/* the frame lies in the channel's input buffer, which is reused, never wiped: the
	 * password must not linger there */
	explicit_bzero((void *)f->payload, f->payload_len);
	return r;
}
