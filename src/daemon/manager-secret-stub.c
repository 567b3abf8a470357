/* SPDX-License-Identifier: MIT */
/* TEMPORARY: stands in for manager-secret.c until it lands; deleted before merge. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "manager-internal.h"

int manager_secret_for_host(struct manager *m, const char *ws_id, const char *protocol,
			    const char *host, char **ret_name, char **ret_username,
			    char **ret_password)
{
	const char *h = getenv("STUB_SECRET_HOST"), *v = getenv("STUB_SECRET_VALUE");
	if (!h || !v || strcasecmp(h, host) != 0)
		return -ENOENT;
	*ret_name = strdup("stub");
	*ret_username = strdup("x-access-token");
	*ret_password = strdup(v);
	return 0;
}
