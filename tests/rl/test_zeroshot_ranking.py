"""``policy``'s candidates joined, ranked and found in their blocks (:mod:`gnplace.rl.zeroshot_ranking`)."""

from __future__ import annotations

import numpy as np
import pytest

from gnplace.rl.zeroshot_ranking import concat_results, ranking, stacked_row
from gnplace.sim.timer import BatchResult
from gnplace.toy import toy_cluster


def _timed(steps, peaks, oom) -> BatchResult:
    peak = np.asarray(peaks, dtype=float)
    return BatchResult(np.asarray(steps, dtype=float), np.zeros_like(peak), peak, np.asarray(oom, dtype=bool))


def test_fitting_candidates_rank_first_by_step_then_the_least_overflow():
    cluster = toy_cluster(2, memory=10.0)  # 10 bytes a device
    timed = _timed([3.0, 1.0, 2.0, 0.5, 0.1], [[1, 1], [30, 1], [1, 1], [15, 1], [1, 1]], [0, 1, 0, 1, 0])
    # fitting 4, 2, 0 by step; then overflowing 3 (5 bytes over) before 1 (20 over), though 1 is faster
    assert ranking(timed, cluster).tolist() == [4, 2, 0, 3, 1]
    tie = _timed([1.0, 1.0], [[1, 1], [1, 1]], [0, 0])
    assert ranking(tie, cluster).tolist() == [0, 1]  # ties to the first


def test_a_row_is_found_in_its_block_as_a_view_and_past_the_rows_is_refused():
    blocks = [np.arange(6).reshape(2, 3), np.arange(6, 9).reshape(1, 3), np.arange(9, 15).reshape(2, 3)]
    stacked = np.concatenate(blocks)
    for index in range(stacked.shape[0]):
        assert np.array_equal(stacked_row(blocks, index), stacked[index])
    assert np.shares_memory(stacked_row(blocks, 3), blocks[2])  # a view of its block, not a copy of every block
    with pytest.raises(IndexError, match="past the blocks' rows"):
        stacked_row(blocks, 5)


def test_two_timings_join_as_one_first_ones_first():
    first = _timed([1.0], [[1, 2]], [0])
    second = _timed([2.0, 3.0], [[3, 4], [5, 6]], [1, 0])
    joined = concat_results(first, second)
    assert joined == _timed([1.0, 2.0, 3.0], [[1, 2], [3, 4], [5, 6]], [0, 1, 0])
