"""Placers: every way gnplace turns a graph and a cluster into a :class:`~gnplace.placement.Placement`.

Each placer lives in its own module and is registered by name in :data:`PLACERS`, so that the
command line and evaluation find them all the same way.
"""

from __future__ import annotations

from typing import Any

from gnplace.exceptions import UnknownName
from gnplace.placers.base import Placer, group_order
from gnplace.placers.annealing import AnnealingPlacer
from gnplace.placers.exact import ExactPlacer
from gnplace.placers.expert import ExpertPlacer
from gnplace.placers.heft import HeftPlacer
from gnplace.placers.m_etf import METFPlacer
from gnplace.placers.m_sct import MSCTPlacer
from gnplace.placers.metis import MetisPlacer
from gnplace.placers.random_search import RandomSearchPlacer
from gnplace.placers.round_robin import RoundRobinPlacer
from gnplace.placers.single import SinglePlacer

__all__ = ["PLACERS", "get_placer", "make_placer", "Placer", "group_order"]

#: Placer classes by registry name.
PLACERS: dict[str, type] = {
    cls.name: cls
    for cls in (
        SinglePlacer, RoundRobinPlacer, ExpertPlacer, MetisPlacer, HeftPlacer, METFPlacer, MSCTPlacer,
        RandomSearchPlacer, AnnealingPlacer, ExactPlacer,
    )
}


def get_placer(name: str, **options: Any) -> Placer:
    """A new placer registered as ``name``, built with ``options``.

    Raises:
        UnknownName: if no placer is registered under ``name``; the message lists the choices.

    Examples:
        >>> get_placer("round_robin")
        RoundRobinPlacer()
    """
    if name not in PLACERS:
        raise UnknownName(f"unknown placer {name!r} (choose one of: {', '.join(sorted(PLACERS))})")
    return PLACERS[name](**options)  # type: ignore[no-any-return]


def make_placer(name: str, *, simulator: Any = None, budget: int | None = None, **options: Any) -> Placer:
    """Like :func:`get_placer`, but passes ``simulator`` and ``budget`` only to placers that take them.

    The command line and evaluation use this so that one ``--budget`` or simulator mode applies to
    every placer that has such an option and is ignored by the others.

    Examples:
        >>> make_placer("round_robin", budget=10)
        RoundRobinPlacer()
    """
    import inspect

    if name not in PLACERS:
        raise UnknownName(f"unknown placer {name!r} (choose one of: {', '.join(sorted(PLACERS))})")
    params = inspect.signature(PLACERS[name]).parameters
    if simulator is not None and "simulator" in params:
        options["simulator"] = simulator
    if budget is not None and "budget" in params:
        options["budget"] = budget
    return PLACERS[name](**options)  # type: ignore[no-any-return]
