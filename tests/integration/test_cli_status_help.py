"""Issue 24 through the real CLI: `status` readable at 80 columns (piped too), with --full and --json; every
command's help in words at 80 columns; `sandbox` and `check-policy` errors as one line each."""

import json
import re

import pytest

from scenarios.synthetic import build
from tests.support.cli import bisect_args
from tests.support.policies import MINIMAL

COLUMNS_80 = {"COLUMNS": "80"}
HEX40 = re.compile(r"\b[0-9a-f]{40}\b")


def lines_fit(text: str, width: int = 80) -> None:
    long = [line for line in text.splitlines() if len(line) > width]
    assert not long, long
    assert "…" not in text  # nothing cut short


@pytest.fixture
def bisected(tmp_path, cli):
    """One finished bisection of a repository whose name is too long for its column at 80 columns."""
    repo = build(tmp_path / "a-repository-whose-name-is-far-too-long-for-the-status-table", 12, 5)
    r = cli(*bisect_args(repo, "--workers", "2"))
    assert r.code == 0, r.stderr
    return repo, r.json


# --- status -------------------------------------------------------------------------------------------------


def test_status_list_fits_80_columns_piped_with_whole_short_shas(bisected, cli):
    repo, _ = bisected
    r = cli("status", env=COLUMNS_80)
    assert r.code == 0, r.stderr
    lines_fit(r.stdout)
    assert re.search(rf"^\s*1\s.*\bfound\b.*\b{repo.culprit[:12]}\b", r.stdout, re.M), r.stdout
    assert not HEX40.search(r.stdout)  # short SHAs unless --full
    wide = cli("status")  # no $COLUMNS in a pipe: rows on one line each, the range shown too
    assert wide.code == 0 and f"{repo.good[:12]}..{repo.bad[:12]}" in wide.stdout, wide.stdout


def test_status_of_one_fits_80_columns_with_every_step_sha_whole(bisected, cli):
    repo, report = bisected
    r = cli("status", "1", env=COLUMNS_80)
    assert r.code == 0, r.stderr
    lines_fit(r.stdout)
    assert f"good     {repo.good[:12]}" in r.stdout and f"bad      {repo.bad[:12]}" in r.stdout
    assert f"culprit  {repo.culprit[:12]}" in r.stdout
    for step in report["steps"]:
        assert re.search(rf"\b{step['sha'][:12]}\b", r.stdout), step
    assert "calibrate" in r.stdout and "confirm" in r.stdout


def test_status_full_shows_full_shas_never_cut(bisected, cli):
    repo, report = bisected
    listing = cli("status", "--full", env=COLUMNS_80)
    assert listing.code == 0, listing.stderr
    assert f"{repo.good}..{repo.bad}" in listing.stdout and repo.culprit in listing.stdout
    assert "…" not in listing.stdout
    detail = cli("status", "1", "--full", env=COLUMNS_80)
    assert detail.code == 0, detail.stderr
    assert f"good     {repo.good}" in detail.stdout and f"culprit  {repo.culprit}" in detail.stdout
    assert {s["sha"] for s in report["steps"]} <= set(HEX40.findall(detail.stdout))
    assert "…" not in detail.stdout


def test_status_json_lists_bisections_and_names_the_culprit(bisected, cli):
    repo, report = bisected
    r = cli("status", "--json", env=COLUMNS_80)
    assert r.code == 0, r.stderr
    listed = json.loads(r.stdout)
    assert isinstance(listed, list) and len(listed) == 1
    (one,) = listed
    assert one["id"] == 1 and one["status"] == "found" and one["culprit"] == repo.culprit
    assert (one["good"], one["bad"], one["repo"]) == (repo.good, repo.bad, str(repo.path))
    assert one["runs"] == report["runs"]
    assert one["created_at"] and one["finished_at"] and one["created_at"] <= one["finished_at"]
    detail = json.loads(cli("status", "1", "--json").stdout)
    assert isinstance(detail, dict) and detail["culprit"] == repo.culprit and detail["status"] == "found"
    assert [s["sha"] for s in detail["steps"]] == [s["sha"] for s in report["steps"]]
    assert all(HEX40.fullmatch(s["sha"]) for s in detail["steps"])


@pytest.mark.parametrize("extra", [[], ["--json"], ["--full"]])
def test_status_of_an_unknown_id_is_one_line_exit_2(bisected, cli, extra):
    r = cli("status", "99", *extra)
    assert r.code == 2
    assert r.stderr.splitlines() == [
        "revert-bisect: error: no bisection #99 in this store; `revert-bisect status` lists them"
    ]
    assert r.stdout == "" and "Traceback" not in r.stderr


def test_status_of_an_empty_store_says_so(cli):
    r = cli("status")
    assert r.code == 0 and r.stdout.strip() == "no bisections in this store yet: `revert-bisect bisect` starts one"
    r = cli("status", "--json")
    assert r.code == 0 and json.loads(r.stdout) == []


# --- help ---------------------------------------------------------------------------------------------------

COMMANDS = ["bisect", "status", "revert", "serve", "check-policy", "step-plan", "demo", "sandbox"]
TYPE_PLACEHOLDER = re.compile(r"<(?:list\[|int|float|str|path|bool|text)[^>]*>|\{|\[str\]|\[Path\]", re.I)


def placeholders(help_text: str) -> list[str]:
    """The usage line and the term column of the Arguments and Options sections (the options and arguments as
    shown, not their descriptions, which may quote JSON such as `{"metric": <float>}`)."""
    usage, _, rest = help_text.partition("\n\n")
    terms, section = [], None
    for line in rest.splitlines():
        if not line.strip():
            section = None  # a section ends at a blank line (the epilog follows one)
        elif not line.startswith(" "):
            section = line.strip()
        elif section in ("Arguments:", "Options:", "options:") and re.match(r"^  \S", line):
            terms.append(re.split(r"\s{2,}", line.strip())[0])
    return [usage, *terms]


@pytest.mark.parametrize("name", COMMANDS)
def test_help_reads_as_words_at_80_columns(name, cli):
    r = cli(name, "--help", env=COLUMNS_80)
    assert r.code == 0, r.stderr
    assert r.stdout.startswith(f"Usage: revert-bisect {name} "), r.stdout.splitlines()[0]
    long = [line for line in r.stdout.splitlines() if len(line) > 80]
    assert not long, long
    assert "<list[" not in r.stdout and "[str]" not in r.stdout
    shown = placeholders(r.stdout)
    assert len(shown) > 2, r.stdout  # the usage and at least --help and one more
    artefacts = [text for text in shown if TYPE_PLACEHOLDER.search(text)]
    assert not artefacts, artefacts


def test_help_placeholders_say_what_to_pass(cli):
    def help_of(name):
        return cli(name, "--help", env=COLUMNS_80).stdout

    assert re.search(r"^Usage: revert-bisect check-policy \[OPTIONS\] PATH\.\.\.$", help_of("check-policy"), re.M)
    assert re.search(r"^  PATH\.\.\.\s+Policy files", help_of("check-policy"), re.M)
    assert re.search(r"^  COMMAND\.\.\.\s+The test command", help_of("bisect"), re.M)
    status = help_of("status")
    assert re.search(r"^Usage: revert-bisect status \[OPTIONS\] \[ID\]$", status, re.M)
    for term in ("ID", "--db URL", "--limit N", "--full", "--json"):
        assert re.search(rf"^  {re.escape(term)}\s{{2,}}\S", status, re.M), term
    plan = help_of("step-plan")
    for term in ("--policy FILE", "--test ID", "--sha REV", "--case CASE", "--bad REV"):
        assert re.search(rf"^  {re.escape(term)}\s{{2,}}\S", plan, re.M), term
    assert re.search(r"^  --db URL\s{2,}SQLAlchemy", help_of("serve"), re.M)


# --- sandbox ------------------------------------------------------------------------------------------------


def test_sandbox_help_names_revert_bisect_and_explains_every_option(cli):
    r = cli("sandbox", "--help", env=COLUMNS_80)
    assert r.code == 0, r.stderr
    assert r.stdout.startswith("Usage: revert-bisect sandbox --scenario DIR ")
    assert "python -m sandbox" not in r.stdout
    terms = ("--scenario DIR", "--port PORT", "--host HOST", "--root DIR", "--hook URL", "--hook-secret SECRET")
    for term in (*terms, "--search-lag SECONDS"):
        assert re.search(rf"^  {re.escape(term)}\s+\S", r.stdout, re.M), term  # help on the same line
    assert "(default: 8765)" in r.stdout and "(default: 127.0.0.1)" in r.stdout and "(default: 5.0)" in r.stdout


def test_sandbox_with_a_search_lag_out_of_range_is_one_line(cli, tmp_path):
    one_error_line(cli("sandbox", "--search-lag", "-1", timeout=60), "--search-lag", "-1 is not within 0 to 3600")
    one_error_line(cli("sandbox", "--search-lag", "soon", timeout=60), "'soon' is not a number of seconds")


def one_error_line(r, *words):
    assert r.code == 2, (r.code, r.stderr)
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("revert-bisect sandbox: error: "), r.stderr
    assert "Traceback" not in r.stderr and r.stdout == ""
    for word in words:
        assert word in lines[0], (word, lines[0])
    return lines[0]


def test_sandbox_without_a_scenario_is_one_line_naming_it(cli):
    one_error_line(
        cli("sandbox", "--port", "1", timeout=60),
        "missing --scenario DIR",
        "python -m scenarios.mamba_track_boundary build DIR",
    )


def test_sandbox_with_an_unreadable_scenario_is_one_line(cli, tmp_path):
    one_error_line(cli("sandbox", "--scenario", str(tmp_path / "nowhere"), timeout=60), "no such directory")
    empty = tmp_path / "empty"
    empty.mkdir()
    one_error_line(cli("sandbox", "--scenario", str(empty), timeout=60), str(empty), "no scenario.json")
    (empty / "scenario.json").write_text("{not json")
    one_error_line(cli("sandbox", "--scenario", str(empty), timeout=60), "scenario.json is not valid JSON")
    (empty / "scenario.json").write_text(json.dumps({"repo_slug": "acme/x", "repo": "repo"}))
    one_error_line(cli("sandbox", "--scenario", str(empty), timeout=60), "(repo) does not exist")
    (empty / "scenario.json").unlink()
    (empty / "scenario.json").mkdir()  # unreadable: a directory of that name
    one_error_line(cli("sandbox", "--scenario", str(empty), timeout=60), "cannot read scenario.json")


def test_sandbox_bad_port_or_option_is_one_line(cli, tmp_path):
    one_error_line(cli("sandbox", "--scenario", str(tmp_path), "--port", "99999", timeout=60), "--port", "99999")
    one_error_line(cli("sandbox", "--bogus", timeout=60), "--bogus", "revert-bisect sandbox --help")


# --- check-policy -------------------------------------------------------------------------------------------


def test_check_policy_names_the_bad_file_in_a_directory(cli, tmp_path):
    policies = tmp_path / "policies"
    policies.mkdir()
    (policies / "good.yaml").write_text(MINIMAL)
    (policies / "other.yaml").write_text(MINIMAL.replace("acme/engine", "acme/other") + "revert:\n  daly_cap: 5\n")
    r = cli("check-policy", str(policies))
    assert r.code == 2 and "Traceback" not in r.stderr
    assert r.stderr.splitlines() == [f"{policies / 'other.yaml'}:9: revert.daly_cap: unknown key"]
    assert r.stdout.splitlines() == [f"{policies / 'good.yaml'}: ok: acme/engine, 1 test(s), mode active"]
    # a second policy for acme/engine may be, but not one that declares the same test and watches the same workflow:
    # each named at the second file's line, with the first file's
    (policies / "other.yaml").write_text(MINIMAL)
    r = cli("check-policy", str(policies))
    assert r.code == 2
    good, other = policies / "good.yaml", policies / "other.yaml"
    assert r.stderr.splitlines() == [
        f"{other}:5: tests[0].id: test id kl is declared by two policies of acme/engine: a test id names one test in "
        f"its repository (also {good}:5)",
        f"{other}:3: watch[0].workflow: Nightly (schedule on main) is watched by two policies of acme/engine: a red "
        f"run is read by one policy; put that workflow's tests in one policy (each test reads its own `metrics`) "
        f"(also {good}:3)",
    ]


@pytest.mark.parametrize(
    "text, line",
    [
        # an unclosed bracket, noticed only three lines further down
        ("repository: acme/engine\nwatch:\n  - workflow: [Nightly\n\n# the nightly\ntests: []\n", 3),
        ('repository: "acme/engine\nwatch: []\n\ntests: []\n', 1),  # an unclosed quote
        ("repository: acme/engine\nwatch: {workflow: Nightly\n\ntests: []\n", 2),  # an unclosed brace
        ("repository: acme/engine\nwatch\n\ntests: []\n", 2),  # a key with no colon
        ("repository: acme/engine\nwatch:\n  - workflow: Nightly\n   bad: indent\ntests: []\n", 4),
        ("repository: acme/engine\n\ttests: []\n", 2),  # a tab
        ("repository: acme/engine\nwatch: a: b\n", 2),
    ],
)
def test_check_policy_places_a_yaml_syntax_error_on_its_line(cli, tmp_path, text, line):
    policies = tmp_path / "policies"
    policies.mkdir()
    (policies / "broken.yaml").write_text(text)
    for target in (policies / "broken.yaml", policies):
        r = cli("check-policy", str(target))
        assert r.code == 2 and "Traceback" not in r.stderr
        (problem,) = r.stderr.splitlines()
        assert problem.startswith(f"{policies / 'broken.yaml'}:{line}: not valid YAML: "), problem
