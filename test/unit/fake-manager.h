/* SPDX-License-Identifier: MIT */
#pragma once

/* A stand-in for daemon/manager.c, for driving the HTTP layer in tests. One workspace,
 * "w1-test", is ready; "w1-down" exists with its agent not connected. A run's command says
 * what it does:
 *   "true"          exited 0 at once
 *   "sleep:MS"      exited 0 after MS milliseconds
 *   "hang"          running until cancelled (then "cancelled" after 50 ms)
 *   "spew:BYTES"    writes BYTES to stdout at once (bytes i % 251), exits after 100 ms
 * Callbacks run from loop timers, never from inside the call that registered them.
 * Images: FAKE_IMAGE_USED (used by w1-test, removal is -EBUSY) and FAKE_IMAGE_FREE are in the
 * store; an import of "/missing" is -ENOENT, any other gets FAKE_IMAGE_IMPORTED; a pull
 * answers with the reference's digest, its "name" the registry and "usedBy" ["plain"] when
 * plainHttp was set (so a test sees what reached the manager). */

#include <stddef.h>

struct event_loop;

#define FAKE_IMAGE_USED "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define FAKE_IMAGE_FREE "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
#define FAKE_IMAGE_IMPORTED                                                                        \
	"sha256:cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc"
/* An export of FAKE_IMAGE_FREE is FAKE_EXPORT_BYTES (bytes i % 251), written as the pipe takes
 * them; of FAKE_IMAGE_USED, FAKE_EXPORT_CUT of them and then a failure (a damaged layer). */
#define FAKE_EXPORT_BYTES (3u << 20)
#define FAKE_EXPORT_CUT (100u << 10)

void fake_manager_setup(struct event_loop *loop);
size_t fake_manager_waiters(void); /* registered and not yet called or cancelled */
size_t fake_manager_watches(void);
