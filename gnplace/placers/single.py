"""``single``: every op on the fastest device that holds the whole graph."""

from __future__ import annotations

import numpy as np

from gnplace.cluster import Cluster
from gnplace.graph import OpGraph
from gnplace.placement import Placement
from gnplace.seed import SeedLike
from gnplace.sim.simulator import Simulator

__all__ = ["SinglePlacer"]


class SinglePlacer:
    """Place the whole graph on the device with the shortest simulated step among those it fits.

    If it fits on no device, the fastest device overall is returned and the simulator reports
    the out-of-memory device (a single device cannot do better; split the graph instead).

    Args:
        simulator (Simulator, optional): scores the candidates (default: ``Simulator()``).

    Examples:
        >>> from gnplace.toy import chain_graph
        >>> from gnplace.cluster import load_cluster
        >>> SinglePlacer().place(chain_graph(3), load_cluster("cpu_gpu")).devices.tolist()  # the GPU
        [1, 1, 1]
    """

    name = "single"

    def __init__(self, simulator: Simulator | None = None) -> None:
        self.simulator = simulator or Simulator()

    def __repr__(self) -> str:
        return "SinglePlacer()"

    def place(self, graph: OpGraph, cluster: Cluster, *, seed: SeedLike = None) -> Placement:
        """Place ``graph`` on one device of ``cluster`` (``seed`` is unused: this placer is deterministic)."""
        candidates = np.repeat(np.arange(cluster.num_devices)[:, None], graph.num_ops, axis=1)
        scores = self.simulator.time_batch(graph, cluster, candidates)
        step = np.where(scores.oom, np.inf, scores.step_time)
        if np.all(np.isinf(step)):
            step = scores.step_time
        return Placement(candidates[int(np.argmin(step))], cluster)
