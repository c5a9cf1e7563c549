"""The revert's case point by point (bot/domain/case.py): the assertion line, since when, the spread, the overlap."""

from bot.domain.case import assertion_line, overlap, red_since, spread
from bot.domain.requests import CiReading

CI_LINE = "AssertionError: avg_kl_div=0.006489 > threshold=0.002 for Qwen/Qwen3-Next-80B-A3B-Instruct"


def test_the_assertion_line_is_quoted_as_the_log_printed_it_without_githubs_timestamp():
    log = f"Begin (1/1):\n2026-07-17T03:12:45.1234567Z avg_kl_div=0.006489\n2026-07-17T03:12:45.2234567Z {CI_LINE}\n"
    assert assertion_line([None, "nothing here", log]) == CI_LINE
    assert (
        assertion_line(["avg_kl_div=0.0065 > threshold=0.002 for m t"]) == "avg_kl_div=0.0065 > threshold=0.002 for m t"
    )
    assert assertion_line(["avg_kl_div=0.0003", ""]) is None  # a reading is not a failure
    cases = (("0.0069", "A"), ("0.0078", "B"))
    several = "\n".join(f"AssertionError: avg_kl_div={v} > threshold=0.002 for {c}" for v, c in cases)
    assert assertion_line([several]).endswith("for A") and assertion_line([several], "0.0078").endswith("for B")


def test_identical_on_every_retry_or_the_spread():
    assert spread([0.006489, 0.006489, 0.006489]).same
    assert not spread([0.006489]).same  # one run says nothing of retries
    wide = spread([0.0061, None, 0.0072])
    assert not wide.same and (wide.runs, wide.low, wide.high) == (3, 0.0061, 0.0072)
    assert spread([None, None]).low is None and not spread([None, None]).same


def test_since_when_is_the_first_failure_after_the_last_pass():
    runs = [CiReading(sha, passed, None, url) for sha, passed, url in (("a", True, "u1"), ("b", False, "u2"))]
    runs += [CiReading(sha, passed, None, url) for sha, passed, url in (("c", True, "u3"), ("d", False, "u4"))]
    green, red = red_since([*runs, CiReading("e", False, None, "u5")])
    assert green == runs[2] and [r.url for r in red] == ["u4", "u5"]
    assert red_since([CiReading("x", False, None, "u")]) == (None, [CiReading("x", False, None, "u")])


def test_why_this_commit_names_what_no_other_commit_of_the_window_touches():
    brp = "batch_result_processor.py"
    changed = {brp: frozenset({"_mamba_check_track_boundary"})}
    window = {
        "culprit": changed,
        "docs": {"README.md": frozenset()},
        "same-file": {brp: frozenset({"_resolve_spec_v2_tokens"})},
    }
    o = overlap("culprit", changed, window)
    assert not o.alone_in_files and o.alone_in_functions and list(o.others) == ["same-file"]
    rival = overlap("culprit", changed, {**window, "rival": {brp: frozenset({"_mamba_check_track_boundary", "x"})}})
    assert not rival.alone_in_functions and rival.others["rival"] == {brp: frozenset({"_mamba_check_track_boundary"})}
    assert rival.rivals == {"rival": {brp: frozenset({"_mamba_check_track_boundary"})}}  # "same-file" shares none
    alone = overlap("culprit", changed, {"culprit": changed, "docs": {"README.md": frozenset()}})
    assert alone.alone_in_files and alone.alone_in_functions
