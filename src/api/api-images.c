/* SPDX-License-Identifier: MIT */
/* /v1/images: import or pull, list, get, remove, export. */
#include <errno.h>
#include <microhttpd.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "basic/cleanup.h"
#include "api/http.h"
#include "daemon/manager.h"
#include "event/event.h"
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

/* GET /v1/images/{ref}/export: the tar a worker thread writes into a pipe (manager.h), read as
 * the client takes it: never more than the pipe's worth in memory. The answer waits for the
 * export's first byte, so a failure before it (the image missing, its manifest or config
 * damaged) is an error answer; a failure after it (a damaged layer, the controller stopping)
 * can only cut the transfer short (no final chunk), which the client sees as one, and the
 * controller logs why. */
#define EXPORT_BLOCK (64u << 10)

struct export_stream {
	struct http_request *req;
	struct image_export *x;	    /* NULL once it reported */
	int fd;			    /* the pipe's read end */
	struct event_source *watch; /* on fd, armed while the request waits for bytes */
	bool ended;
	int r;
	struct station_error e;
};

static void export_stream_free(void *state)
{
	struct export_stream *st = state;

	manager_image_export_forget(st->x); /* the client went away: the close stops it */
	event_source_free(st->watch);
	close(st->fd);
	free(st);
}

static void on_export_done(void *userdata, int r, const struct station_error *e)
{
	struct export_stream *st = userdata;

	st->x = NULL;
	st->ended = true;
	st->r = r;
	st->e = *e;
	http_request_resume(st->req);
}

static int on_export_readable(struct event_source *s, int fd, uint32_t revents, void *userdata)
{
	struct export_stream *st = userdata;

	event_source_set_io_events(st->watch, 0);
	http_request_resume(st->req);
	return 0;
}

/* > 0: bytes wait in the pipe; 0: none yet; -EPIPE: none will (the writer closed it). */
static int export_pipe_state(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	int n = 0;

	if (ioctl(fd, FIONREAD, &n) == 0 && n > 0)
		return n;
	if (poll(&p, 1, 0) <= 0 || !(p.revents & POLLHUP))
		return 0;
	/* closed: what it wrote before is all there now */
	return ioctl(fd, FIONREAD, &n) == 0 && n > 0 ? n : -EPIPE;
}

/* Suspends the request until bytes come or the export reports. */
static int export_wait(struct export_stream *st, http_handler_fn resume_fn)
{
	if (export_pipe_state(st->fd) != -EPIPE) /* at its end, only done() is left to come */
		event_source_set_io_events(st->watch, EPOLLIN);
	return http_request_suspend(st->req, resume_fn);
}

static ssize_t export_read(void *cls, uint64_t pos, char *out, size_t max)
{
	struct http_request *req = cls;
	struct export_stream *st = http_request_state(req);
	ssize_t n;

	if (!st || http_request_gone(req))
		return MHD_CONTENT_READER_END_WITH_ERROR;
	do
		n = read(st->fd, out, max);
	while (n < 0 && errno == EINTR);
	if (n > 0)
		return n;
	if (n < 0 && errno != EAGAIN)
		return MHD_CONTENT_READER_END_WITH_ERROR;
	if (n == 0 && st->ended) /* cut short unless the whole tar came */
		return st->r < 0 ? MHD_CONTENT_READER_END_WITH_ERROR :
				   MHD_CONTENT_READER_END_OF_STREAM;
	return export_wait(st, NULL) < 0 ? MHD_CONTENT_READER_END_WITH_ERROR : 0;
}

static int export_reply(struct http_request *req)
{
	struct export_stream *st = http_request_state(req);
	const struct route_match *match = http_request_route(req);
	struct MHD_Response *r;
	char disposition[96];
	int ret;

	if (!st)
		return http_reply_status(req, 500, NULL, "the image export was lost");
	if (export_pipe_state(st->fd) <= 0) {
		if (st->ended && st->r < 0)
			return http_reply_error(req, &st->e);
		if (st->ended)
			return http_reply_status(req, 500, NULL,
						 "image %s: the export ended without a byte",
						 match->image);
		return export_wait(st, export_reply);
	}
	r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, EXPORT_BLOCK, export_read, req,
					      NULL);
	if (!r)
		return -ENOMEM;
	snprintf(disposition, sizeof disposition, "attachment; filename=\"image-%.12s.tar\"",
		 match->image + strlen("sha256:"));
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/x-tar");
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_DISPOSITION, disposition);
	MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
	ret = http_reply_response(req, 200, r);
	MHD_destroy_response(r);
	return ret;
}

int api_image_export(struct http_request *req)
{
	const struct route_match *match = http_request_route(req);
	struct station_error e = {};
	struct export_stream *st = calloc(1, sizeof *st);
	int r;

	if (!st)
		return http_reply_status(req, 500, NULL, "out of memory");
	st->req = req;
	st->fd = -1;
	r = manager_image_export(http_request_manager(req), match->image, on_export_done, st,
				 &st->x, &st->fd, &e);
	if (r < 0) {
		free(st);
		return http_reply_error(req, &e);
	}
	r = event_add_io(http_request_loop(req), &st->watch, st->fd, 0, on_export_readable, st);
	http_request_set_state(req, st, export_stream_free);
	if (r < 0)
		return http_reply_status(req, 500, NULL, "cannot wait for the image export: %s",
					 strerror(-r));
	return export_reply(req);
}
