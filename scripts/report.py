"""The benchmark report: every placer side by side, written to ``docs/RESULTS.md`` and ``docs/figures/``.

Run by ``python scripts/bench.py report [--quick] [--out out/report] [--doc docs/RESULTS.md]
[--figures docs/figures] [--jobs 2] [--cache out/bench]`` (``--doc`` and ``--figures`` default to the
project's ``docs/``, wherever it runs from). Sections (each table and figure says the
command above it):

1. **Every placer** on the test splits and the real models on the cluster presets (``gnplace.evaluate``):
   step time over the best fast placer and over the lower bound, OOM count, seconds to place.
2. **Learned placers** (gnplace zero-shot and fine-tuned, gnplace PPO from scratch, and the seeds'
   methods ``rnn_pg``, ``hierarchical``, ``spotlight``, ``post``, ``placeto``) with one budget of
   simulator evaluations on a few test graphs per family: step over ``auto``'s and over the bound,
   evaluations used, policy updates, seconds, OOM; their learning curves.
3. **The seeds' claims** measured on those runs: Spotlight against the policy gradient, Post against
   Spotlight, Placeto's training steps against the RNN's, Placeto's zero-shot placement within a family
   (pretrained on the family's train split).
4. **Against the proved optimum**: the small graphs of ``docs/exact_gap.md``, the exact CP-SAT
   placement against ``auto`` and gnplace zero-shot.
5. **Time to place** against graph size (ENAS cifar10 graphs up to 100,000 ops).
6. **The search placers' learning curves**: ``ppo`` and ``reinforce`` alone (no annealing prelude) beside
   ``annealing``, 20,000 evaluations on the first test graph of each family on k80x4 (the README's
   ``curve_*.png``, as ``bench.py curves`` draws them).

Section 1 also draws every non-learned placer's step over the best of them on the test splits
(``baselines_ratios.png``, the figure of ``docs/baselines.md``), so that the report makes every figure the
documentation shows.

Every run is saved under ``--out`` as it finishes (JSON lines, and ``gnplace.evaluate``'s
``results.csv``), so an interrupted report resumes; ``--quick`` runs a small version of every section
(about a minute on 2 cores; the tests run it) and writes it under ``--out`` unless ``--doc`` and
``--figures`` say otherwise. The two keep their runs apart: ``--out`` is ``out/report`` by default and
``out/report_quick`` with ``--quick``, and a folder holding one kind's runs is refused to the other.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import date
from functools import lru_cache
from pathlib import Path
from typing import Any

if os.path.dirname(os.path.realpath(__file__)) not in sys.path:  # python -P or -I: no script folder on the path
    sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))  # benchmarks/ lives beside this file

import numpy as np
from benchmarks.common import (
    FIGURE_DPI,
    Store,
    best_at,
    covered_stretches,
    first_reaching,
    hidden_curves,
    large_graph,
    revisions_used,
    save_figure,
    test_graphs,
    uses_changed,
)

from gnplace.graph_io import write_atomically
from gnplace.sim.timer import geomean

ROOT = Path(__file__).resolve().parent.parent
FAST = ["single", "expert", "metis", "heft", "m_etf", "m_sct"]
LEARNED = ["policy", "finetune", "ppo", "rnn_pg", "hierarchical", "spotlight", "post", "placeto"]
SEEDS = ["rnn_pg", "hierarchical", "spotlight", "post", "placeto"]


@dataclass(frozen=True)
class Config:
    """What one report runs (``full`` or ``quick``)."""

    families: tuple[str, ...] = ("cifar10", "ptb", "nmt")
    table_clusters: tuple[str, ...] = ("k80x2", "k80x4", "v100x8", "cpu_gpu", "tight4")
    table_per_family: int | None = None  # test graphs per family in section 1 (None: all)
    table_placers: tuple[str, ...] = (*FAST, "auto", "policy")
    real: bool = True
    rl_per_family: int = 2
    rl_clusters: tuple[str, ...] = ("k80x4", "tight4")
    rl_budget: int = 1000
    rl_placers: tuple[str, ...] = tuple(LEARNED)
    placeto_train_graphs: int = 8
    placeto_episodes: int = 400
    exact_clusters: tuple[str, ...] = ("k80x2", "k80x4")
    exact_per_family: int = 2
    exact_examples: bool = True
    exact_time_limit: float = 20.0
    exact_samples: int = 64
    scale_ops: tuple[int, ...] = (1_000, 10_000, 100_000)
    scale_placers: tuple[str, ...] = ("m_etf", "auto", "policy", "rnn_pg", "placeto")
    scale_budget: int = 64
    scale_auto_up_to: int = 200_000  # auto took 6.5 s, m_etf 2.4 s on 93,567 ops (2026-11-24)
    baseline_placers: tuple[str, ...] = ("single", "round_robin", "expert", "metis", "heft", "m_etf", "m_sct",
                                         "random_search", "annealing", "auto")
    baseline_budget: int = 200
    curve_per_family: int = 1
    curve_cluster: str = "k80x4"
    curve_placers: tuple[str, ...] = ("ppo", "reinforce", "annealing")
    curve_budget: int = 20_000


FULL = Config()
QUICK = Config(
    families=("ptb",), table_clusters=("k80x4", "cpu_gpu"), table_per_family=1,
    table_placers=("single", "heft", "auto", "policy"), real=False, rl_per_family=1, rl_clusters=("k80x4",),
    rl_budget=64, placeto_train_graphs=2, placeto_episodes=2, exact_clusters=("k80x2",), exact_per_family=1,
    exact_examples=False, exact_time_limit=0.5, exact_samples=8, scale_ops=(500, 2_000),
    scale_placers=("m_etf", "policy", "rnn_pg"), scale_budget=32,
    baseline_placers=("single", "round_robin", "heft", "annealing", "auto"), baseline_budget=16, curve_budget=64,
)


# ------------------------------------------------------------------------------------------------ helpers
def fmt(value: float | None, digits: int = 3) -> str:
    """A number for a table (``-`` for none or nan)."""
    return "-" if value is None or not math.isfinite(value) else f"{value:.{digits}f}"


def rows_of(tasks: list[Any], rows: list[Any]) -> list[Any]:
    """The rows of ``gnplace.evaluate`` that ``tasks`` made (the folder also keeps earlier runs' other rows)."""
    from gnplace.evaluate import task_key

    keys = {task_key(t) for t in tasks}
    return [r for r in rows if r.key in keys]


def table_placements(tasks: list[Any], folder: Path, jobs: int, label: str = "section 1") -> list[Any]:
    """Section 1's placements through ``gnplace.evaluate`` (resuming from ``folder``), a line as each finishes.

    ``label`` names them in those lines (``[report] section 1: 3 saved, 5 to run``).

    Returns:
        list: the rows of ``folder/results.csv`` (:func:`rows_of` picks those of ``tasks``).
    """
    from gnplace.evaluate import evaluate, task_key

    total = len({task_key(t) for t in tasks})  # a task asked twice runs once
    todo = [total]
    done = [0]

    def reused(count: int) -> None:
        todo[0] = total - count
        print(f"[report] {label}: {count} saved, {todo[0]} to run", flush=True)

    def progress(row: Any) -> None:
        done[0] += 1
        print(f"[report] {label} {done[0]}/{todo[0]}: {row.graph}|{row.cluster}|{row.placer}"
              + (f" ERROR {row.error}" if row.error else ""), flush=True)

    return evaluate(tasks, folder, jobs=jobs, progress=progress, reused=reused)


def train_graphs(family: str, count: int) -> list[str]:
    """The first ``count`` train graphs of a shipped family."""
    from gnplace.datasets import load_manifest

    folder = ROOT / "datasets" / family
    return [str(folder / e["file"]) for e in load_manifest(folder)["graphs"] if e["split"] == "train"][:count]


@lru_cache(maxsize=64)
def _references(path: str, cluster_name: str) -> tuple[float, float]:
    """``auto``'s step seconds (seed 0) and the lower bound of a graph on a cluster."""
    from gnplace.cluster import load_cluster
    from gnplace.graph_io import load_graph
    from gnplace.placers.registry import make_placer
    from gnplace.sim.bounds import lower_bound
    from gnplace.sim.simulator import Simulator

    graph, cluster, sim = load_graph(path), load_cluster(cluster_name), Simulator()
    auto = sim.time(graph, cluster, make_placer("auto", timer=sim).place(graph, cluster, seed=0)).step_time
    bound = lower_bound(graph, cluster, times=sim.cost_model.op_times(graph, cluster)).value
    return float(auto), float(bound)


def revised(name: str) -> str:
    """``name``, with the placer's registry ``revision`` where it declares one: rows saved before it are not reused.

    A placer that loads the shipped checkpoint by default also carries the first 8 hex digits of the
    checkpoint's SHA-256, and of each other file it loads by default (``policy``'s constructor), so that a
    new checkpoint runs its rows again; and one whose placers used declare other revisions than when the
    report's keys began to carry them (:func:`~benchmarks.common.uses_changed`: ``m_etf``'s new revision
    changes ``auto``, where ``ppo`` starts) carries them as ``+uses m_etf@2,...``.
    """
    from gnplace.evaluate import file_digest
    from gnplace.placers.registry import PLACERS

    if name not in PLACERS:
        return name
    info = PLACERS.info(name)
    label = f"{name}@{info.revision}" if info.revision else name
    digest = file_digest(info.default_checkpoint) if info.default_checkpoint else None
    label = f"{label}+{digest[:8]}" if digest else label
    for _, path in info.default_files:
        extra = file_digest(path)
        label = f"{label}+{extra[:8]}" if extra else label
    used = uses_changed(name)
    return f"{label}+uses {_revisions_text(used)}" if used else label


def _revisions_text(revisions: dict[str, str]) -> str:
    """``a@1,b@2``: placer names and their revisions, sorted by name."""
    return ",".join(f"{name}@{revision}" for name, revision in sorted(revisions.items()))


def against(*references: str) -> str:
    """``|against auto@1,m_etf@2``: the revisions of the placers a row is measured against and of those they use.

    A row's step over ``auto``'s (section 2) or the exact placement's (section 4) changes with their revisions as
    much as with the placer's own. Empty while none of them declares a revision, so that the keys of before stand.
    """
    from gnplace.placers.registry import PLACERS

    found: dict[str, str] = {}
    for name in references:
        if PLACERS.info(name).revision:
            found[name] = PLACERS.info(name).revision
        found.update(revisions_used(name))
    return f"|against {_revisions_text(found)}" if found else ""


def learned_key(path: str, cluster: str, name: str, budget: int) -> str:
    """The key of section 2's row of learned placer ``name`` on a graph file and cluster (its step over ``auto``'s)."""
    return f"{Path(path).stem}|{cluster}|{revised(name)}|{budget}{against('auto')}"


def placeto_zero_shot_key(path: str, cluster: str, episodes: int) -> str:
    """The key of section 2's row of Placeto pretrained for ``episodes`` episodes placing a graph file zero-shot."""
    label = revised("placeto").replace("placeto", "placeto_zs", 1)
    return f"{Path(path).stem}|{cluster}|{label}|{episodes}{against('auto')}"


def exact_key(path: str, groups: int, cluster: str, time_limit: float) -> str:
    """The key of section 4's row: a graph file coarsened to ``groups`` (0: not), ``auto`` and ``policy`` over ``exact``."""
    return f"{Path(path).stem}@{groups}|{cluster}|{time_limit}|{revised('policy')}{against('auto', 'exact')}"


#: What a row of sections 2 and 4 records of its inputs beside its key (which names the graph file by its stem and
#: the cluster by its name): a regenerated graph file or an edited cluster runs the row again.
IDENTITY = ("graph_sha256", "cluster_fingerprint")
#: What a row of section 2 records: :data:`IDENTITY`, and the content of the graphs that Placeto placing zero-shot
#: was pretrained on (:func:`training_digest`; None in the rows of the other placers), so that a changed train
#: split runs its rows again with the model pretrained on it.
LEARNED_IDENTITY = (*IDENTITY, "placeto_train_sha256")


def inputs_identity(path: str, cluster: str) -> dict[str, str]:
    """:data:`IDENTITY` of a graph file and a cluster (preset or YAML file): the file's SHA-256, the fingerprint."""
    from gnplace.cluster import load_cluster
    from gnplace.evaluate import file_digest

    return {"graph_sha256": str(file_digest(path)), "cluster_fingerprint": load_cluster(cluster).fingerprint()}


def training_digest(paths: list[str]) -> str:
    """SHA-256 (hex) of the content of training graph files, in their order (the order pretraining cycles through).

    Hashes each file's SHA-256 (:func:`~gnplace.evaluate.file_digest`, as rows record ``graph_sha256``), one a line.
    """
    import hashlib

    from gnplace.evaluate import file_digest

    return hashlib.sha256("\n".join(str(file_digest(path)) for path in paths).encode()).hexdigest()


def _same(recorded: Any, today: float) -> bool:
    """Whether a value a row recorded is ``today``'s (to 1e-9, relative)."""
    return isinstance(recorded, (int, float)) and math.isclose(recorded, today, rel_tol=1e-9)


#: What the report reads of each row of section 2 (:func:`learned_row`) and of section 4 (:func:`exact_row`): a saved
#: row without one of them is made again.
LEARNED_FIELDS = ("graph", "cluster", "placer", "budget", "family", "name", "ops", "step_s", "vs_auto", "vs_bound",
                  "oom", "seconds", "evaluations", "updates", "history")
EXACT_FIELDS = ("name", "groups_placed", "status", "exact_ms", "auto", "policy")
#: What the report reads of each row of section 5 (:func:`scale_rows`).
SCALE_FIELDS = ("ops", "placer", "seconds")

_NUMBER: tuple[type, ...] = (int, float)
#: The kinds of value the report reads in the fields of a saved row of section 2 (:func:`learned_row` writes no
#: other; a number is no bool), of section 4 (:func:`exact_row`), 4b (:func:`sampled_row`) and 5 (:func:`scale_rows`):
#: a row holding another (:func:`holds_kinds`) is made again, as one without the field is.
LEARNED_KINDS: dict[str, tuple[type, ...]] = {
    **{field: (str,) for field in ("graph", "cluster", "placer", "family", "name")},
    **{field: _NUMBER for field in ("step_s", "vs_auto", "vs_bound", "seconds", "evaluations")},
    "updates": (*_NUMBER, type(None)), "oom": (bool,), "history": (list,)}
EXACT_KINDS: dict[str, tuple[type, ...]] = {field: _NUMBER for field in ("exact_ms", "auto", "policy")}
SAMPLED_KINDS: dict[str, tuple[type, ...]] = {"ratio": _NUMBER}
SCALE_KINDS: dict[str, tuple[type, ...]] = {"placer": (str,)}


def holds_kinds(row: dict[str, Any], kinds: dict[str, tuple[type, ...]]) -> bool:
    """Whether each field ``kinds`` names holds a value of one of its types in ``row`` (a bool is no number).

    A line edited by hand, or an older program's, may hold another: ``"oom": null`` stood and was a ``TypeError``
    in section 2's table (``sum``) after every section had run, ``"auto": null`` one in section 4's.

    Examples:
        >>> holds_kinds({"a": 1.5, "b": None}, {"a": (int, float), "b": (str, type(None))})
        True
        >>> holds_kinds({"a": True}, {"a": (int, float)}), holds_kinds({}, {"a": (int, float)})
        (False, False)
    """
    return all(field in row and isinstance(row[field], types) and (bool in types or not isinstance(row[field], bool))
               for field, types in kinds.items())


def learned_row_stands(row: dict[str, Any], task: dict[str, Any]) -> bool:
    """Whether section 2's row saved before rows recorded :data:`IDENTITY` was made on today's graph and cluster.

    It recorded ``auto``'s step seconds and the lower bound on them: both are computed again from today's files
    (``auto`` revised is another key), and a regenerated graph or an edited cluster changes them. A row of Placeto
    placing zero-shot does not stand: nothing it recorded tells the graphs its model was pretrained on.
    """
    if task.get("placeto_train_sha256") is not None:
        return False
    auto, bound = _references(task["graph"], task["cluster"])
    return _same(row.get("auto_s"), auto) and _same(row.get("bound_s"), bound)


def learned_row_readable(row: dict[str, Any]) -> bool:
    """Whether section 2's saved row holds values the report reads: :data:`LEARNED_KINDS`, each point of its curve drawn.

    Each point of its learning curve is one :func:`curve_points` draws.

    :func:`learned_row` never makes another; a line edited by hand may (``"history": []`` was an ``IndexError`` in
    the seeds' claims after every section had run, ``"evaluations": null`` a ``TypeError`` in section 2's table):
    it is made again, as a row without a field is.
    """
    return holds_kinds(row, LEARNED_KINDS) and curve_points(row["history"])[1] is None


def exact_row_readable(row: dict[str, Any]) -> bool:
    """Whether section 4's saved row holds values the report reads (:data:`EXACT_KINDS`; else it is made again)."""
    return holds_kinds(row, EXACT_KINDS)


def scale_row_readable(row: dict[str, Any]) -> bool:
    """Whether section 5's saved row holds a time to place the report reads: a point :func:`scale_points` draws.

    And a placer's name (:data:`SCALE_KINDS`: ``"placer": null`` was a ``TypeError`` where the figure sorts them).

    :func:`scale_rows` never saves another (seconds measured, above 0); a line edited by hand may (``"seconds":
    NaN``, JSON's not-a-number, read back as one): it was reused, a ``-`` in the table and a point left out of the
    figure on every rerun. It is made again, as a row of section 2 whose curve cannot be read is
    (:func:`learned_row_readable`).
    """
    return holds_kinds(row, SCALE_KINDS) and scale_points([row])[1] is None


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
    return row.get("groups_placed") == graph.num_groups and _same(recorded_auto_s, float(auto_s))


def sampled_row_stands(row: dict[str, Any], task: dict[str, Any]) -> bool:
    """Whether section 4b's row saved before rows recorded :data:`IDENTITY` is over today's exact row.

    Its task copies the exact placement's milliseconds from section 4's row, which stood (checked) or ran again.
    """
    return _same(row.get("exact_ms"), task["exact_ms"])


def sampled_rows(tasks: list[dict[str, Any]], store: Store) -> list[dict[str, Any]]:
    """Section 4b's rows of ``tasks`` (one process), those saved in ``store`` reused while over today's exact step.

    A saved row's ratio is its step over the exact placement's milliseconds it recorded: it stands only where they
    are the ones its task copies from section 4's row today (to 1e-9). Section 4 run again (its rows deleted, or a
    line cut) times CP-SAT's placement anew, and one stopped at its time limit (``feasible``) may be another:
    the row of before stood, its ratio over the exact step of before beside the others' over today's.
    """
    exact_ms = {t["key"]: t["exact_ms"] for t in tasks}
    return store.run(tasks, sampled_row, 1, "section 4b", IDENTITY, sampled_row_stands, ("ratio",),
                     lambda row: holds_kinds(row, SAMPLED_KINDS) and _same(row.get("exact_ms"), exact_ms[row["key"]]))


# ------------------------------------------------------------------------------ section 2: learned placers
def make_learned(name: str, budget: int, checkpoint: str | None) -> Any:
    """A learned placer as the report runs it (``policy``: its defaults, 16 samples; the rest: ``budget``)."""
    from gnplace.placers.registry import make_placer

    if name == "policy":
        return make_placer("policy", samples=16, progress=False)
    if name == "placeto_zs":  # a budget below one episode: one greedy episode, no training (zero-shot)
        return make_placer("placeto", budget=1, checkpoint=checkpoint, progress=False)
    options: dict[str, Any] = {"budget": budget, "progress": False}
    return make_placer(name, **options)


def learned_row(task: dict[str, Any]) -> dict[str, Any]:
    """Run one learned placer on one graph and cluster; its step ratios, evaluations and learning curve."""
    import torch

    from gnplace.cluster import load_cluster
    from gnplace.graph_io import load_graph
    from gnplace.sim.simulator import Simulator

    torch.set_num_threads(1)
    graph, cluster = load_graph(task["graph"]), load_cluster(task["cluster"])
    auto, bound = _references(task["graph"], task["cluster"])
    placer = make_learned(task["placer"], task["budget"], task.get("checkpoint"))
    start = time.perf_counter()
    placement = placer.place(graph, cluster, seed=task["seed"])
    seconds = time.perf_counter() - start
    result = Simulator().time(graph, cluster, placement)
    history = getattr(placer, "last_history", None) or [(getattr(placer, "last_evaluations", 1), result.step_time)]
    return {
        **task, "name": graph.name, "family": str(graph.meta.get("family", "")), "ops": graph.num_ops,
        "step_s": result.step_time, "auto_s": auto, "bound_s": bound, "vs_auto": result.step_time / auto,
        "vs_bound": result.step_time / bound, "oom": bool(result.is_oom), "seconds": seconds,
        "evaluations": int(getattr(placer, "last_evaluations", 0) or 0),
        "updates": getattr(placer, "last_updates", None),
        "episodes": getattr(placer, "last_episodes", None),
        "history": [[int(e), float(s) / auto] for e, s in history],
    }


def placeto_checkpoint(family: str, config: Config, cluster_name: str, out: Path) -> Path:
    """Where :func:`pretrain_placeto_family` caches its checkpoint: named by all that makes it.

    The family, the cluster, the episodes, Placeto's registry revision, and the first 12 hex digits of
    :func:`training_digest` of the train graphs (``placeto_ptb_k80x4_400_1a2b3c4d5e6f.pt``): a new revision or a
    changed train split pretrains anew. A checkpoint named before the digest was (``placeto_ptb_k80x4_400.pt``) is
    not read: nothing in it tells the content of the graphs it was pretrained on.
    """
    from gnplace.placers.registry import PLACERS

    revision = PLACERS.info("placeto").revision
    digest = training_digest(train_graphs(family, config.placeto_train_graphs))
    return out / (f"placeto_{family}_{cluster_name}_{config.placeto_episodes}{f'_r{revision}' if revision else ''}"
                  f"_{digest[:12]}.pt")


def pretrain_placeto_family(family: str, config: Config, cluster_name: str, out: Path) -> str:
    """Placeto pretrained on the family's train graphs (cached in ``out``, :func:`placeto_checkpoint`); its path."""
    import torch

    from gnplace.cluster import load_cluster
    from gnplace.graph_io import load_graph
    from gnplace.rl.placeto import pretrain_placeto, save_placeto

    path = placeto_checkpoint(family, config, cluster_name, out)
    if not path.exists():
        torch.set_num_threads(1)
        graphs = [load_graph(p) for p in train_graphs(family, config.placeto_train_graphs)]
        start = time.perf_counter()
        model = pretrain_placeto(graphs, load_cluster(cluster_name), episodes=config.placeto_episodes, seed=0)
        save_placeto(model, path)
        print(f"[report] placeto pretrained on {family} ({len(graphs)} graphs, {config.placeto_episodes} episodes) "
              f"in {time.perf_counter() - start:.0f} s", flush=True)
    else:
        print(f"[report] placeto pretrained on {family}: saved, {path}", flush=True)
    return str(path)


def placeto_zero_shot_tasks(family: str, config: Config, out: Path) -> list[dict[str, Any]]:
    """Section 2's tasks of Placeto pretrained on the family's train graphs placing its test graphs zero-shot.

    Pretrained by :func:`pretrain_placeto_family` on the first of ``rl_clusters``. Each records :data:`LEARNED_IDENTITY`: with ``placeto_train_sha256`` (:func:`training_digest` of the train
    graphs), a changed train split runs its rows again with the model pretrained anew.
    """
    cluster = config.rl_clusters[0]
    checkpoint = pretrain_placeto_family(family, config, cluster, out)
    trained_on = training_digest(train_graphs(family, config.placeto_train_graphs))
    return [{"key": placeto_zero_shot_key(path, cluster, config.placeto_episodes), "graph": path, "cluster": cluster,
             "placer": "placeto_zs", "budget": config.rl_budget, "seed": 0, "checkpoint": checkpoint,
             **inputs_identity(path, cluster), "placeto_train_sha256": trained_on}
            for path in test_graphs(family, config.rl_per_family)]


# ------------------------------------------------------------------------------------ section 4: exact
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


# ------------------------------------------------------------------------------------ section 5: scale
def _placed_ops(ops: int) -> Callable[[dict[str, Any]], bool]:
    """Whether a scale row of before 2026-11-30 (no fingerprint recorded) placed ``ops`` ops, all it can be checked by.

    A partial check: a generator change that keeps the op count passes it.
    """
    return lambda row: row.get("ops") == ops


def scale_rows(config: Config, cache: Path, store: Store) -> list[dict[str, Any]]:
    """Seconds to place ENAS cifar10 graphs of growing size (one core)."""
    import torch

    from gnplace.cluster import load_cluster
    from gnplace.placers.registry import make_placer
    from gnplace.toy import layered_graph

    torch.set_num_threads(1)
    cluster = load_cluster("k80x4")
    warm = layered_graph(8, width=2, seed=0)
    plan = []  # (graph, its identity, placer, key, saved): what is saved said before anything runs
    for ops in config.scale_ops:
        graph = large_graph(ops, cache)  # made again where its generator changed: rows on the one of before run again
        identity = {"graph_fingerprint": graph.fingerprint()}
        same_ops = _placed_ops(graph.num_ops)
        for name in config.scale_placers:
            key = f"scale|{ops}|{revised(name)}|{config.scale_budget}"
            row = store.saved(key, identity, same_ops)
            # else (edited by hand, or cut) made again, as a row of section 2 whose curve cannot be read is
            saved = row is not None and all(field in row for field in SCALE_FIELDS) and scale_row_readable(row)
            if not saved and name in ("auto", "m_etf") and ops > config.scale_auto_up_to:  # they place every op,
                continue  # no coarsening
            plan.append((graph, identity, name, key, saved))
    reused = sum(saved for *_, saved in plan)
    print(f"[report] section 5: {reused} saved, {len(plan) - reused} to run", flush=True)
    rows = []
    for graph, identity, name, key, saved in plan:
        if not saved:
            options: dict[str, Any] = {}
            if name in SEEDS or name in ("ppo", "finetune"):
                options = {"budget": config.scale_budget}
            placer = make_placer(name, **options)
            placer.place(warm, cluster, seed=0)  # untimed: compiled kernels and checkpoints load once a process
            start = time.perf_counter()
            placer.place(graph, cluster, seed=0)
            store.add({"key": key, "ops": graph.num_ops, "placer": name, "seconds": time.perf_counter() - start,
                       "budget": options.get("budget"), **identity})
            print(f"[report] scale {graph.num_ops} ops {name}: {store.rows[key]['seconds']:.1f} s", flush=True)
        rows.append(store.rows[key])
    return rows


# ------------------------------------------------------------------- section 1's figure, section 6: curves
def baseline_summary(config: Config, folder: Path, jobs: int) -> list[dict[str, Any]]:
    """Every non-learned placer on the test splits, through ``gnplace evaluate`` (resuming from ``folder``): its summary.

    The run of ``docs/baselines.md``'s first table (``gnplace evaluate ... --budget 200 --plot``), whose figure
    (:data:`BASELINE_FIGURE`: each cluster's step over the best non-learned placer, per placer, geometric mean over
    the families' test graphs) :func:`gnplace.viz.plot_ratios` draws from it.
    """
    from gnplace.evaluate import Task
    from gnplace.evaluate_summary import summarise

    paths = [p for f in config.families for p in test_graphs(f, config.table_per_family)]
    tasks = [Task.with_options(p, c, name, budget=config.baseline_budget)
             for p in paths for c in config.table_clusters for name in config.baseline_placers]
    rows = table_placements(tasks, folder, jobs, "section 1, every non-learned placer")
    return summarise(rows_of(tasks, rows))


def curve_key(path: str, cluster: str, name: str, budget: int, seed: int) -> str:
    """The key of section 6's row: search placer ``name``'s learning curve, alone, on a graph file and cluster."""
    return f"{Path(path).stem}|{cluster}|{revised(name)}|{budget}|seed {seed}|alone{against('auto')}"


#: What the report reads of each row of section 6 (:func:`curve_row`), and the kinds of value it reads there.
CURVE_FIELDS = ("graph", "cluster", "placer", "budget", "name", "auto_s", "corners", "last_evaluation", "seconds")
CURVE_KINDS: dict[str, tuple[type, ...]] = {
    **{field: (str,) for field in ("graph", "cluster", "placer", "name")},
    **{field: _NUMBER for field in ("auto_s", "seconds")}, "budget": (int,), "last_evaluation": (int,),
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
    if not all(isinstance(c, list) and len(c) == 2 and holds_kinds({"e": c[0], "q": c[1]}, {"e": (int,), "q": _NUMBER})
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


def curve_table(rows: list[dict[str, Any]]) -> list[str]:
    """Section 6's table: each placer's final best step over ``auto``'s and the evaluations it needed to reach each's.

    ``never`` where it did not reach that final, ``-`` where that placer did not run on the graph.
    """
    from benchmarks.search import evaluations_to_reach

    placers = list(dict.fromkeys(r["placer"] for r in rows))
    lines = ["| graph (cluster) | placer | best / auto | seconds | " + " | ".join(
        f"evaluations to {p}'s final" for p in placers) + " |", "| --- " * (4 + len(placers)) + "|"]
    for graph in dict.fromkeys(r["graph"] for r in rows):
        part = [r for r in rows if r["graph"] == graph]
        reach = evaluations_to_reach({r["placer"]: curve_of(r) for r in part})
        for r in part:
            mine = reach[r["placer"]]
            cells = ["-" if p not in mine else "never" if mine[p] is None else f"{mine[p]:,}" for p in placers]
            lines.append(f"| {r['name']} ({r['cluster']}) | {r['placer']} | {fmt(r['corners'][-1][1])} | "
                         f"{fmt(r['seconds'], 0)} | " + " | ".join(cells) + " |")
    return lines


# -------------------------------------------------------------------------------------------- figures
def curve_points(history: Any) -> tuple[np.ndarray, str | None]:
    """The points of a learning curve that a figure draws, and what it left out, said in a few words.

    A row's ``history`` holds ``[evaluations, best step over auto's]`` pairs (:func:`learned_row`: never empty, each
    ratio finite and positive). A saved row edited by hand, or cut, may hold others: a point that is no such pair of
    numbers, whose numbers are not finite, whose evaluations are below 0 or whose ratio is 0 or below (no step
    takes 0 s or less) is left out, and said so; a history of none is "no points".

    Args:
        history (Any): a row's learning curve, ``[[evaluations, ratio], ...]``.

    Returns:
        tuple: the points drawn (``[n, 2]`` float array: evaluations, ratio), and None where all are, else what was
        left out (``"no points"``, ``"2 of 5 points left out (1 not finite, 1 ratio <= 0)"``).

    Examples:
        >>> points, note = curve_points([[1, 1.0], [10, float("nan")], [100, 0.8]])
        >>> points.tolist(), note
        ([[1.0, 1.0], [100.0, 0.8]], '1 of 3 points left out (1 not finite)')
    """
    entries = history if isinstance(history, list) else []
    kept: list[tuple[float, float]] = []
    dropped = {"not a pair of numbers": 0, "not finite": 0, "evaluations < 0": 0, "ratio <= 0": 0}
    for entry in entries:
        pair = _number_pair(entry)
        reason = ("not a pair of numbers" if pair is None else "not finite" if not all(map(math.isfinite, pair))
                  else "evaluations < 0" if pair[0] < 0 else "ratio <= 0" if pair[1] <= 0 else None)
        if reason is None and pair is not None:
            kept.append(pair)
        elif reason is not None:
            dropped[reason] += 1
    points = np.array(kept, dtype=float).reshape(-1, 2)
    if not kept:
        return points, "no points" if not entries else f"no points ({_reasons(dropped)})"
    left_out = len(entries) - len(kept)
    return points, (f"{left_out} of {len(entries)} points left out ({_reasons(dropped)})" if left_out else None)


def _number_pair(entry: Any) -> tuple[float, float] | None:
    """``entry`` as ``(evaluations, ratio)`` floats, None where it is no list of two numbers (bools are none)."""
    if not isinstance(entry, (list, tuple)) or len(entry) != 2:
        return None
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in entry):
        return None
    return float(entry[0]), float(entry[1])


def _reasons(counts: dict[str, int]) -> str:
    """``1 not finite, 2 ratio <= 0``: how many points each reason left out, those that left out any."""
    return ", ".join(f"{count} {reason}" for reason, count in counts.items() if count)


NOTE_INCHES = 8 * 1.2 / 72
"""The height of a line of a learning curves panel's notes (inches): its title's 8 points, lines 1.2 apart. The
figure grows by it for each line the panel with the most of them has."""


def plot_curves(rows: list[dict[str, Any]], path: Path, cluster: str) -> None:
    """Best step over auto's against evaluations, one panel per family (its first RL graph on ``cluster``).

    A curve of steps is held at its final value to the panel's right edge (:func:`held_to`), so that its final level
    reads. What a panel cannot draw is written under its title: a placer's points left out (:func:`curve_points`), a
    curve hidden under another, or under others over stretches of its evaluations (:func:`_curve_notes`), or no run
    of the family on ``cluster``; with no row at all, one panel says so. The figure grows by the most lines of notes
    a panel has. Where a curve has a point at 0 evaluations (a placement timed by no evaluation), the axis is linear
    from 0 to 1 and logarithmic past it.
    """
    from gnplace.viz import agg_pyplot

    plt = agg_pyplot()

    families = sorted({r["family"] for r in rows})
    # one colour per placer in every panel: a scatter (a one-point history) and a line draw from two colour cycles
    colour = {placer: f"C{i % 10}" for i, placer in enumerate(sorted({r["placer"] for r in rows}))}
    panels = max(len(families), 1)
    fig, axes = plt.subplots(1, panels, figsize=(5 * panels, 3.6), squeeze=False, dpi=FIGURE_DPI)
    if not families:
        _say_not_drawn(axes[0][0], f"no learning curves on {cluster}", "no learned placer's run to draw")
    for ax, family in zip(axes[0], families):
        part = [r for r in rows if r["family"] == family and r["cluster"] == cluster]
        if not part:
            _say_not_drawn(ax, f"{family} on {cluster}", f"no run of {family} on {cluster}")
            continue
        _curves_panel(ax, part, colour, cluster)
    notes = max(ax.get_title().count("\n") for ax in axes[0])
    if notes:  # the axes keep their height: 7 lines of notes over a panel left it half of it
        fig.set_figheight(3.6 + notes * NOTE_INCHES)
    # beside the last panel, not over it (where it hid the seeds' curves), naming every placer of every panel
    handles = {label: handle for ax in axes[0] for handle, label in zip(*ax.get_legend_handles_labels())}
    if handles:
        axes[0][-1].legend(handles.values(), handles.keys(), fontsize=7, loc="upper left",
                           bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0)
    fig.tight_layout()
    save_figure(fig, path)  # a kill leaves the figure before, not half of it
    plt.close(fig)


def _curves_panel(ax: Any, part: list[dict[str, Any]], colour: dict[str, str], cluster: str) -> None:
    """One family's panel of :func:`plot_curves`: the curves of its first graph's rows (``part``: on ``cluster``)."""
    graph = sorted({r["name"] for r in part})[0]
    runs = sorted((r for r in part if r["name"] == graph), key=lambda r: r["placer"])
    curves = {r["placer"]: curve_points(r["history"]) for r in runs}
    end = _panel_end([h for h, _ in curves.values()], [r.get("evaluations") for r in runs])
    curves = {placer: (held_to(h, end), note) for placer, (h, note) in curves.items()}  # as drawn, up to the data's
    notes, zero, drawn, steps = _curve_notes(curves), False, 0, []
    for placer, (h, _) in curves.items():
        zero, drawn = zero or bool(len(h) and h[:, 0].min() == 0), drawn + bool(len(h))
        if len(h) == 1:
            ax.scatter(h[:, 0], h[:, 1], label=placer, marker="*", s=80, zorder=3, color=colour[placer])
        elif len(h):
            steps += ax.step(h[:, 0], h[:, 1], where="post", label=placer, color=colour[placer])
    title = f"{graph} on {cluster}"
    if not drawn:
        _say_not_drawn(ax, title, "no point to draw:\n" + "\n".join(notes))
        return
    ax.axhline(1.0, color="grey", lw=0.8, ls="--")
    if zero:  # 0 evaluations has no place on a log axis: linear up to 1
        ax.set_xscale("symlog", linthresh=1.0)
        ax.set_xlim(0, max(ax.get_xlim()[1], 10.0))  # at least a decade past 1 (one point at 0: 0 to 0.055)
    else:
        ax.set_xscale("log")
        ax.set_xlim(left=1)
    _hold_to_right_edge(ax, steps, end)
    if notes:  # under the title, smaller: what this panel leaves out
        ax.set_title(title + "\n" + "\n".join(notes), fontsize=8)
    else:
        ax.set_title(title)
    ax.set_xlabel("simulator evaluations")
    ax.set_ylabel("best step / auto's")


def _curve_notes(curves: dict[str, tuple[np.ndarray, str | None]]) -> list[str]:
    """The lines a panel says under its title: each placer's points left out, each curve drawn under a later one.

    ``curves`` holds each placer's points as drawn and what :func:`curve_points` left out, in the order drawn. A
    curve wholly under one later curve is "hidden under" it (:func:`~benchmarks.common.hidden_curves`); one under
    later ones over stretches of its evaluations alone (:func:`~benchmarks.common.covered_stretches`) is "under"
    each, a line per cover: ``finetune: under ppo over 1-60 evaluations`` (both flat at auto's step until
    fine-tuning's first better placement: fine-tuning's curve seemed to start at 60).
    """
    points = {placer: h for placer, (h, _) in curves.items()}
    hidden, partly = hidden_curves(points), covered_stretches(points)
    notes = []
    for placer, (_, note) in curves.items():
        if note is not None:
            notes.append(f"{placer}: {note}")
        if placer in hidden:
            notes.append(f"{placer}: hidden under {hidden[placer]}")
        elif placer in partly:  # a line per cover, its stretches in order: a line per curve ran past its panel
            for cover in dict.fromkeys(cover for *_, cover in partly[placer]):
                spans = ", ".join(f"{_count(lo)}-{_count(hi)}" for lo, hi, c in partly[placer] if c == cover)
                notes.append(f"{placer}: under {cover} over {spans} evaluations")
    return notes


def _count(evaluations: float) -> str:
    """A number of evaluations as a note writes it: ``1,436``, ``0.5``."""
    return f"{evaluations:,.0f}" if float(evaluations).is_integer() else f"{evaluations:,.3g}"


def held_to(points: np.ndarray, end: float) -> np.ndarray:
    """A curve of steps (``[n, 2]``: evaluations, best so far) with its last value held on to ``end`` evaluations.

    Drawn as steps (``where="post"``), a curve ended at its last point: its final value, where it had just dropped
    to it (``post``'s at the budget's last batch), showed as the foot of a drop alone, a level of no length. A curve
    of one point (a star) or none, or one already reaching ``end``, is returned as it is.

    Examples:
        >>> held_to(np.array([[1.0, 1.2], [64.0, 1.1]]), 100.0).tolist()
        [[1.0, 1.2], [64.0, 1.1], [100.0, 1.1]]
    """
    if len(points) < 2 or points[:, 0].max() >= end:
        return points
    return np.vstack([points, [end, points[-1, 1]]])


FINAL_LEVEL_ROOM = 0.04
"""The least of a learning curves panel's width (a fraction) right of its last evaluations, where each curve of steps
is held at its final value (:func:`_hold_to_right_edge`): 4%, 16 pixels of a 5-inch panel at 110 dpi."""


def _hold_to_right_edge(ax: Any, steps: list[Any], end: float) -> None:
    """Hold each line of ``steps`` (``ax.step``'s) at its final value to ``ax``'s right edge, its x limits fixed.

    Held to the panel's last evaluations ``end`` alone (:func:`held_to`), a curve whose last drop came at them (the
    seeds', at the budget's last batch, where no star lies further right) still ended at the foot of that drop. The
    right edge is at least :data:`FINAL_LEVEL_ROOM` of the axes' width past ``end`` (on the axis' scale): the
    symlog axis' margin past 64 evaluations (from 0) was 3 pixels.
    """
    lo, right = ax.get_xlim()
    scale = ax.xaxis.get_transform()
    t_lo, t_right, t_end = scale.transform(np.array([lo, right, end], dtype=float))
    least = (t_end - FINAL_LEVEL_ROOM * t_lo) / (1 - FINAL_LEVEL_ROOM)  # (t_right - t_end) / (t_right - t_lo) >= room
    if t_right < least:
        right = float(scale.inverted().transform(np.array([least]))[0])
    ax.set_xlim(right=right)  # the lines held to the edge move it no further
    for line in steps:
        line.set_data(*held_to(np.asarray(line.get_xydata()), right).T)


def _panel_end(curves: list[np.ndarray], evaluations: list[Any]) -> float:
    """The last evaluations of a panel of curves: the most of any point drawn, and of any run's evaluations used.

    ``evaluations`` holds each run's ``evaluations`` as its row recorded it (None, or anything but a finite number
    of 0 or more, is passed over: a row edited by hand). 0 where there is neither.
    """
    used = [float(e) for e in evaluations
            if isinstance(e, (int, float)) and not isinstance(e, bool) and math.isfinite(e) and e >= 0]
    return max([float(h[:, 0].max()) for h in curves if len(h)] + used, default=0.0)


def _say_not_drawn(ax: Any, title: str, text: str) -> None:
    """A panel with no curve: ``title`` above, ``text`` in its middle, no ticks."""
    ax.set_title(title)
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, fontsize=9, color="dimgrey")
    ax.set_xticks([])
    ax.set_yticks([])


def plot_learned_bars(rows: list[dict[str, Any]], path: Path, placers: list[str]) -> None:
    """Geometric mean of step over auto's per placer and family (bars).

    A bar with no mean (each of the placer's runs of the family out of memory, or none) is written ``n/a`` at its
    foot (:func:`gnplace.viz.mark_missing`): it was no bar and nothing said so. With no row or no placer, the axes
    say so (they were empty).
    """
    from gnplace.viz import agg_pyplot

    plt = agg_pyplot()

    fig, ax = plt.subplots(figsize=(9, 3.6), dpi=FIGURE_DPI)
    if rows and placers:
        _learned_bars(ax, rows, placers)
    else:
        _say_not_drawn(ax, "", "no learned placer's run to draw")
    ax.set_ylabel("step / auto's (geometric mean)")
    fig.tight_layout()
    _legend_clear_of_bars(fig, ax)
    save_figure(fig, path)  # a kill leaves the figure before, not half of it
    plt.close(fig)


def _legend_clear_of_bars(fig: Any, ax: Any) -> None:
    """Move laid-out ``ax``'s legend beside the axes, right of them, where it covers a bar or a bar's ``n/a``.

    matplotlib's best place inside the axes is the one covering the least: with every family's bars about as tall,
    the legend was drawn over the first bars (all at 1.2: cifar10's, nmt's and ptb's of ``policy``). The figure is
    laid out again with the legend outside; a legend clear of every bar is left where it is: the same figure.
    """
    legend = ax.get_legend()
    if legend is None:
        return
    renderer = fig.canvas.get_renderer()
    box = legend.get_window_extent(renderer)
    if not any(artist.get_window_extent(renderer).overlaps(box) for artist in (*ax.patches, *ax.texts)):
        return
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    fig.tight_layout()


def _learned_bars(ax: Any, rows: list[dict[str, Any]], placers: list[str]) -> None:
    """:func:`plot_learned_bars`' bars (``rows`` and ``placers`` not empty): one group per placer, a bar per family."""
    from gnplace.viz import mark_missing

    families = sorted({r["family"] for r in rows})
    width = 0.8 / len(families)
    for i, family in enumerate(families):
        values = [geomean(r["vs_auto"] for r in rows if r["family"] == family and r["placer"] == p and not r["oom"])
                  for p in placers]
        ax.bar(np.arange(len(placers)) + i * width, values, width, label=family)
        mark_missing(ax, values, positions=list(np.arange(len(placers)) + i * width), width=width)
    ax.axhline(1.0, color="grey", lw=0.8, ls="--")
    ax.set_xticks(np.arange(len(placers)) + width * (len(families) - 1) / 2, placers, rotation=20)
    ax.legend(fontsize=8)


def plot_scale(rows: list[dict[str, Any]], path: Path) -> None:
    """Seconds to place against ops, log-log, one line per placer.

    A point that log axes cannot draw (a saved row edited by hand: seconds or ops not a finite number above 0) is
    left out and said so above the axes (:func:`scale_points`): a nan broke the line, a 0 ran it off the axes'
    foot, and with no point at all the log axes raised ValueError. With nothing to draw, the axes say so.
    """
    from gnplace.viz import agg_pyplot

    plt = agg_pyplot()

    fig, ax = plt.subplots(figsize=(6, 3.8), dpi=FIGURE_DPI)
    notes = _scale_lines(ax, rows)
    if not ax.get_lines():
        _say_not_drawn(ax, "", "\n".join(["no placement timed to draw", *notes]))
    elif notes:  # above the axes, small: what the figure leaves out
        ax.set_title("\n".join(notes), fontsize=8)
    ax.set_xlabel("ops in the training graph")
    ax.set_ylabel("seconds to place (one core)")
    fig.tight_layout()
    save_figure(fig, path)  # a kill leaves the figure before, not half of it
    plt.close(fig)


def _scale_lines(ax: Any, rows: list[dict[str, Any]]) -> list[str]:
    """:func:`plot_scale`'s lines on log-log axes and their legend, where any; what each placer left out, in words."""
    notes = []
    for i, name in enumerate(sorted({r["placer"] for r in rows})):
        part, note = scale_points([r for r in rows if r["placer"] == name])
        if note is not None:
            notes.append(f"{name}: {note}")
        if not part:
            continue
        budget = next((r["budget"] for r in rows if r["placer"] == name and r.get("budget")), None)
        # its colour by its place among all placers: one with no point drawn leaves the others' as they were
        ax.plot(*zip(*part), marker="o", label=name + (f" (budget {budget})" if budget else ""), color=f"C{i % 10}")
    if ax.get_lines():
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.legend(fontsize=8)
    return notes


def scale_points(rows: list[dict[str, Any]]) -> tuple[list[tuple[Any, Any]], str | None]:
    """One placer's ``(ops, seconds)`` points that log-log axes draw, by ops, and what it left out, in a few words.

    Args:
        rows (list[dict]): section 5's rows of one placer (``ops``, ``seconds``: seconds to place).

    Returns:
        tuple: the points drawn (each as its row holds it), and None where all are, else what was left out
        (``"1 of 3 points left out (1 not finite)"``, ``"no points (2 <= 0)"``).

    Examples:
        >>> scale_points([{"ops": 2000, "seconds": 0.5}, {"ops": 100, "seconds": float("nan")}])
        ([(2000, 0.5)], '1 of 2 points left out (1 not finite)')
    """
    kept = []
    dropped = {"not a number": 0, "not finite": 0, "<= 0": 0}
    for r in rows:
        pair = _number_pair([r.get("ops"), r.get("seconds")])
        reason = ("not a number" if pair is None else "not finite" if not all(map(math.isfinite, pair))
                  else "<= 0" if min(pair) <= 0 else None)
        if reason is None:
            kept.append((r["ops"], r["seconds"]))
        else:
            dropped[reason] += 1
    if not kept:
        return kept, f"no points ({_reasons(dropped)})"
    left_out = len(rows) - len(kept)
    return sorted(kept), (f"{left_out} of {len(rows)} points left out ({_reasons(dropped)})" if left_out else None)


# --------------------------------------------------------------------------------------------- report
def learned_table(rows: list[dict[str, Any]], placers: list[str]) -> list[str]:
    """Markdown lines: per family and cluster, each learned placer's geometric means and totals."""
    lines = ["| family | cluster | placer | graphs | step / auto | step / bound | evaluations (mean) | updates (mean) "
             "| seconds (mean) | OOM |", "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for family in sorted({r["family"] for r in rows}):
        for cluster in sorted({r["cluster"] for r in rows}):
            for placer in placers:
                part = [r for r in rows if r["family"] == family and r["cluster"] == cluster and r["placer"] == placer]
                if not part:
                    continue
                ok = [r for r in part if not r["oom"]]
                lines.append(
                    f"| {family} | {cluster} | {placer} | {len(part)} | {fmt(geomean(r['vs_auto'] for r in ok))} "
                    f"| {fmt(geomean(r['vs_bound'] for r in ok))} | {np.mean([r['evaluations'] for r in part]):.0f} "
                    f"| {_mean_or_dash([r['updates'] for r in part])} | {np.mean([r['seconds'] for r in part]):.1f} "
                    f"| {sum(r['oom'] for r in part)} |")
    return lines


def _mean_or_dash(values: list[Any]) -> str:
    kept = [v for v in values if v is not None]
    return f"{np.mean(kept):.0f}" if kept else "-"


def direction(ratio: float, where: str = "") -> str:
    """The verdict on a published claim that a method's step is shorter, from the ratio of its step to the other's.

    A ratio that shows as 100.0% (:func:`fmt` of its percentage) is level, not a lead: 0.9996 said "The direction
    holds." beside "100.0%". ``where`` qualifies a verdict that it does not hold (``" at this budget"``).
    """
    if not math.isfinite(ratio):
        return "No pair to compare."
    if fmt(ratio * 100, 1) == "100.0":
        return "Level: neither leads at the precision shown."
    return "The direction holds." if ratio < 1 else f"The direction does not hold{where}."


def claims(rows: list[dict[str, Any]]) -> list[str]:
    """The seeds' claims measured on the learned runs (Markdown lines)."""
    by = {(r["graph"], r["cluster"], r["placer"]): r for r in rows}
    pairs = sorted({(r["graph"], r["cluster"]) for r in rows})

    def ratio(a: str, b: str) -> tuple[float, int]:
        values = [by[(g, c, a)]["step_s"] / by[(g, c, b)]["step_s"] for g, c in pairs
                  if (g, c, a) in by and (g, c, b) in by and not by[(g, c, a)]["oom"] and not by[(g, c, b)]["oom"]]
        return geomean(values), len(values)

    def reach(a: str, b: str) -> list[str]:
        """How many evaluations and updates ``a`` needed to reach ``b``'s final quality, per pair."""
        out = []
        for g, c in pairs:
            if (g, c, a) not in by or (g, c, b) not in by:
                continue
            ra, rb = by[(g, c, a)], by[(g, c, b)]
            target = rb["history"][-1][1]
            ea, eb = first_reaching(ra["history"], target), first_reaching(rb["history"], target)
            updates = ""
            if ea is not None and ra["evaluations"] and ra["updates"] is not None and rb["updates"] is not None:
                ua = ra["updates"] * ea / ra["evaluations"]
                ub = rb["updates"] * (eb or rb["evaluations"]) / max(rb["evaluations"], 1)
                updates = f" (about {ua:.1f} policy updates against {ub:.1f})"
            reached = f"{ea} evaluations" if ea is not None else "never"
            out.append(f"{ra['name']}@{c}: {reached} against {eb}{updates}")
        return out

    lines = []
    r, n = ratio("spotlight", "rnn_pg")
    lines += [f"- **Spotlight (PPO) against the policy gradient (rnn_pg).** Published: Spotlight's placements train "
              f"in 60.9% of the policy gradient's time. Measured: Spotlight's step time is {fmt(r * 100, 1)}% of "
              f"rnn_pg's (geometric mean over {n} graph-cluster pairs, equal budgets). "
              + direction(r, " at this budget")]
    r, n = ratio("post", "spotlight")
    lines += [f"- **Post against Spotlight.** Published: up to 63.7% shorter training times than the prior methods "
              f"for the same learning time. Measured: Post's step time is {fmt(r * 100, 1)}% of Spotlight's "
              f"({n} pairs, equal budgets). " + direction(r)]
    lines += ["- **Placeto's training steps against the RNN's.** Published: up to 6.1x fewer training steps to "
              "placements on par with the RNN method's. Measured: evaluations (and policy updates) Placeto needed to "
              "first reach rnn_pg's final step time, against rnn_pg's own: "
              + "; ".join(reach("placeto", "rnn_pg")) + "."]
    r, n = ratio("placeto", "rnn_pg")
    flat = sum(1 for g, c in pairs if (g, c, "rnn_pg") in by
               and by[(g, c, "rnn_pg")]["history"][-1][1] >= by[(g, c, "rnn_pg")]["history"][0][1] * (1 - 1e-9))
    lines += [f"  Placeto's final step time is {fmt(r * 100, 1)}% of rnn_pg's ({n} pairs). In {flat} of these pairs "
              "rnn_pg ended no better than the best of its first batch of samples from the uniform policy, so there "
              "its final step time is the quality of a few random placements, which Placeto's random starting "
              "placements can match before any update."]
    r_zs, n = ratio("placeto_zs", "placeto")
    # over the placements that fit, as section 2's table gives placeto_zs's step / auto
    r_zs_auto = geomean(by[(g, c, "placeto_zs")]["vs_auto"] for g, c in pairs
                        if (g, c, "placeto_zs") in by and not by[(g, c, "placeto_zs")]["oom"])
    lines += [f"- **Placeto zero-shot within a family.** Published: pretrained Placeto places unseen graphs of its "
              f"family without retraining. Measured: pretrained on each family's train graphs, its zero-shot "
              f"placement of the test graphs is {fmt(r_zs_auto)}x auto's step time and {fmt(r_zs * 100, 1)}% of "
              f"Placeto trained on the graph itself for the full budget ({n} pairs)."]
    return lines


def equal_budgets(rows: list[dict[str, Any]], seeds: list[str]) -> list[str]:
    """Gnplace zero-shot and fine-tuned against every comparator at the same evaluations, per family (Markdown).

    Each mean is over the runs whose placement fits (as section 2's tables); the runs left out are counted in
    the cell (`` (k OOM)``).
    """
    lines = ["| family | gnplace | its evaluations | gnplace / auto | "
             + " | ".join(f"{s} / auto" for s in seeds) + " | gnplace leads |",
             "| --- | --- | --- | --- | " + " | ".join("---" for _ in seeds) + " | --- |"]
    for family in sorted({r["family"] for r in rows}):
        for ours in ("policy", "finetune"):
            mine = [r for r in rows if r["family"] == family and r["placer"] == ours]
            if not mine:
                continue
            budget = max(r["evaluations"] for r in mine)
            theirs, their_oom = [], []
            for seed in seeds:
                runs = [r for r in rows if r["family"] == family and r["placer"] == seed]
                # a run that ended out of memory found nothing that fits: its curve is of steps no device runs
                values = [best_at(r["history"], budget) for r in runs if not r["oom"]]
                theirs.append(geomean(values) if values and all(math.isfinite(v) for v in values) else math.inf)
                their_oom.append(sum(bool(r["oom"]) for r in runs))
            fits = [r for r in mine if not r["oom"]]  # as section 2's means: over the placements that fit
            own = geomean(r["history"][-1][1] for r in fits) if fits else math.nan
            worst = min(theirs) if theirs else math.inf
            verdict = ("no: every placement out of memory" if not fits else "yes" if own <= worst
                       else f"no: trails by {(own / worst - 1) * 100:.1f}%")
            cells = " | ".join(("none yet" if not math.isfinite(v) else fmt(v)) + _oom_text(k)
                               for v, k in zip(theirs, their_oom))
            lines.append(f"| {family} | {ours} | {budget} | {fmt(own)}{_oom_text(len(mine) - len(fits))} | {cells} "
                         f"| {verdict} |")
    return lines


def _oom_text(count: int) -> str:
    """`` (k OOM)`` after a table cell whose mean leaves out ``count`` runs out of memory; nothing where none is."""
    return f" ({count} OOM)" if count else ""


def _elapsed(path: Path) -> dict[str, Any]:
    """What ``elapsed.json`` at ``path`` holds (empty where it cannot be read: missing, or cut short by a kill)."""
    try:
        saved = json.loads(path.read_text())
    except (OSError, ValueError, RecursionError):  # ("[[[..." thousands deep: RecursionError)
        return {}
    return saved if isinstance(saved, dict) else {}


def add_minutes(path: Path, minutes: float, quick: bool | None = None) -> float:
    """Add ``minutes`` to the minutes of every run that made the saved rows, kept in ``path``; the sum.

    ``path`` is replaced atomically; one that cannot be read (cut short by a kill before it was), or whose minutes are
    no count (NaN, infinite or negative: edited by hand), counts as none.
    ``quick`` (given) records which report made the rows (:func:`check_report_kind`); else the one recorded stays.
    """
    saved = _elapsed(path)
    try:
        spent = float(saved["minutes"])
    except (KeyError, TypeError, ValueError):
        spent = 0.0
    if not math.isfinite(spent) or spent < 0:  # an edited "minutes": NaN was "nan minutes" in every report after
        spent = 0.0
    spent += minutes
    kind = saved.get("quick") if quick is None else quick
    write_atomically(path, json.dumps({"minutes": spent, **({"quick": kind} if isinstance(kind, bool) else {})}).encode())
    return spent


def check_report_kind(out: Path, out_flag: str, quick: bool) -> None:
    """Refuse an ``--out`` folder holding the runs of the other report (full or ``--quick``), as one line.

    A quick report's rows in the full report's folder would count their minutes in its time and leave rows of
    other settings beside its own. A folder of before 2026-12 records no kind: accepted.

    Raises:
        InvalidArgument: ``out/elapsed.json`` says the other report made its rows.
    """
    from gnplace.exceptions import InvalidArgument

    kind = _elapsed(out / "elapsed.json").get("quick")
    if isinstance(kind, bool) and kind != quick:
        theirs, ours = ("a --quick", "a full") if kind else ("a full", "a --quick")
        raise InvalidArgument(f"--out {out_flag}: holds the runs of {theirs} report; {ours} report keeps its own "
                              f"(default: {default_out(quick)}): pick another --out")


def check_doc_folder(doc: Path, out: Path) -> None:
    """Refuse a ``--doc`` whose folder does not exist and is not ``--out`` or under it, as one line.

    The report is written last, after every run (21 minutes in on the full report): a mistyped folder
    (``--doc /nonexistent/dir/x.md``) was met only then, or made wherever the user may write. ``--out``
    is made before the runs, so a report under it is accepted.

    Raises:
        InvalidArgument: naming ``--doc``, the missing folder and what to do.
    """
    from gnplace.exceptions import InvalidArgument

    folder = doc.absolute().parent
    if folder.is_dir() or folder == out.absolute() or out.absolute() in folder.parents:
        return
    raise InvalidArgument(f"--doc {doc}: no folder {doc.parent}; make it first, or name a file in an existing "
                          "folder or under --out")


#: The files the report keeps its runs in under ``--out`` (and its section 1's evaluation folder).
RUN_FILES = ("elapsed.json", "learned.jsonl", "exact.jsonl", "exact_sampled.jsonl", "scale.jsonl")


def check_doc_is_no_run_file(doc: Path, out: Path, cache: Path) -> None:
    """Refuse a ``--doc`` that is one of the files the report keeps its runs in.

    The report is written over ``--doc`` at the end: ``--doc OUT/learned.jsonl`` replaced section 2's
    saved runs with the report, and the next run did all nine again.

    Raises:
        InvalidArgument: naming ``--doc`` and whose runs it holds.
    """
    from gnplace.exceptions import InvalidArgument

    target = doc.resolve()
    taken = {(out / name).resolve(): f"{out / name}" for name in RUN_FILES}
    for folder in (out / "table", cache):  # section 1's evaluation, the scale section's cache
        if folder.resolve() == target or folder.resolve() in target.parents:
            raise InvalidArgument(f"--doc {doc}: under {folder}, where the report keeps runs; name another file")
    if target in taken:
        raise InvalidArgument(f"--doc {doc}: the report keeps its runs in {taken[target]}; name another file")


#: The figures the report writes in ``--figures`` (sections 2 and 5), before the report itself.
FIGURES = ("report_learned.png", "report_curves.png", "report_scale.png")
#: Section 1's figure of every non-learned placer (``docs/baselines.md``'s).
BASELINE_FIGURE = "baselines_ratios.png"


def figure_names(config: Config) -> list[str]:
    """Every file the report draws into ``--figures``: :data:`FIGURES`, :data:`BASELINE_FIGURE` and section 6's."""
    from benchmarks.search import curve_stem

    from gnplace.graph_io import load_graph

    stems = [curve_stem(load_graph(p).name, config.curve_cluster)
             for f in config.families for p in test_graphs(f, config.curve_per_family)]
    return [*FIGURES, BASELINE_FIGURE, *(f"{stem}{suffix}" for stem in stems for suffix in (".png", ".json"))]


def check_doc_is_no_figure(doc: Path, figures: Path, names: Sequence[str] = FIGURES) -> None:
    """Refuse a ``--doc`` that is one of the figures the report writes (``names`` in ``--figures``).

    The figures are written just before the report: ``--doc docs/figures/report_scale.png`` replaced the figure of
    the report before, and the one just drawn, with the report's text, the image it links to.

    Raises:
        InvalidArgument: naming ``--doc`` and the figure.
    """
    from gnplace.exceptions import InvalidArgument

    target = doc.resolve()
    for name in names:
        if (figures / name).resolve() == target:
            raise InvalidArgument(f"--doc {doc}: the report draws its figure {figures / name} there; name another "
                                  "file")


def check_doc_is_no_folder_it_makes(doc: Path, folders: dict[str, Path]) -> None:
    """Refuse a ``--doc`` that is the folder ``--out`` or ``--figures`` names, not made yet.

    ``check_output_file`` refuses an existing folder; one the report makes before its runs (``--doc X
    --out X``) was met only when the report was written over it, at the end.

    Raises:
        InvalidArgument: naming ``--doc`` and the flag whose folder it is.
    """
    from gnplace.exceptions import InvalidArgument

    for flag, folder in folders.items():
        if doc.resolve() == folder.resolve():
            raise InvalidArgument(f"--doc {doc}: the folder {flag} names, which the report makes; name a file")


def default_out(quick: bool) -> str:
    """Where a report saves its runs unless ``--out`` says otherwise: the full and the quick one apart."""
    return "out/report_quick" if quick else "out/report"


def machine() -> str:
    """One line: the machine, Python and torch."""
    import torch

    return (f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, {platform.system()} "
            f"{platform.release()}; Python {platform.python_version()}, torch {torch.__version__}")


def report_paths(args: argparse.Namespace) -> tuple[str, Path, Path, str]:
    """Where the report saves its runs, writes itself and its figures, and keeps large graphs: given or default.

    A quick report keeps everything under ``--out`` (its large graphs too); the full one writes the project's
    ``docs/RESULTS.md`` and ``docs/figures`` wherever it runs from, not a ``docs/`` of the working folder.
    """
    out_name = default_out(args.quick) if args.out is None else args.out  # the quick report's rows apart
    out = Path(out_name)
    # "" (an unset variable) is refused by run, not taken for the default: docs/RESULTS.md and docs/figures
    doc = Path(args.doc) if args.doc is not None else (
        out / "RESULTS.md" if args.quick else ROOT / "docs" / "RESULTS.md")
    figures = Path(args.figures) if args.figures is not None else (
        out / "figures" if args.quick else ROOT / "docs" / "figures")
    cache = args.cache if args.cache is not None else (str(out / "cache") if args.quick else "out/bench")
    return out_name, doc, figures, cache


def check_paths(args: argparse.Namespace) -> tuple[str, Path, Path, str]:
    """:func:`report_paths`, each refused in one line where it cannot be used (before any run or folder is made).

    Raises:
        InvalidArgument: naming the flag whose path cannot be used.
    """
    from gnplace.cli.common import check_output_file, check_output_folder

    out_name, doc, figures, cache = report_paths(args)
    out = Path(out_name)
    # refused before the runs, not when the report is written at their end (21 minutes in)
    for folder, flag in ((out_name, "--out"), (args.figures if args.figures is not None else figures, "--figures"),
                         (cache, "--cache")):
        check_output_folder(folder, flag)
    check_output_file(args.doc if args.doc is not None else doc, "--doc")
    check_doc_is_no_folder_it_makes(doc, {"--out": out, "--figures": figures})
    if args.doc:
        check_doc_folder(doc, out)
        check_doc_is_no_run_file(doc, out, Path(cache))
        check_doc_is_no_figure(doc, figures, figure_names(QUICK if args.quick else FULL))
    check_report_kind(out, out_name, args.quick)
    return out_name, doc, figures, cache


class Elapsed:
    """This run's minutes, added to ``elapsed.json`` (:func:`add_minutes`) as it goes, not only at its end.

    :meth:`book` runs after each section and where the run is cut short (Ctrl-C, an error): a report interrupted
    and resumed says the minutes of every run that made its rows, not the last one's alone, and a ``kill -9``
    loses at most the section it cut.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.started = self._booked = time.perf_counter()

    def book(self) -> float:
        """Add the minutes since the last booking to ``path``; the minutes of every run, this one so far included."""
        now = time.perf_counter()
        spent = add_minutes(self.path, (now - self._booked) / 60)
        self._booked = now
        return spent

    @property
    def minutes(self) -> float:
        """Minutes since this run started."""
        return (time.perf_counter() - self.started) / 60


def run(args: argparse.Namespace) -> Path:
    """Run every section (resuming from ``--out``), then write the report and its figures.

    The minutes spent are booked in ``--out``'s ``elapsed.json`` (:class:`Elapsed`) however the run ends.
    """
    out_name, doc, figures, cache = check_paths(args)
    out = Path(out_name)
    out.mkdir(parents=True, exist_ok=True)
    add_minutes(out / "elapsed.json", 0.0, args.quick)  # the folder is this kind of report's from now on
    figures.mkdir(parents=True, exist_ok=True)
    clock = Elapsed(out / "elapsed.json")
    try:
        return _run_sections(args, out_name, doc, figures, cache, clock)
    except BaseException:  # Ctrl-C, an error: the minutes this run spent on the rows it saved count too
        clock.book()
        raise


def report_command(args: argparse.Namespace) -> str:
    """The command that makes the report again, as the report says it: each path quoted as a shell reads it.

    A path of a space or a shell's character (``--out "my runs"``) was written bare: the command copied from the
    report gave the shell two words (``unrecognized arguments: runs``). ``--jobs`` changes no figure: left out.

    Examples:
        >>> report_command(argparse.Namespace(quick=True, out="my runs", doc=None, figures=None, cache="c"))
        "python scripts/bench.py report --quick --out 'my runs' --cache c"
    """
    import shlex

    given = (("--out", args.out), ("--doc", args.doc), ("--figures", args.figures), ("--cache", args.cache))
    return " ".join(["python scripts/bench.py report", *(["--quick"] if args.quick else []),
                     *(f"{flag} {shlex.quote(str(value))}" for flag, value in given if value is not None)])


def _run_sections(args: argparse.Namespace, out_name: str, doc: Path, figures: Path, cache: str,
                  clock: Elapsed) -> Path:
    """:func:`run`'s sections and report, booking the minutes spent on ``clock`` after each section."""
    config = QUICK if args.quick else FULL
    out = Path(out_name)
    command = report_command(args)
    sys.path.insert(0, str(ROOT / "scripts"))

    # 1. every placer on the test splits (and real models) on the presets
    from gnplace.evaluate import Task
    from gnplace.evaluate_summary import summarise

    paths = [p for f in config.families for p in test_graphs(f, config.table_per_family)]
    if config.real:
        paths += sorted(str(p) for p in (ROOT / "datasets" / "real").glob("*.gnpg"))
    tasks = [Task.with_options(p, c, name, {"samples": 16} if name == "policy" else None)
             for p in paths for c in config.table_clusters for name in config.table_placers]
    table_rows = table_placements(tasks, out / "table", args.jobs)
    summary = summarise(rows_of(tasks, table_rows))  # not a full report's rows in a quick one's table
    baselines = baseline_summary(config, out / "baselines", args.jobs)
    clock.book()

    # 2. learned placers with one budget
    store = Store(out / "learned.jsonl")
    rl_graphs = [p for f in config.families for p in test_graphs(f, config.rl_per_family)]
    learned_tasks = [
        {"key": learned_key(p, c, name, config.rl_budget), "graph": p, "cluster": c, "placer": name,
         "budget": config.rl_budget, "seed": 0, **inputs_identity(p, c), "placeto_train_sha256": None}
        for p in rl_graphs for c in config.rl_clusters for name in config.rl_placers]
    for family in config.families:  # Placeto pretrained per family, placing the family's test graphs zero-shot
        learned_tasks += placeto_zero_shot_tasks(family, config, out)
    learned = store.run(learned_tasks, learned_row, args.jobs, "section 2", LEARNED_IDENTITY, learned_row_stands,
                        LEARNED_FIELDS, learned_row_readable)
    placers = [p for p in (*config.rl_placers, "placeto_zs") if any(r["placer"] == p for r in learned)]
    clock.book()

    # 4. the proved optimum
    exact_store = Store(out / "exact.jsonl")
    exact_paths = [str(p) for p in sorted((ROOT / "datasets" / "examples").glob("*.gnpg"))] if config.exact_examples \
        else []
    exact_graphs = [(p, 0) for p in exact_paths] + [
        (p, 12) for f in config.families for p in test_graphs(f, config.exact_per_family)]
    exact_tasks = [{"key": exact_key(p, g, c, config.exact_time_limit), "graph": p, "groups": g,
                    "cluster": c, "time_limit": config.exact_time_limit, **inputs_identity(p, c)}
                   for c in config.exact_clusters for p, g in exact_graphs]
    exact = exact_store.run(exact_tasks, exact_row, args.jobs, "section 4", IDENTITY, exact_row_stands, EXACT_FIELDS,
                            exact_row_readable)
    sampled_tasks = [{"key": f"{r['key']}|samples={config.exact_samples}", "graph": r["graph"], "groups": r["groups"],
                      "cluster": r["cluster"], "samples": config.exact_samples, "exact_ms": r["exact_ms"],
                      **{field: r[field] for field in IDENTITY}} for r in exact]
    sampled = [r["ratio"] for r in sampled_rows(sampled_tasks, Store(out / "exact_sampled.jsonl"))]
    clock.book()

    # 5. time to place against size
    scale = scale_rows(config, Path(cache), Store(out / "scale.jsonl"))
    clock.book()

    # 6. the search placers' learning curves
    searches = Store(out / "curves.jsonl").run(curve_tasks(config), curve_row, args.jobs, "section 6", IDENTITY,
                                               None, CURVE_FIELDS, curve_row_readable)

    # the figures after every run, just before the report: one cut short leaves the figures of the report before
    bars_png, curves_png, scale_png = (figures / name for name in FIGURES)
    plot_curves([r for r in learned if r["placer"] != "placeto_zs"], curves_png, config.rl_clusters[0])
    plot_learned_bars(learned, bars_png, placers)
    plot_scale(scale, scale_png)
    from gnplace.viz import plot_ratios

    plot_ratios(baselines, figures / BASELINE_FIGURE)
    search_pngs = draw_curves(searches, figures)

    minutes, spent = clock.minutes, clock.book()
    rel = os.path.relpath(figures, doc.parent)
    lines = [
        "# gnplace benchmark report" + (" (quick)" if args.quick else ""),
        "",
        f"Produced by `{command}` on {date.today().isoformat()}, on {machine()}, in {spent:.1f} minutes "
        f"(the runs saved under `{out_name}`, this last one {minutes:.1f} minutes: a rerun reuses what is saved). "
        "All step times are simulated (`gnplace.sim.Simulator`, default mode); ratios are geometric means, lower "
        "is better.",
        "",
        "## 1. Every placer on the test splits" + (" and the real models" if config.real else ""),
        "",
        f"`{command}` (section 1; rows in `{out_name}/table/results.csv`). 'step / best non-learned' is against the "
        "best of the fast placers on the same graph and cluster; `policy` is gnplace zero-shot (the shipped "
        "checkpoint: greedy on the whole cluster, on its fastest k devices alone and, up to 4,000 ops, with no "
        "coarsening; then `auto`'s placement, and the greedy decode and 16 samples around it; then the "
        "greedy placement and 16 samples of each of the two constructors, past 4 devices on the 4 fastest too; then "
        "4 last rounds, each 4 samples of the base policy (a greedy decode too in the first) and 8 of each "
        "constructor around the best placement so far; on a graph whose groups are calls of a few modules (ptb's, "
        "nmt's), 1,000 evaluations of simulated annealing over the module map; then simulated annealing from the "
        "best of all, 5,120,000 op-evaluations' worth (5,120,000 / ops evaluations, at least 320 and at most 1,280); "
        "best by the simulator; D + 133 evaluations on D devices besides `auto`'s own and the annealings', D + 167 "
        "past 4 devices).",
        "",
        "| family | cluster | placer | graphs | step / best non-learned | step / bound | best on | OOM | place s |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for s in summary:
        lines.append(f"| {s['family']} | {s['cluster']} | {s['label']} | {s['graphs']} | {fmt(s['vs_best'])} "
                     f"| {fmt(s['vs_bound'])} | {s['best_count']} | {s['oom']} | {fmt(s['place_s'])} |")
    lines += [
        "",
        f"`{command}` (section 1; rows in `{out_name}/baselines/results.csv`): every non-learned placer "
        f"({', '.join(config.baseline_placers)}; the searches with {config.baseline_budget} evaluations, from `auto`'s "
        "placement) on the test splits, each cluster's step over the best of them, geometric mean over the "
        "families' graphs (`docs/baselines.md`'s figure).",
        "",
        f"![every non-learned placer]({rel}/{BASELINE_FIGURE})",
        "",
        f"## 2. Learned placers, {config.rl_budget} simulator evaluations each",
        "",
        f"`{command}` (section 2; rows in `{out_name}/learned.jsonl`). The first {config.rl_per_family} test graph(s) "
        f"of each family on {', '.join(config.rl_clusters)}, seed 0. `policy`: gnplace zero-shot (its candidates and `auto`'s own evaluations); "
        "`finetune`: PPO from the shipped checkpoint around `auto`'s placement, returning the checkpoint's "
        "zero-shot placement instead if that is faster (its zero-shot evaluations counted), each batch drawn 48 times and the 16 new placements a learned model of the step ranks fastest timed; `ppo`: gnplace's PPO from a fresh policy, after "
        "a fifth of the budget annealing from `auto`'s placement, imitating the best placement so far first "
        "(neither returns worse than its start; both time each distinct placement once, so a repeated "
        "sample costs no evaluation, and what a search leaves when its samples stop being new goes to "
        "annealing from its best placement); "
        "the seeds' methods start "
        "from a uniformly random policy, as in their papers. `placeto_zs`: Placeto pretrained on the family's "
        f"first {config.placeto_train_graphs} train graphs ({config.placeto_episodes} episodes, on "
        f"{config.rl_clusters[0]}), one greedy episode on the test graph. Evaluations count every placement the "
        "simulator timed (Placeto times one per MDP step); updates count policy-gradient steps on a batch.",
        "",
        *learned_table(learned, placers),
        "",
        "![step over auto per learned placer](" + f"{rel}/report_learned.png)",
        "",
        f"`{command}` (section 2): learning curves, best step time over `auto`'s against evaluations, "
        f"first graph of each family on {config.rl_clusters[0]} (a star: a placer that made one placement; "
        "each line held at its final best to its panel's right edge).",
        "",
        f"![learning curves]({rel}/report_curves.png)",
        "",
        "## 3. The seeds' claims, measured",
        "",
        f"`{command}` (from the runs of section 2).",
        "",
        *claims(learned),
        "",
        "**gnplace against every comparator at equal budgets.** Each comparator's best step time (over `auto`'s, "
        "geometric mean over the family's runs on both clusters) after at most as many evaluations as gnplace "
        "used: the evaluations column (zero-shot's candidates and `auto`'s), the whole budget for fine-tuning; 'none yet' "
        "where a comparator had timed "
        f"nothing by then. `{command}` (from the runs of section 2).",
        "",
        *equal_budgets([r for r in learned if r["placer"] != "placeto_zs"], [p for p in SEEDS if p in placers]),
        "",
        "## 4. Against the proved optimum",
        "",
        f"`{command}` (section 4; rows in `{out_name}/exact.jsonl`): the small graphs of `docs/exact_gap.md` "
        f"(test graphs coarsened to 12 groups, and the example graphs), CP-SAT with a limit of "
        f"{config.exact_time_limit:g}. Each cell is the step time over the exact placement's.",
        "",
        f"| graph | cluster | groups | exact status | exact ms | auto | gnplace zero-shot | zero-shot portfolio "
        f"| zero-shot, {config.exact_samples} samples |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r, k in zip(exact, sampled):
        lines.append(f"| {r['name']} | {r['cluster']} | {r['groups_placed']} | {r['status']} | {fmt(r['exact_ms'])} "
                     f"| {fmt(r['auto'])} | {fmt(r['policy'])} | {fmt(min(r['auto'], r['policy']))} | {fmt(k)} |")
    lines += ["", "'gnplace zero-shot' is the `policy` placer as everywhere in this report (greedy on every device "
              "subset and with no coarsening, `auto`'s placement and 16 samples around it); 'zero-shot portfolio' the "
              "better of it and `auto` by the simulator, what "
              f"`policy` with `portfolio=True` returns; the last column `policy` with {config.exact_samples} samples "
              "(still no training).", "",
              f"Geometric mean over {len(exact)} cases: auto {fmt(geomean(r['auto'] for r in exact))}, "
              f"gnplace zero-shot {fmt(geomean(r['policy'] for r in exact))}, zero-shot portfolio "
              f"{fmt(geomean(min(r['auto'], r['policy']) for r in exact))}, zero-shot with {config.exact_samples} "
              f"samples {fmt(geomean(sampled))} (target: within 1.05).", "",
              "## 5. Time to place against graph size", "",
              f"`{command}` (section 5; rows in `{out_name}/scale.jsonl`): ENAS cifar10 training graphs with more "
              f"cells stacked, on k80x4, one core; the learned search placers with a budget of {config.scale_budget} "
              f"evaluations; `auto` and `m_etf` place every op (no coarsening) up to {config.scale_auto_up_to:,} ops; "
              "`policy` with the shipped checkpoint runs `auto` and samples around its placement (16 samples). Each "
              "placer first places an 8-op graph, untimed: compiled kernels and checkpoints load once a process.", "",
              "| ops | " + " | ".join(config.scale_placers) + " |",
              "| --- | " + " | ".join("---" for _ in config.scale_placers) + " |"]
    for ops in sorted({r["ops"] for r in scale}):
        cells = [fmt(next((r["seconds"] for r in scale if r["ops"] == ops and r["placer"] == p), None), 2)
                 for p in config.scale_placers]
        lines.append(f"| {ops:,} | " + " | ".join(cells) + " |")
    lines += ["", f"![time to place]({rel}/report_scale.png)", ""]
    lines += ["## 6. The search placers' learning curves", "",
              f"`{command}` (section 6; rows in `{out_name}/curves.jsonl`): best step time over `auto`'s against "
              f"timer evaluations, {config.curve_budget:,} evaluations, seed 0, the first test graph of each family on "
              f"{config.curve_cluster}; `ppo` and `reinforce` alone (no annealing prelude), so that the three are "
              "separate searches (what `python scripts/bench.py curves` runs and draws; each figure's corners in the "
              "JSON beside it).", "", *curve_table(searches), "",
              *(f"![{png.stem}]({rel}/{png.name})" for png in search_pngs), ""]
    write_atomically(doc, "\n".join(lines).encode())  # a kill leaves the report before, not half of it
    print(f"[report] wrote {doc} and its figures in {figures} in {minutes:.1f} min", flush=True)
    return doc


def run_report(args: argparse.Namespace) -> int:
    """``bench.py report``: :func:`run`, holding ``--out``'s run lock (:mod:`gnplace.runlock`); exit status 0.

    Two reports into one folder each ran every section again and wrote ``elapsed.json`` over the other's: the
    second is refused in one line while the first runs.
    """
    from gnplace.runlock import folder_lock

    out_name = check_paths(args)[0]  # refused before the lock would make the folder
    with folder_lock(out_name, "--out"):
        run(args)
    return 0


def add_parser(sub: Any) -> None:
    """The ``report`` subcommand's options (``args.handler`` runs it)."""
    report = sub.add_parser("report", help="every placer side by side: docs/RESULTS.md and docs/figures/report_*.png",
                            description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    report.set_defaults(handler=run_report)
    report.add_argument("--quick", action="store_true",
                        help="a small version of every section (about a minute on 2 cores), written under --out")
    report.add_argument("--out", "-o", default=None,
                        help="where runs are saved, a rerun resuming (default: out/report; with --quick "
                             "out/report_quick: a folder holds one kind of report's runs, the other refused)")
    report.add_argument("--doc", default=None,
                        help="the report (default: docs/RESULTS.md; with --quick OUT/RESULTS.md, so the "
                             "committed report stays as it is)")
    report.add_argument("--figures", default=None, help="its figures (default: docs/figures; with --quick OUT/figures)")
    report.add_argument("--jobs", "-j", type=int, default=2,
                        help="processes running the placements, one thread each (default: 2)")
    report.add_argument("--cache", default=None, help="large generated graphs (default: out/bench, shared with "
                                                        "`bench.py scale`; with --quick OUT/cache)")


if __name__ == "__main__":  # the report is a subcommand of bench.py; run alone, this file did nothing and exited 0
    print("report.py: error: run the report as `python scripts/bench.py report` (its options: "
          "`python scripts/bench.py report --help`)", file=sys.stderr)
    sys.exit(2)
