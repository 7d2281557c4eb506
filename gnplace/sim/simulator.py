"""Event-driven simulator of one training step of a placed graph.

The simulator is the :class:`~gnplace.sim.timer.StepTimer` placers are scored by unless given
another. It plays one step of the graph on the cluster: each device runs one op at a time from a
queue ordered by ready time; an op is ready once all its inputs are on its device; each output
crosses to every other device that consumes it once, over the link between the two devices, one
transfer at a time per link direction; memory per device is resident parameters plus live
activations (freed after the last consumer), whose peak is compared with the device's capacity.

What the memory count follows, where frameworks differ: a gradient is freed once its update, its last
consumer, has read it, as in a graph that applies each update as its gradient is ready (TensorFlow's, the
setting of the seed papers); eager PyTorch holds every ``.grad`` to the step's end (held so, the peaks of
the shipped real models and cifar10 graphs on one tight4 device rise by at most 7.5%, no OOM verdict
changes). An op's outputs are one block of bytes, live until the last consumer of any of them: a batch
norm's whole output waits for its backward, which reads only the small saved statistics (a small convnet's peak on
one device is 1.38x the bytes its step measured live there, and 1.13-1.37x on each device split in halves or
alternately by op group; the other example models are counted within 0.72-1.10x so). An update counts its
optimizer's state (the update node's ``param_bytes``), not the temporaries it makes as it runs: Adam's and AdamW's
make two tensors of the parameter's size at once (``sqrt`` of the second moment, then its division), 2x the largest
parameter on a device where the executors update one parameter at a time; they are left out of the peak (measured on
the example models with Adam: 1-16% of the simulator's peak on the device, 2-2.7% for the transformer). SGD's update
(the shipped graphs') makes none. The shipped test-split graphs drawn with Adam, and the real graphs given Adam's
state, placed on tight4 by seven heuristic placers keep every OOM verdict with the temporaries added when each
update runs (the nearest, gpt2 by heft, 12 MiB under its 1 GiB); added to the peak instead, 2 of 168 family
placements and 12 of 70 real ones would go over (temporaries of up to 11% and 29% of the device).

Two modes:

``"default"``
    Op times from the Paleo-style cost model (:func:`~gnplace.sim.costmodel.op_times`) with the
    per-op launch overhead, transfers over the per-pair links of the cluster
    (:data:`~gnplace.sim.costmodel.DEFAULT_COSTS`).
``"placeto"``
    The reference behaviour of Placeto's simulator (Addanki et al., NeurIPS 2019): each output is
    sent once over the *sender's* outbound channel to all remote consumers together (the most bytes
    one remote device reads, capped at the output size), at 7,600 bytes/us, after which the
    channel waits 25 us; a device waits 5.7 us after each op of non-zero cost. Op times
    come from measured costs or the cost model without launch overhead
    (:data:`~gnplace.sim.costmodel.PLACETO_COSTS`). Memory is counted as in the default mode
    (resident parameters, a received copy on its receiver), not as Placeto counts it (each output on
    its producer's device alone).

The event loop is compiled with numba (``gnplace/sim/_kernel.py``); :meth:`Simulator.time_batch`
scores many placements of one graph in parallel.
"""

from __future__ import annotations

import functools
import os
import sys
import weakref
from collections import OrderedDict
from typing import Any, Literal

import numpy as np

from gnplace.cluster import Cluster
from gnplace.exceptions import InvalidArgument, UnknownName
from gnplace.graph import OpGraph
from gnplace.limits import is_whole
from gnplace.placement import Placement, as_placement, check_graph_and_cluster
from gnplace.sim import _kernel
from gnplace.sim.costmodel import (
    DEFAULT_COSTS,
    PLACETO_CHANNEL_BANDWIDTH,
    PLACETO_COSTS,
    PLACETO_OP_GAP,
    PLACETO_TRANSFER_GAP,
    CostModel,
    spread_columns,
)
from gnplace.sim.timer import BatchResult, StepResult, StepTimer, Timeline, check_batch

__all__ = [
    "Simulator", "StepResult", "BatchResult", "Timeline", "StepTimer", "simulate", "SimMode",
    "PLACETO_CHANNEL_BANDWIDTH", "PLACETO_OP_GAP", "PLACETO_TRANSFER_GAP",
]

SimMode = Literal["default", "placeto"]

#: The cost model of each simulator mode.
MODE_COSTS: dict[str, CostModel] = {"default": DEFAULT_COSTS, "placeto": PLACETO_COSTS}


class _Prepared:
    """Arrays of one (graph, cluster, cost model) laid out for the kernel.

    ``graph`` and ``cluster`` are weak references (call them for the objects): a cache of these keeps no graph or
    cluster alive (see :meth:`Simulator._prepared`).
    """

    def __init__(self, graph: OpGraph, cluster: Cluster, costs: CostModel, forget: Any = None) -> None:
        self.graph = weakref.ref(graph, forget)
        self.cluster = weakref.ref(cluster, forget)
        # op times by kind of device, each device reading its kind's column: the [num_ops, num_devices] matrix of
        # 4,096 K80s took 3-6 s and 3 GiB to make for a [93,567, 1] one
        self.cost, self.cost_column = costs.op_time_columns(graph, cluster)
        self.out_bytes = graph.out_bytes.astype(np.float64)
        self.param_bytes = graph.param_bytes.astype(np.float64)
        out_ptr, out_dst, out_eb = graph.out_csr
        in_ptr, in_src, _ = graph.in_csr
        inv_bw = cluster.inverse_bandwidth()  # 0 on the diagonal: nothing to send on one device
        channel = costs.channel_bandwidth
        self.args = (
            self.cost, self.cost_column, self.out_bytes, self.param_bytes, out_ptr, out_dst, out_eb.astype(np.float64),
            in_ptr, in_src, np.ascontiguousarray(inv_bw), np.ascontiguousarray(cluster.latency),
            1 if channel is not None else 0,
            1.0 / (channel if channel is not None else PLACETO_CHANNEL_BANDWIDTH),
            costs.op_gap,
            costs.transfer_gap,
            np.array([d.message_cpu for d in cluster.devices], dtype=np.float64),
        )


class Simulator(StepTimer):
    """The event-driven step simulator; a :class:`~gnplace.sim.timer.StepTimer`.

    Args:
        mode (str, optional): ``"default"`` (cost model, per-pair links) or ``"placeto"``
            (Placeto's reference behaviour) (default: ``"default"``).
        cache_size (int, optional): how many (graph, cluster) pairs to keep prepared
            (default: 16).

    Attributes:
        cost_model (CostModel): the costs this simulator charges (set by ``mode``).

    Raises:
        UnknownName: if ``mode`` is neither ``"default"`` nor ``"placeto"``.
        InvalidArgument: if ``cache_size`` is no whole number >= 0.

    Examples:
        >>> from gnplace.toy import chain_graph
        >>> from gnplace.cluster import load_cluster
        >>> g, c = chain_graph(4), load_cluster("k80x2")
        >>> sim = Simulator()
        >>> r = sim.time(g, c, [0, 0, 0, 0])
        >>> round(r.step_time, 9) == round(float(sim.cost_model.op_times(g, c)[:, 0].sum()), 9)
        True
    """

    def __init__(self, mode: SimMode = "default", *, cache_size: int = 16) -> None:
        if not isinstance(mode, str) or mode not in MODE_COSTS:  # a list was an unhashable-type TypeError
            raise UnknownName(f"unknown simulator mode {mode!r} (choose 'default' or 'placeto')")
        if not is_whole(cache_size) or cache_size < 0:
            raise InvalidArgument(f"cache_size must be a whole number >= 0 (graphs kept prepared), got {cache_size!r}")
        self.mode: SimMode = mode
        self.cost_model = MODE_COSTS[mode]
        self.cache_size = int(cache_size)
        self._cache: OrderedDict[tuple[int, int], _Prepared] = OrderedDict()

    def __repr__(self) -> str:
        return f"Simulator(mode={self.mode!r})"

    def __getstate__(self) -> dict[str, Any]:
        """The settings, without the prepared arrays, which are remade on use.

        They held every graph the simulator timed last: a used simulator, or a placer timed by it, pickled to
        6.9 MB after ten cifar10 graphs, for each worker task it went to.
        """
        state = dict(self.__dict__)
        state["_cache"] = OrderedDict()
        return state

    def _prepared(self, graph: OpGraph, cluster: Cluster) -> _Prepared:
        """The arrays of ``(graph, cluster)``, from the cache where they are there.

        Threads may share a simulator (``simulate``'s is one per process): another thread may drop a
        key between this one's look-up and its move, or empty the cache while this one trims it, so
        each step takes what it finds (a KeyError of ``move_to_end`` stopped a threaded caller).

        An entry holds its graph and cluster weakly and leaves the cache when either is collected: it held them,
        and ``gnplace.simulate`` in a loop over graphs kept the last 16 alive after the caller dropped them
        (93,567-op graphs: 850 MB more after 16 of them).
        """
        key = (id(graph), id(cluster))
        prepared = self._cache.get(key)
        if prepared is None or prepared.graph() is not graph or prepared.cluster() is not cluster:
            prepared = _Prepared(graph, cluster, self.cost_model, functools.partial(_forget, self._cache, key))
            self._cache[key] = prepared
            while len(self._cache) > self.cache_size:
                try:
                    self._cache.popitem(last=False)
                except KeyError:  # another thread emptied it
                    break
        else:
            try:
                self._cache.move_to_end(key)
            except KeyError:  # another thread dropped it: the arrays in hand are still this pair's
                pass
        return prepared

    def op_times(self, graph: OpGraph, cluster: Cluster) -> np.ndarray:
        """Seconds of every op on every device, ``[num_ops, num_devices]``: ``cost_model.op_times``'s bits, read-only.

        Spread from the distinct columns this simulator times ``(graph, cluster)`` with, from its cache where the
        pair is prepared, without the cost model computing them again.

        Raises:
            InvalidArgument: if ``graph`` is no :class:`OpGraph` or ``cluster`` no :class:`Cluster`.
        """
        check_graph_and_cluster(graph, cluster)
        prepared = self._prepared(graph, cluster)
        times = spread_columns(prepared.cost, prepared.cost_column)
        times.flags.writeable = False
        return times

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
            InvalidArgument: if ``timeline`` is no bool (``"no"`` would read as true).
        """
        if not isinstance(timeline, bool):  # (the placers' check is imported only where it is needed: they import this)
            from gnplace.placers.base import check_flag

            timeline = check_flag("simulate", "timeline", timeline)
        placed = as_placement(graph, cluster, placement)
        prepared = self._prepared(graph, cluster)
        # a writable copy, as simulate_many's rows are: numba compiles the kernel once per array type
        out = _kernel.simulate_step(placed.devices.copy(), *prepared.args)
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
            graph (OpGraph): the graph.
            cluster (Cluster): the cluster.
            placements (array-like or list of Placement): device index per op for each placement,
                ``[batch, num_ops]``, or the placements themselves.

        Returns:
            BatchResult: each placement's ``step_time`` (seconds), ``busy_time`` (seconds) and ``peak_memory``
            (bytes) per device, and whether it runs out of memory.

        Raises:
            InvalidPlacement: if the array has the wrong shape or names a device that does not exist, or a
                :class:`~gnplace.placement.Placement` is not one of ``graph`` on ``cluster``.
        """
        array = check_batch(graph, cluster, placements)
        prepared = self._prepared(graph, cluster)
        steps, busy, peaks = _simulate_many(array, prepared.args)
        return BatchResult(steps, busy, peaks, np.any(peaks > cluster.memory[None, :], axis=1))


def _forget(cache: OrderedDict[tuple[int, int], _Prepared], key: tuple[int, int], gone: weakref.ref[Any]) -> None:
    """Drop ``cache``'s entry ``key`` once its graph or cluster (``gone``) is collected, if the entry is still its."""
    prepared = cache.get(key)
    if prepared is not None and gone in (prepared.graph, prepared.cluster):
        cache.pop(key, None)


_DEFAULT_SIMULATORS: dict[str, Simulator] = {}

#: Whether this process has made its first parallel kernel call (numba's thread pool runs from then on).
_POOL_STARTED = False

#: Whether this process was forked from one whose thread pool had started: it times batches row by row.
_FORKED_AFTER_POOL = False


def _numba_pool_started() -> bool:
    """Whether numba's parallel thread pool has started in this process, or in the one it was forked from.

    Not only a parallel kernel starts it: ``numba.set_num_threads`` and ``numba.get_num_threads`` do too
    (:func:`gnplace.workers.limit_threads`, :func:`gnplace.workers.threads_kept`). A process forked after
    ``limit_threads(1)`` but before its parent's first batch was ended by GNU OpenMP at its own first batch.
    """
    parallel = sys.modules.get("numba.np.ufunc.parallel")  # loaded with numba; not there, no pool
    return bool(getattr(parallel, "_is_initialized", False))


def _after_fork_in_child() -> None:
    """Mark a child forked from a process whose thread pool had started (by any caller): its batches run row by row."""
    global _FORKED_AFTER_POOL
    _FORKED_AFTER_POOL = _FORKED_AFTER_POOL or _POOL_STARTED or _numba_pool_started()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _simulate_rows(array: np.ndarray, args: tuple[Any, ...]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``_kernel.simulate_many(array, *args)`` one row after another, in this thread (no thread pool)."""
    batch, num_devices = array.shape[0], args[1].shape[0]
    steps, busy, peaks = np.empty(batch), np.empty((batch, num_devices)), np.empty((batch, num_devices))
    for b in range(batch):
        out = _kernel.simulate_step(array[b].copy(), *args)
        steps[b], busy[b], peaks[b] = out[0], out[1], out[2]
    return steps, busy, peaks


def _simulate_many(array: np.ndarray, args: tuple[Any, ...]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``_kernel.simulate_many(array, *args)``, leaving torch's thread count as it was.

    A process's first parallel numba call starts numba's OpenMP thread pool, which sets the OpenMP
    thread count, the one torch reads (``torch.get_num_threads``), to numba's (one per core). A search that
    had set torch to one thread then trained on two from that call on, and only in the first run of a
    process: a second identical fine-tuning in the same process trained on one thread throughout and
    returned another placement (2026-12-01; fresh processes agreed). The first call puts torch's count back.

    A process forked after that call, or after any other start of numba's pool (``numba.set_num_threads``, as
    :func:`gnplace.workers.limit_threads` calls it; a ``multiprocessing`` pool's worker under Linux's default
    start method) times its batches row by row: GNU OpenMP ended such a child at its first parallel call
    ("fork() called from a process already using GNU OpenMP, this is unsafe"), a BrokenProcessPool in the parent.
    (A fork before gnplace is imported is not seen: the hook that marks the child is registered on import.)
    """
    global _POOL_STARTED
    if _FORKED_AFTER_POOL:
        return _simulate_rows(array, args)
    if _POOL_STARTED:
        return _kernel.simulate_many(array, *args)  # type: ignore[no-any-return]
    torch = sys.modules.get("torch")  # (not imported here: the simulator does not need it)
    threads = torch.get_num_threads() if torch is not None else None
    try:
        return _kernel.simulate_many(array, *args)  # type: ignore[no-any-return]
    finally:
        _POOL_STARTED = True
        if torch is not None and threads is not None and torch.get_num_threads() != threads:
            from gnplace.workers import set_torch_threads_here

            set_torch_threads_here(torch, threads)  # threads yet to use torch start with the count they had


def simulate(
    graph: OpGraph, cluster: Cluster, placement: Placement | Any, *, mode: SimMode = "default", timeline: bool = False
) -> StepResult:
    """Simulate one training step; a shortcut for ``Simulator(mode).time(...)``.

    Args:
        graph (OpGraph): the training graph.
        cluster (Cluster): the devices and links to run it on.
        placement (Placement | array-like | dict): a :class:`~gnplace.placement.Placement`, a device
            index per op (``[num_ops]``), or a mapping of op name to device name.
        mode (str, optional): ``"default"`` (gnplace's simulator) or ``"placeto"`` (Placeto's reference
            simulator; default: ``"default"``).
        timeline (bool, optional): also record every op's and transfer's start and end, in seconds, as
            ``result.timeline`` (default: :obj:`False`).

    Returns:
        StepResult: ``step_time`` in seconds, and per device ``busy_time`` (seconds), ``peak_memory`` and
        ``memory_capacity`` (bytes); ``is_oom`` says whether some device ran out of memory.

    Raises:
        InvalidPlacement: if ``placement`` does not place every op of ``graph`` on a device of ``cluster``.
        InvalidArgument: if ``graph`` is no :class:`~gnplace.graph.OpGraph`, ``cluster`` no
            :class:`~gnplace.cluster.Cluster`, or ``timeline`` no bool.
        UnknownName: if ``mode`` is no simulator mode.

    Examples:
        >>> from gnplace.toy import fork_graph
        >>> from gnplace.cluster import load_cluster
        >>> r = simulate(fork_graph(), load_cluster("k80x2"), [0, 0, 1, 0])
        >>> r.step_time > 0, r.is_oom
        (True, False)
    """
    sim = _DEFAULT_SIMULATORS.get(mode) if isinstance(mode, str) else None  # Simulator refuses what is no mode
    if sim is None:
        sim = _DEFAULT_SIMULATORS[mode] = Simulator(mode)
    return sim.time(graph, cluster, placement, timeline=timeline)
