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
	cr_assert_eq(layer_unpack_file(tarpath, dest, "sha256:test", &e), err, "%s", e.message);
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
	cr_assert_eq(layer_unpack_file(tarpath, dest, "sha256:test", &e), -EBADMSG);
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
	cr_assert_eq(layer_unpack_file(tarpath, dest, "sha256:test", &e), 0, "%s", e.message);
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
	cr_assert_eq(layer_diff_id(tarpath, "t", plain, &e), 0, "%s", e.message);
	cr_assert_eq(read_file(tarpath, 1 << 20, &data, &len), 0);
	sha256_hex(data, len, expect);
	cr_assert_str_eq(plain + 7, expect);
	tar_write(tarpath, t, 1, true);
	cr_assert_eq(layer_diff_id(tarpath, "t", gz, &e), 0, "%s", e.message);
	cr_assert_str_eq(gz, plain);
}
