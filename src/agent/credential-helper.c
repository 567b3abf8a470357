/* SPDX-License-Identifier: MIT */
/* git-credential-station: git's credential helper inside the sandbox (gitcredentials(7)). git
 * runs it with an action and the request on stdin; for `get` it forwards both to the agent's
 * credential socket and prints what comes back (nothing when refused, and git goes on as if
 * no helper knew). `store` and `erase` do nothing: no credential is kept in the sandbox.
 * Exits non-zero, with a message, only when the socket cannot be reached. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "agent/credential.h"
#include "basic/cleanup.h"
#include "basic/util.h"

#define HELPER_PREFIX "git-credential-station: "
#define HELPER_TIMEOUT_SEC 20
#define HELPER_MAX_ANSWER (64 * 1024)

static int helper_connect(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct timeval tv = { .tv_sec = HELPER_TIMEOUT_SEC };
	_cleanup_close_ int fd = -1;

	if (strlen(path) >= sizeof sa.sun_path)
		return -ENAMETOOLONG;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
	if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) < 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv) < 0 ||
	    connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0)
		return -errno;
	return TAKE_FD(fd);
}

/* The action line, stdin up to its blank line or end (at most what the agent takes), and the
 * blank line that ends the request. */
static int send_request(int fd, const char *action)
{
	char line[CRED_MAX_LINE + 1];
	size_t lines = 1;
	int r = write_all(fd, action, strlen(action));

	if (r >= 0)
		r = write_all(fd, "\n", 1);
	while (r >= 0 && lines < CRED_MAX_LINES && fgets(line, sizeof line, stdin)) {
		if (strcmp(line, "\n") == 0)
			break;
		r = write_all(fd, line, strlen(line));
		lines++;
	}
	if (r >= 0)
		r = write_all(fd, "\n", 1);
	explicit_bzero(line, sizeof line);
	return r;
}

static int copy_answer(int fd)
{
	char buf[4096];
	size_t total = 0;
	int r = 0;

	for (;;) {
		ssize_t n = read(fd, buf, sizeof buf);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			r = n < 0 ? -errno : 0;
			break;
		}
		total += (size_t)n;
		if (total > HELPER_MAX_ANSWER) {
			r = -E2BIG;
			break;
		}
		r = write_all(STDOUT_FILENO, buf, (size_t)n);
		if (r < 0)
			break;
	}
	explicit_bzero(buf, sizeof buf);
	return r;
}

int cred_helper_main(int argc, char **argv)
{
	const char *path = getenv(CRED_ENV);
	_cleanup_close_ int fd = -1;
	int r;

	if (argc < 1) {
		fprintf(stderr,
			"usage: git-credential-station get|store|erase\n"
			"  (or station-agent credential get|store|erase); the request comes "
			"on stdin\n");
		return 2;
	}
	/* other actions are to be ignored (gitcredentials(7)); nothing is kept to store or
	 * erase */
	if (strcmp(argv[0], "get") != 0) {
		char buf[4096];

		ssize_t n;

		/* git writes the request (a password with `store`): take it, keep nothing */
		while ((n = read(STDIN_FILENO, buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR))
			;
		explicit_bzero(buf, sizeof buf);
		return 0;
	}
	if (!path || !*path)
		path = CRED_DEFAULT_SOCKET;
	fd = helper_connect(path);
	if (fd < 0) {
		fprintf(stderr, HELPER_PREFIX "cannot reach the credential socket \"%s\": %s\n",
			path, strerror(-fd));
		return 1;
	}
	/* the agent closes a request it refuses, maybe before it was all sent: no answer */
	signal(SIGPIPE, SIG_IGN);
	r = send_request(fd, argv[0]);
	if (r >= 0 && shutdown(fd, SHUT_WR) < 0)
		r = -errno;
	if (r == -EPIPE || r == -ECONNRESET)
		return 0;
	if (r >= 0)
		r = copy_answer(fd);
	if (r == -ECONNRESET)
		return 0;
	if (r < 0) {
		fprintf(stderr, HELPER_PREFIX "credential socket \"%s\": %s\n", path, strerror(-r));
		return 1;
	}
	return 0;
}
