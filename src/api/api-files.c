/* SPDX-License-Identifier: MIT */
/* /v1/workspaces/{id}/files (docs/api.md, "Files"): stat, list, read, write, mkdir, rename and
 * delete, each one file session with the workspace's agent (daemon/manager.h). Nothing here
 * touches a file: paths go to the agent as the client gave them.
 *
 * Downloads stream: the response pulls from a buffer of at most FILES_HIGH bytes and a bit;
 * above it the session is paused (the agent's socket is not read, so the agent waits), below
 * FILES_LOW it goes on; with nothing buffered the request is suspended until the agent sends.
 * Uploads stream the other way: body chunks go to the agent as they arrive; when its queue is
 * full the request is suspended (libmicrohttpd stops reading the client) until it drains.
 *
 * Names and paths may hold any byte but NUL. JSON strings are UTF-8: a name, path or link
 * target that is not goes out in base64 with "<key>Encoding": "base64" beside it. Messages
 * quote paths with bytes that are not printable UTF-8 as \xNN. */
#include <errno.h>
#include <inttypes.h>
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "basic/cleanup.h"
#include "basic/json-util.h"
#include "basic/util.h"
#include "api/api-files.h"
#include "api/http.h"
#include "api/router.h"
#include "api/validate.h"
#include "daemon/manager.h"
#include "proto/file-proto.h"

#define FILES_HIGH (256u * 1024)
#define FILES_LOW (64u * 1024)
#define FILES_BLOCK (64u * 1024)
/* A listing's names, paths and link targets together: a hostile agent could send 10,000
 * entries of 8 KiB each; a real listing of that size is far below this. */
#define FILES_MAX_LIST_BYTES (32u * 1024 * 1024)

/* ---- JSON ---------------------------------------------------------------------------------- */

void api_file_set_string(json_t *o, const char *key, const char *s)
{
	char enc[64];

	if (!s) {
		json_object_set_new(o, key, json_null());
		return;
	}
	if (utf8_is_valid(s, strlen(s))) {
		json_object_set_new(o, key, json_string(s));
		return;
	}
	_cleanup_free_ char *b64 = base64_encode(s, strlen(s));

	json_object_set_new(o, key, json_string_nocheck(b64 ? b64 : ""));
	snprintf(enc, sizeof enc, "%sEncoding", key);
	json_object_set_new(o, enc, json_string("base64"));
}

char *api_file_join(const char *dir, const char *name)
{
	char *p = NULL;
	size_t n = strlen(dir);

	if (!name || !*name)
		return strdup(dir);
	if (asprintf(&p, "%s%s%s", dir, n > 0 && dir[n - 1] == '/' ? "" : "/", name) < 0)
		return NULL;
	return p;
}

static const char *base_name(const char *p)
{
	size_t n = strlen(p);
	const char *s;

	while (n > 1 && p[n - 1] == '/')
		n--;
	for (s = p + n; s > p && s[-1] != '/';)
		s--;
	return s;
}

/* path: where the entry is (the agent's PATH, or what the client named). */
static json_t *entry_to_json(const struct file_entry *en, const char *path)
{
	json_t *o = json_object();
	_cleanup_free_ char *name = NULL, *etag = NULL;
	char mode[8], mtime[32];

	if (!o)
		return NULL;
	name = en->name ? strdup(en->name) : strdup(base_name(path));
	if (name && !en->name && strchr(name, '/'))
		*strchr(name, '/') = '\0';
	api_file_set_string(o, "name", name ? name : "");
	api_file_set_string(o, "path", path);
	json_object_set_new(o, "type", json_string(file_type_to_string(en->type) ?: "file"));
	json_object_set_new(o, "size",
			    json_integer((json_int_t)MIN(en->size, (uint64_t)INT64_MAX)));
	snprintf(mode, sizeof mode, "%04" PRIo64, en->mode & 07777);
	json_object_set_new(o, "mode", json_string(mode));
	format_rfc3339(en->mtime_ns / 1000, mtime);
	json_object_set_new(o, "mtime", json_string(mtime));
	json_object_set_new(o, "uid", json_integer((json_int_t)MIN(en->uid, (uint64_t)INT64_MAX)));
	json_object_set_new(o, "gid", json_integer((json_int_t)MIN(en->gid, (uint64_t)INT64_MAX)));
	if (en->etag && asprintf(&etag, "\"%s\"", en->etag) >= 0)
		json_object_set_new(o, "etag", json_string(etag));
	else
		json_object_set_new(o, "etag", json_null());
	api_file_set_string(o, "linkTarget", en->link_target);
	return o;
}

/* ---- the request's parameters -------------------------------------------------------------- */

int api_file_query_path(struct http_request *req, const char *key, const char **ret,
			struct station_error *e)
{
	bool present;
	size_t len;
	const char *v = http_request_query_n(req, key, &present, &len);

	if (!present || !v)
		return station_error_set(e, -EINVAL, key, "query parameter \"%s\" is required",
					 key);
	if (strlen(v) != len)
		return station_error_set(e, -EINVAL, key,
					 "invalid path: %s holds a NUL byte (%%00) at byte %zu",
					 key, strlen(v));
	if (len == 0)
		return station_error_set(e, -EINVAL, key, "invalid path: %s is empty", key);
	if (len > API_MAX_FILE_PATH_BYTES)
		return station_error_set(e, -EINVAL, key, "invalid path: %s is %zu bytes, over %u",
					 key, len, API_MAX_FILE_PATH_BYTES);
	*ret = v;
	return 0;
}

/* "?k=1": true; "?k=0" or absent: false. */
int api_file_query_flag(struct http_request *req, const char *key, bool *ret,
			struct station_error *e)
{
	bool present;
	const char *v = http_request_query(req, key, &present);
	uint64_t u = 0;
	int r;

	*ret = false;
	if (!present)
		return 0;
	r = validate_query_u64(key, v, 0, 1, &u, e);
	if (r >= 0)
		*ret = u == 1;
	return r;
}

/* If-Match: one entity tag, quoted or not ("W/" is refused: etags here are strong). NULL when
 * absent. */
static int if_match(struct http_request *req, char *buf, size_t size, const char **ret,
		    struct station_error *e)
{
	const char *h = http_request_header(req, MHD_HTTP_HEADER_IF_MATCH);
	size_t n;

	*ret = NULL;
	if (!h)
		return 0;
	h += strspn(h, " \t");
	n = strlen(h);
	while (n > 0 && (h[n - 1] == ' ' || h[n - 1] == '\t'))
		n--;
	if (n >= 2 && h[0] == '"' && h[n - 1] == '"') {
		h++;
		n -= 2;
	}
	if (n == 0 || n >= size || memchr(h, '"', n) || memchr(h, ',', n))
		return station_error_set(e, -EINVAL, "If-Match",
					 "If-Match must be one etag as stat or list gave it");
	memcpy(buf, h, n);
	buf[n] = '\0';
	*ret = buf;
	return 0;
}

/* ---- one operation with a JSON answer -------------------------------------------------------- */

struct file_call {
	struct http_request *req;
	struct file_session *session;
	unsigned op;
	unsigned status; /* on success */
	char *path;	 /* what the client named (RENAME: the target) */
	json_t *result;	 /* the entry, or the list */
	json_t *entries;
	char *dir_path; /* LIST: the directory's path */
	size_t list_bytes;
	bool ended;
	bool created; /* WRITE: FILE_F_CREATED */
	int err;
	struct station_error e;
	/* WRITE */
	bool body_done;
	bool exclusive;
};

static void call_free(void *userdata)
{
	struct file_call *c = userdata;

	manager_file_close(c->session);
	json_decref(c->result);
	json_decref(c->entries);
	free(c->dir_path);
	free(c->path);
	free(c);
}

static void call_info(void *userdata, const struct file_entry *en)
{
	struct file_call *c = userdata;
	_cleanup_free_ char *joined = NULL;
	json_t *o;

	if (c->op == FILE_OP_LIST && en->name) {
		joined = api_file_join(c->dir_path ? c->dir_path : c->path, en->name);
		c->list_bytes += (joined ? strlen(joined) : 0) + strlen(en->name) +
				 (en->link_target ? strlen(en->link_target) : 0);
		if (c->list_bytes > FILES_MAX_LIST_BYTES) {
			manager_file_close(c->session);
			c->session = NULL;
			c->ended = true;
			c->err = station_error_set(&c->e, -EPROTO, NULL,
						   "the listing is over %u bytes",
						   FILES_MAX_LIST_BYTES);
			http_request_resume(c->req);
			return;
		}
		o = joined ? entry_to_json(en, joined) : NULL;
		if (o && c->entries)
			json_array_append_new(c->entries, o);
		else
			json_decref(o);
		return;
	}
	if (c->op == FILE_OP_LIST) {
		free(c->dir_path);
		c->dir_path = strdup(en->path ? en->path : c->path);
	}
	json_decref(c->result);
	c->result = entry_to_json(en, en->path ? en->path : c->path);
}

static void call_end(void *userdata, int r, bool flag, const struct station_error *e)
{
	struct file_call *c = userdata;

	c->session = NULL; /* gone once end() is called */
	c->ended = true;
	c->err = r;
	c->created = flag;
	if (r < 0)
		c->e = *e;
	else if (c->op == FILE_OP_LIST && c->result)
		json_object_set_new(c->result, "truncated", json_boolean(flag));
	http_request_resume(c->req);
}

static void call_writable(void *userdata);

static const struct file_session_ops call_ops = {
	.info = call_info,
	.end = call_end,
	.writable = call_writable,
};

static json_t *list_result(struct file_call *c)
{
	json_t *o = json_object();
	json_t *dir = c->result;

	if (!o)
		return NULL;
	api_file_set_string(o, "path", c->dir_path ? c->dir_path : c->path);
	json_object_set(o, "entries", c->entries);
	json_object_set(o, "truncated", json_object_get(dir, "truncated") ?: json_false());
	return o;
}

static int call_done(struct http_request *req)
{
	struct file_call *c = http_request_state(req);
	json_t *body;

	if (!c || !c->ended)
		return http_reply_status(req, 500, NULL, "the file operation was lost");
	if (c->err < 0)
		return http_reply_error(req, &c->e);
	switch (c->op) {
	case FILE_OP_LIST:
		body = list_result(c);
		break;
	case FILE_OP_DELETE:
		body = json_object();
		if (body) {
			api_file_set_string(body, "path", c->path);
			json_object_set_new(body, "deleted", json_true());
		}
		break;
	default:
		body = json_incref(c->result);
		break;
	}
	/* CREATED from the agent; an exclusive write that succeeded made the file too */
	if (c->op == FILE_OP_WRITE && (c->created || c->exclusive))
		c->status = 201;
	return api_reply_result(req, 0, c->status, body, NULL);
}

/* Starts q and waits for its end; replies at once when it cannot start. */
static int call_start(struct http_request *req, const struct file_request *q, unsigned status,
		      struct file_call **ret)
{
	const struct route_match *m = http_request_route(req);
	struct station_error e = {};
	struct file_call *c = calloc(1, sizeof *c);
	int r;

	if (!c)
		return http_reply_status(req, 500, NULL, "out of memory");
	c->req = req;
	c->op = q->op;
	c->status = status;
	c->path = strdup(q->op == FILE_OP_RENAME ? q->path2 : q->path);
	if (q->op == FILE_OP_LIST)
		c->entries = json_array();
	if (!c->path || (q->op == FILE_OP_LIST && !c->entries)) {
		call_free(c);
		return http_reply_status(req, 500, NULL, "out of memory");
	}
	r = manager_file_open(http_request_manager(req), m->ws_id, q, &call_ops, c, &c->session,
			      &e);
	if (r < 0) {
		call_free(c);
		return http_reply_error(req, &e);
	}
	http_request_set_state(req, c, call_free);
	if (ret) {
		*ret = c;
		return 0;
	}
	return http_request_suspend(req, call_done);
}

int api_file_stat(struct http_request *req)
{
	struct station_error e = {};
	struct file_request q = { .op = FILE_OP_STAT };

	if (api_file_query_path(req, "path", &q.path, &e) < 0)
		return http_reply_error(req, &e);
	return call_start(req, &q, 200, NULL);
}

int api_file_list(struct http_request *req)
{
	struct station_error e = {};
	struct file_request q = { .op = FILE_OP_LIST };

	if (api_file_query_path(req, "path", &q.path, &e) < 0)
		return http_reply_error(req, &e);
	return call_start(req, &q, 200, NULL);
}

int api_file_delete(struct http_request *req)
{
	struct station_error e = {};
	struct file_request q = { .op = FILE_OP_DELETE };
	char etag[FILE_MAX_ETAG + 1];
	bool recursive = false;
	int r = api_file_query_path(req, "path", &q.path, &e);

	if (r >= 0)
		r = api_file_query_flag(req, "recursive", &recursive, &e);
	if (r >= 0)
		r = if_match(req, etag, sizeof etag, &q.if_match, &e);
	if (r < 0)
		return http_reply_error(req, &e);
	q.flags = recursive ? FILE_F_RECURSIVE : 0;
	return call_start(req, &q, 200, NULL);
}

int api_file_mkdir(struct http_request *req)
{
	struct station_error e = {};
	struct file_request q = { .op = FILE_OP_MKDIR };
	struct file_mkdir_request mk;
	_cleanup_json_ json_t *body = NULL;
	int r = api_request_json(req, false, &body, &e);

	if (r >= 0)
		r = validate_file_mkdir(body, &mk, &e);
	if (r < 0)
		return http_reply_error(req, &e);
	q.path = mk.path;
	q.flags = mk.parents ? FILE_F_PARENTS : 0;
	q.has_mode = mk.has_mode;
	q.mode = mk.mode;
	return call_start(req, &q, 201, NULL);
}

int api_file_rename(struct http_request *req)
{
	struct station_error e = {};
	struct file_request q = { .op = FILE_OP_RENAME, .field = "from", .field2 = "to" };
	struct file_rename_request rn;
	char etag[FILE_MAX_ETAG + 1];
	_cleanup_json_ json_t *body = NULL;
	int r = api_request_json(req, false, &body, &e);

	if (r >= 0)
		r = validate_file_rename(body, &rn, &e);
	if (r >= 0)
		r = if_match(req, etag, sizeof etag, &q.if_match, &e);
	if (r < 0)
		return http_reply_error(req, &e);
	q.path = rn.from;
	q.path2 = rn.to;
	q.flags = rn.overwrite ? 0 : FILE_F_EXCLUSIVE;
	return call_start(req, &q, 200, NULL);
}

/* ---- upload -------------------------------------------------------------------------------- */

static void call_writable(void *userdata)
{
	struct file_call *c = userdata;

	http_request_resume(c->req);
}

static ssize_t write_chunk(struct http_request *req, const void *data, size_t n)
{
	struct file_call *c = http_request_state(req);
	int r;

	if (!c || http_request_gone(req))
		return -ECONNRESET;
	if (c->ended) /* the agent refused already: the rest is read and dropped */
		return (ssize_t)n;
	r = manager_file_write(c->session, data, n);
	if (r == -EAGAIN)
		return http_request_suspend(req, NULL) < 0 ? -EIO : 0;
	if (r < 0 && r != -EPIPE) {
		/* out of memory: give up on this upload (the target stays as it was) */
		manager_file_close(c->session);
		c->session = NULL;
		c->ended = true;
		c->err = station_error_set(&c->e, r, NULL, "cannot pass the body on: %s",
					   strerror(-r));
	}
	return (ssize_t)n;
}

static int write_end(struct http_request *req)
{
	struct file_call *c = http_request_state(req);
	int r;

	if (!c)
		return http_reply_status(req, 500, NULL, "the upload was lost");
	c->body_done = true;
	if (c->ended)
		return call_done(req);
	r = manager_file_write_end(c->session);
	if (r < 0 && r != -EPIPE)
		return http_reply_status(req, 500, NULL, "cannot finish the upload: %s",
					 strerror(-r));
	return http_request_suspend(req, call_done);
}

int api_file_write(struct http_request *req)
{
	struct station_error e = {};
	struct file_request q = { .op = FILE_OP_WRITE };
	char etag[FILE_MAX_ETAG + 1];
	const char *mode;
	bool present, parents = false, exclusive = false;
	struct file_call *c = NULL;
	int r = api_file_query_path(req, "path", &q.path, &e);

	if (r >= 0)
		r = api_file_query_flag(req, "parents", &parents, &e);
	if (r >= 0)
		r = api_file_query_flag(req, "exclusive", &exclusive, &e);
	mode = http_request_query(req, "mode", &present);
	if (r >= 0 && present) {
		q.has_mode = true;
		r = validate_file_mode("mode", mode, &q.mode, &e);
	}
	if (r >= 0)
		r = if_match(req, etag, sizeof etag, &q.if_match, &e);
	if (r < 0)
		return http_reply_error(req, &e);
	q.flags = (parents ? FILE_F_PARENTS : 0) | (exclusive ? FILE_F_EXCLUSIVE : 0);
	r = call_start(req, &q, 200, &c);
	if (r < 0 || !c)
		return r;
	c->exclusive = exclusive;
	return http_request_stream_body(req, write_chunk, write_end);
}

/* ---- download ------------------------------------------------------------------------------ */

struct range {
	enum { RANGE_NONE, RANGE_FROM, RANGE_SUFFIX } kind;
	uint64_t first, last; /* RANGE_FROM: last UINT64_MAX when open */
	uint64_t suffix;
};

static bool parse_u64_prefix(const char **p, uint64_t *ret)
{
	const char *s = *p;
	uint64_t v = 0;

	if (*s < '0' || *s > '9')
		return false;
	for (; *s >= '0' && *s <= '9'; s++) {
		if (v > (UINT64_MAX - 9) / 10)
			return false;
		v = v * 10 + (uint64_t)(*s - '0');
	}
	*p = s;
	*ret = v;
	return true;
}

/* "bytes=A-B", "bytes=A-", "bytes=-N". Anything else (other units, several ranges, a
 * malformed one) is ignored as RFC 9110 14.2 allows: the whole file is sent. */
static struct range parse_range(const char *h)
{
	struct range r = { .kind = RANGE_NONE };
	const char *p = h;

	if (!h || strncmp(p, "bytes=", 6) != 0)
		return r;
	p += 6;
	p += strspn(p, " ");
	if (*p == '-') {
		p++;
		if (!parse_u64_prefix(&p, &r.suffix))
			return (struct range){ .kind = RANGE_NONE };
		r.kind = RANGE_SUFFIX;
	} else {
		if (!parse_u64_prefix(&p, &r.first) || *p++ != '-')
			return (struct range){ .kind = RANGE_NONE };
		r.last = UINT64_MAX;
		if (*p >= '0' && *p <= '9' && !parse_u64_prefix(&p, &r.last))
			return (struct range){ .kind = RANGE_NONE };
		if (r.last < r.first)
			return (struct range){ .kind = RANGE_NONE };
		r.kind = RANGE_FROM;
	}
	p += strspn(p, " ");
	return *p ? (struct range){ .kind = RANGE_NONE } : r;
}

struct download {
	struct http_request *req;
	struct file_session *session;
	struct range range;
	bool has_max;
	uint64_t max_bytes;
	char *path;
	/* from INFO */
	bool have_info;
	uint64_t size, first, length; /* what the response carries */
	char etag[FILE_MAX_ETAG + 3];
	uint64_t mtime_ns;
	unsigned status;
	int refused; /* 0, or the status decided at INFO (413, 416) */
	/* the bytes */
	struct buf_bytes {
		uint8_t *data;
		size_t start, len, alloc;
	} buf;
	uint64_t received, sent;
	bool paused;
	bool ended;
	int err;
	struct station_error e;
	bool replied;
};

static void download_free(void *userdata)
{
	struct download *d = userdata;

	manager_file_close(d->session);
	free(d->buf.data);
	free(d->path);
	free(d);
}

static void download_close(struct download *d)
{
	manager_file_close(d->session);
	d->session = NULL;
	d->ended = true;
}

static void download_info(void *userdata, const struct file_entry *en)
{
	struct download *d = userdata;
	uint64_t s = en->size;

	d->have_info = true;
	d->size = s;
	d->mtime_ns = en->mtime_ns;
	if (en->etag)
		snprintf(d->etag, sizeof d->etag, "\"%s\"", en->etag);
	d->status = 200;
	d->first = 0;
	d->length = s;
	if (d->range.kind == RANGE_FROM) {
		d->status = 206;
		d->first = d->range.first;
		if (d->first >= s)
			d->refused = 416;
		else
			d->length = MIN(d->range.last, s - 1) - d->first + 1;
	} else if (d->range.kind == RANGE_SUFFIX) {
		d->status = 206;
		if (d->range.suffix == 0 || s == 0)
			d->refused = 416;
		d->length = MIN(d->range.suffix, s);
		d->first = s - d->length;
	}
	if (!d->refused && d->has_max && d->length > d->max_bytes)
		d->refused = 413;
	if (d->refused)
		download_close(d);
	http_request_resume(d->req);
}

static void download_data(void *userdata, const uint8_t *data, size_t n)
{
	struct download *d = userdata;
	struct buf_bytes *b = &d->buf;

	if (d->received + n > d->length) {
		/* more than the file (or range) it announced: the agent is broken or hostile */
		download_close(d);
		d->err = station_error_set(&d->e, -EPROTO, NULL, "more data than announced");
		http_request_resume(d->req);
		return;
	}
	if (b->start > 0 && b->start + b->len + n > b->alloc) {
		memmove(b->data, b->data + b->start, b->len);
		b->start = 0;
	}
	if (b->len + n > b->alloc) {
		size_t want = MAX(b->len + n, MAX(b->alloc * 2, (size_t)FILES_BLOCK));
		uint8_t *p = realloc(b->data, want);

		if (!p) {
			download_close(d);
			d->err = station_error_set(&d->e, -ENOMEM, NULL, "out of memory");
			http_request_resume(d->req);
			return;
		}
		b->data = p;
		b->alloc = want;
	}
	memcpy(b->data + b->start + b->len, data, n);
	b->len += n;
	d->received += n;
	if (b->len >= FILES_HIGH && !d->paused && d->session) {
		d->paused = true;
		manager_file_pause(d->session, true);
	}
	http_request_resume(d->req);
}

static void download_end(void *userdata, int r, bool truncated, const struct station_error *e)
{
	struct download *d = userdata;

	d->session = NULL;
	d->ended = true;
	if (r < 0 && !d->err) {
		d->err = r;
		d->e = *e;
	}
	http_request_resume(d->req);
}

static const struct file_session_ops download_ops = {
	.info = download_info,
	.data = download_data,
	.end = download_end,
};

static ssize_t download_read(void *cls, uint64_t pos, char *out, size_t max)
{
	struct http_request *req = cls;
	struct download *d = http_request_state(req);
	struct buf_bytes *b;
	size_t n;

	if (!d || http_request_gone(req))
		return MHD_CONTENT_READER_END_WITH_ERROR;
	b = &d->buf;
	if (b->len == 0) {
		if (d->err < 0 || (d->ended && d->sent < d->length))
			return MHD_CONTENT_READER_END_WITH_ERROR;
		if (d->sent >= d->length)
			return MHD_CONTENT_READER_END_OF_STREAM;
		return http_request_suspend(req, NULL) < 0 ? MHD_CONTENT_READER_END_WITH_ERROR : 0;
	}
	n = MIN(max, b->len);
	memcpy(out, b->data + b->start, n);
	b->start += n;
	b->len -= n;
	d->sent += n;
	if (b->len == 0)
		b->start = 0;
	if (d->paused && b->len < FILES_LOW && d->session) {
		d->paused = false;
		manager_file_pause(d->session, false);
	}
	return (ssize_t)n;
}

static void http_date(uint64_t ns, char buf[64])
{
	time_t t = (time_t)(ns / 1000000000u);
	struct tm tm;

	if (!gmtime_r(&t, &tm) || strftime(buf, 64, "%a, %d %b %Y %H:%M:%S GMT", &tm) == 0)
		snprintf(buf, 64, "Thu, 01 Jan 1970 00:00:00 GMT");
}

static int reply_refused(struct http_request *req, struct download *d)
{
	char q[320], cr[64], msg[512];
	struct MHD_Response *r;
	json_t *body;
	_cleanup_free_ char *text = NULL;
	int ret;

	quote_bytes(d->path, q, 300);
	if (d->refused == 413)
		return http_reply_status(req, 413, "maxBytes",
					 "%s: %" PRIu64 " bytes, larger than maxBytes %" PRIu64, q,
					 d->length, d->max_bytes);
	snprintf(msg, sizeof msg, "%s: the range starts at or past the end (%" PRIu64 " bytes)", q,
		 d->size);
	body = error_json(416, msg, "Range");
	snprintf(cr, sizeof cr, "bytes */%" PRIu64, d->size);
	text = body ? json_dumps(body, JSON_COMPACT) : NULL;
	json_decref(body);
	if (!text)
		return -ENOMEM;
	r = MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_COPY);
	if (!r)
		return -ENOMEM;
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_RANGE, cr);
	ret = http_reply_response(req, 416, r);
	MHD_destroy_response(r);
	return ret;
}

static int download_reply(struct http_request *req)
{
	struct download *d = http_request_state(req);
	struct MHD_Response *r;
	char date[64], cr[96];
	int ret;

	if (!d)
		return http_reply_status(req, 500, NULL, "the download was lost");
	if (!d->have_info) {
		if (d->err < 0)
			return http_reply_error(req, &d->e);
		if (!d->ended)
			return http_request_suspend(req, download_reply);
		return http_reply_status(req, 502, NULL,
					 "the workspace agent ended the read early");
	}
	if (d->refused)
		return reply_refused(req, d);
	r = MHD_create_response_from_callback(d->length, FILES_BLOCK, download_read, req, NULL);
	if (!r)
		return -ENOMEM;
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/octet-stream");
	MHD_add_response_header(r, MHD_HTTP_HEADER_ACCEPT_RANGES, "bytes");
	MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
	if (d->etag[0])
		MHD_add_response_header(r, MHD_HTTP_HEADER_ETAG, d->etag);
	http_date(d->mtime_ns, date);
	MHD_add_response_header(r, MHD_HTTP_HEADER_LAST_MODIFIED, date);
	if (d->status == 206) {
		snprintf(cr, sizeof cr, "bytes %" PRIu64 "-%" PRIu64 "/%" PRIu64, d->first,
			 d->first + d->length - 1, d->size);
		MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_RANGE, cr);
	}
	ret = http_reply_response(req, d->status, r);
	MHD_destroy_response(r);
	return ret;
}

int api_file_read(struct http_request *req)
{
	const struct route_match *m = http_request_route(req);
	struct station_error e = {};
	struct file_request q = { .op = FILE_OP_READ };
	struct download *d;
	bool present;
	const char *v;
	int r = api_file_query_path(req, "path", &q.path, &e);

	d = r >= 0 ? calloc(1, sizeof *d) : NULL;
	if (r >= 0 && !d)
		return http_reply_status(req, 500, NULL, "out of memory");
	if (r >= 0) {
		d->req = req;
		d->range = parse_range(http_request_header(req, MHD_HTTP_HEADER_RANGE));
		v = http_request_query(req, "maxBytes", &present);
		if (present) {
			d->has_max = true;
			r = validate_query_u64("maxBytes", v, 0, UINT64_MAX, &d->max_bytes, &e);
		}
	}
	if (r >= 0 && !(d->path = strdup(q.path)))
		r = station_error_set(&e, -ENOMEM, NULL, "out of memory");
	if (r < 0) {
		if (d)
			download_free(d);
		return http_reply_error(req, &e);
	}
	if (d->range.kind == RANGE_FROM) {
		q.has_offset = true;
		q.offset = d->range.first;
		if (d->range.last != UINT64_MAX) {
			q.has_length = true;
			q.length = d->range.last - d->range.first + 1;
		}
	} else if (d->range.kind == RANGE_SUFFIX) {
		q.has_suffix = true;
		q.suffix = d->range.suffix;
	}
	q.has_max_bytes = d->has_max;
	q.max_bytes = d->max_bytes;
	r = manager_file_open(http_request_manager(req), m->ws_id, &q, &download_ops, d,
			      &d->session, &e);
	if (r < 0) {
		download_free(d);
		return http_reply_error(req, &e);
	}
	http_request_set_state(req, d, download_free);
	return http_request_suspend(req, download_reply);
}
