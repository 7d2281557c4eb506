"""``exact``: an optimal placement and schedule of a small graph with the CP-SAT solver.

In the style of Pesto (Hafeez, Sun, Wang, Agarwal & Sekar, "Towards Optimal Placement and Scheduling
of DNN Operations with Pesto", Middleware 2021, https://doi.org/10.1145/3464298.3476132), placement
and schedule are one constraint program, solved with OR-Tools CP-SAT (Perron & Didier,
https://developers.google.com/optimization). With :math:`x_{gk} \\in \\{0,1\\}` group :math:`g` on
device :math:`k`, :math:`s_v` the start and :math:`t_{vk}` the duration (ticks) of op :math:`v`:

.. math::
    \\min T \\quad\\text{s.t.}\\quad \\textstyle\\sum_k x_{gk} = 1, \\qquad
    \\text{NoOverlap}_k\\{[s_v, s_v + t_{vk}) : x_{g(v)k}\\}, \\qquad
    e_v = s_v + \\textstyle\\sum_k t_{vk} x_{g(v)k} \\le T,

    s_w \\ge e_v + \\delta_{vw}^{ab} \\ \\text{if}\\ x_{g(v)a} \\wedge x_{g(w)b}
    \\quad \\text{for each edge } (v, w), \\qquad
    \\textstyle\\sum_g P_g x_{gk} + \\text{live activations}_k(t) \\le C_k \\ \\forall t

where :math:`\\delta^{ab}_{vw}` is the latency plus bytes over bandwidth of the link :math:`a \\to b`
(0 when :math:`a = b`), :math:`P_g` the resident parameter bytes of group :math:`g` and :math:`C_k` the
capacity of device :math:`k` (a cumulative constraint over activation lifetimes). Ops of one group
share one set of literals :math:`x_g`, so colocation holds by construction. With
``link_contention`` each output also becomes a task on the link to each device that consumes it,
one transfer at a time per ordered pair, as in the simulator; without it transfers are pure delays.

The solver picks the best *order* of ops on each device; the simulator (like TensorFlow and
PyTorch) runs ready ops first come, first served, so the simulated step time of the solver's
placement can exceed its makespan. Pesto enforces its order with control edges; gnplace returns a
placement only, so by default (``select="simulator"``) it returns the placement that simulates fastest
of a descent from each of the solver's solutions (its final one and the others of its pool of best
solutions) and the ``single``/``round_robin`` baselines, moving one colocation group at a time while a
move is faster by the timer (fits first; when none fits the timer's memory, which the model's count in
its own schedule can miss, it is repaired). On 80 random graphs of 5-7 ops on 2-3 devices that is the
brute-force optimum of the simulator in all 80; the solver's solutions and the baselines alone were up to
1.26 times it on 4.
The descent then goes on from where each start's stopped with two groups moved at once and the groups
of two devices exchanged: where the solver proves no optimum (its time limit, often on memory-tight
graphs), at ``time_limit=0.2`` single moves stopped at 1.007-1.469 times the brute-force optimum on 5 of
40 memory-tight graphs of 10-12 ops on 2-4 devices whose ops run 100 times slower off their home device
(27 of the 40 not proved optimal), and the wider descent reaches the optimum on all 40. The starts are
not every improving solution CP-SAT reports as it searches: its parallel tasks report them as their
threads run, so which are reported depends on the machine's load. Before revision 6 the descent started
from those, and went wide only where no optimum was proved; from the final solution and the pool, single
moves stopped at 1.005-1.010 times the older result on 2 of 70 graphs (54 layered graphs of 10-18 ops
and ``bench.py exact``'s 16; ``ptb_002@12`` on ``k80x2``: 5.598 ms, not 5.540), and the wide descent
returns the older result on all 70.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import time
import warnings

import numpy as np

from gnplace.cluster import Cluster
from gnplace.exceptions import InfeasiblePlacement, InvalidArgument, UnsupportedGraph
from gnplace.graph import OpGraph
from gnplace.limits import finite_number, is_whole
from gnplace.placement import GraphKey, Placement, check_graph_and_cluster
from gnplace.placers._search import baseline_candidates
from gnplace.placers.base import check_flag
from gnplace.placers.groups import repair_placement
from gnplace.seed import SeedLike, as_generator
from gnplace.sim.costmodel import DEFAULT_COSTS, CostModel
from gnplace.sim.simulator import Simulator
from gnplace.sim.timer import BudgetedTimer, StepTimer, overflow

__all__ = ["ExactPlacer", "MAX_MODEL_TERMS", "brute_force", "delay_model"]

#: Largest model :class:`ExactPlacer` builds, in terms: ops x devices plus edges between colocation groups x ordered
#: device pairs (an op's interval on each device, an edge's delay for each pair its ends may sit on). Measured on a
#: 2-core machine with the 994 ops and 510 such edges of ``nmt_031``: on 16 devices, 138,000 terms, 5 s to build
#: 544,000 CP-SAT constraints, then no solution in the default 30 deterministic units (337 s, 1.0 GiB peak); on 32,
#: 538,000 terms, 36 s and 0.8 GiB to build 2.1 million constraints before any solve. About 6 KiB a term with the
#: solver: the cap keeps a model near 3 GiB, under the 8 GiB limit of ``comparator.MAX_UPDATE_BYTES``.
MAX_MODEL_TERMS = 500_000
#: Most bytes per ``[num_edges, D, D]`` entry :func:`delay_model` holds at once: the float64 delays and the int64 ticks.
DELAY_BYTES_PER_ENTRY = 16


def delay_model(
    graph: OpGraph, cluster: Cluster, *, time_unit: float = 1e-9, cost_model: CostModel = DEFAULT_COSTS
) -> tuple[np.ndarray, np.ndarray]:
    """Op durations and edge transfer delays of the solver's model, in integer ticks of ``time_unit``.

    Durations are the cost model's op times (it decides launch overheads); a transfer over edge
    ``(v, w)`` from device ``a`` to ``b`` takes :meth:`~gnplace.sim.costmodel.CostModel.edge_delays`:
    the link's latency plus the edge's bytes over its bandwidth (with Placeto's shared channel,
    bytes over the channel, whose device also idles ``cost_model.op_gap`` seconds after each op; the
    solver keeps the device busy for that gap).

    Args:
        graph (OpGraph): the graph.
        cluster (Cluster): the devices.
        time_unit (float, optional): seconds per tick (default: 1e-9).
        cost_model (CostModel, optional): the costs to model, usually the timer's ``cost_model``
            (default: :data:`~gnplace.sim.costmodel.DEFAULT_COSTS`).

    Returns:
        tuple[np.ndarray, np.ndarray]: int64 durations ``[num_ops, D]`` and delays
        ``[num_edges, D, D]`` (zero on the diagonal), rounded to the nearest tick.

    Examples:
        >>> from gnplace.toy import chain_graph
        >>> from gnplace.cluster import load_cluster
        >>> dur, delay = delay_model(chain_graph(2), load_cluster("k80x2"), time_unit=1e-6)
        >>> dur.shape, delay.shape, int(delay[0, 0, 1])  # 25 us + 4 MB at 7.6 GB/s
        ((2, 2), (1, 2, 2), 551)
    """
    seconds = cost_model.op_times(graph, cluster)
    per_edge = cost_model.edge_delays(graph, cluster)
    per_edge /= time_unit  # in place: no second float64 copy of [num_edges, D, D] (DELAY_BYTES_PER_ENTRY)
    np.rint(per_edge, out=per_edge)
    return np.rint(seconds / time_unit).astype(np.int64), per_edge.astype(np.int64)


def brute_force(
    graph: OpGraph, cluster: Cluster, *, timer: StepTimer | None = None, limit: int = 200_000
) -> Placement:
    """The best of all ``D ** num_groups`` group placements by step time (feasible first).

    Args:
        graph (OpGraph): a tiny graph.
        cluster (Cluster): the devices.
        timer (StepTimer, optional): scores placements (default: ``Simulator()``).
        limit (int, optional): most placements to enumerate (default: 200,000).

    Raises:
        UnsupportedGraph: if there are more than ``limit`` placements.

    Examples:
        >>> from gnplace.toy import chain_graph
        >>> from gnplace.cluster import load_cluster
        >>> brute_force(chain_graph(3), load_cluster("k80x2")).devices.tolist()  # transfers cost more than they save
        [0, 0, 0]
    """
    d, g = cluster.num_devices, graph.num_groups
    if d**g > limit:
        raise UnsupportedGraph(f"brute_force: graph {graph.name!r} has {d}^{g} placements, more than limit={limit}")
    scorer = BudgetedTimer(timer)
    rows = itertools.product(range(d), repeat=g)
    while chunk := list(itertools.islice(rows, 4096)):
        scorer.time_groups(graph, cluster, np.asarray(chunk, dtype=np.int64).reshape(len(chunk), g))
    best = scorer.best_placement(cluster)
    assert best is not None
    return best


class ExactPlacer:
    """Solve placement and schedule of a small graph to optimality (or a proved gap) with CP-SAT.

    After :meth:`place`, these attributes describe the solve: ``last_status`` (``"optimal"``,
    ``"feasible"`` when the time limit stopped a solve with a solution, ``"unknown"`` when it
    stopped without one, or ``"infeasible"`` when the model's memory accounting admits no placement
    while a baseline fits; the baseline is returned; a model where some op fits no device, its group's parameters,
    inputs and output together, is infeasible without a search). The model counts memory in its own schedule,
    with demands rounded up, and the timer in its first-come-first-served one: a placement the model
    admits may still run out of memory on the timer, which is why the timer's verdict picks the
    placement returned among the solver's solutions and the baselines;
    ``last_objective_s`` (the solver's makespan, seconds; None if unknown),
    ``last_bound_s`` (its proved lower bound, seconds), ``last_gap`` (``(objective - bound) /
    objective``), ``last_model_step_time_s`` (timed step of the solver's placement),
    ``last_step_time_s`` and ``last_oom`` (the timer's verdict on the returned placement),
    ``last_solve_s`` (wall seconds of the whole call) and ``last_deterministic_time`` (CP-SAT's deterministic time
    spent, in the units of ``time_limit``; 0 where the solver did not run), ``last_wall_net`` (whether CP-SAT's
    wall-clock net, not its deterministic limit or a proof, ended the search: the status and placement may then depend
    on the machine's load; a :class:`RuntimeWarning` says so too). Objective and bound are exact for the model
    with op times rounded to ``time_unit``.

    Args:
        time_limit (float, optional): CP-SAT deterministic time the solver may run, not seconds: a budget in
            deterministic time keeps the result reproducible (default: 30.0). A call takes longer than
            ``time_limit`` seconds: wall seconds per unit depend on the machine and its load (1 to 4 on an
            idle 2-core machine; 14 on one shared with ten busy processes, where ptb_002@12 on k80x4 at
            ``time_limit=2`` spent 28.3 s in CP-SAT for 2.003 units and returned after 29.9 s); the
            search's running batch may end past the limit (1.8 units at ``time_limit=1`` on a memory-tight
            16-op model). A wall-clock net of ``1000 x time_limit + 60`` s
            (:func:`~gnplace.placers._exact_model.wall_net`) stops a search whose deterministic time stalls;
            ``last_wall_net`` and a :class:`RuntimeWarning` say when it did, as the result then depends on the load.
            Beside two busy processes a unit took 15 to 63 wall seconds (up to 114 measured before): the net of
            ``10 x time_limit + 30`` s before revision 5 came first there, and bench.py exact's results depended on
            the load. Before the solve come the baselines and the model's building (0.3 s on that 16-op model),
            after it the descent by the timer (1.1 s there; at most
            :data:`MOST_DESCENT_OP_PLACEMENTS`, about 10 s).
        max_groups (int, optional): most colocation groups accepted (default: 60).
        activation_memory (bool, optional): count live activations against memory, not only
            resident parameters (default: :obj:`True`).
        link_contention (bool, optional): model transfers as tasks on links, one at a time per
            ordered device pair; ignored (transfers stay delays) when the timer's cost model has
            Placeto's shared channel (default: :obj:`True`).
        select (str, optional): ``"simulator"`` returns the fastest by the timer of a descent
            (single-group moves) from each of the solver's solutions (its final one and its pool's, the same whatever
            the load) and the baselines, and ``auto``'s placement
            where the solver found none, going on with two-group moves and exchanges of two devices' groups (fits
            first; if none fits, that one repaired by :func:`~gnplace.placers.groups.repair_placement` where
            the repair fits); ``"model"`` returns the solver's final solution (default: ``"simulator"``).
        time_unit (float, optional): seconds per tick of the integer model; ``None`` picks the
            power of ten that puts a serial schedule near 10^7 ticks (default: ``None``).
        num_workers (int, optional): solver threads, interleaved deterministically, so the same
            inputs and ``seed`` give the same placement whatever the machine's load (default: 2).
        timer (StepTimer, optional): times the baselines, the solver's solutions and the result; op
            and transfer times of the model come from its cost model (default: ``Simulator()``).

    Examples:
        >>> from gnplace.toy import fork_graph
        >>> from gnplace.cluster import load_cluster
        >>> placer = ExactPlacer(time_limit=10)
        >>> p = placer.place(fork_graph(flops=1e11, out_bytes=1000), load_cluster("k80x2"), seed=0)
        >>> placer.last_status, len(set(p.devices[1:3].tolist()))  # the two branches run in parallel
        ('optimal', 2)
    """

    name = "exact"
    accepts = frozenset({"timer"})
    #: Changes when results under the same options change. 1 (2026-12-04): ``select="simulator"`` descends from each
    #: candidate by the simulator, and CP-SAT runs without its reduced_costs subsolver. 2 (2026-12-06): CP-SAT runs
    #: without its fixed subsolver too, in batches of one task per worker (a loaded machine no longer reaches the
    #: wall-clock net first). 3 (2026-12-06): where CP-SAT finds no solution, the descent starts from ``auto``'s
    #: placement too. 4 (2026-12-06): where CP-SAT proves no optimum, the descent goes on with two groups moved at once
    #: and two devices' groups exchanged (never slower: it only adds placements timed). 5 (2026-12-06): CP-SAT's
    #: wall-clock net is 1000 x ``time_limit`` + 60 s, not 10 x + 30 (a loaded machine reached that first, and the
    #: result depended on the load), and ``last_wall_net`` says when it ended the search. 6 (2026-12-06): the descent
    #: starts from CP-SAT's final solution and the other placements of its solution pool, not from every improving
    #: solution its callback was handed: two tasks of a batch report solutions as their threads run, so which were
    #: reported, and the placement returned, depended on the load (nmt_004@12 on k80x4: 47 or 50 solutions, 46.3206 or
    #: 46.3149 ms); the descent goes on with two groups moved at once and exchanges whether or not CP-SAT proved an
    #: optimum (single moves from those starts stopped at 5.598 ms on ptb_002@12 on k80x2, not the 5.540 of before).
    revision = "6"

    def __init__(
        self,
        time_limit: float = 30.0,
        max_groups: int = 60,
        activation_memory: bool = True,
        link_contention: bool = True,
        select: str = "simulator",
        time_unit: float | None = None,
        num_workers: int = 2,
        timer: StepTimer | None = None,
    ) -> None:
        whole = is_whole(num_workers)
        if not whole or not 1 <= num_workers <= 1024:
            raise InvalidArgument(f"ExactPlacer needs num_workers, solver threads, a whole number from 1 to 1024, "
                                  f"got {num_workers!r}")
        number = finite_number(time_limit)  # 10**400 was float()'s OverflowError traceback; infinity no limit at all
        groups_whole = is_whole(max_groups)
        if not (number and groups_whole) or not time_limit > 0 or max_groups < 1:
            raise InvalidArgument(f"ExactPlacer needs time_limit > 0 and a whole number max_groups >= 1, got "
                                  f"{time_limit!r}, {max_groups!r}")
        if select not in ("simulator", "model"):
            raise InvalidArgument(f"ExactPlacer: select must be 'simulator' or 'model', got {select!r}")
        unit_number = finite_number(time_unit)  # 10**400 passed, and was an OverflowError traceback when placing
        if time_unit is not None and not (unit_number and 0 < time_unit):
            raise InvalidArgument(f"ExactPlacer: time_unit must be positive seconds or None, got {time_unit!r}")
        self.time_limit = float(time_limit)
        self.max_groups = int(max_groups)
        # bool("no") was true: the flags are refused as make_placer refuses them, as the other placers do
        self.activation_memory = check_flag("ExactPlacer", "activation_memory", activation_memory)
        self.link_contention = check_flag("ExactPlacer", "link_contention", link_contention)
        self.select = select
        self.time_unit = time_unit
        self.num_workers = int(num_workers)
        self.timer = timer or Simulator()
        self.last_status: str | None = None
        self.last_objective_s: float | None = None
        self.last_bound_s: float | None = None
        self.last_gap: float | None = None
        self.last_model_step_time_s: float | None = None
        self.last_step_time_s: float | None = None
        self.last_oom: bool | None = None
        self.last_solve_s: float | None = None
        self.last_deterministic_time: float | None = None
        self.last_wall_net: bool | None = None

    def __repr__(self) -> str:
        return (
            f"ExactPlacer(time_limit={self.time_limit}, max_groups={self.max_groups}, activation_memory="
            f"{self.activation_memory}, link_contention={self.link_contention}, select={self.select!r}, "
            f"time_unit={self.time_unit}, num_workers={self.num_workers})"
        )

    def place(self, graph: OpGraph, cluster: Cluster, *, seed: SeedLike = None) -> Placement:
        """An optimal placement of ``graph`` on ``cluster`` under the delay model, or the best found in time.

        Args:
            graph (OpGraph): a graph of at most ``max_groups`` colocation groups.
            cluster (Cluster): the devices.
            seed (int, np.random.Generator or None, optional): seed of the solver (default: None).

        Raises:
            UnsupportedGraph: if the graph has more than ``max_groups`` colocation groups, if its transfer
                delays would take more than ``comparator.MAX_UPDATE_BYTES`` (8 GiB) to build, or if its model
                would have more than :data:`MAX_MODEL_TERMS` terms; checked before anything is built.
            InfeasiblePlacement: if no placement fits in the devices' memory.
        """
        check_graph_and_cluster(graph, cluster)
        if graph.num_groups > self.max_groups:
            raise UnsupportedGraph(
                f"graph {graph.name!r} has {graph.num_groups} colocation groups, more than ExactPlacer's "
                f"max_groups={self.max_groups}; coarsen it (gnplace.coarsen) or use a search placer such as 'annealing'"
            )
        _check_model_size(graph, cluster)
        self._check_parameters_fit(graph, cluster)
        from gnplace.placers._exact_model import solve  # deferred: importing ortools takes half a second

        began = time.perf_counter()
        costs = self.timer.cost_model
        baselines = BudgetedTimer(self.timer)  # single and round robin: the hint and the fallback
        if graph.num_groups:
            baselines.time_groups(graph, cluster, baseline_candidates(graph, cluster))
        baseline = baselines.best_placement(cluster)
        unit = self.time_unit or _auto_unit(graph, cluster, costs)
        ticks, most = _serial_seconds(graph, cluster, costs) / unit, _most_ticks(graph, cluster)
        if not ticks <= most:  # CP-SAT sums its variables' domains in 64 bits: a RuntimeError's traceback
            raise InvalidArgument(f"ExactPlacer: time_unit={unit:g} s makes the slowest serial step {ticks:.3g} "
                                  f"ticks, more than this model's {most:.3g} (CP-SAT sums its times in 64 bits): give "
                                  "a coarser time_unit (the default puts the step near 1e7 ticks)")
        dur, delay = delay_model(graph, cluster, time_unit=unit, cost_model=costs)
        outcome = solve(
            graph, cluster, dur, delay,
            activation_memory=self.activation_memory,
            link_contention=self.link_contention and not costs.shared_channel,
            op_gap=round(costs.op_gap / unit),
            symmetric=_interchangeable(cluster, dur),
            hint=baseline.group_devices(graph) if baseline is not None and baselines.best_key[0] == 0 else None,
            time_limit=self.time_limit,
            num_workers=self.num_workers,
            random_seed=int(as_generator(seed).integers(2**31 - 1)),
        )
        repaired, heuristic = None, None
        if not outcome.solutions and baselines.best_key[0] > 0 and baseline is not None:
            # the model counts memory conservatively (demands rounded up, capacities down), so it can refuse
            # what fits the timer's count exactly (or the time limit ends with no solution): the best baseline
            # with groups moved off overflowing devices
            fixed, _, repaired = repair_placement(graph, cluster, baseline.devices, self.timer)
            if repaired is not None:
                baseline = Placement(fixed, cluster, GraphKey.of(graph))  # chosen: the solver found nothing
            else:  # an exact fit (two devices filled to the byte) that neither finds: the memory-aware heuristics'
                found = heuristic = self._auto(graph, cluster, seed)
                timed = self.timer.time(graph, cluster, found)
                if not timed.is_oom:
                    baseline, repaired = found, timed.step_time
        if outcome.status == "infeasible" and repaired is None and baselines.best_key[0] > 0:
            # (where a baseline fits the timer's memory, it is returned rather than this error)
            raise InfeasiblePlacement(
                f"no placement of graph {graph.name!r} fits the memory of cluster {cluster.name!r}, by the solver's "
                f"count or any baseline's (parameters{' and live activations' if self.activation_memory else ''} "
                "exceed it); use devices with more memory"
            )
        solver = BudgetedTimer(self.timer)
        if outcome.solutions:  # the final solution first, so that it wins ties
            solver.time_groups(graph, cluster, np.stack(outcome.solutions[::-1]))
        chosen: Placement | None
        if self.select == "model" and outcome.solutions:
            chosen = Placement.from_groups(graph, cluster, outcome.solutions[-1])
        elif solver.best is not None and solver.best_key <= baselines.best_key:
            chosen = solver.best_placement(cluster)
        else:
            chosen = baseline
        nothing = Placement(np.zeros(0, dtype=np.int64), cluster, GraphKey.of(graph))  # a graph without groups
        placement = chosen if chosen is not None else nothing
        if self.select == "simulator" and chosen is not None and cluster.num_devices > 1 and graph.num_groups \
                and not chosen.splits_groups(graph):
            starts = [chosen.group_devices(graph), *outcome.solutions[::-1], *baseline_candidates(graph, cluster)]
            if not outcome.solutions:  # the solver found nothing: the baselines' descents alone were up to 1.13x auto's
                heuristic = self._auto(graph, cluster, seed) if heuristic is None else heuristic
                if not heuristic.splits_groups(graph):
                    starts.append(heuristic.group_devices(graph))
            placement = _descend(graph, cluster, np.stack(starts), self.timer, wide=True)
        result = self.timer.time(graph, cluster, placement)
        if result.is_oom and self.select == "simulator":
            # the model's memory count (its own schedule) admitted a placement the timer's overflows, and no
            # baseline fits: moving groups off the overflowing devices often fits, as the other placers do
            fixed, _, step = repair_placement(graph, cluster, placement.devices, self.timer)
            if step is not None:
                placement = Placement(fixed, cluster, GraphKey.of(graph))
                result = self.timer.time(graph, cluster, placement)
        self.last_status = outcome.status
        self.last_objective_s = None if outcome.objective is None else outcome.objective * unit
        self.last_bound_s = outcome.bound * unit
        self.last_gap = outcome.gap
        self.last_deterministic_time = outcome.deterministic_time
        self.last_wall_net = outcome.wall_net_hit
        if outcome.wall_net_hit:
            self._warn_of_the_net(graph, outcome.status, outcome.deterministic_time)
        self.last_model_step_time_s = None
        if outcome.solutions:
            model_placement = Placement.from_groups(graph, cluster, outcome.solutions[-1])
            self.last_model_step_time_s = self.timer.time(graph, cluster, model_placement).step_time
        self.last_step_time_s = result.step_time
        self.last_oom = result.is_oom
        self.last_solve_s = time.perf_counter() - began
        return placement

    def _warn_of_the_net(self, graph: OpGraph, status: str, spent: float) -> None:
        """Say that CP-SAT's wall-clock net, not its deterministic limit, ended the search (``spent``: units)."""
        from gnplace.placers._exact_model import wall_net

        warnings.warn(
            f"ExactPlacer: CP-SAT reached its wall-clock net ({wall_net(self.time_limit):g} s) on graph {graph.name!r} "
            f"after {spent:.3g} of time_limit={self.time_limit:g} deterministic units: its result ({status!r}) may "
            "depend on the machine's load", RuntimeWarning, stacklevel=3)

    def _auto(self, graph: OpGraph, cluster: Cluster, seed: SeedLike) -> Placement:
        """``auto``'s placement (the memory-aware heuristics' best by the timer): a start if the solver finds none."""
        from gnplace.placers.auto import AutoPlacer

        return AutoPlacer(timer=self.timer).place(graph, cluster, seed=seed)

    def _check_parameters_fit(self, graph: OpGraph, cluster: Cluster) -> None:
        per_group = np.bincount(graph.group, weights=graph.param_bytes, minlength=graph.num_groups)
        capacity = cluster.memory
        if per_group.size and per_group.max() > capacity.max():
            g = int(per_group.argmax())
            raise InfeasiblePlacement(
                f"colocation group {g} of graph {graph.name!r} holds {int(per_group[g])} bytes of parameters, more "
                f"than the largest device of cluster {cluster.name!r} ({int(capacity.max())} bytes)"
            )
        if per_group.sum() > capacity.sum():
            raise InfeasiblePlacement(
                f"graph {graph.name!r} holds {int(per_group.sum())} bytes of parameters, more than all devices of "
                f"cluster {cluster.name!r} together ({int(capacity.sum())} bytes)"
            )


#: Most ops x placements :func:`_descend` times, all starts together (each round of one start times ``num_groups x
#: (D - 1)`` placements): about 1 us each on a 2-core machine (210 us a placement of 195 ops), so 10 s at most.
MOST_DESCENT_OP_PLACEMENTS = 10_000_000


def _descend(
    graph: OpGraph, cluster: Cluster, starts: np.ndarray, timer: StepTimer, *, wide: bool = False
) -> Placement:
    """The best placement by ``timer`` of a descent from each of ``starts`` (group placements ``[S, num_groups]``).

    The solver orders the ops on each device as it likes; the timer runs them in the order they become
    ready (ops ready at once by index), so the solver's optimum need not be the placement the timer finds
    fastest: four ops without inputs on one device, the last of which feeds the other device, the solver
    runs that one first and the simulator last (11.5 ms where the solver counts 7.5, and another placement
    times 8.0). From each start in turn, each round times every move of one colocation group to another
    device and takes the best while it is strictly better (fits first, then step seconds), until no move
    helps, a placement already descended from is reached, or :data:`MOST_DESCENT_OP_PLACEMENTS` are spent.
    With ``wide``, the end of each start's descent (best first) then descends on with :func:`_wide_moves` too
    (two groups moved at once, two devices' groups exchanged), within the same budget (:class:`ExactPlacer` always
    asks for it): after a solve that proved no optimum, single moves stopped at up to 1.47 times the brute-force
    optimum on memory-tight graphs, where a group can often move only once another has made room. It only adds
    placements timed, so it never returns a slower placement than without it. Among equals the earlier wins:
    ``starts[0]`` unless something is strictly better.
    """
    d, g = cluster.num_devices, graph.num_groups
    scorer = BudgetedTimer(timer, budget=max(MOST_DESCENT_OP_PLACEMENTS // max(graph.num_ops, 1), len(starts)))
    timed = scorer.time_groups(graph, cluster, starts)
    keys = list(zip(overflow(timed.peak_memory, cluster.memory).tolist(), timed.step_time.tolist()))
    visited: set[bytes] = set()
    ends: list[tuple[tuple[float, float], np.ndarray]] = []  # where each start's descent stopped
    for current, key in zip(starts, keys):
        while current.tobytes() not in visited and g * (d - 1) <= (scorer.remaining or 0):
            visited.add(current.tobytes())
            moves = _single_moves(current, d)
            found = _best_move(graph, cluster, scorer, moves, key)
            if found is None:
                break
            current, key = found
        ends.append((key, current))
    if wide:
        wider: set[bytes] = set()
        per_round = g * (d - 1) + g * (g - 1) // 2 * (d - 1) ** 2 + d * (d - 1) // 2
        for key, current in sorted(ends, key=lambda end: end[0]):
            while current.tobytes() not in wider and per_round <= (scorer.remaining or 0):
                wider.add(current.tobytes())
                moves = np.concatenate([_single_moves(current, d), _wide_moves(current, d)])
                found = _best_move(graph, cluster, scorer, moves, key)
                if found is None:
                    break
                current, key = found
    best = scorer.best_placement(cluster)
    assert best is not None
    return best


def _best_move(
    graph: OpGraph, cluster: Cluster, scorer: BudgetedTimer, moves: np.ndarray, key: tuple[float, float]
) -> tuple[np.ndarray, tuple[float, float]] | None:
    """The best of ``moves`` (group placements ``[M, num_groups]``) by ``scorer``, and its key.

    The key is (overflow, step seconds), as :func:`_descend` compares them; ``None`` if no move is strictly better
    than ``key``.
    """
    result = scorer.time_groups(graph, cluster, moves)
    over = overflow(result.peak_memory, cluster.memory)
    i = int(np.lexsort((result.step_time, over))[0])
    found = (float(over[i]), float(result.step_time[i]))
    return (moves[i], found) if found < key else None


def _single_moves(current: np.ndarray, d: int) -> np.ndarray:
    """Every placement one group of ``current`` (``[num_groups]``) away on ``d`` devices: ``[G x (d - 1), G]``."""
    rows = np.arange(current.size * (d - 1))
    moved, shift = rows // (d - 1), rows % (d - 1) + 1
    moves = np.repeat(current[None, :], rows.size, axis=0)
    moves[rows, moved] = (current[moved] + shift) % d
    return moves


def _wide_moves(current: np.ndarray, d: int) -> np.ndarray:
    """Every placement two groups of ``current`` away, then every exchange of the groups of two devices.

    ``current`` is ``[G]`` groups' devices of ``d``; the result ``[G (G - 1) / 2 x (d - 1)^2 + d (d - 1) / 2, G]``.
    """
    first, second = np.triu_indices(current.size, 1)
    shifts = np.arange(1, d)
    a, b = np.repeat(shifts, d - 1), np.tile(shifts, d - 1)  # every pair of shifts
    i, j = np.repeat(first, a.size), np.repeat(second, a.size)
    sa, sb = np.tile(a, first.size), np.tile(b, first.size)
    pairs = np.repeat(current[None, :], i.size, axis=0)
    rows = np.arange(i.size)
    pairs[rows, i] = (current[i] + sa) % d
    pairs[rows, j] = (current[j] + sb) % d
    x, y = np.triu_indices(d, 1)
    swaps = np.repeat(current[None, :], x.size, axis=0)
    for r, (u, v) in enumerate(zip(x.tolist(), y.tolist())):
        swaps[r, current == u], swaps[r, current == v] = v, u
    return np.concatenate([pairs, swaps])


def _check_model_size(graph: OpGraph, cluster: Cluster) -> None:
    """Refuse in one line a model too large to build: its delays in bytes, then its terms (:data:`MAX_MODEL_TERMS`).

    The model is per op, whatever the number of colocation groups: a graph of few groups but many ops, or
    one on many devices, would build gigabytes of delays and a model CP-SAT cannot solve. Both limits are
    read when called (``comparator.MAX_UPDATE_BYTES``, 8 GiB, as the learned placers use).

    Raises:
        UnsupportedGraph: naming the size, the limit and what to do (coarsen, fewer devices, a search placer).
    """
    from gnplace.rl import comparator  # the library's one memory limit

    d, edges = cluster.num_devices, graph.num_edges
    remedy = "coarsen it (gnplace.coarsen), use fewer devices, or use a search placer such as 'annealing'"
    delay_bytes, limit = DELAY_BYTES_PER_ENTRY * edges * d * d, comparator.MAX_UPDATE_BYTES
    if delay_bytes > limit:
        raise UnsupportedGraph(
            f"ExactPlacer: the transfer delays of the {edges} edges of graph {graph.name!r} between {d} devices "
            f"would take about {delay_bytes / 2**30:.1f} GiB to build, over the {limit / 2**30:g} GiB limit; {remedy}"
        )
    terms, between_groups = _model_terms(graph, cluster)
    if terms > MAX_MODEL_TERMS:
        raise UnsupportedGraph(
            f"ExactPlacer: graph {graph.name!r} on {d} devices makes a model of {terms:,} terms ({graph.num_ops} ops "
            f"x {d} devices + {between_groups} edges between colocation groups x {d * (d - 1)} device pairs), more "
            f"than MAX_MODEL_TERMS={MAX_MODEL_TERMS:,}, too large to build and solve; {remedy}"
        )


def _most_ticks(graph: OpGraph, cluster: Cluster) -> float:
    """The most ticks the slowest serial step may take: 2**62 over eight variables a model term.

    CP-SAT refuses a model whose variables' domains sum past int64 (measured: 98 ops on 2 devices
    solve at 2.8e15 ticks and are refused at 2.8e16); the terms are :func:`_check_model_size`'s.
    """
    return 2.0**62 / (8 * _model_terms(graph, cluster)[0] + 8)


def _model_terms(graph: OpGraph, cluster: Cluster) -> tuple[int, int]:
    """The model's terms (ops x devices + edges between colocation groups x ordered device pairs), and those edges."""
    d = cluster.num_devices
    between_groups = int(np.count_nonzero(graph.group[graph.edge_src] != graph.group[graph.edge_dst]))
    return graph.num_ops * d + between_groups * d * (d - 1), between_groups


def _serial_seconds(graph: OpGraph, cluster: Cluster, costs: CostModel) -> float:
    """Seconds of the slowest placement run serially: every op at its slowest, every edge over the slowest link."""
    serial = float(costs.op_times(graph, cluster).max(axis=1).sum())
    return serial + float(np.sum(cluster.latency.max() + graph.edge_bytes / cluster.bandwidth.min()))


#: Fewest ticks the fastest device's serial step may take under the automatic unit before a finer one is sought.
FINEST_SERIAL_TICKS = 1e3


def _auto_unit(graph: OpGraph, cluster: Cluster, costs: CostModel) -> float:
    """Power of ten (seconds) that puts the serial makespan of the slowest placement near 1e7 ticks.

    Where devices are so far apart in speed (10^4 times and more) that the fastest device's serial step
    takes under :data:`FINEST_SERIAL_TICKS` ticks of that unit, its ops rounded to no tick and the solver
    "proved optimal" placements the simulator times slower than heft's: the unit is then refined to put
    the fastest serial step near 1e7 ticks, as far as :func:`_most_ticks` lets the slowest one grow.
    """
    serial = _serial_seconds(graph, cluster, costs)
    if serial <= 0:
        return 1e-9
    unit = max(1e-12, 10.0 ** math.floor(math.log10(serial / 1e7)))
    fastest = float(costs.op_times(graph, cluster).min(axis=1).sum())
    if fastest <= 0 or fastest / unit >= FINEST_SERIAL_TICKS:
        return unit
    finest = 10.0 ** math.ceil(math.log10(serial / _most_ticks(graph, cluster)))  # the slowest step still fits
    return max(1e-12, finest, min(unit, 10.0 ** math.floor(math.log10(fastest / 1e7))))


def _interchangeable(cluster: Cluster, dur: np.ndarray) -> list[list[int]]:
    """Classes of devices any permutation of which maps the model to itself (same specs, same links)."""
    classes: list[list[int]] = []
    for k, device in enumerate(cluster.devices):
        for members in classes:
            j = members[-1]
            same = dataclasses.replace(device, name="") == dataclasses.replace(cluster.devices[j], name="")
            if same and np.array_equal(dur[:, k], dur[:, j]) and _swap_invariant(cluster, j, k):
                members.append(k)
                break
        else:
            classes.append([k])
    return [members for members in classes if len(members) > 1]


def _swap_invariant(cluster: Cluster, a: int, b: int) -> bool:
    perm = np.arange(cluster.num_devices)
    perm[[a, b]] = perm[[b, a]]
    return all(np.array_equal(m, m[np.ix_(perm, perm)]) for m in (cluster.bandwidth, cluster.latency))
