/* SPDX-License-Identifier: MIT */
#pragma once

/* GET …/commands/{run}/output: the run's output as server-sent events (docs/api.md).
 *
 * Each request has its own bounded buffer (SSE_BUFFER_BYTES of encoded events). A chunk that
 * does not fit is dropped and counted; the next event of that stream that fits is preceded by
 * a `gap` event with the bytes missed, so a slow client costs bounded memory and never slows
 * the run. When the buffer is empty the connection is suspended (no polling) until the
 * manager delivers more output or the end. The `end` event carries the run as GET returns it,
 * fetched when everything before it has been sent. */

#include "daemon/http.h"

#define SSE_BUFFER_BYTES (1024u * 1024)

/* Replies with an error when the workspace or run is unknown. */
int sse_start(struct http_request *req, const char *ws_id, const char *run_id);
