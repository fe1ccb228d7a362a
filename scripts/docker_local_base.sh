#!/usr/bin/env bash
# Build local stand-ins for the two base images that docker/Dockerfile and
# docker/client.Dockerfile start from (postgres:15-bookworm and
# python:3.11-slim-bookworm), for a machine that cannot reach Docker Hub but
# can reach Debian's apt repositories.  docker/README.md, "Without a
# registry", says what they are and how they differ from the official ones.
#
#   scripts/docker_local_base.sh [--engine podman|docker] [--rebuild]
#
# Steps (each skipped when its result exists, unless --rebuild):
#   1. debootstrap a minimal Debian 12 (bookworm) into $CORGIPILE_BASE_DIR
#      (default /var/tmp/corgipile-base/rootfs), with the bookworm,
#      bookworm-updates and bookworm-security sources;
#   2. import it as localhost/corgipile-base/debian:bookworm;
#   3. build docker/local-base/postgres.Dockerfile as
#      localhost/corgipile-base/postgres:15-bookworm, with PG_VERSION set to
#      the postgresql-15 version that the image's apt sources offer;
#   4. build docker/local-base/python.Dockerfile as
#      localhost/corgipile-base/python:3.11-slim-bookworm, with this
#      machine's CA bundle (CORGIPILE_CA_BUNDLE, default
#      /etc/ssl/certs/ca-certificates.crt) for pip.
# Then build the project's images with
#   --build-arg BASE_IMAGE=localhost/corgipile-base/postgres:15-bookworm
#   --build-arg BASE_IMAGE=localhost/corgipile-base/python:3.11-slim-bookworm
# (scripts/docker_smoke.sh does).
#
# Needs root (debootstrap, and the image import), and podman or docker;
# installs debootstrap with apt-get when it is missing.  Mirrors: DEBIAN_MIRROR and DEBIAN_SECURITY_MIRROR; by default the
# first Debian URI in this machine's apt sources, else debootstrap's default.
set -euo pipefail
cd "$(dirname "$0")/.."

me=docker_local_base
engine=""
rebuild=false
while [ $# -gt 0 ]; do
    case "$1" in
    --engine) engine=$2; shift 2 ;;
    --rebuild) rebuild=true; shift ;;
    -h | --help) sed -n '2,/^set -e/p' "$0" | sed 's/^# \{0,1\}//; /^set -e/d'; exit 0 ;;
    *) echo "$me: unknown argument '$1' (try --help)" >&2; exit 2 ;;
    esac
done
# shellcheck source=scripts/docker_engine.sh
. scripts/docker_engine.sh
engine_init "$engine"

prefix=${CORGIPILE_BASE_PREFIX:-localhost/corgipile-base}
debian_image=$prefix/debian:bookworm
postgres_image=$prefix/postgres:15-bookworm
python_image=$prefix/python:3.11-slim-bookworm
rootfs=${CORGIPILE_BASE_DIR:-/var/tmp/corgipile-base/rootfs}

have_image() { "$engine" image inspect "$1" >/dev/null 2>&1; }
step() { printf '\n== %s: %s\n' "$me" "$*"; }

# The first deb822 or one-line Debian URI of this machine's apt sources.
host_mirror() {
    local files=(/etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources)
    local f
    for f in "${files[@]}"; do
        [ -r "$f" ] || continue
        awk '
            /^[[:space:]]*#/ { next }
            /^URIs:/ { for (i = 2; i <= NF; i++) if ($i ~ /\/debian\/?$/) { print $i; exit } }
            /^deb[[:space:]]/ { for (i = 2; i <= NF; i++) if ($i ~ /\/debian\/?$/) { print $i; exit } }
        ' "$f"
    done | head -n 1
}

if $rebuild || ! have_image "$debian_image"; then
    if [ "$(id -u)" != 0 ]; then
        echo "$me: debootstrap needs root; run this script as root (or sudo)" >&2
        exit 1
    fi
    if ! command -v debootstrap >/dev/null; then
        if command -v apt-get >/dev/null; then
            step "installing debootstrap from Debian's packages"
            DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null ||
                { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null; }
        else
            echo "$me: debootstrap is missing: install it (it is a Debian package, and packaged elsewhere too)" >&2
            exit 1
        fi
    fi
    mirror=${DEBIAN_MIRROR:-$(host_mirror)}
    mirror=${mirror%/}
    if [ -n "$mirror" ]; then
        security=${DEBIAN_SECURITY_MIRROR:-${mirror}-security}
    else
        security=${DEBIAN_SECURITY_MIRROR:-}
    fi
    step "debootstrap bookworm into $rootfs (mirror: ${mirror:-debootstrap default})"
    rm -rf "$rootfs"
    mkdir -p "$rootfs"
    # shellcheck disable=SC2086  # an empty $mirror is left out on purpose
    debootstrap --variant=minbase --include=ca-certificates bookworm "$rootfs" $mirror
    if [ -z "$mirror" ]; then
        mirror=$(awk '/^deb /{print $2; exit}' "$rootfs/etc/apt/sources.list")
        security=${security:-${mirror%/}-security}
    fi
    {
        echo "deb $mirror bookworm main"
        echo "deb $mirror bookworm-updates main"
        echo "deb $security bookworm-security main"
    } >"$rootfs/etc/apt/sources.list"
    # As in Debian's container images: no documentation, no apt caches.
    cat >"$rootfs/etc/dpkg/dpkg.cfg.d/corgipile-base" <<'CFG'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
CFG
    printf 'APT::Install-Recommends "false";\n' >"$rootfs/etc/apt/apt.conf.d/99corgipile-base"
    rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
    step "import $rootfs as $debian_image"
    tar --numeric-owner -C "$rootfs" -c . | "$engine" import \
        --change 'CMD ["bash"]' --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        - "$debian_image"
    rebuild=true
fi

if $rebuild || ! have_image "$postgres_image"; then
    step "asking the base image's apt sources for postgresql-15's version"
    pg_version=$("$engine" run --rm --network host "$debian_image" bash -c \
        'apt-get update -qq >/dev/null && apt-cache policy postgresql-15' |
        awk '/Candidate:/ {print $2}')
    if [ -z "$pg_version" ] || [ "$pg_version" = "(none)" ]; then
        echo "$me: the Debian sources in $debian_image offer no postgresql-15" >&2
        exit 1
    fi
    step "build $postgres_image (postgresql-15 $pg_version)"
    "$engine" build --network host -f docker/local-base/postgres.Dockerfile \
        --build-arg DEBIAN_IMAGE="$debian_image" --build-arg PG_VERSION="$pg_version" \
        -t "$postgres_image" docker/local-base
fi

if $rebuild || ! have_image "$python_image"; then
    step "build $python_image"
    # The build context: the Dockerfile's directory and this machine's CA
    # bundle (see python.Dockerfile).
    context=$(mktemp -d)
    cp docker/local-base/python.Dockerfile "$context/"
    bundle=${CORGIPILE_CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}
    if [ -s "$bundle" ]; then
        cp "$bundle" "$context/ca-certificates.crt"
    else
        "$engine" run --rm "$debian_image" cat /etc/ssl/certs/ca-certificates.crt >"$context/ca-certificates.crt"
    fi
    "$engine" build --network host -f "$context/python.Dockerfile" \
        --build-arg DEBIAN_IMAGE="$debian_image" -t "$python_image" "$context" ||
        { rm -rf "$context"; exit 1; }
    rm -rf "$context"
fi

step "ready: $postgres_image and $python_image"
