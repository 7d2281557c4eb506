"""The ``Placer`` protocol that every placer, learned or not, implements."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import numpy as np

from gnplace.cluster import Cluster
from gnplace.exceptions import InvalidArgument
from gnplace.graph import OpGraph
from gnplace.limits import finite_number
from gnplace.placement import Placement
from gnplace.seed import SeedLike

__all__ = ["Placer", "check_flag", "check_fraction", "group_order"]


@runtime_checkable
class Placer(Protocol):
    """Places every colocation group of a graph on a device of a cluster.

    Implementations set a registry ``name`` and are deterministic under ``seed``. They may declare,
    as class attributes read by :class:`~gnplace.placers.registry.PlacerRegistry`, ``learned``
    (default False), ``accepts`` (the shared options ``timer``, ``budget``, ``checkpoint`` their
    constructor takes; default none) and ``respects_memory`` (default True).
    """

    name: str

    def place(self, graph: OpGraph, cluster: Cluster, *, seed: SeedLike = None) -> Placement:
        """A placement of ``graph`` on ``cluster`` that keeps each colocation group on one device."""
        ...


def group_order(graph: OpGraph) -> np.ndarray:
    """Colocation groups in the order their first op appears in topological order, ``[num_groups]``.

    Examples:
        >>> from gnplace.toy import mlp_training_graph
        >>> group_order(mlp_training_graph(layers=2, width=8, batch=4)).tolist()
        [0, 1, 2]
    """
    in_order = np.asarray(graph.group, dtype=np.int64)[graph.topological_order()]
    # each group's first place in topological order (np.unique's return_index is a stable sort's: the first),
    # then the groups by it: a Python loop over the ops took 0.6 s at 280,158 ops
    _, first = np.unique(in_order, return_index=True)
    return in_order[np.sort(first)]


def group_first_ops(graph: OpGraph) -> np.ndarray:
    """Each colocation group's first op in topological order, ``[num_groups]`` (op indices, by group id).

    Examples:
        >>> from gnplace.toy import mlp_training_graph
        >>> g = mlp_training_graph(layers=2, width=8, batch=4)
        >>> [int(g.group[v]) for v in group_first_ops(g)]
        [0, 1, 2]
    """
    order = graph.topological_order()
    # np.unique's return_index is a stable sort's: each group's first place in topological order, groups 0..G-1
    _, first = np.unique(np.asarray(graph.group, dtype=np.int64)[order], return_index=True)
    return np.asarray(order, dtype=np.int64)[first]


def check_fraction(owner: str, name: str, value: Any) -> float:
    """``value`` as a float if it is a number in ``[0, 1]``; else :class:`InvalidArgument` naming ``owner.name``.

    Examples:
        >>> check_fraction("m_etf", "min_speed", 0.5)
        0.5
    """
    if not isinstance(value, int | float | np.integer | np.floating) or not (  # (10**400: no float)
        finite_number(value) and 0.0 <= value <= 1.0
    ):
        raise InvalidArgument(f"{owner}: {name} must be a number in [0, 1], got {value!r}")
    return float(value)


def check_flag(owner: str, name: str, value: Any) -> bool:
    """``value`` if it is a bool (YAML's true/false); else :class:`InvalidArgument` naming ``owner.name``.

    Examples:
        >>> check_flag("expert", "memory_aware", False)
        False
    """
    if not isinstance(value, bool | np.bool_):
        raise InvalidArgument(f"{owner}: {name} must be true or false, got {value!r}")
    return bool(value)
