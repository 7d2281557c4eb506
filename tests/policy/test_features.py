"""Features of a graph and a cluster as the policy sees them, and the decision graph."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gnplace.cluster import load_cluster
from gnplace.graph_io import load_graph
from gnplace.policy.features import (
    DEVICE_FEATURES,
    EDGE_FEATURES,
    NODE_FEATURES,
    _priority_order,
    build_policy_input,
    decision_graph,
)
from gnplace.sim.simulator import Simulator
from gnplace.toy import chain_graph, layered_graph, mixed_cluster, mlp_training_graph

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


def test_the_repr_names_the_graphs_and_cluster_in_one_short_line():
    """Printing a policy input printed its arrays and tensors: 11,000 characters for bert_base."""
    g, c = load_graph(ROOT / "datasets/real/bert_base.gnpg"), load_cluster("v100x8")
    inp = build_policy_input(g, c)
    text = repr(inp)
    assert text == f"PolicyInput(graph={g!r}, cluster={c!r}, decision={inp.decision!r})" and len(text) < 400
    assert repr(inp.coarsening) == f"Coarsening(graph={inp.decision!r}, original={g!r})"


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


def test_features_of_a_tiny_graph_equal_hand_computed_values():
    """a -> b -> c and a -> c, with d alone, on two devices of measured times [[1, 3], [2, 2], [3, 1], [10, 10]] s.

    Edges carry a's 1 GB (1 s at 1 GB/s) and b's 2 GB (2 s), plus the mean latency 20 us. Mean times are 2, 2, 2
    and 10 s: b_level (upward rank) [9, 6, 2, 10], t_level [0, 3, 7, 0], critical path 10 (d).
    """
    import math

    from gnplace.cluster import Cluster, Device
    from gnplace.graph import OpGraph
    from gnplace.policy.features import DEVICE_FEATURES, EDGE_FEATURES, NODE_FEATURES, ops_alone

    devices = [Device("d0", "x", 1e12, 1e11, 1000), Device("d1", "y", 1e12, 1e11, 1000)]
    c = Cluster(devices, np.full((2, 2), 1e9), np.array([[0.0, 1e-5], [3e-5, 0.0]]), name="xy")
    g = OpGraph(["a", "b", "c", "d"], [(0, 1), (1, 2), (0, 2)], out_bytes=[10**9, 2 * 10**9, 0, 0],
                cost_s={"x": [1.0, 2.0, 3.0, 10.0], "y": [3.0, 2.0, 1.0, 10.0]}, group=[0, 0, 1, 2])
    inp = build_policy_input(g, c, coarsening=ops_alone(g), held=np.array([1.0, 2.0, 3.0, 4.0]))

    def node(name):
        return inp.node_x[:, NODE_FEATURES.index(name)].tolist()

    assert inp.order.tolist() == [3, 0, 1, 2]  # by upward rank, highest first
    assert inp.group_bytes.tolist() == [3.0, 3.0, 4.0]  # held bytes summed per group
    assert node("time_spread") == pytest.approx([math.log(3), 0.0, math.log(3), 0.0], abs=1e-6)  # slowest / fastest
    assert node("depth") == pytest.approx([0.0, 0.5, 1.0, 0.0])
    assert node("t_level") == pytest.approx([0.0, 0.3, 0.7, 0.0], abs=1e-4)
    assert node("b_level") == pytest.approx([0.9, 0.6, 0.2, 1.0], abs=1e-4)
    assert node("log_in_degree") == pytest.approx([0.0, math.log(2), math.log(3), 0.0])
    assert node("log_out_degree") == pytest.approx([math.log(3), math.log(2), 0.0, 0.0])
    edges = inp.edge_index.t().tolist()
    mean_fastest = (1 + 2 + 1 + 10) / 4
    for (u, w), row in zip(edges, inp.edge_x.tolist(), strict=True):
        seconds = (1.0 if u == 0 else 2.0) + 2e-5
        assert row[EDGE_FEATURES.index("transfer_time")] == pytest.approx(math.log1p(seconds / mean_fastest))
        assert row[EDGE_FEATURES.index("same_group")] == (1.0 if (u, w) == (0, 1) else 0.0)
    device = inp.device_x
    assert device[:, DEVICE_FEATURES.index("capacity_over_need")].tolist() == pytest.approx([math.log(100)] * 2)
    assert device[:, DEVICE_FEATURES.index("log_link_latency")].tolist() == pytest.approx([math.log(2), math.log(4)])


def test_a_reused_coarsening_or_held_bytes_of_another_graph_are_refused():
    """A decision graph of another graph of as many ops gave its features and a map whose placements split this
    graph's groups, without a word; of another size, or ``held`` of another length, a numpy ValueError."""
    from gnplace.exceptions import InvalidArgument

    cluster = load_cluster("k80x2")
    graph, other = layered_graph(100, seed=1), layered_graph(100, seed=2)
    made = decision_graph(other, cluster, max_nodes=20)
    for wrong in (made, decision_graph(layered_graph(50, seed=1), cluster, max_nodes=20)):
        with pytest.raises(InvalidArgument, match=r"^build_policy_input: the coarsening is of graph 'layered"):
            build_policy_input(graph, cluster, coarsening=wrong)
    with pytest.raises(InvalidArgument, match=r"^build_policy_input: coarsening must be a Coarsening"):
        build_policy_input(graph, cluster, coarsening=np.zeros(100))
    with pytest.raises(InvalidArgument, match=r"^build_policy_input: held takes the bytes of each of the 100 ops"):
        build_policy_input(graph, cluster, held=np.ones(99))
    again = layered_graph(100, seed=1)  # the same graph made again: its coarsening is reused
    reused = build_policy_input(again, cluster, coarsening=decision_graph(graph, cluster, max_nodes=20))
    assert torch.equal(reused.node_x, build_policy_input(again, cluster, max_nodes=20).node_x)


def test_expanding_a_device_per_group_refuses_another_count_of_groups():
    """One entry too many was cut off without a word; one too few, an IndexError. Back from ops to groups, one
    device was spread over every group."""
    from gnplace.exceptions import InvalidPlacement

    inp = build_policy_input(mlp_training_graph(layers=3, width=64, batch=8), load_cluster("k80x2"))
    assert inp.expand(np.zeros((2, inp.num_groups))).shape == (2, inp.graph.num_ops)
    for shape in ((inp.num_groups + 1,), (inp.num_groups - 1,), (3, inp.num_groups + 1), ()):
        with pytest.raises(InvalidPlacement, match=f"takes {inp.num_groups} entries"):
            inp.expand(np.zeros(shape, dtype=np.int64))
    assert inp.groups_of(inp.expand([1, 0, 1, 0])).tolist() == [1, 0, 1, 0]
    for devices in ([1], 1, np.zeros(inp.graph.num_ops - 1)):  # one device was spread over every group
        with pytest.raises(InvalidPlacement, match=f"takes {inp.graph.num_ops} entries"):
            inp.groups_of(devices)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**16), ops=st.integers(1, 200), max_nodes=st.integers(1, 60), placeto=st.booleans())
def test_features_of_random_dags_on_random_clusters_are_finite_shaped_and_expand_to_whole_groups(seed, ops,
                                                                                                 max_nodes, placeto):
    """Random DAGs (FLOP, outputs, parameters and edges of zero to 1e16, unmeasured and measured kinds, random
    groups) on random clusters of 1 to 16 devices, some memory-tight."""
    from gnplace.cluster_sampler import random_cluster
    from gnplace.graph import OpGraph
    from gnplace.placement import Placement
    from gnplace.sim.costmodel import DEFAULT_COSTS, PLACETO_COSTS

    rng = np.random.default_rng(seed)
    edges = sorted({(int(u), v) for v in range(1, ops) for u in rng.choice(v, size=min(int(rng.integers(0, 4)), v),
                                                                           replace=False)})

    def sizes(top: float) -> np.ndarray:
        return np.where(rng.random(ops) < 0.3, 0.0, np.round(10.0 ** rng.uniform(0, top, ops)))

    measured = np.where(rng.random(ops) < 0.2, np.nan, sizes(3) * 1e-6)
    graph = OpGraph([f"op{i}" for i in range(ops)], edges, flops=sizes(16), out_bytes=sizes(16), param_bytes=sizes(14),
                    phase=rng.integers(0, 3, ops), group=rng.integers(0, int(rng.integers(1, ops + 1)), ops),
                    cost_s={"v100": measured} if seed % 2 else None)
    cluster = random_cluster(seed, min_devices=1, max_devices=16, tight_probability=0.5)
    inp = build_policy_input(graph, cluster, max_nodes=max_nodes, cost_model=PLACETO_COSTS if placeto else DEFAULT_COSTS)
    nodes, devices = inp.decision.num_ops, cluster.num_devices
    assert nodes <= max_nodes and inp.op_time.shape == (nodes, devices)
    assert inp.node_x.shape == (nodes, len(NODE_FEATURES)) and inp.device_x.shape == (devices, len(DEVICE_FEATURES))
    assert inp.edge_x.shape == (inp.decision.num_edges, len(EDGE_FEATURES))
    assert all(bool(torch.isfinite(x).all()) for x in (inp.node_x, inp.edge_x, inp.device_x))
    position = np.empty(nodes, dtype=np.int64)
    position[inp.order] = np.arange(nodes)  # the priority order is a topological order of the nodes
    assert np.all(position[inp.decision.edge_src] < position[inp.decision.edge_dst])
    per_group = rng.integers(0, devices, inp.num_groups)
    expanded = inp.expand(per_group)
    assert not Placement(expanded, cluster).splits_groups(graph)
    assert np.array_equal(inp.groups_of(expanded), per_group)


@settings(max_examples=20, deadline=None, derandomize=True, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**16), ops=st.integers(1, 30), devices=st.integers(1, 6))
def test_features_at_the_limits_of_a_cluster_file_are_finite(seed, ops, devices):
    """Devices of 1e3 to 1e18 FLOP/s and 1 byte to 2**62 of memory, links of 1e3 to 1e18 B/s and latencies up to
    MAX_SECONDS, ops of 0 or 2**62 FLOP and bytes: every static feature, op time and held byte count is finite."""
    from gnplace.cluster import Cluster, Device
    from gnplace.graph import OpGraph
    from gnplace.limits import MAX_COUNT, MAX_SECONDS, MIN_RATE

    rng = np.random.default_rng(seed)
    edges = sorted({(int(u), v) for v in range(1, ops) for u in rng.choice(v, size=min(int(rng.integers(0, 3)), v),
                                                                           replace=False)})
    graph = OpGraph([f"op{i}" for i in range(ops)], edges, flops=rng.choice([0.0, 1e9, float(MAX_COUNT)], ops),
                    out_bytes=rng.choice([0, 2**20, 2**50, MAX_COUNT], ops), param_bytes=rng.choice([0, 1, MAX_COUNT], ops))
    rates, seconds = [MIN_RATE * 2, 1e12, 1e18], [0.0, 1e-5, MAX_SECONDS]
    cluster = Cluster([Device(f"d{k}", f"kind{k}", float(rng.choice(rates)), float(rng.choice(rates)),
                              float(rng.choice([1, 2**30, MAX_COUNT])), launch_overhead=float(rng.choice(seconds)))
                       for k in range(devices)],
                      rng.choice(rates, (devices, devices)), rng.choice(seconds, (devices, devices)), name="limits")
    inp = build_policy_input(graph, cluster)
    for name in ("node_x", "edge_x", "device_x"):
        assert torch.isfinite(getattr(inp, name)).all(), name
    for name in ("op_time", "group_time", "group_bytes"):
        assert np.isfinite(getattr(inp, name)).all(), name


def test_the_priority_order_stays_topological_where_ranks_grow_downstream():
    """Ranks that put a consumer ahead of its producer (upward ranks never do) fall back to the topological order."""
    graph = chain_graph(4)
    assert _priority_order(graph, np.array([0.0, 1.0, 2.0, 3.0])).tolist() == graph.topological_order().tolist()
    assert _priority_order(graph, np.array([3.0, 2.0, 1.0, 0.0])).tolist() == [0, 1, 2, 3]


def test_the_policy_input_averages_the_device_pairs_once(monkeypatch):
    """build_policy_input averaged latency and inverse bandwidth over every device pair twice, for the nodes' and the
    edges' transfer times (6.5 s of 27 s at 4,096 devices in test_placeto's edge-delay test on the loaded VM); once
    now (mean_link_costs), the same bits."""
    import gnplace.placers.listsched as listsched

    g, c = layered_graph(120, seed=3), load_cluster("v100x8")
    want = build_policy_input(g, c, max_nodes=40, seed=0)
    counted = load_cluster("v100x8")
    reads = []
    real = listsched.off_diagonal
    monkeypatch.setattr(listsched, "off_diagonal", lambda m: reads.append(m is counted.latency) or real(m))
    got = build_policy_input(g, counted, max_nodes=40, seed=0)
    assert reads.count(True) == 1
    for name in ("op_time", "group_time", "group_bytes", "order", "node_x", "edge_index", "edge_x", "device_x"):
        a, b = getattr(want, name), getattr(got, name)
        assert np.asarray(a).tobytes() == np.asarray(b).tobytes(), name


def test_device_link_features_average_every_row_at_once_with_the_same_bits(monkeypatch):
    """Each device's mean link bandwidth and latency were a Python loop over the devices, a mask row and a mean each
    (0.5 s at 4,096 devices); the rows are averaged at once now, the same bits, and only a row whose rates sum past a
    float goes to ``_mean`` (its mean of the rates over their largest)."""
    from gnplace.cluster import Cluster
    from gnplace.policy import features

    c = load_cluster("v100x8")
    bandwidth = np.array(c.bandwidth)
    bandwidth[3] = 1e308  # device 3's links: their sum overflows
    c = Cluster(list(c.devices), bandwidth, c.latency, name="fast3")
    off = ~np.eye(8, dtype=bool)
    want_bw = np.array([features._mean(c.bandwidth[k][off[k]]) for k in range(8)])
    want_lat = np.array([c.latency[k][off[k]].mean() for k in range(8)])
    calls = []
    real = features._mean
    monkeypatch.setattr(features, "_mean", lambda values: calls.append(len(values)) or real(values))
    got_bw, got_lat = features._link_means(c)
    assert calls == [7]  # device 3's row alone, not a call per device
    assert got_bw.tobytes() == want_bw.tobytes() and got_lat.tobytes() == want_lat.tobytes()
    op_time = np.full((5, 8), 1e-3)
    x = features._device_features(c, op_time, 1e9)
    assert x[:, 5].tolist() == np.maximum(np.log(want_bw / want_bw.max()), -50.0).tolist()
    assert x[:, 6].tolist() == np.log1p(want_lat / 1e-5).tolist()


def test_the_log_features_of_a_tiny_graph_and_cluster_equal_hand_computed_values():
    """The standardised log columns and the devices' log shares, on a -> b -> c, a -> c and d alone, each op its own
    node, on two devices of other peak rates, memory bandwidths and capacities (and the same efficiencies)."""
    import math

    from gnplace.cluster import Cluster, Device
    from gnplace.graph import OpGraph
    from gnplace.policy.features import DEVICE_FEATURES, EDGE_FEATURES, NODE_FEATURES, ops_alone, standardise

    devices = [Device("d0", "x", 1e12, 1e11, 1000), Device("d1", "y", 4e12, 5e10, 4000)]
    c = Cluster(devices, np.array([[1e9, 1e9], [2e9, 2e9]]), np.full((2, 2), 1e-5), name="xy")  # d1 sends faster
    flops, params = [1e9, 1e10, 1e11, 0.0], [0, 100, 0, 1000]
    g = OpGraph(["a", "b", "c", "d"], [(0, 1), (1, 2), (0, 2)], flops=flops, out_bytes=[10**9, 2 * 10**9, 0, 0],
                param_bytes=params, cost_s={"x": [1.0, 2.0, 3.0, 10.0], "y": [3.0, 2.0, 1.0, 10.0]})
    inp = build_policy_input(g, c, coarsening=ops_alone(g), held=np.ones(4))

    def node(name):
        return inp.node_x[:, NODE_FEATURES.index(name)].tolist()

    assert node("log_ops") == [0.0] * 4  # one op each: standardised, no spread
    assert node("log_flops") == pytest.approx(standardise(np.log1p(np.array(flops))).tolist(), abs=1e-6)
    assert node("log_param_bytes") == pytest.approx(standardise(np.log1p(np.array(params, float))).tolist(), abs=1e-6)
    # the fastest device's seconds (1, 2, 1, 10), not the mean (2, 2, 2, 10)
    assert node("log_time") == pytest.approx(standardise(np.log([1.0, 2.0, 1.0, 10.0])).tolist(), abs=1e-6)
    sent = np.array([1e9 if u == 0 else 2e9 for u in inp.edge_index[0].tolist()])
    log_bytes = inp.edge_x[:, EDGE_FEATURES.index("log_bytes")].tolist()
    assert log_bytes == pytest.approx(standardise(np.log1p(sent)).tolist(), abs=1e-6)

    def device(name):
        return inp.device_x[:, DEVICE_FEATURES.index(name)].tolist()

    assert device("log_peak_flops") == pytest.approx([math.log(0.25), 0.0])
    assert device("log_mem_bandwidth") == pytest.approx([0.0, math.log(0.5)])
    assert device("log_capacity") == pytest.approx([math.log(0.25), 0.0])
    assert device("log_link_bandwidth") == pytest.approx([math.log(0.5), 0.0])


def test_log_out_bytes_are_the_outputs_a_node_sends_on_plus_its_largest_internal_one():
    """a -> b -> c -> d with a, b, c one group (one node) and e alone: the node sends c's 1 byte on and holds a's and
    b's 100 internally, so its out bytes are 1 + 100, not its peak (a's and b's 200 while b runs); d and e send their
    0 and 1,000 bytes to no one. A mutant reading the coarse graph's own out_bytes (the peak) passed."""
    from gnplace.graph import OpGraph
    from gnplace.policy.features import standardise
    from gnplace.toy import toy_cluster

    g = OpGraph(["a", "b", "c", "d", "e"], [(0, 1), (1, 2), (2, 3)], out_bytes=[100, 100, 1, 0, 1000],
                group=[0, 0, 0, 1, 2])
    inp = build_policy_input(g, toy_cluster(2), held=np.ones(5))
    node = inp.coarsening.node_of_op
    assert node[0] == node[1] == node[2] and len({int(node[0]), int(node[3]), int(node[4])}) == 3
    want = standardise(np.log1p(np.array([101.0, 0.0, 1000.0])))  # nodes of a, d and e
    got = inp.node_x[:, NODE_FEATURES.index("log_out_bytes")].numpy()
    assert got[[node[0], node[3], node[4]]].tolist() == pytest.approx(want.tolist(), abs=1e-6)


def test_device_link_means_of_a_second_block_of_rows_land_on_their_own_devices():
    """At 300 devices the links are averaged 218 rows at a time; device 290's rates (1e308 B/s, their sum overflows)
    went to device 72 (its row in the second block) under a mutant dropping the block's offset, leaving 290 infinite."""
    from gnplace.cluster import Cluster, Device
    from gnplace.policy import features

    d = 300
    bandwidth = np.full((d, d), 1e9)
    bandwidth[290] = 1e308
    c = Cluster([Device(f"d{k}", "x", 1e12, 1e11, 1000) for k in range(d)], bandwidth, np.full((d, d), 1e-5),
                name="wide")
    assert 2**16 // d < 290  # the premise: device 290 is in a later block than the first
    link_bw, link_lat = features._link_means(c)
    assert link_bw[290] == 1e308
    assert np.delete(link_bw, 290).tolist() == pytest.approx([1e9] * (d - 1))
    assert link_lat.tolist() == pytest.approx([1e-5] * d)


def test_priority_ties_go_by_topological_position_not_by_index():
    """c -> a, and b alone: Kahn's order is b, c, a; a and b tie on rank, so b (placed first topologically) goes
    first after c. Two lone ops of one rank keep their order. A mutant breaking ties by reverse position passed."""
    from gnplace.graph import OpGraph

    graph = OpGraph(["a", "b", "c"], [(2, 0)])
    assert graph.topological_order().tolist() == [1, 2, 0]
    assert _priority_order(graph, np.array([1.0, 1.0, 3.0])).tolist() == [2, 1, 0]
    assert _priority_order(OpGraph(["x", "y"], []), np.array([2.0, 2.0])).tolist() == [0, 1]


def test_the_priority_order_ranks_by_mean_seconds_over_the_devices():
    """Two lone ops: x takes 1 s on d0 and 5 s on d1 (mean 3), y 2 s on both (mean 2). The upward rank of a lone op is
    its mean time, so x goes first; by the fastest device's seconds (1 against 2), as a mutant had it, y would."""
    from gnplace.cluster import Cluster, Device
    from gnplace.graph import OpGraph
    from gnplace.policy.features import ops_alone

    devices = [Device("d0", "x", 1e12, 1e11, 1000), Device("d1", "y", 1e12, 1e11, 1000)]
    c = Cluster(devices, np.full((2, 2), 1e9), np.full((2, 2), 1e-5), name="xy")
    g = OpGraph(["x", "y"], [], cost_s={"x": [1.0, 2.0], "y": [5.0, 2.0]})
    inp = build_policy_input(g, c, coarsening=ops_alone(g), held=np.ones(2))
    assert inp.op_time.tolist() == [[1.0, 5.0], [2.0, 2.0]]
    assert inp.order.tolist() == [0, 1]


def test_a_coarsening_of_another_graph_is_named_with_its_own_size_and_the_graphs():
    """The message names the coarsening's graph first and the one given second (a mutant swapping them passed)."""
    from gnplace.exceptions import InvalidArgument

    cluster = load_cluster("k80x2")
    wrong = decision_graph(layered_graph(50, seed=1), cluster, max_nodes=20)
    with pytest.raises(InvalidArgument, match=r"the coarsening is of graph 'layered50' \(50 ops\), not of "
                                              r"'layered100' \(100 ops\)"):
        build_policy_input(layered_graph(100, seed=1), cluster, coarsening=wrong)


def test_groups_of_refuses_a_batch_of_placements():
    """groups_of takes one placement: a [2, num_ops] batch is an InvalidPlacement (a mutant checking only the last
    axis let it through to a numpy ValueError)."""
    from gnplace.exceptions import InvalidPlacement

    inp = build_policy_input(mlp_training_graph(layers=3, width=64, batch=8), load_cluster("k80x2"))
    with pytest.raises(InvalidPlacement, match=f"takes {inp.graph.num_ops} entries"):
        inp.groups_of(np.zeros((2, inp.graph.num_ops), dtype=np.int64))


def test_held_bytes_that_are_not_finite_and_at_least_zero_are_refused():
    """NaN held bytes made NaN device features and NaN decision features in every rollout, without a word; negative
    ones made room that is not there; text was numpy's ValueError. Bytes of 0 and up are taken as before."""
    from gnplace.exceptions import InvalidArgument
    from gnplace.placers.groups import held_at_peak

    g, c = mlp_training_graph(layers=2, width=64, batch=8), load_cluster("k80x2")
    for value in (np.nan, np.inf, -1.0):
        held = np.ones(g.num_ops)
        held[3] = value
        with pytest.raises(InvalidArgument, match=rf"finite bytes of at least 0 .* got {value} for op "
                                                  rf"'{g.node_names[3]}'"):
            build_policy_input(g, c, held=held)
    with pytest.raises(InvalidArgument, match="held takes bytes"):
        build_policy_input(g, c, held=np.array(["a"] * g.num_ops))
    given = build_policy_input(g, c, held=held_at_peak(g, c))
    assert torch.equal(given.device_x, build_policy_input(g, c).device_x)
    assert build_policy_input(g, c, held=np.zeros(g.num_ops)).group_bytes.tolist() == [0.0] * g.num_groups
