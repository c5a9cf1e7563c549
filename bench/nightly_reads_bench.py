"""GitHub API requests of one nightly delivery: the nightly job (bot.ingress.jobs.nightly) on red scheduled runs of an
SGLang-shaped workflow in the sandbox, through the real GitHubForge, the requests counted by the sandbox's rate book.

The workflow is PR Test Base as SGLang builds it (tests/integration/test_nightly_attempts.py): a matrix of two suite
partitions printing run_suite's report, a job skipped on `schedule`, partition 0 failing an unrelated file in every
run; the policy watches two files of partition 1 (the KL test and its MTP sibling). The stories:

- red: the KL test fails; its history walks back past a run with the GPU jobs skipped to the last run it passed in;
- two red: both watched tests fail in one run: two histories over the same earlier runs;
- retried: run_suite's own retry failed the KL test again, delivered a minute after the run (scoped at once);
- re-run green: a re-run attempt passed the KL test (a flake), delivered after the grace;
- re-run red: a re-run attempt failed it again, delivered a minute after the first attempt (scoped at once).

Each side builds the same world in a process of its own (this tree's `bot`, or `--tree`'s), so the rows compare the
code, not the data:

    python bench/nightly_reads_bench.py                      # this tree
    python bench/nightly_reads_bench.py --tree ../baseline   # and another checkout, story by story
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.tables import table  # noqa: E402
from bench.trees import use_tree  # noqa: E402

MTP = "test/registered/models_e2e/test_qwen3_next_models_mtp.py"

SUITE = """
import json, os, sys
from tests.support.suite_logs import KL_TEST, File, kl_output, run_suite
sha, attempt, part = os.environ["GITHUB_SHA"], os.environ["GITHUB_RUN_ATTEMPT"], sys.argv[2]
plan = json.load(open(sys.argv[1])).get(sha, {})
if part == "0":
    files = [File("test/registered/models_e2e/test_glm4_moe_models.py", [False], ["score 0.61 < 0.62"])]
else:
    files = []
    for key, path in (("mtp", "%s"), ("kl", KL_TEST)):
        value = plan.get(key if attempt == "1" else key + "_rerun", plan.get(key))
        if value is not None:  # "retried": run_suite's own retry of the file, with the same reading
            files.append(File(path, [value <= 0.002] * (2 if plan.get("retried") else 1), kl_output(value)))
print("\\n".join(run_suite(files)))
sys.exit(0 if all(f.attempts[-1] for f in files) else 1)
"""

OK, BAD = 0.0004, 0.0066


def kind(path: str) -> str:
    """A request's kind, by its REST path."""
    parts = path.split("/actions/", 1)[-1].split("/")
    if parts[0] == "jobs":
        return "job logs"
    if parts[0] == "workflows":
        return "runs lists"
    if parts[-1] == "jobs":
        return "jobs lists"
    if parts[-1] == "artifacts" or "artifacts" in parts:
        return "artifacts"
    if parts[0] == "runs":
        return "run"
    return "other"


def side(tree: str | None) -> dict:
    """Every story's requests on one side: {story: {kind: count}}."""
    use_tree(tree)
    import requests

    from bot.adapters.github.forge import GitHubForge, connect
    from bot.adapters.store.deliveries import ClaimedJob
    from bot.domain.patience import NotYet
    from bot.domain.scope import run_info
    from bot.ingress.jobs.nightly import NightlyJob
    from sandbox import SandboxState, run_in_thread, seed_from_scenario
    from scenarios.mamba_track_boundary import build
    from tests.integration.test_nightly_attempts import GPU_JOB, PR_TEST, WORKFLOW, policy_for

    tmp = Path(tempfile.mkdtemp(prefix="nightly-reads-"))
    build(tmp / "scenario", commits=14, seed=2)
    clone = tmp / "scenario" / json.loads((tmp / "scenario" / "scenario.json").read_text())["repo"]
    git = ["git", "-C", str(clone)]
    shas = subprocess.run([*git, "rev-list", "--first-parent", "--reverse", "main"], capture_output=True, text=True)
    sha = shas.stdout.split()
    plan, suite = tmp / "plan.json", tmp / "suite.py"
    suite.write_text(SUITE % MTP)
    (clone / WORKFLOW).parent.mkdir(parents=True, exist_ok=True)
    (clone / WORKFLOW).write_text(PR_TEST.format(gpu=GPU_JOB, python=sys.executable, suite=suite, plan=plan, root=ROOT))
    subprocess.run([*git, "add", WORKFLOW], check=True)
    subprocess.run([*git, "-c", "user.name=ci", "-c", "user.email=ci@invalid", "commit", "-qm", "ci"], check=True)
    state = SandboxState(tmp / "github")
    seeded = seed_from_scenario(state, tmp / "scenario")
    base, stop = run_in_thread(state)
    repo, token = seeded.repo, seeded.tokens[seeded.maintainer]
    kl = policy_for(repo)  # the KL test of partition 1, re-runs waited for 30 minutes; and its MTP sibling
    mtp = kl.tests[0].model_copy(update={"id": "mtp", "match": r"(?:^|/)test_qwen3_next_models_mtp\.py$"})
    policy = kl.model_copy(update={"tests": [*kl.tests, mtp]})
    try:
        from bot.domain.repo_policies import RepoPolicies  # a repository's several policies, where the tree has them

        policies = {repo: RepoPolicies.one(policy)}
    except ImportError:
        policies = {repo: policy}
    plan.write_text(
        json.dumps(
            {
                sha[1]: {"kl": OK, "mtp": OK},
                sha[2]: {"kl": OK, "mtp": OK},
                sha[4]: {"kl": 0.0061, "mtp": OK},
                sha[5]: {"kl": BAD, "mtp": OK},  # red
                sha[6]: {"kl": BAD, "mtp": BAD},  # two red
                sha[7]: {"kl": BAD, "mtp": OK, "retried": True},  # retried
                sha[8]: {"kl": BAD, "kl_rerun": OK, "mtp": OK},  # re-run green
                sha[9]: {"kl": BAD, "kl_rerun": BAD, "mtp": OK},  # re-run red
            }
        )
    )

    def run(at: str) -> dict:
        run_id = state.actions.start(state.repo(repo), WORKFLOW, at, event="schedule", branch_of_sha="main").id
        state.actions.wait(run_id, 120)
        got = requests.get(f"{base}/repos/{repo}/actions/runs/{run_id}", headers={"Authorization": f"token {token}"})
        return got.json()

    def rerun(payload: dict) -> None:
        url = f"{base}/repos/{repo}/actions/runs/{payload['id']}/rerun-failed-jobs"
        assert requests.post(url, headers={"Authorization": f"token {token}"}).status_code == 201
        state.actions.wait(payload["id"], 120)

    def deliver(payload: dict, after: timedelta) -> Counter:
        forge = GitHubForge(connect(base, seeded.tokens["revert-bisect-bot"], throttle=False), repo)
        red = run_info(payload)
        job = NightlyJob(policies, lambda _: forge, Started(), now=lambda: red.updated_at + after)
        state.rates.calls.clear()
        try:
            job(
                ClaimedJob(
                    1,
                    "nightly_failure",
                    f"d-{red.id}",
                    "workflow_run",
                    {"repository": {"full_name": repo}, "workflow_run": payload},
                    1,
                )
            )
        except NotYet:
            pass
        return Counter(kind(path) for (method, path), n in state.rates.calls.items() for _ in range(n))

    for at in (sha[1], sha[2]):
        run(at)
    state.actions.variables["NO_GPU_AT"] = sha[3]  # the GPU jobs skipped in this run
    run(sha[3])
    state.actions.variables["NO_GPU_AT"] = ""
    run(sha[4])
    late, soon = timedelta(minutes=31), timedelta(minutes=1)
    out = {"red": deliver(run(sha[5]), late), "two red": deliver(run(sha[6]), late)}
    out["retried"] = deliver(run(sha[7]), soon)
    first = run(sha[8])
    rerun(first)
    out["re-run green"] = deliver(first, late)
    first = run(sha[9])
    rerun(first)
    out["re-run red"] = deliver(first, soon)
    state.actions.shutdown()
    stop()
    shutil.rmtree(tmp, ignore_errors=True)
    return {story: dict(counts) for story, counts in out.items()}


class Started:
    """The bisections the job starts: counted, not run."""

    def start_nightly(self, repo_slug, scoped, forge) -> None:
        pass

    def start_nightly_group(self, repo_slug, group, forge) -> None:
        pass


KINDS = ("run", "jobs lists", "job logs", "runs lists", "artifacts", "other")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", help="another checkout whose nightly job to count on the same stories")
    parser.add_argument("--side", help=argparse.SUPPRESS)  # one side, in a process of its own: its counts as JSON
    args = parser.parse_args()
    if args.side is not None:
        print(json.dumps(side(args.side or None)))
        return
    sides = {"this tree": ""} | ({f"--tree {args.tree}": args.tree} if args.tree else {})
    counts = {}
    for name, tree in sides.items():
        done = subprocess.run([sys.executable, __file__, "--side", tree], capture_output=True, text=True, check=True)
        counts[name] = json.loads(done.stdout.strip().splitlines()[-1])
    rows = [
        [story, name, *(str(got.get(k, 0)) for k in KINDS), str(sum(got.values()))]
        for story in next(iter(counts.values()))
        for name, by_story in counts.items()
        for got in [by_story[story]]
    ]
    command = "python bench/nightly_reads_bench.py" + (f" --tree {args.tree}" if args.tree else "")
    notes = [
        "Requests the sandbox answered while the job handled the delivery (a 304 included): `run` GET .../runs/{id}, "
        "`jobs lists` a run's or an attempt's jobs, `job logs` GET .../jobs/{id}/logs (the redirect to the blob "
        "not counted), `runs lists` the workflow and its runs (GET .../workflows/{id}[/runs])."
    ]
    table("GitHub API requests of one nightly delivery", command, ["story", "code", *KINDS, "all"], rows, notes)


if __name__ == "__main__":
    main()
