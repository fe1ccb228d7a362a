#!/usr/bin/env bash
# make demo: build and install the extension, start (or reuse) a local
# cluster in .demo/, and run scripts/demo.py against it.
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
.venv/bin/python scripts/demo.py "$@"
