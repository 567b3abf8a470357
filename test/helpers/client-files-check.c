/* SPDX-License-Identifier: MIT */
/* libstation-client's files, watch and secrets calls against a real controller, the way a
 * program would use them: client-files-check SOCKET WS DIR, where DIR is the workspace's
 * directory (absolute, in the sandbox's view). Prints `ok NAME` / `not ok NAME # why` lines;
 * exits 1 when any check failed. */

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "station/client.h"

static struct station_client *c;
static const char *ws, *dir;
static int failures;
static bool check_failed;

static void fail(const char *fmt, ...)
{
	va_list ap;

	printf("#   FAIL: ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	check_failed = true;
}

#define expect(cond, ...)                                                                          \
	do {                                                                                       \
		if (!(cond))                                                                       \
			fail(__VA_ARGS__);                                                         \
	} while (0)

/* A call that must succeed. */
#define must(call)                                                                                 \
	do {                                                                                       \
		int r_ = (call);                                                                   \
		if (r_ < 0) {                                                                      \
			fail("%s: %s (%s)", #call, station_client_last_error(c), strerror(-r_));   \
			return;                                                                    \
		}                                                                                  \
	} while (0)

static void run(const char *name, void (*fn)(void))
{
	check_failed = false;
	fn();
	printf("%s %s\n", check_failed ? "not ok" : "ok", name);
	fflush(stdout);
	failures += check_failed;
}

static char *at(const char *rel)
{
	static char buf[4][4096];
	static int i;

	i = (i + 1) % 4;
	snprintf(buf[i], sizeof(buf[i]), "%s/%s", dir, rel);
	return buf[i];
}

/* A failed call: its errno, the API's code and a message naming the path. */
static void expect_error(int r, int want, const char *code, const char *mention)
{
	expect(r == want, "returned %d (%s), want %d (%s)", r, strerror(-r), want, strerror(-want));
	expect(strcmp(station_client_last_error_code(c), code) == 0, "code '%s', want '%s'",
	       station_client_last_error_code(c), code);
	expect(strstr(station_client_last_error(c), mention), "message '%s' does not name '%s'",
	       station_client_last_error(c), mention);
}

static void t_write_read_buffer(void)
{
	static const char data[] = "binary\0bytes\n\xff\xfe";
	struct station_write_options o = { .mode = 0600 };
	struct station_file_entry *e = NULL;
	char etag[STATION_ETAG_MAX];
	char *got = NULL;
	size_t n = 0;

	must(station_file_write(c, ws, at("buf.bin"), data, sizeof(data) - 1, &o, &e));
	expect(e->type == STATION_FILE_REGULAR, "type %s", station_file_type_to_string(e->type));
	expect(e->size == sizeof(data) - 1, "size %" PRIu64, e->size);
	expect(e->mode == 0600, "mode %04o", e->mode);
	expect(e->etag && e->etag[0] == '"', "etag %s", e->etag ? e->etag : "(none)");
	expect(e->mtime_ms > 1700000000000, "mtime_ms %" PRId64, e->mtime_ms);
	must(station_file_read(c, ws, at("buf.bin"), 1024, &got, &n, etag));
	expect(n == sizeof(data) - 1 && memcmp(got, data, n) == 0, "read back %zu bytes, differ",
	       n);
	expect(strcmp(etag, e->etag) == 0, "read's ETag %s, the write's %s", etag, e->etag);
	free(got);
	station_file_entry_free(e);
}

static void t_read_cap(void)
{
	char *got = NULL;
	size_t n = 0;
	int r;

	must(station_file_write(c, ws, at("ten.txt"), "0123456789", 10, NULL, NULL));
	r = station_file_read(c, ws, at("ten.txt"), 9, &got, &n, NULL);
	expect_error(r, -E2BIG, "payload_too_large", "ten.txt");
	expect(!got, "a refused read returned data");
	must(station_file_read(c, ws, at("ten.txt"), 10, &got, &n, NULL));
	expect(n == 10 && memcmp(got, "0123456789", 10) == 0, "a read at the cap: %zu bytes", n);
	free(got);
}

static void t_download_range(void)
{
	struct station_download_options o = { .offset = 3, .length = 4 };
	char buf[64] = "";
	uint64_t written = 0;
	int fds[2];
	ssize_t k;

	if (pipe(fds) < 0)
		return fail("pipe: %m");
	must(station_file_download(c, ws, at("ten.txt"), fds[1], &o, &written));
	close(fds[1]);
	k = read(fds[0], buf, sizeof(buf) - 1);
	close(fds[0]);
	expect(written == 4 && k == 4 && memcmp(buf, "3456", 4) == 0, "range gave %zd bytes '%s'",
	       k, buf);
	o = (struct station_download_options){ .offset = 10 };
	expect_error(station_file_download(c, ws, at("ten.txt"), 1, &o, &written), -ERANGE,
		     "range_not_satisfiable", "ten.txt");
}

static void t_upload_pipe(void)
{
	struct station_file_entry *e = NULL;
	char *got = NULL;
	size_t n = 0;
	int fds[2];

	/* A pipe has no length: the upload goes chunked. */
	if (pipe(fds) < 0)
		return fail("pipe: %m");
	if (write(fds[1], "through a pipe\n", 15) != 15)
		return fail("write: %m");
	close(fds[1]);
	must(station_file_upload(c, ws, at("sub/piped.txt"), fds[0],
				 &(struct station_write_options){ .parents = true }, &e));
	close(fds[0]);
	expect(e->size == 15, "size %" PRIu64, e->size);
	must(station_file_read(c, ws, at("sub/piped.txt"), 0, &got, &n, NULL));
	expect(n == 15 && strcmp(got, "through a pipe\n") == 0, "read back '%s'", got);
	free(got);
	station_file_entry_free(e);
}

static void t_list_struct_array(void)
{
	struct station_file_list *l = NULL;
	const char *want[] = { "buf.bin", "link", "sub", "ten.txt" };

	must(station_file_list(c, ws, dir, &l));
	expect(l->n_entries == 4, "%zu entries", l->n_entries);
	for (size_t i = 0; i < l->n_entries && i < 4; i++)
		expect(strcmp(l->entries[i].name, want[i]) == 0, "entry %zu is '%s', want '%s'", i,
		       l->entries[i].name, want[i]);
	if (l->n_entries == 4) {
		expect(l->entries[1].type == STATION_FILE_SYMLINK && l->entries[1].link_target &&
			       strcmp(l->entries[1].link_target, "/etc/shadow") == 0,
		       "link: %s -> %s", station_file_type_to_string(l->entries[1].type),
		       l->entries[1].link_target ? l->entries[1].link_target : "(none)");
		expect(l->entries[2].type == STATION_FILE_DIR && !l->entries[2].etag, "sub: %s",
		       station_file_type_to_string(l->entries[2].type));
	}
	expect(!l->truncated, "truncated");
	station_file_list_free(l);
}

static void t_stat_mkdir_rename_delete(void)
{
	struct station_file_entry *e = NULL;

	must(station_file_mkdir(c, ws, at("a/b"), true, 0700, &e));
	expect(e->type == STATION_FILE_DIR && e->mode == 0700, "mkdir: %s %04o",
	       station_file_type_to_string(e->type), e->mode);
	station_file_entry_free(e);
	expect_error(station_file_mkdir(c, ws, at("a/b"), false, 0, NULL), -EBUSY, "conflict",
		     "a/b");
	must(station_file_rename(c, ws, at("a"), at("z"), false, &e));
	expect(strcmp(e->path, at("z")) == 0, "rename answered '%s'", e->path);
	station_file_entry_free(e);
	expect_error(station_file_stat(c, ws, at("a"), NULL), -ENOENT, "not_found", "a");
	expect_error(station_file_delete(c, ws, at("z"), false), -EBUSY, "conflict", "z");
	must(station_file_delete(c, ws, at("z"), true));
	expect_error(station_file_stat(c, ws, at("z"), &e), -ENOENT, "not_found", "z");
}

static void t_if_match(void)
{
	struct station_file_entry *e = NULL;
	struct station_write_options o = {};

	must(station_file_stat(c, ws, at("ten.txt"), &e));
	o.if_match = e->etag;
	must(station_file_write(c, ws, at("ten.txt"), "abc", 3, &o, NULL));
	/* The same etag again: the file changed since. */
	expect_error(station_file_write(c, ws, at("ten.txt"), "def", 3, &o, NULL), -ESTALE,
		     "precondition_failed", "ten.txt");
	station_file_entry_free(e);
}

struct seen {
	char lines[8][512];
	int n;
};

static int watch_collect(const struct station_watch_event *e, void *userdata)
{
	struct seen *s = userdata;

	if (e->type == STATION_WATCH_READY) {
		/* The watch is in place: make the changes from here, as another program would. */
		struct station_client *other = NULL;

		if (station_client_new(getenv("CHECK_SOCKET"), NULL, &other) < 0)
			return -EIO;
		station_file_mkdir(other, ws, at("watched/new"), false, 0, NULL);
		station_file_rename(other, ws, at("watched/new"), at("watched/renamed"), true,
				    NULL);
		station_client_free(other);
		return 0;
	}
	snprintf(s->lines[s->n++], sizeof(s->lines[0]), "%s %s %s%s%s",
		 station_watch_event_type_to_string(e->type), station_file_type_to_string(e->kind),
		 e->path ? e->path : "-", e->to ? " -> " : "", e->to ? e->to : "");
	return s->n == 2 ? -ECANCELED : 0; /* stop after the two events */
}

static void t_watch_callback(void)
{
	struct seen s = {};
	char want[2][512];
	int r;

	must(station_file_mkdir(c, ws, at("watched"), false, 0, NULL));
	r = station_file_watch(c, ws, at("watched"), false, watch_collect, &s);
	expect(r == -ECANCELED, "watch returned %d (%s): %s", r, strerror(-r),
	       station_client_last_error(c));
	snprintf(want[0], sizeof(want[0]), "created dir %s", at("watched/new"));
	snprintf(want[1], sizeof(want[1]), "moved dir %s -> %s", at("watched/new"),
		 at("watched/renamed"));
	expect(s.n == 2, "%d events", s.n);
	for (int i = 0; i < s.n && i < 2; i++)
		expect(strcmp(s.lines[i], want[i]) == 0, "event %d '%s', want '%s'", i, s.lines[i],
		       want[i]);
	/* The same handle works after a stopped stream. */
	must(station_file_delete(c, ws, at("watched"), true));
}

static void t_secrets(void)
{
	static const char value[] = "s3cr3t-tok\"en\\with\tcontrol \x01 and é";
	struct station_secret_options o = { .host = "github.com" };
	json_t *s = NULL, *list = NULL;
	char *text;

	must(station_secret_put(c, ws, "gh", value, sizeof(value) - 1, &o, &s));
	expect(strcmp(json_string_value(json_object_get(s, "name")), "gh") == 0, "name");
	expect(strcmp(json_string_value(json_object_get(s, "host")), "github.com") == 0, "host");
	expect(!json_object_get(s, "value"), "the answer carries a value");
	json_decref(s);
	must(station_secret_list(c, ws, &list));
	text = json_dumps(list, 0);
	expect(json_array_size(list) == 1, "%zu secrets", json_array_size(list));
	expect(text && !strstr(text, "s3cr3t"), "the list shows the value: %s", text);
	free(text);
	json_decref(list);
	expect_error(station_secret_put(c, ws, "bad", "a\0b", 3, NULL, NULL), -EINVAL, "",
		     "without NUL");
	expect_error(station_secret_put(
			     c, ws, "gh", "x", 1,
			     &(struct station_secret_options){ .expires_at = "yesterday" }, NULL),
		     -EINVAL, "invalid_argument", "expiresAt");
	/* git's credential protocol is line-based: the controller refuses a line break. */
	expect_error(station_secret_put(c, ws, "nl", "a\nhost=evil", 11, NULL, NULL), -EINVAL,
		     "invalid_argument", "line break");
	must(station_secret_delete(c, ws, "gh", NULL));
	expect_error(station_secret_delete(c, ws, "gh", NULL), -ENOENT, "not_found", "gh");
}

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: client-files-check SOCKET WS DIR\n");
		return 2;
	}
	setenv("CHECK_SOCKET", argv[1], 1);
	if (station_client_new(argv[1], NULL, &c) < 0)
		return 2;
	ws = argv[2];
	dir = argv[3];
	run("library: write from a buffer, read into a buffer (binary-safe, etag)",
	    t_write_read_buffer);
	run("library: a read over its cap is E2BIG (413), at the cap it reads", t_read_cap);
	run("library: download of a range to an fd; past the end is ERANGE (416)",
	    t_download_range);
	run("library: upload from a pipe (chunked), with parents", t_upload_pipe);
	run("library: list is a struct array sorted by name, symlinks not followed",
	    t_list_struct_array);
	run("library: mkdir, rename, delete (recursive), each refusal with its code",
	    t_stat_mkdir_rename_delete);
	run("library: a write with a stale If-Match is ESTALE (412)", t_if_match);
	run("library: watch calls back per event until the callback stops it", t_watch_callback);
	run("library: secret put, list without values, delete", t_secrets);
	station_client_free(c);
	return failures ? 1 : 0;
}
