/*-------------------------------------------------------------------------
 *
 * model_copy.c
 *	  A model row in a form every node of a cluster reads the same way, its
 *	  hash, and writing such a copy on a node.
 *
 * A model row names roles and its training relation by OID, and OIDs differ
 * between the nodes of a Citus cluster.  Its copy names them instead: the
 * owner and the USAGE grantees by role name (Citus creates roles on every
 * node), the training relation by its schema-qualified name (Citus creates
 * a distributed table's shell on every node).  Every other column travels
 * as it is: weights as JSON numbers written with the shortest digits that
 * read back to the same double, created_at in UTC.  The copy's text is
 * canonical (jsonb's key order, pinned float output), so two nodes hold
 * the same model exactly when their copies' texts are equal: model_hash()
 * is the SHA-256 of that text, less the training relation's name, which
 * each node resolves to its own relation (relid): a model trained on a
 * table of the coordinator alone has none on the workers, where its data
 * is then visible by its owner's rights (cp_model_may_see_data).
 *
 * corgipile.apply_model_copy() writes a copy on a node, as the calling
 * role: the role must be allowed to manage both the row it replaces (if
 * any) and the row it writes, as drop_model(), import_model(),
 * grant_model() and reassign_models() would ask.  The coordinator calls
 * it on every worker (model_sync.c) in the role that changed the model.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "common/cryptohash.h"
#include "common/sha2.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/regproc.h"
#include "utils/snapmgr.h"
#include "utils/varlena.h"

#include "model/model_copy.h"
#include "model/model_store.h"
#include "model/models.h"

PG_FUNCTION_INFO_V1(corgipile_model_hash);
PG_FUNCTION_INFO_V1(corgipile_apply_model_copy);

/*
 * The copy of a model's row as jsonb text, or NULL when there is no such
 * model.  No rights are checked: callers do.  Floats are written with
 * extra_float_digits 1 (the shortest exact digits) whatever the session
 * says, so the text, and the weights read back from it, never lose a bit.
 */
char *
cp_model_copy_doc(const char *model_name, bool for_hash)
{
	Oid			argtypes[2] = {TEXTOID, TEXTOID};
	Datum		args[2];
	char	   *doc = NULL;
	MemoryContext caller = CurrentMemoryContext;
	int			nest = NewGUCNestLevel();

	(void) set_config_option("extra_float_digits", "1", PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	args[0] = CStringGetTextDatum(model_name);
	/* the key removed: none, or trained_on (resolved on each node by name) */
	args[1] = CStringGetTextDatum(for_hash ? "trained_on" : "");
	SPI_connect();
	if (cp_model_store_query("SELECT (pg_catalog.jsonb_build_object("
							 "'model', s.model, 'relation', s.relation, 'label', s.label, "
							 "'features', pg_catalog.to_jsonb(s.features), "
							 "'feature_indices', s.feature_indices, 'n_features', s.n_features, "
							 "'weights', pg_catalog.to_jsonb(s.weights), 'classes', s.classes, "
							 "'params', s.params, 'history', s.history, "
							 "'created_at', pg_catalog.to_jsonb(pg_catalog.timezone('UTC', s.created_at)), "
							 "'owner', (SELECT a.rolname FROM pg_catalog.pg_authid AS a "
							 "  WHERE a.oid OPERATOR(pg_catalog.=) s.owner_id), "
							 "'usage_roles', pg_catalog.to_jsonb(ARRAY(SELECT a.rolname "
							 "  FROM pg_catalog.unnest(s.usage_roles) WITH ORDINALITY AS g(r, n) "
							 "  JOIN pg_catalog.pg_authid AS a ON a.oid OPERATOR(pg_catalog.=) g.r "
							 "  ORDER BY g.n)), "
							 "'trained_on', (SELECT pg_catalog.format('%I.%I', ns.nspname, c.relname) "
							 "  FROM pg_catalog.pg_class AS c JOIN pg_catalog.pg_namespace AS ns "
							 "  ON ns.oid OPERATOR(pg_catalog.=) c.relnamespace "
							 "  WHERE c.oid OPERATOR(pg_catalog.=) s.relid), "
							 "'preprocess', s.preprocess) "
							 "OPERATOR(pg_catalog.-) $2)::pg_catalog.text "
							 "FROM corgipile.model_store AS s "
							 "WHERE s.model_name OPERATOR(pg_catalog.=) $1",
							 2, argtypes, args, NULL, true, SPI_OK_SELECT) > 0)
		doc = MemoryContextStrdup(caller, SPI_getvalue(SPI_tuptable->vals[0],
													   SPI_tuptable->tupdesc, 1));
	SPI_finish();
	AtEOXact_GUC(true, nest);
	return doc;
}

/* The SHA-256 of a copy's text, in hex. */
char *
cp_model_copy_hash(const char *doc)
{
	pg_cryptohash_ctx *ctx = pg_cryptohash_create(PG_SHA256);
	uint8		digest[PG_SHA256_DIGEST_LENGTH];
	char	   *hex = palloc(PG_SHA256_DIGEST_LENGTH * 2 + 1);

	if (ctx == NULL || pg_cryptohash_init(ctx) < 0 ||
		pg_cryptohash_update(ctx, (const uint8 *) doc, strlen(doc)) < 0 ||
		pg_cryptohash_final(ctx, digest, sizeof(digest)) < 0)
		elog(ERROR, "corgipile: could not compute a SHA-256: %s",
			 pg_cryptohash_error(ctx));
	pg_cryptohash_free(ctx);
	hex_encode((const char *) digest, PG_SHA256_DIGEST_LENGTH, hex);
	hex[PG_SHA256_DIGEST_LENGTH * 2] = '\0';
	return hex;
}

/*
 * corgipile.model_hash(model_name text) RETURNS text: the hash of the
 * model's copy on this node, for a role that may use the model.
 */
Datum
corgipile_model_hash(PG_FUNCTION_ARGS)
{
	char	   *name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	char	   *doc;

	(void) cp_models_load(name);	/* USAGE, and a row that loads */
	doc = cp_model_copy_doc(name, true);
	if (doc == NULL)
		cp_model_no_such(name);
	PG_RETURN_TEXT_P(cstring_to_text(cp_model_copy_hash(doc)));
}

/* A role a copy names, as this node's OID; every name must exist here. */
static Oid
copy_role(const char *model_name, const char *role)
{
	Oid			oid = get_role_oid(role, true);

	if (!OidIsValid(oid))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("role \"%s\" of model \"%s\" does not exist on this node", role,
						model_name),
				 errhint("Create the role on every node of the cluster (Citus does it for roles created on the coordinator).")));
	return oid;
}

/* the text of key of a jsonb object, or NULL when absent or JSON null */
static char *
doc_text(Jsonb *doc, const char *key)
{
	JsonbValue	k;
	JsonbValue *v;

	k.type = jbvString;
	k.val.string.val = (char *) key;
	k.val.string.len = strlen(key);
	v = findJsonbValueFromContainer(&doc->root, JB_FOBJECT, &k);
	if (v == NULL || v->type == jbvNull)
		return NULL;
	if (v->type != jbvString)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("the model copy's \"%s\" must be a string", key)));
	return pnstrdup(v->val.string.val, v->val.string.len);
}

/* the role names of the copy's usage_roles, as this node's OIDs */
static Datum
doc_usage(Jsonb *doc, const char *model_name)
{
	JsonbValue	k;
	JsonbValue *v;
	JsonbIterator *it;
	JsonbValue	e;
	JsonbIteratorToken tok;
	List	   *oids = NIL;
	Datum	   *elems;
	int			n = 0;
	ListCell   *lc;

	k.type = jbvString;
	k.val.string.val = "usage_roles";
	k.val.string.len = strlen("usage_roles");
	v = findJsonbValueFromContainer(&doc->root, JB_FOBJECT, &k);
	if (v == NULL || v->type != jbvBinary ||
		!JsonContainerIsArray(v->val.binary.data))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("the model copy's \"usage_roles\" must be an array of role names")));
	it = JsonbIteratorInit(v->val.binary.data);
	while ((tok = JsonbIteratorNext(&it, &e, true)) != WJB_DONE)
	{
		if (tok != WJB_ELEM)
			continue;
		if (e.type != jbvString)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("the model copy's \"usage_roles\" must be an array of role names")));
		oids = lappend_oid(oids, copy_role(model_name,
										   pnstrdup(e.val.string.val, e.val.string.len)));
	}
	elems = palloc(sizeof(Datum) * Max(list_length(oids), 1));
	foreach(lc, oids)
		elems[n++] = ObjectIdGetDatum(lfirst_oid(lc));
	return PointerGetDatum(construct_array(elems, n, OIDOID, sizeof(Oid), true,
										   TYPALIGN_INT));
}

static void
check_may_manage(const char *model_name, Oid owner, const char *what)
{
	if (!has_privs_of_role(GetUserId(), owner))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("must be owner of model \"%s\" to %s it on this node", model_name, what),
				 errhint("A model's copy is written by a role that may manage the model it replaces and the one it writes.")));
}

/*
 * corgipile.apply_model_copy(model_name text, copy jsonb): make this node's
 * row of the model what the copy says (copy NULL: no such model).  Not
 * STRICT: NULL copy means drop.
 */
Datum
corgipile_apply_model_copy(PG_FUNCTION_ARGS)
{
	char	   *name;
	Jsonb	   *doc;
	Oid			argtypes[5] = {TEXTOID, JSONBOID, OIDOID, OIDARRAYOID, OIDOID};
	Datum		args[5];
	char		nulls[5] = {' ', ' ', ' ', ' ', ' '};
	bool		isnull;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("model_name must not be NULL")));
	name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	doc = PG_ARGISNULL(1) ? NULL : PG_GETARG_JSONB_P(1);
	args[0] = CStringGetTextDatum(name);

	SPI_connect();
	/* the row replaced: its owner's rights, locked until we are done */
	if (cp_model_store_query("SELECT s.owner_id FROM corgipile.model_store AS s "
							 "WHERE s.model_name OPERATOR(pg_catalog.=) $1 FOR UPDATE",
							 1, argtypes, args, NULL, false, SPI_OK_SELECT) > 0)
		check_may_manage(name, DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[0],
															  SPI_tuptable->tupdesc, 1,
															  &isnull)),
						 doc != NULL ? "replace" : "drop");
	if (doc != NULL)
	{
		char	   *owner_name;
		char	   *trained_on;
		Oid			owner = InvalidOid;
		Oid			relid = InvalidOid;

		if (!JB_ROOT_IS_OBJECT(doc))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("a model copy must be a JSON object")));
		/* an orphaned model (its owner dropped) is superusers' */
		owner_name = doc_text(doc, "owner");
		if (owner_name != NULL)
			owner = copy_role(name, owner_name);
		check_may_manage(name, owner, "write");
		trained_on = doc_text(doc, "trained_on");
		if (trained_on != NULL)
			relid = RangeVarGetRelid(makeRangeVarFromNameList(stringToQualifiedNameList(trained_on)),
									 NoLock, true);
		args[1] = JsonbPGetDatum(doc);
		args[2] = ObjectIdGetDatum(owner);
		args[3] = doc_usage(doc, name);
		args[4] = ObjectIdGetDatum(relid);
		if (!OidIsValid(relid))
			nulls[4] = 'n';
	}
	cp_model_store_query("DELETE FROM corgipile.model_store AS s "
						 "WHERE s.model_name OPERATOR(pg_catalog.=) $1",
						 1, argtypes, args, NULL, false, SPI_OK_DELETE);
	if (doc != NULL)
		cp_model_store_query("INSERT INTO corgipile.model_store (model_name, model, relation, "
							 "label, features, feature_indices, n_features, weights, classes, "
							 "params, history, created_at, owner_id, relid, usage_roles, preprocess) "
							 "SELECT $1, d OPERATOR(pg_catalog.->>) 'model', "
							 "d OPERATOR(pg_catalog.->>) 'relation', "
							 "d OPERATOR(pg_catalog.->>) 'label', "
							 "ARRAY(SELECT e.v FROM pg_catalog.jsonb_array_elements_text("
							 "  d OPERATOR(pg_catalog.->) 'features') WITH ORDINALITY AS e(v, n) ORDER BY e.n), "
							 "d OPERATOR(pg_catalog.->>) 'feature_indices', "
							 "(d OPERATOR(pg_catalog.->>) 'n_features')::pg_catalog.int4, "
							 "ARRAY(SELECT e.v::pg_catalog.float8 FROM pg_catalog.jsonb_array_elements("
							 "  d OPERATOR(pg_catalog.->) 'weights') WITH ORDINALITY AS e(v, n) ORDER BY e.n), "
							 "CASE WHEN pg_catalog.jsonb_typeof(d OPERATOR(pg_catalog.->) 'classes') "
							 "OPERATOR(pg_catalog.<>) 'null' THEN d OPERATOR(pg_catalog.->) 'classes' END, "
							 "d OPERATOR(pg_catalog.->) 'params', d OPERATOR(pg_catalog.->) 'history', "
							 "pg_catalog.timezone('UTC', (d OPERATOR(pg_catalog.->>) 'created_at')::pg_catalog.\"timestamp\"), "
							 "$3, $5, $4, "
							 "CASE WHEN pg_catalog.jsonb_typeof(d OPERATOR(pg_catalog.->) 'preprocess') "
							 "OPERATOR(pg_catalog.<>) 'null' THEN d OPERATOR(pg_catalog.->) 'preprocess' END "
							 "FROM (SELECT $2 AS d) AS c",
							 5, argtypes, args, nulls, false, SPI_OK_INSERT);
	SPI_finish();
	cp_model_sync_touch(name);
	if (doc != NULL)
	{
		/* validate the row as predict() will read it, as import_model does */
		CommandCounterIncrement();
		PushCopiedSnapshot(GetActiveSnapshot());
		UpdateActiveSnapshotCommandId();
		(void) cp_models_load(name);
		PopActiveSnapshot();
	}
	PG_RETURN_VOID();
}
