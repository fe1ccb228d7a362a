/*-------------------------------------------------------------------------
 *
 * model_coefficients.c
 *	  corgipile.model_coefficients(model_name): a model's weights in the
 *	  original units of its features, for SQL users (the Python client
 *	  computes the same with numpy: Model.coef / intercept).
 *
 * A standardized model stores its weights in the scaled space, which is
 * what prediction uses; w / std and b - sum(w * mean / std) are what the
 * weights mean for raw values (cp_prep_weights_to_original).  Together
 * with the stored weights they reveal each feature's std and a sum of its
 * means, and a one-hot column's rows name every category value: figures of
 * the training relation's rows.  So the rule of the models view applies
 * (cp_model_may_see_data): only roles that may read that relation (or act
 * as the model's owner) see them.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"

#include "model/models.h"
#include "io/prep.h"

PG_FUNCTION_INFO_V1(corgipile_model_coefficients);

static char *
feature_label(const CpStoredModel *m, int32 j)
{
	const CpPrep *prep = m->prep;

	if (m->mode == CP_FEATURES_COLUMNS)
	{
		if (prep == NULL)
			return pstrdup(list_nth(m->features, j));
		for (int i = 0; i < prep->n_columns; i++)
		{
			const CpPrepColumn *col = &prep->columns[i];

			if (j < col->offset || j >= col->offset + col->width)
				continue;
			if (col->onehot)
			{
				int32		len;
				const char *s = cp_prep_dict_value(col->dict, j - col->offset, &len);

				return psprintf("%s=%.*s", col->name, (int) len, s);
			}
			return pstrdup(col->name);
		}
		/* a missing indicator: 1 where the column is NULL */
		for (int i = 0; prep->indicator != NULL && i < prep->n_columns; i++)
			if (!prep->columns[i].onehot && prep->indicator[prep->columns[i].offset] == j)
				return psprintf("%s IS NULL", prep->columns[i].name);
	}
	/* SQL's subscripts for an array, the index itself for sparse features */
	return psprintf("%s[%d]", (char *) linitial(m->features),
					m->mode == CP_FEATURES_SPARSE ? j : j + 1);
}

/*
 * corgipile.model_coefficients(model_name text)
 *	 RETURNS TABLE (output integer, feature text, weight float8)
 * One row per weight, the intercept as feature NULL; output numbers the
 * classes of softmax from 1 (1 for other models).
 */
Datum
corgipile_model_coefficients(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	CpStoredModel *m;
	double	   *w;
	int32		nf;

	InitMaterializedSRF(fcinfo, 0);
	m = cp_models_load(text_to_cstring(PG_GETARG_TEXT_PP(0)));
	/*
	 * original-unit weights reveal the means and stds, and the features'
	 * names the category values of text columns
	 */
	cp_models_check_may_see_data(m, "Its original-unit weights");
	nf = m->n_features;
	w = m->prep ? cp_prep_original_weights(m->prep, m->weights, m->n_outputs) :
		m->weights;
	for (int k = 0; k < m->n_outputs; k++)
	{
		for (int32 j = 0; j <= nf; j++)
		{
			Datum		values[3];
			bool		nulls[3] = {false, j == nf, false};

			values[0] = Int32GetDatum(k + 1);
			values[1] = j < nf ? CStringGetTextDatum(feature_label(m, j)) : (Datum) 0;
			values[2] = Float8GetDatum(w[(int64) k * (nf + 1) + j]);
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
		}
	}
	return (Datum) 0;
}
