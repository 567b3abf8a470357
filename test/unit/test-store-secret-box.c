/* SPDX-License-Identifier: MIT */
/* Sealing secrets (AES-256-GCM) and the key file they are sealed under: every tampered part is
 * refused beside the untampered round trip, every bad key file is refused with its problem
 * named beside the good one being taken. */

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "basic/util.h"
#include "store/secret-box.h"
#include "store/store.h"

static const uint8_t key[SECRET_KEY_BYTES] = "0123456789abcdef0123456789abcde";
static const char aad[] = "ws-1\0token";
static const char plain[] = "ghs_installation-token-value";

struct sealed {
	uint8_t nonce[SECRET_NONCE_BYTES];
	uint8_t *data;
	size_t len;
};

static struct sealed seal(void)
{
	struct sealed s = {};

	cr_assert_eq(secret_box_seal(key, aad, sizeof aad - 1, plain, strlen(plain), s.nonce,
				     &s.data, &s.len),
		     0);
	cr_assert_eq(s.len, strlen(plain) + SECRET_TAG_BYTES);
	return s;
}

/* 0 with the plaintext compared, or the error of opening. */
static int open_with(const uint8_t *k, const uint8_t *nonce, const void *a, size_t a_len,
		     const uint8_t *data, size_t len)
{
	char *out = NULL;
	size_t n = 0;
	int r = secret_box_open(k, nonce, a, a_len, data, len, &out, &n);

	if (r == 0) {
		cr_assert_eq(n, strlen(plain));
		cr_assert_str_eq(out, plain);
		free(out);
	} else {
		cr_assert_null(out);
	}
	return r;
}

Test(secret_box, round_trip_and_ciphertext_is_not_plaintext)
{
	struct sealed s = seal();

	cr_assert_eq(open_with(key, s.nonce, aad, sizeof aad - 1, s.data, s.len), 0);
	cr_assert_null(memmem(s.data, s.len, "installation", 12));
	free(s.data);
}

Test(secret_box, nonce_is_fresh_each_time)
{
	struct sealed a = seal(), b = seal();

	cr_assert_neq(memcmp(a.nonce, b.nonce, SECRET_NONCE_BYTES), 0);
	cr_assert_neq(memcmp(a.data, b.data, a.len), 0);
	free(a.data);
	free(b.data);
}

Test(secret_box, flipped_bit_in_ciphertext_is_refused)
{
	struct sealed s = seal();

	for (size_t i = 0; i < s.len - SECRET_TAG_BYTES; i++) {
		s.data[i] ^= 0x01;
		cr_assert_eq(open_with(key, s.nonce, aad, sizeof aad - 1, s.data, s.len), -EBADMSG,
			     "byte %zu", i);
		s.data[i] ^= 0x01;
	}
	cr_assert_eq(open_with(key, s.nonce, aad, sizeof aad - 1, s.data, s.len), 0);
	free(s.data);
}

Test(secret_box, flipped_bit_in_tag_is_refused)
{
	struct sealed s = seal();

	for (size_t i = s.len - SECRET_TAG_BYTES; i < s.len; i++) {
		s.data[i] ^= 0x80;
		cr_assert_eq(open_with(key, s.nonce, aad, sizeof aad - 1, s.data, s.len), -EBADMSG,
			     "byte %zu", i);
		s.data[i] ^= 0x80;
	}
	cr_assert_eq(open_with(key, s.nonce, aad, sizeof aad - 1, s.data, s.len), 0);
	free(s.data);
}

Test(secret_box, flipped_bit_in_nonce_is_refused)
{
	struct sealed s = seal();

	for (size_t i = 0; i < SECRET_NONCE_BYTES; i++) {
		s.nonce[i] ^= 0x04;
		cr_assert_eq(open_with(key, s.nonce, aad, sizeof aad - 1, s.data, s.len), -EBADMSG,
			     "byte %zu", i);
		s.nonce[i] ^= 0x04;
	}
	cr_assert_eq(open_with(key, s.nonce, aad, sizeof aad - 1, s.data, s.len), 0);
	free(s.data);
}

Test(secret_box, other_associated_data_is_refused)
{
	struct sealed s = seal();
	char other[sizeof aad];

	memcpy(other, aad, sizeof aad);
	other[0] ^= 0x01; /* another workspace */
	cr_assert_eq(open_with(key, s.nonce, other, sizeof aad - 1, s.data, s.len), -EBADMSG);
	/* the same bytes split differently: "ws-1t" + "oken" */
	cr_assert_eq(open_with(key, s.nonce, "ws-1t\0oken", sizeof aad - 1, s.data, s.len),
		     -EBADMSG);
	cr_assert_eq(open_with(key, s.nonce, aad, sizeof aad - 2, s.data, s.len), -EBADMSG);
	cr_assert_eq(open_with(key, s.nonce, aad, sizeof aad - 1, s.data, s.len), 0);
	free(s.data);
}

Test(secret_box, wrong_key_and_short_input_are_refused)
{
	struct sealed s = seal();
	uint8_t other[SECRET_KEY_BYTES];

	memcpy(other, key, sizeof other);
	other[31] ^= 0x01;
	cr_assert_eq(open_with(other, s.nonce, aad, sizeof aad - 1, s.data, s.len), -EBADMSG);
	cr_assert_eq(open_with(key, s.nonce, aad, sizeof aad - 1, s.data, s.len - 1), -EBADMSG);
	cr_assert_eq(open_with(key, s.nonce, aad, sizeof aad - 1, s.data, SECRET_TAG_BYTES - 1),
		     -EBADMSG);
	cr_assert_eq(open_with(key, s.nonce, aad, sizeof aad - 1, s.data, s.len), 0);
	free(s.data);
}

/* ---- the key file ---------------------------------------------------------------------- */

static char dir[] = "/tmp/test-secret-key-XXXXXX";
static char path[PATH_MAX];

static void setup(void)
{
	cr_assert_not_null(mkdtemp(dir));
	snprintf(path, sizeof path, "%s/secrets.key", dir);
}

static void teardown(void)
{
	char p[PATH_MAX];

	unlink(path);
	snprintf(p, sizeof p, "%s/target", dir);
	unlink(p);
	snprintf(p, sizeof p, "%s/.secrets.key.new", dir);
	unlink(p);
	rmdir(dir);
}

TestSuite(secret_key, .init = setup, .fini = teardown);

static void write_key_file(const char *p, size_t n, mode_t mode)
{
	uint8_t buf[64] = { 7 };
	int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);

	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, buf, n), (ssize_t)n);
	cr_assert_eq(fchmod(fd, mode), 0);
	close(fd);
}

/* Loading must fail with err and a message holding path and what. */
static void assert_refused(int err, const char *what)
{
	struct station_error e = {};
	uint8_t k[SECRET_KEY_BYTES] = { 0x55 };

	cr_assert_eq(secret_key_load(path, k, &e), err, "%s", e.message);
	cr_assert_eq(e.err, err);
	cr_assert_not_null(strstr(e.message, path), "%s", e.message);
	cr_assert_not_null(strstr(e.message, what), "%s", e.message);
	cr_assert_eq(k[0], 0x55, "the key is untouched on failure");
}

Test(secret_key, made_at_first_start_then_the_same_key_again)
{
	struct station_error e = {};
	uint8_t a[SECRET_KEY_BYTES], b[SECRET_KEY_BYTES], zero[SECRET_KEY_BYTES] = {};
	struct stat st;

	cr_assert_eq(secret_key_load(path, a, &e), 0, "%s", e.message);
	cr_assert_eq(lstat(path, &st), 0);
	cr_assert(S_ISREG(st.st_mode));
	cr_assert_eq(st.st_mode & 07777, 0600);
	cr_assert_eq(st.st_size, SECRET_KEY_BYTES);
	cr_assert_eq(st.st_uid, geteuid());
	cr_assert_neq(memcmp(a, zero, sizeof a), 0);
	cr_assert_eq(secret_key_load(path, b, &e), 0, "%s", e.message);
	cr_assert_eq(memcmp(a, b, sizeof a), 0);
}

Test(secret_key, a_leftover_temporary_file_is_replaced)
{
	struct station_error e = {};
	uint8_t k[SECRET_KEY_BYTES];
	char tmp[PATH_MAX];

	snprintf(tmp, sizeof tmp, "%s/.secrets.key.new", dir);
	write_key_file(tmp, 5, 0644);
	cr_assert_eq(secret_key_load(path, k, &e), 0, "%s", e.message);
	cr_assert_eq(access(tmp, F_OK), -1);
}

Test(secret_key, mode_0644_is_refused)
{
	write_key_file(path, SECRET_KEY_BYTES, 0644);
	assert_refused(-EPERM, "mode 0644, not 0600");
	cr_assert_eq(chmod(path, 0600), 0); /* positive control: the same file, fixed */
	struct station_error e = {};
	uint8_t k[SECRET_KEY_BYTES];
	cr_assert_eq(secret_key_load(path, k, &e), 0, "%s", e.message);
}

Test(secret_key, mode_0400_is_refused)
{
	write_key_file(path, SECRET_KEY_BYTES, 0400);
	assert_refused(-EPERM, "mode 0400, not 0600");
}

Test(secret_key, symlink_is_refused)
{
	char target[PATH_MAX];

	snprintf(target, sizeof target, "%s/target", dir);
	write_key_file(target, SECRET_KEY_BYTES, 0600);
	cr_assert_eq(symlink(target, path), 0);
	assert_refused(-ELOOP, "symbolic link");
	/* positive control: the file it points at is a good key */
	struct station_error e = {};
	uint8_t k[SECRET_KEY_BYTES];
	cr_assert_eq(secret_key_load(target, k, &e), 0, "%s", e.message);
}

Test(secret_key, dangling_symlink_is_refused_and_not_followed)
{
	char target[PATH_MAX];

	snprintf(target, sizeof target, "%s/target", dir);
	cr_assert_eq(symlink(target, path), 0);
	assert_refused(-ELOOP, "symbolic link");
	cr_assert_eq(access(target, F_OK), -1, "nothing was made where the link points");
}

Test(secret_key, wrong_sizes_are_refused)
{
	write_key_file(path, SECRET_KEY_BYTES - 1, 0600);
	assert_refused(-EBADMSG, "31 bytes, not 32");
	write_key_file(path, SECRET_KEY_BYTES + 1, 0600);
	assert_refused(-EBADMSG, "33 bytes, not 32");
	write_key_file(path, 0, 0600);
	assert_refused(-EBADMSG, "0 bytes, not 32");
}

Test(secret_key, directory_is_refused)
{
	cr_assert_eq(mkdir(path, 0600), 0);
	assert_refused(-EPERM, "not a regular file");
	rmdir(path);
}

Test(secret_key, other_owner_is_refused)
{
	if (geteuid() != 0)
		cr_skip_test("chown needs root");
	write_key_file(path, SECRET_KEY_BYTES, 0600);
	cr_assert_eq(chown(path, 1000, 1000), 0);
	assert_refused(-EPERM, "owned by uid 1000");
}

/* ---- RFC 3339, as expiresAt takes it ------------------------------------------------------ */

Test(parse_rfc3339, accepted_forms)
{
	uint64_t t;

	cr_assert_eq(parse_rfc3339("2026-12-02T11:00:00Z", &t), 0);
	cr_assert_eq(t, 1796209200ull * 1000000);
	cr_assert_eq(parse_rfc3339("2026-12-02t12:00:00.5+01:00", &t), 0);
	cr_assert_eq(t, 1796209200ull * 1000000 + 500000);
	cr_assert_eq(parse_rfc3339("2026-12-02T05:30:00.123456789-05:30", &t), 0);
	cr_assert_eq(t, 1796209200ull * 1000000 + 123456);
	cr_assert_eq(parse_rfc3339("2028-02-29T00:00:00z", &t), 0);
	cr_assert_eq(parse_rfc3339("1970-01-01T00:00:00Z", &t), 0);
	cr_assert_eq(t, 0);
}

Test(parse_rfc3339, refused_forms)
{
	static const char *const bad[] = {
		"",
		"2026-12-02",
		"2026-12-02T11:00:00",	     /* no offset */
		"2026-12-02 11:00:00Z",	     /* a space */
		"2026-13-02T11:00:00Z",	     /* month */
		"2026-02-29T11:00:00Z",	     /* not a leap year */
		"2026-12-02T24:00:00Z",	     /* hour */
		"2026-12-02T11:60:00Z",	     /* minute */
		"2026-12-02T11:00:00.Z",     /* empty fraction */
		"2026-12-02T11:00:00+0100",  /* offset without colon */
		"2026-12-02T11:00:00Zjunk",  /* trailing */
		"1969-12-31T23:59:59Z",	     /* before the epoch */
		"12026-12-02T11:00:00Z",     /* five-digit year */
		"2026-12-02T11:00:00+24:00", /* offset hour */
		"1712345678",
	};
	uint64_t t = 42;

	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		cr_assert_eq(parse_rfc3339(bad[i], &t), -EINVAL, "\"%s\"", bad[i]);
	cr_assert_eq(t, 42);
}
