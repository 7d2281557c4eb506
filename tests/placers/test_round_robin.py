"""Tests of the ``round_robin`` placer: groups dealt to devices in topological order."""

from __future__ import annotations

import numpy as np
import pytest

from gnplace.cluster import load_cluster
from gnplace.graph import OpGraph
from gnplace.placement import Placement
from gnplace.placers.base import group_order
from gnplace.placers.round_robin import RoundRobinPlacer
from gnplace.toy import chain_graph, layered_graph, mlp_training_graph


def test_name_and_repr():
    assert RoundRobinPlacer.name == "round_robin"
    assert repr(RoundRobinPlacer()) == "RoundRobinPlacer()"


@pytest.mark.parametrize(
    "preset, expected",
    [
        ("k80x2", [0, 1, 0, 1, 0]),
        ("k80x4", [0, 1, 2, 3, 0]),
        ("v100x8", [0, 1, 2, 3, 4]),
        ("cpu_gpu", [0, 1, 0, 1, 0]),
    ],
)
def test_chain(preset, expected):
    p = RoundRobinPlacer().place(chain_graph(5), load_cluster(preset))
    assert isinstance(p, Placement)
    assert p.devices.tolist() == expected


def test_follows_topological_order_not_index_order():
    # indices run backwards along the chain: e -> d -> c -> b -> a
    g = OpGraph(list("abcde"), [(4, 3), (3, 2), (2, 1), (1, 0)])
    p = RoundRobinPlacer().place(g, load_cluster("k80x4"))
    assert p.devices.tolist() == [0, 3, 2, 1, 0]


def test_colocation_groups_stay_together():
    g = mlp_training_graph(layers=5, width=8, batch=4, branches=2)
    c = load_cluster("k80x4")
    p = RoundRobinPlacer().place(g, c)
    assert not p.splits_groups(g)
    order = group_order(g)
    per_group = np.empty(g.num_groups, dtype=int)
    per_group[g.group] = p.devices
    assert per_group[order].tolist() == (np.arange(g.num_groups) % 4).tolist()


def test_groups_dealt_in_order_of_first_op():
    # groups: x,z share group 0; y is group 1; w group 2. Topological order y, x, w, z
    g = OpGraph(["x", "y", "z", "w"], [(1, 0), (0, 3), (3, 2)], group=[0, 1, 0, 2])
    assert group_order(g).tolist() == [1, 0, 2]
    p = RoundRobinPlacer().place(g, load_cluster("k80x4"))
    assert p.devices.tolist() == [1, 0, 1, 2]


def test_spreads_evenly():
    g = layered_graph(103, seed=4)
    counts = np.bincount(RoundRobinPlacer().place(g, load_cluster("k80x4")).devices, minlength=4)
    assert counts.max() - counts.min() <= 1
    assert counts.sum() == 103


def test_deterministic_and_seed_unused():
    g, c = layered_graph(60, seed=1), load_cluster("v100x8")
    runs = [RoundRobinPlacer().place(g, c, seed=s).devices.tolist() for s in (None, 0, 7)]
    assert runs[0] == runs[1] == runs[2]


def test_single_device_cluster(one_device_cluster):
    p = RoundRobinPlacer().place(chain_graph(4), one_device_cluster)
    assert p.devices.tolist() == [0, 0, 0, 0]


def test_empty_graph():
    p = RoundRobinPlacer().place(OpGraph([], []), load_cluster("k80x2"))
    assert p.devices.tolist() == []
