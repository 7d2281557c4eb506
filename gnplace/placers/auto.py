"""``auto``: the best of the fast placers for this graph and cluster, the reference every learned result meets.

No fast heuristic wins everywhere: on the shipped test graphs ``heft`` is usually best on identical
GPUs, but on heterogeneous clusters ``heft``, ``m_etf`` and ``m_sct`` can lose to a single device,
and ``expert`` or ``metis`` win some graphs. ``auto`` runs each of the fast placers (``single``,
``expert``, ``metis``, ``heft``, ``m_etf``, ``m_sct``; each well under a second on thousands of ops),
times their placements with its timer and returns the best: feasible placements by step time first,
then, when nothing fits, the least memory overflow. It is what a user should run when no learned
policy is at hand, and the reference of the policy's reward and of every learned figure.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from gnplace.cluster import Cluster
from gnplace.exceptions import InvalidArgument
from gnplace.graph import OpGraph
from gnplace.placement import Placement, check_graph_and_cluster
from gnplace.placers.base import Placer
from gnplace.seed import SeedLike
from gnplace.sim.simulator import Simulator
from gnplace.sim.timer import BudgetedTimer, StepTimer

__all__ = ["AutoPlacer", "FAST_PLACERS"]

#: The fast placers ``auto`` chooses among, in tie-breaking order.
FAST_PLACERS: tuple[str, ...] = ("single", "expert", "metis", "heft", "m_etf", "m_sct")


class AutoPlacer:
    """The best by the timer of the fast placers' placements (fits first, then the shortest step).

    Each candidate placer plans with the same timer (its cost model for estimates, the timer for
    memory checks); their placements are then timed together, one evaluation each. Ties go to the
    earlier candidate. After :meth:`place`, ``last_choice`` names the winner,
    ``last_step_times`` maps each candidate to its step time (seconds) and ``last_oom`` to whether it runs a
    device out of memory.

    Args:
        candidates (Sequence[str] or str, optional): registered placer names to choose among, or one
            name (default: :data:`FAST_PLACERS`).
        timer (StepTimer, optional): plans and times the candidates (default: ``Simulator()``).
        progress (bool or None, optional): False turns off the bars of candidates that show one (a search among
            them; ``--no-progress``); None leaves each its own default (default: None).

    Examples:
        >>> from gnplace.toy import mlp_training_graph
        >>> from gnplace.cluster import load_cluster
        >>> placer = AutoPlacer()
        >>> p = placer.place(mlp_training_graph(layers=4, width=1024, batch=256), load_cluster("k80x4"))
        >>> placer.last_choice in FAST_PLACERS, p.devices.shape
        (True, (26,))
    """

    name = "auto"
    accepts = frozenset({"timer"})
    uses = FAST_PLACERS  # a candidate's new revision is a new auto

    def __init__(
        self, candidates: Sequence[str] | str = FAST_PLACERS, timer: StepTimer | None = None,
        progress: bool | None = None,
    ) -> None:
        # one name is one candidate (``-O auto.candidates=heft``), not a candidate per letter
        if not isinstance(candidates, str | Iterable):  # null was "an option value of the wrong type ()", unnamed
            raise InvalidArgument(f"AutoPlacer: candidates must be a placer's name or a list of names, got "
                                  f"{candidates!r}")
        candidates = (candidates,) if isinstance(candidates, str) else tuple(candidates)
        if not candidates or "auto" in candidates:
            raise InvalidArgument(f"AutoPlacer needs candidate placers other than 'auto', got {candidates!r}")
        from gnplace.placers.registry import PLACERS  # deferred: the registry names this module

        for name in candidates:
            PLACERS.resolve(name, where="AutoPlacer: candidates")  # misspelt: refused here, not when placing
        self.candidates = candidates
        self.timer = timer or Simulator()
        self.progress = progress
        self.last_choice: str | None = None
        self.last_step_times: dict[str, float] = {}
        self.last_oom: dict[str, bool] = {}

    def __repr__(self) -> str:
        return f"AutoPlacer(candidates={self.candidates!r})"

    def place(self, graph: OpGraph, cluster: Cluster, *, seed: SeedLike = None) -> Placement:
        """Place ``graph`` with every candidate and return the best by the timer.

        Args:
            graph (OpGraph): the graph.
            cluster (Cluster): the devices.
            seed (int, np.random.Generator or None, optional): passed to every candidate (default: None).
        """
        check_graph_and_cluster(graph, cluster)
        placements = [self._candidate(name).place(graph, cluster, seed=seed) for name in self.candidates]
        scorer = BudgetedTimer(self.timer)
        result = scorer.time_batch(graph, cluster, np.stack([p.devices for p in placements]))
        best = scorer.best
        assert best is not None
        index = next(i for i, p in enumerate(placements) if np.array_equal(p.devices, best))
        self.last_choice = self.candidates[index]
        self.last_step_times = {name: float(t) for name, t in zip(self.candidates, result.step_time.tolist())}
        self.last_oom = {name: bool(o) for name, o in zip(self.candidates, result.oom.tolist())}
        return placements[index]

    def _candidate(self, name: str) -> Placer:
        """The candidate placer ``name``, planning with the timer; ``progress=False`` reaches it (a search's bar)."""
        from gnplace.placers.registry import make_placer  # deferred: the registry names this module

        placer = make_placer(name, timer=self.timer)
        if self.progress is False and hasattr(placer, "progress"):
            placer.progress = False
        return placer
