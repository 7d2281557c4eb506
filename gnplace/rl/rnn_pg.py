"""``rnn_pg``: Mirhoseini et al., "Device Placement Optimization with Reinforcement Learning", ICML 2017.

A sequence-to-sequence LSTM with attention (:class:`~gnplace.policy.seq2seq.Seq2SeqPolicy`) reads the
colocation groups in topological order and emits a device per group; one policy per graph, trained
from a uniformly random start with REINFORCE and a moving-average baseline of the reward
:math:`R = -\\sqrt{T / T_{ser}}`, the step time over the graph's serial step, a placement that overflows a
device charged :math:`T = 10\\,T_{slow}` (:func:`~gnplace.rl.comparator.sqrt_reward`; the paper's
:math:`-\\sqrt{T}` is in seconds). Per batch of :math:`B` sampled placements:

.. math::
    \\nabla_\\theta J \\approx \\frac{1}{B} \\sum_b (R_b - \\bar R)\\, \\nabla_\\theta \\log \\pi_\\theta(a_b),
    \\qquad \\bar R \\leftarrow \\lambda \\bar R + (1 - \\lambda)\\, \\tfrac{1}{B}\\textstyle\\sum_b R_b

(:math:`\\lambda = 0.9`, the hierarchical planner's decay; the ICML 2017 paper does not state one).
Adam with gradient-norm clipping at 1 (as the hierarchical planner); the learning rate is our choice.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from gnplace.rl.comparator import ComparatorPlacer, SequenceProblem, check_positive, check_unit

if TYPE_CHECKING:  # torch loads on first use: the registry resolves this placer without it
    import torch

    from gnplace.policy.seq2seq import Seq2SeqPolicy

__all__ = ["RnnPGPlacer", "MovingBaseline"]


class MovingBaseline:
    """The exponential moving average :math:`\\bar R` of the mean reward of each batch.

    Examples:
        >>> b = MovingBaseline(0.9)
        >>> b.update(np.array([1.0, 3.0])), b.update(np.array([0.0])), round(b.value, 3)
        (2.0, 2.0, 1.8)
    """

    def __init__(self, decay: float = 0.9) -> None:
        self.decay = float(decay)
        self.value: float | None = None

    def update(self, rewards: np.ndarray) -> float:
        """The baseline for this batch (:math:`\\bar R` before it, or its mean for the first), then fold it in."""
        mean = float(np.mean(rewards))
        before = mean if self.value is None else self.value
        self.value = mean if self.value is None else self.decay * self.value + (1 - self.decay) * mean
        return before


def reinforce_step(policy: Seq2SeqPolicy, optimiser: torch.optim.Optimizer, x: torch.Tensor, actions: torch.Tensor,
                   advantages: torch.Tensor, clip: float) -> float:
    """One REINFORCE step: :math:`-\\frac{1}{B}\\sum_b A_b \\sum_t \\log\\pi(a_{bt})`; returns the loss."""
    import torch

    logp = policy.log_probs(x, actions).gather(-1, actions.unsqueeze(-1)).squeeze(-1)  # log pi(a_t | a_<t)
    loss = -(advantages * logp.sum(1)).mean()  # score-function estimator, baseline subtracted in A_b
    optimiser.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(policy.parameters(), clip)
    optimiser.step()
    return float(loss.detach())


class RnnPGPlacer(ComparatorPlacer):
    """Mirhoseini et al.'s seq2seq placer trained with REINFORCE on one graph (see the module docstring).

    Args:
        decay (float, optional): :math:`\\lambda` of the moving-average baseline (default: 0.9).
        clip (float, optional): gradient-norm bound (default: 1.0).
        **kwargs: budget, samples, hidden, layers, lr, max_nodes, timer, progress, as for
            :class:`~gnplace.rl.comparator.ComparatorPlacer`.

    Examples:
        >>> from gnplace.toy import mlp_training_graph
        >>> from gnplace.cluster import load_cluster
        >>> placer = RnnPGPlacer(budget=32, samples=8, hidden=16, layers=1)
        >>> placer.place(mlp_training_graph(layers=3, width=256, batch=32), load_cluster("k80x2"), seed=0).devices.shape
        (20,)
        >>> placer.last_evaluations, placer.last_updates
        (32, 4)
    """

    name = "rnn_pg"

    def __init__(self, decay: float = 0.9, clip: float = 1.0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        check_unit(type(self).__name__, decay=decay)
        check_positive(type(self).__name__, clip=clip)
        self.decay, self.clip = float(decay), float(clip)

    def search(self, problem: SequenceProblem, generator: torch.Generator, tick: Callable[[], None]) -> None:
        """REINFORCE with a moving-average baseline until the budget no longer holds a batch."""
        import torch

        from gnplace.policy.seq2seq import Seq2SeqPolicy

        policy = Seq2SeqPolicy(problem.x.shape[1], problem.inp.cluster.num_devices, hidden=self.hidden,
                               layers=self.layers)
        optimiser = torch.optim.Adam(policy.parameters(), lr=self.lr)
        baseline = MovingBaseline(self.decay)
        while problem.remaining >= self.samples:
            actions, _ = policy.sample(problem.x, self.samples, generator)
            _, rewards = problem.score(actions.numpy())
            advantages = torch.as_tensor(rewards - baseline.update(rewards), dtype=torch.float32)  # R_b - R_bar
            reinforce_step(policy, optimiser, problem.x, actions, advantages, self.clip)
            self.last_updates += 1
            self.check_weights(policy.parameters())
            tick()
