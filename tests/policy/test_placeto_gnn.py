"""Placeto's network: state features, relation masks, and the batched two-way message passing."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from gnplace.policy.placeto_gnn import (
    NeighbourSum,
    PlacetoConfig,
    PlacetoGNN,
    placeto_features,
    relation_masks,
    state_features,
)

# a hand-made DAG:  0 -> 1 -> 3 -> 5,  0 -> 2 -> 4 -> 5,  6 (isolated)
SRC = np.array([0, 1, 3, 0, 2, 4])
DST = np.array([1, 3, 5, 2, 4, 5])


def one_hot(n: int, *rows: list[int]) -> np.ndarray:
    out = np.zeros((len(rows), n), dtype=bool)
    for i, row in enumerate(rows):
        out[i, row] = True
    return out


def test_relation_masks_on_a_hand_made_dag():
    parents, children, parallel = relation_masks(7, SRC, DST, one_hot(7, [1], [5], [0]))
    # deciding node 1: producer 0, consumer 3; 2 and 4 are on the other branch, 6 is unrelated
    assert np.flatnonzero(parents[0]).tolist() == [0]
    assert np.flatnonzero(children[0]).tolist() == [3]
    assert np.flatnonzero(parallel[0]).tolist() == [2, 4, 6]
    # the sink: producers 3 and 4, nothing after it, only the isolated node parallel
    assert np.flatnonzero(parents[1]).tolist() == [3, 4] and not children[1].any()
    assert np.flatnonzero(parallel[1]).tolist() == [6]
    # the source: every node but 6 descends from it
    assert not parents[2].any() and np.flatnonzero(children[2]).tolist() == [1, 2]
    assert np.flatnonzero(parallel[2]).tolist() == [6]


def test_relation_masks_of_a_group_of_several_nodes_exclude_its_members():
    # a forward op (1) and its "gradient" (4) in one decision: 2 feeds 4 and follows 0 only
    parents, children, parallel = relation_masks(7, SRC, DST, one_hot(7, [1, 4]))
    assert np.flatnonzero(parents[0]).tolist() == [0, 2]
    assert np.flatnonzero(children[0]).tolist() == [3, 5]
    assert np.flatnonzero(parallel[0]).tolist() == [6]
    members = one_hot(7, [1, 4])[0]
    assert not (parents[0] & members).any() and not (children[0] & members).any()


def test_relation_masks_refuse_a_cycle():
    with pytest.raises(ValueError, match="cycle"):
        relation_masks(2, np.array([0, 1]), np.array([1, 0]), one_hot(2, [0]))


def test_state_features_are_normalised_per_column():
    names = placeto_features(3)
    assert names == ("run_time", "out_bytes", "device_0", "device_1", "device_2", "visited", "current", "start")
    run = np.array([[2e-3, 1e-3, 4e-3], [1.0, 1.0, 1.0]])
    start = np.array([[0.0, 2e-3, 5e-3], [0.0, 1.0, 2.0]])
    x = state_features(run, np.array([0, 8, 4]), np.array([[0, 2, 2], [1, 1, 1]]), np.zeros((2, 3), dtype=bool),
                       np.array([False, True, False]), start, 3)
    assert x.shape == (2, 3, len(names)) and x.dtype == torch.float32
    assert torch.allclose(x.abs().amax(dim=1)[:, names.index("run_time")], torch.ones(2))
    assert x[0, :, names.index("out_bytes")].tolist() == [0.0, 1.0, 0.5]
    assert x[0, :, 2:5].tolist() == [[1, 0, 0], [0, 0, 1], [0, 0, 1]]
    # start relative to the current node's (node 1), over the largest absolute value
    assert x[0, :, names.index("start")].tolist() == pytest.approx([-2 / 3, 0.0, 1.0])
    assert x[1, :, names.index("start")].tolist() == pytest.approx([-1.0, 0.0, 1.0])
    assert x[:, :, names.index("visited")].abs().sum() == 0  # an all-zero column stays zero


def test_neighbour_sum_adds_the_in_neighbours():
    x = torch.arange(7, dtype=torch.float32)[:, None].repeat(1, 2)
    out = NeighbourSum()(x, torch.as_tensor(np.stack([SRC, DST])))
    assert out[:, 0].tolist() == [0, 0, 0, 1, 2, 3 + 4, 0]


def masks_for(decisions: np.ndarray):
    parents, children, parallel = relation_masks(7, SRC, DST, decisions)
    return tuple(torch.as_tensor(m) for m in (decisions, parents, children, parallel))


def test_forward_gives_a_distribution_per_state_and_batches_exactly():
    torch.manual_seed(0)
    net = PlacetoGNN(PlacetoConfig(num_devices=4, hidden=16, rounds=8))
    edges = torch.as_tensor(np.stack([SRC, DST]))
    decisions = one_hot(7, [1], [5], [0], [1, 4], [6])
    x = torch.rand(len(decisions), 7, len(net.config.features))
    logits = net(x, edges, *masks_for(decisions))
    assert logits.shape == (5, 4)
    probs = logits.softmax(-1)
    assert torch.allclose(probs.sum(-1), torch.ones(5)) and bool((probs > 0).all())
    # a batch of B states is B independent states: the same as one at a time
    for s in range(5):
        alone = net(x[s:s + 1], edges, *(m[s:s + 1] for m in masks_for(decisions)))
        assert torch.allclose(alone, logits[s:s + 1], atol=1e-5)


def test_the_state_and_the_decision_change_the_output():
    torch.manual_seed(1)
    net = PlacetoGNN(PlacetoConfig(num_devices=2, hidden=8, rounds=3))
    edges = torch.as_tensor(np.stack([SRC, DST]))
    x = torch.rand(1, 7, len(net.config.features))
    a = net(x, edges, *masks_for(one_hot(7, [1])))
    b = net(x, edges, *masks_for(one_hot(7, [2])))
    y = x.clone()
    y[0, 0, 0] += 1.0  # node 0 is upstream of node 1: its features reach the decision
    c = net(y, edges, *masks_for(one_hot(7, [1])))
    assert not torch.allclose(a, b) and not torch.allclose(a, c)


def test_gradients_reach_every_parameter_and_a_graph_without_edges_works():
    torch.manual_seed(2)
    net = PlacetoGNN(PlacetoConfig(num_devices=3, hidden=8, rounds=2))
    x = torch.rand(2, 7, len(net.config.features))
    net(x, torch.as_tensor(np.stack([SRC, DST])), *masks_for(one_hot(7, [1], [2]))).sum().backward()
    assert all(p.grad is not None for p in net.parameters())
    single = net(torch.rand(1, 1, len(net.config.features)), torch.zeros((2, 0), dtype=torch.long),
                 *(torch.tensor([[flag]]) for flag in (True, False, False, False)))
    assert single.shape == (1, 3) and bool(torch.isfinite(single).all())


def test_config_to_dict_is_plain():
    config = PlacetoConfig(num_devices=2, hidden=4, rounds=1)
    assert config.to_dict() == {"num_devices": 2, "hidden": 4, "rounds": 1, "features": list(placeto_features(2))}


def test_the_embedding_is_the_exact_two_way_recursion_once_the_rounds_reach_the_levels():
    """On 0 -> 1 -> 2: h_down_v = f_down(x_v) + g_down(sum of h_down over producers), h_up likewise over consumers
    (g of an empty sum, 0, still counts), once the rounds reach the number of levels (3), and more change nothing.

    The rounds start from h = f(x), so the last node's h is exact only at round 3 (at round 2 it reads g of its
    producer's round-1 h, in which node 0 is f(x_0) without its g(0)).
    """
    torch.manual_seed(0)
    net = PlacetoGNN(PlacetoConfig(num_devices=2, hidden=8, rounds=3))
    x = torch.rand(1, 3, len(net.config.features))
    edges = torch.tensor([[0, 1], [1, 2]])
    with torch.no_grad():
        for g in (net.g_down, net.g_up):
            g[0].bias.fill_(1.0)  # no dead ReLU: g of a sum is not a constant
        e = net.embed(x, edges)[:, 0]  # [N, 2H]
        xs = x[0]
        zero = torch.zeros(8)
        down0 = net.f_down(xs[0]) + net.g_down(zero)
        down1 = net.f_down(xs[1]) + net.g_down(down0)
        down2 = net.f_down(xs[2]) + net.g_down(down1)
        up2 = net.f_up(xs[2]) + net.g_up(zero)
        up1 = net.f_up(xs[1]) + net.g_up(up2)
        up0 = net.f_up(xs[0]) + net.g_up(up1)
        assert not torch.allclose(net.g_up(up2), net.g_up(zero)) and not torch.allclose(down1, net.f_down(xs[1]))
        expected = torch.stack([torch.cat([down0, up0]), torch.cat([down1, up1]), torch.cat([down2, up2])])
        assert torch.allclose(e, expected, atol=1e-6)
        deeper = PlacetoGNN(PlacetoConfig(num_devices=2, hidden=8, rounds=6))
        deeper.load_state_dict(net.state_dict())
        assert torch.allclose(deeper.embed(x, edges)[:, 0], expected, atol=1e-6)


def test_each_set_is_pooled_by_its_mean():
    """Parents {0, 1} of two alike nodes pool as {0} alone does: a mean (a sum would double them, and scale with
    the graph's size)."""
    torch.manual_seed(0)
    net = PlacetoGNN(PlacetoConfig(num_devices=3, hidden=8, rounds=2))
    x = torch.rand(1, 3, len(net.config.features))
    x[0, 1] = x[0, 0]  # 0 and 1 alike, both feeding 2
    edges = torch.tensor([[0, 1], [2, 2]])
    current = torch.tensor([[False, False, True]])
    none = torch.zeros(1, 3, dtype=torch.bool)
    with torch.no_grad():
        both = net(x, edges, current, torch.tensor([[True, True, False]]), none, none)
        one = net(x, edges, current, torch.tensor([[True, False, False]]), none, none)
    assert torch.allclose(both, one, atol=1e-6)
