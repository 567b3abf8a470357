/* SPDX-License-Identifier: MIT */
/* GET /v1/ready, GET /v1/worker, GET /v1/openapi.json. */
#include <errno.h>
#include <microhttpd.h>

#include "api/http.h"
#include "api/openapi.h"
#include "daemon/manager.h"

int api_ready(struct http_request *req)
{
	json_t *ready = manager_ready(http_request_manager(req));
	unsigned status;

	if (!ready)
		return http_reply_status(req, 500, NULL, "readiness checks failed to run");
	status = json_is_true(json_object_get(ready, "ready")) ? 200 : 503;
	return http_reply_json(req, status, ready);
}

/* The manager knows its own limits; the HTTP ones are ours. */
static void worker_add_http_limits(struct http_request *req, json_t *worker)
{
	json_t *limits = json_object_get(worker, "limits");

	if (!json_is_object(limits)) {
		limits = json_object();
		if (!limits || json_object_set_new(worker, "limits", limits) < 0)
			return;
	}
	json_object_set_new(limits, "maxWaitMs",
			    json_integer((json_int_t)http_request_max_wait_ms(req)));
	json_object_set_new(limits, "maxBodyBytes",
			    json_integer((json_int_t)http_request_max_body_bytes(req)));
}

int api_worker(struct http_request *req)
{
	json_t *worker = manager_worker(http_request_manager(req));

	if (!worker)
		return http_reply_status(req, 500, NULL, "worker description failed");
	worker_add_http_limits(req, worker);
	return http_reply_json(req, 200, worker);
}

/* The description of this API (docs/openapi.yaml), as built in: the same for every request. */
int api_openapi(struct http_request *req)
{
	struct MHD_Response *r;
	int ret;

	r = MHD_create_response_from_buffer(openapi_json_size, (void *)openapi_json,
					    MHD_RESPMEM_PERSISTENT);
	if (!r)
		return -ENOMEM;
	if (MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json") !=
		    MHD_YES ||
	    MHD_add_response_header(r, MHD_HTTP_HEADER_ETAG, openapi_json_etag) != MHD_YES ||
	    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache") != MHD_YES) {
		MHD_destroy_response(r);
		return -ENOMEM;
	}
	ret = http_reply_response(req, 200, r);
	MHD_destroy_response(r);
	return ret;
}
