"""What the README and the docs point a reader to exists: every relative link, every path of this repository
they name, every `revert-bisect` command they show (its `--help` answers), and the README's first commands
install extras that exist."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = [
    ROOT / "README.md",
    *sorted((ROOT / "docs").glob("*.md")),
    ROOT / "policies" / "README.md",
    ROOT / "deploy" / "README.md",
    ROOT / "bench" / "README.md",
]
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
CODE_SPAN = re.compile(r"`([^`\n]+)`")
FENCE = re.compile(r"^```[a-z]*\n(.*?)^```", re.M | re.S)
# paths of this repository: under one of its own top-level folders (other projects' paths -- SGLang's
# `python/sglang/...`, PyGithub's `github/...`, the scenario's `test/...` -- are named too, and are not here)
OURS = re.compile(r"^(?:bot|runners|sandbox|scenarios|tests|docs|policies|deploy|bench)/[\w./-]*\w$")
COMMAND = re.compile(r"(?:^|[\s`(])revert-bisect ([a-z][a-z-]+)\b")


def _code(text: str) -> list[str]:
    return [m.group(1) for m in FENCE.finditer(text)] + [m.group(1) for m in CODE_SPAN.finditer(text)]


@pytest.mark.parametrize("doc", DOCS, ids=[str(d.relative_to(ROOT)) for d in DOCS])
def test_every_link_and_path_a_document_names_exists(doc):
    text = doc.read_text()
    missing = [
        target
        for target in LINK.findall(text)
        if not target.startswith(("http:", "https:", "mailto:")) and not (doc.parent / target).exists()
    ]
    for span in _code(text):
        for word in re.split(r"[\s,;:()'\"=]+", span):
            word = word.rstrip(".")
            if OURS.match(word) and "*" not in word and "<" not in word and not (ROOT / word).exists():
                missing.append(word)
    assert not missing, f"{doc.relative_to(ROOT)} names what does not exist: {sorted(set(missing))}"


def _commands() -> set[str]:
    found = set()
    for doc in DOCS:
        for span in _code(doc.read_text()):
            found |= set(COMMAND.findall(span))
    return found


def test_every_command_the_docs_show_answers_its_help():
    commands = _commands()
    assert {"bisect", "demo", "status", "revert", "serve", "step-plan", "check-policy"} <= commands
    for command in sorted(commands):
        done = subprocess.run(
            [sys.executable, "-m", "bot.cli.main", command, "--help"], capture_output=True, text=True, timeout=60
        )
        answer = done.stdout.lower()
        assert done.returncode == 0 and "usage:" in answer, f"revert-bisect {command} --help: {done.stderr}"


def test_the_readmes_first_commands_install_extras_that_exist():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    head = (ROOT / "README.md").read_text().split("\n\n", 2)[1]
    named = re.findall(r"pip install -e '\.\[([\w,]+)\]'", head)
    assert named == ["demo", "test"], head  # the main job's, then the tests'
    for group in named:
        assert set(group.split(",")) <= set(extras), group
    assert "revert-bisect[demo]" in extras["test"]  # the tests run the demo
    ci = (ROOT / ".ci" / "run").read_text()
    # CI runs the README's command, as the README writes it
    readme_tests = re.search(r"&& (python -m pytest[^#\n]*?)\s*#", head)
    assert readme_tests, head
    assert "pip install --quiet -e '.[test]'" in ci and readme_tests.group(1) in ci, readme_tests.group(1)
    # what the README says .ci/run installs when a fresh machine lacks it: Debian's chromium and PostgreSQL
    assert "apt-get install -y chromium" in ci and "apt-get install -y postgresql" in ci
