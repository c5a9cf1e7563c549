"""The PyGithub the bot runs on has every method and parameter the bot calls, and pyproject's pin admits no
PyGithub without them.

The floor: `return_run_details` of Workflow.create_dispatch (GitHub's 2026-02-19 dispatch that answers the run's id,
PyGithub PR #3471) first shipped in PyGithub 2.10.0; 2.9.1 and older lack it (read in each release's wheel:
github/Workflow.py). `get_collaborator_role_name` arrived in 2.7.0. A release without one of these fails here,
by name, instead of in the middle of a bisection."""

from __future__ import annotations

import importlib
import inspect
import re
import tomllib
from importlib.metadata import version

import pytest
from packaging.version import Version

from tests.support import ROOT

FLOOR = Version("2.10.0")

# (class, method, the parameters the bot passes by name): every call of bot/ on a PyGithub object
USED = [
    (
        "MainClass:Github",
        "__init__",
        ["base_url", "auth", "retry", "timeout", "seconds_between_requests", "seconds_between_writes"],
    ),
    ("MainClass:Github", "get_repo", []),
    ("MainClass:Github", "search_issues", []),
    ("GithubIntegration:GithubIntegration", "__init__", ["auth", "base_url", "retry", "timeout"]),
    ("GithubIntegration:GithubIntegration", "get_repo_installation", []),
    ("GithubRetry:GithubRetry", "__init__", ["secondary_rate_wait"]),
    ("Auth:AppAuth", "get_installation_auth", []),
    ("Repository:Repository", "get_collaborator_role_name", []),
    ("Repository:Repository", "get_commit", []),
    ("Repository:Repository", "get_pull", []),
    ("Repository:Repository", "get_pulls", ["state", "head", "sort", "direction"]),
    ("Repository:Repository", "get_issue", []),
    ("Repository:Repository", "get_issues", ["state", "sort", "direction"]),
    ("Repository:Repository", "create_pull", ["base", "head", "title", "body", "draft"]),
    ("Repository:Repository", "create_issue", ["title", "body"]),
    ("Repository:Repository", "get_workflow", []),
    ("Repository:Repository", "get_workflow_run", []),
    ("Commit:Commit", "get_pulls", []),
    ("Issue:Issue", "add_to_labels", []),
    ("Issue:Issue", "get_comments", []),
    ("Issue:Issue", "create_comment", []),
    ("Issue:Issue", "get_comment", []),
    ("Issue:Issue", "get_timeline", []),
    ("IssueComment:IssueComment", "edit", []),
    ("IssueComment:IssueComment", "create_reaction", []),
    ("PullRequest:PullRequest", "create_review_request", ["reviewers"]),
    ("Workflow:Workflow", "create_dispatch", ["ref", "inputs", "throw", "return_run_details"]),
    ("Workflow:Workflow", "get_runs", ["branch", "event", "created"]),
    ("WorkflowRun:WorkflowRun", "jobs", []),
    ("WorkflowRun:WorkflowRun", "get_artifacts", []),
    ("WorkflowRun:WorkflowRun", "cancel", []),
    ("GithubObject:CompletableGithubObject", "update", []),
    ("Requester:Requester", "requestJson", ["headers"]),
    ("Requester:Requester", "createException", []),
    ("Requester:Requester", "injectConnectionClasses", []),
]
PROPERTIES = [
    ("MainClass:Github", "requester"),
    ("Repository:Repository", "requester"),
    ("WorkflowRun:WorkflowRun", "display_title"),
    ("Auth:AppInstallationAuth", "token"),
]


def resolve(where: str):
    """`module:Class` of the installed PyGithub, or a failure naming what it lacks."""
    module, _, name = where.partition(":")
    try:
        found = getattr(importlib.import_module(f"github.{module}"), name, None)
    except ImportError:
        found = None
    if found is None:
        pytest.fail(f"PyGithub {version('PyGithub')} has no github.{module}.{name}")
    return found


@pytest.mark.parametrize(("where", "name", "params"), USED, ids=[f"{w.split(':')[1]}.{n}" for w, n, _ in USED])
def test_the_installed_pygithub_has_each_method_the_bot_calls(where, name, params):
    cls = resolve(where)
    method = getattr(cls, name, None)
    assert callable(method), f"PyGithub {version('PyGithub')} has no {cls.__name__}.{name}"
    accepted = inspect.signature(method).parameters
    missing = [p for p in params if p not in accepted]
    assert not missing, f"PyGithub {version('PyGithub')}: {cls.__name__}.{name} takes no {missing}"


@pytest.mark.parametrize(("where", "name"), PROPERTIES, ids=[f"{w.split(':')[1]}.{n}" for w, n in PROPERTIES])
def test_the_installed_pygithub_has_each_attribute_the_bot_reads(where, name):
    cls = resolve(where)
    assert isinstance(inspect.getattr_static(cls, name, None), property), f"{cls.__name__}.{name}"


def test_the_call_counter_finds_the_connection_classes_it_wraps():
    resolve("Requester:HTTPRequestsConnectionClass")  # bot.observability.github_api counts through them
    resolve("Requester:HTTPSRequestsConnectionClass")


def test_the_pin_admits_no_pygithub_without_them():
    dependencies = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    pin = next(d for d in dependencies if re.match(r"(?i)pygithub\b", d))
    floor = re.search(r">=\s*([0-9][0-9.]*)", pin)
    assert floor and Version(floor.group(1)) >= FLOOR, f"{pin!r} admits a PyGithub without return_run_details"
    assert Version(version("PyGithub")) >= FLOOR
