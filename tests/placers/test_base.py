"""The ``Placer`` protocol and ``group_order``, which every placer builds on."""

from __future__ import annotations

import numpy as np
import pytest

from gnplace.cluster import load_cluster
from gnplace.graph import OpGraph
from gnplace.placement import Placement
from gnplace.placers import PLACERS
from gnplace.placers.base import Placer, group_order
from gnplace.toy import layered_graph


def backwards_graph() -> OpGraph:
    """Five ops whose group ids (by index) run against the topological order.

    Edges ``v3 -> v1 -> v0 -> v2``, ``v4`` alone; groups ``[0, 1, 0, 2, 1]``. Topological order
    (Kahn, ties by index) is ``v3, v4, v1, v0, v2``, so groups appear as 2, 1, 1, 0, 0.
    """
    return OpGraph([f"v{i}" for i in range(5)], [(3, 1), (1, 0), (0, 2)], group=[0, 1, 0, 2, 1], name="backwards")


def test_group_order_follows_the_topological_order_not_the_ids():
    g = backwards_graph()
    assert g.topological_order().tolist() == [3, 4, 1, 0, 2]
    assert g.group.tolist() == [0, 1, 0, 2, 1]
    order = group_order(g)
    assert order.tolist() == [2, 1, 0]
    assert order.dtype == np.int64


def test_group_order_of_a_reversed_chain():
    g = OpGraph(["a", "b", "c", "d"], [(3, 2), (2, 1), (1, 0)])
    assert group_order(g).tolist() == [3, 2, 1, 0]


def test_group_order_lists_each_group_once_by_its_first_op():
    g = layered_graph(60, width=6, seed=3)
    grouped = g.replace(group=(np.arange(g.num_ops) * 7) % 11)  # groups spread across layers
    order = group_order(grouped)
    assert sorted(order.tolist()) == list(range(grouped.num_groups))
    position = {int(v): i for i, v in enumerate(grouped.topological_order())}
    first = [min(position[v] for v in np.flatnonzero(grouped.group == k).tolist()) for k in order.tolist()]
    assert first == sorted(first)


@pytest.mark.parametrize("seed", range(5))
def test_group_order_is_the_loop_over_the_topological_order(seed):
    """Numbered by numpy, the order of the loop that listed each group at its first op in topological order."""
    rng = np.random.default_rng(seed)
    g = layered_graph(int(rng.integers(1, 400)), width=int(rng.integers(1, 9)), seed=seed)
    grouped = g.replace(group=rng.permutation(rng.integers(0, max(1, g.num_ops // 3), g.num_ops)))
    grouped = grouped.replace(group=np.unique(grouped.group, return_inverse=True)[1])  # groups 0..k-1, each used
    seen, want = set(), []
    for v in grouped.topological_order().tolist():
        if int(grouped.group[v]) not in seen:
            seen.add(int(grouped.group[v]))
            want.append(int(grouped.group[v]))
    got = group_order(grouped)
    assert got.dtype == np.int64 and got.tolist() == want


def test_group_order_of_an_empty_graph():
    order = group_order(OpGraph([], []))
    assert order.shape == (0,) and order.dtype == np.int64


@pytest.mark.parametrize("name", sorted(PLACERS))
def test_every_registered_placer_is_a_placer(name):
    placer = PLACERS[name]()
    assert isinstance(placer, Placer)
    assert placer.name == name


class _Fixed:
    name = "fixed"

    def place(self, graph, cluster, *, seed=None):
        return Placement(np.zeros(graph.num_ops, dtype=np.int64), cluster)


class _Nameless:
    def place(self, graph, cluster, *, seed=None):
        return Placement(np.zeros(graph.num_ops, dtype=np.int64), cluster)


class _NoPlace:
    name = "no_place"


def test_any_object_with_a_name_and_place_is_a_placer():
    placer = _Fixed()
    assert isinstance(placer, Placer)
    g = backwards_graph()
    assert placer.place(g, load_cluster("k80x2")).devices.tolist() == [0] * 5


@pytest.mark.parametrize("obj", [_Nameless(), _NoPlace(), "single", None])
def test_objects_missing_name_or_place_are_not_placers(obj):
    assert not isinstance(obj, Placer)


def test_the_protocol_does_not_support_issubclass():
    # it has a data member (``name``), so only instances can be checked
    with pytest.raises(TypeError, match="non-method members"):
        issubclass(_Fixed, Placer)


def test_a_fraction_past_a_floats_range_is_refused_in_one_line():
    """``-O m_etf.min_speed=<400 digits>`` was an OverflowError traceback from ``math.isfinite``."""
    from gnplace.exceptions import InvalidArgument
    from gnplace.placers.base import check_fraction

    with pytest.raises(InvalidArgument, match=r"m_etf: min_speed must be a number in \[0, 1\]"):
        check_fraction("m_etf", "min_speed", 10**400)


def test_group_first_ops_are_by_group_id_where_ids_run_against_the_topological_order():
    from gnplace.placers.base import group_first_ops

    g = OpGraph(["a", "b", "c"], [(2, 1), (1, 0)], group=[0, 1, 1])  # c -> b -> a: group 1 comes first
    assert group_first_ops(g).tolist() == [0, 2]
