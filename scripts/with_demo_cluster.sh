#!/usr/bin/env bash
# Build and install the extension, start (or reuse) the local cluster in
# .demo/, then run the given command with PGHOST/PGPORT/PGUSER set for it.
# make demo and make bench go through here.
#
#   PG_CONFIG            the PostgreSQL to build for and run (default: the
#                        system's 15); as root, make install writes into it
#   CORGIPILE_DEMO_PORT  the cluster's port (default: scripts/demo_port.sh,
#                        derived from this checkout's path)
#   CORGIPILE_DEPS       which set install_deps.sh installs (default: demo)
set -euo pipefail
cd "$(dirname "$0")/.."

export PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
port=$(scripts/demo_port.sh)
scripts/install_deps.sh "${CORGIPILE_DEPS:-demo}"
echo "make demo: building the extension for $("$PG_CONFIG" --version) ($PG_CONFIG)"
make -s PG_CONFIG="$PG_CONFIG"
echo "make demo: installing it into $("$PG_CONFIG" --pkglibdir) and $("$PG_CONFIG" --sharedir)/extension"
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
echo "make demo: starting the cluster in .demo on port $port"
scripts/pgcluster.sh start .demo "$port"
# TCP connections ask for a password (SCRAM), so that corgipile proxy, which
# refuses sessions the server admits without one, works against this cluster
scripts/pgcluster.sh password .demo
eval "$(scripts/pgcluster.sh env .demo "$port")"
echo "Password: TCP connections (127.0.0.1:$port, corgipile proxy) ask for the one in .demo/password; pgcluster.sh env exports PGPASSFILE=.demo/pgpass, which holds it for psql and libpq"
echo "Cluster: PGHOST=$PGHOST PGPORT=$PGPORT (psql: eval \"\$(scripts/pgcluster.sh env .demo $port)\"; stop it with: scripts/pgcluster.sh stop .demo)"
exec "$@"
