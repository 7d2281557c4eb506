"""Section 2's rows: each learned placer with one budget on a few test graphs, and Placeto placing zero-shot.

Each row is a placer's step over ``auto``'s and over the lower bound, its evaluations, updates and learning curve;
a saved row stands while made on today's graph and cluster (:func:`learned_row_stands`) and readable
(:func:`learned_row_readable`).
"""

from __future__ import annotations

import time
from functools import lru_cache
from pathlib import Path
from typing import Any

from benchmarks.common import test_graphs

from reporting.config import ROOT, Config
from reporting.keys import NUMBER, holds_kinds, inputs_identity, placeto_zero_shot_key, same, training_digest
from reporting.points import curve_points

#: What the report reads of each row of section 2 (:func:`learned_row`): a saved row without one of them is made again.
LEARNED_FIELDS = ("graph", "cluster", "placer", "budget", "family", "name", "ops", "step_s", "vs_auto", "vs_bound",
                  "oom", "seconds", "evaluations", "updates", "history")
#: The kinds of value the report reads in the fields of a saved row of section 2 (:func:`learned_row` writes no
#: other; a number is no bool): a row holding another (:func:`~reporting.keys.holds_kinds`) is made again, as one
#: without the field is.
LEARNED_KINDS: dict[str, tuple[type, ...]] = {
    **{field: (str,) for field in ("graph", "cluster", "placer", "family", "name")},
    **{field: NUMBER for field in ("step_s", "vs_auto", "vs_bound", "seconds", "evaluations")},
    "updates": (*NUMBER, type(None)), "oom": (bool,), "history": (list,)}


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


def learned_row_stands(row: dict[str, Any], task: dict[str, Any]) -> bool:
    """Whether section 2's row saved before rows recorded :data:`IDENTITY` was made on today's graph and cluster.

    It recorded ``auto``'s step seconds and the lower bound on them: both are computed again from today's files
    (``auto`` revised is another key), and a regenerated graph or an edited cluster changes them. A row of Placeto
    placing zero-shot does not stand: nothing it recorded tells the graphs its model was pretrained on.
    """
    if task.get("placeto_train_sha256") is not None:
        return False
    auto, bound = _references(task["graph"], task["cluster"])
    return same(row.get("auto_s"), auto) and same(row.get("bound_s"), bound)


def learned_row_readable(row: dict[str, Any]) -> bool:
    """Whether section 2's saved row holds values the report reads: :data:`LEARNED_KINDS`, each point of its curve drawn.

    Each point of its learning curve is one :func:`curve_points` draws.

    :func:`learned_row` never makes another; a line edited by hand may (``"history": []`` was an ``IndexError`` in
    the seeds' claims after every section had run, ``"evaluations": null`` a ``TypeError`` in section 2's table):
    it is made again, as a row without a field is.
    """
    return holds_kinds(row, LEARNED_KINDS) and curve_points(row["history"])[1] is None


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


def train_graphs(family: str, count: int) -> list[str]:
    """The first ``count`` train graphs of a shipped family."""
    from gnplace.datasets import load_manifest

    folder = ROOT / "datasets" / family
    return [str(folder / e["file"]) for e in load_manifest(folder)["graphs"] if e["split"] == "train"][:count]


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
