#!/usr/bin/env bash
# Apply the CORGIPILE_PRELOAD switch to a PostgreSQL data directory.
#
#   corgipile-preload.sh [DATADIR]   apply it to DATADIR (default: $PGDATA)
#   corgipile-preload.sh --check     only validate CORGIPILE_PRELOAD
#
# CORGIPILE_PRELOAD=on (or true, yes, 1) adds corgipile to
# shared_preload_libraries; off (or false, no, 0, empty, unset) adds nothing.
# The extension works either way: preloading only saves each new session
# the library load on its first corgipile call.
#
# How: DATADIR/corgipile.conf is rewritten on every run, and postgresql.conf
# gets one line, include_if_exists = 'corgipile.conf', kept as its last
# setting so that nothing in postgresql.conf overrides it.  Off on a data
# directory where it was never on changes nothing at all.  A separate file
# makes the switch reversible on any later start without editing the user's
# own settings.  shared_preload_libraries is a single list, so the value
# written keeps the libraries that postgresql.conf itself lists
# (pg_stat_statements, say) and appends corgipile.
#
# Not seen here: settings made with ALTER SYSTEM (postgresql.auto.conf is
# read after postgresql.conf and wins; we warn), files that postgresql.conf
# includes, `-c shared_preload_libraries=...` on the server's command line,
# and a config_file outside the data directory.  docker/README.md says so.
#
# The image runs this from corgipile-entrypoint.sh before every start of an
# existing cluster, and from /docker-entrypoint-initdb.d on the first start.
set -euo pipefail

me=corgipile-preload

# Normalise the switch; anything unexpected is an error, so that a typo
# stops the container instead of silently running without the preload.
want=$(printf '%s' "${CORGIPILE_PRELOAD:-}" | tr '[:upper:]' '[:lower:]')
case "$want" in
    on | true | yes | 1) want=on ;;
    off | false | no | 0 | '') want=off ;;
    *)
        echo "$me: CORGIPILE_PRELOAD must be on or off, not '${CORGIPILE_PRELOAD}'" >&2
        exit 2
        ;;
esac
[ "${1:-}" = --check ] && exit 0

datadir=${1:-${PGDATA:-}}
if [ -z "$datadir" ]; then
    echo "$me: no data directory given and PGDATA is not set" >&2
    exit 2
fi
conf="$datadir/postgresql.conf"
auto="$datadir/postgresql.auto.conf"
managed="$datadir/corgipile.conf"
# Off, and never switched on here before: leave the data directory exactly
# as it is (the default costs nothing, whatever its layout).
if [ "$want" = off ] && [ ! -e "$managed" ]; then
    echo "$me: CORGIPILE_PRELOAD=off, nothing to do in $datadir"
    exit 0
fi
if [ ! -f "$conf" ]; then
    echo "$me: $conf not found: is $datadir an initialised data directory?" >&2
    exit 1
fi

# Print the value of the last active shared_preload_libraries line of a
# configuration file, prefixed with "set:" (or print nothing when no line
# sets it), the way PostgreSQL reads it: the name is case-insensitive, the
# "=" optional, the value quoted ('' and backslash escapes) or a bare word,
# and the last setting wins.  mawk-compatible (the image's awk).
setting_in() {
    awk '
        function unquote(s,    out, i, c) {
            if (substr(s, 1, 1) != "\047") {
                sub(/[ \t#].*$/, "", s)
                return s
            }
            out = ""
            for (i = 2; i <= length(s); i++) {
                c = substr(s, i, 1)
                if (c == "\\") { i++; out = out substr(s, i, 1); continue }
                if (c == "\047") {
                    if (substr(s, i + 1, 1) != "\047") return out
                    i++
                }
                out = out c
            }
            return out
        }
        {
            line = $0
            sub(/^[ \t]+/, "", line)
            if (tolower(line) !~ /^shared_preload_libraries([ \t]|=)/) next
            sub(/^[A-Za-z_]+[ \t]*=?[ \t]*/, "", line)
            found = 1
            value = unquote(line)
        }
        END { if (found) print "set:" value }
    ' "$1"
}

# Is corgipile one of the comma-separated library names in $1?  Names may be
# double-quoted and surrounded by blanks.
lists_corgipile() {
    local name
    local -a names
    IFS=, read -r -a names <<<"$1"
    for name in "${names[@]}"; do
        name=${name//[[:space:]]/}
        name=${name//\"/}
        [ "$name" = corgipile ] && return 0
    done
    return 1
}

# Replace file $1 with stdin atomically, keeping the mode and owner of $2:
# when we run as root (the container's entrypoint does, before it steps
# down to postgres) a new file would otherwise belong to root.
replace_file() {
    local target=$1 like=$2 tmp
    tmp=$(mktemp "$datadir/.corgipile-preload.XXXXXX")
    cat >"$tmp"
    chmod --reference="$like" "$tmp"
    if [ "$(id -u)" = 0 ]; then
        chown --reference="$like" "$tmp"
    fi
    mv -f "$tmp" "$target"
}

# 1. The managed file, written afresh.
own=$(setting_in "$conf")
own=${own#set:}
{
    echo "# Written by corgipile-preload.sh from CORGIPILE_PRELOAD on every container"
    echo "# start; edits here are lost.  CORGIPILE_PRELOAD=$want"
    if [ "$want" = on ]; then
        if lists_corgipile "$own"; then
            value=$own
        elif [ -n "${own//[[:space:]]/}" ]; then
            value="$own,corgipile"
        else
            value=corgipile
        fi
        printf "shared_preload_libraries = '%s'\n" "${value//\'/\'\'}"
    fi
} | replace_file "$managed" "$conf"

# 2. The include, as the last setting of postgresql.conf: appended the first
# time, moved back to the end if settings were added after it since.
include="include_if_exists = 'corgipile.conf'	# CORGIPILE_PRELOAD, see corgipile.conf"
is_include="^[[:space:]]*include_if_exists[[:space:]]*=?[[:space:]]*'corgipile\\.conf'"
last_setting=$(grep -Ev '^[[:space:]]*(#|$)' "$conf" | tail -n 1 || true)
if ! printf '%s\n' "$last_setting" | grep -Eq "$is_include"; then
    { grep -Ev "$is_include" "$conf" || true; printf '%s\n' "$include"; } | replace_file "$conf" "$conf"
fi

# 3. ALTER SYSTEM overrides all of the above: say so rather than pretend.
if [ "$want" = on ] && [ -f "$auto" ]; then
    altered=$(setting_in "$auto")
    if [ -n "$altered" ] && ! lists_corgipile "${altered#set:}"; then
        echo "$me: warning: postgresql.auto.conf (ALTER SYSTEM) sets shared_preload_libraries" \
            "= '${altered#set:}', which overrides CORGIPILE_PRELOAD=on; add corgipile to it" \
            "with ALTER SYSTEM, or ALTER SYSTEM RESET shared_preload_libraries" >&2
    fi
fi
echo "$me: CORGIPILE_PRELOAD=$want applied to $datadir"
