/* SPDX-License-Identifier: MIT */
/* /v1/tokens (create, list, get, revoke) and /v1/audit: admin only, checked by the HTTP layer
 * before these run (docs/api.md, "Tokens", "Audit"). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "api/http.h"
#include "api/router.h"
#include "basic/cleanup.h"
#include "basic/util.h"
#include "daemon/manager.h"

/* A mint or a revocation in a fleet waits for etcd off the loop (manager.h): the request
 * waits suspended meanwhile, like a long-poll, and is answered when the call reports. */
struct token_wait {
	struct http_request *req;
	struct token_call *call; /* NULL once it reported */
	unsigned status;
	int r;
	json_t *token;
	struct station_error e;
};

static void token_wait_free(void *state)
{
	struct token_wait *w = state;

	manager_token_call_forget(w->call); /* the client went away: the call goes on unheard */
	json_decref(w->token);
	free(w);
}

static void on_token_done(void *userdata, int r, json_t *token, const struct station_error *e)
{
	struct token_wait *w = userdata;

	w->call = NULL;
	w->r = r;
	w->token = token;
	w->e = *e;
	http_request_resume(w->req);
}

static int token_resumed(struct http_request *req)
{
	struct token_wait *w = http_request_state(req);
	struct station_error e;
	unsigned status;
	json_t *token;
	int r;

	if (!w || w->call)
		return http_reply_status(req, 500, NULL, "the token call was lost");
	r = w->r;
	e = w->e;
	status = w->status;
	token = TAKE_PTR(w->token);
	http_request_set_state(req, NULL, NULL);
	return api_reply_result(req, r, status, token, &e);
}

/* r from manager_token_create() or _revoke(): 1 suspends the request until w's call reports. */
static int token_answer(struct http_request *req, struct token_wait *w, int r, json_t *token,
			struct station_error *e)
{
	unsigned status = w->status;

	if (r != 1) {
		free(w);
		return api_reply_result(req, r, status, token, e);
	}
	http_request_set_state(req, w, token_wait_free);
	r = http_request_suspend(req, token_resumed);
	if (r < 0) {
		http_request_set_state(req, NULL, NULL); /* forgets the call */
		return http_reply_status(req, 500, NULL, "cannot wait for the token call: %s",
					 strerror(-r));
	}
	return 0;
}

int api_token_create(struct http_request *req)
{
	struct station_error e = {};
	struct token_wait *w = calloc(1, sizeof *w);
	json_t *body = NULL, *token = NULL;
	int r;

	if (!w)
		return http_reply_status(req, 500, NULL, "out of memory");
	*w = (struct token_wait){ .req = req, .status = 201 };
	r = api_request_json(req, false, &body, &e);
	if (r >= 0)
		r = manager_token_create(http_request_manager(req), body, on_token_done, w,
					 &w->call, &token, &e);
	json_decref(body);
	return token_answer(req, w, r, token, &e);
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
	struct token_wait *w = calloc(1, sizeof *w);
	json_t *token = NULL;
	int r;

	if (!w)
		return http_reply_status(req, 500, NULL, "out of memory");
	*w = (struct token_wait){ .req = req, .status = 200 };
	r = manager_token_revoke(http_request_manager(req), http_request_route(req)->ws_id,
				 on_token_done, w, &w->call, &token, &e);
	return token_answer(req, w, r, token, &e);
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
