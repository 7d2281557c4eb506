"""A progress bar of timer evaluations for placers that search under a budget (or of any count of steps).

Searches with a budget of thousands of evaluations run for minutes; on a terminal they show how far
they are, on stderr (stdout stays the command's output, ``--json`` included), and the bar is removed
when the search ends.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

__all__ = ["evaluation_bar"]


@contextmanager
def evaluation_bar(label: str, total: int, enabled: bool | None = None) -> Iterator[Callable[[int], None]]:
    """A transient rich bar of ``total`` evaluations; yields ``advance_to(evaluations_so_far)``.

    Args:
        label (str): what runs, e.g. ``"annealing cifar10_002"``.
        total (int): the budget, in timer evaluations (or any count: Placeto's pretraining counts episodes).
        enabled (bool or None, optional): show it; None: when stderr is a terminal (default: None).

    Examples:
        >>> with evaluation_bar("annealing", 100, enabled=False) as advance_to:
        ...     advance_to(50)
    """
    if not (sys.stderr.isatty() if enabled is None else enabled):
        yield lambda evaluations: None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    # the label holds a graph's name, shown as it is: as rich markup "net[/]" failed and "net[v2]" showed "net"
    columns = (TextColumn("{task.description}", markup=False), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task(label, total=total)
        yield lambda evaluations: bar.update(task, completed=evaluations)
