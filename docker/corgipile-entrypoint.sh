#!/usr/bin/env bash
# ENTRYPOINT of the corgipile image: apply CORGIPILE_PRELOAD, then hand over
# to the official image's docker-entrypoint.sh with the same arguments, so
# everything the official image documents (POSTGRES_* variables, init
# scripts, --user, custom commands) works unchanged.
#
# Why a wrapper: /docker-entrypoint-initdb.d runs on the first start only,
# and the switch should take effect on every start, including when it is
# flipped on an existing data volume.
set -Eeuo pipefail

here=$(dirname "$(readlink -f "$0")")

# The same test as the official entrypoint: the server is being started
# when the command is postgres, or when the first argument is an option.
starts_server=false
if [ $# -gt 0 ] && { [ "$1" = postgres ] || [ "${1:0:1}" = - ]; }; then
    starts_server=true
fi

if $starts_server; then
    if [ -s "${PGDATA:?PGDATA is not set}/PG_VERSION" ]; then
        # Existing cluster.  As root, the files written here are handed to
        # postgres by the official entrypoint's ownership fix-up anyway.
        "$here/corgipile-preload.sh" "$PGDATA"
    else
        # First start: initdb has not run yet; the init script
        # 10-corgipile-preload.sh applies the switch right after it.  Check
        # the value now, so that a typo fails before initdb does any work.
        "$here/corgipile-preload.sh" --check
    fi

    # Settings that bypass $PGDATA/postgresql.conf, and so the switch.
    case "${CORGIPILE_PRELOAD:-off}" in
    [oO][fF][fF] | [fF][aA][lL][sS][eE] | [nN][oO] | 0 | '') ;;
    *)
        for arg; do
            case "$arg" in
            *shared_preload_libraries* | *shared-preload-libraries* | *config_file* | *config-file*)
                echo "corgipile-entrypoint: warning: '$arg' on the command line overrides" \
                    "CORGIPILE_PRELOAD; list corgipile in shared_preload_libraries yourself" >&2
                ;;
            esac
        done
        ;;
    esac
fi

exec docker-entrypoint.sh "$@"
