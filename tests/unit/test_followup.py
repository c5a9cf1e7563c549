"""The follow-up ranking (bot/domain/followup.py) on SGLang's real incident, as public data records it
(tests/fixtures/sglang/followup_incident.json), and on hand-made cases."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import datetime
from pathlib import Path

from bot.domain.followup import (
    Candidate,
    Change,
    CulpritChange,
    changed_definitions,
    choose,
    preselect,
    rank,
    search_words,
    title_similarity,
)

INCIDENT = json.loads((Path(__file__).parents[1] / "fixtures" / "sglang" / "followup_incident.json").read_text())
PULLS = {p["number"]: p for p in INCIDENT["pulls"]}
BRP = "python/sglang/srt/managers/scheduler_components/batch_result_processor.py"


def when(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def change(number: int) -> Change:
    return Change.of_patches((f["filename"], f["patch"]) for f in PULLS[number]["files"])


def culprit() -> CulpritChange:
    p = PULLS[INCIDENT["culprit"]]
    return CulpritChange(p["number"], p["title"], p["author"], change(p["number"]), when(p["merged_at"]))


def candidates(*leave_out: int) -> list[Candidate]:
    return [
        Candidate(
            p["number"],
            p["title"],
            p["author"],
            True,
            p["state"],
            when(p["created_at"]),
            f"#{INCIDENT['culprit']}" in p["body"],
            change(p["number"]),
            frozenset({"open PRs"}),
        )
        for p in INCIDENT["pulls"]
        if p["number"] not in leave_out
    ]


def test_the_culprits_function_is_read_from_a_context_line_not_only_the_hunk_header():
    # #31369's first hunk is headed `def _mamba_prefix_cache_update(`, but its changed lines follow the
    # `def _mamba_check_track_boundary` context line: that is the function it changes
    assert changed_definitions(PULLS[31369]["files"][0]["patch"]) == {"_mamba_check_track_boundary"}


def test_hunk_headers_and_changed_definitions():
    patch = (
        "@@ -1,3 +1,4 @@ class Scheduler:\n"
        "     x = 1\n"
        "+    y = 2\n"
        "@@ -10,4 +11,5 @@ def run(self):\n"
        "     a = 1\n"
        "+    b = 2\n"
        "@@ -20,2 +22,4 @@ def run(self):\n"
        "+def added_helper(n):\n"
        "+    return n\n"
        "@@ -40,2 +44,2 @@\n"
        "-TOP = 1\n"
        "+TOP = 2\n"
    )
    assert changed_definitions(patch) == {"Scheduler", "run", "added_helper"}
    assert changed_definitions(None) == frozenset()


def test_the_real_follow_up_is_picked_from_the_decoys():
    choice = choose(culprit(), candidates())
    assert choice.best is not None and choice.best.number == INCIDENT["followup"] == 29792
    assert choice.best.definitions == ("_mamba_check_track_boundary",) and choice.best.files == (BRP,)
    assert choice.best.similarity >= 0.6  # "[HiCache] Fix Mamba track-boundary bookkeeping under overlap scheduling"
    # the same file under another function (#30437) is at most related, never the follow-up; the closed revert
    # (#31622) that names the culprit, and PRs of other files whose titles share little, are not listed at all
    related = [r.number for r in choice.related]
    assert 31622 not in related and 33118 not in related and len(related) <= 2
    assert 30437 in related


def test_without_the_follow_up_nothing_fits_so_a_tracking_issue_is_opened():
    choice = choose(culprit(), candidates(29792))
    assert choice.best is None
    assert all(not r.fits for r in choice.related)


def test_an_open_issue_that_names_the_culprit_fits_without_files():
    issue = Candidate(501, "Nightly KL test red on main", "ada", False, "open", when("2026-07-18T00:00:00Z"), True)
    closed = Candidate(502, "Nightly KL test red", "ada", False, "closed", when("2026-07-18T00:00:00Z"), True)
    choice = choose(culprit(), [issue, closed])
    assert choice.best is not None and choice.best.number == 501 and choice.related == ()
    assert "names the culprit" in choice.best.why()


def test_shared_functions_outrank_a_citing_issue_and_titles_break_ties_then_recency():
    fix = candidates()[1]  # #29792
    issue = Candidate(501, "Nightly KL test red on main", "ada", False, "open", when("2026-07-18T00:00:00Z"), True)
    ranked = rank(culprit(), [issue, fix])
    assert [r.number for r in ranked] == [29792, 501]
    same = Change({BRP: frozenset({"_mamba_check_track_boundary"})})
    older = Candidate(601, "mamba track boundary", "b", True, "open", when("2026-07-01T00:00:00Z"), change=same)
    newer = Candidate(602, "mamba track boundary", "b", True, "open", when("2026-07-05T00:00:00Z"), change=same)
    unlike = Candidate(603, "Refactor the scheduler", "b", True, "open", when("2026-07-09T00:00:00Z"), change=same)
    assert [r.number for r in rank(culprit(), [older, unlike, newer])] == [602, 601, 603]


def test_title_similarity_counts_the_culprits_distinctive_words():
    assert title_similarity(PULLS[31369]["title"], PULLS[29792]["title"]) > 0.6
    assert title_similarity(PULLS[31369]["title"], PULLS[33118]["title"]) == 0
    assert title_similarity("Fix the", "Fix the") == 0  # no distinctive word: nothing to share


def test_preselect_reads_the_files_of_the_likeliest_first():
    # never the culprit, the closed revert: of the open PRs, the title most like the culprit's first
    assert [c.number for c in preselect(31369, PULLS[31369]["title"], candidates(), 2)] == [29792, 32589]
    found = [replace(c, found_by=c.found_by | {"search"}) if c.number == 33118 else c for c in candidates()]
    assert [c.number for c in preselect(31369, PULLS[31369]["title"], found, 1)] == [33118]


def test_search_words_are_the_titles_longest_words_and_the_changed_functions():
    words, names = search_words(PULLS[31369]["title"], {"_mamba_check_track_boundary", "run"})
    assert words == ("boundary", "overlap")  # the longest uninflected: "scheduler" may be "scheduling" in the fix
    assert set(words) <= set(PULLS[29792]["title"].lower().replace("-", " ").split())
    assert names == ("_mamba_check_track_boundary",)
