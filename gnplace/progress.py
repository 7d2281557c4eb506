"""Progress of long work: a rich bar on a terminal, a line every half minute in a log file.

Searches with a budget of thousands of evaluations, pretraining and fine-tuning run for minutes. On a
terminal they show a bar on stderr (stdout stays the command's output, ``--json`` included), removed
when the work ends. Where stderr is not a terminal (``nohup ... > log``, a batch job's output, CI), a
bar cannot be drawn: rich draws it once, at the end. There :class:`ProgressLine` writes a plain line
at most every :data:`LINE_EVERY_S` seconds instead (work done of the total, time elapsed and about
how much is left), flushed at once, so that a log shows how far a run is and a run killed with
``kill -9`` leaves what it had reached. Work that ends within the interval writes no line.

:func:`evaluation_bar` counts a search's evaluations; :func:`count_bar` counts things done, with
notes printed above it (``gnplace evaluate``'s rows, ``gnplace generate``'s graphs); Lightning's runs
take :class:`gnplace.callbacks.ProgressLines`, built on :class:`ProgressLine`.
"""

from __future__ import annotations

import math
import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Protocol, TextIO

__all__ = ["LINE_EVERY_S", "Advance", "CountBar", "ProgressLine", "count_bar", "evaluation_bar", "format_duration",
           "no_progress", "show_bar"]

#: Seconds between two progress lines where stderr is not a terminal.
LINE_EVERY_S = 30.0


def show_bar(enabled: bool | None = None, stream: TextIO | None = None) -> bool:
    """Whether to draw a bar: ``enabled`` where given, else whether ``stream`` (default: stderr) is a terminal.

    A dumb terminal (``TERM=dumb`` or ``unknown``: Emacs's shell, some CI consoles) is not one: rich draws no bar
    there, so a search showed nothing for its whole run (a blank line at its end); it gets the progress lines.

    Examples:
        >>> show_bar(False), show_bar(True)
        (False, True)
    """
    if enabled is not None:
        return bool(enabled)
    isatty = getattr(sys.stderr if stream is None else stream, "isatty", None)
    return bool(isatty and isatty()) and os.environ.get("TERM", "").lower() not in ("dumb", "unknown")


def _shown(text: str, one_line: bool = True) -> str:
    """``text`` (a label or note naming a graph, a cluster, a placer) with its control characters as escapes.

    ``one_line``: its newlines too (:func:`~gnplace.cli.common.printable_name`), as a bar's text or a progress
    line; else they are kept (:func:`~gnplace.cli.common.printable`), as a note's. The bars draw on rich's own
    consoles, not the commands' (:func:`~gnplace.cli.common.stdout_console`), and the lines and notes are printed:
    a graph named with ESC's sequences retitled or cleared the terminal from a bar's text.
    """
    from gnplace.cli.common import printable, printable_name  # here: it imports the placers, which import this

    return printable_name(text) if one_line else printable(text)


def format_duration(seconds: float) -> str:
    """``seconds`` as ``m:ss``, or ``h:mm:ss`` from an hour on.

    Examples:
        >>> format_duration(75.4), format_duration(3725)
        ('1:15', '1:02:05')
    """
    whole = max(int(round(seconds)), 0)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


class ProgressLine:
    """Progress as a plain line on ``stream``, at most once every ``every_s`` seconds.

    The line reads ``LABEL: DONE/TOTAL UNIT (P%), ELAPSED elapsed, about LEFT left[; NOTE]``, the time
    left extrapolated from the rate since the first :meth:`update` (a resumed run starts counting from
    where it resumed; with ``from_first_count``, from the last update before the count first moved).
    Without a total it reads ``LABEL: DONE UNIT, ELAPSED elapsed[; NOTE]``.

    Args:
        label (str): what runs, e.g. ``"pretrain"`` or ``"finetune nmt_002"``.
        total (int or None): the count at which the work ends (None: unknown).
        unit (str): what is counted, e.g. ``"iterations"`` or ``"evaluations"``.
        every_s (float or None, optional): seconds between two lines (None: :data:`LINE_EVERY_S`; default).
        stream (TextIO, optional): where to write (default: ``sys.stderr`` at the time of writing).
        clock (callable, optional): seconds of a monotonic clock (default: :func:`time.monotonic`).
        from_first_count (bool, optional): measure the rate from the last update before the count first moved, so
            that work in stages counting nothing at first (``policy``'s coarsening of a large graph, 7 s of a 30 s
            run at 20,000 ops) is shown as elapsed but not extrapolated over every count left: a line after that
            coarsening and 4 evaluations of 478 read "about 15:44 left" of what took 22 s more (default: False, the
            rate since the first update: a count that moves in lumps, as Lightning's logged ones may, would
            otherwise be measured over one lump).

    Examples:
        >>> import io
        >>> now = [0.0]
        >>> out = io.StringIO()
        >>> line = ProgressLine("search", 400, "evaluations", every_s=30, stream=out, clock=lambda: now[0])
        >>> line.update(0)
        >>> now[0] = 10.0; line.update(100)  # within the interval: nothing written
        >>> now[0] = 31.0; line.update(124, note="best 0.93")
        >>> print(out.getvalue(), end="")
        search: 124/400 evaluations (31%), 0:31 elapsed, about 1:09 left; best 0.93
    """

    def __init__(self, label: str, total: int | None, unit: str, every_s: float | None = None,
                 stream: TextIO | None = None, clock: Callable[[], float] = time.monotonic,
                 from_first_count: bool = False) -> None:
        self.label, self.total, self.unit = label, total, unit
        self.every_s = float(LINE_EVERY_S if every_s is None else every_s)
        self.stream, self.clock, self.from_first_count = stream, clock, from_first_count
        self._start: tuple[float, int] | None = None  # (clock, count) at the first update
        self._rate_from: tuple[float, int] | None = None  # (clock, count) the rate is measured from
        self._moved = False  # whether the count has moved past the rate's start
        self._last_line = 0.0
        self.lines = 0  # lines written so far

    def update(self, done: int, note: str = "", force: bool = False) -> None:
        """Note that ``done`` of the total are done; write a line if the interval has passed (or ``force``)."""
        now = self.clock()
        if self._start is None:
            self._start, self._last_line = (now, int(done)), now
            self._rate_from = self._start
            if not force:
                return
        assert self._rate_from is not None
        if self.from_first_count and not self._moved:
            if int(done) == self._rate_from[1]:  # nothing counted yet: the time so far is no rate of counting
                self._rate_from = (now, self._rate_from[1])
            else:
                self._moved = True
        if not force and now - self._last_line < self.every_s:
            return
        self._last_line = now
        self.write(self.describe(done, now) + (f"; {note}" if note else ""))

    def done_before(self, done: int) -> None:
        """Count ``done`` as done before this run (rows saved by an earlier one): not in the rate."""
        if self._start is None:
            self._last_line = self.clock()
        self._start = (self._last_line if self._start is None else self._start[0], int(done))
        self._rate_from, self._moved = self._start, False

    def write(self, text: str) -> None:
        """Write ``LABEL: text`` as a line, flushed; nowhere where stderr is closed (``2>&-``: ``sys.stderr`` is None).

        ``print(file=None)`` prints on stdout: a program run with its stderr closed found the lines in its output.
        """
        stream = self.stream if self.stream is not None else sys.stderr
        if stream is None:
            return
        print(_shown(f"{self.label}: {text}"), file=stream, flush=True)
        self.lines += 1

    def describe(self, done: int, now: float) -> str:
        """``DONE/TOTAL UNIT (P%), ELAPSED elapsed, about LEFT left`` at clock ``now``."""
        started = self._start[0] if self._start is not None else now
        since, first = self._rate_from if self._rate_from is not None else (now, int(done))
        elapsed, counting = now - started, now - since
        if self.total is None:
            return f"{done:,} {self.unit}, {format_duration(elapsed)} elapsed"
        share = done / self.total if self.total > 0 else 1.0
        text = f"{done:,}/{self.total:,} {self.unit} ({share:.0%}), {format_duration(elapsed)} elapsed"
        if first < done < self.total and counting > 0:
            left = (self.total - done) * counting / (done - first)
            text += f", about {format_duration(left)} left"
        return text


def _bar_columns() -> tuple[Any, ...]:
    """The columns of every rich bar here: the label, the bar, done of total, time elapsed."""
    from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn

    # the label holds a graph's name, shown as it is: as rich markup "net[/]" failed and "net[v2]" showed "net"
    return TextColumn("{task.description}", markup=False), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn()


class Advance(Protocol):
    """What :func:`evaluation_bar` yields: ``advance_to(done, note="")``.

    ``done`` of the total are done; ``note`` (where given) says what runs now, e.g. ``"coarsening"``: the bar's
    text becomes ``LABEL: NOTE`` and a progress line ends ``; NOTE``. ``total`` (where given) is the count the work
    now ends at, where it has grown past the one planned (``policy``'s memory repairs on a memory-tight cluster).
    """

    def __call__(self, done: int, note: str = "", total: int | None = None) -> None:
        """Show ``done`` of the total done, ``note`` (where given) as what runs now, ``total`` as the new total."""


def no_progress(done: int, note: str = "", total: int | None = None) -> None:
    """:class:`Advance` that shows nothing."""


@contextmanager
def evaluation_bar(label: str, total: int, enabled: bool | None = None, unit: str = "evaluations") -> Iterator[Advance]:
    """A transient rich bar of ``total`` evaluations; yields ``advance_to(evaluations_so_far, note="")``.

    Where ``enabled`` is None and stderr is not a terminal, a :class:`ProgressLine` every
    :data:`LINE_EVERY_S` seconds instead. A ``note`` names the stage that runs (:class:`Advance`): work in stages,
    some of them long and counting nothing (``policy``'s coarsening), shows which one it is in. The lines' time left
    is extrapolated from the rate since the last update before the first evaluation (``from_first_count``): those
    stages' seconds are not spread over every evaluation left.

    The total only grows: to a ``total`` given (:class:`Advance`) and to ``done`` where the count passes it, so that
    no bar shows more than 100% nor a line a negative time left (``policy`` planned 1,436 evaluations of graphs that
    took 2,582 on a memory-tight cluster); once past the one planned, the text says so: ``N more than the M
    planned``.

    Args:
        label (str): what runs, e.g. ``"annealing cifar10_002"``.
        total (int): the budget, in timer evaluations (or any count: Placeto's pretraining counts episodes).
        enabled (bool or None, optional): show the bar (True), nothing (False), or the bar on a terminal and lines
            elsewhere (None; default).
        unit (str, optional): what the lines count (default: ``"evaluations"``).

    Examples:
        >>> with evaluation_bar("annealing", 100, enabled=False) as advance_to:
        ...     advance_to(50)
        ...     advance_to(60, note="polish")
    """
    if enabled is False:
        yield no_progress
        return
    planned, now = total, [total]  # the total planned, and the one shown now

    def grown(done: int, given: int | None, note: str) -> str:
        """Raise the total shown to ``given`` and to ``done``; ``note``, with what the total grew by past the plan."""
        now[0] = max(now[0], int(done), 0 if given is None else int(given))
        if now[0] <= planned:
            return note
        past = f"{now[0] - planned:,} more than the {planned:,} planned"
        return f"{note}; {past}" if note else past

    if not show_bar(enabled):
        line = ProgressLine(label, total, unit, from_first_count=True)  # a stage counting nothing first: no rate
        line.update(0)

        def update(done: int, note: str = "", total: int | None = None) -> None:
            note = grown(done, total, note)
            line.total = now[0]
            line.update(done, note)

        yield update
        return
    from rich.console import Console
    from rich.progress import Progress

    with Progress(*_bar_columns(), console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task(_shown(label), total=total)

        def advance_to(done: int, note: str = "", total: int | None = None) -> None:
            note = grown(done, total, note)
            bar.update(task, completed=done, total=now[0], description=_shown(f"{label}: {note}") if note else None)

        yield advance_to


class CountBar:
    """A count of things done (rows, graphs) shown as a rich bar on a terminal, or as progress lines elsewhere.

    Made by :func:`count_bar`; call :meth:`advance` as each thing is done.
    """

    def __init__(self, label: str, total: int, unit: str, bar: Any = None, quiet: bool = False) -> None:
        self.total, self.done, self._bar = int(total), 0, bar
        self._task = bar.add_task(_shown(label), total=total) if bar is not None else None
        self._line = ProgressLine(label, total, unit, every_s=math.inf if quiet else None) if bar is None else None
        if self._line is not None:
            self._line.update(0)

    def advance(self, description: str = "") -> None:
        """One more done; ``description`` says which (the bar's text, or the line's note)."""
        self.done += 1
        if self._line is not None:
            self._line.update(self.done, note=description)
        else:
            self._bar.update(self._task, advance=1, **({"description": _shown(description)} if description else {}))

    def done_before(self, count: int) -> None:
        """``count`` were done before this run (rows saved by an earlier one)."""
        self.done = int(count)
        if self._line is not None:
            self._line.done_before(count)
        else:
            self._bar.update(self._task, completed=count)

    def note(self, message: str) -> None:
        """Print ``message`` on stdout, above the bar where there is one."""
        if self._bar is not None:
            self._bar.console.print(_shown(message, one_line=False), soft_wrap=True, markup=False, highlight=False)
        else:
            print(_shown(message, one_line=False), flush=True)

    def finish(self) -> None:
        """Show the whole count done (things asked twice are done once)."""
        if self._bar is not None:
            self._bar.update(self._task, completed=self.total)


@contextmanager
def count_bar(label: str, total: int, unit: str, enabled: bool | None = None) -> Iterator[CountBar]:
    """A :class:`CountBar` of ``total`` things: a rich bar where stdout is a terminal, :class:`ProgressLine` elsewhere.

    The bar is drawn on stdout, with the notes; where stdout is a file (``gnplace evaluate > out.txt``) the
    file gets the notes alone, and stderr the progress lines.

    Args:
        label (str): what runs, e.g. ``"evaluate"``.
        total (int): things to do.
        unit (str): what they are, e.g. ``"rows"``.
        enabled (bool or None, optional): the bar (True), no progress (False; notes are printed still), or the bar on
            a terminal and lines elsewhere (None; default).

    Examples:
        >>> with count_bar("evaluate", 2, "rows", enabled=False) as bar:
        ...     bar.advance("ptb_002 k80x4 heft")
        >>> bar.done
        1
    """
    if not show_bar(enabled, sys.stdout):
        yield CountBar(label, total, unit, quiet=enabled is False)
        return
    from rich.progress import Progress

    with Progress(*_bar_columns()) as bar:
        counted = CountBar(label, total, unit, bar)
        yield counted
        counted.finish()
