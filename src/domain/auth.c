/* SPDX-License-Identifier: MIT */
/* Principals and scopes (domain/auth.h). */
#include <errno.h>
#include <string.h>

#include "domain/auth.h"

const struct auth_principal auth_admin_principal = {
	.token_id = "admin",
	.name = "admin",
	.scope = AUTH_SCOPE_ADMIN,
};

bool auth_sees(const struct auth_principal *p, const char *tenant)
{
	if (!p)
		return false;
	if (p->scope == AUTH_SCOPE_ADMIN)
		return true;
	/* A read token without a tenant reads everything; a tenant token always has one. */
	if (!p->tenant[0])
		return p->scope == AUTH_SCOPE_READ;
	return strcmp(p->tenant, tenant ?: "") == 0;
}

static const char *const scope_names[] = {
	[AUTH_SCOPE_ADMIN] = "admin",
	[AUTH_SCOPE_TENANT] = "tenant",
	[AUTH_SCOPE_READ] = "read",
};

const char *auth_scope_to_string(enum auth_scope s)
{
	if ((unsigned)s >= sizeof scope_names / sizeof scope_names[0])
		return NULL;
	return scope_names[s];
}

int auth_scope_from_string(const char *s)
{
	for (unsigned i = 0; i < sizeof scope_names / sizeof scope_names[0]; i++)
		if (s && strcmp(s, scope_names[i]) == 0)
			return (int)i;
	return -EINVAL;
}

bool auth_tenant_valid(const char *tenant)
{
	size_t n;

	if (!tenant)
		return false;
	n = strlen(tenant);
	if (n < 1 || n > AUTH_TENANT_MAX || tenant[0] == '-')
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = tenant[i];

		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'))
			return false;
	}
	return true;
}
