/*-------------------------------------------------------------------------
 *
 * worker.h
 *	  The helper thread of double buffering.
 *
 * One job at a time: the main thread submits a function over memory it has
 * prepared, goes on loading the next buffer, then waits for the job.  The
 * thread starts with every signal blocked, so signals keep going to the
 * backend's main thread, and a job polls the cancel flag so that stopping
 * is prompt.  Nothing here calls into the server.
 *
 *-------------------------------------------------------------------------
 */
#ifndef CORGIPILE_WORKER_H
#define CORGIPILE_WORKER_H

#include "c.h"

#include <pthread.h>
#include <signal.h>

#include "linear_model.h"

typedef void (*CpJobFn) (void *arg);

typedef struct CpWorker
{
	pthread_t	thread;
	bool		started;
	pthread_mutex_t mutex;
	pthread_cond_t cond;
	CpJobFn		fn;
	void	   *arg;
	bool		pending;		/* a job is submitted and not yet done */
	bool		quit;			/* the thread should exit */
	CpCancel	cancel;			/* raised (from the main thread) to cut the
								 * running job short; the job polls it */
} CpWorker;

extern int	cp_worker_start(CpWorker *w);
extern void cp_worker_submit(CpWorker *w, CpJobFn fn, void *arg);
extern bool cp_worker_wait(CpWorker *w, int timeout_ms);
extern void cp_worker_stop(CpWorker *w);

#endif							/* CORGIPILE_WORKER_H */
