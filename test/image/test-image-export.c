/* SPDX-License-Identifier: MIT */
/* image_export_layout() against the busybox layout built at test time: an export imports into
 * another store as the same image and exports there to the same bytes; a damaged or missing
 * blob fails it naming the blob, a damaged document before anything is written. */

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include "image/image-internal.h"
#include "test-image-util.h"

static char dir[PATH_MAX], root[PATH_MAX], layout[PATH_MAX], out[PATH_MAX];
static char manifest[80];
static struct image_store *store;

static void setup(void)
{
	struct station_error e = {};

	tmpdir_make(dir, sizeof dir, "test-image-export");
	snprintf(root, sizeof root, "%s/root", dir);
	snprintf(layout, sizeof layout, "%s/layout", dir);
	snprintf(out, sizeof out, "%s/export.tar", dir);
	busybox_layout(layout, false, "", manifest, NULL);
	cr_assert_eq(image_store_open(root, &store, &e), 0, "%s", e.message);
	cr_assert_eq(image_import_layout(store, layout, "busybox", NULL, &e), 0, "%s", e.message);
}

static void teardown(void)
{
	image_store_close(store);
	rm_rf(dir);
}

TestSuite(export, .init = setup, .fini = teardown);

/* Exports ref to path; the result, with e filled. */
static int export_to(struct image_store *s, const char *ref, const char *path,
		     struct station_error *e)
{
	_cleanup_close_ int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

	cr_assert_geq(fd, 0, "%s: %m", path);
	return image_export_layout(s, ref, fd, e);
}

static off_t file_size(const char *path)
{
	struct stat st;

	cr_assert_eq(stat(path, &st), 0, "%s: %m", path);
	return st.st_size;
}

/* The content of entry name in the tar at path ("" when absent). */
static void tar_entry_read(const char *path, const char *name, char *ret, size_t size)
{
	struct archive *a = archive_read_new();
	struct archive_entry *ent;

	ret[0] = '\0';
	archive_read_support_format_tar(a);
	cr_assert_eq(archive_read_open_filename(a, path, 10240), ARCHIVE_OK);
	while (archive_read_next_header(a, &ent) == ARCHIVE_OK) {
		if (strcmp(archive_entry_pathname(ent), name) != 0)
			continue;
		la_ssize_t n = archive_read_data(a, ret, size - 1);
		cr_assert_geq(n, 0);
		ret[n] = '\0';
	}
	archive_read_free(a);
}

/* The path of the largest blob in the store: busybox's one layer. */
static void layer_blob_path(char ret[PATH_MAX])
{
	char blobs[PATH_MAX], p[PATH_MAX];
	DIR *d;
	struct dirent *de;
	off_t best = -1;

	snprintf(blobs, sizeof blobs, "%s/images/blobs/sha256", root);
	d = opendir(blobs);
	cr_assert_not_null(d);
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(p, sizeof p, "%s/%s", blobs, de->d_name);
		if (file_size(p) > best) {
			best = file_size(p);
			snprintf(ret, PATH_MAX, "%s", p);
		}
	}
	closedir(d);
	cr_assert_gt(best, 100000);
}

Test(export, imports_elsewhere_as_the_same_image)
{
	struct station_error e = {};
	struct image_store *other = NULL;
	struct image *img = NULL;
	char root2[PATH_MAX], out2[PATH_MAX], index[4096];
	_cleanup_free_ char *a = NULL, *b = NULL;
	size_t alen, blen;

	cr_assert_eq(export_to(store, manifest, out, &e), 0, "%s", e.message);
	tar_entry_read(out, "index.json", index, sizeof index);
	cr_assert_not_null(strstr(index, "\"org.opencontainers.image.ref.name\":\"busybox\""), "%s",
			   index);
	cr_assert_not_null(strstr(index, manifest), "%s", index);

	snprintf(root2, sizeof root2, "%s/root2", dir);
	cr_assert_eq(image_store_open(root2, &other, &e), 0, "%s", e.message);
	cr_assert_eq(image_import_layout(other, out, "busybox", &img, &e), 0, "%s", e.message);
	cr_assert_str_eq(img->digest, manifest);
	image_free(img);

	/* the same image gives the same bytes */
	snprintf(out2, sizeof out2, "%s/export2.tar", dir);
	cr_assert_eq(export_to(other, manifest, out2, &e), 0, "%s", e.message);
	cr_assert_eq(read_file(out, 64u << 20, &a, &alen), 0);
	cr_assert_eq(read_file(out2, 64u << 20, &b, &blen), 0);
	cr_assert_eq(alen, blen);
	cr_assert_eq(memcmp(a, b, alen), 0, "two exports of one image differ");
	image_store_close(other);
}

Test(export, through_its_index_digest_exports_the_manifest)
{
	struct station_error e = {};
	struct image *img = NULL;
	char idx_layout[PATH_MAX], idx_manifest[80], idx[80], root2[PATH_MAX];
	struct image_store *other = NULL;

	image_store_close(store);
	rm_rf(root);
	cr_assert_eq(image_store_open(root, &store, &e), 0, "%s", e.message);
	snprintf(idx_layout, sizeof idx_layout, "%s/layout-index", dir);
	busybox_layout(idx_layout, false, "--index", idx_manifest, idx);
	cr_assert_eq(image_import_layout(store, idx_layout, NULL, NULL, &e), 0, "%s", e.message);
	cr_assert_eq(export_to(store, idx, out, &e), 0, "%s", e.message);
	snprintf(root2, sizeof root2, "%s/root2", dir);
	cr_assert_eq(image_store_open(root2, &other, &e), 0, "%s", e.message);
	cr_assert_eq(image_import_layout(other, out, NULL, &img, &e), 0, "%s", e.message);
	cr_assert_str_eq(img->digest, idx_manifest);
	cr_assert_str_eq(img->index_digest, "");
	image_free(img);
	image_store_close(other);
}

Test(export, damaged_layer_blob_fails_naming_it)
{
	struct station_error e = {};
	struct image_store *other = NULL;
	char blob[PATH_MAX], root2[PATH_MAX];

	cr_assert_eq(export_to(store, manifest, out, &e), 0, "%s", e.message); /* control */
	layer_blob_path(blob);
	file_flip_byte(blob, 4096);
	e = (struct station_error){};
	cr_assert_eq(export_to(store, manifest, out, &e), -EBADMSG);
	cr_assert_not_null(strstr(e.message, "layer blob sha256:"), "%s", e.message);
	cr_assert_not_null(strstr(e.message, "does not match its digest"), "%s", e.message);
	cr_assert_not_null(strstr(e.message, manifest), "%s", e.message);
	/* what was written is not a layout that imports */
	snprintf(root2, sizeof root2, "%s/root2", dir);
	cr_assert_eq(image_store_open(root2, &other, &e), 0, "%s", e.message);
	cr_assert_lt(image_import_layout(other, out, NULL, NULL, &e), 0);
	image_store_close(other);
}

/* HOME=/root becomes HOME=/Root in the config blob at path. */
static void config_home_change(const char *path)
{
	_cleanup_free_ char *data = NULL;
	_cleanup_close_ int fd = -1;
	size_t len;
	char *at;

	cr_assert_eq(read_file(path, 1u << 20, &data, &len), 0);
	at = strstr(data, "HOME=/root");
	cr_assert_not_null(at, "%s", data);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	cr_assert_geq(fd, 0, "%s: %m", path);
	cr_assert_eq(pwrite(fd, "R", 1, at - data + strlen("HOME=/")), 1);
}

Test(export, damaged_config_fails_before_writing)
{
	struct station_error e = {};
	struct image *img = NULL;
	char blob[PATH_MAX];

	cr_assert_eq(image_lookup(store, manifest, &img, &e), 0, "%s", e.message);
	snprintf(blob, sizeof blob, "%s/images/blobs/sha256/%s", root,
		 img->config_digest + strlen("sha256:"));
	image_free(img);
	config_home_change(blob); /* still a valid config: only its digest tells */
	cr_assert_eq(export_to(store, manifest, out, &e), -EBADMSG, "%s", e.message);
	cr_assert_not_null(strstr(e.message, "config blob sha256:"), "%s", e.message);
	cr_assert_eq(file_size(out), 0);
}

Test(export, missing_blob_fails_before_writing)
{
	struct station_error e = {};
	char blob[PATH_MAX];

	layer_blob_path(blob);
	cr_assert_eq(unlink(blob), 0);
	cr_assert_eq(export_to(store, manifest, out, &e), -ENOENT);
	cr_assert_not_null(strstr(e.message, "is not in the store"), "%s", e.message);
	cr_assert_eq(file_size(out), 0);
}

Test(export, unknown_image)
{
	struct station_error e = {};
	const char *ref = "sha256:0000000000000000000000000000000000000000000000000000000000000000";

	cr_assert_eq(export_to(store, ref, out, &e), -ENOENT);
	cr_assert_not_null(strstr(e.message, "not in store"), "%s", e.message);
	cr_assert_eq(file_size(out), 0);
}
