"""The points of a saved row that a figure draws, and what it leaves out, said in a few words.

A saved row edited by hand, or cut, may hold points no axes draw; the report makes such a row again (its
``*_row_readable`` checks) and its figures leave them out, saying so.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np


def curve_points(history: Any) -> tuple[np.ndarray, str | None]:
    """The points of a learning curve that a figure draws, and what it left out, said in a few words.

    A row's ``history`` holds ``[evaluations, best step over auto's]`` pairs (:func:`learned_row`: never empty, each
    ratio finite and positive). A saved row edited by hand, or cut, may hold others: a point that is no such pair of
    numbers, whose numbers are not finite, whose evaluations are below 0 or whose ratio is 0 or below (no step
    takes 0 s or less) is left out, and said so; a history of none is "no points".

    Args:
        history (Any): a row's learning curve, ``[[evaluations, ratio], ...]``.

    Returns:
        tuple: the points drawn (``[n, 2]`` float array: evaluations, ratio), and None where all are, else what was
        left out (``"no points"``, ``"2 of 5 points left out (1 not finite, 1 ratio <= 0)"``).

    Examples:
        >>> points, note = curve_points([[1, 1.0], [10, float("nan")], [100, 0.8]])
        >>> points.tolist(), note
        ([[1.0, 1.0], [100.0, 0.8]], '1 of 3 points left out (1 not finite)')
    """
    entries = history if isinstance(history, list) else []
    kept: list[tuple[float, float]] = []
    dropped = {"not a pair of numbers": 0, "not finite": 0, "evaluations < 0": 0, "ratio <= 0": 0}
    for entry in entries:
        pair = _number_pair(entry)
        reason = ("not a pair of numbers" if pair is None else "not finite" if not all(map(math.isfinite, pair))
                  else "evaluations < 0" if pair[0] < 0 else "ratio <= 0" if pair[1] <= 0 else None)
        if reason is None and pair is not None:
            kept.append(pair)
        elif reason is not None:
            dropped[reason] += 1
    points = np.array(kept, dtype=float).reshape(-1, 2)
    if not kept:
        return points, "no points" if not entries else f"no points ({_reasons(dropped)})"
    left_out = len(entries) - len(kept)
    return points, (f"{left_out} of {len(entries)} points left out ({_reasons(dropped)})" if left_out else None)


def _number_pair(entry: Any) -> tuple[float, float] | None:
    """``entry`` as ``(evaluations, ratio)`` floats, None where it is no list of two numbers (bools are none)."""
    if not isinstance(entry, (list, tuple)) or len(entry) != 2:
        return None
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in entry):
        return None
    return float(entry[0]), float(entry[1])


def _reasons(counts: dict[str, int]) -> str:
    """``1 not finite, 2 ratio <= 0``: how many points each reason left out, those that left out any."""
    return ", ".join(f"{count} {reason}" for reason, count in counts.items() if count)


def scale_points(rows: list[dict[str, Any]]) -> tuple[list[tuple[Any, Any]], str | None]:
    """One placer's ``(ops, seconds)`` points that log-log axes draw, by ops, and what it left out, in a few words.

    Args:
        rows (list[dict]): section 5's rows of one placer (``ops``, ``seconds``: seconds to place).

    Returns:
        tuple: the points drawn (each as its row holds it), and None where all are, else what was left out
        (``"1 of 3 points left out (1 not finite)"``, ``"no points (2 <= 0)"``).

    Examples:
        >>> scale_points([{"ops": 2000, "seconds": 0.5}, {"ops": 100, "seconds": float("nan")}])
        ([(2000, 0.5)], '1 of 2 points left out (1 not finite)')
    """
    kept = []
    dropped = {"not a number": 0, "not finite": 0, "<= 0": 0}
    for r in rows:
        pair = _number_pair([r.get("ops"), r.get("seconds")])
        reason = ("not a number" if pair is None else "not finite" if not all(map(math.isfinite, pair))
                  else "<= 0" if min(pair) <= 0 else None)
        if reason is None:
            kept.append((r["ops"], r["seconds"]))
        else:
            dropped[reason] += 1
    if not kept:
        return kept, f"no points ({_reasons(dropped)})"
    left_out = len(rows) - len(kept)
    return sorted(kept), (f"{left_out} of {len(rows)} points left out ({_reasons(dropped)})" if left_out else None)
