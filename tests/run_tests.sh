#!/usr/bin/env bash
# make test: install what is missing, lint and type-check the Python, build
# and install the extension, start a throwaway PostgreSQL 15 cluster as a
# non-root user, run the C unit tests, the SQL regression suite and the
# pytest suite, then stop the cluster.
set -euo pipefail
cd "$(dirname "$0")/.."

export PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
scripts/install_deps.sh

# first, so that a finding fails in seconds (pyproject.toml configures both)
echo "== lint: ruff"
.venv/bin/ruff check --no-cache .
echo "== types: mypy"
.venv/bin/mypy --cache-dir=/dev/null  # and no cache directories in the checkout

make -s PG_CONFIG="$PG_CONFIG"
# the extension, and the Bismarck-style baseline that corgipile bench runs
for dir in . benchmarks/bismarck; do
    make -s -C "$dir" PG_CONFIG="$PG_CONFIG" install || {
        echo "make test: cannot install into $("$PG_CONFIG" --pkglibdir); run as root" >&2
        exit 1
    }
done

. scripts/throwaway_cluster.sh test

echo "== layers: include and import directions (docs/engine.md)"
python3 scripts/check_layers.py

echo "== C unit tests"
make -s PG_CONFIG="$PG_CONFIG" unittest
echo "== C unit tests under valgrind memcheck"
make -s PG_CONFIG="$PG_CONFIG" memcheck

echo "== SQL regression tests"
if ! make -s PG_CONFIG="$PG_CONFIG" installcheck; then
    cat tests/regress/regression.diffs 2>/dev/null | head -200
    exit 1
fi
if ! make -s -C benchmarks/bismarck PG_CONFIG="$PG_CONFIG" installcheck; then
    cat benchmarks/bismarck/regression.diffs 2>/dev/null | head -100
    exit 1
fi

echo "== Citus: a coordinator and two workers for tests/python/citus"
if why=$(scripts/citus_cluster.sh available); then
    citus=$(mktemp -d /tmp/corgipile-citus.XXXXXX)
    chmod 755 "$citus"
    trap 'scripts/citus_cluster.sh stop "$citus" immediate || true; rm -rf "$citus"; cleanup' EXIT
    scripts/citus_cluster.sh start "$citus"
    export CORGIPILE_CITUS_CLUSTER=$citus
else
    echo "$why: tests/python/citus is skipped"
fi

echo "== pytest"
export CORGIPILE_TEST_CLUSTER="$cluster"
export PYTHONDONTWRITEBYTECODE=1
.venv/bin/python -m pytest -p no:cacheprovider -q tests/python "$@"
