/* SPDX-License-Identifier: MIT */
/* OCI documents: image index, image manifest and image config, parsed strictly with jansson
 * (duplicate keys rejected, media types checked, digests validated). */

#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>

#include "basic/cleanup.h"
#include "basic/json-util.h"
#include "image/image-internal.h"

#define LAYERS_MAX 256
#define INDEX_ENTRIES_MAX 1024

static const struct {
	const char *media_type;
	enum media_kind kind;
} media_types[] = {
	{ MT_OCI_MANIFEST, MEDIA_MANIFEST },
	{ MT_DOCKER_MANIFEST, MEDIA_MANIFEST },
	{ MT_OCI_INDEX, MEDIA_INDEX },
	{ MT_DOCKER_LIST, MEDIA_INDEX },
	{ MT_OCI_CONFIG, MEDIA_CONFIG },
	{ MT_DOCKER_CONFIG, MEDIA_CONFIG },
	{ "application/vnd.oci.image.layer.v1.tar", MEDIA_LAYER_TAR },
	{ "application/vnd.oci.image.layer.v1.tar+gzip", MEDIA_LAYER_GZIP },
	{ "application/vnd.oci.image.layer.v1.tar+zstd", MEDIA_LAYER_ZSTD },
	{ "application/vnd.docker.image.rootfs.diff.tar.gzip", MEDIA_LAYER_GZIP },
	{ "application/vnd.oci.image.layer.nondistributable.v1.tar", MEDIA_LAYER_FOREIGN },
	{ "application/vnd.oci.image.layer.nondistributable.v1.tar+gzip", MEDIA_LAYER_FOREIGN },
	{ "application/vnd.oci.image.layer.nondistributable.v1.tar+zstd", MEDIA_LAYER_FOREIGN },
	{ "application/vnd.docker.image.rootfs.foreign.diff.tar.gzip", MEDIA_LAYER_FOREIGN },
};

enum media_kind media_kind_from_string(const char *media_type)
{
	for (size_t i = 0; media_type && i < ELEMENTSOF(media_types); i++)
		if (strcmp(media_type, media_types[i].media_type) == 0)
			return media_types[i].kind;
	return MEDIA_UNKNOWN;
}

bool media_kind_is_layer(enum media_kind k)
{
	return k == MEDIA_LAYER_TAR || k == MEDIA_LAYER_GZIP || k == MEDIA_LAYER_ZSTD;
}

const char *host_architecture(void)
{
	static const struct {
		const char *machine, *arch;
	} map[] = {
		{ "x86_64", "amd64" },	  { "aarch64", "arm64" },   { "i686", "386" },
		{ "armv7l", "arm" },	  { "ppc64le", "ppc64le" }, { "s390x", "s390x" },
		{ "riscv64", "riscv64" },
	};
	struct utsname u;

	if (uname(&u) < 0)
		return "amd64";
	for (size_t i = 0; i < ELEMENTSOF(map); i++)
		if (strcmp(u.machine, map[i].machine) == 0)
			return map[i].arch;
	return "unknown";
}

static int json_parse(const char *data, size_t n, const char *what, json_t **ret,
		      struct station_error *e)
{
	json_error_t jerr;
	json_t *j = json_loadb(data, n, JSON_REJECT_DUPLICATES, &jerr);

	if (!j)
		return station_error_set(e, -EINVAL, NULL, "%s: invalid JSON at line %d: %s", what,
					 jerr.line, jerr.text);
	if (!json_is_object(j)) {
		json_decref(j);
		return station_error_set(e, -EINVAL, NULL, "%s: not a JSON object", what);
	}
	*ret = j;
	return 0;
}

/* A string member: NULL when absent; -EINVAL when present but not a string. */
static int member_string(json_t *o, const char *key, const char *what, const char **ret,
			 struct station_error *e)
{
	json_t *v = json_object_get(o, key);

	if (v && !json_is_null(v) && !json_is_string(v))
		return station_error_set(e, -EINVAL, NULL, "%s: \"%s\" must be a string", what,
					 key);
	*ret = json_is_string(v) ? json_string_value(v) : NULL;
	return 0;
}

static int schema_version_check(json_t *o, const char *what, struct station_error *e)
{
	json_t *v = json_object_get(o, "schemaVersion");

	if (!json_is_integer(v) || json_integer_value(v) != 2)
		return station_error_set(e, -EINVAL, NULL, "%s: schemaVersion must be 2", what);
	return 0;
}

static int platform_parse(json_t *o, const char *what, struct oci_descriptor *d,
			  struct station_error *e)
{
	json_t *p = json_object_get(o, "platform");
	const char *os = NULL, *arch = NULL;
	int r;

	if (!p)
		return 0;
	if (!json_is_object(p))
		return station_error_set(e, -EINVAL, NULL, "%s: platform must be an object", what);
	r = member_string(p, "os", what, &os, e);
	if (r >= 0)
		r = member_string(p, "architecture", what, &arch, e);
	if (r < 0)
		return r;
	snprintf(d->os, sizeof d->os, "%s", os ? os : "");
	snprintf(d->arch, sizeof d->arch, "%s", arch ? arch : "");
	return 0;
}

static int descriptor_parse(json_t *o, const char *what, struct oci_descriptor *ret,
			    struct station_error *e)
{
	struct oci_descriptor d = {};
	const char *mt = NULL, *digest = NULL;
	json_t *size = json_object_get(o, "size");
	int r;

	if (!json_is_object(o))
		return station_error_set(e, -EINVAL, NULL, "%s: descriptor must be an object",
					 what);
	r = member_string(o, "mediaType", what, &mt, e);
	if (r >= 0)
		r = member_string(o, "digest", what, &digest, e);
	if (r < 0)
		return r;
	if (!mt || strlen(mt) >= sizeof d.media_type)
		return station_error_set(e, -EINVAL, NULL, "%s: descriptor without a mediaType",
					 what);
	if (!image_digest_is_valid(digest))
		return station_error_set(e, -EINVAL, NULL,
					 "%s: descriptor digest \"%s\" is not sha256:<64 hex>",
					 what, digest ? digest : "");
	if (!json_is_integer(size) || json_integer_value(size) < 0)
		return station_error_set(e, -EINVAL, NULL, "%s: descriptor %s has no valid size",
					 what, digest);
	snprintf(d.media_type, sizeof d.media_type, "%s", mt);
	snprintf(d.digest, sizeof d.digest, "%s", digest);
	d.size = json_integer_value(size);
	r = platform_parse(o, what, &d, e);
	if (r < 0)
		return r;
	*ret = d;
	return 0;
}

enum media_kind oci_document_kind(const char *data, size_t n, const char *media_type)
{
	enum media_kind k = media_kind_from_string(media_type);
	_cleanup_json_ json_t *j = NULL;
	json_t *mt;

	if (k == MEDIA_MANIFEST || k == MEDIA_INDEX)
		return k;
	j = json_loadb(data, n, 0, NULL);
	if (!json_is_object(j))
		return MEDIA_UNKNOWN;
	mt = json_object_get(j, "mediaType");
	if (json_is_string(mt))
		return media_kind_from_string(json_string_value(mt));
	if (json_is_array(json_object_get(j, "manifests")))
		return MEDIA_INDEX;
	if (json_object_get(j, "layers") || json_object_get(j, "config"))
		return MEDIA_MANIFEST;
	return MEDIA_UNKNOWN;
}

void oci_index_done(struct oci_index *idx)
{
	free(idx->manifests);
	*idx = (struct oci_index){};
}

static int media_type_member_check(json_t *o, enum media_kind want, const char *what,
				   struct station_error *e)
{
	const char *mt = NULL;
	int r = member_string(o, "mediaType", what, &mt, e);

	if (r < 0)
		return r;
	if (mt && media_kind_from_string(mt) != want)
		return station_error_set(e, -ENOTSUP, NULL, "%s: unexpected mediaType \"%s\"", what,
					 mt);
	return 0;
}

int oci_index_parse(const char *data, size_t n, const char *what, struct oci_index *ret,
		    struct station_error *e)
{
	_cleanup_json_ json_t *j = NULL;
	_cleanup_free_ struct oci_descriptor *list = NULL;
	json_t *manifests, *item;
	size_t i;
	int r;

	r = json_parse(data, n, what, &j, e);
	if (r >= 0)
		r = schema_version_check(j, what, e);
	if (r >= 0)
		r = media_type_member_check(j, MEDIA_INDEX, what, e);
	if (r < 0)
		return r;
	manifests = json_object_get(j, "manifests");
	if (!json_is_array(manifests) || json_array_size(manifests) > INDEX_ENTRIES_MAX)
		return station_error_set(e, -EINVAL, NULL,
					 "%s: \"manifests\" must be an array of at most %d", what,
					 INDEX_ENTRIES_MAX);
	list = calloc(json_array_size(manifests) + 1, sizeof *list);
	if (!list)
		return -ENOMEM;
	json_array_foreach(manifests, i, item) {
		r = descriptor_parse(item, what, &list[i], e);
		if (r < 0)
			return r;
	}
	*ret = (struct oci_index){ .manifests = TAKE_PTR(list),
				   .n_manifests = json_array_size(manifests) };
	return 0;
}

static bool descriptor_is_image(const struct oci_descriptor *d)
{
	enum media_kind k = media_kind_from_string(d->media_type);

	return k == MEDIA_MANIFEST || k == MEDIA_INDEX;
}

static bool descriptor_fits_host(const struct oci_descriptor *d)
{
	return strcmp(d->os, "linux") == 0 && strcmp(d->arch, host_architecture()) == 0;
}

int oci_index_pick(const struct oci_index *idx, const char *what, struct oci_descriptor *ret,
		   struct station_error *e)
{
	const struct oci_descriptor *only = idx->n_manifests == 1 ? &idx->manifests[0] : NULL;

	if (idx->n_manifests == 0)
		return station_error_set(e, -EINVAL, NULL, "%s lists no manifests", what);
	if (only && !only->os[0] && descriptor_is_image(only)) {
		*ret = *only;
		return 0;
	}
	for (size_t i = 0; i < idx->n_manifests; i++) {
		if (descriptor_is_image(&idx->manifests[i]) &&
		    descriptor_fits_host(&idx->manifests[i])) {
			*ret = idx->manifests[i];
			return 0;
		}
	}
	return station_error_set(e, -ENOTSUP, NULL, "%s has no image manifest for linux/%s", what,
				 host_architecture());
}

void oci_manifest_done(struct oci_manifest *m)
{
	free(m->layers);
	*m = (struct oci_manifest){};
}

static int layer_descriptor_check(const struct oci_descriptor *d, const char *what,
				  struct station_error *e)
{
	enum media_kind k = media_kind_from_string(d->media_type);
	char dshort[DIGEST_SHORT_LEN];

	if (media_kind_is_layer(k))
		return 0;
	digest_short(d->digest, dshort);
	if (k == MEDIA_LAYER_FOREIGN)
		return station_error_set(e, -ENOTSUP, NULL,
					 "%s: layer %s is non-distributable (%s), which is not "
					 "supported",
					 what, dshort, d->media_type);
	return station_error_set(e, -ENOTSUP, NULL, "%s: layer %s has unsupported mediaType \"%s\"",
				 what, dshort, d->media_type);
}

static int manifest_layers_parse(json_t *layers, const char *what, struct oci_manifest *m,
				 struct station_error *e)
{
	json_t *item;
	size_t i;
	int r;

	if (!json_is_array(layers) || json_array_size(layers) > LAYERS_MAX)
		return station_error_set(e, -EINVAL, NULL,
					 "%s: \"layers\" must be an array of at most %d", what,
					 LAYERS_MAX);
	m->layers = calloc(json_array_size(layers) + 1, sizeof *m->layers);
	if (!m->layers)
		return -ENOMEM;
	json_array_foreach(layers, i, item) {
		r = descriptor_parse(item, what, &m->layers[i], e);
		if (r >= 0)
			r = layer_descriptor_check(&m->layers[i], what, e);
		if (r < 0)
			return r;
		m->n_layers++;
	}
	return 0;
}

int oci_manifest_parse(const char *data, size_t n, const char *digest, struct oci_manifest *ret,
		       struct station_error *e)
{
	_cleanup_json_ json_t *j = NULL;
	struct oci_manifest m = {};
	char what[64];
	int r;

	snprintf(what, sizeof what, "manifest %.19s", digest);
	r = json_parse(data, n, what, &j, e);
	if (r >= 0)
		r = schema_version_check(j, what, e);
	if (r >= 0)
		r = media_type_member_check(j, MEDIA_MANIFEST, what, e);
	if (r >= 0)
		r = descriptor_parse(json_object_get(j, "config"), what, &m.config, e);
	if (r >= 0 && media_kind_from_string(m.config.media_type) != MEDIA_CONFIG)
		r = station_error_set(e, -ENOTSUP, NULL,
				      "%s: config has unsupported mediaType \"%s\"", what,
				      m.config.media_type);
	if (r >= 0)
		r = manifest_layers_parse(json_object_get(j, "layers"), what, &m, e);
	if (r < 0) {
		oci_manifest_done(&m);
		return r;
	}
	*ret = m;
	return 0;
}

void image_config_done(struct image_config *c)
{
	free(c->user);
	strv_free(c->env);
	free(c->workdir);
	strv_free(c->entrypoint);
	strv_free(c->cmd);
	free(c->os);
	free(c->architecture);
	*c = (struct image_config){};
}

/* A JSON array of strings as a NULL-terminated list; NULL for null or absent. */
static int strv_from_json(json_t *v, const char *what, const char *key, char ***ret,
			  struct station_error *e)
{
	char **l = NULL;
	json_t *item;
	size_t i;

	if (!v || json_is_null(v)) {
		*ret = NULL;
		return 0;
	}
	if (!json_is_array(v))
		return station_error_set(e, -EINVAL, NULL, "%s: %s must be an array of strings",
					 what, key);
	l = calloc(1, sizeof(char *));
	if (!l)
		return -ENOMEM;
	json_array_foreach(v, i, item) {
		int r = json_is_string(item) ? strv_push(&l, json_string_value(item)) : -EINVAL;
		if (r < 0) {
			strv_free(l);
			return r == -EINVAL ? station_error_set(e, r, NULL,
								"%s: %s must be an array of "
								"strings",
								what, key) :
					      r;
		}
	}
	*ret = l;
	return 0;
}

static int dup_member(json_t *o, const char *key, const char *what, char **ret,
		      struct station_error *e)
{
	const char *s = NULL;
	int r = member_string(o, key, what, &s, e);

	if (r < 0)
		return r;
	*ret = s && *s ? strdup(s) : NULL;
	return (s && *s && !*ret) ? -ENOMEM : 0;
}

static int config_process_parse(json_t *cfg, const char *what, struct image_config *c,
				struct station_error *e)
{
	int r;

	if (cfg && !json_is_null(cfg) && !json_is_object(cfg))
		return station_error_set(e, -EINVAL, NULL, "%s: config must be an object", what);
	r = dup_member(cfg, "User", what, &c->user, e);
	if (r >= 0)
		r = dup_member(cfg, "WorkingDir", what, &c->workdir, e);
	if (r >= 0)
		r = strv_from_json(json_object_get(cfg, "Env"), what, "Env", &c->env, e);
	if (r >= 0 && !c->env)
		r = (c->env = calloc(1, sizeof(char *))) ? 0 : -ENOMEM;
	if (r >= 0)
		r = strv_from_json(json_object_get(cfg, "Entrypoint"), what, "Entrypoint",
				   &c->entrypoint, e);
	if (r >= 0)
		r = strv_from_json(json_object_get(cfg, "Cmd"), what, "Cmd", &c->cmd, e);
	return r;
}

static int config_platform_check(json_t *j, const char *what, struct image_config *c,
				 struct station_error *e)
{
	int r = dup_member(j, "os", what, &c->os, e);

	if (r >= 0)
		r = dup_member(j, "architecture", what, &c->architecture, e);
	if (r < 0)
		return r;
	if (!c->os || strcmp(c->os, "linux") != 0)
		return station_error_set(e, -ENOTSUP, NULL, "%s: os \"%s\" is not linux", what,
					 c->os ? c->os : "");
	if (!c->architecture || strcmp(c->architecture, host_architecture()) != 0)
		return station_error_set(e, -ENOTSUP, NULL,
					 "%s: architecture \"%s\" cannot run on this %s machine",
					 what, c->architecture ? c->architecture : "",
					 host_architecture());
	return 0;
}

static int diff_ids_parse(json_t *rootfs, const char *what, char ***ret, struct station_error *e)
{
	json_t *type = json_object_get(rootfs, "type");
	char **ids = NULL;
	int r;

	if (!json_is_object(rootfs) || !json_is_string(type) ||
	    strcmp(json_string_value(type), "layers") != 0)
		return station_error_set(e, -EINVAL, NULL,
					 "%s: rootfs must be {\"type\": \"layers\", …}", what);
	r = strv_from_json(json_object_get(rootfs, "diff_ids"), what, "rootfs.diff_ids", &ids, e);
	if (r < 0)
		return r;
	for (size_t i = 0; ids && ids[i]; i++)
		if (!image_digest_is_valid(ids[i])) {
			r = station_error_set(e, -EINVAL, NULL,
					      "%s: diff id \"%s\" is not sha256:<64 hex>", what,
					      ids[i]);
			strv_free(ids);
			return r;
		}
	*ret = ids ? ids : calloc(1, sizeof(char *));
	return *ret ? 0 : -ENOMEM;
}

int image_config_parse(const char *data, size_t n, const char *digest, struct image_config *ret,
		       char ***ret_diff_ids, struct station_error *e)
{
	_cleanup_json_ json_t *j = NULL;
	struct image_config c = {};
	char **diff_ids = NULL;
	char what[64];
	int r;

	snprintf(what, sizeof what, "image config %.19s", digest);
	r = json_parse(data, n, what, &j, e);
	if (r >= 0)
		r = config_platform_check(j, what, &c, e);
	if (r >= 0)
		r = config_process_parse(json_object_get(j, "config"), what, &c, e);
	if (r >= 0)
		r = diff_ids_parse(json_object_get(j, "rootfs"), what, &diff_ids, e);
	if (r < 0) {
		image_config_done(&c);
		return r;
	}
	*ret = c;
	if (ret_diff_ids)
		*ret_diff_ids = diff_ids;
	else
		strv_free(diff_ids);
	return 0;
}
