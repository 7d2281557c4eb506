"""Tests of ``gnplace.viz``: the timeline and the ratio plot."""

from __future__ import annotations

import pytest

from gnplace.cluster import load_cluster
from gnplace.sim.simulator import Simulator
from gnplace.toy import mlp_training_graph
from gnplace.viz import plot_ratios, plot_timeline

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


@pytest.mark.parametrize("name", ["gantt", "gantt.txt"])
def test_a_path_without_an_image_suffix_is_refused_before_drawing(tmp_path, case, name):
    g, result, _ = case
    with pytest.raises(ValueError, match="a plot is written as one of .png"):
        plot_timeline(g, result, tmp_path / name)  # "gantt" wrote gantt.png and returned "gantt"
    assert list(tmp_path.iterdir()) == []


def test_a_ratio_bar_weights_each_family_by_its_graphs(tmp_path, monkeypatch):
    import matplotlib.axes

    drawn = []
    real_bar = matplotlib.axes.Axes.bar
    monkeypatch.setattr(matplotlib.axes.Axes, "bar", lambda ax, x, heights, **kw: (drawn.append(list(heights)),
                                                                                   real_bar(ax, x, heights, **kw))[1])
    summary = [{"family": "a", "cluster": "k80x2", "placer": "heft", "vs_best": 1.0, "graphs": 9},
               {"family": "b", "cluster": "k80x2", "placer": "heft", "vs_best": 2.0, "graphs": 1}]
    assert plot_ratios(summary, tmp_path / "r.png").read_bytes().startswith(PNG_MAGIC)
    assert drawn == [[pytest.approx(2 ** 0.1)]]  # the mean over 10 graphs, not over 2 families (1.414)
    with pytest.raises(ValueError, match="no rows to plot"):
        plot_ratios([], tmp_path / "empty.png")
