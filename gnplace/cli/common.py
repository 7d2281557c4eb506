"""Helpers shared by subcommands: the ``--option`` flag, resolving a placer argument, formatting units."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gnplace.cluster import Cluster
from gnplace.exceptions import InvalidArgument
from gnplace.graph import OpGraph
from gnplace.placement import Placement, load_placement
from gnplace.placers.registry import PLACERS, make_placer

__all__ = ["add_option_argument", "parse_placer_options", "resolve_placement", "ms", "mib"]


def add_option_argument(parser: argparse.ArgumentParser) -> None:
    """Add the repeatable ``--option PLACER.NAME=VALUE`` flag to ``parser``."""
    parser.add_argument(
        "--option", "-O", action="append", default=[], metavar="PLACER.NAME=VALUE",
        help="an option of one placer, e.g. annealing.start=heft or exact.time_limit=5 (YAML value; repeatable)",
    )


SHARED_OPTIONS = frozenset({"timer", "budget", "checkpoint", "seed"})
"""Options given to every placer that accepts them at once (``--budget``, ``--seed``), never through ``--option``."""


def parse_placer_options(items: Sequence[str], placers: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Options per placer from ``PLACER.NAME=VALUE`` strings; values are read as YAML scalars or lists.

    Raises:
        InvalidArgument: if an item is malformed or names a placer not in ``placers``.

    Examples:
        >>> parse_placer_options(["annealing.start=heft", "annealing.batch=8"], ["annealing"])
        {'annealing': {'start': 'heft', 'batch': 8}}
    """
    import yaml

    options: dict[str, dict[str, Any]] = {}
    for item in items:
        target, sep, text = item.partition("=")
        placer, dot, name = target.partition(".")
        if not sep or not dot or not placer or not name.isidentifier():
            raise InvalidArgument(f"--option {item!r}: expected PLACER.NAME=VALUE, e.g. annealing.start=heft")
        if name in SHARED_OPTIONS:
            flag = f"; use --{name}" if name in ("budget", "seed") else ""
            raise InvalidArgument(f"--option {item!r}: {name!r} is shared by every placer, not per placer{flag}")
        if placer not in placers:
            raise InvalidArgument(f"--option {item!r}: placer {placer!r} is not among those run ({', '.join(placers)})")
        try:
            value = yaml.safe_load(text) if text else ""
        except yaml.YAMLError as err:
            raise InvalidArgument(f"--option {item!r}: value is not a YAML scalar ({err})") from err
        if isinstance(value, dict):
            raise InvalidArgument(f"--option {item!r}: value must be a number, string, boolean or list")
        options.setdefault(placer, {})[name] = value
    return options


def resolve_placement(
    graph: OpGraph, cluster: Cluster, placer: str, *, seed: int | None = None, timer: Any = None,
    budget: int | None = None, options: dict[str, Any] | None = None,
) -> tuple[str, Placement]:
    """The placement named by ``placer``: a registered placer name, else a placement file.

    A registered placer is run with ``timer``, ``budget`` and ``options``.
    """
    if placer not in PLACERS and (placer.endswith(".json") or Path(placer).is_file()):
        return Path(placer).name, load_placement(placer, graph, cluster)
    return placer, make_placer(placer, timer=timer, budget=budget, **(options or {})).place(graph, cluster, seed=seed)


def ms(seconds: float) -> str:
    """Seconds as milliseconds with three decimals."""
    return f"{seconds * 1e3:.3f}"


def mib(num_bytes: float) -> str:
    """Bytes as MiB with one decimal."""
    return f"{num_bytes / 2**20:.1f}"


def run_reporting_errors(run: Any, args: argparse.Namespace, prog: str, interrupted: str = "interrupted") -> int:
    """``run(args)``'s exit status; a :class:`~gnplace.exceptions.GnplaceError` is one ``PROG: error:`` line and 2.

    The ``gnplace`` command and the scripts that share its subcommands (``scripts/pretrain.py``,
    ``scripts/finetune.py``) report errors the same way; Ctrl-C prints ``PROG: INTERRUPTED`` and gives 130.
    """
    import sys

    from gnplace.exceptions import GnplaceError

    try:
        return int(run(args) or 0)
    except GnplaceError as err:
        print(f"{prog}: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{prog}: {interrupted}", file=sys.stderr)
        return 130
