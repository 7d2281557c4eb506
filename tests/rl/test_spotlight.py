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
