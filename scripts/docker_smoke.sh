#!/usr/bin/env bash
# make docker-smoke: build both images (docker/Dockerfile and
# docker/client.Dockerfile) and run them for real, with Docker or, where
# Docker is absent, podman.  Opt-in: not part of `make test` (it needs a
# container engine, root for podman here, and about 10 minutes).
#
#   scripts/docker_smoke.sh [--keep] [--pin-fallback]
#
# Steps, each reported as ok or FAILED, with a summary at the end:
#   base          the base images: BASE_IMAGE / CLIENT_BASE_IMAGE when given;
#                 else the official ones when a registry answers (built with
#                 --pull); else local stand-ins from Debian's packages
#                 (scripts/docker_local_base.sh; docker/README.md "Without a
#                 registry").  CORGIPILE_SMOKE_BASE=official|local forces one.
#   build         both images, tagged with the extension's version, once each
#   first start   the database on an empty volume: initdb, the init scripts,
#                 the extension in the default database; the image's health
#                 check answers only once the real server listens on TCP
#   training      the client image's default command (scripts/demo.py),
#                 started at once, so that it waits for the initialising
#                 database: loads Fashion-MNIST, trains no_shuffle and
#                 corgipile, prints their held-out accuracy
#   client CLI    `corgipile models`, `corgipile evaluate` and `corgipile sql`
#                 with PREDICT BY from the client image
#   restart       stop (SIGINT, a fast shutdown) and start: a clean shutdown,
#                 and the models are kept, with the same accuracy
#   preload       the same volume in a new container with CORGIPILE_PRELOAD=on,
#                 then off again: shared_preload_libraries follows, the
#                 models still predict
#   pin fallback  (--pin-fallback) the build stage on a base image whose
#                 PG_VERSION is older than its apt sources: it warns and
#                 builds against the current headers
# The containers share one network namespace (the database's, with no
# network of its own: --network none), so nothing is published on the host.
# --keep leaves the containers and the volume for inspection; the images are
# kept either way.
set -euo pipefail
cd "$(dirname "$0")/.."

me=docker-smoke
keep=false
pin_fallback=false
while [ $# -gt 0 ]; do
    case "$1" in
    --keep) keep=true ;;
    --pin-fallback) pin_fallback=true ;;
    -h | --help) sed -n '2,/^set -e/p' "$0" | sed 's/^# \{0,1\}//; /^set -e/d'; exit 0 ;;
    *) echo "$me: unknown argument '$1' (try --help)" >&2; exit 2 ;;
    esac
    shift
done

engine=  # set by engine_init
# shellcheck source=scripts/docker_engine.sh
. scripts/docker_engine.sh
engine_init
if [ "$engine" = podman ]; then
    # the host's network for RUN steps: no bridge or firewall set-up needed
    build_net=(--network host)
else
    build_net=()
fi

version=$(sed -n "s/^default_version *= *'\([^']*\)'.*/\1/p" extension/corgipile.control)
db_image=corgipile-postgres:$version
client_image=corgipile-client:$version
run_id=$$
db=corgipile-smoke-db-$run_id
volume=corgipile-smoke-$run_id
password=smoke-$run_id
logdir=$(mktemp -d /tmp/corgipile-smoke.XXXXXX)
started=$(date +%s)
results=()
failed=0

cleanup() {
    if $keep; then
        echo "$me: kept container $db and volume $volume; logs in $logdir"
        return
    fi
    "$engine" rm -f "$db" >/dev/null 2>&1 || true
    "$engine" volume rm -f "$volume" >/dev/null 2>&1 || true
    rm -rf "$logdir"
}
trap cleanup EXIT

step_start() { step=$1; step_t0=$(date +%s); printf '\n== %s: %s\n' "$me" "$step"; }
step_ok() {
    local took=$(($(date +%s) - step_t0))
    results+=("ok      $step (${took}s)${1:+: $1}")
    printf '== %s: %s ok (%ss)%s\n' "$me" "$step" "$took" "${1:+: $1}"
}
fail() {
    local took=$(($(date +%s) - step_t0))
    results+=("FAILED  $step (${took}s): $*")
    printf '== %s: %s FAILED: %s\n' "$me" "$step" "$*" >&2
    failed=1
    summary
    exit 1
}
summary() {
    printf '\n== %s summary (%s, %s %s, images %s), %ss in all\n' "$me" "$(date -u '+%Y-%m-%d %H:%M UTC')" \
        "$engine" "$("$engine" --version | awk '{print $NF}')" "$version" "$(($(date +%s) - started))"
    printf '  %s\n' "${results[@]}"
    [ "$failed" = 0 ] && printf '  all steps passed\n'
}

# psql inside the database container, as the superuser, on the socket.
sql() { "$engine" exec "$db" psql -X -v ON_ERROR_STOP=1 -U postgres -d corgipile -Atc "$1"; }
# the client image in the database container's network namespace
client() {
    "$engine" run --rm --network "container:$db" \
        -e PGHOST=127.0.0.1 -e PGPORT=5432 -e PGUSER=postgres -e PGPASSWORD="$password" \
        -e PGDATABASE=corgipile "$client_image" "$@"
}
start_db() {  # start_db PRELOAD-VALUE
    # (podman without systemd says on stderr that it cannot schedule the
    # health check; it still runs on request, which is how it is used here)
    "$engine" run -d --name "$db" --network none --shm-size 256m \
        -e POSTGRES_PASSWORD="$password" -e POSTGRES_DB=corgipile -e CORGIPILE_PRELOAD="$1" \
        -v "$volume:/var/lib/postgresql/data" "$db_image" >/dev/null 2>"$logdir/run.err" ||
        { cat "$logdir/run.err" >&2; fail "$engine run $db_image"; }
}
wait_healthy() {  # the image's own health check, run until it passes (120 s at most)
    local _
    for _ in $(seq 1 120); do
        if "$engine" exec "$db" corgipile-healthcheck.sh 2>/dev/null; then
            return 0
        fi
        if [ "$("$engine" inspect -f '{{.State.Running}}' "$db")" != true ]; then
            "$engine" logs "$db" 2>&1 | tail -n 30 >&2
            fail "the database container stopped"
        fi
        sleep 1
    done
    "$engine" logs "$db" 2>&1 | tail -n 30 >&2
    fail "not healthy after 120 s"
}
logs() { "$engine" logs "$db" 2>&1; }

# ---------------------------------------------------------------------------
step_start base
mode=${CORGIPILE_SMOKE_BASE:-auto}
pull=()
if [ -n "${BASE_IMAGE:-}" ]; then
    db_base=$BASE_IMAGE
    client_base=${CLIENT_BASE_IMAGE:?CLIENT_BASE_IMAGE must be set with BASE_IMAGE}
    why="given by BASE_IMAGE and CLIENT_BASE_IMAGE"
else
    if [ "$mode" = auto ]; then
        mode=local
        if timeout 90 "$engine" pull -q docker.io/library/postgres:15-bookworm >/dev/null 2>&1 &&
            timeout 90 "$engine" pull -q docker.io/library/python:3.11-slim-bookworm >/dev/null 2>&1; then
            mode=official
        else
            echo "$me: Docker Hub does not answer (pull of postgres:15-bookworm failed or took over 90 s):" \
                "building local stand-ins for the base images from Debian's packages"
        fi
    fi
    case "$mode" in
    official)
        db_base=docker.io/library/postgres:15-bookworm
        client_base=docker.io/library/python:3.11-slim-bookworm
        pull=(--pull)
        why="the official images, pulled" ;;
    local)
        CONTAINER_ENGINE=$engine scripts/docker_local_base.sh
        db_base=localhost/corgipile-base/postgres:15-bookworm
        client_base=localhost/corgipile-base/python:3.11-slim-bookworm
        why="local stand-ins (scripts/docker_local_base.sh)" ;;
    *) fail "CORGIPILE_SMOKE_BASE must be official or local, not '$mode'" ;;
    esac
fi
step_ok "$db_base and $client_base, $why"

# ---------------------------------------------------------------------------
step_start build
for spec in "$db_image docker/Dockerfile $db_base" "$client_image docker/client.Dockerfile $client_base"; do
    read -r tag file base <<<"$spec"
    t0=$(date +%s)
    if ! "$engine" build "${pull[@]}" "${build_net[@]}" -f "$file" --build-arg BASE_IMAGE="$base" \
        --build-arg CORGIPILE_VERSION="$version" -t "$tag" . >"$logdir/build-${tag%%:*}.log" 2>&1; then
        tail -n 40 "$logdir/build-${tag%%:*}.log" >&2
        fail "building $tag failed"
    fi
    label=$("$engine" image inspect -f '{{index .Config.Labels "org.opencontainers.image.version"}}' "$tag")
    [ "$label" = "$version" ] || fail "$tag is labelled version '$label', not $version"
    echo "$me: built $tag from $file in $(($(date +%s) - t0)) s"
    if grep -q '^WARNING: postgresql-server-dev' "$logdir/build-${tag%%:*}.log"; then
        grep '^WARNING: postgresql-server-dev' "$logdir/build-${tag%%:*}.log" | tail -n 1
    fi
done
step_ok "$db_image, $client_image"

# ---------------------------------------------------------------------------
step_start "first start"
"$engine" volume create "$volume" >/dev/null
start_db off
# The demo starts right away, while the database initialises: it must wait.
client >"$logdir/demo.log" 2>&1 &
demo_pid=$!
wait_healthy
grep -q 'corgipile: CREATE EXTENSION IF NOT EXISTS corgipile in database "corgipile"' <(logs) ||
    fail "the init script did not run"
grep -q 'CORGIPILE_PRELOAD=off, nothing to do' <(logs) || fail "the preload init script did not run"
ext=$(sql "SELECT extversion FROM pg_catalog.pg_extension WHERE extname = 'corgipile'")
[ "$ext" = "$version" ] || fail "extension version '$ext' in database corgipile, expected $version"
if [ "$engine" = podman ]; then
    # the HEALTHCHECK survived the build (podman runs it on request only)
    "$engine" healthcheck run "$db" >/dev/null || fail "podman healthcheck run failed"
fi
step_ok "extension $ext created on first start; healthy on TCP"

# ---------------------------------------------------------------------------
step_start training
if ! wait "$demo_pid"; then
    cat "$logdir/demo.log" >&2
    fail "the demo exited with an error"
fi
cat "$logdir/demo.log"
waited=no
grep -q '^Waiting for the database' "$logdir/demo.log" && waited=yes
acc_no=$(awk '$1 == "no_shuffle" && NF == 2 {print $2}' "$logdir/demo.log")
acc_cp=$(awk '$1 == "corgipile" && NF == 2 {print $2}' "$logdir/demo.log")
[ -n "$acc_cp" ] && [ -n "$acc_no" ] || fail "the demo printed no held-out accuracy"
awk -v a="$acc_cp" 'BEGIN { exit !(a >= 0.95) }' || fail "corgipile's held-out accuracy $acc_cp < 0.95"
step_ok "held-out accuracy no_shuffle $acc_no, corgipile $acc_cp (the demo waited for the database: $waited)"

# ---------------------------------------------------------------------------
step_start "client CLI"
client corgipile models >"$logdir/models.log" 2>&1 || { cat "$logdir/models.log" >&2; fail "corgipile models"; }
cat "$logdir/models.log"
grep -q demo_corgipile "$logdir/models.log" && grep -q demo_no_shuffle "$logdir/models.log" ||
    fail "corgipile models does not list the demo's models"
client corgipile --json evaluate demo_corgipile fashion_test >"$logdir/evaluate.json" 2>&1 ||
    { cat "$logdir/evaluate.json" >&2; fail "corgipile evaluate"; }
cat "$logdir/evaluate.json"
cli_acc=$(sed -n 's/^ *"accuracy": *\([0-9.]*\),*$/\1/p' "$logdir/evaluate.json")
[ -n "$cli_acc" ] || fail "corgipile evaluate printed no accuracy"
cli_acc=$(printf '%.4f' "$cli_acc")
[ "$cli_acc" = "$acc_cp" ] || fail "corgipile evaluate says accuracy $cli_acc, the demo $acc_cp"
predicted=$(client corgipile --json sql \
    "SELECT id, label FROM fashion_test WHERE id < 5 PREDICT BY demo_corgipile" 2>&1) ||
    { echo "$predicted" >&2; fail "corgipile sql ... PREDICT BY"; }
echo "$predicted"
step_ok "models listed; evaluate accuracy $cli_acc; PREDICT BY answered"

# ---------------------------------------------------------------------------
step_start restart
before=$(sql "SELECT pg_catalog.md5(pg_catalog.string_agg(m::text, '|' ORDER BY m.model_name)) FROM corgipile.models AS m")
"$engine" stop --time 60 "$db" >/dev/null
grep -q 'database system is shut down' <(logs) || fail "no clean shutdown in the log"
"$engine" start "$db" >/dev/null
wait_healthy
if logs | grep -q 'database system was interrupted\|not properly shut down'; then
    fail "the server recovered from an unclean shutdown"
fi
after=$(sql "SELECT pg_catalog.md5(pg_catalog.string_agg(m::text, '|' ORDER BY m.model_name)) FROM corgipile.models AS m")
[ "$before" = "$after" ] || fail "the models changed across the restart"
acc_restart=$(sql "SELECT pg_catalog.round(pg_catalog.avg((corgipile.predict('demo_corgipile', t) OPERATOR(pg_catalog.=) t.label)::int), 4) FROM fashion_test AS t")
[ "$acc_restart" = "$acc_cp" ] || fail "accuracy after the restart $acc_restart, before $acc_cp"
step_ok "clean fast shutdown; models identical; accuracy $acc_restart"

# ---------------------------------------------------------------------------
step_start preload
for value in on off; do
    "$engine" stop --time 60 "$db" >/dev/null
    "$engine" rm "$db" >/dev/null
    start_db "$value"
    wait_healthy
    grep -q "corgipile-preload: CORGIPILE_PRELOAD=$value applied" <(logs) ||
        fail "the entrypoint did not apply CORGIPILE_PRELOAD=$value"
    spl=$(sql "SHOW shared_preload_libraries")
    expected=$([ "$value" = on ] && echo corgipile || true)
    [ "$spl" = "$expected" ] || fail "CORGIPILE_PRELOAD=$value: shared_preload_libraries is '$spl'"
    acc_now=$(sql "SELECT pg_catalog.round(pg_catalog.avg((corgipile.predict('demo_corgipile', t) OPERATOR(pg_catalog.=) t.label)::int), 4) FROM fashion_test AS t")
    [ "$acc_now" = "$acc_cp" ] || fail "CORGIPILE_PRELOAD=$value: accuracy $acc_now"
    echo "$me: CORGIPILE_PRELOAD=$value: shared_preload_libraries = '$spl', accuracy $acc_now"
done
step_ok "on: corgipile preloaded; off: nothing; the models kept"

# ---------------------------------------------------------------------------
if $pin_fallback; then
    step_start "pin fallback"
    stale=corgipile-smoke-stale-base:$run_id
    printf 'FROM %s\nENV PG_VERSION=15.0-0+stale1\n' "$db_base" |
        "$engine" build "${build_net[@]}" -t "$stale" -f - . >"$logdir/stale-base.log" 2>&1 ||
        fail "building the stale base image"
    if ! "$engine" build "${build_net[@]}" --target build -f docker/Dockerfile --build-arg BASE_IMAGE="$stale" \
        -t "corgipile-smoke-stale-build:$run_id" . >"$logdir/build-stale.log" 2>&1; then
        tail -n 30 "$logdir/build-stale.log" >&2
        "$engine" rmi "$stale" >/dev/null 2>&1 || true
        fail "the build stage failed on a stale base image"
    fi
    warning=$(grep -m1 '^WARNING: postgresql-server-dev-15 15.0-0+stale1' "$logdir/build-stale.log" || true)
    "$engine" rmi "corgipile-smoke-stale-build:$run_id" "$stale" >/dev/null 2>&1 || true
    [ -n "$warning" ] || fail "no warning about the missing pinned headers"
    echo "$warning"
    step_ok "built with the current headers, and warned"
fi

summary
