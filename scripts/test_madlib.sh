#!/usr/bin/env bash
# make test-madlib (opt-in, not part of make test): the MADlib runner of
# `corgipile bench` against a real Apache MADlib 2.1.0.
#
#  1. a relocated copy of the PostgreSQL 15 that PG_CONFIG names (the
#     system's by default) under the build directory: MADlib and Debian's
#     plpython3 go into the copy, never into the PostgreSQL it came from;
#  2. MADlib 2.1.0 built into it from the vendored sources (their build.sh:
#     6-8 minutes on 2 cores), or the build of an earlier run reused when the
#     sources have not changed;
#  3. corgipile and the Bismarck baseline installed into the copy, a
#     throwaway cluster of it started on a free port;
#  4. tests/python/bench/test_madlib_real.py (which installs MADlib with
#     madpack into its template database) and test_madlib_runner.py run.
#
# Settings (environment):
#   CORGIPILE_MADLIB_VENDOR  the directory with build.sh, madlib-2.1.0.tar.gz and
#                            eigen-branches-3.2.tar.gz (default /work/shared/vendor/madlib)
#   CORGIPILE_MADLIB_BUILD   the build directory (default build/madlib)
#   PG_CONFIG                the PostgreSQL to copy (default the system's)
#   CORGIPILE_MADLIB_RECORD=1  rewrite tests/python/bench/madlib_2_1_0.json from the real run
# Arguments are passed on to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."

vendor=${CORGIPILE_MADLIB_VENDOR:-/work/shared/vendor/madlib}
for f in build.sh madlib-2.1.0.tar.gz eigen-branches-3.2.tar.gz; do
    if [ ! -f "$vendor/$f" ]; then
        echo "make test-madlib: MADlib's vendored sources are not there: no $vendor/$f." >&2
        echo "  Set CORGIPILE_MADLIB_VENDOR to the directory that holds build.sh," \
            "madlib-2.1.0.tar.gz and eigen-branches-3.2.tar.gz." >&2
        exit 2
    fi
done
build=$(realpath -m "${CORGIPILE_MADLIB_BUILD:-build/madlib}")
src_pg_config=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}

# 1. the relocated copy
. scripts/relocated_pg.sh
copy=$build/pg
pg_config=$(relocated_pg "$src_pg_config" "$copy") || {
    echo "make test-madlib: cannot make a copy of PostgreSQL" >&2
    exit 2
}

# 2. MADlib, rebuilt only when the vendored sources changed
stamp=$(cat "$vendor/build.sh" "$vendor/madlib-2.1.0.tar.gz" "$vendor/eigen-branches-3.2.tar.gz" \
    | sha256sum | cut -d' ' -f1)
madpack=$build/madlib/inst/bin/madpack
if [ -x "$madpack" ] && [ "$(cat "$build/madlib/.stamp" 2>/dev/null)" = "$stamp" ]; then
    echo "== MADlib: reusing the build in $build/madlib"
else
    echo "== MADlib 2.1.0: building into $build/madlib (6-8 minutes on 2 cores)"
    rm -f "$build/madlib/.stamp"
    PG_CONFIG=$pg_config "$vendor/build.sh" "$build/madlib"
    echo "$stamp" >"$build/madlib/.stamp"
fi
# madpack picks the first python2.7/python it finds: the system's python3;
# its first install into a cluster reloads the server with pg_ctl, which
# runs only as the server's owner (postgres, when we are root)
cat >"$build/madpack" <<SH
#!/bin/sh
path="$("$pg_config" --bindir):/usr/bin:/bin"
if [ "\$(id -u)" = 0 ]; then
    cd / && exec runuser -u postgres -- env PATH="\$path" "$madpack" "\$@"
fi
exec env PATH="\$path" "$madpack" "\$@"
SH
chmod +x "$build/madpack"

# 3. the extension, the baseline, and a cluster of the copy
export PG_CONFIG=$pg_config
scripts/install_deps.sh
make -s install
make -s -C benchmarks/bismarck install
chmod -R a+rX "$copy" "$build/madlib/inst"
if [ "$(id -u)" = 0 ] && ! runuser -u postgres -- test -r "$("$pg_config" --pkglibdir)/plpython3.so"; then
    echo "make test-madlib: the server runs as postgres, which cannot read $build" \
        "(a parent directory is closed to it); set CORGIPILE_MADLIB_BUILD to a directory it can reach" >&2
    exit 1
fi
. scripts/throwaway_cluster.sh madlib

# 4. the tests
echo "== pytest: the MADlib runner against the MADlib built in $build/madlib"
export CORGIPILE_TEST_CLUSTER=$cluster CORGIPILE_MADPACK=$build/madpack PYTHONDONTWRITEBYTECODE=1
.venv/bin/python -m pytest -p no:cacheprovider -q -ra \
    tests/python/bench/test_madlib_real.py tests/python/bench/test_madlib_runner.py "$@"
