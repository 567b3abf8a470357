/* SPDX-License-Identifier: MIT */
#pragma once

/* JSON glue for the modules that use jansson. Header-only, so libbasic itself stays libc-only
 * and the agent, which never includes this, needs no jansson. */

#include <jansson.h>

#include "basic/cleanup.h"

/* jansson's own json_decrefp() accepts NULL. */
#define _cleanup_json_ _cleanup_(json_decrefp)
