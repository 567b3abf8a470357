/* SPDX-License-Identifier: MIT */
/* The HTTP layer end to end on a unix socket: http.c + router + api-* + sse.c against
 * fake-manager.c, driven by curl(1) (and a raw socket client for a slow reader) in child
 * processes while the test runs the event loop. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "basic/cleanup.h"
#include "basic/util.h"
#include "api/http.h"
#include "api/web.h"
#include "event/event.h"
#include "fake-manager.h"

extern char **environ;

static struct event_loop *loop;
static struct http_server *server;
static char dir[64];
static char sock_path[100];

/* userdata: the admin secret; "r3ad-token" is a read token, "old-token" an expired one,
 * "gone-token" a revoked one. */
static int check_token(void *userdata, const char *token, size_t n, struct auth_principal *ret)
{
	if (strcmp(token, userdata) == 0) {
		*ret = auth_admin_principal;
		return 0;
	}
	if (strcmp(token, "r3ad-token") == 0) {
		*ret = (struct auth_principal){ .token_id = "tok-read",
						.name = "reader",
						.scope = AUTH_SCOPE_READ };
		return 0;
	}
	if (strcmp(token, "gone-token") == 0)
		return -EKEYREVOKED;
	return strcmp(token, "old-token") == 0 ? -EKEYEXPIRED : -EACCES;
}

static void start_server(const struct http_config *cfg)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd;

	snprintf(dir, sizeof dir, "/tmp/test-http-XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
	snprintf(sock_path, sizeof sock_path, "%s/station.sock", dir);
	snprintf(sa.sun_path, sizeof sa.sun_path, "%s", sock_path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	cr_assert_geq(fd, 0);
	cr_assert_eq(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
	cr_assert_eq(listen(fd, 128), 0);
	cr_assert_eq(event_loop_new(&loop), 0);
	fake_manager_setup(loop);
	cr_assert_eq(http_server_new(loop, NULL, fd, cfg, &server), 0); /* takes fd */
	cr_assert_eq(fcntl(fd, F_GETFD), -1);
}

static void start_default(void)
{
	struct http_config cfg = { .max_wait_ms = 500 };

	start_server(&cfg);
}

static void stop_server(void)
{
	char cmd[128];

	http_server_free(server);
	server = NULL;
	event_loop_free(loop);
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	cr_assert_eq(system(cmd), 0);
}

static void pump_for(uint64_t ms)
{
	uint64_t until = now_usec() + ms * 1000;

	while (now_usec() < until)
		cr_assert_geq(event_loop_run_once(loop, 5), 0);
}

static uint64_t cpu_usec(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (uint64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000 +
	       (uint64_t)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

/* A suspended request must cost nothing while it waits: no polling of MHD. */
static void pump_idle(uint64_t ms)
{
	uint64_t cpu = cpu_usec();

	pump_for(ms);
	cr_assert_lt(cpu_usec() - cpu, ms * 1000 / 5, "busy while waiting: %lu us of CPU in %lu ms",
		     cpu_usec() - cpu, ms);
}

/* Runs the loop until the child exits; returns its wait status. */
static int pump_until_exit(pid_t pid)
{
	int status;

	for (;;) {
		cr_assert_geq(event_loop_run_once(loop, 5), 0);
		if (waitpid(pid, &status, WNOHANG) == pid)
			return status;
	}
}

struct reply {
	int status;
	char *headers;
	char *body;
	uint64_t elapsed_ms;
};

static void reply_done(struct reply *r)
{
	free(r->headers);
	free(r->body);
}

static char *slurp(const char *path)
{
	char *data = NULL;
	size_t n;

	if (read_file(path, 64 * 1024 * 1024, &data, &n) < 0)
		return strdup("");
	return data;
}

static pid_t spawn_curl(const char *method, const char *path, const char *const *args)
{
	char url[8192], out[128], hdr[128], code[128];
	const char *argv[64];
	size_t n = 0;
	posix_spawn_file_actions_t fa;
	pid_t pid;

	snprintf(url, sizeof url, "http://localhost%s", path);
	snprintf(out, sizeof out, "%s/body", dir);
	snprintf(hdr, sizeof hdr, "%s/headers", dir);
	snprintf(code, sizeof code, "%s/code", dir);
	argv[n++] = "curl";
	argv[n++] = "-sS";
	argv[n++] = "--unix-socket";
	argv[n++] = sock_path;
	argv[n++] = "-o";
	argv[n++] = out;
	argv[n++] = "-D";
	argv[n++] = hdr;
	argv[n++] = "-w";
	argv[n++] = "%{http_code}";
	argv[n++] = "-X";
	argv[n++] = method;
	for (; args && *args; args++)
		argv[n++] = *args;
	argv[n++] = url;
	argv[n] = NULL;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 1, code, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	cr_assert_eq(posix_spawnp(&pid, "curl", &fa, NULL, (char **)argv, environ), 0);
	posix_spawn_file_actions_destroy(&fa);
	return pid;
}

static struct reply http(const char *method, const char *path, const char *const *args)
{
	char p[128];
	struct reply r = {};
	_cleanup_free_ char *code = NULL;
	uint64_t start = now_usec();
	pid_t pid = spawn_curl(method, path, args);

	pump_until_exit(pid);
	r.elapsed_ms = (now_usec() - start) / 1000;
	snprintf(p, sizeof p, "%s/code", dir);
	code = slurp(p);
	r.status = atoi(code);
	snprintf(p, sizeof p, "%s/headers", dir);
	r.headers = slurp(p);
	snprintf(p, sizeof p, "%s/body", dir);
	r.body = slurp(p);
	return r;
}

static struct reply post_json(const char *path, const char *body)
{
	const char *args[] = { "-H", "Content-Type: application/json", "--data-binary", body,
			       NULL };

	return http("POST", path, args);
}

static json_t *body_json(const struct reply *r)
{
	json_t *j = json_loads(r->body, 0, NULL);

	cr_assert_not_null(j, "not JSON: %s", r->body);
	return j;
}

static void assert_error(const struct reply *r, int status, const char *code, const char *field)
{
	json_t *j, *err;

	cr_assert_eq(r->status, status, "status %d, body %s", r->status, r->body);
	cr_assert(strcasestr(r->headers, "Content-Type: application/json"), "%s", r->headers);
	j = body_json(r);
	err = json_object_get(j, "error");
	cr_assert_str_eq(json_string_value(json_object_get(err, "code")), code);
	cr_assert_not_null(json_string_value(json_object_get(err, "message")));
	if (field)
		cr_assert_str_eq(json_string_value(json_object_get(err, "field")), field);
	else
		cr_assert_null(json_object_get(err, "field"));
	json_decref(j);
}

static const char *string_at(json_t *j, const char *key)
{
	return json_string_value(json_object_get(j, key));
}

/* Starts a run through the API; returns its id (static buffer). */
static const char *start_run(const char *command)
{
	static char id[32];
	char body[128];
	struct reply r;
	json_t *j;

	snprintf(body, sizeof body, "{\"command\":\"%s\"}", command);
	r = post_json("/v1/workspaces/w1-test/commands", body);
	cr_assert_eq(r.status, 201, "%d %s", r.status, r.body);
	j = body_json(&r);
	snprintf(id, sizeof id, "%s", string_at(j, "id"));
	json_decref(j);
	reply_done(&r);
	return id;
}

/* ---- auth --------------------------------------------------------------------------------- */

Test(http, bearer_token_required)
{
	struct http_config cfg = { .require_token = true,
				   .authenticate = check_token,
				   .token_userdata = "s3cret" };
	const char *wrong[] = { "-H", "Authorization: Bearer nope", NULL };
	const char *basic[] = { "-H", "Authorization: Basic czNjcmV0", NULL };
	const char *right[] = { "-H", "Authorization: Bearer s3cret", NULL };
	const char *lower[] = { "-H", "Authorization: bearer s3cret", NULL };
	const char *post[] = { "-H",
			       "Authorization: Bearer nope",
			       "-H",
			       "Content-Type: text/plain",
			       "--data-binary",
			       "{",
			       NULL };
	struct reply r;

	start_server(&cfg);
	r = http("GET", "/v1/ready", NULL);
	assert_error(&r, 401, "unauthorized", NULL);
	cr_assert(strcasestr(r.headers, "WWW-Authenticate: Bearer"), "%s", r.headers);
	reply_done(&r);
	r = http("GET", "/v1/ready", wrong);
	assert_error(&r, 401, "unauthorized", NULL);
	reply_done(&r);
	r = http("GET", "/v1/ready", basic);
	assert_error(&r, 401, "unauthorized", NULL);
	reply_done(&r);
	/* before routing and before the body: no 404, no 415 */
	r = http("GET", "/v1/nothing", wrong);
	assert_error(&r, 401, "unauthorized", NULL);
	reply_done(&r);
	r = http("POST", "/v1/workspaces", post);
	assert_error(&r, 401, "unauthorized", NULL);
	reply_done(&r);
	/* positive controls */
	r = http("GET", "/v1/ready", right);
	cr_assert_eq(r.status, 200, "%s", r.body);
	reply_done(&r);
	r = http("GET", "/v1/ready", lower);
	cr_assert_eq(r.status, 200, "%s", r.body);
	reply_done(&r);
	stop_server();
}

Test(http, read_token_only_reads)
{
	struct http_config cfg = { .require_token = true,
				   .authenticate = check_token,
				   .token_userdata = "s3cret" };
	const char *reader[] = { "-H", "Authorization: Bearer r3ad-token", NULL };
	const char *admin[] = { "-H", "Authorization: Bearer s3cret", NULL };
	const char *old[] = { "-H", "Authorization: Bearer old-token", NULL };
	const char *gone[] = { "-H", "Authorization: Bearer gone-token", NULL };
	const char *unknown[] = { "-H", "Authorization: Bearer n0-such-token", NULL };
	const char *reader_head[] = { "--head", "-H", "Authorization: Bearer r3ad-token", NULL };
	struct reply r;

	start_server(&cfg);
	r = http("GET", "/v1/ready", reader);
	cr_assert_eq(r.status, 200, "%s", r.body);
	reply_done(&r);
	r = http("DELETE", "/v1/workspaces/w1-a", reader);
	assert_error(&r, 403, "forbidden", NULL);
	cr_assert(strstr(r.body, "read token"), "%s", r.body);
	reply_done(&r);
	r = http("GET", "/v1/tokens", reader);
	assert_error(&r, 403, "forbidden", NULL);
	cr_assert(strstr(r.body, "a read token cannot manage tokens"), "%s", r.body);
	reply_done(&r);
	r = http("GET", "/v1/audit", reader);
	assert_error(&r, 403, "forbidden", NULL);
	reply_done(&r);
	r = http("GET", "/v1/ready", old);
	assert_error(&r, 401, "unauthorized", NULL);
	cr_assert(strstr(r.body, "expired"), "%s", r.body);
	reply_done(&r);
	r = http("GET", "/v1/ready", gone);
	assert_error(&r, 401, "unauthorized", NULL);
	cr_assert(strstr(r.body, "the bearer token was revoked"), "%s", r.body);
	reply_done(&r);
	/* an unknown token is not said to be revoked, nor expired */
	r = http("GET", "/v1/ready", unknown);
	assert_error(&r, 401, "unauthorized", NULL);
	cr_assert(strstr(r.body, "a valid bearer token is required"), "%s", r.body);
	cr_assert(!strstr(r.body, "revoked") && !strstr(r.body, "expired"), "%s", r.body);
	reply_done(&r);
	/* a read token may HEAD wherever it may GET; a POST stays refused */
	r = http("HEAD", "/v1/ready", reader_head);
	cr_assert_eq(r.status, 200, "%s", r.headers);
	reply_done(&r);
	r = http("POST", "/v1/workspaces/w1-a/restart", reader);
	assert_error(&r, 403, "forbidden", NULL);
	reply_done(&r);
	/* positive control: the admin token passes the scope check (the fake manager's 404) */
	r = http("DELETE", "/v1/workspaces/w1-a", admin);
	cr_assert_neq(r.status, 403, "%s", r.body);
	cr_assert_neq(r.status, 401, "%s", r.body);
	reply_done(&r);
	stop_server();
}

/* Pause answers at once, resume once its operation ends; while paused a command is 409 with
 * the code "paused" (not "conflict"), and after the resume the same command is 201. */
Test(http, pause_resume_and_the_paused_refusal)
{
	struct reply r;
	json_t *j;

	start_default();
	r = http("POST", "/v1/workspaces/w1-test/pause", NULL);
	cr_assert_eq(r.status, 200, "%d %s", r.status, r.body);
	j = body_json(&r);
	cr_assert_str_eq(string_at(j, "state"), "paused");
	cr_assert_not_null(string_at(j, "pausedAt"));
	json_decref(j);
	reply_done(&r);
	r = post_json("/v1/workspaces/w1-test/commands", "{\"command\":\"echo\"}");
	assert_error(&r, 409, "paused", NULL);
	cr_assert(strstr(r.body, "is paused"), "%s", r.body);
	reply_done(&r);
	r = http("POST", "/v1/workspaces/w1-test/resume", NULL);
	cr_assert_eq(r.status, 200, "%d %s", r.status, r.body);
	j = body_json(&r);
	cr_assert_str_eq(string_at(j, "state"), "ready");
	json_decref(j);
	reply_done(&r);
	r = post_json("/v1/workspaces/w1-test/commands", "{\"command\":\"echo\"}");
	cr_assert_eq(r.status, 201, "%d %s", r.status, r.body);
	reply_done(&r);
	r = http("POST", "/v1/workspaces/w1-nope/pause", NULL);
	assert_error(&r, 404, "not_found", NULL);
	reply_done(&r);
	stop_server();
}

Test(http, unix_socket_needs_no_token)
{
	struct reply r;
	json_t *j;

	start_default();
	r = http("GET", "/v1/ready", NULL);
	cr_assert_eq(r.status, 200);
	cr_assert(strcasestr(r.headers, "Content-Type: application/json"));
	j = body_json(&r);
	cr_assert(json_is_true(json_object_get(j, "ready")));
	json_decref(j);
	reply_done(&r);

	r = http("GET", "/v1/worker", NULL);
	cr_assert_eq(r.status, 200);
	j = body_json(&r);
	cr_assert_eq(json_integer_value(json_object_get(json_object_get(j, "limits"), "maxWaitMs")),
		     500);
	cr_assert_eq(
		json_integer_value(json_object_get(json_object_get(j, "limits"), "maxBodyBytes")),
		2097152);
	json_decref(j);
	reply_done(&r);
	stop_server();
}

/* ---- the connection table ---------------------------------------------------------------- */

static int idle_connection(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	cr_assert_geq(fd, 0);
	snprintf(sa.sun_path, sizeof sa.sun_path, "%s", sock_path);
	cr_assert_eq(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
	return fd;
}

static json_int_t connections_field(const char *key)
{
	struct reply r = http("GET", "/v1/worker", NULL);
	json_t *j;
	json_int_t v;

	cr_assert_eq(r.status, 200, "%d %s", r.status, r.body);
	j = body_json(&r);
	v = json_integer_value(json_object_get(json_object_get(j, "connections"), key));
	json_decref(j);
	reply_done(&r);
	return v;
}

Test(http, connection_table_full_is_503_at_once)
{
	struct http_config cfg = { .max_wait_ms = 500, .max_connections = 4 };
	int idle[4];
	struct reply r;

	start_server(&cfg);
	for (int i = 0; i < 2; i++)
		idle[i] = idle_connection();
	/* accepted in order: the two idle ones, then curl's */
	cr_assert_eq(connections_field("open"), 3);
	cr_assert_eq(connections_field("limit"), 4);
	idle[2] = idle_connection();
	idle[3] = idle_connection();
	r = http("GET", "/v1/ready", NULL);
	assert_error(&r, 503, "unavailable", NULL);
	cr_assert(strcasestr(r.headers, "Retry-After: 1"), "%s", r.headers);
	cr_assert(strstr(r.body, "too many connections (limit 4)"), "%s", r.body);
	reply_done(&r);
	/* places free again: served (positive control), once the loop has seen the closes */
	close(idle[3]);
	close(idle[2]);
	for (int i = 0; i < 200; i++) {
		r = http("GET", "/v1/ready", NULL);
		if (r.status == 200)
			break;
		reply_done(&r);
		r.status = 0;
		pump_for(20);
	}
	cr_assert_eq(r.status, 200, "still refused with two places free");
	reply_done(&r);
	cr_assert_geq(connections_field("refused"), 1);
	close(idle[1]);
	close(idle[0]);
	stop_server();
}

/* ---- routing ------------------------------------------------------------------------------ */

Test(http, not_found_and_method_not_allowed)
{
	struct reply r;

	start_default();
	r = http("GET", "/v1/nothing", NULL);
	assert_error(&r, 404, "not_found", NULL);
	reply_done(&r);
	r = http("GET", "/v1/workspaces/w1-nope", NULL);
	assert_error(&r, 404, "not_found", NULL);
	reply_done(&r);
	r = http("DELETE", "/v1/workspaces", NULL);
	assert_error(&r, 405, "method_not_allowed", NULL);
	cr_assert(strstr(r.headers, "Allow: GET, HEAD, POST"), "%s", r.headers);
	reply_done(&r);
	r = http("PUT", "/v1/workspaces/w1-test/commands/r-1/cancel", NULL);
	assert_error(&r, 405, "method_not_allowed", NULL);
	cr_assert(strstr(r.headers, "Allow: POST"), "%s", r.headers);
	reply_done(&r);
	stop_server();
}

/* ---- bodies ------------------------------------------------------------------------------- */

/* Without a worker list "placement":"any" is this worker; any other value is 400 naming it. */
Test(http, workspace_create_placement)
{
	struct reply r;

	start_default();
	r = post_json("/v1/workspaces", "{\"placement\":\"w2\"}");
	assert_error(&r, 400, "invalid_argument", "placement");
	reply_done(&r);
	r = post_json("/v1/workspaces", "{\"placement\":true}");
	assert_error(&r, 400, "invalid_argument", "placement");
	reply_done(&r);
	r = post_json("/v1/workspaces", "{\"placement\":\"any\",\"adapter\":\"host\"}");
	cr_assert_eq(r.status, 201, "%s", r.body);
	reply_done(&r);
	stop_server();
}

Test(http, workspace_create_is_201)
{
	struct reply r;
	json_t *j;

	start_default();
	r = http("POST", "/v1/workspaces", NULL); /* no body: all defaults */
	cr_assert_eq(r.status, 201, "%s", r.body);
	j = body_json(&r);
	cr_assert_str_eq(string_at(j, "id"), "w1-new");
	json_decref(j);
	reply_done(&r);
	r = post_json("/v1/workspaces", "{\"adapter\":\"host\",\"env\":{\"A\":\"b\"}}");
	cr_assert_eq(r.status, 201, "%s", r.body);
	reply_done(&r);
	r = post_json("/v1/workspaces", "{\"network\":\"bridge\"}");
	cr_assert_eq(r.status, 201, "%s", r.body);
	j = body_json(&r);
	cr_assert_str_eq(string_at(j, "network"), "bridge");
	json_decref(j);
	reply_done(&r);
	r = post_json("/v1/workspaces", "{\"network\":\"restricted\",\"egress\":{\"allow\":[{"
					"\"domain\":\"github.com\"}]}}");
	cr_assert_eq(r.status, 201, "%s", r.body);
	cr_assert(strstr(r.body, "\"egress\":{\"allow\":[{\"domain\":\"github.com\"}]}"), "%s",
		  r.body);
	reply_done(&r);
	r = post_json("/v1/workspaces", "{\"network\":\"bridge\",\"egress\":{}}");
	assert_error(&r, 400, "invalid_argument", "egress");
	reply_done(&r);
	r = post_json("/v1/workspaces", "{\"adapter\":\"host\",\"image\":\"" FAKE_IMAGE_USED "\"}");
	assert_error(&r, 400, "invalid_argument", "image");
	reply_done(&r);
	r = post_json("/v1/workspaces",
		      "{\"adapter\":\"container\",\"image\":\"busybox@" FAKE_IMAGE_USED
		      "\",\"seccompProfile\":\"/p.json\",\"network\":\"none\"}");
	cr_assert_eq(r.status, 201, "%s", r.body);
	j = body_json(&r);
	cr_assert_str_eq(string_at(j, "adapter"), "container");
	cr_assert_str_eq(string_at(j, "image"), "busybox@" FAKE_IMAGE_USED);
	cr_assert_str_eq(string_at(j, "seccompProfile"), "/p.json");
	cr_assert_str_eq(string_at(j, "network"), "none");
	json_decref(j);
	reply_done(&r);
	r = http("DELETE", "/v1/workspaces/w1-test", NULL);
	cr_assert_eq(r.status, 200);
	cr_assert_str_eq(r.body, "{\"id\":\"w1-test\",\"state\":\"deleted\"}");
	reply_done(&r);
	r = http("GET", "/v1/workspaces", NULL);
	cr_assert_eq(r.status, 200);
	cr_assert(strncmp(r.body, "{\"workspaces\":[", 15) == 0, "%s", r.body);
	reply_done(&r);
	stop_server();
}

static struct reply post_keyed(const char *path, const char *key, const char *body)
{
	char header[512];
	const char *args[] = {
		"-H", "Content-Type: application/json", "-H", header, "--data-binary", body, NULL
	};

	snprintf(header, sizeof header, "Idempotency-Key: %s", key);
	return http("POST", path, args);
}

Test(http, idempotency_key)
{
	char long_key[300];
	struct reply r;
	json_t *j;
	char first[32];

	start_default();
	/* The same key and body: the run the first request started, and no second one. */
	r = post_keyed("/v1/workspaces/w1-test/commands", "k1", "{\"command\":\"hang\"}");
	cr_assert_eq(r.status, 201, "%s", r.body);
	j = body_json(&r);
	snprintf(first, sizeof first, "%s", string_at(j, "id"));
	json_decref(j);
	reply_done(&r);
	r = post_keyed("/v1/workspaces/w1-test/commands", "k1", "{\"command\":\"hang\"}");
	cr_assert_eq(r.status, 201, "%s", r.body);
	j = body_json(&r);
	cr_assert_str_eq(string_at(j, "id"), first);
	json_decref(j);
	reply_done(&r);
	cr_assert_str_eq(start_run("true"), "r-2"); /* exactly one run was started before */
	/* The same key with another body: 409 naming the header. */
	r = post_keyed("/v1/workspaces/w1-test/commands", "k1", "{\"command\":\"true\"}");
	assert_error(&r, 409, "conflict", "Idempotency-Key");
	reply_done(&r);
	/* The same key on another path is another key. */
	r = post_keyed("/v1/workspaces/w1-test/terminals", "k1", "{}");
	cr_assert_neq(r.status, 409, "%s", r.body);
	reply_done(&r);
	/* Bad shapes: empty, too long, not printable. */
	{
		const char *args[] = { "-H",
				       "Content-Type: application/json",
				       "-H",
				       "Idempotency-Key;",
				       "--data-binary",
				       "{\"command\":\"true\"}",
				       NULL };

		r = http("POST", "/v1/workspaces/w1-test/commands", args);
		assert_error(&r, 400, "invalid_argument", "Idempotency-Key");
		reply_done(&r);
	}
	memset(long_key, 'a', 256);
	long_key[256] = 0;
	r = post_keyed("/v1/workspaces/w1-test/commands", long_key, "{\"command\":\"true\"}");
	assert_error(&r, 400, "invalid_argument", "Idempotency-Key");
	reply_done(&r);
	long_key[255] = 0; /* 255 bytes is fine */
	r = post_keyed("/v1/workspaces/w1-test/commands", long_key, "{\"command\":\"true\"}");
	cr_assert_eq(r.status, 201, "%s", r.body);
	reply_done(&r);
	r = post_keyed("/v1/workspaces/w1-test/commands", "k\xc3\xa9", "{\"command\":\"true\"}");
	assert_error(&r, 400, "invalid_argument", "Idempotency-Key");
	reply_done(&r);
	{
		const char *args[] = { "-H",
				       "Content-Type: application/json",
				       "-H",
				       "Idempotency-Key: a",
				       "-H",
				       "Idempotency-Key: b",
				       "--data-binary",
				       "{\"command\":\"true\"}",
				       NULL };

		r = http("POST", "/v1/workspaces/w1-test/commands", args);
		assert_error(&r, 400, "invalid_argument", "Idempotency-Key");
		reply_done(&r);
	}
	/* A create still under way: 409 in_progress with Retry-After. */
	r = post_keyed("/v1/workspaces", "busy-1", "{}");
	assert_error(&r, 409, "in_progress", "Idempotency-Key");
	cr_assert(strcasestr(r.headers, "Retry-After: 1"), "%s", r.headers);
	reply_done(&r);
	/* A failed create leaves the key free: the retry creates. */
	r = post_keyed("/v1/workspaces/w1-test/commands", "k2", "{\"command\":5}");
	cr_assert_eq(r.status, 400, "%s", r.body);
	reply_done(&r);
	r = post_keyed("/v1/workspaces/w1-test/commands", "k2", "{\"command\":\"true\"}");
	cr_assert_eq(r.status, 201, "%s", r.body);
	reply_done(&r);
	/* A key whose object is gone answers 409 naming both (the fake cannot get "w1-new"). */
	r = post_keyed("/v1/workspaces", "k3", "{}");
	cr_assert_eq(r.status, 201, "%s", r.body);
	reply_done(&r);
	r = post_keyed("/v1/workspaces", "k3", "{}");
	assert_error(&r, 409, "conflict", "Idempotency-Key");
	cr_assert(strstr(r.body, "w1-new") && strstr(r.body, "k3"), "%s", r.body);
	reply_done(&r);
	stop_server();
}

static struct reply put_json(const char *path, const char *body)
{
	const char *args[] = { "-H", "Content-Type: application/json", "--data-binary", body,
			       NULL };

	return http("PUT", path, args);
}

Test(http, workspace_network)
{
	struct reply r;
	json_t *j;

	start_default();
	r = http("GET", "/v1/workspaces/w1-test/network", NULL);
	cr_assert_eq(r.status, 200, "%s", r.body);
	j = body_json(&r);
	cr_assert_str_eq(string_at(j, "mode"), "restricted");
	cr_assert_eq(json_integer_value(json_object_get(json_object_get(j, "counters"), "denied")),
		     2);
	json_decref(j);
	reply_done(&r);

	r = put_json("/v1/workspaces/w1-test/network",
		     "{\"egress\":{\"allow\":[{\"cidr\":\"203.0.113.0/24\"}]}}");
	cr_assert_eq(r.status, 200, "%s", r.body);
	cr_assert(strstr(r.body, "\"egress\":{\"allow\":[{\"cidr\":\"203.0.113.0/24\"}]}"), "%s",
		  r.body);
	reply_done(&r);
	r = http("GET", "/v1/workspaces/w1-test/network", NULL);
	cr_assert(strstr(r.body, "203.0.113.0/24"), "%s", r.body);
	reply_done(&r);

	r = put_json("/v1/workspaces/w1-test/network", "{\"egress\":{\"allow\":{}}}");
	assert_error(&r, 400, "invalid_argument", "egress");
	reply_done(&r);
	r = put_json("/v1/workspaces/w1-test/network", "{\"allow\":[]}");
	assert_error(&r, 400, "invalid_argument", "allow");
	reply_done(&r);
	r = put_json("/v1/workspaces/w1-test/network", "{}");
	assert_error(&r, 400, "invalid_argument", "egress");
	reply_done(&r);
	r = http("PUT", "/v1/workspaces/w1-test/network", NULL);
	assert_error(&r, 400, "invalid_argument", NULL);
	reply_done(&r);
	r = put_json("/v1/workspaces/w1-bridge/network", "{\"egress\":{}}");
	assert_error(&r, 409, "conflict", NULL);
	reply_done(&r);
	r = put_json("/v1/workspaces/nope/network", "{\"egress\":{}}");
	assert_error(&r, 404, "not_found", NULL);
	reply_done(&r);
	r = http("POST", "/v1/workspaces/w1-test/network", NULL);
	cr_assert_eq(r.status, 405, "%s", r.body);
	cr_assert(strcasestr(r.headers, "Allow: GET, HEAD, PUT"), "%s", r.headers);
	reply_done(&r);
	stop_server();
}

Test(http, bad_bodies)
{
	const char *form[] = { "--data-binary", "{\"command\":\"true\"}", NULL };
	struct reply r;

	start_default();
	r = post_json("/v1/workspaces/w1-test/commands", "{\"command\":");
	assert_error(&r, 400, "invalid_argument", NULL);
	reply_done(&r);
	r = post_json("/v1/workspaces/w1-test/commands", "{\"command\":\"a\",\"command\":\"b\"}");
	assert_error(&r, 400, "invalid_argument", NULL);
	cr_assert(strstr(r.body, "duplicate"), "%s", r.body);
	reply_done(&r);
	r = post_json("/v1/workspaces/w1-test/commands",
		      "{\"command\":\"true\",\"shell\":\"zsh\"}");
	assert_error(&r, 400, "invalid_argument", "shell");
	reply_done(&r);
	r = post_json("/v1/workspaces/w1-test/commands", "{\"command\":\"a\\u0000b\"}");
	assert_error(&r, 400, "invalid_argument", "command");
	reply_done(&r);
	r = http("POST", "/v1/workspaces/w1-test/commands", NULL);
	assert_error(&r, 400, "invalid_argument", NULL);
	reply_done(&r);
	/* curl's default Content-Type for --data is a form */
	r = http("POST", "/v1/workspaces/w1-test/commands", form);
	assert_error(&r, 415, "unsupported_media_type", NULL);
	reply_done(&r);
	r = post_json("/v1/workspaces/w1-down/commands", "{\"command\":\"true\"}");
	assert_error(&r, 503, "unavailable", NULL);
	reply_done(&r);
	stop_server();
}

/* ---- images ------------------------------------------------------------------------------- */

/* GET path by curl: its exit status, and the reply. */
static int http_exit(const char *path, struct reply *r)
{
	char p[128];
	_cleanup_free_ char *code = NULL;
	int status = pump_until_exit(spawn_curl("GET", path, NULL));

	snprintf(p, sizeof p, "%s/code", dir);
	code = slurp(p);
	r->status = atoi(code);
	snprintf(p, sizeof p, "%s/headers", dir);
	r->headers = slurp(p);
	snprintf(p, sizeof p, "%s/body", dir);
	r->body = slurp(p);
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static size_t body_len(void)
{
	char p[128];
	struct stat st;

	snprintf(p, sizeof p, "%s/body", dir);
	cr_assert_eq(stat(p, &st), 0);
	return st.st_size;
}

Test(http, image_export)
{
	_cleanup_free_ char *data = NULL;
	char p[128];
	struct reply r = {};
	size_t n;

	start_default();
	/* the whole tar, streamed as the pipe fills (3 MiB: more than a pipe holds) */
	cr_assert_eq(http_exit("/v1/images/" FAKE_IMAGE_FREE "/export", &r), 0);
	cr_assert_eq(r.status, 200, "%s", r.body);
	cr_assert(strcasestr(r.headers, "Content-Type: application/x-tar"), "%s", r.headers);
	cr_assert(strcasestr(r.headers, "Content-Disposition: attachment; "
					"filename=\"image-bbbbbbbbbbbb.tar\""),
		  "%s", r.headers);
	snprintf(p, sizeof p, "%s/body", dir);
	cr_assert_eq(read_file(p, 64u << 20, &data, &n), 0);
	cr_assert_eq(n, FAKE_EXPORT_BYTES);
	for (size_t i = 0; i < n; i++)
		cr_assert_eq((uint8_t)data[i], i % 251, "byte %zu", i);
	reply_done(&r);
	/* a failure past the first byte: the transfer is cut, never ended as if whole (curl 18) */
	cr_assert_eq(http_exit("/v1/images/" FAKE_IMAGE_USED "/export", &r), 18);
	cr_assert_eq(r.status, 200);
	cr_assert_leq(body_len(), FAKE_EXPORT_CUT);
	reply_done(&r);
	/* not in the store: an error answer, as GET /v1/images/{ref} */
	r = http("GET", "/v1/images/" FAKE_IMAGE_IMPORTED "/export", NULL);
	assert_error(&r, 404, "not_found", "image");
	cr_assert(strstr(r.body, "not in store"), "%s", r.body);
	reply_done(&r);
	stop_server();
}

Test(http, images)
{
	struct reply r;
	json_t *j;

	start_default();
	r = http("GET", "/v1/images", NULL);
	cr_assert_eq(r.status, 200, "%s", r.body);
	j = body_json(&r);
	cr_assert_eq(json_array_size(json_object_get(j, "images")), 2, "%s", r.body);
	json_decref(j);
	reply_done(&r);

	r = http("GET", "/v1/images/" FAKE_IMAGE_FREE, NULL);
	cr_assert_eq(r.status, 200, "%s", r.body);
	j = body_json(&r);
	cr_assert_str_eq(string_at(j, "digest"), FAKE_IMAGE_FREE);
	json_decref(j);
	reply_done(&r);
	r = http("GET", "/v1/images/" FAKE_IMAGE_IMPORTED, NULL);
	assert_error(&r, 404, "not_found", NULL);
	cr_assert(strstr(r.body, "image import"), "%s", r.body);
	reply_done(&r);
	r = http("GET", "/v1/images/busybox", NULL);
	assert_error(&r, 404, "not_found", NULL);
	reply_done(&r);

	r = post_json("/v1/images", "{\"path\":\"/srv/oci\",\"name\":\"busybox\"}");
	cr_assert_eq(r.status, 201, "%s", r.body);
	j = body_json(&r);
	cr_assert_str_eq(string_at(j, "digest"), FAKE_IMAGE_IMPORTED);
	cr_assert_str_eq(string_at(j, "name"), "busybox");
	json_decref(j);
	reply_done(&r);
	r = post_json("/v1/images", "{\"path\":\"/missing\"}");
	assert_error(&r, 404, "not_found", "path");
	reply_done(&r);
	r = post_json("/v1/images", "{\"reference\":\"busybox@" FAKE_IMAGE_FREE
				    "\",\"registry\":\"127.0.0.1:5000\",\"plainHttp\":true}");
	cr_assert_eq(r.status, 201, "%s", r.body);
	j = body_json(&r);
	cr_assert_str_eq(string_at(j, "digest"), FAKE_IMAGE_FREE);
	cr_assert_str_eq(string_at(j, "name"), "127.0.0.1:5000");
	cr_assert_str_eq(json_string_value(json_array_get(json_object_get(j, "usedBy"), 0)),
			 "plain");
	json_decref(j);
	reply_done(&r);
	r = post_json("/v1/images", "{\"reference\":\"busybox:latest\"}");
	assert_error(&r, 400, "invalid_argument", "reference");
	cr_assert(strstr(r.body, "pinned by digest"), "%s", r.body);
	reply_done(&r);
	r = post_json("/v1/images",
		      "{\"path\":\"/x\",\"reference\":\"busybox@" FAKE_IMAGE_FREE "\"}");
	assert_error(&r, 400, "invalid_argument", NULL);
	reply_done(&r);
	r = http("POST", "/v1/images", NULL);
	assert_error(&r, 400, "invalid_argument", NULL);
	reply_done(&r);

	r = http("DELETE", "/v1/images/" FAKE_IMAGE_USED, NULL);
	assert_error(&r, 409, "conflict", NULL);
	cr_assert(strstr(r.body, "w1-test"), "%s", r.body);
	reply_done(&r);
	r = http("DELETE", "/v1/images/" FAKE_IMAGE_FREE, NULL);
	cr_assert_eq(r.status, 200, "%s", r.body);
	cr_assert_str_eq(r.body, "{\"digest\":\"" FAKE_IMAGE_FREE "\",\"removed\":true}");
	reply_done(&r);
	r = http("DELETE", "/v1/images/" FAKE_IMAGE_IMPORTED, NULL);
	assert_error(&r, 404, "not_found", NULL);
	reply_done(&r);
	stop_server();
}

static void write_big_file(const char *path, size_t n)
{
	_cleanup_free_ char *data = malloc(n);

	cr_assert_not_null(data);
	memset(data, ' ', n);
	data[0] = '{';
	data[n - 1] = '}';
	cr_assert_eq(write_file_atomic(path, data, n, 0600), 0);
}

Test(http, body_over_cap_is_413)
{
	char big[160], at[170];
	const char *sized[] = { "-H", "Content-Type: application/json", "--data-binary", at, NULL };
	const char *chunked[] = { "-H",
				  "Content-Type: application/json",
				  "-H",
				  "Transfer-Encoding: chunked",
				  "--data-binary",
				  at,
				  NULL };
	struct reply r;

	start_default();
	snprintf(big, sizeof big, "%s/big.json", dir);
	snprintf(at, sizeof at, "@%s", big);
	write_big_file(big, 2 * 1024 * 1024 + 1);
	r = http("POST", "/v1/workspaces", sized);
	assert_error(&r, 413, "payload_too_large", NULL);
	reply_done(&r);
	r = http("POST", "/v1/workspaces", chunked);
	assert_error(&r, 413, "payload_too_large", NULL);
	reply_done(&r);
	/* positive control: exactly the cap is read and parsed */
	write_big_file(big, 2 * 1024 * 1024);
	r = http("POST", "/v1/workspaces", sized);
	cr_assert_eq(r.status, 201, "%s", r.body);
	reply_done(&r);
	r = http("POST", "/v1/workspaces", chunked);
	cr_assert_eq(r.status, 201, "%s", r.body);
	reply_done(&r);
	stop_server();
}

/* ---- commands ----------------------------------------------------------------------------- */

Test(http, query_parameters)
{
	struct reply r;
	json_t *j;

	start_default();
	r = http("GET", "/v1/workspaces/w1-test/commands/r-1?waitMs=abc", NULL);
	assert_error(&r, 400, "invalid_argument", "waitMs");
	reply_done(&r);
	r = http("GET", "/v1/workspaces/w1-test/commands/r-1?waitMs=-1", NULL);
	assert_error(&r, 400, "invalid_argument", "waitMs");
	reply_done(&r);
	r = http("GET", "/v1/workspaces/w1-test/commands/r-1?wait=5", NULL);
	assert_error(&r, 400, "invalid_argument", "wait");
	reply_done(&r);
	/* a bad waitMs must not start a run */
	r = post_json("/v1/workspaces/w1-test/commands?waitMs=1x", "{\"command\":\"true\"}");
	assert_error(&r, 400, "invalid_argument", "waitMs");
	reply_done(&r);
	r = http("GET", "/v1/workspaces/w1-test/commands", NULL);
	cr_assert_str_eq(r.body, "{\"commands\":[]}");
	reply_done(&r);

	start_run("true");
	start_run("true");
	start_run("true");
	r = http("GET", "/v1/workspaces/w1-test/commands?limit=2", NULL);
	cr_assert_eq(r.status, 200);
	j = body_json(&r);
	cr_assert_eq(json_array_size(json_object_get(j, "commands")), 2);
	cr_assert_str_eq(string_at(json_array_get(json_object_get(j, "commands"), 0), "id"), "r-3");
	json_decref(j);
	reply_done(&r);
	r = http("GET", "/v1/workspaces/w1-test/commands?limit=0", NULL);
	assert_error(&r, 400, "invalid_argument", "limit");
	reply_done(&r);
	r = http("GET", "/v1/workspaces/w1-test/commands?limit=1001", NULL);
	assert_error(&r, 400, "invalid_argument", "limit");
	reply_done(&r);
	stop_server();
}

Test(http, start_with_wait)
{
	struct reply r;
	json_t *j;

	start_default();
	r = post_json("/v1/workspaces/w1-test/commands", "{\"command\":\"true\"}");
	cr_assert_eq(r.status, 201);
	j = body_json(&r);
	cr_assert_str_eq(string_at(j, "status"), "exited");
	json_decref(j);
	reply_done(&r);

	r = post_json("/v1/workspaces/w1-test/commands?waitMs=5000", "{\"command\":\"sleep:300\"}");
	cr_assert_eq(r.status, 201, "%s", r.body);
	j = body_json(&r);
	cr_assert_str_eq(string_at(j, "status"), "exited");
	cr_assert_geq(r.elapsed_ms, 290);
	cr_assert_lt(r.elapsed_ms, 2000);
	json_decref(j);
	reply_done(&r);

	/* without waitMs: at once, running */
	r = post_json("/v1/workspaces/w1-test/commands", "{\"command\":\"sleep:300\"}");
	cr_assert_eq(r.status, 201);
	j = body_json(&r);
	cr_assert_str_eq(string_at(j, "status"), "running");
	json_decref(j);
	reply_done(&r);
	cr_assert_eq(fake_manager_waiters(), 0);
	stop_server();
}

Test(http, long_poll_times_out_and_is_capped)
{
	char path[128];
	const char *id;
	struct reply r;
	json_t *j;

	/* The cap is ten times the wait asked for, so that a loaded machine's delay in answering
	 * the first cannot be taken for the cap, nor the cap's answer for the first. */
	struct http_config cfg = { .max_wait_ms = 2000 };

	start_server(&cfg);
	id = start_run("hang");
	snprintf(path, sizeof path, "/v1/workspaces/w1-test/commands/%s?waitMs=200", id);
	r = http("GET", path, NULL);
	cr_assert_eq(r.status, 200);
	j = body_json(&r);
	cr_assert_str_eq(string_at(j, "status"), "running");
	cr_assert_geq(r.elapsed_ms, 190);
	cr_assert_lt(r.elapsed_ms, 1900);
	json_decref(j);
	reply_done(&r);

	snprintf(path, sizeof path, "/v1/workspaces/w1-test/commands/%s?waitMs=999999", id);
	r = http("GET", path, NULL);
	cr_assert_eq(r.status, 200);
	cr_assert_geq(r.elapsed_ms, 1990);
	cr_assert_lt(r.elapsed_ms, 10000);
	reply_done(&r);
	cr_assert_eq(fake_manager_waiters(), 0);

	snprintf(path, sizeof path, "/v1/workspaces/w1-test/commands/r-99?waitMs=100");
	r = http("GET", path, NULL);
	assert_error(&r, 404, "not_found", NULL);
	reply_done(&r);
	stop_server();
}

static const char *header_line(const char *headers, const char *name, char *ret, size_t size)
{
	const char *p = strcasestr(headers, name);

	if (!p)
		return NULL;
	snprintf(ret, size, "%.*s", (int)strcspn(p, "\r\n"), p);
	return ret;
}

/* A HEAD is GET's status and headers at once: a long-poll does not wait, an event stream is
 * not followed, a WebSocket-only endpoint is 426 as for a GET without the upgrade. */
Test(http, head_answers_at_once)
{
	const char *head[] = { "--head", NULL };
	char path[128], want[128], got[128];
	struct http_config cfg = { .max_wait_ms = 30000 };
	const char *id;
	struct reply get, r;

	start_server(&cfg);
	id = start_run("hang");
	snprintf(path, sizeof path, "/v1/workspaces/w1-test/commands/%s", id);
	get = http("GET", path, NULL);
	cr_assert_eq(get.status, 200);
	snprintf(path, sizeof path, "/v1/workspaces/w1-test/commands/%s?waitMs=30000", id);
	r = http("HEAD", path, head);
	cr_assert_eq(r.status, 200, "%s", r.headers);
	cr_assert_lt(r.elapsed_ms, 15000, "HEAD waited %lu ms", r.elapsed_ms);
	cr_assert_not_null(header_line(get.headers, "Content-Length:", want, sizeof want));
	cr_assert_not_null(header_line(r.headers, "Content-Length:", got, sizeof got), "%s",
			   r.headers);
	cr_assert_str_eq(got, want);
	cr_assert(strcasestr(r.headers, "Content-Type: application/json"), "%s", r.headers);
	cr_assert_eq(fake_manager_waiters(), 0);
	reply_done(&r);
	reply_done(&get);

	snprintf(path, sizeof path, "/v1/workspaces/w1-test/commands/%s/output", id);
	r = http("HEAD", path, head);
	cr_assert_eq(r.status, 200, "%s", r.headers);
	cr_assert(strcasestr(r.headers, "Content-Type: text/event-stream"), "%s", r.headers);
	cr_assert(!strcasestr(r.headers, "Transfer-Encoding"), "%s", r.headers);
	reply_done(&r);
	pump_for(50);
	cr_assert_eq(fake_manager_watches(), 0);

	r = http("HEAD", "/v1/workspaces/w1-test/terminals/t-1/attach", head);
	cr_assert_eq(r.status, 426, "%s", r.headers);
	reply_done(&r);
	r = http("HEAD", "/v1/workspaces/w1-test/restart", head);
	cr_assert_eq(r.status, 405, "%s", r.headers);
	cr_assert(strstr(r.headers, "Allow: POST"), "%s", r.headers);
	reply_done(&r);
	stop_server();
}

Test(http, long_poll_released_when_client_goes_away)
{
	char path[128];
	const char *id;
	pid_t pid;
	int status;

	start_default();
	id = start_run("hang");
	snprintf(path, sizeof path, "/v1/workspaces/w1-test/commands/%s?waitMs=60000", id);
	pid = spawn_curl("GET", path, NULL);
	pump_for(100);
	pump_idle(300);
	cr_assert_eq(fake_manager_waiters(), 1);
	kill(pid, SIGKILL);
	status = pump_until_exit(pid);
	cr_assert(WIFSIGNALED(status));
	pump_for(50);
	cr_assert_eq(fake_manager_waiters(), 0);
	stop_server();
}

Test(http, cancel)
{
	char path[128];
	const char *id;
	struct reply r;
	json_t *j;

	start_default();
	id = start_run("hang");
	snprintf(path, sizeof path, "/v1/workspaces/w1-test/commands/%s/cancel", id);
	r = http("POST", path, NULL);
	cr_assert_eq(r.status, 200, "%s", r.body);
	j = body_json(&r);
	cr_assert_str_eq(string_at(j, "status"), "cancelled");
	cr_assert_geq(r.elapsed_ms, 45);
	json_decref(j);
	reply_done(&r);
	r = http("POST", path, NULL);
	assert_error(&r, 409, "conflict", NULL);
	reply_done(&r);
	stop_server();
}

Test(http, shutdown_with_waiting_clients)
{
	char path[128];
	const char *id;
	pid_t pid;
	int status;

	start_default();
	id = start_run("hang");
	snprintf(path, sizeof path, "/v1/workspaces/w1-test/commands/%s?waitMs=60000", id);
	pid = spawn_curl("GET", path, NULL);
	pump_for(300);
	cr_assert_eq(fake_manager_waiters(), 1);
	http_server_free(server);
	server = NULL;
	cr_assert_eq(fake_manager_waiters(), 0);
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) != 0); /* closed without a reply */
	stop_server();
}

/* ---- live output -------------------------------------------------------------------------- */

struct sse_result {
	size_t output_bytes;
	size_t gap_bytes;
	size_t events;
	bool ended;
	char end_status[32];
};

/* Checks every output chunk's bytes (i % 251 at offset i) and that output and gaps tile the
 * stream without holes or overlaps. */
static struct sse_result parse_sse(const char *text)
{
	struct sse_result res = {};
	uint64_t next = 0;
	char event[32] = "";
	_cleanup_free_ char *copy = strdup(text);
	char *save = NULL;

	for (char *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		json_t *j;

		unsigned long long id_out, id_err;

		if (sscanf(line, "event: %31s", event) == 1 || line[0] == ':')
			continue;
		/* The id after each output and gap: where a client resumes, stdout:stderr. */
		if (sscanf(line, "id: %llu:%llu", &id_out, &id_err) == 2) {
			cr_assert_eq(id_out, next, "id %llu, the stream stands at %lu", id_out,
				     next);
			cr_assert_eq(id_err, 0);
			continue;
		}
		cr_assert(strncmp(line, "data: ", 6) == 0, "line: %.100s", line);
		j = json_loads(line + 6, 0, NULL);
		cr_assert_not_null(j);
		res.events++;
		if (strcmp(event, "output") == 0) {
			const char *b64 = string_at(j, "data");
			uint64_t off = json_integer_value(json_object_get(j, "offset"));
			_cleanup_free_ uint8_t *d = NULL;
			size_t n;

			cr_assert_str_eq(string_at(j, "stream"), "stdout");
			cr_assert_eq(off, next, "output at %lu, expected %lu", off, next);
			cr_assert_eq(base64_decode(b64, strlen(b64), &d, &n), 0);
			for (size_t i = 0; i < n; i++)
				cr_assert_eq(d[i], (uint8_t)((off + i) % 251));
			next += n;
			res.output_bytes += n;
		} else if (strcmp(event, "gap") == 0) {
			uint64_t off = json_integer_value(json_object_get(j, "offset"));
			uint64_t bytes = json_integer_value(json_object_get(j, "bytes"));

			cr_assert_eq(off, next, "gap at %lu, expected %lu", off, next);
			cr_assert_gt(bytes, 0);
			next += bytes;
			res.gap_bytes += bytes;
		} else {
			cr_assert_str_eq(event, "end");
			cr_assert_not(res.ended);
			res.ended = true;
			snprintf(res.end_status, sizeof res.end_status, "%s",
				 string_at(j, "status"));
		}
		json_decref(j);
	}
	return res;
}

Test(http, output_stream)
{
	char path[128];
	const char *id;
	struct reply r;
	struct sse_result res;

	start_default();
	id = start_run("spew:100000");
	snprintf(path, sizeof path, "/v1/workspaces/w1-test/commands/%s/output", id);
	r = http("GET", path, NULL);
	cr_assert_eq(r.status, 200);
	cr_assert(strcasestr(r.headers, "Content-Type: text/event-stream"), "%s", r.headers);
	res = parse_sse(r.body);
	cr_assert_eq(res.output_bytes, 100000);
	cr_assert_eq(res.gap_bytes, 0);
	cr_assert(res.ended);
	cr_assert_str_eq(res.end_status, "exited");
	reply_done(&r);
	cr_assert_eq(fake_manager_watches(), 0);

	r = http("GET", "/v1/workspaces/w1-test/commands/r-77/output", NULL);
	assert_error(&r, 404, "not_found", NULL);
	reply_done(&r);
	stop_server();
}

/* A client that sends its request and reads nothing for a while. */
static pid_t spawn_slow_reader(const char *path, const char *out, unsigned delay_ms)
{
	pid_t pid = fork();

	cr_assert_geq(pid, 0);
	if (pid == 0) {
		struct sockaddr_un sa = { .sun_family = AF_UNIX };
		char req[256], buf[65536];
		int fd = socket(AF_UNIX, SOCK_STREAM, 0), rcv = 4096;
		FILE *f = fopen(out, "w");
		ssize_t n;

		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcv, sizeof rcv);
		snprintf(sa.sun_path, sizeof sa.sun_path, "%s", sock_path);
		if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0)
			_exit(2);
		snprintf(req, sizeof req,
			 "GET %s HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n", path);
		if (write(fd, req, strlen(req)) < 0)
			_exit(3);
		usleep(delay_ms * 1000);
		while ((n = read(fd, buf, sizeof buf)) > 0)
			fwrite(buf, 1, (size_t)n, f);
		fclose(f);
		_exit(0);
	}
	return pid;
}

/* Undoes chunked transfer coding, after the header block. */
static char *dechunk(const char *raw)
{
	const char *p = strstr(raw, "\r\n\r\n");
	char *out = malloc(strlen(raw) + 1), *o = out;

	cr_assert(p && out);
	p += 4;
	for (;;) {
		unsigned long n = strtoul(p, (char **)&p, 16);

		p = strstr(p, "\r\n") + 2;
		if (n == 0)
			break;
		memcpy(o, p, n);
		o += n;
		p += n + 2;
	}
	*o = '\0';
	return out;
}

/* The reader falls behind the 1 MiB buffer many times over: each time, once the buffer has
 * drained, the output is watched again from where it stands, and as the fake keeps every byte,
 * every byte comes, without a gap. */
Test(http, output_slow_reader_caught_up)
{
	char path[128], out[128];
	_cleanup_free_ char *raw = NULL, *body = NULL;
	const char *id;
	struct sse_result res;
	pid_t pid;

	start_default();
	id = start_run("spew:8000000");
	snprintf(path, sizeof path, "/v1/workspaces/w1-test/commands/%s/output", id);
	snprintf(out, sizeof out, "%s/slow", dir);
	pid = spawn_slow_reader(path, out, 500);
	cr_assert(WIFEXITED(pump_until_exit(pid)));
	raw = slurp(out);
	cr_assert(strncmp(raw, "HTTP/1.1 200", 12) == 0, "%.200s", raw);
	body = dechunk(raw);
	res = parse_sse(body);
	cr_assert(res.ended);
	cr_assert_eq(res.gap_bytes, 0);
	cr_assert_eq(res.output_bytes, 8000000);
	stop_server();
}

Test(http, output_watch_released_when_client_goes_away)
{
	_cleanup_free_ char *headers = NULL;
	char path[128], hdr[128];
	const char *id;
	pid_t pid;

	start_default();
	id = start_run("hang");
	snprintf(path, sizeof path, "/v1/workspaces/w1-test/commands/%s/output", id);
	pid = spawn_curl("GET", path, NULL);
	pump_for(100);
	pump_idle(300);
	cr_assert_eq(fake_manager_watches(), 1);
	/* the stream is open (headers sent) before the run has written anything */
	snprintf(hdr, sizeof hdr, "%s/headers", dir);
	headers = slurp(hdr);
	cr_assert(strcasestr(headers, "Content-Type: text/event-stream"), "%s", headers);
	kill(pid, SIGKILL);
	pump_until_exit(pid);
	pump_for(50);
	cr_assert_eq(fake_manager_watches(), 0);
	stop_server();
}

Test(http, secrets_routes)
{
	struct reply r;
	json_t *j;

	start_default();
	r = put_json("/v1/workspaces/w1-test/secrets/gh", "{\"value\":\"v\"}");
	cr_assert_eq(r.status, 201, "%s", r.body);
	j = body_json(&r);
	cr_assert_str_eq(string_at(j, "name"), "gh");
	json_decref(j);
	reply_done(&r);
	r = http("GET", "/v1/workspaces/w1-test/secrets", NULL);
	cr_assert_eq(r.status, 200, "%s", r.body);
	cr_assert_str_eq(r.body, "{\"secrets\":[]}");
	reply_done(&r);
	r = http("GET", "/v1/workspaces/w1-test/secrets/gh", NULL);
	assert_error(&r, 404, "not_found", NULL);
	reply_done(&r);
	r = http("DELETE", "/v1/workspaces/w1-test/secrets/gh", NULL);
	assert_error(&r, 404, "not_found", NULL);
	reply_done(&r);
	r = put_json("/v1/workspaces/w1-test/secrets/gh", "{\"value\":1");
	assert_error(&r, 400, "invalid_argument", NULL);
	reply_done(&r);
	r = http("PUT", "/v1/workspaces/w1-test/secrets/gh", NULL);
	assert_error(&r, 400, "invalid_argument", NULL);
	reply_done(&r);
	r = http("POST", "/v1/workspaces/w1-test/secrets/gh", NULL);
	assert_error(&r, 405, "method_not_allowed", NULL);
	cr_assert(strstr(r.headers, "Allow: GET, HEAD, PUT, DELETE"), "%s", r.headers);
	reply_done(&r);
	r = http("DELETE", "/v1/workspaces/w1-test/secrets", NULL);
	assert_error(&r, 405, "method_not_allowed", NULL);
	cr_assert(strstr(r.headers, "Allow: GET"), "%s", r.headers);
	reply_done(&r);
	r = http("GET", "/v1/workspaces/w1-test/secrets/.hidden", NULL);
	assert_error(&r, 404, "not_found", NULL);
	reply_done(&r);
	stop_server();
}

/* A body that is not JSON: the message says where it broke, never what it read there. */
Test(http, invalid_json_quotes_nothing_of_the_body)
{
	struct reply r;

	start_default();
	r = put_json("/v1/workspaces/w1-test/secrets/gh", "{\"value\":\"ghs_quoteme");
	assert_error(&r, 400, "invalid_argument", NULL);
	cr_assert(strstr(r.body, "not valid JSON"), "%s", r.body);
	cr_assert_null(strstr(r.body, "quoteme"), "%s", r.body);
	reply_done(&r);
	r = post_json("/v1/workspaces", "{\"env\":{\"A\":\"1\",\"A\":\"2\"}}");
	assert_error(&r, 400, "invalid_argument", NULL);
	cr_assert(strstr(r.body, "duplicate object key near '\\\"A\\\"'"), "%s", r.body);
	reply_done(&r);
	stop_server();
}

/* ---- files: what the HTTP layer decides before the agent is asked ------------------------- */

Test(http, file_paths_and_streamed_body)
{
	char big[160], at[170], long_path[4200];
	const char *upload[] = { "--data-binary", at, NULL };
	struct reply r;
	size_t n;

	start_default();
	r = http("GET", "/v1/workspaces/w1-test/files/stat", NULL);
	cr_assert_eq(r.status, 400, "no path: %s", r.body);
	assert_error(&r, 400, "invalid_argument", "path");
	reply_done(&r);
	r = http("GET", "/v1/workspaces/w1-test/files/stat?path=a%00b", NULL);
	cr_assert_eq(r.status, 400, "nul: %s", r.body);
	assert_error(&r, 400, "invalid_argument", "path");
	cr_assert(strstr(r.body, "NUL"), "%s", r.body);
	reply_done(&r);
	n = (size_t)snprintf(long_path, sizeof long_path,
			     "/v1/workspaces/w1-test/files/stat?path=");
	memset(long_path + n, 'a', 4097);
	long_path[n + 4097] = '\0';
	r = http("GET", long_path, NULL);
	cr_assert_eq(r.status, 400, "long: %s", r.body);
	assert_error(&r, 400, "invalid_argument", "path");
	reply_done(&r);
	/* positive control: a good path reaches the manager (no agent in the fake one) */
	r = http("GET", "/v1/workspaces/w1-test/files/stat?path=a", NULL);
	assert_error(&r, 503, "unavailable", NULL);
	reply_done(&r);
	/* an upload is not bound by the 2 MiB JSON cap: it reaches the manager */
	snprintf(big, sizeof big, "%s/big.bin", dir);
	snprintf(at, sizeof at, "@%s", big);
	write_big_file(big, 3 * 1024 * 1024);
	r = http("PUT", "/v1/workspaces/w1-test/files?path=a", upload);
	assert_error(&r, 503, "unavailable", NULL);
	reply_done(&r);
	r = http("PUT", "/v1/workspaces/w1-test/files?path=a&mode=0999", upload);
	cr_assert_eq(r.status, 400, "mode: %s", r.body);
	assert_error(&r, 400, "invalid_argument", "mode");
	reply_done(&r);
	stop_server();
}

/* The dashboard's CSP frames this worker's previews only, and nothing when previews are off;
 * a domain or scheme that would write more into the header is refused. */
Test(web, csp_frames_previews_only)
{
	_cleanup_free_ char *off = NULL, *on = NULL, *tls = NULL;
	const char *want;
	char *bad = NULL;

	cr_assert_eq(web_csp_new(NULL, NULL, 0, &off), 0);
	cr_assert_not_null(strstr(off, "frame-ancestors 'none'"), "%s", off);
	cr_assert_null(strstr(off, "frame-src"), "previews off: no frame-src: %s", off);

	cr_assert_eq(web_csp_new("http", "preview.localhost", 8081, &on), 0);
	cr_assert_not_null(strstr(on, "; frame-src http://*.preview.localhost:8081"), "%s", on);
	cr_assert_not_null(strstr(on, "default-src 'self'; script-src 'self';"), "%s", on);
	cr_assert_eq(web_csp_new("https", "w2.preview.example.com", 0, &tls), 0);
	want = "; frame-src https://*.w2.preview.example.com";
	cr_assert(strlen(tls) > strlen(want) && strcmp(tls + strlen(tls) - strlen(want), want) == 0,
		  "the scheme's own port is left out: %s", tls);

	cr_assert_eq(web_csp_new("http", "p.example; script-src *", 0, &bad), -EINVAL);
	cr_assert_eq(web_csp_new("http", "p example", 0, &bad), -EINVAL);
	cr_assert_eq(web_csp_new("http", "", 0, &bad), -EINVAL);
	cr_assert_eq(web_csp_new("http", ".example.com", 0, &bad), -EINVAL);
	cr_assert_eq(web_csp_new("javascript", "example.com", 0, &bad), -EINVAL);
	cr_assert_eq(web_csp_new(NULL, "example.com", 0, &bad), -EINVAL);
	cr_assert_null(bad, "nothing returned on a refusal");
}
