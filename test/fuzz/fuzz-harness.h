/* SPDX-License-Identifier: MIT */
#pragma once

/* What the image-side harnesses share: a property that does not hold is a crash. */

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "basic/error.h"

#define FUZZ_CHECK(x)                                                                              \
	do {                                                                                       \
		if (!(x))                                                                          \
			abort();                                                                   \
	} while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A refusal carries a message, NUL-terminated within its buffer. */
static inline void fuzz_check_error(const struct station_error *e)
{
	FUZZ_CHECK(memchr(e->message, '\0', sizeof e->message));
	FUZZ_CHECK(e->message[0] != '\0');
	FUZZ_CHECK(memchr(e->field, '\0', sizeof e->field));
}
