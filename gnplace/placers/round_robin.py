"""``round_robin``: colocation groups dealt to devices in turn, in topological order."""

from __future__ import annotations

import numpy as np

from gnplace.cluster import Cluster
from gnplace.graph import OpGraph
from gnplace.placement import Placement, check_graph_and_cluster
from gnplace.placers.base import group_order
from gnplace.seed import SeedLike, check_seed

__all__ = ["RoundRobinPlacer"]


class RoundRobinPlacer:
    """Deal colocation groups to devices ``0, 1, ..., D-1, 0, ...`` in topological order.

    A naive baseline: it spreads work evenly but ignores communication and memory.

    Examples:
        >>> from gnplace.toy import chain_graph
        >>> from gnplace.cluster import load_cluster
        >>> RoundRobinPlacer().place(chain_graph(5), load_cluster("k80x2")).devices.tolist()
        [0, 1, 0, 1, 0]
    """

    name = "round_robin"

    def __repr__(self) -> str:
        return "RoundRobinPlacer()"

    def place(self, graph: OpGraph, cluster: Cluster, *, seed: SeedLike = None) -> Placement:
        """Place ``graph`` on ``cluster`` (``seed`` is checked, and unused: this placer is deterministic)."""
        check_graph_and_cluster(graph, cluster)
        check_seed(seed)
        per_group = np.empty(graph.num_groups, dtype=np.int64)
        per_group[group_order(graph)] = np.arange(graph.num_groups) % cluster.num_devices
        return Placement.from_groups(graph, cluster, per_group)
