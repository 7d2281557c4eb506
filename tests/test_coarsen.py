"""Coarsening large graphs into groups, and expanding coarse placements."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from gnplace.cluster import load_cluster
from gnplace.coarsen import coarsen
from gnplace.graph_io import load_graph
from gnplace.placement import Placement
from gnplace.sim import Simulator
from gnplace.toy import layered_graph

ROOT = Path(__file__).resolve().parents[1]
GRAPHS = [ROOT / "datasets" / "cifar10" / "cifar10_000.gnpg", ROOT / "datasets" / "ptb" / "ptb_001.gnpg",
          ROOT / "datasets" / "nmt" / "nmt_001.gnpg"]


@pytest.mark.parametrize("path", GRAPHS, ids=lambda p: p.stem)
@pytest.mark.parametrize("num_groups", [8, 40])
def test_coarse_graph_is_a_dag_of_whole_colocation_groups(path, num_groups):
    g = load_graph(path)
    c = coarsen(g, num_groups, load_cluster("k80x4"))
    coarse = c.graph
    assert coarse.num_groups <= num_groups
    assert len(coarse.topological_order()) == coarse.num_ops  # validated DAG
    # every colocation group of the original lies in one part
    part_of_op = coarse.group[c.node_of_op]
    for unit in np.unique(g.group):
        assert np.unique(part_of_op[g.group == unit]).size == 1
    assert coarse.total_flops == pytest.approx(g.total_flops)
    assert coarse.total_param_bytes == g.total_param_bytes


@pytest.mark.parametrize("path", GRAPHS, ids=lambda p: p.stem)
def test_coarse_op_times_sum_the_ops_they_hold(path):
    g = load_graph(path)
    cluster = load_cluster("cpu_gpu")
    c = coarsen(g, 16, cluster)
    sim = Simulator()
    for device in range(cluster.num_devices):
        full = sim.time(g, cluster, np.full(g.num_ops, device)).step_time
        coarse = sim.time(c.graph, cluster, np.full(c.graph.num_ops, device)).step_time
        assert coarse == pytest.approx(full, rel=1e-9)


def test_expand_puts_every_op_on_its_nodes_device():
    g = layered_graph(600, seed=2)
    cluster = load_cluster("k80x4")
    c = coarsen(g, 12, cluster)
    rng = np.random.default_rng(0)
    per_group = rng.integers(0, 4, c.graph.num_groups)
    coarse = Placement.from_groups(c.graph, cluster, per_group)
    full = c.expand(coarse)
    assert np.array_equal(full.devices, coarse.devices[c.node_of_op])
    assert not full.splits_groups(g)
    Simulator().time(g, cluster, full)  # a valid placement of the original graph


def test_small_graph_keeps_its_groups_and_bad_count_is_rejected():
    g = layered_graph(50, seed=0)
    c = coarsen(g, 1000, load_cluster("k80x2"))
    assert c.graph.num_groups == g.num_groups
    with pytest.raises(ValueError, match="at least 1"):
        coarsen(g, 0, load_cluster("k80x2"))


def test_deterministic():
    g = load_graph(GRAPHS[0])
    a = coarsen(g, 30, load_cluster("k80x4"), seed=1)
    b = coarsen(g, 30, load_cluster("k80x4"), seed=1)
    assert a.graph == b.graph and np.array_equal(a.node_of_op, b.node_of_op)
