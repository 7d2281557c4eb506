"""Group-level costs and the memory repair shared by the heuristic placers.

A colocation group is placed as one unit, so the heuristics (expert, METIS, list scheduling) reason
about groups: their compute time on each device, the bytes they exchange, and the memory they pin
on their device. :func:`repair_memory` is the last step of every memory-aware placer: it checks a
placement with a timer (the simulator, or real devices) and moves groups off devices that run out of
memory.
"""

from __future__ import annotations

import numpy as np

from gnplace.cluster import Cluster
from gnplace.exceptions import BudgetExhausted
from gnplace.graph import OpGraph
from gnplace.placement import GraphKey, Placement
from gnplace.placers.base import group_order
from gnplace.sim.bounds import _CLASS_MIN_DEVICES, _device_classes, never_fits
from gnplace.sim.costmodel import spread_columns, spread_sums
from gnplace.sim.simulator import Simulator
from gnplace.sim.timer import BudgetedTimer, StepTimer, overflow

#: Timings at most of each of the up to four descents of :func:`repair_memory`'s last resort (:func:`_rescue`).
DESCENT_EVALUATIONS = 256

__all__ = [
    "group_times", "group_memory", "group_edges", "memory_need", "held_at_peak", "usable_devices", "contiguous_blocks",
    "device_sums", "repair_memory",
    "repair_placement", "DESCENT_EVALUATIONS",
]


def group_times(graph: OpGraph, op_time: np.ndarray) -> np.ndarray:
    """Seconds of each colocation group on each device, ``[num_groups, num_devices]``.

    Args:
        graph (OpGraph): the graph.
        op_time (np.ndarray): seconds of each op on each device, ``[num_ops, num_devices]``
            (:func:`~gnplace.sim.costmodel.op_times`).

    On many devices in few classes of identical columns (those of :func:`~gnplace.sim.bounds.work_bound`) each
    class's column is summed once and copied: np.add.at over 93,567 ops on 4,096 K80s took 5.4 s. The same bits.

    Examples:
        >>> from gnplace.toy import mlp_training_graph
        >>> from gnplace.cluster import load_cluster
        >>> from gnplace.sim.costmodel import op_times
        >>> g, c = mlp_training_graph(layers=2, width=8, batch=4), load_cluster("k80x2")
        >>> group_times(g, op_times(g, c)).shape
        (3, 2)
    """
    classes = None
    if op_time.ndim == 2 and op_time.dtype == np.float64 and op_time.shape[1] >= _CLASS_MIN_DEVICES:
        classes = _device_classes(op_time, op_time.sum(axis=0))
    if classes is not None:  # devices whose op times hold the same bits have the same group times: a class's once
        first, label = classes
        return spread_columns(group_times(graph, np.ascontiguousarray(op_time[:, first])), label)
    out = np.zeros((graph.num_groups, op_time.shape[1]))
    np.add.at(out, graph.group, op_time)
    return out


def group_memory(graph: OpGraph) -> np.ndarray:
    """Bytes a colocation group pins on its device, ``[num_groups]`` float64.

    An upper bound on what the simulator charges: the group's parameters and optimizer state plus
    every output its ops write, as if all were live at once (copies received from other devices
    are not counted).

    .. math::
        M_g = \\sum_{v \\in g} P_v + B^{out}_v

    Examples:
        >>> from gnplace.toy import chain_graph
        >>> group_memory(chain_graph(2)).tolist()
        [4000000.0, 4000000.0]
    """
    per_op = graph.param_bytes.astype(np.float64) + graph.out_bytes
    return np.bincount(graph.group, weights=per_op, minlength=graph.num_groups)


def group_edges(graph: OpGraph) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Edges of the graph with every group contracted to one vertex.

    Returns:
        tuple[np.ndarray, np.ndarray, np.ndarray]: ``(src, dst, bytes)``: distinct ordered pairs of
        different groups and the bytes summed over the op edges between them, ``[num_pairs]`` each.

    Examples:
        >>> from gnplace.toy import chain_graph
        >>> [a.tolist() for a in group_edges(chain_graph(3))]
        [[0, 1], [1, 2], [4000000.0, 4000000.0]]
    """
    gs, gd = graph.group[graph.edge_src], graph.group[graph.edge_dst]
    cross = gs != gd
    keys = gs[cross] * max(graph.num_groups, 1) + gd[cross]
    uniq, inverse = np.unique(keys, return_inverse=True)
    weight = np.bincount(inverse, weights=graph.edge_bytes[cross], minlength=uniq.shape[0])
    return uniq // max(graph.num_groups, 1), uniq % max(graph.num_groups, 1), weight


def memory_need(graph: OpGraph, cluster: Cluster, timer: StepTimer | None = None) -> float:
    """Bytes the graph needs in all: the peak with every op on the fastest device, timed once by ``timer``.

    The fastest device is the one with the least total op time by the timer's cost model
    (default timer: ``Simulator()``).

    Examples:
        >>> from gnplace.toy import chain_graph
        >>> from gnplace.cluster import load_cluster
        >>> memory_need(chain_graph(3), load_cluster("k80x2"))  # two live outputs of 4 MB
        8000000.0
    """
    sim = timer or Simulator()
    if graph.num_ops == 0:
        return 0.0
    return float(sim.time(graph, cluster, np.full(graph.num_ops, _fastest(graph, cluster, sim))).peak_memory.max())


def _fastest(graph: OpGraph, cluster: Cluster, timer: StepTimer) -> int:
    """The device with the least total op time of ``graph`` by ``timer``'s cost model.

    The totals of :func:`~gnplace.sim.costmodel.op_times`' columns, bit for bit, from its distinct columns
    (:func:`~gnplace.sim.costmodel.spread_sums`): the [93,567, 4,096] matrix of 4,096 K80s took 4.6 s a call.
    """
    return int(np.argmin(spread_sums(*timer.cost_model.op_time_columns(graph, cluster))))


def device_sums(columns: np.ndarray, column: np.ndarray, devices: np.ndarray) -> np.ndarray:
    """``spread_columns(columns, column)[:, devices].sum(axis=0)``, bit for bit, without the spread: ``[len(devices)]``.

    numpy's ``[:, devices]`` of a C-order matrix is in Fortran order and sums each column pairwise, however many
    columns it has: each distinct column of ``devices`` is taken and summed once.
    """
    used, index = np.unique(np.asarray(column)[devices], return_inverse=True)
    return columns[:, used].sum(axis=0)[index.reshape(-1)]  # type: ignore[no-any-return]


def held_at_peak(graph: OpGraph, cluster: Cluster, timer: Simulator | None = None) -> np.ndarray:
    """Bytes each op holds at the memory peak of the step run on the fastest device alone, ``[num_ops]``.

    Its parameters, plus its output if that output is live at the peak instant (written at the op's
    start, freed when its last consumer ends, as the simulator charges it). The sum is the peak of
    that single-device step, :func:`memory_need`, where :func:`group_memory` counts every output as
    live at once: 2.3-10x more on the shipped test graphs (forward activations stay live until the
    backward pass, most other outputs do not). One simulation by ``timer`` (default: ``Simulator()``).

    Examples:
        >>> from gnplace.toy import chain_graph
        >>> from gnplace.cluster import load_cluster
        >>> g, c = chain_graph(3), load_cluster("k80x2")
        >>> float(held_at_peak(g, c).sum()) == memory_need(g, c), float(group_memory(g).sum())
        (True, 12000000.0)
    """
    sim = timer or Simulator()
    n = graph.num_ops
    params = graph.param_bytes.astype(np.float64)
    if n == 0:
        return params
    run = sim.time(graph, cluster, np.full(n, _fastest(graph, cluster, sim)), timeline=True).timeline
    assert run is not None
    release = run.op_end.copy()  # an output is freed when the op ends, or its last consumer does
    np.maximum.at(release, graph.edge_src, run.op_end[graph.edge_dst])
    out = graph.out_bytes.astype(np.float64)
    # sweep: memory freed at an instant is free for what starts at it, so frees sort first
    times = np.concatenate([release, run.op_start])
    deltas = np.concatenate([-out, out])
    order = np.lexsort((np.r_[np.zeros(n), np.ones(n)], times))
    live = np.cumsum(deltas[order])
    peak_at = times[order][int(np.argmax(live))]
    held = (run.op_start <= peak_at) & (release > peak_at)
    return params + np.where(held, out, 0.0)


def usable_devices(
    op_time: np.ndarray, cluster: Cluster, need_bytes: float, *, min_speed: float = 0.0,
    column: np.ndarray | None = None,
) -> np.ndarray:
    """Devices fast enough to be worth using: speed at least ``min_speed`` times the fastest's.

    A device's speed is the inverse of the graph's total op time on it. If the chosen devices hold
    less than ``need_bytes`` together, slower devices join, fastest first, until they hold enough
    (or all are in).

    Args:
        op_time (np.ndarray): seconds of each op on each device, ``[num_ops, num_devices]``.
        cluster (Cluster): the devices.
        need_bytes (float): bytes the graph needs in all (e.g. :func:`memory_need`).
        min_speed (float, optional): 0 keeps every device, 1 only the fastest kind (default: 0).
        column (np.ndarray, optional): ``op_time`` holds distinct columns and device ``d`` runs at
            ``op_time[:, column[d]]`` (:func:`~gnplace.sim.costmodel.op_time_columns`); the same devices as with
            the spread matrix (default: ``None``, a column per device).

    Returns:
        np.ndarray: sorted device indices.

    Examples:
        >>> from gnplace.toy import chain_graph
        >>> from gnplace.cluster import load_cluster
        >>> from gnplace.sim.costmodel import op_times
        >>> g, c = chain_graph(3), load_cluster("cpu_gpu")
        >>> usable_devices(op_times(g, c), c, 1e6, min_speed=0.5).tolist()  # the GPU only
        [1]
    """
    if not op_time.shape[0]:
        total = np.ones(cluster.num_devices)
    else:
        total = op_time.sum(axis=0) if column is None else spread_sums(op_time, column)
    speed = np.where(total > 0, total.min() / np.maximum(total, 1e-300), 1.0)  # no work at all: all as fast
    keep = speed >= min_speed * (1 - 1e-9)
    memory = cluster.memory
    for d in np.argsort(-speed, kind="stable"):
        if memory[keep].sum() >= need_bytes:
            break
        keep[d] = True
    return np.flatnonzero(keep)


def contiguous_blocks(weight: np.ndarray, shares: np.ndarray) -> np.ndarray:
    """Cut a sequence of weights into ``len(shares)`` contiguous blocks in proportion to ``shares``.

    Item ``i`` goes to the block whose share of the total holds the midpoint of its weight in the
    prefix sum, so each block gets about its share; then no block is left empty: blocks advance by
    at most one per item and every block gets an item (with fewer items than blocks, item ``i``
    goes to block ``i``).

    Args:
        weight (np.ndarray): non-negative weight of each item in sequence order, ``[num_items]``.
        shares (np.ndarray): relative size of each block, ``[num_blocks]``.

    Returns:
        np.ndarray: block index of each item, non-decreasing, ``[num_items]``.

    Examples:
        >>> contiguous_blocks(np.ones(6), np.ones(3)).tolist()
        [0, 0, 1, 1, 2, 2]
    """
    k, n = len(shares), len(weight)
    if n <= k:
        return np.arange(n, dtype=np.int64)
    w = np.asarray(weight, dtype=np.float64) + 1e-12  # zero-weight items still advance
    mid = (np.cumsum(w) - w / 2) / w.sum()
    bounds = np.cumsum(np.asarray(shares, dtype=np.float64))[:-1] / np.sum(shares)
    raw = np.searchsorted(bounds, mid, side="right").tolist()
    block = np.empty(n, dtype=np.int64)
    current = 0
    for i in range(n):  # step by at most one block, and leave an item for every later block
        current = max(min(max(raw[i], current), current + (i > 0)), i - (n - k))
        block[i] = current
    return block


def repair_memory(
    graph: OpGraph, cluster: Cluster, group_devices: np.ndarray, *, timer: StepTimer | None = None,
    max_rounds: int = 32,
) -> np.ndarray:
    """Move colocation groups off devices that run out of memory, checked with a timer.

    Each round simulates the placement; on every overflowing device, groups (largest
    :func:`group_memory` first) move to the device with the most free memory that can take them,
    until the estimated overflow is gone. If rounds run out while some device still overflows, the
    best of three memory-balanced fallbacks (contiguous blocks in topological order balanced by
    memory, round robin, first-fit decreasing bin packing) that fits is returned. If none fits either,
    the faster of every group on the device with the most memory and descents on the overflow the
    timer measures, from the rounds' least-overflow placement and the fallbacks, that fits
    (:func:`_rescue`; the descents' moves and swaps ignore the estimate, which kept the rounds from
    moving a group that fits); else, where nothing fits, the placement of the rounds with the least
    total overflow (bytes over capacity, summed over devices; the fallbacks' and the descents' overflow
    are not compared), as before the descents. Without this last resort, a placer returned a placement
    over memory where the whole graph fits one device, or a split fits that a move or swap of one
    group at a time reaches. Where the simulator proves that nothing fits (:func:`_proven_over_memory`),
    that placement of the rounds is returned after them, the fallbacks neither built nor timed.

    Args:
        graph (OpGraph): the graph.
        cluster (Cluster): the devices.
        group_devices (np.ndarray): device of each colocation group, ``[num_groups]``.
        timer (StepTimer, optional): measures peak memory: one evaluation per round, three for the
            fallbacks and, where they overflow too, one for the largest device and at most
            :data:`DESCENT_EVALUATIONS` for each of up to four descents; a
            :class:`~gnplace.sim.timer.BudgetedTimer` counts them (default: ``Simulator()``).
        max_rounds (int, optional): rounds of moves before the fallbacks (default: 32).

    Returns:
        np.ndarray: device of each group, ``[num_groups]``; unchanged if it already fits.

    Examples:
        >>> from gnplace.toy import mlp_training_graph
        >>> from gnplace.cluster import load_cluster
        >>> g, c = mlp_training_graph(layers=8, width=6144, batch=256), load_cluster("tight4")
        >>> fixed = repair_memory(g, c, np.zeros(g.num_groups, dtype=np.int64))
        >>> bool(Simulator().time(g, c, Placement.from_groups(g, c, fixed)).is_oom)
        False
    """
    sim = timer or Simulator()
    current = np.asarray(group_devices, dtype=np.int64).copy()
    memory, capacity = group_memory(graph), cluster.memory
    best, best_over = current.copy(), np.inf
    for round_ in range(max_rounds + 1):
        peak = sim.time(graph, cluster, Placement.from_groups(graph, cluster, current)).peak_memory
        over = peak - capacity
        if over.max() <= 0:
            return current
        if over.clip(0).sum() < best_over:
            best, best_over = current.copy(), over.clip(0).sum()
        if round_ == max_rounds:
            break
        free = np.where(over > 0, 0.0, capacity - peak)
        moved = False
        for d in np.argsort(-over, kind="stable")[: int((over > 0).sum())]:
            room = free.copy()
            room[d] = -np.inf
            need = over[d]
            mine = np.flatnonzero(current == d)
            mine = mine[np.argsort(-memory[mine], kind="stable")]
            need, moved_here = _move_largest(current, mine, memory, room, need)
            moved = moved or moved_here
            if need == over[d] and len(mine) > 1 and room.max() > 0:  # none fits by the estimate
                target = int(np.argmax(room))
                current[mine[-1]], moved = target, True
                room[target] -= memory[mine[-1]]
            free = np.where(np.isinf(room), 0.0, room)
        if not moved:
            break
    if _proven_over_memory(graph, cluster, sim):
        return best  # what the fallbacks and _rescue came to: nothing fits (10-12 s of auto's 33-36 s at 280,158 ops)
    fallbacks = _memory_fallbacks(graph, cluster, memory)
    scores = sim.time_batch(graph, cluster, np.take(fallbacks, graph.group, axis=1))
    fits = np.flatnonzero(~scores.oom)
    if fits.size:
        return fallbacks[fits[np.argmin(scores.step_time[fits])]]
    starts = fallbacks[np.argsort(overflow(scores.peak_memory, capacity), kind="stable")]
    return _rescue(graph, cluster, best, sim, starts)


def repair_placement(
    graph: OpGraph, cluster: Cluster, devices: np.ndarray, timer: StepTimer,
) -> tuple[np.ndarray, int, float | None]:
    """A placement of every op (``[num_ops]``) with groups moved off overflowing devices by :func:`repair_memory`.

    Returns:
        tuple: the repaired devices (``devices`` unchanged if the repair still overflows), the
        evaluations the repair spent, and the repaired step seconds (``None`` if it still overflows).
    """
    counter = BudgetedTimer(timer)
    per_group = np.zeros(graph.num_groups, dtype=np.int64)
    per_group[graph.group] = devices
    fixed = repair_memory(graph, cluster, per_group, timer=counter)[graph.group]
    result = counter.time(graph, cluster, fixed)
    if result.is_oom:
        return devices, counter.evaluations, None
    return fixed, counter.evaluations, float(result.step_time)


def best_repaired(graph: OpGraph, cluster: Cluster, scorer: BudgetedTimer, timer: StepTimer) -> Placement:
    """The best placement a search's ``scorer`` timed, repaired by :func:`repair_placement` if it overflows.

    A search whose every placement overflowed (a small budget from an out-of-memory start) must still not
    return one when a repair fits. The repair's evaluations go to ``timer``, outside the search's budget,
    and a repaired placement ends ``scorer.trace`` (at the evaluations spent, overflow 0).
    """
    best = scorer.best_placement(cluster)
    assert best is not None
    if scorer.best_key[0] <= 0:
        return best
    try:
        fixed, _, step = repair_placement(graph, cluster, best.devices, timer)
    except BudgetExhausted:  # ``timer`` counts against a budget (a search's prelude) that the repair outgrew
        return best
    if step is None:
        return best
    scorer.trace.append((scorer.evaluations, 0.0, step))
    return Placement(fixed, cluster, GraphKey.of(graph))


def _move_largest(
    current: np.ndarray, mine: np.ndarray, memory: np.ndarray, room: np.ndarray, need: np.float64,
) -> tuple[np.float64, bool]:
    """Move groups ``mine`` (largest first) to the device with the most ``room`` (bytes) that takes each, in place.

    Until ``need`` (bytes) is moved: ``current`` and ``room`` are updated; returned are the bytes still to
    move and whether a group moved. The device with the most room is found again only after a move (room
    changes only then), and the loop ends once nothing is left to move (a call for each group, each time,
    took about a second for 88,334 groups on k80x4 and v100x8).
    """
    moved = False
    target = int(np.argmax(room))
    for g in mine.tolist():
        if not need > 0:  # the rest would stay where they are
            break
        if room[target] >= memory[g]:
            current[g], need, moved = target, need - memory[g], True
            room[target] -= memory[g]
            target = int(np.argmax(room))
    return need, moved


def _memory_fallbacks(graph: OpGraph, cluster: Cluster, memory: np.ndarray) -> np.ndarray:
    """Placements that spread memory evenly, ``[3, num_groups]``: blocks, round robin, bin packing."""
    order = group_order(graph)
    capacity = cluster.memory
    d = cluster.num_devices
    blocks = np.empty(graph.num_groups, dtype=np.int64)
    blocks[order] = contiguous_blocks(memory[order], capacity)
    robin = np.empty(graph.num_groups, dtype=np.int64)
    robin[order] = np.arange(graph.num_groups) % d
    return np.stack([blocks, robin, _first_fit_decreasing(memory, capacity)])


#: Devices up to which :func:`_first_fit_decreasing` scans a Python list of each device's room, not numpy's arrays.
_SCAN_DEVICES = 64


def _first_fit_decreasing(memory: np.ndarray, capacity: np.ndarray) -> np.ndarray:
    """Device of each group (``[num_groups]``), largest ``memory`` (bytes) first, on the first with room for it.

    Where no device has room, the one with the most room (the first of those) takes it. Up to
    :data:`_SCAN_DEVICES` float64 devices the rooms are Python floats, the same float64 sums as numpy's (numpy's calls
    for each of 88,334 groups took 2.6 s); past it numpy finds each device.
    """
    order = np.argsort(-memory, kind="stable")
    packed = np.empty(memory.shape[0], dtype=np.int64)
    if capacity.shape[0] <= _SCAN_DEVICES and capacity.dtype == memory.dtype == np.float64:
        room, need = capacity.tolist(), memory.tolist()
        targets = []
        for g in order.tolist():
            m = need[g]
            for k, left in enumerate(room):
                if left >= m:
                    target = k
                    break
            else:
                target = room.index(max(room))
            targets.append(target)
            room[target] -= m
        packed[order] = targets
        return packed
    free = capacity.copy()
    for g in order:
        fits = np.flatnonzero(free >= memory[g])
        target = int(fits[0]) if fits.size else int(np.argmax(free))
        packed[g] = target
        free[target] -= memory[g]
    return packed


def _rescue(
    graph: OpGraph, cluster: Cluster, best: np.ndarray, timer: StepTimer, starts: np.ndarray,
) -> np.ndarray:
    """What :func:`repair_memory` returns when its rounds and fallbacks all overflow, ``[num_groups]``.

    Every group on the device with the most memory (``single`` on it: where the whole graph fits that
    device, a split must not be returned over memory), and descents on the overflow the timer measures
    (:func:`_overflow_descent`, each at most :data:`DESCENT_EVALUATIONS` timings) from ``best``, the
    rounds' least-overflow placement, then from each of ``starts`` (the fallbacks, ``[3, num_groups]``,
    least overflow first) until one fits, while the least overflow left is at most the largest group's
    estimate (:func:`group_memory`; past it, as where nothing fits, more starts only cost time).
    Returned: the faster of the largest device and a descent that fit, else ``best`` (whatever the
    descents' overflow: a result over memory is the one of before, so that placers' results, and the
    pretraining recipes that start from ``auto``'s, move only where a placement now fits). Where the simulator
    proves that nothing fits (:func:`_proven_over_memory`), :func:`repair_memory` returns ``best`` before the
    fallbacks, with no call here.
    """
    largest = np.full(graph.num_groups, int(np.argmax(cluster.memory)), dtype=np.int64)
    alone = timer.time(graph, cluster, Placement.from_groups(graph, cluster, largest))
    near = float(group_memory(graph).max(initial=0.0))
    found, over, step = best, np.inf, np.inf
    for start in [best, *starts]:
        if over <= 0 or near < over < np.inf:
            break
        tried, tried_over, tried_step = _overflow_descent(graph, cluster, start, timer)
        if tried_over < over:
            found, over, step = tried, tried_over, tried_step
    if over <= 0 and (alone.is_oom or step < alone.step_time):
        return found
    if not alone.is_oom:
        return largest
    return best  # nothing fits: the placement of before, so that no result that overflowed moves for less overflow


def _proven_over_memory(graph: OpGraph, cluster: Cluster, timer: StepTimer) -> bool:
    """Whether no placement can fit by ``timer``, proven (:func:`~gnplace.sim.bounds.never_fits`) and free to skip.

    Only for the simulator, under counting timers without a budget and memos of its results (a timer with
    ``replays_simulator``): a budget's count, which the skipped timings would have taken from (a search's
    prelude, its zero-shot candidates), moves what the search does next, and real steps follow no proof of the
    simulator's. At 280,158 ops on k80x4 the descents spent 10.8 s of a repair's 11.5 s, where nothing fits.
    """
    inner = timer
    while True:
        if isinstance(inner, BudgetedTimer):
            if inner.budget is not None:
                return False
            inner = inner.timer
        elif getattr(inner, "replays_simulator", False):
            inner = inner.timer  # type: ignore[attr-defined]
        else:
            break
    return isinstance(inner, Simulator) and never_fits(graph, cluster, cost_model=inner.cost_model)


def _overflow_descent(
    graph: OpGraph, cluster: Cluster, start: np.ndarray, timer: StepTimer, *, width: int = 8,
    evaluations: int = DESCENT_EVALUATIONS,
) -> tuple[np.ndarray, float, float]:
    """Move or swap one group at a time while the total overflow the timer measures drops.

    Each round times, in one batch, every move of one of the ``width`` largest groups
    (:func:`group_memory`) of each device (most over memory first) to each other device, and keeps
    the one of least total overflow (bytes over capacity summed over devices; then the shortest
    step). When no move lowers the overflow, the round times the swaps of each such group with one
    of the ``width`` largest groups of the other device no larger by the estimate (layers of one size
    have other peaks), and stops if none does either. The repair's rounds move groups by that
    estimate, an upper bound on what the timer charges: a group estimated at more than any device's
    room, or alone on its device, was never moved, and when every device overflowed nothing was,
    though the timer's peaks fit. It stops after ``evaluations`` timings (a batch past them is cut).

    Returns:
        tuple: the device of each group, ``[num_groups]``, its total overflow (bytes) and its step
        (seconds).
    """
    capacity, memory = cluster.memory, group_memory(graph)
    current = np.asarray(start, dtype=np.int64).copy()
    first = timer.time(graph, cluster, Placement.from_groups(graph, cluster, current))
    peak, step = first.peak_memory, float(first.step_time)
    over, left = float((peak - capacity).clip(0).sum()), evaluations - 1
    while over > 0 and left > 0 and cluster.num_devices > 1:
        moved, target = _moves(current, np.argsort(-(peak - capacity), kind="stable"), memory, width)
        for swap in (False, True):  # the swaps are made only if no move lowers the overflow
            candidates = (_swaps(current, moved, target, memory, width, left) if swap
                          else _apply_moves(current, moved[:left], target[:left]))
            if not len(candidates):
                continue
            left -= len(candidates)
            scores = timer.time_batch(graph, cluster, np.take(candidates, graph.group, axis=1))
            total = (scores.peak_memory - capacity).clip(0).sum(axis=1)
            pick = int(np.lexsort((scores.step_time, total))[0])
            if total[pick] < over:
                current, peak, over = candidates[pick], scores.peak_memory[pick], float(total[pick])
                step = float(scores.step_time[pick])
                break
        else:
            break
    return current, over, step


def _moves(current: np.ndarray, sources: np.ndarray, memory: np.ndarray, width: int) -> tuple[np.ndarray, np.ndarray]:
    """Group and target device of each move of a ``width`` largest group of a ``sources`` device elsewhere."""
    groups, targets = [np.zeros(0, dtype=np.int64)], [np.zeros(0, dtype=np.int64)]
    for source in sources.tolist():
        mine = np.flatnonzero(current == source)
        mine = mine[np.argsort(-memory[mine], kind="stable")][:width]
        others = sources[sources != source]
        groups.append(np.repeat(mine, others.size))
        targets.append(np.tile(others, mine.size))
    return np.concatenate(groups), np.concatenate(targets)


def _apply_moves(current: np.ndarray, moved: np.ndarray, target: np.ndarray) -> np.ndarray:
    """``current`` with group ``moved[i]`` on device ``target[i]``, one row per move, ``[moves, num_groups]``."""
    out = np.repeat(current[None, :], moved.size, axis=0)
    out[np.arange(moved.size), moved] = target
    return out


def _swaps(
    current: np.ndarray, moved: np.ndarray, target: np.ndarray, memory: np.ndarray, width: int, limit: int,
) -> np.ndarray:
    """Each move with one of the ``width`` largest groups of its target no larger sent back, ``[swaps, num_groups]``.

    The first ``limit`` of them, in order: the descent times no more. All of them were made and the batch cut after:
    3,584 copies of 82,454 groups (2.4 GB, 13.6 s of a repair's 55 s) for 255 timings at 261,510 ops on 8 K80s.
    """
    swapped: list[tuple[int, int, int]] = []
    for g, t in zip(moved.tolist(), target.tolist()):
        if len(swapped) >= limit:
            break
        theirs = np.flatnonzero((current == t) & (memory <= memory[g]))
        theirs = theirs[np.argsort(-memory[theirs], kind="stable")][:width]
        swapped.extend((g, t, h) for h in theirs.tolist()[:limit - len(swapped)])
    pairs = np.array(swapped, dtype=np.int64).reshape(-1, 3)
    out = _apply_moves(current, pairs[:, 0], pairs[:, 1])
    out[np.arange(len(pairs)), pairs[:, 2]] = current[pairs[:, 0]]
    return out
