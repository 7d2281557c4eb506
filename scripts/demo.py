"""The demo run by ``make demo``: zero-shot placement with the shipped pretrained policy.

The main job of gnplace: the shipped policy (``checkpoints/gnplace-base.ckpt``) places graphs it has
never seen, each family's test graphs and two real models (GPT-2 and ResNet-50, imported from
PyTorch), on two clusters, with no training on them (the decoding ends with a short annealing from
its best candidate); the simulator times its placement beside ``auto`` (the best fast heuristic), one
device and the lower bound. Prints the table and the geometric means per
family, and writes the Gantt chart of one placement to ``out/demo/``.

Usage::

    python scripts/demo.py [--clusters k80x4,tight4] [--samples 16] [--per-family N] [--jobs 2] [--checkpoint PATH]
    python scripts/demo.py --baselines [GRAPH ...]    # every non-learned placer on the example graphs
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from rich.markup import escape
from rich.table import Table

from gnplace import PLACERS, load_cluster, load_graph, lower_bound
from gnplace.cli.common import (
    check_count,
    check_output_folder,
    cluster_list,
    file_path,
    markup_name,
    require_ops,
    run_reporting_errors,
    script_parser,
    stdout_console,
)
from gnplace.cluster import preset_names
from gnplace.exceptions import InvalidArgument
from gnplace.limits import MAX_BUDGET
from gnplace.placers import make_placer
from gnplace.progress import count_bar
from gnplace.sim import Simulator
from gnplace.sim.timer import geomean
from gnplace.units import format_flops, format_seconds
from gnplace.workers import task_mapper

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted((ROOT / "datasets" / "examples").glob("*.gnpg"))
REAL = ("gpt2", "resnet50")


def _zero_shot(task: tuple[str, str, str | None, int]) -> dict[str, Any]:
    """One row: the policy's placement of a graph file on a cluster beside auto, single and the bound."""
    from gnplace.rl.zeroshot import PolicyPlacer
    from gnplace.rl.zeroshot_cli import compare_with_references

    path, cluster_name, checkpoint, samples = task
    sim = Simulator()
    graph, cluster = load_graph(path), load_cluster(cluster_name)
    placer = PolicyPlacer(checkpoint=checkpoint, samples=samples, timer=sim, progress=False)  # a worker's row
    _, row = compare_with_references(graph, cluster, placer, seed=0, timer=sim)
    row["family"] = str(graph.meta.get("family", "real"))
    row["path"] = path
    return row


def summary_cell(rows: list[dict[str, Any]], family: str, cluster: str) -> str:
    """The geometric mean of ``policy / auto`` of ``family``'s rows on ``cluster``, over the placements that fit.

    A placement out of memory (where nothing fits) has no step to compare: it is counted beside the mean, as
    ``gnplace evaluate`` and ``bench.py zeroshot`` count theirs, not averaged in. "-": no row.

    Examples:
        >>> rows = [{"family": "ptb", "cluster": "k80x2", "policy_vs_auto": v, "oom": o} for v, o in ((0.9, False),
        ...         (0.5, True))]
        >>> summary_cell(rows, "ptb", "k80x2"), summary_cell(rows, "nmt", "k80x2")
        ('0.900 (1 OOM)', '-')
    """
    mine = [r for r in rows if r["family"] == family and r["cluster"] == cluster]
    if not mine:
        return "-"
    fits = [r["policy_vs_auto"] for r in mine if not r["oom"]]
    over = len(mine) - len(fits)
    mean = f"{geomean(fits):.3f}" if fits else "none fits"
    return mean + (f" ({over} OOM)" if over and fits else "")


def _names_baselines(arg: str) -> bool:
    """Whether ``arg`` is ``--baselines`` or an abbreviation argparse reads as it (``--base``, ``--b``).

    An abbreviation went to the demo's parser, which took it for ``--baselines`` and ran the whole demo (minutes of
    zero-shot placements) in place of the baselines asked for.

    Examples:
        >>> [_names_baselines(a) for a in ("--baselines", "--base", "--b", "--", "--bx", "--baselines=1", "-b")]
        [True, True, True, False, False, False, False]
    """
    return len(arg) > 2 and "--baselines".startswith(arg)


def main(argv: list[str] | None = None) -> int:
    """Run the demo; returns the exit status."""
    argv = sys.argv[1:] if argv is None else argv
    if any(_names_baselines(a) for a in argv):
        return baselines([a for a in argv if not _names_baselines(a)])
    parser = script_parser(__file__, __doc__)
    parser.add_argument("--clusters", default="k80x4,tight4",
                        help="comma-separated presets or YAML files (default: k80x4,tight4)")
    parser.add_argument("--samples", type=int, default=16,
                        help="sampled placements beside the greedy one (default: 16)")
    parser.add_argument("--checkpoint", default=None, type=file_path,
                        help="policy checkpoint (default: the shipped one)")
    parser.add_argument("--per-family", type=int, default=0,
                        help="the first N test graphs of each family (default: 0, all 8)")
    parser.add_argument("--jobs", "-j", type=int, default=2, help="worker processes (default: 2)")
    parser.add_argument("--out", "-o", default=str(ROOT / "out" / "demo"),
                        help="folder of the Gantt chart (default: out/demo)")
    # taken before parsing (above): listed so that --help names it; --baselines --help lists its own options
    parser.add_argument("--baselines", action="store_true",
                        help="instead, every non-learned placer on GRAPH files (default: the example graphs) on "
                             "every preset (--baselines --help: its options)")
    args = parser.parse_args(argv)
    # one line and 2 on bad input, an unwritable chart folder included; one line and 130 on Ctrl-C
    return run_reporting_errors(_run_demo, args, "demo")


def _run_demo(args: argparse.Namespace) -> int:
    """The demo's placements, table and Gantt chart (``main`` reports its errors)."""
    console = stdout_console(width=150)
    started = time.perf_counter()
    clusters = cluster_list(args.clusters)  # each once: "k80x4,k80x4" placed every graph twice
    if not clusters:
        raise InvalidArgument(f"--clusters names no cluster: {args.clusters!r}")
    if Path(args.out).exists() and not Path(args.out).is_dir():  # refused before the placements, not after
        raise InvalidArgument(f"--out {args.out}: a file, not a folder (the Gantt chart goes into it)")
    check_output_folder(args.out)  # "" (an unset variable) drew the chart into the working folder; FILE/sub, where
    # the chart's folder cannot be made, failed once every graph was placed
    check_count(args.jobs, "--jobs", minimum=1)
    check_count(args.per_family, "--per-family")
    for name in clusters:  # an unknown cluster or a malformed file fails before any worker starts
        load_cluster(name)
    from gnplace.datasets import load_manifest
    from gnplace.graph_io import name_in_file
    from gnplace.rl.zeroshot import PolicyPlacer
    from gnplace.rl.zeroshot_cli import named_by_flag
    from gnplace.viz import plot_timeline

    try:  # a bad checkpoint or count fails here, in one line naming the flag ("PolicyPlacer needs samples ...")
        PolicyPlacer(checkpoint=args.checkpoint, samples=args.samples)
    except InvalidArgument as err:
        raise named_by_flag(err, args) from err
    graphs = []
    for family in ("cifar10", "ptb", "nmt"):
        folder = ROOT / "datasets" / family
        tests = [str(folder / e["file"]) for e in load_manifest(folder)["graphs"] if e["split"] == "test"]
        graphs += tests[:args.per_family] if args.per_family else tests
    graphs += [str(ROOT / "datasets" / "real" / f"{name}.gnpg") for name in REAL]
    tasks = [(g, c, args.checkpoint, args.samples) for c in clusters for g in graphs]
    rows = []
    # minutes of placements (make demo's 52): a bar on a terminal, a line every half minute elsewhere; nothing at all
    # was shown until the table
    with task_mapper(args.jobs) as mapper, count_bar("demo", len(tasks), "placements") as bar:  # one job: here
        for row in mapper(_zero_shot, tasks):
            rows.append(row)
            bar.advance(f"{row['graph']} on {row['cluster']}")
    table = Table(title="Zero-shot placement by the shipped policy (never trained on these graphs), simulated step")
    for col in ("cluster", "graph", "ops", "policy ms", "auto ms", "auto is", "single ms", "bound ms",
                "policy / auto", "place s"):
        table.add_column(col, justify="left" if col in ("cluster", "graph", "auto is") else "right")
    for r in rows:
        ratio = r["policy_vs_auto"]
        colour = "green" if ratio < 0.995 else ("red" if ratio > 1.005 else "white")
        table.add_row(markup_name(r["cluster"]), markup_name(r["graph"]), str(r["ops"]), f"{r['policy'] * 1e3:.3f}",
                      f"{r['auto'] * 1e3:.3f}", r["auto_choice"], f"{r['single'] * 1e3:.3f}",
                      f"{r['bound'] * 1e3:.3f}", f"[{colour}]{ratio:.3f}[/]" + (" OOM" if r["oom"] else ""),
                      f"{r['place_seconds']:.2f}")
    console.print(table)
    summary = Table(title="policy / auto (geometric mean)")
    summary.add_column("family")
    for c in clusters:
        summary.add_column(c, justify="right")
    for family in ("cifar10", "ptb", "nmt", "real"):
        summary.add_row(family, *(summary_cell(rows, family, c) for c in clusters))
    console.print(summary)
    first = rows[0]
    sim = Simulator()
    graph, cluster = load_graph(first["path"]), load_cluster(first["cluster"])
    placement = PolicyPlacer(checkpoint=args.checkpoint, samples=args.samples, timer=sim).place(graph, cluster, seed=0)
    result = sim.time(graph, cluster, placement, timeline=True)
    chart_name = name_in_file(f"gantt_{graph.name}_{cluster.name}", len(".png"))  # a cluster file's name: no path
    chart = plot_timeline(graph, result, Path(args.out) / f"{chart_name}.png",
                          title=f"{graph.name} on {cluster.name}, placed zero-shot by the policy: "
                                f"step {format_seconds(result.step_time)}")
    console.print(f"Gantt chart of {markup_name(graph.name)} on {markup_name(cluster.name)}: {escape(str(chart))}")
    console.print(f"{len(rows)} placements in {format_seconds(time.perf_counter() - started)}")
    return 0


def baselines(argv: list[str]) -> int:
    """Every non-learned placer on the example graphs and every preset (``demo.py --baselines``)."""
    parser = script_parser(__file__, __doc__)
    parser.prog += " --baselines"  # its usage line names the flag that selects it: without it, GRAPH is refused
    parser.add_argument("graphs", nargs="*", default=[str(p) for p in EXAMPLES],
                        help="graph files (default: the example graphs of datasets/examples/)")
    parser.add_argument("--clusters", default=",".join(preset_names()),
                        help="comma-separated presets or YAML files (default: every preset)")
    parser.add_argument("--mode", choices=("default", "placeto"), default="default",
                        help="simulator mode (default: default)")
    parser.add_argument("--placers", default=",".join(sorted(PLACERS.names(learned=False), key=lambda n: (n != "single", n))),
                        help="comma-separated placers (default: every non-learned one, single first)")
    parser.add_argument("--budget", type=int, default=200,
                        help="timer evaluations for search placers (default: 200)")
    parser.add_argument("--exact-time", type=float, default=1.0,
                        help="the exact placer's time limit, in CP-SAT deterministic time units, not wall seconds "
                             "(default: 1.0)")
    args = parser.parse_intermixed_args(argv)  # graphs after an option too: "G1 --clusters k80x2 G2" refused G2
    return run_reporting_errors(_run_baselines, args, "demo")


def _run_baselines(args: argparse.Namespace) -> int:
    """The tables of ``demo.py --baselines`` (``baselines`` reports its errors)."""
    console = stdout_console(width=150)
    # by its flag, as gnplace place does, and whichever placers run: -1 was taken without a word by single and named
    # AnnealingPlacer's own check, not --budget, for a search
    check_count(args.budget, "--budget", minimum=1, maximum=MAX_BUDGET)
    sim = Simulator(args.mode)
    clusters = cluster_list(args.clusters)  # each once: "k80x4,k80x4" placed every graph twice
    if not clusters:  # "" would be read as the current folder, refused as a cluster file
        raise InvalidArgument(f"--clusters names no cluster: {args.clusters!r}")
    # as evaluate reads them: spaces around a name dropped ("single, heft"), empty items too, each once; an unknown
    # one refused before any graph is placed (" heft" was unknown once single had placed every graph on a cluster)
    placers = list(dict.fromkeys(name.strip() for name in args.placers.split(",") if name.strip()))
    if not placers:
        raise InvalidArgument(f"--placers names no placer: {args.placers!r}")
    for name in placers:
        PLACERS.resolve(name)
    for path in args.graphs:
        graph = require_ops(load_graph(path), path)  # no ops: nothing to place, no step to divide by
        table = Table(title=f"{markup_name(graph.name)}: {graph.num_ops} ops, {graph.num_groups} groups, "
                            f"{format_flops(graph.total_flops)} per step (simulator mode: {args.mode})")
        for col in ("cluster", "placer", "step ms", "bound ms", "step / bound", "step / single", "peak MiB (max dev)", "OOM", "place s"):
            table.add_column(col, justify="left" if col in ("cluster", "placer") else "right")
        for cluster_name in clusters:
            cluster = load_cluster(cluster_name)
            bound = lower_bound(graph, cluster, times=sim.cost_model.op_times(graph, cluster)).value
            # the step / single column's reference, whether or not --placers names single (or names it first)
            single_step = sim.time(graph, cluster, make_placer("single").place(graph, cluster, seed=0)).step_time
            for name in placers:
                options = {"time_limit": args.exact_time} if name == "exact" else {}
                start = time.perf_counter()
                placement = make_placer(name, timer=sim, budget=args.budget, **options).place(graph, cluster, seed=0)
                took = time.perf_counter() - start
                result = sim.time(graph, cluster, placement)
                table.add_row(
                    markup_name(cluster.name), markup_name(name), f"{result.step_time * 1e3:.3f}", f"{bound * 1e3:.3f}",
                    ratio(result.step_time, bound), ratio(result.step_time, single_step),
                    f"{result.peak_memory.max() / 2**20:.1f}", "[red]yes[/]" if result.is_oom else "no", f"{took:.3f}",
                )
            table.add_section()
        console.print(table)
    return 0


def ratio(seconds: float, reference: float) -> str:
    """``seconds / reference`` to three places, ``-`` for a reference of 0 (a graph of zero-cost ops)."""
    return f"{seconds / reference:.3f}" if reference > 0 else "-"


if __name__ == "__main__":
    sys.exit(main())
