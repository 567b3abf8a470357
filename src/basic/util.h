/* SPDX-License-Identifier: MIT */
#pragma once

/* libc-only helpers shared by every binary. Functions return -errno on failure. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "basic/cleanup.h"
#include <sys/types.h>

/* getrandom(), retried until filled. */
int random_bytes(void *buf, size_t n);

/* A random id: prefix followed by n_chars characters of [a-z2-7] (5 bits each). n_chars <= 52.
 * ret must hold strlen(prefix) + n_chars + 1 bytes. */
int random_id(const char *prefix, size_t n_chars, char *ret, size_t ret_size);

/* Lower-case hex of n bytes into ret (2n+1 bytes). */
void hex_encode(const void *data, size_t n, char *ret);
int hex_decode(const char *s, void *ret, size_t n);

/* Standard base64 with padding. base64_encode returns a malloc'd NUL-terminated string. */
char *base64_encode(const void *data, size_t n);
int base64_decode(const char *s, size_t len, uint8_t **ret, size_t *ret_len);

/* True when data[0..n) is well-formed UTF-8 (no overlongs, no surrogates, <= U+10FFFF) and
 * contains no NUL byte. */
bool utf8_is_valid(const void *data, size_t n);
/* Length (1-4) of the well-formed, non-NUL UTF-8 sequence at data[0], 0 when there is none. */
size_t utf8_char_len(const void *data, size_t n);
/* For a cut after data[0..n): how many of its last bytes (0-3) begin a character that bytes
 * after the cut could complete. 0 when it ends on a character boundary, or in bytes no
 * continuation could make well-formed. */
size_t utf8_cut_head(const void *data, size_t n);
/* For a cut before data[0..n): how many of its first bytes (0-3) are continuation bytes that
 * finish a character begun before the cut. 0 when there are none, or more than 3. */
size_t utf8_cut_tail(const void *data, size_t n);

/* SHA-256. */
struct sha256_ctx {
	uint32_t h[8];
	uint64_t len;
	uint8_t buf[64];
	size_t buf_len;
};
void sha256_init(struct sha256_ctx *c);
void sha256_update(struct sha256_ctx *c, const void *data, size_t n);
void sha256_final(struct sha256_ctx *c, uint8_t out[32]);
void sha256_hex(const void *data, size_t n, char ret[65]);

/* SHA-1, for protocols that name it (the WebSocket handshake); never for integrity. */
struct sha1_ctx {
	uint32_t h[5];
	uint64_t len;
	uint8_t buf[64];
	size_t buf_len;
};
void sha1_init(struct sha1_ctx *c);
void sha1_update(struct sha1_ctx *c, const void *data, size_t n);
void sha1_final(struct sha1_ctx *c, uint8_t out[20]);
void sha1_hex(const void *data, size_t n, char ret[41]);

/* Constant-time comparison of n bytes. */
bool memeq_consttime(const void *a, const void *b, size_t n);
/* Wipes a NUL-terminated secret (explicit_bzero) and frees it. NULL is fine. */
void erase_and_free(char *s);

/* Filesystem. */
int mkdir_p(const char *path, mode_t mode);
/* Removes path and everything below it, without following symlinks or crossing mounts. */
int rm_rf(const char *path);
/* Writes data to path via a temporary file in the same directory, fsync and rename. */
int write_file_atomic(const char *path, const void *data, size_t n, mode_t mode);
/* The same, the fsync()s (the file's and its directory's) only when sync: the caller makes it
 * durable later, or knows that it need not be. */
int write_file_replace(const char *path, const void *data, size_t n, mode_t mode, bool sync);
int read_file(const char *path, size_t max, char **ret, size_t *ret_len);

/* fd helpers. */
int fd_set_nonblock(int fd, bool on);
int fd_set_cloexec(int fd, bool on);
/* Closes every fd >= 3 except those listed (close_range where available). */
int close_all_fds_except(const int *keep, size_t n_keep);
/* For a child between fork and exec: every signal to its default disposition, then none
 * blocked (an ignored signal and the mask both survive execve; the controller blocks the ones
 * its signalfd takes). Dispositions first: a signal let through never runs one of the parent's
 * handlers. Async-signal-safe. */
void signals_reset_for_exec(void);
/* Full write, retrying on EINTR and short writes (blocking fds). */
int write_all(int fd, const void *data, size_t n);

/* Formats CLOCK_REALTIME microseconds as RFC 3339 UTC with milliseconds:
 * "2026-11-29T10:40:07.123Z". ret must hold 32 bytes. */
void format_rfc3339(uint64_t usec, char ret[32]);
/* RFC 3339 ("2026-12-02T11:00:00Z", "2026-12-02T12:00:00.5+01:00"; 1970 or later) to
 * CLOCK_REALTIME microseconds; digits beyond microseconds are dropped. -EINVAL otherwise. */
int parse_rfc3339(const char *s, uint64_t *ret);

/* Parses a non-negative decimal integer <= max; -EINVAL / -ERANGE. */
int parse_u64(const char *s, uint64_t max, uint64_t *ret);

/* NULL-terminated string vectors: free (NULL is fine), count, append a copy. */
void strv_free(char **l);
DEFINE_TRIVIAL_CLEANUP_FUNC(char **, strv_free);
#define _cleanup_strv_free_ _cleanup_(strv_freep)
size_t strv_length(char *const *l);
int strv_push(char ***l, const char *s);

/* Replaces *dst (freed) with a copy of s (NULL: none); on -ENOMEM *dst is untouched. */
int free_and_strdup(char **dst, const char *s);

/* *dst = a copy of the n bytes at src, NULL when there are none; -ENOMEM (*dst NULL). */
int memdup_bytes(uint8_t **dst, const uint8_t *src, size_t n);

/* s in double quotes for a message: bytes that are not printable UTF-8, '"' and '\\' as \xNN,
 * cut with "..." to fit size (at least 8; nothing written below). Returns the length. */
size_t quote_bytes(const char *s, char *buf, size_t size);
