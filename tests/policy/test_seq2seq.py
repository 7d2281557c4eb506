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
