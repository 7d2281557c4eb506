"""Tests of the ``metis`` placer: a compute-balanced, cut-minimising partition of the group graph.

The memory guarantee on random graphs is tested for every heuristic placer in ``test_groups.py``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from gnplace.cluster import cluster_from_dict, load_cluster
from gnplace.graph import OpGraph
from gnplace.placers.metis import MetisPlacer, _integer_weights, partition_groups
from gnplace.sim.costmodel import op_times
from gnplace.sim.simulator import Simulator
from gnplace.toy import chain_graph, layered_graph, mlp_training_graph


def fast_and_slow():
    """Two GPUs on PCIe, one three times faster than the other."""
    return cluster_from_dict(
        {
            "name": "fast_and_slow",
            "devices": [
                {"name": "fast", "kind": "fast", "peak_flops": 3e13, "mem_bandwidth": 9e11, "memory": 16 * 2**30},
                {"name": "slow", "kind": "slow", "peak_flops": 1e13, "mem_bandwidth": 9e11, "memory": 16 * 2**30},
            ],
            "links": {"default": "pcie3"},
        }
    )


def test_name_and_repr():
    assert MetisPlacer.name == "metis"
    assert repr(MetisPlacer()) == "MetisPlacer(min_speed=0.1, memory_aware=True)"
    assert repr(MetisPlacer(min_speed=0.0, memory_aware=False)) == "MetisPlacer(min_speed=0.0, memory_aware=False)"


def test_partition_groups_balances_and_cuts_little():
    parts = partition_groups(chain_graph(8), np.ones(8), 2)
    assert sorted(np.bincount(parts).tolist()) == [4, 4]
    assert int(np.sum(parts[1:] != parts[:-1])) == 1  # one cut edge: two contiguous halves


def test_partition_groups_edge_cases():
    assert partition_groups(chain_graph(3), np.ones(3), 1).tolist() == [0, 0, 0]
    assert partition_groups(chain_graph(3), np.ones(3), 4).tolist() == [0, 1, 2]  # fewer groups than parts
    isolated = OpGraph(["a", "b", "c", "d"], flops=[1e9] * 4)  # no edges at all
    assert sorted(np.bincount(partition_groups(isolated, np.ones(4), 2), minlength=2).tolist()) == [2, 2]


def test_two_independent_chains_get_one_device_each(two_chains):
    devices = MetisPlacer().place(two_chains(), load_cluster("k80x2"), seed=0).devices.tolist()
    assert devices in ([0] * 4 + [1] * 4, [1] * 4 + [0] * 4)


def test_groups_are_contracted():
    g = mlp_training_graph(layers=6, width=64, batch=8)
    p = MetisPlacer().place(g, load_cluster("k80x4"), seed=0)
    assert not p.splits_groups(g)


def test_faster_device_gets_more_work():
    g, c = chain_graph(40), fast_and_slow()
    p = MetisPlacer().place(g, c, seed=0)
    busy = np.bincount(p.devices, weights=op_times(g, c)[np.arange(g.num_ops), p.devices], minlength=2)
    counts = np.bincount(p.devices, minlength=2)
    assert counts[0] > 2 * counts[1]  # about 3 : 1 by speed
    assert busy[0] == pytest.approx(busy[1], rel=0.35)


def test_groups_are_weighed_by_their_seconds_on_the_fastest_device(monkeypatch):
    """METIS's vertex weights are each group's seconds on the fastest device (``fast``), not on another one."""
    from gnplace.placers import metis

    g, c = layered_graph(80, seed=0), fast_and_slow()
    weights = []
    partition = metis.partition_groups

    def spy(graph, weight, parts, **kwargs):
        weights.append(np.array(weight))
        return partition(graph, weight, parts, **kwargs)

    monkeypatch.setattr(metis, "partition_groups", spy)
    MetisPlacer().place(g, c, seed=0)
    times = op_times(g, c)
    on_fast, on_slow = (np.bincount(g.group, weights=times[:, d], minlength=g.num_groups) for d in (0, 1))
    assert len(weights) == 1 and not np.allclose(on_fast / on_fast.sum(), on_slow / on_slow.sum())
    np.testing.assert_allclose(weights[0], on_fast, rtol=1e-12)


def test_a_partition_that_overflows_a_device_is_repaired():
    """A balanced partition put half the work on a device with room for a fifth of the parameters: repaired."""
    import dataclasses

    from gnplace.cluster import Cluster

    k80x2 = load_cluster("k80x2")
    g = mlp_training_graph(layers=4, width=256, batch=32)
    small = dataclasses.replace(k80x2.devices[1], memory=int(0.2 * g.total_param_bytes))
    c = Cluster([k80x2.devices[0], small], k80x2.bandwidth, k80x2.latency, name="lopsided")
    p = MetisPlacer().place(g, c, seed=0)
    assert not Simulator().time(g, c, p).is_oom
    assert Simulator().time(g, c, MetisPlacer(memory_aware=False).place(g, c, seed=0)).is_oom


def test_a_much_slower_cpu_is_left_out_unless_min_speed_allows_it():
    g, c = mlp_training_graph(layers=4, width=512, batch=64), load_cluster("cpu_gpu")
    assert set(MetisPlacer().place(g, c, seed=0).devices.tolist()) == {1}
    assert 0 in MetisPlacer(min_speed=0.0).place(layered_graph(200, seed=1), c, seed=0).devices.tolist()


def test_graph_that_only_fits_split_is_not_oom(only_fits_split):
    g, c = only_fits_split
    p = MetisPlacer().place(g, c, seed=0)
    assert not p.splits_groups(g)
    assert not Simulator().time(g, c, p).is_oom


def test_is_deterministic_under_seed():
    g, c = layered_graph(400, seed=2).replace(group=np.arange(400) // 4), load_cluster("k80x4")
    assert MetisPlacer().place(g, c, seed=3) == MetisPlacer().place(g, c, seed=3)
    assert MetisPlacer().place(g, c) == MetisPlacer().place(g, c)


@pytest.mark.parametrize("cluster", ["k80x2", "k80x4"])
def test_against_single_and_round_robin_on_the_example(cluster, example_step_times):
    ours, single, robin = example_step_times(MetisPlacer(), cluster, seed=0)
    assert ours <= single
    # a min-cut partition keeps neighbouring layers together, so it overlaps less of the backward
    # pass than round robin's alternating layers on four GPUs (see test_m_etf.py)
    assert ours <= robin * (1 + 1e-9) if cluster == "k80x2" else ours <= 1.3 * robin


def test_metis_notes_printed_from_c_stay_off_stdout(capfd):
    # ptb_017 (72 groups) on this random 8-device cluster makes METIS print "***Cannot bisect a graph with
    # 0 vertices!" from C: past sys.stdout, into a progress bar or a --json document
    from gnplace.cluster_sampler import random_cluster
    from gnplace.graph_io import load_graph

    graph = load_graph(Path(__file__).resolve().parents[2] / "datasets" / "ptb" / "ptb_017.gnpg")
    placement = MetisPlacer().place(graph, random_cluster(1001), seed=0)
    assert placement.devices.shape == (graph.num_ops,)
    assert capfd.readouterr().out == ""


def test_a_pymetis_without_the_api_used_is_refused_in_one_line(monkeypatch):
    """pymetis < 2025.2 (the floor was 2023.1) has no CSRAdjacency nor tpwgts: every partition was a TypeError."""
    import pymetis

    from gnplace.exceptions import MissingDependency

    monkeypatch.delattr(pymetis, "CSRAdjacency")
    with pytest.raises(MissingDependency, match=r"pymetis 2025\.2 or later.*pip install"):
        partition_groups(chain_graph(6), np.ones(6), 2)
    with pytest.raises(MissingDependency, match=r"pymetis 2025\.2 or later"):
        MetisPlacer().place(chain_graph(6), load_cluster("k80x2"), seed=0)


def test_the_declared_pymetis_floor_has_the_api_used():
    import tomllib

    from gnplace.placers.metis import PYMETIS_FLOOR

    pyproject = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())
    assert f"pymetis>={PYMETIS_FLOOR}" in pyproject["project"]["dependencies"]


@pytest.mark.parametrize("parts, recursive", [(2, True), (8, True), (9, False), (16, False)])
def test_the_metis_method_is_chosen_here_not_by_pymetiss_default(metis_methods, parts, recursive):
    """Up to 8 parts recursive bisection (0.1% per bisection), past it k-way (3%): the docstring said k-way, 3%.

    pymetis chose by the same rule when not told; a pymetis with another rule would change every placement.
    """
    g = layered_graph(200, width=4, seed=0)
    partition_groups(g, np.ones(g.num_groups), parts, seed=0)
    assert metis_methods == [recursive]


def test_recursive_bisection_balances_a_large_graph_within_about_one_percent():
    rng = np.random.default_rng(0)
    g = layered_graph(3000, width=6, seed=rng)
    weight = rng.uniform(0.5, 2, g.num_groups)
    for parts in (2, 4, 8):
        fractions = rng.uniform(0.5, 2, parts)
        load = np.bincount(partition_groups(g, weight, parts, fractions=fractions, seed=0), weights=weight,
                           minlength=parts)
        assert (load / (fractions / fractions.sum() * weight.sum())).max() <= 1.015


def test_metis_weights_are_positive_even_for_groups_of_no_seconds_or_bytes():
    """A vertex or edge of weight 0 would count for nothing in METIS's balance and cut: every weight is 1 + its
    share of ``total``, rounded down."""
    weights = _integer_weights(np.array([0.0, 1.0, 3.0]), 100.0)
    assert weights.tolist() == [1, 26, 76]
    assert weights.dtype == np.int64
    assert _integer_weights(np.zeros(3), 100.0).tolist() == [1, 1, 1]


@pytest.mark.parametrize("heavy, together", [((0, 3), [[0, 1], [2, 3]]), ((1, 2), [[0, 2], [1, 3]])])
def test_the_cut_keeps_the_heavy_edges_inside_a_part(heavy, together):
    """Edges are weighted by bytes: of a diamond's two balanced cuts, each of two edges, the one of light edges.

    Without the bytes METIS sees the same graph in both cases and cuts it the same way, wrong in one of them.
    """
    edge_bytes = [1e3] * 4
    for e in heavy:
        edge_bytes[e] = 1e9
    g = OpGraph(["a", "b", "c", "d"], [(0, 1), (0, 2), (1, 3), (2, 3)], edge_bytes=edge_bytes)
    for seed in range(3):
        parts = partition_groups(g, np.ones(4), 2, seed=seed)
        assert [sorted(np.flatnonzero(parts == parts[i]).tolist()) for i in (together[0][0], together[1][0])] == together
