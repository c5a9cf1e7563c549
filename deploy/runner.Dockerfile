# syntax=docker/dockerfile:1
# A self-hosted GPU runner for revert-bisect's step workflow (runners/github/revert-bisect-step.yml).
#
# Base: SGLang's own image (lmsysorg/sglang: CUDA, a CUDA build of torch and SGLang's kernels, matched
# to each other). The step's environments are uv venvs layered on this interpreter
# (a .pth over its site-packages), so the base's CUDA torch is reused, never replaced. For another project,
# NVIDIA's PyTorch container works the same way: --build-arg BASE_IMAGE=nvcr.io/nvidia/pytorch:25.01-py3.
# The bot's runner package is not installed here: the step workflow installs the repository variable
# REVERT_BISECT_PACKAGE into a uv venv of its own (kept on the cache volume), never into this python3.
#
#   docker build -f deploy/runner.Dockerfile -t revert-bisect-runner deploy/
#   sudo deploy/gpu-locks.sh     # on the host, once per machine: the GPU lock directory its runners share
#   docker run -d --gpus all --restart unless-stopped -v revert-bisect-cache:/cache/revert-bisect \
#     -v /var/lib/revert-bisect/gpu-locks:/var/lib/revert-bisect/gpu-locks \
#     -e RUNNER_URL=https://github.com/OWNER/REPO -e RUNNER_TOKEN=... -e RUNNER_LABELS=4-gpu-h100 \
#     revert-bisect-runner
ARG BASE_IMAGE=lmsysorg/sglang:v0.5.18
FROM ${BASE_IMAGE}

# uv makes the runner package's venv and the environments keyed by pins (the step workflow requires it)
ARG UV_VERSION=0.9.5
# The GitHub Actions runner (https://github.com/actions/runner/releases); it updates itself later.
ARG RUNNER_VERSION=2.329.0
ARG RUNNER_ARCH=x64
ARG RUNNER_SHA256=""

SHELL ["/bin/bash", "-o", "pipefail", "-c"]
ENV DEBIAN_FRONTEND=noninteractive \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_BREAK_SYSTEM_PACKAGES=1

# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends git curl ca-certificates \
    && rm -rf /var/lib/apt/lists/*

# The runner refuses to run as root: it gets a user of its own.
RUN useradd --uid 10001 --create-home --shell /bin/bash runner

WORKDIR /opt/actions-runner
RUN curl -fsSL -o /tmp/actions-runner.tar.gz \
        "https://github.com/actions/runner/releases/download/v${RUNNER_VERSION}/actions-runner-linux-${RUNNER_ARCH}-${RUNNER_VERSION}.tar.gz" \
    && if [ -n "${RUNNER_SHA256}" ]; then echo "${RUNNER_SHA256}  /tmp/actions-runner.tar.gz" | sha256sum -c -; fi \
    && tar -xzf /tmp/actions-runner.tar.gz \
    && rm /tmp/actions-runner.tar.gz \
    && ./bin/installdependencies.sh \
    && rm -rf /var/lib/apt/lists/* \
    && chown -R runner:runner /opt/actions-runner

# uv as a tool of its own (its binary on PATH), not a package in the base's site-packages, which the
# repository's own tests run with.
RUN python3 -m pip install --target /opt/uv "uv==${UV_VERSION}" \
    && ln -s /opt/uv/bin/uv /usr/local/bin/uv \
    && uv --version

# Clones, worktrees and the environments keyed by pins, kept between steps: mount a volume here.
# The runner package's venvs (one per REVERT_BISECT_PACKAGE) live there too, built by the first step.
ENV REVERT_BISECT_RUNNER_CACHE=/cache/revert-bisect \
    REVERT_BISECT_HOME=/cache/revert-bisect
RUN mkdir -p /cache/revert-bisect && chown runner:runner /cache/revert-bisect
VOLUME ["/cache/revert-bisect"]

# The host's GPU lock directory, one per machine (deploy/gpu-locks.sh makes it on the host): every runner container
# of the host mounts it here, so their steps never take the same GPU (runners/gpulocks.py; a step refuses to start
# when the directory it sees is not the host's). Not a VOLUME: an anonymous volume is one container's own.
ENV REVERT_BISECT_GPU_LOCKS=/var/lib/revert-bisect/gpu-locks

COPY --chmod=0755 runner-entrypoint.sh /usr/local/bin/runner-entrypoint.sh
USER 10001:10001
ENTRYPOINT ["/usr/local/bin/runner-entrypoint.sh"]
