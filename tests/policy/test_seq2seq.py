"""The seq2seq policy of the seeds' recurrent placers and the sequence it reads."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from gnplace.cluster import load_cluster
from gnplace.policy.features import NODE_FEATURES, build_policy_input
from gnplace.policy.seq2seq import (
    SEQUENCE_EXTRA_FEATURES,
    Seq2SeqPolicy,
    group_edges,
    sequence_features,
    sequence_order,
)
from gnplace.toy import layered_graph, mlp_training_graph


def test_sequence_order_is_topological_over_groups():
    inp = build_policy_input(mlp_training_graph(layers=3, width=256, batch=32), load_cluster("k80x2"))
    order = sequence_order(inp)
    assert sorted(order.tolist()) == list(range(inp.num_groups))
    position = np.empty(inp.num_groups, dtype=np.int64)
    position[order] = np.arange(inp.num_groups)
    # every group appears after the group of the first node of the priority order that precedes it
    first_group = inp.decision.group[inp.order[0]]
    assert position[first_group] == 0


def test_sequence_features_shape_and_adjacency():
    inp = build_policy_input(layered_graph(40, seed=1).replace(group=np.arange(40) // 4), load_cluster("k80x4"))
    x = sequence_features(inp)
    assert tuple(x.shape) == (inp.num_groups, len(NODE_FEATURES) + len(SEQUENCE_EXTRA_FEATURES))
    assert torch.isfinite(x).all()
    pairs = group_edges(inp)
    assert (pairs[:, 0] != pairs[:, 1]).all() and len(np.unique(pairs, axis=0)) == len(pairs)
    position = x[:, len(NODE_FEATURES) + SEQUENCE_EXTRA_FEATURES.index("position")]
    assert position[0] == 0 and position[-1] == 1 and bool((position.diff() > 0).all())


def test_sampled_log_probs_match_the_teacher_forced_pass():
    torch.manual_seed(0)
    policy = Seq2SeqPolicy(6, 3, hidden=16, layers=2)
    torch.nn.init.normal_(policy.out.weight)  # not uniform, so that the check means something
    x = torch.randn(7, 6)
    actions, logp = policy.sample(x, 5, torch.Generator().manual_seed(1))
    assert torch.allclose(policy.log_probs(x, actions), logp, atol=1e-5)
    # batched inputs (one sequence per sample) too
    xb = torch.randn(5, 7, 6)
    actions, logp = policy.sample(xb, 5, torch.Generator().manual_seed(1))
    assert torch.allclose(policy.log_probs(xb, actions), logp, atol=1e-5)


def test_untrained_policy_is_uniform_and_sampling_is_seeded():
    policy = Seq2SeqPolicy(4, 5, hidden=8)
    x = torch.randn(10, 4)
    a1, logp = policy.sample(x, 3, torch.Generator().manual_seed(7))
    a2, _ = policy.sample(x, 3, torch.Generator().manual_seed(7))
    assert torch.equal(a1, a2)
    assert torch.allclose(logp.exp(), torch.full_like(logp, 0.2))
    greedy, _ = policy.sample(x, 2, torch.Generator(), greedy=True)
    assert tuple(greedy.shape) == (2, 10)


def test_gradients_reach_every_part():
    policy = Seq2SeqPolicy(4, 3, hidden=8, layers=1)
    x = torch.randn(6, 4)
    actions, _ = policy.sample(x, 2, torch.Generator().manual_seed(0))
    policy.log_probs(x, actions).gather(-1, actions.unsqueeze(-1)).sum().backward()
    assert policy.out.weight.grad is not None and policy.out.weight.grad.abs().sum() > 0


def test_odd_hidden_width_is_refused():
    with pytest.raises(ValueError, match="even"):
        Seq2SeqPolicy(4, 3, hidden=7)


def test_sequence_features_of_a_tiny_graph_equal_hand_computed_values():
    """Groups 0 -> 1 -> 2 and 0 -> 2 (with an edge inside groups 0 and 2), each op its own decision node, on two
    devices of other kinds: the mean node features, the fastest group time, the positions and the adjacency."""
    from gnplace.cluster import Cluster, Device
    from gnplace.graph import OpGraph
    from gnplace.policy.features import ops_alone, standardise

    devices = [Device("d0", "x", 1e12, 1e11, 10**12), Device("d1", "y", 1e12, 1e11, 10**12)]
    c = Cluster(devices, np.full((2, 2), 1e9), np.full((2, 2), 1e-5), name="xy")
    g = OpGraph(["a", "b", "c", "d", "e"], [(0, 1), (1, 2), (0, 3), (2, 4), (3, 4)], out_bytes=[1000] * 5,
                cost_s={"x": [1.0, 1.0, 5.0, 3.0, 1.0], "y": [4.0, 4.0, 3.0, 1.0, 1.0]}, group=[0, 0, 1, 2, 2])
    inp = build_policy_input(g, c, coarsening=ops_alone(g))
    assert sequence_order(inp).tolist() == [0, 1, 2]
    assert group_edges(inp).tolist() == [[0, 1], [0, 2], [1, 2]]  # distinct, none inside a group
    x = sequence_features(inp).numpy()
    n = len(NODE_FEATURES)
    node_x = inp.node_x.numpy()
    means = [node_x[[0, 1]].mean(0), node_x[2], node_x[[3, 4]].mean(0)]
    assert np.allclose(x[:, :n], np.stack(means), atol=1e-6)

    def extra(name):
        return x[:, n + SEQUENCE_EXTRA_FEATURES.index(name)].tolist()

    assert inp.group_time.min(axis=1).tolist() == [2.0, 3.0, 2.0]  # x: 2, 5, 4 s; y: 8, 3, 2 s
    assert extra("log_time") == pytest.approx(standardise(np.log([2.0, 3.0, 2.0])).tolist(), abs=1e-5)
    assert extra("position") == [0.0, 0.5, 1.0]
    assert extra("log_producers") == pytest.approx(np.log1p([0, 1, 2]).tolist())
    assert extra("log_consumers") == pytest.approx(np.log1p([2, 1, 0]).tolist())
    assert extra("producer_offset") == pytest.approx([0.0, 0.0 - 0.5, (0.0 + 0.5) / 2 - 1.0])
    assert extra("consumer_offset") == pytest.approx([(0.5 + 1.0) / 2 - 0.0, 1.0 - 0.5, 0.0])


def test_greedy_decoding_takes_the_most_likely_device_at_every_step():
    torch.manual_seed(0)
    policy = Seq2SeqPolicy(4, 3, hidden=8, layers=1)
    torch.nn.init.normal_(policy.out.weight)  # not uniform: the argmax means something
    x = torch.randn(6, 4)
    actions, logp = policy.sample(x, 2, torch.Generator().manual_seed(0), greedy=True)
    assert torch.equal(actions, logp.argmax(-1))
    assert len(set(actions[0].tolist())) > 1  # more than one device, so a least likely one would differ


def test_logit_noise_spreads_the_draws_and_the_log_probs_stay_the_policys_own():
    """The hierarchical planner's exploration: noise moves the draws off the favourite; log pi is without it."""
    policy = Seq2SeqPolicy(4, 3, hidden=8, layers=1)
    with torch.no_grad():
        policy.out.bias.copy_(torch.tensor([6.0, 0.0, 0.0]))  # device 0 with probability 0.995
    x = torch.randn(10, 4)
    quiet, _ = policy.sample(x, 8, torch.Generator().manual_seed(0))
    noisy, logp = policy.sample(x, 8, torch.Generator().manual_seed(0), noise=20.0)
    assert (quiet == 0).float().mean() > 0.95 and (noisy != 0).float().mean() > 0.3
    assert torch.allclose(logp, policy.log_probs(x, noisy), atol=1e-5)
    assert torch.allclose(logp[..., 0].exp(), torch.full((8, 10), 0.995), atol=1e-3)
