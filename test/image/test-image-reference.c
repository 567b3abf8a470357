/* SPDX-License-Identifier: MIT */
/* References are pinned by digest: name@sha256:<64 hex> or a bare sha256:<64 hex>. */

#include <errno.h>

#include "image/image-internal.h"
#include "test-image-util.h"

#define HEX "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

static void expect_ok(const char *s, const char *name, const char *digest)
{
	struct image_ref ref;
	struct station_error e = {};

	cr_assert_eq(image_ref_parse(s, &ref, &e), 0, "%s: %s", s, e.message);
	cr_assert_str_eq(ref.name, name);
	cr_assert_str_eq(ref.digest, digest);
}

static void expect_error(const char *s, const char *msg)
{
	struct image_ref ref = { .name = "untouched" };
	struct station_error e = {};

	cr_assert_eq(image_ref_parse(s, &ref, &e), -EINVAL, "%s accepted", s);
	cr_assert_str_eq(e.message, msg);
	cr_assert_str_eq(e.field, "image");
	cr_assert_str_eq(ref.name, "untouched");
}

Test(reference, name_at_digest)
{
	expect_ok("busybox@sha256:" HEX, "busybox", "sha256:" HEX);
	expect_ok("library/busybox@sha256:" HEX, "library/busybox", "sha256:" HEX);
	expect_ok("127.0.0.1:5000/test/busy-box_1@sha256:" HEX, "127.0.0.1:5000/test/busy-box_1",
		  "sha256:" HEX);
	expect_ok("localhost/a.b@sha256:" HEX, "localhost/a.b", "sha256:" HEX);
}

Test(reference, bare_digest)
{
	expect_ok("sha256:" HEX, "", "sha256:" HEX);
}

Test(reference, tags_refused)
{
	expect_error("busybox:latest", "image reference \"busybox:latest\" uses a tag: images are "
				       "pinned by digest, use busybox@sha256:<64 hex>");
	expect_error("127.0.0.1:5000/busybox:1.36",
		     "image reference \"127.0.0.1:5000/busybox:1.36\" uses a tag: images are "
		     "pinned by digest, use 127.0.0.1:5000/busybox@sha256:<64 hex>");
	expect_error("busybox:latest@sha256:" HEX,
		     "image reference \"busybox:latest@sha256:" HEX "\" has both a tag and a "
		     "digest: drop the tag, images are pinned by digest");
	expect_error("busybox", "image reference \"busybox\" has no digest: images are pinned by "
				"digest, use busybox@sha256:<64 hex>");
}

Test(reference, bad_digests_refused)
{
	expect_error("sha256:abc", "image reference \"sha256:abc\": digest must be sha256: "
				   "followed by 64 lower-case hex digits");
	expect_error("busybox@sha256:" HEX "0",
		     "image reference \"busybox@sha256:" HEX "0\": digest must be sha256: "
		     "followed by 64 lower-case hex digits");
	expect_error(
		"busybox@sha256:0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef",
		"image reference \"busybox@sha256:0123456789ABCDEF0123456789abcdef0123456789"
		"abcdef0123456789abcdef\": digest must be sha256: followed by 64 lower-case hex "
		"digits");
	expect_error("sha512:" HEX HEX,
		     "image reference \"sha512:" HEX HEX "\": unsupported digest "
		     "algorithm \"sha512\" (only sha256 is supported)");
	expect_error("", "image reference is empty");
}

Test(reference, bad_names_refused)
{
	expect_error("Busybox@sha256:" HEX,
		     "image reference \"Busybox@sha256:" HEX "\": invalid repository name "
		     "\"Busybox\"");
	expect_error("a//b@sha256:" HEX,
		     "image reference \"a//b@sha256:" HEX "\": invalid repository name \"a//b\"");
	expect_error("@sha256:" HEX, "image reference \"@sha256:" HEX "\": the name before '@' "
				     "must have 1 to 255 characters");
}

Test(reference, digest_is_valid)
{
	cr_assert(image_digest_is_valid("sha256:" HEX));
	cr_assert_not(image_digest_is_valid("sha256:" HEX "a"));
	cr_assert_not(image_digest_is_valid("sha384:" HEX));
	cr_assert_not(image_digest_is_valid(NULL));
}
