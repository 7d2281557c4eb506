"""``policy``'s evaluation count: what it times where nothing overflows, and its bar's total where repairs add.

:class:`EvaluationPlan` (a base of :class:`~gnplace.rl.zeroshot.PolicyPlacer`) counts the timer evaluations each
stage makes from the placer's settings: the candidates of its search, the polish's and the module chain's
evaluations, or each placement of a graph small enough to time them all; that count is what a caller budgets and
the progress bar's total. :class:`Repairs` grows that total where memory repairs take the count past it.
"""

from __future__ import annotations

from typing import Any

from gnplace.cluster import Cluster
from gnplace.graph import OpGraph
from gnplace.progress import Advance
from gnplace.rl.zeroshot_decoding import subset_sizes
from gnplace.rl.zeroshot_polish import module_units

__all__ = ["POLISH_CAP", "EvaluationPlan", "Repairs", "advance_past"]


#: The most evaluations ``polish_ops`` gives a small graph, as a multiple of ``polish``.
POLISH_CAP = 4


class EvaluationPlan:
    """The timer evaluations :meth:`place` makes where nothing overflows, by stage, from the placer's settings.

    A base of :class:`~gnplace.rl.zeroshot.PolicyPlacer`, whose options (documented there) these are.
    """

    samples: int
    portfolio: bool
    subsets: bool
    around: bool
    rounds: int
    modules: bool
    constructor_samples: int
    constructor_sizes: tuple[int, ...]
    constructor_refine: int
    refine: int
    last_rounds: int
    polish: int
    polish_ops: int
    module_chain: int
    constructor_policies: list[tuple[Any, bool]]  # (policy, decides on module subtrees first)

    def polish_evaluations(self, graph: OpGraph | None = None) -> int:
        """The polish's evaluations on ``graph``: ``polish``, or up to :data:`POLISH_CAP` times more by ``polish_ops``.

        ``max(polish, min(POLISH_CAP * polish, polish_ops // ops))`` for a graph of ``ops`` ops; without a graph, the
        most any graph gets.
        """
        if not self.polish or not self.polish_ops:
            return self.polish
        most = POLISH_CAP * self.polish
        return most if graph is None else max(self.polish, min(most, self.polish_ops // max(graph.num_ops, 1)))

    def module_chain_evaluations(self, graph: OpGraph | None = None) -> int:
        """The module chain's evaluations on ``graph``: ``module_chain`` where it runs (:func:`module_units`), else 0.

        At most ``polish_ops`` op-evaluations, as the polish (``polish_ops // ops``; every test graph of the families
        gets 1,000, a 93,567-op one 54). Without a graph, the most any graph gets. One evaluation cannot anneal: none
        is spent then.
        """
        most = self.module_chain
        if graph is not None and self.polish_ops:
            most = min(most, self.polish_ops // max(graph.num_ops, 1))
        if most < 2 or graph is not None and module_units(graph) is None:  # the units only where a chain could run
            return 0
        return most

    def evaluations_needed(self, cluster: Cluster, graph: OpGraph | None = None) -> int:
        """How many timer evaluations :meth:`place` makes on ``cluster`` where nothing overflows: what a caller budgets.

        On a ``graph`` with no more placements than the search would time, its polish included
        (:meth:`placement_space`), that many: each is timed once. Memory repairs on a memory-tight cluster make more
        (:meth:`_candidates`): the progress bar, whose total this is, grows its total with them (:class:`Repairs`).
        """
        space = None if graph is None else self.placement_space(graph, cluster)
        return space if space is not None else self._searched(cluster, graph)

    def _searched(self, cluster: Cluster, graph: OpGraph | None = None) -> int:
        """The evaluations of :meth:`place`'s search where nothing overflows: its candidates and its polish."""
        polish = self.polish_evaluations(graph)
        polish = polish if polish >= 2 else 0  # one evaluation cannot anneal: none spent
        return self._candidates(cluster) + polish + self.module_chain_evaluations(graph)

    def placement_space(self, graph: OpGraph, cluster: Cluster) -> int | None:
        """The placements of ``graph`` on ``cluster``, ``D ** groups``, where no more than the search times; else None.

        A placement puts each colocation group on one device. :meth:`place` times each of them once where there are
        no more than its search would time, polish included (:meth:`_searched`: 1,436 on two devices with the
        defaults on a graph of at most 4,000 ops, 476 past 16,000), for the exact best: every candidate of the search
        and every step of its polish is such a placement (the polish moves whole groups), ranked the same way, so
        none is better; a one-op graph on two devices took 1,432 evaluations, the polish's 1,280 among them, for its 2
        placements, and a 10-group one 1,432 for 1,024. One graph of ``datasets/`` is that small,
        ``examples/mlp1x8w6144b256`` (9 groups: 512 placements on two devices): on ``cpu_gpu`` it places as its
        search did, on ``k80x2`` in the mirror image of the search's placement (two identical devices; the same step,
        0.2858 s: ties go to the first placement, group 0 on device 0). A graph of no op, or one device, has one
        placement, timed by nobody (None here).

        Examples:
            >>> from gnplace.toy import chain_graph
            >>> from gnplace.cluster import load_cluster
            >>> from gnplace.rl.zeroshot import PolicyPlacer
            >>> placer = PolicyPlacer()
            >>> placer.placement_space(chain_graph(10), load_cluster("k80x2")), placer.placement_space(
            ...     chain_graph(11), load_cluster("k80x2"))
            (1024, None)
        """
        if graph.num_ops == 0 or cluster.num_devices == 1:
            return None
        limit, space = self._searched(cluster, graph), 1
        for _ in range(graph.num_groups):  # D ** groups, given up past the limit (a 100,000-group graph: 2 ** 11)
            space *= cluster.num_devices
            if space > limit:
                return None
        return space

    def _candidates(self, cluster: Cluster) -> int:
        """The evaluations of :meth:`place`'s search before its polish (decodes, samples, constructors, last rounds).

        Device sets, the op-level decode, the samples and a repair (``D + 2 + samples`` on ``D <= 16``
        devices); with the ``portfolio``, each heuristic's own timings and its timing of each; around
        ``auto``, ``auto``'s own timings (its heuristics' placements, its reference), the greedy decode
        of each of the ``rounds`` around it and the last rounds; the constructor's greedy placement and samples.
        On a memory-tight cluster each memory repair (of a heuristic inside ``auto``, of the placement
        chosen) times up to 36 placements more (1,061 where its fallbacks overflow too), so a caller under a
        budget also caps the placer's timer with a :class:`~gnplace.sim.timer.BudgetedTimer`, as fine-tuning does.
        """
        from gnplace.placers.auto import FAST_PLACERS

        device_sets = len(subset_sizes(cluster.num_devices)) + 2 if self.subsets else 1  # with D and the fastest
        needed = device_sets + 2 + self.samples
        if self.portfolio and not (self.around and self.samples > 0):  # each heuristic's own timings, then its
            needed += 3 * len(FAST_PLACERS) + max(0, cluster.num_devices - len(FAST_PLACERS))
        if self.around:
            # auto's: each heuristic's own timings (at most 2; single's one per device) and its timing of each
            needed += 3 * len(FAST_PLACERS) + max(0, cluster.num_devices - len(FAST_PLACERS)) + 3
            needed += self.rounds - 1  # each round after the first decodes greedily around the best so far too
            # the last rounds: this policy's samples (and one greedy decode), each constructor's
            needed += (self.refine * self.last_rounds + 1 if self.refine else 0) + \
                self.constructor_refine * self.last_rounds * len(self._refining_constructors())
        needed += (1 + self.constructor_samples) * (1 + len(self._constructor_subsets(cluster))) * \
            len(self.constructor_policies)
        return needed

    def _refining_constructors(self) -> list[tuple[int, Any]]:
        """The constructors (rank from 1, policy) that draw the round around the best: those deciding as this policy."""
        return [(rank, policy) for rank, (policy, modules) in enumerate(self.constructor_policies, 1)
                if modules == self.modules]

    def _constructor_subsets(self, cluster: Cluster) -> tuple[int, ...]:
        """The counts ``k`` of :attr:`constructor_sizes` below ``cluster``'s devices: the extra device sets."""
        return tuple(k for k in self.constructor_sizes if k < cluster.num_devices)


class Repairs:
    """:class:`~gnplace.progress.Advance` of ``PolicyPlacer._place`` whose total grows where memory repairs add.

    :meth:`EvaluationPlan.evaluations_needed` (``planned``) bounds the count where nothing overflows: the search's
    candidates, then the polish's ``polish`` evaluations. A memory repair (of a heuristic inside ``auto``, of the
    placement chosen, of the chain's) times up to 1,061 placements more: 2,582 evaluations were made of 1,436
    planned, and the bar stood past 100% (the lines at 180%) with no time left shown. Where the count so far and the
    polish's evaluations still to come pass ``planned``, the total told ``shown`` is raised to them, and the note says
    that memory repairs did it; nothing changes where nothing overflows.
    """

    def __init__(self, shown: Advance, planned: int, polish: int) -> None:
        self.shown, self.planned = shown, planned
        self.polish_total, self.tail = polish, polish  # the polish's evaluations, and those still to come

    def __call__(self, done: int, note: str = "", total: int | None = None) -> None:
        """Tell ``shown`` of ``done`` evaluations made (``note``), its total raised where repairs pass the plan."""
        needed = max(done + self.tail, 0 if total is None else total)
        if needed > self.planned:  # only a memory repair takes the count past the plan
            self.shown(done, f"{note} (memory repairs)" if note else "memory repairs", needed)
        else:
            self.shown(done, note)

    def polish(self, before: int, spent: int) -> None:
        """The polish has made ``spent`` evaluations after the ``before`` of the search."""
        self.tail = max(0, self.polish_total - spent)
        self(before + spent, "polish")


def advance_past(advance_to: Advance, before: int, note: str, evaluations: int) -> None:
    """``advance_to(before + evaluations, note)``: a stage's ``evaluations`` after ``before`` made by the others."""
    advance_to(before + evaluations, note)
