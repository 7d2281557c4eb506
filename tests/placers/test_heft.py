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
