"""The follow-up judgement (bot/domain/followup.py) over definitions read from patches and file texts
(bot/domain/hunks.py, bot/domain/pydefs.py): SGLang's incident with its follow-up retitled, and the decoys that fooled a
reading of hunk headers and titles."""

from __future__ import annotations

import difflib
from datetime import datetime

import pytest

from bot.domain.followup import Candidate, Change, CulpritChange, Passed, choose, search_words
from bot.domain.hunks import PatchMismatch, changed_lines, old_text
from bot.domain.pydefs import Unparsable, changed_definitions, definitions_at
from tests.support import followup_world as w


def when(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def patch(before: str, after: str, header: str = "") -> str:
    """The hunks of `before` -> `after`, each headed by `header` (what a diff driver may print there)."""
    lines = list(difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=3))[2:]
    return "\n".join(f"{line} {header}".rstrip() if line.startswith("@@") else line for line in lines)


def change(path: str, before: str, after: str) -> Change:
    return Change({path: changed_definitions(patch(before, after, "class BatchResultProcessor:"), after)})


def culprit() -> CulpritChange:
    return CulpritChange(
        31369, "Fix mamba track-boundary seqlen under overlap scheduler", "x", change(w.BRP, w.BRP_BASE, w.CULPRIT)
    )


def pr(number: int, title: str, after: str, *, state: str = "open", body_cites: bool = False) -> Candidate:
    return Candidate(
        number, title, "y", True, state, when("2026-07-10T00:00:00Z"), body_cites, change(w.BRP, w.BRP_BASE, after)
    )


def test_the_culprits_definition_is_its_qualified_name_from_the_text_not_the_hunk_header():
    # git's default driver heads the hunk with `class BatchResultProcessor:`; the lines are in the method
    assert culprit().definitions == {"BatchResultProcessor._mamba_check_track_boundary"}


def test_a_blank_line_added_after_a_function_is_credited_to_no_function():
    added = changed_definitions(patch(w.BRP_BASE, w.ADDED_AFTER), w.ADDED_AFTER)
    assert added == {"BatchResultProcessor._mamba_track_debug_state"}
    removed, new = changed_lines("@@ -1,2 +1,3 @@\n a = 1\n+\n b = 2")
    assert removed == frozenset() and new == frozenset()


def test_init_of_two_classes_are_two_definitions():
    ours = w.SCHED_BASE.replace("self.queue = []", "self.queue = ()")
    theirs = w.SCHED_BASE.replace("self.busy = False", "self.busy = None")
    assert changed_definitions(patch(w.SCHED_BASE, ours, "class Scheduler:"), ours) == {"Scheduler.__init__"}
    # git's default driver heads Worker's hunk `class Scheduler:` too (the last unindented line above the hunk)
    assert changed_definitions(patch(w.SCHED_BASE, theirs, "class Scheduler:"), theirs) == {"Worker.__init__"}


def test_removed_lines_are_placed_in_the_text_before_the_patch():
    after = w.SCHED_BASE.replace("    def run(self):\n        return len(self.queue)\n\n", "")
    p = patch(w.SCHED_BASE, after)
    assert old_text(after, p) == w.SCHED_BASE
    assert changed_definitions(p, after) == {"Scheduler.run"}
    with pytest.raises(PatchMismatch):
        old_text(
            after.replace("self.busy", "self.idle"), patch(w.SCHED_BASE, after.replace("busy = False", "busy = 0"))
        )


def test_decorators_nested_functions_and_assignments():
    source = (
        "X = 1\n\nclass A:\n    y: int = 2\n\n"
        "    @staticmethod\n    def f():\n        def g():\n            return 1\n        return g\n"
    )
    assert definitions_at(source, [1, 4, 6, 9]) == {"X", "A.y", "A.f"}
    with pytest.raises(Unparsable):
        definitions_at("def f(:\n", [1])


def test_the_retitled_follow_up_is_chosen_and_every_decoy_passed_over_with_its_reason():
    candidates = [
        pr(29792, w.RETITLED, w.FOLLOWUP),
        pr(34001, "Fix mamba seqlen in prefix-cache update under overlap scheduler", w.SAME_WORDS),
        pr(34002, "[Mamba] Add a debug view of the tracked state", w.ADDED_AFTER),
        pr(30437, "[Mamba] Support speculative decoding with extra_buffer_lazy", w.SPEC),
        pr(31488, "Overlap grammar with speculative decode verify", w.GRAMMAR),
        pr(
            31622,
            'Revert "Fix mamba track-boundary seqlen under overlap scheduler (#31369)"',
            w.BRP_BASE,
            state="closed",
            body_cites=True,
        ),
    ]
    choice = choose(culprit(), candidates)
    assert choice.best is not None and choice.best.number == 29792
    assert choice.best.why() == f"changes `BatchResultProcessor._mamba_check_track_boundary` in `{w.BRP}`"
    reasons = {a.number: a.passed for a in choice.passed_over}
    assert reasons == {
        34001: Passed.OTHER_DEFINITIONS,  # half the culprit's title words: titles make no fit
        34002: Passed.OTHER_DEFINITIONS,
        30437: Passed.OTHER_DEFINITIONS,
        31488: Passed.OTHER_DEFINITIONS,
        31622: Passed.CLOSED,
    }


def test_without_the_follow_up_nothing_fits():
    choice = choose(culprit(), [pr(34001, culprit().title, w.SAME_WORDS)])  # the culprit's very title
    assert choice.best is None and [a.passed for a in choice.passed_over] == [Passed.OTHER_DEFINITIONS]


def test_an_open_issue_that_cites_the_culprit_fits_a_pr_that_only_cites_it_does_not():
    issue = Candidate(501, "Nightly KL test red on main", "ada", False, "open", when("2026-07-18T00:00:00Z"), True)
    citing = Candidate(
        502, "Docs", "ada", True, "open", when("2026-07-18T00:00:00Z"), True, Change({"docs/a.md": None})
    )
    searched = Candidate(
        503, "mamba boundary", "b", False, "open", when("2026-07-18T00:00:00Z"), found_by=frozenset({"search"})
    )
    choice = choose(culprit(), [issue, citing, searched, pr(29792, w.RETITLED, w.FOLLOWUP)])
    assert choice.best is not None and choice.best.number == 29792  # a shared definition outranks a citation
    reasons = {a.number: a.passed for a in choice.passed_over}
    assert reasons == {501: Passed.OUTRANKED, 502: Passed.CITES_ONLY, 503: Passed.UNRELATED}
    alone = choose(culprit(), [issue])
    assert alone.best is not None and alone.best.why() == "it names the culprit"


def test_a_shared_file_whose_changes_could_not_be_read_is_passed_over_as_unread():
    big = Candidate(
        600, "Large refactor", "z", True, "open", when("2026-07-18T00:00:00Z"), change=Change({w.BRP: None})
    )
    listed = Candidate(
        601,
        "Other",
        "z",
        True,
        "open",
        when("2026-07-18T00:00:00Z"),
        change=Change({"a.py": None}),
        found_by=frozenset({"open PRs"}),
    )
    choice = choose(culprit(), [big, listed])
    assert choice.best is None and [(a.number, a.passed) for a in choice.passed_over] == [(600, Passed.UNREAD)]


def test_a_culprits_file_without_a_patch_makes_every_pr_changing_it_unread_not_another_definition():
    large = CulpritChange(31369, culprit().title, "x", Change({w.BRP: None}))  # GitHub gave the culprit's no patch
    choice = choose(large, [pr(29792, w.RETITLED, w.FOLLOWUP), pr(34001, "Mamba seqlen", w.SAME_WORDS)])
    assert choice.best is None
    assert {a.number: a.passed for a in choice.passed_over} == {29792: Passed.UNREAD, 34001: Passed.UNREAD}


def test_search_words_are_the_titles_longest_words_and_the_changed_functions_bare_names():
    words, names = search_words(culprit().title, culprit().definitions | {"Scheduler.__init__"})
    assert words == ("boundary", "overlap")  # the longest uninflected: "scheduler" may be "scheduling" in the fix
    assert names == ("_mamba_check_track_boundary",)  # `__init__` would match everything


def test_the_dashboard_words_what_was_passed_over_from_the_stored_outcome():
    from bot.domain.outcome import parse_outcome
    from bot.web.followup_views import passed_over

    stored = parse_outcome(
        {
            "followup": 29792,
            "followup_passed_over": [
                {"number": 34001, "reason": "other_definitions", "files": [w.BRP], "definitions": []},
                {"number": 31622, "reason": "closed"},
            ],
        }
    )
    views = passed_over(stored)
    assert [(v.number, v.why, v.shares) for v in views] == [
        (34001, "changes the culprit's files, none of the definitions it changed", w.BRP),
        (31622, "closed (merged, abandoned or a closed issue)", ""),
    ]
