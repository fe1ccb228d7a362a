#!/usr/bin/env bash
# Install what building and running corgipile need, on a fresh Debian
# machine with PostgreSQL 15, and say what is being installed.
#
#   scripts/install_deps.sh [test]   everything: make test, make bench, the
#                                    linters and the PyTorch suites
#                                    (requirements-dev.txt, ~1.6 GB with torch)
#   scripts/install_deps.sh demo     what make demo needs: the server headers,
#                                    the Fashion-MNIST package, and a small
#                                    venv (requirements-demo.txt + the client)
#
# The Python packages go into the virtual environment .venv of this
# checkout.  Safe to run again; it skips what is there.
set -euo pipefail
cd "$(dirname "$0")/.."

what=${1:-test}
case "$what" in
demo) requirements="requirements-demo.txt" ;;
test) requirements="requirements-dev.txt" ;;
*)
    echo "install_deps: unknown set '$what' (demo or test)" >&2
    exit 2
    ;;
esac

PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
apt_needed=()
if [ ! -x "$PG_CONFIG" ] || [ ! -e "$("$PG_CONFIG" --includedir-server 2>/dev/null)/postgres.h" ] \
    || [ ! -e "$("$PG_CONFIG" --pgxs 2>/dev/null)" ]; then
    apt_needed+=(postgresql-server-dev-15)
fi
[ -d /usr/share/datasets/fashion-mnist ] || apt_needed+=(dataset-fashion-mnist)
command -v python3 >/dev/null || apt_needed+=(python3 python3-venv)
# make test runs the C core under valgrind (make memcheck)
if [ "$what" = test ]; then
    command -v valgrind >/dev/null || apt_needed+=(valgrind)
fi

if [ ${#apt_needed[@]} -gt 0 ]; then
    if [ "$(id -u)" != 0 ]; then
        echo "install_deps: need root to install: ${apt_needed[*]}" >&2
        exit 1
    fi
    echo "install_deps: apt-get install ${apt_needed[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${apt_needed[@]}" >/dev/null
fi

# Python: one venv per checkout; the test set includes the demo's.
stamp_of() {
    { cat "$1"; cat python_client/pyproject.toml 2>/dev/null || true; } | sha256sum | cut -c1-16
}
want=$(stamp_of "$requirements")
if [ "$what" = demo ] && [ -f .venv/.deps-stamp-test ] \
    && [ "$(cat .venv/.deps-stamp-test)" = "$(stamp_of requirements-dev.txt)" ]; then
    exit 0  # the full set is there, and it holds the demo's
fi
stamp=.venv/.deps-stamp-$what
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    if [ ! -x .venv/bin/python ]; then
        echo "install_deps: creating the Python environment .venv"
        python3 -m venv .venv
    fi
    echo "install_deps: pip install -r $requirements ($(grep -c '==' "$requirements") pinned" \
        "packages$([ "$what" = test ] && echo ', torch among them: a few minutes and ~1.6 GB'))"
    .venv/bin/pip install -q --disable-pip-version-check -r "$requirements"
    if [ -f python_client/pyproject.toml ]; then
        extras=$([ "$what" = test ] && echo "[sqlalchemy]" || true)
        echo "install_deps: pip install -e ./python_client$extras (the corgipile client and command)"
        .venv/bin/pip install -q --disable-pip-version-check -e "./python_client$extras"
    fi
    echo "$want" >"$stamp"
fi

# Node.js clients the proxy tests drive (node-postgres, tests/node): from
# the pinned package-lock.json, with the machine's npm; skipped without one
# (those tests then say why they skip).
if [ "$what" = test ] && command -v npm >/dev/null; then
    want=$(sha256sum tests/node/package-lock.json | cut -c1-16)
    stamp=tests/node/node_modules/.deps-stamp
    if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
        echo "install_deps: npm ci in tests/node (node-postgres, for the proxy tests)"
        npm ci --prefix tests/node --no-audit --no-fund --loglevel=error >/dev/null
        echo "$want" >"$stamp"
    fi
fi
