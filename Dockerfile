# syntax=docker/dockerfile:1
#
# Caldera's scheduler image: a virtualenv built in one stage, copied into a clean slim image.
# Only pyproject.toml and operator/ enter the build, and dependencies are installed before the
# source is copied, so editing code rebuilds one small layer. No dev dependencies are installed.

ARG PYTHON_IMAGE=python:3.11-slim

FROM ${PYTHON_IMAGE} AS builder
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
RUN python -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH
WORKDIR /src
# Runtime dependencies first, read from [project].dependencies: this layer is reused until
# pyproject.toml changes.
COPY pyproject.toml ./
RUN python -c "import tomllib; print('\n'.join(tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies']))" > /tmp/requirements.txt \
    && pip install -r /tmp/requirements.txt
# Then the package itself (a regular, non-editable install, so the entry points that register the
# built-in plugins and actions land in the venv).
COPY operator/ operator/
RUN pip install --no-deps .

FROM ${PYTHON_IMAGE}
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
# Same base image as the builder, so the venv's interpreter symlinks stay valid.
COPY --from=builder /opt/venv /opt/venv
# The numeric id matches runAsUser in manifests/40-deployment.yaml (distroless "nonroot").
USER 65532:65532
ENTRYPOINT ["caldera"]
