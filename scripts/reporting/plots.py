"""Sections 2 and 5's bar and line figures: learned placers' steps over ``auto``'s, seconds to place against size."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from benchmarks.common import FIGURE_DPI, save_figure

from gnplace.sim.timer import geomean
from reporting.points import scale_points


def say_not_drawn(ax: Any, title: str, text: str) -> None:
    """A panel with no curve: ``title`` above, ``text`` in its middle, no ticks."""
    ax.set_title(title)
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, fontsize=9, color="dimgrey")
    ax.set_xticks([])
    ax.set_yticks([])


def plot_learned_bars(rows: list[dict[str, Any]], path: Path, placers: list[str]) -> None:
    """Geometric mean of step over auto's per placer and family (bars).

    A bar with no mean (each of the placer's runs of the family out of memory, or none) is written ``n/a`` at its
    foot (:func:`gnplace.viz.mark_missing`): it was no bar and nothing said so. With no row or no placer, the axes
    say so (they were empty).
    """
    from gnplace.viz import agg_pyplot

    plt = agg_pyplot()

    fig, ax = plt.subplots(figsize=(9, 3.6), dpi=FIGURE_DPI)
    if rows and placers:
        _learned_bars(ax, rows, placers)
    else:
        say_not_drawn(ax, "", "no learned placer's run to draw")
    ax.set_ylabel("step / auto's (geometric mean)")
    fig.tight_layout()
    _legend_clear_of_bars(fig, ax)
    save_figure(fig, path)  # a kill leaves the figure before, not half of it
    plt.close(fig)


def _legend_clear_of_bars(fig: Any, ax: Any) -> None:
    """Move laid-out ``ax``'s legend beside the axes, right of them, where it covers a bar or a bar's ``n/a``.

    matplotlib's best place inside the axes is the one covering the least: with every family's bars about as tall,
    the legend was drawn over the first bars (all at 1.2: cifar10's, nmt's and ptb's of ``policy``). The figure is
    laid out again with the legend outside; a legend clear of every bar is left where it is: the same figure.
    """
    legend = ax.get_legend()
    if legend is None:
        return
    renderer = fig.canvas.get_renderer()
    box = legend.get_window_extent(renderer)
    if not any(artist.get_window_extent(renderer).overlaps(box) for artist in (*ax.patches, *ax.texts)):
        return
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    fig.tight_layout()


def _learned_bars(ax: Any, rows: list[dict[str, Any]], placers: list[str]) -> None:
    """:func:`plot_learned_bars`' bars (``rows`` and ``placers`` not empty): one group per placer, a bar per family."""
    from gnplace.viz import mark_missing

    families = sorted({r["family"] for r in rows})
    width = 0.8 / len(families)
    for i, family in enumerate(families):
        values = [geomean(r["vs_auto"] for r in rows if r["family"] == family and r["placer"] == p and not r["oom"])
                  for p in placers]
        ax.bar(np.arange(len(placers)) + i * width, values, width, label=family)
        mark_missing(ax, values, positions=list(np.arange(len(placers)) + i * width), width=width)
    ax.axhline(1.0, color="grey", lw=0.8, ls="--")
    ax.set_xticks(np.arange(len(placers)) + width * (len(families) - 1) / 2, placers, rotation=20)
    ax.legend(fontsize=8)


def plot_scale(rows: list[dict[str, Any]], path: Path) -> None:
    """Seconds to place against ops, log-log, one line per placer.

    A point that log axes cannot draw (a saved row edited by hand: seconds or ops not a finite number above 0) is
    left out and said so above the axes (:func:`scale_points`): a nan broke the line, a 0 ran it off the axes'
    foot, and with no point at all the log axes raised ValueError. With nothing to draw, the axes say so.
    """
    from gnplace.viz import agg_pyplot

    plt = agg_pyplot()

    fig, ax = plt.subplots(figsize=(6, 3.8), dpi=FIGURE_DPI)
    notes = _scale_lines(ax, rows)
    if not ax.get_lines():
        say_not_drawn(ax, "", "\n".join(["no placement timed to draw", *notes]))
    elif notes:  # above the axes, small: what the figure leaves out
        ax.set_title("\n".join(notes), fontsize=8)
    ax.set_xlabel("ops in the training graph")
    ax.set_ylabel("seconds to place (one core)")
    fig.tight_layout()
    save_figure(fig, path)  # a kill leaves the figure before, not half of it
    plt.close(fig)


def _scale_lines(ax: Any, rows: list[dict[str, Any]]) -> list[str]:
    """:func:`plot_scale`'s lines on log-log axes and their legend, where any; what each placer left out, in words."""
    notes = []
    for i, name in enumerate(sorted({r["placer"] for r in rows})):
        part, note = scale_points([r for r in rows if r["placer"] == name])
        if note is not None:
            notes.append(f"{name}: {note}")
        if not part:
            continue
        budget = next((r["budget"] for r in rows if r["placer"] == name and r.get("budget")), None)
        # its colour by its place among all placers: one with no point drawn leaves the others' as they were
        ax.plot(*zip(*part), marker="o", label=name + (f" (budget {budget})" if budget else ""), color=f"C{i % 10}")
    if ax.get_lines():
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.legend(fontsize=8)
    return notes
