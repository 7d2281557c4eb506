"""Pretraining one placement policy across graph families and clusters: data, run, export.

Its config is :mod:`gnplace.pretrain_config` (re-exported here), which reads without importing Lightning. This
module is the entry point, :func:`pretrain`, and its checks of the launch. The pairs a run trains on are made and
checked by :mod:`gnplace.pretrain_pairs`, its own Lightning callbacks are :mod:`gnplace.pretrain_callbacks`, and
the checks of a resume :mod:`gnplace.pretrain_resume`; every name they took from this module is importable from it.

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

import math
import os
import reprlib
import sys
import time
from pathlib import Path
from typing import Any

import lightning as L

from gnplace.exceptions import InvalidArgument
from gnplace.graph_io import refuse_link, write_atomically
from gnplace.limits import as_path, check_timeout, is_whole
from gnplace.pretrain_callbacks import (
    EndWithLauncher,
    ExportPolicy,
    OneThread,
    RankDigest,
    ResumedTogether,
    check_resumed_together,
)
from gnplace.pretrain_config import (  # re-exported: the config is read before Lightning's import
    DEFAULT_CONFIG,
    MAX_RANDOM_CLUSTERS,
    DataConfig,
    PretrainConfig,
    ScheduleConfig,
    load_pretrain_config,
)
from gnplace.pretrain_pairs import (
    check_graph_files,
    check_pairs_fit,
    cluster_spec,
    imitation_recipe,
    pairs_and_families,
    pairs_digest,
    pretrain_pairs,
    teacher_placements,
)
from gnplace.pretrain_resume import (
    RESUMABLE_CHANGES,
    check_best_readable,
    check_resumable,
    exported_by,
    exported_files,
    exported_meta,
    finished_summary,
    resume_starts_afresh,
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
    "DEFAULT_CONFIG", "MAX_RANDOM_CLUSTERS", "exported_files", "resume_starts_afresh", "RESUMABLE_CHANGES",
]
# (every name that moved to pretrain_pairs, pretrain_callbacks and pretrain_resume is still importable from here)


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
            :class:`PretrainConfig` (a file's path: :func:`load_pretrain_config` reads it); if ``devices``,
            ``num_nodes`` or ``jobs`` is no whole number >= 1, ``resume`` or ``progress`` no bool, or ``out`` or
            ``export`` no path.
    """
    began = time.monotonic()  # the run's wall time counts its teacher searches (most of a constructor's run)

    from gnplace.callbacks import deterministic_mode_kept
    from gnplace.train import PlacementDataModule, PlacementLearner

    if not isinstance(config, PretrainConfig):  # a file's path or a dict was an AttributeError ('data') mid-way
        raise InvalidArgument("pretrain's config is a PretrainConfig (gnplace.pretrain.load_pretrain_config(path)), "
                              f"got {reprlib.repr(config)}")
    if not all(is_whole(n) and n >= 1 for n in (devices, num_nodes, 1 if jobs is None else jobs)):
        # "2" or None was a TypeError ('<'), 1.5 and True were taken
        raise InvalidArgument(f"devices, num_nodes and jobs must be >= 1, got {devices!r}, {num_nodes!r}, {jobs!r} "
                              "(whole numbers; jobs may be None)")
    devices, num_nodes, jobs = int(devices), int(num_nodes), None if jobs is None else int(jobs)
    from gnplace.placers.base import check_flag

    resume = check_flag("pretrain", "resume", resume)  # "no" resumed
    progress = None if progress is None else check_flag("pretrain", "progress", progress)
    as_path(out, "pretrain output folder")  # None was pathlib's TypeError
    if timeout_s is not None:
        check_timeout(timeout_s)
    cores = available_cores()
    if devices > cores:  # CPU ranks sharing cores only slow each other (64 on 2 cores: silent for minutes)
        raise InvalidArgument(f"{devices} processes on this machine need a core each, and it gives this process "
                              f"{cores}: use --devices {cores} or fewer, and --num-nodes for more machines")
    check_strategy(strategy)
    if export is not None:
        from gnplace.graph_io import check_writable

        check_writable(as_path(export, "export path"), "export path")  # refused now, not after the whole run
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
            and not (resume and exported_by(out, exported, config)):
        raise InvalidArgument(f"{out} holds {exported[0]} of an earlier run but no {last.relative_to(out)} to resume "
                              "from: use another --out, or move them away")
    pairs, val_pairs, val_families = pairs_and_families(config)
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
        policy_meta = exported_meta(out / "policy.ckpt")
        check_best_readable(out / "best.ckpt")  # read at the first export: a damaged one ended the run there
        if done >= config.schedule.iterations and policy_meta.get("iterations") == done:
            return finished_summary(out, export, policy_meta)  # nothing left to train: leave every file as it is
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
    :class:`~gnplace.train.PlacementDataModule` of the run's pairs (``digest``:
    :func:`~gnplace.pretrain_pairs.pairs_digest`); ``began`` is the run's start (:func:`time.monotonic` seconds),
    ``ckpt_path`` the checkpoint resumed from, if any.
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
        summary = finished_summary(out, export)
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
