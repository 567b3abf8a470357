/* SPDX-License-Identifier: MIT */
/* OCI image indexes and Docker manifest lists (src/image/manifest.c): a layout's index.json or
 * a registry's index, read by oci_index_parse() and picked from by oci_index_pick() as the
 * import and the pull do. Beyond memory errors: every accepted entry has a valid digest and
 * NUL-terminated strings, at most 1024 entries; the pick is one of the entries, a manifest or
 * an index, and either the only entry without a platform or one for linux on this machine's
 * architecture. */

#include <errno.h>

#include "fuzz-harness.h"
#include "image/image-internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct station_error e = {}, pe = {};
	struct oci_descriptor pick;
	struct oci_index idx;
	enum media_kind k;
	int r;

	if (size > IMAGE_DOC_MAX)
		return 0;
	k = oci_document_kind((const char *)data, size, NULL);
	FUZZ_CHECK(k != MEDIA_INDEX || size > 0);

	r = oci_index_parse((const char *)data, size, "image index", &idx, &e);
	if (r < 0) {
		FUZZ_CHECK(r == -EINVAL || r == -ENOTSUP);
		fuzz_check_error(&e);
		return 0;
	}
	FUZZ_CHECK(idx.n_manifests <= 1024);
	for (size_t i = 0; i < idx.n_manifests; i++) {
		const struct oci_descriptor *d = &idx.manifests[i];
		FUZZ_CHECK(memchr(d->media_type, '\0', sizeof d->media_type));
		FUZZ_CHECK(memchr(d->os, '\0', sizeof d->os));
		FUZZ_CHECK(memchr(d->arch, '\0', sizeof d->arch));
		FUZZ_CHECK(image_digest_is_valid(d->digest));
	}
	r = oci_index_pick(&idx, "image index", &pick, &pe);
	if (r == 0) {
		bool found = false;
		enum media_kind pk = media_kind_from_string(pick.media_type);

		for (size_t i = 0; i < idx.n_manifests; i++)
			found |= memcmp(&idx.manifests[i], &pick, sizeof pick) == 0;
		FUZZ_CHECK(found);
		FUZZ_CHECK(pk == MEDIA_MANIFEST || pk == MEDIA_INDEX);
		FUZZ_CHECK((idx.n_manifests == 1 && pick.os[0] == '\0') ||
			   (strcmp(pick.os, "linux") == 0 &&
			    strcmp(pick.arch, host_architecture()) == 0));
	} else {
		FUZZ_CHECK(r == -EINVAL || r == -ENOTSUP);
		fuzz_check_error(&pe);
	}
	oci_index_done(&idx);
	return 0;
}
