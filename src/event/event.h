/* SPDX-License-Identifier: MIT */
#pragma once

/* A small single-threaded epoll loop: fd sources, one-shot timers on CLOCK_MONOTONIC, signals
 * through signalfd. Sources may be freed from inside any callback, their own included; the loop
 * frees them after the current dispatch. Used by the controller and the agent (libc only). */

#include <stdbool.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>

struct event_loop;
struct event_source;

/* Return < 0 to stop the loop with that error (event_loop_run returns it). */
typedef int (*event_io_fn)(struct event_source *s, int fd, uint32_t revents, void *userdata);
typedef int (*event_timer_fn)(struct event_source *s, uint64_t now_usec, void *userdata);
/* si says who sent it: ssi_pid is 0 when the sender is outside our pid namespace. */
typedef int (*event_signal_fn)(struct event_source *s, const struct signalfd_siginfo *si,
			       void *userdata);

int event_loop_new(struct event_loop **ret);
void event_loop_free(struct event_loop *loop);

/* Runs until event_loop_exit() or a callback fails. Returns the exit code or the error. */
int event_loop_run(struct event_loop *loop);
void event_loop_exit(struct event_loop *loop, int code);

/* One iteration, waiting at most timeout_ms (-1: until something happens). */
int event_loop_run_once(struct event_loop *loop, int timeout_ms);

/* fd sources: events are EPOLLIN/EPOLLOUT/... (level-triggered: no EPOLLET, no EPOLLONESHOT;
 * setting the events a source has already is a no-op); the fd stays owned by the caller. */
int event_add_io(struct event_loop *loop, struct event_source **ret, int fd, uint32_t events,
		 event_io_fn fn, void *userdata);
int event_source_set_io_events(struct event_source *s, uint32_t events);

/* One-shot timer at an absolute CLOCK_MONOTONIC time in microseconds. UINT64_MAX disarms.
 * A timer may be re-armed with event_source_set_time(), also from its own callback. */
int event_add_timer(struct event_loop *loop, struct event_source **ret, uint64_t usec,
		    event_timer_fn fn, void *userdata);
int event_source_set_time(struct event_source *s, uint64_t usec);

/* Blocks the signal in this thread and delivers it through a signalfd. */
int event_add_signal(struct event_loop *loop, struct event_source **ret, int signo,
		     event_signal_fn fn, void *userdata);

/* Removes and frees the source; NULL is fine. */
void event_source_free(struct event_source *s);

/* CLOCK_MONOTONIC and CLOCK_REALTIME in microseconds. */
uint64_t now_usec(void);
uint64_t realtime_usec(void);
