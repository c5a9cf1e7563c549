# syntax=docker/dockerfile:1
# A self-hosted GPU runner for revert-bisect's step workflow (runners/github/revert-bisect-step.yml).
#
# Base: SGLang's own image (lmsysorg/sglang: CUDA, a CUDA build of torch and SGLang's kernels, matched
# to each other). The step's environments are uv venvs layered on this interpreter
# (--system-site-packages), so the base's CUDA torch is reused, never replaced. For another project,
# NVIDIA's PyTorch container works the same way: --build-arg BASE_IMAGE=nvcr.io/nvidia/pytorch:25.01-py3
# (then `revert-bisect[sglang]` may pull a PyPI torch over NVIDIA's: prefer `revert-bisect[runner]`).
#
#   docker build -f deploy/runner.Dockerfile \
#     --build-arg REVERT_BISECT_PACKAGE='revert-bisect[sglang] @ git+https://github.com/YOUR-ORG/revert-bisect@v0.1.0' \
#     -t revert-bisect-runner deploy/
#   docker run -d --gpus all --restart unless-stopped -v revert-bisect-cache:/cache/revert-bisect \
#     -e RUNNER_URL=https://github.com/OWNER/REPO -e RUNNER_TOKEN=... -e RUNNER_LABELS=4-gpu-h100 \
#     revert-bisect-runner
ARG BASE_IMAGE=lmsysorg/sglang:v0.5.18
FROM ${BASE_IMAGE}

# The pip requirement of the bot's runner package -- the same one as the repository variable
# REVERT_BISECT_PACKAGE, so the probe is the bot's version (a git URL, or a wheel's URL).
ARG REVERT_BISECT_PACKAGE
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

# The bot's runner side: `python3 -m runners.step` and the KL probe (the step workflow upgrades it
# to $REVERT_BISECT_PACKAGE at every step; installing it here saves that time). The requirement is
# pinned by the build argument itself (a git tag or a wheel), hence no `==version` here.
# hadolint ignore=DL3013
RUN if [ -z "${REVERT_BISECT_PACKAGE}" ]; then \
        echo "--build-arg REVERT_BISECT_PACKAGE='revert-bisect[sglang] @ git+https://...@TAG' is required" >&2; exit 1; \
    fi \
    && python3 -m pip install "${REVERT_BISECT_PACKAGE}" \
    && python3 -c "import runners.step, runners.probes.sglang_kl"

# Clones, worktrees and the environments keyed by pins, kept between steps: mount a volume here.
ENV REVERT_BISECT_RUNNER_CACHE=/cache/revert-bisect
RUN mkdir -p /cache/revert-bisect && chown runner:runner /cache/revert-bisect
VOLUME ["/cache/revert-bisect"]

COPY --chmod=0755 runner-entrypoint.sh /usr/local/bin/runner-entrypoint.sh
USER 10001:10001
ENTRYPOINT ["/usr/local/bin/runner-entrypoint.sh"]
