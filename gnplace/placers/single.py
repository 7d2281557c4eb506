"""``single``: every op on the fastest device that holds the whole graph."""

from __future__ import annotations

import dataclasses

import numpy as np

from gnplace.cluster import Cluster, Device
from gnplace.graph import OpGraph
from gnplace.placement import GraphKey, Placement, check_graph_and_cluster
from gnplace.seed import SeedLike, check_seed
from gnplace.sim.simulator import Simulator
from gnplace.sim.timer import StepTimer

__all__ = ["SinglePlacer"]


class SinglePlacer:
    """Place the whole graph on the device with the shortest simulated step among those it fits.

    If it fits on no device, the fastest device overall is returned and the timer reports
    the out-of-memory device (a single device cannot do better; split the graph instead).

    Args:
        timer (StepTimer, optional): scores the candidates, one evaluation per device; the simulator, one per
            set of devices alike but for their names, which it times alike (default: ``Simulator()``).

    Examples:
        >>> from gnplace.toy import chain_graph
        >>> from gnplace.cluster import load_cluster
        >>> SinglePlacer().place(chain_graph(3), load_cluster("cpu_gpu")).devices.tolist()  # the GPU
        [1, 1, 1]
    """

    name = "single"
    accepts = frozenset({"timer"})
    respects_memory = False  # one device cannot hold what only a split fits

    def __init__(self, timer: StepTimer | None = None) -> None:
        self.timer = timer or Simulator()

    def __repr__(self) -> str:
        return "SinglePlacer()"

    def place(self, graph: OpGraph, cluster: Cluster, *, seed: SeedLike = None) -> Placement:
        """Place ``graph`` on one device of ``cluster`` (``seed`` checked, unused: deterministic)."""
        check_graph_and_cluster(graph, cluster)
        check_seed(seed)
        candidates = np.repeat(_devices_to_try(cluster, self.timer)[:, None], graph.num_ops, axis=1)
        scores = self.timer.time_batch(graph, cluster, candidates)
        step = np.where(scores.oom, np.inf, scores.step_time)
        if np.all(np.isinf(step)):
            step = scores.step_time
        return Placement(candidates[int(np.argmin(step))], cluster, GraphKey.of(graph))


def _devices_to_try(cluster: Cluster, timer: StepTimer) -> np.ndarray:
    """The device indices to time the whole graph on: every device, or on the simulator the first of each alike.

    A graph on one device sends nothing, so the simulator times it alike on devices that differ in their
    names alone: 4,096 alike devices (the limit of a cluster) took 4,096 simulations of 0.25 s each for one
    answer. The first of equals is kept, the device the search over all of them returned. A real timer
    times every device: two GPUs of one kind are still two devices.
    """
    if not isinstance(timer, Simulator):
        return np.arange(cluster.num_devices)
    # every field but the name, read directly: dataclasses.replace and astuple per device (a validated copy, then a
    # deep copy) took 1.0 s at 4,096 devices
    fields = [field.name for field in dataclasses.fields(Device) if field.name != "name"]
    first: dict[tuple[object, ...], int] = {}
    for k, device in enumerate(cluster.devices):
        first.setdefault(tuple(getattr(device, field) for field in fields), k)
    return np.fromiter(first.values(), dtype=np.int64)
