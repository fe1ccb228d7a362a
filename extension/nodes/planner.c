/*-------------------------------------------------------------------------
 *
 * planner.c
 *	  Replacing the function scan of corgipile.train() by the operators.
 *
 * The set_rel_pathlist hook recognises a FROM-clause call of
 * corgipile.train() whose arguments are all constants after
 * simplification, and gives its relation one CustomPath.  Planning that
 * path builds SGD -> TupleShuffle -> BlockShuffle.  The children are built
 * here as plans rather than as custom_paths, because they scan a relation
 * that is not part of the query's join tree and so has no RelOptInfo to
 * hang paths on; instead the scanned relation (and the validation relation)
 * are appended to the range table, which gives EXPLAIN its "on t", the
 * executor its lock and SELECT-privilege checks, and the plan cache its
 * invalidation when the table changes.
 *
 * The hook exists once the library is loaded.  corgipile.train() has a
 * planner support function in this library, which the planner calls while
 * estimating the call's rows, before paths are built, so the first call in
 * a fresh session already loads the library in time.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/relation.h"
#include "access/sysattr.h"
#include "access/table.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "funcapi.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "nodes/supportnodes.h"
#include "optimizer/cost.h"
#include "optimizer/optimizer.h"
#include "parser/parsetree.h"
#include "storage/bufmgr.h"
#include "optimizer/pathnode.h"
#include "optimizer/paths.h"
#include "optimizer/restrictinfo.h"
#include "miscadmin.h"
#include "catalog/pg_collation.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

#include "nodes/block_shuffle.h"
#include "cluster/citus_meta.h"
#include "nodes/call_scan.h"
#include "nodes/dist_train.h"
#include "nodes/planner.h"
#include "util/relation.h"
#include "io/layout.h"
#include "params/params.h"
#include "nodes/sgd.h"
#include "nodes/tuple_shuffle.h"

static set_rel_pathlist_hook_type prev_set_rel_pathlist_hook = NULL;

static Plan *sgd_plan_custom_path(PlannerInfo *root, RelOptInfo *rel,
								  CustomPath *best_path, List *tlist,
								  List *clauses, List *custom_plans);

static CustomPathMethods sgd_path_methods = {
	.CustomName = "corgipile",
	.PlanCustomPath = sgd_plan_custom_path,
};

typedef enum CpCall
{
	CP_CALL_NONE,
	CP_CALL_TRAIN,				/* corgipile.train() */
	CP_CALL_SHUFFLED_SCAN,		/* corgipile.shuffled_scan() */
	CP_CALL_DIST_TRAIN			/* train() on a Citus distributed table */
} CpCall;

/* Is this a call of one of our set-returning functions, and which? */
static CpCall
classify_call(FuncExpr *fexpr)
{
	Oid			nsp;
	char	   *name;

	if (!fexpr->funcretset)
		return CP_CALL_NONE;
	nsp = get_namespace_oid("corgipile", true);
	if (!OidIsValid(nsp) || get_func_namespace(fexpr->funcid) != nsp)
		return CP_CALL_NONE;
	name = get_func_name(fexpr->funcid);
	if (name != NULL && strcmp(name, "train") == 0 &&
		list_length(fexpr->args) == CP_NUM_ARGS)
		return CP_CALL_TRAIN;
	if (name != NULL && strcmp(name, "shuffled_scan") == 0 &&
		list_length(fexpr->args) == 5)
		return CP_CALL_SHUFFLED_SCAN;
	return CP_CALL_NONE;
}

static Const *
text_const(const char *s)
{
	return makeConst(TEXTOID, -1, DEFAULT_COLLATION_OID, -1,
					 s ? CStringGetTextDatum(s) : (Datum) 0, s == NULL, false);
}

/*
 * shuffled_scan(relation, shuffle, block_size, buffer_size, seed) runs the
 * operators of a training with those settings: spell it as the argument
 * list of train(), which is what the operators read.
 */
static List *
scan_args_as_train_args(List *args)
{
	List	   *out = cp_default_train_args();

	/* train() has no default model: any will do for a scan */
	list_nth_cell(out, CP_ARG_MODEL)->ptr_value = text_const("svm");
	list_nth_cell(out, CP_ARG_RELATION)->ptr_value = list_nth(args, 0);
	list_nth_cell(out, CP_ARG_SHUFFLE)->ptr_value = list_nth(args, 1);
	list_nth_cell(out, CP_ARG_BLOCK_SIZE)->ptr_value = list_nth(args, 2);
	list_nth_cell(out, CP_ARG_BUFFER_SIZE)->ptr_value = list_nth(args, 3);
	list_nth_cell(out, CP_ARG_SEED)->ptr_value = list_nth(args, 4);
	return out;
}

/*
 * Open a relation the training reads, check it, and return the columns it
 * reads.  The lock taken here is kept until the end of the transaction.
 */
static Bitmapset *
check_training_relation(Oid relid, const CpTrainParams *p, bool ids_only,
						const char *param, BlockNumber *n_pages)
{
	Relation	rel = cp_open_relation(relid, AccessShareLock, param);
	CpLayout	layout;
	Bitmapset  *cols;

	cp_check_relation(rel, param);
	if (ids_only)
	{
		/* row ids are a view of the whole table: ask for table-level SELECT */
		AclResult	acl = pg_class_aclcheck(relid, GetUserId(), ACL_SELECT);

		if (acl != ACLCHECK_OK)
			aclcheck_error(acl, get_relkind_objtype(rel->rd_rel->relkind),
						   RelationGetRelationName(rel));
		cp_layout_ids_only(&layout, RelationGetDescr(rel), RelationGetRelationName(rel));
		/* a whole-row reference: the executor then asks for every column */
		cols = bms_make_singleton(InvalidAttrNumber - FirstLowInvalidHeapAttributeNumber);
	}
	else
	{
		cp_layout_resolve(&layout, RelationGetDescr(rel), RelationGetRelationName(rel), p);
		cols = cp_layout_columns(&layout);
		/* a model too big to allocate is refused before any page is read */
		if (layout.n_features > 0)
			cp_check_model_size(p->model, layout.n_features, 2,
								cp_layout_sparse_rows(&layout),
								p->batch_size, RelationGetRelationName(rel));
	}
	cp_check_select(rel, cols);
	if (n_pages)
		*n_pages = RelationGetNumberOfBlocks(rel);
	relation_close(rel, NoLock);
	return cols;
}

/*
 * Whether the query refers to rel's row as one value, in what the scan
 * emits or in a condition evaluated at the scan.
 */
static bool
needs_whole_row(RelOptInfo *rel, Index rti)
{
	Bitmapset  *attrs = NULL;
	ListCell   *lc;

	pull_varattnos((Node *) rel->reltarget->exprs, rti, &attrs);
	foreach(lc, rel->baserestrictinfo)
		pull_varattnos((Node *) lfirst_node(RestrictInfo, lc)->clause, rti, &attrs);
	return bms_is_member(InvalidAttrNumber - FirstLowInvalidHeapAttributeNumber, attrs);
}

static void
cp_set_rel_pathlist(PlannerInfo *root, RelOptInfo *rel, Index rti,
					RangeTblEntry *rte)
{
	RangeTblFunction *rtfunc;
	FuncExpr   *fexpr;
	ListCell   *lc;
	CpCall		call;
	List	   *args;
	CpTrainParams p;
	CustomPath *path;
	BlockNumber n_pages;
	double		scan_cost;
	bool		deferred = false;

	if (prev_set_rel_pathlist_hook)
		prev_set_rel_pathlist_hook(root, rel, rti, rte);

	if (rte->rtekind != RTE_FUNCTION || rte->funcordinality ||
		list_length(rte->functions) != 1)
		return;
	rtfunc = linitial_node(RangeTblFunction, rte->functions);
	if (!IsA(rtfunc->funcexpr, FuncExpr))
		return;
	fexpr = (FuncExpr *) rtfunc->funcexpr;
	call = classify_call(fexpr);
	if (call == CP_CALL_NONE)
		return;

	/*
	 * Our nodes emit the function's columns, not its row as one value.  A
	 * query that needs the whole row (a reference to the alias itself, or
	 * the row mark of UPDATE/DELETE/MERGE ... FROM the call), above the
	 * scan or in a condition evaluated at it (WHERE r IS NOT NULL), is left
	 * to a function scan, whose implementation plans the call again on its
	 * own.
	 */
	if (needs_whole_row(rel, rti))
		return;

	/*
	 * Arguments known only at execution (parameters of a generic plan, a
	 * scalar subquery) give a node that evaluates them then and plans the
	 * call again with them as constants, returning an epoch per row (see
	 * train.c).  Arguments that refer to other relations' columns
	 * (LATERAL) are left to a function scan and the function's own
	 * fallback.
	 */
	foreach(lc, fexpr->args)
		if (!IsA(lfirst(lc), Const))
			deferred = true;
	if (deferred)
	{
		if (contain_var_clause((Node *) fexpr->args) ||
			!bms_is_empty(rel->lateral_relids))
			return;
		path = makeNode(CustomPath);
		path->path.pathtype = T_CustomScan;
		path->path.parent = rel;
		path->path.pathtarget = rel->reltarget;
		path->path.rows = rel->rows;
		path->path.startup_cost = 0;
		path->path.total_cost = rel->rows * cpu_tuple_cost;
		path->custom_private = list_make3(NIL, makeInteger(call), makeInteger(1));
		path->methods = &sgd_path_methods;
		rel->pathlist = NIL;
		rel->partial_pathlist = NIL;
		add_path(rel, &path->path);
		return;
	}

	/*
	 * What the plan reads depends on the role that runs it: privileges and
	 * row-level security are checked for that role at executor start, and
	 * the plan cache must re-plan (re-checking here) when the role changes.
	 */
	root->glob->dependsOnRole = true;

	/* refuse bad input now, before any work is done */
	args = (call == CP_CALL_TRAIN) ? fexpr->args : scan_args_as_train_args(fexpr->args);
	cp_params_from_consts(args, &p);
	check_training_relation(p.relid, &p, call == CP_CALL_SHUFFLED_SCAN, "relation", &n_pages);

	/*
	 * A Citus distributed table: its rows are in shards on the workers,
	 * which train there (dist_train.c).  The relation is not added to the
	 * query (Citus would plan it as a distributed query, and refuse it).
	 */
	if (call == CP_CALL_TRAIN && cp_citus_is_distributed(p.relid))
	{
		cp_dist_check_params(&p, get_rel_name(p.relid));
		path = makeNode(CustomPath);
		path->path.pathtype = T_CustomScan;
		path->path.parent = rel;
		path->path.pathtarget = rel->reltarget;
		path->path.rows = p.max_epoch_num;
		path->path.startup_cost = 0;
		path->path.total_cost = p.max_epoch_num * cpu_tuple_cost;
		path->custom_private = list_make4(cp_params_pack(&p), makeInteger(CP_CALL_DIST_TRAIN),
										  makeInteger(0), cp_dist_args_text(fexpr->args));
		path->methods = &sgd_path_methods;
		rel->pathlist = NIL;
		rel->partial_pathlist = NIL;
		add_path(rel, &path->path);
		return;
	}
	if (OidIsValid(p.validation_relid))
		check_training_relation(p.validation_relid, &p, false, "validation relation", NULL);

	scan_cost = (double) n_pages * seq_page_cost +
		Max(rel->tuples, 1.0) * cpu_tuple_cost;

	path = makeNode(CustomPath);
	path->path.pathtype = T_CustomScan;
	path->path.parent = rel;
	path->path.pathtarget = rel->reltarget;
	path->path.param_info = NULL;
	path->path.parallel_aware = false;
	path->path.parallel_safe = false;
	path->path.parallel_workers = 0;
	path->path.rows = (call == CP_CALL_TRAIN) ? p.max_epoch_num : rel->rows;
	path->path.startup_cost = scan_cost;
	path->path.total_cost = scan_cost * p.max_epoch_num;
	path->path.pathkeys = NIL;
	path->flags = 0;
	path->custom_paths = NIL;
	/* the plan carries the parameters as validated here, parsed once */
	path->custom_private = list_make3(cp_params_pack(&p), makeInteger(call), makeInteger(0));
	path->methods = &sgd_path_methods;

	rel->pathlist = NIL;
	rel->partial_pathlist = NIL;
	add_path(rel, &path->path);
}

/* Append a relation the plan reads to the range table; returns its index. */
static Index
add_relation_rte(PlannerInfo *root, Oid relid, Bitmapset *cols)
{
	RangeTblEntry *rte = makeNode(RangeTblEntry);
	Relation	rel = relation_open(relid, NoLock);
	TupleDesc	desc = RelationGetDescr(rel);
	List	   *colnames = NIL;

	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute attr = TupleDescAttr(desc, i);

		colnames = lappend(colnames,
						   makeString(pstrdup(attr->attisdropped ? "" :
											  NameStr(attr->attname))));
	}
	rte->rtekind = RTE_RELATION;
	rte->relid = relid;
	rte->relkind = rel->rd_rel->relkind;
	rte->rellockmode = AccessShareLock;
	rte->eref = makeAlias(RelationGetRelationName(rel), colnames);
	rte->inh = false;
	rte->inFromCl = false;
	rte->requiredPerms = ACL_SELECT;
	rte->checkAsUser = InvalidOid;
	rte->selectedCols = cols;
	relation_close(rel, NoLock);

	root->parse->rtable = lappend(root->parse->rtable, rte);
	return list_length(root->parse->rtable);
}

/* Target list naming the function's output columns as Vars of its RTE. */
static List *
function_scan_tlist(FuncExpr *fexpr, Index rti)
{
	TupleDesc	desc;
	List	   *tlist = NIL;

	if (get_expr_result_type((Node *) fexpr, NULL, &desc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "corgipile.train must return a composite type");
	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute attr = TupleDescAttr(desc, i);
		Var		   *var = makeVar(rti, attr->attnum, attr->atttypid,
								  attr->atttypmod, attr->attcollation, 0);

		tlist = lappend(tlist, makeTargetEntry((Expr *) var, attr->attnum,
											   pstrdup(NameStr(attr->attname)),
											   false));
	}
	return tlist;
}

static Plan *
sgd_plan_custom_path(PlannerInfo *root, RelOptInfo *rel, CustomPath *best_path,
					 List *tlist, List *clauses, List *custom_plans)
{
	CpCall		call = (CpCall) intVal(lsecond(best_path->custom_private));
	RangeTblEntry *rte = planner_rt_fetch(rel->relid, root);
	FuncExpr   *fexpr = (FuncExpr *) linitial_node(RangeTblFunction, rte->functions)->funcexpr;
	List	   *scan_tlist = function_scan_tlist(fexpr, rel->relid);
	List	   *quals = extract_actual_clauses(clauses, false);
	CpTrainParams p;
	Index		train_rti;
	CustomScan *block_scan;
	CustomScan *tuple_scan;
	Const	   *packed;

	if (call == CP_CALL_DIST_TRAIN)
		return &cp_dist_make_plan(linitial_node(Const, best_path->custom_private),
								  lfourth(best_path->custom_private), tlist, scan_tlist,
								  quals, rel->relid)->scan.plan;
	if (intVal(lthird(best_path->custom_private)) != 0)
		return &cp_call_make_plan(fexpr->args, call == CP_CALL_SHUFFLED_SCAN,
								  tlist, scan_tlist, quals, rel->relid)->scan.plan;
	packed = linitial_node(Const, best_path->custom_private);
	cp_params_unpack(packed, &p);
	train_rti = add_relation_rte(root, p.relid,
								 check_training_relation(p.relid, &p,
														 call == CP_CALL_SHUFFLED_SCAN,
														 "relation", NULL));
	block_scan = cp_block_shuffle_make_plan(packed, train_rti);

	if (call == CP_CALL_SHUFFLED_SCAN)
	{
		tuple_scan = cp_tuple_shuffle_make_plan(packed, true, block_scan, tlist,
											 scan_tlist, rel->relid);
		tuple_scan->scan.plan.qual = quals;
		return &tuple_scan->scan.plan;
	}

	if (OidIsValid(p.validation_relid))
		add_relation_rte(root, p.validation_relid,
						 check_training_relation(p.validation_relid, &p, false,
												 "validation relation", NULL));
	tuple_scan = cp_tuple_shuffle_make_plan(packed, false, block_scan, NIL, NIL, 0);
	return &cp_sgd_make_plan(packed, tuple_scan, tlist, scan_tlist, quals,
						  rel->relid)->scan.plan;
}

void
cp_planner_init(void)
{
	prev_set_rel_pathlist_hook = set_rel_pathlist_hook;
	set_rel_pathlist_hook = cp_set_rel_pathlist;
}
