/* SPDX-License-Identifier: MIT */
/* manager-secret.c on a real store in a temporary directory, around a manager that holds only
 * what secrets use (the store, the key and its workspaces): the lookup the credential path
 * makes, before and after the secrets are loaded again as at a controller start, and what is
 * refused, each beside the same lookup succeeding. */

#include <criterion/criterion.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "basic/list.h"
#include "basic/util.h"
#include "event/event.h"
#include "daemon/manager-internal.h"
#include "store/secret-box.h"

/* The two functions of manager.c that manager-secret.c uses. */
struct workspace *workspace_find(struct manager *m, const char *id)
{
	for (struct workspace *ws = m->workspaces; ws; ws = ws->next)
		if (strcmp(ws->row.id, id) == 0)
			return ws;
	return NULL;
}

int workspace_lookup(struct manager *m, const char *id, struct workspace **ret,
		     struct station_error *e)
{
	struct workspace *ws = workspace_find(m, id);
	if (!ws)
		return station_error_set(e, -ENOENT, NULL, "workspace \"%s\" not found", id);
	*ret = ws;
	return 0;
}

static char dir[] = "/tmp/test-daemon-secret-XXXXXX";
static char db_path[PATH_MAX];
static struct store *store;
static const uint8_t key[SECRET_KEY_BYTES] = "k3y-for-the-secrets-of-this-tst";

static struct manager *manager_make(const uint8_t *k)
{
	struct manager *m = calloc(1, sizeof *m);
	static const char *const ids[] = { "w1-a", "w1-b" };

	cr_assert_not_null(m);
	m->store = store;
	if (k) {
		memcpy(m->secret_key, k, SECRET_KEY_BYTES);
		m->secret_key_set = true;
	}
	for (size_t i = 0; i < ELEMENTSOF(ids); i++) {
		struct workspace *ws = calloc(1, sizeof *ws);
		cr_assert_not_null(ws);
		ws->m = m;
		ws->row.id = strdup(ids[i]);
		ws->row.state = WORKSPACE_READY;
		LIST_PREPEND(&m->workspaces, ws);
		m->n_workspaces++;
	}
	return m;
}

static void manager_drop(struct manager *m)
{
	while (m->workspaces) {
		struct workspace *ws = m->workspaces;
		LIST_REMOVE(&m->workspaces, ws);
		secrets_free_all(ws);
		free(ws->row.id);
		free(ws);
	}
	free(m);
}

static void setup(void)
{
	static const char *const ids[] = { "w1-a", "w1-b" };

	cr_assert_not_null(mkdtemp(dir));
	snprintf(db_path, sizeof db_path, "%s/station.db", dir);
	cr_assert_eq(store_open(db_path, &store), 0);
	for (size_t i = 0; i < ELEMENTSOF(ids); i++) {
		struct workspace_row w = {
			.id = (char *)ids[i],
			.worker = "w1",
			.adapter = "host",
			.state = WORKSPACE_READY,
			.spec_json = "{}",
			.created_at = 1,
			.updated_at = 1,
		};
		cr_assert_eq(store_workspace_insert(store, &w), 0);
	}
}

static void teardown(void)
{
	const char *suffixes[] = { "", "-wal", "-shm" };
	char p[PATH_MAX];

	store_close(store);
	for (size_t i = 0; i < ELEMENTSOF(suffixes); i++) {
		snprintf(p, sizeof p, "%s%s", db_path, suffixes[i]);
		unlink(p);
	}
	rmdir(dir);
}

TestSuite(secret, .init = setup, .fini = teardown);

/* PUT with body (JSON text); returns the error, *created set on success. */
static int put(struct manager *m, const char *ws, const char *name, const char *body, bool *created,
	       struct station_error *e)
{
	json_t *b = json_loads(body, JSON_ALLOW_NUL, NULL), *ret = NULL;
	bool c = false;
	int r;

	cr_assert_not_null(b, "%s", body);
	r = manager_secret_put(m, ws, name, b, &ret, &c, e);
	json_decref(b);
	json_decref(ret);
	if (created)
		*created = c;
	return r;
}

static void put_ok(struct manager *m, const char *ws, const char *name, const char *body)
{
	struct station_error e = {};
	cr_assert_eq(put(m, ws, name, body, NULL, &e), 0, "%s", e.message);
}

/* for_host's answer: 0 with "name username password" in buf, or the error. */
static int ask(struct manager *m, const char *ws, const char *protocol, const char *host,
	       char buf[256])
{
	char *name = NULL, *user = NULL, *pass = NULL;
	int r = manager_secret_for_host(m, ws, protocol, host, &name, &user, &pass);

	buf[0] = '\0';
	if (r == 0) {
		snprintf(buf, 256, "%s %s %s", name, user, pass);
		free(name);
		free(user);
		erase_and_free(pass);
	} else {
		cr_assert_null(name);
		cr_assert_null(pass);
	}
	return r;
}

Test(secret, the_scoped_host_gets_its_value_and_nothing_else_does)
{
	struct manager *m = manager_make(key);
	char buf[256];

	put_ok(m, "w1-a", "gh", "{\"value\":\"tok-1\",\"host\":\"GitHub.com\"}");
	put_ok(m, "w1-a", "plain", "{\"value\":\"tok-unscoped\"}");
	put_ok(m, "w1-a", "port", "{\"value\":\"tok-port\",\"host\":\"git.example.com:8443\"}");

	cr_assert_eq(ask(m, "w1-a", "https", "github.com", buf), 0);
	cr_assert_str_eq(buf, "gh x-access-token tok-1");
	cr_assert_eq(ask(m, "w1-a", "http", "GITHUB.COM", buf), 0);
	cr_assert_str_eq(buf, "gh x-access-token tok-1");
	cr_assert_eq(ask(m, "w1-a", "https", "git.example.com:8443", buf), 0);
	cr_assert_str_eq(buf, "port x-access-token tok-port");

	cr_assert_eq(ask(m, "w1-a", "ftp", "github.com", buf), -ENOENT, "another protocol");
	cr_assert_eq(ask(m, "w1-a", "ssh", "github.com", buf), -ENOENT);
	cr_assert_eq(ask(m, "w1-a", "https", "api.github.com", buf), -ENOENT, "another host");
	cr_assert_eq(ask(m, "w1-a", "https", "github.com.evil.test", buf), -ENOENT);
	cr_assert_eq(ask(m, "w1-a", "https", "github.com:443", buf), -ENOENT, "another port");
	cr_assert_eq(ask(m, "w1-a", "https", "git.example.com", buf), -ENOENT, "no port");
	cr_assert_eq(ask(m, "w1-a", "https", "", buf), -ENOENT, "unscoped is never released");
	cr_assert_eq(ask(m, "w1-b", "https", "github.com", buf), -ENOENT, "another workspace");
	cr_assert_eq(ask(m, "w1-x", "https", "github.com", buf), -ENOENT, "no workspace");
	manager_drop(m);
}

Test(secret, replaced_and_revoked_at_once)
{
	struct manager *m = manager_make(key);
	struct station_error e = {};
	json_t *ret = NULL;
	bool created = false;
	char buf[256];

	cr_assert_eq(put(m, "w1-a", "gh", "{\"value\":\"old\",\"host\":\"github.com\"}", &created,
			 &e),
		     0);
	cr_assert(created);
	cr_assert_eq(put(m, "w1-a", "gh",
			 "{\"value\":\"new\",\"host\":\"github.com\",\"username\":\"bot\"}",
			 &created, &e),
		     0);
	cr_assert_not(created);
	cr_assert_eq(ask(m, "w1-a", "https", "github.com", buf), 0);
	cr_assert_str_eq(buf, "gh bot new");
	cr_assert_eq(manager_secret_delete(m, "w1-a", "gh", &ret, &e), 0);
	json_decref(ret);
	cr_assert_eq(ask(m, "w1-a", "https", "github.com", buf), -ENOENT, "revoked");
	cr_assert_eq(manager_secret_delete(m, "w1-a", "gh", &ret, &e), -ENOENT);
	manager_drop(m);
}

/* Sets the updatedAt of the stored secret name to t. */
static void set_updated(const char *name, uint64_t t)
{
	struct secret_row *rows = NULL;
	size_t n = 0;

	cr_assert_eq(store_secret_list(store, &rows, &n), 0);
	for (size_t i = 0; i < n; i++) {
		if (strcmp(rows[i].name, name) == 0) {
			rows[i].updated_at = t;
			cr_assert_eq(store_secret_put(store, &rows[i]), 0);
		}
		secret_row_free(&rows[i]);
	}
	free(rows);
}

/* Two secrets for one host: the one put last is released, whatever the names' order. */
static void assert_newest(uint64_t t_a, uint64_t t_b, const char *want)
{
	struct manager *m;
	char buf[256];

	set_updated("a", t_a);
	set_updated("b", t_b);
	m = manager_make(key);
	secrets_load(m);
	cr_assert_eq(ask(m, "w1-a", "https", "github.com", buf), 0);
	cr_assert_str_eq(buf, want);
	manager_drop(m);
}

Test(secret, the_newest_of_two_for_one_host_wins)
{
	struct manager *m = manager_make(key);

	put_ok(m, "w1-a", "a", "{\"value\":\"one\",\"host\":\"github.com\"}");
	put_ok(m, "w1-a", "b", "{\"value\":\"two\",\"host\":\"github.com\"}");
	manager_drop(m);
	assert_newest(1000, 2000, "b x-access-token two");
	assert_newest(2000, 1000, "a x-access-token one");
}

Test(secret, the_request_value_is_wiped)
{
	struct manager *m = manager_make(key);
	struct station_error e = {};
	json_t *body = json_pack("{s:s,s:s}", "value", "wipe-me-please", "host", "github.com");
	json_t *ret = NULL;
	bool created;
	const char *v = json_string_value(json_object_get(body, "value"));

	cr_assert_eq(manager_secret_put(m, "w1-a", "gh", body, &ret, &created, &e), 0);
	for (size_t i = 0; i < 14; i++)
		cr_assert_eq(v[i], 0, "byte %zu", i);
	cr_assert_null(json_object_get(ret, "value"));
	json_decref(ret);
	json_decref(body);
	/* refused requests too */
	body = json_pack("{s:s,s:s}", "value", "wipe-me-too", "host", "bad host");
	v = json_string_value(json_object_get(body, "value"));
	cr_assert_eq(manager_secret_put(m, "w1-a", "x", body, &ret, &created, &e), -EINVAL);
	cr_assert_str_eq(e.field, "host");
	cr_assert_null(strstr(e.message, "wipe-me-too"), "%s", e.message);
	for (size_t i = 0; i < 11; i++)
		cr_assert_eq(v[i], 0, "byte %zu", i);
	json_decref(body);
	manager_drop(m);
}

Test(secret, refused_fields_are_named_and_never_quote_the_value)
{
	struct manager *m = manager_make(key);
	static const struct {
		const char *body, *field;
	} bad[] = {
		{ "{}", "value" },
		{ "{\"value\":\"\"}", "value" },
		{ "{\"value\":\"v-abc\\u0000\"}", "value" },
		{ "{\"value\":\"v-abc\\nprotocol=http\"}", "value" },
		{ "{\"value\":\"v-abc\",\"host\":\"a..b\"}", "host" },
		{ "{\"value\":\"v-abc\",\"host\":\"a.b:\"}", "host" },
		{ "{\"value\":\"v-abc\",\"host\":\"a.b:08\"}", "host" },
		{ "{\"value\":\"v-abc\",\"host\":\"a_b.com\"}", "host" },
		{ "{\"value\":\"v-abc\",\"host\":7}", "host" },
		{ "{\"value\":\"v-abc\",\"username\":\"\"}", "username" },
		{ "{\"value\":\"v-abc\",\"username\":\"a\\u0001\"}", "username" },
		{ "{\"value\":\"v-abc\",\"expiresAt\":\"2020-01-01T00:00:00Z\"}", "expiresAt" },
		{ "{\"value\":\"v-abc\",\"other\":1}", "other" },
	};
	char name[80];

	for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
		struct station_error e = {};
		cr_assert_eq(put(m, "w1-a", "s", bad[i].body, NULL, &e), -EINVAL, "%s",
			     bad[i].body);
		cr_assert_str_eq(e.field, bad[i].field, "%s", bad[i].body);
		cr_assert_null(strstr(e.message, "v-abc"), "%s", e.message);
	}
	memset(name, 'n', 65);
	name[65] = '\0';
	struct station_error e = {};
	cr_assert_eq(put(m, "w1-a", name, "{\"value\":\"v\"}", NULL, &e), -EINVAL);
	cr_assert_str_eq(e.field, "name");
	cr_assert_eq(put(m, "w1-a", "a/b", "{\"value\":\"v\"}", NULL, &e), -EINVAL);
	/* positive control: the same fields, valid */
	put_ok(m, "w1-a", "s",
	       "{\"value\":\"v-abc\",\"host\":\"a-b.c0m:8080\",\"username\":\"u\","
	       "\"expiresAt\":\"2099-01-01T00:00:00Z\"}");
	manager_drop(m);
}

Test(secret, a_workspace_being_deleted_takes_no_secret_and_releases_none)
{
	struct manager *m = manager_make(key);
	struct workspace *ws = workspace_find(m, "w1-a");
	struct station_error e = {};
	char buf[256];

	put_ok(m, "w1-a", "gh", "{\"value\":\"tok\",\"host\":\"github.com\"}");
	cr_assert_eq(ask(m, "w1-a", "https", "github.com", buf), 0);
	ws->row.state = WORKSPACE_DELETING;
	cr_assert_eq(put(m, "w1-a", "gh2", "{\"value\":\"tok\"}", NULL, &e), -EBUSY);
	cr_assert_not_null(strstr(e.message, "being deleted"), "%s", e.message);
	cr_assert_eq(ask(m, "w1-a", "https", "github.com", buf), -ENOENT);
	manager_drop(m);
}

Test(secret, loaded_again_after_a_restart_with_the_same_key_only)
{
	struct manager *m = manager_make(key), *again, *other;
	uint8_t wrong[SECRET_KEY_BYTES];
	struct station_error e = {};
	json_t *list = NULL;
	char buf[256];

	put_ok(m, "w1-a", "gh", "{\"value\":\"tok-kept\",\"host\":\"github.com\"}");
	put_ok(m, "w1-b", "gl", "{\"value\":\"tok-b\",\"host\":\"gitlab.com\"}");
	manager_drop(m);

	again = manager_make(key);
	secrets_load(again);
	cr_assert_eq(ask(again, "w1-a", "https", "github.com", buf), 0);
	cr_assert_str_eq(buf, "gh x-access-token tok-kept");
	cr_assert_eq(ask(again, "w1-b", "https", "gitlab.com", buf), 0);
	cr_assert_str_eq(buf, "gl x-access-token tok-b");
	manager_drop(again);

	memcpy(wrong, key, sizeof wrong);
	wrong[0] ^= 1;
	other = manager_make(wrong);
	secrets_load(other);
	cr_assert_eq(ask(other, "w1-a", "https", "github.com", buf), -ENOENT);
	cr_assert_eq(manager_secret_list(other, "w1-a", &list, &e), 0);
	cr_assert_eq(json_array_size(json_object_get(list, "secrets")), 0);
	json_decref(list);
	manager_drop(other);
}

/* A row the workspace's own user cannot have made: copied to another workspace or name in the
 * store. Its associated data no longer matches, so it does not open. */
Test(secret, a_row_moved_to_another_workspace_or_name_does_not_open)
{
	struct manager *m = manager_make(key), *again;
	struct secret_row *rows = NULL;
	size_t n = 0;
	char buf[256];

	put_ok(m, "w1-a", "gh", "{\"value\":\"tok\",\"host\":\"github.com\"}");
	manager_drop(m);
	cr_assert_eq(store_secret_list(store, &rows, &n), 0);
	cr_assert_eq(n, 1);
	free(rows[0].workspace_id);
	rows[0].workspace_id = strdup("w1-b");
	cr_assert_eq(store_secret_put(store, &rows[0]), 0);
	free(rows[0].name);
	rows[0].name = strdup("gh2");
	free(rows[0].workspace_id);
	rows[0].workspace_id = strdup("w1-a");
	cr_assert_eq(store_secret_put(store, &rows[0]), 0);
	secret_row_free(&rows[0]);
	free(rows);

	again = manager_make(key);
	secrets_load(again);
	cr_assert_eq(ask(again, "w1-b", "https", "github.com", buf), -ENOENT, "moved workspace");
	cr_assert_eq(ask(again, "w1-a", "https", "github.com", buf), 0, "the original opens");
	cr_assert_str_eq(buf, "gh x-access-token tok", "and not the renamed copy");
	manager_drop(again);
}

Test(secret, expired_is_listed_and_never_released)
{
	struct manager *m = manager_make(key), *again;
	struct secret_row *rows = NULL;
	struct station_error e = {};
	json_t *s = NULL;
	size_t n = 0;
	char buf[256];

	put_ok(m, "w1-a", "gh",
	       "{\"value\":\"tok\",\"host\":\"github.com\",\"expiresAt\":\"2099-01-01T00:00:00Z\"}");
	cr_assert_eq(ask(m, "w1-a", "https", "github.com", buf), 0, "not expired yet");
	manager_drop(m);
	/* the same row with an expiry now in the past, as time would have made it */
	cr_assert_eq(store_secret_list(store, &rows, &n), 0);
	rows[0].expires_at = realtime_usec() - 1000000;
	cr_assert_eq(store_secret_put(store, &rows[0]), 0);
	secret_row_free(&rows[0]);
	free(rows);

	again = manager_make(key);
	secrets_load(again);
	cr_assert_eq(ask(again, "w1-a", "https", "github.com", buf), -ENOENT);
	cr_assert_eq(manager_secret_get(again, "w1-a", "gh", &s, &e), 0);
	cr_assert(json_is_true(json_object_get(s, "expired")));
	json_decref(s);
	manager_drop(again);
}
