"""``scripts/reporting/plots.py``: section 2's bars and section 5's lines."""

from __future__ import annotations

import math
from pathlib import Path

import pytest


def test_report_figures_killed_while_written_stay_as_before(tmp_path, load_script, monkeypatch):
    """A kill while ``docs/figures/report_scale.png`` was written left it cut short; now the one of before stays."""
    import io

    import matplotlib.figure

    plots = load_script("reporting.plots")
    figure = tmp_path / "report_scale.png"
    figure.write_bytes(b"the figure of before")
    real_savefig = matplotlib.figure.Figure.savefig

    def savefig_halfway(fig, target, *args, **kwargs):  # half the image reaches its target, then the kill
        image = io.BytesIO()
        real_savefig(fig, image, *args, **{"format": "png", **kwargs})
        half = image.getvalue()[: len(image.getvalue()) // 2]
        target.write(half) if hasattr(target, "write") else Path(target).write_bytes(half)
        raise KeyboardInterrupt

    rows = [{"ops": ops, "placer": "m_etf", "seconds": ops / 1e4, "budget": None} for ops in (500, 2000)]
    with monkeypatch.context() as patched, pytest.raises(KeyboardInterrupt):
        patched.setattr(matplotlib.figure.Figure, "savefig", savefig_halfway)
        plots.plot_scale(rows, figure)
    assert [p.name for p in tmp_path.iterdir()] == ["report_scale.png"]
    assert figure.read_bytes() == b"the figure of before"
    plots.plot_scale(rows, figure)
    assert figure.read_bytes().startswith(b"\x89PNG")


def test_a_learned_bar_with_no_mean_is_written_n_a_within_the_axes(tmp_path, load_script, monkeypatch):
    """A placer whose every run of a family was out of memory (tight4) had a nan mean: no bar, and nothing said so;
    alone, the axes ran 0.95 to 1.05 about the line at 1. It is written ``n/a`` at its foot, the axes from 0."""
    plots = load_script("reporting.plots")
    drawn = []
    monkeypatch.setattr(plots, "save_figure", lambda fig, path: drawn.append(fig))
    plots.plot_learned_bars([dict(family="f", placer="ppo", vs_auto=1.1, oom=True)], tmp_path / "b.png", ["ppo"])
    rows = [dict(family=family, placer=placer, vs_auto=0.9, oom=placer == "policy" or (family, placer) == ("ptb", "ppo"))
            for family in ("nmt", "ptb") for placer in ("policy", "ppo")]
    plots.plot_learned_bars(rows, tmp_path / "b.png", ["policy", "ppo"])
    alone, both = (fig.axes[0] for fig in drawn)
    assert [(t.get_text(), t.get_position()) for t in alone.texts] == [(" n/a", (0.0, 0.0))]
    assert alone.get_ylim()[0] == 0.0 and alone.get_xlim()[0] < -0.4 and alone.get_xlim()[1] > 0.4
    # nmt's bars at k, ptb's at k + 0.4: policy's both, ptb's ppo
    assert [(t.get_text(), t.get_position()) for t in both.texts] == [(" n/a", (0.0, 0.0)), (" n/a", (0.4, 0.0)),
                                                                     (" n/a", (1.4, 0.0))]
    assert both.get_xlim()[0] < -0.2 and both.get_xlim()[1] > 1.6


def test_the_learned_bars_legend_covers_no_bar(tmp_path, load_script, monkeypatch):
    """With every family's bars about as tall, matplotlib's best place inside the axes still covered the first three
    (its lower left, over policy's bars). The legend moves beside the axes, clear of every bar and in the image; a
    legend with a free spot inside stays there."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    plots = load_script("reporting.plots")
    drawn = []
    monkeypatch.setattr(plots, "save_figure", lambda fig, path: drawn.append(fig))
    placers = ["policy", "finetune", "ppo", "rnn_pg", "hierarchical", "spotlight", "post", "placeto", "placeto_zs"]
    rows = [dict(family=family, placer=placer, vs_auto=1.2, oom=False)
            for family in ("cifar10", "nmt", "ptb") for placer in placers]
    plots.plot_learned_bars(rows, tmp_path / "b.png", placers)
    free = [dict(row, vs_auto=0.5 if row["placer"] == "policy" else 1.2) for row in rows]
    plots.plot_learned_bars(free, tmp_path / "b.png", placers)
    for fig in drawn:
        (ax,) = fig.axes
        renderer = FigureCanvasAgg(fig).get_renderer()
        box = ax.get_legend().get_window_extent(renderer)
        assert len(ax.patches) == 27
        assert not any(bar.get_window_extent(renderer).overlaps(box) for bar in ax.patches)
        assert fig.bbox.x0 <= box.x0 and box.x1 <= fig.bbox.x1
    full, free_spot = (fig.axes[0].get_legend().get_window_extent(FigureCanvasAgg(fig).get_renderer())
                       for fig in drawn)
    assert full.x0 > drawn[0].axes[0].get_window_extent().x1 and free_spot.x1 < drawn[1].axes[0].get_window_extent().x1


def test_the_bars_and_the_scale_say_so_where_they_have_nothing_to_draw(tmp_path, load_script, monkeypatch):
    """No row drew empty axes: the bars' with a legend of none, the scale's with an empty legend (and a warning)."""
    import warnings

    plots = load_script("reporting.plots")
    drawn = []
    monkeypatch.setattr(plots, "save_figure", lambda fig, path: drawn.append(fig))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "No artists with labels found to put in legend"
        plots.plot_learned_bars([], tmp_path / "b.png", [])
        plots.plot_scale([], tmp_path / "s.png")
    texts = [[t.get_text() for t in fig.axes[0].texts] for fig in drawn]
    assert texts == [["no learned placer's run to draw"], ["no placement timed to draw"]]
    assert all(fig.axes[0].get_legend() is None for fig in drawn)


def test_the_scale_draws_the_points_log_axes_can_and_says_what_it_leaves_out(tmp_path, load_script, monkeypatch):
    """A saved section 5 row edited by hand: a nan broke its placer's line, a 0 ran it off the axes' foot, and a
    placer with no drawable point was a legend entry alone; with none at all, the log axes raised ValueError."""
    from matplotlib.colors import to_hex

    plots = load_script("reporting.plots")
    drawn = []
    monkeypatch.setattr(plots, "save_figure", lambda fig, path: drawn.append(fig))
    plots.plot_scale([dict(placer="policy", ops=100, seconds=math.nan, budget=None)], tmp_path / "s.png")
    assert [t.get_text() for t in drawn[0].axes[0].texts] == [
        "no placement timed to draw\npolicy: no points (1 not finite)"]
    rows = [dict(placer=placer, ops=ops, seconds=seconds, budget=None)
            for placer, points in (("auto", ((100, 0.01), (1000, math.nan), (10000, 1.0))),
                                   ("m_etf", ((100, 0.0), (1000, 0.02), (10000, 0.2))),
                                   ("policy", ((100, math.nan), (1000, None))), ("rnn_pg", ((100, 0.1), (1000, 1.0))))
            for ops, seconds in points]
    plots.plot_scale(rows, tmp_path / "s.png")
    (ax,) = drawn[-1].axes
    assert ax.get_title().splitlines() == ["auto: 1 of 3 points left out (1 not finite)",
                                           "m_etf: 1 of 3 points left out (1 <= 0)",
                                           "policy: no points (1 not a number, 1 not finite)"]
    lines = {line.get_label(): (line.get_xydata().tolist(), to_hex(line.get_color())) for line in ax.get_lines()}
    assert lines == {"auto": ([[100, 0.01], [10000, 1.0]], "#1f77b4"),  # C0, C1, C3: each its colour of before
                     "m_etf": ([[1000, 0.02], [10000, 0.2]], "#ff7f0e"), "rnn_pg": ([[100, 0.1], [1000, 1.0]], "#d62728")}


def test_each_report_figure_is_laid_out_at_the_resolution_it_is_written_at(tmp_path, load_script, figure_dpis):
    """The report's figures were laid out at pyplot's 100 dpi and written at 110 (save_figure's): their margins were
    measured on text of other widths. Each is made at FIGURE_DPI, laid out and written at 110."""
    plots = load_script("reporting.plots")
    curves = load_script("reporting.curves")
    laid_out, written = figure_dpis
    rows = [dict(family=family, cluster="k80x4", name=f"{family}_002", placer=placer, history=[[1, 1.2], [64, 1.1]],
                 vs_auto=1.1, oom=False)
            for family in ("nmt", "ptb") for placer in ("rnn_pg", "spotlight")]
    curves.plot_curves(rows, tmp_path / "curves.png", "k80x4")
    plots.plot_learned_bars(rows, tmp_path / "learned.png", ["rnn_pg", "spotlight"])
    plots.plot_scale([dict(placer="auto", ops=ops, seconds=ops / 1e4) for ops in (100, 1000)], tmp_path / "s.png")
    assert laid_out == written == [110, 110, 110]
