/* SPDX-License-Identifier: MIT */
/* Image references: "name@sha256:<64 hex>" or a bare "sha256:<64 hex>", nothing else. */

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "image/image-internal.h"

#define SHA256_PREFIX "sha256:"

static bool is_lower_hex(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

bool image_digest_is_valid(const char *digest)
{
	size_t plen = strlen(SHA256_PREFIX);

	if (!digest || strncmp(digest, SHA256_PREFIX, plen) != 0 || strlen(digest) != plen + 64)
		return false;
	for (size_t i = plen; i < plen + 64; i++)
		if (!is_lower_hex(digest[i]))
			return false;
	return true;
}

void digest_short(const char *digest, char ret[DIGEST_SHORT_LEN])
{
	snprintf(ret, DIGEST_SHORT_LEN, "%.19s", digest);
}

static bool is_lower_alnum(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

/* A repository path component: [a-z0-9] runs joined by '.', '_' or '-'. */
static bool path_component_is_valid(const char *c, size_t n)
{
	if (n == 0 || !is_lower_alnum(c[0]) || !is_lower_alnum(c[n - 1]))
		return false;
	for (size_t i = 0; i < n; i++)
		if (!is_lower_alnum(c[i]) && !strchr("._-", c[i]))
			return false;
	return true;
}

/* A registry host: letters, digits, '.', '-', and an optional ":port". */
static bool host_is_valid(const char *h, size_t n)
{
	const char *colon = memchr(h, ':', n);
	size_t hn = colon ? (size_t)(colon - h) : n;

	if (hn == 0)
		return false;
	for (size_t i = 0; i < hn; i++)
		if (!(is_lower_alnum(h[i]) || (h[i] >= 'A' && h[i] <= 'Z') || strchr(".-", h[i])))
			return false;
	if (colon) {
		if (colon + 1 == h + n || n - hn - 1 > 5)
			return false;
		for (const char *p = colon + 1; p < h + n; p++)
			if (*p < '0' || *p > '9')
				return false;
	}
	return true;
}

static bool component_is_host(const char *c, size_t n)
{
	return memchr(c, '.', n) || memchr(c, ':', n) || (n == 9 && !memcmp(c, "localhost", 9));
}

static bool name_is_valid(const char *name)
{
	const char *p = name;
	bool first = true;

	for (;;) {
		const char *slash = strchr(p, '/');
		size_t n = slash ? (size_t)(slash - p) : strlen(p);
		bool host = first && slash && component_is_host(p, n);

		if (host ? !host_is_valid(p, n) : !path_component_is_valid(p, n))
			return false;
		if (!slash)
			return true;
		p = slash + 1;
		first = false;
	}
}

static int digest_check(const char *ref, const char *digest, struct station_error *e)
{
	const char *colon = strchr(digest, ':');

	if (image_digest_is_valid(digest))
		return 0;
	if (colon && strncmp(digest, SHA256_PREFIX, strlen(SHA256_PREFIX)) != 0)
		return station_error_set(e, -EINVAL, "image",
					 "image reference \"%s\": unsupported digest algorithm "
					 "\"%.*s\" (only sha256 is supported)",
					 ref, (int)(colon - digest), digest);
	return station_error_set(e, -EINVAL, "image",
				 "image reference \"%s\": digest must be sha256: followed by 64 "
				 "lower-case hex digits",
				 ref);
}

/* Hex of a digest length (another algorithm's), not a tag. */
static bool looks_like_digest(const char *hex)
{
	size_t n = strlen(hex);

	if (n < 32)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!is_lower_hex(hex[i]) && !(hex[i] >= 'A' && hex[i] <= 'F'))
			return false;
	return true;
}

/* No '@': a bare digest, or a name with a tag or with nothing, both refused. */
static int ref_parse_bare(const char *s, struct image_ref *ref, struct station_error *e)
{
	const char *slash = strrchr(s, '/');
	const char *colon = strchr(slash ? slash : s, ':');

	if (!slash && colon &&
	    (!strncmp(s, SHA256_PREFIX, strlen(SHA256_PREFIX)) || looks_like_digest(colon + 1))) {
		int r = digest_check(s, s, e);
		if (r < 0)
			return r;
		snprintf(ref->digest, sizeof ref->digest, "%s", s);
		return 0;
	}
	if (colon)
		return station_error_set(e, -EINVAL, "image",
					 "image reference \"%s\" uses a tag: images are pinned by "
					 "digest, use %.*s@sha256:<64 hex>",
					 s, (int)(colon - s), s);
	return station_error_set(e, -EINVAL, "image",
				 "image reference \"%s\" has no digest: images are pinned by "
				 "digest, use %s@sha256:<64 hex>",
				 s, s);
}

int image_ref_parse(const char *s, struct image_ref *ret, struct station_error *e)
{
	struct image_ref ref = {};
	const char *at;
	size_t name_len;
	int r;

	if (!s || !*s)
		return station_error_set(e, -EINVAL, "image", "image reference is empty");
	at = strchr(s, '@');
	if (!at) {
		r = ref_parse_bare(s, &ref, e);
		if (r < 0)
			return r;
		*ret = ref;
		return 0;
	}
	name_len = at - s;
	if (name_len == 0 || name_len >= sizeof ref.name)
		return station_error_set(e, -EINVAL, "image",
					 "image reference \"%s\": the name before '@' must have "
					 "1 to %d characters",
					 s, IMAGE_NAME_MAX - 1);
	memcpy(ref.name, s, name_len);
	if (strchr(strrchr(ref.name, '/') ? strrchr(ref.name, '/') : ref.name, ':'))
		return station_error_set(e, -EINVAL, "image",
					 "image reference \"%s\" has both a tag and a digest: "
					 "drop the tag, images are pinned by digest",
					 s);
	if (!name_is_valid(ref.name))
		return station_error_set(e, -EINVAL, "image",
					 "image reference \"%s\": invalid repository name \"%s\"",
					 s, ref.name);
	r = digest_check(s, at + 1, e);
	if (r < 0)
		return r;
	snprintf(ref.digest, sizeof ref.digest, "%s", at + 1);
	*ret = ref;
	return 0;
}
