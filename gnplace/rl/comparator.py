"""What the seeds' recurrent placers share: the graph as a sequence, their reward and the budget loop.

``rnn_pg``, ``hierarchical``, ``spotlight`` and ``post`` (:mod:`gnplace.rl.rnn_pg` and its siblings)
each train one fresh policy per graph, from a uniformly random start, for a budget of timer
evaluations, and return the best placement timed, as their papers do. The units they place are the
colocation groups of the decision graph (:func:`~gnplace.policy.features.build_policy_input`, at most
``max_nodes`` nodes), read in topological order (:func:`~gnplace.policy.seq2seq.sequence_order`), so
an op, its gradients and its update always share a device, as TensorFlow's colocation did in the
papers' graphs.

Reward (Mirhoseini et al., ICML 2017 and ICLR 2018): the negative square root of the step time,
with a large fixed step time for a placement that does not fit in memory. We measure step times in
units of the graph's serial time :math:`T_{ser}` (every group on its fastest device, one after the
other; our choice, so that one learning rate fits graphs of any size), and a failing placement is
charged :math:`T_{fail} = 10\\,T_{ser}` (the papers charged 100 s to steps of about a second):

.. math::
    R = -\\sqrt{T / T_{ser}}, \\qquad T = T_{fail} \\text{ if the placement overflows a device.}

Evaluations: every placement timed is one (:class:`~gnplace.sim.timer.BudgetedTimer`); a batch is
drawn only when the budget still holds all of it.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from gnplace.cluster import Cluster
from gnplace.exceptions import InvalidArgument
from gnplace.graph import OpGraph
from gnplace.limits import MAX_DRAWN, MAX_LAYERS, MAX_WIDTH, check_budget
from gnplace.placement import Placement
from gnplace.seed import SeedLike, as_generator
from gnplace.sim.simulator import Simulator
from gnplace.sim.timer import BatchResult, BudgetedTimer, StepTimer

if TYPE_CHECKING:  # torch loads on first use: the registry resolves these placers without it
    import torch

    from gnplace.policy.features import PolicyInput

__all__ = ["FAIL_FACTOR", "MAX_LR", "sqrt_reward", "SequenceProblem", "ComparatorPlacer", "check_nonnegative",
           "check_positive", "check_rate", "check_unit", "check_whole"]

#: :math:`T_{fail} / T_{ser}`: the step time charged to a placement that overflows a device.
FAIL_FACTOR = 10.0
#: Largest learning rate accepted: Adam's first step is ten times it, in float32 (at most about 3.4e38).
MAX_LR = 1e30


def sqrt_reward(step_time: np.ndarray, oom: np.ndarray, serial: float) -> np.ndarray:
    """:math:`R = -\\sqrt{T / T_{ser}}` with :math:`T = 10\\,T_{ser}` for OOM placements, ``[B]``.

    Examples:
        >>> sqrt_reward(np.array([4.0, 1.0]), np.array([False, True]), 1.0).round(3).tolist()
        [-2.0, -3.162]
    """
    seconds = np.where(np.asarray(oom, dtype=bool), FAIL_FACTOR * serial, np.asarray(step_time, dtype=np.float64))
    return -np.sqrt(seconds / serial)


def _finite_number(value: Any) -> bool:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        return False
    return isinstance(value, (int, np.integer)) or math.isfinite(value)


def check_positive(owner: str, **values: Any) -> None:
    """Raise :class:`InvalidArgument` naming the first of ``values`` that is not a finite number > 0."""
    for name, value in values.items():
        if not _finite_number(value) or not value > 0:  # inf: a loss or a step of inf, then nan probabilities
            raise InvalidArgument(f"{owner}: {name} must be > 0 and finite, got {value!r}")


def check_nonnegative(owner: str, **values: Any) -> None:
    """Raise :class:`InvalidArgument` naming the first of ``values`` that is not a finite number >= 0."""
    for name, value in values.items():
        if not _finite_number(value) or not value >= 0:
            raise InvalidArgument(f"{owner}: {name} must be >= 0 and finite, got {value!r}")


def check_rate(owner: str, **values: Any) -> None:
    """Raise :class:`InvalidArgument` naming the first of ``values`` that is not a learning rate in ``(0, MAX_LR]``."""
    check_positive(owner, **values)
    for name, value in values.items():
        if value > MAX_LR:  # Adam's float32 step overflowed: a RuntimeError mid-run
            raise InvalidArgument(f"{owner}: {name} must be at most {MAX_LR:g}, got {value!r}")


def check_whole(owner: str, **values: Any) -> None:
    """Raise :class:`InvalidArgument` naming the first of ``values`` that is not a whole number >= 1."""
    for name, value in values.items():
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise InvalidArgument(f"{owner}: {name} must be a whole number >= 1, got {value!r}")


def check_unit(owner: str, *, closed: bool = False, **values: Any) -> None:
    """Raise :class:`InvalidArgument` naming the first of ``values`` not in ``[0, 1)`` (``[0, 1]`` if ``closed``)."""
    for name, value in values.items():
        number = not isinstance(value, bool) and isinstance(value, (int, float, np.integer, np.floating))
        if not number or not (0.0 <= value <= 1.0) or (value == 1.0 and not closed):
            raise InvalidArgument(f"{owner}: {name} must be in [0, 1{']' if closed else ')'}, got {value!r}")


@dataclass(eq=False)
class SequenceProblem:
    """One graph and cluster prepared for a sequence policy, timed within a budget.

    Attributes:
        inp (PolicyInput): the decision graph and its features.
        order (np.ndarray): the decision groups in sequence order, ``[G]``.
        x (torch.Tensor): the input of each unit in sequence order, ``[G, F]``.
        timer (BudgetedTimer): counts evaluations and keeps the best placement timed.
        serial (float): :math:`T_{ser}`, seconds.
        mean_rewards (list[float]): the mean reward of each batch timed (how the policy itself improves).
    """

    inp: PolicyInput
    order: np.ndarray
    x: torch.Tensor
    timer: BudgetedTimer
    serial: float
    mean_rewards: list[float] = field(default_factory=list)

    @classmethod
    def build(cls, graph: OpGraph, cluster: Cluster, timer: StepTimer, budget: int, *, max_nodes: int,
              seed: int) -> SequenceProblem:
        """Coarsen ``graph`` to at most ``max_nodes`` nodes and order its groups (no evaluation spent)."""
        from gnplace.policy.features import build_policy_input
        from gnplace.policy.seq2seq import sequence_features, sequence_order

        inp = build_policy_input(graph, cluster, cost_model=timer.cost_model, max_nodes=max_nodes, seed=seed)
        order = sequence_order(inp)
        serial = float(inp.group_time.min(axis=1).sum())
        return cls(inp, order, sequence_features(inp, order), BudgetedTimer(timer, budget), max(serial, 1e-12))

    @property
    def units(self) -> int:
        """Units in the sequence, ``S`` (= groups ``G``)."""
        return int(self.order.shape[0])

    @property
    def remaining(self) -> int:
        """Evaluations left in the budget."""
        remaining = self.timer.remaining
        assert remaining is not None
        return remaining

    def devices(self, actions: np.ndarray) -> np.ndarray:
        """Device of every op of the original graph from devices in sequence order, ``[B, S] -> [B, num_ops]``."""
        actions = np.asarray(actions, dtype=np.int64)
        per_group = np.empty_like(actions)
        per_group[:, self.order] = actions
        return self.inp.expand(per_group)

    def score(self, actions: np.ndarray) -> tuple[BatchResult, np.ndarray]:
        """Time placements given in sequence order (``[B, S]``); their :func:`sqrt_reward` ``[B]``."""
        result = self.timer.time_batch(self.inp.graph, self.inp.cluster, self.devices(actions))
        rewards = sqrt_reward(result.step_time, result.oom, self.serial)
        self.mean_rewards.append(float(rewards.mean()))
        return result, rewards

    @property
    def history(self) -> list[tuple[int, float]]:
        """``(evaluations, best step seconds)`` after each batch timed: the learning curve.

        Only the batches after the first placement that fits count (an overflowing best's step time is
        no step time to reach), unless none fits yet, as :class:`~gnplace.rl.placeto.PlacetoPlacer`'s.
        """
        trace = self.timer.trace
        return [(e, s) for e, over, s in trace if over == 0] or [(e, s) for e, _, s in trace]

    @property
    def best_step(self) -> float:
        """Step seconds of the best placement timed (``inf`` before any)."""
        return float(self.timer.best_key[1])


@contextmanager
def _one_thread() -> Iterator[None]:
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the tensors are small: more threads spin and slow it down
    try:
        yield
    finally:
        torch.set_num_threads(threads)


class ComparatorPlacer:
    """Base of the seeds' per-graph learned placers: arguments, the budget loop and the results.

    Subclasses implement :meth:`search`, which trains on ``problem`` until its budget no longer holds
    a batch; :meth:`place` returns the best placement timed.

    Args:
        budget (int, optional): timer evaluations in all, 1 to :data:`~gnplace.limits.MAX_BUDGET` (default: 1000).
        samples (int, optional): placements drawn per policy update (default: 16).
        hidden (int, optional): width of the policy's LSTMs (default: 128).
        layers (int, optional): stacked LSTM layers (default: 2).
        lr (float, optional): Adam's learning rate, at most :data:`MAX_LR` (default: 0.01).
        max_nodes (int, optional): most nodes of the decision graph (default: 256).
        timer (StepTimer, optional): times placements (default: ``Simulator()``).
        progress (bool or None, optional): show a progress bar of evaluations (default: on a terminal).

    Attributes:
        last_evaluations (int): evaluations the last :meth:`place` spent.
        last_history (list[tuple[int, float]]): its learning curve, ``(evaluations, best step seconds)``.
        last_step (float | None): step seconds of the placement it returned.
        last_updates (int): policy updates it made.
        last_mean_rewards (list[float]): the mean reward of each batch it drew.
        last_repair_evaluations (int): evaluations spent, outside the budget, moving groups off
            overflowing devices when no placement timed fitted (as every memory-aware placer does).
    """

    name = "comparator"
    learned = True
    accepts = frozenset({"timer", "budget"})
    #: Changes when results under the same options change. 2 (2026-11-30): Spotlight's and Post's adaptive beta
    #: follows the KL after the update (it halved after every batch with one epoch), and a learning curve holds no
    #: overflowing best once a placement fits.
    revision = "2"

    def __init__(self, budget: int = 1000, samples: int = 16, hidden: int = 128, layers: int = 2, lr: float = 0.01,
                 max_nodes: int = 256, timer: StepTimer | None = None, progress: bool | None = None) -> None:
        owner = type(self).__name__
        budget = check_budget(budget, owner)  # at most MAX_BUDGET: a typo is not a search of years
        for name, value in (("samples", samples), ("hidden", hidden), ("layers", layers), ("max_nodes", max_nodes)):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
                raise InvalidArgument(f"{owner}: {name} must be a whole number >= 1, got {value!r}")
        if samples < 2:
            raise InvalidArgument(f"{owner}: samples must be >= 2 (the baseline needs a batch), got {samples}")
        for name, value, most in (("samples", samples, MAX_DRAWN), ("hidden", hidden, MAX_WIDTH),
                                  ("layers", layers, MAX_LAYERS)):
            if value > most:  # refused, not allocated
                raise InvalidArgument(f"{owner}: {name} must be at most {most}, got {value}")
        if hidden % 2:
            raise InvalidArgument(f"{owner}: hidden must be even (a bidirectional encoder), got {hidden}")
        check_rate(owner, lr=lr)
        self.budget, self.samples, self.hidden, self.layers = int(budget), int(samples), int(hidden), int(layers)
        self.lr, self.max_nodes = float(lr), int(max_nodes)
        self.timer = timer or Simulator()
        self.progress = progress
        self.last_evaluations = 0
        self.last_history: list[tuple[int, float]] = []
        self.last_step: float | None = None
        self.last_updates = 0
        self.last_mean_rewards: list[float] = []
        self.last_repair_evaluations = 0

    def __repr__(self) -> str:
        return f"{type(self).__name__}(budget={self.budget}, samples={self.samples}, lr={self.lr})"

    def search(self, problem: SequenceProblem, generator: torch.Generator, tick: Any) -> None:
        """Train on ``problem`` while its budget holds a batch of :attr:`samples`; call ``tick()`` after each batch."""
        raise NotImplementedError

    def place(self, graph: OpGraph, cluster: Cluster, *, seed: SeedLike = None) -> Placement:
        """Train a fresh policy on ``graph`` for the budget and return the best placement timed.

        Args:
            graph (OpGraph): the graph.
            cluster (Cluster): the devices.
            seed (int, np.random.Generator or None, optional): seed of the policy and its samples (default: None).

        Returns:
            Placement: the best placement timed (fitting ones first, then the fastest).
        """
        self.last_evaluations, self.last_history, self.last_step, self.last_updates = 0, [], None, 0
        self.last_mean_rewards, self.last_repair_evaluations = [], 0
        if graph.num_ops == 0 or cluster.num_devices == 1:
            return Placement(np.zeros(graph.num_ops, dtype=np.int64), cluster)
        import torch

        seed_value = int(as_generator(seed).integers(2**31 - 1))
        problem = SequenceProblem.build(graph, cluster, self.timer, self.budget, max_nodes=self.max_nodes,
                                        seed=seed_value)
        generator = torch.Generator().manual_seed(seed_value)
        from gnplace.progress import evaluation_bar

        with _one_thread(), evaluation_bar(f"{self.name} {graph.name}", self.budget, self.progress) as advance_to:

            def tick() -> None:
                advance_to(problem.timer.evaluations)

            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(seed_value)  # the policy's initial weights
                if problem.remaining >= self.samples:
                    self.search(problem, generator, tick)
                else:  # too small a budget to learn: the best of uniformly random placements it can pay for
                    rng = np.random.default_rng(seed_value)
                    problem.score(rng.integers(cluster.num_devices, size=(problem.remaining, problem.units)))
        self.last_evaluations = problem.timer.evaluations
        self.last_history = problem.history
        self.last_mean_rewards = problem.mean_rewards
        self.last_step = problem.best_step
        best = problem.timer.best
        assert best is not None
        if problem.timer.best_key[0] > 0:  # nothing timed fits: move groups off the devices that overflow
            best = self._repair(graph, cluster, best)
        return Placement(best, cluster)

    def _repair(self, graph: OpGraph, cluster: Cluster, devices: np.ndarray) -> np.ndarray:
        """``devices`` with groups moved off overflowing devices if that fits (evaluations outside the budget)."""
        from gnplace.placers.groups import repair_placement

        fixed, self.last_repair_evaluations, step = repair_placement(graph, cluster, devices, self.timer)
        if step is not None:
            self.last_step = step
        return fixed
