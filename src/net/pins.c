/* SPDX-License-Identifier: MIT */
/* The deadlines of a workspace's pinned addresses (pins.h): a sorted array, searched by
 * bisection, swept in one pass. */

#include "pins.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "basic/cleanup.h"

void pins_sweep(struct pins *p, uint64_t now)
{
	size_t kept = 0;

	for (size_t i = 0; i < p->n; i++) {
		if (p->v[i].deadline <= now)
			p->expired++;
		else
			p->v[kept++] = p->v[i];
	}
	p->n = kept;
}

/* The index of addr, or where it would go. */
static size_t pins_find(const struct pins *p, uint32_t addr)
{
	size_t lo = 0, hi = p->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (p->v[mid].addr < addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static int pins_grow(struct pins *p)
{
	size_t cap = p->cap ? MIN(p->cap * 2, (size_t)PINS_MAX) : 16;
	struct pin *v = reallocarray(p->v, cap, sizeof(*v));

	if (!v)
		return -ENOMEM;
	p->v = v;
	p->cap = cap;
	return 0;
}

int pins_refresh(struct pins *p, uint32_t addr, uint64_t deadline, uint64_t now)
{
	size_t i;

	pins_sweep(p, now);
	i = pins_find(p, addr);
	if (i < p->n && p->v[i].addr == addr) {
		p->v[i].deadline = MAX(p->v[i].deadline, deadline);
		return 0;
	}
	if (p->n == PINS_MAX) {
		p->untracked++;
		return 0;
	}
	if (p->n == p->cap) {
		int r = pins_grow(p);
		if (r < 0)
			return r;
	}
	memmove(&p->v[i + 1], &p->v[i], (p->n - i) * sizeof(*p->v));
	p->v[i] = (struct pin){ .addr = addr, .deadline = deadline };
	p->n++;
	return 0;
}

size_t pins_count(const struct pins *p)
{
	return p->n;
}

void pins_clear(struct pins *p)
{
	p->n = 0;
}

void pins_free(struct pins *p)
{
	free(p->v);
	p->v = NULL;
	p->n = p->cap = 0;
}
