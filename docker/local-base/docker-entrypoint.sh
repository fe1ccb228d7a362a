#!/usr/bin/env bash
# Entrypoint of the local stand-in for the official postgres:15-bookworm
# image (docker/local-base/postgres.Dockerfile), for machines that cannot
# reach Docker Hub.  Written for this project from the official image's
# documented behaviour, which is all that docker/Dockerfile and its scripts
# rely on:
#
# * the command is `postgres` (or starts with an option, which means
#   postgres): anything else is executed as given;
# * POSTGRES_PASSWORD, POSTGRES_USER (default postgres), POSTGRES_DB
#   (default $POSTGRES_USER), POSTGRES_INITDB_ARGS and
#   POSTGRES_HOST_AUTH_METHOD, each also readable from a file named by the
#   same variable with _FILE appended;
# * started as root: the data directory is handed to postgres and the
#   script runs again as postgres (gosu);
# * an empty $PGDATA (no PG_VERSION file) is initialised: initdb with the
#   superuser's password, a pg_hba.conf line for TCP clients, a temporary
#   server on the Unix socket only (listen_addresses = ''), CREATE DATABASE
#   $POSTGRES_DB, then every file in /docker-entrypoint-initdb.d in name
#   order (*.sh executed when executable, sourced otherwise; *.sql through
#   psql), then the temporary server stops with a fast shutdown;
# * then `exec "$@"`, so that PostgreSQL is PID 1 and gets the stop signal.
set -Eeo pipefail

# VAR or VAR_FILE (one of them), exported as VAR.
from_env_or_file() {
    local var=$1 default=${2:-} file_var="${1}_FILE"
    if [ -n "${!var:-}" ] && [ -n "${!file_var:-}" ]; then
        echo "docker-entrypoint: $var and $file_var are both set; set one of them" >&2
        exit 1
    fi
    local value=$default
    if [ -n "${!var:-}" ]; then
        value=${!var}
    elif [ -n "${!file_var:-}" ]; then
        value=$(<"${!file_var}")
    fi
    export "$var=$value"
    unset "$file_var"
}

# psql against the temporary server: on the socket, stop on the first error.
run_sql() {
    PGHOST='' PGHOSTADDR='' psql -v ON_ERROR_STOP=1 --no-psqlrc --no-password \
        --username "$POSTGRES_USER" "$@"
}

initialise() {
    if [ -z "$POSTGRES_PASSWORD" ] && [ "$POSTGRES_HOST_AUTH_METHOD" != trust ]; then
        echo "docker-entrypoint: the data directory is empty and POSTGRES_PASSWORD is not set:" \
            "set it (or POSTGRES_HOST_AUTH_METHOD=trust, which lets anyone in)" >&2
        exit 1
    fi
    # The password goes through a pipe, never the command line; initdb
    # refuses an empty password file, hence the newline.
    # shellcheck disable=SC2086  # POSTGRES_INITDB_ARGS is a list of words
    initdb --username="$POSTGRES_USER" \
        --pwfile=<(printf '%s\n' "$POSTGRES_PASSWORD") $POSTGRES_INITDB_ARGS

    local method=$POSTGRES_HOST_AUTH_METHOD
    if [ -z "$method" ]; then
        method=$(postgres -C password_encryption -D "$PGDATA")
    fi
    printf '\nhost all all all %s\n' "$method" >>"$PGDATA/pg_hba.conf"

    export PGPASSWORD="${PGPASSWORD:-$POSTGRES_PASSWORD}"
    pg_ctl -D "$PGDATA" -w start \
        -o "-c listen_addresses='' -p ${PGPORT:-5432}"

    if [ -z "$(run_sql --dbname postgres --tuples-only --set db="$POSTGRES_DB" \
        --command "SELECT 1 FROM pg_catalog.pg_database WHERE datname = :'db'" </dev/null)" ]; then
        run_sql --dbname postgres --set db="$POSTGRES_DB" <<<'CREATE DATABASE :"db"'
    fi

    local f
    for f in /docker-entrypoint-initdb.d/*; do
        case "$f" in
        *.sh)
            if [ -x "$f" ]; then
                echo "docker-entrypoint: running $f"
                "$f"
            else
                echo "docker-entrypoint: sourcing $f"
                # shellcheck disable=SC1090
                . "$f"
            fi
            ;;
        *.sql)
            echo "docker-entrypoint: running $f"
            run_sql --dbname "$POSTGRES_DB" -f "$f"
            ;;
        */\*) ;;  # the directory is empty
        *) echo "docker-entrypoint: ignoring $f" ;;
        esac
    done

    pg_ctl -D "$PGDATA" -m fast -w stop
    unset PGPASSWORD
    echo "docker-entrypoint: PostgreSQL init process complete; ready for start up."
}

if [ "${1:0:1}" = - ]; then
    set -- postgres "$@"
fi

if [ "${1:-}" = postgres ]; then
    from_env_or_file POSTGRES_PASSWORD
    from_env_or_file POSTGRES_USER postgres
    from_env_or_file POSTGRES_DB "$POSTGRES_USER"
    from_env_or_file POSTGRES_INITDB_ARGS
    : "${POSTGRES_HOST_AUTH_METHOD:=}"

    mkdir -p "$PGDATA"
    chmod 0700 "$PGDATA" || true
    mkdir -p /var/run/postgresql || true
    chmod 03775 /var/run/postgresql || true
    if [ "$(id -u)" = 0 ]; then
        find "$PGDATA" /var/run/postgresql \! -user postgres -exec chown postgres '{}' +
        exec gosu postgres "${BASH_SOURCE[0]}" "$@"
    fi

    if [ -s "$PGDATA/PG_VERSION" ]; then
        echo "docker-entrypoint: $PGDATA holds a database; skipping initialisation"
    else
        initialise
    fi
fi

exec "$@"
