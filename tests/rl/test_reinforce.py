"""REINFORCE, the policy-gradient ablation."""

from __future__ import annotations

import math

import pytest
import torch

from gnplace.rl.reinforce import reinforce_loss


def test_reinforce_loss_is_the_advantage_weighted_log_likelihood():
    logp = torch.log(torch.tensor([[[0.5, 0.5], [0.9, 0.1]]]))
    loss, stats = reinforce_loss(logp, torch.tensor([[0, 1]]), torch.tensor([2.0]),
                                 torch.ones(1, 2, 2, dtype=torch.bool), entropy=0.0)
    assert float(loss) == pytest.approx(-2.0 * (math.log(0.5) + math.log(0.1)) / 2)
    assert stats["losses/entropy"] > 0


def test_the_entropy_bonus_is_subtracted_from_the_loss():
    """L = -A log pi / S - c_H H: with advantages 0 the loss is -c_H times the mean entropy per decision."""
    logp = torch.log(torch.tensor([[[0.5, 0.5], [0.9, 0.1]]]))
    loss, stats = reinforce_loss(logp, torch.tensor([[0, 1]]), torch.tensor([0.0]),
                                 torch.ones(1, 2, 2, dtype=torch.bool), entropy=0.5)
    entropy = (math.log(2) - (0.9 * math.log(0.9) + 0.1 * math.log(0.1))) / 2
    assert stats["losses/entropy"] == pytest.approx(entropy, rel=1e-6)
    assert float(loss) == pytest.approx(-0.5 * entropy, rel=1e-6)
