/* SPDX-License-Identifier: MIT */
/* The handle: open, pragmas, migrations, transactions, statement cache and error mapping. */

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "store/store-internal.h"

/* How long a statement waits for another connection's lock (a backup, an operator's sqlite3)
 * before giving up with -EBUSY. Short: the controller is a single event loop. */
#define STORE_BUSY_TIMEOUT_MS 1000

DEFINE_TRIVIAL_CLEANUP_FUNC(struct store *, store_close)

int store_errno(int rc)
{
	switch (rc) {
	case SQLITE_CONSTRAINT_FOREIGNKEY:
		return -ENOENT; /* the row it points at is gone */
	case SQLITE_CONSTRAINT_NOTNULL:
	case SQLITE_CONSTRAINT_CHECK:
	case SQLITE_CONSTRAINT_DATATYPE:
		return -EINVAL;
	}
	switch (rc & 0xff) {
	case SQLITE_OK:
	case SQLITE_ROW:
	case SQLITE_DONE:
		return 0;
	case SQLITE_FULL:
		return -ENOSPC;
	case SQLITE_BUSY:
	case SQLITE_LOCKED:
		return -EBUSY;
	case SQLITE_CONSTRAINT:
		return -EEXIST;
	case SQLITE_NOMEM:
		return -ENOMEM;
	default:
		return -EIO;
	}
}

int store_stmt(struct store *s, enum store_stmt_id id, const char *sql, sqlite3_stmt **ret)
{
	int rc;

	if (!s->stmts[id]) {
		rc = sqlite3_prepare_v3(s->db, sql, -1, SQLITE_PREPARE_PERSISTENT, &s->stmts[id],
					NULL);
		if (rc != SQLITE_OK)
			return store_errno(rc);
	}
	*ret = s->stmts[id];
	return 0;
}

int store_prepare(struct store *s, const char *sql, sqlite3_stmt **ret)
{
	int rc = sqlite3_prepare_v2(s->db, sql, -1, ret, NULL);

	return rc == SQLITE_OK ? 0 : store_errno(rc);
}

int store_prepare_key(struct store *s, const char *sql, const char *key, sqlite3_stmt **ret)
{
	sqlite3_stmt *st = NULL;
	int k;

	k = store_prepare(s, sql, &st);
	if (k >= 0 && key)
		k = store_errno(sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC));
	if (k < 0) {
		sqlite3_finalize(st);
		return k;
	}
	*ret = st;
	return 0;
}

int store_step_done(sqlite3_stmt *st)
{
	int rc = sqlite3_step(st);

	if (rc == SQLITE_DONE)
		return 0;
	return rc == SQLITE_ROW ? -EIO : store_errno(rc);
}

int store_step_row(sqlite3_stmt *st)
{
	int rc = sqlite3_step(st);

	if (rc == SQLITE_ROW)
		return 1;
	return rc == SQLITE_DONE ? 0 : store_errno(rc);
}

int store_exec(struct store *s, const char *sql)
{
	return store_errno(sqlite3_exec(s->db, sql, NULL, NULL, NULL));
}

int64_t store_changes(struct store *s)
{
	return sqlite3_changes64(s->db);
}

int store_exec_bound(struct store *s, const struct store_binder *b)
{
	int64_t n;
	int k = store_bind_result(b);

	if (k >= 0)
		k = store_step_done(b->st);
	if (k < 0)
		return k;
	n = store_changes(s);
	return n > INT_MAX ? INT_MAX : (int)n;
}

/* Makes room for element n of a growing array of `size`-byte elements. */
static int array_grow(uint8_t **array, size_t *allocated, size_t n, size_t size)
{
	size_t k;
	void *p;

	if (n < *allocated)
		return 0;
	k = *allocated ? *allocated * 2 : 16;
	p = reallocarray(*array, k, size);
	if (!p)
		return -ENOMEM;
	*array = p;
	*allocated = k;
	return 0;
}

static void rows_free(uint8_t *rows, size_t n, const struct store_row_type *t)
{
	for (size_t i = 0; i < n; i++)
		t->free(rows + i * t->size);
	free(rows);
}

int store_list_rows(sqlite3_stmt *st, const struct store_row_type *t, void *userdata, void **ret,
		    size_t *ret_n)
{
	uint8_t *rows = NULL;
	size_t n = 0, allocated = 0;
	int k;

	for (;;) {
		k = array_grow(&rows, &allocated, n, t->size); /* also the zeroed end */
		if (k < 0)
			break;
		k = store_step_row(st);
		if (k <= 0)
			break;
		k = t->read(st, userdata, rows + n * t->size);
		if (k < 0)
			break;
		n++;
	}
	if (k < 0) {
		rows_free(rows, n, t);
		return k;
	}
	memset(rows + n * t->size, 0, t->size);
	*ret = rows;
	*ret_n = n;
	return 0;
}

int store_list(struct store *s, const char *sql, const char *key, const struct store_row_type *t,
	       void *userdata, void **ret, size_t *ret_n)
{
	_cleanup_stmt_finalize_ sqlite3_stmt *st = NULL;
	int k;

	k = store_prepare_key(s, sql, key, &st);
	if (k < 0)
		return k;
	return store_list_rows(st, t, userdata, ret, ret_n);
}

/* Runs a cached statement without parameters or rows. */
static int store_run_cached(struct store *s, enum store_stmt_id id, const char *sql)
{
	_cleanup_stmt_reset_ sqlite3_stmt *st = NULL;
	int r;

	r = store_stmt(s, id, sql, &st);
	if (r < 0)
		return r;
	return store_step_done(st);
}

/* BEGIN IMMEDIATE takes the write lock up front (waiting up to the busy timeout), so a
 * transaction never fails half-way because another connection wrote first. */
int store_begin(struct store *s)
{
	return store_run_cached(s, STORE_STMT_BEGIN, "BEGIN IMMEDIATE");
}

int store_commit(struct store *s)
{
	return store_run_cached(s, STORE_STMT_COMMIT, "COMMIT");
}

int store_rollback(struct store *s)
{
	return store_run_cached(s, STORE_STMT_ROLLBACK, "ROLLBACK");
}

/* A pragma's value as an integer, or as text into buf. */
static int pragma_get(struct store *s, const char *sql, int64_t *ret_int, char *buf, size_t n)
{
	_cleanup_stmt_finalize_ sqlite3_stmt *st = NULL;
	int r;

	r = store_prepare(s, sql, &st);
	if (r < 0)
		return r;
	r = store_step_row(st);
	if (r <= 0)
		return r < 0 ? r : -EIO;
	if (ret_int)
		*ret_int = sqlite3_column_int64(st, 0);
	if (buf) {
		const char *t = (const char *)sqlite3_column_text(st, 0);

		snprintf(buf, n, "%s", t ?: "");
	}
	return 0;
}

static int user_version(struct store *s, size_t *ret)
{
	int64_t v;
	int r;

	r = pragma_get(s, "PRAGMA user_version", &v, NULL, 0);
	if (r < 0)
		return r;
	if (v < 0)
		return -EPROTONOSUPPORT;
	*ret = (size_t)v;
	return 0;
}

/* Applies the next migration, if any, in its own transaction. Returns 1 when one was applied,
 * 0 when the schema is current. Foreign keys are off meanwhile (a migration may rebuild a
 * table), so the transaction checks them before it commits. */
static int migrate_one(struct store *s)
{
	_cleanup_stmt_finalize_ sqlite3_stmt *check = NULL;
	char sql[64];
	size_t v;
	int r;

	r = store_exec(s, "BEGIN IMMEDIATE");
	if (r < 0)
		return r;
	r = user_version(s, &v);
	if (r >= 0 && v > store_n_migrations)
		r = -EPROTONOSUPPORT;
	if (r < 0 || v == store_n_migrations) {
		store_exec(s, "ROLLBACK");
		return r;
	}
	snprintf(sql, sizeof(sql), "PRAGMA user_version = %zu", v + 1);
	r = store_exec(s, store_migrations[v]);
	if (r >= 0)
		r = store_exec(s, sql);
	if (r >= 0)
		r = store_prepare(s, "PRAGMA foreign_key_check", &check);
	if (r >= 0)
		r = store_step_row(check) == 0 ? 0 : -EIO;
	if (r >= 0)
		r = store_exec(s, "COMMIT");
	if (r < 0) {
		store_exec(s, "ROLLBACK");
		return r;
	}
	return 1;
}

static int store_migrate(struct store *s)
{
	int r;

	r = store_exec(s, "PRAGMA foreign_keys = OFF");
	while (r >= 0) {
		r = migrate_one(s);
		if (r == 0)
			break;
	}
	return r;
}

static int store_configure(struct store *s)
{
	char mode[16];
	int64_t fk;
	size_t v;
	int r;

	/* Before anything writes: a newer database is left exactly as it was. */
	r = user_version(s, &v);
	if (r < 0)
		return r;
	if (v > store_n_migrations)
		return -EPROTONOSUPPORT;
	r = pragma_get(s, "PRAGMA journal_mode = WAL", NULL, mode, sizeof(mode));
	if (r < 0)
		return r;
	if (strcmp(mode, "wal") != 0)
		return -EIO; /* e.g. a filesystem without shared memory for the WAL index */
	/* Without fsync on every commit: a crash may lose the last commits, never corrupt. */
	r = store_exec(s, "PRAGMA synchronous = NORMAL");
	if (r < 0)
		return r;
	/* Run outputs pass through the WAL; do not let one burst keep it large for good. */
	r = store_exec(s, "PRAGMA journal_size_limit = 67108864");
	if (r < 0)
		return r;
	if (v < store_n_migrations) {
		r = store_migrate(s);
		if (r < 0)
			return r;
	}
	r = store_exec(s, "PRAGMA foreign_keys = ON");
	if (r < 0)
		return r;
	r = pragma_get(s, "PRAGMA foreign_keys", &fk, NULL, 0);
	if (r < 0)
		return r;
	return fk == 1 ? 0 : -EIO;
}

/* Creates the database file 0600 ourselves: it holds agent secrets, SQLite would create it
 * 0644, and the WAL and shm files copy its mode. Also gives a real errno for a bad path. */
static int create_db_file(const char *path)
{
	_cleanup_close_ int fd = -EBADF;

	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY, 0600);
	if (fd < 0)
		return -errno;
	return 0;
}

int store_open(const char *path, struct store **ret)
{
	_cleanup_(store_closep) struct store *s = NULL;
	int r, rc;

	if (!path || !ret)
		return -EINVAL;
	r = create_db_file(path);
	if (r < 0)
		return r;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	rc = sqlite3_open_v2(path, &s->db,
			     SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
			     NULL);
	if (rc != SQLITE_OK)
		return store_errno(rc);
	sqlite3_extended_result_codes(s->db, 1);
	rc = sqlite3_busy_timeout(s->db, STORE_BUSY_TIMEOUT_MS);
	if (rc != SQLITE_OK)
		return store_errno(rc);
	r = store_configure(s);
	if (r < 0)
		return r;
	*ret = TAKE_PTR(s);
	return 0;
}

void store_close(struct store *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < ELEMENTSOF(s->stmts); i++)
		sqlite3_finalize(s->stmts[i]);
	sqlite3_close(s->db);
	free(s);
}

void store_bind_text(struct store_binder *b, const char *v)
{
	b->idx++;
	if (b->rc != SQLITE_OK)
		return;
	b->rc = v ? sqlite3_bind_text(b->st, b->idx, v, -1, SQLITE_STATIC) :
		    sqlite3_bind_null(b->st, b->idx);
}

void store_bind_blob(struct store_binder *b, const void *v, size_t n)
{
	b->idx++;
	if (b->rc != SQLITE_OK)
		return;
	b->rc = v && n > 0 ? sqlite3_bind_blob64(b->st, b->idx, v, n, SQLITE_STATIC) :
			     sqlite3_bind_null(b->st, b->idx);
}

void store_bind_i64(struct store_binder *b, int64_t v)
{
	b->idx++;
	if (b->rc != SQLITE_OK)
		return;
	b->rc = sqlite3_bind_int64(b->st, b->idx, v);
}

void store_bind_u64(struct store_binder *b, uint64_t v)
{
	store_bind_i64(b, (int64_t)v);
}

int store_bind_result(const struct store_binder *b)
{
	return store_errno(b->rc);
}

void store_read_text(struct store_reader *rd, char **ret)
{
	int i = rd->idx++;
	const unsigned char *t;

	*ret = NULL;
	if (rd->err < 0 || sqlite3_column_type(rd->st, i) == SQLITE_NULL)
		return;
	t = sqlite3_column_text(rd->st, i);
	*ret = t ? strdup((const char *)t) : NULL;
	if (!*ret)
		rd->err = -ENOMEM;
}

void store_read_blob(struct store_reader *rd, uint8_t **ret, size_t *ret_len)
{
	int i = rd->idx++;
	const void *p;
	size_t n;

	*ret = NULL;
	*ret_len = 0;
	if (rd->err < 0 || sqlite3_column_type(rd->st, i) == SQLITE_NULL)
		return;
	p = sqlite3_column_blob(rd->st, i);
	n = (size_t)sqlite3_column_bytes(rd->st, i);
	if (n == 0)
		return;
	if (!p) {
		rd->err = -ENOMEM;
		return;
	}
	*ret = malloc(n);
	if (!*ret) {
		rd->err = -ENOMEM;
		return;
	}
	memcpy(*ret, p, n);
	*ret_len = n;
}

int64_t store_read_i64(struct store_reader *rd)
{
	return sqlite3_column_int64(rd->st, rd->idx++);
}

uint64_t store_read_u64(struct store_reader *rd)
{
	return (uint64_t)store_read_i64(rd);
}

int store_read_enum(struct store_reader *rd, int (*from_string)(const char *s))
{
	const unsigned char *t;
	int v;

	t = sqlite3_column_text(rd->st, rd->idx++);
	if (rd->err < 0)
		return 0;
	v = from_string((const char *)t);
	if (v < 0) {
		rd->err = -EIO;
		return 0;
	}
	return v;
}
