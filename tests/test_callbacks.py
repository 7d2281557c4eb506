"""How runs stop, save and show progress: the callbacks, on Lightning's boring model."""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path
from typing import Any

import lightning as L
import pytest
import torch
from lightning.pytorch.demos.boring_classes import BoringModel

from gnplace.callbacks import (
    AtomicCheckpointIO,
    ProgressLines,
    RunProgressBar,
    StopAfter,
    StopAtBudget,
    TimedCheckpoint,
    fit_interruptibly,
    progress_callbacks,
    quiet_lightning,
    single_process_plugins,
)
from gnplace.exceptions import ExecutionFailed, Terminated
from gnplace.seed import seeded_torch
from gnplace.sim.timer import BudgetedTimer
from gnplace.toy import chain_graph, toy_cluster


@pytest.fixture
def default_ctrl_c():
    """Python's own SIGINT handler for the test, whatever the test run inherited: a run started in the
    background (``make test &``, nohup) ignores SIGINT, and the callbacks rightly leave that alone."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


class _CtrlC(L.Callback):
    """Presses Ctrl-C, as Lightning sees it, at the first batch."""

    def on_train_batch_start(self, *args):
        raise KeyboardInterrupt


class _CountingModel(BoringModel):
    """The boring model with the learners' iteration count, which :class:`StopAfter` reads."""

    def __init__(self):
        super().__init__()
        self.iteration = 0

    def training_step(self, batch, batch_idx):
        self.iteration += 1
        return super().training_step(batch, batch_idx)


def _boring_trainer(tmp_path, callbacks, **kw):
    settings = dict(max_steps=2, accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
                    enable_progress_bar=False, enable_model_summary=False, default_root_dir=tmp_path)
    return L.Trainer(**{**settings, **kw}, callbacks=callbacks)


def test_run_progress_bar_titles_an_open_ended_run_by_its_epoch():
    # the stock bar writes "Epoch 3/-2" for max_epochs=-1, which the runs ended by StopAfter use
    assert RunProgressBar()._get_train_description(3).strip() == "Epoch 3"


class _ValidatingModel(_CountingModel):
    """Logs a ``val/...`` result at each validation and a bar metric at each step, as the learners do."""

    def training_step(self, batch, batch_idx):
        self.log("evaluations", float(4 * (self.iteration + 1)), prog_bar=True)
        return super().training_step(batch, batch_idx)

    def validation_step(self, batch, batch_idx):
        self.log("val/best_vs_auto", 0.5)
        self.log("val/best/ptb", 0.25)


def test_progress_lines_write_the_count_time_and_validation_to_stderr_where_no_bar_can_be_drawn(tmp_path, capsys):
    # every_s=0: a line at every batch; a log file shows how far the run is before it ends
    model = _ValidatingModel()
    with quiet_lightning():
        trainer = _boring_trainer(tmp_path, [StopAfter(4), ProgressLines("pretrain", 4, every_s=0)],
                                  max_steps=-1, max_epochs=-1, limit_train_batches=2, limit_val_batches=1,
                                  enable_progress_bar=True)
        fit_interruptibly(trainer, model)
    out, err = capsys.readouterr()
    lines = err.splitlines()
    assert out == "" and lines[0].startswith("pretrain: 1/4 iterations (25%), 0:00 elapsed")
    assert lines[0].endswith("left; evaluations 4")  # the time left from the rate so far, then the bar's metrics
    # after each epoch's validation (two epochs of two batches), its results, the overall one first
    validations = [line for line in lines if "validation" in line]
    assert validations == ["pretrain: validation after 2 iterations: val/best_vs_auto 0.5000, val/best/ptb 0.2500",
                           "pretrain: validation after 4 iterations: val/best_vs_auto 0.5000, val/best/ptb 0.2500"]
    assert lines[-1].startswith("pretrain: 4/4 iterations (100%)") and "left" not in lines[-1]


def test_progress_lines_count_a_logged_metric_and_stay_quiet_within_the_interval(tmp_path, capsys):
    with quiet_lightning():
        trainer = _boring_trainer(tmp_path, [StopAfter(3), ProgressLines("search", 12, count="evaluations",
                                                                         every_s=0)],
                                  max_steps=-1, max_epochs=-1, enable_progress_bar=True, limit_val_batches=0)
        fit_interruptibly(trainer, _ValidatingModel())
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("search: 8/12 evaluations (67%)") and err[-1].startswith("search: 12/12 evaluations")
    with quiet_lightning():  # a run shorter than the interval writes nothing, not even a last line
        trainer = _boring_trainer(tmp_path, [StopAfter(3), ProgressLines("search", 12, count="evaluations")],
                                  max_steps=-1, max_epochs=-1, enable_progress_bar=True, limit_val_batches=0)
        fit_interruptibly(trainer, _ValidatingModel())
    assert capsys.readouterr() == ("", "")


def test_progress_callbacks_draw_a_bar_on_a_terminal_lines_elsewhere_and_nothing_when_off(monkeypatch):
    import sys

    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    monkeypatch.setenv("TERM", "xterm")  # a terminal that draws bars, whatever the runner's
    assert [type(c) for c in progress_callbacks(None, "x", 3)] == [RunProgressBar]
    monkeypatch.setattr(sys.stderr, "isatty", lambda: False, raising=False)
    assert [type(c) for c in progress_callbacks(None, "x", 3)] == [ProgressLines]
    assert [type(c) for c in progress_callbacks(True, "x", 3)] == [RunProgressBar]  # asked for: drawn anyway
    assert progress_callbacks(False, "x", 3) == []


def test_fit_interruptibly_hands_ctrl_c_back_as_keyboard_interrupt(tmp_path, default_ctrl_c):
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    with quiet_lightning():
        trainer = _boring_trainer(tmp_path, [_CtrlC()])
        with pytest.raises(SystemExit):  # Lightning's own answer
            trainer.fit(BoringModel())
    with quiet_lightning():
        with pytest.raises(KeyboardInterrupt):
            fit_interruptibly(_boring_trainer(tmp_path, [_CtrlC()]), BoringModel())
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    with quiet_lightning():  # a run that is not interrupted is untouched
        trainer = _boring_trainer(tmp_path, [])
        fit_interruptibly(trainer, BoringModel())
    assert trainer.global_step == 2


def test_stop_after_ends_an_open_ended_run_at_the_learners_iteration_count(tmp_path):
    model = _CountingModel()
    with quiet_lightning():
        fit_interruptibly(_boring_trainer(tmp_path, [StopAfter(5)], max_steps=-1, max_epochs=-1), model)
    assert model.iteration == 5


def test_stop_at_budget_stops_when_a_batch_no_longer_fits_and_counts_what_a_resumed_run_spent(tmp_path):
    timer = BudgetedTimer(budget=10)
    graph, cluster = chain_graph(3), toy_cluster(2)

    class SpendThree(L.Callback):  # each iteration times three placements
        def on_train_batch_start(self, *args):
            for _ in range(3):
                timer.time(graph, cluster, [0, 0, 0])

    with quiet_lightning():
        trainer = _boring_trainer(tmp_path, [SpendThree(), StopAtBudget(timer, keep=3, spent=lambda: 4)],
                                  max_steps=-1, max_epochs=-1)
        fit_interruptibly(trainer, BoringModel())
    # 4 spent before the checkpoint, then 3 a batch: 7 leaves 3 (go on), 10 leaves 0 (stop)
    assert trainer.global_step == 2 and timer.evaluations == 10


def test_atomic_checkpoint_io_writes_a_whole_file_and_refuses_storage_options(tmp_path):
    path = tmp_path / "sub" / "last.ckpt"
    AtomicCheckpointIO().save_checkpoint({"step": torch.tensor(3)}, path)
    assert torch.load(path, weights_only=True)["step"].item() == 3
    assert [p.name for p in path.parent.iterdir()] == ["last.ckpt"]  # no temporary file left beside it
    with pytest.raises(TypeError, match="storage_options"):
        AtomicCheckpointIO().save_checkpoint({}, path, storage_options={"bucket": "x"})


def test_timed_checkpoint_saves_on_its_interval_and_at_the_end(tmp_path, default_ctrl_c):
    path = tmp_path / "last.ckpt"
    saved_at = []

    class Watch(L.Callback):
        def on_train_batch_end(self, trainer, *args):
            if path.exists():
                saved_at.append((trainer.global_step, torch.load(path, weights_only=False)["global_step"]))
                path.unlink()

    with quiet_lightning():
        trainer = _boring_trainer(tmp_path, [TimedCheckpoint(path, every_s=0.0), Watch()], max_steps=3,
                                  plugins=[AtomicCheckpointIO()])
        fit_interruptibly(trainer, BoringModel())
    assert saved_at == [(1, 1), (2, 2), (3, 3)]  # every iteration, with an interval of zero
    assert torch.load(path, weights_only=False)["global_step"] == 3  # and once more when training ends
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # Ctrl-C given back


def test_a_save_due_at_an_epochs_last_batch_waits_for_its_validation(tmp_path, default_ctrl_c):
    """Else the checkpoint precedes the validation, which a resume skips (a pretraining run's best.ckpt then differs)."""
    events = []

    class Watch(L.Callback):
        def on_validation_end(self, trainer, pl_module):
            events.append(("validated", trainer.global_step))

    def run(extra, **kw):
        events.clear()
        timed = TimedCheckpoint(tmp_path / "last.ckpt", every_s=0.0)
        trainer = _boring_trainer(tmp_path, [Watch(), timed, *extra], limit_train_batches=2, limit_val_batches=1,
                                  num_sanity_val_steps=0, plugins=[AtomicCheckpointIO()], **kw)
        real_save = trainer.save_checkpoint
        trainer.save_checkpoint = lambda *a, **k: (events.append(("saved", trainer.global_step)), real_save(*a, **k))
        with quiet_lightning():
            fit_interruptibly(trainer, BoringModel())
        return timed

    run([], max_steps=4)
    assert events == [("saved", 1), ("validated", 2), ("saved", 2), ("saved", 3), ("validated", 4), ("saved", 4),
                      ("saved", 4)]  # the last at the end of training

    class FirstCtrlC(L.Callback):  # as TimedCheckpoint's handler records a first Ctrl-C, during the epoch's last batch
        def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
            if trainer.global_step == 1:
                next(c for c in trainer.callbacks if isinstance(c, TimedCheckpoint))._interrupted = True

    with pytest.raises(KeyboardInterrupt):
        run([FirstCtrlC()], max_steps=6)
    assert events == [("saved", 1), ("validated", 2), ("saved", 2)]  # validated, saved, then stopped


def test_a_run_with_no_checkpoint_yet_saves_after_its_first_validation(tmp_path, default_ctrl_c):
    """A validation exports files (pretraining's policy.ckpt): a run killed after them but before its first interval
    held them and no last.ckpt, and --resume refused the folder."""
    events = []

    class Watch(L.Callback):
        def on_validation_end(self, trainer, pl_module):
            events.append(("validated", trainer.global_step))

    trainer = _boring_trainer(tmp_path, [Watch(), TimedCheckpoint(tmp_path / "last.ckpt", every_s=3600.0)],
                              limit_train_batches=2, limit_val_batches=1, num_sanity_val_steps=0, max_steps=6,
                              plugins=[AtomicCheckpointIO()])
    real_save = trainer.save_checkpoint
    trainer.save_checkpoint = lambda *a, **k: (events.append(("saved", trainer.global_step)), real_save(*a, **k))
    with quiet_lightning():
        fit_interruptibly(trainer, BoringModel())
    # the first validation saves; the later ones find a checkpoint and wait for the interval; the end saves
    assert events == [("validated", 2), ("saved", 2), ("validated", 4), ("validated", 6), ("saved", 6)]


class _Sigterm(L.Callback):
    """Sends this process ``times`` real SIGTERMs at the start of batch ``at`` (what ``kill`` or a scheduler sends)."""

    def __init__(self, at: int, times: int = 1) -> None:
        self.at, self.times = at, times

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        if trainer.global_step == self.at:
            for _ in range(self.times):
                os.kill(os.getpid(), signal.SIGTERM)


@pytest.fixture
def lightning_sigterm():
    """The process's SIGTERM handler restored after the test (Lightning installs its own during a fit)."""
    previous = signal.getsignal(signal.SIGTERM)
    yield
    signal.signal(signal.SIGTERM, previous)


def test_sigterm_saves_the_iteration_under_way_and_is_raised_as_terminated(tmp_path, default_ctrl_c,
                                                                          lightning_sigterm):
    path = tmp_path / "last.ckpt"
    with quiet_lightning():
        trainer = _boring_trainer(tmp_path, [TimedCheckpoint(path, every_s=3600.0), _Sigterm(at=2)], max_steps=50,
                                  plugins=[AtomicCheckpointIO()])
        with pytest.raises(Terminated):  # not Lightning's SIGTERMException, a SystemExit that would exit 0
            fit_interruptibly(trainer, BoringModel())
    assert torch.load(path, weights_only=False)["global_step"] == 3  # the iteration the signal came in, saved
    assert issubclass(Terminated, KeyboardInterrupt)  # callers that keep their work on Ctrl-C do so here too


def test_a_fit_under_sigterm_as_interrupt_still_saves_the_iteration_under_way(tmp_path, default_ctrl_c,
                                                                          lightning_sigterm):
    """``gnplace evaluate -j 1`` runs a search's fit in its own process, under sigterm_as_interrupt's handler, which
    Lightning composes with its own: it raised in the middle of the iteration that Lightning saves and ends first."""
    from gnplace.workers import sigterm_as_interrupt

    path = tmp_path / "last.ckpt"
    with quiet_lightning(), sigterm_as_interrupt():
        mine = signal.getsignal(signal.SIGTERM)
        trainer = _boring_trainer(tmp_path, [TimedCheckpoint(path, every_s=3600.0), _Sigterm(at=2)], max_steps=50,
                                  plugins=[AtomicCheckpointIO()])
        with pytest.raises(Terminated):
            fit_interruptibly(trainer, BoringModel())
        assert signal.getsignal(signal.SIGTERM) is mine  # set back for the rest of the body
    assert torch.load(path, weights_only=False)["global_step"] == 3  # the iteration the signal came in, saved
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL


def test_a_second_sigterm_stops_at_once_as_a_second_ctrl_c_does(tmp_path, default_ctrl_c, lightning_sigterm):
    # a scheduler that will not wait for the iteration under way
    path = tmp_path / "last.ckpt"
    before = signal.getsignal(signal.SIGTERM)
    with quiet_lightning():
        trainer = _boring_trainer(tmp_path, [TimedCheckpoint(path, every_s=3600.0), _Sigterm(at=2, times=2)], max_steps=50,
                                  plugins=[AtomicCheckpointIO()])
        with pytest.raises(Terminated):
            fit_interruptibly(trainer, BoringModel())
    assert trainer.global_step == 2 and not path.exists()  # the iteration under way was not finished nor saved
    assert signal.getsignal(signal.SIGTERM) == before  # the caller's handler is back


def test_stop_after_runs_no_iteration_for_a_learner_past_its_count(tmp_path):
    # a resumed run that had finished (its policy.ckpt moved away) trained one iteration past its schedule
    model = _CountingModel()
    model.iteration = 4
    with quiet_lightning():
        trainer = _boring_trainer(tmp_path, [StopAfter(3)], max_steps=-1, max_epochs=-1)
        trainer.fit(model)
    assert trainer.global_step == 0 and model.iteration == 4


def test_removing_ddp_spawns_weights_hand_over_removes_its_temporary_folder(tmp_path):
    """The ranks of ddp_spawn return their weights in ``mkdtemp()/.temp.ckpt``: the folder went with the file."""
    import tempfile

    handover = Path(tempfile.mkdtemp(dir=tmp_path)) / ".temp.ckpt"  # as Lightning's spawn launcher makes it
    io = AtomicCheckpointIO()
    io.save_checkpoint({"step": torch.tensor(3)}, handover)
    io.remove_checkpoint(handover)
    assert list(tmp_path.iterdir()) == []  # an empty tmp* folder was left in the temporary folder at every run
    kept = tmp_path / "checkpoints" / "last.ckpt"  # any other checkpoint's folder stays, even empty
    io.save_checkpoint({}, kept)
    io.remove_checkpoint(kept)
    assert (tmp_path / "checkpoints").is_dir() and not kept.exists()
    crowded = tmp_path / "shared" / ".temp.ckpt"  # nor is a folder removed that holds anything else
    io.save_checkpoint({}, crowded)
    (tmp_path / "shared" / "other").write_text("x")
    io.remove_checkpoint(crowded)
    assert sorted(p.name for p in (tmp_path / "shared").iterdir()) == ["other"]


def test_a_sigterm_in_a_run_of_several_processes_makes_no_collective_call(tmp_path, default_ctrl_c, lightning_sigterm):
    """Lightning 2.6's handler broadcast from inside the signal handler, while the other ranks were in another
    collective: a ``ddp`` pretraining sent SIGTERM hung until the process group's timeout. The flag is noted, not
    passed on to the launcher's ranks (a SIGTERM to the group then reached them twice and stopped them at once);
    the ranks learn it at their next batch's broadcast."""
    from types import SimpleNamespace

    def lightnings_handler(signum, frame):
        raise AssertionError("Lightning's handler (a broadcast inside a signal handler) was called")

    signal.signal(signal.SIGTERM, lightnings_handler)
    killed = []
    connector = SimpleNamespace(received_sigterm=False)

    class Trainer:  # what the handler reads of a Lightning trainer of two processes
        global_rank, world_size, _signal_connector = 0, 2, connector
        strategy = SimpleNamespace(launcher=SimpleNamespace(kill=killed.append))

        @property
        def received_sigterm(self):
            return self._signal_connector.received_sigterm

    trainer = Trainer()
    callback = TimedCheckpoint(tmp_path / "last.ckpt", every_s=3600.0)
    callback.on_train_start(trainer, None)
    handler = signal.getsignal(signal.SIGTERM)
    handler(signal.SIGTERM, None)
    assert connector.received_sigterm and killed == []
    with pytest.raises(Terminated):  # a second SIGTERM stops at once
        handler(signal.SIGTERM, None)
    trainer.world_size = 1  # one process: Lightning's own handler notes it
    connector.received_sigterm = False
    with pytest.raises(AssertionError, match="Lightning's handler"):
        handler(signal.SIGTERM, None)


def test_runs_overlapping_in_threads_leave_lightnings_loggers_and_warnings_as_they_were():
    """Two threads' runs, the first leaving while the second runs: each restored what it had saved, so the second
    put back the first's ERROR and its ignore filters, for good (Lightning's lines and warnings hidden after two
    ``ppo`` placements in threads), and the second ran unsilenced once the first had left."""
    import logging
    import warnings

    logger = logging.getLogger("lightning.pytorch")
    level, filters = logger.level, list(warnings.filters)
    first, second = quiet_lightning(), quiet_lightning()
    first.__enter__()
    second.__enter__()  # (another thread's run starts)
    first.__exit__(None, None, None)
    assert logger.level == logging.ERROR  # the second run is still silenced
    second.__exit__(None, None, None)
    assert logger.level == level and warnings.filters == filters


def test_run_progress_bar_draws_on_stderr_and_leaves_stdout_to_the_program(tmp_path, capsys):
    # Lightning's bar drew on stdout: `gnplace finetune ... > out.txt` found the bar's last frame in out.txt
    import rich

    model = _ValidatingModel()
    with quiet_lightning():
        trainer = _boring_trainer(tmp_path, [StopAfter(2), RunProgressBar()], max_steps=-1, max_epochs=-1,
                                  limit_train_batches=2, limit_val_batches=0, enable_progress_bar=True)
        fit_interruptibly(trainer, model)
    rich.print("after")
    out, err = capsys.readouterr()
    assert "Epoch" not in out and "Epoch 0" in err
    assert out == "after\n"  # rich's console is stdout's again


def test_run_progress_bar_gives_back_rich_console_as_the_caller_configured_it(tmp_path, capsys):
    """The bar's end put a plain console in place of rich's global one: a program's width and settings were lost."""
    import rich

    rich.reconfigure(width=33, soft_wrap=True)
    try:
        with quiet_lightning():
            trainer = _boring_trainer(tmp_path, [StopAfter(2), RunProgressBar()], max_steps=-1, max_epochs=-1,
                                      limit_train_batches=2, limit_val_batches=0, enable_progress_bar=True)
            fit_interruptibly(trainer, _ValidatingModel())
        console = rich.get_console()
        assert (console.width, console.soft_wrap, console.stderr) == (33, True, False)
    finally:
        rich.reconfigure()


def test_run_progress_bar_gives_back_rich_console_after_a_ctrl_c(tmp_path, default_ctrl_c, capsys):
    """Lightning calls no callback's ``teardown`` after an error: rich's console stayed the bar's, on stderr."""
    import rich

    rich.reconfigure(width=33)
    try:
        with quiet_lightning(), pytest.raises(KeyboardInterrupt):
            fit_interruptibly(_boring_trainer(tmp_path, [_CtrlC(), RunProgressBar()], enable_progress_bar=True),
                              BoringModel())
        console = rich.get_console()
        assert (console.width, console.stderr) == (33, False)
    finally:
        rich.reconfigure()


def test_with_stderr_closed_a_sigterms_message_goes_nowhere_not_to_stdout(tmp_path, default_ctrl_c, lightning_sigterm,
                                                                         capsys, monkeypatch):
    # `2>&-`: print(file=None) printed "SIGTERM: stopping after this iteration" into stdout, a --json document
    path = tmp_path / "last.ckpt"
    with quiet_lightning():
        trainer = _boring_trainer(tmp_path, [TimedCheckpoint(path, every_s=3600.0), _Sigterm(at=2)], max_steps=50,
                                  plugins=[AtomicCheckpointIO()])
        monkeypatch.setattr("sys.stderr", None)
        with pytest.raises(Terminated):
            fit_interruptibly(trainer, BoringModel())
    monkeypatch.undo()
    assert "stopping after this iteration" not in capsys.readouterr().out


def test_single_process_plugins_make_a_trainer_that_reads_no_slurm_variables(tmp_path, monkeypatch):
    """Lightning's SLURM detection raised a RuntimeError for ``--ntasks=2`` in a trainer of one process."""
    from lightning.fabric.plugins.environments import LightningEnvironment

    monkeypatch.setenv("SLURM_NTASKS", "2")
    monkeypatch.setenv("SLURM_JOB_ID", "5")
    monkeypatch.delenv("SLURM_NTASKS_PER_NODE", raising=False)
    monkeypatch.delenv("SLURM_JOB_NAME", raising=False)
    with pytest.raises(RuntimeError, match="SLURM"):  # what Lightning does without them
        L.Trainer(accelerator="cpu", devices=1, logger=False, default_root_dir=tmp_path)
    plugins = single_process_plugins()
    assert isinstance(plugins[0], AtomicCheckpointIO) and isinstance(plugins[1], LightningEnvironment)
    trainer = L.Trainer(accelerator="cpu", devices=1, logger=False, default_root_dir=tmp_path, max_steps=1,
                        enable_progress_bar=False, enable_model_summary=False, plugins=plugins)
    trainer.fit(BoringModel())
    assert trainer.global_step == 1


def test_deterministic_mode_kept_gives_back_the_mode_a_trainer_turns_off(tmp_path):
    from gnplace.callbacks import deterministic_mode_kept

    torch.use_deterministic_algorithms(True, warn_only=True)
    try:
        with deterministic_mode_kept():
            _boring_trainer(tmp_path, [], deterministic=False)
            assert not torch.are_deterministic_algorithms_enabled()  # the trainer's, while it runs
        assert torch.are_deterministic_algorithms_enabled() and torch.is_deterministic_algorithms_warn_only_enabled()
    finally:
        torch.use_deterministic_algorithms(False)


class _LoggingModel(BoringModel):
    """The boring model, logging its loss every step."""

    def training_step(self, batch, batch_idx):
        out = super().training_step(batch, batch_idx)
        self.log("loss", out["loss"])
        return out


def test_a_disk_that_fills_up_under_the_logs_names_the_runs_folder_and_closes_the_event_files(tmp_path, monkeypatch):
    import errno

    import tensorboardX.record_writer
    import tensorboardX.writer
    from lightning.pytorch.loggers import TensorBoardLogger

    exit_hooks = []  # tensorboardX's FileWriter registers one that closes its event file as the program ends
    monkeypatch.setattr(tensorboardX.writer.atexit, "register", exit_hooks.append)

    def full(self):
        raise OSError(errno.ENOSPC, "No space left on device")  # a file object's flush names no file

    monkeypatch.setattr(tensorboardX.record_writer.RecordWriter, "flush", full)
    trainer = _boring_trainer(tmp_path / "run", [], logger=TensorBoardLogger(tmp_path / "run", name="tensorboard"),
                              log_every_n_steps=1)
    with pytest.raises(OSError) as caught:
        fit_interruptibly(trainer, _LoggingModel())
    assert (caught.value.errno, caught.value.filename) == (errno.ENOSPC, str(tmp_path / "run"))
    assert exit_hooks
    for hook in exit_hooks:
        hook()  # raised the OSError again, which Python printed as a traceback at exit


_GLOO_RESET = ("[/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:537] Read error [127.0.0.1]:35205: "
               "Connection reset by peer. This is typically caused by a remote worker hanging or bugs in the "
               "application. Check the logs of the remote worker before reporting an error. GLHF!")


@pytest.mark.parametrize(("error", "reported"), [
    (RuntimeError(_GLOO_RESET), "gloo: Read error [127.0.0.1]:35205: Connection reset by peer"),
    (torch.distributed.DistBackendError("NCCL communicator was aborted on rank 1. Original reason: x"),
     "nccl: NCCL communicator was aborted on rank 1"),
])
def test_a_rank_that_died_ends_the_others_in_one_line(tmp_path, error, reported):
    """kill -9 of a rank of pretrain --devices 2 --strategy ddp: the other printed gloo's traceback, status 1."""

    class PeerGone(L.Callback):
        def on_train_batch_start(self, *args):
            raise error

    with quiet_lightning(), pytest.raises(ExecutionFailed) as caught:
        fit_interruptibly(_boring_trainer(tmp_path, [PeerGone()]), BoringModel())
    assert str(caught.value) == (f"rank 0: another rank of this run is gone ({reported}); what was saved stays, and "
                                 "--resume continues from the last checkpoint")


@pytest.mark.parametrize(("rank", "error", "reported"), [
    (0, torch.distributed.DistStoreError("Timed out after 61 seconds waiting for clients. 1/2 clients joined."),
     "Timed out after 61 seconds waiting for clients, 1/2 clients joined"),
    (1, torch.distributed.DistNetworkError("The client socket has timed out after 60000ms while trying to connect to "
                                           "(10.0.0.1, 29500)."),
     "The client socket has timed out after 60000ms while trying to connect to (10.0.0.1, 29500)"),
])
def test_a_rank_that_never_came_is_named_so_not_as_a_rank_that_is_gone(tmp_path, monkeypatch, rank, error, reported):
    """Node 0 of a two-node run started alone ended, after the timeout, with 'another rank of this run is gone'."""
    class NeverCame(L.Callback):
        def on_train_batch_start(self, *args):
            raise error

    monkeypatch.setattr(L.Trainer, "global_rank", property(lambda self: rank))  # as the rank of another machine
    with quiet_lightning(), pytest.raises(ExecutionFailed) as caught:
        fit_interruptibly(_boring_trainer(tmp_path, [NeverCame()]), BoringModel())
    hint = "" if rank == 0 else " (or node 0 had ended: its --out may hold a finished run)"
    assert str(caught.value) == (f"rank {rank}: the run's 1 processes did not all meet ({reported}): start the command "
                                 f"on every machine, with MASTER_ADDR and MASTER_PORT naming node 0's{hint}; --timeout "
                                 "sets the wait")


def test_another_runtime_error_is_not_taken_for_a_lost_rank(tmp_path):
    class Broken(L.Callback):
        def on_train_batch_start(self, *args):
            raise RuntimeError("mat1 and mat2 shapes cannot be multiplied (2x3 and 4x5)")

    with quiet_lightning(), pytest.raises(RuntimeError, match="mat1 and mat2"):
        fit_interruptibly(_boring_trainer(tmp_path, [Broken()]), BoringModel())


_SPAWNED_RANK = """
import multiprocessing, sys, types

def rank(folder, close):
    from lightning.pytorch.loggers import TensorBoardLogger
    from gnplace.callbacks import EventFilesClosedAtExit
    logger = TensorBoardLogger(folder, name="tb")
    logger.log_metrics({"x": 1.0}, step=0)  # the writer's thread now waits on its queue
    if close:
        EventFilesClosedAtExit().setup(types.SimpleNamespace(loggers=[logger]), None, "fit")

if __name__ == "__main__":
    p = multiprocessing.get_context("spawn").Process(target=rank, args=(sys.argv[1], sys.argv[2] == "1"))
    p.start()
    p.join()
    print("exit", p.exitcode)
"""


def test_a_spawned_rank_ends_with_its_event_files_closed(tmp_path):
    """A ddp_spawn rank that ended without Lightning's finalize (a Ctrl-C) printed tensorboardX's writer thread's
    'OSError: handle is closed' traceback: multiprocessing's exit finalizers closed its queue under it."""
    import subprocess
    import sys

    script = tmp_path / "rank.py"
    script.write_text(_SPAWNED_RANK)
    root = Path(__file__).resolve().parents[1]
    done = subprocess.run([sys.executable, str(script), str(tmp_path / "logs"), "1"], capture_output=True,
                          text=True, timeout=120, cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])})
    assert done.stdout.strip() == "exit 0"
    # (without the callback, `rank.py LOGS 0`, its stderr holds the traceback: 'OSError: handle is closed')
    assert "Traceback" not in done.stderr and "handle is closed" not in done.stderr, done.stderr[-2000:]


_UNPICKLED_IN_A_RANK = """
import logging, multiprocessing, pickle, sys

def rank(callback, queue):
    queue.put(logging.getLogger("lightning.pytorch").getEffectiveLevel())

if __name__ == "__main__":
    from gnplace.callbacks import QuietSpawnedRanks
    context = multiprocessing.get_context("spawn")
    queue = context.SimpleQueue()
    for callback in (None, QuietSpawnedRanks()):  # a rank given none first, before the launcher made one
        p = context.Process(target=rank, args=(callback, queue))
        p.start()
        p.join()
    pickle.loads(pickle.dumps(QuietSpawnedRanks()))  # in the launcher: nothing silenced
    print(queue.get(), queue.get(), logging.getLogger("lightning.pytorch").getEffectiveLevel())
"""


def test_a_spawned_rank_is_silenced_as_it_unpickles_the_trainer(tmp_path):
    """The ranks of ``pretrain --strategy ddp_spawn`` printed Lightning's banner ("Initializing distributed:
    GLOBAL_RANK: 1, MEMBER: 2/2"), a deprecation warning of its own and advice on sync_dist: they run Lightning's
    code alone, and the banner comes before any callback hook. The callback silences a rank as it is unpickled.

    One launcher spawns both ranks (each a process of its own, as a launcher's of two runs was): its start-up,
    Lightning's import, was most of the test's time."""
    import logging
    import subprocess
    import sys

    script = tmp_path / "rank.py"
    script.write_text(_UNPICKLED_IN_A_RANK)
    root = Path(__file__).resolve().parents[1]
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])})
    assert done.returncode == 0, done.stderr[-2000:]
    without, rank, launcher = (int(level) for level in done.stdout.split())
    assert rank == logging.ERROR and launcher < logging.ERROR
    assert without < logging.ERROR  # a rank given none prints Lightning's lines


class _WaitsInSanityCheck(BoringModel):
    """Marks ``checking`` as its sanity check's validation step runs, then waits for ``go`` (at most 60 s).

    Its weights and data are drawn as it is made, and its loaders draw from a generator of their own: its fit
    draws nothing from torch's global generator.
    """

    def __init__(self, checking: threading.Event, go: threading.Event) -> None:
        super().__init__()
        self.checking, self.go = checking, go
        self.data = torch.randn(4, 32)

    def train_dataloader(self) -> Any:
        return torch.utils.data.DataLoader(self.data, batch_size=2, generator=torch.Generator().manual_seed(0))

    def val_dataloader(self) -> Any:
        return self.train_dataloader()

    def validation_step(self, batch: Any, batch_idx: int) -> Any:
        if self.trainer.sanity_checking:
            self.checking.set()
            assert self.go.wait(60)
        return super().validation_step(batch, batch_idx)


class _StartsInside(L.Callback):
    """Holds the fit at its start until ``inside`` is set (at most 60 s)."""

    def __init__(self, inside: threading.Event) -> None:
        self.inside = inside

    def on_fit_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        assert self.inside.wait(60)


def test_a_fit_in_one_thread_leaves_another_threads_seeding_of_torchs_generator_alone(tmp_path):
    """Lightning saves the generators before its sanity check and restores them after: a fit that did so while
    another thread's seeded_torch body ran (a placer drawing its initial weights) restored that body's seeded state
    after the body had put the caller's back, and ppo placements in threads left torch's generator seeded. The
    seeding thread waits for the fit's sanity check at most 3 s: with the fix the check waits for it instead."""
    inside, checking, seeded_left = threading.Event(), threading.Event(), threading.Event()
    model = _WaitsInSanityCheck(checking, seeded_left)
    before = torch.random.get_rng_state()
    errors: list[BaseException] = []

    def seeding() -> None:
        with seeded_torch(7):
            inside.set()
            checking.wait(3)  # (set only without the fix)
        seeded_left.set()

    def fit() -> None:
        try:
            trainer = L.Trainer(max_steps=1, limit_val_batches=1, num_sanity_val_steps=1, logger=False,
                                enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                                default_root_dir=tmp_path, callbacks=[_StartsInside(inside)])
            fit_interruptibly(trainer, model)
        except BaseException as err:  # noqa: BLE001 - the main thread raises it
            errors.append(err)

    threads = [threading.Thread(target=seeding), threading.Thread(target=fit)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not errors
    assert torch.equal(torch.random.get_rng_state(), before)


def test_a_run_progress_bar_counting_evaluations_counts_them_to_the_budget_and_shows_whole_numbers(tmp_path):
    """A search's bar counted iterations against four times what a budget of all-new batches takes (a
    300-evaluation run ended at 20 of 80) and showed 'evaluations: 66.000' and 'v_num: 0.000'."""
    bar = RunProgressBar(total=8, count="evaluations")
    seen: dict = {}

    class Read(L.Callback):  # before the bar in the list: reads its task before the bar stops it
        def on_train_end(self, trainer, pl_module):
            task = bar.progress.tasks[bar.train_progress_bar_id]
            seen.update(completed=task.completed, total=task.total, description=task.description,
                        metrics=bar.get_metrics(trainer, pl_module))

    with quiet_lightning():
        trainer = _boring_trainer(tmp_path, [StopAfter(2), Read(), bar], max_steps=-1, max_epochs=-1,
                                  limit_train_batches=50, limit_val_batches=0, enable_progress_bar=True,
                                  logger=L.pytorch.loggers.CSVLogger(tmp_path))  # (a logger: Lightning's v_num)
        fit_interruptibly(trainer, _ValidatingModel())
    assert seen["completed"] == 8 and seen["total"] == 8  # 4 evaluations an iteration, two iterations
    assert "evaluations" in seen["description"] and "Epoch" not in seen["description"]
    assert seen["metrics"] == {"evaluations": 8}
    plain = RunProgressBar()  # an open-ended run counts its batches, titled by its epoch, as before
    assert plain.count_total is None and plain._get_train_description(3).strip() == "Epoch 3"


def test_a_full_disk_at_the_last_save_of_a_finished_run_is_a_warning_and_keeps_the_checkpoint_before(
        tmp_path, default_ctrl_c, monkeypatch):
    """The run is over and its result in memory: a fine-tuning's search was lost with it (placement.json unwritten)."""
    import errno

    path = tmp_path / "last.ckpt"
    real_save = AtomicCheckpointIO.save_checkpoint

    def full_at_the_end(self, checkpoint, filepath, storage_options=None):
        if checkpoint["global_step"] == 3:
            raise OSError(errno.ENOSPC, "No space left on device")
        real_save(self, checkpoint, filepath, storage_options)

    class SaveAtStepTwo(L.Callback):
        def on_train_batch_end(self, trainer, *args):
            if trainer.global_step == 2:
                trainer.save_checkpoint(path, weights_only=False)

    monkeypatch.setattr(AtomicCheckpointIO, "save_checkpoint", full_at_the_end)
    with quiet_lightning(), pytest.warns(UserWarning, match=r"last\.ckpt: the finished run's last checkpoint could "
                                                            r"not be written \(No space left on device\); the one "
                                                            r"before is kept"):
        trainer = _boring_trainer(tmp_path, [TimedCheckpoint(path, every_s=3600.0), SaveAtStepTwo()], max_steps=3,
                                  plugins=[AtomicCheckpointIO()])
        fit_interruptibly(trainer, BoringModel())
    assert trainer.global_step == 3
    assert torch.load(path, weights_only=False)["global_step"] == 2  # the one before, whole
    assert list(tmp_path.glob("*.tmp*")) == []


def test_progress_lines_end_on_a_last_line_within_the_interval_of_the_one_before(tmp_path, capsys):
    """A run that wrote a line ends on one at its last count, however soon after the line before."""
    import math

    lines = ProgressLines("pretrain", 4, every_s=0)

    class QuietAfterTheFirstLine(L.Callback):
        def on_train_batch_end(self, *args):
            lines._line.every_s = math.inf  # (set after the first batch's line)

    with quiet_lightning():
        trainer = _boring_trainer(tmp_path, [StopAfter(4), lines, QuietAfterTheFirstLine()], max_steps=-1,
                                  max_epochs=-1, limit_val_batches=0, enable_progress_bar=True)
        fit_interruptibly(trainer, _CountingModel())
    written = capsys.readouterr().err.splitlines()
    assert [line.split(",")[0] for line in written] == ["pretrain: 1/4 iterations (25%)",
                                                        "pretrain: 4/4 iterations (100%)"]


def test_a_full_disk_at_the_last_save_of_a_run_of_several_processes_is_raised(tmp_path):
    """Rank 0 alone would go on past the barrier the other ranks wait at after a save: the run ends on the error."""
    import errno
    from types import SimpleNamespace

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    with pytest.raises(OSError, match="No space left on device"):
        TimedCheckpoint(tmp_path / "last.ckpt", 60.0).on_train_end(SimpleNamespace(world_size=2, save_checkpoint=full),
                                                                   BoringModel())


def test_a_run_progress_bar_of_iterations_is_titled_by_its_epoch_whatever_its_total():
    """Pretraining's bar counts iterations to a total (progress_callbacks(True, "pretrain", 300)): its title is the
    epoch's; a bar counting a metric is titled by that metric."""
    assert RunProgressBar(300)._get_train_description(3).strip() == "Epoch 3"
    assert RunProgressBar(300, "evaluations")._get_train_description(3).strip() == "evaluations"


def test_a_first_ctrl_c_mid_epoch_saves_the_iteration_under_way_and_stops(tmp_path, default_ctrl_c):
    """No validation follows that batch: it is saved at its end, and the run stops as Ctrl-C stops it."""
    timed = TimedCheckpoint(tmp_path / "last.ckpt", every_s=3600.0)

    class FirstCtrlC(L.Callback):  # as TimedCheckpoint's handler records a first Ctrl-C, in the first batch of two
        def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
            timed._interrupted = True

    trainer = _boring_trainer(tmp_path, [timed, FirstCtrlC()], max_steps=6, limit_train_batches=2,
                              limit_val_batches=1, num_sanity_val_steps=0, plugins=[AtomicCheckpointIO()])
    with quiet_lightning(), pytest.raises(KeyboardInterrupt):
        fit_interruptibly(trainer, BoringModel())
    assert trainer.global_step == 1 and torch.load(tmp_path / "last.ckpt", weights_only=False)["global_step"] == 1


def test_a_sigterm_between_iterations_saves_the_run_unless_its_last_batch_saved_it(tmp_path):
    """Lightning raises its SIGTERMException where it notes the signal between two batches: no batch's end saw it."""
    from types import SimpleNamespace

    from lightning.pytorch.utilities.exceptions import SIGTERMException

    saved = []
    trainer = SimpleNamespace(save_checkpoint=lambda path, weights_only: saved.append(path))
    timed = TimedCheckpoint(tmp_path / "last.ckpt", 60.0)
    timed.on_exception(trainer, BoringModel(), SIGTERMException())
    assert saved == [tmp_path / "last.ckpt"]
    timed.on_exception(trainer, BoringModel(), KeyboardInterrupt())  # a Ctrl-C at once: the last checkpoint stands
    timed._saved_terminated = True  # the batch that noted the SIGTERM saved it
    timed.on_exception(trainer, BoringModel(), SIGTERMException())
    assert saved == [tmp_path / "last.ckpt"]


def test_validation_follows_every_val_check_interval_batches_of_the_run_where_epochs_do_not_pace_it():
    """Pretraining's trainers (check_val_every_n_epoch=None) validate after batches 2, 4, ... of the whole run."""
    from types import SimpleNamespace

    from gnplace.callbacks import _validates_next

    def trainer(batch_index, enabled=True):
        loop = SimpleNamespace(epoch_loop=SimpleNamespace(total_batch_idx=batch_index))
        return SimpleNamespace(fit_loop=loop, enable_validation=enabled, check_val_every_n_epoch=None,
                               val_check_batch=2)

    assert [_validates_next(trainer(index)) for index in range(5)] == [False, True, False, True, False]
    assert not _validates_next(trainer(1, enabled=False))


def test_a_run_progress_bar_counting_past_its_total_stops_at_the_total(tmp_path):
    """A search's last batch may take its count past the total the bar was given: the bar ends full, not past it."""
    bar = RunProgressBar(total=6, count="evaluations")
    seen: dict = {}

    class Read(L.Callback):  # before the bar in the list: reads its task before the bar stops it
        def on_train_end(self, trainer, pl_module):
            task = bar.progress.tasks[bar.train_progress_bar_id]
            seen.update(completed=task.completed, total=task.total)

    with quiet_lightning():
        trainer = _boring_trainer(tmp_path, [StopAfter(2), Read(), bar], max_steps=-1, max_epochs=-1,
                                  limit_train_batches=50, limit_val_batches=0, enable_progress_bar=True)
        fit_interruptibly(trainer, _ValidatingModel())
    assert seen == {"completed": 6, "total": 6}  # 8 evaluations counted
