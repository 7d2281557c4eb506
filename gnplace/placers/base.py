"""The ``Placer`` protocol that every placer, learned or not, implements."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np

from gnplace.cluster import Cluster
from gnplace.graph import OpGraph
from gnplace.placement import Placement
from gnplace.seed import SeedLike

__all__ = ["Placer", "group_order"]


@runtime_checkable
class Placer(Protocol):
    """Places every colocation group of a graph on a device of a cluster.

    Implementations set a registry ``name`` and are deterministic under ``seed``. They may declare,
    as class attributes read by :class:`~gnplace.placers.registry.PlacerRegistry`, ``learned``
    (default False), ``accepts`` (the shared options ``timer``, ``budget``, ``checkpoint`` their
    constructor takes; default none) and ``respects_memory`` (default True).
    """

    name: str

    def place(self, graph: OpGraph, cluster: Cluster, *, seed: SeedLike = None) -> Placement:
        """A placement of ``graph`` on ``cluster`` that keeps each colocation group on one device."""
        ...


def group_order(graph: OpGraph) -> np.ndarray:
    """Colocation groups in the order their first op appears in topological order, ``[num_groups]``.

    Examples:
        >>> from gnplace.toy import mlp_training_graph
        >>> group_order(mlp_training_graph(layers=2, width=8, batch=4)).tolist()
        [0, 1, 2]
    """
    seen = np.zeros(graph.num_groups, dtype=bool)
    order: list[int] = []
    for v in graph.topological_order().tolist():
        g = int(graph.group[v])
        if not seen[g]:
            seen[g] = True
            order.append(g)
    return np.asarray(order, dtype=np.int64)
