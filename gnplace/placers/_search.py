"""Pieces shared by the search placers (``random_search``, ``annealing``, ``exact``).

Search placers work on *group placements*, a device index per colocation group (``[num_groups]``),
and score batches of them with a :class:`~gnplace.sim.timer.BudgetedTimer`, which counts the
evaluations and keeps the best placement seen. This module builds the structured candidates every
search starts from (each single device and round robin, contiguous blocks).
"""

from __future__ import annotations

import numpy as np

from gnplace.cluster import Cluster
from gnplace.graph import OpGraph
from gnplace.placers.base import group_order

__all__ = ["baseline_candidates", "equal_work_blocks"]


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


def equal_work_blocks(graph: OpGraph, weights: np.ndarray, devices: np.ndarray) -> np.ndarray:
    """Groups in topological order cut into ``len(devices)`` blocks of about equal ``weights``, ``[num_groups]``.

    Block ``i`` goes to ``devices[i]``, as a human expert splits a network into layer blocks. (Not
    :func:`gnplace.placers.groups.contiguous_blocks`, which cuts an ordered weight vector by shares: a
    group goes here to the block its midpoint of work falls in.)

    Args:
        graph (OpGraph): the graph.
        weights (np.ndarray): work of each group, e.g. seconds, ``[num_groups]``.
        devices (np.ndarray): device of each block in order, ``[num_blocks]``.

    Examples:
        >>> from gnplace.toy import chain_graph
        >>> equal_work_blocks(chain_graph(4), np.ones(4), np.array([2, 0])).tolist()
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
