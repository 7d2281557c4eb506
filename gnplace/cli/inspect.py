"""``gnplace inspect GRAPH [--cluster C]``: what a graph holds and what it costs on one device."""

from __future__ import annotations

import argparse
from collections import Counter
from typing import Any

import numpy as np

from gnplace.cli.common import (
    add_input_shape_argument,
    add_optimizer_argument,
    counted,
    file_path,
    input_shapes,
    markup_name,
    print_json,
    stdout_console,
    whole_number,
)
from gnplace.cluster import load_cluster
from gnplace.graph import PHASES, OpGraph, exact_sum
from gnplace.importers.sources import load_graph_source
from gnplace.placers.single import SinglePlacer
from gnplace.sim.bounds import critical_path
from gnplace.sim.simulator import Simulator
from gnplace.units import format_bytes, format_flops, format_seconds


def add_parser(sub: Any) -> None:
    """Register ``inspect`` on the subparsers ``sub``."""
    p = sub.add_parser("inspect", help="summarise a graph", description="Summarise GRAPH: ops by phase and type, "
                       "FLOP, bytes, groups, critical path and simulated single-device step time on a cluster.")
    p.add_argument("graph", type=file_path,
                   help="graph file, ONNX file or MODULE:FACTORY (a function returning a module and inputs)")
    p.add_argument("--cluster", "-c", default="k80x4", help="preset or YAML file (default: k80x4)")
    p.add_argument("--top", type=whole_number, default=10, help="op types to list (default: 10)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    add_input_shape_argument(p)
    add_optimizer_argument(p)  # a MODULE:FACTORY was counted with SGD's update and state whatever was asked
    p.set_defaults(run=run)


def summarise(graph: OpGraph, cluster_spec: str, top: int = 10) -> dict[str, Any]:
    """The numbers ``gnplace inspect`` prints (seconds, bytes, FLOP)."""
    cluster = load_cluster(cluster_spec)
    sim = Simulator()
    placement = SinglePlacer(sim).place(graph, cluster)
    result = sim.time(graph, cluster, placement)
    types = Counter(graph.op_types)
    flops_by_type: Counter[str] = Counter()
    for t, f in zip(graph.op_types, graph.flops.tolist()):
        flops_by_type[t] += f
    return {
        "graph": graph.name,
        "meta": graph.meta,
        "ops": graph.num_ops,
        "edges": graph.num_edges,
        "groups": graph.num_groups,
        "ops_by_phase": {p: int((graph.phase == i).sum()) for i, p in enumerate(PHASES)},
        "flops_by_phase": {p: float(graph.flops[graph.phase == i].sum()) for i, p in enumerate(PHASES)},
        "top_op_types": [{"type": t, "count": c, "flops": flops_by_type[t]} for t, c in types.most_common(top)],
        "total_flops": graph.total_flops,
        "param_bytes": graph.total_param_bytes,
        "activation_bytes": exact_sum(graph.out_bytes),
        "edge_bytes": exact_sum(graph.edge_bytes),
        "cluster": cluster.name,
        "critical_path_s": critical_path(graph, sim.op_times(graph, cluster)),
        "single_device": cluster.device_names[int(placement.devices[0])] if graph.num_ops else None,
        "single_device_step_s": result.step_time,
        "single_device_peak_bytes": float(result.peak_memory.max()),
        "single_device_oom": result.is_oom,
        "largest_group_ops": int(np.bincount(graph.group).max()) if graph.num_ops else 0,
    }


def run(args: argparse.Namespace) -> int:
    """Run ``gnplace inspect``."""
    graph = load_graph_source(args.graph, input_shapes=input_shapes(args), optimizer=args.optimizer)
    report = summarise(graph, args.cluster, args.top)
    if args.json:
        print_json(report)
        return 0
    from rich.table import Table

    console = stdout_console()  # names as they are: rich reads "[red]" in them as markup (dropped) and "[/]" fails
    console.print(f"[bold]{markup_name(report['graph'])}[/]: {counted(report['ops'], 'op')}, "
                  f"{counted(report['edges'], 'edge')}, {counted(report['groups'], 'group')} "
                  f"(largest {counted(report['largest_group_ops'], 'op')})")
    phases = ", ".join(f"{p} {counted(n, 'op')} / {format_flops(report['flops_by_phase'][p])}"
                       for p, n in report["ops_by_phase"].items())
    console.print(f"by phase: {phases}")
    console.print(f"total {format_flops(report['total_flops'])}; "
                  f"parameters + optimizer state {format_bytes(report['param_bytes'])}; "
                  f"outputs {format_bytes(report['activation_bytes'])}; "
                  f"edges carry {format_bytes(report['edge_bytes'])}")
    oom = " [red]OUT OF MEMORY[/]" if report["single_device_oom"] else ""
    if report["single_device"] is None:  # a graph of no ops (a TypeError from escape(None) before)
        console.print(f"on {markup_name(report['cluster'])}: no ops, so no step to time")
    else:
        console.print(f"on {markup_name(report['cluster'])}: "
                      f"critical path {format_seconds(report['critical_path_s'])}; "
                      f"single device ({markup_name(report['single_device'])}) step "
                      f"{format_seconds(report['single_device_step_s'])}, "
                      f"peak {format_bytes(report['single_device_peak_bytes'])}{oom}")
    if not report["top_op_types"]:  # --top 0, or no op: a table of headers alone
        console.print("op types: none listed" if report["ops"] else "op types: none (no ops)")
        return 0
    table = Table(title="op types")
    for col in ("type", "count", "FLOP"):
        table.add_column(col, justify="left" if col == "type" else "right",
                         overflow="fold" if col == "type" else "ellipsis")  # a name too long wraps, not cut
    for row in report["top_op_types"]:
        table.add_row(markup_name(row["type"]), str(row["count"]), format_flops(row["flops"]))
    console.print(table)
    return 0
