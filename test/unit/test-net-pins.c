/* SPDX-License-Identifier: MIT */
/* The deadlines of a workspace's pinned addresses: a refresh keeps the later deadline, an
 * address is counted expired once its deadline passes without one, the table is bounded. */
#include <criterion/criterion.h>
#include <stdint.h>

#include "net/pins.h"

#define S UINT64_C(1000000)

Test(pins, refresh_and_expire)
{
	struct pins p = { 0 };

	cr_assert_eq(pins_refresh(&p, 0x0a000001, 10 * S, 0), 0);
	cr_assert_eq(pins_refresh(&p, 0x0a000002, 4 * S, 0), 0);
	cr_assert_eq(pins_refresh(&p, 0x0a000003, 4 * S, 0), 0);
	cr_assert_eq(pins_count(&p), 3);
	/* A refresh of .2 before its deadline carries it on; a shorter one changes nothing. */
	cr_assert_eq(pins_refresh(&p, 0x0a000002, 8 * S, 3 * S), 0);
	cr_assert_eq(pins_refresh(&p, 0x0a000001, 5 * S, 3 * S), 0);
	pins_sweep(&p, 4 * S - 1);
	cr_assert_eq(pins_count(&p), 3);
	cr_assert_eq(p.expired, 0);
	/* At its deadline .3 is gone, counted once. */
	pins_sweep(&p, 4 * S);
	pins_sweep(&p, 5 * S);
	cr_assert_eq(pins_count(&p), 2);
	cr_assert_eq(p.expired, 1);
	pins_sweep(&p, 8 * S);
	cr_assert_eq(p.expired, 2, "the refreshed .2 expired at its new deadline");
	pins_sweep(&p, 9 * S);
	cr_assert_eq(pins_count(&p), 1);
	/* An address answered again after it expired is pinned anew and can expire again. */
	cr_assert_eq(pins_refresh(&p, 0x0a000003, 20 * S, 9 * S), 0);
	cr_assert_eq(pins_count(&p), 2);
	pins_sweep(&p, 20 * S);
	cr_assert_eq(p.expired, 4);
	cr_assert_eq(pins_count(&p), 0);
	pins_free(&p);
}

Test(pins, bounded)
{
	struct pins p = { 0 };

	for (uint32_t a = 0; a < PINS_MAX + 10; a++)
		cr_assert_eq(pins_refresh(&p, 0x0b000000 + (a * 7919u) % (1u << 20), 2 * S, 0), 0);
	cr_assert_eq(pins_count(&p), PINS_MAX);
	cr_assert_eq(p.untracked, 10);
	cr_assert_leq(p.cap, PINS_MAX);
	/* Sorted: a known address is refreshed, not counted again. */
	cr_assert_eq(pins_refresh(&p, 0x0b000000, 3 * S, 1 * S), 0);
	cr_assert_eq(pins_count(&p), PINS_MAX);
	cr_assert_eq(p.untracked, 10);
	/* Expired ones make room. */
	cr_assert_eq(pins_refresh(&p, 0x0c000000, 4 * S, 2 * S), 0);
	cr_assert_eq(pins_count(&p), 2);
	cr_assert_eq(p.expired, PINS_MAX - 1);
	for (size_t i = 1; i < p.n; i++)
		cr_assert_lt(p.v[i - 1].addr, p.v[i].addr);
	pins_clear(&p);
	cr_assert_eq(pins_count(&p), 0);
	cr_assert_eq(p.expired, PINS_MAX - 1, "clearing keeps the counts");
	pins_free(&p);
}
