# A local stand-in for the official python:3.11-slim-bookworm image, for
# machines without a registry (scripts/docker_local_base.sh builds it).
# Debian 12's own Python 3.11 in a virtual environment at /usr/local/python,
# first on PATH, so that `python` and `pip install` work as in the official
# image (whose Python lives in /usr/local and takes pip installs as root).
ARG DEBIAN_IMAGE=localhost/corgipile-base/debian:bookworm
FROM ${DEBIAN_IMAGE}

# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates python3 python3-venv \
    && rm -rf /var/lib/apt/lists/* \
    && python3 -m venv /usr/local/python

# The certificate authorities of the machine that builds this stand-in
# (scripts/docker_local_base.sh copies its CA bundle into the build
# context): where HTTPS goes out through a proxy with a CA of its own, pip
# needs it to reach PyPI; elsewhere it is the usual Debian bundle.
COPY ca-certificates.crt /etc/ssl/certs/ca-certificates.crt

ENV PATH=/usr/local/python/bin:$PATH \
    LANG=C.UTF-8 \
    PIP_CERT=/etc/ssl/certs/ca-certificates.crt
CMD ["python3"]
