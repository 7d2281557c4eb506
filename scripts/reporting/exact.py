"""Sections 4 and 4b's rows: the exact CP-SAT placement of small graphs against ``auto`` and gnplace zero-shot."""

from __future__ import annotations

from typing import Any

from benchmarks.common import Store

from reporting.keys import IDENTITY, NUMBER, holds_kinds, same

#: What the report reads of each row of section 4 (:func:`exact_row`): a saved row without one of them is made again.
EXACT_FIELDS = ("name", "groups_placed", "status", "exact_ms", "auto", "policy")
#: The kinds of value the report reads in the fields of a saved row of section 4 (:func:`exact_row`) and 4b
#: (:func:`sampled_row`): a row holding another (:func:`~reporting.keys.holds_kinds`) is made again, as one without
#: the field is.
EXACT_KINDS: dict[str, tuple[type, ...]] = {field: NUMBER for field in ("exact_ms", "auto", "policy")}
SAMPLED_KINDS: dict[str, tuple[type, ...]] = {"ratio": NUMBER}


def exact_row_readable(row: dict[str, Any]) -> bool:
    """Whether section 4's saved row holds values the report reads (:data:`EXACT_KINDS`; else it is made again)."""
    return holds_kinds(row, EXACT_KINDS)


def exact_row_stands(row: dict[str, Any], task: dict[str, Any]) -> bool:
    """Whether section 4's row saved before rows recorded :data:`IDENTITY` was made on today's graph and cluster.

    It recorded the groups placed and ``auto``'s step over the exact one's (and the exact step): ``auto``'s step
    seconds on the graph as coarsened today must be the same, and so must the groups (CP-SAT is not run again).
    """
    from gnplace.placers.registry import make_placer

    try:
        recorded_auto_s = float(row["auto"]) * float(row["exact_ms"]) / 1e3
    except (KeyError, TypeError, ValueError):
        return False
    graph, cluster, sim = _small_case(task)
    auto_s = sim.time(graph, cluster, make_placer("auto", timer=sim).place(graph, cluster, seed=0)).step_time
    return row.get("groups_placed") == graph.num_groups and same(recorded_auto_s, float(auto_s))


def sampled_row_stands(row: dict[str, Any], task: dict[str, Any]) -> bool:
    """Whether section 4b's row saved before rows recorded :data:`IDENTITY` is over today's exact row.

    Its task copies the exact placement's milliseconds from section 4's row, which stood (checked) or ran again.
    """
    return same(row.get("exact_ms"), task["exact_ms"])


def sampled_rows(tasks: list[dict[str, Any]], store: Store) -> list[dict[str, Any]]:
    """Section 4b's rows of ``tasks`` (one process), those saved in ``store`` reused while over today's exact step.

    A saved row's ratio is its step over the exact placement's milliseconds it recorded: it stands only where they
    are the ones its task copies from section 4's row today (to 1e-9). Section 4 run again (its rows deleted, or a
    line cut) times CP-SAT's placement anew, and one stopped at its time limit (``feasible``) may be another:
    the row of before stood, its ratio over the exact step of before beside the others' over today's.
    """
    exact_ms = {t["key"]: t["exact_ms"] for t in tasks}
    return store.run(tasks, sampled_row, 1, "section 4b", IDENTITY, sampled_row_stands, ("ratio",),
                     lambda row: holds_kinds(row, SAMPLED_KINDS) and same(row.get("exact_ms"), exact_ms[row["key"]]))


def _small_case(task: dict[str, Any]) -> tuple[Any, Any, Any]:
    """``(graph, cluster, simulator)`` of an exact-section task: its graph, coarsened to ``groups`` if set (one core)."""
    import torch

    from gnplace.cluster import load_cluster
    from gnplace.coarsen import coarsen
    from gnplace.graph_io import load_graph
    from gnplace.sim.simulator import Simulator

    torch.set_num_threads(1)
    cluster, sim = load_cluster(task["cluster"]), Simulator()
    graph = load_graph(task["graph"])
    if task["groups"]:
        graph = coarsen(graph, task["groups"], cluster).graph
    return graph, cluster, sim


def exact_row(task: dict[str, Any]) -> dict[str, Any]:
    """The exact placement of one small graph against auto and gnplace zero-shot."""
    from gnplace.placers.registry import make_placer

    graph, cluster, sim = _small_case(task)
    exact: Any = make_placer("exact", time_limit=task["time_limit"], timer=sim)  # its last_status: ExactPlacer's own
    exact_s = sim.time(graph, cluster, exact.place(graph, cluster, seed=0)).step_time
    row = {**task, "name": graph.name, "groups_placed": graph.num_groups, "status": exact.last_status,
           "exact_ms": exact_s * 1e3}
    for name in ("auto", "policy"):
        options: dict[str, Any] = {"samples": 16, "progress": False} if name == "policy" else {}
        placer = make_placer(name, timer=sim, **options)
        row[name] = sim.time(graph, cluster, placer.place(graph, cluster, seed=0)).step_time / exact_s
    return row


def sampled_row(task: dict[str, Any]) -> dict[str, Any]:
    """Gnplace zero-shot with ``samples`` sampled placements on one small graph, over the exact placement's step."""
    from gnplace.placers.registry import make_placer

    graph, cluster, sim = _small_case(task)
    placement = make_placer("policy", timer=sim, samples=task["samples"], progress=False).place(graph, cluster, seed=0)
    return {**task, "ratio": sim.time(graph, cluster, placement).step_time / (task["exact_ms"] / 1e3)}
