"""Section 6's rows: the search placers' learning curves, each alone (``bench.py curves``' runs), and their figures."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from benchmarks.common import test_graphs

from reporting.config import Config
from reporting.keys import NUMBER, curve_key, holds_kinds, inputs_identity

#: What the report reads of each row of section 6 (:func:`curve_row`), and the kinds of value it reads there.
CURVE_FIELDS = ("graph", "cluster", "placer", "budget", "name", "auto_s", "corners", "last_evaluation", "seconds")
CURVE_KINDS: dict[str, tuple[type, ...]] = {
    **{field: (str,) for field in ("graph", "cluster", "placer", "name")},
    **{field: NUMBER for field in ("auto_s", "seconds")}, "budget": (int,), "last_evaluation": (int,),
    "corners": (list,)}


def curve_row(task: dict[str, Any]) -> dict[str, Any]:
    """Run one search placer alone on one graph and cluster (``bench.py curves``' run); its curve's corners."""
    import torch
    from benchmarks.search import auto_step, curve_corners, search_curve

    from gnplace.cluster import load_cluster
    from gnplace.graph_io import load_graph

    torch.set_num_threads(1)
    graph, cluster = load_graph(task["graph"]), load_cluster(task["cluster"])
    auto = auto_step(graph, cluster, task["seed"])
    run = search_curve(graph, cluster, task["placer"], task["budget"], task["seed"], auto)
    evals, ratio = run.pop("evaluations"), run.pop("best_over_auto")
    return {**task, "name": graph.name, "auto_s": auto, "corners": curve_corners(evals, ratio),
            "last_evaluation": int(evals[-1]), **run}


def curve_row_readable(row: dict[str, Any]) -> bool:
    """Whether section 6's saved row holds a curve the report draws (:data:`CURVE_KINDS`; else it is made again).

    Its corners are pairs of numbers, evaluations rising, best steps over ``auto``'s positive, finite and falling,
    and its last evaluation no earlier than its last corner: what :func:`curve_row` writes.

    Examples:
        >>> row = {"graph": "g", "cluster": "c", "placer": "ppo", "name": "g", "auto_s": 1.0, "seconds": 2.0,
        ...        "budget": 8, "last_evaluation": 8, "corners": [[1, 1.0], [3, 0.9]]}
        >>> curve_row_readable(row), curve_row_readable({**row, "corners": [[3, 0.9], [1, 1.0]]})
        (True, False)
    """
    if not holds_kinds(row, CURVE_KINDS) or not row["corners"]:
        return False
    corners = row["corners"]
    if not all(isinstance(c, list) and len(c) == 2 and holds_kinds({"e": c[0], "q": c[1]}, {"e": (int,), "q": NUMBER})
               and math.isfinite(c[1]) and c[1] > 0 for c in corners):
        return False
    rising = all(a[0] < b[0] and a[1] > b[1] for a, b in zip(corners, corners[1:]))
    return rising and row["last_evaluation"] >= corners[-1][0]


def curve_of(row: dict[str, Any]) -> tuple[list[int], list[float]]:
    """A section 6 row's curve as drawn: its corners (evaluations, best step over ``auto``'s) to its last evaluation.

    Examples:
        >>> curve_of({"corners": [[1, 1.0], [3, 0.9]], "last_evaluation": 8})
        ([1, 3, 8], [1.0, 0.9, 0.9])
    """
    evals = [int(e) for e, _ in row["corners"]]
    ratio = [float(q) for _, q in row["corners"]]
    if row["last_evaluation"] > evals[-1]:
        evals.append(int(row["last_evaluation"]))
        ratio.append(ratio[-1])
    return evals, ratio


def curve_tasks(config: Config) -> list[dict[str, Any]]:
    """Section 6's tasks: each search placer of ``config`` on the first test graph(s) of each family, seed 0."""
    cluster = config.curve_cluster
    return [{"key": curve_key(p, cluster, name, config.curve_budget, 0), "graph": p, "cluster": cluster,
             "placer": name, "budget": config.curve_budget, "seed": 0, **inputs_identity(p, cluster)}
            for f in config.families for p in test_graphs(f, config.curve_per_family) for name in config.curve_placers]


def draw_curves(rows: list[dict[str, Any]], figures: Path) -> list[Path]:
    """Each graph's learning curves of section 6 into ``figures`` (``curve_GRAPH_CLUSTER.png`` and its JSON)."""
    from benchmarks.search import write_curves

    drawn = []
    for graph in dict.fromkeys(r["graph"] for r in rows):
        part = [r for r in rows if r["graph"] == graph]
        curves = {r["placer"]: curve_of(r) for r in part}
        drawn.append(write_curves(curves, part[0]["name"], part[0]["cluster"], part[0]["auto_s"], part[0]["budget"],
                                  figures))
    return drawn
