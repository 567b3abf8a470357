/* SPDX-License-Identifier: MIT */
/* OCI documents parsed strictly: media types, digests, sizes, platform, the config's process. */

#include <errno.h>

#include "image/image-internal.h"
#include "test-image-util.h"

#define D1 "sha256:1111111111111111111111111111111111111111111111111111111111111111"
#define D2 "sha256:2222222222222222222222222222222222222222222222222222222222222222"
#define D3 "sha256:3333333333333333333333333333333333333333333333333333333333333333"

static const char manifest_ok[] =
	"{\"schemaVersion\":2,\"mediaType\":\"" MT_OCI_MANIFEST "\","
	"\"config\":{\"mediaType\":\"" MT_OCI_CONFIG "\",\"digest\":\"" D1 "\",\"size\":10},"
	"\"layers\":[{\"mediaType\":\"application/vnd.oci.image.layer.v1.tar+gzip\","
	"\"digest\":\"" D2 "\",\"size\":20},"
	"{\"mediaType\":\"application/vnd.docker.image.rootfs.diff.tar.gzip\","
	"\"digest\":\"" D3 "\",\"size\":30}]}";

Test(manifest, parses)
{
	struct oci_manifest m;
	struct station_error e = {};

	cr_assert_eq(oci_manifest_parse(manifest_ok, strlen(manifest_ok), D3, &m, &e), 0, "%s",
		     e.message);
	cr_assert_str_eq(m.config.digest, D1);
	cr_assert_eq(m.n_layers, 2);
	cr_assert_str_eq(m.layers[1].digest, D3);
	cr_assert_eq(m.layers[1].size, 30);
	cr_assert_eq(oci_document_kind(manifest_ok, strlen(manifest_ok), NULL), MEDIA_MANIFEST);
	oci_manifest_done(&m);
}

static void expect_manifest_error(const char *doc, int err, const char *msg)
{
	struct oci_manifest m = { .n_layers = 99 };
	struct station_error e = {};

	cr_assert_eq(oci_manifest_parse(doc, strlen(doc), D3, &m, &e), err, "%s", e.message);
	cr_assert_str_eq(e.message, msg);
	cr_assert_eq(m.n_layers, 99);
}

Test(manifest, refuses_bad_documents)
{
	expect_manifest_error("{\"schemaVersion\":2,\"schemaVersion\":2}", -EINVAL,
			      "manifest sha256:333333333333: invalid JSON at line 1: duplicate "
			      "object key near '\"schemaVersion\"'");
	expect_manifest_error("{\"schemaVersion\":1}", -EINVAL,
			      "manifest sha256:333333333333: schemaVersion must be 2");
	expect_manifest_error("{\"schemaVersion\":2,\"mediaType\":\"" MT_OCI_INDEX "\"}", -ENOTSUP,
			      "manifest sha256:333333333333: unexpected mediaType \"" MT_OCI_INDEX
			      "\"");
	expect_manifest_error(
		"{\"schemaVersion\":2,\"config\":{\"mediaType\":\"" MT_OCI_CONFIG "\",\"digest\":"
		"\"" D1 "\",\"size\":1},\"layers\":[{\"mediaType\":\"application/x-evil\","
		"\"digest\":\"" D2 "\",\"size\":1}]}",
		-ENOTSUP,
		"manifest sha256:333333333333: layer sha256:222222222222 has unsupported "
		"mediaType \"application/x-evil\"");
	expect_manifest_error(
		"{\"schemaVersion\":2,\"config\":{\"mediaType\":\"" MT_OCI_CONFIG "\",\"digest\":"
		"\"sha256:12\",\"size\":1},\"layers\":[]}",
		-EINVAL,
		"manifest sha256:333333333333: descriptor digest \"sha256:12\" is not "
		"sha256:<64 hex>");
	expect_manifest_error("{\"schemaVersion\":2,\"config\":{\"mediaType\":\"" MT_OCI_CONFIG
			      "\",\"digest\":"
			      "\"" D1 "\",\"size\":-1},\"layers\":[]}",
			      -EINVAL,
			      "manifest sha256:333333333333: descriptor " D1 " has no valid size");
}

static const char index_doc[] =
	"{\"schemaVersion\":2,\"manifests\":["
	"{\"mediaType\":\"" MT_OCI_MANIFEST "\",\"digest\":\"" D1 "\",\"size\":1,"
	"\"platform\":{\"os\":\"linux\",\"architecture\":\"s390x\"}},"
	"{\"mediaType\":\"" MT_OCI_MANIFEST "\",\"digest\":\"" D2 "\",\"size\":2,"
	"\"platform\":{\"os\":\"linux\",\"architecture\":\"%s\"}}]}";

Test(manifest, index_picks_this_platform)
{
	struct oci_index idx;
	struct oci_descriptor d;
	struct station_error e = {};
	char doc[1024];

	snprintf(doc, sizeof doc, index_doc, host_architecture());
	cr_assert_eq(oci_document_kind(doc, strlen(doc), NULL), MEDIA_INDEX);
	cr_assert_eq(oci_index_parse(doc, strlen(doc), "index", &idx, &e), 0, "%s", e.message);
	cr_assert_eq(oci_index_pick(&idx, "index", &d, &e), 0, "%s", e.message);
	cr_assert_str_eq(d.digest, D2);
	oci_index_done(&idx);

	snprintf(doc, sizeof doc, index_doc, "mips");
	cr_assert_eq(oci_index_parse(doc, strlen(doc), "index", &idx, &e), 0, "%s", e.message);
	cr_assert_eq(oci_index_pick(&idx, "index", &d, &e), -ENOTSUP);
	cr_assert(strstr(e.message, "index has no image manifest for linux/"), "%s", e.message);
	oci_index_done(&idx);
}

#define CONFIG_FMT                                                                                 \
	"{\"architecture\":\"%s\",\"os\":\"linux\",\"config\":{\"User\":\"node\","                 \
	"\"Env\":[\"PATH=/bin\",\"HOME=/home/node\"],\"WorkingDir\":\"/home/node/workspace\","     \
	"\"Entrypoint\":[\"/bin/sh\",\"-c\"],\"Cmd\":null},"                                       \
	"\"rootfs\":{\"type\":\"layers\",\"diff_ids\":[\"" D1 "\",\"" D2 "\"]}}"

Test(manifest, config_process)
{
	struct image_config c;
	struct station_error e = {};
	char doc[1024];
	char **diff_ids = NULL;

	snprintf(doc, sizeof doc, CONFIG_FMT, host_architecture());
	cr_assert_eq(image_config_parse(doc, strlen(doc), D3, &c, &diff_ids, &e), 0, "%s",
		     e.message);
	cr_assert_str_eq(c.user, "node");
	cr_assert_str_eq(c.workdir, "/home/node/workspace");
	cr_assert_eq(strv_length(c.env), 2);
	cr_assert_str_eq(c.env[1], "HOME=/home/node");
	cr_assert_str_eq(c.entrypoint[1], "-c");
	cr_assert_null(c.cmd);
	cr_assert_eq(strv_length(diff_ids), 2);
	cr_assert_str_eq(diff_ids[1], D2);
	strv_free(diff_ids);
	image_config_done(&c);
}

Test(manifest, config_foreign_architecture_refused)
{
	struct image_config c;
	struct station_error e = {};
	char doc[1024], msg[256];

	snprintf(doc, sizeof doc, CONFIG_FMT, "s390x");
	cr_assert_eq(image_config_parse(doc, strlen(doc), D3, &c, NULL, &e), -ENOTSUP);
	snprintf(msg, sizeof msg,
		 "image config sha256:333333333333: architecture \"s390x\" cannot run on this %s "
		 "machine",
		 host_architecture());
	cr_assert_str_eq(e.message, msg);
}

Test(manifest, config_bad_env_refused)
{
	struct image_config c;
	struct station_error e = {};
	const char *doc = "{\"architecture\":\"amd64\",\"os\":\"linux\",\"config\":{\"Env\":[1]},"
			  "\"rootfs\":{\"type\":\"layers\",\"diff_ids\":[]}}";

	if (strcmp(host_architecture(), "amd64") != 0)
		cr_skip_test("not an amd64 machine");
	cr_assert_eq(image_config_parse(doc, strlen(doc), D3, &c, NULL, &e), -EINVAL);
	cr_assert_str_eq(e.message,
			 "image config sha256:333333333333: Env must be an array of strings");
}
