/* SPDX-License-Identifier: MIT */
#pragma once

/* JSON glue for the modules that use jansson. Header-only, so libbasic itself stays libc-only
 * and the agent, which never includes this, needs no jansson. */

#include <jansson.h>

#include "basic/cleanup.h"

/* jansson's own json_decrefp() accepts NULL. */
#define _cleanup_json_ _cleanup_(json_decrefp)

/* What a value is, for an error that names it ("must be a string, not an array"). */
static inline const char *json_kind_name(const json_t *v)
{
	switch (json_typeof(v)) {
	case JSON_OBJECT:
		return "an object";
	case JSON_ARRAY:
		return "an array";
	case JSON_STRING:
		return "a string";
	case JSON_INTEGER:
	case JSON_REAL:
		return "a number";
	case JSON_TRUE:
	case JSON_FALSE:
		return "a boolean";
	default:
		return "null";
	}
}
