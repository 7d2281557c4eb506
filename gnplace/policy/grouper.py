"""The Grouper of the hierarchical planner (Mirhoseini et al., ICLR 2018) and the Placer's view of its groups.

The Grouper is a feed-forward network that gives each unit (an op, here a colocation group of the
decision graph) a softmax over :math:`K` groups; the Placer
(:class:`~gnplace.policy.seq2seq.Seq2SeqPolicy`) then reads one embedding per group, built from its
members (:func:`group_inputs`).
Trained by :class:`gnplace.rl.hierarchical.HierarchicalPlacer`.
"""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["Grouper", "group_inputs"]


class Grouper(nn.Module):
    """The feed-forward Grouper: a softmax over ``groups`` for each unit, ``[S, F] -> [S, K]`` log-probabilities.

    Examples:
        >>> Grouper(5, 3)(torch.zeros(4, 5)).exp().sum(-1).round(decimals=4).tolist()
        [1.0, 1.0, 1.0, 1.0]
    """

    def __init__(self, in_features: int, groups: int, hidden: int = 64) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(in_features, hidden), nn.ReLU(), nn.Linear(hidden, groups))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """:math:`\\log p_{grouper}(\\cdot \\mid x_u)` of every unit."""
        return self.net(x).log_softmax(-1)


def group_inputs(x: torch.Tensor, grouping: torch.Tensor, groups: int, edges: torch.Tensor) -> torch.Tensor:
    """The Placer's input for each sampled grouping, ``[B, K, F + 1 + K]``.

    Args:
        x (torch.Tensor): the units' inputs, ``[S, F]``.
        grouping (torch.Tensor): the group of each unit in each sample, ``[B, S]`` int64.
        groups (int): :math:`K`.
        edges (torch.Tensor): ``(producer unit, consumer unit)`` pairs, ``[E, 2]`` int64 (sequence positions).

    Examples:
        >>> group_inputs(torch.ones(3, 2), torch.tensor([[0, 0, 1]]), 2, torch.tensor([[0, 2]])).mul(3).round().tolist()
        [[[6.0, 6.0, 2.0, 0.0, 3.0], [3.0, 3.0, 1.0, 0.0, 0.0]]]
    """
    batch, units = grouping.shape
    sums = torch.zeros(batch, groups, x.shape[1])
    sums.scatter_add_(1, grouping.unsqueeze(-1).expand(-1, -1, x.shape[1]), x.expand(batch, -1, -1))
    counts = torch.zeros(batch, groups).scatter_add_(1, grouping, torch.ones(batch, units)) / units
    adjacency = torch.zeros(batch, groups * groups)
    if len(edges):
        flat = grouping[:, edges[:, 0]] * groups + grouping[:, edges[:, 1]]
        adjacency.scatter_add_(1, flat, torch.ones(flat.shape))
        adjacency = adjacency / len(edges)
    return torch.cat([sums, counts.unsqueeze(-1), adjacency.view(batch, groups, groups)], -1)
