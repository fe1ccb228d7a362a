# shellcheck shell=bash
# Sourced by scripts/docker_local_base.sh and scripts/docker_smoke.sh: choose
# the container engine and make podman usable on a machine like ours.
#
#   engine_init [podman|docker]   sets $engine (and exports CONTAINERS_CONF
#                                 for podman when this machine needs it)
#
# Docker when its daemon answers, else podman; with neither, podman is
# installed from Debian's packages when we are root on Debian, otherwise we
# stop and say what to install.  CONTAINER_ENGINE=podman|docker forces one.
#
# podman on a VM or container without CAP_SYS_RESOURCE cannot raise the
# open-files and process limits to the values it asks for by default
# ("setrlimit RLIMIT_NOFILE: Operation not permitted"), and crun refuses a
# hybrid cgroup v1/v2 hierarchy ("cgroups in hybrid mode not supported").
# For those cases a containers.conf of our own (not the system's: nothing in
# /etc is changed) sets the limits to what this shell has and picks runc;
# it is exported as CONTAINERS_CONF unless the caller set one.

engine_say() { printf '%s: %s\n' "${me:-docker}" "$*" >&2; }

engine_install_podman() {
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        engine_say "installing podman and runc from Debian's packages"
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq podman runc >/dev/null ||
            { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq podman runc >/dev/null; }
    else
        engine_say "no container engine: install Docker, or podman (Debian: apt-get install podman runc)"
        return 1
    fi
}

engine_podman_conf() {
    [ -n "${CONTAINERS_CONF:-}" ] && return 0
    local conf nofile nproc runtime=""
    conf=${CORGIPILE_CONTAINERS_CONF:-/var/tmp/corgipile-containers.conf}
    nofile=$(ulimit -Hn)
    [ "$nofile" = unlimited ] && nofile=1048576
    nproc=$(ulimit -Hu)
    # runc's init may run under a lower process limit than this shell
    # (conmon's); 32768 is plenty for a database and its workers.
    if [ "$nproc" = unlimited ] || [ "$nproc" -gt 32768 ]; then nproc=32768; fi
    if grep -q ' /sys/fs/cgroup/unified cgroup2 ' /proc/mounts 2>/dev/null ||
        { [ "$(stat -fc %T /sys/fs/cgroup 2>/dev/null)" = tmpfs ] && grep -q cgroup2 /proc/mounts; }; then
        if command -v runc >/dev/null || { [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null &&
            DEBIAN_FRONTEND=noninteractive apt-get install -y -qq runc >/dev/null; }; then
            runtime='runtime = "runc"'
        fi
    fi
    {
        echo "# Written by scripts/docker_engine.sh (see there); CONTAINERS_CONF points here."
        echo "[containers]"
        echo "default_ulimits = [\"nofile=$nofile:$nofile\", \"nproc=$nproc:$nproc\"]"
        if [ -n "$runtime" ]; then
            echo "[engine]"
            echo "$runtime"
        fi
    } >"$conf"
    export CONTAINERS_CONF=$conf
}

engine_init() {
    engine=${1:-${CONTAINER_ENGINE:-}}
    if [ -z "$engine" ]; then
        if command -v docker >/dev/null && docker info >/dev/null 2>&1; then
            engine=docker
        elif command -v podman >/dev/null; then
            engine=podman
        else
            engine_install_podman || return 1
            engine=podman
        fi
    fi
    case "$engine" in
    podman) command -v podman >/dev/null || engine_install_podman || return 1
        engine_podman_conf
        # HEALTHCHECK, SHELL and STOPSIGNAL are kept only in Docker's image
        # format (podman's default is OCI's, which drops them).
        export BUILDAH_FORMAT=docker ;;
    docker) command -v docker >/dev/null || { engine_say "docker is not installed"; return 1; } ;;
    *) engine_say "CONTAINER_ENGINE must be podman or docker, not '$engine'"; return 1 ;;
    esac
    engine_say "container engine: $engine $("$engine" --version 2>/dev/null | head -n 1)"
}
