/* SPDX-License-Identifier: MIT */
/* The container adapter's worker-wide pieces (runtime, image store, default profile) and the
 * image API. */

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adapter/oci-config.h"
#include "adapter/runtime.h"
#include "adapter/seccomp.h"
#include "basic/cleanup.h"
#include "basic/log.h"
#include "image/image.h"
#include "manager-internal.h"

void manager_adapters_init(struct manager *m)
{
	struct station_error e = { 0 };
	char state[PATH_MAX];
	m->actx = (struct adapter_context){
		.root = m->cfg.root,
		.agent_path = m->cfg.agent_path,
		.default_image = m->cfg.default_image,
		.default_seccomp = m->cfg.default_seccomp,
		.id_base = m->cfg.id_base,
		.host_user_set = m->cfg.host_user_set,
		.host_uid = m->cfg.host_uid,
		.host_gid = m->cfg.host_gid,
	};
	snprintf(state, sizeof state, "%s/runtime", m->cfg.root);
	if (runtime_new(m->cfg.runtime, state, &m->actx.runtime, &e) < 0) {
		snprintf(m->actx.runtime_error, sizeof m->actx.runtime_error, "%s", e.message);
		log_warn("container runtime unavailable", "runtime", m->cfg.runtime, "error",
			 e.message, NULL);
	}
	e = (struct station_error){ 0 };
	if (image_store_open(m->cfg.root, &m->actx.images, &e) < 0)
		log_warn("image store unavailable", "error", e.message, NULL);
}

static json_t *check_json(const char *name, bool ok, const char *message)
{
	return json_pack("{s:s,s:b,s:s}", "name", name, "ok", ok, "message", message);
}

/* The container adapter's pieces, each named: runtime, image store, default image, profile. */
bool manager_ready_container(struct manager *m, json_t *checks)
{
	struct station_error e = { 0 };
	_cleanup_free_ char *version = NULL;
	bool ok = m->actx.runtime && runtime_probe(m->actx.runtime, &version, &e) >= 0;
	json_array_append_new(checks, check_json("runtime", ok,
						 ok		 ? version :
						 m->actx.runtime ? e.message :
								   m->actx.runtime_error));
	bool all = ok;
	json_array_append_new(checks, check_json("images", m->actx.images != NULL,
						 m->actx.images ? "image store open" :
								  "image store unavailable"));
	all &= m->actx.images != NULL;
	if (m->cfg.default_image) {
		struct image *img = NULL;
		e = (struct station_error){ 0 };
		ok = m->actx.images &&
		     image_lookup(m->actx.images, m->cfg.default_image, &img, &e) >= 0;
		image_free(img);
		json_array_append_new(checks, check_json("image", ok,
							 ok ? m->cfg.default_image : e.message));
		all &= ok;
	}
	json_t *profile = NULL;
	struct seccomp_target target = { .caps = oci_default_caps };
	e = (struct station_error){ 0 };
	ok = m->cfg.default_seccomp &&
	     seccomp_profile_load(m->cfg.default_seccomp, &target, &profile, NULL, &e) >= 0;
	json_decref(profile);
	json_array_append_new(checks, check_json("seccompProfile", ok,
						 ok			? m->cfg.default_seccomp :
						 m->cfg.default_seccomp ? e.message :
									  "no default profile"));
	return all && ok;
}

static json_t *image_to_json(struct manager *m, const struct image *img)
{
	char ref[IMAGE_NAME_MAX + IMAGE_DIGEST_MAX + 2];
	snprintf(ref, sizeof ref, "%s%s%s", img->name ? img->name : "", img->name ? "@" : "",
		 img->digest);
	json_t *env = json_array(), *used = json_array();
	for (size_t i = 0; img->config.env && img->config.env[i]; i++)
		json_array_append_new(env, json_string(img->config.env[i]));
	for (struct workspace *ws = m->workspaces; ws; ws = ws->next) {
		const char *wi = json_string_value(json_object_get(ws->spec, "image"));
		const char *at = wi ? strrchr(wi, '@') : NULL;
		if (wi && strcmp(at ? at + 1 : wi, img->digest) == 0)
			json_array_append_new(used, json_string(ws->row.id));
	}
	json_t *o = json_pack("{s:s,s:s?,s:s,s:I,s:I,s:{s:s?,s:o,s:s?},s:o}", "digest", img->digest,
			      "name", img->name, "reference", ref, "size", (json_int_t)img->size,
			      "layers", (json_int_t)img->n_layers, "config", "user",
			      img->config.user, "env", env, "workdir", img->config.workdir,
			      "usedBy", used);
	if (o)
		json_set_time(o, "createdAt", img->created);
	return o;
}

/* What the client sent was wrong (a bad layout, a digest mismatch, a refused layer entry, a
 * missing path): 400. The store's own failures keep their errno. */
static int image_error(int r, const char *field, struct station_error *e)
{
	static const int client_errors[] = { -EBADMSG, -EPERM,	-ENOENT, -ENOTDIR,
					     -EINVAL,  -EPROTO, -ENOTSUP };
	for (size_t i = 0; i < ELEMENTSOF(client_errors); i++)
		if (r == client_errors[i] && e && e->err != -EHOSTDOWN) {
			e->err = -EINVAL;
			if (!e->field[0])
				snprintf(e->field, sizeof e->field, "%s", field);
			return -EINVAL;
		}
	return r;
}

static int images_available(struct manager *m, struct station_error *e)
{
	if (!m->actx.images)
		return station_error_set(e, -EHOSTDOWN, NULL, "the image store is unavailable");
	return 0;
}

int manager_image_import(struct manager *m, const char *path, const char *name, json_t **ret,
			 struct station_error *e)
{
	struct image *img = NULL;
	int r = images_available(m, e);
	if (r >= 0)
		r = image_import_layout(m->actx.images, path, name, &img, e);
	if (r < 0)
		return image_error(r, "path", e);
	log_info("image imported", "digest", img->digest, "path", path, NULL);
	*ret = image_to_json(m, img);
	image_free(img);
	return 0;
}

int manager_image_pull(struct manager *m, const char *ref, const char *registry, bool plain_http,
		       json_t **ret, struct station_error *e)
{
	struct image *img = NULL;
	struct image_pull_options o = { .registry = registry, .plain_http = plain_http };
	int r = images_available(m, e);
	if (r >= 0)
		r = image_pull(m->actx.images, ref, &o, &img, e);
	if (r < 0)
		return image_error(r, "reference", e);
	log_info("image pulled", "digest", img->digest, "reference", ref, NULL);
	*ret = image_to_json(m, img);
	image_free(img);
	return 0;
}

int manager_image_list(struct manager *m, json_t **ret, struct station_error *e)
{
	struct image *imgs = NULL;
	size_t n = 0;
	int r = images_available(m, e);
	if (r >= 0)
		r = image_list(m->actx.images, &imgs, &n);
	if (r < 0)
		return station_error_set(e, r, NULL, "cannot list images: %s", strerror(-r));
	json_t *a = json_array();
	for (size_t i = 0; i < n; i++)
		json_array_append_new(a, image_to_json(m, &imgs[i]));
	image_free_array(imgs, n);
	*ret = json_pack("{s:o}", "images", a);
	return 0;
}

int manager_image_remove(struct manager *m, const char *ref, struct station_error *e)
{
	struct image *img = NULL;
	int r = images_available(m, e);
	if (r >= 0)
		r = image_lookup(m->actx.images, ref, &img, e);
	if (r < 0)
		return r;
	json_t *o = image_to_json(m, img);
	json_t *used = json_object_get(o, "usedBy");
	if (json_array_size(used) > 0) {
		_cleanup_free_ char *ids = json_dumps(used, JSON_COMPACT);
		r = station_error_set(e, -EBUSY, NULL, "image %s is used by workspaces %s",
				      img->digest, ids ? ids : "");
	}
	json_decref(o);
	if (r >= 0)
		r = image_remove(m->actx.images, img->digest, e);
	image_free(img);
	return r;
}
