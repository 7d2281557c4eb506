"""Warm start by imitation: behaviour cloning of the best fast placer's choices.

DOPPLER (ICLR 2026) first imitates a list-scheduling heuristic and only then turns to reinforcement
learning; so does gnplace. The reference placement (``auto``'s) is replayed through the placement
MDP with its devices forced (:func:`~gnplace.rl.agent.teacher_forced`), and the policy is trained to
give each decision's reference device the highest probability:

.. math::
    L_{BC}(\\theta) = -\\frac{1}{S} \\sum_t \\log \\pi_\\theta(a^{ref}_t \\mid s_t)

so that PPO starts from the heuristic's quality rather than from random placements.

Devices that are interchangeable at a decision (same device features, same dynamic features: two
idle identical GPUs before anything is placed) cannot be told apart by any policy that serves any
set of devices, and the heuristic's pick among them is an arbitrary tie-break. The target is
therefore the *class* of devices equivalent to the reference's, and the loss
:math:`-\\log \\sum_{d \\equiv a^{ref}_t} \\pi_\\theta(d \\mid s_t)`; a greedy policy breaks the tie by
the lowest device index, as the list schedulers do.
"""

from __future__ import annotations

import torch

__all__ = ["imitation_loss"]


def imitation_loss(
    new_log_probs: torch.Tensor, targets: torch.Tensor, equivalent: torch.Tensor | None = None
) -> tuple[torch.Tensor, dict[str, float]]:
    """Cross-entropy of the policy against the reference devices, and the share it already picks.

    Args:
        new_log_probs (torch.Tensor): :math:`\\log\\pi_\\theta` of every device, ``[B, S, D]``.
        targets (torch.Tensor): the reference device of every decision, ``[B, S]`` int64.
        equivalent (torch.Tensor, optional): devices interchangeable with the target at each decision,
            ``[B, S, D]`` bool (default: only the target itself).

    Returns:
        tuple[torch.Tensor, dict[str, float]]: the loss, and ``imitation/loss`` and
        ``imitation/accuracy`` (share of decisions whose most likely device is the reference's).

    Examples:
        >>> import torch
        >>> logp = torch.log(torch.tensor([[[0.9, 0.1], [0.2, 0.8]]]))
        >>> loss, stats = imitation_loss(logp, torch.tensor([[0, 0]]))
        >>> round(float(loss.detach()), 4), stats["imitation/accuracy"]
        (0.8574, 0.5)
    """
    if equivalent is None:
        equivalent = torch.zeros_like(new_log_probs, dtype=torch.bool).scatter_(-1, targets.unsqueeze(-1), True)
    # log sum_{d equiv a^ref_t} pi_theta(d | s_t): the probability of the reference's class of devices
    logp = torch.logsumexp(new_log_probs.masked_fill(~equivalent, float("-inf")), dim=-1)
    loss = -logp.mean()  # L_BC(theta), the mean over decisions (and over the batch's episodes)
    accuracy = equivalent.gather(-1, new_log_probs.argmax(-1, keepdim=True)).float().mean()
    return loss, {"imitation/loss": float(loss.detach()), "imitation/accuracy": float(accuracy)}
