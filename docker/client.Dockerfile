# syntax=docker/dockerfile:1
#
# The corgipile Python client and the Fashion-MNIST demo, to run against the
# database image (docker/Dockerfile).  Build from the repository root:
#
#   docker build --pull -f docker/client.Dockerfile -t corgipile-client:0.4.0 .
#
# The default command runs scripts/demo.py with the connection taken from
# libpq's PG* environment variables (PGHOST, PGUSER, PGPASSWORD, ...), which
# docker/docker-compose.yml sets to the db service; the demo waits for a
# database that is still starting.  `make docker-smoke` builds and runs it;
# the test suite lints it (docker/README.md).

# The official image, or a local stand-in (scripts/docker_local_base.sh).
ARG BASE_IMAGE=python:3.11-slim-bookworm
FROM ${BASE_IMAGE}

# One version for the extension, the client and the images.
ARG CORGIPILE_VERSION=0.4.0
ARG BASE_IMAGE
LABEL org.opencontainers.image.title="corgipile-client" \
      org.opencontainers.image.description="corgipile Python client and the Fashion-MNIST demo" \
      org.opencontainers.image.version="${CORGIPILE_VERSION}" \
      org.opencontainers.image.base.name="${BASE_IMAGE}"

# Fashion-MNIST as Debian packages it, where the demo reads it
# (/usr/share/datasets/fashion-mnist), the same package the project's
# scripts/install_deps.sh installs on a development machine.
RUN apt-get update \
    && apt-get install -y --no-install-recommends \
        dataset-fashion-mnist=0.0~git20200523.55506a9-1 \
    && rm -rf /var/lib/apt/lists/*

ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1

# The client package with its dependencies and what the demo imports,
# pinned to the versions requirements-dev.txt pins for the test suite (a
# test checks that every dependency in python_client/pyproject.toml is
# pinned here, at that version).  psycopg's binary extra brings libpq.
COPY python_client/ /opt/corgipile/python_client/
RUN pip install --no-cache-dir \
        /opt/corgipile/python_client \
        "psycopg[binary]==3.3.9" \
        numpy==2.4.6 \
        pglast==8.7 \
        tqdm==4.70.1 \
        uvloop==0.23.0

# the demo and the module it prints its run line with (date, machine, load)
COPY scripts/demo.py scripts/provenance.py /opt/corgipile/

# Nothing here needs root.
RUN useradd --create-home --uid 10001 corgipile
USER 10001
WORKDIR /home/corgipile

CMD ["python", "/opt/corgipile/demo.py"]
