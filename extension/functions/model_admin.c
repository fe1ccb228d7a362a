/*-------------------------------------------------------------------------
 *
 * model_admin.c
 *	  The SQL functions that manage models: drop, rename, grant, revoke,
 *	  reassign, import and annotate.  Each checks the caller's rights, then
 *	  writes the storage as its owner.
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

#include "model/models.h"
#include "model/model_copy.h"
#include "model/model_store.h"

PG_FUNCTION_INFO_V1(corgipile_drop_model);
PG_FUNCTION_INFO_V1(corgipile_rename_model);
PG_FUNCTION_INFO_V1(corgipile_grant_model);
PG_FUNCTION_INFO_V1(corgipile_revoke_model);
PG_FUNCTION_INFO_V1(corgipile_reassign_models);
PG_FUNCTION_INFO_V1(corgipile_import_model);
PG_FUNCTION_INFO_V1(corgipile_annotate_model);

Datum
corgipile_drop_model(PG_FUNCTION_ARGS)
{
	char	   *name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	Oid			argtypes[1] = {TEXTOID};
	Datum		args[1];

	SPI_connect();
	cp_model_check_owner(name, "drop");
	args[0] = CStringGetTextDatum(name);
	cp_model_store_query("DELETE FROM corgipile.model_store AS s "
				"WHERE s.model_name OPERATOR(pg_catalog.=) $1",
				1, argtypes, args, NULL, false, SPI_OK_DELETE);
	SPI_finish();
	cp_model_sync_touch(name);
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
	cp_model_check_owner(name, "rename");
	SPI_finish();
	if (strcmp(name, new_name) == 0)
		PG_RETURN_VOID();
	cp_models_check_new_name(new_name);
	args[0] = CStringGetTextDatum(name);
	args[1] = CStringGetTextDatum(new_name);
	SPI_connect();
	cp_model_store_query("UPDATE corgipile.model_store AS s SET model_name = $2 "
				"WHERE s.model_name OPERATOR(pg_catalog.=) $1",
				2, argtypes, args, NULL, false, SPI_OK_UPDATE);
	SPI_finish();
	cp_model_sync_touch(name);
	cp_model_sync_touch(new_name);
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
	Oid			argtypes[3] = {TEXTOID, OIDOID, BOOLOID};
	Datum		args[3];

	SPI_connect();
	cp_model_check_owner(name, grant ? "grant privileges on" : "revoke privileges on");
	if (grant)
		check_role_exists(role);
	args[0] = CStringGetTextDatum(name);
	args[1] = ObjectIdGetDatum(role);
	args[2] = BoolGetDatum(grant);

	/*
	 * The grantees are rewritten whole: the new list, less the roles dropped
	 * since they were granted.  Roles are cluster-wide and a model row is
	 * not an object PostgreSQL tracks dependencies of, so DROP ROLE leaves
	 * their OIDs behind; each change of the list sweeps them out.
	 */
	cp_model_store_query("UPDATE corgipile.model_store AS s "
				"SET usage_roles = ARRAY(SELECT g.r FROM pg_catalog.unnest("
				"CASE WHEN NOT $3 THEN pg_catalog.array_remove(s.usage_roles, $2) "
				"WHEN $2 OPERATOR(pg_catalog.=) ANY (s.usage_roles) THEN s.usage_roles "
				"ELSE pg_catalog.array_append(s.usage_roles, $2) END) WITH ORDINALITY AS g(r, n) "
				"WHERE EXISTS (SELECT 1 FROM pg_catalog.pg_roles AS a "
				"WHERE a.oid OPERATOR(pg_catalog.=) g.r) ORDER BY g.n) "
				"WHERE s.model_name OPERATOR(pg_catalog.=) $1",
				3, argtypes, args, NULL, false, SPI_OK_UPDATE);
	SPI_finish();
	cp_model_sync_touch(name);
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
	n = cp_model_store_query("UPDATE corgipile.model_store AS s SET owner_id = $2 "
					"WHERE s.owner_id OPERATOR(pg_catalog.=) $1 RETURNING s.model_name",
					2, argtypes, args, NULL, false, SPI_OK_UPDATE_RETURNING);
	for (uint64 i = 0; i < n; i++)
		cp_model_sync_touch(SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1));
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
	Oid			argtypes[14] = {TEXTOID, TEXTOID, TEXTOID, TEXTOID, TEXTARRAYOID,
		TEXTOID, INT4OID, FLOAT8ARRAYOID, JSONBOID, JSONBOID, JSONBOID,
	TIMESTAMPTZOID, OIDOID, JSONBOID};
	Datum		args[14];
	char		nulls[14];
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
	/* 0.3.0's preprocess argument (validated by the load below) */
	if (PG_NARGS() > 12 && !PG_ARGISNULL(12))
		args[13] = PG_GETARG_DATUM(12);
	else
	{
		args[13] = (Datum) 0;
		nulls[13] = 'n';
	}

	SPI_connect();
	cp_model_store_query("INSERT INTO corgipile.model_store (model_name, model, relation, "
				"label, features, feature_indices, n_features, weights, classes, "
				"params, history, created_at, owner_id, preprocess) VALUES ($1, $2, $3, $4, $5, "
				"$6, $7, $8, $9, $10, $11, "
				"COALESCE($12, pg_catalog.now()), $13, $14)",
				14, argtypes, args, nulls, false, SPI_OK_INSERT);
	SPI_finish();
	/* validate the row as predict() will read it: with a snapshot that sees it */
	CommandCounterIncrement();
	PushCopiedSnapshot(GetActiveSnapshot());
	UpdateActiveSnapshotCommandId();
	(void) cp_models_load(name);
	PopActiveSnapshot();
	cp_model_sync_touch(name);
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
	cp_model_check_owner(name, "annotate");
	if (nulls[2] == ' ')
	{
		clash = cp_model_store_query("SELECT 1 FROM corgipile.model_store AS s "
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
	cp_model_store_query("UPDATE corgipile.model_store AS s "
				"SET relation = COALESCE($2, s.relation), "
				"params = s.params OPERATOR(pg_catalog.||) COALESCE($3, '{}'::pg_catalog.jsonb) "
				"WHERE s.model_name OPERATOR(pg_catalog.=) $1",
				3, argtypes, args, nulls, false, SPI_OK_UPDATE);
	SPI_finish();
	cp_model_sync_touch(name);
	PG_RETURN_VOID();
}
