"""Pretraining's own callbacks: the policy exported (``policy.ckpt``, ``best.ckpt``), and the ranks of a run of
several processes kept one run (resumed together, on one thread each, ended with their launcher, their digests)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from gnplace.exceptions import InvalidCheckpoint
from gnplace.policy.checkpoint import load_policy
from gnplace.pretrain import pretrain
from gnplace.pretrain_callbacks import ExportPolicy, RankDigest, check_resumed_together
from gnplace.pretrain_config import PretrainConfig, load_pretrain_config

ROOT = Path(__file__).resolve().parents[1]


def test_best_ckpt_is_chosen_by_the_best_of_the_samples_where_validation_draws_them(tmp_path):
    """The module docstring said validation logs the greedy placements' ``val/greedy_vs_auto`` and best.ckpt follows
    "the held-out geometric mean"; where validation draws ``learner.val_samples`` (the shipped recipe's 32),
    ``val/best_vs_auto`` chooses it, which neither it nor ``on_validation_end``'s docstring named."""
    from types import SimpleNamespace

    import gnplace.pretrain
    from gnplace.policy.gnn import PlacementPolicy

    exporter = ExportPolicy(tmp_path / "policy.ckpt", PretrainConfig())
    trainer = SimpleNamespace(sanity_checking=False, global_rank=0, world_size=1)
    for iteration, greedy, best in ((50, 0.95, 0.93), (100, 0.94, 0.97)):  # greedy better later, the samples' worse
        module = SimpleNamespace(policy=PlacementPolicy(), iteration=iteration,
                                 last_validation={"val/greedy_vs_auto": greedy, "val/best_vs_auto": best})
        exporter.on_validation_end(trainer, module)
    assert exporter.best_score == 0.93 and load_policy(tmp_path / "best.ckpt")[1]["iterations"] == 50
    doc = " ".join((gnplace.pretrain.__doc__ or "").split())
    assert "``OUT/best.ckpt`` whenever the held-out geometric mean improves (``val/best_vs_auto`` where" in doc
    assert "``val/best_vs_auto``" in (ExportPolicy.on_validation_end.__doc__ or "")


def test_ranks_that_resumed_from_other_checkpoints_than_rank_0s_are_refused():
    """A rank resuming from nothing or another checkpoint trained on beside rank 0 until their collectives disagreed."""
    check_resumed_together([("a/last.ckpt", "d", 2), ("b/last.ckpt", "d", 2)])  # a copy of rank 0's file
    check_resumed_together([(None, None, 0), (None, None, 0)])  # a new run
    with pytest.raises(InvalidCheckpoint, match=r"^rank 1 starts a new run where rank 0 resumes from a/last.ckpt "
                                                r"\(iteration 2\): .*same --out on a shared filesystem"):
        check_resumed_together([("a/last.ckpt", "d", 2), (None, None, 0)])
    with pytest.raises(InvalidCheckpoint, match=r"^rank 2 resumes from c/last.ckpt \(iteration 1\) where rank 0"):
        check_resumed_together([("a/last.ckpt", "d", 2), ("b/last.ckpt", "d", 2), ("c/last.ckpt", "e", 1)])


def test_a_rank_digest_that_cannot_be_written_leaves_the_one_before(tmp_path, monkeypatch):
    """``ranks/rank<r>.json`` was written in place: a disk that filled up mid-write left half a JSON document."""
    import errno
    import pathlib
    from types import SimpleNamespace

    trainer = SimpleNamespace(world_size=2, global_rank=1)
    torch.manual_seed(0)
    module = SimpleNamespace(policy=torch.nn.Linear(3, 2), iteration=4)
    RankDigest(tmp_path / "ranks").on_train_end(trainer, module)
    before = (tmp_path / "ranks" / "rank1.json").read_bytes()
    assert json.loads(before)["iteration"] == 4

    def half_then_full(self, data, *args, **kwargs):
        with open(self, "wb" if isinstance(data, bytes) else "w") as file:
            file.write(data[:len(data) // 2])
        raise OSError(errno.ENOSPC, "No space left on device", str(self))

    monkeypatch.setattr(pathlib.Path, "write_text", half_then_full)
    monkeypatch.setattr(pathlib.Path, "write_bytes", half_then_full)
    module.iteration = 5
    with pytest.raises(OSError, match="No space left"):
        RankDigest(tmp_path / "ranks").on_train_end(trainer, module)
    assert [p.name for p in (tmp_path / "ranks").iterdir()] == ["rank1.json"]  # no .tmp left either
    assert (tmp_path / "ranks" / "rank1.json").read_bytes() == before


def test_every_rank_trains_on_one_thread_whatever_the_launcher_gives(tiny_config, tmp_path, monkeypatch):
    """Lightning's launcher set cores // ranks threads in each rank (OMP_NUM_THREADS unset), after pretrain set one:
    a two-machine run on 2-core hosts trained on two threads, and its checkpoint differed from one host's."""
    import lightning.fabric.utilities.distributed as distributed

    from gnplace.train import PlacementLearner

    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(distributed, "_num_cpus_available", lambda: 4)  # a 4-core machine: 4 threads for one rank
    seen: list[int] = []
    step = PlacementLearner.training_step

    def counting(self, *args, **kwargs):
        seen.append(torch.get_num_threads())
        return step(self, *args, **kwargs)

    monkeypatch.setattr(PlacementLearner, "training_step", counting)
    before = torch.get_num_threads()
    torch.set_num_threads(3)  # the caller's own count, not the one thread the ranks train on
    try:
        pretrain(load_pretrain_config(tiny_config, ["schedule.iterations=2"]), tmp_path / "run", devices=1,
                 strategy="ddp", progress=False)
        assert seen and set(seen) == {1}
        assert torch.get_num_threads() == 3  # the caller's count back
    finally:
        torch.set_num_threads(before)


_RANK_OF_A_SPAWN = """
import multiprocessing, sys, time

def rank():
    from gnplace.pretrain_callbacks import EndWithLauncher

    EndWithLauncher().setup(None, None, "fit")  # as in every rank that ddp_spawn starts
    print("up", flush=True)
    time.sleep(120)

if __name__ == "__main__":
    process = multiprocessing.get_context("spawn").Process(target=rank)
    process.start()
    print(process.pid, flush=True)
    time.sleep(120)
"""


@pytest.mark.heavy
def test_the_ranks_of_ddp_spawn_end_when_their_launcher_is_killed(tmp_path, process_alive):
    """``kill LAUNCHER`` (SIGTERM) of a ddp_spawn run: its ranks trained on, orphaned, to the end of the run."""
    script = tmp_path / "launcher.py"
    script.write_text(_RANK_OF_A_SPAWN)
    path = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])  # the script's folder is not ROOT
    launcher = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True, cwd=ROOT,
                                env={**os.environ, "PYTHONPATH": path})
    rank = 0
    try:
        assert launcher.stdout is not None
        rank = int(launcher.stdout.readline())
        assert launcher.stdout.readline().strip() == "up"  # the rank watches its launcher from here on
        launcher.send_signal(signal.SIGTERM)
        launcher.wait(timeout=30)
        assert not process_alive(rank, within=10), "the rank outlived its launcher"
    finally:
        launcher.kill()
        launcher.wait()
        if rank and process_alive(rank):
            os.kill(rank, signal.SIGKILL)
