# syntax=docker/dockerfile:1
# The adapter image: the wheel is built in a throw-away stage, and only a virtualenv with the wheel and its
# dependencies reaches the runtime stage, so no compiler, pip cache or source tree ships.

ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS builder
WORKDIR /src
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
RUN python -m pip install "build==1.3.0"
# Only what the wheel is made of (.dockerignore keeps everything else out of the context).
COPY pyproject.toml README.md ./
COPY adapter/ adapter/
# The runtime virtualenv gets no pip or setuptools of its own (Python 3.11's venv would add both): the
# builder's pip installs into it, so only the wheel and its dependencies are in /opt/vllm-autoscale.
RUN python -m build --wheel --outdir /dist . \
    && python -m venv --without-pip /opt/vllm-autoscale \
    && python -m pip --python /opt/vllm-autoscale/bin/python install /dist/*.whl

FROM ${PYTHON_IMAGE}
LABEL org.opencontainers.image.title="vllm-autoscale" \
      org.opencontainers.image.description="Kubernetes external metrics adapter for autoscaling vLLM" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=builder /opt/vllm-autoscale /opt/vllm-autoscale
# Bytecode was compiled at install time; the root filesystem is read-only at run time.
ENV PATH=/opt/vllm-autoscale/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
# nobody:nogroup, numeric so that runAsNonRoot can verify it without /etc/passwd.
USER 65534:65534
EXPOSE 6443
ENTRYPOINT ["vllm-autoscale"]
CMD ["serve", "--config", "/etc/vllm-autoscale/config.yaml"]
