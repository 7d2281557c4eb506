"""What several benchmarks share: timing a call, K80 clusters, large graphs, resumable rows, subcommands."""

from __future__ import annotations

import argparse
import inspect
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from gnplace.cluster import Cluster, Device

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


def k80_cluster(num_devices: int) -> Cluster:
    """``num_devices`` K80 GPUs on Placeto's channel (the k80x4 preset generalised)."""
    from gnplace.cluster import DEVICE_KINDS, LINK_KINDS

    devices = [Device(f"gpu{k}", "k80", **DEVICE_KINDS["k80"]) for k in range(num_devices)]
    link = LINK_KINDS["placeto"]
    return Cluster(devices, np.full((num_devices,) * 2, link["bandwidth"]), np.full((num_devices,) * 2, link["latency"]),
                   name=f"k80x{num_devices}")


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


def load_cluster_name(spec: str) -> str:
    """The name of the cluster ``spec`` (a preset or a YAML file)."""
    from gnplace.cluster import load_cluster

    return load_cluster(spec).name


def search_fields(name: str, placer: Any, graph: Any, cluster: Any, seed: int) -> dict[str, Any]:
    """Run a search placer once: ``name_s`` (wall seconds), ``name_final`` and ``name_history`` (over its reference)."""
    start = time.perf_counter()
    placer.place(graph, cluster, seed=seed)
    reference, last = placer.last_reference_step, placer.last_step
    assert reference is not None and last is not None  # set by place()
    return {f"{name}_s": time.perf_counter() - start, f"{name}_final": last / reference,
            f"{name}_history": [[e, t / reference] for e, t in placer.last_history]}


def rows_file(folder: str, name: str) -> tuple[Path, list[dict[str, Any]]]:
    """``folder/name`` (the folder made) and the rows an earlier run left there (a run resumes)."""
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    done_file = out / name
    return done_file, json.loads(done_file.read_text()) if done_file.exists() else []


def add_rows(job: Callable[[Any], dict[str, Any]], tasks: list[Any], jobs: int, done_file: Path,
              rows: list[dict[str, Any]]) -> None:
    """Run ``job`` on every task in ``jobs`` processes; each row joins ``rows``, saved to ``done_file`` as it comes."""
    from gnplace.workers import process_pool

    with process_pool(jobs) as pool:
        for row in pool.map(job, tasks):
            rows.append(row)
            done_file.write_text(json.dumps(rows, indent=1))
            print(json.dumps({k: v for k, v in row.items() if not k.endswith("history")}), flush=True)
