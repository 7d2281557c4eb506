"""Event-driven simulator of one training step of a placed graph.

The simulator is the :class:`StepTimer` every placer is scored by. It plays one step of the graph
on the cluster: each device runs one op at a time from a queue ordered by ready time; an op is
ready once all its inputs are on its device; each output crosses to every other device that
consumes it once, over the link between the two devices, one transfer at a time per link
direction; memory per device is resident parameters plus live activations (freed after the last
consumer), whose peak is compared with the device's capacity.

Two modes:

``"default"``
    Op times from the Paleo-style cost model (:func:`~gnplace.sim.costmodel.op_times`) with the
    per-op launch overhead, transfers over the per-pair links of the cluster.
``"placeto"``
    The reference behaviour of Placeto's simulator (Addanki et al., NeurIPS 2019): each output is
    sent once over the *sender's* outbound channel to all remote consumers together, at 7,600
    bytes/us, after which the channel waits 25 us; a device waits 5.7 us after each op of non-zero
    cost. Op times come from measured costs or the cost model without launch overhead.

The event loop is compiled with numba (``gnplace/sim/_kernel.py``); :meth:`Simulator.time_batch`
scores many placements of one graph in parallel.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import numpy as np

from gnplace.cluster import Cluster
from gnplace.exceptions import InvalidPlacement
from gnplace.graph import OpGraph
from gnplace.placement import Placement, as_placement
from gnplace.sim import _kernel
from gnplace.sim.costmodel import op_times

__all__ = ["Simulator", "StepResult", "BatchResult", "Timeline", "StepTimer", "simulate", "SimMode"]

SimMode = Literal["default", "placeto"]

#: Placeto's channel bandwidth, 7,600 bytes per microsecond, in bytes/s.
PLACETO_CHANNEL_BANDWIDTH = 7600e6
#: Seconds Placeto's channel waits after each transfer.
PLACETO_TRANSFER_GAP = 25e-6
#: Seconds a device waits after each op of non-zero cost in Placeto's simulator.
PLACETO_OP_GAP = 5.7e-6


@dataclass(frozen=True)
class Timeline:
    """When and where every op and transfer of a simulated step ran.

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


@dataclass(frozen=True)
class StepResult:
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


@dataclass(frozen=True)
class BatchResult:
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


class StepTimer(Protocol):
    """Anything that times one training step of a placed graph (the simulator, real devices)."""

    def time(self, graph: OpGraph, cluster: Cluster, placement: Any, *, timeline: bool = False) -> StepResult:
        """Time one step of ``graph`` placed on ``cluster`` by ``placement``."""
        ...


class _Prepared:
    """Arrays of one (graph, cluster, mode) laid out for the kernel."""

    def __init__(self, graph: OpGraph, cluster: Cluster, mode: SimMode) -> None:
        self.graph = graph
        self.cluster = cluster
        self.cost = np.ascontiguousarray(op_times(graph, cluster, launch_overhead=(mode == "default")))
        self.out_bytes = graph.out_bytes.astype(np.float64)
        self.param_bytes = graph.param_bytes.astype(np.float64)
        out_ptr, out_dst, out_eb = graph.out_csr
        in_ptr, in_src, _ = graph.in_csr
        with np.errstate(divide="ignore"):
            inv_bw = 1.0 / cluster.bandwidth
        placeto = mode == "placeto"
        self.args = (
            self.cost, self.out_bytes, self.param_bytes, out_ptr, out_dst, out_eb.astype(np.float64),
            in_ptr, in_src, np.ascontiguousarray(inv_bw), np.ascontiguousarray(cluster.latency),
            1 if placeto else 0,
            1.0 / PLACETO_CHANNEL_BANDWIDTH,
            PLACETO_OP_GAP if placeto else 0.0,
            PLACETO_TRANSFER_GAP if placeto else 0.0,
        )


class Simulator:
    """The event-driven step simulator; a :class:`StepTimer`.

    Args:
        mode (str, optional): ``"default"`` (cost model, per-pair links) or ``"placeto"``
            (Placeto's reference behaviour) (default: ``"default"``).
        cache_size (int, optional): how many (graph, cluster) pairs to keep prepared
            (default: 16).

    Examples:
        >>> from gnplace.toy import chain_graph
        >>> from gnplace.cluster import load_cluster
        >>> g, c = chain_graph(4), load_cluster("k80x2")
        >>> sim = Simulator()
        >>> r = sim.time(g, c, [0, 0, 0, 0])
        >>> round(r.step_time, 9) == round(float(sim.op_times(g, c)[:, 0].sum()), 9)
        True
    """

    def __init__(self, mode: SimMode = "default", *, cache_size: int = 16) -> None:
        if mode not in ("default", "placeto"):
            raise ValueError(f"unknown simulator mode {mode!r} (choose 'default' or 'placeto')")
        self.mode: SimMode = mode
        self.cache_size = cache_size
        self._cache: OrderedDict[tuple[int, int], _Prepared] = OrderedDict()

    def __repr__(self) -> str:
        return f"Simulator(mode={self.mode!r})"

    def _prepared(self, graph: OpGraph, cluster: Cluster) -> _Prepared:
        key = (id(graph), id(cluster))
        prepared = self._cache.get(key)
        if prepared is None or prepared.graph is not graph or prepared.cluster is not cluster:
            prepared = _Prepared(graph, cluster, self.mode)
            self._cache[key] = prepared
            while len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)
        else:
            self._cache.move_to_end(key)
        return prepared

    def op_times(self, graph: OpGraph, cluster: Cluster) -> np.ndarray:
        """Seconds of each op on each device as this simulator charges them, ``[num_ops, num_devices]``."""
        return self._prepared(graph, cluster).cost

    def time(self, graph: OpGraph, cluster: Cluster, placement: Any, *, timeline: bool = False) -> StepResult:
        """Simulate one step of ``graph`` on ``cluster`` under ``placement``.

        Args:
            graph (OpGraph): the graph.
            cluster (Cluster): the cluster.
            placement (Placement | array-like | dict): a :class:`Placement`, a device index per
                op, or op name to device name.
            timeline (bool, optional): also return every op's and transfer's start and end
                (default: :obj:`False`).

        Raises:
            InvalidPlacement: if ``placement`` does not place every op on a device of ``cluster``.
        """
        placed = as_placement(graph, cluster, placement)
        prepared = self._prepared(graph, cluster)
        out = _kernel.simulate_step(np.ascontiguousarray(placed.devices), *prepared.args)
        step, busy, peak, op_start, op_end, nx = out[:6]
        if step < 0:  # pragma: no cover - OpGraph guarantees a DAG
            raise RuntimeError("simulation did not finish every op")
        record = None
        if timeline:
            x_node, x_src, x_dst, x_bytes, x_start, x_end = (a[:nx].copy() for a in out[6:])
            record = Timeline(op_start, op_end, placed.devices.copy(), x_node, x_src, x_dst, x_bytes, x_start, x_end)
        return StepResult(float(step), busy, peak, cluster.memory, cluster.device_names, record)

    def time_batch(self, graph: OpGraph, cluster: Cluster, placements: Any) -> BatchResult:
        """Simulate many placements of one graph at once, in parallel threads.

        Args:
            placements (array-like): device index per op for each placement, ``[batch, num_ops]``.

        Raises:
            InvalidPlacement: if the array has the wrong shape or names a device that does not exist.
        """
        array = np.ascontiguousarray(np.asarray(placements, dtype=np.int64))
        if array.ndim != 2 or array.shape[1] != graph.num_ops:
            raise InvalidPlacement(f"batch of placements has shape {array.shape}, expected (batch, {graph.num_ops})")
        if array.size and (array.min() < 0 or array.max() >= cluster.num_devices):
            raise InvalidPlacement(f"batch of placements names a device outside 0..{cluster.num_devices - 1}")
        prepared = self._prepared(graph, cluster)
        steps, busy, peaks = _kernel.simulate_many(array, *prepared.args)
        return BatchResult(steps, busy, peaks, np.any(peaks > cluster.memory[None, :], axis=1))


_DEFAULT_SIMULATORS: dict[str, Simulator] = {}


def simulate(
    graph: OpGraph, cluster: Cluster, placement: Placement | Any, *, mode: SimMode = "default", timeline: bool = False
) -> StepResult:
    """Simulate one training step; a shortcut for ``Simulator(mode).time(...)``.

    Examples:
        >>> from gnplace.toy import fork_graph
        >>> from gnplace.cluster import load_cluster
        >>> r = simulate(fork_graph(), load_cluster("k80x2"), [0, 0, 1, 0])
        >>> r.step_time > 0, r.is_oom
        (True, False)
    """
    sim = _DEFAULT_SIMULATORS.get(mode)
    if sim is None:
        sim = _DEFAULT_SIMULATORS[mode] = Simulator(mode)
    return sim.time(graph, cluster, placement, timeline=timeline)
