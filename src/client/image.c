/* SPDX-License-Identifier: MIT */
/* Image calls: import, pull, list, get, remove, export. */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "basic/util.h"

#include "client-internal.h"

#define DIGEST_PREFIX "sha256:"
#define DIGEST_LEN (sizeof(DIGEST_PREFIX) - 1 + 64)

/* The digest of ref ("sha256:<64 hex>" or "name@sha256:<64 hex>"), checked before it goes into a
 * URL; a pointer into ref. */
static int image_digest(struct station_client *c, const char *ref, const char **ret)
{
	const char *d = ref ? strrchr(ref, '@') : NULL;

	d = d ? d + 1 : ref;
	if (!d || strncmp(d, DIGEST_PREFIX, strlen(DIGEST_PREFIX)) != 0 ||
	    strlen(d) != DIGEST_LEN || strspn(d + strlen(DIGEST_PREFIX), "0123456789abcdef") != 64)
		return client_error(c, -EINVAL,
				    "invalid image reference '%s': want sha256:<64 hex> or "
				    "name@sha256:<64 hex>",
				    ref ? ref : "");
	*ret = d;
	return 0;
}

static int image_call(struct station_client *c, const char *method, const char *ref, json_t **ret)
{
	char path[sizeof("/v1/images/") + DIGEST_LEN];
	const char *digest = NULL;
	int r;

	r = image_digest(c, ref, &digest);
	if (r < 0)
		return r;
	snprintf(path, sizeof(path), "/v1/images/%s", digest);
	return station_request_json(c, method, path, NULL, ret);
}

int station_image_import(struct station_client *c, const char *path, const char *name, json_t **ret)
{
	_cleanup_json_ json_t *body = json_object();
	int r;

	if (!body)
		return client_error(c, -ENOMEM, "out of memory");
	if (!path)
		return client_error(c, -EINVAL, "no image layout path given");
	r = client_put_string(c, body, "path", path);
	if (r >= 0)
		r = client_put_string(c, body, "name", name);
	if (r < 0)
		return r;
	return station_request_json(c, "POST", "/v1/images", body, ret);
}

int station_image_pull(struct station_client *c, const char *ref,
		       const struct station_pull_options *opts, json_t **ret)
{
	_cleanup_json_ json_t *body = json_object();
	int r;

	if (!body)
		return client_error(c, -ENOMEM, "out of memory");
	if (!ref)
		return client_error(c, -EINVAL, "no image reference given");
	r = client_put_string(c, body, "reference", ref);
	if (r >= 0 && opts)
		r = client_put_string(c, body, "registry", opts->registry);
	if (r < 0)
		return r;
	if (opts && opts->plain_http && json_object_set_new(body, "plainHttp", json_true()) < 0)
		return client_error(c, -ENOMEM, "out of memory");
	return station_request_json(c, "POST", "/v1/images", body, ret);
}

int station_image_list(struct station_client *c, json_t **ret)
{
	_cleanup_json_ json_t *doc = NULL;
	json_t *list;
	int r;

	r = station_request_json(c, "GET", "/v1/images", NULL, &doc);
	if (r < 0)
		return r;
	list = json_object_get(doc, "images");
	if (!json_is_array(list))
		return client_error(c, -EPROTO, "%s answered without \"images\"", c->endpoint);
	*ret = json_incref(list);
	return 0;
}

int station_image_get(struct station_client *c, const char *ref, json_t **ret)
{
	return image_call(c, "GET", ref, ret);
}

int station_image_remove(struct station_client *c, const char *ref, json_t **ret)
{
	return image_call(c, "DELETE", ref, ret);
}

struct export_sink {
	struct station_client *c;
	int fd;
	uint64_t written;
};

static int export_write(const void *data, size_t n, void *userdata)
{
	struct export_sink *x = userdata;
	int r = write_all(x->fd, data, n);

	if (r < 0)
		return client_error(x->c, r, "cannot write the export: %s", strerror(-r));
	x->written += n;
	return 0;
}

int station_image_export(struct station_client *c, const char *ref, int fd, uint64_t *ret_bytes)
{
	char path[sizeof("/v1/images//export") + DIGEST_LEN];
	struct export_sink x = { .c = c, .fd = fd };
	const char *digest = NULL;
	struct client_io io = {
		.method = "GET",
		.path = path,
		.accept = "Accept: application/x-tar, application/json",
		.upload_fd = -1,
		.on_data = export_write,
		.userdata = &x,
	};
	int r = image_digest(c, ref, &digest);

	if (r < 0)
		return r;
	snprintf(path, sizeof(path), "/v1/images/%s/export", digest);
	r = client_io(c, &io);
	free(io.body);
	if (ret_bytes)
		*ret_bytes = x.written;
	return r;
}
