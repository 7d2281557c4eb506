"""Plots: the timeline (Gantt chart) of a simulated step."""

from __future__ import annotations

import io
import os
import re
import sys
from pathlib import Path
from typing import Any

import numpy as np

from gnplace.graph import PHASES, OpGraph
from gnplace.plot_text import (
    DPI,
    dollars,
    drawable,
    fitted,
    fitted_labels,
    fonts_for,
    longest_line,
    plain,
    row_names,
    text_width,
)
from gnplace.sim.simulator import StepResult
from gnplace.sim.timer import geomean
from gnplace.units import format_seconds, seconds_unit

__all__ = ["agg_pyplot", "plot_timeline", "plot_ratios", "mark_missing", "fit_title", "title_room", "IMAGE_SUFFIXES",
           "RASTER_ABOVE"]

IMAGE_SUFFIXES = (".png", ".pdf", ".svg", ".jpg", ".jpeg", ".eps", ".ps", ".tif", ".tiff", ".webp")
"""The file types the plots write (matplotlib's formats, by suffix)."""


def _matplotlib() -> Any:
    """``matplotlib``, imported with ``MPLBACKEND`` set aside, which it reads as it loads.

    ``import matplotlib`` refuses a backend name it does not know (``MPLBACKEND=foo``): a ValueError traceback
    instead of the plot. The variable is put back for the user's own use after.
    """
    if "matplotlib" not in sys.modules:
        told = os.environ.pop("MPLBACKEND", None)
        try:
            import matplotlib
        finally:
            if told is not None:
                os.environ["MPLBACKEND"] = told
    import matplotlib

    return matplotlib


def agg_pyplot() -> Any:
    """The ``pyplot`` of matplotlib on the Agg backend (drawing to files, no display), whatever ``MPLBACKEND`` says.

    For the scripts, which own their process: it switches pyplot's backend for the rest of the process. The
    library's plots (:func:`plot_timeline`, :func:`plot_ratios`) use no pyplot and leave the backend alone.
    """
    _matplotlib().use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _figure(figsize: tuple[float, float], dpi: float | None = None) -> Any:
    """A matplotlib ``Figure`` of ``figsize`` inches that pyplot does not know of, to be written to a file.

    pyplot's figures switched the caller's backend to Agg (``matplotlib.use``) for the rest of the process: a
    notebook's inline plots, or a script's window, stopped showing after ``gnplace.viz.plot_timeline``, or
    ``gnplace simulate --timeline`` run in-process. This one is drawn by the canvas of the format written.
    """
    _matplotlib()
    from matplotlib.figure import Figure

    return Figure(figsize=figsize, dpi=dpi)


RASTER_ABOVE = 20_000
"""The most ops and transfers a timeline draws as vector bars; past it, the bars are one image in a vector file."""

#: Forward blue, backward orange, update wine and transfer grey: distinct to each kind of colour blindness (CIELAB
#: distance of at least 23 between any two as Machado et al.'s matrices see them). The update's green was 7.3 from
#: the backward's orange to a protanope, the one tint.
_PHASE_COLOURS = {"forward": "#4C72B0", "backward": "#DD8452", "update": "#882255"}
_TRANSFER_COLOUR = "#8C8C8C"
_OOM_COLOUR = "#C44E52"


def plot_timeline(
    graph: OpGraph, result: StepResult, path: str | os.PathLike[str], *, title: str | None = None
) -> Path:
    """Draw a Gantt chart of ``result.timeline`` and write it to ``path`` (PNG, PDF, SVG).

    One row per device for ops (coloured by phase) and one row per sending device for transfers; times in the
    unit of :func:`~gnplace.units.format_seconds` for the step time (ns, us, ms or s: a 15 us step's axis read
    0.000-0.014 ms, a 6-hour step's 0-2.0 ms with "1e7" in a corner), with no offset or exponent. A device sends
    over a link to each other device at once (the default mode's links, one per ordered pair): a device whose
    transfers overlap in time has its row split in lanes, as many as it ran at once (:func:`_lanes`); they were
    drawn over each other, two transfers as one bar. The step's end is a dashed line, its time in the legend, which
    is drawn beside the axes. A device out of memory (``result.oom``) is labelled so, in red: nothing said it.
    A device's name longer than :data:`~gnplace.plot_text.ROW_NAME_CHARS`, or whose label is drawn wider than
    :data:`~gnplace.plot_text.ROW_LABEL_POINTS`, is shortened in its rows' labels
    (:func:`~gnplace.plot_text.row_names`). The figure is at most :data:`TIMELINE_MAX_INCHES` tall: past 449
    devices the rows are thinner, and where a row is shorter than its label, every k-th device's ops' row is
    labelled (:func:`_row_label_step`).
    An op or transfer of no duration is a mark :data:`MARK_POINTS` wide from its time on (:func:`_marks`). The time
    axis has fewer ticks where its labels would be nearer than :data:`TICK_GAP_POINTS` (:func:`_space_ticks`); a
    step of 0 s has one, ``0``, in the middle of the axis (:func:`_instant_axis`).
    ``title`` (default: the graph's name and step time) is drawn as it is, names in it included (no matplotlib
    maths); one wider than the figure keeps its start and end with ``…`` between, the most characters that fit
    (a graph named with 200 characters put the title's start 687 pixels left of the figure's edge).

    A step of more than :data:`RASTER_ABOVE` ops and transfers has its bars drawn as one image at the file's
    resolution (120 dpi) inside a vector file (SVG, PDF, PostScript), as a PNG draws them: one lane per device
    and the same colours; the axes, labels and legend stay vectors. Each bar was a vector path: 77.5 MB of SVG
    and 36 s for a 280,158-op step (44 KB and 17 s then), most bars a fraction of a pixel wide. A smaller step
    draws a path per bar, as before. Past it, each row's bars of a colour are one path (:func:`_bars`), drawn
    once: the same files, 9.8 s -> 2.3 s for a 280,158-op step's PNG, 11.6 s -> 2.7 s for its SVG, 16.2 s -> 2.9 s
    for its PDF (best of two on a loaded 2-core VM).

    Raises:
        ValueError: if ``result`` was simulated without ``timeline=True``, or is another graph's step (another
            number of ops: :class:`~gnplace.exceptions.InvalidArgument`), or ``path`` has no suffix of
            :data:`IMAGE_SUFFIXES` (matplotlib would write ``path.png`` for none).
    """
    path = _image_path(path)
    timeline = result.timeline
    if timeline is None:
        raise ValueError("the step result has no timeline: simulate with timeline=True")
    if timeline.op_start.shape != (graph.num_ops,):  # another graph's step: a numpy IndexError (boolean index)
        from gnplace.exceptions import InvalidArgument

        raise InvalidArgument(f"the step result times {timeline.op_start.shape[0]} ops, graph {graph.name!r} has "
                              f"{graph.num_ops}: draw the result of this graph's step")
    # a name's characters the default font lacks drawn in an installed font that has them (or escaped): inside the
    # context, the figure's text and the ticks drawn as it is written take the fonts it names
    _matplotlib()  # imported with MPLBACKEND set aside before fonts_for looks the fonts up
    with fonts_for([*result.device_names, title if title else graph.name]):
        return _save(_timeline_figure(graph, result, title), path)


def _timeline_figure(graph: OpGraph, result: StepResult, title: str | None) -> Any:
    """:func:`plot_timeline`'s figure of ``result`` (a step of ``graph`` with a timeline), laid out, not written."""
    _matplotlib()
    from matplotlib.patches import Patch

    timeline = result.timeline
    assert timeline is not None  # plot_timeline checked it
    names = result.device_names
    d = len(names)
    # laid out at the resolution written: text measured at 100 dpi is narrower than drawn at 120 (hinting), and a
    # long row label laid out to fit ran off the left edge
    fig = _figure((12, min(1.0 + 0.6 * 2 * d, TIMELINE_MAX_INCHES)), dpi=DPI)
    ax = fig.subplots()
    # one collection per row and colour (``broken_barh``): a Rectangle per op (``barh``) took 5 s for 800 ops
    raster = graph.num_ops + timeline.num_transfers > RASTER_ABOVE
    unit, scale = _time_unit(result.step_time)
    for phase_index, phase in enumerate(PHASES):
        mask = graph.phase == phase_index
        _bars(ax, 2 * timeline.op_device[mask], timeline.op_start[mask], timeline.op_end[mask], 0.8,
              _PHASE_COLOURS[phase], raster, scale)
    if timeline.num_transfers:
        lane, lanes = _lanes(timeline.xfer_src, timeline.xfer_start, timeline.xfer_end, d)
        pitch = 0.6 / lanes[timeline.xfer_src]  # a sender's row of 0.6 split into its lanes, top to bottom
        height = np.where(lanes[timeline.xfer_src] > 1, 0.8 * pitch, pitch)  # a gap between lanes: bars apart
        _bars(ax, 2 * timeline.xfer_src + 1 - 0.3 + (lane + 0.5) * pitch, timeline.xfer_start, timeline.xfer_end,
              height, _TRANSFER_COLOUR, raster, scale)
    ax.set_xlim(left=0.0)  # the step starts at 0 (``barh`` held its bars' left edges; a collection has no such edge)
    if not result.step_time > 0:
        _instant_axis(ax)
    oom = np.asarray(result.oom, dtype=bool)  # a device past its memory: its row says so, in red
    ends = [" (out of memory)" if out else " send" for out in oom.tolist()]  # the wider of each device's two labels
    every = _row_label_step(fig, d)
    if every is None:
        ax.set_yticks([2 * k for k in range(d)] + [2 * k + 1 for k in range(d)])
        rows = [dollars(n) for n in row_names([drawable(n) for n in names], ends)]
        labels = ax.set_yticklabels([n + (" (out of memory)" if oom[k] else "") for k, n in enumerate(rows)]
                                    + [f"{n} send" for n in rows])
        for k in np.flatnonzero(oom).tolist():
            labels[k].set_color(_OOM_COLOUR)
    else:  # rows too thin for a label each: every k-th device's ops' row labelled
        shown = list(range(0, d, every))
        ax.set_yticks([2 * k for k in shown])
        rows = [dollars(n) for n in row_names([drawable(names[k]) for k in shown], [ends[k] for k in shown])]
        labels = ax.set_yticklabels([n + (" (out of memory)" if oom[k] else "") for k, n in zip(shown, rows)])
        for label, k in zip(labels, shown):
            if oom[k]:
                label.set_color(_OOM_COLOUR)
    ax.set_ylim(2 * d - 0.5, -0.5)  # every row, row 0 on top: the data's limits put an unused end row on the edge
    ax.set_xlabel(f"time ({unit})")
    ax.ticklabel_format(axis="x", style="plain", useOffset=False)  # 20000 s, not 2 and "1e4" in a corner
    heading = drawable(title) if title else f"{drawable(graph.name)}: step {format_seconds(result.step_time)}"
    ax.set_title(dollars(heading))
    # the step's end, marked: a title given (simulate's, evaluate's) said nothing of it
    step = ax.axvline(result.step_time * scale, color="black", linestyle="--", linewidth=1.0,
                      label=f"step {format_seconds(result.step_time)}")
    handles = [Patch(color=c, label=p) for p, c in _PHASE_COLOURS.items()]
    handles += [Patch(color=_TRANSFER_COLOUR, label="transfer"), step]
    # beside the axes: inside (lower right) it covered the last bars of the step, where the step ends
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.005, 1.0), fontsize="small")
    fig.tight_layout()
    _space_ticks(fig, ax)
    fit_title(ax, heading, room=title_room(fig, ax, whole_figure=True))
    # laid out once: no layout engine left, so writing draws the figure once. tight_layout leaves a placeholder
    # engine, for which savefig first draws with drawing turned off, but an SVG's or PDF's raster of the bars was
    # drawn in full (1.1 of 2.4 s at 280,158 ops). The rc settings would put an engine back in the placeholder's stead.
    with _matplotlib().rc_context({"figure.autolayout": False, "figure.constrained_layout.use": False}):
        fig.set_layout_engine(None)
    return fig


TIMELINE_MAX_INCHES = 540.0
"""The tallest a timeline is drawn (inches): 64,800 pixels at 120 dpi. A row of 0.6 inches each for 4,096 devices'
ops and sends was 4,916 inches, a PNG of 1,440 x 589,944 pixels (3.4 GB to draw, 352 s)."""


def _row_label_step(fig: Any, num_devices: int) -> int | None:
    """None where each of a timeline's rows in ``fig`` is as tall as its label, else k: every k-th device labelled.

    The rows of :data:`TIMELINE_MAX_INCHES` for more than 449 devices are thinner than 0.6 inches; where a row is
    shorter than its label's line (the y ticks' font size and a fifth), only every k-th device's ops' row is
    labelled, k the fewest that leaves those labels a line apart.
    """
    import matplotlib

    line = matplotlib.font_manager.FontProperties(size=matplotlib.rcParams["ytick.labelsize"]).get_size_in_points()
    need = 1.2 * line * DPI / 72  # pixels
    row = (fig.get_figheight() - 1.0) * DPI / (2 * num_devices)  # the figure's height less its title's and axis'
    return None if row >= need else int(np.ceil(need / (2 * row)))


def _instant_axis(ax: Any) -> None:
    """The time axis of a step of 0 s on ``ax``: one tick, ``0``, in the middle of the axes.

    Every op and transfer starts and ends at 0. matplotlib widened the empty range to 0-0.055 s, ticks every
    0.01 s as if the step took 50 ms, with the ops' marks and the step's end on the left spine, hidden by it.
    """
    ax.set_xlim(-1.0, 1.0)
    ax.set_xticks([0.0])


TICK_GAP_POINTS = 5.0
"""The least room between two of a timeline's time-axis labels (points: half their 10-point font)."""


def _space_ticks(fig: Any, ax: Any) -> None:
    """Fewer time-axis ticks on laid-out ``ax`` where two labels would be nearer than :data:`TICK_GAP_POINTS`.

    matplotlib chooses the ticks by the axes' width and the labels' height, not their width: beside rows' labels of
    1,000 pixels, a step of 1e9 s drew 500000000 over 1000000000 (8 pixels). The axis keeps matplotlib's steps
    (1, 2, 2.5, 5, 10 times a power of ten) with at most as many intervals as leave the labels apart, and the
    figure is laid out again; an axis whose labels are apart is left as it is: the same figure.
    """
    from matplotlib.ticker import MaxNLocator

    bins = None
    while _crowded(fig, ax) and bins != 1:
        bins = len(_ticks_in_view(ax)) - 1 if bins is None else bins - 1
        ax.xaxis.set_major_locator(MaxNLocator(nbins=max(bins, 1), steps=[1, 2, 2.5, 5, 10]))
        fig.tight_layout()


def _ticks_in_view(ax: Any) -> list[float]:
    """The time axis' ticks of ``ax`` within its limits (the ones drawn)."""
    lo, hi = sorted(ax.get_xlim())
    return [float(x) for x in ax.xaxis.get_major_locator()() if lo <= x <= hi]


def _crowded(fig: Any, ax: Any) -> bool:
    """Whether two neighbouring tick labels of laid-out ``ax``'s time axis are nearer than :data:`TICK_GAP_POINTS`."""
    ticks = _ticks_in_view(ax)
    if len(ticks) < 2:
        return False
    texts = ax.xaxis.get_major_formatter().format_ticks(ticks)
    prop = ax.xaxis.get_major_ticks()[0].label1.get_fontproperties()
    lo, hi = ax.get_xlim()
    per_unit = ax.get_position().width * fig.get_figwidth() * DPI / (hi - lo)  # pixels at DPI
    widths = [text_width(t, prop) for t in texts]
    gaps = [(b - a) * per_unit - (wa + wb) / 2 for a, b, wa, wb in zip(ticks, ticks[1:], widths, widths[1:])]
    return min(gaps) < TICK_GAP_POINTS * DPI / 72


def _lanes(
    sender: np.ndarray, start_s: np.ndarray, end_s: np.ndarray, num_devices: int
) -> tuple[np.ndarray, np.ndarray]:
    """``(lane, lanes)``: each transfer's lane in its sender's row, and each sender's number of lanes (at least 1).

    A transfer takes the lowest lane free at its start (what ran there ended at or before it), in order of start:
    as many lanes as the sender ran transfers at once. A sender that sends one at a time (Placeto's channel, a
    cluster of two devices) has one lane, found without a Python loop over its transfers. A lane per receiving
    device instead made 16 devices' rows 15 lanes of 2 pixels, their transfers specks.

    Examples:
        >>> lane, lanes = _lanes(np.array([1, 1, 1, 1, 0]), np.array([0.0, 0.0, 1.0, 2.0, 0.0]),
        ...                      np.array([2.0, 1.0, 3.0, 3.0, 1.0]), 3)
        >>> lane.tolist(), lanes.tolist()
        ([0, 1, 1, 0, 0], [1, 2, 1])
    """
    import heapq

    lane = np.zeros(sender.shape[0], dtype=np.int64)
    lanes = np.ones(num_devices, dtype=np.int64)
    order = np.lexsort((start_s, sender))  # by sender, then start (ties by index)
    s, t0, t1 = sender[order], start_s[order], end_s[order]
    bounds = np.flatnonzero(np.r_[True, s[1:] != s[:-1], True]) if s.shape[0] else np.zeros(1, dtype=np.int64)
    for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist()):  # each sender's transfers, by start
        if not (t0[a + 1:b] < np.maximum.accumulate(t1[a:b - 1])).any():
            continue  # one at a time: one lane
        busy: list[tuple[float, int]] = []  # (end, lane) of the lanes in use
        free: list[int] = []
        for i, (begin, end) in enumerate(zip(t0[a:b].tolist(), t1[a:b].tolist()), start=a):
            while busy and busy[0][0] <= begin:
                heapq.heappush(free, heapq.heappop(busy)[1])
            j = heapq.heappop(free) if free else len(busy)
            heapq.heappush(busy, (end, j))
            lane[order[i]] = j
        lanes[s[a]] = lane[order[a:b]].max() + 1
    return lane, lanes


def _bars(
    ax: Any, rows: np.ndarray, start_s: np.ndarray, end_s: np.ndarray, height: float | np.ndarray, colour: str,
    raster: bool, scale: float = 1e3,
) -> None:
    """One bar per interval ``[start_s, end_s)`` (seconds, drawn as ``scale`` a second: ms) on its row, one colour.

    ``rows``: each bar's centre (a row or a lane of one); ``height``: the bars' height, or each bar's (the bars of
    a row share one).

    ``raster``: the bars are drawn as an image in a vector file (matplotlib's ``rasterized``), else as paths.

    A row's bars are one collection whose corners are ``broken_barh``'s, computed by numpy (its Python loop over
    the bars, and a ``Path`` made for each, took 7 of 13 s for a 93,567-op step). A raster row's bars are one
    path, a rectangle per run of bars that touch or overlap (their union), snapped to whole pixels as each bar
    alone was (Agg snaps a path of only horizontal and vertical lines up to 1,024 vertices; ``snap`` asks it of
    the long one): the same pixels and files, Agg's sweep of each row's path done once, and 249,929 rectangles
    to sweep for 398,694 bars of a 261,510-op step.
    """
    _matplotlib()
    from matplotlib.collections import PathCollection, PolyCollection
    from matplotlib.path import Path as Shape

    for row in np.unique(rows):
        on_row = rows == row
        x0 = start_s[on_row] * scale
        x1 = x0 + (end_s[on_row] * scale - x0)  # broken_barh's right edge, start plus width, to the last bit
        instants = np.unique(x0[end_s[on_row] <= start_s[on_row]])  # no width: no pixel of its own, a mark instead
        if raster:  # bars that touch or overlap as their union, one rectangle: the same area, so the same pixels
            order = np.argsort(x0, kind="stable")
            x0, x1 = x0[order], x1[order]
            first = np.flatnonzero(np.concatenate(([True], x0[1:] > np.maximum.accumulate(x1)[:-1])))
            x0, x1 = x0[first], np.maximum.reduceat(x1, first)
        h = height if np.ndim(height) == 0 else float(np.asarray(height)[on_row][0])
        y0 = row - h / 2
        y1 = y0 + h
        corners = np.empty((x0.shape[0], 5 if raster else 4, 2))
        corners[:, 0, 0] = corners[:, 1, 0] = x0
        corners[:, 2, 0] = corners[:, 3, 0] = x1
        corners[:, 0, 1] = corners[:, 3, 1] = y0
        corners[:, 1, 1] = corners[:, 2, 1] = y1
        if raster:
            corners[:, 4] = corners[:, 0]
            codes = np.tile(np.array([Shape.MOVETO] + [Shape.LINETO] * 3 + [Shape.CLOSEPOLY], dtype=Shape.code_type),
                            x0.shape[0])
            bars: Any = PathCollection([Shape(corners.reshape(-1, 2), codes)], facecolors=colour, linewidth=0)
            bars.set_snap(True)
            bars.set_rasterized(True)
        else:
            bars = PolyCollection(corners, facecolors=colour, linewidth=0)  # type: ignore[arg-type]  # (N, 4, 2): its fast path
        ax.add_collection(bars)
        if instants.shape[0]:
            _marks(ax, instants, row - h / 2, row + h / 2, colour, raster)


MARK_POINTS = 1.2
"""The width of a timeline's mark of an op or transfer of no duration (points: 2 pixels at 120 dpi)."""


def _marks(ax: Any, x: np.ndarray, y0: float, y1: float, colour: str, raster: bool) -> None:
    """A mark :data:`MARK_POINTS` wide from each of the times ``x`` (the axis' unit) on, from ``y0`` to ``y1``.

    An op of no duration (0 s: a reshape, a gradient of 0 FLOP on a device without launch overhead) was a bar of
    no width, not drawn: nothing showed the op ran, or where. Its mark is a vertical line shifted right by half
    its width, so that it starts at the op's time, as its bar would; it leaves the axes' limits alone (not in
    the data's limits: the same time axis).
    """
    from matplotlib.collections import LineCollection
    from matplotlib.transforms import ScaledTranslation

    segments = np.empty((x.shape[0], 2, 2))
    segments[:, :, 0] = x[:, None]
    segments[:, 0, 1], segments[:, 1, 1] = y0, y1
    half = ScaledTranslation(MARK_POINTS / 2 / 72, 0.0, ax.figure.dpi_scale_trans)  # points -> inches
    marks = LineCollection(list(segments), colors=colour, linewidths=MARK_POINTS, capstyle="butt",
                           transform=ax.transData + half)
    marks.set_rasterized(raster)
    ax.add_collection(marks, autolim=False)


def _time_unit(step_s: float) -> tuple[str, float]:
    """The unit of a timeline's axis, and its count a second: :func:`~gnplace.units.format_seconds`'s for the step.

    Examples:
        >>> _time_unit(0.0175), _time_unit(15e-6), _time_unit(21_428.0), _time_unit(5e-10), _time_unit(0.0)
        (('ms', 1000.0), ('us', 1000000.0), ('s', 1.0), ('ns', 1000000000.0), ('s', 1.0))
    """
    unit = seconds_unit(step_s)
    return unit, {"s": 1.0, "ms": 1e3, "us": 1e6, "ns": 1e9}[unit]


RATIO_LABEL_POINTS = 160.0
"""The widest a bar's label is drawn in the ratio plot (points): at its 60 degrees, under half the figure's height."""


def plot_ratios(summary: list[dict], path: str | os.PathLike[str]) -> Path:
    """Bar chart of each placer's geometric-mean step time over the best non-learned placer, per cluster.

    ``summary`` holds one row per family, cluster, placer, budget and options
    (:func:`gnplace.evaluate_summary.summarise`; a placer given two budgets or option sets has a bar each, named by
    its ``label``, ``annealing@200`` or ``ppo[mode=refine]@2000``, in budget order, then by label), whose
    ``vs_best`` is a geometric mean over its ``vs_best_graphs`` graphs (``graphs`` where not given); a bar is
    the mean over every graph of the cluster with a ratio, each family weighted by its graphs counted in
    ``vs_best`` (an out-of-memory or failed placement has none).

    A bar's label drawn wider than :data:`RATIO_LABEL_POINTS` keeps its start and end with ``…`` between, the most
    characters that fit; where two shorten alike, each is shown with its bar's index first (``#3 …``). A cluster's
    title wider than its axes is shortened so too. A label of 58 characters (``ppo[...]@2000`` given several
    options) was too tall for the figure: matplotlib warned "Tight layout not applied" and the labels ran off it.
    The y-axis label is broken onto lines where it would run off the figure (:func:`_fit_ylabel`). Bars nearer
    than :data:`RATIO_BAR_POINTS` (their labels drawn over each other) widen the figure (:func:`_space_bars`). A
    bar with no ratio (its every run out of memory or failed) is written ``n/a`` (:func:`mark_missing`).

    Raises:
        ValueError: if ``summary`` is empty, or ``path`` has no suffix of :data:`IMAGE_SUFFIXES`.
    """
    path = _image_path(path)
    if not summary:
        raise ValueError("no rows to plot")

    _matplotlib()  # imported with MPLBACKEND set aside before fonts_for looks the fonts up
    with fonts_for([*(str(s["cluster"]) for s in summary), *(_bar(s)[2] for s in summary)]):
        return _save(_ratios_figure(summary), path)


def _ratios_figure(summary: list[dict]) -> Any:
    """:func:`plot_ratios`' figure of ``summary`` (not empty), laid out, not written."""
    clusters = sorted({s["cluster"] for s in summary})
    bars = sorted({_bar(s) for s in summary})  # (placer, budget: -1 for none, label): a placer's budgets in order
    names = {_bar(s): _bar(s)[2] for s in summary}
    fig = _figure((4 + 2.5 * len(clusters), 4), dpi=DPI)  # laid out at the resolution written, as the timeline
    from matplotlib.font_manager import FontProperties

    labels = [dollars(t) for t in fitted_labels([drawable(names[bar]) for bar in bars],
                                                  RATIO_LABEL_POINTS * DPI / 72, FontProperties(size="small"))]
    axes = fig.subplots(1, len(clusters), squeeze=False, sharey=True)
    for ax, cluster in zip(axes[0], clusters):
        values = []
        for bar in bars:
            rows = [s for s in summary if s["cluster"] == cluster and _bar(s) == bar]
            weights = (s.get("vs_best_graphs", s.get("graphs", 1)) for s in rows)
            values.append(geomean((s["vs_best"] for s in rows), weights=weights))
        ax.bar(range(len(bars)), values, color="#4C72B0")
        mark_missing(ax, values)
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.set_xticks(range(len(bars)))
        ax.set_xticklabels(labels, rotation=60, ha="right", fontsize="small")
        ax.set_title(plain(cluster))
    axes[0][0].set_ylabel(RATIO_YLABELS[0])
    fig.tight_layout()
    _space_bars(fig, axes[0], labels)
    _fit_ylabel(fig, axes[0][0], RATIO_YLABELS)
    for ax, cluster in zip(axes[0], clusters):
        fit_title(ax, drawable(cluster), room=title_room(fig, ax, whole_figure=False))
    return fig


def mark_missing(ax: Any, values: list[float], positions: list[float] | None = None, width: float = 0.8) -> None:
    """Write ``n/a`` at the foot of each bar of ``ax`` with no ratio (``nan``: every run out of memory or failed).

    Such a bar was no bar and nothing said so; at either end, it was out of the axes' limits, its label on the
    axes' corner, and with no ratio at all the y axis ran 0.95 to 1.05. The axes' limits hold every bar's place from
    0 up. Axes whose bars all have a ratio are left as they are: the same figure.

    Args:
        ax (matplotlib.axes.Axes): the axes the bars are drawn on.
        values (list[float]): each bar's height, ``nan`` where it has none.
        positions (list[float], optional): each bar's centre on the x axis, in ascending order
            (default: :obj:`None`, bar ``k`` at ``k``).
        width (float, optional): each bar's width, in x-axis units (default: :obj:`0.8`, ``bar``'s).
    """
    xs = list(range(len(values))) if positions is None else positions
    missing = [k for k, v in enumerate(values) if not np.isfinite(v)]
    if not missing:
        return
    ax.update_datalim([(xs[0] - width / 2, 0.0), (xs[-1] + width / 2, 0.0)])  # each bar's edges, from 0
    for k in missing:
        ax.text(xs[k], 0.0, " n/a", rotation=90, ha="center", va="bottom", fontsize="small", color="#555555")


RATIO_BAR_POINTS = 9.0
"""The least room from one bar of the ratio plot to the next (points): their labels, at 60 degrees, 7.8 points apart
across their lines, the most that 40 bars on one cluster have (9.3 points)."""

RATIO_MAX_INCHES = 540.0
"""The widest the ratio plot is drawn (inches): 64,800 pixels at 120 dpi, under Agg's 65,536."""


def _space_bars(fig: Any, axes: Any, labels: list[str]) -> None:
    """Widen laid-out ``fig`` until the bars of each of ``axes`` are :data:`RATIO_BAR_POINTS` apart.

    The figure's width was set by the clusters alone: 48 bars on one, or 30 on each of three, had their labels
    drawn over each other, 120 a black band. The axes keep a bar's room either side of the bars, and the figure is
    widened by what the bars lack (laid out again, at most three times: the margins move a little), up to
    :data:`RATIO_MAX_INCHES`; where even that is too narrow, every k-th bar is labelled, k the fewest that leaves
    the labels apart. A figure whose bars are apart is left as it is: the same figure.
    """
    need = RATIO_BAR_POINTS * DPI / 72  # pixels from one bar to the next
    if _bar_pitch(fig, axes[0]) >= need:
        return
    for ax in axes:  # a bar's room either side: matplotlib's 5% of 300 bars was 15 bars' room, blank
        ax.set_xlim(-1.0, len(labels))
    for _ in range(3):
        lack = need - _bar_pitch(fig, axes[0])
        if lack <= 1e-6 or fig.get_figwidth() >= RATIO_MAX_INCHES:
            break
        span = np.diff(axes[0].get_xlim())[0]
        wider = fig.get_figwidth() + len(axes) * lack * span / DPI
        fig.set_figwidth(min(wider, RATIO_MAX_INCHES))
        fig.tight_layout()
    every = int(np.ceil(need / _bar_pitch(fig, axes[0]) - 1e-6))
    if every > 1:
        for ax in axes:
            ax.set_xticks(range(0, len(labels), every))
            ax.set_xticklabels(labels[::every], rotation=60, ha="right", fontsize="small")
        fig.tight_layout()


def _bar_pitch(fig: Any, ax: Any) -> float:
    """The distance (pixels at :data:`DPI`) from one bar of laid-out ``ax`` to the next."""
    lo, hi = ax.get_xlim()
    return float(ax.get_position().width * fig.get_figwidth() * DPI / (hi - lo))


RATIO_YLABELS = ("step time / best non-learned (geo. mean)", "step time / best non-learned\n(geo. mean)",
                 "step time /\nbest non-learned\n(geo. mean)")
"""The ratio plot's y-axis label on one, two and three lines: the first, or the first its axes' height holds."""


def _fit_ylabel(fig: Any, ax: Any, texts: tuple[str, ...]) -> None:
    """Draw ``ax``'s y label ``texts[0]`` as it is if within the figure, else on lines ``ax``'s height holds.

    The label is centred on the axes: the ratio plot's (348 pixels) ran off the figure's top (to 484 of its 480
    pixels) once its bars' labels, at 60 degrees, left the axes 255 pixels high (12 'W's, 20 'a's). It is drawn as
    the first of ``texts`` whose longest line laid-out ``ax``'s height holds: beside the axes, clear of the bars'
    labels below them. Where even the last (most lines) is longer, it is drawn in the font size that fits (half a
    point smaller at a time). The figure is laid out again after a change; a label that lies within the figure is
    left as it is: the same figure.
    """
    label = ax.yaxis.label
    size = label.get_fontsize()
    if longest_line(label.get_text(), label.get_fontproperties()) <= _label_room(fig, ax):
        return
    for _ in range(len(texts) + 1):  # a new label's margin, laid out, moves the axes' top and bottom at most a little
        height = ax.get_position().height * fig.get_figheight() * DPI
        prop = label.get_fontproperties().copy()
        prop.set_size(size)
        text = next((t for t in texts if longest_line(t, prop) <= height), texts[-1])
        while longest_line(text, prop) > height and prop.get_size_in_points() > 1:
            prop.set_size(prop.get_size_in_points() - 0.5)
        if text == label.get_text() and prop.get_size_in_points() == label.get_fontsize():
            return
        label.set_text(text)
        label.set_fontsize(prop.get_size_in_points())
        fig.tight_layout()


def _label_room(fig: Any, ax: Any) -> float:
    """The length (pixels at :data:`DPI`) a y label centred on laid-out ``ax`` may take inside the figure."""
    y0, height = ax.get_position().y0, ax.get_position().height
    figure_height = fig.get_figheight() * DPI
    centre = (y0 + height / 2) * figure_height
    return 2 * min(centre, figure_height - centre)


def fit_title(ax: Any, heading: str, room: float) -> None:
    """Draw ``heading`` as ``ax``'s title :func:`fitted` to ``room`` pixels (at :data:`DPI`), where it is wider.

    ``heading`` is the text drawn, its ``$`` not escaped. A title that fits is left as it is: the same figure.
    """
    shortened = fitted(heading, room, ax.title.get_fontproperties())
    if shortened != heading:
        ax.set_title(dollars(shortened))


def title_room(fig: Any, ax: Any, whole_figure: bool) -> float:
    """The width (pixels at :data:`DPI`) a title centred over laid-out ``ax`` may take.

    Inside the figure, 2 points from each edge (``whole_figure``), or over ``ax`` (a title over each of axes side by
    side).
    """
    x0, _, width, _ = ax.get_position().bounds
    figure_width = fig.get_figwidth() * DPI
    if not whole_figure:
        return width * figure_width
    centre = (x0 + width / 2) * figure_width
    return 2 * (min(centre, figure_width - centre) - 2 * DPI / 72)


def _bar(line: dict) -> tuple[str, int, str]:
    """The bar a summary line joins: placer, budget (evaluations; -1 for none, drawn first) and label (its options)."""
    budget = line.get("budget")
    return str(line["placer"]), -1 if budget is None else int(budget), str(line.get("label", line["placer"]))


#: The ``metadata`` that keeps each format's writer from stamping the time of writing into the file
#: (PostScript's writer takes none: its ``%%CreationDate`` comment line is dropped after).
_NO_DATE: dict[str, dict[str, None]] = {"pdf": {"CreationDate": None}, "svg": {"Date": None}}


def _save(fig: Any, path: Path) -> Path:
    """Write ``fig`` to ``path`` in the format of its suffix, atomically: a failed write keeps what was there."""
    from gnplace.graph_io import write_atomically
    from gnplace.quiet import logger_at_error

    buffer = io.BytesIO()
    kind = path.suffix.lower()[1:]
    # the same figure, the same bytes: no creation date (PDF, SVG, PostScript), no random SVG ids; PostScript's
    # writer logged a bare "does not support transparency" line on stderr for the legend's frame, drawn opaque there
    with _matplotlib().rc_context({"svg.hashsalt": "gnplace"}), logger_at_error("matplotlib.backends.backend_ps"):
        fig.savefig(buffer, dpi=DPI, format=kind, metadata=_NO_DATE.get(kind))
    data = buffer.getvalue()
    if kind in ("ps", "eps"):
        data = re.sub(rb"^%%CreationDate: [^\n]*\n", b"", data, count=1, flags=re.MULTILINE)
    return write_atomically(path, data)


def _image_path(path: str | os.PathLike[str]) -> Path:
    """``path`` as a :class:`Path`, refused (``ValueError``) unless its suffix is one of :data:`IMAGE_SUFFIXES`."""
    path = Path(path)
    if path.suffix.lower() not in IMAGE_SUFFIXES:
        raise ValueError(f"{path}: a plot is written as one of {', '.join(IMAGE_SUFFIXES)}, by suffix")
    return path
