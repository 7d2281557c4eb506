"""Fixtures of the placer tests (the ones other packages share too live in ``tests/conftest.py``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from gnplace.cluster import Cluster, load_cluster
from gnplace.graph_io import load_graph
from gnplace.placers.base import Placer
from gnplace.placers.round_robin import RoundRobinPlacer
from gnplace.placers.single import SinglePlacer
from gnplace.sim.simulator import Simulator
from gnplace.toy import toy_cluster

GiB = 2**30
EXAMPLE = Path(__file__).resolve().parents[2] / "datasets" / "examples" / "mlp2x8w2048b512.gnpg"


def _example_step_times(placer: Placer, cluster_name: str, **place_options) -> tuple[float, float, float]:
    """Step times on the example MLP of ``placer``'s placement, ``single``'s and ``round_robin``'s."""
    g, c, sim = load_graph(EXAMPLE), load_cluster(cluster_name), Simulator()
    ours = sim.time(g, c, placer.place(g, c, **place_options)).step_time
    single = sim.time(g, c, SinglePlacer().place(g, c)).step_time
    robin = sim.time(g, c, RoundRobinPlacer().place(g, c)).step_time
    return ours, single, robin


@pytest.fixture
def example_step_times() -> Callable[..., tuple[float, float, float]]:
    """Step times on ``datasets/examples/mlp2x8w2048b512.gnpg`` of a placer, ``single`` and ``round_robin``.

    ``example_step_times(placer, cluster_name, **place_options)`` returns ``(ours, single, robin)``.
    """
    return _example_step_times


@pytest.fixture
def one_device_cluster() -> Cluster:
    """A cluster of one K80-like device."""
    return toy_cluster(1, name="one")


@pytest.fixture()
def bars_asked(monkeypatch):
    """``bars_asked(module)``: the list of ``enabled`` values each ``module.evaluation_bar`` was asked with.

    How a test sees whether ``--no-progress`` (``progress=False``) reached a search that another placer started.
    """
    def record(module):
        shown = []
        original = module.evaluation_bar

        def recording(label, total, enabled=None, unit="evaluations"):
            shown.append(enabled)
            return original(label, total, enabled, unit)

        monkeypatch.setattr(module, "evaluation_bar", recording)
        return shown

    return record

