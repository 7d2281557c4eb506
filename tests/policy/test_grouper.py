"""The hierarchical planner's Grouper and the group embeddings its Placer reads."""

from __future__ import annotations

import torch

from gnplace.policy.grouper import Grouper, group_inputs


def test_grouper_gives_a_distribution_over_groups_per_unit():
    logp = Grouper(6, 4, hidden=8)(torch.randn(5, 6))
    assert tuple(logp.shape) == (5, 4)
    assert torch.allclose(logp.exp().sum(-1), torch.ones(5))


def test_group_inputs_sum_members_count_them_and_hold_the_adjacency():
    x = torch.tensor([[1.0, 0.0], [0.0, 1.0], [2.0, 2.0], [1.0, 1.0]])
    grouping = torch.tensor([[0, 0, 1, 2], [2, 2, 2, 2]])
    edges = torch.tensor([[0, 2], [2, 3], [1, 3]])  # unit 0 -> 2, 2 -> 3, 1 -> 3
    inputs = group_inputs(x, grouping, 3, edges)
    assert tuple(inputs.shape) == (2, 3, 2 + 1 + 3)
    assert inputs[0, 0, :2].tolist() == [1.0, 1.0] and inputs[0, 1, :2].tolist() == [2.0, 2.0]
    assert inputs[0, :, 2].tolist() == [0.5, 0.25, 0.25]  # members over units
    adjacency = inputs[0, :, 3:] * 3  # edge counts between groups, over the number of edges
    assert adjacency.round().tolist() == [[0, 1, 1], [0, 0, 1], [0, 0, 0]]
    assert inputs[1, 2, 3:].mul(3).round().tolist() == [0, 0, 3]  # all in one group: self-edges
    assert inputs[1, 0].abs().sum() == 0
