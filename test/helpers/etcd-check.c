/* SPDX-License-Identifier: MIT */
/* src/store/etcd.c against a real etcd (or a fake one), driven by test-etcd-client.sh:
 *
 *   etcd-check URL CASE [ARG]
 *
 * Each case checks exact outcomes, prints `# ...` diagnostics and "FAIL: ..." on a mismatch,
 * and exits 0 when everything held. ETCD_CA, ETCD_CERT and ETCD_KEY (environment) are the TLS
 * files of the client. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "store/etcd.h"

static const char *url;
static int failures;

#define CHECK(cond, ...)                                                                           \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			printf("FAIL: %s:%d: ", __func__, __LINE__);                               \
			printf(__VA_ARGS__);                                                       \
			printf("\n");                                                              \
			failures++;                                                                \
		}                                                                                  \
	} while (0)

/* r == want, or a diagnostic naming what came back. */
#define CHECK_R(r, want, e, what)                                                                  \
	CHECK((r) == (want), "%s: expected %d, got %d (%s)", what, want, r, (e)->message)

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static struct etcd *client(const char *prefix)
{
	struct etcd_config cfg = {
		.url = url,
		.prefix = prefix,
		.ca_file = getenv("ETCD_CA"),
		.cert_file = getenv("ETCD_CERT"),
		.key_file = getenv("ETCD_KEY"),
	};
	struct station_error e = {};
	struct etcd *c;
	int r;

	r = etcd_new(&cfg, &c, &e);
	if (r < 0) {
		printf("FAIL: etcd_new(%s): %d %s\n", url, r, e.message);
		exit(1);
	}
	return c;
}

/* ---- keys ----------------------------------------------------------------------------------- */

static void case_kv(void)
{
	struct etcd *a = client("/a/"), *b = client("/b");
	struct station_error e = {};
	static const char bin[] = { 'x', 0, (char)0xff, '\n' };
	struct etcd_kv kv = {}, *v = NULL;
	int64_t rev = 0, rev2 = 0;
	size_t n = 0;
	int r;

	CHECK(strcmp(etcd_describe(b), "") && strstr(etcd_describe(b), "prefix /b/"),
	      "describe: '%s'", etcd_describe(b));
	r = etcd_delete(a, "", true, &e);
	CHECK_R(r, 0, &e, "delete all of /a/");
	r = etcd_get(a, "k1", &kv, NULL, &e);
	CHECK_R(r, -ENOENT, &e, "get of a missing key");
	r = etcd_put(a, "k1", "v1", 2, 0, &e);
	CHECK_R(r, 0, &e, "put k1");
	r = etcd_put(a, "dir/k2", bin, sizeof bin, 0, &e);
	CHECK_R(r, 0, &e, "put dir/k2");
	r = etcd_put(a, "dir/k3", "", 0, 0, &e);
	CHECK_R(r, 0, &e, "put dir/k3 (empty)");
	r = etcd_put(b, "k1", "other", 5, 0, &e);
	CHECK_R(r, 0, &e, "put k1 under /b/");
	r = etcd_get(a, "k1", &kv, &rev, &e);
	CHECK_R(r, 0, &e, "get k1");
	if (r == 0) {
		CHECK(strcmp(kv.key, "k1") == 0 && kv.value_len == 2 && strcmp(kv.value, "v1") == 0,
		      "k1 = '%s' '%s' (%zu)", kv.key, kv.value, kv.value_len);
		CHECK(kv.mod_revision > 0 && rev >= kv.mod_revision && kv.lease == 0,
		      "revisions %" PRId64 " %" PRId64, kv.mod_revision, rev);
		free(kv.key);
		free(kv.value);
	}
	r = etcd_range(a, "dir/", &v, &n, &rev2, &e);
	CHECK_R(r, 0, &e, "range dir/");
	if (r == 0) {
		CHECK(n == 2, "range dir/: %zu keys", n);
		if (n == 2) {
			CHECK(strcmp(v[0].key, "dir/k2") == 0 && v[0].value_len == sizeof bin &&
				      memcmp(v[0].value, bin, sizeof bin) == 0,
			      "dir/k2: '%s' %zu bytes", v[0].key, v[0].value_len);
			CHECK(strcmp(v[1].key, "dir/k3") == 0 && v[1].value_len == 0 &&
				      v[1].value[0] == '\0',
			      "dir/k3: '%s' %zu bytes", v[1].key, v[1].value_len);
		}
		CHECK(rev2 >= rev, "range revision %" PRId64 " < %" PRId64, rev2, rev);
		etcd_kv_free_array(v, n);
	}
	/* prefix isolation: /a/ sees its three keys, /b/ its one */
	r = etcd_range(a, "", &v, &n, NULL, &e);
	CHECK(r == 0 && n == 3, "range of /a/: %d, %zu keys", r, n);
	if (r == 0)
		etcd_kv_free_array(v, n);
	r = etcd_range(b, "", &v, &n, NULL, &e);
	CHECK(r == 0 && n == 1, "range of /b/: %d, %zu keys", r, n);
	if (r == 0) {
		CHECK(n == 0 || (strcmp(v[0].key, "k1") == 0 && strcmp(v[0].value, "other") == 0),
		      "/b/'s key: '%s' = '%s'", v[0].key, v[0].value);
		etcd_kv_free_array(v, n);
	}
	r = etcd_get(b, "dir/k2", &kv, NULL, &e);
	CHECK_R(r, -ENOENT, &e, "/b/ reads /a/'s dir/k2");
	/* create */
	r = etcd_create(a, "k1", "new", 3, 0, &e);
	CHECK_R(r, -EEXIST, &e, "create of an existing key");
	r = etcd_create(a, "k4", "v4", 2, 0, &e);
	CHECK_R(r, 0, &e, "create k4");
	r = etcd_get(a, "k4", &kv, NULL, &e);
	CHECK(r == 0 && strcmp(kv.value, "v4") == 0, "k4 after create: %d", r);
	if (r == 0) {
		free(kv.key);
		free(kv.value);
	}
	/* delete */
	r = etcd_delete(a, "k1", false, &e);
	CHECK_R(r, 0, &e, "delete k1");
	r = etcd_delete(a, "k1", false, &e);
	CHECK_R(r, -ENOENT, &e, "delete k1 again");
	r = etcd_delete(a, "dir/", true, &e);
	CHECK_R(r, 0, &e, "delete dir/ prefix");
	r = etcd_delete(a, "dir/", true, &e);
	CHECK_R(r, 0, &e, "delete an empty prefix");
	r = etcd_range(a, "", &v, &n, NULL, &e);
	CHECK(r == 0 && n == 1, "range of /a/ after the deletes: %d, %zu keys", r, n);
	if (r == 0)
		etcd_kv_free_array(v, n);
	r = etcd_get(b, "k1", &kv, NULL, &e);
	CHECK(r == 0 && strcmp(kv.value, "other") == 0, "/b/'s k1 after /a/'s deletes: %d", r);
	if (r == 0) {
		free(kv.key);
		free(kv.value);
	}
	etcd_free(a);
	etcd_free(b);
}

static void case_config(void)
{
	static const struct {
		struct etcd_config cfg;
		const char *words;
	} bad[] = {
		{ { .url = "http://127.0.0.1:2379" }, "must begin with etcd://" },
		{ { .url = "etcd://127.0.0.1" }, "has no port" },
		{ { .url = "etcd://:2379" }, "has no host" },
		{ { .url = "etcd://127.0.0.1:0" }, "port out of range" },
		{ { .url = "etcd://127.0.0.1:65536" }, "port out of range" },
		{ { .url = "etcd://127.0.0.1:2379,," }, "has no port" },
		{ { .url = "etcd://a b:2379" }, "bad character" },
		{ { .url = "etcd://a:1,a:2,a:3,a:4,a:5,a:6,a:7,a:8,a:9" }, "more than 8" },
		{ { .url = "etcd://a:1", .ca_file = "/dev/null" }, "need an etcds://" },
		{ { .url = "etcds://a:1", .cert_file = "/dev/null" }, "needs its key" },
		{ { .url = "etcds://a:1", .ca_file = "/nonexistent/ca" }, "cannot be read" },
	};
	struct station_error e;
	struct etcd *c;
	int r;

	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		memset(&e, 0, sizeof e);
		r = etcd_new(&bad[i].cfg, &c, &e);
		CHECK(r == -EINVAL && strstr(e.message, bad[i].words), "%s: %d '%s'",
		      bad[i].cfg.url, r, e.message);
	}
	/* the positive controls */
	static const char *good[] = { "etcd://127.0.0.1:2379", "etcd://a:1,[::1]:2,b.example:3/",
				      "etcds://h:443" };
	for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
		struct etcd_config cfg = { .url = good[i], .prefix = i == 1 ? "/p" : NULL };

		r = etcd_new(&cfg, &c, &e);
		CHECK(r == 0, "%s: %d %s", good[i], r, e.message);
		if (r < 0)
			continue;
		printf("# %s\n", etcd_describe(c));
		etcd_free(c);
	}
}

/* ---- leases --------------------------------------------------------------------------------- */

/* Waits (at most bound_ms) until key is absent: the ms it took, or -1. */
static long wait_gone(struct etcd *c, const char *key, long bound_ms)
{
	uint64_t start = now_ms();
	struct station_error e = {};
	struct etcd_kv kv;

	while (now_ms() - start < (uint64_t)bound_ms) {
		int r = etcd_get(c, key, &kv, NULL, &e);

		if (r == -ENOENT)
			return (long)(now_ms() - start);
		if (r == 0) {
			free(kv.key);
			free(kv.value);
		}
		usleep(100 * 1000);
	}
	return -1;
}

static void case_lease(void)
{
	struct etcd *c = client("/lease/");
	struct station_error e = {};
	struct etcd_kv kv = {};
	int64_t id = 0, id2 = 0;
	long ms;
	int r;

	/* expires without keepalives */
	r = etcd_lease_grant(c, 2, &id, &e);
	CHECK_R(r, 0, &e, "grant");
	r = etcd_put(c, "mortal", "x", 1, id, &e);
	CHECK_R(r, 0, &e, "put under the lease");
	r = etcd_get(c, "mortal", &kv, NULL, &e);
	CHECK(r == 0 && kv.lease == id, "the key's lease: %d %" PRId64 " (want %" PRId64 ")", r,
	      kv.lease, id);
	if (r == 0) {
		free(kv.key);
		free(kv.value);
	}
	ms = wait_gone(c, "mortal", 10000);
	CHECK(ms >= 0, "the key of a 2 s lease still there after 10 s");
	printf("# a 2 s lease's key gone after %ld ms\n", ms);
	r = etcd_lease_keepalive(c, id, &e);
	CHECK_R(r, -ENOENT, &e, "keepalive of an expired lease");

	/* lives with them */
	r = etcd_lease_grant(c, 2, &id2, &e);
	CHECK_R(r, 0, &e, "grant");
	r = etcd_put(c, "kept", "x", 1, id2, &e);
	CHECK_R(r, 0, &e, "put under the lease");
	for (int i = 0; i < 10; i++) {
		usleep(500 * 1000);
		r = etcd_lease_keepalive(c, id2, &e);
		CHECK_R(r, 0, &e, "keepalive");
	}
	r = etcd_get(c, "kept", &kv, NULL, &e);
	CHECK_R(r, 0, &e, "the key of a lease kept alive 5 s");
	if (r == 0) {
		free(kv.key);
		free(kv.value);
	}
	/* revoke takes its keys at once */
	r = etcd_lease_revoke(c, id2, &e);
	CHECK_R(r, 0, &e, "revoke");
	r = etcd_get(c, "kept", &kv, NULL, &e);
	CHECK_R(r, -ENOENT, &e, "the key of a revoked lease");
	r = etcd_lease_revoke(c, id2, &e);
	CHECK_R(r, -ENOENT, &e, "revoke again");
	r = etcd_lease_keepalive(c, id2, &e);
	CHECK_R(r, -ENOENT, &e, "keepalive of a revoked lease");
	r = etcd_put(c, "orphan", "x", 1, id2, &e);
	CHECK_R(r, -ENOENT, &e, "put under a revoked lease");
	r = etcd_lease_grant(c, 0, &id, &e);
	CHECK_R(r, -EINVAL, &e, "a lease of 0 s");
	etcd_free(c);
}

/* ---- watch ---------------------------------------------------------------------------------- */

struct seen {
	char text[4096];
	size_t len;
	int64_t last_revision;
	bool out_of_order;
	volatile int stop;
	int stop_after; /* events; 0: never */
	int events;
};

static void on_event(const struct etcd_event *ev, void *userdata)
{
	struct seen *s = userdata;

	if (ev->kv.mod_revision < s->last_revision)
		s->out_of_order = true;
	s->last_revision = ev->kv.mod_revision;
	if (s->len < sizeof s->text)
		s->len += (size_t)snprintf(s->text + s->len, sizeof s->text - s->len, "%s %s=%s;",
					   ev->type == ETCD_EVENT_PUT ? "put" : "delete",
					   ev->kv.key,
					   ev->type == ETCD_EVENT_PUT ? ev->kv.value : "");
	if (++s->events == s->stop_after)
		s->stop = 1;
}

struct watcher {
	struct etcd *c;
	const char *key_prefix;
	int64_t from;
	struct seen seen;
	int r;
	struct station_error e;
	uint64_t returned_ms;
	pthread_t thread;
};

static void *watch_thread(void *userdata)
{
	struct watcher *w = userdata;

	w->r = etcd_watch(w->c, w->key_prefix, w->from, on_event, &w->seen, &w->seen.stop, &w->e);
	__atomic_store_n(&w->returned_ms, now_ms(), __ATOMIC_SEQ_CST);
	return NULL;
}

static bool wait_events(struct watcher *w, int n, long bound_ms)
{
	uint64_t start = now_ms();

	while (__atomic_load_n(&w->seen.events, __ATOMIC_SEQ_CST) < n) {
		if (now_ms() - start > (uint64_t)bound_ms ||
		    __atomic_load_n(&w->returned_ms, __ATOMIC_SEQ_CST))
			return false;
		usleep(20 * 1000);
	}
	return true;
}

static void case_watch(void)
{
	struct etcd *c = client("/w/"), *other = client("/w2/");
	struct station_error e = {};
	struct etcd_kv kv;
	int64_t rev = 0;
	uint64_t stopped;
	int r;

	static struct watcher w;

	/* the history: a put, a put outside the watched keys, a put, a delete; another
	 * prefix's key of the same name */
	r = etcd_put(c, "x/k1", "v1", 2, 0, &e);
	CHECK_R(r, 0, &e, "put");
	r = etcd_get(c, "x/k1", &kv, &rev, &e);
	CHECK_R(r, 0, &e, "get");
	if (r == 0) {
		free(kv.key);
		free(kv.value);
	}
	r = etcd_put(c, "y/k", "no", 2, 0, &e);
	CHECK_R(r, 0, &e, "put");
	r = etcd_put(other, "x/k9", "no", 2, 0, &e);
	CHECK_R(r, 0, &e, "put");
	r = etcd_put(c, "x/k2", "v2", 2, 0, &e);
	CHECK_R(r, 0, &e, "put");
	r = etcd_delete(c, "x/k1", false, &e);
	CHECK_R(r, 0, &e, "delete");

	w.c = c;
	w.key_prefix = "x/";
	w.from = rev;
	r = pthread_create(&w.thread, NULL, watch_thread, &w);
	CHECK(r == 0, "pthread_create");
	CHECK(wait_events(&w, 3, 10000), "3 events of the history within 10 s: saw '%s' (%d %s)",
	      w.seen.text, w.r, w.e.message);
	/* and what comes while it watches */
	r = etcd_put(c, "x/k3", "v3", 2, 0, &e);
	CHECK_R(r, 0, &e, "put");
	r = etcd_put(other, "x/k3", "no", 2, 0, &e);
	CHECK_R(r, 0, &e, "put");
	r = etcd_delete(c, "x/", true, &e);
	CHECK_R(r, 0, &e, "delete prefix");
	CHECK(wait_events(&w, 6, 10000), "6 events within 10 s: saw '%s' (%d %s)", w.seen.text, w.r,
	      w.e.message);
	CHECK(strcmp(w.seen.text, "put x/k1=v1;put x/k2=v2;delete x/k1=;put x/k3=v3;"
				  "delete x/k2=;delete x/k3=;") == 0,
	      "events: '%s'", w.seen.text);
	CHECK(!w.seen.out_of_order, "events out of revision order");

	/* idle now: *stop is seen within a tick */
	usleep(300 * 1000);
	stopped = now_ms();
	w.seen.stop = 1;
	pthread_join(w.thread, NULL);
	CHECK_R(w.r, 0, &w.e, "watch after stop");
	printf("# the watch returned %" PRIu64 " ms after stop\n", w.returned_ms - stopped);
	CHECK(w.returned_ms - stopped <= ETCD_WATCH_TICK_MS + 100,
	      "the watch returned %" PRIu64 " ms after stop (tick %d ms)", w.returned_ms - stopped,
	      ETCD_WATCH_TICK_MS);
	printf("revision %" PRId64 "\n", rev);
	etcd_free(c);
	etcd_free(other);
}

/* A watch from ARG: -ERANGE (compacted) or, with "ok", 0 after its first event. */
static void case_watch_from(const char *arg, bool want_ok)
{
	struct etcd *c = client("/w/");
	struct seen seen = { .stop_after = 1 };
	struct station_error e = {};
	int64_t from = strtoll(arg, NULL, 10);
	int r;

	r = etcd_watch(c, "", from, on_event, &seen, &seen.stop, &e);
	if (want_ok) {
		CHECK_R(r, 0, &e, "watch");
		CHECK(seen.events >= 1, "%d events", seen.events);
	} else {
		CHECK_R(r, -ERANGE, &e, "watch from a compacted revision");
		CHECK(seen.events == 0, "%d events before -ERANGE", seen.events);
	}
	if (e.message[0])
		printf("# %s\n", e.message);
	etcd_free(c);
}

/* ---- failures ------------------------------------------------------------------------------- */

/* ARG: the errno (positive) every call must fail with, within ETCD_CALL_MS + 2 s, its message
 * holding ARG2. */
static void case_fail(const char *err_s, const char *words)
{
	struct etcd *c = client("/f/");
	struct station_error e = {};
	struct etcd_kv kv;
	int want = -atoi(err_s);
	uint64_t start;
	long took;
	int r;

	start = now_ms();
	memset(&e, 0, sizeof e);
	r = etcd_get(c, "k", &kv, NULL, &e);
	took = (long)(now_ms() - start);
	CHECK_R(r, want, &e, "get");
	CHECK(strstr(e.message, words), "get's message '%s' does not hold '%s'", e.message, words);
	CHECK(took <= ETCD_CALL_MS + 2000, "get took %ld ms", took);
	printf("# get: %d after %ld ms: %s\n", r, took, e.message);

	start = now_ms();
	memset(&e, 0, sizeof e);
	{
		volatile int stop = 0;
		struct seen seen = {};

		r = etcd_watch(c, "", 1, on_event, &seen, &stop, &e);
	}
	took = (long)(now_ms() - start);
	CHECK_R(r, want, &e, "watch");
	CHECK(strstr(e.message, words), "watch's message '%s' does not hold '%s'", e.message,
	      words);
	CHECK(took <= ETCD_CALL_MS + 2000, "watch took %ld ms", took);
	printf("# watch: %d after %ld ms: %s\n", r, took, e.message);
	etcd_free(c);
}

/* A range answered with more than ETCD_ANSWER_MAX, a watch message over its bound. */
static void case_big(void)
{
	struct etcd *c = client("/big/");
	struct station_error e = {};
	struct etcd_kv *v;
	volatile int stop = 0;
	struct seen seen = {};
	size_t n;
	int r;

	r = etcd_range(c, "", &v, &n, NULL, &e);
	CHECK_R(r, -EFBIG, &e, "range of a too large answer");
	printf("# range: %s\n", e.message);
	r = etcd_watch(c, "", 1, on_event, &seen, &stop, &e);
	CHECK_R(r, -EFBIG, &e, "watch of a too large message");
	CHECK(seen.events == 1, "%d events before the large message", seen.events);
	printf("# watch: %s\n", e.message);
	etcd_free(c);
}

/* Answers that name a key outside the prefix. */
static void case_foreign(void)
{
	struct etcd *c = client("/big/");
	struct station_error e = {};
	struct etcd_kv kv;
	volatile int stop = 0;
	struct seen seen = {};
	int r;

	r = etcd_get(c, "k", &kv, NULL, &e);
	CHECK_R(r, -EPROTO, &e, "get answered with a key outside the prefix");
	CHECK(strstr(e.message, "outside the prefix"), "message: %s", e.message);
	r = etcd_watch(c, "", 1, on_event, &seen, &stop, &e);
	CHECK_R(r, -EPROTO, &e, "watch answered with a key outside the prefix");
	CHECK(seen.events == 0, "%d events", seen.events);
	etcd_free(c);
}

/* put, then get the same (a failover URL or TLS). */
static void case_roundtrip(void)
{
	struct etcd *c = client("/rt/");
	struct station_error e = {};
	struct etcd_kv kv;
	uint64_t start = now_ms();
	int r;

	r = etcd_put(c, "k", "v", 1, 0, &e);
	CHECK_R(r, 0, &e, "put");
	r = etcd_get(c, "k", &kv, NULL, &e);
	CHECK_R(r, 0, &e, "get");
	if (r == 0) {
		CHECK(strcmp(kv.value, "v") == 0, "value '%s'", kv.value);
		free(kv.key);
		free(kv.value);
	}
	printf("# put and get in %" PRIu64 " ms\n", now_ms() - start);
	etcd_free(c);
}

int main(int argc, char **argv)
{
	const char *name;

	if (argc < 3) {
		fprintf(stderr, "usage: etcd-check URL CASE [ARG...]\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	alarm(120); /* a call that hangs fails the case instead of the whole script */
	url = argv[1];
	name = argv[2];
	if (strcmp(name, "kv") == 0)
		case_kv();
	else if (strcmp(name, "config") == 0)
		case_config();
	else if (strcmp(name, "lease") == 0)
		case_lease();
	else if (strcmp(name, "watch") == 0)
		case_watch();
	else if (strcmp(name, "watch-from") == 0 && argc == 4)
		case_watch_from(argv[3], false);
	else if (strcmp(name, "watch-ok") == 0 && argc == 4)
		case_watch_from(argv[3], true);
	else if (strcmp(name, "fail") == 0 && argc == 5)
		case_fail(argv[3], argv[4]);
	else if (strcmp(name, "big") == 0)
		case_big();
	else if (strcmp(name, "foreign") == 0)
		case_foreign();
	else if (strcmp(name, "roundtrip") == 0)
		case_roundtrip();
	else {
		fprintf(stderr, "etcd-check: unknown case '%s'\n", name);
		return 2;
	}
	return failures ? 1 : 0;
}
