/* SPDX-License-Identifier: MIT */
/* WATCH of a file session: inotify on the directory (and, RECURSIVE, on every directory
 * beneath it as it appears, at most FILE_MAX_WATCHES), events sent as they come with paths
 * relative to the watched directory. A watch is added through fchdir() to an fd of the
 * directory and the name ".", so no path is walked by name. Events wait in a bounded queue
 * for a slow controller; past it they are dropped and one OVERFLOW follows once it drained.
 * The controller closing the connection ends the worker; the watched directory going away
 * ends the session with DELETED "" and END. */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/openat2.h>
#include <sys/inotify.h>
#include <sys/syscall.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/files-internal.h"
#include "basic/cleanup.h"
#include "basic/util.h"
#include "proto/agent-proto.h"

#define WATCH_MASK                                                                                 \
	(IN_CREATE | IN_DELETE | IN_CLOSE_WRITE | IN_ATTRIB | IN_MOVED_FROM | IN_MOVED_TO |        \
	 IN_DELETE_SELF | IN_MOVE_SELF | IN_EXCL_UNLINK | IN_ONLYDIR)
#define WATCH_MAX_QUEUED (256u * 1024) /* event bytes waiting for the controller */
#define WATCH_MAX_DEPTH 128
#define WATCH_MOVE_WAIT_MS 5 /* for the MOVED_TO that pairs with a MOVED_FROM */

struct watch_dir {
	int wd;
	char *rel; /* relative to the watched directory, "" for itself */
};

struct watch {
	struct files_session *s;
	int ifd;
	bool recursive;
	const char *rel; /* the watched directory, from the root: nothing of it is kept open (an
			  * open fd or cwd would keep a deleted directory from saying so) */
	struct watch_dir *dirs;
	size_t n_dirs, cap_dirs;
	int root_wd;
	size_t q_pos; /* s->out is the queue; q_pos what of it was sent */
	bool overflow;
	bool limit_reported; /* FILE_MAX_WATCHES was reached: its OVERFLOW was sent */
	bool ended;
	char *last_modified; /* the path of the newest event when it was MODIFIED */
	/* a MOVED_FROM waiting for its MOVED_TO */
	bool move_pending;
	uint32_t move_cookie;
	bool move_dir;
	char *move_path;
};

static struct watch_dir *dir_find(struct watch *w, int wd)
{
	for (size_t i = 0; i < w->n_dirs; i++)
		if (w->dirs[i].wd == wd)
			return &w->dirs[i];
	return NULL;
}

static void dir_remove_at(struct watch *w, size_t i)
{
	free(w->dirs[i].rel);
	w->dirs[i] = w->dirs[--w->n_dirs];
}

static char *join(const char *a, const char *b)
{
	char *s;

	if (!a[0])
		return strdup(b);
	if (!b[0])
		return strdup(a);
	return asprintf(&s, "%s/%s", a, b) < 0 ? NULL : s;
}

/* rel is path itself or lies beneath it. */
static bool beneath(const char *rel, const char *path)
{
	size_t n = strlen(path);

	return strncmp(rel, path, n) == 0 && (rel[n] == 0 || rel[n] == '/');
}

static void queue_event(struct watch *w, uint64_t event, const char *path, const char *path2,
			bool is_dir)
{
	size_t start, before = w->s->out.len;
	int r;

	if (w->overflow)
		return;
	if (event != FILE_EVENT_OVERFLOW && w->s->out.len - w->q_pos > WATCH_MAX_QUEUED) {
		w->overflow = true;
		return;
	}
	r = frame_begin(&w->s->out, &start, MSG_FILE_EVENT, 0);
	if (r >= 0)
		r = frame_put_u64(&w->s->out, TAG_FILE_EVENT, event);
	if (r >= 0 && event != FILE_EVENT_OVERFLOW)
		r = frame_put_str(&w->s->out, TAG_PATH, path);
	if (r >= 0 && path2)
		r = frame_put_str(&w->s->out, TAG_PATH2, path2);
	if (r >= 0 && event != FILE_EVENT_OVERFLOW)
		r = frame_put_u64(&w->s->out, TAG_FILE_TYPE,
				  is_dir ? FILE_TYPE_DIR : FILE_TYPE_FILE);
	if (r >= 0)
		r = frame_end(&w->s->out, start);
	if (r < 0) {
		w->s->out.len = before;
		w->overflow = true;
	}
}

/* The directory fd (any kind, O_PATH included) watched as rel. */
static int watch_add(struct watch *w, int fd, const char *rel)
{
	struct watch_dir *d;
	char *copy;
	int wd;

	if (w->n_dirs >= FILE_MAX_WATCHES) {
		if (!w->limit_reported)
			queue_event(w, FILE_EVENT_OVERFLOW, NULL, NULL, false);
		w->limit_reported = true;
		return -ENOSPC;
	}
	if (fchdir(fd) < 0)
		return -errno;
	wd = inotify_add_watch(w->ifd, ".", WATCH_MASK);
	(void)!chdir("/"); /* a cwd in the directory would delay its DELETE_SELF */
	if (wd < 0)
		return -errno;
	copy = strdup(rel);
	if (!copy)
		return -ENOMEM;
	d = dir_find(w, wd);
	if (d) { /* the same directory again (moved): its newest name */
		free(d->rel);
		d->rel = copy;
		return wd;
	}
	if (w->n_dirs == w->cap_dirs) {
		size_t cap = w->cap_dirs ? w->cap_dirs * 2 : 16;
		struct watch_dir *nd = reallocarray(w->dirs, cap, sizeof *nd);

		if (!nd) {
			free(copy);
			return -ENOMEM;
		}
		w->dirs = nd;
		w->cap_dirs = cap;
	}
	w->dirs[w->n_dirs++] = (struct watch_dir){ .wd = wd, .rel = copy };
	return wd;
}

/* Watches every directory beneath fd (at rel); with announce, CREATED for every entry found
 * (it appeared before its directory was watched). */
static void watch_walk(struct watch *w, int fd, const char *rel, bool announce, int depth)
{
	struct dirent *de;
	int dfd = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = dfd < 0 ? NULL : fdopendir(dfd);

	if (!d) {
		if (dfd >= 0)
			close(dfd);
		return;
	}
	while ((de = readdir(d))) {
		_cleanup_free_ char *sub = NULL;
		struct stat st;

		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		sub = join(rel, de->d_name);
		if (!sub)
			break;
		if (announce)
			queue_event(w, FILE_EVENT_CREATED, sub, NULL, S_ISDIR(st.st_mode));
		if (!S_ISDIR(st.st_mode) || depth >= WATCH_MAX_DEPTH)
			continue;
		_cleanup_close_ int sfd =
			openat(dirfd(d), de->d_name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (sfd < 0 || watch_add(w, sfd, sub) < 0)
			continue;
		watch_walk(w, sfd, sub, announce, depth + 1);
	}
	closedir(d);
}

/* The watched directory, its last component not followed. */
static int open_watched(const struct files_root *root, const char *rel)
{
	_cleanup_close_ int dirfd = -1;
	char name[FILE_MAX_NAME + 1];
	int fd, r;

	r = files_lookup(root, rel, &dirfd, name);
	if (r < 0)
		return r;
	fd = openat(dirfd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return errno == ELOOP ? -ENOTDIR : -errno;
	return fd;
}

/* The directory at rel beneath the watched one: no symlink, no `..` out. */
static int open_beneath(struct watch *w, const char *rel)
{
	struct open_how how = {
		.flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
	};
	_cleanup_close_ int base = open_watched(&w->s->root, w->rel);
	long fd;

	if (base < 0)
		return base;
	fd = syscall(SYS_openat2, base, rel[0] ? rel : ".", &how, sizeof how);
	return fd < 0 ? -errno : (int)fd;
}

/* A new directory at rel: watched, with what is in it already announced. */
static void watch_new_dir(struct watch *w, const char *rel)
{
	_cleanup_close_ int fd = -1;

	if (!w->recursive)
		return;
	fd = open_beneath(w, rel);
	if (fd < 0 || watch_add(w, fd, rel) < 0)
		return;
	watch_walk(w, fd, rel, true, 1);
}

/* Forgets (and unwatches) every directory at or beneath path. */
static void watch_drop(struct watch *w, const char *path)
{
	for (size_t i = 0; i < w->n_dirs;)
		if (w->dirs[i].wd != w->root_wd && beneath(w->dirs[i].rel, path)) {
			(void)inotify_rm_watch(w->ifd, w->dirs[i].wd);
			dir_remove_at(w, i);
		} else
			i++;
}

/* A directory moved within the watch: everything beneath it has a new path. */
static void watch_rename(struct watch *w, const char *from, const char *to)
{
	size_t n = strlen(from);

	for (size_t i = 0; i < w->n_dirs; i++)
		if (w->dirs[i].wd != w->root_wd && beneath(w->dirs[i].rel, from)) {
			char *s;

			if (asprintf(&s, "%s%s", to, w->dirs[i].rel + n) < 0)
				continue;
			free(w->dirs[i].rel);
			w->dirs[i].rel = s;
		}
}

static void move_flush(struct watch *w)
{
	if (!w->move_pending)
		return;
	queue_event(w, FILE_EVENT_DELETED, w->move_path, NULL, w->move_dir);
	if (w->move_dir)
		watch_drop(w, w->move_path);
	free(w->move_path);
	w->move_path = NULL;
	w->move_pending = false;
}

/* One inotify event (with its name when it has one). */
static void handle_event(struct watch *w, const struct inotify_event *ev)
{
	_cleanup_free_ char *path = NULL;
	struct watch_dir *d;
	bool is_dir = ev->mask & IN_ISDIR;

	if (w->ended)
		return;
	if (ev->mask & IN_Q_OVERFLOW) {
		move_flush(w);
		queue_event(w, FILE_EVENT_OVERFLOW, NULL, NULL, false);
		return;
	}
	if (w->move_pending && !((ev->mask & IN_MOVED_TO) && ev->cookie == w->move_cookie))
		move_flush(w); /* before the lookup: it may forget directories */
	d = dir_find(w, ev->wd);
	if (!d)
		return;
	if (ev->wd == w->root_wd && (ev->mask & (IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED))) {
		move_flush(w);
		queue_event(w, FILE_EVENT_DELETED, "", NULL, true);
		w->ended = true;
		return;
	}
	if (ev->mask & IN_IGNORED) {
		dir_remove_at(w, (size_t)(d - w->dirs));
		return;
	}
	if (ev->len == 0 || !ev->name[0])
		return; /* about a watched directory itself: its parent says it by name */
	path = join(d->rel, ev->name);
	if (!path)
		return;
	if (ev->mask & IN_MOVED_FROM) {
		w->move_pending = true;
		w->move_cookie = ev->cookie;
		w->move_dir = is_dir;
		w->move_path = TAKE_PTR(path);
	} else if (ev->mask & IN_MOVED_TO) {
		if (w->move_pending) {
			queue_event(w, FILE_EVENT_MOVED, w->move_path, path, is_dir);
			if (is_dir)
				watch_rename(w, w->move_path, path);
			free(w->move_path);
			w->move_path = NULL;
			w->move_pending = false;
		} else {
			queue_event(w, FILE_EVENT_CREATED, path, NULL, is_dir);
			if (is_dir)
				watch_new_dir(w, path);
		}
	} else if (ev->mask & IN_CREATE) {
		queue_event(w, FILE_EVENT_CREATED, path, NULL, is_dir);
		if (is_dir)
			watch_new_dir(w, path);
	} else if (ev->mask & IN_DELETE)
		queue_event(w, FILE_EVENT_DELETED, path, NULL, is_dir);
	else if (ev->mask & (IN_CLOSE_WRITE | IN_ATTRIB)) {
		/* a write's close and a touch's attributes, back to back: one MODIFIED */
		if (w->last_modified && strcmp(w->last_modified, path) == 0)
			return;
		queue_event(w, FILE_EVENT_MODIFIED, path, NULL, is_dir);
		free(w->last_modified);
		w->last_modified = TAKE_PTR(path);
		return;
	}
	free(w->last_modified);
	w->last_modified = NULL;
}

/* Whatever inotify has now; a MOVED_FROM at the end of what was read waits a moment for its
 * MOVED_TO. < 0 when inotify failed. */
static int read_events(struct watch *w)
{
	_Alignas(struct inotify_event) char buf[64 * 1024];

	for (;;) {
		ssize_t n = read(w->ifd, buf, sizeof buf);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN) {
			struct pollfd p = { .fd = w->ifd, .events = POLLIN };

			if (!w->move_pending || poll(&p, 1, WATCH_MOVE_WAIT_MS) <= 0) {
				move_flush(w);
				return 0;
			}
			continue;
		}
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		for (char *p = buf; p < buf + n;) {
			const struct inotify_event *ev = (const struct inotify_event *)p;

			handle_event(w, ev);
			p += sizeof *ev + ev->len;
		}
		if (w->ended)
			return 0;
	}
}

/* Sends what the socket takes now. < 0 when the controller is gone. */
static int send_some(struct watch *w)
{
	struct buf *q = &w->s->out;

	while (w->q_pos < q->len) {
		ssize_t n = send(w->s->fd, q->data + w->q_pos, q->len - w->q_pos,
				 MSG_DONTWAIT | MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return 0;
		if (n < 0)
			return -errno;
		w->q_pos += (size_t)n;
	}
	q->len = w->q_pos = 0;
	if (w->overflow) {
		w->overflow = false;
		queue_event(w, FILE_EVENT_OVERFLOW, NULL, NULL, false);
		return send_some(w);
	}
	return 0;
}

/* The controller sends nothing during a watch: EOF (or an error) is its going away. */
static bool controller_gone(struct watch *w)
{
	char buf[4096];
	ssize_t n;

	do
		n = recv(w->s->fd, buf, sizeof buf, MSG_DONTWAIT);
	while (n < 0 && errno == EINTR);
	return n == 0 || (n < 0 && errno != EAGAIN);
}

static int watch_loop(struct watch *w)
{
	while (!w->ended) {
		struct pollfd p[2] = {
			{ .fd = w->s->fd,
			  .events = POLLIN | (w->q_pos < w->s->out.len ? POLLOUT : 0) },
			{ .fd = w->ifd, .events = POLLIN },
		};
		int r;

		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if ((p[0].revents & (POLLIN | POLLHUP | POLLERR)) && controller_gone(w))
			return -EPIPE;
		if (p[1].revents & POLLIN) {
			r = read_events(w);
			if (r < 0)
				return r;
		}
		r = send_some(w);
		if (r < 0)
			return r;
	}
	/* the directory went away: the rest, END, and the session is over */
	buf_consume(&w->s->out, w->q_pos);
	w->q_pos = 0;
	return files_send_end(w->s, false);
}

int files_op_watch(struct files_session *s, const struct files_request *q)
{
	_cleanup_(files_path_done) struct files_path p = { 0 };
	_cleanup_close_ int fd = -1, ifd = -1;
	struct watch w = { .s = s, .recursive = q->flags & FILE_F_RECURSIVE };
	struct stat st;
	int r;

	r = files_request_path(s, q->path, q->path_len, &p);
	if (r <= 0)
		return r;
	fd = open_watched(&s->root, p.rel);
	if (fd < 0)
		return files_fail(s, fd, NULL);
	ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (ifd < 0 || fstat(fd, &st) < 0)
		return files_fail(s, -errno, NULL);
	w.ifd = ifd;
	w.rel = p.rel;
	w.root_wd = watch_add(&w, fd, "");
	if (w.root_wd < 0)
		return files_fail(s, w.root_wd, NULL);
	if (w.recursive)
		watch_walk(&w, fd, "", false, 0);
	close(TAKE_FD(fd));
	/* INFO first, ahead of anything the walk queued */
	struct buf events = s->out;
	s->out = (struct buf){ 0 };
	r = files_send_info(s, NULL, p.abs, &st, -1, NULL);
	if (r >= 0)
		r = files_send_flush(s);
	buf_free(&s->out);
	s->out = events;
	if (r >= 0)
		r = watch_loop(&w);
	for (size_t i = 0; i < w.n_dirs; i++)
		free(w.dirs[i].rel);
	free(w.dirs);
	free(w.move_path);
	free(w.last_modified);
	return r;
}
