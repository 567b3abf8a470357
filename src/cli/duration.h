/* SPDX-License-Identifier: MIT */
#pragma once

/* Durations as a person types them on the command line (--expires 1h, --expires-in 7d). */

#include <stdint.h>

/* "90s", "30m", "1h", "7d", "250ms", or a plain number of milliseconds ("1500"): a decimal
 * number (no sign, no fraction) and at most one unit of ms, s, m, h, d. 0 with *ret_ms; -EINVAL
 * for anything else, -ERANGE when it does not fit in 64 bits of milliseconds. */
int duration_parse_ms(const char *s, uint64_t *ret_ms);
