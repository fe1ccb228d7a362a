# Sourced (not run) by tests/run_tests.sh and scripts/test_madlib.sh: start a
# throwaway cluster of $PG_CONFIG's PostgreSQL in /tmp/corgipile-NAME.*
# on a port the kernel hands out, export PGHOST/PGPORT/PGUSER for it, and
# stop and remove it when the sourcing script exits.  Sets $cluster.
#
#   . scripts/throwaway_cluster.sh NAME
cluster=$(mktemp -d "/tmp/corgipile-${1:?throwaway_cluster.sh NAME}.XXXXXX")
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cleanup() {
    scripts/pgcluster.sh stop "$cluster" immediate || true
    rm -rf "$cluster"
}
trap cleanup EXIT
scripts/pgcluster.sh start "$cluster" "$port"
eval "$(scripts/pgcluster.sh env "$cluster" "$port")"
