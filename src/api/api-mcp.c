/* SPDX-License-Identifier: MIT */
/* POST /mcp: the Model Context Protocol's Streamable HTTP transport on a TCP listener
 * (docs/mcp.md), off unless the controller runs with --mcp.
 *
 * Before anything else a request's Origin (when it has one) and Host must name this listener
 * (its host, or a loopback name when it listens on loopback): anything else is 403, which stops
 * a web page that rebinds a name of its own to this address. Then the bearer token (401), then
 * the method: POST only (GET and DELETE are 405; there are no sessions and no server-initiated
 * stream). The server is stateless: every POST is served on its own.
 *
 * A request is served by the same MCP server as `station-sandbox mcp`, run as a child process
 * talking to this controller through its unix socket: the loop never waits on a tool call. The
 * child gets the message on its standard input (a memfd) and what it prints becomes the
 * response: JSON, or for a tools/call whose client accepts text/event-stream, an event stream
 * carrying its progress notifications before the result. A client that goes away before the
 * end stops the child (SIGTERM), which cancels the run its exec started. Notifications and
 * responses are answered 202 without a child.
 *
 * notifications/cancelled comes in a POST of its own, beside the open response of the request
 * it names: it stops that request's child the same way. JSON-RPC ids are the client's, so two
 * clients may both have a request 1 in flight: the answer to initialize carries an
 * Mcp-Session-Id (random, and nothing is kept about it: it only tells clients apart), which
 * clients send on every later request, and a cancel names the request of the same token, the
 * same Mcp-Session-Id and the same id. Without an Mcp-Session-Id, the one such request of the
 * token; when there are several, none. */

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "basic/cleanup.h"
#include "basic/json-util.h"
#include "basic/log.h"
#include "basic/util.h"
#include "api/http.h"
#include "event/event.h"

/* The most a child may print for one request: a 1 MiB file_read in base64 and a result of a
 * few thousand lines fit many times over. */
#define MCP_OUTPUT_MAX (16u * 1024 * 1024)
/* MCP server processes at once (each serves one request); beyond, 429. */
#define MCP_CHILDREN_MAX 64

static unsigned n_children; /* the loop's thread only */

struct mcp_child {
	struct mcp_child *next;	  /* in children: the requests a cancel may name */
	struct http_request *req; /* NULL once the request is gone */
	struct event_loop *loop;
	pid_t pid;
	int pidfd;
	int out_fd;
	struct event_source *out_watch, *pid_watch;
	bool sse;   /* answer as an event stream */
	char *line; /* the current line from the child */
	size_t line_len, line_cap;
	char *buf; /* what goes to the client next */
	size_t buf_start, buf_len, buf_cap;
	bool answered; /* the response line came */
	bool out_eof;
	bool exited;
	bool failed; /* too much output, or out of memory */
	bool ended;  /* everything for the client is in buf */
	/* What a notifications/cancelled must name to stop this request. */
	char token_id[AUTH_TOKEN_ID_MAX + 1];
	char *session; /* its Mcp-Session-Id; NULL: none */
	json_t *id;
	bool cancelled;
};

static struct mcp_child *children; /* the loop's thread only */

static void child_unlink(struct mcp_child *c)
{
	for (struct mcp_child **p = &children; *p; p = &(*p)->next)
		if (*p == c) {
			*p = c->next;
			return;
		}
}

static void child_free(struct mcp_child *c)
{
	child_unlink(c);
	if (c->pid > 0)
		n_children--;
	event_source_free(c->out_watch);
	event_source_free(c->pid_watch);
	if (c->out_fd >= 0)
		close(c->out_fd);
	if (c->pidfd >= 0)
		close(c->pidfd);
	free(c->line);
	free(c->buf);
	free(c->session);
	json_decref(c->id);
	free(c);
}

static int buf_add(struct mcp_child *c, const char *data, size_t n)
{
	if (c->buf_start > 0 && c->buf_start + c->buf_len + n > c->buf_cap) {
		memmove(c->buf, c->buf + c->buf_start, c->buf_len);
		c->buf_start = 0;
	}
	if (c->buf_len + n > c->buf_cap) {
		size_t want = MAX(c->buf_len + n, c->buf_cap * 2);
		char *p;

		if (want > MCP_OUTPUT_MAX + 64)
			return -E2BIG;
		p = realloc(c->buf, want);
		if (!p)
			return -ENOMEM;
		c->buf = p;
		c->buf_cap = want;
	}
	memcpy(c->buf + c->buf_start + c->buf_len, data, n);
	c->buf_len += n;
	return 0;
}

/* One line the child printed: a notification (kept for an event stream), or the response. */
static int child_line(struct mcp_child *c, const char *line, size_t n)
{
	_cleanup_json_ json_t *msg = NULL;
	bool response;
	int r = 0;

	if (c->answered || n == 0)
		return 0;
	msg = json_loadb(line, n, 0, NULL);
	if (!msg)
		return 0; /* not the protocol: nothing for the client */
	response = !json_object_get(msg, "method");
	if (!response && !c->sse)
		return 0; /* progress has nowhere to go in a JSON answer */
	if (c->sse)
		r = buf_add(c, "event: message\ndata: ", 21);
	if (r >= 0)
		r = buf_add(c, line, n);
	if (r >= 0 && c->sse)
		r = buf_add(c, "\n\n", 2);
	if (r >= 0 && response) {
		c->answered = true;
		c->ended = true;
	}
	return r;
}

static void child_wake(struct mcp_child *c)
{
	if (c->req)
		http_request_resume(c->req);
}

static void child_fail(struct mcp_child *c, const char *why)
{
	static const char err[] =
		"{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32603,\"message\":\"%s\"}}";
	char text[256];
	int n = snprintf(text, sizeof text, err, why);

	if (!c->answered && !c->failed && n > 0)
		(void)child_line(c, text, (size_t)n);
	c->failed = true;
	c->ended = true;
}

/* Frees the child once it has exited and its output ended, the request being gone. */
static void child_maybe_free(struct mcp_child *c)
{
	if (!c->req && c->exited && c->out_eof)
		child_free(c);
}

static int on_child_output(struct event_source *src, int fd, uint32_t revents, void *userdata)
{
	struct mcp_child *c = userdata;
	char chunk[65536];
	ssize_t n;

	for (;;) {
		n = read(fd, chunk, sizeof chunk);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			break;
		if (n <= 0) {
			c->out_eof = true;
			event_source_free(TAKE_PTR(c->out_watch));
			if (c->answered)
				break;
			/* A cancelled request is not answered: its event stream just ends. */
			if (c->cancelled && c->sse)
				c->ended = true;
			else
				child_fail(c, c->cancelled ?
						      "the request was cancelled" :
						      "the MCP server ended without an answer");
			break;
		}
		for (ssize_t i = 0; i < n; i++) {
			if (chunk[i] == '\n') {
				if (child_line(c, c->line, c->line_len) < 0)
					child_fail(c, "the answer is too large");
				c->line_len = 0;
				continue;
			}
			if (c->line_len == c->line_cap) {
				size_t want = c->line_cap ? c->line_cap * 2 : 65536;
				char *p = want <= MCP_OUTPUT_MAX ? realloc(c->line, want) : NULL;

				if (!p) {
					child_fail(c, "the answer is too large");
					kill(c->pid, SIGKILL);
					c->line_len = 0;
					break;
				}
				c->line = p;
				c->line_cap = want;
			}
			c->line[c->line_len++] = chunk[i];
		}
	}
	child_wake(c);
	child_maybe_free(c);
	return 0;
}

static int on_child_exit(struct event_source *src, int fd, uint32_t revents, void *userdata)
{
	struct mcp_child *c = userdata;

	if (waitpid(c->pid, NULL, WNOHANG) != c->pid)
		return 0;
	c->exited = true;
	event_source_free(TAKE_PTR(c->pid_watch));
	child_maybe_free(c);
	return 0;
}

/* The request's state: the child outlives a request that goes away until it has exited. */
static void state_free(void *userdata)
{
	struct mcp_child *c = userdata;

	c->req = NULL;
	if (!c->exited)
		(void)syscall(SYS_pidfd_send_signal, c->pidfd, SIGTERM, NULL, 0);
	child_maybe_free(c);
}

static ssize_t mcp_read(void *cls, uint64_t pos, char *out, size_t max)
{
	struct http_request *req = cls;
	struct mcp_child *c = http_request_state(req);
	size_t n;

	if (!c || http_request_gone(req))
		return MHD_CONTENT_READER_END_WITH_ERROR;
	if (c->buf_len == 0) {
		if (c->ended)
			return MHD_CONTENT_READER_END_OF_STREAM;
		return http_request_suspend(req, NULL) < 0 ? MHD_CONTENT_READER_END_WITH_ERROR : 0;
	}
	n = MIN(max, c->buf_len);
	memcpy(out, c->buf + c->buf_start, n);
	c->buf_start += n;
	c->buf_len -= n;
	return (ssize_t)n;
}

/* The message on a memfd, for the child's standard input. */
static int message_fd(const void *body, size_t len)
{
	_cleanup_close_ int fd = memfd_create("mcp-request", MFD_CLOEXEC);
	const char *p = body;

	if (fd < 0)
		return negative_errno();
	while (len > 0) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -EIO;
		p += n;
		len -= (size_t)n;
	}
	if (write(fd, "\n", 1) != 1 || lseek(fd, 0, SEEK_SET) < 0)
		return -EIO;
	return TAKE_FD(fd);
}

static int child_spawn(struct mcp_child *c, const char *const *argv, char *const *envp, int in_fd)
{
	int out[2];

	if (pipe2(out, O_CLOEXEC) < 0)
		return negative_errno();
	c->pid = fork();
	if (c->pid > 0)
		n_children++;
	if (c->pid < 0) {
		close(out[0]);
		close(out[1]);
		return negative_errno();
	}
	if (c->pid == 0) {
		/* the SIGTERM that cancels the child's request must reach it */
		signals_reset_for_exec();
		if (dup2(in_fd, STDIN_FILENO) < 0 || dup2(out[1], STDOUT_FILENO) < 0)
			_exit(127);
		execve(argv[0], (char *const *)argv, (char *const *)envp);
		_exit(127);
	}
	close(out[1]);
	c->out_fd = out[0];
	(void)fcntl(c->out_fd, F_SETFL, O_NONBLOCK);
	c->pidfd = (int)syscall(SYS_pidfd_open, c->pid, 0);
	if (c->pidfd < 0) {
		int r = negative_errno();

		kill(c->pid, SIGKILL);
		waitpid(c->pid, NULL, 0);
		return r;
	}
	return 0;
}

static bool accepts_event_stream(struct http_request *req)
{
	const char *accept = http_request_header(req, "Accept");

	return accept && strcasestr(accept, "text/event-stream");
}

static bool same_session(const char *a, const char *b)
{
	return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

static bool child_named(const struct mcp_child *c, const struct auth_principal *who,
			const char *session, const json_t *id)
{
	return c->req && !c->answered && !c->cancelled && c->pidfd >= 0 &&
	       strcmp(c->token_id, who->token_id) == 0 && same_session(c->session, session) &&
	       json_equal(c->id, (json_t *)id);
}

/* notifications/cancelled: SIGTERM to the child serving the request it names, which cancels
 * the run an exec started and ends without an answer. */
static void cancel_request(struct http_request *req, const json_t *msg)
{
	const json_t *id = json_object_get(json_object_get(msg, "params"), "requestId");
	const char *session = http_request_header(req, "Mcp-Session-Id");
	const struct auth_principal *who = http_request_principal(req);
	unsigned n = 0;

	if (!json_is_string(id) && !json_is_integer(id))
		return;
	for (struct mcp_child *c = children; c; c = c->next)
		n += child_named(c, who, session, id);
	if (n == 0 || (n > 1 && !session)) {
		log_debug("mcp cancel names no request in flight", "matches",
			  n > 1 ? "many" : "none", NULL);
		return;
	}
	for (struct mcp_child *c = children; c; c = c->next)
		if (child_named(c, who, session, id)) {
			c->cancelled = true;
			(void)syscall(SYS_pidfd_send_signal, c->pidfd, SIGTERM, NULL, 0);
		}
}

/* A new Mcp-Session-Id: 128 random bits in hex. */
static int session_new(char ret[33])
{
	uint8_t b[16];
	int r = random_bytes(b, sizeof b);

	if (r < 0)
		return r;
	for (size_t i = 0; i < sizeof b; i++)
		snprintf(ret + 2 * i, 3, "%02x", b[i]);
	return 0;
}

static int reply_accepted(struct http_request *req)
{
	struct MHD_Response *resp =
		MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
	int r;

	if (!resp)
		return -ENOMEM;
	r = http_reply_response(req, 202, resp);
	MHD_destroy_response(resp);
	return r;
}

#define MCP_ARGV_MAX 64

/* A scoped token's request is served with that token: the child reaches this controller over
 * the listener the request came in on, not the unix socket (which is admin), so every tool
 * call is held to the token's scope and tenant. "--socket PATH" becomes "--url http://HOST"
 * and the token goes in the child's environment. */
static int scoped_argv(struct http_request *req, const char *const *argv, const char *listen_host,
		       const char **ret_argv, char **ret_url, char **ret_env)
{
	const char *h = http_request_header(req, "Authorization");
	size_t k = 0;

	if (!h || strncasecmp(h, "Bearer ", 7) != 0 || !listen_host)
		return -EACCES;
	h += 7;
	while (*h == ' ')
		h++;
	if (asprintf(ret_url, "http://%s", listen_host) < 0) {
		*ret_url = NULL;
		return -ENOMEM;
	}
	if (asprintf(ret_env, "STATION_TOKEN=%s", h) < 0) {
		*ret_env = NULL;
		return -ENOMEM;
	}
	for (size_t i = 0; argv[i] && k < MCP_ARGV_MAX - 1; i++) {
		if (strcmp(argv[i], "--socket") == 0 && argv[i + 1]) {
			ret_argv[k++] = "--url";
			ret_argv[k++] = *ret_url;
			i++;
			continue;
		}
		ret_argv[k++] = argv[i];
	}
	ret_argv[k] = NULL;
	return 0;
}

static void erase_free(char **p)
{
	if (*p) {
		explicit_bzero(*p, strlen(*p));
		free(*p);
	}
}

int api_mcp(struct http_request *req, const char *const *argv, const char *listen_host)
{
	static const char *const admin_env[] = { "PATH=/usr/local/bin:/usr/bin:/bin", NULL };
	_cleanup_free_ char *url = NULL;
	_cleanup_(erase_free) char *token_env = NULL;
	const char *scoped[MCP_ARGV_MAX + 2];
	const char *env[3] = { "PATH=/usr/local/bin:/usr/bin:/bin", NULL, NULL };
	_cleanup_json_ json_t *msg = NULL;
	_cleanup_free_ char *line = NULL;
	_cleanup_close_ int in_fd = -1;
	struct MHD_Response *resp;
	struct mcp_child *c;
	const char *method;
	char session[33];
	size_t len = 0;
	const void *body = http_request_body(req, &len);
	json_error_t e;
	int r;

	msg = body ? json_loadb(body, len, JSON_REJECT_DUPLICATES, &e) : NULL;
	if (!msg)
		return http_reply_json(req, 400,
				       json_pack("{s:s,s:n,s:{s:i,s:s}}", "jsonrpc", "2.0", "id",
						 "error", "code", -32700, "message",
						 body ? e.text : "an empty body is not JSON-RPC"));
	method = json_string_value(json_object_get(msg, "method"));
	if (json_is_object(msg) && (!json_object_get(msg, "id") || !method)) {
		if (method && strcmp(method, "notifications/cancelled") == 0)
			cancel_request(req, msg);
		return reply_accepted(req); /* a notification or a response */
	}
	if (n_children >= MCP_CHILDREN_MAX)
		return http_reply_status(req, 429, NULL,
					 "%u MCP requests are being served; try again later",
					 n_children);
	/* One line for the child, whatever line breaks the client's JSON had. */
	line = json_dumps(msg, JSON_COMPACT);
	if (!line)
		return http_reply_status(req, 500, NULL, "out of memory");
	in_fd = message_fd(line, strlen(line));
	c = calloc(1, sizeof *c);
	if (in_fd < 0 || !c) {
		free(c);
		return http_reply_status(req, 500, NULL, "cannot start the MCP server: %s",
					 strerror(in_fd < 0 ? -in_fd : ENOMEM));
	}
	c->req = req;
	c->loop = http_request_loop(req);
	c->pidfd = c->out_fd = -1;
	c->id = json_incref(json_object_get(msg, "id"));
	snprintf(c->token_id, sizeof c->token_id, "%s", http_request_principal(req)->token_id);
	if (http_request_header(req, "Mcp-Session-Id")) {
		c->session = strdup(http_request_header(req, "Mcp-Session-Id"));
		if (!c->session) {
			child_free(c);
			return http_reply_status(req, 500, NULL, "out of memory");
		}
	}
	c->sse = method && strcmp(method, "tools/call") == 0 && accepts_event_stream(req);
	if (http_request_principal(req)->scope != AUTH_SCOPE_ADMIN) {
		r = scoped_argv(req, argv, listen_host, scoped, &url, &token_env);
		if (r < 0) {
			child_free(c);
			return http_reply_status(req, 500, NULL, "cannot start the MCP server: %s",
						 strerror(-r));
		}
		env[1] = token_env;
		r = child_spawn(c, scoped, (char *const *)env, in_fd);
	} else {
		r = child_spawn(c, argv, (char *const *)admin_env, in_fd);
	}
	if (r >= 0)
		r = event_add_io(c->loop, &c->out_watch, c->out_fd, EPOLLIN, on_child_output, c);
	if (r >= 0)
		r = event_add_io(c->loop, &c->pid_watch, c->pidfd, EPOLLIN, on_child_exit, c);
	if (r < 0) {
		if (c->pid > 0 && c->pidfd >= 0) {
			kill(c->pid, SIGKILL);
			waitpid(c->pid, NULL, 0);
		}
		child_free(c);
		return http_reply_status(req, 500, NULL, "cannot start the MCP server: %s",
					 strerror(-r));
	}
	c->next = children;
	children = c;
	http_request_set_state(req, c, state_free);
	resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 64 * 1024, mcp_read, req, NULL);
	if (!resp)
		return -ENOMEM;
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
				c->sse ? "text/event-stream" : "application/json");
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
	if (method && strcmp(method, "initialize") == 0 && session_new(session) >= 0)
		MHD_add_response_header(resp, "Mcp-Session-Id", session);
	r = http_reply_response(req, 200, resp);
	MHD_destroy_response(resp);
	return r;
}

/* The host part of "host", "host:port", "[v6]:port", lower-cased into ret. */
static bool host_part(const char *s, size_t n, char *ret, size_t size)
{
	size_t k;

	if (n > 0 && s[0] == '[') {
		const char *end = memchr(s, ']', n);

		if (!end)
			return false;
		k = (size_t)(end - s) + 1;
	} else {
		const char *colon = memchr(s, ':', n);

		k = colon ? (size_t)(colon - s) : n;
	}
	if (k == 0 || k >= size)
		return false;
	for (size_t i = 0; i < k; i++)
		ret[i] = (char)(s[i] >= 'A' && s[i] <= 'Z' ? s[i] + 32 : s[i]);
	ret[k] = '\0';
	return true;
}

/* "localhost", "[::1]" or an IPv4 literal in 127.0.0.0/8 (not a name that starts like one). */
static bool is_loopback(const char *host)
{
	struct in_addr a;

	if (strcmp(host, "localhost") == 0 || strcmp(host, "[::1]") == 0 ||
	    strcmp(host, "::1") == 0)
		return true;
	return inet_pton(AF_INET, host, &a) == 1 && (ntohl(a.s_addr) >> 24) == 127;
}

/* A Host or Origin host this listener answers to: its own address, or any loopback name when
 * it listens on loopback. */
static bool host_allowed(const char *listen_host, const char *const *more, const char *host)
{
	char own[300];

	for (size_t i = 0; more && more[i]; i++)
		if (strcasecmp(more[i], host) == 0)
			return true;
	if (!host_part(listen_host, strlen(listen_host), own, sizeof own))
		return false;
	if (strcmp(own, host) == 0)
		return true;
	return is_loopback(own) && is_loopback(host);
}

int api_mcp_check(struct http_request *req, const char *listen_host, const char *const *more,
		  const char **ret_why)
{
	const char *host = http_request_header(req, "Host");
	const char *origin = http_request_header(req, "Origin");
	char h[300];

	if (!host || !host_part(host, strlen(host), h, sizeof h) ||
	    !host_allowed(listen_host, more, h)) {
		*ret_why = "Host does not name this listener";
		return -EPERM;
	}
	if (origin) {
		const char *p = strstr(origin, "://");

		if (!p || !host_part(p + 3, strcspn(p + 3, "/"), h, sizeof h) ||
		    !host_allowed(listen_host, more, h)) {
			*ret_why = "Origin is not this listener";
			return -EPERM;
		}
	}
	return 0;
}
