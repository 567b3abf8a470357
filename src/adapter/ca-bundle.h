/* SPDX-License-Identifier: MIT */
#pragma once

/* The operator's certificate authorities in the workspaces (--workspace-ca, docs/operations.md
 * "Behind a proxy"). A workspace trusts one bundle: the CAs its userland already trusts (the
 * image's trust store for a container, the host's for the host adapter) followed by the
 * operator's. The variables that node, Python, pip, git, curl and OpenSSL read name that bundle
 * (ca_env_fill), and a container has it bound read-only over each trust-store file its image
 * has (ca_image_store), so a tool that reads the default path trusts it as well.
 *
 * The image is hostile: its trust store is opened inside the rootfs (RESOLVE_IN_ROOT: a symlink
 * or `..` cannot leave it), non-blocking (a FIFO never blocks), checked to be a regular file of
 * at most CA_IMAGE_STORE_MAX bytes before it is read; anything else is left out, and the bundle
 * then holds the operator's CAs only. Nothing here logs. */

#include <stddef.h>

#include "basic/error.h"

/* --workspace-ca: the file's size bound. */
#define CA_FILE_MAX (1u << 20)
/* An image's trust store read for its bundle (Debian's is about 220 KB). */
#define CA_IMAGE_STORE_MAX (4u << 20)
/* The trust-store files overmounted, where an image has them (Debian/Ubuntu, Alpine,
 * RHEL/Fedora; the first one the image has is the one copied into its bundle). */
#define CA_STORE_PATHS                                                                             \
	"etc/ssl/certs/ca-certificates.crt", "etc/pki/tls/certs/ca-bundle.crt", "etc/ssl/cert.pem"
#define CA_STORE_MAX_TARGETS 3
/* The variables that name the bundle. */
#define CA_ENV_NAMES                                                                               \
	"NODE_EXTRA_CA_CERTS", "REQUESTS_CA_BUNDLE", "PIP_CERT", "GIT_SSL_CAINFO",                 \
		"CURL_CA_BUNDLE", "SSL_CERT_FILE"
#define CA_ENV_COUNT 6

/* Parses text (PEM): every block must be a CERTIFICATE that OpenSSL parses; text outside the
 * blocks (comments, as in the distributions' bundles) is allowed, a NUL or non-text byte, a
 * block of another kind (a key), a block without its END line, or no certificate at all are
 * refused (-EINVAL with the problem and the line named, prefixed by what). On success
 * *ret_pem is the certificates alone, re-encoded (malloc'd, NUL-terminated), and *ret_count
 * how many there are. */
int ca_pem_parse(const char *what, const char *text, size_t len, char **ret_pem, size_t *ret_len,
		 size_t *ret_count, struct station_error *e);
/* ca_pem_parse() of the file at path (at most CA_FILE_MAX bytes). */
int ca_pem_load(const char *path, char **ret_pem, size_t *ret_len, size_t *ret_count,
		struct station_error *e);

/* What the image at rootfd (the workspace's mounted rootfs, whose host path is rootfs) trusts:
 * *ret_store the content of the first of CA_STORE_PATHS that resolves, inside the root, to a
 * regular file of at most CA_IMAGE_STORE_MAX bytes (NULL when none does), and ret_targets[]
 * the in-root paths ("/etc/...", symlinks resolved) of every one that resolves to a regular
 * file under /etc or /usr, for the bundle's read-only binds (*ret_n_targets of them, each
 * malloc'd). -ENOMEM only: whatever the image put there is otherwise left out. */
int ca_image_store(int rootfd, const char *rootfs, char **ret_store, size_t *ret_store_len,
		   char *ret_targets[CA_STORE_MAX_TARGETS], size_t *ret_n_targets);

/* What the host trusts: the first of CA_STORE_PATHS under / that is a regular file of at most
 * CA_IMAGE_STORE_MAX bytes; *ret NULL when there is none. -ENOMEM only. */
int ca_host_store(char **ret, size_t *ret_len);

/* store (may be NULL), a newline when it does not end in one, then pem: a malloc'd bundle. */
int ca_bundle_join(const char *store, size_t store_len, const char *pem, size_t pem_len, char **ret,
		   size_t *ret_len);

/* NAME=path for each of CA_ENV_NAMES, into bufs; list[] points at them, NULL-terminated. */
struct ca_env {
	char bufs[CA_ENV_COUNT][4160];
	char *list[CA_ENV_COUNT + 1];
};
void ca_env_fill(struct ca_env *env, const char *path);
