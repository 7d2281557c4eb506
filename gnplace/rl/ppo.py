"""Spotlight's proximal policy optimisation: the clipped surrogate with an adaptive KL penalty.

Spotlight (Gao, Chen & Li, ICML 2018) trains its placement policy with PPO (Schulman et al., 2017,
https://arxiv.org/abs/1707.06347) with a KL penalty whose coefficient :math:`\\beta` starts at 1 and
ten epochs of stochastic gradient ascent on each batch of sampled placements. Here every decision
:math:`t` of episode :math:`b` shares the episode's advantage :math:`\\hat A_b` (the reward comes
only at the end, and there is no discount: all decisions of a placement matter alike), and

.. math::
    L(\\theta) = \\mathbb{E}_{b,t}\\Bigl[-\\min\\bigl(r_{bt}(\\theta)\\hat A_b,\\;
        \\mathrm{clip}(r_{bt}(\\theta), 1-\\epsilon, 1+\\epsilon)\\hat A_b\\bigr)
        + \\beta\\,\\mathrm{KL}\\bigl(\\pi_{\\theta_{old}}(\\cdot|s_{bt}) \\,\\|\\, \\pi_\\theta(\\cdot|s_{bt})\\bigr)
        - c_H \\, H\\bigl(\\pi_\\theta(\\cdot|s_{bt})\\bigr)\\Bigr],
    \\qquad r_{bt}(\\theta) = \\frac{\\pi_\\theta(a_{bt}|s_{bt})}{\\pi_{\\theta_{old}}(a_{bt}|s_{bt})}

with advantages normalised per graph over its ``B`` samples,
:math:`\\hat A_b = (R_b - \\bar R) / (\\sigma_R + 10^{-8})` (the mean over the samples of the same
graph is the baseline). After each batch the coefficient adapts (Schulman et al. 2017, section 4):
halved when the mean KL is below ``target / 1.5``, doubled above ``1.5 target``. Schulman et al.
measure that KL after the batch's last update; :class:`gnplace.train.PlacementLearner` takes the KL its
last epoch's loss computed, after all the updates but that epoch's own, which costs no forward pass
more. The two differ by the last update's step. In an earlier pretraining run, the KL the rule sees
averages at most 0.002 per decision over every 50 iterations, against a target of 0.01
(docs/measured-zeroshot.md); the shipped checkpoints were trained with this measure, and changing it
would change them.

Logged metrics (namespaced as CleanRL does): ``losses/policy`` the clipped surrogate,
``losses/approx_kl`` the mean exact KL between the old and the new policy per decision,
``losses/clipfrac`` the share of decisions whose ratio left ``[1 - eps, 1 + eps]``,
``losses/entropy`` the mean entropy per decision, ``losses/beta`` the KL coefficient.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

__all__ = [
    "PPOConfig", "normalise_advantages", "risk_seeking_advantages", "ppo_loss", "exact_kl", "adapt_beta", "BETA_FLOOR",
]

BETA_FLOOR = 2.0**-1022
"""The least :math:`\\beta` :func:`adapt_beta` halves to: the smallest normal float (about 2.2e-308).

Halved without a floor, a :math:`\\beta` of 1 reached 0 after 1,075 halvings, and 0 doubled stays 0: the KL penalty
could never come back, however far the policy moved. No shipped run comes near the floor: pretraining adapts
:math:`\\beta` once an iteration, at most 300 times (``configs/pretrain.yaml``; the constructor configs only
imitate), so it stays at least 2**-300. And below about 2**-150 a :math:`\\beta` times a float32 KL is 0 in the
loss, so a run that does reach the floor computes the same updates as at 0 until :math:`\\beta` has doubled back
up some 870 times.
"""


@dataclass(frozen=True)
class PPOConfig:
    """PPO's hyperparameters (Spotlight's where it states them).

    Attributes:
        epochs (int): gradient steps on each batch of sampled placements (Spotlight: 10) (default: 10).
        clip (float or None): :math:`\\epsilon` of the clipped ratio; None: no clipping (the KL penalty alone,
            Spotlight's objective) (default: 0.2).
        beta (float): initial KL coefficient :math:`\\beta` (Spotlight: "the typical value of 1") (default: 1.0).
        kl_target (float): KL per decision the adaptive :math:`\\beta` aims at (default: 0.01).
        entropy (float): entropy bonus :math:`c_H` (default: 0.01).
    """

    epochs: int = 10
    clip: float | None = 0.2
    beta: float = 1.0
    kl_target: float = 0.01
    entropy: float = 0.01


def normalise_advantages(rewards: np.ndarray) -> torch.Tensor:
    """:math:`(R - \\bar R) / (\\sigma_R + 10^{-8})` over the samples of one graph, ``[B]``.

    Examples:
        >>> normalise_advantages(np.array([1.0, 3.0])).tolist()
        [-1.0, 1.0]
    """
    r = torch.as_tensor(rewards, dtype=torch.float32)
    if r.numel() and bool((r == r[0]).all()):
        # equal rewards (a collapsed policy's repeats) carry no signal; float32's mean can miss them by an ulp,
        # and that ulp over a spread of the same size is an advantage of about 1, of either sign
        return torch.zeros_like(r)
    return (r - r.mean()) / (r.std(unbiased=False) + 1e-8)  # A_i = (R_i - mean R) / std R


def risk_seeking_advantages(rewards: np.ndarray, share: float) -> torch.Tensor:
    """Advantages of the best ``share`` of one graph's samples only, 0 for the others, ``[B]``.

    :math:`(R - R_\\epsilon) / \\sigma_R` where :math:`R \\ge R_\\epsilon`, the :math:`1 - \\epsilon`
    quantile of the rewards (``share`` is :math:`\\epsilon`).

    The risk-seeking policy gradient (Petersen et al., "Deep symbolic regression", ICLR 2021, eq. 3)
    raises the expected *best* of the samples rather than their mean: a placer that keeps the best of
    ``K`` samples should not learn to avoid every risky move because most of them lose.

    Examples:
        >>> risk_seeking_advantages(np.array([1.0, 2.0, 3.0, 4.0]), 0.5).tolist()
        [0.0, 0.0, 0.4472135901451111, 1.3416407108306885]
    """
    r = torch.as_tensor(rewards, dtype=torch.float32)
    cut = torch.quantile(r, 1.0 - share)  # R_epsilon
    return torch.where(r >= cut, r - cut, torch.zeros_like(r)) / (r.std(unbiased=False) + 1e-8)


def exact_kl(old_log_probs: torch.Tensor, new_log_probs: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """:math:`\\mathrm{KL}(\\pi_{\\theta_{old}} \\| \\pi_\\theta)`, exact over the allowed devices, mean over decisions.

    Args:
        old_log_probs (torch.Tensor): :math:`\\log\\pi_{\\theta_{old}}` of every device, ``[..., D]``.
        new_log_probs (torch.Tensor): :math:`\\log\\pi_\\theta` of every device, ``[..., D]``.
        mask (torch.Tensor): allowed devices, ``[..., D]`` bool (masked devices have log-probability ``-inf``).
    """
    # masked devices have log-probability -inf: zero them before any product, or 0 * -inf poisons the gradient
    old_safe = old_log_probs.masked_fill(~mask, 0.0)
    new_safe = new_log_probs.masked_fill(~mask, 0.0)
    p_old = old_safe.exp() * mask
    return (p_old * (old_safe - new_safe)).sum(-1).mean()


def ppo_loss(
    new_log_probs: torch.Tensor, old_log_probs: torch.Tensor, actions: torch.Tensor, advantages: torch.Tensor,
    mask: torch.Tensor, *, clip: float | None, beta: float, entropy: float,
) -> tuple[torch.Tensor, dict[str, float]]:
    """The loss above on one graph's batch, and its metrics.

    Args:
        new_log_probs (torch.Tensor): :math:`\\log\\pi_\\theta` of every device, ``[B, S, D]``.
        old_log_probs (torch.Tensor): :math:`\\log\\pi_{\\theta_{old}}` of every device, ``[B, S, D]``.
        actions (torch.Tensor): devices chosen, ``[B, S]`` int64.
        advantages (torch.Tensor): :math:`\\hat A_b`, ``[B]``.
        mask (torch.Tensor): allowed devices, ``[B, S, D]`` bool.
        clip (float or None): :math:`\\epsilon`; None: the unclipped surrogate :math:`-r_t\\hat A`.
        beta (float): :math:`\\beta`.
        entropy (float): :math:`c_H`.
    """
    index = actions.unsqueeze(-1)
    new_logp = new_log_probs.gather(-1, index).squeeze(-1)  # log pi_theta(a_t | s_t)
    old_logp = old_log_probs.gather(-1, index).squeeze(-1)
    # ALGO LOGIC: the probability ratio r_t(theta) and the clipped surrogate
    ratio = (new_logp - old_logp).exp()
    adv = advantages[:, None]
    pg_loss1 = -adv * ratio
    if clip is None:  # Spotlight's objective: E[r A] - beta KL, no clip
        pg_loss = pg_loss1.mean()
    else:
        pg_loss2 = -adv * ratio.clamp(1.0 - clip, 1.0 + clip)
        pg_loss = torch.max(pg_loss1, pg_loss2).mean()
    # ALGO LOGIC: KL(pi_old || pi_theta) per decision, exact over the allowed devices
    kl = exact_kl(old_log_probs, new_log_probs, mask)
    new_safe = new_log_probs.masked_fill(~mask, 0.0)  # 0, not -inf, where masked: 0 * -inf poisons the gradient
    p_new = new_safe.exp() * mask
    ent = -(p_new * new_safe).sum(-1).mean()  # H(pi_theta(.|s_t))
    loss = pg_loss + beta * kl - entropy * ent
    clipfrac = ((ratio - 1.0).abs() > clip).float().mean() if clip is not None else torch.zeros(())
    return loss, {
        "losses/policy": float(pg_loss.detach()), "losses/approx_kl": float(kl.detach()),
        "losses/entropy": float(ent.detach()), "losses/clipfrac": float(clipfrac),
    }


def adapt_beta(beta: float, kl: float, target: float) -> float:
    """Schulman et al.'s rule: halve :math:`\\beta` below ``target / 1.5``, double it above ``1.5 target``.

    Halving stops at :data:`BETA_FLOOR` (or at ``beta`` itself, where it starts below it): a :math:`\\beta` of 0,
    no KL penalty, stays 0, and a positive one never underflows to 0.

    Examples:
        >>> adapt_beta(1.0, 0.001, 0.01), adapt_beta(1.0, 0.1, 0.01), adapt_beta(1.0, 0.01, 0.01)
        (0.5, 2.0, 1.0)
    """
    if kl < target / 1.5:
        return max(beta / 2.0, min(beta, BETA_FLOOR))
    if kl > target * 1.5:
        return beta * 2.0
    return beta
