"""Pretraining's pairs: the (graph file, cluster) pairs a run trains and validates on, their checks and digest.

The families' training splits less the held-out graphs (:func:`pretrain_pairs`), each paired with every cluster of
the config; every file read and checked before any work (:func:`check_graph_files`, :func:`check_pairs_fit`); the
digest a resumed run is checked against (:func:`pairs_digest`, with the :func:`imitation_recipe` of its targets); and
the teacher search's placement of each pair that the imitation warm start fits (:func:`teacher_placements`).
:mod:`gnplace.pretrain` runs them; it imports Lightning, which this module does not.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gnplace.exceptions import InvalidArgument, InvalidCluster
from gnplace.graph import OpGraph
from gnplace.pretrain_config import PretrainConfig
from gnplace.workers import available_cores

__all__ = ["pretrain_pairs", "pairs_and_families", "cluster_spec", "check_graph_files", "check_pairs_fit",
           "imitation_recipe", "pairs_digest", "teacher_placements"]


def _family_graphs(config: PretrainConfig) -> tuple[list[Path], list[Path], list[str]]:
    """Training and held-out graph files of every family (the training split only, where a manifest has one).

    The third list is the family (``data.families``'s name) of each held-out file.
    """
    from gnplace.graph_files import collect_graphs

    root = Path(config.data.root)
    if not root.is_absolute():  # the working directory's, else the repository's of the config file
        root = root if root.is_dir() else Path(config.base) / root
    if not root.is_dir():  # e.g. a wheel install run outside a checkout: the families are not on disk
        raise InvalidArgument(
            f"data.root {config.data.root!r}: no such folder in the working directory or at {root}; "
            f"run from a gnplace checkout, or write each family there first "
            f"(gnplace generate --family F --out {config.data.root}/F)"
        )
    train: list[Path] = []
    val: list[Path] = []
    families: list[str] = []
    seen: dict[Path, str] = {}
    for family in config.data.families:
        folder = root / family  # a dataset's training split; every graph of a folder of bare graph files
        same = seen.setdefault(folder.resolve(), family)
        if same != family:  # (torchfam and ./torchfam, or a link to it: each pair twice, held-out ones too)
            raise InvalidArgument(f"data: families {same!r} and {family!r} are one folder ({folder.resolve()}); "
                                  "name it once")
        graphs = collect_graphs([str(folder)], split="train" if (folder / "manifest.json").exists() else "all")
        cut = len(graphs) - config.data.val_per_family
        if cut < 1:
            raise InvalidArgument(f"family {family!r}: {len(graphs)} training graphs, cannot hold out "
                                  f"{config.data.val_per_family}")
        kept, left_out = graphs[:cut], []
        if config.data.max_ops:
            from gnplace.graph_io import load_graph

            small = [load_graph(g).num_ops <= config.data.max_ops for g in kept]
            kept, left_out = [g for g, s in zip(kept, small) if s], [g for g, s in zip(kept, small) if not s]
            if not kept:
                raise InvalidArgument(f"family {family!r}: no training graph of at most {config.data.max_ops} ops")
        train += kept
        held_out = graphs[cut:] + (left_out if config.data.val_left_out else [])
        val += held_out
        families += [family] * len(held_out)
    return train, val, families


def cluster_spec(config: PretrainConfig, spec: str) -> str:
    """``spec`` of ``data.presets`` or ``data.val_clusters`` as :func:`~gnplace.cluster.load_cluster` takes it.

    A preset's name, an absolute path and a file the working directory holds are kept; a relative path that is not
    there is taken from ``config.base`` (the parent of the config file's folder) where it is there, as ``data.root``
    is. A config beside its cluster files (``configs/mine.yaml`` naming ``configs/mycluster.yaml``) was refused
    when run from another folder, where its families were found.

    Examples:
        >>> cluster_spec(PretrainConfig(), "k80x4")
        'k80x4'
    """
    from gnplace.cluster import preset_names

    path = Path(spec)
    if spec in preset_names() or path.is_absolute() or path.exists():
        return spec
    there = Path(config.base) / path
    return str(there) if there.is_file() else spec


def pretrain_pairs(config: PretrainConfig) -> tuple[list[tuple[str, Any]], list[tuple[str, Any]]]:
    """The training and the validation ``(graph file, cluster)`` pairs of ``config``.

    Clusters are preset names or random :class:`~gnplace.cluster.Cluster` objects.
    """
    pairs, val_pairs, _ = pairs_and_families(config)
    return pairs, val_pairs


def pairs_and_families(config: PretrainConfig) -> tuple[list[tuple[str, Any]], list[tuple[str, Any]], list[str]]:
    """:func:`pretrain_pairs`, and the family (``data.families``'s name) of each validation pair."""
    from gnplace.cluster import load_cluster
    from gnplace.cluster_sampler import random_cluster

    def configured(spec: str, key: str) -> Any:
        """The cluster ``spec`` that ``data.KEY`` lists, its errors naming that key."""
        try:
            return load_cluster(cluster_spec(config, spec))
        except InvalidCluster as err:
            raise InvalidCluster(f"data.{key}: {err}") from err

    train, val, families = _family_graphs(config)
    clusters: list[Any] = [configured(p, "presets") for p in config.data.presets]
    clusters += [random_cluster(config.data.random_cluster_seed + i) for i in range(config.data.random_clusters)]
    if not clusters:
        raise InvalidArgument("data: no clusters (give presets or random_clusters)")
    pairs = [(str(g), c) for g in train for c in clusters]
    val_pairs = [(str(g), configured(c, "val_clusters")) for g in val for c in config.data.val_clusters]
    return pairs, val_pairs, [f for f in families for _ in config.data.val_clusters]


def check_graph_files(pairs: list[tuple[str, Any]], val_pairs: list[tuple[str, Any]]) -> dict[str, OpGraph]:
    """Read every graph file of the training and validation pairs once, before the run's searches and training.

    The run reads each file when it first draws its pair, or at the first validation: a family's file that is no
    graph (a file of another format version, a damaged or truncated one) ended the run there, after its teacher
    searches (minutes) and iterations, with no checkpoint to resume from. About 1.5 s for the shipped config's
    72 files.

    Returns:
        dict: each graph by its path, for the checks that follow (:func:`check_pairs_fit`).

    A graph of no ops is refused as every command refuses one (nothing to place, no step to compare with
    ``auto``'s): it was trained on, its 0 s steps over 0 s giving NaN ratios ("NaN or Inf found in input tensor").

    Raises:
        InvalidGraph: naming the first file that is not a readable graph, or that has no ops.
    """
    from gnplace.graph import require_ops
    from gnplace.graph_io import load_graph

    # each file once, in the pairs' order
    return {path: require_ops(load_graph(path), path)
            for path in dict.fromkeys(str(g) for g, _ in (*pairs, *val_pairs))}


def check_pairs_fit(config: PretrainConfig, pairs: list[tuple[str, Any]], val_pairs: list[tuple[str, Any]],
                    graphs: Mapping[str, OpGraph]) -> None:
    """Refuse a cluster that ``data.presets`` or ``data.val_clusters`` names and on which some graph cannot fit.

    Such a pair was taken: it trained on overflowing placements only, and a held-out one logged ``val/oom`` 1.0 at
    a ratio that still competed for ``best.ckpt``, where ``place`` and ``finetune`` refuse the same graph and cluster.
    The random clusters, drawn and some memory-tight by design, are left to the draw. No pair of the shipped
    configs is refused.

    ``graphs`` holds each pair's graph by its path (:func:`check_graph_files`).

    Raises:
        InfeasiblePlacement: naming the key, the graph, the cluster and what does not fit
            (:func:`~gnplace.sim.bounds.memory_shortfall`).
    """
    from gnplace.cluster import load_cluster
    from gnplace.exceptions import InfeasiblePlacement
    from gnplace.sim.bounds import memory_shortfall

    for key, named, paths in (("presets", config.data.presets, [g for g, _ in pairs]),
                              ("val_clusters", config.data.val_clusters, [g for g, _ in val_pairs])):
        for spec in named:
            cluster = load_cluster(cluster_spec(config, spec))
            for path in dict.fromkeys(str(p) for p in paths):
                short = memory_shortfall(graphs[path], cluster)
                if short is not None:
                    raise InfeasiblePlacement(f"data.{key}: no placement of {path} fits cluster {spec!r} ({short}); "
                                              "leave that cluster out, or that graph")


def imitation_recipe(teacher_budget: int = 0) -> dict[str, Any]:
    """What the imitation targets and the reward's baseline depend on beside the pairs, where it changed.

    With a ``teacher_budget``, the teacher search's recipe (:func:`~gnplace.rl.teacher.search_recipe`: the
    revisions of ``annealing`` and of the placers it starts from, and its :math:`T_0`); without, ``uses``: the
    revisions of ``auto`` and of its candidates, whose placement is imitated and is the baseline
    (:meth:`~gnplace.placers.registry.PlacerRegistry.revisions_used` of ``annealing``, which starts from
    ``auto``).

    Args:
        teacher_budget (int, optional): simulator evaluations of the teacher search; 0: none (default: 0).

    Returns:
        dict: empty while none of them changed revision (then the digests made before stand).

    Examples:
        >>> imitation_recipe() == imitation_recipe(30) == {
        ...     'uses': {'expert': '1', 'heft': '1', 'm_etf': '3', 'm_sct': '3', 'metis': '1'}}
        True
    """
    from gnplace.placers.registry import PLACERS
    from gnplace.rl.teacher import search_recipe

    if teacher_budget:
        return search_recipe()
    used = PLACERS.revisions_used("annealing")  # auto and its candidates
    return {"uses": used} if used else {}


def pairs_digest(pairs: list[tuple[str, Any]], val_pairs: list[tuple[str, Any]], teacher_budget: int = 0) -> str:
    """SHA-256 of what the pairs hold: every graph file's content and every cluster's fingerprint, in order.

    A resumed run must train on the pairs it started with: its saved best placements belong to them (and,
    with a ``teacher_budget``, start as the search's placements of that budget). It must also imitate the
    placements it started with: the digest carries :func:`imitation_recipe` where that is not empty (a
    revision of ``auto``, of one of its candidates or of the teacher's search changed), so that the digests
    of runs made before such a change keep their value.
    """
    from gnplace.evaluate import file_digest

    listed: list[Any] = [[[file_digest(g), c.fingerprint()] for g, c in group] for group in (pairs, val_pairs)]
    if teacher_budget:
        listed.append({"teacher_budget": int(teacher_budget)})
    recipe = imitation_recipe(teacher_budget)
    if recipe:  # empty until a revision changes: the same list, the same digest as before
        listed.append({"recipe": recipe})
    return hashlib.sha256(json.dumps(listed, sort_keys=True).encode()).hexdigest()


def teacher_placements(
    pairs: list[tuple[str, Any]], budget: int, seed: int, cache: Path, *, workers: int | None = None,
    progress: bool | None = None,
) -> dict[int, Any]:
    """The search's placement of every training pair (:mod:`gnplace.rl.teacher`), searched where not cached.

    The searches run in ``workers`` processes (default: one per core this process may run on) and each is kept in
    ``cache`` as soon as it ends, so a killed run loses at most the searches under way.

    Returns:
        dict[int, np.ndarray]: the device of every op, by pair index.
    """
    from gnplace.cluster import load_cluster
    from gnplace.graph_io import load_graph
    from gnplace.progress import evaluation_bar
    from gnplace.rl.teacher import cache_path, search_pair, search_placement
    from gnplace.workers import task_mapper

    graphs = {g: load_graph(g) for g, _ in pairs}  # each file read once, whatever its clusters
    clusters = [load_cluster(c) for _, c in pairs]
    todo = [(str(g), c, budget, seed, str(cache)) for (g, _), c in zip(pairs, clusters)
            if not cache_path(cache, graphs[g], c, budget, seed).is_file()]
    if todo:
        workers = max(1, min(len(todo), workers or available_cores()))
        with task_mapper(workers) as mapper, evaluation_bar(
                f"teacher searches ({budget} evaluations each)", len(todo), progress, unit="searches") as advance_to:
            for done, _ in enumerate(mapper(search_pair, todo), 1):
                advance_to(done)
    return {i: search_placement(graphs[g], c, budget=budget, seed=seed, cache=cache).devices
            for i, ((g, _), c) in enumerate(zip(pairs, clusters))}
