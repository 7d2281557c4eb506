"""Tests of the toy graphs in ``gnplace.toy``."""

from __future__ import annotations

import numpy as np
import pytest

from gnplace.exceptions import InvalidArgument
from gnplace.graph import BACKWARD, FORWARD, UPDATE
from gnplace.toy import (
    chain_graph,
    fork_graph,
    layered_graph,
    mixed_cluster,
    mlp_training_graph,
    toy_cluster,
    uniform_cluster,
)


def test_chain_graph():
    g = chain_graph(4, flops=2e9, out_bytes=8)
    assert g.name == "chain4"
    assert g.node_names == ("op0", "op1", "op2", "op3")
    assert g.edge_src.tolist() == [0, 1, 2] and g.edge_dst.tolist() == [1, 2, 3]
    assert g.flops.tolist() == [2e9] * 4
    assert g.out_bytes.tolist() == [8] * 4
    assert g.edge_bytes.tolist() == [8] * 3
    assert g.num_groups == 4
    assert repr(chain_graph(3)) == "OpGraph(name='chain3', num_ops=3, num_edges=2, num_groups=3)"


def test_chain_of_one():
    g = chain_graph(1)
    assert g.num_ops == 1 and g.num_edges == 0


def test_fork_graph():
    g = fork_graph(flops=5.0, out_bytes=16)
    assert g.name == "fork"
    assert g.node_names == ("src", "left", "right", "sink")
    edges = set(zip(g.edge_src.tolist(), g.edge_dst.tolist()))
    assert edges == {(0, 1), (0, 2), (1, 3), (2, 3)}
    assert g.in_bytes.tolist() == [0, 16, 16, 32]
    assert g.topological_order().tolist() == [0, 1, 2, 3]


@pytest.mark.parametrize("layers, branches", [(1, 1), (2, 1), (4, 1), (3, 2), (2, 3)])
def test_mlp_sizes(layers, branches):
    g = mlp_training_graph(layers=layers, width=8, batch=4, branches=branches)
    # input and loss, then per layer and branch: matmul, relu, relu_grad, dgrad, wgrad, update
    assert g.num_ops == 2 + 6 * layers * branches
    assert g.num_edges == branches + layers * branches * 8
    assert g.num_groups == 1 + layers * branches
    assert g.name == f"mlp{branches}x{layers}w8b4"


def test_mlp_small_example():
    g = mlp_training_graph(layers=2, width=8, batch=4)
    assert (g.num_ops, g.num_groups) == (14, 3)


def test_mlp_exact_costs():
    B, W, L = 4, 8, 3
    g = mlp_training_graph(layers=L, width=W, batch=B, dtype_bytes=2)
    act, weight = B * W * 2, W * W * 2
    i = g.index
    assert g.flops[i("t0.l1.matmul")] == 2 * B * W * W
    assert g.flops[i("t0.l1.relu")] == B * W
    assert g.flops[i("t0.l1.matmul_dgrad")] == 2 * B * W * W
    assert g.flops[i("t0.l1.matmul_wgrad")] == 2 * B * W * W
    assert g.flops[i("t0.l1.update")] == 2 * W * W
    assert g.out_bytes[i("t0.l1.matmul")] == act
    assert g.out_bytes[i("t0.l1.matmul_wgrad")] == weight
    assert g.out_bytes[i("t0.l1.update")] == 0
    assert g.param_bytes[i("t0.l1.update")] == weight
    assert g.total_param_bytes == L * weight
    assert g.op_types[i("t0.l1.update")] == "sgd_update"
    assert g.phase[i("t0.l1.matmul")] == FORWARD
    assert g.phase[i("t0.l1.relu_grad")] == BACKWARD
    assert g.phase[i("t0.l1.update")] == UPDATE


def test_mlp_groups_are_layers():
    g = mlp_training_graph(layers=2, width=8, batch=4, branches=2)
    for b in range(2):
        for layer in range(2):
            ops = [f"t{b}.l{layer}.{k}" for k in ("matmul", "relu", "relu_grad", "matmul_dgrad", "matmul_wgrad", "update")]
            assert len({int(g.group[g.index(o)]) for o in ops}) == 1
    assert g.group[g.index("input")] == g.group[g.index("loss")]
    assert len({int(g.group[g.index(f"t{b}.l{k}.matmul")]) for b in range(2) for k in range(2)}) == 4


def test_mlp_dependencies():
    g = mlp_training_graph(layers=2, width=8, batch=4)
    edges = {(g.node_names[s], g.node_names[d]) for s, d in zip(g.edge_src, g.edge_dst)}
    assert ("input", "t0.l0.matmul") in edges
    assert ("t0.l1.relu", "loss") in edges
    assert ("loss", "t0.l1.relu_grad") in edges
    assert ("t0.l1.matmul_dgrad", "t0.l0.relu_grad") in edges
    assert ("t0.l0.relu", "t0.l1.matmul_wgrad") in edges
    assert ("input", "t0.l0.matmul_wgrad") in edges
    assert ("t0.l0.matmul_wgrad", "t0.l0.update") in edges
    order = g.topological_order().tolist()
    assert order.index(g.index("loss")) < order.index(g.index("t0.l0.update"))


def test_layered_graph_is_deterministic_per_seed():
    assert layered_graph(120, seed=3) == layered_graph(120, seed=3)
    assert layered_graph(120, seed=3) != layered_graph(120, seed=4)
    rng_a, rng_b = np.random.default_rng(9), np.random.default_rng(9)
    assert layered_graph(50, seed=rng_a) == layered_graph(50, seed=rng_b)


@pytest.mark.parametrize("num_ops, width", [(100, 8), (37, 5), (8, 8), (200, 1)])
def test_layered_graph_shape(num_ops, width):
    g = layered_graph(num_ops, width=width, seed=1)
    assert g.num_ops == num_ops and g.name == f"layered{num_ops}"
    layer = np.arange(num_ops) // width
    src_layer, dst_layer = layer[g.edge_src], layer[g.edge_dst]
    assert np.all(dst_layer - src_layer >= 1) and np.all(dst_layer - src_layer <= 2)
    indegree = np.bincount(g.edge_dst, minlength=num_ops)
    assert np.all(indegree[:width] == 0)
    assert np.all((indegree[width:] >= 1) & (indegree[width:] <= 3))
    assert np.all((g.flops >= 1e6) & (g.flops <= 1e10))
    assert np.all((g.out_bytes >= 1e4) & (g.out_bytes <= 1e7))
    has_params = g.param_bytes > 0
    assert np.array_equal(has_params, np.arange(num_ops) % 4 == 0)


def test_layered_graph_name():
    assert layered_graph(20, name="bench").name == "bench"


def test_toy_cluster_is_uniform():
    c = toy_cluster(3, memory=2**30, bandwidth=5e9, latency=2e-6, name="t")
    assert c.name == "t" and c.device_names == ["gpu0", "gpu1", "gpu2"] and c.kinds == ["k80"] * 3
    assert c.memory.tolist() == [2**30] * 3
    off = ~np.eye(3, dtype=bool)
    assert np.all(c.bandwidth[off] == 5e9) and np.all(c.latency[off] == 2e-6)
    assert toy_cluster(1).name == "toy1" and toy_cluster(2, prefix="d").device_names == ["d0", "d1"]


def test_mixed_cluster_has_three_speeds():
    c = mixed_cluster(memory=2**30)
    speeds = [d.peak_flops for d in c.devices]
    assert speeds == sorted(speeds) and len(set(speeds)) == 3 and c.memory.tolist() == [2**30] * 3


def test_uniform_cluster_keeps_the_given_devices():
    c = mixed_cluster()
    u = uniform_cluster(c.devices, bandwidth=1e9, name="u")
    assert u.devices == c.devices and u.name == "u" and u.bandwidth[0, 1] == 1e9


@pytest.mark.parametrize("make", [
    lambda: chain_graph(-1),  # was an empty graph named 'chain-1'
    lambda: chain_graph(2.0),
    lambda: mlp_training_graph(layers=0, branches=2),  # was "edge 'input' -> 'loss' appears twice"
    lambda: mlp_training_graph(layers=-1),  # was a graph named 'mlp1x-1w1024b256'
    lambda: mlp_training_graph(branches=0),  # was a loss reading nothing
    lambda: mlp_training_graph(width=0),
    lambda: mlp_training_graph(batch=True),
    lambda: layered_graph(10, width=0),  # was a division by zero warning and a graph without edges
    lambda: layered_graph(10, width=-1),  # was numpy's "a cannot be empty unless no samples are taken"
    lambda: layered_graph(-5),  # was numpy's "negative dimensions are not allowed"
    lambda: toy_cluster(2.0),
])
def test_sizes_that_make_no_graph_are_refused(make):
    with pytest.raises(InvalidArgument, match="must be a whole number"):
        make()


def test_empty_graphs_are_still_allowed():
    assert chain_graph(0).num_ops == 0 and layered_graph(0).num_ops == 0


def test_uniform_cluster_refuses_what_is_no_list_of_devices_and_links_that_are_no_numbers():
    """uniform_cluster(2), as toy_cluster(2) is called, was a TypeError ('int' has no len()), and bandwidth="fast"
    numpy's ValueError."""
    from gnplace.exceptions import InvalidCluster

    for given in (2, "ab", None):
        with pytest.raises(InvalidArgument, match=r"^uniform_cluster: devices must be a list of Device \(toy_cluster"):
            uniform_cluster(given)
    with pytest.raises(InvalidCluster, match="bandwidth and latency must be"):
        uniform_cluster(toy_cluster(2).devices, bandwidth="fast")
    assert uniform_cluster(iter(toy_cluster(2).devices)).device_names == ["gpu0", "gpu1"]
