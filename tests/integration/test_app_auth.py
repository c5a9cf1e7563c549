"""GitHub App authentication against the sandbox: JWT -> installation -> installation token, for the
API (through PyGithub) and for git over HTTP; responses checked against GitHub's OpenAPI description."""

import subprocess

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from github import GithubException

from bot.adapters.github.app_auth import AppCredentials
from sandbox import SandboxState, run_in_thread, seed_from_scenario
from scenarios.mamba_track_boundary import build
from tests.support.sandbox import ContractChecker, install_recorder


def keypair() -> tuple[str, str]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    public = (
        key.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )
    return private, public


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("app")
    build(tmp / "scenario", commits=8, seed=1)
    state = SandboxState(tmp / "sandbox")
    seeded = seed_from_scenario(state, tmp / "scenario")
    private, public = keypair()
    state.register_app(4242, public, [seeded.repo])
    base, stop = run_in_thread(state)
    yield dict(state=state, seeded=seeded, base=base, private=private, tmp=tmp)
    stop()


def test_installation_token_works_for_the_api_and_git(world, monkeypatch):
    checker = ContractChecker(world["base"], excluded=("/repos/{owner}/{repo}/actions/",))
    install_recorder(monkeypatch, checker)
    app = AppCredentials(4242, world["private"], world["base"], throttle=False)
    repo = app.client(world["seeded"].repo).get_repo(world["seeded"].repo)
    assert repo.full_name == world["seeded"].repo
    token = app.token(world["seeded"].repo)
    assert token.startswith("ghs_")
    clone = world["tmp"] / "clone"
    subprocess.run(
        [
            "git",
            "-c",
            f"http.extraHeader=Authorization: Bearer {token}",
            "clone",
            "-q",
            f"{world['base']}/{world['seeded'].repo}.git",
            str(clone),
        ],
        check=True,
    )
    assert token not in (clone / ".git" / "config").read_text()
    covered = checker.covered()
    assert 200 in covered.get("apps/get-repo-installation", set()) and 201 in covered.get(
        "apps/create-installation-access-token", set()
    )
    assert not checker.failures(), [e.error for e in checker.failures()]


def test_a_jwt_from_another_key_is_refused(world):
    other, _ = keypair()
    with pytest.raises(GithubException) as exc:
        AppCredentials(4242, other, world["base"], throttle=False).client(world["seeded"].repo).get_repo(
            world["seeded"].repo
        )
    assert exc.value.status == 401


def test_an_app_not_installed_on_the_repository_gets_404(world):
    private, public = keypair()
    world["state"].register_app(7, public, [])
    with pytest.raises(GithubException) as exc:
        AppCredentials(7, private, world["base"], throttle=False).client(world["seeded"].repo).get_repo(
            world["seeded"].repo
        )
    assert exc.value.status == 404
