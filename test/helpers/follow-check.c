/* SPDX-License-Identifier: MIT */
/* station_run_follow() of libstation-client, driven by test-follow.sh; prints one JSON object.
 *
 *   follow-check real SOCKET WS RUN [--slow-ms N] [--interrupt-ms N] [--go-file PATH]
 *	follows a run of a real controller. --slow-ms: the first output callback sleeps N ms (a
 *	client that falls behind); --interrupt-ms: the interrupt check asks to stop N ms in;
 *	--go-file: the first output callback creates PATH (a run waiting for it then goes on
 *	while the follow is connected).
 *   follow-check logs SOCKET WS NAME [--follow]
 *	station_service_logs() of a real controller's service (end: the service).
 *   follow-check fake SCENARIO [--interrupt-ms N]
 *	follows "run r-1" of a hostile server of our own on a unix socket that answers the
 *	upgrade and then sends what SCENARIO says (see scenario()).
 *
 * The JSON: r (the call's return, -errno), error (the client's last error), delivered (per
 * stream), gaps (each {stream, offset, bytes}), gapBytes, offsetErrors (an output or a gap
 * that did not start where the stream stood), end (the run handed back, or null), connections
 * (fake: upgrades the server answered), ms (the call's duration). */

#include <errno.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "proto/ws-codec.h"
#include "station/client.h"

struct state {
	uint64_t next[2], delivered[2], gap_bytes;
	unsigned offset_errors;
	json_t *gaps;
	int slow_ms;
	bool slept;
	const char *go_file;
	double start_ms, interrupt_ms;
};

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int on_output(enum station_stream s, uint64_t offset, const void *data, size_t len,
		     void *userdata)
{
	struct state *st = userdata;

	if (offset != st->next[s])
		st->offset_errors++;
	st->next[s] = offset + len;
	st->delivered[s] += len;
	if (st->go_file) {
		FILE *f = fopen(st->go_file, "we");

		if (f)
			fclose(f);
		st->go_file = NULL;
	}
	if (st->slow_ms > 0 && !st->slept) {
		st->slept = true;
		usleep((useconds_t)st->slow_ms * 1000);
	}
	return 0;
}

static int on_gap(enum station_stream s, uint64_t offset, uint64_t bytes, void *userdata)
{
	struct state *st = userdata;

	if (offset != st->next[s])
		st->offset_errors++;
	st->next[s] = offset + bytes;
	st->gap_bytes += bytes;
	json_array_append_new(st->gaps,
			      json_pack("{s:s,s:I,s:I}", "stream", station_stream_to_string(s),
					"offset", (json_int_t)offset, "bytes", (json_int_t)bytes));
	return 0;
}

static int interrupt_check(void *userdata)
{
	struct state *st = userdata;

	return st->interrupt_ms > 0 && now_ms() - st->start_ms >= st->interrupt_ms;
}

/* ---- the hostile server ------------------------------------------------------------------- */

static void send_all(int fd, const void *data, size_t n)
{
	const char *p = data;

	while (n > 0) {
		ssize_t k = send(fd, p, n, MSG_NOSIGNAL);

		if (k <= 0)
			return;
		p += k;
		n -= (size_t)k;
	}
}

static void frame(int fd, enum ws_opcode op, const void *data, size_t n)
{
	uint8_t h[WS_HEADER_MAX];

	send_all(fd, h, ws_frame_header(h, op, true, n, NULL));
	send_all(fd, data, n);
}

static void text(int fd, const char *s)
{
	frame(fd, WS_OP_TEXT, s, strlen(s));
}

static void output(int fd, int stream, uint64_t offset, const char *s)
{
	uint8_t buf[256];
	size_t n = strlen(s);

	buf[0] = (uint8_t)stream;
	for (int i = 0; i < 8; i++)
		buf[1 + i] = (uint8_t)(offset >> (56 - 8 * i));
	memcpy(buf + 9, s, n);
	frame(fd, WS_OP_BINARY, buf, 9 + n);
}

/* Reads the request head; answers 101 (the key's accept) unless the scenario refuses. */
/* The path of the newest request the fake server got (shared with the parent): a reconnect
 * says where it resumes. */
#define LAST_PATH_MAX 256
static char *last_path;

static bool upgrade(int fd, const char *scenario)
{
	char buf[8192], accept[WS_ACCEPT_SIZE], resp[512];
	size_t len = 0;
	const char *key;

	while (len + 1 < sizeof buf) {
		ssize_t k = recv(fd, buf + len, sizeof buf - 1 - len, 0);

		if (k <= 0)
			return false;
		len += (size_t)k;
		buf[len] = '\0';
		if (strstr(buf, "\r\n\r\n"))
			break;
	}
	if (last_path && strncmp(buf, "GET ", 4) == 0)
		snprintf(last_path, LAST_PATH_MAX, "%.*s", (int)strcspn(buf + 4, " \r\n"), buf + 4);
	if (strcmp(scenario, "refused") == 0) {
		const char *body = "{\"error\":{\"code\":\"not_found\",\"message\":\"run r-1 not "
				   "found (hostile server)\"}}";

		snprintf(resp, sizeof resp,
			 "HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\n"
			 "Content-Length: %zu\r\n\r\n%s",
			 strlen(body), body);
		send_all(fd, resp, strlen(resp));
		return false;
	}
	if (strcmp(scenario, "big-head") == 0) {
		send_all(fd, "HTTP/1.1 101 Switching Protocols\r\n", 34);
		for (int i = 0; i < 2000; i++)
			send_all(fd, "X-Filler: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n", 42);
		return false;
	}
	key = strcasestr(buf, "Sec-WebSocket-Key:");
	if (!key)
		return false;
	key += 18;
	key += strspn(key, " ");
	((char *)key)[strcspn(key, "\r\n")] = '\0';
	if (ws_accept_key(key, accept) < 0)
		return false;
	snprintf(resp, sizeof resp,
		 "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
		 "Sec-WebSocket-Accept: %s\r\n\r\n",
		 accept);
	send_all(fd, resp, strlen(resp));
	return true;
}

/* What the server sends once upgraded. */
static void scenario(int fd, const char *name)
{
	static const char end[] = "{\"type\":\"end\",\"run\":{\"id\":\"r-1\",\"status\":\"exited\","
				  "\"exitCode\":0,\"stdoutBytes\":15,\"stderrBytes\":1}}";
	uint8_t h[WS_HEADER_MAX];

	if (strcmp(name, "gap-end") == 0) {
		/* Everything the stream has, a ping in the middle, and text split in fragments. */
		output(fd, 1, 0, "abc");
		text(fd, "{\"type\":\"gap\",\"stream\":\"stdout\",\"offset\":3,\"bytes\":10}");
		frame(fd, WS_OP_PING, "p", 1);
		output(fd, 1, 13, "de");
		output(fd, 2, 0, "E");
		text(fd, "{\"type\":\"hello-from-the-future\"}");
		text(fd, end);
	} else if (strcmp(name, "oversize") == 0) {
		send_all(fd, h, ws_frame_header(h, WS_OP_BINARY, true, 64u << 20, NULL));
		for (int i = 0; i < 64; i++)
			send_all(fd,
				 "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
				 64);
	} else if (strcmp(name, "bad-opcode") == 0) {
		output(fd, 1, 0, "abc");
		send_all(fd, "\x83\x01x", 3);
	} else if (strcmp(name, "masked") == 0) {
		send_all(fd, "\x82\x81\x01\x02\x03\x04x", 7);
	} else if (strcmp(name, "short-binary") == 0) {
		frame(fd, WS_OP_BINARY, "\x01\x00\x00", 3);
	} else if (strcmp(name, "bad-stream") == 0) {
		output(fd, 7, 0, "abc");
	} else if (strcmp(name, "bad-json") == 0) {
		text(fd, "{\"type\":\"gap\",");
	} else if (strcmp(name, "bad-gap") == 0) {
		text(fd, "{\"type\":\"gap\",\"stream\":\"stdout\",\"offset\":-5,\"bytes\":1}");
	} else if (strcmp(name, "end-not-terminal") == 0) {
		text(fd, "{\"type\":\"end\",\"run\":{\"id\":\"r-1\",\"status\":\"running\"}}");
	} else if (strcmp(name, "error") == 0) {
		uint8_t payload[WS_CONTROL_MAX];

		text(fd, "{\"type\":\"error\",\"error\":{\"code\":\"not_found\",\"message\":"
			 "\"run r-1 is gone\"}}");
		frame(fd, WS_OP_CLOSE, payload,
		      ws_close_payload(payload, WS_CLOSE_INTERNAL, "run unavailable"));
	} else if (strcmp(name, "close-mid") == 0) {
		output(fd, 1, 0, "hello");
	} else if (strcmp(name, "close-frame") == 0) {
		uint8_t payload[WS_CONTROL_MAX];

		output(fd, 1, 0, "hello");
		frame(fd, WS_OP_CLOSE, payload,
		      ws_close_payload(payload, WS_CLOSE_GOING_AWAY, "shutting down"));
	} else if (strcmp(name, "hang") == 0) {
		output(fd, 1, 0, "hello");
		pause();
	}
}

static pid_t server_start(const char *path, const char *name, unsigned *connections)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	pid_t pid;

	snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(lfd, 8) < 0) {
		perror("follow-check: server socket");
		exit(2);
	}
	pid = fork();
	if (pid != 0) {
		close(lfd);
		return pid;
	}
	for (;;) {
		int fd = accept(lfd, NULL, NULL);
		char drain[4096];

		if (fd < 0)
			_exit(0);
		if (upgrade(fd, name)) {
			__atomic_add_fetch(connections, 1, __ATOMIC_SEQ_CST);
			scenario(fd, name);
		}
		/* Reads what the client still sends (its close) until it hangs up, briefly. */
		shutdown(fd, SHUT_WR);
		for (struct pollfd p = { .fd = fd, .events = POLLIN }; poll(&p, 1, 2000) > 0;)
			if (recv(fd, drain, sizeof drain, 0) <= 0)
				break;
		close(fd);
	}
}

/* ---- main ------------------------------------------------------------------------------------ */

int main(int argc, char **argv)
{
	static const struct station_follow_callbacks cb = { on_output, on_gap, NULL };
	struct state st = { .gaps = json_array() };
	struct station_client *c = NULL;
	char dir[] = "/tmp/follow-check.XXXXXX", sock[128];
	unsigned *connections = NULL;
	const char *ws = "w-1", *run = "r-1";
	json_t *end = NULL, *out;
	pid_t server = -1;
	bool fake;
	int argi, r;

	bool logs = argc >= 2 && strcmp(argv[1], "logs") == 0, logs_follow = false;

	if (argc < 3 || (strcmp(argv[1], "real") != 0 && strcmp(argv[1], "fake") != 0 && !logs) ||
	    ((strcmp(argv[1], "real") == 0 || logs) && argc < 5)) {
		fprintf(stderr,
			"usage: follow-check real SOCKET WS RUN [--slow-ms N] "
			"[--interrupt-ms N] [--go-file PATH]\n       follow-check fake SCENARIO "
			"[--interrupt-ms N]\n");
		return 2;
	}
	fake = strcmp(argv[1], "fake") == 0;
	argi = fake ? 3 : 5;
	for (; argi < argc; argi++) {
		const char *v = argi + 1 < argc ? argv[argi + 1] : NULL;

		if (strcmp(argv[argi], "--follow") == 0)
			logs_follow = true;
		else if (v && strcmp(argv[argi], "--slow-ms") == 0)
			st.slow_ms = atoi(v), argi++;
		else if (v && strcmp(argv[argi], "--go-file") == 0)
			st.go_file = v, argi++;
		else if (v && strcmp(argv[argi], "--interrupt-ms") == 0)
			st.interrupt_ms = atof(v), argi++;
		else {
			fprintf(stderr, "follow-check: unknown option %s\n", argv[argi]);
			return 2;
		}
	}
	if (fake) {
		connections = mmap(NULL, sizeof *connections, PROT_READ | PROT_WRITE,
				   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
		last_path = mmap(NULL, LAST_PATH_MAX, PROT_READ | PROT_WRITE,
				 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
		if (connections == MAP_FAILED || last_path == MAP_FAILED || !mkdtemp(dir))
			return 2;
		snprintf(sock, sizeof sock, "%s/sock", dir);
		server = server_start(sock, argv[2], connections);
	} else {
		snprintf(sock, sizeof sock, "%s", argv[2]);
		ws = argv[3];
		run = argv[4];
	}
	{
		char endpoint[160];

		snprintf(endpoint, sizeof endpoint, "unix:%s", sock);
		if (station_client_new(endpoint, NULL, &c) < 0)
			return 2;
	}
	station_client_set_interrupt(c, interrupt_check, &st);
	st.start_ms = now_ms();
	if (logs)
		r = station_service_logs(c, ws, run, logs_follow, &cb, &st, &end);
	else
		r = station_run_follow(c, ws, run, &cb, &st, &end);
	out = json_pack("{s:i,s:s,s:{s:I,s:I},s:o,s:I,s:i,s:o,s:f}", "r", r, "error",
			station_client_last_error(c), "delivered", "stdout",
			(json_int_t)st.delivered[0], "stderr", (json_int_t)st.delivered[1], "gaps",
			st.gaps, "gapBytes", (json_int_t)st.gap_bytes, "offsetErrors",
			(int)st.offset_errors, "end", end ? end : json_null(), "ms",
			now_ms() - st.start_ms);
	if (fake) {
		kill(server, SIGKILL);
		waitpid(server, NULL, 0);
		json_object_set_new(out, "connections", json_integer(*connections));
		json_object_set_new(out, "lastPath", json_string(last_path));
		unlink(sock);
		rmdir(dir);
	}
	json_dumpf(out, stdout, JSON_COMPACT);
	printf("\n");
	json_decref(out);
	station_client_free(c);
	return 0;
}
