import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.domain.bisect.planner import choose_probes
from bot.domain.bisect.posterior import Contradiction, Posterior, Tally


def test_uniform_before_evidence_sums_to_one():
    post = Posterior.compute(10, {0: Tally(2, 0), 10: Tally(0, 2)}, flake=0.0)
    assert post.no_culprit == 0.0  # BAD failed and bad commits always fail
    assert post.cdf(10) == pytest.approx(1.0)
    assert post.cdf(5) == pytest.approx(0.5)
    assert all(post.mass(i) == pytest.approx(0.1) for i in range(1, 11))


def test_pass_rules_out_everything_at_or_below_it():
    post = Posterior.compute(10, {0: Tally(1, 0), 4: Tally(1, 0), 10: Tally(0, 1)}, flake=0.05)
    assert post.cdf(4) == 0.0
    assert post.mass(5) > 0


def test_flaky_fail_is_soft_evidence():
    post = Posterior.compute(10, {0: Tally(1, 0), 3: Tally(0, 1), 10: Tally(0, 1)}, flake=0.05)
    below, above = post.cdf(3), 1 - post.cdf(3)
    assert below > 0.8 and above > 0.01


def test_contradiction_without_flakes():
    with pytest.raises(Contradiction):
        Posterior.compute(5, {0: Tally(1, 0), 3: Tally(1, 1), 5: Tally(0, 1)}, flake=0.0)


def test_no_culprit_grows_when_bad_passes():
    post = Posterior.compute(8, {0: Tally(2, 0), 8: Tally(3, 1)}, flake=0.2)
    assert post.no_culprit == pytest.approx(1.0)


@given(n=st.integers(1, 5000), k=st.integers(1, 8))
@settings(max_examples=300, deadline=None)
def test_k_section_pieces_hold_at_most_ceil_n_over_k_plus_1(n, k):
    post = Posterior.compute(n, {0: Tally(1, 0), n: Tally(0, 1)}, flake=0.0)
    probes = choose_probes(post, k)
    assert len(probes) <= k and probes == sorted(set(probes))
    edges = [0] + probes + [n]
    assert max(b - a for a, b in zip(edges, edges[1:])) <= math.ceil(n / (k + 1))


def test_in_flight_runs_are_dividers():
    post = Posterior.compute(100, {0: Tally(1, 0), 100: Tally(0, 1)}, flake=0.0)
    # one run in flight at 50: the two free runners split each half, not the whole range again
    probes = choose_probes(post, 2, in_flight=[50])
    assert len(probes) == 2 and probes[0] < 50 < probes[1]
    assert abs(probes[0] - 25) <= 1 and abs(probes[1] - 75) <= 1


def test_untestable_commits_are_never_probed():
    post = Posterior.compute(9, {0: Tally(1, 0), 9: Tally(0, 1)}, flake=0.0)
    probes = choose_probes(post, 1, untestable={4, 5, 6})
    assert probes and probes[0] not in {4, 5, 6}
