"""REINFORCE: the policy-gradient ablation of PPO, with the same policy and baseline.

Williams' REINFORCE (Machine Learning, 1992), the policy-gradient method that Spotlight's PPO is
compared with (Mirhoseini et al., ICML 2017, train their placer with it): one gradient step per batch
of sampled placements on

.. math::
    L(\\theta) = -\\mathbb{E}_{b}\\Bigl[\\hat A_b \\, \\tfrac{1}{S}
        \\textstyle\\sum_t \\log\\pi_\\theta(a_{bt}|s_{bt})\\Bigr]
        - c_H \\, \\mathbb{E}_{b,t}\\bigl[H(\\pi_\\theta(\\cdot|s_{bt}))\\bigr]

with the advantages of PPO (:func:`~gnplace.rl.ppo.normalise_advantages`: the reward minus the mean
over the graph's samples, over their spread).
"""

from __future__ import annotations

import torch

__all__ = ["reinforce_loss"]


def reinforce_loss(
    new_log_probs: torch.Tensor, actions: torch.Tensor, advantages: torch.Tensor, mask: torch.Tensor, *,
    entropy: float,
) -> tuple[torch.Tensor, dict[str, float]]:
    """The loss above on one graph's batch, and its metrics (``losses/policy``, ``losses/entropy``).

    Args:
        new_log_probs (torch.Tensor): :math:`\\log\\pi_\\theta` of every device, ``[B, S, D]``.
        actions (torch.Tensor): devices chosen, ``[B, S]`` int64.
        advantages (torch.Tensor): :math:`\\hat A_b`, ``[B]``.
        mask (torch.Tensor): allowed devices, ``[B, S, D]`` bool.
        entropy (float): :math:`c_H`.

    Examples:
        >>> import torch
        >>> logp = torch.log(torch.tensor([[[0.5, 0.5]], [[0.25, 0.75]]]))
        >>> loss, _ = reinforce_loss(logp, torch.tensor([[0], [1]]), torch.tensor([1.0, -1.0]),
        ...                          torch.ones(2, 1, 2, dtype=torch.bool), entropy=0.0)
        >>> round(float(loss.detach()), 4)  # -(1 * log 0.5 - 1 * log 0.75) / 2
        0.2027
    """
    logp = new_log_probs.gather(-1, actions.unsqueeze(-1)).squeeze(-1)  # log pi_theta(a_t | s_t)
    # ALGO LOGIC: score-function gradient of the episode's log-likelihood, weighted by its advantage
    pg_loss = -(advantages[:, None] * logp).mean()
    safe = new_log_probs.masked_fill(~mask, 0.0)  # 0 * -inf at masked devices would poison the gradient
    ent = -(safe.exp() * mask * safe).sum(-1).mean()
    return pg_loss - entropy * ent, {"losses/policy": float(pg_loss.detach()), "losses/entropy": float(ent.detach())}
