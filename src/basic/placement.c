/* SPDX-License-Identifier: MIT */
/* The placement rule (placement.h). */
#include "placement.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static bool is_set(const char *s)
{
	return s && s[0];
}

/* The worker is private to the caller's own tenant. */
static bool is_own(const struct placement_worker *w)
{
	return is_set(w->tenant) && is_set(w->caller_tenant) &&
	       strcmp(w->tenant, w->caller_tenant) == 0;
}

const char *placement_skip_reason(const struct placement_worker *w)
{
	if (w->error)
		return "down";
	if (is_set(w->tenant) && !w->caller_admin && !is_own(w))
		return "private to another tenant";
	if (w->free <= 0)
		return "full";
	return NULL;
}

/* a comes before b. */
static bool placement_better(const struct placement_worker *a, const struct placement_worker *b)
{
	if (is_own(a) != is_own(b))
		return is_own(a);
	if (a->free != b->free)
		return a->free > b->free;
	return a->memory_available > b->memory_available;
}

static void explain(const struct placement_worker *v, size_t n, char *why, size_t why_size)
{
	size_t off = 0;

	why[0] = '\0';
	for (size_t i = 0; i < n && off < why_size; i++) {
		const char *sep = i ? "; " : "";
		int k;

		if (v[i].error)
			k = snprintf(why + off, why_size - off, "%s%s", sep, v[i].error);
		else
			k = snprintf(why + off, why_size - off, "%sworker %s is %s", sep, v[i].name,
				     placement_skip_reason(&v[i]));
		if (k < 0)
			break;
		off += (size_t)k;
	}
}

int placement_choose(const struct placement_worker *v, size_t n, char *why, size_t why_size)
{
	size_t best = SIZE_MAX;

	for (size_t i = 0; i < n; i++) {
		if (placement_skip_reason(&v[i]))
			continue;
		if (best == SIZE_MAX || placement_better(&v[i], &v[best]))
			best = i;
	}
	if (best != SIZE_MAX)
		return (int)best;
	if (why && why_size > 0)
		explain(v, n, why, why_size);
	return -EAGAIN;
}
