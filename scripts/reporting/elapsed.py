"""The minutes of every run that made a report's saved rows, kept in ``--out``'s ``elapsed.json`` with the report's kind."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any

from gnplace.graph_io import write_atomically


def read_elapsed(path: Path) -> dict[str, Any]:
    """What ``elapsed.json`` at ``path`` holds (empty where it cannot be read: missing, or cut short by a kill)."""
    try:
        saved = json.loads(path.read_text())
    except (OSError, ValueError, RecursionError):  # ("[[[..." thousands deep: RecursionError)
        return {}
    return saved if isinstance(saved, dict) else {}


def add_minutes(path: Path, minutes: float, quick: bool | None = None) -> float:
    """Add ``minutes`` to the minutes of every run that made the saved rows, kept in ``path``; the sum.

    ``path`` is replaced atomically; one that cannot be read (cut short by a kill before it was), or whose minutes are
    no count (NaN, infinite or negative: edited by hand), counts as none.
    ``quick`` (given) records which report made the rows (:func:`check_report_kind`); else the one recorded stays.
    """
    saved = read_elapsed(path)
    try:
        spent = float(saved["minutes"])
    except (KeyError, TypeError, ValueError):
        spent = 0.0
    if not math.isfinite(spent) or spent < 0:  # an edited "minutes": NaN was "nan minutes" in every report after
        spent = 0.0
    spent += minutes
    kind = saved.get("quick") if quick is None else quick
    write_atomically(path, json.dumps({"minutes": spent, **({"quick": kind} if isinstance(kind, bool) else {})}).encode())
    return spent


class Elapsed:
    """This run's minutes, added to ``elapsed.json`` (:func:`add_minutes`) as it goes, not only at its end.

    :meth:`book` runs after each section and where the run is cut short (Ctrl-C, an error): a report interrupted
    and resumed says the minutes of every run that made its rows, not the last one's alone, and a ``kill -9``
    loses at most the section it cut.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.started = self._booked = time.perf_counter()

    def book(self) -> float:
        """Add the minutes since the last booking to ``path``; the minutes of every run, this one so far included."""
        now = time.perf_counter()
        spent = add_minutes(self.path, (now - self._booked) / 60)
        self._booked = now
        return spent

    @property
    def minutes(self) -> float:
        """Minutes since this run started."""
        return (time.perf_counter() - self.started) / 60
