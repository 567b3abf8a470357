/* SPDX-License-Identifier: MIT */
/* Export of an image as an OCI image layout tar: oci-layout, index.json naming the image's
 * manifest, and blobs/sha256/<hex> for the manifest, its config and every layer blob, read
 * from the store.
 *
 * What this file decides:
 *  - No lock. Blobs are content-addressed and never rewritten in place (a blob is written to a
 *    temporary file and renamed), and the record is written atomically: once the record is
 *    read, every blob is opened before the first byte goes out. A removal after that unlinks
 *    files already open, whose bytes stay readable to the end; a removal before makes an open
 *    fail, and the export with it (naming the blob), never a short blob.
 *  - Every blob is verified against its digest and size: the manifest and config before
 *    anything is written (an error there leaves out_fd untouched), each layer as it streams.
 *    A layer that fails is the end: nothing more is written, not even the tar's end, so what
 *    was written is not a whole tar.
 *  - The same image gives the same bytes: entries in a fixed order, owner 0:0, mtime 0.
 *  - Only the manifest is exported: an image imported through an image index exports as its
 *    manifest for this platform (the index and its other platforms were never stored). */

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "basic/cleanup.h"
#include "basic/json-util.h"
#include "image/image-internal.h"

#define EXPORT_BLOCK (64u << 10) /* tar output block, and blob read size */
#define OCI_LAYOUT_TEXT "{\"imageLayoutVersion\":\"1.0.0\"}"
#define ANNOTATION_REF_NAME "org.opencontainers.image.ref.name"

/* One blob of the export: its descriptor, and for a layer the file opened up front. */
struct export_blob {
	struct oci_descriptor d;
	const char *what; /* "manifest", "config", "layer" */
	int fd;
};

struct export
{
	struct image_store *s;
	struct image *img;
	struct oci_manifest m;
	char manifest_type[128];
	char *manifest, *config; /* the documents' bytes, verified */
	size_t manifest_len, config_len;
	struct export_blob *layers; /* distinct layer blobs, in manifest order */
	size_t n_layers;
	struct archive *a;
	struct archive_entry *ent;
	int out_fd;
	int write_err; /* errno of the last failed write to out_fd */
	bool failed;   /* nothing more may reach out_fd */
	char *buf;
	struct station_error *e;
};

static void export_done(struct export *x)
{
	for (size_t i = 0; i < x->n_layers; i++)
		close(x->layers[i].fd);
	free(x->layers);
	oci_manifest_done(&x->m);
	image_free(x->img);
	free(x->manifest);
	free(x->config);
	archive_entry_free(x->ent);
	if (x->a) {
		x->failed = x->failed || x->write_err; /* no end-of-archive after a failure */
		archive_write_free(x->a);
	}
	free(x->buf);
}

static int blob_mismatch(struct export *x, const struct export_blob *b, const char *cause)
{
	char dshort[DIGEST_SHORT_LEN];

	digest_short(b->d.digest, dshort);
	return station_error_set(x->e, -EBADMSG, NULL,
				 "image %s: %s blob %s in the store %s: the store is damaged "
				 "(remove the image and import or pull it again)",
				 x->img->digest, b->what, dshort, cause);
}

static int blob_missing(struct export *x, const struct export_blob *b, int err)
{
	char dshort[DIGEST_SHORT_LEN];

	digest_short(b->d.digest, dshort);
	if (err == -ENOENT)
		return station_error_set(x->e, -ENOENT, NULL,
					 "image %s: %s blob %s is not in the store (the image was "
					 "removed meanwhile?)",
					 x->img->digest, b->what, dshort);
	return station_error_set(x->e, err, NULL, "image %s: %s blob %s: cannot open: %s",
				 x->img->digest, b->what, dshort, strerror(-err));
}

/* A blob of the store, open for reading, its size b->d.size (UINT64_MAX: any). */
static int blob_open(struct export *x, const struct export_blob *b, int *ret, uint64_t *ret_size)
{
	char path[PATH_MAX];
	struct stat st;
	int fd, r = blob_path(x->s, b->d.digest, path);

	if (r < 0)
		return blob_missing(x, b, r);
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (fd < 0)
		return blob_missing(x, b, negative_errno());
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return blob_mismatch(x, b, "is not a regular file");
	}
	if (b->d.size != UINT64_MAX && (uint64_t)st.st_size != b->d.size) {
		char cause[96];

		close(fd);
		snprintf(cause, sizeof cause, "has %llu bytes, its descriptor says %llu",
			 (unsigned long long)st.st_size, (unsigned long long)b->d.size);
		return blob_mismatch(x, b, cause);
	}
	*ret = fd;
	*ret_size = st.st_size;
	return 0;
}

static int digest_check(struct export *x, const struct export_blob *b, struct sha256_ctx *sha)
{
	uint8_t sum[32];
	char hex[65], cause[96];

	sha256_final(sha, sum);
	hex_encode(sum, sizeof sum, hex);
	if (strcmp(hex, b->d.digest + strlen("sha256:")) == 0)
		return 0;
	snprintf(cause, sizeof cause, "does not match its digest (its content has sha256:%.12s)",
		 hex);
	return blob_mismatch(x, b, cause);
}

/* A small document blob read whole and verified. */
static int doc_read(struct export *x, const struct export_blob *b, size_t max, char **ret,
		    size_t *ret_len)
{
	_cleanup_close_ int fd = -1;
	_cleanup_free_ char *data = NULL;
	struct sha256_ctx sha;
	uint64_t size;
	size_t len = 0;
	int r = blob_open(x, b, &fd, &size);

	if (r < 0)
		return r;
	if (size > max)
		return blob_mismatch(x, b, "is larger than a document may be");
	data = malloc(size + 1);
	if (!data)
		return -ENOMEM;
	while (len < size) {
		ssize_t n = read(fd, data + len, size - len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return blob_mismatch(x, b, n < 0 ? "cannot be read" : "shrank while read");
		len += n;
	}
	data[len] = '\0';
	sha256_init(&sha);
	sha256_update(&sha, data, len);
	r = digest_check(x, b, &sha);
	if (r < 0)
		return r;
	*ret = TAKE_PTR(data);
	*ret_len = len;
	return 0;
}

/* The manifest's own mediaType (an OCI manifest may leave it out). */
static void manifest_type_set(struct export *x)
{
	_cleanup_json_ json_t *j = json_loadb(x->manifest, x->manifest_len, 0, NULL);
	const char *t = json_string_value(json_object_get(j, "mediaType"));

	snprintf(x->manifest_type, sizeof x->manifest_type, "%s", t ? t : MT_OCI_MANIFEST);
}

static int documents_read(struct export *x)
{
	struct export_blob mb = { .what = "manifest", .d.size = UINT64_MAX };
	struct export_blob cb = { .what = "config" };
	int r;

	snprintf(mb.d.digest, sizeof mb.d.digest, "%s", x->img->digest);
	r = doc_read(x, &mb, IMAGE_DOC_MAX, &x->manifest, &x->manifest_len);
	if (r >= 0)
		r = oci_manifest_parse(x->manifest, x->manifest_len, x->img->digest, &x->m, x->e);
	if (r < 0)
		return r;
	manifest_type_set(x);
	cb.d = x->m.config;
	return doc_read(x, &cb, IMAGE_CONFIG_MAX, &x->config, &x->config_len);
}

static bool layer_listed(const struct export *x, const char *digest)
{
	for (size_t i = 0; i < x->n_layers; i++)
		if (strcmp(x->layers[i].d.digest, digest) == 0)
			return true;
	return false;
}

/* Every layer blob opened before a byte is written. */
static int layers_open(struct export *x)
{
	x->layers = calloc(x->m.n_layers + 1, sizeof *x->layers);
	if (!x->layers)
		return -ENOMEM;
	for (size_t i = 0; i < x->m.n_layers; i++) {
		struct export_blob *b = &x->layers[x->n_layers];
		uint64_t size;
		int r;

		if (layer_listed(x, x->m.layers[i].digest))
			continue;
		*b = (struct export_blob){ .d = x->m.layers[i], .what = "layer", .fd = -1 };
		r = blob_open(x, b, &b->fd, &size);
		if (r < 0)
			return r;
		x->n_layers++;
	}
	return 0;
}

/* the tar */

static la_ssize_t out_write(struct archive *a, void *userdata, const void *buf, size_t n)
{
	struct export *x = userdata;
	int r = x->failed ? -ECANCELED : write_all(x->out_fd, buf, n);

	if (r < 0) {
		if (!x->failed)
			x->write_err = -r;
		archive_set_error(a, -r, "%s", strerror(-r));
		return -1;
	}
	return n;
}

static int archive_fail(struct export *x)
{
	int err = x->write_err ? x->write_err : archive_errno(x->a);
	const char *msg = archive_error_string(x->a);

	x->failed = true;
	return station_error_set(x->e, err > 0 ? -err : -EIO, NULL,
				 "image %s: cannot write the export: %s", x->img->digest,
				 x->write_err ? strerror(x->write_err) :
				 msg	      ? msg :
						"?");
}

static int archive_out_open(struct export *x)
{
	x->a = archive_write_new();
	x->ent = archive_entry_new();
	x->buf = malloc(EXPORT_BLOCK);
	if (!x->a || !x->ent || !x->buf)
		return -ENOMEM;
	if (archive_write_set_format_pax_restricted(x->a) != ARCHIVE_OK ||
	    archive_write_set_bytes_per_block(x->a, EXPORT_BLOCK) != ARCHIVE_OK ||
	    archive_write_set_bytes_in_last_block(x->a, 1) != ARCHIVE_OK ||
	    archive_write_open(x->a, x, NULL, out_write, NULL) != ARCHIVE_OK)
		return archive_fail(x);
	return 0;
}

static int entry_write(struct export *x, const char *name, mode_t type, uint64_t size)
{
	archive_entry_clear(x->ent);
	archive_entry_copy_pathname(x->ent, name);
	archive_entry_set_filetype(x->ent, type);
	archive_entry_set_perm(x->ent, type == AE_IFDIR ? 0755 : 0644);
	archive_entry_set_size(x->ent, type == AE_IFDIR ? 0 : (la_int64_t)size);
	archive_entry_set_mtime(x->ent, 0, 0);
	if (archive_write_header(x->a, x->ent) < ARCHIVE_WARN)
		return archive_fail(x);
	return 0;
}

static int file_write(struct export *x, const char *name, const void *data, size_t len)
{
	int r = entry_write(x, name, AE_IFREG, len);

	if (r >= 0 && len > 0 && archive_write_data(x->a, data, len) != (la_ssize_t)len)
		return archive_fail(x);
	return r;
}

static void blob_name(const char *digest, char ret[96])
{
	snprintf(ret, 96, "blobs/sha256/%s", digest + strlen("sha256:"));
}

/* A layer blob streamed from its open file, hashed as it goes. */
static int layer_write(struct export *x, const struct export_blob *b)
{
	struct sha256_ctx sha;
	char name[96];
	int r;

	blob_name(b->d.digest, name);
	r = entry_write(x, name, AE_IFREG, b->d.size);
	if (r < 0)
		return r;
	sha256_init(&sha);
	for (uint64_t done = 0; done < b->d.size;) {
		size_t want = b->d.size - done < EXPORT_BLOCK ? b->d.size - done : EXPORT_BLOCK;
		ssize_t n = read(b->fd, x->buf, want);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			x->failed = true;
			return blob_mismatch(x, b, n < 0 ? "cannot be read" : "shrank while read");
		}
		sha256_update(&sha, x->buf, n);
		if (archive_write_data(x->a, x->buf, n) != n)
			return archive_fail(x);
		done += n;
	}
	r = digest_check(x, b, &sha);
	if (r < 0)
		x->failed = true;
	return r;
}

/* index.json: the one manifest, named when the image has a name. */
static int index_json(struct export *x, char **ret)
{
	_cleanup_json_ json_t *j = NULL;
	json_t *d;

	d = json_pack("{s:s, s:s, s:I}", "mediaType", x->manifest_type, "digest", x->img->digest,
		      "size", (json_int_t)x->manifest_len);
	if (d && x->img->config.os && x->img->config.architecture)
		json_object_set_new(d, "platform",
				    json_pack("{s:s, s:s}", "os", x->img->config.os, "architecture",
					      x->img->config.architecture));
	if (d && x->img->name && *x->img->name)
		json_object_set_new(d, "annotations",
				    json_pack("{s:s}", ANNOTATION_REF_NAME, x->img->name));
	j = d ? json_pack("{s:i, s:s, s:[o]}", "schemaVersion", 2, "mediaType", MT_OCI_INDEX,
			  "manifests", d) :
		NULL;
	*ret = j ? json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
	return *ret ? 0 : -ENOMEM;
}

static int tar_write(struct export *x)
{
	_cleanup_free_ char *index = NULL;
	char name[96];
	int r = index_json(x, &index);

	if (r >= 0)
		r = archive_out_open(x);
	if (r >= 0)
		r = file_write(x, "oci-layout", OCI_LAYOUT_TEXT, strlen(OCI_LAYOUT_TEXT));
	if (r >= 0)
		r = file_write(x, "index.json", index, strlen(index));
	if (r >= 0)
		r = entry_write(x, "blobs/", AE_IFDIR, 0);
	if (r >= 0)
		r = entry_write(x, "blobs/sha256/", AE_IFDIR, 0);
	blob_name(x->img->digest, name);
	if (r >= 0)
		r = file_write(x, name, x->manifest, x->manifest_len);
	blob_name(x->m.config.digest, name);
	if (r >= 0)
		r = file_write(x, name, x->config, x->config_len);
	for (size_t i = 0; r >= 0 && i < x->n_layers; i++)
		r = layer_write(x, &x->layers[i]);
	if (r >= 0 && archive_write_close(x->a) != ARCHIVE_OK)
		r = archive_fail(x);
	return r;
}

int image_export_layout(struct image_store *s, const char *ref, int out_fd, struct station_error *e)
{
	struct station_error local = {};
	struct export x = { .s = s, .out_fd = out_fd, .e = e ? e : &local };
	int r = image_lookup(s, ref, &x.img, x.e);

	if (r >= 0)
		r = documents_read(&x);
	if (r >= 0)
		r = layers_open(&x);
	if (r >= 0)
		r = tar_write(&x);
	export_done(&x);
	return r;
}
