/* SPDX-License-Identifier: MIT */
/* /v1/workspaces/{id}/ports: expose (POST), list (GET), revoke (DELETE …/ports/{port}). */
#include <errno.h>
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>

#include "api/http.h"
#include "api/idempotency.h"
#include "api/router.h"
#include "api/validate.h"
#include "basic/util.h"
#include "daemon/manager.h"

int api_port_expose(struct http_request *req)
{
	const struct route_match *m = http_request_route(req);
	struct station_error e = {};
	struct port_spec spec = {};
	struct api_idempotency idem;
	struct idempotency_hit hit;
	json_t *body = NULL, *port = NULL;
	char id[8];
	int r;

	r = api_idempotency_begin(req, &idem, &hit);
	if (r < 0 || r == IDEMPOTENCY_REPLIED)
		return r;
	if (r == IDEMPOTENCY_REPLAY) {
		uint64_t p = 0;

		/* the token was shown once: a replay answers the exposure without it */
		r = parse_u64(hit.object_id, 65535, &p);
		if (r >= 0)
			r = manager_port_get(http_request_manager(req), m->ws_id, (uint16_t)p,
					     &port, &e);
		if (r == -ENOENT || r == -EINVAL || r == -ERANGE)
			return api_idempotency_reply_gone(req, &idem, "port", hit.object_id);
		return api_reply_result(req, r, hit.status, port, &e);
	}
	r = api_request_json(req, false, &body, &e);
	if (r >= 0)
		r = validate_port_spec(body, &spec, &e);
	if (r >= 0)
		r = manager_port_expose(http_request_manager(req), m->ws_id, &spec, &port, &e);
	json_decref(body);
	snprintf(id, sizeof id, "%u", (unsigned)spec.port);
	api_idempotency_end(req, &idem, r < 0 ? NULL : id, 201);
	return api_reply_result(req, r, 201, port, &e);
}

int api_port_list(struct http_request *req)
{
	const struct route_match *m = http_request_route(req);
	struct station_error e = {};
	json_t *list = NULL;
	int r;

	r = manager_port_list(http_request_manager(req), m->ws_id, &list, &e);
	return api_reply_result(req, r, 200, list, &e);
}

int api_port_revoke(struct http_request *req)
{
	const struct route_match *m = http_request_route(req);
	struct station_error e = {};
	struct MHD_Response *resp;
	uint64_t port = 0;
	int r;

	if (m->run_id[0] == '0' || parse_u64(m->run_id, 65535, &port) < 0 || port == 0)
		return http_reply_status(req, 404, NULL,
					 "\"%s\" is not a port: ports are 1 to 65535", m->run_id);
	r = manager_port_revoke(http_request_manager(req), m->ws_id, (uint16_t)port, &e);
	if (r < 0)
		return http_reply_error(req, &e);
	resp = MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
	if (!resp)
		return http_reply_status(req, 500, NULL, "out of memory");
	r = http_reply_response(req, 204, resp);
	MHD_destroy_response(resp);
	return r;
}
