"""`revert-bisect bisect` as a drop-in for `git bisect run` (issue 24): a test script kept untracked in the clone,
outputs checked before the first run, every outcome naming its real cause and the log that shows it, and
`--resume` keeping the outputs it was started with. Through the real CLI, on real git."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from tests.support.cli import bisect_args, interrupted, no_traceback

LOG = re.compile(r"its log: (\S+/test\.log)")


def one_line_error(r, *words: str) -> None:
    assert r.code == 2, r.stderr
    no_traceback(r)
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    line = r.stderr.strip()
    assert line.startswith("revert-bisect: error: "), line
    for word in words:
        assert word in line, line


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout.strip()


def untracked_script(repo) -> Path:
    """The user's ./test.sh, beside the code, untracked: it reads the tree it runs in (its working directory)."""
    script = repo.path / "test.sh"
    script.write_text('#!/bin/sh\nif grep -q "BROKEN = True" service/config.py; then exit 1; fi\nexit 0\n')
    script.chmod(0o755)
    return script


def logged(stderr: str) -> Path:
    found = LOG.search(stderr)
    assert found, stderr
    path = Path(found.group(1))
    assert path.is_file(), path
    return path


# -- 1. an untracked test script -------------------------------------------------------------------------------


def test_an_untracked_script_in_the_clone_runs_from_the_checkout_in_each_worktree(synth, cli):
    repo = synth(12, 5)
    script = untracked_script(repo)
    assert git(repo.path, "ls-files", "test.sh") == ""  # not in any tested commit
    r = cli(*bisect_args(repo, "--workers", "2", command=["./test.sh"]))
    no_traceback(r)
    assert r.code == 0, r.stderr
    assert r.json["culprit"] == repo.culprit and repo.culprit in r.stdout
    assert (
        f"./test.sh is not in the tested commits: running {script} from your checkout, in each commit's worktree"
        in r.stderr.splitlines()
    )


def test_a_script_in_the_tested_commits_is_each_commits_own(tmp_path, cli):
    repo = tmp_path / "tracked"
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / "test.sh").write_text("#!/bin/sh\nexit 0\n")
    (repo / "test.sh").chmod(0o755)
    git(repo, "add", "test.sh")
    git(repo, "commit", "-qm", "good")
    good = git(repo, "rev-parse", "HEAD")
    (repo / "test.sh").write_text("#!/bin/sh\nexit 1\n")  # the commit under test's own copy decides
    git(repo, "commit", "-qam", "breaks it")
    r = cli("bisect", "--repo", str(repo), "--good", good, "--bad", "HEAD", "--", "./test.sh")
    no_traceback(r)
    assert r.code == 0, r.stderr
    assert "./test.sh is in the tested commits: running each commit's own copy, in its worktree" in r.stderr
    assert r.json["culprit"] == git(repo, "rev-parse", "HEAD")


def test_a_relative_command_neither_in_the_commits_nor_the_checkout_is_one_line_and_nothing_runs(synth, cli):
    repo = synth(6, 3)
    r = cli(*bisect_args(repo, command=["./nowhere.sh"]))
    one_line_error(r, "'./nowhere.sh' does not exist", f"BAD {repo.bad[:12]} does not have it", str(repo.path))
    assert r.json is None


def test_a_command_that_cannot_run_at_any_commit_says_so_with_its_log_and_exit_11(synth, cli):
    repo = synth(8, 4)
    script = repo.path / "test.sh"  # untracked, but its interpreter does not exist: exit 127 everywhere
    script.write_text("#!/nonexistent/interpreter\nexit 0\n")
    script.chmod(0o755)
    r = cli(*bisect_args(repo, "--workers", "2", command=["./test.sh"]))
    no_traceback(r)
    assert r.code == 11, r.stderr
    message = f"the command could not be run at any commit: exited 127 (cannot run '{script}': No such file"
    assert message in r.stderr, r.stderr
    assert "good_fails" not in r.stderr and "older --good" not in r.stderr and "GOOD fails" not in r.stderr
    assert "not run: the command could not be run at any commit (exit 127); " in r.stderr
    log = logged(r.stderr.split("the command could not be run at any commit")[1])
    assert "cannot run" in log.read_text()
    assert r.json["status"] == "untestable" and r.json["reason"] == "command_not_run"
    assert r.json["message"].startswith("the command could not be run at any commit: exited 127")
    assert "bisect --help" not in r.json["message"] and "--bad revision" in r.json["message"]


def test_a_command_only_good_lacks_makes_good_untestable_not_failing(tmp_path, cli):
    repo = tmp_path / "late-script"
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / "README").write_text("x\n")
    git(repo, "add", "README")
    git(repo, "commit", "-qm", "before the script")
    good = git(repo, "rev-parse", "HEAD")
    (repo / "test.sh").write_text("#!/bin/sh\nexit 1\n")
    (repo / "test.sh").chmod(0o755)
    git(repo, "add", "test.sh")
    git(repo, "commit", "-qm", "the script")
    r = cli("bisect", "--repo", str(repo), "--good", good, "--bad", "HEAD", "--", "./test.sh")
    no_traceback(r)
    assert r.code == 7, r.stderr
    assert f"./test.sh is in BAD {git(repo, 'rev-parse', 'HEAD')[:12]} but not in GOOD {good[:12]}" in r.stderr
    assert f"the GOOD endpoint {good[:12]} could not run the command: exited 127 (cannot run './test.sh'" in r.stderr
    assert "pick a GOOD revision the test can run on (--good)" in r.stderr and "older --good" not in r.stderr
    logged(r.stderr)


# -- 2. outputs checked first, causes named --------------------------------------------------------------------


def test_an_unwritable_json_log_or_workdir_is_one_line_before_anything_runs(synth, cli, tmp_path):
    repo = synth(6, 3)
    runs = tmp_path / "runs"
    probe = tmp_path / "probe.sh"
    probe.write_text(f'#!/bin/sh\necho ran >> "{runs}"\nexit 0\n')
    probe.chmod(0o755)
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    db = tmp_path / "store.db"
    cases = [
        (["--json", str(tmp_path / "missing" / "out.json")], ["--json", "the directory", "missing", "does not exist"]),
        (["--log", str(a_file / "bisect.log")], ["--log", str(a_file / "bisect.log"), "not a directory"]),
        (["--json", str(tmp_path)], ["--json", "is a directory"]),
        (["--workdir", str(a_file / "w")], ["--workdir", f"{a_file} is a file, not a directory"]),
    ]
    for flags, words in cases:
        r = cli(*bisect_args(repo, "--db", f"sqlite:///{db}", *flags, command=[str(probe)]))
        one_line_error(r, *words)
    assert not runs.exists()  # nothing ran
    assert not db.exists()  # nothing stored
    assert not (tmp_path / "missing").exists() and not list(tmp_path.glob("*.json"))


def test_a_metric_regex_that_never_matches_is_named_not_exit_125(synth, cli):
    repo = synth(8, 4)
    r = cli(*bisect_args(repo, "--metric-regex", r"no_such_metric=(?P<value>[0-9.]+)"))
    no_traceback(r)
    assert r.code == 7, r.stderr
    # what was expected and what came: the regex, and the output's last line
    assert "no metric: --metric-regex 'no_such_metric=(?P<value>[0-9.]+)' matched nothing in the output" in r.stderr
    assert "its last line: 'Test Summary: 1/1 passed'" in r.stderr
    assert "exited 125" not in r.stderr
    assert "check --metric-regex" in r.stderr
    assert "avg_kl_div=" in logged(r.stderr).read_text()  # the log shows what the test did print
    assert r.json["reason"] == "metric_missing"


def test_a_timeout_too_short_says_timeout_and_points_to_the_log(synth, cli, tmp_path):
    repo = synth(6, 3)
    slow = tmp_path / "slow.sh"
    slow.write_text("#!/bin/sh\necho starting\nsleep 30\n")
    slow.chmod(0o755)
    r = cli(*bisect_args(repo, "--timeout", "0.5", command=[str(slow)]))
    no_traceback(r)
    assert r.code == 7, r.stderr
    assert "killed at the timeout after 0.5 s" in r.stderr
    assert "raise --timeout" in r.stderr
    assert "starting" in logged(r.stderr).read_text()
    assert r.json["reason"] == "timed_out"


def test_each_failed_run_and_good_fails_point_to_their_own_logs(synth, cli, tmp_path):
    repo = synth(6, 3)
    failing = tmp_path / "fail.sh"
    failing.write_text('#!/bin/sh\necho "failing at $REVERT_BISECT_SHA"\nexit 3\n')
    failing.chmod(0o755)
    r = cli(*bisect_args(repo, command=[str(failing)]))
    no_traceback(r)
    assert r.code == 5, r.stderr
    assert "GOOD's first run exited 3; its log: " in r.stderr and "pass an older --good" in r.stderr
    per_run = re.findall(r"^ +([0-9a-f]{12}) exited 3; its log: (\S+)$", r.stderr, re.M)
    assert len(per_run) == r.json["runs"] and len({log for _, log in per_run}) == len(per_run)
    for sha, log in per_run:
        assert f"failing at {sha}" in Path(log).read_text()


# -- 3. --resume keeps the outputs -----------------------------------------------------------------------------


def _interrupted(repo, tmp_path, *flags: str) -> str:
    """A bisection started with `flags`, interrupted (Ctrl-C) after its first finished run: its store's URL."""
    db = f"sqlite:///{tmp_path / 'resume.db'}"
    argv = ["bisect", "--db", db, *flags]
    argv += ["--repo", str(repo.path), "--good", repo.good, "--bad", repo.bad, "--", *repo.command()]
    proc = interrupted(db, argv, after=1, hold=tmp_path / "hold")
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    return db


def test_resume_writes_the_json_and_log_given_at_the_start(synth, tmp_path):
    repo = synth(12, 7, sleep=0.5)
    out, log = tmp_path / "out.json", tmp_path / "bisect.log"
    db = _interrupted(repo, tmp_path, "--json", str(out), "--log", str(log))
    assert not out.exists() and not log.exists()
    resumed = subprocess.run(
        [sys.executable, "-m", "bot.cli.main", "bisect", "--db", db, "--resume", "1"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert resumed.returncode == 0, resumed.stderr
    assert "Traceback" not in resumed.stderr
    assert json.loads(out.read_text())["culprit"] == repo.culprit
    assert f"# first bad commit: [{repo.culprit}]" in log.read_text()


def test_resume_with_a_command_or_flags_that_do_not_apply_names_them(synth, cli, tmp_path):
    repo = synth(12, 7, sleep=0.5)
    db = _interrupted(repo, tmp_path)
    r = cli("bisect", "--db", db, "--resume", "1", "--good", repo.good, "--workers", "3", "--", "./other.sh")
    one_line_error(r, "--resume 1", "COMMAND, --good and --workers do not apply", "only --json, --log and --db")
    r = cli("bisect", "--db", db, "--resume", "1", "--json", str(tmp_path / "nowhere" / "x.json"))
    one_line_error(r, "cannot write --json", "does not exist")
    other = tmp_path / "other.json"  # given on --resume, it replaces the stored one
    r = cli("bisect", "--db", db, "--resume", "1", "--json", str(other))
    no_traceback(r)
    assert r.code == 0, r.stderr
    assert json.loads(other.read_text())["culprit"] == repo.culprit


def test_an_untracked_script_given_to_an_interpreter_runs_from_the_checkout_too(synth, cli):
    """`git bisect run sh test.sh`: the script is the user's, the tree each run reads is the commit's."""
    repo = synth(12, 5)
    script = untracked_script(repo)
    r = cli(*bisect_args(repo, "--workers", "2", command=["sh", "test.sh"]))
    no_traceback(r)
    assert r.code == 0 and r.json["culprit"] == repo.culprit, r.stderr
    assert f"test.sh is not in the tested commits: passing {script} from your checkout, to each run" in r.stderr


def test_a_metric_that_is_not_a_number_or_a_result_file_never_written_is_named(synth, cli):
    repo = synth(8, 4)
    r = cli(*bisect_args(repo, "--metric-regex", r"(?P<value>avg_kl_div)="))
    no_traceback(r)
    assert r.code == 7, r.stderr
    assert "matched 'avg_kl_div=', whose value is not a finite number" in r.stderr
    assert r.json["reason"] == "metric_missing" and r.json["culprit"] is None
    r = cli(*bisect_args(repo, "--metric-file"))
    no_traceback(r)
    assert r.code == 7, r.stderr
    assert 'without writing {"metric": <number>} to $REVERT_BISECT_RESULT' in r.stderr
    assert r.json["reason"] == "metric_missing" and r.json["culprit"] is None
