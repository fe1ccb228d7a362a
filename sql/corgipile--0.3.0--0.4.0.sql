-- corgipile 0.3.0 -> 0.4.0
--
-- What changes (each section below names its part):
--   * corgipile.sizing() and corgipile.block_rows(): block sizing and packed
--     block rows for corgipile.torch (issues 20 and 23).

\echo Use "ALTER EXTENSION corgipile UPDATE TO '0.4.0'" to load this file. \quit

-- ---------------------------------------------------------------------------
-- Sizing and block rows for corgipile.torch (issue 23; issue 20 item 4)
--
-- corgipile.sizing(): how train() cuts a relation into blocks and buffers,
-- computed by the engine's own cp_resolve_sizing, so clients ask instead of
-- restating the rules.  corgipile.block_rows(): the rows of whole blocks,
-- converted as training converts them (optionally with a stored model's
-- label encoding and preprocessing), as packed little-endian floats.
-- ---------------------------------------------------------------------------

CREATE FUNCTION corgipile.sizing(
    relation regclass,
    block_size text DEFAULT NULL,
    buffer_size text DEFAULT '10%',
    pages bigint DEFAULT NULL,
    OUT n_pages bigint,
    OUT page_size integer,
    OUT pages_per_block bigint,
    OUT n_blocks bigint,
    OUT blocks_per_buffer bigint)
AS 'MODULE_PATHNAME', 'corgipile_sizing'
LANGUAGE C STABLE PARALLEL SAFE;

COMMENT ON FUNCTION corgipile.sizing IS 'How corgipile.train() would cut the relation (or pages heap pages, when given) into blocks and buffers for these block_size and buffer_size.';

CREATE FUNCTION corgipile.block_rows(
    relation regclass,
    first_pages bigint[],
    pages_per_block integer,
    label text DEFAULT NULL,
    features text DEFAULT NULL,
    feature_indices text DEFAULT NULL,
    model text DEFAULT NULL,
    id_column text DEFAULT NULL,
    n_features integer DEFAULT NULL,
    dtype text DEFAULT 'float4',
    OUT page bigint,
    OUT n_rows integer,
    OUT dim integer,
    OUT y bytea,
    OUT x bytea,
    OUT ids bytea)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'corgipile_block_rows'
LANGUAGE C VOLATILE PARALLEL UNSAFE ROWS 16;

COMMENT ON FUNCTION corgipile.block_rows IS 'The visible rows of the blocks of pages_per_block pages starting at first_pages, one output row per block (or per chunk of a large one): n_rows, dim, y (float8 labels), x (n_rows x dim float4 or float8 features, little-endian), ids (int8, with id_column). label defaults to ''label'', features to ''features''; with model the model''s columns, label encoding and preprocessing apply.';
