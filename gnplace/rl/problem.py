"""One (graph, cluster) to learn on: the MDP, the reference placement and how a placement is rewarded.

The reward of a finished placement is its step time measured by a timer on the original graph,
relative to the reference (``auto``, the best fast placer for this graph and cluster), with a penalty
for memory it overflows (Placeto charges a penalty per GB over the limit; here per unit of the
largest device's capacity, :func:`~gnplace.sim.timer.overflow`):

.. math::
    r = -\\log \\frac{T}{T_{\\mathrm{auto}}} - \\rho \\, \\frac{\\sum_k \\max(0, m_k - C_k)}{\\max_k C_k}

so that 0 means "as good as auto", positive is better, and rewards of graphs of any size are alike.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import numpy as np

from gnplace.cluster import Cluster
from gnplace.coarsen import Coarsening
from gnplace.graph import OpGraph
from gnplace.policy.features import PolicyInput, build_policy_input
from gnplace.rl.env import PlacementMDP, RefinementMDP
from gnplace.rl.screen import MoveScreen
from gnplace.sim.timer import BatchResult, StepTimer, overflow

__all__ = ["PlacementProblem", "reward", "placement_key", "time_distinct", "untimed_rows", "Timed", "STEP_FLOOR_S"]

#: Step times below this (seconds) count as this in rewards: no real training step is that short.
STEP_FLOOR_S = 1e-12

#: What :func:`time_distinct` keeps of a placement's timing: ``(step seconds, busy seconds [D], peak bytes [D], oom)``.
Timed = tuple[float, np.ndarray, np.ndarray, bool]

#: :meth:`PlacementProblem.widen`: a batch with a smaller share of new placements lowers the prior by 1 ...
WIDEN_BELOW = 0.25
#: ... and one with a larger share raises it by 1, back toward the configured prior ...
NARROW_ABOVE = 0.5
#: ... which never drops below this.
KAPPA_FLOOR = 1.0


def reward(step_time: np.ndarray, peak_memory: np.ndarray, capacity: np.ndarray, reference: float,
           oom_penalty: float) -> np.ndarray:
    """``-log(T / T_ref) - rho * overflow`` of each placement, ``[B]`` (see the module docstring).

    Examples:
        >>> reward(np.array([1.0, 4.0]), np.zeros((2, 2)), np.ones(2), 2.0, 4.0).round(3).tolist()
        [0.693, -0.693]
    """
    # floored at a picosecond, far below any real step, so that a step of no work (0 s: zero-FLOP ops, no
    # launch overhead) is "as good as the reference" rather than a division by zero
    ratio = np.maximum(np.asarray(step_time, dtype=float), STEP_FLOOR_S) / max(reference, STEP_FLOOR_S)
    return -np.log(ratio) - oom_penalty * overflow(peak_memory, capacity)


@dataclass(eq=False)
class PlacementProblem:
    """A graph and cluster prepared for learning: policy input, MDP, reference and the best placement seen.

    Attributes:
        inp (PolicyInput): the decision graph and its features.
        mdp (PlacementMDP): the multi-stage placement MDP.
        reference_devices (np.ndarray): the reference placement of every op, ``[num_ops]``.
        reference_groups (np.ndarray): the reference as a device per decision group (the device
            that runs most of the group's work), ``[G]``.
        reference_step (float): its step time by the timer, seconds.
        best_devices (np.ndarray): the best placement seen so far (starts as the reference).
        best_step (float): its step time, seconds (OOM placements never replace a fitting one).
        evaluations (int): placements timed for this problem.
        history (list[tuple[int, float]]): ``(evaluations, best step seconds)`` after each scored batch,
            starting with the reference: the learning curve.
        greedy_steps (dict[int, float]): step time of the policy's greedy placement, by the iteration
            it was measured at (the end of imitation, the end of a search).
        sample_best_devices (np.ndarray | None): the best fitting placement scored by :meth:`score`
            (the policy's own: the reference is not among them), ``[num_ops]``; None before any fits.
        sample_best_step (float): its step time, seconds (``inf`` before any).
        anchored (bool): score placements relative to the best seen (:meth:`anchor`); a search sets
            it (default: :obj:`False`).
        memo (bool): time each distinct placement once: :meth:`score` takes a placement timed before
            from :attr:`timed` and counts only the new ones as evaluations; a search sets it, so that
            its budget buys placements it has not measured yet (default: :obj:`False`).
        timed (dict[bytes, tuple]): with :attr:`memo`, what :meth:`score` measured of each placement, by
            :func:`placement_key`: ``(step seconds, busy seconds [D], peak bytes [D], oom)``.
        widening (bool): with :attr:`memo`, the learner adapts the sampling prior to how many of each
            batch's placements are new (:meth:`widen`); a search sets it (default: :obj:`False`).
        kappa (float | None): the sampling prior :math:`\\kappa` this pair samples with now, when it is
            :attr:`widening`; None samples with the learner's configured one.
        screen (MoveScreen | None): the model that ranks this pair's drawn placements before any is
            timed, when the learner screens (its ``screen`` setting); None otherwise.
        model (StepTimer | None): a cheaper model of the timer, the simulator beside real steps, whose
            prediction the :attr:`screen` starts from and corrects (:meth:`model_log_step`); None: the
            screen learns from the timed placements alone (default: None).
        refiner (RefinementMDP | None): the pair's refinement chains, when the learner refines (its
            ``mode`` ``"refine"``): made at the pair's first move, saved in checkpoints; None otherwise.
    """

    inp: PolicyInput
    mdp: PlacementMDP
    reference_devices: np.ndarray
    reference_groups: np.ndarray
    reference_step: float
    best_devices: np.ndarray = field(init=False)
    best_step: float = field(init=False)
    best_oom: bool = field(init=False, default=False)
    evaluations: int = field(init=False, default=0)
    history: list[tuple[int, float]] = field(init=False, default_factory=list)
    greedy_steps: dict[int, float] = field(init=False, default_factory=dict)
    sample_best_devices: np.ndarray | None = field(init=False, default=None)
    sample_best_step: float = field(init=False, default=float("inf"))
    anchored: bool = field(init=False, default=False)
    memo: bool = field(init=False, default=False)
    timed: dict[bytes, Timed] = field(init=False, default_factory=dict)
    widening: bool = field(init=False, default=False)
    kappa: float | None = field(init=False, default=None)
    screen: MoveScreen | None = field(init=False, default=None)
    model: StepTimer | None = field(init=False, default=None)
    refiner: RefinementMDP | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        self.best_devices = self.reference_devices.copy()
        self.best_step = self.reference_step

    @classmethod
    def build(
        cls, graph: OpGraph, cluster: Cluster, timer: StepTimer, *, max_nodes: int = 1000, reference: str = "auto",
        seed: int = 0, reference_seed: int | None = None, modules: bool = False,
        coarsening: Coarsening | None = None, held: np.ndarray | None = None,
    ) -> PlacementProblem:
        """Prepare ``graph`` on ``cluster``: coarsen, compute features, place and time the reference.

        The reference placer runs with ``reference_seed`` (default: ``seed``) and its own evaluations
        are made with ``timer``; timing its placement is counted as this problem's first evaluation.
        ``modules`` coarsens along the module hierarchy first
        (:func:`~gnplace.policy.features.decision_graph`). ``coarsening`` (that decision graph, made by the
        caller with the same ``max_nodes``, ``seed``, ``modules`` and the timer's cost model) and ``held`` (bytes each
        op holds at the memory peak, :func:`~gnplace.placers.groups.held_at_peak` of ``cluster``) are reused rather
        than made again (default: None, made here; see
        :func:`~gnplace.policy.features.build_policy_input`).
        """
        from gnplace.placement import check_placed
        from gnplace.placers.registry import make_placer

        inp = build_policy_input(graph, cluster, cost_model=timer.cost_model, max_nodes=max_nodes, seed=seed,
                                 modules=modules, coarsening=coarsening, held=held)
        placement = check_placed(make_placer(reference, timer=timer).place(
            graph, cluster, seed=seed if reference_seed is None else reference_seed), graph, cluster, reference)
        result = timer.time(graph, cluster, placement)
        problem = cls(inp, PlacementMDP(inp), placement.devices.copy(), majority_groups(inp, placement.devices),
                      float(result.step_time))
        problem.best_oom = result.is_oom
        problem.timed[placement_key(placement.devices)] = (
            float(result.step_time), np.asarray(result.busy_time, dtype=np.float64),
            np.asarray(result.peak_memory, dtype=np.float64), bool(result.is_oom))
        problem.evaluations = 1
        problem.history.append((1, problem.best_step))
        return problem

    @property
    def name(self) -> str:
        """``graph@cluster``."""
        return f"{self.inp.graph.name}@{self.inp.cluster.name}"

    @property
    def reference_oom(self) -> bool:
        """Whether the reference placement overflows a device's memory, as :meth:`build` timed it.

        While the best placement seen overflows, it is the reference (:attr:`best_step` is
        :attr:`reference_step`): only a placement that fits replaces it.
        """
        timed = self.timed.get(placement_key(self.reference_devices))
        return bool(timed[3]) if timed is not None else False

    def best_groups(self) -> np.ndarray:
        """The best placement seen as a device per decision group, ``[G]``."""
        return majority_groups(self.inp, self.best_devices)

    def prior(self, kappa: float) -> np.ndarray:
        """The sampling bias toward the best placement seen: ``kappa`` on its device of every group, ``[G, D]``.

        Added to the policy's logits (:func:`~gnplace.rl.agent.sample`'s ``bias``), each decision keeps
        the incumbent's device unless the policy prefers another by more than ``e**kappa``.
        """
        bias = np.zeros((self.inp.num_groups, self.inp.cluster.num_devices))
        bias[np.arange(self.inp.num_groups), self.best_groups()] = kappa  # + kappa 1[d = best_g]
        return bias

    def widen(self, new: int, batch: int, ceiling: float) -> float:
        """Adapt :attr:`kappa` to the share of a batch's ``batch`` placements that were ``new`` (not timed before).

        A policy that has collapsed onto placements already timed (fewer than :data:`WIDEN_BELOW` of
        them new) samples further from the incumbent next time: :math:`\\kappa` drops by 1, to at
        least :data:`KAPPA_FLOOR`; once more than :data:`NARROW_ABOVE` are new it rises by 1 again, up
        to ``ceiling`` (the configured prior). Returns the new :math:`\\kappa`.

        Examples:
            >>> from gnplace.toy import mlp_training_graph
            >>> from gnplace.cluster import load_cluster
            >>> from gnplace.sim.simulator import Simulator
            >>> p = PlacementProblem.build(mlp_training_graph(layers=2, width=64, batch=8), load_cluster("k80x2"),
            ...                            Simulator(), reference="single")
            >>> p.widen(2, 16, 6.0), p.widen(0, 16, 6.0), p.widen(12, 16, 6.0), p.widen(16, 16, 6.0)
            (5.0, 4.0, 5.0, 6.0)
        """
        kappa = ceiling if self.kappa is None else self.kappa
        share = new / max(batch, 1)
        if share < WIDEN_BELOW:
            kappa = max(min(KAPPA_FLOOR, ceiling), kappa - 1.0)
        elif share > NARROW_ABOVE:
            kappa = min(ceiling, kappa + 1.0)
        self.kappa = kappa
        return kappa

    def sample_best_groups(self) -> np.ndarray:
        """The best placement the policy produced as a device per decision group, ``[G]`` (one must exist).

        Each group's majority device (:func:`majority_groups`): an :attr:`anchored` placement keeps a
        split incumbent's ops in the groups the policy left in place, and their majority device is the
        one the policy chose.
        """
        assert self.sample_best_devices is not None
        return majority_groups(self.inp, self.sample_best_devices)

    def score(self, group_devices: np.ndarray, timer: StepTimer, oom_penalty: float) -> tuple[BatchResult, np.ndarray]:
        """Time placements given per decision group (``[B, G]``) on the original graph; their rewards ``[B]``.

        Keeps the best placement seen (fitting ones first). With :attr:`anchored`, each placement is
        :meth:`anchor`'s.
        """
        devices = self.placements(group_devices)
        if self.memo:
            result = self._time_new(devices, timer)
        else:
            result = timer.time_batch(self.inp.graph, self.inp.cluster, devices)
            self.evaluations += devices.shape[0]
        capacity = self.inp.cluster.memory
        rewards = reward(result.step_time, result.peak_memory, capacity, self.reference_step, oom_penalty)
        fits = ~result.oom
        if fits.any():
            i = int(np.flatnonzero(fits)[np.argmin(result.step_time[fits])])
            if self.best_oom or result.step_time[i] < self.best_step:
                self.best_devices, self.best_step, self.best_oom = devices[i].copy(), float(result.step_time[i]), False
            if result.step_time[i] < self.sample_best_step:
                self.sample_best_devices, self.sample_best_step = devices[i].copy(), float(result.step_time[i])
        self.history.append((self.evaluations, self.best_step))
        return result, rewards

    def untimed(self, devices: np.ndarray) -> tuple[list[bytes], list[int]]:
        """Each placement's :func:`placement_key` (``devices`` ``[B, num_ops]``), and the rows not in :attr:`timed`.

        Returns:
            ``(keys [B], rows)``: ``rows`` holds the first row of each distinct placement not timed
            before, in batch order.
        """
        return untimed_rows(devices, self.timed)

    def start_screen(self) -> MoveScreen:
        """This pair's :attr:`screen`, made (empty) the first time it is asked for (residual over a :attr:`model`)."""
        if self.screen is None:
            self.screen = MoveScreen(self.inp.num_groups, self.inp.cluster.num_devices, residual=self.model is not None)
        return self.screen

    def model_log_step(self, devices: np.ndarray) -> np.ndarray | None:
        """:attr:`model`'s log step seconds of placements ``[B, num_ops]``, ``[B]``; None without a model.

        A placement the model finds out of memory gets ``inf``: ranked last.
        """
        if self.model is None:
            return None
        result = self.model.time_batch(self.inp.graph, self.inp.cluster, devices)
        step = np.maximum(np.asarray(result.step_time, dtype=np.float64), STEP_FLOOR_S)
        return np.where(result.oom, np.inf, np.log(step))

    def _time_new(self, devices: np.ndarray, timer: StepTimer) -> BatchResult:
        """Every placement's result (``devices`` ``[B, num_ops]``), timing only those not in :attr:`timed`.

        A placement sampled twice in the batch, or timed by an earlier batch, is timed once: only the
        new ones are evaluations. Repeats are common around an incumbent (a sample that moves no group
        is the incumbent itself), and a real timer caches them anyway
        (:class:`~gnplace.execute.base.RealStepTimer`): timing one again would spend budget on nothing new.
        """
        result, new = time_distinct(timer, self.inp.graph, self.inp.cluster, devices, self.timed)
        self.evaluations += new
        return result

    def placements(self, group_devices: np.ndarray) -> np.ndarray:
        """Every op's device from a device per decision group (``[B, G]``): :meth:`anchor`'s if :attr:`anchored`."""
        return self.anchor(group_devices) if self.anchored else self.inp.expand(group_devices)

    def anchor(self, group_devices: np.ndarray) -> np.ndarray:
        """Placements relative to the best seen: a group left on the best's device keeps its ops, ``[B, num_ops]``.

        The policy decides per decision group, and the best placement seen (an annealing chain's, say)
        may split a group over devices; expanding the policy's choice whole would lose that detail, so
        a sample of the incumbent's own choices would time worse than the incumbent (1-5% on cifar10).
        Anchored, the incumbent's greedy reproduction is the incumbent, and a sample differs from it only
        in the groups it moves: the policy searches around the best placement itself.

        Args:
            group_devices (np.ndarray): a device per decision group of each placement, ``[B, G]``.

        Examples:
            >>> from gnplace.toy import mlp_training_graph
            >>> from gnplace.cluster import load_cluster
            >>> from gnplace.sim.simulator import Simulator
            >>> p = PlacementProblem.build(mlp_training_graph(layers=2, width=64, batch=8), load_cluster("k80x2"),
            ...                            Simulator(), reference="single")
            >>> p.best_devices[:2] = 1  # an incumbent that splits the first group
            >>> same = p.best_groups()[None, :]
            >>> bool((p.anchor(same) == p.best_devices).all())
            True
        """
        devices = self.inp.expand(group_devices)
        kept = devices == self.inp.expand(self.best_groups())[None, :]
        return np.where(kept, self.best_devices[None, :], devices)

    def offer(self, devices: np.ndarray, step: float, oom: bool, evaluations: int) -> None:
        """Record a placement found outside the policy's rollouts (a zero-shot start, say) as a candidate best.

        Args:
            devices (np.ndarray): device of every op, ``[num_ops]``.
            step (float): its step time by the timer, seconds.
            oom (bool): whether it overflows a device's memory.
            evaluations (int): timer evaluations spent finding and timing it, added to :attr:`evaluations`.
        """
        self.evaluations += int(evaluations)
        if not oom and (self.best_oom or step < self.best_step):
            self.best_devices = np.asarray(devices, dtype=np.int64).copy()
            self.best_step, self.best_oom = float(step), False
        self.history.append((self.evaluations, self.best_step))


def untimed_rows(devices: np.ndarray, timed: dict[bytes, Timed]) -> tuple[list[bytes], list[int]]:
    """Each placement's :func:`placement_key` (``devices`` ``[B, num_ops]``), and each new one's first row.

    Returns:
        ``(keys [B], rows)``: ``rows`` the first row of each placement not in ``timed``, in batch order.
    """
    keys = [placement_key(row) for row in devices]
    first: dict[bytes, int] = {}
    for i, key in enumerate(keys):
        if key not in timed:
            first.setdefault(key, i)  # each new placement's first row, in batch order
    return keys, list(first.values())


def time_distinct(
    timer: StepTimer, graph: OpGraph, cluster: Cluster, devices: np.ndarray, timed: dict[bytes, Timed]
) -> tuple[BatchResult, int]:
    """Every placement's result (``devices`` ``[B, num_ops]``, B >= 1), timing only the distinct ones not in ``timed``.

    What is timed is added to ``timed`` (by :func:`placement_key`); returned are the batch's results and how many
    placements were timed.
    """
    keys, new = untimed_rows(devices, timed)
    if new:
        fresh = timer.time_batch(graph, cluster, devices[new])
        for j, i in enumerate(new):
            timed[keys[i]] = (float(fresh.step_time[j]), fresh.busy_time[j].copy(), fresh.peak_memory[j].copy(),
                              bool(fresh.oom[j]))
    rows = [timed[key] for key in keys]
    return BatchResult(np.array([r[0] for r in rows], dtype=np.float64), np.stack([r[1] for r in rows]),
                       np.stack([r[2] for r in rows]), np.array([r[3] for r in rows], dtype=bool)), len(new)


def placement_key(devices: np.ndarray) -> bytes:
    """A 16-byte digest of a placement (device of every op), :attr:`PlacementProblem.timed`'s key.

    Examples:
        >>> placement_key(np.array([0, 1])) == placement_key(np.array([0, 1])) != placement_key(np.array([1, 0]))
        True
    """
    return hashlib.blake2b(np.ascontiguousarray(devices, dtype=np.int64).tobytes(), digest_size=16).digest()


def majority_groups(inp: PolicyInput, devices: np.ndarray) -> np.ndarray:
    """The device of each decision group that runs the most of its work in ``devices``, ``[G]``."""
    node_group = inp.decision.group[inp.coarsening.node_of_op]
    work = inp.graph.flops + 1.0  # every op counts, heavier ones more
    table = np.zeros((inp.num_groups, inp.cluster.num_devices))
    np.add.at(table, (node_group, np.asarray(devices, dtype=np.int64)), work)
    return table.argmax(axis=1).astype(np.int64)
