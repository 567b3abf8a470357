/* SPDX-License-Identifier: MIT */
/* What GET /v1/worker says of the room left (docs/api.md, "GET /v1/worker"): workspaces
 * against --max-workspaces, the host's memory from /proc/meminfo (MemAvailable, read at the
 * request: one small file), and the online CPUs. Clients holding several workers create on the
 * one with the most free workspaces, then the most available memory. A tenant sees its own
 * workspaces only: used counts them and free is what is left as though it were alone on the
 * worker, so that no count of another tenant's shows through (docs/security.md, "The tenant
 * boundary"). */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "basic/cleanup.h"
#include "basic/util.h"
#include "manager-internal.h"

/* "Key:   123 kB" of meminfo text, in bytes; 0 when the key is missing. */
static uint64_t meminfo_bytes(const char *text, const char *key)
{
	size_t n = strlen(key);

	for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
		unsigned long long kb;

		if (strncmp(p, key, n) == 0 && p[n] == ':' && sscanf(p + n + 1, "%llu", &kb) == 1)
			return kb > UINT64_MAX / 1024 ? UINT64_MAX : (uint64_t)kb * 1024;
	}
	return 0;
}

json_t *manager_capacity_json(struct manager *m)
{
	_cleanup_free_ char *meminfo = NULL;
	uint64_t used = m->viewer ? manager_tenant_workspaces(m, m->viewer) :
				    m->n_workspaces - m->n_pool_members;
	uint64_t max = m->cfg.max_workspaces;
	uint64_t total = 0, available = 0;
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);

	if (read_file("/proc/meminfo", 64 * 1024, &meminfo, NULL) >= 0) {
		total = meminfo_bytes(meminfo, "MemTotal");
		available = meminfo_bytes(meminfo, "MemAvailable");
	}
	return json_pack("{s:{s:I,s:I,s:I},s:{s:I,s:I},s:I}", "workspaces", "max", (json_int_t)max,
			 "used", (json_int_t)used, "free",
			 (json_int_t)(used < max ? max - used : 0), "memoryBytes", "total",
			 (json_int_t)MIN(total, (uint64_t)INT64_MAX), "available",
			 (json_int_t)MIN(available, (uint64_t)INT64_MAX), "cpus",
			 (json_int_t)(cpus > 0 ? cpus : 1));
}
