/* SPDX-License-Identifier: MIT */
/* The Idempotency-Key of libstation-client's creates, driven by test-idempotency.sh; prints
 * "ok" lines and exits 0, or says what failed on stderr and exits 1.
 *
 *   idem-check real SOCKET WS
 *	against a real controller: station_exec_start() twice with one key starts one run, the
 *	same key with another command is -EBUSY (409 conflict), a bad key is -EINVAL without a
 *	request, and two starts without a key are two runs (the library's own keys differ).
 *   idem-check retry DIR
 *	against a server of our own on DIR/sock that answers a GET on a kept connection, then
 *	closes that connection when the next request (the create) arrives, without answering:
 *	the library sends the create once more on a new connection, and both attempts must carry
 *	the same, non-empty Idempotency-Key. */

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "station/client.h"

static int fail(const char *what, struct station_client *c)
{
	fprintf(stderr, "idem-check: %s%s%s\n", what, c ? ": " : "",
		c ? station_client_last_error(c) : "");
	return 1;
}

static int exec_key(struct station_client *c, const char *ws, const char *command, const char *key,
		    char *ret_id, size_t n)
{
	struct station_exec_options o = { .command = command, .idempotency_key = key };
	json_t *run = NULL;
	int r = station_exec_start(c, ws, &o, &run);

	if (r >= 0 && ret_id)
		snprintf(ret_id, n, "%s", json_string_value(json_object_get(run, "id")) ?: "");
	json_decref(run);
	return r;
}

static int real(const char *sock, const char *ws)
{
	struct station_client *c = NULL;
	char a[128], b[128];

	if (station_client_new(sock, NULL, &c) < 0)
		return fail("client", NULL);
	if (exec_key(c, ws, "echo lib-1", "lib-key-1", a, sizeof a) < 0 ||
	    exec_key(c, ws, "echo lib-1", "lib-key-1", b, sizeof b) < 0)
		return fail("start with a key", c);
	if (strcmp(a, b) != 0 || !*a)
		return fail("a retry with the same key made another run", NULL);
	printf("ok same key, same run %s\n", a);
	if (exec_key(c, ws, "echo lib-2", "lib-key-1", NULL, 0) != -EBUSY ||
	    strcmp(station_client_last_error_code(c), "conflict") != 0)
		return fail("the same key with another command was not a conflict", c);
	printf("ok same key, other command: -EBUSY conflict\n");
	if (exec_key(c, ws, "echo lib-3", "", NULL, 0) != -EINVAL ||
	    exec_key(c, ws, "echo lib-3", "bad\nkey", NULL, 0) != -EINVAL ||
	    station_client_last_status(c) != 0)
		return fail("a bad key was not -EINVAL without a request", c);
	printf("ok bad keys: -EINVAL\n");
	if (exec_key(c, ws, "echo lib-4", NULL, a, sizeof a) < 0 ||
	    exec_key(c, ws, "echo lib-4", NULL, b, sizeof b) < 0)
		return fail("start without a key", c);
	if (strcmp(a, b) == 0)
		return fail("two starts without a key were one run", NULL);
	printf("ok no key: two runs\n");
	station_client_free(c);
	return 0;
}

/* Reads one request (head and Content-Length body) into buf; 0 at EOF before any byte. */
static ssize_t read_request(int fd, char *buf, size_t size)
{
	size_t n = 0, want = 0;
	char *end = NULL;

	for (;;) {
		ssize_t k = read(fd, buf + n, size - 1 - n);

		if (k <= 0)
			return n == 0 ? 0 : -1;
		n += (size_t)k;
		buf[n] = 0;
		if (!end && (end = strstr(buf, "\r\n\r\n"))) {
			const char *cl = strcasestr(buf, "\r\nContent-Length:");

			want = (size_t)(end + 4 - buf) + (cl ? strtoul(cl + 17, NULL, 10) : 0);
		}
		if (end && n >= want)
			return (ssize_t)n;
		if (n + 1 >= size)
			return -1;
	}
}

/* The value of the request's Idempotency-Key header into ret ("" when none). */
static void request_key(const char *req, char *ret, size_t n)
{
	const char *k = strcasestr(req, "\r\nIdempotency-Key:");
	size_t len;

	ret[0] = 0;
	if (!k)
		return;
	k += 18;
	k += strspn(k, " ");
	len = strcspn(k, "\r");
	snprintf(ret, n, "%.*s", (int)len, k);
}

static void serve(int lfd, int report)
{
	static const char ok[] = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
				 "Content-Length: 2\r\n\r\n{}";
	static const char made[] =
		"HTTP/1.1 201 Created\r\nContent-Type: application/json\r\n"
		"Content-Length: 31\r\n\r\n{\"id\":\"r-1\",\"status\":\"running\"}";
	char req[8192], key[300];
	int fd;

	fd = accept(lfd, NULL, NULL);
	if (fd < 0 || read_request(fd, req, sizeof req) <= 0 || write(fd, ok, strlen(ok)) < 0)
		_exit(2);
	if (read_request(fd, req, sizeof req) <= 0) /* the create, on the kept connection */
		_exit(3);
	request_key(req, key, sizeof key);
	dprintf(report, "%s\n", key);
	close(fd); /* no answer */
	fd = accept(lfd, NULL, NULL);
	if (fd < 0 || read_request(fd, req, sizeof req) <= 0)
		_exit(4);
	request_key(req, key, sizeof key);
	dprintf(report, "%s\n", key);
	if (write(fd, made, strlen(made)) < 0)
		_exit(5);
	read_request(fd, req, sizeof req); /* until the client closes */
	_exit(0);
}

static int retry(const char *dir)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct station_client *c = NULL;
	char keys[2][300] = {}, id[64];
	int lfd, p[2], status;
	json_t *w = NULL;
	FILE *f;
	pid_t pid;

	snprintf(sa.sun_path, sizeof sa.sun_path, "%s/sock", dir);
	lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(lfd, 4) < 0 ||
	    pipe(p) < 0)
		return fail("server socket", NULL);
	pid = fork();
	if (pid == 0) {
		close(p[0]);
		serve(lfd, p[1]);
	}
	close(p[1]);
	if (station_client_new(sa.sun_path, NULL, &c) < 0)
		return fail("client", NULL);
	if (station_worker(c, &w) < 0)
		return fail("GET on the first connection", c);
	json_decref(w);
	if (exec_key(c, "w1-x", "true", NULL, id, sizeof id) < 0)
		return fail("the create retried on a new connection", c);
	f = fdopen(p[0], "r");
	if (!f || !fgets(keys[0], sizeof keys[0], f) || !fgets(keys[1], sizeof keys[1], f))
		return fail("the server saw fewer than two attempts", NULL);
	c = station_client_free(c); /* the server waits for the kept connection's end */
	waitpid(pid, &status, 0);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		return fail("the fake server failed", NULL);
	if (strcmp(id, "r-1") != 0)
		return fail("the retry's answer was not the run", NULL);
	if (strlen(keys[0]) < 2 || strcmp(keys[0], keys[1]) != 0) {
		fprintf(stderr, "idem-check: keys of the two attempts: '%s' and '%s'\n", keys[0],
			keys[1]);
		return 1;
	}
	printf("ok the library's retry carried the same key %s", keys[0]);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 4 && strcmp(argv[1], "real") == 0)
		return real(argv[2], argv[3]);
	if (argc == 3 && strcmp(argv[1], "retry") == 0)
		return retry(argv[2]);
	fprintf(stderr, "usage: idem-check real SOCKET WS | idem-check retry DIR\n");
	return 64;
}
