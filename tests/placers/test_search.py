"""Pieces shared by the search placers: the scorer, memory overflow, baseline candidates and blocks."""

from __future__ import annotations

import numpy as np
import pytest

from gnplace.cluster import load_cluster
from gnplace.graph import OpGraph
from gnplace.placers._search import Scorer, baseline_candidates, contiguous_blocks, overflow
from gnplace.sim.simulator import Simulator
from gnplace.toy import chain_graph, mlp_training_graph

GiB = 2**30


def backwards_graph() -> OpGraph:
    """Chain ``c -> b -> a``: topological order runs against the group ids (groups 2, 1, 0)."""
    return OpGraph(["a", "b", "c"], [(2, 1), (1, 0)], flops=[1e9] * 3, out_bytes=[1000] * 3, name="backwards")


# ---------------------------------------------------------------------------------- overflow
def test_overflow_sums_bytes_over_capacity_relative_to_the_largest_device():
    peak = np.array([[1.0, 2.0], [3.0, 0.5], [5.0, 5.0], [2.0, 4.0]])
    assert overflow(peak, np.array([2.0, 4.0])).tolist() == [0.0, 0.25, 1.0, 0.0]
    assert overflow(peak, np.array([4.0, 4.0])).tolist() == [0.0, 0.0, 0.5, 0.0]


def test_overflow_of_an_empty_batch():
    assert overflow(np.zeros((0, 3)), np.ones(3)).shape == (0,)


# ---------------------------------------------------------------------------------- Scorer
def test_scorer_scores_group_placements_as_op_placements(counting_simulator):
    g, c = mlp_training_graph(layers=2, width=64, batch=8), load_cluster("k80x2")
    scorer = Scorer(g, c, counting_simulator)
    candidates = np.array([[0, 0, 0], [0, 1, 0], [1, 0, 1]])
    result = scorer(candidates)
    expected = Simulator().time_batch(g, c, candidates[:, g.group])
    assert np.array_equal(result.step_time, expected.step_time)
    assert np.array_equal(result.peak_memory, expected.peak_memory)
    assert scorer.evaluations == 3 and counting_simulator.batches == [3]
    scorer(candidates[:1])
    assert scorer.evaluations == 4 and counting_simulator.evaluations == 4


def test_scorer_prefers_a_slower_placement_that_fits(heavy_groups, small_gpus):
    g, c = heavy_groups([0.8, 0.8]), small_gpus(2, memory=1 * GiB)  # both groups on one GPU: out of memory
    scorer = Scorer(g, c, Simulator())
    assert scorer.best is None and scorer.best_key == (np.inf, np.inf)
    result = scorer(np.array([[0, 0], [1, 1], [0, 1]]))
    assert result.oom.tolist() == [True, True, False]
    assert result.step_time[2] > result.step_time[0]  # the split pays for a transfer
    assert scorer.best.tolist() == [0, 1]
    assert scorer.best_key == (0.0, pytest.approx(float(result.step_time[2])))


def test_scorer_ranks_out_of_memory_placements_by_overflow(heavy_groups, small_gpus):
    g, c = heavy_groups([1.2, 1.2]), small_gpus(2, memory=1 * GiB)  # nothing fits
    scorer = Scorer(g, c, Simulator())
    result = scorer(np.array([[0, 0], [1, 0]]))
    assert result.oom.all()
    assert scorer.best.tolist() == [1, 0]  # 0.2 GiB over on each GPU beats 1.4 GiB over on one
    assert scorer.best_key[0] == pytest.approx(0.4, abs=0.01)
    assert scorer.best_key[0] == pytest.approx(float(overflow(result.peak_memory, c.memory)[1]))


def test_scorer_keeps_the_best_across_calls_and_the_first_of_ties(two_chains):
    g, c = two_chains(3), load_cluster("k80x2")
    scorer = Scorer(g, c, Simulator())
    split = np.array([[0, 0, 0, 1, 1, 1]])
    scorer(np.array([[0] * 6, [1] * 6]))  # equal on symmetric devices: the first wins
    assert scorer.best.tolist() == [0] * 6
    serial_key = scorer.best_key
    scorer(split)  # the two chains in parallel is faster
    assert scorer.best.tolist() == [0, 0, 0, 1, 1, 1] and scorer.best_key[1] < serial_key[1]
    best_key = scorer.best_key
    scorer(np.array([[1, 1, 1, 0, 0, 0], [0] * 6]))  # as good, but later: no change
    assert scorer.best.tolist() == [0, 0, 0, 1, 1, 1] and scorer.best_key == best_key
    assert scorer.evaluations == 5


def test_scorer_keeps_a_copy_of_the_best(two_chains):
    g, c = two_chains(2), load_cluster("k80x2")
    scorer = Scorer(g, c, Simulator())
    candidates = np.array([[0, 0, 1, 1]])
    scorer(candidates)
    candidates[:] = 1
    assert scorer.best.tolist() == [0, 0, 1, 1]


# ---------------------------------------------------------------------------------- baseline_candidates
def test_baseline_candidates_are_each_device_then_round_robin():
    cands = baseline_candidates(chain_graph(5), load_cluster("k80x4"))
    assert cands.dtype == np.int64
    assert cands.tolist() == [[0] * 5, [1] * 5, [2] * 5, [3] * 5, [0, 1, 2, 3, 0]]


def test_baseline_round_robin_deals_groups_in_topological_order():
    cands = baseline_candidates(backwards_graph(), load_cluster("k80x2"))
    # groups in topological order are 2, 1, 0: they get devices 0, 1, 0
    assert cands.tolist() == [[0, 0, 0], [1, 1, 1], [0, 1, 0]]
    cands = baseline_candidates(backwards_graph(), load_cluster("k80x4"))
    assert cands[-1].tolist() == [2, 1, 0]


def test_baseline_candidates_are_per_group():
    g = mlp_training_graph(layers=3, width=8, batch=4)
    cands = baseline_candidates(g, load_cluster("k80x2"))
    assert cands.shape == (3, g.num_groups) == (3, 4)
    assert cands[-1].tolist() == [0, 1, 0, 1]


# ---------------------------------------------------------------------------------- contiguous_blocks
def test_contiguous_blocks_balance_weights():
    g = chain_graph(4)
    assert contiguous_blocks(g, np.array([3.0, 1.0, 1.0, 1.0]), np.array([0, 1])).tolist() == [0, 1, 1, 1]
    assert contiguous_blocks(g, np.array([1.0, 1.0, 1.0, 3.0]), np.array([0, 1])).tolist() == [0, 0, 0, 1]
    assert contiguous_blocks(g, np.ones(4), np.array([3, 1])).tolist() == [3, 3, 1, 1]


def test_contiguous_blocks_follow_the_topological_order():
    g = backwards_graph()  # order c, b, a
    assert contiguous_blocks(g, np.array([1.0, 1.0, 4.0]), np.array([0, 1])).tolist() == [1, 1, 0]


def test_contiguous_blocks_with_no_work_split_by_count():
    assert contiguous_blocks(chain_graph(4), np.zeros(4), np.array([5, 6])).tolist() == [5, 5, 6, 6]
    assert contiguous_blocks(chain_graph(3), np.zeros(3), np.array([0, 1, 2])).tolist() == [0, 1, 2]


def test_contiguous_blocks_with_more_devices_than_groups():
    out = contiguous_blocks(chain_graph(2), np.ones(2), np.array([0, 1, 2, 3]))
    assert out.tolist() == [1, 3]  # each group where its midpoint falls


def test_contiguous_blocks_are_contiguous_on_a_random_chain():
    rng = np.random.default_rng(0)
    g = chain_graph(30)
    out = contiguous_blocks(g, rng.uniform(0.1, 2.0, size=30), np.array([0, 1, 2]))
    assert out[0] == 0 and out[-1] == 2
    assert np.all(np.diff(out) >= 0)  # blocks in order, never interleaved
