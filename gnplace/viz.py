"""Plots: the timeline (Gantt chart) of a simulated step."""

from __future__ import annotations

import io
import os
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from gnplace.graph import PHASES, OpGraph
from gnplace.sim.simulator import StepResult
from gnplace.sim.timer import geomean
from gnplace.units import format_seconds, seconds_unit

__all__ = ["agg_pyplot", "plot_timeline", "plot_ratios", "IMAGE_SUFFIXES", "RASTER_ABOVE"]

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
    A device's name longer than :data:`ROW_NAME_CHARS`, or whose label is drawn wider than :data:`ROW_LABEL_POINTS`,
    is shortened in its rows' labels (:func:`_row_names`).
    An op or transfer of no duration is a mark :data:`MARK_POINTS` wide from its time on (:func:`_marks`). The time
    axis has fewer ticks where its labels would be nearer than :data:`TICK_GAP_POINTS` (:func:`_space_ticks`).
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
    with _fonts_for([*result.device_names, title if title else graph.name]):
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
    fig = _figure((12, 1.0 + 0.6 * 2 * d), dpi=_DPI)
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
    ax.set_yticks([2 * k for k in range(d)] + [2 * k + 1 for k in range(d)])
    oom = np.asarray(result.oom, dtype=bool)  # a device past its memory: its row says so, in red
    ends = [" (out of memory)" if out else " send" for out in oom.tolist()]  # the wider of each device's two labels
    rows = [_dollars(n) for n in _row_names([_drawable(n) for n in names], ends)]
    labels = ax.set_yticklabels([n + (" (out of memory)" if oom[k] else "") for k, n in enumerate(rows)]
                                + [f"{n} send" for n in rows])
    for k in np.flatnonzero(oom).tolist():
        labels[k].set_color(_OOM_COLOUR)
    ax.set_ylim(2 * d - 0.5, -0.5)  # every row, row 0 on top: the data's limits put an unused end row on the edge
    ax.set_xlabel(f"time ({unit})")
    ax.ticklabel_format(axis="x", style="plain", useOffset=False)  # 20000 s, not 2 and "1e4" in a corner
    heading = _drawable(title) if title else f"{_drawable(graph.name)}: step {format_seconds(result.step_time)}"
    ax.set_title(_dollars(heading))
    # the step's end, marked: a title given (simulate's, evaluate's) said nothing of it
    step = ax.axvline(result.step_time * scale, color="black", linestyle="--", linewidth=1.0,
                      label=f"step {format_seconds(result.step_time)}")
    handles = [Patch(color=c, label=p) for p, c in _PHASE_COLOURS.items()]
    handles += [Patch(color=_TRANSFER_COLOUR, label="transfer"), step]
    # beside the axes: inside (lower right) it covered the last bars of the step, where the step ends
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.005, 1.0), fontsize="small")
    fig.tight_layout()
    _space_ticks(fig, ax)
    _fit_title(ax, heading, room=_title_room(fig, ax, whole_figure=True))
    # laid out once: no layout engine left, so writing draws the figure once. tight_layout leaves a placeholder
    # engine, for which savefig first draws with drawing turned off, but an SVG's or PDF's raster of the bars was
    # drawn in full (1.1 of 2.4 s at 280,158 ops). The rc settings would put an engine back in the placeholder's stead.
    with _matplotlib().rc_context({"figure.autolayout": False, "figure.constrained_layout.use": False}):
        fig.set_layout_engine(None)
    return fig


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
    per_unit = ax.get_position().width * fig.get_figwidth() * _DPI / (hi - lo)  # pixels at _DPI
    widths = [_text_width(t, prop) for t in texts]
    gaps = [(b - a) * per_unit - (wa + wb) / 2 for a, b, wa, wb in zip(ticks, ticks[1:], widths, widths[1:])]
    return min(gaps) < TICK_GAP_POINTS * _DPI / 72


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


ROW_NAME_CHARS = 48
"""The most characters of a device's name a timeline's row label shows (its start and end, ``…`` between)."""

ROW_LABEL_POINTS = 612.0
"""The widest a timeline's row label is drawn (points): 8.5 inches, 1,020 pixels of the figure's 1,440 at 120 dpi,
the rest for the axes and the legend. A label of :data:`ROW_NAME_CHARS` of the widest ASCII characters (``@``,
``W``, ``m``), numbered and out of memory (``#63 @@@… (out of memory)``, 1,001 pixels), fits: drawn as the cap on
characters alone drew it."""


def _row_names(names: list[str], suffixes: list[str] | None = None) -> list[str]:
    """``names`` (the text drawn) shortened for the rows' labels, each still its own, ``suffixes`` left off.

    A name of more than :data:`ROW_NAME_CHARS` characters keeps its start and end with ``…`` between, and one whose
    label, the name and its ``suffixes`` (the widest text drawn after each name: ``" send"``, ``" (out of memory)"``;
    default none), is drawn wider than :data:`ROW_LABEL_POINTS` keeps the most characters that fit
    (:func:`_fitted`). Where two names shorten alike, each is shown with its device's index first (``#3 …``). A
    name of 300 characters took the figure's width: tight_layout gave up ("Tight layout not applied") and the labels
    ran off the left edge; so did one of 48 wide characters (per-ten-thousand signs, 1,440 pixels).

    Examples:
        >>> _row_names(["gpu0", "a" * 30 + "x" + "b" * 30])
        ['gpu0', 'aaaaaaaaaaaaaaaaaaaaaaa…bbbbbbbbbbbbbbbbbbbbbbbb']
        >>> _row_names(["a" * 30 + "x" + "b" * 30, "a" * 30 + "y" + "b" * 30])[1]
        '#1 aaaaaaaaaaaaaaaaaaaaaaa…bbbbbbbbbbbbbbbbbbbbbbbb'
        >>> len(_row_names(["\u2031" * 48])[0])
        34
    """
    from matplotlib.font_manager import FontProperties

    prop = FontProperties(size=_matplotlib().rcParams["ytick.labelsize"])
    pixels = ROW_LABEL_POINTS * _DPI / 72
    ends = suffixes or [""] * len(names)
    cut = [_middle_cut(n, ROW_NAME_CHARS) for n in names]
    short = [_fitted(c, pixels, prop, suffix=e) for c, e in zip(cut, ends)]
    if len(set(short)) < len(short):
        return [_fitted(c, pixels, prop, prefix=f"#{k} ", suffix=e) if s != n else s
                for k, (s, c, e, n) in enumerate(zip(short, cut, ends, names))]
    return short


def _middle_cut(text: str, chars: int) -> str:
    """``text`` if at most ``chars`` characters, else its start and end with ``…`` between, ``chars`` in all.

    Examples:
        >>> _middle_cut("abcdefgh", 8), _middle_cut("abcdefgh", 5), _middle_cut("abcdefgh", 1)
        ('abcdefgh', 'ab…gh', '…')
    """
    if len(text) <= chars:
        return text
    head = (chars - 1) // 2
    tail = chars - 1 - head
    return f"{text[:head]}…{text[len(text) - tail:]}"


def _text_width(text: str, prop: Any) -> float:
    """The width (pixels at :data:`_DPI`) of ``text`` drawn as it is (no maths) in font ``prop`` (a FontProperties).

    Measured as Agg draws it, as tight_layout measures text to lay a figure out.
    """
    from matplotlib.backends.backend_agg import RendererAgg

    return float(RendererAgg(1, 1, _DPI).get_text_width_height_descent(text, prop, ismath=False)[0])


def _fitted(text: str, pixels: float, prop: Any, prefix: str = "", suffix: str = "") -> str:
    """``prefix + text`` if drawn at most ``pixels`` wide, else ``prefix`` and the start and end of ``text``.

    The start and end have ``…`` between and are the most characters of ``text`` whose drawing in ``prop`` (a
    FontProperties), after ``prefix`` and before ``suffix`` (measured, not returned: drawn after it), is at most
    ``pixels`` wide at :data:`_DPI` (:func:`_text_width`).
    """
    if _text_width(prefix + text + suffix, prop) <= pixels:
        return prefix + text
    lo, hi = 1, len(text) - 1  # characters kept, ``…`` counted: 1 (``…`` alone) always taken
    while lo < hi:  # the most that fit: a wider cut is (all but always) no narrower
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if _text_width(prefix + _middle_cut(text, mid) + suffix, prop) <= pixels else (lo, mid - 1)
    while lo > 1 and _text_width(prefix + _middle_cut(text, lo) + suffix, prop) > pixels:
        lo -= 1
    return prefix + _middle_cut(text, lo)


def _fitted_labels(texts: list[str], pixels: float, prop: Any) -> list[str]:
    """``texts`` each :func:`_fitted` to ``pixels`` (at :data:`_DPI`, drawn in ``prop``), each still its own.

    Where two shorten alike, each shortened one is shown with its index first (``#3 …``), as :func:`_row_names` does.
    """
    short = [_fitted(t, pixels, prop) for t in texts]
    if len(set(short)) < len(short):
        return [_fitted(t, pixels, prop, prefix=f"#{k} ") if s != t else s
                for k, (s, t) in enumerate(zip(short, texts))]
    return short


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

    ``summary`` holds one row per family, cluster, placer, budget and options (:func:`gnplace.evaluate.summarise`; a
    placer given two budgets or option sets has a bar each, named by its ``label``, ``annealing@200`` or
    ``ppo[mode=refine]@2000``, in budget order, then by label), whose
    ``vs_best`` is a geometric mean over its ``vs_best_graphs`` graphs (``graphs`` where not given); a bar is
    the mean over every graph of the cluster with a ratio, each family weighted by its graphs counted in
    ``vs_best`` (an out-of-memory or failed placement has none).

    A bar's label drawn wider than :data:`RATIO_LABEL_POINTS` keeps its start and end with ``…`` between, the most
    characters that fit; where two shorten alike, each is shown with its bar's index first (``#3 …``). A cluster's
    title wider than its axes is shortened so too. A label of 58 characters (``ppo[...]@2000`` given several
    options) was too tall for the figure: matplotlib warned "Tight layout not applied" and the labels ran off it.
    The y-axis label is broken onto lines where it would run off the figure (:func:`_fit_ylabel`).

    Raises:
        ValueError: if ``summary`` is empty, or ``path`` has no suffix of :data:`IMAGE_SUFFIXES`.
    """
    path = _image_path(path)
    if not summary:
        raise ValueError("no rows to plot")

    with _fonts_for([*(str(s["cluster"]) for s in summary), *(_bar(s)[2] for s in summary)]):
        return _save(_ratios_figure(summary), path)


def _ratios_figure(summary: list[dict]) -> Any:
    """:func:`plot_ratios`' figure of ``summary`` (not empty), laid out, not written."""
    clusters = sorted({s["cluster"] for s in summary})
    bars = sorted({_bar(s) for s in summary})  # (placer, budget: -1 for none, label): a placer's budgets in order
    names = {_bar(s): _bar(s)[2] for s in summary}
    fig = _figure((4 + 2.5 * len(clusters), 4), dpi=_DPI)  # laid out at the resolution written, as the timeline
    from matplotlib.font_manager import FontProperties

    labels = [_dollars(t) for t in _fitted_labels([_drawable(names[bar]) for bar in bars],
                                                  RATIO_LABEL_POINTS * _DPI / 72, FontProperties(size="small"))]
    axes = fig.subplots(1, len(clusters), squeeze=False, sharey=True)
    for ax, cluster in zip(axes[0], clusters):
        values = []
        for bar in bars:
            rows = [s for s in summary if s["cluster"] == cluster and _bar(s) == bar]
            weights = (s.get("vs_best_graphs", s.get("graphs", 1)) for s in rows)
            values.append(geomean((s["vs_best"] for s in rows), weights=weights))
        ax.bar(range(len(bars)), values, color="#4C72B0")
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.set_xticks(range(len(bars)))
        ax.set_xticklabels(labels, rotation=60, ha="right", fontsize="small")
        ax.set_title(_plain(cluster))
    axes[0][0].set_ylabel(RATIO_YLABELS[0])
    fig.tight_layout()
    _fit_ylabel(fig, axes[0][0], RATIO_YLABELS)
    for ax, cluster in zip(axes[0], clusters):
        _fit_title(ax, _drawable(cluster), room=_title_room(fig, ax, whole_figure=False))
    return fig


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
    if _longest_line(label.get_text(), label.get_fontproperties()) <= _label_room(fig, ax):
        return
    for _ in range(len(texts) + 1):  # a new label's margin, laid out, moves the axes' top and bottom at most a little
        height = ax.get_position().height * fig.get_figheight() * _DPI
        prop = label.get_fontproperties().copy()
        prop.set_size(size)
        text = next((t for t in texts if _longest_line(t, prop) <= height), texts[-1])
        while _longest_line(text, prop) > height and prop.get_size_in_points() > 1:
            prop.set_size(prop.get_size_in_points() - 0.5)
        if text == label.get_text() and prop.get_size_in_points() == label.get_fontsize():
            return
        label.set_text(text)
        label.set_fontsize(prop.get_size_in_points())
        fig.tight_layout()


def _label_room(fig: Any, ax: Any) -> float:
    """The length (pixels at :data:`_DPI`) a y label centred on laid-out ``ax`` may take inside the figure."""
    y0, height = ax.get_position().y0, ax.get_position().height
    figure_height = fig.get_figheight() * _DPI
    centre = (y0 + height / 2) * figure_height
    return 2 * min(centre, figure_height - centre)


def _longest_line(text: str, prop: Any) -> float:
    """The width (pixels at :data:`_DPI`) of the longest line of ``text`` drawn in ``prop`` (:func:`_text_width`)."""
    return max(_text_width(line, prop) for line in text.split("\n"))


def _fit_title(ax: Any, heading: str, room: float) -> None:
    """Draw ``heading`` as ``ax``'s title :func:`_fitted` to ``room`` pixels (at :data:`_DPI`), where it is wider.

    ``heading`` is the text drawn, its ``$`` not escaped. A title that fits is left as it is: the same figure.
    """
    fitted = _fitted(heading, room, ax.title.get_fontproperties())
    if fitted != heading:
        ax.set_title(_dollars(fitted))


def _title_room(fig: Any, ax: Any, whole_figure: bool) -> float:
    """The width (pixels at :data:`_DPI`) a title centred over laid-out ``ax`` may take.

    Inside the figure, 2 points from each edge (``whole_figure``), or over ``ax`` (a title over each of axes side by
    side).
    """
    x0, _, width, _ = ax.get_position().bounds
    figure_width = fig.get_figwidth() * _DPI
    if not whole_figure:
        return width * figure_width
    centre = (x0 + width / 2) * figure_width
    return 2 * (min(centre, figure_width - centre) - 2 * _DPI / 72)


def _bar(line: dict) -> tuple[str, int, str]:
    """The bar a summary line joins: placer, budget (evaluations; -1 for none, drawn first) and label (its options)."""
    budget = line.get("budget")
    return str(line["placer"]), -1 if budget is None else int(budget), str(line.get("label", line["placer"]))


def _plain(name: str) -> str:
    """``name`` drawn as it is: matplotlib reads text between two ``$`` as maths (and fails on ``a$\\frac$``).

    A lone surrogate (a file name's byte that is not UTF-8, ``caf\\udce9``) is drawn escaped, as the
    text output prints it: the font engine refused it with a TypeError. Control characters and line breaks
    (a graph or device name's ``\\x1b``, newline) are drawn as the ``\\xNN`` escapes the text output prints
    (:func:`~gnplace.cli.common.printable_name`), a tab as ``\\x09``: no font has their glyphs, and matplotlib
    warned once per character and drawing ("Glyph 27 missing from font(s) DejaVu Sans"); a newline split a title.
    So is any other character that none of the fonts text is drawn in has (:func:`_fonts_for` adds an installed
    font that has it), as Python escapes it (``\\u6a21``): a module named in Chinese (``模型``) was drawn as
    missing-glyph boxes, with a warning per character and drawing.
    """
    return _dollars(_drawable(name))


def _drawable(name: str) -> str:
    """``name`` as :func:`_plain` draws it, its ``$`` not yet escaped: the text drawn, to measure and shorten."""
    drawn = _drawn_codepoints()
    return "".join(c if ord(c) in drawn else _escaped(c) for c in _printable(name))


def _dollars(text: str) -> str:
    """``text`` with each ``$`` escaped, drawn as a ``$``: matplotlib reads text between two ``$`` as maths."""
    return text.replace("$", r"\$")


def _printable(name: str) -> str:
    """``name`` with its control characters, line breaks, tabs and lone surrogates escaped (see :func:`_plain`)."""
    from gnplace.cli.common import printable_name  # here: the CLI's module imports the placers

    return printable_name(str(name)).replace("\t", "\\x09").encode("utf-8", "backslashreplace").decode("utf-8")


def _escaped(char: str) -> str:
    """``char`` as Python's ``ascii`` writes it, without quotes: ``\\xe9``, ``\\u6a21``, ``\\U0001f600``."""
    return char.encode("ascii", "backslashreplace").decode("ascii")


_LAST_RESORT = "LastResort"
"""The start of the file name of matplotlib's Last Resort font (3.10 on): a box for every character, not a glyph."""


def _text_fonts(family: list[str] | None = None) -> list[str]:
    """The files of the fonts matplotlib draws text in for ``family`` (default: ``font.family``), in fallback order.

    matplotlib's Last Resort font, appended to every list by 3.10 on, is left out: its boxes name no character.
    """
    from matplotlib import font_manager
    from matplotlib.font_manager import FontProperties

    prop = FontProperties(family=family)
    find = getattr(font_manager.fontManager, "_find_fonts_by_props", None)  # 3.6 on: the fallback list
    paths = find(prop) if find is not None else [font_manager.findfont(prop)]
    return [str(p) for p in paths if not Path(str(p)).name.startswith(_LAST_RESORT)]


def _charmap(path: str) -> frozenset[int]:
    """The code points that the font in file ``path`` has a glyph for (read once a process)."""
    if path not in _CHARMAPS:
        from matplotlib import font_manager

        _CHARMAPS[path] = frozenset(font_manager.get_font(path).get_charmap())
    return _CHARMAPS[path]


_CHARMAPS: dict[str, frozenset[int]] = {}


def _drawn_codepoints() -> frozenset[int]:
    """The code points the fonts of matplotlib's ``font.family`` now draw (:func:`_text_fonts`)."""
    fonts = _text_fonts()
    return frozenset().union(*(_charmap(f) for f in fonts)) if fonts else frozenset()


def _fallback_families(texts: list[str]) -> list[str]:
    """Installed fonts' family names that draw the characters of ``texts`` that ``font.family``'s fonts lack.

    Each is the font that has the most characters still lacking (ties: by family name, then file), until none has
    any: the same fonts installed, the same families. A character none has is left out (:func:`_plain` escapes it).
    """
    from matplotlib import font_manager

    lacking = {ord(c) for text in texts for c in _printable(text)} - _drawn_codepoints()
    if not lacking:
        return []
    ours = set(_text_fonts())
    candidates = sorted({(e.name, e.fname) for e in font_manager.fontManager.ttflist
                         if e.fname not in ours and not Path(e.fname).name.startswith(_LAST_RESORT)})
    families: list[str] = []
    while lacking:
        best = min(candidates, key=lambda c: (-len(lacking & _charmap(c[1])), c), default=None)
        if best is None or not lacking & _charmap(best[1]):
            break
        families.append(best[0])
        lacking -= _charmap(best[1])
        candidates = [c for c in candidates if c[0] != best[0]]
    return families


@contextmanager
def _fonts_for(texts: list[str]) -> Iterator[None]:
    """A context in which text is drawn in ``font.family`` and, after it, the fonts :func:`_fallback_families` finds.

    matplotlib draws a character its first font lacks in the next one of the list that has it (3.6 on).
    """
    mpl = _matplotlib()
    extra = _fallback_families(texts)
    if not extra:
        yield
        return
    with mpl.rc_context({"font.family": [*mpl.rcParams["font.family"], *extra]}):
        yield


_DPI = 120
"""The resolution of the plots written (dots an inch), a PNG's and a vector file's raster of bars; each figure is
laid out at it (text measured at another resolution is another width: hinting)."""

#: The ``metadata`` that keeps each format's writer from stamping the time of writing into the file
#: (PostScript's writer takes none: its ``%%CreationDate`` comment line is dropped after).
_NO_DATE: dict[str, dict[str, None]] = {"pdf": {"CreationDate": None}, "svg": {"Date": None}}


def _save(fig: Any, path: Path) -> Path:
    """Write ``fig`` to ``path`` in the format of its suffix, atomically: a failed write keeps what was there."""
    from gnplace.graph_io import write_atomically

    buffer = io.BytesIO()
    kind = path.suffix.lower()[1:]
    # the same figure, the same bytes: no creation date (PDF, SVG, PostScript), no random SVG ids
    with _matplotlib().rc_context({"svg.hashsalt": "gnplace"}):
        fig.savefig(buffer, dpi=_DPI, format=kind, metadata=_NO_DATE.get(kind))
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
