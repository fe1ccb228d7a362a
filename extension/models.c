/*-------------------------------------------------------------------------
 *
 * models.c
 *	  The model catalog: storage, privileges and validation.
 *
 * Models are stored in corgipile.model_store, which no role but the
 * extension's owner may read or write; roles read the security-barrier
 * view corgipile.models.  Every write goes through a function here, which
 * first checks the caller's rights (GetUserId()) and then runs its query
 * as the storage's owner, under a pinned search_path and in a
 * security-restricted operation, so that nothing a user defined can run
 * inside it.
 *
 * A model row is data, not code we trust: cp_models_load() validates every
 * field before predict() or evaluate() reads it, whoever wrote it (a
 * superuser may still write the storage directly).
 *
 * Training inserts its row in the caller's transaction, so a rolled-back
 * training leaves nothing and a committed one is as durable as any row.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "common/int.h"
#include "common/shortest_dec.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "lib/stringinfo.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/json.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"

#include "models.h"

PG_FUNCTION_INFO_V1(corgipile_drop_model);
PG_FUNCTION_INFO_V1(corgipile_rename_model);
PG_FUNCTION_INFO_V1(corgipile_grant_model);
PG_FUNCTION_INFO_V1(corgipile_revoke_model);
PG_FUNCTION_INFO_V1(corgipile_reassign_models);
PG_FUNCTION_INFO_V1(corgipile_import_model);
PG_FUNCTION_INFO_V1(corgipile_annotate_model);

/*
 * The longest model name, in bytes.  Longer than an identifier: clients
 * compose names from a table, a model kind, settings and a counter.
 */
#define CP_MODEL_NAME_MAX 255

/* What cp_models_as_owner() saves, to be restored by cp_models_as_caller(). */
typedef struct CpAsOwner
{
	Oid			save_userid;
	int			save_sec_context;
	int			save_nestlevel;
} CpAsOwner;

/*
 * The owner of corgipile.model_store: the role whose rights our queries on
 * the storage run with.
 */
static Oid
store_owner(void)
{
	Oid			nsp = get_namespace_oid("corgipile", false);
	Oid			relid = get_relname_relid("model_store", nsp);
	HeapTuple	tup;
	Oid			owner;

	if (!OidIsValid(relid))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the corgipile extension in this database is older than its library"),
				 errdetail("corgipile.model_store does not exist."),
				 errhint("Run ALTER EXTENSION corgipile UPDATE.")));
	tup = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for relation %u", relid);
	owner = ((Form_pg_class) GETSTRUCT(tup))->relowner;
	ReleaseSysCache(tup);
	return owner;
}

/*
 * Switch to the storage's owner, in a security-restricted operation, with
 * search_path pinned to pg_catalog.  The caller's rights must have been
 * checked before.  An error in between is cleaned up by the (sub)transaction
 * abort, which restores the user id and unwinds the GUC nest level.
 */
static void
as_owner(CpAsOwner *s)
{
	Oid			owner = store_owner();

	GetUserIdAndSecContext(&s->save_userid, &s->save_sec_context);
	s->save_nestlevel = NewGUCNestLevel();
	(void) set_config_option("search_path", "pg_catalog, pg_temp",
							 PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	SetUserIdAndSecContext(owner, s->save_sec_context |
						   SECURITY_LOCAL_USERID_CHANGE |
						   SECURITY_RESTRICTED_OPERATION);
}

static void
as_caller(CpAsOwner *s)
{
	AtEOXact_GUC(false, s->save_nestlevel);
	SetUserIdAndSecContext(s->save_userid, s->save_sec_context);
}

/*
 * Run one query on the storage as its owner; returns SPI_processed.  The
 * SPI result stays readable until SPI_finish(), which the caller does: the
 * caller must have called SPI_connect().
 */
static uint64
store_query(const char *sql, int nargs, Oid *argtypes, Datum *args,
			const char *nulls, bool read_only, int expected)
{
	CpAsOwner	s;
	int			rc;

	as_owner(&s);
	PG_TRY();
	{
		rc = SPI_execute_with_args(sql, nargs, argtypes, args, nulls, read_only, 0);
	}
	PG_CATCH();
	{
		SetUserIdAndSecContext(s.save_userid, s.save_sec_context);
		PG_RE_THROW();
	}
	PG_END_TRY();
	as_caller(&s);
	if (rc != expected)
		elog(ERROR, "corgipile: query on corgipile.model_store failed: %s",
			 SPI_result_code_string(rc));
	return SPI_processed;
}

static void
no_such_model(const char *model_name)
{
	ereport(ERROR,
			(errcode(ERRCODE_UNDEFINED_OBJECT),
			 errmsg("model \"%s\" does not exist", model_name),
			 errhint("List the models you may use with SELECT model_name FROM corgipile.models.")));
}

/*
 * Whether the current role may manage (drop, rename, grant) a model of this
 * owner: superusers, and the owner role and roles with its privileges.  An
 * orphaned owner (a dropped role's OID, or 0) is nobody's but superusers'.
 */
static bool
may_own(Oid owner)
{
	return has_privs_of_role(GetUserId(), owner);
}

/* The owner, or one of the roles granted USAGE. */
static bool
may_use(Oid owner, const Oid *usage, int n_usage)
{
	Oid			me = GetUserId();

	if (has_privs_of_role(me, owner))
		return true;
	for (int i = 0; i < n_usage; i++)
		if (OidIsValid(usage[i]) && has_privs_of_role(me, usage[i]))
			return true;
	return false;
}

/*
 * The owner of a model, read as the storage's owner; errors if there is no
 * such model.  Must run between SPI_connect() and SPI_finish().
 */
static Oid
model_owner(const char *model_name)
{
	Oid			argtypes[1] = {TEXTOID};
	Datum		args[1];
	bool		isnull;

	args[0] = CStringGetTextDatum(model_name);
	if (store_query("SELECT s.owner_id FROM corgipile.model_store AS s "
					"WHERE s.model_name OPERATOR(pg_catalog.=) $1",
					1, argtypes, args, NULL, true, SPI_OK_SELECT) == 0)
		no_such_model(model_name);
	return DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[0],
										  SPI_tuptable->tupdesc, 1, &isnull));
}

static void
check_owner(const char *model_name, const char *action)
{
	if (!may_own(model_owner(model_name)))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("must be owner of model \"%s\" to %s it", model_name, action),
				 errhint("Only the model's owner, members of the owner role and superusers may %s a model.",
						 action)));
}

/*
 * A name for a model trained without model_name: relation_kind_N, with the
 * relation's name clipped so the whole stays within CP_MODEL_NAME_MAX.
 */
char *
cp_models_new_name(Relation rel, CpModelKind kind)
{
	const char *relname = RelationGetRelationName(rel);
	const char *kind_name = cp_model_kind_name(kind);
	Oid			argtypes[3] = {TEXTOID, TEXTOID, INT4OID};
	Datum		args[3];
	bool		isnull;
	char	   *name;
	MemoryContext caller = CurrentMemoryContext;
	int			room;

	/* "_", kind, "_" and up to 20 digits of the sequence */
	room = CP_MODEL_NAME_MAX - (int) strlen(kind_name) - 22;
	args[0] = CStringGetTextDatum(relname);
	args[1] = CStringGetTextDatum(kind_name);
	args[2] = Int32GetDatum(pg_mbcliplen(relname, strlen(relname), Max(room, 1)));
	SPI_connect();
	store_query("SELECT pg_catalog.format('%s_%s_%s', pg_catalog.\"left\"($1, $3), $2, "
				"pg_catalog.nextval('corgipile.model_name_seq'::pg_catalog.regclass))",
				3, argtypes, args, NULL, false, SPI_OK_SELECT);
	name = TextDatumGetCString(SPI_getbinval(SPI_tuptable->vals[0],
											 SPI_tuptable->tupdesc, 1, &isnull));
	name = MemoryContextStrdup(caller, name);
	SPI_finish();
	return name;
}

/*
 * Check a name for a new model before any work is done: not empty, at most
 * CP_MODEL_NAME_MAX bytes, not taken.  Names are global, like role names:
 * a name taken by a model the caller cannot see is still taken.  The right
 * to create models is the right to execute corgipile.train() or
 * corgipile.import_model(), which the executor has checked.
 */
void
cp_models_check_new_name(const char *model_name)
{
	Oid			argtypes[1] = {TEXTOID};
	Datum		args[1];
	bool		exists;
	size_t		len = strlen(model_name);

	if (len == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("model_name must not be empty"),
				 errhint("Pass a name, or NULL for a generated one.")));
	if (len > CP_MODEL_NAME_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_NAME_TOO_LONG),
				 errmsg("model_name \"%s\" is too long (%zu bytes)", model_name, len),
				 errhint("Model names are at most %d bytes.", CP_MODEL_NAME_MAX)));

	args[0] = CStringGetTextDatum(model_name);
	SPI_connect();
	exists = store_query("SELECT 1 FROM corgipile.model_store AS s "
						 "WHERE s.model_name OPERATOR(pg_catalog.=) $1",
						 1, argtypes, args, NULL, true, SPI_OK_SELECT) > 0;
	SPI_finish();
	if (exists)
		ereport(ERROR,
				(errcode(ERRCODE_DUPLICATE_OBJECT),
				 errmsg("model \"%s\" already exists", model_name),
				 errhint("Choose another model_name, or remove the old model with corgipile.drop_model('%s').",
						 model_name)));
}

/* Kept for sgd.c's call site: the same checks. */
void
cp_models_check_absent(const char *model_name)
{
	cp_models_check_new_name(model_name);
}

static void
json_number(StringInfo buf, double v)
{
	if (isfinite(v))
	{
		char		num[DOUBLE_SHORTEST_DECIMAL_LEN];

		/* the shortest text that reads back as the same double */
		double_to_shortest_decimal_buf(v, num);
		appendStringInfoString(buf, num);
	}
	else
		appendStringInfoString(buf, "null");
}

static void
json_key_string(StringInfo buf, const char *key, const char *value, bool comma)
{
	if (comma)
		appendStringInfoString(buf, ", ");
	escape_json(buf, key);
	appendStringInfoString(buf, ": ");
	if (value)
		escape_json(buf, value);
	else
		appendStringInfoString(buf, "null");
}

static void
json_key_number(StringInfo buf, const char *key, double value)
{
	appendStringInfoString(buf, ", ");
	escape_json(buf, key);
	appendStringInfoString(buf, ": ");
	json_number(buf, value);
}

static char *
params_json(const CpTrainRecord *rec)
{
	const CpTrainParams *p = rec->params;
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfoChar(&buf, '{');
	json_key_string(&buf, "shuffle", cp_shuffle_name(p->shuffle), false);
	json_key_number(&buf, "learning_rate", p->learning_rate);
	json_key_number(&buf, "decay", p->decay);
	json_key_number(&buf, "max_epoch_num", p->max_epoch_num);
	json_key_number(&buf, "batch_size", p->batch_size);
	json_key_number(&buf, "l2", p->l2);
	json_key_string(&buf, "block_size", p->block_size.unit == CP_SIZE_UNSET ? NULL :
					cp_size_to_string(&p->block_size), true);
	json_key_string(&buf, "buffer_size", cp_size_to_string(&p->buffer_size), true);
	json_key_number(&buf, "pages_per_block", rec->sizing->pages_per_block);
	json_key_number(&buf, "blocks_per_buffer", rec->sizing->blocks_per_buffer);
	json_key_number(&buf, "n_blocks", rec->sizing->n_blocks);
	/* as text: a bigint seed need not fit a double */
	json_key_string(&buf, "seed", psprintf(INT64_FORMAT, rec->seed), true);
	json_key_string(&buf, "double_buffer", p->double_buffer ? "true" : "false", true);
	json_key_string(&buf, "layout", cp_layout_mode_name(rec->layout->mode), true);
	json_key_string(&buf, "validation", rec->validation_name, true);
	json_key_number(&buf, "l1", p->l1);
	json_key_number(&buf, "tolerance", p->early_stopping ? p->tolerance : NAN);
	json_key_number(&buf, "n_iter_no_change", p->n_iter_no_change);
	json_key_number(&buf, "best_epoch", rec->best_epoch);
	json_key_number(&buf, "n_outputs", rec->model->n_outputs);
	if (rec->held_rows > 0 && rec->held_rows_key != NULL)
		json_key_number(&buf, rec->held_rows_key, (double) rec->held_rows);
	if (rec->grab)
	{
		json_key_string(&buf, "grab_granularity", "block", true);
		json_key_string(&buf, "grab_buffer_shuffle",
						rec->grab_buffer_shuffle ? "true" : "false", true);
		json_key_number(&buf, "grab_pages_per_block", rec->sizing->pages_per_block);
		json_key_number(&buf, "grab_n_blocks", rec->sizing->n_blocks);
		json_key_number(&buf, "grab_n_pages", rec->sizing->n_pages);
		json_key_number(&buf, "grab_dim", rec->grab_dim);
		json_key_string(&buf, "grab_projected",
						rec->grab_dim < rec->grab_n_weights ? "true" : "false", true);
		json_key_string(&buf, "grab_state", rec->grab_state, true);
	}
	appendStringInfoChar(&buf, '}');
	return buf.data;
}

static char *
history_json(const CpTrainRecord *rec)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfoChar(&buf, '[');
	for (int i = 0; i < rec->n_results; i++)
	{
		const CpEpochResult *r = &rec->results[i];

		if (i > 0)
			appendStringInfoString(&buf, ", ");
		appendStringInfo(&buf, "{\"epoch\": %d, \"tuples\": " INT64_FORMAT,
						 r->epoch, r->tuples);
		json_key_number(&buf, "loss", r->loss);
		json_key_number(&buf, "score", r->score);
		json_key_number(&buf, "validation_score",
						r->has_validation ? r->validation_score : NAN);
		json_key_number(&buf, "validation_loss",
						r->has_validation ? r->validation_loss : NAN);
		json_key_number(&buf, "seconds", r->seconds);
		appendStringInfoChar(&buf, '}');
	}
	appendStringInfoChar(&buf, ']');
	return buf.data;
}

/*
 * The table's label for each class, as JSON: booleans, numbers or strings.
 * Binary models: the labels of the internal -1 and +1 (-1/+1 also when
 * only positives were seen); softmax: every class in class order.
 */
static char *
classes_json(const CpLayout *lo)
{
	StringInfoData buf;

	if (lo->model == CP_MODEL_LINEAR)
		return NULL;
	if (lo->model != CP_MODEL_SOFTMAX)
	{
		if (lo->label_type == BOOLOID)
			return "[false, true]";
		if (lo->seen_zero)
			return "[0, 1]";
		return "[-1, 1]";
	}
	initStringInfo(&buf);
	appendStringInfoChar(&buf, '[');
	for (int k = 0; k < lo->classes->n_classes; k++)
	{
		if (k > 0)
			appendStringInfoString(&buf, ", ");
		if (lo->classes->is_text)
			escape_json(&buf, lo->classes->names[k]);
		else
			appendStringInfoString(&buf, lo->classes->names[k]);
	}
	appendStringInfoChar(&buf, ']');
	return buf.data;
}

void
cp_models_insert(const CpTrainRecord *rec)
{
	Oid			argtypes[13] = {TEXTOID, TEXTOID, TEXTOID, TEXTOID, TEXTARRAYOID,
		TEXTOID, INT4OID, FLOAT8ARRAYOID, TEXTOID, TEXTOID, TEXTOID, OIDOID, OIDOID};
	Datum		args[13];
	char		nulls[13];
	Datum	   *names;
	Datum	   *weights;
	int			n_names = list_length(rec->layout->feature_names);
	ListCell   *lc;
	char	   *classes = classes_json(rec->layout);
	Relation	rel = rec->rel;

	memset(nulls, ' ', sizeof(nulls));
	names = palloc(sizeof(Datum) * n_names);
	foreach(lc, rec->layout->feature_names)
		names[foreach_current_index(lc)] = CStringGetTextDatum(lfirst(lc));
	weights = palloc_array(Datum, rec->model->n_weights);
	for (int j = 0; j < rec->model->n_weights; j++)
		weights[j] = Float8GetDatum(rec->weights[j]);

	args[0] = CStringGetTextDatum(rec->model_name);
	args[1] = CStringGetTextDatum(cp_model_kind_name(rec->params->model));
	args[2] = CStringGetTextDatum(quote_qualified_identifier(get_namespace_name(RelationGetNamespace(rel)),
															 RelationGetRelationName(rel)));
	args[3] = CStringGetTextDatum(rec->layout->label_name);
	args[4] = PointerGetDatum(construct_array(names, n_names, TEXTOID, -1, false,
											  TYPALIGN_INT));
	if (rec->layout->indices_name)
		args[5] = CStringGetTextDatum(rec->layout->indices_name);
	else
		nulls[5] = 'n';
	args[6] = Int32GetDatum(rec->model->n_features);
	args[7] = PointerGetDatum(construct_array(weights, rec->model->n_weights,
											  FLOAT8OID, sizeof(float8),
											  FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
	if (classes)
		args[8] = CStringGetTextDatum(classes);
	else
		nulls[8] = 'n';
	args[9] = CStringGetTextDatum(params_json(rec));
	args[10] = CStringGetTextDatum(history_json(rec));
	/* the role that trains owns the model */
	args[11] = ObjectIdGetDatum(GetUserId());
	args[12] = ObjectIdGetDatum(RelationGetRelid(rel));

	SPI_connect();
	store_query("INSERT INTO corgipile.model_store (model_name, model, relation, "
				"label, features, feature_indices, n_features, weights, classes, "
				"params, history, owner_id, relid) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, "
				"$9::pg_catalog.jsonb, $10::pg_catalog.jsonb, $11::pg_catalog.jsonb, $12, $13)",
				13, argtypes, args, nulls, false, SPI_OK_INSERT);
	SPI_finish();
}

/* A damaged model row: an error that names the model and the field. */
#define damaged(model_name, field, ...) \
	ereport(ERROR, \
			(errcode(ERRCODE_DATA_CORRUPTED), \
			 errmsg("model \"%s\" is damaged: column %s is invalid", (model_name), (field)), \
			 errdetail(__VA_ARGS__), \
			 errhint("Drop the model with corgipile.drop_model() and train it again.")))

/* A text[] column as C strings; every element non-NULL and non-empty. */
static List *
text_list(const char *model_name, const char *field, Datum d)
{
	ArrayType  *arr = DatumGetArrayTypeP(d);
	Datum	   *elems;
	bool	   *elem_nulls;
	int			n;
	List	   *out = NIL;

	if (ARR_NDIM(arr) > 1)
		damaged(model_name, field, "It is a %d-dimensional array.", ARR_NDIM(arr));
	deconstruct_array(arr, TEXTOID, -1, false, TYPALIGN_INT, &elems, &elem_nulls, &n);
	for (int i = 0; i < n; i++)
	{
		char	   *s;

		if (elem_nulls[i])
			damaged(model_name, field, "Element %d is NULL.", i + 1);
		s = TextDatumGetCString(elems[i]);
		if (s[0] == '\0')
			damaged(model_name, field, "Element %d is empty.", i + 1);
		out = lappend(out, s);
	}
	return out;
}

/* A text column as a C string, or NULL. */
static char *
text_or_null(HeapTuple tup, TupleDesc desc, int col)
{
	bool		isnull;
	Datum		d = SPI_getbinval(tup, desc, col, &isnull);

	return isnull ? NULL : TextDatumGetCString(d);
}

/*
 * Load a model for prediction, after checking that the current role may use
 * it, and validate every field so that a damaged row is an error, never a
 * wrong read.  The result is allocated in the caller's memory context.
 */
CpStoredModel *
cp_models_load(const char *model_name)
{
	Oid			argtypes[1] = {TEXTOID};
	Datum		args[1];
	MemoryContext caller = CurrentMemoryContext;
	MemoryContext old;
	CpStoredModel *m;
	HeapTuple	tup;
	TupleDesc	desc;
	bool		isnull;
	Datum		d;
	char	   *kind;
	char	   *layout;
	char	   *classes_type;
	char	   *class_type = NULL;
	Datum	   *elems;
	bool	   *elem_nulls;
	int			n_elems;
	int			n_features_columns;
	int32		width;
	int32		expected;
	ArrayType  *arr;

	args[0] = CStringGetTextDatum(model_name);
	SPI_connect();

	/*
	 * The classes are unpacked by the query: their JSON types (checked
	 * below) and their text.  A non-array classes value unpacks to nothing
	 * and its type says so.
	 */
	if (store_query("SELECT s.model, s.n_features, s.weights, "
					"pg_catalog.jsonb_typeof(s.classes), "
					"ARRAY(SELECT pg_catalog.jsonb_typeof(e.v) FROM pg_catalog.jsonb_array_elements("
					"  CASE WHEN pg_catalog.jsonb_typeof(s.classes) OPERATOR(pg_catalog.=) 'array' "
					"  THEN s.classes END) AS e(v)), "
					"ARRAY(SELECT e.v FROM pg_catalog.jsonb_array_elements_text("
					"  CASE WHEN pg_catalog.jsonb_typeof(s.classes) OPERATOR(pg_catalog.=) 'array' "
					"  THEN s.classes END) AS e(v)), "
					"s.params OPERATOR(pg_catalog.->>) 'layout', s.features, "
					"s.feature_indices, s.label, s.owner_id, s.usage_roles, "
					"s.params OPERATOR(pg_catalog.->>) 'grab_state', "
					"s.params OPERATOR(pg_catalog.->>) 'grab_pages_per_block', s.relid "
					"FROM corgipile.model_store AS s "
					"WHERE s.model_name OPERATOR(pg_catalog.=) $1",
					1, argtypes, args, NULL, true, SPI_OK_SELECT) == 0)
		no_such_model(model_name);
	tup = SPI_tuptable->vals[0];
	desc = SPI_tuptable->tupdesc;

	old = MemoryContextSwitchTo(caller);
	m = palloc0(sizeof(CpStoredModel));
	m->model_name = pstrdup(model_name);

	/* privileges first: a role without USAGE learns nothing of the row */
	d = SPI_getbinval(tup, desc, 11, &isnull);
	m->owner = isnull ? InvalidOid : DatumGetObjectId(d);
	d = SPI_getbinval(tup, desc, 12, &isnull);
	if (!isnull)
	{
		arr = DatumGetArrayTypeP(d);
		deconstruct_array(arr, OIDOID, sizeof(Oid), true, TYPALIGN_INT,
						  &elems, &elem_nulls, &n_elems);
		m->usage = palloc(sizeof(Oid) * Max(n_elems, 1));
		for (int i = 0; i < n_elems; i++)
			if (!elem_nulls[i])
				m->usage[m->n_usage++] = DatumGetObjectId(elems[i]);
	}
	if (!may_use(m->owner, m->usage, m->n_usage))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for model \"%s\"", model_name),
				 errhint("The model's owner can grant USAGE with corgipile.grant_model('%s', role).",
						 model_name)));

	m->grab_state = text_or_null(tup, desc, 13);
	d = SPI_getbinval(tup, desc, 15, &isnull);
	m->relid = isnull ? InvalidOid : DatumGetObjectId(d);
	{
		char	   *ppb = text_or_null(tup, desc, 14);

		m->grab_pages_per_block = ppb ? strtoll(ppb, NULL, 10) : 0;
	}

	kind = text_or_null(tup, desc, 1);
	if (kind == NULL || !cp_parse_model_kind(kind, &m->kind))
		damaged(model_name, "model", "The kind \"%s\" is not svm, logistic, linear or softmax.",
				kind ? kind : "NULL");

	d = SPI_getbinval(tup, desc, 2, &isnull);
	if (isnull || DatumGetInt32(d) <= 0)
		damaged(model_name, "n_features", "n_features is %s; it must be positive.",
				isnull ? "NULL" : psprintf("%d", DatumGetInt32(d)));
	m->n_features = DatumGetInt32(d);

	/* the weights: n_outputs blocks of n_features + 1, no NULL, finite */
	d = SPI_getbinval(tup, desc, 3, &isnull);
	if (isnull)
		damaged(model_name, "weights", "The weights are NULL.");
	arr = DatumGetArrayTypeP(d);
	if (ARR_NDIM(arr) != 1)
		damaged(model_name, "weights", "The weights are a %d-dimensional array; expected one dimension.",
				ARR_NDIM(arr));
	if (array_contains_nulls(arr))
		damaged(model_name, "weights", "The weights contain a NULL.");
	n_elems = ArrayGetNItems(ARR_NDIM(arr), ARR_DIMS(arr));
	if (pg_add_s32_overflow(m->n_features, 1, &width))
		damaged(model_name, "n_features", "n_features %d is too large.", m->n_features);
	m->n_outputs = (m->kind == CP_MODEL_SOFTMAX) ? n_elems / width : 1;
	if (m->n_outputs < 1 ||
		pg_mul_s32_overflow(m->n_outputs, width, &expected) ||
		expected != n_elems ||
		(m->kind == CP_MODEL_SOFTMAX && m->n_outputs < 2))
		damaged(model_name, "weights",
				"%d weights do not fit %d features plus a bias%s.",
				n_elems, m->n_features,
				m->kind == CP_MODEL_SOFTMAX ? " for two or more classes" : "");
	m->weights = MemoryContextAllocHuge(caller, mul_size(sizeof(double), n_elems));
	memcpy(m->weights, ARR_DATA_PTR(arr), mul_size(sizeof(double), n_elems));
	for (int j = 0; j < n_elems; j++)
		if (!isfinite(m->weights[j]))
			damaged(model_name, "weights", "Weight %d is not a finite number.", j + 1);

	/*
	 * The classes: none for linear models; two for binary classifiers; one
	 * per output for softmax.  All strings, all numbers or all booleans.
	 */
	classes_type = text_or_null(tup, desc, 4);
	if (m->kind == CP_MODEL_LINEAR)
	{
		if (classes_type != NULL && strcmp(classes_type, "null") != 0)
			damaged(model_name, "classes", "A linear model has no classes.");
	}
	else
	{
		int			want = m->kind == CP_MODEL_SOFTMAX ? m->n_outputs : 2;
		List	   *types;
		ListCell   *lc;

		if (classes_type == NULL || strcmp(classes_type, "array") != 0)
		{
			if (classes_type == NULL)
				damaged(model_name, "classes", "The classes are NULL; expected a JSON array.");
			damaged(model_name, "classes", "The classes are a JSON %s; expected a JSON array.",
					classes_type);
		}
		types = text_list(model_name, "classes", SPI_getbinval(tup, desc, 5, &isnull));
		if (list_length(types) != want)
			damaged(model_name, "classes", "There are %d classes; a %s model with %d outputs has %d.",
					list_length(types), kind, m->n_outputs, want);
		foreach(lc, types)
		{
			char	   *t = lfirst(lc);

			if (strcmp(t, "string") != 0 && strcmp(t, "number") != 0 &&
				strcmp(t, "boolean") != 0)
				damaged(model_name, "classes", "Class %d is a JSON %s; classes are strings, numbers or booleans.",
						foreach_current_index(lc) + 1, t);
			if (class_type != NULL && strcmp(class_type, t) != 0)
				damaged(model_name, "classes", "The classes mix JSON %ss and %ss.", class_type, t);
			class_type = t;
		}
		d = SPI_getbinval(tup, desc, 6, &isnull);
		deconstruct_array(DatumGetArrayTypeP(d), TEXTOID, -1, false, TYPALIGN_INT,
						  &elems, &elem_nulls, &n_elems);
		m->n_classes = n_elems;
		m->classes_are_text = strcmp(class_type, "string") == 0;
		m->class_names = palloc(sizeof(char *) * n_elems);
		m->class_values = palloc(sizeof(double) * n_elems);
		for (int k = 0; k < n_elems; k++)
		{
			char	   *name = TextDatumGetCString(elems[k]);

			m->class_names[k] = name;
			m->class_values[k] = strcmp(name, "true") == 0 ? 1.0 :
				strcmp(name, "false") == 0 ? 0.0 : strtod(name, NULL);
		}
	}

	/* the features and how they are laid out */
	d = SPI_getbinval(tup, desc, 8, &isnull);
	if (isnull)
		damaged(model_name, "features", "The feature column list is NULL.");
	m->features = text_list(model_name, "features", d);
	n_features_columns = list_length(m->features);
	if (n_features_columns == 0)
		damaged(model_name, "features", "The feature column list is empty.");
	m->feature_indices = text_or_null(tup, desc, 9);
	if (m->feature_indices != NULL && m->feature_indices[0] == '\0')
		damaged(model_name, "feature_indices", "The index column's name is empty.");
	layout = text_or_null(tup, desc, 7);
	/* rows imported without params: the layout follows from the columns */
	if (layout == NULL)
		layout = m->feature_indices ? "sparse" : "array";
	if (strcmp(layout, "sparse") == 0)
		m->mode = CP_FEATURES_SPARSE;
	else if (strcmp(layout, "columns") == 0)
		m->mode = CP_FEATURES_COLUMNS;
	else if (strcmp(layout, "array") == 0)
		m->mode = CP_FEATURES_ARRAY;
	else
		damaged(model_name, "params", "The layout \"%s\" is not array, columns or sparse.", layout);
	if (m->mode == CP_FEATURES_SPARSE && m->feature_indices == NULL)
		damaged(model_name, "feature_indices", "A sparse model needs the name of its index column.");
	if (m->mode != CP_FEATURES_SPARSE && m->feature_indices != NULL)
		damaged(model_name, "feature_indices", "A model with the %s layout has no index column.", layout);
	if (m->mode == CP_FEATURES_COLUMNS && n_features_columns != m->n_features)
		damaged(model_name, "features", "%d feature columns for %d features.",
				n_features_columns, m->n_features);
	if (m->mode != CP_FEATURES_COLUMNS && n_features_columns != 1)
		damaged(model_name, "features", "A model with the %s layout has one feature column, not %d.",
				layout, n_features_columns);

	m->label = text_or_null(tup, desc, 10);
	if (m->label == NULL || m->label[0] == '\0')
		damaged(model_name, "label", "The label column's name is missing.");

	MemoryContextSwitchTo(old);
	SPI_finish();
	return m;
}

/* corgipile.drop_model(model_name text) */
Datum
corgipile_drop_model(PG_FUNCTION_ARGS)
{
	char	   *name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	Oid			argtypes[1] = {TEXTOID};
	Datum		args[1];

	SPI_connect();
	check_owner(name, "drop");
	args[0] = CStringGetTextDatum(name);
	store_query("DELETE FROM corgipile.model_store AS s "
				"WHERE s.model_name OPERATOR(pg_catalog.=) $1",
				1, argtypes, args, NULL, false, SPI_OK_DELETE);
	SPI_finish();
	PG_RETURN_VOID();
}

/* corgipile.rename_model(model_name text, new_name text) */
Datum
corgipile_rename_model(PG_FUNCTION_ARGS)
{
	char	   *name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	char	   *new_name = text_to_cstring(PG_GETARG_TEXT_PP(1));
	Oid			argtypes[2] = {TEXTOID, TEXTOID};
	Datum		args[2];

	SPI_connect();
	check_owner(name, "rename");
	SPI_finish();
	if (strcmp(name, new_name) == 0)
		PG_RETURN_VOID();
	cp_models_check_new_name(new_name);
	args[0] = CStringGetTextDatum(name);
	args[1] = CStringGetTextDatum(new_name);
	SPI_connect();
	store_query("UPDATE corgipile.model_store AS s SET model_name = $2 "
				"WHERE s.model_name OPERATOR(pg_catalog.=) $1",
				2, argtypes, args, NULL, false, SPI_OK_UPDATE);
	SPI_finish();
	PG_RETURN_VOID();
}

static void
check_role_exists(Oid role)
{
	if (!SearchSysCacheExists1(AUTHOID, ObjectIdGetDatum(role)))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("role with OID %u does not exist", role)));
}

static Datum
change_usage(FunctionCallInfo fcinfo, bool grant)
{
	char	   *name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	Oid			role = PG_GETARG_OID(1);
	Oid			argtypes[2] = {TEXTOID, OIDOID};
	Datum		args[2];

	SPI_connect();
	check_owner(name, grant ? "grant privileges on" : "revoke privileges on");
	if (grant)
		check_role_exists(role);
	args[0] = CStringGetTextDatum(name);
	args[1] = ObjectIdGetDatum(role);
	if (grant)
		store_query("UPDATE corgipile.model_store AS s "
					"SET usage_roles = pg_catalog.array_append(s.usage_roles, $2) "
					"WHERE s.model_name OPERATOR(pg_catalog.=) $1 "
					"AND NOT ($2 OPERATOR(pg_catalog.=) ANY (s.usage_roles))",
					2, argtypes, args, NULL, false, SPI_OK_UPDATE);
	else
		store_query("UPDATE corgipile.model_store AS s "
					"SET usage_roles = pg_catalog.array_remove(s.usage_roles, $2) "
					"WHERE s.model_name OPERATOR(pg_catalog.=) $1",
					2, argtypes, args, NULL, false, SPI_OK_UPDATE);
	SPI_finish();
	PG_RETURN_VOID();
}

/* corgipile.grant_model(model_name text, role regrole) */
Datum
corgipile_grant_model(PG_FUNCTION_ARGS)
{
	return change_usage(fcinfo, true);
}

/* corgipile.revoke_model(model_name text, role regrole) */
Datum
corgipile_revoke_model(PG_FUNCTION_ARGS)
{
	return change_usage(fcinfo, false);
}

/*
 * corgipile.reassign_models(old_role regrole, new_role regrole): superusers,
 * or a role with the privileges of both roles (as REASSIGN OWNED asks).
 * old_role may be the OID of a dropped role, whose models only superusers
 * can then reach.
 */
Datum
corgipile_reassign_models(PG_FUNCTION_ARGS)
{
	Oid			old_role = PG_GETARG_OID(0);
	Oid			new_role = PG_GETARG_OID(1);
	Oid			argtypes[2] = {OIDOID, OIDOID};
	Datum		args[2];
	uint64		n;

	check_role_exists(new_role);
	if (!superuser() &&
		!(OidIsValid(old_role) && has_privs_of_role(GetUserId(), old_role) &&
		  has_privs_of_role(GetUserId(), new_role)))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 SearchSysCacheExists1(AUTHOID, ObjectIdGetDatum(old_role)) ?
				 errmsg("permission denied to reassign the models of role \"%s\"",
						GetUserNameFromId(old_role, false)) :
				 errmsg("permission denied to reassign the models of a dropped role"),
				 errhint("Superusers, or roles with the privileges of both roles, may reassign models.")));
	args[0] = ObjectIdGetDatum(old_role);
	args[1] = ObjectIdGetDatum(new_role);
	SPI_connect();
	n = store_query("UPDATE corgipile.model_store AS s SET owner_id = $2 "
					"WHERE s.owner_id OPERATOR(pg_catalog.=) $1",
					2, argtypes, args, NULL, false, SPI_OK_UPDATE);
	SPI_finish();
	PG_RETURN_INT64((int64) n);
}

/*
 * corgipile.import_model(...): store a model exported from another
 * database, owned by the caller.  The row is inserted and then loaded as
 * predict() would load it, so it passes the same validation; a damaged
 * document is an error that rolls the insert back.  relid stays NULL: the
 * relation named is another database's.
 */
Datum
corgipile_import_model(PG_FUNCTION_ARGS)
{
	static const char *const required[] = {
		"model_name", "model", "relation", "label", "features", NULL,
		"n_features", "weights", NULL, "params", "history", NULL
	};
	Oid			argtypes[13] = {TEXTOID, TEXTOID, TEXTOID, TEXTOID, TEXTARRAYOID,
		TEXTOID, INT4OID, FLOAT8ARRAYOID, JSONBOID, JSONBOID, JSONBOID,
	TIMESTAMPTZOID, OIDOID};
	Datum		args[13];
	char		nulls[13];
	char	   *name;

	memset(nulls, ' ', sizeof(nulls));
	for (int i = 0; i < 12; i++)
	{
		if (PG_ARGISNULL(i))
		{
			if (required[i] != NULL)
				ereport(ERROR,
						(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
						 errmsg("%s must not be NULL", required[i])));
			nulls[i] = 'n';
			args[i] = (Datum) 0;
		}
		else
			args[i] = PG_GETARG_DATUM(i);
	}
	name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	cp_models_check_new_name(name);
	args[12] = ObjectIdGetDatum(GetUserId());

	SPI_connect();
	store_query("INSERT INTO corgipile.model_store (model_name, model, relation, "
				"label, features, feature_indices, n_features, weights, classes, "
				"params, history, created_at, owner_id) VALUES ($1, $2, $3, $4, $5, "
				"$6, $7, $8, $9, $10, $11, "
				"COALESCE($12, pg_catalog.now()), $13)",
				13, argtypes, args, nulls, false, SPI_OK_INSERT);
	SPI_finish();
	/* validate the row as predict() will read it: with a snapshot that sees it */
	CommandCounterIncrement();
	PushCopiedSnapshot(GetActiveSnapshot());
	UpdateActiveSnapshotCommandId();
	(void) cp_models_load(name);
	PopActiveSnapshot();
	PG_RETURN_VOID();
}

/*
 * corgipile.annotate_model(model_name text, relation text, notes jsonb): the
 * owner records where the training rows came from when they were not a
 * table (the client trains on a query through a temporary table).  relation
 * replaces the text shown (NULL keeps it; relid is left alone: it is what
 * visibility follows); notes may only add keys params does not have, so the
 * training's own record and what loading reads cannot be changed.
 */
Datum
corgipile_annotate_model(PG_FUNCTION_ARGS)
{
	char	   *name;
	Oid			argtypes[3] = {TEXTOID, TEXTOID, JSONBOID};
	Datum		args[3];
	char		nulls[3] = {' ', ' ', ' '};
	bool		clash;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("model_name must not be NULL")));
	name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	args[0] = CStringGetTextDatum(name);
	for (int i = 1; i < 3; i++)
	{
		if (PG_ARGISNULL(i))
		{
			nulls[i] = 'n';
			args[i] = (Datum) 0;
		}
		else
			args[i] = PG_GETARG_DATUM(i);
	}
	if (nulls[1] == ' ' && VARSIZE_ANY_EXHDR(DatumGetTextPP(args[1])) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("relation must not be empty")));

	SPI_connect();
	check_owner(name, "annotate");
	if (nulls[2] == ' ')
	{
		clash = store_query("SELECT 1 FROM corgipile.model_store AS s "
							"WHERE s.model_name OPERATOR(pg_catalog.=) $1 "
							"AND CASE WHEN pg_catalog.jsonb_typeof($3) OPERATOR(pg_catalog.=) 'object' "
							"THEN s.params OPERATOR(pg_catalog.?|) "
							"ARRAY(SELECT pg_catalog.jsonb_object_keys($3)) ELSE true END",
							3, argtypes, args, nulls, true, SPI_OK_SELECT) > 0;
		if (clash)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("notes for model \"%s\" must be a JSON object of keys its params do not have",
							name),
					 errhint("The training's own settings cannot be changed.")));
	}
	store_query("UPDATE corgipile.model_store AS s "
				"SET relation = COALESCE($2, s.relation), "
				"params = s.params OPERATOR(pg_catalog.||) COALESCE($3, '{}'::pg_catalog.jsonb) "
				"WHERE s.model_name OPERATOR(pg_catalog.=) $1",
				3, argtypes, args, nulls, false, SPI_OK_UPDATE);
	SPI_finish();
	PG_RETURN_VOID();
}
