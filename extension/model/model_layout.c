/*-------------------------------------------------------------------------
 *
 * model_layout.c
 *	  The layout a stored model reads a relation with: its feature columns,
 *	  its label encoding (classes or a binary model's text labels, checked
 *	  against the relation's label type) and its preprocessing.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/rel.h"

#include "io/layout.h"
#include "io/prep.h"
#include "model/models.h"

/*
 * A layout for the relation from the columns the model was trained on,
 * with the model's label encoding and preprocessing: how evaluate() and
 * block_rows() read a relation with a stored model.
 */
void
cp_model_layout(const CpStoredModel *m, Relation rel, CpLayout *lo)
{
	CpTrainParams p;
	StringInfoData features;
	ListCell   *lc;

	memset(&p, 0, sizeof(p));
	p.model = m->kind;
	p.label = (char *) quote_identifier(m->label);
	initStringInfo(&features);
	foreach(lc, m->features)
		appendStringInfo(&features, "%s%s", foreach_current_index(lc) > 0 ? ", " : "",
						 quote_identifier(lfirst(lc)));
	p.features = features.data;
	p.feature_indices = m->feature_indices ? (char *) quote_identifier(m->feature_indices) : NULL;
	/*
	 * The dimension of a columns model follows from its preprocessing
	 * (categories, missing indicators), which cp_layout_use_prep sets;
	 * without one it is the columns' count, as the loader checked.
	 */
	p.n_features = m->mode == CP_FEATURES_COLUMNS ? 0 : m->n_features;
	cp_layout_resolve(lo, RelationGetDescr(rel), RelationGetRelationName(rel), &p);
	if (lo->mode != m->mode)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("relation \"%s\" lays out the features of model \"%s\" differently",
						RelationGetRelationName(rel), m->model_name)));
	cp_layout_check_label_kind(lo, m->classes_are_text, m->model_name);
	if (m->kind == CP_MODEL_SOFTMAX)
		lo->classes = cp_class_map_from_names(lo->label_type, m->class_names, m->n_classes);
	else if (lo->label_is_text)
	{
		if (m->label_dict == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_DATATYPE_MISMATCH),
					 errmsg("label column \"%s\" of relation \"%s\" is text, but model \"%s\" has no text classes",
							lo->label_name, RelationGetRelationName(rel), m->model_name)));
		lo->label_dict = m->label_dict;
	}
	/* raw rows in: the model's encoding and transform */
	cp_layout_use_prep(lo, m->prep, m->model_name);
}
