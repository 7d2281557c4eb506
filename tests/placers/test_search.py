"""Pieces shared by the search placers: baseline candidates and blocks."""

from __future__ import annotations

import numpy as np

from gnplace.cluster import load_cluster
from gnplace.graph import OpGraph
from gnplace.placers._search import baseline_candidates, equal_work_blocks
from gnplace.toy import chain_graph, mlp_training_graph

GiB = 2**30


def backwards_graph() -> OpGraph:
    """Chain ``c -> b -> a``: topological order runs against the group ids (groups 2, 1, 0)."""
    return OpGraph(["a", "b", "c"], [(2, 1), (1, 0)], flops=[1e9] * 3, out_bytes=[1000] * 3, name="backwards")


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


# ---------------------------------------------------------------------------------- equal_work_blocks
def test_equal_work_blocks_balance_weights():
    g = chain_graph(4)
    assert equal_work_blocks(g, np.array([3.0, 1.0, 1.0, 1.0]), np.array([0, 1])).tolist() == [0, 1, 1, 1]
    assert equal_work_blocks(g, np.array([1.0, 1.0, 1.0, 3.0]), np.array([0, 1])).tolist() == [0, 0, 0, 1]
    assert equal_work_blocks(g, np.ones(4), np.array([3, 1])).tolist() == [3, 3, 1, 1]


def test_equal_work_blocks_follow_the_topological_order():
    g = backwards_graph()  # order c, b, a
    assert equal_work_blocks(g, np.array([1.0, 1.0, 4.0]), np.array([0, 1])).tolist() == [1, 1, 0]


def test_equal_work_blocks_with_no_work_split_by_count():
    assert equal_work_blocks(chain_graph(4), np.zeros(4), np.array([5, 6])).tolist() == [5, 5, 6, 6]
    assert equal_work_blocks(chain_graph(3), np.zeros(3), np.array([0, 1, 2])).tolist() == [0, 1, 2]


def test_equal_work_blocks_with_more_devices_than_groups():
    out = equal_work_blocks(chain_graph(2), np.ones(2), np.array([0, 1, 2, 3]))
    assert out.tolist() == [1, 3]  # each group where its midpoint falls


def test_equal_work_blocks_are_contiguous_on_a_random_chain():
    rng = np.random.default_rng(0)
    g = chain_graph(30)
    out = equal_work_blocks(g, rng.uniform(0.1, 2.0, size=30), np.array([0, 1, 2]))
    assert out[0] == 0 and out[-1] == 2
    assert np.all(np.diff(out) >= 0)  # blocks in order, never interleaved
