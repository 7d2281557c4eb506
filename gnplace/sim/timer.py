"""``StepTimer``: how gnplace scores a placement, by simulation or on real devices.

Everything gnplace produces is an :class:`~gnplace.graph.OpGraph` placed on a
:class:`~gnplace.cluster.Cluster`; a :class:`StepTimer` says how long one training step of it takes.
The simulator (:class:`~gnplace.sim.simulator.Simulator`) is one timer, a real-device executor is
another, and every placer, search and learner takes ``timer=`` so that either scores it.

A timer implements :meth:`StepTimer.time`; :meth:`StepTimer.time_batch` times many placements of one
graph (a plain loop unless the timer has something faster, as the simulator does). A timer names the
:class:`~gnplace.sim.costmodel.CostModel` that describes it (``cost_model``): placers plan with op-time
estimates from that model, never from the timer.

:class:`BudgetedTimer` wraps any timer, counts the placements it times (one evaluation each),
refuses to go past a budget and remembers the best placement seen: the evaluation counter that
search, memory repair and reinforcement learning share.
"""

from __future__ import annotations

import functools
import inspect
import math
import reprlib
from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np

from gnplace.cluster import Cluster
from gnplace.exceptions import BudgetExhausted, InvalidArgument, InvalidPlacement
from gnplace.graph import OpGraph
from gnplace.limits import is_whole
from gnplace.placement import GraphKey, Placement, as_placement, check_graph_and_cluster, check_whole_devices
from gnplace.sim.costmodel import DEFAULT_COSTS, CostModel
from gnplace.units import counted

__all__ = [
    "Timeline", "StepResult", "BatchResult", "StepTimer", "BudgetedTimer", "overflow", "check_batch", "relative_step",
    "geomean", "simulated", "unwrapped", "median_step",
]


class _ArrayFields:
    """``==`` for a dataclass with array fields: equal when every field is (arrays by shape and values, NaN to NaN).

    The dataclass's own ``==`` compared arrays with ``==`` and asked their truth: a ValueError for two results of
    one step timed twice. Unhashable, as its arrays are.
    """

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return all(_same(getattr(self, f.name), getattr(other, f.name)) for f in fields(self))  # type: ignore[arg-type]

    __hash__ = None  # type: ignore[assignment]


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        a, b = np.asarray(a), np.asarray(b)
        floats = a.dtype.kind in "fc" and b.dtype.kind in "fc"
        return a.shape == b.shape and bool(np.array_equal(a, b, equal_nan=floats))
    return bool(a == b)


@dataclass(frozen=True, eq=False)
class Timeline(_ArrayFields):
    """When and where every op and transfer of a timed step ran.

    Attributes:
        op_start (np.ndarray): start of each op in seconds, ``[num_ops]``.
        op_end (np.ndarray): end of each op in seconds, ``[num_ops]``.
        op_device (np.ndarray): device index of each op, ``[num_ops]``.
        xfer_node (np.ndarray): the op whose output each transfer carries, ``[num_transfers]``.
        xfer_src (np.ndarray): sending device of each transfer.
        xfer_dst (np.ndarray): receiving device (-1: all remote consumers, Placeto's mode).
        xfer_bytes (np.ndarray): bytes of each transfer.
        xfer_start (np.ndarray): start of each transfer in seconds.
        xfer_end (np.ndarray): end of each transfer in seconds.
    """

    op_start: np.ndarray
    op_end: np.ndarray
    op_device: np.ndarray
    xfer_node: np.ndarray
    xfer_src: np.ndarray
    xfer_dst: np.ndarray
    xfer_bytes: np.ndarray
    xfer_start: np.ndarray
    xfer_end: np.ndarray

    @property
    def num_transfers(self) -> int:
        """Number of transfers in the step."""
        return int(self.xfer_node.shape[0])


@dataclass(frozen=True, eq=False)
class StepResult(_ArrayFields):
    """What one simulated (or measured) training step costs.

    Attributes:
        step_time (float): seconds from the first op's start to the last op's end.
        busy_time (np.ndarray): seconds each device computed, ``[num_devices]``.
        peak_memory (np.ndarray): peak bytes resident on each device, ``[num_devices]``.
        memory_capacity (np.ndarray): bytes each device holds, ``[num_devices]``.
        device_names (list[str]): device names in index order.
        timeline (Timeline | None): every op and transfer, when asked for.
    """

    step_time: float
    busy_time: np.ndarray
    peak_memory: np.ndarray
    memory_capacity: np.ndarray
    device_names: list[str]
    timeline: Timeline | None = field(default=None, repr=False)

    @property
    def oom(self) -> np.ndarray:
        """Whether each device's peak memory exceeds its capacity, ``[num_devices]`` bool."""
        return self.peak_memory > self.memory_capacity

    @property
    def is_oom(self) -> bool:
        """Whether any device runs out of memory."""
        return bool(self.oom.any())

    @property
    def utilisation(self) -> np.ndarray:
        """Fraction of the step each device computed, ``[num_devices]``."""
        return self.busy_time / self.step_time if self.step_time > 0 else np.zeros_like(self.busy_time)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary (seconds and bytes)."""
        return {
            "step_time_s": self.step_time,
            "oom": self.is_oom,
            "devices": [
                {
                    "name": name,
                    "busy_s": float(self.busy_time[k]),
                    "utilisation": float(self.utilisation[k]),
                    "peak_memory_bytes": float(self.peak_memory[k]),
                    "memory_capacity_bytes": float(self.memory_capacity[k]),
                    "oom": bool(self.oom[k]),
                }
                for k, name in enumerate(self.device_names)
            ],
        }


@dataclass(frozen=True, eq=False)
class BatchResult(_ArrayFields):
    """Step times and memory of many placements of one graph.

    Attributes:
        step_time (np.ndarray): seconds, ``[batch]``.
        busy_time (np.ndarray): seconds each device computed, ``[batch, num_devices]``.
        peak_memory (np.ndarray): peak bytes per device, ``[batch, num_devices]``.
        oom (np.ndarray): whether each placement runs a device out of memory, ``[batch]``.
    """

    step_time: np.ndarray
    busy_time: np.ndarray
    peak_memory: np.ndarray
    oom: np.ndarray

    def __len__(self) -> int:
        return int(self.step_time.shape[0])

    @classmethod
    def from_results(cls, results: Sequence[StepResult], num_devices: int) -> BatchResult:
        """Stack single results (all of one cluster of ``num_devices`` devices) into a batch."""
        if not results:
            empty = np.zeros((0, num_devices))
            return cls(np.zeros(0), empty, empty.copy(), np.zeros(0, dtype=bool))
        return cls(
            np.array([r.step_time for r in results], dtype=np.float64),
            np.stack([np.asarray(r.busy_time, dtype=np.float64) for r in results]),
            np.stack([np.asarray(r.peak_memory, dtype=np.float64) for r in results]),
            np.array([r.is_oom for r in results], dtype=bool),
        )


def _check_rows(batch: Any, what: str, width: int) -> None:
    """Refuse a list or tuple of rows that are not all lists of one length (:class:`InvalidPlacement`).

    numpy reads such a batch as one row of lists: check_batch said "device indices must be whole numbers, got
    [0, 1, 0]" of ``[[0, 1, 0], [0, 1]]``, and ``BudgetedTimer.time_groups`` raised numpy's "inhomogeneous shape"
    ValueError.

    Examples:
        >>> _check_rows([[0, 1], [0]], "batch of placements", 2)
        Traceback (most recent call last):
        ...
        gnplace.exceptions.InvalidPlacement: batch of placements has rows of 2 and 1 entries, expected (batch, 2)
    """
    if not isinstance(batch, list | tuple):
        return
    lengths = [len(row) if isinstance(row, list | tuple | np.ndarray) and np.ndim(row) == 1 else None for row in batch]
    if len(set(lengths)) > 1:
        if None in lengths:
            other = batch[lengths.index(None)]
            raise InvalidPlacement(f"{what} mixes lists of devices with a row that is no list, "
                                   f"{reprlib.repr(other)}, expected (batch, {width})")
        shown = " and ".join(str(n) for n in dict.fromkeys(lengths))
        raise InvalidPlacement(f"{what} has rows of {shown} entries, expected (batch, {width})")


def check_batch(graph: OpGraph, cluster: Cluster, placements: Any) -> np.ndarray:
    """``placements`` as a C-contiguous int64 array ``[batch, num_ops]`` of valid device indices.

    ``placements`` is such an array, or a list of :class:`Placement` (each checked as :meth:`StepTimer.time`
    checks one: made for ``graph``, on ``cluster``'s devices).

    Raises:
        InvalidPlacement: if the array has the wrong shape or names a device that does not exist, or a
            :class:`Placement` is not one of ``graph`` on ``cluster``.
        InvalidArgument: if ``graph`` is no :class:`OpGraph` or ``cluster`` no :class:`Cluster`.
    """
    check_graph_and_cluster(graph, cluster)
    if isinstance(placements, list | tuple) and placements and all(isinstance(p, Placement) for p in placements):
        placements = np.stack([as_placement(graph, cluster, p).devices for p in placements])  # was refused as text
    _check_rows(placements, "batch of placements", graph.num_ops)
    try:
        check_whole_devices(placements, "batch of placements: ", names_hint=False)  # as time() (a Placement) does
        given = np.asarray(placements)
        array = np.ascontiguousarray(given.astype(np.int64, copy=False))
    except InvalidPlacement:
        raise
    except (TypeError, ValueError) as err:
        raise InvalidPlacement(f"batch of placements is not an integer array ({err})") from err
    if array.ndim != 2 or array.shape[1] != graph.num_ops:
        raise InvalidPlacement(f"batch of placements has shape {array.shape}, expected (batch, {graph.num_ops})")
    if array.size and (array.min() < 0 or array.max() >= cluster.num_devices):
        raise InvalidPlacement(f"batch of placements names a device outside 0..{cluster.num_devices - 1}")
    return array


class StepTimer(ABC):
    """Times one training step of a placed graph: the simulator, real devices, or a wrapper of either.

    Subclasses implement :meth:`time`; :meth:`time_batch` loops over :meth:`time` unless a subclass
    has a faster way. ``cost_model`` is the :class:`~gnplace.sim.costmodel.CostModel` whose op and
    transfer estimates placers plan with when this timer scores them (default: the Paleo model
    with launch overheads, which also reads measured op seconds from the graph). What a subclass written outside
    gnplace returns is checked: :meth:`time` must give a :class:`StepResult` and :meth:`time_batch` a
    :class:`BatchResult`, of step times finite and >= 0 s, else :class:`~gnplace.exceptions.InvalidArgument`
    names the timer's class and what it returned.

    Examples:
        >>> from gnplace.toy import chain_graph, toy_cluster
        >>> from gnplace.sim.simulator import Simulator
        >>> class Slow(StepTimer):  # a timer that can only time one placement at a time
        ...     def time(self, graph, cluster, placement, *, timeline=False):
        ...         return Simulator().time(graph, cluster, placement)
        >>> g, c = chain_graph(3), toy_cluster(2)
        >>> Slow().time_batch(g, c, [[0, 0, 0], [0, 1, 0]]).step_time.shape
        (2,)
    """

    #: The analytic costs that describe this timer; placers estimate op times from it.
    cost_model: CostModel = DEFAULT_COSTS

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Check what a timer written outside gnplace returns from its own :meth:`time` and :meth:`time_batch`.

        Placers read ``.step_time`` and ``.peak_memory`` of whatever a timer returns: a ``time()`` returning a float
        failed as a bare AttributeError deep inside a placer (``repair_memory``, ``BatchResult.from_results``), and a
        step time of nan, below 0 or infinite was taken silently. gnplace's own timers are left as they are.
        """
        super().__init_subclass__(**kwargs)
        if cls.__module__ == "gnplace" or cls.__module__.startswith("gnplace."):
            return
        for name, check in (("time", _checked_step), ("time_batch", _checked_batch)):
            method = cls.__dict__.get(name)
            if inspect.isfunction(method) and not getattr(method, "_gnplace_checked", False):
                setattr(cls, name, _checking(method, check))

    @abstractmethod
    def time(self, graph: OpGraph, cluster: Cluster, placement: Any, *, timeline: bool = False) -> StepResult:
        """Time one step of ``graph`` on ``cluster`` under ``placement``.

        Args:
            graph (OpGraph): the graph.
            cluster (Cluster): the cluster.
            placement (Placement | array-like | dict): a :class:`~gnplace.placement.Placement`, a
                device index per op, or op name to device name.
            timeline (bool, optional): also return when every op and transfer ran, where the timer
                can (default: :obj:`False`).

        Raises:
            InvalidPlacement: if ``placement`` does not place every op on a device of ``cluster``.
        """

    def time_batch(self, graph: OpGraph, cluster: Cluster, placements: Any) -> BatchResult:
        """Time many placements of one graph, ``[batch, num_ops]`` device indices; one :meth:`time` each.

        Raises:
            InvalidPlacement: if the array has the wrong shape or names a device that does not exist.
        """
        array = check_batch(graph, cluster, placements)
        made_for = GraphKey.of(graph)
        results = [self.time(graph, cluster, Placement(row, cluster, made_for)) for row in array]
        return BatchResult.from_results(results, cluster.num_devices)


def _checking(method: Any, check: Any) -> Any:
    """``method`` with ``check(timer, result)`` applied to what it returns."""
    signature = inspect.signature(method)  # once, not at every step timed

    @functools.wraps(method)
    def checked(self: StepTimer, *args: Any, **kwargs: Any) -> Any:
        called = signature.bind(self, *args, **kwargs).arguments  # the arguments by their names
        return check(self, method(self, *args, **kwargs), *(called.get(name) for name in ("cluster", "placements")))

    checked._gnplace_checked = True  # type: ignore[attr-defined]
    return checked


def _bad_seconds(value: Any) -> bool:
    try:
        return not 0 <= float(value) < math.inf  # nan fails both comparisons
    except (TypeError, ValueError):
        return True


def _of_kind(timer: StepTimer, result: Any, kind: type, method: str) -> str:
    """The timer's class name, once ``result`` of its ``method`` is known to be a ``kind``.

    Raises:
        InvalidArgument: naming the timer's class, ``method``, ``kind`` and what it returned.
    """
    name = type(timer).__name__
    if not isinstance(result, kind):
        raise InvalidArgument(f"timer {name}: {method}() must return a {kind.__name__}, got {reprlib.repr(result)} "
                              f"({type(result).__name__})")
    return name


def _checked_step(timer: StepTimer, result: Any, cluster: Any = None, placements: Any = None) -> StepResult:
    """``result`` of ``timer.time()``, refused unless a valid :class:`StepResult` for ``cluster``.

    Valid: finite step seconds >= 0 and peak bytes for each device of ``cluster``.

    Raises:
        InvalidArgument: naming the timer's class and what it returned.
    """
    name = _of_kind(timer, result, StepResult, "time")
    if _bad_seconds(result.step_time):
        raise InvalidArgument(f"timer {name}: time() returned a step_time of {reprlib.repr(result.step_time)}, "
                              f"expected finite seconds >= 0")
    devices = getattr(cluster, "num_devices", None)
    peaks = np.shape(result.peak_memory)
    if devices is not None and peaks != (devices,):  # a short peak row was an IndexError in the memory repair
        raise InvalidArgument(f"timer {name}: time() returned peak_memory of shape {peaks}, expected ({devices},): "
                              f"bytes for each of the cluster's {devices} devices")
    return result


def _checked_batch(timer: StepTimer, result: Any, cluster: Any = None, placements: Any = None) -> BatchResult:
    """``result`` of ``timer.time_batch()``, refused unless a valid :class:`BatchResult` for ``placements``.

    Valid: finite step seconds >= 0, a row for each of ``placements`` and peak bytes for each device of ``cluster``.

    Raises:
        InvalidArgument: naming the timer's class and what it returned.
    """
    name = _of_kind(timer, result, BatchResult, "time_batch")
    try:
        steps = np.asarray(result.step_time, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError):
        raise InvalidArgument(f"timer {name}: time_batch() returned a step_time of {reprlib.repr(result.step_time)}, "
                              f"expected an array of finite seconds >= 0") from None
    bad = np.flatnonzero(~((steps >= 0) & (steps < np.inf)))
    if bad.size:
        first = int(bad[0])
        raise InvalidArgument(f"timer {name}: time_batch() returned a step_time of {float(steps[first])!r} for "
                              f"placement {first}, expected finite seconds >= 0")
    rows = len(placements) if placements is not None and hasattr(placements, "__len__") else steps.size
    devices = getattr(cluster, "num_devices", None)
    peaks = np.shape(result.peak_memory)
    if steps.size != rows or (devices is not None and peaks != (rows, devices)):  # rows were matched to the wrong
        # placements, or a short peak row an IndexError in the memory repair
        raise InvalidArgument(f"timer {name}: time_batch() returned {steps.size} step times and peak_memory of "
                              f"shape {peaks} for {rows} placements, expected {rows} and ({rows}, {devices})")
    return result


def overflow(peak_memory: np.ndarray, capacity: np.ndarray) -> np.ndarray:
    """Bytes over capacity summed over devices, relative to the largest capacity: 0 where everything fits, ``[batch]``.

    Args:
        peak_memory (np.ndarray): peak bytes per device, ``[batch, num_devices]``.
        capacity (np.ndarray): bytes each device holds, ``[num_devices]``.

    Examples:
        >>> overflow(np.array([[1.0, 2.0], [3.0, 1.0]]), np.array([2.0, 2.0])).tolist()
        [0.0, 0.5]
    """
    return np.maximum(peak_memory - capacity[None, :], 0.0).sum(axis=1) / capacity.max()


class BudgetedTimer(StepTimer):
    """Counts the evaluations of another timer, stops at a budget and keeps the best placement seen.

    One evaluation is one placement timed: :meth:`time` spends one, :meth:`time_batch` one per row.
    A call that would go past ``budget`` raises :class:`~gnplace.exceptions.BudgetExhausted` before
    timing anything. The best placement is tracked for the graph and cluster timed last (a new
    pair starts afresh): feasible placements (no device over capacity) rank by step time; when none
    fits, by least :func:`overflow`; among equals the first seen wins.

    Args:
        timer (StepTimer, optional): the timer that does the work (default:
            :class:`~gnplace.sim.simulator.Simulator`).
        budget (int or None, optional): most evaluations, ``None`` for no limit (default: ``None``).

    Attributes:
        evaluations (int): placements timed so far.
        best (np.ndarray | None): device per op of the best placement seen, ``[num_ops]``.
        best_key (tuple[float, float]): its ``(overflow, step seconds)``; ``(inf, inf)`` before any.
        trace (list[tuple[int, float, float]]): ``(evaluations, overflow, step seconds)`` of the best
            after every call: the search's learning curve.

    Examples:
        >>> from gnplace.toy import chain_graph, toy_cluster
        >>> g, c = chain_graph(3), toy_cluster(2)
        >>> timer = BudgetedTimer(budget=3)
        >>> _ = timer.time_batch(g, c, [[0, 1, 0], [0, 0, 0]])
        >>> timer.evaluations, timer.remaining, timer.best.tolist()
        (2, 1, [0, 0, 0])
    """

    def __init__(self, timer: StepTimer | None = None, budget: int | None = None) -> None:
        if budget is not None and (not is_whole(budget) or budget < 0):
            raise InvalidArgument(f"BudgetedTimer: budget must be a whole number >= 0 or None, got {budget!r}")
        if timer is None:
            from gnplace.sim.simulator import Simulator  # deferred: the simulator module imports this one

            timer = Simulator()
        if not isinstance(timer, StepTimer):  # BudgetedTimer("sim") failed at the first time(), as an AttributeError
            raise InvalidArgument(f"BudgetedTimer: timer must be a StepTimer (a Simulator, a real-device timer, ...), "
                                  f"got {timer!r}")
        self.timer = timer
        self.budget = None if budget is None else int(budget)
        self.evaluations = 0
        self.best: np.ndarray | None = None
        self.best_key: tuple[float, float] = (np.inf, np.inf)
        self._pair: tuple[OpGraph, Cluster] | None = None
        self.trace: list[tuple[int, float, float]] = []

    def __repr__(self) -> str:
        return f"BudgetedTimer({self.timer!r}, budget={self.budget})"

    @property
    def cost_model(self) -> CostModel:  # type: ignore[override]
        """The wrapped timer's cost model."""
        return self.timer.cost_model

    @property
    def remaining(self) -> int | None:
        """Evaluations left, ``None`` without a budget."""
        return None if self.budget is None else self.budget - self.evaluations

    def best_placement(self, cluster: Cluster) -> Placement | None:
        """The best placement seen (of the pair timed last) as a :class:`Placement`, or ``None``.

        It is made for the graph timed last (:attr:`~gnplace.placement.Placement.made_for`).
        """
        if self.best is None or self._pair is None:
            return None
        return Placement(self.best, cluster, GraphKey.of(self._pair[0]))

    def time(self, graph: OpGraph, cluster: Cluster, placement: Any, *, timeline: bool = False) -> StepResult:
        """Time one placement with the wrapped timer (one evaluation)."""
        placed = as_placement(graph, cluster, placement)
        self._afford(1)
        result = self.timer.time(graph, cluster, placed, timeline=timeline)
        self.evaluations += 1  # counted once made: a wrapped timer that refuses (its own budget) made none
        self._consider(graph, cluster, placed.devices[None, :], np.array([result.step_time]),
                       np.asarray(result.peak_memory, dtype=np.float64)[None, :])
        return result

    def time_batch(self, graph: OpGraph, cluster: Cluster, placements: Any) -> BatchResult:
        """Time ``[batch, num_ops]`` placements with the wrapped timer (``batch`` evaluations)."""
        array = check_batch(graph, cluster, placements)
        self._afford(array.shape[0])
        result = self.timer.time_batch(graph, cluster, array)
        self.evaluations += array.shape[0]
        self._consider(graph, cluster, array, result.step_time, result.peak_memory)
        return result

    def time_groups(self, graph: OpGraph, cluster: Cluster, group_placements: np.ndarray) -> BatchResult:
        """Time placements given as a device per colocation group, ``[batch, num_groups]``.

        Raises:
            InvalidPlacement: if the array is not ``[batch, num_groups]`` or names a device that does not exist.
        """
        _check_rows(group_placements, "batch of group placements", graph.num_groups)
        array = np.asarray(group_placements)
        if array.ndim != 2 or array.shape[1] != graph.num_groups:
            raise InvalidPlacement(f"batch of group placements has shape {array.shape}, expected "
                                   f"(batch, {graph.num_groups}) for graph {graph.name!r}")
        return self.time_batch(graph, cluster, np.take(array, graph.group, axis=1))  # C order: [:, group] was not

    def _afford(self, count: int) -> None:
        """Raise :class:`BudgetExhausted` unless ``count`` more evaluations fit the budget."""
        if self.budget is not None and self.evaluations + count > self.budget:
            raise BudgetExhausted(
                f"timing {counted(count, 'more placement')} would exceed the budget of "
                f"{counted(self.budget, 'evaluation')} ({self.evaluations} spent)"
            )

    def _consider(
        self, graph: OpGraph, cluster: Cluster, array: np.ndarray, step_time: np.ndarray, peak_memory: np.ndarray
    ) -> None:
        if self._pair is None or self._pair[0] is not graph or self._pair[1] is not cluster:
            self._pair = (graph, cluster)
            self.best, self.best_key, self.trace = None, (np.inf, np.inf), []
        if array.shape[0] == 0:
            return
        over = overflow(peak_memory, cluster.memory)
        # lexicographic: least overflow (0 for feasible), then shortest step; first one wins ties
        i = int(np.lexsort((step_time, over))[0])
        key = (float(over[i]), float(step_time[i]))
        if key < self.best_key:
            self.best_key, self.best = key, array[i].copy()
        self.trace.append((self.evaluations, *self.best_key))


def median_step(results: Sequence[StepResult]) -> StepResult:
    """The median of several measurements of one placement, by step time (of an even count the lower middle one).

    Examples:
        >>> steps = [StepResult(t, np.zeros(1), np.zeros(1), np.ones(1), ["d"]) for t in (3.0, 1.0, 2.0, 4.0)]
        >>> median_step(steps[:3]).step_time, median_step(steps).step_time
        (2.0, 2.0)
    """
    return sorted(results, key=lambda r: r.step_time)[(len(results) - 1) // 2]


def relative_step(step: float, reference: float) -> float:
    """``T / T_ref``, the step time relative to the reference's; 1 when both are 0 s (a step of no work).

    Examples:
        >>> relative_step(0.5, 2.0), relative_step(0.0, 0.0), relative_step(1e-3, 0.0)
        (0.25, 1.0, inf)
    """
    if reference > 0:
        return step / reference
    return 1.0 if step <= 0 else float("inf")


def geomean(values: Iterable[float | None], weights: Iterable[float] | None = None) -> float:
    """Geometric mean of the finite positive values, such as step times relative to a reference; nan if none.

    How gnplace averages :func:`relative_step` ratios over graphs (tables, validation logs, plots):
    a ratio that is missing (None, nan) or infinite (a step of work against a reference of none)
    is left out rather than making the mean meaningless. With ``weights``, each value counts as many
    times as its weight (a mean of group means, each weighted by its group's size).

    Examples:
        >>> geomean([0.5, 2.0, 1.0]), geomean([0.25, None, float("inf"), 1.0])
        (1.0, 0.5)
        >>> geomean([1.0, 2.0], weights=[9, 1]) == 2 ** 0.1
        True
        >>> geomean([])
        nan

    Raises:
        InvalidArgument: if ``weights`` has another length than ``values``, or a weight that is negative or not finite.
    """
    if weights is None:
        pairs: list[tuple[Any, Any]] = [(v, 1.0) for v in values]
    else:
        try:
            pairs = list(zip(values, weights, strict=True))
        except ValueError as err:  # zip alone stopped at the shorter and averaged what it had
            raise InvalidArgument(f"geomean: values and weights differ in length ({err})") from err
        bad = next((w for _, w in pairs if not 0 <= float(w) < math.inf), None)
        if bad is not None:
            raise InvalidArgument(f"geomean: weights must be finite and >= 0, got {bad!r}")
    kept = [(float(v), float(w)) for v, w in pairs if v is not None and math.isfinite(v) and v > 0]
    total = sum(w for _, w in kept)
    return math.exp(sum(w * math.log(v) for v, w in kept) / total) if kept and total > 0 else math.nan


def simulated(timer: StepTimer) -> bool:
    """Whether ``timer`` is the simulator, under any :class:`BudgetedTimer` around it (not real steps).

    Examples:
        >>> from gnplace.sim.simulator import Simulator
        >>> simulated(Simulator()), simulated(BudgetedTimer(Simulator(), budget=3))
        (True, True)
    """
    from gnplace.sim.simulator import Simulator  # deferred: the simulator module imports this one

    return isinstance(unwrapped(timer), Simulator)


def unwrapped(timer: StepTimer) -> StepTimer:
    """The timer inside any :class:`BudgetedTimer` around ``timer`` (``timer`` itself where none is)."""
    while isinstance(timer, BudgetedTimer):
        timer = timer.timer
    return timer
