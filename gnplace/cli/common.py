"""Helpers shared by subcommands: resolving a placer argument, formatting units."""

from __future__ import annotations

from pathlib import Path

from gnplace.cluster import Cluster
from gnplace.graph import OpGraph
from gnplace.placement import Placement, load_placement
from gnplace.placers import get_placer

__all__ = ["resolve_placement", "ms", "mib"]


def resolve_placement(graph: OpGraph, cluster: Cluster, placer: str, *, seed: int | None = None) -> tuple[str, Placement]:
    """The placement named by ``placer``: a registered placer name, else a placement file."""
    from gnplace.placers import PLACERS

    if placer not in PLACERS and (placer.endswith(".json") or Path(placer).is_file()):
        return Path(placer).name, load_placement(placer, graph, cluster)
    return placer, get_placer(placer).place(graph, cluster, seed=seed)


def ms(seconds: float) -> str:
    """Seconds as milliseconds with three decimals."""
    return f"{seconds * 1e3:.3f}"


def mib(num_bytes: float) -> str:
    """Bytes as MiB with one decimal."""
    return f"{num_bytes / 2**20:.1f}"
