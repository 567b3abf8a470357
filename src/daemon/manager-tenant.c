/* SPDX-License-Identifier: MIT */
/* Tenants (docs/security.md, "The tenant boundary"): which workspaces a request may see. The
 * API layer sets the viewer around each request; every lookup by id (workspace_lookup()) and
 * every list asks workspace_visible(), so another tenant's workspace and everything in it
 * answers exactly as a missing one, through the same code. */

#include <string.h>

#include "manager-internal.h"

void manager_set_viewer(struct manager *m, const char *tenant)
{
	m->viewer = tenant && tenant[0] ? tenant : NULL;
}

const char *manager_viewer(const struct manager *m)
{
	return m->viewer;
}

bool workspace_visible(const struct manager *m, const struct workspace *ws)
{
	return !m->viewer || strcmp(m->viewer, ws->row.tenant ? ws->row.tenant : "") == 0;
}

size_t manager_tenant_workspaces(const struct manager *m, const char *tenant)
{
	size_t n = 0;

	for (const struct workspace *ws = m->workspaces; ws; ws = ws->next)
		if (!ws->pool && strcmp(tenant ? tenant : "", ws->row.tenant ? ws->row.tenant : "") == 0)
			n++;
	return n;
}
