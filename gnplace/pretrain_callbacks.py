"""Pretraining's own Lightning callbacks: the policy's export, and the ranks of a distributed run kept together.

:class:`ExportPolicy` writes ``policy.ckpt`` and ``best.ckpt`` and keeps the run's state in Lightning's checkpoints;
:class:`EndWithLauncher`, :class:`OneThread`, :class:`ResumedTogether` and :class:`RankDigest` keep the ranks of a
run of several processes one run. The callbacks that training, pretraining and the searches share are
:mod:`gnplace.callbacks`'; :func:`gnplace.pretrain.pretrain` gives the trainer both. Lightning keeps a callback's
state under its class's name (``state_key``): a name here is part of every ``last.ckpt`` a run wrote.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import Any

import lightning as L

from gnplace.exceptions import InvalidCheckpoint
from gnplace.graph_io import write_atomically
from gnplace.pretrain_config import PretrainConfig
from gnplace.pretrain_pairs import imitation_recipe

__all__ = ["ExportPolicy", "EndWithLauncher", "OneThread", "ResumedTogether", "check_resumed_together",
           "RankDigest"]


class ExportPolicy(L.Callback):
    """Write the policy alone (:func:`~gnplace.policy.checkpoint.save_policy`) after each validation and at the end.

    Only rank 0 writes. The meta records the iterations done (``best.ckpt``'s: the iteration its weights
    come from), the run's config and the last validation; the wall seconds of the run (across resumes) are
    kept in Lightning's checkpoints and the run's summary, so that the same config and seed export the same
    file. So are the pairs' digest and the :func:`~gnplace.pretrain_pairs.imitation_recipe` the run started under,
    which a resume is checked against. A resumed run may change :data:`~gnplace.pretrain_resume.RESUMABLE_CHANGES`
    (run longer): a ``best.ckpt`` an earlier session wrote is then given this run's config in its meta
    (:meth:`name_config_in_best`), so that it is the file a run of that config from the start writes.

    Args:
        path (Path): the policy checkpoint to write.
        config (PretrainConfig): the run's config, recorded in the meta.
        pairs (str, optional): the pairs' digest (:func:`~gnplace.pretrain_pairs.pairs_digest`) (default: ``""``).
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

        A resumed run may change :data:`~gnplace.pretrain_resume.RESUMABLE_CHANGES` (``schedule.iterations=2``,
        then ``=4``): while its best validation is still an earlier session's, ``best.ckpt`` (and the ``--export``
        copied from it) named that session's config and ``config_digest``. The weights and the rest of the meta (the
        iteration they come from, their validation, the processes) stay; only rank 0 calls it (from :meth:`export`),
        once a session.
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
    """Train on one torch thread in every rank, as a run of one process does (``pretrain``'s ``torch_threads(1)``).

    Lightning's launchers give each rank ``cores // processes per machine`` threads where ``OMP_NUM_THREADS`` is
    unset, after :func:`~gnplace.pretrain.pretrain` set one: a run of two machines with one rank each on 2-core
    hosts trained on two threads, and its ``policy.ckpt`` differed from the same config's under ``--devices 2`` on
    one host (the PPO statistics from the 7th digit of the second step on). The count then depended on the
    machine's cores.
    """

    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        """One intra-op thread, after the launcher set its own count (``pretrain`` gives the caller's back)."""
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
