"""The fast placers: how far each is from the exact placer on small graphs, and how long each takes."""

from __future__ import annotations

import argparse
import functools
from typing import Any

from gnplace.limits import json_text
from gnplace.sim import Simulator
from gnplace.sim.timer import geomean
from gnplace.toy import layered_graph

from .common import (
    DATASETS,
    add_command,
    add_per_family_argument,
    check_clusters,
    check_families,
    check_placers,
    median_seconds,
    test_graphs,
)

#: The fast placers both benchmarks run by default.
FAST_PLACERS = ["single", "round_robin", "expert", "metis", "heft", "m_etf", "m_sct"]


def bench_exact(args: argparse.Namespace) -> list[dict[str, Any]]:
    """How far each heuristic is from the exact placer on small graphs (coarsened dataset graphs, examples)."""
    import math

    from gnplace.cluster import load_cluster
    from gnplace.coarsen import coarsen
    from gnplace.exceptions import InvalidArgument
    from gnplace.graph_io import load_graph
    from gnplace.placers import get_placer

    check_placers(args.placers)  # refused before the first exact solve, not after it
    check_clusters(args.clusters)
    check_families(args.families)
    if not (math.isfinite(args.time_limit) and args.time_limit > 0):  # was blamed on ExactPlacer's max_groups too
        raise InvalidArgument(f"--time-limit must be a finite number > 0 of CP-SAT deterministic time units "
                              f"(not wall seconds), got {args.time_limit}")
    paths = [p for family in args.families for p in test_graphs(family, args.per_family or None)]
    rows = []
    for cluster_name in args.clusters:
        cluster = load_cluster(cluster_name)
        graphs = [load_graph(p) for p in sorted((DATASETS / "examples").glob("*.gnpg"))]
        graphs += [coarsen(load_graph(p), args.groups, cluster).graph for p in paths]
        for graph in graphs:
            sim = Simulator()
            exact: Any = get_placer("exact", time_limit=args.time_limit, timer=sim)  # last_status: ExactPlacer's
            exact_step = sim.time(graph, cluster, exact.place(graph, cluster, seed=0)).step_time
            row: dict[str, Any] = dict(graph=graph.name, cluster=cluster.name, groups=graph.num_groups,
                                       status=exact.last_status, gap=exact.last_gap, exact_ms=exact_step * 1e3)
            for name in args.placers:
                result = sim.time(graph, cluster, get_placer(name).place(graph, cluster, seed=0))
                row[name], row[f"{name}_oom"] = result.step_time / exact_step, bool(result.is_oom)
            rows.append(row)
            print(json_text(row), flush=True)
    return rows


def bench_placers(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Median wall seconds of each placer on a random layered graph (first call excluded)."""
    from gnplace.cluster import load_cluster
    from gnplace.placers import get_placer

    check_placers(args.placers)  # refused before the first placer is timed, not after it
    graph = layered_graph(args.ops, seed=0)
    cluster = load_cluster(args.cluster)
    rows = []
    for name in args.placers:
        placer = get_placer(name)
        seconds = median_seconds(functools.partial(placer.place, graph, cluster, seed=0), args.repeat)
        rows.append(dict(placer=name, ops=graph.num_ops, cluster=cluster.name, seconds=seconds))
        print(f"{name}: {graph.num_ops} ops on {cluster.name} placed in {seconds:.3f} s (median of {args.repeat})", flush=True)
    return rows


def run_exact(args: argparse.Namespace) -> int:
    """``exact``: each fast placer's step time over the exact placer's (CP-SAT) on small graphs.

    The graphs are the shipped examples and the first ``--per-family`` test graphs of each of
    ``--families`` coarsened to ``--groups`` groups (``--families`` with no name: the examples alone);
    the exact placer runs for at most ``--time-limit`` units of CP-SAT deterministic time a graph (not wall
    seconds) and reports whether it proved its placement optimal, and its gap. The summary is over the
    placements proved optimal, and each placer's mean over its placements that fit (those out of memory are
    counted: a step no device runs).
    """
    rows = bench_exact(args)
    proved = [r for r in rows if r["status"] == "optimal"]  # over an unproved placement a heuristic may be < 1
    if len(proved) < len(rows):
        print(f"{len(proved)} of {len(rows)} exact placements proved optimal within --time-limit "
              f"{args.time_limit:g}: the summary is over those {len(proved)}" + (", none: no summary" if not proved else ""))
    for name in args.placers if proved else ():
        ratios = [r[name] for r in proved if not r.get(f"{name}_oom")]
        over = len(proved) - len(ratios)
        oom = f" ({over} out of memory, left out)" if over else ""
        if ratios:
            print(f"{name}: geometric mean step / exact {geomean(ratios):.3f}, worst {max(ratios):.3f}{oom}")
        else:
            print(f"{name}: each of its {over} placements out of memory, no mean")
    return 0


def run_placers(args: argparse.Namespace) -> int:
    """``placers``: median wall seconds of each fast placer on a random layered graph (first call excluded)."""
    bench_placers(args)
    return 0


def add_parsers(sub: Any) -> None:
    """The ``exact`` and ``placers`` subcommands."""
    exact = add_command(sub, "exact", run_exact, "heuristics against the exact placer on small graphs")
    exact.add_argument("--clusters", nargs="+", default=["k80x2", "k80x4"],
                       help="cluster presets or YAML files, each placed on (default: k80x2 k80x4)")
    exact.add_argument("--groups", type=int, default=12,
                       help="coarsen dataset graphs to this many groups (default: 12)")
    exact.add_argument("--families", nargs="*", default=["cifar10", "ptb", "nmt"],
                       help="families whose test graphs are coarsened and placed (default: cifar10 ptb nmt; none "
                            "given: the examples alone)")
    add_per_family_argument(exact, 2)
    exact.add_argument("--time-limit", type=float, default=20.0,
                       help="the exact placer's limit a graph, in CP-SAT deterministic time units, not wall seconds "
                            "(1 to 4 wall seconds a unit on an idle 2-core machine) (default: 20)")
    exact.add_argument("--placers", nargs="+", default=FAST_PLACERS,
                       help=f"placers compared with the exact one (default: {' '.join(FAST_PLACERS)})")
    placers = add_command(sub, "placers", run_placers, "placement time of the fast placers")
    placers.add_argument("--ops", type=int, default=2000, help="ops of the random layered graph (default: 2000)")
    placers.add_argument("--cluster", default="k80x4", help="cluster preset or YAML file (default: k80x4)")
    placers.add_argument("--repeat", type=int, default=5,
                         help="placements timed of each placer, the median reported (default: 5)")
    placers.add_argument("--placers", nargs="+", default=FAST_PLACERS,
                         help=f"placers timed (default: {' '.join(FAST_PLACERS)})")
