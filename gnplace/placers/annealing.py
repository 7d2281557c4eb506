"""``annealing``: simulated annealing over group placements, FlexFlow's MCMC search.

Following FlexFlow (Jia, Zaharia & Aiken, "Beyond Data and Model Parallelism for Deep Neural
Networks", SysML 2019, https://arxiv.org/abs/1807.05358), a Markov chain walks over placements:
each step proposes a neighbour (one colocation group moved to another device, or two groups on
different devices swapped), the timer scores it, and the Metropolis rule accepts it with

.. math::
    \\Pr[\\text{accept } p'] = \\min\\Bigl(1, \\exp\\bigl(-\\frac{E(p') - E(p)}{T_i \\, E(p_0)}\\bigr)\\Bigr),
    \\qquad E(p) = t(p)\\,\\bigl(1 + \\rho \\, \\textstyle\\sum_k \\max(0, m_k(p) - C_k) / \\max_k C_k\\bigr)

where :math:`t` is the step time (s), :math:`m_k` the peak and :math:`C_k` the capacity of
device :math:`k` (bytes), :math:`\\rho` the OOM penalty and :math:`p_0` the start. Temperatures are
relative to :math:`E(p_0)` and cool geometrically from :math:`T_0` to :math:`T_{end}` over the budget.

Besides FlexFlow's two proposals, four move many groups at once or follow the graph, because a
placement that is a local optimum for single moves is common: each group moved alone adds
transfers on both sides of it. A *block* moves a run of groups that are contiguous in topological
order to one device (a pipeline cut moves); a *pull* moves a group onto the device of a producer or
consumer across a cut edge (a transfer disappears); a *sibling* move takes the groups that repeat
one module (the same cell called at every time step of a recurrent network), all of them or a
window of consecutive calls, to one device; a *module* move takes one subtree of the module
hierarchy (one branch of a convolutional cell, a whole cell, an encoder) to one device. The branches
of a cell interleave in topological order, so no block follows one. Measured with ``python
scripts/bench.py search --placers annealing --per-family 2`` (20,000 evaluations, 18 test graph and
cluster pairs): 0.950x ``auto`` with FlexFlow's moves alone, 0.920x with blocks, pulls and siblings,
0.895x with module moves too (seed 0; seeds 1 and 2: 0.900 and 0.894; see the README).

The chain starts cold (revision 4, 2026-11-28): :math:`T_0 = 10^{-3}`, so that a move 0.1% slower than
the start is accepted with probability :math:`1/e`. From ``auto``'s placement, where most moves lose,
a hotter chain spends its budget wandering off and back. Over the same 18 pairs, geometric mean over
``auto``'s step after 400 / 1,000 / 4,000 / 20,000 evaluations, :math:`T_0` 0.05 (revision 3) against
:math:`10^{-3}`: 0.965 / 0.946 / 0.913 / 0.895 against **0.934 / 0.915 / 0.895 / 0.883** (cifar10 at
20,000: 0.835 against 0.806; ptb 0.929 against 0.925; nmt 0.925 against 0.922;
``docs/measured-search.md``). Where it loses: ptb on two devices, where the hot chain crosses to
another basin and the cold one stays in ``auto``'s (the eight ptb test graphs on k80x2 at 20,000
evaluations: 0.983 against 0.954); ``initial_temperature=0.05`` gives revision 3's chain.

A stalled cold chain reheats (revision 5, 2026-11-29): once a fifth of the budget passes without a
new lowest energy, the chain restarts, once, from the best placement seen at 0.05 (revision 3's
:math:`T_0`) and cools to :math:`T_{end}` over what is left. On ptb on k80x2 at 20,000 evaluations
that gives 0.960 (revision 4 0.983, revision 3 0.954); on the 18 pairs 0.934 / 0.893 / 0.883 after
400 / 4,000 / 20,000 evaluations, level with revision 4. ``reheat_after=None`` gives revision 4's chain.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gnplace.cluster import Cluster
from gnplace.exceptions import InvalidArgument, UnknownName
from gnplace.graph import OpGraph
from gnplace.limits import check_budget, finite_number, is_whole
from gnplace.placement import GraphKey, Placement, check_graph_and_cluster
from gnplace.placers._search import baseline_candidates
from gnplace.placers.base import group_first_ops, group_order
from gnplace.placers.groups import best_repaired
from gnplace.progress import evaluation_bar
from gnplace.seed import SeedLike, as_generator
from gnplace.sim.simulator import Simulator
from gnplace.sim.timer import BudgetedTimer, StepTimer, overflow

__all__ = ["AnnealingPlacer", "GivenStart"]

_STARTS = ("best", "single", "round_robin", "random")


class AnnealingPlacer:
    """Simulated annealing over colocation-group placements with exactly ``budget`` timer evaluations.

    Proposals are scored ``k`` at a time with :meth:`~gnplace.sim.timer.StepTimer.time_batch`,
    all from the current placement, and accepted in order: the first accepted one becomes the
    current placement and the rest are dropped (their scores still count towards the best seen), so
    the chain is exactly sequential annealing. ``k`` follows the recent acceptance rate (about one
    acceptance per batch), at most ``batch``. Scoring the start candidates counts towards the budget.
    The best feasible placement seen is returned; an out-of-memory one only if none fits.

    Args:
        budget (int, optional): timer evaluations in all (default: 2000).
        start (str or Placer, optional): where the chain starts: another registered placer's name,
            such as ``"auto"`` (the best fast heuristic), or a placer object (its own evaluations
            are not counted; scoring its placement is: 1 evaluation), ``"best"`` of ``single`` and
            ``round_robin`` (D + 1 evaluations), ``"single"`` (D), ``"round_robin"`` (1) or
            ``"random"`` (1) (default: ``"auto"``: from scratch, 20,000 evaluations ended 1.2-1.7x
            slower than ``auto`` on cifar10 test graphs).
        initial_temperature (float, optional): :math:`T_0`, relative to the start's energy: a move
            that is ``T_0`` times the start's step time worse is accepted with probability 1/e
            (default: 0.001; revision 3's was 0.05).
        final_temperature (float, optional): :math:`T_{end}` at the last evaluation (default: 1e-4).
        reheat_after (float or None, optional): share of the budget the chain may spend without
            reaching a new lowest energy before it restarts, once, from the best placement seen at
            ``reheat_temperature``, cooling to :math:`T_{end}` over what is left (not in the last
            tenth of the budget, nor when ``reheat_temperature`` is not above :math:`T_0`); ``None``
            never reheats (default: 0.2; revisions 1-4 never did).
        reheat_temperature (float, optional): the restart's temperature, relative to the start's energy
            like :math:`T_0` (default: 0.05, revision 3's :math:`T_0`).
        swap_probability (float, optional): chance that a one- or two-group proposal swaps two groups
            rather than moving one (default: 0.3).
        block_probability (float, optional): chance a proposal moves a block of groups contiguous in
            topological order, of 2 to ``max_block`` groups (log-uniform), to one device (default: 0.2).
        pull_probability (float, optional): chance a proposal moves a group onto the device of a
            neighbour across a cut edge (default: 0.2).
        sibling_probability (float, optional): chance a proposal moves the groups whose first op has
            one module (the calls of one cell), all or a window of consecutive ones, to one device
            (default: 0.1).
        module_probability (float, optional): chance a proposal moves the groups of one subtree of the
            module hierarchy (a branch of a cell, a cell, an encoder: the groups whose first op's module path
            starts with one prefix) to one device (default: 0.3). A draw of a move that has nothing to move
            becomes another kind: a sibling move on a graph where no module runs twice a module move (a graph
            without repeated cells moves subtrees with probability ``sibling_probability + module_probability``),
            a block on a graph of one group a pull, any other a one- or two-group proposal.
        max_block (int, optional): most groups in a block (default: 64).
        oom_penalty (float, optional): :math:`\\rho`, energy multiplier per unit of relative memory
            overflow (default: 10.0).
        batch (int, optional): most proposals scored per timer call (default: 16).
        timer (StepTimer, optional): scores placements (default: ``Simulator()``).
        progress (bool or None, optional): show a bar of the evaluations on stderr (default: on a terminal).

    Examples:
        >>> from gnplace.toy import fork_graph
        >>> from gnplace.cluster import load_cluster
        >>> AnnealingPlacer(budget=50).place(fork_graph(), load_cluster("k80x2"), seed=0).devices.shape
        (4,)
    """

    name = "annealing"
    accepts = frozenset({"timer", "budget"})
    uses = ("auto",)  # its default start
    revision = "5"  # 2026-11-29: a stalled chain reheats once (4: T_0 0.001; 3: module subtrees; 2: blocks, ...)

    def __init__(
        self,
        budget: int = 2000,
        start: Any = "auto",
        initial_temperature: float = 0.001,
        final_temperature: float = 1e-4,
        reheat_after: float | None = 0.2,
        reheat_temperature: float = 0.05,
        swap_probability: float = 0.3,
        block_probability: float = 0.2,
        pull_probability: float = 0.2,
        sibling_probability: float = 0.1,
        module_probability: float = 0.3,
        max_block: int = 64,
        oom_penalty: float = 10.0,
        batch: int = 16,
        timer: StepTimer | None = None,
        progress: bool | None = None,
    ) -> None:
        if not (is_whole(budget) and is_whole(batch)) or budget < 1 or batch < 1:
            raise InvalidArgument(
                f"AnnealingPlacer needs integers budget >= 1 and batch >= 1, got budget={budget!r}, batch={batch!r}"
            )
        check_budget(budget, "AnnealingPlacer")  # and at most MAX_BUDGET: a larger one would run until killed
        if not isinstance(start, str) and not callable(getattr(start, "place", None)):
            raise InvalidArgument(f"AnnealingPlacer: start must be a placer's name or a placer, got {start!r}")
        if isinstance(start, str) and start not in _STARTS:
            from gnplace.placers.registry import PLACERS  # deferred: the registry names this module

            if start not in PLACERS:  # a misspelt start is refused here, not after the run began; the line said
                # "unknown placer 'x'", naming neither the option (-O annealing.start=x) nor best and random, then
                # listed best and random among the placers (neither is one: -p best is refused)
                raise UnknownName(f"AnnealingPlacer: start: unknown placer {start!r} (choose one of: "
                                  f"{', '.join(sorted(PLACERS.names()))}; or best, the better of single and "
                                  "round_robin; or random, one random placement)")
            PLACERS.resolve(start)  # (its module imports: one that cannot is refused here too)
        numbers = {"initial_temperature": initial_temperature, "final_temperature": final_temperature,
                   "reheat_temperature": reheat_temperature, "swap_probability": swap_probability,
                   "block_probability": block_probability, "pull_probability": pull_probability,
                   "sibling_probability": sibling_probability, "module_probability": module_probability}
        if reheat_after is not None:
            numbers["reheat_after"] = reheat_after
        for name, value in numbers.items():  # true was taken for 1, and 'zzz' said "'<=' not supported between ..."
            # finite: NaN passed the probabilities' checks (a move never drawn), infinity made the temperatures NaN,
            # and 10**400 was float()'s OverflowError traceback
            if not finite_number(value):
                raise InvalidArgument(f"AnnealingPlacer needs {name} to be a finite number, got {value!r}")
        if not 0 < final_temperature <= initial_temperature:
            raise InvalidArgument(
                f"AnnealingPlacer needs 0 < final_temperature <= initial_temperature, got {final_temperature} "
                f"and {initial_temperature}"
            )
        if reheat_after is not None and not 0.0 < reheat_after < 1.0:
            raise InvalidArgument(f"AnnealingPlacer: reheat_after must be in (0, 1) or None, got {reheat_after}")
        if not reheat_temperature > 0:
            raise InvalidArgument(f"AnnealingPlacer needs reheat_temperature > 0, got {reheat_temperature}")
        hot = {"initial_temperature": initial_temperature, "reheat_temperature": reheat_temperature}
        for label, hottest in hot.items():
            if float(final_temperature) / float(hottest) == 0.0:
                # the cooling T (T_end / T)^progress: a quotient that underflows to 0 made every temperature after the
                # first 0, a greedy chain, and a "divide by zero" RuntimeWarning from its Metropolis test
                raise InvalidArgument(f"AnnealingPlacer: final_temperature / {label} underflows to 0 "
                                      f"({final_temperature:g} / {hottest:g}): give temperatures closer together")
        if not 0.0 <= swap_probability <= 1.0:
            raise InvalidArgument(f"AnnealingPlacer: swap_probability must be in [0, 1], got {swap_probability}")
        moves = (block_probability, pull_probability, sibling_probability, module_probability)
        if min(moves) < 0.0 or sum(moves) > 1.0:
            raise InvalidArgument(
                "AnnealingPlacer: block_probability, pull_probability, sibling_probability and module_probability must "
                f"be >= 0 and sum to at most 1, got {block_probability}, {pull_probability}, {sibling_probability} "
                f"and {module_probability}"
            )
        if not is_whole(max_block) or max_block < 2:
            raise InvalidArgument(f"AnnealingPlacer needs an integer max_block >= 2, got {max_block!r}")
        if not finite_number(oom_penalty) or not 0.0 <= oom_penalty:
            # a negative penalty would make overflowing placements the chain's lower energies
            raise InvalidArgument(f"AnnealingPlacer needs a finite oom_penalty >= 0, got {oom_penalty!r}")
        self.budget = int(budget)
        self.start = start
        self.initial_temperature = float(initial_temperature)
        self.final_temperature = float(final_temperature)
        self.reheat_after = None if reheat_after is None else float(reheat_after)
        self.reheat_temperature = float(reheat_temperature)
        self.swap_probability = float(swap_probability)
        self.block_probability = float(block_probability)
        self.pull_probability = float(pull_probability)
        self.sibling_probability = float(sibling_probability)
        self.module_probability = float(module_probability)
        self.max_block = int(max_block)
        self.oom_penalty = float(oom_penalty)
        self.batch = int(batch)
        self.timer = timer or Simulator()
        self.progress = progress
        self.last_trace: list[tuple[int, float, float]] = []

    def __repr__(self) -> str:
        return (
            f"AnnealingPlacer(budget={self.budget}, start={self.start!r}, initial_temperature="
            f"{self.initial_temperature}, final_temperature={self.final_temperature}, reheat_after="
            f"{self.reheat_after}, reheat_temperature={self.reheat_temperature}, swap_probability="
            f"{self.swap_probability}, block_probability={self.block_probability}, pull_probability="
            f"{self.pull_probability}, sibling_probability={self.sibling_probability}, module_probability="
            f"{self.module_probability}, max_block={self.max_block}, "
            f"oom_penalty={self.oom_penalty}, batch={self.batch})"
        )

    def place(self, graph: OpGraph, cluster: Cluster, *, seed: SeedLike = None) -> Placement:
        """Place ``graph`` on ``cluster`` with exactly ``budget`` timer evaluations.

        Fewer are made only where no move exists (one device, or a graph without ops).

        Args:
            graph (OpGraph): the graph.
            cluster (Cluster): the devices.
            seed (int, np.random.Generator or None, optional): seed of the chain (default: None).

        Returns:
            Placement: the best placement seen; every colocation group on one device.
        """
        check_graph_and_cluster(graph, cluster)
        rng = as_generator(seed)
        num_groups, num_devices = graph.num_groups, cluster.num_devices
        if num_groups == 0:
            return Placement(np.zeros(0, dtype=np.int64), cluster, GraphKey.of(graph))
        scorer = BudgetedTimer(self.timer, self.budget)
        starts = self._start_candidates(graph, cluster, rng)[: self.budget]
        scored = scorer.time_groups(graph, cluster, starts)
        energy = self._energy(scored.step_time, scored.peak_memory, cluster.memory)
        first = int(np.argmin(energy))
        current, current_energy = starts[first].copy(), float(energy[first])
        if num_devices == 1:
            return Placement.from_groups(graph, cluster, current)
        moves = _Moves(graph, self)
        scale = current_energy if current_energy > 0 else 1.0
        schedule = (0, self.initial_temperature)  # (evaluation, temperature) the cooling starts from
        lowest, lowest_at = current_energy, scorer.evaluations  # the chain's lowest energy and when it got there
        stall = self.budget * (self.reheat_after or 0.0)  # evaluations without a new lowest energy that reheat
        reheat = self.reheat_after is not None and self.reheat_temperature > self.initial_temperature
        acceptance = 1.0  # running acceptance rate, sets how many proposals to score at once
        with evaluation_bar(f"{self.name} {graph.name}", self.budget, self.progress) as advance_to:
            while scorer.evaluations < self.budget:
                spent = scorer.evaluations
                if current_energy < lowest:
                    lowest, lowest_at = current_energy, spent
                if reheat and spent - lowest_at > stall and spent < 0.9 * self.budget:
                    # a stalled cold chain restarts, once, hot from the best placement seen
                    current, current_energy = self._best_state(graph, cluster, scorer)
                    schedule, lowest_at, reheat = (spent, self.reheat_temperature), spent, False
                current, current_energy, acceptance = self._step(
                    graph, cluster, scorer, moves, rng, current, current_energy, acceptance, scale, schedule)
                advance_to(scorer.evaluations)
        best = best_repaired(graph, cluster, scorer, self.timer)  # never OOM where a repair fits
        self.last_trace = scorer.trace
        return best

    def _step(
        self, graph: OpGraph, cluster: Cluster, scorer: BudgetedTimer, moves: _Moves, rng: np.random.Generator,
        current: np.ndarray, current_energy: float, acceptance: float, scale: float, schedule: tuple[int, float],
    ) -> tuple[np.ndarray, float, float]:
        """One batch of proposals from ``current`` and their Metropolis tests; the chain's new state.

        ``schedule`` is ``(evaluation, temperature)``: the temperature cools geometrically from it to
        :math:`T_{end}` at the last evaluation. Returns the current placement (a device per group), its
        energy (seconds, penalised) and the running acceptance rate.
        """
        num_devices = cluster.num_devices
        k = int(min(self.batch, self.budget - scorer.evaluations, max(1, round(1.0 / max(acceptance, 1e-9)))))
        proposals = np.stack([moves.propose(current, num_devices, rng) for _ in range(k)])
        index = scorer.evaluations + np.arange(k)
        first, hottest = schedule
        # T_i = T_s (T_end / T_s)^((i - s) / (B - 1 - s)): geometric cooling from evaluation s
        progress = (index - first) / max(self.budget - 1 - first, 1)
        temperature = hottest * (self.final_temperature / hottest) ** progress
        scored = scorer.time_groups(graph, cluster, proposals)
        energy = self._energy(scored.step_time, scored.peak_memory, cluster.memory)
        # ALGO LOGIC: Metropolis test of each proposal in turn; the first accepted one moves the chain
        uniform = rng.random(k)
        delta = (energy - current_energy) / scale
        with np.errstate(over="ignore"):
            accept = (delta <= 0) | (uniform < np.exp(-delta / temperature))
        taken = int(np.argmax(accept)) if accept.any() else -1
        if taken >= 0:
            current, current_energy = proposals[taken], float(energy[taken])
        tried = taken + 1 if taken >= 0 else k
        acceptance = 0.8 * acceptance + 0.2 * float(taken >= 0) / tried
        return current, current_energy, acceptance

    def _best_state(self, graph: OpGraph, cluster: Cluster, scorer: BudgetedTimer) -> tuple[np.ndarray, float]:
        """The best placement seen (a device per group) and its energy, from the scorer's record: no evaluation."""
        best = scorer.best_placement(cluster)
        assert best is not None
        over, step = scorer.best_key
        return best.group_devices(graph), step * (1.0 + self.oom_penalty * over)

    def _energy(self, step_time: np.ndarray, peak_memory: np.ndarray, capacity: np.ndarray) -> np.ndarray:
        return step_time * (1.0 + self.oom_penalty * overflow(peak_memory, capacity))

    def _start_candidates(self, graph: OpGraph, cluster: Cluster, rng: np.random.Generator) -> np.ndarray:
        baselines = baseline_candidates(graph, cluster)
        d = cluster.num_devices
        if isinstance(self.start, str) and self.start in _STARTS:
            if self.start == "best":
                return baselines
            if self.start == "single":
                return baselines[:d]
            if self.start == "round_robin":
                return baselines[d:]
            return rng.integers(0, d, size=(1, graph.num_groups))
        placer = self.start
        if isinstance(placer, str):
            from gnplace.placers.registry import make_placer  # deferred: the registry names this module

            placer = make_placer(placer, timer=self.timer)
            if self.progress is False and hasattr(placer, "progress"):  # --no-progress reaches a search it starts from
                placer.progress = False
        return placer.place(graph, cluster, seed=rng).group_devices(graph)[None, :]


class GivenStart:
    """A placer that returns one given placement: the start of an annealing chain from a placement at hand.

    ``AnnealingPlacer(start=GivenStart(placement))`` anneals from ``placement`` (a search's best, zero-shot
    placement's), which the chain times once, counted, as its start.
    """

    name = "given"

    def __init__(self, placement: Placement) -> None:
        self.placement = placement

    def place(self, graph: OpGraph, cluster: Cluster, *, seed: SeedLike = None) -> Placement:
        """The given placement, whatever the graph, cluster and seed."""
        return self.placement


class _Moves:
    """The proposals of one chain: the graph's group structure, built once per :meth:`AnnealingPlacer.place`."""

    def __init__(self, graph: OpGraph, placer: AnnealingPlacer) -> None:
        self.placer = placer
        self.order = group_order(graph)  # groups in topological order of their first op
        group = graph.group
        src, dst = group[graph.edge_src], group[graph.edge_dst]
        between = src != dst
        pairs = np.unique(np.stack([src[between], dst[between]], axis=1), axis=0)  # distinct group edges
        self.edge_src, self.edge_dst = pairs[:, 0], pairs[:, 1]
        first_op = group_first_ops(graph)
        calls: dict[str, list[int]] = {}  # module path -> the groups that call it, in topological order
        subtrees: dict[str, list[int]] = {}  # module path prefix -> the groups under it, in topological order
        for g in self.order.tolist():
            module = graph.module[first_op[g]]
            if not module:  # ops outside any module are neither calls of one cell nor in a subtree
                continue
            calls.setdefault(module, []).append(g)
            parts = module.split(".")
            for depth in range(1, len(parts) + 1):
                subtrees.setdefault(".".join(parts[:depth]), []).append(g)
        self.siblings = [np.asarray(groups, dtype=np.int64) for groups in calls.values() if len(groups) > 1]
        # one entry per distinct set of groups (``cells.3.ops.2`` and ``cells.3.ops.2.op`` may hold the same)
        distinct = {tuple(groups) for groups in subtrees.values() if 1 < len(groups) < graph.num_groups}
        self.modules = [np.asarray(groups, dtype=np.int64) for groups in sorted(distinct)]

    def propose(self, current: np.ndarray, num_devices: int, rng: np.random.Generator) -> np.ndarray:
        """A neighbour of ``current`` (group devices ``[num_groups]``) that differs from it where a move exists."""
        p = self.placer
        u = rng.random()
        sibling_end = p.block_probability + p.pull_probability + p.sibling_probability  # cumulative shares
        if u < p.block_probability and self.order.shape[0] > 1:
            n = self.order.shape[0]
            top = min(p.max_block, n)
            length = min(int(np.exp(rng.uniform(np.log(2), np.log(top + 1)))), top)  # log-uniform in [2, top]
            first = int(rng.integers(0, n - length + 1))
            return self._to_one_device(current, self.order[first : first + length], num_devices, rng)
        elif u < p.block_probability + p.pull_probability:
            cut = np.flatnonzero(current[self.edge_src] != current[self.edge_dst])
            if cut.size:
                e = int(cut[rng.integers(cut.size)])
                a, b = int(self.edge_src[e]), int(self.edge_dst[e])
                proposal = current.copy()
                if rng.random() < 0.5:
                    proposal[a] = current[b]  # the producer joins its consumer
                else:
                    proposal[b] = current[a]  # the consumer joins its producer
                return proposal
        elif u < sibling_end and self.siblings:
            calls = self.siblings[int(rng.integers(len(self.siblings)))]
            if rng.random() < 0.5:  # a window of consecutive calls rather than all of them
                length = int(rng.integers(1, calls.shape[0] + 1))
                first = int(rng.integers(0, calls.shape[0] - length + 1))
                calls = calls[first : first + length]
            return self._to_one_device(current, calls, num_devices, rng)
        elif u < sibling_end + p.module_probability and self.modules:
            return self._to_one_device(current, self.modules[int(rng.integers(len(self.modules)))], num_devices, rng)
        return self._one_or_two(current, num_devices, rng)

    @staticmethod
    def _to_one_device(current: np.ndarray, groups: np.ndarray, devices: int, rng: np.random.Generator) -> np.ndarray:
        """``groups`` moved to one device, drawn among those not already holding all of them (2+ devices)."""
        held = np.unique(current[groups])
        if held.size == 1:
            target = int(rng.integers(devices - 1))
            target += target >= held[0]  # any device but the one they share
        else:
            target = int(rng.integers(devices))
        proposal = current.copy()
        proposal[groups] = target
        return proposal

    def _one_or_two(self, current: np.ndarray, num_devices: int, rng: np.random.Generator) -> np.ndarray:
        """FlexFlow's proposals: swap two groups on different devices, or move one to another device."""
        proposal = current.copy()
        if rng.random() < self.placer.swap_probability:
            a = int(rng.integers(current.shape[0]))
            others = np.flatnonzero(current != current[a])
            if others.size:
                b = int(others[rng.integers(others.size)])
                proposal[a], proposal[b] = current[b], current[a]
                return proposal
        g = int(rng.integers(current.shape[0]))
        target = int(rng.integers(num_devices - 1))
        proposal[g] = target + (target >= current[g])  # any device but the current one
        return proposal
