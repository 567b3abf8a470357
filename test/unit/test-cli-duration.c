/* SPDX-License-Identifier: MIT */
/* Durations typed on the command line (--expires 1h): a number and a unit, or milliseconds. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdint.h>

#include "cli/duration.h"

static void expect_ms(const char *s, uint64_t want)
{
	uint64_t got = 12345;

	cr_expect_eq(duration_parse_ms(s, &got), 0, "'%s' parses", s);
	cr_expect_eq(got, want, "'%s' is %llu ms, not %llu", s, (unsigned long long)want,
		     (unsigned long long)got);
}

static void expect_refused(const char *s, int err)
{
	uint64_t got = 12345;

	cr_expect_eq(duration_parse_ms(s, &got), err, "'%s' refused with %d", s, err);
	cr_expect_eq(got, 12345, "'%s': the output is untouched", s);
}

Test(duration, units)
{
	expect_ms("90s", 90000);
	expect_ms("30m", 1800000);
	expect_ms("1h", 3600000);
	expect_ms("7d", 604800000);
	expect_ms("250ms", 250);
	expect_ms("0s", 0);
}

Test(duration, a_plain_number_is_milliseconds)
{
	expect_ms("1500", 1500);
	expect_ms("0", 0);
	expect_ms("18446744073709551615", UINT64_MAX);
}

Test(duration, anything_else_is_refused)
{
	expect_refused("", -EINVAL);
	expect_refused("h", -EINVAL);
	expect_refused("-1s", -EINVAL);
	expect_refused("+1s", -EINVAL);
	expect_refused(" 1s", -EINVAL);
	expect_refused("1s ", -EINVAL);
	expect_refused("1.5h", -EINVAL);
	expect_refused("1x", -EINVAL);
	expect_refused("1hm", -EINVAL);
	expect_refused("1H", -EINVAL);
	expect_refused("1 h", -EINVAL);
	expect_refused(NULL, -EINVAL);
}

Test(duration, overflow_is_erange)
{
	expect_refused("18446744073709551616", -ERANGE);
	expect_refused("18446744073709552s", -ERANGE);
	expect_refused("213503982335d", -ERANGE);
	expect_ms("213503982334d", 213503982334ull * 86400000);
}
