/* SPDX-License-Identifier: MIT */
/* The terminal scrollback ring (agent/pty.h): the last cap bytes, their offsets, reads from any
 * offset, wrap-around at every split. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "agent/pty.h"

/* Byte i of every stream: period 251 (prime), so a misplaced byte shows. */
static uint8_t pattern(uint64_t i)
{
	return (uint8_t)(i % 251);
}

static void feed(struct pty_ring *r, uint64_t *total, size_t n)
{
	uint8_t *p = malloc(n ? n : 1);

	cr_assert_not_null(p);
	for (size_t i = 0; i < n; i++)
		p[i] = pattern(*total + i);
	pty_ring_append(r, p, n);
	*total += n;
	free(p);
}

/* Everything kept from `from` on is exactly the stream's bytes at those offsets. */
static void check_read(const struct pty_ring *r, uint64_t total, uint64_t from)
{
	uint64_t start = total > r->cap ? total - r->cap : 0, offset = 0;
	uint64_t want_from = from < start ? start : from > total ? total : from;
	uint8_t *out = malloc(r->cap + 1);
	size_t n;

	cr_assert_not_null(out);
	n = pty_ring_read(r, from, out, r->cap, &offset);
	cr_assert_eq(offset, want_from, "offset %lu, want %lu (from %lu, total %lu)",
		     (unsigned long)offset, (unsigned long)want_from, (unsigned long)from,
		     (unsigned long)total);
	cr_assert_eq(n, total - want_from, "read %zu bytes", n);
	for (size_t i = 0; i < n; i++)
		cr_assert_eq(out[i], pattern(offset + i), "byte %zu (offset %lu)", i,
			     (unsigned long)(offset + i));
	free(out);
}

Test(pty_ring, empty)
{
	struct pty_ring r;
	uint64_t offset = 99;
	uint8_t out[4];

	cr_assert_eq(pty_ring_init(&r, 16), 0);
	cr_assert_eq(pty_ring_start(&r), 0);
	cr_assert_eq(pty_ring_read(&r, 0, out, sizeof out, &offset), 0);
	cr_assert_eq(offset, 0);
	pty_ring_done(&r);
}

Test(pty_ring, zero_capacity_refused)
{
	struct pty_ring r;

	cr_assert_eq(pty_ring_init(&r, 0), -EINVAL);
}

Test(pty_ring, below_capacity_keeps_everything)
{
	struct pty_ring r;
	uint64_t total = 0;

	cr_assert_eq(pty_ring_init(&r, 100), 0);
	feed(&r, &total, 30);
	feed(&r, &total, 40);
	cr_assert_eq(r.total, 70);
	cr_assert_eq(r.len, 70);
	cr_assert_eq(pty_ring_start(&r), 0);
	check_read(&r, total, 0);
	check_read(&r, total, 55);
	check_read(&r, total, 70);
	check_read(&r, total, 1000); /* past the end: nothing, at the end */
	pty_ring_done(&r);
}

Test(pty_ring, exactly_full)
{
	struct pty_ring r;
	uint64_t total = 0;

	cr_assert_eq(pty_ring_init(&r, 64), 0);
	feed(&r, &total, 64);
	cr_assert_eq(r.len, 64);
	cr_assert_eq(pty_ring_start(&r), 0);
	check_read(&r, total, 0);
	feed(&r, &total, 1);
	cr_assert_eq(pty_ring_start(&r), 1);
	check_read(&r, total, 0);
	pty_ring_done(&r);
}

/* Every append size against every capacity: the kept bytes are always the last cap. */
Test(pty_ring, wraps_at_every_split)
{
	for (size_t cap = 1; cap <= 23; cap++)
		for (size_t step = 1; step <= 2 * cap + 3; step++) {
			struct pty_ring r;
			uint64_t total = 0;

			cr_assert_eq(pty_ring_init(&r, cap), 0);
			for (int i = 0; i < 7; i++) {
				feed(&r, &total, step);
				cr_assert_eq(r.total, total);
				cr_assert_eq(r.len, total < cap ? total : cap);
				check_read(&r, total, 0);
				check_read(&r, total, total - (total < 2 ? total : 2));
			}
			pty_ring_done(&r);
		}
}

Test(pty_ring, append_larger_than_capacity)
{
	struct pty_ring r;
	uint64_t total = 0;

	cr_assert_eq(pty_ring_init(&r, 256 * 1024), 0);
	feed(&r, &total, 1000);
	feed(&r, &total, 3 * 256 * 1024 + 17);
	cr_assert_eq(r.len, 256 * 1024);
	cr_assert_eq(pty_ring_start(&r), total - 256 * 1024);
	check_read(&r, total, 0);
	check_read(&r, total, total - 5);
	feed(&r, &total, 12345);
	check_read(&r, total, 0);
	pty_ring_done(&r);
}

Test(pty_ring, read_is_bounded_by_max)
{
	struct pty_ring r;
	uint64_t total = 0, offset = 0;
	uint8_t out[10];

	cr_assert_eq(pty_ring_init(&r, 32), 0);
	feed(&r, &total, 50); /* kept: offsets 18..49 */
	cr_assert_eq(pty_ring_read(&r, 0, out, sizeof out, &offset), 10);
	cr_assert_eq(offset, 18);
	for (size_t i = 0; i < 10; i++)
		cr_assert_eq(out[i], pattern(18 + i));
	pty_ring_done(&r);
}
