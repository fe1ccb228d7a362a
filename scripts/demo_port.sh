#!/usr/bin/env bash
# Print the port of this checkout's demo cluster (.demo):
#  - the port it runs on, if it is running;
#  - else CORGIPILE_DEMO_PORT, if set;
#  - else a port derived from the checkout's path (55400-55899), so that
#    two checkouts do not collide, moved up past ports that are taken.
set -euo pipefail
cd "$(dirname "$0")/.."

pid=.demo/data/postmaster.pid
if [ -f "$pid" ] && [ -n "$(sed -n 4p "$pid" 2>/dev/null)" ] \
    && kill -0 "$(head -n 1 "$pid")" 2>/dev/null; then
    sed -n 4p "$pid"
    exit 0
fi
if [ -n "${CORGIPILE_DEMO_PORT:-}" ]; then
    echo "$CORGIPILE_DEMO_PORT"
    exit 0
fi
port=$((55400 + $(printf %s "$(pwd -P)" | cksum | cut -d' ' -f1) % 500))
for _ in $(seq 1 50); do
    # something answers on this port: another cluster, maybe another checkout's
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
        echo "$port"
        exit 0
    fi
    port=$((port + 1))
done
echo "demo_port.sh: no free port near $port; set CORGIPILE_DEMO_PORT" >&2
exit 1
