"""Section 2's figure of learning curves: best step over ``auto``'s against evaluations, a panel per family."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
from benchmarks.common import FIGURE_DPI, covered_stretches, hidden_curves, save_figure

from reporting.plots import say_not_drawn
from reporting.points import curve_points

NOTE_INCHES = 8 * 1.2 / 72
"""The height of a line of a learning curves panel's notes (inches): its title's 8 points, lines 1.2 apart. The
figure grows by it for each line the panel with the most of them has."""


def plot_curves(rows: list[dict[str, Any]], path: Path, cluster: str) -> None:
    """Best step over auto's against evaluations, one panel per family (its first RL graph on ``cluster``).

    A curve of steps is held at its final value to the panel's right edge (:func:`held_to`), so that its final level
    reads. What a panel cannot draw is written under its title: a placer's points left out (:func:`curve_points`), a
    curve hidden under another, or under others over stretches of its evaluations (:func:`_curve_notes`), or no run
    of the family on ``cluster``; with no row at all, one panel says so. The figure grows by the most lines of notes
    a panel has. Where a curve has a point at 0 evaluations (a placement timed by no evaluation), the axis is linear
    from 0 to 1 and logarithmic past it.
    """
    from gnplace.viz import agg_pyplot

    plt = agg_pyplot()

    families = sorted({r["family"] for r in rows})
    # one colour per placer in every panel: a scatter (a one-point history) and a line draw from two colour cycles
    colour = {placer: f"C{i % 10}" for i, placer in enumerate(sorted({r["placer"] for r in rows}))}
    panels = max(len(families), 1)
    fig, axes = plt.subplots(1, panels, figsize=(5 * panels, 3.6), squeeze=False, dpi=FIGURE_DPI)
    if not families:
        say_not_drawn(axes[0][0], f"no learning curves on {cluster}", "no learned placer's run to draw")
    for ax, family in zip(axes[0], families):
        part = [r for r in rows if r["family"] == family and r["cluster"] == cluster]
        if not part:
            say_not_drawn(ax, f"{family} on {cluster}", f"no run of {family} on {cluster}")
            continue
        _curves_panel(ax, part, colour, cluster)
    notes = max(ax.get_title().count("\n") for ax in axes[0])
    if notes:  # the axes keep their height: 7 lines of notes over a panel left it half of it
        fig.set_figheight(3.6 + notes * NOTE_INCHES)
    # beside the last panel, not over it (where it hid the seeds' curves), naming every placer of every panel
    handles = {label: handle for ax in axes[0] for handle, label in zip(*ax.get_legend_handles_labels())}
    if handles:
        axes[0][-1].legend(handles.values(), handles.keys(), fontsize=7, loc="upper left",
                           bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0)
    fig.tight_layout()
    save_figure(fig, path)  # a kill leaves the figure before, not half of it
    plt.close(fig)


def _curves_panel(ax: Any, part: list[dict[str, Any]], colour: dict[str, str], cluster: str) -> None:
    """One family's panel of :func:`plot_curves`: the curves of its first graph's rows (``part``: on ``cluster``)."""
    graph = sorted({r["name"] for r in part})[0]
    runs = sorted((r for r in part if r["name"] == graph), key=lambda r: r["placer"])
    curves = {r["placer"]: curve_points(r["history"]) for r in runs}
    end = _panel_end([h for h, _ in curves.values()], [r.get("evaluations") for r in runs])
    curves = {placer: (held_to(h, end), note) for placer, (h, note) in curves.items()}  # as drawn, up to the data's
    notes, zero, drawn, steps = _curve_notes(curves), False, 0, []
    for placer, (h, _) in curves.items():
        zero, drawn = zero or bool(len(h) and h[:, 0].min() == 0), drawn + bool(len(h))
        if len(h) == 1:
            ax.scatter(h[:, 0], h[:, 1], label=placer, marker="*", s=80, zorder=3, color=colour[placer])
        elif len(h):
            steps += ax.step(h[:, 0], h[:, 1], where="post", label=placer, color=colour[placer])
    title = f"{graph} on {cluster}"
    if not drawn:
        say_not_drawn(ax, title, "no point to draw:\n" + "\n".join(notes))
        return
    ax.axhline(1.0, color="grey", lw=0.8, ls="--")
    if zero:  # 0 evaluations has no place on a log axis: linear up to 1
        ax.set_xscale("symlog", linthresh=1.0)
        ax.set_xlim(0, max(ax.get_xlim()[1], 10.0))  # at least a decade past 1 (one point at 0: 0 to 0.055)
    else:
        ax.set_xscale("log")
        ax.set_xlim(left=1)
    _hold_to_right_edge(ax, steps, end)
    if notes:  # under the title, smaller: what this panel leaves out
        ax.set_title(title + "\n" + "\n".join(notes), fontsize=8)
    else:
        ax.set_title(title)
    ax.set_xlabel("simulator evaluations")
    ax.set_ylabel("best step / auto's")


def _curve_notes(curves: dict[str, tuple[np.ndarray, str | None]]) -> list[str]:
    """The lines a panel says under its title: each placer's points left out, each curve drawn under a later one.

    ``curves`` holds each placer's points as drawn and what :func:`curve_points` left out, in the order drawn. A
    curve wholly under one later curve is "hidden under" it (:func:`~benchmarks.common.hidden_curves`); one under
    later ones over stretches of its evaluations alone (:func:`~benchmarks.common.covered_stretches`) is "under"
    each, a line per cover: ``finetune: under ppo over 1-60 evaluations`` (both flat at auto's step until
    fine-tuning's first better placement: fine-tuning's curve seemed to start at 60).
    """
    points = {placer: h for placer, (h, _) in curves.items()}
    hidden, partly = hidden_curves(points), covered_stretches(points)
    notes = []
    for placer, (_, note) in curves.items():
        if note is not None:
            notes.append(f"{placer}: {note}")
        if placer in hidden:
            notes.append(f"{placer}: hidden under {hidden[placer]}")
        elif placer in partly:  # a line per cover, its stretches in order: a line per curve ran past its panel
            for cover in dict.fromkeys(cover for *_, cover in partly[placer]):
                spans = ", ".join(f"{_count(lo)}-{_count(hi)}" for lo, hi, c in partly[placer] if c == cover)
                notes.append(f"{placer}: under {cover} over {spans} evaluations")
    return notes


def _count(evaluations: float) -> str:
    """A number of evaluations as a note writes it: ``1,436``, ``0.5``."""
    return f"{evaluations:,.0f}" if float(evaluations).is_integer() else f"{evaluations:,.3g}"


def held_to(points: np.ndarray, end: float) -> np.ndarray:
    """A curve of steps (``[n, 2]``: evaluations, best so far) with its last value held on to ``end`` evaluations.

    Drawn as steps (``where="post"``), a curve ended at its last point: its final value, where it had just dropped
    to it (``post``'s at the budget's last batch), showed as the foot of a drop alone, a level of no length. A curve
    of one point (a star) or none, or one already reaching ``end``, is returned as it is.

    Examples:
        >>> held_to(np.array([[1.0, 1.2], [64.0, 1.1]]), 100.0).tolist()
        [[1.0, 1.2], [64.0, 1.1], [100.0, 1.1]]
    """
    if len(points) < 2 or points[:, 0].max() >= end:
        return points
    return np.vstack([points, [end, points[-1, 1]]])


FINAL_LEVEL_ROOM = 0.04
"""The least of a learning curves panel's width (a fraction) right of its last evaluations, where each curve of steps
is held at its final value (:func:`_hold_to_right_edge`): 4%, 16 pixels of a 5-inch panel at 110 dpi."""


def _hold_to_right_edge(ax: Any, steps: list[Any], end: float) -> None:
    """Hold each line of ``steps`` (``ax.step``'s) at its final value to ``ax``'s right edge, its x limits fixed.

    Held to the panel's last evaluations ``end`` alone (:func:`held_to`), a curve whose last drop came at them (the
    seeds', at the budget's last batch, where no star lies further right) still ended at the foot of that drop. The
    right edge is at least :data:`FINAL_LEVEL_ROOM` of the axes' width past ``end`` (on the axis' scale): the
    symlog axis' margin past 64 evaluations (from 0) was 3 pixels.
    """
    lo, right = ax.get_xlim()
    scale = ax.xaxis.get_transform()
    t_lo, t_right, t_end = scale.transform(np.array([lo, right, end], dtype=float))
    least = (t_end - FINAL_LEVEL_ROOM * t_lo) / (1 - FINAL_LEVEL_ROOM)  # (t_right - t_end) / (t_right - t_lo) >= room
    if t_right < least:
        right = float(scale.inverted().transform(np.array([least]))[0])
    ax.set_xlim(right=right)  # the lines held to the edge move it no further
    for line in steps:
        line.set_data(*held_to(np.asarray(line.get_xydata()), right).T)


def _panel_end(curves: list[np.ndarray], evaluations: list[Any]) -> float:
    """The last evaluations of a panel of curves: the most of any point drawn, and of any run's evaluations used.

    ``evaluations`` holds each run's ``evaluations`` as its row recorded it (None, or anything but a finite number
    of 0 or more, is passed over: a row edited by hand). 0 where there is neither.
    """
    used = [float(e) for e in evaluations
            if isinstance(e, (int, float)) and not isinstance(e, bool) and math.isfinite(e) and e >= 0]
    return max([float(h[:, 0].max()) for h in curves if len(h)] + used, default=0.0)
