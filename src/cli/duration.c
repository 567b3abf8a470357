/* SPDX-License-Identifier: MIT */
/* Durations on the command line: a number and a unit, or milliseconds alone. */

#include <errno.h>
#include <string.h>

#include "basic/cleanup.h"
#include "duration.h"

static const struct {
	const char *unit;
	uint64_t ms;
} units[] = {
	{ "", 1 },	    { "ms", 1 },	  { "s", 1000 },
	{ "m", 60 * 1000 }, { "h", 3600 * 1000 }, { "d", 86400 * 1000 },
};

int duration_parse_ms(const char *s, uint64_t *ret_ms)
{
	uint64_t n = 0;
	size_t digits;

	if (!s)
		return -EINVAL;
	digits = strspn(s, "0123456789");
	if (digits == 0)
		return -EINVAL;
	for (size_t i = 0; i < digits; i++) {
		if (n > (UINT64_MAX - (uint64_t)(s[i] - '0')) / 10)
			return -ERANGE;
		n = n * 10 + (uint64_t)(s[i] - '0');
	}
	for (size_t i = 0; i < ELEMENTSOF(units); i++) {
		if (strcmp(s + digits, units[i].unit) != 0)
			continue;
		if (n > UINT64_MAX / units[i].ms)
			return -ERANGE;
		*ret_ms = n * units[i].ms;
		return 0;
	}
	return -EINVAL;
}
