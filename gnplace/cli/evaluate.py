"""``gnplace evaluate --graphs DIR|FILES --clusters ... --placers ...``: the comparison tables and plots."""

from __future__ import annotations

import argparse
import math
import os
from pathlib import Path
from typing import Any

from gnplace.cli.common import add_option_argument, parse_placer_options
from gnplace.evaluate import Row, Task, collect_graphs, evaluate, place_task, summarise, write_markdown
from gnplace.placers.registry import PLACERS


def add_parser(sub: Any) -> None:
    """Register ``evaluate`` on the subparsers ``sub``."""
    p = sub.add_parser("evaluate", help="run placers on graphs and clusters; write tables and plots",
                       description="Run every placer on every graph and cluster (in parallel processes), write "
                       "results.csv and results.md (geometric-mean ratios to the best non-learned placer, to the "
                       "single device and to the lower bound; OOM counts; placement time). A rerun skips rows whose "
                       "inputs (graph content, cluster, placer options, budget, seed, mode) are unchanged.")
    p.add_argument("--graphs", "-g", nargs="+", required=True, help="graph files or dataset folders")
    p.add_argument("--split", choices=("all", "train", "test"), default="all", help="manifest split of folders")
    p.add_argument("--clusters", "-c", default="k80x2,k80x4", help="comma-separated presets or YAML files")
    p.add_argument("--placers", "-p", default=None, help="comma-separated placers (default: every non-learned one)")
    p.add_argument("--budget", type=int, default=None, help="timer evaluations for search placers")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--checkpoint", default=None,
                   help="policy checkpoint of the placers that take one, e.g. policy (default: the shipped one)")
    p.add_argument("--mode", choices=("default", "placeto"), default="default", help="simulator mode")
    p.add_argument("--jobs", "-j", type=int, default=os.cpu_count() or 1, help="worker processes")
    p.add_argument("--out", "-o", default="out/evaluate", help="output folder (default: out/evaluate)")
    p.add_argument("--plot", action="store_true", help="also draw ratios.png and the best placement's timeline")
    add_option_argument(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Run ``gnplace evaluate``."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    from rich.table import Table

    from gnplace.cluster import load_cluster

    placers = args.placers.split(",") if args.placers else PLACERS.names(learned=False)
    for name in placers:
        PLACERS.resolve(name)  # fail early on an unknown placer
    options = parse_placer_options(args.option, placers)
    for name in placers:
        if "checkpoint" in PLACERS.info(name).accepts:
            from gnplace.rl.zeroshot import SHIPPED_CHECKPOINT

            # named in the options, so a row is recomputed when the checkpoint's content changes
            options.setdefault(name, {})["checkpoint"] = str(args.checkpoint or SHIPPED_CHECKPOINT)
    clusters = [c for c in args.clusters.split(",") if c]
    for c in clusters:
        load_cluster(c)  # fail early on a bad cluster
    graphs = collect_graphs(args.graphs, split=args.split)
    tasks = [Task.with_options(str(g), c, p, options.get(p), budget=args.budget, seed=args.seed, mode=args.mode)
             for g in graphs for c in clusters for p in placers]
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn()) as bar:
        job = bar.add_task("evaluate", total=len(tasks))
        rows = evaluate(tasks, args.out, jobs=args.jobs,
                        progress=lambda r: bar.update(job, advance=1, description=f"{r.graph} {r.cluster} {r.placer}"))
        bar.update(job, completed=len(tasks))
    summary = summarise(rows)
    md = write_markdown(summary, Path(args.out) / "results.md")
    table = Table(title=f"{len(graphs)} graphs x {len(clusters)} clusters x {len(placers)} placers (geometric means)")
    for col in ("family", "cluster", "placer", "step/best", "step/single", "step/bound", "best on", "OOM", "place s"):
        table.add_column(col, justify="left" if col in ("family", "cluster", "placer") else "right")
    for s in summary:
        table.add_row(s["family"], s["cluster"], s["placer"], f"{s['vs_best']:.3f}", f"{s['vs_single']:.3f}",
                      f"{s['vs_bound']:.3f}", f"{s['best_count']}/{s['graphs']}", str(s["oom"]), f"{s['place_s']:.3f}")
    Console(width=160).print(table)
    print(f"wrote {Path(args.out) / 'results.csv'} and {md}")
    if args.plot:
        from gnplace.viz import plot_ratios

        print(f"wrote {plot_ratios(summary, Path(args.out) / 'ratios.png')}")
        print(f"wrote {_plot_best_timeline(rows, Path(args.out) / 'best_timeline.png')}")
    return 0


def _plot_best_timeline(rows: list[Row], path: Path) -> Path:
    """Gantt chart of the fastest placement that fits for the first graph and cluster of ``rows``, made again."""
    from gnplace.sim.simulator import Simulator
    from gnplace.viz import plot_timeline

    first = rows[0]
    candidates = [r for r in rows if r.graph_path == first.graph_path and r.cluster == first.cluster
                  and not r.oom and math.isfinite(r.step_time_s)]
    best = min(candidates or [first], key=lambda r: r.step_time_s)
    task = best.task()
    graph, cluster, placement, _ = place_task(task)
    result = Simulator(task.mode).time(graph, cluster, placement, timeline=True)  # type: ignore[arg-type]
    return plot_timeline(graph, result, path, title=f"{graph.name} on {cluster.name}: best placer {best.placer}")
