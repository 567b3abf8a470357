/* SPDX-License-Identifier: MIT */
#pragma once

/* The Idempotency-Key header of the creating endpoints (POST /v1/workspaces, …/commands,
 * …/services, …/terminals; docs/api.md, "Idempotency keys"). A handler calls begin() before it
 * creates anything and end() once it knows what it made (or that it made nothing), before it
 * replies or suspends. */

#include <stdbool.h>

#include "daemon/manager.h"

#define IDEMPOTENCY_HEADER "Idempotency-Key"
#define IDEMPOTENCY_KEY_MAX 255
#define IDEMPOTENCY_SCOPE_MAX 192 /* a path with its workspace and a tenant */

struct http_request;

struct api_idempotency {
	bool claimed; /* a key was given and claimed: end() must follow */
	char scope[IDEMPOTENCY_SCOPE_MAX];
	char key[IDEMPOTENCY_KEY_MAX + 1];
};

enum idempotency_step {
	IDEMPOTENCY_CREATE, /* go on and create (a key, if any, is claimed) */
	IDEMPOTENCY_REPLAY, /* the key made *hit's object: answer it with hit->status */
	IDEMPOTENCY_REPLIED /* begin() answered the request (a bad key, a conflict, in progress) */
};

/* Returns an idempotency_step, or -errno when the reply could not be queued. */
int api_idempotency_begin(struct http_request *req, struct api_idempotency *idem,
			  struct idempotency_hit *hit);
/* Ends the claim (nothing without one): object_id is what was made (its status), NULL for
 * nothing. */
void api_idempotency_end(struct http_request *req, struct api_idempotency *idem,
			 const char *object_id, unsigned status);
/* Replies to a replay whose object is gone (deleted, or its record pruned): 409 naming the key
 * and the object. */
int api_idempotency_reply_gone(struct http_request *req, const struct api_idempotency *idem,
			       const char *what, const char *object_id);
