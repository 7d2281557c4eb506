"""The demo run by ``make demo``.

Every registered placer on the shipped example graph(s), on every cluster preset, scored by the
simulator, printed as one table.

Usage::

    python scripts/demo.py [GRAPH ...] [--clusters k80x2,k80x4,...] [--mode default|placeto]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from gnplace import PLACERS, GnplaceError, load_cluster, load_graph, lower_bound
from gnplace.cluster import preset_names
from gnplace.placers import make_placer
from gnplace.sim import Simulator

EXAMPLES = sorted((Path(__file__).resolve().parent.parent / "datasets" / "examples").glob("*.gnpg"))


def main() -> int:
    """Run the demo; returns the exit status."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("graphs", nargs="*", default=[str(p) for p in EXAMPLES], help="graph files")
    parser.add_argument("--clusters", default=",".join(preset_names()), help="comma-separated presets or YAML files")
    parser.add_argument("--mode", choices=("default", "placeto"), default="default")
    parser.add_argument("--placers", default=",".join(sorted(PLACERS.names(learned=False), key=lambda n: (n != "single", n))),
                        help="comma-separated placers (default: every non-learned one, single first)")
    parser.add_argument("--budget", type=int, default=200, help="timer evaluations for search placers")
    parser.add_argument("--exact-time", type=float, default=1.0, help="deterministic time limit of the exact placer")
    args = parser.parse_args()
    console = Console(width=150)
    sim = Simulator(args.mode)
    try:
        for path in args.graphs:
            graph = load_graph(path)
            table = Table(title=f"{graph.name}: {graph.num_ops} ops, {graph.num_groups} groups, "
                                f"{graph.total_flops / 1e9:.1f} GFLOP per step (simulator mode: {args.mode})")
            for col in ("cluster", "placer", "step ms", "bound ms", "step / bound", "step / single", "peak MiB (max dev)", "OOM", "place s"):
                table.add_column(col, justify="left" if col in ("cluster", "placer") else "right")
            for cluster_name in args.clusters.split(","):
                cluster = load_cluster(cluster_name)
                bound = lower_bound(graph, cluster, times=sim.cost_model.op_times(graph, cluster)).value
                single_step = None
                for name in args.placers.split(","):
                    options = {"time_limit": args.exact_time} if name == "exact" else {}
                    start = time.perf_counter()
                    placement = make_placer(name, timer=sim, budget=args.budget, **options).place(graph, cluster, seed=0)
                    took = time.perf_counter() - start
                    result = sim.time(graph, cluster, placement)
                    if name == "single":
                        single_step = result.step_time
                    single_step = single_step or result.step_time
                    table.add_row(
                        cluster.name, name, f"{result.step_time * 1e3:.3f}", f"{bound * 1e3:.3f}",
                        f"{result.step_time / bound:.3f}", f"{result.step_time / single_step:.3f}",
                        f"{result.peak_memory.max() / 2**20:.1f}", "[red]yes[/]" if result.is_oom else "no", f"{took:.3f}",
                    )
                table.add_section()
            console.print(table)
    except GnplaceError as err:
        print(f"demo: error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
