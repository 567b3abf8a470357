/* SPDX-License-Identifier: MIT */
/* The store against a real SQLite database in a fresh temporary directory per test. */

#include <criterion/criterion.h>
#include <errno.h>
#include <limits.h>
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "domain/state.h"
#include "store/store-internal.h"

static char dir[] = "/tmp/test-store-XXXXXX";
static char db_path[PATH_MAX];
static struct store *store;

static void setup(void)
{
	cr_assert_not_null(mkdtemp(dir));
	snprintf(db_path, sizeof(db_path), "%s/station.db", dir);
	cr_assert_eq(store_open(db_path, &store), 0);
}

static void teardown(void)
{
	const char *suffixes[] = { "", "-wal", "-shm", "-journal" };
	char p[PATH_MAX];

	store_close(store);
	store = NULL;
	for (size_t i = 0; i < ELEMENTSOF(suffixes); i++) {
		snprintf(p, sizeof(p), "%s%s", db_path, suffixes[i]);
		unlink(p);
	}
	rmdir(dir);
}

TestSuite(store, .init = setup, .fini = teardown);

/* A second, plain SQLite connection to look at the file the way another process would. */
static int64_t sql_int(const char *sql)
{
	sqlite3 *db = NULL;
	sqlite3_stmt *st = NULL;
	int64_t v;

	cr_assert_eq(sqlite3_open_v2(db_path, &db, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
	cr_assert_eq(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK, "%s", sql);
	cr_assert_eq(sqlite3_step(st), SQLITE_ROW, "%s", sql);
	v = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	sqlite3_close(db);
	return v;
}

static void sql_exec(const char *sql)
{
	sqlite3 *db = NULL;

	cr_assert_eq(sqlite3_open_v2(db_path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE,
				     NULL),
		     SQLITE_OK);
	cr_assert_eq(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK, "%s", sql);
	sqlite3_close(db);
}

static struct workspace_row ws(char *id, uint64_t created_at)
{
	return (struct workspace_row){
		.id = id,
		.worker = "w1",
		.adapter = "host",
		.state = WORKSPACE_CREATING,
		.spec_json = "{\"cpus\":0}",
		.created_at = created_at,
		.updated_at = created_at,
	};
}

static void insert_ws(char *id, uint64_t created_at)
{
	struct workspace_row w = ws(id, created_at);

	cr_assert_eq(store_workspace_insert(store, &w), 0);
}

static struct run_row run(char *id, char *workspace_id, uint64_t created_at)
{
	return (struct run_row){
		.id = id,
		.workspace_id = workspace_id,
		.command = "echo hi",
		.timeout_ms = 60000,
		.max_output_bytes = 131072,
		.status = RUN_RUNNING,
		.exit_code = -1,
		.created_at = created_at,
	};
}

static void insert_run(char *id, char *workspace_id, uint64_t created_at)
{
	struct run_row r = run(id, workspace_id, created_at);

	cr_assert_eq(store_run_insert(store, &r), 0);
}

static void finish_run(char *id, char *workspace_id, uint64_t created_at, uint64_t ended_at)
{
	struct run_row r = run(id, workspace_id, created_at);

	r.status = RUN_EXITED;
	r.exit_code = 0;
	r.ended_at = ended_at;
	cr_assert_eq(store_run_finish(store, &r), 1);
}

/* The workspace's run ids, newest first, comma-separated. */
static void run_ids(char *workspace_id, char *buf, size_t size)
{
	struct run_row *rows = NULL;
	size_t n = 0, len = 0;

	cr_assert_eq(store_run_list(store, workspace_id, SIZE_MAX, &rows, &n), 0);
	buf[0] = '\0';
	for (size_t i = 0; i < n; i++) {
		len += snprintf(buf + len, size - len, "%s%s", i ? "," : "", rows[i].id);
		run_row_free(&rows[i]);
	}
	free(rows);
}

Test(store, migrations_applied_and_reopen_is_noop)
{
	struct workspace_row w = {};
	int64_t objects;
	struct stat stbuf;

	cr_assert_gt(store_n_migrations, 0);
	cr_assert_eq(sql_int("PRAGMA user_version"), (int64_t)store_n_migrations);
	objects = sql_int("SELECT count(*) FROM sqlite_schema");
	insert_ws("w1-a", 1);

	store_close(store);
	store = NULL;
	cr_assert_eq(store_open(db_path, &store), 0);
	cr_assert_eq(sql_int("PRAGMA user_version"), (int64_t)store_n_migrations);
	cr_assert_eq(sql_int("SELECT count(*) FROM sqlite_schema"), objects);
	cr_assert_eq(store_workspace_get(store, "w1-a", &w), 0);
	cr_assert_eq(w.state, WORKSPACE_CREATING);
	workspace_row_free(&w);

	cr_assert_eq(stat(db_path, &stbuf), 0);
	cr_assert_eq(stbuf.st_mode & 0777, 0600, "database mode %o", stbuf.st_mode & 0777);
}

Test(store, journal_mode_is_wal_and_foreign_keys_on)
{
	sqlite3_stmt *st = NULL;
	sqlite3 *db = NULL;

	/* journal_mode=WAL persists in the file: a fresh connection sees it. */
	cr_assert_eq(sqlite3_open_v2(db_path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
	cr_assert_eq(sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &st, NULL), SQLITE_OK);
	cr_assert_eq(sqlite3_step(st), SQLITE_ROW);
	cr_assert_str_eq((const char *)sqlite3_column_text(st, 0), "wal");
	sqlite3_finalize(st);
	sqlite3_close(db);

	cr_assert_eq(sqlite3_prepare_v2(store->db, "PRAGMA foreign_keys", -1, &st, NULL),
		     SQLITE_OK);
	cr_assert_eq(sqlite3_step(st), SQLITE_ROW);
	cr_assert_eq(sqlite3_column_int(st, 0), 1);
	sqlite3_finalize(st);
	cr_assert_eq(sqlite3_prepare_v2(store->db, "PRAGMA synchronous", -1, &st, NULL), SQLITE_OK);
	cr_assert_eq(sqlite3_step(st), SQLITE_ROW);
	cr_assert_eq(sqlite3_column_int(st, 0), 1); /* NORMAL */
	sqlite3_finalize(st);
}

Test(store, newer_database_is_refused)
{
	char sql[64];
	struct store *s = (struct store *)0x1;

	store_close(store);
	store = NULL;
	unlink(db_path);
	snprintf(sql, sizeof(sql), "PRAGMA user_version = %zu", store_n_migrations + 1);
	sql_exec(sql);

	cr_assert_eq(store_open(db_path, &s), -EPROTONOSUPPORT);
	cr_assert_eq(s, (struct store *)0x1, "ret touched on failure");
	cr_assert_eq(sql_int("PRAGMA user_version"), (int64_t)store_n_migrations + 1);
	cr_assert_eq(sql_int("SELECT count(*) FROM sqlite_schema"), 0);
	cr_assert_eq(sql_int("SELECT journal_mode = 'delete' FROM pragma_journal_mode"), 1,
		     "refused database was switched to WAL");

	/* Positive control: the same path at the current version opens. */
	snprintf(sql, sizeof(sql), "PRAGMA user_version = %zu", store_n_migrations);
	sql_exec(sql);
	sql_exec("CREATE TABLE workspaces (x)"); /* proves no migration runs again */
	cr_assert_eq(store_open(db_path, &store), 0);
}

Test(store, open_reports_errno_for_bad_path)
{
	struct store *s = NULL;

	cr_assert_eq(store_open("/nonexistent-dir/station.db", &s), -ENOENT);
	cr_assert_null(s);
}

Test(store, workspace_insert_get_update)
{
	struct workspace_row w = ws("w1-a", 10), got = {}, sentinel = { .agent_pid = 77 };

	w.cgroup = "v1:station/w1-a";
	cr_assert_eq(store_workspace_insert(store, &w), 0);
	cr_assert_eq(store_workspace_get(store, "w1-a", &got), 0);
	cr_assert_str_eq(got.id, "w1-a");
	cr_assert_str_eq(got.worker, "w1");
	cr_assert_str_eq(got.adapter, "host");
	cr_assert_eq(got.state, WORKSPACE_CREATING);
	cr_assert_null(got.reason);
	cr_assert_str_eq(got.spec_json, "{\"cpus\":0}");
	cr_assert_str_eq(got.cgroup, "v1:station/w1-a");
	cr_assert_null(got.agent_secret);
	cr_assert_eq(got.agent_pid, 0);
	cr_assert_eq(got.created_at, 10);
	cr_assert_eq(got.updated_at, 10);
	workspace_row_free(&got);
	cr_assert_null(got.id);

	w.state = WORKSPACE_STOPPED;
	w.reason = "agent exited";
	w.cgroup = NULL;
	w.agent_secret = "00ff";
	w.agent_pid = 4242;
	w.updated_at = 20;
	w.worker = "ignored";
	w.created_at = 99;
	cr_assert_eq(store_workspace_update(store, &w), 0);
	cr_assert_eq(store_workspace_get(store, "w1-a", &got), 0);
	cr_assert_eq(got.state, WORKSPACE_STOPPED);
	cr_assert_eq(sql_int("SELECT count(*) FROM workspaces WHERE state = 'stopped'"), 1);
	cr_assert_str_eq(got.reason, "agent exited");
	cr_assert_null(got.cgroup);
	cr_assert_str_eq(got.agent_secret, "00ff");
	cr_assert_eq(got.agent_pid, 4242);
	cr_assert_eq(got.updated_at, 20);
	cr_assert_str_eq(got.worker, "w1", "immutable column changed");
	cr_assert_eq(got.created_at, 10, "immutable column changed");
	workspace_row_free(&got);

	w.id = "w1-missing";
	cr_assert_eq(store_workspace_update(store, &w), -ENOENT);
	cr_assert_eq(store_workspace_get(store, "w1-missing", &sentinel), -ENOENT);
	cr_assert_eq(sentinel.agent_pid, 77, "ret touched on failure");
	workspace_row_free(NULL);
}

Test(store, workspace_duplicate_id)
{
	struct workspace_row w = ws("w1-a", 10), got = {};

	cr_assert_eq(store_workspace_insert(store, &w), 0);
	w.state = WORKSPACE_READY;
	cr_assert_eq(store_workspace_insert(store, &w), -EEXIST);
	cr_assert_eq(store_workspace_get(store, "w1-a", &got), 0);
	cr_assert_eq(got.state, WORKSPACE_CREATING);
	workspace_row_free(&got);
}

Test(store, workspace_list_oldest_first)
{
	struct workspace_row *rows = NULL;
	size_t n = 99;

	cr_assert_eq(store_workspace_list(store, &rows, &n), 0);
	cr_assert_eq(n, 0);
	free(rows);

	insert_ws("w1-b", 20);
	insert_ws("w1-c", 30);
	insert_ws("w1-a", 10);
	cr_assert_eq(store_workspace_list(store, &rows, &n), 0);
	cr_assert_eq(n, 3);
	cr_assert_str_eq(rows[0].id, "w1-a");
	cr_assert_str_eq(rows[1].id, "w1-b");
	cr_assert_str_eq(rows[2].id, "w1-c");
	for (size_t i = 0; i < n; i++)
		workspace_row_free(&rows[i]);
	free(rows);
}

Test(store, workspace_delete_cascades_to_runs)
{
	struct run_row r = {};
	char ids[256];

	insert_ws("w1-a", 1);
	insert_ws("w1-b", 2);
	insert_run("r-1", "w1-a", 1);
	insert_run("r-2", "w1-a", 2);
	insert_run("r-3", "w1-b", 3);

	cr_assert_eq(store_workspace_delete(store, "w1-a"), 0);
	cr_assert_eq(store_workspace_get(store, "w1-a", &(struct workspace_row){}), -ENOENT);
	cr_assert_eq(store_run_get(store, "w1-a", "r-1", &r), -ENOENT);
	cr_assert_eq(sql_int("SELECT count(*) FROM runs WHERE workspace_id = 'w1-a'"), 0);
	run_ids("w1-b", ids, sizeof(ids));
	cr_assert_str_eq(ids, "r-3");
	cr_assert_eq(store_workspace_delete(store, "w1-a"), -ENOENT);
}

Test(store, run_for_unknown_workspace)
{
	struct run_row r = run("r-1", "w1-nope", 1);

	cr_assert_eq(store_run_insert(store, &r), -ENOENT);
}

Test(store, run_duplicate_id)
{
	insert_ws("w1-a", 1);
	insert_run("r-1", "w1-a", 1);
	struct run_row r = run("r-1", "w1-a", 2);
	cr_assert_eq(store_run_insert(store, &r), -EEXIST);
}

Test(store, run_insert_get)
{
	struct run_row r = run("r-1", "w1-a", 100), got = {};

	insert_ws("w1-a", 1);
	r.cwd = "sub/dir";
	r.env_json = "{\"K\":\"V\"}";
	cr_assert_eq(store_run_insert(store, &r), 0);
	cr_assert_eq(store_run_get(store, "w1-a", "r-1", &got), 0);
	cr_assert_str_eq(got.id, "r-1");
	cr_assert_str_eq(got.workspace_id, "w1-a");
	cr_assert_str_eq(got.command, "echo hi");
	cr_assert_str_eq(got.cwd, "sub/dir");
	cr_assert_str_eq(got.env_json, "{\"K\":\"V\"}");
	cr_assert_eq(got.timeout_ms, 60000);
	cr_assert_eq(got.max_output_bytes, 131072);
	cr_assert_eq(got.status, RUN_RUNNING);
	cr_assert_eq(got.exit_code, -1);
	cr_assert_eq(got.signal, 0);
	cr_assert_null(got.reason);
	cr_assert_null(got.out[0].head);
	cr_assert_eq(got.out[0].head_len, 0);
	cr_assert_eq(got.created_at, 100);
	cr_assert_eq(got.started_at, 0);
	cr_assert_eq(got.ended_at, 0);
	run_row_free(&got);
	run_row_free(NULL);

	r.id = "r-2";
	r.cwd = NULL;
	r.env_json = NULL;
	cr_assert_eq(store_run_insert(store, &r), 0);
	cr_assert_eq(store_run_get(store, "w1-a", "r-2", &got), 0);
	cr_assert_null(got.cwd);
	cr_assert_null(got.env_json);
	run_row_free(&got);
}

Test(store, run_finish_binary_output_and_idempotence)
{
	static const uint8_t head[] = { 'a', 0, 'b', 0, 0, 0xff, 0x80, '\n' };
	static const uint8_t tail[] = { 0, 'z' };
	static const uint8_t err[] = { 0 };
	struct run_row r = run("r-1", "w1-a", 100), got = {};

	insert_ws("w1-a", 1);
	cr_assert_eq(store_run_insert(store, &r), 0);
	cr_assert_eq(store_run_set_started(store, "r-1", 150), 0);

	r.status = RUN_KILLED;
	r.exit_code = -1;
	r.signal = 9;
	r.oom_killed = true;
	r.truncated = true;
	r.reason = "oom";
	r.out[0] = (struct run_output){ (uint8_t *)head, sizeof(head), (uint8_t *)tail,
					sizeof(tail), 1000 };
	r.out[1] = (struct run_output){ (uint8_t *)err, sizeof(err), NULL, 0, 1 };
	r.ended_at = 200;
	r.cpu_usec = 1234;
	r.peak_memory = 1 << 20;
	cr_assert_eq(store_run_finish(store, &r), 1);

	/* A duplicate completion with other values changes nothing. */
	struct run_row dup = run("r-1", "w1-a", 100);
	dup.status = RUN_EXITED;
	dup.exit_code = 0;
	dup.ended_at = 300;
	cr_assert_eq(store_run_finish(store, &dup), 0);

	cr_assert_eq(store_run_get(store, "w1-a", "r-1", &got), 0);
	cr_assert_eq(got.status, RUN_KILLED);
	cr_assert_eq(got.exit_code, -1);
	cr_assert_eq(got.signal, 9);
	cr_assert(got.oom_killed);
	cr_assert(got.truncated);
	cr_assert_str_eq(got.reason, "oom");
	cr_assert_eq(got.out[0].head_len, sizeof(head));
	cr_assert_arr_eq(got.out[0].head, head, sizeof(head));
	cr_assert_eq(got.out[0].tail_len, sizeof(tail));
	cr_assert_arr_eq(got.out[0].tail, tail, sizeof(tail));
	cr_assert_eq(got.out[0].total, 1000);
	cr_assert_eq(got.out[1].head_len, 1);
	cr_assert_eq(got.out[1].head[0], 0);
	cr_assert_null(got.out[1].tail);
	cr_assert_eq(got.out[1].tail_len, 0);
	cr_assert_eq(got.out[1].total, 1);
	cr_assert_eq(got.started_at, 150, "finish with started_at 0 kept the recorded start");
	cr_assert_eq(got.ended_at, 200);
	cr_assert_eq(got.cpu_usec, 1234);
	cr_assert_eq(got.peak_memory, 1 << 20);
	run_row_free(&got);
}

/* A run's network (what the workspace's network refused while it ran) is stored by its finish
 * and read back by get and list; a run without one reads NULL. */
Test(store, run_network_json)
{
	static const char net[] = "{\"denied\":2,\"lastDenied\":{\"address\":\"203.0.113.3\","
				  "\"port\":80,\"proto\":\"tcp\",\"at\":\"2026-01-01T00:00:00Z\"}}";
	struct run_row r = run("r-1", "w1-a", 100), plain = run("r-2", "w1-a", 110), got = {},
		       *rows = NULL;
	size_t n = 0;

	insert_ws("w1-a", 1);
	cr_assert_eq(store_run_insert(store, &r), 0);
	cr_assert_eq(store_run_insert(store, &plain), 0);
	cr_assert_eq(store_run_get(store, "w1-a", "r-1", &got), 0);
	cr_assert_null(got.network_json, "running: no network yet");
	run_row_free(&got);
	r.status = plain.status = RUN_EXITED;
	r.exit_code = plain.exit_code = 0;
	r.network_json = (char *)net;
	cr_assert_eq(store_run_finish(store, &r), 1);
	cr_assert_eq(store_run_finish(store, &plain), 1);

	cr_assert_eq(store_run_get(store, "w1-a", "r-1", &got), 0);
	cr_assert_str_eq(got.network_json, net);
	run_row_free(&got);
	cr_assert_eq(store_run_list(store, "w1-a", 10, &rows, &n), 0);
	cr_assert_eq(n, 2);
	cr_assert_str_eq(rows[0].id, "r-2");
	cr_assert_null(rows[0].network_json, "a run without a network");
	cr_assert_str_eq(rows[1].network_json, net);
	for (size_t i = 0; i < n; i++)
		run_row_free(&rows[i]);
	free(rows);
}

/* A completion is keyed by the workspace: another workspace's report about a run changes
 * nothing (an agent reports only for the workspace it serves). */
Test(store, run_finish_scoped_by_workspace)
{
	struct run_row got = { 0 };

	insert_ws("w1-a", 1);
	insert_ws("w1-b", 1);
	insert_run("r-1", "w1-a", 1);

	struct run_row forged = run("r-1", "w1-b", 1);
	forged.status = RUN_EXITED;
	forged.exit_code = 77;
	forged.ended_at = 5;
	cr_assert_eq(store_run_finish(store, &forged), -ENOENT);
	cr_assert_eq(store_run_get(store, "w1-a", "r-1", &got), 0);
	cr_assert_eq(got.status, RUN_RUNNING);
	cr_assert_eq(got.exit_code, -1);
	run_row_free(&got);

	forged.workspace_id = NULL;
	cr_assert_eq(store_run_finish(store, &forged), -EINVAL, "no workspace: refused");

	/* Positive control: the same report from the run's own workspace is recorded. */
	forged.workspace_id = "w1-a";
	cr_assert_eq(store_run_finish(store, &forged), 1);
	cr_assert_eq(store_run_get(store, "w1-a", "r-1", &got), 0);
	cr_assert_eq(got.status, RUN_EXITED);
	cr_assert_eq(got.exit_code, 77);
	run_row_free(&got);
}

Test(store, run_not_found)
{
	struct run_row r = run("r-nope", "w1-a", 1), got = { .exit_code = 77 };

	insert_ws("w1-a", 1);
	insert_ws("w1-b", 1);
	insert_run("r-1", "w1-a", 1);

	r.status = RUN_EXITED;
	cr_assert_eq(store_run_finish(store, &r), -ENOENT);
	cr_assert_eq(store_run_set_started(store, "r-nope", 5), -ENOENT);
	cr_assert_eq(store_run_get(store, "w1-a", "r-nope", &got), -ENOENT);
	cr_assert_eq(store_run_get(store, "w1-b", "r-1", &got), -ENOENT);
	cr_assert_eq(got.exit_code, 77, "ret touched on failure");
	/* Positive control. */
	cr_assert_eq(store_run_get(store, "w1-a", "r-1", &got), 0);
	run_row_free(&got);

	/* Finishing with a running status is a caller bug. */
	r.id = "r-1";
	r.status = RUN_RUNNING;
	cr_assert_eq(store_run_finish(store, &r), -EINVAL);
}

Test(store, run_list_newest_first_without_output)
{
	static const uint8_t out[] = "hello";
	struct run_row r = run("r-2", "w1-a", 20), *rows = NULL;
	size_t n = 0;

	insert_ws("w1-a", 1);
	insert_ws("w1-b", 1);
	insert_run("r-1", "w1-a", 10);
	insert_run("r-3", "w1-a", 30);
	insert_run("r-9", "w1-b", 40);
	cr_assert_eq(store_run_insert(store, &r), 0);
	r.status = RUN_EXITED;
	r.exit_code = 0;
	r.out[0] = (struct run_output){ (uint8_t *)out, 5, NULL, 0, 5 };
	cr_assert_eq(store_run_finish(store, &r), 1);

	cr_assert_eq(store_run_list(store, "w1-a", 2, &rows, &n), 0);
	cr_assert_eq(n, 2);
	cr_assert_str_eq(rows[0].id, "r-3");
	cr_assert_str_eq(rows[1].id, "r-2");
	cr_assert_eq(rows[1].status, RUN_EXITED);
	cr_assert_eq(rows[1].out[0].total, 5);
	cr_assert_null(rows[1].out[0].head);
	cr_assert_eq(rows[1].out[0].head_len, 0);
	for (size_t i = 0; i < n; i++)
		run_row_free(&rows[i]);
	free(rows);

	cr_assert_eq(store_run_list(store, "w1-a", 0, &rows, &n), 0);
	cr_assert_eq(n, 0);
	free(rows);
}

/* "paused" and when it began are kept, so that a paused workspace is paused after a restart. */
Test(store, workspace_paused_and_paused_at_kept)
{
	struct workspace_row w = ws("w1-a", 10), got = {};

	cr_assert_eq(store_workspace_insert(store, &w), 0);
	w.state = WORKSPACE_PAUSED;
	w.paused_at = 1234567;
	cr_assert_eq(store_workspace_update(store, &w), 0);
	cr_assert_eq(sql_int("SELECT count(*) FROM workspaces WHERE state = 'paused'"), 1);
	cr_assert_eq(store_workspace_get(store, "w1-a", &got), 0);
	cr_assert_eq(got.state, WORKSPACE_PAUSED);
	cr_assert_eq(got.paused_at, 1234567);
	workspace_row_free(&got);
}

Test(store, workspace_unknown_state_is_eio)
{
	struct workspace_row got = { .agent_pid = 77 }, *rows = NULL;
	size_t n = 99;

	insert_ws("w1-a", 1);
	sql_exec("UPDATE workspaces SET state = 'hibernating'");
	cr_assert_eq(store_workspace_get(store, "w1-a", &got), -EIO);
	cr_assert_eq(got.agent_pid, 77, "ret touched on failure");
	cr_assert_eq(store_workspace_list(store, &rows, &n), -EIO);
	cr_assert_null(rows);
	cr_assert_eq(n, 99);
}

Test(store, terminal_state_stored_as_text)
{
	struct terminal_row t = {
		.id = "t-1",
		.workspace_id = "w1-a",
		.state = TERMINAL_CLOSED,
		.exit_code = -1,
	};
	struct terminal_row *rows = NULL;
	size_t n = 0;

	insert_ws("w1-a", 1);
	cr_assert_eq(store_terminal_insert(store, &t, 0), 0);
	t.id = "t-2";
	t.state = TERMINAL_RUNNING;
	t.created_at = 2;
	cr_assert_eq(store_terminal_insert(store, &t, 0), 0);
	cr_assert_eq(
		sql_int("SELECT count(*) FROM terminals WHERE id = 't-1' AND state = 'closed'"), 1);
	cr_assert_eq(store_terminal_list(store, "w1-a", &rows, &n), 0);
	cr_assert_eq(n, 2);
	cr_assert_str_eq(rows[0].id, "t-1");
	cr_assert_eq(rows[0].state, TERMINAL_CLOSED);
	cr_assert_eq(rows[1].state, TERMINAL_RUNNING);
	cr_assert_null(rows[2].id, "the array ends with a zeroed row");
	for (size_t i = 0; i < n; i++)
		terminal_row_free(&rows[i]);
	free(rows);

	t.state = _TERMINAL_STATE_MAX;
	cr_assert_eq(store_terminal_update(store, &t), -EINVAL, "a state without a name");
}

Test(store, service_and_attempt_enums_stored_as_text)
{
	struct service_row svc = {
		.id = "svc-1",
		.workspace_id = "w1-a",
		.name = "web",
		.command = "httpd",
		.restart_policy = SERVICE_POLICY_ON_FAILURE,
		.state = SERVICE_BACKOFF,
	};
	struct service_attempt_row a = {
		.service_id = "svc-1",
		.number = 1,
		.exit_code = 3,
		.end_reason = ATTEMPT_FAILED_TO_START,
	};
	struct service_row *rows = NULL;
	struct service_attempt_row *attempts = NULL;
	size_t n = 0;

	insert_ws("w1-a", 1);
	cr_assert_eq(store_service_insert(store, &svc), 0);
	cr_assert_eq(store_attempt_insert(store, &a, 10), 1);
	cr_assert_eq(sql_int("SELECT count(*) FROM services WHERE restart_policy = 'on-failure' "
			     "AND state = 'backoff'"),
		     1);
	cr_assert_eq(sql_int("SELECT count(*) FROM service_attempts WHERE "
			     "end_reason = 'failed_to_start'"),
		     1);
	cr_assert_eq(store_service_list(store, "w1-a", &rows, &n), 0);
	cr_assert_eq(n, 1);
	cr_assert_eq(rows[0].restart_policy, SERVICE_POLICY_ON_FAILURE);
	cr_assert_eq(rows[0].state, SERVICE_BACKOFF);
	service_row_free(&rows[0]);
	free(rows);
	cr_assert_eq(store_attempt_list(store, "svc-1", false, &attempts, &n), 0);
	cr_assert_eq(n, 1);
	cr_assert_eq(attempts[0].end_reason, ATTEMPT_FAILED_TO_START);
	cr_assert_eq(attempts[0].exit_code, 3);
	service_attempt_row_free(&attempts[0]);
	free(attempts);

	sql_exec("UPDATE service_attempts SET end_reason = 'vanished'");
	cr_assert_eq(store_attempt_list(store, "svc-1", true, &attempts, &n), -EIO);
}

Test(store, run_list_running)
{
	char **ids = NULL;
	size_t n = 0;

	insert_ws("w1-a", 1);
	insert_ws("w1-b", 1);
	insert_run("r-1", "w1-a", 1);
	insert_run("r-2", "w1-a", 2);
	insert_run("r-3", "w1-a", 3);
	insert_run("r-4", "w1-b", 4);
	finish_run("r-2", "w1-a", 2, 10);

	cr_assert_eq(store_run_list_running(store, "w1-a", &ids, &n), 0);
	cr_assert_eq(n, 2);
	cr_assert_str_eq(ids[0], "r-1");
	cr_assert_str_eq(ids[1], "r-3");
	cr_assert_null(ids[2]);
	for (size_t i = 0; i < n; i++)
		free(ids[i]);
	free(ids);

	cr_assert_eq(store_run_list_running(store, "w1-none", &ids, &n), 0);
	cr_assert_eq(n, 0);
	free(ids);
}

Test(store, prune_by_age)
{
	char ids[256];

	insert_ws("w1-a", 1);
	for (int i = 1; i <= 4; i++) {
		char id[8];

		snprintf(id, sizeof(id), "r-%d", i);
		insert_run(id, "w1-a", i);
	}
	finish_run("r-1", "w1-a", 1, 100);
	finish_run("r-2", "w1-a", 2, 200);
	finish_run("r-3", "w1-a", 3, 300);
	/* r-4 is still running: never pruned. */

	cr_assert_eq(store_run_prune(store, 250, SIZE_MAX), 2);
	run_ids("w1-a", ids, sizeof(ids));
	cr_assert_str_eq(ids, "r-4,r-3");
	cr_assert_eq(store_run_prune(store, 250, SIZE_MAX), 0);
}

Test(store, prune_by_count_per_workspace)
{
	char ids[256];

	insert_ws("w1-a", 1);
	insert_ws("w1-b", 1);
	/* created_at and ended_at disagree, so the order proves ended_at decides; r-4 and r-5
	 * end at the same time, and created_at breaks the tie. */
	insert_run("r-1", "w1-a", 1);
	insert_run("r-2", "w1-a", 2);
	insert_run("r-3", "w1-a", 3);
	insert_run("r-4", "w1-a", 4);
	insert_run("r-5", "w1-a", 5);
	insert_run("r-6", "w1-a", 6);
	insert_run("r-7", "w1-b", 7);
	insert_run("r-8", "w1-b", 8);
	finish_run("r-1", "w1-a", 1, 500);
	finish_run("r-2", "w1-a", 2, 100);
	finish_run("r-3", "w1-a", 3, 200);
	finish_run("r-4", "w1-a", 4, 300);
	finish_run("r-5", "w1-a", 5, 300);
	finish_run("r-7", "w1-b", 7, 50);
	finish_run("r-8", "w1-b", 8, 60);
	/* r-6 is running. */

	cr_assert_eq(store_run_prune(store, 0, 2), 3);
	run_ids("w1-a", ids, sizeof(ids));
	cr_assert_str_eq(ids, "r-6,r-5,r-1");
	run_ids("w1-b", ids, sizeof(ids));
	cr_assert_str_eq(ids, "r-8,r-7");

	cr_assert_eq(store_run_prune(store, 0, 0), 4);
	run_ids("w1-a", ids, sizeof(ids));
	cr_assert_str_eq(ids, "r-6");
	run_ids("w1-b", ids, sizeof(ids));
	cr_assert_str_eq(ids, "");
}

Test(store, prune_inside_a_transaction_rolls_back)
{
	char ids[256];

	insert_ws("w1-a", 1);
	insert_run("r-1", "w1-a", 1);
	finish_run("r-1", "w1-a", 1, 100);
	cr_assert_eq(store_begin(store), 0);
	cr_assert_eq(store_run_prune(store, 1000, SIZE_MAX), 1);
	cr_assert_eq(store_rollback(store), 0);
	run_ids("w1-a", ids, sizeof(ids));
	cr_assert_str_eq(ids, "r-1");
}

Test(store, transactions)
{
	struct workspace_row got = {};

	cr_assert_eq(store_begin(store), 0);
	insert_ws("w1-a", 1);
	cr_assert_eq(store_rollback(store), 0);
	cr_assert_eq(store_workspace_get(store, "w1-a", &got), -ENOENT);

	cr_assert_eq(store_begin(store), 0);
	insert_ws("w1-a", 1);
	cr_assert_eq(store_commit(store), 0);
	cr_assert_eq(sql_int("SELECT count(*) FROM workspaces WHERE id = 'w1-a'"), 1);
}

Test(store, tokens)
{
	char hash[65], other[65];
	struct token_row row = { .id = "tok-a",
				 .name = "ci",
				 .scope = "tenant",
				 .tenant = "acme",
				 .limits = { .memory_mb = 512, .workspaces = 3 },
				 .hash = hash,
				 .created_at = 10,
				 .expires_at = 20 };
	struct token_row *rows = NULL;
	size_t n = 99;

	memset(hash, 'a', 64);
	hash[64] = '\0';
	memset(other, 'b', 64);
	other[64] = '\0';

	cr_assert_eq(store_token_count(store, &n), 0);
	cr_assert_eq(n, 0);
	cr_assert_eq(store_token_check(store, hash), 0);
	cr_assert_eq(store_token_insert(store, &row), 0);
	cr_assert_eq(store_token_check(store, hash), 1);
	cr_assert_eq(store_token_check(store, other), 0);
	row.id = "tok-b";
	cr_assert_eq(store_token_insert(store, &row), -EEXIST); /* the same hash */
	row.hash = other;
	row.id = "tok-a";
	cr_assert_eq(store_token_insert(store, &row), -EEXIST); /* the same id */
	cr_assert_eq(store_token_set_admin(store, other, 30), 0);
	cr_assert_eq(store_token_revoke(store, "tok-a", 40), 0);
	cr_assert_eq(store_token_revoke(store, "tok-none", 40), -ENOENT);
	cr_assert_eq(store_token_touch(store, "tok-a", 50), 0);
	cr_assert_eq(store_token_list(store, &rows, &n), 0);
	cr_assert_eq(n, 2);
	cr_assert_str_eq(rows[0].id, "tok-a");
	cr_assert_str_eq(rows[0].tenant, "acme");
	cr_assert_eq(rows[0].limits.memory_mb, 512);
	cr_assert_eq(rows[0].limits.workspaces, 3);
	cr_assert_eq(rows[0].revoked_at, 40);
	cr_assert_eq(rows[0].last_used_at, 50);
	cr_assert_str_eq(rows[1].id, "admin");
	cr_assert_str_eq(rows[1].hash, other);
	for (size_t i = 0; i < n; i++)
		token_row_free(&rows[i]);
	free(rows);
	/* the admin token replaced: one row still */
	hash[0] = 'c';
	cr_assert_eq(store_token_set_admin(store, hash, 60), 0);
	cr_assert_eq(store_token_check(store, other), 0);
	cr_assert_eq(store_token_check(store, hash), 1);
	cr_assert_eq(store_token_count(store, &n), 0);
	cr_assert_eq(n, 2);

	row.hash = "abc";
	cr_assert_eq(store_token_insert(store, &row), -EINVAL);
	hash[0] = 'A';
	cr_assert_eq(store_token_check(store, hash), -EINVAL);
}

Test(store, audit_bounded_newest_first)
{
	struct audit_row rows[5];
	struct audit_row *got = NULL;
	struct audit_filter f = { .limit = 10 };
	size_t n = 0;

	for (int i = 0; i < 5; i++)
		rows[i] = (struct audit_row){ .at = (uint64_t)i + 1,
					      .token_id = i % 2 ? "tok-a" : NULL,
					      .method = "GET",
					      .route = "/v1/workspaces/*",
					      .path = "/v1/workspaces/w1-x",
					      .workspace_id = "w1-x",
					      .status = 200,
					      .outcome = "ok" };
	cr_assert_eq(store_audit_insert(store, rows, 5, 3), 0);
	cr_assert_eq(store_audit_list(store, &f, &got, &n), 0);
	cr_assert_eq(n, 3); /* the oldest two dropped */
	cr_assert_eq(got[0].at, 5);
	cr_assert_eq(got[2].at, 3);
	f.before = got[1].id;
	f.token_id = "tok-a";
	for (size_t i = 0; i < n; i++)
		audit_row_free(&got[i]);
	free(got);
	cr_assert_eq(store_audit_list(store, &f, &got, &n), 0);
	cr_assert_eq(n, 0); /* row 3 has no token; 4 is not before 4 */
	free(got);
	f.before = 0;
	cr_assert_eq(store_audit_list(store, &f, &got, &n), 0);
	cr_assert_eq(n, 1);
	cr_assert_eq(got[0].at, 4);
	audit_row_free(&got[0]);
	free(got);
}

Test(store, network_rows)
{
	struct network_row a = { .workspace_id = "w1-a",
				 .mode = "bridge",
				 .address = 0x0ae70002,
				 .created_at = 1,
				 .updated_at = 1 };
	struct network_row b = { .workspace_id = "w1-b",
				 .mode = "restricted",
				 .address = 0x0ae70003,
				 .policy_json = "{\"allow\":[]}",
				 .created_at = 2,
				 .updated_at = 2 };
	struct network_row *rows = NULL;
	size_t n = 0;

	cr_assert_eq(store_network_insert(store, &a), -ENOENT, "no workspace: the foreign key");
	insert_ws("w1-a", 1);
	insert_ws("w1-b", 2);
	cr_assert_eq(store_network_insert(store, &a), 0);
	b.address = a.address;
	cr_assert_eq(store_network_insert(store, &b), -EEXIST, "the address is leased");
	b.address = 0x0ae70003;
	cr_assert_eq(store_network_insert(store, &b), 0);
	cr_assert_eq(store_network_set_policy(store, "w1-b",
					      "{\"allow\":[{\"domain\":\"x.test\"}]}", 3),
		     0);
	cr_assert_eq(store_network_set_policy(store, "w1-c", "{}", 3), -ENOENT);

	cr_assert_eq(store_network_list(store, &rows, &n), 0);
	cr_assert_eq(n, 2);
	cr_assert_str_eq(rows[0].workspace_id, "w1-a");
	cr_assert_eq(rows[0].address, 0x0ae70002);
	cr_assert_null(rows[0].policy_json);
	cr_assert_str_eq(rows[1].mode, "restricted");
	cr_assert_str_eq(rows[1].policy_json, "{\"allow\":[{\"domain\":\"x.test\"}]}");
	cr_assert_eq(rows[1].updated_at, 3);
	for (size_t i = 0; i < n; i++)
		network_row_free(&rows[i]);
	free(rows);

	cr_assert_eq(store_workspace_delete(store, "w1-a"), 0);
	cr_assert_eq(store_network_delete(store, "w1-b"), 0);
	cr_assert_eq(store_network_list(store, &rows, &n), 0);
	cr_assert_eq(n, 0, "one went with its workspace, the other was deleted");
	free(rows);
}

Test(store, secret_put_replace_list_delete_and_gone_with_workspace)
{
	struct workspace_row w = ws("w1-s", 10);
	uint8_t nonce[12] = { 1, 2, 3 }, ct[20] = { 9, 8, 7 };
	struct secret_row r = {
		.workspace_id = "w1-s",
		.name = "gh",
		.nonce = nonce,
		.nonce_len = sizeof nonce,
		.ciphertext = ct,
		.ciphertext_len = sizeof ct,
		.host = "github.com",
		.username = "x-access-token",
		.expires_at = 0,
		.created_at = 100,
		.updated_at = 100,
	};
	struct secret_row *rows = NULL;
	size_t n = 0;

	cr_assert_eq(store_secret_put(store, &r), -ENOENT, "no such workspace");
	cr_assert_eq(store_workspace_insert(store, &w), 0);
	cr_assert_eq(store_secret_put(store, &r), 0);
	r.host = NULL;
	r.expires_at = 500;
	r.created_at = 200; /* a replace keeps the first created_at */
	r.updated_at = 200;
	ct[0] = 0x42;
	cr_assert_eq(store_secret_put(store, &r), 0);
	r.name = "another";
	cr_assert_eq(store_secret_put(store, &r), 0);
	cr_assert_eq(store_secret_list(store, &rows, &n), 0);
	cr_assert_eq(n, 2);
	cr_assert_str_eq(rows[0].name, "another");
	cr_assert_str_eq(rows[1].name, "gh");
	cr_assert_null(rows[1].host);
	cr_assert_eq(rows[1].expires_at, 500);
	cr_assert_eq(rows[1].created_at, 100);
	cr_assert_eq(rows[1].updated_at, 200);
	cr_assert_eq(rows[1].nonce_len, 12);
	cr_assert_eq(rows[1].ciphertext_len, 20);
	cr_assert_eq(rows[1].ciphertext[0], 0x42);
	cr_assert_str_eq(rows[1].username, "x-access-token");
	for (size_t i = 0; i < n; i++)
		secret_row_free(&rows[i]);
	free(rows);

	cr_assert_eq(store_secret_delete(store, "w1-s", "gh"), 0);
	cr_assert_eq(store_secret_delete(store, "w1-s", "gh"), -ENOENT);
	cr_assert_eq(sql_int("SELECT count(*) FROM workspace_secrets"), 1);
	cr_assert_eq(store_workspace_delete(store, "w1-s"), 0);
	cr_assert_eq(sql_int("SELECT count(*) FROM workspace_secrets"), 0);
}

static int insert_key(char *scope, char *key, char *hash, char *object, uint64_t at,
		      uint64_t expired_before)
{
	struct idempotency_row r = { .scope = scope,
				     .key = key,
				     .request_hash = hash,
				     .object_id = object,
				     .status = 201,
				     .created_at = at };

	return store_idempotency_insert(store, &r, expired_before);
}

Test(store, idempotency_keys)
{
	struct idempotency_row got = {};

	cr_assert_eq(insert_key("/v1/workspaces", "k", "h1", "w1-a", 100, 0), 0);
	/* A live key is not replaced; the same key on another path is another key. */
	cr_assert_eq(insert_key("/v1/workspaces", "k", "h2", "w1-b", 150, 50), -EEXIST);
	cr_assert_eq(insert_key("/v1/workspaces/w1-a/commands", "k", "h2", "r-1", 150, 50), 0);
	cr_assert_eq(store_idempotency_get(store, "/v1/workspaces", "k", 50, &got), 1);
	cr_assert_str_eq(got.request_hash, "h1");
	cr_assert_str_eq(got.object_id, "w1-a");
	cr_assert_eq(got.status, 201);
	cr_assert_eq(got.created_at, 100);
	idempotency_row_free(&got);
	/* Expired: not found, and a new insert takes the key over. */
	cr_assert_eq(store_idempotency_get(store, "/v1/workspaces", "k", 101, &got), 0);
	cr_assert_eq(insert_key("/v1/workspaces", "k", "h3", "w1-c", 200, 101), 0);
	cr_assert_eq(store_idempotency_get(store, "/v1/workspaces", "k", 101, &got), 1);
	cr_assert_str_eq(got.object_id, "w1-c");
	idempotency_row_free(&got);
	/* Purge deletes what was created before the cutoff only. */
	cr_assert_eq(store_idempotency_purge(store, 180), 1); /* the commands key, at 150 */
	cr_assert_eq(sql_int("SELECT count(*) FROM idempotency_keys"), 1);
	cr_assert_eq(store_idempotency_get(store, "/v1/workspaces/w1-a/commands", "k", 0, &got), 0);
}

Test(store, workspace_tenant_recorded_and_updated)
{
	struct workspace_row w = ws("w1-t", 10), got = {};

	/* no tenant given: the operator's ("") */
	cr_assert_eq(store_workspace_insert(store, &w), 0);
	cr_assert_eq(store_workspace_get(store, "w1-t", &got), 0);
	cr_assert_str_eq(got.tenant, "");
	workspace_row_free(&got);
	w.tenant = "tenant-a";
	cr_assert_eq(store_workspace_update(store, &w), 0);
	cr_assert_eq(store_workspace_get(store, "w1-t", &got), 0);
	cr_assert_str_eq(got.tenant, "tenant-a");
	workspace_row_free(&got);
	cr_assert_eq(sql_int("SELECT count(*) FROM workspaces WHERE tenant = 'tenant-a'"), 1);
}

Test(store, image_owners_add_list_remove)
{
	struct image_owner_row *rows = NULL;
	size_t n = 99;

	cr_assert_eq(store_image_owner_list(store, &rows, &n), 0);
	cr_assert_eq(n, 0);
	free(rows);
	cr_assert_eq(store_image_owner_add(store, "sha256:aa", ""), 0);
	cr_assert_eq(store_image_owner_add(store, "sha256:aa", "tenant-a"), 0);
	cr_assert_eq(store_image_owner_add(store, "sha256:aa", "tenant-a"), 0, "add is idempotent");
	cr_assert_eq(store_image_owner_add(store, "sha256:bb", "tenant-b"), 0);
	cr_assert_eq(store_image_owner_list(store, &rows, &n), 0);
	cr_assert_eq(n, 3);
	cr_assert_str_eq(rows[1].tenant, "tenant-a");
	for (size_t i = 0; i < n; i++)
		image_owner_row_free(&rows[i]);
	free(rows);
	cr_assert_eq(store_image_owner_remove(store, "sha256:aa"), 0);
	cr_assert_eq(sql_int("SELECT count(*) FROM image_owners"), 1);
	cr_assert_eq(store_image_owner_add(store, NULL, ""), -EINVAL);
}
