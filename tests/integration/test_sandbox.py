"""The GitHub sandbox through real PyGithub and real git, every response checked against GitHub's
OpenAPI description (sandbox/openapi) by openapi-core (see tests/support/sandbox.py)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from pathlib import Path

import pytest
import requests
from github import Auth, Github, GithubException

from sandbox import SandboxState, run_in_thread, seed_from_scenario
from scenarios.mamba_track_boundary import build
from tests.support.net import free_port
from tests.support.sandbox import (
    ContractChecker,
    install_recorder,
    load_spec,
    operations,
)

GIT_ENV = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_CONFIG_NOSYSTEM": "1"}


@contextlib.contextmanager
def seeded_sandbox(root: Path):
    scenario = build(root / "scenario", commits=20, seed=1)
    state = SandboxState(root / "github")
    seeded = seed_from_scenario(state, root / "scenario")
    base_url, stop = run_in_thread(state)
    checker = ContractChecker(base_url)
    try:
        yield {
            "state": state,
            "seeded": seeded,
            "scenario": scenario,
            "base": base_url,
            "checker": checker,
            "root": root,
        }
    finally:
        stop()


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory):
    with seeded_sandbox(tmp_path_factory.mktemp("sandbox")) as sb:
        yield sb


@pytest.fixture(autouse=True)
def contract(request, monkeypatch):
    """Every sandbox response a test provokes must match the OpenAPI subset."""
    if "sandbox" not in request.fixturenames:
        yield None
        return
    checker: ContractChecker = request.getfixturevalue("sandbox")["checker"]
    install_recorder(monkeypatch, checker)
    before = len(checker.exchanges)
    yield checker
    bad = [e for e in checker.exchanges[before:] if e.error]
    assert not bad, "\n".join(f"{e.method} {e.url} -> {e.status} ({e.operation}): {e.error}" for e in bad)


def gh_for(sandbox, login: str | None = None) -> Github:
    seeded = sandbox["seeded"]
    token = seeded.tokens[login or seeded.maintainer]
    return Github(
        base_url=sandbox["base"],
        auth=Auth.Token(token),
        seconds_between_requests=0,
        seconds_between_writes=0,
        retry=None,
    )


def raw(sandbox, method: str, path: str, login: str | None = None, **kw) -> requests.Response:
    seeded = sandbox["seeded"]
    headers = {
        "Authorization": f"token {seeded.tokens[login or seeded.maintainer]}",
        "Accept": "application/vnd.github+json",
    }
    with requests.Session() as s:
        return s.request(method, sandbox["base"] + path, headers=headers, timeout=30, **kw)


def push_branch(sandbox, branch: str, filename: str, token_login: str | None = None) -> tuple[str, str]:
    """Clone over smart HTTP with the token as a header, commit a file on `branch`, push it back."""
    seeded = sandbox["seeded"]
    token = seeded.tokens[token_login or seeded.maintainer]
    header = f"http.extraHeader=Authorization: Bearer {token}"
    work = sandbox["root"] / f"clone-{branch.replace('/', '-')}"
    url = f"{sandbox['base']}/{seeded.repo}.git"
    subprocess.run(["git", "-c", header, "clone", "-q", url, str(work)], check=True, env=GIT_ENV, capture_output=True)
    git = ["git", "-C", str(work), "-c", "user.name=Sandbox Test", "-c", "user.email=test@sandbox.invalid"]
    subprocess.run([*git, "checkout", "-q", "-b", branch], check=True, env=GIT_ENV)
    (work / filename).write_text(f"{branch}\n")
    subprocess.run([*git, "add", filename], check=True, env=GIT_ENV)
    subprocess.run([*git, "commit", "-q", "-m", f"Add {filename}"], check=True, env=GIT_ENV)
    subprocess.run(
        ["git", "-C", str(work), "-c", header, "push", "-q", "origin", branch],
        check=True,
        env=GIT_ENV,
        capture_output=True,
    )
    sha = subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()
    config = (work / ".git" / "config").read_text()
    return sha, config


def status_of(call) -> tuple[int, dict]:
    with pytest.raises(GithubException) as info:
        call()
    return info.value.status, info.value.data


# -- seeding, repository, commits --


def test_seeded_repository_commits_and_pulls(sandbox):
    gh, sc, seeded = gh_for(sandbox), sandbox["scenario"], sandbox["seeded"]
    repo = gh.get_repo(seeded.repo)
    assert repo.full_name == sc.repo_slug and repo.default_branch == sc.default_branch
    assert repo.html_url == f"{sandbox['base']}/{sc.repo_slug}" and repo.url.startswith(sandbox["base"] + "/repos/")
    commits = list(repo.get_commits())
    assert [c.sha for c in commits] == list(reversed(sc.shas))
    assert repo.get_commits().totalCount == len(sc.shas)
    culprit = repo.get_commit(sc.culprit)
    assert culprit.commit.message.startswith(sc.prs[sc.culprit_index]["title"])
    assert culprit.author.login == sc.prs[sc.culprit_index]["author"]
    assert {f.filename for f in culprit.files} == set(sc.prs[sc.culprit_index]["files"])
    assert [p.number for p in culprit.get_pulls()] == [sc.culprit_pr]
    pr = repo.get_pull(sc.culprit_pr)
    assert pr.merged and pr.merge_commit_sha == sc.culprit and pr.user.login == sc.prs[sc.culprit_index]["author"]
    assert [c.sha for c in pr.get_commits()] == [sc.culprit]
    files = list(pr.get_files())  # its diff as git has it, each file's hunks in `patch`
    assert {f.filename for f in files} == set(sc.prs[sc.culprit_index]["files"])
    assert all(f.patch.startswith("@@ -") and f.changes == f.additions + f.deletions for f in files)
    assert pr.html_url == f"{sandbox['base']}/{sc.repo_slug}/pull/{sc.culprit_pr}"
    merged = list(repo.get_pulls(state="closed", base="main"))
    assert len(merged) == len(sc.prs)
    follow = repo.get_issue(sc.followup["number"])
    assert follow.title == sc.followup["title"] and follow.pull_request is None
    assert {label.name for label in follow.labels} == set(sc.followup["labels"])


def test_compare_and_refs(sandbox):
    repo, sc = gh_for(sandbox).get_repo(sandbox["seeded"].repo), sandbox["scenario"]
    cmp = repo.compare(sc.shas[2], sc.shas[5])
    assert (cmp.status, cmp.ahead_by, cmp.behind_by, cmp.total_commits) == ("ahead", 3, 0, 3)
    assert [c.sha for c in cmp.commits] == sc.shas[3:6] and cmp.files
    assert repo.compare(sc.shas[5], sc.shas[2]).status == "behind"
    assert repo.get_git_ref("heads/main").object.sha == sc.bad
    ref = repo.create_git_ref("refs/heads/sandbox-ref", sc.shas[3])
    assert ref.ref == "refs/heads/sandbox-ref" and ref.object.sha == sc.shas[3]
    assert repo.get_git_ref("heads/sandbox-ref").object.sha == sc.shas[3]
    status, data = status_of(lambda: repo.create_git_ref("refs/heads/sandbox-ref", sc.shas[4]))
    assert status == 422 and data["message"] == "Reference already exists" and "documentation_url" in data
    ref.delete()
    status, data = status_of(lambda: repo.get_git_ref("heads/sandbox-ref"))
    assert status == 404 and data["message"] == "Not Found" and data["documentation_url"]


# -- pushing and pull requests --


def test_push_then_open_pull_request_with_labels_and_reviewers(sandbox):
    repo, sc = gh_for(sandbox).get_repo(sandbox["seeded"].repo), sandbox["scenario"]
    sha, config = push_branch(sandbox, "revert-bisect/feature", "FEATURE.md")
    assert sandbox["seeded"].tokens[sandbox["seeded"].maintainer] not in config
    assert repo.get_git_ref("heads/revert-bisect/feature").object.sha == sha
    assert repo.get_commit(sha).parents[0].sha == sc.bad
    pr = repo.create_pull(
        title='Revert "x"', body=f"Reverts {sc.repo_slug}#{sc.culprit_pr}", head="revert-bisect/feature", base="main"
    )
    assert pr.head.sha == sha and pr.base.sha == sc.bad and pr.commits == 1 and pr.state == "open"
    found = list(repo.get_pulls(state="open", head=f"{sc.repo_slug.split('/')[0]}:revert-bisect/feature"))
    assert [p.number for p in found] == [pr.number]
    assert [p.number for p in repo.get_commit(sha).get_pulls()] == [pr.number]
    status, data = status_of(
        lambda: repo.create_pull(title="again", body="", head="revert-bisect/feature", base="main")
    )
    assert status == 422 and data["message"] == "Validation Failed" and "already exists" in str(data["errors"])
    status, data = status_of(lambda: repo.create_pull(title="t", body="", head="no-such-branch", base="main"))
    assert status == 422 and data["errors"][0]["field"] == "head"
    author = sc.prs[sc.culprit_index]["author"]
    pr.create_review_request(reviewers=[author])
    assert [u.login for u in repo.get_pull(pr.number).requested_reviewers] == [author]
    status, data = status_of(lambda: pr.create_review_request(reviewers=["nobody-at-all"]))
    assert status == 422 and "collaborators" in data["message"]
    pr.as_issue().add_to_labels("revert", "bisect")
    pr.add_to_labels("revert")  # adding a label twice keeps one
    assert [lab.name for lab in repo.get_issue(pr.number).labels] == ["revert", "bisect"]
    assert [c.sha for c in pr.get_commits()] == [sha]


def test_comments_reactions_and_timeline(sandbox):
    gh, sc = gh_for(sandbox), sandbox["scenario"]
    repo = gh.get_repo(sandbox["seeded"].repo)
    culprit = repo.get_issue(sc.culprit_pr)
    timeline = list(culprit.get_timeline())
    refs = [e for e in timeline if e.event == "cross-referenced"]
    assert sc.followup["number"] in [e.source.issue.number for e in refs]
    comment = culprit.create_comment("Bisected: this PR broke the KL test.")
    assert comment.html_url.startswith(f"{sandbox['base']}/{sc.repo_slug}/pull/{sc.culprit_pr}#issuecomment-")
    comment.edit("Bisected: this PR broke the KL test (confirmed).")
    assert [c.body for c in culprit.get_comments()] == ["Bisected: this PR broke the KL test (confirmed)."]
    assert culprit.get_comment(comment.id).body == comment.body  # PyGithub: Issue.get_comment, lazy GET
    first = comment.create_reaction("eyes")
    again = comment.create_reaction("eyes")
    rocket = comment.create_reaction("rocket")
    assert first.id == again.id != rocket.id
    statuses = [e.status for e in sandbox["checker"].exchanges if e.operation == "reactions/create-for-issue-comment"]
    assert statuses[-3:] == [201, 200, 201]
    status, data = status_of(lambda: comment.create_reaction("thumbsup"))
    assert status == 422 and data["message"] == "Validation Failed"
    events = [e.event for e in culprit.get_timeline()]
    assert "commented" in events and "cross-referenced" in events
    # a new issue citing the culprit shows up in its timeline as a cross-reference
    issue = repo.create_issue(title="Follow-up two", body=f"Regression from #{sc.culprit_pr}.")
    assert issue.user.login == sandbox["seeded"].maintainer
    sources = [e.source.issue.number for e in culprit.get_timeline() if e.event == "cross-referenced"]
    assert issue.number in sources


def test_statuses_check_runs_and_permissions(sandbox):
    gh, sc, seeded = gh_for(sandbox), sandbox["scenario"], sandbox["seeded"]
    repo = gh.get_repo(seeded.repo)
    status = repo.get_commit(sc.bad).create_status(
        "failure", target_url=f"{sandbox['base']}/runs/1", description="KL test failed", context="revert-bisect"
    )
    assert status.state == "failure" and status.context == "revert-bisect"
    run = repo.create_check_run(name="revert-bisect", head_sha=sc.bad, status="in_progress")
    assert run.status == "in_progress" and run.head_sha == sc.bad
    run.edit(conclusion="success", output={"title": "Culprit found", "summary": f"#{sc.culprit_pr}"})
    assert run.status == "completed" and run.conclusion == "success"
    author = sc.prs[0]["author"]
    assert repo.get_collaborator_permission(author) == "write"
    assert repo.get_collaborator_role_name(seeded.maintainer) == "maintain"
    assert repo.get_collaborator_permission(seeded.maintainer) == "write"
    sandbox["state"].add_user("reader", token="sandbox-token-reader")
    sandbox["state"].set_permission(seeded.repo, "reader", "read")
    assert repo.get_collaborator_role_name("reader") == "read"
    sandbox["state"].add_user("stranger", token="sandbox-token-stranger")  # a GitHub user without access
    assert (repo.get_collaborator_permission("stranger"), repo.get_collaborator_role_name("stranger")) == ("none", "")
    status_, data = status_of(lambda: repo.get_collaborator_permission("ghost-user"))
    assert status_ == 404 and data["message"] == "Not Found"
    # the read-only user may not write
    reader = Github(
        base_url=sandbox["base"],
        auth=Auth.Token("sandbox-token-reader"),
        seconds_between_requests=0,
        seconds_between_writes=0,
        retry=None,
    ).get_repo(seeded.repo)
    status_, _ = status_of(lambda: reader.create_git_ref("refs/heads/nope", sc.bad))
    assert status_ == 403


def test_search_finds_followup_by_culprit_number(sandbox):
    gh, sc, seeded = gh_for(sandbox), sandbox["scenario"], sandbox["seeded"]
    found = gh.search_issues(f"repo:{seeded.repo} is:issue is:open {sc.culprit_pr}")
    assert sc.followup["number"] in [i.number for i in found]
    prs = gh.search_issues(f'repo:{seeded.repo} is:pr "track boundary"')
    assert sc.culprit_pr in [i.number for i in prs]
    assert gh.search_issues(f"repo:{seeded.repo} is:pr {sc.followup['number']}").totalCount == 0


# -- authentication, error shapes, faults --


def test_issues_of_a_repository_are_listed(sandbox):
    """issues/list-for-repo (the forge's lookup of an issue it may just have opened): open ones by default,
    pull requests among all of them; an unknown repository is a 404."""
    sc, seeded = sandbox["scenario"], sandbox["seeded"]
    repo = gh_for(sandbox).get_repo(seeded.repo)
    assert sc.followup["number"] in [i.number for i in repo.get_issues()]
    assert sc.culprit_pr not in [i.number for i in repo.get_issues()]  # merged: closed
    merged = next(i for i in repo.get_issues(state="all") if i.number == sc.culprit_pr)
    assert merged.pull_request is not None and merged.state == "closed"
    owner = seeded.repo.split("/")[0]
    assert raw(sandbox, "GET", f"/repos/{owner}/no-such-repository/issues").status_code == 404


def test_bad_credentials_and_unknown_resources(sandbox):
    anon = Github(
        base_url=sandbox["base"],
        auth=Auth.Token("not-a-token"),
        seconds_between_requests=0,
        seconds_between_writes=0,
        retry=None,
    )
    status, data = status_of(lambda: anon.search_issues("is:issue x").totalCount)
    assert status == 401 and data["message"] == "Bad credentials"
    with requests.Session() as s:
        r = s.get(f"{sandbox['base']}/repos/{sandbox['seeded'].repo}")
    assert r.status_code == 401 and r.json()["message"] == "Bad credentials"
    gh = gh_for(sandbox)
    status, data = status_of(lambda: gh.get_repo("nobody/nothing"))
    assert status == 404 and data == {"message": "Not Found", "documentation_url": data["documentation_url"]}
    repo = gh.get_repo(sandbox["seeded"].repo)
    assert status_of(lambda: repo.get_issue(999999))[0] == 404
    assert status_of(lambda: repo.get_pull(sandbox["scenario"].followup["number"]))[0] == 404
    # clone without a token is refused
    proc = subprocess.run(
        ["git", "clone", "-q", f"{sandbox['base']}/{sandbox['seeded'].repo}.git", str(sandbox["root"] / "anon-clone")],
        env=GIT_ENV,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode != 0


def test_faults_are_injected_on_rest_only(sandbox):
    state, seeded = sandbox["state"], sandbox["seeded"]
    try:
        state.faults.set(1.0, kinds=("429",), seed=3)
        r = raw(sandbox, "GET", f"/repos/{seeded.repo}")
        assert r.status_code == 429 and r.headers["Retry-After"] == "1"
        assert "secondary rate limit" in r.json()["message"]
        state.faults.set(1.0, kinds=("403-ratelimit",), seed=3)
        assert raw(sandbox, "GET", f"/repos/{seeded.repo}").status_code == 403
        state.faults.set(1.0, kinds=("5xx",), seed=3)
        r = raw(sandbox, "GET", f"/repos/{seeded.repo}")
        assert r.status_code in (502, 503) and r.json()["message"]
        # git smart HTTP is left alone unless asked
        sha, _ = push_branch(sandbox, "fault-free", "FAULTS.md")
        state.faults.set(1.0, kinds=("slow",), seed=3, slow_seconds=0.3)
        started = time.monotonic()
        assert raw(sandbox, "GET", f"/repos/{seeded.repo}").status_code == 200
        assert time.monotonic() - started >= 0.3
        state.faults.set(1.0, kinds=("5xx",), seed=3, include_git=True)
        proc = subprocess.run(
            [
                "git",
                "-c",
                f"http.extraHeader=Authorization: Bearer {seeded.tokens[seeded.maintainer]}",
                "ls-remote",
                f"{sandbox['base']}/{seeded.repo}.git",
            ],
            env=GIT_ENV,
            capture_output=True,
            check=False,
        )
        assert proc.returncode != 0
        state.faults.set(0.5, kinds=("5xx",), seed=11)
        codes = [raw(sandbox, "GET", f"/repos/{seeded.repo}").status_code for _ in range(20)]
        assert 0 < codes.count(200) < 20
    finally:
        state.faults.off()
    assert raw(sandbox, "GET", f"/repos/{seeded.repo}/git/ref/heads/fault-free").json()["object"]["sha"] == sha


def test_error_shapes_of_every_operation(sandbox):
    """404 and 422 of each served operation (the shapes GitHub documents, or basic-error/validation-error
    where the operation documents no such status)."""
    sc, seeded = sandbox["scenario"], sandbox["seeded"]
    r = f"/repos/{seeded.repo}"
    comment_id = raw(sandbox, "POST", f"{r}/issues/{sc.followup['number']}/comments", json={"body": "x"}).json()["id"]
    missing = "0" * 40
    cases = [
        ("GET", "/repos/no/such", None, 404),
        ("GET", f"{r}/commits?sha=no-such-branch", None, 404),
        ("GET", f"{r}/commits/no-such-branch", None, 404),
        ("GET", f"{r}/commits/{missing[:12]}", None, 422),
        ("GET", f"{r}/commits/{missing}/pulls", None, 422),
        ("GET", f"{r}/compare/main...no-such-branch", None, 404),
        ("GET", f"{r}/git/ref/heads/no-such-branch", None, 404),
        ("POST", f"{r}/git/refs", {"ref": "refs/heads/main", "sha": sc.bad}, 422),
        ("POST", f"{r}/git/refs", {"ref": "refs/heads/x", "sha": missing}, 422),
        ("DELETE", f"{r}/git/refs/heads/no-such-branch", None, 422),
        ("POST", "/repos/no/such/issues", {"title": "x"}, 404),
        ("POST", f"{r}/issues", {"body": "no title"}, 422),
        ("GET", f"{r}/issues/999999", None, 404),
        ("GET", f"{r}/issues/999999/comments", None, 404),
        ("POST", f"{r}/issues/999999/comments", {"body": "x"}, 404),
        ("POST", f"{r}/issues/{sc.culprit_pr}/comments", {"body": ""}, 422),
        ("PATCH", f"{r}/issues/comments/999999", {"body": "x"}, 404),
        ("GET", f"{r}/issues/comments/999999", None, 404),
        ("PATCH", f"{r}/issues/comments/{comment_id}", {"body": ""}, 422),
        ("POST", f"{r}/issues/comments/999999/reactions", {"content": "eyes"}, 404),
        ("POST", f"{r}/issues/comments/{comment_id}/reactions", {"content": "tada"}, 422),
        ("POST", f"{r}/issues/999999/labels", {"labels": ["x"]}, 404),
        ("POST", f"{r}/issues/{sc.culprit_pr}/labels", {"labels": []}, 422),
        ("GET", f"{r}/issues/999999/timeline", None, 404),
        ("GET", f"{r}/pulls?state=bogus", None, 422),
        ("POST", f"{r}/pulls", {"title": "t", "head": "no-such-branch", "base": "main"}, 422),
        ("GET", f"{r}/pulls/999999", None, 404),
        ("GET", f"{r}/pulls/999999/commits", None, 404),
        ("GET", f"{r}/pulls/{sc.culprit_pr}/files?page=first", None, 422),
        ("GET", "/search/issues?q=mamba OR a OR b OR c OR d OR e OR f", None, 422),
        ("POST", f"{r}/pulls/999999/requested_reviewers", {"reviewers": ["x"]}, 404),
        ("POST", f"{r}/pulls/{sc.culprit_pr}/requested_reviewers", {"reviewers": ["ghost-user"]}, 422),
        ("POST", f"{r}/statuses/{missing}", {"state": "success"}, 422),
        ("POST", f"{r}/statuses/{sc.bad}", {"state": "great"}, 422),
        ("POST", f"{r}/check-runs", {"name": "x"}, 422),
        ("PATCH", f"{r}/check-runs/999999", {"status": "completed", "conclusion": "success"}, 404),
        ("GET", f"{r}/collaborators/ghost-user/permission", None, 404),
        ("GET", "/search/issues?q=", None, 422),
        ("GET", "/repos/no/such/pulls", None, 404),
    ]
    for method, path, body, expected in cases:
        resp = raw(sandbox, method, path, json=body)
        assert resp.status_code == expected, (method, path, resp.status_code, resp.text)
        data = resp.json()
        assert data["message"] and data["documentation_url"], (method, path, data)
        if expected == 422:
            assert "errors" in data or data["message"] != "Validation Failed", (method, path, data)
    run = raw(sandbox, "POST", f"{r}/check-runs", json={"name": "x", "head_sha": sc.bad}).json()
    assert raw(sandbox, "PATCH", f"{r}/check-runs/{run['id']}", json={"conclusion": "nope"}).status_code == 422


EXERCISES = (
    test_seeded_repository_commits_and_pulls,
    test_compare_and_refs,
    test_push_then_open_pull_request_with_labels_and_reviewers,
    test_comments_reactions_and_timeline,
    test_statuses_check_runs_and_permissions,
    test_search_finds_followup_by_culprit_number,
    test_issues_of_a_repository_are_listed,
    test_bad_credentials_and_unknown_resources,
    test_faults_are_injected_on_rest_only,
    test_error_shapes_of_every_operation,
)


def test_contract_coverage(tmp_path, monkeypatch):
    """Every served operation is exercised by the tests above with a valid success and its 404/422 shapes.
    They run again here, in order, on a sandbox of this test's own: the check stands alone."""
    with seeded_sandbox(tmp_path) as own:
        checker = own["checker"]
        install_recorder(monkeypatch, checker)
        for exercise in EXERCISES:
            exercise(own)
    assert not checker.failures(), [f"{e.method} {e.url} -> {e.status}: {e.error}" for e in checker.failures()]
    covered = checker.covered()
    assert len(covered) >= 10, covered
    for name, statuses in sorted(covered.items()):
        print(f"{name:55s} {sorted(statuses)}")
    print(f"{len(checker.exchanges)} exchanges validated")
    missing = []
    for op in operations(load_spec()):
        statuses = covered.get(op.id, set())
        if not any(s < 300 for s in statuses):
            missing.append(f"{op.id}: no success")
        for code in (404, 422):
            if str(code) in op.statuses and code not in statuses:
                missing.append(f"{op.id}: no {code}")
    assert not missing, missing


def test_standalone_module_serves_a_scenario(tmp_path):
    """`python -m sandbox --scenario DIR --port P` seeds the scenario and serves it."""
    import sys

    scenario = build(tmp_path / "scenario", commits=8, seed=2)
    # a port number, not a bound socket: `python -m sandbox` runs in another process and takes --port
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "sandbox",
            "--scenario",
            str(tmp_path / "scenario"),
            "--port",
            str(port),
            "--root",
            str(tmp_path / "github"),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 180  # a process start: imports alone took over 30 s on a loaded 2-core machine
        while True:
            try:
                r = requests.get(
                    f"http://127.0.0.1:{port}/repos/{scenario.repo_slug}/commits/{scenario.bad}",
                    headers={"Authorization": "Bearer sandbox-token-sandbox-maintainer"},
                    timeout=5,
                )
                break
            except requests.ConnectionError:
                assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read().decode()
                time.sleep(0.2)
        assert r.status_code == 200 and r.json()["sha"] == scenario.bad
    finally:
        proc.terminate()
        proc.wait(timeout=10)
