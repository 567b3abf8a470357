/* SPDX-License-Identifier: MIT */
#include "util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "cleanup.h"

int random_bytes(void *buf, size_t n)
{
	uint8_t *p = buf;

	while (n > 0) {
		ssize_t k = getrandom(p, n, 0);
		if (k < 0) {
			if (errno == EINTR)
				continue;
			return negative_errno();
		}
		p += k;
		n -= (size_t)k;
	}
	return 0;
}

int random_id(const char *prefix, size_t n_chars, char *ret, size_t ret_size)
{
	static const char alphabet[32] = "abcdefghijklmnopqrstuvwxyz234567";
	uint8_t rnd[52];
	size_t plen = prefix ? strlen(prefix) : 0;
	int r;

	if (n_chars > sizeof(rnd))
		return -EINVAL;
	if (plen + n_chars + 1 > ret_size)
		return -ENOBUFS;
	r = random_bytes(rnd, n_chars);
	if (r < 0)
		return r;
	memcpy(ret, prefix ? prefix : "", plen);
	/* 256 is a multiple of 32: masking keeps the distribution uniform */
	for (size_t i = 0; i < n_chars; i++)
		ret[plen + i] = alphabet[rnd[i] & 31];
	ret[plen + n_chars] = '\0';
	return 0;
}

void hex_encode(const void *data, size_t n, char *ret)
{
	static const char digits[] = "0123456789abcdef";
	const uint8_t *p = data;

	for (size_t i = 0; i < n; i++) {
		ret[2 * i] = digits[p[i] >> 4];
		ret[2 * i + 1] = digits[p[i] & 15];
	}
	ret[2 * n] = '\0';
}

static int unhex_char(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -EINVAL;
}

/* s must be exactly 2n hex digits (either case). */
int hex_decode(const char *s, void *ret, size_t n)
{
	uint8_t *out = ret;

	if (strlen(s) != 2 * n)
		return -EINVAL;
	for (size_t i = 0; i < 2 * n; i++)
		if (unhex_char(s[i]) < 0)
			return -EINVAL;
	for (size_t i = 0; i < n; i++)
		out[i] = (uint8_t)(unhex_char(s[2 * i]) << 4 | unhex_char(s[2 * i + 1]));
	return 0;
}

static const char b64_alphabet[] =
	"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

char *base64_encode(const void *data, size_t n)
{
	const uint8_t *p = data;
	char *ret, *o;

	if (n > (SIZE_MAX - 1) / 4 * 3 - 3)
		return NULL;
	ret = malloc((n + 2) / 3 * 4 + 1);
	if (!ret)
		return NULL;
	o = ret;
	for (size_t i = 0; i < n; i += 3) {
		uint32_t v = (uint32_t)p[i] << 16;
		if (i + 1 < n)
			v |= (uint32_t)p[i + 1] << 8;
		if (i + 2 < n)
			v |= p[i + 2];
		*o++ = b64_alphabet[v >> 18 & 63];
		*o++ = b64_alphabet[v >> 12 & 63];
		*o++ = i + 1 < n ? b64_alphabet[v >> 6 & 63] : '=';
		*o++ = i + 2 < n ? b64_alphabet[v & 63] : '=';
	}
	*o = '\0';
	return ret;
}

static int unbase64_char(char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+')
		return 62;
	if (c == '/')
		return 63;
	return -EINVAL;
}

/* Decodes one 4-character quantum; pad is the number of trailing '=' it may hold (last one
 * only). Rejects non-zero bits under the padding so every byte string has one encoding. */
static int base64_quantum(const char *q, bool last, uint8_t out[3], size_t *ret_n)
{
	size_t pad = 0;
	uint32_t v = 0;

	if (last && q[3] == '=')
		pad = q[2] == '=' ? 2 : 1;
	for (size_t i = 0; i < 4 - pad; i++) {
		int d = unbase64_char(q[i]);
		if (d < 0)
			return -EINVAL;
		v = v << 6 | (uint32_t)d;
	}
	v <<= 6 * pad;
	if ((pad == 1 && (v & 0xff)) || (pad == 2 && (v & 0xffff)))
		return -EINVAL;
	out[0] = (uint8_t)(v >> 16);
	out[1] = (uint8_t)(v >> 8);
	out[2] = (uint8_t)v;
	*ret_n = 3 - pad;
	return 0;
}

int base64_decode(const char *s, size_t len, uint8_t **ret, size_t *ret_len)
{
	_cleanup_free_ uint8_t *buf = NULL;
	size_t n = 0;

	if (len % 4 != 0)
		return -EINVAL;
	buf = malloc(len / 4 * 3 + 1);
	if (!buf)
		return -ENOMEM;
	for (size_t i = 0; i < len; i += 4) {
		size_t k;
		int r = base64_quantum(s + i, i + 4 == len, buf + n, &k);
		if (r < 0)
			return r;
		n += k;
	}
	buf[n] = 0;
	*ret = TAKE_PTR(buf);
	if (ret_len)
		*ret_len = n;
	return 0;
}

size_t utf8_char_len(const void *data, size_t n)
{
	const uint8_t *p = data;
	uint32_t cp, min;
	size_t len;

	if (n == 0 || p[0] == 0)
		return 0;
	if (p[0] < 0x80)
		return 1;
	if ((p[0] & 0xe0) == 0xc0)
		len = 2, cp = p[0] & 0x1f, min = 0x80;
	else if ((p[0] & 0xf0) == 0xe0)
		len = 3, cp = p[0] & 0x0f, min = 0x800;
	else if ((p[0] & 0xf8) == 0xf0)
		len = 4, cp = p[0] & 0x07, min = 0x10000;
	else
		return 0;
	if (len > n)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (p[i] & 0x3f);
	}
	if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return len;
}

bool utf8_is_valid(const void *data, size_t n)
{
	const uint8_t *p = data;

	while (n > 0) {
		size_t k = utf8_char_len(p, n);
		if (k == 0)
			return false;
		p += k;
		n -= k;
	}
	return true;
}

size_t utf8_cut_head(const void *data, size_t n)
{
	static const uint8_t fills[2] = { 0x80, 0xbf }; /* each lead's second byte allows one */
	const uint8_t *p = data;
	uint8_t c[4];

	for (size_t k = 1; k <= 3 && k <= n; k++) {
		if ((p[n - k] & 0xc0) == 0x80)
			continue;
		for (int f = 0; f < 2; f++) {
			memcpy(c, p + n - k, k);
			memset(c + k, fills[f], sizeof c - k);
			size_t len = utf8_char_len(c, sizeof c);
			if (len > k)
				return k;
		}
		return 0;
	}
	return 0;
}

size_t utf8_cut_tail(const void *data, size_t n)
{
	const uint8_t *p = data;
	size_t k = 0;

	while (k < n && k < 4 && (p[k] & 0xc0) == 0x80)
		k++;
	return k <= 3 ? k : 0;
}

/* SHA-256, FIPS 180-4. */

static const uint32_t sha256_k[64] = {
	0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
	0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
	0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
	0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
	0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
	0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
	0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
	0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
	0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
	0xc67178f2,
};

static inline uint32_t ror32(uint32_t x, unsigned n)
{
	return x >> n | x << (32 - n);
}

static void sha256_block(struct sha256_ctx *c, const uint8_t *p)
{
	uint32_t w[64], s[8];

	for (int i = 0; i < 16; i++)
		w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
		       (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
	for (int i = 16; i < 64; i++) {
		uint32_t s0 = ror32(w[i - 15], 7) ^ ror32(w[i - 15], 18) ^ w[i - 15] >> 3;
		uint32_t s1 = ror32(w[i - 2], 17) ^ ror32(w[i - 2], 19) ^ w[i - 2] >> 10;
		w[i] = w[i - 16] + s0 + w[i - 7] + s1;
	}
	memcpy(s, c->h, sizeof(s));
	for (int i = 0; i < 64; i++) {
		uint32_t e = s[4], a = s[0];
		uint32_t t1 = s[7] + (ror32(e, 6) ^ ror32(e, 11) ^ ror32(e, 25)) +
			      ((e & s[5]) ^ (~e & s[6])) + sha256_k[i] + w[i];
		uint32_t t2 = (ror32(a, 2) ^ ror32(a, 13) ^ ror32(a, 22)) +
			      ((a & s[1]) ^ (a & s[2]) ^ (s[1] & s[2]));
		memmove(s + 1, s, 7 * sizeof(s[0]));
		s[4] += t1;
		s[0] = t1 + t2;
	}
	for (int i = 0; i < 8; i++)
		c->h[i] += s[i];
}

void sha256_init(struct sha256_ctx *c)
{
	static const uint32_t iv[8] = { 0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
					0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19 };

	memcpy(c->h, iv, sizeof(iv));
	c->len = 0;
	c->buf_len = 0;
}

void sha256_update(struct sha256_ctx *c, const void *data, size_t n)
{
	const uint8_t *p = data;

	c->len += n;
	if (c->buf_len > 0) {
		size_t k = MIN(n, 64 - c->buf_len);
		memcpy(c->buf + c->buf_len, p, k);
		c->buf_len += k;
		p += k;
		n -= k;
		if (c->buf_len < 64)
			return;
		sha256_block(c, c->buf);
		c->buf_len = 0;
	}
	for (; n >= 64; p += 64, n -= 64)
		sha256_block(c, p);
	memcpy(c->buf, p, n);
	c->buf_len = n;
}

void sha256_final(struct sha256_ctx *c, uint8_t out[32])
{
	uint64_t bits = c->len * 8;
	uint8_t pad[72] = { 0x80 };
	size_t padlen = (c->buf_len < 56 ? 56 : 120) - c->buf_len;

	for (int i = 0; i < 8; i++)
		pad[padlen + i] = (uint8_t)(bits >> (56 - 8 * i));
	sha256_update(c, pad, padlen + 8);
	for (int i = 0; i < 8; i++) {
		out[4 * i] = (uint8_t)(c->h[i] >> 24);
		out[4 * i + 1] = (uint8_t)(c->h[i] >> 16);
		out[4 * i + 2] = (uint8_t)(c->h[i] >> 8);
		out[4 * i + 3] = (uint8_t)c->h[i];
	}
}

void sha256_hex(const void *data, size_t n, char ret[65])
{
	struct sha256_ctx c;
	uint8_t d[32];

	sha256_init(&c);
	sha256_update(&c, data, n);
	sha256_final(&c, d);
	hex_encode(d, sizeof(d), ret);
}

/* SHA-1, FIPS 180-4. */

static inline uint32_t rol32(uint32_t x, unsigned n)
{
	return x << n | x >> (32 - n);
}

static uint32_t sha1_f(int i, uint32_t b, uint32_t c, uint32_t d)
{
	if (i < 20)
		return ((b & c) | (~b & d)) + 0x5a827999;
	if (i < 40)
		return (b ^ c ^ d) + 0x6ed9eba1;
	if (i < 60)
		return ((b & c) | (b & d) | (c & d)) + 0x8f1bbcdc;
	return (b ^ c ^ d) + 0xca62c1d6;
}

static void sha1_block(struct sha1_ctx *c, const uint8_t *p)
{
	uint32_t w[80], s[5];

	for (int i = 0; i < 16; i++)
		w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
		       (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
	for (int i = 16; i < 80; i++)
		w[i] = rol32(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);
	memcpy(s, c->h, sizeof(s));
	for (int i = 0; i < 80; i++) {
		uint32_t t = rol32(s[0], 5) + sha1_f(i, s[1], s[2], s[3]) + s[4] + w[i];

		s[4] = s[3];
		s[3] = s[2];
		s[2] = rol32(s[1], 30);
		s[1] = s[0];
		s[0] = t;
	}
	for (int i = 0; i < 5; i++)
		c->h[i] += s[i];
}

void sha1_init(struct sha1_ctx *c)
{
	static const uint32_t iv[5] = { 0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476,
					0xc3d2e1f0 };

	memcpy(c->h, iv, sizeof(iv));
	c->len = 0;
	c->buf_len = 0;
}

void sha1_update(struct sha1_ctx *c, const void *data, size_t n)
{
	const uint8_t *p = data;

	c->len += n;
	if (c->buf_len > 0) {
		size_t k = MIN(n, 64 - c->buf_len);
		memcpy(c->buf + c->buf_len, p, k);
		c->buf_len += k;
		p += k;
		n -= k;
		if (c->buf_len < 64)
			return;
		sha1_block(c, c->buf);
		c->buf_len = 0;
	}
	for (; n >= 64; p += 64, n -= 64)
		sha1_block(c, p);
	memcpy(c->buf, p, n);
	c->buf_len = n;
}

void sha1_final(struct sha1_ctx *c, uint8_t out[20])
{
	uint64_t bits = c->len * 8;
	uint8_t pad[72] = { 0x80 };
	size_t padlen = (c->buf_len < 56 ? 56 : 120) - c->buf_len;

	for (int i = 0; i < 8; i++)
		pad[padlen + i] = (uint8_t)(bits >> (56 - 8 * i));
	sha1_update(c, pad, padlen + 8);
	for (int i = 0; i < 5; i++) {
		out[4 * i] = (uint8_t)(c->h[i] >> 24);
		out[4 * i + 1] = (uint8_t)(c->h[i] >> 16);
		out[4 * i + 2] = (uint8_t)(c->h[i] >> 8);
		out[4 * i + 3] = (uint8_t)c->h[i];
	}
}

void sha1_hex(const void *data, size_t n, char ret[41])
{
	struct sha1_ctx c;
	uint8_t d[20];

	sha1_init(&c);
	sha1_update(&c, data, n);
	sha1_final(&c, d);
	hex_encode(d, sizeof(d), ret);
}

bool memeq_consttime(const void *a, const void *b, size_t n)
{
	const volatile uint8_t *x = a, *y = b;
	uint8_t acc = 0;

	for (size_t i = 0; i < n; i++)
		acc |= x[i] ^ y[i];
	return acc == 0;
}

/* fd helpers */

static int fd_update_flag(int fd, int get, int set, int flag, bool on)
{
	int flags = fcntl(fd, get);

	if (flags < 0)
		return negative_errno();
	int nflags = on ? flags | flag : flags & ~flag;
	if (nflags != flags && fcntl(fd, set, nflags) < 0)
		return negative_errno();
	return 0;
}

int fd_set_nonblock(int fd, bool on)
{
	return fd_update_flag(fd, F_GETFL, F_SETFL, O_NONBLOCK, on);
}

int fd_set_cloexec(int fd, bool on)
{
	return fd_update_flag(fd, F_GETFD, F_SETFD, FD_CLOEXEC, on);
}

static void close_fd_range(unsigned first, unsigned last)
{
	/* No fd is above INT_MAX. Linux takes ~0U for "to the end", but gVisor's close_range
	 * (runsc 20221219) answers EINVAL to any last above INT_MAX, and the loop below then
	 * closes up to RLIMIT_NOFILE fds one by one (seconds under ptrace, in a vfork child). */
	if (last > INT_MAX)
		last = INT_MAX;
	if (first > last)
		return;
	if (close_range(first, last, 0) == 0)
		return;
	/* no close_range (ENOSYS) or it failed: close one by one up to the fd limit */
	long max = sysconf(_SC_OPEN_MAX);
	if (max < 0 || max > 1 << 20)
		max = 1 << 20;
	for (unsigned long fd = first; fd <= last && fd < (unsigned long)max; fd++)
		close((int)fd);
}

void signals_reset_for_exec(void)
{
	sigset_t none;

	for (int sig = 1; sig < NSIG; sig++)
		if (sig != SIGKILL && sig != SIGSTOP)
			signal(sig, SIG_DFL);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
}

/* No allocation: safe between fork() and exec(). Unsorted, duplicated or negative entries in
 * keep are fine. */
int close_all_fds_except(const int *keep, size_t n_keep)
{
	unsigned cur = 3;

	for (;;) {
		bool found = false;
		unsigned next = 0;

		for (size_t i = 0; i < n_keep; i++) {
			if (keep[i] < 0 || (unsigned)keep[i] < cur)
				continue;
			if (!found || (unsigned)keep[i] < next)
				next = (unsigned)keep[i];
			found = true;
		}
		if (!found) {
			close_fd_range(cur, ~0U);
			return 0;
		}
		if (next > cur)
			close_fd_range(cur, next - 1);
		if (next == ~0U)
			return 0;
		cur = next + 1;
	}
}

int write_all(int fd, const void *data, size_t n)
{
	const uint8_t *p = data;

	while (n > 0) {
		ssize_t k = write(fd, p, n);
		if (k < 0) {
			if (errno == EINTR)
				continue;
			return negative_errno();
		}
		if (k == 0)
			return -EIO;
		p += k;
		n -= (size_t)k;
	}
	return 0;
}

/* filesystem */

int mkdir_p(const char *path, mode_t mode)
{
	_cleanup_free_ char *p = NULL;
	struct stat st;

	if (!path || !*path)
		return -EINVAL;
	p = strdup(path);
	if (!p)
		return -ENOMEM;
	for (char *s = p + 1; *s; s++) {
		if (*s != '/')
			continue;
		*s = '\0';
		if (mkdir(p, mode) < 0 && errno != EEXIST)
			return negative_errno();
		*s = '/';
	}
	if (mkdir(p, mode) < 0 && errno != EEXIST)
		return negative_errno();
	if (stat(p, &st) < 0)
		return negative_errno();
	return S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
}

/* Where the removal started: a directory elsewhere (another device, or another mount of the
 * same device, told apart by the mount id where the kernel reports it) is not entered. */
struct rm_root {
	dev_t dev;
	uint64_t mnt_id;
	bool has_mnt_id;
};

static int rm_root_check(int dfd, struct rm_root *root, bool init)
{
	struct statx sx;

	if (statx(dfd, "", AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW, STATX_BASIC_STATS | STATX_MNT_ID,
		  &sx) < 0)
		return negative_errno();
	dev_t dev = makedev(sx.stx_dev_major, sx.stx_dev_minor);
	bool has_mnt_id = sx.stx_mask & STATX_MNT_ID;
	if (init) {
		*root = (struct rm_root){ dev, sx.stx_mnt_id, has_mnt_id };
		return 0;
	}
	if (dev != root->dev || (has_mnt_id && root->has_mnt_id && sx.stx_mnt_id != root->mnt_id))
		return -EXDEV;
	return 0;
}

static int rm_rf_children(int dfd, struct rm_root *root);

/* Removes the entry name in dfd. A directory on another mount is left alone (-EXDEV). */
static int rm_rf_entry(int dfd, const char *name, struct rm_root *root)
{
	struct stat st;
	int fd, r;

	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : negative_errno();
	if (!S_ISDIR(st.st_mode))
		return unlinkat(dfd, name, 0) < 0 && errno != ENOENT ? negative_errno() : 0;
	if (st.st_dev != root->dev)
		return -EXDEV;
	fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return negative_errno();
	r = rm_rf_children(fd, root); /* takes fd */
	if (r >= 0 && unlinkat(dfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
		r = negative_errno();
	return r;
}

/* Empties the directory dfd (consumed). Keeps going after errors; returns the first. */
static int rm_rf_children(int dfd, struct rm_root *root)
{
	struct dirent *de;
	DIR *d;
	int r;

	r = rm_root_check(dfd, root, false);
	if (r < 0) {
		close(dfd);
		return r;
	}
	d = fdopendir(dfd);
	if (!d) {
		r = negative_errno();
		close(dfd);
		return r;
	}
	while ((errno = 0, de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		int k = rm_rf_entry(dirfd(d), de->d_name, root);
		if (k < 0 && r >= 0)
			r = k;
	}
	if (errno != 0 && r >= 0)
		r = negative_errno();
	closedir(d);
	return r;
}

int rm_rf(const char *path)
{
	struct rm_root root;
	int fd, r;

	fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		if (errno == ENOENT)
			return 0;
		if (errno != ENOTDIR && errno != ELOOP)
			return negative_errno();
		/* a file or a symlink: remove the entry itself */
		return unlink(path) < 0 && errno != ENOENT ? negative_errno() : 0;
	}
	r = rm_root_check(fd, &root, true);
	if (r < 0) {
		close(fd);
		return r;
	}
	r = rm_rf_children(fd, &root);
	if (r >= 0 && rmdir(path) < 0 && errno != ENOENT)
		r = negative_errno();
	return r;
}

static int fsync_parent_dir(const char *dir)
{
	_cleanup_close_ int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0)
		return negative_errno();
	return fsync(fd) < 0 ? negative_errno() : 0;
}

static int write_tmp_file(const char *tmp, const void *data, size_t n, mode_t mode, bool sync)
{
	_cleanup_close_ int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
	int r;

	if (fd < 0)
		return negative_errno();
	if (fchmod(fd, mode) < 0) /* the umask must not narrow the requested mode */
		return negative_errno();
	r = write_all(fd, data, n);
	if (r < 0)
		return r;
	if (sync && fsync(fd) < 0)
		return negative_errno();
	return 0;
}

int write_file_atomic(const char *path, const void *data, size_t n, mode_t mode)
{
	return write_file_replace(path, data, n, mode, true);
}

int write_file_replace(const char *path, const void *data, size_t n, mode_t mode, bool sync)
{
	_cleanup_free_ char *dir = NULL, *tmp = NULL;
	const char *slash = strrchr(path, '/');
	const char *base = slash ? slash + 1 : path;
	char rnd[17];
	uint8_t b[8];
	int r;

	if (!*base)
		return -EINVAL;
	dir = slash ? strndup(path, (size_t)(slash - path)) : strdup(".");
	if (!dir)
		return -ENOMEM;
	if (!*dir) {
		free(dir);
		dir = strdup("/");
		if (!dir)
			return -ENOMEM;
	}
	r = random_bytes(b, sizeof(b));
	if (r < 0)
		return r;
	hex_encode(b, sizeof(b), rnd);
	if (asprintf(&tmp, "%s/.#%s.%s", dir, base, rnd) < 0) {
		tmp = NULL;
		return -ENOMEM;
	}
	r = write_tmp_file(tmp, data, n, mode, sync);
	if (r >= 0 && rename(tmp, path) < 0)
		r = negative_errno();
	if (r < 0) {
		unlink(tmp);
		return r;
	}
	return sync ? fsync_parent_dir(dir) : 0;
}

int read_file(const char *path, size_t max, char **ret, size_t *ret_len)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	_cleanup_free_ char *buf = NULL;
	size_t len = 0, cap = 0;

	if (fd < 0)
		return negative_errno();
	for (;;) {
		if (len == cap) {
			size_t limit = max < SIZE_MAX - 1 ? max + 1 : SIZE_MAX - 1;
			size_t ncap = cap ? cap * 2 : 4096;
			if (ncap > limit)
				ncap = limit; /* one byte past max detects a file over max */
			if (ncap <= len)
				return -EFBIG;
			char *n = realloc(buf, ncap + 1);
			if (!n)
				return -ENOMEM;
			buf = n;
			cap = ncap;
		}
		ssize_t k = read(fd, buf + len, cap - len);
		if (k < 0) {
			if (errno == EINTR)
				continue;
			return negative_errno();
		}
		if (k == 0)
			break;
		len += (size_t)k;
		if (len > max)
			return -EFBIG;
	}
	if (!buf) {
		buf = malloc(1);
		if (!buf)
			return -ENOMEM;
	}
	buf[len] = '\0';
	*ret = TAKE_PTR(buf);
	if (ret_len)
		*ret_len = len;
	return 0;
}

void format_rfc3339(uint64_t usec, char ret[32])
{
	time_t sec = (time_t)(usec / 1000000);
	struct tm tm;
	size_t n;

	if (!gmtime_r(&sec, &tm) || (n = strftime(ret, 32 - 5, "%Y-%m-%dT%H:%M:%S", &tm)) == 0) {
		snprintf(ret, 32, "1970-01-01T00:00:00.000Z");
		return;
	}
	snprintf(ret + n, 32 - n, ".%03uZ", (unsigned)(usec / 1000 % 1000));
}

/* n decimal digits at *p, advancing *p; -1 when one is not a digit. */
static int take_digits(const char **p, int n)
{
	int v = 0;

	for (int i = 0; i < n; i++, (*p)++) {
		if (**p < '0' || **p > '9')
			return -1;
		v = v * 10 + (**p - '0');
	}
	return v;
}

static bool is_leap(int y)
{
	return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

/* "+01:00", "-05:30", "Z" or "z" at *p: seconds east of UTC. */
static int take_offset(const char **p, int64_t *ret)
{
	int sign, oh, om;

	if (**p == 'Z' || **p == 'z') {
		(*p)++;
		*ret = 0;
		return 0;
	}
	if (**p != '+' && **p != '-')
		return -EINVAL;
	sign = *(*p)++ == '-' ? -1 : 1;
	oh = take_digits(p, 2);
	if (oh < 0 || oh > 23 || *(*p)++ != ':' || (om = take_digits(p, 2)) < 0 || om > 59)
		return -EINVAL;
	*ret = sign * (oh * 3600 + om * 60);
	return 0;
}

int parse_rfc3339(const char *s, uint64_t *ret)
{
	static const int mdays[] = { 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };
	struct tm tm = {};
	int64_t sec, offset;
	uint64_t frac = 0, scale = 100000;
	int y, mo, d, h, mi, se;
	const char *p = s;

	y = take_digits(&p, 4);
	if (y < 1970 || *p++ != '-' || (mo = take_digits(&p, 2)) < 1 || mo > 12 || *p++ != '-')
		return -EINVAL;
	d = take_digits(&p, 2);
	if (d < 1 || d > mdays[mo - 1] + (mo == 2 && is_leap(y)) || (*p != 'T' && *p != 't'))
		return -EINVAL;
	p++;
	h = take_digits(&p, 2);
	if (h < 0 || h > 23 || *p++ != ':' || (mi = take_digits(&p, 2)) < 0 || mi > 59 ||
	    *p++ != ':' || (se = take_digits(&p, 2)) < 0 || se > 60)
		return -EINVAL;
	if (*p == '.') {
		if (p[1] < '0' || p[1] > '9')
			return -EINVAL;
		for (p++; *p >= '0' && *p <= '9'; p++, scale /= 10)
			frac += (uint64_t)(*p - '0') * scale;
	}
	if (take_offset(&p, &offset) < 0 || *p)
		return -EINVAL;
	tm.tm_year = y - 1900;
	tm.tm_mon = mo - 1;
	tm.tm_mday = d;
	tm.tm_hour = h;
	tm.tm_min = mi;
	tm.tm_sec = se == 60 ? 59 : se; /* a leap second reads as the second before it */
	sec = (int64_t)timegm(&tm) - offset;
	if (sec < 0)
		return -EINVAL;
	*ret = (uint64_t)sec * 1000000 + frac;
	return 0;
}

int parse_u64(const char *s, uint64_t max, uint64_t *ret)
{
	uint64_t v = 0;

	if (!s || !*s)
		return -EINVAL;
	for (const char *p = s; *p; p++)
		if (*p < '0' || *p > '9')
			return -EINVAL;
	for (const char *p = s; *p; p++) {
		unsigned d = (unsigned)(*p - '0');
		if (v > (UINT64_MAX - d) / 10)
			return -ERANGE;
		v = v * 10 + d;
	}
	if (v > max)
		return -ERANGE;
	*ret = v;
	return 0;
}

void strv_free(char **l)
{
	if (!l)
		return;
	for (char **p = l; *p; p++)
		free(*p);
	free(l);
}

size_t strv_length(char *const *l)
{
	size_t n = 0;

	while (l && l[n])
		n++;
	return n;
}

int strv_push(char ***l, const char *s)
{
	size_t n = strv_length(*l);
	char **nl;
	char *copy = strdup(s);

	if (!copy)
		return -ENOMEM;
	nl = realloc(*l, (n + 2) * sizeof(char *));
	if (!nl) {
		free(copy);
		return -ENOMEM;
	}
	nl[n] = copy;
	nl[n + 1] = NULL;
	*l = nl;
	return 0;
}

int free_and_strdup(char **dst, const char *s)
{
	char *c = s ? strdup(s) : NULL;

	if (s && !c)
		return -ENOMEM;
	free(*dst);
	*dst = c;
	return 0;
}

int memdup_bytes(uint8_t **dst, const uint8_t *src, size_t n)
{
	*dst = NULL;
	if (!src || n == 0)
		return 0;
	*dst = malloc(n);
	if (!*dst)
		return -ENOMEM;
	memcpy(*dst, src, n);
	return 0;
}

void erase_and_free(char *s)
{
	if (!s)
		return;
	explicit_bzero(s, strlen(s));
	free(s);
}

size_t quote_bytes(const char *p, char *buf, size_t size)
{
	size_t o = 0, n = strlen(p), i = 0;

	if (size < 8)
		return 0;
	buf[o++] = '"';
	while (i < n && o + 8 < size) {
		unsigned char c = (unsigned char)p[i];
		size_t k = c >= 0x80 ? utf8_char_len(p + i, n - i) : 1;

		if (c >= 0x80 && k > 1) {
			memcpy(buf + o, p + i, k);
			o += k;
			i += k;
			continue;
		}
		if (c < 0x20 || c == 0x7f || c >= 0x80 || c == '"' || c == '\\')
			o += (size_t)snprintf(buf + o, size - o, "\\x%02x", c);
		else
			buf[o++] = (char)c;
		i++;
	}
	if (i < n)
		o += (size_t)snprintf(buf + o, size - o, "...");
	buf[o++] = '"';
	buf[o] = '\0';
	return o;
}
