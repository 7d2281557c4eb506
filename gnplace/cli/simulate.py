"""``gnplace simulate GRAPH --cluster C --placer NAME|placement.json``: time one placed step."""

from __future__ import annotations

import argparse
from typing import Any

from gnplace.cli.common import (
    add_input_shape_argument,
    add_optimizer_argument,
    check_not_input,
    check_output_file,
    counted,
    file_path,
    input_shapes,
    markup_name,
    names_placement_file,
    print_json,
    require_ops,
    resolve_placement,
    stdout_console,
    whole_number,
    writing,
)
from gnplace.cluster import load_cluster
from gnplace.exceptions import InvalidArgument
from gnplace.importers.sources import load_graph_source
from gnplace.placement import recorded_mode, recorded_placer, recorded_preset
from gnplace.placers.registry import PLACERS
from gnplace.sim.bounds import lower_bound
from gnplace.sim.simulator import SimMode, Simulator
from gnplace.units import format_bytes, format_seconds
from gnplace.viz import IMAGE_SUFFIXES

TIMELINE_SUFFIXES = IMAGE_SUFFIXES
"""The file types ``--timeline`` can draw (matplotlib's formats, by suffix)."""

DEFAULT_CLUSTER = "k80x4"
"""The preset timed on when ``--cluster`` is not given and ``--placer`` is no placement file of a preset."""


def default_cluster(placer: str) -> str:
    """The cluster to time ``placer`` on without ``--cluster``: the preset its placement file records, else k80x4.

    A placement file made for a cluster file (no preset) is timed on k80x4 as before, where its device
    names must exist.
    """
    recorded = recorded_preset(placer) if placer not in PLACERS else None
    return recorded if recorded is not None else DEFAULT_CLUSTER


def default_mode(placer: str) -> SimMode:
    """The simulator mode to time ``placer`` in without ``--mode``: the one its placement file records, else default.

    ``gnplace place --mode placeto -o p.json`` placed for Placeto's simulator; timing ``p.json`` in the
    default mode would score it by costs it was not chosen for.
    """
    recorded = recorded_mode(placer) if placer not in PLACERS else None
    return recorded if recorded is not None else "default"


def add_parser(sub: Any) -> None:
    """Register ``simulate`` on the subparsers ``sub``."""
    p = sub.add_parser("simulate", help="simulate one training step of a placed graph",
                       description="Simulate one training step of GRAPH placed on a cluster; print step time, "
                       "lower bound, utilisation and memory of every device.")
    p.add_argument("graph", type=file_path,
                   help="graph file, ONNX file or MODULE:FACTORY (a function returning a module and inputs)")
    p.add_argument("--cluster", "-c", help="preset name or YAML file (default: the preset a placement.json "
                   f"was made for, else {DEFAULT_CLUSTER})")
    p.add_argument("--placer", "-p", default="single", help="placer name or placement.json (default: single)")
    p.add_argument("--mode", choices=("default", "placeto"), default=None,
                   help="simulator mode (default: the mode a placement.json was made in, else default)")
    p.add_argument("--seed", type=whole_number, default=None, help="seed for stochastic placers (default: 0)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    p.add_argument("--timeline", metavar="PNG",
                   help="also draw a Gantt chart of the step to this file (.png, .pdf, .svg, ...)")
    add_input_shape_argument(p)
    add_optimizer_argument(p)  # a MODULE:FACTORY was timed as SGD whatever the placement was made for
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Run ``gnplace simulate``."""
    if not args.placer.strip():  # an unset variable: read as the path "", the current folder (".: is a folder")
        raise InvalidArgument(f"--placer {args.placer!r} is empty; name a placer or a placement file")
    if args.timeline is not None:
        check_output_file(args.timeline, "--timeline", TIMELINE_SUFFIXES)
        check_not_input(args.timeline, args.graph, "--timeline", others=(args.cluster, args.placer))
    if args.seed is not None and names_placement_file(args.placer):  # nothing to seed: it was ignored
        raise InvalidArgument(f"--seed seeds a placer, and --placer {args.placer} is a placement file: leave it out")
    source = load_graph_source(args.graph, input_shapes=input_shapes(args), optimizer=args.optimizer)
    graph = require_ops(source, args.graph)
    cluster = load_cluster(args.cluster if args.cluster is not None else default_cluster(args.placer))
    mode = args.mode or default_mode(args.placer)
    sim = Simulator(mode)
    placer_name, placement = resolve_placement(graph, cluster, args.placer, seed=args.seed or 0, timer=sim)
    placement_file = args.placer if names_placement_file(args.placer) else None
    # a placement file's placer is the one it records (None: it records none), its file name is placement_file's
    placer = recorded_placer(args.placer) if placement_file is not None else placer_name
    result = sim.time(graph, cluster, placement, timeline=bool(args.timeline))
    bound = lower_bound(graph, cluster, times=sim.op_times(graph, cluster))  # the matrix it timed with
    report = {
        "graph": graph.name,
        "ops": graph.num_ops,  # as inspect, import, evaluate's rows, finetune and place name them
        "groups": graph.num_groups,
        "num_ops": graph.num_ops,  # the names before: kept for the scripts that read them
        "num_groups": graph.num_groups,
        "cluster": cluster.name,
        "placer": placer,
        "placement_file": placement_file,
        "mode": mode,
        **result.to_dict(),
        "bound_s": bound.value,
        "critical_path_s": bound.critical_path,
        "work_bound_s": bound.work,
        "ratio_to_bound": result.step_time / bound.value if bound.value > 0 else None,
    }
    if args.timeline:
        from gnplace.viz import plot_timeline

        with writing(args.timeline):
            title = f"{graph.name} on {cluster.name} ({placer or placer_name})"
            plot_timeline(graph, result, args.timeline, title=title)
        report["timeline"] = str(args.timeline)
    if args.json:
        print_json(report)
        return 0
    _print_table(report)
    return 0


def _placed_by(report: dict[str, Any]) -> str:
    """What placed the step, as markup: ``placer heft``, ``placement p.json (placer heft)`` or ``placement p.json``."""
    placer = f"placer [bold]{markup_name(report['placer'])}[/]" if report["placer"] is not None else ""
    if report["placement_file"] is None:
        return placer
    placed = f"placement [bold]{markup_name(report['placement_file'])}[/]"
    return f"{placed} ({placer})" if placer else placed


def _print_table(report: dict[str, Any]) -> None:
    from rich.markup import escape
    from rich.table import Table

    console = stdout_console()
    # names as they are: rich reads "[red]" in them as markup (dropped) and "[/]" fails
    console.print(
        f"[bold]{markup_name(report['graph'])}[/] ({counted(report['ops'], 'op')}, "
        f"{counted(report['groups'], 'group')}) on "
        f"[bold]{markup_name(report['cluster'])}[/], {_placed_by(report)}, mode {report['mode']}"
    )
    console.print(
        f"step time [bold]{format_seconds(report['step_time_s'])}[/]   bound {format_seconds(report['bound_s'])} "
        f"(critical path {format_seconds(report['critical_path_s'])}, work {format_seconds(report['work_bound_s'])})   "
        + (f"step/bound {report['ratio_to_bound']:.3f}" if report["ratio_to_bound"] is not None else "step/bound -")
        + ("   [red bold]OUT OF MEMORY[/]" if report["oom"] else "")
    )
    table = Table()
    for col in ("device", "busy", "utilisation", "peak memory", "capacity", "OOM"):
        # a name too long for its share of the width wraps in its cell: cut with "…", two devices read alike
        table.add_column(col, justify="left" if col == "device" else "right",
                         overflow="fold" if col == "device" else "ellipsis")
    for dev in report["devices"]:
        table.add_row(
            markup_name(dev["name"]), format_seconds(dev["busy_s"]), f"{dev['utilisation'] * 100:.1f}%",
            format_bytes(dev["peak_memory_bytes"]), format_bytes(dev["memory_capacity_bytes"]),
            "[red]yes[/]" if dev["oom"] else "no",
        )
    console.print(table)
    if "timeline" in report:
        console.print(f"timeline written to {escape(report['timeline'])}")
