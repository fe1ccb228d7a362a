#!/usr/bin/env bash
# Install what building, testing and the demo need, on a fresh Debian
# machine with PostgreSQL 15: the server headers (PGXS), the Fashion-MNIST
# dataset package, valgrind (make memcheck), and a Python virtual environment in .venv with the test
# requirements and the client.  Safe to run again; it skips what is there.
set -euo pipefail
cd "$(dirname "$0")/.."

PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
apt_needed=()
if [ ! -x "$PG_CONFIG" ] || [ ! -e "$("$PG_CONFIG" --includedir-server 2>/dev/null)/postgres.h" ] \
    || [ ! -e "$("$PG_CONFIG" --pgxs 2>/dev/null)" ]; then
    apt_needed+=(postgresql-server-dev-15)
fi
[ -d /usr/share/datasets/fashion-mnist ] || apt_needed+=(dataset-fashion-mnist)
command -v python3 >/dev/null || apt_needed+=(python3 python3-venv)
# make test runs the C core under valgrind (make memcheck)
command -v valgrind >/dev/null || apt_needed+=(valgrind)

if [ ${#apt_needed[@]} -gt 0 ]; then
    if [ "$(id -u)" != 0 ]; then
        echo "install_deps: need root to install: ${apt_needed[*]}" >&2
        exit 1
    fi
    echo "install_deps: apt-get install ${apt_needed[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${apt_needed[@]}" >/dev/null
fi

# Python: one venv for the tests, the demo, the benchmarks and the client.
stamp=.venv/.deps-stamp
want=$({ cat requirements-dev.txt; cat python_client/pyproject.toml 2>/dev/null || true; } | sha256sum | cut -c1-16)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    [ -x .venv/bin/python ] || python3 -m venv .venv
    .venv/bin/pip install -q --disable-pip-version-check -r requirements-dev.txt
    if [ -f python_client/pyproject.toml ]; then
        .venv/bin/pip install -q --disable-pip-version-check -e "./python_client[sqlalchemy]"
    fi
    echo "$want" >"$stamp"
fi
