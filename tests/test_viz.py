"""Tests of ``gnplace.viz``: the timeline and the ratio plot."""

from __future__ import annotations

from pathlib import Path

import pytest

from gnplace import plot_text
from gnplace.cluster import load_cluster
from gnplace.graph_io import load_graph
from gnplace.sim.simulator import Simulator
from gnplace.toy import mlp_training_graph
from gnplace.viz import plot_ratios, plot_timeline

ROOT = Path(__file__).resolve().parents[1]
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


def test_each_op_and_transfer_is_one_bar_at_its_times_on_its_row_in_its_colour(tmp_path, case, monkeypatch):
    from matplotlib.colors import to_hex

    import gnplace.viz as viz

    g, result, _ = case
    figures = []
    monkeypatch.setattr(viz, "_save", lambda fig, path: figures.append(fig) or path)
    plot_timeline(g, result, tmp_path / "t.png")
    ax = figures[0].axes[0]
    drawn = []
    for collection in ax.collections:
        colour = to_hex(collection.get_facecolor()[0])
        for path in collection.get_paths():
            (x0, y0), (x1, y1) = path.vertices.min(axis=0), path.vertices.max(axis=0)
            drawn.append((round((y0 + y1) / 2, 6), round(x0, 9), round(x1, 9), colour))
    t = result.timeline
    colours = list(viz._PHASE_COLOURS.values())
    assert ax.get_xlabel() == "time (us)"  # a step of 421 us
    expected = [(2.0 * t.op_device[i], t.op_start[i] * 1e6, t.op_end[i] * 1e6, colours[g.phase[i]])
                for i in range(g.num_ops)]
    expected += [(2.0 * t.xfer_src[k] + 1, t.xfer_start[k] * 1e6, t.xfer_end[k] * 1e6, viz._TRANSFER_COLOUR)
                 for k in range(t.num_transfers)]
    assert sorted(drawn) == sorted((round(r, 6), round(a, 9), round(b, 9), to_hex(c)) for r, a, b, c in expected)
    assert ax.get_xlim()[0] == 0 and ax.get_xlim()[1] >= result.step_time * 1e6  # the whole step, from 0
    assert ax.get_ylim()[0] > ax.get_ylim()[1]  # row 0 on top


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


def test_another_graphs_step_is_refused_in_one_line(tmp_path, case):
    """A step of another graph was a numpy IndexError (a boolean index of another length)."""
    from gnplace.exceptions import InvalidArgument

    _, result, _ = case
    other = mlp_training_graph(layers=3, width=8, batch=4)
    with pytest.raises(InvalidArgument, match=rf"^the step result times {result.timeline.op_start.shape[0]} ops, "
                                              rf"graph 'mlp1x3w8b4' has {other.num_ops}: draw the result of this "
                                              r"graph's step$"):
        plot_timeline(other, result, tmp_path / "t.png")
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


@pytest.mark.parametrize("draw", ["timeline", "ratios"])
def test_a_plot_that_fails_to_write_keeps_the_file_there_before(tmp_path, case, draw):
    """A plot was written in place, so a write cut short (a full disk, Ctrl-C) left a truncated image."""
    resource = pytest.importorskip("resource")
    g, result, _ = case
    summary = [{"family": "a", "cluster": "k80x2", "placer": "heft", "vs_best": 1.0, "graphs": 1}]
    path = tmp_path / "plot.png"

    def plot():
        return plot_timeline(g, result, path) if draw == "timeline" else plot_ratios(summary, path)

    before = plot().read_bytes()
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (1000, hard))  # writes past 1,000 bytes fail (EFBIG): a full disk
    try:
        with pytest.raises(OSError):
            plot()
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    assert path.read_bytes() == before and [p.name for p in tmp_path.iterdir()] == ["plot.png"]


def test_a_ratio_bar_leaves_out_the_graphs_a_placer_ran_out_of_memory_on(tmp_path, monkeypatch):
    """A family's mean counted as many times as its rows, its out-of-memory rows (no ratio) included."""
    import matplotlib.axes

    from gnplace.evaluate import Row
    from gnplace.evaluate_summary import summarise

    def row(graph, family, placer, step, oom=False):
        return Row(graph=graph, family=family, graph_path=graph, ops=1, groups=1, cluster="c", placer=placer, seed=0,
                   step_time_s=step, bound_s=0.5, single_s=4.0, peak_memory_bytes=0.0, oom=oom, place_seconds=0.0)

    rows = [row(g, "a", "heft", 1.0) for g in ("a1", "a2", "a3")] + [row("b1", "b", "heft", 1.0)]
    rows += [row("a1", "a", "single", 4.0, oom=True), row("a2", "a", "single", 4.0, oom=True),
             row("a3", "a", "single", 4.0), row("b1", "b", "single", 1.0)]
    drawn = []
    real_bar = matplotlib.axes.Axes.bar
    monkeypatch.setattr(matplotlib.axes.Axes, "bar", lambda ax, x, heights, **kw: (drawn.append(list(heights)),
                                                                                   real_bar(ax, x, heights, **kw))[1])
    plot_ratios(summarise(rows), tmp_path / "r.png")
    assert drawn == [[1.0, pytest.approx(2.0)]]  # heft, single: the mean of 4 (a3) and 1 (b1), not 4 ** 0.75


@pytest.fixture
def bars(monkeypatch):
    """``(heights, labels)``: what each bar chart drawn draws, as lists, one per chart."""
    import matplotlib.axes

    drawn, names = [], []
    real_bar, real_labels = matplotlib.axes.Axes.bar, matplotlib.axes.Axes.set_xticklabels
    monkeypatch.setattr(matplotlib.axes.Axes, "bar", lambda ax, x, heights, **kw: (drawn.append(list(heights)),
                                                                                   real_bar(ax, x, heights, **kw))[1])
    monkeypatch.setattr(matplotlib.axes.Axes, "set_xticklabels",
                        lambda ax, labels, **kw: (names.append(list(labels)), real_labels(ax, labels, **kw))[1])
    return drawn, names


def test_a_placer_given_two_budgets_is_drawn_as_a_bar_each_in_budget_order(tmp_path, bars):
    """Lines of annealing at 200 and 2000 evaluations were one bar (their mean), named ``annealing``."""
    drawn, names = bars
    summary = [{"family": "a", "cluster": "c", "placer": "annealing", "budget": 2000, "label": "annealing@2000",
                "vs_best": 1.0, "graphs": 1},
               {"family": "a", "cluster": "c", "placer": "annealing", "budget": 200, "label": "annealing@200",
                "vs_best": 4.0, "graphs": 1},
               {"family": "a", "cluster": "c", "placer": "heft", "budget": None, "label": "heft", "vs_best": 2.0,
                "graphs": 1}]
    plot_ratios(summary, tmp_path / "r.png")
    assert names == [["annealing@200", "annealing@2000", "heft"]] and drawn == [[4.0, 1.0, 2.0]]


def test_a_placer_run_with_two_option_sets_is_drawn_as_a_bar_each(tmp_path, bars):
    """Lines of ppo at one budget with and without ``mode=refine`` were one bar (their mean)."""
    from gnplace.evaluate import Row
    from gnplace.evaluate_summary import summarise

    drawn, names = bars
    rows = [Row("g", "f", "/g.gnpg", 1, 1, "c", placer, 0, step, 0.5, 2.0, 0.0, False, 0.1, budget=budget,
                options=options, cluster_spec="c")
            for placer, step, budget, options in (("heft", 1.0, None, "{}"), ("ppo", 4.0, 20, "{}"),
                                                  ("ppo", 2.0, 20, '{"mode": "refine"}'))]
    plot_ratios(summarise(rows), tmp_path / "r.png")
    assert names == [["heft", "ppo@20", "ppo[mode=refine]@20"]] and drawn == [[1.0, 4.0, 2.0]]


@pytest.mark.parametrize("suffix", [".pdf", ".svg", ".ps", ".eps", ".png"])
def test_the_same_timeline_is_the_same_file(tmp_path, case, monkeypatch, suffix):
    """PDF, SVG and PostScript files carried the time they were written, and SVG random clip-path ids."""
    import time

    graph, result, _ = case
    plot_timeline(graph, result, tmp_path / f"a{suffix}")
    later = time.time() + 3600  # an hour on: a date stamped anywhere differs
    monkeypatch.setattr(time, "time", lambda: later)
    monkeypatch.setattr(time, "ctime", lambda *args: "Thu Jan  1 01:00:00 2099")
    plot_timeline(graph, result, tmp_path / f"b{suffix}")
    assert (tmp_path / f"a{suffix}").read_bytes() == (tmp_path / f"b{suffix}").read_bytes()


@pytest.mark.parametrize("backend", ["foo", "tkagg"])
def test_a_backend_named_in_mplbackend_does_not_stop_the_plot(tmp_path, backend):
    """``import matplotlib`` refused ``MPLBACKEND=foo`` (a ValueError traceback); the plots are drawn with Agg."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    code = ("import os, sys; from gnplace.cli import main; "
            "code = main(['simulate', sys.argv[1], '-c', 'k80x2', '-p', 'heft', '--timeline', 't.png']); "
            "print(code, os.environ['MPLBACKEND'])")
    graph = str(root / "datasets" / "examples" / "mlp1x8w6144b256.gnpg")
    env = {**os.environ, "MPLBACKEND": backend, "DISPLAY": "", "PYTHONPATH": str(root)}
    done = subprocess.run([sys.executable, "-c", code, graph], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines()[-1] == f"0 {backend}"  # the variable is the user's again after
    assert (tmp_path / "t.png").read_bytes().startswith(b"\x89PNG")


def test_the_plots_leave_the_callers_matplotlib_backend_and_figures_alone(tmp_path, case):
    """They switched the process to Agg (``matplotlib.use``): a notebook's inline plots stopped showing after."""
    import matplotlib
    import matplotlib.pyplot as plt

    g, result, _ = case
    backend = matplotlib.get_backend()
    try:
        plt.switch_backend("pdf")  # the caller's own (a file backend, so that the test needs no display)
        figures = plt.get_fignums()
        plot_timeline(g, result, tmp_path / "t.png")
        plot_ratios([{"family": "f", "cluster": "k80x2", "placer": "a", "vs_best": 1.0}], tmp_path / "r.png")
        assert matplotlib.get_backend() == "pdf"
        assert plt.get_fignums() == figures
    finally:
        plt.switch_backend(backend)


def test_a_large_timeline_draws_its_bars_as_one_image_in_an_svg_one_lane_per_device(tmp_path, case, monkeypatch):
    """Every bar was a vector path: 15.8 MB of SVG (33 s) for a 93,567-op step, 77.5 MB (36 s) for 280,158 ops and
    176,617 transfers, most bars narrower than a pixel. Past ``RASTER_ABOVE`` ops and transfers the bars are one image at the file's resolution
    (42 KB for these 26,000 bars, 4.4 MB as paths), one lane per device as before; a small step draws paths."""
    import numpy as np

    import gnplace.viz as viz
    from gnplace.toy import layered_graph

    graph, cluster = layered_graph(12_000, seed=0), load_cluster("k80x4")
    placement = np.random.default_rng(0).integers(0, cluster.num_devices, graph.num_ops)
    result = Simulator().time(graph, cluster, placement, timeline=True)
    assert graph.num_ops + result.timeline.num_transfers > viz.RASTER_ABOVE
    figures = []
    save = viz._save
    monkeypatch.setattr(viz, "_save", lambda fig, path: figures.append(fig) or save(fig, path))
    data = plot_timeline(graph, result, tmp_path / "t.svg").read_bytes()
    assert len(data) < 400_000
    assert data.count(b"<image ") == 1
    names = [f"gpu{k}" for k in range(4)]
    for name in names:  # each device's lane and send lane, labelled
        assert f"<!-- {name} -->".encode() in data and f"<!-- {name} send -->".encode() in data
    ax = figures[0].axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == names + [f"{n} send" for n in names]
    rows = set()
    for collection in ax.collections:
        assert collection.get_rasterized()
        rows |= {round(float(p.vertices[:, 1].min() + p.vertices[:, 1].max()) / 2, 6) for p in collection.get_paths()}
    assert {round(r) for r in rows} == set(range(8))  # ops on rows 0, 2, 4, 6, each device's transfers below them
    assert {r for r in rows if r % 2 == 0} == {0.0, 2.0, 4.0, 6.0}  # transfers in lanes of their rows (1 +- 0.3)
    assert all(abs(r - round(r)) < 0.3 for r in rows)
    small, small_result, _ = case
    figures.clear()
    plot_timeline(small, small_result, tmp_path / "small.svg")
    assert not any(c.get_rasterized() for c in figures[0].axes[0].collections)


def _bars_reference(ax, rows, start_s, end_s, height, colour, raster, scale):
    """``viz._bars`` as it was: ``broken_barh`` per row, a span per bar (its Python loop and a ``Path`` a bar)."""
    import numpy as np

    for row in np.unique(rows):
        on_row = rows == row
        starts = start_s[on_row] * scale
        spans = list(zip(starts.tolist(), (end_s[on_row] * scale - starts).tolist()))
        h = height if np.ndim(height) == 0 else float(height[on_row][0])  # a lane's (the bars of a row share one)
        bars = ax.broken_barh(spans, (row - h / 2, h), facecolors=colour, linewidth=0)
        if raster:
            bars.set_rasterized(True)


@pytest.mark.parametrize("raster", [False, True], ids=["paths", "raster"])
def test_the_bars_are_built_by_numpy_and_draw_the_same_pixels_and_files(tmp_path, monkeypatch, raster):
    """``broken_barh`` made a ``Path`` per bar in a Python loop, and a raster row drew one path a bar: 13 s for a
    93,567-op step's PNG. The corners are numpy's now, and a raster row is one path snapped to whole pixels as
    each bar was: the same PNG pixels, SVG and PDF, here for a small step drawn both ways."""
    import numpy as np
    from matplotlib.axes import Axes
    from matplotlib.image import imread

    import gnplace.viz as viz

    graph, cluster = load_graph(ROOT / "datasets" / "cifar10" / "cifar10_002.gnpg"), load_cluster("k80x4")
    placement = np.random.default_rng(1).integers(0, cluster.num_devices, graph.num_groups)[graph.group]
    result = Simulator().time(graph, cluster, placement, timeline=True)
    suffixes = ("png", "svg", "pdf") if raster else ("png", "svg")
    if raster:
        monkeypatch.setattr(viz, "RASTER_ABOVE", 0)
    with monkeypatch.context() as before:
        before.setattr(viz, "_bars", _bars_reference)
        for suffix in suffixes:
            plot_timeline(graph, result, tmp_path / f"before.{suffix}")

    def refused(*args, **kwargs):
        raise AssertionError("broken_barh called")

    monkeypatch.setattr(Axes, "broken_barh", refused)
    figures = []
    save = viz._save
    monkeypatch.setattr(viz, "_save", lambda fig, path: figures.append(fig) or save(fig, path))
    for suffix in suffixes:
        plot_timeline(graph, result, tmp_path / f"after.{suffix}")
    assert np.array_equal(imread(tmp_path / "before.png"), imread(tmp_path / "after.png"))
    for suffix in suffixes:
        assert (tmp_path / f"before.{suffix}").read_bytes() == (tmp_path / f"after.{suffix}").read_bytes(), suffix
    collections = figures[0].axes[0].collections
    bars = sum(len(c.get_paths()) for c in collections)
    assert bars == len(collections) if raster else bars == graph.num_ops + result.timeline.num_transfers


@pytest.mark.parametrize("suffix", [".png", ".svg", ".pdf"])
def test_writing_a_timeline_draws_its_bars_once(tmp_path, case, monkeypatch, suffix):
    """tight_layout left a placeholder layout engine, for which savefig first drew the figure with drawing turned
    off, but an SVG's or PDF's raster of the bars was drawn in full, twice in all (1.1 of 2.4 s at 280,158 ops)."""
    from matplotlib.collections import Collection

    import gnplace.viz as viz

    g, result, _ = case
    monkeypatch.setattr(viz, "RASTER_ABOVE", 0)
    draws = []
    draw = Collection.draw
    monkeypatch.setattr(Collection, "draw", lambda self, renderer: draws.append(self) or draw(self, renderer))
    figures = []
    save = viz._save
    monkeypatch.setattr(viz, "_save", lambda fig, path: figures.append(fig) or save(fig, path))
    plot_timeline(g, result, tmp_path / f"t{suffix}")
    bars = figures[0].axes[0].collections
    assert len(bars) > 1 and sorted(map(id, draws)) == sorted(map(id, bars))


def _drawn(fig):
    """Each bar drawn on the timeline's axes: ``(y0, y1, x0, x1, colour)``, in data units, from its path's corners."""
    from matplotlib.colors import to_hex

    bars = []
    for collection in fig.axes[0].collections:
        colour = to_hex(collection.get_facecolor()[0])
        for path in collection.get_paths():
            (x0, y0), (x1, y1) = path.vertices.min(axis=0), path.vertices.max(axis=0)
            bars.append((float(y0), float(y1), float(x0), float(x1), colour))
    return bars


def test_transfers_a_device_sends_at_once_are_drawn_in_lanes_of_its_row_not_over_each_other(tmp_path, monkeypatch):
    """The default mode has a link per ordered pair: gpu0 sends its output to gpu1 and gpu2 at once (3.1-36.4 ms),
    which drew two bars at one place, one bar to see. Each is a lane of gpu0's send row now."""
    import numpy as np
    from matplotlib.colors import to_hex

    import gnplace.viz as viz
    from gnplace.toy import fork_graph, toy_cluster

    g = fork_graph(out_bytes=400_000_000)
    result = Simulator().time(g, toy_cluster(3), [0, 1, 2, 0], timeline=True)
    t = result.timeline
    assert t.xfer_src.tolist() == [0, 0, 1, 2] and t.xfer_start[0] == t.xfer_start[1]  # at once, on two links
    figures = []
    monkeypatch.setattr(viz, "_save", lambda fig, path: figures.append(fig) or path)
    plot_timeline(g, result, tmp_path / "t.png")
    sent = sorted(bar for bar in _drawn(figures[0]) if bar[4] == to_hex(viz._TRANSFER_COLOUR))
    assert len(sent) == 4
    for k in range(t.num_transfers):  # each transfer at its times, inside its sender's row (1 +- 0.3, 3, 5)
        row = 2 * t.xfer_src[k] + 1
        assert any(row - 0.3 - 1e-9 <= y0 < y1 <= row + 0.3 + 1e-9 and np.isclose(x0, t.xfer_start[k] * 1e3)
                   and np.isclose(x1, t.xfer_end[k] * 1e3) for y0, y1, x0, x1, _ in sent)
    (a0, a1, *_), (b0, b1, *_) = sent[:2]  # gpu0's two: one above the other, apart
    assert a1 < b0 and a0 >= 0.7 and b1 <= 1.3
    assert [round(y1 - y0, 9) for y0, y1, *_ in sent[2:]] == [0.6, 0.6]  # one at a time: the whole row


def test_a_sender_has_as_many_lanes_as_transfers_it_runs_at_once():
    import numpy as np

    from gnplace.viz import _lanes

    sender = np.array([1, 1, 1, 1, 0, 0, 2])
    start = np.array([0.0, 0.0, 1.0, 2.0, 0.0, 1.0, 0.0])
    end = np.array([2.0, 1.0, 3.0, 3.0, 1.0, 2.0, 5.0])
    lane, lanes = _lanes(sender, start, end, 4)
    assert lanes.tolist() == [1, 2, 1, 1] and lane.tolist() == [0, 1, 1, 0, 0, 0, 0]  # touching ends share a lane
    assert [x.tolist() for x in _lanes(np.zeros(0, np.int64), np.zeros(0), np.zeros(0), 2)] == [[], [1, 1]]


@pytest.mark.parametrize(("flops", "unit", "per_second"), [(1e3, "us", 1e6), (1e10, "ms", 1e3), (1e13, "s", 1.0),
                                                           (6e16, "s", 1.0)])
def test_the_time_axis_is_in_the_unit_of_the_step_with_no_offset_or_exponent(tmp_path, monkeypatch, flops, unit,
                                                                               per_second):
    """The axis was in ms whatever the step: 0.000-0.014 ms for a 15 us step, 0-2.0 with "1e7" in a corner for 6
    hours. It is in format_seconds' unit of the step time (the title's), its numbers plain."""
    import numpy as np

    import gnplace.viz as viz
    from gnplace.toy import chain_graph, toy_cluster
    from gnplace.units import format_seconds

    g = chain_graph(3, flops=flops, out_bytes=10)
    result = Simulator().time(g, toy_cluster(1), [0, 0, 0], timeline=True)
    assert format_seconds(result.step_time).endswith(f" {unit}")  # 15.002 us, 3.586 ms, 10.719 s, 64285.714 s
    figures = []
    save = viz._save
    monkeypatch.setattr(viz, "_save", lambda fig, path: figures.append(fig) or save(fig, path))
    plot_timeline(g, result, tmp_path / "t.png")
    ax = figures[0].axes[0]
    assert ax.get_xlabel() == f"time ({unit})"
    assert ax.xaxis.get_offset_text().get_text() == ""
    labels = [t.get_text() for t in ax.get_xticklabels()]
    assert all(label.replace(".", "").isdigit() for label in labels), labels
    ends = sorted(x1 for *_, x1, _ in _drawn(figures[0]))
    assert np.allclose(ends, np.sort(result.timeline.op_end) * per_second, rtol=1e-12, atol=0)


@pytest.mark.parametrize("title", [None, "g on k80x2 (heft)"])
def test_the_step_time_is_marked_and_the_legend_covers_no_bar(tmp_path, case, monkeypatch, title):
    """A title given (simulate's, evaluate's) left the step time off the chart; the legend sat on the axes' lower
    right, over the last bars of the step. The step's end is a dashed line, its time in the legend, beside the axes."""
    import gnplace.viz as viz

    g, result, _ = case
    figures = []
    save = viz._save
    monkeypatch.setattr(viz, "_save", lambda fig, path: figures.append(fig) or save(fig, path))
    plot_timeline(g, result, tmp_path / "t.png", title=title)
    fig = figures[0]
    ax = fig.axes[0]
    (line,) = ax.get_lines()
    assert list(line.get_xdata()) == [result.step_time * 1e6] * 2  # us: a step of 421 us
    assert max(x1 for *_, x1, _ in _drawn(fig)) == pytest.approx(result.step_time * 1e6, rel=1e-12)  # the last end
    legend = ax.get_legend()
    assert [t.get_text() for t in legend.get_texts()][-1] == "step 420.937 us"
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    renderer = FigureCanvasAgg(fig).get_renderer()
    assert legend.get_window_extent(renderer).x0 >= ax.get_window_extent(renderer).x1  # beside, not over the bars
    assert legend.get_window_extent(renderer).x1 <= fig.bbox.x1  # and on the figure


def test_every_device_row_is_drawn_whole_whether_or_not_it_ran_an_op(tmp_path, monkeypatch):
    """The y limits were the bars': gpu0 and gpu3 ran nothing, and their rows and labels sat on the axes' edges
    (limits 7 to 0, a row 1 high); every device keeps its two rows, whole, whatever ran on it."""
    import gnplace.viz as viz
    from gnplace.toy import chain_graph, toy_cluster

    g = chain_graph(4)
    result = Simulator().time(g, toy_cluster(4), [1, 1, 2, 2], timeline=True)
    figures = []
    monkeypatch.setattr(viz, "_save", lambda fig, path: figures.append(fig) or path)
    plot_timeline(g, result, tmp_path / "t.png")
    ax = figures[0].axes[0]
    assert ax.get_ylim() == (7.5, -0.5)  # rows 0 (gpu0) to 7 (gpu3 send), half a row apart from the edges
    assert [t.get_text() for t in ax.get_yticklabels()] == ["gpu0", "gpu1", "gpu2", "gpu3", "gpu0 send", "gpu1 send",
                                                          "gpu2 send", "gpu3 send"]
    assert sorted({round((y0 + y1) / 2) for y0, y1, *_ in _drawn(figures[0])}) == [2, 3, 4]


def test_a_device_out_of_memory_is_labelled_so(tmp_path, monkeypatch):
    """An out-of-memory placement's chart looked like any other: the devices past their memory are labelled so."""
    from matplotlib.colors import to_hex

    import gnplace.viz as viz
    from gnplace.graph import OpGraph
    from gnplace.toy import toy_cluster

    g = OpGraph(["a", "b", "c"], [(0, 1), (1, 2)], flops=[1e9] * 3, out_bytes=[4e6, 4e6, 0], param_bytes=[0, 3e6, 0])
    result = Simulator().time(g, toy_cluster(3, memory=5e6), [0, 1, 2], timeline=True)
    assert result.oom.tolist() == [False, True, False]  # gpu1 holds 3 MB of parameters, 4 MB in and 4 MB out
    figures = []
    monkeypatch.setattr(viz, "_save", lambda fig, path: figures.append(fig) or path)
    plot_timeline(g, result, tmp_path / "t.png")
    labels = figures[0].axes[0].get_yticklabels()
    assert [t.get_text() for t in labels[:3]] == ["gpu0", "gpu1 (out of memory)", "gpu2"]
    assert [to_hex(t.get_color()) for t in labels[:4]] == ["#000000", to_hex(viz._OOM_COLOUR), "#000000", "#000000"]


def test_a_long_device_name_is_shortened_and_every_row_label_is_on_the_figure(tmp_path, monkeypatch):
    """A device named with 300 characters took the figure's width: "Tight layout not applied", the labels ran off the
    left edge. Its rows' labels keep its start and end; laid out at the resolution written, each is on the figure
    (laid out at 100 dpi and drawn at 120, a label of 53 characters began 1 pixel left of the edge)."""
    import warnings

    import gnplace.viz as viz
    from gnplace.cluster import Device
    from gnplace.toy import chain_graph, uniform_cluster

    names = ["gpu0", "x" * 150 + "0" + "x" * 149, "x" * 150 + "1" + "x" * 149, "y" * 48]
    devices = [Device(name, "k80", 2.8e12, 240e9, 12e9) for name in names]
    g = chain_graph(4)
    result = Simulator().time(g, uniform_cluster(devices), [0, 1, 2, 3], timeline=True)
    figures = []
    save = viz._save
    monkeypatch.setattr(viz, "_save", lambda fig, path: figures.append(fig) or save(fig, path))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        plot_timeline(g, result, tmp_path / "t.png")
    fig = figures[0]
    labels = fig.axes[0].get_yticklabels()
    short = "x" * 23 + "…" + "x" * 24
    assert [t.get_text() for t in labels[:4]] == ["gpu0", f"#1 {short}", f"#2 {short}", "y" * 48]  # two alike: #k
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    renderer = FigureCanvasAgg(fig).get_renderer()
    assert fig.dpi == 120 and min(t.get_window_extent(renderer).x0 for t in labels) >= 0


def test_the_timelines_colours_are_apart_to_each_kind_of_colour_blindness():
    """The update's green (#55A868) and the backward's orange (#DD8452) were 7.3 apart (CIELAB) to a protanope: one
    tint. Every two of the four colours are at least 20 apart to normal, protan, deutan and tritan vision (Machado,
    Oliveira and Fernandes 2009, severity 1)."""
    from itertools import combinations

    import numpy as np
    from matplotlib.colors import to_rgb

    import gnplace.viz as viz

    def linear(c):
        return np.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)

    def lab(rgb):  # linear sRGB -> CIELAB (D65)
        xyz = np.array([[0.4124, 0.3576, 0.1805], [0.2126, 0.7152, 0.0722], [0.0193, 0.1192, 0.9505]]) @ rgb
        t = xyz / np.array([0.95047, 1.0, 1.08883])
        f = np.where(t > 0.008856, np.cbrt(t), 7.787 * t + 16 / 116)
        return np.array([116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])])

    seen = {"normal": np.eye(3),
            "protan": np.array([[0.152286, 1.052583, -0.204868], [0.114503, 0.786281, 0.099216],
                                [-0.003882, -0.048116, 1.051998]]),
            "deutan": np.array([[0.367322, 0.860646, -0.227968], [0.280085, 0.672501, 0.047413],
                                [-0.011820, 0.042940, 0.968881]]),
            "tritan": np.array([[1.255528, -0.076749, -0.178779], [-0.078411, 0.930809, 0.147602],
                                [0.004733, 0.691367, 0.303900]])}
    colours = [*viz._PHASE_COLOURS.values(), viz._TRANSFER_COLOUR]
    for vision, matrix in seen.items():
        for a, b in combinations(colours, 2):
            seen_a, seen_b = (np.clip(matrix @ linear(np.array(to_rgb(c))), 0, 1) for c in (a, b))
            assert np.linalg.norm(lab(seen_a) - lab(seen_b)) >= 20, (vision, a, b)


def test_an_op_of_no_duration_is_marked_without_changing_the_time_axis(tmp_path, monkeypatch):
    """An op of 0 s (0 FLOP and no bytes on a device without launch overhead: a reshape, a gradient of 0 FLOP) was a
    bar of no width: no pixel showed it. It is a mark of MARK_POINTS (2 pixels) from its time on, in its phase's
    colour, on its row; the axis keeps the step's limits (0 to the step and its 5% margin)."""
    import numpy as np
    from matplotlib.colors import to_rgb
    from matplotlib.image import imread

    import gnplace.viz as viz
    from gnplace.cluster import Device
    from gnplace.graph import OpGraph
    from gnplace.toy import uniform_cluster

    devices = [Device(f"gpu{k}", "k80", 2.8e12, 240e9, 12e9, launch_overhead=0.0) for k in range(2)]
    g = OpGraph(["a", "d", "r", "c"], [(0, 1), (0, 2), (1, 3)], flops=[1e9, 1e9, 0, 1e9], out_bytes=[0, 4e6, 0, 0])
    result = Simulator().time(g, uniform_cluster(devices), [0, 0, 1, 1], timeline=True)
    t = result.timeline
    assert t.op_start[2] == t.op_end[2] and 0 < t.op_start[2] < t.op_start[3]  # r: 0 s, alone on gpu1
    figures = []
    real_save = viz._save
    monkeypatch.setattr(viz, "_save", lambda fig, path: (figures.append(fig), real_save(fig, path))[1])
    path = plot_timeline(g, result, tmp_path / "t.png")
    fig, ax = figures[0], figures[0].axes[0]
    assert ax.get_xlim() == pytest.approx((0.0, result.step_time * 1e3 * 1.05))  # the step's axis, in ms
    x, y = ax.transData.transform((t.op_start[2] * 1e3, 2.0))  # r's time on gpu1's row (pixels from bottom left)
    image = imread(path)[:, :, :3]
    column = image[image.shape[0] - int(round(y)), int(x) - 2:int(x) + 4]
    blue = np.array(to_rgb(viz._PHASE_COLOURS["forward"]))
    assert (np.abs(column - blue).max(axis=1) < 0.02).sum() >= 2  # its pixels, in the forward's colour
    assert fig.dpi * viz.MARK_POINTS / 72 == pytest.approx(2.0)


@pytest.mark.parametrize("num_ops, placement", [(1, [0]), (5, [0, 1, 0, 1, 0])])
def test_a_step_of_no_time_has_one_tick_at_0_in_the_middle_of_its_axis(tmp_path, monkeypatch, num_ops, placement):
    """A step of 0 s (ops of 0 FLOP and no bytes, no launch overhead nor latency) drew an axis of 0-0.055 s with a
    tick every 0.01 s, as if the step had taken 50 ms, its ops' marks and its end's line on the left spine, hidden.
    Its axis has one tick, 0, in the middle: the marks and the step's end drawn there, inside the axes."""
    import numpy as np
    from matplotlib.colors import to_rgb
    from matplotlib.image import imread

    import gnplace.viz as viz
    from gnplace.toy import chain_graph, toy_cluster

    g = chain_graph(num_ops, flops=0.0, out_bytes=0)
    result = Simulator().time(g, toy_cluster(2, launch_overhead=0.0, latency=0.0), placement, timeline=True)
    assert result.step_time == 0.0 and result.timeline.num_transfers == len(placement) - 1
    figures = []
    real_save = viz._save
    monkeypatch.setattr(viz, "_save", lambda fig, path: (figures.append(fig), real_save(fig, path))[1])
    path = plot_timeline(g, result, tmp_path / "t.png")
    ax = figures[0].axes[0]
    assert ax.get_xlim() == (-1.0, 1.0) and ax.get_xticks().tolist() == [0.0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["0"] and ax.get_xlabel() == "time (s)"
    x, y = ax.transData.transform((0.0, 0.0))  # op 0 on gpu0's row (pixels from bottom left)
    image = imread(path)[:, :, :3]
    row = image[image.shape[0] - int(round(y)), int(x) - 2:int(x) + 4]
    blue = np.array(to_rgb(viz._PHASE_COLOURS["forward"]))
    assert (np.abs(row - blue).max(axis=1) < 0.02).sum() >= 1  # its mark, in the forward's colour, not the spine


def test_the_ratio_plot_is_laid_out_at_the_resolution_it_is_written_at(tmp_path, monkeypatch):
    """The ratio plot was laid out at 100 dpi and written at 120 (the timeline at 120 both): on the baselines' chart
    (5 clusters, 10 placers) its margins were 0.4 pixels short on the left and 1.2 too tall at the bottom of the
    layout at 120. Its figure is at the written resolution, so laying it out again at that resolution moves nothing."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    import gnplace.viz as viz

    figures = []
    real_save = viz._save
    monkeypatch.setattr(viz, "_save", lambda fig, path: (figures.append(fig), real_save(fig, path))[1])
    placers = ["annealing", "auto", "expert", "heft", "m_etf", "m_sct", "metis", "random_search", "round_robin",
               "single"]
    summary = [{"family": "a", "cluster": c, "placer": p, "vs_best": 1.0 + k / 10, "graphs": 8}
               for c in ("cpu_gpu", "k80x2", "k80x4", "tight4", "v100x8") for k, p in enumerate(placers)]
    plot_ratios(summary, tmp_path / "r.png")
    fig = figures[0]
    assert fig.dpi == plot_text.DPI == 120
    margins = ("left", "bottom", "right", "top")
    laid_out = [getattr(fig.subplotpars, m) for m in margins]
    fig.set_dpi(120)
    FigureCanvasAgg(fig)
    fig.tight_layout()  # again, at the resolution written
    assert [getattr(fig.subplotpars, m) for m in margins] == pytest.approx(laid_out, abs=1e-9)


def _laid_out(monkeypatch):
    """The figures the plots write, collected as they are written."""
    import gnplace.viz as viz

    figures = []
    real_save = viz._save
    monkeypatch.setattr(viz, "_save", lambda fig, path: (figures.append(fig), real_save(fig, path))[1])
    return figures


def test_long_bar_labels_are_shortened_each_its_own_and_on_the_figure(tmp_path, monkeypatch, bars):
    """A label of 58 characters or more (``ppo[...]@2000`` with several options) made matplotlib warn "Tight layout
    not applied" and the labels ran off the figure. A label drawn wider than RATIO_LABEL_POINTS keeps its start and
    end; two that shorten alike are numbered by their bar; every label, however wide its characters, is on the
    figure; a label that fits is drawn as it is."""
    import warnings

    from matplotlib.backends.backend_agg import FigureCanvasAgg

    import gnplace.viz as viz

    figures = _laid_out(monkeypatch)
    _, names = bars
    options = "clip=0.2,ent=0.01,lr=0.0003,mode=refine,steps=64,epochs=8"
    labels = [f"ppo[{options}]@2000", f"ppo[{options.replace('0.0003', '0.0001')}]@2000", "heft", "W" * 60,
              "\u2031" * 40 + "$x$"]
    summary = [{"family": "f", "cluster": "k80x2", "placer": label[:3], "label": label, "vs_best": 1.0, "graphs": 1}
               for label in labels]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        plot_ratios(summary, tmp_path / "r.png")
    drawn = names[0]  # in the bars' order: by placer (W, hef, ppo, \u2031), then label
    assert drawn[1] == "heft" and len(set(drawn)) == 5
    assert [d[:8] for d in drawn[2:4]] == ["#2 ppo[c", "#3 ppo[c"]  # alike but for the middle: numbered
    assert all(d.endswith("]@2000") and "…" in d for d in drawn[2:4])
    # where two shorten alike, each shortened label is numbered, as a timeline's rows
    assert drawn[0].startswith("#0 W") and drawn[0].endswith("W") and "…" in drawn[0]
    assert drawn[4].startswith("#4 \u2031") and drawn[4].endswith(r"\$x\$")  # drawn as text, its end kept
    fig = figures[0]
    renderer = FigureCanvasAgg(fig).get_renderer()
    for text in fig.axes[0].get_xticklabels():
        box = text.get_window_extent(renderer)
        assert box.y0 >= 0 and box.x0 >= 0
        assert plot_text.text_width(text.get_text().replace(r"\$", "$"), text.get_fontproperties()) <= (
            viz.RATIO_LABEL_POINTS * fig.dpi / 72)


def test_a_long_cluster_name_is_shortened_over_its_axes(tmp_path, monkeypatch):
    """A cluster named with 80 characters was a title wider than its axes, over its neighbour's and off the figure."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    figures = _laid_out(monkeypatch)
    summary = [{"family": "f", "cluster": cluster, "placer": "heft", "vs_best": 1.0, "graphs": 1}
               for cluster in ("a" * 40 + "b" * 40, "k80x2")]
    plot_ratios(summary, tmp_path / "r.png")
    fig = figures[0]
    renderer = FigureCanvasAgg(fig).get_renderer()
    titles = [ax.get_title() for ax in fig.axes]
    assert titles[1] == "k80x2" and titles[0].startswith("a") and titles[0].endswith("b") and "…" in titles[0]
    for ax in fig.axes:
        box, over = ax.title.get_window_extent(renderer), ax.get_window_extent(renderer)
        assert over.x0 <= box.x0 and box.x1 <= over.x1


@pytest.mark.parametrize("given", [False, True])
def test_a_long_timeline_title_is_shortened_inside_the_figure(tmp_path, monkeypatch, case, given):
    """A graph named with 200 characters put the title's start 687 pixels left of the figure's edge (1440 wide). A
    title wider than the figure keeps its start and end (the step time) with ``…`` between, inside the figure."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    g, result, _ = case
    figures = _laid_out(monkeypatch)
    name = "s" * 100 + "$" + "e" * 99
    if given:
        plot_timeline(g, result, tmp_path / "t.png", title=f"{name} on k80x2")
    else:
        g = g.replace(name=name)
        plot_timeline(g, result, tmp_path / "t.png")
    fig = figures[0]
    title = fig.axes[0].title
    text = title.get_text()
    assert text.startswith("sss") and "…" in text
    assert text.endswith(" on k80x2" if given else "us")
    box = title.get_window_extent(FigureCanvasAgg(fig).get_renderer())
    assert 0 <= box.x0 and box.x1 <= fig.bbox.width


def test_short_labels_and_titles_are_drawn_as_before(tmp_path, monkeypatch, case):
    """Labels and titles that fit are drawn as they are: the fitting measures them, nothing else changes."""
    g, result, _ = case
    figures = _laid_out(monkeypatch)
    summary = [{"family": "f", "cluster": "k80x2", "placer": "ppo", "label": "ppo[clip=0.2,lr=0.0003]@2000",
                "vs_best": 1.0, "graphs": 1}]
    plot_ratios(summary, tmp_path / "r.png")
    plot_timeline(g, result, tmp_path / "t.png", title="y" * 100)
    ratios, timeline = figures
    assert [t.get_text() for t in ratios.axes[0].get_xticklabels()] == ["ppo[clip=0.2,lr=0.0003]@2000"]
    assert ratios.axes[0].get_title() == "k80x2" and timeline.axes[0].get_title() == "y" * 100


def _row_names_by_characters(names, suffixes=None):
    """``plot_text.row_names`` as it was: a name cut to ROW_NAME_CHARS characters, however wide they are drawn."""
    short = [plot_text._middle_cut(n, plot_text.ROW_NAME_CHARS) for n in names]
    if len(set(short)) < len(short):
        return [f"#{k} {s}" if s != n else s for k, (s, n) in enumerate(zip(short, names))]
    return short


def _named_cluster_step(names, oom=()):
    """A chain's step on a cluster of devices named ``names``, those of index in ``oom`` out of memory."""
    import dataclasses

    import numpy as np

    from gnplace.cluster import Device
    from gnplace.toy import chain_graph, uniform_cluster

    devices = [Device(name, "k80", 2.8e12, 240e9, 12e9) for name in names]
    g = chain_graph(len(names))
    result = Simulator().time(g, uniform_cluster(devices), list(range(len(names))), timeline=True)
    return g, dataclasses.replace(result, peak_memory=np.where(np.isin(np.arange(len(names)), oom), 1e20, 0.0))


def test_a_device_named_with_wide_characters_is_shortened_by_its_drawn_width(tmp_path, monkeypatch):
    """A device named with 48 per-ten-thousand signs (1,440 pixels drawn, the figure's width) was under the
    48-character cap: matplotlib warned "Tight layout not applied" and its label ran off the figure. A label drawn
    wider than ROW_LABEL_POINTS (with its " send" or " (out of memory)") keeps the most characters that fit; two
    that shorten alike are numbered by their device; every label is on the figure."""
    import warnings

    from matplotlib.backends.backend_agg import FigureCanvasAgg


    figures = _laid_out(monkeypatch)
    g, result = _named_cluster_step(["gpu0", "\u2031" * 48, "\u2031" * 20 + "y" + "\u2031" * 27,
                                     "W" * 20 + "\u2031" * 28], oom=[3])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        plot_timeline(g, result, tmp_path / "t.png")
    fig = figures[0]
    labels = fig.axes[0].get_yticklabels()
    texts = [t.get_text() for t in labels]
    assert texts[0] == "gpu0" and texts[4:] == [f"{n} send" for n in [*texts[:3], texts[3].removesuffix(
        " (out of memory)")]]
    assert texts[1].startswith("#1 \u2031") and texts[2].startswith("#2 \u2031")  # alike but for the middle
    assert texts[3].startswith("#3 WWW") and texts[3].endswith("\u2031 (out of memory)")  # each shortened: numbered
    assert all("…" in t for t in texts[1:4]) and len(set(texts)) == 8
    renderer = FigureCanvasAgg(fig).get_renderer()
    for text in labels:
        box = text.get_window_extent(renderer)
        assert 0 <= box.x0 and box.x1 <= fig.axes[0].get_window_extent(renderer).x0
        assert plot_text.text_width(text.get_text(), text.get_fontproperties()) <= (
            plot_text.ROW_LABEL_POINTS * fig.dpi / 72)


@pytest.mark.parametrize("suffix", [".png", ".svg", ".pdf"])
def test_device_names_that_fit_are_drawn_as_the_character_cap_drew_them(tmp_path, monkeypatch, suffix):
    """Names whose labels fit ROW_LABEL_POINTS (48 of the widest ASCII characters out of memory, two of 300
    characters cut alike and numbered) draw the same files as the 48-character cap alone."""
    import gnplace.viz as viz

    names = ["gpu0", "@" * 48, "x" * 150 + "0" + "x" * 149, "x" * 150 + "1" + "x" * 149, "W" * 48]
    g, result = _named_cluster_step(names, oom=[1, 3])
    with monkeypatch.context() as before:
        before.setattr(viz, "row_names", _row_names_by_characters)
        plot_timeline(g, result, tmp_path / f"before{suffix}")
    plot_timeline(g, result, tmp_path / f"after{suffix}")
    assert (tmp_path / f"before{suffix}").read_bytes() == (tmp_path / f"after{suffix}").read_bytes()


def _ylabel_inside(fig):
    """The ratio plot's y label: its text, its font size, whether its drawn extent lies within the figure, and
    whether within its axes' height (a pixel of rounding either way)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    renderer = FigureCanvasAgg(fig).get_renderer()
    ax = fig.axes[0]
    box, over = ax.yaxis.label.get_window_extent(renderer), ax.get_window_extent(renderer)
    inside = fig.bbox.x0 <= box.x0 and box.x1 <= fig.bbox.x1 and fig.bbox.y0 <= box.y0 and box.y1 <= fig.bbox.y1
    return ax.get_ylabel(), ax.yaxis.label.get_fontsize(), inside, over.y0 - 1 <= box.y0 and box.y1 <= over.y1 + 1


@pytest.mark.parametrize(("label", "lines"), [("a" * 14, 1), ("W" * 10, 1), ("a" * 20, 2), ("W" * 12, 2),
                                              ("W" * 14, 3), ("W" * 60, 3)],
                         ids=["14a", "10W", "20a", "12W", "14W", "60W"])
def test_the_ratio_plots_y_label_lies_within_the_figure_whatever_its_bar_labels(tmp_path, monkeypatch, label, lines):
    """The y label (348 pixels) is centred on the axes: bar labels of 12 or more wide characters left the axes
    shorter (255 pixels), and the label ran off the figure's top (to 484 of its 480 pixels; 526 for 20 or more).
    Where it would, it is broken onto two lines, or three, that the axes' height holds; one that lies within the
    figure is left on one line."""
    import warnings

    import gnplace.viz as viz

    figures = _laid_out(monkeypatch)
    summary = [{"family": "f", "cluster": "k80x2", "placer": placer, "vs_best": 1.0, "graphs": 1}
               for placer in ("heft", label)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        plot_ratios(summary, tmp_path / "r.png")
    text, size, inside, beside = _ylabel_inside(figures[0])
    assert text == viz.RATIO_YLABELS[lines - 1] and size == 10 and inside and (beside or lines == 1)


def test_the_ratio_plots_y_label_is_drawn_smaller_where_even_three_lines_are_too_long(tmp_path, monkeypatch):
    """Bar labels of 230 points (RATIO_LABEL_POINTS raised) leave the axes 73 pixels high, under the three lines'
    longest (144): the label is drawn in the font size that fits, within the axes and the figure."""
    import gnplace.viz as viz

    monkeypatch.setattr(viz, "RATIO_LABEL_POINTS", 230.0)
    figures = _laid_out(monkeypatch)
    summary = [{"family": "f", "cluster": "k80x2", "placer": label, "vs_best": 1.0, "graphs": 1}
               for label in ("heft", "W" * 80)]
    plot_ratios(summary, tmp_path / "r.png")
    assert _ylabel_inside(figures[0]) == (viz.RATIO_YLABELS[-1], 5.0, True, True)


@pytest.mark.parametrize("suffix", [".png", ".svg", ".pdf"])
def test_a_ratio_plot_whose_y_label_fits_is_drawn_as_before(tmp_path, monkeypatch, suffix):
    """The baselines' chart (5 clusters, 10 placers; its y label longer than its axes are high, within the figure)
    and bar labels of 11 'W's: the y label lies within the figure, the same files as without its fitting."""
    import gnplace.viz as viz

    placers = ["annealing", "auto", "expert", "heft", "m_etf", "m_sct", "metis", "random_search", "round_robin",
               "single"]
    baselines = [{"family": "a", "cluster": c, "placer": p, "vs_best": 1.0 + k / 10, "graphs": 8}
                 for c in ("cpu_gpu", "k80x2", "k80x4", "tight4", "v100x8") for k, p in enumerate(placers)]
    eleven = [{"family": "f", "cluster": "k80x2", "placer": p, "vs_best": 1.0, "graphs": 1} for p in ("heft", "W" * 11)]
    for name, summary in (("baselines", baselines), ("eleven", eleven)):
        with monkeypatch.context() as before:
            before.setattr(viz, "_fit_ylabel", lambda fig, ax, texts: None)
            plot_ratios(summary, tmp_path / f"before{suffix}")
        plot_ratios(summary, tmp_path / f"after{suffix}")
        assert (tmp_path / f"before{suffix}").read_bytes() == (tmp_path / f"after{suffix}").read_bytes(), name


def _lasting(result, seconds):
    """``result`` with its timeline's times scaled so that its step lasts ``seconds``."""
    import dataclasses

    t, f = result.timeline, seconds / result.step_time
    timeline = dataclasses.replace(t, op_start=t.op_start * f, op_end=t.op_end * f, xfer_start=t.xfer_start * f,
                                   xfer_end=t.xfer_end * f)
    return dataclasses.replace(result, timeline=timeline, step_time=result.step_time * f)


@pytest.mark.parametrize("seconds", [1e8, 1e9, 1e10])
def test_the_time_axis_labels_of_a_narrow_timeline_are_apart(tmp_path, monkeypatch, seconds):
    """Beside rows' labels of 960 pixels (48 '@' out of memory), a step of 1e9 s drew 500000000 over 1000000000
    (8 pixels): matplotlib chose the ticks by the axes' width and the labels' height. Neighbouring labels are at
    least TICK_GAP_POINTS apart."""
    import warnings

    from matplotlib.backends.backend_agg import FigureCanvasAgg

    import gnplace.viz as viz

    figures = _laid_out(monkeypatch)
    g, result = _named_cluster_step(["@" * 48, "W" * 48], oom=[0, 1])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        plot_timeline(g, _lasting(result, seconds), tmp_path / "t.png")
    fig = figures[0]
    ax = fig.axes[0]
    renderer = FigureCanvasAgg(fig).get_renderer()
    lo, hi = ax.get_xlim()
    boxes = [tick.label1.get_window_extent(renderer) for tick in ax.xaxis.get_major_ticks()
             if lo <= tick.get_loc() <= hi]
    assert len(boxes) >= 2 and all(b.x0 - a.x1 >= viz.TICK_GAP_POINTS * fig.dpi / 72 - 1
                                   for a, b in zip(boxes, boxes[1:]))
    assert all(0 <= b.x0 and b.x1 <= fig.bbox.x1 for b in boxes)


@pytest.mark.parametrize("suffix", [".png", ".svg", ".pdf"])
def test_a_timeline_whose_time_labels_are_apart_is_drawn_as_before(tmp_path, monkeypatch, case, suffix):
    """Steps of 1 ns to 1e9 s on two devices, and a 1e6 s step beside labels of 960 pixels: the same files as
    without the spacing of the time axis' labels."""
    import gnplace.viz as viz

    g, result, _ = case
    wide, wide_result = _named_cluster_step(["@" * 48, "W" * 48], oom=[0, 1])
    cases = [(g, _lasting(result, s)) for s in (1e-9, 0.0123, 1e6, 1e9)] + [(wide, _lasting(wide_result, 1e6))]
    for k, (graph, step) in enumerate(cases):
        with monkeypatch.context() as before:
            before.setattr(viz, "_space_ticks", lambda fig, ax: None)
            plot_timeline(graph, step, tmp_path / f"before{suffix}")
        plot_timeline(graph, step, tmp_path / f"after{suffix}")
        assert (tmp_path / f"before{suffix}").read_bytes() == (tmp_path / f"after{suffix}").read_bytes(), k


def _bar_rows(bars: int, clusters: int) -> list[dict]:
    """A ratio summary of ``bars`` placers (``placer0``, ...) on each of ``clusters`` clusters, rising ratios."""
    return [{"family": "f", "cluster": f"c{j}", "placer": f"placer{k}", "vs_best": 1 + k / 10, "graphs": 1}
            for j in range(clusters) for k in range(bars)]


def _label_pitches(fig) -> list[float]:
    """The distances (pixels) between neighbouring labelled ticks of each axes of laid-out ratio plot ``fig``."""
    import numpy as np

    return [float(d) for ax in fig.axes for d in np.diff(ax.transData.transform(
        [(x, 0.0) for x in ax.get_xticks()])[:, 0])]


@pytest.mark.parametrize(("bars", "clusters", "wider"), [(40, 1, False), (48, 1, True), (120, 1, True),
                                                         (30, 3, True)])
def test_the_ratio_plots_bars_are_widened_apart_where_their_labels_would_overlap(tmp_path, monkeypatch, bars,
                                                                                  clusters, wider):
    """The figure's width was set by the clusters alone: 48 bars on one cluster (14 pixels apart), or 30 on each of
    three (13), drew their 60-degree labels over each other. The figure is widened until the bars are
    RATIO_BAR_POINTS (15 pixels) apart, every bar labelled; 40 bars on one cluster are drawn as before."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    import gnplace.viz as viz

    figures = _laid_out(monkeypatch)
    plot_ratios(_bar_rows(bars, clusters), tmp_path / "r.png")
    fig = figures[0]
    assert bool(fig.get_figwidth() > 4 + 2.5 * clusters) is wider
    assert all(len(ax.get_xticklabels()) == bars for ax in fig.axes)
    assert min(_label_pitches(fig)) >= viz.RATIO_BAR_POINTS * fig.dpi / 72 - 1e-6
    renderer = FigureCanvasAgg(fig).get_renderer()
    width = fig.get_figwidth() * fig.dpi
    for ax in fig.axes:  # on the figure, and each under its bar: the axes' limits hold every bar
        lo, hi = ax.get_xlim()
        assert lo < -0.4 and hi > bars - 0.6
        assert all(0 <= t.get_window_extent(renderer).x0 and t.get_window_extent(renderer).x1 <= width
                   for t in ax.get_xticklabels())


def test_bars_too_many_for_the_widest_ratio_plot_are_labelled_one_in_k(tmp_path, monkeypatch):
    """Past RATIO_MAX_INCHES (Agg draws no image 65,536 pixels wide), the figure keeps that width and every k-th
    bar is labelled, k the fewest that leaves the labels RATIO_BAR_POINTS apart."""
    import gnplace.viz as viz

    monkeypatch.setattr(viz, "RATIO_MAX_INCHES", 8.0)
    figures = _laid_out(monkeypatch)
    plot_ratios(_bar_rows(120, 1), tmp_path / "r.png")
    fig, ax = figures[0], figures[0].axes[0]
    assert fig.get_figwidth() == 8.0
    ticks = ax.get_xticks().tolist()
    every = ticks[1] - ticks[0]
    assert ticks == list(range(0, 120, every))
    assert [t.get_text() for t in ax.get_xticklabels()] == sorted(f"placer{k}" for k in range(120))[::every]
    need, pitch = viz.RATIO_BAR_POINTS * fig.dpi / 72, min(_label_pitches(fig)) / every  # pixels
    assert every > 1 and (every - 1) * pitch < need <= every * pitch


@pytest.mark.parametrize("ratios", [[None, 1.2, 0.9, 2.0, None], [None, None, None]], ids=["ends", "all"])
def test_a_ratio_bar_with_no_ratio_is_written_n_a_within_the_axes(tmp_path, monkeypatch, ratios):
    """A bar with no ratio (every run out of memory: ``vs_best`` None, its mean nan) was no bar and nothing said
    so; at either end its place was outside the axes' limits (its label on the corner), and with no ratio at all
    the y axis ran 0.95 to 1.05. Each is written ``n/a`` at its foot, every bar's place within the axes, from 0."""
    figures = _laid_out(monkeypatch)
    summary = [{"family": "f", "cluster": "k80x2", "placer": f"p{k}", "vs_best": v, "graphs": 1,
                "vs_best_graphs": int(v is not None)} for k, v in enumerate(ratios)]
    plot_ratios(summary, tmp_path / "r.png")
    ax = figures[0].axes[0]
    (lo, hi), (bottom, top) = ax.get_xlim(), ax.get_ylim()
    assert lo < -0.4 and hi > len(ratios) - 0.6 and bottom == 0.0 and top >= 1.0
    assert [(t.get_text(), t.get_position()) for t in ax.texts] == [(" n/a", (k, 0.0)) for k, v in enumerate(ratios)
                                                                     if v is None]


@pytest.mark.parametrize(("devices", "every"), [(8, None), (32, 1), (128, 3)])
def test_a_timeline_of_more_devices_than_its_tallest_figure_holds_labels_every_kth(tmp_path, monkeypatch, devices,
                                                                                   every):
    """A row of 0.6 inches each for 4,096 devices' ops and sends made a PNG of 1,440 x 589,944 pixels (3.4 GB to
    draw, 352 s). The figure is at most TIMELINE_MAX_INCHES tall (here 10: 1,080 pixels of rows); where a row is
    shorter than its label's line (20 pixels), only every k-th device's ops' row is labelled, the labels a line
    apart, one out of memory in red. A figure within the height keeps a label on each row."""
    from matplotlib.colors import to_hex

    import gnplace.viz as viz

    monkeypatch.setattr(viz, "TIMELINE_MAX_INCHES", 10.0)
    figures = _laid_out(monkeypatch)
    g, result = _named_cluster_step([f"gpu{k}" for k in range(devices)], oom=[0])
    plot_timeline(g, result, tmp_path / "t.png")
    fig, ax = figures[0], figures[0].axes[0]
    assert fig.get_figheight() == 10.0
    ticks, labels = ax.get_yticks().tolist(), ax.get_yticklabels()
    assert labels[0].get_text() == "gpu0 (out of memory)" and to_hex(labels[0].get_color()) == viz._OOM_COLOUR.lower()
    if every is None:
        assert ticks == [*range(0, 2 * devices, 2), *range(1, 2 * devices, 2)]
        return
    assert ticks == list(range(0, 2 * devices, 2 * every))
    assert [t.get_text() for t in labels[1:]] == [f"gpu{k}" for k in range(every, devices, every)]
    pitch = ax.transData.transform((0, 0))[1] - ax.transData.transform((0, 2 * every))[1]  # pixels
    assert pitch >= 1.2 * 10 * fig.dpi / 72 and (every == 1 or pitch * (every - 1) / every < 1.2 * 10 * fig.dpi / 72)


def test_only_a_step_of_more_than_raster_above_ops_and_transfers_draws_its_bars_as_an_image(case, monkeypatch):
    """``RASTER_ABOVE`` is the most ops and transfers drawn as vector bars: a step of exactly that many draws paths."""
    import gnplace.viz as viz

    g, result, _ = case
    count = g.num_ops + result.timeline.num_transfers
    for limit, raster in ((count, False), (count - 1, True)):
        monkeypatch.setattr(viz, "RASTER_ABOVE", limit)
        collections = viz._timeline_figure(g, result, None).axes[0].collections
        assert collections and {c.get_rasterized() for c in collections} == {raster}


def test_rows_exactly_as_tall_as_their_labels_are_each_labelled():
    """The tallest timeline (540 inches, 539 of rows) gives 1,617 devices rows of 539 * 120 / 3,234 = 20 pixels, a
    10-point label's line and a fifth (12 points at 120 dpi): every row labelled; a device more, every ops row; twice
    as many, every second device."""
    from types import SimpleNamespace

    import gnplace.viz as viz

    fig = SimpleNamespace(get_figheight=lambda: viz.TIMELINE_MAX_INCHES)
    assert viz._row_label_step(fig, 1617) is None
    assert viz._row_label_step(fig, 1618) == 1
    assert viz._row_label_step(fig, 3235) == 2


def test_an_image_suffix_in_capitals_is_written_in_its_format(tmp_path, case):
    """The suffix is matched whatever its case: ``T.PNG`` is a PNG, as matplotlib writes it."""
    g, result, _ = case
    assert plot_timeline(g, result, tmp_path / "T.PNG").read_bytes().startswith(PNG_MAGIC)


@pytest.mark.parametrize("suffix", [".ps", ".eps"])
def test_a_postscript_timeline_prints_no_note_of_matplotlib(tmp_path, case, caplog, suffix):
    """``--timeline t.ps`` printed matplotlib's bare "The PostScript backend does not support transparency" line on
    stderr, no ``gnplace: warning:`` one: the legend's frame is drawn opaque there, as meant."""
    import logging

    graph, result, _ = case
    with caplog.at_level(logging.WARNING):
        plot_timeline(graph, result, tmp_path / f"t{suffix}")
    assert (tmp_path / f"t{suffix}").read_bytes().startswith(b"%!PS")
    assert [r.getMessage() for r in caplog.records if r.name.startswith("matplotlib")] == []
