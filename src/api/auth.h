/* SPDX-License-Identifier: MIT */
#pragma once

/* Who sent a request. The principal, its scope, tenant and limits are domain/auth.h's (the
 * manager speaks them too): enum auth_scope, struct auth_limits, struct auth_principal,
 * auth_sees(). */

#include "domain/auth.h"

struct http_request;

/* Who sent the request (set by the HTTP layer once the token checked out; never NULL on a
 * routed request; the unix socket is the admin principal). */
const struct auth_principal *http_request_principal(struct http_request *req);
