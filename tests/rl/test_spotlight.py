"""``spotlight``, Spotlight."""

from __future__ import annotations

import pytest

from gnplace.exceptions import InvalidArgument
from gnplace.rl.spotlight import SpotlightPlacer


def test_registered_as_a_learned_budgeted_placer(seed_placer_checks):
    seed_placer_checks.registered("spotlight", SpotlightPlacer)


def test_learns_on_a_small_graph_and_beats_random_placements(seed_placer_checks, two_chains):
    seed_placer_checks.learns_the_optimum(SpotlightPlacer, two_chains(8))


def test_deterministic_under_a_seed(seed_placer_checks):
    seed_placer_checks.deterministic(SpotlightPlacer)


def test_beta_adapts_to_the_kl_after_the_update():
    """One epoch of a large step moves the policy far: beta doubles. The KL was read before the step (0 at the
    first epoch), so with one epoch beta halved after every batch whatever the update did."""
    import torch

    from gnplace.policy.seq2seq import Seq2SeqPolicy
    from gnplace.rl.ppo import PPOConfig
    from gnplace.rl.spotlight import ppo_update

    torch.manual_seed(0)
    policy = Seq2SeqPolicy(4, 3, hidden=8, layers=1)
    x = torch.randn(5, 4)
    actions, old_log_probs = policy.sample(x, 8, torch.Generator().manual_seed(0))
    advantages = torch.linspace(-1.0, 1.0, 8)
    optimiser = torch.optim.SGD(policy.parameters(), lr=50.0)
    config = PPOConfig(epochs=1, entropy=0.0)
    beta = ppo_update(policy, optimiser, x, actions, old_log_probs, advantages, config, 1.0, clip_norm=1e9)
    with torch.no_grad():
        new_log_probs = policy.log_probs(x, actions)
    kl = float((old_log_probs.exp() * (old_log_probs - new_log_probs)).sum(-1).mean())
    assert kl > 1.5 * config.kl_target and beta == 2.0


@pytest.mark.parametrize("bad", [dict(beta=float("inf")), dict(entropy=float("inf")), dict(lr=1e300),
                                 # past float32's 3.4e38: clip could not enter torch.clamp, beta made nan probabilities
                                 dict(clip=1e39), dict(beta=1e39), dict(entropy=10**400),
                                 dict(epochs=1001)])  # one update, deaf to a kill, for hours
def test_options_that_break_the_run_are_refused(bad):
    """Accepted before, then a RuntimeError mid-run: inf times a KL of 0 is nan, Adam's float32 step overflowed."""
    with pytest.raises(InvalidArgument) as err:
        SpotlightPlacer(**bad)
    assert "\n" not in str(err.value)


def test_the_papers_objective_runs_with_no_clip(two_chains):
    """Spotlight's objective is the KL penalty alone; the clip of 0.2 could not be turned off (clip must be > 0)."""
    from gnplace.cluster import load_cluster
    from gnplace.placers.registry import make_placer

    placer = make_placer("spotlight", budget=32, samples=8, hidden=16, layers=1, clip=None)
    assert placer.config.clip is None
    assert placer.place(two_chains(4), load_cluster("k80x2"), seed=0).devices.shape == (8,)
    with pytest.raises(InvalidArgument, match="clip"):
        SpotlightPlacer(clip=0.0)


def _seq2seq_batch():
    import torch

    from gnplace.policy.seq2seq import Seq2SeqPolicy

    torch.manual_seed(0)
    policy = Seq2SeqPolicy(4, 3, hidden=8, layers=1)
    torch.nn.init.normal_(policy.out.weight)
    x = torch.randn(5, 4)
    actions, old_log_probs = policy.sample(x, 8, torch.Generator().manual_seed(0))
    return policy, x, actions, old_log_probs


def _flat(policy):
    import torch

    return torch.cat([p.detach().flatten() for p in policy.parameters()]).clone()


def test_each_update_step_is_bounded_by_the_gradient_norm_clip():
    """clip_norm bounds the gradient's norm: with SGD at rate 1 a step moves the weights by at most clip_norm."""
    import torch

    from gnplace.rl.ppo import PPOConfig
    from gnplace.rl.spotlight import ppo_update

    steps = {}
    for clip_norm in (1e-3, 1e9):
        policy, x, actions, old = _seq2seq_batch()
        before = _flat(policy)
        optimiser = torch.optim.SGD(policy.parameters(), lr=1.0)
        ppo_update(policy, optimiser, x, actions, old, torch.linspace(-10.0, 10.0, 8), PPOConfig(epochs=1), 1.0,
                   clip_norm=clip_norm)
        steps[clip_norm] = float((_flat(policy) - before).norm())
    assert 0 < steps[1e-3] <= 1e-3 * (1 + 1e-4) and steps[1e9] > 1e-2


def test_the_extra_loss_is_added_at_every_epoch():
    """Post's cross-entropy enters each of the K steps: with no advantage and no KL penalty it alone moves the weights."""
    import torch

    from gnplace.rl.ppo import PPOConfig
    from gnplace.rl.spotlight import ppo_update

    policy, x, actions, old = _seq2seq_batch()
    before = _flat(policy)
    calls = []

    def extra(new_log_probs):
        calls.append(new_log_probs.shape)
        return -new_log_probs[..., 0].mean()

    optimiser = torch.optim.SGD(policy.parameters(), lr=0.1)
    ppo_update(policy, optimiser, x, actions, old, torch.zeros(8), PPOConfig(epochs=3, entropy=0.0), 0.0, extra=extra)
    assert calls == [(8, 5, 3)] * 3
    assert float((_flat(policy) - before).abs().max()) > 0
    # and nothing moves without it
    policy, x, actions, old = _seq2seq_batch()
    ppo_update(policy, torch.optim.SGD(policy.parameters(), lr=0.1), x, actions, old, torch.zeros(8),
               PPOConfig(epochs=3, entropy=0.0), 0.0)
    assert torch.equal(_flat(policy), before)
