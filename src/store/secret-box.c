/* SPDX-License-Identifier: MIT */
/* AES-256-GCM sealing of secret values and the key file they are sealed under. */

#include "store/secret-box.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "basic/cleanup.h"
#include "basic/util.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(EVP_CIPHER_CTX *, EVP_CIPHER_CTX_free)

/* The directory part of path and its last component, split at the last '/'. */
static int path_split(const char *path, char **ret_dir, const char **ret_base)
{
	const char *slash = strrchr(path, '/');
	char *dir;

	if (!slash || !slash[1])
		return -EINVAL;
	dir = slash == path ? strdup("/") : strndup(path, (size_t)(slash - path));
	if (!dir)
		return -ENOMEM;
	*ret_dir = dir;
	*ret_base = slash + 1;
	return 0;
}

/* A new key, written to a temporary file and renamed to base without replacing anything. */
static int key_create(int dfd, const char *base)
{
	_cleanup_close_ int fd = -1;
	char tmp[NAME_MAX + 1];
	uint8_t key[SECRET_KEY_BYTES];
	int r;

	if (snprintf(tmp, sizeof tmp, ".%s.new", base) >= (int)sizeof tmp)
		return -ENAMETOOLONG;
	/* a leftover of a start that died before the rename: never read, only replaced */
	if (unlinkat(dfd, tmp, 0) < 0 && errno != ENOENT)
		return -errno;
	fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	r = random_bytes(key, sizeof key);
	if (r >= 0 && fchmod(fd, 0600) < 0)
		r = -errno;
	if (r >= 0)
		r = write_all(fd, key, sizeof key);
	explicit_bzero(key, sizeof key);
	if (r >= 0 && fsync(fd) < 0)
		r = -errno;
	if (r >= 0 && renameat2(dfd, tmp, dfd, base, RENAME_NOREPLACE) < 0)
		r = -errno;
	if (r < 0) {
		unlinkat(dfd, tmp, 0);
		return r;
	}
	return fsync(dfd) < 0 ? -errno : 0;
}

/* The checks of the header, in the order a person fixes them. */
static int key_check(int fd, const char *path, struct station_error *e)
{
	struct stat st;

	if (fstat(fd, &st) < 0)
		return station_error_set(e, -errno, NULL, "cannot stat the secrets key \"%s\": %m",
					 path);
	if (!S_ISREG(st.st_mode))
		return station_error_set(e, -EPERM, NULL,
					 "secrets key \"%s\" is not a regular file", path);
	if (st.st_uid != geteuid())
		return station_error_set(e, -EPERM, NULL,
					 "secrets key \"%s\" is owned by uid %u, not by the "
					 "controller's uid %u",
					 path, (unsigned)st.st_uid, (unsigned)geteuid());
	if ((st.st_mode & 07777) != 0600)
		return station_error_set(e, -EPERM, NULL,
					 "secrets key \"%s\" has mode %04o, not 0600 (readable "
					 "by others)",
					 path, (unsigned)(st.st_mode & 07777));
	if (st.st_size != SECRET_KEY_BYTES)
		return station_error_set(e, -EBADMSG, NULL,
					 "secrets key \"%s\" is %lld bytes, not %d", path,
					 (long long)st.st_size, SECRET_KEY_BYTES);
	return 0;
}

int secret_key_load(const char *path, uint8_t key[SECRET_KEY_BYTES], struct station_error *e)
{
	_cleanup_free_ char *dir = NULL;
	_cleanup_close_ int dfd = -1, fd = -1;
	uint8_t buf[SECRET_KEY_BYTES];
	const char *base;
	ssize_t n;
	int r;

	r = path_split(path, &dir, &base);
	if (r < 0)
		return station_error_set(e, r, NULL, "bad secrets key path \"%s\"", path);
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return station_error_set(e, -errno, NULL, "cannot open \"%s\": %m", dir);
	fd = openat(dfd, base, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT) {
		r = key_create(dfd, base);
		if (r < 0)
			return station_error_set(e, r, NULL,
						 "cannot create the secrets key \"%s\": %s", path,
						 strerror(-r));
		fd = openat(dfd, base, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	}
	if (fd < 0 && errno == ELOOP)
		return station_error_set(e, -ELOOP, NULL,
					 "secrets key \"%s\" is a symbolic link, not the file the "
					 "controller made",
					 path);
	if (fd < 0)
		return station_error_set(e, -errno, NULL, "cannot open the secrets key \"%s\": %m",
					 path);
	r = key_check(fd, path, e);
	if (r < 0)
		return r;
	n = pread(fd, buf, sizeof buf, 0);
	if (n != SECRET_KEY_BYTES) {
		explicit_bzero(buf, sizeof buf);
		return station_error_set(e, n < 0 ? -errno : -EBADMSG, NULL,
					 "cannot read the secrets key \"%s\": %s", path,
					 n < 0 ? strerror(errno) : "short read");
	}
	memcpy(key, buf, sizeof buf);
	explicit_bzero(buf, sizeof buf);
	return 0;
}

int secret_box_seal(const uint8_t key[SECRET_KEY_BYTES], const void *aad, size_t aad_len,
		    const void *plain, size_t n, uint8_t ret_nonce[SECRET_NONCE_BYTES],
		    uint8_t **ret_sealed, size_t *ret_len)
{
	_cleanup_(EVP_CIPHER_CTX_freep) EVP_CIPHER_CTX *ctx = NULL;
	_cleanup_free_ uint8_t *out = NULL;
	uint8_t nonce[SECRET_NONCE_BYTES];
	int len, r;

	if (n > INT_MAX - SECRET_TAG_BYTES || aad_len > INT_MAX)
		return -E2BIG;
	r = random_bytes(nonce, sizeof nonce);
	if (r < 0)
		return r;
	out = malloc(n + SECRET_TAG_BYTES);
	ctx = EVP_CIPHER_CTX_new();
	if (!out || !ctx)
		return -ENOMEM;
	if (EVP_EncryptInit_ex(ctx, EVP_aes_256_gcm(), NULL, NULL, NULL) != 1 ||
	    EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_IVLEN, SECRET_NONCE_BYTES, NULL) != 1 ||
	    EVP_EncryptInit_ex(ctx, NULL, NULL, key, nonce) != 1 ||
	    EVP_EncryptUpdate(ctx, NULL, &len, aad, (int)aad_len) != 1 ||
	    EVP_EncryptUpdate(ctx, out, &len, plain, (int)n) != 1 || (size_t)len != n ||
	    EVP_EncryptFinal_ex(ctx, out + len, &len) != 1 || len != 0 ||
	    EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, SECRET_TAG_BYTES, out + n) != 1)
		return -EIO;
	memcpy(ret_nonce, nonce, sizeof nonce);
	*ret_sealed = TAKE_PTR(out);
	*ret_len = n + SECRET_TAG_BYTES;
	return 0;
}

int secret_box_open(const uint8_t key[SECRET_KEY_BYTES], const uint8_t nonce[SECRET_NONCE_BYTES],
		    const void *aad, size_t aad_len, const uint8_t *sealed, size_t len,
		    char **ret_plain, size_t *ret_len)
{
	_cleanup_(EVP_CIPHER_CTX_freep) EVP_CIPHER_CTX *ctx = NULL;
	size_t n;
	char *out;
	int k, r = 0;

	if (len < SECRET_TAG_BYTES)
		return -EBADMSG;
	n = len - SECRET_TAG_BYTES;
	if (n > INT_MAX || aad_len > INT_MAX)
		return -E2BIG;
	out = malloc(n + 1);
	ctx = EVP_CIPHER_CTX_new();
	if (!out || !ctx) {
		free(out);
		return -ENOMEM;
	}
	if (EVP_DecryptInit_ex(ctx, EVP_aes_256_gcm(), NULL, NULL, NULL) != 1 ||
	    EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_IVLEN, SECRET_NONCE_BYTES, NULL) != 1 ||
	    EVP_DecryptInit_ex(ctx, NULL, NULL, key, nonce) != 1 ||
	    EVP_DecryptUpdate(ctx, NULL, &k, aad, (int)aad_len) != 1 ||
	    EVP_DecryptUpdate(ctx, (uint8_t *)out, &k, sealed, (int)n) != 1 || (size_t)k != n ||
	    EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, SECRET_TAG_BYTES,
				(void *)(sealed + n)) != 1)
		r = -EIO;
	else if (EVP_DecryptFinal_ex(ctx, (uint8_t *)out + n, &k) != 1)
		r = -EBADMSG; /* the tag does not match: nothing of out is released */
	if (r < 0) {
		explicit_bzero(out, n);
		free(out);
		return r;
	}
	out[n] = '\0';
	*ret_plain = out;
	*ret_len = n;
	return 0;
}
