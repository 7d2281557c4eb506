"""Section 1: every placer on the test splits (and the real models), through ``gnplace.evaluate``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmarks.common import test_graphs

from reporting.config import Config


def rows_of(tasks: list[Any], rows: list[Any]) -> list[Any]:
    """The rows of ``gnplace.evaluate`` that ``tasks`` made (the folder also keeps earlier runs' other rows).

    By key, graph file and cluster (:func:`gnplace.evaluate.rows_made_by`): by key alone, the rows saved of a copy
    of a graph file at another path counted as these tasks'.
    """
    from gnplace.evaluate import rows_made_by

    return rows_made_by(tasks, rows)


def table_placements(tasks: list[Any], folder: Path, jobs: int, label: str = "section 1") -> list[Any]:
    """Section 1's placements through ``gnplace.evaluate`` (resuming from ``folder``), a line as each finishes.

    ``label`` names them in those lines (``[report] section 1: 3 saved, 5 to run``), and in the line of saved rows
    dropped as timed on inputs that changed since (:func:`gnplace.evaluate.stale_note`).

    Returns:
        list: the rows of ``folder/results.csv`` (:func:`rows_of` picks those of ``tasks``).
    """
    from gnplace.evaluate import evaluate, stale_note, task_key

    total = len({task_key(t) for t in tasks})  # a task asked twice runs once
    todo = [total]
    done = [0]

    def reused(count: int) -> None:
        todo[0] = total - count
        print(f"[report] {label}: {count} saved, {todo[0]} to run", flush=True)

    def progress(row: Any) -> None:
        done[0] += 1
        print(f"[report] {label} {done[0]}/{todo[0]}: {row.graph}|{row.cluster}|{row.placer}"
              + (f" ERROR {row.error}" if row.error else ""), flush=True)

    def stale(count: int) -> None:  # rows of a graph or cluster file since changed went without a word
        print(f"[report] {label}: {stale_note(count, Path(folder) / 'results.csv')}", flush=True)

    return evaluate(tasks, folder, jobs=jobs, progress=progress, reused=reused, stale=stale)


def baseline_summary(config: Config, folder: Path, jobs: int) -> list[dict[str, Any]]:
    """Every non-learned placer on the test splits, through ``gnplace evaluate`` (resuming from ``folder``): its summary.

    The run of ``docs/baselines.md``'s first table (``gnplace evaluate ... --budget 200 --plot``), whose figure
    (:data:`BASELINE_FIGURE`: each cluster's step over the best non-learned placer, per placer, geometric mean over
    the families' test graphs) :func:`gnplace.viz.plot_ratios` draws from it.
    """
    from gnplace.evaluate import Task
    from gnplace.evaluate_summary import summarise

    paths = [p for f in config.families for p in test_graphs(f, config.table_per_family)]
    tasks = [Task.with_options(p, c, name, budget=config.baseline_budget)
             for p in paths for c in config.table_clusters for name in config.baseline_placers]
    rows = table_placements(tasks, folder, jobs, "section 1, every non-learned placer")
    return summarise(rows_of(tasks, rows))
