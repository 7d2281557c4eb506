"""Placers: every way gnplace turns a graph and a cluster into a :class:`~gnplace.placement.Placement`.

Each placer lives in its own module and is registered by name in :data:`PLACERS`
(:mod:`gnplace.placers.registry`), which imports a placer's module only when it is first asked for,
so that the command line, evaluation and the demo find them all the same way.
"""

from __future__ import annotations

from gnplace.placers.base import Placer, group_order
from gnplace.placers.registry import (
    PLACERS,
    SHARED_OPTIONS,
    PlacerInfo,
    PlacerRegistry,
    get_placer,
    make_placer,
    register_placer,
)

__all__ = [
    "PLACERS", "SHARED_OPTIONS", "PlacerInfo", "PlacerRegistry", "get_placer", "make_placer", "register_placer",
    "Placer", "group_order",
]
