"""Paleo-style cost model: seconds of each op on each device, and of each transfer.

Following Paleo (Qi, Sparks & Talwalkar, ICLR 2017, https://openreview.net/forum?id=SyVVJ85lg),
an op's time on a device is a compute term plus a memory-traffic term, each at a fitted fraction
("platform percent of peak") of the device's peak, plus a per-op launch overhead:

.. math::
    t(v, k) = \\frac{\\mathrm{FLOP}_v}{F_k \\, \\eta^F_k}
            + \\frac{B^{in}_v + B^{out}_v + 2 P_v}{M_k \\, \\eta^M_k} + o_k

with :math:`F_k` peak FLOP/s, :math:`M_k` memory bandwidth (bytes/s), :math:`\\eta` the efficiencies,
:math:`B^{in}, B^{out}` bytes read from producers and written, :math:`P_v` resident parameter and
optimizer-state bytes (read and written by an update op) and :math:`o_k` the launch overhead (s).
A transfer of :math:`b` bytes from device :math:`a` to :math:`c` takes
:math:`\\lambda_{ac} + b / W_{ac}` seconds (latency plus bytes over effective bandwidth; Paleo has no
latency term, gnplace adds one). Where a graph carries measured seconds for a device kind, those win.
Paleo floors an op's time at one clock cycle of its device; gnplace models no clock rate and no such floor:
without the launch overhead (``launch_overhead=False``, Placeto's mode, or a device's ``launch_overhead: 0``)
an op of no FLOP and no bytes takes 0 s, and a tiny one less than a cycle (1,000 FLOP on a K80: 0.8 ns).

:class:`CostModel` bundles these rules with the transfer rule a timer follows, so that a placer plans
with the same costs its :class:`~gnplace.sim.timer.StepTimer` will charge: :data:`DEFAULT_COSTS` for
the simulator's default mode (and for real devices, whose measured seconds live in the graph), and
:data:`PLACETO_COSTS` for Placeto's reference simulator.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gnplace.cluster import Cluster, Device
from gnplace.exceptions import InvalidArgument
from gnplace.graph import OpGraph
from gnplace.limits import MAX_COUNT, MAX_SECONDS, MIN_RATE, finite_number
from gnplace.placement import check_graph_and_cluster

__all__ = [
    "op_times", "op_time_columns", "spread_columns", "spread_sums", "transfer_time", "CostModel", "DEFAULT_COSTS",
    "PLACETO_COSTS", "PLACETO_CHANNEL_BANDWIDTH", "PLACETO_OP_GAP", "PLACETO_TRANSFER_GAP",
]

#: Placeto's channel bandwidth, 7,600 bytes per microsecond, in bytes/s (Addanki et al., NeurIPS 2019).
PLACETO_CHANNEL_BANDWIDTH = 7600e6
#: Seconds Placeto's channel waits after each transfer.
PLACETO_TRANSFER_GAP = 25e-6
#: Seconds a device waits after each op of non-zero cost in Placeto's simulator.
PLACETO_OP_GAP = 5.7e-6


def op_times(graph: OpGraph, cluster: Cluster, *, launch_overhead: bool = True) -> np.ndarray:
    """Seconds of every op on every device, ``[num_ops, num_devices]``.

    Args:
        graph (OpGraph): the graph.
        cluster (Cluster): the devices.
        launch_overhead (bool, optional): add each device's per-op launch overhead to modelled
            (not measured) times; Placeto's mode models it as a gap after the op instead
            (default: :obj:`True`).

    Returns:
        np.ndarray: float64 seconds; measured ``graph.cost_s[kind]`` where present, else the model.

    Raises:
        InvalidArgument: if ``graph`` is no :class:`~gnplace.graph.OpGraph` or ``cluster`` no
            :class:`~gnplace.cluster.Cluster`.

    Examples:
        >>> from gnplace.toy import chain_graph
        >>> from gnplace.cluster import load_cluster
        >>> t = op_times(chain_graph(2), load_cluster("cpu_gpu"))
        >>> t.shape, bool(t[0, 0] > t[0, 1])  # the CPU is slower than the GPU
        ((2, 2), True)
    """
    times, column = op_time_columns(graph, cluster, launch_overhead=launch_overhead)
    if times.shape[1] == cluster.num_devices:
        return times
    return spread_columns(times, column)


def spread_columns(columns: np.ndarray, column: np.ndarray) -> np.ndarray:
    """``columns[:, column]``, C order: each device's column of the distinct ones, bit for bit.

    Devices alike side by side (a cluster file's entry with a count) get their column as one broadcast slice:
    ``np.take`` wrote 4,096 K80s' [93,567, 4,096] op times in 4.5 s a call on a loaded machine, the slices in 0.4 s.
    On fewer than ``_SLICE_MIN_DEVICES`` devices, or where they make more than ``_MAX_SLICES`` runs, it takes
    every column (k80x4, 9,651 ops: take 28 us, slices 47 us).

    Examples:
        >>> spread_columns(np.array([[1.0, 2.0]]), np.array([0, 0, 1, 0])).tolist()
        [[1.0, 1.0, 2.0, 1.0]]
    """
    out = np.empty((columns.shape[0], column.shape[0]))
    start = np.flatnonzero(np.diff(column)) + 1
    if column.shape[0] < _SLICE_MIN_DEVICES or start.shape[0] + 1 > _MAX_SLICES:
        return np.take(columns, column, axis=1, out=out, mode="clip")  # "clip": writes into out where "raise" copies
    for lo, hi in zip(np.r_[0, start].tolist(), np.r_[start, column.shape[0]].tolist()):
        out[:, lo:hi] = columns[:, column[lo], None]
    return out


def spread_sums(columns: np.ndarray, column: np.ndarray) -> np.ndarray:
    """``spread_columns(columns, column).sum(axis=0)`` (``[len(column)]``), bit for bit, each distinct column once.

    numpy sums the columns of a C-order matrix of two or more columns one row after another, and a matrix of one
    column pairwise; the distinct columns are summed as the spread matrix's would be (two of them at least, a lone
    one twice, where it has two or more columns). On 4,096 K80s the device with the least total op time of 93,567
    ops (:func:`~gnplace.placers.groups.memory_need`'s) took 4.6 s to find through the [93,567, 4,096] matrix.

    Examples:
        >>> c = np.array([[1.0, 2.0], [3.0, 4.0]])
        >>> spread_sums(c, np.array([1, 0, 1])).tolist() == spread_columns(c, np.array([1, 0, 1])).sum(axis=0).tolist()
        True
    """
    column = np.asarray(column, dtype=np.int64)
    if column.shape[0] < 2:  # one column: summed pairwise, as the spread matrix's lone column is
        return np.ascontiguousarray(columns[:, column]).sum(axis=0)
    used, index = np.unique(column, return_inverse=True)
    distinct = np.ascontiguousarray(columns[:, np.repeat(used, 2) if used.shape[0] < 2 else used])
    return distinct.sum(axis=0)[index.reshape(-1)]  # type: ignore[no-any-return]


#: :func:`spread_columns` copies a column to each run of alike devices at most this many times, and on at least this
#: many devices; else it takes every column (9,651 ops: 8 devices 50 us either way; 16 devices 95 us by take, 65 by
#: slices).
_MAX_SLICES, _SLICE_MIN_DEVICES = 64, 16


def op_time_columns(
    graph: OpGraph, cluster: Cluster, *, launch_overhead: bool = True
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`op_times` as its distinct columns: seconds ``[num_ops, num_kinds]`` and each device's column.

    Devices alike in every field the times read (kind, peaks, efficiencies, launch overhead) share one
    column, computed once, in the order of their first device. ``times[:, column]`` is :func:`op_times`, bit for bit.

    Returns:
        tuple[np.ndarray, np.ndarray]: float64 seconds ``[num_ops, num_kinds]`` (C order) and int64
        ``column [num_devices]``.

    Examples:
        >>> from gnplace.toy import chain_graph
        >>> from gnplace.cluster import load_cluster
        >>> times, column = op_time_columns(chain_graph(2), load_cluster("k80x4"))
        >>> times.shape, column.tolist()
        ((2, 1), [0, 0, 0, 0])

    Raises:
        InvalidArgument: if ``graph`` is no :class:`~gnplace.graph.OpGraph` or ``cluster`` no
            :class:`~gnplace.cluster.Cluster` (as for :func:`op_times` and the :class:`CostModel` methods).
    """
    check_graph_and_cluster(graph, cluster)  # None was an AttributeError ('in_bytes', 'devices')
    traffic = graph.in_bytes + graph.out_bytes + 2.0 * graph.param_bytes
    slot: dict[tuple[str, float, float, float, float, float], int] = {}
    column = [slot.setdefault(_time_fields(dev), len(slot)) for dev in cluster.devices]
    times = np.empty((graph.num_ops, len(slot)), dtype=np.float64)
    for (kind, peak_flops, flops_efficiency, mem_bandwidth, mem_efficiency, overhead), k in slot.items():
        modelled = graph.flops / (peak_flops * flops_efficiency) + traffic / (mem_bandwidth * mem_efficiency)
        if launch_overhead:
            modelled = modelled + overhead
        measured = graph.measured_cost(kind)
        times[:, k] = modelled if measured is None else np.where(np.isnan(measured), modelled, measured)
    return times, np.asarray(column, dtype=np.int64)


def _time_fields(dev: Device) -> tuple[str, float, float, float, float, float]:
    """What :func:`op_times` reads of ``dev``: kind, peak FLOP/s, memory bytes/s, efficiencies, launch overhead (s)."""
    return (dev.kind, dev.peak_flops, dev.flops_efficiency, dev.mem_bandwidth, dev.mem_efficiency, dev.launch_overhead)


def transfer_time(cluster: Cluster, src: int, dst: int, num_bytes: float) -> float:
    """Seconds to send ``num_bytes`` from device ``src`` to ``dst``: latency + bytes / bandwidth."""
    return cluster.transfer_time(src, dst, num_bytes)


@dataclass(frozen=True)
class CostModel:
    """The analytic costs of one step: op times (Paleo) and the rule transfers follow.

    A :class:`~gnplace.sim.timer.StepTimer` names the cost model that describes it (its
    ``cost_model``); placers estimate op and transfer times from that model, never by asking the
    timer, so that a timer which can only time whole placements (real devices) still drives them.

    Args:
        launch_overhead (bool, optional): add each device's per-op launch overhead to modelled op
            times (default: :obj:`True`).
        op_gap (float, optional): seconds a device idles after each op of non-zero cost
            (default: 0; Placeto: 5.7e-6).
        channel_bandwidth (float or None, optional): ``None``: each output crosses the link
            between its two devices (latency + bytes / bandwidth of the pair), one transfer at a time
            per link direction; a number (bytes/s): Placeto's rule, each output is sent once over
            the sender's channel at this rate to all remote consumers together (default: ``None``).
        transfer_gap (float, optional): seconds a channel waits after each transfer (default: 0;
            Placeto: 25e-6).

    Examples:
        >>> from gnplace.toy import chain_graph
        >>> from gnplace.cluster import load_cluster
        >>> g, c = chain_graph(2), load_cluster("k80x2")
        >>> bool((DEFAULT_COSTS.op_times(g, c) > PLACETO_COSTS.op_times(g, c)).all())  # launch overhead
        True
        >>> PLACETO_COSTS.shared_channel, DEFAULT_COSTS.shared_channel
        (True, False)
    """

    launch_overhead: bool = True
    op_gap: float = 0.0
    channel_bandwidth: float | None = None
    transfer_gap: float = 0.0

    def __post_init__(self) -> None:
        """Refuse fields the simulator cannot time by, as one line.

        Nothing was checked: ``channel_bandwidth=0`` gave edge delays of NaN (0 bytes over 0 B/s) and infinity, and a
        gap of -1 s or NaN, or ``launch_overhead="no"`` (taken as true), timed steps without a word.

        Raises:
            InvalidArgument: if ``launch_overhead`` is no bool, a gap is not seconds in [0, MAX_SECONDS], or
                ``channel_bandwidth`` is neither None nor bytes/s in [MIN_RATE, MAX_COUNT].
        """
        if not isinstance(self.launch_overhead, bool | np.bool_):
            raise InvalidArgument(f"CostModel: launch_overhead must be True or False, got {self.launch_overhead!r}")
        for name in ("op_gap", "transfer_gap"):
            value = getattr(self, name)
            if not finite_number(value) or not 0 <= value <= MAX_SECONDS:
                raise InvalidArgument(f"CostModel: {name} must be seconds in [0, {MAX_SECONDS:.3g}], got {value!r}")
        rate = self.channel_bandwidth
        if rate is not None and (not finite_number(rate) or not MIN_RATE <= rate <= MAX_COUNT):
            raise InvalidArgument(f"CostModel: channel_bandwidth must be None (per-pair links) or bytes/s in "
                                  f"[{MIN_RATE:g}, {MAX_COUNT:.3g}], got {rate!r}")

    @property
    def shared_channel(self) -> bool:
        """Whether outputs go over one channel per sender (Placeto's rule) rather than per-pair links."""
        return self.channel_bandwidth is not None

    def op_times(self, graph: OpGraph, cluster: Cluster) -> np.ndarray:
        """Seconds of every op on every device, ``[num_ops, num_devices]`` (see :func:`op_times`)."""
        return op_times(graph, cluster, launch_overhead=self.launch_overhead)

    def op_time_columns(self, graph: OpGraph, cluster: Cluster) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`op_times` as its distinct columns and each device's column (see :func:`op_time_columns`)."""
        return op_time_columns(graph, cluster, launch_overhead=self.launch_overhead)

    def edge_delays(self, graph: OpGraph, cluster: Cluster) -> np.ndarray:
        """Seconds each edge's bytes take from device ``a`` to ``b``, ``[num_edges, D, D]``, 0 on the diagonal.

        Per-pair links: latency plus bytes over the pair's bandwidth; shared channel: bytes over
        the channel bandwidth (its wait after the transfer is not part of the delay).

        Examples:
            >>> from gnplace.toy import chain_graph
            >>> from gnplace.cluster import load_cluster
            >>> delays = DEFAULT_COSTS.edge_delays(chain_graph(2), load_cluster("k80x2"))
            >>> round(float(delays[0, 0, 1]) * 1e6, 3)  # microseconds: 25 us + 4 MB at 7.6 GB/s
            551.316

        Raises:
            InvalidArgument: if ``graph`` is no :class:`~gnplace.graph.OpGraph` or ``cluster`` no
                :class:`~gnplace.cluster.Cluster`.
        """
        check_graph_and_cluster(graph, cluster)  # None was an AttributeError ('num_devices', 'edge_bytes')
        d = cluster.num_devices
        if self.channel_bandwidth is not None:
            per_edge = graph.edge_bytes[:, None, None] / self.channel_bandwidth * np.ones((1, d, d))
        else:
            per_edge = cluster.latency[None] + graph.edge_bytes[:, None, None] / cluster.bandwidth[None]
        return per_edge * (1.0 - np.eye(d))[None]


#: The simulator's default costs: Paleo op times with launch overhead, per-pair links.
DEFAULT_COSTS = CostModel()
#: The costs of Placeto's reference simulator: no launch overhead but a gap after each op, one
#: channel per sender at 7,600 bytes/us with 25 us after each transfer.
PLACETO_COSTS = CostModel(
    launch_overhead=False, op_gap=PLACETO_OP_GAP, channel_bandwidth=PLACETO_CHANNEL_BANDWIDTH,
    transfer_gap=PLACETO_TRANSFER_GAP,
)
