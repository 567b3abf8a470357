/* SPDX-License-Identifier: MIT */
/* A worker thread pool whose completions the event loop receives. See work.h. */
#include "work.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "event.h"

struct job {
	struct job *next;
	event_work_fn fn;
	event_work_done_fn done;
	void (*call)(void *userdata); /* a call on the loop (done is NULL) */
	bool *called;		      /* set by the loop once call ran */
	void *userdata;
};

struct event_work_pool {
	struct event_loop *loop;
	struct event_source *source;
	int efd;
	pthread_mutex_t lock;
	pthread_cond_t wake;   /* workers: a job is queued, or stop */
	pthread_cond_t served; /* callers of event_work_call_on_loop(): the call ran */
	struct job *queue, **queue_tail;
	struct job *finished, **finished_tail; /* finished jobs and calls, for the loop */
	unsigned max_threads, n_threads, n_idle, n_pending, n_running;
	pthread_t *threads;
	bool stop;
};

static void list_push(struct job ***tail, struct job *j)
{
	j->next = NULL;
	**tail = j;
	*tail = &j->next;
}

static void notify_loop(struct event_work_pool *p)
{
	uint64_t one = 1;
	(void)!write(p->efd, &one, sizeof one);
}

static void *worker_main(void *arg)
{
	struct event_work_pool *p = arg;
	pthread_mutex_lock(&p->lock);
	for (;;) {
		while (!p->queue && !p->stop) {
			p->n_idle++;
			pthread_cond_wait(&p->wake, &p->lock);
			p->n_idle--;
		}
		if (p->stop)
			break;
		struct job *j = p->queue;
		p->queue = j->next;
		if (!p->queue)
			p->queue_tail = &p->queue;
		p->n_pending--;
		p->n_running++;
		pthread_mutex_unlock(&p->lock);
		j->fn(j->userdata);
		pthread_mutex_lock(&p->lock);
		p->n_running--;
		list_push(&p->finished_tail, j);
		notify_loop(p);
	}
	pthread_mutex_unlock(&p->lock);
	return NULL;
}

/* Takes the finished list and runs calls and dones; with the lock held on entry and exit. */
static void dispatch_locked(struct event_work_pool *p, bool cancelled)
{
	while (p->finished) {
		struct job *list = p->finished;
		p->finished = NULL;
		p->finished_tail = &p->finished;
		pthread_mutex_unlock(&p->lock);
		for (struct job *j = list, *next; j; j = next) {
			next = j->next;
			if (j->call) {
				j->call(j->userdata);
				pthread_mutex_lock(&p->lock);
				*j->called = true;
				pthread_cond_broadcast(&p->served);
				pthread_mutex_unlock(&p->lock);
				continue; /* the caller owns j */
			}
			j->done(j->userdata, cancelled);
			free(j);
		}
		pthread_mutex_lock(&p->lock);
	}
}

static int on_efd(struct event_source *s, int fd, uint32_t revents, void *userdata)
{
	struct event_work_pool *p = userdata;
	uint64_t n;
	(void)!read(p->efd, &n, sizeof n);
	pthread_mutex_lock(&p->lock);
	dispatch_locked(p, false);
	pthread_mutex_unlock(&p->lock);
	return 0;
}

int event_work_pool_new(struct event_loop *loop, unsigned threads, struct event_work_pool **ret)
{
	struct event_work_pool *p = calloc(1, sizeof *p);
	if (!p)
		return -ENOMEM;
	p->loop = loop;
	p->max_threads = threads ? threads : 1;
	p->queue_tail = &p->queue;
	p->finished_tail = &p->finished;
	p->threads = calloc(p->max_threads, sizeof *p->threads);
	p->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (!p->threads || p->efd < 0 ||
	    event_add_io(loop, &p->source, p->efd, EPOLLIN, on_efd, p) < 0) {
		int r = p->efd < 0 ? -errno : -ENOMEM;
		if (p->efd >= 0)
			close(p->efd);
		free(p->threads);
		free(p);
		return r;
	}
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->wake, NULL);
	pthread_cond_init(&p->served, NULL);
	*ret = p;
	return 0;
}

static int spawn_locked(struct event_work_pool *p)
{
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	int r = pthread_create(&p->threads[p->n_threads], NULL, worker_main, p);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (r != 0)
		return -r;
	p->n_threads++;
	return 0;
}

int event_work_queue(struct event_work_pool *p, event_work_fn fn, event_work_done_fn done,
		     void *userdata)
{
	struct job *j = calloc(1, sizeof *j);
	if (!j)
		return -ENOMEM;
	*j = (struct job){ .fn = fn, .done = done, .userdata = userdata };
	pthread_mutex_lock(&p->lock);
	if (p->stop) {
		pthread_mutex_unlock(&p->lock);
		free(j);
		return -ECANCELED;
	}
	int r = 0;
	if (p->n_idle <= p->n_pending && p->n_threads < p->max_threads)
		r = spawn_locked(p);
	if (r < 0 && p->n_threads == 0) {
		pthread_mutex_unlock(&p->lock);
		free(j);
		return r;
	}
	list_push(&p->queue_tail, j);
	p->n_pending++;
	pthread_cond_signal(&p->wake);
	pthread_mutex_unlock(&p->lock);
	return 0;
}

unsigned event_work_pending(const struct event_work_pool *p)
{
	return __atomic_load_n(&p->n_pending, __ATOMIC_RELAXED);
}

unsigned event_work_running(const struct event_work_pool *p)
{
	return __atomic_load_n(&p->n_running, __ATOMIC_RELAXED);
}

void event_work_call_on_loop(struct event_work_pool *p, void (*fn)(void *userdata), void *userdata)
{
	bool called = false;
	struct job j = { .call = fn, .called = &called, .userdata = userdata };
	pthread_mutex_lock(&p->lock);
	list_push(&p->finished_tail, &j);
	notify_loop(p);
	while (!called)
		pthread_cond_wait(&p->served, &p->lock);
	pthread_mutex_unlock(&p->lock);
}

void event_work_pool_free(struct event_work_pool *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->lock);
	p->stop = true;
	pthread_cond_broadcast(&p->wake);
	/* Running jobs finish; their calls on the loop are served here meanwhile. */
	while (p->n_running > 0) {
		dispatch_locked(p, false);
		if (p->n_running == 0)
			break;
		pthread_mutex_unlock(&p->lock);
		uint64_t n;
		struct timespec ts = { 0, 10 * 1000 * 1000 };
		if (read(p->efd, &n, sizeof n) < 0)
			nanosleep(&ts, NULL);
		pthread_mutex_lock(&p->lock);
	}
	dispatch_locked(p, false);
	struct job *queued = p->queue;
	p->queue = NULL;
	p->queue_tail = &p->queue;
	pthread_mutex_unlock(&p->lock);
	for (unsigned i = 0; i < p->n_threads; i++)
		pthread_join(p->threads[i], NULL);
	for (struct job *j = queued, *next; j; j = next) {
		next = j->next;
		j->done(j->userdata, true);
		free(j);
	}
	event_source_free(p->source);
	close(p->efd);
	pthread_cond_destroy(&p->wake);
	pthread_cond_destroy(&p->served);
	pthread_mutex_destroy(&p->lock);
	free(p->threads);
	free(p);
}
