"""The contract every registered placer keeps, learned or not, checked on random graphs and clusters.

Every name in :data:`gnplace.placers.PLACERS` is tested (a placer that joins the registry joins this
suite): a valid placement of every op, colocation groups whole, the same placement for the same
seed, and, for placers that declare ``respects_memory``, no device out of memory whenever round
robin fits. Graphs are random layered DAGs with random colocation groups (hypothesis), clusters
have 1 to 4 devices whose memory is set just above what round robin needs.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gnplace.graph import OpGraph
from gnplace.placement import GraphKey, Placement
from gnplace.placers import PLACERS, make_placer
from gnplace.placers.round_robin import RoundRobinPlacer
from gnplace.sim.simulator import Simulator
from gnplace.toy import chain_graph, layered_graph, mixed_cluster, toy_cluster

#: Options that keep each placer quick on tiny graphs (search budgets, solver time); others take defaults.
FAST: dict[str, dict[str, Any]] = {
    "exact": {"time_limit": 0.05, "num_workers": 1},
    "ppo": {"samples": 8, "epochs": 2, "imitation_steps": 2},
    "reinforce": {"samples": 8, "imitation_steps": 2},  # (one step per batch: epochs is refused)
}
BUDGET = 30

NAMES = list(PLACERS)
#: The placers whose contract test took 5-16 s of CPU with 12 examples (0.2 s or less a graph for the others).
SLOW = {"ppo", "reinforce", "finetune", "spotlight", "post", "policy", "exact"}
#: The contract test of these takes 8 s or more (``heavy``: run first).
HEAVY = {"ppo"}


def placer_for(name: str) -> Any:
    """A fresh placer registered as ``name``, with a small budget where it takes one."""
    return make_placer(name, budget=BUDGET, **FAST.get(name, {}))


@st.composite
def grouped_graphs(draw: st.DrawFn) -> OpGraph:
    """A random layered DAG of 3 to 24 ops, grouped into runs of consecutive ops (at most 12 groups)."""
    num_ops = draw(st.integers(3, 24))
    graph = layered_graph(num_ops, width=draw(st.integers(1, 4)), seed=draw(st.integers(0, 2**16)))
    run = draw(st.integers(1, 3))
    groups = np.minimum(np.arange(num_ops) // run, 11)
    return graph.replace(group=groups)


def tight_cluster(graph: OpGraph, num_devices: int, slack: float):
    """``num_devices`` GPUs with ``slack`` times the memory round robin needs on its fullest device."""
    roomy = toy_cluster(num_devices)
    peak = Simulator().time(graph, roomy, RoundRobinPlacer().place(graph, roomy)).peak_memory.max()
    return toy_cluster(num_devices, memory=max(float(peak) * slack, 1.0), name="tight")


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.heavy) if n in HEAVY else n for n in NAMES])
def test_valid_whole_groups_deterministic_and_within_memory(name):
    """12 random graphs and clusters a placer, 6 for the searches and the solver (0.3-0.7 s a graph each)."""

    @settings(max_examples=6 if name in SLOW else 12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(graph=grouped_graphs(), num_devices=st.integers(1, 4), slack=st.floats(1.0, 1.5))
    def check(graph: OpGraph, num_devices: int, slack: float) -> None:
        cluster = tight_cluster(graph, num_devices, slack)
        placement = placer_for(name).place(graph, cluster, seed=7)
        placement.check(graph)
        assert_made_for(placement, graph)
        assert placement.cluster is cluster
        assert not placement.splits_groups(graph)
        again = placer_for(name).place(graph, cluster, seed=7)
        assert np.array_equal(placement.devices, again.devices), "same seed, same placement"
        result = Simulator().time(graph, cluster, placement)
        if PLACERS.info(name).respects_memory:
            assert not result.is_oom, f"{name} ran out of memory where round robin fits"

    check()


def assert_made_for(placement: Placement, graph: OpGraph) -> None:
    """``placement`` says it was made for ``graph`` (not for a coarsened graph, not unknown)."""
    assert placement.made_for is not None, "a placer's placement names the graph it was made for"
    assert placement.made_for.digest == GraphKey.of(graph).digest


@pytest.mark.parametrize("name", NAMES)
def test_placement_is_made_for_the_graph_given(name):
    tight = layered_graph(20, width=4, seed=5).replace(group=np.arange(20) // 2)
    cases = [
        (tight, tight_cluster(tight, 3, 1.0)),  # memory just enough: repairs and fallbacks
        (layered_graph(16, width=4, seed=3).replace(group=np.arange(16) // 2), mixed_cluster()),
        (chain_graph(4), toy_cluster(1)),  # the one-device shortcuts
        (chain_graph(1), toy_cluster(3)),
        (chain_graph(0), toy_cluster(2)),  # no ops: the early returns
    ]
    for graph, cluster in cases:
        assert_made_for(placer_for(name).place(graph, cluster, seed=3), graph)


@pytest.mark.parametrize("name", NAMES)
def test_the_same_placer_object_is_reusable(name):
    graph, cluster = layered_graph(16, width=4, seed=3).replace(group=np.arange(16) // 2), mixed_cluster()
    placer = placer_for(name)
    first = placer.place(graph, cluster, seed=1)
    placer.place(chain_graph(5), toy_cluster(3), seed=2)
    assert np.array_equal(placer.place(graph, cluster, seed=1).devices, first.devices)


@pytest.mark.parametrize("name", NAMES)
def test_one_device_and_one_op(name):
    one = toy_cluster(1)
    assert placer_for(name).place(chain_graph(4), one, seed=0).devices.tolist() == [0, 0, 0, 0]
    assert placer_for(name).place(chain_graph(1), toy_cluster(3), seed=0).devices.shape == (1,)


@pytest.mark.parametrize("name", NAMES)
def test_declares_its_metadata(name):
    info = PLACERS.info(name)
    assert PLACERS[name].name == name
    assert info.accepts <= {"timer", "budget", "checkpoint"}
    assert info.summary, "the class docstring's first line describes the placer"
    assert "budget" not in info.accepts or "timer" in info.accepts  # a budget counts timer evaluations


@pytest.mark.parametrize("name", NAMES)
def test_every_placer_refuses_a_seed_no_generator_takes(name):
    """The deterministic placers (single, heft, ...) took ``seed="abc"`` or ``-1`` without a word."""
    from gnplace.exceptions import InvalidArgument

    graph, cluster = chain_graph(4), toy_cluster(2)
    for seed in ("abc", -1, 1.5, True):
        with pytest.raises(InvalidArgument, match="seed must be"):
            placer_for(name).place(graph, cluster, seed=seed)


@pytest.mark.parametrize("name", NAMES)
def test_every_placer_refuses_what_is_no_graph_or_cluster(name, tmp_path):
    """A preset's name or a file path where the object belongs was an AttributeError deep inside."""
    from gnplace.exceptions import InvalidArgument
    from gnplace.graph_io import save_graph

    graph, cluster = chain_graph(4), toy_cluster(2)
    path = save_graph(graph, tmp_path / "g.gnpg")
    for args, what in (((graph, "k80x2"), "cluster must be a Cluster"), ((str(path), cluster), "graph must be an OpGraph"),
                       ((path, cluster), "graph must be an OpGraph")):
        with pytest.raises(InvalidArgument, match=what):
            placer_for(name).place(*args, seed=0)
