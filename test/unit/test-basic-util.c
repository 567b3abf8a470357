/* SPDX-License-Identifier: MIT */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <limits.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "basic/cleanup.h"
#include "basic/log.h"
#include "basic/util.h"

/* base64 */

static void check_b64(const char *plain, const char *encoded)
{
	_cleanup_free_ char *e = base64_encode(plain, strlen(plain));
	_cleanup_free_ uint8_t *d = NULL;
	size_t n = 99;

	cr_assert_str_eq(e, encoded);
	cr_assert_eq(base64_decode(encoded, strlen(encoded), &d, &n), 0);
	cr_assert_eq(n, strlen(plain));
	cr_assert_eq(memcmp(d, plain, n), 0);
}

Test(base64, rfc4648_vectors)
{
	check_b64("", "");
	check_b64("f", "Zg==");
	check_b64("fo", "Zm8=");
	check_b64("foo", "Zm9v");
	check_b64("foob", "Zm9vYg==");
	check_b64("fooba", "Zm9vYmE=");
	check_b64("foobar", "Zm9vYmFy");
}

Test(base64, round_trip_all_bytes)
{
	uint8_t in[256];
	_cleanup_free_ uint8_t *out = NULL;
	size_t n = 0;

	for (int i = 0; i < 256; i++)
		in[i] = (uint8_t)i;
	for (size_t len = 0; len <= 256; len += 37) {
		_cleanup_free_ char *e = base64_encode(in, len);
		cr_assert_not_null(e);
		cr_assert_eq(base64_decode(e, strlen(e), &out, &n), 0);
		cr_assert_eq(n, len);
		cr_assert_eq(memcmp(in, out, len), 0);
		free(out);
		out = NULL;
	}
}

Test(base64, rejects_bad_input)
{
	static const char *const bad[] = {
		"Zg=",	    /* length not a multiple of 4 */
		"Zg",	    /* missing padding */
		"Z===",	    /* too much padding */
		"Zg==Zg==", /* padding in the middle */
		"Zm9v!A==", /* bad character */
		"Zm 9",	    /* space */
		"Zh==",	    /* non-zero bits under the padding */
		"Zm9=",	    /* same, one pad */
		"=Zg=",	    /* padding first */
		"Zg=A",	    /* pad then data */
		"Zm9-",	    /* url-safe alphabet is not standard */
	};
	uint8_t *out = (uint8_t *)0x1;
	size_t n = 7;

	for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
		cr_assert_eq(base64_decode(bad[i], strlen(bad[i]), &out, &n), -EINVAL, "%s",
			     bad[i]);
		cr_assert_eq(out, (uint8_t *)0x1, "ret touched on failure");
		cr_assert_eq(n, 7);
	}
	/* an embedded NUL inside the given length is a bad character too */
	cr_assert_eq(base64_decode("Zg\0=", 4, &out, &n), -EINVAL);
}

/* hex */

Test(hex, round_trip_and_bad)
{
	uint8_t d[4] = { 0x00, 0xab, 0x7f, 0xff }, o[4] = { 0 };
	char h[9];

	hex_encode(d, 4, h);
	cr_assert_str_eq(h, "00ab7fff");
	cr_assert_eq(hex_decode("00AB7fff", o, 4), 0);
	cr_assert_eq(memcmp(d, o, 4), 0);
	memset(o, 0x55, 4);
	cr_assert_eq(hex_decode("00ab7ff", o, 4), -EINVAL);
	cr_assert_eq(hex_decode("00ab7fffaa", o, 4), -EINVAL);
	cr_assert_eq(hex_decode("00ab7ffg", o, 4), -EINVAL);
	cr_assert_eq(o[0], 0x55, "ret touched on failure");
}

/* utf8 */

Test(utf8, valid)
{
	cr_assert(utf8_is_valid("", 0));
	cr_assert(utf8_is_valid("plain ascii", 11));
	cr_assert(utf8_is_valid("\xc3\xa9", 2));	 /* é */
	cr_assert(utf8_is_valid("\xe2\x82\xac", 3));	 /* € */
	cr_assert(utf8_is_valid("\xf0\x9f\x98\x80", 4)); /* U+1F600 */
	cr_assert(utf8_is_valid("\xf4\x8f\xbf\xbf", 4)); /* U+10FFFF */
	cr_assert(utf8_is_valid("\xed\x9f\xbf", 3));	 /* U+D7FF */
	cr_assert(utf8_is_valid("\xee\x80\x80", 3));	 /* U+E000 */
	cr_assert(utf8_is_valid("\xc2\x80", 2));	 /* U+0080, smallest 2-byte */
	cr_assert(utf8_is_valid("a\xc3\xa9z\xe2\x82\xac", 7));
}

Test(utf8, invalid)
{
	cr_assert_not(utf8_is_valid("\xc0\xaf", 2));	     /* overlong '/' */
	cr_assert_not(utf8_is_valid("\xc1\xbf", 2));	     /* overlong */
	cr_assert_not(utf8_is_valid("\xe0\x80\xaf", 3));     /* overlong 3-byte */
	cr_assert_not(utf8_is_valid("\xf0\x80\x80\xaf", 4)); /* overlong 4-byte */
	cr_assert_not(utf8_is_valid("\xed\xa0\x80", 3));     /* U+D800 surrogate */
	cr_assert_not(utf8_is_valid("\xed\xbf\xbf", 3));     /* U+DFFF surrogate */
	cr_assert_not(utf8_is_valid("\xf4\x90\x80\x80", 4)); /* U+110000 */
	cr_assert_not(utf8_is_valid("\xf5\x80\x80\x80", 4)); /* lead byte > f4 */
	cr_assert_not(utf8_is_valid("\xe2\x82", 2));	     /* truncated */
	cr_assert_not(utf8_is_valid("\xf0\x9f\x98", 3));     /* truncated */
	cr_assert_not(utf8_is_valid("\x80", 1));	     /* lone continuation */
	cr_assert_not(utf8_is_valid("\xc3\x28", 2));	     /* bad continuation */
	cr_assert_not(utf8_is_valid("\xff", 1));
	cr_assert_not(utf8_is_valid("a\0b", 3)); /* NUL */
	cr_assert_not(utf8_is_valid("\0", 1));
}

Test(utf8, cut_head)
{
	cr_assert_eq(utf8_cut_head(NULL, 0), 0);
	cr_assert_eq(utf8_cut_head("ab", 2), 0);
	cr_assert_eq(utf8_cut_head("a\xc3\xa9", 3), 0);	   /* ends on a boundary */
	cr_assert_eq(utf8_cut_head("a\xc3", 2), 1);	   /* é, 1 of 2 */
	cr_assert_eq(utf8_cut_head("a\xe2", 2), 1);	   /* €, 1 of 3 */
	cr_assert_eq(utf8_cut_head("a\xe2\x82", 3), 2);	   /* €, 2 of 3 */
	cr_assert_eq(utf8_cut_head("\xf0\x9f\x98", 3), 3); /* U+1F600, 3 of 4 */
	cr_assert_eq(utf8_cut_head("a\xf0", 2), 1);	   /* needs a second byte >= 0x90 */
	cr_assert_eq(utf8_cut_head("a\xe0", 2), 1);	   /* needs a second byte >= 0xa0 */
	cr_assert_eq(utf8_cut_head("a\xed", 2), 1);	   /* needs a second byte <= 0x9f */
	cr_assert_eq(utf8_cut_head("a\xf4", 2), 1);	   /* needs a second byte <= 0x8f */
	cr_assert_eq(utf8_cut_head("a\xe0\x80", 3), 0);	   /* no completion is well-formed */
	cr_assert_eq(utf8_cut_head("a\xed\xa0", 3), 0);	   /* a surrogate */
	cr_assert_eq(utf8_cut_head("a\xf4\x90", 3), 0);	   /* beyond U+10FFFF */
	cr_assert_eq(utf8_cut_head("a\xc0", 2), 0);	   /* overlong, whatever follows */
	cr_assert_eq(utf8_cut_head("a\xff", 2), 0);
	cr_assert_eq(utf8_cut_head("\x80\x80\x80", 3), 0); /* no lead among the last 3 */
}

Test(utf8, cut_tail)
{
	cr_assert_eq(utf8_cut_tail(NULL, 0), 0);
	cr_assert_eq(utf8_cut_tail("ab", 2), 0);
	cr_assert_eq(utf8_cut_tail("\xa9z", 2), 1);
	cr_assert_eq(utf8_cut_tail("\x82\xacz", 3), 2);
	cr_assert_eq(utf8_cut_tail("\x9f\x98\x80", 3), 3);
	cr_assert_eq(utf8_cut_tail("\x80\x80\x80\x80z", 5), 0); /* no character has 4 */
	cr_assert_eq(utf8_cut_tail("\xc3\xa9", 2), 0);
}

/* sha256 */

Test(sha256, vectors)
{
	char h[65];

	sha256_hex("", 0, h);
	cr_assert_str_eq(h, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
	sha256_hex("abc", 3, h);
	cr_assert_str_eq(h, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
	sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", 56, h);
	cr_assert_str_eq(h, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

Test(sha256, million_a_in_odd_chunks)
{
	struct sha256_ctx c;
	uint8_t d[32];
	char chunk[997], h[65];
	size_t left = 1000000;

	memset(chunk, 'a', sizeof(chunk));
	sha256_init(&c);
	while (left > 0) {
		size_t k = left < sizeof(chunk) ? left : sizeof(chunk);
		sha256_update(&c, chunk, k);
		left -= k;
	}
	sha256_final(&c, d);
	hex_encode(d, 32, h);
	cr_assert_str_eq(h, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

Test(sha256, million_a_at_once)
{
	_cleanup_free_ char *a = malloc(1000000);
	char h[65];

	memset(a, 'a', 1000000);
	sha256_hex(a, 1000000, h);
	cr_assert_str_eq(h, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

/* sha1 */

Test(sha1, vectors)
{
	char h[41];

	sha1_hex("", 0, h);
	cr_assert_str_eq(h, "da39a3ee5e6b4b0d3255bfef95601890afd80709");
	sha1_hex("abc", 3, h);
	cr_assert_str_eq(h, "a9993e364706816aba3e25717850c26c9cd0d89d");
	sha1_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", 56, h);
	cr_assert_str_eq(h, "84983e441c3bd26ebaae4aa1f95129e5e54670f1");
	/* 64 bytes: the padding spills into a second block. */
	sha1_hex("0123456701234567012345670123456701234567012345670123456701234567", 64, h);
	cr_assert_str_eq(h, "e0c094e867ef46c350ef54a7f59dd60bed92ae83");
	/* The RFC 6455 handshake example: key + GUID. */
	sha1_hex("dGhlIHNhbXBsZSBub25jZQ==258EAFA5-E914-47DA-95CA-C5AB0DC85B11", 60, h);
	cr_assert_str_eq(h, "b37a4f2cc0624f1690f64606cf385945b2bec4ea");
}

Test(sha1, million_a_in_odd_chunks)
{
	struct sha1_ctx c;
	uint8_t d[20];
	char chunk[997], h[41];
	size_t left = 1000000;

	memset(chunk, 'a', sizeof(chunk));
	sha1_init(&c);
	while (left > 0) {
		size_t k = left < sizeof(chunk) ? left : sizeof(chunk);
		sha1_update(&c, chunk, k);
		left -= k;
	}
	sha1_final(&c, d);
	hex_encode(d, 20, h);
	cr_assert_str_eq(h, "34aa973cd4c4daa4f61eeb2bdbad27316534016f");
}

/* misc */

Test(memeq, consttime)
{
	cr_assert(memeq_consttime("abcd", "abcd", 4));
	cr_assert_not(memeq_consttime("abcd", "abce", 4));
	cr_assert(memeq_consttime("x", "y", 0));
}

Test(random_id, charset_and_length)
{
	char id[64], id2[64];

	cr_assert_eq(random_id("ws-", 20, id, sizeof(id)), 0);
	cr_assert_eq(strlen(id), 23);
	cr_assert_eq(strncmp(id, "ws-", 3), 0);
	for (size_t i = 3; i < 23; i++)
		cr_assert(strchr("abcdefghijklmnopqrstuvwxyz234567", id[i]) && id[i], "char %c",
			  id[i]);
	cr_assert_eq(random_id("ws-", 20, id2, sizeof(id2)), 0);
	cr_assert_str_neq(id, id2);

	snprintf(id, sizeof id, "untouched");
	cr_assert_eq(random_id("ws-", 20, id, 23), -ENOBUFS);
	cr_assert_str_eq(id, "untouched");
	cr_assert_eq(random_id("", 53, id, sizeof(id)), -EINVAL);
	cr_assert_eq(random_id("", 52, id, 53), 0);
	cr_assert_eq(strlen(id), 52);
}

Test(random_id, every_symbol_appears)
{
	char id[53];
	bool seen[256] = { false };
	size_t n_seen = 0;

	for (int round = 0; round < 200; round++) {
		cr_assert_eq(random_id(NULL, 52, id, sizeof(id)), 0);
		for (size_t i = 0; i < 52; i++)
			if (!seen[(uint8_t)id[i]]) {
				seen[(uint8_t)id[i]] = true;
				n_seen++;
			}
	}
	cr_assert_eq(n_seen, 32);
}

Test(parse_u64, edge_cases)
{
	uint64_t v = 42;

	cr_assert_eq(parse_u64("0", UINT64_MAX, &v), 0);
	cr_assert_eq(v, 0);
	cr_assert_eq(parse_u64("18446744073709551615", UINT64_MAX, &v), 0);
	cr_assert_eq(v, UINT64_MAX);
	cr_assert_eq(parse_u64("100", 100, &v), 0);
	cr_assert_eq(v, 100);
	v = 42;
	cr_assert_eq(parse_u64("18446744073709551616", UINT64_MAX, &v), -ERANGE);
	cr_assert_eq(parse_u64("99999999999999999999999", UINT64_MAX, &v), -ERANGE);
	cr_assert_eq(parse_u64("101", 100, &v), -ERANGE);
	cr_assert_eq(parse_u64("", 100, &v), -EINVAL);
	cr_assert_eq(parse_u64("-1", 100, &v), -EINVAL);
	cr_assert_eq(parse_u64("+1", 100, &v), -EINVAL);
	cr_assert_eq(parse_u64(" 1", 100, &v), -EINVAL);
	cr_assert_eq(parse_u64("1 ", 100, &v), -EINVAL);
	cr_assert_eq(parse_u64("0x10", 100, &v), -EINVAL);
	cr_assert_eq(parse_u64("1a", 100, &v), -EINVAL);
	cr_assert_eq(v, 42, "ret touched on failure");
}

Test(format_rfc3339, known_times)
{
	char b[32];

	format_rfc3339(0, b);
	cr_assert_str_eq(b, "1970-01-01T00:00:00.000Z");
	format_rfc3339(1795948807123456ULL, b);
	cr_assert_str_eq(b, "2026-11-29T10:40:07.123Z");
}

/* filesystem; each test works in its own temporary directory */

static char tmpdir[64];

static void tmp_setup(void)
{
	snprintf(tmpdir, sizeof tmpdir, "/tmp/test-basic-util.XXXXXX");
	cr_assert_not_null(mkdtemp(tmpdir));
}

static void tmp_teardown(void)
{
	rm_rf(tmpdir);
}

static char *path_in(const char *rel)
{
	char *p;

	cr_assert_geq(asprintf(&p, "%s/%s", tmpdir, rel), 0);
	return p;
}

Test(fs, mkdir_p, .init = tmp_setup, .fini = tmp_teardown)
{
	_cleanup_free_ char *p = path_in("a/b/c"), *f = path_in("file");
	_cleanup_free_ char *under = path_in("file/x");
	struct stat st;

	cr_assert_eq(mkdir_p(p, 0755), 0);
	cr_assert_eq(stat(p, &st), 0);
	cr_assert(S_ISDIR(st.st_mode));
	cr_assert_eq(mkdir_p(p, 0755), 0, "existing is fine");
	cr_assert_eq(write_file_atomic(f, "x", 1, 0644), 0);
	cr_assert_eq(mkdir_p(f, 0755), -ENOTDIR);
	cr_assert_eq(mkdir_p(under, 0755), -ENOTDIR);
}

Test(fs, rm_rf_does_not_follow_symlinks, .init = tmp_setup, .fini = tmp_teardown)
{
	_cleanup_free_ char *outside = path_in("outside"), *victim = path_in("outside/keep");
	_cleanup_free_ char *tree = path_in("tree"), *deep = path_in("tree/a/b");
	_cleanup_free_ char *file = path_in("tree/a/b/f"), *link = path_in("tree/a/link");
	_cleanup_free_ char *flink = path_in("tree/filelink");
	struct stat st;

	cr_assert_eq(mkdir_p(outside, 0755), 0);
	cr_assert_eq(write_file_atomic(victim, "keep", 4, 0644), 0);
	cr_assert_eq(mkdir_p(deep, 0755), 0);
	cr_assert_eq(write_file_atomic(file, "x", 1, 0644), 0);
	cr_assert_eq(symlink(outside, link), 0);
	cr_assert_eq(symlink(victim, flink), 0);
	/* positive control: through the link the victim is reachable */
	_cleanup_free_ char *via = path_in("tree/a/link/keep");
	cr_assert_eq(stat(via, &st), 0);

	cr_assert_eq(rm_rf(tree), 0);
	cr_assert_eq(lstat(tree, &st), -1);
	cr_assert_eq(errno, ENOENT);
	cr_assert_eq(stat(victim, &st), 0, "symlink target was removed");
	cr_assert_eq(st.st_size, 4);
	cr_assert_eq(stat(outside, &st), 0);

	cr_assert_eq(rm_rf(tree), 0, "missing is fine");
}

/* Mounts happen in a private mount namespace of this test's process. */
static void private_mounts(void)
{
	if (unshare(CLONE_NEWNS) < 0)
		cr_skip_test("no mount namespace (needs root)");
	cr_assert_eq(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL), 0);
}

Test(fs, rm_rf_does_not_cross_mounts, .init = tmp_setup, .fini = tmp_teardown)
{
	_cleanup_free_ char *outside = path_in("outside"), *victim = path_in("outside/keep");
	_cleanup_free_ char *tree = path_in("tree"), *bind = path_in("tree/bind");
	_cleanup_free_ char *tmpfs = path_in("tree/tmpfs"), *tfile = path_in("tree/tmpfs/f");
	_cleanup_free_ char *plain = path_in("tree/plain");
	_cleanup_free_ char *via = path_in("tree/bind/keep");
	struct stat st;

	private_mounts();
	cr_assert_eq(mkdir_p(outside, 0755), 0);
	cr_assert_eq(write_file_atomic(victim, "keep", 4, 0644), 0);
	cr_assert_eq(mkdir_p(bind, 0755), 0);
	cr_assert_eq(mkdir_p(tmpfs, 0755), 0);
	cr_assert_eq(write_file_atomic(plain, "x", 1, 0644), 0);
	/* same filesystem, another mount: only the mount id tells them apart */
	cr_assert_eq(mount(outside, bind, NULL, MS_BIND, NULL), 0);
	cr_assert_eq(mount("tmpfs", tmpfs, "tmpfs", 0, "size=1m"), 0);
	cr_assert_eq(write_file_atomic(tfile, "t", 1, 0644), 0);
	cr_assert_eq(stat(via, &st), 0, "positive control: the bind mount shows the victim");

	cr_assert_eq(rm_rf(tree), -EXDEV);
	cr_assert_eq(stat(victim, &st), 0, "file behind a bind mount was removed");
	cr_assert_eq(stat(tfile, &st), 0, "file on a tmpfs was removed");
	cr_assert_eq(lstat(plain, &st), -1, "the rest of the tree is removed");

	cr_assert_eq(umount(bind), 0);
	cr_assert_eq(umount(tmpfs), 0);
	cr_assert_eq(rm_rf(tree), 0);
	cr_assert_eq(lstat(tree, &st), -1);
	cr_assert_eq(stat(victim, &st), 0);
}

Test(fs, rm_rf_on_symlink_removes_only_the_link, .init = tmp_setup, .fini = tmp_teardown)
{
	_cleanup_free_ char *dir = path_in("dir"), *f = path_in("dir/f"), *link = path_in("l");
	struct stat st;

	cr_assert_eq(mkdir_p(dir, 0755), 0);
	cr_assert_eq(write_file_atomic(f, "x", 1, 0644), 0);
	cr_assert_eq(symlink(dir, link), 0);
	cr_assert_eq(rm_rf(link), 0);
	cr_assert_eq(lstat(link, &st), -1);
	cr_assert_eq(stat(f, &st), 0);
}

Test(fs, write_file_atomic_mode_and_content, .init = tmp_setup, .fini = tmp_teardown)
{
	_cleanup_free_ char *p = path_in("secret");
	_cleanup_free_ char *buf = NULL;
	size_t n = 0;
	struct stat st;
	mode_t old = umask(0077);

	cr_assert_eq(write_file_atomic(p, "hello", 5, 0640), 0);
	cr_assert_eq(stat(p, &st), 0);
	cr_assert_eq(st.st_mode & 07777, 0640);
	cr_assert_eq(write_file_atomic(p, "bye", 3, 0600), 0, "replace");
	cr_assert_eq(stat(p, &st), 0);
	cr_assert_eq(st.st_mode & 07777, 0600);
	umask(old);
	cr_assert_eq(read_file(p, 100, &buf, &n), 0);
	cr_assert_eq(n, 3);
	cr_assert_str_eq(buf, "bye");

	/* no temporary file is left behind */
	_cleanup_free_ char *cmd = NULL;
	cr_assert_geq(asprintf(&cmd, "test $(ls -A %s | wc -l) -eq 1", tmpdir), 0);
	cr_assert_eq(system(cmd), 0);
}

Test(fs, read_file_bounds, .init = tmp_setup, .fini = tmp_teardown)
{
	_cleanup_free_ char *p = path_in("f"), *missing = path_in("nope");
	char *buf = NULL;
	size_t n = 0;
	char big[10000];

	memset(big, 'z', sizeof(big));
	cr_assert_eq(write_file_atomic(p, big, sizeof(big), 0644), 0);
	cr_assert_eq(read_file(p, 9999, &buf, &n), -EFBIG);
	cr_assert_null(buf);
	cr_assert_eq(read_file(p, 10000, &buf, &n), 0);
	cr_assert_eq(n, 10000);
	free(buf);
	buf = NULL;
	cr_assert_eq(read_file(missing, 10, &buf, &n), -ENOENT);
	cr_assert_eq(read_file("/proc/self/stat", 65536, &buf, NULL), 0, "size-0 proc file");
	cr_assert_gt(strlen(buf), 0);
	free(buf);
}

/* fds */

/* Runs in a forked child: closing every fd would cut the test runner's own channel. */
static int close_all_child(void)
{
	int a = open("/dev/null", O_RDONLY | O_CLOEXEC), b = dup(a), c = dup(a), d = dup(a);
	int keep[] = { d, -1, b, b };

	if (a < 3 || b < 3 || c < 3 || d < 3)
		return 10;
	if (close_all_fds_except(keep, ELEMENTSOF(keep)) != 0)
		return 11;
	if (fcntl(a, F_GETFD) != -1 || fcntl(c, F_GETFD) != -1)
		return 12;
	if (fcntl(b, F_GETFD) < 0 || fcntl(d, F_GETFD) < 0)
		return 13;
	if (fcntl(0, F_GETFD) < 0 || fcntl(2, F_GETFD) < 0)
		return 14;
	/* nothing else is open: a new fd gets the lowest free number >= 3 */
	for (int fd = 3; fd < 1024; fd++)
		if (fd != b && fd != d && fcntl(fd, F_GETFD) >= 0)
			return 15;
	return 0;
}

Test(fd, close_all_fds_except)
{
	int status;
	pid_t pid = fork();

	cr_assert_geq(pid, 0);
	if (pid == 0)
		_exit(close_all_child());
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFEXITED(status));
	cr_assert_eq(WEXITSTATUS(status), 0);
}

/* gVisor's close_range (runsc 20221219) answers EINVAL to a last fd above INT_MAX, where Linux
 * takes ~0U as "to the end". A seccomp filter acts that out here, and kills the process on a
 * close() of fd 64 or more: the fd-by-fd loop over RLIMIT_NOFILE that followed the EINVAL (20000
 * closes, seconds under runsc's ptrace platform, in the agent's vfork child) shows up as SIGSYS. */
#if (defined(__x86_64__) || defined(__aarch64__)) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#if defined(__x86_64__)
#define NATIVE_AUDIT_ARCH AUDIT_ARCH_X86_64
#else
#define NATIVE_AUDIT_ARCH AUDIT_ARCH_AARCH64
#endif
#define ARG_LO(n) (offsetof(struct seccomp_data, args[n]))
#define ARG_HI(n) (offsetof(struct seccomp_data, args[n]) + 4)
#define CLOSE_LOOP_FD 64

static int gvisor_close_range_filter(void)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, NATIVE_AUDIT_ARCH, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_close_range, 2, 0),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_close, 7, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		/* close_range: last (args[1]) above INT_MAX -> EINVAL */
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ARG_HI(1)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0, 0, 2),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ARG_LO(1)),
		BPF_JUMP(BPF_JMP | BPF_JGT | BPF_K, INT_MAX, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EINVAL),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		/* close: fd in [CLOSE_LOOP_FD, INT_MAX] -> killed */
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ARG_LO(0)),
		BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, CLOSE_LOOP_FD, 0, 2),
		BPF_JUMP(BPF_JMP | BPF_JGT | BPF_K, INT_MAX, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { .len = ELEMENTSOF(f), .filter = f };

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return -1;
	return (int)syscall(__NR_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog);
}

/* Forks; the child installs the filter and exits with fn()'s code. */
static void under_gvisor_close_range(int (*fn)(void), int *status)
{
	pid_t pid = fork();

	cr_assert_geq(pid, 0);
	if (pid == 0) {
		if (sysconf(_SC_OPEN_MAX) <= CLOSE_LOOP_FD)
			_exit(30);
		if (gvisor_close_range_filter() < 0)
			_exit(31);
		_exit(fn());
	}
	cr_assert_eq(waitpid(pid, status, 0), pid);
}

static int close_range_control_child(void)
{
	if (close_range(3, ~0U, 0) != -1 || errno != EINVAL)
		return 20;
	if (close_range(3, INT_MAX, 0) != 0)
		return 21;
	close(CLOSE_LOOP_FD);
	return 0; /* not reached: the filter kills */
}

/* control: the filter refuses close_range to ~0U and catches a close() loop */
Test(fd, gvisor_close_range_filter_catches_the_close_loop)
{
	int status;

	under_gvisor_close_range(close_range_control_child, &status);
	cr_assert(WIFSIGNALED(status), "child not killed (status 0x%x)", status);
	cr_assert_eq(WTERMSIG(status), SIGSYS);
}

Test(fd, close_all_fds_except_under_gvisor_close_range)
{
	int status;

	under_gvisor_close_range(close_all_child, &status);
	cr_assert(WIFEXITED(status), "child killed by signal %d: an fd-by-fd close loop",
		  WIFSIGNALED(status) ? WTERMSIG(status) : 0);
	cr_assert_eq(WEXITSTATUS(status), 0);
}
#endif

Test(fd, flags)
{
	int p[2];

	cr_assert_eq(pipe(p), 0);
	cr_assert_eq(fd_set_nonblock(p[0], true), 0);
	cr_assert(fcntl(p[0], F_GETFL) & O_NONBLOCK);
	cr_assert_eq(fd_set_nonblock(p[0], false), 0);
	cr_assert_not(fcntl(p[0], F_GETFL) & O_NONBLOCK);
	cr_assert_eq(fd_set_cloexec(p[1], true), 0);
	cr_assert(fcntl(p[1], F_GETFD) & FD_CLOEXEC);
	cr_assert_eq(write_all(p[1], "abc", 3), 0);
	close(p[0]);
	close(p[1]);
	cr_assert_eq(fd_set_cloexec(p[1], true), -EBADF);
}

/* log */

static char *log_capture(enum log_format format, void (*emit)(void))
{
	int p[2];
	char *buf = calloc(1, 1 << 17);
	ssize_t n;

	cr_assert_eq(pipe(p), 0);
	cr_assert_eq(fd_set_nonblock(p[0], true), 0);
	log_setup(p[1], format, LOG_LEVEL_INFO, "test");
	emit();
	log_setup(2, LOG_FORMAT_JSON, LOG_LEVEL_INFO, "test");
	n = read(p[0], buf, (1 << 17) - 1);
	close(p[0]);
	close(p[1]);
	buf[n > 0 ? n : 0] = '\0';
	return buf;
}

static void emit_escapes(void)
{
	log_debug("dropped", NULL);
	log_info("run \"x\" done", "workspace", "ws-1", "out", "a\\b\n\t\x01\xff", NULL);
}

Test(log, json_escaping)
{
	_cleanup_free_ char *s = log_capture(LOG_FORMAT_JSON, emit_escapes);
	const char *rest;

	cr_assert_eq(strncmp(s, "{\"ts\":\"", 7), 0, "%s", s);
	cr_assert_eq(s[7 + 23], 'Z');
	rest = strstr(s, "\",\"level\"");
	cr_assert_not_null(rest);
	cr_assert_str_eq(
		rest, "\",\"level\":\"info\",\"program\":\"test\",\"msg\":\"run \\\"x\\\" done\","
		      "\"workspace\":\"ws-1\",\"out\":\"a\\\\b\\n\\t\\u0001\\ufffd\"}\n");
}

Test(log, text_format)
{
	_cleanup_free_ char *s = log_capture(LOG_FORMAT_TEXT, emit_escapes);

	cr_assert_not_null(strchr(s, ' '));
	cr_assert_str_eq(
		strchr(s, ' '),
		" info run \\\"x\\\" done workspace=ws-1 out=\"a\\\\b\\n\\t\\u0001\\ufffd\"\n");
}

static void emit_huge(void)
{
	_cleanup_free_ char *v = malloc(100000);

	memset(v, 'v', 99999);
	v[99999] = 0;
	log_info("big", "small", "1", "huge", v, "after", "2", NULL);
}

Test(log, oversized_field_is_dropped_and_marked)
{
	_cleanup_free_ char *s = log_capture(LOG_FORMAT_JSON, emit_huge);
	const char *rest = strstr(s, "\"msg\"");

	cr_assert_not_null(rest);
	cr_assert_str_eq(rest, "\"msg\":\"big\",\"small\":\"1\",\"truncated\":\"true\"}\n");
}

static size_t count_lines(const char *s)
{
	size_t n = 0;
	for (; *s; s++)
		n += *s == '\n';
	return n;
}

static void emit_ten(void)
{
	for (int i = 0; i < 10; i++)
		log_info("again", NULL);
}

Test(log, rate_limit_keeps_the_first_lines_of_a_minute)
{
	log_set_limits(3, 0);
	_cleanup_free_ char *s = log_capture(LOG_FORMAT_TEXT, emit_ten);
	log_set_limits(0, 0);
	cr_assert_eq(count_lines(s), 3, "%s", s);
	/* control: without a limit every line is written */
	_cleanup_free_ char *all = log_capture(LOG_FORMAT_TEXT, emit_ten);
	cr_assert_eq(count_lines(all), 10);
}

Test(log, a_log_file_over_its_size_takes_errors_only)
{
	char path[] = "/tmp/test-log-XXXXXX";
	int fd = mkstemp(path);
	cr_assert_geq(fd, 0);
	unlink(path);
	cr_assert_eq(ftruncate(fd, 4096), 0);
	log_setup(fd, LOG_FORMAT_TEXT, LOG_LEVEL_INFO, "test");
	log_set_limits(0, 1024);
	log_info("dropped", NULL);
	log_error("kept", NULL);
	log_set_limits(0, 0);
	log_info("kept too", NULL);
	log_setup(2, LOG_FORMAT_JSON, LOG_LEVEL_INFO, "test");
	char buf[8192];
	ssize_t n = pread(fd, buf, sizeof buf - 1, 0); /* written from offset 0 on */
	close(fd);
	cr_assert_gt(n, 0);
	buf[n] = 0;
	cr_assert_null(strstr(buf, "dropped"), "%s", buf);
	cr_assert_not_null(strstr(buf, " error kept"), "%s", buf);
	cr_assert_not_null(strstr(buf, " info kept too"), "%s", buf);
}
