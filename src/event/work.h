/* SPDX-License-Identifier: MIT */
#pragma once

/* Slow work off the event loop: a small pool of threads runs queued jobs; each job's done
 * callback then runs on the loop thread (woken through an eventfd). A job gets plain inputs
 * and fills plain results: loop state (the store, the manager's lists) stays loop-only. A job
 * that needs a short piece of loop work in its middle calls event_work_call_on_loop(), which
 * runs that piece on the loop and returns to the job.
 *
 * Jobs start in the order they were queued, at most `threads` at once (threads are made as
 * work arrives, none while idle at start). Worker threads block every signal: the loop's
 * signalfds keep receiving them. */

#include <stdbool.h>

struct event_loop;
struct event_work_pool;

/* Runs on a worker thread. */
typedef void (*event_work_fn)(void *userdata);
/* Runs on the loop thread once fn returned; cancelled: the pool is being freed and fn never
 * ran (free what the job holds, touch nothing else). */
typedef void (*event_work_done_fn)(void *userdata, bool cancelled);

int event_work_pool_new(struct event_loop *loop, unsigned threads, struct event_work_pool **ret);
/* Waits for running jobs (serving their calls on the loop), cancels queued ones and calls
 * every outstanding done. NULL is fine. */
void event_work_pool_free(struct event_work_pool *p);

/* -ECANCELED once the pool is being freed (from a done called by event_work_pool_free()). */
int event_work_queue(struct event_work_pool *p, event_work_fn fn, event_work_done_fn done,
		     void *userdata);
/* Jobs queued and not started, and jobs running. */
unsigned event_work_pending(const struct event_work_pool *p);
unsigned event_work_running(const struct event_work_pool *p);

/* From a job: runs fn(userdata) on the loop thread and returns once it has. */
void event_work_call_on_loop(struct event_work_pool *p, void (*fn)(void *userdata), void *userdata);
