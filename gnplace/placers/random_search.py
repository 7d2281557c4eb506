"""``random_search``: the best of a fixed number of random group placements, scored by a timer.

Random search under an explicit evaluation budget is the baseline every learned placer must beat
for the same number of timer evaluations (Bergstra & Bengio, "Random Search for Hyper-Parameter
Optimization", JMLR 2012, https://jmlr.org/papers/v13/bergstra12a.html).
"""

from __future__ import annotations

import numpy as np

from gnplace.cluster import Cluster
from gnplace.exceptions import InvalidArgument
from gnplace.graph import OpGraph
from gnplace.limits import check_budget, is_number, is_whole
from gnplace.placement import GraphKey, Placement, check_graph_and_cluster
from gnplace.placers._search import baseline_candidates, equal_work_blocks
from gnplace.placers.base import group_order
from gnplace.placers.groups import best_repaired, group_times
from gnplace.progress import evaluation_bar
from gnplace.seed import SeedLike, as_generator
from gnplace.sim.simulator import Simulator
from gnplace.sim.timer import BudgetedTimer, StepTimer

__all__ = ["RandomSearchPlacer"]


class RandomSearchPlacer:
    """Score ``budget`` group placements with a timer and keep the best feasible one.

    The candidates are, in order: the placement of the ``start`` placer (by default ``auto``, the
    best fast heuristic, so the result is never worse than it), each single device and round robin,
    the groups in topological order cut into blocks of equal work on
    the 2, 3, ..., D fastest devices, then random draws: a ``block_fraction`` of them random
    contiguous blocks (random cuts, random distinct devices), the rest uniform (each group on a
    device drawn uniformly). Each candidate is one timer evaluation; they are scored ``batch``
    at a time with :meth:`~gnplace.sim.timer.StepTimer.time_batch`. The best placement that
    fits in memory wins; an out-of-memory one is returned only if none fits (the least overflow).

    Args:
        budget (int, optional): timer evaluations, i.e. placements scored (default: 1000).
        batch (int, optional): placements scored per timer call (default: 64).
        block_fraction (float, optional): share of the random draws that are contiguous blocks,
            0 to 1 (default: 0.25).
        start (str or None, optional): registered placer whose placement is the first candidate
            (its own evaluations are not counted, scoring its placement is), or None (default: ``"auto"``).
        timer (StepTimer, optional): scores the candidates; the work estimates of the block
            candidates come from its cost model (default: ``Simulator()``).
        progress (bool or None, optional): show a bar of the evaluations on stderr (default: on a terminal).

    Examples:
        >>> from gnplace.toy import fork_graph
        >>> from gnplace.cluster import load_cluster
        >>> placer = RandomSearchPlacer(budget=20)
        >>> placer
        RandomSearchPlacer(budget=20, batch=64, block_fraction=0.25, start='auto')
        >>> placer.place(fork_graph(), load_cluster("k80x2"), seed=0).devices.shape
        (4,)
    """

    name = "random_search"
    accepts = frozenset({"timer", "budget"})
    uses = ("auto",)  # its default start

    def __init__(
        self, budget: int = 1000, batch: int = 64, block_fraction: float = 0.25, start: str | None = "auto",
        timer: StepTimer | None = None, progress: bool | None = None,
    ) -> None:
        if not (is_whole(budget) and is_whole(batch)) or budget < 1 or batch < 1:
            raise InvalidArgument(
                f"RandomSearchPlacer needs integers budget >= 1 and batch >= 1, got budget={budget!r}, batch={batch!r}"
            )
        check_budget(budget, "RandomSearchPlacer")  # and at most MAX_BUDGET: a larger one would run until killed
        if not is_number(block_fraction) or not 0.0 <= block_fraction <= 1.0:
            raise InvalidArgument(f"RandomSearchPlacer: block_fraction must be in [0, 1], got {block_fraction!r}")
        self.budget = int(budget)
        self.batch = int(batch)
        self.block_fraction = float(block_fraction)
        if start is not None:
            from gnplace.placers.registry import PLACERS  # deferred: the registry names this module

            PLACERS.resolve(start, where="RandomSearchPlacer: start")  # misspelt: refused here, not after the run began
        self.start = start
        self.timer = timer or Simulator()
        self.progress = progress
        self.last_trace: list[tuple[int, float, float]] = []

    def __repr__(self) -> str:
        return (
            f"RandomSearchPlacer(budget={self.budget}, batch={self.batch}, block_fraction={self.block_fraction}, "
            f"start={self.start!r})"
        )

    def place(self, graph: OpGraph, cluster: Cluster, *, seed: SeedLike = None) -> Placement:
        """Place ``graph`` on ``cluster`` with exactly ``budget`` timer evaluations.

        Args:
            graph (OpGraph): the graph.
            cluster (Cluster): the devices.
            seed (int, np.random.Generator or None, optional): seed of the random draws (default: None).

        Returns:
            Placement: the best placement scored; every colocation group on one device.
        """
        check_graph_and_cluster(graph, cluster)
        rng = as_generator(seed)
        if graph.num_groups == 0:
            return Placement(np.zeros(0, dtype=np.int64), cluster, GraphKey.of(graph))
        scorer = BudgetedTimer(self.timer, self.budget)
        structured = self._structured(graph, cluster, rng)[: self.budget]
        for start in range(0, structured.shape[0], self.batch):
            scorer.time_groups(graph, cluster, structured[start : start + self.batch])
        order = group_order(graph)
        with evaluation_bar(f"{self.name} {graph.name}", self.budget, self.progress) as advance_to:
            while scorer.remaining:
                size = min(self.batch, scorer.remaining)
                scorer.time_groups(graph, cluster, self._draw(order, cluster.num_devices, size, rng))
                advance_to(scorer.evaluations)
        best = best_repaired(graph, cluster, scorer, self.timer)  # never OOM where a repair fits
        self.last_trace = scorer.trace
        return best

    def _structured(self, graph: OpGraph, cluster: Cluster, rng: np.random.Generator) -> np.ndarray:
        work = group_times(graph, self.timer.cost_model.op_times(graph, cluster))
        fastest = np.argsort(work.sum(axis=0), kind="stable")
        mean_work = work.mean(axis=1)
        blocks = [equal_work_blocks(graph, mean_work, fastest[:m]) for m in range(2, cluster.num_devices + 1)]
        first = []
        if self.start is not None:
            from gnplace.placers.registry import make_placer  # deferred: the registry names this module

            placer = make_placer(self.start, timer=self.timer)
            if self.progress is False and hasattr(placer, "progress"):  # --no-progress reaches a search it starts from
                placer.progress = False
            start = placer.place(graph, cluster, seed=rng)
            first = [start.group_devices(graph)[None, :]]
        return np.vstack([*first, baseline_candidates(graph, cluster), *[b[None, :] for b in blocks]])

    def _draw(self, order: np.ndarray, num_devices: int, size: int, rng: np.random.Generator) -> np.ndarray:
        num_groups = order.shape[0]
        draws = rng.integers(0, num_devices, size=(size, num_groups))
        is_block = rng.random(size) < self.block_fraction
        for row in np.flatnonzero(is_block):
            # random cuts of the groups in topological order, one random distinct device per block
            parts = int(rng.integers(2, num_devices + 1)) if num_devices > 1 else 1
            parts = min(parts, num_groups)
            cuts = np.sort(rng.choice(np.arange(1, num_groups), size=parts - 1, replace=False))
            devices = rng.permutation(num_devices)[:parts]
            draws[row, order] = devices[np.searchsorted(cuts, np.arange(num_groups), side="right")]
        return draws
