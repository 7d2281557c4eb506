"""Pretraining one placement policy across graph families and clusters: data, run, export.

Its config is :mod:`gnplace.pretrain_config` (re-exported here), which reads without importing Lightning.

The recipe (the defaults of ``configs/pretrain.yaml`` reproduce the shipped checkpoint):

1. **data**: the training splits of the ``cifar10``, ``ptb`` and ``nmt`` datasets, less the last
   ``val_per_family`` graphs of each family, which are held out for validation; every graph is
   paired with every cluster: the presets and ``random_clusters`` random ones
   (:func:`~gnplace.cluster_sampler.random_cluster`: 2 to 8 devices of mixed kinds, speeds, memories
   and links, a quarter of them memory-tight). Each iteration draws ``pairs_per_step`` pairs.
2. **imitation warm start**: for ``learner.imitation_steps`` iterations the policy is fitted to the
   reference placement (``auto``'s) of each drawn pair (:mod:`gnplace.rl.imitation`), or, with
   ``data.teacher_budget``, to the placement a long search found for it (:mod:`gnplace.rl.teacher`:
   searched once per training pair before training, in parallel, and kept under ``OUT/teacher``);
3. **PPO** afterwards (Spotlight's, :mod:`gnplace.rl.ppo`), with a pull (``learner.elite``, Post's
   cross-entropy term) toward the best placement seen of each pair or, with ``learner.elite_target:
   samples`` (the shipped recipe's), toward the best placement the policy itself sampled for it;
4. **validation** at the end of every epoch of ``steps_per_epoch`` iterations: the greedy placement of
   every held-out (graph, cluster) pair, logged as ``val/greedy_vs_auto`` (geometric mean of step
   time over ``auto``'s), per family and as the share that overflows memory, and with
   ``learner.val_samples`` (the shipped recipe's 32) also the best fitting placement of the greedy one and
   that many samples around ``auto``'s (with ``learner.prior``), ``val/best_vs_auto`` (on several processes,
   each rank validates its share of the pairs and every rank takes all of them, as one process does).

Engineering is Lightning's: its ``Trainer`` runs the loop, shows progress, logs to CSV and
TensorBoard, writes ``OUT/checkpoints/last.ckpt`` atomically every ``checkpoint_every_s`` seconds
(``--resume`` continues from it after a kill, losing at most one interval), and runs data-parallel on
``devices`` processes with ``strategy="ddp"`` (each rank simulates its own share of the pairs of an
iteration; gradients are averaged; the logged figures are the whole batch's, pooled over the ranks).
``OUT/policy.ckpt``, the policy alone (:mod:`gnplace.policy.checkpoint`), is written after every validation and
at the end, and ``OUT/best.ckpt`` whenever the held-out geometric mean improves (``val/best_vs_auto`` where
validation draws samples, else ``val/greedy_vs_auto``): model selection on held-out *training* graphs, never on the
test splits. ``--export`` copies ``best.ckpt``.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import reprlib
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import lightning as L

from gnplace.exceptions import InvalidArgument, InvalidCheckpoint, InvalidCluster
from gnplace.graph import OpGraph
from gnplace.graph_io import refuse_link, write_atomically
from gnplace.limits import as_float, check_timeout, finite_number, is_whole
from gnplace.pretrain_config import (  # re-exported: the config is read before Lightning's import
    DEFAULT_CONFIG,
    MAX_RANDOM_CLUSTERS,
    DataConfig,
    PretrainConfig,
    ScheduleConfig,
    load_pretrain_config,
)
from gnplace.runlock import holds_folder
from gnplace.workers import (
    available_cores,
    check_main_guarded,
    is_launched_rank,
    stray_ranks_hidden,
    threads_kept,
    torch_threads,
)

__all__ = [
    "DataConfig", "ScheduleConfig", "PretrainConfig", "load_pretrain_config", "pretrain_pairs", "pretrain",
    "EndWithLauncher", "ExportPolicy", "RankDigest", "ResumedTogether", "check_resumable", "check_resumed_together",
    "check_graph_files", "check_strategy", "cluster_spec", "pairs_digest", "wait_at_most",
    "imitation_recipe",
    "DEFAULT_CONFIG", "MAX_RANDOM_CLUSTERS", "exported_files", "resume_starts_afresh",
]


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
    pairs, val_pairs, _ = _pairs_and_families(config)
    return pairs, val_pairs


def _pairs_and_families(config: PretrainConfig) -> tuple[list[tuple[str, Any]], list[tuple[str, Any]], list[str]]:
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


class ExportPolicy(L.Callback):
    """Write the policy alone (:func:`~gnplace.policy.checkpoint.save_policy`) after each validation and at the end.

    Only rank 0 writes. The meta records the iterations done (``best.ckpt``'s: the iteration its weights
    come from), the run's config and the last validation; the wall seconds of the run (across resumes) are
    kept in Lightning's checkpoints and the run's summary, so that the same config and seed export the same
    file. So are the pairs' digest and the :func:`imitation_recipe` the run started under, which a resume is
    checked against. A resumed run may change :data:`RESUMABLE_CHANGES` (run longer): a ``best.ckpt`` an
    earlier session wrote is then given this run's config in its meta (:meth:`name_config_in_best`), so that
    it is the file a run of that config from the start writes.

    Args:
        path (Path): the policy checkpoint to write.
        config (PretrainConfig): the run's config, recorded in the meta.
        pairs (str, optional): the pairs' digest (:func:`pairs_digest`) (default: ``""``).
    """

    def __init__(self, path: Path, config: PretrainConfig, pairs: str = "", started: float | None = None) -> None:
        self.path, self.config, self.pairs = path, config, pairs
        self.recipe = imitation_recipe(config.data.teacher_budget)
        self.best_path = path.with_name("best.ckpt")
        # when this session began (time.monotonic()): the run's teacher searches, before training, count too
        self.started = time.monotonic() if started is None else started
        self.elapsed_before = 0.0
        self.best_score = float("inf")
        self.best_config_named = False  # best.ckpt's meta checked against this run's config (once a session)
        self.processes = 1

    def on_train_start(self, trainer: L.Trainer, pl_module: Any) -> None:
        """Note the run's processes, which its checkpoints record."""
        self.processes = int(trainer.world_size)

    def elapsed(self) -> float:
        """Wall seconds of the run so far, earlier sessions of a resumed run included."""
        return self.elapsed_before + time.monotonic() - self.started

    def export(self, trainer: L.Trainer, pl_module: Any, path: Path | None = None) -> None:
        """Write the policy checkpoint (rank 0 only)."""
        if trainer.global_rank != 0:
            return
        from gnplace.policy.checkpoint import save_policy

        save_policy(path or self.path, pl_module.policy, {
            # no wall time here (it is the run's, in last.ckpt and the summary): the same config and seed
            # give the same file, byte for byte
            "iterations": int(pl_module.iteration),
            "config": self.config.to_dict(), "config_digest": self.config.digest(),
            "validation": dict(pl_module.last_validation), "processes": int(trainer.world_size),
        })
        if path is None or path == self.path:  # the run's policy names this config: so does its best, from now on
            self.name_config_in_best()

    def name_config_in_best(self) -> None:
        """Record this run's config in ``best.ckpt``'s meta where an earlier session of the run recorded another.

        A resumed run may change :data:`RESUMABLE_CHANGES` (``schedule.iterations=2``, then ``=4``): while its best
        validation is still an earlier session's, ``best.ckpt`` (and the ``--export`` copied from it) named that
        session's config and ``config_digest``. The weights and the rest of the meta (the iteration they come from,
        their validation, the processes) stay; only rank 0 calls it (from :meth:`export`), once a session.
        """
        if self.best_config_named or not self.best_path.is_file():
            return
        self.best_config_named = True
        import sys

        from gnplace.policy.checkpoint import load_policy, save_policy

        policy, meta = load_policy(self.best_path)
        if meta.get("config_digest") == self.config.digest():
            return
        # the keys keep their order and, interned as the export's literals are, pickle as the export's do: the file is
        # byte for byte the one a run of this config from the start writes
        meta = {sys.intern(key): value for key, value in meta.items()}
        meta.update(config=self.config.to_dict(), config_digest=self.config.digest())
        save_policy(self.best_path, policy, meta)

    def on_validation_end(self, trainer: L.Trainer, pl_module: Any) -> None:
        """Export after every validation; also to ``best.ckpt`` when the held-out geometric mean improves.

        That mean is ``val/best_vs_auto`` where validation draws samples (``learner.val_samples``), else
        ``val/greedy_vs_auto``.

        Only the validations every ``schedule.steps_per_epoch`` iterations compete for ``best.ckpt``: the one at
        the end of a run of other length (13 iterations, 3 an epoch) would not happen in a longer run, so a
        run extended with ``--resume`` exported another ``best.ckpt`` than one run for that many iterations.
        """
        if trainer.sanity_checking:
            return
        self.export(trainer, pl_module)
        validation = pl_module.last_validation  # the best of the samples when validation draws them
        score = validation.get("val/best_vs_auto", validation.get("val/greedy_vs_auto"))
        on_schedule = int(pl_module.iteration) % self.config.schedule.steps_per_epoch == 0
        if on_schedule and score is not None and score < self.best_score:
            self.best_score = float(score)
            self.export(trainer, pl_module, self.best_path)

    def on_train_end(self, trainer: L.Trainer, pl_module: Any) -> None:
        """Export at the end."""
        self.export(trainer, pl_module)

    def state_dict(self) -> dict[str, Any]:
        """Wall seconds so far, best validation, config, pairs' digest and recipe: kept in Lightning's checkpoints."""
        return {"elapsed": self.elapsed(), "best_score": self.best_score, "config": self.config.to_dict(),
                "pairs": self.pairs, "recipe": self.recipe, "processes": self.processes}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue the wall-clock count and the best validation of a resumed run."""
        self.elapsed_before = float(state.get("elapsed", 0.0))
        self.best_score = float(state.get("best_score", float("inf")))


class EndWithLauncher(L.Callback):
    """The ranks of ``ddp_spawn`` (processes that ``multiprocessing`` started) end when their launcher dies.

    The launcher of a ``ddp_spawn`` run killed with SIGTERM (``kill``, ``timeout``; it has no handler while
    its ranks train) died at once and its ranks trained on to the end of the run, orphaned, writing into the
    output folder whose run lock had gone with the launcher. Each such rank now watches its launcher
    (:func:`~gnplace.workers.watch_parent`) and exits within a second of its death, as the worker processes
    do. Other ranks (``ddp``'s, launched by the rank 0 they serve; those of other nodes) are left alone.
    """

    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        """Watch the launcher, in a process that ``multiprocessing`` started."""
        import multiprocessing

        from gnplace.workers import watch_parent

        launcher = multiprocessing.parent_process()
        if launcher is not None and launcher.pid is not None:
            watch_parent(launcher.pid)


class OneThread(L.Callback):
    """Train on one torch thread in every rank, as a run of one process does (:func:`pretrain`'s ``torch_threads(1)``).

    Lightning's launchers give each rank ``cores // processes per machine`` threads where ``OMP_NUM_THREADS`` is
    unset, after :func:`pretrain` set one: a run of two machines with one rank each on 2-core hosts trained on two
    threads, and its ``policy.ckpt`` differed from the same config's under ``--devices 2`` on one host (the PPO
    statistics from the 7th digit of the second step on). The count then depended on the machine's cores.
    """

    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        """One intra-op thread, after the launcher set its own count (:func:`pretrain` gives the caller's back)."""
        import torch

        torch.set_num_threads(1)


class ResumedTogether(L.Callback):
    """Refuse, before the first iteration, a distributed run whose ranks did not all resume from one checkpoint.

    Each rank resumes from the ``checkpoints/last.ckpt`` it finds in its own ``--out``, and only rank 0 writes
    there. Two machines with ``--out`` on their own disks (or ``--resume`` given on one alone) resumed one rank and
    started the other afresh: their collectives then disagreed (a gloo traceback: "Received data size doesn't
    match expected size"), or, with an older copy of the checkpoint, they trained from other iterations.

    Args:
        checkpoint (Path, optional): the checkpoint this rank resumes from; None: none (a new run).
    """

    def __init__(self, checkpoint: Path | None) -> None:
        self.checkpoint = checkpoint
        self.digest = hashlib.sha256(checkpoint.read_bytes()).hexdigest() if checkpoint is not None else None

    def on_fit_start(self, trainer: L.Trainer, pl_module: Any) -> None:
        """Compare every rank's checkpoint and restored iteration with rank 0's (a collective: every rank calls it)."""
        from gnplace.train import every_rank

        if trainer.world_size <= 1:
            return
        mine = (str(self.checkpoint) if self.checkpoint is not None else None, self.digest, int(pl_module.iteration))
        check_resumed_together(every_rank(mine, int(trainer.world_size)))


def check_resumed_together(ranks: list[tuple[str | None, str | None, int]]) -> None:
    """Refuse ranks that resumed from other checkpoints than rank 0's (:class:`ResumedTogether`).

    Args:
        ranks (list): by rank, the checkpoint it resumed from (None: none), that file's SHA-256 and the iteration
            it starts at.

    Raises:
        InvalidCheckpoint: naming the first rank that differs from rank 0, on every rank.

    Examples:
        >>> check_resumed_together([("a/last.ckpt", "d1", 2), ("b/last.ckpt", "d1", 2)])  # a copy of one file
    """
    def started(path: str | None, iteration: int) -> str:
        return f"resumes from {path} (iteration {iteration})" if path is not None else "starts a new run"

    first = ranks[0]
    for rank, (path, digest, iteration) in enumerate(ranks[1:], 1):
        if (digest, iteration) != first[1:]:
            raise InvalidCheckpoint(
                f"rank {rank} {started(path, iteration)} where rank 0 {started(first[0], first[2])}: every machine of "
                "a multi-node run must resume from rank 0's checkpoint; give each the same --out on a shared "
                "filesystem (or copy rank 0's OUT/checkpoints/last.ckpt into each machine's --out), and --resume on "
                "each"
            )


class RankDigest(L.Callback):
    """At the end of a distributed run, each rank writes ``rank<r>.json``: its iteration and a digest of its weights.

    Data-parallel ranks must end with the same weights; the test of the DDP run compares the files.

    Args:
        folder (Path): where the files go.
    """

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def on_train_end(self, trainer: L.Trainer, pl_module: Any) -> None:
        """Write this rank's digest (distributed runs only), atomically: a failed write leaves the file before."""
        if trainer.world_size <= 1:
            return
        digest = hashlib.sha256()
        for name, tensor in sorted(pl_module.policy.state_dict().items()):
            digest.update(name.encode())
            digest.update(tensor.detach().cpu().numpy().tobytes())
        write_atomically(self.folder / f"rank{trainer.global_rank}.json", json.dumps(  # (makes the folder)
            {"rank": trainer.global_rank, "iteration": int(pl_module.iteration), "weights": digest.hexdigest()}
        ).encode("utf-8"))


#: Settings a resumed run may change: how long it runs and how often it checkpoints. Its exports then record the
#: changed config, ``best.ckpt`` too where its weights are an earlier session's (:class:`ExportPolicy`).
RESUMABLE_CHANGES = frozenset({"iterations", "checkpoint_every_s"})


def check_resumable(path: Path, config: PretrainConfig, pairs: str | None = None, processes: int | None = None) -> int:
    """Refuse a training checkpoint that cannot continue this run: unreadable, foreign, or another config.

    Every setting but :data:`RESUMABLE_CHANGES` must be the checkpoint's, so that a resumed run is the
    run it continues; so must the number of ``processes``, where given (each rank draws its own share).

    Returns:
        int: the iterations the checkpoint has done.

    Raises:
        InvalidCheckpoint: with one line saying which.
    """
    from gnplace.policy.checkpoint import (
        check_training_state,
        check_training_weights,
        is_training_checkpoint,
        pretraining_state,
        read_checkpoint,
    )

    data = read_checkpoint(path)
    if not is_training_checkpoint(data):
        raise InvalidCheckpoint(f"{path}: not a gnplace training checkpoint (cannot resume from it)")
    from gnplace.rl.search import RUN_KEY

    if RUN_KEY in data:
        raise InvalidCheckpoint(f"{path}: a search or fine-tuning run's checkpoint, not pretraining's "
                                "(cannot resume from it)")
    saved = data.get("hyper_parameters", {})
    if not isinstance(saved, dict):
        raise InvalidCheckpoint(f"{path}: its learner settings are malformed; cannot resume from it")
    from gnplace.train import changed_settings

    differ = changed_settings(saved, config.learner)
    if differ:
        raise InvalidCheckpoint(f"{path}: made with other learner settings ({', '.join(differ)}); "
                                "resume with the same config or use another --out")
    exporter = pretraining_state(data)
    recorded = exporter.get("config")
    if recorded is not None:  # checkpoints before 2026-11-24 recorded the learner's settings alone
        for section in ("data", "schedule"):  # a section as a list was an AttributeError traceback
            if not isinstance(recorded.get(section, {}), dict):
                raise InvalidCheckpoint(f"{path}: its recorded config is damaged ({section} is not a mapping); "
                                        "cannot resume from it")
        wanted = config.to_dict()
        differ = [f"{section}.{key}" for section in ("data", "schedule")
                  for key, value in wanted[section].items()
                  if key not in RESUMABLE_CHANGES and recorded.get(section, {}).get(key, value) != value]
        if differ:
            raise InvalidCheckpoint(f"{path}: made with other settings ({', '.join(differ)}); "
                                    "resume with the same config or use another --out")
    ran = exporter.get("processes")  # recorded since 2026-11-29: each rank draws its own share of the pairs
    if processes is not None and isinstance(ran, int) and ran != processes:
        raise InvalidCheckpoint(f"{path}: a run of {ran} process{'es' if ran != 1 else ''}, resumed with {processes}; "
                                "resume it with as many (--devices, --num-nodes) or use another --out")
    if pairs is not None and exporter.get("pairs") not in (None, pairs):  # recorded since 2026-11-25
        _check_recipe(path, exporter.get("recipe"), imitation_recipe(config.data.teacher_budget))
        raise InvalidCheckpoint(f"{path}: made with other graphs or clusters (a dataset folder or a cluster file "
                                "changed since) or other revisions of auto's placers or of the teacher's search; "
                                "resume with the same data and placers or use another --out")
    iteration = data["gnplace"].get("iteration", 0)
    if isinstance(iteration, bool) or not isinstance(iteration, int) or not 0 <= iteration <= 2**62:
        raise InvalidCheckpoint(f"{path}: its iteration count is not a whole number of iterations ({iteration!r}); "
                                "cannot resume from it")
    check_training_weights(path, data["state_dict"], config.learner.policy, "the config's policy")
    check_training_state(path, data, config.learner.policy)
    _check_run_state(path, data, exporter)
    return iteration


def _check_recipe(path: Path, recorded: Any, recipe: dict[str, Any]) -> None:
    """Refuse a run whose imitation targets came from other placer revisions than today's (``recipe``).

    ``recorded`` is the checkpoint's :func:`imitation_recipe` (recorded since 2026-11-30; None before).
    """
    if isinstance(recorded, dict) and recorded != recipe:
        def shown(found: dict[str, Any]) -> str:
            return json.dumps(found, sort_keys=True) if found else "those of before any change"

        raise InvalidCheckpoint(f"{path}: started under other placer revisions ({shown(recorded)}; now "
                                f"{shown(recipe)}): its imitation targets and auto's baselines would change; "
                                "resume with the placers it started with or use another --out")


def _check_run_state(path: Path, data: dict[str, Any], exporter: dict[str, Any]) -> None:
    """Refuse a checkpoint whose state beside the weights is malformed (an edited file; a damaged one fails its CRC).

    The learner's :math:`\\beta` and sampling generator, the optimizer's parameter groups, the exporter's
    wall seconds and best score: each is read on resume, and a bad value there is a traceback.
    """
    import numpy as np

    def refuse(what: str) -> InvalidCheckpoint:
        return InvalidCheckpoint(f"{path}: its {what} is malformed; cannot resume from it")

    learner = data["gnplace"]
    beta = learner.get("beta", 0.0)
    if not isinstance(beta, int | float) or not finite_number(beta) or beta < 0:  # (10**400: no float)
        raise refuse(f"KL weight beta ({beta!r})")
    if "rng" in learner:
        try:
            np.random.default_rng().bit_generator.state = learner["rng"]
        except (KeyError, TypeError, ValueError) as err:
            raise refuse("sampling generator's state") from err
    groups = [state.get("param_groups") if isinstance(state, dict) else None
              for state in data.get("optimizer_states", [])]
    if not all(isinstance(g, list) and g for g in groups):
        raise refuse("optimizer state")
    for key in ("elapsed", "best_score"):
        value = exporter.get(key, 0.0)
        number = as_float(value) if isinstance(value, int | float) else None
        if number is None or math.isnan(number):  # (10**400: no float, its comparisons an OverflowError)
            raise refuse(f"run's {key} ({value!r})")


def exported_files(out: str | os.PathLike[str]) -> list[str]:
    """The policies a run in ``out`` has exported (``policy.ckpt``, ``best.ckpt``), by name: those there."""
    return [name for name in ("policy.ckpt", "best.ckpt") if (Path(out) / name).exists()]


def _exported_by(out: Path, exported: list[str], config: PretrainConfig) -> bool:
    """Whether every policy exported in ``out`` (``exported``: their names) is one ``config``'s run writes first.

    That is, before its first checkpoint: of that config (:data:`RESUMABLE_CHANGES` aside, as :func:`check_resumable`
    takes them), at most ``schedule.steps_per_epoch`` iterations in (the first validation's, or a shorter run's end).
    A file that cannot be read, records no config, or comes from further in (a finished run whose ``checkpoints/``
    was removed) is not.
    """
    def kept(recorded: Any) -> str | None:
        if not isinstance(recorded, dict) or not all(isinstance(recorded.get(s), dict) for s in ("data", "schedule")):
            return None
        schedule = {k: v for k, v in recorded["schedule"].items() if k not in RESUMABLE_CHANGES}
        return json.dumps({**recorded, "schedule": schedule}, sort_keys=True, default=str)

    wanted = kept(config.to_dict())
    try:
        metas = [_exported_meta(out / name) for name in exported]
    except InvalidCheckpoint:
        return False
    return all(kept(meta.get("config")) == wanted and is_whole(meta.get("iterations"))
               and 0 <= meta["iterations"] <= config.schedule.steps_per_epoch for meta in metas)


def resume_starts_afresh(out: str | os.PathLike[str], config: PretrainConfig) -> bool:
    """Whether ``--resume`` in ``out`` starts ``config``'s run at its first iteration, rather than continue or refuse.

    It does where ``out`` holds no ``checkpoints/last.ckpt``, and no exported policy but those a run of ``config``
    writes before its first checkpoint (a kill came between its first validation's export and that checkpoint).
    """
    out = Path(out)
    exported = exported_files(out)
    return not (out / "checkpoints" / "last.ckpt").exists() and (not exported or _exported_by(out, exported, config))


def _exported_meta(path: Path) -> dict[str, Any]:
    """The meta of the policy exported at ``path`` (the meta alone: no network is built); ``{}`` if none is."""
    from gnplace.policy.checkpoint import read_checkpoint

    return read_checkpoint(path).get("meta", {}) if path.is_file() else {}


def _check_best_readable(path: Path) -> None:
    """Refuse, before a resumed run trains, a ``best.ckpt`` that is no readable policy (truncated, damaged, foreign).

    The resumed run reads it at its first export (:meth:`ExportPolicy.name_config_in_best`), and a finished run's
    summary reads its meta: a damaged one ended the run there, after the iterations since its checkpoint, which
    were lost (no checkpoint follows), and every resume after it the same way.

    Raises:
        InvalidCheckpoint: naming the file.
    """
    from gnplace.policy.checkpoint import load_policy

    if path.exists():
        try:
            load_policy(path)
        except InvalidCheckpoint as err:
            raise InvalidCheckpoint(f"{err} (the run's best policy, which --resume keeps: put the run's own back, or "
                                    "move it away)") from err


def _finished(
    out: Path, export: str | os.PathLike[str] | None, meta: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The summary of a run that has done its iterations already, read from its exported policies.

    ``meta`` is ``policy.ckpt``'s, where the caller has read it already.
    """
    from gnplace.policy.checkpoint import pretraining_state, read_checkpoint

    meta = _exported_meta(out / "policy.ckpt") if meta is None else meta
    best_path = out / "best.ckpt"
    best = read_checkpoint(best_path).get("meta", {}).get("validation", {}) if best_path.exists() else {}
    score = best.get("val/best_vs_auto", best.get("val/greedy_vs_auto"))
    if export is not None:
        write_atomically(export, (best_path if best_path.exists() else out / "policy.ckpt").read_bytes())
    last = out / "checkpoints" / "last.ckpt"
    elapsed = pretraining_state(read_checkpoint(last)).get("elapsed") if last.is_file() else None
    if not isinstance(elapsed, float):
        elapsed = meta.get("wall_seconds")  # exported policies before 2026-11-25 held it
    return {"iterations": int(meta.get("iterations", 0)),
            "wall_seconds": round(elapsed, 1) if isinstance(elapsed, float) else None,
            "validation": dict(meta.get("validation", {})), "policy": str(out / "policy.ckpt"),
            "best": str(best_path) if best_path.exists() else None,  # no validation ran: no best.ckpt
            "best_validation": float(score) if score is not None else None,
            "rank": 0, "already_done": True}


def check_strategy(strategy: str) -> str:
    """``strategy`` if Lightning knows it (``"auto"``, ``"ddp"``, ``"ddp_spawn"``, ...) and can start its ranks here.

    ``ddp_fork`` and ``ddp_notebook`` fork their ranks: where ``fork`` is no start method (Windows) Lightning refused
    them only as the trainer was made, after every teacher search had run.

    Raises:
        InvalidArgument: naming the strategies Lightning knows, or the start method this platform lacks.
    """
    import multiprocessing

    from lightning.pytorch.strategies import StrategyRegistry

    known = ["auto", *StrategyRegistry.available_strategies()]
    if strategy not in known:
        raise InvalidArgument(f"--strategy {strategy!r} is not a Lightning strategy; known: {', '.join(known)}")
    method = StrategyRegistry[strategy].get("init_params", {}).get("start_method") if strategy != "auto" else None
    methods = multiprocessing.get_all_start_methods()
    if method in ("fork", "forkserver", "spawn") and method not in methods:
        raise InvalidArgument(f"--strategy {strategy!r} starts its ranks with {method!r}, which this platform cannot "
                              f"(its start methods: {', '.join(methods)}): use 'ddp' or 'ddp_spawn'")
    return strategy


def wait_at_most(trainer: L.Trainer, timeout_s: float) -> None:
    """Have the ranks of ``trainer``'s run wait ``timeout_s`` seconds for each other, not Lightning's half hour.

    A machine of a multi-node run that was never started, or that cannot reach node 0 (a firewall, another
    ``MASTER_PORT``), kept the others waiting 30 minutes (``torch.distributed``'s default) before they failed.
    Lightning's :class:`~lightning.pytorch.strategies.DDPStrategy` takes the wait as ``timeout`` when it is made;
    the trainer has made it from the ``strategy`` name already, so it is set on the made one, which keeps it as
    ``_timeout`` (Lightning 2.6) and passes it to ``init_process_group``. A run of one process has no other ranks
    to wait for, and its strategy no timeout: nothing is set.
    """
    from datetime import timedelta

    from lightning.pytorch.strategies import DDPStrategy

    strategy = trainer.strategy
    if isinstance(strategy, DDPStrategy):
        strategy._timeout = timedelta(seconds=timeout_s)


#: The folders a run writes in its ``out``. A file of one of those names was met only as the run first wrote there: at
#: its first checkpoint (``checkpoints``, after a validation had exported its policy files) or at the end of a
#: distributed run (``ranks``), one line ("File exists") after the training it lost.
RUN_FOLDERS = ("checkpoints", "logs", "tensorboard", "teacher", "ranks")


@holds_folder("out", "--out", slurm=True)  # one run at a time in a folder (a SLURM job's tasks: one run)
@stray_ranks_hidden  # LOCAL_RANK=1 left in the shell: no logs were written, a rank other than 0 writes none
def pretrain(
    config: PretrainConfig, out: str | os.PathLike[str], *, resume: bool = False, devices: int = 1,
    strategy: str = "auto", num_nodes: int = 1, progress: bool | None = None,
    export: str | os.PathLike[str] | None = None, jobs: int | None = None, timeout_s: float | None = None,
) -> dict[str, Any]:
    """Pretrain a policy as ``config`` says; logs and checkpoints under ``out``.

    Args:
        config (PretrainConfig): every hyperparameter.
        out (str or Path): output folder: ``logs/`` (CSV), ``tensorboard/``, ``checkpoints/last.ckpt``,
            ``policy.ckpt``, ``best.ckpt`` (where a validation on schedule ran), ``teacher/`` (with
            ``data.teacher_budget``) and ``ranks/`` (a run of several processes).
        resume (bool, optional): continue from ``out/checkpoints/last.ckpt`` if it exists; without it,
            a folder that holds a run already is refused (default: :obj:`False`). A folder with no ``last.ckpt``
            whose exported policies a run of this config writes before its first checkpoint (a kill came between the
            first validation's export and that checkpoint) starts the run again.
        devices (int, optional): processes (data-parallel ranks) (default: 1).
        strategy (str, optional): Lightning's strategy, e.g. ``"ddp"`` or ``"ddp_spawn"`` for ``devices > 1``
            (default: ``"auto"``).
        num_nodes (int, optional): machines of a multi-node run; Lightning reads ``MASTER_ADDR``,
            ``MASTER_PORT`` and ``NODE_RANK`` from the environment (default: 1).
        progress (bool or None, optional): show Lightning's progress bar (True), nothing (False), or the bar on a
            terminal and a line every half minute elsewhere, e.g. in a log file (None; default).
        export (str or Path, optional): also copy the policy with the best validation there (e.g.
            ``checkpoints/gnplace-base.ckpt``).
        jobs (int, optional): worker processes of the teacher searches (``data.teacher_budget``); 1 runs them in
            this process. They do not change what is searched (default: one per core).
        timeout_s (float, optional): seconds a rank of a run of several processes waits for the others, when they
            meet at the start and in each exchange, before the run ends with an error; it sets Lightning's
            ``DDPStrategy(timeout=...)`` (default: None, Lightning's 1,800; at most
            :data:`~gnplace.limits.MAX_TIMEOUT_S`).

    Returns:
        dict: ``iterations``, ``wall_seconds`` (the run's, teacher searches and earlier sessions included),
        ``validation`` (the last), ``policy`` (its path), ``best`` (``best.ckpt``'s path, None where none was
        written), ``best_validation`` (its score), ``already_done`` (the run had finished before: nothing trained)
        and ``rank`` (this process's: a run of several returns on each).

    Raises:
        InvalidCheckpoint: if ``resume`` finds a checkpoint that is unreadable, foreign or of another config.
        InvalidArgument: if ``out`` holds a run already and ``resume`` is off, or ``config`` is no
            :class:`PretrainConfig` (a file's path: :func:`load_pretrain_config` reads it).
    """
    began = time.monotonic()  # the run's wall time counts its teacher searches (most of a constructor's run)

    from gnplace.callbacks import deterministic_mode_kept
    from gnplace.train import PlacementDataModule, PlacementLearner

    if not isinstance(config, PretrainConfig):  # a file's path or a dict was an AttributeError ('data') mid-way
        raise InvalidArgument("pretrain's config is a PretrainConfig (gnplace.pretrain.load_pretrain_config(path)), "
                              f"got {reprlib.repr(config)}")
    if devices < 1 or num_nodes < 1 or (jobs is not None and jobs < 1):
        raise InvalidArgument(f"devices, num_nodes and jobs must be >= 1, got {devices}, {num_nodes}, {jobs}")
    if timeout_s is not None:
        check_timeout(timeout_s)
    cores = available_cores()
    if devices > cores:  # CPU ranks sharing cores only slow each other (64 on 2 cores: silent for minutes)
        raise InvalidArgument(f"{devices} processes on this machine need a core each, and it gives this process "
                              f"{cores}: use --devices {cores} or fewer, and --num-nodes for more machines")
    check_strategy(strategy)
    if export is not None:
        from gnplace.graph_io import check_writable

        check_writable(export, "export path")  # refused now, not after the whole run
    out = Path(out)
    for name in ("checkpoints", "checkpoints/last.ckpt", "policy.ckpt", "best.ckpt", "logs", "tensorboard"):
        refuse_link(out / name, "pretrain")  # a shared run folder's link: its checkpoints written out of the folder
    for name in RUN_FOLDERS:  # a file there failed the run as it first wrote in it ("OUT/checkpoints: File exists")
        if (out / name).exists() and not (out / name).is_dir():
            raise InvalidArgument(f"{out / name}: is a file, where pretrain keeps its {name} folder: move it away or "
                                  "use another --out")
    last = out / "checkpoints" / "last.ckpt"
    ckpt_path = None
    # a new run would overwrite the earlier run's checkpoints (checked by rank 0, not by the ranks it launches)
    if last.exists() and not resume and not is_launched_rank(slurm=True):
        raise InvalidArgument(f"{out} holds a run already ({last.relative_to(out)}): --resume it, or use another --out")
    exported = exported_files(out)
    # stopped before its first checkpoint: with --resume, a run of this config killed between its first validation's
    # export and the checkpoint that follows it starts again (the same config and seed write the same files)
    if exported and not last.exists() and not is_launched_rank(slurm=True) \
            and not (resume and _exported_by(out, exported, config)):
        raise InvalidArgument(f"{out} holds {exported[0]} of an earlier run but no {last.relative_to(out)} to resume "
                              "from: use another --out, or move them away")
    pairs, val_pairs, val_families = _pairs_and_families(config)
    processes = devices * num_nodes
    if min(config.schedule.pairs_per_step, len(pairs)) < processes:  # a rank without a pair has no gradient to share
        raise InvalidArgument(f"{processes} processes need a pair each every iteration: schedule.pairs_per_step "
                              f"({config.schedule.pairs_per_step}) and the training pairs ({len(pairs)}) must be at "
                              f"least {processes}")
    graphs = check_graph_files(pairs, val_pairs)  # a file that is no graph was refused when first drawn
    check_pairs_fit(config, pairs, val_pairs, graphs)  # (a pair nothing fits trained on overflows alone)
    del graphs  # the data module reads each pair's graph when it draws it
    digest = pairs_digest(pairs, val_pairs, config.data.teacher_budget)
    if resume and last.exists():
        done = check_resumable(last, config, digest, processes=processes)
        policy_meta = _exported_meta(out / "policy.ckpt")
        _check_best_readable(out / "best.ckpt")  # read at the first export: a damaged one ended the run there
        if done >= config.schedule.iterations and policy_meta.get("iterations") == done:
            return _finished(out, export, policy_meta)  # nothing left to train: leave every file as it is
        # else a run stopped in its last iteration (saved, not exported): the fit exports it, training nothing
        ckpt_path = str(last)
    schedule = config.schedule
    learner = PlacementLearner(config.learner)  # its settings are checked before any teacher search runs (minutes)
    starts = teacher_placements(pairs, config.data.teacher_budget, config.learner.seed, out / "teacher",
                                workers=jobs, progress=progress) if config.data.teacher_budget else {}
    data = PlacementDataModule(pairs, pairs_per_step=schedule.pairs_per_step, steps_per_epoch=schedule.steps_per_epoch,
                               max_nodes=config.data.max_nodes, seed=config.learner.seed, val_pairs=val_pairs,
                               modules=config.data.modules, anchored=config.data.anchored, starts=starts,
                               val_families=val_families)
    # small tensors: one thread per process is fastest, and deterministic; the caller's own count back afterwards,
    # and the caller's deterministic-algorithms mode, which the trainer turns off
    with torch_threads(1), deterministic_mode_kept():
        return _fit(config, out, learner, data, digest=digest, began=began, ckpt_path=ckpt_path, devices=devices,
                    num_nodes=num_nodes, strategy=strategy, export=export, progress=progress, timeout_s=timeout_s)


def _fit(
    config: PretrainConfig, out: Path, learner: Any, data: Any, *, digest: str, began: float, ckpt_path: str | None,
    devices: int, num_nodes: int, strategy: str, export: str | os.PathLike[str] | None, progress: bool | None,
    timeout_s: float | None = None,
) -> dict[str, Any]:
    """Train ``learner`` on ``data`` with Lightning, export the best policy, and return :func:`pretrain`'s summary.

    ``learner`` is the :class:`~gnplace.train.PlacementLearner`, ``data`` the
    :class:`~gnplace.train.PlacementDataModule` of the run's pairs (``digest``: :func:`pairs_digest`); ``began`` is
    the run's start (:func:`time.monotonic` seconds), ``ckpt_path`` the checkpoint resumed from, if any.
    """
    from lightning.pytorch.loggers import CSVLogger, TensorBoardLogger

    from gnplace.callbacks import (
        AtomicCheckpointIO,
        EventFilesClosedAtExit,
        QuietSpawnedRanks,
        StopAfter,
        TimedCheckpoint,
        fit_interruptibly,
        progress_callbacks,
        quiet_lightning,
    )

    schedule, last = config.schedule, out / "checkpoints" / "last.ckpt"
    bars = progress_callbacks(progress, "pretrain", schedule.iterations)
    exporter = ExportPolicy(out / "policy.ckpt", config, digest, started=began)
    saver = TimedCheckpoint(last, schedule.checkpoint_every_s)
    from lightning.fabric.utilities.exceptions import MisconfigurationException

    try:
        with quiet_lightning():  # its start-up lines (no GPU, no TPU, a logging service's advert) say nothing here
            trainer = L.Trainer(
                # StopAfter alone ends the run: an epoch limit cut an extended run short (a run stopped mid-epoch
                # resumes into a fresh epoch, so a run extended from 3 to 6 iterations, 2 per epoch, ended at 5)
                max_epochs=-1,
                # validation every steps_per_epoch iterations of the run, counted across resumes: after an epoch's
                # end a run resumed mid-epoch started a fresh epoch, and validated at other iterations
                check_val_every_n_epoch=None, val_check_interval=schedule.steps_per_epoch,
                accelerator="cpu", devices=devices, num_nodes=num_nodes, strategy=strategy,
                enable_checkpointing=False,
                # the last save after the export at the end: a finished last.ckpt never sits beside an older policy
                callbacks=[EndWithLauncher(), EventFilesClosedAtExit(), QuietSpawnedRanks(), OneThread(),
                           StopAfter(schedule.iterations), exporter, RankDigest(out / "ranks"),
                           ResumedTogether(Path(ckpt_path) if ckpt_path is not None else None), saver, *bars],
                logger=[CSVLogger(out, name="logs"), TensorBoardLogger(out, name="tensorboard")], log_every_n_steps=1,
                enable_progress_bar=bool(bars), enable_model_summary=False, default_root_dir=out,
                num_sanity_val_steps=0, use_distributed_sampler=False, deterministic=False,
                plugins=[AtomicCheckpointIO()],
            )
    except (ValueError, MisconfigurationException) as err:  # a strategy this machine cannot run (fsdp on CPUs, ...)
        raise InvalidArgument(f"--strategy {strategy!r}: {' '.join(str(err).split())}") from None
    except RuntimeError as err:  # Lightning's check of a SLURM job's variables (--ntasks without --ntasks-per-node)
        if "SLURM" not in str(err):
            raise
        raise InvalidArgument(f"this SLURM job: {' '.join(str(err).split())}") from None
    _check_ranks_can_start(trainer, strategy)
    if timeout_s is not None:
        wait_at_most(trainer, timeout_s)
    if _spawned(trainer):
        import multiprocessing

        saver.stop_request = multiprocessing.get_context("spawn").Event()  # the ranks get it with the trainer
    # rank 0 of ddp is this process: the cores its ranks shared (PlacementLearner.setup) are the caller's again
    with quiet_lightning(), threads_kept():
        try:
            fit_interruptibly(trainer, learner, datamodule=data, ckpt_path=ckpt_path,
                              weights_only=True)  # TimedCheckpoint saves last.ckpt
        except KeyboardInterrupt:
            # a Ctrl-C in a terminal reaches the ranks too; a SIGINT to this pid alone (kill -INT PID) reached only
            # this launcher, which Lightning stops without a word to its ranks: it then waited at exit for ranks
            # that trained on to the run's end. They stop after the iteration under way, saved first, as on Ctrl-C
            # (an event, not a signal: a second SIGINT would stop at once, unsaved, a rank the Ctrl-C reached)
            if saver.stop_request is not None:
                saver.stop_request.set()
            raise
    if _spawned(trainer):  # the ranks trained copies of `learner` in other processes: their files tell the result
        summary = _finished(out, export)
        summary["already_done"] = False
        return summary
    if trainer.global_rank == 0 and export is not None:
        chosen = exporter.best_path if exporter.best_path.exists() else out / "policy.ckpt"
        write_atomically(export, chosen.read_bytes())
    return {"iterations": int(learner.iteration), "wall_seconds": round(exporter.elapsed(), 1),
            "validation": dict(learner.last_validation), "policy": str(out / "policy.ckpt"),
            "best": str(exporter.best_path) if exporter.best_path.exists() else None,  # no validation: none written
            "best_validation": _finite_or_none(exporter.best_score),
            "already_done": False,  # the same keys whichever way the run ends (a finished run's: True)
            "rank": int(trainer.global_rank)}


def _check_ranks_can_start(trainer: L.Trainer, strategy: str) -> None:
    """Refuse, before the run, ranks that this process would start by running a program it does not have.

    ``ddp`` (and ``auto`` for several devices) starts ranks 1 and up by running this program's command again
    (``sys.argv``): from ``python -c``, standard input or an interpreter embedded with no ``sys.argv[0]``, that
    is no program (``can't open file '/cwd/-c'``), and Lightning then killed this process with SIGKILL, no
    message said why. ``ddp_spawn`` starts them as :mod:`multiprocessing` does, which runs the calling script
    again: refused from its unguarded top level (:func:`~gnplace.workers.check_main_guarded`).

    Raises:
        InvalidArgument: naming the strategy and what to do instead.
    """
    from lightning.pytorch.strategies.launchers.multiprocessing import _MultiProcessingLauncher  # no public names
    from lightning.pytorch.strategies.launchers.subprocess_script import _SubprocessScriptLauncher

    launcher = getattr(trainer.strategy, "launcher", None)
    if isinstance(launcher, _MultiProcessingLauncher) and launcher._start_method != "fork":
        check_main_guarded(f"use strategy='ddp' (not {strategy!r}), which starts no such processes")
    if not isinstance(launcher, _SubprocessScriptLauncher) or launcher.num_processes < 2 \
            or launcher.cluster_environment.creates_processes_externally:  # torchrun's and the other nodes' ranks
        return
    main = sys.modules.get("__main__")
    program = sys.argv[0] if sys.argv else ""
    if getattr(main, "__spec__", None) is None and not os.path.isfile(program):  # else run again as `-m NAME`
        raise InvalidArgument(f"--strategy {strategy!r} with {launcher.num_processes} devices starts the other ranks "
                              f"by running this program again, and there is none to run (sys.argv[0] is {program!r}): "
                              "run it from a script file, or use strategy='ddp_spawn'")


def _spawned(trainer: L.Trainer) -> bool:
    """Whether the trainer ran its ranks in processes it started (``ddp_spawn``, ``ddp_fork``), not in this one."""
    from lightning.pytorch.strategies.launchers.multiprocessing import _MultiProcessingLauncher  # no public name

    return isinstance(getattr(trainer.strategy, "launcher", None), _MultiProcessingLauncher)


def _finite_or_none(value: float) -> float | None:
    """``value``, or None where it is not finite (JSON has no Infinity: no validation ran)."""
    return value if math.isfinite(value) else None
