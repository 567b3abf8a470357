/* SPDX-License-Identifier: MIT */
/* /v1/images: import or pull, list, get, remove. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "basic/cleanup.h"
#include "api/http.h"
#include "daemon/manager.h"
#include "api/router.h"
#include "api/validate.h"

int api_image_list(struct http_request *req)
{
	struct station_error e = {};
	json_t *list = NULL;
	int r;

	r = manager_image_list(http_request_manager(req), &list, &e);
	if (r >= 0)
		list = api_wrap_list(list, "images");
	return api_reply_result(req, r, 200, list, &e);
}

/* Import (path) or pull (reference) run as a job off the loop (manager.h); the request waits
 * suspended, like a long-poll, and is answered when the job reports. */
struct image_wait {
	struct http_request *req;
	struct image_job *job; /* NULL once it reported */
	int r;
	json_t *image;
	struct station_error e;
};

static void image_wait_free(void *state)
{
	struct image_wait *w = state;

	manager_image_job_forget(w->job); /* the client went away: the job runs on unheard */
	json_decref(w->image);
	free(w);
}

static void on_image_job_done(void *userdata, int r, json_t *image, const struct station_error *e)
{
	struct image_wait *w = userdata;

	w->job = NULL;
	w->r = r;
	w->image = image;
	w->e = *e;
	http_request_resume(w->req);
}

static int image_create_resumed(struct http_request *req)
{
	struct image_wait *w = http_request_state(req);
	struct station_error e;
	json_t *image;
	int r;

	if (!w || w->job)
		return http_reply_status(req, 500, NULL, "the image import was lost");
	r = w->r;
	e = w->e;
	image = TAKE_PTR(w->image);
	http_request_set_state(req, NULL, NULL);
	return api_reply_result(req, r, 201, image, &e);
}

int api_image_create(struct http_request *req)
{
	struct manager *m = http_request_manager(req);
	struct station_error e = {};
	struct image_request ir = {};
	struct image_wait *w = NULL;
	json_t *body = NULL;
	int r;

	r = api_request_json(req, false, &body, &e);
	if (r >= 0)
		r = validate_image_request(body, &ir, &e);
	if (r >= 0 && manager_viewer(m)) /* a tenant: pulls of the allow list only */
		r = ir.path ?
			    station_error_set(&e, STATION_EFORBIDDEN, "path",
					      "a tenant's token pulls images on the worker's "
					      "allow list; it cannot import paths of the worker's "
					      "filesystem") :
			    manager_tenant_image_allowed(m, ir.reference, "reference", &e);
	if (r >= 0 && !(w = calloc(1, sizeof *w)))
		r = -ENOMEM;
	if (r >= 0) {
		w->req = req;
		if (ir.path)
			r = manager_image_import(m, ir.path, ir.name, on_image_job_done, w, &w->job,
						 &e);
		else
			r = manager_image_pull(m, ir.reference, ir.registry, ir.plain_http,
					       on_image_job_done, w, &w->job, &e);
	}
	json_decref(body);
	if (r < 0) {
		free(w);
		return api_reply_result(req, r, 201, NULL, &e);
	}
	http_request_set_state(req, w, image_wait_free);
	r = http_request_suspend(req, image_create_resumed);
	if (r < 0) {
		http_request_set_state(req, NULL, NULL);
		return http_reply_status(req, 500, NULL, "cannot wait for the image import: %s",
					 strerror(-r));
	}
	return 0;
}

/* The image of the list (either shape manager_image_list() may return) with this digest; a
 * new reference, or NULL. */
static json_t *image_find(json_t *list, const char *digest)
{
	json_t *images = json_is_array(list) ? list : json_object_get(list, "images");
	json_t *img;
	size_t i;

	json_array_foreach(images, i, img) {
		const char *d = json_string_value(json_object_get(img, "digest"));

		if (d && strcmp(d, digest) == 0)
			return json_incref(img);
	}
	return NULL;
}

int api_image_get(struct http_request *req)
{
	const struct route_match *match = http_request_route(req);
	struct station_error e = {};
	json_t *list = NULL, *image = NULL;
	int r;

	r = manager_image_list(http_request_manager(req), &list, &e);
	if (r < 0)
		return http_reply_error(req, &e);
	image = image_find(list, match->image);
	json_decref(list);
	if (!image)
		return http_reply_status(
			req, 404, NULL,
			"image %s not in store (import it with 'station-sandbox "
			"image import' or pull it with 'station-sandbox image pull')",
			match->image);
	return http_reply_json(req, 200, image);
}

/* The removal runs off the loop (manager.h): the request waits suspended meanwhile. */
struct remove_wait {
	struct http_request *req;
	struct image_removal *removal; /* NULL once it reported */
	char digest[160];
	int r;
	struct station_error e;
};

static void remove_wait_free(void *state)
{
	struct remove_wait *w = state;

	manager_image_removal_forget(w->removal); /* the client went away: it goes on unheard */
	free(w);
}

static void on_image_removed(void *userdata, int r, const struct station_error *e)
{
	struct remove_wait *w = userdata;

	w->removal = NULL;
	w->r = r;
	w->e = *e;
	http_request_resume(w->req);
}

static int image_delete_resumed(struct http_request *req)
{
	struct remove_wait *w = http_request_state(req);
	json_t *result = NULL;
	struct station_error e;
	int r;

	if (!w || w->removal)
		return http_reply_status(req, 500, NULL, "the image removal was lost");
	r = w->r;
	e = w->e;
	if (r >= 0)
		result = json_pack("{s:s, s:b}", "digest", w->digest, "removed", 1);
	http_request_set_state(req, NULL, NULL);
	return api_reply_result(req, r, 200, result, &e);
}

int api_image_delete(struct http_request *req)
{
	const struct route_match *match = http_request_route(req);
	struct station_error e = {};
	struct remove_wait *w = calloc(1, sizeof *w);
	int r;

	if (!w)
		return http_reply_status(req, 500, NULL, "out of memory");
	w->req = req;
	snprintf(w->digest, sizeof w->digest, "%s", match->image);
	r = manager_image_remove(http_request_manager(req), match->image, on_image_removed, w,
				 &w->removal, &e);
	if (r < 0) {
		free(w);
		return api_reply_result(req, r, 200, NULL, &e);
	}
	http_request_set_state(req, w, remove_wait_free);
	r = http_request_suspend(req, image_delete_resumed);
	if (r < 0) {
		http_request_set_state(req, NULL, NULL);
		return http_reply_status(req, 500, NULL, "cannot wait for the image removal: %s",
					 strerror(-r));
	}
	return 0;
}
