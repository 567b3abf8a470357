/* SPDX-License-Identifier: MIT */
/* /v1/tokens (create, list, get, revoke) and /v1/audit: admin only, checked by the HTTP layer
 * before these run (docs/api.md, "Tokens", "Audit"). */
#include <errno.h>
#include <string.h>

#include "api/http.h"
#include "api/router.h"
#include "basic/util.h"
#include "daemon/manager.h"

int api_token_create(struct http_request *req)
{
	struct station_error e = {};
	json_t *body = NULL, *token = NULL;
	int r;

	r = api_request_json(req, false, &body, &e);
	if (r >= 0)
		r = manager_token_create(http_request_manager(req), body, &token, &e);
	json_decref(body);
	return api_reply_result(req, r, 201, token, &e);
}

int api_token_list(struct http_request *req)
{
	struct station_error e = {};
	json_t *list = NULL;
	int r;

	r = manager_token_list(http_request_manager(req), &list, &e);
	if (r >= 0)
		list = api_wrap_list(list, "tokens");
	return api_reply_result(req, r, 200, list, &e);
}

int api_token_get(struct http_request *req)
{
	struct station_error e = {};
	json_t *token = NULL;
	int r;

	r = manager_token_get(http_request_manager(req), http_request_route(req)->ws_id, &token,
			      &e);
	return api_reply_result(req, r, 200, token, &e);
}

int api_token_revoke(struct http_request *req)
{
	struct station_error e = {};
	json_t *token = NULL;
	int r;

	r = manager_token_revoke(http_request_manager(req), http_request_route(req)->ws_id, &token,
				 &e);
	return api_reply_result(req, r, 200, token, &e);
}

/* A query filter: absent or 1-64 of the characters an id or a tenant may have. */
static int query_id(struct http_request *req, const char *key, const char **ret,
		    struct station_error *e)
{
	bool present;
	const char *v = http_request_query(req, key, &present);
	size_t n = v ? strlen(v) : 0;

	*ret = NULL;
	if (!present)
		return 0;
	if (n == 0 || n > 71 ||
	    strspn(v, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
		      "0123456789-_.:") != n)
		return station_error_set(e, -EINVAL, key,
					 "query parameter \"%s\" must be an id (1 to 71 of "
					 "[A-Za-z0-9._:-])",
					 key);
	*ret = v;
	return 0;
}

int api_audit_list(struct http_request *req)
{
	struct station_error e = {};
	struct manager_audit_query f = { .limit = 100 };
	const char *v;
	uint64_t n;
	json_t *result = NULL;
	int r = 0;

	v = http_request_query(req, "limit", NULL);
	if (v && (parse_u64(v, 1000, &n) < 0 || n == 0))
		r = station_error_set(
			&e, -EINVAL, "limit",
			"query parameter \"limit\" must be an integer from 1 to 1000");
	else if (v)
		f.limit = (size_t)n;
	v = http_request_query(req, "before", NULL);
	if (r >= 0 && v && (parse_u64(v, INT64_MAX, &n) < 0 || n == 0))
		r = station_error_set(&e, -EINVAL, "before",
				      "query parameter \"before\" must be a positive integer (an "
				      "entry's id, or nextBefore)");
	else if (r >= 0 && v)
		f.before = (int64_t)n;
	if (r >= 0)
		r = query_id(req, "tokenId", &f.token_id, &e);
	if (r >= 0)
		r = query_id(req, "tenant", &f.tenant, &e);
	if (r >= 0)
		r = query_id(req, "workspace", &f.workspace_id, &e);
	if (r >= 0)
		r = manager_audit_list(http_request_manager(req), &f, &result, &e);
	return api_reply_result(req, r, 200, result, &e);
}
