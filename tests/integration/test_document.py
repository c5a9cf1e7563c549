"""One document of a bisection (issue 31, item 4): `bisect --json`, `status ID --json` and the dashboard's
`/api/bisections/{id}` give the one model bot.service.document.BisectionDocument (the API adds its page's fields),
and the three are equal where they overlap -- for a bisection of one test with its revert, and one of several tests.
Its schema is published as docs/bisection.schema.json, generated from the model."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from starlette.testclient import TestClient

from bot.app import create_app
from bot.service.document import schema_text
from bot.settings import BotSettings
from tests.support.cli import bisect_args

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = json.loads(schema_text())

# Two tests of a JUnit report broken by different commits (the culprit of the history flips service/config.py;
# commit 11 adds notes/change_11.txt), a third green throughout.
JUNIT = """#!/usr/bin/env python3
import os, pathlib, sys
tree = pathlib.Path.cwd()
failed = {
    "tests.A.test_config": "BROKEN = True" in (tree / "service" / "config.py").read_text(),
    "tests.B.test_notes": (tree / "notes" / "change_11.txt").exists(),
    "tests.C.test_green": False,
}
cases = "".join(
    f'<testcase classname="{t.rsplit(".", 1)[0]}" name="{t.rsplit(".", 1)[1]}">'
    + ("<failure>assert</failure>" if bad else "") + "</testcase>"
    for t, bad in failed.items()
)
pathlib.Path(os.environ["REVERT_BISECT_JUNIT"]).write_text(f"<testsuites><testsuite>{cases}</testsuite></testsuites>")
sys.exit(1 if any(failed.values()) else 0)
"""


def test_the_published_schema_is_the_models():
    published = (ROOT / "docs" / "bisection.schema.json").read_text()
    assert published == schema_text(), "regenerate it: python -m bot.service.document > docs/bisection.schema.json"
    assert set(SCHEMA["required"]) == set(SCHEMA["properties"])  # every field in every document, null if need be


def three_documents(cli, tmp_path, repo, *extra: str, command: list[str] | None = None) -> tuple[dict, dict, dict]:
    """The bisection run by the real CLI: its `--json`, `status ID --json` and the API's answer, from one store."""
    db = f"sqlite:///{tmp_path / 'store.db'}"
    run = cli(*bisect_args(repo, "--db", db, "--workers", "2", *extra, command=command))
    assert run.json is not None, run.stderr
    status = cli("status", str(run.json["id"]), "--db", db, "--json")
    assert status.code == 0, status.stderr
    app = create_app(BotSettings(webhook_secret="whsec-document-tests", db=db), handlers={})
    api = TestClient(app, client=("127.0.0.1", 50123)).get(f"/api/bisections/{run.json['id']}")
    assert api.status_code == 200, api.text
    return run.json, json.loads(status.stdout), api.json()


def messages(doc: dict) -> list[str | None]:
    return [doc["message"], *(t["message"] for t in doc["tests"])]


def assert_one_document(cli_json: dict, status: dict, api: dict) -> None:
    """Both CLI documents are the schema's, exactly; the API's holds them; all three agree on every field, the
    messages aside: the CLI words each remedy in its flags after the finding, the API gives the finding alone."""
    for doc in (cli_json, status, api):
        jsonschema.validate(doc, SCHEMA)
    assert set(cli_json) == set(status) == set(SCHEMA["properties"]) and set(SCHEMA["properties"]) <= set(api)
    assert cli_json == status
    differ = [key for key in SCHEMA["properties"] if cli_json[key] != api[key]]
    assert set(differ) <= {"message", "tests"}, differ
    without = lambda doc: [{**t, "message": None} for t in doc["tests"]]  # noqa: E731
    assert without(cli_json) == without(api)
    for said, finding in zip(messages(cli_json), messages(api)):
        assert said == finding or (finding and said.startswith(finding + "; ")), (said, finding)


def test_one_test_with_its_revert_is_one_document(synth, cli, tmp_path):
    repo = synth(16, 9)
    cli_json, status, api = three_documents(cli, tmp_path, repo, "--verify-revert")
    assert cli_json["status"] == "found" and cli_json["culprit"] == repo.culprit
    assert cli_json["culprit_subject"] == "Change 9 (#1009)" and cli_json["range_size"] == 16
    assert cli_json["revert"]["status"] == "made" and cli_json["revert"]["branch"].startswith("revert-bisect/")
    assert cli_json["ab"]["passed"] is True and cli_json["ab"]["steps"]
    (test,) = cli_json["tests"]  # a bisection of one test is a group of one: named by its command
    assert test["test"] == " ".join(repo.command()) and test["culprit"] == repo.culprit and test["outcome"] == "found"
    assert all(set(s["tests"]) == {test["test"]} for s in cli_json["steps"])
    assert cli_json["runs"] == sum(s["state"] in ("done", "lost") for s in cli_json["steps"]) == test["runs"]
    assert_one_document(cli_json, status, api)
    assert api["culprit_commit"]["sha"] == api["culprit"] and api["summary"]["culprit"] == api["culprit"]


@pytest.mark.parametrize("reason", ["not reproducible", "good fails"])
def test_an_outcome_with_a_remedy_is_one_document_worded_per_surface(synth, cli, tmp_path, reason):
    repo = synth(10, 99) if reason == "not reproducible" else synth(10, 4)
    command = None if reason == "not reproducible" else ["false"]
    cli_json, status, api = three_documents(cli, tmp_path, repo, command=command)
    assert cli_json["reason"] in ("bad_passes", "good_fails") and cli_json["culprit"] is None
    assert cli_json["message"] != api["message"] and cli_json["message"].startswith(api["message"] + "; ")
    assert "--" in cli_json["message"].removeprefix(api["message"])  # the remedy in the CLI's flags
    assert_one_document(cli_json, status, api)


def test_several_tests_are_one_document(synth, cli, tmp_path):
    repo = synth(24, 6)
    script = tmp_path / "junit.py"
    script.write_text(JUNIT)
    script.chmod(0o755)
    cli_json, status, api = three_documents(cli, tmp_path, repo, "--junit", "report.xml", command=[str(script)])
    by_test = {t["test"]: t for t in cli_json["tests"]}
    assert by_test["tests.A.test_config"]["culprit"] == repo.culprit
    assert by_test["tests.B.test_notes"]["culprit"] == repo.shas[10]  # change 11
    assert by_test["tests.C.test_green"]["culprit"] is None
    assert cli_json["status"] == "found" and cli_json["culprit"] is None  # two culprits: none is the bisection's
    carried = {t for s in cli_json["steps"] for t in s["tests"]}
    assert carried == set(by_test)
    assert_one_document(cli_json, status, api)
