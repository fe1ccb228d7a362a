#!/usr/bin/env bash
# Build and install the extension, start (or reuse) the local cluster in
# .demo/, then run the given command with PGHOST/PGPORT/PGUSER set for it.
# make demo and make bench go through here.
set -euo pipefail
cd "$(dirname "$0")/.."

export PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
port=${CORGIPILE_DEMO_PORT:-55499}
scripts/install_deps.sh
make -s PG_CONFIG="$PG_CONFIG"
make -s PG_CONFIG="$PG_CONFIG" install
scripts/pgcluster.sh start .demo "$port"
eval "$(scripts/pgcluster.sh env .demo "$port")"
echo "Cluster: PGHOST=$PGHOST PGPORT=$PGPORT (stop it with: scripts/pgcluster.sh stop .demo)"
exec "$@"
