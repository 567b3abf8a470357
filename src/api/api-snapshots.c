/* SPDX-License-Identifier: MIT */
/* Snapshots: POST /v1/workspaces/{id}/snapshots, GET /v1/snapshots, GET and DELETE
 * /v1/snapshots/{id} (docs/api.md "Snapshots and fork"). A create and a delete answer once the
 * manager's work ends (off the loop): the request waits suspended meanwhile. */
#include <errno.h>
#include <microhttpd.h>
#include <stdlib.h>

#include "api/http.h"
#include "api/router.h"
#include "api/validate.h"
#include "basic/cleanup.h"
#include "daemon/manager.h"

struct snapshot_wait {
	struct http_request *req;
	struct workspace_op *op; /* NULL once it ended */
	unsigned status;	 /* 201 with the snapshot, 204 with nothing */
	bool ended;
	int r;
	json_t *result;
	struct station_error e;
};

static void snapshot_wait_free(void *userdata)
{
	struct snapshot_wait *w = userdata;

	manager_workspace_op_forget(w->op);
	json_decref(w->result);
	free(w);
}

static int reply_no_content(struct http_request *req)
{
	struct MHD_Response *resp =
		MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
	int r;

	if (!resp)
		return http_reply_status(req, 500, NULL, "out of memory");
	r = http_reply_response(req, 204, resp);
	MHD_destroy_response(resp);
	return r;
}

static int snapshot_reply(struct http_request *req, struct snapshot_wait *w)
{
	if (w->r < 0)
		return http_reply_error(req, &w->e);
	if (w->status == 204)
		return reply_no_content(req);
	return api_reply_result(req, 0, w->status, TAKE_PTR(w->result), &w->e);
}

static int snapshot_resumed(struct http_request *req)
{
	struct snapshot_wait *w = http_request_state(req);
	int r;

	if (!w || !w->ended)
		return http_reply_status(req, 500, NULL, "the wait was lost");
	r = snapshot_reply(req, w);
	http_request_set_state(req, NULL, NULL);
	return r;
}

static void on_snapshot_end(void *userdata, int r, json_t *result, const struct station_error *e)
{
	struct snapshot_wait *w = userdata;

	w->op = NULL; /* gone once called */
	w->ended = true;
	w->r = r;
	w->result = json_incref(result);
	if (r < 0 && e)
		w->e = *e;
	http_request_resume(w->req);
}

/* r from the manager: < 0 refused at once, 1 under way (or ended already). */
static int snapshot_wait_begin(struct http_request *req, struct snapshot_wait *w, int r,
			       const struct station_error *e)
{
	if (r < 0) {
		http_request_set_state(req, NULL, NULL); /* frees w */
		return http_reply_error(req, e);
	}
	if (w->ended || r == 0)
		return snapshot_resumed(req);
	r = http_request_suspend(req, snapshot_resumed);
	if (r < 0) {
		http_request_set_state(req, NULL, NULL);
		return http_reply_status(req, 500, NULL, "cannot wait for the snapshot");
	}
	return 0;
}

static struct snapshot_wait *snapshot_wait_new(struct http_request *req, unsigned status)
{
	struct snapshot_wait *w = calloc(1, sizeof *w);

	if (!w)
		return NULL;
	w->req = req;
	w->status = status;
	http_request_set_state(req, w, snapshot_wait_free);
	return w;
}

int api_snapshot_create(struct http_request *req)
{
	const struct route_match *m = http_request_route(req);
	struct station_error e = {};
	struct snapshot_spec spec = {};
	struct snapshot_wait *w;
	json_t *body = NULL;
	int r;

	r = api_request_json(req, true, &body, &e);
	if (r >= 0)
		r = validate_snapshot_spec(body, &spec, &e);
	if (r < 0) {
		json_decref(body);
		return http_reply_error(req, &e);
	}
	w = snapshot_wait_new(req, 201);
	if (!w) {
		json_decref(body);
		return http_reply_status(req, 500, NULL, "out of memory");
	}
	r = manager_snapshot_create(http_request_manager(req), m->ws_id, &spec, on_snapshot_end, w,
				    &w->op, &e);
	json_decref(body); /* the manager copied the name */
	return snapshot_wait_begin(req, w, r, &e);
}

int api_snapshot_list(struct http_request *req)
{
	struct station_error e = {};
	json_t *list = NULL;
	int r;

	r = manager_snapshot_list(http_request_manager(req), &list, &e);
	if (r >= 0)
		list = api_wrap_list(list, "snapshots");
	return api_reply_result(req, r, 200, list, &e);
}

int api_snapshot_get(struct http_request *req)
{
	const struct route_match *m = http_request_route(req);
	struct station_error e = {};
	json_t *snapshot = NULL;
	int r;

	r = manager_snapshot_get(http_request_manager(req), m->ws_id, &snapshot, &e);
	return api_reply_result(req, r, 200, snapshot, &e);
}

int api_snapshot_delete(struct http_request *req)
{
	const struct route_match *m = http_request_route(req);
	struct station_error e = {};
	struct snapshot_wait *w;
	int r;

	w = snapshot_wait_new(req, 204);
	if (!w)
		return http_reply_status(req, 500, NULL, "out of memory");
	r = manager_snapshot_delete(http_request_manager(req), m->ws_id, on_snapshot_end, w, &w->op,
				    &e);
	if (r == 0 && !w->ended) { /* answered at once without a handle: out of memory */
		http_request_set_state(req, NULL, NULL);
		return http_reply_status(req, 500, NULL, "out of memory");
	}
	return snapshot_wait_begin(req, w, r, &e);
}
