"""Tests of the ``m_etf`` placer: memory-constrained Earliest Task First list scheduling.

The memory guarantee on random graphs is tested for every heuristic placer in ``test_groups.py``.
"""

from __future__ import annotations

import numpy as np
import pytest

from gnplace.cluster import load_cluster
from gnplace.graph import OpGraph
from gnplace.placement import Placement
from gnplace.placers.m_etf import METFPlacer
from gnplace.placers.single import SinglePlacer
from gnplace.sim.simulator import Simulator
from gnplace.toy import chain_graph, layered_graph, mlp_training_graph


def test_name_and_repr():
    assert METFPlacer.name == "m_etf"
    assert repr(METFPlacer()) == "METFPlacer(memory_aware=True, min_speed=0.5)"
    assert repr(METFPlacer(memory_aware=False, min_speed=0.0)) == "METFPlacer(memory_aware=False, min_speed=0.0)"


def test_two_independent_chains_get_one_device_each(two_chains):
    devices = METFPlacer().place(two_chains(), load_cluster("k80x2")).devices.tolist()
    assert devices in ([0] * 4 + [1] * 4, [1] * 4 + [0] * 4)


def test_chain_with_huge_transfers_stays_on_one_device():
    p = METFPlacer().place(chain_graph(6, flops=1e6, out_bytes=10**9), load_cluster("k80x4"))
    assert len(set(p.devices.tolist())) == 1


def test_graph_that_only_fits_split_is_not_oom(only_fits_split):
    g, c = only_fits_split
    sim = Simulator()
    assert sim.time(g, c, SinglePlacer().place(g, c)).is_oom  # the premise: no single device holds it
    p = METFPlacer().place(g, c)
    assert not p.splits_groups(g)
    assert not sim.time(g, c, p).is_oom


def test_memory_aware_false_ignores_memory(only_fits_split):
    g, c = only_fits_split
    assert Simulator().time(g, c, METFPlacer(memory_aware=False).place(g, c)).is_oom  # ETF keeps a chain together


def test_groups_stay_on_devices_with_room_while_some_have_room():
    # four 600 MiB groups on four 1 GiB devices: ETF alone would keep the chain on one device
    g = OpGraph([f"n{i}" for i in range(4)], [(0, 1), (1, 2), (2, 3)], flops=[1e9] * 4, out_bytes=[1000] * 4,
                param_bytes=[600 * 2**20] * 4)
    assert sorted(METFPlacer().place(g, load_cluster("tight4")).devices.tolist()) == [0, 1, 2, 3]


def test_keeps_groups_and_is_deterministic():
    g, c = layered_graph(300, seed=3).replace(group=np.arange(300) // 3), load_cluster("k80x4")
    p = METFPlacer().place(g, c, seed=1)
    assert isinstance(p, Placement) and not p.splits_groups(g)
    assert p == METFPlacer().place(g, c, seed=2)


def test_heavy_groups_stay_off_a_slow_cpu():
    g, c = mlp_training_graph(layers=4, width=1024, batch=128), load_cluster("cpu_gpu")
    assert set(METFPlacer().place(g, c).devices.tolist()) == {1}


def test_min_speed_zero_lets_etf_use_an_idle_cpu():
    g, c = OpGraph([f"n{i}" for i in range(8)], flops=[1e9] * 8), load_cluster("cpu_gpu")
    assert 0 in METFPlacer(min_speed=0.0).place(g, c).devices.tolist()  # the idle CPU starts ops earliest
    assert 0 not in METFPlacer().place(g, c).devices.tolist()


@pytest.mark.parametrize("cluster", ["k80x2", "k80x4"])
def test_against_single_and_round_robin_on_the_example(cluster, example_step_times):
    ours, single, robin = example_step_times(METFPlacer(), cluster)
    assert ours <= single
    # ETF fixes a layer's group when it schedules the layer's forward op, so it cannot foresee that
    # alternating layers lets one layer's weight gradient overlap the next one's data gradient, the
    # overlap round robin gets by accident: it matches round robin on two GPUs, not on four.
    assert ours <= robin * (1 + 1e-9) if cluster == "k80x2" else ours <= 1.3 * robin


def test_places_2000_ops_on_4_devices_using_them_all():
    """The size ``bench.py placers`` times (speed lives there, not in a test): every device used, faster than one."""
    g, c = layered_graph(2000), load_cluster("k80x4")
    placement = METFPlacer().place(g, c)
    assert set(placement.devices.tolist()) == {0, 1, 2, 3}
    sim = Simulator()
    assert sim.time(g, c, placement).step_time < sim.time(g, c, SinglePlacer().place(g, c)).step_time
