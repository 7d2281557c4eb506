"""How runs under Lightning stop, save and show progress: callbacks and checkpoint I/O.

Training (:func:`gnplace.train.fit`), pretraining (:func:`gnplace.pretrain.pretrain`) and the search
placers (:mod:`gnplace.rl.search`, fine-tuning included) all run a ``Trainer`` with manual optimisation
and no epoch limit. What they share is here:

- :class:`StopAfter` and :class:`StopAtBudget` end a run after a number of iterations or when a
  budget of timer evaluations runs out;
- :class:`TimedCheckpoint` writes a checkpoint every few minutes, on the first Ctrl-C, on SIGTERM and at
  the end, through :class:`AtomicCheckpointIO`, so that a kill leaves the previous checkpoint whole;
- :func:`fit_interruptibly` hands Ctrl-C back to the caller as a ``KeyboardInterrupt``, and SIGTERM as
  :class:`~gnplace.exceptions.Terminated`;
- :class:`RunProgressBar` titles Lightning's rich bar for such runs, :class:`ProgressLines` writes
  their progress as lines where stderr is not a terminal (:func:`progress_callbacks` picks one), and
  :func:`quiet_lightning` silences what Lightning prints that says nothing to a placer's user.
"""

from __future__ import annotations

import contextlib
import errno
import signal
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, cast

import lightning as L
from lightning.pytorch.callbacks import ProgressBar, RichProgressBar
from lightning.pytorch.plugins.io import TorchCheckpointIO
from lightning.pytorch.utilities.exceptions import SIGTERMException

from gnplace.exceptions import ExecutionFailed, Terminated, after_interrupt, first_line
from gnplace.progress import ProgressLine, show_bar
from gnplace.quiet import ignored_warnings, logger_at_error
from gnplace.workers import SharedSetting, sigterm_left_default

__all__ = ["StopAfter", "StopAtBudget", "TimedCheckpoint", "AtomicCheckpointIO", "RunProgressBar", "ProgressLines",
           "progress_callbacks", "fit_interruptibly", "quiet_lightning", "single_process_plugins",
           "deterministic_mode_kept"]


class StopAfter(L.Callback):
    """Stop training once the learner has done ``iterations`` iterations (imitation included).

    Args:
        iterations (int): the learner's iteration count at which to stop.
    """

    def __init__(self, iterations: int) -> None:
        self.iterations = iterations

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        """Stop before any iteration when a resumed learner has done the count already."""
        self.on_train_batch_end(trainer, pl_module)

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, *args: Any) -> None:
        """Ask the trainer to stop after the iteration that reaches the count."""
        if getattr(pl_module, "iteration", 0) >= self.iterations:
            trainer.should_stop = True


class RunProgressBar(RichProgressBar):
    """Lightning's rich progress bar, titled for a run that :class:`StopAfter` ends, not an epoch limit, on stderr.

    Such a run sets ``max_epochs=-1``, which the stock bar writes as "Epoch 3/-2"; this one writes "Epoch 3".
    The stock bar draws on stdout: ``gnplace finetune ... > out.txt`` from a terminal showed nothing there and
    left the bar's last frame in ``out.txt``, the command's output; it is drawn on stderr, as every bar of
    :mod:`gnplace.progress` is, and rich's global console is given back at the end of the run as the caller had it
    (Lightning reconfigures it for the bar; a plain one put in its place lost a program's own settings of it, its
    width, its forced terminal).

    With ``count`` other than ``"iterations"`` (a search's ``"evaluations"``, a metric its learner shows on the
    bar) and a ``total``, the bar counts that metric up to ``total``: a search's bar counted its iterations against
    the most it may run (four times those of a budget of all-new batches), so a 300-evaluation run ended at 20 of
    80 with a time left for 80. Whole numbers show as such ("evaluations: 66", not "66.000"), and Lightning's
    ``v_num`` (the logger's version, 0) not at all.

    Args:
        total (int or None, optional): the count at which the run ends (None: the epoch's batches).
        count (str, optional): what the bar counts (default: ``"iterations"``, the batches).
    """

    def __init__(self, total: int | None = None, count: str = "iterations") -> None:
        super().__init__(console_kwargs={"stderr": True})  # Lightning makes it rich's console for the run
        self._callers_console: dict[str, Any] | None = None
        self.count_total = total if count != "iterations" else None
        self.count = count

    def on_train_epoch_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        """Start the bar; its total is ``total`` where it counts a metric."""
        super().on_train_epoch_start(trainer, pl_module)
        if self.count_total is not None and self.progress is not None and self.train_progress_bar_id is not None:
            self.progress.update(self.train_progress_bar_id, total=self.count_total)

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, *args: Any) -> None:
        """Advance the bar: by a batch, or to the metric it counts as the learner last showed it."""
        super().on_train_batch_end(trainer, pl_module, *args)
        done = trainer.progress_bar_metrics.get(self.count) if self.count_total is not None else None
        if done is not None and self.progress is not None and self.train_progress_bar_id is not None:
            self.progress.update(self.train_progress_bar_id, completed=min(int(done), self.count_total or 0))
            self.refresh()

    def get_metrics(
        self, trainer: L.Trainer, pl_module: L.LightningModule
    ) -> dict[str, int | str | float | dict[str, float]]:
        """The metrics shown beside the bar: whole numbers as ints, without the logger's ``v_num``."""
        items = dict(super().get_metrics(trainer, pl_module))
        items.pop("v_num", None)
        return {k: int(v) if isinstance(v, float) and v.is_integer() else v for k, v in items.items()}

    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        """Note rich's global console as the caller has it, before Lightning reconfigures it for the bar."""
        super().setup(trainer, pl_module, stage)
        from rich import get_console

        self._callers_console = get_console().__dict__  # reconfigure gives the console another __dict__

    def teardown(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        """Stop the bar; rich's global console is the caller's again (on stdout, as after Lightning's own bar)."""
        super().teardown(trainer, pl_module, stage)
        self._give_back_console()

    def on_exception(self, trainer: L.Trainer, pl_module: L.LightningModule, exception: BaseException) -> None:
        """Stop the bar; rich's global console is the caller's again: Lightning calls no ``teardown`` after an error."""
        super().on_exception(trainer, pl_module, exception)
        self._give_back_console()

    def _give_back_console(self) -> None:
        """Put rich's global console back as :meth:`setup` found it (a plain one where none was noted)."""
        from rich import get_console, reconfigure

        kept, self._callers_console = self._callers_console, None
        if kept is None:  # torn down without a set-up: a plain console, as before
            reconfigure()
        else:
            get_console().__dict__ = kept

    def _get_train_description(self, current_epoch: int) -> str:  # the stock bar's title hook (Lightning 2.x)
        title = self.count if self.count_total is not None else f"Epoch {current_epoch}"
        return f"{title:{len(self.validation_description)}}"  # padded as the stock bar does, against flicker


class ProgressLines(ProgressBar):
    """Lightning's progress as plain lines on stderr, for a log file or a batch job's output.

    Where stderr is not a terminal a rich bar is drawn once, at the end, so a run of half an hour showed
    nothing until it ended. This bar writes a :class:`~gnplace.progress.ProgressLine` instead: at most
    every ``every_s`` seconds the count done of the run's total with the time elapsed and about how much
    is left, then the metrics the learner shows on a bar (a search's ``evaluations`` and ``best``); after
    each validation its results (``val/...``); at the end of a run that wrote a line, a last one. Rank 0
    alone writes.

    Args:
        label (str): what runs, e.g. ``"pretrain"``.
        total (int or None): the count at which the run ends (None: unknown).
        count (str, optional): what is counted: ``"iterations"`` (the learner's ``iteration``) or the name of
            a metric the learner logs on its bar, e.g. ``"evaluations"`` (default: ``"iterations"``).
        every_s (float or None, optional): seconds between two lines (None: :data:`~gnplace.progress.LINE_EVERY_S`;
            default).
    """

    def __init__(self, label: str, total: int | None, count: str = "iterations",
                 every_s: float | None = None) -> None:
        super().__init__()
        self.label, self.total, self.count, self.every_s = label, total, count, every_s
        self._enabled = True
        self._line = ProgressLine(label, total, count, every_s)

    def disable(self) -> None:
        """Write nothing (Lightning calls it on every rank but 0)."""
        self._enabled = False

    def enable(self) -> None:
        """Write the lines again."""
        self._enabled = True

    def _done(self, trainer: L.Trainer, pl_module: L.LightningModule) -> tuple[int | None, str]:
        """The count done (None: not logged yet), and the bar's other metrics as ``name value`` pairs."""
        metrics = {k: v for k, v in self.get_metrics(trainer, pl_module).items() if k != "v_num"}
        done = metrics.pop(self.count, None) if self.count != "iterations" else getattr(pl_module, "iteration", None)
        shown = ", ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}" for k, v in metrics.items())
        return (None if done is None else int(float(cast(Any, done)))), shown

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        """Start the clock; the first count seen is where the rate is measured from (a resumed run's)."""
        self._line = ProgressLine(self.label, self.total, self.count, self.every_s)
        self.on_train_batch_end(trainer, pl_module)

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, *args: Any) -> None:
        """A line when the interval has passed."""
        done, shown = self._done(trainer, pl_module) if self._enabled else (None, "")
        if done is not None:
            self._line.update(done, note=shown)

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        """A line of the validation's results."""
        if not self._enabled or trainer.sanity_checking:
            return
        results = {k: v for k, v in trainer.callback_metrics.items() if k.startswith("val/")}
        done = self._done(trainer, pl_module)[0]
        if results:
            after = f" after {done:,} {self.count}" if done is not None else ""
            self._line.write(f"validation{after}: "
                             + ", ".join(f"{k} {float(results[k]):.4f}" for k in sorted(results, key=_overall_first)))

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        """A last line, where the run wrote one before."""
        done, shown = self._done(trainer, pl_module) if self._enabled and self._line.lines else (None, "")
        if done is not None:
            self._line.update(done, note=shown, force=True)


def progress_callbacks(enabled: bool | None, label: str, total: int | None,
                       count: str = "iterations") -> list[ProgressBar]:
    """The progress bar of a run: rich on a terminal, :class:`ProgressLines` elsewhere, or none.

    Args:
        enabled (bool or None): show the bar (True), nothing (False), or the bar on a terminal and lines elsewhere
            (None).
        label (str): what runs (the lines' prefix).
        total (int or None): the count at which the run ends (None: unknown).
        count (str, optional): what the lines count (see :class:`ProgressLines`; default: ``"iterations"``).

    Returns:
        list: the callback to pass to ``L.Trainer`` (with ``enable_progress_bar=bool(list)``), or no callback.

    Examples:
        >>> progress_callbacks(False, "pretrain", 300)
        []
        >>> type(progress_callbacks(True, "pretrain", 300)[0]).__name__
        'RunProgressBar'
    """
    if enabled is False:
        return []
    if show_bar(enabled):
        return [RunProgressBar(total, count)]
    return [ProgressLines(label, total, count)]


class StopAtBudget(L.Callback):
    """Stop training once a budgeted timer has fewer than ``keep`` evaluations left.

    A search that times each distinct placement once (:attr:`~gnplace.rl.problem.PlacementProblem.memo`)
    spends a varying number of evaluations per iteration; it iterates until the next batch might not
    fit in what is left of its budget.

    A resumed run restores its problem, evaluations included, from the checkpoint; ``spent`` (a
    callable giving the problem's :attr:`~gnplace.rl.problem.PlacementProblem.evaluations`) sets the
    timer's count to it when training starts, so that the evaluations spent before the checkpoint
    count against the budget again (without it, a search resumed after a kill spent its budget anew:
    7,950 evaluations for a budget of 6,000).

    Args:
        timer (BudgetedTimer): the timer the learner's placements are timed with.
        keep (int): evaluations that must be left to go on (a batch's samples and what is reserved after it).
        spent (callable): the evaluations spent so far, read after a checkpoint is restored.
    """

    def __init__(self, timer: Any, keep: int, spent: Callable[[], int]) -> None:
        self.timer, self.keep, self.spent = timer, int(keep), spent

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        """Count what the run had spent before its checkpoint (a fresh run: what was spent before training).

        A run stopped (Ctrl-C, SIGTERM) in its last batch saved that batch before this callback could stop
        it: resumed, it stops here, before a batch the budget left cannot cover (one ran, and overran the
        budget or ate the polish reserved after it). A fresh run starts as it always has.
        """
        self.timer.evaluations = int(self.spent())
        if trainer.ckpt_path is not None:  # resumed: as the batch before the checkpoint would have, had it ended
            self.on_train_batch_end(trainer, pl_module)

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, *args: Any) -> None:
        """Ask the trainer to stop when the budget left cannot cover another batch."""
        if self.timer.remaining is not None and self.timer.remaining < self.keep:
            trainer.should_stop = True


class AtomicCheckpointIO(TorchCheckpointIO):
    """Lightning checkpoint I/O that writes a temporary file beside the checkpoint and renames it into place.

    Lightning's own writes its temporary file in the system's temporary folder and moves it: across
    file systems that move is a copy, so a kill or a full disk in the middle left a truncated
    ``last.ckpt`` where the previous one was. Pass it to ``L.Trainer(plugins=[...])``.
    """

    def save_checkpoint(self, checkpoint: dict[str, Any], path: Any, storage_options: Any | None = None) -> None:
        """``torch.save`` to ``path`` atomically (:func:`~gnplace.policy.checkpoint.atomic_torch_save`)."""
        from gnplace.policy.checkpoint import atomic_torch_save

        if storage_options is not None:  # as Lightning's own local I/O: there is nothing to pass them to
            raise TypeError(f"{type(self).__name__} takes no storage_options, got {storage_options!r}")

        atomic_torch_save(checkpoint, path)

    def remove_checkpoint(self, path: Any) -> None:
        """Remove the checkpoint ``path``, and the empty temporary folder of ``ddp_spawn``'s hand-over with it.

        The ranks of ``ddp_spawn`` hand their weights to the launcher in ``.temp.ckpt`` in a folder of their own
        (``tempfile.mkdtemp``), which Lightning removes without the folder: every run left an empty ``tmp*``
        folder in the temporary folder. The folder is removed only when that file was all it held.
        """
        super().remove_checkpoint(path)
        if Path(path).name == _SPAWN_HANDOVER:
            with contextlib.suppress(OSError):  # not empty, or gone: left as it is
                Path(path).parent.rmdir()


_SPAWN_HANDOVER = ".temp.ckpt"  # the file Lightning's ddp_spawn ranks return their weights in


def single_process_plugins() -> list[Any]:
    """The plugins of a trainer that runs in this process alone: :class:`AtomicCheckpointIO` and a plain environment.

    Lightning reads the cluster it runs in from the environment unless told: inside a SLURM job of ``--ntasks=2``
    (an ``sbatch`` script's usual line) ``gnplace finetune`` ended in Lightning's RuntimeError traceback ("You set
    ``--ntasks=2`` in your SLURM bash script, but this variable is not supported"), although one process on one
    device takes no part in the job's ranks. ``LightningEnvironment`` reads none of SLURM's variables.
    """
    from lightning.fabric.plugins.environments import LightningEnvironment

    return [AtomicCheckpointIO(), LightningEnvironment()]


class TimedCheckpoint(L.Callback):
    """Write a Lightning checkpoint to ``path`` every ``every_s`` seconds, on Ctrl-C or SIGTERM and at the end.

    Lightning's ``ModelCheckpoint(train_time_interval=...)`` does not apply to manual optimisation, which
    every learner here uses, so this callback keeps the clock itself. Saving goes through
    ``Trainer.save_checkpoint``; with :class:`AtomicCheckpointIO` it writes a temporary file beside the
    checkpoint and renames it into place, so a kill leaves the previous checkpoint whole. In a
    distributed run rank 0's clock decides for all. The last save runs in the training processes, so
    a run whose ranks were spawned (``ddp_spawn``) saves its trained state, not the launcher's.

    A first Ctrl-C (SIGINT) lets the iteration under way finish, saves it and then stops the run as
    Ctrl-C does (a ``KeyboardInterrupt``), so that ``--resume`` loses nothing; a second stops at once,
    from the last checkpoint. Where the handler cannot be installed (not the main thread, or SIGINT
    ignored or handled by the caller) Ctrl-C acts as before. Ranks that a launcher spawned (``ddp_spawn``) take
    ``stop_request``, an event the launcher sets when a Ctrl-C reached it alone, as that first Ctrl-C
    (:func:`gnplace.pretrain.pretrain`).

    SIGTERM (what ``kill``, ``timeout``, a batch scheduler or a container runtime sends) is Lightning's
    to catch: its trainer notes it and stops the loop at the end of the iteration under way
    (``SIGTERMException``). That iteration is saved first, so ``--resume`` loses nothing either; a
    second SIGTERM stops at once, as a second Ctrl-C does.

    Args:
        path (str or Path): the checkpoint file (``last.ckpt``).
        every_s (float): seconds between checkpoints.
    """

    def __init__(self, path: str | Path, every_s: float) -> None:
        self.path = Path(path)
        self.every_s = float(every_s)
        self._last = time.monotonic()
        self._interrupted = False
        self._saved_terminated = False
        self._deferred = (False, False)  # (a save waits for the validation under way, a Ctrl-C with it)
        self._previous: Any = None
        self._previous_term: Any = None
        self.stop_request: Any = None  # a multiprocessing Event: set by the launcher of spawned ranks, a first Ctrl-C

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        """Start the clock; take over the first Ctrl-C."""
        self._last = time.monotonic()
        self._interrupted = self._saved_terminated = False
        self._deferred = (False, False)
        if threading.current_thread() is threading.main_thread() \
                and signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            rank = trainer.global_rank

            def stop_after_this_iteration(signum: int, frame: Any) -> None:
                self._interrupted = True
                signal.signal(signal.SIGINT, signal.default_int_handler)  # a second Ctrl-C stops at once
                if rank == 0:
                    _tell("\nstopping after this iteration, which is saved first (Ctrl-C again to stop now)")

            self._previous = signal.signal(signal.SIGINT, stop_after_this_iteration)
        if threading.current_thread() is threading.main_thread() and callable(signal.getsignal(signal.SIGTERM)):
            # Lightning's: it notes the signal for its loop (callable: checked above)
            lightning_term = cast(Callable[[int, Any], Any], signal.getsignal(signal.SIGTERM))
            term_rank = trainer.global_rank

            def stop_at_a_second_sigterm(signum: int, frame: Any) -> None:
                if getattr(trainer, "received_sigterm", False):  # the second: stop now, from the last checkpoint
                    raise Terminated("SIGTERM")
                if not _note_sigterm_without_a_collective(trainer):
                    lightning_term(signum, frame)
                if term_rank == 0:
                    _tell("\nSIGTERM: stopping after this iteration, which is saved first (SIGTERM again to stop now)")

            self._previous_term = signal.signal(signal.SIGTERM, stop_at_a_second_sigterm)

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, *args: Any) -> None:
        """Save when the interval has passed, or after a Ctrl-C (then stop as Ctrl-C does) or a SIGTERM."""
        requested = self.stop_request is not None and self.stop_request.is_set()
        due, interrupted = trainer.strategy.broadcast((time.monotonic() - self._last >= self.every_s,
                                                       self._interrupted or requested))
        # a SIGTERM to any rank stops them all (Lightning stops the loop after this hook, each rank on its own flag)
        terminated = trainer.strategy.reduce_boolean_decision(bool(getattr(trainer, "received_sigterm", False)),
                                                              all=False)
        if (due or interrupted) and not terminated and _validates_next(trainer):
            # the epoch's validation follows this batch: a checkpoint from before it would have a resume skip it
            # (its best.ckpt then differs); saved (and a Ctrl-C obeyed) when it ends. SIGTERM stops now: Lightning
            # cuts the validation short itself.
            self._deferred = (True, interrupted)
            return
        if terminated:  # every rank stops after this batch, whichever got the signal
            _note_sigterm_without_a_collective(trainer)
        if due or interrupted or terminated:
            trainer.save_checkpoint(self.path, weights_only=False)
            self._last = time.monotonic()
            self._saved_terminated = terminated
        if interrupted:
            self._restore()
            raise KeyboardInterrupt

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        """Save a checkpoint deferred to the end of the validation that followed its batch (every rank calls it).

        A run with no checkpoint yet saves here too: a validation exports files (a pretraining run's
        ``policy.ckpt``), and a run killed after them but before its first interval had nothing to resume from.
        """
        deferred, interrupted = self._deferred
        if trainer.sanity_checking:
            return
        if not deferred and trainer.strategy.broadcast(not self.path.exists()):  # rank 0's file decides for all
            deferred = True
        if not deferred:
            return
        self._deferred = (False, False)
        trainer.save_checkpoint(self.path, weights_only=False)
        self._last = time.monotonic()
        if interrupted:
            self._restore()
            raise KeyboardInterrupt

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        """Save the finished run (every rank calls it; rank 0 writes).

        A save that fails here (a full disk, ``OSError``) is a warning, not the run's end: the run is over and its
        result, still in memory, is what the caller writes next (a fine-tuning's ``placement.json``, a few KiB,
        was lost with the search when the last checkpoint, hundreds of KiB, found the disk full). The checkpoint
        before stays whole (written atomically); a ``--resume`` continues from it. A run of several processes still
        ends on it: rank 0 would skip the barrier the others wait at after a save.
        """
        self._restore()
        try:
            trainer.save_checkpoint(self.path, weights_only=False)
        except OSError as err:
            if trainer.world_size > 1:
                raise
            reason = err.strerror or type(err).__name__
            warnings.warn(f"{self.path}: the finished run's last checkpoint could not be written ({reason}); "
                          "the one before is kept", stacklevel=1)  # gnplace's: Lightning's own are silenced

    def on_exception(self, trainer: L.Trainer, pl_module: L.LightningModule, exception: BaseException) -> None:
        """Give Ctrl-C back to the caller; save a run that SIGTERM stopped where no batch's end saw it."""
        self._restore()
        if isinstance(exception, SIGTERMException) and not self._saved_terminated:  # raised between iterations
            trainer.save_checkpoint(self.path, weights_only=False)

    def _restore(self) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
            self._previous = None
        if self._previous_term is not None:  # Lightning's, which it replaces with the caller's when it tears down
            signal.signal(signal.SIGTERM, self._previous_term)
            self._previous_term = None


def _tell(message: str) -> None:
    """Print ``message`` on stderr, flushed; nowhere where stderr is closed (``2>&-``: ``sys.stderr`` is None).

    ``print(file=None)`` prints on stdout: a Ctrl-C or SIGTERM to a run with its stderr closed put its message in the
    command's output (a ``--json`` document), as :meth:`gnplace.progress.ProgressLine.write` did its lines.
    """
    if sys.stderr is not None:
        print(message, file=sys.stderr, flush=True)


def _note_sigterm_without_a_collective(trainer: L.Trainer) -> bool:
    """Note a SIGTERM for a run of several processes as Lightning's handler does, less its broadcast.

    Lightning 2.6's handler broadcasts rank 0's flag from inside the signal handler, where the other ranks
    are in another collective: a ``ddp`` pretraining whose processes all got SIGTERM hung until the
    process group's timeout (30 minutes), and one whose rank 0 alone got it failed "Received data size
    doesn't match expected size". The flag is set here; the other ranks learn it at the batch's end
    (:meth:`TimedCheckpoint.on_train_batch_end`, which sets theirs too: Lightning stops each rank after
    the batch on its own flag, and rank 1 went on to the next batch's collective alone). It
    is not passed on to the launcher's ranks, as Lightning's handler does: a SIGTERM to the process group
    reached them twice, and the second stopped them at once while rank 0 waited for them.

    Returns:
        bool: whether it was noted here (False for a run of one process, or a Lightning without the
        private connector this relies on: its handler is called then).
    """
    connector: Any = getattr(trainer, "_signal_connector", None)
    if trainer.world_size <= 1 or not isinstance(getattr(connector, "received_sigterm", None), bool):
        return False
    connector.received_sigterm = True
    return True


def _isolate_rng_in_turn() -> Callable[[], None]:
    """Lightning's trainers isolate the random generators holding :func:`~gnplace.seed.global_generators_lock`.

    ``Trainer.fit`` saves torch's, numpy's and Python's generators before its sanity check and restores them after
    (``isolate_rng``). Fitted in one thread while another seeded torch's (a placer's initial weights under
    :func:`~gnplace.seed.seeded_torch`), it saved that seeded state and restored it after the other had put the
    caller's back: ``ppo``, ``finetune`` or ``reinforce`` placements in threads at once left torch's generator
    seeded for the rest of the process, and could rewind another thread's draws of its initial weights. Returns
    what puts Lightning's own back.
    """
    from lightning.pytorch.trainer import trainer as trainer_module

    from gnplace.seed import global_generators_lock

    isolate = getattr(trainer_module, "isolate_rng", None)
    if isolate is None:  # a Lightning that isolates otherwise, or not at all
        return lambda: None

    @contextlib.contextmanager
    def in_turn(*args: Any, **kwargs: Any) -> Iterator[None]:
        with global_generators_lock(), isolate(*args, **kwargs):
            yield

    trainer_module.isolate_rng = in_turn

    def back() -> None:
        trainer_module.isolate_rng = isolate

    return back


_ISOLATE_RNG_IN_TURN = SharedSetting(_isolate_rng_in_turn)


def fit_interruptibly(trainer: L.Trainer, *args: Any, **kwargs: Any) -> None:
    """``trainer.fit(*args, **kwargs)``; Ctrl-C reaches the caller as ``KeyboardInterrupt``, SIGTERM as ``Terminated``.

    Lightning answers Ctrl-C by shutting the run down and calling ``sys.exit(1)``: a program or
    notebook that calls :func:`gnplace.finetune.finetune` or :func:`gnplace.pretrain.pretrain` would see a
    ``SystemExit``, as if the run had asked to end the program. Here the interrupt is raised as Python
    raises it anywhere else, with the SIGINT handler the caller had; what :class:`TimedCheckpoint`
    saved stays saved. Lightning answers SIGTERM with its ``SIGTERMException`` (a ``SystemExit`` with
    no status, which would end the program with status 0); it is raised as
    :class:`~gnplace.exceptions.Terminated`.

    A disk that fills up under the run's logs fails a write in Lightning's loggers with an ``OSError`` that names
    no file (``[Errno 28] No space left on device``): it is raised naming the run's folder (the loggers'). The
    TensorBoard event files of a run that failed are closed, whatever of them the disk takes: tensorboardX's exit
    hook flushed them again as the program ended and printed a traceback after the run's error.
    """
    handler = signal.getsignal(signal.SIGINT)
    finished = False
    try:
        # (in gnplace evaluate -j 1, Lightning's own SIGTERM handling: sigterm_left_default)
        with _ISOLATE_RNG_IN_TURN, sigterm_left_default():  # fits in threads at once: see _isolate_rng_in_turn
            trainer.fit(*args, **kwargs)
        finished = True
    except SIGTERMException as err:
        raise Terminated("SIGTERM") from err
    except SystemExit as err:
        if not after_interrupt(err):
            raise
        if isinstance(err.__context__, Terminated):  # a second SIGTERM, which Lightning shut down as a Ctrl-C
            raise Terminated("SIGTERM") from err
        raise KeyboardInterrupt from err
    except OSError as err:
        if err.filename is not None or err.errno not in DISK_FULL:
            raise
        raise OSError(err.errno, err.strerror or str(err), _run_folder(trainer)) from err
    except RuntimeError as err:
        absent = ranks_absent(err)
        if absent is not None:
            # a rank other than 0 found no node 0 there: not started, elsewhere, or ended at once (a --resume of a
            # finished run, in a --out of its own, returns without waiting for the others)
            node_0 = "" if trainer.global_rank == 0 else " (or node 0 had ended: its --out may hold a finished run)"
            raise ExecutionFailed(f"rank {trainer.global_rank}: the run's {trainer.world_size} processes did not all "
                                  f"meet ({absent}): start the command on every machine, with MASTER_ADDR and "
                                  f"MASTER_PORT naming node 0's{node_0}; --timeout sets the wait") from err
        lost = lost_peer(err)
        if lost is None:
            raise
        raise ExecutionFailed(f"rank {trainer.global_rank}: another rank of this run is gone ({lost}); what was saved "
                              "stays, and --resume continues from the last checkpoint") from err
    finally:
        if not finished:
            _close_event_files(trainer)
        if handler is not None and threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGINT, handler)


def ranks_absent(err: BaseException) -> str | None:
    """What the rendezvous of a distributed run said when a rank never came, in one line; ``None`` if it did not.

    Node 0 waits for the others at ``MASTER_ADDR:MASTER_PORT`` and the others connect there, both for the
    strategy's timeout; a machine never started, or pointed at another address or port, ended them with
    ``torch.distributed``'s ``DistStoreError`` ("Timed out after 1801 seconds waiting for clients. 1/2 clients
    joined.") or ``DistNetworkError`` ("The client socket has timed out after 1800000ms while trying to connect
    to (10.0.0.1, 29500)."). :func:`lost_peer` took them for a rank that was gone; none had been there.

    Examples:
        >>> import torch.distributed as dist
        >>> ranks_absent(dist.DistStoreError("Timed out after 11 seconds waiting for clients. 1/2 clients joined."))
        'Timed out after 11 seconds waiting for clients, 1/2 clients joined'
        >>> ranks_absent(RuntimeError("Timed out after 11 seconds waiting for clients")) is None  # not the store's
        True
    """
    import torch.distributed as dist

    if not (dist.is_available() and isinstance(err, (dist.DistStoreError, dist.DistNetworkError))):
        return None
    text = first_line(err)
    if "waiting for clients" not in text and "trying to connect to" not in text:
        return None
    return text.replace(". ", ", ").rstrip(".")


def lost_peer(err: BaseException) -> str | None:
    """What a collective of a distributed run said when another rank died, in one line; ``None`` if it is no such error.

    A rank killed (``kill -9``, out of memory) ended the others in the collective they were in with gloo's
    ``RuntimeError`` (``[.../gloo/transport/tcp/pair.cc:537] Read error [127.0.0.1]:35205: Connection reset by
    peer. This is typically caused by ...``) and its traceback; NCCL's and the process group's own are
    ``torch.distributed.DistError``. The reason is the text after the source location, to its first sentence's end.

    Examples:
        >>> lost_peer(RuntimeError("[/x/gloo/transport/tcp/pair.cc:537] Read error [127.0.0.1]:1: Connection reset by "
        ...                        "peer. This is typically caused by a remote worker hanging"))
        'gloo: Read error [127.0.0.1]:1: Connection reset by peer'
        >>> lost_peer(RuntimeError("mat1 and mat2 shapes cannot be multiplied")) is None
        True
    """
    import torch.distributed as dist

    text = first_line(err)
    backend = "gloo" if "/gloo/" in text else "nccl" if "nccl" in text.lower() else None
    if backend is None and not (dist.is_available() and isinstance(err, dist.DistError)):
        return None
    if text.startswith("[") and "] " in text:  # the C++ source location
        text = text.split("] ", 1)[1]
    text = text.split(". ", 1)[0].rstrip(".")
    return f"{backend}: {text}" if backend else text


#: The ``errno`` of a write that the disk refused: full, over the user's quota, past the largest file it takes.
DISK_FULL = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})


def _run_folder(trainer: L.Trainer) -> str:
    """The folder that ``trainer``'s loggers write in (their common one), else its ``default_root_dir``."""
    import os

    folders = [os.fspath(logger.save_dir) for logger in trainer.loggers if logger.save_dir is not None]
    try:
        return os.path.commonpath(folders) if folders else os.fspath(trainer.default_root_dir)
    except ValueError:  # relative and absolute folders at once
        return folders[0]


class EventFilesClosedAtExit(L.Callback):
    """In a rank that ``multiprocessing`` started (``ddp_spawn``), close the TensorBoard event files as it ends.

    tensorboardX's writer thread waits on a ``multiprocessing.Queue``. At a spawned rank's end ``multiprocessing``
    runs its exit finalizers before the interpreter's ``atexit`` hooks: the queue's (priority 10) has its feeder
    close the queue's reader while the writer thread waits on it, and that thread printed ``OSError: handle is
    closed`` with a traceback after "gnplace: interrupted" (a Ctrl-C of ``pretrain --strategy ddp_spawn``, whose
    ranks end without Lightning's ``finalize``). A finalizer of a higher priority closes the files first.
    """

    #: Runs before ``multiprocessing.Queue``'s exit finalizer, whose priority is 10.
    EXIT_PRIORITY = 20

    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        """Register the closing, in a process that ``multiprocessing`` started."""
        import multiprocessing
        from multiprocessing.util import Finalize

        if multiprocessing.parent_process() is not None:
            Finalize(None, _close_event_files, args=(trainer,), exitpriority=self.EXIT_PRIORITY)


class QuietSpawnedRanks(L.Callback):
    """In the ranks that ``ddp_spawn`` starts, silence Lightning as :func:`quiet_lightning` does in the launcher.

    ``pretrain --strategy ddp_spawn`` printed, from its spawned ranks (rank 0 among them), Lightning's start-up
    banner ("Initializing distributed: GLOBAL_RANK: 1, MEMBER: 2/2", "distributed_backend=gloo"), a
    deprecation warning of its own pytree helper, and one advice per metric to log validation with
    ``sync_dist=True``, where every rank logs the same values (the learner pools them over the ranks itself).
    ``ddp``'s ranks run the command again and silence themselves; a spawned one runs Lightning's code alone, and
    prints its banner before any callback hook is called. The callback is unpickled in each such rank before that,
    and silences the rank then, for the rest of its process (which ends with the run).
    """

    def __init__(self) -> None:
        self.silence_spawned = True  # some state: pickle restores an object without any without __setstate__

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Silence Lightning, in a process that ``multiprocessing`` started (a spawned rank unpickles the trainer)."""
        import multiprocessing

        self.__dict__.update(state)
        # a spawned process unpickles what it is to run before multiprocessing's bootstrap names its parent, while
        # it marks itself as inheriting (multiprocessing.spawn._main)
        if getattr(multiprocessing.current_process(), "_inheriting", False) or multiprocessing.parent_process():
            _silence_lightning()  # never undone: the rank's process ends with the run


def _close_event_files(trainer: L.Trainer) -> None:
    """Close the TensorBoard event files of ``trainer``'s loggers, whatever their last bytes the disk refuses.

    Lightning's ``finalize("failed")`` flushes them and stops at the first write the disk refuses, leaving the
    file open. tensorboardX's ``FileWriter`` registers an exit hook that flushes it again: at the program's end
    it printed ``Exception ignored in atexit callback`` and a traceback, after the run's one-line error. Here
    each writer's worker thread is stopped, its file closed (a file closes even where its last flush fails), and
    the writer marked closed, so that the hook finds nothing to do.
    """
    for logger in trainer.loggers:
        experiment = getattr(logger, "_experiment", None)  # (reading logger.experiment would open one)
        writers = getattr(experiment, "all_writers", None) or {}  # tensorboardX's FileWriters, by folder
        for file_writer in list(writers.values()):
            events = getattr(file_writer, "event_writer", None)
            if events is None or getattr(events, "_closed", True):
                continue
            try:
                events.close()  # flushes first: nothing else where the disk takes the bytes
            except (OSError, ValueError):
                worker = getattr(events, "_worker", None)
                if worker is not None and worker.is_alive():
                    worker.stop()  # writes what is queued into the file's buffer, and ends
                record = getattr(getattr(events, "_ev_writer", None), "_py_recordio_writer", None)
                with contextlib.suppress(OSError, ValueError, AttributeError):
                    record.close()  # type: ignore[union-attr]
                events._closed = True


def _silence_lightning() -> Callable[[], None]:
    """Lightning's loggers at ERROR and its chatty warnings ignored; returns what puts both back.

    Each logger and filter is :mod:`gnplace.quiet`'s, shared with every other use of it in the process.
    """
    stack = contextlib.ExitStack()
    for name in ("lightning.pytorch", "lightning.fabric", "lightning"):
        stack.enter_context(logger_at_error(name))
    stack.enter_context(ignored_warnings(module="lightning"))
    stack.enter_context(ignored_warnings(message=".*does not have many workers.*"))
    return stack.close


_QUIET_LIGHTNING = SharedSetting(_silence_lightning)


def quiet_lightning() -> SharedSetting:
    """Silence Lightning's start-up lines and its advice for training on big datasets, for placers.

    Loggers' levels and warning filters are the process's: threads (and nested uses) inside at once share one
    silencing, set by the first to enter and undone by the last to leave (:class:`~gnplace.workers.SharedSetting`).
    Each saved and restored its own, so two threads' runs that overlapped left Lightning's loggers at ERROR and
    its warnings ignored for good (after two ``ppo`` placements in threads), or let one run's lines out.
    """
    return _QUIET_LIGHTNING


@contextlib.contextmanager
def deterministic_mode_kept() -> Iterator[None]:
    """Run the body (a trainer built and fitted); torch's deterministic-algorithms mode as the caller had it after.

    ``L.Trainer(deterministic=False)`` calls ``torch.use_deterministic_algorithms(False)`` as it is built, for the
    rest of the process: a program that had turned the mode on for its own training (``warn_only`` or not) found it
    off after ``gnplace.pretrain.pretrain``. The run itself still trains with the mode the trainer sets.
    """
    import torch

    def mode() -> tuple[bool, bool]:
        return torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled()

    kept = mode()
    try:
        yield
    finally:
        if mode() != kept:
            torch.use_deterministic_algorithms(kept[0], warn_only=kept[1])


def _overall_first(name: str) -> tuple[int, str]:
    """Sort key of metric names: ``val/best_vs_auto`` before the per-family ``val/best/cifar10``."""
    return name.count("/"), name


def _validates_next(trainer: L.Trainer) -> bool:
    """Whether Lightning validates after the training batch that just ended.

    With ``check_val_every_n_epoch=None`` (pretraining's), every ``val_check_interval`` batches of the run,
    counted across resumes; else at an epoch's last batch, every ``check_val_every_n_epoch`` epochs.
    """
    loop = trainer.fit_loop.epoch_loop
    if not trainer.enable_validation:
        return False
    if trainer.check_val_every_n_epoch is None:
        return (loop.total_batch_idx + 1) % max(int(trainer.val_check_batch or 1), 1) == 0
    return bool(loop.batch_progress.is_last_batch) \
        and (trainer.current_epoch + 1) % max(int(trainer.check_val_every_n_epoch or 1), 1) == 0
