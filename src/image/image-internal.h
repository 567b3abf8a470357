/* SPDX-License-Identifier: MIT */
#pragma once

/* Shared between the files of src/image/ and its unit tests; not part of the API. */

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "basic/error.h"
#include "basic/util.h"
#include "image/image.h"

#define MT_OCI_MANIFEST "application/vnd.oci.image.manifest.v1+json"
#define MT_OCI_INDEX "application/vnd.oci.image.index.v1+json"
#define MT_OCI_CONFIG "application/vnd.oci.image.config.v1+json"
#define MT_DOCKER_MANIFEST "application/vnd.docker.distribution.manifest.v2+json"
#define MT_DOCKER_LIST "application/vnd.docker.distribution.manifest.list.v2+json"
#define MT_DOCKER_CONFIG "application/vnd.docker.container.image.v1+json"

#define IMAGE_DOC_MAX (4u << 20)    /* manifests, indexes, index.json */
#define IMAGE_CONFIG_MAX (8u << 20) /* image configs */

/* A short form of a digest for messages: "sha256:" and the first 12 hex digits. */
#define DIGEST_SHORT_LEN 20
void digest_short(const char *digest, char ret[DIGEST_SHORT_LEN]);

enum media_kind {
	MEDIA_UNKNOWN,
	MEDIA_MANIFEST,
	MEDIA_INDEX,
	MEDIA_CONFIG,
	MEDIA_LAYER_TAR,
	MEDIA_LAYER_GZIP,
	MEDIA_LAYER_ZSTD,
	MEDIA_LAYER_FOREIGN, /* nondistributable layers: refused */
};
enum media_kind media_kind_from_string(const char *media_type);
bool media_kind_is_layer(enum media_kind k);

struct oci_descriptor {
	char media_type[128];
	char digest[IMAGE_DIGEST_MAX];
	uint64_t size;
	char os[32]; /* platform, only in image indexes; "" when absent */
	char arch[32];
};

struct oci_index {
	struct oci_descriptor *manifests;
	size_t n_manifests;
};
void oci_index_done(struct oci_index *idx);

struct oci_manifest {
	struct oci_descriptor config;
	struct oci_descriptor *layers;
	size_t n_layers;
};
void oci_manifest_done(struct oci_manifest *m);

/* What a JSON document is, from the media type it came with (may be NULL or "") and else from
 * its own mediaType field or shape: MEDIA_MANIFEST, MEDIA_INDEX or MEDIA_UNKNOWN. */
enum media_kind oci_document_kind(const char *data, size_t n, const char *media_type);

/* Parses an image index (index.json of a layout, or a registry's). what names the document in
 * messages. */
int oci_index_parse(const char *data, size_t n, const char *what, struct oci_index *ret,
		    struct station_error *e);
/* The manifest to use: the only one, or the one for linux/<host architecture>. */
int oci_index_pick(const struct oci_index *idx, const char *what, struct oci_descriptor *ret,
		   struct station_error *e);
int oci_manifest_parse(const char *data, size_t n, const char *digest, struct oci_manifest *ret,
		       struct station_error *e);
/* Parses an image config; ret_diff_ids gets rootfs.diff_ids (NULL-terminated). */
int image_config_parse(const char *data, size_t n, const char *digest, struct image_config *ret,
		       char ***ret_diff_ids, struct station_error *e);

/* "amd64", "arm64", … for this machine. */
const char *host_architecture(void);

struct image_store {
	char *root;   /* <root>/images */
	char *blobs;  /* <root>/images/blobs/sha256 */
	char *layers; /* <root>/images/layers */
	char *index;  /* <root>/images/index */
	char *trash;  /* <root>/images/trash: layer dirs being removed, renamed here first */
	int lock_fd;
	struct image_limits limits;
	bool defer_sync; /* image_store_defer_sync(): blobs and records written, not fsync()ed */
};

/* What one import or pull has added so far, removed again when it fails. */
struct image_txn {
	char **added; /* absolute paths of blobs and layer dirs, oldest first */
};
int image_txn_add(struct image_txn *t, const char *path);
void image_txn_rollback(struct image_txn *t);
void image_txn_done(struct image_txn *t);

/* Exclusive lock on images/lock for the duration of a writing operation. */
int image_store_lock(struct image_store *s);
/* The same without waiting: -EBUSY while another operation holds it. */
int image_store_trylock(struct image_store *s);
void image_store_unlock(struct image_store *s);

int blob_path(const struct image_store *s, const char *digest, char ret[PATH_MAX]);
/* 1 and the size when the blob is in the store, 0 when not. */
int blob_exists(const struct image_store *s, const char *digest, uint64_t *ret_size);
int blob_read(const struct image_store *s, const char *digest, size_t max, char **ret,
	      size_t *ret_len);

/* A blob being written: bytes go to a temporary file beside the final name while their
 * SHA-256 is computed; commit verifies digest and size, fsyncs and renames. */
struct blob_writer {
	int fd;
	char tmp[PATH_MAX];
	char final[PATH_MAX];
	char digest[IMAGE_DIGEST_MAX];
	uint64_t expected_size; /* UINT64_MAX when unknown */
	uint64_t size;
	struct sha256_ctx sha;
	bool defer_sync; /* the store's: committed without fsync() */
};
int blob_writer_open(struct image_store *s, const char *digest, uint64_t expected_size,
		     struct blob_writer *ret);
/* -EFBIG once more bytes arrive than expected_size. */
int blob_writer_write(struct blob_writer *w, const void *data, size_t n);
/* Verifies and publishes the blob; records it in t. -EBADMSG on a mismatch, with a message. */
int blob_writer_commit(struct blob_writer *w, struct image_txn *t, struct station_error *e);
void blob_writer_abort(struct blob_writer *w);

/* Where blobs come from during an import: a layout directory, a tar already copied into the
 * store, or a registry. fetch brings the blob d describes into the store, verified, unless it
 * is there already. */
struct blob_source {
	int (*fetch)(struct blob_source *src, struct image_store *s, struct image_txn *t,
		     const struct oci_descriptor *d, struct station_error *e);
	const char *what; /* for messages: the layout path or registry reference */
};

/* From the top descriptor (a manifest or an image index) to an image in the store: fetches
 * and parses manifest, config and layers, unpacks the layers, writes the index record. */
int image_ingest(struct image_store *s, struct image_txn *t, struct blob_source *src,
		 const struct oci_descriptor *top, const char *name, struct image **ret,
		 struct station_error *e);

/* The path of the record of the image with this manifest digest, or imported through this
 * index digest; -ENOENT when there is none. */
int image_record_find(struct image_store *s, const char *digest, char **ret);
/* Removes blobs and layers that no record references, and leftover temporaries. */
int image_store_gc(struct image_store *s);

/* Writes images/index/<hex>.json for an image whose blobs and layers are all in place. */
int image_record_write(struct image_store *s, const char *digest, const char *index_digest,
		       const char *name, const struct oci_manifest *m, char *const *diff_ids,
		       uint64_t size, struct station_error *e);

/* Layer file owners are kept only inside the container id range (unpack.c). */
#define LAYER_ID_RANGE 65536
#define LAYER_ID_OVERFLOW 65534

/* Bounds on one layer's unpacking; what names each limit in messages ("the per-layer limit
 * (--max-layer-bytes)"). 0: no bound. */
struct layer_limits {
	uint64_t max_bytes;   /* decompressed tar stream, and the sum of regular file sizes */
	uint64_t max_entries; /* tar entries */
	const char *bytes_what, *entries_what;
};

/* The digest of the uncompressed tar of a layer blob ("sha256:<hex>") and its size. -EFBIG,
 * with *e left for the caller to fill, once the decompressed stream passes max_bytes (0: no
 * bound): nothing more is decompressed. */
int layer_diff_id(const char *blob, const char *layer, uint64_t max_bytes,
		  char ret[IMAGE_DIGEST_MAX], uint64_t *ret_size, struct station_error *e);
/* Unpacks a layer tar (plain, gzip or zstd; detected from content) into dest, which must not
 * exist: entries go to a temporary dir beside it that is renamed to dest at the end, and is
 * removed when an entry is refused or a limit of lim (NULL: none) is passed. layer names the
 * layer in messages. *ret_entries (may be NULL) gets the number of entries. */
int layer_unpack_file(const char *blob, const char *dest, const char *layer,
		      const struct layer_limits *lim, uint64_t *ret_entries,
		      struct station_error *e);

/* The same for a tar archive the caller opened (its reader, format and filters), into dir,
 * an empty directory the caller made and moves into place (or removes on failure). */
struct archive;
int layer_unpack_archive(struct archive *a, const char *dir, const char *layer,
			 const struct layer_limits *lim, uint64_t *ret_entries,
			 struct station_error *e);

/* An uncompressed layer tar read from fd (pread from offset 0) and unpacked into dir (as
 * layer_unpack_archive()), hashed in the same pass: ret_diff_id gets the digest of every byte
 * of the fd, *ret_size (may be NULL) their count, *ret_entries (may be NULL) the entries. The
 * caller compares the digest before it moves dir into place. -EFBIG past lim->max_bytes. */
int layer_unpack_tar_fd(int fd, const char *dir, const char *layer, const struct layer_limits *lim,
			char ret_diff_id[IMAGE_DIGEST_MAX], uint64_t *ret_size,
			uint64_t *ret_entries, struct station_error *e);

/* What the layers of one import have used so far, against the store's limits. */
struct image_budget {
	uint64_t bytes;
	uint64_t entries;
};
/* Unpacks the layer blob with this digest into images/layers/<diff id hex>/ unless there,
 * after checking the blob's diff id, within the store's limits (adding to *b). */
int layer_unpack(struct image_store *s, struct image_txn *t, const struct oci_descriptor *d,
		 const char *diff_id, struct image_budget *b, struct station_error *e);

/* pull.c's readers of what a registry answers (hostile input: every length is bounded). */
struct registry_headers {
	char content_type[128]; /* the media type of Content-Type, without parameters */
	char *www_authenticate; /* the last WWW-Authenticate value, NULL when none */
};
void registry_headers_done(struct registry_headers *h);
/* One header line as libcurl hands it over: data[0..len), not NUL-terminated, CR LF included.
 * A status line ("HTTP/…") starts a new response and forgets the previous one's headers. */
void registry_header_line(struct registry_headers *h, const char *data, size_t len);
/* The value of key="value" in a WWW-Authenticate challenge (a new string), NULL when absent. */
char *registry_challenge_param(const char *challenge, const char *key);
/* The token of a token service's JSON answer ("token", else "access_token"): -EPROTO without
 * a non-empty one, or when it holds a control character (it is sent back in a header). */
int registry_token_parse(const char *body, size_t len, char **ret);
/* ", CODE: message" of the first error of a registry's JSON error body, "" when none. */
void registry_error_text(const char *body, size_t len, char *buf, size_t size);
