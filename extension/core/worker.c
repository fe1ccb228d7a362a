/*-------------------------------------------------------------------------
 *
 * worker.c
 *	  A single helper thread that runs one job at a time.
 *
 *-------------------------------------------------------------------------
 */
#include "c.h"

#include <errno.h>
#include <string.h>
#include <time.h>

#include "worker.h"

static void *
worker_main(void *arg)
{
	CpWorker   *w = (CpWorker *) arg;

	pthread_mutex_lock(&w->mutex);
	for (;;)
	{
		CpJobFn		fn;
		void	   *job_arg;

		while (!w->quit && !(w->pending && w->fn != NULL))
			pthread_cond_wait(&w->cond, &w->mutex);
		if (w->quit)
			break;
		fn = w->fn;
		job_arg = w->arg;
		w->fn = NULL;
		pthread_mutex_unlock(&w->mutex);

		fn(job_arg);

		pthread_mutex_lock(&w->mutex);
		w->pending = false;
		pthread_cond_broadcast(&w->cond);
	}
	w->pending = false;
	pthread_cond_broadcast(&w->cond);
	pthread_mutex_unlock(&w->mutex);
	return NULL;
}

/*
 * Start the thread with all signals blocked: the backend's signal handlers
 * must only ever run on the main thread.  Returns 0 or an errno value.
 */
int
cp_worker_start(CpWorker *w)
{
	sigset_t	all;
	sigset_t	old;
	int			rc;

	memset(w, 0, sizeof(*w));
	cp_cancel_init(&w->cancel, NULL);
	pthread_mutex_init(&w->mutex, NULL);
	pthread_cond_init(&w->cond, NULL);

	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = pthread_create(&w->thread, NULL, worker_main, w);
	pthread_sigmask(SIG_SETMASK, &old, NULL);

	if (rc != 0)
	{
		pthread_cond_destroy(&w->cond);
		pthread_mutex_destroy(&w->mutex);
		return rc;
	}
	w->started = true;
	return 0;
}

void
cp_worker_submit(CpWorker *w, CpJobFn fn, void *arg)
{
	pthread_mutex_lock(&w->mutex);
	w->fn = fn;
	w->arg = arg;
	w->pending = true;
	pthread_cond_broadcast(&w->cond);
	pthread_mutex_unlock(&w->mutex);
}

/*
 * Wait up to timeout_ms for the submitted job.  Returns true once it is
 * done.  The caller loops, checking for interrupts between calls.
 */
bool
cp_worker_wait(CpWorker *w, int timeout_ms)
{
	struct timespec deadline;
	bool		done;

	clock_gettime(CLOCK_REALTIME, &deadline);
	deadline.tv_nsec += (long) timeout_ms * 1000000L;
	deadline.tv_sec += deadline.tv_nsec / 1000000000L;
	deadline.tv_nsec %= 1000000000L;

	pthread_mutex_lock(&w->mutex);
	while (w->pending)
	{
		if (pthread_cond_timedwait(&w->cond, &w->mutex, &deadline) == ETIMEDOUT)
			break;
	}
	done = !w->pending;
	pthread_mutex_unlock(&w->mutex);
	return done;
}

/*
 * Cut any running job short and join the thread.  Safe to call more than
 * once and on a worker that never started; this is what every exit path,
 * error and cancel included, calls.
 */
void
cp_worker_stop(CpWorker *w)
{
	if (!w->started)
		return;
	cp_cancel_raise(&w->cancel);
	pthread_mutex_lock(&w->mutex);
	w->quit = true;
	pthread_cond_broadcast(&w->cond);
	pthread_mutex_unlock(&w->mutex);
	pthread_join(w->thread, NULL);
	pthread_cond_destroy(&w->cond);
	pthread_mutex_destroy(&w->mutex);
	w->started = false;
}
