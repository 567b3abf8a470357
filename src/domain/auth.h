/* SPDX-License-Identifier: MIT */
#pragma once

/* Who is asking: the principal a bearer token (or the unix socket) stands for, its scope, its
 * tenant and the caps its token puts on what it creates (docs/security.md, "Tokens"). Below
 * the daemon and the HTTP layer so both speak it; libc only. api/auth.h is the HTTP layer's
 * view of it. */

#include <stdbool.h>
#include <stdint.h>

enum auth_scope { AUTH_SCOPE_ADMIN, AUTH_SCOPE_TENANT, AUTH_SCOPE_READ };

struct auth_limits {	     /* 0 = no cap from the token */
	uint32_t cpus_milli; /* per workspace */
	uint32_t memory_mb;  /* per workspace */
	uint32_t pids_limit; /* per workspace */
	uint32_t workspaces; /* at once, for the whole tenant on this worker */
};

#define AUTH_TENANT_MAX 64
#define AUTH_NAME_MAX 64
#define AUTH_TOKEN_ID_MAX 31

struct auth_principal {
	char token_id[AUTH_TOKEN_ID_MAX + 1]; /* "tok-<26 base32>"; "admin" for the admin token and
					       * the unix socket */
	char name[AUTH_NAME_MAX + 1];	      /* the token's name */
	enum auth_scope scope;
	char tenant[AUTH_TENANT_MAX + 1]; /* "" = none: admin, or a read token over everything */
	struct auth_limits limits;
};

/* The admin principal: the admin token and the unix socket. */
extern const struct auth_principal auth_admin_principal;

/* True when the principal may see an object owned by `tenant` ("" or NULL = the operator's). */
bool auth_sees(const struct auth_principal *p, const char *tenant);

/* "admin", "tenant", "read": to_string returns NULL outside the enum, from_string the value
 * (>= 0) or -EINVAL. */
const char *auth_scope_to_string(enum auth_scope s);
int auth_scope_from_string(const char *s);

/* A tenant name: 1-64 bytes of [a-z0-9-], not starting with '-'. */
bool auth_tenant_valid(const char *tenant);
