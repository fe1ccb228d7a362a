/*-------------------------------------------------------------------------
 *
 * relation.c
 *	  Which relations corgipile reads, and whether the user may read them.
 *
 * BlockShuffle reads heap pages itself, so it must refuse what a plain scan
 * would handle differently: non-heap relations, other sessions' temporary
 * tables, and tables whose row-level security policies apply to the user
 * (as COPY TO does).
 *
 * Everything is checked twice: at plan time, to refuse bad input before
 * any work, and at executor start for the role that executes
 * (cp_check_access_at_start), because a plan may be prepared by one role
 * and executed by another (a prepared statement after SET ROLE, a shared
 * SECURITY INVOKER function).  The executor also checks SELECT through the
 * range table entries the plan adds (checkAsUser unset: the executing
 * role), and the plan is marked as depending on the role so that the plan
 * cache re-plans when the role changes.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/relation.h"

#include "access/sysattr.h"
#include "catalog/pg_am.h"
#include "catalog/pg_class.h"
#include "commands/defrem.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/rls.h"

#include "util/relation.h"

static const char *
relkind_description(char relkind)
{
	switch (relkind)
	{
		case RELKIND_VIEW:
			return "a view";
		case RELKIND_PARTITIONED_TABLE:
			return "a partitioned table";
		case RELKIND_FOREIGN_TABLE:
			return "a foreign table";
		case RELKIND_SEQUENCE:
			return "a sequence";
		case RELKIND_INDEX:
		case RELKIND_PARTITIONED_INDEX:
			return "an index";
		case RELKIND_COMPOSITE_TYPE:
			return "a composite type";
		case RELKIND_TOASTVALUE:
			return "a TOAST table";
		default:
			return "not a table";
	}
}

/*
 * Open a relation given as a regclass argument.  A regclass may hold any
 * OID ('0'::regclass, or one of a relation dropped since), which
 * relation_open() reports as an internal error; this names the argument.
 */
Relation
cp_open_relation(Oid relid, LOCKMODE lockmode, const char *param)
{
	Relation	rel = try_relation_open(relid, lockmode);

	if (rel == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("%s with OID %u does not exist", param, relid)));
	return rel;
}

void
cp_check_relation(Relation rel, const char *param)
{
	const char *name = RelationGetRelationName(rel);
	char		relkind = rel->rd_rel->relkind;

	if (relkind != RELKIND_RELATION && relkind != RELKIND_MATVIEW)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("%s \"%s\" is not an ordinary table", param, name),
				 errdetail("\"%s\" is %s; corgipile trains on heap tables.",
						   name, relkind_description(relkind)),
				 relkind == RELKIND_PARTITIONED_TABLE ?
				 errhint("Train on one partition, or on a copy made with CREATE TABLE ... AS SELECT.") :
				 errhint("Copy the rows into a table with CREATE TABLE ... AS SELECT.")));
	if (rel->rd_rel->relam != HEAP_TABLE_AM_OID)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("%s \"%s\" uses table access method \"%s\"; corgipile reads heap tables only",
						param, name, get_am_name(rel->rd_rel->relam))));
	if (RELATION_IS_OTHER_TEMP(rel))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot read temporary tables of other sessions")));
	if (relkind == RELKIND_MATVIEW && !RelationIsPopulated(rel))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("materialized view \"%s\" has not been populated", name),
				 errhint("Use the REFRESH MATERIALIZED VIEW command.")));
	if (check_enable_rls(RelationGetRelid(rel), InvalidOid, false) == RLS_ENABLED)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("corgipile cannot train on \"%s\" because row-level security is enabled for it",
						name),
				 errdetail("corgipile reads heap pages directly and would not apply the table's policies."),
				 errhint("Train on a copy made with CREATE TABLE ... AS SELECT, which applies them.")));
}

/* SELECT on the table, or on every column in cols (selectedCols offsets). */
void
cp_check_select(Relation rel, Bitmapset *cols)
{
	Oid			relid = RelationGetRelid(rel);
	Oid			user = GetUserId();
	int			x = -1;

	if (pg_class_aclcheck(relid, user, ACL_SELECT) == ACLCHECK_OK)
		return;
	while ((x = bms_next_member(cols, x)) >= 0)
	{
		AttrNumber	attno = x + FirstLowInvalidHeapAttributeNumber;
		AclResult	acl;

		/* a whole-row reference needs every column, as the executor says */
		if (attno == InvalidAttrNumber)
			acl = pg_attribute_aclcheck_all(relid, user, ACL_SELECT, ACLMASK_ALL);
		else
			acl = pg_attribute_aclcheck(relid, attno, user, ACL_SELECT);
		if (acl != ACLCHECK_OK)
			aclcheck_error(ACLCHECK_NO_PRIV,
						   get_relkind_objtype(rel->rd_rel->relkind),
						   RelationGetRelationName(rel));
	}
}

/*
 * The checks of cp_check_relation and cp_check_select again, at executor
 * start, for the role executing the plan (GetUserId() now, not when the
 * plan was made): relation kind, row-level security, SELECT on the table or
 * on the columns read.
 */
void
cp_check_access_at_start(Relation rel, Bitmapset *cols, const char *param)
{
	cp_check_relation(rel, param);
	cp_check_select(rel, cols);
}
