"""Tests of the ``heft`` placer: HEFT list scheduling with colocation groups and memory.

The memory guarantee on random graphs is tested for every heuristic placer in ``test_groups.py``.
"""

from __future__ import annotations

import numpy as np
import pytest

from gnplace.cluster import load_cluster
from gnplace.graph import OpGraph
from gnplace.placers.heft import HeftPlacer, heft_schedule
from gnplace.placers.listsched import ListSchedule, static_rank
from gnplace.sim.costmodel import op_times
from gnplace.sim.simulator import Simulator
from gnplace.toy import chain_graph, layered_graph


def test_name_and_repr():
    assert HeftPlacer.name == "heft"
    assert repr(HeftPlacer()) == "HeftPlacer(memory_aware=True, min_speed=0.0)"
    assert repr(HeftPlacer(memory_aware=False, min_speed=0.5)) == "HeftPlacer(memory_aware=False, min_speed=0.5)"


def test_two_independent_chains_get_one_device_each(two_chains):
    devices = HeftPlacer().place(two_chains(), load_cluster("k80x2")).devices.tolist()
    assert devices in ([0] * 4 + [1] * 4, [1] * 4 + [0] * 4)


def test_chain_with_huge_transfers_stays_on_one_device():
    p = HeftPlacer().place(chain_graph(6, flops=1e6, out_bytes=10**9), load_cluster("k80x4"))
    assert len(set(p.devices.tolist())) == 1


def test_schedule_takes_ops_in_rank_order_and_finishes_early(two_chains):
    g, c = two_chains(), load_cluster("k80x2")
    t = op_times(g, c)
    s = ListSchedule(g, c, t)
    heft_schedule(s, static_rank(g, t, c))
    assert np.all(s.op_device >= 0)
    assert s.finish.max() == pytest.approx(4 * t[0, 0])  # the two chains run side by side


def test_graph_that_only_fits_split_is_not_oom(only_fits_split):
    g, c = only_fits_split
    p = HeftPlacer().place(g, c)
    assert not p.splits_groups(g)
    assert not Simulator().time(g, c, p).is_oom


def test_a_group_with_a_small_first_op_and_heavy_gradients_goes_to_the_gpu():
    # op "a" alone would finish first on the CPU (its launch overhead is smaller), but its group
    # also holds "b", 1 TFLOP, which the GPU runs 35x faster: HEFT counts the group's work
    g = OpGraph(["a", "b"], [(0, 1)], flops=[1.0, 1e12], out_bytes=[4, 4], group=[0, 0])
    assert HeftPlacer().place(g, load_cluster("cpu_gpu")).devices.tolist() == [1, 1]


def test_uses_a_cpu_for_work_it_finishes_earlier():
    # many independent tiny ops: launch overhead dominates, the CPU's is 1 us against the GPU's 5 us
    g = OpGraph([f"n{i}" for i in range(20)], flops=[1.0] * 20)
    assert 0 in HeftPlacer().place(g, load_cluster("cpu_gpu")).devices.tolist()


def test_is_deterministic():
    g, c = layered_graph(300, seed=4).replace(group=np.arange(300) // 2), load_cluster("v100x8")
    p = HeftPlacer().place(g, c, seed=0)
    assert p == HeftPlacer().place(g, c, seed=1)
    assert not p.splits_groups(g)


@pytest.mark.parametrize("cluster", ["k80x2", "k80x4"])
def test_against_single_and_round_robin_on_the_example(cluster, example_step_times):
    ours, single, robin = example_step_times(HeftPlacer(), cluster)
    assert ours <= single
    # see test_m_etf.py: a group is fixed by its forward op, before the gradient overlap shows
    assert ours <= robin * (1 + 1e-9) if cluster == "k80x2" else ours <= 1.3 * robin


def _papers_example():
    """The worked example of Topcuoglu, Hariri & Wu (TPDS 2002, Fig. 3): ten tasks on three processors.

    Op times are the paper's computation costs ``w[i, j]``; an edge of ``c`` units carries ``1000 c`` bytes over
    1,000 B/s links without latency, so that its transfer takes the paper's ``c`` seconds between two processors.
    """
    from gnplace.cluster import Device
    from gnplace.toy import uniform_cluster

    w = np.array([[14, 16, 9], [13, 19, 18], [11, 13, 19], [13, 8, 17], [12, 13, 10], [13, 16, 9], [7, 15, 11],
                  [5, 11, 14], [18, 12, 20], [21, 7, 16]], dtype=np.float64)
    edges = [(1, 2, 18), (1, 3, 12), (1, 4, 9), (1, 5, 11), (1, 6, 14), (2, 8, 19), (2, 9, 16), (3, 7, 23), (4, 8, 27),
             (4, 9, 23), (5, 9, 13), (6, 8, 15), (7, 10, 17), (8, 10, 11), (9, 10, 13)]
    g = OpGraph([f"n{i}" for i in range(1, 11)], [(a - 1, b - 1) for a, b, _ in edges],
                edge_bytes=[1000 * c for *_, c in edges], out_bytes=[100_000] * 10)
    c = uniform_cluster([Device(f"p{k}", "gpu", 1e12, 1e11, 2**30) for k in range(1, 4)], bandwidth=1000.0,
                        latency=0.0)
    return g, c, w


def test_upward_ranks_and_order_are_those_of_the_papers_example():
    """rank_u(n10) = mean(21, 7, 16) = 14.667; rank_u(n7) = 11 + 17 + 14.667; rank_u(n2) = 16.667 + max(19 +
    rank_u(n8), 16 + rank_u(n9)) = 77; ... the paper's table, and its task list n1, n3, n4, n2, n5, n6, n9, n7, n8,
    n10. n3 and n4 tie at 80, which the paper lists n3 first; in floats n3's sum is 79.99999999999999 and HEFT takes
    n4 first, which gives the same schedule (n4 ties on P2 and P3 at 26 and takes P2, the lower index)."""
    g, c, w = _papers_example()
    rank = static_rank(g, w, c)
    assert rank.tolist() == pytest.approx([108.0, 77.0, 80.0, 80.0, 69.0, 63 + 1 / 3, 42 + 2 / 3, 35 + 2 / 3,
                                           44 + 1 / 3, 14 + 2 / 3])
    assert (np.argsort(-np.round(rank, 9), kind="stable") + 1).tolist() == [1, 3, 4, 2, 5, 6, 9, 7, 8, 10]


def test_heft_schedules_the_papers_example_as_the_paper_does():
    """The paper's HEFT schedule (Fig. 4a), earliest finish by hand in rank order: n1 on P3 [0, 9]; n3 on P3 [9, 28]
    (P1 would end at 21 + 11, P2 at 21 + 13); n4 on P2 [18, 26]; n2 on P1 [27, 40]; n5 on P3 [28, 38]; n6 on P2
    [26, 42]; n9 on P2 [56, 68] (inputs by 56 there: n2's at 40 + 16; P1 ends at 51 + 18, P3 at 56 + 20); n7 on P3
    [38, 49]; n8 on P1 [57, 62]; n10 on P2 [73, 80]: makespan 80. No op of it fits an idle gap the paper's insertion
    would fill, so appending to each processor gives the same schedule."""
    g, c, w = _papers_example()
    s = ListSchedule(g, c, w, memory_aware=False)
    heft_schedule(s, static_rank(g, w, c))
    assert (s.op_device + 1).tolist() == [3, 1, 3, 2, 3, 2, 3, 1, 2, 2]
    assert s.start.tolist() == [0.0, 27.0, 9.0, 18.0, 28.0, 26.0, 38.0, 57.0, 56.0, 73.0]
    assert s.finish.max() == 80.0


def test_heft_appends_an_op_where_the_papers_insertion_would_fill_an_idle_gap():
    """The deviation the module docstring names, by hand: p (1 s) feeds y (4 s), z (1.5 s) and x (1 s) over 2 s links;
    w (0.5 s) stands alone and ranks last. p and y take d0 until 5; z and x wait for p's output on d1, from 3 to 5.5.
    Appended, w finishes at 5.5 on d0, 6 on d1: d0. The paper's insertion would start it at 0 in d1's idle gap."""
    from gnplace.cluster import Device
    from gnplace.toy import uniform_cluster

    c = uniform_cluster([Device(f"d{k}", "gpu", 1e12, 1e11, 2**30) for k in range(2)], bandwidth=1000.0, latency=0.0)
    g = OpGraph(["p", "y", "z", "x", "w"], [(0, 1), (0, 2), (0, 3)], out_bytes=[2000, 0, 0, 0, 0])
    t = np.array([[1.0, 1.0], [4.0, 4.0], [1.5, 1.5], [1.0, 1.0], [0.5, 0.5]])
    rank = static_rank(g, t, c)
    assert rank.tolist() == [7.0, 4.0, 1.5, 1.0, 0.5]
    s = ListSchedule(g, c, t, memory_aware=False)
    heft_schedule(s, rank)
    assert s.op_device.tolist() == [0, 0, 1, 1, 0]
    assert s.start.tolist() == [0.0, 1.0, 3.0, 4.5, 5.0]
