/* SPDX-License-Identifier: MIT */
#pragma once

/* An error that reaches a person: errno-style code, a message naming the thing and the cause,
 * and the request field at fault when there is one. The API maps err to an HTTP status:
 *   -EINVAL 400 (field set), -EACCES 401, STATION_EFORBIDDEN 403, -ENOENT 404, -EBUSY 409
 *   (wrong state; -EINPROGRESS too: a request still under way), -ESTALE 412, -E2BIG 413, -EMEDIUMTYPE 415, -EAGAIN 429 (a limit), -EPROTO 502
 *   (the workspace's agent broke its protocol), -ENOTCONN 503 (agent not
 *   connected), -ENOSPC 507,
 *   -ENOTSUP 501, anything else 500. */

#include <errno.h>
#include <stdarg.h>

/* 403: the sandbox's user may not do it. -EPERM stays 500 (a failure of ours); this errno is
 * one no call on those paths returns. */
#define STATION_EFORBIDDEN (-EKEYREJECTED)

struct station_error {
	int err;	/* -errno; 0 when unset */
	char field[64]; /* "" when not about a request field */
	char message[512];
};

/* Sets *e (when e is non-NULL) and returns err, so callers can `return station_error_set(…)`. */
int station_error_set(struct station_error *e, int err, const char *field, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
