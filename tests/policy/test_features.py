"""Features of a graph and a cluster as the policy sees them, and the decision graph."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from gnplace.cluster import load_cluster
from gnplace.graph_io import load_graph
from gnplace.policy.features import (
    DEVICE_FEATURES,
    EDGE_FEATURES,
    NODE_FEATURES,
    build_policy_input,
    decision_graph,
)
from gnplace.sim.simulator import Simulator
from gnplace.toy import layered_graph, mixed_cluster, mlp_training_graph

ROOT = __import__("pathlib").Path(__file__).resolve().parents[2]


def test_shapes_and_finite_values():
    g, c = mlp_training_graph(layers=4, width=128, batch=16, branches=2), load_cluster("k80x4")
    inp = build_policy_input(g, c)
    n, e = inp.decision.num_ops, inp.decision.num_edges
    assert inp.node_x.shape == (n, len(NODE_FEATURES)) and inp.edge_x.shape == (e, len(EDGE_FEATURES))
    assert inp.device_x.shape == (4, len(DEVICE_FEATURES)) and inp.edge_index.shape == (2, e)
    assert inp.op_time.shape == (n, 4) and inp.group_time.shape == (inp.num_groups, 4)
    for t in (inp.node_x, inp.edge_x, inp.device_x):
        assert t.dtype == torch.float32 and torch.isfinite(t).all()
    assert inp.num_groups == g.num_groups  # small graphs keep every colocation group


def test_the_priority_order_is_topological():
    inp = build_policy_input(layered_graph(300, seed=2), load_cluster("k80x4"))
    position = np.empty_like(inp.order)
    position[inp.order] = np.arange(inp.order.size)
    assert np.all(position[inp.decision.edge_src] < position[inp.decision.edge_dst])


def test_expand_and_groups_of_invert_each_other():
    g, c = mlp_training_graph(layers=3, width=64, batch=8), load_cluster("k80x2")
    inp = build_policy_input(g, c)
    groups = np.array([1, 0, 1, 0])
    devices = inp.expand(groups)
    assert devices.shape == (g.num_ops,) and inp.groups_of(devices).tolist() == groups.tolist()
    assert inp.expand(np.stack([groups, 1 - groups])).shape == (2, g.num_ops)


def test_large_graphs_are_coarsened_to_the_node_limit():
    g = layered_graph(3000, seed=1)
    co = decision_graph(g, load_cluster("k80x4"), max_nodes=400)
    assert co.graph.num_ops <= 400 and co.node_of_op.shape == (3000,)


def test_kinds_histogram_sums_to_one_per_node():
    g = load_graph(ROOT / "datasets" / "examples" / "mlp2x8w2048b512.gnpg")
    inp = build_policy_input(g, load_cluster("k80x2"))
    kinds = [i for i, name in enumerate(NODE_FEATURES) if name.startswith("kind_")]
    phases = [NODE_FEATURES.index(p) for p in ("forward", "backward", "update")]
    assert torch.allclose(inp.node_x[:, kinds].sum(1), torch.ones(inp.decision.num_ops))
    assert torch.allclose(inp.node_x[:, phases].sum(1), torch.ones(inp.decision.num_ops))


def test_size_normalisation_makes_a_graph_and_its_double_alike():
    # features are relative: a chain of twice the length has the same feature ranges
    small = build_policy_input(layered_graph(200, width=1, seed=3), load_cluster("k80x2"))
    large = build_policy_input(layered_graph(400, width=1, seed=3), load_cluster("k80x2"))
    for name in ("depth", "t_level", "b_level"):
        i = NODE_FEATURES.index(name)
        assert float(small.node_x[:, i].max()) == pytest.approx(float(large.node_x[:, i].max()), abs=0.05)


def test_device_features_see_heterogeneity():
    g = layered_graph(100, seed=0)
    inp = build_policy_input(g, mixed_cluster())
    speed = inp.device_x[:, DEVICE_FEATURES.index("speed")]
    assert speed.argmax() == 2 and speed.max() == 0.0 and speed.min() < 0  # the V100 is the fastest


def test_op_times_come_from_the_timers_cost_model():
    g, c = mlp_training_graph(layers=2, width=64, batch=8), load_cluster("k80x2")
    placeto = Simulator("placeto").cost_model
    a = build_policy_input(g, c)
    b = build_policy_input(g, c, cost_model=placeto)
    assert a.op_time.shape == b.op_time.shape


def test_device_features_stay_finite_and_quiet_at_extreme_accepted_values():
    """A device of 1e-320 bytes beside 12 GiB ones, or links whose rates sum past a float, made -inf and NaN
    features, numpy's warnings and a NaN loss in a search ("training diverged ...; lower the learning rate")."""
    import dataclasses
    import warnings

    from gnplace.cluster import Cluster

    k80x2 = load_cluster("k80x2")
    tiny = Cluster([dataclasses.replace(k80x2.devices[0], memory=1e-320), k80x2.devices[1]], k80x2.bandwidth,
                   k80x2.latency, name="tiny")
    fast = load_cluster("k80x4")
    fast = Cluster(list(fast.devices), np.full((4, 4), 1e308), fast.latency, name="fast")
    graph = layered_graph(30, seed=0)
    for cluster in (tiny, fast):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            inp = build_policy_input(graph, cluster)
        assert torch.isfinite(inp.device_x).all(), cluster.name
    assert build_policy_input(graph, tiny).device_x[0, 2] == -50.0  # the memory share's floor


def test_one_standardisation_serves_every_policy_feature():
    """features.py and seq2seq.py each wrote their own ``(v - mean) / std`` helper; seq2seq uses the features' one."""
    import inspect

    from gnplace.policy import seq2seq
    from gnplace.policy.features import standardise

    assert standardise(np.array([1.0, 2.0, 3.0])).tolist() == pytest.approx([-1.224744871, 0.0, 1.224744871])
    assert standardise(np.full(3, 7.0)).tolist() == [0.0, 0.0, 0.0]
    assert standardise(np.zeros(0)).shape == (0,)
    assert seq2seq.standardise is standardise and "def _standardise" not in inspect.getsource(seq2seq)
