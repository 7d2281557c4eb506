"""Pieces shared by the search placers (``random_search``, ``annealing``, ``exact``).

Search placers work on *group placements*, a device index per colocation group (``[num_groups]``),
and score batches of them with :meth:`~gnplace.sim.simulator.Simulator.time_batch`. This module
counts those evaluations, builds the structured candidates every search starts from (each single
device and round robin) and ranks scored placements: feasible ones (no device out of memory) by step
time first, then, only when nothing fits, by how far they overflow memory.
"""

from __future__ import annotations

import numpy as np

from gnplace.cluster import Cluster
from gnplace.graph import OpGraph
from gnplace.placers.base import group_order
from gnplace.sim.simulator import BatchResult, Simulator

__all__ = ["Scorer", "baseline_candidates", "contiguous_blocks", "overflow"]


class Scorer:
    """Scores group placements with a simulator and keeps the best one seen.

    Args:
        graph (OpGraph): the graph.
        cluster (Cluster): the cluster.
        simulator (Simulator): scores placements.

    Attributes:
        evaluations (int): placements scored so far (one simulator evaluation each).
        best (np.ndarray | None): best group placement seen, ``[num_groups]``.
        best_key (tuple[float, float]): its :func:`rank_key`, ``(overflow, step seconds)``.
    """

    def __init__(self, graph: OpGraph, cluster: Cluster, simulator: Simulator) -> None:
        self.graph = graph
        self.cluster = cluster
        self.simulator = simulator
        self.capacity = cluster.memory
        self.evaluations = 0
        self.best: np.ndarray | None = None
        self.best_key = (np.inf, np.inf)

    def __call__(self, group_placements: np.ndarray) -> BatchResult:
        """Score ``group_placements`` (``[batch, num_groups]``) and remember the best of them."""
        result = self.simulator.time_batch(self.graph, self.cluster, group_placements[:, self.graph.group])
        self.evaluations += group_placements.shape[0]
        over = overflow(result.peak_memory, self.capacity)
        # lexicographic: least overflow (0 for feasible), then shortest step; first one wins ties
        i = int(np.lexsort((result.step_time, over))[0])
        key = (float(over[i]), float(result.step_time[i]))
        if key < self.best_key:
            self.best_key, self.best = key, group_placements[i].copy()
        return result


def overflow(peak_memory: np.ndarray, capacity: np.ndarray) -> np.ndarray:
    """Bytes over capacity summed over devices, relative to capacity: 0 where everything fits, ``[batch]``.

    Args:
        peak_memory (np.ndarray): peak bytes per device, ``[batch, num_devices]``.
        capacity (np.ndarray): bytes each device holds, ``[num_devices]``.
    """
    return np.maximum(peak_memory - capacity[None, :], 0.0).sum(axis=1) / capacity.max()


def baseline_candidates(graph: OpGraph, cluster: Cluster) -> np.ndarray:
    """Group placements of the ``single`` candidates (one per device) and ``round_robin``, ``[D + 1, num_groups]``.

    Examples:
        >>> from gnplace.toy import chain_graph
        >>> from gnplace.cluster import load_cluster
        >>> baseline_candidates(chain_graph(3), load_cluster("k80x2")).tolist()
        [[0, 0, 0], [1, 1, 1], [0, 1, 0]]
    """
    d, g = cluster.num_devices, graph.num_groups
    singles = np.repeat(np.arange(d, dtype=np.int64)[:, None], g, axis=1)
    round_robin = np.empty(g, dtype=np.int64)
    round_robin[group_order(graph)] = np.arange(g) % d
    return np.vstack([singles, round_robin[None, :]])


def contiguous_blocks(graph: OpGraph, weights: np.ndarray, devices: np.ndarray) -> np.ndarray:
    """Groups in topological order cut into ``len(devices)`` blocks of about equal ``weights``, ``[num_groups]``.

    Block ``i`` goes to ``devices[i]``, as a human expert splits a network into layer blocks.

    Args:
        graph (OpGraph): the graph.
        weights (np.ndarray): work of each group, e.g. seconds, ``[num_groups]``.
        devices (np.ndarray): device of each block in order, ``[num_blocks]``.

    Examples:
        >>> from gnplace.toy import chain_graph
        >>> contiguous_blocks(chain_graph(4), np.ones(4), np.array([2, 0])).tolist()
        [2, 2, 0, 0]
    """
    order = group_order(graph)
    cumulative = np.cumsum(weights[order])
    total = cumulative[-1] if cumulative.size else 0.0
    if total > 0:
        # the block of a group is where its midpoint of work falls
        block = np.floor((cumulative - weights[order] / 2) / total * len(devices)).astype(np.int64)
    else:
        block = np.arange(order.shape[0]) * len(devices) // max(order.shape[0], 1)
    out = np.empty(graph.num_groups, dtype=np.int64)
    out[order] = devices[np.clip(block, 0, len(devices) - 1)]
    return out
