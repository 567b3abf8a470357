/* SPDX-License-Identifier: MIT */
/* agent-impostor: a hostile agent for tests of what the controller believes on an agent's word
 * (container root may control its agent connection). The controller starts it as its agent
 * (--agent PATH, host adapter). It reads the start block (proto/agent-start.h); unless the
 * workspace's env has STATION_TEST_IMPOSTOR=1 it rewinds the block and execs the real agent
 * named by $STATION_TEST_REAL_AGENT, so other workspaces of the controller are real.
 *
 * As the impostor it accepts the controller, answers HELLO with HELLO_OK and turns every
 * RUN_START into reports:
 *   COMMAND "forge run ID":  RUN_DONE for run ID (exited 77, stdout "forged")
 *   COMMAND "forge term ID": TERM_EXIT for terminal ID (exited 77)
 * then, either way, RUN_DONE for the RUN_START's own run (exited 0, stdout "reported").
 * A SERVICE_START whose COMMAND is "progress OUT ERR" is answered with SERVICE_STATE (running,
 * its first attempt A) and then SERVICE_PROGRESS frames: A with OUT and ERR (as decimal numbers,
 * any u64), A + 1 with 777 and 777 (not the current attempt), A with 1 and 1 (going back), and
 * one naming the service "no-such-service".
 *
 * Each connection is served by a child of its own, so file sessions (FILE_OPEN, file-proto.h)
 * come while the main connection lives. Their PATH picks what is sent back, all of it against
 * the contract except "good" (the positive control: a STAT answered by the book):
 *   name-slash   LIST: an entry whose NAME holds '/'
 *   etag-crlf    STAT: an ETAG with CR LF and a header after it
 *   errno-big    FILE_ERROR with ERRNO 99999
 *   data-over    READ: INFO of 3 bytes, then 6 bytes of DATA
 *   huge-frame   a frame header announcing 100 MiB
 *   too-many     LIST: the directory and 10,002 entries
 *   mode-big     STAT: MODE 0177777
 *   type-bad     STAT: FILE_TYPE 99
 *   early-end    STAT: END without INFO
 *   event-read   READ: INFO, then an EVENT
 *   hang-up      nothing: the connection closes */

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "basic/util.h"
#include "proto/agent-proto.h"
#include "proto/agent-start.h"
#include "proto/file-proto.h"
#include "proto/frame.h"

enum { START_FD = 3, LISTEN_FD = 4 };

static int conn = -1;
static uint64_t seq;

static _Noreturn void die(const char *what)
{
	fprintf(stderr, "agent-impostor: %s\n", what);
	exit(1);
}

static uint64_t now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

static void send_buf(struct buf *b)
{
	if (write_all(conn, b->data, b->len) < 0)
		die("send failed");
	buf_free(b);
}

static void send_done(const char *run_id, uint64_t code, const char *out)
{
	struct buf b = { 0 };
	size_t st;
	uint64_t now = now_us();
	frame_begin(&b, &st, MSG_RUN_DONE, ++seq);
	frame_put_str(&b, TAG_RUN_ID, run_id);
	frame_put_u64(&b, TAG_STATUS, RUN_EXITED);
	frame_put_u64(&b, TAG_EXIT_CODE, code);
	frame_put_str(&b, TAG_STDOUT_HEAD, out);
	frame_put_u64(&b, TAG_STDOUT_BYTES, strlen(out));
	frame_put_u64(&b, TAG_STDERR_BYTES, 0);
	frame_put_u64(&b, TAG_STARTED_AT, now);
	frame_put_u64(&b, TAG_ENDED_AT, now);
	frame_end(&b, st);
	send_buf(&b);
}

static void send_term_exit(const char *term_id)
{
	struct buf b = { 0 };
	size_t st;
	uint64_t now = now_us();
	frame_begin(&b, &st, MSG_TERM_EXIT, ++seq);
	frame_put_str(&b, TAG_TERM_ID, term_id);
	frame_put_u64(&b, TAG_STATUS, RUN_EXITED);
	frame_put_u64(&b, TAG_EXIT_CODE, 77);
	frame_put_u64(&b, TAG_STARTED_AT, now);
	frame_put_u64(&b, TAG_ENDED_AT, now);
	frame_put_u64(&b, TAG_OFFSET, 0);
	frame_end(&b, st);
	send_buf(&b);
}

static void on_run_start(const struct frame *f)
{
	char *id = NULL, *cmd = NULL;
	struct frame_iter it;
	uint16_t tag;
	const uint8_t *v;
	size_t n;
	frame_iter_init(&it, f);
	while (frame_iter_next(&it, &tag, &v, &n) > 0) {
		if (tag == TAG_RUN_ID && !id)
			frame_val_strdup(v, n, PROTO_MAX_ID, &id);
		else if (tag == TAG_COMMAND && !cmd)
			frame_val_strdup(v, n, PROTO_MAX_COMMAND, &cmd);
	}
	if (!id || !cmd)
		die("RUN_START without id or command");
	if (strncmp(cmd, "forge run ", 10) == 0)
		send_done(cmd + 10, 77, "forged");
	else if (strncmp(cmd, "forge term ", 11) == 0)
		send_term_exit(cmd + 11);
	send_done(id, 0, "reported");
	free(id);
	free(cmd);
}

static void send_progress(const char *name, uint64_t attempt, uint64_t out, uint64_t err)
{
	struct buf b = { 0 };
	size_t st;
	frame_begin(&b, &st, MSG_SERVICE_PROGRESS, 0);
	frame_put_str(&b, TAG_SERVICE_NAME, name);
	frame_put_u64(&b, TAG_ATTEMPT, attempt);
	frame_put_u64(&b, TAG_STDOUT_BYTES, out);
	frame_put_u64(&b, TAG_STDERR_BYTES, err);
	frame_end(&b, st);
	send_buf(&b);
}

static void on_service_start(const struct frame *f)
{
	char *name = NULL, *id = NULL, *cmd = NULL;
	uint64_t attempt = 0, out = 0, err = 0;
	struct frame_iter it;
	struct buf b = { 0 };
	uint16_t tag;
	const uint8_t *v;
	size_t n, st;
	frame_iter_init(&it, f);
	while (frame_iter_next(&it, &tag, &v, &n) > 0) {
		if (tag == TAG_SERVICE_NAME && !name)
			frame_val_strdup(v, n, PROTO_MAX_ID, &name);
		else if (tag == TAG_SERVICE_ID && !id)
			frame_val_strdup(v, n, PROTO_MAX_ID, &id);
		else if (tag == TAG_COMMAND && !cmd)
			frame_val_strdup(v, n, PROTO_MAX_COMMAND, &cmd);
		else if (tag == TAG_ATTEMPT)
			frame_val_u64(v, n, &attempt);
	}
	if (!name || !id || !cmd || attempt == 0)
		die("SERVICE_START without name, id, command or attempt");
	if (sscanf(cmd, "progress %" SCNu64 " %" SCNu64, &out, &err) != 2)
		die("SERVICE_START: the command is not \"progress OUT ERR\"");
	frame_begin(&b, &st, MSG_SERVICE_STATE, ++seq);
	frame_put_str(&b, TAG_SERVICE_NAME, name);
	frame_put_str(&b, TAG_SERVICE_ID, id);
	frame_put_u64(&b, TAG_SERVICE_STATE, SERVICE_RUNNING);
	frame_put_u64(&b, TAG_RESTART_COUNT, 0);
	frame_put_u64(&b, TAG_ATTEMPT, attempt);
	frame_put_u64(&b, TAG_PID, 4242);
	frame_put_u64(&b, TAG_STARTED_AT, now_us());
	frame_end(&b, st);
	send_buf(&b);
	send_progress(name, attempt, out, err);
	send_progress(name, attempt + 1, 777, 777);
	send_progress(name, attempt, 1, 1);
	send_progress("no-such-service", 1, 5, 5);
	free(name);
	free(id);
	free(cmd);
}

static void send_hello_ok(void)
{
	struct buf b = { 0 };
	size_t st;
	frame_begin(&b, &st, MSG_HELLO_OK, 0);
	frame_put_u64(&b, TAG_VERSION, PROTO_VERSION);
	frame_put_u64(&b, TAG_PID, (uint64_t)getpid());
	frame_put_u64(&b, TAG_FEATURES, AGENT_FEATURES_ALL);
	frame_end(&b, st);
	send_buf(&b);
}

static void file_frame(uint16_t type, const char *name, uint64_t ftype, const char *etag,
		       uint64_t mode, uint64_t size)
{
	struct buf b = { 0 };
	size_t st;
	frame_begin(&b, &st, type, 0);
	if (name)
		frame_put_str(&b, TAG_NAME, name);
	if (ftype)
		frame_put_u64(&b, TAG_FILE_TYPE, ftype);
	if (etag)
		frame_put_str(&b, TAG_ETAG, etag);
	if (type == MSG_FILE_INFO) {
		frame_put_u64(&b, TAG_MODE, mode);
		frame_put_u64(&b, TAG_SIZE, size);
	}
	frame_end(&b, st);
	send_buf(&b);
}

static void file_simple(uint16_t type, uint16_t tag, const void *data, size_t n)
{
	struct buf b = { 0 };
	size_t st;
	frame_begin(&b, &st, type, 0);
	if (tag == TAG_ERRNO)
		frame_put_u64(&b, tag, *(const uint64_t *)data);
	else if (tag)
		frame_put_bytes(&b, tag, data, n);
	frame_end(&b, st);
	send_buf(&b);
}

static void on_file_open(const struct frame *f)
{
	char *path = NULL;
	struct frame_iter it;
	uint16_t tag;
	const uint8_t *v;
	size_t n;
	frame_iter_init(&it, f);
	while (frame_iter_next(&it, &tag, &v, &n) > 0)
		if (tag == TAG_PATH && !path)
			frame_val_strdup(v, n, PROTO_MAX_PATH, &path);
	if (!path)
		die("FILE_OPEN without PATH");
	if (strcmp(path, "good") == 0) {
		file_frame(MSG_FILE_INFO, NULL, FILE_TYPE_FILE, "ab-1-2", 0644, 1);
	} else if (strcmp(path, "name-slash") == 0) {
		file_frame(MSG_FILE_INFO, NULL, FILE_TYPE_DIR, NULL, 0755, 0);
		file_frame(MSG_FILE_INFO, "a/b", FILE_TYPE_FILE, NULL, 0644, 1);
	} else if (strcmp(path, "etag-crlf") == 0) {
		file_frame(MSG_FILE_INFO, NULL, FILE_TYPE_FILE, "x\r\nSet-Cookie: y", 0644, 1);
	} else if (strcmp(path, "errno-big") == 0) {
		uint64_t e = 99999;
		file_simple(MSG_FILE_ERROR, TAG_ERRNO, &e, sizeof e);
		return;
	} else if (strcmp(path, "data-over") == 0) {
		file_frame(MSG_FILE_INFO, NULL, FILE_TYPE_FILE, "ab-3-2", 0644, 3);
		file_simple(MSG_FILE_DATA, TAG_DATA, "abcdef", 6);
	} else if (strcmp(path, "huge-frame") == 0) {
		uint8_t h[FRAME_HEADER_SIZE] = { 0, 0, 0x40, 0x06, MSG_FILE_INFO, 0, PROTO_VERSION };
		if (write_all(conn, h, sizeof h) < 0)
			die("send failed");
	} else if (strcmp(path, "too-many") == 0) {
		char name[32];
		file_frame(MSG_FILE_INFO, NULL, FILE_TYPE_DIR, NULL, 0755, 0);
		for (unsigned i = 0; i < FILE_MAX_ENTRIES + 2; i++) {
			snprintf(name, sizeof name, "e%05u", i);
			file_frame(MSG_FILE_INFO, name, FILE_TYPE_FILE, NULL, 0644, 0);
		}
	} else if (strcmp(path, "mode-big") == 0) {
		file_frame(MSG_FILE_INFO, NULL, FILE_TYPE_FILE, NULL, 0177777, 0);
	} else if (strcmp(path, "type-bad") == 0) {
		file_frame(MSG_FILE_INFO, NULL, 99, NULL, 0644, 0);
	} else if (strcmp(path, "event-read") == 0) {
		file_frame(MSG_FILE_INFO, NULL, FILE_TYPE_FILE, "ab-3-2", 0644, 3);
		file_simple(MSG_FILE_EVENT, 0, NULL, 0);
	} else if (strcmp(path, "hang-up") == 0) {
		exit(0);
	}
	file_simple(MSG_FILE_END, 0, NULL, 0);
	free(path);
}

/* One connection: the main one, or a file session. */
static void serve(void)
{
	struct buf in = { 0 };
	for (;;) {
		struct frame f;
		long k = frame_parse(in.data, in.len, PROTO_MAX_PAYLOAD, &f);
		if (k < 0)
			die("bad frame");
		if (k > 0) {
			if (f.type == MSG_HELLO)
				send_hello_ok();
			else if (f.type == MSG_RUN_START)
				on_run_start(&f);
			else if (f.type == MSG_SERVICE_START)
				on_service_start(&f);
			else if (f.type == MSG_FILE_OPEN)
				on_file_open(&f);
			buf_consume(&in, (size_t)k);
			continue;
		}
		if (buf_reserve(&in, 1 << 16) < 0)
			die("out of memory");
		ssize_t got = read(conn, in.data + in.len, 1 << 16);
		if (got <= 0)
			break;
		in.len += (size_t)got;
	}
}

/* Every connection in a child of its own, for the agent's whole life. */
static void impostor(void)
{
	signal(SIGCHLD, SIG_IGN);
	for (;;) {
		conn = accept(LISTEN_FD, NULL, NULL);
		if (conn < 0)
			die("accept failed");
		pid_t pid = fork();
		if (pid == 0) {
			serve();
			_exit(0);
		}
		close(conn);
	}
}

int main(int argc, char **argv)
{
	struct buf block = { 0 };
	struct agent_start st;
	ssize_t got;
	do {
		if (buf_reserve(&block, 1 << 16) < 0)
			die("out of memory");
		got = read(START_FD, block.data + block.len, 1 << 16);
		if (got > 0)
			block.len += (size_t)got;
	} while (got > 0);
	if (got < 0 || agent_start_decode(block.data, block.len, &st) < 0)
		die("cannot read the start block");
	for (size_t i = 0; i < st.n_env; i++)
		if (strcmp(st.env[i], "STATION_TEST_IMPOSTOR=1") == 0)
			impostor();
	const char *real = getenv("STATION_TEST_REAL_AGENT");
	if (!real || lseek(START_FD, 0, SEEK_SET) < 0)
		die("STATION_TEST_REAL_AGENT unset or the start block not seekable");
	argv[0] = (char *)real;
	execv(real, argv);
	die("cannot exec the real agent");
	(void)argc;
}
