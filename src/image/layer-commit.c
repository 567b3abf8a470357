/* SPDX-License-Identifier: MIT */
/* A snapshot layer committed to the store: the image made of a base image's layers (shared,
 * not copied) and one more, the tar image_layer_write() wrote. Done like an import: under the
 * store's lock, each blob and layer it adds recorded in a transaction that a failure undoes,
 * the index record written last.
 *
 * The tar is not read here: its digest (the diff id, which is also the blob's digest, the layer
 * being stored uncompressed) is the one image_layer_write() computed as it wrote it (or, when
 * the caller has none, hashed here), and the blob is the tar's own file, hard-linked into the
 * store when it is on the store's filesystem (nothing copied; the caller must not write to
 * tar_fd afterwards), else copied by the kernel (copy_file_range), fsync()ed before it is
 * named (on a store opened with image_store_defer_sync(), nothing is fsync()ed: image_sync()
 * does it after). The layer is not unpacked: images/layers/<hex> is made from the blob the first time
 * the image is used (image_layers_unpack(), with unpack.c's rules and limits, the digest
 * checked in the same pass), so a snapshot writes its bytes once. A blob with that digest in
 * the store already is kept and the new one dropped: identical trees are stored once.
 *
 * Without a base (a host workspace's snapshot: it has no image) the image is that one layer,
 * its config this machine's platform and no process settings. */

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "basic/cleanup.h"
#include "basic/json-util.h"
#include "image/image-internal.h"

#define TAR_BLOCK (1u << 20)
#define MT_OCI_LAYER_TAR "application/vnd.oci.image.layer.v1.tar"
#define SNAPSHOT_CREATED_BY "station-sandbox snapshot"

DEFINE_TRIVIAL_CLEANUP_FUNC(EVP_MD_CTX *, EVP_MD_CTX_free);

struct commit {
	struct image_store *s;
	const struct image *base;
	struct image_txn t;
	struct oci_manifest m; /* base's layers, then the new one */
	char **diff_ids;       /* the same */
	json_t *config;	       /* base's config, then edited */
	char diff_id[IMAGE_DIGEST_MAX];
	char digest[IMAGE_DIGEST_MAX]; /* the new manifest's */
	char dshort[DIGEST_SHORT_LEN]; /* base's, for messages */
	uint64_t tar_size, size;
	struct station_error *e;
};

static void commit_done(struct commit *c)
{
	oci_manifest_done(&c->m);
	strv_free(c->diff_ids);
	json_decref(c->config);
}

/* The tar's digest, when the caller did not hash it as it wrote it. */
static int tar_hash(struct commit *c, int tar_fd)
{
	_cleanup_(EVP_MD_CTX_freep) EVP_MD_CTX *sha = EVP_MD_CTX_new();
	_cleanup_free_ char *buf = malloc(TAR_BLOCK);
	uint8_t sum[EVP_MAX_MD_SIZE];
	unsigned len = 0;
	uint64_t offset = 0;
	char hex[65];

	if (!sha || !buf || EVP_DigestInit_ex(sha, EVP_sha256(), NULL) != 1)
		return -ENOMEM;
	for (;;) {
		ssize_t n = pread(tar_fd, buf, TAR_BLOCK, offset);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return station_error_set(c->e, negative_errno(), NULL,
						 "snapshot layer: cannot read: %m");
		if (n == 0)
			break;
		if (EVP_DigestUpdate(sha, buf, n) != 1)
			return -ENOMEM;
		offset += n;
	}
	if (EVP_DigestFinal_ex(sha, sum, &len) != 1 || len != 32)
		return -EIO;
	hex_encode(sum, 32, hex);
	snprintf(c->diff_id, sizeof c->diff_id, "sha256:%s", hex);
	return 0;
}

static int dir_fsync(const char *dir)
{
	_cleanup_close_ int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	return fd < 0 || fsync(fd) < 0 ? negative_errno() : 0;
}

static int fd_copy(int from, int to, uint64_t size)
{
	loff_t in = 0;

	while ((uint64_t)in < size) {
		ssize_t n = copy_file_range(from, &in, to, NULL, size - in, 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 &&
		    (errno == EXDEV || errno == ENOSYS || errno == EINVAL || errno == EOPNOTSUPP) &&
		    in == 0)
			break; /* below, by hand */
		if (n < 0)
			return negative_errno();
		if (n == 0)
			return -EIO; /* the file shrank */
	}
	if ((uint64_t)in == size)
		return 0;
	_cleanup_free_ char *buf = malloc(TAR_BLOCK);
	if (!buf)
		return -ENOMEM;
	while ((uint64_t)in < size) {
		ssize_t n = pread(from, buf, MIN((uint64_t)TAR_BLOCK, size - in), in);
		int r;

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? negative_errno() : -EIO;
		r = write_all(to, buf, n);
		if (r < 0)
			return r;
		in += n;
	}
	return 0;
}

/* The tar as the blob of its digest: a hard link to it, else a copy. */
static int tar_blob_store(struct commit *c, int tar_fd)
{
	char final[PATH_MAX], tmp[PATH_MAX], proc[64];
	_cleanup_close_ int fd = -1;
	int r = blob_exists(c->s, c->diff_id, NULL);

	if (r != 0)
		return r < 0 ? r : 0;
	blob_path(c->s, c->diff_id, final);
	if (!c->s->defer_sync && fsync(tar_fd) < 0)
		return negative_errno();
	snprintf(proc, sizeof proc, "/proc/self/fd/%d", tar_fd);
	if (linkat(AT_FDCWD, proc, AT_FDCWD, final, AT_SYMLINK_FOLLOW) == 0) {
		r = image_txn_add(&c->t, final);
		if (r >= 0 && fchmod(tar_fd, 0444) < 0)
			r = negative_errno();
		return r < 0 || c->s->defer_sync ? r : dir_fsync(c->s->blobs);
	}
	snprintf(tmp, sizeof tmp, "%s/.tmp-%.12s-XXXXXX", c->s->blobs,
		 c->diff_id + strlen("sha256:"));
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0)
		return negative_errno();
	r = fd_copy(tar_fd, fd, c->tar_size);
	if (r >= 0 && (fchmod(fd, 0444) < 0 || (!c->s->defer_sync && fsync(fd) < 0) ||
		       rename(tmp, final) < 0))
		r = negative_errno();
	if (r < 0) {
		unlink(tmp);
		return r;
	}
	r = image_txn_add(&c->t, final);
	return r < 0 || c->s->defer_sync ? r : dir_fsync(c->s->blobs);
}

/* the base image, its config and manifest */

static int base_load(struct commit *c)
{
	_cleanup_free_ char *record = NULL, *mdata = NULL, *cdata = NULL;
	struct image_config cfg = {};
	size_t mlen, clen;
	int r = image_record_find(c->s, c->base->digest, &record);

	if (r == -ENOENT)
		return image_error_not_in_store(c->base->digest, c->e);
	if (r >= 0)
		r = blob_read(c->s, c->base->digest, IMAGE_DOC_MAX, &mdata, &mlen);
	if (r >= 0)
		r = blob_read(c->s, c->base->config_digest, IMAGE_CONFIG_MAX, &cdata, &clen);
	if (r < 0)
		return station_error_set(c->e, r, NULL, "image %s: cannot read it: %s", c->dshort,
					 strerror(-r));
	r = oci_manifest_parse(mdata, mlen, c->base->digest, &c->m, c->e);
	if (r >= 0)
		r = image_config_parse(cdata, clen, c->base->config_digest, &cfg, &c->diff_ids,
				       c->e);
	image_config_done(&cfg);
	if (r < 0)
		return r;
	if (strv_length(c->diff_ids) != c->m.n_layers)
		return station_error_set(c->e, -EUCLEAN, NULL,
					 "image %s: its manifest and config disagree on its layers",
					 c->dshort);
	c->config = json_loadb(cdata, clen, 0, NULL);
	return c->config ? 0 : -ENOMEM;
}

/* No base (a host workspace's snapshot): no layers below, a config of this platform only. */
static int base_empty(struct commit *c)
{
	c->config = json_pack("{s:s, s:s, s:{}, s:{s:s, s:[]}, s:[]}", "architecture",
			      host_architecture(), "os", "linux", "config", "rootfs", "type",
			      "layers", "diff_ids", "history");
	return c->config ? 0 : -ENOMEM;
}

/* A JSON array member of o, made when absent or not an array. */
static json_t *array_member(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);

	if (json_is_array(v))
		return v;
	v = json_array();
	return v && json_object_set_new(o, key, v) == 0 ? v : NULL;
}

/* A small document as a blob; ret gets its digest. */
static int doc_blob_put(struct commit *c, const char *text, char ret[IMAGE_DIGEST_MAX])
{
	size_t len = strlen(text);
	struct blob_writer w;
	char hex[65];
	int r;

	sha256_hex(text, len, hex);
	snprintf(ret, IMAGE_DIGEST_MAX, "sha256:%s", hex);
	r = blob_exists(c->s, ret, NULL);
	if (r != 0)
		return r < 0 ? r : 0;
	r = blob_writer_open(c->s, ret, len, &w);
	if (r < 0)
		return r;
	r = blob_writer_write(&w, text, len);
	if (r < 0) {
		blob_writer_abort(&w);
		return r;
	}
	return blob_writer_commit(&w, &c->t, c->e);
}

/* base's config with the new diff id and a history entry; the new layer in c->m. */
static int config_write(struct commit *c, const char *name)
{
	json_t *rootfs = json_object_get(c->config, "rootfs");
	json_t *ids = json_is_object(rootfs) ? array_member(rootfs, "diff_ids") : NULL;
	json_t *history = array_member(c->config, "history");
	struct oci_descriptor *layers;
	_cleanup_free_ char *text = NULL;
	struct timespec now;
	char created[32];
	int r;

	clock_gettime(CLOCK_REALTIME, &now);
	format_rfc3339((uint64_t)now.tv_sec * 1000000 + now.tv_nsec / 1000, created);
	if (!ids || !history || json_array_append_new(ids, json_string(c->diff_id)) < 0 ||
	    json_array_append_new(history, json_pack("{s:s, s:s, s:s}", "created", created,
						     "created_by", SNAPSHOT_CREATED_BY, "comment",
						     name ? name : "")) < 0 ||
	    json_object_set_new(c->config, "created", json_string(created)) < 0)
		return -ENOMEM;
	text = json_dumps(c->config, JSON_COMPACT | JSON_SORT_KEYS);
	if (!text)
		return -ENOMEM;
	r = doc_blob_put(c, text, c->m.config.digest);
	if (r < 0)
		return r;
	snprintf(c->m.config.media_type, sizeof c->m.config.media_type, "%s", MT_OCI_CONFIG);
	c->m.config.size = strlen(text);
	layers = realloc(c->m.layers, (c->m.n_layers + 1) * sizeof *layers);
	if (!layers)
		return -ENOMEM;
	c->m.layers = layers;
	layers[c->m.n_layers++] =
		(struct oci_descriptor){ .media_type = MT_OCI_LAYER_TAR, .size = c->tar_size };
	snprintf(layers[c->m.n_layers - 1].digest, IMAGE_DIGEST_MAX, "%s", c->diff_id);
	return strv_push(&c->diff_ids, c->diff_id);
}

/* Docker's layer media types as their OCI equivalents: an OCI manifest lists them. */
static const char *layer_media_type_oci(const char *mt)
{
	switch (media_kind_from_string(mt)) {
	case MEDIA_LAYER_GZIP:
		return MT_OCI_LAYER_TAR "+gzip";
	case MEDIA_LAYER_ZSTD:
		return MT_OCI_LAYER_TAR "+zstd";
	default:
		return MT_OCI_LAYER_TAR;
	}
}

static int manifest_write(struct commit *c)
{
	_cleanup_json_ json_t *j = NULL;
	_cleanup_free_ char *text = NULL;
	json_t *layers = json_array();

	c->size = c->m.config.size;
	for (size_t i = 0; layers && i < c->m.n_layers; i++) {
		struct oci_descriptor *d = &c->m.layers[i];

		snprintf(d->media_type, sizeof d->media_type, "%s",
			 layer_media_type_oci(d->media_type));
		if (json_array_append_new(layers, json_pack("{s:s, s:s, s:I}", "mediaType",
							    d->media_type, "digest", d->digest,
							    "size", (json_int_t)d->size)) < 0)
			break;
		c->size += d->size;
	}
	j = json_pack("{s:i, s:s, s:{s:s, s:s, s:I}, s:o}", "schemaVersion", 2, "mediaType",
		      MT_OCI_MANIFEST, "config", "mediaType", c->m.config.media_type, "digest",
		      c->m.config.digest, "size", (json_int_t)c->m.config.size, "layers", layers);
	text = j ? json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
	if (!text)
		return -ENOMEM;
	c->size += strlen(text);
	return doc_blob_put(c, text, c->digest);
}

static int record_write(struct commit *c, const char *name)
{
	_cleanup_free_ char *path = NULL;
	int r;

	if (image_record_find(c->s, c->digest, &path) >= 0)
		return 0; /* the same image, committed before */
	r = image_record_write(c->s, c->digest, NULL, name, &c->m, c->diff_ids, c->size, c->e);
	if (r >= 0)
		r = image_record_find(c->s, c->digest, &path);
	return r < 0 ? r : image_txn_add(&c->t, path);
}

static int commit_locked(struct commit *c, int tar_fd, const char *name)
{
	int r = c->base ? base_load(c) : base_empty(c);

	if (r >= 0)
		r = tar_blob_store(c, tar_fd);
	if (r >= 0)
		r = config_write(c, name);
	if (r >= 0)
		r = manifest_write(c);
	if (r >= 0)
		r = record_write(c, name);
	if (r < 0 && !c->e->message[0])
		r = station_error_set(c->e, r, NULL, "snapshot of image %s: cannot store it: %s",
				      c->dshort, strerror(-r));
	return r;
}

int image_commit_layer(struct image_store *s, const struct image *base, int tar_fd,
		       const char *diff_id, const char *name, struct image **ret,
		       struct station_error *e)
{
	struct station_error local = {};
	struct commit c = { .s = s, .base = base, .e = e ? e : &local };
	char digest[IMAGE_DIGEST_MAX];
	struct stat st;
	int r;

	c.e->message[0] = '\0';
	if (base)
		digest_short(base->digest, c.dshort);
	else
		snprintf(c.dshort, sizeof c.dshort, "(none)");
	if (fstat(tar_fd, &st) < 0 || !S_ISREG(st.st_mode))
		return station_error_set(c.e, -EINVAL, NULL, "snapshot layer: not a regular file");
	c.tar_size = st.st_size;
	if (s->limits.max_layer_bytes && c.tar_size > s->limits.max_layer_bytes)
		return station_error_set(c.e, -EFBIG, NULL,
					 "snapshot layer: more than %llu bytes, the limit for a "
					 "layer (--max-layer-bytes)",
					 (unsigned long long)s->limits.max_layer_bytes);
	if (diff_id && !image_digest_is_valid(diff_id))
		return station_error_set(c.e, -EINVAL, NULL, "snapshot layer: invalid digest");
	if (diff_id)
		snprintf(c.diff_id, sizeof c.diff_id, "%s", diff_id);
	else if ((r = tar_hash(&c, tar_fd)) < 0)
		return r;
	r = image_store_lock(s);
	if (r < 0)
		return station_error_set(c.e, r, NULL, "image store: cannot lock: %s",
					 strerror(-r));
	r = commit_locked(&c, tar_fd, name);
	if (r < 0)
		image_txn_rollback(&c.t);
	image_txn_done(&c.t);
	image_store_unlock(s);
	snprintf(digest, sizeof digest, "%s", c.digest);
	commit_done(&c);
	if (r >= 0 && ret)
		r = image_lookup(s, digest, ret, c.e);
	return r;
}
