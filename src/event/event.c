/* SPDX-License-Identifier: MIT */
#include "event.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>

#include "basic/cleanup.h"
#include "basic/log.h"

enum source_type { SOURCE_IO, SOURCE_TIMER, SOURCE_SIGNAL };

struct event_source {
	struct event_loop *loop;
	enum source_type type;
	bool dead;
	int fd;		    /* io: the caller's fd; signal: our signalfd */
	uint32_t io_events; /* io: what epoll watches for now */
	int signo;
	uint64_t time;	   /* timer: absolute, UINT64_MAX when disarmed */
	size_t heap_index; /* timer: position in loop->heap, SIZE_MAX when not queued */
	union {
		event_io_fn io;
		event_timer_fn timer;
		event_signal_fn signal;
	} fn;
	void *userdata;
	struct event_source *next_dead;
};

struct event_loop {
	int epoll_fd;
	bool exit_requested;
	int exit_code;
	struct event_source **heap;
	size_t heap_len, heap_cap;
	struct event_source *dead;
};

uint64_t now_usec(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

uint64_t realtime_usec(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

int event_loop_new(struct event_loop **ret)
{
	struct event_loop *loop = calloc(1, sizeof *loop);
	if (!loop)
		return -ENOMEM;
	loop->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
	if (loop->epoll_fd < 0) {
		int r = negative_errno();
		free(loop);
		return r;
	}
	*ret = loop;
	return 0;
}

static void free_dead(struct event_loop *loop)
{
	while (loop->dead) {
		struct event_source *s = loop->dead;
		loop->dead = s->next_dead;
		free(s);
	}
}

void event_loop_free(struct event_loop *loop)
{
	if (!loop)
		return;
	free_dead(loop);
	free(loop->heap);
	close(loop->epoll_fd);
	free(loop);
}

void event_loop_exit(struct event_loop *loop, int code)
{
	loop->exit_requested = true;
	loop->exit_code = code;
}

/* Timer heap: a binary min-heap on time. */

static void heap_swap(struct event_loop *loop, size_t a, size_t b)
{
	struct event_source *t = loop->heap[a];
	loop->heap[a] = loop->heap[b];
	loop->heap[b] = t;
	loop->heap[a]->heap_index = a;
	loop->heap[b]->heap_index = b;
}

static void heap_up(struct event_loop *loop, size_t i)
{
	while (i > 0) {
		size_t parent = (i - 1) / 2;
		if (loop->heap[parent]->time <= loop->heap[i]->time)
			break;
		heap_swap(loop, i, parent);
		i = parent;
	}
}

static void heap_down(struct event_loop *loop, size_t i)
{
	for (;;) {
		size_t l = 2 * i + 1, r = l + 1, min = i;
		if (l < loop->heap_len && loop->heap[l]->time < loop->heap[min]->time)
			min = l;
		if (r < loop->heap_len && loop->heap[r]->time < loop->heap[min]->time)
			min = r;
		if (min == i)
			break;
		heap_swap(loop, i, min);
		i = min;
	}
}

static void heap_remove(struct event_loop *loop, struct event_source *s)
{
	size_t i = s->heap_index;
	if (i == SIZE_MAX)
		return;
	s->heap_index = SIZE_MAX;
	loop->heap_len--;
	if (i == loop->heap_len)
		return;
	loop->heap[i] = loop->heap[loop->heap_len];
	loop->heap[i]->heap_index = i;
	heap_down(loop, i);
	heap_up(loop, i);
}

static int heap_insert(struct event_loop *loop, struct event_source *s)
{
	if (loop->heap_len == loop->heap_cap) {
		size_t cap = loop->heap_cap ? loop->heap_cap * 2 : 64;
		struct event_source **h = realloc(loop->heap, cap * sizeof *h);
		if (!h)
			return -ENOMEM;
		loop->heap = h;
		loop->heap_cap = cap;
	}
	s->heap_index = loop->heap_len;
	loop->heap[loop->heap_len++] = s;
	heap_up(loop, s->heap_index);
	return 0;
}

static struct event_source *source_new(struct event_loop *loop, enum source_type type,
				       void *userdata)
{
	struct event_source *s = calloc(1, sizeof *s);
	if (!s)
		return NULL;
	s->loop = loop;
	s->type = type;
	s->fd = -1;
	s->time = UINT64_MAX;
	s->heap_index = SIZE_MAX;
	s->userdata = userdata;
	return s;
}

int event_add_io(struct event_loop *loop, struct event_source **ret, int fd, uint32_t events,
		 event_io_fn fn, void *userdata)
{
	struct event_source *s = source_new(loop, SOURCE_IO, userdata);
	if (!s)
		return -ENOMEM;
	s->fd = fd;
	s->fn.io = fn;
	struct epoll_event ev = { .events = events, .data.ptr = s };
	if (epoll_ctl(loop->epoll_fd, EPOLL_CTL_ADD, fd, &ev) < 0) {
		int r = negative_errno();
		free(s);
		return r;
	}
	s->io_events = events;
	*ret = s;
	return 0;
}

int event_source_set_io_events(struct event_source *s, uint32_t events)
{
	struct epoll_event ev = { .events = events, .data.ptr = s };
	if (s->type != SOURCE_IO || s->dead)
		return -EINVAL;
	/* level-triggered only: the same events again would change nothing (a system call per
	 * frame sent on the agent links) */
	if (events == s->io_events)
		return 0;
	if (epoll_ctl(s->loop->epoll_fd, EPOLL_CTL_MOD, s->fd, &ev) < 0)
		return negative_errno();
	s->io_events = events;
	return 0;
}

int event_add_timer(struct event_loop *loop, struct event_source **ret, uint64_t usec,
		    event_timer_fn fn, void *userdata)
{
	struct event_source *s = source_new(loop, SOURCE_TIMER, userdata);
	if (!s)
		return -ENOMEM;
	s->fn.timer = fn;
	int r = event_source_set_time(s, usec);
	if (r < 0) {
		free(s);
		return r;
	}
	*ret = s;
	return 0;
}

int event_source_set_time(struct event_source *s, uint64_t usec)
{
	if (s->type != SOURCE_TIMER || s->dead)
		return -EINVAL;
	heap_remove(s->loop, s);
	s->time = usec;
	if (usec == UINT64_MAX)
		return 0;
	return heap_insert(s->loop, s);
}

int event_add_signal(struct event_loop *loop, struct event_source **ret, int signo,
		     event_signal_fn fn, void *userdata)
{
	sigset_t mask;
	sigemptyset(&mask);
	sigaddset(&mask, signo);
	if (sigprocmask(SIG_BLOCK, &mask, NULL) < 0)
		return negative_errno();
	_cleanup_close_ int fd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
	if (fd < 0)
		return negative_errno();
	struct event_source *s = source_new(loop, SOURCE_SIGNAL, userdata);
	if (!s)
		return -ENOMEM;
	s->fn.signal = fn;
	s->signo = signo;
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = s };
	if (epoll_ctl(loop->epoll_fd, EPOLL_CTL_ADD, fd, &ev) < 0) {
		int r = negative_errno();
		free(s);
		return r;
	}
	s->fd = TAKE_FD(fd);
	*ret = s;
	return 0;
}

void event_source_free(struct event_source *s)
{
	if (!s || s->dead)
		return;
	struct event_loop *loop = s->loop;
	switch (s->type) {
	case SOURCE_IO:
		epoll_ctl(loop->epoll_fd, EPOLL_CTL_DEL, s->fd, NULL);
		break;
	case SOURCE_TIMER:
		heap_remove(loop, s);
		break;
	case SOURCE_SIGNAL:
		epoll_ctl(loop->epoll_fd, EPOLL_CTL_DEL, s->fd, NULL);
		close(s->fd);
		break;
	}
	s->dead = true;
	s->next_dead = loop->dead;
	loop->dead = s;
}

/* At debug level, a callback that held the loop for longer than this is logged with its wall
 * time, the loop thread's CPU time in it, and the callback's offset in the executable
 * (`addr2line -f -e BINARY OFFSET` names it): what stalls the loop is found by reading the
 * log of a run at --log-level debug. Otherwise nothing is measured. */
#define SLOW_CALLBACK_USEC 2000

extern const char __executable_start[];

static uint64_t thread_cpu_usec(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

struct callback_clock {
	bool on;
	uint64_t wall, cpu;
};

static struct callback_clock clock_start(bool on)
{
	return on ? (struct callback_clock){ true, now_usec(), thread_cpu_usec() } :
		    (struct callback_clock){ false, 0, 0 };
}

static void note_slow(const char *kind, const void *fn, struct callback_clock c0)
{
	if (!c0.on)
		return;
	uint64_t wall = now_usec() - c0.wall;
	if (wall < SLOW_CALLBACK_USEC)
		return;
	uint64_t cpu = thread_cpu_usec() - c0.cpu;
	char w[32], c[32], f[32];
	snprintf(w, sizeof w, "%.3f", (double)wall / 1000);
	snprintf(c, sizeof c, "%.3f", (double)cpu / 1000);
	snprintf(f, sizeof f, "%#tx", (const char *)fn - __executable_start);
	log_debug("slow event callback", "kind", kind, "ms", w, "cpuMs", c, "fn", f, NULL);
}

static int dispatch_signal(struct event_source *s)
{
	struct signalfd_siginfo si;
	for (;;) {
		ssize_t n = read(s->fd, &si, sizeof si);
		if (n < 0)
			return errno == EAGAIN || errno == EINTR ? 0 : negative_errno();
		if (n != sizeof si)
			return 0;
		int r = s->fn.signal(s, &si, s->userdata);
		if (r < 0 || s->dead)
			return r;
	}
}

static int dispatch_timers(struct event_loop *loop)
{
	bool timed = log_level_enabled(LOG_LEVEL_DEBUG);
	uint64_t now = now_usec();
	while (loop->heap_len > 0 && loop->heap[0]->time <= now && !loop->exit_requested) {
		struct event_source *s = loop->heap[0];
		heap_remove(loop, s);
		s->time = UINT64_MAX;
		const void *fn = (const void *)s->fn.timer;
		struct callback_clock c0 = clock_start(timed);
		int r = s->fn.timer(s, now, s->userdata);
		note_slow("timer", fn, c0);
		if (r < 0)
			return r;
	}
	return 0;
}

static struct timespec wait_timeout(struct event_loop *loop, int timeout_ms, bool *ret_infinite)
{
	uint64_t wait = timeout_ms < 0 ? UINT64_MAX : (uint64_t)timeout_ms * 1000;
	if (loop->heap_len > 0) {
		uint64_t now = now_usec(), next = loop->heap[0]->time;
		wait = MIN(wait, next > now ? next - now : 0);
	}
	*ret_infinite = wait == UINT64_MAX;
	return (struct timespec){ .tv_sec = (time_t)(wait / 1000000),
				  .tv_nsec = (long)(wait % 1000000) * 1000 };
}

int event_loop_run_once(struct event_loop *loop, int timeout_ms)
{
	struct epoll_event events[64];
	bool infinite;
	struct timespec ts = wait_timeout(loop, timeout_ms, &infinite);
	int n = epoll_pwait2(loop->epoll_fd, events, (int)ELEMENTSOF(events), infinite ? NULL : &ts,
			     NULL);
	if (n < 0)
		return errno == EINTR ? 0 : negative_errno();

	int r = 0;
	bool timed = log_level_enabled(LOG_LEVEL_DEBUG);
	for (int i = 0; i < n && r >= 0 && !loop->exit_requested; i++) {
		struct event_source *s = events[i].data.ptr;
		if (s->dead)
			continue;
		const void *fn = s->type == SOURCE_SIGNAL ? (const void *)s->fn.signal :
							    (const void *)s->fn.io;
		struct callback_clock c0 = clock_start(timed);
		if (s->type == SOURCE_SIGNAL)
			r = dispatch_signal(s);
		else
			r = s->fn.io(s, s->fd, events[i].events, s->userdata);
		note_slow(s->type == SOURCE_SIGNAL ? "signal" : "io", fn, c0);
	}
	if (r >= 0 && !loop->exit_requested)
		r = dispatch_timers(loop);
	free_dead(loop);
	return r;
}

int event_loop_run(struct event_loop *loop)
{
	while (!loop->exit_requested) {
		int r = event_loop_run_once(loop, -1);
		if (r < 0)
			return r;
	}
	return loop->exit_code;
}
