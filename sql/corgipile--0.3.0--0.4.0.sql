-- corgipile 0.3.0 -> 0.4.0
--
-- What changes (each section below names its part):

\echo Use "ALTER EXTENSION corgipile UPDATE TO '0.4.0'" to load this file. \quit
