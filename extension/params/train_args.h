/*-------------------------------------------------------------------------
 *
 * train_args.h
 *	  The one list of corgipile.train()'s parameters: position, name, SQL
 *	  type, default.  Everything else is generated from it: the CpArg enum,
 *	  the names in error messages, the argument types of the fallback
 *	  re-plan (train.c), and the argument list shuffled_scan() is spelt as
 *	  (planner.c).
 *
 * The SQL signature (sql/corgipile--*.sql) must say the same: the test
 * tests/python/test_train_signature.py compares this file with pg_proc's
 * corgipile.train, column by column, defaults as pg_get_function_arguments()
 * prints them.  The Python client reads the signature from pg_proc.
 *
 * CP_TRAIN_ARG(ID, name, type oid, C default: is_null, C default: datum,
 *              default as pg_get_function_arguments() prints it, or NULL
 *              when the parameter is required)
 *
 *-------------------------------------------------------------------------
 */
#ifndef CORGIPILE_TRAIN_ARGS_H
#define CORGIPILE_TRAIN_ARGS_H

#define CP_TRAIN_ARGS(X) \
	X(RELATION, relation, REGCLASSOID, true, (Datum) 0, NULL) \
	X(MODEL, model, TEXTOID, true, (Datum) 0, NULL) \
	X(MODEL_NAME, model_name, TEXTOID, true, (Datum) 0, "NULL::text") \
	X(LABEL, label, TEXTOID, false, CStringGetTextDatum("label"), "'label'::text") \
	X(FEATURES, features, TEXTOID, false, CStringGetTextDatum("features"), "'features'::text") \
	X(FEATURE_INDICES, feature_indices, TEXTOID, true, (Datum) 0, "NULL::text") \
	X(N_FEATURES, n_features, INT4OID, true, (Datum) 0, "NULL::integer") \
	X(SHUFFLE, shuffle, TEXTOID, false, CStringGetTextDatum("corgipile"), "'corgipile'::text") \
	X(LEARNING_RATE, learning_rate, FLOAT8OID, true, (Datum) 0, "NULL::double precision") \
	X(DECAY, decay, FLOAT8OID, false, Float8GetDatum(0.95), "0.95") \
	X(MAX_EPOCH_NUM, max_epoch_num, INT4OID, true, (Datum) 0, "NULL::integer") \
	X(BATCH_SIZE, batch_size, INT4OID, false, Int32GetDatum(1), "1") \
	X(L2, l2, FLOAT8OID, true, (Datum) 0, "NULL::double precision") \
	X(BLOCK_SIZE, block_size, TEXTOID, true, (Datum) 0, "NULL::text") \
	X(BUFFER_SIZE, buffer_size, TEXTOID, true, (Datum) 0, "NULL::text") \
	X(SEED, seed, INT8OID, true, (Datum) 0, "NULL::bigint") \
	X(DOUBLE_BUFFER, double_buffer, BOOLOID, false, BoolGetDatum(true), "true") \
	X(VALIDATION, validation, TEXTOID, true, (Datum) 0, "NULL::text") \
	X(L1, l1, FLOAT8OID, false, Float8GetDatum(0.0), "0") \
	X(TOLERANCE, tolerance, FLOAT8OID, true, (Datum) 0, "NULL::double precision") \
	X(N_ITER_NO_CHANGE, n_iter_no_change, INT4OID, true, (Datum) 0, "NULL::integer") \
	X(WARM_START, warm_start, TEXTOID, true, (Datum) 0, "NULL::text") \
	X(STANDARDIZE, standardize, TEXTOID, false, CStringGetTextDatum("auto"), "'auto'::text") \
	X(MAX_CATEGORIES, max_categories, INT4OID, false, Int32GetDatum(1000), "1000") \
	X(WORKERS, workers, INT4OID, false, Int32GetDatum(1), "1") \
	X(AVERAGE, average, BOOLOID, true, (Datum) 0, "NULL::boolean") \
	X(MISSING, missing, TEXTOID, false, CStringGetTextDatum("skip"), "'skip'::text") \
	X(MISSING_INDICATOR, missing_indicator, BOOLOID, false, BoolGetDatum(false), "false")

#endif							/* CORGIPILE_TRAIN_ARGS_H */
