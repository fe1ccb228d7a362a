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
# The server runs as postgres when we are root.  If postgres cannot reach
# this checkout (a clone under /root, say), the cluster's data goes under
# /var/tmp, one directory per checkout, and .demo links to it, so the
# commands that name .demo keep working.
if [ "$(id -u)" = 0 ] && [ ! -e .demo ] && ! runuser -u postgres -- test -x "$PWD"; then
    target=/var/tmp/corgipile-demo-$(printf %s "$PWD" | sha256sum | cut -c1-12)
    mkdir -p "$target"
    ln -sfn "$target" .demo
    echo "make demo: the postgres user cannot read $PWD; the cluster lives in $target (.demo links to it)"
fi
scripts/pgcluster.sh start .demo "$port"
eval "$(scripts/pgcluster.sh env .demo "$port")"
echo "Cluster: PGHOST=$PGHOST PGPORT=$PGPORT (stop it with: scripts/pgcluster.sh stop .demo)"
exec "$@"
