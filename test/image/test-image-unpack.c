/* SPDX-License-Identifier: MIT */
/* Layer unpacking: hostile layers are refused with an exact message and leave nothing behind;
 * a clean layer (the positive control) unpacks with owners, modes, links and whiteouts. */

#include <errno.h>
#include <fcntl.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "image/image-internal.h"
#include "test-image-util.h"

static char dir[PATH_MAX], outside[PATH_MAX], tarpath[PATH_MAX], dest[PATH_MAX];

static void setup(void)
{
	tmpdir_make(dir, sizeof dir, "test-image-unpack");
	snprintf(outside, sizeof outside, "%s/outside", dir);
	snprintf(tarpath, sizeof tarpath, "%s/layer.tar", dir);
	snprintf(dest, sizeof dest, "%s/layers/L", dir);
	cr_assert_eq(mkdir(outside, 0755), 0);
	cr_assert_eq(mkdir_p(dest, 0700), 0);
	cr_assert_eq(rmdir(dest), 0); /* its parent stays, empty */
}

static void teardown(void)
{
	rm_rf(dir);
}

TestSuite(unpack, .init = setup, .fini = teardown);

/* The layer is refused with exactly this message, and neither the layer dir nor a temporary
 * is left, nor anything written outside. */
static void expect_refused(const struct tar_entry *ents, size_t n, int err, const char *msg)
{
	struct station_error e = {};
	char layers[PATH_MAX];

	tar_write(tarpath, ents, n, false);
	cr_assert_eq(layer_unpack_file(tarpath, dest, "sha256:test", NULL, NULL, &e), err, "%s",
		     e.message);
	cr_assert_str_eq(e.message, msg);
	snprintf(layers, sizeof layers, "%s/layers", dir);
	cr_assert_eq(dir_count(layers), 0, "something left in %s", layers);
	cr_assert_eq(dir_count(outside), 0, "something written outside the layer");
}

Test(unpack, absolute_path_refused)
{
	struct tar_entry t[] = { { "ok", 'f', "x" }, { "/etc/evil", 'f', "x" } };

	expect_refused(t, ELEMENTSOF(t), -EPERM,
		       "layer sha256:test entry \"/etc/evil\": path is absolute");
}

Test(unpack, dotdot_escape_refused)
{
	struct tar_entry t[] = { { "a", 'd' }, { "a/../../escape", 'f', "x" } };

	expect_refused(t, ELEMENTSOF(t), -EPERM,
		       "layer sha256:test entry \"a/../../escape\": path escapes the layer");
}

Test(unpack, write_through_absolute_symlink_refused)
{
	struct tar_entry t[] = { { "link", 'l', outside }, { "link/pwned", 'f', "x" } };

	expect_refused(t, ELEMENTSOF(t), -EPERM,
		       "layer sha256:test entry \"link/pwned\": path goes through \"link\", which "
		       "is a symlink or not a directory");
}

Test(unpack, write_through_relative_symlink_refused)
{
	struct tar_entry t[] = { { "d", 'd' },
				 { "d/up", 'l', "../../outside" },
				 { "d/up/pwned", 'f', "x" } };

	expect_refused(t, ELEMENTSOF(t), -EPERM,
		       "layer sha256:test entry \"d/up/pwned\": path goes through \"d/up\", which "
		       "is a symlink or not a directory");
}

Test(unpack, char_device_refused)
{
	struct tar_entry t[] = { { "dev", 'd' }, { "dev/mem", 'c' } };

	expect_refused(t, ELEMENTSOF(t), -EPERM,
		       "layer sha256:test entry \"dev/mem\": device nodes are not allowed in a "
		       "layer");
}

Test(unpack, block_device_refused)
{
	struct tar_entry t[] = { { "sda", 'b' } };

	expect_refused(t, ELEMENTSOF(t), -EPERM,
		       "layer sha256:test entry \"sda\": device nodes are not allowed in a layer");
}

Test(unpack, hardlink_outside_refused)
{
	struct tar_entry t[] = { { "evil", 'h', "../../etc/shadow" } };

	expect_refused(t, ELEMENTSOF(t), -EPERM,
		       "layer sha256:test entry \"evil\": hard link target escapes the layer");
}

Test(unpack, hardlink_absolute_refused)
{
	struct tar_entry t[] = { { "evil", 'h', "/etc/shadow" } };

	expect_refused(t, ELEMENTSOF(t), -EPERM,
		       "layer sha256:test entry \"evil\": hard link target is absolute");
}

Test(unpack, hardlink_through_symlink_refused)
{
	struct tar_entry t[] = { { "etc", 'l', "/etc" }, { "evil", 'h', "etc/passwd" } };

	expect_refused(t, ELEMENTSOF(t), -EPERM,
		       "layer sha256:test entry \"evil\": path goes through \"etc\", which is a "
		       "symlink or not a directory");
}

Test(unpack, hardlink_missing_target_refused)
{
	struct tar_entry t[] = { { "evil", 'h', "nothere" } };

	expect_refused(t, ELEMENTSOF(t), -EPERM,
		       "layer sha256:test entry \"evil\": hard link target \"nothere\" is not in "
		       "the layer");
}

Test(unpack, trusted_xattr_refused)
{
	struct tar_entry t[] = { { "d", 'd', NULL, 0755, "trusted.overlay.opaque" } };

	expect_refused(t, ELEMENTSOF(t), -EPERM,
		       "layer sha256:test entry \"d/\": sets xattr \"trusted.overlay.opaque\", "
		       "which is not allowed in a layer");
}

Test(unpack, user_overlay_xattr_refused)
{
	struct tar_entry t[] = { { "f", 'f', "x", 0644, "user.overlay.redirect" } };

	expect_refused(t, ELEMENTSOF(t), -EPERM,
		       "layer sha256:test entry \"f\": sets xattr \"user.overlay.redirect\", "
		       "which is not allowed in a layer");
}

Test(unpack, unknown_whiteout_refused)
{
	struct tar_entry t[] = { { ".wh..wh.plnk", 'f' } };

	expect_refused(t, ELEMENTSOF(t), -EPERM,
		       "layer sha256:test entry \".wh..wh.plnk\": unsupported whiteout (only "
		       ".wh.NAME and .wh..wh..opq are known)");
}

Test(unpack, corrupt_tar_refused)
{
	struct station_error e = {};
	char layers[PATH_MAX];
	FILE *f = fopen(tarpath, "w");

	fputs("this is not a tar archive, not even close", f);
	fclose(f);
	cr_assert_eq(layer_unpack_file(tarpath, dest, "sha256:test", NULL, NULL, &e), -EBADMSG);
	cr_assert(strstr(e.message, "layer sha256:test: corrupt tar: ") == e.message, "%s",
		  e.message);
	snprintf(layers, sizeof layers, "%s/layers", dir);
	cr_assert_eq(dir_count(layers), 0);
}

static void path_in(char *buf, const char *rel)
{
	snprintf(buf, PATH_MAX, "%s/%s", dest, rel);
}

static void assert_whiteout(const char *rel)
{
	char p[PATH_MAX];
	struct stat st;

	path_in(p, rel);
	cr_assert_eq(lstat(p, &st), 0, "%s", rel);
	cr_assert(S_ISCHR(st.st_mode) && st.st_rdev == makedev(0, 0), "%s is no whiteout", rel);
}

static void assert_file(const char *rel, const char *content, mode_t mode)
{
	char p[PATH_MAX], buf[64] = "";
	struct stat st;
	int fd;

	path_in(p, rel);
	cr_assert_eq(lstat(p, &st), 0, "%s", rel);
	cr_assert(S_ISREG(st.st_mode), "%s", rel);
	cr_assert_eq(st.st_mode & 07777, mode, "%s mode %o", rel, st.st_mode & 07777);
	fd = open(p, O_RDONLY);
	cr_assert_eq(read(fd, buf, sizeof buf - 1), (ssize_t)strlen(content));
	close(fd);
	cr_assert_str_eq(buf, content);
}

/* Positive control: what the hostile layers try, done the legitimate way, works. */
Test(unpack, clean_layer_unpacks)
{
	struct tar_entry t[] = {
		{ "./", 'd', NULL, 0755 },
		{ "bin", 'd' },
		{ "bin/tool", 'f', "#!/bin/sh\n", 04755 },
		{ "bin/alias", 'h', "bin/tool" },
		{ "etc/passwd", 'f', "root:x:0:0::/root:/bin/sh\n" },
		{ "etc/abs", 'l', "/etc/passwd" },
		{ "etc/rel", 'l', "../etc/passwd" },
		{ "etc/.wh.motd", 'f' },
		{ "opt/.wh..wh..opq", 'f' },
		{ "opt/new", 'f', "new\n" },
		{ "run/fifo", 'p', NULL, 0600 },
		{ "home/node/.profile", 'f', "x", 0640, "user.test" },
		{ "etc/passwd", 'f', "replaced\n" },
	};
	struct station_error e = {};
	char p[PATH_MAX], link[PATH_MAX] = "", v[8] = "";
	struct stat st1, st2;

	tar_write(tarpath, t, ELEMENTSOF(t), true);
	cr_assert_eq(layer_unpack_file(tarpath, dest, "sha256:test", NULL, NULL, &e), 0, "%s",
		     e.message);
	assert_file("bin/tool", "#!/bin/sh\n", 04755);
	assert_file("etc/passwd", "replaced\n", 0644);
	path_in(p, "bin/tool");
	cr_assert_eq(stat(p, &st1), 0);
	path_in(p, "bin/alias");
	cr_assert_eq(stat(p, &st2), 0);
	cr_assert_eq(st1.st_ino, st2.st_ino, "hard link is not a hard link");
	path_in(p, "etc/abs");
	cr_assert_gt(readlink(p, link, sizeof link - 1), 0);
	cr_assert_str_eq(link, "/etc/passwd");
	assert_whiteout("etc/motd");
	path_in(p, "opt");
	cr_assert_eq(getxattr(p, "trusted.overlay.opaque", v, sizeof v), 1);
	cr_assert_eq(v[0], 'y');
	assert_file("opt/new", "new\n", 0644);
	path_in(p, "run/fifo");
	cr_assert_eq(lstat(p, &st1), 0);
	cr_assert(S_ISFIFO(st1.st_mode));
	path_in(p, "home/node/.profile");
	cr_assert_eq(getxattr(p, "user.test", v, sizeof v), 1);
	cr_assert_eq(dir_count(outside), 0);
	snprintf(p, sizeof p, "%s/layers", dir);
	cr_assert_eq(dir_count(p), 1, "a temporary was left beside the layer");
}

Test(unpack, diff_id_of_plain_and_gzip_agree)
{
	struct tar_entry t[] = { { "a", 'f', "hello" } };
	struct station_error e = {};
	char plain[IMAGE_DIGEST_MAX], gz[IMAGE_DIGEST_MAX], expect[65];
	_cleanup_free_ char *data = NULL;
	size_t len;

	tar_write(tarpath, t, 1, false);
	cr_assert_eq(layer_diff_id(tarpath, "t", 0, plain, NULL, &e), 0, "%s", e.message);
	cr_assert_eq(read_file(tarpath, 1 << 20, &data, &len), 0);
	sha256_hex(data, len, expect);
	cr_assert_str_eq(plain + 7, expect);
	tar_write(tarpath, t, 1, true);
	cr_assert_eq(layer_diff_id(tarpath, "t", 0, gz, NULL, &e), 0, "%s", e.message);
	cr_assert_str_eq(gz, plain);
}

/* Owners: ids of the container range are kept, ids past it become 65534, never a host id. */

static void assert_owner(const char *rel, uid_t uid, gid_t gid, mode_t mode)
{
	char p[PATH_MAX];
	struct stat st;

	path_in(p, rel);
	cr_assert_eq(lstat(p, &st), 0, "%s", rel);
	cr_assert_eq(st.st_uid, uid, "%s: uid %u, expected %u", rel, st.st_uid, uid);
	cr_assert_eq(st.st_gid, gid, "%s: gid %u, expected %u", rel, st.st_gid, gid);
	if (mode)
		cr_assert_eq(st.st_mode & 07777, mode, "%s: mode %o", rel, st.st_mode & 07777);
}

Test(unpack, ids_past_the_container_range_become_nobody)
{
	struct tar_entry t[] = {
		{ "./", 'd', NULL, 0755, .uid = 0, .gid = 70000 },
		{ "suid", 'f', "x", 04755, .uid = 0, .gid = 70000 },
		{ "sgid", 'f', "x", 02755, .uid = 70000, .gid = 0 },
		{ "big", 'f', "x", 0644, .uid = 4000000000u, .gid = 65536 },
		{ "d", 'd', NULL, 0755, .uid = 100000, .gid = 100000 },
		{ "d/link", 'l', "../suid", 0, .uid = 70000, .gid = 70000 },
		{ "d/fifo", 'p', NULL, 0600, .uid = 70000, .gid = 70000 },
		/* positive controls: ids inside the range are kept as they are */
		{ "user", 'f', "x", 04755, .uid = 1000, .gid = 1000 },
		{ "edge", 'f', "x", 0644, .uid = 65535, .gid = 65535 },
	};
	struct station_error e = {};

	tar_write(tarpath, t, ELEMENTSOF(t), false);
	cr_assert_eq(layer_unpack_file(tarpath, dest, "sha256:test", NULL, NULL, &e), 0, "%s",
		     e.message);
	assert_owner("", 0, 65534, 0755);
	assert_owner("suid", 0, 65534, 04755); /* setuid kept: the overlay is nosuid */
	assert_owner("sgid", 65534, 0, 02755);
	assert_owner("big", 65534, 65534, 0644);
	assert_owner("d", 65534, 65534, 0755);
	assert_owner("d/link", 65534, 65534, 0);
	assert_owner("d/fifo", 65534, 65534, 0600);
	assert_owner("user", 1000, 1000, 04755);
	assert_owner("edge", 65535, 65535, 0644);
}

/* A struct vfs_cap_data (revision 2): cap_net_raw permitted and effective. */
static const unsigned char file_caps[20] = { 0x01, 0, 0, 0x02, 0, 0x20, 0, 0 };

Test(unpack, file_capabilities_dropped)
{
	struct tar_entry t[] = {
		{ "ping", 'f', "x", 0755, "security.capability", .xattr_value = file_caps,
		  .xattr_len = sizeof file_caps },
		{ "selinux", 'f', "x", 0755, "security.selinux", .xattr_value = "system_u:x",
		  .xattr_len = 10 },
		{ "trusted", 'f', "x", 0755, "trusted.foo" },
		{ "user", 'f', "x", 0755, "user.mime_type" }, /* positive control: kept */
	};
	struct station_error e = {};
	char p[PATH_MAX], v[32];

	tar_write(tarpath, t, ELEMENTSOF(t), false);
	cr_assert_eq(layer_unpack_file(tarpath, dest, "sha256:test", NULL, NULL, &e), 0, "%s",
		     e.message);
	path_in(p, "ping");
	cr_assert_eq(getxattr(p, "security.capability", v, sizeof v), -1);
	cr_assert_eq(errno, ENODATA, "security.capability was restored");
	path_in(p, "selinux");
	cr_assert_eq(getxattr(p, "security.selinux", v, sizeof v), -1);
	cr_assert_eq(errno, ENODATA);
	path_in(p, "trusted");
	cr_assert_eq(getxattr(p, "trusted.foo", v, sizeof v), -1);
	cr_assert_eq(errno, ENODATA);
	path_in(p, "user");
	cr_assert_eq(getxattr(p, "user.mime_type", v, sizeof v), 1);
	/* The detector works: the same capability set here by hand reads back. */
	path_in(p, "ping");
	cr_assert_eq(setxattr(p, "security.capability", file_caps, sizeof file_caps, 0), 0, "%m");
	cr_assert_eq(getxattr(p, "security.capability", v, sizeof v), (ssize_t)sizeof file_caps);
}

/* Bounds: a small gzip that decompresses past the limit is stopped before anything is
 * unpacked; the same layer under a larger limit goes through. */
Test(unpack, decompression_bomb_stopped)
{
	struct tar_entry t[] = { { "zeros", 'f', NULL, 0644, .zeros = 32u << 20 } };
	struct station_error e = {};
	char digest[IMAGE_DIGEST_MAX] = "";
	uint64_t size = 0;
	struct stat st;

	tar_write(tarpath, t, ELEMENTSOF(t), true);
	cr_assert_eq(stat(tarpath, &st), 0);
	cr_assert_lt(st.st_size, 1 << 20, "the bomb is not small: %lld", (long long)st.st_size);
	cr_assert_eq(layer_diff_id(tarpath, "t", 16u << 20, digest, &size, &e), -EFBIG);
	cr_assert_str_eq(digest, "");
	/* positive control */
	cr_assert_eq(layer_diff_id(tarpath, "t", 64u << 20, digest, &size, &e), 0, "%s", e.message);
	cr_assert_gt(size, 32u << 20);
	cr_assert_lt(size, 33u << 20);
}

Test(unpack, sparse_or_large_files_bounded)
{
	struct tar_entry t[] = { { "a", 'f', NULL, 0644, .zeros = 3u << 20 },
				 { "b", 'f', NULL, 0644, .zeros = 3u << 20 } };
	struct layer_limits small = { .max_bytes = 5u << 20, .bytes_what = "the test limit" };
	struct layer_limits big = { .max_bytes = 7u << 20, .bytes_what = "the test limit" };
	struct station_error e = {};
	char layers[PATH_MAX];

	tar_write(tarpath, t, ELEMENTSOF(t), true);
	cr_assert_eq(layer_unpack_file(tarpath, dest, "sha256:test", &small, NULL, &e), -EFBIG);
	cr_assert_str_eq(e.message, "layer sha256:test: its files add up to more than 5242880 "
				    "bytes, the test limit");
	snprintf(layers, sizeof layers, "%s/layers", dir);
	cr_assert_eq(dir_count(layers), 0, "something left in %s", layers);
	cr_assert_eq(layer_unpack_file(tarpath, dest, "sha256:test", &big, NULL, &e), 0, "%s",
		     e.message);
}

Test(unpack, entry_count_bounded)
{
	struct tar_entry t[] = { { "a", 'f', "x" }, { "b", 'f', "x" }, { "c", 'f', "x" } };
	struct layer_limits two = { .max_entries = 2, .entries_what = "the test limit" };
	struct layer_limits three = { .max_entries = 3, .entries_what = "the test limit" };
	struct station_error e = {};
	char layers[PATH_MAX];
	uint64_t n = 0;

	tar_write(tarpath, t, ELEMENTSOF(t), false);
	cr_assert_eq(layer_unpack_file(tarpath, dest, "sha256:test", &two, NULL, &e), -EFBIG);
	cr_assert_str_eq(e.message, "layer sha256:test: more than 2 entries, the test limit");
	snprintf(layers, sizeof layers, "%s/layers", dir);
	cr_assert_eq(dir_count(layers), 0, "something left in %s", layers);
	cr_assert_eq(layer_unpack_file(tarpath, dest, "sha256:test", &three, &n, &e), 0, "%s",
		     e.message);
	cr_assert_eq(n, 3);
}
