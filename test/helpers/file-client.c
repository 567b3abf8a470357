/* SPDX-License-Identifier: MIT */
/* file-client: starts a station-agent the way the controller does (listening socket, start
 * block with the secret in a memfd) and runs file sessions against it from a line script,
 * printing each result as one JSON line. For tests of the agent's file worker without a
 * controller.
 *
 *   file-client [AGENT-ARG]... AGENT < script
 *
 * AGENT-ARGs go to the agent after --listen-fd and --secret-fd (--workdir, --home,
 * --files-root, --user...). Script lines (words split on spaces; '#' starts a comment):
 *   stat P | list P | mkdir P [mode=N] [parents] | delete P [recursive] [if_match=E]
 *   read P [offset=N] [length=N] [suffix=N] [max=N] [data]
 *   write P [mode=N] [parents] [exclusive] [if_match=E] (text=T | file=F | zero=N)
 *         [abort=N: stop after N bytes and close without END] [stall: send no END, hold]
 *   rename P Q [exclusive] [if_match=E]
 *   repeat N OP...              the operation N times
 *   watch ID P [recursive]      opens a watch session; prints its INFO
 *   events ID N [ms=T]          prints watch frames until N events (or END/ERROR), T ms each
 *                               (default 10000); prints {"timeout":...} when none came
 *   close ID                    closes a session (a watch, a stalled write)
 *   hold N P                    opens N WRITE sessions of P without END (kept open)
 *   release                     closes the held sessions
 *   open-bad-secret P | open-after-hello P   protocol attacks: prints {"closed":true} when
 *                               the agent closed the connection without answering
 *   sh CMD...                   runs CMD with sh -c; prints nothing
 *   alive [N]                   prints {"workers":N}: the agent's children (with N: once
 *                               there are N, or after 10 s)
 * A path word is taken as is, with %XX hex escapes (%00, %20, %25) and `@N` standing for a
 * path of N bytes ("/" and N-1 times "a"). Numbers are decimal or 0-prefixed octal (mode). */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "basic/util.h"
#include "proto/agent-proto.h"
#include "proto/agent-start.h"
#include "proto/file-proto.h"
#include "proto/frame.h"

#define WAIT_MS 10000
#define MAX_SESSIONS 64
#define ELEMS(x) (sizeof(x) / sizeof((x)[0]))

static char dir[] = "/tmp/file-client-XXXXXX";
static char sock_path[108];
static uint8_t secret[32];
static pid_t agent_pid;

struct session {
	char id[32];
	int fd;
	struct buf in;
	size_t consumed;
};
static struct session sessions[MAX_SESSIONS];
static int held[MAX_SESSIONS];
static size_t n_held;

static _Noreturn void die(const char *what)
{
	printf("{\"fatal\":\"%s\"}\n", what);
	exit(1);
}

static void print_json_bytes(const uint8_t *p, size_t n)
{
	putchar('"');
	for (size_t i = 0; i < n; i++)
		if (p[i] == '"' || p[i] == '\\')
			printf("\\%c", p[i]);
		else if (p[i] >= 0x20 && p[i] < 0x7f)
			putchar(p[i]);
		else
			printf("\\u%04x", p[i]);
	putchar('"');
}

/* A path word: %XX escapes, @N a path of N bytes. */
static size_t decode_path(const char *w, uint8_t *out, size_t cap)
{
	size_t n = 0;

	if (w[0] == '@') {
		size_t len = strtoul(w + 1, NULL, 10);

		if (len > cap)
			die("path too long for the client");
		memset(out, 'a', len);
		if (len)
			out[0] = '/';
		return len;
	}
	for (; *w && n < cap; w++) {
		unsigned v;

		if (w[0] == '%' && w[1] && w[2] && sscanf(w + 1, "%2x", &v) == 1) {
			out[n++] = (uint8_t)v;
			w += 2;
		} else
			out[n++] = (uint8_t)*w;
	}
	return n;
}

static int connect_agent(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	memcpy(sa.sun_path, sock_path, sizeof sock_path);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0)
		die("connect failed");
	return fd;
}

static void send_buf(int fd, struct buf *b)
{
	if (write_all(fd, b->data, b->len) < 0)
		printf("{\"send\":\"failed\"}\n");
	buf_free(b);
}

/* Next frame within ms: 1 with *f, 0 on timeout, -1 when closed. */
static int recv_frame(struct session *s, struct frame *f, int ms)
{
	buf_consume(&s->in, s->consumed);
	s->consumed = 0;
	for (;;) {
		long n = frame_parse(s->in.data, s->in.len, PROTO_MAX_PAYLOAD, f);
		struct pollfd p = { .fd = s->fd, .events = POLLIN };
		ssize_t got;

		if (n < 0)
			die("bad frame from agent");
		if (n > 0) {
			s->consumed = (size_t)n;
			return 1;
		}
		if (poll(&p, 1, ms) <= 0)
			return 0;
		if (buf_reserve(&s->in, 1 << 20) < 0)
			die("out of memory");
		got = read(s->fd, s->in.data + s->in.len, 1 << 20);
		if (got <= 0)
			return -1;
		s->in.len += (size_t)got;
	}
}

static const char *const tag_names[] = {
	[TAG_NAME] = "name",	     [TAG_PATH] = "path",	    [TAG_PATH2] = "path2",
	[TAG_FILE_TYPE] = "type",    [TAG_SIZE] = "size",	    [TAG_MODE] = "mode",
	[TAG_MTIME_NS] = "mtime_ns", [TAG_LINK_TARGET] = "link",    [TAG_ETAG] = "etag",
	[TAG_ERRNO] = "errno",	     [TAG_FILE_EVENT] = "event",    [TAG_UID] = "uid",
	[TAG_GID] = "gid",	     [TAG_TRUNCATED] = "truncated", [TAG_REASON] = "reason",
};

static bool tag_is_string(uint16_t tag)
{
	return tag == TAG_NAME || tag == TAG_PATH || tag == TAG_PATH2 || tag == TAG_LINK_TARGET ||
	       tag == TAG_ETAG || tag == TAG_REASON;
}

/* The fields of f as JSON members (no braces); types and events by name. */
static void print_fields(const struct frame *f)
{
	struct frame_iter it;
	const uint8_t *val;
	uint16_t tag;
	size_t len;
	uint64_t v;
	bool first = true;

	frame_iter_init(&it, f);
	while (frame_iter_next(&it, &tag, &val, &len) > 0) {
		const char *name = tag < ELEMS(tag_names) && tag_names[tag] ? tag_names[tag] : NULL;

		if (!name)
			continue;
		printf("%s\"%s\":", first ? "" : ",", name);
		first = false;
		if (tag_is_string(tag))
			print_json_bytes(val, len);
		else if (frame_val_u64(val, len, &v) < 0)
			printf("null");
		else if (tag == TAG_FILE_TYPE)
			printf("\"%s\"", file_type_to_string(v) ? file_type_to_string(v) : "?");
		else if (tag == TAG_FILE_EVENT)
			printf("\"%s\"", file_event_to_string(v) ? file_event_to_string(v) : "?");
		else if (tag == TAG_MODE)
			printf("\"%04llo\"", (unsigned long long)v);
		else
			printf("%llu", (unsigned long long)v);
	}
}

static const char *errno_name(uint64_t e)
{
	static const struct {
		int e;
		const char *name;
	} names[] = {
		{ EINVAL, "EINVAL" }, { EXDEV, "EXDEV" },     { ENXIO, "ENXIO" },
		{ EACCES, "EACCES" }, { ENOENT, "ENOENT" },   { EEXIST, "EEXIST" },
		{ EISDIR, "EISDIR" }, { ENOTDIR, "ENOTDIR" }, { ENOTEMPTY, "ENOTEMPTY" },
		{ ESTALE, "ESTALE" }, { EFBIG, "EFBIG" },     { EBUSY, "EBUSY" },
		{ ELOOP, "ELOOP" },   { EPERM, "EPERM" },     { ENAMETOOLONG, "ENAMETOOLONG" },
		{ ENOSYS, "ENOSYS" }, { EROFS, "EROFS" },     { ENOSPC, "ENOSPC" },
	};

	for (size_t i = 0; i < ELEMS(names); i++)
		if ((uint64_t)names[i].e == e)
			return names[i].name;
	return "E?";
}

static uint64_t frame_u64(const struct frame *f, uint16_t want)
{
	struct frame_iter it;
	const uint8_t *val;
	uint16_t tag;
	size_t len;
	uint64_t v = 0;

	frame_iter_init(&it, f);
	while (frame_iter_next(&it, &tag, &val, &len) > 0)
		if (tag == want)
			(void)frame_val_u64(val, len, &v);
	return v;
}

/* Word "key=value" of the option words: the value, or NULL. */
static const char *opt(char **words, size_t n, const char *key)
{
	size_t k = strlen(key);

	for (size_t i = 0; i < n; i++)
		if (strncmp(words[i], key, k) == 0 && (words[i][k] == '=' || words[i][k] == 0))
			return words[i][k] == '=' ? words[i] + k + 1 : words[i] + k;
	return NULL;
}

static uint64_t num(const char *s)
{
	return strtoull(s, NULL, s[0] == '0' && s[1] ? 8 : 10);
}

/* FILE_OPEN for op with the option words. */
static void build_open(struct buf *b, const uint8_t *key, uint64_t op, char **w, size_t n)
{
	static uint8_t path[8192], path2[8192];
	size_t start, len = decode_path(w[0], path, sizeof path);
	uint64_t flags = 0;
	const char *v;

	if (frame_begin(b, &start, MSG_FILE_OPEN, 0) < 0 ||
	    frame_put_bytes(b, TAG_SECRET, key, sizeof secret) < 0 ||
	    frame_put_u64(b, TAG_VERSION, PROTO_VERSION) < 0 ||
	    frame_put_u64(b, TAG_FILE_OP, op) < 0 || frame_put_bytes(b, TAG_PATH, path, len) < 0)
		die("out of memory");
	if (op == FILE_OP_RENAME) {
		if (n < 2)
			die("rename needs two paths");
		len = decode_path(w[1], path2, sizeof path2);
		if (frame_put_bytes(b, TAG_PATH2, path2, len) < 0)
			die("out of memory");
	}
	flags |= opt(w, n, "parents") ? FILE_F_PARENTS : 0;
	flags |= opt(w, n, "recursive") ? FILE_F_RECURSIVE : 0;
	flags |= opt(w, n, "exclusive") ? FILE_F_EXCLUSIVE : 0;
	if (flags && frame_put_u64(b, TAG_FILE_FLAGS, flags) < 0)
		die("out of memory");
	static const struct {
		const char *key;
		uint16_t tag;
	} nums[] = { { "mode", TAG_MODE },
		     { "offset", TAG_OFFSET },
		     { "length", TAG_LENGTH },
		     { "suffix", TAG_SUFFIX },
		     { "max", TAG_MAX_BYTES } };
	for (size_t i = 0; i < ELEMS(nums); i++)
		if ((v = opt(w, n, nums[i].key)) && frame_put_u64(b, nums[i].tag, num(v)) < 0)
			die("out of memory");
	if ((v = opt(w, n, "if_match")) && frame_put_str(b, TAG_IF_MATCH, v) < 0)
		die("out of memory");
	if (frame_end(b, start) < 0)
		die("out of memory");
}

static struct session *session_new(const char *id)
{
	for (size_t i = 0; i < MAX_SESSIONS; i++)
		if (sessions[i].fd <= 0) {
			sessions[i] = (struct session){ .fd = connect_agent() };
			snprintf(sessions[i].id, sizeof sessions[i].id, "%s", id);
			return &sessions[i];
		}
	die("too many sessions");
}

static void session_close(struct session *s)
{
	close(s->fd);
	buf_free(&s->in);
	*s = (struct session){ .fd = 0 };
}

static void print_error_or_end(const char *op, const struct frame *f, int r)
{
	if (r == 0)
		printf("{\"op\":\"%s\",\"timeout\":true}\n", op);
	else if (r < 0)
		printf("{\"op\":\"%s\",\"closed\":true}\n", op);
	else if (f->type == MSG_FILE_ERROR) {
		printf("{\"op\":\"%s\",\"ok\":false,\"error\":\"%s\",", op,
		       errno_name(frame_u64(f, TAG_ERRNO)));
		print_fields(f);
		printf("}\n");
	} else
		printf("{\"op\":\"%s\",\"unexpected\":%u}\n", op, f->type);
}

/* Frames of a one-shot operation up to END or FILE_ERROR, as one JSON line. */
static void collect(struct session *s, const char *op, bool show_data)
{
	struct sha256_ctx sha;
	struct buf data = { 0 };
	uint64_t bytes = 0, n_info = 0, n_data = 0;
	struct frame f;
	uint8_t digest[32];
	char hex[65];
	int r;

	sha256_init(&sha);
	printf("{\"op\":\"%s\",\"frames\":[", op);
	while ((r = recv_frame(s, &f, WAIT_MS)) > 0) {
		if (f.type == MSG_FILE_INFO) {
			printf("%s{", n_info++ ? "," : "");
			print_fields(&f);
			printf("}");
		} else if (f.type == MSG_FILE_DATA) {
			struct frame_iter it;
			const uint8_t *val;
			uint16_t tag;
			size_t len;

			frame_iter_init(&it, &f);
			while (frame_iter_next(&it, &tag, &val, &len) > 0)
				if (tag == TAG_DATA) {
					sha256_update(&sha, val, len);
					bytes += len;
					if (show_data && data.len < 4096)
						(void)buf_append(&data, val, len);
					if (len > FILE_MAX_CHUNK)
						printf("\"chunk too large\"");
				}
			n_data++;
		} else
			break;
	}
	printf("]");
	if (r > 0 && f.type == MSG_FILE_END) {
		sha256_final(&sha, digest);
		hex_encode(digest, sizeof digest, hex);
		printf(",\"ok\":true,\"truncated\":%s,\"infos\":%llu",
		       frame_u64(&f, TAG_TRUNCATED) ? "true" : "false", (unsigned long long)n_info);
		if (n_data || !strcmp(op, "read")) {
			printf(",\"bytes\":%llu,\"sha256\":\"%s\"", (unsigned long long)bytes, hex);
			if (show_data) {
				printf(",\"data\":");
				print_json_bytes(data.data, data.len);
			}
		}
		printf("}\n");
	} else if (r > 0 && f.type == MSG_FILE_ERROR) {
		printf(",\"ok\":false,\"error\":\"%s\",", errno_name(frame_u64(&f, TAG_ERRNO)));
		print_fields(&f);
		printf("}\n");
	} else
		printf(",\"%s\":true}\n", r == 0 ? "timeout" : r < 0 ? "closed" : "unexpected");
	buf_free(&data);
	fflush(stdout);
}

/* WRITE's data: text=, file= or zero=N bytes; abort=N closes after N bytes. */
static bool write_data(struct session *s, char **w, size_t n)
{
	const char *text = opt(w, n, "text"), *file = opt(w, n, "file"), *zero = opt(w, n, "zero");
	const char *abort_at = opt(w, n, "abort");
	uint64_t limit = abort_at ? num(abort_at) : UINT64_MAX, sent = 0;
	static uint8_t chunk[FILE_MAX_CHUNK];
	int fd = file ? open(file, O_RDONLY | O_CLOEXEC) : -1;
	uint64_t zeros = zero ? num(zero) : 0;

	if (file && fd < 0)
		die("cannot open file=");
	for (;;) {
		size_t len = 0;
		struct buf b = { 0 };
		size_t start;

		if (text && sent == 0)
			len = strlen(text), memcpy(chunk, text, len);
		else if (fd >= 0) {
			ssize_t k = read(fd, chunk, sizeof chunk);
			len = k > 0 ? (size_t)k : 0;
		} else if (zeros > sent)
			len = zeros - sent < sizeof chunk ? zeros - sent : sizeof chunk,
			memset(chunk, 'z', len);
		if (len > limit - sent)
			len = limit - sent;
		if (len == 0)
			break;
		if (frame_begin(&b, &start, MSG_FILE_DATA, 0) < 0 ||
		    frame_put_bytes(&b, TAG_DATA, chunk, len) < 0 || frame_end(&b, start) < 0)
			die("out of memory");
		send_buf(s->fd, &b);
		sent += len;
		if (text)
			text = NULL, fd = -1, zeros = 0;
	}
	if (fd >= 0)
		close(fd);
	return sent < limit || !abort_at;
}

static void cmd_op(const char *op, uint64_t code, char **w, size_t n)
{
	struct session *s = session_new(op);
	struct buf b = { 0 };

	build_open(&b, secret, code, w, n);
	send_buf(s->fd, &b);
	if (code == FILE_OP_WRITE) {
		bool complete = write_data(s, w, n);

		if (!complete) {
			printf("{\"op\":\"write\",\"aborted\":true}\n");
			session_close(s);
			return;
		}
		if (opt(w, n, "stall")) {
			snprintf(s->id, sizeof s->id, "%s", opt(w, n, "stall"));
			printf("{\"op\":\"write\",\"stalled\":true}\n");
			return;
		}
		size_t start;
		if (frame_begin(&b, &start, MSG_FILE_END, 0) < 0 || frame_end(&b, start) < 0)
			die("out of memory");
		send_buf(s->fd, &b);
	}
	collect(s, op, code == FILE_OP_READ && opt(w, n, "data"));
	session_close(s);
}

static struct session *session_find(const char *id)
{
	for (size_t i = 0; i < MAX_SESSIONS; i++)
		if (sessions[i].fd > 0 && strcmp(sessions[i].id, id) == 0)
			return &sessions[i];
	return NULL;
}

static void cmd_watch(char **w, size_t n)
{
	struct session *s = session_new(w[0]);
	struct buf b = { 0 };
	struct frame f;
	int r;

	build_open(&b, secret, FILE_OP_WATCH, w + 1, n - 1);
	send_buf(s->fd, &b);
	r = recv_frame(s, &f, WAIT_MS);
	if (r > 0 && f.type == MSG_FILE_INFO) {
		printf("{\"op\":\"watch\",\"ok\":true,\"info\":{");
		print_fields(&f);
		printf("}}\n");
	} else
		print_error_or_end("watch", &f, r);
}

static void cmd_events(char **w, size_t n)
{
	struct session *s = session_find(w[0]);
	uint64_t want = n > 1 ? num(w[1]) : 1, got = 0;
	const char *ms = opt(w, n, "ms");
	struct frame f;
	int r = 1;

	if (!s)
		die("no such session");
	while (got < want && (r = recv_frame(s, &f, ms ? (int)num(ms) : WAIT_MS)) > 0) {
		if (f.type == MSG_FILE_EVENT) {
			printf("{\"event\":{");
			print_fields(&f);
			printf("}}\n");
			got++;
		} else if (f.type == MSG_FILE_END) {
			printf("{\"end\":true}\n");
			break;
		} else {
			print_error_or_end("events", &f, 1);
			break;
		}
	}
	if (r == 0)
		printf("{\"timeout\":true,\"events\":%llu}\n", (unsigned long long)got);
	else if (r < 0)
		printf("{\"closed\":true}\n");
	fflush(stdout);
}

/* A FILE_OPEN the agent must refuse by closing the connection. */
static void cmd_attack(const char *verb, char **w, size_t n)
{
	struct session *s = session_new(verb);
	struct buf b = { 0 };
	struct frame f;
	int r;

	if (strcmp(verb, "open-after-hello") == 0) {
		size_t start;

		if (frame_begin(&b, &start, MSG_HELLO, 0) < 0 ||
		    frame_put_bytes(&b, TAG_SECRET, secret, sizeof secret) < 0 ||
		    frame_put_u64(&b, TAG_VERSION, PROTO_VERSION) < 0 || frame_end(&b, start) < 0)
			die("out of memory");
		send_buf(s->fd, &b);
		r = recv_frame(s, &f, WAIT_MS);
		if (r <= 0 || f.type != MSG_HELLO_OK)
			die("no hello_ok");
		build_open(&b, secret, FILE_OP_STAT, w, n);
	} else
		build_open(&b, (const uint8_t *)"wrong secret, wrong secret, wron", FILE_OP_STAT, w,
			   n);
	send_buf(s->fd, &b);
	while ((r = recv_frame(s, &f, WAIT_MS)) > 0)
		if (f.type != MSG_HELLO_OK)
			break;
	printf("{\"op\":\"%s\",\"%s\":true}\n", verb,
	       r < 0  ? "closed" :
	       r == 0 ? "timeout" :
			"answered");
	session_close(s);
}

static int count_children(void)
{
	char path[64], buf[4096];
	int fd, n = 0;
	ssize_t k;

	snprintf(path, sizeof path, "/proc/%d/task/%d/children", agent_pid, agent_pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0 && (k = read(fd, buf, sizeof buf - 1)) >= 0) {
		buf[k] = 0;
		for (char *t = strtok(buf, " \n"); t; t = strtok(NULL, " \n"))
			n++;
	}
	if (fd >= 0)
		close(fd);
	return n;
}

/* Polls (10 s) until the agent has exactly want children: a worker that ended was reaped. */
static void cmd_alive(const char *want)
{
	int n = count_children();

	for (int i = 0; want && n != atoi(want) && i < 1000; i++) {
		usleep(10000);
		n = count_children();
	}
	printf("{\"workers\":%d}\n", n);
	fflush(stdout);
}

static void run_line(char *line);

static void cmd_hold(char **w, size_t n)
{
	uint64_t count = num(w[0]);

	for (uint64_t i = 0; i < count && n_held < MAX_SESSIONS; i++) {
		struct buf b = { 0 };
		int fd = connect_agent();

		build_open(&b, secret, FILE_OP_WRITE, w + 1, n - 1);
		send_buf(fd, &b);
		held[n_held++] = fd;
	}
	printf("{\"held\":%zu}\n", n_held);
}

static void run_words(char **w, size_t n)
{
	static const struct {
		const char *verb;
		uint64_t op;
	} ops[] = { { "stat", FILE_OP_STAT },	 { "list", FILE_OP_LIST },
		    { "read", FILE_OP_READ },	 { "write", FILE_OP_WRITE },
		    { "mkdir", FILE_OP_MKDIR },	 { "rename", FILE_OP_RENAME },
		    { "delete", FILE_OP_DELETE } };

	for (size_t i = 0; i < ELEMS(ops); i++)
		if (strcmp(w[0], ops[i].verb) == 0 && n >= 2) {
			cmd_op(w[0], ops[i].op, w + 1, n - 1);
			return;
		}
	if (strcmp(w[0], "repeat") == 0 && n >= 3) {
		for (uint64_t k = num(w[1]); k > 0; k--)
			run_words(w + 2, n - 2);
	} else if (strcmp(w[0], "watch") == 0 && n >= 3)
		cmd_watch(w + 1, n - 1);
	else if (strcmp(w[0], "events") == 0 && n >= 2)
		cmd_events(w + 1, n - 1);
	else if (strcmp(w[0], "close") == 0 && n >= 2 && session_find(w[1]))
		session_close(session_find(w[1]));
	else if (strcmp(w[0], "hold") == 0 && n >= 3)
		cmd_hold(w + 1, n - 1);
	else if (strcmp(w[0], "release") == 0) {
		while (n_held > 0)
			close(held[--n_held]);
	} else if ((strcmp(w[0], "open-bad-secret") == 0 ||
		    strcmp(w[0], "open-after-hello") == 0) &&
		   n >= 2)
		cmd_attack(w[0], w + 1, n - 1);
	else if (strcmp(w[0], "alive") == 0)
		cmd_alive(n > 1 ? w[1] : NULL);
	else
		die("bad script line");
	fflush(stdout);
}

static void run_line(char *line)
{
	char *words[64], *save = NULL;
	size_t n = 0;

	if (strncmp(line, "sh ", 3) == 0) {
		fflush(stdout);
		if (system(line + 3) != 0)
			printf("{\"sh\":\"failed\"}\n");
		return;
	}
	for (char *w = strtok_r(line, " ", &save); w && n < ELEMS(words);
	     w = strtok_r(NULL, " ", &save))
		words[n++] = w;
	if (n == 0 || words[0][0] == '#')
		return;
	run_words(words, n);
}

/* argv: AGENT --listen-fd _ --secret-fd _ ...; the two fd values are filled in here. */
static pid_t start_agent(char **agent_argv)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	static char lfd[16], sfd[16];
	char *no_env[] = { NULL };
	struct buf block = { 0 };
	int ls, sp;
	pid_t pid;

	if (!mkdtemp(dir) || random_bytes(secret, sizeof secret) < 0)
		die("setup failed");
	snprintf(sock_path, sizeof sock_path, "%s/agent.sock", dir);
	memcpy(sa.sun_path, sock_path, sizeof sock_path);
	ls = socket(AF_UNIX, SOCK_STREAM, 0);
	sp = memfd_create("agent-start", 0);
	if (ls < 0 || bind(ls, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(ls, 64) < 0 ||
	    sp < 0 || agent_start_encode(&block, secret, sizeof secret, NULL, no_env) < 0 ||
	    write_all(sp, block.data, block.len) < 0 || lseek(sp, 0, SEEK_SET) < 0)
		die("setup failed");
	buf_free(&block);
	snprintf(lfd, sizeof lfd, "%d", ls);
	snprintf(sfd, sizeof sfd, "%d", sp);
	agent_argv[2] = lfd;
	agent_argv[4] = sfd;
	pid = fork();
	if (pid == 0) {
		execv(agent_argv[0], agent_argv);
		_exit(127);
	}
	close(ls);
	close(sp);
	return pid;
}

int main(int argc, char **argv)
{
	char **agent_argv = calloc((size_t)argc + 8, sizeof(char *));
	static char line[16384];
	int n = 0, status;

	if (argc < 2 || !agent_argv) {
		fprintf(stderr, "usage: file-client [AGENT-ARG]... AGENT < script\n");
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	agent_argv[n++] = argv[argc - 1];
	agent_argv[n++] = (char *)"--listen-fd";
	agent_argv[n++] = NULL;
	agent_argv[n++] = (char *)"--secret-fd";
	agent_argv[n++] = NULL;
	for (int i = 1; i < argc - 1; i++)
		agent_argv[n++] = argv[i];
	agent_argv[n++] = (char *)"--log-format";
	agent_argv[n++] = (char *)"text";
	agent_pid = start_agent(agent_argv);
	while (fgets(line, sizeof line, stdin)) {
		line[strcspn(line, "\n")] = 0;
		run_line(line);
	}
	for (size_t i = 0; i < MAX_SESSIONS; i++)
		if (sessions[i].fd > 0)
			session_close(&sessions[i]);
	while (n_held > 0)
		close(held[--n_held]);
	kill(agent_pid, SIGTERM);
	if (waitpid(agent_pid, &status, 0) < 0)
		die("waitpid failed");
	unlink(sock_path);
	rmdir(dir);
	printf("{\"agent_exit\":%d}\n",
	       WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
	return 0;
}
