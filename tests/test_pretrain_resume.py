"""Whether a pretraining run resumes: the checks of its ``last.ckpt``, and a folder whose run wrote none yet.

The refusals of a damaged or foreign checkpoint, another config, other data and other placer revisions are tested
through :func:`gnplace.pretrain.pretrain` and the CLI in ``test_pretrain.py``, beside the resumes they stop."""

from __future__ import annotations

import shutil

import pytest

from gnplace.exceptions import InvalidCheckpoint
from gnplace.pretrain_config import load_pretrain_config
from gnplace.pretrain_resume import check_resumable, exported_files, resume_starts_afresh


def test_a_run_resumed_with_another_number_of_processes_is_refused(tiny_config, tiny_run):
    config = load_pretrain_config(tiny_config, ["schedule.iterations=2"])
    last = tiny_run("schedule.iterations=2") / "checkpoints" / "last.ckpt"
    assert check_resumable(last, config, processes=1) == 2
    # each rank draws its own share of the pairs and keeps their state: 2 ranks cannot continue 1's run
    with pytest.raises(InvalidCheckpoint, match=r"a run of 1 process, resumed with 2; resume it with as many"):
        check_resumable(last, config, processes=2)


def test_a_folder_starts_afresh_where_it_holds_no_checkpoint_and_only_the_first_exports_of_this_config(
        tiny_config, tiny_run, tmp_path):
    """What ``--resume`` does there: continue a run with a ``last.ckpt``; start one whose kill came between its
    first validation's exports and its first checkpoint (the same config, longer or not, writes them again)."""
    config = load_pretrain_config(tiny_config, ["schedule.iterations=2"])  # its one validation: iteration 2
    run = tiny_run("schedule.iterations=2")
    assert exported_files(tmp_path / "none") == [] and resume_starts_afresh(tmp_path / "none", config)
    assert exported_files(run) == ["policy.ckpt", "best.ckpt"] and not resume_starts_afresh(run, config)
    killed = tmp_path / "killed"
    killed.mkdir()
    for name in ("policy.ckpt", "best.ckpt"):
        shutil.copy(run / name, killed / name)
    assert resume_starts_afresh(killed, config)
    assert resume_starts_afresh(killed, load_pretrain_config(tiny_config))  # run longer: a change a resume may make
    assert not resume_starts_afresh(killed, load_pretrain_config(tiny_config, ["schedule.iterations=2",
                                                                               "learner.lr=0.5"]))
    (killed / "best.ckpt").write_bytes(b"\x00" * 100)  # unreadable: not this config's
    assert not resume_starts_afresh(killed, config)
