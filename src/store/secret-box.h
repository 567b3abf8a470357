/* SPDX-License-Identifier: MIT */
#pragma once

/* Secrets at rest: AES-256-GCM (OpenSSL libcrypto) with a random 96-bit nonce per sealing and
 * caller-chosen associated data, under one key kept in a file of its own beside the store.
 *
 * The key file is the one thing that turns the store's ciphertext back into tokens, so it is
 * taken only when it is exactly what the controller made: a regular file (never a symlink,
 * opened O_NOFOLLOW), owned by the controller's uid, mode exactly 0600, exactly 32 bytes.
 * Anything else refuses to load with a message naming the file and the problem. */

#include <stddef.h>
#include <stdint.h>

#include "basic/error.h"

#define SECRET_KEY_BYTES 32
#define SECRET_NONCE_BYTES 12
#define SECRET_TAG_BYTES 16

/* Reads the key at path into key. When path does not exist it is made first: 32 bytes from
 * getrandom() written to a temporary file (O_CREAT|O_EXCL, 0600), fsynced, renamed into place
 * without replacing anything, and the directory fsynced. e says what is wrong (naming path):
 * -ELOOP a symlink, -EPERM not a regular file, a wrong owner or mode, -EBADMSG a wrong size,
 * or the errno of a failed call. key is untouched on failure. */
int secret_key_load(const char *path, uint8_t key[SECRET_KEY_BYTES], struct station_error *e);

/* Encrypts n bytes of plain (n may be 0) under key with aad as associated data. *ret_nonce is
 * the fresh nonce; *ret_sealed (malloc'd, n + SECRET_TAG_BYTES) is the ciphertext followed by
 * the tag. -ENOMEM, -EIO (libcrypto failed), or random_bytes()'s error. */
int secret_box_seal(const uint8_t key[SECRET_KEY_BYTES], const void *aad, size_t aad_len,
		    const void *plain, size_t n, uint8_t ret_nonce[SECRET_NONCE_BYTES],
		    uint8_t **ret_sealed, size_t *ret_len);

/* The reverse: *ret_plain is the plaintext, malloc'd with a NUL after its *ret_len bytes (wipe
 * it with explicit_bzero() before freeing). -EBADMSG when the ciphertext, nonce, tag, aad or
 * key does not match (nothing is returned then), -ENOMEM, -EIO. */
int secret_box_open(const uint8_t key[SECRET_KEY_BYTES], const uint8_t nonce[SECRET_NONCE_BYTES],
		    const void *aad, size_t aad_len, const uint8_t *sealed, size_t len,
		    char **ret_plain, size_t *ret_len);
