"""Timers ``policy`` wraps the simulator in: one that shows its evaluations as made, one that simulates each once.

:class:`ReportingTimer` counts a stage's evaluations and tells a progress bar; :class:`MemoTimer` gives back the
simulator's result for a placement it timed before (seconds and bytes, bit for bit) rather than simulating it again.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from gnplace.cluster import Cluster
from gnplace.graph import OpGraph
from gnplace.sim.simulator import Simulator
from gnplace.sim.timer import BatchResult, BudgetedTimer, StepResult, StepTimer

if TYPE_CHECKING:
    from gnplace.rl.problem import Timed

__all__ = ["MemoTimer", "ReportingTimer"]


class ReportingTimer(BudgetedTimer):
    """A :class:`~gnplace.sim.timer.BudgetedTimer`, no budget, that calls ``report(evaluations)`` after each timing.

    Its timings are the wrapped timer's; ``report`` (None: nothing) shows a stage's evaluations as they are made, on a
    progress bar (:class:`~gnplace.rl.zeroshot.PolicyPlacer`'s ``progress``).
    """

    def __init__(self, timer: StepTimer, report: Callable[[int], None] | None = None) -> None:
        super().__init__(timer)
        self._report = report

    def time(self, graph: OpGraph, cluster: Cluster, placement: Any, *, timeline: bool = False) -> StepResult:
        """The wrapped timer's result (seconds, bytes), counted and reported."""
        result = super().time(graph, cluster, placement, timeline=timeline)
        if self._report is not None:
            self._report(self.evaluations)
        return result

    def time_batch(self, graph: OpGraph, cluster: Cluster, placements: Any) -> BatchResult:
        """The wrapped timer's results of a batch, counted and reported."""
        result = super().time_batch(graph, cluster, placements)
        if self._report is not None:
            self._report(self.evaluations)
        return result


class MemoTimer(StepTimer):
    """The simulator, giving back what it gave for a placement it timed before rather than simulating it again.

    :meth:`~gnplace.rl.zeroshot.PolicyPlacer._around` simulated ``auto``'s placement three times (``auto``'s timing
    of its heuristics' placements, the problem's reference, the first candidate), and each heuristic's placement that
    its memory check had timed once more: 10 simulations of 0.2 s at 280,158 ops on v100x8. The simulator's result
    depends on the graph, the cluster and the placement alone, so the same bits come back; the counting timers around
    this one still count each timing. Results are kept (:data:`~gnplace.rl.problem.Timed`, as a search's problem
    keeps them: :func:`~gnplace.rl.problem.time_distinct`) for the (graph, cluster) pair timed last; a timeline is
    always simulated.
    """

    #: its results are the simulator's (``timer``'s), bit for bit: a memory repair may prove that nothing fits by them
    #: (:func:`gnplace.placers.groups._proven_over_memory`)
    replays_simulator = True

    def __init__(self, timer: Simulator) -> None:
        self.timer = timer
        self.cost_model = timer.cost_model
        self._pair: tuple[OpGraph, Cluster] | None = None
        self._kept: dict[bytes, Timed] = {}

    def _results(self, graph: OpGraph, cluster: Cluster) -> dict[bytes, Timed]:
        """The results kept for ``(graph, cluster)``, by placement key (none for a new pair)."""
        if self._pair is None or self._pair[0] is not graph or self._pair[1] is not cluster:
            self._pair, self._kept = (graph, cluster), {}
        return self._kept

    def time(self, graph: OpGraph, cluster: Cluster, placement: Any, *, timeline: bool = False) -> StepResult:
        """The simulator's result for ``placement``, simulated once per (graph, cluster) pair; a timeline always."""
        from gnplace.placement import as_placement
        from gnplace.rl.problem import placement_key

        if timeline is not False:
            return self.timer.time(graph, cluster, placement, timeline=timeline)
        placed = as_placement(graph, cluster, placement)
        kept, key = self._results(graph, cluster), placement_key(placed.devices)
        if key not in kept:
            result = self.timer.time(graph, cluster, placed)
            kept[key] = (result.step_time, result.busy_time.copy(), result.peak_memory.copy(), result.is_oom)
            return result
        step, busy, peak, _ = kept[key]
        return StepResult(step, busy.copy(), peak.copy(), cluster.memory, cluster.device_names)

    def time_batch(self, graph: OpGraph, cluster: Cluster, placements: Any) -> BatchResult:
        """The simulator's results of a batch, each distinct placement not timed before simulated once."""
        from gnplace.rl.problem import time_distinct
        from gnplace.sim.timer import check_batch

        array = check_batch(graph, cluster, placements)
        if not array.shape[0]:
            return self.timer.time_batch(graph, cluster, array)
        return time_distinct(self.timer, graph, cluster, array, self._results(graph, cluster))[0]
