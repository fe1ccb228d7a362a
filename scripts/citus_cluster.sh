#!/usr/bin/env bash
# A Citus cluster on one machine for the distributed tests: a coordinator and
# two workers of a PostgreSQL 15 that has Citus and corgipile installed.
#
#   scripts/citus_cluster.sh available    exit 0 if Citus can be had here (below),
#                                         else say why and exit 3
#   scripts/citus_cluster.sh build        print the pg_config of a PostgreSQL
#                                         with Citus and this checkout's corgipile
#   scripts/citus_cluster.sh start DIR    start the three nodes under DIR on free
#                                         ports (first start: initdb, CREATE
#                                         EXTENSION citus and corgipile, the workers
#                                         added); writes DIR/env (COORDINATOR_PORT,
#                                         WORKER_PORTS, PGHOST, PG_CONFIG, ...)
#   scripts/citus_cluster.sh stop DIR     stop them (DIR stays)
#
# Where Citus comes from:
#   CORGIPILE_CITUS_PG_CONFIG  a PostgreSQL 15 that already has Citus (from
#                              Citus' own packages, say): used as it is,
#                              corgipile is installed into it
#   otherwise Citus 13.2.2 is built from the vendored sources
#   (CORGIPILE_CITUS_VENDOR, default /work/shared/vendor/citus: build.sh and
#   its tarball; about a minute on 2 cores) into a relocated copy of the
#   PostgreSQL PG_CONFIG names, under CORGIPILE_CITUS_BUILD (default
#   build/citus), and reused while the sources are the same.
set -euo pipefail
cd "$(dirname "$0")/.."

cmd=${1:?usage: citus_cluster.sh build|start DIR|stop DIR}

vendor=${CORGIPILE_CITUS_VENDOR:-/work/shared/vendor/citus}

# why Citus cannot be had here, or nothing
unavailable() {
    if [ -z "${CORGIPILE_CITUS_PG_CONFIG:-}" ] && { [ ! -f "$vendor/build.sh" ] || [ ! -f "$vendor/citus-13.2.2.tar.gz" ]; }; then
        echo "no Citus: neither CORGIPILE_CITUS_PG_CONFIG (a PostgreSQL 15 with Citus)" \
            "nor Citus' vendored sources ($vendor/build.sh and citus-13.2.2.tar.gz; CORGIPILE_CITUS_VENDOR)"
    fi
}

citus_pg_config() {
    if [ -n "${CORGIPILE_CITUS_PG_CONFIG:-}" ]; then
        if [ ! -e "$("$CORGIPILE_CITUS_PG_CONFIG" --pkglibdir)/citus.so" ]; then
            echo "citus_cluster.sh: $CORGIPILE_CITUS_PG_CONFIG's PostgreSQL has no Citus" \
                "(no citus.so in its library directory)" >&2
            return 2
        fi
        echo "$CORGIPILE_CITUS_PG_CONFIG"
        return
    fi
    local build pg_config stamp why
    why=$(unavailable)
    if [ -n "$why" ]; then
        echo "citus_cluster.sh: $why" >&2
        return 3
    fi
    build=$(realpath -m "${CORGIPILE_CITUS_BUILD:-build/citus}")
    . scripts/relocated_pg.sh
    pg_config=$(relocated_pg "${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}" "$build/pg")
    stamp=$(cat "$vendor"/* | sha256sum | cut -d' ' -f1)
    if [ ! -e "$("$pg_config" --pkglibdir)/citus.so" ] \
        || [ "$(cat "$build/.stamp" 2>/dev/null)" != "$stamp" ]; then
        echo "== Citus 13.2.2: building into $build/pg (about a minute)" >&2
        rm -f "$build/.stamp"
        PG_CONFIG=$pg_config "$vendor/build.sh" "$build/src" >&2
        echo "$stamp" >"$build/.stamp"
    fi
    # the server runs as postgres, which must reach the copy
    chmod -R a+rX "$build/pg"
    echo "$pg_config"
}

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

nodes=(coordinator worker1 worker2)
owner=$( [ "$(id -u)" = 0 ] && echo postgres || id -un)

case "$cmd" in
available)
    why=$(unavailable)
    [ -z "$why" ] || { echo "$why"; exit 3; }
    ;;
build)
    pg_config=$(citus_pg_config)
    make -s PG_CONFIG="$pg_config" >&2
    make -s PG_CONFIG="$pg_config" install >&2
    echo "$pg_config"
    ;;
start)
    dir=$(realpath -m "${2:?data directory}")
    mkdir -p "$dir"
    if [ -f "$dir/env" ]; then
        . "$dir/env"
        pg_config=$PG_CONFIG
    else
        pg_config=$("$0" build)
    fi
    first=
    [ -f "$dir/coordinator/data/PG_VERSION" ] || first=1
    ports=()
    for node in "${nodes[@]}"; do
        port=$(sed -n "s/^port = //p" "$dir/$node/data/postgresql.conf" 2>/dev/null | tail -n 1 || true)
        [ -n "$port" ] || port=$(free_port)
        CORGIPILE_PG_PRELOAD=citus PG_CONFIG=$pg_config scripts/pgcluster.sh start "$dir/$node" "$port"
        ports+=("$port")
    done
    sql() {  # NODE_INDEX SQL, as the superuser over the node's Unix socket
        "$("$pg_config" --bindir)/psql" -X -q -At -v ON_ERROR_STOP=1 -h "$dir/${nodes[$1]}/socket" \
            -p "${ports[$1]}" -U "$owner" -d postgres -c "$2"
    }
    if [ -n "$first" ]; then
        for i in 0 1 2; do
            sql $i "CREATE EXTENSION citus; CREATE EXTENSION corgipile" >/dev/null
        done
        sql 0 "SELECT pg_catalog.citus_set_coordinator_host('127.0.0.1', ${ports[0]})" >/dev/null
        sql 0 "SELECT pg_catalog.citus_add_node('127.0.0.1', ${ports[1]})" >/dev/null
        sql 0 "SELECT pg_catalog.citus_add_node('127.0.0.1', ${ports[2]})" >/dev/null
    fi
    cat >"$dir/env" <<ENV
PG_CONFIG=$pg_config
PGHOST=$dir/coordinator/socket
PGPORT=${ports[0]}
PGUSER=$owner
COORDINATOR_DIR=$dir/coordinator
COORDINATOR_PORT=${ports[0]}
WORKER_DIRS="$dir/worker1 $dir/worker2"
WORKER_PORTS="${ports[1]} ${ports[2]}"
ENV
    ;;
stop)
    dir=$(realpath -m "${2:?data directory}")
    . "$dir/env"
    for node in "${nodes[@]}"; do
        PG_CONFIG=$PG_CONFIG scripts/pgcluster.sh stop "$dir/$node" "${3:-fast}" || true
    done
    ;;
*)
    echo "citus_cluster.sh: unknown command $cmd" >&2
    exit 2
    ;;
esac
