/* SPDX-License-Identifier: MIT */
/* The workspaces' CA bundle: the operator's certificates checked with OpenSSL, the image's
 * trust store read through the rootfs fd only (ca-bundle.h states the contract). */

#include "ca-bundle.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "basic/cleanup.h"
#include "basic/safe-fs.h"
#include "basic/util.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(BIO *, BIO_free)
DEFINE_TRIVIAL_CLEANUP_FUNC(X509 *, X509_free)

static const char *const store_paths[] = { CA_STORE_PATHS };
static const char *const env_names[] = { CA_ENV_NAMES };

#define PEM_BEGIN "-----BEGIN "
#define PEM_END_CERT "-----END CERTIFICATE-----"

static size_t line_len(const char *p, const char *end)
{
	const char *nl = memchr(p, '\n', (size_t)(end - p));
	return nl ? (size_t)(nl - p) : (size_t)(end - p);
}

/* The certificate of the block that starts at p (its BEGIN line) into out; *ret_next after
 * its END line. */
static int pem_block(const char *what, const char *p, const char *end, size_t line, BIO *out,
		     const char **ret_next, struct station_error *e)
{
	size_t n = line_len(p, end);
	const char *label = p + strlen(PEM_BEGIN);
	if (n < strlen(PEM_BEGIN "CERTIFICATE-----") ||
	    strncmp(label, "CERTIFICATE-----", strlen("CERTIFICATE-----")) != 0) {
		int k = (int)strcspn(label, "-\n");
		return station_error_set(e, -EINVAL, NULL,
					 "%s: line %zu: a \"%.*s\" block: only certificates "
					 "(BEGIN CERTIFICATE) belong here",
					 what, line, MIN(k, 40), label);
	}
	const char *q = p;
	while (q < end && strncmp(q, PEM_END_CERT, strlen(PEM_END_CERT)) != 0) {
		q += line_len(q, end);
		q += q < end;
	}
	if (q >= end)
		return station_error_set(e, -EINVAL, NULL,
					 "%s: line %zu: BEGIN CERTIFICATE without its END line",
					 what, line);
	q += line_len(q, end);
	_cleanup_(BIO_freep) BIO *in = BIO_new_mem_buf(p, (int)(q - p));
	ERR_clear_error();
	_cleanup_(X509_freep) X509 *cert = in ? PEM_read_bio_X509(in, NULL, NULL, NULL) : NULL;
	if (!cert) {
		const char *why = ERR_reason_error_string(ERR_peek_last_error());
		ERR_clear_error();
		return station_error_set(e, -EINVAL, NULL,
					 "%s: line %zu: the certificate does not parse (%s)", what,
					 line, why ? why : "unknown reason");
	}
	if (!PEM_write_bio_X509(out, cert))
		return station_error_set(e, -ENOMEM, NULL, "%s: out of memory", what);
	*ret_next = q;
	return 0;
}

int ca_pem_parse(const char *what, const char *text, size_t len, char **ret_pem, size_t *ret_len,
		 size_t *ret_count, struct station_error *e)
{
	if (!utf8_is_valid(text, len))
		return station_error_set(e, -EINVAL, NULL,
					 "%s: not PEM text (a NUL or non-UTF-8 byte; a DER file "
					 "converts with openssl x509 -inform der)",
					 what);
	_cleanup_(BIO_freep) BIO *out = BIO_new(BIO_s_mem());
	if (!out)
		return station_error_set(e, -ENOMEM, NULL, "%s: out of memory", what);
	const char *p = text, *end = text + len;
	size_t count = 0;
	for (size_t line = 1; p < end; line++) {
		if (strncmp(p, PEM_BEGIN, strlen(PEM_BEGIN)) == 0) {
			const char *next = NULL;
			int r = pem_block(what, p, end, line, out, &next, e);
			if (r < 0)
				return r;
			for (const char *c = p; c < next; c++)
				line += *c == '\n';
			p = next;
			count++;
		} else if (strncmp(p, "-----END ", strlen("-----END ")) == 0) {
			return station_error_set(e, -EINVAL, NULL,
						 "%s: line %zu: an END line "
						 "without its BEGIN",
						 what, line);
		}
		p += line_len(p, end);
		p += p < end;
	}
	if (count == 0)
		return station_error_set(e, -EINVAL, NULL,
					 "%s: no certificate in it (no BEGIN CERTIFICATE block)",
					 what);
	char *data = NULL;
	long n = BIO_get_mem_data(out, &data);
	char *pem = n > 0 ? strndup(data, (size_t)n) : NULL;
	if (!pem)
		return station_error_set(e, -ENOMEM, NULL, "%s: out of memory", what);
	*ret_pem = pem;
	*ret_len = (size_t)n;
	*ret_count = count;
	return 0;
}

int ca_pem_load(const char *path, char **ret_pem, size_t *ret_len, size_t *ret_count,
		struct station_error *e)
{
	_cleanup_free_ char *text = NULL;
	size_t len = 0;
	char what[PATH_MAX + 32];
	snprintf(what, sizeof what, "--workspace-ca \"%s\"", path);
	int r = read_file(path, CA_FILE_MAX, &text, &len);
	if (r < 0)
		return station_error_set(e, r, NULL, "%s: %s", what,
					 r == -EFBIG ? "larger than 1 MiB" : strerror(-r));
	return ca_pem_parse(what, text, len, ret_pem, ret_len, ret_count, e);
}

/* A regular file of at most max bytes on fd (its size as fstat() saw it); NULL otherwise. */
static char *read_bounded(int fd, size_t max, size_t *ret_len)
{
	struct stat st;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size > max)
		return NULL;
	size_t size = (size_t)st.st_size, len = 0;
	char *buf = malloc(size + 2);
	ssize_t n = 0;
	/* one byte more than size tells a file that grew since */
	while (buf && len <= size && (n = read(fd, buf + len, size + 1 - len)) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			break;
		len += (size_t)n;
	}
	if (!buf || n < 0 || len > size) {
		free(buf);
		return NULL;
	}
	buf[len] = 0;
	*ret_len = len;
	return buf;
}

/* The in-root path of fd, which was opened beneath rootfs: "/..." or NULL. */
static char *in_root_path(int fd, const char *rootfs)
{
	char link[64], host[PATH_MAX];
	snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
	ssize_t n = readlink(link, host, sizeof host - 1);
	size_t k = strlen(rootfs);
	if (n <= 0)
		return NULL;
	host[n] = 0;
	if (strncmp(host, rootfs, k) != 0 || host[k] != '/')
		return NULL;
	return strdup(host + k);
}

/* Where a bind of ours may go: under /etc or /usr, and none of our own mount points there. */
static bool target_allowed(const char *path)
{
	static const char *const ours[] = { "/etc/resolv.conf", "/etc/hosts",
					    "/usr/local/bin/git-credential-station",
					    "/usr/local/bin/station-kernel-python",
					    "/usr/local/bin/station-kernel-js" };
	if (strncmp(path, "/etc/", 5) != 0 && strncmp(path, "/usr/", 5) != 0)
		return false;
	for (size_t i = 0; i < ELEMENTSOF(ours); i++)
		if (strcmp(path, ours[i]) == 0)
			return false;
	return !strstr(path, "/../") && !strstr(path, "\n");
}

static bool target_known(char *const *targets, size_t n, const char *path)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(targets[i], path) == 0)
			return true;
	return false;
}

int ca_image_store(int rootfd, const char *rootfs, char **ret_store, size_t *ret_store_len,
		   char *ret_targets[CA_STORE_MAX_TARGETS], size_t *ret_n_targets)
{
	char *store = NULL;
	size_t store_len = 0, n = 0;
	for (size_t i = 0; i < ELEMENTSOF(store_paths); i++) {
		/* no O_NOFOLLOW: a trailing symlink resolves inside the root as well */
		_cleanup_close_ int fd = safe_openat(
			rootfd, store_paths[i], O_RDONLY | O_NONBLOCK | O_NOCTTY, 0, SAFE_IN_ROOT);
		struct stat st;
		if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
		    (uint64_t)st.st_size > CA_IMAGE_STORE_MAX)
			continue;
		if (!store)
			store = read_bounded(fd, CA_IMAGE_STORE_MAX, &store_len);
		char *target = in_root_path(fd, rootfs);
		if (target && target_allowed(target) && !target_known(ret_targets, n, target))
			ret_targets[n++] = target;
		else
			free(target);
	}
	*ret_store = store;
	*ret_store_len = store ? store_len : 0;
	*ret_n_targets = n;
	return 0;
}

int ca_host_store(char **ret, size_t *ret_len)
{
	_cleanup_close_ int root = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	*ret = NULL;
	*ret_len = 0;
	for (size_t i = 0; root >= 0 && i < ELEMENTSOF(store_paths) && !*ret; i++) {
		_cleanup_close_ int fd =
			openat(root, store_paths[i], O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
		if (fd >= 0)
			*ret = read_bounded(fd, CA_IMAGE_STORE_MAX, ret_len);
	}
	return 0;
}

int ca_bundle_join(const char *store, size_t store_len, const char *pem, size_t pem_len, char **ret,
		   size_t *ret_len)
{
	bool nl = store && store_len > 0 && store[store_len - 1] != '\n';
	size_t n = (store ? store_len : 0) + nl + pem_len;
	char *b = malloc(n + 1);
	if (!b)
		return -ENOMEM;
	if (store)
		memcpy(b, store, store_len);
	if (nl)
		b[store_len] = '\n';
	memcpy(b + n - pem_len, pem, pem_len);
	b[n] = 0;
	*ret = b;
	*ret_len = n;
	return 0;
}

void ca_env_fill(struct ca_env *env, const char *path)
{
	for (size_t i = 0; i < CA_ENV_COUNT; i++) {
		snprintf(env->bufs[i], sizeof env->bufs[i], "%s=%s", env_names[i], path);
		env->list[i] = env->bufs[i];
	}
	env->list[CA_ENV_COUNT] = NULL;
}
