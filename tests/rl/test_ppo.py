"""Spotlight's PPO loss against hand-computed values, and the adaptive KL coefficient."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch

from gnplace.rl.ppo import PPOConfig, adapt_beta, normalise_advantages, ppo_loss, risk_seeking_advantages


def test_ppo_loss_equals_a_hand_computed_value():
    # two episodes, one decision, two devices
    old = torch.log(torch.tensor([[[0.5, 0.5]], [[0.8, 0.2]]]))
    new = torch.log(torch.tensor([[[0.75, 0.25]], [[0.5, 0.5]]]))
    actions = torch.tensor([[0], [1]])
    adv = torch.tensor([1.0, -1.0])
    mask = torch.ones(2, 1, 2, dtype=torch.bool)
    loss, stats = ppo_loss(new, old, actions, adv, mask, clip=0.2, beta=0.5, entropy=0.1)
    # ratios 1.5 (clipped to 1.2 for A=+1) and 2.5 (A=-1: max(-(-1)*2.5, -(-1)*1.2) = 2.5)
    pg = (-1.2 + 2.5) / 2
    kl = (0.5 * math.log(0.5 / 0.75) + 0.5 * math.log(0.5 / 0.25) + 0.8 * math.log(0.8 / 0.5) + 0.2 * math.log(0.2 / 0.5)) / 2
    ent = (-(0.75 * math.log(0.75) + 0.25 * math.log(0.25)) + math.log(2)) / 2
    assert float(loss) == pytest.approx(pg + 0.5 * kl - 0.1 * ent, rel=1e-6)
    assert stats["losses/approx_kl"] == pytest.approx(kl, rel=1e-6)
    assert stats["losses/clipfrac"] == 1.0
    # Spotlight's objective, the KL penalty alone (clip None): the ratios as they are
    unclipped, stats = ppo_loss(new, old, actions, adv, mask, clip=None, beta=0.5, entropy=0.1)
    assert float(unclipped) == pytest.approx((-1.5 + 2.5) / 2 + 0.5 * kl - 0.1 * ent, rel=1e-6)
    assert stats["losses/clipfrac"] == 0.0


def test_masked_devices_do_not_count():
    old = torch.log(torch.tensor([[[1.0, 0.0]]]))
    new = torch.log(torch.tensor([[[1.0, 0.0]]]))
    mask = torch.tensor([[[True, False]]])
    loss, stats = ppo_loss(new, old, torch.tensor([[0]]), torch.tensor([1.0]), mask, clip=0.2, beta=1.0, entropy=0.1)
    assert torch.isfinite(loss) and stats["losses/approx_kl"] == 0.0 and stats["losses/entropy"] == 0.0


def test_the_gradient_raises_the_probability_of_good_actions():
    logits = torch.zeros(1, 1, 2, requires_grad=True)
    old = torch.log_softmax(logits.detach(), -1)
    loss, _ = ppo_loss(torch.log_softmax(logits, -1), old, torch.tensor([[1]]), torch.tensor([1.0]),
                       torch.ones(1, 1, 2, dtype=torch.bool), clip=0.2, beta=0.0, entropy=0.0)
    loss.backward()
    assert logits.grad[0, 0, 1] < 0 < logits.grad[0, 0, 0]


def test_advantages_and_beta():
    assert normalise_advantages(np.array([2.0, 2.0])).tolist() == [0.0, 0.0]
    a = normalise_advantages(np.array([0.0, 1.0, 2.0]))
    assert float(a.mean()) == pytest.approx(0.0, abs=1e-7) and float(a.std(unbiased=False)) == pytest.approx(1.0, rel=1e-6)
    assert adapt_beta(1.0, 0.0, 0.01) == 0.5 and adapt_beta(0.5, 1.0, 0.01) == 1.0
    assert PPOConfig().epochs == 10 and PPOConfig().beta == 1.0


@pytest.mark.parametrize("loss_name", ["ppo", "reinforce"])
def test_a_masked_device_leaves_the_gradient_finite(loss_name):
    """Masked devices have log-probability -inf; 0 * -inf in the KL or entropy term must not poison the gradient."""
    from gnplace.rl.reinforce import reinforce_loss

    logits = torch.tensor([[[0.3, -0.2, 0.0]], [[0.1, 0.4, 0.0]]], requires_grad=True)
    mask = torch.tensor([[[True, True, False]], [[True, True, False]]])
    new = torch.log_softmax(logits.masked_fill(~mask, float("-inf")), dim=-1)
    actions, adv = torch.tensor([[0], [1]]), torch.tensor([1.0, -1.0])
    if loss_name == "ppo":
        loss, stats = ppo_loss(new, new.detach(), actions, adv, mask, clip=0.2, beta=1.0, entropy=0.01)
        assert math.isfinite(stats["losses/approx_kl"]) and math.isfinite(stats["losses/entropy"])
    else:
        loss, stats = reinforce_loss(new, actions, adv, mask, entropy=0.01)
    loss.backward()
    assert torch.isfinite(loss) and torch.isfinite(logits.grad).all()
    assert float(logits.grad[..., 2].abs().sum()) == 0.0


@pytest.mark.parametrize("value", [0.1, 0.3, -0.2231435513142097, -1.7])
def test_equal_rewards_have_no_advantage(value):
    """A batch of equal rewards (a collapsed policy's repeats) carries no signal: float32 rounding of the mean is not one."""
    for n in (3, 7, 16, 100):
        assert normalise_advantages(np.full(n, value)).tolist() == [0.0] * n


def test_all_lists_every_public_function():
    """``__all__`` left out ``risk_seeking_advantages``, which the learner imports and ``LearnerConfig.risk`` names."""
    import inspect

    import gnplace.rl.ppo as ppo

    public = {name for name, value in vars(ppo).items() if not name.startswith("_") and inspect.isfunction(value)
              and value.__module__ == ppo.__name__}
    assert public <= set(ppo.__all__), sorted(public - set(ppo.__all__))


def test_the_clip_bounds_a_falling_ratio_from_below():
    """For A < 0 a ratio under ``1 - eps`` counts as ``1 - eps`` (the pessimistic bound), and it is clipped."""
    old = torch.log(torch.tensor([[[0.5, 0.5]]]))
    new = torch.log(torch.tensor([[[0.25, 0.75]]]))  # ratio of action 0: 0.5
    loss, stats = ppo_loss(new, old, torch.tensor([[0]]), torch.tensor([-1.0]), torch.ones(1, 1, 2, dtype=torch.bool),
                           clip=0.2, beta=0.0, entropy=0.0)
    assert float(loss) == pytest.approx(0.8, rel=1e-6)  # max(-(-1) * 0.5, -(-1) * 0.8)
    assert stats["losses/clipfrac"] == 1.0
    # an unchanged policy has ratio 1, which no clip, not even eps = 0, counts as clipped
    _, stats = ppo_loss(old, old, torch.tensor([[0]]), torch.tensor([1.0]), torch.ones(1, 1, 2, dtype=torch.bool),
                        clip=0.0, beta=0.0, entropy=0.0)
    assert stats["losses/clipfrac"] == 0.0


def test_risk_seeking_keeps_the_best_share():
    """``share`` 0.25 of four samples keeps the best one only: the cut is the 0.75 quantile, not the 0.25 one."""
    r = np.array([1.0, 2.0, 3.0, 4.0])
    a = risk_seeking_advantages(r, 0.25)
    cut = 1.0 + 0.75 * 3  # numpy's linear quantile of 1..4 at 0.75
    assert a.tolist() == pytest.approx([0.0, 0.0, 0.0, (4.0 - cut) / float(np.std(r))], abs=1e-6)


def test_beta_keeps_inside_the_band_and_doubles_just_above_it():
    """Schulman et al.'s band is [target / 1.5, 1.5 target]: kept at its edges, halved or doubled outside."""
    assert adapt_beta(1.0, 0.01 / 1.5, 0.01) == 1.0 and adapt_beta(1.0, 0.01 * 1.5, 0.01) == 1.0
    assert adapt_beta(1.0, 0.016, 0.01) == 2.0 and adapt_beta(1.0, 0.0066, 0.01) == 0.5


def _masked_batch(seed=0):
    """Logits of 4 episodes x 3 decisions x 5 devices with some devices masked (device 0 always allowed)."""
    gen = torch.Generator().manual_seed(seed)
    logits = torch.randn(4, 3, 5, generator=gen).requires_grad_()
    mask = torch.rand(4, 3, 5, generator=gen) > 0.3
    mask[..., 0] = True
    return logits, mask


def test_at_the_old_policy_the_clipped_surrogates_gradient_is_the_policy_gradient():
    """At ratio 1 (the first epoch) PPO's gradient is REINFORCE's: d r / d theta = grad log pi there.

    A flipped sign, or a ratio taken otherwise than as ``exp(log pi - log pi_old)`` of the chosen device, breaks it.
    """
    from gnplace.rl.reinforce import reinforce_loss

    logits, mask = _masked_batch()

    def log_pi():
        return torch.log_softmax(logits.masked_fill(~mask, float("-inf")), dim=-1)

    old = log_pi().detach()
    actions = torch.distributions.Categorical(logits=old).sample()
    adv = torch.tensor([1.5, -0.5, 0.25, -1.25])
    ppo, _ = ppo_loss(log_pi(), old, actions, adv, mask, clip=0.2, beta=0.0, entropy=0.0)
    pg, _ = reinforce_loss(log_pi(), actions, adv, mask, entropy=0.0)
    (g_ppo,), (g_pg,) = torch.autograd.grad(ppo, logits), torch.autograd.grad(pg, logits)
    assert float(g_pg.abs().sum()) > 0
    assert torch.allclose(g_ppo, g_pg, atol=1e-7)
    # the KL penalty is at its minimum there: no gradient
    penalty, _ = ppo_loss(log_pi(), old, actions, torch.zeros(4), mask, clip=0.2, beta=1.0, entropy=0.0)
    (g_kl,) = torch.autograd.grad(penalty, logits)
    assert float(g_kl.abs().max()) < 1e-6


def test_the_kl_and_the_entropy_are_those_of_the_allowed_devices_distributions():
    """``exact_kl`` and the entropy bonus equal torch's over the masked categorical distributions, per decision."""
    from torch.distributions import Categorical, kl_divergence

    logits, mask = _masked_batch(1)
    with torch.no_grad():
        old = torch.log_softmax(logits.masked_fill(~mask, float("-inf")), dim=-1)
        new = torch.log_softmax((logits + torch.randn(logits.shape)).masked_fill(~mask, float("-inf")), dim=-1)
    _, stats = ppo_loss(new, old, torch.zeros(4, 3, dtype=torch.int64), torch.zeros(4), mask, clip=0.2, beta=1.0,
                        entropy=0.01)
    p_old, p_new = Categorical(logits=old), Categorical(logits=new)
    assert stats["losses/approx_kl"] == pytest.approx(float(kl_divergence(p_old, p_new).mean()), rel=1e-5)
    assert stats["losses/entropy"] == pytest.approx(float(p_new.entropy().mean()), rel=1e-5)


def test_a_batch_of_one_sample_has_no_advantage_and_finite_losses():
    """One sample of a graph: the baseline is its own reward, so no advantage (0, not 0/0), and finite losses."""
    from gnplace.rl.reinforce import reinforce_loss

    for advantages in (normalise_advantages(np.array([0.3])), risk_seeking_advantages(np.array([0.3]), 0.25)):
        assert advantages.tolist() == [0.0]
    logits = torch.tensor([[[0.2, -0.1, 0.4]]], requires_grad=True)
    mask = torch.ones(1, 1, 3, dtype=torch.bool)
    new = torch.log_softmax(logits, dim=-1)
    adv = normalise_advantages(np.array([0.3]))
    ppo, stats = ppo_loss(new, new.detach(), torch.tensor([[2]]), adv, mask, clip=0.2, beta=1.0, entropy=0.01)
    pg, _ = reinforce_loss(new, torch.tensor([[2]]), adv, mask, entropy=0.01)
    (ppo + pg).backward()
    assert torch.isfinite(ppo) and torch.isfinite(pg) and torch.isfinite(logits.grad).all()
    assert all(math.isfinite(v) for v in stats.values())


def test_beta_halves_down_to_its_floor_and_doubles_back_up():
    """1,075 halvings took a beta of 1 to 0, which no doubling moves: the KL penalty was gone for good."""
    from gnplace.rl.ppo import BETA_FLOOR

    beta = 1.0
    for _ in range(1100):
        beta = adapt_beta(beta, 0.0, 0.01)
    assert beta == BETA_FLOOR == 2.0**-1022
    assert adapt_beta(beta, 1.0, 0.01) == 2.0**-1021
    assert adapt_beta(2.0**-1021, 0.0, 0.01) == BETA_FLOOR  # the halvings above the floor are as before
    assert adapt_beta(0.0, 0.0, 0.01) == 0.0 and adapt_beta(0.0, 1.0, 0.01) == 0.0  # no penalty stays none
    assert adapt_beta(2.0**-1030, 0.0, 0.01) == 2.0**-1030  # one set below the floor is not raised to it


def test_no_shipped_pretraining_config_adapts_beta_down_to_its_floor():
    """The floor leaves the shipped runs as they were: beta adapts once an iteration past imitation, from 1."""
    import yaml

    from gnplace.rl.ppo import BETA_FLOOR

    root = Path(__file__).resolve().parents[2]
    for path in (root / "configs").glob("*.yaml"):
        config = yaml.safe_load(path.read_text())
        if "schedule" not in config:
            continue
        learner = config.get("learner", {})
        adapted = config["schedule"]["iterations"] - learner.get("imitation_steps", 0)
        assert learner.get("beta", 1.0) * 2.0**-adapted > BETA_FLOOR, path


def test_the_baseline_is_the_mean_of_skewed_rewards():
    """``A = (R - mean R) / std R`` by hand on skewed rewards, where the mean (2) is not the median (1)."""
    std = math.sqrt(((0 - 2) ** 2 + (1 - 2) ** 2 + (5 - 2) ** 2) / 3)  # population std: sqrt(14 / 3)
    assert normalise_advantages(np.array([0.0, 1.0, 5.0])).tolist() == pytest.approx([-2 / std, -1 / std, 3 / std],
                                                                                     rel=1e-6)


def test_the_clip_never_raises_the_objective_of_a_move_it_penalises():
    """The min of the clipped and unclipped surrogate is pessimistic: a ratio that went the wrong way is not clipped.

    Two episodes, one decision: A = +1 with ratio 0.5 (the good action got less likely) and A = -1 with ratio
    1.5 (the bad one got more likely). Both ratios leave [0.8, 1.2], but neither is clipped in the loss:
    min(0.5 * 1, 0.8 * 1) = 0.5 and min(1.5 * -1, 1.2 * -1) = -1.5, so the loss is -(0.5 - 1.5) / 2 = 0.5
    (clipping both would give -(0.8 - 1.2) / 2 = 0.2).
    """
    old = torch.log(torch.tensor([[[0.5, 0.5]], [[0.5, 0.5]]]))
    new = torch.log(torch.tensor([[[0.25, 0.75]], [[0.75, 0.25]]]))  # ratios of action 0: 0.5, then 1.5
    loss, stats = ppo_loss(new, old, torch.tensor([[0], [0]]), torch.tensor([1.0, -1.0]),
                           torch.ones(2, 1, 2, dtype=torch.bool), clip=0.2, beta=0.0, entropy=0.0)
    assert float(loss) == pytest.approx(0.5, rel=1e-6)
    assert stats["losses/policy"] == pytest.approx(0.5, rel=1e-6)
    assert stats["losses/clipfrac"] == 1.0  # CleanRL's clipfrac: the ratio left the band, active in the loss or not
