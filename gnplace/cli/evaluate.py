"""``gnplace evaluate --graphs DIR|FILES --clusters ... --placers ...``: the comparison tables and plots."""

from __future__ import annotations

import argparse
import math
import os
import sys
from pathlib import Path
from typing import Any

from gnplace.cli.common import (
    add_option_argument,
    check_count,
    check_not_input,
    check_output_file,
    check_output_folder,
    checkpoint_readers,
    cluster_list,
    counted,
    file_path,
    markup_name,
    one_line,
    parse_placer_options,
    printable_name,
    stdout_console,
    whole_number,
    writing,
)
from gnplace.evaluate import (
    Row,
    Task,
    cluster_slot,
    evaluate,
    kept_placement,
    rows_made_by,
    stale_note,
    unplaced,
)
from gnplace.evaluate_summary import summarise, write_markdown
from gnplace.exceptions import InvalidArgument
from gnplace.graph_files import collect_graphs
from gnplace.graph_io import refuse_link
from gnplace.limits import MAX_BUDGET
from gnplace.placers.registry import PLACERS
from gnplace.progress import count_bar
from gnplace.workers import available_cores


def default_placers() -> list[str]:
    """The placers ``evaluate`` runs unless ``--placers`` names them: every non-learned one but ``exact``.

    ``exact`` refuses a graph of more than 60 colocation groups (``max_groups``), every shipped family's test graph
    among them, so with it the default run of ``gnplace evaluate -g datasets/cifar10`` ended "1 of 11 runs failed",
    exit 1; it runs where named (``--placers exact``, ``scripts/bench.py exact``).
    """
    return [name for name in PLACERS.names(learned=False) if name != "exact"]


def add_parser(sub: Any) -> None:
    """Register ``evaluate`` on the subparsers ``sub``."""
    p = sub.add_parser("evaluate", help="run placers on graphs and clusters; write tables and plots",
                       description="Run every placer on every graph and cluster (in parallel processes), write "
                       "results.csv and results.md (geometric-mean ratios to the best non-learned placer, to the "
                       "single device and to the lower bound; OOM counts; placement time). A rerun skips rows whose "
                       "inputs (graph content, cluster, placer options, budget, seed, mode) are unchanged. A run "
                       "that fails is a row with its error; if any failed, one line on stderr says so and the exit "
                       "status is 1; a memory budget no placement can fit (as gnplace place refuses it) is 2, once "
                       "every row is written (other bad input: 2, before any run); a graph every placer ran out of "
                       "memory on a cluster is a warning.")
    p.add_argument("--graphs", "-g", nargs="+", required=True, help="graph files or dataset folders")
    p.add_argument("--split", choices=("all", "train", "test"), default="all",
                   help="manifest split of folders (default: all)")
    p.add_argument("--clusters", "-c", default="k80x2,k80x4",
                   help="comma-separated presets or YAML files (default: k80x2,k80x4)")
    p.add_argument("--placers", "-p", default=None,
                   help="comma-separated placers (default: every non-learned one but exact, which refuses graphs of "
                        "more than 60 groups: name it to run it)")
    p.add_argument("--budget", type=int, default=None,
                   help=f"timer evaluations for search placers (1 to {MAX_BUDGET:,}; default: each one's own)")
    p.add_argument("--seed", type=whole_number, default=0, help="seed of every run (default: 0)")
    p.add_argument("--checkpoint", default=None, type=file_path,
                   help="a checkpoint for the placers that read its kind (a policy's: policy, finetune; a Placeto "
                        "one: placeto); the others keep their default (the shipped policy, Placeto from scratch)")
    p.add_argument("--mode", choices=("default", "placeto"), default="default",
                   help="simulator mode (default: default)")
    p.add_argument("--jobs", "-j", type=int, default=available_cores(),
                   help="worker processes (default: the cores this process may run on, its CPU affinity)")
    p.add_argument("--out", "-o", default="out/evaluate", help="output folder (default: out/evaluate)")
    p.add_argument("--plot", action="store_true",
                   help="also draw ratios.png and best_timeline.png, the timeline of the best placement of the first "
                        "graph and cluster (their placements are kept in OUT/placements/, so it is not made again)")
    add_option_argument(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Run ``gnplace evaluate``."""
    from rich.table import Table

    from gnplace.cluster import load_cluster

    check_count(args.jobs, "--jobs", minimum=1)
    check_count(args.budget, "--budget", minimum=1, maximum=MAX_BUDGET)  # as a placer's own check, whichever run
    check_output_folder(args.out)
    for name in _outputs(args.plot):  # a folder in a file's place fails here, not once every run is done
        check_output_file(Path(args.out) / name, "--out")
        refuse_link(Path(args.out) / name, "evaluate")
    # names as listed, spaces around them dropped ("single, heft"), each once
    placers = list(dict.fromkeys(p.strip() for p in args.placers.split(",") if p.strip())) \
        if args.placers is not None else default_placers()
    if not placers:
        raise InvalidArgument(f"--placers {args.placers!r} names no placer")
    for name in placers:
        PLACERS.resolve(name)  # fail early on an unknown placer
    if args.budget is not None and not any("budget" in PLACERS.info(name).accepts for name in placers):
        takers = ", ".join(n for n in PLACERS.names() if "budget" in PLACERS.info(n).accepts)
        raise InvalidArgument(f"--budget: none of the placers run ({', '.join(placers)}) spends an evaluation budget "
                              f"(these do: {takers})")  # never ignored silently, as with gnplace place
    options = parse_placer_options(args.option, placers)
    for name, given in options.items():
        for key in ("out", "resume"):  # one folder holds one search's checkpoints; evaluate runs many searches
            if key in given:
                raise InvalidArgument(f"-O {name}.{key}: evaluate runs {name} on every graph and cluster, and a "
                                      "checkpoint folder holds one search; checkpoint a search with gnplace place "
                                      "(evaluate keeps each finished row and reuses it on a rerun)")
        if given.get("progress") is True:  # turned off in every run (one bar of the rows): it did nothing
            raise InvalidArgument(f"-O {name}.progress=true: evaluate shows one bar of its rows and turns each "
                                  "placer's own off; leave it out, or show one search's with gnplace place")
    if args.checkpoint:  # to the placers that read its format; the others keep their own (evaluate keys rows by both)
        for name in checkpoint_readers(args.checkpoint, placers):
            options.setdefault(name, {})["checkpoint"] = str(args.checkpoint)
    clusters = cluster_list(args.clusters)  # a cluster named twice (a file by two paths) is one cluster
    if not clusters:
        raise InvalidArgument(f"--clusters {args.clusters!r} names no cluster")
    for c in clusters:
        load_cluster(c)  # fail early on a bad cluster
    if args.split != "all" and not any(g.strip() and Path(g).is_dir() for g in args.graphs):  # it was ignored
        raise InvalidArgument(f"--split {args.split} chooses among a folder's graphs, and only graph files are named: "
                              "name the folder, or leave --split out")
    graphs = collect_graphs(args.graphs, split=args.split)
    for name in _outputs(args.plot) if graphs else ():  # an input kept in --out under an output's name was
        check_not_input(Path(args.out) / name, str(graphs[0]), "--out",
                        others=[*graphs[1:], *clusters, args.checkpoint])  # overwritten by it
    tasks = [Task.with_options(str(g), c, p, options.get(p), budget=args.budget, seed=args.seed, mode=args.mode)
             for g in graphs for c in clusters for p in placers]
    drawn = _slot_of(tasks[0].graph_path, tasks[0].cluster)  # --plot draws the best run of the first graph, cluster
    keep = (lambda t: _slot_of(t.graph_path, t.cluster) == drawn) if args.plot else None
    with count_bar("evaluate", len(tasks), "rows") as bar:  # a log file: a line every half minute instead
        def resume_at(count: int) -> None:  # a rerun starts its count at the rows saved before
            if count:
                bar.done_before(count)
                bar.note(f"reusing {counted(count, 'saved row')} of {Path(args.out) / 'results.csv'}")

        def dropping(count: int) -> None:  # saved rows of files since changed went without a word
            bar.note(stale_note(count, Path(args.out) / "results.csv"))

        rows = evaluate(tasks, args.out, jobs=args.jobs, reused=resume_at, keep_placements=keep, stale=dropping,
                        progress=lambda r: bar.advance(f"{r.graph} {r.cluster} {r.placer}"))
    current = rows_made_by(tasks, rows)  # by key, graph file and cluster: a copy of a graph file has the same key
    failed = [r for r in current if r.error]
    summary = summarise(rows)
    with writing(Path(args.out) / "results.md"):
        md = write_markdown(summary, Path(args.out) / "results.md")
    table = Table(title=_title(len(graphs), len(clusters), len(placers), len(rows) - len(current)))
    for col in ("family", "cluster", "placer", "step/best", "step/single", "step/bound", "best on", "OOM", "errors",
                "place s"):
        names = ("family", "cluster", "placer")  # a name too long wraps in its cell, not cut with "…"
        table.add_column(col, justify="left" if col in names else "right",
                         overflow="fold" if col in names else "ellipsis")
    for s in summary:
        # names as they are: rich read "[placeto]" and "[start=heft]" as markup (dropped) and "[/x]" failed
        table.add_row(markup_name(s["family"]), markup_name(s["cluster"]), markup_name(s["label"]),
                      f"{s['vs_best']:.3f}", f"{s['vs_single']:.3f}", f"{s['vs_bound']:.3f}",
                      f"{s['best_count']}/{s['runs']}", str(s["oom"]), str(s["errors"]), f"{s['place_s']:.3f}")
    stdout_console(width=160).print(table)
    print(f"wrote {Path(args.out) / 'results.csv'} and {md}")
    if args.plot:
        from gnplace.viz import plot_ratios

        ratios, best_timeline = Path(args.out) / "ratios.png", Path(args.out) / "best_timeline.png"
        with writing(ratios):
            if summary:
                print(f"wrote {plot_ratios(summary, ratios)}")
            else:  # every run failed: no ratio to draw, and an earlier run's figure would describe other results
                ratios.unlink(missing_ok=True)
        with writing(best_timeline):
            timeline = _plot_best_timeline(current, tasks[0], Path(args.out), best_timeline)
            if timeline is None:  # nothing placed: an earlier run's chart would pass for this run's
                best_timeline.unlink(missing_ok=True)
        print(f"wrote {timeline}" if timeline else "no timeline: no run placed the first graph and cluster")
    return _report_failures(failed, unplaced(current), len(tasks),
                            Path(args.out) / "results.csv")


def _report_failures(failed: list[Row], over: list[tuple[Row, str | None]], runs: int, csv_path: Path) -> int:
    """Say on stderr what failed or fits nowhere, once every row is written; the exit status.

    An impossible memory budget and failed runs are one ``gnplace: error:`` line; a graph that every placer
    asked ran out of memory on a cluster, where a placement might fit, is one ``gnplace: warning:`` line: an
    out-of-memory row is a measurement, as for one placer alone (``single`` on a small GPU), not a failure.

    Args:
        failed (list[Row]): the rows of this run whose placer failed.
        over (list[tuple[Row, str | None]]): the graph and cluster pairs no row placed within memory
            (:func:`~gnplace.evaluate.unplaced`).
        runs (int): the rows of this run.
        csv_path (Path): the results file the rows are in.

    Returns:
        int: 2 where a memory budget is impossible (as ``gnplace place`` refuses it), 1 where a run failed, else 0.
    """
    def more(pairs: list[Any]) -> str:
        return f" (and {len(pairs) - 1} more graph and cluster pairs)" if len(pairs) > 1 else ""

    tried = [r for r, short in over if short is None]
    if tried:
        r = tried[0]
        print(f"gnplace: warning: no placer fit {r.graph!r} in the memory of {r.cluster!r} (each placement timed ran "
              f"out of memory){more(tried)}; the rows are in {csv_path}", file=sys.stderr)
    parts = []
    impossible = [(r, short) for r, short in over if short is not None]
    if impossible:
        r, short = impossible[0]
        parts.append(f"no placement of {r.graph!r} fits the memory of {r.cluster!r}: {short}{more(impossible)}")
    if failed:
        first = failed[0]
        # names as they are in a file someone shared: escaped, so that one holding ESC or a newline neither drives
        # the terminal nor splits the line in two (the error column's message quotes them already)
        parts.append(f"{len(failed)} of {runs} runs failed (see the error column of {csv_path}); first: "
                     f"{printable_name(first.placer)} on {printable_name(first.graph)} "
                     f"{printable_name(first.cluster)}: {one_line(first.error)}")
    elif impossible:
        parts[-1] += f"; the rows are in {csv_path}"
    if not parts:
        return 0
    print(("gnplace: error: " if impossible else "gnplace: ") + "; ".join(parts), file=sys.stderr)
    return 2 if impossible else 1


def _title(graphs: int, clusters: int, placers: int, earlier: int) -> str:
    """The printed table's title: this run's graphs, clusters and placers, and the earlier runs' rows it holds too.

    The table summarises every row of ``results.csv``; a rerun with other placers or graphs keeps the rows saved
    before, so its table listed placers that the title's count ("1 graphs x 1 clusters x 1 placers") left out.
    """
    title = f"{counted(graphs, 'graph')} x {counted(clusters, 'cluster')} x {counted(placers, 'placer')}"
    more = f", and {counted(earlier, 'row')} of earlier runs kept in results.csv" if earlier else ""
    return f"{title}{more} (geometric means)"


def _outputs(plot: bool) -> list[str]:
    """The files ``gnplace evaluate`` writes in its output folder (with ``--plot``, the figures too)."""
    return ["results.csv", "results.md", *(["ratios.png", "best_timeline.png"] if plot else [])]


def _plot_best_timeline(rows: list[Row], first: Task, out: Path, path: Path) -> Path | None:
    """Gantt chart of the fastest placement that fits among ``rows`` of the graph and cluster of ``first``.

    ``rows`` are this run's (a results file may hold other runs' rows, of graphs since moved or changed). The
    placement drawn is the one the best row timed, kept by :func:`~gnplace.evaluate.evaluate` in ``out``: not
    made again (seconds to minutes for a learned placer, whose placement made again on another machine may
    differ from the one timed). None (nothing drawn) when every run of that graph and cluster failed.
    """
    from gnplace.cluster import load_cluster
    from gnplace.graph_io import load_graph
    from gnplace.placement import load_placement
    from gnplace.sim.simulator import Simulator
    from gnplace.viz import plot_timeline

    mine = first.graph_path, first.cluster
    placed = [r for r in rows if not r.error and _slot_of(r.graph_path, r.cluster_spec) == _slot_of(*mine)]
    if not placed:
        return None
    candidates = [r for r in placed if not r.oom and math.isfinite(r.step_time_s)]
    best = min(candidates or placed, key=lambda r: r.step_time_s)
    task = best.task()
    graph, cluster = load_graph(task.graph_path), load_cluster(task.cluster)
    placement = load_placement(kept_placement(out, best.key), graph, cluster, warn_other_name=False)
    result = Simulator(task.mode).time(graph, cluster, placement, timeline=True)  # type: ignore[arg-type]
    return plot_timeline(graph, result, path, title=f"{graph.name} on {cluster.name}: best placer {best.placer}")


def _slot_of(graph_path: str, cluster: str) -> tuple[str, str]:
    """A graph file and cluster as rows store them (absolute paths; a preset by name)."""
    return os.path.realpath(graph_path), cluster_slot(cluster)
