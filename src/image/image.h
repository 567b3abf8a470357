/* SPDX-License-Identifier: MIT */
#pragma once

/* The OCI image store: images pinned by digest, imported from an OCI image layout (directory or
 * tar) or pulled from an OCI distribution registry, kept content-addressed under <root>/images/:
 *
 *   images/blobs/sha256/<hex>    every blob, SHA-256 and size verified while it is written to a
 *                                temporary file in the same directory (fsync + rename)
 *   images/layers/<hex>/         one unpacked layer per diff id (the digest of the uncompressed
 *                                tar), a read-only overlayfs lower dir: OCI whiteouts converted
 *                                to overlay whiteouts (char 0/0) and trusted.overlay.opaque=y;
 *                                a snapshot's own layer is made from its blob on first use
 *   images/index/<hex>.json      one small JSON record per image, keyed by its manifest digest,
 *                                written atomically last: an image exists once it is there
 *   images/trash/                layer dirs being removed: a removal unlinks the record first
 *                                (the image is gone), then renames each layer no image uses
 *                                into the trash and empties it, so that a removal cut short
 *                                leaves whole layers or none under their names
 *   images/lock                  flock()ed by every operation that writes
 *
 * images/ is mode 0700: unpacked layers keep the modes of the image (setuid binaries included)
 * and its owners within the container range (ids of 65536 and up become 65534), which must not
 * be reachable by unprivileged host users; file capabilities and all but user.* xattrs are
 * dropped (unpack.c states the whole contract).
 *
 * A failed import or pull leaves nothing behind: the blobs and layers it added are removed.
 *
 * Functions return -errno and, where the failure reaches a person, fill *e (which may be NULL)
 * with a message naming the image, blob or layer entry and the cause. -ENOENT: not in the store
 * or not in the registry; -EINVAL: a malformed reference or document; -EBADMSG: a digest or size
 * mismatch; -EPERM: a layer entry refused for safety; -ENOTSUP: an unsupported media type or
 * platform. Outputs (ret_*) are untouched on failure. The library never logs. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "basic/error.h"

#define IMAGE_DIGEST_MAX 72 /* "sha256:" + 64 hex + NUL, rounded up */
#define IMAGE_NAME_MAX 256

/* A reference: "name@sha256:<64 hex>" or a bare "sha256:<64 hex>". Tags are refused: images
 * are pinned by digest. name may start with a registry host ("127.0.0.1:5000/busybox"). */
struct image_ref {
	char name[IMAGE_NAME_MAX];     /* "" for a bare digest */
	char digest[IMAGE_DIGEST_MAX]; /* "sha256:<64 lower-case hex>" */
};

int image_ref_parse(const char *s, struct image_ref *ret, struct station_error *e);
/* -ENOENT, field "image": what image_lookup() says of a reference the store does not hold. */
int image_error_not_in_store(const char *ref, struct station_error *e);
/* True for "sha256:" followed by exactly 64 lower-case hex digits. */
bool image_digest_is_valid(const char *digest);

/* What the image config says about the process to run. */
struct image_config {
	char *user;	    /* config.User, NULL when unset */
	char **env;	    /* config.Env, "KEY=value", NULL-terminated (never NULL itself) */
	char *workdir;	    /* config.WorkingDir, NULL when unset */
	char **entrypoint;  /* config.Entrypoint, NULL-terminated, NULL when unset */
	char **cmd;	    /* config.Cmd, NULL-terminated, NULL when unset */
	char *os;	    /* "linux" */
	char *architecture; /* "amd64" */
};

struct image {
	char digest[IMAGE_DIGEST_MAX];	     /* the image manifest's digest: the image's identity */
	char index_digest[IMAGE_DIGEST_MAX]; /* the image index it was picked from, "" when none */
	char config_digest[IMAGE_DIGEST_MAX];
	char *name; /* repository name given at import or pull, or NULL */
	struct image_config config;
	char **layers; /* absolute paths of the unpacked layer dirs, bottom layer first */
	size_t n_layers;
	/* A layer dir is not there yet (a snapshot's layer is unpacked on first use) though its
	 * blob is: image_layers_unpack() makes it before anything reads layers. */
	bool layers_pending;
	uint64_t size;	  /* sum of the manifest, config and layer blob sizes */
	uint64_t created; /* CLOCK_REALTIME microseconds when it entered the store */
};

void image_config_done(struct image_config *c);
/* Frees what the image owns (not the struct itself). */
void image_done(struct image *img);
void image_free(struct image *img);
void image_free_array(struct image *imgs, size_t n);

struct image_store;

/* Opens (creating when missing) the store under <root>/images, with the default limits. */
int image_store_open(const char *root, struct image_store **ret, struct station_error *e);
void image_store_close(struct image_store *s);

/* Bounds on what one import or pull may unpack; passing one aborts it (nothing left behind)
 * with -EFBIG and a message naming the layer and the limit. 0: the default. Defaults: 8 GiB a
 * layer and 16 GiB an image decompressed (the largest images in common use, CUDA and ML
 * toolchains, are 10-15 GB unpacked with single layers of a few GB), 1 Mi entries an image (a
 * full Debian with compilers has ~100k files). Layers already in the store are not counted
 * again. Compressed layer blobs are held to the same byte limits before they are fetched. */
#define IMAGE_MAX_LAYER_BYTES_DEFAULT (8ull << 30)
#define IMAGE_MAX_IMAGE_BYTES_DEFAULT (16ull << 30)
#define IMAGE_MAX_ENTRIES_DEFAULT (1ull << 20)
struct image_limits {
	uint64_t max_layer_bytes;
	uint64_t max_image_bytes;
	uint64_t max_image_entries;
};
void image_store_set_limits(struct image_store *s, const struct image_limits *l);

/* Imports the image of an OCI image layout, a directory or a tar of one. index.json must list
 * exactly one manifest, or an image index with a linux/<this machine's architecture> entry.
 * name (may be NULL) is recorded for `image ls`. *ret (may be NULL) gets the image. */
int image_import_layout(struct image_store *s, const char *path, const char *name,
			struct image **ret, struct station_error *e);
/* The same from an fd open on the layout directory or tar (O_RDONLY; for a tar, at its
 * start); path only names it in messages. Nothing is opened by path: the layout's files are
 * opened beneath fd (RESOLVE_BENEATH), and must be regular files. */
int image_import_layout_fd(struct image_store *s, int fd, const char *path, const char *name,
			   struct image **ret, struct station_error *e);

/* Writes the image ref names as an OCI image layout tar to out_fd (written from its current
 * offset; a pipe or socket will do): oci-layout, index.json naming the image's manifest (with
 * an org.opencontainers.image.ref.name annotation when the image has a name), and
 * blobs/sha256/<hex> for the manifest, its config and every layer blob, as the store holds
 * them; image_import_layout_fd() of the tar gives the same image (the same digest). An image
 * imported through an image index exports as its manifest only. The same image gives the same
 * bytes. Takes no lock: the blobs are opened before the first byte is written, so a removal
 * meanwhile fails the export or leaves it whole. Every blob is verified against its digest:
 * the manifest and config before anything is written, each layer as it streams; -EBADMSG
 * naming the blob when one does not match (then nothing more is written, not even the tar's
 * end). -ENOENT when the image, or one of its blobs, is not in the store; a write error on
 * out_fd is its -errno (-EPIPE: the reader went away). Blocks for the whole stream: off the
 * event loop. */
int image_export_layout(struct image_store *s, const char *ref, int out_fd,
			struct station_error *e);

struct image_pull_options {
	const char *registry; /* "host[:port]"; NULL: the host part of the reference's name */
	bool plain_http;      /* http:// instead of https:// (test registries on loopback) */
	const char *ca_file;  /* extra CA bundle for https, NULL for the system's */
	long timeout_sec;     /* a request stalling (under 1 KiB/s) this long fails; 0: 60 */
};

/* Pulls ref ("[host[:port]/]name@sha256:<hex>") by digest: manifest (or an image index and
 * its entry for this platform), config and layers, each verified, then unpacks the layers.
 * Anonymous bearer tokens (WWW-Authenticate: Bearer realm=…) are fetched when asked for.
 * An image already in the store is not fetched again. Blocks for the whole transfer and holds
 * images/lock meanwhile: run it off the event loop (a thread or a child). */
int image_pull(struct image_store *s, const char *ref, const struct image_pull_options *o,
	       struct image **ret, struct station_error *e);

/* Finds the image a reference names, by digest (a manifest digest, or the image index digest
 * it was imported through); the name part of the reference is not compared. -ENOENT when it is
 * not in the store, with a message telling how to import it. */
int image_lookup(struct image_store *s, const char *ref, struct image **ret,
		 struct station_error *e);

/* Makes the layer dirs of img that are not there yet (img->layers_pending) from their blobs,
 * as an import unpacks them (unpack.c's rules and limits, each checked against its diff id,
 * every file fsync()ed before the dir is moved into place); a no-op otherwise. Takes
 * images/lock (waits for it: an import or another unpack may hold it). A layer refused leaves
 * nothing under its name, and the image unusable (-EPERM, -EFBIG, -EBADMSG with a message
 * naming the layer). Blocks for the whole unpack: off the event loop. */
int image_layers_unpack(struct image_store *s, struct image *img, struct station_error *e);

/* Every image in the store, oldest first. */
int image_list(struct image_store *s, struct image **ret, size_t *ret_n);

/* Removes an image and whatever blobs and layers no remaining image uses. The caller refuses
 * removal while a workspace uses the image. -ENOENT when it is not in the store; -EBUSY when
 * an import, pull or removal holds images/lock (never waits for it). Blocks for the whole
 * removal (a large image is many files): run it off the event loop. */
int image_remove(struct image_store *s, const char *ref, struct station_error *e);

/* Frees what no image uses: blobs and layers left by a removal or an import cut short, and the
 * trash. -EBUSY when images/lock is held (never waits). Blocks: off the event loop. */
int image_store_clean(struct image_store *s, struct station_error *e);

/* The overlayfs lowerdir= value for img: its layer dirs joined by ':', top layer first. */
int image_overlay_lowerdir(const struct image *img, char **ret);

/* ---- Snapshot layers (layer-write.c; docs/api.md "Snapshots and fork") ----------------------
 *
 * A workspace's snapshot is an image: its image's layers plus one layer written from the
 * workspace's trees. Those trees are sandbox-controlled and hostile: they are walked through
 * directory fds only (openat2 RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS, O_NOFOLLOW | O_NONBLOCK,
 * a type check on the open fd before any read), never by path; a symlink is stored as a
 * symlink and never followed; FIFOs, sockets and devices are left out (counted in skipped)
 * but an overlay whiteout (char 0/0 in an upper) becomes an OCI whiteout; hard links are
 * stored as separate files; setuid, setgid and file capabilities are dropped; a file's bytes
 * are read up to the size fstat gave (a file growing meanwhile is cut there, one shrinking
 * fails the snapshot). */

struct image_layer_source {
	int dir_fd;	    /* the tree's root, O_DIRECTORY (the caller opened it safely) */
	const char *prefix; /* where the tree goes in the layer: "" (the root) or "home/node" */
	bool overlay_upper; /* an overlay upper dir: char 0/0 files are whiteouts
			      * (".wh.<name>"), trusted.overlay.opaque=y dirs opaque
			      * (".wh..wh..opq") */
	bool opaque;	    /* the prefix directory opaque (".wh..wh..opq" first in it): what
			     * lower layers have there is hidden, as a tree kept whole (HOME) is
			     * what it holds and no more; with a prefix only */
};

struct image_layer_options {
	/* Host ids id_base … id_base + 65535 become 0 … 65535 in the layer (container root's
	 * range); any other owner becomes 65534 (nobody). */
	uint32_t id_base;
	/* Every owner stored as 0:0, id_base unused: a host workspace's tree, whose host ids mean
	 * nothing in a layer (a create from it gives every entry its own user). */
	bool owners_zero;
	uint64_t max_bytes; /* 0: no limit; past it -EFBIG naming the file that passed it */
};

struct image_layer_stats {
	uint64_t bytes;			/* file bytes stored */
	uint64_t entries;		/* entries stored */
	uint64_t skipped;		/* FIFOs, sockets, devices left out */
	uint64_t tar_bytes;		/* the tar's length */
	char diff_id[IMAGE_DIGEST_MAX]; /* the tar's digest, hashed as it was written */
};

/* Writes one uncompressed OCI layer tar (POSIX pax) of the sources, in order, to out_fd (a
 * regular file, written from its current offset); ret_stats gets its digest (the layer's
 * diff id), hashed as it is written. Blocks: off the event loop. */
int image_layer_write(const struct image_layer_source *src, size_t n_src,
		      const struct image_layer_options *o, int out_fd,
		      struct image_layer_stats *ret_stats, struct station_error *e);

/* Adds to the store the image made of base's layers plus the layer tar of tar_fd
 * (uncompressed, diff_id its digest as image_layer_write() gave it; NULL: hashed here) as a
 * blob (the file itself linked in, fsync()ed, not copied when on the store's filesystem), its
 * config base's with the new diff id and a history entry, recorded under name (may be NULL).
 * The layer is not unpacked: the image has layers_pending until image_layers_unpack(), which
 * applies unpack.c's rules (an entry refused then makes the image unusable; a tar of
 * image_layer_write() has none). -EFBIG when the tar is larger than the store's limit for a
 * layer. base NULL (a host workspace's snapshot): an image of that one layer, its config this
 * machine's os and architecture with no process settings. *ret (may be NULL) gets the new
 * image; its digest is its identity, as for any image. Blocks: off the event loop. */
int image_commit_layer(struct image_store *s, const struct image *base, int tar_fd,
		       const char *diff_id, const char *name, struct image **ret,
		       struct station_error *e);

/* Durability deferred: on a store handle so marked, what image_commit_layer() writes (blobs,
 * index record) is named but not fsync()ed, so that a snapshot is answered once its bytes are
 * written and hashed, not once the disk has them. image_sync() then fsync()s every blob the
 * image's record names, the record and their directories. After a crash, image_verify() says
 * whether what was named is what was written: the record readable, each blob there with the
 * content its digest names (-EBADMSG, -EUCLEAN, -ENOENT when not; the message says which).
 * Both read the whole image and block: off the event loop. */
void image_store_defer_sync(struct image_store *s);
int image_sync(struct image_store *s, const char *digest, struct station_error *e);
int image_verify(struct image_store *s, const char *digest, struct station_error *e);

/* Copies the subtree prefix ("home/node") of img's top layer (unpacked) into dest_fd (an
 * empty directory), regular files, directories and symlinks only, each owned by id_base plus
 * its owner in the layer (the new workspace's range). The layer is the store's (trusted: its
 * entries passed unpack.c), dest is a new workspace's. -ENOENT when the top layer has no such
 * subtree; -EAGAIN when img->layers_pending (image_layers_unpack() first). Blocks: off the
 * event loop. */
int image_layer_copy_subtree(const struct image *img, const char *prefix, int dest_fd,
			     uint32_t id_base, struct station_error *e);
/* The same with every entry owned by uid:gid whatever its owner in the layer (a host
 * workspace's HOME: its configured user's, or root's). */
int image_layer_copy_subtree_owned(const struct image *img, const char *prefix, int dest_fd,
				   uid_t uid, gid_t gid, struct station_error *e);
