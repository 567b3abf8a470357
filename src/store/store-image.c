/* SPDX-License-Identifier: MIT */
/* The image_owners table: which tenants imported or pulled an image ('' the operator). */

#include <errno.h>
#include <string.h>

#include "store/store-internal.h"

int store_image_owner_add(struct store *s, const char *digest, const char *tenant)
{
	_cleanup_stmt_finalize_ sqlite3_stmt *st = NULL;
	int k;

	if (!s || !digest || !tenant)
		return -EINVAL;
	k = store_prepare(s, "INSERT OR IGNORE INTO image_owners (digest, tenant) VALUES (?, ?)",
			  &st);
	if (k < 0)
		return k;
	struct store_binder b = STORE_BINDER(st);
	store_bind_text(&b, digest);
	store_bind_text(&b, tenant);
	k = store_exec_bound(s, &b);
	return k < 0 ? k : 0;
}

int store_image_owner_remove(struct store *s, const char *digest)
{
	_cleanup_stmt_finalize_ sqlite3_stmt *st = NULL;
	int k;

	if (!s || !digest)
		return -EINVAL;
	k = store_prepare_key(s, "DELETE FROM image_owners WHERE digest = ?", digest, &st);
	if (k < 0)
		return k;
	return store_step_done(st);
}

void image_owner_row_free(struct image_owner_row *r)
{
	if (!r)
		return;
	free(r->digest);
	free(r->tenant);
	*r = (struct image_owner_row){};
}

static int image_owner_read(sqlite3_stmt *st, void *userdata, void *ret)
{
	struct store_reader rd = STORE_READER(st);
	struct image_owner_row o = {};

	store_read_text(&rd, &o.digest);
	store_read_text(&rd, &o.tenant);
	if (rd.err < 0 || !o.digest || !o.tenant) {
		image_owner_row_free(&o);
		return rd.err < 0 ? rd.err : -EIO;
	}
	*(struct image_owner_row *)ret = o;
	return 0;
}

STORE_ROW_TYPE(image_owner_rows, struct image_owner_row, image_owner_read, image_owner_row_free);

int store_image_owner_list(struct store *s, struct image_owner_row **ret, size_t *ret_n)
{
	if (!s || !ret || !ret_n)
		return -EINVAL;
	return store_list(s, "SELECT digest, tenant FROM image_owners ORDER BY rowid", NULL,
			  &image_owner_rows, NULL, (void **)ret, ret_n);
}
