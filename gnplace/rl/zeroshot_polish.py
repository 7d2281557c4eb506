"""``policy``'s polish: simulated annealing from its best candidate, over the module map first where one is coarse.

:func:`anneal` runs the chain from the best candidate and keeps its best where it is better; before it, on a graph
whose colocation groups are calls of a few modules (:func:`module_units`), :func:`anneal_module_map` anneals over the
module map from ``single``, hot, so that it takes the first of two moves that only gain together.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from gnplace.cluster import Cluster
from gnplace.graph import OpGraph
from gnplace.placement import GraphKey, Placement
from gnplace.rl.zeroshot_timers import ReportingTimer
from gnplace.sim.timer import StepTimer

__all__ = ["MODULE_CHAIN_TEMPERATURE", "module_units", "start_stands", "anneal", "anneal_module_map"]


#: The module chain's :math:`T_0`, relative to its start's step (annealing revision 3's).
MODULE_CHAIN_TEMPERATURE = 0.05


def module_units(graph: OpGraph) -> np.ndarray | None:
    """Each op's unit of the module map: its colocation group's module, ``[num_ops]``, or None where that is not coarse.

    A group's module is that of its first op in topological order (as annealing's sibling moves read it), so a
    unit is a union of whole groups: every call of one module, a recurrent cell's node at every time step. Ops
    outside any module are one unit. None where the map has more than half as many units as the graph has groups
    (a feed-forward net, whose modules are called once: annealing over groups already moves them) or fewer than two.
    """
    from gnplace.placers.base import group_first_ops

    modules = [graph.module[v] for v in group_first_ops(graph).tolist()]
    index = {module: k for k, module in enumerate(dict.fromkeys(modules))}
    if not 2 <= len(index) <= graph.num_groups // 2:
        return None
    return np.asarray([index[module] for module in modules], dtype=np.int64)[graph.group]


def start_stands(over: float, best: float, fits: bool, step: float | None) -> bool:
    """Whether a chain's best (its overflow past memory ``over``, ``best`` seconds) leaves the start as it is.

    It does where it overflows, or where the start (``step`` seconds) fits and is at least as fast.
    """
    return over > 0 or (fits and step is not None and best >= step)


def anneal(
    timer: StepTimer, graph: OpGraph, cluster: Cluster, start: Placement, fits: bool, seed: int, step: float | None,
    choice: str, *, polish: int, reheat: bool, module_chain: int = 0, report: Callable[[int], None] | None = None,
) -> tuple[Placement, float | None, str, int]:
    """``polish`` evaluations of annealing from ``start``, the best candidate (of ``step`` seconds, ``choice``).

    First, where ``module_chain`` (:meth:`~gnplace.rl.zeroshot.PolicyPlacer.module_chain_evaluations`) is not 0,
    that many of the module chain (:func:`anneal_module_map`), whose best becomes the start where it is better.
    Returns the placement (the chain's where better: faster and fitting, or fitting where ``start`` did not,
    ``fits``), its step and choice, and the evaluations spent. The chain times its start again, counted: one of its
    ``polish`` evaluations; fewer than 2 cannot anneal, and none is run. ``reheat``: whether the chain restarts hot
    from its best when it stalls, as annealing's default chain does. Every timing is ``timer``'s; ``report`` is
    called with the chains' evaluations so far after each timing (default: nothing).
    """
    from gnplace.placers.annealing import AnnealingPlacer, GivenStart

    spent = 0
    if module_chain:
        start, step, choice, fits, spent = anneal_module_map(timer, graph, cluster, module_chain, start, fits, seed,
                                                             step, choice, report)
    if polish < 2:
        return start, step, choice, spent
    before = spent
    # the chain's own timings and any repair of its result
    counted = ReportingTimer(timer, None if report is None else lambda done: report(before + done))
    chain: dict[str, Any] = {} if reheat else {"reheat_after": None}  # {}: annealing's default
    AnnealingPlacer(budget=polish, start=GivenStart(start), timer=counted, progress=False,
                    **chain).place(graph, cluster, seed=seed)
    over, best = counted.best_key  # the best placement the chain timed (fitting first), and its step
    annealed = counted.best_placement(cluster)
    spent += counted.evaluations
    if annealed is None or start_stands(over, best, fits, step):
        return start, step, choice, spent
    return annealed, float(best), f"{choice}, annealed", spent


def anneal_module_map(
    timer: StepTimer, graph: OpGraph, cluster: Cluster, budget: int, start: Placement, fits: bool, seed: int,
    step: float | None, choice: str, report: Callable[[int], None] | None = None,
) -> tuple[Placement, float | None, str, bool, int]:
    """``budget`` evaluations of annealing over the module map of ``graph`` (:func:`module_units`), the module chain.

    The chain starts from ``single`` (each device alone, :math:`D` of its evaluations) at
    :data:`MODULE_CHAIN_TEMPERATURE`, seeded apart from the polish. Returns the polish's start: the chain's best
    where it fits and is faster than ``start`` (or ``start`` does not fit), with its step, choice ``"modules"``
    and True; else ``start`` as given; then the evaluations spent.
    """
    from gnplace.placers.annealing import AnnealingPlacer

    units = module_units(graph)
    assert units is not None  # module_chain_evaluations said it runs
    counted = ReportingTimer(timer, report)
    chain = AnnealingPlacer(budget=budget, start="single", timer=counted,
                            initial_temperature=MODULE_CHAIN_TEMPERATURE, progress=False)
    chain.place(graph.replace(group=units), cluster, seed=np.random.default_rng([seed, 1]))
    over, best = counted.best_key
    if counted.best is None or start_stands(over, best, fits, step):
        return start, step, choice, fits, counted.evaluations
    found = Placement(np.asarray(counted.best), cluster, GraphKey.of(graph))
    return found, float(best), "modules", True, counted.evaluations
