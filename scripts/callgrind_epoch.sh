#!/usr/bin/env bash
# Instructions per row, counted by callgrind (repeatable on a machine shared
# with other work, unlike seconds): of a plain scan, of an epoch of each
# group strategy, of predict() on every row, and of the SGD step alone
# (scripts/callgrind_sgd.c).  Figures go into docs/engine-benchmark.md.
#
#   PG_CONFIG=... scripts/callgrind_epoch.sh [ROWS] [DIMS]
#
# It makes a throwaway cluster under /tmp, loads the engine benchmark's
# table (scripts/bench_epochs.py's shape: label-clustered, DIMS float8
# features), stops it, and runs each query in a single-user backend
# (postgres --single) under callgrind, counting only the executor
# (--toggle-collect=standard_ExecutorRun).  An epoch's count is the
# difference between max_epoch_num => 3 and => 2, so the first epoch's
# extra work and the model row's insert cancel out.  "First epoch of a
# longer training" is the => 2 run less that later epoch: it has a block
# cache, which the first pass may fill (preprocess_pass.c); a training of
# one epoch (the => 1 run alone) keeps no cache.  The installed extension of
# $PG_CONFIG is measured; valgrind runs each query about 50 times slower.
set -euo pipefail
cd "$(dirname "$0")/.."

PG_CONFIG=${PG_CONFIG:-pg_config}
BINDIR=$("$PG_CONFIG" --bindir)
ROWS=${1:-400000}
DIMS=${2:-28}
T=bench_${ROWS}_${DIMS}
DIR=$(mktemp -d /tmp/cg-epoch.XXXXXX)
chmod 755 "$DIR"
PORT=${CG_PORT:-5739}

as_pg() {
    if [ "$(id -u)" = 0 ]; then (cd / && runuser -u postgres -- "$@"); else "$@"; fi
}
if [ "$(id -u)" = 0 ]; then chown postgres "$DIR"; fi

as_pg "$BINDIR/initdb" -D "$DIR/data" -A trust -U postgres >/dev/null
as_pg "$BINDIR/pg_ctl" -D "$DIR/data" -o "-p $PORT -k $DIR -c listen_addresses=''" -w -l "$DIR/log" start >/dev/null
PSQL=("$BINDIR/psql" -h "$DIR" -p "$PORT" -U postgres -d postgres -qAt -v ON_ERROR_STOP=1)
"${PSQL[@]}" >/dev/null <<SQL
CREATE EXTENSION corgipile;
SELECT setseed(0.5);
CREATE TABLE $T AS SELECT i AS id,
  CASE WHEN i <= $ROWS / 2 THEN 1 ELSE -1 END AS label,
  (SELECT array_agg(random() * 2 - 1 + CASE WHEN i <= $ROWS / 2 THEN 0.3 ELSE -0.3 END + 0 * j)
     FROM generate_series(1, $DIMS) AS j)::float8[] AS features
  FROM generate_series(1, $ROWS) AS i;
VACUUM ANALYZE $T;
SET corgipile.progress = off;
SELECT count(*) FROM corgipile.train('$T', 'svm', model_name => 'cg_model', max_epoch_num => 1, seed => 1);
SELECT count(*) FROM corgipile.train('$T', 'svm', model_name => 'cg_raw', standardize => 'off', max_epoch_num => 1, seed => 1);
SQL
as_pg "$BINDIR/pg_ctl" -D "$DIR/data" -w stop >/dev/null

# Ir of the executor for the statements in $1 (one per line)
count() {
    local out="$DIR/cg.$RANDOM"
    printf '%s\n' "SET corgipile.progress = off;" "$1" |
        as_pg valgrind --tool=callgrind --callgrind-out-file="$out" \
            --toggle-collect=standard_ExecutorRun \
            "$BINDIR/postgres" --single -D "$DIR/data" postgres >/dev/null 2>"$out.log"
    sed -n 's/.*Collected : \([0-9]*\).*/\1/p' "$out.log"
}
per_row() { echo "scale=0; $1 / $ROWS" | bc; }

echo "$(python3 scripts/provenance.py); $ROWS rows x $DIMS float8 features, instructions a row (Ir of the executor / rows), ratio to the scan:"
echo
echo "| what | instructions a row | ratio to the plain scan |"
echo "|---|---:|---:|"
scan=$(count "SELECT sum(features[1] + features[$DIMS]) FROM $T;")
echo "| plain scan \`sum(features[1] + features[$DIMS])\` | $(per_row "$scan") | 1.00 |"
for shuffle in no_shuffle block_only corgipile; do
    train() {
        echo "SELECT count(*) FROM corgipile.train('$T', 'svm', model_name => 'cg_${shuffle}_$1', shuffle => '$shuffle', double_buffer => false, seed => 1, max_epoch_num => $1);"
    }
    one=$(count "$(train 1)")
    two=$(count "$(train 2)")
    three=$(count "$(train 3)")
    epoch=$(( three - two ))
    first=$(( two - epoch ))
    echo "| epoch, \`$shuffle\` (first epoch of a longer training; a training of one epoch) | $(per_row "$epoch") ($(per_row "$first"); $(per_row "$one")) | $(echo "scale=2; $epoch / $scan" | bc) ($(echo "scale=2; $first / $scan" | bc); $(echo "scale=2; $one / $scan" | bc)) |"
done
# the loop's last strategy is corgipile: $epoch is its later epoch.  The
# standardizing statistics from a sample of blocks (first_pass.c), as a table
# above corgipile.stats_sample_size (64MB) learns them: forced here with 1MB.
sampled=$(count "SET corgipile.stats_sample_size = '1MB';
SELECT count(*) FROM corgipile.train('$T', 'svm', model_name => 'cg_sampled', shuffle => 'corgipile', double_buffer => false, seed => 1, max_epoch_num => 2);")
sampled=$(( sampled - epoch ))
echo "| first epoch of a longer training, \`corgipile\`, statistics from a sample (stats_sample_size 1MB) | $(per_row "$sampled") | $(echo "scale=2; $sampled / $scan" | bc) |"
sampled1=$(count "SET corgipile.stats_sample_size = '1MB';
SELECT count(*) FROM corgipile.train('$T', 'svm', model_name => 'cg_sampled1', shuffle => 'corgipile', double_buffer => false, seed => 1, max_epoch_num => 1);")
echo "| a training of one epoch, \`corgipile\`, statistics from a sample (stats_sample_size 1MB) | $(per_row "$sampled1") | $(echo "scale=2; $sampled1 / $scan" | bc) |"
count_q=$(count "SELECT count(*) FROM $T;")
echo "| \`count(*)\` | $(per_row "$count_q") | $(echo "scale=2; $count_q / $scan" | bc) |"
off=$(count "SELECT count(*) FROM corgipile.train('$T', 'svm', model_name => 'cg_off', shuffle => 'corgipile', standardize => 'off', double_buffer => false, seed => 1, max_epoch_num => 1);")
echo "| first epoch, \`corgipile\`, standardize => 'off' (no first pass) | $(per_row "$off") | $(echo "scale=2; $off / $scan" | bc) |"
pred=$(count "SELECT count(corgipile.predict('cg_model', features)) FROM $T;")
echo "| \`predict()\` on every row, standardized model | $(per_row "$pred") | $(echo "scale=2; $pred / $scan" | bc) |"
pred=$(count "SELECT count(corgipile.predict('cg_raw', features)) FROM $T;")
echo "| \`predict()\` on every row, raw-feature model | $(per_row "$pred") | $(echo "scale=2; $pred / $scan" | bc) |"

# the SGD step alone, in storage order and shuffled (gathered)
PGI=$("$PG_CONFIG" --includedir-server)
PGL=$("$PG_CONFIG" --pkglibdir)
cc -O2 -I extension -I "$PGI" -o "$DIR/callgrind_sgd" scripts/callgrind_sgd.c \
    extension/core/linear_model.c extension/core/shuffle.c extension/core/grab.c \
    -L "$PGL" -lpgcommon -lpgport -lm -pthread
for order in ordered shuffled; do
    ir=$(valgrind --tool=callgrind --callgrind-out-file="$DIR/sgd.$order" \
        --toggle-collect=cp_model_train "$DIR/callgrind_sgd" "$order" 2>&1 >/dev/null |
        sed -n 's/.*Collected : \([0-9]*\).*/\1/p')
    echo "| SGD step alone (cp_model_train, svm, 28 features), $order | $(echo "$ir / 100000" | bc) | - |"
done
echo "callgrind outputs kept in $DIR (callgrind_annotate FILE)" >&2
