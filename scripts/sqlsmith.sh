#!/usr/bin/env bash
# Let Debian's sqlsmith generate random queries against a throwaway cluster
# with corgipile, tables of every layout, trained models, and views and
# wrappers that route its queries through our functions
# (scripts/sqlsmith_setup.sql).  It runs as an unprivileged role with a
# statement timeout.  Fails if the server went through crash recovery (a
# backend crashed) or the server log shows a backend killed by a signal.
#
#   scripts/sqlsmith.sh [--seed N] [--max-queries N] [--keep]
#
# Environment: PG_CONFIG (the server to use; its tree must hold the
# installed extension: `make install`), SQLSMITH_PORT (default: a free
# port), SQLSMITH_TIMEOUT (statement_timeout, default 5s).
# Prints the query count, the errors by SQLSTATE and message, the share of
# queries that called corgipile, and the calls per corgipile function.
set -euo pipefail
cd "$(dirname "$0")/.."

seed=1
max_queries=20000
keep=0
while [ $# -gt 0 ]; do
    case "$1" in
    --seed) seed=$2; shift 2 ;;
    --seed=*) seed=${1#*=}; shift ;;
    --max-queries) max_queries=$2; shift 2 ;;
    --max-queries=*) max_queries=${1#*=}; shift ;;
    --keep) keep=1; shift ;;
    *) echo "usage: $0 [--seed N] [--max-queries N] [--keep]" >&2; exit 2 ;;
    esac
done

export PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
BINDIR=$("$PG_CONFIG" --bindir)
if ! command -v sqlsmith >/dev/null; then
    [ "$(id -u)" = 0 ] || { echo "sqlsmith.sh: install sqlsmith (apt-get install sqlsmith)" >&2; exit 1; }
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq sqlsmith >/dev/null
fi
[ -e "$("$PG_CONFIG" --sharedir)/extension/corgipile.control" ] || {
    echo "sqlsmith.sh: corgipile is not installed for $PG_CONFIG: run make install" >&2
    exit 1
}

port=${SQLSMITH_PORT:-$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')}
work=$(mktemp -d /tmp/corgipile-sqlsmith.XXXXXX)
chmod 755 "$work"
cleanup() {
    scripts/pgcluster.sh stop "$work" immediate || true
    if [ "$keep" = 1 ]; then echo "kept $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT
scripts/pgcluster.sh start "$work" "$port"
eval "$(scripts/pgcluster.sh env "$work" "$port")"
psql=("$BINDIR/psql" -X -q -v ON_ERROR_STOP=1)

fuzzer=sqlsmith_fuzzer
"${psql[@]}" -d postgres <<SQL
ALTER SYSTEM SET log_line_prefix = '%m [%p] %e ';
ALTER SYSTEM SET track_functions = 'all';
ALTER SYSTEM SET log_min_messages = 'warning';
SELECT pg_catalog.pg_reload_conf();
CREATE ROLE $fuzzer LOGIN;
ALTER ROLE $fuzzer SET statement_timeout = '${SQLSMITH_TIMEOUT:-5s}';
CREATE DATABASE smith OWNER $fuzzer;
SQL
"${psql[@]}" -d smith -v fuzzer="$fuzzer" -f scripts/sqlsmith_setup.sql >/dev/null
# a crash leaves pg_postmaster_start_time() as it was (the postmaster
# survives and runs crash recovery), but recovery discards the statistics
# and stamps a new stats_reset
generation="SELECT pg_catalog.pg_postmaster_start_time() || ' / ' || a.stats_reset FROM pg_catalog.pg_stat_archiver AS a"
started=$("${psql[@]}" -d postgres -Atc "$generation")
log_start=$(stat -c %s "$work/server.log")

echo "sqlsmith: seed $seed, up to $max_queries queries, as $fuzzer on port $port"
t0=$(date +%s)
# sqlsmith stops on its own after --max-queries; a crash shows below
sqlsmith --target="host=$PGHOST port=$PGPORT dbname=smith user=$fuzzer" \
    --seed="$seed" --max-queries="$max_queries" --exclude-catalog --verbose \
    --dump-all-queries >"$work/queries.sql" 2>"$work/sqlsmith.err" || true
t1=$(date +%s)

after=$("${psql[@]}" -d postgres -Atc "$generation" 2>/dev/null || echo "server down")
tail -c +"$((log_start + 1))" "$work/server.log" >"$work/run.log"
signals=$(grep -cE 'terminated by signal|was terminated by exception|PANIC:' "$work/run.log" || true)

# the report: head(1) may close the pipes early
set +o pipefail
echo "== sqlsmith summary ($((t1 - t0)) s): its last report, errors by message"
awk '/^queries:/ { block = "" } { block = block $0 "\n" } END { printf "%s", block }' "$work/sqlsmith.err" |
    sed '/^impedance report/,$d' | head -40
echo "== errors by SQLSTATE (server log)"
grep -oE ' [0-9A-Z]{5} (ERROR|FATAL|PANIC): ' "$work/run.log" | sort | uniq -c | sort -rn | head -20
echo "== XX000 (internal error) messages, and whether the statement touched corgipile"
python3 - "$work/run.log" <<'PY'
import collections, re, sys
log = open(sys.argv[1], encoding="utf-8", errors="replace").read()
entries = re.split(r"\n(?=\d{4}-\d\d-\d\d )", log)
ours = re.compile(r"corgipile|public\.(v_\w+|cp_\w+|models_view)\b")
seen = collections.Counter()
for i, e in enumerate(entries):
    m = re.search(r" XX000 (?:ERROR|FATAL|PANIC):\s+(.*)", e)
    if m:
        stmt = entries[i + 1] if i + 1 < len(entries) and "STATEMENT:" in entries[i + 1] else ""
        seen[(m.group(1)[:80], "corgipile" if ours.search(stmt) else "no corgipile object")] += 1
for (msg, where), n in seen.most_common(20):
    print(f"{n:7d}  {msg}  [{where}]")
PY
echo "== queries that call corgipile"
python3 - "$work/queries.sql" <<'PY'
import re, sys
text = open(sys.argv[1], encoding="utf-8", errors="replace").read()
queries = [q for q in re.split(r";\n", text) if q.strip()]
ours = re.compile(r"corgipile\.(train|predict|predict_class|predict_proba|evaluate|shuffle_table|shuffled_scan|drop_model|\w+_model|block_rows|sizing|may_see_model_data)\b"
                  r"|public\.(v_predict\w*|v_evaluate|v_shuffled|v_train|v_block_rows|cp_\w+)\b")
hits = sum(1 for q in queries if ours.search(q))
print(f"{hits} of {len(queries)} generated queries ({100.0 * hits / max(len(queries), 1):.1f}%) "
      "call a corgipile function directly or through a view or wrapper")
PY
"${psql[@]}" -d smith -Atc "SELECT p.proname || '(' || pg_catalog.pg_get_function_identity_arguments(p.oid) || ') ' || s.calls
    FROM pg_catalog.pg_stat_user_functions AS s JOIN pg_catalog.pg_proc AS p ON p.oid = s.funcid
   WHERE s.schemaname = 'corgipile' ORDER BY s.calls DESC" | sed 's/^/calls: /'

echo "== crashes"
echo "postmaster start / stats reset: before $started, after $after; signal/PANIC lines in the log: $signals"
if [ "$after" != "$started" ] || [ "$signals" != 0 ]; then
    grep -E -B2 -A2 'terminated by signal|was terminated by exception|PANIC:' "$work/run.log" | head -40
    keep=1
    echo "sqlsmith.sh: the server crashed; queries in $work/queries.sql, log in $work/server.log" >&2
    exit 1
fi
echo "no crash"
