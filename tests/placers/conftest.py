"""Fixtures shared by the placer tests: small graphs, clusters and simulators that several placers are tested on.

pytest imports test modules with ``--import-mode=importlib``, so they cannot import each other;
helpers used by more than one module live here as fixtures (a builder function where a test
needs several variants).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from gnplace.cluster import Cluster, Device, load_cluster
from gnplace.graph import OpGraph
from gnplace.graph_io import load_graph
from gnplace.placers.base import Placer
from gnplace.placers.round_robin import RoundRobinPlacer
from gnplace.placers.single import SinglePlacer
from gnplace.sim.simulator import Simulator
from gnplace.toy import mlp_training_graph

GiB = 2**30
EXAMPLE = Path(__file__).resolve().parents[2] / "datasets" / "examples" / "mlp2x8w2048b512.gnpg"


class CountingSimulator(Simulator):
    """A simulator that counts the placements it scores and the size of each batch."""

    def __init__(self) -> None:
        super().__init__()
        self.evaluations = 0
        self.batches: list[int] = []

    def time(self, graph, cluster, placement, *, timeline=False):
        self.evaluations += 1
        self.batches.append(1)
        return super().time(graph, cluster, placement, timeline=timeline)

    def time_batch(self, graph, cluster, placements):
        self.evaluations += len(placements)
        self.batches.append(len(placements))
        return super().time_batch(graph, cluster, placements)


def _two_chains(length: int = 4) -> OpGraph:
    """Two independent equal chains, ``a0 -> a1 -> ...`` then ``b0 -> b1 -> ...``."""
    edges = [(i, i + 1) for i in range(length - 1)] + [(length + i, length + i + 1) for i in range(length - 1)]
    names = [f"a{i}" for i in range(length)] + [f"b{i}" for i in range(length)]
    return OpGraph(names, edges, flops=[1e11] * 2 * length, out_bytes=[1000] * 2 * length)


def _heavy_groups(params_gib: list[float]) -> OpGraph:
    """A chain of one op per group, each holding ``params_gib`` GiB of parameters."""
    n = len(params_gib)
    return OpGraph(
        [f"l{i}" for i in range(n)], [(i, i + 1) for i in range(n - 1)], flops=[1e10] * n, out_bytes=[10**6] * n,
        param_bytes=[int(p * GiB) for p in params_gib], name="heavy",
    )


def _small_gpus(num_devices: int = 2, memory: float = 1 * GiB, name: str = "small") -> Cluster:
    """``num_devices`` K80s of ``memory`` bytes each, joined by 12 GB/s, 10 us links."""
    devices = [
        Device(f"gpu{k}", "k80", peak_flops=2.8e12, mem_bandwidth=240e9, memory=memory) for k in range(num_devices)
    ]
    return Cluster(devices, np.full((num_devices,) * 2, 12e9), np.full((num_devices,) * 2, 10e-6), name=name)


def _step_time(graph: OpGraph, cluster: Cluster, placement) -> float:
    """The simulated step time of ``placement`` (seconds)."""
    return Simulator().time(graph, cluster, placement).step_time


def _example_step_times(placer: Placer, cluster_name: str, **place_options) -> tuple[float, float, float]:
    """Step times on the example MLP of ``placer``'s placement, ``single``'s and ``round_robin``'s."""
    g, c, sim = load_graph(EXAMPLE), load_cluster(cluster_name), Simulator()
    ours = sim.time(g, c, placer.place(g, c, **place_options)).step_time
    single = sim.time(g, c, SinglePlacer().place(g, c)).step_time
    robin = sim.time(g, c, RoundRobinPlacer().place(g, c)).step_time
    return ours, single, robin


@pytest.fixture
def two_chains() -> Callable[..., OpGraph]:
    """Builds two independent equal chains: ``two_chains(length=4)``."""
    return _two_chains


@pytest.fixture
def heavy_groups() -> Callable[[list[float]], OpGraph]:
    """Builds a chain of one op per group with the given GiB of parameters each: ``heavy_groups([0.6, 0.3])``."""
    return _heavy_groups


@pytest.fixture
def small_gpus() -> Callable[..., Cluster]:
    """Builds a cluster of small K80s: ``small_gpus(num_devices=2, memory=1 GiB, name="small")``."""
    return _small_gpus


@pytest.fixture
def step_time() -> Callable[..., float]:
    """The simulated step time of a placement: ``step_time(graph, cluster, placement)``."""
    return _step_time


@pytest.fixture
def example_step_times() -> Callable[..., tuple[float, float, float]]:
    """Step times on ``datasets/examples/mlp2x8w2048b512.gnpg`` of a placer, ``single`` and ``round_robin``.

    ``example_step_times(placer, cluster_name, **place_options)`` returns ``(ours, single, robin)``.
    """
    return _example_step_times


@pytest.fixture
def counting_simulator() -> CountingSimulator:
    """A new :class:`CountingSimulator`."""
    return CountingSimulator()


@pytest.fixture
def only_fits_split() -> tuple[OpGraph, Cluster]:
    """An MLP on ``tight4`` that no single device holds: ``(graph, cluster)``."""
    return mlp_training_graph(layers=8, width=6144, batch=256), load_cluster("tight4")


@pytest.fixture
def one_device_cluster(tmp_path: Path) -> Cluster:
    """A cluster of one K80, loaded from a YAML file."""
    path = tmp_path / "one.yaml"
    path.write_text("devices: [{name: only, kind: k80}]\nlinks: {default: pcie3}\n")
    return load_cluster(path)
