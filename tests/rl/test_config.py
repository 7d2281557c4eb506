"""The learner's hyperparameters: every setting checked when the config is made, before any training."""

from __future__ import annotations

import re

import numpy as np
import pytest

from gnplace.exceptions import InvalidArgument
from gnplace.rl.config import LearnerConfig


def test_config_is_validated():
    for bad in (dict(algo="a2c"), dict(mode="x"), dict(samples=1), dict(lr=0.0), dict(imitation_steps=-1), dict(prior=-1.0),
                dict(screen=0)):
        with pytest.raises(InvalidArgument):
            LearnerConfig(**bad)
    assert LearnerConfig().policy.hidden == 64
    # a negative weight rewards what it should discourage: with oom_penalty=-3 a twofold overflow earned 3.0
    for name in ("oom_penalty", "entropy", "elite"):
        with pytest.raises(InvalidArgument, match=rf"need {name} >= 0, got -3.0"):
            LearnerConfig(**{name: -3.0})
    with pytest.raises(InvalidArgument, match="oom_penalty must be a finite number"):
        LearnerConfig(oom_penalty=float("inf"))
    # one batch draws samples x screen placements: past the limit it is refused, not a MemoryError mid-run
    with pytest.raises(InvalidArgument, match=r"^need samples x screen <= 16384, got 1600000 \(placements drawn"):
        LearnerConfig(samples=16, screen=100_000)
    with pytest.raises(InvalidArgument, match=r"val_samples <= 16384, got 20000"):
        LearnerConfig(val_samples=20_000)
    assert LearnerConfig(samples=32, screen=512).screen == 512
    for bad in (dict(epochs=1.5), dict(samples=4.0), dict(screen=True), dict(imitation_steps="2")):
        with pytest.raises(InvalidArgument, match="a whole number"):  # -O ppo.epochs=1.5 was a TypeError mid-run
            LearnerConfig(**bad)
    for bad in (dict(lr="1e-3"), dict(risk=None), dict(clip=True), dict(alpha=[3.0])):
        with pytest.raises(InvalidArgument, match=r"^need .* a number, got"):  # lr="1e-3" was a TypeError
            LearnerConfig(**bad)
    assert LearnerConfig(lr=1, beta=np.float32(0.5)).lr == 1  # an int or a numpy number is a number
    with pytest.raises(InvalidArgument, match=r"need seed < 2\*\*64"):  # torch's seed: was a ValueError (Overflow)
        LearnerConfig(seed=2**64)
    assert LearnerConfig(seed=2**64 - 1).seed == 2**64 - 1


def test_elite_target_is_checked():
    assert LearnerConfig(elite_target="samples").elite_target == "samples"
    with pytest.raises(InvalidArgument, match="elite_target"):
        LearnerConfig(elite_target="auto")


@pytest.mark.parametrize(("option", "value", "shown"), [
    ("lr", 10**400, "one of 401 digits"),  # math.isfinite of it was an OverflowError traceback
    ("lr", 1e39, "1e+39"),  # finite, then Adam's float32 step overflowed mid-run
    ("elite", 10**39, "one of 40 digits"),
    ("entropy", float("inf"), "inf"),
])
def test_a_number_past_float32s_range_is_refused(option, value, shown):
    with pytest.raises(InvalidArgument, match=rf"{option} must be a finite number within float32's range .*got "
                                              rf"{re.escape(shown)}$"):
        LearnerConfig(**{option: value})


def test_epochs_are_capped():
    """``gnplace finetune --epochs 1000000000`` ran one update for hours, deaf to SIGTERM (a kill is heard between
    iterations, after the update's last epoch)."""
    from gnplace.limits import MAX_EPOCHS

    assert LearnerConfig(epochs=MAX_EPOCHS).epochs == 1000
    with pytest.raises(InvalidArgument, match=r"^need epochs <= 1000, got 1000000000$"):
        LearnerConfig(epochs=10**9)


@pytest.mark.parametrize("option", ["lr", "clip", "grad_clip", "kl_target", "alpha"])
def test_a_positive_number_that_float32_rounds_to_zero_is_refused(option):
    """``--lr 1e-50`` passed ``lr > 0``, and the policy's float32 tensors took it as 0: nothing was learned."""
    with pytest.raises(InvalidArgument, match=rf"^{option} must be at least 1.2e-38 \(float32's smallest normal "
                                              r"number; .*got 1e-50$"):
        LearnerConfig(**{option: 1e-50})
    LearnerConfig(**{option: 1e-30 if option != "alpha" else 1.0})


@pytest.mark.parametrize("option", ["entropy", "elite", "beta", "prior", "oom_penalty"])
def test_a_whole_number_past_64_bits_is_refused_a_float_of_its_size_is_taken(option):
    """``-O ppo.entropy=100000000000000000000`` passed float32's range and ended in an OverflowError traceback (``int
    too big to convert``) at the first update: torch reads an int multiplying a tensor as a 64-bit integer."""
    with pytest.raises(InvalidArgument, match=rf"^{option} must be a whole number of at most 64 bits \(below 9.2e18\), "
                                              r"or a float such as 1e\+20, got one of 21 digits$"):
        LearnerConfig(**{option: 10**20})
    assert getattr(LearnerConfig(**{option: 1e20}), option) == 1e20
    assert getattr(LearnerConfig(**{option: 2**63 - 1}), option) == 2**63 - 1


def test_imitation_steps_past_the_budget_limit_are_refused():
    """``-O ppo.imitation_steps=10**20`` was taken, and the search imitated without end."""
    with pytest.raises(InvalidArgument, match=r"^need imitation_steps <= 1000000000, got 100000000000000000000$"):
        LearnerConfig(imitation_steps=10**20)
    assert LearnerConfig(imitation_steps=10**9).imitation_steps == 10**9


def test_refinements_moves_take_no_prior_elite_or_screen_as_the_docstring_says(monkeypatch):
    """``prior``, ``elite`` and ``screen`` were documented as the learner's sampling bias, pull and screen with no
    word of the MDP: in ``mode="refine"`` each move is drawn from the policy alone, the same with them as without."""
    from dataclasses import replace

    from gnplace.cluster import load_cluster
    from gnplace.rl.problem import PlacementProblem
    from gnplace.sim.simulator import Simulator
    from gnplace.toy import mlp_training_graph
    from gnplace.train import PlacementLearner

    plain = LearnerConfig(mode="refine", samples=4, epochs=1)
    shaped = replace(plain, prior=6.0, elite=1.0, screen=4)
    moves = []
    for config in (plain, shaped):
        problem = PlacementProblem.build(mlp_training_graph(layers=3, width=128, batch=16), load_cluster("k80x4"),
                                         Simulator())
        learner = PlacementLearner(config)
        monkeypatch.setattr(learner, "_update", lambda loss: None)  # (no trainer: the step's losses only)
        monkeypatch.setattr(learner, "_draw", lambda problem: pytest.fail("a refining learner drew a batch"))
        monkeypatch.setattr(learner, "_incumbent", lambda *args: pytest.fail("a refining learner pulled"))
        for _ in range(3):
            learner._reinforcement_step([problem])
        moves.append((problem.refiner.current.copy(), problem.evaluations, problem.screen))
    assert np.array_equal(moves[0][0], moves[1][0]) and moves[0][1] == moves[1][1] and moves[1][2] is None
    doc = " ".join((LearnerConfig.__doc__ or "").split())
    assert "so ``prior``, ``elite`` and ``screen``, which shape the constructive samples, do nothing there" in doc


@pytest.mark.parametrize("risk", [0.0, 1.5, -0.25])
def test_risk_is_a_share_in_0_1(risk):
    """risk is the share of each graph's samples kept (risk_seeking_advantages): 1.5 keeps no quantile, 0 nothing."""
    with pytest.raises(InvalidArgument, match=r"need risk in \(0, 1\], got "):
        LearnerConfig(risk=risk)
    assert LearnerConfig(risk=1.0).risk == 1.0 and LearnerConfig(risk=0.25).risk == 0.25


def test_numpy_numbers_are_kept_as_plain_ones_that_a_checkpoint_loads(tmp_path):
    """A search given samples=np.int64(4) or prior=np.float64(6.0) wrote a last.ckpt that its resume refused: torch's
    weights-only load takes no numpy scalar ("not a readable checkpoint (... unsafe ...)")."""
    import dataclasses

    import torch

    given = dict(samples=np.int64(4), epochs=np.int32(2), hidden=np.int64(8), screen=np.int64(1), seed=np.uint64(3),
                 lr=np.float32(0.5), prior=np.float64(6.0), entropy=np.float32(0.25), elite=np.int64(1))
    config = LearnerConfig(**given)
    assert config == LearnerConfig(samples=4, epochs=2, hidden=8, screen=1, seed=3, lr=0.5, prior=6.0, entropy=0.25,
                                   elite=1.0)
    assert all(type(getattr(config, name)) in (int, float) for name in given)
    assert type(LearnerConfig(prior=6).prior) is int  # a plain number is kept as it is
    torch.save(dataclasses.asdict(config), tmp_path / "c.pt")
    assert torch.load(tmp_path / "c.pt", weights_only=True) == dataclasses.asdict(config)
