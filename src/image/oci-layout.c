/* SPDX-License-Identifier: MIT */
/* Import of an OCI image layout (a directory, or a tar of one), and the path every import and
 * pull takes from a top descriptor to an image in the store:
 * index.json → [image index →] manifest → config + layers → unpacked layers → index record. */

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "basic/cleanup.h"
#include "image/image-internal.h"

#define COPY_BLOCK (128u << 10)
#define LAYOUT_FILE_MAX 4096

DEFINE_TRIVIAL_CLEANUP_FUNC(struct archive *, archive_read_free);
#define _cleanup_archive_ _cleanup_(archive_read_freep)

/* ingest */

static int fetch(struct blob_source *src, struct image_store *s, struct image_txn *t,
		 const struct oci_descriptor *d, struct station_error *e)
{
	uint64_t size;
	char dshort[DIGEST_SHORT_LEN];
	int r = blob_exists(s, d->digest, &size);

	if (r < 0)
		return r;
	if (r == 0)
		return src->fetch(src, s, t, d, e);
	digest_short(d->digest, dshort);
	if (size != d->size)
		return station_error_set(
			e, -EBADMSG, NULL,
			"blob %s: size mismatch: %s has %llu bytes, its descriptor "
			"says %llu",
			dshort, src->what, (unsigned long long)size, (unsigned long long)d->size);
	return 0;
}

static int fetch_read(struct blob_source *src, struct image_store *s, struct image_txn *t,
		      const struct oci_descriptor *d, size_t max, char **ret, size_t *ret_len,
		      struct station_error *e)
{
	char dshort[DIGEST_SHORT_LEN];
	int r;

	digest_short(d->digest, dshort);
	if (d->size > max)
		return station_error_set(e, -E2BIG, NULL,
					 "%s: blob %s is %llu bytes, more than %zu", src->what,
					 dshort, (unsigned long long)d->size, max);
	r = fetch(src, s, t, d, e);
	if (r < 0)
		return r;
	r = blob_read(s, d->digest, max, ret, ret_len);
	if (r < 0)
		return station_error_set(e, r, NULL, "blob %s: cannot read: %s", dshort,
					 strerror(-r));
	return 0;
}

/* An image index: the entry for this platform. */
static int index_resolve(struct blob_source *src, struct image_store *s, struct image_txn *t,
			 const struct oci_descriptor *d, struct oci_descriptor *ret,
			 struct station_error *e)
{
	_cleanup_free_ char *data = NULL;
	struct oci_index idx = {};
	char what[64];
	size_t len;
	int r = fetch_read(src, s, t, d, IMAGE_DOC_MAX, &data, &len, e);

	if (r < 0)
		return r;
	snprintf(what, sizeof what, "image index %.19s", d->digest);
	r = oci_index_parse(data, len, what, &idx, e);
	if (r >= 0)
		r = oci_index_pick(&idx, what, ret, e);
	oci_index_done(&idx);
	if (r >= 0 && media_kind_from_string(ret->media_type) != MEDIA_MANIFEST)
		r = station_error_set(e, -ENOTSUP, NULL, "%s: entry %.19s is not an image manifest",
				      what, ret->digest);
	return r;
}

struct ingest {
	struct oci_manifest manifest;
	struct image_config config;
	char **diff_ids;
	uint64_t size;
};

static void ingest_done(struct ingest *g)
{
	oci_manifest_done(&g->manifest);
	image_config_done(&g->config);
	strv_free(g->diff_ids);
}

static int manifest_and_config_fetch(struct blob_source *src, struct image_store *s,
				     struct image_txn *t, const struct oci_descriptor *d,
				     struct ingest *g, struct station_error *e)
{
	_cleanup_free_ char *mdata = NULL, *cdata = NULL;
	size_t mlen, clen;
	int r = fetch_read(src, s, t, d, IMAGE_DOC_MAX, &mdata, &mlen, e);

	if (r >= 0)
		r = oci_manifest_parse(mdata, mlen, d->digest, &g->manifest, e);
	if (r >= 0)
		r = fetch_read(src, s, t, &g->manifest.config, IMAGE_CONFIG_MAX, &cdata, &clen, e);
	if (r >= 0)
		r = image_config_parse(cdata, clen, g->manifest.config.digest, &g->config,
				       &g->diff_ids, e);
	if (r < 0)
		return r;
	if (strv_length(g->diff_ids) != g->manifest.n_layers)
		return station_error_set(e, -EINVAL, NULL,
					 "manifest %.19s has %zu layers but its config lists %zu "
					 "diff ids",
					 d->digest, g->manifest.n_layers, strv_length(g->diff_ids));
	g->size = d->size + g->manifest.config.size;
	return 0;
}

/* A compressed blob larger than the decompressed limits cannot unpack within them: refused
 * before it is fetched. */
static int layer_blobs_check(const struct image_store *s, const struct ingest *g,
			     struct station_error *e)
{
	uint64_t sum = 0;

	for (size_t i = 0; i < g->manifest.n_layers; i++) {
		const struct oci_descriptor *d = &g->manifest.layers[i];
		char layer[DIGEST_SHORT_LEN];

		digest_short(d->digest, layer);
		sum += d->size;
		if (d->size > s->limits.max_layer_bytes)
			return station_error_set(e, -EFBIG, NULL,
						 "layer %s: its blob is %llu bytes, more than the "
						 "limit for a layer (--max-layer-bytes) of %llu",
						 layer, (unsigned long long)d->size,
						 (unsigned long long)s->limits.max_layer_bytes);
		if (sum > s->limits.max_image_bytes)
			return station_error_set(
				e, -EFBIG, NULL,
				"layer %s: the layer blobs add up to more than the "
				"limit for the image's layers (--max-image-bytes) "
				"of %llu bytes",
				layer, (unsigned long long)s->limits.max_image_bytes);
	}
	return 0;
}

static int layers_fetch_and_unpack(struct blob_source *src, struct image_store *s,
				   struct image_txn *t, struct ingest *g, struct station_error *e)
{
	struct image_budget b = {};
	int r = layer_blobs_check(s, g, e);

	if (r < 0)
		return r;
	for (size_t i = 0; i < g->manifest.n_layers; i++) {
		r = fetch(src, s, t, &g->manifest.layers[i], e);
		if (r < 0)
			return r;
		g->size += g->manifest.layers[i].size;
	}
	for (size_t i = 0; i < g->manifest.n_layers; i++) {
		r = layer_unpack(s, t, &g->manifest.layers[i], g->diff_ids[i], &b, e);
		if (r < 0)
			return r;
	}
	return 0;
}

int image_ingest(struct image_store *s, struct image_txn *t, struct blob_source *src,
		 const struct oci_descriptor *top, const char *name, struct image **ret,
		 struct station_error *e)
{
	_cleanup_free_ char *existing = NULL;
	struct oci_descriptor d = *top;
	struct ingest g = {};
	int r;

	if (image_record_find(s, top->digest, &existing) >= 0)
		return ret ? image_lookup(s, top->digest, ret, e) : 0;
	if (media_kind_from_string(d.media_type) == MEDIA_INDEX) {
		r = index_resolve(src, s, t, top, &d, e);
		if (r < 0)
			return r;
	} else if (media_kind_from_string(d.media_type) != MEDIA_MANIFEST) {
		return station_error_set(e, -ENOTSUP, NULL,
					 "%s: %.19s has unsupported mediaType \"%s\"", src->what,
					 d.digest, d.media_type);
	}
	r = manifest_and_config_fetch(src, s, t, &d, &g, e);
	if (r >= 0)
		r = layers_fetch_and_unpack(src, s, t, &g, e);
	if (r >= 0)
		r = image_record_write(s, d.digest,
				       strcmp(d.digest, top->digest) == 0 ? NULL : top->digest,
				       name, &g.manifest, g.diff_ids, g.size, e);
	if (r >= 0)
		r = image_record_find(s, d.digest, &existing); /* undone with the rest on failure */
	if (r >= 0)
		r = image_txn_add(t, existing);
	ingest_done(&g);
	if (r >= 0 && ret)
		r = image_lookup(s, d.digest, ret, e);
	return r;
}

/* layout directory */

struct layout_dir {
	struct blob_source src;
	int fd;
};

/* A regular file beneath the layout dir (a FIFO or device there must not block or be read);
 * -EINVAL when it is something else. */
static int open_beneath(int dfd, const char *path, int flags)
{
	struct open_how how = { .flags = flags | O_CLOEXEC | O_NONBLOCK,
				.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS };
	int fd = syscall(SYS_openat2, dfd, path, &how, sizeof how);
	struct stat st;

	if (fd < 0 && (errno == ENOSYS || errno == EPERM))
		fd = openat(dfd, path, flags | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (fd < 0)
		return negative_errno();
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return -EINVAL;
	}
	return fd;
}

static int blob_copy_fd(struct image_store *s, struct image_txn *t, int fd,
			const struct oci_descriptor *d, const char *what, struct station_error *e)
{
	_cleanup_free_ char *buf = malloc(COPY_BLOCK);
	struct blob_writer w;
	char dshort[DIGEST_SHORT_LEN];
	ssize_t n;
	int r;

	if (!buf)
		return -ENOMEM;
	digest_short(d->digest, dshort);
	r = blob_writer_open(s, d->digest, d->size, &w);
	if (r < 0)
		return station_error_set(e, r, NULL, "blob %s: cannot create in the store: %s",
					 dshort, strerror(-r));
	while ((n = read(fd, buf, COPY_BLOCK)) > 0 || (n < 0 && errno == EINTR)) {
		r = n > 0 ? blob_writer_write(&w, buf, n) : 0;
		if (r < 0)
			break;
	}
	if (r >= 0 && n < 0)
		r = negative_errno();
	if (r < 0) {
		blob_writer_abort(&w);
		if (r == -EFBIG)
			return station_error_set(
				e, -EBADMSG, NULL,
				"blob %s: size mismatch: %s has more than the %llu "
				"bytes its descriptor says",
				dshort, what, (unsigned long long)d->size);
		return station_error_set(e, r, NULL, "blob %s: cannot copy from %s: %s", dshort,
					 what, strerror(-r));
	}
	return blob_writer_commit(&w, t, e);
}

static int layout_dir_fetch(struct blob_source *src, struct image_store *s, struct image_txn *t,
			    const struct oci_descriptor *d, struct station_error *e)
{
	struct layout_dir *l = (struct layout_dir *)src;
	_cleanup_close_ int fd = -1;
	char rel[128];
	char dshort[DIGEST_SHORT_LEN];

	digest_short(d->digest, dshort);
	snprintf(rel, sizeof rel, "blobs/sha256/%s", d->digest + strlen("sha256:"));
	fd = open_beneath(l->fd, rel, O_RDONLY);
	if (fd == -ENOENT)
		return station_error_set(e, -ENOENT, NULL, "%s: blob %s is missing", src->what,
					 dshort);
	if (fd == -EXDEV)
		return station_error_set(e, -EPERM, NULL, "%s: blob %s leads out of the layout",
					 src->what, dshort);
	if (fd < 0)
		return station_error_set(e, fd, NULL, "%s: blob %s: cannot open: %s", src->what,
					 dshort, strerror(-fd));
	return blob_copy_fd(s, t, fd, d, src->what, e);
}

static int layout_file_read(int dfd, const char *name, const char *what, char **ret,
			    size_t *ret_len, size_t max, struct station_error *e)
{
	_cleanup_close_ int fd = open_beneath(dfd, name, O_RDONLY);
	_cleanup_free_ char *buf = NULL;
	size_t len = 0;
	ssize_t n;

	if (fd == -EXDEV)
		return station_error_set(e, -EPERM, NULL, "%s: %s leads out of the layout", what,
					 name);
	if (fd < 0)
		return station_error_set(e, fd == -ENOENT ? -EINVAL : fd, NULL,
					 "%s: cannot read %s: %s (not an OCI image layout?)", what,
					 name, strerror(-fd));
	buf = malloc(max + 1);
	if (!buf)
		return -ENOMEM;
	while (len <= max && (n = read(fd, buf + len, max + 1 - len)) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return station_error_set(e, negative_errno(), NULL,
						 "%s: cannot read %s: %m", what, name);
		len += n;
	}
	if (len > max)
		return station_error_set(e, -E2BIG, NULL, "%s: %s is larger than %zu bytes", what,
					 name, max);
	buf[len] = '\0';
	*ret = TAKE_PTR(buf);
	*ret_len = len;
	return 0;
}

static int oci_layout_check(const char *data, size_t len, const char *what, struct station_error *e)
{
	/* {"imageLayoutVersion": "1.0.0"}: a version string match is enough here. */
	if (!memmem(data, len, "\"imageLayoutVersion\"", 20) || !memmem(data, len, "\"1.", 3))
		return station_error_set(e, -ENOTSUP, NULL,
					 "%s: oci-layout does not declare imageLayoutVersion 1.x",
					 what);
	return 0;
}

/* index.json: the one manifest (or image index) to import. */
static int layout_top_pick(const char *index, size_t len, const char *what,
			   struct oci_descriptor *ret, struct station_error *e)
{
	struct oci_index idx = {};
	char idx_what[PATH_MAX + 32];
	int r;

	snprintf(idx_what, sizeof idx_what, "%s: index.json", what);
	r = oci_index_parse(index, len, idx_what, &idx, e);
	if (r >= 0)
		r = oci_index_pick(&idx, idx_what, ret, e);
	oci_index_done(&idx);
	return r;
}

static int layout_dir_import(struct image_store *s, struct image_txn *t, int fd, const char *path,
			     const char *name, struct image **ret, struct station_error *e)
{
	_cleanup_free_ char *layout = NULL, *index = NULL;
	char what[PATH_MAX + 16];
	struct oci_descriptor top;
	size_t llen, ilen;
	struct layout_dir l = { .src = { .fetch = layout_dir_fetch, .what = what } };
	int r;

	snprintf(what, sizeof what, "layout \"%s\"", path);
	l.fd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
	if (l.fd < 0)
		return station_error_set(e, negative_errno(), NULL, "%s: cannot open: %m", what);
	r = layout_file_read(l.fd, "oci-layout", what, &layout, &llen, LAYOUT_FILE_MAX, e);
	if (r >= 0)
		r = oci_layout_check(layout, llen, what, e);
	if (r >= 0)
		r = layout_file_read(l.fd, "index.json", what, &index, &ilen, IMAGE_DOC_MAX, e);
	if (r >= 0)
		r = layout_top_pick(index, ilen, what, &top, e);
	if (r >= 0)
		r = image_ingest(s, t, &l.src, &top, name, ret, e);
	close(l.fd);
	return r;
}

/* layout tar: blobs go straight into the store (verified), index.json and oci-layout into
 * memory; then the import runs against the store, and what it did not use is collected. */

struct layout_tar {
	struct blob_source src;
	char *layout, *index;
	size_t layout_len, index_len;
};

static int layout_tar_fetch(struct blob_source *src, struct image_store *s, struct image_txn *t,
			    const struct oci_descriptor *d, struct station_error *e)
{
	char dshort[DIGEST_SHORT_LEN];

	digest_short(d->digest, dshort);
	return station_error_set(e, -ENOENT, NULL, "%s: blob %s is missing", src->what, dshort);
}

static const char *tar_name_strip(const char *p)
{
	while (p[0] == '.' && p[1] == '/')
		p += 2;
	while (p[0] == '/')
		p++;
	return p;
}

static int tar_small_read(struct archive *a, struct archive_entry *ent, const char *what,
			  const char *name, size_t max, char **ret, size_t *ret_len,
			  struct station_error *e)
{
	la_int64_t size = archive_entry_size(ent);
	_cleanup_free_ char *buf = NULL;
	la_ssize_t n;

	if (size < 0 || (uint64_t)size > max)
		return station_error_set(e, -E2BIG, NULL, "%s: %s is larger than %zu bytes", what,
					 name, max);
	buf = malloc(size + 1);
	if (!buf)
		return -ENOMEM;
	n = archive_read_data(a, buf, size);
	if (n != size)
		return station_error_set(e, -EBADMSG, NULL, "%s: %s is truncated", what, name);
	buf[size] = '\0';
	free(*ret);
	*ret = TAKE_PTR(buf);
	*ret_len = size;
	return 0;
}

static int tar_blob_ingest(struct image_store *s, struct image_txn *t, struct archive *a,
			   struct archive_entry *ent, const char *digest, const char *what,
			   struct station_error *e)
{
	_cleanup_free_ char *buf = malloc(COPY_BLOCK);
	struct blob_writer w;
	char dshort[DIGEST_SHORT_LEN];
	la_ssize_t n;
	int r = blob_exists(s, digest, NULL);

	if (r != 0)
		return r < 0 ? r : archive_read_data_skip(a) == ARCHIVE_OK ? 0 : -EBADMSG;
	if (!buf)
		return -ENOMEM;
	digest_short(digest, dshort);
	r = blob_writer_open(s, digest, archive_entry_size(ent), &w);
	if (r < 0)
		return station_error_set(e, r, NULL, "blob %s: cannot create in the store: %s",
					 dshort, strerror(-r));
	while (r >= 0 && (n = archive_read_data(a, buf, COPY_BLOCK)) > 0)
		r = blob_writer_write(&w, buf, n);
	if (r >= 0 && n < 0)
		r = station_error_set(e, -EBADMSG, NULL, "%s: blob %s is truncated: %s", what,
				      dshort, archive_error_string(a));
	if (r < 0) {
		blob_writer_abort(&w);
		return r;
	}
	return blob_writer_commit(&w, t, e);
}

static int tar_entry_ingest(struct image_store *s, struct image_txn *t, struct layout_tar *l,
			    struct archive *a, struct archive_entry *ent, struct station_error *e)
{
	const char *name = tar_name_strip(archive_entry_pathname(ent) ?: "");
	char digest[IMAGE_DIGEST_MAX];

	if (archive_entry_filetype(ent) != AE_IFREG)
		return 0;
	if (strcmp(name, "oci-layout") == 0)
		return tar_small_read(a, ent, l->src.what, name, LAYOUT_FILE_MAX, &l->layout,
				      &l->layout_len, e);
	if (strcmp(name, "index.json") == 0)
		return tar_small_read(a, ent, l->src.what, name, IMAGE_DOC_MAX, &l->index,
				      &l->index_len, e);
	if (strncmp(name, "blobs/sha256/", 13) != 0)
		return 0;
	if (strlen(name + 13) != 64)
		return 0;
	snprintf(digest, sizeof digest, "sha256:%.64s", name + 13);
	if (!image_digest_is_valid(digest))
		return 0;
	return tar_blob_ingest(s, t, a, ent, digest, l->src.what, e);
}

static int layout_tar_read(struct image_store *s, struct image_txn *t, int fd, struct layout_tar *l,
			   struct station_error *e)
{
	_cleanup_archive_ struct archive *a = archive_read_new();
	struct archive_entry *ent;
	int r;

	if (!a)
		return -ENOMEM;
	archive_read_support_filter_gzip(a);
	archive_read_support_filter_zstd(a);
	archive_read_support_format_tar(a);
	if (archive_read_open_fd(a, fd, COPY_BLOCK) != ARCHIVE_OK)
		return station_error_set(e, -EINVAL, NULL, "%s: cannot read as a tar: %s",
					 l->src.what, archive_error_string(a));
	while ((r = archive_read_next_header(a, &ent)) != ARCHIVE_EOF) {
		if (r < ARCHIVE_WARN)
			return station_error_set(e, -EBADMSG, NULL, "%s: corrupt tar: %s",
						 l->src.what, archive_error_string(a));
		r = tar_entry_ingest(s, t, l, a, ent, e);
		if (r < 0)
			return r;
	}
	if (!l->layout || !l->index)
		return station_error_set(e, -EINVAL, NULL,
					 "%s: no %s in the tar (not an OCI image layout?)",
					 l->src.what, l->layout ? "index.json" : "oci-layout");
	return 0;
}

static int layout_tar_import(struct image_store *s, struct image_txn *t, int fd, const char *path,
			     const char *name, struct image **ret, struct station_error *e)
{
	char what[PATH_MAX + 16];
	struct layout_tar l = { .src = { .fetch = layout_tar_fetch, .what = what } };
	struct oci_descriptor top;
	int r;

	snprintf(what, sizeof what, "layout \"%s\"", path);
	r = layout_tar_read(s, t, fd, &l, e);
	if (r >= 0)
		r = oci_layout_check(l.layout, l.layout_len, what, e);
	if (r >= 0)
		r = layout_top_pick(l.index, l.index_len, what, &top, e);
	if (r >= 0)
		r = image_ingest(s, t, &l.src, &top, name, ret, e);
	free(l.layout);
	free(l.index);
	return r;
}

int image_import_layout_fd(struct image_store *s, int fd, const char *path, const char *name,
			   struct image **ret, struct station_error *e)
{
	struct image_txn t = {};
	struct stat st;
	int r;

	if (fstat(fd, &st) < 0)
		return station_error_set(e, negative_errno(), "path", "layout \"%s\": %m", path);
	if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode))
		return station_error_set(e, -EINVAL, "path",
					 "layout \"%s\": neither a directory nor a tar", path);
	r = image_store_lock(s);
	if (r < 0)
		return station_error_set(e, r, NULL, "image store: cannot lock: %s", strerror(-r));
	if (S_ISDIR(st.st_mode))
		r = layout_dir_import(s, &t, fd, path, name, ret, e);
	else
		r = layout_tar_import(s, &t, fd, path, name, ret, e);
	if (r < 0)
		image_txn_rollback(&t);
	else if (S_ISREG(st.st_mode))
		(void)image_store_gc(s); /* blobs of the tar that the image does not use */
	image_txn_done(&t);
	image_store_unlock(s);
	return r;
}

int image_import_layout(struct image_store *s, const char *path, const char *name,
			struct image **ret, struct station_error *e)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	struct stat st;

	if (fd < 0)
		return station_error_set(e, negative_errno(), "path", "layout \"%s\": %m", path);
	if (fstat(fd, &st) < 0)
		return negative_errno();
	if (S_ISREG(st.st_mode) && fcntl(fd, F_SETFL, 0) < 0)
		return negative_errno();
	return image_import_layout_fd(s, fd, path, name, ret, e);
}
