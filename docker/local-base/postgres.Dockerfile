# A local stand-in for the official postgres:15-bookworm image, for machines
# without a registry (scripts/docker_local_base.sh builds it; docker/README.md
# "Without a registry").  Debian 12's own PostgreSQL 15 instead of PGDG's,
# set up the way docker/Dockerfile and its scripts expect the official image:
#
# * ENV PG_MAJOR and PG_VERSION, the version of the installed postgresql-15,
#   so that `postgresql-server-dev-${PG_MAJOR}=${PG_VERSION}` installs the
#   matching headers from the image's apt sources;
# * the server's programs on PATH (/usr/lib/postgresql/15/bin), the Debian
#   layout under /usr/lib/postgresql/15 and /usr/share/postgresql/15;
# * user postgres (uid 999), PGDATA=/var/lib/postgresql/data as a volume,
#   /var/run/postgresql for the socket, listen_addresses = '*' in the sample
#   configuration that initdb copies;
# * docker-entrypoint.sh on PATH, /docker-entrypoint-initdb.d, gosu, the
#   en_US.UTF-8 locale, STOPSIGNAL SIGINT (a fast shutdown), CMD postgres.
ARG DEBIAN_IMAGE=localhost/corgipile-base/debian:bookworm
FROM ${DEBIAN_IMAGE}

SHELL ["/bin/bash", "-o", "pipefail", "-c"]

RUN groupadd --system --gid 999 postgres \
    && useradd --system --gid postgres --uid 999 --home-dir /var/lib/postgresql \
        --shell /bin/bash postgres \
    && install -d -o postgres -g postgres -m 1777 /var/lib/postgresql

# Debian's own packages: gosu to step down from root, the locale, and what
# the official image adds for scripts (nss_wrapper for --user, xz, zstd).
# The versions are whatever the sources of the base image hold: this image is
# rebuilt from scratch by scripts/docker_local_base.sh, never pulled.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends \
        gosu less libnss-wrapper locales xz-utils zstd \
    && echo 'en_US.UTF-8 UTF-8' >>/etc/locale.gen \
    && locale-gen \
    && rm -rf /var/lib/apt/lists/*
ENV LANG=en_US.utf8

RUN mkdir /docker-entrypoint-initdb.d

# PG_VERSION is what `apt-cache policy postgresql-15` offers in the base
# image (the script asks before building): the official image pins its
# server the same way and publishes the version in the same variable.
ARG PG_VERSION
ENV PG_MAJOR=15 \
    PG_VERSION=${PG_VERSION}
ENV PATH=$PATH:/usr/lib/postgresql/15/bin

# postgresql-common first, told not to create a cluster of its own.
# hadolint ignore=DL3008
RUN test -n "${PG_VERSION}" \
    && apt-get update \
    && apt-get install -y --no-install-recommends postgresql-common \
    && sed -ri 's/^#?\s*create_main_cluster\b.*$/create_main_cluster = false/' \
        /etc/postgresql-common/createcluster.conf \
    && apt-get install -y --no-install-recommends "postgresql-${PG_MAJOR}=${PG_VERSION}" \
    && rm -rf /var/lib/apt/lists/* \
    && sed -ri "s/^#?listen_addresses\s*=\s*\S+/listen_addresses = '*'/" \
        "/usr/share/postgresql/${PG_MAJOR}/postgresql.conf.sample" \
    && grep -q "^listen_addresses = '\*'" "/usr/share/postgresql/${PG_MAJOR}/postgresql.conf.sample" \
    && postgres --version

RUN install -d -o postgres -g postgres -m 3777 /var/run/postgresql
ENV PGDATA=/var/lib/postgresql/data
RUN install -d -o postgres -g postgres -m 1777 "$PGDATA"
VOLUME /var/lib/postgresql/data

COPY --chmod=0755 docker-entrypoint.sh /usr/local/bin/
ENTRYPOINT ["docker-entrypoint.sh"]

# A fast shutdown: sessions are ended and the server stops cleanly, given the
# time (compose's stop_grace_period, `docker stop --time`).
STOPSIGNAL SIGINT
EXPOSE 5432
CMD ["postgres"]
