/* SPDX-License-Identifier: MIT */
/* OCI image configs (src/image/manifest.c image_config_parse()): the config blob of an image,
 * whose User, Env, WorkingDir, Entrypoint and Cmd become a workspace's process. Beyond memory
 * errors: an accepted config is for linux on this machine's architecture, has an Env list
 * (maybe empty), NULL-terminated lists of strings, and diff ids that are all valid digests. */

#include <errno.h>

#include "fuzz-harness.h"
#include "image/image-internal.h"

static void check_strv(char **l, size_t max_bytes)
{
	size_t total = 0;

	for (size_t i = 0; l && l[i]; i++)
		total += strlen(l[i]) + 1;
	FUZZ_CHECK(total <= max_bytes);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char digest[] =
		"sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
	struct station_error e = {};
	struct image_config c;
	char **diff_ids = NULL;
	int r;

	if (size > IMAGE_CONFIG_MAX)
		return 0;
	r = image_config_parse((const char *)data, size, digest, &c, &diff_ids, &e);
	if (r < 0) {
		FUZZ_CHECK(r == -EINVAL || r == -ENOTSUP);
		fuzz_check_error(&e);
		return 0;
	}
	FUZZ_CHECK(c.os && strcmp(c.os, "linux") == 0);
	FUZZ_CHECK(c.architecture && strcmp(c.architecture, host_architecture()) == 0);
	FUZZ_CHECK(c.env);
	FUZZ_CHECK(!c.user || c.user[0]);
	FUZZ_CHECK(!c.workdir || c.workdir[0]);
	check_strv(c.env, size);
	check_strv(c.entrypoint, size);
	check_strv(c.cmd, size);
	FUZZ_CHECK(diff_ids);
	for (size_t i = 0; diff_ids[i]; i++)
		FUZZ_CHECK(image_digest_is_valid(diff_ids[i]));
	strv_free(diff_ids);
	image_config_done(&c);

	/* Without ret_diff_ids the same input parses the same way. */
	struct station_error e2 = {};
	FUZZ_CHECK(image_config_parse((const char *)data, size, digest, &c, NULL, &e2) == 0);
	image_config_done(&c);
	return 0;
}
