#!/usr/bin/env bash
# First start only (the official entrypoint runs /docker-entrypoint-initdb.d
# after initdb, with a temporary server up): apply CORGIPILE_PRELOAD to the
# new data directory, so that the real server started next already has it.
# Later starts are handled by corgipile-entrypoint.sh.
#
# Written to work whether the entrypoint executes it (the image installs it
# executable) or sources it (a copy without the executable bit): no `set`,
# no `exit`, no `exec`, and the last command's status is the script's.
# corgipile-preload.sh is in /usr/local/bin, on the image's PATH.
corgipile-preload.sh "$PGDATA"
