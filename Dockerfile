# syntax=docker/dockerfile:1
# Berth's container image: `berth run`, the operator and scheduler the Helm chart starts.
#
#   docker build -t berth:0.1.0 .
#
# Stage 1 builds Berth's wheel and the wheels of all its dependencies; stage 2 installs exactly
# those wheels (no index, no compilers, no sources) and runs as an unprivileged numeric user, so
# Kubernetes' runAsNonRoot can verify it without a passwd lookup. Berth is installed without
# extras: the image carries neither matplotlib ([sim]) nor the emulator's cel-python
# ([emulator]) nor kubectl (tests/packaging/test_extras.py checks the install set).

FROM python:3.11.14-slim-bookworm AS builder

ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /src
COPY pyproject.toml README.md ./
COPY berth ./berth
RUN pip wheel --no-cache-dir --wheel-dir /wheels .

FROM python:3.11.14-slim-bookworm

ARG VERSION=0.1.0
ARG REVISION=unknown
LABEL org.opencontainers.image.title="berth" \
      org.opencontainers.image.description="Berth: a batch scheduler for Kubernetes (gangs, hierarchical queues, reservations)" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.base.name="docker.io/library/python:3.11.14-slim-bookworm"

# Bytecode is compiled at install time; the root filesystem is read-only at run time.
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    HOME=/tmp

# The wheels are bind-mounted from the builder, so no layer keeps a copy of them.
RUN --mount=type=bind,from=builder,source=/wheels,target=/wheels \
    pip install --no-cache-dir --no-index --find-links=/wheels /wheels/berth_scheduler-*.whl

USER 10001:10001
EXPOSE 8080
ENTRYPOINT ["berth", "run"]
