"""The list-scheduling core shared by ``heft``, ``m_etf`` and ``m_sct``, in the style of Baechi.

Baechi (Jeon et al., SoCC 2020, https://doi.org/10.1145/3419111.3421302) places a training graph by
*scheduling* it: ops are taken one at a time and each is put on a device at a start time, given
the finish times of its producers, the transfer times of their outputs and when the device is
next free. The device chosen for an op is its placement; the schedule itself is thrown away (the
simulator replays the placement with its own queues).

:class:`ListSchedule` holds the state of such a schedule over the ops of one graph: the device
and finish time of every scheduled op, when each device is next free, and the memory left on each
device. Colocation groups are honoured: the first op of a group that is scheduled fixes the
group's device and reserves its memory (:func:`~gnplace.placers.groups.group_memory`); every later
op of the group goes to the same device. A group only goes to devices that run it at least
``min_speed`` times as fast as its fastest device, and, with ``memory_aware``, only to one of those
with room for it, unless none has room (then to the one with the most room, and the placer's
final :func:`~gnplace.placers.groups.repair_memory` fixes what it can).

:class:`ListSchedulingPlacer` holds what the three placers share: their options, ``repr`` and
``place``, which builds the schedule, lets the placer fill it and repairs memory.

The scheduling loops, :class:`ListSchedule`'s steps and the upward rank run compiled
(:mod:`gnplace.placers._listsched_kernel`, numba): list-scheduling every op of a 93,567-op graph took
3-4 s a placer in Python and takes 0.1-0.5 s (on four devices). ETF keeps heaps for the devices in use and one
idle device of each class of interchangeable ones (:func:`interchangeable_devices`), not for every device.

Times follow the cost model: op ``v`` takes ``t[v, d]`` seconds on device ``d`` and an edge of
``b`` bytes from device ``a`` to ``c != a`` takes :math:`\\lambda_{ac} + b / W_{ac}` seconds.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable

import numpy as np

from gnplace.cluster import Cluster, off_diagonal
from gnplace.graph import OpGraph
from gnplace.placement import Placement, check_graph_and_cluster
from gnplace.placers._listsched_kernel import (
    _assign,
    _candidates,
    _fits,
    _ready_time,
    etf_kernel,
    twin_kernel,
    upward_rank_kernel,
)
from gnplace.placers.base import check_flag, check_fraction
from gnplace.placers.groups import group_memory, group_times, repair_memory
from gnplace.seed import SeedLike, check_seed
from gnplace.sim.costmodel import spread_columns
from gnplace.sim.simulator import Simulator
from gnplace.sim.timer import StepTimer

__all__ = [
    "ListSchedule", "ListSchedulingPlacer", "upward_rank", "mean_comm_time", "mean_link_costs", "static_rank",
    "etf_schedule", "place_by_schedule", "ETF_REVISION", "interchangeable_devices",
]


def mean_link_costs(cluster: Cluster, devices: np.ndarray) -> tuple[float, float] | None:
    """Mean latency (seconds) and inverse bandwidth (seconds per byte) over ordered pairs of distinct ``devices``.

    ``None`` if fewer than two devices are given.

    It reads every pair (16.8 million at 4,096 devices, 0.25-1 s a call), so the result is kept on the cluster for
    the last ``devices`` asked, while its (read-only) link matrices are the objects it was computed from: ``heft``,
    ``m_etf`` and ``m_sct`` each ranked ops by it, three reads of every pair in ``auto`` (2.9 s of 8.1 s for a
    2,000-op graph on 4,096 K80s on the loaded VM). The pairs are gathered by
    :func:`~gnplace.cluster.off_diagonal` from the latencies and the inverse bandwidths the cluster keeps
    (:meth:`~gnplace.cluster.Cluster.inverse_bandwidth`): each array of them takes 134 MB at 4,096 devices.

    Examples:
        >>> from gnplace.toy import toy_cluster
        >>> [float(x) for x in mean_link_costs(toy_cluster(3, bandwidth=1e9, latency=1e-5), np.arange(3))]
        [1e-05, 1e-09]
    """
    d = np.asarray(devices)
    if d.size < 2:
        return None

    def costs() -> tuple[float, float]:
        latency, inverse = cluster.latency, cluster.inverse_bandwidth()  # each pair's 1 / bandwidth, as divided here
        if not np.array_equal(d, np.arange(cluster.num_devices)):  # all of them, in order: the matrices as they are
            latency, inverse = latency[np.ix_(d, d)], inverse[np.ix_(d, d)]
        return off_diagonal(latency).reshape(-1).mean(), off_diagonal(inverse).reshape(-1).mean()

    return cluster.kept("_mean_link_costs", (), (d.dtype.str, d.shape, d.tobytes()), costs)


def mean_comm_time(
    cluster: Cluster, devices: np.ndarray, num_bytes: np.ndarray, *, links: tuple[float, float] | None = None,
) -> np.ndarray:
    """Seconds to move ``num_bytes`` between two distinct devices of ``devices``, averaged over pairs.

    Returns zeros if fewer than two devices are given. ``links`` is :func:`mean_link_costs` of the same
    ``cluster`` and ``devices``, computed here when not given (default: None).
    """
    if links is None:
        links = mean_link_costs(cluster, devices)
    if links is None:
        return np.zeros_like(np.asarray(num_bytes, dtype=np.float64))
    lat, inv_bw = links
    return lat + np.asarray(num_bytes, dtype=np.float64) * inv_bw


def upward_rank(graph: OpGraph, cost: np.ndarray, comm: np.ndarray) -> np.ndarray:
    """HEFT's upward rank: the longest path from each op to an exit, ops and edges included.

    .. math::
        \\mathrm{rank}_u(v) = \\bar t_v + \\max_{(v, s) \\in E} \\left(\\bar c_{vs} + \\mathrm{rank}_u(s)\\right)

    Args:
        graph (OpGraph): the graph.
        cost (np.ndarray): mean seconds of each op, ``[num_ops]``.
        comm (np.ndarray): mean seconds of each edge in ``graph.out_csr`` order, ``[num_edges]``.

    Returns:
        np.ndarray: seconds, ``[num_ops]``.

    Examples:
        >>> from gnplace.toy import chain_graph
        >>> upward_rank(chain_graph(3), np.ones(3), np.full(2, 0.5)).tolist()
        [4.0, 2.5, 1.0]
    """
    ptr, succ, _ = graph.out_csr
    rank = np.array(cost, dtype=np.float64)
    upward_rank_kernel(rank, np.asarray(graph.topological_order(), dtype=np.int64), ptr, succ,
                       np.asarray(comm, dtype=np.float64))
    return rank


def _unique_rows(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(rows, axis=0, return_inverse=True)`` of a 2-D unsigned integer array, by ``np.lexsort``.

    The same distinct rows, in the same order (by the first column, then the next, ...), and each row's index
    among them, ``[len(rows)]``. numpy sorts the rows as one structured field each, compared field by field:
    0.35 s for 280,158 ops of one column, against 0.02 s here.
    """
    n = rows.shape[0]
    if rows.ndim != 2 or rows.dtype.kind != "u":
        raise ValueError(f"_unique_rows takes a 2-D unsigned integer array, not {rows.dtype} of shape {rows.shape}")
    order = np.lexsort(rows.T[::-1]) if rows.shape[1] else np.arange(n)
    ordered = rows[order]
    new = np.empty(n, dtype=bool)
    new[:1] = True
    np.any(ordered[1:] != ordered[:-1], axis=1, out=new[1:])
    index = np.empty(n, dtype=np.intp)
    index[order] = np.cumsum(new) - 1
    return ordered[new], index


def static_rank(graph: OpGraph, op_time: np.ndarray, cluster: Cluster, column: np.ndarray | None = None) -> np.ndarray:
    """:func:`upward_rank` with op and edge times averaged over all devices (seconds, ``[num_ops]``).

    With ``column``, ``op_time`` holds the distinct columns and device ``d`` runs at ``op_time[:, column[d]]``
    (:func:`~gnplace.sim.costmodel.op_time_columns`): the mean of each op's row of the spread matrix, bit for bit,
    spread a block of rows at a time (4,096 K80s: the whole matrix of 93,567 ops took 3 GB), once for each distinct
    row (ops of the same seconds everywhere have the same mean: 148 rows of those 93,567 ops, 0.5 s a call).

    Examples:
        >>> from gnplace.toy import chain_graph
        >>> from gnplace.cluster import load_cluster
        >>> from gnplace.sim.costmodel import op_times
        >>> g, c = chain_graph(3), load_cluster("k80x2")
        >>> r = static_rank(g, op_times(g, c), c)
        >>> bool(r[0] > r[1] > r[2] > 0)
        True
    """
    comm = mean_comm_time(cluster, np.arange(cluster.num_devices), graph.out_csr[2])
    if column is None:
        return upward_rank(graph, op_time.mean(axis=1), comm)
    if not op_time.shape[0]:
        return upward_rank(graph, np.zeros(0), comm)
    bits, index = _unique_rows(np.ascontiguousarray(op_time, dtype=np.float64).view(np.uint64))
    distinct = bits.view(np.float64)
    mean = np.empty(distinct.shape[0])
    rows = max(1, 2**22 // max(1, column.shape[0]))  # each row's mean is its own: a block's rows as the matrix's
    for top in range(0, distinct.shape[0], rows):
        mean[top:top + rows] = spread_columns(distinct[top:top + rows], column).mean(axis=1)
    return upward_rank(graph, mean[index.reshape(-1)], comm)


class ListSchedule:
    """A schedule under construction: devices, start and finish times of ops, memory left.

    Args:
        graph (OpGraph): the graph.
        cluster (Cluster): the devices.
        op_time (np.ndarray): seconds of each op on each device, ``[num_ops, num_devices]``, or with ``column`` on
            each distinct column of devices, ``[num_ops, num_kinds]`` (:func:`~gnplace.sim.costmodel.op_time_columns`).
        min_speed (float, optional): a group may only go to devices that run it at least this
            fraction as fast as its fastest device does (default: 0, any device).
        memory_aware (bool, optional): reserve each group's memory and keep groups off devices
            without room (default: :obj:`True`).
        column (np.ndarray, optional): each device's column of ``op_time``, ``[num_devices]`` (default: ``None``,
            a column per device).

    ``op_time``, ``group_time`` and ``group_ok`` hold the distinct columns, ``column`` each device's: on 4,096 K80s
    (one column) the [ops, devices] and [groups, devices] matrices of 93,567 ops took 3 GB and 1 GB and their
    spreading and checks seconds a placer, and ``group_ok`` per device (120 MB) 0.4-0.9 s of each schedule's setup
    and its check of interchangeable devices. Device ``d`` may take group ``g`` where ``group_ok[g, column[d]]``.

    Raises:
        InvalidArgument: if ``min_speed`` is not a number in ``[0, 1]`` (above 1 no device is fast enough for
            any group, and :func:`etf_schedule` never ended).

    Examples:
        >>> from gnplace.toy import chain_graph
        >>> from gnplace.cluster import load_cluster
        >>> from gnplace.sim.costmodel import op_times
        >>> g, c = chain_graph(2), load_cluster("k80x2")
        >>> s = ListSchedule(g, c, op_times(g, c))
        >>> s.assign(0, 1, 0.0)
        [1]
        >>> s.group_device.tolist(), bool(s.ready_time(1)[1] < s.ready_time(1)[0])
        ([1, -1], True)
    """

    def __init__(
        self, graph: OpGraph, cluster: Cluster, op_time: np.ndarray, *, min_speed: float = 0.0,
        memory_aware: bool = True, column: np.ndarray | None = None,
    ) -> None:
        min_speed = check_fraction("ListSchedule", "min_speed", min_speed)
        self.graph = graph
        self.op_time = np.ascontiguousarray(op_time, dtype=np.float64)
        self.column = np.arange(op_time.shape[1]) if column is None else np.asarray(column, dtype=np.int64)
        n, num_devices = op_time.shape[0], self.column.shape[0]
        self.group = graph.group
        self.group_time = np.ascontiguousarray(group_times(graph, self.op_time), dtype=np.float64)
        used = np.unique(self.column)  # the fastest of the devices' columns: min is exact in any order
        seconds = self.group_time if used.shape[0] == self.group_time.shape[1] else self.group_time[:, used]
        fastest = seconds.min(axis=1, keepdims=True)
        self.group_ok = self.group_time * min_speed <= fastest * (1 + 1e-9)  # [groups, columns]
        self.memory_aware = memory_aware
        self.group_bytes = np.asarray(group_memory(graph) if memory_aware else np.zeros(graph.num_groups),
                                      dtype=np.float64)
        self.room = cluster.memory.astype(np.float64) if memory_aware else np.full(num_devices, np.inf)
        self.latency = np.ascontiguousarray(cluster.latency, dtype=np.float64)
        self.inv_bw = cluster.inverse_bandwidth()  # read-only, 0 on the diagonal: no transfer on one device
        self.op_device = np.full(n, -1, dtype=np.int64)
        self.start = np.zeros(n)
        self.finish = np.zeros(n)
        self.device_free = np.zeros(num_devices)
        self.group_device = np.full(graph.num_groups, -1, dtype=np.int64)
        self.in_ptr, self.in_src, in_bytes = graph.in_csr
        self.in_bytes = np.asarray(in_bytes, dtype=np.float64)
        self.out_ptr, self.out_dst, _ = graph.out_csr
        self.pending = np.diff(self.in_ptr).astype(np.int64)

    def arrays(self) -> tuple[np.ndarray, ...]:
        """The state the compiled schedulers read and fill, their last arguments in this order.

        ``column``, ``group``, ``group_ok`` (per column), ``group_bytes``, ``room``, ``latency``, ``inv_bw``, the
        producers' CSR (``in_ptr``, ``in_src``, ``in_bytes``), the consumers' (``out_ptr``, ``out_dst``),
        ``pending``, ``op_device``, ``start``, ``finish``, ``device_free``, ``group_device``: the arrays themselves,
        so that the schedulers fill them in place.
        """
        return (self.column, self.group, self.group_ok, self.group_bytes, self.room, self.latency, self.inv_bw,
                self.in_ptr, self.in_src, self.in_bytes, self.out_ptr, self.out_dst, self.pending, self.op_device,
                self.start, self.finish, self.device_free, self.group_device)

    def sources(self) -> list[int]:
        """Ops with no producers, ready at time 0."""
        return np.flatnonzero(self.pending == 0).tolist()

    def ready_time(self, v: int) -> np.ndarray:
        """When all inputs of ``v`` (whose producers are scheduled) could be on each device, seconds, ``[num_devices]``.

        The latest, over its inputs, of the producer's finish plus the transfer from the producer's device
        (the link's latency and the bytes over its bandwidth; none on that device); 0 for an op without producers.
        """
        out = np.empty(self.device_free.shape[0])
        _ready_time(v, out, self.finish, self.op_device, self.latency, self.inv_bw, self.in_ptr, self.in_src,
                    self.in_bytes)
        return out

    def candidates(self, v: int) -> np.ndarray:
        """Devices ``v`` may go to now, ``bool [num_devices]``.

        Its group's device once the group is placed; else the devices fast enough for the group
        (``min_speed``) with room for it, or, if none has room, those of them with the most room.
        """
        out = np.empty(self.device_free.shape[0], dtype=bool)
        _candidates(v, out, self.group, self.group_device, self.group_ok, self.column, self.group_bytes, self.room)
        return out

    def fits(self, v: int, d: int) -> bool:
        """Whether ``v`` may still go to device ``d``: whether ``d`` is among :meth:`candidates`."""
        return bool(_fits(v, d, self.group, self.group_device, self.group_ok, self.column, self.group_bytes,
                          self.room))

    def assign(self, v: int, d: int, start: float) -> list[int]:
        """Schedule op ``v`` on device ``d`` at ``start`` seconds; returns the ops this makes ready."""
        ready = np.empty(max(1, self.out_ptr[v + 1] - self.out_ptr[v]), dtype=np.int64)
        count = _assign(v, d, float(start), ready, self.group, self.group_device, self.group_bytes, self.room,
                        self.op_device, self.start, self.finish, self.device_free, self.op_time, self.column,
                        self.out_ptr, self.out_dst, self.pending)
        return ready[:count].tolist()  # type: ignore[no-any-return]


#: Rounds of :func:`interchangeable_devices`' check, each a pass over the op times: the devices of a candidate
#: class that differ from its first device in their links (another node's) try again among themselves.
TWIN_ROUNDS = 4


def interchangeable_devices(schedule: ListSchedule) -> np.ndarray:
    """The first device each device of ``schedule`` is interchangeable with while neither has an op, ``[num_devices]``.

    Two devices are interchangeable when the same bits give every op's and every group's seconds on them, which
    groups may use them (``min_speed``), their room, when they are free and the links to them from every other device
    (latency and bandwidth), and no op is on either: ETF would list the same ops on both, under the same keys, and
    HEFT would see the same finish on both. A device alike with
    none before it is its own. The devices are grouped by a few rows of these and every group is then checked bit for
    bit (:func:`~gnplace.placers._listsched_kernel.twin_kernel`, :data:`TWIN_ROUNDS` rounds); one that differs
    anywhere is its own.

    Examples:
        >>> from gnplace.toy import chain_graph
        >>> from gnplace.cluster import load_cluster
        >>> from gnplace.sim.costmodel import op_times
        >>> g = chain_graph(2)
        >>> def twins(name):
        ...     return interchangeable_devices(ListSchedule(g, load_cluster(name), op_times(g, load_cluster(name))))
        >>> twins("k80x4").tolist(), twins("cpu_gpu").tolist()
        ([0, 0, 0, 0], [0, 1])
        >>> twins("v100x8").tolist()  # two nodes of four
        [0, 0, 0, 0, 4, 4, 4, 4]
    """
    n, num_devices = schedule.op_time.shape[0], schedule.column.shape[0]
    hosting = np.zeros(num_devices)
    hosting[schedule.op_device[schedule.op_device >= 0]] = 1.0
    # a device with an op is alike with none: its index joins its state
    state = np.stack([schedule.room, schedule.device_free, hosting, np.arange(num_devices) * hosting]).view(np.uint64)
    op_bits = schedule.op_time.view(np.uint64)  # the distinct columns
    key = np.concatenate([state, op_bits[[0, n // 2, n - 1] if n else []][:, schedule.column]]).T
    label = np.unique(key, axis=0, return_inverse=True)[1].reshape(-1).astype(np.int64)
    # two devices' op times hold the same bits where their columns do, and then so do their group times (sums of
    # them): the columns' classes of equal bits stand for both matrices, a row of [devices]
    op_class = _alike_columns(schedule.op_time)[schedule.column][None].astype(np.uint64)
    twin = twin_kernel(op_class, np.ascontiguousarray(schedule.group_ok), schedule.column,
                       state, np.ascontiguousarray(schedule.latency, dtype=np.float64).view(np.uint64),
                       np.ascontiguousarray(schedule.inv_bw, dtype=np.float64).view(np.uint64), label, TWIN_ROUNDS)
    return twin  # type: ignore[no-any-return]


def _alike_columns(times: np.ndarray) -> np.ndarray:
    """The first column of ``times [rows, columns]`` holding the same bits as each column, ``[columns]`` int64.

    Columns are keyed by a digest of their bytes and compared bit for bit with the first of that digest (``np.unique``
    over one column of 93,567 rows, as a structured type of 93,567 fields, took 0.4 s).
    """
    first: dict[bytes, list[int]] = {}
    out = np.empty(times.shape[1], dtype=np.int64)
    for j in range(times.shape[1]):
        column = np.ascontiguousarray(times[:, j])
        alike = first.setdefault(hashlib.blake2b(column.tobytes(), digest_size=16).digest(), [])
        out[j] = next((k for k in alike if np.array_equal(times[:, k].view(np.uint64), column.view(np.uint64))), j)
        if out[j] == j:
            alike.append(j)
    return out


#: The revision of :func:`etf_schedule`'s results, that of ``m_etf`` and ``m_sct``, which both run it. 2026-11-30: a
#: ready op is listed on its new devices as soon as a placed group takes the room its own group would have needed
#: (until then only when its stale entry reached a heap top). 3 (2026-12-04): where the memory repair left a placement
#: over memory, it tries the largest device and a descent by the simulated overflow (placements that fitted are as
#: before).
ETF_REVISION = "3"


def etf_schedule(
    schedule: ListSchedule, rank: np.ndarray, *, favourite_parent: np.ndarray | None = None,
    favourite_bytes: np.ndarray | None = None,
) -> None:
    """Earliest Task First: repeatedly schedule the ready (op, device) pair that starts earliest.

    Ties go to the op of higher ``rank``, then the earlier finish, then the lower device index.
    With ``favourite_parent``, an op ``v`` that is the favourite child of producer
    ``p = favourite_parent[v] >= 0`` goes to ``p``'s device instead of the ETF choice whenever it
    can start there no later than its ETF start plus the seconds the edge ``p -> v`` would take
    between the two devices (m-SCT's rule: the communication saved pays for the wait).

    Per device two heaps hold the ready ops allowed there: ops whose inputs arrive after the
    device is free, by arrival time, and ops that could start as soon as the device is free, by
    rank. The earliest start on a device is then read off the heap tops, so a step costs
    ``O(num_devices log num_ops)``; stale entries (ops scheduled elsewhere, groups fixed elsewhere
    or out of room) are dropped when they reach a top. When a placed group takes room on a device,
    the ready ops of unplaced groups listed there are listed at once on the devices they may use
    now (where no device has room for a group, those with the most room left), so that no earliest
    start is missed. Of interchangeable devices without ops (:func:`interchangeable_devices`: alike
    op times, room, links, none busy) only the first has heaps: the others would hold the same entries
    and lose every tie to it by index; when it takes an op the next one gets a copy of its heaps. On
    many alike devices a step so costs ``O(devices in use log num_ops)``, an op's listing as many
    pushes, where each ready op was listed on every device. The loop is compiled
    (:func:`~gnplace.placers._listsched_kernel.etf_kernel`); :class:`ListSchedule`'s methods say what
    each of its steps does.

    Args:
        schedule (ListSchedule): the empty schedule; filled in place.
        rank (np.ndarray): priority of each op, higher first, ``[num_ops]``.
        favourite_parent (np.ndarray, optional): the producer each op is the favourite child of,
            or -1, ``[num_ops]`` (default: none, plain ETF).
        favourite_bytes (np.ndarray, optional): bytes on the edge from that producer, ``[num_ops]``.
    """
    n = schedule.op_time.shape[0]
    if favourite_parent is None or favourite_bytes is None:
        favourite_parent, favourite_bytes = np.full(n, -1, dtype=np.int64), np.zeros(n)
    state = (*schedule.arrays(), interchangeable_devices(schedule))
    listings = etf_kernel(schedule.op_time, -np.asarray(rank, dtype=np.float64),
                          np.asarray(favourite_parent, dtype=np.int64), np.asarray(favourite_bytes, dtype=np.float64),
                          *state)
    assert listings >= 0, "list scheduling stalled: no ready op has a device"


def place_by_schedule(
    graph: OpGraph, cluster: Cluster, run: Callable[[ListSchedule], None], *, timer: StepTimer,
    memory_aware: bool, min_speed: float,
) -> Placement:
    """Build a :class:`ListSchedule`, let ``run`` fill it, and turn it into a memory-checked placement.

    Args:
        graph (OpGraph): the graph.
        cluster (Cluster): the devices.
        run (callable): ``run(schedule)`` schedules every op.
        timer (StepTimer): checks memory; op-time estimates come from its cost model.
        memory_aware (bool): reserve group memory while scheduling and repair an out-of-memory result.
        min_speed (float): keep each group to devices at least this fraction as fast for it as
            its fastest device.
    """
    op_time, column = timer.cost_model.op_time_columns(graph, cluster)  # the distinct columns: the same bits
    schedule = ListSchedule(graph, cluster, op_time, min_speed=min_speed, memory_aware=memory_aware, column=column)
    run(schedule)
    group_devices = schedule.group_device
    if memory_aware:
        group_devices = repair_memory(graph, cluster, group_devices, timer=timer)
    return Placement.from_groups(graph, cluster, group_devices)


class ListSchedulingPlacer:
    """The options, ``repr`` and :meth:`place` shared by the list-scheduling placers (``heft``, ``m_etf``, ``m_sct``).

    A subclass sets ``name`` and implements :meth:`fill_schedule`; :meth:`place` hands it an empty
    :class:`ListSchedule` through :func:`place_by_schedule`. The default ``min_speed`` is the ETF
    placers'; ``heft`` overrides it with 0.

    Args:
        memory_aware (bool, optional): respect device memory (default: :obj:`True`).
        min_speed (float, optional): a group only goes to devices that run it at least this
            fraction as fast as its fastest device: ETF compares start times, as if devices were
            alike, and would hand heavy groups to an idle CPU beside a GPU (default: ``0.5``).
        timer (StepTimer, optional): checks memory; op-time estimates come from its cost model
            (default: ``Simulator()``).
    """

    name: str
    accepts = frozenset({"timer"})

    def __init__(
        self, *, memory_aware: bool = True, min_speed: float = 0.5, timer: StepTimer | None = None
    ) -> None:
        owner = getattr(self, "name", type(self).__name__)
        self.memory_aware = check_flag(owner, "memory_aware", memory_aware)
        self.min_speed = check_fraction(owner, "min_speed", min_speed)
        self.timer = timer or Simulator()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(memory_aware={self.memory_aware}, min_speed={self.min_speed})"

    def fill_schedule(self, graph: OpGraph, cluster: Cluster, schedule: ListSchedule) -> None:
        """Schedule every op of ``graph`` into the empty ``schedule``, in place."""
        raise NotImplementedError

    def place(self, graph: OpGraph, cluster: Cluster, *, seed: SeedLike = None) -> Placement:
        """Place ``graph`` on ``cluster`` (``seed`` is checked, and unused: this placer is deterministic)."""
        check_graph_and_cluster(graph, cluster)
        check_seed(seed)

        def run(schedule: ListSchedule) -> None:
            self.fill_schedule(graph, cluster, schedule)

        return place_by_schedule(
            graph, cluster, run, timer=self.timer, memory_aware=self.memory_aware, min_speed=self.min_speed
        )
