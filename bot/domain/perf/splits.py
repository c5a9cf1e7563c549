"""Where E-Divisive may split a segment: Apache Otava's q-hat, among the splits that leave two readings a side.

Otava's `PairDistanceCalculator` proposes the split of a segment where its energy divergence, q-hat, is largest, over
every split. A split with one reading on a side is no shift (a lone outlier), and the newest shift a nightly series
can show has two readings after it: proposing the split before the last reading would hide it. `AdmissibleSplits`
is the same divergence with its candidates restricted to the splits that leave at least `MIN_SIDE` readings either
side within the segment, so that every change point has them between its neighbours.
"""

from __future__ import annotations

import numpy as np
from otava.change_point_divisive.base import CandidateChangePoint
from otava.change_point_divisive.calculator import PairDistanceCalculator

MIN_SIDE = 2  # readings a side needs for its spread, hence for the effect's interval


class AdmissibleSplits(PairDistanceCalculator):
    """Otava's E-Divisive candidate (the largest q-hat), chosen among the splits with `MIN_SIDE` readings a side."""

    def get_next_candidate(self, intervals: list[slice]) -> CandidateChangePoint | None:
        candidates = [self.get_candidate_change_point(i) for i in intervals if len(self.series[i]) >= 2 * MIN_SIDE]
        return max(candidates, key=lambda candidate: candidate.qhat, default=None)

    def get_candidate_change_point(self, interval: slice) -> CandidateChangePoint:
        start = interval.start or 0
        end = len(self.series) if interval.stop is None else interval.stop
        # Otava's matrix of q-hat (apache-otava 0.8): row i splits before start + 1 + i, column j ends its after-side.
        q = self._get_Q_vals(start, end)[MIN_SIDE - 1 : end - start - MIN_SIDE]
        i, j = np.unravel_index(np.argmax(q), q.shape)
        return CandidateChangePoint(index=start + MIN_SIDE + int(i), qhat=float(q[i, j]))
