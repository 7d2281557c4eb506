"""Tests of the ``m_sct`` placer: ETF that keeps an op with its favourite child.

The memory guarantee on random graphs is tested for every heuristic placer in ``test_groups.py``.
"""

from __future__ import annotations

import numpy as np
import pytest

from gnplace.cluster import load_cluster
from gnplace.graph import OpGraph
from gnplace.placers.m_etf import METFPlacer
from gnplace.placers.m_sct import MSCTPlacer, favourite_children
from gnplace.sim.simulator import Simulator
from gnplace.toy import chain_graph, fork_graph, layered_graph


def favourite_fork() -> OpGraph:
    """``src`` feeds ``a`` (38 MB) and its favourite ``b`` (76 MB, 10 ms on k80x2's link).

    ``a`` ranks higher, so ETF runs it first next to ``src`` (16 ms) and sends ``b`` to the other
    GPU, where it starts 10 ms after ``src``. SCT waits the 16 ms instead: no more than the 10 ms
    transfer it saves.
    """
    return OpGraph(
        ["src", "a", "b"], [(0, 1), (0, 2)], flops=[1e9, 2.0e10, 1.89e10], out_bytes=[76_000_000, 1000, 1000],
        edge_bytes=[38_000_000, 76_000_000], name="favourite_fork",
    )


def test_name_and_repr():
    assert MSCTPlacer.name == "m_sct"
    assert repr(MSCTPlacer()) == "MSCTPlacer(memory_aware=True, min_speed=0.5)"
    assert repr(MSCTPlacer(memory_aware=False)) == "MSCTPlacer(memory_aware=False, min_speed=0.5)"


def test_favourite_children():
    parent, size = favourite_children(favourite_fork())
    assert parent.tolist() == [-1, -1, 0]
    assert size.tolist() == [0.0, 0.0, 76_000_000.0]
    parent, _ = favourite_children(fork_graph())
    assert parent.tolist() == [-1, 0, -1, 1]  # src picks left (first of equals); sink keeps left's claim


def test_favourite_child_stays_with_its_parent_where_etf_splits():
    g, c = favourite_fork(), load_cluster("k80x2")
    assert METFPlacer().place(g, c).devices.tolist() == [0, 0, 1]
    assert MSCTPlacer().place(g, c).devices.tolist() == [0, 0, 0]


def test_two_independent_chains_get_one_device_each(two_chains):
    devices = MSCTPlacer().place(two_chains(), load_cluster("k80x2")).devices.tolist()
    assert devices in ([0] * 4 + [1] * 4, [1] * 4 + [0] * 4)


def test_chain_with_huge_transfers_stays_on_one_device():
    p = MSCTPlacer().place(chain_graph(6, flops=1e6, out_bytes=10**9), load_cluster("k80x4"))
    assert len(set(p.devices.tolist())) == 1


def test_graph_that_only_fits_split_is_not_oom(only_fits_split):
    g, c = only_fits_split
    p = MSCTPlacer().place(g, c)
    assert not p.splits_groups(g)
    assert not Simulator().time(g, c, p).is_oom


def test_is_deterministic():
    g, c = layered_graph(300, seed=5).replace(group=np.arange(300) // 4), load_cluster("k80x4")
    p = MSCTPlacer().place(g, c, seed=0)
    assert p == MSCTPlacer().place(g, c, seed=7)
    assert not p.splits_groups(g)


@pytest.mark.parametrize("cluster", ["k80x2", "k80x4"])
def test_against_single_and_round_robin_on_the_example(cluster, example_step_times):
    ours, single, robin = example_step_times(MSCTPlacer(), cluster)
    assert ours <= single
    # see test_m_etf.py: a group is fixed by its forward op, before the gradient overlap shows
    assert ours <= robin * (1 + 1e-9) if cluster == "k80x2" else ours <= 1.3 * robin
