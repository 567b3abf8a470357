/* SPDX-License-Identifier: MIT */
/* OCI and Docker image manifests (src/image/manifest.c): what a registry or a layout hands
 * over, read by oci_document_kind() and oci_manifest_parse() as the import and the pull do.
 * Beyond memory errors: an accepted manifest has a config descriptor of a config media type
 * and only layer descriptors, every digest sha256:<64 lower-case hex>, at most 256 layers; a
 * refusal is -EINVAL or -ENOTSUP with a message. */

#include <errno.h>

#include "fuzz-harness.h"
#include "image/image-internal.h"

static void check_descriptor(const struct oci_descriptor *d)
{
	FUZZ_CHECK(memchr(d->media_type, '\0', sizeof d->media_type));
	FUZZ_CHECK(image_digest_is_valid(d->digest));
	FUZZ_CHECK(d->size <= INT64_MAX);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char digest[] =
		"sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
	struct station_error e = {};
	struct oci_manifest m;
	enum media_kind k;
	int r;

	if (size > IMAGE_DOC_MAX)
		return 0;
	k = oci_document_kind((const char *)data, size, NULL);
	FUZZ_CHECK(k == MEDIA_UNKNOWN || k == MEDIA_MANIFEST || k == MEDIA_INDEX ||
		   k == MEDIA_CONFIG || media_kind_is_layer(k) || k == MEDIA_LAYER_FOREIGN);
	FUZZ_CHECK(oci_document_kind((const char *)data, size, MT_OCI_MANIFEST) == MEDIA_MANIFEST);

	r = oci_manifest_parse((const char *)data, size, digest, &m, &e);
	if (r == 0) {
		check_descriptor(&m.config);
		FUZZ_CHECK(media_kind_from_string(m.config.media_type) == MEDIA_CONFIG);
		FUZZ_CHECK(m.n_layers <= 256);
		for (size_t i = 0; i < m.n_layers; i++) {
			check_descriptor(&m.layers[i]);
			FUZZ_CHECK(media_kind_is_layer(
				media_kind_from_string(m.layers[i].media_type)));
		}
		oci_manifest_done(&m);
	} else {
		FUZZ_CHECK(r == -EINVAL || r == -ENOTSUP);
		fuzz_check_error(&e);
	}
	return 0;
}
