"""E-Divisive's permutation test at an exact level, stopped as soon as its answer is known.

Apache Otava's `PermutationsSignificanceTester` shuffles the readings within each segment, recomputes the
largest divergence (q-hat) and counts the shuffles that reach the observed one. This is the same test and the
same shuffles, with a decision rule chosen for a stated level and a sequential stop (Besag & Clifford, 1991):

- `permutations_for(alpha)` = ceil(1/alpha) - 1 shuffles, and a candidate is significant only when none of them
  reaches its q-hat: p = (exceedances + 1) / (permutations + 1) <= alpha. When the readings are exchangeable
  (no change; noise of any distribution, outliers included) the observed q-hat is the largest of the
  permutations + 1 equally likely values with probability at most 1 / (permutations + 1) <= alpha (ties count
  against it).
- The shuffles stop at the first one that reaches q-hat: the answer is "not significant" whatever the rest would
  show, so a flat series costs a few shuffles instead of thousands.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from otava.change_point_divisive.base import CandidateChangePoint, ChangePoint
from otava.change_point_divisive.calculator import PairDistanceCalculator
from otava.change_point_divisive.significance_test import PermutationsSignificanceTester, PermutationStats


def permutations_for(alpha: float) -> int:
    """The fewest shuffles whose smallest p-value, 1 / (permutations + 1), is at most `alpha`."""
    return max(1, math.ceil(1 / alpha - 1e-9) - 1)


class SequentialPermutations(PermutationsSignificanceTester):
    """Otava's permutation tester at level `alpha`, stopping at the first shuffle that reaches the candidate."""

    def __init__(self, alpha: float, seed: Any) -> None:
        super().__init__(
            max_pvalue=alpha, permutations=permutations_for(alpha), calculator=PairDistanceCalculator, seed=seed
        )

    def change_point(
        self, candidate: CandidateChangePoint, series: np.ndarray, intervals: list[slice]
    ) -> ChangePoint[PermutationStats]:
        qhats: list[float] = []
        for _ in range(self.permutations):
            shuffled = series.copy()
            for interval in intervals:
                self.rng.shuffle(shuffled[interval])  # a view: shuffled in place, within its segment
            qhats.append(self.calculator(shuffled).get_next_candidate(intervals).qhat)
            if qhats[-1] >= candidate.qhat:
                break
        reached = sum(q >= candidate.qhat for q in qhats)
        # All shuffles done and none reached: the exact p-value. Stopped early: Besag & Clifford's, above alpha.
        pvalue = (reached + 1) / (self.permutations + 1) if reached == 0 else reached / len(qhats)
        stats = PermutationStats(
            pvalue=pvalue, permuted_qhats=np.asarray(qhats), extreme_qhat_perm=reached, n_perm=len(qhats)
        )
        return ChangePoint.from_candidate(candidate, stats)
