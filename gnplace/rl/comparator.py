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
charged :math:`T_{fail} = 10\\,T_{slow}`, ten times every group on its slowest device one after the other
(the papers charged 100 s to steps of about a second). On devices of one kind :math:`T_{slow} = T_{ser}`;
on a mixed cluster a feasible step may take many :math:`T_{ser}` (on ``cpu_gpu``, random placements of
the real graphs take a median 13 to 17), and a charge of :math:`10\\,T_{ser}` rewarded overflowing the
memory over a slow placement that fits:

.. math::
    R = -\\sqrt{T / T_{ser}}, \\qquad T = T_{fail} \\text{ if the placement overflows a device.}

Evaluations: every placement timed is one (:class:`~gnplace.sim.timer.BudgetedTimer`); a batch is
drawn only when the budget still holds all of it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from gnplace.cluster import Cluster
from gnplace.exceptions import InvalidArgument
from gnplace.graph import OpGraph
from gnplace.limits import MAX_DRAWN, MAX_LAYERS, MAX_WIDTH, as_float, check_budget, is_number, is_whole
from gnplace.placement import GraphKey, Placement, check_graph_and_cluster
from gnplace.rl.config import FLOAT32_MAX
from gnplace.seed import SeedLike, as_generator, seeded_torch
from gnplace.sim.simulator import Simulator
from gnplace.sim.timer import BatchResult, BudgetedTimer, StepTimer
from gnplace.workers import torch_threads

if TYPE_CHECKING:  # torch loads on first use: the registry resolves these placers without it
    import torch

    from gnplace.policy.features import PolicyInput

__all__ = ["FAIL_FACTOR", "MAX_LR", "MAX_UNITS", "MAX_UPDATE_BYTES", "sqrt_reward", "seq2seq_parameters",
           "seq2seq_update_bytes", "check_update_bytes", "SequenceProblem", "ComparatorPlacer", "check_nonnegative",
           "check_positive", "check_rate", "check_unit", "check_whole", "check_finite_weights", "repair_best"]

#: :math:`T_{fail} / T_{ser}`: the step time charged to a placement that overflows a device.
FAIL_FACTOR = 10.0
#: Largest learning rate accepted: Adam's first step is ten times it, in float32 (at most about 3.4e38).
MAX_LR = 1e30
#: Largest ``max_nodes`` of the seq2seq placers (``rnn_pg``, ``spotlight``, ``post``): their attention is
#: ``[samples, S, S]`` over the ``S <= max_nodes`` units, quadratic in it (one ``rnn_pg`` update of 4,096 units,
#: 16 samples, 4 devices: 3.7 GiB more peak memory, measured with ``ru_maxrss``; the default is 256).
MAX_UNITS = 4096
#: Largest working set of one policy update of a learned comparator, bytes (8 GiB): the options multiply the same
#: tensors, so values each within its cap can still ask for more together; such settings are refused before training.
MAX_UPDATE_BYTES = 8 * 2**30


def sqrt_reward(step_time: np.ndarray, oom: np.ndarray, serial: float, slowest: float | None = None) -> np.ndarray:
    """:math:`R = -\\sqrt{T / T_{ser}}` with :math:`T = 10\\,T_{slow}` for OOM placements, ``[B]``.

    ``slowest`` is :math:`T_{slow}`, seconds (default: ``serial``, as on devices of one kind).

    Examples:
        >>> sqrt_reward(np.array([4.0, 1.0]), np.array([False, True]), 1.0).round(3).tolist()
        [-2.0, -3.162]
    """
    failed = FAIL_FACTOR * (serial if slowest is None else max(slowest, serial))
    seconds = np.where(np.asarray(oom, dtype=bool), failed, np.asarray(step_time, dtype=np.float64))
    return -np.sqrt(seconds / serial)


def seq2seq_parameters(in_features: int, devices: int, hidden: int, layers: int) -> int:
    """Weights of a :class:`~gnplace.policy.seq2seq.Seq2SeqPolicy`, counted from its layers.

    Examples:
        >>> seq2seq_parameters(40, 4, 128, 2)  # sum(p.numel() for p in Seq2SeqPolicy(40, 4).parameters())
        584068
    """
    f, d, h, layer_count = in_features, devices, hidden, layers
    half = h // 2
    encoder = layer_count * 2 * (4 * half * (h + half) + 8 * half)  # bidirectional, input h at every layer
    decoder = 4 * h * (2 * h + h) + 8 * h + (layer_count - 1) * (4 * h * (h + h) + 8 * h)  # input [E a | e]: 2h
    heads = (f * h + h) + (d + 1) * h + h * h + (2 * h * h + h) + (h * d + d)  # W_x, E, W_a, W_c, W_o
    return encoder + decoder + heads


def seq2seq_update_bytes(units: int, samples: int, devices: int, *, hidden: int, layers: int, in_features: int,
                         batched_encoder: bool = False) -> int:
    """Working set of one update of the seq2seq policy on ``samples`` placements of ``units``, bytes.

    .. math::
        16\\,P + 4\\,B S\\,\\bigl(3 S + (24 + 8 L (1 + [\\text{batched}]))\\,H + 8 D\\bigr)

    :math:`P` weights (:func:`seq2seq_parameters`) with their gradients and Adam's two moments, float32;
    per sample and unit, float32: three rows of :math:`S` attention weights (the softmax kept for the
    backward pass, its gradient and the scores' gradient), the activations the LSTMs keep for backward
    (:math:`8H` per decoder layer, and per encoder layer when the encoder reads each sample,
    ``batched_encoder``, as the hierarchical Placer's does; :math:`24H` for the embeddings, the
    attention's and the output's layers) and the log-probabilities over the :math:`D` devices with
    their gradients. An upper bound of the peak growth measured (``ru_maxrss``): ``rnn_pg`` with
    16 samples, hidden 128, 2 layers and 4 devices grew 0.40, 1.16 and 3.66 GiB at 1,024, 2,048 and
    4,096 units, where this gives 0.51, 1.39 and 4.27.

    Args:
        units (int): :math:`S`, the units in the sequence.
        samples (int): :math:`B`, placements per update.
        devices (int): :math:`D`.
        hidden (int): :math:`H`, the LSTMs' width.
        layers (int): :math:`L`, stacked LSTM layers.
        in_features (int): width of a unit's input.
        batched_encoder (bool, optional): the encoder reads each sample's own input (default: False).

    Examples:
        >>> round(seq2seq_update_bytes(4096, 16, 4, hidden=128, layers=2, in_features=40) / 2**30, 2)
        4.27
    """
    s, b, d, h = units, samples, devices, hidden
    lstm = 8 * layers * (2 if batched_encoder else 1)
    return 16 * seq2seq_parameters(in_features, d, h, layers) + 4 * b * s * (3 * s + (24 + lstm) * h + 8 * d)


def check_update_bytes(owner: str, estimate: int, lower: str) -> None:
    """Raise :class:`InvalidArgument` if one update's ``estimate`` (bytes) is over :data:`MAX_UPDATE_BYTES`.

    Args:
        owner (str): who asks, the start of the message.
        estimate (int): the update's working set, bytes.
        lower (str): the options to lower and their values, for the message.

    Raises:
        InvalidArgument: one line with the estimate and the limit in GiB and the options to lower.
    """
    if estimate > MAX_UPDATE_BYTES:
        raise InvalidArgument(f"{owner}: one policy update would need about {estimate / 2**30:.1f} GiB, over the "
                              f"{MAX_UPDATE_BYTES / 2**30:g} GiB limit; lower {lower}")


def _finite_number(value: Any) -> bool:
    """Whether ``value`` is a number within float32's range (every option of these placers enters float32 tensors)."""
    number = as_float(value)  # an int past a float's range is none: float() of it was an OverflowError traceback
    if number is None:
        return False
    # past float32's 3.4e38, spotlight.clip=1e39 could not enter torch.clamp (a RuntimeError mid-run) and
    # spotlight.beta=1e39 made the probabilities nan
    return math.isfinite(number) and abs(number) <= FLOAT32_MAX


def _shown(value: Any) -> str:
    """``value`` for a message: an int of thousands of digits is its length, not its digits."""
    if is_whole(value) and abs(int(value)) > 10**20:
        return f"a number of {len(str(abs(int(value))))} digits"
    return repr(value)


def check_positive(owner: str, **values: Any) -> None:
    """Raise :class:`InvalidArgument` naming the first of ``values`` that is not a number in ``(0, 3.4e38]``."""
    for name, value in values.items():
        if not _finite_number(value) or not value > 0:  # inf: a loss or a step of inf, then nan probabilities
            raise InvalidArgument(f"{owner}: {name} must be > 0 and finite within float32's range (3.4e38), "
                                  f"got {_shown(value)}")


def check_nonnegative(owner: str, **values: Any) -> None:
    """Raise :class:`InvalidArgument` naming the first of ``values`` that is not a number in ``[0, 3.4e38]``."""
    for name, value in values.items():
        if not _finite_number(value) or not value >= 0:
            raise InvalidArgument(f"{owner}: {name} must be >= 0 and finite within float32's range (3.4e38), "
                                  f"got {_shown(value)}")


def check_finite_weights(owner: str, parameters: Iterable[torch.Tensor], updates: int,
                         lower: str | Callable[[], str]) -> None:
    """Raise :class:`InvalidArgument` if any of a policy's ``parameters`` is not finite after ``updates`` steps.

    A loss term weighted past what float32 holds (an entropy bonus of 1e38, say) makes inf gradients, whose
    clipped norm is nan: the weights go nan and the next batch's sampling failed with torch's "probability
    tensor contains either inf, nan" traceback. The run stops here instead, with the options to lower.

    Args:
        owner (str): the placer's name, the start of the message.
        parameters (iterable of torch.Tensor): the weights just updated.
        updates (int): policy updates made, this one included.
        lower (str or callable): the options to lower and their values, for the message (a callable: made only
            then, not after every update).
    """
    import torch

    with torch.no_grad():
        if not all(bool(torch.isfinite(p).all()) for p in parameters):
            raise InvalidArgument(f"{owner} diverged: the policy's weights are not finite after {updates} update(s) "
                                  f"(lower {lower if isinstance(lower, str) else lower()})")


def check_rate(owner: str, **values: Any) -> None:
    """Raise :class:`InvalidArgument` naming the first of ``values`` that is not a learning rate in ``(0, MAX_LR]``."""
    check_positive(owner, **values)
    for name, value in values.items():
        if value > MAX_LR:  # Adam's float32 step overflowed: a RuntimeError mid-run
            raise InvalidArgument(f"{owner}: {name} must be at most {MAX_LR:g}, got {_shown(value)}")


def check_whole(owner: str, **values: Any) -> None:
    """Raise :class:`InvalidArgument` naming the first of ``values`` that is not a whole number >= 1."""
    for name, value in values.items():
        if not is_whole(value) or value < 1:
            raise InvalidArgument(f"{owner}: {name} must be a whole number >= 1, got {value!r}")


def check_unit(owner: str, *, closed: bool = False, positive: bool = False, **values: Any) -> None:
    """Raise :class:`InvalidArgument` naming the first of ``values`` not in ``[0, 1)``.

    ``closed`` admits 1 (``[0, 1]``), ``positive`` refuses 0 (``(0, 1)``); the message states the interval checked.
    """
    interval = f"{'(' if positive else '['}0, 1{']' if closed else ')'}"
    for name, value in values.items():
        number = is_number(value)
        if not number or not (0.0 <= value <= 1.0) or (value == 1.0 and not closed) or (value == 0.0 and positive):
            raise InvalidArgument(f"{owner}: {name} must be in {interval}, got {_shown(value)}")


@dataclass(eq=False)
class SequenceProblem:
    """One graph and cluster prepared for a sequence policy, timed within a budget.

    Attributes:
        inp (PolicyInput): the decision graph and its features.
        order (np.ndarray): the decision groups in sequence order, ``[G]``.
        x (torch.Tensor): the input of each unit in sequence order, ``[G, F]``.
        timer (BudgetedTimer): counts evaluations and keeps the best placement timed.
        serial (float): :math:`T_{ser}`, seconds.
        slowest (float): :math:`T_{slow}`, every group on its slowest device one after the other, seconds.
        mean_rewards (list[float]): the mean reward of each batch timed (how the policy itself improves).
    """

    inp: PolicyInput
    order: np.ndarray
    x: torch.Tensor
    timer: BudgetedTimer
    serial: float
    slowest: float
    mean_rewards: list[float] = field(default_factory=list)

    @classmethod
    def build(cls, graph: OpGraph, cluster: Cluster, timer: StepTimer, budget: int, *, max_nodes: int,
              seed: int) -> SequenceProblem:
        """Coarsen ``graph`` to at most ``max_nodes`` nodes and order its groups (no evaluation spent)."""
        from gnplace.policy.features import build_policy_input
        from gnplace.policy.seq2seq import sequence_features, sequence_order

        inp = build_policy_input(graph, cluster, cost_model=timer.cost_model, max_nodes=max_nodes, seed=seed)
        order = sequence_order(inp)
        serial = max(float(inp.group_time.min(axis=1).sum()), 1e-12)
        slowest = max(float(inp.group_time.max(axis=1).sum()), serial)
        return cls(inp, order, sequence_features(inp, order), BudgetedTimer(timer, budget), serial, slowest)

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
        rewards = sqrt_reward(result.step_time, result.oom, self.serial, self.slowest)
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
        max_nodes (int, optional): most nodes of the decision graph, 1 to :attr:`most_nodes` (default: 256).
        timer (StepTimer, optional): times placements (default: ``Simulator()``).
        progress (bool or None, optional): show a progress bar of evaluations (default: on a terminal).

    Settings whose policy update (:meth:`update_bytes`, known once the graph is coarsened) would need more
    than :data:`MAX_UPDATE_BYTES` are refused by :meth:`place` before the policy is built.

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
    #: Changes when results under the same options change. 4 (2026-12-04): a best placement over memory is repaired by
    #: that day's memory repair (:func:`~gnplace.placers.groups.repair_memory`). 3 (2026-12-02): a placement that
    #: overflows is charged ten times the slowest serial step, not the fastest (on a mixed cluster overflowing earned
    #: more than fitting; devices of one kind, the report's k80x4 and tight4, are as before). 2 (2026-11-30):
    #: Spotlight's and Post's adaptive beta follows the KL after the update (it halved after every batch with one
    #: epoch), and a learning curve holds no overflowing best once a placement fits.
    revision = "4"
    #: Largest ``max_nodes`` (the seq2seq placers: :data:`MAX_UNITS`).
    most_nodes = MAX_UNITS

    def __init__(self, budget: int = 1000, samples: int = 16, hidden: int = 128, layers: int = 2, lr: float = 0.01,
                 max_nodes: int = 256, timer: StepTimer | None = None, progress: bool | None = None) -> None:
        owner = type(self).__name__
        budget = check_budget(budget, owner)  # at most MAX_BUDGET: a typo is not a search of years
        for name, value in (("samples", samples), ("hidden", hidden), ("layers", layers), ("max_nodes", max_nodes)):
            if not is_whole(value) or value < 1:
                raise InvalidArgument(f"{owner}: {name} must be a whole number >= 1, got {value!r}")
        if samples < 2:
            raise InvalidArgument(f"{owner}: samples must be >= 2 (the baseline needs a batch), got {samples}")
        for name, value, most in (("samples", samples, MAX_DRAWN), ("hidden", hidden, MAX_WIDTH),
                                  ("layers", layers, MAX_LAYERS)):
            if value > most:  # refused, not allocated
                raise InvalidArgument(f"{owner}: {name} must be at most {most}, got {value}")
        if hidden % 2:
            raise InvalidArgument(f"{owner}: hidden must be even (a bidirectional encoder), got {hidden}")
        if max_nodes > self.most_nodes:  # refused, not allocated
            raise InvalidArgument(f"{owner}: max_nodes must be at most {self.most_nodes}, got {max_nodes}")
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

    def update_options(self, problem: SequenceProblem) -> dict[str, int]:
        """The options :meth:`update_bytes` grows with and their values on ``problem``, named when it is refused."""
        return {"samples": self.samples, "max_nodes": self.max_nodes, "hidden": self.hidden, "layers": self.layers}

    def update_bytes(self, problem: SequenceProblem) -> int:
        """Working set of one policy update on ``problem``, bytes (:func:`seq2seq_update_bytes` over its units)."""
        return seq2seq_update_bytes(problem.units, self.samples, problem.inp.cluster.num_devices, hidden=self.hidden,
                                    layers=self.layers, in_features=int(problem.x.shape[1]))

    def search(self, problem: SequenceProblem, generator: torch.Generator, tick: Callable[[], None]) -> None:
        """Train on ``problem`` while its budget holds a batch of :attr:`samples`; call ``tick()`` after each batch."""
        raise NotImplementedError

    def loss_options(self) -> dict[str, float]:
        """The options that scale the loss or its steps and their values, named when training diverges."""
        return {"lr": self.lr}

    def check_weights(self, parameters: Iterable[torch.Tensor]) -> None:
        """Raise :class:`InvalidArgument` if the weights just updated are not finite (:func:`check_finite_weights`)."""
        def lower() -> str:
            named = [f"{self.name}.{name}, now {value:g}" for name, value in self.loss_options().items()]
            return named[0] if len(named) == 1 else f"one of {'; '.join(named)}"

        check_finite_weights(self.name, parameters, self.last_updates, lower)

    def place(self, graph: OpGraph, cluster: Cluster, *, seed: SeedLike = None) -> Placement:
        """Train a fresh policy on ``graph`` for the budget and return the best placement timed.

        Args:
            graph (OpGraph): the graph.
            cluster (Cluster): the devices.
            seed (int, np.random.Generator or None, optional): seed of the policy and its samples (default: None).

        Returns:
            Placement: the best placement timed (fitting ones first, then the fastest).

        Raises:
            InvalidArgument: if one policy update would need more than :data:`MAX_UPDATE_BYTES`
                (:meth:`update_bytes`), before the policy is built or anything is timed.
        """
        check_graph_and_cluster(graph, cluster)
        self.last_evaluations, self.last_history, self.last_step, self.last_updates = 0, [], None, 0
        self.last_mean_rewards, self.last_repair_evaluations = [], 0
        if graph.num_ops == 0 or cluster.num_devices == 1:
            return Placement(np.zeros(graph.num_ops, dtype=np.int64), cluster, GraphKey.of(graph))
        import torch

        seed_value = int(as_generator(seed).integers(2**31 - 1))
        problem = SequenceProblem.build(graph, cluster, self.timer, self.budget, max_nodes=self.max_nodes,
                                        seed=seed_value)
        if problem.remaining >= self.samples:  # an update will run: refuse one that cannot fit, before building it
            named = [f"{name} (now {value})" for name, value in self.update_options(problem).items()]
            lower = f"{', '.join(named[:-1])} or {named[-1]}"
            check_update_bytes(type(self).__name__, self.update_bytes(problem),
                               f"{lower} (over {problem.units} units and {cluster.num_devices} devices)")
        generator = torch.Generator().manual_seed(seed_value)
        from gnplace.progress import evaluation_bar

        with torch_threads(1), evaluation_bar(f"{self.name} {graph.name}", self.budget, self.progress) as advance_to:

            def tick() -> None:
                advance_to(problem.timer.evaluations)

            with seeded_torch(seed_value):  # the policy's initial weights
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
        return Placement(best, cluster, GraphKey.of(graph))

    def _repair(self, graph: OpGraph, cluster: Cluster, devices: np.ndarray) -> np.ndarray:
        """``devices`` with groups moved off overflowing devices if that fits (evaluations outside the budget)."""
        return repair_best(self, graph, cluster, devices)


def repair_best(placer: Any, graph: OpGraph, cluster: Cluster, devices: np.ndarray) -> np.ndarray:
    """``devices``, a learned placer's best, with groups moved off overflowing devices if that fits.

    The repair's evaluations (``placer.last_repair_evaluations``) are outside the budget. A repair that fits
    sets ``placer.last_step`` and ends ``placer.last_history`` at the evaluations spent, as
    :func:`~gnplace.placers.groups.best_repaired` ends a search's trace: the curve ended at the overflowing
    best, whose step is no step to reach, not at the placement returned.
    """
    from gnplace.placers.groups import repair_placement

    fixed, placer.last_repair_evaluations, step = repair_placement(graph, cluster, devices, placer.timer)
    if step is not None:
        placer.last_step = step
        placer.last_history = [*placer.last_history, (placer.last_evaluations, step)]
    return fixed
