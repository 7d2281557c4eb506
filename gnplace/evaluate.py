"""Compare placers on graphs and clusters: run every (graph, cluster, placer), then summarise.

Each run places the graph, times the placement with the simulator and records one row: step
time (s), lower bound (s), peak memory (bytes), OOM, and the seconds the placer took. Rows are
appended to ``results.csv`` as they finish, so an interrupted evaluation resumes where it stopped.
The summary gives, per family, cluster and placer, geometric means of the step time's ratio to
the best non-learned placer on the same graph and cluster, to the single-device placement and to
the lower bound, the number of OOM placements and the mean placement time (Placeto, Baechi and
Spotlight report the same figures, see ``specs/evaluation.md``).
"""

from __future__ import annotations

import csv
import math
import os
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, fields
from functools import lru_cache
from pathlib import Path
from typing import Any

from gnplace.cluster import load_cluster
from gnplace.exceptions import GnplaceError
from gnplace.graph import OpGraph
from gnplace.graph_io import load_graph
from gnplace.placers import get_placer, make_placer
from gnplace.sim.bounds import lower_bound
from gnplace.sim.simulator import Simulator

__all__ = ["Task", "Row", "collect_graphs", "run_task", "evaluate", "summarise", "write_markdown", "LEARNED"]

#: Placers that learn (their rows are compared, never used as the "best non-learned" reference).
LEARNED = frozenset({"gnplace", "gnplace_finetuned", "placeto", "reinforce", "hierarchical", "spotlight", "post"})


@dataclass(frozen=True)
class Task:
    """One placement to make and time."""

    graph_path: str
    cluster: str
    placer: str
    budget: int | None = None
    seed: int = 0
    mode: str = "default"


@dataclass
class Row:
    """The result of one :class:`Task` (seconds, bytes)."""

    graph: str
    family: str
    graph_path: str
    ops: int
    groups: int
    cluster: str
    placer: str
    seed: int
    step_time_s: float
    bound_s: float
    single_s: float
    peak_memory_bytes: float
    oom: bool
    place_seconds: float
    error: str = ""


def collect_graphs(specs: Sequence[str], *, split: str = "all") -> list[Path]:
    """Graph files named by ``specs``: files, or folders (their manifest's graphs of ``split``, or every ``*.gnpg``).

    Raises:
        GnplaceError: if a path does not exist or a folder holds no graphs.
    """
    from gnplace.datasets import load_manifest

    paths: list[Path] = []
    for spec in specs:
        path = Path(spec)
        if path.is_dir():
            if (path / "manifest.json").exists():
                entries = load_manifest(path)["graphs"]
                found = [path / e["file"] for e in entries if split == "all" or e["split"] == split]
            else:
                found = sorted(path.glob("*.gnpg"))
            if not found:
                raise GnplaceError(f"{path}: no graphs (split {split!r})")
            paths.extend(found)
        elif path.exists():
            paths.append(path)
        else:
            raise GnplaceError(f"{path}: no such graph file or folder")
    return paths


@lru_cache(maxsize=8)
def _graph(path: str) -> OpGraph:
    return load_graph(path)


@lru_cache(maxsize=32)
def _references(path: str, cluster_spec: str, mode: str) -> tuple[float, float]:
    """Lower bound and single-device step time (seconds) of a graph on a cluster, once per worker."""
    graph = _graph(path)
    cluster = load_cluster(cluster_spec)
    sim = Simulator(mode)  # type: ignore[arg-type]
    bound = lower_bound(graph, cluster, times=sim.op_times(graph, cluster)).value
    single = get_placer("single", simulator=sim).place(graph, cluster)
    return bound, sim.time(graph, cluster, single).step_time


def run_task(task: Task) -> Row:
    """Place and time one graph on one cluster with one placer (runs in a worker process)."""
    graph = _graph(task.graph_path)
    cluster = load_cluster(task.cluster)
    sim = Simulator(task.mode)  # type: ignore[arg-type]
    bound, single_s = _references(task.graph_path, task.cluster, task.mode)
    base = dict(graph=graph.name, family=str(graph.meta.get("family", "")), graph_path=task.graph_path,
                ops=graph.num_ops, groups=graph.num_groups, cluster=cluster.name, placer=task.placer, seed=task.seed,
                bound_s=bound, single_s=single_s)
    try:
        placer = make_placer(task.placer, simulator=sim, budget=task.budget)
        start = time.perf_counter()
        placement = placer.place(graph, cluster, seed=task.seed)
        took = time.perf_counter() - start
    except GnplaceError as err:
        return Row(**base, step_time_s=math.nan, peak_memory_bytes=math.nan, oom=False, place_seconds=math.nan,
                   error=str(err).splitlines()[0])
    result = sim.time(graph, cluster, placement)
    return Row(**base, step_time_s=result.step_time, peak_memory_bytes=float(result.peak_memory.max()),
               oom=result.is_oom, place_seconds=took)


def _read_rows(path: Path) -> list[Row]:
    if not path.exists():
        return []
    rows = []
    with path.open(newline="") as handle:
        for raw in csv.DictReader(handle):
            try:
                rows.append(Row(
                    graph=raw["graph"], family=raw["family"], graph_path=raw["graph_path"], ops=int(raw["ops"]),
                    groups=int(raw["groups"]), cluster=raw["cluster"], placer=raw["placer"], seed=int(raw["seed"]),
                    step_time_s=float(raw["step_time_s"]), bound_s=float(raw["bound_s"]), single_s=float(raw["single_s"]),
                    peak_memory_bytes=float(raw["peak_memory_bytes"]), oom=raw["oom"] == "True",
                    place_seconds=float(raw["place_seconds"]), error=raw.get("error", ""),
                ))
            except (KeyError, ValueError, TypeError):
                continue  # a line cut short by an interruption: run that task again
    return rows


def evaluate(
    tasks: Iterable[Task], out: str | os.PathLike[str], *, jobs: int = 1,
    progress: Callable[[Row], None] | None = None,
) -> list[Row]:
    """Run ``tasks`` (in ``jobs`` processes), appending rows to ``out/results.csv``; returns all rows.

    Tasks whose row is already in ``results.csv`` are not run again.
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    csv_path = out / "results.csv"
    done = _read_rows(csv_path)
    seen = {(r.graph_path, r.cluster, r.placer, r.seed) for r in done}
    todo = [t for t in tasks if (t.graph_path, load_cluster(t.cluster).name, t.placer, t.seed) not in seen]
    names = [f.name for f in fields(Row)]
    # rewrite the file with the rows that survived (drops a line cut short by an interruption)
    tmp = csv_path.with_name("results.csv.tmp")
    with tmp.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=names)
        writer.writeheader()
        writer.writerows(asdict(r) for r in done)
    os.replace(tmp, csv_path)
    rows = list(done)

    def record(row: Row) -> None:
        with csv_path.open("a", newline="") as handle:
            csv.DictWriter(handle, fieldnames=names).writerow(asdict(row))
        rows.append(row)
        if progress is not None:
            progress(row)

    if jobs <= 1:
        for task in todo:
            record(run_task(task))
    else:
        import multiprocessing

        with ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
            for row in pool.map(run_task, todo):
                record(row)
    return rows


def _geomean(values: list[float]) -> float:
    values = [v for v in values if math.isfinite(v) and v > 0]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else math.nan


def summarise(rows: Sequence[Row]) -> list[dict[str, Any]]:
    """One summary line per (family, cluster, placer): geometric-mean ratios, OOM count, placement time."""
    best: dict[tuple[str, str], float] = {}
    for r in rows:
        if r.placer not in LEARNED and not r.oom and math.isfinite(r.step_time_s):
            key = (r.graph_path, r.cluster)
            best[key] = min(best.get(key, math.inf), r.step_time_s)
    groups: dict[tuple[str, str, str], list[Row]] = defaultdict(list)
    for r in rows:
        groups[(r.family or "-", r.cluster, r.placer)].append(r)
    summary = []
    for (family, cluster, placer), members in sorted(groups.items()):
        ok = [r for r in members if not r.oom and math.isfinite(r.step_time_s)]
        summary.append({
            "family": family, "cluster": cluster, "placer": placer, "graphs": len(members),
            "vs_best": _geomean([r.step_time_s / best[(r.graph_path, r.cluster)] for r in ok if (r.graph_path, r.cluster) in best]),
            "vs_single": _geomean([r.step_time_s / r.single_s for r in ok]),
            "vs_bound": _geomean([r.step_time_s / r.bound_s for r in ok]),
            "oom": sum(r.oom for r in members),
            "errors": sum(bool(r.error) for r in members),
            "best_count": sum(1 for r in ok if r.step_time_s <= best.get((r.graph_path, r.cluster), math.inf) * (1 + 1e-9)),
            "place_s": sum(r.place_seconds for r in members if math.isfinite(r.place_seconds)) / max(1, len(members)),
        })
    return summary


def write_markdown(summary: Sequence[dict[str, Any]], path: str | os.PathLike[str]) -> Path:
    """Write the summary as a Markdown table (ratios are geometric means; lower is better)."""
    lines = [
        "| family | cluster | placer | graphs | step / best non-learned | step / single device | step / bound | best on | OOM | errors | place s (mean) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for s in summary:
        lines.append(
            f"| {s['family']} | {s['cluster']} | {s['placer']} | {s['graphs']} | {s['vs_best']:.3f} | {s['vs_single']:.3f} "
            f"| {s['vs_bound']:.3f} | {s['best_count']} | {s['oom']} | {s['errors']} | {s['place_s']:.3f} |"
        )
    path = Path(path)
    path.write_text("\n".join(lines) + "\n")
    return path
