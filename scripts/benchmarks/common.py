"""What several benchmarks share: their subcommands, timing a call, graphs, reading learning curves."""

from __future__ import annotations

import argparse
import inspect
import math
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

#: The repository's shipped datasets (``datasets/FAMILY``, ``datasets/real``, ``datasets/examples``).
DATASETS = Path(__file__).resolve().parents[2] / "datasets"


def add_command(sub: Any, name: str, handler: Callable[[argparse.Namespace], int], help: str) -> argparse.ArgumentParser:
    """Add subcommand ``name`` to ``bench.py``: ``handler(args)`` runs it and its docstring is the ``--help`` text."""
    parser: argparse.ArgumentParser = sub.add_parser(
        name, help=help, description=inspect.cleandoc(handler.__doc__ or help),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.set_defaults(handler=handler)
    return parser


def median_seconds(fn: Callable[[], Any], repeat: int) -> float:
    """Median wall seconds of ``fn()`` over ``repeat`` calls, after one warm-up call."""
    fn()
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def large_graph(ops: int, cache: Path) -> Any:
    """An ENAS cifar10 training graph of about ``ops`` ops (more cells stacked), cached in ``cache``."""
    from gnplace.families import cifar10
    from gnplace.graph_io import load_graph, save_graph
    from gnplace.importers.torch import from_module

    layers = max(1, round(ops / 119))
    path = cache / f"cifar10_L{layers}.gnpg"
    if path.exists():
        return load_graph(path)
    model, inputs = cifar10.sample(np.random.default_rng(0), layers=layers, channels=16, batch=32)
    graph = from_module(model, inputs, name=f"cifar10_L{layers}")
    save_graph(graph, path)
    return graph


def test_graphs(family: str, count: int | None) -> list[str]:
    """The first ``count`` test graphs of a shipped family (all if None)."""
    from gnplace.datasets import load_manifest

    folder = DATASETS / family
    files = [str(folder / e["file"]) for e in load_manifest(folder)["graphs"] if e["split"] == "test"]
    return files if count is None else files[:count]


def first_reaching(history: list[list[float]], target: float) -> int | None:
    """Evaluations after which a learning curve first reached ``target`` (None: never)."""
    for evaluations, value in history:
        if value <= target * (1 + 1e-9):
            return int(evaluations)
    return None


def best_at(history: list[list[float]], evaluations: int) -> float:
    """The best value of a learning curve after at most ``evaluations`` evaluations (inf: none yet)."""
    values = [v for e, v in history if e <= evaluations]
    return min(values) if values else math.inf
