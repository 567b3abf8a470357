/* SPDX-License-Identifier: MIT */
#pragma once

/* Functions that write past a buffer's end (or, for strncpy, leave it unterminated) on input
 * nobody checked. The build includes this header first in every file (-include), so a call to
 * one is a compile error naming it; write snprintf(), memcpy() with a known length, or a
 * strbuf-like helper instead. The headers that declare them come first, so that their own
 * declarations stay as they are. */

#include <stdio.h>
#include <string.h>

#define STATION_BANNED(func) func##_is_banned_see_basic_banned_h

#undef strcpy
#define strcpy(...) STATION_BANNED(strcpy)
#undef strcat
#define strcat(...) STATION_BANNED(strcat)
#undef strncpy
#define strncpy(...) STATION_BANNED(strncpy)
#undef strncat
#define strncat(...) STATION_BANNED(strncat)
#undef sprintf
#define sprintf(...) STATION_BANNED(sprintf)
#undef vsprintf
#define vsprintf(...) STATION_BANNED(vsprintf)
#undef gets
#define gets(...) STATION_BANNED(gets)
