"""A run's life and its jobs' -- mixed into `Actions` (engine.py): the run waits for its concurrency group
(pending), then each job of the attempt in the file's order, once the jobs it needs have completed: skipped by
its `if:` (default success() of those jobs), else queued for a runner with its labels and a free slot, run
(runner.py), completed; a job that calls a reusable workflow becomes that workflow's jobs when it starts. The run
concludes from the newest execution of each job."""

from __future__ import annotations

from collections.abc import Iterable

from . import workflow as wfspec
from .model import HOSTED_LABEL, HOSTED_RUNNER_NAME, RUNNER_NAME, Call, Job, Run, Workflow, _now, _stamp


class JobsMixin:
    """Uses the engine's lock, condition, runner labels, slots and groups, and runner.py's `_job`."""

    def _execute(self, run: Run, wf: Workflow, error: str | None, jobs: list[Job]) -> None:
        if error:
            with self.lock:
                run.annotations.append(f"{_stamp()} ##[error]{error}")
            self._finish(run, "failure")
            return
        if not self._wait_for(run, self._take_group):
            for job in jobs:
                self._skip(run, job, "cancelled")
            self._release_group(run)
            self._finish(run, "cancelled")
            return
        try:
            for job in jobs:
                if wfspec.uses(job.spec) is not None and job.call is None:
                    self._call(run, wf, job)
                else:
                    self._one_job(run, wf, job)
        finally:
            self._release_group(run)
        self._finish(run, self._conclusion(run))

    def _admit(self, run: Run, job: Job) -> bool:
        """The job's expression context (its matrix entry, what it needs, a called workflow's inputs), then its
        `if:` (default success() of the jobs it needs): False when it is skipped (or cancelled) instead."""
        latest = run.latest_jobs()
        needed = {key: [j for j in latest if j.answers_to(key)] for key in job.needs}
        results = {key: _result([j.conclusion for j in jobs]) for key, jobs in needed.items()}
        entries = list(dict.fromkeys(j.name for j in run.jobs if j.key == job.key))  # its matrix's, in order
        job.context = {
            **run.context,
            "github": {**run.context["github"], "job": job.own_key},
            "runner": {**run.context["runner"], "temp": str(self._temp(job))},
            "matrix": dict(job.matrix),
            "strategy": {"job-index": entries.index(job.name), "job-total": len(entries), "fail-fast": True},
            "needs": {  # a called job's needs name its siblings by their ids in the called file
                key.split("/", 1)[1] if job.call else key: {
                    "result": results[key],
                    "outputs": _outputs([j for j in jobs if j.key == key]),  # a caller's jobs' outputs are not its
                }
                for key, jobs in needed.items()
            },
            "job": {"status": _needs_status(results.values(), run.cancel_requested)},
        }
        if job.call is not None:
            job.context["inputs"] = dict(job.call.inputs)
        if job.matrix and wfspec.fail_fast(job.spec) and _sibling_failed(run, job):
            self._skip(run, job, "cancelled")  # fail-fast: an entry of its matrix failed
            return False
        try:
            runs = run.cancel_requested is False and wfspec.condition(job.spec.get("if"), job.context)
        except wfspec.ExpressionError as exc:
            self._line(job, f"##[error]{exc}")
            runs = False
        if not runs:
            self._skip(run, job, "cancelled" if run.cancel_requested else "skipped")
        return runs

    def _call(self, run: Run, wf: Workflow, caller: Job) -> None:
        """A job that calls a reusable workflow: skipped by its `if:` like any job (then it stays one job, with the
        caller's name), else it becomes the called workflow's jobs -- each named `<caller's name> / <its name>`,
        its matrix entries apart -- made now with the call's inputs (`with:`, which may read `needs`), and run."""
        if not self._admit(run, caller):
            return
        called = run.called[wfspec.called_path(wfspec.uses(caller.spec) or "")]  # read and checked when planned
        try:
            given = wfspec.evaluate(caller.spec.get("with") or {}, caller.context)
            call = Call(caller.key, wfspec.call_inputs(called, given), dict(called.env))
            ctx = {**run.context, "inputs": call.inputs}
            plan = [  # (key, name, spec, matrix entry, needs), a called job's needs naming its siblings
                (
                    f"{caller.key}/{key}",
                    f"{caller.name} / {wfspec.job_name(key, decl, matrix, ctx)}",
                    decl,
                    matrix,
                    tuple(f"{caller.key}/{n}" for n in wfspec.needs(decl)),
                )
                for key, decl in called.jobs.items()
                for matrix in wfspec.matrix_entries(decl, ctx)
            ]
            with self.lock:  # GitHub lists the called jobs in the caller's place
                made = [self._execution(run, *job, call, before=caller) for job in plan]
                try:
                    for job in made:
                        self._shape(job, ctx)
                except wfspec.ExpressionError:
                    self._drop(run, made)
                    raise
                self._drop(run, [caller])
        except (wfspec.ExpressionError, wfspec.Unsupported) as exc:
            self._line(caller, f"##[error]{exc}")
            self._skip(run, caller, "failure")
            return
        for job in made:
            self._one_job(run, wf, job)

    def _drop(self, run: Run, jobs: list[Job]) -> None:
        for job in jobs:
            run.jobs.remove(job)
            self.jobs.pop(job.id, None)

    def _one_job(self, run: Run, wf: Workflow, job: Job) -> None:
        """A job: skipped by its `if:` (default success() of the jobs it needs), else queued for a runner with
        its labels and run there."""
        if not self._admit(run, job):
            return
        with self.lock:
            job.queued = True
        self._notify(run, "queued", "workflow_job", job)
        admitted = self._wait_for(run, lambda r: self._take_runner(job))
        try:
            conclusion = self._job(run, job, wf) if admitted else "cancelled"
        finally:
            if admitted:
                with self._cond:
                    self._busy -= 1
                    self._cond.notify_all()
        self._job_done(run, job, conclusion)

    def _skip(self, run: Run, job: Job, conclusion: str) -> None:
        """A job that never runs: completed, `skipped` (its `if:`) or `cancelled`, no runner, no steps."""
        with self.lock:
            job.status, job.conclusion = "completed", conclusion
            job.started_at = job.completed_at = _now()

    def _wait_for(self, run: Run, take) -> bool:
        with self._cond:
            while not run.cancel_requested:
                if take(run):
                    return True
                self._cond.wait(0.5)  # also re-reads runner_labels, which tests may change
        return False

    def _take_group(self, run: Run) -> bool:
        if run.group is None:
            return True
        if self._groups.setdefault((run.repo, run.group), run.id) != run.id:
            return False
        if run.status == "pending":
            run.status, run.updated_at = "queued", _now()
        return True

    def _take_runner(self, job: Job) -> bool:
        runner = self.runner_for(job.labels)
        if runner is None or self._busy >= self.concurrency:
            job.passed_over += 1
            return False
        self._busy += 1
        job.runner_name = runner
        return True

    def runner_for(self, labels: list[str]) -> str | None:
        """The name of a runner that has every label (case-insensitive), or None."""
        wanted = {label.lower() for label in labels}
        if wanted <= {label.lower() for label in self.runner_labels}:
            return RUNNER_NAME
        if self.hosted_runners and len(wanted) == 1 and HOSTED_LABEL.match(labels[0]):
            return HOSTED_RUNNER_NAME
        return None

    def _release_group(self, run: Run) -> None:
        with self._cond:
            if run.group is not None and self._groups.get((run.repo, run.group)) == run.id:
                del self._groups[(run.repo, run.group)]
            self._cond.notify_all()

    def _conclusion(self, run: Run) -> str:
        """The run's: cancelled, failure (a job failed), timed_out, success, or skipped when no job ran."""
        if run.cancel_requested:
            return "cancelled"
        found = {j.conclusion for j in run.latest_jobs()}
        for conclusion in ("failure", "timed_out", "cancelled", "success"):
            if conclusion in found:
                return conclusion
        return "skipped" if found else "failure"


def _sibling_failed(run: Run, job: Job) -> bool:
    """Did another entry of the job's matrix fail in this attempt?"""
    return any(
        j.key == job.key and j is not job and j.attempt == job.attempt and j.conclusion in ("failure", "timed_out")
        for j in run.jobs
    )


def _outputs(jobs: list[Job]) -> dict[str, str]:
    """`needs.<id>.outputs`: the job's outputs; of a matrix, combined from all its entries ("When using a matrix,
    job outputs will be combined from all jobs inside the matrix", GitHub docs), an output two entries set as the
    last one left it (they run one after another here)."""
    out: dict[str, str] = {}
    for job in jobs:
        out.update({k: v for k, v in job.outputs.items() if v})
    return out


def _result(conclusions: list[str | None]) -> str:
    """`needs.<id>.result` of a job (all of its matrix entries, or all the jobs of the workflow it calls): failure
    when one failed, cancelled when one was, skipped when all were, else success."""
    if set(conclusions) & {"failure", "timed_out"}:
        return "failure"
    if "cancelled" in conclusions:
        return "cancelled"
    return "skipped" if conclusions and all(c == "skipped" for c in conclusions) else "success"


def _needs_status(results: Iterable[str | None], cancelled: bool) -> str:
    """`job.status` for a job's `if:` (what success(), failure(), cancelled() read): the jobs it needs."""
    results = set(results)
    if cancelled or "cancelled" in results:
        return "cancelled"
    if results & {"failure", "timed_out"}:
        return "failure"
    return "skipped" if "skipped" in results else "success"
