#!/usr/bin/env bash
# make bench: the engine benchmark (scripts/bench_epochs.py) on the demo
# cluster in .demo/.  Pass options through, e.g. make bench ARGS="--rows 500000".
set -euo pipefail
cd "$(dirname "$0")/.."
export PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
port=${CORGIPILE_DEMO_PORT:-55499}
scripts/install_deps.sh
make -s PG_CONFIG="$PG_CONFIG"
make -s PG_CONFIG="$PG_CONFIG" install
scripts/pgcluster.sh start .demo "$port"
eval "$(scripts/pgcluster.sh env .demo "$port")"
.venv/bin/python scripts/bench_epochs.py "$@"
