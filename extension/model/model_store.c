/*-------------------------------------------------------------------------
 *
 * model_store.c
 *	  The model storage: running queries on it as its owner, who may manage
 *	  or use a model, and model names.
 *
 * Models are stored in corgipile.model_store, which no role but the
 * extension's owner may read or write; roles read the security-barrier
 * view corgipile.models.  Every write goes through one of our functions, which
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
#include "utils/memutils.h"
#include "utils/syscache.h"

#include "model/models.h"
#include "model/model_store.h"

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
uint64
cp_model_store_query(const char *sql, int nargs, Oid *argtypes, Datum *args,
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

void
cp_model_no_such(const char *model_name)
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
bool
cp_model_may_use(Oid owner, const Oid *usage, int n_usage)
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
 * Whether the current role may see what a model holds of its training
 * relation's rows: SELECT on that relation while it exists; otherwise
 * (imported rows, arrays, a dropped relation) the rights of the model's
 * owner.  The one rule for everything that shows a model (the models
 * view through corgipile.may_see_model_data, predict's input forms,
 * model_coefficients, warm_start, block_rows): a role for which it is
 * false gets the model's function and nothing of its preprocessing.
 */
bool
cp_model_may_see_data(Oid relid, Oid owner)
{
	Oid			me = GetUserId();

	if (OidIsValid(relid) && SearchSysCacheExists1(RELOID, ObjectIdGetDatum(relid)))
		return pg_class_aclcheck(relid, me, ACL_SELECT) == ACLCHECK_OK;
	return has_privs_of_role(me, owner);
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
	if (cp_model_store_query("SELECT s.owner_id FROM corgipile.model_store AS s "
					"WHERE s.model_name OPERATOR(pg_catalog.=) $1",
					1, argtypes, args, NULL, true, SPI_OK_SELECT) == 0)
		cp_model_no_such(model_name);
	return DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[0],
										  SPI_tuptable->tupdesc, 1, &isnull));
}

void
cp_model_check_owner(const char *model_name, const char *action)
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
	cp_model_store_query("SELECT pg_catalog.format('%s_%s_%s', pg_catalog.\"left\"($1, $3), $2, "
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
	exists = cp_model_store_query("SELECT 1 FROM corgipile.model_store AS s "
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

/* Kept for sgd.c's call site (sgd_begin): the same checks. */
void
cp_models_check_absent(const char *model_name)
{
	cp_models_check_new_name(model_name);
}

/*
 * The names of the models this backend is training now.  Two trainings in
 * one statement both pass the catalog check above and would find out only
 * at the insert, after all their epochs; the second one is refused at its
 * start instead.  A claim lasts as long as its training's memory: its
 * reset callback releases it, on errors too.
 */
static List *cp_training_names = NIL;

void
cp_models_claim_name(const char *model_name)
{
	ListCell   *lc;
	MemoryContext old;

	foreach(lc, cp_training_names)
		if (strcmp(lfirst(lc), model_name) == 0)
			ereport(ERROR,
					(errcode(ERRCODE_DUPLICATE_OBJECT),
					 errmsg("model \"%s\" is already being trained in this session", model_name),
					 errhint("Give each training of one statement its own model_name.")));
	old = MemoryContextSwitchTo(TopMemoryContext);
	cp_training_names = lappend(cp_training_names, pstrdup(model_name));
	MemoryContextSwitchTo(old);
}

void
cp_models_release_name(const char *model_name)
{
	ListCell   *lc;

	foreach(lc, cp_training_names)
	{
		char	   *name = lfirst(lc);

		if (strcmp(name, model_name) == 0)
		{
			cp_training_names = foreach_delete_current(cp_training_names, lc);
			pfree(name);
			return;
		}
	}
}
