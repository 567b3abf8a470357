/* SPDX-License-Identifier: MIT */
#pragma once

/* The agent's request parsers that are static in their files (run.c, pty.c, credential.c),
 * each reached through a wrapper in agent-parse-<file>.c, which includes its file whole: the
 * real parser, called without spawning anything. Each returns the parser's result after
 * reading every byte of what it accepted (and releasing it). */

#include <stdbool.h>
#include <stddef.h>

#include "proto/frame.h"

/* RUN_START (run.c). */
int fuzz_agent_run_start(const struct frame *f);
/* TERM_OPEN (pty.c). */
int fuzz_agent_term_open(const struct frame *f);
/* TERM_INPUT, TERM_RESIZE, TERM_ATTACH, TERM_CLOSE (pty.c). */
int fuzz_agent_term_small(const struct frame *f);
/* CRED_REPLY from the controller (credential.c). */
int fuzz_agent_cred_reply(const struct frame *f);
/* What git's credential helper sent over the agent's credential socket (credential.c): the
 * sandbox's own processes write it. */
int fuzz_agent_cred_request(const char *data, size_t len, bool eof);
