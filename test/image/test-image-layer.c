/* SPDX-License-Identifier: MIT */
/* Snapshot layers: a tree written as a layer tar, committed on the busybox image and copied
 * back out; hostile trees (symlinks to host directories, FIFOs, devices, hard links, setuid
 * files, huge sparse files, a directory swapped for a symlink) stored safely or refused, each
 * beside a positive control; overlay whiteouts and opaque directories converted; identical
 * trees giving one layer; a host workspace's HOME as an image of one layer, no base. */

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "image/image-internal.h"
#include "test-image-util.h"

#define ID_BASE 100000u

static char dir[PATH_MAX], root[PATH_MAX], tree[PATH_MAX], tarpath[PATH_MAX];
static struct image_store *store;
static struct image *base;

static void setup(void)
{
	struct station_error e = {};
	char layout[PATH_MAX], manifest[80];

	tmpdir_make(dir, sizeof dir, "test-image-layer");
	snprintf(root, sizeof root, "%s/root", dir);
	snprintf(tree, sizeof tree, "%s/tree", dir);
	snprintf(tarpath, sizeof tarpath, "%s/layer.tar", dir);
	snprintf(layout, sizeof layout, "%s/layout", dir);
	cr_assert_eq(mkdir(tree, 0755), 0);
	busybox_layout(layout, false, "", manifest, NULL);
	cr_assert_eq(image_store_open(root, &store, &e), 0, "%s", e.message);
	cr_assert_eq(image_import_layout(store, layout, "busybox", &base, &e), 0, "%s", e.message);
}

static void teardown(void)
{
	image_free(base);
	image_store_close(store);
	rm_rf(dir);
}

TestSuite(layer, .init = setup, .fini = teardown, .timeout = 60);

/* tree fixtures */

static void path_of(char *buf, const char *rel)
{
	snprintf(buf, PATH_MAX, "%s/%s", tree, rel);
}

static void mkfile(const char *rel, const char *data, mode_t mode, uid_t uid, gid_t gid)
{
	char p[PATH_MAX];
	int fd;

	path_of(p, rel);
	fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	cr_assert_geq(fd, 0, "%s", p);
	cr_assert_eq(write(fd, data, strlen(data)), (ssize_t)strlen(data));
	cr_assert_eq(fchown(fd, uid, gid), 0);
	cr_assert_eq(fchmod(fd, mode), 0);
	close(fd);
}

static void mkdir_in(const char *rel, mode_t mode, uid_t uid)
{
	char p[PATH_MAX];

	path_of(p, rel);
	cr_assert_eq(mkdir(p, mode), 0, "%s", p);
	cr_assert_eq(chown(p, uid, uid), 0);
	cr_assert_eq(chmod(p, mode), 0);
}

static void mklink(const char *rel, const char *target)
{
	char p[PATH_MAX];

	path_of(p, rel);
	cr_assert_eq(symlink(target, p), 0, "%s", p);
}

static void mknode(const char *rel, mode_t type, dev_t dev)
{
	char p[PATH_MAX];

	path_of(p, rel);
	cr_assert_eq(mknod(p, type | 0644, dev), 0, "%s", p);
}

/* layer tars */

struct tar_item {
	char path[PATH_MAX];
	mode_t type, perm;
	unsigned uid, gid;
	int64_t size;
	char link[PATH_MAX];
	bool hardlink;
	char data[64];
};

static struct tar_item items[256];
static size_t n_items;

static void tar_load(const char *path)
{
	struct archive *a = archive_read_new();
	struct archive_entry *ent;

	n_items = 0;
	archive_read_support_format_tar(a);
	cr_assert_eq(archive_read_open_filename(a, path, 65536), ARCHIVE_OK);
	while (archive_read_next_header(a, &ent) == ARCHIVE_OK) {
		struct tar_item *t = &items[n_items++];

		cr_assert_lt(n_items, ELEMENTSOF(items));
		*t = (struct tar_item){ .type = archive_entry_filetype(ent),
					.perm = archive_entry_perm(ent),
					.uid = archive_entry_uid(ent),
					.gid = archive_entry_gid(ent),
					.size = archive_entry_size(ent),
					.hardlink = archive_entry_hardlink(ent) != NULL };
		snprintf(t->path, sizeof t->path, "%s", archive_entry_pathname(ent));
		t->path[strcspn(t->path, "\0")] = '\0';
		if (t->path[0] && t->path[strlen(t->path) - 1] == '/')
			t->path[strlen(t->path) - 1] = '\0';
		if (archive_entry_symlink(ent))
			snprintf(t->link, sizeof t->link, "%s", archive_entry_symlink(ent));
		if (t->type == AE_IFREG)
			archive_read_data(a, t->data, sizeof t->data - 1);
	}
	archive_read_free(a);
}

static const struct tar_item *tar_find(const char *path)
{
	for (size_t i = 0; i < n_items; i++)
		if (strcmp(items[i].path, path) == 0)
			return &items[i];
	return NULL;
}

static bool tar_has_prefix(const char *prefix)
{
	for (size_t i = 0; i < n_items; i++)
		if (strncmp(items[i].path, prefix, strlen(prefix)) == 0)
			return true;
	return false;
}

/* Writes the tree as a layer (at prefix, an overlay upper or not) to tarpath; returns what
 * image_layer_write() does, and loads the tar when it succeeded. */
static int layer_of_tree(const char *prefix, bool upper, uint64_t max_bytes,
			 struct image_layer_stats *st, struct station_error *e)
{
	int tfd = open(tree, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int out = open(tarpath, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	struct image_layer_source src = { .dir_fd = tfd, .prefix = prefix, .overlay_upper = upper };
	struct image_layer_options o = { .id_base = ID_BASE, .max_bytes = max_bytes };
	int r;

	cr_assert_geq(tfd, 0);
	cr_assert_geq(out, 0);
	r = image_layer_write(&src, 1, &o, out, st, e);
	close(tfd);
	close(out);
	if (r >= 0)
		tar_load(tarpath);
	return r;
}

/* The committed layer is a blob only until the image's first use unpacks it. */
static void unpack_pending(struct image *img)
{
	struct station_error e = {};
	struct stat st;
	const char *top = img->layers[img->n_layers - 1];
	bool there = stat(top, &st) == 0;

	cr_assert_eq(img->layers_pending, !there, "pending %d, layer dir there %d",
		     img->layers_pending, there);
	cr_assert_eq(image_layers_unpack(store, img, &e), 0, "%s", e.message);
	cr_assert_not(img->layers_pending);
	cr_assert_eq(stat(top, &st), 0, "%s", top);
	cr_assert(S_ISDIR(st.st_mode));
}

static struct image *commit_tar(const char *name)
{
	struct station_error e = {};
	struct image *img = NULL;
	int fd = open(tarpath, O_RDONLY | O_CLOEXEC);

	cr_assert_geq(fd, 0);
	cr_assert_eq(image_commit_layer(store, base, fd, NULL, name, &img, &e), 0, "%s", e.message);
	close(fd);
	unpack_pending(img);
	return img;
}

static int store_count(const char *sub)
{
	char p[PATH_MAX];

	snprintf(p, sizeof p, "%s/images/%s", root, sub);
	return dir_count(p);
}

static void assert_stat(const char *path, mode_t mode, uid_t uid, gid_t gid)
{
	struct stat st;

	cr_assert_eq(lstat(path, &st), 0, "%s", path);
	cr_assert_eq(st.st_mode & 07777, mode, "%s: mode %o", path, st.st_mode & 07777);
	cr_assert_eq(st.st_uid, uid, "%s: uid %u", path, st.st_uid);
	cr_assert_eq(st.st_gid, gid, "%s: gid %u", path, st.st_gid);
}

static void assert_file(const char *path, const char *data)
{
	_cleanup_free_ char *got = NULL;
	size_t len;

	cr_assert_eq(read_file(path, 4096, &got, &len), 0, "%s", path);
	cr_assert_str_eq(got, data, "%s", path);
}

/* round trip */

static void home_tree(void)
{
	char p[PATH_MAX];

	mkfile("a.txt", "hello\n", 0640, ID_BASE + 1000, ID_BASE + 1000);
	mkdir_in("sub", 0750, ID_BASE + 1000);
	mkfile("sub/b", "bee\n", 0755, ID_BASE + 1000, ID_BASE + 100);
	mklink("link", "a.txt");
	path_of(p, "link");
	cr_assert_eq(lchown(p, ID_BASE + 1000, ID_BASE + 1000), 0);
	cr_assert_eq(chown(tree, ID_BASE + 1000, ID_BASE + 1000), 0);
}

Test(layer, round_trip)
{
	struct station_error e = {};
	struct image_layer_stats st;
	struct image *img, *found = NULL, *imgs = NULL;
	char p[PATH_MAX], copy[PATH_MAX], target[16] = "";
	int dfd;
	size_t n;

	home_tree();
	cr_assert_eq(layer_of_tree("home/node", false, 0, &st, &e), 0, "%s", e.message);
	cr_assert_eq(st.entries, 5);
	cr_assert_eq(st.bytes, 10);
	cr_assert_eq(st.skipped, 0);
	cr_assert_eq(tar_find("home/node")->uid, 1000);
	cr_assert_eq(tar_find("home/node/sub/b")->gid, 100);
	cr_assert_str_eq(tar_find("home/node/link")->link, "a.txt");

	img = commit_tar("snap");
	cr_assert_eq(img->n_layers, base->n_layers + 1);
	for (size_t i = 0; i < base->n_layers; i++)
		cr_assert_str_eq(img->layers[i], base->layers[i], "base layer %zu not shared", i);
	cr_assert_str_eq(img->name, "snap");
	cr_assert_str_eq(img->config.cmd[0], "/bin/sh", "the base's config is kept");
	cr_assert_eq(store_count("layers"), (int)base->n_layers + 1);
	snprintf(p, sizeof p, "%s/home/node/sub/b", img->layers[img->n_layers - 1]);
	assert_file(p, "bee\n");
	assert_stat(p, 0755, 1000, 100);

	cr_assert_eq(image_lookup(store, img->digest, &found, &e), 0, "%s", e.message);
	cr_assert_eq(found->n_layers, base->n_layers + 1);
	image_free(found);
	cr_assert_eq(image_list(store, &imgs, &n), 0);
	cr_assert_eq(n, 2);
	image_free_array(imgs, n);

	snprintf(copy, sizeof copy, "%s/copy", dir);
	cr_assert_eq(mkdir(copy, 0700), 0);
	dfd = open(copy, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	cr_assert_eq(image_layer_copy_subtree(img, "home/node", dfd, 200000, &e), 0, "%s",
		     e.message);
	close(dfd);
	assert_stat(copy, 0755, 201000, 201000);
	snprintf(p, sizeof p, "%s/a.txt", copy);
	assert_file(p, "hello\n");
	assert_stat(p, 0640, 201000, 201000);
	snprintf(p, sizeof p, "%s/sub", copy);
	assert_stat(p, 0750, 201000, 201000);
	snprintf(p, sizeof p, "%s/sub/b", copy);
	assert_file(p, "bee\n");
	assert_stat(p, 0755, 201000, 200100);
	snprintf(p, sizeof p, "%s/link", copy);
	cr_assert_eq(readlink(p, target, sizeof target - 1), 5);
	cr_assert_str_eq(target, "a.txt");
	assert_stat(p, 0777, 201000, 201000);
	image_free(img);
}

Test(layer, copy_subtree_missing)
{
	struct station_error e = {};
	struct image_layer_stats st;
	struct image *img;
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	mkfile("f", "x", 0644, ID_BASE, ID_BASE);
	cr_assert_eq(layer_of_tree("", false, 0, &st, &e), 0, "%s", e.message);
	img = commit_tar(NULL);
	cr_assert_null(img->name);
	cr_assert_eq(image_layer_copy_subtree(img, "home/node", dfd, 0, &e), -ENOENT);
	close(dfd);
	image_free(img);
}

Test(layer, owners_shifted)
{
	struct station_error e = {};
	struct image_layer_stats st;

	mkfile("in", "x", 0644, ID_BASE + 5, ID_BASE + 6);
	mkfile("host-root", "x", 0644, 0, 0);
	mkfile("past-range", "x", 0644, ID_BASE + 70000, ID_BASE + 65535);
	cr_assert_eq(layer_of_tree("", false, 0, &st, &e), 0, "%s", e.message);
	cr_assert_eq(tar_find("in")->uid, 5);
	cr_assert_eq(tar_find("in")->gid, 6);
	cr_assert_eq(tar_find("host-root")->uid, 65534);
	cr_assert_eq(tar_find("host-root")->gid, 65534);
	cr_assert_eq(tar_find("past-range")->uid, 65534);
	cr_assert_eq(tar_find("past-range")->gid, 65535);
}

/* A host workspace's HOME: owners stored as 0, an image of that one layer (no base), copied
 * back out as one user's. */
Test(layer, host_home_without_base)
{
	struct station_error e = {};
	struct image_layer_stats st;
	struct image *img = NULL, *found = NULL;
	char copy[PATH_MAX], p[PATH_MAX];
	int tfd, out, dfd, fd;

	mkfile("a.txt", "hello\n", 0640, 1000, 1001);
	mkdir_in("sub", 0750, 0);
	mkfile("sub/b", "bee\n", 0755, ID_BASE + 3, 0);
	mklink("link", "/etc");
	tfd = open(tree, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	out = open(tarpath, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	cr_assert_geq(tfd, 0);
	cr_assert_geq(out, 0);
	const struct image_layer_source src = { .dir_fd = tfd, .prefix = "home" };
	const struct image_layer_options o = { .id_base = ID_BASE, .owners_zero = true };
	cr_assert_eq(image_layer_write(&src, 1, &o, out, &st, &e), 0, "%s", e.message);
	close(tfd);
	close(out);
	tar_load(tarpath);
	cr_assert_eq(n_items, 5);
	for (size_t i = 0; i < n_items; i++)
		cr_assert(items[i].uid == 0 && items[i].gid == 0, "%s: %u:%u", items[i].path,
			  items[i].uid, items[i].gid);
	cr_assert_str_eq(tar_find("home/link")->link, "/etc");

	fd = open(tarpath, O_RDONLY | O_CLOEXEC);
	cr_assert_eq(image_commit_layer(store, NULL, fd, NULL, "host-snap", &img, &e), 0, "%s",
		     e.message);
	close(fd);
	unpack_pending(img);
	cr_assert_eq(img->n_layers, 1, "one layer, no base's");
	cr_assert_str_eq(img->name, "host-snap");
	cr_assert_str_eq(img->config.os, "linux");
	cr_assert_null(img->config.cmd);
	cr_assert_eq(image_lookup(store, img->digest, &found, &e), 0, "%s", e.message);
	cr_assert_eq(found->n_layers, 1);
	image_free(found);

	snprintf(copy, sizeof copy, "%s/copy", dir);
	cr_assert_eq(mkdir(copy, 0700), 0);
	dfd = open(copy, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	cr_assert_eq(image_layer_copy_subtree_owned(img, "home", dfd, 1234, 5678, &e), 0, "%s",
		     e.message);
	close(dfd);
	assert_stat(copy, 0755, 1234, 5678);
	snprintf(p, sizeof p, "%s/a.txt", copy);
	assert_file(p, "hello\n");
	assert_stat(p, 0640, 1234, 5678);
	snprintf(p, sizeof p, "%s/sub", copy);
	assert_stat(p, 0750, 1234, 5678);
	snprintf(p, sizeof p, "%s/sub/b", copy);
	assert_stat(p, 0755, 1234, 5678);
	snprintf(p, sizeof p, "%s/link", copy);
	assert_stat(p, 0777, 1234, 5678);
	assert_stat("/etc", 0755, 0, 0); /* the link's target: not chowned through it */
	image_free(img);
}

/* hostile trees */

Test(layer, symlink_to_host_dir_stored_as_link)
{
	struct station_error e = {};
	struct image_layer_stats st;

	mklink("hostetc", "/etc");
	mkdir_in("realdir", 0755, ID_BASE);
	mkfile("realdir/passwd", "mine\n", 0644, ID_BASE, ID_BASE);
	cr_assert_eq(layer_of_tree("home/node", false, 0, &st, &e), 0, "%s", e.message);
	cr_assert_eq(tar_find("home/node/hostetc")->type, AE_IFLNK);
	cr_assert_str_eq(tar_find("home/node/hostetc")->link, "/etc");
	cr_assert_not(tar_has_prefix("home/node/hostetc/"), "the symlink was followed");
	/* positive control: a real directory's files are stored */
	cr_assert_str_eq(tar_find("home/node/realdir/passwd")->data, "mine\n");
}

Test(layer, fifo_skipped_without_blocking)
{
	struct station_error e = {};
	struct image_layer_stats st;
	char p[PATH_MAX];

	path_of(p, "fifo");
	cr_assert_eq(mkfifo(p, 0644), 0);
	mkfile("file", "data", 0644, ID_BASE, ID_BASE);
	cr_assert_eq(layer_of_tree("", false, 0, &st, &e), 0, "%s", e.message);
	cr_assert_eq(st.skipped, 1);
	cr_assert_null(tar_find("fifo"));
	cr_assert_str_eq(tar_find("file")->data, "data");
}

Test(layer, devices_and_sockets_skipped)
{
	struct station_error e = {};
	struct image_layer_stats st;

	mknode("null", S_IFCHR, makedev(1, 3));
	mknode("disk", S_IFBLK, makedev(7, 0));
	mknode("sock", S_IFSOCK, 0);
	mknode("whiteout-outside-upper", S_IFCHR, makedev(0, 0));
	mkfile("file", "data", 0644, ID_BASE, ID_BASE);
	cr_assert_eq(layer_of_tree("", false, 0, &st, &e), 0, "%s", e.message);
	cr_assert_eq(st.skipped, 4);
	cr_assert_eq(n_items, 1);
	cr_assert_str_eq(items[0].path, "file");
	/* in an upper, a device other than 0/0 is no whiteout */
	cr_assert_eq(layer_of_tree("", true, 0, &st, &e), 0, "%s", e.message);
	cr_assert_eq(st.skipped, 3);
	cr_assert_null(tar_find("null"));
	cr_assert_null(tar_find(".wh.null"));
	cr_assert_not_null(tar_find(".wh.whiteout-outside-upper"));
}

Test(layer, hard_link_stored_as_file)
{
	struct station_error e = {};
	struct image_layer_stats st;
	char a[PATH_MAX], b[PATH_MAX];
	struct image *img;

	mkfile("a", "same\n", 0644, ID_BASE, ID_BASE);
	path_of(a, "a");
	path_of(b, "b");
	cr_assert_eq(link(a, b), 0);
	cr_assert_eq(layer_of_tree("", false, 0, &st, &e), 0, "%s", e.message);
	cr_assert_eq(tar_find("a")->type, AE_IFREG);
	cr_assert_eq(tar_find("b")->type, AE_IFREG);
	cr_assert_not(tar_find("b")->hardlink);
	cr_assert_str_eq(tar_find("b")->data, "same\n");
	img = commit_tar(NULL);
	snprintf(a, sizeof a, "%s/b", img->layers[img->n_layers - 1]);
	assert_file(a, "same\n");
	image_free(img);
}

Test(layer, setuid_setgid_dropped)
{
	struct station_error e = {};
	struct image_layer_stats st;
	char p[PATH_MAX];
	struct image *img;

	mkfile("su", "#!/bin/sh\n", 06755, ID_BASE, ID_BASE);
	mkfile("plain", "x", 0750, ID_BASE, ID_BASE);
	cr_assert_eq(setxattr(tree, "user.keep", "1", 1, 0), 0);
	cr_assert_eq(layer_of_tree("", false, 0, &st, &e), 0, "%s", e.message);
	cr_assert_eq(tar_find("su")->perm, 0755);
	cr_assert_eq(tar_find("plain")->perm, 0750);
	img = commit_tar(NULL);
	snprintf(p, sizeof p, "%s/su", img->layers[img->n_layers - 1]);
	assert_stat(p, 0755, 0, 0);
	image_free(img);
}

Test(layer, sparse_terabyte_refused)
{
	struct station_error e = {};
	struct image_layer_stats st;
	char p[PATH_MAX];
	int fd;

	path_of(p, "huge");
	fd = open(p, O_WRONLY | O_CREAT, 0644);
	cr_assert_geq(fd, 0);
	cr_assert_eq(ftruncate(fd, 1ll << 40), 0);
	close(fd);
	cr_assert_eq(layer_of_tree("home/node", false, 1 << 30, &st, &e), -EFBIG);
	cr_assert_str_eq(e.message, "snapshot: \"home/node/huge\": 1099511627776 bytes, which "
				    "takes the snapshot past its limit of 1073741824 bytes");
	/* positive control: a small file within the same limit */
	cr_assert_eq(unlink(p), 0);
	mkfile("small", "0123456789", 0644, ID_BASE, ID_BASE);
	cr_assert_eq(layer_of_tree("home/node", false, 1 << 30, &st, &e), 0, "%s", e.message);
	cr_assert_eq(st.bytes, 10);
}

Test(layer, limit_counts_every_file)
{
	struct station_error e = {};
	struct image_layer_stats st;

	mkfile("a", "12345", 0644, ID_BASE, ID_BASE);
	mkfile("b", "12345", 0644, ID_BASE, ID_BASE);
	cr_assert_eq(layer_of_tree("", false, 10, &st, &e), 0, "%s", e.message);
	mkfile("c", "1", 0644, ID_BASE, ID_BASE);
	cr_assert_eq(layer_of_tree("", false, 10, &st, &e), -EFBIG);
	cr_assert_str_eq(e.message, "snapshot: \"c\": 1 bytes, which takes the snapshot past its "
				    "limit of 10 bytes");
}

Test(layer, whiteout_names_left_out)
{
	struct station_error e = {};
	struct image_layer_stats st;

	mkfile(".wh.passwd", "x", 0644, ID_BASE, ID_BASE);
	mkfile(".wh..wh..opq", "x", 0644, ID_BASE, ID_BASE);
	mkfile(".whole", "kept", 0644, ID_BASE, ID_BASE);
	cr_assert_eq(layer_of_tree("", false, 0, &st, &e), 0, "%s", e.message);
	cr_assert_eq(st.skipped, 2);
	cr_assert_eq(n_items, 1);
	cr_assert_str_eq(tar_find(".whole")->data, "kept");
}

Test(layer, overlay_whiteout_and_opaque_converted)
{
	struct station_error e = {};
	struct image_layer_stats st;
	char p[PATH_MAX], v[4] = "";
	struct stat s;
	struct image *img;

	mknode("gone", S_IFCHR, makedev(0, 0));
	mkdir_in("opq", 0755, ID_BASE);
	mkfile("opq/new", "n", 0644, ID_BASE, ID_BASE);
	path_of(p, "opq");
	cr_assert_eq(setxattr(p, "trusted.overlay.opaque", "y", 1, 0), 0);
	cr_assert_eq(layer_of_tree("", true, 0, &st, &e), 0, "%s", e.message);
	cr_assert_eq(st.skipped, 0);
	cr_assert_eq(tar_find(".wh.gone")->type, AE_IFREG);
	cr_assert_not_null(tar_find("opq/.wh..wh..opq"));
	cr_assert_null(tar_find("gone"));
	img = commit_tar(NULL);
	snprintf(p, sizeof p, "%s/gone", img->layers[img->n_layers - 1]);
	cr_assert_eq(lstat(p, &s), 0);
	cr_assert(S_ISCHR(s.st_mode) && s.st_rdev == 0);
	snprintf(p, sizeof p, "%s/opq", img->layers[img->n_layers - 1]);
	cr_assert_eq(getxattr(p, "trusted.overlay.opaque", v, sizeof v), 1);
	snprintf(p, sizeof p, "%s/opq/new", img->layers[img->n_layers - 1]);
	assert_file(p, "n");
	image_free(img);
	/* positive control: not an upper, nothing converted */
	cr_assert_eq(layer_of_tree("", false, 0, &st, &e), 0, "%s", e.message);
	cr_assert_eq(st.skipped, 1);
	cr_assert_null(tar_find(".wh.gone"));
	cr_assert_null(tar_find("opq/.wh..wh..opq"));
}

/* A HOME kept whole: its prefix directory opaque, so lower layers' files there stay hidden
 * (a base image's file the workspace deleted); a copy of the subtree gets no marker. */
Test(layer, opaque_prefix)
{
	struct station_error e = {};
	struct image_layer_stats st;
	char p[PATH_MAX], copy[PATH_MAX], v[4] = "";
	int tfd = open(tree, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int out = open(tarpath, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	struct image_layer_source src = { .dir_fd = tfd, .prefix = "home/node", .opaque = true };
	struct image_layer_options o = { .id_base = ID_BASE };
	struct image *img;
	int dfd;

	home_tree();
	cr_assert_eq(image_layer_write(&src, 1, &o, out, &st, &e), 0, "%s", e.message);
	tar_load(tarpath);
	cr_assert_str_eq(items[0].path, "home/node");
	cr_assert_str_eq(items[1].path, "home/node/.wh..wh..opq", "the marker first in it");
	cr_assert_eq(items[1].type, AE_IFREG);
	cr_assert_eq(items[1].size, 0);
	img = commit_tar(NULL);
	snprintf(p, sizeof p, "%s/home/node", img->layers[img->n_layers - 1]);
	cr_assert_eq(getxattr(p, "trusted.overlay.opaque", v, sizeof v), 1);
	cr_assert_eq(v[0], 'y');
	snprintf(copy, sizeof copy, "%s/copy", dir);
	cr_assert_eq(mkdir(copy, 0700), 0);
	dfd = open(copy, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	cr_assert_eq(image_layer_copy_subtree(img, "home/node", dfd, 0, &e), 0, "%s", e.message);
	close(dfd);
	snprintf(p, sizeof p, "%s/.wh..wh..opq", copy);
	cr_assert_eq(access(p, F_OK), -1);
	snprintf(p, sizeof p, "%s/a.txt", copy);
	assert_file(p, "hello\n");
	image_free(img);
	/* an opaque tree at the root would hide the whole base: refused */
	src.prefix = "";
	cr_assert_eq(lseek(out, 0, SEEK_SET), 0);
	cr_assert_eq(image_layer_write(&src, 1, &o, out, &st, &e), -EINVAL);
	close(out);
	close(tfd);
	/* positive control: not opaque, no marker */
	cr_assert_eq(layer_of_tree("home/node", false, 0, &st, &e), 0, "%s", e.message);
	cr_assert_null(tar_find("home/node/.wh..wh..opq"));
}

/* Swaps tree/d between a directory and a symlink to a host directory holding "secret". */
static volatile bool swapping;

static void *swapper(void *arg)
{
	char d[PATH_MAX], link[PATH_MAX];

	(void)arg;
	path_of(d, "d");
	path_of(link, "d.link");
	while (swapping)
		renameat2(AT_FDCWD, link, AT_FDCWD, d, RENAME_EXCHANGE);
	return NULL;
}

Test(layer, dir_swapped_for_symlink_not_followed)
{
	struct station_error e = {};
	struct image_layer_stats st;
	char host[PATH_MAX];
	unsigned as_dir = 0, as_link = 0, changed = 0;
	pthread_t t;

	snprintf(host, sizeof host, "%s/host", dir);
	cr_assert_eq(mkdir(host, 0755), 0);
	snprintf(host, sizeof host, "%s/host/secret", dir);
	cr_assert_eq(write_file_atomic(host, "s", 1, 0600), 0);
	mkdir_in("d", 0755, ID_BASE);
	mkfile("d/inner", "i", 0644, ID_BASE, ID_BASE);
	snprintf(host, sizeof host, "%s/host", dir);
	mklink("d.link", host);
	/* positive control, before any swap: the directory's files are stored */
	cr_assert_eq(layer_of_tree("", false, 0, &st, &e), 0, "%s", e.message);
	cr_assert_not_null(tar_find("d/inner"));
	swapping = true;
	cr_assert_eq(pthread_create(&t, NULL, swapper, NULL), 0);
	for (int i = 0; i < 300; i++) {
		int r = layer_of_tree("", false, 0, &st, &e);

		cr_assert(r == 0 || r == -EAGAIN, "%d: %s", r, e.message);
		if (r == 0) {
			const struct tar_item *d = tar_find("d");

			cr_assert_null(tar_find("d/secret"), "the swapped-in symlink was followed");
			cr_assert_null(tar_find("d.link/secret"));
			cr_assert_not_null(d);
			if (d->type == AE_IFLNK)
				as_link++;
			else
				as_dir++;
		} else {
			changed++;
		}
	}
	swapping = false;
	pthread_join(t, NULL);
	cr_log_info("swap race: d stored as a directory %u times, as a symlink %u times, "
		    "refused as changed %u times",
		    as_dir, as_link, changed);
}

static void tree_times_fix(void)
{
	const char *all[] = { "a.txt", "sub", "sub/b", "link", "" };
	struct timespec ts[2] = { { 1700000000, 5 }, { 1700000000, 5 } };
	char p[PATH_MAX];

	for (size_t i = 0; i < ELEMENTSOF(all); i++) {
		path_of(p, all[i]);
		cr_assert_eq(utimensat(AT_FDCWD, p, ts, AT_SYMLINK_NOFOLLOW), 0, "%s", p);
	}
}

Test(layer, identical_trees_one_layer)
{
	struct station_error e = {};
	struct image_layer_stats st;
	_cleanup_free_ char *first = NULL, *second = NULL;
	struct image *a, *b;
	size_t n1, n2;
	int blobs, layers;

	home_tree();
	tree_times_fix();
	cr_assert_eq(layer_of_tree("home/node", false, 0, &st, &e), 0, "%s", e.message);
	cr_assert_eq(read_file(tarpath, 1 << 20, &first, &n1), 0);
	a = commit_tar("one");
	blobs = store_count("blobs/sha256");
	layers = store_count("layers");
	/* the same tree again, made anew */
	cr_assert_eq(rm_rf(tree), 0);
	cr_assert_eq(mkdir(tree, 0755), 0);
	home_tree();
	tree_times_fix();
	cr_assert_eq(layer_of_tree("home/node", false, 0, &st, &e), 0, "%s", e.message);
	cr_assert_eq(read_file(tarpath, 1 << 20, &second, &n2), 0);
	cr_assert_eq(n1, n2);
	cr_assert(memcmp(first, second, n1) == 0, "the same tree gave different bytes");
	b = commit_tar("two");
	cr_assert_str_eq(a->layers[a->n_layers - 1], b->layers[b->n_layers - 1]);
	cr_assert_str_neq(a->digest, b->digest, "two snapshots are two images");
	cr_assert_eq(store_count("layers"), layers, "the layer was stored twice");
	cr_assert_eq(store_count("blobs/sha256"), blobs + 2, "only a config and a manifest more");
	/* positive control: one byte changed, another layer */
	mkfile("a.txt", "hellO\n", 0640, ID_BASE + 1000, ID_BASE + 1000);
	tree_times_fix();
	image_free(b);
	cr_assert_eq(layer_of_tree("home/node", false, 0, &st, &e), 0, "%s", e.message);
	b = commit_tar("three");
	cr_assert_str_neq(a->layers[a->n_layers - 1], b->layers[b->n_layers - 1]);
	cr_assert_eq(store_count("layers"), layers + 1);
	image_free(a);
	image_free(b);
}

/* A tar file that cannot be linked into the store (O_TMPFILE | O_EXCL) is copied in. */
Test(layer, commit_copies_unlinkable_tar)
{
	struct station_error e = {};
	struct image_layer_stats st;
	int tfd = open(tree, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int out = open(dir, O_TMPFILE | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
	struct image_layer_source src = { .dir_fd = tfd, .prefix = "" };
	struct image_layer_options o = { .id_base = ID_BASE };
	struct image *img = NULL;
	char blob[PATH_MAX];
	struct stat s1, s2;
	const char *diff_id;

	home_tree();
	cr_assert_geq(out, 0);
	cr_assert_eq(image_layer_write(&src, 1, &o, out, &st, &e), 0, "%s", e.message);
	cr_assert_eq(image_commit_layer(store, base, out, st.diff_id, NULL, &img, &e), 0, "%s",
		     e.message);
	diff_id = strrchr(img->layers[img->n_layers - 1], '/') + 1;
	cr_assert_str_eq(diff_id, st.diff_id + strlen("sha256:"), "hashed as written");
	snprintf(blob, sizeof blob, "%s/images/blobs/sha256/%s", root, diff_id);
	cr_assert_eq(stat(blob, &s1), 0, "%s", blob);
	cr_assert_eq(fstat(out, &s2), 0);
	cr_assert_eq(s1.st_size, s2.st_size);
	cr_assert_neq(s1.st_ino, s2.st_ino);
	close(tfd);
	close(out);
	image_free(img);
}

/* A layer over the store's limit is refused at commit, and leaves nothing behind. */
Test(layer, failed_commit_leaves_nothing)
{
	struct station_error e = {};
	struct image_limits lim = { .max_layer_bytes = 4096 };
	struct image *img = (struct image *)0x1;
	int blobs = store_count("blobs/sha256"), layers = store_count("layers");
	int fd;

	struct tar_entry big[] = { { "big", 'f', NULL, 0644, .zeros = 8192 } };
	tar_write(tarpath, big, 1, false);
	image_store_set_limits(store, &lim);
	fd = open(tarpath, O_RDONLY | O_CLOEXEC);
	cr_assert_eq(image_commit_layer(store, base, fd, NULL, "big", &img, &e), -EFBIG);
	cr_assert_str_eq(e.message, "snapshot layer: more than 4096 bytes, the limit for a layer "
				    "(--max-layer-bytes)");
	close(fd);
	cr_assert_eq(img, (struct image *)0x1);
	cr_assert_eq(store_count("blobs/sha256"), blobs);
	cr_assert_eq(store_count("layers"), layers);
	cr_assert_eq(store_count("index"), 1);
	/* positive control: the same layer within the default limits */
	image_store_set_limits(store, NULL);
	fd = open(tarpath, O_RDONLY | O_CLOEXEC);
	cr_assert_eq(image_commit_layer(store, base, fd, NULL, "big", &img, &e), 0, "%s",
		     e.message);
	close(fd);
	cr_assert_eq(store_count("index"), 2);
	image_free(img);
}

/* A layer refused by unpack.c's rules when it is first unpacked leaves nothing under its name
 * (no half-made layer dir, no temporary), and the image stays unusable; a good one unpacks. */
Test(layer, refused_unpack_leaves_nothing)
{
	struct station_error e = {};
	struct tar_entry t[] = { { "ok", 'f', "x" }, { "dev", 'c' } };
	int layers = store_count("layers");
	struct image *img = NULL, *again = NULL;
	int fd;

	tar_write(tarpath, t, ELEMENTSOF(t), false);
	fd = open(tarpath, O_RDONLY | O_CLOEXEC);
	cr_assert_eq(image_commit_layer(store, base, fd, NULL, "bad", &img, &e), 0, "%s",
		     e.message);
	close(fd);
	cr_assert(img->layers_pending);
	cr_assert_eq(store_count("layers"), layers, "committed, not unpacked");
	cr_assert_eq(image_layers_unpack(store, img, &e), -EPERM);
	cr_assert(strstr(e.message, " entry \"dev\": device nodes are not allowed in a layer"),
		  "%s", e.message);
	cr_assert(img->layers_pending);
	cr_assert_eq(store_count("layers"), layers, "nothing left of the refused layer");
	cr_assert_eq(image_layer_copy_subtree(img, "ok", -1, 0, &e), -EAGAIN);
	/* found again, still pending: never taken for whole */
	cr_assert_eq(image_lookup(store, img->digest, &again, &e), 0, "%s", e.message);
	cr_assert(again->layers_pending);
	image_free(again);
	image_free(img);
	/* positive control: the same without the device */
	tar_write(tarpath, t, 1, false);
	img = commit_tar("good");
	cr_assert_eq(store_count("layers"), layers + 1);
	image_free(img);
}

/* A blob changed after its commit (a disk that lost or damaged it) is refused when unpacked:
 * its digest is checked in the same pass, and the layer dir is moved into place only after. */
Test(layer, damaged_blob_not_unpacked)
{
	struct station_error e = {};
	struct tar_entry t[] = { { "a", 'f', "aaaa" } };
	int layers = store_count("layers");
	_cleanup_free_ char *data = NULL;
	struct image *img = NULL;
	char blob[PATH_MAX], *at;
	size_t len;
	int fd;

	tar_write(tarpath, t, 1, false);
	fd = open(tarpath, O_RDONLY | O_CLOEXEC);
	cr_assert_eq(image_commit_layer(store, base, fd, NULL, "damaged", &img, &e), 0, "%s",
		     e.message);
	close(fd);
	snprintf(blob, sizeof blob, "%s/images/blobs/sha256/%s", root,
		 strrchr(img->layers[img->n_layers - 1], '/') + 1);
	cr_assert_eq(read_file(blob, 1 << 20, &data, &len), 0);
	at = memmem(data, len, "aaaa", 4);
	cr_assert_not_null(at);
	cr_assert_eq(chmod(blob, 0644), 0);
	fd = open(blob, O_WRONLY | O_CLOEXEC);
	cr_assert_geq(fd, 0);
	cr_assert_eq(pwrite(fd, "b", 1, at - data), 1); /* the file's data: "baaa" */
	close(fd);
	cr_assert_eq(image_layers_unpack(store, img, &e), -EBADMSG);
	cr_assert(strstr(e.message, "diff id mismatch"), "%s", e.message);
	cr_assert_eq(store_count("layers"), layers);
	image_free(img);
}

/* Removing an image whose layer was never unpacked leaves nothing of it. */
Test(layer, remove_pending_image)
{
	struct station_error e = {};
	struct image_layer_stats st;
	int blobs = store_count("blobs/sha256"), layers = store_count("layers");
	struct image *img = NULL;
	int fd;

	home_tree();
	cr_assert_eq(layer_of_tree("home/node", false, 0, &st, &e), 0, "%s", e.message);
	fd = open(tarpath, O_RDONLY | O_CLOEXEC);
	cr_assert_eq(image_commit_layer(store, base, fd, st.diff_id, "pending", &img, &e), 0, "%s",
		     e.message);
	close(fd);
	cr_assert(img->layers_pending);
	cr_assert_eq(store_count("blobs/sha256"), blobs + 3, "the layer, a config, a manifest");
	cr_assert_eq(image_remove(store, img->digest, &e), 0, "%s", e.message);
	cr_assert_eq(store_count("blobs/sha256"), blobs);
	cr_assert_eq(store_count("layers"), layers);
	cr_assert_eq(store_count("index"), 1);
	cr_assert_eq(store_count("trash"), 0);
	image_free(img);
}

/* A commit on a store handle that defers durability names the image (it is found and used as
 * any), image_sync() makes it durable, and image_verify() passes it until a byte of its layer
 * blob changes (as after a power loss before the fsync), then says which blob. */
Test(layer, deferred_sync_then_verify)
{
	struct station_error e = {};
	struct image_layer_stats st;
	struct image_store *deferred = NULL;
	struct image *img = NULL;
	char blob[PATH_MAX];
	int fd;

	mkfile("f", "deferred\n", 0644, ID_BASE, ID_BASE);
	cr_assert_eq(layer_of_tree("", false, 0, &st, &e), 0, "%s", e.message);
	cr_assert_eq(image_store_open(root, &deferred, &e), 0, "%s", e.message);
	image_store_defer_sync(deferred);
	fd = open(tarpath, O_RDONLY | O_CLOEXEC);
	cr_assert_geq(fd, 0);
	cr_assert_eq(image_commit_layer(deferred, base, fd, NULL, "later", &img, &e), 0, "%s",
		     e.message);
	close(fd);
	cr_assert_eq(image_verify(deferred, img->digest, &e), 0, "%s", e.message);
	cr_assert_eq(image_sync(deferred, img->digest, &e), 0, "%s", e.message);

	snprintf(blob, sizeof blob, "%s/images/blobs/sha256/%s", root,
		 st.diff_id + strlen("sha256:"));
	fd = open(blob, O_WRONLY | O_CLOEXEC);
	cr_assert_geq(fd, 0, "%s: %s", blob, strerror(errno));
	cr_assert_eq(pwrite(fd, "XXXX", 4, 600), 4);
	close(fd);
	e = (struct station_error){};
	cr_assert_eq(image_verify(deferred, img->digest, &e), -EBADMSG);
	cr_assert(strstr(e.message, st.diff_id), "names the blob: %s", e.message);
	e = (struct station_error){};
	cr_assert_eq(image_verify(deferred,
				  "sha256:"
				  "0000000000000000000000000000000000000000"
				  "000000000000000000000000",
				  &e),
		     -ENOENT, "%s", e.message);
	image_free(img);
	image_store_close(deferred);
}
