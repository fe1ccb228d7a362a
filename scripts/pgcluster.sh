#!/usr/bin/env bash
# Start, stop or inspect a throwaway PostgreSQL 15 cluster for tests and the
# demo.  The server runs as a non-root user (postgres when we are root),
# listens on a Unix socket in the data directory's sibling folder and on
# 127.0.0.1 only.
#
#   scripts/pgcluster.sh start DIR PORT   initdb if needed, then start
#   scripts/pgcluster.sh stop DIR [MODE]  stop (MODE: fast, immediate)
#   scripts/pgcluster.sh password DIR     give the superuser a password (kept in
#                                         DIR/password) and make TCP connections
#                                         ask for it (scram-sha-256); the Unix
#                                         socket stays trust.  Run on a started
#                                         cluster; safe to run again.
#   scripts/pgcluster.sh env DIR PORT     print PGHOST/PGPORT/PGUSER exports (and
#                                         PGPASSFILE once `password` has run)
#
# CORGIPILE_PG_PRELOAD, when set at the first start, is the new cluster's
# shared_preload_libraries (citus for scripts/citus_cluster.sh).
set -euo pipefail

PG_CONFIG=${PG_CONFIG:-pg_config}
BINDIR=$("$PG_CONFIG" --bindir)

as_owner() {
    if [ "$(id -u)" = 0 ]; then
        # from /: postgres may not be allowed into our working directory
        (cd / && runuser -u postgres -- "$@")
    else
        "$@"
    fi
}

owner() {
    if [ "$(id -u)" = 0 ]; then echo postgres; else id -un; fi
}

cmd=${1:?usage: pgcluster.sh start|stop|env DIR [PORT]}
dir=${2:?data directory}
dir=$(realpath -m "$dir")
data="$dir/data"
sock="$dir/socket"

case "$cmd" in
start)
    port=${3:?port}
    # a Unix socket path holds at most 107 bytes
    if [ ${#sock} -gt $((107 - 20)) ]; then
        echo "pgcluster.sh: $dir is too long a path for the server's Unix socket; use a shorter one (under /tmp)" >&2
        exit 1
    fi
    mkdir -p "$dir" "$sock"
    if [ "$(id -u)" = 0 ]; then
        chown -R postgres: "$dir"
        if ! runuser -u postgres -- test -w "$dir"; then
            echo "pgcluster.sh: the server runs as postgres, which cannot reach $dir" \
                "(a parent directory is closed to it, e.g. /root); use a directory under /tmp or /var/tmp" >&2
            exit 1
        fi
    fi
    if [ ! -f "$data/PG_VERSION" ]; then
        as_owner "$BINDIR/initdb" -D "$data" -U "$(owner)" --auth=trust \
            --encoding=UTF8 --locale=C.UTF-8 >"$dir/initdb.log"
        cat >>"$data/postgresql.conf" <<CONF
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = '$sock'
fsync = on
max_connections = 50
shared_buffers = 128MB
log_min_messages = warning
CONF
        if [ -n "${CORGIPILE_PG_PRELOAD:-}" ]; then
            echo "shared_preload_libraries = '$CORGIPILE_PG_PRELOAD'" >>"$data/postgresql.conf"
        fi
    fi
    if ! as_owner "$BINDIR/pg_ctl" -D "$data" status >/dev/null 2>&1; then
        # -p: the port asked for now wins over the one written at initdb
        if ! as_owner "$BINDIR/pg_ctl" -D "$data" -l "$dir/server.log" -o "-p $port" \
                -w -t 60 start >/dev/null; then
            echo "pgcluster.sh: the server in $data did not start; the end of $dir/server.log:" >&2
            tail -n 5 "$dir/server.log" >&2
            if tail -n 5 "$dir/server.log" | grep -q "Address already in use"; then
                echo "pgcluster.sh: port $port is taken (another cluster, such as another" \
                    "checkout's make demo): stop it, or choose another port" \
                    "(make demo: CORGIPILE_DEMO_PORT=N make demo)" >&2
            fi
            exit 1
        fi
    fi
    ;;
stop)
    mode=${3:-fast}
    if as_owner "$BINDIR/pg_ctl" -D "$data" status >/dev/null 2>&1; then
        as_owner "$BINDIR/pg_ctl" -D "$data" -m "$mode" -w -t 60 stop >/dev/null
    fi
    ;;
password)
    # TCP clients (corgipile proxy among them: the proxy refuses a session
    # the server admits without a password) authenticate with SCRAM; the
    # owner's scripts keep the Unix socket without one.
    if [ ! -s "$dir/password" ]; then
        (umask 077 && head -c 18 /dev/urandom | base64 | tr -d '/+=\n' >"$dir/password")
    fi
    pw=$(cat "$dir/password")
    (umask 077 && printf '*:*:*:%s:%s\n' "$(owner)" "$pw" >"$dir/pgpass")
    sql() {  # as the owner, over the Unix socket (not logged)
        as_owner "$BINDIR/psql" -X -q -At -h "$sock" -p "$(sed -n 4p "$data/postmaster.pid")" \
            -U "$(owner)" -d postgres -v ON_ERROR_STOP=1 -c "$1"
    }
    sql "ALTER ROLE \"$(owner)\" PASSWORD '$pw'" >/dev/null
    if grep -Eq '^host[[:space:]].*[[:space:]]trust[[:space:]]*$' "$data/pg_hba.conf"; then
        as_owner sed -i -E 's/^(host[[:space:]].*[[:space:]])trust[[:space:]]*$/\1scram-sha-256/' \
            "$data/pg_hba.conf"
        loaded=$(sql "SELECT pg_catalog.pg_conf_load_time()")
        as_owner "$BINDIR/pg_ctl" -D "$data" reload >/dev/null
        # the postmaster reloads when it handles the signal; a backend
        # started after that reports the new load time (and has the new
        # pg_hba.conf)
        for _ in $(seq 1 600); do
            [ "$(sql "SELECT pg_catalog.pg_conf_load_time()")" != "$loaded" ] && break
            sleep 0.05
        done
    fi
    ;;
env)
    port=${3:?port}
    echo "export PGHOST='$sock' PGPORT='$port' PGUSER='$(owner)' PGDATABASE=postgres"
    if [ -s "$dir/pgpass" ]; then
        echo "export PGPASSFILE='$dir/pgpass'"
    fi
    ;;
*)
    echo "unknown command $cmd" >&2
    exit 2
    ;;
esac
