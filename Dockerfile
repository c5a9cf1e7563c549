# syntax=docker/dockerfile:1
# The revert-bisect webhook service (`revert-bisect serve`): FastAPI + SQLAlchemy + PyGithub + git.
# Only the `postgres` extra: no torch, no sglang, no uv (those belong on the GPU runners,
# deploy/runner.Dockerfile). Policies are mounted at $REVERT_BISECT_POLICIES; see deploy/README.md.
#
#   docker build -t revert-bisect .

# ---- builder: a wheel of this project, installed with its dependencies into /opt/venv ----
FROM python:3.11-slim-bookworm AS builder
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python -m venv /opt/venv
WORKDIR /src
COPY pyproject.toml README.md ./
COPY bot ./bot
COPY runners ./runners
RUN /opt/venv/bin/pip wheel --no-deps --wheel-dir /wheels . \
    && set -- /wheels/revert_bisect-*.whl \
    && /opt/venv/bin/pip install "$1[postgres]"

# ---- the service ----
FROM python:3.11-slim-bookworm
# git: the bot clones watched repositories, makes and pushes revert commits (GitPython and the git CLI).
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends git \
    && rm -rf /var/lib/apt/lists/*
RUN useradd --uid 10001 --user-group --create-home --home-dir /home/bot --shell /usr/sbin/nologin bot
COPY --from=builder /opt/venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH \
    REVERT_BISECT_WORKSPACE=/srv/work \
    REVERT_BISECT_POLICIES=/srv/policies \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1
WORKDIR /srv
# /srv/work: clones of the watched repositories (a volume keeps them across restarts);
# /srv/policies: mount the policy files here (read-only).
RUN mkdir -p /srv/work /srv/policies && chown 10001:10001 /srv/work
USER 10001:10001
EXPOSE 8080
# The port below is the CMD's: change both if you change one.
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import sys, urllib.request; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:8080/healthz', timeout=4).status == 200 else 1)"]
ENTRYPOINT ["revert-bisect"]
CMD ["serve", "--host", "0.0.0.0", "--port", "8080"]
