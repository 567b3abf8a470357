/* SPDX-License-Identifier: MIT */
#pragma once

#include <jansson.h>
#include <stdint.h>

struct ws_count {
	uint64_t delivered, gaps; /* data bytes received, bytes announced as missed */
	uint64_t stdout_bytes;	  /* from the end message */
	double duration_ms;
	const char *go_path; /* created once the first byte arrived (NULL: none) */
	double go_ms;	     /* when (CLOCK_MONOTONIC, ms) */
};

/* Creates c->go_path once (the run waits for it before its real output), noting the time. */
void bench_go(struct ws_count *c);

/* Follows a run's output over WebSocket on the unix socket endpoint ("unix:/path" or a path)
 * until the end message. 0, or -errno (-EPROTO for an answer that is not the protocol's). */
int bench_ws_follow(const char *endpoint, const char *ws, const char *run, struct ws_count *ret);

/* The same over server-sent events (GET …/output, HTTP/1.0, no upgrade), the way curl users read
 * it: lines parsed, the base64 data decoded. */
int bench_sse_follow(const char *endpoint, const char *ws, const char *run, struct ws_count *ret);
