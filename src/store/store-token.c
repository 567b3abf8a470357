/* SPDX-License-Identifier: MIT */
/* The tokens table: API bearer tokens, kept only as the SHA-256 of the token. */

#include <errno.h>
#include <string.h>
#include <time.h>

#include "store/store-internal.h"

/* Lower-case hex of 32 bytes only, so one token cannot be stored or looked up two ways. */
static bool hash_is_valid(const char *h)
{
	if (!h || strlen(h) != 64)
		return false;
	return strspn(h, "0123456789abcdef") == 64;
}

static uint64_t now_usec(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

int store_token_insert(struct store *s, const char *name, const char *hash_hex)
{
	_cleanup_stmt_finalize_ sqlite3_stmt *st = NULL;
	struct store_binder b;
	int k;

	if (!s || !name || !hash_is_valid(hash_hex))
		return -EINVAL;
	k = store_prepare(s, "INSERT INTO tokens (name, hash, created_at) VALUES (?, ?, ?)", &st);
	if (k < 0)
		return k;
	b = STORE_BINDER(st);
	store_bind_text(&b, name);
	store_bind_text(&b, hash_hex);
	store_bind_u64(&b, now_usec());
	k = store_exec_bound(s, &b);
	return k < 0 ? k : 0;
}

int store_token_check(struct store *s, const char *hash_hex)
{
	_cleanup_stmt_reset_ sqlite3_stmt *st = NULL;
	struct store_binder b;
	int k;

	if (!s || !hash_is_valid(hash_hex))
		return -EINVAL;
	k = store_stmt(s, STORE_STMT_TOKEN_CHECK, "SELECT 1 FROM tokens WHERE hash = ?", &st);
	if (k < 0)
		return k;
	b = STORE_BINDER(st);
	store_bind_text(&b, hash_hex);
	k = store_bind_result(&b);
	if (k < 0)
		return k;
	return store_step_row(st);
}

int store_token_count(struct store *s, size_t *ret)
{
	_cleanup_stmt_finalize_ sqlite3_stmt *st = NULL;
	int k;

	if (!s || !ret)
		return -EINVAL;
	k = store_prepare(s, "SELECT count(*) FROM tokens", &st);
	if (k < 0)
		return k;
	k = store_step_row(st);
	if (k <= 0)
		return k < 0 ? k : -EIO;
	*ret = (size_t)sqlite3_column_int64(st, 0);
	return 0;
}
