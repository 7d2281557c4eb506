"""The learner's hyperparameters (:class:`LearnerConfig`), apart from the learner.

:class:`gnplace.train.PlacementLearner` trains under Lightning, whose import takes about 10 s; a config
is read and checked before that (``scripts/train.py``, ``gnplace pretrain``, the searches), so that a bad
setting is one line at once, not after the import.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from gnplace.exceptions import InvalidArgument
from gnplace.limits import MAX_BUDGET, MAX_DRAWN, MAX_EPOCHS, MAX_LAYERS, MAX_WIDTH, is_number, is_whole

#: The largest float32 (3.4028235e38): the learner's numbers enter float32 tensors.
FLOAT32_MAX = float(np.finfo(np.float32).max)
#: float32's smallest normal number (1.2e-38): a setting that must be > 0 is refused below it, where the policy's
#: float32 tensors hold it as 0 or a subnormal (``lr=1e-50`` trained nothing, and said nothing).
FLOAT32_TINY = float(np.finfo(np.float32).tiny)
#: torch reads a Python int multiplying a tensor as a 64-bit integer: a setting that is an int is refused from this
#: magnitude on (a float of any size within float32's range is taken).
INT64_BOUND = 2**63


def past_64_bits(value: object) -> str | None:
    """What a setting must be instead, where ``value`` is an int past :data:`INT64_BOUND`; else ``None``.

    ``entropy=10**20`` was an OverflowError traceback ("int too big to convert") at the first update.

    Examples:
        >>> past_64_bits(10**20)
        'a whole number of at most 64 bits (below 9.2e18), or a float such as 1e+20, got one of 21 digits'
        >>> past_64_bits(1e20) is None
        True
    """
    if not isinstance(value, int) or -INT64_BOUND <= value < INT64_BOUND:
        return None
    return (f"a whole number of at most 64 bits (below 9.2e18), or a float such as {float(value):.0e}, got one of "
            f"{len(str(abs(value)))} digits")

if TYPE_CHECKING:
    from gnplace.policy.gnn import PolicyConfig
    from gnplace.sim.timer import StepTimer

__all__ = ["LearnerConfig", "SCREEN_MODELS"]


#: What a search's screen starts from (:attr:`LearnerConfig.screen_model`).
SCREEN_MODELS = ("learned", "simulator")


@dataclass(frozen=True)
class LearnerConfig:
    """Every hyperparameter of the learner; each field has a default.

    Attributes:
        algo (str): ``"ppo"`` (Spotlight's) or ``"reinforce"`` (the policy-gradient ablation) (default: ``"ppo"``).
        mode (str): the MDP: ``"construct"`` (Spotlight's multi-stage placement, every group per
            episode) or ``"refine"`` (Placeto's and GiPH's: chains move one group per step from the best
            placement seen; each move is drawn from the policy alone, so ``prior``, ``elite`` and ``screen``,
            which shape the constructive samples, do nothing there) (default: ``"construct"``).
        samples (int): placements sampled per (graph, cluster) per iteration, ``B`` (default: 32).
        epochs (int): PPO gradient steps per batch, at most :data:`~gnplace.limits.MAX_EPOCHS` (Spotlight: 10)
            (default: 10).
        clip (float): PPO's ratio clip :math:`\\epsilon` (default: 0.2).
        beta (float): initial KL coefficient :math:`\\beta` (Spotlight: 1) (default: 1.0).
        kl_target (float): KL per decision the adaptive :math:`\\beta` aims at (default: 0.01).
        entropy (float): entropy bonus :math:`c_H` (default: 0.01).
        elite (float): weight of a cross-entropy pull toward the best placement seen so far (it starts
            as the reference), Post's idea of minimising the cross-entropy to the best samples (Gao et al.,
            NeurIPS 2018) applied to the incumbent; 0 turns it off (default: 0.0).
        elite_target (str): what the pull aims at: ``"best"``, the best placement seen, the reference
            included (a search: never let go of the incumbent), or ``"samples"``, the best the policy itself
            sampled (pretraining: Post's cross-entropy to the best samples, which the policy can reach by
            itself, where imitating another placer's choices past a warm start degrades its greedy
            decoding) (default: ``"best"``).
        prior (float): logit bonus :math:`\\kappa` of the best placement's device for every group while
            sampling, so that samples stay near the incumbent and the policy learns which moves from it pay
            (a search's setting, with anchored scoring; the behaviour and updated policies both carry it);
            0 samples the policy alone (default: 0.0).
        screen (int): candidates drawn per placement timed, ``M``: once a pair's
            :class:`~gnplace.rl.screen.MoveScreen` has learned from enough timed placements, each batch
            draws ``M * samples`` placements and times and learns from only the ``samples`` new ones the
            screen ranks fastest; 1 times every sample drawn (fine-tuning's revision 17; default: 1).
        screen_model (str): what the screen starts from: ``"learned"``, nothing (it learns from the
            pair's timed placements alone, and ranks once it has seen 32), or ``"simulator"``, the
            simulator's step time of each candidate on the pair's graph and cluster, corrected by what it
            learns (a real timer's search, after ``gnplace profile``; refused with the simulator as the
            timer, whose evaluations it would make free) (default: ``"learned"``).
        risk (float): share of each pair's samples whose advantage is kept, the best ones, as
            :math:`R - R_\\epsilon` (the risk-seeking policy gradient:
            :func:`~gnplace.rl.ppo.risk_seeking_advantages`); 1 keeps all, normalised (default: 1.0).
        val_samples (int): placements sampled per held-out pair at each validation, with the ``prior``
            around the reference (the same draws each time); validation then also logs the best of them and
            the greedy one, ``val/best_vs_auto``, which selects the exported checkpoint (default: 0).
        lr (float): Adam's learning rate (default: 1e-3).
        grad_clip (float): gradient norm bound (default: 1.0).
        oom_penalty (float): reward penalty :math:`\\rho` per unit of relative memory overflow (default: 4.0).
        imitation_steps (int): iterations of imitation before reinforcement (default: 0).
        hidden (int): embedding width of the policy (default: 64).
        head (int): width of the policy head's hidden layer (default: 32).
        layers (int): message-passing rounds of the policy (default: 4).
        alpha (float): initial weight of the EFT rule in the logits (default: 3.0).
        seed (int): seed of the policy's weights and of the sampling (default: 0).
    """

    algo: str = "ppo"
    mode: str = "construct"
    samples: int = 32
    epochs: int = 10
    clip: float = 0.2
    beta: float = 1.0
    kl_target: float = 0.01
    entropy: float = 0.01
    elite: float = 0.0
    elite_target: str = "best"
    prior: float = 0.0
    screen: int = 1
    screen_model: str = "learned"
    risk: float = 1.0
    val_samples: int = 0
    lr: float = 1e-3
    grad_clip: float = 1.0
    oom_penalty: float = 4.0
    imitation_steps: int = 0
    hidden: int = 64
    head: int = 32
    layers: int = 4
    alpha: float = 3.0
    seed: int = 0

    def __post_init__(self) -> None:
        if self.algo not in ("ppo", "reinforce"):
            raise InvalidArgument(f"algo must be 'ppo' or 'reinforce', got {self.algo!r}")
        if self.elite_target not in ("best", "samples"):
            raise InvalidArgument(f"elite_target must be 'best' or 'samples', got {self.elite_target!r}")
        if self.mode not in ("construct", "refine"):
            raise InvalidArgument(f"mode must be 'construct' or 'refine', got {self.mode!r}")
        if self.screen_model not in SCREEN_MODELS:
            raise InvalidArgument(f"screen_model must be one of {', '.join(map(repr, SCREEN_MODELS))}, "
                                  f"got {self.screen_model!r}")
        low = {"samples": 2, "epochs": 1, "imitation_steps": 0, "val_samples": 0, "seed": 0, "screen": 1,
               "hidden": 1, "head": 1, "layers": 1}  # (the network's shape: refused here, before any evaluation)
        bad = [f"{name} a whole number, got {getattr(self, name)!r}" for name in low  # 1.5 epochs was a TypeError
               if not is_whole(getattr(self, name))]
        bad = bad or [f"{name} >= {least}, got {getattr(self, name)}" for name, least in low.items()
                      if getattr(self, name) < least]
        bad = bad or ([f"seed < 2**64 (torch's generator seeds with 64 bits), got {self.seed}"]
                      if self.seed >= 2**64 else [])
        if bad:  # only the settings at fault: fine-tuning, say, has no imitation_steps or val_samples to set
            raise InvalidArgument(f"need {'; '.join(bad)}")
        shape = {"hidden": (self.hidden, MAX_WIDTH), "head": (self.head, MAX_WIDTH),
                 "layers": (self.layers, MAX_LAYERS), "epochs": (self.epochs, MAX_EPOCHS),
                 "imitation_steps": (self.imitation_steps, MAX_BUDGET)}  # (10**20 ran on without end)
        big = [f"{name} <= {most}, got {value}" for name, (value, most) in shape.items() if value > most]
        if big:  # refused, not allocated (or not run: an update hears no kill before its last epoch)
            raise InvalidArgument(f"need {'; '.join(big)}")
        drawn = {"samples x screen": self.samples * self.screen, "val_samples": self.val_samples}
        over = [f"{name} <= {MAX_DRAWN}, got {value}" for name, value in drawn.items() if value > MAX_DRAWN]
        if over:  # one batch of rollouts holds samples x decision nodes x devices logits
            raise InvalidArgument(f"need {'; '.join(over)} (placements drawn in one batch)")
        reals = ("lr", "clip", "grad_clip", "beta", "prior", "risk", "kl_target", "alpha", "oom_penalty", "entropy",
                 "elite")
        bad = [f"{name} a number, got {getattr(self, name)!r}" for name in reals  # lr="1e-3" was a TypeError
               if not is_number(getattr(self, name))]
        if bad:
            raise InvalidArgument(f"need {'; '.join(bad)}")
        ranges = {"lr": (self.lr, self.lr > 0, "> 0"), "clip": (self.clip, self.clip > 0, "> 0"),
                  "grad_clip": (self.grad_clip, self.grad_clip > 0, "> 0"), "beta": (self.beta, self.beta >= 0, ">= 0"),
                  "prior": (self.prior, self.prior >= 0, ">= 0"), "risk": (self.risk, 0 < self.risk <= 1, "in (0, 1]"),
                  "kl_target": (self.kl_target, self.kl_target > 0, "> 0"),
                  "alpha": (self.alpha, self.alpha > 0, "> 0"),
                  # a negative weight would reward what it exists to discourage (overflowing memory, collapse)
                  "oom_penalty": (self.oom_penalty, self.oom_penalty >= 0, ">= 0"),
                  "entropy": (self.entropy, self.entropy >= 0, ">= 0"), "elite": (self.elite, self.elite >= 0, ">= 0")}
        wrong = [f"{name} {rule}, got {value}" for name, (value, ok, rule) in ranges.items() if not ok]
        if wrong:
            raise InvalidArgument(f"need {'; '.join(wrong)}")
        numbers = {"lr": self.lr, "clip": self.clip, "beta": self.beta, "grad_clip": self.grad_clip,
                   "prior": self.prior, "entropy": self.entropy, "elite": self.elite, "kl_target": self.kl_target,
                   "alpha": self.alpha, "oom_penalty": self.oom_penalty}
        for name, value in numbers.items():  # each enters float32 tensors: past 3.4e38 it overflowed mid-run, and
            # math.isfinite of an int past a float's range was an OverflowError
            if not -FLOAT32_MAX <= value <= FLOAT32_MAX:
                shown = f"{value:.4g}" if isinstance(value, float) else f"one of {len(str(abs(value)))} digits"
                raise InvalidArgument(f"{name} must be a finite number within float32's range (+-3.4e38), got {shown}")
            wide = past_64_bits(value)  # torch takes an int as 64 bits
            if wide is not None:
                raise InvalidArgument(f"{name} must be {wide}")
        positive = {"lr": self.lr, "clip": self.clip, "grad_clip": self.grad_clip, "kl_target": self.kl_target,
                    "alpha": self.alpha}
        for name, value in positive.items():
            if value < FLOAT32_TINY:
                raise InvalidArgument(f"{name} must be at least {FLOAT32_TINY:.2g} (float32's smallest normal "
                                      f"number; below it the policy's float32 tensors round it to 0), got {value:.4g}")
        # numpy numbers as plain ones: a search's last.ckpt holds these settings, and one holding np.int64(4) samples
        # or an np.float64 prior was refused by torch's weights-only load ("not a readable checkpoint") on resume
        for name in low:
            if type(getattr(self, name)) is not int:
                object.__setattr__(self, name, int(getattr(self, name)))
        for name in reals:
            if type(getattr(self, name)) not in (int, float):
                object.__setattr__(self, name, float(getattr(self, name)))

    def check_timer(self, timer: StepTimer) -> None:
        """Refuse a ``timer`` these settings cannot search with, before anything is timed.

        Raises:
            InvalidArgument: for ``screen_model="simulator"`` with the simulator as the timer (its screen
                would rank candidates by the very step times the search is charged for, for free).
        """
        from gnplace.sim.timer import simulated

        if self.screen > 1 and self.screen_model == "simulator" and simulated(timer):
            raise InvalidArgument("screen_model 'simulator' ranks candidates by the simulator, which would make a "
                                  "simulator-timed search's evaluations free: use it with a real timer")

    @property
    def policy(self) -> PolicyConfig:
        """The policy network's shape."""
        from gnplace.policy.gnn import PolicyConfig  # torch and torch-geometric: only once a network is built

        return PolicyConfig(hidden=self.hidden, head=self.head, layers=self.layers, alpha=self.alpha)
