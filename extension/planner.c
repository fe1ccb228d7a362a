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
#include "utils/lsyscache.h"
#include "utils/rel.h"

#include "blockshuffle.h"
#include "corgipile.h"
#include "layout.h"
#include "params.h"
#include "sgd.h"
#include "tupleshuffle.h"

static set_rel_pathlist_hook_type prev_set_rel_pathlist_hook = NULL;

static Plan *sgd_plan_custom_path(PlannerInfo *root, RelOptInfo *rel,
								  CustomPath *best_path, List *tlist,
								  List *clauses, List *custom_plans);

static CustomPathMethods sgd_path_methods = {
	.CustomName = "SGD",
	.PlanCustomPath = sgd_plan_custom_path,
};

/* Is this a call of corgipile.train()? */
static bool
is_train_call(FuncExpr *fexpr)
{
	Oid			nsp;
	char	   *name;

	if (!fexpr->funcretset)
		return false;
	nsp = get_namespace_oid("corgipile", true);
	if (!OidIsValid(nsp) || get_func_namespace(fexpr->funcid) != nsp)
		return false;
	name = get_func_name(fexpr->funcid);
	return name != NULL && strcmp(name, "train") == 0;
}

/*
 * Open a relation the training reads, check it, and return the columns it
 * reads.  The lock taken here is kept until the end of the transaction.
 */
static Bitmapset *
check_training_relation(Oid relid, const CpTrainParams *p, const char *param,
						BlockNumber *n_pages)
{
	Relation	rel = relation_open(relid, AccessShareLock);
	CpLayout	layout;
	Bitmapset  *cols;

	cp_check_relation(rel, param);
	cp_layout_resolve(&layout, RelationGetDescr(rel), RelationGetRelationName(rel), p);
	cols = cp_layout_columns(&layout);
	cp_check_select(rel, cols);
	if (n_pages)
		*n_pages = RelationGetNumberOfBlocks(rel);
	relation_close(rel, NoLock);
	return cols;
}

static void
cp_set_rel_pathlist(PlannerInfo *root, RelOptInfo *rel, Index rti,
					RangeTblEntry *rte)
{
	RangeTblFunction *rtfunc;
	FuncExpr   *fexpr;
	ListCell   *lc;
	CpTrainParams p;
	CustomPath *path;
	BlockNumber n_pages;
	double		scan_cost;

	if (prev_set_rel_pathlist_hook)
		prev_set_rel_pathlist_hook(root, rel, rti, rte);

	if (rte->rtekind != RTE_FUNCTION || rte->funcordinality ||
		list_length(rte->functions) != 1)
		return;
	rtfunc = linitial_node(RangeTblFunction, rte->functions);
	if (!IsA(rtfunc->funcexpr, FuncExpr))
		return;
	fexpr = (FuncExpr *) rtfunc->funcexpr;
	if (!is_train_call(fexpr) || list_length(fexpr->args) != CP_NUM_ARGS)
		return;
	/* non-constant arguments: the function's own implementation re-plans */
	foreach(lc, fexpr->args)
		if (!IsA(lfirst(lc), Const))
			return;

	/* refuse bad input now, before any work is done */
	cp_params_from_consts(fexpr->args, &p);
	check_training_relation(p.relid, &p, "relation", &n_pages);
	if (OidIsValid(p.validation_relid))
		check_training_relation(p.validation_relid, &p, "validation relation", NULL);

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
	path->path.rows = p.max_epoch_num;
	path->path.startup_cost = scan_cost;
	path->path.total_cost = scan_cost * p.max_epoch_num;
	path->path.pathkeys = NIL;
	path->flags = 0;
	path->custom_paths = NIL;
	path->custom_private = fexpr->args;
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
	List	   *args = best_path->custom_private;
	RangeTblEntry *rte = planner_rt_fetch(rel->relid, root);
	FuncExpr   *fexpr = (FuncExpr *) linitial_node(RangeTblFunction, rte->functions)->funcexpr;
	CpTrainParams p;
	Index		train_rti;
	CustomScan *block_scan;
	CustomScan *tuple_scan;

	cp_params_from_consts(args, &p);
	train_rti = add_relation_rte(root, p.relid,
								 check_training_relation(p.relid, &p, "relation", NULL));
	if (OidIsValid(p.validation_relid))
		add_relation_rte(root, p.validation_relid,
						 check_training_relation(p.validation_relid, &p,
												 "validation relation", NULL));

	block_scan = block_shuffle_make_plan(args, train_rti);
	tuple_scan = tuple_shuffle_make_plan(args, block_scan);
	return &sgd_make_plan(args, tuple_scan, tlist,
						  function_scan_tlist(fexpr, rel->relid),
						  extract_actual_clauses(clauses, false),
						  rel->relid)->scan.plan;
}

void
cp_planner_init(void)
{
	prev_set_rel_pathlist_hook = set_rel_pathlist_hook;
	set_rel_pathlist_hook = cp_set_rel_pathlist;
}
