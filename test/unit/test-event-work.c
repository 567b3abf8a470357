/* SPDX-License-Identifier: MIT */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "basic/log.h"
#include "event/event.h"
#include "event/work.h"

struct job {
	int order;	  /* the job's place in the queue */
	pthread_t thread; /* where fn ran */
	bool ran, done, cancelled, done_on_loop;
	int *n_done;
	struct event_work_pool *pool;
	int loop_value; /* set by the call on the loop */
	int *gate;	/* fn waits for *gate != 0 (a job that is "hung") */
	pthread_t loop_thread;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static void on_loop(void *userdata)
{
	struct job *j = userdata;
	j->loop_value = pthread_equal(pthread_self(), j->loop_thread) ? 42 : -1;
}

static void job_fn(void *userdata)
{
	struct job *j = userdata;
	j->thread = pthread_self();
	for (;;) {
		pthread_mutex_lock(&lock);
		bool open = !j->gate || *j->gate;
		pthread_mutex_unlock(&lock);
		if (open)
			break;
		usleep(1000);
	}
	event_work_call_on_loop(j->pool, on_loop, j);
	j->ran = true;
}

static void job_done(void *userdata, bool cancelled)
{
	struct job *j = userdata;
	j->done = true;
	j->cancelled = cancelled;
	j->done_on_loop = pthread_equal(pthread_self(), j->loop_thread);
	(*j->n_done)++;
}

static void run_until(struct event_loop *loop, int *n_done, int want)
{
	for (int i = 0; i < 10000 && *n_done < want; i++)
		cr_assert_geq(event_loop_run_once(loop, 100), 0);
	cr_assert_eq(*n_done, want, "%d of %d jobs done", *n_done, want);
}

Test(event_work, jobs_run_off_the_loop_and_end_on_it)
{
	struct event_loop *loop = NULL;
	struct event_work_pool *pool = NULL;
	struct job jobs[8] = { 0 };
	int n_done = 0;
	cr_assert_eq(event_loop_new(&loop), 0);
	cr_assert_eq(event_work_pool_new(loop, 3, &pool), 0);
	for (int i = 0; i < 8; i++) {
		jobs[i] = (struct job){ .order = i,
					.n_done = &n_done,
					.pool = pool,
					.loop_thread = pthread_self() };
		cr_assert_eq(event_work_queue(pool, job_fn, job_done, &jobs[i]), 0);
	}
	run_until(loop, &n_done, 8);
	for (int i = 0; i < 8; i++) {
		cr_assert(jobs[i].ran && jobs[i].done && !jobs[i].cancelled);
		cr_assert(!pthread_equal(jobs[i].thread, pthread_self()), "job %d ran on the loop",
			  i);
		cr_assert(jobs[i].done_on_loop, "job %d's done ran off the loop", i);
		cr_assert_eq(jobs[i].loop_value, 42, "job %d's call did not run on the loop", i);
	}
	event_work_pool_free(pool);
	event_loop_free(loop);
}

/* A hung job holds one thread, not the loop and not the other jobs. */
Test(event_work, a_hung_job_holds_only_its_thread)
{
	struct event_loop *loop = NULL;
	struct event_work_pool *pool = NULL;
	struct job hung = { 0 }, other = { 0 };
	int gate = 0, n_done = 0;
	cr_assert_eq(event_loop_new(&loop), 0);
	cr_assert_eq(event_work_pool_new(loop, 2, &pool), 0);
	hung = (struct job){ .n_done = &n_done,
			     .pool = pool,
			     .gate = &gate,
			     .loop_thread = pthread_self() };
	other = (struct job){ .n_done = &n_done, .pool = pool, .loop_thread = pthread_self() };
	cr_assert_eq(event_work_queue(pool, job_fn, job_done, &hung), 0);
	cr_assert_eq(event_work_queue(pool, job_fn, job_done, &other), 0);
	run_until(loop, &n_done, 1);
	cr_assert(other.done && !hung.done, "the other job ended first");
	pthread_mutex_lock(&lock);
	gate = 1;
	pthread_mutex_unlock(&lock);
	run_until(loop, &n_done, 2);
	cr_assert(hung.done && !hung.cancelled);
	event_work_pool_free(pool);
	event_loop_free(loop);
}

/* Freeing the pool waits for a running job (serving its call) and cancels queued ones. */
Test(event_work, free_cancels_what_did_not_start)
{
	struct event_loop *loop = NULL;
	struct event_work_pool *pool = NULL;
	struct job first = { 0 }, queued = { 0 };
	int gate = 1, n_done = 0;
	cr_assert_eq(event_loop_new(&loop), 0);
	cr_assert_eq(event_work_pool_new(loop, 1, &pool), 0);
	first = (struct job){ .n_done = &n_done,
			      .pool = pool,
			      .gate = &gate,
			      .loop_thread = pthread_self() };
	queued = (struct job){ .n_done = &n_done, .pool = pool, .loop_thread = pthread_self() };
	pthread_mutex_lock(&lock);
	gate = 0;
	pthread_mutex_unlock(&lock);
	cr_assert_eq(event_work_queue(pool, job_fn, job_done, &first), 0);
	cr_assert_eq(event_work_queue(pool, job_fn, job_done, &queued), 0);
	for (int i = 0; i < 10000 && event_work_running(pool) == 0; i++)
		usleep(1000);
	cr_assert_eq(event_work_running(pool), 1);
	pthread_mutex_lock(&lock);
	gate = 1;
	pthread_mutex_unlock(&lock);
	event_work_pool_free(pool);
	cr_assert(first.ran && first.done && first.loop_value == 42);
	cr_assert(!queued.ran && queued.done && queued.cancelled);
	event_loop_free(loop);
}

/* A timer callback that keeps the loop (and its CPU) for 3 ms. */
static int busy_timer(struct event_source *s, uint64_t now, void *userdata)
{
	uint64_t until = now_usec() + 3000;
	while (now_usec() < until)
		;
	(*(int *)userdata)++;
	return 0;
}

/* Runs busy_timer once with the log at level; returns what the log got. */
static void run_busy(enum log_level level, char *out, size_t n)
{
	struct event_loop *loop = NULL;
	struct event_source *t = NULL;
	int fds[2], fired = 0;
	cr_assert_eq(pipe2(fds, O_NONBLOCK), 0);
	log_setup(fds[1], LOG_FORMAT_TEXT, level, "test");
	cr_assert_eq(event_loop_new(&loop), 0);
	cr_assert_eq(event_add_timer(loop, &t, now_usec(), busy_timer, &fired), 0);
	for (int i = 0; i < 1000 && !fired; i++)
		cr_assert_geq(event_loop_run_once(loop, 100), 0);
	cr_assert_eq(fired, 1);
	ssize_t r = read(fds[0], out, n - 1);
	out[r > 0 ? r : 0] = 0;
	event_source_free(t);
	event_loop_free(loop);
	close(fds[0]);
	close(fds[1]);
}

/* At debug level a callback over 2 ms is logged with its wall and CPU time and where it is. */
Test(event_loop, slow_callback_logged_at_debug)
{
	char out[4096];
	run_busy(LOG_LEVEL_DEBUG, out, sizeof out);
	cr_assert(strstr(out, "slow event callback kind=timer ms="), "log: %s", out);
	cr_assert(strstr(out, " cpuMs=") && strstr(out, " fn=0x"), "log: %s", out);
}

/* The control: at info level nothing is measured or logged. */
Test(event_loop, slow_callback_silent_above_debug)
{
	char out[4096];
	run_busy(LOG_LEVEL_INFO, out, sizeof out);
	cr_assert_str_eq(out, "");
}
