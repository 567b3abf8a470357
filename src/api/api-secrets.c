/* SPDX-License-Identifier: MIT */
/* /v1/workspaces/{id}/secrets: put, list, get, delete. No response carries a value. */
#include <errno.h>

#include "api/http.h"
#include "api/router.h"
#include "daemon/manager.h"

int api_secret_put(struct http_request *req)
{
	const struct route_match *m = http_request_route(req);
	struct station_error e = {};
	json_t *body = NULL, *secret = NULL;
	bool created = false;
	int r;

	r = api_request_json(req, false, &body, &e);
	if (r >= 0)
		r = manager_secret_put(http_request_manager(req), m->ws_id, m->run_id, body,
				       &secret, &created, &e);
	json_decref(body);
	return api_reply_result(req, r, created ? 201 : 200, secret, &e);
}

int api_secret_list(struct http_request *req)
{
	const struct route_match *m = http_request_route(req);
	struct station_error e = {};
	json_t *list = NULL;
	int r;

	r = manager_secret_list(http_request_manager(req), m->ws_id, &list, &e);
	if (r >= 0)
		list = api_wrap_list(list, "secrets");
	return api_reply_result(req, r, 200, list, &e);
}

int api_secret_get(struct http_request *req)
{
	const struct route_match *m = http_request_route(req);
	struct station_error e = {};
	json_t *secret = NULL;
	int r;

	r = manager_secret_get(http_request_manager(req), m->ws_id, m->run_id, &secret, &e);
	return api_reply_result(req, r, 200, secret, &e);
}

int api_secret_delete(struct http_request *req)
{
	const struct route_match *m = http_request_route(req);
	struct station_error e = {};
	json_t *result = NULL;
	int r;

	r = manager_secret_delete(http_request_manager(req), m->ws_id, m->run_id, &result, &e);
	return api_reply_result(req, r, 200, result, &e);
}
