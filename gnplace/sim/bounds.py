"""Lower bounds on the step time of any placement of a graph on a cluster.

Two bounds, each valid for every placement and schedule:

* **critical path**: the heaviest path of the DAG with every op on its fastest device and
  transfers free, :math:`\\max_{\\text{path}} \\sum_{v} \\min_k t(v, k)`.
* **work**: the step cannot end before the devices have done all the work. With op times
  :math:`t(v,k)` that differ by device, the tightest such bound is the fractional assignment LP
  :math:`\\min T` s.t. :math:`\\sum_v x_{vk} t(v,k) \\le T`, :math:`\\sum_k x_{vk} = 1`; by LP
  duality it equals :math:`\\max_{\\lambda \\in \\Delta} \\sum_v \\min_k \\lambda_k t(v,k)`, and
  every :math:`\\lambda` on the simplex gives a valid bound. We take the best of a few candidates
  and a projected super-gradient ascent. On identical devices it is total work over device count
  (less a few ulps per op, so that float rounding never puts it above a simulated step).

The max of the two is "the bound".
"""

from __future__ import annotations

import math
import reprlib
from dataclasses import dataclass

import numpy as np

from gnplace.cluster import Cluster
from gnplace.graph import OpGraph
from gnplace.placement import check_graph_and_cluster
from gnplace.sim import _kernel
from gnplace.sim.costmodel import DEFAULT_COSTS, CostModel, op_times

__all__ = [
    "Bound", "lower_bound", "critical_path", "work_bound", "memory_shortfall", "require_memory", "live_memory_floor",
    "never_fits",
]

#: The most ops at the start of the backward pass whose live bytes :func:`live_memory_floor` counts (one each).
FLOOR_CANDIDATES = 4


@dataclass(frozen=True)
class Bound:
    """Lower bounds on step time, in seconds.

    Attributes:
        critical_path (float): heaviest path with ops on their fastest device, transfers free.
        work (float): all work spread ideally over all devices.
    """

    critical_path: float
    work: float

    @property
    def value(self) -> float:
        """The bound: the larger of the two, in seconds."""
        return max(self.critical_path, self.work)


def _check_times(graph: OpGraph, times: np.ndarray, num_devices: int | None = None) -> np.ndarray:
    """``times`` as float64 ``[num_ops, num_devices]`` seconds, or :class:`InvalidArgument` saying what is wrong.

    The compiled longest path reads ``times`` by op index without bounds checks: too few rows read past the
    array (a bound of 3e262 s for a 2,000-op chain timed by a ``[3, 2]`` array).
    """
    from gnplace.exceptions import InvalidArgument

    arr, num_ops = _float_times(times), graph.num_ops
    devices = "num_devices" if num_devices is None else str(num_devices)
    if arr.ndim != 2 or arr.shape[0] != num_ops or (num_devices is not None and arr.shape[1] != num_devices) \
            or (num_ops and arr.shape[1] == 0):
        raise InvalidArgument(f"op times must have shape [num_ops, num_devices] = [{num_ops}, {devices}], "
                              f"got {list(arr.shape)}")
    # (an infinite time, a device that cannot run the op, made the work bound's 0 x inf a NaN and an IndexError)
    bad = np.flatnonzero(~((arr >= 0) & (arr < np.inf)).all(axis=1)) if arr.size else np.zeros(0, dtype=np.int64)
    if bad.size:
        op = int(bad[0])
        raise InvalidArgument(f"op times must be finite seconds >= 0, got {arr[op].tolist()} for op "
                              f"{graph.node_names[op]!r}")
    return arr


def _float_times(times: object) -> np.ndarray:
    """``times`` as a float64 array of seconds, or :class:`InvalidArgument` where it holds no numbers.

    Text (``"x"``) and a ragged list of rows were numpy's ValueError, where the bounds promise InvalidArgument.
    """
    from gnplace.exceptions import InvalidArgument

    try:
        return np.asarray(times, dtype=np.float64)
    except (TypeError, ValueError):
        raise InvalidArgument(f"op times must be a [num_ops, num_devices] array of seconds, "
                              f"got {reprlib.repr(times)}") from None


def critical_path(graph: OpGraph, times: np.ndarray) -> float:
    """Seconds of the heaviest path with each op at ``times.min(axis=1)`` and free transfers.

    Raises:
        InvalidArgument: if ``times`` is not ``[num_ops, num_devices]`` finite seconds >= 0.
    """
    times = _check_times(graph, times)
    if graph.num_ops == 0:
        return 0.0
    ptr, dst, _ = graph.out_csr
    return float(_kernel.longest_path(graph.topological_order(), times.min(axis=1), ptr, dst))


def _project_simplex(x: np.ndarray) -> np.ndarray:
    """The point of the probability simplex nearest to ``x``: weights >= 0 whose sum is 1 to a few ulps.

    Weights far past 1 (a step of ``grad / scale`` where op times span 4e18 s and 5e-324 s: 1e279) lost the 1 in
    rounding, so that no index passed the test (an IndexError), or one did with weights that summed to 2 (a bound
    twice too high, from ``[2**53 + 2, 0]``). Where the sum is off, the projection is taken again of ``x`` less its
    largest weight, whose first index always passes; infinite weights share the simplex equally.
    """
    d = x.shape[0]
    with np.errstate(over="ignore", invalid="ignore"):
        u = np.sort(x)[::-1]
        css = np.cumsum(u) - 1.0
        passing = np.flatnonzero(u - css / np.arange(1, d + 1) > 0)
    if passing.size:
        rho = passing[-1]
        projected = np.maximum(x - css[rho] / (rho + 1.0), 0.0)
        if abs(float(projected.sum()) - 1.0) <= 4 * d * float(np.finfo(np.float64).eps):
            return projected
    if u[0] == np.inf:
        return (x == np.inf) / float(np.count_nonzero(x == np.inf))
    # weights below the largest less 1 get none, so -2 stands for them all and no sum overflows
    x, u = np.maximum(x - u[0], -2.0), np.maximum(u - u[0], -2.0)
    css = np.cumsum(u) - 1.0
    rho = np.flatnonzero(u - css / np.arange(1, d + 1) > 0)[-1]
    return np.maximum(x - css[rho] / (rho + 1.0), 0.0)


def _cheapest(times: np.ndarray, lam: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each op's device of least ``times * lam`` and that weighted time, ``[num_ops]`` each.

    Computed a block of rows at a time (32 MiB), so a [100,000, 4,096] matrix makes no 3 GiB temporary; the
    least times are the very elements ``(times * lam).min(axis=1)`` gives.
    """
    n = times.shape[0]
    choice, least = np.empty(n, dtype=np.intp), np.empty(n, dtype=np.float64)
    rows = max(1, 2**22 // max(1, times.shape[1]))
    for start in range(0, n, rows):
        weighted = times[start:start + rows] * lam[None, :]
        picked = weighted.argmin(axis=1)
        choice[start:start + rows] = picked
        least[start:start + rows] = weighted[np.arange(weighted.shape[0]), picked]
    return choice, least


# The work bound reads op times by device class (devices whose columns hold the same bits) on at least
# _CLASS_MIN_DEVICES devices with at most num_devices / _CLASS_FACTOR classes: 200 iterations over a [93,567, 4,096]
# matrix of identical K80s took 200 s. On fewer devices, or more classes, reading every column was as fast or faster
# (3,000 ops: 8 identical devices 0.66x, 256 in 16 classes 1.65x, 1,024 in 64 classes 1.98x as fast by class).
_CLASS_MIN_DEVICES, _CLASS_FACTOR = 256, 16


def _device_classes(times: np.ndarray, column_sums: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """Devices whose columns of ``times`` hold the same bits: each class's first device and each device's class.

    Returns ``(first [num_classes], label [num_devices])``, or None where there are more than
    ``num_devices / _CLASS_FACTOR`` classes or fewer than ``_CLASS_MIN_DEVICES`` devices. ``column_sums``
    (``times.sum(axis=0)``, seconds) and three rows group the columns; each group is then checked bit for bit, a
    block of rows at a time, and none is trusted unchecked (a group whose columns differ anywhere gives None).
    """
    n, d = times.shape
    if d < _CLASS_MIN_DEVICES:  # no grouping cost on a few devices
        return None
    key = np.stack([column_sums, times[0], times[n // 2], times[-1]], axis=1)
    _, first, label = np.unique(key.view(np.uint64), axis=0, return_index=True, return_inverse=True)
    if first.shape[0] * _CLASS_FACTOR > d:
        return None
    label = label.reshape(-1)
    # devices of one class side by side (a cluster file's entry with a count) are compared as one slice with their
    # first device's column: gathering every column to compare took 7.4 of lower_bound's 17.5 s on 4,096 K80s
    start = np.flatnonzero(np.diff(label)) + 1
    runs = list(zip(np.r_[0, start].tolist(), np.r_[start, d].tolist(), first[label[np.r_[0, start]]].tolist()))
    bits, rows = times.view(np.uint64), max(1, 2**22 // d)
    for top in range(0, n, rows):
        block = bits[top:top + rows]
        if not all((block[:, lo:hi] == block[:, rep:rep + 1]).all() for lo, hi, rep in runs):
            return None
    return first, label


def _cheapest_by_class(distinct: np.ndarray, label: np.ndarray, lam: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_cheapest` of the op times ``distinct[:, label]`` (seconds), without making them: the same bits.

    Within a class every device has the op time ``t``, and ``t * lam[k]`` never falls as ``lam[k]`` grows (rounding
    is monotonic), so the least product is ``t`` times the class's least weight, and the devices that reach it are
    a prefix of the class in order of weight, found by bisection. ``argmin`` picks the lowest device index that
    reaches the least product over all classes, and so does this.
    """
    n = distinct.shape[0]
    least, choice = np.full(n, np.inf), np.zeros(n, dtype=np.intp)
    for c in range(distinct.shape[1]):
        members = np.flatnonzero(label == c)
        order = members[np.lexsort((members, lam[members]))]  # by weight, then index
        ranked, lowest = lam[order], np.minimum.accumulate(order)
        t = distinct[:, c]
        value, count = t * ranked[0], np.ones(n, dtype=np.intp)  # count: devices known to reach value
        step = 1 << (order.shape[0].bit_length() - 1)
        while step:
            trial = count + step
            reach = (trial <= order.shape[0]) & (t * ranked[np.minimum(trial, order.shape[0]) - 1] <= value)
            count = np.where(reach, trial, count)
            step >>= 1
        picked = lowest[count - 1]
        choice = np.where(value < least, picked, np.where(value == least, np.minimum(choice, picked), choice))
        least = np.minimum(least, value)
    return choice, distinct[np.arange(n), label[choice]] * lam[choice]


def work_bound(times: np.ndarray, *, iterations: int = 200) -> float:
    """Seconds of the fractional-assignment (work) bound for op times ``[num_ops, num_devices]``.

    Raises:
        InvalidArgument: if ``times`` is not a 2-D array of finite seconds >= 0, or has ops but no device.
    """
    from gnplace.exceptions import InvalidArgument

    times = _float_times(times)
    if times.ndim != 2:
        raise InvalidArgument(f"op times must have shape [num_ops, num_devices], got {list(times.shape)}")
    if times.shape[0] and times.shape[1] == 0:  # ops no device can run: 0 s, where critical_path refused them
        raise InvalidArgument(f"op times must have shape [num_ops, num_devices] with num_devices >= 1 for ops, got "
                              f"{list(times.shape)}")
    if times.size and not ((times >= 0) & (times < np.inf)).all():  # a NaN, a negative or an infinite time
        op = int(np.flatnonzero(~((times >= 0) & (times < np.inf)).all(axis=1))[0])
        raise InvalidArgument(f"op times must be finite seconds >= 0, got {times[op].tolist()} for op {op}")
    if times.size == 0:
        return 0.0
    exponent = math.frexp(float(times.max()))[1]  # times < 2**exponent
    if exponent + times.size.bit_length() > 1020:
        # a sum of times could pass the largest float (2**1024): such sums overflowed to inf, and the ascent divided
        # inf by inf (an IndexError in _project_simplex). The bound scales with the times, so it is taken of the
        # times over 2**exponent, an exact division (times it pushes under the smallest float fall to 0, which only
        # lowers the bound), and multiplied back
        with np.errstate(over="ignore"):
            return float(np.ldexp(work_bound(np.ldexp(times, -exponent), iterations=iterations), exponent))
    d, column_sums = times.shape[1], times.sum(axis=0)
    speed = 1.0 / np.maximum(column_sums, 1e-300)
    candidates = [np.full(d, 1.0 / d), speed / speed.sum()]
    classes = _device_classes(times, column_sums)
    if classes is None:
        def cheapest_at(lam: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            return _cheapest(times, lam)
    else:
        distinct = np.ascontiguousarray(times[:, classes[0]])

        def cheapest_at(lam: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            return _cheapest_by_class(distinct, classes[1], lam)
    cheapest = [cheapest_at(lam) for lam in candidates]
    first = max(range(len(candidates)), key=lambda i: float(cheapest[i][1].sum()))
    best_lam, (choice, least) = candidates[first], cheapest[first]
    best = float(least.sum())
    lam = best_lam.copy()
    scale = float(times.min(axis=1).sum()) or 1.0
    for it in range(iterations):
        grad = np.bincount(choice, weights=times[np.arange(times.shape[0]), choice], minlength=d)
        with np.errstate(over="ignore"):  # an infinite step: _project_simplex shares the simplex among those
            lam = _project_simplex(lam + (0.5 / (it + 1)) * grad / scale)
        choice, least = cheapest_at(lam)  # the value of lam, and the next step's choice
        current = float(least.sum())
        if current > best:
            best, best_lam = current, lam.copy()
    # The value is a float sum that can round above the float sum a device computes of the same times (one
    # device adding 1 and fifteen 1e-16 in order gets 1.0, numpy's pairwise sum 1 + 7 ulps): step down by more
    # than the rounding of both sums, about one ulp per op and device.
    n = times.shape[0]
    return best * max(0.0, 1.0 - (2 * n + 2 * d + 8) * float(np.finfo(np.float64).eps))


def lower_bound(graph: OpGraph, cluster: Cluster, *, times: np.ndarray | None = None) -> Bound:
    """Lower bounds on the step time of ``graph`` on ``cluster``, in seconds.

    Args:
        graph (OpGraph): the graph.
        cluster (Cluster): the cluster.
        times (np.ndarray, optional): op times ``[num_ops, num_devices]`` to use, such as
            ``timer.cost_model.op_times(graph, cluster)`` (default: the default cost model's).

    Returns:
        Bound: ``critical_path`` (seconds: the longest chain of op times, each op on its fastest device, no
        transfer), ``work`` (seconds: the least time in which the devices together can do every op's work) and
        ``value``, the larger of the two. No placement's simulated step is shorter than ``value``.

    Raises:
        InvalidArgument: if ``graph`` is no :class:`OpGraph` or ``cluster`` no :class:`Cluster`, or
            ``times`` is not ``[num_ops, num_devices]`` finite seconds >= 0.

    Examples:
        >>> from gnplace.toy import chain_graph
        >>> from gnplace.cluster import load_cluster
        >>> b = lower_bound(chain_graph(4), load_cluster("k80x2"))
        >>> b.value == b.critical_path > b.work  # a chain cannot run in parallel
        True
    """
    check_graph_and_cluster(graph, cluster)
    times = op_times(graph, cluster) if times is None else _check_times(graph, times, cluster.num_devices)
    return Bound(critical_path(graph, times), work_bound(times))


def memory_shortfall(graph: OpGraph, cluster: Cluster) -> str | None:
    """Why no placement of ``graph`` can fit the memory of ``cluster``, or None when this bound cannot tell.

    Parameters and optimizer state (``param_bytes``) stay resident on their op's device for the whole
    step, in the simulator as on real devices, and the ops of one colocation group share a device. So no
    placement fits when the parameters exceed the devices' memory in all, or when one colocation group's
    exceed the largest device's. Activations only add to that: a placement that passes may still run out
    of memory.

    Args:
        graph (OpGraph): the graph.
        cluster (Cluster): the cluster.

    Returns:
        str | None: a one-line reason naming what does not fit, or None.

    Raises:
        InvalidArgument: if ``graph`` is no :class:`OpGraph` or ``cluster`` no :class:`Cluster` (a preset's name
            was an AttributeError, here and in :func:`require_memory` and :func:`never_fits`).

    Examples:
        >>> from gnplace.toy import chain_graph
        >>> from gnplace.cluster import load_cluster
        >>> memory_shortfall(chain_graph(3), load_cluster("k80x2")) is None
        True
    """
    from gnplace.units import format_bytes

    check_graph_and_cluster(graph, cluster)
    total, capacity = float(graph.total_param_bytes), float(np.sum(cluster.memory))
    if total > capacity:
        return (f"its parameters and optimizer state need {format_bytes(total)}, and the {cluster.num_devices} "
                f"devices of {cluster.name!r} hold {format_bytes(capacity)} in all")
    if graph.num_ops:
        resident = np.bincount(graph.group, weights=graph.param_bytes, minlength=graph.num_groups)  # bytes, float64
        g = int(np.argmax(resident))
        need, room = float(resident[g]), float(np.max(cluster.memory))
        if need > room:
            members = np.flatnonzero(graph.group == g)
            more = members.shape[0] - 1
            others = f" and {more} other op{'s' if more > 1 else ''}, placed together" if more else ""
            return (f"colocation group {g} (op {graph.node_names[int(members[0])]!r}{others}) "
                    f"holds {format_bytes(need)} of parameters and optimizer state, and the largest device of "
                    f"{cluster.name!r} holds {format_bytes(room)}")
    return None


def require_memory(graph: OpGraph, cluster: Cluster) -> None:
    """Refuse a memory budget that no placement of ``graph`` on ``cluster`` can fit.

    Raises:
        InfeasiblePlacement: saying what does not fit (:func:`memory_shortfall`).
        InvalidArgument: if ``graph`` is no :class:`OpGraph` or ``cluster`` no :class:`Cluster`.
    """
    from gnplace.exceptions import InfeasiblePlacement

    short = memory_shortfall(graph, cluster)
    if short is not None:
        raise InfeasiblePlacement(f"no placement of {graph.name!r} fits the memory of {cluster.name!r}: {short}")


def live_memory_floor(graph: OpGraph, columns: np.ndarray, *, candidates: int = FLOOR_CANDIDATES) -> float:
    """Bytes the devices hold together at one instant of the simulated step of every placement, at least.

    The simulator's memory (:mod:`gnplace.sim.simulator`): parameters are resident throughout, an op's output
    occupies its device from the op's start until its last local consumer has ended and its last transfer is
    done, and a received copy (the bytes its consumers there read, at most the output) occupies its receiver
    from the transfer's start until its last consumer there ends. So when an op :math:`v` of positive seconds
    on every device starts, each ancestor :math:`u` with a consumer :math:`w` among :math:`v` and its
    descendants (which end after that instant) holds a copy of at least :math:`\\min(B^{out}_u, B_{uw})` somewhere,
    whatever the placement and schedule:

    .. math::
        \\sum_k \\text{peak}_k \\ge \\sum_x P_x + B^{out}_v
        + \\sum_{u \\in \\text{anc}(v)} \\min\\big(B^{out}_u, \\max_{w \\in \\text{succ}(u) \\cap (\\{v\\} \\cup
        \\text{desc}(v))} B_{uw}\\big)

    Taken at the first ops of the backward pass (up to ``candidates`` of them, latest in topological order
    first): the forward outputs the backward pass reads are live there. On the 93,567-op ENAS cifar10 graph
    (``scripts/bench.py scale``) the floor is 31.8 GiB of the 39.5 GiB peak on one device.

    Args:
        graph (OpGraph): the graph.
        columns (np.ndarray): seconds of each op on each kind of device the simulator charges, ``[num_ops,
            num_kinds]`` (:meth:`~gnplace.sim.costmodel.CostModel.op_time_columns`): an op of 0 s somewhere
            is no candidate (what it reads may be freed at the instant it starts).
        candidates (int, optional): most candidate ops (default: :data:`FLOOR_CANDIDATES`).

    Returns:
        float: bytes; the parameters alone where no candidate qualifies (a graph without a backward pass).

    Examples:
        >>> from gnplace.toy import mlp_training_graph
        >>> from gnplace.cluster import load_cluster
        >>> g, c = mlp_training_graph(layers=3, width=64, batch=8), load_cluster("k80x2")
        >>> live_memory_floor(g, DEFAULT_COSTS.op_time_columns(g, c)[0]) > g.total_param_bytes
        True
    """
    params = float(graph.total_param_bytes)
    if graph.num_ops == 0:
        return params
    backward = graph.phase == 1
    follows_backward = np.zeros(graph.num_ops, dtype=bool)
    follows_backward[graph.edge_dst[backward[graph.edge_src]]] = True
    first = backward & ~follows_backward & (np.asarray(columns).min(axis=1) > 0)
    position = np.empty(graph.num_ops, dtype=np.int64)
    position[graph.topological_order()] = np.arange(graph.num_ops)
    chosen = np.flatnonzero(first)
    chosen = chosen[np.argsort(-position[chosen], kind="stable")][:candidates]
    return max([params] + [params + _held_when_starting(graph, int(v)) for v in chosen.tolist()])


def _held_when_starting(graph: OpGraph, v: int) -> float:
    """Bytes of outputs (``v``'s and its ancestors' that ``v`` or a descendant reads) live when ``v`` starts."""
    out_ptr, out_dst, _ = graph.out_csr
    in_ptr, in_src, _ = graph.in_csr
    ancestor = _kernel.reachable(in_ptr, in_src, v)
    ancestor[v] = False
    later = _kernel.reachable(out_ptr, out_dst, v)  # v and its descendants
    read = ancestor[graph.edge_src] & later[graph.edge_dst]
    largest = np.zeros(graph.num_ops)
    np.maximum.at(largest, graph.edge_src[read], graph.edge_bytes[read].astype(np.float64))
    return float(graph.out_bytes[v]) + float(np.minimum(graph.out_bytes.astype(np.float64), largest).sum())


def never_fits(graph: OpGraph, cluster: Cluster, *, cost_model: CostModel = DEFAULT_COSTS) -> bool:
    """Whether every placement of ``graph`` runs some device of ``cluster`` out of memory in the simulator.

    A proof, never a guess: :func:`memory_shortfall` (the parameters), or :func:`live_memory_floor` of the
    simulator's ``cost_model`` over the devices' memory in all (some device then peaks over its own), with a
    margin for the float sums of bytes past :math:`2^{53}`. False where neither can tell.

    Examples:
        >>> from gnplace.toy import chain_graph
        >>> from gnplace.cluster import load_cluster
        >>> never_fits(chain_graph(3), load_cluster("k80x2"))
        False
    """
    if memory_shortfall(graph, cluster) is not None:
        return True
    floor = live_memory_floor(graph, cost_model.op_time_columns(graph, cluster)[0])
    slack = 1e-6 * (floor + 2.0 * float(graph.out_bytes.astype(np.float64).sum()))  # the simulator's float rounding
    return floor > float(np.sum(cluster.memory)) + slack
