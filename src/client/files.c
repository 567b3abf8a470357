/* SPDX-License-Identifier: MIT */
/* Files: stat, list, read, download to an fd, write, upload from an fd, mkdir, rename, delete
 * (docs/api.md, "Files"). Bodies in both directions are streamed: a download or an upload never
 * holds the file in memory. */

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "basic/cleanup.h"
#include "client-internal.h"

/* What station_file_read() caps a read at when the caller names no cap (as the SDKs do). */
#define READ_DEFAULT_MAX (64u * 1024 * 1024)

static const char *const file_type_names[] = {
	[STATION_FILE_UNKNOWN] = "unknown", [STATION_FILE_REGULAR] = "file",
	[STATION_FILE_DIR] = "dir",	    [STATION_FILE_SYMLINK] = "symlink",
	[STATION_FILE_FIFO] = "fifo",	    [STATION_FILE_SOCKET] = "socket",
	[STATION_FILE_CHAR] = "char",	    [STATION_FILE_BLOCK] = "block",
};

const char *station_file_type_to_string(enum station_file_type t)
{
	return (size_t)t < ELEMENTSOF(file_type_names) ? file_type_names[t] : "unknown";
}

enum station_file_type client_file_type_from_string(const char *s)
{
	for (size_t i = 1; s && i < ELEMENTSOF(file_type_names); i++)
		if (strcmp(s, file_type_names[i]) == 0)
			return (enum station_file_type)i;
	return STATION_FILE_UNKNOWN;
}

/* ---- Paths ------------------------------------------------------------------------------- */

char *client_query_encode(const char *s)
{
	static const char hex[] = "0123456789ABCDEF";
	char *out = malloc(strlen(s) * 3 + 1), *o = out;

	if (!out)
		return NULL;
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if ((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
		    (*p >= '0' && *p <= '9') || strchr("-._~/", *p)) {
			*o++ = (char)*p;
		} else {
			*o++ = '%';
			*o++ = hex[*p >> 4];
			*o++ = hex[*p & 15];
		}
	}
	*o = '\0';
	return out;
}

int client_file_path(struct station_client *c, const char *ws, const char *suffix, const char *path,
		     const char *tail, char **ret)
{
	_cleanup_free_ char *enc = NULL;
	_cleanup_free_ char *q = NULL;

	if (!path)
		return client_error(c, -EINVAL, "no path given");
	enc = client_query_encode(path);
	if (!enc || asprintf(&q, "%s?path=%s%s", suffix, enc, tail ? tail : "") < 0)
		return client_error(c, -ENOMEM, "out of memory");
	return client_path(c, ws, NULL, q, ret);
}

/* ---- Entries ----------------------------------------------------------------------------- */

static void entry_clear(struct station_file_entry *e)
{
	free(e->name);
	free(e->path);
	free(e->mtime);
	free(e->etag);
	free(e->link_target);
	*e = (struct station_file_entry){};
}

struct station_file_entry *station_file_entry_free(struct station_file_entry *e)
{
	if (e) {
		entry_clear(e);
		free(e);
	}
	return NULL;
}

struct station_file_list *station_file_list_free(struct station_file_list *l)
{
	if (!l)
		return NULL;
	for (size_t i = 0; i < l->n_entries; i++)
		entry_clear(&l->entries[i]);
	free(l->entries);
	free(l->path);
	free(l);
	return NULL;
}

DEFINE_TRIVIAL_CLEANUP_FUNC(struct station_file_entry *, station_file_entry_free);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct station_file_list *, station_file_list_free);

/* "2026-12-02T10:00:00.123Z" (or with an offset) in milliseconds since the epoch. */
static int rfc3339_to_ms(const char *s, int64_t *ret)
{
	struct tm tm = {};
	int ms = 0, n = 0, digits = 0, off_h = 0, off_m = 0;
	const char *p;
	time_t t;

	if (sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
		   &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &n) != 6)
		return -EINVAL;
	p = s + n;
	if (*p == '.')
		for (p++; *p >= '0' && *p <= '9'; p++, digits++)
			if (digits < 3)
				ms = ms * 10 + (*p - '0');
	for (; digits > 0 && digits < 3; digits++)
		ms *= 10;
	if ((*p == '+' || *p == '-') && sscanf(p + 1, "%2d:%2d", &off_h, &off_m) == 2) {
		if (*p == '-')
			off_h = -off_h, off_m = -off_m;
	} else if (*p != 'Z' && *p != 'z') {
		return -EINVAL;
	}
	tm.tm_year -= 1900;
	tm.tm_mon -= 1;
	t = timegm(&tm);
	*ret = ((int64_t)t - off_h * 3600 - off_m * 60) * 1000 + ms;
	return 0;
}

static int dup_string(const json_t *o, const char *key, bool required, char **ret)
{
	json_t *v = json_object_get(o, key);

	if (!v || json_is_null(v)) {
		*ret = NULL;
		return required ? -EPROTO : 0;
	}
	if (!json_is_string(v))
		return -EPROTO;
	*ret = strdup(json_string_value(v));
	return *ret ? 0 : -ENOMEM;
}

static int get_u64(const json_t *o, const char *key, uint64_t *ret)
{
	json_t *v = json_object_get(o, key);

	if (!json_is_integer(v) || json_integer_value(v) < 0)
		return -EPROTO;
	*ret = (uint64_t)json_integer_value(v);
	return 0;
}

static int entry_parse_numbers(const json_t *o, struct station_file_entry *e)
{
	const char *mode = json_string_value(json_object_get(o, "mode"));
	uint64_t uid, gid;
	char *end;

	if (get_u64(o, "size", &e->size) < 0 || get_u64(o, "uid", &uid) < 0 ||
	    get_u64(o, "gid", &gid) < 0 || uid > UINT32_MAX || gid > UINT32_MAX || !mode)
		return -EPROTO;
	e->uid = (uint32_t)uid;
	e->gid = (uint32_t)gid;
	errno = 0;
	e->mode = (unsigned)strtoul(mode, &end, 8);
	if (errno != 0 || end == mode || *end != '\0' || e->mode > 07777)
		return -EPROTO;
	if (e->mtime && rfc3339_to_ms(e->mtime, &e->mtime_ms) < 0)
		return -EPROTO;
	return 0;
}

/* Fills *e from an entry object; -EPROTO when it is not one. */
static int entry_parse(const json_t *o, struct station_file_entry *e)
{
	int r;

	if (!json_is_object(o))
		return -EPROTO;
	e->type = client_file_type_from_string(json_string_value(json_object_get(o, "type")));
	r = dup_string(o, "name", true, &e->name);
	if (r >= 0)
		r = dup_string(o, "path", true, &e->path);
	if (r >= 0)
		r = dup_string(o, "mtime", false, &e->mtime);
	if (r >= 0)
		r = dup_string(o, "etag", false, &e->etag);
	if (r >= 0)
		r = dup_string(o, "linkTarget", false, &e->link_target);
	if (r >= 0)
		r = entry_parse_numbers(o, e);
	return r;
}

static int entry_from_json(struct station_client *c, const json_t *o,
			   struct station_file_entry **ret)
{
	_cleanup_(station_file_entry_freep) struct station_file_entry *e = calloc(1, sizeof(*e));
	int r;

	if (!e)
		return client_error(c, -ENOMEM, "out of memory");
	r = entry_parse(o, e);
	if (r == -ENOMEM)
		return client_error(c, r, "out of memory");
	if (r < 0)
		return client_error(c, r, "%s answered with a malformed file entry",
				    station_client_endpoint(c));
	*ret = TAKE_PTR(e);
	return 0;
}

json_t *station_file_entry_to_json(const struct station_file_entry *e)
{
	char mode[8];

	snprintf(mode, sizeof(mode), "%04o", e->mode);
	return json_pack("{s:s?, s:s?, s:s, s:I, s:s, s:s?, s:I, s:I, s:s?, s:s?}", "name", e->name,
			 "path", e->path, "type", station_file_type_to_string(e->type), "size",
			 (json_int_t)e->size, "mode", mode, "mtime", e->mtime, "uid",
			 (json_int_t)e->uid, "gid", (json_int_t)e->gid, "etag", e->etag,
			 "linkTarget", e->link_target);
}

/* A JSON call whose answer is an entry; *ret optional. */
static int entry_call(struct station_client *c, const char *method, const char *path, json_t *body,
		      struct station_file_entry **ret)
{
	_cleanup_json_ json_t *doc = NULL;
	int r;

	r = station_request_json(c, method, path, body, &doc);
	if (r < 0 || !ret)
		return r;
	return entry_from_json(c, doc, ret);
}

int station_file_stat(struct station_client *c, const char *ws, const char *path,
		      struct station_file_entry **ret)
{
	CLIENT_ROUTE(c, ws);
	_cleanup_free_ char *url = NULL;
	int r;

	r = client_file_path(c, ws, "/files/stat", path, NULL, &url);
	if (r < 0)
		return r;
	return entry_call(c, "GET", url, NULL, ret);
}

static int list_from_json(struct station_client *c, const json_t *doc,
			  struct station_file_list **ret)
{
	_cleanup_(station_file_list_freep) struct station_file_list *l = calloc(1, sizeof(*l));
	json_t *entries = json_object_get(doc, "entries");
	size_t n = json_array_size(entries);
	int r;

	if (!l)
		return client_error(c, -ENOMEM, "out of memory");
	if (!json_is_array(entries) || dup_string(doc, "path", true, &l->path) < 0)
		return client_error(c, -EPROTO, "%s answered a listing without \"entries\"",
				    station_client_endpoint(c));
	l->truncated = json_is_true(json_object_get(doc, "truncated"));
	l->entries = calloc(MAX(n, (size_t)1), sizeof(*l->entries));
	if (!l->entries)
		return client_error(c, -ENOMEM, "out of memory");
	for (size_t i = 0; i < n; i++) {
		l->n_entries = i + 1; /* so a half-filled entry is freed too */
		r = entry_parse(json_array_get(entries, i), &l->entries[i]);
		if (r < 0)
			return client_error(c, r, "%s answered a malformed listing",
					    station_client_endpoint(c));
	}
	*ret = TAKE_PTR(l);
	return 0;
}

int station_file_list(struct station_client *c, const char *ws, const char *path,
		      struct station_file_list **ret)
{
	CLIENT_ROUTE(c, ws);
	_cleanup_json_ json_t *doc = NULL;
	_cleanup_free_ char *url = NULL;
	int r;

	r = client_file_path(c, ws, "/files/list", path, NULL, &url);
	if (r >= 0)
		r = station_request_json(c, "GET", url, NULL, &doc);
	if (r < 0)
		return r;
	return list_from_json(c, doc, ret);
}

/* ---- Reading ----------------------------------------------------------------------------- */

struct read_buffer {
	struct station_client *c;
	char *data;
	size_t len, cap;
	uint64_t max;
};

static int read_append(const void *data, size_t n, void *userdata)
{
	struct read_buffer *b = userdata;

	if (n > b->max - b->len) /* the controller should have refused it */
		return client_error(b->c, -E2BIG,
				    "%s sent more than the %" PRIu64 " bytes asked for",
				    station_client_endpoint(b->c), b->max);
	if (b->len + n + 1 > b->cap) {
		size_t cap = MAX(b->cap * 2, b->len + n + 1);
		char *p = realloc(b->data, cap);

		if (!p)
			return client_error(b->c, -ENOMEM, "out of memory");
		b->data = p;
		b->cap = cap;
	}
	memcpy(b->data + b->len, data, n);
	b->len += n;
	b->data[b->len] = '\0';
	return 0;
}

int station_file_read(struct station_client *c, const char *ws, const char *path,
		      uint64_t max_bytes, char **ret, size_t *ret_len,
		      char ret_etag[STATION_ETAG_MAX])
{
	CLIENT_ROUTE(c, ws);
	struct read_buffer b = { .c = c, .max = max_bytes ? max_bytes : READ_DEFAULT_MAX };
	char etag[CLIENT_ETAG_MAX], tail[48];
	_cleanup_free_ char *url = NULL;
	struct client_io io = {
		.method = "GET",
		.accept = "Accept: */*",
		.upload_fd = -1,
		.on_data = read_append,
		.userdata = &b,
		.etag = etag,
	};
	int r;

	if (b.max > SIZE_MAX - 1)
		b.max = SIZE_MAX - 1;
	snprintf(tail, sizeof(tail), "&maxBytes=%" PRIu64, b.max);
	r = client_file_path(c, ws, "/files", path, tail, &url);
	if (r < 0)
		return r;
	io.path = url;
	r = client_io(c, &io);
	if (r >= 0 && !b.data)
		r = read_append("", 0, &b); /* an empty file */
	if (r < 0) {
		free(b.data);
		return r;
	}
	*ret = b.data;
	if (ret_len)
		*ret_len = b.len;
	if (ret_etag)
		memcpy(ret_etag, etag, sizeof(etag));
	return 0;
}

struct download {
	struct station_client *c;
	int fd;
	bool want_partial; /* a range was asked for: only 206 will do */
	bool checked;
	uint64_t written;
};

static int download_write(const void *data, size_t n, void *userdata)
{
	struct download *d = userdata;
	const char *p = data;

	if (!d->checked) {
		long status = d->c->transfer_status;

		if (d->want_partial && status != 206)
			return client_error(d->c, -EPROTO, "%s ignored the range (HTTP %ld)",
					    station_client_endpoint(d->c), status);
		d->checked = true;
	}
	while (n > 0) {
		ssize_t k = write(d->fd, p, n);

		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return client_error(d->c, -errno, "cannot write the download: %s",
					    strerror(errno));
		p += k;
		n -= (size_t)k;
		d->written += (uint64_t)k;
	}
	return 0;
}

int station_file_download(struct station_client *c, const char *ws, const char *path, int fd,
			  const struct station_download_options *opts, uint64_t *ret_bytes)
{
	CLIENT_ROUTE(c, ws);
	static const struct station_download_options none = {};
	struct download d = { .c = c, .fd = fd };
	char range[80] = "", tail[48] = "";
	const char *headers[] = { range, NULL };
	_cleanup_free_ char *url = NULL;
	struct client_io io = {
		.method = "GET",
		.accept = "Accept: */*",
		.upload_fd = -1,
		.on_data = download_write,
		.userdata = &d,
	};
	int r;

	if (!opts)
		opts = &none;
	if (opts->length > 0 && opts->offset > UINT64_MAX - opts->length)
		return client_error(c, -EINVAL, "range past the largest offset");
	if (opts->length > 0)
		snprintf(range, sizeof(range), "Range: bytes=%" PRIu64 "-%" PRIu64, opts->offset,
			 opts->offset + opts->length - 1);
	else if (opts->offset > 0)
		snprintf(range, sizeof(range), "Range: bytes=%" PRIu64 "-", opts->offset);
	d.want_partial = range[0] != '\0';
	if (opts->max_bytes > 0)
		snprintf(tail, sizeof(tail), "&maxBytes=%" PRIu64, opts->max_bytes);
	r = client_file_path(c, ws, "/files", path, tail, &url);
	if (r < 0)
		return r;
	io.path = url;
	io.headers = range[0] ? headers : NULL;
	r = client_io(c, &io);
	free(io.body);
	if (ret_bytes)
		*ret_bytes = d.written;
	return r;
}

/* ---- Writing ----------------------------------------------------------------------------- */

/* "&mode=0644&parents=1&exclusive=1" as opts ask. */
static void write_query(const struct station_write_options *o, char *buf, size_t size)
{
	int n = 0;

	buf[0] = '\0';
	if (o->mode)
		n += snprintf(buf + n, size - (size_t)n, "&mode=%04o", o->mode & 07777);
	if (o->parents)
		n += snprintf(buf + n, size - (size_t)n, "&parents=1");
	if (o->exclusive)
		snprintf(buf + n, size - (size_t)n, "&exclusive=1");
}

static int write_io(struct station_client *c, const char *ws, const char *path,
		    const struct station_write_options *opts, struct client_io *io,
		    struct station_file_entry **ret)
{
	static const struct station_write_options none = {};
	_cleanup_json_ json_t *doc = NULL;
	_cleanup_free_ char *url = NULL;
	_cleanup_free_ char *if_match = NULL;
	const char *headers[] = { NULL, NULL };
	json_error_t err;
	char tail[64];
	int r;

	if (!opts)
		opts = &none;
	if (opts->if_match) {
		if (strpbrk(opts->if_match, "\r\n"))
			return client_error(c, -EINVAL, "invalid etag '%s'", opts->if_match);
		if (asprintf(&if_match, "If-Match: %s", opts->if_match) < 0)
			return client_error(c, -ENOMEM, "out of memory");
		headers[0] = if_match;
		io->headers = headers;
	}
	write_query(opts, tail, sizeof(tail));
	r = client_file_path(c, ws, "/files", path, tail, &url);
	if (r < 0)
		return r;
	io->method = "PUT";
	io->path = url;
	io->content_type = "Content-Type: application/octet-stream";
	r = client_io(c, io);
	if (r < 0)
		return r;
	doc = json_loadb(io->body ? io->body : "", io->body_len, JSON_REJECT_DUPLICATES, &err);
	free(io->body);
	if (!doc)
		return client_error(c, -EPROTO, "%s answered the write with bad JSON: %s",
				    station_client_endpoint(c), err.text);
	return ret ? entry_from_json(c, doc, ret) : 0;
}

int station_file_write(struct station_client *c, const char *ws, const char *path, const void *data,
		       size_t n, const struct station_write_options *opts,
		       struct station_file_entry **ret)
{
	CLIENT_ROUTE(c, ws);
	struct client_io io = {
		.data = data ? data : "",
		.size = data ? n : 0,
		.upload_fd = -1,
	};

	return write_io(c, ws, path, opts, &io, ret);
}

int station_file_upload(struct station_client *c, const char *ws, const char *path, int fd,
			const struct station_write_options *opts, struct station_file_entry **ret)
{
	CLIENT_ROUTE(c, ws);
	struct client_io io = { .upload_fd = fd, .upload_size = -1 };
	struct stat st;

	if (fd < 0 || fstat(fd, &st) < 0)
		return client_error(c, -EBADF, "nothing to upload: not an open file");
	if (S_ISREG(st.st_mode)) {
		off_t at = lseek(fd, 0, SEEK_CUR);

		io.upload_size = at >= 0 && at <= st.st_size ? st.st_size - at : -1;
	}
	return write_io(c, ws, path, opts, &io, ret);
}

/* ---- mkdir, rename, delete --------------------------------------------------------------- */

int station_file_mkdir(struct station_client *c, const char *ws, const char *path, bool parents,
		       unsigned mode, struct station_file_entry **ret)
{
	CLIENT_ROUTE(c, ws);
	_cleanup_json_ json_t *body = json_object();
	_cleanup_free_ char *url = NULL;
	char mode_text[8];
	int r;

	if (!body)
		return client_error(c, -ENOMEM, "out of memory");
	if (!path)
		return client_error(c, -EINVAL, "no path given");
	snprintf(mode_text, sizeof(mode_text), "%04o", (mode ? mode : 0755) & 07777);
	r = client_put_string(c, body, "path", path);
	if (r >= 0)
		r = client_put_string(c, body, "mode", mode_text);
	if (r >= 0 && json_object_set_new(body, "parents", json_boolean(parents)) < 0)
		r = client_error(c, -ENOMEM, "out of memory");
	if (r >= 0)
		r = client_path(c, ws, NULL, "/files/mkdir", &url);
	if (r < 0)
		return r;
	return entry_call(c, "POST", url, body, ret);
}

int station_file_rename(struct station_client *c, const char *ws, const char *from, const char *to,
			bool overwrite, struct station_file_entry **ret)
{
	CLIENT_ROUTE(c, ws);
	_cleanup_json_ json_t *body = json_object();
	_cleanup_free_ char *url = NULL;
	int r;

	if (!body)
		return client_error(c, -ENOMEM, "out of memory");
	if (!from || !to)
		return client_error(c, -EINVAL, "a rename needs both paths");
	r = client_put_string(c, body, "from", from);
	if (r >= 0)
		r = client_put_string(c, body, "to", to);
	if (r >= 0 && json_object_set_new(body, "overwrite", json_boolean(overwrite)) < 0)
		r = client_error(c, -ENOMEM, "out of memory");
	if (r >= 0)
		r = client_path(c, ws, NULL, "/files/rename", &url);
	if (r < 0)
		return r;
	return entry_call(c, "POST", url, body, ret);
}

int station_file_delete(struct station_client *c, const char *ws, const char *path, bool recursive)
{
	CLIENT_ROUTE(c, ws);
	_cleanup_free_ char *url = NULL;
	int r;

	r = client_file_path(c, ws, "/files", path, recursive ? "&recursive=1" : NULL, &url);
	if (r < 0)
		return r;
	return station_request_json(c, "DELETE", url, NULL, NULL);
}
