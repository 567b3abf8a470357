/* SPDX-License-Identifier: MIT */
/* The store against the busybox layout built at test time: import from a directory, a tar and
 * through an image index; lookup, list, remove with garbage collection; and failed imports
 * (bad digest, hostile layer) that leave nothing behind. */

#include <errno.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "image/image-internal.h"
#include "test-image-util.h"

static char dir[PATH_MAX], root[PATH_MAX], layout[PATH_MAX], layout_tar[PATH_MAX];
static char manifest[80];
static struct image_store *store;

static void setup(void)
{
	struct station_error e = {};

	tmpdir_make(dir, sizeof dir, "test-image-store");
	snprintf(root, sizeof root, "%s/root", dir);
	snprintf(layout, sizeof layout, "%s/layout", dir);
	snprintf(layout_tar, sizeof layout_tar, "%s/layout.tar", dir);
	busybox_layout(layout, true, "", manifest, NULL);
	cr_assert_eq(image_store_open(root, &store, &e), 0, "%s", e.message);
}

static void teardown(void)
{
	image_store_close(store);
	rm_rf(dir);
}

TestSuite(store, .init = setup, .fini = teardown);

static int count(const char *sub)
{
	char p[PATH_MAX];

	snprintf(p, sizeof p, "%s/images/%s", root, sub);
	return dir_count(p);
}

static void assert_store_empty(void)
{
	cr_assert_eq(count("blobs/sha256"), 0, "blobs left behind");
	cr_assert_eq(count("layers"), 0, "layers left behind");
	cr_assert_eq(count("index"), 0, "index records left behind");
}

static void assert_layer_path(const struct image *img, size_t i, const char *rel, bool exists)
{
	char p[PATH_MAX];

	snprintf(p, sizeof p, "%s/%s", img->layers[i], rel);
	cr_assert_eq(access(p, F_OK) == 0, exists, "%s", p);
}

static void assert_busybox(const struct image *img)
{
	char p[PATH_MAX], v[16] = "";
	struct stat st;

	cr_assert_str_eq(img->digest, manifest);
	cr_assert_eq(img->n_layers, 2);
	cr_assert_str_eq(img->config.user, "0:0");
	cr_assert_str_eq(img->config.workdir, "/");
	cr_assert_str_eq(img->config.env[1], "HOME=/root");
	cr_assert_str_eq(img->config.cmd[0], "/bin/sh");
	cr_assert_null(img->config.entrypoint);
	assert_layer_path(img, 0, "bin/busybox", true);
	assert_layer_path(img, 0, "etc/motd", true);
	assert_layer_path(img, 1, "etc/passwd", true);
	snprintf(p, sizeof p, "%s/etc/motd", img->layers[1]);
	cr_assert_eq(lstat(p, &st), 0);
	cr_assert(S_ISCHR(st.st_mode) && st.st_rdev == 0, "motd whiteout is not 0/0");
	snprintf(p, sizeof p, "%s/opt/old", img->layers[1]);
	cr_assert_eq(getxattr(p, "trusted.overlay.opaque", v, sizeof v), 1);
	snprintf(p, sizeof p, "%s/bin/sh", img->layers[0]);
	cr_assert_eq(readlink(p, v, sizeof v - 1), 7);
	cr_assert_str_eq(v, "busybox");
}

Test(store, import_directory)
{
	struct station_error e = {};
	struct image *img = NULL;
	_cleanup_free_ char *lower = NULL;
	char expect[2 * PATH_MAX + 2];

	cr_assert_eq(image_import_layout(store, layout, "busybox", &img, &e), 0, "%s", e.message);
	assert_busybox(img);
	cr_assert_str_eq(img->name, "busybox");
	cr_assert_eq(image_overlay_lowerdir(img, &lower), 0);
	snprintf(expect, sizeof expect, "%s:%s", img->layers[1], img->layers[0]);
	cr_assert_str_eq(lower, expect);
	cr_assert_eq(count("blobs/sha256"), 4); /* manifest, config, 2 layers */
	cr_assert_eq(count("layers"), 2);
	cr_assert_eq(count("index"), 1);
	image_free(img);
}

Test(store, import_tar_and_lookup)
{
	struct station_error e = {};
	struct image *img = NULL;
	char ref[128];

	cr_assert_eq(image_import_layout(store, layout_tar, NULL, NULL, &e), 0, "%s", e.message);
	snprintf(ref, sizeof ref, "busybox@%s", manifest);
	cr_assert_eq(image_lookup(store, ref, &img, &e), 0, "%s", e.message);
	assert_busybox(img);
	cr_assert_null(img->name);
	image_free(img);
	cr_assert_eq(image_lookup(store, manifest, &img, &e), 0, "%s", e.message);
	image_free(img);
	cr_assert_eq(count("blobs/sha256"), 4);
}

Test(store, import_twice_is_one_image)
{
	struct station_error e = {};
	struct image *imgs = NULL;
	size_t n = 0;

	cr_assert_eq(image_import_layout(store, layout, "busybox", NULL, &e), 0, "%s", e.message);
	cr_assert_eq(image_import_layout(store, layout_tar, "other", NULL, &e), 0, "%s", e.message);
	cr_assert_eq(image_list(store, &imgs, &n), 0);
	cr_assert_eq(n, 1);
	cr_assert_str_eq(imgs[0].digest, manifest);
	cr_assert_str_eq(imgs[0].name, "busybox");
	cr_assert_gt(imgs[0].size, 1000000);
	image_free_array(imgs, n);
}

Test(store, import_through_image_index)
{
	struct station_error e = {};
	struct image *img = NULL;
	char idx_layout[PATH_MAX], idx_manifest[80], idx[80];

	snprintf(idx_layout, sizeof idx_layout, "%s/layout-index", dir);
	busybox_layout(idx_layout, false, "--index", idx_manifest, idx);
	cr_assert_str_eq(idx_manifest, manifest);
	cr_assert_eq(image_import_layout(store, idx_layout, NULL, &img, &e), 0, "%s", e.message);
	cr_assert_str_eq(img->digest, manifest);
	cr_assert_str_eq(img->index_digest, idx);
	image_free(img);
	cr_assert_eq(image_lookup(store, idx, &img, &e), 0, "%s", e.message);
	cr_assert_str_eq(img->digest, manifest);
	image_free(img);
	cr_assert_eq(count("blobs/sha256"), 5); /* and the index */
	cr_assert_eq(image_remove(store, idx, &e), 0, "%s", e.message);
	assert_store_empty();
}

Test(store, lookup_unknown_digest)
{
	struct station_error e = {};
	struct image *img = (struct image *)0x1;
	const char *ref = "busybox@sha256:"
			  "ab12000000000000000000000000000000000000000000000000000000000000";
	char msg[512];

	cr_assert_eq(image_lookup(store, ref, &img, &e), -ENOENT);
	snprintf(msg, sizeof msg,
		 "image %s not in store (import it with 'station-sandbox image import' or pull "
		 "it with 'station-sandbox image pull')",
		 ref);
	cr_assert_str_eq(e.message, msg);
	cr_assert_eq(img, (struct image *)0x1, "ret touched on failure");
	cr_assert_eq(image_lookup(store, "busybox:latest", &img, &e), -EINVAL);
	cr_assert_eq(image_remove(store, ref, &e), -ENOENT);
}

Test(store, remove_collects_unshared_layers)
{
	struct station_error e = {};
	struct image *imgs = NULL, *img = NULL;
	char extra_layout[PATH_MAX], extra_manifest[80], tar[PATH_MAX], opts[PATH_MAX + 32];
	struct tar_entry t[] = { { "extra", 'f', "more\n" } };
	size_t n;

	snprintf(tar, sizeof tar, "%s/extra.tar", dir);
	tar_write(tar, t, 1, true);
	snprintf(opts, sizeof opts, "--extra-layer '%s'", tar);
	snprintf(extra_layout, sizeof extra_layout, "%s/layout-extra", dir);
	busybox_layout(extra_layout, false, opts, extra_manifest, NULL);
	cr_assert_eq(image_import_layout(store, layout, NULL, NULL, &e), 0, "%s", e.message);
	cr_assert_eq(image_import_layout(store, extra_layout, NULL, &img, &e), 0, "%s", e.message);
	cr_assert_eq(img->n_layers, 3);
	assert_layer_path(img, 2, "extra", true);
	image_free(img);
	cr_assert_eq(count("layers"), 3);
	cr_assert_eq(image_remove(store, manifest, &e), 0, "%s", e.message);
	cr_assert_eq(count("layers"), 3, "a shared layer was removed");
	cr_assert_eq(image_list(store, &imgs, &n), 0);
	cr_assert_eq(n, 1);
	cr_assert_str_eq(imgs[0].digest, extra_manifest);
	image_free_array(imgs, n);
	cr_assert_eq(image_remove(store, extra_manifest, &e), 0, "%s", e.message);
	assert_store_empty();
}

static void blob_file(const char *layout_dir, const char *digest, char *ret)
{
	snprintf(ret, PATH_MAX, "%s/blobs/sha256/%s", layout_dir, digest + 7);
}

/* The largest blob of the layout is the busybox layer. */
static void biggest_blob(char *ret)
{
	char blobs[PATH_MAX], p[PATH_MAX];
	off_t best = -1;
	struct dirent *de;
	DIR *d;

	snprintf(blobs, sizeof blobs, "%s/blobs/sha256", layout);
	d = opendir(blobs);
	while ((de = readdir(d))) {
		struct stat st;

		snprintf(p, sizeof p, "%s/%s", blobs, de->d_name);
		if (de->d_name[0] != '.' && stat(p, &st) == 0 && st.st_size > best) {
			best = st.st_size;
			snprintf(ret, 80, "sha256:%s", de->d_name);
		}
	}
	closedir(d);
}

Test(store, bad_digest_leaves_nothing)
{
	struct station_error e = {};
	char layer[80], path[PATH_MAX], msg[256];

	biggest_blob(layer);
	blob_file(layout, layer, path);
	file_flip_byte(path, 1000);
	cr_assert_eq(image_import_layout(store, layout, NULL, NULL, &e), -EBADMSG);
	snprintf(msg, sizeof msg, "blob %.19s: digest mismatch: content has sha256:", layer);
	cr_assert(strncmp(e.message, msg, strlen(msg)) == 0, "%s", e.message);
	assert_store_empty();
}

Test(store, bad_digest_in_tar_leaves_nothing)
{
	struct station_error e = {};
	char layer[80], msg[256];
	char cmd[3 * PATH_MAX];

	biggest_blob(layer);
	snprintf(cmd, sizeof cmd,
		 "printf 'X' | dd of='%s/blobs/sha256/%s' bs=1 seek=5000 "
		 "conv=notrunc status=none && tar -C '%s' -cf '%s' oci-layout index.json blobs",
		 layout, layer + 7, layout, layout_tar);
	cr_assert_eq(system(cmd), 0);
	cr_assert_eq(image_import_layout(store, layout_tar, NULL, NULL, &e), -EBADMSG);
	snprintf(msg, sizeof msg, "blob %.19s: digest mismatch: content has sha256:", layer);
	cr_assert(strncmp(e.message, msg, strlen(msg)) == 0, "%s", e.message);
	assert_store_empty();
}

Test(store, hostile_layer_leaves_nothing)
{
	struct station_error e = {};
	char hostile_layout[PATH_MAX], hostile_manifest[80], tar[PATH_MAX], msg[256];
	char opts[PATH_MAX + 32];
	struct tar_entry t[] = { { "ok", 'f', "x" }, { "../etc/passwd", 'f', "pwned" } };
	const char *colon;

	snprintf(tar, sizeof tar, "%s/hostile.tar", dir);
	tar_write(tar, t, ELEMENTSOF(t), false);
	snprintf(opts, sizeof opts, "--extra-layer '%s'", tar);
	snprintf(hostile_layout, sizeof hostile_layout, "%s/hostile", dir);
	busybox_layout(hostile_layout, false, opts, hostile_manifest, NULL);
	cr_assert_eq(image_import_layout(store, hostile_layout, NULL, NULL, &e), -EPERM);
	colon = strstr(e.message, " entry ");
	cr_assert_not_null(colon, "%s", e.message);
	snprintf(msg, sizeof msg, " entry \"../etc/passwd\": path escapes the layer");
	cr_assert_str_eq(colon, msg);
	cr_assert(strncmp(e.message, "layer sha256:", 13) == 0, "%s", e.message);
	assert_store_empty();
}

Test(store, not_a_layout)
{
	struct station_error e = {};
	char msg[PATH_MAX + 128];

	cr_assert_eq(image_import_layout(store, dir, NULL, NULL, &e), -EINVAL);
	snprintf(msg, sizeof msg,
		 "layout \"%s\": cannot read oci-layout: No such file or directory (not an OCI "
		 "image layout?)",
		 dir);
	cr_assert_str_eq(e.message, msg);
	cr_assert_eq(image_import_layout(store, "/nonexistent", NULL, NULL, &e), -ENOENT);
	cr_assert_str_eq(e.message, "layout \"/nonexistent\": No such file or directory");
	assert_store_empty();
}

Test(store, layout_missing_blob)
{
	struct station_error e = {};
	char layer[80], path[PATH_MAX], msg[PATH_MAX + 128];

	biggest_blob(layer);
	blob_file(layout, layer, path);
	cr_assert_eq(unlink(path), 0);
	cr_assert_eq(image_import_layout(store, layout, NULL, NULL, &e), -ENOENT);
	snprintf(msg, sizeof msg, "layout \"%s\": blob %.19s is missing", layout, layer);
	cr_assert_str_eq(e.message, msg);
	assert_store_empty();
}

Test(store, store_dir_is_private)
{
	char p[PATH_MAX];
	struct stat st;

	snprintf(p, sizeof p, "%s/images", root);
	cr_assert_eq(stat(p, &st), 0);
	cr_assert_eq(st.st_mode & 0777, 0700);
}

static bool exists_in(const char *mnt, const char *rel)
{
	char p[PATH_MAX];

	snprintf(p, sizeof p, "%s/%s", mnt, rel);
	return access(p, F_OK) == 0;
}

/* The layers as lower dirs of a real overlay mount (in a private mount namespace of this test
 * process): whiteouts and the opaque dir hide what the first layer has. */
Test(store, overlay_mount_merges_layers)
{
	struct station_error e = {};
	struct image *img = NULL;
	_cleanup_free_ char *lower = NULL, *opts = NULL;
	char mnt[PATH_MAX];

	cr_assert_eq(image_import_layout(store, layout, NULL, &img, &e), 0, "%s", e.message);
	cr_assert_eq(image_overlay_lowerdir(img, &lower), 0);
	cr_assert_gt(asprintf(&opts, "lowerdir=%s", lower), 0);
	snprintf(mnt, sizeof mnt, "%s/mnt", dir);
	cr_assert_eq(mkdir(mnt, 0755), 0);
	cr_assert_eq(unshare(CLONE_NEWNS), 0, "unshare: %m");
	cr_assert_eq(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL), 0);
	cr_assert_eq(mount("overlay", mnt, "overlay", MS_RDONLY, opts), 0, "mount: %m");
	cr_assert(exists_in(mnt, "bin/busybox"));
	cr_assert(exists_in(mnt, "etc/passwd"));
	cr_assert(exists_in(mnt, "opt/old/new"));
	cr_assert_not(exists_in(mnt, "etc/motd"), "whiteout did not hide etc/motd");
	cr_assert_not(exists_in(mnt, "opt/old/file"), "opaque dir did not hide opt/old/file");
	cr_assert(exists_in(img->layers[0], "etc/motd"), "positive control: layer 1 has it");
	cr_assert_eq(umount(mnt), 0);
	image_free(img);
}

/* A layer that decompresses past the store's limits: refused naming the layer and the limit,
 * nothing left; the same layout under larger limits imports (the control). */
Test(store, decompression_bomb_leaves_nothing)
{
	struct station_error e = {};
	char bomb_layout[PATH_MAX], bomb_manifest[80], tar[PATH_MAX], opts[PATH_MAX + 32];
	struct tar_entry t[] = { { "zeros", 'f', NULL, 0644, .zeros = 24u << 20 } };
	struct image_limits layer = { .max_layer_bytes = 16u << 20 };
	struct image_limits image = { .max_image_bytes = 20u << 20 };
	struct image_limits entries = { .max_image_entries = 4 };
	struct image_limits roomy = { .max_layer_bytes = 32u << 20 };

	snprintf(tar, sizeof tar, "%s/bomb.tar.gz", dir);
	tar_write(tar, t, ELEMENTSOF(t), true);
	snprintf(opts, sizeof opts, "--extra-layer '%s'", tar);
	snprintf(bomb_layout, sizeof bomb_layout, "%s/bomb", dir);
	busybox_layout(bomb_layout, false, opts, bomb_manifest, NULL);

	image_store_set_limits(store, &layer);
	cr_assert_eq(image_import_layout(store, bomb_layout, NULL, NULL, &e), -EFBIG);
	cr_assert(strncmp(e.message, "layer sha256:", 13) == 0, "%s", e.message);
	cr_assert(strstr(e.message, ": decompresses to more than 16777216 bytes, the limit for a "
				    "layer (--max-layer-bytes)"),
		  "%s", e.message);
	assert_store_empty();

	image_store_set_limits(store, &image);
	cr_assert_eq(image_import_layout(store, bomb_layout, NULL, NULL, &e), -EFBIG);
	cr_assert(strstr(e.message, ": the image's layers decompress to more than 20971520 "
				    "bytes, the limit for the image's layers (--max-image-bytes)"),
		  "%s", e.message);
	assert_store_empty();

	image_store_set_limits(store, &entries);
	cr_assert_eq(image_import_layout(store, bomb_layout, NULL, NULL, &e), -EFBIG);
	cr_assert(strstr(e.message, " entries, the limit for the image's layers "
				    "(--max-image-entries)"),
		  "%s", e.message);
	assert_store_empty();

	image_store_set_limits(store, &roomy);
	cr_assert_eq(image_import_layout(store, bomb_layout, NULL, NULL, &e), 0, "%s", e.message);
}

/* Removal never waits for an import in progress (its worker thread would pile up behind it):
 * -EBUSY while another handle holds the lock, and the same removal goes through once it is
 * released. */
Test(store, remove_while_locked_is_busy)
{
	struct station_error e = {};
	struct image_store *other = NULL;

	cr_assert_eq(image_import_layout(store, layout, NULL, NULL, &e), 0, "%s", e.message);
	cr_assert_eq(image_store_open(root, &other, &e), 0, "%s", e.message);
	cr_assert_eq(image_store_lock(other), 0);
	cr_assert_eq(image_remove(store, manifest, &e), -EBUSY);
	cr_assert(strstr(e.message, "the image store is busy with an import, pull or another "
				    "removal"),
		  "%s", e.message);
	image_store_unlock(other);
	image_store_close(other);
	cr_assert_eq(image_remove(store, manifest, &e), 0, "%s", e.message);
	assert_store_empty();
}

/* A removal cut short (the controller killed) leaves whole layers or none under a layer's name:
 * what it renamed into the trash, and a layer no image uses, are freed by the next clean, and
 * an image still in the store keeps every layer. */
Test(store, clean_frees_what_a_cut_short_removal_left)
{
	struct station_error e = {};
	struct image *img = NULL;
	char p[PATH_MAX + 64];

	cr_assert_eq(image_import_layout(store, layout, NULL, &img, &e), 0, "%s", e.message);
	cr_assert_eq(count("trash"), 0);
	/* a half-removed layer in the trash, and an unused whole one under its name */
	snprintf(p, sizeof p, "%s/images/trash/0123abcd.1.1/usr/bin", root);
	cr_assert_eq(mkdir_p(p, 0755), 0);
	snprintf(p, sizeof p, "%s/images/trash/0123abcd.1.1/usr/bin/sh", root);
	cr_assert_eq(write_file_atomic(p, "x", 1, 0755), 0);
	snprintf(p, sizeof p, "%s/images/layers/%064d/etc", root, 0);
	cr_assert_eq(mkdir_p(p, 0755), 0);
	cr_assert_eq(count("layers"), 3);
	cr_assert_eq(image_store_clean(store, &e), 0, "%s", e.message);
	cr_assert_eq(count("trash"), 0, "the trash is not empty");
	cr_assert_eq(count("layers"), 2, "the unused layer is left");
	for (size_t i = 0; i < img->n_layers; i++)
		assert_layer_path(img, i, ".", true);
	image_free(img);
	cr_assert_eq(image_lookup(store, manifest, &img, &e), 0, "%s", e.message);
	image_free(img);
	/* busy while another handle holds the lock, like a removal */
	struct image_store *other = NULL;
	cr_assert_eq(image_store_open(root, &other, &e), 0, "%s", e.message);
	cr_assert_eq(image_store_lock(other), 0);
	cr_assert_eq(image_store_clean(store, &e), -EBUSY);
	image_store_unlock(other);
	image_store_close(other);
	cr_assert_eq(image_remove(store, manifest, &e), 0, "%s", e.message);
	assert_store_empty();
	cr_assert_eq(count("trash"), 0, "the trash is not empty after the removal");
}
