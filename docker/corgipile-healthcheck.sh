#!/bin/sh
# Container health check (the image's HEALTHCHECK and the compose file's):
# healthy when the server accepts connections on TCP at 127.0.0.1.
#
# Deliberately not over the Unix socket: on the first start the official
# entrypoint runs initdb, then a temporary server that listens on the socket
# only (listen_addresses = '') while it runs /docker-entrypoint-initdb.d, then
# stops it and starts the real server.  A socket check would call the
# container healthy during that window, and a client started on
# `service_healthy` would connect, find no extension yet, or lose its
# connection when the temporary server stops.
#
# POSTGRES_USER and POSTGRES_DB default the way the official entrypoint
# defaults them; PGPORT is honoured because the entrypoint honours it too.
exec pg_isready -q -h 127.0.0.1 -p "${PGPORT:-5432}" \
    -U "${POSTGRES_USER:-postgres}" -d "${POSTGRES_DB:-${POSTGRES_USER:-postgres}}"
