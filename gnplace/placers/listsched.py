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

Times follow the cost model: op ``v`` takes ``t[v, d]`` seconds on device ``d`` and an edge of
``b`` bytes from device ``a`` to ``c != a`` takes :math:`\\lambda_{ac} + b / W_{ac}` seconds.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable

import numpy as np

from gnplace.cluster import Cluster
from gnplace.graph import OpGraph
from gnplace.placement import Placement
from gnplace.placers.base import check_flag, check_fraction
from gnplace.placers.groups import group_memory, group_times, repair_memory
from gnplace.seed import SeedLike
from gnplace.sim.simulator import Simulator
from gnplace.sim.timer import StepTimer

__all__ = [
    "ListSchedule", "ListSchedulingPlacer", "upward_rank", "mean_comm_time", "static_rank", "etf_schedule",
    "place_by_schedule",
]


def mean_comm_time(cluster: Cluster, devices: np.ndarray, num_bytes: np.ndarray) -> np.ndarray:
    """Seconds to move ``num_bytes`` between two distinct devices of ``devices``, averaged over pairs.

    Returns zeros if fewer than two devices are given.
    """
    d = np.asarray(devices)
    if d.size < 2:
        return np.zeros_like(np.asarray(num_bytes, dtype=np.float64))
    off = ~np.eye(d.size, dtype=bool)
    lat = cluster.latency[np.ix_(d, d)][off].mean()
    inv_bw = (1.0 / cluster.bandwidth[np.ix_(d, d)][off]).mean()
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
    rank = np.asarray(cost, dtype=np.float64).copy()
    topo = graph.topological_order()
    for v in topo[::-1].tolist():
        lo, hi = ptr[v], ptr[v + 1]
        if hi > lo:
            rank[v] += float(np.max(comm[lo:hi] + rank[succ[lo:hi]]))
    return rank


def static_rank(graph: OpGraph, op_time: np.ndarray, cluster: Cluster) -> np.ndarray:
    """:func:`upward_rank` with op and edge times averaged over all devices (seconds, ``[num_ops]``).

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
    return upward_rank(graph, op_time.mean(axis=1), comm)


class ListSchedule:
    """A schedule under construction: devices, start and finish times of ops, memory left.

    Args:
        graph (OpGraph): the graph.
        cluster (Cluster): the devices.
        op_time (np.ndarray): seconds of each op on each device, ``[num_ops, num_devices]``.
        min_speed (float, optional): a group may only go to devices that run it at least this
            fraction as fast as its fastest device does (default: 0, any device).
        memory_aware (bool, optional): reserve each group's memory and keep groups off devices
            without room (default: :obj:`True`).

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
        memory_aware: bool = True,
    ) -> None:
        self.graph = graph
        self.op_time = op_time
        n, num_devices = op_time.shape
        self.group_time = group_times(graph, op_time)
        fastest = self.group_time.min(axis=1, keepdims=True)
        self.group_ok = self.group_time * min_speed <= fastest * (1 + 1e-9)
        self.memory_aware = memory_aware
        self.group_bytes = group_memory(graph) if memory_aware else np.zeros(graph.num_groups)
        self.room = cluster.memory.astype(np.float64) if memory_aware else np.full(num_devices, np.inf)
        self.latency = cluster.latency
        with np.errstate(divide="ignore"):
            self.inv_bw = 1.0 / cluster.bandwidth  # 0 on the diagonal: no transfer on one device
        self.op_device = np.full(n, -1, dtype=np.int64)
        self.start = np.zeros(n)
        self.finish = np.zeros(n)
        self.device_free = np.zeros(num_devices)
        self.group_device = np.full(graph.num_groups, -1, dtype=np.int64)
        self.in_ptr, self.in_src, self.in_bytes = graph.in_csr
        self.out_ptr, self.out_dst, _ = graph.out_csr
        self.pending = np.diff(self.in_ptr).astype(np.int64)
        self._only = np.eye(num_devices, dtype=bool)  # row d: device d alone, what a placed group may use
        self._only.flags.writeable = False

    def sources(self) -> list[int]:
        """Ops with no producers, ready at time 0."""
        return np.flatnonzero(self.pending == 0).tolist()

    def ready_time(self, v: int) -> np.ndarray:
        """When all inputs of ``v`` (whose producers are scheduled) could be on each device, ``[num_devices]``."""
        lo, hi = self.in_ptr[v], self.in_ptr[v + 1]
        if hi == lo:
            return np.zeros(self.device_free.shape[0])
        if hi - lo == 1:  # one producer, most ops: the same sums without the matrix and its max
            p = self.in_src[lo]
            w = self.op_device[p]
            return self.finish[p] + self.latency[w] + self.in_bytes[lo] * self.inv_bw[w]  # type: ignore[no-any-return]
        preds = self.in_src[lo:hi]
        where = self.op_device[preds]
        arrive = self.finish[preds][:, None] + self.latency[where] + self.in_bytes[lo:hi, None] * self.inv_bw[where]
        return arrive.max(axis=0)  # type: ignore[no-any-return]

    def candidates(self, v: int) -> np.ndarray:
        """Devices ``v`` may go to now, ``bool [num_devices]``.

        Its group's device once the group is placed; else the devices fast enough for the group
        (``min_speed``) with room for it, or, if none has room, those of them with the most room.
        """
        g = self.graph.group[v]
        fixed = self.group_device[g]
        if fixed >= 0:
            return self._only[fixed]  # type: ignore[no-any-return]
        room = np.where(self.group_ok[g], self.room, -np.inf)
        fits = room >= self.group_bytes[g]
        return fits if fits.any() else room == room.max()  # type: ignore[no-any-return]

    def fits(self, v: int, d: int) -> bool:
        """Whether ``v`` may still go to device ``d``: whether ``d`` is among :meth:`candidates`."""
        g = self.graph.group[v]
        fixed = self.group_device[g]
        if fixed >= 0:
            return bool(fixed == d)
        if not self.group_ok[g, d]:
            return False
        need = self.group_bytes[g]
        if self.room[d] >= need:
            return True
        most = np.maximum.reduce(self.room, where=self.group_ok[g], initial=-np.inf)  # np.max without its wrapper
        return bool(most < need and self.room[d] == most)

    def assign(self, v: int, d: int, start: float) -> list[int]:
        """Schedule op ``v`` on device ``d`` at ``start`` seconds; returns the ops this makes ready."""
        g = self.graph.group[v]
        if self.group_device[g] < 0:
            self.group_device[g] = d
            self.room[d] -= self.group_bytes[g]
        self.op_device[v] = d
        self.start[v] = start
        self.finish[v] = start + self.op_time[v, d]
        self.device_free[d] = max(self.device_free[d], self.finish[v])
        succ = self.out_dst[self.out_ptr[v] : self.out_ptr[v + 1]]
        self.pending[succ] -= 1
        return succ[self.pending[succ] == 0].tolist()  # type: ignore[no-any-return]


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
    or out of room) are dropped when they reach a top.

    Args:
        schedule (ListSchedule): the empty schedule; filled in place.
        rank (np.ndarray): priority of each op, higher first, ``[num_ops]``.
        favourite_parent (np.ndarray, optional): the producer each op is the favourite child of,
            or -1, ``[num_ops]`` (default: none, plain ETF).
        favourite_bytes (np.ndarray, optional): bytes on the edge from that producer, ``[num_ops]``.
    """
    n, num_devices = schedule.op_time.shape
    devices = list(range(num_devices))
    ready_at = np.zeros((n, num_devices))
    listed = np.zeros((n, num_devices), dtype=bool)
    done = np.zeros(n, dtype=bool)
    waiting: list[list[tuple[float, float, int]]] = [[] for _ in range(num_devices)]
    startable: list[list[tuple[float, int]]] = [[] for _ in range(num_devices)]
    neg_rank = (-np.asarray(rank, dtype=np.float64)).tolist()
    free = schedule.device_free

    listings = [0]

    def enlist(v: int) -> None:
        for d in (schedule.candidates(v) & ~listed[v]).nonzero()[0].tolist():
            listed[v, d] = True
            listings[0] += 1
            heapq.heappush(waiting[d], (float(ready_at[v, d]), neg_rank[v], v))

    def usable(v: int, d: int) -> bool:
        if done[v]:
            return False
        if schedule.fits(v, d):
            return True
        listed[v, d] = False  # out of room or group fixed elsewhere: drop here, list where it fits
        enlist(v)
        return False

    def clean(d: int) -> None:
        """Move ops that could start when ``d`` is free to the rank heap; drop stale tops."""
        wait, now = waiting[d], startable[d]
        while wait and (wait[0][0] <= free[d] or not usable(wait[0][2], d)):
            _, r, v = heapq.heappop(wait)
            if not done[v] and listed[v, d]:
                heapq.heappush(now, (r, v))
        while now and not usable(now[0][1], d):
            heapq.heappop(now)

    def make_ready(vs: list[int]) -> None:
        for v in vs:
            ready_at[v] = schedule.ready_time(v)
            enlist(v)

    make_ready(schedule.sources())
    for _ in range(n):
        before = -1
        while before != listings[0]:  # a dropped top may be listed on a device already cleaned
            before = listings[0]
            for d in devices:
                clean(d)
        best: tuple[float, float, float, int, int] | None = None
        for d in devices:
            if startable[d]:
                r, v = startable[d][0]
                key = (float(free[d]), r, free[d] + schedule.op_time[v, d], d, v)
            elif waiting[d]:
                s, r, v = waiting[d][0]
                key = (s, r, s + schedule.op_time[v, d], d, v)
            else:
                continue
            if best is None or key < best:
                best = key
        assert best is not None, "list scheduling stalled: no ready op has a device"
        start, _, _, d, v = best
        if favourite_parent is not None and favourite_bytes is not None and favourite_parent[v] >= 0:
            p = int(schedule.op_device[favourite_parent[v]])
            if 0 <= p != d and schedule.fits(v, p):
                start_p = max(float(ready_at[v, p]), float(free[p]))
                saved = schedule.latency[p, d] + favourite_bytes[v] * schedule.inv_bw[p, d]
                if start_p <= start + saved:
                    start, d = start_p, p
        done[v] = True
        make_ready(schedule.assign(v, d, start))


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
    schedule = ListSchedule(
        graph, cluster, timer.cost_model.op_times(graph, cluster), min_speed=min_speed, memory_aware=memory_aware
    )
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
        """Place ``graph`` on ``cluster`` (``seed`` is unused: this placer is deterministic)."""

        def run(schedule: ListSchedule) -> None:
            self.fill_schedule(graph, cluster, schedule)

        return place_by_schedule(
            graph, cluster, run, timer=self.timer, memory_aware=self.memory_aware, min_speed=self.min_speed
        )
