"""Tests of ``gnplace.viz.plot_timeline``."""

from __future__ import annotations

import pytest

from gnplace.cluster import load_cluster
from gnplace.sim.simulator import Simulator
from gnplace.toy import mlp_training_graph
from gnplace.viz import plot_timeline

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def case():
    g, c = mlp_training_graph(layers=2, width=8, batch=4, branches=2), load_cluster("k80x2")
    placement = [0 if i % 2 else 1 for i in range(g.num_ops)]  # transfers on both links
    return g, Simulator().time(g, c, placement, timeline=True), Simulator().time(g, c, placement)


def test_writes_a_png(tmp_path, case):
    g, result, _ = case
    assert result.timeline is not None and result.timeline.num_transfers > 0
    path = plot_timeline(g, result, tmp_path / "plots" / "t.png", title="custom")
    assert path == tmp_path / "plots" / "t.png"
    data = path.read_bytes()
    assert data.startswith(PNG_MAGIC) and len(data) > 5000


def test_writes_svg(tmp_path, case):
    g, result, _ = case
    path = plot_timeline(g, result, str(tmp_path / "t.svg"))
    assert b"<svg" in path.read_bytes()[:2000]


def test_raises_without_timeline(tmp_path, case):
    g, _, plain = case
    assert plain.timeline is None
    with pytest.raises(ValueError, match=r"^the step result has no timeline: simulate with timeline=True$"):
        plot_timeline(g, plain, tmp_path / "t.png")
    assert not (tmp_path / "t.png").exists()
