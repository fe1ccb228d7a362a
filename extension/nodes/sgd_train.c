/*-------------------------------------------------------------------------
 *
 * sgd_train.c
 *	  SGD's weights, and the three ways an epoch is trained: on the main
 *	  thread, double buffered with the helper thread, or with workers.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "utils/memutils.h"

#include "core/worker.h"
#include "nodes/sgd_state.h"

/* how often (ms) the main thread looks for interrupts while it waits */
#define CP_WAIT_POLL_MS 10

/* Allocate the weights once the dimension is known (first non-empty buffer). */
void
cp_sgd_ensure_model(SgdState *s)
{
	MemoryContext old;
	int			n_outputs;
	bool		sparse;

	if (s->model_ready)
		return;
	n_outputs = s->lo->classes ? s->lo->classes->n_classes : 1;
	sparse = cp_layout_sparse_rows(s->lo);
	cp_check_model_size(s->params.model, s->lo->n_features, n_outputs,
						sparse, s->params.batch_size, s->lo->relname);
	old = MemoryContextSwitchTo(s->train_cxt);
	if (!cp_model_init(&s->model, s->params.model, s->lo->n_features,
					   n_outputs, sparse, s->params.batch_size, s->params.l2,
					   s->params.l1, palloc0))
		elog(ERROR, "corgipile: model sizes do not fit");	/* checked above */
	/* one-hot rows are sparse to save memory, regularised as dense ones */
	s->model.reg_all = s->lo->has_onehot;
	if (s->params.average)
		cp_model_average_init(&s->model,
							  palloc0(mul_size(sizeof(double), s->model.n_weights)));
	/* the default schedule: squared loss steps implicitly (core) */
	s->model.normalized_step = s->params.default_rate && s->params.average &&
		s->params.model == CP_MODEL_LINEAR;
	if (s->src->wants_feedback)
		cp_sgd_init_grab(s);
	MemoryContextSwitchTo(old);
	if (s->warm != NULL)
		cp_sgd_warm_weights(s);
	if (s->round != NULL)
	{
		s->model.l2 = s->params.l2;
		cp_sgd_round_weights(s);
	}
	s->model.learning_rate = s->learning_rate;
	s->model_ready = true;
}

/* The job a buffer gets: permute it, then train on it in that order. */
static void
sgd_job_run(void *arg)
{
	SgdJob	   *job = (SgdJob *) arg;

	cp_tuple_source_permute(job->src, job->buf);
	job->reached = cp_model_train(job->model, job->buf, 0, job->cancel);
}

/*
 * Count the labels of a buffer the first epoch trains on, on the main
 * thread, before the buffer is handed to the helper (which only permutes
 * its order).
 */
static void
note_labels(SgdState *s, const CpBuffer *buf)
{
	if (s->n_done > 0 || buf->n_rows == 0)
		return;
	if (s->label_counts == NULL && s->params.model != CP_MODEL_LINEAR)
	{
		s->n_label_counts = s->params.model == CP_MODEL_SOFTMAX && s->lo->classes ?
			s->lo->classes->n_classes : 2;
		s->label_counts = MemoryContextAllocZero(s->train_cxt,
												 sizeof(int64) * s->n_label_counts);
	}
	for (int64 i = 0; s->label_counts != NULL && i < buf->n_rows; i++)
	{
		double		y = buf->labels[i];
		int			k = s->params.model == CP_MODEL_SOFTMAX ? (int) y : (y > 0.0);

		if (k >= 0 && k < s->n_label_counts)
			s->label_counts[k]++;
	}
	s->label_n += buf->n_rows;
}

void
cp_sgd_train_single_buffered(SgdState *s)
{
	CpBuffer   *buf = &s->bufs[0];
	CpCancel	cancel;

	/* the main thread trains: the signal handlers' own flag stops it */
	cp_cancel_init(&cancel, &InterruptPending);
	while (cp_tuple_source_fill(s->src, buf))
	{
		int64		pos = 0;

		if (buf->n_rows == 0)
			continue;
		note_labels(s, buf);
		cp_sgd_ensure_model(s);
		cp_tuple_source_permute(s->src, buf);

		/*
		 * Stop at a row boundary whenever an interrupt is pending, serve it,
		 * and carry on from the same row: the result does not depend on
		 * when interrupts arrive.
		 */
		while ((pos = cp_model_train(&s->model, buf, pos, &cancel)) < buf->n_rows)
			CHECK_FOR_INTERRUPTS();
		cp_sgd_note_sample(s, buf);
	}
}

static void
wait_for_job(SgdState *s)
{
	while (!cp_worker_wait(&s->worker, CP_WAIT_POLL_MS))
		CHECK_FOR_INTERRUPTS();
	if (s->job.reached != s->job.buf->n_rows)
		elog(ERROR, "corgipile: training of a buffer was cut short");
}

void
cp_sgd_train_double_buffered(SgdState *s)
{
	CpBuffer   *cur = &s->bufs[0];
	CpBuffer   *next = &s->bufs[1];
	bool		have;

	if (!s->worker.started)
	{
		int			rc = cp_worker_start(&s->worker);

		if (rc != 0)
			ereport(ERROR,
					(errcode(ERRCODE_INSUFFICIENT_RESOURCES),
					 errmsg("corgipile: could not start the double-buffering thread: %s",
							strerror(rc)),
					 errhint("Train with double_buffer => false.")));
	}

	have = cp_tuple_source_fill(s->src, cur);
	if (have)
		note_labels(s, cur);
	while (have)
	{
		bool		submitted = false;
		bool		have_next;
		CpBuffer   *tmp;

		if (cur->n_rows > 0)
		{
			cp_sgd_ensure_model(s);
			s->job.src = s->src;
			s->job.buf = cur;
			s->job.model = &s->model;
			s->job.cancel = &s->worker.cancel;
			s->job.reached = 0;
			cp_worker_submit(&s->worker, sgd_job_run, &s->job);
			submitted = true;
		}
		/* load the next buffer while the helper trains on this one */
		have_next = cp_tuple_source_fill(s->src, next);
		if (submitted)
		{
			wait_for_job(s);
			cp_sgd_note_sample(s, cur);
		}
		if (have_next)
			note_labels(s, next);
		tmp = cur;
		cur = next;
		next = tmp;
		have = have_next;
	}
}

/*
 * workers => N: the epoch is trained by the leader and the workers
 * (parallel.c).  Before the first epoch the leader reads its first buffer
 * alone, so that the weights have their shape.
 */
void
cp_sgd_train_parallel(SgdState *s)
{
	if (!cp_parallel_prefill(s->par, &s->bufs[0], !s->model_ready) && !s->model_ready)
		return;					/* no rows at all: cp_sgd_run_epoch says so */
	cp_sgd_ensure_model(s);
	cp_parallel_run_epoch(s->par, &s->model, &s->bufs[0], s->n_done);
}
