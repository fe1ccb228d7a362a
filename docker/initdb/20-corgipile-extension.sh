#!/usr/bin/env bash
# First start only: create the extension in the default database, the one
# the official entrypoint has just created from POSTGRES_DB (which defaults
# to POSTGRES_USER, which defaults to postgres).  IF NOT EXISTS makes a
# second run harmless.
#
# The psql options are those of the entrypoint's own SQL runner: stop on the
# first error, never prompt for a password (PGPASSWORD is exported when one
# is needed), ignore any ~/.psqlrc.  The connection goes where libpq's
# environment says: inside the container PGHOST is unset, so it is the
# temporary server's Unix socket.
#
# Safe to execute or to source (see 10-corgipile-preload.sh): psql is the
# last command, so its status is the script's.
echo "corgipile: CREATE EXTENSION IF NOT EXISTS corgipile in database \"${POSTGRES_DB:-${POSTGRES_USER:-postgres}}\""
psql -v ON_ERROR_STOP=1 --no-psqlrc --no-password --quiet \
    --username "${POSTGRES_USER:-postgres}" \
    --dbname "${POSTGRES_DB:-${POSTGRES_USER:-postgres}}" \
    --command 'CREATE EXTENSION IF NOT EXISTS corgipile'
