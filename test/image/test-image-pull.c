/* SPDX-License-Identifier: MIT */
/* Pull by digest from a real registry on loopback: Debian's docker-registry, filled by skopeo
 * from the busybox layout; and, for the bearer-token challenge and a corrupt blob, the small
 * registry of test/image/fake-registry. */

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "image/image-internal.h"
#include "test-image-util.h"

#define FAKE_REGISTRY SOURCE_ROOT "/test/image/fake-registry"
#define ZERO_DIGEST "sha256:0000000000000000000000000000000000000000000000000000000000000000"

static char dir[PATH_MAX], root[PATH_MAX], layout[PATH_MAX], manifest[80];
static struct image_store *store;
static pid_t server = -1;
static int port;

static void setup(void)
{
	struct station_error e = {};

	tmpdir_make(dir, sizeof dir, "test-image-pull");
	snprintf(root, sizeof root, "%s/root", dir);
	snprintf(layout, sizeof layout, "%s/layout", dir);
	busybox_layout(layout, false, "", manifest, NULL);
	cr_assert_eq(image_store_open(root, &store, &e), 0, "%s", e.message);
}

static void server_stop(void)
{
	if (server <= 0)
		return;
	kill(server, SIGTERM);
	waitpid(server, NULL, 0);
	server = -1;
}

static void teardown(void)
{
	server_stop();
	image_store_close(store);
	rm_rf(dir);
}

TestSuite(pull, .init = setup, .fini = teardown);

static int free_port(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof a;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	cr_assert_eq(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
	cr_assert_eq(getsockname(fd, (struct sockaddr *)&a, &len), 0);
	close(fd);
	return ntohs(a.sin_port);
}

static bool port_open(int p)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_port = htons(p),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	bool ok = connect(fd, (struct sockaddr *)&a, sizeof a) == 0;

	close(fd);
	return ok;
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000 };

	nanosleep(&ts, NULL);
}

static void server_spawn(char *const argv[])
{
	int devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);

	server = fork();
	cr_assert_geq(server, 0);
	if (server == 0) {
		dup2(devnull, STDOUT_FILENO);
		dup2(devnull, STDERR_FILENO);
		execvp(argv[0], argv);
		_exit(127);
	}
	close(devnull);
}

static void tool_check(const char *tool, const char *package)
{
	char cmd[256];

	snprintf(cmd, sizeof cmd, "command -v %s >/dev/null", tool);
	if (system(cmd) != 0)
		cr_assert_fail("%s is missing: apt-get install %s", tool, package);
}

/* docker-registry on 127.0.0.1:<free port>, storage in the test dir, with busybox pushed. */
static void registry_start(void)
{
	char config[PATH_MAX], text[PATH_MAX + 256], cmd[2 * PATH_MAX + 256];

	tool_check("docker-registry", "docker-registry");
	tool_check("skopeo", "skopeo");
	port = free_port();
	snprintf(config, sizeof config, "%s/registry.yml", dir);
	snprintf(text, sizeof text,
		 "version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n"
		 "    rootdirectory: %s/registry\nhttp:\n  addr: 127.0.0.1:%d\n",
		 dir, port);
	cr_assert_eq(write_file_atomic(config, text, strlen(text), 0600), 0);
	server_spawn((char *const[]){ "docker-registry", "serve", config, NULL });
	/* Up to 60 s: a loaded machine can take seconds to start a server. */
	for (int i = 0; i < 1200 && !port_open(port); i++)
		sleep_ms(50);
	cr_assert(port_open(port), "docker-registry did not start on port %d", port);
	snprintf(cmd, sizeof cmd,
		 "skopeo copy --quiet --insecure-policy --preserve-digests --dest-tls-verify=false "
		 "oci:'%s' docker://127.0.0.1:%d/busybox >/dev/null",
		 layout, port);
	cr_assert_eq(system(cmd), 0, "%s", cmd);
}

static void fake_registry_start(const char *corrupt)
{
	char portfile[PATH_MAX];
	_cleanup_free_ char *text = NULL;
	size_t len;

	tool_check("python3", "python3");
	snprintf(portfile, sizeof portfile, "%s/fake.port", dir);
	server_spawn((char *const[]){ FAKE_REGISTRY, layout, portfile, corrupt ? "--corrupt" : NULL,
				      (char *)corrupt, NULL });
	for (int i = 0; i < 1200 && access(portfile, F_OK) < 0; i++)
		sleep_ms(50);
	cr_assert_eq(read_file(portfile, 16, &text, &len), 0, "fake-registry did not start");
	port = atoi(text);
}

static int count(const char *sub)
{
	char p[PATH_MAX];

	snprintf(p, sizeof p, "%s/images/%s", root, sub);
	return dir_count(p);
}

static void assert_store_empty(void)
{
	cr_assert_eq(count("blobs/sha256"), 0, "blobs left behind");
	cr_assert_eq(count("layers"), 0, "layers left behind");
	cr_assert_eq(count("index"), 0, "index records left behind");
}

static int pull(const char *repo, const char *digest, const char *registry, struct image **ret,
		struct station_error *e)
{
	struct image_pull_options o = { .plain_http = true, .registry = registry };
	char ref[256];

	if (registry)
		snprintf(ref, sizeof ref, "%s@%s", repo, digest);
	else
		snprintf(ref, sizeof ref, "127.0.0.1:%d/%s@%s", port, repo, digest);
	return image_pull(store, ref, &o, ret, e);
}

static void assert_busybox(const struct image *img)
{
	char p[PATH_MAX];

	cr_assert_str_eq(img->digest, manifest);
	cr_assert_eq(img->n_layers, 2);
	cr_assert_str_eq(img->config.user, "0:0");
	cr_assert_str_eq(img->config.cmd[0], "/bin/sh");
	snprintf(p, sizeof p, "%s/bin/busybox", img->layers[0]);
	cr_assert_eq(access(p, X_OK), 0, "%s", p);
}

Test(pull, by_digest_from_docker_registry)
{
	struct station_error e = {};
	struct image *img = NULL;
	char name[64];

	registry_start();
	cr_assert_eq(pull("busybox", manifest, NULL, &img, &e), 0, "%s", e.message);
	assert_busybox(img);
	snprintf(name, sizeof name, "127.0.0.1:%d/busybox", port);
	cr_assert_str_eq(img->name, name);
	image_free(img);
	cr_assert_eq(count("blobs/sha256"), 4);
	/* In the store now: a second pull needs no registry. */
	server_stop();
	cr_assert_eq(pull("busybox", manifest, NULL, &img, &e), 0, "%s", e.message);
	image_free(img);
	cr_assert_eq(image_lookup(store, manifest, &img, &e), 0, "%s", e.message);
	image_free(img);
}

Test(pull, registry_option_and_plain_name)
{
	struct station_error e = {};
	struct image *img = NULL;
	char registry[32];

	registry_start();
	snprintf(registry, sizeof registry, "127.0.0.1:%d", port);
	cr_assert_eq(pull("busybox", manifest, registry, &img, &e), 0, "%s", e.message);
	assert_busybox(img);
	image_free(img);
}

Test(pull, unknown_digest_is_clear)
{
	struct station_error e = {};
	struct image *img = NULL;
	char msg[512];

	registry_start();
	cr_assert_eq(pull("busybox", ZERO_DIGEST, NULL, &img, &e), -ENOENT);
	snprintf(msg, sizeof msg,
		 "image busybox@" ZERO_DIGEST " not found in registry 127.0.0.1:%d (HTTP 404, "
		 "MANIFEST_UNKNOWN: manifest unknown)",
		 port);
	cr_assert_str_eq(e.message, msg);
	cr_assert_null(img);
	assert_store_empty();
}

Test(pull, tag_refused_before_any_request)
{
	struct station_error e = {};
	struct image_pull_options o = { .plain_http = true };

	cr_assert_eq(image_pull(store, "127.0.0.1:1/busybox:latest", &o, NULL, &e), -EINVAL);
	cr_assert_str_eq(e.message, "image reference \"127.0.0.1:1/busybox:latest\" uses a tag: "
				    "images are pinned by digest, use "
				    "127.0.0.1:1/busybox@sha256:<64 hex>");
}

Test(pull, no_registry_named)
{
	struct station_error e = {};
	struct image_pull_options o = { .plain_http = true };
	char ref[128], msg[512];

	snprintf(ref, sizeof ref, "busybox@%s", manifest);
	cr_assert_eq(image_pull(store, ref, &o, NULL, &e), -EINVAL);
	snprintf(msg, sizeof msg,
		 "image reference %s names no registry: use HOST[:PORT]/%s or give a registry", ref,
		 ref);
	cr_assert_str_eq(e.message, msg);
}

Test(pull, registry_down)
{
	struct station_error e = {};
	char prefix[256];

	port = free_port();
	cr_assert_eq(pull("busybox", manifest, NULL, NULL, &e), -EIO);
	snprintf(prefix, sizeof prefix,
		 "registry 127.0.0.1:%d: http://127.0.0.1:%d/v2/busybox/"
		 "manifests/%s: Couldn't connect to server",
		 port, port, manifest);
	cr_assert_str_eq(e.message, prefix);
	assert_store_empty();
}

Test(pull, bearer_token_challenge)
{
	struct station_error e = {};
	struct image *img = NULL;

	fake_registry_start(NULL);
	cr_assert_eq(pull("busybox", manifest, NULL, &img, &e), 0, "%s", e.message);
	assert_busybox(img);
	image_free(img);
}

/* Positive control for the token: without one, the fake registry says 401. */
Test(pull, fake_registry_requires_token)
{
	char cmd[256];

	fake_registry_start(NULL);
	snprintf(cmd, sizeof cmd,
		 "curl -s -o /dev/null -w '%%{http_code}' "
		 "http://127.0.0.1:%d/v2/busybox/manifests/%s | grep -qx 401",
		 port, manifest);
	cr_assert_eq(system(cmd), 0);
}

Test(pull, corrupt_blob_leaves_nothing)
{
	struct station_error e = {};
	struct image *img = NULL;
	_cleanup_free_ char *mdata = NULL;
	char path[PATH_MAX], layer[80] = "", msg[128];
	const char *p;
	size_t len;

	/* The second layer of the manifest: manifest and config are fetched and stored first. */
	snprintf(path, sizeof path, "%s/blobs/sha256/%s", layout, manifest + 7);
	cr_assert_eq(read_file(path, 1 << 20, &mdata, &len), 0);
	p = strstr(mdata, "\"layers\"");
	p = p ? strstr(p, "},") : NULL;
	p = p ? strstr(p, "\"digest\": \"") : NULL;
	cr_assert_not_null(p);
	snprintf(layer, sizeof layer, "%.71s", p + strlen("\"digest\": \""));
	fake_registry_start(layer);
	cr_assert_eq(pull("busybox", manifest, NULL, &img, &e), -EBADMSG);
	snprintf(msg, sizeof msg, "blob %.19s: digest mismatch: content has sha256:", layer);
	cr_assert(strncmp(e.message, msg, strlen(msg)) == 0, "%s", e.message);
	assert_store_empty();
}

/* What a registry answers, read without a registry: header lines, challenges, tokens, error
 * bodies (pull.c's registry_* readers, which the fuzz harness fuzz-manifest-registry drives). */
Test(registry_answers, header_lines_are_not_nul_terminated)
{
	struct registry_headers h = {};
	/* libcurl's buffer: no NUL after the line, and no CR LF either in this one. */
	char line[] = { 'C', 'o', 'n', 't', 'e', 'n', 't', '-', 'T', 'y',
			'p', 'e', ':', ' ', 'a', '/', 'b', 'X', 'X', 'X' };

	registry_header_line(&h, line, 17);
	cr_assert_str_eq(h.content_type, "a/b");
	registry_header_line(&h, "content-type: application/json; charset=utf-8\r\n", 48);
	cr_assert_str_eq(h.content_type, "application/json");
	registry_header_line(&h, "WWW-Authenticate: Bearer realm=\"https://a/t\"\r\n", 46);
	cr_assert_str_eq(h.www_authenticate, "Bearer realm=\"https://a/t\"");
	registry_header_line(&h, "HTTP/1.1 200 OK\r\n", 17);
	cr_assert_str_eq(h.content_type, "");
	cr_assert_null(h.www_authenticate);
	registry_headers_done(&h);
}

Test(registry_answers, challenge_params)
{
	const char *c = "Bearer realm=\"https://auth/token\",service=\"reg\",xscope=\"no\"";
	char *v = registry_challenge_param(c, "realm");

	cr_assert_str_eq(v, "https://auth/token");
	free(v);
	v = registry_challenge_param(c, "service");
	cr_assert_str_eq(v, "reg");
	free(v);
	cr_assert_null(registry_challenge_param(c, "scope"));
	cr_assert_null(registry_challenge_param("Bearer realm=\"unterminated", "realm"));
}

Test(registry_answers, token_with_a_line_break_is_refused)
{
	const char good[] = "{\"token\":\"abc.def\"}";
	const char crlf[] = "{\"access_token\":\"abc\\r\\nX-Injected: 1\"}";
	const char tab[] = "{\"token\":\"a\\tb\"}";
	char *t = NULL;

	cr_assert_eq(registry_token_parse(good, strlen(good), &t), 0);
	cr_assert_str_eq(t, "abc.def");
	free(t);
	cr_assert_eq(registry_token_parse(crlf, strlen(crlf), &t), -EPROTO);
	cr_assert_eq(registry_token_parse(tab, strlen(tab), &t), -EPROTO);
	cr_assert_eq(registry_token_parse("{\"token\":\"\"}", 12, &t), -EPROTO);
	cr_assert_eq(registry_token_parse(NULL, 0, &t), -EPROTO);
}

Test(registry_answers, error_text)
{
	const char body[] =
		"{\"errors\":[{\"code\":\"MANIFEST_UNKNOWN\",\"message\":\"unknown\"}]}";
	char buf[64];

	registry_error_text(body, strlen(body), buf, sizeof buf);
	cr_assert_str_eq(buf, ", MANIFEST_UNKNOWN: unknown");
	registry_error_text("not json", 8, buf, sizeof buf);
	cr_assert_str_eq(buf, "");
}
