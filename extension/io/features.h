/*-------------------------------------------------------------------------
 *
 * features.h
 *	  How a table's rows hold their features: what the column resolver
 *	  (layout.c) finds and a model's preprocessing (prep.c) is checked
 *	  against.
 *
 *-------------------------------------------------------------------------
 */
#ifndef CORGIPILE_IO_FEATURES_H
#define CORGIPILE_IO_FEATURES_H

typedef enum CpFeatureMode
{
	CP_FEATURES_ARRAY,			/* one float4[]/float8[]/... column */
	CP_FEATURES_COLUMNS,		/* a list of numeric columns */
	CP_FEATURES_SPARSE,			/* an index array and a value array */
	CP_FEATURES_NONE			/* no label or features: row ids only */
} CpFeatureMode;

#endif							/* CORGIPILE_IO_FEATURES_H */
