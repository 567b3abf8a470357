/* SPDX-License-Identifier: MIT */
/* The Idempotency-Key header: its shape, the canonical request's hash, the claim. */
#include "api/idempotency.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "api/http.h"
#include "api/router.h"
#include "basic/util.h"
#include "daemon/manager.h"

/* The path the key is scoped to: the creating endpoint's, with its workspace; a tenant's
 * with its tenant, so that one tenant's key never answers (or tells of) another's. */
static int idempotency_scope(const struct route_match *m, const char *tenant, char *buf, size_t n)
{
	const char *what;
	int k;

	switch (m->endpoint) {
	case EP_WORKSPACE_CREATE:
		k = snprintf(buf, n, "/v1/workspaces");
		break;
	case EP_COMMAND_START:
		what = "commands";
		k = snprintf(buf, n, "/v1/workspaces/%s/%s", m->ws_id, what);
		break;
	case EP_SERVICE_CREATE:
		what = "services";
		k = snprintf(buf, n, "/v1/workspaces/%s/%s", m->ws_id, what);
		break;
	case EP_PORT_EXPOSE:
		what = "ports";
		k = snprintf(buf, n, "/v1/workspaces/%s/%s", m->ws_id, what);
		break;
	case EP_TERMINAL_CREATE:
		what = "terminals";
		k = snprintf(buf, n, "/v1/workspaces/%s/%s", m->ws_id, what);
		break;
	default:
		return -EINVAL;
	}
	if (tenant && k >= 0 && (size_t)k < n)
		k += snprintf(buf + k, n - (size_t)k, "#tenant=%s", tenant);
	return k >= 0 && (size_t)k < n ? 0 : -ENAMETOOLONG;
}

/* 1 to 255 bytes of printable ASCII (space to tilde). */
static bool key_valid(const char *key)
{
	size_t n = strlen(key);

	if (n == 0 || n > IDEMPOTENCY_KEY_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)key[i] < 0x20 || (unsigned char)key[i] > 0x7e)
			return false;
	return true;
}

/* SHA-256 of "POST\n" PATH "\n" BODY: the same request hashes the same, whatever its query. */
static void request_hash(struct http_request *req, const char *scope, char ret[65])
{
	static const char hex[] = "0123456789abcdef";
	struct sha256_ctx c;
	uint8_t digest[32];
	size_t n = 0;
	const void *body = http_request_body(req, &n);

	sha256_init(&c);
	sha256_update(&c, "POST\n", 5);
	sha256_update(&c, scope, strlen(scope));
	sha256_update(&c, "\n", 1);
	if (n)
		sha256_update(&c, body, n);
	sha256_final(&c, digest);
	for (size_t i = 0; i < 32; i++) {
		ret[2 * i] = hex[digest[i] >> 4];
		ret[2 * i + 1] = hex[digest[i] & 15];
	}
	ret[64] = 0;
}

static int reply_bad_key(struct http_request *req, const char *why)
{
	return http_reply_status(req, 400, IDEMPOTENCY_HEADER, "header %s %s", IDEMPOTENCY_HEADER,
				 why);
}

static int check_key(struct http_request *req, const char *key)
{
	size_t n = strlen(key);

	if (http_request_header_count(req, IDEMPOTENCY_HEADER) > 1)
		return reply_bad_key(req, "is given more than once");
	if (n == 0)
		return reply_bad_key(req, "is empty (give 1 to 255 printable ASCII characters)");
	if (n > IDEMPOTENCY_KEY_MAX)
		return reply_bad_key(req, "is over 255 bytes");
	if (!key_valid(key))
		return reply_bad_key(req, "has a character that is not printable ASCII");
	return 0;
}

int api_idempotency_begin(struct http_request *req, struct api_idempotency *idem,
			  struct idempotency_hit *hit)
{
	const char *key = http_request_header(req, IDEMPOTENCY_HEADER);
	struct station_error e = {};
	char hash[65];
	int r;

	*idem = (struct api_idempotency){};
	if (!key)
		return IDEMPOTENCY_CREATE;
	if (!key_valid(key) || http_request_header_count(req, IDEMPOTENCY_HEADER) > 1) {
		r = check_key(req, key);
		return r < 0 ? r : IDEMPOTENCY_REPLIED;
	}
	if (idempotency_scope(http_request_route(req), manager_viewer(http_request_manager(req)),
			      idem->scope, sizeof idem->scope) < 0) {
		r = http_reply_status(req, 400, IDEMPOTENCY_HEADER,
				      "header %s is not taken on this endpoint",
				      IDEMPOTENCY_HEADER);
		return r < 0 ? r : IDEMPOTENCY_REPLIED;
	}
	snprintf(idem->key, sizeof idem->key, "%s", key);
	request_hash(req, idem->scope, hash);
	r = manager_idempotency_claim(http_request_manager(req), idem->scope, idem->key, hash, hit,
				      &e);
	if (r == 1)
		return IDEMPOTENCY_REPLAY;
	if (r == -EINPROGRESS)
		r = http_reply_error_code(req, &e, "in_progress", "Retry-After", "1");
	else if (r < 0)
		r = http_reply_error(req, &e);
	else {
		idem->claimed = true;
		return IDEMPOTENCY_CREATE;
	}
	return r < 0 ? r : IDEMPOTENCY_REPLIED;
}

void api_idempotency_end(struct http_request *req, struct api_idempotency *idem,
			 const char *object_id, unsigned status)
{
	if (!idem->claimed)
		return;
	idem->claimed = false;
	manager_idempotency_finish(http_request_manager(req), idem->scope, idem->key, object_id,
				   status);
}

int api_idempotency_reply_gone(struct http_request *req, const struct api_idempotency *idem,
			       const char *what, const char *object_id)
{
	return http_reply_status(req, 409, IDEMPOTENCY_HEADER,
				 "%s \"%s\" made by the request with %s \"%s\" no longer exists",
				 what, object_id, IDEMPOTENCY_HEADER, idem->key);
}
